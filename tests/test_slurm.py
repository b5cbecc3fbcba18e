"""End to end on a real one-node SLURM cluster: the workflow through ``profiles/slurm``.

``tests/slurm/cluster.sh`` installs Debian's slurm-wlm and munge when missing (apt, as root), starts a private
one-node cluster (munged, slurmctld, slurmd: their own config, ports and socket in a temporary directory) and
stops it afterwards. The tests skip only where that cannot install the packages (not root, no apt, apt fails).

Checked, each in a copy of the repository whose profile names the test cluster's partition and account:

- a tiny study run with ``snakemake --profile profiles/slurm`` sends its short training jobs through sbatch as one
  group (``group-components: train_short=8``: one SLURM job on one core, asking for the sum of their runtimes),
  keeps the light stages on the submitting node (``localrules``), and its results (``metrics.csv``,
  ``metrics_clients.csv`` of every run, ``summary.csv``) equal a local run's byte for byte;
- a run with ``device: cuda`` goes to the GPU partition that ``set-resources: train_gpu:`` names, with a GPU
  (the test cluster's node has one GRES "gpu" without a device, so the job is placed, then stops: no CUDA),
  while a CPU run beside it stays on the default partition without one;
- a training job cancelled while it runs (``scancel``) fails cleanly (no output left that Snakemake would take
  as complete, the other jobs done, its checkpoint kept), and the next run redoes exactly that job, resuming
  from its last checkpoint, to metrics equal to an uninterrupted run's byte for byte.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from tests import workflow_repo
from tests.conftest import TINY_STUDY

pytestmark = [pytest.mark.slurm, pytest.mark.workflow]

REPO = Path(__file__).resolve().parents[1]
CLUSTER = REPO / "tests/slurm/cluster.sh"
PARTITION, ACCOUNT = "hetfl", "hetfl-test"  # written by cluster.sh; any account goes without accounting
GPU_PARTITION = "gpu"  # cluster.sh's second partition

# The tiny study, light on this 2-core machine (a SLURM job starts Snakemake twice, then the training script):
# two seeds trained by one job per run (train_jobs: run, the default: rule train_seeds_0_1), every run's job in
# one group (no diverging run), one figure. Two second-stage runs start from fedavg's final model: inside the
# group they wait for it together, as the FFGG studies' runs wait for their `pretrain` run.
TINY = {
    **TINY_STUDY,
    "seeds": [0, 1],
    "runs": {
        **{k: TINY_STUDY["runs"][k] for k in ("fedavg", "pfedme", "fedavg_ft")},
        "fedavg_ft3": {**TINY_STUDY["runs"]["fedavg_ft"], "finetune_steps": 3},
    },
    "figures": ["test_acc_personal"],
}
# A run long enough to be cancelled while it trains (10-20 s here, a checkpoint every round), and a short one
# beside it; the tiny study's data and partition.
LONG_ROUNDS, EVAL_EVERY = 1600, 50
FAULT = {
    **{k: TINY_STUDY[k] for k in ("dataset", "partition")},
    "model": {"name": "dnn", "hidden": 64},
    "rounds": 4,
    "seeds": [0],
    "eval_every": EVAL_EVERY,
    "defaults": {"lr": 0.05, "batch_size": 16, "local_steps": 5},
    "runs": {"long": {"algorithm": "fedavg", "rounds": LONG_ROUNDS}, "short": {"algorithm": "local"}},
    "figures": ["test_acc_global"],
}
LONG_LOG = "logs/train/fault/long/seed=0.log"
# The fault test's two short jobs each submitted as a group of its own: one job is cancelled, not both.
ALONE = ("--group-components", "train_short=1")
GROUP_LOGS = "group_train_short_train"  # where the plugin writes the SLURM log of a group job of rule train
# A run on the GPU beside one on the CPU, one seed each.
PLACED = {**FAULT, "runs": {"cpu": {"algorithm": "fedavg"}, "gpu": {"algorithm": "fedavg", "device": "cuda"}}}
# the Snakefile's localrules: never submitted
LOCAL_RULES = {
    "all",
    "data",
    "partition",
    "partition_stats",
    "aggregate",
    "claims",
    "figure",
    "report_tables",
}


def copy_repo(root: Path, studies: dict, extra: dict | None = None) -> Path:
    """A copy of the workflow and library at ``root`` whose config holds ``studies`` (and ``extra`` keys)."""
    workflow_repo.copy_repo(root, {"studies": studies, **(extra or {})})
    profile = root / "profiles/slurm/config.yaml"
    settings = yaml.safe_load(profile.read_text())
    settings["default-resources"].update(slurm_account=ACCOUNT, slurm_partition=PARTITION)
    settings["set-resources"]["train_gpu"]["slurm_partition"] = GPU_PARTITION
    # no accounting database here (squeue keeps finished jobs an hour), and a quick first status check
    settings.update({"slurm-status-command": "squeue", "slurm-init-seconds-before-status-checks": 1})
    profile.write_text(yaml.safe_dump(settings, sort_keys=False))
    return root


def snakemake(cwd: Path, env: dict, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    """Run Snakemake in ``cwd``; raise with its output's tail when it fails and ``check``."""
    proc = subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=cwd, env=env, capture_output=True, text=True
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake {' '.join(args)} failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def jobs_of(log: str) -> list[dict]:
    """The jobs a Snakemake log announces: rule, Snakemake job id, wildcards, resources, whether it ran in a
    group job (``group``), and the SLURM job id if submitted on its own."""
    jobs = {}
    for block in re.split(r"\n(?=(?:    )?(?:local)?rule \w+:|\[.*\] Group job)", log):
        head = re.match(r"(?:local)?rule (\w+):", block.strip())
        jobid = re.search(r"^\s+jobid: (\d+)", block, re.M)
        if not head or not jobid:
            continue
        wc = re.search(r"^\s+wildcards: (.*)", block, re.M)
        wildcards = dict(p.split("=", 1) for p in wc.group(1).split(", ")) if wc else {}
        res = re.search(r"^\s+resources: (.*)", block, re.M)
        resources = dict(p.split("=", 1) for p in res.group(1).split(", ")) if res else {}
        group = block.startswith("    ")  # a group's members are indented
        jobs[jobid.group(1)] = {
            "rule": head.group(1), "wildcards": wildcards, "resources": resources, "group": group, "slurm": None
        }  # fmt: skip
    for job, slurm in re.findall(r"Job (\d+) has been submitted with SLURM jobid (\d+)", log):
        jobs[job]["slurm"] = slurm
    return list(jobs.values())


