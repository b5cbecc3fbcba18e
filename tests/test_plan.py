"""The cost model of ``hetfl.tools.plan`` on synthetic benchmark tables (no Snakemake, no real results).

The test writes, for a small config, the files a measured suite leaves (``benchmarks/train/.../seed=s.tsv``
and ``runs/.../seed=s/run.json``) with times that follow the model exactly, and checks that the fit
recovers them and that planned jobs are estimated from the right analog: measured, by FLOPs, from the
family, or not at all.
"""

from __future__ import annotations

import copy
import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from hetfl.models.char_lstm import CharLSTMModule
from hetfl.pipeline.config import build_suite
from hetfl.pipeline.records import RunRecord
from hetfl.tools.plan import load_config, main, merge_config, plan, report, study_table
from hetfl.tools.plan_fit import Fit, fits, load_measured, path_fits, path_of
from hetfl.tools.plan_work import EVAL_COST, job_work, model_cost

OVERHEAD = 2.0  # s0, seconds per job
RATES = {"fedavg": 3e-9, "pfedme": 6e-9, "ffgg": 2e-11}  # c, seconds per work unit
DIGITS = {"dataset": {"name": "digits"}, "partition": {"scheme": "iid", "clients": 4}}
MEASURED = {
    "studies": {
        "small": {
            **DIGITS,
            "model": {"name": "mlr"},
            "rounds": 10,
            "seeds": [0, 1],
            "eval_every": 5,
            "defaults": {"lr": 0.1, "batch_size": 8, "local_steps": 2},
            "runs": {"fedavg": {"algorithm": "fedavg"}, "pfedme": {"algorithm": "pfedme", "K": 3}},
        },
        "wide": {
            **DIGITS,
            "model": {"name": "dnn", "hidden": 32},
            "rounds": 20,
            "seeds": [0],
            "defaults": {"lr": 0.1, "batch_size": 16, "local_steps": 1},
            "runs": {"fedavg": {"algorithm": "fedavg", "clients_per_round": 2}},
        },
        "quad": {
            "problem": {"name": "ffgg_quadratic", "num_clients": 4, "n": 50, "d_theta": 6, "d_w": 3},
            "rounds": 30,
            "seeds": [0],
            "runs": {"ffgg": {"algorithm": "ffgg", "local_steps": 5}},
        },
    }
}


def write_measured(
    root: Path,
    config: dict,
    noise: dict[tuple[str, int], float] | None = None,
    device: dict[str, str] | None = None,
    overhead: float = OVERHEAD,
    rates: dict[str, float] = RATES,
) -> None:
    """The benchmark tables and run records of every job of ``config``: training ``c · W`` seconds (c:
    ``rates`` of its algorithm; times ``noise[(run, seed)]``), the job ``overhead`` more; with ``device``,
    the run records' ``device`` and ``device_name`` (else none: a record of before they were written)."""
    suite = build_suite(config)
    for name, study in suite.studies.items():
        for label in study.runs:
            spec = json.loads(study.run_json(label))
            for seed in study.seeds:
                train = (
                    rates[spec["algorithm"]] * job_work(spec).total() * (noise or {}).get((label, seed), 1.0)
                )
                run_dir = root / "runs" / name / label / f"seed={seed}"
                run_dir.mkdir(parents=True)
                RunRecord(
                    study=name, run=label, algorithm=spec["algorithm"], seed=seed, status="ok",
                    wall_time_s=train, threads=1, spec=spec, **(device or {}),
                ).write(run_dir / "run.json")  # fmt: skip
                tsv = root / "benchmarks" / "train" / name / label / f"seed={seed}.tsv"
                tsv.parent.mkdir(parents=True, exist_ok=True)
                tsv.write_text(f"s\th:m:s\tmax_rss\n{train + overhead:.6f}\t0:00:01\t100.0\n")


@pytest.fixture
def measured(tmp_path):
    write_measured(tmp_path, MEASURED)
    return load_measured(tmp_path / "benchmarks", tmp_path / "runs")


