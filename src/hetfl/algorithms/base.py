"""The protocol every algorithm implements, and its version for algorithms that train on client data.

The runner (``hetfl.engine.runner``) drives an algorithm: ``round(t, sampled)`` once per communication
round, ``evaluate()`` at evaluation rounds, ``finite()`` after every round. An algorithm never loops
over clients in Python (its environment batches them) and does no I/O: it returns values.

An algorithm runs on one kind of environment, its ``inputs``: ``"federation"`` (client data from a
dataset and a partition, ``hetfl.engine.federation.Federation``) or the name of a generated problem
(``hetfl.problems``, e.g. quadratic games). The config rejects a run whose algorithm does not fit its
study's environment.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np
from torch import Tensor

from hetfl.engine.aggregation import sequential
from hetfl.engine.evaluate import Evaluator
from hetfl.engine.federation import Federation
from hetfl.engine.memory import MemoryProfile
from hetfl.engine.params import Params, all_finite, shared_rows
from hetfl.engine.rng import generator
from hetfl.engine.sampler import BatchSampler
from hetfl.metrics import evaluate_models, metric_names
from hetfl.options import Options

Rows = list[tuple[str, float]]
ClientRows = list[tuple[int, str, float]]


class Algorithm(ABC):
    """Base of every algorithm.

    Class attributes:
        name: the config name (``algorithm: fedavg``).
        Hyperparameters: the dataclass of its hyper-parameters (``hetfl.options.Options``).
        inputs: ``"federation"`` or the name of the problem it runs on.

    Args:
        env: its environment (a ``Federation``, or a problem of ``hetfl.problems``); must have ``num_clients``.
        hp: parsed hyper-parameters.
        seed: the run seed; the stream ``algorithm`` (``self.rng``) is for the algorithm's own randomness.
        sampling: minibatch mode (``hetfl.engine.sampler.MODES``), for algorithms that sample data.
    """

    name: ClassVar[str]
    Hyperparameters: ClassVar[type[Options]]
    inputs: ClassVar[str] = "federation"
    rounds: int | None = None
    """T, the run's number of rounds: set by ``hetfl.pipeline.train.build`` (and ``hetfl.testing.follow_reference``)
    once the algorithm is built, for what depends on it (the cosine learning-rate schedule); None when the
    algorithm was built without a run (then a schedule that needs T raises)."""

    def __init__(self, env: Any, hp: Options, seed: int, sampling: str = "epoch"):
        self.env = env
        self.hp = hp
        self.seed = seed
        self.sampling = sampling
        self.rng = generator(seed, "algorithm")

    @property
    def clients_per_round(self) -> int:
        """S, the clients sampled per round (all N when the algorithm has no such hyper-parameter or it is null)."""
        s = getattr(self.hp, "clients_per_round", None)
        return self.env.num_clients if s is None else s

    @classmethod
    def check(cls, hp: Options, settings: dict[str, Any], key: str) -> None:
        """Checks across hyper-parameters and run settings (e.g. the model's split), at config time.

        Nothing to check by default.

        Raises:
            ConfigError: naming the key.
        """
        return None

    @classmethod
    @abstractmethod
    def metric_names(cls, hp: Options | None = None) -> list[str]:
        """Every metric name ``evaluate`` may report for a run of hyper-parameters ``hp`` (None: for any run),
        validated against figures and claims; a study's default summary columns come from them, so a name
        listed for ``hp`` must be one its runs report.

        On a regression dataset the accuracy metrics (``*_acc_*``) are dropped by the config.
        """

    @abstractmethod
    def round(self, t: int, sampled: Tensor) -> None:
        """Run communication round ``t`` (1-based); ``sampled: LongTensor[S]`` are the server's clients."""

    @abstractmethod
    def evaluate(self) -> tuple[Rows, ClientRows]:
        """Metrics now: ``[(metric, value)]`` and per client ``[(client, metric, value)]``.

        A metric whose name contains ``loss`` and is not finite marks the run as diverged.
        """

    @abstractmethod
    def finite(self) -> bool:
        """False once the state holds NaN/inf (checked after every round)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Tensor]:
        """The final state for ``final.pt`` (CPU tensors)."""

    def artifacts(self) -> dict[str, np.ndarray]:
        """Arrays recorded during training, saved to the run's ``artifacts.npz`` (e.g. All-for-one's
        N×N collaboration weights over time); none by default."""
        return {}


class FederatedAlgorithm(Algorithm):
    """An algorithm that trains models on client data (a ``Federation``).

    Class attributes:
        models: the models it evaluates, e.g. ``("global", "personal")``; metric names are
            ``{train,test}_{loss,acc}_{model}`` (``hetfl.metrics``).

    The minibatch sampler (stream ``batches``) and the initial model (stream ``init``:
    ``self.fed.initial_model(self.seed)``) derive from the seed. What a round needs beside its state is the
    engine's, called with the federation and the hyper-parameters: the client optimizer
    (``hetfl.engine.optim.client_optimizer``, ``scheduled_lr``), the server's average
    (``hetfl.engine.aggregation.aggregate``, ``aggregation_weights``, ``client_sum``), the server optimizer
    (``hetfl.engine.server.ServerOptimizer``, kept as an attribute) and the evaluator (``self.evaluator``).
    """

    models: ClassVar[tuple[str, ...]]
    evaluate_needs: ClassVar[tuple[str, ...]] = ()
    """Models the algorithm's own metrics are computed from: a run's ``eval_models`` must keep them."""
    evaluated: tuple[str, ...] | None = None
    """The models ``evaluate`` scores (the run setting ``eval_models``, set by ``hetfl.pipeline.train.build``): a
    subset of ``models``; None: all of them. ``state_dict`` and ``finite`` always cover every model."""

    def __init__(self, fed: Federation, hp: Options, seed: int, sampling: str = "epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.fed = fed
        self.sampler = BatchSampler(
            fed.train.sizes, getattr(hp, "batch_size", 1), generator(seed, "batches"), sampling
        )
        self.evaluator = Evaluator(fed)
        """Scores models on the federation's splits (``hetfl.engine.evaluate.Evaluator``): :meth:`evaluate`'s,
        and an algorithm's own (q-FedAvg's F_k(w_t): ``self.evaluator.client_scores(w, sampled)``)."""

    @classmethod
    def metric_names(cls, hp: Options | None = None) -> list[str]:
        return metric_names(cls.models)

    @classmethod
    def check_model(cls, model, key: str) -> None:
        """Checks that need the built model (e.g. that its split leaves a global part), at config time.

        Nothing to check by default.

        Raises:
            ConfigError: naming the key.
        """
        return None

    def memory_profile(self) -> MemoryProfile:
        """What the algorithm holds beside the tensors it keeps, for the memory plan
        (``hetfl.engine.memory.MemoryProfile``; ``plan_memory`` measures the kept tensors): FedAvg's round,
        in the run's ``aggregation`` order, ``local_steps`` minibatches a client. An algorithm that holds more
        returns ``dataclasses.replace(super().memory_profile(), ...)``."""
        return MemoryProfile(
            sequential=sequential(self.hp), drawn_steps=int(getattr(self.hp, "local_steps", 1) or 1)
        )

    @abstractmethod
    def eval_models(self) -> dict[str, Params]:
        """Model name -> params ``[1, ...]`` (shared) or ``[N, ...]`` (one per client); aliases allowed."""

    def scored_models(self) -> dict:
        """The models :meth:`evaluate` scores: :meth:`eval_models` (``hetfl.algorithms.adapting``: per-client
        models computed a chunk of clients at a time under a row limit)."""
        return self.eval_models()

    def evaluate(self) -> tuple[Rows, ClientRows]:
        """Every model of :meth:`scored_models` (those of ``evaluated`` when set) on both splits of every
        client (``hetfl.metrics.evaluate_models``)."""
        models = self.scored_models()
        if self.evaluated is not None:
            models = {name: params for name, params in models.items() if name in self.evaluated}
        return evaluate_models(self.evaluator, models)

    def finite(self) -> bool:
        return all(all_finite(p) for p in self.eval_models().values())

    def state_dict(self) -> dict[str, Tensor]:
        """``{"<model>/<param>": tensor}`` for every evaluated model (on CPU)."""
        out: dict[str, Tensor] = {}
        for model, params in self.eval_models().items():
            for k, v in params.items():
                if shared_rows(v):  # a row viewed N times: N rows, placed (a memory-mapped file if large)
                    v = self.fed.states.stack({k: v[:1]}, len(v), record=False)[k]
                out[f"{model}/{k}"] = v.detach().cpu().contiguous()
        return out


__all__ = ["Algorithm", "ClientRows", "FederatedAlgorithm", "Rows"]
