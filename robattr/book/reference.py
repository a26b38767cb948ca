"""Reference results: a kept run of a non-default profile, shown beside every build.

``robattr build --profile medium --keep-reference`` stores, for each notebook that ran (or
was already up to date) in that profile, its results CSV at
``reference/<name>/<key>.results.csv`` and its provenance in
``reference/<name>/provenance.json``: ``{key: {commit, profile, device, date, seconds,
source_sha256, params, train_size, precision[, recipe]}}``. ``<name>`` is the profile's name unless
``--keep-reference NAME`` gives another. They are small text files, committed with the
code that made them; the commit is the ``HEAD`` of the project (``+dirty`` when notebooks
or the package had uncommitted changes).

Every later build hands each notebook its references (:func:`for_notebook`, carried in
the :class:`~robattr.book.executors.Job`), so :func:`robattr.report.papers.compare` and
:func:`robattr.report.papers.claim` show them beside this build's numbers; the Verdicts page
has a column per reference. A reference whose notebook source changed since it was made
is *stale* (:func:`status`), and so is one whose profile now gives the notebook other
parameters; a stale reference is labelled so wherever it is shown.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

from robattr.book.notebooks import Notebook
from robattr.book.stamps import stamps_lock

__all__ = ["FOLDER", "PROVENANCE", "commit", "keep", "provenance", "profiles", "status", "is_stale",
           "for_notebook", "install", "results_file", "source_sha256"]

FOLDER = "reference"
PROVENANCE = "provenance.json"


def _dir(root: Path, name: str) -> Path:
    return Path(root) / FOLDER / name


def results_file(root: Path, name: str, key: str) -> Path:
    """Where reference ``name`` keeps notebook ``key``'s results CSV."""
    return _dir(root, name) / f"{key}.results.csv"


def source_sha256(nb: Notebook) -> str:
    """The sha256 of a notebook's source bytes (what makes a reference stale)."""
    return hashlib.sha256(nb.path.read_bytes()).hexdigest()


def commit(root: Path) -> str:
    """The project's ``HEAD`` commit, ``+dirty`` when ``notebooks/`` or ``robattr/`` have
    uncommitted changes, or ``unknown`` outside a git checkout."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True,
                              check=True).stdout.strip()
    try:
        head = git("rev-parse", "HEAD")
        dirty = git("status", "--porcelain", "--", "notebooks", "robattr")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head + ("+dirty" if dirty else "")


def provenance(root: Path, name: str) -> dict[str, dict[str, Any]]:
    """``{key: provenance}`` of reference ``name`` (``{}`` when it does not exist)."""
    path = _dir(root, name) / PROVENANCE
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def profiles(root: Path) -> list[str]:
    """The names of the references kept under ``root/reference``."""
    base = Path(root) / FOLDER
    return sorted(p.parent.name for p in base.glob(f"*/{PROVENANCE}")) if base.is_dir() else []


def _device(params: dict[str, Any]) -> str:
    """The device a run used, in words: the GPU's name, else the CPU's."""
    want = str(params.get("device", "cpu"))
    if want in ("auto", "cuda") or want.startswith("cuda"):
        try:
            import torch

            if torch.cuda.is_available():
                return torch.cuda.get_device_name(0)
        except ImportError:
            pass
    return f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores)"


def keep(root: Path, name: str, nb: Notebook, results_csv: Path | None, *, profile: str,
         params: dict[str, Any], seconds: float | None, precision: str = "fp32",
         train_size: int | None = None, recipe: dict | None = None) -> Path:
    """Keep ``results_csv`` (one notebook's run; None when it recorded nothing) as
    reference ``name`` with its provenance."""
    root = Path(root)
    dest = results_file(root, name, nb.key)
    dest.parent.mkdir(parents=True, exist_ok=True)
    entry = {"commit": commit(root), "profile": profile, "device": _device(params),
             "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
             "seconds": None if seconds is None else round(float(seconds), 1),
             "source_sha256": source_sha256(nb), "params": params,
             "precision": precision, "train_size": train_size}
    if recipe:
        entry["recipe"] = recipe
    with stamps_lock(_dir(root, name)):
        dest.write_bytes(Path(results_csv).read_bytes() if results_csv is not None
                         else b"metric,value,labels\n")
        prov = provenance(root, name)
        prov[nb.key] = entry
        tmp = _dir(root, name) / f"{PROVENANCE}.{os.getpid()}.tmp"
        tmp.write_text(json.dumps(prov, indent=1, sort_keys=True, default=str) + "\n")
        os.replace(tmp, _dir(root, name) / PROVENANCE)
    return dest


def is_stale(nb: Notebook, entry: dict[str, Any]) -> bool:
    """Whether a kept run no longer shows what its profile computes today: the notebook's
    source changed, or the profile (when it still exists) now gives the notebook other
    parameters, another training-set size or other training recipes."""
    from robattr.book.params import ParameterError
    from robattr.book.profiles import (effective_recipe, effective_train_size, load_profile,
                                       resolve)

    if entry.get("source_sha256") != source_sha256(nb):
        return True
    try:
        prof = load_profile(str(entry.get("profile")))
        params = resolve(nb, prof)
    except ParameterError:
        return False            # a profile file that is gone: only the source can tell
    same = json.dumps(params, sort_keys=True, default=str) == \
        json.dumps(entry.get("params"), sort_keys=True, default=str)
    return (not same or effective_train_size(prof, nb.key) != entry.get("train_size")
            or (effective_recipe(prof) or None) != (entry.get("recipe") or None))


def status(root: Path, name: str, notebooks: list[Notebook] | None = None) -> dict[str, str]:
    """``{key: "fresh" | "stale" | "missing"}`` of reference ``name`` for every notebook
    (stale: :func:`is_stale`)."""
    from robattr.book.notebooks import discover

    prov = provenance(root, name)
    out = {}
    for nb in notebooks if notebooks is not None else discover(root):
        entry = prov.get(nb.key)
        if entry is None or not results_file(root, name, nb.key).is_file():
            out[nb.key] = "missing"
        else:
            out[nb.key] = "stale" if is_stale(nb, entry) else "fresh"
    return out


def for_notebook(root: Path, nb: Notebook, exclude: str | None = None) -> dict[str, dict]:
    """The references of one notebook, as a job carries them: ``{name: {"meta": provenance
    with "stale", "csv": bytes}}``; ``exclude`` leaves one name out (the profile being
    built, which would otherwise be shown beside itself)."""
    out = {}
    for name in profiles(root):
        if name == exclude:
            continue
        entry = provenance(root, name).get(nb.key)
        path = results_file(root, name, nb.key)
        if entry is None or not path.is_file():
            continue
        meta = {**entry, "stale": is_stale(nb, entry)}
        out[name] = {"meta": meta, "csv": path.read_bytes()}
    return out


def install(references: dict[str, dict], folder: Path) -> None:
    """Write a job's references where :mod:`robattr.report.references` reads them."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, ref in references.items():
        (folder / f"{name}.results.csv").write_bytes(ref["csv"])
        (folder / f"{name}.json").write_text(json.dumps(ref["meta"], default=str))
