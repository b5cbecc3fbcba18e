"""Checking a study's claims (:mod:`hetfl.pipeline.claims`: their grammar and how they are normalized) on its
aggregate: each claim on the seed means (``holds``) and per seed, each comparison's paired 95 % interval over
seeds (:func:`paired_interval`) and the claim's statistical status from them (:func:`claim_status`), written
as ``claims.csv`` (:func:`check_claims`) and ``claims.md`` (:func:`claims_markdown`)."""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np

from hetfl.pipeline.claims import Term, _compile

if TYPE_CHECKING:  # pandas and hetfl.pipeline.aggregate (scipy) are imported where claims are checked
    import pandas as pd


def _evaluate(node: tuple, values: list):
    """Evaluate an expression tree; ``values[j]`` (a float or an array over seeds) for Term j."""
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "term":
        return values[node[1]]
    if kind == "unary":
        return node[1](_evaluate(node[2], values))
    if kind == "extreme":
        return functools.reduce(node[1], [np.asarray(_evaluate(arg, values), float) for arg in node[2]])
    with np.errstate(all="ignore"):
        return node[1](np.asarray(_evaluate(node[2], values), float), _evaluate(node[3], values))


def _compare(tree: tuple, values: list) -> tuple[np.ndarray, np.ndarray, list[tuple]]:
    """Evaluate a comparison (or comparisons joined by ``and``: all must hold) elementwise over ``values``.

    Returns (holds, undetermined, pairs): holds is False where undetermined (a side is not finite);
    pairs are ``(symbol, lhs, rhs)`` per adjacent pair of sides.
    """
    if tree[0] == "and":
        parts = [_compare(part, values) for part in tree[1]]
        undetermined = np.logical_or.reduce([u for _, u, _ in parts])
        holds = np.logical_and.reduce([h for h, _, _ in parts])
        return holds & ~undetermined, undetermined, [pair for _, _, pairs in parts for pair in pairs]
    _, ops, sides = tree
    sides = np.broadcast_arrays(*[np.asarray(_evaluate(side, values), float) for side in sides])
    pairs = [(symbol, fn, lhs, rhs) for (symbol, fn), lhs, rhs in zip(ops, sides, sides[1:], strict=False)]
    undetermined = np.logical_or.reduce([~np.isfinite(side) for side in sides])
    holds = np.logical_and.reduce([fn(lhs, rhs) for _, fn, lhs, rhs in pairs])
    return holds & ~undetermined, undetermined, [(symbol, lhs, rhs) for symbol, _, lhs, rhs in pairs]


def _over_seeds(values: np.ndarray, seeds: str) -> np.ndarray:
    """``values`` per seed (``seeds`` ``each``), or their finite min/max repeated for every seed."""
    if seeds == "each":
        return values
    finite = values[np.isfinite(values)]
    extreme = (finite.min() if seeds == "seedmin" else finite.max()) if finite.size else np.nan
    return np.full_like(values, extreme)


def _margin(pairs: list[tuple]) -> float:
    """Smallest signed slack over the pairs: >= 0 when every pair holds (> 0 for strict ones)."""
    return float(min((lhs - rhs) if symbol.startswith(">") else (rhs - lhs) for symbol, lhs, rhs in pairs))


def _term_indices(node: tuple) -> set[int]:
    """The indices of the Terms an expression tree reads."""
    kind = node[0]
    if kind == "num":
        return set()
    if kind == "term":
        return {node[1]}
    if kind == "unary":
        return _term_indices(node[2])
    if kind == "extreme":
        return set().union(*(_term_indices(arg) for arg in node[2]))
    return _term_indices(node[2]) | _term_indices(node[3])


def _side_pairs(tree: tuple) -> list[tuple[tuple, tuple]]:
    """The (lhs, rhs) expression trees of every adjacent pair, in the order of :func:`_compare`'s pairs."""
    if tree[0] == "and":
        return [pair for part in tree[1] for pair in _side_pairs(part)]
    sides = tree[2]
    return list(zip(sides, sides[1:], strict=False))


MIN_SEEDS_FOR_INTERVAL = 3
"""Fewer paired seeds than this: no confidence interval (a t interval on 2 seeds is uninformative)."""


