"""Reference results seen from inside a notebook: a kept run of another profile.

A *reference* is the results CSV of one notebook run under a non-default profile (say
``medium``, on MNIST / CIFAR-10), kept with its provenance under
``reference/<profile>/`` by ``robattr build --profile medium --keep-reference``
(:mod:`robattr.book.reference`). When the pipeline executes a notebook it hands the
notebook's references to the kernel: ``$ROBATTR_REFERENCE_DIR`` is a folder holding, per
profile, ``<profile>.results.csv`` and ``<profile>.json`` (the provenance: commit, date,
device, parameters, and whether the notebook changed since, ``stale``).

:func:`robattr.report.papers.compare` then adds a column per reference beside ours and the
paper's, and :func:`robattr.report.papers.claim` says what the reference concluded; both match
rows recorded by the same code (``compare`` records every row it shows). Outside the
pipeline there are no references and both behave as before.
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

from robattr import context

__all__ = ["ENV", "available", "label", "rows", "compare_values", "claim_verdict", "claim_record",
           "value_columns"]

ENV = context.REFERENCE_DIR_ENV


def _folder() -> Path | None:
    path = context.current().reference_dir
    return Path(path) if path and Path(path).is_dir() else None


def available() -> dict[str, dict[str, Any]]:
    """``{profile: provenance}`` of the references handed to this notebook (``{}``
    outside the pipeline)."""
    folder = _folder()
    if folder is None:
        return {}
    return {p.stem: _meta(str(p)) for p in sorted(folder.glob("*.json"))
            if (folder / f"{p.stem}.results.csv").is_file()}


@lru_cache(maxsize=None)
def _meta(path: str) -> dict[str, Any]:
    return json.loads(Path(path).read_text())


def label(profile: str, meta: dict[str, Any] | None = None) -> str:
    """How a reference is named beside a number: ``medium ref (mnist, 1a2b3c4)``, with
    ``, stale`` when its notebook changed after it was made."""
    meta = available().get(profile, {}) if meta is None else meta
    params = meta.get("params") or {}
    bits = [str(params["dataset"])] if params.get("dataset") else []
    commit = str(meta.get("commit") or "unknown")
    if commit != "unknown":
        bits.append(commit[:7] + ("+dirty" if commit.endswith("+dirty") else ""))
    if meta.get("stale"):
        bits.append("stale")
    return f"{profile} ref ({', '.join(bits)})" if bits else f"{profile} ref"


def rows(profile: str):
    """The reference's results as a DataFrame (:func:`robattr.report.results.read`)."""
    folder = _folder()
    if folder is None or not (folder / f"{profile}.results.csv").is_file():
        raise KeyError(f"no reference {profile!r} for this notebook; available: "
                       f"{', '.join(available()) or 'none'}")
    return _read(str(folder / f"{profile}.results.csv"))


@lru_cache(maxsize=None)
def _read(path: str):
    from robattr.report import results

    return results.read(path)


def compare_values(profile: str, table: str, where: str, keys: list[tuple]) -> list[float]:
    """The values the reference recorded for ``table`` filtered by ``where`` (its JSON, as
    :func:`robattr.report.papers.compare` records it) at each key tuple (NaN where it has none)."""
    df = rows(profile)
    if "table" not in df or "where" not in df:
        return [float("nan")] * len(keys)
    sub = df[(df["metric"] == "compare") & (df["table"] == table) & (df["where"] == where)]
    found = {tuple(json.loads(k)): v for k, v in zip(sub["key"], sub["value"])}
    return [found.get(tuple(str(x) for x in key), float("nan")) for key in keys]


def claim_verdict(profile: str, text: str) -> str | None:
    """The verdict the reference gave the claim with this exact text, else None."""
    df = rows(profile)
    if "text" not in df:
        return None
    hit = df[(df["metric"] == "claim") & (df["text"] == text)]
    return None if hit.empty else str(hit["verdict"].iloc[0])


def claim_record(profile: str, text: str) -> dict[str, str] | None:
    """What the reference recorded for the claim with this exact text (``verdict``,
    ``rule``, ``scale``, ``kind``), else None."""
    df = rows(profile)
    if "text" not in df:
        return None
    hit = df[(df["metric"] == "claim") & (df["text"] == text)]
    if hit.empty:
        return None
    row = hit.iloc[0]
    return {k: ("" if k not in hit or str(row[k]) == "nan" else str(row[k]))
            for k in ("verdict", "rule", "scale", "kind")}


def value_columns(compared, ours: str = "ours", paper: str = "paper") -> list[str]:
    """The value columns of a :func:`robattr.report.papers.compare` frame in display order: ours,
    each reference column (named by :func:`label`), the paper's. For code that reshapes a
    compared table and must keep the references."""
    import re

    refs = [c for c in compared.columns if isinstance(c, str)
            and re.fullmatch(r"\S+ ref( \(.*\))?", c)]
    return [c for c in (ours, *refs, paper) if c in compared.columns]
