"""Local SGDA(+) with optional momentum, sequential reference: one client after the other, one
``nn.Module`` (or one plain vector, for the quadratic game) each.

Written apart from the batched code (``hetfl.algorithms.minimax``): per-client loops, autograd on a
single-client module, the momentum coefficients a^(k) summed term by term, the simplex projection by
bisection. Shared with it only what must be identical for a comparison: the data, the initial
weights, the participation schedule, the τ draws (``LocalWork``, stream ``algorithm``) and the
minibatch positions (the same ``BatchSampler`` calls in the same order: at local step k, the clients
still working, longest τ first) or the game's noise draws.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from hetfl.algorithms.minimax.local_work import LocalWork
from hetfl.engine.rng import generator
from hetfl.reference.common import client_data, initial_state, make_module, minibatch, sampler_for


def a_norm(tau: int, rho: float) -> float:
    """‖ā‖₁ = Σ_{k<τ} Σ_{j≤k} ρ^j, term by term (Appendix A.1)."""
    return sum(sum(rho**j for j in range(k + 1)) for k in range(tau))


def simplex(y: Tensor) -> Tensor:
    """Π onto the simplex by bisection on θ in Σ max(y − θ, 0) = 1 (one vector ``[K]``)."""
    lo, hi = float(y.min()) - 1.0, float(y.max())
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if float((y - mid).clamp_min(0).sum()) > 1 else (lo, mid)
    return (y - (lo + hi) / 2).clamp_min(0)


def ball(y: Tensor, radius: float) -> Tensor:
    norm = float(y.norm())
    return y if norm <= radius else y * (radius / norm)


class DataClient:
    """Gradients of one client's f_i on its data (objective ``robust``, ``fair`` or ``standard``)."""

    def __init__(self, fed, hp, n: int):
        self.fed, self.hp = fed, hp
        self.data = client_data(fed)
        labels = torch.cat([self.data[i][1] for i in range(n)])
        self.prior = torch.bincount(labels, minlength=fed.model.num_classes).to(fed.dtype) / len(labels)

    def init_y(self) -> Tensor:
        shape = {
            "robust": self.fed.train.x.shape[1:],
            "fair": (self.fed.model.num_classes,),
            "standard": (0,),
        }
        y = torch.zeros(*shape[self.hp.objective], dtype=self.fed.dtype)
        return y + 1.0 / len(y) if self.hp.objective == "fair" else y

    def project(self, y: Tensor) -> Tensor:
        return {"robust": lambda v: ball(v, self.hp.radius), "fair": simplex}.get(
            self.hp.objective, lambda v: v
        )(y)

    def loss(self, module, y: Tensor, x: Tensor, labels: Tensor) -> Tensor:
        if self.hp.objective == "robust":
            return F.cross_entropy(module(x + y), labels)
        per = F.cross_entropy(module(x), labels, reduction="none")
        if self.hp.objective == "fair":
            return (per * (y / self.prior)[labels]).mean()
        return per.mean()

    def grads(self, state, y, snapshot, client, draw, row):
        """(∇_x f_i(x, y; ξ) as a state dict, ∇_y f_i(x̂ or x, y; ξ))."""
        x, labels = minibatch(self.data[client], draw, row)
        module = make_module(self.fed, state)
        y_leaf = y.clone().requires_grad_(True)
        loss = self.loss(module, y_leaf, x, labels)
        names, params = zip(*module.named_parameters(), strict=True)
        grads = torch.autograd.grad(loss, [*params, y_leaf] if y.numel() else list(params))
        g_x = dict(zip(names, grads[: len(names)], strict=True))
        g_y = grads[-1] if y.numel() else torch.zeros_like(y)
        if self.hp.objective == "fair":
            per = F.cross_entropy(
                make_module(self.fed, snapshot or state)(x), labels, reduction="none"
            ).detach()
            g_y = torch.stack([(per * (labels == c)).sum() for c in range(len(y))]) / len(labels) / self.prior
            g_y = g_y - self.hp.fair_lambda * y
        elif snapshot is not None and y.numel():
            y_leaf = y.clone().requires_grad_(True)
            (g_y,) = torch.autograd.grad(
                self.loss(make_module(self.fed, snapshot), y_leaf, x, labels), [y_leaf]
            )
        return g_x, g_y.detach()


