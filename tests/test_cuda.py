"""The CUDA path: every algorithm that trains on client data gives on a GPU what it gives on the CPU, and a
training job on ``device: cuda`` records its device, budget and CUDA peak memory.

Skipped without a CUDA device (CI has none); run on a GPU machine with ``python -m pytest tests/test_cuda.py``.
The algorithms draw every random number on the CPU (``hetfl.engine.rng``), so a float64 run on CUDA follows
the CPU run's minibatches, participation and initial models; only the order of floating-point sums differs
(cuBLAS against OpenBLAS), so the two agree to float64 rounding, not to the byte. Within a memory budget, the
row chunks of a CUDA run agree with its unchunked run likewise (byte-identical chunking is a property of
the CPU kernels: ``tests/test_memory.py``).
"""

from __future__ import annotations

import pytest
import torch

from hetfl.engine.execution import LoopModel
from tests.conftest import TINY_STUDY, train_study_run
from tests.test_memory import EXACT_CASES, FEDERATION_CASES, build, federation, train
from tests.test_memory import _run as run_case

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def _run(case: str, device: str, rows: int | None = None):
    """Case ``case`` of ``tests/test_memory.py`` in float64 on ``device``: ``(evaluations, final state)``."""
    name, _, hp, sampling, make = FEDERATION_CASES[case]
    return run_case(name, hp, sampling, make, torch.float64, rows, device=device)


def _assert_close(got, want, rtol=1e-9, atol=1e-12):
    """Two runs' ``(evaluations, final state)`` agree: the same rows, values within ``rtol``/``atol`` (states
    compared on the CPU, wherever they lie)."""
    (ev, state), (ev0, state0) = got, want
    for g_rows, w_rows in zip(ev, ev0, strict=True):
        for g, w in zip(g_rows, w_rows, strict=True):
            assert g[:-1] == w[:-1], (g, w)  # the row's keys: split, model, client
            assert g[-1] == pytest.approx(w[-1], rel=rtol, abs=atol, nan_ok=True), (g, w)
    assert state.keys() == state0.keys()
    for k in state0:
        torch.testing.assert_close(state[k].cpu(), state0[k].cpu(), rtol=rtol, atol=atol, msg=k)


@pytest.mark.parametrize("case", EXACT_CASES)
def test_every_algorithm_on_cuda_equals_its_cpu_run(case):
    _assert_close(_run(case, "cuda"), _run(case, "cpu"))


@pytest.mark.parametrize("case", ["fedavg-sampled-epoch", "pfedme-epoch", "scaffold-II-sampled"])
def test_row_chunks_on_cuda_equal_the_unchunked_run(case):
    _assert_close(_run(case, "cuda", rows=1), _run(case, "cuda"))


@pytest.mark.parametrize(
    "case", ["fedavg-sampled-epoch", "pfedme-epoch", "fed_norm_sgda_plus-robust-momentum"]
)
def test_the_loop_on_cuda_equals_the_batched_cpu_run(case):
    """``execution: loop`` on CUDA (``hetfl.engine.execution.LoopModel``): cuDNN's and cuBLAS's plain kernels."""
    name, _, hp, sampling, make = FEDERATION_CASES[case]
    fed = federation(make, torch.float64, device="cuda")
    fed.model = LoopModel(fed.model)
    _assert_close(train(fed, build(fed, name, hp, sampling)), _run(case, "cpu"))


def test_a_training_job_on_cuda_records_its_device_budget_and_peak_memory(tmp_path):
    study_cfg = {**TINY_STUDY, "device": "cuda", "runs": {"fedavg": {"algorithm": "fedavg"}}}
    info, _, _ = train_study_run(study_cfg, "fedavg", tmp_path)
    assert info.status == "ok" and info.device.startswith("cuda")
    assert info.cuda_peak_memory_bytes > 0
    free, total = torch.cuda.mem_get_info()
    assert 0 < info.memory["budget_bytes"] <= total
