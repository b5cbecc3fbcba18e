"""Shared fixtures: tiny federations built directly from arrays (no files, no Snakemake).

The tests import the hetfl of this checkout (``src/`` beside ``tests/``), as the workflow does
(``workflow/rules/common.smk``), whatever hetfl is installed: a second clone tests its own code.
"""

from __future__ import annotations

import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
if str(SRC) not in sys.path[:1]:
    sys.path.insert(0, str(SRC))

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from hetfl.engine.federation import ClientSplit, Federation  # noqa: E402
from hetfl.models import build_model, normalize_model_spec  # noqa: E402

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


def tiny_federation(
    model: str = "mlr",
    sizes: tuple[int, ...] = (7, 12, 3, 9),
    sample_shape: tuple[int, ...] = (1, 4, 4),
    classes: int = 3,
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
    split: str = "none",
) -> Federation:
    """Clients with unequal sizes (one smaller than a batch), random inputs and labels."""
    rng = np.random.default_rng(seed)

    def client_split(scale: float):
        xs = [rng.normal(size=(max(1, int(n * scale)), *sample_shape)).astype(np.float32) for n in sizes]
        ys = [rng.integers(0, classes, size=len(x)) for x in xs]
        return ClientSplit(xs, ys, torch.device("cpu"), dtype)

    extra = {"hidden": 5} if model == "dnn" else {"channels": [2, 3], "hidden": 4} if model == "cnn" else {}
    spec = normalize_model_spec({"name": model, "split": split, "adapter_rank": 2, **extra}, "model")
    return Federation(client_split(1.0), client_split(0.5), build_model(spec, sample_shape, classes))


@pytest.fixture
def tiny():
    return tiny_federation
