# Helpers shared by the rules: the resolved suite, and small named functions for inputs and params.
# All logic lives in hetfl.config; a bad config stops here, before any job runs.
import json
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

# The workflow runs the hetfl of its own checkout (src/ beside the Snakefile), here and in every job.
SRC = Path(workflow.basedir) / "src"
if SRC.is_dir():
    sys.path.insert(0, str(SRC))
    os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p))

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

from hetfl.config import build_suite, data_fingerprint, partition_fingerprint, train_fingerprint
from hetfl.data.registry import dataset_checksum, dataset_files
from hetfl.errors import ConfigError
from hetfl.ids import canonical_json
from hetfl.report import figure_about, study_about
from hetfl.resources import train_resources


# profiles/slurm ships placeholders for the site settings: refuse to plan (and so to submit) with them.
SLURM_PLACEHOLDERS = {"slurm_account": "my_account", "slurm_partition": "my_partition"}
_defaults = workflow.resource_settings.default_resources
_given = dict(a.split("=", 1) for a in (_defaults.args or []) if "=" in a) if _defaults else {}
for _key, _placeholder in SLURM_PLACEHOLDERS.items():
    if _given.get(_key, "").strip("'\"") == _placeholder:
        raise WorkflowError(
            f"default-resources {_key} is still the placeholder {_placeholder!r} of profiles/slurm/config.yaml: "
            f"set your cluster's (account: sacctmgr show assoc user=$USER format=account; partition: sinfo -s) "
            f"at the top of that file, or pass --default-resources {_key}=<yours>"
        )

# --set-resources train:memory_budget=...: Snakemake rounds a number to an integer (0.5 becomes 0) and passes
# it to every training job; refuse what no job could take before any runs.
_train_set = workflow.resource_settings.overwrite_resources.get("train", {})
_cli_budget = str(_train_set["memory_budget"].raw).strip("'\"") if "memory_budget" in _train_set else "auto"
if _cli_budget != "auto" and not (_cli_budget.isdigit() and int(_cli_budget) >= 1):
    raise WorkflowError(
        f"--set-resources train:memory_budget={_cli_budget}: expected 'auto' or a whole number of MiB >= 1 "
        "(Snakemake rounds a resource to an integer; set a fraction of a MiB as the config's memory_budget)"
    )

validate(config, schema="../schemas/config.schema.yaml")
try:
    SUITE = build_suite(config, data_checks=".snakemake/hetfl/data_checks")  # verdicts on user files, by SHA-256
except ConfigError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None

STUDIES = SUITE.studies
for note in (n for name in SUITE.selected for n in STUDIES[name].notes):  # what the config leaves unused
    logger.warning(f"hetfl: {note}")
DATA_STUDIES = {name: s for name, s in STUDIES.items() if s.dataset is not None}  # the others: generated problems
DATASETS = {s.dataset_id: s.dataset for s in DATA_STUDIES.values()}
PARTITIONS = {  # every partition a run (or a tuning grid point) uses (a run may override its study's)
    (s.dataset_id, r.partition_id): r.partition
    for s in DATA_STUDIES.values()
    for r in [*s.runs.values(), *s.points.values()]
}
ENV = "../envs/hetfl.yaml"
# A training job's files per seed (rule train's named outputs; hetfl.train.RunOutputs).
RUN_FILES = {
    "metrics": "metrics.csv",
    "client_metrics": "metrics_clients.csv",
    "info": "run.json",
    "model": "final.pt",
    "artifacts": "artifacts.npz",
}


wildcard_constraints:
    study="[^/]+",
    run="[^/]+",
    dataset="[^/]+",
    partition="[^/]+",
    seed=r"\d+",
    figure="[A-Za-z0-9_.=+-]+",


def partition_dir(study, run, seed):
    s, r = STUDIES[study], STUDIES[study].spec(run)
    return f"results/partitions/{s.dataset_id}/{r.partition_id}/seed={r.partition_seed(seed)}"


def run_dir(study, run, seed):
    return f"results/runs/{study}/{run}/seed={seed}"


def get_dataset_spec(wildcards):
    return canonical_json(DATASETS[wildcards.dataset])


def get_partition_spec(wildcards):
    return canonical_json(PARTITIONS[(wildcards.dataset, wildcards.partition)])


