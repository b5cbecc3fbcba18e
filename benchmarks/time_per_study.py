"""Time per study of a finished suite, from its training jobs' ``benchmark:`` files.

    python benchmarks/time_per_study.py                    # results/benchmarks/train of this checkout
    python benchmarks/time_per_study.py --root /path/to/a/clone/results --markdown
    python benchmarks/time_per_study.py --root results --against /path/to/an/earlier/run/results

Per study: its training jobs, the sum of their wall times and of their CPU times (seconds, the
``s`` and ``cpu_time`` columns Snakemake writes), an estimate of its share of a ``snakemake --cores 2``
run (1.1 × Σ wall / 2: the measured ratio, docs/time.md) and its longest job; then the totals.

A training job trains one run's seeds in turn (``train_jobs: run``, the default: ``<study>/<run>.tsv``) or
one seed (``train_jobs: seed``: ``<study>/<run>/seed=<s>.tsv``); both are read.

``--against`` compares the runs two suites have in common (the same study and run): the ratio of their jobs'
wall times (``ratio``: what the work took, process starts included, so a suite of one job per run against
one of a job per seed shows the starts it saved) and of their seeds' training times (``train_ratio``, the
``wall_time_s`` of each seed's ``run.json``: how much faster or slower the machine itself ran, as its speed
varies from day to day). A run whose settings changed between the suites is in both, so compare suites of
the same configuration or read the studies that changed apart.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from hetfl.pipeline.records import RunRecord


def jobs(root: Path) -> pd.DataFrame:
    """One row per training job under ``root``, indexed by ``study/run`` (a run's job) or ``study/run/seed=S``
    (a seed's job): ``study``, ``run``, ``wall_s``, ``cpu_s``.

    Raises:
        FileNotFoundError: no benchmark file under ``root/benchmarks/train``.
    """
    base = root / "benchmarks" / "train"
    files = sorted([*base.glob("*/*.tsv"), *base.glob("*/*/seed=*.tsv")])
    if not files:
        raise FileNotFoundError(f"no training benchmark under {base}")
    rows = {}
    for f in files:
        last = pd.read_csv(f, sep="\t").iloc[-1]  # a job rerun appends nothing: Snakemake rewrites the file
        study, run = f.relative_to(base).parts[:2]
        rows[str(f.relative_to(base).with_suffix(""))] = {
            "study": study,
            "run": run.removesuffix(".tsv"),
            "wall_s": float(last["s"]),
            "cpu_s": float(last["cpu_time"]),
        }
    return pd.DataFrame.from_dict(rows, orient="index")


def training_s(root: Path, study: str, run: str) -> float:
    """The sum of the ``wall_time_s`` of run ``study/run``'s seeds (their ``run.json``; 0 when absent)."""
    infos = (root / "runs" / study / run).glob("seed=*/run.json")
    return sum(float(RunRecord.read(f).wall_time_s or 0.0) for f in infos)


def table(root: Path) -> pd.DataFrame:
    """One row per study: ``jobs``, ``wall_s``, ``cpu_s``, ``est_min`` (cores 2), ``longest_s``.

    Raises:
        FileNotFoundError: no benchmark file under ``root/benchmarks/train``.
    """
    out = (
        jobs(root)
        .groupby("study", sort=False)
        .agg(
            jobs=("wall_s", "size"),
            wall_s=("wall_s", "sum"),
            cpu_s=("cpu_s", "sum"),
            longest_s=("wall_s", "max"),
        )
    )
    out["est_min"] = 1.1 * out["wall_s"] / 2 / 60
    return out[["jobs", "wall_s", "cpu_s", "est_min", "longest_s"]]


def compare(root: Path, earlier: Path) -> pd.DataFrame:
    """Per study, over the runs both suites have: ``runs``, ``this_s``, ``earlier_s`` (their jobs' wall
    times), ``ratio`` (this / earlier), ``this_train_s``, ``earlier_train_s`` (their seeds' training times,
    ``run.json``) and ``train_ratio``; the last row, ``**all**``, over every common run.

    Raises:
        FileNotFoundError: either root has no training benchmark.
        ValueError: the two suites have no run in common.
    """
    a, b = (j.groupby(["study", "run"])["wall_s"].sum() for j in (jobs(root), jobs(earlier)))
    common = a.index.intersection(b.index)
    if common.empty:
        raise ValueError(f"{root} and {earlier} have no training run in common")
    both = pd.DataFrame(
        {
            "this_s": a.loc[common],
            "earlier_s": b.loc[common],
            "this_train_s": [training_s(root, *key) for key in common],
            "earlier_train_s": [training_s(earlier, *key) for key in common],
        },
        index=common,
    ).reset_index()
    sums = ["this_s", "earlier_s", "this_train_s", "earlier_train_s"]
    out = both.groupby("study").agg(runs=("run", "size"), **{c: (c, "sum") for c in sums})
    out.loc["**all**"] = [len(both), *both[sums].sum()]
    out["ratio"] = out["this_s"] / out["earlier_s"]
    out["train_ratio"] = out["this_train_s"] / out["earlier_train_s"]
    return out.astype({"runs": int})[
        ["runs", "this_s", "earlier_s", "ratio", "this_train_s", "earlier_train_s", "train_ratio"]
    ]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("results"), help="the suite's results folder")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--against", type=Path, help="an earlier suite's results folder: compare the runs both have"
    )
    args = parser.parse_args(argv)
    if args.against is not None:
        out = compare(args.root, args.against)
        print(
            out.round(
                {c: 0 for c in out.columns if c.endswith("_s")} | {"ratio": 3, "train_ratio": 3}
            ).to_string()
        )
        return
    out = table(args.root)
    total = out.sum(numeric_only=True)
    total["longest_s"] = out["longest_s"].max()
    out.loc["**total**"] = total
    out = out.round({"wall_s": 0, "cpu_s": 0, "est_min": 1, "longest_s": 0}).astype(
        {"jobs": int, "wall_s": int, "cpu_s": int, "longest_s": int}
    )
    if args.markdown:
        print(
            "| study | training jobs | Σ job wall, s | Σ job CPU, s | est. wall, `--cores 2`, min | longest job, s |"
        )
        print("|---|---|---|---|---|---|")
        for study, r in out.iterrows():
            name = study if study.startswith("**") else f"`{study}`"
            cells = (
                int(r.jobs),
                f"{int(r.wall_s):,}",
                f"{int(r.cpu_s):,}",
                f"{r.est_min:.1f}",
                int(r.longest_s),
            )
            print(f"| {name} | " + " | ".join(map(str, cells)) + " |")
    else:
        print(out.to_string())


if __name__ == "__main__":
    main()
