"""Every collaborative algorithm matches its sequential per-client (per-pair) reference loop on a tiny problem.

Cases are named (``CASES["cobo-every2"]``) and selected by name; the names are the test ids.
"""

from __future__ import annotations

import pytest
import torch

from hetfl.reference import references
from hetfl.testing import follow_reference, tiny_federation
from tests.test_regression import regression_federation

ROUNDS = 3
OPT = {"momentum": 0.9, "weight_decay": 0.01, "lr_schedule": "step", "lr_step_size": 2, "lr_gamma": 0.5}

CASES = {  # name -> (algorithm, hyper-parameters)
    "all_for_one-binary": ("all_for_one", {"lr": 0.2, "local_steps": 2, "batch_size": 3, "b_alpha": 4}),
    "all_for_one-tau2-sgdm": (
        "all_for_one",
        {"lr": 0.1, "local_steps": 3, "batch_size": 4, "b_alpha": 2, "tau": 2, "lam": 0.3, **OPT},
    ),
    "all_for_one-tau_epochs": (
        "all_for_one",
        {
            "lr": 0.1,
            "local_steps": 4,
            "batch_size": 3,
            "b_alpha": 2,
            "tau_epochs": 0.6,
        },  # τ = ⌊2.4 + 1/2⌋ = 2
    ),
    "all_for_one-continuous-theory": (
        "all_for_one",
        {
            "lr": 0.05,
            "local_steps": 2,
            "batch_size": 3,
            "b_alpha": 5,
            "tau": "round",
            "rule": "continuous",
            "weights": "theory",
            "client_size": "samples",
            "ratio_numerator": "norm",
        },
    ),
    "all_for_one-binary-theory": (
        "all_for_one",
        {"lr": 0.1, "local_steps": 2, "batch_size": 3, "b_alpha": 3, "weights": "theory"},
    ),
    "all_for_one_oracle-sgdm": ("all_for_one_oracle", {"lr": 0.2, "local_steps": 2, "batch_size": 3, **OPT}),
    "all_for_one_oracle-samples": (
        "all_for_one_oracle",
        {"lr": 0.2, "local_steps": 2, "batch_size": 5, "client_size": "samples"},
    ),
    "local_sgdm-sgdm": ("local_sgdm", {"lr": 0.2, "local_steps": 3, "batch_size": 4, **OPT}),
    "fedavg_sgdm-sgdm": ("fedavg_sgdm", {"lr": 0.2, "local_steps": 3, "batch_size": 4, **OPT}),
    "fedavg_sgdm-uniform": (
        "fedavg_sgdm",
        {"lr": 0.2, "local_steps": 2, "batch_size": 5, "client_weights": "uniform"},
    ),
    "ditto-sgdm": ("ditto", {"lr": 0.1, "local_steps": 2, "batch_size": 3, "lam": 0.5, **OPT}),
    "apfl-sgdm": ("apfl", {"lr": 0.1, "local_steps": 2, "batch_size": 3, **OPT}),
    "apfl-adaptive": (
        "apfl",
        {
            "lr": 0.1,
            "local_steps": 2,
            "batch_size": 4,
            "adaptive": True,
            "mix_lr": 0.5,
            "client_weights": "samples",
        },
    ),
    "cobo-sgdm": (
        "cobo",
        {"lr": 0.1, "local_steps": 2, "batch_size": 3, "pair_batch": 4, "gamma_c": 0.5, **OPT},
    ),
    # the authors' code's schedule: every iteration, each pair with probability 2/N, batches of b
    "cobo-sampled": ("cobo", {"lr": 0.1, "local_steps": 3, "batch_size": 3, "gamma_c": 0.5}),
    "cobo-fixed-probability": (
        "cobo",
        {"lr": 0.1, "local_steps": 3, "batch_size": 3, "gamma_c": 0.5, "pair_probability": 0.3},
    ),
    # every pair every 2 iterations, batches of 2 (Philippenko et al.'s work-in-progress schedule)
    "cobo-every2": (
        "cobo",
        {
            "lr": 0.1,
            "local_steps": 3,
            "batch_size": 3,
            "pair_batch": 2,
            "pair_every": 2,
            "pair_probability": 1.0,
            "rho": 0.3,
        },
    ),
    "wga_bc-sgdm": ("wga_bc", {"lr": 0.1, "local_steps": 2, "batch_size": 3, **OPT}),
    "wga_bc-weighted": ("wga_bc", {"lr": 0.1, "local_steps": 2, "batch_size": 4, "weight": 0.1, "beta": 0.5}),
}
CLIP = {  # the shared client optimizer's clipping, with momentum, weight decay and each schedule
    "step": {**OPT, "clip_norm": 0.5},
    "cosine": {
        "momentum": 0.5,
        "weight_decay": 0.02,
        "clip_norm": 0.5,
        "lr_schedule": "cosine",
        "lr_min": 0.01,
    },
}
CASES.update(  # <case>-clip-<schedule>: a case with OPT, its OPT replaced by CLIP[schedule]
    {
        f"{name}-clip-{schedule}": (
            CASES[name][0],
            {**{k: v for k, v in CASES[name][1].items() if k not in OPT}, **options},
        )
        for name in (
            "all_for_one-tau2-sgdm",
            "all_for_one_oracle-sgdm",
            "local_sgdm-sgdm",
            "fedavg_sgdm-sgdm",
            "ditto-sgdm",
            "apfl-sgdm",
            "cobo-sgdm",
            "wga_bc-sgdm",
        )
        for schedule, options in CLIP.items()
    }
)