def get_dataset_files(wildcards):
    """The user's files a dataset reads (npz, leaf): editing one reruns its partitions and runs."""
    return dataset_files(DATASETS[wildcards.dataset])


def get_dataset_checksum(wildcards):
    """SHA-256 of the user's files: a file replaced by an older one with other content reruns too."""
    return dataset_checksum(DATASETS[wildcards.dataset])


def get_data_code(wildcards):
    """The fingerprint of the code that builds this dataset (its own module, not the other datasets')."""
    return data_fingerprint(DATASETS[wildcards.dataset])


def get_partition_code(wildcards):
    """The fingerprint of the code that makes this partition (its scheme's module, not the others')."""
    return partition_fingerprint(PARTITIONS[(wildcards.dataset, wildcards.partition)])


def get_train_input(wildcards):
    s = STUDIES[wildcards.study]
    source = s.spec(wildcards.run).settings["init_from"]
    inputs = {} if source is None else {"init": f"{run_dir(wildcards.study, source, wildcards.seed)}/final.pt"}
    if wildcards.run in s.tuning:  # trains with the hyper-parameters its tuning chose
        inputs["choice"] = tuning_choice(wildcards.study, wildcards.run)
    if s.dataset is None:
        return inputs  # a generated problem: built inside the training job
    return {
        "data": f"results/data/{s.dataset_id}/data.npz",
        "partition": f"{partition_dir(wildcards.study, wildcards.run, int(wildcards.seed))}/clients.npz",
        **inputs,
    }


def run_jobs():
    """`train_jobs: run`: the (study, run) pairs whose seeds one job trains in turn, grouped by their seeds
    (tuple -> ["study/run", ...]); a run on one seed, or `train_jobs: seed`, trains in rule `train`."""
    groups = {}
    if SUITE.train_jobs != "run":
        return groups
    for name, s in STUDIES.items():
        for label in [*s.runs, *s.points]:
            seeds = tuple(s.seeds_of(label))
            if len(seeds) > 1:
                groups.setdefault(seeds, []).append(f"{name}/{label}")
    return groups


def train_job(wildcards):
    """(study, run, seeds) of a training job: rule `train`'s one seed, or a run job's (`{key}` = "study/run")
    seeds. The getters below read either kind of job's wildcards through it."""
    if "key" in wildcards.keys():
        study, run = wildcards.key.split("/", 1)
        return study, run, STUDIES[study].seeds_of(run)
    return wildcards.study, wildcards.run, [int(wildcards.seed)]


def get_run_job_input(wildcards):
    """The inputs of a run job: the data, and each seed's partition and `init_from` model (named
    `partition_<seed>`, `init_<seed>`), as `get_train_input` gives for one seed."""
    study, run, seeds = train_job(wildcards)
    inputs = {}
    for seed in seeds:
        one = get_train_input(SimpleNamespace(study=study, run=run, seed=str(seed)))
        for name, path in one.items():
            inputs[name if name in ("data", "choice") else f"{name}_{seed}"] = path
    return inputs


# What `--set-resources train:...` (or a profile's `set-resources: train:`) sets, for the run jobs too.
TRAIN_SET_RESOURCES = {name: value.raw for name, value in _train_set.items()}


def get_run_spec(wildcards):
    study, run, _ = train_job(wildcards)
    return STUDIES[study].run_json(run)


def get_run_code(wildcards):
    study, run, _ = train_job(wildcards)
    s, r = STUDIES[study], STUDIES[study].spec(run)
    model = None if s.problem else r.settings["model"]  # the spec: name: torch fingerprints the user's module
    return train_fingerprint(r.algorithm, s.problem and s.problem["name"], model)


def get_train_runtime(wildcards, attempt):
    """Minutes a training job may run on a cluster: from its run's size and its seeds (a run job trains them
    in turn), more at each retry (hetfl.resources)."""
    study, run, seeds = train_job(wildcards)
    return train_resources(STUDIES[study], run, attempt, len(seeds)).runtime


def get_train_mem_mb(wildcards, attempt):
    """Memory (MB) of a training job on a cluster: from its run's size, more at each retry."""
    study, run, _ = train_job(wildcards)
    return train_resources(STUDIES[study], run, attempt).mem_mb


def get_memory_budget(wildcards):
    """The run's memory_budget (MiB, or auto): how many clients a batched call takes, never what it computes.
    A number that is not whole goes as its text: Snakemake would round a float resource to an integer."""
    study, run, _ = train_job(wildcards)
    budget = STUDIES[study].memory_budget(run)
    return budget if isinstance(budget, str) or budget == int(budget) else repr(float(budget))