def paired_interval(symbol: str, lhs: np.ndarray, rhs: np.ndarray, constant: bool = False) -> dict:
    """The paired difference of one comparison over seeds, and its 95 % confidence interval.

    The difference is oriented so that it is positive on the claimed side: ``lhs - rhs`` for ``>`` and
    ``>=``, ``rhs - lhs`` for ``<`` and ``<=``. Seed ``s`` of one side pairs with seed ``s`` of the
    other (the same seed draws the same partition and participation); a side constant across seeds (a
    number, ``seedmin``/``seedmax``) makes it the one-sample version. The interval is Student's t over
    the seeds where both sides are finite (``scipy.stats.ttest_1samp(d).confidence_interval(0.95)``;
    ``[mean, mean]`` when every difference is the same).

    Args:
        symbol: ``<``, ``<=``, ``>`` or ``>=``.
        lhs, rhs: the two sides per seed, shape ``(n_seeds,)`` (broadcastable), ``nan`` where missing.
        constant: neither side varies across seeds (only numbers and seed ranges): no interval.

    Returns:
        ``{"n", "mean", "sd", "low", "high", "kind"}``: n (seeds with both sides finite), mean and standard
        deviation (ddof=1) of the differences, the interval (``nan`` without one), and kind: ``exact``
        (``constant``), ``missing`` (n = 0), ``few`` (n < :data:`MIN_SEEDS_FOR_INTERVAL`: no interval),
        ``clear`` (the interval lies on the claimed side: low > 0, or >= 0 for ``<=``/``>=``), ``against``
        (it lies on the other side: high <= 0, or < 0 for ``<=``/``>=``) or ``noise`` (it straddles the
        threshold: the comparison is undecided at these seeds).
    """
    from scipy import stats

    lhs, rhs = np.broadcast_arrays(np.asarray(lhs, float), np.asarray(rhs, float))
    diff = (lhs - rhs) if symbol.startswith(">") else (rhs - lhs)
    diff = diff[np.isfinite(diff)]
    n = int(diff.size)
    out = {
        "n": n,
        "mean": float(diff.mean()) if n else np.nan,
        "sd": float(diff.std(ddof=1)) if n > 1 else np.nan,
        "low": np.nan,
        "high": np.nan,
    }
    if constant or n < MIN_SEEDS_FOR_INTERVAL:
        return {**out, "kind": "exact" if constant and n else "missing" if not n else "few"}
    if np.ptp(diff) == 0:
        low = high = out["mean"]
    else:
        low, high = stats.ttest_1samp(diff, 0.0).confidence_interval(0.95)
    strict = symbol in ("<", ">")
    if low > 0 or (not strict and low >= 0):
        kind = "clear"
    elif high < 0 or (strict and high <= 0):
        kind = "against"
    else:
        kind = "noise"
    return {**out, "low": float(low), "high": float(high), "kind": kind}


MAX_SEEDS_NEEDED = 10_000
"""Beyond this many seeds :func:`seeds_needed` answers ``inf`` (an effect too small for its spread)."""


def seeds_needed(interval: dict) -> float:
    """The fewest seeds at which a comparison's observed mean difference and spread would give a 95 % t
    interval that excludes 0 (decided, either way): the smallest n ≥ 3 with t₀.₉₇₅,ₙ₋₁ · sd / √n < |mean|.

    Args:
        interval: :func:`paired_interval` of the comparison.

    Returns:
        n as a float; ``inf`` when the mean difference is 0 or needs more than :data:`MAX_SEEDS_NEEDED`
        seeds; ``nan`` without a spread to project (fewer than 2 seeds, constant sides).
    """
    from scipy import stats

    mean, sd = abs(interval["mean"]), interval["sd"]
    if not (np.isfinite(mean) and np.isfinite(sd)) or interval["kind"] in ("exact", "missing"):
        return np.nan
    if sd == 0:
        return float(MIN_SEEDS_FOR_INTERVAL) if mean > 0 else np.inf
    if mean == 0:
        return np.inf
    n = np.arange(MIN_SEEDS_FOR_INTERVAL, MAX_SEEDS_NEEDED + 1)
    ok = stats.t.ppf(0.975, n - 1) * sd / np.sqrt(n) < mean
    return float(n[ok.argmax()]) if ok.any() else np.inf


