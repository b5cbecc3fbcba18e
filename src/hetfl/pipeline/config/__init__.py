"""Resolve and validate the workflow configuration: studies -> datasets, partitions and run specs.

Everything the workflow plans comes from ``build_suite(config)``, which fails before any job runs,
with a ``ConfigError`` naming the dotted key and the allowed values, on: an unknown study key,
dataset, partition scheme, model, problem, algorithm, hyper-parameter, metric or run in a
figure/claim; a value of the wrong type or out of range; an impossible partition (more clients than
samples, a Dirichlet split that cannot give every client its minimum); more sampled clients than
clients; an algorithm that does not run on the study's environment; an option that another setting
makes inert (``hetfl.requires``: ``server_momentum`` without a server optimizer that uses it); a user's
data file whose content the ``data`` job would refuse, or a natural split of it with a client lacking
train or test samples (``hetfl.data.verify``: the file, and the sample or user at fault, named).

A study trains on client data (``dataset`` + ``partition`` + ``model``: its environment is a
federation) or on a generated problem (``problem``, see ``hetfl.problems``).

Precedence of a run's settings: study level (``eval_every``, ``sampling``, ``device``, ``dtype``,
``model``) < the study's ``defaults`` < the run's own entry. ``defaults`` holds values shared by every
run; a run takes from it only the keys its algorithm knows. ``grid`` expands a run into the
Cartesian product of the listed values, labelled ``<run>-<key>=<value>[-...]``.
The keys are documented in ``config/README.md``.

The package, by what it holds: ``specs`` (the resolved types, ``RunSpec``, ``Study``, ``Suite``, and the keys a
config may hold), ``files`` (config files: ``load_config``, ``merge_config``, ``study_files``, a study's ``extends``), ``study``
(``resolve_study``, ``build_suite``), ``runs`` (a run: ``grid``, ``defaults``, ``resolve_run`` and the checks
across runs), ``environment`` (a study's client data or problem, a run's own partition or problem) and
``fingerprints`` (the code fingerprints of the jobs). Every name is imported from here.
"""

from hetfl.errors import ConfigError
from hetfl.pipeline.config.files import expand_study_files, load_config, merge_config, resolve_extends
from hetfl.pipeline.config.fingerprints import (
    data_fingerprint,
    data_modules,
    partition_fingerprint,
    partition_modules,
    splits_fingerprint,
    train_fingerprint,
    train_modules,
)
from hetfl.pipeline.config.runs import expand_grid, resolve_run
from hetfl.pipeline.config.specs import (
    DATA_KEYS,
    FEDERATION,
    LABEL,
    REQUIRED_STUDY_KEYS,
    RUN_SEED,
    SPEC_UNLESS,
    STUDY_KEYS,
    TOP_LEVEL_KEYS,
    RunSpec,
    Study,
    Suite,
    budget_changes_results,
    data_of,
)
from hetfl.pipeline.config.study import build_suite, resolve_study
from hetfl.pipeline.settings import RUN_SETTINGS

__all__ = [
    "DATA_KEYS",
    "FEDERATION",
    "LABEL",
    "REQUIRED_STUDY_KEYS",
    "RUN_SEED",
    "RUN_SETTINGS",
    "SPEC_UNLESS",
    "STUDY_KEYS",
    "TOP_LEVEL_KEYS",
    "ConfigError",
    "RunSpec",
    "Study",
    "Suite",
    "budget_changes_results",
    "build_suite",
    "data_of",
    "data_fingerprint",
    "data_modules",
    "expand_grid",
    "expand_study_files",
    "load_config",
    "merge_config",
    "partition_fingerprint",
    "partition_modules",
    "splits_fingerprint",
    "resolve_extends",
    "resolve_run",
    "resolve_study",
    "train_fingerprint",
    "train_modules",
]
