"""Every numeric option of every algorithm, problem, dataset, partition and model rejects NaN and ±inf
with its key named, before any job; every option that another setting makes inert is refused, naming
both keys; and the other config fixes of numbers, figures and defaults."""

from __future__ import annotations

import copy
import dataclasses
import math
import typing

import pytest

from hetfl.algorithms import registry as algorithm_registry
from hetfl.algorithms.hyperparameters import OPTIMIZER_KEYS
from hetfl.data import dataset_info, dataset_names, normalize_dataset_spec, normalize_partition_spec
from hetfl.data.partitioners import SCHEME_MODULES
from hetfl.data.registry import registry as dataset_registry
from hetfl.errors import ConfigError
from hetfl.models import model_names, normalize_model_spec
from hetfl.models import registry as model_registry
from hetfl.pipeline.config import RUN_SETTINGS, build_suite, load_config, resolve_run
from hetfl.problems import normalize_problem_spec
from hetfl.problems import registry as problem_registry
from hetfl.requires import REQUIRES, requirements
from tests.test_config import config, error
from tests.workflow_repo import REPO

BAD = [math.nan, math.inf, -math.inf]


def _numeric_fields(options_cls) -> list[str]:
    """The fields of an Options dataclass whose type admits an int or a float."""
    hints = typing.get_type_hints(options_cls)

    def numeric(tp) -> bool:
        if tp in (int, float):
            return True
        return any(numeric(t) for t in typing.get_args(tp) if t is not type(None))

    return [f.name for f in dataclasses.fields(options_cls) if numeric(hints[f.name])]


ALGORITHM_OPTIONS = sorted(
    (name, env, field)
    for name, impls in algorithm_registry().items()
    for env, cls in impls.items()
    for field in _numeric_fields(cls.Hyperparameters)
)
PROBLEM_OPTIONS = sorted(
    (name, field) for name, cls in problem_registry().items() for field in _numeric_fields(cls.Options)
)


def test_the_walk_covers_the_options_the_issue_names():
    covered = {(name, field) for name, _, field in ALGORITHM_OPTIONS}
    assert {("fedavg", "lr"), ("pfedme", "lam"), ("pfedme", "personal_lr"), ("all_for_one", "lr")} <= covered
    optimizer = set(OPTIMIZER_KEYS) - {"lr_schedule"}  # the client optimizer's numbers, on either base
    assert {("fedavg", f) for f in optimizer} | {("ffgg", f) for f in optimizer} <= covered
    assert any(field == "lr_x" for name, _, field in ALGORITHM_OPTIONS if "sgda" in name)
    assert {("quadratic_game", "mu"), ("quadratic_game", "noise"), ("quadratic_game", "init_scale")} <= set(
        PROBLEM_OPTIONS
    )
    assert len(ALGORITHM_OPTIONS) > 100 and len(PROBLEM_OPTIONS) > 10


@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("name,env,field", ALGORITHM_OPTIONS)
def test_every_algorithm_option_rejects_non_finite_numbers(name, env, field, value):
    cls = algorithm_registry()[name][env]
    with pytest.raises(ConfigError) as info:
        cls.Hyperparameters.from_dict({field: value}, "studies.s.runs.r")
    assert info.value.key == f"studies.s.runs.r.{field}"


@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("name,field", PROBLEM_OPTIONS)
def test_every_problem_option_rejects_non_finite_numbers(name, field, value):
    with pytest.raises(ConfigError) as info:
        normalize_problem_spec({"name": name, field: value}, "studies.s.problem")
    assert info.value.key == f"studies.s.problem.{field}"  # the key at fault, not a related one


def _dataset_options(name: str) -> list[str]:
    return dataset_registry()[name].Options.names()


@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize("name,field", [(n, f) for n in dataset_names() for f in _dataset_options(n)])
def test_every_dataset_option_rejects_non_finite_numbers(name, field, value):
    with pytest.raises(ConfigError) as info:
        normalize_dataset_spec({"name": name, field: value}, "studies.s.dataset")
    assert info.value.key == f"studies.s.dataset.{field}"