def spec_of(config: dict, study: str, run: str) -> dict:
    return json.loads(build_suite(config).studies[study].run_json(run))


def test_work_counts_rounds_clients_steps_batch_and_parameters():
    small = spec_of(MEASURED, "small", "pfedme")
    work = job_work(small)
    params, flops, shape = model_cost(
        json.dumps(small["model"], sort_keys=True), json.dumps(small["dataset"])
    )
    assert (params, flops, shape) == (650, 2 * 64 * 10, (1, 8, 8))  # MLR 64 -> 10: weights and biases
    # pFedMe trains every client (train_clients: all) for R = 2 local steps of K = 3 inner steps
    assert (work.rounds, work.clients, work.steps, work.batch, work.units) == (10, 4, 6, 8, 650)
    assert work.evaluations == 3 and work.eval_samples == 1797  # rounds 0, 5, 10 over every digit
    assert work.total() == pytest.approx(10 * 4 * 6 * 8 * 650 + 3 * 1797 * 650 * EVAL_COST)
    wide = job_work(spec_of(MEASURED, "wide", "fedavg"))
    assert (wide.clients, wide.steps, wide.batch, wide.units) == (2, 1, 16, 64 * 32 + 32 + 32 * 10 + 10)
    assert wide.model == "dnn 1x8x8 (2410 params)" and wide.flops == 2 * (64 * 32 + 32 * 10)
    quad = job_work(spec_of(MEASURED, "quad", "ffgg"))
    # a step of a generated problem: products with each client's (6 + 3) x (6 + 3) Gram matrices
    assert (quad.clients, quad.steps, quad.batch, quad.units, quad.eval_samples) == (4, 5, 1, 81, 4)
    assert quad.model == "problem ffgg_quadratic"


def test_minimax_local_epochs_count_steps_per_epoch():
    config = {
        "studies": {
            "mm": {
                **DIGITS,
                "model": {"name": "dnn", "hidden": 16},
                "rounds": 5,
                "seeds": [0],
                "defaults": {"batch_size": 32, "tau_min": 2, "tau_max": 4},
                "runs": {
                    "epochs": {"algorithm": "local_sgda"},
                    "steps": {"algorithm": "local_sgda", "tau_unit": "steps"},
                },
            }
        }
    }
    per_client = 1797 * (1 - build_suite(config).studies["mm"].partition["test_fraction"]) / 4
    assert job_work(spec_of(config, "mm", "epochs")).steps == pytest.approx(3 * math.ceil(per_client / 32))
    assert job_work(spec_of(config, "mm", "steps")).steps == 3


def test_unequal_local_steps_count_their_mean_and_epochs_their_batches():
    config = {
        "studies": {
            "un": {
                **DIGITS,
                "model": {"name": "mlr"},
                "rounds": 5,
                "seeds": [0],
                "defaults": {"batch_size": 32, "local_steps": 20, "clients_per_round": 2},
                "runs": {
                    "equal": {"algorithm": "fedavg"},
                    "uniform": {
                        "algorithm": "fedavg",
                        "local_steps_per_client": "uniform",
                        "local_steps_min": 4,
                    },
                    "epochs": {"algorithm": "fedavg", "local_steps": 3, "local_steps_unit": "epochs"},
                },
            }
        }
    }
    per_client = 1797 * (1 - build_suite(config).studies["un"].partition["test_fraction"]) / 4
    assert job_work(spec_of(config, "un", "equal")).steps == 20
    assert job_work(spec_of(config, "un", "uniform")).steps == 12  # tau_i ~ U{4..20}: mean 12
    assert job_work(spec_of(config, "un", "epochs")).steps == pytest.approx(3 * math.ceil(per_client / 32))


def test_an_lstm_counts_its_gates_at_every_step():
    module = CharLSTMModule(80, 8, 16, 2, 80)
    counted = []
    hooks = [
        m.register_forward_hook(lambda m, i, o: counted.append(m.forward_flops(i[0], o))) for m in module.lstm
    ]
    module(torch.zeros(1, 10, dtype=torch.long))
    for h in hooks:
        h.remove()
    # layer 1: 8 inputs, layer 2: 16; four gates, input and recurrent products, 10 steps, 2 FLOPs a multiply-add
    assert counted == [2 * 4 * 16 * (8 + 16) * 10, 2 * 4 * 16 * (16 + 16) * 10]


