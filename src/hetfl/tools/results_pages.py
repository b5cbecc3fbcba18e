"""The numbers of the results pages, generated from committed result tables.

The tables of ``docs/results/*.md`` and of the READMEs' results sections are marked on their page::

    <!-- table: pfedme_table1 -->
    | study (data) | pFedMe (PM) | ... |
    |---|---|---|
    | `pfedme_mnist` (MNIST, MLR) | 94.34 ± 0.15 | ... |
    <!-- /table -->

and declared in ``docs/results/tables.yaml``: for each table its page, the suite and study its numbers come
from, and per row (named by its first cell, as written on the page) one cell spec per further column. A
cell spec is a template: ``{ref}`` is replaced by a number of the committed data, text around it is kept
(``**{ref}**``, ``{ref} (input)``), a cell without braces is one ref, and ``null`` leaves the page's cell as
written (a label, a paper's number, a dash). A ref is one of

- ``[study/]run.metric[@stat][:format]``: a statistic of ``docs/results/data/<suite>/<study>/summary.csv``;
  ``stat`` is ``best``, ``final``, ``last10``, ``valsel`` (``mean ± std``) or ``paper`` (the paper's number);
  or, of the study's ``clients.csv``, the unweighted mean over clients (``final_client_mean``,
  ``best_client_mean``) or the worst decile's (``final_worst10``, ``best_worst10``), ``mean ± std`` over seeds;
  ``format`` is ``pctN`` (a fraction in % with N decimals), ``decN`` (N decimals), with a trailing ``m``
  for the mean alone (``pct2m``);
- ``claims:<pattern>[,<pattern>...]``: ``h of n``, the claims that hold of those checked, over the
  studies whose name matches a pattern (``pfedme_*``; ``*`` is every study of the suite), from the
  studies' ``claims.csv``;
- ``notholding:<patterns>``, ``checked:<patterns>``, ``studies:<patterns>``, ``undecided:<patterns>``: the
  number of claims that do not hold; of claims checked; of studies; of claims whose status is undecided
  (a paired interval straddles the threshold, ``hetfl.pipeline.claims_check.claim_status``);
- ``status:<study>/<id>[,<id>...]``: each claim's status as a cell, ``does not hold``, ``holds`` or
  ``undecided, n seeds to decide`` (its ``seeds_needed``), joined by ``; ``;
- ``interval:<study>/<id>``: the claim's paired differences with their 95 % intervals (its ``intervals``:
  ``mean [low, high] (n=k)`` per comparison, joined by ``; ``); likewise ``operands:`` (each operand's
  ``mean ± std (n)`` at the round the claim reads), ``comparisons:`` (the means compared, ``a < b``) and
  ``seeds:`` (the seeds on the claimed side, ``h/n``), the claims table's columns of those names;
- ``time:[study/]run``: the run's training time in seconds (its seeds' ``wall_time_s``, mean over seeds,
  ``1,450``), from the study's ``times.csv`` (``run, seed, wall_time_s``: the run records' ``run.json``);
- ``tuned:[study/]run``: the hyper-parameters a tuned run chose on validation data (``lam = 0.01``, joined
  by ``, ``), from the study's ``tuning.csv`` (``hetfl.pipeline.tuning``: its row marked ``chosen``).

A row whose first cell repeats (one study, several claims) is named by its first cells joined by
`` | `` (``"`baselines_mnist` | B4"``); the cell specs are then for the columns after those.

The data are the suite's own tables, copied by ``--from`` (a default-suite run's ``results/tables``), or
transcribed once where the run is not on this machine (paper scale), each suite with a ``source.yaml``
saying where its numbers come from. ``--check`` fails, naming the page and table, where a page
disagrees with its data::

    python -m hetfl.tools.results_pages                              # write the pages' tables from the data
    python -m hetfl.tools.results_pages --check                      # exit 1 where a page disagrees
    python -m hetfl.tools.results_pages --from results/tables        # refresh the default suite's data, then write
"""

from __future__ import annotations

import argparse
import datetime
import fnmatch
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from hetfl.pipeline.claims_check import needed_text
from hetfl.pipeline.records import RunRecord
from hetfl.pipeline.tuning import TABLE_COLUMNS as TUNING_COLUMNS