@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize(
    "scheme,field",
    [(s, f) for s, module in SCHEME_MODULES.items() for f in module.Options.names()],
)
def test_every_partition_option_rejects_non_finite_numbers(scheme, field, value):
    info = dataset_info({"name": "digits"})
    with pytest.raises(ConfigError) as err:
        normalize_partition_spec({"scheme": scheme, field: value}, "studies.s.partition", info)
    assert err.value.key == f"studies.s.partition.{field}"


@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
@pytest.mark.parametrize(
    "name,field",
    [(n, f) for n in model_names() for f in model_registry()[n].Options.names()],
)
def test_every_model_option_rejects_non_finite_numbers(name, field, value):
    with pytest.raises(ConfigError) as info:
        normalize_model_spec({"name": name, field: value}, "studies.s.model")
    assert info.value.key == f"studies.s.model.{field}"


@pytest.mark.parametrize("where", ["defaults", "run"])
@pytest.mark.parametrize("value", BAD, ids=["nan", "inf", "-inf"])
def test_a_non_finite_learning_rate_stops_the_config_naming_where_it_is(where, value):
    cfg = config()
    if where == "defaults":
        cfg["studies"]["s"]["defaults"]["lr"] = value
        assert error(cfg).key == "studies.s.defaults.lr"
    else:
        cfg["studies"]["s"]["runs"]["pfedme"]["lam"] = value
        assert error(cfg).key == "studies.s.runs.pfedme.lam"


def test_a_value_a_run_sets_itself_is_blamed_on_the_run_not_on_defaults():
    cfg = config()
    cfg["studies"]["s"]["defaults"]["lr"] = 0.05
    cfg["studies"]["s"]["runs"]["pfedme"]["lr"] = -1.0
    assert error(cfg).key == "studies.s.runs.pfedme.lr"
    cfg["studies"]["s"]["runs"]["pfedme"]["lr"] = 0.01
    cfg["studies"]["s"]["defaults"]["eval_every"] = 0
    assert error(cfg).key == "studies.s.defaults.eval_every"


@pytest.mark.parametrize(
    "change,key",
    [
        ({"checkpoint": {"every_seconds": math.nan}}, "checkpoint.every_seconds"),
        ({"checkpoint": {"every_seconds": math.inf}}, "checkpoint.every_seconds"),
    ],
)
def test_checkpoint_seconds_must_be_finite(change, key):
    cfg = {**config(), **change}
    assert error(cfg).key == key


@pytest.mark.parametrize("ylim", [[0, math.inf], [-math.inf, 1], [math.nan, 1]])
def test_figure_limits_must_be_finite(ylim):
    cfg = config(figures=[{"metrics": ["test_acc_global"], "ylim": ylim}])
    assert error(cfg).key == "studies.s.figures[0].ylim"


def test_claim_numbers_must_be_finite():
    cfg = config(claims=["pfedme.test_acc_personal < 1e999"])
    assert error(cfg).key == "studies.s.claims[0].check"


@pytest.mark.parametrize(
    "paper,key",
    [
        ({"pfedme": {"test_acc_personal": math.nan}}, "studies.s.paper.pfedme.test_acc_personal"),
        ({"pfedme": {"test_acc_personal": "high"}}, "studies.s.paper.pfedme.test_acc_personal"),
        ({"pfedmee": {"test_acc_personal": 0.9}}, "studies.s.paper.pfedmee"),
        ({"pfedme": {"test_acc_personnal": 0.9}}, "studies.s.paper.pfedme.test_acc_personnal"),
    ],
)
def test_paper_numbers_are_finite_numbers_of_known_runs_and_metrics(paper, key):
    assert error(config(paper=paper)).key == key


