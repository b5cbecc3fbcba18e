"""CoBo: collaborative learning via bilevel optimization.

Hashemi, He and Jaggi, "CoBo: Collaborative Learning via Bilevel Optimization", NeurIPS 2024
(https://arxiv.org/abs/2409.05539), Algorithm 1, as a baseline of Philippenko et al., arXiv:2507.06844, 2025
(docs/papers/all_for_one.md §2.9.5). The bilevel problem: each client's model minimizes its loss plus the
penalty ρ/2 Σ_k w_ik ‖θ_i − θ_k‖², and each weight w_ik ∈ [0, 1] maximizes ⟨∇f_i(z_ik), ∇f_k(z_ik)⟩ at the
midpoint z_ik = (θ_i + θ_k)/2 (it stays 1 while the two clients' gradients agree there, falls to 0 when they
point apart). The alternating SGD of Algorithm 1, one iteration:

    for each sampled pair {i, k}:  w_ik = w_ki ← clip(w_ik + γ_C ⟨∇f_i(z_ik; B_i), ∇f_k(z_ik; B_k)⟩, 0, 1)
    for each client i:             θ_i ← θ_i − η (∇f_i(θ_i; B_i) + ρ Σ_k w_ik (θ_i − θ_k))

the model step being a step of the client optimizer (config/README.md: the penalized gradient is clipped,
momentum kept across rounds; the schedule scales η, not γ_C). The schedule of the weight updates is the
authors' code's (github.com/epfml/CoBo, ``personalized-vision-models/grouping.py``; the paper's text was not
available offline to compare): weights start at 1 and are updated every iteration (``pair_every`` 1) on a
random subset of the pairs, each unordered pair independently with probability 2/N, 1/√s once s > 800
updates have been made (``pair_probability`` null; a number fixes it, 1 takes every pair), the midpoint
gradients on batches of the training size b (``pair_batch`` null). γ_C = 0.01 (the code's). ρ: the default
1/(η N) keeps η ρ Σ_k w_ik < 1 (the work-in-progress code of Philippenko et al. used ρ = 1/η, which diverges
with N = 20 and w ≈ 1; the authors' code's command line takes 0.01 to 0.05), configurable (``rho``).

Earlier versions of this module took Philippenko et al.'s work-in-progress schedule (every pair every τ
iterations, batches of b_α); ``pair_probability: 1``, ``pair_every: τ``, ``pair_batch: b_α`` is that schedule,
to the bit.

The midpoint gradients are batched calls over the sampled pairs (two rows per pair; under a memory budget,
chunks of pairs, each chunk's inner products taken before the next: :func:`pair_chunks`), the penalty a
matrix product (Laplacian of w times the stacked models). Batches: one stream per ordered pair (i, k) — the
data of k for the midpoint of i and k — and the pairs (drawn before each update's batches), from stream
``algorithm``.

Its collaboration matrix (recorded at the end of every round, for the weight figures) is w with w_ii = 1.
"""

from __future__ import annotations

import dataclasses
import math

import torch
from torch import Tensor

from hetfl.algorithms.collaborative.common import (
    CollaborativeAlgorithm,
    CollaborativeHyperparameters,
    PairSampler,
    flatten,
    stacked_grads,
    unflatten,
)
from hetfl.engine.grad import drawn_grads, gather_batch
from hetfl.engine.memory import MemoryProfile
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params, rows
from hetfl.options import option

CODE_SWITCH = 800
"""Weight updates after which the authors' code samples each pair with probability 1/√s instead of 2/N."""


@dataclasses.dataclass(frozen=True)
class CoBoHyperparameters(CollaborativeHyperparameters):
    """``gamma_c`` γ_C (0.01), ``rho`` ρ (null = 1/(η N)), ``pair_probability`` (null: the authors' code's
    2/N, then 1/√s past 800 updates; a number in (0, 1]: fixed), ``pair_batch`` (samples of each midpoint
    batch; null: ``batch_size``), ``pair_every`` (iterations between weight updates, 1)."""

    gamma_c: float = option(0.01, lo=0)
    rho: float | None = option(None, lo=0)
    pair_probability: float | None = option(None, lo=0, lo_open=True, hi=1)
    pair_batch: int | None = option(None, lo=0, lo_open=True)
    pair_every: int = option(1, lo=0, lo_open=True)


def pair_probability(hp: CoBoHyperparameters, n: int, updates: int) -> float:
    """The probability that a pair is sampled at the weight update made after ``updates`` earlier ones:
    ``hp.pair_probability``, or the authors' code's min(1, 2/N) while ``updates`` ≤ 800, 1/√updates after."""
    if hp.pair_probability is not None:
        return hp.pair_probability
    return min(1.0, 2.0 / n) if updates <= CODE_SWITCH else 1.0 / math.sqrt(updates)


def upper_pairs(n: int) -> tuple[Tensor, Tensor]:
    """``(i, k)``: the N(N−1)/2 unordered pairs i < k, row-major (``LongTensor`` each)."""
    i, k = torch.triu_indices(n, n, offset=1)
    return i, k


