"""Code fingerprints: editing an algorithm changes the fingerprint of its runs only."""

from __future__ import annotations

import shutil

import pytest

import hetfl.fingerprint as fp


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A copy of the hetfl sources that the fingerprint reads instead of the real ones."""
    root = tmp_path / "hetfl"
    shutil.copytree(fp.ROOT, root, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(fp, "ROOT", root)
    fp.clear_cache()
    yield root
    fp.clear_cache()


PFEDME = ["hetfl.algorithms.personalized.pfedme", "hetfl.pipeline.train"]
FEDAVG = ["hetfl.algorithms.baselines.fedavg", "hetfl.pipeline.train"]


def test_closure_follows_imports_but_not_the_registries():
    mods = fp.closure(["hetfl.algorithms.personalized.pfedme"])
    assert "hetfl.engine.grad" in mods
    assert "hetfl.algorithms.baselines.fedavg" not in mods
    mods = fp.closure(PFEDME)
    assert "hetfl.algorithms" not in mods  # the registry discovers modules, it is not code they run
    # a training job reads data.npz and clients.npz: no dataset, scheme or model module of its own
    assert not [m for m in mods if m.startswith(("hetfl.data.partitioners", "hetfl.data.registry"))]
    assert not [m for m in mods if m in ("hetfl.data.mnist5k", "hetfl.models.cnn", "hetfl.models.mlp")]
    assert "hetfl.models.mlp" in fp.closure([*PFEDME, "hetfl.models.dnn"])  # the run's model, named


def test_a_run_fingerprints_its_own_model_and_a_dataset_its_own_module(package):
    from hetfl.pipeline.config import data_fingerprint, partition_fingerprint, train_fingerprint

    before = {
        "mlr": train_fingerprint("fedavg", model="mlr"),
        "cnn": train_fingerprint("fedavg", model="cnn"),
        "mnist5k": data_fingerprint({"name": "mnist5k"}),
        "digits": data_fingerprint({"name": "digits"}),
        "dirichlet": partition_fingerprint({"scheme": "dirichlet"}),
        "iid": partition_fingerprint({"scheme": "iid"}),
    }
    for path in ("models/cnn.py", "data/digits.py", "data/partitioners/iid.py"):
        (package / path).write_text((package / path).read_text() + "\n_EXTRA = 1\n")
    fp.clear_cache()
    after = {
        "mlr": train_fingerprint("fedavg", model="mlr"),
        "cnn": train_fingerprint("fedavg", model="cnn"),
        "mnist5k": data_fingerprint({"name": "mnist5k"}),
        "digits": data_fingerprint({"name": "digits"}),
        "dirichlet": partition_fingerprint({"scheme": "dirichlet"}),
        "iid": partition_fingerprint({"scheme": "iid"}),
    }
    assert {k for k in before if before[k] != after[k]} == {"cnn", "digits", "iid"}


def test_editing_one_algorithm_changes_only_its_fingerprint(package):
    before = fp.fingerprint(PFEDME), fp.fingerprint(FEDAVG)
    path = package / "algorithms" / "baselines" / "fedavg.py"
    path.write_text(path.read_text() + "\n_EXTRA = 1\n")
    fp.clear_cache()
    assert fp.fingerprint(PFEDME) == before[0]
    assert fp.fingerprint(FEDAVG) != before[1]


def test_engine_edits_change_every_fingerprint_but_comments_do_not(package):
    before = fp.fingerprint(PFEDME), fp.fingerprint(FEDAVG)
    path = package / "engine" / "grad.py"
    path.write_text(path.read_text() + "\n# a comment and some blank lines\n\n\n")
    fp.clear_cache()
    assert (fp.fingerprint(PFEDME), fp.fingerprint(FEDAVG)) == before
    path.write_text(path.read_text() + "\n_EXTRA = 1\n")
    fp.clear_cache()
    after = fp.fingerprint(PFEDME), fp.fingerprint(FEDAVG)
    assert after[0] != before[0] and after[1] != before[1]


def test_docstrings_do_not_count_but_string_constants_do(package):
    before = fp.fingerprint(FEDAVG)
    path = package / "algorithms" / "baselines" / "fedavg.py"
    text = path.read_text()
    assert text.startswith('"""')
    path.write_text('"""A rewritten module docstring."""\n' + text.split('"""', 2)[2])
    fp.clear_cache()
    assert fp.fingerprint(FEDAVG) == before
    path.write_text(text.replace("class FedAvg(", "class FedAvg(  # noqa\n", 1))
    fp.clear_cache()
    assert fp.fingerprint(FEDAVG) == before
    path.write_text(text + '\n_NAME = "a string constant is code"\n')
    fp.clear_cache()
    assert fp.fingerprint(FEDAVG) != before


def test_messages_and_logging_are_in_no_fingerprint(package):
    """hetfl.errors and hetfl.logs (fp.NEUTRAL) cannot change an output: rewording an error reruns nothing."""
    assert not set(fp.closure(PFEDME)) & fp.NEUTRAL
    assert (
        not set(fp.closure(["hetfl.pipeline.aggregate", "hetfl.pipeline.claims", "hetfl.data.partition"]))
        & fp.NEUTRAL
    )
    before = fp.fingerprint(PFEDME)
    path = package / "errors.py"
    path.write_text(path.read_text().replace("config key '{key}'", "the config key '{key}'"))
    fp.clear_cache()
    assert fp.fingerprint(PFEDME) == before


def test_a_stage_fingerprint_covers_its_script_and_what_it_imports():
    from hetfl.pipeline.config import train_fingerprint

    assert fp.stage_fingerprint("figure") != fp.stage_fingerprint("claims")
    assert len(fp.stage_fingerprint("aggregate")) == 16
    assert train_fingerprint("fedavg", model="mlr") == fp.stage_fingerprint(
        "train", ["hetfl.algorithms.baselines.fedavg", "hetfl.models.mlr"]
    )
    with pytest.raises(FileNotFoundError, match="no workflow script for stage 'plots'"):
        fp.stage_fingerprint("plots")
