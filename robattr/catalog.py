"""Names and sizes that are known without importing torch.

The command line checks notebook parameters against these before anything heavy is
imported, so a bad value is refused at once (:mod:`robattr.book.params`). :mod:`robattr.data`,
:mod:`robattr.models` and :mod:`robattr.train` take their names from here, and the tests
check that the sizes agree with what :func:`robattr.data.info` and
:func:`robattr.data.load` return.
"""
from __future__ import annotations

from typing import Any

from robattr import context

__all__ = ["DATASETS", "ARCHS", "LOSS_NAMES", "BASELINE_LOSSES", "SHAPES", "NUM_CLASSES", "TEST_SIZES",
           "PRECISIONS", "TRAIN_SIZE_ENV", "check_train_size", "train_size_for",
           "train_size_from_env", "RECIPE_ENV", "AUGMENTATIONS", "SCHEDULES",
           "check_recipes", "recipes_from_env"]

#: Datasets :func:`robattr.data.load` knows by name (any other value is an ImageFolder path).
DATASETS = ("digits", "mnist", "fashion_mnist", "cifar10", "flowers102")

#: Architectures :func:`robattr.models.build` knows.
ARCHS = ("mlp", "cnn", "lenet", "resnet18_cifar", "resnet20", "resnet18", "resnet50")

#: The training losses robattr registers (:data:`robattr.train.LOSSES`; a user may add more).
LOSS_NAMES = ("ce", "at", "trades", "ig_norm", "igr", "ssr", "hessian", "l2", "cosd", "l2_cosd",
              "atex", "iga", "advaat")

#: The baselines the papers compare against (Tang et al.'s ATEX, Singh et al.'s IGA / ART,
#: Ivankay et al.'s AdvAAT): rows of the chapters' tables, not methods a paper proposes
#: (ATEX needs a trained teacher). :data:`LOSS_NAMES` without them are the papers' own.
BASELINE_LOSSES = ("atex", "iga", "advaat")

#: Input shape (C, H, W) of the datasets whose size is fixed (flowers102's is a loader option).
SHAPES = {"digits": (1, 8, 8), "mnist": (1, 28, 28), "fashion_mnist": (1, 28, 28),
          "cifar10": (3, 32, 32)}

#: Number of classes.
NUM_CLASSES = {"digits": 10, "mnist": 10, "fashion_mnist": 10, "cifar10": 10, "flowers102": 102}

#: Images in the test split (digits: robattr's stratified 20 % split of sklearn's 1797).
TEST_SIZES = {"digits": 360, "mnist": 10000, "fashion_mnist": 10000, "cifar10": 10000,
              "flowers102": 6149}

#: process-wide precision modes on CUDA (robattr.precision; a profile's ``precision:``)
PRECISIONS = ("fp32", "tf32")

#: Environment variable with the zoo's default training-set size (robattr.zoo; a profile's
#: ``train_size:`` sets it for its notebooks): an integer, or JSON ``{"default": n,
#: <loss name>: n}`` (:func:`check_train_size`)
TRAIN_SIZE_ENV = context.TRAIN_SIZE_ENV

#: Environment variable with the zoo's default training recipe per dataset (robattr.zoo; a
#: profile's ``recipe:`` sets it): JSON ``{dataset: {"augment": ..., "schedule": ...}}``
RECIPE_ENV = context.RECIPE_ENV

#: Training augmentations and learning-rate schedules (robattr.train.batches)
AUGMENTATIONS = ("none", "crop", "flip", "crop+flip")
SCHEDULES = ("step", "cosine", "onecycle")


def check_recipes(recipes: Any, where: str = f"${RECIPE_ENV}") -> dict[str, dict[str, str]]:
    """``recipes`` checked: a map from dataset names to ``{augment, schedule}`` (either may
    be left out), each value one of :data:`AUGMENTATIONS` / :data:`SCHEDULES`. Raises
    ``ValueError`` naming ``where``."""
    if not isinstance(recipes, dict):
        raise ValueError(f"{where} must map dataset names to {{augment, schedule}}, "
                         f"got {recipes!r}")
    out: dict[str, dict[str, str]] = {}
    for name, spec in recipes.items():
        if name not in DATASETS:
            raise ValueError(f"{where}: unknown dataset {name!r}; known: {', '.join(DATASETS)}")
        if not isinstance(spec, dict) or not spec or set(spec) - {"augment", "schedule"}:
            raise ValueError(f"{where}[{name!r}] must be a map with 'augment' and/or "
                             f"'schedule', got {spec!r}")
        for field, allowed in (("augment", AUGMENTATIONS), ("schedule", SCHEDULES)):
            if field in spec and spec[field] not in allowed:
                raise ValueError(f"{where}[{name!r}]: {field} must be one of "
                                 f"{', '.join(allowed)}, got {spec[field]!r}")
        out[name] = {k: spec[k] for k in ("augment", "schedule") if k in spec}
    return out


def check_train_size(value, where: str = "train_size"):
    """A training-set size as the zoo takes it: an integer >= 1, or a map from ``default``
    and loss names (:data:`LOSS_NAMES`) to one (a per-method size: the costliest losses can
    train on fewer images). Returns it unchanged; raises ``ValueError`` otherwise."""
    def count(v) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 1

    if isinstance(value, dict):
        bad = [k for k in value if k != "default" and k not in LOSS_NAMES]
        if bad or not value or not all(count(v) for v in value.values()):
            raise ValueError(f"{where}: a per-method size maps 'default' and loss names "
                             f"({', '.join(LOSS_NAMES)}) to integers >= 1, got {value!r}")
        return value
    if not count(value):
        raise ValueError(f"{where} must be an integer >= 1 or a map {{default: n, <loss>: n}}, "
                         f"got {value!r}")
    return value


def train_size_for(value, method: str | None):
    """The size a model of ``method`` trains on under ``value`` (:func:`check_train_size`):
    the integer itself, or the map's entry for the method, else its ``default``, else
    ``None`` (the whole split)."""
    if isinstance(value, dict):
        return value.get(method, value.get("default")) if method else value.get("default")
    return value


def train_size_from_env():
    """``$ROBATTR_TRAIN_SIZE``: an integer or JSON map (:func:`check_train_size`); ``None``
    when unset or empty."""
    import json

    text = context.current().train_size
    if not text:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        raise ValueError(f"${TRAIN_SIZE_ENV} must be an integer >= 1 or a JSON map, "
                         f"got {text!r}") from None
    return check_train_size(value, where=f"${TRAIN_SIZE_ENV}")


def recipes_from_env() -> dict[str, dict[str, str]]:
    """``$ROBATTR_RECIPE`` (JSON, a profile's ``recipe:``) checked by :func:`check_recipes`;
    empty when unset."""
    import json

    text = context.current().recipe
    if not text:
        return {}
    try:
        recipes = json.loads(text)
    except ValueError:
        raise ValueError(f"${RECIPE_ENV} must be JSON, got {text!r}") from None
    return check_recipes(recipes)
