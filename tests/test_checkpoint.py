"""Checkpoints: every algorithm resumed from a checkpoint continues exactly as if never stopped, and a
training job killed mid-run resumes from its checkpoint to byte-identical outputs.

The resume cases reuse the named equivalence cases (their names are the test ids; cases on a generated
problem are prefixed with the problem's name). Every registered algorithm without such a case gets
automatic ones (:func:`automatic_cases`: ``<name>-auto``, ``<name>-auto-options``), so a new algorithm is
covered here, in tests/test_memory.py and in tests/test_client_state.py with no case written by hand."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from hetfl.algorithms import FEDERATION, get_algorithm, registry
from hetfl.data import load_dataset, make_partition
from hetfl.engine.checkpoint import load_checkpoint, resolve_checkpoint, save_checkpoint
from hetfl.engine.participation import participation_schedule
from hetfl.pipeline.config import ConfigError, build_suite
from hetfl.pipeline.train import Checkpointing, RunOutputs, checkpoint_key, train
from hetfl.problems import build_problem, normalize_problem_spec
from tests import test_baselines_equivalence as baselines
from tests import test_collaborative_equivalence as collab
from tests import test_equivalence as personal
from tests import test_minimax_equivalence as minimax
from tests import test_personal_layers as layers
from tests.conftest import SRC, TINY_STUDY, tiny_federation
from tests.quadratic_helpers import TINY as QUADRATIC

ROUNDS, STOP = 5, 2


def _federation(split: str = "none", model: str = "dnn", dtype: torch.dtype = torch.float64):
    def make():
        fed = tiny_federation(model, split=split, dtype=dtype)
        fed.cluster = torch.tensor([0, 1, 0, 1])  # for All-for-one's oracle and the in-cluster weight metric
        return fed

    make.split, make.model = split, model  # tests/test_memory.py rebuilds the federation in float32
    return make


def _problem(spec: dict, seed: int = 1):
    return lambda: build_problem(normalize_problem_spec(spec, "p"), seed, torch.device("cpu"), torch.float64)


def _named(*groups: list[tuple[str, tuple]]) -> dict[str, tuple]:
    """One dict of named cases from lists of ``(name, case)``.

    Raises:
        ValueError: a name used twice (a dict would silently keep only the last case).
    """
    out: dict[str, tuple] = {}
    for name, case in (pair for group in groups for pair in group):
        if name in out:
            raise ValueError(f"checkpoint case {name!r} declared twice")
        out[name] = case
    return out


QUAD = {"name": "ffgg_quadratic", **QUADRATIC}
PERSONAL = (
    "fedavg-sampled-epoch",
    "fedavg-weighted-replacement",
    "local-epoch",
    "local-sequential",
    "pfedme-epoch",
    # the client optimizer: Local's momentum buffers kept across rounds, the others' reset every round
    "local-sequential-opt-step",
    "fedavg-sampled-epoch-opt-cosine",
    "pfedme-epoch-opt-step",
)
BASELINES = (  # the FedAvg-like baselines: client state (SCAFFOLD's controls, FedDyn's gradients and h),
    # the server optimizer's state, the uniform local-step draws, momentum
    "fedavg-uniform-weighted-sequential",
    "fedavg-server-adam-spread",
    "fedprox-spread-weighted-adam",
    "fedprox-sampled-opt-step",
    "scaffold-II-sampled",
    "scaffold-I-uniform-avgm",
    "fednova-uniform-sampled-weighted",
    "fednova-spread-opt-cosine",
    "feddyn-full",
    "feddyn-sampled-weighted-opt-step",
)
CASES = _named(  # test id -> (name, environment, hyper-parameters, sampling, environment builder)
    [(c, (n, FEDERATION, hp, s, _federation())) for c in PERSONAL for n, hp, s in [personal.CASES[c]]],
    [(c, (n, FEDERATION, hp, s, _federation())) for c in BASELINES for n, hp, s in [baselines.CASES[c]]],
    [
        (c, (n, FEDERATION, hp, "epoch", _federation(split)))
        for c, (n, hp, split) in personal.PERSONALIZED.items()
    ],
    [  # FedPer, FedRep, LG-FedAvg (stateful personal parts, and their momentum) and FedBABU
        (c, (n, FEDERATION, hp, "epoch", _federation(split)))
        for c, (n, hp, split) in layers.CHECKPOINT.items()
    ],
    [
        (c, (n, FEDERATION, {**minimax.BASE, **hp}, s, _federation()))
        for c, (n, hp, s) in minimax.DATA_CASES.items()
    ],
    [  # with momentum, weight decay and StepLR where a case has no optimizer setting of its own
        (c, (n, FEDERATION, hp if "lr_schedule" in hp else {**collab.OPT, **hp}, "epoch", _federation()))
        for c, (n, hp) in collab.CASES.items()
    ],
    [
        (
            f"quadratic_game-{c}",
            (
                n,
                "quadratic_game",
                {"lr_x": 0.05, "lr_y": 0.05, "tau_min": 1, "tau_max": 4, **hp},
                "epoch",
                _problem({**minimax.GAME, **problem}),
            ),
        )
        for c, (n, hp, problem) in minimax.GAME_CASES.items()
    ],
    [
        (
            "ffgg_quadratic-ffgg-cg",
            (
                "ffgg",
                "ffgg_quadratic",
                {"fine_tuner": "cg", "local_steps": 3, "clients_per_round": 2},
                "epoch",
                _problem(QUAD),
            ),
        ),
        (
            "ffgg_quadratic-ffgg_async-gd",
            ("ffgg_async", "ffgg_quadratic", {"fine_tuner": "gd", "local_steps": 3}, "epoch", _problem(QUAD)),
        ),
        (
            "ffgg_quadratic-ffgg_byzantine-cm",
            (
                "ffgg_byzantine",
                "ffgg_quadratic",
                {"byzantine": 1, "aggregator": "cm", "bucket_size": 2, "fine_tuner": "exact"},
                "epoch",
                _problem(QUAD),
            ),
        ),
        ("ffgg_quadratic-l2gd", ("l2gd", "ffgg_quadratic", {}, "epoch", _problem(QUAD))),
        (
            "ffgg_quadratic-local_gd",
            ("local_gd", "ffgg_quadratic", {"local_steps": 3}, "epoch", _problem(QUAD)),
        ),
        (
            "ffgg_quadratic-scaffold-sampled",
            (
                "scaffold",
                "ffgg_quadratic",
                {"local_steps": 3, "clients_per_round": 3},
                "epoch",
                _problem(QUAD),
            ),
        ),
        (
            "sufficient_cluster-sufficient_cluster_size",
            (
                "sufficient_cluster_size",
                "sufficient_cluster",
                {},
                "epoch",
                _problem({"name": "sufficient_cluster", "num_clients": 6, "dimension": 3}),
            ),
        ),
    ],
)


AUTOMATIC = {"lr": 0.1, "local_steps": 2, "batch_size": 4, "clients_per_round": 2}
"""An automatic case's hyper-parameters, those of them the algorithm takes (the others: its defaults)."""
STATEFUL = {  # what a checkpoint must carry of the shared options: momentum buffers, the step schedule, the
    # uniform local-step draws, the server optimizer's moments; and the sequential sums chunk by chunk
    "momentum": 0.5,
    "lr_schedule": "step",
    "lr_step_size": 2,
    "local_steps_per_client": "uniform",
    "local_steps_min": 1,
    "server_optimizer": "adam",
    "server_lr": 0.05,
    "aggregation": "sequential",
}
"""The second automatic case adds these, those of them the algorithm takes."""


