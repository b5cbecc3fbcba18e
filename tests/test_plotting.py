"""Figures: config normalization and errors, legend labels, PNG/PDF output, and what makes a figure fit
for a paper (accuracy in %, y-range fit to the late phase, log axes, distinct line looks, wrapped
titles, the seed count in the legend), asserted on the drawn matplotlib objects, not on pixels."""

import re

import numpy as np
import pandas as pd
import pytest

from hetfl.errors import ConfigError
from hetfl.pipeline.figures.lines import fit_ylim, plot_figure, run_labels
from hetfl.pipeline.figures.style import axis_label, line_styles, metric_label, seeds_note
from hetfl.pipeline.plotting import normalize_figures

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
        "logy": "auto",
        "ylim": None,
        "yfit": "late",
        "smooth": 1,
        "kind": "lines",
        "x": "round",
    }
    assert figs[1] == {**mapping, "ylim": [0.1, 2.0], "yfit": "late", "kind": "lines", "x": "round"}
    per_metric = {
        "metrics": ["train_loss_global", "test_acc_personal"],
        "logy": ["train_loss_global"],
        "ylim": {"train_loss_global": [0.01, 3], "test_acc_personal": [0.5, 1]},
        "yfit": "all",
    }
    fig = normalize_figures([per_metric], RUNS, METRICS, "k")[0]
    assert fig["logy"] == ["train_loss_global"] and fig["yfit"] == "all"
    assert fig["ylim"] == {"train_loss_global": [0.01, 3.0], "test_acc_personal": [0.5, 1.0]}
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
        ({"metrics": ["test_acc_personal"], "logy": "yes"}, "k[0].logy", "allowed: auto, false"),
        ({"metrics": ["test_acc_personal"], "logy": ["train_loss_global"]}, "k[0].logy", "unknown metric"),
        ({"metrics": ["test_acc_personal"], "yfit": "tail"}, "k[0].yfit", "allowed: all, late"),
        ({"metrics": ["test_acc_personal"], "ylim": {"loss": [0, 1]}}, "k[0].ylim", "unknown metric"),
        (
            {
                "metrics": ["train_loss_global"],
                "logy": ["train_loss_global"],
                "ylim": {"train_loss_global": [0, 1]},
            },
            "k[0].ylim.train_loss_global",
            "low > 0",
        ),
        ({"metrics": ["test_acc_personal"], "x": "time"}, "k[0].x", "allowed: round, test_acc_personal"),
        (
            {"metrics": ["test_acc_personal"], "colour": "red"},
            "k[0].colour",
            "allowed: kind, labels, logy, metrics",
        ),
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
    plot_figure(long, fig, tmp_path / "again.png", tmp_path / "again.pdf", title_prefix="toy:", status=status)
    for suffix in ("png", "pdf"):  # the same figure, the same bytes (a PDF carries no creation date)
        assert (tmp_path / f"again.{suffix}").read_bytes() == (tmp_path / f"both.{suffix}").read_bytes()
    assert b"CreationDate" not in (tmp_path / "both.pdf").read_bytes()


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
    assert ax.get_xlabel() == "Grad evals"
    assert list(ax.lines[0].get_xdata()) == [10.0 * r for r in range(30)]


GRID_METRICS = {"test_acc_personal", "train_loss_global", "train_loss_personal"}


@pytest.fixture(scope="module")
def grid():
    """10 runs × 3 seeds, 100 rounds: accuracy rising from 0.1 to 0.80 + 0.01 * i; a loss from 3 down
    to about 0.01 (2.5 decades); another from 2 to about 1. Run 9's seed 2 blows up (loss 1e6) at
    round 80 and diverges at round 90."""
    rng = np.random.default_rng(1)
    rows, status = [], []
    runs = [f"algo{a}-lr={lr}" for a in "AB" for lr in (0.001, 0.003, 0.01, 0.03, 0.1)]
    for i, run in enumerate(runs):
        for seed in range(3):
            diverged = i == 9 and seed == 2
            status.append({"run": run, "seed": seed, "status": "diverged" if diverged else "ok"})
            for r in range(101):
                acc = 0.1 + (0.7 + 0.01 * i) * (1 - np.exp(-r / 8)) + 0.001 * rng.standard_normal()
                loss = 3 * np.exp(-r / 10) + 0.01 * (1 + 0.1 * i)
                flat = 1 + np.exp(-r / 10) + 0.01 * i
                if diverged and r >= 80:
                    acc, loss = (0.1, 1e6) if r < 90 else (np.nan, np.inf)
                ids = {"run": run, "seed": seed, "round": r}
                rows += [
                    {**ids, "metric": "test_acc_personal", "value": acc},
                    {**ids, "metric": "train_loss_global", "value": loss},
                    {**ids, "metric": "train_loss_personal", "value": flat},
                ]
                if diverged and r >= 90:
                    break
    return pd.DataFrame(rows), pd.DataFrame(status), runs