SPEC = Path("docs/results/tables.yaml")
DATA = Path("docs/results/data")
MARKER = re.compile(r"^<!-- table: (?P<name>[\w-]+) -->$")
END = "<!-- /table -->"
STATS = ("best", "final", "last10", "valsel", "paper")
CLIENT_STATS = ("final_client_mean", "best_client_mean", "final_worst10", "best_worst10")
"""Statistics over a study's clients, of its ``clients.csv`` (``hetfl.pipeline.aggregate.clients``)."""
REF = re.compile(
    r"^(?:(?P<study>[\w.=-]+)/)?(?P<run>[^/{}@:]+)\.(?P<metric>[a-z][a-z0-9_]*)"
    r"(?:@(?P<stat>\w+))?(?::(?P<format>\w+))?$"
)
FORMAT = re.compile(r"^(?P<kind>pct|dec)(?P<digits>\d)(?P<mean>m?)$")
PLACEHOLDER = re.compile(r"\{([^{}]+)\}")
CELL_SPLIT = re.compile(r"(?<!\\)\|")
MISSING = "—"
CLAIM_COLUMNS = {
    "status": "status",
    "interval": "intervals",
    "operands": "operands",
    "comparisons": "comparisons",
    "seeds": "seeds_holding",
}
"""A ref kind that reads one claim's column (``<kind>:<study>/<id>``) -> the claims table's column."""
CLAIM_REFS = ("claims", "notholding", "checked", "studies", "undecided", *CLAIM_COLUMNS)


class ResultsPagesError(ValueError):
    """A table spec, a page's marked table or the committed data is inconsistent (the message names the
    page and table)."""


@dataclass
class Data:
    """The committed result tables: ``docs/results/data/<suite>/<study>/{summary,claims}.csv``.

    Args:
        root: the data folder (``docs/results/data``).
    """

    root: Path
    _tables: dict[tuple[str, str, str], pd.DataFrame] = field(default_factory=dict)

    def summary(self, suite: str, study: str) -> pd.DataFrame:
        """The study's ``summary.csv`` indexed by (run, metric); raises :class:`ResultsPagesError` when
        the suite has no such file."""
        return self._table(suite, study, "summary.csv", "summary")

    def clients(self, suite: str, study: str) -> pd.DataFrame:
        """The study's ``clients.csv`` indexed by (run, metric); raises :class:`ResultsPagesError` when the
        suite has no such file."""
        return self._table(suite, study, "clients.csv", "per-client table")

    def times(self, suite: str, study: str) -> pd.DataFrame:
        """The study's ``times.csv`` (``run``, ``seed``, ``wall_time_s``) indexed by run; raises
        :class:`ResultsPagesError` when the suite has no such file."""
        return self._table(suite, study, "times.csv", "training times", index=["run"])

    def tuning(self, suite: str, study: str) -> pd.DataFrame:
        """The study's ``tuning.csv`` (one row per grid point, ``hetfl.pipeline.tuning.TABLE_COLUMNS`` and the
        grid's hyper-parameters) indexed by run; raises :class:`ResultsPagesError` when the suite has no such
        file."""
        return self._table(suite, study, "tuning.csv", "tuning table", index=["run"])

    def _table(self, suite: str, study: str, name: str, what: str, index=("run", "metric")) -> pd.DataFrame:
        """A committed table of the study indexed by ``index``, read once."""
        key = (suite, study, name)
        if key not in self._tables:
            path = self.root / suite / study / name
            if not path.is_file():
                raise ResultsPagesError(f"no committed {what} {path}")
            self._tables[key] = pd.read_csv(path).set_index(list(index))
        return self._tables[key]

    def studies(self, suite: str, patterns: list[str]) -> list[str]:
        """The suite's studies with a ``claims.csv`` whose name matches one of ``patterns``; raises
        :class:`ResultsPagesError` when none does."""
        names = sorted(p.parent.name for p in (self.root / suite).glob("*/claims.csv"))
        chosen = [n for n in names if any(fnmatch.fnmatchcase(n, p) for p in patterns)]
        if not chosen:
            raise ResultsPagesError(f"no study of suite {suite!r} with claims matches {patterns}")
        return chosen

    def claims(self, suite: str, patterns: list[str]) -> pd.DataFrame:
        """The claims of the matching studies (:meth:`studies`), one frame with a ``study`` column."""
        frames = [
            pd.read_csv(self.root / suite / s / "claims.csv").assign(study=s)
            for s in self.studies(suite, patterns)
        ]
        return pd.concat(frames, ignore_index=True)


