"""Test helpers for whoever adds an algorithm: a tiny federation, and a round-by-round comparison of a
batched algorithm with its sequential per-client reference loop.

Every algorithm that trains on client data is tested against a plain reference written apart from it
(``hetfl.reference``: a Python loop over clients, one ``nn.Module`` each). With these helpers the test of
an algorithm is a few lines (``docs/guides/adding-an-algorithm.md`` builds a complete example)::

    from hetfl.reference.fedavg import fedavg
    from hetfl.testing import follow_reference, tiny_federation

    def test_fedavg_matches_its_reference():
        hp = {"lr": 0.1, "local_steps": 2, "batch_size": 4, "clients_per_round": 2}
        follow_reference(tiny_federation("dnn"), "fedavg", hp, fedavg, sampling="sequential", seed=3)

The helpers need no pytest: a mismatch raises ``AssertionError``, which any test runner reports.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from hetfl.algorithms import FEDERATION, get_algorithm
from hetfl.engine.federation import ClientSplit, Federation
from hetfl.engine.participation import participation_schedule
from hetfl.models import build_model, normalize_model_spec
from hetfl.options import Options

if TYPE_CHECKING:  # not imported at run time: conftest.py imports this module for every test
    from hetfl.algorithms.base import FederatedAlgorithm

__all__ = ["Reference", "follow_reference", "tiny_federation"]

State = dict[str, Tensor]
Reference = Callable[[Federation, Options, int, Tensor, str], Iterator[Mapping[str, Any]]]
"""A sequential reference: ``reference(fed, hp, seed, schedule, sampling)``, a generator that yields after
every round ``{model name: state}``, where a state is one shared model's ``{parameter: Tensor[...]}`` or a
list of N per-client ones (``hetfl.reference.fedavg`` is an example)."""


def tiny_federation(
    model: str = "mlr",
    sizes: tuple[int, ...] = (7, 12, 3, 9),
    sample_shape: tuple[int, ...] = (1, 4, 4),
    classes: int = 3,
    dtype: torch.dtype = torch.float64,
    seed: int = 0,
    split: str = "none",
    device: torch.device | str = "cpu",
    model_options: dict | None = None,
) -> Federation:
    """A federation of a few clients with unequal sizes, random inputs and random labels, on ``device``.

    The default has 4 clients with 7, 12, 3 and 9 training samples (one smaller than a minibatch of 4,
    so padded batches are exercised) and half as many test samples (at least one), 1×4×4 "images" and
    3 classes, in float64 so that a batched algorithm and its reference agree to about 1e-12.

    Args:
        model: a model config name: ``mlr``, ``dnn`` (hidden width 5), ``cnn`` (channels [2, 3], hidden
            width 4; needs image samples ``(channels, H, W)`` with H, W ≥ 4), or any other registered
            model with its default options.
        sizes: training samples per client (N = ``len(sizes)`` clients, each ≥ 1).
        sample_shape: shape of one sample, e.g. ``(1, 4, 4)`` or ``(6,)``.
        classes: number of classes K; labels are drawn uniformly from 0..K-1.
        dtype: the federation's float dtype (data and models).
        seed: NumPy seed of the data (not of the models: algorithms draw those from their run seed).
        split: the model's personalization split (``none``, ``input``, ``output``, ``adapter`` with rank 2).
        device: where the data (and so the algorithms' models) live: ``cpu`` (the default) or ``cuda``; the
            data are drawn on the CPU, so a CUDA federation holds the same numbers.
        model_options: further options of the model (e.g. ``{"adapter_kind": "residual"}`` for the CNN).

    Returns:
        the ``Federation``: ``train.x [Σ sizes, *sample_shape]``, ``train.y [Σ sizes]`` (long), ``test``
        likewise, ``cluster`` all 0 (assign ``fed.cluster = torch.tensor([...])`` for clustered algorithms).

    Raises:
        ConfigError: unknown model or split.
        ValueError: the model cannot take ``sample_shape``; a client size below 1.
    """
    rng = np.random.default_rng(seed)

    def client_split(scale: float) -> ClientSplit:
        xs = [rng.normal(size=(max(1, int(n * scale)), *sample_shape)).astype(np.float32) for n in sizes]
        ys = [rng.integers(0, classes, size=len(x)) for x in xs]
        return ClientSplit(xs, ys, torch.device(device), dtype)

    extra = {"hidden": 5} if model == "dnn" else {"channels": [2, 3], "hidden": 4} if model == "cnn" else {}
    options = {"name": model, "split": split, "adapter_rank": 2, **extra, **(model_options or {})}
    spec = normalize_model_spec(options, "model")
    return Federation(client_split(1.0), client_split(0.5), build_model(spec, sample_shape, classes))


def _assert_states_equal(
    batched: Mapping[str, Tensor], expected: State, atol: float, where: str, row: int
) -> None:
    """``batched[k][row]`` (row 0 of a shared ``[1, ...]`` model) equals ``expected[k]`` within ``atol``, for
    every parameter of ``expected``; ``where`` starts the error message."""
    for k, v in expected.items():
        if k not in batched:
            raise AssertionError(f"{where}, parameter {k!r}: not in the batched model {sorted(batched)}")
        rows = batched[k].shape[0]
        if row >= rows and rows != 1:
            raise AssertionError(f"{where}, parameter {k!r}: the batched model has {rows} rows")
        try:
            torch.testing.assert_close(batched[k][row if rows > 1 else 0], v, atol=atol, rtol=0)
        except AssertionError as err:
            raise AssertionError(f"{where}, parameter {k!r}: {err}") from None


def follow_reference(
    fed: Federation,
    algorithm: str,
    hyperparameters: Mapping[str, Any] | Options,
    reference: Reference,
    *,
    sampling: str = "epoch",
    seed: int = 0,
    rounds: int = 3,
    atol: float = 1e-10,
    configure: Callable[[FederatedAlgorithm], None] | None = None,
    check: Callable[[FederatedAlgorithm, Mapping[str, Any], int], None] | None = None,
) -> FederatedAlgorithm:
    """Run a batched algorithm and its sequential reference side by side; after every round, every model
    the reference yields must equal the batched one.

    The batched algorithm is built by its config name for client data, as a training job builds it
    (``cls(fed, hp, seed, sampling)``, its ``rounds`` set to ``rounds``), and both run on the same
    participation schedule (the one a training job draws from ``seed``: ``participation_schedule(N, S,
    rounds, seed)``). They share the data, the initial model and the minibatch positions through ``fed``
    and ``seed``; nothing else.

    Args:
        fed: the federation both run on (e.g. :func:`tiny_federation`); its dtype sets the precision.
        algorithm: the algorithm's config name (``ALGORITHMS = {"<name>": cls}`` of its module).
        hyperparameters: config values, parsed and validated by the class's ``Hyperparameters.from_dict``
            (as a run's, so a bad value raises ``ConfigError``), or an already parsed ``Options``.
        reference: ``reference(fed, hp, seed, schedule, sampling)`` with ``hp`` the parsed options and
            ``schedule: LongTensor[rounds, S]``; a generator yielding after every round a dict
            ``model name -> state``: one shared model's ``{parameter: Tensor[...]}``, compared with row 0
            of the batched ``eval_models()[name][parameter]`` (``[1, ...]``), or a list of N per-client
            states, compared client by client with rows 0..N-1 (``[N, ...]``; a shared ``[1, ...]`` batched
            model is compared with every client's). It may yield any subset of the models and parameters.
        sampling: the minibatch mode (``epoch``, ``sequential``, ``replacement``; ``hetfl.engine.sampler``).
        seed: the run seed (streams of initialization, participation, minibatches, the algorithm's noise).
        rounds: communication rounds to compare.
        atol: absolute tolerance of every comparison (no relative tolerance): about 1e-10 in float64,
            1e-5 in float32.
        configure: called with the batched algorithm once it is built, before the schedule is drawn
            (e.g. to switch an internal option a test wants to cover).
        check: called after every round's comparison with ``(algorithm, reference's dict, round t)``, for
            the dict's entries that are not models of ``eval_models()`` (e.g. collaboration weights);
            it raises ``AssertionError`` on a mismatch. Without it such an entry is an error.

    Returns:
        the batched algorithm after the last round (for further assertions).

    Raises:
        AssertionError: a round where the reference yields nothing, a model or parameter the batched
            algorithm lacks, a per-client list of the wrong length, or a parameter outside ``atol`` (or
            of another shape or dtype): the message names the round, the model, the client (for
            per-client models) and the parameter, then ``torch.testing.assert_close``'s detail.
        ConfigError: unknown algorithm or bad hyper-parameters.
    """
    cls = get_algorithm(algorithm, environment=FEDERATION)
    hp = (
        hyperparameters
        if isinstance(hyperparameters, Options)
        else cls.Hyperparameters.from_dict(dict(hyperparameters), "test")
    )
    alg = cls(fed, hp, seed, sampling)
    alg.rounds = (
        rounds  # the run's T, as hetfl.pipeline.train.build sets it (the reference has len(schedule))
    )
    if configure is not None:
        configure(alg)
    schedule = participation_schedule(fed.num_clients, alg.clients_per_round, rounds, seed)
    expected_rounds = iter(reference(fed, hp, seed, schedule, sampling))
    for t in range(1, rounds + 1):
        alg.round(t, schedule[t - 1])
        try:
            expected = next(expected_rounds)
        except StopIteration:
            raise AssertionError(f"round {t}: the reference stopped after {t - 1} rounds") from None
        _compare_round(alg, expected, t, algorithm, fed.num_clients, atol, check is not None)
        if check is not None:
            check(alg, expected, t)
    return alg


def _compare_round(
    alg: FederatedAlgorithm,
    expected: Mapping[str, Any],
    t: int,
    algorithm: str,
    num_clients: int,
    atol: float,
    checked: bool,
) -> None:
    """Compare the models the reference yields after round ``t`` with the batched ones (see
    :func:`follow_reference`); entries that are not models of ``eval_models()`` are an error unless
    ``checked`` (a ``check`` compares them)."""
    models = alg.eval_models()
    others = [name for name in expected if name not in models]
    if others and not checked:
        raise AssertionError(
            f"round {t}: the reference yields {others}, not models of {algorithm}'s eval_models() "
            f"{sorted(models)}; compare them with check="
        )
    for name, states in expected.items():
        if name not in models:
            continue
        if isinstance(states, Mapping):  # one shared model
            _assert_states_equal(models[name], states, atol, f"round {t}, model {name!r}", 0)
            continue
        if len(states) != num_clients:
            raise AssertionError(
                f"round {t}, model {name!r}: the reference yields {len(states)} client states, "
                f"the federation has {num_clients} clients"
            )
        for i, state in enumerate(states):
            _assert_states_equal(models[name], state, atol, f"round {t}, model {name!r}, client {i}", i)
