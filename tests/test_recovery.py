"""After a power loss (Snakemake and its jobs killed with SIGKILL), the documented recovery works.

A killed Snakemake leaves its lock in ``.snakemake/locks``: the next run refuses to start. The recovery of
docs/reliability.md, ``snakemake --unlock`` then the same command, redoes exactly the job that was running
(its outputs are marked incomplete; the default profile's ``rerun-incomplete``), and that job resumes from
its last checkpoint to metrics equal to an uninterrupted run's, byte for byte.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest

from tests.test_slurm import FAULT, LONG_LOG, LONG_ROUNDS, run_files, wait_until
from tests.workflow_repo import copy_repo, snakemake

pytestmark = pytest.mark.workflow


def test_after_a_power_loss_unlock_and_rerun_resume_the_killed_job(tmp_path):
    studies = {"fault": FAULT}
    repo = copy_repo(tmp_path / "repo", {"studies": studies, "checkpoint": {"every_rounds": 20}})
    run_dir = repo / "results/runs/fault/long/seed=0"
    log = tmp_path / "snakemake.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(  # its own process group: SIGKILL takes Snakemake and its jobs at once
            [sys.executable, "-m", "snakemake", "--cores", "2"],
            cwd=repo,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def mid_run():  # the last evaluated round of the long run, once past a quarter of its rounds
            path = run_dir / "metrics.csv"
            lines = path.read_text().splitlines()[1:] if path.exists() else []
            done = max((int(line.split(",")[0]) for line in lines if line.count(",") == 2), default=0)
            return done if done >= LONG_ROUNDS // 4 else None

        evaluated = wait_until(mid_run, 300, "the long training job to train a quarter", proc, log)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert not (run_dir / "run.json").exists()  # killed before it finished

    refused = snakemake(repo, check=False)
    assert refused.returncode != 0 and "--unlock" in refused.stdout + refused.stderr
    snakemake(repo, "--unlock")
    rerun = snakemake(repo)
    trains = re.findall(
        r"rule train:\n(?:.*\n)*?\s+wildcards: study=fault, run=(\w+)", rerun.stdout + rerun.stderr
    )
    assert "long" in trains
    resumed = re.search(r"resuming from the checkpoint after round (\d+)", (repo / LONG_LOG).read_text())
    assert resumed and evaluated <= int(resumed.group(1)) + 20 and int(resumed.group(1)) < LONG_ROUNDS

    reference = copy_repo(tmp_path / "reference", {"studies": studies})
    snakemake(reference)
    assert run_files(repo, "fault", FAULT["runs"], FAULT["seeds"]) == run_files(
        reference, "fault", FAULT["runs"], FAULT["seeds"]
    )
