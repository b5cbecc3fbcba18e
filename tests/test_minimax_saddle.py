"""The saddle points of the fair objective on client data (``minimax_saddle``) and the distances of the minimax
runs to them (``reference_from``): Sharma, Panda, Joshi (TMLR 2023), Theorem 1 and Corollary 1.1 on data.

- The solver's (x*, y*) is a saddle point of F (and of F̃): checked against F computed client by client with a
  plain loop (its definition, ``objectives.Fair``), by the saddle inequalities F(x*, y) ≤ F(x*, y*) ≤ F(x, y*)
  and y* = Π_Δ(F(x*)/λ).
- The paper's claim: with deterministic gradients, Local SGDA ends near the saddle point of F̃ and Fed-Norm-SGDA
  near that of F, each far from the other's.
- The surrogate weights are the federated runs' own (the same τ_i, drawn from the same stream).
- ``reference_from`` is checked by the config, carried by the workflow, and gives the distances.
"""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from hetfl.algorithms import get_algorithm
from hetfl.algorithms.minimax.projections import project_simplex
from hetfl.engine.execution import LoopModel
from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite
from hetfl.testing import tiny_federation
from tests.workflow_repo import copy_repo, snakemake

LAM, MU = 0.5, 0.1
WORK = {"tau_min": 1, "tau_max": 8, "tau_draw": "uniform", "tau_redraw": "fixed", "tau_unit": "steps"}
FAIR = {"objective": "fair", "fair_lambda": LAM, "l2_x": MU, **WORK}


def federation():
    return tiny_federation("mlr", sizes=(20, 30, 10, 25))


def solved(fed, seed: int = 0):
    cls = get_algorithm("minimax_saddle")
    alg = cls(fed, cls.Hyperparameters.from_dict(dict(FAIR), "k"), seed)
    alg.rounds = 1
    alg.round(1, torch.arange(fed.num_clients))
    return alg


def plain_objective(fed, weights: torch.Tensor, x: dict, y: torch.Tensor) -> float:
    """Σ_i w_i f_i(x, y), client by client: f_i = Σ_c y_c F_{c,i}(x) − (λ/2)‖y‖² + (μ/2)‖x‖², F_{c,i} the mean
    over client i's samples of class c's losses over π_c (Eq. (8), ``objectives.Fair``)."""
    train, k = fed.train, fed.model.num_classes
    prior = torch.bincount(train.y[: int(train.offsets[len(weights)])], minlength=k).double()
    prior = prior / prior.sum()
    total = 0.0
    for i, w in enumerate(weights.tolist()):
        lo, hi = int(train.offsets[i]), int(train.offsets[i + 1])
        logits = fed.model.forward({n: v.double() for n, v in x.items()}, train.x[lo:hi].double()[None])[0]
        losses = F.cross_entropy(logits.T, train.y[lo:hi], reduction="none")
        f_c = torch.zeros(k, dtype=torch.float64).index_add(0, train.y[lo:hi], losses) / (hi - lo) / prior
        ridge = 0.5 * MU * sum(float(v.double().pow(2).sum()) for v in x.values())
        total += w * (float(f_c @ y.double()) - 0.5 * LAM * float(y.double() @ y.double()) + ridge)
    return total


@pytest.mark.parametrize("model", ["saddle", "surrogate_saddle"])
def test_the_solution_is_the_saddle_point_of_its_objective_computed_client_by_client(model):
    fed = federation()
    alg = solved(fed)
    weights = alg.p if model == "saddle" else alg.objective.surrogate
    x, y = alg.x[model], alg.y[model][0]
    assert alg.stats[f"grad_norm_{model}"] < 1e-6
    value = plain_objective(fed, weights, x, y)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):  # F(x*, y) ≤ F(x*, y*) for y in the simplex
        other = project_simplex(torch.rand(1, len(y), generator=gen, dtype=torch.float64))[0]
        assert plain_objective(fed, weights, x, other) <= value + 1e-12
        # F(x*, y*) ≤ F(x, y*) near x*
        moved = {k: v + 1e-2 * torch.randn(v.shape, generator=gen, dtype=v.dtype) for k, v in x.items()}
        assert plain_objective(fed, weights, moved, y) >= value - 1e-12
    # y* = Π_Δ(F(x*)/λ): the inner maximum in closed form
    k = fed.model.num_classes
    f_c = torch.tensor(
        [plain_objective(fed, weights, x, torch.eye(k, dtype=torch.float64)[c]) for c in range(k)],
        dtype=torch.float64,
    )
    ridge = 0.5 * MU * sum(float(v.pow(2).sum()) for v in x.values())
    f_c = f_c - ridge + 0.5 * LAM  # the vertex's own −(λ/2)‖e_c‖² and the ridge back out
    assert torch.allclose(project_simplex((f_c / LAM)[None])[0], y.double(), atol=1e-8)
    phi = "phi_saddle" if model == "saddle" else "phi_surrogate_saddle"
    assert alg.stats[phi] == pytest.approx(value, abs=1e-10)


