"""The vectorized federation engine: stacked client states, batched gradients, sampling, evaluation.

Modules: ``rng`` (seeded streams), ``participation`` (clients per round), ``sampler`` (per-client
minibatches), ``federation`` (client data on the device), ``params`` (stacked-parameter algebra),
``grad`` (batched losses, gradients, local SGD), ``evaluate`` (batched evaluation), ``runner``
(the round loop).
"""
