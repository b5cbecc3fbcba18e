"""The collaborative family in the pipeline: Figure 1's computation, the Heart stand-in, config errors, training
jobs (artifacts, divergence), the weight heatmaps, and the shipped study file."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from hetfl.data import dataset_info, load_dataset, make_partition
from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite, load_config
from hetfl.pipeline.figures.heatmap import heatmap_matrices
from hetfl.pipeline.plotting import draw, normalize_figures
from hetfl.pipeline.train import RunOutputs, train
from hetfl.problems import build_problem, normalize_problem_spec

ROOT = Path(__file__).resolve().parents[1]
LSR = {"name": "synthetic_lsr", "num_users": 6, "dimension": 2, "samples_per_user": 60, "seed": 1}


# --- Figure 1 ---------------------------------------------------------------------------------------------


def test_sufficient_cluster_counts_match_the_closed_form():
    """With A_i = I, b²_1k = 2‖ξ_1 − ξ_k‖², c = 0, μ = 2: N_1*(ε) = #{k : ‖ξ_1 − ξ_k‖² < 2ε} (Definition 2 with
    Property 1 and b² as in Lemma 2's proof), recomputed with numpy; non-decreasing in ε, 1 ≤ N* ≤ N."""
    from hetfl.algorithms.collaborative.sufficient_cluster import SufficientClusterSize

    spec = normalize_problem_spec({"name": "sufficient_cluster", "num_clients": 12, "dimension": 5}, "p")
    problem = build_problem(spec, 7, torch.device("cpu"), torch.float64)
    hp = SufficientClusterSize.Hyperparameters.from_dict(
        {"v": 0.1, "log10_eps_start": -4.0, "log10_eps_step": 0.5}, "t"
    )
    alg = SufficientClusterSize(problem, hp, 7)
    xi = 0.1 * problem.z.numpy()
    sizes = []
    for t in range(12):
        alg.round(t, None)
        rows, client_rows = alg.evaluate()
        eps = 10.0 ** dict(rows)["log10_eps"]
        expected = [int((np.sum((xi[i] - xi) ** 2, 1) < 2 * eps).sum()) for i in range(12)]
        assert [int(v) for _, _, v in client_rows] == expected
        sizes.append(dict(rows)["cluster_size"])
    assert sizes == sorted(sizes) and sizes[0] >= 1 and sizes[-1] == 12 and sizes[0] < 12


def test_sufficient_cluster_transition_moves_two_decades_per_decade_of_v():
    """Figure 1: the transition sits at ε ≈ ‖ξ_1 − ξ_k‖²/2 ∝ v², so N*(ε) for v equals N*(100 ε) for 10 v."""
    from hetfl.algorithms.collaborative.sufficient_cluster import SufficientClusterSize

    problem = build_problem(
        normalize_problem_spec({"name": "sufficient_cluster"}, "p"), 127, torch.device("cpu"), torch.float64
    )
    curves = {}
    for v in (0.01, 0.1):
        hp = SufficientClusterSize.Hyperparameters.from_dict({"v": v}, "t")
        alg = SufficientClusterSize(problem, hp, 127)
        curves[v] = []
        for t in range(7):
            alg.round(t, None)
            curves[v].append(dict(alg.evaluate()[0])["cluster_size"])
    assert curves[0.01][:5] == curves[0.1][2:]
    assert curves[0.1][0] == 1 and curves[0.01][-1] == 20


# --- the Heart Disease stand-in -------------------------------------------------------------------------


def test_synthetic_heart_has_the_flamby_client_sizes(tmp_path):
    spec = {"name": "synthetic_heart"}
    data = load_dataset(spec, tmp_path)
    assert data.x.shape == (740, 13) and set(np.unique(data.y)) == {0, 1}
    assert list(dataset_info(spec).user_counts) == [303, 261, 46, 130]
    part = make_partition({"scheme": "natural", "test_fraction": 0.34}, data, 0)
    assert [len(t) for t in part.train] == [199, 172, 30, 85]
    assert [len(t) for t in part.test] == [104, 89, 16, 45]
    again = load_dataset(spec, tmp_path)
    np.testing.assert_array_equal(data.x, again.x)
    other = load_dataset(
        {**spec, "client_shift": 0.0, "feature_shift": 0.0, "intercept_shift": 0.0}, tmp_path
    )
    assert not np.array_equal(data.y, other.y)


# --- config errors ----------------------------------------------------------------------------------------


def study(runs, **changes):
    s = {
        "dataset": LSR,
        "partition": {"scheme": "natural", "test_fraction": 0.2},
        "model": {"name": "linear", "bias": False},
        "rounds": 2,
        "seeds": [0],
        "dtype": "float64",
        "runs": runs,
    }
    s.update(changes)
    return {"studies": {"c": s}}