def _fitting_split(cls) -> str:
    """The first personalization split of the tiny federation's DNN the algorithm accepts (none, output,
    input), for a case built automatically."""
    for split in ("none", "output", "input"):
        try:
            cls.check_model(tiny_federation("dnn", split=split).model, "model")
        except ConfigError:
            continue
        return split
    return "none"


def _valid(cls, hp: dict, fallback: dict) -> dict:
    """``hp`` where the algorithm's hyper-parameters accept it, else ``fallback``."""
    try:
        cls.Hyperparameters.from_dict(hp, "case")
    except ConfigError:
        return fallback
    return hp


def automatic_cases(cases: dict[str, tuple]) -> dict[str, tuple]:
    """Cases for every registered algorithm that ``cases`` does not cover, so that a new algorithm is resumed,
    chunked (tests/test_memory.py) and placed (tests/test_client_state.py) without a case written by hand.

    On client data: ``<name>-auto``, :data:`AUTOMATIC` on the tiny federation's DNN (4 clients; the first
    split the algorithm accepts), and ``<name>-auto-options`` with :data:`STATEFUL` too where the algorithm
    takes some of those options. On a problem: ``<problem>-<name>-auto``, the algorithm's defaults on the
    problem's defaults. A case written by hand (below) replaces these: add one where the defaults miss an
    option with state of the algorithm's own.
    """
    covered = {(name, env) for name, env, *_ in cases.values()}
    out: dict[str, tuple] = {}
    for name, impls in sorted(registry().items()):
        for env, cls in sorted(impls.items()):
            if (name, env) in covered:
                continue
            if env != FEDERATION:
                out[f"{env}-{name}-auto"] = (name, env, {}, "epoch", _problem({"name": env}))
                continue
            fields = set(cls.Hyperparameters.names())
            hp = _valid(cls, {k: v for k, v in AUTOMATIC.items() if k in fields}, {})
            make = _federation(_fitting_split(cls))
            out[f"{name}-auto"] = (name, env, hp, "epoch", make)
            options = _valid(cls, {**hp, **{k: v for k, v in STATEFUL.items() if k in fields}}, hp)
            if options != hp:
                out[f"{name}-auto-options"] = (name, env, options, "epoch", make)
    return out


