"""Timing the official pFedMe code on hetfl's data (``hetfl.tools.official_pfedme``, ``hetfl.tools.bench --official-code``).

The official repository is not shipped; a stand-in checkout with the same layout and server API (written
here) runs through the same driver: its arguments, its data and the per-round clock are checked."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
import torch

from hetfl.pipeline.config import build_suite, load_config
from hetfl.testing import tiny_federation
from hetfl.tools import bench
from hetfl.tools.official_pfedme import export, official_arguments, time_rounds, workspace

CONFIG = load_config([Path(__file__).parents[1] / "config" / "config.yaml"], root=Path(__file__).parents[1])
EVAL_S, TRAIN_S = 0.03, 0.01  # the stand-in's evaluation and training sleeps, per round

SERVERBASE = f"""
import json, os, time

class Server:
    def __init__(self, device, dataset, algorithm, model, batch_size, learning_rate, beta, lamda,
                 num_glob_iters, local_epochs, optimizer, num_users, times, **extra):
        self.args = dict(dataset=dataset, algorithm=algorithm, batch_size=batch_size, learning_rate=learning_rate,
                         beta=beta, lamda=lamda, rounds=num_glob_iters, local_epochs=local_epochs,
                         optimizer=optimizer, num_users=num_users, model=model[1], **extra)

    def send_parameters(self):
        pass

    def evaluate(self):
        time.sleep({EVAL_S})

    def evaluate_personalized_model(self):
        pass

    def evaluate_one_step(self):
        pass

    def save_results(self):
        raise AssertionError("saving must be switched off")

    save_model = save_results

    def train(self):
        users = json.load(open(os.path.join("data", self.args["dataset"], "data", "train", "train.json")))["users"]
        for _ in range(self.args["rounds"]):
            self.send_parameters()
            self.evaluate()
            time.sleep({TRAIN_S})
        json.dump({{**self.args, "users": users}}, open("received.json", "w"))
        self.save_results()
        self.save_model()
"""


def _checkout(root: Path) -> Path:
    """A stand-in for the official repository: its package layout and server constructors."""
    servers = root / "FLAlgorithms" / "servers"
    servers.mkdir(parents=True)
    (root / "FLAlgorithms" / "trainmodel").mkdir()
    (root / "utils").mkdir()
    for package in ("FLAlgorithms", "FLAlgorithms/servers", "FLAlgorithms/trainmodel"):
        (root / package / "__init__.py").write_text("")
    (servers / "serverbase.py").write_text(textwrap.dedent(SERVERBASE))
    for module, name in (("serveravg", "FedAvg"), ("serverperavg", "PerAvg"), ("serverpFedMe", "pFedMe")):
        (servers / f"{module}.py").write_text(
            f"from .serverbase import Server\nclass {name}(Server):\n    pass\n"
        )
    (root / "FLAlgorithms" / "trainmodel" / "models.py").write_text(
        "class Mclr_Logistic:\n    def __init__(self, input_dim=784, output_dim=10):\n        self.dims = (input_dim, output_dim)\n"
    )
    return root


def test_the_official_arguments_are_the_runs_hyperparameters():
    suite = build_suite(bench.official_config(CONFIG, equal_work=True))
    spec = json.loads(suite.studies["pfedme_synthetic"].run_json("pfedme"))
    hp = spec["hyperparameters"]
    args = official_arguments(spec)
    assert args == {
        "algorithm": "pFedMe", "batch_size": hp["batch_size"], "learning_rate": hp["lr"],
        "num_users": hp["clients_per_round"], "local_epochs": hp["local_steps"], "beta": hp["beta"],
        "lamda": hp["lam"], "K": hp["K"], "personal_learning_rate": hp["personal_lr"],
    }  # fmt: skip
    perfedavg = official_arguments(json.loads(suite.studies["pfedme_mnist"].run_json("perfedavg")))
    assert (perfedavg["algorithm"], perfedavg["beta"]) == ("PerAvg", 0.001)
    with pytest.raises(ValueError, match="no 'ditto'; allowed: pfedme, fedavg, perfedavg"):
        official_arguments({"algorithm": "ditto", "hyperparameters": {}})


def test_the_export_is_the_federation_in_the_official_layout(tmp_path):
    fed = tiny_federation(sizes=(5, 3, 8), sample_shape=(6,), dtype=torch.float32)
    export(fed, tmp_path, "Synthetic")
    for split in ("train", "test"):
        data = getattr(fed, split)
        stored = json.loads((tmp_path / "data" / "Synthetic" / "data" / split / f"{split}.json").read_text())
        assert stored["users"] == sorted(stored["users"]) == ["f_00000", "f_00001", "f_00002"]
        assert stored["num_samples"] == data.sizes.tolist()
        x = torch.tensor([row for u in stored["users"] for row in stored["user_data"][u]["x"]])
        y = torch.tensor([v for u in stored["users"] for v in stored["user_data"][u]["y"]])
        assert torch.equal(x, data.x) and torch.equal(y, data.y)


def test_the_official_code_is_timed_per_round_with_and_without_its_evaluation(tmp_path):
    code = _checkout(tmp_path / "pFedMe")
    space = workspace(code)
    root = Path(space.name)
    try:
        fed = tiny_federation(sizes=(5, 3), sample_shape=(6,), dtype=torch.float32)
        export(fed, root, "Synthetic")
        arguments = {"algorithm": "pFedMe", "batch_size": 20, "learning_rate": 0.005, "num_users": 2,
                     "local_epochs": 20, "beta": 1.0, "lamda": 20, "K": 5, "personal_learning_rate": 0.01}  # fmt: skip
        with_eval, without = time_rounds(root, "Synthetic", arguments, rounds=3)
        received = json.loads((root / "received.json").read_text())
    finally:
        space.cleanup()
    assert without >= TRAIN_S and with_eval - without >= EVAL_S  # sleeps: lower bounds, whatever the machine
    assert received["rounds"] == 4  # a warm-up round, then the timed ones
    assert received["users"] == ["f_00000", "f_00001"] and received["model"] == "mclr"
    assert (received["K"], received["personal_learning_rate"], received["lamda"]) == (5, 0.01, 20)
    assert (received["algorithm"], received["optimizer"], received["num_users"]) == ("pFedMe", "SGD", 2)
    assert not (code / "data").exists()  # the checkout is left as it was


def test_a_directory_that_is_not_a_checkout_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="no FLAlgorithms/"):
        workspace(tmp_path)


def test_official_code_needs_official_mode(capsys, tmp_path):
    with pytest.raises(SystemExit):
        bench.main(["--official-code", str(tmp_path)])
    assert "--official-code needs --official" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--official", "--official-rounds", "0"])
    assert "--official-rounds must be a positive integer, got 0" in capsys.readouterr().err
