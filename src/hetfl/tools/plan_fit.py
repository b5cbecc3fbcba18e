"""The fit of the cost model of :mod:`hetfl.tools.plan` on the measured suite: the finished training jobs
(:func:`load_measured`: their benchmark tables and run records), the fixed cost ``s0`` and the rates ``c``
per algorithm, environment and model (:class:`Fit`), fitted apart for the jobs measured on a CPU and on a GPU
(:func:`fits`) and per execution path on a GPU (:func:`path_fits`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from statistics import median

import pandas as pd

from hetfl.pipeline.records import RunRecord
from hetfl.tools.plan_work import Work, cost_key, environment, family, job_work


@dataclass
class Measured:
    """A finished training job of the measured suite.

    Attributes:
        seconds: the benchmark's ``s`` (wall seconds of the whole job).
        train_seconds: the run's ``wall_time_s`` (building the federation, training, evaluating).
        key: :func:`cost_key` of its spec.
        device: where it trained, ``cpu`` or ``cuda`` (the run record's ``device`` without its index);
            device_name: the record's ``device_name`` (the GPU's name on ``cuda``).
        path: how its model's calls ran (:func:`path_of`: ``batched``, ``loop``, ``loop+tf32``, ...).
    """

    study: str
    run: str
    seed: int
    algorithm: str
    environment: str
    work: Work
    seconds: float
    train_seconds: float
    key: str = ""
    device: str = "cpu"
    device_name: str = ""
    path: str = "batched"

    @property
    def rate(self) -> float:
        """Seconds per work unit of the training itself."""
        return self.train_seconds / self.work.total()


def load_measured(benchmarks: Path | str, runs: Path | str) -> list[Measured]:
    """Every training job with a benchmark table ``<benchmarks>/train/<study>/<run>/seed=<s>.tsv`` and
    a run record ``<runs>/<study>/<run>/seed=<s>/run.json`` (status ``ok``, not resumed from a
    checkpoint, so that both times cover one whole run), with the device it trained on (a record
    without one: ``cpu``). A job that trained a run's seeds in turn (``train_jobs: run``, the table
    ``<benchmarks>/train/<study>/<run>.tsv``) counts as one job per seed whose fixed cost is the whole
    job's (its wall seconds less its seeds' ``wall_time_s``): what a job of one seed would pay."""
    out = []
    base = Path(benchmarks) / "train"
    jobs = [
        (tsv, tsv.parent.parent.name, tsv.parent.name, [int(tsv.stem.split("=", 1)[1])])
        for tsv in sorted(base.glob("*/*/seed=*.tsv"))
    ]
    for tsv in sorted(base.glob("*/*.tsv")):  # a run's job: its seeds are the run's record folders
        seeds = sorted(
            int(d.name.split("=", 1)[1]) for d in (Path(runs) / tsv.parent.name / tsv.stem).glob("seed=*")
        )
        jobs.append((tsv, tsv.parent.name, tsv.stem, seeds))
    for tsv, study, run, seeds in jobs:
        records = [Path(runs) / study / run / f"seed={seed}" / "run.json" for seed in seeds]
        if not seeds or not all(r.is_file() for r in records):
            continue
        infos = [RunRecord.read(r) for r in records]
        seconds = float(pd.read_csv(tsv, sep="\t")["s"].iloc[-1])
        fixed = seconds - sum(float(i.wall_time_s) for i in infos)  # the process's, once per job
        for seed, info in zip(seeds, infos, strict=True):
            if info.status != "ok" or info.resumed_from_round is not None:
                continue
            spec = info.spec
            out.append(
                Measured(
                    study=study,
                    run=run,
                    seed=seed,
                    algorithm=spec["algorithm"],
                    environment=environment(spec),
                    work=job_work(spec),
                    seconds=float(info.wall_time_s) + fixed,
                    train_seconds=float(info.wall_time_s),
                    key=cost_key(spec),
                    device=info.device_type,
                    device_name=str(info.device_name or ""),
                    path=path_of(info.execution or "batched", info.tf32),
                )
            )
    return out


GPU = "cuda"
"""The measured device whose jobs make the GPU fit (:func:`fits`)."""


def path_of(execution: str, tf32: bool) -> str:
    """A job's execution path for the fit: ``batched`` or ``loop`` (``hetfl.engine.execution``), with ``+tf32``
    when its float32 products ran in TensorFloat-32 (a record before these existed: ``batched``)."""
    return execution + ("+tf32" if tf32 else "")


def path_fits(measured: Iterable[Measured]) -> dict[str, Fit]:
    """The fit of the jobs measured on a GPU, per execution path (:func:`path_of`): what ``hetfl.tools.plan.plan`` estimates
    every GPU job under, to compare the paths (``gpu_hours_<path>``)."""
    paths: dict[str, list[Measured]] = {}
    for m in measured:
        if m.device == GPU:
            paths.setdefault(m.path, []).append(m)
    return {path: Fit.from_measured(jobs) for path, jobs in sorted(paths.items())}


def fits(measured: Iterable[Measured]) -> tuple[Fit, Fit | None]:
    """``(cpu, gpu)``: the fit of the jobs measured on a CPU, and that of the jobs measured on a GPU
    (None when there are none), each by :meth:`Fit.from_measured`."""
    measured = list(measured)
    on_gpu = [m for m in measured if m.device == GPU]
    cpu = Fit.from_measured([m for m in measured if m.device != GPU])
    return cpu, (Fit.from_measured(on_gpu) if on_gpu else None)


@dataclass
class Estimate:
    """A planned job's estimated cost.

    Attributes:
        seconds: wall seconds on one core. basis: ``same run`` (the run was measured, at another scale),
        ``measured`` (an analog of the same algorithm and model was measured), ``FLOPs`` (extrapolated from another model by FLOPs), ``family`` (from
        the algorithm's family), or ``none`` (nothing to fit on: ``seconds`` is nan).
        reference: the measured group the rate comes from, ``"<algorithm> on <model>"``.
    """

    seconds: float
    basis: str
    reference: str


@dataclass
class Fit:
    """The fitted cost model: ``s0`` and a rate per (algorithm, environment, model) group.

    Attributes:
        overhead: s0, seconds per job.
        rates: ``(algorithm, environment, model) -> seconds per work unit`` (the median).
        counts: measured jobs per group.
        sizes: ``model -> (F, U)`` of each measured model: forward FLOPs per sample (0 on a
            generated problem) and work units per sample.
        run_rates: ``cost_key -> seconds per work unit``, the median over that run's measured seeds.
    """

    overhead: float
    rates: dict[tuple[str, str, str], float]
    counts: dict[tuple[str, str, str], int]
    sizes: dict[str, tuple[float, float]] = field(default_factory=dict)
    run_rates: dict[str, float] = field(default_factory=dict)

    @classmethod
    def from_measured(cls, measured: Iterable[Measured]) -> Fit:
        """Fit s0 and the rates on measured jobs (medians; see the module docstring)."""
        measured = list(measured)
        groups: dict[tuple[str, str, str], list[float]] = {}
        runs: dict[str, list[float]] = {}
        for m in measured:
            groups.setdefault((m.algorithm, m.environment, m.work.model), []).append(m.rate)
            runs.setdefault(m.key, []).append(m.rate)
        overhead = median(max(0.0, m.seconds - m.train_seconds) for m in measured) if measured else 0.0
        return cls(
            overhead=overhead,
            rates={k: median(v) for k, v in groups.items()},
            counts={k: len(v) for k, v in groups.items()},
            sizes={m.work.model: (m.work.flops, m.work.units) for m in measured},
            run_rates={k: median(v) for k, v in runs.items() if k},
        )

    def _nearest(self, keys: list[tuple[str, str, str]], work: Work) -> tuple[str, str, str]:
        """The group of ``keys`` whose model is nearest the job's in forward FLOPs per sample (in
        parameters on a generated problem), on a log scale; ties: more measured jobs."""

        def size(flops: float, units: float) -> float:
            return math.log(max(flops if flops > 0 else units, 1.0))

        job = size(work.flops, work.units)
        return min(keys, key=lambda k: (abs(size(*self.sizes[k[2]]) - job), -self.counts[k]))

    def _scaled(self, key: tuple[str, str, str], work: Work) -> float:
        """Rate of ``key`` times W, the job's U taken as its FLOPs per sample over the reference
        model's FLOPs per unit (U itself on a generated problem or a model without FLOPs)."""
        ref_flops, ref_units = self.sizes[key[2]]
        units = work.flops * ref_units / ref_flops if ref_flops > 0 and work.flops > 0 else work.units
        return self.rates[key] * work.total(units)

    def estimate(self, algorithm: str, env: str, work: Work, key: str = "") -> Estimate:
        """The estimated wall seconds of a job of ``algorithm`` on ``env`` with size ``work`` and
        :func:`cost_key` ``key``: from the same run measured (``same run``), else from the measured
        group of the same algorithm and model (``measured``), else from the algorithm's measured model
        nearest in size, scaled by FLOPs (``FLOPs``), else from the nearest of the algorithm
        family's (``family``)."""
        if key in self.run_rates:
            seconds = self.overhead + self.run_rates[key] * work.total()
            return Estimate(seconds, "same run", f"{algorithm} on {work.model}")
        exact = (algorithm, env, work.model)
        if exact in self.rates:
            seconds = self.rates[exact] * work.total()
            return Estimate(self.overhead + seconds, "measured", f"{algorithm} on {work.model}")
        for basis, keys in (
            ("FLOPs", [k for k in self.rates if k[:2] == (algorithm, env)]),
            (
                "family",
                [k for k in self.rates if k[1] == env and family(k[0], env) == family(algorithm, env)],
            ),
        ):
            if keys:
                key = self._nearest(keys, work)
                return Estimate(self.overhead + self._scaled(key, work), basis, f"{key[0]} on {key[2]}")
        return Estimate(math.nan, "none", "")
