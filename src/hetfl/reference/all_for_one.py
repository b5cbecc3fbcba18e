"""All-for-one, sequential reference: a loop over clients i and collaborators k, one module per client.

The weight estimation is written pair by pair with scalar arithmetic (Eq. 1, Definition 3), the update as
``param.grad = Σ_k α_ik g_k(θ_i); optimizer.step()`` (the paper's code, docs/papers/all_for_one.md §2.7–§2.8).
``fixed_alpha`` replaces the estimation by constant weights (the oracle).
"""

from __future__ import annotations

import torch
from torch import Tensor

from hetfl.algorithms.collaborative.common import PairSampler
from hetfl.engine.federation import Federation
from hetfl.engine.rng import generator
from hetfl.reference.collaborative import grads
from hetfl.reference.common import (
    TorchSGD,
    client_data,
    initial_state,
    make_module,
    minibatch,
    round_lrs,
    state_of,
)


def _ratio(z_pair: float, z_own: float) -> float:
    if z_pair == 0:
        return 1.0
    if z_own == 0:
        return 0.0
    return max(0.0, 1.0 - z_pair / z_own)


def _weights_row(ratios: list[float], sizes: list[float], hp) -> list[float]:
    """α_i· from r̂_i· (Definition 3 closed forms; normalized rows or Definition 1's scale)."""
    if hp.rule == "binary":
        keep = [1.0 if (r >= hp.lam and r > 0) else 0.0 for r in ratios]
        a = [n * s for n, s in zip(sizes, keep, strict=True)]
        theory = sum(n * r * s for n, r, s in zip(sizes, ratios, keep, strict=True))
    else:
        a = [n * r for n, r in zip(sizes, ratios, strict=True)]
        theory = sum(n * r * r for n, r in zip(sizes, ratios, strict=True))
    total = sum(a) if hp.weights == "normalized" else theory
    return [v / total for v in a]


def all_for_one(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch", fixed_alpha=None):
    """Yield, after each round, ``{"personal": [state_i], "alpha": [[α_ik]]}``."""
    n = fed.num_clients
    data = client_data(fed)
    update = PairSampler(fed.train.sizes, hp.batch_size, generator(seed, "batches"), sampling)
    estimate = PairSampler(fed.train.sizes, getattr(hp, "b_alpha", 1), generator(seed, "algorithm"), sampling)
    sizes = (
        [float(s) for s in fed.train.sizes] if getattr(hp, "client_size", "batch") == "samples" else [1.0] * n
    )
    w0 = initial_state(fed, seed)
    modules = [make_module(fed, w0) for _ in range(n)]
    opts = [TorchSGD(m, hp) for m in modules]
    alpha = [[float(i == k) for k in range(n)] for i in range(n)] if fixed_alpha is None else fixed_alpha
    period = hp.local_steps if getattr(hp, "tau", 1) == "round" else getattr(hp, "tau", 1)
    if getattr(hp, "tau_epochs", None) is not None:  # τ as a share of an epoch of local_steps iterations
        period = max(1, int(hp.tau_epochs * hp.local_steps + 0.5))
    it = 0
    lrs = round_lrs(hp, hp.lr, len(schedule))  # torch's scheduler, one step per round
    for t in range(len(schedule)):
        for _ in range(hp.local_steps):
            if fixed_alpha is None and it % period == 0:
                draw = estimate.next(torch.arange(n * n))
                for i in range(n):
                    g = [
                        torch.cat(
                            [v.reshape(-1) for v in grads(modules[i], minibatch(data[k], draw, i * n + k))]
                        )
                        for k in range(n)
                    ]
                    z_own = float((g[i].double() ** 2).sum())
                    z = [float(((g[i].double() - g[k].double()) ** 2).sum()) for k in range(n)]
                    if hp.ratio_numerator == "norm":
                        z = [v**0.5 for v in z]
                    alpha[i] = _weights_row([_ratio(z[k], z_own) for k in range(n)], sizes, hp)
            active = [i * n + k for i in range(n) for k in range(n) if alpha[i][k] != 0]
            draw = update.next(torch.tensor(active))
            for i in range(n):
                total = None
                for row, pair in enumerate(active):
                    if pair // n != i:
                        continue
                    k = pair % n
                    g = grads(modules[i], minibatch(data[k], draw, row))
                    total = (
                        [alpha[i][k] * v for v in g]
                        if total is None
                        else [acc + alpha[i][k] * v for acc, v in zip(total, g, strict=True)]
                    )
                opts[i].step(total, lrs[t])
            it += 1
        yield {"personal": [state_of(m) for m in modules], "alpha": [list(r) for r in alpha]}


def all_for_one_oracle(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """The oracle: α_ik = n_k 1{c(k) = c(i)} / Σ_{j∈C(i)} n_j, fixed."""
    n = fed.num_clients
    c = fed.cluster.tolist()
    sizes = [float(s) for s in fed.train.sizes] if hp.client_size == "samples" else [1.0] * n
    alpha = []
    for i in range(n):
        row = [sizes[k] if c[k] == c[i] else 0.0 for k in range(n)]
        alpha.append([v / sum(row) for v in row])
    yield from all_for_one(fed, hp, seed, schedule, sampling, fixed_alpha=alpha)


REFERENCES = {  # the algorithm each reference follows (hetfl.reference.references)
    "all_for_one": all_for_one,
    "all_for_one_oracle": all_for_one_oracle,
}
