"""Sequential per-client reference implementations: a Python loop over clients, one ``nn.Module`` each.

They are the oracle of the equivalence tests (every batched algorithm must match its reference to
float tolerance on a tiny problem) and the baseline of the speed benchmark (``python -m hetfl.tools.bench``).
They share with the batched code only what must be identical for a comparison: the data, the
initial weights, the participation schedule and the minibatch positions (drawn from the same
``BatchSampler`` calls in the same order). The update rules are written out again, per client.
"""

from __future__ import annotations

from functools import cache

from hetfl.discovery import discover


@cache
def references() -> dict:
    """Algorithm name -> its sequential reference on client data (a generator ``reference(fed, hp, seed,
    schedule, sampling)``, ``hetfl.testing.Reference``), from every module of this package that declares
    ``REFERENCES = {"<algorithm>": <function>}`` (``hetfl.discovery``): adding a reference is adding its
    module. The references of the generated problems and of the minimax family (which take flags: ``plus``,
    ``game``) are imported by their tests directly.

    Raises:
        RuntimeError: two modules declare the same algorithm.
    """
    return discover("hetfl.reference", "REFERENCES")


__all__ = ["references"]
