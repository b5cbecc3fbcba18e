"""Time per study of a finished suite, from its training jobs' ``benchmark:`` files.

    python benchmarks/time_per_study.py                    # results/benchmarks/train of this checkout
    python benchmarks/time_per_study.py --root /path/to/a/clone/results --markdown
    python benchmarks/time_per_study.py --root results --against /path/to/an/earlier/run/results

Per study: its training jobs, the sum of their wall times and of their CPU times (seconds, the
``s`` and ``cpu_time`` columns Snakemake writes), an estimate of its share of a ``snakemake --cores 2``
run (1.1 × Σ wall / 2: the measured ratio, docs/time.md) and its longest job; then the totals.

``--against`` compares the jobs two runs have in common (the same study, run and seed): the ratio of their
wall times, per study and over all, says how much faster or slower the machine ran the same work (its
speed varies from day to day); a job whose settings changed between the runs is in both, so compare runs
of the same configuration or read the studies that changed apart.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd


def jobs(root: Path) -> pd.DataFrame:
    """One row per training job under ``root``, indexed by ``study/run/seed=S``: ``study``, ``wall_s``, ``cpu_s``.

    Raises:
        FileNotFoundError: no benchmark file under ``root/benchmarks/train``.
    """
    base = root / "benchmarks" / "train"
    files = sorted(base.glob("*/*/seed=*.tsv"))
    if not files:
        raise FileNotFoundError(f"no training benchmark under {base}")
    rows = {}
    for f in files:
        last = pd.read_csv(f, sep="\t").iloc[-1]  # a job rerun appends nothing: Snakemake rewrites the file
        key = str(f.relative_to(base).with_suffix(""))
        rows[key] = {"study": f.parts[-3], "wall_s": float(last["s"]), "cpu_s": float(last["cpu_time"])}
    return pd.DataFrame.from_dict(rows, orient="index")


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
    """Per study, over the jobs both runs have: ``jobs``, ``this_s``, ``earlier_s`` and ``ratio`` (this /
    earlier); the last row, ``**all**``, over every common job.

    Raises:
        FileNotFoundError: either root has no training benchmark.
        ValueError: the two runs have no job in common.
    """
    a, b = jobs(root), jobs(earlier)
    common = a.index.intersection(b.index)
    if common.empty:
        raise ValueError(f"{root} and {earlier} have no training job in common")
    both = pd.DataFrame(
        {
            "study": a.loc[common, "study"],
            "this_s": a.loc[common, "wall_s"],
            "earlier_s": b.loc[common, "wall_s"],
        }
    )
    out = both.groupby("study").agg(
        jobs=("this_s", "size"), this_s=("this_s", "sum"), earlier_s=("earlier_s", "sum")
    )
    out.loc["**all**"] = [len(both), both["this_s"].sum(), both["earlier_s"].sum()]
    out["ratio"] = out["this_s"] / out["earlier_s"]
    return out.astype({"jobs": int})


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path("results"), help="the suite's results folder")
    parser.add_argument("--markdown", action="store_true", help="print a Markdown table")
    parser.add_argument(
        "--against", type=Path, help="an earlier run's results folder: compare the common jobs"
    )
    args = parser.parse_args(argv)
    if args.against is not None:
        print(compare(args.root, args.against).round({"this_s": 0, "earlier_s": 0, "ratio": 3}).to_string())
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
