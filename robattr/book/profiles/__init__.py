"""Profiles, and the parameter values one notebook runs with.

A *profile* (``robattr/book/profiles/<name>.yml``, beside this module) maps notebook
keys to parameter values; ``quick`` (the default) keeps the notebooks' own defaults,
``paper`` sets the papers' scale, ``smoke`` is the tiny profile the tests use::

    defaults:            # applied to every notebook that has the parameter
      device: auto
    notebooks:
      example/digits_saliency:
        epochs: 2

A chapter keeps its notebooks' settings for every profile in one file,
``profiles/chapters/<chapter>.yml``. A profile may also set ``precision:`` (the
precision on CUDA, :mod:`robattr.precision`), ``train_size:`` (the zoo trains its models on
the first *n* images of each train split, :func:`robattr.zoo.effective_train_size`; an
integer, or ``{default: n, <notebook glob>: n}``; any of those integers may be a
per-method map ``{default: n, ig_norm: n, ...}``, so the costliest losses train on fewer
images), ``recipe:`` (the zoo's training recipe
per dataset, ``{cifar10: {augment: crop+flip, schedule: onecycle}}``: what a model of that
dataset trains with unless its notebook says otherwise, :func:`robattr.zoo.effective_recipe`)
and
``resources:`` (CPUs and GPUs per notebook, for the executors). :func:`resolve` gives one notebook's values: its
defaults ← the profile ← the command line, checked against the notebook's rules.
"""
from __future__ import annotations

import fnmatch
from pathlib import Path
from typing import Any

import yaml

from robattr import context
from robattr.book.notebooks import Notebook
from robattr.book.params import Parameter, ParameterError, check_values, coerce, read_yaml
from robattr.catalog import PRECISIONS, check_recipes, check_train_size

__all__ = ["PROFILES", "load_profile", "parse_value", "resolve", "check_profile_keys",
           "precision_env", "profile_env", "effective_precision", "effective_train_size",
           "effective_recipe",
           "profile_label", "resources"]

PROFILES = ("quick", "medium", "paper", "smoke")
_SECTIONS = {"defaults", "notebooks", "description", "resources", "precision", "train_size",
             "recipe"}
_PROFILE_DIR = Path(__file__).parent


def load_profile(name: str) -> dict[str, Any]:
    """A profile by name (``quick``, ``medium``, ``paper``, ``smoke``) or by path to a
    YAML file."""
    path = Path(name) if name.endswith((".yml", ".yaml")) else _PROFILE_DIR / f"{name}.yml"
    if not path.is_file():
        raise ParameterError(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)} "
                             "(or a path to a .yml file)")
    data = read_yaml(path.read_text()) or {}
    unknown = set(data) - _SECTIONS
    if unknown:
        raise ParameterError(f"profile {name!r}: unknown sections {sorted(unknown)}")
    if data.get("precision", "fp32") not in PRECISIONS:
        raise ParameterError(f"profile {name!r}: precision must be one of "
                             f"{', '.join(PRECISIONS)}, got {data['precision']!r}")
    n_train = data.get("train_size")
    for value in (n_train.values() if isinstance(n_train, dict) else [n_train]):
        if value is None:
            continue
        try:
            check_train_size(value)
        except ValueError:
            raise ParameterError(f"profile {name!r}: train_size must be an integer >= 1 "
                                 f"(or a map from 'default' and notebook globs to one); a "
                                 f"value may be a per-method map {{default: n, <loss>: n}}, "
                                 f"got {value!r}") from None
    recipe = None
    if data.get("recipe") is not None:
        try:
            recipe = check_recipes(data["recipe"], where=f"profile {name!r}: recipe")
        except ValueError as e:
            raise ParameterError(str(e)) from None
    for pattern, spec in (data.get("resources") or {}).items():
        bad = set(spec or {}) - {"cpus", "gpus"}
        if bad or any(not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0
                      for v in (spec or {}).values()):
            raise ParameterError(f"profile {name!r}: resources[{pattern!r}] must map 'cpus' "
                                 f"and 'gpus' to numbers >= 0, got {spec!r}")
    notebooks = dict(data.get("notebooks") or {})
    if path.parent == _PROFILE_DIR:
        for key, params in _chapter_entries(name).items():
            if key in notebooks:
                raise ParameterError(f"profile {name!r}: notebook {key!r} is set both in "
                                     f"{path.name} and in chapters/")
            notebooks[key] = params
    return {"name": path.stem, "defaults": data.get("defaults") or {}, "notebooks": notebooks,
            "resources": data.get("resources") or {}, "precision": data.get("precision"),
            "train_size": n_train, "recipe": recipe,
            "description": data.get("description", "")}


