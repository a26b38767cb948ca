"""The plan's estimates against real runs: ``robattr plan --check``.

:func:`check_against_stamps` (the book's last build) and :func:`check_run` (one executed
notebook) compare the estimates of :func:`robattr.book.plan.plan` with the seconds the
runs took, replaying the zoo as it was during each run; :func:`check_training` compares
the training estimates with the seconds per epoch the zoo recorded.
"""
from __future__ import annotations

import contextlib
import json
import math
import platform
import statistics
from pathlib import Path
from typing import Callable

from robattr.book.calibration import _threads, calibrate
from robattr.book.notebooks import discover, project_root
from robattr.book.plan import ModelPlan, _hms, _n_train, _select, _zoo_key, plan
from robattr.book.profiles import load_profile, resolve
from robattr.cost import steps_of

__all__ = ["check_against_stamps", "check_run", "format_check", "check_training",
           "format_training_check"]


def _run_window(path: Path):
    """(start, end) of the papermill run that wrote an executed notebook, as datetimes."""
    import datetime as dt

    meta = json.loads(path.read_text()).get("metadata", {}).get("papermill", {})
    try:
        return (_utc(dt.datetime.fromisoformat(meta["start_time"])),
                _utc(dt.datetime.fromisoformat(meta["end_time"])))
    except (KeyError, TypeError, ValueError):
        return None


def _utc(t):
    """A datetime with a time zone (a naive one is read as UTC, as papermill and the zoo
    write them)."""
    import datetime as dt

    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


def _trained_between(start, end) -> set[str]:
    """Zoo keys that ``trainings.jsonl`` records as trained in [start, end] (+1 s)."""
    import datetime as dt

    from robattr import zoo

    path = zoo.zoo_dir() / "trainings.jsonl"
    keys = set()
    if not path.exists():
        return keys
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
            t = _utc(dt.datetime.fromisoformat(rec["created"]))
        except (ValueError, KeyError, TypeError):
            continue
        if start <= t <= end + dt.timedelta(seconds=1):
            keys.add(rec["key"])
    return keys


def check_against_stamps(root=None, profile: str = "quick", only: str | None = None, *,
                         log: Callable[[str], None] | None = None) -> list[dict]:
    """The estimate of each notebook against the seconds of its last run in the book
    (``book/.robattr-stamps.json``, written by ``robattr build``), for the notebooks last
    built with ``profile`` (:func:`check_run` for each). Returns one dict per notebook:
    key, estimate, actual, ratio (estimate / actual), trained (models trained in that
    run), ``params_changed`` (the run had other parameter values than the notebook's
    current ones in this profile: the estimate is for the current ones) and the
    estimate's parts."""
    from robattr.book.stamps import read_stamps

    root = project_root(root)
    book = root / "book"
    stamps = read_stamps(book)
    prof = load_profile(profile)
    out = []
    for nb in _select(discover(root), only):
        st = stamps.get(nb.key)
        if not st or st.get("profile") != prof["name"]:
            continue
        row = check_run(root, nb.key, nb.output(book), profile, seconds=float(st["seconds"]),
                        log=log)
        row["params_changed"] = st.get("params") != resolve(nb, prof)
        out.append(row)
    return out


def check_run(root, key: str, executed, profile: str = "quick", *, seconds: float | None = None,
              log: Callable[[str], None] | None = None) -> dict:
    """The estimate of notebook ``key`` in ``profile`` against one executed run of it (the
    notebook papermill wrote, ``executed``): ``seconds`` (default papermill's duration)
    against the plan with the zoo of that run replayed: the models ``trainings.jsonl``
    records as trained between papermill's start and end times count as trained, the
    others as cached."""
    executed = Path(executed)
    meta = json.loads(executed.read_text()).get("metadata", {}).get("papermill", {}) \
        if executed.exists() else {}
    if seconds is None:
        seconds = float(meta["duration"])
    window = _run_window(executed) if executed.exists() else None
    trained = _trained_between(*window) if window else set()
    est = plan(root, profile, only=key, log=log, assume_trained=trained).notebooks[0]
    return {"key": key, "estimate": est.seconds, "actual": seconds,
            "ratio": est.seconds / seconds,
            "trained": sum(m.status == "train" for m in est.models),
            "work": est.work_seconds, "fixed": est.fixed_seconds, "training": est.train_seconds}


