"""The results pages' tables are their committed data's (``python -m hetfl.tools.results_pages --check``).

Every table marked ``<!-- table: name -->`` on ``docs/results/*.md`` and the READMEs renders, from
``docs/results/data`` and ``docs/results/tables.yaml``, to what the page states; an altered number is
caught and named; the data hold each suite's provenance.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from hetfl.tools import results_pages as rp

ROOT = Path(__file__).resolve().parents[1]


def _commit(data_root: Path, path: str, text: str) -> None:
    """Write one committed table, ``<suite>/<study>/<file>``, under a scratch data folder."""
    (data_root / path).parent.mkdir(parents=True, exist_ok=True)
    (data_root / path).write_text(text)


def test_committed_pages_agree_with_their_data():
    problems = rp.generate(ROOT, check=True)
    assert not problems, (
        "pages differ from docs/results/data (python -m hetfl.tools.results_pages):\n" + "\n".join(problems)
    )


def test_every_declared_table_is_marked_and_every_marked_table_declared():
    pages = rp.load_specs(ROOT / rp.SPEC)
    marked = {}
    for page in [ROOT / "README.md", ROOT / "docs/README.md", *sorted((ROOT / "docs/results").glob("*.md"))]:
        for line in page.read_text().split("\n"):
            if m := rp.MARKER.match(line.strip()):
                marked[m["name"]] = str(page.relative_to(ROOT))
    declared = {name: page for page, specs in pages.items() for name in specs}
    assert marked == declared


def test_each_suite_says_where_its_numbers_come_from():
    suites = [p for p in (ROOT / rp.DATA).iterdir() if p.is_dir()]
    assert {p.name for p in suites} >= {"default", "paper_cpu"}
    for suite in suites:
        source = yaml.safe_load((suite / "source.yaml").read_text())
        assert source["suite"] == suite.name and source.get("run", source.get("ran"))


@pytest.fixture
def repo_copy(tmp_path):
    """The pages, the spec and the data in a scratch root."""
    for rel in ["README.md", "docs/README.md", "docs/results"]:
        src, dst = ROOT / rel, tmp_path / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dst)
    return tmp_path


def test_an_altered_number_on_a_page_is_caught_and_named(repo_copy):
    page = repo_copy / "docs/results/pfedme.md"
    text = page.read_text()
    row = next(line for line in text.split("\n") if line.startswith("| `pfedme_synthetic` (Synthetic"))
    number = row.split("|")[2].strip().split(" ± ")[0]
    altered = f"{float(number) + 0.01:.2f}"
    page.write_text(text.replace(row, row.replace(number, altered, 1)))
    problems = rp.generate(repo_copy, check=True)
    assert len(problems) == 1
    assert "docs/results/pfedme.md: table pfedme_table1, row '`pfedme_synthetic`" in problems[0]
    assert f"page '{altered} ±" in problems[0] and f"data '{number} ±" in problems[0]
    rp.generate(repo_copy)  # writing restores the data's number
    assert page.read_text() == text


def test_an_altered_number_in_the_data_is_caught(repo_copy):
    """A new claims table (one claim more that does not hold) changes every count that reads it."""
    path = repo_copy / rp.DATA / "default/pfedme_mnist/claims.csv"
    lines = path.read_text().split("\n")
    i = next(i for i, line in enumerate(lines) if ",yes," in line)
    lines[i] = lines[i].replace(",yes,", ",no,", 1)
    path.write_text("\n".join(lines))
    pages = {p.split(":")[0] for p in rp.generate(repo_copy, check=True)}
    assert pages == {"README.md", "docs/README.md", "docs/results/claims.md"}


def test_the_command_exits_nonzero_naming_the_table(repo_copy, capsys):
    page = repo_copy / "docs/results/baselines.md"
    page.write_text(page.read_text().replace("| FedRep | | 95.44 ± 0.28 |", "| FedRep | | 95.45 ± 0.28 |"))
    with pytest.raises(SystemExit) as exit_:
        rp.main(["--root", str(repo_copy), "--check"])
    assert exit_.value.code == 1
    assert "docs/results/baselines.md: table baselines_final, row 'FedRep'" in capsys.readouterr().out


def test_bad_specs_raise_naming_page_and_table(repo_copy):
    spec = repo_copy / rp.SPEC
    tables = yaml.safe_load(spec.read_text())
    tables["ffgg_table2"]["rows"]["`ffgg_writers` (150 FEMNIST-like writers)"]["cells"][0] = (
        "fedavg.no_such_metric"
    )
    spec.write_text(yaml.safe_dump(tables, allow_unicode=True))
    with pytest.raises(rp.ResultsPagesError, match="docs/results/ffgg.md: table ffgg_table2.*no_such_metric"):
        rp.generate(repo_copy, check=True)
    tables["ffgg_table2"]["rows"] = {"no such row": [None] * 8}
    spec.write_text(yaml.safe_dump(tables, allow_unicode=True))
    with pytest.raises(rp.ResultsPagesError, match="ffgg_table2: no row labelled 'no such row'"):
        rp.generate(repo_copy, check=True)


def test_refresh_copies_a_runs_tables(tmp_path, repo_copy):
    """``--from`` copies the summaries the tables read and every claims table, byte for byte."""
    run = tmp_path / "run_tables"
    default = repo_copy / rp.DATA / "default"
    for study_dir in default.iterdir():
        if study_dir.is_dir():
            shutil.copytree(study_dir, run / study_dir.name)
            if not (run / study_dir.name / "summary.csv").exists():
                (run / study_dir.name / "summary.csv").write_text("study,run\n")
    before = {p.relative_to(default): p.read_bytes() for p in default.rglob("*.csv")}
    shutil.rmtree(default)
    rp.refresh(run, repo_copy, "default", run="a test")
    after = {p.relative_to(default): p.read_bytes() for p in default.rglob("*.csv")}
    assert after == before
    assert not rp.generate(repo_copy, check=True)


def test_refresh_of_some_studies_keeps_the_others_and_records_the_update(tmp_path, repo_copy):
    """``--from ... --studies a b`` replaces those studies' data only, and ``source.yaml`` says so."""
    run, default = tmp_path / "run_tables", repo_copy / rp.DATA / "default"
    studies = sorted(p.name for p in default.iterdir() if p.is_dir())
    chosen, kept = studies[0], studies[1]
    shutil.copytree(default / chosen, run / chosen)
    claims = run / chosen / "claims.csv"
    claims.write_text(claims.read_text() + "\n")  # a run whose table differs
    before = {p.relative_to(default): p.read_bytes() for p in default.rglob("*.csv")}
    source = yaml.safe_load((default / "source.yaml").read_text())
    assert rp.refresh(run, repo_copy, "default", run="a partial run", studies=[chosen]) == [chosen]
    after = {p.relative_to(default): p.read_bytes() for p in default.rglob("*.csv")}
    assert after[Path(chosen, "claims.csv")] == claims.read_bytes()
    assert {k: v for k, v in after.items() if k.parts[0] != chosen} == {
        k: v for k, v in before.items() if k.parts[0] != chosen
    }
    assert (default / kept).is_dir()
    updated = yaml.safe_load((default / "source.yaml").read_text())
    assert updated["run"] == source["run"] and updated["updates"][-1]["studies"] == [chosen]
    assert updated["updates"][-1]["run"] == "a partial run"
    with pytest.raises(rp.ResultsPagesError, match="no summary of no_such_study"):
        rp.refresh(run, repo_copy, "default", studies=["no_such_study"])
    with pytest.raises(rp.ResultsPagesError, match="refresh the whole suite first"):
        rp.refresh(run, repo_copy, "no_such_suite", studies=[chosen])


