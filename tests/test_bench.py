"""The speed benchmark's official-code mode (``python -m hetfl.tools.bench --official``): its settings and its table.

The timings themselves are machine-dependent and never asserted (a benchmark, not a test)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hetfl.pipeline.config import build_suite, load_config
from hetfl.tools import bench

CONFIG = load_config([Path(__file__).parents[1] / "config" / "config.yaml"], root=Path(__file__).parents[1])


def test_the_official_settings_are_applied_to_every_timed_run_and_validate():
    config = bench.official_config(CONFIG)
    suite = build_suite(config)
    for (name, label), _ in bench.OFFICIAL.items():
        study = config["studies"][name]
        assert (study["sampling"], study["eval_every"]) == ("sequential", 1)
        assert suite.studies[name].rounds == bench.OFFICIAL_ROUNDS[name]
        hp = suite.studies[name].runs[label].hyperparameters
        assert hp["client_weights"] == "samples"
        assert hp.get("inner_l2", 0.0) == (0.001 if label == "pfedme" else 0.0)
    assert CONFIG["studies"]["pfedme_mnist"].get("sampling", "epoch") == "epoch"  # the input is not modified


def test_equal_work_evaluates_the_models_the_official_code_evaluates():
    suite = build_suite(bench.official_config(CONFIG, equal_work=True))
    evaluated = {
        label: suite.studies[name].runs[label].settings["eval_models"] for name, label in bench.OFFICIAL
    }
    assert evaluated == {"pfedme": ["global", "local"], "fedavg": None, "perfedavg": ["personal"]}
    assert "eval_models" not in json.dumps(CONFIG)


def test_official_mode_times_every_row_and_prints_the_ratios(monkeypatch, capsys):
    monkeypatch.setattr(bench, "OFFICIAL_ROUNDS", {"pfedme_mnist": 2, "pfedme_synthetic": 2})
    bench.main(["--official", "--repeat", "2"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("| pfedme_")]
    assert len(rows) == len(bench.OFFICIAL)
    for line, ((name, label), (with_eval, without)) in zip(rows, bench.OFFICIAL.items(), strict=True):
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert cells[:3] == [name, label, "2"]
        assert cells[3] == f"{with_eval:.3f} / {without:.3f}"
        ours = [float(v) for v in cells[4].split(" / ")]
        ratios = [float(v.rstrip("x")) for v in cells[5].split(" / ")]
        # times measured apart (no order between them is asserted: a loaded machine reorders them)
        assert ours[0] > 0 and ours[1] > 0
        assert ratios == pytest.approx([with_eval / ours[0], without / ours[1]], rel=0.06, abs=0.06)
        every = float(cells[6])  # every model the run reports: at least the official code's models
        assert every > 0 and float(cells[7].rstrip("x")) == pytest.approx(
            with_eval / every, rel=0.06, abs=0.06
        )


def test_repeat_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        bench.main(["--official", "--repeat", "0"])
    assert "--repeat must be a positive integer, got 0" in capsys.readouterr().err
