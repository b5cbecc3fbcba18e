"""Algorithms whose evaluation adapts every client's model: Per-FedAvg (its personalization step), FedAvg+FT
(its fine-tuning) and the partial personalization of FFGG, FedAlt and FedSim (the personal part's
fine-tuning).

Their personalized models exist only to be scored: N models, recomputed for each evaluation. Without a row
limit they are one ``[N, ...]`` stack, cached for the round (:meth:`AdaptsForEvaluation.adapted`); under a
memory budget whose row limit splits the N clients the evaluation computes, scores and drops them a chunk of
clients at a time (``hetfl.engine.adapt``), so that they never stack; the same numbers either way.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import replace

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.engine.adapt import ClientModels
from hetfl.engine.chunks import row_chunks
from hetfl.engine.memory import MemoryProfile
from hetfl.engine.params import Params


class AdaptsForEvaluation(FederatedAlgorithm):
    """Base of the algorithms whose evaluation adapts every client's model (model ``personal``).

    Subclasses implement :meth:`adapt` and, where they hold models scored as they are (the global model),
    :meth:`held_models`, and keep ``t``, the last round.
    """

    t: int

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self._cache: tuple[int, Params] | None = None  # (t, the round's adapted stack)

    def held_models(self) -> dict[str, Params]:
        """The models held and scored as they are, before ``personal`` (none by default); the memory plan
        counts these (``hetfl.engine.memory.plan_memory``): computing the adapted ones to plan would adapt every
        client at once, before the run's row limit is set."""
        return {}

    def memory_profile(self) -> MemoryProfile:
        """FedAvg's round (``FederatedAlgorithm.memory_profile``), and every client's adapted model for each
        evaluation, counted per row of a call: all the model's elements unless a subclass adapts part of it,
        with momentum buffers where the adaptation has momentum (``momentum``: FFGG's and FedAvg+FT's
        fine-tuning through the client optimizer)."""
        momentum = float(getattr(self.hp, "momentum", 0.0) or 0.0) > 0
        return replace(
            super().memory_profile(),
            adapted_elements=self.fed.model.num_parameters(),
            adapted_copies=1 + momentum,
        )

    @abstractmethod
    def adapt(self) -> ClientModels:
        """Every client's adapted model at round ``t``: ``ClientModels`` (``hetfl.engine.adapt``), computed
        a chunk of clients at a time each time it is iterated."""

    def adapted(self) -> Params:
        """The adapted models in one stack ``[N, ...]`` (``ClientModels.stack``, placed by the federation's
        ``states`` where they come in chunks), cached for the round."""
        if self._cache is None or self._cache[0] != self.t:
            self._cache = (self.t, self.adapt().stack(lambda like: self.fed.states.zeros(like, record=False)))
        return self._cache[1]

    def eval_models(self) -> dict[str, Params]:
        """:meth:`held_models` and ``personal``: the adapted models (:meth:`adapted`)."""
        return {**self.held_models(), "personal": self.adapted()}

    def scored_models(self) -> dict[str, Params | ClientModels]:
        """:meth:`eval_models`, except that where the run's row limit splits the N clients (and the round's
        models are not cached) the adapted ones are ``ClientModels``, scored a chunk at a time, never stacked."""
        cached = self._cache is not None and self._cache[0] == self.t
        if cached or row_chunks(self.fed.model, self.fed.num_clients) is None:
            return self.eval_models()
        return {**self.held_models(), "personal": self.adapt()}


__all__ = ["AdaptsForEvaluation"]
