"""Shared pieces of the collaborative family: hyper-parameters, the client optimizer, pairwise gradients.

- ``CollaborativeHyperparameters``: the per-dataset training setting every algorithm of the paper shares
  ("same set of hyperparameters for every algorithms", docs/papers/all_for_one.md §2.9): lr η, iterations per
  epoch I (``local_steps``), batch b, and the shared client optimizer (momentum, weight decay, clipping,
  schedule: ``hetfl.algorithms.hyperparameters.ClientOptimization``), which is the paper's code's
  ``torch.optim.SGD(lr, momentum, weight_decay)`` + ``StepLR`` per client (docs/papers/all_for_one.md §2.7:
  ``param.grad = Σ_k α_ik g_k; optimizer.step()``) with ``lr_schedule: step``.
- ``PairSampler`` and the two batched gradient computations of All-for-one:
  ``stacked_grads`` (one gradient per (model, batch) row: the N×N gradients ĝ_ik = ∇ℓ(θ_i; B_k) of the
  weight estimation are one call with C = N² rows) and ``weighted_grads`` + ``collaborator_batch`` (the
  update direction Σ_k α_ik ∇ℓ(θ_i; B_k) = ∇_θi Σ_k α_ik ℓ(θ_i; B_k): one backward per model over the
  union of its collaborators' batches, skipping the pairs with α_ik = 0).
- ``CollaborativeAlgorithm``: the base class (round = I iterations, evaluation with log10 losses and the
  weight metrics, the N×N weight matrix recorded over time as artifacts).

Pairs are numbered row-major, pair p = i·N + k is "model of client i, data of client k".
"""

from __future__ import annotations

import dataclasses
import math
from abc import abstractmethod
from typing import ClassVar, Literal

import numpy as np
import torch
from torch import Tensor

from hetfl.algorithms.base import ClientRows, FederatedAlgorithm, Rows
from hetfl.algorithms.hyperparameters import LocalTraining
from hetfl.engine.federation import Batch, Federation
from hetfl.engine.optim import client_optimizer, scheduled_lr
from hetfl.engine.params import Params
from hetfl.engine.rng import generator
from hetfl.engine.sampler import BatchSampler
from hetfl.errors import ConfigError
from hetfl.models import BatchedModel
from hetfl.models.base import sample_losses
from hetfl.options import option

BUDGET = 1 << 22
"""Elements of the largest activation one batched forward may create (sets chunk sizes)."""

LOG_METRICS = ("train_log10_loss", "test_log10_loss")
WEIGHT_METRICS = ("in_cluster_weight", "collab_fraction")
_TINY = np.finfo(np.float64).tiny  # log10 of an exact zero loss is clamped here (finite)


@dataclasses.dataclass(frozen=True)
class CollaborativeHyperparameters(LocalTraining):
    """The training setting shared by every algorithm of a study (Table S1; all_for_one.md §2.8, §3.6).

    ``lr`` η, ``local_steps`` I (iterations per round = the paper's epoch, I = ⌊mean_k ⌈n_k/b⌉⌋ for finite
    data, 1 for the synthetic stream), ``batch_size`` b, and the client optimizer (``ClientOptimization``:
    ``momentum``, ``weight_decay``, ``clip_norm``; the paper's StepLR is ``lr_schedule: step`` with
    ``lr_step_size`` in rounds and ``lr_gamma``).
    """

    lr: float = 0.1
    local_steps: int = 1
    batch_size: int = 16


