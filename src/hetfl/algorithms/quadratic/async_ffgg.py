"""Asynchronous FFGG (Algorithm 3) in a discrete-event simulation, and its synchronous counterpart.

Mishchenko et al., TMLR 2025, Algorithm 3, Theorem 3/7 and Appendix E.2 (Figure 3);
docs/papers/ffgg.md §2.3, §4.4.

    for r = 0, 1, 2, ...:
        receive Δ_{j_r} from the client j_r that finishes first; its delay d = r − (iteration it started at)   (line 3)
        θ^{r+1} = θ^r − γ_θ Δ_{j_r}                                                                  (line 4)
        sample a new client m_r, init w randomly, w ≈ argmin_w f_{m_r}(θ^{r+1}, w) (Algorithm 2)     (lines 5–6)
        Δ_{m_r} = ∇_1 f_{m_r}(θ^{r+1}, w)                                                             (line 7)

The paper measured delays of Ray workers on real CPUs; here K workers (``workers``, default M) are
simulated, deterministically from the run seed. Worker k has a speed s_k = exp(σ Z_k), Z_k ~ N(0, 1),
σ = ``speed_spread``; a job (τ-step fine-tuning plus one ∇_1) takes work · s_k · exp(``jitter`` · Z)
time units, work = the gradient evaluations of the job (τ + 1 with GD), 1 unit = one gradient
evaluation on a unit-speed worker. Jobs complete in time order; delays are recorded as they happen
(the notebook's ``delay = it − worker_last_it[worker]``). Every job's times and clients come from a
schedule generator seeded by the first draw of the run's algorithm stream, so the event order does
not depend on τ or the fine-tuner: runs that differ in τ see the same delays.
``assignment``: ``sample`` (line 5: the free worker gets a uniformly sampled client) or ``fixed`` (the
notebook: worker k always serves client k mod M).

``mode: sync`` is Algorithm 1 on the same simulated workers: each round the S sampled clients are
computed on workers 0..S−1 and the round lasts as long as the slowest; ``sync_aggregate`` is ``mean``
(the paper) or ``sum`` (the notebook's parameter server: θ ← θ − γ Σ Δ).

One runner round is K server updates in ``async`` mode (K update directions, one synchronous round's
worth) and one synchronous round in ``sync`` mode, so ``directions`` (update directions computed and
applied; Figure 3's x-axis) is K per round in both.

Stepsizes: sync γ_θ = 1/L (Theorem 1); async γ_θ = 1/(2L√(2Kτ_max)), Theorem 7 in the arXiv form
(TMLR prints (2L√(2K)τ_max)^{-1}; the proof needs the arXiv one), τ_max = ``tau_max`` (default K, a
nominal bound: the realized delays are reported, and often exceed it); ``lr_theta_factor`` scales
either (E.2 tunes ×{0.25, 0.5, 1, 2, 4}), ``lr_theta`` sets it.

Metrics added: ``directions``, ``time`` (simulated), ``delay_max`` and ``delay_mean`` over the updates
since the previous evaluation (async only). ``artifacts()``: per update ``delay``, ``time``, ``worker``,
``client``, and ``worker_speed`` (s_k).
"""

from __future__ import annotations

import dataclasses
import heapq
import math
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from hetfl.algorithms.quadratic.common import cocoercivity_L
from hetfl.algorithms.quadratic.ffgg import FFGG, FFGGHyperparameters
from hetfl.errors import ConfigError
from hetfl.options import option


@dataclasses.dataclass(frozen=True)
class AsyncFFGGHyperparameters(FFGGHyperparameters):
    """FFGG's hyper-parameters plus ``mode`` (``async`` | ``sync``), ``workers`` K (null: M), ``assignment``
    (``sample`` | ``fixed``), ``speed_spread`` σ (0.5), ``jitter`` (0.1), ``tau_max`` (null: K),
    ``sync_aggregate`` (``mean`` | ``sum``). ``clients_per_round`` is used by ``sync`` only (S ≤ K)."""

    mode: Literal["async", "sync"] = "async"
    workers: int | None = option(None, lo=0, lo_open=True)
    assignment: Literal["sample", "fixed"] = "sample"
    speed_spread: float = option(0.5, lo=0)
    jitter: float = option(0.1, lo=0)
    tau_max: int | None = option(None, lo=0, lo_open=True)
    sync_aggregate: Literal["mean", "sum"] = "mean"

    def check(self, key: str) -> None:
        super().check(key)
        if (
            self.mode == "sync"
            and self.workers
            and self.clients_per_round
            and self.clients_per_round > self.workers
        ):
            raise ConfigError(
                f"{key}.clients_per_round", f"sync mode computes S ≤ K = {self.workers} clients at once"
            )


