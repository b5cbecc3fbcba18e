"""Federated minimax optimization under client heterogeneity: Local SGDA(+) and Fed-Norm-SGDA(+).

Sharma, Panda, Joshi, "Federated Minimax Optimization with Client Heterogeneity", TMLR 2023
(docs/papers/fedminimax.md). Clients solve min_x max_{y∈Y} F(x, y) = Σ_i p_i f_i(x, y) by local
simultaneous stochastic gradient descent-ascent; they run unequal numbers of local steps τ_i, and the
server either averages their iterates (Local SGDA, which then optimizes the surrogate Σ_i w_i f_i with
w_i ∝ p_i‖ā_i‖₁) or normalizes each client's update by ‖ā_i‖₁ and weights it by p_i (Fed-Norm-SGDA,
Algorithm 1). Shared pieces: ``common`` (the batched round), ``local_work`` (heterogeneous τ_i),
``schedules`` (Tables 3-4), ``projections`` (ℓ2 ball, simplex), ``objectives`` (robust and fair
training on client data), ``federated`` and ``game`` (the two environments).
"""
