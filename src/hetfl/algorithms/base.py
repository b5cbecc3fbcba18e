"""The protocol every algorithm implements, on top of the batched engine.

An algorithm owns its state (stacked client parameters, the server model), and the runner
(``hetfl.engine.runner``) drives it: ``round(t, sampled)`` once per communication round, then
``eval_models()`` at evaluation rounds. Client work is batched over clients by the engine; an
algorithm never loops over clients in Python and does no I/O.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from torch import Tensor

from hetfl.algorithms.hyperparameters import Hyperparameters
from hetfl.engine.federation import Federation
from hetfl.engine.params import Params, average
from hetfl.engine.rng import generator
from hetfl.engine.sampler import BatchSampler


class Algorithm(ABC):
    """Base class.

    Class attributes:
        name: the config name (``algorithm: fedavg``).
        Hyperparameters: the dataclass of its hyper-parameters.
        models: the models it evaluates, e.g. ``("global", "personal")``; metric names are
            ``{train,test}_{loss,acc}_{model}`` (``hetfl.metrics``).

    Args:
        fed: the federation (data, model, device).
        hp: parsed hyper-parameters.
        seed: the run seed; streams ``init``, ``batches`` and ``algorithm`` derive from it.
        sampling: minibatch mode of ``BatchSampler`` (``epoch``, ``sequential``, ``replacement``).
    """

    name: ClassVar[str]
    Hyperparameters: ClassVar[type[Hyperparameters]]
    models: ClassVar[tuple[str, ...]]

    def __init__(self, fed: Federation, hp: Hyperparameters, seed: int, sampling: str = "epoch"):
        self.fed = fed
        self.hp = hp
        self.seed = seed
        self.rng = generator(seed, "algorithm")
        self.sampler = BatchSampler(
            fed.train.sizes, getattr(hp, "batch_size", 1), generator(seed, "batches"), sampling
        )

    def initial_model(self) -> Params:
        """The initial model w_0 ``[1, ...]`` on the federation's device (stream ``init``: the same for every run)."""
        init = self.fed.model.init(generator(self.seed, "init"), self.fed.dtype)
        return {k: v.to(self.fed.device) for k, v in init.items()}

    @property
    def clients_per_round(self) -> int:
        """S, the clients sampled per round (all N when the algorithm has no such hyper-parameter or it is null)."""
        s = getattr(self.hp, "clients_per_round", None)
        return self.fed.num_clients if s is None else s

    def aggregation_weights(self, sampled: Tensor) -> Tensor | None:
        """Weights of the sampled clients' models: None (uniform 1/S) or n_i / Σ_{j∈S} n_j (``client_weights``)."""
        if getattr(self.hp, "client_weights", "uniform") == "uniform":
            return None
        w = self.fed.train.sizes[sampled.cpu()].double()
        return w / w.sum()

    def aggregate(self, params: Params, sampled: Tensor) -> Params:
        """Server average ``[1, ...]`` of the sampled clients' models ``params [S, ...]``."""
        return average(params, self.aggregation_weights(sampled))

    @abstractmethod
    def round(self, t: int, sampled: Tensor) -> None:
        """Run communication round ``t`` (1-based); ``sampled: LongTensor[S]`` are the server's clients."""

    @abstractmethod
    def eval_models(self) -> dict[str, Params]:
        """Model name -> params ``[1, ...]`` (shared) or ``[N, ...]`` (one per client); aliases allowed."""

    def state_dict(self) -> dict[str, Tensor]:
        """Final state for ``final.pt``: ``{"<model>/<param>": tensor}`` for every evaluated model (on CPU)."""
        out: dict[str, Tensor] = {}
        for model, params in self.eval_models().items():
            for k, v in params.items():
                out[f"{model}/{k}"] = v.detach().cpu()
        return out