def _chapter_entries(profile: str) -> dict[str, dict]:
    """A chapter keeps its notebooks' settings for every profile in one file,
    ``profiles/chapters/<chapter>.yml``: ``{profile: {notebook key: {param: value}}}``."""
    entries: dict[str, dict] = {}
    for path in sorted((_PROFILE_DIR / "chapters").glob("*.yml")):
        data = read_yaml(path.read_text()) or {}
        unknown = set(data) - set(PROFILES)
        if unknown:
            raise ParameterError(f"profiles/chapters/{path.name}: unknown profiles "
                                 f"{sorted(unknown)}; known: {', '.join(PROFILES)}")
        for key, params in (data.get(profile) or {}).items():
            if not key.startswith(f"{path.stem}/"):
                raise ParameterError(f"profiles/chapters/{path.name}: notebook {key!r} is "
                                     f"not in chapter {path.stem!r}")
            entries[key] = params or {}
    return entries


def parse_value(text: str, param: Parameter, notebook: str | None = None) -> Any:
    """Read a command-line value as YAML and check its type against the parameter's rule
    (its range is checked by :func:`resolve`, which sees the other parameters)."""
    try:
        value = read_yaml(text) if isinstance(text, str) else text
    except yaml.YAMLError:
        value = text
    return coerce(param, value, notebook)