CASES.update(automatic_cases(CASES))


def test_every_algorithm_has_a_resume_case():
    covered = {(name, env) for name, env, *_ in CASES.values()}
    missing = {(n, e) for n, impls in registry().items() for e in impls} - covered
    assert not missing, f"no checkpoint case for {sorted(missing)}"


def test_an_algorithm_without_a_case_gets_automatic_ones():
    """q-FedAvg has no case written here: its cases are built from its hyper-parameters' fields."""
    assert CASES["qfedavg-auto"][:4] == ("qfedavg", FEDERATION, AUTOMATIC, "epoch")
    name, env, hp, _, make = CASES["qfedavg-auto-options"]
    assert hp == {**AUTOMATIC, **STATEFUL} and make.split == "none"
    assert not any(c.startswith("fedavg-auto") for c in CASES)  # FedAvg's cases are written by hand


def _same(a, b) -> bool:
    return a == b or (isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b))


def _rows(algorithm) -> list:
    rows, client_rows = algorithm.evaluate()
    return [*rows, *client_rows]


def _assert_same_rows(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g[:-1] == w[:-1] and _same(g[-1], w[-1]), (g, w)


@pytest.mark.parametrize(
    "name,environment,hp,sampling,make", [pytest.param(*c, id=i) for i, c in CASES.items()]
)
def test_resumed_algorithm_continues_exactly(name, environment, hp, sampling, make, tmp_path):
    cls = get_algorithm(name, environment=environment)
    params = cls.Hyperparameters.from_dict(hp, "test")
    seed = 3

    def build():
        algorithm = cls(make(), params, seed, sampling)
        algorithm.rounds = (
            ROUNDS  # the run's T, as hetfl.pipeline.train.build sets it (a cosine schedule needs it)
        )
        return algorithm

    straight = build()
    schedule = participation_schedule(straight.env.num_clients, straight.clients_per_round, ROUNDS, seed)
    want = []
    for t in range(1, ROUNDS + 1):
        straight.round(t, schedule[t - 1])
        want.append(_rows(straight))

    first = build()
    got = []
    for t in range(1, STOP + 1):
        first.round(t, schedule[t - 1])
        got.append(_rows(first))
    path = tmp_path / "ckpt.pt"
    save_checkpoint(path, "key", first, STOP, b"m", b"c", 1.5)
    del first
    resumed = build()  # a fresh job: environment and algorithm rebuilt from the seed
    record = load_checkpoint(path, "key", resumed)
    assert record is not None and (record.round, record.metrics, record.elapsed_s) == (STOP, b"m", 1.5)
    for t in range(STOP + 1, ROUNDS + 1):
        resumed.round(t, schedule[t - 1])
        got.append(_rows(resumed))

    for g, w in zip(got, want, strict=True):
        _assert_same_rows(g, w)
    final, expected = resumed.state_dict(), straight.state_dict()
    assert final.keys() == expected.keys()
    for k in expected:
        assert torch.equal(final[k], expected[k]), k
    arts, expected_arts = resumed.artifacts(), straight.artifacts()
    assert arts.keys() == expected_arts.keys()
    for k in expected_arts:
        np.testing.assert_array_equal(arts[k], expected_arts[k])


def test_a_checkpoint_of_another_run_or_a_broken_file_is_ignored(tmp_path):
    cls = get_algorithm("fedavg")
    params = cls.Hyperparameters.from_dict({"lr": 0.1, "local_steps": 2, "batch_size": 4}, "t")
    algorithm = cls(tiny_federation(), params, 0)
    algorithm.round(1, torch.arange(4))
    path = tmp_path / "c.pt"
    save_checkpoint(path, "run-a", algorithm, 1, b"", b"", 0.0)
    fresh = cls(tiny_federation(), params, 0)
    before = {k: v.clone() for k, v in fresh.state_dict().items()}
    assert load_checkpoint(path, "run-b", fresh) is None
    path.write_bytes(b"not a checkpoint")
    assert load_checkpoint(path, "run-a", fresh) is None
    assert load_checkpoint(tmp_path / "missing.pt", "run-a", fresh) is None
    assert all(torch.equal(v, before[k]) for k, v in fresh.state_dict().items())


def test_checkpoint_policy_and_config_errors():
    policy = Checkpointing(Path("x"), "k", every_rounds=3, every_seconds=0)
    assert [t for t in range(1, 10) if policy.due(t, 0.0)] == [3, 6, 9]
    by_time = Checkpointing(Path("x"), "k", every_rounds=None, every_seconds=60)
    assert not by_time.due(1, 59.9) and by_time.due(1, 60.0)
    assert resolve_checkpoint(None) == {"every_rounds": None, "every_seconds": 300}
    assert resolve_checkpoint({"every_rounds": 5})["every_rounds"] == 5
    for bad in ({"every_rounds": 0}, {"every_seconds": -1}, {"often": 1}):
        with pytest.raises(ConfigError, match="checkpoint"):
            resolve_checkpoint(bad)
    with pytest.raises(ConfigError, match="checkpoint.every_rounds"):
        build_suite({"studies": {"t": TINY_STUDY}, "checkpoint": {"every_rounds": "often"}})


# A job killed right after its checkpoint at round KILL (os._exit: no cleanup, like SIGKILL) and rerun.
KILL = 6
JOB = textwrap.dedent(
    """
    import json, os, sys
    from pathlib import Path
    import hetfl.pipeline.train as t

    real = t.save_checkpoint
    def save_then_die(path, key, algorithm, round_done, *rest):
        real(path, key, algorithm, round_done, *rest)
        if round_done == {kill}:
            os._exit(137)
    t.save_checkpoint = save_then_die
    spec, seed, data, part, out, ckpt = json.loads(sys.argv[1])
    out = Path(out)
    paths = t.RunOutputs(out / "metrics.csv", out / "clients.csv", out / "run.json", out / "final.pt", out / "a.npz")
    t.train(spec, seed, data, part, paths, checkpoint=t.Checkpointing(Path(ckpt), "key", 2, 0))
    """
).format(kill=KILL)


@pytest.mark.parametrize("run", ["pfedme", "fedavg"])
def test_a_killed_job_resumes_to_identical_outputs(run, tmp_path):
    study = build_suite({"studies": {"t": {**TINY_STUDY, "rounds": 10, "eval_every": 3}}}).studies["t"]
    dataset = load_dataset(study.dataset, tmp_path)
    data, part = tmp_path / "data.npz", tmp_path / "part.npz"
    dataset.save(data)
    make_partition(study.partition, dataset, study.partition_seed(0)).save(part)
    spec = json.loads(study.run_json(run))

    def outputs(name):
        out = tmp_path / name
        out.mkdir()
        return out, RunOutputs(
            out / "metrics.csv", out / "clients.csv", out / "run.json", out / "final.pt", out / "a.npz"
        )

    _, straight = outputs("straight")
    train(spec, 0, data, part, straight)

    out, paths = outputs("killed")
    ckpt = tmp_path / "ckpt" / "c.pt"
    args = json.dumps([spec, 0, str(data), str(part), str(out), str(ckpt)])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(SRC), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-c", JOB, args], capture_output=True, text=True, env=env)
    assert proc.returncode == 137, proc.stderr[-2000:]
    assert ckpt.is_file() and not paths.info.exists()  # killed: no run record, a checkpoint left

    info = train(spec, 0, data, part, paths, checkpoint=Checkpointing(ckpt, "key", 2, 0))
    assert info.resumed_from_round == KILL and info.rounds_done == 10
    assert not ckpt.exists()  # removed once the run is done
    assert paths.metrics.read_bytes() == straight.metrics.read_bytes()
    assert paths.client_metrics.read_bytes() == straight.client_metrics.read_bytes()
    a, b = torch.load(paths.model, weights_only=True), torch.load(straight.model, weights_only=True)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_run_key_changes_with_spec_seed_and_code():
    spec = {"a": 1}
    assert checkpoint_key(spec, 0, "c") == checkpoint_key({"a": 1}, 0, "c")
    assert (
        len(
            {
                checkpoint_key(spec, 0, "c"),
                checkpoint_key({"a": 2}, 0, "c"),
                checkpoint_key(spec, 1, "c"),
                checkpoint_key(spec, 0, "d"),
            }
        )
        == 4
    )
