# Helpers shared by the rules: the resolved suite, and small named functions for inputs and params.
# All logic lives in hetfl.pipeline.config; a bad config stops here, before any job runs.
import json
import os
from functools import cache
import re
import sys
from pathlib import Path

# The workflow runs the hetfl of its own checkout (src/ beside the Snakefile), here and in every job.
SRC = Path(workflow.basedir) / "src"
if SRC.is_dir():
    sys.path.insert(0, str(SRC))
    os.environ.update(PYTHONPATH=os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p))

from snakemake.exceptions import WorkflowError
from snakemake.logging import logger
from snakemake.utils import validate

from hetfl.data.registry import dataset_checksum, dataset_files
from hetfl.errors import ConfigError
from hetfl.fingerprint import stage_fingerprint
from hetfl.ids import canonical_json
from hetfl.pipeline.config import (
    RUN_SEED,
    build_suite,
    data_fingerprint,
    expand_study_files,
    partition_fingerprint,
    splits_fingerprint,
    train_fingerprint,
)
from hetfl.pipeline.report import figure_about, study_about
from hetfl.pipeline.splits import study_splits
from hetfl.pipeline.resources import is_short, on_cuda, train_resources

# profiles/slurm ships placeholders for the site settings: refuse to plan (and so to submit) with them.
SLURM_PLACEHOLDERS = {"slurm_account": "my_account", "slurm_partition": "my_partition"}
# set-resources: train_gpu: slurm_partition (checked in train.smk)
GPU_PARTITION_PLACEHOLDER = "my_gpu_partition"
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

try:
    # the studies of the files `study_files` lists (config/config.yaml: one per paper), under `studies`
    config.update(expand_study_files(config))
except ConfigError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None
validate(config, schema="../schemas/config.schema.yaml")
try:
    # data_checks: the verdicts on user files, by SHA-256
    SUITE = build_suite(config, data_checks=".snakemake/hetfl/data_checks")
except ConfigError as err:
    raise WorkflowError(f"invalid configuration: {err}") from None

STUDIES = SUITE.studies
for note in (n for name in SUITE.selected for n in STUDIES[name].notes):  # what the config leaves unused
    logger.warning(f"hetfl: {note}")
# the studies on data (the others: generated problems)
DATA_STUDIES = {name: s for name, s in STUDIES.items() if s.dataset is not None}
# every dataset a seed of a run (or of a tuning grid point) trains on: one per study, or one per seed where the
# study's generated dataset has `seed: run` (Study.data_of)
DATA_SEEDS = {
    (name, seed): s.data_of(seed)
    for name, s in DATA_STUDIES.items()
    for seed in sorted({seed for label in [*s.runs, *s.points] for seed in s.seeds_of(label)})
}
DATASETS = {dataset_id: spec for spec, dataset_id in DATA_SEEDS.values()}
PARTITIONS = {  # every partition a run (or a tuning grid point) uses (a run may override its study's)
    (DATA_SEEDS[(name, seed)][1], r.partition_id): r.partition
    for name, s in DATA_STUDIES.items()
    for label, r in [*s.runs.items(), *s.points.items()]
    for seed in s.seeds_of(label)
}
ENV = "../envs/hetfl.yaml"
# A training job's files per seed (rule train's named outputs; hetfl.pipeline.train.RunOutputs).
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
    return f"results/partitions/{DATA_SEEDS[(study, int(seed))][1]}/{r.partition_id}/seed={r.partition_seed(seed)}"


def run_dir(study, run, seed):
    return f"results/runs/{study}/{run}/seed={seed}"


def stage_code(stage):
    """The fingerprint of the code a job of `stage` runs (its script and the hetfl modules it imports, by their
    parsed code: hetfl.fingerprint), its `code` param: a change to that code reruns exactly its jobs, and what
    reads their outputs; comments, docstrings and modification times rerun nothing."""
    return stage_fingerprint(stage)


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


def seed_inputs(study, run, seed):
    """The inputs of one seed of a run: the data and the seed's partition (none for a generated problem), the
    `init_from` run's final model, the `reference_from` run's final models, a tuned run's choice."""
    s = STUDIES[study]
    settings = s.spec(run).settings
    inputs = {
        name: f"{run_dir(study, settings[key], seed)}/final.pt"
        for name, key in (("init", "init_from"), ("reference", "reference_from"))
        if settings[key] is not None
    }
    if run in s.tuning:  # trains with the hyper-parameters its tuning chose
        inputs["choice"] = tuning_choice(study, run)
    if s.dataset is None:
        return inputs  # a generated problem: built inside the training job
    return {
        "data": f"results/data/{DATA_SEEDS[(study, int(seed))][1]}/data.npz",
        "partition": f"{partition_dir(study, run, int(seed))}/clients.npz",
        **inputs,
    }


