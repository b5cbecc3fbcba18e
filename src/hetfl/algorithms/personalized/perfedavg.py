"""Per-FedAvg: personalized FedAvg by model-agnostic meta-learning.

Fallah, Mokhtari, Ozdaglar, "Personalized Federated Learning with Theoretical Guarantees: A
Model-Agnostic Meta-Learning Approach", NeurIPS 2020, Algorithm 1 (FO and HF variants); as run in the
pFedMe paper's comparisons (docs/papers/pfedme.md §2.5). Each sampled client runs τ local steps:

    FO:  w' = w − α ∇f(w; D);   g = ∇f(w'; D');   w ← w − β g
    HF:  as FO, with h = [∇f(w + δg; D'') − ∇f(w − δg; D'')] / (2δ) ≈ ∇²f(w; D'') g and w ← w − β (g − α h)

and the server averages the clients' models. The personalized model of a client is the global model
after one α-step on one of its training minibatches (``adaptation: train``, the paper's definition).

Official code differences, as named options:

- ``step: sequential``: the training step of the official pFedMe code at the time of the pFedMe paper
  (``userperavg.py`` before its PR #9): two plain SGD steps, α on D then β on D', without restoring w.
  **The pFedMe paper's Per-FedAvg numbers were produced with this form, so its β̂ (0.001 to 0.003,
  Table 1) belongs to it**; the pFedMe studies use ``step: sequential``. ``maml`` (the default) is the
  Per-FedAvg paper's update, where β is the only step on the global model: it must be tuned for that
  form (a β taken from the pFedMe paper is 5 to 30 times smaller than FedAvg's learning rate, and the
  run is still climbing after 800 rounds), not copied.
- ``adaptation: official``: the evaluation of the official pFedMe code (``train_one_step``): from w_t,
  one α-step on a *test* batch, then a β-step on the next test batch, of a test-batch iterator that
  persists across rounds (the evaluation of round t takes the client's test batches 2t and 2t + 1, in
  stored order, cycling; :func:`~hetfl.engine.sampler.cycling_sampler`). **It personalizes on the
  data it then tests on** (issue #19 of CharlieDinh/pFedMe: a data leak; on the MNIST stand-in, MLR, the
  pFedMe paper's same-hyper-parameter setting, it adds 0.5 point to the best test accuracy over 800
  rounds, 90.83 vs 90.30 %, 3 seeds): it is there to compare with the official numbers only.
  ``train`` (default) adapts on training data, the Per-FedAvg paper's definition.
- ``client_weights: samples``: the official n_i-weighted average (default uniform 1/S).

Client optimizer (``momentum``, ``weight_decay``, ``clip_norm``, ``lr_schedule``: config/README.md): it
takes the steps that move the client's model. With ``step: maml`` that is the β-step w ← w − β g (g the FO
or HF meta-gradient; β scheduled); the α-step w' = w − α∇f(w; D) is part of the meta-gradient (it defines
the objective f(w − α∇f(w))), so it stays a plain step of constant size α. With ``step: sequential`` both
steps move the model: both go through the optimizer (one momentum buffer), α and β both scheduled. Clients
start each round from w_t with zero momentum. The evaluation's adaptation (α-steps from w_t, the
personalized model's definition; and ``official``'s α- and β-steps) stays plain SGD at the constant α, β.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.adapting import AdaptsForEvaluation
from hetfl.algorithms.hyperparameters import Aggregation, Federated
from hetfl.engine.adapt import ClientModels, adapted_chunks
from hetfl.engine.aggregation import aggregation_weights, client_sum, sequential
from hetfl.engine.federation import Batch
from hetfl.engine.grad import client_grads, numbered_steps, step_chunks
from hetfl.engine.memory import MemoryProfile
from hetfl.engine.optim import ClientOptimizer, client_optimizer, scheduled_lr
from hetfl.engine.params import Params, broadcast, rows
from hetfl.engine.sampler import cycling_sampler, eval_sampler
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class PerFedAvgHyperparameters(Federated, Aggregation):
    """``lr`` α, the inner (personalization) step (official --learning_rate); ``beta`` β, the meta step;
    ``variant`` (``fo`` | ``hf``), ``hf_delta`` δ, ``step`` (``maml`` | ``sequential``), ``adaptation``
    (``train`` | ``official``), ``adaptation_steps`` (α-steps of the ``train`` adaptation), the client
    optimizer of the model's steps, and ``aggregation`` (``batched`` | ``sequential``, the order of the
    server's mean: ``hetfl.engine.aggregation``)."""

    beta: float = option(0.001, lo=0, lo_open=True)
    variant: Literal["fo", "hf"] = "fo"
    hf_delta: float = option(0.001, lo=0, lo_open=True)
    step: Literal["maml", "sequential"] = "maml"
    adaptation: Literal["train", "official"] = "train"
    adaptation_steps: int = option(1, lo=0, lo_open=True)

    def step_sizes(self) -> tuple[str, ...]:
        """The steps the schedule scales: β (``maml``; α is part of the meta-objective), or α and β
        (``sequential``)."""
        return ("beta",) if self.step == "maml" else ("lr", "beta")


def _shifted(params: Params, direction: Params, scale: float) -> Params:
    return {k: v + scale * direction[k] for k, v in params.items()}


