"""q-FedAvg, sequential reference (Li, Sanjabi, Beirami, Smith, ICLR 2020, Algorithm 2): one client after the
other, each scoring the server model on its training data with its own ``nn.Module``, training with its own
``torch.optim.SGD`` (new every round) and sending Δ_k and h_k; with the FedAvg-like options (unequal local
steps, the server optimizer)."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from hetfl.engine.federation import Federation
from hetfl.reference.common import client_data, initial_state, make_module, round_lrs, sampler_for
from hetfl.reference.fedavg_like import ServerOpt, StepCounts, longest_first, step_draws, train_client


def qfedavg(fed: Federation, hp, seed: int, schedule: Tensor, sampling: str = "epoch"):
    """Yield, after each round, ``{"global": state}`` (state: ``dict[str, Tensor[...]]`` of one model).

    Args:
        hp: ``QFedAvgHyperparameters``.
        schedule: ``LongTensor[T, S]``, the clients sampled in each round.
    """
    data = client_data(fed)
    sampler = sampler_for(fed, hp.batch_size, seed, sampling)
    w = initial_state(fed, seed)
    lrs = round_lrs(hp, hp.lr, len(schedule))
    counts, server = StepCounts(fed, hp, seed), ServerOpt(hp)
    q = hp.q
    for t, sampled in enumerate(schedule):
        lipschitz = hp.lipschitz or 1.0 / lrs[t]
        order = longest_first(sampled, counts.next())
        batches = step_draws(sampler, order)
        deltas, hs = [], []
        for c, _ in order:
            x, y = data[c]
            with torch.no_grad():  # F_k(w_t): the mean loss of the server model on all of k's training data
                out = make_module(fed, w)(x)
                loss = F.cross_entropy(out, y) if not y.is_floating_point() else F.mse_loss(out, y)
            f = float(loss) + hp.loss_offset
            local = train_client(fed, data[c], w, batches[c], lrs[t], hp)
            dw = {k: lipschitz * (w[k] - local[k]) for k in w}
            deltas.append({k: f**q * v for k, v in dw.items()})
            hs.append(q * f ** (q - 1) * sum(float((v**2).sum()) for v in dw.values()) + lipschitz * f**q)
        update = {k: sum(d[k] for d in deltas) / sum(hs) for k in w}
        w = server.step(w, {k: w[k] - update[k] for k in w})
        yield {"global": w}


REFERENCES = {"qfedavg": qfedavg}  # the algorithm each reference follows (hetfl.reference.references)
