"""pFedMe: Personalized Federated Learning with Moreau Envelopes.

Canh T. Dinh, Nguyen H. Tran, Tuan Dung Nguyen, NeurIPS 2020, Algorithm 1.
https://arxiv.org/abs/2006.08848 — official code https://github.com/CharlieDinh/pFedMe
(notes: docs/papers/pfedme.md §2.2 paper version, §2.3 official code).

Objective: min_w (1/N) Σ_i F_i(w), F_i(w) = min_θ f_i(θ) + λ/2 ‖θ − w‖² (Moreau envelope).
Round t (Algorithm 1):

    every client i: w_{i,0} = w_t
      for r = 0..R−1: sample a minibatch D_i
          θ̃_i ≈ argmin_θ f̃_i(θ; D_i) + λ/2‖θ − w_{i,r}‖²   (K gradient steps of size personal_lr, on D_i)
          w_{i,r+1} = w_{i,r} − η λ (w_{i,r} − θ̃_i)
    server samples S clients; w_{t+1} = (1 − β) w_t + β/S Σ_{i∈S} w_{i,R}

Models evaluated: ``global`` = w_t; ``personal`` = θ̃_i, the paper's personalized model (the last inner
solution of the round); ``local`` = w_{i,R}, what the official code actually evaluates as its
"personalized model" (docs/papers/pfedme.md §2.3, issue #5 of the official repo). Both are logged, labelled.

Paper vs official code, as named options (default = paper where the paper is explicit):

| option | default (paper) | official code |
|---|---|---|
| ``client_weights`` | ``uniform`` (β/S Σ) | ``samples`` (n_i-weighted) |
| ``inner_l2`` μ | 0 | 0.001 (a ridge term μθ inside the inner solver only) |
| ``inner_init`` | ``warm`` (θ carried across r, reset to w_t each round: the paper is silent, so the code's choice) | ``warm`` |
| ``train_clients`` | ``all`` (all N clients do the local rounds, both paper and code) | ``all`` |
| minibatches | the study's ``sampling`` (``epoch``: fresh shuffled batches) | ``sampling: sequential`` |

Implementation: with a model whose input layer is linear (MLR, DNN), the K inner steps carry the
product ``W x`` of that layer with the minibatch instead of recomputing it (``_inner_steps_carried``):
the same iterates up to rounding, fewer multiply-adds; ``carry_input_product`` forces either path.

``train_clients: sampled`` is an extension (only the S sampled clients train; the others keep their
last personal model): cheaper, not the paper.

Client optimizer (``momentum``, ``weight_decay``, ``clip_norm``, ``lr_schedule``: config/README.md): it
applies to the local update w_{i,r+1} = w_{i,r} − η λ (w_{i,r} − θ̃_i), taken as a gradient step of size η
(scheduled) along g_{i,r} = λ(w_{i,r} − θ̃_i), the gradient of the Moreau envelope F_i at w_{i,r} (the
supplement, A.4.1, names it the local gradient). It does not apply to the inner solver: Algorithm 1 asks
for θ̃_i(w_{i,r}), an approximate minimizer of h̃_i (the paper's (7)) to the accuracy of its (8), which
defines the gradient estimate rather than a step of the model; its K steps stay plain gradient steps of
constant size ``personal_lr`` (with λ and μ). Every client starts each round from w_t with zero momentum, the buffers
carried over its R local updates. The defaults are the paper's plain step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Literal

import torch
from torch import Tensor

from hetfl.algorithms.base import FederatedAlgorithm
from hetfl.algorithms.hyperparameters import Federated
from hetfl.engine.aggregation import aggregate
from hetfl.engine.chunks import row_chunks, stitch
from hetfl.engine.grad import chunks_through_steps, client_grads
from hetfl.engine.optim import ClientOptimizer, client_optimizer, scheduled_lr
from hetfl.engine.params import Params, broadcast, clone, lerp, select
from hetfl.engine.state import put
from hetfl.models.linalg import bmm
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class PFedMeHyperparameters(Federated):
    """pFedMe's hyper-parameters (official flag names in parentheses).

    ``lr`` η (--learning_rate), ``local_steps`` R (--local_epochs), ``batch_size`` |D|,
    ``clients_per_round`` S (--numusers), ``lam`` λ (--lamda), ``K`` inner steps, ``personal_lr``
    (--personal_learning_rate), ``beta`` β server mixing (β = 1: plain averaging), ``inner_l2`` μ,
    ``inner_init``, ``train_clients``, ``client_weights``, and the client optimizer of the local update.
    Defaults: the paper's MNIST setting.
    """

    lam: float = option(15.0, lo=0, lo_open=True)
    K: int = option(5, lo=0, lo_open=True)
    personal_lr: float = option(0.09, lo=0, lo_open=True)
    beta: float = option(1.0, lo=0, lo_open=True)
    inner_l2: float = option(0.0, lo=0)
    inner_init: Literal["warm", "local"] = "warm"
    train_clients: Literal["all", "sampled"] = "all"


class PFedMe(FederatedAlgorithm):
    """pFedMe. State: ``w [1, ...]`` (server), ``theta [N, ...]`` (θ̃_i), ``local [N, ...]`` (w_{i,R})."""

    name = "pfedme"
    Hyperparameters = PFedMeHyperparameters
    models = ("global", "personal", "local")

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.w = self.fed.initial_model(self.seed)
        idle = hp.train_clients != "all"  # [N, ...] stacks placed by fed.states (hetfl.engine.state)
        self.theta = fed.states.stack(self.w, fed.num_clients, idle)
        self.local = fed.states.stack(self.w, fed.num_clients, idle)
        self.carry_input_product: bool | None = None  # _inner_steps_carried: None where cheaper; True, False

    def _local_rounds(
        self, clients: Tensor, t: int, into: tuple[Params, Params] | None = None
    ) -> tuple[Params, Params]:
        """R local rounds of ``clients [C]`` from w_t in round ``t``.

        Without a row limit every client's rounds run in one stack. Under a memory budget (``hetfl.engine
        .memory``) the rounds' minibatches are drawn first, round by round (the same draws), and each chunk of
        clients then takes all R rounds before the next (``hetfl.engine.grad.chunks_through_steps``): only a
        chunk's models are stacked. Each client's numbers are the same either way.

        Args:
            into: per-client stacks ``(θ̃, w_{i,R})`` ``[N, ...]``: under a row limit each chunk's results go
                into their rows ``clients`` as the chunk ends (``hetfl.engine.state.put``, wherever the stacks
                are placed), so that no ``[C, ...]`` stack of the round is made (every client trains, ``train_
                clients: all``: the round then needs one chunk's models, not N); returned as given.

        Returns:
            (θ̃ [C, ...], w_{i,R} [C, ...]), or ``into`` when the chunks were written there.
        """
        parts = self._chunk_rounds(clients, t)
        if into is not None and row_chunks(self.fed.model, len(clients)) is not None:
            for s, theta, local in parts:
                put(into[0], clients[s], theta)
                put(into[1], clients[s], local)
            return into
        return stitch(((s, (theta, local)) for s, theta, local in parts), len(clients))

    def _chunk_rounds(self, clients: Tensor, t: int) -> Iterator[tuple[slice, Params, Params]]:
        """The R local rounds of each chunk of ``clients`` in turn (one chunk of all C without a row limit):
        yields ``(s, θ̃ [r, ...], w_{i,R} [r, ...])`` for the rows ``s`` as each chunk ends."""
        hp, rounds = self.hp, self.hp.local_steps
        lr = scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        steps = chunks_through_steps(self.fed, self.sampler, clients, [len(clients)] * rounds)
        for i, (s, batch) in enumerate(steps):  # every row works every round: R batches a chunk
            if i % rounds == 0:
                local = broadcast(self.w, s.stop - s.start)  # w_{i,0} = w_t
                theta = clone(local)
                opt = client_optimizer(self.fed, self.hp, local)  # zero momentum: every round starts from w_t
            if hp.inner_init == "local":
                theta = clone(local)
            # one D_i for all K inner steps
            if self._carry_input_product(batch):
                self._inner_steps_carried(theta, local, batch)
            else:
                self._inner_steps(theta, local, batch)
            self._local_update(opt, local, theta, lr)
            if i % rounds == rounds - 1:
                yield s, theta, local

    @torch.no_grad()
    def _local_update(self, opt: ClientOptimizer, local: Params, theta: Params, lr: float) -> None:
        """w_{i,r+1} = w_{i,r} − η λ (w_{i,r} − θ̃_i) (Algorithm 1's local update), in place on ``local
        [C, ...]``: a step of the client optimizer ``opt`` along g_{i,r} = λ(w_{i,r} − θ̃_i) (the supplement's
        local gradient, A.4.1), as lerp(w_{i,r}, θ̃_i, ηλ) when the optimizer is plain SGD."""
        if opt.plain:
            torch._foreach_lerp_(list(local.values()), list(theta.values()), lr * self.hp.lam)
            return
        grads = {k: (v - theta[k]).mul_(self.hp.lam) for k, v in local.items()}
        opt.step(local, grads, lr)

    def _step(self, theta: Params, local: Params, grads: Params, keys: list[str]) -> None:
        """One inner step on ``keys``: θ ← θ − plr (g + λ(θ − w_{i,r}) + μθ), as
        θ ← lerp(θ, w_{i,r}, plr·λ) − plr (g + μθ). ``grads`` is overwritten."""
        hp = self.hp
        thetas, g = [theta[k] for k in keys], [grads[k] for k in keys]
        with torch.no_grad():
            if hp.inner_l2:
                torch._foreach_add_(g, thetas, alpha=hp.inner_l2)
            torch._foreach_lerp_(thetas, [local[k] for k in keys], hp.personal_lr * hp.lam)
            torch._foreach_add_(thetas, g, alpha=-hp.personal_lr)

    def _inner_steps(self, theta: Params, local: Params, batch) -> None:
        """K gradient steps of the inner problem on one minibatch, in place on ``theta [C, ...]``."""
        for _ in range(self.hp.K):
            _, grads = client_grads(self.fed.model, theta, batch)
            self._step(theta, local, grads, list(theta))

    def _carry_input_product(self, batch) -> bool:
        """Whether carrying ``W x`` (:meth:`_inner_steps_carried`) costs fewer multiply-adds than the
        plain steps: 3·out·B + B² against 2K·out·B per input feature (or as ``carry_input_product`` says,
        where the model allows it)."""
        layer = self.fed.model.linear_input_layer()
        if layer is None or self.carry_input_product is not None:
            return layer is not None and bool(self.carry_input_product)
        out, size = self.w[f"{layer}.weight"].shape[1], batch.x.shape[1]
        return 3 * out * size + size * size < 2 * self.hp.K * out * size

    def _inner_steps_carried(self, theta: Params, local: Params, batch) -> None:
        """The same K steps as :meth:`_inner_steps` (same result up to rounding), carrying the product
        of the model's linear input layer ``W`` with the minibatch instead of forming it each step.

        With ``x [C, in, B]`` fixed over the K steps, ∇_W f̃ = δ xᵀ (δ = dL/d(Wx), ``[C, out, B]``) and
        W_{k+1} = c W_k + a w − plr δ_k xᵀ (c = 1 − plr(λ + μ), a = plr·λ, w = w_{i,r}'s W), so
        W_{k+1} x = c W_k x + a (w x) − plr δ_k (xᵀ x) and
        W_K = c^K W_0 + a (Σ_{j<K} c^j) w − plr (Σ_k c^{K−1−k} δ_k) xᵀ:
        four products with x (W_0 x, w x, xᵀx, the last one) instead of two per step.
        """
        hp, model = self.hp, self.fed.model
        key = f"{model.linear_input_layer()}.weight"
        rest = [k for k in theta if k != key]
        x = model.flat_input(batch.x)  # [C, in, B]
        mask = None if batch.full else batch.mask
        a = hp.personal_lr * hp.lam
        c = 1.0 - a - hp.personal_lr * hp.inner_l2
        with torch.no_grad():
            z = bmm(theta[key], x)  # W_k x, [C, out, B]
            awx = bmm(local[key], x).mul_(a)  # a·(w x)
            gram = bmm(x.transpose(1, 2), x)  # [C, B, B]
            deltas = torch.zeros_like(z)  # Σ_k c^{K−1−k} δ_k
            for _ in range(hp.K):
                _, grads, delta = model.loss_grads_preact(theta, z, batch.y, mask, need_loss=False)
                self._step(theta, local, grads, rest)
                z = torch.baddbmm(awx, delta, gram, alpha=-hp.personal_lr).add_(z, alpha=c)
                deltas = delta.add_(deltas, alpha=c)
            w = theta[key]
            w.mul_(c**hp.K).add_(local[key], alpha=a * sum(c**j for j in range(hp.K)))
            w.sub_(bmm(deltas, x.transpose(1, 2)), alpha=hp.personal_lr)

    def round(self, t: int, sampled: Tensor) -> None:
        if self.hp.train_clients == "all":
            clients = self.fed.all_clients()
            theta, local = self._local_rounds(clients, t, into=(self.theta, self.local))
            self.theta, self.local = (
                self.fed.states.keep(self.theta, theta),
                self.fed.states.keep(self.local, local),
            )
            uploaded = select(self.local, sampled, self.fed.device)
        else:
            theta, uploaded = self._local_rounds(sampled, t)
            put(self.theta, sampled, theta)
            put(self.local, sampled, uploaded)
        # w_{t+1} = (1 − β) w_t + β · (1/S) Σ_{i∈S} w_{i,R}
        self.w = lerp(self.w, aggregate(self.fed, self.hp, uploaded, sampled), self.hp.beta)

    def eval_models(self) -> dict[str, Params]:
        return {"global": self.w, "personal": self.theta, "local": self.local}


ALGORITHMS = {"pfedme": PFedMe}
