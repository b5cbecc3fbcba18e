"""The sequential references are discovered like the algorithms (``hetfl.reference.references``): each module
declares the algorithm it follows, and every algorithm on client data has one but the minimax family, whose
references take flags (``plus``, ``game``) and are adapted by their tests (``tests/test_minimax_equivalence.py``), and
``minimax_saddle``, a central solver checked against the fair objective computed client by client
(``tests/test_minimax_saddle.py``)."""

from __future__ import annotations

from hetfl.algorithms import FEDERATION, registry
from hetfl.reference import references

MINIMAX = {"local_sgda", "local_sgda_plus", "fed_norm_sgda", "fed_norm_sgda_plus", "minimax_saddle"}


def test_every_algorithm_on_client_data_has_a_discovered_reference_but_the_minimax_family():
    on_data = {name for name, environments in registry().items() if FEDERATION in environments}
    assert set(references()) == on_data - MINIMAX
    assert MINIMAX <= on_data  # still registered, on client data
