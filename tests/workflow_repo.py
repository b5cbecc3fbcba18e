"""Helpers of the end-to-end tests: a copy of the workflow with a config of its own, and Snakemake in it."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
PARTS = ("Snakefile", "workflow", "profiles", "src")


def copy_repo(root: Path, config: dict) -> Path:
    """A copy of the workflow and library at ``root`` (created) whose ``config/config.yaml`` is ``config``."""
    root.mkdir(parents=True, exist_ok=True)
    for name in PARTS:
        src = REPO / name
        if src.is_dir():
            shutil.copytree(src, root / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(src, root / name)
    (root / "config").mkdir()
    (root / "config/config.yaml").write_text(yaml.safe_dump(config))
    return root


def snakemake(
    cwd: Path, *args: str, check: bool = True, env: dict | None = None
) -> subprocess.CompletedProcess:
    """``snakemake --cores 2 *args`` in ``cwd``; with ``check``, fail with its output's tail when it fails."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", "--cores", "2", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def planned(cwd: Path, *args: str) -> list[tuple[str, dict]]:
    """The jobs a dry run plans: (rule, wildcards). A training job of any training rule (``train_seeds_*``,
    ``train_gpu``, ``train_gpu_seeds_*``: wildcard ``key`` = study/run) counts as the ``train`` job of each seed
    it writes, so that tests of which runs and seeds a change redoes read the same in every mode (``run_jobs``
    lists the jobs as planned)."""
    jobs = []
    for rule, pairs, outputs in run_jobs(cwd, *args):
        if rule == "train" or not rule.startswith("train_"):
            jobs.append((rule, pairs))
            continue
        study, run = pairs["key"].split("/", 1)
        seeds = [pairs["seed"]] if "seed" in pairs else dict.fromkeys(re.findall(r"/seed=(\d+)/", outputs))
        for seed in seeds:
            jobs.append(("train", {"study": study, "run": run, "seed": seed}))
    return jobs


def run_jobs(cwd: Path, *args: str) -> list[tuple[str, dict, str]]:
    """The jobs a dry run plans, as planned: (rule, wildcards, the output line)."""
    out = snakemake(cwd, "-n", *args).stdout
    jobs = []
    # a dry run lists the short training jobs as members of a group job, indented (profiles/slurm submits them
    # so; a local run ignores groups)
    for block in re.split(r"\n(?=(?:    )?(?:local)?rule \w+:)", out):
        head = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not head:
            continue
        wc = re.search(r"wildcards: (.*)", block)
        pairs = dict(p.split("=", 1) for p in wc.group(1).split(", ")) if wc else {}
        outputs = re.search(r"output: (.*)", block)
        jobs.append((head.group(1), pairs, outputs.group(1) if outputs else ""))
    return jobs