def claim_status(holds: str, intervals: list[dict]) -> str:
    """The statistical status of a claim from its ``holds`` on the means and its comparisons' intervals.

    Args:
        holds: ``yes`` | ``no`` | ``undetermined`` (:func:`check_claims`, on the means).
        intervals: :func:`paired_interval` of each comparison (every adjacent pair of every comparison
            joined by ``and``).

    Returns:
        ``undetermined`` (an operand has no value); ``does not hold`` (some comparison's interval lies on
        the other side of its threshold, or, without intervals, it fails on the means); ``undecided
        (holds on the means)`` / ``undecided (fails on the means)`` (no interval lies on the other side,
        but some straddles the threshold: these seeds cannot decide it; :func:`seeds_needed` says how many
        would); ``holds`` (every interval lies on the claimed side, or the comparison is between
        constants across seeds). With fewer than 3 paired seeds in some comparison, ``holds`` and ``does
        not hold`` end with ``(n seed(s): no interval)``.
    """
    if holds == "undetermined":
        return "undetermined"
    few = [i["n"] for i in intervals if i["kind"] == "few" or (i["kind"] == "exact" and i["n"] < 3)]
    suffix = ""
    if few:
        n = min(few)
        suffix = f" ({n} seed{'s' if n != 1 else ''}: no interval)"
    if any(i["kind"] == "against" for i in intervals):
        return "does not hold"
    if any(i["kind"] == "noise" for i in intervals):
        return f"undecided ({'holds' if holds == 'yes' else 'fails'} on the means)"
    if holds != "yes":
        return "does not hold" + suffix
    return "holds" + suffix


def _binding(intervals: list[dict]) -> dict:
    """The comparison closest to failing: the smallest interval low, else the smallest mean difference."""
    with_ci = [i for i in intervals if np.isfinite(i["low"])]
    if with_ci:
        return min(with_ci, key=lambda i: i["low"])
    finite = [i for i in intervals if np.isfinite(i["mean"])]
    return (
        min(finite, key=lambda i: i["mean"])
        if finite
        else {"n": 0, "mean": np.nan, "low": np.nan, "high": np.nan}
    )


def _interval_text(interval: dict) -> str:
    """``+0.012 [-0.004, +0.029] (n=3)``; without an interval, the reason."""
    mean = f"{interval['mean']:+.4g}" if np.isfinite(interval["mean"]) else "nan"
    kind = interval["kind"]
    if kind in ("clear", "noise", "against"):
        return f"{mean} [{interval['low']:+.4g}, {interval['high']:+.4g}] (n={interval['n']})"
    note = {"exact": "constant across seeds", "missing": "no seed", "few": "no interval"}[kind]
    return f"{mean} (n={interval['n']}, {note})"


def _describe(term: Term, values: pd.Series) -> str:
    finite = values[np.isfinite(values)]
    text = f"{term} = {finite.mean():.4g}" if len(finite) else f"{term} = nan"
    if len(finite) > 1:
        text += f" ± {finite.std(ddof=1):.2g}"
    n = f"{len(finite)}" if len(finite) == len(values) else f"{len(finite)} of {len(values)}"
    return f"{text} (n={n})"


CLAIMS_COLUMNS = [
    "id",
    "text",
    "check",
    "at",
    "holds",
    "status",
    "seeds_holding",
    "seeds_needed",
    "margin",
    "n_paired",
    "diff_mean",
    "diff_ci_low",
    "diff_ci_high",
    "comparisons",
    "intervals",
    "operands",
]
"""Columns of ``claims.csv`` (:func:`check_claims`)."""


