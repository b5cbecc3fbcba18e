"""Shared fixtures: tiny federations built directly from arrays (no files, no Snakemake).

``tiny_federation`` lives in ``hetfl.testing`` (public, for the tests of a user's own algorithm); it is
re-exported here for the tests that import it from ``tests.conftest``.

The tests import the hetfl of this checkout (``src/`` beside ``tests/``), as the workflow does
(``workflow/rules/common.smk``), whatever hetfl is installed: a second clone tests its own code.
"""

from __future__ import annotations

import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path[:1]:
    sys.path.insert(0, str(SRC))

import pytest  # noqa: E402
import torch  # noqa: E402

from hetfl.testing import tiny_federation  # noqa: E402  (re-exported: tests import it from here)

torch.set_num_threads(1)

# A study small enough for end-to-end tests: 6 digits clients, 4 rounds, 2 seeds; one run diverges.
TINY_STUDY = {
    "dataset": {"name": "digits"},
    "partition": {"scheme": "pathological", "clients": 6, "labels_per_client": 2},
    "model": {"name": "mlr"},
    "rounds": 4,
    "seeds": [0, 1],
    "eval_every": 2,
    "defaults": {"lr": 0.05, "batch_size": 8, "local_steps": 3, "clients_per_round": 3},
    "runs": {
        "fedavg": {"algorithm": "fedavg"},
        "local": {"algorithm": "local"},
        "pfedme": {"algorithm": "pfedme", "K": 2},
        # personal_lr · λ = 10: each inner prox step multiplies θ − w by −9; 9^60 overflows float32 in round 1
        "pfedme_big_lambda": {"algorithm": "pfedme", "K": 20, "lam": 100.0, "personal_lr": 0.1},
        # a second stage: fine-tuned FedAvg starting from the fedavg run's final model
        "fedavg_ft": {"algorithm": "fedavg_ft", "init_from": "fedavg", "rounds": 2, "finetune_steps": 2},
    },
}


@pytest.fixture
def tiny():
    return tiny_federation


def train_study_run(study_cfg: dict, label: str, root: Path, seed: int = 0):
    """One training job of a one-study config, as the workflow runs it: the dataset and the seed's partition
    written to ``root``, then ``hetfl.pipeline.train.train`` into ``root/run``. Returns ``(run record, RunOutputs,
    the loaded Dataset)``."""
    import json

    from hetfl.data import load_dataset, make_partition
    from hetfl.pipeline.config import build_suite
    from hetfl.pipeline.train import RunOutputs, train

    study = build_suite({"studies": {"s": study_cfg}}).studies["s"]
    dataset = load_dataset(study.dataset, root)
    dataset.save(root / "data.npz")
    make_partition(study.partition, dataset, study.partition_seed(seed)).save(root / "part.npz")
    out = root / "run"
    out.mkdir()
    paths = RunOutputs(out / "metrics.csv", out / "clients.csv", out / "run.json", out / "final.pt")
    info = train(json.loads(study.run_json(label)), seed, root / "data.npz", root / "part.npz", paths)
    return info, paths, dataset