@pytest.mark.parametrize(
    ("mean", "std", "fmt", "text"),
    [
        (0.943417, 0.001522, "pct2", "94.34 ± 0.15"),
        (0.904700, 0.014, "pct1", "90.5 ± 1.4"),
        (0.9562, float("nan"), "pct2", "95.62"),
        (0.8297, 0.1355, "pct1m", "83.0"),
        (0.2412, 0.0031, "dec3", "0.241 ± 0.003"),
        (float("nan"), 0.1, "pct2", "—"),
    ],
)
def test_format_value(mean, std, fmt, text):
    assert rp.format_value(mean, std, fmt) == text


def test_unknown_format_raises():
    with pytest.raises(rp.ResultsPagesError, match="unknown format"):
        rp.format_value(0.5, 0.1, "percent")


def test_a_statistic_over_clients_reads_the_per_client_table(tmp_path):
    """``@final_client_mean`` (and the other statistics over clients) read ``clients.csv``, not the summary."""
    _commit(
        tmp_path,
        "default/heart/clients.csv",
        "study,run,metric,final_client_mean,final_client_mean_std,final_worst10,final_worst10_std\n"
        "heart,a41,test_acc_personal,0.792952,0.0010566,0.730625,0.00961862\n",
    )
    data = rp.Data(tmp_path)
    assert rp.resolve(
        "a41.test_acc_personal@final_client_mean", data, "default", "heart", "final", "pct1"
    ) == ("79.3 ± 0.1")
    assert rp.resolve(
        "heart/a41.test_acc_personal@final_worst10:pct2m", data, "default", None, "final", "pct1"
    ) == ("73.06")
    with pytest.raises(rp.ResultsPagesError, match="no committed summary"):
        rp.resolve("a41.test_acc_personal@final", data, "default", "heart", "final", "pct1")
    with pytest.raises(rp.ResultsPagesError, match="allowed: best, final, .*final_client_mean"):
        rp.resolve("a41.test_acc_personal@client_mean", data, "default", "heart", "final", "pct1")