def test_an_empty_figure_list_means_no_figures():
    study = build_suite(config(figures=[])).studies["s"]
    assert study.figures == []
    assert "test_acc_personal" in study.table_metrics  # summary.md still has columns
    assert build_suite(config()).studies["s"].figures != []  # omitted: the default figures
    cfg = copy.deepcopy(config())
    cfg["studies"]["s"]["figures"] = None  # YAML `figures:` with nothing after it: omitted too
    assert build_suite(cfg).studies["s"].figures != []


@pytest.mark.parametrize("text,value", [("5e-2", 0.05), ("1E-3", 0.001), (".5", 0.5), ("+2e0", 2.0)])
def test_a_number_yaml_reads_as_a_string_is_taken_as_that_number(text, value):
    cfg = config()
    cfg["studies"]["s"]["defaults"]["lr"] = text
    study = build_suite(cfg).studies["s"]
    assert study.runs["fedavg"].hyperparameters["lr"] == value
    spec = normalize_dataset_spec({"name": "synthetic", "alpha": text}, "d")
    assert spec["alpha"] == value


@pytest.mark.parametrize("text", ["nan", "inf", "fast", "5e-2x", ""])
def test_text_that_is_not_a_decimal_number_is_still_an_error(text):
    cfg = config()
    cfg["studies"]["s"]["defaults"]["lr"] = text
    assert error(cfg).key == "studies.s.defaults.lr"


# --- options another setting makes inert (hetfl.requires) ----------------------------------------------------

INERT_OPTIONS = sorted(
    (name, env, option)
    for name, impls in algorithm_registry().items()
    for env, cls in impls.items()
    for option in requirements(cls.Hyperparameters.names())
)
ENABLING_EXTRA = {("lr_schedule", "step"): {"lr_step_size": 1}}  # what the enabling setting itself needs
# what an algorithm needs beside the enabling setting: FFGG takes a server optimizer in Algorithm 4 only; a
# linear warm-up's first step size is 0, which q-FedAvg's L = 1/η_t and SCAFFOLD's option II divide by
ALGORITHM_EXTRA = {
    ("ffgg", "server_optimizer"): {"local_theta_steps": 1},
    ("qfedavg", "lr_schedule"): {"lipschitz": 10.0},
    ("scaffold", "lr_schedule"): {"control": "I"},
}


def _resolve(name: str, env: str, run: dict, split: str = "output"):
    """Resolve run ``r`` of algorithm ``name`` on ``env`` (a DNN with the personal split it asks for)."""
    base = {**RUN_SETTINGS, "model": {"name": "dnn", "split": split}}
    try:
        return resolve_run("s", "r", {"algorithm": name, **run}, {}, base, "studies.s.runs.r", env)
    except ConfigError as err:
        if err.key != "studies.s.runs.r.model.split" or split != "output":
            raise
        return _resolve(name, env, run, err.allowed[0])


def _inert_case(name: str, env: str, option: str) -> tuple[object, object, object]:
    """(a value of ``option``, a value of its enabling option that makes it inert, one that does not)."""
    cls = algorithm_registry()[name][env].Hyperparameters
    req = REQUIRES[option]
    default = next(f.default for f in dataclasses.fields(cls) if f.name == option)
    choices = typing.get_args(typing.get_type_hints(cls)[req.option])
    off = next(v for v in choices if v not in req.values)
    on = next((v for v in req.values if v in choices), None)  # None: the class never enables it
    return (1 if default is None else default), off, on


def test_the_inert_walk_covers_the_options_the_issue_names():
    covered = {(name, option) for name, _, option in INERT_OPTIONS}
    named = ("server_momentum", "server_eps", "server_beta2", "lr_gamma", "lr_min", "local_steps_min")
    assert {("fedavg", o) for o in named} <= covered
    assert {("ffgg", "lr_gamma"), ("perfedavg", "hf_delta"), ("scaffold", "server_momentum")} <= covered
    assert len(INERT_OPTIONS) > 50


