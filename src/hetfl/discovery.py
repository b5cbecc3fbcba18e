"""Find the algorithms and problems of the package by walking its modules.

A module declares what it provides with a module-level mapping, ``ALGORITHMS = {"fedavg": FedAvg}`` or
``PROBLEMS = {"ffgg_quadratic": FFGGQuadratic}``, or a list of classes named by their ``name``
attribute (``ALGORITHMS = [LocalSGDA, LocalSGDAGame]``: one name on two environments); adding an
algorithm is adding a module, and no registry file is edited (so adding one never changes the code
fingerprint of the others' runs).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from functools import cache
from typing import Any


@cache
def declarations(package: str, attribute: str) -> tuple[tuple[str, type, str], ...]:
    """``(name, class, module)`` for every entry of ``attribute`` in every module under ``package``, sorted."""
    root = importlib.import_module(package)
    found = []
    for info in sorted(pkgutil.walk_packages(root.__path__, prefix=f"{package}."), key=lambda i: i.name):
        module = importlib.import_module(info.name)
        declared = getattr(module, attribute, {})
        pairs = declared.items() if isinstance(declared, dict) else ((cls.name, cls) for cls in declared)
        found += [(name, cls, info.name) for name, cls in pairs]
    return tuple(sorted(found, key=lambda entry: (entry[0], entry[2])))


def discover(package: str, attribute: str, variant: Callable[[type], Any] | None = None) -> dict:
    """Name -> class (or, with ``variant``, name -> {variant(class): class}) over ``package``'s modules.

    ``variant`` lets one name have several implementations told apart by a class property (an algorithm
    name on different environments: ``ffgg`` on client data and on the quadratic problem).

    Raises:
        RuntimeError: two modules declare the same name (and variant).
    """
    out: dict = {}
    where: dict = {}
    for name, cls, module in declarations(package, attribute):
        slot = (name, None if variant is None else variant(cls))
        if slot in where:
            raise RuntimeError(f"{attribute[:-1].lower()} '{name}' declared by {where[slot]} and {module}")
        where[slot] = module
        if variant is None:
            out[name] = cls
        else:
            out.setdefault(name, {})[slot[1]] = cls
    return out
