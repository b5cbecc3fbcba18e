"""A paper's qualitative claims, written as comparisons and checked on a study's aggregate.

A study's config lists its claims, each a string or a dict::

    claims:
      - "pfedme.test_acc_personal > fedavg.test_acc_global"
      - id: C1
        text: "pFedMe (PM) beats FedAvg on MNIST"       # the paper's words
        check: "best(test_acc_personal[pfedme]) > best(test_acc_global[fedavg]) + 0.01"
        at: final                                       # statistic of bare operands

Grammar of ``check``:

- operands: ``run.metric`` when the run label is an identifier, or ``metric[label]`` for any label
  (``test_acc_personal[pfedme-lam=15]``);
- statistics: ``final(op)``, ``best(op)`` (best over rounds, the pFedMe paper's metric),
  ``last(op, k)`` (mean of the last k evaluated rounds), ``at(op, round)``, ``diverged(op)`` (the
  fraction of the run's seeds that diverged, so ``diverged(x[lam30]) > 0`` claims a divergence);
  a bare operand takes the claim's ``at`` (``final`` | ``best`` | ``last<k>`` | ``round=<n>``;
  default ``final``);
- statistics over clients, of a metric recorded per client (``metrics_clients.csv``: ``test_acc_*``,
  ``test_loss_*``, ``train_loss_*``, ``val_*``): ``client_mean(x)`` (unweighted mean over the clients),
  ``client_std(x)`` (their std, ddof=0) and ``worst10(x)`` (the mean of the worst 10 %), each per seed at
  the round the claim's ``at`` selects, or the statistic given: ``worst10(best(x))``, ``client_std(at(x,
  100))``, ``worst10(last(x, 5))`` (the mean over the last 5 rounds) (:func:`hetfl.pipeline.aggregate
  .client_stat_values`, from ``clients_rounds.csv``);
- seed ranges: ``seedmin(x)`` and ``seedmax(x)``, the smallest and largest value over the seeds of
  ``x`` (an operand or a statistic of one), the same for every seed: ``seedmin(at(x, 0)) <= 14 <=
  seedmax(at(x, 0))`` checks that a paper's single random draw lies within our seeds' range;
- numbers, ``+ - * /``, unary minus, parentheses;
- comparisons joined by ``and`` (every one must hold): ``a > b and a > c``;
- one comparison, ``<``, ``<=``, ``>`` or ``>=``, possibly chained: ``a < b < c`` holds when every
  adjacent pair does (a monotonicity claim).

Parsing never evaluates the text: operands are replaced by placeholders and the result is
parsed by :mod:`ast` and checked against a whitelist of node types; evaluation walks that tree.

A claim ``holds`` when its comparison holds on the seed means of its operands (statistics follow
:mod:`hetfl.pipeline.aggregate`: a diverged seed has no value and is left out of the mean). The same
expression is also evaluated per seed (seeds aligned by seed id) to show how many seeds agree, and
each comparison's per-seed difference gives a paired 95 % interval over seeds (:func:`paired_interval`)
from which a claim's statistical status follows (:func:`claim_status`: holds, holds within noise,
does not hold, undetermined).
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from hetfl.errors import ConfigError
from hetfl.metrics import CLIENT_METRICS

if (
    TYPE_CHECKING
):  # pandas and hetfl.pipeline.aggregate (scipy) are imported where claims are checked, so that
    # validating a config (every training job does) does not pay for them
    import pandas as pd

FUNCTIONS = {"final": 0, "best": 0, "last": 1, "at": 1, "diverged": 0}
"""Statistic functions and how many integer arguments follow the operand."""
SEED_RANGE = ("seedmin", "seedmax")
"""Functions of an operand or statistic over seeds (a constant across seeds)."""
CLIENT_FUNCTIONS = ("client_mean", "client_std", "worst10")
"""Statistics over the clients of a per-client metric (``hetfl.pipeline.aggregate.CLIENT_STATS``), per seed."""
CLIENT_METRIC_PREFIXES = tuple(f"{split}_{stat}_" for split, stat in CLIENT_METRICS)
"""The metrics recorded per client (``hetfl.metrics.CLIENT_METRICS``), beside ``in_cluster_weight``."""

CLAIM_KEYS = ("id", "text", "check", "at")
AT_FORMS = ("final", "best", "last<k>", "round=<n>")
MAX_CHECK_LENGTH = 500

_COMPARE = {
    ast.Lt: ("<", operator.lt),
    ast.LtE: ("<=", operator.le),
    ast.Gt: (">", operator.gt),
    ast.GtE: (">=", operator.ge),
}
_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_BRACKET = re.compile(r"(?<![\w.\]])([A-Za-z_]\w*)\s*\[([^\[\]]*)\]")
_DOTTED = re.compile(r"(?<![\w.\]])([A-Za-z_]\w*)\.([A-Za-z_]\w*)\b(?!\s*[(\[])")
_PLACEHOLDER = re.compile(r"\b_op\d+\b")


@dataclass(frozen=True)
class Term:
    """A statistic of one metric of one run: ``stat`` as in :func:`hetfl.pipeline.aggregate.seed_values`."""

    run: str
    metric: str
    stat: str
    arg: int | None = None
    seeds: str = "each"  # "each": per seed; "seedmin"/"seedmax": the extreme over seeds, for every seed
    clients: str | None = None  # a statistic over clients (CLIENT_FUNCTIONS), or None: the pooled metric

    def __str__(self) -> str:
        stat = {"last": f"last{self.arg}", "at": f"round={self.arg}"}.get(self.stat, self.stat)
        text = f"{self.metric}[{self.run}]@{stat}"
        text = text if self.clients is None else f"{self.clients}({text})"
        return text if self.seeds == "each" else f"{self.seeds}({text})"


def _parse_at(at: object, key: str) -> tuple[str, int | None]:
    """``final`` | ``best`` | ``last<k>`` | ``round=<n>`` → (statistic, argument)."""
    text = str(at).strip()
    if text in ("final", "best"):
        return text, None
    match = re.fullmatch(r"last(\d+)|round=(\d+)", text)
    if match and match.group(1) and int(match.group(1)) > 0:
        return "last", int(match.group(1))
    if match and match.group(2):
        return "at", int(match.group(2))
    raise ConfigError(key, f"unknown statistic {at!r}", allowed=AT_FORMS)


class _Compiler:
    """Checks a parsed claim against the whitelist and turns it into nested tuples over Terms."""

    def __init__(self, key: str, operands: dict[str, tuple[str, str]], default: tuple[str, int | None]):
        self.key, self.operands, self.default = key, operands, default
        self.terms: list[Term] = []

    def fail(self, message: str, allowed: Iterable[object] | None = None):
        raise ConfigError(self.key, message, allowed=allowed)

    def term(
        self, name: str, stat: str, arg: int | None, seeds: str = "each", clients: str | None = None
    ) -> tuple:
        run, metric = self.operands[name]
        term = Term(run, metric, stat, arg, seeds, clients)
        if term not in self.terms:
            self.terms.append(term)
        return ("term", self.terms.index(term))

    def integer(self, node: ast.expr, what: str, minimum: int) -> int:
        if not (isinstance(node, ast.Constant) and type(node.value) is int and node.value >= minimum):
            self.fail(f"{what} must be an integer >= {minimum}")
        return node.value

    def call(self, node: ast.Call, seeds: str = "each", clients: str | None = None) -> tuple:
        """A statistic call; ``seedmin``/``seedmax`` of an operand or of one statistic call (or of a statistic
        over clients); a statistic over clients (``worst10``, ...) of an operand or of one statistic call."""
        name = node.func.id if isinstance(node.func, ast.Name) else None
        wrapper = (name in SEED_RANGE and seeds == "each" and clients is None) or (
            name in CLIENT_FUNCTIONS and clients is None
        )
        if wrapper:
            if node.keywords or len(node.args) != 1:
                self.fail(f"{name}() takes one operand or statistic, e.g. {name}(at(x[run], 0))")
            inner = node.args[0]
            outer = {"seeds": seeds, "clients": name} if name in CLIENT_FUNCTIONS else {"seeds": name}
            if isinstance(inner, ast.Name) and inner.id in self.operands:
                return self.term(inner.id, *self.default, **outer)
            if not isinstance(inner, ast.Call):
                self.fail(f"the argument of {name}() must be an operand or a statistic call")
            return self.call(inner, **outer)
        if name not in FUNCTIONS:
            self.fail(
                f"function {ast.unparse(node.func)!r} is not allowed"
                + (f" inside {clients}()" if clients and name in [*SEED_RANGE, *CLIENT_FUNCTIONS] else ""),
                allowed=[*FUNCTIONS, *SEED_RANGE, *CLIENT_FUNCTIONS],
            )
        if clients is not None and name == "diverged":
            self.fail(f"{clients}() takes final(), best(), last() or at() of an operand, not diverged()")
        if node.keywords or len(node.args) != 1 + FUNCTIONS[name]:
            self.fail(f"{name}() takes an operand" + (" and an integer" if FUNCTIONS[name] else ""))
        operand = node.args[0]
        if not (isinstance(operand, ast.Name) and operand.id in self.operands):
            self.fail(f"the first argument of {name}() must be an operand (run.metric or metric[run])")
        arg = None
        if name == "last":
            arg = self.integer(node.args[1], "the k of last(op, k)", 1)
        elif name == "at":
            arg = self.integer(node.args[1], "the round of at(op, round)", 0)
        return self.term(operand.id, name, arg, seeds, clients)

    def expr(self, node: ast.expr) -> tuple:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            if not np.isfinite(float(node.value)):
                self.fail(f"the number {ast.unparse(node)} is not finite")
            return ("num", float(node.value))
        if isinstance(node, ast.Name):
            if node.id not in self.operands:
                self.fail(f"unknown name {node.id!r}: an operand is run.metric or metric[run]")
            return self.term(node.id, *self.default)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return ("bin", _BINARY[type(node.op)], self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return ("unary", _UNARY[type(node.op)], self.expr(node.operand))
        self.fail(
            f"{type(node).__name__} {ast.unparse(node)!r} is not allowed; use numbers, operands, "
            "+ - * /, final() best() last() at() diverged() seedmin() seedmax() client_mean() client_std() "
            "worst10() and one comparison"
        )

    def claim(self, tree: ast.Expression) -> tuple:
        node = tree.body
        if isinstance(node, ast.BoolOp) and isinstance(node.op, ast.And):
            return ("and", [self.comparison(value) for value in node.values])
        return self.comparison(node)

    def comparison(self, node: ast.expr) -> tuple:
        if not isinstance(node, ast.Compare):
            self.fail("a claim must be a comparison (<, <=, >, >=), or comparisons joined by 'and'")
        bad = [type(op).__name__ for op in node.ops if type(op) not in _COMPARE]
        if bad:
            self.fail(f"comparison {bad[0]} is not allowed", allowed=["<", "<=", ">", ">="])
        sides = [self.expr(e) for e in [node.left, *node.comparators]]
        return ("cmp", [_COMPARE[type(op)] for op in node.ops], sides)


def _compile(
    check: str, at: object, key: str, runs: Iterable[str] | None = None, metrics: Iterable[str] | None = None
) -> tuple[tuple, list[Term]]:
    """Parse ``check``; with ``runs``/``metrics`` given, also check the operands exist.

    Returns the comparison tree and its Terms. Raises ConfigError naming ``key``.
    """
    default = _parse_at(at, key.rsplit(".", 1)[0] + ".at")
    if not isinstance(check, str) or not check.strip():
        raise ConfigError(key, "a claim needs a non-empty check string")
    if len(check) > MAX_CHECK_LENGTH:
        raise ConfigError(key, f"a check is at most {MAX_CHECK_LENGTH} characters")
    if _PLACEHOLDER.search(check):
        raise ConfigError(key, "names like _op0 are reserved")
    operands: dict[str, tuple[str, str]] = {}

    def substitute(match: re.Match, swap: bool) -> str:
        run, metric = (match.group(2).strip(), match.group(1)) if swap else match.groups()
        name = f"_op{len(operands)}"
        operands[name] = (run, metric)
        return name

    text = _BRACKET.sub(lambda m: substitute(m, True), check)
    text = _DOTTED.sub(lambda m: substitute(m, False), text)
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as err:
        raise ConfigError(key, f"cannot parse {check!r}: {err.msg}") from None
    compiler = _Compiler(key, operands, default)
    tree = compiler.claim(tree)
    runs, metrics = (None if x is None else sorted(set(x)) for x in (runs, metrics))
    for term in compiler.terms:
        if runs is not None and term.run not in runs:
            hint = " (write metric[label] for labels that are not identifiers)" if "." in check else ""
            raise ConfigError(key, f"unknown run {term.run!r} in {check!r}{hint}", allowed=runs)
        if metrics is not None and term.metric not in metrics:
            raise ConfigError(key, f"unknown metric {term.metric!r} in {check!r}", allowed=metrics)
        if term.clients is not None and not is_client_metric(term.metric):
            raise ConfigError(
                key,
                f"{term.clients}() needs a metric recorded per client, not {term.metric!r}",
                allowed=[m for m in metrics or () if is_client_metric(m)] or None,
            )
    return tree, compiler.terms


def is_client_metric(metric: str) -> bool:
    """Whether a metric is recorded per client (``metrics_clients.csv``): :data:`CLIENT_METRIC_PREFIXES`, or
    ``in_cluster_weight`` (the collaborative algorithms)."""
    return metric.startswith(CLIENT_METRIC_PREFIXES) or metric == "in_cluster_weight"


def claim_terms(claim: dict, key: str = "claims") -> list[Term]:
    """The operands (:class:`Term`: run, metric, statistic) of a normalized claim.

    Raises:
        ConfigError: the check does not parse (key ``key``).
    """
    return _compile(claim["check"], claim.get("at", "final"), key)[1]


def normalize_claims(claims: list, runs: list[str], metrics: set[str], key: str) -> list[dict]:
    """Validate a study's ``claims`` and bring each to ``{id, text, check, at}``.

    Args:
        claims: the config list: strings (the check itself) or dicts with keys id, text, check, at.
        runs: the study's run labels; metrics: the metric names its runs report.
        key: the dotted config key of the list, e.g. ``studies.pfedme_mnist.claims``.

    Returns:
        One dict per claim: ``id`` (given, or ``C1``, ``C2``… by position), ``text`` (default: the
        check), ``check`` (stripped), ``at`` (default ``final``).

    Raises:
        ConfigError: naming ``{key}[i]`` (bad entry or unknown key), ``{key}[i].check`` (syntax,
        disallowed construct, unknown run or metric, with the allowed ones), ``{key}[i].at`` or a
        duplicate ``{key}[i].id``.
    """
    if not isinstance(claims, list):
        raise ConfigError(key, "claims must be a list")
    out, seen = [], set()
    for i, entry in enumerate(claims):
        where = f"{key}[{i}]"
        if isinstance(entry, str):
            entry = {"check": entry}
        if not isinstance(entry, dict):
            raise ConfigError(where, "a claim is a string or a mapping")
        unknown = sorted(set(entry) - set(CLAIM_KEYS))
        if unknown:
            raise ConfigError(where, f"unknown key(s) {', '.join(unknown)}", allowed=CLAIM_KEYS)
        check = entry.get("check")
        if not isinstance(check, str):
            raise ConfigError(f"{where}.check", "a claim needs a check string")
        claim = {
            "id": str(entry.get("id", f"C{i + 1}")),
            "text": str(entry.get("text", check.strip())),
            "check": check.strip(),
            "at": str(entry.get("at", "final")),
        }
        if claim["id"] in seen:
            raise ConfigError(f"{where}.id", f"duplicate claim id {claim['id']!r}")
        seen.add(claim["id"])
        _compile(claim["check"], claim["at"], f"{where}.check", runs, metrics)
        out.append(claim)
    return out


def _evaluate(node: tuple, values: list):
    """Evaluate an expression tree; ``values[j]`` (a float or an array over seeds) for Term j."""
    kind = node[0]
    if kind == "num":
        return node[1]
    if kind == "term":
        return values[node[1]]
    if kind == "unary":
        return node[1](_evaluate(node[2], values))
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
        ``{"n", "mean", "low", "high", "kind"}``: n (seeds with both sides finite), mean of the
        differences, the interval (``nan`` without one), and kind: ``exact`` (``constant``), ``missing``
        (n = 0), ``few`` (n < :data:`MIN_SEEDS_FOR_INTERVAL`: no interval), ``clear`` (the interval lies
        on the claimed side: low > 0, or >= 0 for ``<=``/``>=``) or ``noise`` (it does not).
    """
    from scipy import stats

    lhs, rhs = np.broadcast_arrays(np.asarray(lhs, float), np.asarray(rhs, float))
    diff = (lhs - rhs) if symbol.startswith(">") else (rhs - lhs)
    diff = diff[np.isfinite(diff)]
    n = int(diff.size)
    out = {"n": n, "mean": float(diff.mean()) if n else np.nan, "low": np.nan, "high": np.nan}
    if constant or n < MIN_SEEDS_FOR_INTERVAL:
        return {**out, "kind": "exact" if constant and n else "missing" if not n else "few"}
    if np.ptp(diff) == 0:
        low = high = out["mean"]
    else:
        low, high = stats.ttest_1samp(diff, 0.0).confidence_interval(0.95)
    clear = low > 0 if symbol in ("<", ">") else low >= 0
    return {**out, "low": float(low), "high": float(high), "kind": "clear" if clear else "noise"}