def training_rules():
    """The training rules besides `train`, and the runs each trains: rule name -> (seeds, ["study/run", ...]).

    Named for what their jobs train, never for the config's order (`--set-resources <rule>:...` keeps its
    meaning when a study is added): `train_seeds_0_1_2` trains, in one job per run (`train_jobs: run`), the
    seeds 0, 1, 2 of the CPU runs on those seeds; `train_gpu_seeds_0_1_2` the same for the runs with
    `device: cuda`; `train_gpu` (seeds None) one seed per job of the GPU runs on one seed, or of every GPU run
    with `train_jobs: seed`. CPU runs on one seed, and every CPU run with `train_jobs: seed`, train in `train`.
    """
    rules = {}
    for name, s in STUDIES.items():
        for label in [*s.runs, *s.points]:
            seeds = tuple(s.seeds_of(label))
            per_run = job_seeds(s, label) > 1
            gpu = on_cuda(s, label)
            if not per_run and not gpu:
                continue
            rule_name = ("train_gpu" if gpu else "train") + (
                "_seeds_" + "_".join(map(str, seeds)) if per_run else ""
            )
            rules.setdefault(rule_name, (seeds if per_run else None, []))[1].append(f"{name}/{label}")
    return rules


def train_job(wildcards):
    """(study, run, seeds) of a training job of any training rule: one seed (`{seed}`; `{study}/{run}` or
    `{key}` = "study/run") or a run's (`{key}` alone: its seeds). The getters below read every training job's
    wildcards through it."""
    if "key" in wildcards.keys():
        study, run = wildcards.key.split("/", 1)
    else:
        study, run = wildcards.study, wildcards.run
    seeds = [int(wildcards.seed)] if "seed" in wildcards.keys() else STUDIES[study].seeds_of(run)
    return study, run, seeds


def get_train_input(wildcards):
    """The inputs of a training job: a seed's (`seed_inputs`), or for a run's job each seed's partition,
    `init_from` model and `reference_from` models (named `partition_<seed>`, `init_<seed>`, `reference_<seed>`)
    beside the data and the choice."""
    study, run, seeds = train_job(wildcards)
    if "seed" in wildcards.keys():
        return seed_inputs(study, run, seeds[0])
    inputs = {}
    for seed in seeds:
        for name, path in seed_inputs(study, run, seed).items():
            inputs[name if name in ("data", "choice") else f"{name}_{seed}"] = path
    return inputs


# What `--set-resources train:...` (or a profile's `set-resources: train:`) sets: every training job's, whatever
# its rule; `train_gpu:` then sets the GPU jobs' (profiles/slurm: their partition). `train` and `train_gpu` are
# rules too, where Snakemake applies them itself.
TRAIN_SET_RESOURCES = {name: value.raw for name, value in _train_set.items()}
TRAIN_GPU_SET_RESOURCES = {
    name: value.raw
    for name, value in workflow.resource_settings.overwrite_resources.get("train_gpu", {}).items()
}
# profiles/slurm submits the short training jobs (hetfl.pipeline.resources.is_short) in groups of this many
# (`group-components: train_short=<n>`), one after another on one core (`resources: train_slots=1`, a limit per
# submitted group: the Snakefile's resource_scopes); without it each is a job of its own.
SHORT_GROUP = "train_short"


def short_group_size():
    """The short training jobs per submitted group (`group-components: train_short=<n>`; 1 without it). Read when
    a job's resources are, not when the Snakefile is: Snakemake sets the group settings after parsing it."""
    return workflow.group_settings.group_components.get(SHORT_GROUP, 1)


def get_run_spec(wildcards):
    study, run, _ = train_job(wildcards)
    return STUDIES[study].run_json(run)


def get_run_code(wildcards):
    study, run, _ = train_job(wildcards)
    s, r = STUDIES[study], STUDIES[study].spec(run)
    model = None if s.problem else r.settings["model"]  # the spec: name: torch fingerprints the user's module
    return train_fingerprint(r.algorithm, s.problem and s.problem["name"], model)


def job_seeds(s, run):
    """How many seeds one training job of run `run` of study `s` trains: all of them in a run's job
    (`train_jobs: run`), else one; one where each seed trains on data of its own (`seed: run`: a job reads one
    data file)."""
    seeds = s.seeds_of(run)
    per_seed_data = s.dataset is not None and s.dataset.get("seed") == RUN_SEED
    return len(seeds) if SUITE.train_jobs == "run" and not per_seed_data else 1


