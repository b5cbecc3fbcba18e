"""benchmarks/time_per_study.py: the per-study table and the comparison of two runs' common jobs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from hetfl.pipeline.records import RunRecord

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "time_per_study.py"
spec = importlib.util.spec_from_file_location("time_per_study", SCRIPT)
tps = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tps)


def _run(root: Path, walls: dict[str, float], training: dict[str, float] | None = None) -> Path:
    """A results folder with one Snakemake benchmark file per job (``study/run``: a run's job, or
    ``study/run/seed=S``: a seed's) and a ``run.json`` of wall_time_s per ``study/run/seed=S`` in ``training``."""
    for job, s in walls.items():
        f = root / "benchmarks" / "train" / f"{job}.tsv"
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(f"s\th:m:s\tmax_rss\tcpu_time\n{s}\t0:00:01\t1\t{s / 2}\n")
    for seed_dir, s in (training or {}).items():
        f = root / "runs" / seed_dir / "run.json"
        f.parent.mkdir(parents=True, exist_ok=True)
        study, run, seed = seed_dir.split("/")
        RunRecord(study, run, "fedavg", int(seed.split("=")[1]), "ok", wall_time_s=s).write(f)
    return root


def test_the_table_sums_each_study_and_takes_its_longest_job(tmp_path):
    root = _run(tmp_path, {"a/x/seed=0": 3.0, "a/x/seed=1": 5.0, "b/y/seed=0": 2.0, "c/z": 7.0})
    out = tps.table(root)
    assert out.loc["a", "jobs"] == 2 and out.loc["a", "wall_s"] == 8.0 and out.loc["a", "longest_s"] == 5.0
    assert out.loc["a", "cpu_s"] == 4.0 and out.loc["b", "wall_s"] == 2.0
    assert out.loc["c", "jobs"] == 1 and out.loc["c", "wall_s"] == 7.0  # a run's job (train_jobs: run)
    assert out.loc["a", "est_min"] == pytest.approx(1.1 * 8.0 / 2 / 60)


def test_compare_reads_only_the_common_runs_in_either_kind_of_job(tmp_path):
    now = _run(  # a job per run
        tmp_path / "now",
        {"a/x": 12.0, "b/y": 4.0, "c/z": 50.0},
        {"a/x/seed=0": 4.0, "a/x/seed=1": 6.0, "b/y/seed=0": 3.0, "c/z/seed=0": 40.0},
    )
    before = _run(  # a job per seed
        tmp_path / "before",
        {"a/x/seed=0": 4.0, "a/x/seed=1": 6.0, "b/y/seed=0": 4.0, "d/w/seed=0": 1.0},
        {"a/x/seed=0": 2.0, "a/x/seed=1": 3.0, "b/y/seed=0": 3.0, "d/w/seed=0": 1.0},
    )
    out = tps.compare(now, before)
    assert list(out.index) == ["a", "b", "**all**"]  # c and d are in one suite only
    assert out.loc["a", "runs"] == 1 and out.loc["a", "ratio"] == pytest.approx(1.2)
    assert out.loc["a", "train_ratio"] == pytest.approx(2.0) and out.loc["b", "train_ratio"] == pytest.approx(
        1.0
    )
    assert out.loc["**all**", "runs"] == 2 and out.loc["**all**", "ratio"] == pytest.approx(16.0 / 14.0)
    assert out.loc["**all**", "train_ratio"] == pytest.approx(13.0 / 8.0)


def test_compare_refuses_runs_without_a_common_run(tmp_path):
    now = _run(tmp_path / "now", {"a/x/seed=0": 1.0})
    before = _run(tmp_path / "before", {"b/x/seed=0": 1.0})
    with pytest.raises(ValueError, match="no training run in common"):
        tps.compare(now, before)
    with pytest.raises(FileNotFoundError, match="no training benchmark"):
        tps.compare(now, tmp_path / "empty")