def format_value(mean: float, std: float, fmt: str) -> str:
    """``mean ± std`` (or ``mean`` alone when ``fmt`` ends in ``m`` or ``std`` is NaN) in ``fmt``.

    Args:
        mean, std: the values, in the metric's units (an accuracy as a fraction).
        fmt: ``pctN`` (times 100, N decimals) or ``decN`` (N decimals), optionally with a trailing ``m``.

    Raises:
        ResultsPagesError: an unknown format.
    """
    match = FORMAT.match(fmt)
    if not match:
        raise ResultsPagesError(f"unknown format {fmt!r} (pctN, decN, with an optional trailing m)")
    if pd.isna(mean):
        return MISSING
    scale = 100.0 if match["kind"] == "pct" else 1.0
    digits = int(match["digits"])
    text = f"{scale * mean:.{digits}f}"
    if match["mean"] or pd.isna(std):
        return text
    return f"{text} ± {scale * std:.{digits}f}"


def resolve(ref: str, data: Data, suite: str, study: str | None, stat: str, fmt: str) -> str:
    """The text of one ``{ref}`` (the grammar is the module's docstring).

    Args:
        ref: the reference, without braces.
        data: the committed tables.
        suite, study, stat, fmt: the row's (or table's) defaults for what the ref does not say.

    Raises:
        ResultsPagesError: a malformed ref, an unknown statistic, or a run/metric not in the summary.
    """
    kind, _, rest = ref.partition(":")
    if kind in CLAIM_COLUMNS and rest:
        return claim_columns(data, suite, rest, kind)
    if kind == "time" and rest:
        return run_time(data, suite, study, rest)
    if kind == "tuned" and rest:
        return tuned_values(data, suite, study, rest)
    if kind in CLAIM_REFS and rest:
        patterns = [p.strip() for p in rest.split(",")]
        if kind == "studies":
            return str(len(data.studies(suite, patterns)))
        claims = data.claims(suite, patterns)
        holds = int((claims["holds"] == "yes").sum())
        return {
            "claims": f"{holds} of {len(claims)}",
            "notholding": str(len(claims) - holds),
            "checked": str(len(claims)),
            "undecided": str(int(claims["status"].astype(str).str.startswith("undecided").sum())),
        }[kind]
    match = REF.match(ref)
    if not match:
        raise ResultsPagesError(f"malformed ref {{{ref}}}: [study/]run.metric[@stat][:format]")
    study = match["study"] or study
    if study is None:
        raise ResultsPagesError(f"ref {{{ref}}} names no study and its row or table has none")
    stat = match["stat"] or stat
    if stat not in STATS + CLIENT_STATS:
        allowed = ", ".join(STATS + CLIENT_STATS)
        raise ResultsPagesError(f"ref {{{ref}}}: unknown statistic {stat!r}; allowed: {allowed}")
    summary = data.clients(suite, study) if stat in CLIENT_STATS else data.summary(suite, study)
    key = (match["run"], match["metric"])
    if key not in summary.index:
        raise ResultsPagesError(f"ref {{{ref}}}: no run {key[0]!r} with metric {key[1]!r} in {suite}/{study}")
    row = summary.loc[key]
    if stat == "paper":
        return format_value(row["paper"], float("nan"), match["format"] or fmt)
    mean = stat if stat in CLIENT_STATS else f"{stat}_mean"  # the std is f"{stat}_std" in both tables
    return format_value(row[mean], row[f"{stat}_std"], match["format"] or fmt)