class PerFedAvg(AdaptsForEvaluation):
    """Per-FedAvg. State: the global model ``w [1, ...]``."""

    name = "perfedavg"
    Hyperparameters = PerFedAvgHyperparameters
    models = ("global", "personal")

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.w = self.fed.initial_model(self.seed)
        self.t = 0

    def memory_profile(self) -> MemoryProfile:
        """τ steps of :attr:`picks` minibatches a round; one copy of each adapted model: the evaluation's
        adaptation takes plain steps (no optimizer, no momentum buffers)."""
        profile = super().memory_profile()
        return dataclasses.replace(profile, drawn_steps=self.hp.local_steps * self.picks, adapted_copies=1)

    def _grad(self, params: Params, batch: Batch) -> Params:
        return client_grads(self.fed.model, params, batch)[1]

    def _descend(self, opt: ClientOptimizer, local: Params, grads: Params, lr: float, s: slice) -> Params:
        """w ← w − lr·g for the rows ``s`` of the clients (``local``: views of them): a step of the client
        optimizer ``opt`` (in place), or, when it is plain SGD, w + (−lr)·g as a new dict (the arithmetic of the
        plain algorithm, to the bit)."""
        return _shifted(local, grads, -lr) if opt.plain else opt.step(local, grads, lr, s)

    def _step_rows(
        self, local: Params, batches: list[Batch], opt: ClientOptimizer, t: int, s: slice
    ) -> Params:
        """The local step of the rows ``s`` (``local``: views of them) on their minibatches D, D' (, D'')."""
        hp = self.hp
        if hp.step == "sequential":  # the paper-time official code: two SGD steps, no restore
            local = self._descend(
                opt,
                local,
                self._grad(local, batches[0]),
                scheduled_lr(self.hp.lr, t, self.hp, self.rounds),
                s,
            )
            return self._descend(
                opt, local, self._grad(local, batches[1]), scheduled_lr(hp.beta, t, self.hp, self.rounds), s
            )
        temp = _shifted(local, self._grad(local, batches[0]), -hp.lr)  # w' = w − α ∇f(w; D)
        g = self._grad(temp, batches[1])  # g = ∇f(w'; D')
        if hp.variant == "hf":  # Hessian-vector product by central differences on D''
            plus = self._grad(_shifted(local, g, hp.hf_delta), batches[2])
            minus = self._grad(_shifted(local, g, -hp.hf_delta), batches[2])
            g = {k: g[k] - hp.lr * (plus[k] - minus[k]) / (2 * hp.hf_delta) for k in g}
        return self._descend(opt, local, g, scheduled_lr(hp.beta, t, self.hp, self.rounds), s)  # w ← w − β g

    def round(self, t: int, sampled: Tensor) -> None:
        self.t = t
        mean = client_sum(self.hp, sampled, aggregation_weights(self.fed, self.hp, sampled))
        for s, local in self._local_chunks(sampled, t):
            mean.add(s, local)
        self.w = mean.result()  # the server averages the clients' models (Algorithm 1, line 11)

    def _local_chunks(self, sampled: Tensor, t: int) -> Iterator[tuple[slice, Params]]:
        """The τ local steps of every sampled client (Per-FedAvg, Algorithm 1, lines 6-9) in round ``t``, from
        w_t with zero momentum: yields ``(s, local [r, ...])``, the models of the clients ``sampled[s]``.
        Every step's minibatches D, D' (and D'') are drawn for all the clients, in that order (step by step
        without a row limit, all first under one), then gathered and used a chunk of clients at a time
        (``hetfl.engine.grad.step_chunks``: the same draws and numbers). ``aggregation: batched``: one chunk,
        the S clients' ``[S, ...]`` stack, each row chunk through all its steps inside it; ``sequential``:
        each row chunk started, stepped and handed over before the next (one chunk's models resident)."""
        working = [len(sampled)] * self.hp.local_steps
        whole = not sequential(self.hp)
        for chunk, steps in step_chunks(
            self.fed, self.sampler, sampled, working, picks=self.picks, whole=whole
        ):
            local = broadcast(self.w, chunk.stop - chunk.start)
            opt = client_optimizer(self.fed, self.hp, local)  # stateless clients: zero momentum each round
            for _, r, batches in numbered_steps(chunk, steps):  # r: rows within the chunk's models
                if r.stop - r.start == chunk.stop - chunk.start:  # every row of the chunk: no copy
                    local = self._step_rows(local, list(batches), opt, t, r)
                    continue
                for k, v in self._step_rows(rows(local, r), list(batches), opt, t, r).items():
                    local[k][r] = v  # a no-op where the optimizer stepped the views in place
            yield chunk, local

    @property
    def picks(self) -> int:
        """Minibatches a local step draws per client: D and D', and D'' with the HF variant."""
        return 3 if self.hp.step == "maml" and self.hp.variant == "hf" else 2

    def held_models(self) -> dict[str, Params]:
        """The global model, scored as it is."""
        return {"global": self.w}

    def adapt(self) -> ClientModels:
        """Each client's adaptation of the global model (``adaptation``): ``adaptation_steps`` α-steps on its
        training minibatches, or ``official``'s α-step then β-step on test batches 2t and 2t + 1."""
        hp, fed = self.hp, self.fed
        start = lambda s: broadcast(self.w, s.stop - s.start)  # noqa: E731

        def chunks():
            if hp.adaptation == "train":
                sampler = eval_sampler(fed.train.sizes, hp.batch_size, self.seed, self.t, self.sampling)
                return adapted_chunks(fed, sampler, start, [hp.lr] * hp.adaptation_steps)
            sampler = cycling_sampler(fed.test.sizes, hp.batch_size, 2 * self.t)  # leaks test data
            return adapted_chunks(fed, sampler, start, [hp.lr, hp.beta], split="test")

        return ClientModels(fed.num_clients, chunks)

    def finite(self) -> bool:
        return bool(torch.stack([torch.isfinite(v).all() for v in self.w.values()]).all())


ALGORITHMS = {"perfedavg": PerFedAvg}