def check_claims(
    claims: list[dict], long: pd.DataFrame, status: pd.DataFrame, client_rounds: pd.DataFrame | None = None
) -> pd.DataFrame:
    """Check normalized claims (see :func:`hetfl.pipeline.claims.normalize_claims`) on a study's records.

    Args:
        claims: ``{id, text, check, at}`` dicts.
        long, status: as returned by :func:`hetfl.pipeline.aggregate.load_runs` (one study).
        client_rounds: the statistics over clients at every round (``hetfl.pipeline.aggregate.client_round_stats``,
            ``clients_rounds.csv``), for ``client_mean``, ``client_std`` and ``worst10``; None: their operands
            have no value (undetermined).

    Returns:
        One row per claim: id, text, check, at; holds (``yes`` | ``no`` | ``undetermined`` when an
        operand has no value, e.g. every seed of its run diverged or the round was not evaluated),
        decided on the operands' means over seeds; seeds_holding (``k/n``: seeds, aligned by seed
        id over the runs involved, on which the expression holds; a seed where an operand is
        missing does not hold and is counted as undetermined); margin (the smallest signed slack
        ``lhs - rhs`` for ``>``/``>=``, ``rhs - lhs`` for ``<``/``<=`` over the comparisons, on the
        means); comparisons (``lhs op rhs`` per pair, on the means); operands (each operand's mean
        ± std (ddof=1) over seeds with n).

        The statistical columns (:func:`paired_interval` per pair, :func:`claim_status`): status
        (``holds`` | ``undecided (holds on the means)`` | ``undecided (fails on the means)`` | ``does not
        hold`` | ``undetermined``, with ``(n seeds: no interval)`` under 3 paired seeds); seeds_needed
        (for an undecided claim, the seeds its observed effects and spreads would need to decide it:
        :func:`seeds_needed`, the most over its undecided comparisons; ``inf`` for an effect of 0, empty
        for a decided claim); n_paired (the fewest seeds with both sides finite over
        the pairs); diff_mean, diff_ci_low, diff_ci_high (the mean paired difference, oriented
        positive on the claimed side, and its 95 % t interval, of the pair closest to failing: the
        smallest interval low, else the smallest mean; ``nan`` bounds without an interval);
        intervals (``mean [low, high] (n=k)`` per pair, in the order of comparisons).

    Raises:
        ConfigError: a check does not parse (key ``claims[i].check``).
    """
    import pandas as pd

    cache: dict[tuple[str | None, str, int | None], dict[tuple[str, str], pd.Series]] = {}
    rows = []
    for i, claim in enumerate(claims):
        tree, terms = _compile(claim["check"], claim.get("at", "final"), f"claims[{i}].check")
        per_term = _term_values(terms, cache, long, status, client_rounds)
        seeds = sorted(set(status.loc[status["run"].isin({t.run for t in terms}), "seed"]))
        per_seed = [
            _over_seeds(s.reindex(seeds).to_numpy(float), t.seeds)
            for s, t in zip(per_term, terms, strict=True)
        ]
        rows.append(_claim_row(claim, tree, terms, per_seed, len(seeds)))
    return pd.DataFrame(rows, columns=CLAIMS_COLUMNS)


def _term_values(
    terms: list[Term],
    cache: dict,
    long: pd.DataFrame,
    status: pd.DataFrame,
    client_rounds: pd.DataFrame | None,
) -> list[pd.Series]:
    """Each Term's values per seed (a Series indexed by seed; empty when the run or metric has none), from
    ``cache`` (per statistic: (run, metric) -> values), which it fills as needed."""
    import pandas as pd

    from hetfl.pipeline.aggregate import client_stat_values, seed_values

    out = []
    for term in terms:
        stat = (term.clients, term.stat, term.arg)
        if stat not in cache:
            if term.clients is None:
                values = seed_values(long, status, term.stat, term.arg)
            elif client_rounds is None:
                values = pd.DataFrame(columns=["run", "metric", "seed", "value"])
            else:
                values = client_stat_values(client_rounds, long, status, *stat)
            cache[stat] = {k: g.set_index("seed")["value"] for k, g in values.groupby(["run", "metric"])}
        out.append(cache[stat].get((term.run, term.metric), pd.Series(dtype=float)))
    return out


