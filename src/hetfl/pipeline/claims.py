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
- the smallest or largest of two or more expressions: ``min(a, b, ...)``, ``max(a, b, ...)`` (a run at
  the weakest setting of a sweep: ``min(x[w-beta=0.1], x[w-beta=1.0]) < fedavg.x``), like every expression
  taken of the seed means for ``holds`` and per seed for the seed count and the paired interval;
- numbers, ``+ - * /``, unary minus, parentheses;
- comparisons joined by ``and`` (every one must hold): ``a > b and a > c``;
- one comparison, ``<``, ``<=``, ``>`` or ``>=``, possibly chained: ``a < b < c`` holds when every
  adjacent pair does (a monotonicity claim).

Parsing never evaluates the text: operands are replaced by placeholders and the result is
parsed by :mod:`ast` and checked against a whitelist of node types; evaluation walks that tree.

A claim ``holds`` when its comparison holds on the seed means of its operands (statistics follow
:mod:`hetfl.pipeline.aggregate`: a diverged seed has no value and is left out of the mean). The same
expression is also evaluated per seed (seeds aligned by seed id) to show how many seeds agree, and
each comparison's per-seed difference gives a paired 95 % interval over seeds
(:func:`~hetfl.pipeline.claims_check.paired_interval`) from which a claim's statistical status follows
(:func:`~hetfl.pipeline.claims_check.claim_status`: holds, does not hold, undecided when an interval
straddles the threshold, with the seeds it would take to decide it, undetermined).

This module holds the grammar and the claims' normalization (:func:`normalize_claims`); checking them on a
study's records is :mod:`hetfl.pipeline.claims_check`.
"""

from __future__ import annotations

import ast
import dataclasses
import operator
import re
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from hetfl.config_options import ConfigOptions, option
from hetfl.errors import ConfigError
from hetfl.metrics import CLIENT_METRICS

FUNCTIONS = {"final": 0, "best": 0, "last": 1, "at": 1, "diverged": 0}
"""Statistic functions and how many integer arguments follow the operand."""
SEED_RANGE = ("seedmin", "seedmax")
"""Functions of an operand or statistic over seeds (a constant across seeds)."""
EXTREMES = {"min": np.minimum, "max": np.maximum}
"""The smallest or largest of two or more expressions (a missing value makes it missing)."""
CLIENT_FUNCTIONS = ("client_mean", "client_std", "worst10")
"""Statistics over the clients of a per-client metric (``hetfl.pipeline.aggregate.CLIENT_STATS``), per seed."""
CLIENT_METRIC_PREFIXES = tuple(f"{split}_{stat}_" for split, stat in CLIENT_METRICS)
"""The metrics recorded per client (``hetfl.metrics.CLIENT_METRICS``), beside ``in_cluster_weight``."""

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
                allowed=[*FUNCTIONS, *SEED_RANGE, *CLIENT_FUNCTIONS, *EXTREMES],
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
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in EXTREMES:
            if node.keywords or len(node.args) < 2:
                self.fail(
                    f"{node.func.id}() takes two or more expressions, e.g. {node.func.id}(a.acc, b.acc)"
                )
            return ("extreme", EXTREMES[node.func.id], [self.expr(arg) for arg in node.args])
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return ("bin", _BINARY[type(node.op)], self.expr(node.left), self.expr(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return ("unary", _UNARY[type(node.op)], self.expr(node.operand))
        self.fail(
            f"{type(node).__name__} {ast.unparse(node)!r} is not allowed; use numbers, operands, "
            "+ - * /, final() best() last() at() diverged() seedmin() seedmax() client_mean() client_std() "
            "worst10() min() max() and one comparison"
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


def _at_text(at: str, key: str) -> str:
    """``at`` itself, once :func:`_parse_at` reads it."""
    _parse_at(at, key)
    return at


def _check_text(value: object, key: str) -> str:
    if not isinstance(value, str):
        raise ConfigError(key, "a claim needs a check string")
    return value.strip()


@dataclasses.dataclass(frozen=True)
class ClaimSpec(ConfigOptions):
    """A claim's options as the config writes them (module docstring), beside its ``check`` (the comparison,
    parsed by the grammar; a field of that name would hide ``Options.check``): ``id`` (null: ``C<position>``),
    ``text`` (the paper's words; null: the check) and ``at`` (the statistic of bare operands, ``AT_FORMS``).
    Whether the runs and metrics a claim names exist is the study's (:func:`normalize_claims`)."""

    id: str | None = option(None, check=lambda v, k: None if v is None else str(v))
    text: str | None = option(None, check=lambda v, k: None if v is None else str(v))
    at: str = option("final", check=lambda v, k: _at_text(str(v), k))


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
        spec = ClaimSpec.parse(entry, where, "a claim", fixed=("check",))
        check = _check_text(entry.get("check"), f"{where}.check")
        claim = {
            "id": spec.get("id", f"C{i + 1}"),
            "text": spec.get("text", check),
            "check": check,
            "at": spec["at"],
        }
        if claim["id"] in seen:
            raise ConfigError(f"{where}.id", f"duplicate claim id {claim['id']!r}")
        seen.add(claim["id"])
        _compile(claim["check"], claim["at"], f"{where}.check", runs, metrics)
        out.append(claim)
    return out
