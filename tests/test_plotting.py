"""Figures: config normalization and errors, legend labels, PNG/PDF output."""

import re

import numpy as np
import pandas as pd
import pytest

from hetfl.errors import ConfigError
from hetfl.plotting import metric_label, normalize_figures, plot_figure, run_labels

RUNS = ["fedavg", "pfedme-lam=15", "lam30"]
METRICS = {"test_acc_personal", "train_loss_global"}


@pytest.fixture(scope="module")
def tables():
    """fedavg: 3 seeds; pfedme-lam=15: 1 seed; lam30: 2 seeds, seed 1 diverged (nan, inf at the end)."""
    rng = np.random.default_rng(0)
    rows, status = [], []
    for run, seeds in (("fedavg", 3), ("pfedme-lam=15", 1), ("lam30", 2)):
        for seed in range(seeds):
            diverged = run == "lam30" and seed == 1
            status.append({"run": run, "seed": seed, "status": "diverged" if diverged else "ok"})
            for r in range(30):
                loss = 1.0 / (r + 1) + 0.01 * rng.random()
                acc = 1.0 - loss / 2
                if diverged and r >= 10:
                    loss, acc = (np.inf, np.nan) if r == 10 else (None, None)
                if loss is not None:
                    ids = {"run": run, "seed": seed, "round": r}
                    rows += [
                        {**ids, "metric": "train_loss_global", "value": loss},
                        {**ids, "metric": "test_acc_personal", "value": acc},
                    ]
    return pd.DataFrame(rows), pd.DataFrame(status)


def test_normalize_string_and_mapping():
    mapping = {
        "name": "mnist_mlr",
        "metrics": ["train_loss_global", "test_acc_personal"],
        "runs": ["fedavg", "lam30"],
        "labels": {"fedavg": "FedAvg"},
        "title": "convex",
        "logy": True,
        "ylim": [0.1, 2],
        "smooth": 5,
    }
    figs = normalize_figures(["test_acc_personal", mapping], RUNS, METRICS, "studies.s.figures")
    assert figs[0] == {
        "name": "test_acc_personal",
        "metrics": ["test_acc_personal"],
        "runs": None,
        "labels": {},
        "title": "",
        "logy": False,
        "ylim": None,
        "smooth": 1,
        "kind": "lines",
        "x": "round",
    }
    assert figs[1] == {**mapping, "ylim": [0.1, 2.0], "kind": "lines", "x": "round"}
    default_name = normalize_figures([{"metrics": ["train_loss_global"]}], RUNS, METRICS, "k")[0]["name"]
    assert default_name == "train_loss_global"


@pytest.mark.parametrize(
    "entry, key, message",
    [
        ("test_acc", "k[0].metrics", "allowed: test_acc_personal, train_loss_global"),
        (
            {"metrics": ["test_acc_personal"], "runs": ["fedprox"]},
            "k[0].runs",
            "allowed: fedavg, lam30, pfedme-lam=15",
        ),
        ({"metrics": []}, "k[0].metrics", "non-empty"),
        ({"metrics": ["test_acc_personal"], "name": "../up"}, "k[0].name", "safe file name"),
        ({"metrics": ["test_acc_personal"], "name": "a/b"}, "k[0].name", "safe file name"),
        ({"metrics": ["test_acc_personal"], "labels": {"fedprox": "x"}}, "k[0].labels", "unknown run"),
        ({"metrics": ["test_acc_personal"], "smooth": 0}, "k[0].smooth", "integer"),
        ({"metrics": ["test_acc_personal"], "ylim": [1, 0]}, "k[0].ylim", "low < high"),
        ({"metrics": ["test_acc_personal"], "logy": True, "ylim": [0, 1]}, "k[0].ylim", "low > 0"),
        ({"metrics": ["test_acc_personal"], "logy": "yes"}, "k[0].logy", "true or false"),
        ({"metrics": ["test_acc_personal"], "x": "time"}, "k[0].x", "allowed: round, test_acc_personal"),
        ({"metrics": ["test_acc_personal"], "colour": "red"}, "k[0]", "allowed: kind, labels, logy, metrics"),
        (3, "k[0]", "metric name or a mapping"),
    ],
)
def test_bad_figures_name_the_key(entry, key, message):
    with pytest.raises(ConfigError, match=re.escape(f"config key '{key}'")) as err:
        normalize_figures([entry], RUNS, METRICS, "k")
    assert message in str(err.value)