@dataclasses.dataclass(frozen=True)
class WeightEstimation(CollaborativeHyperparameters):
    """Adds the schedule of a pairwise estimation: ``b_alpha`` b_α (samples of each fresh batch) and
    ``tau`` (recompute every τ iterations, or ``round``: once per round, at its first iteration), or
    ``tau_epochs`` (τ as a share of an epoch of I = ``local_steps`` iterations, τ = max(1, ⌊tau_epochs ·
    I + 1/2⌋): the paper's τ/I kept where a stand-in has fewer iterations per epoch, e.g. MNIST's 50/175, Philippenko
    et al. 2025, Table S1)."""

    b_alpha: int = option(1, lo=0, lo_open=True)
    tau: int | Literal["round"] = option(1, lo=0, lo_open=True)
    tau_epochs: float | None = option(None, lo=0, lo_open=True)

    def check(self, key: str) -> None:
        super().check(key)
        if self.tau_epochs is not None and self.tau != 1:
            raise ConfigError(f"{key}.tau_epochs", f"replaces tau: leave tau out (got tau: {self.tau})")

    def period(self) -> int:
        """τ in iterations."""
        if self.tau_epochs is not None:
            return max(1, math.floor(self.tau_epochs * self.local_steps + 0.5))  # halves round up
        return self.local_steps if self.tau == "round" else int(self.tau)


class PairSampler(BatchSampler):
    """One minibatch stream per ordered pair (i, k): the data of client k, for the model of client i.

    The N² streams are those of a ``BatchSampler`` over N² virtual clients of sizes n_k (pair p = i·N + k),
    so each pair walks its own epochs of client k's data, as the per-(i, k) data iterators of the paper's
    code (docs/papers/all_for_one.md §2.7). ``next(pairs)`` returns positions within client
    ``pairs % N``'s data (``owners``); ``hetfl.engine.grad.row_batches(fed, sampler, pairs, group=N)`` draws
    and gathers them, the N pairs of a model at a time under a memory budget.
    """

    def __init__(self, sizes: Tensor, batch_size: int, generator: torch.Generator, mode: str = "epoch"):
        self.num_clients = len(sizes)
        super().__init__(sizes.repeat(len(sizes)), batch_size, generator, mode)

    def owners(self, clients: Tensor) -> Tensor:
        """The data client k = p mod N of each pair p of ``clients [P]``."""
        return clients % self.num_clients


def stacked_rows(first: Params, second: Params, s: slice) -> Params:
    """Rows ``s`` of two per-client stacks ``[C, ...]``, one after the other: ``[2r, ...]`` (two models per
    client in one call: Ditto's w_k and v_k, APFL's w_k and v̄_k)."""
    return {k: torch.cat([first[k][s], second[k][s]]) for k in first}


def repeat_rows(params: Params, times: int) -> Params:
    """``[C, ...]`` -> ``[C·times, ...]`` with row c·times + j = row c (θ_i for every pair (i, ·))."""
    return {k: v.repeat_interleave(times, dim=0) for k, v in params.items()}


def flatten(params: Params) -> Tensor:
    """``dict[str, Tensor[C, ...]]`` -> ``Tensor[C, D]`` (parameters concatenated in key order)."""
    return torch.cat([v.reshape(v.shape[0], -1) for v in params.values()], 1)


def unflatten(flat: Tensor, like: Params) -> Params:
    """Inverse of :func:`flatten`: ``Tensor[C, D]`` -> ``dict`` shaped as ``like`` (views)."""
    out, start = {}, 0
    for k, v in like.items():
        size = math.prod(v.shape[1:])
        out[k] = flat[:, start : start + size].reshape(flat.shape[0], *v.shape[1:])
        start += size
    return out