def test_the_fit_recovers_the_overhead_and_the_rates(measured):
    fit = Fit.from_measured(measured)
    assert len(measured) == 6 and fit.overhead == pytest.approx(OVERHEAD, abs=1e-5)
    assert fit.rates[("fedavg", "federation", "mlr 1x8x8 (650 params)")] == pytest.approx(RATES["fedavg"])
    assert fit.rates[("fedavg", "federation", "dnn 1x8x8 (2410 params)")] == pytest.approx(RATES["fedavg"])
    assert fit.rates[("pfedme", "federation", "mlr 1x8x8 (650 params)")] == pytest.approx(RATES["pfedme"])
    assert fit.rates[("ffgg", "ffgg_quadratic", "problem ffgg_quadratic")] == pytest.approx(RATES["ffgg"])
    assert fit.counts[("fedavg", "federation", "mlr 1x8x8 (650 params)")] == 2


def test_the_rate_is_the_median_over_the_groups_jobs(tmp_path):
    config = {"studies": {"small": copy.deepcopy(MEASURED["studies"]["small"])}}
    write_measured(tmp_path, config, noise={("fedavg", 0): 1.0, ("fedavg", 1): 100.0})
    config["studies"]["small"]["seeds"] = [0, 1, 2]
    more = {"studies": {"more": {**config["studies"]["small"], "seeds": [2]}}}
    write_measured(tmp_path, more, noise={("fedavg", 2): 1.5})
    fit = Fit.from_measured(load_measured(tmp_path / "benchmarks", tmp_path / "runs"))
    assert fit.rates[("fedavg", "federation", "mlr 1x8x8 (650 params)")] == pytest.approx(
        1.5 * RATES["fedavg"]
    )


def test_unfinished_and_resumed_jobs_are_not_measured(tmp_path):
    write_measured(tmp_path, MEASURED)
    (tmp_path / "runs/small/fedavg/seed=0/run.json").unlink()  # a benchmark without its run record
    record = tmp_path / "runs/small/fedavg/seed=1/run.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "resumed_from_round": 4}))
    record = tmp_path / "runs/small/pfedme/seed=0/run.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "status": "diverged"}))
    measured = load_measured(tmp_path / "benchmarks", tmp_path / "runs")
    assert sorted((m.study, m.run, m.seed) for m in measured) == [
        ("quad", "ffgg", 0),
        ("small", "pfedme", 1),
        ("wide", "fedavg", 0),
    ]


def test_a_measured_run_at_another_scale_keeps_its_own_rate(tmp_path):
    study = {
        **DIGITS,
        "model": {"name": "mlr"},
        "rounds": 10,
        "seeds": [0],
        "defaults": {"batch_size": 8, "local_steps": 2},
        "runs": {"slow": {"algorithm": "fedavg", "lr": 0.1}, "fast": {"algorithm": "fedavg", "lr": 0.2}},
    }
    write_measured(tmp_path, {"studies": {"s": study}}, noise={("slow", 0): 3.0})
    fit = Fit.from_measured(load_measured(tmp_path / "benchmarks", tmp_path / "runs"))
    assert fit.rates[("fedavg", "federation", "mlr 1x8x8 (650 params)")] == pytest.approx(2 * RATES["fedavg"])
    paper = {
        "studies": {
            "s_paper": {
                **study,
                "rounds": 200,
                "eval_every": 10,
                "seeds": [0, 1, 2],
                "runs": {**study["runs"], "other": {"algorithm": "fedavg", "lr": 0.3}},
            }
        }
    }
    jobs = plan(paper, fit).set_index(["run", "seed"])
    for run, basis, rate in (("slow", "same run", 3), ("fast", "same run", 1), ("other", "measured", 2)):
        work = job_work(spec_of(paper, "s_paper", run))
        assert work.rounds == 200 and work.evaluations == 21
        assert jobs.loc[(run, 2), "basis"] == basis
        assert jobs.loc[(run, 2), "seconds"] == pytest.approx(
            OVERHEAD + rate * RATES["fedavg"] * work.total()
        )


