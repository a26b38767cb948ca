"""Move zoo models between caches: trained models and the checkpoints of trainings in
progress, with the same checks a load makes.

A long profile trains for longer than one machine may be kept (the medium profile takes
hours on two cores): :func:`export_keys` copies what the zoo holds for some keys into a
folder -- a finished model's weights and metadata, else the checkpoint of its training and
the checkpoint's metadata -- and :func:`import_folder` copies such a folder into this
machine's zoo, where the next training of a key goes on from its checkpoint (see
:mod:`robattr.zoo`). Nothing unchecked enters the zoo: a model's weights must match the
sha256 and key its metadata records, and a checkpoint must be one the training of its key
would read; a file that fails is reported and left out. Nothing the zoo holds is made
worse: a finished model is never replaced, a checkpoint only by one further on.
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from robattr.zoo.store import _atomic, _sha256, _sidecar, checkpoint_path, clear_checkpoint, paths

__all__ = ["Transfer", "export_keys", "import_folder"]


@dataclass
class Transfer:
    """What an export or import did, by zoo key: ``models`` (finished models copied),
    ``checkpoints`` (``{key: epochs done}`` of trainings in progress copied), ``kept``
    (keys the destination already held as far or further), ``missing`` (keys with nothing
    to copy) and ``refused`` (``{file: why}``, files that failed their checks)."""

    models: list[str] = field(default_factory=list)
    checkpoints: dict[str, int] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        parts = [f"{len(self.models)} trained model(s)",
                 f"{len(self.checkpoints)} training(s) in progress"]
        if self.kept:
            parts.append(f"{len(self.kept)} already there")
        if self.missing:
            parts.append(f"{len(self.missing)} with nothing to copy")
        if self.refused:
            parts.append(f"{len(self.refused)} file(s) refused")
        return ", ".join(parts)


def _copy(src: Path, dst: Path) -> None:
    with _atomic(dst) as tmp:
        shutil.copyfile(src, tmp)


def _model_problem(key: str, weights: Path, meta_path: Path) -> str | None:
    """Why the model files of ``key`` cannot enter a zoo (None: they can)."""
    if not weights.exists():
        return "its weights file is missing"
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        return f"its metadata is unreadable ({type(e).__name__})"
    if not isinstance(meta, dict) or meta.get("key") != key:
        return "its metadata names another key"
    from robattr.zoo.config import _key

    if not isinstance(meta.get("config"), dict) or _key(meta["config"]) != key:
        return "its configuration does not hash to its key"
    if _sha256(weights) != meta.get("weights_sha256"):
        return "its weights differ from the sha256 its metadata records"
    return None


def _epochs_done(key: str, ckpt: Path) -> int | None:
    from robattr.train.checkpoint import FileCheckpoint

    return FileCheckpoint(ckpt, tag=key).epochs_done() if ckpt.exists() else None


def export_keys(keys: Iterable[str], dest: str | Path) -> Transfer:
    """Copy what this zoo holds for each of ``keys`` into the folder ``dest`` (created):
    a finished model (``<key>.safetensors`` and ``<key>.json``), else its training's
    checkpoint (``<key>.ckpt`` and ``<key>.ckpt.json``). Files ``dest`` holds for other
    keys stay; a key's older files there are replaced."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    out = Transfer()
    for key in dict.fromkeys(keys):
        weights, meta = paths(key)
        if weights.exists() and meta.exists():
            problem = _model_problem(key, weights, meta)
            if problem:
                out.refused[weights.name] = problem
                continue
            _copy(weights, dest / weights.name)
            _copy(meta, dest / meta.name)
            for stale in (dest / f"{key}.ckpt", dest / f"{key}.ckpt.json"):
                stale.unlink(missing_ok=True)
            out.models.append(key)
            continue
        done = _epochs_done(key, checkpoint_path(key))
        if done is None:
            out.missing.append(key)
            continue
        _copy(checkpoint_path(key), dest / f"{key}.ckpt")
        if _sidecar(key).exists():
            _copy(_sidecar(key), dest / f"{key}.ckpt.json")
        out.checkpoints[key] = done
    return out


def import_folder(src: str | Path) -> Transfer:
    """Copy the models and checkpoints of the folder ``src`` (as :func:`export_keys` writes
    it) into this zoo, each after its checks; a model the zoo already holds is kept, and a
    checkpoint replaces the zoo's only when it holds more epochs (and the model is not
    trained yet)."""
    src = Path(src)
    if not src.is_dir():
        raise FileNotFoundError(f"no such folder of zoo models: {src}")
    out = Transfer()
    for meta in sorted(src.glob("*.json")):
        if meta.name.endswith(".ckpt.json"):
            continue
        key = meta.name[:-len(".json")]
        weights = src / f"{key}.safetensors"
        problem = _model_problem(key, weights, meta)
        if problem:
            out.refused[meta.name] = problem
            continue
        zw, zm = paths(key)
        if zw.exists() and zm.exists():
            out.kept.append(key)
            continue
        _copy(weights, zw)
        _copy(meta, zm)   # metadata last, as the zoo writes it
        clear_checkpoint(key)
        out.models.append(key)
    for ckpt in sorted(src.glob("*.ckpt")):
        key = ckpt.name[:-len(".ckpt")]
        done = _epochs_done(key, ckpt)
        if done is None:
            out.refused[ckpt.name] = "not a checkpoint of its key's training"
            continue
        zw, zm = paths(key)
        here = _epochs_done(key, checkpoint_path(key))
        if (zw.exists() and zm.exists()) or (here is not None and here >= done):
            out.kept.append(key)
            continue
        side = src / f"{key}.ckpt.json"
        if side.exists():
            _copy(side, _sidecar(key))
        _copy(ckpt, checkpoint_path(key))
        out.checkpoints[key] = done
    return out
