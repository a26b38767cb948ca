"""Scalar results a notebook records, kept as a tidy CSV next to the executed notebook.

A notebook calls ``record("acc", 0.93, model="ce")`` for each number other pages or
sweeps may reuse. When the pipeline executes a notebook it sets ``ROBATTR_RESULTS`` to
``<executed notebook>.results.csv`` (emptied before the run), and every record is
appended there as one row: ``metric, value, labels`` (the labels as a JSON object;
:func:`read` spreads them into columns).
Outside the pipeline the rows are only kept in memory (:func:`rows`).
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from robattr import context

__all__ = ["ENV", "NOTEBOOK_ENV", "record", "rows", "read"]

ENV = context.RESULTS_ENV
#: The key of the notebook a kernel runs (``wang2020/table2_attacks``), set by the pipeline.
NOTEBOOK_ENV = context.NOTEBOOK_ENV
_ROWS: list[dict[str, Any]] = []


def record(metric: str, value, **labels) -> float:
    """Record one scalar ``value`` named ``metric`` with optional string/number labels.

    Returns the value as a float so a notebook can write ``x = record("x", compute())``.
    """
    if not isinstance(metric, str) or not metric:
        raise ValueError(f"metric must be a non-empty string, got {metric!r}")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"value of {metric!r} must be a number, got {value!r}") from None
    for k, lab in labels.items():
        if not isinstance(lab, (str, int, float, bool)) or (isinstance(lab, float)
                                                             and math.isnan(lab)):
            raise ValueError(f"label {k}={lab!r} of {metric!r} must be a string or a number")
    row = {"metric": metric, "value": v, **labels}
    _ROWS.append(row)
    path = context.current().results
    if path:
        _append(Path(path), row)
    return v


def _append(path: Path, row: dict[str, Any]) -> None:
    # A fixed header: the labels go into one 'labels' column as a JSON object, so rows
    # with different label sets share one file; read() spreads them into columns.
    new = not path.exists() or path.stat().st_size == 0
    labels = json.dumps({k: v for k, v in row.items() if k not in ("metric", "value")},
                        sort_keys=True)
    with path.open("a", newline="") as fh:
        w = csv.writer(fh)
        if new:
            w.writerow(["metric", "value", "labels"])
        w.writerow([row["metric"], repr(row["value"]), labels])


def rows() -> list[dict[str, Any]]:
    """The rows recorded in this process so far."""
    return list(_ROWS)


def read(path) -> "pandas.DataFrame":  # noqa: F821
    """A results CSV as a DataFrame with one column per label (missing labels empty)."""
    import pandas as pd

    raw = pd.read_csv(path, dtype={"labels": str}, keep_default_na=False)
    parsed = []
    for _, r in raw.iterrows():
        d = {"metric": r["metric"], "value": float(r["value"])}
        d.update(json.loads(r["labels"] or "{}"))
        parsed.append(d)
    return pd.DataFrame(parsed) if parsed else pd.DataFrame(columns=["metric", "value"])