def check_training(device="auto", *, log: Callable[[str], None] | None = None) -> list[dict]:
    """The estimated seconds per epoch of every model in the zoo that was trained on this
    device (same device name, CPU or GPU), against the seconds per epoch the zoo recorded
    when it trained it. On the CPU each model is priced on the thread count it trained with
    (one per worker under ``robattr train --jobs 2`` on two cores): a step on one thread
    takes about twice as long as on two, so pricing every record at torch's thread count
    would misread the workers' records as a plan off by half. One dict per model: key,
    model, threads (None where the record has none or on a GPU), estimate, recorded,
    ratio."""
    from robattr import zoo
    from robattr.utils import get_device

    device = get_device(device)
    import torch

    here = (torch.cuda.get_device_name(device) if device.type == "cuda"
            else platform.processor() or platform.machine())
    metas = []
    for jpath in sorted(zoo.zoo_dir().glob("*.json")):
        try:
            meta = json.loads(jpath.read_text())
            cfg, spe = meta["config"], meta["seconds_per_epoch"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        same = str(meta.get("device", "")).split(":")[0] == device.type
        if meta.get("device_name") != here or not same:
            continue
        if isinstance(spe, (list, tuple)):
            spe = statistics.fmean(spe) if spe else None
        if spe:
            threads = meta.get("threads") if device.type == "cpu" else None
            ok = isinstance(threads, int) and not isinstance(threads, bool) and threads >= 1
            metas.append((cfg, float(spe), threads if ok else None))
    costs = {}
    for threads in dict.fromkeys(t for _, _, t in metas):
        works = [steps_of(cfg, 1) for cfg, _, t in metas if t == threads]
        with contextlib.nullcontext() if threads is None else _threads(threads):
            costs[threads] = calibrate(works, device, notebook=False, log=log)
    out = []
    for cfg, spe, threads in metas:
        steps = max(1, math.ceil(_n_train(cfg) / cfg["batch_size"]))
        est = steps * costs[threads].cost(steps_of(cfg, 1))
        out.append({"key": _zoo_key(cfg), "model": ModelPlan("", cfg, "").label,
                    "threads": threads, "estimate": est, "recorded": spe, "ratio": est / spe})
    return out


def format_check(rows: list[dict], profile: str) -> str:
    """:func:`check_against_stamps` as a table with the spread of the ratios."""
    if not rows:
        return (f"robattr plan --check: no notebook of the book was last built with profile "
                f"{profile!r} and its current parameters (run robattr build --profile {profile})")
    lines = [f"estimate / actual, profile {profile} (actual: the seconds of the book's last build)",
             f"{'notebook':36s} {'estimate':>9s} {'actual':>9s} {'ratio':>6s}  trained"]
    for r in rows:
        flag = "" if 1 / 3 <= r["ratio"] <= 3 else "   <- outside [1/3, 3]"
        star = "*" if r.get("params_changed") else " "
        lines.append(f"{r['key'] + star:36s} {_hms(r['estimate']):>9s} {_hms(r['actual']):>9s} "
                     f"{r['ratio']:6.2f}  {r['trained']}{flag}")
    ratios = [r["ratio"] for r in rows]
    total_e, total_a = sum(r["estimate"] for r in rows), sum(r["actual"] for r in rows)
    within = sum(1 / 3 <= x <= 3 for x in ratios)
    lines.append(f"total {_hms(total_e)} estimated, {_hms(total_a)} actual (ratio "
                 f"{total_e / total_a:.2f}); median ratio {statistics.median(ratios):.2f}; "
                 f"{within} of {len(ratios)} within a factor of 3")
    if any(r.get("params_changed") for r in rows):
        lines.append("* the notebook's parameters in this profile changed since that run: the "
                     "estimate is for the current ones")
    return "\n".join(lines)


def format_training_check(rows: list[dict], full: bool = False) -> str:
    """:func:`check_training` as a summary line (and one line per model with ``full``)."""
    if not rows:
        return "training: no model in the zoo was trained on this device"
    ratios = sorted(r["ratio"] for r in rows)
    within = sum(1 / 3 <= x <= 3 for x in ratios)
    lines = [f"training: {len(rows)} zoo model(s) trained on this device; estimated / recorded "
             f"seconds per epoch (each priced on the threads it trained with): median "
             f"{statistics.median(ratios):.2f}, from {ratios[0]:.2f} "
             f"to {ratios[-1]:.2f}; {within} within a factor of 3 (a recorded time includes "
             "whatever else the machine ran then)"]
    if full:
        lines += [f"  {r['model']:55s} {r['estimate']:9.2f} s {r['recorded']:9.2f} s "
                  f"{r['ratio']:6.2f}" + (f"  ({r['threads']} thread(s))" if r.get("threads") else "")
                  for r in sorted(rows, key=lambda r: r["ratio"])]
    return "\n".join(lines)
