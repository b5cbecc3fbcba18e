"""Cluster resources of training jobs (hetfl.pipeline.resources) and how the workflow hands them to the SLURM profile:
the floor for small runs, growth with the run's size and the attempt, the cap, a GPU for ``device: cuda``
runs only; a dry run of ``profiles/slurm`` shows them on the training jobs. (That only training jobs are
submitted is checked on a real cluster, tests/test_slurm.py.)"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from hetfl.pipeline import resources
from hetfl.pipeline.config import build_suite
from hetfl.pipeline.resources import train_resources
from tests.conftest import TINY_STUDY
from tests.quadratic_helpers import TINY as QUADRATIC
from tests.workflow_repo import copy_repo

REPO = Path(__file__).resolve().parents[1]
DIGITS_MLR = 8 * 8 * 10 + 10  # digits are 8×8 images of 10 classes


def study(**changes):
    """The tiny study with ``changes`` at the study level, resolved."""
    return build_suite({"studies": {"s": {**TINY_STUDY, **changes}}}).studies["s"]


def test_small_runs_get_the_floor():
    s = study()
    assert resources.run_size(s, "fedavg")[:3] == (4, 6, DIGITS_MLR)
    assert train_resources(s, "fedavg") == resources.TrainResources(
        runtime=resources.RUNTIME_FLOOR, mem_mb=resources.MEM_FLOOR_MB, gpu=0
    )


BIG = {"model": {"name": "dnn", "hidden": 100_000}, "rounds": 2000}  # 7.5 M parameters, 6 clients


def test_runtime_and_memory_grow_with_the_run_and_the_attempt():
    s = study(**BIG)
    rounds, clients, params, _ = resources.run_size(s, "fedavg")
    assert (rounds, clients) == (2000, 6) and params == 64 * 100_000 + 100_000 + 100_000 * 10 + 10
    first = train_resources(s, "fedavg")
    assert first.runtime == math.ceil(rounds * clients * params / resources.WORK_PER_MINUTE) == 901
    states_mb = clients * params * resources.STATE_BYTES / 2**20
    assert first.mem_mb == math.ceil(resources.MEM_BASE_MB + 3 * 1 + states_mb) > resources.MEM_FLOOR_MB
    second = train_resources(s, "fedavg", attempt=2)
    assert second.mem_mb == 2 * first.mem_mb
    assert second.runtime == resources.RUNTIME_CAP  # 2 × 901 minutes, capped
    assert train_resources(s, "fedavg_ft").runtime == resources.RUNTIME_FLOOR  # its own 2 rounds


def test_a_memory_budget_sets_the_memory_a_cpu_job_asks_for():
    unchunked = train_resources(study(**BIG), "fedavg").mem_mb
    budgeted = train_resources(study(memory_budget=1500, **BIG), "fedavg").mem_mb
    assert budgeted == math.ceil(resources.MEM_BASE_MB + 3 * 1 + 1500) < unchunked
    assert train_resources(study(memory_budget=10), "fedavg").mem_mb == resources.MEM_FLOOR_MB


def test_a_gpu_for_cuda_runs_only():
    s = study(device="cuda")
    assert {train_resources(s, run).gpu for run in s.runs} == {1}
    runs = {**TINY_STUDY["runs"], "fedavg": {"algorithm": "fedavg", "device": "cuda"}}
    s = study(runs=runs)
    assert {run: train_resources(s, run).gpu for run in s.runs} == {run: int(run == "fedavg") for run in runs}
    assert study(device="auto").runs["fedavg"].settings["device"] == "auto"
    assert train_resources(study(device="auto"), "fedavg").gpu == 0


def test_cuda_runs_count_faster_and_keep_their_states_off_the_host():
    cpu, gpu = train_resources(study(**BIG), "fedavg"), train_resources(study(device="cuda", **BIG), "fedavg")
    assert (cpu.runtime, gpu.runtime) == (901, 91)
    assert gpu.mem_mb == resources.MEM_FLOOR_MB < cpu.mem_mb


def test_a_generated_problem_counts_a_fixed_size():
    s = build_suite(
        {
            "studies": {
                "q": {
                    "problem": {"name": "ffgg_quadratic", **QUADRATIC},
                    "rounds": 6,
                    "seeds": [0],
                    "runs": {"ffgg": {"algorithm": "ffgg"}},
                }
            }
        }
    ).studies["q"]
    assert resources.run_size(s, "ffgg") == (6, QUADRATIC["num_clients"], resources.PROBLEM_PARAMETERS, 0)
    assert train_resources(s, "ffgg").runtime == resources.RUNTIME_FLOOR


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> str:
    """A dry run of the slurm profile on the tiny study, one run on CUDA, in a copy of the repository."""
    pytest.importorskip("snakemake_executor_plugin_slurm", reason="pip install -e '.[test]' installs it")
    runs = {**TINY_STUDY["runs"], "fedavg": {"algorithm": "fedavg", "device": "cuda"}}
    root = copy_repo(tmp_path_factory.mktemp("dry"), {"studies": {"tiny": {**TINY_STUDY, "runs": runs}}})
    profile = root / "profiles/slurm/config.yaml"  # a site's settings instead of the refused placeholders
    settings = yaml.safe_load(profile.read_text())
    settings["default-resources"].update(slurm_account="lab", slurm_partition="batch")
    settings["set-resources"]["train_gpu"]["slurm_partition"] = "gpus"
    profile.write_text(yaml.safe_dump(settings, sort_keys=False))
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", "-n"],
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_the_slurm_profile_gives_training_jobs_their_resources(dry_run):
    jobs = re.findall(r"\n(?:    )?(?:local)?rule (\w+):\n(.*?)(?=\n\[|\n\n|\n    \[|\Z)", dry_run, re.S)
    trains = {re.search(r"key=tiny/([\w.=+-]+)", body).group(1): (rule, body) for rule, body in jobs
              if rule.startswith("train")}  # fmt: skip
    assert trains.keys() == TINY_STUDY["runs"].keys()  # train_jobs: run, the default: one job per run
    assert not [rule for rule, _ in jobs if rule == "train"]
    group = 8  # profiles/slurm: group-components train_short=8
    for run, (rule, body) in trains.items():
        res = re.search(r"resources: (.*)", body).group(1).split(", ")
        assert "slurm_account=lab" in res, res
        if run == "fedavg":  # device: cuda: the GPU rule, partition and floor, not in a group
            assert rule == "train_gpu_seeds_0_1" and "gpu=1" in res and "slurm_partition=gpus" in res, res
            assert f"runtime={resources.RUNTIME_FLOOR}" in res
        elif run == "fedavg_ft":  # starts from fedavg's GPU job: a job of its own, with the whole floor
            assert rule == "train_seeds_0_1" and "gpu=0" in res and "slurm_partition=batch" in res, res
            assert f"runtime={resources.RUNTIME_FLOOR}" in res
        else:  # short CPU jobs: each at least its share of the floor, in groups
            assert rule == "train_seeds_0_1" and "gpu=0" in res and "slurm_partition=batch" in res, res
            assert f"runtime={-(-resources.RUNTIME_FLOOR // group)}" in res
        assert f"mem_mb={resources.MEM_FLOOR_MB}" in res
    groups = re.findall(r"Group job train_short .*?\n\n(.*?)(?=\n\[|\Z)", dry_run, re.S)
    members = [re.findall(r"key=tiny/([\w.=+-]+)", g) for g in groups]
    assert sorted(run for m in members for run in m) == sorted(set(trains) - {"fedavg", "fedavg_ft"})
    assert len(groups) == 1  # 3 short jobs: one group of up to 8


def test_a_short_job_is_a_cpu_job_within_the_floor():
    s = study()
    assert resources.is_short(s, "fedavg") and resources.is_short(s, "fedavg", seeds=3)
    assert not resources.is_short(study(device="cuda"), "fedavg")  # GPU jobs are never grouped
    assert not resources.is_short(study(**BIG), "fedavg")
    grouped = train_resources(s, "fedavg", group=8)
    assert (
        grouped.runtime == -(-resources.RUNTIME_FLOOR // 8)
        and grouped.mem_mb == train_resources(s, "fedavg").mem_mb
    )
    with pytest.raises(ValueError, match="group must be >= 1"):
        train_resources(s, "fedavg", group=0)
