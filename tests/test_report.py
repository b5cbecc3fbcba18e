"""The HTML report: ``snakemake --report results/report.html`` on a tiny study, in a copy of the repository.

Checks what a researcher opening the page relies on: one self-contained HTML file (no external scripts,
styles or images) that shows every figure of the suite with a caption naming the paper and figure it
reproduces, the study and the metrics; the study's summary table and its checked claims as pages
shown inline; the top-level description of the suite. And, without Snakemake, the pieces of
``hetfl.pipeline.report``: paper references, the HTML pages and their escaping.
"""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

import pandas as pd
import pytest

from hetfl.pipeline.report import claims_page, paper_references, study_paper, summary_page
from tests.conftest import TINY_STUDY
from tests.workflow_repo import copy_repo, snakemake

REPO = Path(__file__).resolve().parents[1]
NAME = "pfedme_tiny"  # the prefix names the paper (hetfl.pipeline.report.PAPERS)
STUDY = {
    **TINY_STUDY,
    # three of its runs (one diverges) keep the test short
    "runs": {run: TINY_STUDY["runs"][run] for run in ("fedavg", "pfedme", "pfedme_big_lambda")},
    "description": "A tiny stand-in for the pFedMe comparison: |D| = 8, R = 3 <local> steps.",
    "figures": [
        {
            "name": "accuracy",
            "title": "Fig. 2 (stand-in): personalized accuracy",
            "metrics": ["test_acc_personal"],
        },
        {"name": "losses", "metrics": ["train_loss_personal", "train_loss_global"]},
    ],
    "claims": [
        {
            "id": "C1",
            "text": "pFedMe beats FedAvg",
            "check": "pfedme.test_acc_personal > fedavg.test_acc_global",
        }
    ],
    "paper": {"pfedme": {"test_acc_personal": 0.9}},
}


def js_object(page: str, name: str) -> dict:
    """The JSON object the report assigns to ``var <name>`` (Snakemake 9's embedded report data)."""
    match = re.search(rf"var {name} = (\{{.*?\}});\n", page, re.S)
    assert match, f"no 'var {name}' in the report"
    return json.loads(match.group(1))


def embedded(result: dict) -> bytes:
    """The file a report entry embeds as a base64 data URI."""
    head, _, data = result["data_uri"].partition("base64,")
    assert head.startswith("data:") and data, result["data_uri"][:80]
    return base64.b64decode(data)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> str:
    """The report of a copy of the workflow with the tiny study as its config, after one full run."""
    root = copy_repo(tmp_path_factory.mktemp("report"), {"studies": {NAME: STUDY}})
    snakemake(root)
    snakemake(root, "--report", "results/report.html")
    return (root / "results" / "report.html").read_text(encoding="utf-8")


@pytest.mark.workflow
def test_the_report_is_one_self_contained_html_page(report):
    assert report.lstrip().lower().startswith("<!doctype html>") and report.rstrip().endswith("</html>")
    assert not re.search(r"<script[^>]*\bsrc=", report), "an external script"
    assert not re.search(r"<link[^>]*\bhref=[\"']?(?:https?:)?//", report), "an external stylesheet"
    assert not re.search(r"<img[^>]*\bsrc=[\"']?(?:https?:)?//", report), "an external image"
    for result in js_object(report, "results").values():
        assert result["data_uri"].startswith("data:"), result["name"]


@pytest.mark.workflow
def test_every_figure_is_shown_with_a_caption_saying_what_it_reproduces(report):
    results, categories = js_object(report, "results"), js_object(report, "categories")
    figures = {f"results/figures/{NAME}/{fig['name']}.png" for fig in STUDY["figures"]}
    assert set(categories["Figures"][NAME]) == figures
    for path in figures:
        result = results[path]
        assert result["mime_type"] == "image/png" and embedded(result).startswith(b"\x89PNG")
        caption = result["caption"]
        assert "Dinh, Tran, Nguyen: Personalized Federated Learning with Moreau Envelopes" in caption
        assert "A tiny stand-in for the pFedMe comparison: |D| = 8, R = 3 &lt;local&gt; steps." in caption
        assert "<code>pfedme_tiny</code>" in caption and "mean over 2 seed(s)" in caption
    accuracy = results[f"results/figures/{NAME}/accuracy.png"]
    assert "<b>Reproduces:</b> Fig. 2 of Dinh" in accuracy["caption"]
    assert "Fig. 2 (stand-in): personalized accuracy" in accuracy["caption"]
    assert "test_acc_personal against communication rounds" in accuracy["caption"]
    assert accuracy["labels"] == {"figure": "accuracy", "title": "Fig. 2 (stand-in): personalized accuracy"}
    losses = results[f"results/figures/{NAME}/losses.png"]["caption"]
    assert "train_loss_personal, train_loss_global against communication rounds" in losses
    assert "system-message" not in json.dumps(results), "a caption did not render"


