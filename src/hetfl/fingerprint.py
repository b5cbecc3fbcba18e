"""Content fingerprints of the code a job runs, for Snakemake's params trigger.

Snakemake reruns a job when its ``params`` change. Every rule passes, as its ``code`` param, the
fingerprint of the code its jobs run (:func:`stage_fingerprint`): its workflow script and every hetfl
module the script imports, transitively, plus the modules of the job's own algorithm, model, dataset or
partition scheme that the caller names. So editing ``pfedme.py`` reruns exactly the pFedMe runs (and
what reads their outputs), editing ``plotting.py`` redraws the figures and nothing else, and editing
the engine reruns every training job. The hash is over each file's AST without its docstrings, so
comments, docstrings, formatting and modification times do not count: editing documentation, or a
checkout that touches every file, reruns nothing. Snakemake's own ``code`` trigger (a script newer than
its outputs) is then redundant and harmful, and the profiles leave it out (``rerun-triggers``).

Modules that cannot change any output file (``NEUTRAL``: error messages, the scripts' log redirection)
are left out of every fingerprint: rewording an error reruns nothing.

A package's ``__init__`` counts only when code imports names from the package itself
(``from hetfl.models import build_model``), not when it imports a submodule
(``from hetfl.data.dataset import Dataset``): package ``__init__`` files only re-export. The algorithm
and problem registries (``hetfl.algorithms``, ``hetfl.problems``) are never followed: they map names to
modules as strings, and adding an algorithm must not rerun the others; the model and dataset registries
(``hetfl.models``, ``hetfl.data.registry``) discover their entries instead of importing them, and the
partition schemes' table (``hetfl.data.partitioners``) is not followed either: the caller names the one
module of each kind a job uses (``hetfl.pipeline.config.train_modules`` and its siblings).
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent  # .../hetfl
SCRIPTS = ROOT.parents[1] / "workflow" / "scripts"  # the stages' scripts, in the checkout beside src/
PACKAGE = "hetfl"
# the registries, names -> modules: their entries are fingerprinted where a job uses them (the run's
# algorithm, problem, model; the dataset's module; the partition's scheme), never all of them
EXCLUDE = frozenset({"hetfl.algorithms", "hetfl.problems", "hetfl.data.partitioners"})
NEUTRAL = frozenset({"hetfl.errors", "hetfl.logs"})
"""Modules whose code cannot change an output file, declared once here and left out of every fingerprint:
``hetfl.errors`` (the exception classes and the text of their messages: raised on bad input, shown in a
log, never written into a result) and ``hetfl.logs`` (where a stage script's output goes). Keep them that
way: code that decides anything belongs in a module that is fingerprinted."""
_EXTERNAL: dict[str, Path | None] = {}  # modules outside hetfl: named ones (a plugin, a user's model), and
# the modules of their own top-level packages that they import (None: not a module with a source file)
_EXTERNAL_ROOTS: set[str] = set()  # top-level packages of the named outside modules


def _locate(module: str) -> Path | None:
    """The source file of a module outside hetfl, found with ``importlib`` (None if none)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError, AttributeError):  # e.g. ``pkg.mod.Name``: not a module
        return None
    return Path(spec.origin) if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def _path(module: str) -> Path | None:
    """The source file of a hetfl module, of a named module outside hetfl or of a module of its top-level
    package (None for other packages: their imports are not followed)."""
    parts = module.split(".")
    if parts[0] != PACKAGE:
        if module not in _EXTERNAL and parts[0] in _EXTERNAL_ROOTS:
            _EXTERNAL[module] = _locate(module)
        return _EXTERNAL.get(module)
    base = ROOT.joinpath(*parts[1:])
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    return None


def _is_package(module: str) -> bool:
    path = _path(module)
    return path is not None and path.name == "__init__.py"


