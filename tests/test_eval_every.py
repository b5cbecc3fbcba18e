"""Evaluating less often changes nothing but which rounds are recorded.

Evaluation draws no random numbers and leaves the parameters as they were, so a run evaluated every 3 rounds
records, at rounds 0, 3, 6, exactly the values of the same run evaluated every round, and ends with the
same model. ``config/paper_cpu.yaml`` relies on it: its sensitivity studies are evaluated every 10 rounds
instead of the paper's every round, and their claims read rounds the coarser run records.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from tests.conftest import TINY_STUDY, train_study_run

RUNS = {
    "fedavg": {"algorithm": "fedavg"},
    "pfedme": {"algorithm": "pfedme", "K": 2},
    "perfedavg": {"algorithm": "perfedavg"},
    "ditto": {"algorithm": "ditto"},
    # evaluation adapts: fine-tuning steps on each client's data before the personal scores
    "fedavg_ft": {"algorithm": "fedavg_ft", "finetune_steps": 2},
}


@pytest.mark.parametrize("run", sorted(RUNS))
def test_a_coarser_evaluation_records_the_same_values_and_ends_with_the_same_model(run, tmp_path):
    defaults = dict(TINY_STUDY["defaults"])
    if run == "ditto":  # every client trains every round
        del defaults["clients_per_round"]
    study = {**TINY_STUDY, "rounds": 6, "seeds": [0], "defaults": defaults, "runs": {run: RUNS[run]}}
    every = {}
    for k in (1, 3):
        root = tmp_path / f"every{k}"
        root.mkdir()
        _, paths, _ = train_study_run({**study, "eval_every": k}, run, root)
        every[k] = (pd.read_csv(paths.metrics), torch.load(paths.model, weights_only=True))
    fine, coarse = every[1][0], every[3][0]
    assert sorted(coarse["round"].unique()) == [0, 3, 6]
    assert len(fine) > len(coarse)  # the fine run did record more rounds: the test compares a subset
    kept = fine[fine["round"].isin([0, 3, 6])].reset_index(drop=True)
    pd.testing.assert_frame_equal(kept, coarse.reset_index(drop=True), check_exact=True)
    a, b = every[1][1], every[3][1]
    assert a.keys() == b.keys() and all(torch.equal(a[key], b[key]) for key in a)
