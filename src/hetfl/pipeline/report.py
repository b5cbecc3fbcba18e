"""What the HTML report (``snakemake --report results/report.html``) says about the suite.

The report shows every figure with a caption (the paper and figure it reproduces, the study's
description, the metrics, runs and seeds drawn), each study's cross-seed summary table and its checked
claims. The captions (``workflow/report/*.rst``) are Jinja templates filled from the figure rule's
``params.about`` (:func:`figure_about`); the tables and claims are small HTML pages written by the
``report_tables`` rule (:func:`summary_page`, :func:`claims_page`), shown inline by the report.

A study names its paper by the prefix of its name (``PAPERS``): ``pfedme_…``, ``ffgg_…``,
``minimax_…``, ``collab_…``; a study with another name reproduces no paper of the suite.
"""

from __future__ import annotations

import html
import re
from typing import Any

import pandas as pd

from hetfl.pipeline.aggregate import CLIENTS_LEGEND, client_tables, summary_table
from hetfl.pipeline.claims_check import CLAIMS_LEGEND, needed_text

PAPERS = {
    "pfedme": "Dinh, Tran, Nguyen: Personalized Federated Learning with Moreau Envelopes (NeurIPS 2020)",
    "ffgg": (
        "Mishchenko, Islamov, Gorbunov, Horváth: Partially Personalized Federated Learning: "
        "Breaking the Curse of Data Heterogeneity (TMLR 2025)"
    ),
    "minimax": "Sharma, Panda, Joshi: Federated Minimax Optimization with Client Heterogeneity (TMLR 2023)",
    "collab": (
        "Philippenko, Le Bars, Scaman, Massoulié: Adaptive collaboration for online personalized "
        "distributed learning with heterogeneous clients (arXiv:2507.06844, 2025)"
    ),
}
"""Study-name prefix (before the first ``_``) -> the paper whose experiments the study reproduces."""

PAPER_REFERENCE = re.compile(
    r"\b(?:Fig(?:ure)?s?\.?|Tables?)\s*S?\d+(?:\.\d+)?[a-z]*(?:\([a-z]\))?(?:\s*-\s*[a-z]\b)?"
    r"(?:(?:,\s*|\s+and\s+)S?\d+[a-z]*(?:\([a-z]\))?)*"
)
"""A paper figure or table named in a title or description: ``Fig. 1b``, ``Figure 3(a)``, ``Figs 3, 4``,
``Table 1``, ``Figure 1b-d``."""

STYLE = """
body { font-family: system-ui, sans-serif; font-size: 14px; margin: 1em; color: #222; }
h1 { font-size: 1.3em; } p.about { max-width: 60em; color: #444; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; } td.yes { background: #dff0d8; } td.no { background: #f2dede; }
td.undetermined { background: #fcf8e3; } td.noise { background: #fdebd0; } code { font-size: 0.95em; }
h2 { font-size: 1.15em; } h3 { font-size: 1em; }
"""


def study_paper(name: str) -> str:
    """The paper study ``name`` reproduces (``PAPERS``, by its name's prefix), or ``""``."""
    return PAPERS.get(name.split("_", 1)[0], "")


def paper_references(text: str) -> list[str]:
    """The paper figures and tables ``text`` names (``PAPER_REFERENCE``), in order, without repeats."""
    return list(dict.fromkeys(m.group(0) for m in PAPER_REFERENCE.finditer(text)))


def study_about(study) -> dict[str, Any]:
    """What the report says of a study (a ``hetfl.pipeline.config.Study``): paper, description, seeds, runs.

    Returns:
        ``{"study", "paper", "description", "seeds" (count), "runs" (labels)}``, JSON-serializable.
    """
    return {
        "study": study.name,
        "paper": study_paper(study.name),
        "description": " ".join(study.description.split()),
        "seeds": len(study.seeds),
        "runs": list(study.runs),
    }


def figure_about(study, figure: dict) -> dict[str, Any]:
    """What a figure's caption says (``figure`` normalized by ``hetfl.pipeline.plotting.normalize_figures``).

    Returns:
        :func:`study_about` plus ``figure`` (name), ``title`` (the figure's, else its name),
        ``reproduces`` (the paper figures/tables its title names, else those of the study's
        description: :func:`paper_references`) and ``reproduces_from`` (``title`` | ``description``), ``kind``
        (``lines`` | ``heatmap``), ``metrics``, ``x`` (``round`` or the metric on the x axis), ``runs``
        (those drawn), and for a heatmap ``artifact`` (the recorded matrix), ``at`` (its rounds) and
        ``seed`` (None: the study's first).
    """
    title = figure.get("title") or ""
    from_title = paper_references(title)
    about = {
        **study_about(study),
        "figure": figure["name"],
        "title": title or figure["name"],
        "reproduces": from_title or paper_references(study.description),
        "reproduces_from": "title" if from_title else "description",
        "kind": figure.get("kind", "lines"),
        "metrics": list(figure.get("metrics", [])),
        "x": figure.get("x", "round"),
        "runs": list(figure.get("runs") or study.runs),
    }
    if about["kind"] == "heatmap":
        about.update(artifact=figure["artifact"], at=list(figure["at"]), seed=figure.get("seed"))
    return about