def claim_columns(data: Data, suite: str, rest: str, kind: str = "status") -> str:
    """The text of ``<kind>:<study>/<id>[,<id>...]``: each claim's column :data:`CLAIM_COLUMNS` names for
    ``kind``, an undecided status with its seeds to decide, joined by ``; `` (the module's docstring).

    Raises:
        ResultsPagesError: no ``/``, or an id not among the study's claims.
    """
    column = CLAIM_COLUMNS[kind]
    study, slash, ids = rest.partition("/")
    if not slash or not ids:
        raise ResultsPagesError(f"ref {{{kind}:{rest}}}: {kind}:<study>/<id>[,<id>...]")
    claims = data.claims(suite, [study.strip()]).set_index("id")
    texts = []
    for claim in (i.strip() for i in ids.split(",")):
        if claim not in claims.index:
            raise ResultsPagesError(f"ref {{{kind}:{rest}}}: {suite}/{study} has no claim {claim!r}")
        status, needed = str(claims.at[claim, column]), claims.at[claim, "seeds_needed"]
        if column == "status" and status.startswith("undecided"):
            status = f"undecided, {needed_text(float(needed))} seeds to decide"
        texts.append(status)
    return "; ".join(texts)


def run_time(data: Data, suite: str, study: str | None, rest: str) -> str:
    """The text of ``time:[study/]run``: the run's training seconds, mean over its seeds, as ``1,450``.

    Raises:
        ResultsPagesError: no study, no ``times.csv``, or no row of the run.
    """
    named, slash, run = rest.rpartition("/")
    study = named if slash else study
    if study is None:
        raise ResultsPagesError(f"ref {{time:{rest}}} names no study and its row or table has none")
    times = data.times(suite, study)
    if run not in times.index:
        raise ResultsPagesError(f"ref {{time:{rest}}}: no run {run!r} in {suite}/{study}/times.csv")
    return f"{float(times.loc[[run], 'wall_time_s'].mean()):,.0f}"


def tuned_values(data: Data, suite: str, study: str | None, rest: str) -> str:
    """The text of ``tuned:[study/]run``: the chosen grid point's hyper-parameters, ``name = value`` joined by
    ``, `` in the grid's order.

    Raises:
        ResultsPagesError: no study, no ``tuning.csv``, or no chosen point of the run.
    """
    named, slash, run = rest.rpartition("/")
    study = named if slash else study
    if study is None:
        raise ResultsPagesError(f"ref {{tuned:{rest}}} names no study and its row or table has none")
    table = data.tuning(suite, study)
    rows = table.loc[[run]] if run in table.index else table.iloc[:0]
    chosen = rows[rows["chosen"] == "yes"]
    if len(chosen) != 1:
        raise ResultsPagesError(
            f"ref {{tuned:{rest}}}: no chosen point of run {run!r} in {suite}/{study}/tuning.csv"
        )
    values, label = chosen.iloc[0], str(chosen.iloc[0]["point"])
    grid = [c for c in table.columns if c not in TUNING_COLUMNS and not pd.isna(values[c])]
    # the grid's order, as the point's label writes it (``run@a=1-b=2``: each name after ``@`` or ``-``, so that
    # ``lr`` is not found inside ``finetune_lr``)
    grid.sort(key=lambda k: min(i for i in (label.find(f"@{k}="), label.find(f"-{k}=")) if i >= 0))
    return ", ".join(f"{k} = {_plain(values[k])}" for k in grid)


def _plain(value) -> str:
    """A hyper-parameter value as the config writes it (``0.01``, ``True``, ``5``)."""
    return f"{value:g}" if isinstance(value, float) else str(value)


def render_cell(template: str, data: Data, suite: str, study: str | None, stat: str, fmt: str) -> str:
    """A cell spec's text: each ``{ref}`` replaced (:func:`resolve`); a spec without braces is one ref."""
    if "{" not in template:
        template = "{" + template + "}"
    return PLACEHOLDER.sub(lambda m: resolve(m[1].strip(), data, suite, study, stat, fmt), template)


def split_row(line: str) -> list[str]:
    """A Markdown table row's cells, stripped (``\\|`` inside a cell is not a separator)."""
    inner = line.strip()
    if not (inner.startswith("|") and inner.endswith("|")):
        raise ResultsPagesError(f"not a table row: {line!r}")
    return [c.strip() for c in CELL_SPLIT.split(inner[1:-1])]


