"""What the zoo did: cache hits and trainings in this process, every request when
``$ROBATTR_ZOO_REQUESTS`` names a file, and every training in ``<zoo>/trainings.jsonl``."""
from __future__ import annotations

import json
import os
import platform
from pathlib import Path
from typing import Any

from robattr import context
from robattr.zoo.store import zoo_dir

__all__ = ["stats", "reset_stats", "REQUESTS_ENV", "request_log", "training_log"]

#: Cache hits and misses (trainings) of :func:`get_model` in this process.
_STATS = {"hits": 0, "misses": 0}

def stats() -> dict[str, int]:
    """``{"hits": n, "misses": m}``: cached loads and trainings by :func:`get_model` in
    this process since it started (or since :func:`reset_stats`)."""
    return dict(_STATS)


def reset_stats() -> None:
    _STATS.update(hits=0, misses=0)


#: Environment variable naming a file where every :func:`get_model` call is logged.
REQUESTS_ENV = context.ZOO_REQUESTS_ENV


def _log_request(key: str, cfg: dict[str, Any]) -> None:
    ctx = context.current()
    path = ctx.zoo_requests
    if not path:
        return
    line = json.dumps({"key": key, "config": cfg, "notebook": ctx.notebook,
                       "pid": os.getpid()}, sort_keys=True)
    with open(path, "a") as fh:             # one short line per call: appends do not interleave
        fh.write(line + "\n")


def request_log(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The :func:`get_model` calls logged in ``path`` (``$ROBATTR_ZOO_REQUESTS``), one dict
    per call: ``key``, ``config``, ``notebook`` (the calling notebook's key,
    ``$ROBATTR_NOTEBOOK``; empty outside the pipeline) and ``pid``.
    Cache hits count as well as trainings: it says which models each notebook asks for."""
    p = Path(path)
    if not p.exists():
        return []
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()]


def _log_training(meta: dict[str, Any]) -> None:
    """One JSON line per training in ``<zoo>/trainings.jsonl``: who trained what, when."""
    cfg = meta["config"]
    line = {"key": meta["key"], "dataset": cfg["dataset"], "arch": cfg["arch"],
            "method": cfg["method"], "host": platform.node(), "pid": os.getpid(),
            "train_seconds": round(meta["train_seconds"], 3), "created": meta["created"]}
    with open(zoo_dir() / "trainings.jsonl", "a") as fh:
        fh.write(json.dumps(line) + "\n")


def training_log():
    """Every training recorded in this cache folder, as a pandas DataFrame."""
    import pandas as pd

    path = zoo_dir() / "trainings.jsonl"
    if not path.exists():
        return pd.DataFrame(columns=["key", "dataset", "arch", "method", "host", "pid",
                                     "train_seconds", "created"])
    return pd.read_json(path, lines=True)