@pytest.mark.workflow
def test_the_summary_table_and_the_claims_are_shown_inline(report):
    results, categories = js_object(report, "results"), js_object(report, "categories")
    summary_path, claims_path = (f"results/tables/{NAME}/{name}.html" for name in ("summary", "claims"))
    assert categories["Tables"][NAME] == [summary_path] and categories["Claims"][NAME] == [claims_path]
    summary, claims = results[summary_path], results[claims_path]
    assert summary["mime_type"] == claims["mime_type"] == "text/html"  # the report shows these inline
    assert "Summary table of study <code>pfedme_tiny</code>" in summary["caption"]
    page = embedded(summary).decode()
    for run in STUDY["runs"]:
        assert f"<td>{run}" in page
    assert "test_acc_personal paper (%)" in page and "pfedme_big_lambda †" in page and "diverged" in page
    assert "<td>90.00</td>" in page  # the paper's 0.9, in % as ours
    assert "best = best test value over rounds" in page
    assert (
        "<h2>Per-client distribution</h2>" in page
        and "<h3>test_acc_personal (worst = lowest, in %)</h3>" in page
    )
    page = embedded(claims).decode()
    assert "pFedMe beats FedAvg" in page and "C1" in page
    assert re.search(r"<td class='(yes|no|undetermined)'>", page)
    assert re.search(r"<td class='(yes|noise|no|undetermined)'>(holds|does not hold|undetermined)", page)
    assert "Claims of study <code>pfedme_tiny</code>" in claims["caption"]


@pytest.mark.workflow
def test_the_partitions_and_the_suite_are_described(report):
    results, categories = js_object(report, "results"), js_object(report, "categories")
    assert len(categories["Partitions"]["digits"]) == len(STUDY["seeds"])
    for path in categories["Partitions"]["digits"]:
        assert "Partition spec" in results[path]["caption"] and embedded(results[path]).startswith(b"\x89PNG")
    match = re.search(r"var workflow_desc = (\".*?\");\n", report, re.S)
    description = json.loads(match.group(1))
    assert "hetfl: federated learning under client heterogeneity" in description
    assert "<code>pfedme_tiny</code>" in description and "&lt;local&gt; steps" in description


def test_paper_references_and_papers():
    text = "Figs 3, 4, 6, 7 (robust training); Figure 2(a), Table S1 and Fig. 1b-d, not Figaro 3."
    assert paper_references(text) == ["Figs 3, 4, 6, 7", "Figure 2(a)", "Table S1", "Fig. 1b-d"]
    assert paper_references("Fig. 3: tau = 5 and Fig. 3 again") == ["Fig. 3"]
    assert study_paper("pfedme_mnist").startswith("Dinh, Tran, Nguyen")
    assert "Minimax" in study_paper("minimax_paper_robust") and "Partially" in study_paper("ffgg_zeta")
    assert "Adaptive collaboration" in study_paper("collab_fig1") and study_paper("tiny") == ""


def test_pages_escape_and_mark_what_they_show():
    about = {"study": "s", "paper": "A & B", "description": "x < y", "seeds": 2, "runs": ["a", "b"]}
    summary = pd.DataFrame(
        {
            "study": "s",
            "run": ["a", "b"],
            "algorithm": "fedavg",
            "metric": "test_acc_global",
            "n_seeds": 2,
            "n_diverged": [0, 2],
            "final_mean": [0.5, float("nan")],
            "final_std": [0.1, float("nan")],
            "best_mean": [0.6, float("nan")],
            "best_std": [0.05, float("nan")],
        }
    )
    page = summary_page(summary, about, paper={"a": {"test_acc_global": 0.7}})
    assert page.startswith("<!DOCTYPE html>") and "A &amp; B" in page and "x &lt; y" in page
    cells = re.findall(r"<td>(.*?)</td>", page)
    assert cells[:6] == ["a", "fedavg", "2", "50.00 ± 10.00", "60.00 ± 5.00", "70.00"]  # final, best, paper
    assert "<td>b †</td>" in page and "<td>diverged</td>" in page
    assert "<th>test_acc_global paper (%)</th>" in page and "Per-client" not in page
    clients = pd.DataFrame(
        [
            {
                "study": "s",
                "run": "a",
                "metric": "test_acc_personal",
                "n_seeds": 2,
                "n_diverged": 0,
                "n_clients": 20,
                "worst_k": 2,
                **{
                    f"{at}_{stat}": 0.5
                    for at in ("final", "best")
                    for stat in ("client_mean", "client_std", "worst10")
                },
                **{
                    f"{at}_{stat}_std": 0.01
                    for at in ("final", "best")
                    for stat in ("client_mean", "client_std", "worst10")
                },
            }
        ]
    )
    page = summary_page(summary, about, clients=clients)
    assert "<h3>test_acc_personal (worst = lowest, in %)</h3>" in page and "<td>20 (worst 2)</td>" in page
    assert "<td>50.00 ± 1.00</td>" in page
    claims = pd.DataFrame(
        [
            {
                "id": "C1",
                "text": "a <b>",
                "check": "a.m > b.m",
                "at": "final",
                "holds": "yes",
                "status": "holds",
            },
            {
                "id": "C2",
                "text": "t",
                "check": "a.m < b.m",
                "at": "best",
                "holds": "yes",
                "status": "undecided (holds on the means)",
            },
            {
                "id": "C3",
                "text": "t",
                "check": "a.m < 1",
                "at": "best",
                "holds": "undetermined",
                "status": "undetermined",
            },
        ]
    ).assign(
        seeds_holding="1/2",
        comparisons="0.5 > 0.4",
        intervals="+0.1 [-0.2, +0.4] (n=3)",
        operands="m[a] = 0.5",
    )
    page = claims_page(claims, about)
    assert "2 of 3 claims hold" in page and "1 of them with every 95 % interval" in page
    assert "a &lt;b&gt;" in page and "<code>a.m &gt; b.m</code>" in page
    assert "<td class='yes'>yes</td><td class='yes'>holds</td>" in page
    assert (
        "<td class='noise'>undecided (holds on the means)</td>" in page and "+0.1 [-0.2, +0.4] (n=3)" in page
    )
    assert "<td class='undetermined'>undetermined</td>" in page
    assert "declares no claims" in claims_page(claims.iloc[:0], about)