def late_means(long, metric, runs, seeds=(0, 1, 2), start=50):
    """Per run: the seed-mean curve of ``metric`` over rounds >= start."""
    data = long[(long["metric"] == metric) & long["seed"].isin(seeds) & (long["round"] >= start)]
    return {run: data[data["run"] == run].groupby("round")["value"].mean() for run in runs}


def grid_figure(grid, tmp_path, **entry):
    long, status, runs = grid
    fig = normalize_figures([{"name": "g", **entry}], runs, GRID_METRICS, "k")[0]
    return plot_figure(long, fig, tmp_path / "g.png", title_prefix="grid:", status=status)


def test_accuracy_in_percent_fit_to_the_late_phase(grid, tmp_path):
    long, _, runs = grid
    figure = grid_figure(grid, tmp_path, metrics=["test_acc_personal"])
    ax = figure.axes[0]
    assert ax.get_ylabel() == "Test accuracy, personal (%)"
    low, high = ax.get_ylim()
    assert low > 10.0  # the first round's 0.1 (10 %) lies below: it would squash the late phase
    for run, curve in late_means(long, "test_acc_personal", runs, seeds=(0, 1)).items():
        assert low < 100 * curve.min() and 100 * curve.max() < high, run
    assert high - low < 25  # the late spread (9 points) fills the axis
    labels = [t.get_text() for t in ax.get_yticklabels() if low <= t.get_position()[1] <= high]
    assert labels and all(0 <= float(text.replace("\N{MINUS SIGN}", "-")) <= 100 for text in labels)
    assert "last half of the rounds" in figure.legends[0].get_title().get_text()


def test_explicit_ylim_wins_and_yfit_all_shows_everything(grid, tmp_path):
    figure = grid_figure(grid, tmp_path, metrics=["test_acc_personal"], ylim=[0.5, 0.95])
    assert figure.axes[0].get_ylim() == pytest.approx((50.0, 95.0))
    assert "last half" not in figure.legends[0].get_title().get_text()
    low, high = grid_figure(grid, tmp_path, metrics=["test_acc_personal"], yfit="all").axes[0].get_ylim()
    assert 0 <= low < 10 and high > 89


def test_a_diverged_seed_does_not_stretch_the_range(grid, tmp_path):
    long, _, runs = grid
    figure = grid_figure(grid, tmp_path, metrics=["train_loss_personal"])  # linear: 1 decade
    ax = figure.axes[0]
    assert ax.get_yscale() == "linear"
    low, high = ax.get_ylim()
    assert high < 2  # the seed at 1e6 before it diverged is left out of the fit
    for run, curve in late_means(long, "train_loss_personal", runs, seeds=(0, 1)).items():
        assert low < curve.min() and curve.max() < high, run
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    assert labels[-1] == "algoB-lr=0.1 (diverged 1/3)"


def test_log_axes(grid, tmp_path):
    both = ["train_loss_global", "train_loss_personal", "test_acc_personal"]
    scales = [ax.get_yscale() for ax in grid_figure(grid, tmp_path, metrics=both).axes]
    assert scales == ["log", "log", "linear"]  # auto: a loss spans 2.5 decades: the losses on log axes
    scales = [ax.get_yscale() for ax in grid_figure(grid, tmp_path, metrics=both[1:]).axes]
    assert scales == ["linear", "linear"]  # a loss spanning less than 2 decades, an accuracy
    scales = [ax.get_yscale() for ax in grid_figure(grid, tmp_path, metrics=both, logy=True).axes]
    assert scales == ["log", "log", "log"]  # an explicit logy keeps its look
    scales = [ax.get_yscale() for ax in grid_figure(grid, tmp_path, metrics=both, logy=False).axes]
    assert scales == ["linear", "linear", "linear"]
    figure = grid_figure(grid, tmp_path, metrics=both, logy=["train_loss_personal"])
    assert [ax.get_yscale() for ax in figure.axes] == ["linear", "log", "linear"]
    ax = grid_figure(grid, tmp_path, metrics=["train_loss_global"]).axes[0]
    low, high = ax.get_ylim()
    assert low < 0.01 and 3 < high < 10  # a log axis shows every round (the diverged seed left out)
    figure = grid_figure(grid, tmp_path, metrics=["train_loss_global"], ylim=[0.5, 4])
    assert figure.axes[0].get_yscale() == "linear"  # auto with an explicit ylim: linear


