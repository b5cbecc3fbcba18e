"""FedDyn, sequential reference (Acar et al., ICLR 2021, Algorithm 1): each client steps, with its own
``torch.optim.SGD``, on the autograd gradient of its minibatch loss − ⟨∇L_k(θ_k^{t−1}), θ⟩
+ α/2 ‖θ − θ^{t−1}‖²; then ∇L_k ← ∇L_k − α(θ_k − θ^{t−1}), h ← h − α Σ_{k∈P} ω_k (θ_k − θ^{t−1})
(ω_k = 1/m, or n_k/n) and θ = mean_k θ_k − h/α."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    client_data,
    initial_state,
    mean_states,
    round_lrs,
    sample_weights,
    sampler_for,
)
from hetfl.reference.fedavg_like import StepCounts, longest_first, step_draws, train_client


def feddyn(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": θ, "gradients": [∇L_k for each client], "h": h}``.

    Args:
        hp: ``FedDynHyperparameters``.
        schedule: ``LongTensor[T, S]`` sampled clients per round.
    """
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    theta = initial_state(fed, seed)
    lrs = round_lrs(hp, hp.lr, len(schedule))
    counts, alpha = StepCounts(fed, hp, seed), hp.alpha
    n = fed.num_clients
    sizes = [float(s) for s in fed.train.sizes]
    omega = [s / sum(sizes) for s in sizes] if hp.client_weights == "samples" else [1.0 / n] * n
    h = {k: 0 * v for k, v in theta.items()}
    grads = [dict(h) for _ in range(n)]
    for t, sampled in enumerate(schedule):
        order = longest_first(sampled, counts.next())
        batches = step_draws(sampler, order)
        states = []
        for client, _ in order:
            g = grads[client]

            def dynamic(params, g=g, anchor=theta):  # −⟨∇L_k(θ_k^{t−1}), θ⟩ + α/2 ‖θ − θ^{t−1}‖²
                return sum(
                    -(g[k] * p).sum() + alpha / 2 * ((p - anchor[k]) ** 2).sum() for k, p in params.items()
                )

            state = train_client(fed, data[client], theta, batches[client], lrs[t], hp, dynamic)
            states.append(state)
            grads[client] = {k: g[k] - alpha * (state[k] - theta[k]) for k in theta}
            h = {k: h[k] - alpha * omega[client] * (state[k] - theta[k]) for k in theta}
        mean = mean_states(states, sample_weights(fed, [k for k, _ in order], hp.client_weights))
        theta = {k: mean[k] - h[k] / alpha for k in theta}
        yield {"global": theta, "gradients": [dict(g) for g in grads], "h": h}


REFERENCES = {"feddyn": feddyn}  # the algorithm each reference follows (hetfl.reference.references)
