"""The public test helpers (``hetfl.testing``): a tiny federation, and ``follow_reference`` catching every
kind of mismatch between a batched algorithm and its reference, naming where it is."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from hetfl.algorithms import get_algorithm
from hetfl.errors import ConfigError
from hetfl.reference import references
from hetfl.testing import follow_reference, tiny_federation

FEDAVG = {"lr": 0.1, "local_steps": 2, "batch_size": 4, "clients_per_round": 2}
LOCAL = {"lr": 0.2, "local_steps": 2, "batch_size": 4}


def _changed(reference, at_round: int, change):
    """``reference`` with ``change(dict)`` applied to what it yields after round ``at_round``."""

    def rounds(fed, hp, seed, schedule, sampling):
        for t, expected in enumerate(reference(fed, hp, seed, schedule, sampling), start=1):
            if t == at_round:
                change(expected)
            yield expected

    return rounds


def test_tiny_federation_shapes():
    fed = tiny_federation("dnn", sizes=(5, 1, 8), sample_shape=(6,), classes=4, dtype=torch.float32, seed=2)
    assert fed.num_clients == 3 and fed.dtype == torch.float32
    assert fed.train.sizes.tolist() == [5, 1, 8] and fed.test.sizes.tolist() == [2, 1, 4]
    assert fed.train.x.shape == (14, 6) and fed.train.y.dtype == torch.long
    assert 0 <= int(fed.train.y.min()) and int(fed.train.y.max()) < 4
    assert fed.model.name == "dnn" and fed.model.hidden == (5,)
    again = tiny_federation("dnn", sizes=(5, 1, 8), sample_shape=(6,), classes=4, dtype=torch.float32, seed=2)
    assert torch.equal(fed.train.x, again.train.x)  # the data depend on the seed only
    assert tiny_federation("cnn", split="adapter").model.personal_keys()


def test_follow_reference_runs_the_rounds_and_returns_the_algorithm():
    fed = tiny_federation("mlr")
    before = get_algorithm("fedavg")(fed, get_algorithm("fedavg").Hyperparameters.from_dict(FEDAVG, "t"), 1)
    algorithm = follow_reference(fed, "fedavg", FEDAVG, references()["fedavg"], seed=1, rounds=2)
    assert type(algorithm).__name__ == "FedAvg"
    assert not torch.equal(algorithm.w["fc1.weight"], before.w["fc1.weight"])  # it trained


def test_follow_reference_accepts_parsed_options_and_refuses_bad_ones():
    hp = get_algorithm("local").Hyperparameters.from_dict(LOCAL, "t")
    follow_reference(tiny_federation(), "local", hp, references()["local"], rounds=1)
    with pytest.raises(ConfigError, match="lr"):
        follow_reference(tiny_federation(), "local", {**LOCAL, "lr": float("nan")}, references()["local"])
    with pytest.raises(ConfigError, match="unknown algorithm"):
        follow_reference(tiny_federation(), "no_such_algorithm", LOCAL, references()["local"])


def test_a_per_client_mismatch_names_round_model_client_and_parameter():
    def nudge(expected):
        expected["personal"][2]["fc1.bias"] = expected["personal"][2]["fc1.bias"] + 1e-6

    reference = _changed(references()["local"], 2, nudge)
    with pytest.raises(AssertionError, match=r"round 2, model 'personal', client 2, parameter 'fc1\.bias'"):
        follow_reference(tiny_federation(), "local", LOCAL, reference)


def test_a_shared_mismatch_names_round_model_and_parameter():
    def nudge(expected):
        expected["global"]["fc1.weight"] = expected["global"]["fc1.weight"] * 1.001

    with pytest.raises(AssertionError, match=r"^round 1, model 'global', parameter 'fc1\.weight': "):
        follow_reference(tiny_federation(), "fedavg", FEDAVG, _changed(references()["fedavg"], 1, nudge))


def test_differences_within_atol_pass_and_atol_is_absolute():
    def nudge(expected):
        expected["global"]["fc1.bias"] = expected["global"]["fc1.bias"] + 1e-12

    follow_reference(tiny_federation(), "fedavg", FEDAVG, _changed(references()["fedavg"], 3, nudge))
    with pytest.raises(AssertionError, match="round 3"):
        follow_reference(
            tiny_federation(), "fedavg", FEDAVG, _changed(references()["fedavg"], 3, nudge), atol=5e-13
        )


def test_what_the_batched_algorithm_lacks_is_an_error():
    def extra_parameter(expected):
        expected["global"]["fc9.weight"] = torch.zeros(1)

    with pytest.raises(AssertionError, match=r"round 1, model 'global', parameter 'fc9\.weight': not in"):
        follow_reference(
            tiny_federation(), "fedavg", FEDAVG, _changed(references()["fedavg"], 1, extra_parameter)
        )

    def one_client_missing(expected):
        expected["personal"].pop()

    with pytest.raises(
        AssertionError, match=r"round 2, model 'personal': the reference yields 3 client states"
    ):
        follow_reference(
            tiny_federation(), "local", LOCAL, _changed(references()["local"], 2, one_client_missing)
        )


def test_a_reference_that_stops_early_is_an_error():
    def two_rounds(fed, hp, seed, schedule, sampling):
        yield from list(references()["local"](fed, hp, seed, schedule, sampling))[:2]

    with pytest.raises(AssertionError, match="round 3: the reference stopped after 2 rounds"):
        follow_reference(tiny_federation(), "local", LOCAL, two_rounds, rounds=3)


def test_entries_that_are_not_models_need_a_check():
    def with_counter(fed, hp, seed, schedule, sampling):
        for t, expected in enumerate(references()["local"](fed, hp, seed, schedule, sampling), start=1):
            yield {**expected, "rounds_done": t}

    with pytest.raises(AssertionError, match=r"round 1: the reference yields \['rounds_done'\]"):
        follow_reference(tiny_federation(), "local", LOCAL, with_counter)
    seen = []

    def check(algorithm, expected, t):
        seen.append((t, expected["rounds_done"]))
        assert type(algorithm).__name__ == "Local"

    follow_reference(tiny_federation(), "local", LOCAL, with_counter, check=check, rounds=3)
    assert seen == [(1, 1), (2, 2), (3, 3)]


def test_configure_runs_before_the_schedule_is_drawn():
    shapes = []

    def configure(algorithm):  # S = 3 instead of 2: the schedule follows the configured algorithm
        algorithm.hp = dataclasses.replace(algorithm.hp, clients_per_round=3)

    def recording(fed, hp, seed, schedule, sampling):
        shapes.append(tuple(schedule.shape))
        yield from references()["fedavg"](fed, hp, seed, schedule, sampling)

    follow_reference(tiny_federation(), "fedavg", FEDAVG, recording, rounds=2, configure=configure)
    assert shapes == [(2, 3)]
