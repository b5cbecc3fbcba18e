"""End to end: the Snakemake workflow on a tiny study, in a copy of the repository.

Checks what a user relies on: one command produces every output; a second plans nothing; changing one
run's hyper-parameter plans exactly that run's jobs (all seeds) and its study's aggregate, figures and
claims; editing an algorithm's code reruns the runs that use it; a diverging run is recorded and the
rest completes; a bad config stops before any job runs; ``snakemake --lint`` is clean.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

from hetfl.pipeline.records import RunRecord
from tests.conftest import TINY_STUDY
from tests.workflow_repo import REPO, copy_repo, planned, snakemake

pytestmark = pytest.mark.workflow

STUDY = {
    **TINY_STUDY,
    # a run with a personal part: its share of the model is tabulated (results/tables/<study>/splits.md)
    "runs": {
        **TINY_STUDY["runs"],
        "fedalt_output": {"algorithm": "fedalt", "model": {"name": "dnn", "hidden": 4, "split": "output"}},
        "fedalt_input": {"algorithm": "fedalt", "model": {"name": "dnn", "hidden": 4, "split": "input"}},
    },
    "figures": [
        "test_acc_personal",
        {"name": "losses", "metrics": ["train_loss_personal", "train_loss_global"]},
    ],
    "claims": ["pfedme.test_acc_personal > fedavg.test_acc_global"],
}


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    """A copy of the workflow and library with the tiny study as its config, after one full run."""
    root = copy_repo(tmp_path_factory.mktemp("wf"), {"studies": {"tiny": STUDY}})
    # the runs in STUDY's order, not sorted (splits.md keeps a study's order)
    (root / "config/config.yaml").write_text(yaml.safe_dump({"studies": {"tiny": STUDY}}, sort_keys=False))
    snakemake(root)
    return root


def test_one_command_produces_every_output(repo):
    for seed in (0, 1):
        parts = list((repo / "results/partitions/digits").glob(f"*/seed={seed}"))
        assert len(parts) == 1 and {p.name for p in parts[0].iterdir()} >= {
            "clients.npz",
            "stats.csv",
            "stats.png",
        }
        for run in STUDY["runs"]:
            files = {p.name for p in (repo / f"results/runs/tiny/{run}/seed={seed}").iterdir()}
            assert files == {"metrics.csv", "metrics_clients.csv", "run.json", "final.pt", "artifacts.npz"}
    for name in (
        "metrics.csv",
        "summary.csv",
        "summary.md",
        "clients.csv",
        "clients.md",
        "claims.csv",
        "claims.md",
        "summary.html",
        "claims.html",
    ):
        assert (repo / "results/tables/tiny" / name).stat().st_size > 0
    for fig in ("test_acc_personal", "losses"):
        for ext in ("png", "pdf"):
            assert (repo / f"results/figures/tiny/{fig}.{ext}").stat().st_size > 1000


def test_each_personalized_runs_split_and_its_share_are_tabulated(repo):
    table = pd.read_csv(repo / "results/tables/tiny/splits.csv")
    # the runs with a split, in the study's order (not sorted); the other runs share the whole model
    assert table[["run", "split"]].values.tolist() == [["fedalt_output", "output"], ["fedalt_input", "input"]]
    parameters, personal = 64 * 4 + 4 + 4 * 10 + 10, 4 * 10 + 10  # digits 8x8 -> 4 hidden -> 10 classes
    assert table[["parameters", "personal"]].values.tolist() == [
        [parameters, personal],
        [parameters, 64 * 4 + 4],
    ]
    assert table["share_pct"][0] == pytest.approx(100 * personal / parameters, abs=1e-3)  # 6 digits
    assert (
        "| fedalt_output | dnn (hidden 4) | output | 310 | 50 | 16.13 |"
        in (repo / "results/tables/tiny/splits.md").read_text()
    )


def test_editing_a_models_code_recounts_its_shares(repo):
    path = repo / "src/hetfl/models/dnn.py"
    original = path.read_text()
    try:
        path.write_text(original + "\n_CHANGED = True\n")
        rules = sorted(rule for rule, w in planned(repo) if rule != "train" or w["run"].startswith("fedalt"))
        assert "splits" in rules and rules.count("train") == 4  # the dnn runs' seeds and their table
    finally:
        path.write_text(original)


def test_a_run_starts_from_another_runs_final_model(repo):
    """init_from: fedavg_ft's round-0 global model is fedavg's final one (same seed), so they score the same."""
    for seed in (0, 1):
        source = pd.read_csv(repo / f"results/runs/tiny/fedavg/seed={seed}/metrics.csv")
        stage2 = pd.read_csv(repo / f"results/runs/tiny/fedavg_ft/seed={seed}/metrics.csv")
        final = source[(source["round"] == 4) & (source["metric"] == "test_acc_global")]["value"].item()
        start = stage2[(stage2["round"] == 0) & (stage2["metric"] == "test_acc_global")]["value"].item()
        assert start == final
    assert (
        json.loads((repo / "results/runs/tiny/fedavg_ft/seed=0/run.json").read_text())["spec"]["rounds"] == 2
    )


def test_diverged_run_is_recorded_and_the_rest_completes(repo):
    info = RunRecord.read(repo / "results/runs/tiny/pfedme_big_lambda/seed=0/run.json")
    assert info.status == "diverged" and info.diverged_round >= 1
    status = pd.read_csv(repo / "results/tables/tiny/status.csv")
    assert set(status[status["run"] == "pfedme_big_lambda"]["status"]) == {"diverged"}
    assert set(status[status["run"] != "pfedme_big_lambda"]["status"]) == {"ok"}
    assert "diverged" in (repo / "results/tables/tiny/summary.md").read_text()


def test_a_second_run_plans_nothing(repo):
    assert "Nothing to be done" in snakemake(repo, "-n").stdout


def test_changing_one_hyperparameter_plans_exactly_that_run(repo):
    override = repo / "override.yaml"
    override.write_text(yaml.safe_dump({"studies": {"tiny": {"runs": {"pfedme": {"K": 3}}}}}))
    jobs = planned(repo, "--configfile", "config/config.yaml", str(override))
    trains = sorted((w["run"], w["seed"]) for rule, w in jobs if rule == "train")
    assert trains == [("pfedme", "0"), ("pfedme", "1")]
    rules = sorted(rule for rule, _ in jobs)
    assert rules == sorted(
        ["train", "train", "aggregate", "claims", "figure", "figure", "report_tables", "all"]
    )


def test_editing_an_algorithm_reruns_its_runs_only(repo):
    path = repo / "src/hetfl/algorithms/baselines/fedavg.py"
    original = path.read_text()
    try:
        path.write_text(original + "\n_CHANGED = True\n")
        trains = sorted((w["run"], w["seed"]) for rule, w in planned(repo) if rule == "train")
        # fedavg's runs, and the run that starts from fedavg's final model (init_from)
        assert trains == [("fedavg", "0"), ("fedavg", "1"), ("fedavg_ft", "0"), ("fedavg_ft", "1")]
        path.write_text(original + "\n# a comment changes nothing\n")
        assert "Nothing to be done" in snakemake(repo, "-n").stdout
    finally:
        path.write_text(original)


@pytest.mark.parametrize(
    "change,message",
    [
        (
            {"runs": {"fedavg": {"algorithm": "fedbogus"}}},
            "studies.tiny.runs.fedavg.algorithm': unknown algorithm",
        ),
        ({"partition": {"clients": 5000}}, "studies.tiny.partition"),
        ({"figures": ["test_accuracy"]}, "studies.tiny.figures[0]"),
        ({"rounds": "many"}, "rounds"),
        ({"defaults": {"lr": float("nan")}}, "studies.tiny.defaults.lr': must be a finite number"),
        (
            {"runs": {"pfedme": {"lam": float("inf")}}},
            "studies.tiny.runs.pfedme.lam': must be a finite number",
        ),
    ],
)
def test_bad_config_stops_before_any_job(repo, change, message):
    bad = repo / "bad.yaml"
    bad.write_text(yaml.safe_dump({"studies": {"tiny": change}}))
    proc = snakemake(repo, "--configfile", "config/config.yaml", str(bad), check=False)
    assert proc.returncode != 0
    assert message in proc.stdout + proc.stderr
    assert "rule train" not in proc.stdout and "Job stats" not in proc.stdout
    assert "Nothing to be done" in snakemake(repo, "-n").stdout  # the earlier results are untouched


@pytest.mark.parametrize("value", ["0.5", "0", "lots"])  # (a negative one Snakemake refuses itself)
def test_a_bad_command_line_memory_budget_stops_before_any_job(repo, value):
    """Snakemake rounds a resource to an integer (0.5 would reach every job as 0): refused when planning."""
    proc = snakemake(
        repo, "--forcerun", "train", "--set-resources", f"train:memory_budget={value}", check=False
    )
    assert proc.returncode != 0
    assert (
        f"train:memory_budget={value}: expected 'auto' or a whole number of MiB >= 1"
        in proc.stdout + proc.stderr
    )
    assert "rule train" not in proc.stdout and "Job stats" not in proc.stdout
    assert "Nothing to be done" in snakemake(repo, "-n").stdout  # the earlier results are untouched


def test_a_fractional_config_memory_budget_reaches_the_job_exactly(repo):
    """A config's memory_budget that is not a whole number goes to the job as its text (a float resource
    would be rounded: 0.5 MiB to 0, which no job takes)."""
    half = repo / "half.yaml"
    half.write_text(yaml.safe_dump({"studies": {"tiny": {"memory_budget": 0.5}}}))
    out = snakemake(
        repo, "-n", "--configfile", "config/config.yaml", str(half), "--forcerun", "train", "train_seeds_0_1"
    ).stdout
    assert "rule train_seeds_0_1:" in out  # the tiny study's runs, two seeds each: one job per run
    assert "memory_budget=0.5," in out and "memory_budget=0," not in out


def in_repo(*args: str) -> subprocess.CompletedProcess:
    """``python -m <args>`` in the repository itself."""
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True)


def test_lint_is_clean():
    proc = in_repo("snakemake", "--lint")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Congratulations" in proc.stdout + proc.stderr


def test_the_workflow_is_formatted():
    """`snakefmt --check` on the Snakefile and the rules (settings: pyproject.toml's [tool.snakefmt])."""
    proc = in_repo("snakefmt", "--check", "Snakefile", "workflow/rules")
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_users_configfile_runs_its_own_studies_only(repo):
    mine = repo / "mine.yaml"
    mine.write_text(yaml.safe_dump({"studies": {"mine": {**STUDY, "seeds": [3]}}}))
    trains = {
        (w["study"], w["seed"]) for rule, w in planned(repo, "--configfile", "mine.yaml") if rule == "train"
    }
    assert trains == {("mine", "3")}  # not the workflow's own studies too
    both = planned(repo, "--configfile", "config/config.yaml", "mine.yaml")
    assert {w["study"] for rule, w in both if rule == "train"} == {"mine"}  # tiny's runs are done already
    assert (
        "tiny"
        in snakemake(repo, "-n", "--configfile", "config/config.yaml", "mine.yaml", "--forceall").stdout
    )


def test_the_slurm_profile_refuses_its_placeholder_account(repo):
    proc = snakemake(repo, "-n", "--profile", "profiles/slurm", check=False)
    assert proc.returncode != 0
    assert "slurm_account is still the placeholder 'my_account'" in proc.stdout + proc.stderr


def test_the_slurm_profile_refuses_its_gpu_placeholder_only_where_a_run_needs_a_gpu(repo):
    """profiles/slurm ships `set-resources: train_gpu: slurm_partition: my_gpu_partition`: a suite with a
    `device: cuda` run stops before any job and says which setting to fill in; one without trains as it is."""
    site = [
        "--profile",
        "profiles/slurm",
        "--default-resources",
        "slurm_account=lab",
        "slurm_partition=batch",
    ]
    gpu = repo / "gpu.yaml"
    gpu.write_text(yaml.safe_dump({"studies": {"tiny": {"runs": {"fedavg": {"device": "cuda"}}}}}))
    proc = snakemake(repo, "-n", *site, "--configfile", "config/config.yaml", str(gpu), check=False)
    assert proc.returncode != 0
    out = proc.stdout + proc.stderr
    assert "train_gpu: slurm_partition is still the placeholder 'my_gpu_partition'" in out, out[-2000:]
    assert "tiny/fedavg" in out and "Job stats" not in out
    assert "Nothing to be done" in snakemake(repo, "-n", *site).stdout  # no GPU run: no GPU partition needed
