"""FedAvg with local fine-tuning (FedAvg+FT): the standard personalization baseline.

FedAvg trains the global model (McMahan et al. 2017); each client's personalized model is the current
global model fine-tuned on its own training data for ``finetune_steps`` SGD steps (Wang et al. 2019,
"Federated evaluation of on-device personalization"; the fair counterpart of Per-FedAvg's adaptation,
docs/papers/pfedme.md §2.6, and the "FedAvg + fine-tuning" row of partial-personalization tables).
``finetune: personal`` fine-tunes only the personal part of the model's split.

Client optimizer (config/README.md): FedAvg's training takes it as ``fedavg`` does (zero momentum each
round, the round's scheduled step size); the fine-tuning too, from zero momentum, at the constant step size
``finetune_lr`` (null: ``lr``, not scheduled: the schedule is the training rounds').
"""

from __future__ import annotations

import dataclasses
from typing import Literal

from hetfl.algorithms.adapting import AdaptsForEvaluation
from hetfl.algorithms.baselines.fedavg import FedAvg, FedAvgHyperparameters
from hetfl.engine.adapt import ClientModels, adapted_chunks
from hetfl.engine.memory import MemoryProfile
from hetfl.engine.optim import client_optimizer
from hetfl.engine.params import Params, all_finite, broadcast
from hetfl.engine.sampler import eval_sampler
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class FedAvgFTHyperparameters(FedAvgHyperparameters):
    """FedAvg's, plus ``finetune_steps``, ``finetune_lr`` (null: ``lr``), ``finetune`` (``all`` | ``personal``)."""

    finetune_steps: int = option(20, lo=0)
    finetune_lr: float | None = option(None, lo=0, lo_open=True)
    finetune: Literal["all", "personal"] = "all"


class FedAvgFT(AdaptsForEvaluation, FedAvg):
    """FedAvg training; personal models fine-tuned from the global one at evaluation."""

    name = "fedavg_ft"
    Hyperparameters = FedAvgFTHyperparameters

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.t = 0

    def memory_profile(self) -> MemoryProfile:
        """``AdaptsForEvaluation``'s, and with ``finetune: personal`` only the personal parameters' elements
        adapted (the evaluation's rows view the others: ``hetfl.engine.params.broadcast``)."""
        profile = super().memory_profile()
        if self.hp.finetune != "personal":
            return profile
        model = self.fed.model
        return dataclasses.replace(profile, adapted_elements=model.num_parameters(model.personal_keys()))

    def round(self, t, sampled) -> None:
        self.t = t
        super().round(t, sampled)

    def held_models(self) -> dict[str, Params]:
        """The global model, scored as it is."""
        return {"global": self.w}

    def adapt(self) -> ClientModels:
        """Each client's copy of the global model fine-tuned on its training data (``finetune_steps`` steps of
        the client optimizer from zero momentum, at the constant ``finetune_lr``; ``finetune: personal``: the
        personal parameters only, the others viewed, not copied)."""
        hp, fed = self.hp, self.fed
        keys = fed.model.personal_keys() if hp.finetune == "personal" else None
        fixed = [k for k in self.w if keys is not None and k not in keys]  # only read: views, no copies
        lr = hp.finetune_lr or hp.lr  # constant: the schedule is the training rounds'

        def chunks():
            sampler = eval_sampler(fed.train.sizes, hp.batch_size, self.seed, self.t, self.sampling)
            return adapted_chunks(
                fed,
                sampler,
                lambda s: broadcast(self.w, s.stop - s.start, views=fixed),
                [lr] * hp.finetune_steps,
                optimizer=lambda params: client_optimizer(
                    self.fed, self.hp, params, keys
                ),  # zero momentum: from w_t
            )

        return ClientModels(fed.num_clients, chunks, views=fixed)

    def finite(self) -> bool:
        return all_finite(self.w)


ALGORITHMS = {"fedavg_ft": FedAvgFT}