def group_submissions(log: str) -> list[str]:
    """The SLURM job ids of the group jobs a Snakemake log submitted (a group's Snakemake id is a UUID)."""
    return re.findall(r"Job [0-9a-f]{8}-[0-9a-f-]+ has been submitted with SLURM jobid (\d+)", log)


def last_log(repo: Path) -> str:
    """The text of Snakemake's log of the latest run in ``repo``."""
    return sorted((repo / ".snakemake/log").glob("*.snakemake.log"))[-1].read_text()


def slurm_jobs(env: dict, ids: list[str], fields: str = "%T") -> dict[str, str]:
    """SLURM job id -> its squeue ``fields`` (default: the state; squeue keeps finished jobs for MinJobAge, an
    hour here)."""
    out = subprocess.run(
        ["squeue", "--states=all", "-h", "-o", f"%i|{fields}", "-j", ",".join(ids)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return dict(line.split("|", 1) for line in out.splitlines())


def scontrol_job(env: dict, job: str) -> str:
    """What ``scontrol show job`` says of a SLURM job (its partition, the GPUs it asked for: ``TresPerJob``)."""
    return subprocess.run(
        ["scontrol", "show", "job", job], env=env, capture_output=True, text=True, check=True
    ).stdout


def slurm_states(env: dict, ids: list[str]) -> dict[str, str]:
    """SLURM job id -> state."""
    return slurm_jobs(env, ids)


def planned_trains(repo: Path, env: dict) -> list[tuple[str, str]]:
    """The (run, seed) of every training job a dry run of the slurm profile plans."""
    out = snakemake(repo, env, "--profile", "profiles/slurm", "-n", *ALONE).stdout
    return sorted(
        (j["wildcards"]["run"], j["wildcards"]["seed"]) for j in jobs_of(out) if j["rule"] == "train"
    )


class Reference:
    """A local run of the workflow in ``repo``, in the background; ``repo()`` waits for it to succeed."""

    def __init__(self, repo: Path):
        self._repo = repo
        self._log = repo.parent / "snakemake.log"
        with open(self._log, "w") as log:
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "snakemake", "--cores", "2"],
                cwd=repo,
                stdout=log,
                stderr=subprocess.STDOUT,
            )

    def repo(self) -> Path:
        """The repository, once the run has succeeded."""
        if self._proc.wait(timeout=600) != 0:
            raise AssertionError(f"the local reference run failed:\n{self._log.read_text()[-4000:]}")
        return self._repo

    def stop(self) -> None:
        """End the run if it is still going (a test failed before waiting for it)."""
        if self._proc.poll() is None:
            self._proc.terminate()
            self._proc.wait(timeout=60)


