"""A study's environment: its client data (dataset, partition: checked whole) or its generated problem, and
a run's own partition or problem options over the study's."""

from __future__ import annotations

import os
from typing import Any

from hetfl.data import normalize_dataset_spec
from hetfl.data.partition import check_partition, normalize_partition_spec, partition_id
from hetfl.data.verify import check_dataset, check_natural_split
from hetfl.errors import ConfigError
from hetfl.pipeline.config.runs import require_mapping
from hetfl.pipeline.config.specs import DATA_KEYS, RUN_SEED, RunSpec, data_of
from hetfl.problems import normalize_problem_spec, problem_clients


def data_environment(
    study: dict, seeds: list[int], key: str, data_checks: str | os.PathLike | None = None
) -> dict[str, Any]:
    """Dataset, partition and their ids for a study on client data; a user's data files are checked whole
    (``hetfl.data.verify``: verdicts cached under ``data_checks``), and what they tell is in ``notes``."""
    for k in DATA_KEYS:
        if k not in study:
            raise ConfigError(f"{key}.{k}", "missing required study key (or declare a 'problem')")
    given = require_mapping(study["dataset"], f"{key}.dataset")
    per_seed = given.get("seed") == RUN_SEED
    dataset = normalize_dataset_spec({**given, "seed": seeds[0]} if per_seed else given, f"{key}.dataset")
    if per_seed:
        dataset["seed"] = RUN_SEED  # the template of every seed's (data_of)
    given_partition = require_mapping(study["partition"], f"{key}.partition")
    checks = [  # the data of every seed (with seed: run), each checked whole with the partition
        (seeded, check_dataset(seeded, f"{key}.dataset", data_checks))
        for seed in (seeds if per_seed else seeds[:1])
        for seeded in [data_of(dataset, seed, f"{key}.dataset")[0]]
    ]
    for seeded, data in checks:
        partition = normalize_partition_spec(given_partition, f"{key}.partition", data.info)
        fixed = partition.get("seed")
        check_partition(
            partition, data.info, sorted({s if fixed is None else fixed for s in seeds}), f"{key}.partition"
        )
        check_natural_split(data, partition, seeded, f"{key}.dataset", f"{key}.partition")
    data, info = checks[0][1], checks[0][1].info
    return {
        "dataset": dataset,
        "dataset_id": data_of(dataset, seeds[0], f"{key}.dataset")[1],
        "partition": partition,
        "partition_given": dict(study["partition"]),
        "partition_id": partition_id({k: v for k, v in partition.items() if k != "seed"}),
        "problem": None,
        "num_clients": int(partition["clients"]),
        "info": info,
        "task": info.task,
        "data": data,
        "checks": checks,
        "dataset_key": f"{key}.dataset",
        "notes": [f"{key}.dataset: {note}" for note in data.notes],
    }


def set_partition(spec: RunSpec, env: dict[str, Any], own: Any, seeds: list[int], key: str) -> None:
    """The run's partition: the study's, or its own override merged over it (a different ``scheme``
    starts from that scheme's defaults), checked like the study's (e.g. an α sweep in one study)."""
    if env["partition"] is None:
        if own is not None:
            raise ConfigError(key, "a study on a generated problem has no partition")
        spec.num_clients = env["num_clients"]
        return
    if own is None:
        spec.partition, spec.partition_id, spec.num_clients = (
            env["partition"],
            env["partition_id"],
            env["num_clients"],
        )
        return
    own = require_mapping(own, key)
    same = own.get("scheme", env["partition"]["scheme"]) == env["partition"]["scheme"]
    merged = {**env["partition_given"], **own} if same else own
    for seeded, data in env["checks"]:  # on the data of every seed the study checked
        partition = normalize_partition_spec(merged, key, data.info)
        fixed = partition.get("seed")
        check_partition(partition, data.info, sorted({s if fixed is None else fixed for s in seeds}), key)
        check_natural_split(data, partition, seeded, env["dataset_key"], key)
    spec.partition = partition
    spec.partition_id = partition_id({k: v for k, v in partition.items() if k != "seed"})
    spec.num_clients = int(partition["clients"])


def set_problem(spec: RunSpec, env: dict[str, Any], own: Any, key: str) -> None:
    """The run's problem options merged over the study's (e.g. a ζ sweep in one study), when it has its own."""
    if own is None:
        return
    if env["problem"] is None:
        raise ConfigError(key, "a study on client data has no problem")
    own = require_mapping(own, key)
    if own.get("name", env["problem"]["name"]) != env["problem"]["name"]:
        raise ConfigError(
            f"{key}.name",
            "a run may change its problem's options, not the problem",
            allowed=[env["problem"]["name"]],
        )
    spec.problem = normalize_problem_spec({**env["problem"], **own}, key)
    spec.num_clients = problem_clients(spec.problem)


def problem_environment(study: dict, key: str) -> dict[str, Any]:
    """The normalized problem of a study on a generated problem."""
    for k in DATA_KEYS:
        if k in study:
            raise ConfigError(
                f"{key}.{k}", "a study on a generated problem has no dataset, partition or model"
            )
    problem = normalize_problem_spec(require_mapping(study["problem"], f"{key}.problem"), f"{key}.problem")
    return {
        "dataset": None,
        "dataset_id": None,
        "checks": [],
        "partition": None,
        "partition_id": None,
        "problem": problem,
        "num_clients": problem_clients(problem),
        "info": None,
        "task": None,
    }