@pytest.mark.parametrize(
    "run,key,fragment",
    [
        ({"algorithm": "all_for_one", "rule": "soft"}, "rule", "one of binary, continuous"),
        (
            {"algorithm": "all_for_one", "rule": "continuous", "lam": 0.5},
            "lam",
            "only used with rule: binary",
        ),
        ({"algorithm": "all_for_one", "lam": 1.5}, "lam", "[0, 1]"),
        ({"algorithm": "all_for_one", "tau": "epoch"}, "tau", "int or one of round"),
        ({"algorithm": "all_for_one", "tau": 0}, "tau", "> 0"),
        ({"algorithm": "all_for_one", "b_alpha": 0}, "b_alpha", "> 0"),
        ({"algorithm": "all_for_one", "weights": "optimal"}, "weights", "normalized, theory"),
        ({"algorithm": "local_sgdm", "momentum": 1.0}, "momentum", "[0, 1)"),
        ({"algorithm": "fedavg_sgdm", "lr_gamma": 0}, "lr_gamma", "(0, 1]"),
        ({"algorithm": "apfl", "mix_alpha": 2.0}, "mix_alpha", "[0, 1]"),
        ({"algorithm": "wga_bc", "beta": 0.0}, "beta", "(0, 1]"),
        ({"algorithm": "cobo", "rho": -1.0}, "rho", ">= 0"),
        (
            {"algorithm": "ditto", "lamda": 1.0},
            "lamda",
            "allowed: batch_size, client_weights, clip_norm, lam",
        ),
    ],
)
def test_bad_hyperparameters_name_the_key(run, key, fragment):
    with pytest.raises(ConfigError) as err:
        build_suite(study({"x": run}))
    assert err.value.key == f"studies.c.runs.x.{key}"
    assert fragment.replace(">= 0", "≥ 0") in str(err.value) or fragment in str(err.value)


def test_a_problem_algorithm_is_refused_on_client_data():
    with pytest.raises(ConfigError, match="does not run on client data"):
        build_suite(study({"x": {"algorithm": "sufficient_cluster_size"}}))


def test_heatmap_figures_are_validated():
    runs, metrics = ["a41", "local"], {"test_log10_loss"}
    fig = normalize_figures(
        [{"name": "w", "kind": "heatmap", "runs": ["a41"], "at": [1, 5]}], runs, metrics, "k"
    )[0]
    assert fig == {"kind": "heatmap", "metrics": [], "runs": ["a41"], "name": "w", "labels": {}, "title": "",
                   "artifact": "alpha", "at": [1, 5], "seed": None}  # fmt: skip
    for entry, key in (
        ({"name": "w", "kind": "heatmap", "runs": ["fedprox"], "at": [1]}, "k[0].runs"),
        ({"name": "w", "kind": "heatmap", "runs": ["a41"], "at": [5, 1]}, "k[0].at"),
        ({"name": "w", "kind": "heatmap", "runs": ["a41"], "at": []}, "k[0].at"),
        ({"name": "w", "kind": "heatmap", "runs": ["a41"], "at": [1], "metrics": ["x"]}, "k[0].metrics"),
        ({"name": "w", "kind": "heatmap", "runs": ["a41"], "at": [1], "seed": -1}, "k[0].seed"),
        ({"name": "w", "kind": "heatmap", "runs": ["a41"], "at": [1], "artifact": "../x"}, "k[0].artifact"),
    ):
        with pytest.raises(ConfigError) as err:
            normalize_figures([entry], runs, metrics, "k")
        assert err.value.key == key


def test_a_heatmap_past_its_runs_last_round_is_refused():
    """A round past a run's last would draw the last matrix under a round the run never reached."""
    runs = {"a41": {"algorithm": "all_for_one"}, "long": {"algorithm": "all_for_one", "rounds": 5}}
    fig = {"name": "w", "kind": "heatmap", "runs": ["a41"], "at": [1, 2]}
    assert build_suite(study(runs, figures=[fig])).studies["c"].figures[0]["at"] == [1, 2]
    for at, figure_runs in (([1, 3], ["a41"]), ([1, 3], ["a41", "long"])):
        with pytest.raises(ConfigError, match="past the last round of its runs \\(2\\)") as err:
            build_suite(study(runs, figures=[{**fig, "at": at, "runs": figure_runs}]))
        assert err.value.key == "studies.c.figures[0].at"
    long = {**fig, "runs": ["long"], "at": [5]}
    assert build_suite(study(runs, figures=[long])).studies["c"].figures[0]["at"] == [5]


def test_the_shipped_study_files_resolve():
    for name, studies in (
        ("config", {"collab_fig1", "collab_synth_d2", "collab_synth_d10", "collab_mnist", "collab_heart"}),
        ("paper", {"collab_mnist_paper", "collab_cifar10_paper"}),
    ):
        suite = build_suite(load_config([ROOT / f"config/{name}.yaml"], root=ROOT))
        assert set(suite.studies) >= studies
        assert all(suite.studies[s].seeds == [127, 496, 1729] for s in studies)


