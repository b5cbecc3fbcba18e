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
        return config
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
    return {**config, "studies": merge_config(studies, inline)}


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
