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
    """The jobs a dry run plans: (rule, wildcards)."""
    out = snakemake(cwd, "-n", *args).stdout
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", out):
        head = re.match(r"(?:local)?rule (\w+):", block.strip())
        if not head:
            continue
        wc = re.search(r"wildcards: (.*)", block)
        pairs = dict(p.split("=", 1) for p in wc.group(1).split(", ")) if wc else {}
        jobs.append((head.group(1), pairs))
    return jobs