def test_planned_jobs_are_estimated_from_the_nearest_measured_analog(measured):
    fit = Fit.from_measured(measured)
    paper = {
        "studies": {
            "big": {  # same models, more rounds, clients and seeds: measured analogs
                **DIGITS,
                "partition": {"scheme": "iid", "clients": 8},
                "model": {"name": "mlr"},
                "rounds": 100,
                "seeds": [0, 1, 2],
                "defaults": {"lr": 0.1, "batch_size": 8, "local_steps": 2},
                "runs": {"fedavg": {"algorithm": "fedavg"}, "local": {"algorithm": "local"}},
            },
            "conv": {  # a CNN: never measured, extrapolated by FLOPs from the nearest model (the DNN)
                **DIGITS,
                "model": {"name": "cnn"},
                "device": "cuda",
                "rounds": 10,
                "seeds": [0],
                "defaults": {"lr": 0.1, "batch_size": 8, "local_steps": 2},
                "runs": {"fedavg": {"algorithm": "fedavg"}},
            },
            "game": {  # no algorithm of the minimax family measured on the quadratic game
                "problem": {"name": "quadratic_game"},
                "rounds": 10,
                "seeds": [0],
                "runs": {"sgda": {"algorithm": "local_sgda"}},
            },
        }
    }
    jobs = plan(paper, fit).set_index(["study", "run", "seed"])
    assert len(jobs) == 6 + 1 + 1
    fedavg = job_work(spec_of(paper, "big", "fedavg"))
    row = jobs.loc[("big", "fedavg", 1)]
    assert row["basis"] == "measured" and row["reference"] == "fedavg on mlr 1x8x8 (650 params)"
    assert row["seconds"] == pytest.approx(OVERHEAD + RATES["fedavg"] * fedavg.total())
    # Local is a baseline like FedAvg, never measured: its family's nearest model, by FLOPs
    row = jobs.loc[("big", "local", 0)]
    assert (row["basis"], row["reference"]) == ("family", "fedavg on mlr 1x8x8 (650 params)")
    conv = job_work(spec_of(paper, "conv", "fedavg"))
    assert conv.flops > 10 * job_work(spec_of(MEASURED, "wide", "fedavg")).flops
    f_dnn, p_dnn = fit.sizes["dnn 1x8x8 (2410 params)"]  # forward FLOPs and parameters of the measured DNN
    row = jobs.loc[("conv", "fedavg", 0)]
    assert (row["basis"], row["reference"]) == ("FLOPs", "fedavg on dnn 1x8x8 (2410 params)")
    assert row["seconds"] == pytest.approx(
        OVERHEAD + RATES["fedavg"] * conv.total(conv.flops * p_dnn / f_dnn)
    )
    row = jobs.loc[("game", "sgda", 0)]
    assert row["basis"] == "none" and math.isnan(row["seconds"])

    table = study_table(plan(paper, fit)).set_index("study")
    assert table.loc["big", "jobs"] == 6 and table.loc["TOTAL", "jobs"] == 8
    assert table.loc["big", "basis"] == "measured 3/6, family 3/6" and table.loc["conv", "basis"] == "FLOPs"
    assert math.isnan(table.loc["game", "core_hours"]) and math.isnan(table.loc["game", "gpu_hours"])
    assert (table["gpu_hours"].fillna(0) == 0).all()  # nothing measured on a GPU
    assert table.loc["big", "device"] == "auto" and table.loc["conv", "device"] == "cuda"
    per_device = table.loc["total"].set_index("device")
    assert per_device.loc["cuda", "jobs"] == 1 and per_device.loc["auto", "jobs"] == 7
    assert per_device.loc["cuda", "core_hours"] == pytest.approx(table.loc["conv", "core_hours"])
    expected = (jobs.loc["big"]["seconds"].sum() + jobs.loc["conv"]["seconds"].sum()) / 3600
    assert table.loc["TOTAL", "core_hours"] == pytest.approx(expected)