def claim_status(holds: str, intervals: list[dict]) -> str:
    """The statistical status of a claim from its ``holds`` on the means and its comparisons' intervals.

    Args:
        holds: ``yes`` | ``no`` | ``undetermined`` (:func:`check_claims`, on the means).
        intervals: :func:`paired_interval` of each comparison (every adjacent pair of every comparison
            joined by ``and``).

    Returns:
        ``undetermined`` (an operand has no value); ``does not hold`` (fails on the means); ``holds
        within noise`` (holds on the means, but some comparison's interval does not lie on the claimed
        side); ``holds`` (holds on the means and every interval lies on the claimed side, or the
        comparison is between constants across seeds). With fewer than 3 paired seeds in some
        comparison, ``holds`` and ``does not hold`` end with ``(n seed(s): no interval)``.
    """
    if holds == "undetermined":
        return "undetermined"
    few = [i["n"] for i in intervals if i["kind"] == "few" or (i["kind"] == "exact" and i["n"] < 3)]
    suffix = ""
    if few:
        n = min(few)
        suffix = f" ({n} seed{'s' if n != 1 else ''}: no interval)"
    if holds != "yes":
        return "does not hold" + suffix
    if any(i["kind"] == "noise" for i in intervals):
        return "holds within noise"
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
    if kind in ("clear", "noise"):
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
    """Check normalized claims (see :func:`normalize_claims`) on a study's records.

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
        (``holds`` | ``holds within noise`` | ``does not hold`` | ``undetermined``, with ``(n seeds:
        no interval)`` under 3 paired seeds); n_paired (the fewest seeds with both sides finite over
        the pairs); diff_mean, diff_ci_low, diff_ci_high (the mean paired difference, oriented
        positive on the claimed side, and its 95 % t interval, of the pair closest to failing: the
        smallest interval low, else the smallest mean; ``nan`` bounds without an interval);
        intervals (``mean [low, high] (n=k)`` per pair, in the order of comparisons).

    Raises:
        ConfigError: a check does not parse (key ``claims[i].check``).
    """
    import pandas as pd

    from hetfl.pipeline.aggregate import client_stat_values, seed_values

    cache: dict[tuple[str | None, str, int | None], dict[tuple[str, str], pd.Series]] = {}
    rows = []
    for i, claim in enumerate(claims):
        tree, terms = _compile(claim["check"], claim.get("at", "final"), f"claims[{i}].check")
        per_term = []
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
            per_term.append(cache[stat].get((term.run, term.metric), pd.Series(dtype=float)))
        seeds = sorted(set(status.loc[status["run"].isin({t.run for t in terms}), "seed"]))
        per_seed = [
            _over_seeds(s.reindex(seeds).to_numpy(float), t.seeds)
            for s, t in zip(per_term, terms, strict=True)
        ]
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
        count = f"{int(seed_holds.sum())}/{len(seeds)}"
        if seed_undetermined.any():
            count += f" ({int(seed_undetermined.sum())} undetermined)"
        rows.append(
            {
                **{k: claim.get(k, "") for k in ("id", "text", "check")},
                "at": claim.get("at", "final"),
                "holds": verdict,
                "status": claim_status(verdict, intervals),
                "seeds_holding": count,
                "margin": np.nan if undetermined else _margin(pairs),
                "n_paired": min(i["n"] for i in intervals),
                "diff_mean": binding["mean"],
                "diff_ci_low": binding["low"],
                "diff_ci_high": binding["high"],
                "comparisons": "; ".join(f"{lhs:.4g} {symbol} {rhs:.4g}" for symbol, lhs, rhs in pairs),
                "intervals": "; ".join(_interval_text(i) for i in intervals),
                "operands": "; ".join(
                    _describe(t, pd.Series(v)) for t, v in zip(terms, per_seed, strict=True)
                ),
            }
        )
    return pd.DataFrame(rows, columns=CLAIMS_COLUMNS)