def params(*names: str) -> list:
    """``pytest.param`` of the named cases (all of them without names), each with its name as id."""
    return [pytest.param(*CASES[n], id=n) for n in names or CASES]


def weights_check(atol: float):
    """The ``check`` of ``follow_reference`` for what the references yield besides models: All-for-one's and
    CoBo's collaboration weights ``alpha`` ``[N, N]`` (to 1e-12) and APFL's mixing weights ``mix`` ``[N]``."""

    def check(alg, ref: dict, t: int) -> None:
        compared = []
        if "alpha" in ref:
            compared.append(("alpha", alg.alpha, torch.tensor(ref["alpha"], dtype=torch.float64), 1e-12))
        if "mix" in ref:
            compared.append(("mix", alg.mix, ref["mix"].to(alg.mix.dtype), atol))
        for name, got, want, tol in compared:
            try:
                torch.testing.assert_close(got, want, rtol=0, atol=tol)
            except AssertionError as err:
                raise AssertionError(f"round {t}, {name}: {err}") from None

    return check


def run_both(name, hp, fed, sampling="epoch", seed=3, atol=1e-10):
    """``follow_reference`` of algorithm ``name`` for ROUNDS rounds, with the weights compared too."""
    return follow_reference(
        fed,
        name,
        hp,
        references()[name],
        sampling=sampling,
        seed=seed,
        rounds=ROUNDS,
        atol=atol,
        check=weights_check(atol),
    )


@pytest.mark.parametrize("model", ["mlr", "cnn"])
@pytest.mark.parametrize("name,hp", params())
def test_batched_matches_reference(name, hp, model):
    fed = tiny_federation(model)
    fed.cluster = torch.tensor([0, 1, 0, 1])
    run_both(name, hp, fed)


@pytest.mark.parametrize(
    "name,hp",
    params(
        "all_for_one-binary",
        "all_for_one-continuous-theory",
        "all_for_one_oracle-sgdm",
        "cobo-sgdm",
        "wga_bc-sgdm",
    ),
)
def test_regression_and_other_samplings(name, hp):
    fed = regression_federation("linear", bias=True, outputs=2)
    fed.cluster = torch.tensor([0, 0, 1, 1])
    for sampling in ("sequential", "replacement"):
        run_both(name, hp, fed, sampling)


def test_float32_matches_reference():
    hp = CASES["all_for_one-tau2-sgdm"][1]
    run_both("all_for_one", hp, tiny_federation("dnn", dtype=torch.float32), atol=1e-5)


def test_all_for_one_skips_pairs_without_weight():
    """With binary weights some α_ik are 0 on random data: those pairs draw no batch and cost no gradient."""
    alg = run_both("all_for_one", CASES["all_for_one-tau2-sgdm"][1], tiny_federation("mlr"))
    assert (alg.alpha == 0).any()
