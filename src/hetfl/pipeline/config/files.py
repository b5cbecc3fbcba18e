"""Config files: merged as ``--configfile`` merges them, and the studies of their ``study_files`` loaded."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from hetfl.errors import ConfigError


def merge_config(base: dict, override: dict) -> dict:
    """``override`` merged over ``base`` key by key (nested mappings merged, other values replaced),
    as Snakemake merges ``--configfile`` files over the workflow's ``configfile``."""
    out = dict(base)
    for key, value in override.items():
        out[key] = (
            merge_config(out[key], value)
            if isinstance(value, dict) and isinstance(out.get(key), dict)
            else value
        )
    return out


def expand_study_files(config: dict, root: str | os.PathLike = ".") -> dict:
    """``config`` with the studies of the files its ``study_files`` lists, in order, under its own ``studies``:
    a study of ``studies`` is merged over the file's study of that name key by key (as ``--configfile``
    merges files; so ``--configfile config/config.yaml my.yaml`` overrides a default study), or added.

    ``study_files`` are YAML files holding ``studies:`` only, at paths relative to ``root`` (the directory the
    workflow runs in: the repository's root). A config without ``study_files`` is returned as it is. The
    workflow calls this on its merged config before validating it; :func:`load_config` on the files it reads.

    Raises:
        ConfigError: ``study_files`` is not a list of paths; a file is missing, not YAML, or holds anything but
            a mapping ``studies``; a study is defined in two files.
    """
    files = config.get("study_files")
    if files is None:
        return resolve_extends(config)
    if not isinstance(files, list) or not all(isinstance(f, str) and f for f in files):
        raise ConfigError("study_files", f"expected a list of YAML file paths, got {files!r}")
    studies: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for i, name in enumerate(files):
        key, path = f"study_files[{i}]", Path(root) / name
        if name in files[:i]:
            raise ConfigError(key, f"{name} is listed twice")
        if not path.is_file():
            raise ConfigError(
                key, f"no such study file: {name} (paths are relative to {Path(root).resolve()})"
            )
        try:
            content = yaml.safe_load(path.read_text())
        except yaml.YAMLError as err:
            raise ConfigError(key, f"{name} is not valid YAML: {err}") from None
        if (
            not isinstance(content, dict)
            or set(content) != {"studies"}
            or not isinstance(content["studies"], dict)
        ):
            raise ConfigError(
                key, f"{name} must hold one mapping, 'studies' (name -> study), and nothing else"
            )
        for study, spec in content["studies"].items():
            if study in origin:
                raise ConfigError(
                    f"studies.{study}", f"defined in two study files: {origin[study]} and {name}"
                )
            origin[study] = name
            studies[study] = spec
    inline = config.get("studies") or {}
    if not isinstance(inline, dict):
        raise ConfigError("studies", f"expected a mapping, got {type(inline).__name__}")
    return resolve_extends({**config, "studies": merge_config(studies, inline)})


def resolve_extends(config: dict) -> dict:
    """``config`` with every study that names another in ``extends`` replaced by that study's spec with its
    own keys merged over it (:func:`merge_config`: nested mappings such as ``dataset``, ``partition`` or
    ``runs`` merged key by key, other values replaced) and ``extends`` removed. The study extended may itself
    extend another; it need not be selected (e.g. ``config/paper_cpu.yaml`` loads the default suite's minimax
    study file and reruns its studies on Fashion-MNIST). A config without ``extends`` is returned as it is.

    Raises:
        ConfigError: ``studies.<name>.extends`` is not a study's name (naming the studies there are), or the
            studies extend each other in a cycle.
    """
    studies = config.get("studies")
    if not isinstance(studies, dict) or not any(
        isinstance(spec, dict) and "extends" in spec for spec in studies.values()
    ):
        return config
    resolved: dict[str, Any] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> Any:
        spec = studies[name]
        if name in resolved or not isinstance(spec, dict) or "extends" not in spec:
            return resolved.setdefault(name, spec)
        base, key = spec["extends"], f"studies.{name}.extends"
        if not isinstance(base, str) or base not in studies:
            raise ConfigError(
                key, f"expected the name of a study, got {base!r}; studies: {', '.join(sorted(studies))}"
            )
        if base in chain:
            raise ConfigError(key, f"studies extend each other in a cycle: {' -> '.join((*chain, base))}")
        parent = resolve(base, (*chain, base))
        own = {k: v for k, v in spec.items() if k != "extends"}
        resolved[name] = merge_config(parent, own) if isinstance(parent, dict) else own
        return resolved[name]

    for name in studies:
        resolve(name, (name,))
    return {**config, "studies": resolved}


def load_config(paths: Iterable[str | os.PathLike], root: str | os.PathLike = ".") -> dict:
    """The config of YAML files as the workflow reads them: merged key by key, later ones over earlier ones
    (as ``--configfile`` merges them), then their ``study_files`` loaded (:func:`expand_study_files`, paths
    relative to ``root``). ``load_config(["config/config.yaml"])`` is the default suite.

    Raises:
        yaml.YAMLError: a file is not valid YAML.
        ConfigError: as :func:`expand_study_files`.
    """
    config: dict = {}
    for path in paths:
        config = merge_config(config, yaml.safe_load(Path(path).read_text()) or {})
    return expand_study_files(config, root)
