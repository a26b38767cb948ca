"""The model zoo: train a model once, cache it by a hash of everything that defines it.

    model = get_model("digits", "cnn")    # first call trains (~3 s on 2 CPU cores), then cached
    model.zoo_meta["test_acc"]             # 0.98

The key is the sha256 of the canonical JSON (sorted keys) of the full configuration:
dataset, arch, method, every loss hyper-parameter (defaults filled in), every training
hyper-parameter (defaults filled in), activation, beta, seed and :data:`ZOO_FORMAT`;
``train_size`` (train on the first *n* images of the train split) joins the key only when
it is set, by argument or by ``$ROBATTR_TRAIN_SIZE`` (a profile's ``train_size:`` sets
that variable for its notebooks), so the keys of full-data models never change.
Files live in ``$ROBATTR_CACHE/zoo`` (see :func:`robattr.utils.cache_dir`):
``<key>.safetensors`` (weights) and ``<key>.json`` (config, accuracy, timings, versions,
the weights' sha256). Both are written atomically (temporary file in the same folder,
then ``os.replace``), weights first and metadata last, so a crash leaves either nothing
or weights without metadata -- which, like any other mismatch, is detected on the next
load, reported by a :class:`ZooCacheWarning`, deleted and retrained. The device used for
training is recorded but is not part of the key.
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import hashlib
import json
import os
import platform
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from robattr import catalog, precision
from robattr.train.losses import alignment as _alignment_losses
from robattr.utils import cache_dir, check_int, check_number, get_device, process_start
from robattr.utils import seed_everything

__all__ = [
    "ZOO_FORMAT", "DEFAULTS", "ZooCacheWarning", "get_model", "info", "list_models",
    "config", "config_hash", "zoo_dir", "paths", "stats", "reset_stats", "training_log",
    "TRAIN_SIZE_ENV", "effective_train_size", "RECIPE_ENV", "effective_recipe",
    "REQUESTS_ENV", "request_log", "METHOD_DEFAULTS", "default_batch_size", "load_key",
]

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


class ZooCacheWarning(UserWarning):
    """A cached model was unusable (missing, corrupt or mismatched) and is retrained."""


class _Corrupt(Exception):
    pass


# --------------------------------------------------------------------------- configuration
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


# --------------------------------------------------------------------------- public API
def get_model(dataset: str, arch: str, method: str = "ce", *,
              epochs: int = DEFAULTS["epochs"], lr: float = DEFAULTS["lr"],
              batch_size: int | None = None, optimizer: str = DEFAULTS["optimizer"],
              weight_decay: float = DEFAULTS["weight_decay"],
              milestones: list[int] | None = DEFAULTS["milestones"], seed: int = 0,
              activation: str = "relu", beta: float | None = None,
              train_size: int | None = None, augment: str | None = None,
              schedule: str | None = None,
              device: str | torch.device = "auto", retrain: bool = False,
              progress: bool = True, **loss_hparams: Any) -> nn.Module:
    """A trained model in eval mode on ``device``: from the cache, else trained and cached.

    ``method`` is a loss name from :data:`robattr.train.LOSSES`; ``loss_hparams`` go to
    that loss. ``activation="softplus"`` needs ``beta`` (the model is trained with it).
    ``train_size`` (default ``$ROBATTR_TRAIN_SIZE``, else the whole split) trains on the
    first images of the train split only (all of them when the split is smaller; the
    metadata's ``train_images`` says how many). ``augment`` (``"crop"``, ``"flip"``,
    ``"crop+flip"``) and ``schedule`` (``"cosine"``, ``"onecycle"``) set the training
    recipe (:mod:`robattr.train.batches`; left out: the dataset's entry in
    ``$ROBATTR_RECIPE``, which a profile's ``recipe:`` sets, else none and a step schedule).
    ``batch_size`` left out: :func:`default_batch_size` (64; IG-NORM 000's 16).
    ``retrain=True`` discards a cached copy. Every call returns a fresh module; its
    metadata (config, test accuracy, timings, versions) is ``model.zoo_meta``. With
    ``$ROBATTR_ZOO_REQUESTS`` set, every call is logged there (:func:`request_log`).
    """
    cfg = config(dataset, arch, method, epochs=epochs, lr=lr, batch_size=batch_size,
                 optimizer=optimizer, weight_decay=weight_decay, milestones=milestones,
                 seed=seed, activation=activation, beta=beta, train_size=train_size,
                 augment=augment, schedule=schedule, **loss_hparams)
    key = _key(cfg)
    _log_request(key, cfg)
    dev = get_device(device)
    if retrain:
        _remove(*paths(key))
    model = _load(key, cfg, dataset)
    if model is None:
        # One trainer per model across processes and nodes sharing the cache folder: the
        # others wait for the lock, then find the model cached.
        with _train_lock(key):
            model = _load(key, cfg, dataset)
            if model is None:
                _STATS["misses"] += 1
                return _train(key, cfg, dataset, dev, progress)
    _STATS["hits"] += 1
    return model.to(dev).eval()


def _train(key: str, cfg: dict[str, Any], dataset: str, dev: torch.device,
           progress: bool) -> nn.Module:
    from robattr import __version__, data
    from robattr.models import build
    from robattr.train import evaluate, fit

    seed_everything(cfg["seed"])
    model = build(cfg["arch"], dataset, cfg["activation"], cfg["beta"])
    t0 = time.perf_counter()
    train_set = data.load(dataset, split="train")
    if cfg.get("train_size") is not None and cfg["train_size"] < len(train_set):
        # a profile-wide train_size caps the larger splits and leaves smaller ones whole
        train_set = torch.utils.data.Subset(train_set, range(cfg["train_size"]))
    hist = fit(model, train_set, loss=_loss(cfg),
               epochs=cfg["epochs"], batch_size=cfg["batch_size"], lr=cfg["lr"],
               optimizer=cfg["optimizer"], weight_decay=cfg["weight_decay"],
               milestones=cfg["milestones"], seed=cfg["seed"], device=dev, progress=progress,
               augment=cfg.get("augment", "none"), schedule=cfg.get("schedule", "step"))
    wall = time.perf_counter() - t0
    test_acc = evaluate(model, data.load(dataset, split="test"), device=dev)
    meta = {
        "key": key,
        "zoo_format": ZOO_FORMAT,
        "config": cfg,
        "test_acc": test_acc,
        "train_images": len(train_set),
        "train_acc": hist.train_acc[-1],
        "final_loss": hist.loss[-1],
        "seconds_per_epoch": hist.seconds_per_epoch,
        # peak memory of training (robattr.train.trainer's docstring): CUDA's
        # max_memory_allocated on a GPU; on the CPU the peak activation bytes autograd
        # holds for backward in the first step + parameters, gradients and optimizer
        # state. saved_tensor_peak_bytes: that activation peak, on every device
        "peak_memory_bytes": getattr(hist, "peak_memory_bytes", None),
        "peak_memory_measure": getattr(hist, "memory_measure", None),
        "saved_tensor_peak_bytes": getattr(hist, "saved_tensor_peak_bytes", None),
        "train_seconds": wall,
        "history": {"loss": hist.loss, "train_acc": hist.train_acc, "seconds": hist.seconds},
        "num_params": sum(p.numel() for p in model.parameters()),
        "device": str(dev),
        "device_name": (torch.cuda.get_device_name(dev) if dev.type == "cuda"
                        else platform.processor() or platform.machine()),
        "precision": precision.get() if dev.type == "cuda" else "fp32",   # robattr.precision
        "torch_version": torch.__version__,
        "robattr_version": __version__,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }
    model.zoo_meta = _save(key, model, meta)
    _log_training(meta)
    return model.eval()


# --------------------------------------------------------------------------- sharing
#: Cache hits and misses (trainings) of :func:`get_model` in this process.
_STATS = {"hits": 0, "misses": 0}

#: A lock older than this (seconds) whose owner cannot be checked is taken over.
LOCK_STALE_SECONDS = float(os.environ.get("ROBATTR_ZOO_LOCK_STALE", 24 * 3600))


def stats() -> dict[str, int]:
    """``{"hits": n, "misses": m}``: cached loads and trainings by :func:`get_model` in
    this process since it started (or since :func:`reset_stats`)."""
    return dict(_STATS)


def reset_stats() -> None:
    _STATS.update(hits=0, misses=0)


def _lock_owner_gone(lock: Path) -> bool:
    """Whether the writer of ``lock`` is gone: same host, its pid runs no process begun before
    the lock (pids recur after a restart; 2 s slack); else older than LOCK_STALE_SECONDS."""
    try:
        host, pid, started = lock.read_text().split()
        age = time.time() - float(started)
    except (OSError, ValueError):        # being written, or garbled: judge by the file's age
        try:
            age = time.time() - lock.stat().st_mtime
        except OSError:
            return False                  # vanished: the next attempt will succeed
        return age > LOCK_STALE_SECONDS
    if host == platform.node():
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return (process_start(int(pid)) or 0.0) > float(started) + 2.0   # None: no /proc
    return age > LOCK_STALE_SECONDS


@contextlib.contextmanager
def _train_lock(key: str, poll: float = 0.5):
    """An exclusive lock file ``<key>.lock`` in the zoo folder (``O_CREAT | O_EXCL``: atomic
    on local and NFSv3+ file systems); a stale one (:func:`_lock_owner_gone`) is removed."""
    lock = zoo_dir() / f"{key}.lock"
    while True:
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            break
        except FileExistsError:
            if _lock_owner_gone(lock):
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()
                continue
            time.sleep(poll)
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(f"{platform.node()} {os.getpid()} {time.time()}\n")
        yield
    finally:
        with contextlib.suppress(FileNotFoundError):
            lock.unlink()


#: Environment variable naming a file where every :func:`get_model` call is logged.
REQUESTS_ENV = "ROBATTR_ZOO_REQUESTS"


def _log_request(key: str, cfg: dict[str, Any]) -> None:
    path = os.environ.get(REQUESTS_ENV)
    if not path:
        return
    from robattr import results

    line = json.dumps({"key": key, "config": cfg,
                       "notebook": os.environ.get(results.NOTEBOOK_ENV, ""),
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


def _loss(cfg: dict[str, Any]):
    from robattr.train import make_loss

    return make_loss(cfg["method"], **cfg["loss"])


def info(dataset: str, arch: str, method: str = "ce", **hparams: Any) -> dict[str, Any] | None:
    """The stored metadata of a model if it is cached (same arguments as :func:`get_model`,
    minus ``device``/``retrain``/``progress``), else None. Reads the JSON only."""
    key = config_hash(dataset, arch, method, **hparams)
    wpath, jpath = paths(key)
    if not (wpath.exists() and jpath.exists()):
        return None
    try:
        meta = _read_meta(jpath)
    except _Corrupt:
        return None
    return meta if meta.get("key") == key else None


def list_models():
    """A pandas DataFrame with one row per cached model (unreadable entries skipped)."""
    import pandas as pd

    cols = ["key", "dataset", "arch", "method", "activation", "beta", "seed", "epochs", "lr",
            "batch_size", "optimizer", "train_size", "loss", "test_acc", "train_seconds",
            "device", "created", "weights_bytes"]
    rows = []
    for jpath in sorted(zoo_dir().glob("*.json")):
        if jpath.name.startswith("."):
            continue
        try:
            meta = _read_meta(jpath)
            cfg = meta["config"]
            row = {c: cfg.get(c) for c in cols if c in cfg}
            row.update(key=meta["key"], loss=json.dumps(cfg.get("loss", {}), sort_keys=True),
                       test_acc=meta.get("test_acc"), train_seconds=meta.get("train_seconds"),
                       device=meta.get("device"), created=meta.get("created"),
                       weights_bytes=meta.get("weights_bytes"))
        except (_Corrupt, KeyError, TypeError, AttributeError):
            continue
        rows.append(row)
    df = pd.DataFrame(rows, columns=cols)
    return df.sort_values("created", ignore_index=True) if len(df) else df


_alignment_losses.register_key_loader(load_key)   # ATEX's teacher key -> a model
