"""Personalized federated learning: pFedMe (and, with the personalized issue, Per-FedAvg, FFGG, FedAlt, FedSim)."""