def render_table(lines: list[str], name: str, spec: dict, data: Data) -> list[str]:
    """The marked table ``lines`` (header, rule, rows) with the cells ``spec`` declares rendered.

    Args:
        lines: the table's lines as on the page.
        name: the table's name (for messages).
        spec: the table's entry of ``tables.yaml``: ``suite``, ``study``, ``stat``, ``format`` (defaults)
            and ``rows``: row label -> list of cell specs for the columns after the label, or a mapping
            with ``cells`` and any of the defaults.
        data: the committed tables.

    Raises:
        ResultsPagesError: a declared row not in the table, a repeated label, a row with the wrong
            number of cells, or any error of :func:`resolve`.
    """
    rows = [split_row(line) for line in lines]
    if len(rows) < 2:
        raise ResultsPagesError(f"table {name}: no header and rule between its markers")
    width = len(rows[0])
    out = list(lines)
    for label, row_spec in (spec.get("rows") or {}).items():
        # a row is named by its first cell, or by its first k cells joined by " | " (a repeated study)
        k = label.count(" | ") + 1
        labels = [" | ".join(r[:k]) for r in rows[2:]]
        if labels.count(label) != 1:
            found = "no" if label not in labels else "more than one"
            raise ResultsPagesError(f"table {name}: {found} row labelled {label!r}")
        i = labels.index(label) + 2
        if isinstance(row_spec, list):
            row_spec = {"cells": row_spec}
        cells = row_spec["cells"]
        if len(cells) != width - k or len(rows[i]) != width:
            raise ResultsPagesError(
                f"table {name}, row {label!r}: {len(cells)} cell specs and {len(rows[i]) - k} cells "
                f"for {width - k} columns after the label"
            )
        ctx = {
            "suite": row_spec.get("suite") or spec.get("suite") or "default",
            "study": row_spec.get("study") or spec.get("study"),
            "stat": row_spec.get("stat") or spec.get("stat") or "best",
            "fmt": row_spec.get("format") or spec.get("format") or "pct2",
        }
        try:
            new = rows[i][:k] + [
                old if cell is None else render_cell(str(cell), data, **ctx)
                for old, cell in zip(rows[i][k:], cells, strict=True)
            ]
        except ResultsPagesError as e:
            raise ResultsPagesError(f"table {name}, row {label!r}: {e}") from None
        out[i] = "|" + "|".join(f" {c} " if c else " " for c in new) + "|"
    return out


def render_page(text: str, page: str, specs: dict[str, dict], data: Data) -> str:
    """``text`` with each marked table whose name ``specs`` has rendered (:func:`render_table`).

    Raises:
        ResultsPagesError: a marker without its end or table, a marked table with no spec, or a spec of
            this page with no marked table (each message names ``page`` and the table).
    """
    lines = text.split("\n")
    out: list[str] = []
    seen: set[str] = set()
    i = 0
    while i < len(lines):
        out.append(lines[i])
        match = MARKER.match(lines[i].strip())
        i += 1
        if not match:
            continue
        name = match["name"]
        end = next((j for j in range(i, len(lines)) if lines[j].strip() == END), None)
        if end is None:
            raise ResultsPagesError(f"{page}: table {name} has no closing {END}")
        if name not in specs:
            raise ResultsPagesError(f"{page}: table {name} is marked but not declared in {SPEC}")
        try:
            out += render_table(lines[i:end], name, specs[name], data)
        except ResultsPagesError as e:
            raise ResultsPagesError(f"{page}: {e}") from None
        seen.add(name)
        i = end
    missing = sorted(set(specs) - seen)
    if missing:
        raise ResultsPagesError(f"{page}: declared table(s) {', '.join(missing)} not marked on the page")
    return "\n".join(out)


def load_specs(path: Path) -> dict[str, dict[str, dict]]:
    """``tables.yaml`` grouped by page: page (repository path) -> table name -> spec.

    Raises:
        ResultsPagesError: a table without ``page``.
    """
    tables = yaml.safe_load(path.read_text()) or {}
    pages: dict[str, dict[str, dict]] = {}
    for name, spec in tables.items():
        if "page" not in spec:
            raise ResultsPagesError(f"{path}: table {name} names no page")
        pages.setdefault(spec["page"], {})[name] = spec
    return pages