@pytest.mark.parametrize(
    "device",
    [
        "cpu",
        pytest.param(
            "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
        ),
    ],
)
def test_another_execution_finds_the_same_saddle_points_to_the_solvers_tolerance(device):
    """The loop (``execution: loop``) and CUDA's kernels differ from the batched CPU run in the last bits, which
    steer L-BFGS's path: the solutions agree to the solver's tolerance (μ-strong convexity: ‖x − x'‖ ≤ 2 tol/μ),
    not to the byte (``tests/test_memory.py``: ``SOLVED_TO_TOLERANCE``)."""
    want = solved(federation())
    fed = tiny_federation("mlr", sizes=(20, 30, 10, 25), device=device)
    if device == "cpu":
        fed.model = LoopModel(fed.model)
    got = solved(fed)
    for model in want.models:
        for k, v in want.x[model].items():
            torch.testing.assert_close(got.x[model][k].cpu(), v, rtol=0, atol=1e-6)
        torch.testing.assert_close(got.y[model].cpu(), want.y[model], rtol=0, atol=1e-6)
    assert got.stats["dist_between_saddles"] == pytest.approx(want.stats["dist_between_saddles"], abs=1e-6)


def test_the_surrogate_weights_are_those_of_the_federated_runs_of_the_seed():
    fed = federation()
    alg = solved(fed, seed=3)
    for name in ("local_sgda", "fed_norm_sgda"):
        cls = get_algorithm(name)
        run = cls(fed, cls.Hyperparameters.from_dict(dict(FAIR), "k"), 3)
        assert torch.equal(run.objective.surrogate, alg.objective.surrogate)
        assert torch.equal(run.work.steps(), alg.work.steps())
    assert not torch.allclose(alg.objective.surrogate, alg.p)  # unequal work: F̃ is not F
    assert alg.stats["dist_between_saddles"] > 0.1


def run_to_the_end(name: str, fed, reference: dict, lr: float, rounds: int) -> dict[str, float]:
    cls = get_algorithm(name)
    hp = {
        **FAIR,
        "batch_size": 64,
        "lr_x": lr,
        "lr_y": lr,
        "lr_milestones": [],
    }  # full batches: deterministic
    alg = cls(fed, cls.Hyperparameters.from_dict(hp, "k"), 0)
    alg.rounds, alg.reference = rounds, reference
    for t in range(1, rounds + 1):
        alg.round(t, torch.arange(fed.num_clients))
    return dict(alg.evaluate()[0])


def test_local_sgda_goes_to_the_surrogates_saddle_and_fed_norm_sgda_to_the_true_one():
    """Theorem 1 / Corollary 1.1: naive averaging of unequal local work converges to F̃'s stationary point,
    the normalized one to F's; the gap left is the local steps' own drift, which shrinks with the step."""
    fed = federation()
    saddle = solved(fed)
    reference = {m: {**saddle.x[m], "y": saddle.y[m]} for m in saddle.models}
    gap = saddle.stats["dist_between_saddles"]
    coarse = {
        name: run_to_the_end(name, fed, reference, 0.1, 300) for name in ("local_sgda", "fed_norm_sgda")
    }
    assert coarse["local_sgda"]["dist_surrogate_global"] < 0.25 * coarse["local_sgda"]["dist_saddle_global"]
    assert (
        coarse["fed_norm_sgda"]["dist_saddle_global"]
        < 0.25 * coarse["fed_norm_sgda"]["dist_surrogate_global"]
    )
    assert coarse["local_sgda"]["dist_saddle_global"] > 0.5 * gap
    fine = run_to_the_end("local_sgda", fed, reference, 0.05, 600)
    assert fine["dist_surrogate_global"] < 0.75 * coarse["local_sgda"]["dist_surrogate_global"]


