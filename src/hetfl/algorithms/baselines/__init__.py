"""Baselines shared by every family: FedAvg and Local (each client alone)."""