def groupable(s, run):
    """Whether the jobs of run `run` of study `s` join the short jobs' groups: short (on the CPU, estimated
    within the runtime floor: hetfl.pipeline.resources.is_short), not tuned, and so is the run it starts from
    (`init_from`) or measures against (`reference_from`), if any. A group cannot wait on itself through a job
    outside it (Snakemake refuses such a group): a tuned run waits on its grid points through the `tune` stage,
    and a run that starts from a job outside the groups may wait on a group through it."""
    settings = s.spec(run).settings
    sources = [settings[key] for key in ("init_from", "reference_from") if settings[key] is not None]
    return (
        run not in s.tuning
        and is_short(s, run, job_seeds(s, run))
        and all(groupable(s, source) for source in sources)
    )


def get_train_group(wildcards):
    """`train_short` for the job of a run that `groupable` admits, which profiles/slurm submits in groups; None
    (a job of its own) for the others. Groups are the submitting side's: on the node a group job runs on
    (Snakemake's remote mode, one job at a time), its jobs are plain jobs, each a job step of one core. As a
    group there, a run with several runs starting from it would make a step of several cores, which the
    group's one core cannot hold."""
    if workflow.remote_exec:
        return None
    study, run, _ = train_job(wildcards)
    return SHORT_GROUP if groupable(STUDIES[study], run) else None


def get_train_runtime(wildcards, attempt):
    """Minutes a training job may run on a cluster: from its run's size and its seeds (a run job trains them
    in turn), more at each retry; a grouped short job's floor is the group's share (hetfl.pipeline.resources).
    """
    study, run, seeds = train_job(wildcards)
    group = short_group_size() if get_train_group(wildcards) else 1
    return train_resources(STUDIES[study], run, attempt, len(seeds), group).runtime


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
    """GPUs of a training job on a cluster: 1 for a run with `device: cuda` (sbatch --gpus=1), else 0; 0 too
    where `set-resources: train_gpu:` asks for them as `gres` (the plugin takes one or the other)."""
    study, run, _ = train_job(wildcards)
    return 0 if "gres" in TRAIN_GPU_SET_RESOURCES else train_resources(STUDIES[study], run).gpu


def train_resource_settings(gpu):
    """The resources of a training rule: the job's own (hetfl.pipeline.resources), then `set-resources: train:` and, for a
    GPU rule, `train_gpu:`."""
    return {
        "runtime": get_train_runtime,
        "mem_mb": get_train_mem_mb,
        "gpu": get_train_gpu,
        "train_slots": 1,
        "memory_budget": get_memory_budget,  # a resource, not a param: changing it reruns nothing
        **TRAIN_SET_RESOURCES,
        **(TRAIN_GPU_SET_RESOURCES if gpu else {}),
    }


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


@cache
def splits_of(study):
    """hetfl.pipeline.splits.study_splits of a study, once per planning (the data's info read once)."""
    return study_splits(STUDIES[study])


def get_study_splits(wildcards):
    """Each run of the study whose model has a split: its model spec and the data's sample shape and outputs, as
    [run, spec] pairs in the study's run order (canonical JSON would sort a mapping's keys)."""
    return canonical_json([[run, spec] for run, spec in splits_of(wildcards.study).items()])


def get_splits_code(wildcards):
    """The splits stage's code and the modules of the study's models (a model's code decides its parameters)."""
    models = [s["model"] for s in splits_of(wildcards.study).values()]
    return splits_fingerprint(models)


def get_study_claims(wildcards):
    return canonical_json(STUDIES[wildcards.study].claims)


def get_study_about(wildcards):
    """What the report says of a study: its paper, description, seeds and runs (hetfl.pipeline.report)."""
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
        out += [
            f"results/tables/{name}/{f}"
            for f in ("summary.md", "clients.md", "claims.md", "summary.html", "claims.html")
        ]
        out += figure_files(name, "png") + figure_files(name, "pdf")
        out += [f"results/tables/{name}/tuning.csv"] if s.tuning else []
        out += [f"results/tables/{name}/splits.md"] if splits_of(name) else []
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
    """A tuned run's tune block and grid points (hetfl.pipeline.tuning.Tuning), as JSON; the points as a list of
    [label, values] in the grid's order, the order of get_tuning_files (canonical JSON sorts a mapping's keys, and
    a label's text order is not the grid's: local_steps=10 before local_steps=2)."""
    t = STUDIES[wildcards.study].tuning[wildcards.run]
    return canonical_json({"run": t.run, **t.as_dict(), "points": [[p, v] for p, v in t.points.items()]})


def get_study_tuned(wildcards):
    """The study's tuned runs and their tune blocks (summary.md marks them), as JSON."""
    return canonical_json({run: t.as_dict() for run, t in STUDIES[wildcards.study].tuning.items()})


def get_study_tuning_scores(wildcards):
    return [f"results/tuning/{wildcards.study}/{run}/scores.csv" for run in STUDIES[wildcards.study].tuning]