def run_files(repo: Path, study: str, runs: dict, seeds: list[int]) -> dict[str, bytes]:
    """The bytes of every run's metrics files and the study's summary table."""
    out = {}
    for run in runs:
        for seed in seeds:
            for name in ("metrics.csv", "metrics_clients.csv"):
                path = f"results/runs/{study}/{run}/seed={seed}/{name}"
                out[path] = (repo / path).read_bytes()
    path = f"results/tables/{study}/summary.csv"
    out[path] = (repo / path).read_bytes()
    return out


@pytest.fixture(scope="module")
def local(tmp_path_factory) -> Reference:
    """The reference, started first: both studies run locally (``snakemake --cores 2``, the workstation
    profile), in the background while the cluster starts and its jobs queue."""
    repo = copy_repo(tmp_path_factory.mktemp("local") / "repo", {"tiny": TINY, "fault": FAULT})
    reference = Reference(repo)
    yield reference
    reference.stop()


@pytest.fixture(scope="module")
def cluster(local, tmp_path_factory) -> dict:
    """A running one-node SLURM cluster: the environment whose SLURM commands use it (PATH)."""
    try:
        import snakemake_executor_plugin_slurm  # noqa: F401
    except ImportError:
        pytest.fail("snakemake-executor-plugin-slurm is missing: pip install -e '.[test]'")
    state = tmp_path_factory.mktemp("slurm")
    proc = subprocess.run(["bash", str(CLUSTER), "start", str(state)], capture_output=True, text=True)
    if proc.returncode == 3:
        pytest.skip(f"no SLURM cluster can be set up on this machine: {proc.stderr.strip()}")
    env = {**os.environ, "PATH": f"{state / 'bin'}{os.pathsep}{os.environ['PATH']}"}
    try:
        assert proc.returncode == 0, f"the test cluster did not start:\n{proc.stdout}\n{proc.stderr}"
        yield env
    finally:
        subprocess.run(["bash", str(CLUSTER), "stop", str(state)], capture_output=True, text=True)


def test_a_study_runs_through_sbatch_and_equals_a_local_run(cluster, local, tmp_path):
    repo = copy_repo(tmp_path / "repo", {"tiny": TINY})
    snakemake(repo, cluster, "--profile", "profiles/slurm")

    log = last_log(repo)
    jobs = jobs_of(log)
    trains = [j for j in jobs if j["rule"].startswith("train")]
    assert {j["rule"] for j in trains} == {"train_seeds_0_1"}  # one job per run, its two seeds in turn
    assert {j["wildcards"]["key"] for j in trains} == {f"tiny/{run}" for run in TINY["runs"]}
    assert all(j["group"] for j in trains), trains  # short: submitted together, as one group
    (group,) = group_submissions(log)
    assert {j["rule"] for j in jobs if not j["slurm"] and not j["group"]} == LOCAL_RULES, jobs
    assert not [j for j in jobs if j["slurm"]]  # nothing else was submitted
    runtime = sum(int(j["resources"]["runtime"]) for j in trains)
    assert slurm_jobs(cluster, [group], "%T|%C|%l|%P") == {group: f"COMPLETED|1|{runtime}:00|{PARTITION}"}

    assert run_files(repo, "tiny", TINY["runs"], TINY["seeds"]) == run_files(
        local.repo(), "tiny", TINY["runs"], TINY["seeds"]
    )
    assert "Nothing to be done" in snakemake(repo, cluster, "--profile", "profiles/slurm", "-n").stdout


def test_a_gpu_run_goes_to_the_gpu_partition_and_a_cpu_run_does_not(cluster, tmp_path):
    repo = copy_repo(tmp_path / "repo", {"placed": PLACED})
    proc = snakemake(repo, cluster, "--profile", "profiles/slurm", "--retries", "0", check=False)
    assert proc.returncode != 0  # the GPU job has no CUDA on this node

    log = last_log(repo)
    trains = {j["wildcards"]["key"] if "key" in j["wildcards"] else j["wildcards"]["run"]: j for j in jobs_of(log)
              if j["rule"].startswith("train")}  # fmt: skip
    assert trains["placed/gpu"]["rule"] == "train_gpu" and trains["cpu"]["rule"] == "train"
    assert trains["placed/gpu"]["resources"]["gpu"] == "1" and trains["cpu"]["resources"]["gpu"] == "0"
    assert not trains["placed/gpu"]["group"] and trains["cpu"]["group"]  # short CPU jobs only are grouped
    gpu_job = trains["placed/gpu"]["slurm"]
    (cpu_group,) = group_submissions(log)
    assert slurm_jobs(cluster, [gpu_job, cpu_group], "%P|%T") == {
        gpu_job: f"{GPU_PARTITION}|FAILED",
        cpu_group: f"{PARTITION}|COMPLETED",
    }
    assert "TresPerJob=gres:gpu:1" in scontrol_job(cluster, gpu_job)
    assert "TresPerJob" not in scontrol_job(cluster, cpu_group)
    assert "torch.cuda.is_available() is False" in (repo / "logs/train/placed/gpu/seed=0.log").read_text()