def test_l2_x_is_the_fair_objectives_only():
    cls = get_algorithm("local_sgda")
    with pytest.raises(ConfigError) as err:
        cls.Hyperparameters.from_dict({"objective": "robust", "l2_x": 0.1}, "k")
    assert err.value.key == "k.l2_x"
    for name in ("fair_lambda", "l2_x"):
        with pytest.raises(ConfigError) as err:
            get_algorithm("minimax_saddle").Hyperparameters.from_dict({name: 0.0}, "k")
        assert err.value.key == f"k.{name}"


STUDY = {
    "dataset": {"name": "digits"},
    "partition": {"scheme": "dirichlet", "clients": 4, "alpha": 0.5},
    "model": {"name": "mlr"},
    "rounds": 3,
    "seeds": [0],
    "dtype": "float64",
    "defaults": {**FAIR, "batch_size": 16, "lr_milestones": []},
    "figures": [
        {
            "name": "distances",
            "metrics": ["dist_saddle_global", "dist_surrogate_global"],
            "runs": ["local_sgda"],
        }
    ],
    "runs": {
        "saddle": {"algorithm": "minimax_saddle", "rounds": 1},
        "local_sgda": {"algorithm": "local_sgda", "reference_from": "saddle"},
        "fed_norm_sgda": {"algorithm": "fed_norm_sgda"},
    },
}


def test_reference_from_is_in_the_spec_only_where_set():
    study = build_suite({"studies": {"s": STUDY}}).studies["s"]
    assert json.loads(study.run_json("local_sgda"))["reference_from"] == "saddle"
    assert "reference_from" not in json.loads(study.run_json("fed_norm_sgda"))


@pytest.mark.parametrize(
    ("run", "fragment"),
    [
        ({"algorithm": "local_sgda", "reference_from": "nope"}, "unknown run 'nope'"),
        ({"algorithm": "local_sgda", "reference_from": "x"}, "unknown run 'x'"),
        (
            {"algorithm": "local_sgda", "reference_from": "fed_norm_sgda"},
            "has no models saddle, surrogate_saddle",
        ),
        ({"algorithm": "fedavg", "lr": 0.1, "reference_from": "saddle"}, "measures no distance"),
        ({"algorithm": "local_sgda", "reference_from": "late"}, "must start from no run"),
        ({"algorithm": "local_sgda", "reference_from": "saddle", "l2_x": 0.2}, "l2_x is 0.2 here but 0.1"),
        ({"algorithm": "local_sgda", "reference_from": "saddle", "momentum": 0.9}, "momentum is 0.9 here"),
        (
            {"algorithm": "local_sgda", "reference_from": "saddle", "partition": {"alpha": 1.0}},
            "partition is",
        ),
    ],
)
def test_a_bad_reference_from_is_a_config_error_naming_it(run, fragment):
    runs = {**STUDY["runs"], "x": run, "late": {"algorithm": "minimax_saddle", "init_from": "fed_norm_sgda"}}
    with pytest.raises(ConfigError) as err:
        build_suite({"studies": {"s": {**STUDY, "runs": runs}}})
    assert err.value.key == "studies.s.runs.x.reference_from" and fragment in err.value.message


@pytest.mark.workflow
def test_the_workflow_hands_the_reference_runs_models_to_the_run(tmp_path):
    repo = copy_repo(tmp_path / "wf", {"studies": {"s": STUDY}})
    snakemake(repo)
    metrics = pd.read_csv(repo / "results/runs/s/local_sgda/seed=0/metrics.csv")
    dist = metrics[metrics["metric"].isin(["dist_saddle_global", "dist_surrogate_global"])]
    assert len(dist) == 2 * 4 and dist["value"].gt(0).all()  # rounds 0..3, both distances
    other = pd.read_csv(repo / "results/runs/s/fed_norm_sgda/seed=0/metrics.csv")
    assert not other["metric"].str.startswith("dist_").any()  # no reference_from: no distances
    saddle = pd.read_csv(repo / "results/runs/s/saddle/seed=0/metrics.csv")
    assert saddle[saddle["metric"] == "grad_norm_saddle"]["value"].iloc[-1] < 1e-6