def test_the_heart_study_runs_on_the_real_data_with_table_s1():
    """Figure 3(c), Table 2: FLamby's Heart Disease with its own split, Table S1's setting (b = 1, lr 0.05,
    StepLR(5, 0.1), b_alpha = 16, weights once an epoch of I = floor(486 / 4) iterations), 25 epochs."""
    study = build_suite(load_config([ROOT / "config/config.yaml"], root=ROOT)).studies["collab_heart"]
    assert study.dataset["name"] == "fed_heart_disease" and study.partition == {
        "scheme": "natural",
        "clients": 4,
    }
    assert study.rounds == 25 and study.seeds == [127, 496, 1729]
    assert set(study.runs) == {"a41_bin", "a41_cont", "local", "fedavg", "ditto", "cobo", "wga_bc", "apfl"}
    for spec in study.runs.values():
        hp = spec.hyperparameters
        assert (hp["lr"], hp["batch_size"], hp["local_steps"]) == (0.05, 1, (199 + 172 + 30 + 85) // 4)
        assert (hp["lr_schedule"], hp["lr_step_size"], hp["lr_gamma"]) == ("step", 5, 0.1)
    assert all(study.runs[r].hyperparameters["b_alpha"] == 16 for r in ("a41_bin", "a41_cont"))
    cobo = study.runs["cobo"].hyperparameters  # CoBo's own schedule: not the study's b_alpha and tau
    assert (cobo["pair_batch"], cobo["pair_every"], cobo["pair_probability"]) == (None, 1, None)


# --- training jobs ----------------------------------------------------------------------------------------


def _train(tmp_path, runs, rounds=4, **changes):
    s = build_suite(study(runs, rounds=rounds, **changes)).studies["c"]
    data = load_dataset(s.dataset, tmp_path)
    data.save(tmp_path / "d.npz")
    make_partition(s.partition, data, 0).save(tmp_path / "p.npz")
    out = {}
    for label in runs:
        paths = RunOutputs(*(tmp_path / f"{label}.{n}" for n in ("csv", "c.csv", "json", "pt", "npz")))
        info = train(json.loads(s.run_json(label)), 0, tmp_path / "d.npz", tmp_path / "p.npz", paths)
        out[label] = (info, pd.read_csv(paths.metrics), paths)
    return out


def test_training_records_the_weight_matrices_and_their_metrics(tmp_path):
    runs = {
        "a41": {
            "algorithm": "all_for_one",
            "lr": 0.2,
            "batch_size": 2,
            "local_steps": 3,
            "b_alpha": 2,
            "tau": 2,
        },
        "opt": {"algorithm": "all_for_one_oracle", "lr": 0.2, "batch_size": 2, "local_steps": 3},
    }
    out = _train(tmp_path, runs, eval_every=2)
    info, metrics, paths = out["a41"]
    assert info.status == "ok"
    with np.load(paths.artifacts) as art:
        alpha, rounds, iters = art["alpha"], art["alpha_round"], art["alpha_iteration"]
        assert alpha.shape == (6, 6, 6) and art["ratio"].shape == (6, 6, 6)  # iterations 0, 2, ..., 10
        assert list(iters) == [0, 2, 4, 6, 8, 10] and list(rounds) == [1, 1, 2, 3, 3, 4]
        np.testing.assert_allclose(alpha.sum(2), 1.0)
        assert list(art["cluster"]) == [0, 1, 0, 1, 0, 1]
    names = set(metrics["metric"])
    assert {"test_log10_loss", "train_log10_loss", "in_cluster_weight", "collab_fraction"} <= names
    share = metrics[(metrics["metric"] == "in_cluster_weight") & (metrics["round"] == 4)]["value"].item()
    same = np.equal.outer(np.arange(6) % 2, np.arange(6) % 2)
    assert share == pytest.approx((alpha[-1] * same).sum(1).mean())
    with np.load(out["opt"][2].artifacts) as art:
        assert art["alpha"].shape == (1, 6, 6) and list(art["alpha_round"]) == [1]

    long = pd.concat([out[r][1].assign(run=r, seed=0) for r in runs])
    fig = normalize_figures(
        [{"name": "w", "kind": "heatmap", "runs": ["a41", "opt"], "at": [1, 2, 4]}],
        list(runs),
        set(long["metric"]),
        "k",
    )[0]
    artifacts = {(r, 0): out[r][2].artifacts for r in runs}
    picked = heatmap_matrices(fig, artifacts)
    np.testing.assert_array_equal(picked["a41"][1][1][1], alpha[2])  # round 2: the last record of round 2
    np.testing.assert_array_equal(picked["a41"][1][2][1], alpha[5])
    draw(fig, long, None, artifacts, tmp_path / "w.png", tmp_path / "w.pdf")
    assert (tmp_path / "w.png").stat().st_size > 5000 and (tmp_path / "w.pdf").exists()
    with pytest.raises(ValueError, match="no 'beta'"):
        heatmap_matrices({**fig, "artifact": "beta"}, artifacts)


def test_a_diverging_run_is_recorded_as_diverged(tmp_path):
    """lr = 5 on least squares: θ explodes; the run stops and is recorded, nothing crashes."""
    runs = {"a41": {"algorithm": "all_for_one", "lr": 5.0, "batch_size": 2, "local_steps": 20, "b_alpha": 2}}
    info, metrics, _ = _train(tmp_path, runs, rounds=30)["a41"]
    assert info.status == "diverged" and info.diverged_round < 30