CLAIMS_LEGEND = (
    "holds: on the means over seeds (yes, no, undetermined when an operand has no value). status: "
    "holds (on the means, and every comparison's 95 % interval lies on the claimed side), holds within "
    "noise (on the means, but some interval reaches the other side), does not hold (fails on the means), "
    "undetermined; '(n seeds: no interval)' when a comparison pairs fewer than 3 seeds.",
    "paired difference: per comparison, the mean over seeds of the per-seed difference of its two sides "
    "(seed s of one run against seed s of the other: same partition and participation), oriented positive "
    "on the claimed side (a - b for a > b, b - a for a < b), with its 95 % Student t interval over seeds; "
    "against a constant (a number, seedmin/seedmax) the one-sample interval.",
)
"""The legend under ``claims.md`` (one entry a line)."""


def claims_markdown(df: pd.DataFrame) -> str:
    """A Markdown table of checked claims, its legend, then each claim's operands.

    Args:
        df: as returned by :func:`check_claims`.

    Returns:
        A table with columns id, claim, check, holds, status, seeds (seeds_holding), means
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
            "means": df["comparisons"],
            "paired difference [95 % CI]": df["intervals"],
        }
    )
    lines = [table.to_markdown(index=False), ""]
    lines += [f"- {line}" for line in CLAIMS_LEGEND]
    lines += ["", "Operands (mean ± std over seeds):", ""]
    lines += [f"- {row.id}: {cell(row.operands)}" for row in df.itertuples()]
    return "\n".join(lines) + "\n"
