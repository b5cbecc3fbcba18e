"""``run.json``: one type writes and reads it (``hetfl.pipeline.records.RunRecord``)."""

from __future__ import annotations

import json

import pytest

from hetfl.pipeline.records import REQUIRED, RunRecord

RECORD = RunRecord(
    study="s", run="fedavg", algorithm="fedavg", seed=3, status="ok", rounds_done=4, wall_time_s=1.25,
    device="cuda:0", execution="loop", tf32=True, memory={"rows_per_call": 1}, spec={"rounds": 4},
)  # fmt: skip


def test_a_record_reads_back_what_it_wrote_as_sorted_indented_json(tmp_path):
    path = tmp_path / "run.json"
    RECORD.write(path)
    assert RunRecord.read(path) == RECORD
    text = path.read_text()
    assert text == json.dumps(json.loads(text), indent=2, sort_keys=True) + "\n"
    assert RECORD.device_type == "cuda" and RunRecord("s", "r", "a", 0, "ok").device_type == "cpu"


def test_an_older_record_takes_the_defaults_and_unknown_keys_are_ignored(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"study": "s", "run": "r", "algorithm": "a", "seed": 0, "status": "diverged",
                                "diverged_round": 2, "from_a_later_version": 1}))  # fmt: skip
    record = RunRecord.read(path)
    assert record.diverged_round == 2 and record.execution is None and record.wall_time_s is None
    assert not hasattr(record, "from_a_later_version")


@pytest.mark.parametrize("missing", REQUIRED)
def test_a_record_without_a_required_field_is_refused_naming_it(tmp_path, missing):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({k: v for k, v in RECORD.as_dict().items() if k != missing}))
    with pytest.raises(ValueError, match=f"run.json lacks {missing}"):
        RunRecord.read(path)


def test_an_unknown_status_is_refused(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({**RECORD.as_dict(), "status": "crashed"}))
    with pytest.raises(ValueError, match=r"status 'crashed' is not one of ok, diverged"):
        RunRecord.read(path)
