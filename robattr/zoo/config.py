"""A zoo model's configuration and its key: everything that defines the model, validated,
with the defaults filled in, as canonical JSON; the key is its sha256 (see
:mod:`robattr.zoo`)."""
from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from robattr import catalog
from robattr.utils import check_int, check_number

__all__ = ["ZOO_FORMAT", "DEFAULTS", "METHOD_DEFAULTS", "TRAIN_SIZE_ENV", "RECIPE_ENV",
           "default_batch_size", "effective_train_size", "effective_recipe", "config",
           "config_hash"]

#: Environment variable with the default ``train_size`` (set from a profile's ``train_size:``).
TRAIN_SIZE_ENV = catalog.TRAIN_SIZE_ENV

#: Environment variable with the default recipe per dataset (set from a profile's ``recipe:``).
RECIPE_ENV = catalog.RECIPE_ENV

#: Bump when the stored format or the meaning of a configuration changes: every key changes.
ZOO_FORMAT = 1

#: Training defaults, chosen for digits on 2 CPU cores (a digits cnn: a few seconds, >95%).
DEFAULTS: dict[str, Any] = {
    "epochs": 20,
    "lr": 1e-3,
    "batch_size": 64,
    "optimizer": "adam",
    "weight_decay": 0.0,
    "milestones": None,
    "augment": "none",
    "schedule": "step",
}


#: Training defaults that belong to a method. IG-NORM trains at 000's batch of 16 (its
#: Table 1): its attribution term is summed over the batch, so the batch size weighs it
#: against the cross-entropy and is part of the method. Every IG-NORM model of the book
#: that does not set its batch is then one model, trained once.
METHOD_DEFAULTS: dict[str, dict[str, Any]] = {"ig_norm": {"batch_size": 16}}


def default_batch_size(method: str) -> int:
    """The batch size a zoo model of ``method`` trains with when the caller sets none."""
    return METHOD_DEFAULTS.get(method, {}).get("batch_size", DEFAULTS["batch_size"])


def effective_train_size(value=None, method: str | None = None) -> int | None:
    """The training-set size in force for a model of ``method``: ``value`` when given, else
    ``$ROBATTR_TRAIN_SIZE``, else ``None`` (the whole train split). Either may be an
    integer or a per-method map ``{"default": n, <loss name>: n}``
    (:func:`robattr.catalog.check_train_size`), read for ``method``."""
    if value is None:
        value = catalog.train_size_from_env()
        if value is None:
            return None
    value = catalog.train_size_for(catalog.check_train_size(value), method)
    return None if value is None else check_int("train_size", value, 1)


def effective_recipe(dataset: str, augment: str | None = None,
                     schedule: str | None = None) -> tuple[str, str]:
    """The ``(augment, schedule)`` a model of ``dataset`` trains with: each value when
    given, else ``$ROBATTR_RECIPE``'s entry for the dataset (JSON, see
    :data:`robattr.catalog.RECIPE_ENV`; a profile's ``recipe:`` sets it), else the
    defaults (``"none"``, ``"step"``)."""
    spec = {}
    if augment is None or schedule is None:
        spec = catalog.recipes_from_env().get(dataset, {})
    return (augment if augment is not None else spec.get("augment", DEFAULTS["augment"]),
            schedule if schedule is not None else spec.get("schedule", DEFAULTS["schedule"]))


def _dataset_id(dataset: Any) -> str:
    if not isinstance(dataset, (str, os.PathLike)):
        raise TypeError(f"dataset must be a dataset name or an ImageFolder path, got {dataset!r}")
    name = os.fspath(dataset)
    from robattr import data

    if name not in data.DATASETS and os.path.isdir(os.path.expanduser(name)):
        return os.path.realpath(os.path.expanduser(name))
    return name


def _canonical_json(obj: Any) -> str:
    try:
        return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                          allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"configuration is not plain JSON data (numbers, strings, lists): {e}") from e


def config(dataset: str, arch: str, method: str = "ce", *, epochs: int = DEFAULTS["epochs"],
           lr: float = DEFAULTS["lr"], batch_size: int | None = None,
           optimizer: str = DEFAULTS["optimizer"],
           weight_decay: float = DEFAULTS["weight_decay"],
           milestones: list[int] | None = DEFAULTS["milestones"], seed: int = 0,
           activation: str = "relu", beta: float | None = None,
           train_size: int | None = None, augment: str | None = None,
           schedule: str | None = None, **loss_hparams: Any) -> dict[str, Any]:
    """The full, validated, canonical configuration of a zoo model (what its key hashes).

    ``train_size`` (default: :func:`effective_train_size`, i.e. ``$ROBATTR_TRAIN_SIZE``)
    trains on the first ``train_size`` images of the train split; it is in the
    configuration only when set. ``augment`` and ``schedule`` (the recipe:
    :mod:`robattr.train.batches`; default: :func:`effective_recipe`, i.e. the dataset's
    entry in ``$ROBATTR_RECIPE``, else ``"none"`` and ``"step"``) are in it only when they
    differ from ``"none"`` and ``"step"``, so that the models trained before they existed
    keep their keys. ``batch_size`` left out: :func:`default_batch_size` (64; IG-NORM 16,
    :data:`METHOD_DEFAULTS`)."""
    from robattr.train.batches import check_augment, check_schedule

    from robattr.models import ARCHS, _check_activation
    from robattr.train import OPTIMIZERS, make_loss

    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {', '.join(ARCHS)}, got {arch!r}")
    if not isinstance(method, str):
        raise TypeError(f"method must be a loss name (one of robattr.train.LOSSES), got {method!r}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if milestones is not None:
        milestones = sorted(check_int("milestones", m, 1) for m in milestones) or None
    cfg = {
        "zoo_format": ZOO_FORMAT,
        "dataset": _dataset_id(dataset),
        "arch": arch,
        "method": method,
        "loss": make_loss(method, **loss_hparams).hparams,
        "epochs": check_int("epochs", epochs, 1),
        "lr": check_number("lr", lr, positive=True),
        "batch_size": check_int("batch_size", default_batch_size(method)
                                if batch_size is None else batch_size, 1),
        "optimizer": optimizer,
        "weight_decay": check_number("weight_decay", weight_decay),
        "milestones": milestones,
        "seed": check_int("seed", seed, 0),
        "activation": activation,
        "beta": _check_activation(activation, beta),
    }
    n_train = effective_train_size(train_size, method)
    if n_train is not None:
        cfg["train_size"] = n_train
    augment, schedule = effective_recipe(cfg["dataset"], augment, schedule)
    if check_augment(augment) != DEFAULTS["augment"]:
        cfg["augment"] = augment
    if check_schedule(schedule) != DEFAULTS["schedule"]:
        if milestones:
            raise ValueError(f"milestones belong to the 'step' schedule, not {schedule!r}")
        cfg["schedule"] = schedule
    return json.loads(_canonical_json(cfg))  # tuples -> lists, exactly what the JSON stores


def config_hash(dataset: str, arch: str, method: str = "ce", **hparams: Any) -> str:
    """sha256 (hex) of the canonical JSON of :func:`config` -- the zoo key."""
    return _key(config(dataset, arch, method, **hparams))


def _key(cfg: dict[str, Any]) -> str:
    return hashlib.sha256(_canonical_json(cfg).encode()).hexdigest()
