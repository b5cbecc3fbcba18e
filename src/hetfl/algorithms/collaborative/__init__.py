"""Adaptive collaboration: All-for-one with the gradient-similarity criterion, and its baselines.

Philippenko, Le Bars, Scaman, Massoulié, "Adaptive collaboration for online personalized distributed
learning with heterogeneous clients", arXiv:2507.06844, 2025 (docs/papers/all_for_one.md).
Every client i keeps its own model θ_i and steps with Σ_k α_ik g_k(θ_i), where each client k computes a
stochastic gradient at θ_i on its own data (All-for-one); the weights α come from the similarity ratio
of gradients (``all_for_one``, binary and continuous rules) or from the true clusters (``all_for_one_oracle``).
Baselines with the same client optimizer (the shared one, config/README.md: SGD with momentum, weight
decay, clipping and a schedule; the paper's code: momentum, weight decay, StepLR, buffers kept across
rounds): ``local_sgdm``, ``fedavg_sgdm``, ``ditto``, ``cobo``, ``wga_bc``, ``apfl``; ``sufficient_cluster``
computes Figure 1. Shared pieces (the training setting, the N×N pairwise gradients as one batched call) are
in ``common``.
"""
