"""Rerun exactly what changed: one edit at a time to a finished tiny study, then what a dry run plans.

Every rule's ``code`` param is the fingerprint of the code its jobs run (``hetfl.fingerprint``: the stage's
script and the hetfl modules it imports, by their parsed code), and the profiles leave out Snakemake's
modification-time ``code`` trigger. So a code change replans exactly the jobs whose code changed and what
reads their outputs; comments, docstrings and modification times replan nothing. Each case below is one
edit, undone afterwards; the expectations are the rules of the planned jobs (``all`` included when anything
reruns), every seed of every run counted.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import TINY_STUDY
from tests.workflow_repo import copy_repo, planned, snakemake

pytestmark = pytest.mark.workflow

# The tiny study: digits, two runs, two seeds, a figure and a claim.
STUDY = {
    **TINY_STUDY,
    "runs": {k: TINY_STUDY["runs"][k] for k in ("fedavg", "pfedme")},
    "figures": ["test_acc_personal"],
    "claims": ["pfedme.test_acc_personal > fedavg.test_acc_global"],
}
TRAINS = 4  # 2 runs x 2 seeds
PARTITIONS = 2  # one per seed
TABLES = ["aggregate", "claims", "figure", "report_tables", "all"]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = copy_repo(tmp_path_factory.mktemp("reruns"), {"studies": {"tiny": STUDY}})
    snakemake(root)
    return root


def plan(repo: Path) -> Counter:
    """The rules of the jobs a dry run plans, counted (a run's job counts once per seed)."""
    return Counter(rule for rule, _ in planned(repo))


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{old!r} is not once in {path}"
    path.write_text(text.replace(old, new))


CASES = {
    # (file, text replaced, replacement) -> planned rules
    "a comment in the training script": (
        "workflow/scripts/train.py",
        "spec = json.loads(snakemake.params.spec)\n",
        "spec = json.loads(snakemake.params.spec)  # the run's resolved spec\n",
        {},
    ),
    "a code change in plotting": (
        "src/hetfl/pipeline/plotting.py",
        "\ndef draw(",
        "\n_RESTYLED = True\n\n\ndef draw(",
        {"figure": 1, "all": 1},
    ),
    "a code change in aggregate": (
        "src/hetfl/pipeline/aggregate/files.py",
        "\ndef write_csv(",
        "\n_CHANGED = True\n\n\ndef write_csv(",
        dict.fromkeys(TABLES, 1),
    ),
    "a code change in claims": (
        "src/hetfl/pipeline/claims_check.py",
        "\ndef claims_markdown(",
        "\n_CHANGED = True\n\n\ndef claims_markdown(",
        {"claims": 1, "report_tables": 1, "all": 1},
    ),
    "a comment in plotting": (
        "src/hetfl/pipeline/plotting.py",
        "\ndef draw(",
        "\n# a comment\n\n\ndef draw(",
        {},
    ),
    "a docstring in the engine": (
        "src/hetfl/engine/federation.py",
        '"""The federation: every client',
        '"""The federation, reworded: every client',
        {},
    ),
    "an error message": (
        "src/hetfl/errors.py",
        "text = f\"config key '{key}': {message}\"",
        'text = f"config key {key!r}: {message}"',
        {},
    ),
    "how the partition stats are drawn": (
        "src/hetfl/data/stats.py",
        "step = max(1, math.ceil(num_clients / 25))",
        "step = max(1, math.ceil(num_clients / 20))",
        {"partition_stats": PARTITIONS, "all": 1},
    ),
    "the training driver": (
        "src/hetfl/pipeline/train.py",
        '        raise ValueError(f"the tuning choice sets unknown hyper-parameters {unknown}")',
        '        raise ValueError(f"the tuning choice sets hyper-parameters {unknown} the run does not have")',
        {"train": TRAINS, **dict.fromkeys(TABLES, 1)},
    ),
    "one algorithm": (
        "src/hetfl/algorithms/personalized/pfedme.py",
        "\nclass PFedMe(",
        "\n_CHANGED = True\n\n\nclass PFedMe(",
        {"train": 2, **dict.fromkeys(TABLES, 1)},
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_edit_replans_exactly_what_it_affects(repo, case):
    name, old, new, expected = CASES[case]
    path = repo / name
    original = path.read_text()
    try:
        edit(path, old, new)
        assert plan(repo) == Counter(expected)
    finally:
        path.write_text(original)
    assert plan(repo) == Counter()


def test_touching_every_script_and_module_replans_nothing(repo):
    """What a checkout or `git pull` can do to modification times (the Snakefile, the rules, the scripts, the
    library): nothing reruns."""
    later = time.time() + 60
    files = [repo / "Snakefile", *(repo / "workflow").rglob("*.*"), *(repo / "src/hetfl").rglob("*.py")]
    for path in files:
        os.utime(path, (later, later))
    assert len(files) > 100
    assert "Nothing to be done" in snakemake(repo, "-n").stdout
