"""Options that take effect only under a setting of another option, declared once as data.

``server_momentum: 0.9`` without ``server_optimizer: avgm`` trains plain FedAvg: the value is accepted and
does nothing. :data:`REQUIRES` declares, for every such option, the option it depends on and the values
under which it takes effect; :func:`inert_options` finds the options a user set that another setting
makes inert, and the config (``hetfl.pipeline.config.resolve_run``) refuses them, naming both keys, before any
job runs. A new option with such a dependency needs one line here and nothing else: the check and its
test (``tests/test_config_numbers.py`` walks every registered algorithm's options) take it from here.

An entry applies to every options class (an algorithm's ``Hyperparameters``) that has both fields, under
the same names everywhere (``hetfl.algorithms.hyperparameters``). The table lives beside the dataclasses,
not on their fields, because those dataclasses are part of every training job's code fingerprint
(``hetfl.fingerprint``): declaring a dependency here reruns no job.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any


@dataclasses.dataclass(frozen=True)
class Requires:
    """An option takes effect only when option ``option`` has one of ``values``."""

    option: str
    values: tuple[Any, ...]


_ADAPTIVE = ("adagrad", "adam", "yogi")

REQUIRES: dict[str, Requires] = {
    # the server optimizer (hetfl.engine.server): β1 is avgm's momentum and the adaptive ones' first moment
    "server_momentum": Requires("server_optimizer", ("avgm", *_ADAPTIVE)),
    "server_beta2": Requires("server_optimizer", ("adam", "yogi")),
    "server_eps": Requires("server_optimizer", _ADAPTIVE),
    # the client optimizer's schedule (hetfl.engine.optim.scheduled_lr)
    "lr_step_size": Requires("lr_schedule", ("step",)),
    "lr_gamma": Requires("lr_schedule", ("step",)),
    "lr_min": Requires("lr_schedule", ("cosine",)),
    "lr_warmup": Requires("lr_schedule", ("linear",)),
    # the federated minimax objectives (hetfl.algorithms.minimax.objectives): the robust Φ's random starts
    "phi_steps": Requires("objective", ("robust",)),
    "phi_restarts": Requires("objective", ("robust",)),
    # unequal local steps (hetfl.engine.local_steps)
    "local_steps_min": Requires("local_steps_per_client", ("spread", "uniform")),
    # Per-FedAvg's Hessian-free variant: the finite-difference step δ
    "hf_delta": Requires("variant", ("hf",)),
}
"""Option -> the setting it needs to take effect."""


@dataclasses.dataclass(frozen=True)
class Inert:
    """An option ``option`` that was set while ``requires.option`` has ``value``, outside ``requires.values``."""

    option: str
    requires: Requires
    value: Any

    def message(self, enabling_key: str, enabling_default: bool) -> str:
        """What is wrong, naming the enabling option's dotted key ``enabling_key``."""
        allowed = " or ".join(str(v) for v in self.requires.values)
        default = " (its default)" if enabling_default else ""
        return (
            f"has no effect unless {self.requires.option} is {allowed}, and {enabling_key} is "
            f"{self.value!r}{default}: set {self.requires.option} (e.g. {self.requires.values[0]}), "
            f"or remove {self.option}"
        )


def requirements(fields: Iterable[str]) -> dict[str, Requires]:
    """The entries of :data:`REQUIRES` that apply to an options class with ``fields`` (both names present)."""
    names = set(fields)
    return {o: r for o, r in REQUIRES.items() if o in names and r.option in names}


def inert_options(values: Mapping[str, Any], given: Iterable[str]) -> list[Inert]:
    """The options of ``given`` that the settings of ``values`` make inert, in the order of ``given``.

    Args:
        values: the resolved options, every one with its value (``Options.as_dict()``).
        given: the names of the options the user set (an option set to null counts as not set).
    """
    table = requirements(values)
    out = []
    for name in given:
        req = table.get(name)
        if req is None or values[name] is None:
            continue
        value = values[req.option]
        if value not in req.values:
            out.append(Inert(name, req, value))
    return out