def wait_until(predicate, timeout: float, what: str, proc: subprocess.Popen, log: Path):
    """Poll ``predicate`` every 0.2 s until it returns a true value (returned); fail after ``timeout`` s or
    when Snakemake (``proc``, writing ``log``) ends first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = predicate()
        if value:
            return value
        if proc.poll() is not None:
            raise AssertionError(f"snakemake ended while waiting for {what}:\n{log.read_text()[-4000:]}")
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}:\n{log.read_text()[-4000:]}")


def test_a_cancelled_training_job_fails_cleanly_and_resumes_alone(cluster, local, tmp_path):
    repo = copy_repo(tmp_path / "repo", {"fault": FAULT}, {"checkpoint": {"every_rounds": 1}})
    run_dir = repo / "results/runs/fault/long/seed=0"
    checkpoint = repo / "results/checkpoints/fault/long/seed=0.pt"
    logfile = tmp_path / "snakemake.log"
    # no retries: the cancelled job stays failed, as after its last retry
    with open(logfile, "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "snakemake", "--profile", "profiles/slurm", "--retries", "0", *ALONE],
            cwd=repo,
            env=cluster,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
    try:

        def slurm_id():  # the group job whose SLURM log names the long run (each job is a group of its own)
            for job in group_submissions(logfile.read_text()):
                path = repo / f".snakemake/slurm_logs/{GROUP_LOGS}/{job}.log"
                if path.exists() and "run=long" in path.read_text():
                    return job

        def mid_run():  # the last evaluated round, once past a quarter of the rounds
            path = run_dir / "metrics.csv"
            lines = path.read_text().splitlines()[1:] if path.exists() else []
            done = max((int(line.split(",")[0]) for line in lines if line.count(",") == 2), default=0)
            return done if done >= LONG_ROUNDS // 4 else None

        job = wait_until(slurm_id, 120, "the long training job's submission", proc, logfile)
        evaluated = wait_until(mid_run, 120, "the long training job to train a quarter", proc, logfile)
        assert slurm_states(cluster, [job]) == {job: "RUNNING"}
        subprocess.run(["scancel", job], env=cluster, check=True)
        assert proc.wait(timeout=120) != 0
    finally:
        if proc.poll() is None:
            proc.terminate()
            proc.wait(timeout=30)
    out = logfile.read_text()
    assert slurm_states(cluster, [job]) == {job: "CANCELLED"}
    assert re.search(rf"Error in group train_short\n\s+log: \S+/{GROUP_LOGS}/{job}\.log", out), out[-3000:]
    assert (repo / f".snakemake/slurm_logs/{GROUP_LOGS}/{job}.log").exists()  # kept: it failed
    assert not any((run_dir / name).exists() for name in ("metrics.csv", "run.json", "final.pt")), out[-3000:]
    assert (repo / "results/runs/fault/short/seed=0/run.json").exists()
    assert checkpoint.exists()

    assert planned_trains(repo, cluster) == [("long", "0")]
    snakemake(repo, cluster, "--profile", "profiles/slurm", *ALONE)
    redone = [j for j in jobs_of(last_log(repo)) if j["rule"] == "train"]
    assert [(j["wildcards"]["run"], j["group"]) for j in redone] == [("long", True)]
    assert len(group_submissions(last_log(repo))) == 1
    resumed = re.search(r"resuming from the checkpoint after round (\d+)", (repo / LONG_LOG).read_text())
    assert resumed and evaluated <= int(resumed.group(1)) < LONG_ROUNDS
    assert json.loads((run_dir / "run.json").read_text())["resumed_from_round"] == int(resumed.group(1))
    assert not checkpoint.exists()  # removed when the run ended
    assert run_files(repo, "fault", FAULT["runs"], FAULT["seeds"]) == run_files(
        local.repo(), "fault", FAULT["runs"], FAULT["seeds"]
    )