def test_claim_statuses_and_undecided_counts(tmp_path):
    """``status:<study>/<ids>`` gives each claim's status (an undecided one with its seeds to decide) and
    ``undecided:<patterns>`` counts the undecided claims."""
    _commit(
        tmp_path,
        "default/s/claims.csv",
        "id,holds,status,seeds_needed\n"
        "A,yes,holds,\n"
        "B,yes,undecided (holds on the means),12\n"
        "C,no,undecided (fails on the means),inf\n"
        "D,no,does not hold,\n",
    )
    data = rp.Data(tmp_path)
    got = rp.resolve("status:s/A,B,C,D", data, "default", None, "final", "pct1")
    assert got == "holds; undecided, 12 seeds to decide; undecided, inf seeds to decide; does not hold"
    assert rp.resolve("undecided:s", data, "default", None, "final", "pct1") == "2"
    assert rp.resolve("claims:s", data, "default", None, "final", "pct1") == "2 of 4"
    with pytest.raises(rp.ResultsPagesError, match="has no claim 'E'"):
        rp.resolve("status:s/E", data, "default", None, "final", "pct1")
    with pytest.raises(rp.ResultsPagesError, match="status:<study>/<id>"):
        rp.resolve("status:s", data, "default", None, "final", "pct1")


def test_a_claims_intervals(tmp_path):
    _commit(
        tmp_path,
        "default/s/claims.csv",
        'id,holds,status,seeds_needed,intervals\nA,yes,holds,,"+0.01 [+0.002, +0.02] (n=3)"\n',
    )
    got = rp.resolve("interval:s/A", rp.Data(tmp_path), "default", None, "final", "pct1")
    assert got == "+0.01 [+0.002, +0.02] (n=3)"


def test_a_claims_operands_comparisons_and_seeds(tmp_path):
    """``operands:``, ``comparisons:`` and ``seeds:`` read the claim's columns of those names."""
    _commit(
        tmp_path,
        "default/s/claims.csv",
        "id,holds,status,seeds_needed,seeds_holding,comparisons,operands\n"
        'A,yes,holds,,3/3,0.24 < 0.28,"a@round=100 = 0.24 ± 0.003 (n=3); b@round=100 = 0.28 ± 0.016 (n=3)"\n'
        "B,no,does not hold,,1/3,0.3 < 0.29,x\n",
    )
    data = rp.Data(tmp_path)
    assert rp.resolve("seeds:s/A,B", data, "default", None, "final", "pct1") == "3/3; 1/3"
    assert rp.resolve("comparisons:s/A", data, "default", None, "final", "pct1") == "0.24 < 0.28"
    got = rp.resolve("operands:s/A", data, "default", None, "final", "pct1")
    assert got == "a@round=100 = 0.24 ± 0.003 (n=3); b@round=100 = 0.28 ± 0.016 (n=3)"
    with pytest.raises(rp.ResultsPagesError, match="seeds:<study>/<id>"):
        rp.resolve("seeds:s", data, "default", None, "final", "pct1")


def test_a_runs_time_is_its_seeds_mean_training_seconds(tmp_path):
    _commit(tmp_path, "paper/s/times.csv", "run,seed,wall_time_s\na,0,1400.2\na,1,1500.4\nb,0,94\n")
    data = rp.Data(tmp_path)
    assert rp.resolve("time:a", data, "paper", "s", "final", "pct1") == "1,450"
    assert rp.render_cell("≈ {time:s/b} s", data, "paper", None, "final", "pct1") == "≈ 94 s"
    with pytest.raises(rp.ResultsPagesError, match="no run 'c'"):
        rp.resolve("time:c", data, "paper", "s", "final", "pct1")
    with pytest.raises(rp.ResultsPagesError, match="names no study"):
        rp.resolve("time:a", data, "paper", None, "final", "pct1")
    with pytest.raises(rp.ResultsPagesError, match="no committed training times"):
        rp.resolve("time:other/a", data, "paper", None, "final", "pct1")


