"""Find the algorithms and problems of the package by walking its modules.

A module declares what it provides with a module-level mapping, ``ALGORITHMS = {"fedavg": FedAvg}`` or
``PROBLEMS = {"ffgg_quadratic": FFGGQuadratic}``; adding an algorithm is adding a module, and no
registry file is edited (so adding one never changes the code fingerprint of the others' runs).
"""

from __future__ import annotations

import importlib
import pkgutil
from functools import cache


@cache
def discover(package: str, attribute: str) -> dict[str, type]:
    """Name -> class over every module under ``package`` that defines ``attribute``.

    Raises:
        RuntimeError: two modules declare the same name.
    """
    root = importlib.import_module(package)
    found: dict[str, type] = {}
    where: dict[str, str] = {}
    for info in sorted(pkgutil.walk_packages(root.__path__, prefix=f"{package}."), key=lambda i: i.name):
        module = importlib.import_module(info.name)
        for name, cls in getattr(module, attribute, {}).items():
            if name in found:
                raise RuntimeError(
                    f"{attribute[:-1].lower()} '{name}' declared by {where[name]} and {info.name}"
                )
            found[name], where[name] = cls, info.name
    return dict(sorted(found.items()))