def _strip_docstrings(tree: ast.Module) -> ast.Module:
    """``tree`` without the docstrings of its module, classes and functions (in place)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    node.body = body[1:]
    return tree


def _imports(tree: ast.Module, here: str) -> tuple[str, ...]:
    """The fingerprinted modules a parsed file imports (``here``: the package relative imports start from),
    without the registries (``EXCLUDE``) and the modules that cannot change an output (``NEUTRAL``)."""
    deps: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = here.rsplit(".", node.level - 1)[0] if node.level > 1 else here
                base = f"{anchor}.{base}" if base else anchor
            targets = []
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if _path(sub) else base)
        else:
            continue
        deps.update(t for t in targets if _path(t) is not None and t not in EXCLUDE | NEUTRAL)
    return tuple(sorted(deps))


@cache
def _parse(module: str) -> tuple[str, tuple[str, ...]]:
    """(AST dump without docstrings, hetfl modules it imports) of one hetfl module."""
    path = _path(module)
    tree = _strip_docstrings(ast.parse(path.read_text(), filename=str(path)))
    here = module if _is_package(module) else module.rpartition(".")[0]
    return ast.dump(tree), _imports(tree, here)


@cache
def _parse_script(path: Path) -> tuple[str, tuple[str, ...]]:
    """(AST dump without docstrings, hetfl modules it imports) of a workflow script."""
    tree = _strip_docstrings(ast.parse(path.read_text(), filename=str(path)))
    return ast.dump(tree), _imports(tree, "")


def clear_cache() -> None:
    """Forget the parsed files (after editing one in the same process, as the tests do)."""
    _parse.cache_clear()
    _parse_script.cache_clear()


def closure(modules: list[str]) -> list[str]:
    """Every hetfl module the given modules import, transitively (including themselves), sorted.

    A given module outside hetfl (an algorithm or problem registered from another package, the module of a
    ``name: torch`` model) is located with ``importlib`` and hashed too; of its imports, hetfl's and those
    of its own top-level package (``mypackage.layers`` for ``mypackage.models``) are followed.
    """
    for module in modules:
        if not module.startswith(PACKAGE + ".") and _EXTERNAL.get(module) is None:
            spec = importlib.util.find_spec(module)
            if spec is None or not spec.origin:
                raise ModuleNotFoundError(f"no module '{module}'")
            _EXTERNAL[module] = Path(spec.origin)
            _EXTERNAL_ROOTS.add(module.split(".")[0])
    seen: set[str] = set()
    stack = list(modules)
    while stack:
        module = stack.pop()
        if module in seen:
            continue
        if _path(module) is None:
            raise ModuleNotFoundError(f"no module '{module}' under {ROOT}")
        seen.add(module)
        stack.extend(_parse(module)[1])
    return sorted(seen)


def fingerprint(modules: list[str]) -> str:
    """SHA-256 (16 hex digits) over the ASTs of ``closure(modules)``."""
    h = hashlib.sha256()
    for module in closure(modules):
        h.update(module.encode())
        h.update(_parse(module)[0].encode())
    return h.hexdigest()[:16]


def stage_fingerprint(stage: str, modules: tuple[str, ...] | list[str] = ()) -> str:
    """The fingerprint of what a job of a workflow stage runs: SHA-256 (16 hex digits) over the AST of the
    stage's script (``workflow/scripts/<stage>.py``, docstrings dropped) and the ASTs of
    ``closure(the script's hetfl imports + modules)``.

    Args:
        stage: the stage, by its script's name (``train``, ``aggregate``, ...).
        modules: the job's own modules the script does not import by name (a run's algorithm and model, a
            dataset's module, a partition's scheme: the registries reach them by name, see the module
            docstring; ``hetfl.pipeline.config.train_modules`` and its siblings).

    Raises:
        FileNotFoundError: no script of that name beside ``src/`` (hetfl installed without its workflow).
        ModuleNotFoundError: a named module does not exist.
    """
    path = SCRIPTS / f"{stage}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no workflow script for stage '{stage}': {path} is missing")
    tree, imports = _parse_script(path)
    h = hashlib.sha256(b"script\0" + tree.encode())
    h.update(fingerprint([*imports, *modules]).encode())
    return h.hexdigest()[:16]