TUNING = """run,point,lam,metric,at,seeds,score,score_std,n_seeds,n_diverged,chosen,weight,beta,mix_lr,lr
ditto,ditto@lam=0.01,0.01,val_loss_personal,final,0,0.5,,1,0,no,,
ditto,ditto@lam=0.1,0.1,val_loss_personal,final,0,0.4,,1,0,yes,,
wga_bc,wga_bc@weight=0.05-beta=0.1,,val_loss_personal,final,0,0.3,,1,0,no,0.05,0.1
wga_bc,wga_bc@weight=0.25-beta=1.0,,val_loss_personal,final,0,0.2,,1,0,yes,0.25,1.0
apfl,apfl@mix_lr=0.1,,val_loss_personal,final,0,,,0,1,no,,
ft,ft@mix_lr=0.1-beta=0.9-lr=0.5,,val_loss_personal,final,0,0.2,,1,0,yes,,0.9,0.1,0.5
"""


def test_a_tuned_runs_choice_is_its_chosen_points_values_in_grid_order(tmp_path):
    _commit(tmp_path, "default/s/tuning.csv", TUNING)
    data = rp.Data(tmp_path)
    assert rp.resolve("tuned:ditto", data, "default", "s", "final", "pct1") == "lam = 0.1"
    # the grid's order (weight, then beta: the point's label), not the table's column order
    assert rp.render_cell("({tuned:s/wga_bc})", data, "default", None, "final", "pct1") == (
        "(weight = 0.25, beta = 1)"
    )
    # "lr" is not read inside "mix_lr": the label's order is mix_lr, beta, lr
    assert (
        rp.resolve("tuned:ft", data, "default", "s", "final", "pct1") == "mix_lr = 0.1, beta = 0.9, lr = 0.5"
    )
    for run, message in [("apfl", "no chosen point"), ("cobo", "no chosen point")]:
        with pytest.raises(rp.ResultsPagesError, match=message):
            rp.resolve(f"tuned:{run}", data, "default", "s", "final", "pct1")
    with pytest.raises(rp.ResultsPagesError, match="no committed tuning table"):
        rp.resolve("tuned:other/ditto", data, "default", None, "final", "pct1")


def test_refresh_copies_the_tuning_table_a_tuned_ref_reads(tmp_path):
    tables = tmp_path / "results" / "tables"
    _commit(tables, "s/summary.csv", "study,run,metric\n")
    _commit(tables, "s/claims.csv", "id,holds\n")
    _commit(tables, "s/tuning.csv", TUNING)
    root = tmp_path / "repo"
    (root / rp.SPEC).parent.mkdir(parents=True)
    (root / "page.md").write_text(
        "<!-- table: t -->\n| run | s |\n|---|---|\n| ditto | ? |\n<!-- /table -->\n"
    )
    (root / rp.SPEC).write_text(
        yaml.safe_dump(
            {"t": {"page": "page.md", "suite": "x", "study": "s", "rows": {"ditto": ["{tuned:ditto}"]}}}
        )
    )
    rp.refresh(tables, root, "x", run="a test")
    assert (root / rp.DATA / "x" / "s" / "tuning.csv").read_text() == TUNING
    assert rp.generate(root, check=True) == ["page.md: table t, row 'ditto': page '?', data 'lam = 0.1'"]


def test_refresh_writes_the_times_a_table_reads_from_the_run_records(tmp_path):
    """A table with ``time:`` refs makes ``--from`` write the study's ``times.csv`` from its ``run.json``s."""
    from hetfl.pipeline.records import RunRecord

    results = tmp_path / "results"
    (results / "tables" / "s").mkdir(parents=True)
    (results / "tables" / "s" / "summary.csv").write_text("study,run,metric\n")
    (results / "tables" / "s" / "claims.csv").write_text("id,holds\n")
    for run, seed, wall in [("b", 1, 4.0), ("a", 0, 5.5), ("b", 0, 2.0)]:
        path = results / "runs" / "s" / run / f"seed={seed}" / "run.json"
        path.parent.mkdir(parents=True)
        RunRecord(study="s", run=run, algorithm="fedavg", seed=seed, status="ok", wall_time_s=wall).write(
            path
        )
    root = tmp_path / "repo"
    (root / rp.SPEC).parent.mkdir(parents=True)
    (root / "page.md").write_text("<!-- table: t -->\n| run | s |\n|---|---|\n| b | 9 |\n<!-- /table -->\n")
    (root / rp.SPEC).write_text(
        yaml.safe_dump({"t": {"page": "page.md", "suite": "x", "study": "s", "rows": {"b": ["{time:b}"]}}})
    )
    rp.refresh(results / "tables", root, "x", run="a test")
    times = (root / rp.DATA / "x" / "s" / "times.csv").read_text()
    assert times == "run,seed,wall_time_s\na,0,5.5\nb,0,2.0\nb,1,4.0\n"
    assert rp.generate(root, check=True) == ["page.md: table t, row 'b': page '9', data '3'"]
    shutil.rmtree(results / "runs" / "s")
    with pytest.raises(rp.ResultsPagesError, match="no <run>/seed=<s>/run.json"):
        rp.refresh(results / "tables", root, "x")
