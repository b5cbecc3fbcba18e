"""Fair federated learning: a global model whose accuracy is spread more evenly over the clients.

Li, Sanjabi, Beirami, Smith, "Fair Resource Allocation in Federated Learning", ICLR 2020
(docs/papers/qfedavg.md): the q-FFL objective Σ_k p_k F_k^{q+1}(w) / (q + 1), solved by q-FedAvg (``qfedavg``).
"""