class CoBo(CollaborativeAlgorithm):
    """CoBo. State: ``theta [N, ...]``, ``alpha`` = w ``[N, N]`` (float64, CPU)."""

    name = "cobo"
    Hyperparameters = CoBoHyperparameters
    weighted = True

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        n = fed.num_clients
        self.theta = fed.states.stack(self.fed.initial_model(self.seed), n, idle=False)
        self.opt = client_optimizer(self.fed, self.hp, self.theta)
        self.clients = fed.all_clients()
        batch = hp.pair_batch if hp.pair_batch is not None else hp.batch_size
        self.pair_sampler = PairSampler(fed.train.sizes, batch, self.rng, sampling)
        self.rho = hp.rho if hp.rho is not None else 1.0 / (hp.lr * n)
        self.alpha = torch.ones(n, n, dtype=torch.float64)
        self.updates = 0

    def memory_profile(self) -> MemoryProfile:
        """Calls over up to N² rows: the weight update differentiates two rows per sampled pair
        (:func:`pair_chunks`)."""
        return dataclasses.replace(super().memory_profile(), pairs=True)

    def sampled_pairs(self) -> tuple[Tensor, Tensor]:
        """The unordered pairs ``(i, k)``, i < k, of this weight update (row-major): each of the N(N−1)/2 with
        probability :func:`pair_probability` (one uniform draw per pair from stream ``algorithm``; all of them,
        with no draw, when it is 1)."""
        i, k = upper_pairs(self.fed.num_clients)
        p = pair_probability(self.hp, self.fed.num_clients, self.updates)
        if p >= 1.0:
            return i, k
        keep = torch.rand(len(i), generator=self.rng, dtype=torch.float64) < p
        return i[keep], k[keep]

    def update_weights(self) -> None:
        """w_ik = w_ki ← clip(w_ik + γ_C ⟨∇f_i(z_ik; B_i), ∇f_k(z_ik; B_k)⟩, 0, 1) for the sampled pairs: their
        2M batches drawn at once (stream i·N + k: the data of k; (k, i) row after every (i, k) row), then the
        midpoints differentiated a chunk of pairs at a time (:func:`pair_chunks`). When every pair is taken the
        N² streams are drawn in order, the N pairs (i, i) included, as earlier versions did."""
        fed, n = self.fed, self.fed.num_clients
        i, k = self.sampled_pairs()
        self.updates += 1
        if len(i) == 0:
            return
        m = len(i)
        # the rows: ∇f_k(z_ik; B_k) for every pair, then ∇f_i(z_ik; B_i)
        streams = torch.cat([i * n + k, k * n + i])
        if m == n * (n - 1) // 2:  # every pair: the N² streams drawn in order, as earlier versions
            pos, mask = (v[streams] for v in self.pair_sampler.next(torch.arange(n * n)))
        else:
            pos, mask = self.pair_sampler.next(streams)
        owners, full = self.pair_sampler.owners(streams), bool(mask.all())
        flat = flatten(self.theta)  # [N, D]
        inner = torch.empty(m, dtype=torch.float64)
        for chunk in pair_chunks(m, getattr(fed.model, "max_rows", None)):
            index = torch.cat([chunk, chunk + m])
            batch = gather_batch(fed, fed.train, owners[index], pos[index], mask[index], full)
            a, b = i[chunk].to(flat.device), k[chunk].to(flat.device)
            z = (flat[a] + flat[b]) / 2  # z_ik
            g = torch.empty(2 * len(chunk), flat.shape[1], dtype=torch.float64, device=fed.device)
            stacked_grads(
                fed.model, unflatten(z.repeat(2, 1), self.theta), batch, out=g
            )  # float64, as they come
            del z
            inner[chunk] = row_dots(g[: len(chunk)], g[len(chunk) :]).cpu()
            del g
        w = self.alpha.clone()
        w[i, k] = (w[i, k] + self.hp.gamma_c * inner).clamp_(0.0, 1.0)
        w[k, i] = w[i, k]
        self.alpha = w

    def round(self, t: int, sampled: Tensor) -> None:
        """I iterations, then the weights recorded (those in force at the end of round ``t``)."""
        super().round(t, sampled)
        self.record(self.alpha)

    def step(self, t: int) -> None:
        if self.iteration % self.hp.pair_every == 0:
            self.update_weights()
        grads = drawn_grads(self.fed, self.sampler, self.clients, lambda s: rows(self.theta, s))
        w = self.alpha.clone().fill_diagonal_(0.0)
        laplacian = (torch.diag(w.sum(1)) - w).to(
            self.fed.device, self.fed.dtype
        )  # (Lθ)_i = Σ_k w_ik (θ_i − θ_k)
        penalty = unflatten(laplacian @ flatten(self.theta), self.theta)
        for c, g in grads.items():
            g.add_(penalty[c], alpha=self.rho)
        self.opt.step(
            self.theta, grads, scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        )  # θ_i ← θ_i − η (∇f_i(θ_i) + ρ Σ_k w_ik (θ_i − θ_k))

    def eval_models(self) -> dict[str, Params]:
        return {"personal": self.theta}


def pair_chunks(pairs: int, max_rows: int | None) -> list[Tensor]:
    """The chunks of the M sampled pairs whose midpoints are differentiated at once (two rows per pair):
    ``LongTensor`` positions 0..M−1 in order, all at once without a row limit (``max_rows`` None or at least
    2M), else ⌊max_rows/2⌋ (at least 1) a chunk."""
    if max_rows is None or 2 * pairs <= max_rows:
        return [torch.arange(pairs)]
    size = max(1, max_rows // 2)
    return list(torch.arange(pairs).split(size))


def row_dots(a: Tensor, b: Tensor) -> Tensor:
    """``[m]``: ⟨a[j], b[j]⟩ of ``a, b [m, D]``, each a sum over D of one output of a reduction with several
    outputs (computed alike for any m; a reduction with a single output may be split over threads), so that
    every chunking of the pairs gives the same bits."""
    products = a * b
    if products.shape[0] > 1:
        return products.sum(1)
    return products.expand(2, -1).sum(1)[:1]


ALGORITHMS = {"cobo": CoBo}
