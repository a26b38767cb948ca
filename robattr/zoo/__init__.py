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

A training whose epochs are long keeps a checkpoint, ``<key>.ckpt`` (at most one save
every :data:`CHECKPOINT_SECONDS`; :mod:`robattr.train.checkpoint`): a training that is
interrupted goes on from it the next time the model is asked for, and ends with the
weights an uninterrupted one would have; :func:`partly_trained` lists them.

The package's rooms: :mod:`~robattr.zoo.config` (configuration and key),
:mod:`~robattr.zoo.store` (files, checks, checkpoints), :mod:`~robattr.zoo.lock` (one
trainer per model across processes), :mod:`~robattr.zoo.log` (what was asked for and
trained) and :mod:`~robattr.zoo.transfer` (models and checkpoints carried to another
machine's zoo, ``robattr zoo export|import``); this module trains and answers.
"""
from __future__ import annotations

import datetime as _dt
import json
import platform
import time
from typing import Any

import torch
from torch import nn

from robattr import precision
from robattr.train.losses import alignment as _alignment_losses
from robattr.utils import get_device, seed_everything
from robattr.zoo import store
from robattr.zoo.config import (DEFAULTS, METHOD_DEFAULTS, RECIPE_ENV, TRAIN_SIZE_ENV,
                                ZOO_FORMAT, _key, config, config_hash, default_batch_size,
                                effective_recipe, effective_train_size)
from robattr.zoo.lock import train_lock
from robattr.zoo.log import (_STATS, REQUESTS_ENV, _log_request, _log_training, request_log,
                             reset_stats, stats, training_log)
from robattr.zoo.store import (ZooCacheWarning, _Corrupt, _load, _read_meta, _remove, _save,
                               load_key, partly_trained, paths, zoo_dir)

__all__ = [
    "ZOO_FORMAT", "DEFAULTS", "ZooCacheWarning", "get_model", "get_models", "info", "list_models",
    "config", "config_hash", "zoo_dir", "paths", "stats", "reset_stats", "training_log",
    "TRAIN_SIZE_ENV", "effective_train_size", "RECIPE_ENV", "effective_recipe",
    "REQUESTS_ENV", "request_log", "METHOD_DEFAULTS", "default_batch_size", "load_key",
    "partly_trained", "CHECKPOINT_SECONDS", "get_config",
]

#: A training saves its checkpoint at most once in this many seconds (after an epoch):
#: the short trainings of the quick profile never write one; a long one loses at most
#: this much work (plus the epoch in progress) when it is interrupted.
CHECKPOINT_SECONDS = 30.0

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
    return get_config(cfg, dataset=dataset, device=device, retrain=retrain, progress=progress)


#: What a model spec holds besides :func:`get_model`'s keyword arguments.
SPEC_FIELDS = ("dataset", "arch", "method")


def get_models(specs: dict[str, dict[str, Any]], **shared: Any) -> dict[str, nn.Module]:
    """``label -> model`` for each ``label -> spec`` of ``specs``, in their order.

    A spec is :func:`get_model`'s arguments as one dict (``dataset``, ``arch``, ``method``
    and the hyper-parameters; :func:`robattr.cost.spec` writes one): the form in which a
    chapter declares the models of a notebook once, for the notebook and for
    ``robattr plan`` alike. ``shared`` (``device``, ``progress``, ...) goes to every call;
    a key in both a spec and ``shared`` is refused rather than silently overridden.
    """
    out = {}
    for label, spec in specs.items():
        missing = [f for f in SPEC_FIELDS[:2] if f not in spec]
        if missing:
            raise ValueError(f"get_models: spec {label!r} has no {missing}: {spec}")
        both = sorted(set(spec) & set(shared))
        if both:
            raise ValueError(f"get_models: {both} given by spec {label!r} and by the shared "
                             "arguments")
        hp = {k: v for k, v in spec.items() if k not in SPEC_FIELDS}
        out[label] = get_model(spec["dataset"], spec["arch"], spec.get("method", "ce"),
                               **hp, **shared)
    return out


def get_config(cfg: dict[str, Any], *, dataset: Any = None,
               device: str | torch.device = "auto", retrain: bool = False,
               progress: bool = True) -> nn.Module:
    """:func:`get_model` for a full configuration (what :func:`config` returns and what
    ``robattr plan`` declares): the cached model, else trained and cached."""
    if not isinstance(cfg, dict) or cfg.get("zoo_format") != ZOO_FORMAT:
        raise ValueError("cfg must be a configuration made by robattr.zoo.config (zoo format "
                         f"{ZOO_FORMAT})")
    dataset = cfg["dataset"] if dataset is None else dataset
    key = _key(cfg)
    _log_request(key, cfg)
    dev = get_device(device)
    if retrain:
        _remove(*paths(key))
    model = _load(key, cfg, dataset)
    if model is None:
        # One trainer per model across processes and nodes sharing the cache folder: the
        # others wait for the lock, then find the model cached.
        with train_lock(key):
            model = _load(key, cfg, dataset)
            if model is None:
                _STATS["misses"] += 1
                return _train(key, cfg, dataset, dev, progress)
    _STATS["hits"] += 1
    return model.to(dev).eval()


def _progress(progress: bool) -> dict[str, Any]:
    """How a training shows its progress: as asked; in a kernel that the build runs, never
    on the page, but, when ``ROBATTR_PROGRESS`` names a file (``robattr run``), in that
    file, which the build shows in its terminal: a training of minutes would otherwise
    look like a hung build."""
    from robattr import context

    ctx = context.current()
    if ctx.progress:
        return {"progress": True, "progress_file": open(ctx.progress, "a", encoding="utf-8")}  # noqa: SIM115
    if ctx.results or ctx.notebook:       # a kernel of the build: no bar on the page
        return {"progress": False}
    return {"progress": progress}


def _train(key: str, cfg: dict[str, Any], dataset: str, dev: torch.device,
           progress: bool) -> nn.Module:
    from robattr import data
    from robattr.version import __version__
    from robattr.models import build
    from robattr.train import evaluate, fit

    seed_everything(cfg["seed"])
    model = build(cfg["arch"], dataset, cfg["activation"], cfg["beta"])
    ckpt = store.checkpoint(key, cfg, min_interval=CHECKPOINT_SECONDS)
    resumed = ckpt.epochs_done() or 0
    t0 = time.perf_counter()
    train_set = data.load(dataset, split="train")
    if cfg.get("train_size") is not None and cfg["train_size"] < len(train_set):
        # a profile-wide train_size caps the larger splits and leaves smaller ones whole
        train_set = torch.utils.data.Subset(train_set, range(cfg["train_size"]))
    hist = fit(model, train_set, loss=_loss(cfg),
               epochs=cfg["epochs"], batch_size=cfg["batch_size"], lr=cfg["lr"],
               optimizer=cfg["optimizer"], weight_decay=cfg["weight_decay"],
               milestones=cfg["milestones"], seed=cfg["seed"], device=dev,
               augment=cfg.get("augment", "none"), schedule=cfg.get("schedule", "step"),
               checkpoint=ckpt, **_progress(progress))
    wall = time.perf_counter() - t0 + sum(hist.seconds[:resumed])
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
        # the process's CPU seconds per epoch (all threads) and its thread count: wall
        # seconds count whatever else ran on the machine, these do not
        "cpu_seconds_per_epoch": hist.cpu_seconds_per_epoch,
        "threads": torch.get_num_threads(),
        # peak memory of training (robattr.train.trainer's docstring): CUDA's
        # max_memory_allocated on a GPU; on the CPU the peak activation bytes autograd
        # holds for backward in the first step + parameters, gradients and optimizer
        # state. saved_tensor_peak_bytes: that activation peak, on every device
        "peak_memory_bytes": getattr(hist, "peak_memory_bytes", None),
        "peak_memory_measure": getattr(hist, "memory_measure", None),
        "saved_tensor_peak_bytes": getattr(hist, "saved_tensor_peak_bytes", None),
        "train_seconds": wall,
        "resumed_after_epoch": resumed,         # 0: trained in one go
        "history": {"loss": hist.loss, "train_acc": hist.train_acc, "seconds": hist.seconds,
                    "cpu_seconds": hist.cpu_seconds},
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
    store.clear_checkpoint(key)
    _log_training(meta)
    return model.eval()


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