def generate(root: Path = Path("."), check: bool = False) -> list[str]:
    """Render every declared table into its page, or with ``check`` compare only.

    Args:
        root: the repository root (pages, ``docs/results/tables.yaml`` and the data under it).
        check: write nothing; report the tables whose page differs from what the data render.

    Returns:
        One line per table that differs (``page: table name: row label: 'page' != 'data'``); with
        ``check`` False, the pages rewritten.

    Raises:
        ResultsPagesError: as :func:`render_page`.
    """
    data = Data(root / DATA)
    problems: list[str] = []
    for page, specs in load_specs(root / SPEC).items():
        path = root / page
        text = path.read_text()
        new = render_page(text, page, specs, data)
        if new == text:
            continue
        if not check:
            path.write_text(new)
            problems.append(f"{page}: rewritten")
            continue
        problems += _differences(page, text, new)
    return problems


def _differences(page: str, old: str, new: str) -> list[str]:
    table = ""
    out = []
    for a, b in zip(old.split("\n"), new.split("\n"), strict=True):
        if match := MARKER.match(a.strip()):
            table = match["name"]
        if a != b:
            cells = [(x, y) for x, y in zip(split_row(a), split_row(b), strict=True) if x != y]
            diffs = "; ".join(f"page {x!r}, data {y!r}" for x, y in cells)
            out.append(f"{page}: table {table}, row {split_row(a)[0]!r}: {diffs}")
    return out


def refresh(
    tables: Path,
    root: Path = Path("."),
    suite: str = "default",
    run: str = "",
    studies: list[str] | None = None,
) -> list[str]:
    """Copy a suite run's tables into the committed data: every study's ``claims.csv``, and the
    ``summary.csv`` (``clients.csv``) of each study whose summary (per-client statistics) a table of
    ``suite`` reads; write the ``times.csv`` (:func:`run_times`) of each study whose times a table reads,
    and the suite's ``source.yaml``.

    Args:
        tables: a run's ``results/tables`` (one folder per study).
        root: the repository root.
        suite: the data's suite name.
        run: what the run was (config, date, machine), written into ``source.yaml``.
        studies: None, the whole suite (the committed data replaced by the run's); or the studies to replace
            (a run of some studies, e.g. ``snakemake --config 'select=[...]'``): the others' committed
            data are kept, and ``source.yaml`` gains an entry under ``updates`` saying which studies came from
            which run.

    Returns:
        The studies copied.

    Raises:
        ResultsPagesError: ``tables`` holds no study, or lacks a summary or run records a table needs; with
            ``studies``, one that ``tables`` lacks, or no committed data of ``suite`` to update.
    """
    found = sorted(p.parent.name for p in Path(tables).glob("*/summary.csv"))
    if not found:
        raise ResultsPagesError(f"{tables}: no <study>/summary.csv")
    specs = load_specs(root / SPEC)
    needed, per_client = _studies_read(specs, suite), _studies_read(specs, suite, "clients")
    timed, tuned = _studies_read(specs, suite, "times"), _studies_read(specs, suite, "tuning")
    target = root / DATA / suite
    if studies is None:
        absent = sorted(needed - set(found))
        if absent:
            raise ResultsPagesError(f"{tables}: no summary of {', '.join(absent)}, which the pages read")
        if target.exists():
            shutil.rmtree(target)
    else:
        absent = sorted(set(studies) - set(found))
        if absent:
            raise ResultsPagesError(f"{tables}: no summary of {', '.join(absent)} (--studies)")
        if not (target / "source.yaml").is_file():
            raise ResultsPagesError(f"{target}: no committed data to update; refresh the whole suite first")
        found = sorted(set(studies))
    for study in found:
        if (target / study).exists():
            shutil.rmtree(target / study)
        (target / study).mkdir(parents=True)
        for name in (
            ["claims.csv"]
            + (["summary.csv"] if study in needed else [])
            + (["clients.csv"] if study in per_client else [])
            + (["tuning.csv"] if study in tuned else [])
        ):
            if (Path(tables) / study / name).is_file():
                shutil.copyfile(Path(tables) / study / name, target / study / name)
        if study in timed:  # the run's results/runs beside its results/tables
            run_times(Path(tables).parent / "runs", study).to_csv(target / study / "times.csv", index=False)
    entry = {
        "run": run or "not stated (--run)",
        "from": str(tables),
        "copied": datetime.date.today().isoformat(),
    }
    if studies is None:
        source = {
            "suite": suite,
            **entry,
            "note": "written by python -m hetfl.tools.results_pages --from; the files are the run's own, byte for byte",
        }
    else:
        source = yaml.safe_load((target / "source.yaml").read_text())
        source.setdefault("updates", []).append({"studies": found, **entry})
    (target / "source.yaml").write_text(yaml.safe_dump(source, sort_keys=False, allow_unicode=True))
    return found