def test_duplicate_names():
    with pytest.raises(ConfigError, match=r"k\[1\].name.*duplicate"):
        normalize_figures(["test_acc_personal", {"metrics": ["test_acc_personal"]}], RUNS, METRICS, "k")


def test_metric_label():
    assert metric_label("test_acc_personal") == "Test accuracy (personal)"
    assert metric_label("train_loss_global") == "Train loss (global)"
    assert metric_label("dist_to_opt") == "dist to opt"


def test_run_labels_mark_diverged(tables):
    long, status = tables
    fig = normalize_figures(
        [{"metrics": ["train_loss_global"], "labels": {"pfedme-lam=15": "pFedMe"}}], RUNS, METRICS, "k"
    )[0]
    expected = {"fedavg": "fedavg", "pfedme-lam=15": "pFedMe", "lam30": "lam30 (diverged 1/2)"}
    assert run_labels(long, fig, status) == expected
    assert run_labels(long, fig) == expected  # without status: from the non-finite values
    assert list(run_labels(long, {**fig, "runs": ["lam30", "fedavg"]}, status)) == ["lam30", "fedavg"]


def assert_image(path, magic):
    data = path.read_bytes()
    assert data.startswith(magic) and len(data) > 5000


def test_plot_multi_panel_logy_diverged(tables, tmp_path):
    long, status = tables
    fig = normalize_figures(
        [
            {
                "name": "both",
                "metrics": ["train_loss_global", "test_acc_personal"],
                "logy": True,
                "smooth": 3,
                "title": "convex",
            }
        ],
        RUNS,
        METRICS,
        "k",
    )[0]
    plot_figure(long, fig, tmp_path / "both.png", tmp_path / "both.pdf", title_prefix="toy:", status=status)
    assert_image(tmp_path / "both.png", b"\x89PNG")
    assert_image(tmp_path / "both.pdf", b"%PDF")


def test_plot_single_seed_with_ylim(tables, tmp_path):
    long, _ = tables
    fig = normalize_figures(
        [{"metrics": ["test_acc_personal"], "runs": ["pfedme-lam=15"], "ylim": [0.4, 1]}], RUNS, METRICS, "k"
    )[0]
    plot_figure(long, fig, tmp_path / "one.png")
    assert_image(tmp_path / "one.png", b"\x89PNG")
    assert not (tmp_path / "one.pdf").exists()


def test_plot_empty_raises(tables, tmp_path):
    long, _ = tables
    fig = normalize_figures(["test_acc_personal"], RUNS, METRICS, "k")[0]
    with pytest.raises(ValueError, match="no finite values"):
        plot_figure(long[long["metric"] == "train_loss_global"], fig, tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()


def test_plot_against_a_metric(tables, tmp_path):
    """x = a metric: each round sits at the seeds' mean of that metric (e.g. gradients computed)."""
    long, _ = tables
    evals = long[long["metric"] == "train_loss_global"].assign(
        metric="grad_evals", value=lambda d: 10.0 * d["round"]
    )
    long = pd.concat([long, evals])
    fig = normalize_figures(
        [{"metrics": ["test_acc_personal"], "runs": ["fedavg"], "x": "grad_evals"}],
        RUNS,
        METRICS | {"grad_evals"},
        "k",
    )[0]
    figure = plot_figure(long, fig, tmp_path / "x.png")
    ax = figure.axes[0]
    assert ax.get_xlabel() == "grad evals"
    assert list(ax.lines[0].get_xdata()) == [10.0 * r for r in range(30)]