def resolve(nb: Notebook, profile: str | dict = "quick",
            overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full parameter dict for one notebook: defaults ← profile ← overrides, checked
    against the notebook's declared rules.

    Unknown names (in the profile's entry for this notebook or in ``overrides``) and
    values that break their rule raise :class:`~robattr.book.params.ParameterError`,
    naming the notebook and the parameter, before any work.
    """
    prof = load_profile(profile) if isinstance(profile, str) else profile
    valid = ", ".join(nb.parameters)
    values = dict(nb.defaults)
    for name, value in prof["defaults"].items():
        if name in nb.parameters:
            values[name] = value
    layers = [("profile", prof["notebooks"].get(nb.key) or {}), ("command line", overrides or {})]
    for where, layer in layers:
        for name, value in layer.items():
            if name not in nb.parameters:
                raise ParameterError(f"{nb.key}: unknown parameter {name!r} ({where}); "
                                     f"valid parameters: {valid}")
            values[name] = value
    return check_values(nb.parameters, values, notebook=nb.key)


def check_profile_keys(prof: dict, notebooks: list[Notebook], name: str) -> None:
    """Refuse a profile that names a notebook the book does not have."""
    keys = {nb.key for nb in notebooks}
    missing = sorted(set(prof["notebooks"]) - keys)
    if missing:
        raise ParameterError(f"profile {name!r} names notebooks that do not exist: {missing}")


def precision_env(prof: dict) -> dict[str, str]:
    """``{ROBATTR_PRECISION: mode}`` when the profile sets ``precision:`` (``fp32`` or
    ``tf32``, see :mod:`robattr.precision`), else nothing: the kernel inherits the
    caller's environment, and robattr's default is full fp32."""
    return {context.PRECISION_ENV: prof["precision"]} if prof.get("precision") else {}


def _profile_train_size(prof: dict, key: str | None):
    """The profile's ``train_size:`` for notebook ``key``: an integer, or a map
    ``{default: n, <glob>: n}`` whose last matching entry wins (like ``resources:``). An
    entry may itself be a per-method map ``{default: n, <loss name>: n}``
    (:func:`robattr.catalog.check_train_size`), which is returned whole."""
    value = prof.get("train_size")
    if not isinstance(value, dict) or _per_method(value):
        return value
    out = None
    for pattern, n in value.items():
        if pattern == "default" or (key is not None and fnmatch.fnmatch(key, pattern)):
            out = n
    return out


def _per_method(value: dict) -> bool:
    """Whether a ``train_size:`` map is a per-method map (keys are loss names) rather than
    a map of notebook globs."""
    from robattr.catalog import LOSS_NAMES

    return any(k in LOSS_NAMES for k in value)


def profile_env(prof: dict, key: str | None = None) -> dict[str, str]:
    """The environment a profile gives notebook ``key``'s kernel: :func:`precision_env`,
    ``ROBATTR_TRAIN_SIZE`` when it sets ``train_size:`` and ``ROBATTR_RECIPE`` when it sets
    ``recipe:`` (both read by :mod:`robattr.zoo`)."""
    import json

    from robattr.catalog import RECIPE_ENV, TRAIN_SIZE_ENV

    env = precision_env(prof)
    n_train = _profile_train_size(prof, key)
    if n_train:
        env[TRAIN_SIZE_ENV] = (json.dumps(n_train, sort_keys=True) if isinstance(n_train, dict)
                               else str(n_train))
    if prof.get("recipe"):
        env[RECIPE_ENV] = json.dumps(prof["recipe"], sort_keys=True)
    return env


def effective_precision(prof: dict) -> str:
    """The precision a notebook runs with: the profile's ``precision:``, else
    ``$ROBATTR_PRECISION``, else ``fp32``."""
    return prof.get("precision") or context.current().precision or "fp32"


def effective_train_size(prof: dict, key: str | None = None):
    """The training-set size the zoo uses for notebook ``key`` in this profile: the
    profile's ``train_size:`` (for that key), else ``$ROBATTR_TRAIN_SIZE``, else ``None``
    (whole train splits). An integer, or a per-method map ``{default: n, <loss>: n}``."""
    from robattr.catalog import train_size_from_env

    n_train = _profile_train_size(prof, key)
    if n_train:
        return n_train
    try:
        return train_size_from_env()
    except ValueError as e:
        raise ParameterError(str(e)) from None


def effective_recipe(prof: dict) -> dict[str, dict[str, str]] | None:
    """The zoo's recipes by dataset in this profile: the profile's ``recipe:``, else
    ``$ROBATTR_RECIPE`` (JSON), else ``None`` (no augmentation, step schedule)."""
    from robattr.catalog import recipes_from_env

    if prof.get("recipe"):
        return prof["recipe"]
    try:
        return recipes_from_env() or None
    except ValueError as e:
        raise ParameterError(str(e)) from None


def profile_label(nb: Notebook, params: dict[str, Any], prof: dict) -> str:
    """How a run's claims name their profile: ``quick``, or ``quick, eps changed`` when
    parameters differ from the profile's values."""
    base = resolve(nb, prof)
    changed = [k for k in params if params[k] != base.get(k)]
    name = prof.get("name", "custom")
    return f"{name}, {', '.join(changed)} changed" if changed else name


def resources(prof: dict, key: str) -> dict[str, float]:
    """CPUs and GPUs one execution of notebook ``key`` asks for: the profile's
    ``resources`` section, ``{default: {cpus, gpus}, <glob>: {...}}``, last match wins."""
    out = {"cpus": 1.0, "gpus": 0.0}
    for pattern, spec in (prof.get("resources") or {}).items():
        if pattern == "default" or fnmatch.fnmatch(key, pattern):
            out.update({k: float(v) for k, v in (spec or {}).items()})
    return out
