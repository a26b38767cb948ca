"""The zoo's files: weights and metadata written atomically, checked on every load, and the
checkpoints of trainings in progress (see :mod:`robattr.zoo`)."""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

from torch import nn

from robattr.utils import cache_dir

__all__ = ["ZooCacheWarning", "zoo_dir", "paths", "load_key", "checkpoint", "checkpoint_path",
           "partly_trained", "clear_checkpoint"]


class ZooCacheWarning(UserWarning):
    """A cached model was unusable (missing, corrupt or mismatched) and is retrained."""


class _Corrupt(Exception):
    pass


def zoo_dir() -> Path:
    """``<cache_dir()>/zoo``, created on demand."""
    path = Path(cache_dir()) / "zoo"
    path.mkdir(parents=True, exist_ok=True)
    return path


def paths(key: str) -> tuple[Path, Path]:
    """(weights, metadata) paths of a key."""
    d = zoo_dir()
    return d / f"{key}.safetensors", d / f"{key}.json"


# --------------------------------------------------------------------------- files
def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _fsync(path: str) -> None:
    with open(path, "rb") as f:
        os.fsync(f.fileno())


@contextlib.contextmanager
def _atomic(path: Path):
    """Yield a temporary path in ``path``'s folder; on success move it onto ``path``."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        yield tmp
        _fsync(tmp)
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600; a shared cache wants it readable
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _remove(*files: Path) -> None:
    for f in files:
        with contextlib.suppress(FileNotFoundError):
            f.unlink()


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise _Corrupt(f"metadata is unreadable ({type(e).__name__}: {e})") from e
    if not isinstance(meta, dict):
        raise _Corrupt("metadata is not a JSON object")
    return meta


def _load(key: str, cfg: dict[str, Any], dataset: str) -> nn.Module | None:
    """The cached model, or None (after a warning and deleting both files) if unusable."""
    from safetensors.torch import load_file

    from robattr.models import build

    wpath, jpath = paths(key)
    if not wpath.exists() and not jpath.exists():
        return None
    try:
        if not jpath.exists():
            raise _Corrupt("its metadata file is missing (interrupted write?)")
        if not wpath.exists():
            raise _Corrupt("its weights file is missing")
        meta = _read_meta(jpath)
        if meta.get("key") != key or meta.get("config") != cfg:
            raise _Corrupt("metadata does not match this configuration")
        sha = _sha256(wpath)
        if sha != meta.get("weights_sha256"):
            raise _Corrupt(f"weights sha256 {sha[:12]}... differs from the recorded "
                           f"{str(meta.get('weights_sha256'))[:12]}...")
        try:
            state = load_file(os.fspath(wpath), device="cpu")
        except Exception as e:  # noqa: BLE001 - safetensors raises several types
            raise _Corrupt(f"safetensors cannot read it ({type(e).__name__}: {e})") from e
        model = build(cfg["arch"], dataset, cfg["activation"], cfg["beta"])
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise _Corrupt(f"keys or shapes do not match the model ({str(e).splitlines()[0]})") from e
    except _Corrupt as e:
        warnings.warn(f"robattr zoo: discarding cached model {wpath} (+ {jpath.name}): {e}; "
                      "retraining", ZooCacheWarning, stacklevel=3)
        _remove(wpath, jpath)
        return None
    model.zoo_meta = meta
    return model


def _save(key: str, model: nn.Module, meta: dict[str, Any]) -> dict[str, Any]:
    from safetensors.torch import save_file

    wpath, jpath = paths(key)
    state = {k: v.detach().to("cpu").contiguous() for k, v in model.state_dict().items()}
    with _atomic(wpath) as tmp:
        save_file(state, tmp, metadata={"robattr_zoo_key": key})
        sha = _sha256(Path(tmp))
    meta = {**meta, "weights_file": wpath.name, "weights_sha256": sha,
            "weights_bytes": wpath.stat().st_size}
    with _atomic(jpath) as tmp:
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(meta, f, indent=1, sort_keys=True, allow_nan=False)
            f.write("\n")
    return meta


def load_key(key: str) -> nn.Module:
    """The cached model stored under ``key`` (``model.zoo_meta["key"]``), checked as every
    load is (key, configuration, weights' sha256); ``ValueError`` when it is not cached or
    unusable. A loss that needs another trained model (ATEX's teacher) gets it this way."""
    wpath, jpath = paths(key)
    msg = (f"the zoo model {key[:12]}... is not in the zoo cache ({zoo_dir()}); train it "
           "first (robattr.zoo.get_model) and pass its model.zoo_meta['key']")
    if not (wpath.exists() and jpath.exists()):
        raise ValueError(msg)
    try:
        cfg = json.loads(jpath.read_text(encoding="utf-8"))["config"]
    except (OSError, ValueError, KeyError, TypeError):
        raise ValueError(msg) from None
    model = _load(key, cfg, cfg["dataset"])
    if model is None:
        raise ValueError(msg)
    return model


# --------------------------------------------------------------------------- checkpoints
def checkpoint_path(key: str) -> Path:
    """Where a training in progress keeps its state: ``<key>.ckpt`` in the zoo folder."""
    return zoo_dir() / f"{key}.ckpt"


def checkpoint(key: str, cfg: dict[str, Any] | None = None, min_interval: float = 0.0):
    """The checkpoint of the training of ``key`` (a
    :class:`~robattr.train.checkpoint.FileCheckpoint` tagged with the key, so a file renamed
    onto another key is ignored): saved after an epoch at most once per ``min_interval``
    seconds, read back by the next training of the key, deleted once the model is stored.
    With ``cfg``, its first save also writes ``<key>.ckpt.json`` (the configuration, which
    :func:`partly_trained` reads)."""
    from robattr.train.checkpoint import FileCheckpoint

    class _ZooCheckpoint(FileCheckpoint):
        def write(self, state):
            if cfg is not None and not _sidecar(key).exists():
                with _atomic(_sidecar(key)) as tmp:
                    with open(tmp, "w", encoding="utf-8") as f:
                        json.dump({"key": key, "config": cfg}, f, indent=1, sort_keys=True)
                        f.write("\n")
            super().write(state)

    return _ZooCheckpoint(checkpoint_path(key), tag=key, min_interval=min_interval)


def _sidecar(key: str) -> Path:
    return zoo_dir() / f"{key}.ckpt.json"


def partly_trained() -> list[dict[str, Any]]:
    """The trainings that stopped before their last epoch and will go on from their
    checkpoint: one dict per model with ``key``, ``config`` (when its metadata sidecar is
    readable), ``epochs_done`` and ``epochs``."""
    rows = []
    for path in sorted(zoo_dir().glob("*.ckpt")):
        key = path.name[:-len(".ckpt")]
        try:
            info = json.loads(_sidecar(key).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            info = {}
        done = checkpoint(key).epochs_done()
        if done is None:
            continue
        cfg = info.get("config")
        rows.append({"key": key, "config": cfg, "epochs_done": done,
                     "epochs": cfg["epochs"] if isinstance(cfg, dict) else None})
    return rows


def clear_checkpoint(key: str) -> None:
    _remove(checkpoint_path(key), _sidecar(key))