def _studies_read(pages: dict[str, dict[str, dict]], suite: str, table: str = "summary") -> set[str]:
    """The studies of ``suite`` whose ``table`` the pages' tables read (table, row or ref study):
    ``summary``; ``clients``, the per-client table (a statistic of :data:`CLIENT_STATS`); ``times`` (a
    ``time:`` ref); ``tuning`` (a ``tuned:`` ref)."""
    out = set()
    for specs in pages.values():
        for spec in specs.values():
            for row in (spec.get("rows") or {}).values():
                row = {"cells": row} if isinstance(row, list) else row
                if (row.get("suite") or spec.get("suite") or "default") != suite:
                    continue
                default = row.get("study") or spec.get("study")
                for cell in row["cells"]:
                    if cell is None:
                        continue
                    refs = PLACEHOLDER.findall(str(cell)) if "{" in str(cell) else [str(cell)]
                    for ref in (r.strip() for r in refs):
                        kind, _, rest = ref.partition(":")
                        if kind in ("time", "tuned"):
                            if table == {"time": "times", "tuned": "tuning"}[kind]:
                                out.add(rest.rpartition("/")[0] or default)
                            continue
                        match = REF.match(ref) if kind not in CLAIM_REFS else None
                        if match and table not in ("times", "tuning"):
                            stat = match["stat"] or row.get("stat") or spec.get("stat")
                            if table == "summary" or stat in CLIENT_STATS:
                                out.add(match["study"] or default)
    return out - {None}


def run_times(runs: Path, study: str) -> pd.DataFrame:
    """``run, seed, wall_time_s`` of every seed of ``study`` under a suite's ``results/runs`` (its
    ``run.json``, :class:`~hetfl.pipeline.records.RunRecord`), sorted by run and seed.

    Raises:
        ResultsPagesError: the study has no run record.
    """
    records = [RunRecord.read(f) for f in sorted((runs / study).glob("*/seed=*/run.json"))]
    rows = [{"run": r.run, "seed": r.seed, "wall_time_s": r.wall_time_s} for r in records]
    if not rows:
        raise ResultsPagesError(f"{runs / study}: no <run>/seed=<s>/run.json, whose times the pages read")
    return pd.DataFrame(rows).sort_values(["run", "seed"], kind="stable")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m hetfl.tools.results_pages", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("--root", default=".", help="the repository root (default: the current folder)")
    parser.add_argument(
        "--from", dest="tables", help="first copy this suite run's tables (results/tables) into the data"
    )
    parser.add_argument("--suite", default="default", help="the data's suite that --from refreshes")
    parser.add_argument("--run", default="", help="with --from: what the run was, for source.yaml")
    parser.add_argument(
        "--studies",
        nargs="+",
        help="with --from: replace only these studies' data (the others kept; source.yaml lists the update)",
    )
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 where a page differs")
    args = parser.parse_args(argv)
    root = Path(args.root)
    try:
        if args.tables:
            studies = refresh(Path(args.tables), root, args.suite, args.run, args.studies)
            print(f"copied {len(studies)} studies' tables into {root / DATA / args.suite}")
        lines = generate(root, check=args.check)
    except ResultsPagesError as e:
        raise SystemExit(f"error: {e}") from None
    for line in lines:
        print(line)
    if args.check and lines:
        print(f"{len(lines)} row(s) differ from the data: python -m hetfl.tools.results_pages rewrites them")
        sys.exit(1)


if __name__ == "__main__":
    main()
