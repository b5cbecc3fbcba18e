"""WGA-BC: weighted gradient averaging with bias correction.

Chayti, Karimireddy, Stich, Flammarion, Jaggi, "Linear Speedup in Personalized Collaborative Learning", 2021
(https://arxiv.org/abs/2111.05968), the bias-correction method, as a baseline of Philippenko et al.,
arXiv:2507.06844, 2025 (docs/papers/all_for_one.md §2.9.6; no code of it was seen, so the choices below are
this project's). Every iteration, client i receives from every client k a stochastic gradient at θ_i on k's
data (the N² gradients of All-for-one) and steps with

    d_i   = Σ_{k≠i} w (g_k(θ_i) − g_i(θ_i))                   (the observed gradient differences, weighted)
    θ_i  ← θ_i − η (g_i(θ_i) + d_i − c_i)                       (pseudo-gradient, bias-corrected)
    c_i  ← (1 − β) c_i + β d_i                                  (bias estimate from past differences)

where c_i = Σ_{k≠i} w c_ik, c_ik the exponential moving average of g_k(θ_i) − g_i(θ_i) (linear, so only the
weighted sum is kept); the step uses the estimate from past iterations ("uses the past observed gradients"),
then updates it. g_i(θ_i) is computed on the same batch in both places. Defaults: uniform w = 1/N
(``weight``; null), EMA rate β = 0.1 (``beta``). The pseudo-gradient is the gradient of a step of the
client optimizer (config/README.md; its buffers kept across rounds).

Its collaboration matrix (recorded once): α_ii = 1 − (N − 1) w, α_ik = w, the weights of the gradients
in the pseudo-gradient before bias correction.
"""

from __future__ import annotations

import dataclasses

import torch

from hetfl.algorithms.collaborative.common import (
    CollaborativeAlgorithm,
    CollaborativeHyperparameters,
    PairSampler,
    flatten,
    unflatten,
    weighted_grads,
)
from hetfl.engine.federation import Batch
from hetfl.engine.grad import client_grads, gather_chunks
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params
from hetfl.engine.rng import generator
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class WGABCHyperparameters(CollaborativeHyperparameters):
    """``weight`` w of each other client (null = 1/N), ``beta`` β ∈ (0, 1] (0.1), and the shared setting."""

    weight: float | None = option(None, lo=0)
    beta: float = option(0.1, lo=0, lo_open=True, hi=1)


class WGABC(CollaborativeAlgorithm):
    """WGA-BC. State: ``theta [N, ...]``, ``c [N, D]`` (flat bias estimates)."""

    name = "wga_bc"
    Hyperparameters = WGABCHyperparameters
    weighted = True

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        n = fed.num_clients
        self.theta = fed.states.stack(self.fed.initial_model(self.seed), n, idle=False)
        self.opt = client_optimizer(self.fed, self.hp, self.theta)
        self.pair_sampler = PairSampler(fed.train.sizes, hp.batch_size, generator(seed, "batches"), sampling)
        self.w = hp.weight if hp.weight is not None else 1.0 / n
        self.c = torch.zeros_like(flatten(self.theta))
        off = torch.full((n, n), self.w, dtype=torch.float64)
        self.diff_weights = off.fill_diagonal_(-self.w * (n - 1))  # d_i = Σ_k a_ik g_k(θ_i), a_ii = −(N−1)w
        self.record(off.clone().fill_diagonal_(1.0 - self.w * (n - 1)) if n > 1 else torch.ones(1, 1))

    def step(self, t: int) -> None:
        n, fed = self.fed.num_clients, self.fed
        pairs = torch.arange(n * n)
        pos, mask = self.pair_sampler.next(pairs)  # B_ik for all pairs
        own = torch.arange(n) * (n + 1)  # pairs (i, i)
        own_full = bool(mask[own].all())
        d = torch.empty_like(self.c)
        g_own = torch.empty_like(self.c)
        owners = self.pair_sampler.owners(pairs)
        for s, batch in gather_chunks(fed, owners, pos, mask, group=n):  # the N pairs of models i in s
            i = slice(s.start // n, s.stop // n)
            theta = {k: v[i] for k, v in self.theta.items()}
            c, b = i.stop - i.start, batch.x.shape[1]
            maskf = batch.mask.to(torch.float64)
            weight = self.diff_weights[i].reshape(-1, 1).to(maskf.device) * maskf / maskf.sum(1, keepdim=True)
            x = batch.x.reshape(c, n * b, *batch.x.shape[2:])  # row i: the batches of pairs (i, 0..N−1)
            y = batch.y.reshape(c, n * b, *batch.y.shape[2:])
            d[i] = flatten(weighted_grads(fed.model, theta, x, y, weight.reshape(c, n * b)))  # d_i
            mine = own[i] - s.start
            own_batch = Batch(batch.x[mine], batch.y[mine], batch.mask[mine], full=own_full)
            g_own[i] = flatten(client_grads(fed.model, theta, own_batch)[1])  # g_i(θ_i)
        pseudo = g_own + d - self.c  # g_i + d_i − c_i
        self.c.mul_(1.0 - self.hp.beta).add_(d, alpha=self.hp.beta)  # c_i ← (1 − β) c_i + β d_i
        self.opt.step(
            self.theta, unflatten(pseudo, self.theta), scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        )

    def eval_models(self) -> dict[str, Params]:
        return {"personal": self.theta}


ALGORITHMS = {"wga_bc": WGABC}