def get_train_gpu(wildcards):
    """GPUs of a training job on a cluster: 1 for a run with `device: cuda`, else 0."""
    study, run, _ = train_job(wildcards)
    return train_resources(STUDIES[study], run).gpu


def study_runs(study):
    s = STUDIES[study]
    return [(run, seed) for run in s.runs for seed in s.seeds]


def get_study_run_files(wildcards):
    pairs = study_runs(wildcards.study)
    return {
        "metrics": [f"{run_dir(wildcards.study, r, s)}/metrics.csv" for r, s in pairs],
        "info": [f"{run_dir(wildcards.study, r, s)}/run.json" for r, s in pairs],
        "clients": [f"{run_dir(wildcards.study, r, s)}/metrics_clients.csv" for r, s in pairs],
    }


def get_study_artifacts(wildcards):
    return [f"{run_dir(wildcards.study, r, s)}/artifacts.npz" for r, s in study_runs(wildcards.study)]


def get_study_run_keys(wildcards):
    return json.dumps(study_runs(wildcards.study))


def get_study_paper(wildcards):
    return canonical_json(STUDIES[wildcards.study].paper)


def get_study_table_metrics(wildcards):
    return json.dumps(STUDIES[wildcards.study].table_metrics)


def get_figure_spec(wildcards):
    figures = {fig["name"]: fig for fig in STUDIES[wildcards.study].figures}
    return canonical_json(figures[wildcards.figure])


def get_study_title(wildcards):
    return wildcards.study


def get_study_claims(wildcards):
    return canonical_json(STUDIES[wildcards.study].claims)


def get_study_about(wildcards):
    """What the report says of a study: its paper, description, seeds and runs (hetfl.report)."""
    return study_about(STUDIES[wildcards.study])


def get_figure_about(wildcards):
    """What the report's caption of a figure says: the study's about, the figure's title and metrics."""
    s = STUDIES[wildcards.study]
    return figure_about(s, next(fig for fig in s.figures if fig["name"] == wildcards.figure))


def get_figure_labels(wildcards):
    """The columns of a figure's row in the report: its name and title."""
    about = get_figure_about(wildcards)
    return {"figure": about["figure"], "title": about["title"]}


def figure_files(study, ext):
    return [f"results/figures/{study}/{fig['name']}.{ext}" for fig in STUDIES[study].figures]


def final_outputs():
    out = []
    for name in SUITE.selected:
        s = STUDIES[name]
        if s.dataset is not None:
            out += [f"{partition_dir(name, run, seed)}/stats.png" for run in s.runs for seed in s.seeds]
        out += [f"results/tables/{name}/{f}" for f in ("summary.md", "clients.md", "claims.md", "summary.html", "claims.html")]
        out += figure_files(name, "png") + figure_files(name, "pdf")
        out += [f"results/tables/{name}/tuning.csv"] if s.tuning else []
    return sorted(set(out))


def tuning_choice(study, run):
    return f"results/tuning/{study}/{run}/choice.json"


def get_tuning_files(wildcards):
    """The records of every grid point of a tuned run on every tuning seed."""
    t = STUDIES[wildcards.study].tuning[wildcards.run]
    pairs = [(point, seed) for point in t.points for seed in t.seeds]
    return {
        "metrics": [f"{run_dir(wildcards.study, p, seed)}/metrics.csv" for p, seed in pairs],
        "info": [f"{run_dir(wildcards.study, p, seed)}/run.json" for p, seed in pairs],
    }


def get_tuning_spec(wildcards):
    """A tuned run's tune block and grid points (hetfl.tuning.Tuning), as JSON."""
    t = STUDIES[wildcards.study].tuning[wildcards.run]
    return canonical_json({"run": t.run, **t.as_dict(), "points": t.points})


def get_study_tuned(wildcards):
    """The study's tuned runs and their tune blocks (summary.md marks them), as JSON."""
    return canonical_json({run: t.as_dict() for run, t in STUDIES[wildcards.study].tuning.items()})


def get_study_tuning_scores(wildcards):
    return [f"results/tuning/{wildcards.study}/{run}/scores.csv" for run in STUDIES[wildcards.study].tuning]