def _chunk(model: BatchedModel, samples_per_row: int, budget: int) -> int:
    return max(1, budget // max(1, samples_per_row * model.sample_cost()))


def stacked_grads(
    model: BatchedModel, params: Params, batch: Batch, budget: int = BUDGET, out: Tensor | None = None
) -> Tensor:
    """Row c's mean-loss gradient at ``params[c]`` on ``batch`` row c, flattened: ``Tensor[C, D]``.

    With ``params = repeat_rows(θ, N)`` and the batches of all N² pairs this is the matrix of the N×N
    gradients ĝ_ik = ∇ℓ(θ_i; B_k) (paper §4, Eq. 1) in one batched computation (``BatchedModel.loss_grads``),
    in row chunks that keep activations under ``budget`` elements. ``out``: a ``[C, D]`` tensor to write
    them into, each chunk as it comes (cast to its dtype: CoBo's float64 inner products), returned.
    """
    rows = next(iter(params.values())).shape[0]
    step = _chunk(model, batch.x.shape[1], budget)
    parts = []
    for s in range(0, rows, step):
        sl = slice(s, s + step)
        mask = None if batch.full else batch.mask[sl]
        _, grads = model.loss_grads({k: v[sl] for k, v in params.items()}, batch.x[sl], batch.y[sl], mask)
        if out is not None:
            out[sl] = flatten(grads)
            continue
        parts.append(flatten(grads))
    if out is not None:
        return out
    return torch.cat(parts) if len(parts) > 1 else parts[0]


def weighted_grads(
    model: BatchedModel, params: Params, x: Tensor, y: Tensor, weight: Tensor, budget: int = BUDGET
) -> Params:
    """∇_θc Σ_s weight[c, s]·ℓ(θ_c; x[c, s]) for every row c: ``dict[str, Tensor[C, ...]]``.

    Args:
        params: ``[C, ...]``; x: ``[C, S, *sample_shape]``; y: ``[C, S]`` or ``[C, S, K]``;
        weight: ``[C, S]`` per-sample weights (0 for padding).
    """
    rows, samples = weight.shape
    step = _chunk(model, samples, budget)
    parts: list[Params] = []
    for s in range(0, rows, step):
        sl = slice(s, s + step)
        leaves = {k: v[sl].detach().requires_grad_(True) for k, v in params.items()}
        with torch.enable_grad():
            losses = sample_losses(model.forward(leaves, x[sl]), y[sl], model.task)  # [c, S]
            total = (losses * weight[sl].to(losses.dtype)).sum()
            grads = torch.autograd.grad(total, list(leaves.values()))
        parts.append(dict(zip(leaves, grads, strict=True)))
    if len(parts) == 1:
        return parts[0]
    return {k: torch.cat([p[k] for p in parts]) for k in params}


def collaborator_batch(fed: Federation, sampler: PairSampler, alpha: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """The minibatches of every pair with α_ik ≠ 0, laid out per model, with the weights of Σ_k α_ik ℓ(θ_i; B_k).

    Draws ``sampler.next`` once for the active pairs (row-major). Row i holds the batches of its M_i
    collaborators in slots 0..M_i−1, padded to M = max_i M_i with weight-0 samples of client i.

    Args:
        alpha: ``Tensor[N, N]`` (CPU), α_ik.

    Returns:
        ``(x [N, M·b, ...], y [N, M·b(, K)], weight [N, M·b])``, weight = α_ik · mask / |B_ik| (so that
        ``weighted_grads`` gives Σ_k α_ik × the mean-loss gradient of each batch).
    """
    n = fed.num_clients
    active = alpha != 0
    pairs = torch.nonzero(active.reshape(-1)).squeeze(1)
    rows, cols = pairs // n, pairs % n
    counts = active.sum(1)
    m = int(counts.max())
    slot = torch.arange(len(pairs)) - (torch.cumsum(counts, 0) - counts)[rows]
    pos, mask = sampler.next(pairs)
    b = pos.shape[1]
    client = torch.arange(n).unsqueeze(1).repeat(1, m)
    position = torch.zeros(n, m, b, dtype=torch.long)
    weight = torch.zeros(n, m, b, dtype=torch.float64)
    client[rows, slot] = cols
    position[rows, slot] = pos
    maskf = mask.to(torch.float64)
    weight[rows, slot] = alpha[rows, cols].to(torch.float64).unsqueeze(1) * maskf / maskf.sum(1, keepdim=True)
    x, y = fed.train.gather(client.reshape(-1), position.reshape(n * m, b))
    return (
        x.reshape(n, m * b, *x.shape[2:]),
        y.reshape(n, m * b, *y.shape[2:]),
        weight.reshape(n, m * b).to(fed.device),
    )


def in_cluster_weight(alpha: Tensor, cluster: Tensor) -> Tensor:
    """m_i = Σ_{k: c(k)=c(i)} α_ik / Σ_k α_ik, the share of client i's weight inside its true cluster ``[N]``
    (docs/papers/all_for_one.md §8.5; 1 for a client whose weights sum to 0)."""
    a = alpha.abs().double()
    same = (cluster.unsqueeze(0) == cluster.unsqueeze(1)).double()
    total = a.sum(1)
    return torch.where(total > 0, (a * same).sum(1) / total.clamp_min(_TINY), torch.ones_like(total))


def collab_fraction(alpha: Tensor) -> float:
    """Share of the off-diagonal weights that are non-zero: #{(i, k): k ≠ i, α_ik ≠ 0} / (N(N−1))."""
    n = alpha.shape[0]
    if n < 2:
        return 0.0
    off = (alpha != 0) & ~torch.eye(n, dtype=torch.bool)
    return float(off.sum()) / (n * (n - 1))


class CollaborativeAlgorithm(FederatedAlgorithm):
    """Base of the family: a round is I = ``local_steps`` iterations of ``step``; all clients every round.

    Class attributes:
        weighted: the algorithm has an N×N collaboration matrix ``self.alpha`` (recorded with
            :meth:`record`, reported as ``in_cluster_weight`` and ``collab_fraction``).

    Metrics: ``{train,test}_{loss,acc}_{model}`` (``FederatedAlgorithm``), plus ``train_log10_loss`` and
    ``test_log10_loss`` (mean over clients of log10 of the client's loss with its personal model: the
    paper's curves and Table 2, docs/papers/all_for_one.md §3.1) and, when ``weighted``, the weight metrics.

    Artifacts: ``alpha [U, N, N]`` (float64, each recorded matrix), ``alpha_round [U]`` (the round
    during which it was computed, 1-based), ``alpha_iteration [U]`` (iterations done before it),
    ``ratio [U, N, N]`` (when recorded) and ``cluster [N]`` (ground-truth cluster ids).
    """

    models: ClassVar[tuple[str, ...]] = ("personal",)
    evaluate_needs: ClassVar[tuple[str, ...]] = ("personal",)  # the log10 losses
    weighted: ClassVar[bool] = False

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.iteration = 0
        self.t = 0
        self.alpha: Tensor | None = None
        self._recorded: dict[str, list] = {"alpha": [], "ratio": [], "alpha_round": [], "alpha_iteration": []}

    @classmethod
    def metric_names(cls, hp=None) -> list[str]:
        return super().metric_names(hp) + list(LOG_METRICS) + (list(WEIGHT_METRICS) if cls.weighted else [])

    def round(self, t: int, sampled: Tensor) -> None:
        """I iterations of every client (the paper's epoch; ``sampled`` is ignored: all clients take part)."""
        self.t = t
        for _ in range(self.hp.local_steps):
            self.step(t)
            self.iteration += 1

    @abstractmethod
    def step(self, t: int) -> None:
        """One iteration of every client, in round ``t``."""

    def record(self, alpha: Tensor, ratio: Tensor | None = None) -> None:
        """Set and record the current weights ``alpha [N, N]`` (and the similarity ratios)."""
        self.alpha = alpha
        self._recorded["alpha"].append(alpha.double().cpu().numpy())
        if ratio is not None:
            self._recorded["ratio"].append(ratio.double().cpu().numpy())
        self._recorded["alpha_round"].append(max(self.t, 1))
        self._recorded["alpha_iteration"].append(self.iteration)

    def evaluate(self) -> tuple[Rows, ClientRows]:
        rows, client_rows = super().evaluate()
        for split in ("train", "test"):
            name = f"{split}_loss_personal"
            losses = np.array([v for _, metric, v in client_rows if metric == name], dtype=np.float64)
            with np.errstate(invalid="ignore"):
                rows.append((f"{split}_log10_loss", float(np.log10(np.maximum(losses, _TINY)).mean())))
        if self.weighted and self.alpha is not None:
            share = in_cluster_weight(self.alpha.cpu(), self.fed.cluster)
            rows.append(("in_cluster_weight", float(share.mean())))
            rows.append(("collab_fraction", collab_fraction(self.alpha.cpu())))
            client_rows += [(i, "in_cluster_weight", float(v)) for i, v in enumerate(share)]
        return rows, client_rows

    def artifacts(self) -> dict[str, np.ndarray]:
        if not self._recorded["alpha"]:
            return {}
        out = {
            "alpha": np.stack(self._recorded["alpha"]),
            "alpha_round": np.asarray(self._recorded["alpha_round"], dtype=np.int64),
            "alpha_iteration": np.asarray(self._recorded["alpha_iteration"], dtype=np.int64),
            "cluster": self.fed.cluster.cpu().numpy().astype(np.int64),
        }
        if self._recorded["ratio"]:
            out["ratio"] = np.stack(self._recorded["ratio"])
        return out


class AllForOneBase(CollaborativeAlgorithm):
    """The All-for-one update with weights chosen by a subclass (paper §2, Eq. "All-for-one"; notes:
    docs/papers/all_for_one.md §2.1, §2.8):

        θ_i^t = θ_i^{t−1} − η_i^t Σ_k α_ik^t g_k^t(θ_i^{t−1}),   g_k^t(θ_i) = ∇ℓ(θ_i; B_ik), |B_ik| = b,

    for all clients at once, the aggregated gradient going through the client's optimizer (momentum, weight
    decay, clipping, schedule; its buffers kept across rounds), as the paper's code (``param.grad = Σ_k α_ik
    g_k; optimizer.step()``). Each pair (i, k) has its own minibatch stream (``PairSampler``, stream
    ``batches``); pairs with α_ik = 0 are skipped (no gradient, no draw). All clients start from the same θ⁰.

    State: ``theta [N, ...]``, ``alpha [N, N]`` (float64, CPU; identity until ``update_weights`` sets it).
    """

    weighted = True

    def __init__(self, fed, hp, seed, sampling="epoch"):
        super().__init__(fed, hp, seed, sampling)
        self.theta = fed.states.stack(self.fed.initial_model(self.seed), fed.num_clients, idle=False)
        self.opt = client_optimizer(self.fed, self.hp, self.theta)  # kept across rounds, as the paper's code
        self.update_sampler = PairSampler(
            fed.train.sizes, hp.batch_size, generator(seed, "batches"), sampling
        )
        self.alpha = torch.eye(fed.num_clients, dtype=torch.float64)

    def update_weights(self) -> None:
        """Set ``self.alpha`` (with :meth:`record`) before the step when due; called every iteration."""

    def step(self, t: int) -> None:
        self.update_weights()
        x, y, weight = collaborator_batch(self.fed, self.update_sampler, self.alpha)
        grads = weighted_grads(self.fed.model, self.theta, x, y, weight)  # G_i = Σ_k α_ik ∇ℓ(θ_i; B_ik)
        self.opt.step(
            self.theta, grads, scheduled_lr(self.hp.lr, t, self.hp, self.rounds)
        )  # θ_i ← θ_i − η_t G_i (with momentum / weight decay)

    def eval_models(self) -> dict[str, Params]:
        return {"personal": self.theta}


def client_sizes(fed: Federation, rule: str) -> Tensor:
    """n_k of Definition 3 ``[N]`` (float64): ``batch`` (Remark 1: σ_k² = σ²/n_k with n_k the per-iteration
    batch size, the same for every client here, so 1) or ``samples`` (the code: the client's training-set size)."""
    if rule == "samples":
        return fed.train.sizes.double()
    return torch.ones(fed.num_clients, dtype=torch.float64)