def test_configs_merge_key_by_key_and_the_cli_prints_the_table(tmp_path, measured, capsys):
    base = {"studies": {"a": {"rounds": 1, "seeds": [0]}}, "select": ["a"]}
    over = {"studies": {"a": {"seeds": [0, 1]}, "b": {"rounds": 2}}, "select": ["b"]}
    merged = merge_config(base, over)
    assert merged == {"studies": {"a": {"rounds": 1, "seeds": [0, 1]}, "b": {"rounds": 2}}, "select": ["b"]}
    assert base["studies"]["a"]["seeds"] == [0]  # not modified
    (tmp_path / "base.yaml").write_text(yaml.safe_dump(MEASURED))
    (tmp_path / "paper.yaml").write_text(yaml.safe_dump({"select": ["wide", "quad"]}))
    assert load_config([tmp_path / "base.yaml", tmp_path / "paper.yaml"])["select"] == ["wide", "quad"]

    write_measured(tmp_path / "m", MEASURED)
    out = tmp_path / "jobs.csv"
    main(
        [
            "--base",
            str(tmp_path / "base.yaml"),
            "--configfile",
            str(tmp_path / "paper.yaml"),
            "--benchmarks",
            str(tmp_path / "m/benchmarks"),
            "--runs",
            str(tmp_path / "m/runs"),
            "--csv",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert "Fitted on 6 measured training jobs of 3 studies" in printed and "s0 = 2.00 s" in printed
    assert "GPU-hours are not estimated (the jobs measured ran on a CPU)" in printed
    assert "TOTAL" in printed and "wide" in printed and "quad" in printed
    assert set(pd.read_csv(out)["study"]) == {"wide", "quad"}

    buffer = io.StringIO()
    jobs = report(load_config([tmp_path / "base.yaml", tmp_path / "paper.yaml"]), measured, out=buffer)
    assert list(jobs["study"]) == ["wide", "quad"] and set(jobs["basis"]) == {"same run"}


def test_the_cli_honours_select_reads_configfiles_alone_and_names_config_errors(tmp_path, capsys):
    write_measured(tmp_path / "m", MEASURED)
    (tmp_path / "mine.yaml").write_text(yaml.safe_dump(MEASURED))
    common = ["--benchmarks", str(tmp_path / "m/benchmarks"), "--runs", str(tmp_path / "m/runs")]
    out = tmp_path / "jobs.csv"
    main(["--configfile", str(tmp_path / "mine.yaml"), "--select", "quad", "--csv", str(out), *common])
    assert set(pd.read_csv(out)["study"]) == {"quad"}  # the file's studies only, and only the selected one
    with pytest.raises(SystemExit, match="config key 'select': unknown study 'nope'"):
        main(["--configfile", str(tmp_path / "mine.yaml"), "--select", "nope", *common])
    bad = copy.deepcopy(MEASURED)
    bad["studies"]["wide"]["dataset"] = {"name": "no_such_data"}
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    with pytest.raises(SystemExit, match="studies.wide.dataset.name': unknown dataset 'no_such_data'"):
        main(["--configfile", str(tmp_path / "bad.yaml"), *common])
    with pytest.raises(SystemExit, match="config file\\(s\\) not found: select=a"):  # a misplaced --config
        main(["--configfile", "select=a", *common])
    (tmp_path / "broken.yaml").write_text("studies: [unclosed")
    with pytest.raises(SystemExit, match="not valid YAML"):
        main(["--configfile", str(tmp_path / "broken.yaml"), *common])


def test_job_memory_is_checked_against_a_profile_or_a_node(tmp_path, measured, capsys):
    config = copy.deepcopy(MEASURED)
    config["studies"]["wide"]["memory_budget"] = 9000  # its jobs ask for the budget besides the process
    jobs = plan(config, Fit.from_measured(measured))
    wide = jobs[jobs["study"] == "wide"]["mem_mb"]
    assert (wide > 9000).all() and (jobs[jobs["study"] != "wide"]["mem_mb"] < 9000).all()
    assert study_table(jobs)["max_mem_mb"].max() == wide.max()

    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    profile = tmp_path / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump({"set-resources": {"train": {"mem_mb": 8000}}}))
    write_measured(tmp_path / "m", MEASURED)
    common = ["--configfile", str(tmp_path / "c.yaml"), "--benchmarks", str(tmp_path / "m/benchmarks")]
    main([*common, "--runs", str(tmp_path / "m/runs"), "--profile", str(profile)])
    printed = capsys.readouterr().out
    assert f"{len(wide)} jobs ask for more than the 8000 MB of {profile}" in printed and "wide/" in printed
    main([*common, "--runs", str(tmp_path / "m/runs"), "--node-mem-mb", "100000"])
    assert "Every job fits the 100000 MB of --node-mem-mb" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="profile not found"):
        main([*common, "--profile", str(tmp_path / "nowhere")])


