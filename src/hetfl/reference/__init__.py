"""Sequential per-client reference implementations: a Python loop over clients, one ``nn.Module`` each.

They are the oracle of the equivalence tests (every batched algorithm must match its reference to
float tolerance on a tiny problem) and the baseline of the speed benchmark (``python -m hetfl.bench``).
They share with the batched code only what must be identical for a comparison: the data, the
initial weights, the participation schedule and the minibatch positions (drawn from the same
``BatchSampler`` calls in the same order). The update rules are written out again, per client.
"""

from hetfl.reference.fedavg import fedavg
from hetfl.reference.fedavg_ft import fedavg_ft
from hetfl.reference.feddyn import feddyn
from hetfl.reference.fednova import fednova
from hetfl.reference.fedprox import fedprox
from hetfl.reference.local import local
from hetfl.reference.partial import fedalt, fedsim, ffgg
from hetfl.reference.perfedavg import perfedavg
from hetfl.reference.personal_layers import fedbabu, fedper, fedrep, lg_fedavg
from hetfl.reference.pfedme import pfedme
from hetfl.reference.qfedavg import qfedavg
from hetfl.reference.scaffold_data import scaffold_data

REFERENCES = {
    "fedavg": fedavg,
    "fedavg_ft": fedavg_ft,
    "fedalt": fedalt,
    "fedbabu": fedbabu,
    "feddyn": feddyn,
    "fednova": fednova,
    "fedper": fedper,
    "fedprox": fedprox,
    "fedrep": fedrep,
    "fedsim": fedsim,
    "ffgg": ffgg,
    "lg_fedavg": lg_fedavg,
    "local": local,
    "perfedavg": perfedavg,
    "pfedme": pfedme,
    "qfedavg": qfedavg,
    "scaffold": scaffold_data,  # on client data (the quadratic problem's: hetfl.reference.scaffold)
}

__all__ = ["REFERENCES"]
