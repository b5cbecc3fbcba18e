"""SCAFFOLD on client data, sequential reference (Karimireddy et al., ICML 2020, Algorithm 1; the quadratic
problem's is ``hetfl.reference.scaffold``): each client steps, with its
own ``torch.optim.SGD``, on the autograd gradient of its minibatch loss plus ⟨c − c_i, y⟩ (whose gradient is
the correction c − c_i), then updates c_i by option I (its full-data gradient at x) or II; the server steps x
and c ← c + Σ_{i∈S} ω_i (c_i⁺ − c_i), ω_i = 1/N (or n_i/n)."""

from __future__ import annotations

from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import (
    client_data,
    initial_state,
    loss_grads,
    make_module,
    mean_states,
    round_lrs,
    sample_weights,
    sampler_for,
)
from hetfl.reference.fedavg_like import ServerOpt, StepCounts, longest_first, step_draws, train_client


def scaffold_data(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": x, "controls": [c_i for each client], "server_control": c}``.

    Args:
        hp: ``ScaffoldHyperparameters``.
        schedule: ``LongTensor[T, S]`` sampled clients per round.
    """
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    x = initial_state(fed, seed)
    lrs = round_lrs(hp, hp.lr, len(schedule))
    counts, server = StepCounts(fed, hp, seed), ServerOpt(hp)
    n = fed.num_clients
    sizes = [float(s) for s in fed.train.sizes]
    omega = [s / sum(sizes) for s in sizes] if hp.client_weights == "samples" else [1.0 / n] * n
    c = {k: 0 * v for k, v in x.items()}
    controls = [dict(c) for _ in range(n)]
    for t, sampled in enumerate(schedule):
        order = longest_first(sampled, counts.next())
        batches = step_draws(sampler, order)
        states, new_c = [], c
        for client, tau in order:
            ci = controls[client]

            def drift(params, ci=ci, c=c):  # ⟨c − c_i, y⟩
                return sum(((c[k] - ci[k]) * p).sum() for k, p in params.items())

            y = train_client(fed, data[client], x, batches[client], lrs[t], hp, drift)
            states.append(y)
            if hp.control == "I":  # g_i(x) over all the client's samples
                module = make_module(fed, x)
                grads = loss_grads(module, *data[client])
                plus = {k: g.detach() for (k, _), g in zip(module.named_parameters(), grads, strict=True)}
            else:  # c_i − c + (x − y_i)/(K η)
                plus = {k: ci[k] - c[k] + (x[k] - y[k]) / (tau * lrs[t]) for k in x}
            new_c = {k: new_c[k] + omega[client] * (plus[k] - ci[k]) for k in x}
            controls[client] = plus
        c = new_c
        mean = mean_states(states, sample_weights(fed, [k for k, _ in order], hp.client_weights))
        x = server.step(x, mean)
        yield {"global": x, "controls": [dict(ci) for ci in controls], "server_control": c}


REFERENCES = {"scaffold": scaffold_data}  # the algorithm each reference follows (hetfl.reference.references)
