"""A broken copy of your own data through the workflow: every bad npz file and LEAF pair stops Snakemake
before any job, with an error naming the study's key, the file and the sample or user at fault; the
previous results stay byte for byte, and with the good file back (the same bytes) nothing is planned."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

import pytest

from tests.test_data_user_files import BAD_LEAF, BAD_NPZ, write_leaf, write_split_npz
from tests.workflow_repo import copy_repo, snakemake

pytestmark = pytest.mark.workflow

COMMON = {
    "partition": {"scheme": "natural"},
    "model": {"name": "mlr"},
    "rounds": 1,
    "seeds": [0],
    "defaults": {"lr": 0.1, "batch_size": 4, "local_steps": 2},
    "runs": {"fedavg": {"algorithm": "fedavg"}},
    "figures": [],
}
STUDIES = {
    "bad_npz": {**COMMON, "dataset": {"name": "npz", "path": "userdata/mine.npz"}},
    "bad_leaf": {
        **COMMON,
        "dataset": {"name": "leaf", "train": "userdata/leaf/train.json", "test": "userdata/leaf/test.json"},
    },
}
CASES = [("bad_npz", case) for case in BAD_NPZ] + [("bad_leaf", case) for case in BAD_LEAF]


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> Path:
    root = copy_repo(tmp_path_factory.mktemp("bad"), {"studies": STUDIES})
    (root / "userdata/leaf").mkdir(parents=True)
    write_split_npz(root / "userdata/mine.npz")
    write_leaf(root / "userdata/leaf")
    snakemake(root)
    return root


def digest(folder: Path) -> dict[str, str]:
    """SHA-256 of every file under ``folder``, by relative path."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("study,case", CASES)
def test_a_bad_file_stops_the_workflow_before_any_job_and_costs_no_rerun(repo, study, case):
    change, option, element = (BAD_NPZ if study == "bad_npz" else BAD_LEAF)[case]
    dataset = STUDIES[study]["dataset"]
    files = [repo / dataset[k] for k in ("path", "train", "test") if k in dataset]
    good = {p: p.read_bytes() for p in files}
    before = digest(repo / "results")
    try:
        change(files[0] if study == "bad_npz" else files[0].parent)
        proc = snakemake(repo, check=False)
    finally:
        for path, data in good.items():
            path.write_bytes(data)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert f"config key 'studies.{study}.dataset.{option}': '{dataset[option]}'" in out or (
        f"config key 'studies.{study}.dataset.{option}'" in out and dataset[option] in out
    ), out[-2000:]
    assert element in out, out[-2000:]
    assert not re.search(r"^(local)?rule \w+:", out, re.MULTILINE)  # no job started
    assert digest(repo / "results") == before


def test_with_the_good_files_back_nothing_is_planned(repo):
    assert "Nothing to be done" in snakemake(repo, "-n").stdout
    assert list((repo / ".snakemake/hetfl/data_checks").glob("*.json"))  # verdicts kept by the files' SHA-256
