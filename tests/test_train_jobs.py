"""``train_jobs``: one training job per run (its seeds in turn, the default) or one per seed.

What a user relies on: both write byte-identical files (metrics, per-client metrics, final model, artifacts),
with a second stage (``init_from``) and a diverging run among them; a run job is one Snakemake job per run
and carries the rule ``train``'s resources and ``--set-resources train:...``; a run on one seed trains in
rule ``train`` either way; ``--forcerun`` with the rules ``--list-rules`` names forces both; a bad value stops
before any job runs.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from tests.conftest import TINY_STUDY
from tests.workflow_repo import copy_repo, run_jobs, snakemake

pytestmark = pytest.mark.workflow

FILES = ("metrics.csv", "metrics_clients.csv", "final.pt", "artifacts.npz")
# The tiny study (two seeds, a second stage fedavg_ft, a diverging pfedme_big_lambda) and a one-seed study.
CONFIG = {
    "studies": {
        "tiny": TINY_STUDY,
        "single": {**TINY_STUDY, "seeds": [3], "runs": {"fedavg": {"algorithm": "fedavg"}}},
    }
}


def train_rules(repo: Path) -> list[str]:
    """The training rules ``snakemake --list-rules`` names (``train`` and ``train_seeds_<seeds>``), as config/README.md
    tells a user to force every training job."""
    rules = snakemake(repo, "--list-rules").stdout.split()
    return [rule for rule in rules if rule.startswith("train")]


def run_bytes(repo: Path) -> dict[str, bytes]:
    """The bytes of every run file the two studies write, by path."""
    out = {}
    for study, cfg in CONFIG["studies"].items():
        for run in cfg["runs"]:
            for seed in cfg["seeds"]:
                for name in FILES:
                    path = f"results/runs/{study}/{run}/seed={seed}/{name}"
                    out[path] = (repo / path).read_bytes()
    return out


@pytest.fixture(scope="module")
def repos(tmp_path_factory) -> dict[str, Path]:
    """The two studies run to the end once per mode, each in its own copy of the repository."""
    out = {}
    for mode in ("run", "seed"):
        root = copy_repo(tmp_path_factory.mktemp(mode), {**CONFIG, "train_jobs": mode})
        snakemake(root)
        out[mode] = root
    return out


def test_a_job_per_run_writes_what_a_job_per_seed_writes(repos):
    by_run, by_seed = run_bytes(repos["run"]), run_bytes(repos["seed"])
    assert by_run.keys() == by_seed.keys() and len(by_run) == len(FILES) * (5 * 2 + 1)
    assert [path for path in by_run if by_run[path] != by_seed[path]] == []
    for name in ("summary.csv", "claims.csv"):
        path = f"results/tables/tiny/{name}"
        assert (repos["run"] / path).read_bytes() == (repos["seed"] / path).read_bytes()


def test_a_run_job_is_one_job_per_run_and_a_one_seed_run_trains_alone(repos):
    jobs = run_jobs(repos["run"], "-n", "--forcerun", *train_rules(repos["run"]))
    runs = sorted(w["key"] for rule, w, _ in jobs if rule == "train_seeds_0_1")
    assert runs == sorted(f"tiny/{run}" for run in TINY_STUDY["runs"])
    assert [(w["study"], w["seed"]) for rule, w, _ in jobs if rule == "train"] == [("single", "3")]
    for rule, _, outputs in jobs:
        if rule == "train_seeds_0_1":  # each seed's five files
            assert outputs.count("/seed=0/") == outputs.count("/seed=1/") == 5, outputs
    per_seed = run_jobs(repos["seed"], "-n", "--forcerun", "train")
    assert sorted((w["study"], w["run"], w["seed"]) for rule, w, _ in per_seed if rule == "train") == sorted(
        [("tiny", run, str(seed)) for run in TINY_STUDY["runs"] for seed in (0, 1)]
        + [("single", "fedavg", "3")]
    )
    assert not [rule for rule, _, _ in per_seed if rule.startswith("train_seeds_")]


def test_a_run_job_takes_the_training_jobs_set_resources(repos):
    out = snakemake(
        repos["run"],
        "-n",
        "--forcerun",
        "train_seeds_0_1",
        "--set-resources",
        "train:runtime=77",
        "train:mem_mb=999",
    ).stdout
    jobs = re.findall(r"\n(?:    )?(?:local)?rule (\w+):\n(.*?)(?=\n\[|\n\n|\n    \[|\Z)", out, re.S)
    blocks = [body for rule, body in jobs if rule == "train_seeds_0_1"]
    assert len(blocks) == len(TINY_STUDY["runs"])
    for body in blocks:
        res = re.search(r"resources: (.*)", body).group(1).split(", ")
        assert "runtime=77" in res and "mem_mb=999" in res, res


def test_a_bad_train_jobs_stops_before_any_job(repos):
    bad = repos["run"] / "bad.yaml"
    bad.write_text(yaml.safe_dump({"train_jobs": "often"}))
    proc = snakemake(repos["run"], "--configfile", "config/config.yaml", str(bad), check=False)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "train_jobs" in text and "often" in text and ("'run', 'seed'" in text or "run, seed" in text), text
    assert "rule train" not in proc.stdout and "Job stats" not in proc.stdout
    assert "Nothing to be done" in snakemake(repos["run"], "-n").stdout


def test_a_run_rule_is_named_for_its_seeds_not_for_the_configs_order(repos):
    """A study added before the others (on other seeds) leaves the names of their rules alone: a profile's
    `set-resources: train_seeds_0_1:` keeps its meaning."""
    first = repos["run"] / "first.yaml"
    studies = {"added": {**TINY_STUDY, "seeds": [7, 8, 9]}, **CONFIG["studies"]}
    first.write_text(yaml.safe_dump({"studies": studies}))
    rules = snakemake(repos["run"], "--list-rules", "--configfile", str(first)).stdout.split()
    assert [r for r in rules if r.startswith("train")] == ["train", "train_seeds_0_1", "train_seeds_7_8_9"]