class AsyncFFGG(FFGG):
    """Asynchronous FFGG (``mode: async``) or synchronous FFGG on simulated workers (``mode: sync``).

    State: θ ``[d_θ]``; in async mode also each worker's job (its update ``Δ [K, d_θ]``, start
    iteration, finish time, client).

    Raises:
        ValueError: sync mode with more sampled clients than workers.
    """

    name = "ffgg_async"
    Hyperparameters = AsyncFFGGHyperparameters
    extra_metrics = ("directions", "time", "delay_max", "delay_mean")

    def __init__(self, env, hp, seed, sampling="epoch"):
        super().__init__(env, hp, seed, sampling)
        self.K = hp.workers or env.num_clients
        seed_schedule = int(torch.randint(2**62, (1,), generator=self.rng))
        self.schedule = torch.Generator().manual_seed(seed_schedule)  # times and clients only
        self.speed = torch.exp(
            hp.speed_spread * torch.randn(self.K, generator=self.schedule, dtype=torch.float64)
        )
        self.work = self.fine_tune.cost + 1
        if hp.mode == "async" and hp.lr_theta is None:  # Theorem 7 (arXiv form)
            tau_max = hp.tau_max or self.K
            L = cocoercivity_L(env, hp.L_rule)
            self.lr_theta = hp.lr_theta_factor / (2 * L * math.sqrt(2 * self.K * tau_max))
        self.time = 0.0
        self.directions_done = 0
        self.log: dict[str, list] = {"delay": [], "time": [], "worker": [], "client": []}
        self._window: list[int] = []
        if hp.mode == "async":
            self.r = 0  # server iteration
            self.client = [self.next_client(k) for k in range(self.K)]
            first = torch.tensor(self.client, device=env.device)  # every worker starts at θ^0, in one batch
            self.delta = self.directions(self.theta, first, self.K)
            self.start = [0] * self.K
            self.queue = [(self.duration(k), k) for k in range(self.K)]
            heapq.heapify(self.queue)

    # ---- the simulated workers --------------------------------------------------------------

    def duration(self, worker: int) -> float:
        """Time of one job on ``worker``: work · s_k · exp(jitter · Z), Z from the schedule stream."""
        z = float(torch.randn(1, generator=self.schedule, dtype=torch.float64))
        return self.work * float(self.speed[worker]) * math.exp(self.hp.jitter * z)

    def next_client(self, worker: int) -> int:
        """The client a free ``worker`` serves next (line 5): uniform over M (``sample``) or its own (``fixed``)."""
        M = self.problem.num_clients
        if self.hp.assignment == "fixed":
            return worker % M
        return int(torch.randint(M, (1,), generator=self.schedule))

    def job(self, theta: Tensor, client: int) -> Tensor:
        """Δ of one client at ``theta`` (lines 5–7): fine-tune from a fresh w, then ∇_1. ``[d_θ]``."""
        return self.directions(theta, slice(client, client + 1), 1)[0]

    # ---- rounds -------------------------------------------------------------------------------

    def event(self) -> None:
        """One server iteration r of Algorithm 3."""
        finish, j = heapq.heappop(self.queue)  # line 3: the first job to finish
        delay = self.r - self.start[j]
        self.theta = self.theta - self.lr_theta * self.delta[j]  # line 4
        self.time = finish
        for name, value in (("delay", delay), ("time", finish), ("worker", j), ("client", self.client[j])):
            self.log[name].append(value)
        self._window.append(delay)
        self.r += 1
        m = self.client[j] = self.next_client(j)  # line 5
        self.delta[j] = self.job(self.theta, m)  # lines 6–7, at θ^{r+1}
        self.start[j] = self.r
        heapq.heappush(self.queue, (finish + self.duration(j), j))

    def round(self, t: int, sampled: Tensor) -> None:
        if self.hp.mode == "async":
            for _ in range(self.K):
                self.event()
            self.comm_rounds += self.K
            self.directions_done += self.K
            return
        S = len(sampled)
        if S > self.K:
            raise ValueError(f"sync mode: {S} sampled clients but only {self.K} workers")
        deltas = self.directions(self.theta, self.clients_of(sampled), S)
        step = deltas.sum(0) if self.hp.sync_aggregate == "sum" else deltas.mean(0)
        self.theta = self.theta - self.lr_theta * step
        self.time += max(self.duration(k) for k in range(S))  # the slowest of the S workers
        self.comm_rounds += 1
        self.directions_done += S

    # ---- records ------------------------------------------------------------------------------

    def extra_rows(self):
        rows = [("directions", float(self.directions_done)), ("time", self.time)]
        if self.hp.mode == "async":
            window, self._window = self._window, []
            rows += [
                ("delay_max", float(max(window)) if window else math.nan),
                ("delay_mean", float(np.mean(window)) if window else math.nan),
            ]
        return rows

    def state(self) -> dict[str, Tensor]:
        if self.hp.mode == "async":
            return {"theta": self.theta, "pending": self.delta}
        return {"theta": self.theta}

    def artifacts(self) -> dict[str, np.ndarray]:
        """Per server update: ``delay``, ``time``, ``worker``, ``client``; and ``worker_speed`` ``[K]``."""
        dtypes = {"delay": np.int64, "time": np.float64, "worker": np.int32, "client": np.int32}
        out = {k: np.asarray(v, dtype=dtypes[k]) for k, v in self.log.items()}
        return {**out, "worker_speed": self.speed.numpy()}


ALGORITHMS = {"ffgg_async": AsyncFFGG}
