"""The run context: every ``ROBATTR_*`` environment variable robattr reads, in one place.

The book hands its settings to the notebooks it executes through environment variables,
which their kernels inherit (``robattr.book.profiles.notebook_env`` and
``robattr.book.executors`` write them). Nothing else in robattr reads them:
:func:`current` reads them all and returns a frozen :class:`RunContext`, and the library
takes what it needs from it. It reads them at each call, so a value set for one notebook
or one test (``monkeypatch.setenv``) is seen at once.

=========================  ============================================================
variable                   what it sets
=========================  ============================================================
``ROBATTR_CACHE``          the cache folder (zoo, decoded data, calibration)
``ROBATTR_DATA``           where the datasets are (default ``<cache>/data``)
``ROBATTR_ROOT``           the book's folder (default: found from the working directory)
``ROBATTR_TRAIN_SIZE``     the zoo's default training-set size (a profile's ``train_size``)
``ROBATTR_RECIPE``         the zoo's training recipe per dataset (a profile's ``recipe``)
``ROBATTR_PRECISION``      CUDA matmul precision (``fp32`` or ``tf32``)
``ROBATTR_PROFILE``        the profile a notebook runs in (its verdicts' scale line)
``ROBATTR_NOTEBOOK``       the key of the notebook being executed
``ROBATTR_RESULTS``        the file a notebook records its results in
``ROBATTR_REFERENCE_DIR``  the kept reference runs a notebook shows beside its numbers
``ROBATTR_ZOO_REQUESTS``   a file logging every zoo request (``robattr plan``'s test)
``ROBATTR_ZOO_LOCK_STALE`` seconds after which an unverifiable zoo lock is taken over
``ROBATTR_CHROMIUM``       the Chromium the browser check drives
``ROBATTR_PLAN_PROBE``     the file the calibration's probe notebook writes its timing to
``ROBATTR_PROGRESS``       a file where a kernel's zoo trainings write their progress
                           bars, which the build that runs it shows (``robattr run``)
=========================  ============================================================
"""
from __future__ import annotations

import os
from dataclasses import dataclass, fields

__all__ = ["RunContext", "current", "CACHE_ENV", "DATA_ENV", "ROOT_ENV", "TRAIN_SIZE_ENV",
           "RECIPE_ENV", "PRECISION_ENV", "PROFILE_ENV", "NOTEBOOK_ENV", "RESULTS_ENV",
           "REFERENCE_DIR_ENV", "ZOO_REQUESTS_ENV", "ZOO_LOCK_STALE_ENV", "CHROMIUM_ENV",
           "PLAN_PROBE_ENV", "PROGRESS_ENV", "VARIABLES", "exported"]

CACHE_ENV = "ROBATTR_CACHE"
DATA_ENV = "ROBATTR_DATA"
ROOT_ENV = "ROBATTR_ROOT"
TRAIN_SIZE_ENV = "ROBATTR_TRAIN_SIZE"
RECIPE_ENV = "ROBATTR_RECIPE"
PRECISION_ENV = "ROBATTR_PRECISION"
PROFILE_ENV = "ROBATTR_PROFILE"
NOTEBOOK_ENV = "ROBATTR_NOTEBOOK"
RESULTS_ENV = "ROBATTR_RESULTS"
REFERENCE_DIR_ENV = "ROBATTR_REFERENCE_DIR"
ZOO_REQUESTS_ENV = "ROBATTR_ZOO_REQUESTS"
ZOO_LOCK_STALE_ENV = "ROBATTR_ZOO_LOCK_STALE"
CHROMIUM_ENV = "ROBATTR_CHROMIUM"
PLAN_PROBE_ENV = "ROBATTR_PLAN_PROBE"
PROGRESS_ENV = "ROBATTR_PROGRESS"

#: a zoo lock whose owner cannot be checked is taken over after this many seconds
DEFAULT_LOCK_STALE_SECONDS = 24 * 3600.0


@dataclass(frozen=True)
class RunContext:
    """The values of the ``ROBATTR_*`` variables at one moment: an empty string (or None
    for a path) where a variable is unset or blank."""

    cache: str | None
    data: str | None
    root: str | None
    train_size: str
    recipe: str
    precision: str
    profile: str | None
    notebook: str
    results: str | None
    reference_dir: str | None
    zoo_requests: str | None
    zoo_lock_stale: float
    chromium: str | None
    plan_probe: str | None
    progress: str | None

    @property
    def chapter(self) -> str | None:
        """The chapter of the notebook being executed (the first part of its key)."""
        return self.notebook.split("/")[0] or None


#: each field of :class:`RunContext` and the variable it is read from
VARIABLES = {"cache": CACHE_ENV, "data": DATA_ENV, "root": ROOT_ENV,
             "train_size": TRAIN_SIZE_ENV, "recipe": RECIPE_ENV,
             "precision": PRECISION_ENV, "profile": PROFILE_ENV,
             "notebook": NOTEBOOK_ENV, "results": RESULTS_ENV,
             "reference_dir": REFERENCE_DIR_ENV, "zoo_requests": ZOO_REQUESTS_ENV,
             "zoo_lock_stale": ZOO_LOCK_STALE_ENV, "chromium": CHROMIUM_ENV,
             "plan_probe": PLAN_PROBE_ENV, "progress": PROGRESS_ENV}


def _text(name: str) -> str:
    return os.environ.get(name, "").strip()


def _lock_stale() -> float:
    text = _text(ZOO_LOCK_STALE_ENV)
    if not text:
        return DEFAULT_LOCK_STALE_SECONDS
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{ZOO_LOCK_STALE_ENV} must be a number of seconds, got {text!r}") \
            from None
    if not value > 0:
        raise ValueError(f"{ZOO_LOCK_STALE_ENV} must be > 0 seconds, got {text!r}")
    return value


def current() -> RunContext:
    """The run context now: every ``ROBATTR_*`` variable, read from the environment."""
    values = {}
    for f in fields(RunContext):
        name = VARIABLES[f.name]
        if f.name == "zoo_lock_stale":
            values[f.name] = _lock_stale()
        elif f.name in ("train_size", "recipe", "notebook"):
            values[f.name] = _text(name)
        elif f.name == "precision":
            values[f.name] = _text(name).lower()
        else:
            values[f.name] = _text(name) or None
    return RunContext(**values)


def exported(names=None) -> dict[str, str]:
    """The ``ROBATTR_*`` variables set now (those of ``names`` only, when given), as they
    are: what a process hands to the processes it starts (Ray workers)."""
    wanted = set(VARIABLES.values()) if names is None else set(names)
    return {k: v for k, v in os.environ.items() if k in wanted}