def _claim_row(claim: dict, tree: tuple, terms: list[Term], per_seed: list[np.ndarray], n_seeds: int) -> dict:
    """A claim's row of ``claims.csv`` (:data:`CLAIMS_COLUMNS`) from its compiled ``tree`` and its Terms'
    values ``per_seed`` (aligned over the ``n_seeds`` seeds of the runs it reads)."""
    import pandas as pd

    means = [float(np.nanmean(v)) if np.isfinite(v).any() else np.nan for v in per_seed]
    holds, undetermined, pairs = _compare(tree, means)
    seed_holds, seed_undetermined, seed_pairs = _compare(tree, per_seed)
    intervals = [
        paired_interval(
            symbol,
            lhs,
            rhs,
            constant=not any(terms[j].seeds == "each" for j in _term_indices(a) | _term_indices(b)),
        )
        for (symbol, lhs, rhs), (a, b) in zip(seed_pairs, _side_pairs(tree), strict=True)
    ]
    binding = _binding(intervals)
    verdict = "undetermined" if undetermined else ("yes" if holds else "no")
    status = claim_status(verdict, intervals)
    open_ = (
        [seeds_needed(i) for i in intervals if i["kind"] == "noise"] if status.startswith("undecided") else []
    )
    count = f"{int(seed_holds.sum())}/{n_seeds}"
    if seed_undetermined.any():
        count += f" ({int(seed_undetermined.sum())} undetermined)"
    return {
        **{k: claim.get(k, "") for k in ("id", "text", "check")},
        "at": claim.get("at", "final"),
        "holds": verdict,
        "status": status,
        "seeds_holding": count,
        "seeds_needed": max(open_, default=np.nan),
        "margin": np.nan if undetermined else _margin(pairs),
        "n_paired": min(i["n"] for i in intervals),
        "diff_mean": binding["mean"],
        "diff_ci_low": binding["low"],
        "diff_ci_high": binding["high"],
        "comparisons": "; ".join(f"{lhs:.4g} {symbol} {rhs:.4g}" for symbol, lhs, rhs in pairs),
        "intervals": "; ".join(_interval_text(i) for i in intervals),
        "operands": "; ".join(_describe(t, pd.Series(v)) for t, v in zip(terms, per_seed, strict=True)),
    }


CLAIMS_LEGEND = (
    "holds: on the means over seeds (yes, no, undetermined when an operand has no value). status: "
    "holds (every comparison's 95 % interval lies on the claimed side), does not hold (some interval lies "
    "on the other side; without intervals, it fails on the means), undecided (no interval on the other "
    "side but some straddles the threshold: the seeds cannot decide it; whether it holds or fails on the "
    "means in brackets), undetermined; '(n seeds: no interval)' when a comparison pairs fewer than 3 seeds.",
    "seeds to decide: for an undecided claim, the seeds at which its observed mean paired difference and "
    "spread would give an interval clear of the threshold (either way; inf: a mean difference of 0), "
    "so that an underpowered comparison reads apart from a failing one.",
    "paired difference: per comparison, the mean over seeds of the per-seed difference of its two sides "
    "(seed s of one run against seed s of the other: same partition and participation), oriented positive "
    "on the claimed side (a - b for a > b, b - a for a < b), with its 95 % Student t interval over seeds; "
    "against a constant (a number, seedmin/seedmax) the one-sample interval.",
)
"""The legend under ``claims.md`` (one entry a line)."""


def needed_text(value: float) -> str:
    """``seeds_needed`` as a cell: empty for a decided claim, ``inf``, or ``n``."""
    if not isinstance(value, (int, float)) or np.isnan(value):
        return ""
    return "inf" if np.isinf(value) else f"{int(value)}"


def claims_markdown(df: pd.DataFrame) -> str:
    """A Markdown table of checked claims, its legend, then each claim's operands.

    Args:
        df: as returned by :func:`check_claims`.

    Returns:
        A table with columns id, claim, check, holds, status, seeds (seeds_holding), seeds to decide
        (seeds_needed), means
        (comparisons) and paired difference (intervals: ``mean [95 % CI] (n=k)`` per comparison), the
        legend (:data:`CLAIMS_LEGEND`), then each claim's operands with their mean ± std over seeds.
    """

    import pandas as pd

    def cell(text: object) -> str:
        return str(text).replace("|", "\\|")

    table = pd.DataFrame(
        {
            "id": df["id"],
            "claim": df["text"].map(cell),
            "check": df["check"].map(lambda c: f"`{cell(c)}`"),
            "holds": df["holds"],
            "status": df["status"],
            "seeds": df["seeds_holding"],
            "seeds to decide": df["seeds_needed"].map(needed_text),
            "means": df["comparisons"],
            "paired difference [95 % CI]": df["intervals"],
        }
    )
    lines = [table.to_markdown(index=False), ""]
    lines += [f"- {line}" for line in CLAIMS_LEGEND]
    lines += ["", "Operands (mean ± std over seeds):", ""]
    lines += [f"- {row.id}: {cell(row.operands)}" for row in df.itertuples()]
    return "\n".join(lines) + "\n"
