"""Cost estimate of a suite's training jobs (e.g. the paper-scale suite) from the measured default suite.

    python -m hetfl.tools.plan --configfile config/paper.yaml [--select a,b] [--benchmarks results/benchmarks]
                         [--runs results/runs]

Lists the training jobs the workflow would plan for the suite (as Snakemake reads it: the ``--configfile``
files merged key by key, or ``config/config.yaml`` when none is given, and their ``study_files`` loaded:
``hetfl.pipeline.config.load_config``; its ``select``, or ``--select``;
a tuned run's grid points on their tuning seeds too) and estimates their
cost from the default suite's measured jobs: each finished training job leaves Snakemake's
``benchmark:`` table ``results/benchmarks/train/<study>/<run>/seed=<s>.tsv`` (column ``s``: wall
seconds of the whole job) and its run record ``results/runs/<study>/<run>/seed=<s>/run.json`` (the
resolved spec, ``wall_time_s`` of the training itself, ``threads``).

**Cost model.** A training job whose resolved spec is ``x`` costs ``seconds(x) = s0 + c · W(x)`` wall seconds
on one core (the workflow gives a training job one thread), where

- ``W = R · S · τ · B · U + E · N · U / 3`` work units (``hetfl.tools.plan_work.job_work``): R rounds, S clients trained
  per round, τ local steps per client and round, B samples per step, U the model's parameters;
  plus E evaluations (every ``eval_every`` rounds, round 0 and the last) over the N samples of every
  client, an evaluated sample costing a third of a trained one (forward only vs forward + backward).
  On a generated problem a step is a product with each client's D × D Gram matrices, whatever its
  samples: U = D² with D the problem's dimension (``d_theta + d_w``, ``dim_x + dim_y`` or
  ``dimension``), B = 1, and an evaluation covers N = the clients.
- ``s0`` (seconds) is the fixed cost of a job: the median over measured jobs of the benchmark's ``s``
  minus the run's ``wall_time_s`` (starting Python, imports, reading the data, writing the outputs).
- ``c`` (seconds per work unit) is the median of ``wall_time_s / W`` over measured jobs (``hetfl.tools.plan_fit.Fit``).
  A planned job whose run was measured (the same spec but for rounds, ``eval_every``, device, study
  and run names: a paper study running a default study's run longer, with more seeds) uses the rate
  of that run's seeds (marked ``same run``). Else it uses the rate fitted over the measured jobs of
  its algorithm, environment and model (model name, input shape and parameters; or problem, of any
  size: marked ``measured``). One whose model was not measured with its algorithm (VGG-11 on CIFAR-10, a CNN on
  3×32×32 images, an MLR on 784 pixels where only 60 features were measured) is extrapolated by
  FLOPs: it takes the ``c`` of the algorithm's measured model nearest in forward FLOPs per sample,
  and its U is its own forward FLOPs per sample times ``P / FLOPs`` of that model (marked ``FLOPs``).
  An algorithm never measured takes the nearest model of its family (same package of
  ``hetfl.algorithms``, same environment; marked ``family``). A small model's ``c`` includes the
  per-step overhead that a large model amortizes, so extrapolating up in size overestimates.

**Memory.** Each job's ``mem_mb`` is what the workflow asks the cluster for (``hetfl.pipeline.resources``: the
process, the dataset, and the clients' stacked state, or the run's ``memory_budget`` when it sets one:
``hetfl.engine.memory``). With ``--profile`` (a Snakemake profile whose ``set-resources: train: mem_mb``
caps every training job) or ``--node-mem-mb``, the jobs asking for more are listed before anything is
submitted.

**CPU and GPU.** Each run record says where its job trained (``device``: ``cpu`` or ``cuda``, and
``device_name``). The jobs measured on a GPU are fitted apart from those measured on a CPU (their own s0
and rates, by the same rules), and a planned job is estimated from the fit of the hardware it will run
on: a ``device: cuda`` job from the GPU-measured jobs (its figure: wall seconds holding one GPU), else, when
none is an analog, from the CPU-measured ones; a ``device: cpu`` job from the CPU-measured ones; a
``device: auto`` job (a GPU where its node has one) from the CPU-measured ones, else the GPU-measured ones.
The ``hardware`` column says which (``cpu`` or ``gpu``). Core-hours are ``seconds · threads / 3600`` of the
CPU-estimated jobs, one thread per job, on the CPU that ran the measured suite; GPU-hours are
``seconds / 3600`` of the GPU-estimated jobs, one GPU each, on the GPU that ran them. Without any job
measured on a GPU (the default suite run on a laptop) GPU-hours are not estimated and a ``device: cuda``
job's CPU figure is a comparison only (docs/gpu.md has what one H200 measured); measure some on a
GPU node (e.g. the default suite there: its runs take ``device: auto``) and plan from those records.

**Execution paths.** A run record also says how its model's calls ran (``execution``: ``batched`` or
``loop``, ``hetfl.engine.execution``; ``tf32``: whether its float32 products ran in TensorFloat-32, the
run's ``precision``). The GPU-measured jobs are also fitted per path (``hetfl.tools.plan_fit.path_fits``; ``loop+tf32`` and so
on); when more than one path was measured on a GPU, a GPU job takes the fit of its own path (its
``execution`` resolved for CUDA, with ``+tf32`` under ``precision: tf32``; column ``path``) and the table adds
``gpu_hours_<path>``: its GPU-hours had every GPU job run that way. ``benchmarks/cuda/check.sh`` (step
``jobs``) measures the VGG-11 study on each path.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import sys
from pathlib import Path

import pandas as pd
import yaml

from hetfl.engine.execution import execution_path
from hetfl.errors import ConfigError
from hetfl.pipeline.config import build_suite, load_config, merge_config  # noqa: F401 (re-exported)
from hetfl.pipeline.resources import train_resources
from hetfl.tools.plan_fit import GPU, Estimate, Fit, Measured, fits, load_measured, path_fits, path_of
from hetfl.tools.plan_work import Work, cost_key, environment, job_work

DEFAULT_CONFIG = "config/config.yaml"


# ---- the suite's jobs and the table ------------------------------------------------------------


def estimate_on(
    device: str, fit: Fit, gpu_fit: Fit | None, algorithm: str, env: str, work: Work, key: str
) -> tuple[Estimate, str]:
    """``(estimate, hardware)`` of a job whose run says ``device`` (``cpu``, ``cuda`` or ``auto``), from the
    CPU-measured ``fit`` or the GPU-measured ``gpu_fit`` (module docstring, "CPU and GPU"); hardware ``cpu``
    or ``gpu``: which fit the seconds come from."""
    order = {"cuda": ("gpu", "cpu"), "cpu": ("cpu",)}.get(device, ("cpu", "gpu"))
    by = {"cpu": fit, "gpu": gpu_fit}
    tried = [
        (by[hardware].estimate(algorithm, env, work, key), hardware)
        for hardware in order
        if by[hardware] is not None
    ]
    return next((pair for pair in tried if pair[0].basis != "none"), tried[0])  # none: the first tried


def plan(
    config: dict, fit: Fit, gpu_fit: Fit | None = None, paths: dict[str, Fit] | None = None
) -> pd.DataFrame:
    """One row per training job of the config's selected studies: study, run, seed, algorithm, model,
    device (the run's ``device`` setting), flops (forward FLOPs per sample), work (W, in work units), seconds
    (estimated wall seconds on one core, or holding one GPU), hardware (``cpu``: from the CPU-measured
    ``fit``, or ``gpu``: from the GPU-measured ``gpu_fit``, :func:`estimate_on`), basis and reference
    (:class:`~hetfl.tools.plan_fit.Estimate`).

    With ``paths`` (:func:`~hetfl.tools.plan_fit.path_fits`), a job estimated on a GPU takes the fit of its own path when that path
    was measured (its ``execution`` on CUDA, ``hetfl.engine.execution.execution_path``, with ``+tf32`` under
    ``precision: tf32``; column ``path``), and gets a column ``gpu_s_<path>`` per measured path: its seconds
    had it run that way."""
    paths = paths or {}
    suite = build_suite(config)
    rows = []
    for name in suite.selected:
        study = suite.studies[name]
        for label in [*study.runs, *study.points]:
            spec = json.loads(study.run_json(label))
            work, env = job_work(spec), environment(spec)
            path = path_of(
                execution_path(spec.get("execution", "batched"), work.flops, "cuda"),
                spec.get("precision") == "tf32",
            )
            args = (spec["algorithm"], env, work, cost_key(spec))
            estimate, hardware = estimate_on(spec["device"], fit, paths.get(path, gpu_fit), *args)
            by_path = {
                f"gpu_s_{p}": f.estimate(*args).seconds if hardware == "gpu" else math.nan
                for p, f in paths.items()
            }
            for seed in study.seeds_of(label):
                rows.append(
                    {
                        "study": name,
                        "run": label,
                        "seed": seed,
                        "algorithm": spec["algorithm"],
                        "model": work.model,
                        "device": spec["device"],
                        "mem_mb": train_resources(study, label).mem_mb,
                        "flops": work.flops,
                        "work": work.total(),
                        "seconds": estimate.seconds,
                        "hardware": hardware,
                        "path": path if hardware == "gpu" else "",
                        "basis": estimate.basis,
                        "reference": estimate.reference,
                        **by_path,
                    }
                )
    return pd.DataFrame(rows)


def study_table(jobs: pd.DataFrame, threads: int = 1) -> pd.DataFrame:
    """Per study and a total: jobs, estimated core-hours (``seconds · threads / 3600`` of its jobs
    estimated on a CPU, nan when no job of the study could be estimated), GPU-hours (``seconds / 3600`` of
    those estimated on a GPU, one GPU a job), the longest job in hours, the devices its runs ask for, and
    the basis: ``measured`` or how many jobs were extrapolated (``FLOPs``, ``family``) or left out
    (``none``); with ``gpu_s_<path>`` columns (:func:`plan`), ``gpu_hours_<path>``: the GPU-hours had every
    GPU job run that way. Then a ``total`` row per device setting (when there are several) and the
    ``TOTAL``."""
    by_path = [c for c in jobs.columns if c.startswith("gpu_s_")]
    rows = []
    for study, g in jobs.groupby("study", sort=False):
        gpu = g["hardware"] == "gpu"
        counts = g["basis"].value_counts()
        basis = ", ".join(
            f"{b}" if counts.get(b) == len(g) else f"{b} {counts[b]}/{len(g)}"
            for b in ("same run", "measured", "FLOPs", "family", "none")
            if b in counts
        )
        estimated = g["seconds"].notna().any()
        rows.append(
            {
                "study": study,
                "jobs": len(g),
                "core_hours": g["seconds"][~gpu].sum() * threads / 3600 if estimated else math.nan,
                "gpu_hours": g["seconds"][gpu].sum() / 3600 if estimated else math.nan,
                **{f"gpu_hours_{c[6:]}": g[c][gpu].sum(min_count=1) / 3600 for c in by_path},
                "longest_job_h": g["seconds"].max() / 3600,
                "max_mem_mb": int(g["mem_mb"].max()),
                "device": ",".join(sorted(set(g["device"]))),
                "basis": basis,
            }
        )
    table = pd.DataFrame(rows)

    def total(name: str, part: pd.DataFrame, device: str) -> dict:
        return {
            "study": name,
            "jobs": int(part["jobs"].sum()),
            "core_hours": part["core_hours"].sum(),
            "gpu_hours": part["gpu_hours"].sum(),
            **{f"gpu_hours_{c[6:]}": part[f"gpu_hours_{c[6:]}"].sum(min_count=1) for c in by_path},
            "longest_job_h": part["longest_job_h"].max(),
            "max_mem_mb": int(part["max_mem_mb"].max()),
            "device": device,
            "basis": "",
        }

    devices = sorted(set(table["device"]))
    totals = [total("total", table[table["device"] == d], d) for d in devices] if len(devices) > 1 else []
    totals.append(total("TOTAL", table, ""))
    return pd.concat([table, pd.DataFrame(totals)], ignore_index=True)


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def profile_mem_mb(profile: Path | str) -> int | None:
    """The ``mem_mb`` a Snakemake profile (its ``config.yaml``) gives every training job
    (``set-resources: train: mem_mb``), or None when it lets the jobs ask for their own."""
    path = Path(profile) / "config.yaml"
    if not path.is_file():
        raise SystemExit(f"profile not found: {path} (--profile)")
    settings = yaml.safe_load(path.read_text()) or {}
    value = ((settings.get("set-resources") or {}).get("train") or {}).get("mem_mb")
    return None if value is None else int(value)


def memory_report(jobs: pd.DataFrame, cap_mb: int | None, where: str, out) -> None:
    """Print the most memory a job asks for and, with a cap, the jobs above it (per study and run)."""
    print(f"\nMemory: the largest training job asks for {int(jobs['mem_mb'].max())} MB.", file=out)
    if cap_mb is None:
        return
    over = jobs[jobs["mem_mb"] > cap_mb]
    if over.empty:
        print(f"Every job fits the {cap_mb} MB of {where}.", file=out)
        return
    print(f"{len(over)} jobs ask for more than the {cap_mb} MB of {where}:", file=out)
    for (study, run), g in over.groupby(["study", "run"], sort=False):
        print(f"  {study}/{run}: {int(g['mem_mb'].max())} MB ({len(g)} seeds); set memory_budget", file=out)


def _hardware_note(jobs: pd.DataFrame, gpu_measured: bool, out) -> None:
    """Print what the hours are measured on (module docstring, "CPU and GPU") and the FLOPs caveat."""
    cuda_on_cpu = int(
        ((jobs["device"] == "cuda") & (jobs["hardware"] == "cpu") & jobs["seconds"].notna()).sum()
    )
    if not gpu_measured:
        print(
            "\nGPU-hours are not estimated (the jobs measured ran on a CPU). These are CPU core-hours (one thread per job) "
            "on the machine that ran the default suite; jobs with device: cuda ask for a GPU, so their CPU "
            "figure is only a comparison, and device: auto uses a GPU where the node has one. Measure some "
            "jobs on a GPU node and plan from their records for GPU-hours.",
            file=out,
        )
    else:
        print(
            "\nGPU-hours: the jobs with device: cuda (and device: auto ones with no CPU-measured analog) are "
            f"estimated from the jobs measured on a GPU, one GPU each; {cuda_on_cpu} device: cuda jobs had no "
            "GPU-measured analog and keep a CPU figure (a comparison only).",
            file=out,
        )
    print(
        "Extrapolating by FLOPs to a larger model overestimates: a small model's time includes per-step "
        "overhead that a larger one amortizes (on a GPU, most of it).",
        file=out,
    )


def report(
    config: dict, measured: list[Measured], out=None, cap_mb: int | None = None, where: str = ""
) -> pd.DataFrame:
    """Print the fits, the per-study estimate of ``config``'s training jobs and their memory (against
    ``cap_mb``, named ``where``, when given) to ``out`` (default stdout); return the job table (:func:`plan`)."""
    out = out or sys.stdout
    fit, gpu_fit = fits(measured)
    paths = path_fits(measured)
    jobs = plan(config, fit, gpu_fit, paths if len(paths) > 1 else None)
    gpus = _fits_report(measured, fit, gpu_fit, paths, out)
    _rates_report(fit, gpu_fit, paths, out)
    hours = "core-hours on this CPU" + (f"; GPU-hours on {gpus}" if gpu_fit is not None else "")
    print(f"\nEstimated cost of {len(jobs)} training jobs ({hours}):", file=out)
    table = study_table(jobs)
    if gpu_fit is None:
        table = table.drop(columns="gpu_hours")
    print(table.to_string(index=False, float_format="%.2f", na_rep="n/a"), file=out)
    _extrapolated_report(jobs, fit, gpu_fit, out)
    memory_report(jobs, cap_mb, where, out)
    unknown = jobs[jobs["basis"] == "none"]
    if len(unknown):
        names = ", ".join(sorted(set(unknown["algorithm"])))
        print(
            f"\n{len(unknown)} jobs ({names}) have no measured job of their algorithm's family on their "
            "environment yet: not estimated (n/a), left out of the total.",
            file=out,
        )
    _hardware_note(jobs, gpu_fit is not None, out)
    return jobs


def _fits_report(measured: list[Measured], fit: Fit, gpu_fit: Fit | None, paths: dict[str, Fit], out) -> str:
    """Print what the CPU and GPU fits (and the GPU's execution paths) were fitted on; return the GPUs'
    names."""
    on_cpu = [m for m in measured if m.device != GPU]
    on_gpu = [m for m in measured if m.device == GPU]
    gpus = ", ".join(sorted({m.device_name or "unnamed" for m in on_gpu}))
    if on_cpu or gpu_fit is None:
        print(
            f"Fitted on {len(on_cpu)} measured training jobs of {len({m.study for m in on_cpu})} studies "
            f"(CPU: {_cpu()}, one thread per job); fixed cost per job s0 = {fit.overhead:.2f} s.",
            file=out,
        )
    if gpu_fit is not None:
        print(
            f"GPU fit on {len(on_gpu)} training jobs of {len({m.study for m in on_gpu})} studies measured on a "
            f"GPU ({gpus}); fixed cost per job s0 = {gpu_fit.overhead:.2f} s.",
            file=out,
        )
        if len(paths) > 1:
            print(
                "Execution paths measured on the GPU (each GPU job estimated under each: gpu_hours_<path>): "
                + "; ".join(
                    f"{p}: {sum(f.counts.values())} jobs, s0 = {f.overhead:.2f} s" for p, f in paths.items()
                ),
                file=out,
            )
    return gpus


def _rates_report(fit: Fit, gpu_fit: Fit | None, paths: dict[str, Fit], out) -> None:
    """Print the fitted rates c per hardware (and GPU path), algorithm, environment and model."""
    rates = pd.DataFrame(
        [
            {"hardware": h, "algorithm": a, "environment": e, "model": m, "jobs": f.counts[a, e, m], "s_per_unit": r}
            for h, f in (("cpu", fit), *(((f"gpu {p}", f) for p, f in paths.items()) if len(paths) > 1 else [("gpu", gpu_fit)]))
            if f is not None
            for (a, e, m), r in f.rates.items()
        ]
    )  # fmt: skip
    if not rates.empty:
        print("\nRates c (median wall seconds per work unit):", file=out)
        rates = rates.sort_values(["hardware", "environment", "algorithm", "model"])
        print(rates.to_string(index=False, float_format="%.3g"), file=out)


def _extrapolated_report(jobs: pd.DataFrame, fit: Fit, gpu_fit: Fit | None, out) -> None:
    """Print the jobs without a measured analog and the measured model each was extrapolated from."""
    scaled = jobs[jobs["basis"].isin(["FLOPs", "family"])]
    if not len(scaled):
        return
    print(
        "\nNo measured analog (extrapolated by forward FLOPs per sample from the nearest measured model):",
        file=out,
    )
    for (study, algorithm, model, hardware, basis, reference), g in scaled.groupby(
        ["study", "algorithm", "model", "hardware", "basis", "reference"], sort=False
    ):
        sizes = (gpu_fit if hardware == "gpu" else fit).sizes
        ratio = g["flops"].iloc[0] / sizes[reference.split(" on ", 1)[1]][0]
        print(
            f"  {study}: {algorithm} on {model} ({len(g)} jobs) <- {reference}{' (GPU)' if hardware == 'gpu' else ''} "
            f"[{basis}; {ratio:.3g}x its FLOPs per sample]",
            file=out,
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m hetfl.tools.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--configfile",
        nargs="*",
        default=[],
        help=f"config files, merged in order (default: {DEFAULT_CONFIG}, as the workflow)",
    )
    parser.add_argument("--base", help="a config the --configfile files are merged over")
    parser.add_argument("--select", help="studies to plan, comma-separated (default: the config's select)")
    parser.add_argument(
        "--benchmarks", default="results/benchmarks", help="the measured suite's benchmark folder"
    )
    parser.add_argument("--runs", default="results/runs", help="the measured suite's run records")
    parser.add_argument("--csv", help="also write the per-job table here")
    parser.add_argument("--profile", help="a Snakemake profile: check the jobs' memory against its mem_mb")
    parser.add_argument(
        "--node-mem-mb", type=int, help="check the jobs' memory against this many MB per node"
    )
    args = parser.parse_args(argv)
    cap, where = args.node_mem_mb, "--node-mem-mb"
    if args.profile and (from_profile := profile_mem_mb(args.profile)) is not None:
        cap, where = from_profile, f"{args.profile} (set-resources: train: mem_mb)"
    if cap is not None and cap < 1:
        raise SystemExit(f"--node-mem-mb must be a positive number of MB, got {cap}")
    files = [*([args.base] if args.base else []), *args.configfile] or [DEFAULT_CONFIG]
    missing = [str(path) for path in files if not Path(path).is_file()]
    if missing:
        raise SystemExit(f"config file(s) not found: {', '.join(missing)} (--configfile, --base)")
    try:
        config = load_config(files)
    except yaml.YAMLError as err:
        raise SystemExit(f"config file is not valid YAML: {err}") from None
    except ConfigError as err:  # its study_files
        raise SystemExit(f"invalid configuration: {err}") from None
    if args.select:
        config["select"] = [name for name in args.select.split(",") if name]
    try:
        jobs = report(config, load_measured(args.benchmarks, args.runs), cap_mb=cap, where=where)
    except ConfigError as err:
        raise SystemExit(f"invalid configuration: {err}") from None
    if args.csv:
        jobs.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