GPU_SPEEDUP = 8.0  # the GPU-measured jobs train this many times faster than RATES
GPU_OVERHEAD = 5.0  # and start slower (CUDA's initialization)


def test_jobs_measured_on_a_gpu_estimate_the_gpu_jobs_in_gpu_hours(tmp_path, capsys):
    write_measured(tmp_path, MEASURED, device={"device": "cpu", "device_name": "x86_64"})
    on_gpu = {  # a GPU measured the FedAvg runs only (3 jobs), at a rate GPU_SPEEDUP faster
        "studies": {
            f"gpu_{name}": {
                **MEASURED["studies"][name],
                "device": "cuda",
                "runs": {"fedavg": {"algorithm": "fedavg"}},
            }
            for name in ("small", "wide")
        }
    }
    cuda = {"device": "cuda:0", "device_name": "NVIDIA Test"}
    rates = {"fedavg": RATES["fedavg"] / GPU_SPEEDUP}
    write_measured(tmp_path, on_gpu, device=cuda, overhead=GPU_OVERHEAD, rates=rates)
    measured = load_measured(tmp_path / "benchmarks", tmp_path / "runs")
    assert {m.device for m in measured if m.study.startswith("gpu_")} == {"cuda"}
    assert {m.device for m in measured if not m.study.startswith("gpu_")} == {"cpu"}
    cpu, gpu = fits(measured)
    assert cpu.overhead == pytest.approx(OVERHEAD, abs=1e-5) and gpu.overhead == pytest.approx(
        GPU_OVERHEAD, abs=1e-5
    )
    mlr = "mlr 1x8x8 (650 params)"
    assert gpu.rates[("fedavg", "federation", mlr)] == pytest.approx(RATES["fedavg"] / GPU_SPEEDUP)
    assert cpu.rates[("fedavg", "federation", mlr)] == pytest.approx(RATES["fedavg"])
    assert ("pfedme", "federation", mlr) not in gpu.rates
    assert fits([m for m in measured if m.device == "cpu"])[1] is None

    def study(device, runs):
        return {
            **DIGITS,
            "partition": {"scheme": "iid", "clients": 8},
            "model": {"name": "mlr"},
            "device": device,
            "rounds": 100,
            "seeds": [0, 1],
            "defaults": {"lr": 0.1, "batch_size": 8, "local_steps": 2},
            "runs": runs,
        }

    fedavg, pfedme = {"algorithm": "fedavg"}, {"algorithm": "pfedme", "K": 3}
    paper = {
        "studies": {
            "on_gpu": study("cuda", {"fedavg": fedavg, "pfedme": pfedme}),  # pFedMe: no GPU analog
            "on_cpu": study("cpu", {"fedavg": fedavg}),
            "either": study("auto", {"fedavg": fedavg}),
        }
    }
    jobs = plan(paper, cpu, gpu).set_index(["study", "run", "seed"])
    work = job_work(spec_of(paper, "on_gpu", "fedavg"))
    row = jobs.loc[("on_gpu", "fedavg", 0)]
    assert (row["hardware"], row["basis"]) == ("gpu", "measured")
    assert row["seconds"] == pytest.approx(GPU_OVERHEAD + RATES["fedavg"] / GPU_SPEEDUP * work.total())
    row = jobs.loc[("on_gpu", "pfedme", 0)]  # a device: cuda job no GPU-measured job is an analog of
    assert (row["hardware"], row["basis"]) == ("cpu", "measured")
    for name in ("on_cpu", "either"):  # cpu, and auto with a CPU-measured analog: the CPU's figure
        row = jobs.loc[(name, "fedavg", 0)]
        assert (row["hardware"], row["basis"]) == ("cpu", "measured")
        assert row["seconds"] == pytest.approx(OVERHEAD + RATES["fedavg"] * work.total())
    only_gpu = plan(paper, Fit.from_measured([]), gpu).set_index(["study", "run", "seed"])
    assert only_gpu.loc[("either", "fedavg", 0), "hardware"] == "gpu"  # auto: the GPU when the CPU has none
    assert only_gpu.loc[("on_cpu", "fedavg", 0), "basis"] == "none"  # cpu: never from the GPU's fit

    flat = plan(paper, cpu, gpu)
    table = study_table(flat).set_index("study")
    seconds = flat[flat["study"] == "on_gpu"].groupby("run")["seconds"].sum()
    gpu_seconds = seconds["fedavg"]
    assert table.loc["on_gpu", "gpu_hours"] == pytest.approx(gpu_seconds / 3600)
    assert table.loc["on_gpu", "core_hours"] == pytest.approx(seconds["pfedme"] / 3600)
    assert table.loc["on_cpu", "gpu_hours"] == 0 and table.loc["TOTAL", "gpu_hours"] == pytest.approx(
        gpu_seconds / 3600
    )

    (tmp_path / "paper.yaml").write_text(yaml.safe_dump(paper))
    main(["--configfile", str(tmp_path / "paper.yaml"), "--benchmarks", str(tmp_path / "benchmarks"),
          "--runs", str(tmp_path / "runs")])  # fmt: skip
    printed = capsys.readouterr().out
    assert "Fitted on 6 measured training jobs of 3 studies" in printed
    assert "GPU fit on 3 training jobs of 2 studies measured on a GPU (NVIDIA Test)" in printed
    assert "GPU-hours on NVIDIA Test" in printed and "gpu_hours" in printed
    assert "2 device: cuda jobs had no GPU-measured analog" in printed
    assert "GPU-hours are not estimated" not in printed

    # a suite measured on a GPU node alone: no CPU fit to report
    for record in (tmp_path / "runs").glob("[!g]*/*/seed=*/run.json"):
        record.unlink()
    main(["--configfile", str(tmp_path / "paper.yaml"), "--benchmarks", str(tmp_path / "benchmarks"),
          "--runs", str(tmp_path / "runs")])  # fmt: skip
    printed = capsys.readouterr().out
    assert "Fitted on" not in printed and "GPU fit on 3 training jobs" in printed
    # on_cpu's FedAvg (device: cpu, never from the GPU's fit) and on_gpu's pFedMe (no analog on either)
    assert "4 jobs (fedavg, pfedme) have no measured job" in printed
    assert "0 device: cuda jobs had no GPU-measured analog" in printed  # pFedMe's: not estimated at all