def test_ten_runs_have_distinct_looks(grid, tmp_path):
    _, _, runs = grid
    styles = line_styles(runs)
    assert len({(tuple(s["color"]), s["linestyle"], s["marker"]) for s in styles.values()}) == 10
    assert (
        len({(tuple(s["color"]), s["linestyle"], s["marker"]) for s in line_styles(range(40)).values()}) == 40
    )
    assert {s["linestyle"] for s in line_styles(runs[:4]).values()} == {"-"}  # few runs: solid lines
    ax = grid_figure(grid, tmp_path, metrics=["test_acc_personal"]).axes[0]
    looks = {(line.get_color(), line.get_linestyle(), line.get_marker()) for line in ax.lines}
    assert len(ax.lines) == 10 and len(looks) == 10
    handles = ax.figure.legends[0].legend_handles
    assert len({(h.get_color(), h.get_linestyle(), h.get_marker()) for h in handles}) == 10


def test_long_titles_wrap(grid, tmp_path):
    title = "Fig. 3, second line: delays (max and mean over each 400 updates; the same for every tau)"
    figure = grid_figure(grid, tmp_path, metrics=["test_acc_personal"], title=title)
    text = figure._suptitle
    assert "\n" in text.get_text() and text.get_text().replace("\n", " ") == f"grid: {title}"
    renderer = figure.canvas.get_renderer()
    assert text.get_window_extent(renderer).width <= figure.bbox.width
    assert figure.legends[0].get_window_extent(renderer).width <= figure.bbox.width
    short = grid_figure(grid, tmp_path, metrics=["test_acc_personal", "train_loss_global"], title="Short")
    assert short._suptitle.get_text() == "grid: Short"


def test_the_legend_gives_the_seeds_and_the_band(grid, tables, tmp_path):
    figure = grid_figure(grid, tmp_path, metrics=["test_acc_personal"])
    assert figure.legends[0].get_title().get_text().startswith("Mean of 3 seeds; band: ±1 sd over seeds")
    long, status = tables  # fedavg: 3 seeds, pfedme-lam=15: 1, lam30: 2 (one diverged)
    fig = normalize_figures(["train_loss_global"], RUNS, METRICS, "k")[0]
    figure = plot_figure(long, fig, tmp_path / "t.png", status=status)
    legend = figure.legends[0]
    assert "Mean of 1–3 seeds" in legend.get_title().get_text()
    labels = [t.get_text() for t in legend.get_texts()]
    assert labels == ["fedavg (3 seeds)", "pfedme-lam=15 (1 seed)", "lam30 (diverged 1/2)"]


def test_seeds_note():
    assert seeds_note([3, 3]) == "Mean of 3 seeds; band: ±1 sd over seeds"
    assert seeds_note([1]) == "A single seed per run (no band)"
    assert seeds_note([2, 5, 3]).startswith("Mean of 2–5 seeds")


def test_fit_ylim():
    rounds = np.arange(11.0)
    rising = (rounds, np.r_[0.1, np.full(10, 0.9)])
    other = (rounds, np.r_[0.1, np.full(9, 0.8), np.nan])  # a last non-finite point is ignored
    low, high = fit_ylim([rising, other], late=0.5)
    assert 0.1 < low < 0.8 and 0.9 < high < 1.0
    assert fit_ylim([rising], late=None)[0] < 0.1
    assert fit_ylim([(rounds, 100 * rising[1])], late=0.5, percent=True)[1] <= 100
    low, high = fit_ylim([(rounds, 10.0**-rounds)], log=True)
    assert 1e-11 < low < 1e-10 and 1 < high < 5  # a margin of 5 % of the decades
    assert fit_ylim([(rounds, -rounds)], log=True) is None
    assert fit_ylim([(rounds, np.full(11, np.nan))]) is None
    low, high = fit_ylim([(rounds, np.full(11, 0.5))])  # flat: still a range
    assert low < 0.5 < high
    converged = (rounds, np.r_[0.2, 0.6, np.ones(9)])  # a flat late phase: the rise is shown
    assert fit_ylim([converged, converged], late=0.5)[0] < 0.2


def test_axis_label():
    assert axis_label("test_acc_personal") == "Test accuracy, personal (%)"
    assert axis_label("robust_acc_global") == "Robust accuracy, global (%)"
    assert axis_label("worst_class_acc_global") == "Worst class accuracy, global (%)"
    assert axis_label("test_acc_at_y_global") == "Test accuracy at y, global (%)"
    assert axis_label("train_loss_global") == "Train loss (global)"
    assert axis_label("test_log10_loss") == "Test log10 loss"
    assert axis_label("train_loss_minimax_global") == "Train loss minimax (global)"
    assert axis_label("y_max") == "y max"
    assert axis_label("dist_saddle") == "Dist saddle"
    assert axis_label("test_acc_global", unit=False) == "Test accuracy, global"
