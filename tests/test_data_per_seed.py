"""A generated dataset drawn per run seed (``seed: run``): each seed's own data, partition and training, and
a fixed seed keeping one draw for every seed (All-for-one's synthetic studies, Philippenko et al. 2025,
Figure 2: the seeds' spread then includes the draw of the optima and samples)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite
from tests.workflow_repo import copy_repo, planned, snakemake

LSR = {
    "dataset": {
        "name": "synthetic_lsr",
        "num_users": 4,
        "dimension": 2,
        "samples_per_user": 40,
        "seed": "run",
    },
    "partition": {"scheme": "natural", "test_fraction": 0.25},
    "model": {"name": "linear", "bias": False},
    "dtype": "float64",
    "rounds": 3,
    "seeds": [3, 5],
    "defaults": {"lr": 0.1, "batch_size": 2, "local_steps": 2},
    "runs": {"local": {"algorithm": "local"}, "fedavg": {"algorithm": "fedavg"}},
}


def suite(study: dict):
    return build_suite({"studies": {"s": study}})


def test_each_run_seed_has_its_own_draw():
    s = suite(LSR).studies["s"]
    (spec3, id3), (spec5, id5) = s.data_of(3), s.data_of(5)
    assert (spec3["seed"], spec5["seed"]) == (3, 5) and id3 != id5
    assert {k: v for k, v in spec3.items() if k != "seed"} == {k: v for k, v in spec5.items() if k != "seed"}
    assert s.dataset["seed"] == "run" and s.dataset_id == id3  # the template; the first seed's id


def test_a_number_keeps_one_draw_for_every_seed():
    s = suite({**LSR, "dataset": {**LSR["dataset"], "seed": 7}}).studies["s"]
    assert s.data_of(3) == s.data_of(5) == (s.dataset, s.dataset_id)
    assert s.dataset["seed"] == 7


def test_seed_run_needs_a_generated_dataset():
    with pytest.raises(ConfigError, match=r"studies\.s\.dataset\.seed"):
        suite({**LSR, "dataset": {"name": "digits", "seed": "run"}, "model": {"name": "mlr"}, "dtype": "float32",
               "partition": {"scheme": "iid", "clients": 4}})  # fmt: skip


def test_the_plan_sizes_a_run_on_per_seed_data():
    """``python -m hetfl.tools.plan`` reads a run's spec, whose dataset says ``seed: run``."""
    import json

    from hetfl.tools.plan_work import job_work

    s = suite(LSR).studies["s"]
    work = job_work(json.loads(s.run_json("local")))
    assert work.rounds == 3 and work.clients == 4


@pytest.mark.workflow
def test_the_workflow_draws_trains_and_partitions_per_seed(tmp_path):
    root = copy_repo(tmp_path / "repo", {"studies": {"s": LSR}})
    jobs = planned(root)
    counts = Counter(rule for rule, _ in jobs)
    assert counts["data"] == 2 and counts["partition"] == 2 and counts["train"] == 4
    assert not [rule for rule, _ in jobs if rule.startswith("train_seeds")]  # one data file per job
    snakemake(root)
    data = sorted((root / "results/data").glob("*/data.npz"))
    assert len(data) == 2
    first, second = (np.load(p) for p in data)
    assert first["x"].shape == second["x"].shape and not np.array_equal(first["x"], second["x"])
