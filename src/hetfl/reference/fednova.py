"""FedNova, sequential reference (Wang et al., NeurIPS 2020, §3 and §5): each client trains as FedAvg's; the
server adds up the updates normalized by ‖a_i‖₁, summed here coefficient by coefficient from the local
solver's recursion (plain SGD: 1 per step; momentum ρ: the buffer b_k = ρ b_{k−1} + g_k carries
g_j into every later step, so ‖a_i‖₁ = Σ_{k=1}^{τ_i} Σ_{j=0}^{k−1} ρ^j)."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import client_data, initial_state, round_lrs, sample_weights, sampler_for
from hetfl.reference.fedavg_like import ServerOpt, StepCounts, longest_first, step_draws, train_client


def a_norm(tau: int, rho: float) -> float:
    """‖a‖₁ of τ steps of SGD with heavy-ball momentum ρ from a zero buffer (ρ = 0: τ)."""
    return float(sum(sum(rho**j for j in range(k)) for k in range(1, tau + 1)))


def fednova(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": state}``.

    Args:
        hp: ``FedNovaHyperparameters``.
        schedule: ``LongTensor[T, S]`` sampled clients per round.
    """
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    lrs = round_lrs(hp, hp.lr, len(schedule))
    counts, server = StepCounts(fed, hp, seed), ServerOpt(hp)
    for t, sampled in enumerate(schedule):
        order = longest_first(sampled, counts.next())
        batches = step_draws(sampler, order)
        clients = [c for c, _ in order]
        p = sample_weights(fed, clients, hp.client_weights) or [1.0 / len(clients)] * len(clients)
        a = [a_norm(tau, hp.momentum) for _, tau in order]
        tau_eff = sum(pi * ai for pi, ai in zip(p, a, strict=True))
        d = {k: 0 * v for k, v in w.items()}  # Σ_i p_i d_i, d_i = (w_t − w_i)/‖a_i‖₁
        for c, pi, ai in zip(clients, p, a, strict=True):
            state = train_client(fed, data[c], w, batches[c], lrs[t], hp)
            for k in d:
                d[k] = d[k] + pi * (w[k] - state[k]) / ai
        w = server.step(w, {k: w[k] - tau_eff * d[k] for k in w})
        yield {"global": w}


REFERENCES = {"fednova": fednova}  # the algorithm each reference follows (hetfl.reference.references)