@pytest.mark.parametrize("name,env,option", INERT_OPTIONS)
def test_every_option_another_setting_makes_inert_is_refused_naming_both_keys(name, env, option):
    value, off, on = _inert_case(name, env, option)
    enabling = REQUIRES[option].option
    with pytest.raises(ConfigError) as err:
        _resolve(name, env, {option: value, enabling: off})
    assert err.value.key == f"studies.s.runs.r.{option}" and enabling in err.value.message
    if (
        on is None
    ):  # e.g. the saddle solver, whose objective is fair only: the robust Φ's restarts never apply
        return
    extra = {**ENABLING_EXTRA.get((enabling, on), {}), **ALGORITHM_EXTRA.get((name, enabling), {})}
    spec = _resolve(name, env, {option: value, enabling: on, **extra})  # taken with its enabling setting
    assert spec.hyperparameters[option] == value


@pytest.mark.parametrize(
    "run,key,enabling_key",
    [
        ({"server_momentum": 0.9}, "server_momentum", "studies.s.runs.fedavg.server_optimizer"),
        ({"server_optimizer": "avgm", "server_eps": 0.01}, "server_eps", "studies.s.runs.fedavg.server_optimizer"),
        ({"server_optimizer": "adagrad", "server_beta2": 0.9}, "server_beta2", "studies.s.runs.fedavg.server_optimizer"),
        ({"lr_gamma": 0.5}, "lr_gamma", "studies.s.runs.fedavg.lr_schedule"),
        ({"lr_schedule": "step", "lr_step_size": 2, "lr_min": 0.001}, "lr_min", "studies.s.runs.fedavg.lr_schedule"),
        ({"local_steps_min": 1}, "local_steps_min", "studies.s.runs.fedavg.local_steps_per_client"),
    ],
)  # fmt: skip
def test_an_inert_option_in_a_study_names_both_keys(run, key, enabling_key):
    cfg = config()
    cfg["studies"]["s"]["runs"]["fedavg"].update(run)
    err = error(cfg)
    assert err.key == f"studies.s.runs.fedavg.{key}" and enabling_key in err.message
    assert "(its default)" in err.message or enabling_key.rsplit(".", 1)[1] in run


def test_an_inert_option_from_defaults_is_refused_there_unless_the_run_opts_out():
    cfg = config()
    cfg["studies"]["s"]["defaults"]["server_momentum"] = 0.5
    err = error(cfg)
    assert err.key == "studies.s.defaults.server_momentum"
    assert "studies.s.runs.fedavg.server_optimizer is 'sgd' (its default)" in err.message
    cfg["studies"]["s"]["defaults"]["server_optimizer"] = "avgm"  # shared; one run switches it off itself
    cfg["studies"]["s"]["runs"]["plain"] = {"algorithm": "fedavg", "server_optimizer": "sgd"}
    study = build_suite(cfg).studies["s"]
    assert study.runs["fedavg"].hyperparameters["server_momentum"] == 0.5
    assert any("server_momentum: no effect in run(s) plain (server_optimizer: sgd)" in n for n in study.notes)
    cfg["studies"]["s"]["defaults"]["server_optimizer"] = "sgd"
    err = error(cfg)
    assert (
        err.key == "studies.s.defaults.server_momentum"
        and "studies.s.defaults.server_optimizer" in err.message
    )


def test_the_default_suites_set_no_inert_option():
    for path in ("config/config.yaml", "config/paper.yaml"):
        build_suite(load_config([REPO / path], root=REPO))


def test_a_bad_study_memory_budget_gets_the_allowed_values_not_the_schemas_words():
    from snakemake.utils import validate

    cfg = {**config(), "studies": {"s": {**config()["studies"]["s"], "memory_budget": 0}}}
    validate(cfg, schema=str(REPO / "workflow/schemas/config.schema.yaml"))  # the schema leaves it to hetfl
    err = error(cfg)
    assert err.key == "studies.s.memory_budget" and "'auto' or a finite number of MiB > 0" in err.message
