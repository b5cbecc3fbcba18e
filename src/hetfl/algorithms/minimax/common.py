"""The generalized federated SGDA round (Sec. 4, Eq. (2); Algorithm 1), batched over clients.

Both families run the same client side, Algorithm 1 lines 8-13: from (x^(t), y^(t)), client i takes
τ_i^(t) simultaneous steps x ← x − η^c_x d_x, y ← Π_Y(y + η^c_y d_y), where d = ∇f_i(x_i, y_i; ξ) (SGD)
or the heavy-ball buffer d ← ρd + ∇f_i (momentum, reset each round; Appendix A.1). The "+" variants
take the y-gradient at the snapshot x̂^(s), refreshed every S rounds (lines 4-6, 11, 16). They differ
at the server, with w̃_i = p_i n/|C^(t)| (Eq. (3), not renormalized):

- naive (Local SGDA): x^(t+1) = x^(t) − Σ_{i∈C} w̃_i (x^(t) − x_i^(t,τ_i)); the same for y, then Π_Y.
  With full participation this is Σ_i p_i x_i, model averaging (docs/papers/fedminimax.md §2.5).
- normalized (Fed-Norm-SGDA, lines 15-20 in the FedNova form, docs/papers/fedminimax.md §2.4, D1):
  x^(t+1) = x^(t) − γ_s τ_eff Σ_{i∈C} w̃_i (x^(t) − x_i^(t,τ_i))/‖ā_i‖₁, y likewise, then Π_Y.

Batching heterogeneous τ_i: each round the participants are ordered by τ_i, longest first, so the
clients still working at local step k are a prefix of the stack; step k updates that prefix (a view,
no copy) and finished clients are left untouched (their mask is the prefix length). There is no
per-client Python loop.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar, Literal

import torch
from torch import Tensor

from hetfl.algorithms.minimax.local_work import LocalWork, a_l1
from hetfl.algorithms.minimax.schedules import TABLE3_MILESTONES, step_lr
from hetfl.engine.params import Params, all_finite, broadcast, clone
from hetfl.errors import ConfigError
from hetfl.options import Options, option


@dataclasses.dataclass(frozen=True)
class SGDAHyperparameters(Options):
    """Shared by every algorithm of the family (defaults: the paper's Tables 3-4 and Sec. 6).

    ``lr_x`` η^c_x (0.016), ``lr_y`` η^c_y (0.02); ``lr_milestones`` rounds after which both are
    multiplied by ``lr_decay`` (null: Table 3's [100, 200]; [] constant, Table 4); ``clients_per_round``
    P (null: all n); τ_i ∈ {``tau_min`` .. ``tau_max``} (E), drawn ``tau_draw`` (``uniform`` |
    ``spread``), ``tau_redraw`` every ``round`` or once (``fixed``); ``momentum`` ρ of the local
    heavy-ball (0; 0.9 for the "(M)" baselines).
    """

    lr_x: float = option(0.016, lo=0, lo_open=True)
    lr_y: float = option(0.02, lo=0, lo_open=True)
    lr_milestones: list | None = None
    lr_decay: float = option(0.1, lo=0, lo_open=True)
    clients_per_round: int | None = option(None, lo=0, lo_open=True)
    tau_min: int = option(2, lo=0, lo_open=True)
    tau_max: int = 5
    tau_draw: Literal["uniform", "spread"] = "uniform"
    tau_redraw: Literal["round", "fixed"] = "round"
    momentum: float = option(0.0, lo=0, hi=1, hi_open=True)

    def check(self, key: str) -> None:
        super().check(key)
        if self.tau_max < self.tau_min:
            raise ConfigError(f"{key}.tau_max", f"must be >= tau_min ({self.tau_min}), got {self.tau_max}")
        m = self.lr_milestones
        if m is not None and not (
            all(type(v) is int and v > 0 for v in m) and all(a < b for a, b in zip(m, m[1:], strict=False))
        ):
            raise ConfigError(f"{key}.lr_milestones", f"expected increasing positive rounds, got {m!r}")

    @property
    def milestones(self) -> tuple[int, ...]:
        return TABLE3_MILESTONES if self.lr_milestones is None else tuple(self.lr_milestones)


@dataclasses.dataclass(frozen=True)
class Normalized(Options):
    """Fed-Norm-SGDA's server: ``server_lr`` γ_s (1; the paper's γ^s = γ_s η^c, docs/papers/fedminimax.md
    §2.4, D1) and ``tau_eff``: ``exact`` Σ_{j=1}^n p_j‖ā_j‖₁ over all n clients' τ of this round (default;
    §2.4, D2), ``expected`` Σ_j p_j E‖ā_j‖₁, or ``participants`` Σ_{i∈C} w̃_i‖ā_i‖₁ (unbiased estimate)."""

    server_lr: float = option(1.0, lo=0, lo_open=True)
    tau_eff: Literal["exact", "expected", "participants"] = "exact"


@dataclasses.dataclass(frozen=True)
class Snapshot(Options):
    """The "+" variants: ``snapshot_period`` S, rounds between refreshes of x̂ (1; docs/papers/fedminimax.md
    §4.6)."""

    snapshot_period: int = option(1, lo=0, lo_open=True)


class GeneralizedSGDA:
    """The round of Algorithm 1 / Eq. (2) for a stacked state, shared by both environments.

    A subclass (mixed with an ``Algorithm``) sets, in ``__init__``:
    ``x: Params`` (server x, ``[1, ...]``), ``y: Tensor[1, ...]`` (server y), ``p: Tensor[n]`` (float64
    client weights, Σ = 1), ``work: LocalWork``, ``x_hat`` (None), and implements
    ``client_grads(x [m, ...], y [m, ...], clients [m]) -> (g_x, g_y)`` (stochastic gradients of f_i at
    each row's own point; the y-gradient at ``self.x_hat`` for the "+" variants) and ``project(y)``.

    Class attributes: ``normalized`` (Fed-Norm server) and ``plus`` (snapshot y-gradients).
    """

    normalized: ClassVar[bool] = False
    plus: ClassVar[bool] = False

    x: Params
    y: Tensor
    p: Tensor
    work: LocalWork
    x_hat: Params | None = None
    tau_eff_last: float = float("nan")
    client_steps: int = 0

    def client_grads(self, x: Params, y: Tensor, clients: Tensor) -> tuple[Params, Tensor]:
        raise NotImplementedError

    def project(self, y: Tensor) -> Tensor:
        return y

    def participants(self, sampled: Tensor) -> Tensor:
        """C^(t) (line 3): the server's sampled clients."""
        return sampled.cpu()

    @property
    def n(self) -> int:
        """n, the clients of the federated objective."""
        return len(self.p)

    def learning_rates(self, t: int) -> tuple[float, float]:
        """(η^c_x, η^c_y) of round t (Tables 3-4)."""
        hp = self.hp
        return (
            step_lr(hp.lr_x, t, hp.milestones, hp.lr_decay),
            step_lr(hp.lr_y, t, hp.milestones, hp.lr_decay),
        )

    def round(self, t: int, sampled: Tensor) -> None:
        """Communication round ``t`` (1-based) of Algorithm 1 with clients ``sampled [P]``."""
        hp = self.hp
        clients = self.participants(sampled)  # line 3: C^(t)
        steps_all = self.work.steps()  # τ_j^(t) of all n clients, in SGD steps
        if self.plus and (t - 1) % hp.snapshot_period == 0:  # lines 4-6: x̂^(s) = x^(t)
            self.x_hat = clone(self.x)
        steps, order = torch.sort(steps_all[clients], descending=True, stable=True)
        clients = clients[order]  # longest first: the clients still working are a prefix
        x_i = broadcast(self.x, len(clients))  # line 8: x_i^(t,0) = x^(t), y_i^(t,0) = y^(t)
        y_i = self.y.expand(len(clients), *self.y.shape[1:]).clone()
        self.local_updates(x_i, y_i, clients, steps, *self.learning_rates(t))  # lines 9-13
        self.client_steps += int(steps.sum())
        a1 = a_l1(steps, hp.momentum)  # ‖ā_i‖₁
        w_tilde = self.p[clients] * (self.n / len(clients))  # Eq. (3): w̃_i = p_i n/|C|
        tau_eff = float((self.p * a_l1(steps_all, hp.momentum)).sum())  # Σ_j p_j ‖ā_j‖₁
        if self.normalized:  # lines 15-20
            if hp.tau_eff == "expected":
                tau_eff = float((self.p * self.work.expected_a_l1(hp.momentum)).sum())
            elif hp.tau_eff == "participants":
                tau_eff = float((w_tilde * a1).sum())
            coef = hp.server_lr * tau_eff * w_tilde / a1
        else:
            coef = w_tilde
        self.tau_eff_last = tau_eff
        self.x = {k: server_step(v, x_i[k], coef) for k, v in self.x.items()}
        self.y = self.project(server_step(self.y, y_i, coef))

    def local_updates(
        self, x: Params, y: Tensor, clients: Tensor, steps: Tensor, lr_x: float, lr_y: float
    ) -> None:
        """Algorithm 1 lines 9-13 for all participants at once, in place.

        Args:
            x: ``[P, ...]`` and y: ``[P, ...]``, row c of client ``clients[c]``.
            steps: ``LongTensor[P]`` τ_i in steps, non-increasing (client c works at step k iff k < steps[c]).
            lr_x, lr_y: η^c_x, η^c_y.
        """
        rho = self.hp.momentum
        horizon = int(steps[0]) if len(steps) else 0
        working = (steps.unsqueeze(0) > torch.arange(horizon).unsqueeze(1)).sum(1).tolist()
        buf_x = {k: torch.zeros_like(v) for k, v in x.items()} if rho else None
        buf_y = torch.zeros_like(y) if rho else None
        for m in working:  # m = clients still working at this step: rows 0..m-1
            xs = {k: v[:m] for k, v in x.items()}
            ys = y[:m]
            g_x, g_y = self.client_grads(xs, ys, clients[:m])  # at (x_i^(t,k), y_i^(t,k)) (or x̂ for g_y)
            with torch.no_grad():
                if rho:  # d ← ρ d + g (Appendix A.1)
                    g_x = {k: buf_x[k][:m].mul_(rho).add_(g) for k, g in g_x.items()}
                    g_y = buf_y[:m].mul_(rho).add_(g_y)
                for k, g in g_x.items():
                    xs[k].sub_(g, alpha=lr_x)  # line 10
                ys.copy_(self.project(ys + lr_y * g_y))  # line 11 / 12, then Π_Y

    def finite(self) -> bool:
        return all_finite(self.x) and bool(torch.isfinite(self.y).all())


def server_step(server: Tensor, local: Tensor, coef: Tensor) -> Tensor:
    """``server [1, ...] + Σ_c coef_c (local_c − server)`` with ``local [P, ...]``, ``coef [P]`` (float64)."""
    c = coef.to(device=local.device, dtype=local.dtype)
    return server + torch.tensordot(c, local - server, dims=1).unsqueeze(0)