def run_reference(
    env,
    hp,
    seed: int,
    schedule: Tensor,
    server: Callable,
    plus: bool,
    sampling: str = "epoch",
    game: bool = False,
):
    """The generalized SGDA loop, one client at a time; ``server(state)`` does the aggregation.

    Yields after each round ``{"x": state dict, "y": Tensor}``.
    """
    rho = hp.momentum
    if game:
        n = env.num_clients
        p = env.weights
        state, y = {"x": env.x0[0].clone()}, env.y0[0].clone()
        unit = torch.ones(n, dtype=torch.long)
        noise = generator(seed, "batches")
        sampler = None
    else:
        n = hp.active_clients or env.num_clients
        sizes = env.train.sizes[:n].double()
        p = (
            sizes / sizes.sum()
            if hp.client_weights == "samples"
            else torch.full((n,), 1.0 / n, dtype=torch.float64)
        )
        unit = (
            -(-env.train.sizes[:n] // hp.batch_size)
            if hp.tau_unit == "epochs"
            else torch.ones(n, dtype=torch.long)
        )
        client = DataClient(env, hp, n)
        state, y = initial_state(env, seed), client.init_y()
        sampler = sampler_for(env, hp.batch_size, seed, sampling)
    work = LocalWork(unit, hp.tau_min, hp.tau_max, hp.tau_draw, hp.tau_redraw, generator(seed, "algorithm"))
    milestones = (100, 200) if hp.lr_milestones is None else hp.lr_milestones
    snapshot = None
    for t, sampled in enumerate(schedule, start=1):
        factor = hp.lr_decay ** len([m for m in milestones if t > m])
        lr_x, lr_y = hp.lr_x * factor, hp.lr_y * factor
        taus = work.steps()
        if plus and (t - 1) % hp.snapshot_period == 0:
            snapshot = {k: v.clone() for k, v in state.items()}
        clients = list(range(n)) if getattr(hp, "active_clients", None) else sampled.tolist()
        clients.sort(key=lambda c: -int(taus[c]))  # stable: the batched code's order
        horizon = int(taus[clients[0]])
        draws, noises = [], []
        for k in range(horizon):
            working = [c for c in clients if int(taus[c]) > k]
            if game:
                dims = (state["x"].numel(), y.numel())
                noises.append(
                    [torch.randn(len(working), d, generator=noise, dtype=torch.float64) for d in dims]
                    if env.noise
                    else None
                )
            else:
                draws.append(sampler.next(torch.tensor(working)))
        locals_ = []
        for row, c in enumerate(clients):
            xs, ys = {k: v.clone() for k, v in state.items()}, y.clone()
            dx, dy = {k: torch.zeros_like(v) for k, v in xs.items()}, torch.zeros_like(ys)
            for k in range(int(taus[c])):
                if game:
                    g_x, g_y = _game_grads(env, xs["x"], ys, c, snapshot["x"] if plus else None)
                    if noises[k] is not None:
                        g_x, g_y = (
                            g_x + env.noise * noises[k][0][row].to(g_x),
                            g_y + env.noise * noises[k][1][row].to(g_y),
                        )
                    g_x = {"x": g_x}
                else:
                    g_x, g_y = client.grads(xs, ys, snapshot if plus else None, c, draws[k], row)
                for key in xs:
                    dx[key] = rho * dx[key] + g_x[key]
                    xs[key] = xs[key] - lr_x * dx[key]
                dy = rho * dy + g_y
                ys = env_project(env, None if game else client, ys + lr_y * dy)
            locals_.append((c, xs, ys, a_norm(int(taus[c]), rho)))
        tau_eff = sum(float(p[j]) * a_norm(int(taus[j]), rho) for j in range(n))
        state, y = server(state, y, locals_, p, n, tau_eff, work)
        y = env_project(env, None if game else client, y)
        yield {"x": state, "y": y}


def env_project(env, client, y):
    return y if client is None else client.project(y)


def _game_grads(game, x: Tensor, y: Tensor, c: int, snapshot: Tensor | None):
    g_x = game.A[c] @ (x - game.u[c]) + game.B @ y
    g_y = game.B.T @ (x if snapshot is None else snapshot) - game.C[c] @ (y - game.v[c])
    return g_x, g_y


def naive_server(state, y, locals_, p, n, tau_eff, work):
    """x ← x − Σ_{i∈C} p_i n/|C| (x − x_i); y likewise."""
    scale = n / len(locals_)
    new_state = {k: v.clone() for k, v in state.items()}
    new_y = y.clone()
    for c, xs, ys, _ in locals_:
        w = float(p[c]) * scale
        for k in state:
            new_state[k] = new_state[k] - w * (state[k] - xs[k])
        new_y = new_y + w * (ys - y)
    return new_state, new_y


def local_sgda(env, hp, seed, schedule, sampling="epoch", plus=False, game=False):
    """Local SGDA(+) (momentum ``hp.momentum``): yields ``{"x", "y"}`` after each round."""
    return run_reference(env, hp, seed, schedule, naive_server, plus, sampling, game)