def test_a_run_job_counts_as_a_job_per_seed_with_the_whole_jobs_fixed_cost(tmp_path):
    """train_jobs: run: one benchmark table per run covers its seeds; each seed is measured with its own
    training time and the job's fixed cost (what a job of one seed pays), so s0 is a job's either way."""
    write_measured(tmp_path, MEASURED)
    per_seed = {
        (m.study, m.run, m.seed): m for m in load_measured(tmp_path / "benchmarks", tmp_path / "runs")
    }
    train_dir = tmp_path / "benchmarks" / "train" / "small" / "pfedme"
    seeds = sorted(int(f.stem.split("=")[1]) for f in train_dir.glob("seed=*.tsv"))
    assert len(seeds) > 1
    trained = sum(per_seed[("small", "pfedme", s)].train_seconds for s in seeds)
    for f in train_dir.glob("seed=*.tsv"):
        f.unlink()
    train_dir.rmdir()
    (train_dir.parent / "pfedme.tsv").write_text(f"s\th:m:s\tmax_rss\n{trained + OVERHEAD:.6f}\t0:00:01\t1\n")
    by_run = {(m.study, m.run, m.seed): m for m in load_measured(tmp_path / "benchmarks", tmp_path / "runs")}
    assert by_run.keys() == per_seed.keys()
    for s in seeds:
        m = by_run[("small", "pfedme", s)]
        assert m.train_seconds == per_seed[("small", "pfedme", s)].train_seconds
        assert m.seconds - m.train_seconds == pytest.approx(OVERHEAD)
    assert Fit.from_measured(list(by_run.values())).overhead == pytest.approx(OVERHEAD)


