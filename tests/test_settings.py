"""One way to validate a value: the schema checks the config's structure only, the typed options
(``hetfl.pipeline.settings``, ``hetfl.options.Options``) every value, naming the key and the allowed values."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml
from snakemake.utils import validate

from hetfl.engine.execution import EXECUTIONS, PRECISIONS
from hetfl.engine.sampler import MODES
from hetfl.errors import ConfigError
from hetfl.pipeline.config import STUDY_KEYS, TOP_LEVEL_KEYS, build_suite
from hetfl.pipeline.settings import DEVICES, DTYPES, RUN_SETTINGS, TRAIN_JOBS, RunSettings
from tests.quadratic_helpers import TINY
from tests.test_config import config, error
from tests.workflow_repo import copy_repo, snakemake

SCHEMA = Path(__file__).resolve().parents[1] / "workflow/schemas/config.schema.yaml"
STUDY = {  # a study on a generated problem: the workflow plans it without data
    "problem": {"name": "ffgg_quadratic", **TINY},
    "rounds": 2,
    "seeds": [0],
    "defaults": {"lr_theta_factor": 1.0},
    "runs": {"ffgg": {"algorithm": "ffgg"}},
}
VALUE_KEYWORDS = {"enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems",
                  "maxItems", "uniqueItems", "pattern", "multipleOf"}  # fmt: skip


def _walk(node):
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def test_the_schema_holds_structure_only_and_the_keys_the_config_knows():
    schema = yaml.safe_load(SCHEMA.read_text())
    for node in _walk(schema):
        assert not VALUE_KEYWORDS & set(node), node
        assert node.get("type") not in ("integer", "number", "boolean"), node
    assert set(schema["properties"]) == set(TOP_LEVEL_KEYS)
    assert set(schema["$defs"]["study"]["properties"]) == set(STUDY_KEYS)


@pytest.mark.parametrize(
    "cfg,key,allowed,fragment",
    [
        (config(sampling="foo"), "studies.s.sampling", MODES, "unknown value 'foo'"),
        (config(device="tpu"), "studies.s.device", DEVICES, "unknown value 'tpu'"),
        (config(dtype="float16"), "studies.s.dtype", DTYPES, "unknown value 'float16'"),
        (config(execution="fast"), "studies.s.execution", EXECUTIONS, "unknown value 'fast'"),
        (config(precision="bf16"), "studies.s.precision", PRECISIONS, "unknown value 'bf16'"),
        ({**config(), "train_jobs": "often"}, "train_jobs", TRAIN_JOBS, "unknown value 'often'"),
        (config(rounds=0), "studies.s.rounds", None, "expected a positive integer, got 0"),
        (config(rounds="ten"), "studies.s.rounds", None, "expected a positive integer, got 'ten'"),
        (config(seeds=[0, -1]), "studies.s.seeds", None, "distinct non-negative integers, got [0, -1]"),
        (config(seeds=[]), "studies.s.seeds", None, "distinct non-negative integers, got []"),
        (config(eval_every=True), "studies.s.eval_every", None, "expected a positive integer, got True"),
        (
            config(memory_budget=math.inf),
            "studies.s.memory_budget",
            None,
            "finite number of MiB > 0, got inf",
        ),
        (
            config(memory_budget="lots"),
            "studies.s.memory_budget",
            None,
            "finite number of MiB > 0, got 'lots'",
        ),
        ({**config(), "checkpoint": {"every_rounds": 0}}, "checkpoint.every_rounds", None, "integer >= 1"),
    ],
)
def test_a_bad_value_passes_the_schema_and_the_typed_options_name_its_key(cfg, key, allowed, fragment):
    validate(cfg, schema=str(SCHEMA))
    err = error(cfg)
    assert err.key == key and fragment in err.message, err
    assert err.allowed == (None if allowed is None else sorted(allowed))


def test_a_run_setting_is_a_typed_option_with_the_defaults_of_a_study_that_sets_none():
    assert RUN_SETTINGS == RunSettings().as_dict()
    assert RUN_SETTINGS["sampling"] == "epoch" and RUN_SETTINGS["memory_budget"] == "auto"
    with pytest.raises(ConfigError) as info:
        RunSettings.from_dict({"sampling": "epoch", "shuffle": True}, "studies.s.runs.x")
    assert info.value.key == "studies.s.runs.x.shuffle" and "sampling" in info.value.allowed


def test_a_number_yaml_reads_as_text_is_taken_as_the_number():
    cfg = yaml.safe_load("studies: {s: {memory_budget: 5e+2}}")
    assert cfg["studies"]["s"]["memory_budget"] == "5e+2"  # YAML 1.1: no dot, no float
    study = build_suite(config(memory_budget="5e+2")).studies["s"]
    assert study.memory_budget("fedavg") == 500.0


@pytest.mark.parametrize(
    "study,key,says",
    [
        ({"sampling": "foo"}, "studies.s.sampling", "allowed: epoch, replacement, sequential"),
        ({"rounds": 0}, "studies.s.rounds", "expected a positive integer, got 0"),
        (
            {"defaults": {"lr_theta_factor": math.nan}},
            "studies.s.defaults.lr_theta_factor",
            "must be a finite number",
        ),
    ],
)
def test_the_workflow_stops_a_bad_value_before_any_job_naming_its_key(tmp_path, study, key, says):
    repo = copy_repo(tmp_path / "repo", {"studies": {"s": {**STUDY, **study}}})
    proc = snakemake(repo, "-n", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and f"invalid configuration: config key '{key}'" in text and says in text, (
        text
    )
    assert "rule train" not in proc.stdout and "Error validating config file" not in text