def _header(title: str, about: dict[str, Any]) -> str:
    lines = [f"<h1>{html.escape(title)}</h1>"]
    if about.get("paper"):
        lines.append(f"<p class='about'><b>Reproduces:</b> {html.escape(about['paper'])}</p>")
    if about.get("description"):
        lines.append(f"<p class='about'>{html.escape(about['description'])}</p>")
    return "\n".join(lines)


def _page(title: str, body: str) -> str:
    return (
        "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head>\n<body>\n{body}\n</body></html>\n"
    )


def summary_page(
    summary: pd.DataFrame,
    about: dict[str, Any],
    metrics: list[str] | None = None,
    paper: dict[str, dict[str, float]] | None = None,
    clients: pd.DataFrame | None = None,
    tuned: dict[str, dict] | None = None,
) -> str:
    """A self-contained HTML page of a study's cross-seed summary (the table of ``summary.md``, its
    legend) and, when ``clients`` is given, the per-client distribution (the tables of ``clients.md``).

    Args:
        summary: as returned by ``hetfl.pipeline.aggregate.summarize`` (one study).
        about: :func:`study_about` of the study.
        metrics, paper, tuned: as for ``hetfl.pipeline.aggregate.summary_markdown``.
        clients: as returned by ``hetfl.pipeline.aggregate.client_summary`` (``clients.csv``), or None.

    Raises:
        ConfigError: a requested metric is not in the summary (key ``metrics``).
    """
    table, legend = summary_table(summary, metrics, paper, tuned)
    body = [
        _header(f"Summary: {about['study']}", about),
        table.to_html(index=False, escape=True, border=0, na_rep=""),
        _legend(legend),
    ]
    if clients is not None:
        body.append("<h2>Per-client distribution</h2>")
        tables = client_tables(clients)
        for heading, frame in tables:
            body += [f"<h3>{html.escape(heading)}</h3>", frame.to_html(index=False, escape=True, border=0)]
        body.append(_legend(CLIENTS_LEGEND) if tables else "<p>No run records a per-client metric.</p>")
    return _page(f"Summary: {about['study']}", "\n".join(body))


def _legend(lines) -> str:
    return "<ul class='legend'>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"


def _status_class(status: str) -> str:
    """The CSS class of a claim's statistical status (``hetfl.pipeline.claims_check.claim_status``)."""
    for prefix, css in (("undecided", "noise"), ("holds", "yes"), ("does not hold", "no")):
        if status.startswith(prefix):
            return css
    return "undetermined"


def claims_page(claims: pd.DataFrame, about: dict[str, Any]) -> str:
    """A self-contained HTML page of a study's checked claims, ``holds`` and ``status`` coloured.

    Args:
        claims: the rows of ``claims.csv`` (``hetfl.pipeline.claims_check.check_claims``); uses id, text, check, at,
            holds, status, seeds_holding, seeds_needed (when present), comparisons, intervals, operands.
        about: :func:`study_about` of the study.
    """
    rows = []
    for c in claims.fillna("").itertuples():
        cells = [
            f"<td>{html.escape(str(c.id))}</td>",
            f"<td>{html.escape(str(c.text))}</td>",
            f"<td><code>{html.escape(str(c.check))}</code> (at {html.escape(str(c.at))})</td>",
            f"<td class='{html.escape(str(c.holds))}'>{html.escape(str(c.holds))}</td>",
            f"<td class='{_status_class(str(c.status))}'>{html.escape(str(c.status))}</td>",
            f"<td>{html.escape(str(c.seeds_holding))}</td>",
            f"<td>{html.escape(needed_text(getattr(c, 'seeds_needed', '')))}</td>",
            f"<td>{html.escape(str(c.comparisons))}</td>",
            f"<td>{html.escape(str(c.intervals))}</td>",
            f"<td>{html.escape(str(c.operands))}</td>",
        ]
        rows.append("<tr>" + "".join(cells) + "</tr>")
    head = "".join(
        f"<th>{h}</th>"
        for h in (
            "id",
            "claim",
            "check",
            "holds",
            "status",
            "seeds holding",
            "seeds to decide",
            "means",
            "paired difference [95 % CI]",
            "operands",
        )
    )
    n_holds = int((claims["holds"] == "yes").sum()) if len(claims) else 0
    n_clear = int(claims["status"].astype(str).str.fullmatch("holds").sum()) if len(claims) else 0
    n_open = int(claims["status"].astype(str).str.startswith("undecided").sum()) if len(claims) else 0
    body = [_header(f"Claims: {about['study']}", about)]
    if rows:
        body += [
            f"<p>{n_holds} of {len(rows)} claims hold on the means over seeds; {n_clear} of them with every "
            f"95 % interval on the claimed side (status holds); {n_open} undecided (an interval straddles "
            "its threshold).</p>",
            f"<table><thead><tr>{head}</tr></thead><tbody>",
            *rows,
            "</tbody></table>",
            _legend(
                [
                    *CLAIMS_LEGEND,
                    "Means: the operands' means over seeds; operands: mean ± std (ddof=1) over seeds, n seeds.",
                ]
            ),
        ]
    else:
        body.append("<p>This study declares no claims.</p>")
    return _page(f"Claims: {about['study']}", "\n".join(body))