def test_each_execution_path_measured_on_a_gpu_is_fitted_apart_and_estimates_every_gpu_job(tmp_path):
    """A GPU measured FedAvg batched and looped (the loop 3× slower); each run record says its path. A GPU job
    takes the fit of its own path, and the table gives the GPU-hours of each path."""
    cuda = {"device": "cuda:0", "device_name": "NVIDIA Test"}
    base = MEASURED["studies"]["small"]
    for path, slower in (("batched", 1.0), ("loop", 3.0)):
        study = {**base, "device": "cuda", "runs": {"fedavg": {"algorithm": "fedavg", "execution": path}}}
        record = {**cuda, "execution": path, "tf32": False}
        write_measured(tmp_path, {"studies": {f"gpu_{path}": study}}, device=record, rates={"fedavg": slower})
    measured = load_measured(tmp_path / "benchmarks", tmp_path / "runs")
    assert sorted({m.path for m in measured}) == ["batched", "loop"]
    paths = path_fits(measured)
    mlr = "mlr 1x8x8 (650 params)"
    assert paths["loop"].rates[("fedavg", "federation", mlr)] == pytest.approx(3.0)
    assert paths["batched"].rates[("fedavg", "federation", mlr)] == pytest.approx(1.0)
    assert path_of("loop", True) == "loop+tf32" and path_of("batched", False) == "batched"
    cpu, gpu = fits(measured)
    paper = {
        "studies": {
            name: {
                **base,
                "device": "cuda",
                "rounds": 50,
                "runs": {"fedavg": {"algorithm": "fedavg", **extra}},
            }
            for name, extra in (
                ("plain", {}),
                ("looped", {"execution": "loop"}),
                ("auto", {"execution": "auto"}),
            )
        }
    }
    jobs = plan(paper, cpu, gpu, paths).set_index(["study", "run", "seed"])
    work = job_work(spec_of(paper, "plain", "fedavg")).total()
    for study, path, rate in (("plain", "batched", 1.0), ("looped", "loop", 3.0), ("auto", "batched", 1.0)):
        row = jobs.loc[(study, "fedavg", 0)]
        assert (row["hardware"], row["path"]) == ("gpu", path)  # auto on CUDA: batched (measured faster)
        assert row["seconds"] == pytest.approx(OVERHEAD + rate * work)
        assert row["gpu_s_loop"] == pytest.approx(OVERHEAD + 3.0 * work)
        assert row["gpu_s_batched"] == pytest.approx(OVERHEAD + work)
    table = study_table(plan(paper, cpu, gpu, paths)).set_index("study")
    seeds = len(base["seeds"])
    assert table.loc["plain", "gpu_hours_loop"] == pytest.approx(seeds * (OVERHEAD + 3.0 * work) / 3600)
    assert table.loc["TOTAL", "gpu_hours_batched"] == pytest.approx(3 * seeds * (OVERHEAD + work) / 3600)
