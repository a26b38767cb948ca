"""``robattr train``: train a profile's zoo models before its build.

A profile's notebooks declare the zoo models they ask for (:mod:`robattr.book.plan`).
:func:`pretrain` trains the ones the zoo does not hold yet, in the order the notebooks ask
for them (a teacher before the ATEX student that names it), each on the device its
notebook would use, and goes on from the checkpoint of a training that was interrupted.
The build that follows finds them cached and spends its time on the notebooks' own work.
Run it in the background for a long profile (``robattr train --profile medium``, with
``--cheapest-first`` to train the quick models first, ``--jobs 2`` to train two models at
once, each on its share of the cores); stop it at any time and start it again: at most the
epoch in progress, and the last ``robattr.zoo.CHECKPOINT_SECONDS``, are lost.

Whether N models at once, each on its share of the cores, finish sooner than the same
models one after the other on every core depends on how well a step uses a second thread:
``benchmarks/training.py --jobs N`` measures it, and ``robattr plan --jobs N`` prices it.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

from robattr.book.notebooks import discover, project_root
from robattr.book.plan import _select, declared_models, teachers, worker_threads
from robattr.book.profiles import effective_recipe, effective_train_size, load_profile, resolve
from robattr.targets import judged

__all__ = ["Pending", "requests", "requested", "pending", "cheapest_first", "pretrain"]


@dataclass(frozen=True)
class Pending:
    """A zoo model a profile's notebooks ask for: its configuration, the first notebook
    that asks for it, and the device that notebook runs on."""

    key: str
    config: dict
    notebook: str
    device: str

    @property
    def label(self) -> str:
        c = self.config
        act = "" if c["activation"] == "relu" else f" {c['activation']}({c['beta']:g})"
        return (f"{c['dataset']} {c['arch']}{act} {c['method']}, seed {c['seed']}, "
                f"{c['epochs']} epochs")


def requests(root=None, profile: str = "quick", only: str | None = None):
    """Every model request of the notebooks of ``profile`` (matching ``only``), in notebook
    order, repeats included: ``(zoo key, configuration, notebook key, its parameters)``."""
    from robattr.zoo.config import _key

    prof = load_profile(profile)
    for nb in _select(discover(project_root(root)), only):
        params = resolve(nb, prof)
        for cfg in declared_models(nb.key, params, effective_train_size(prof, nb.key),
                                   effective_recipe(prof)):
            yield _key(cfg), cfg, nb.key, params


def requested(root=None, profile: str = "quick", only: str | None = None) -> list[Pending]:
    """The models the notebooks of ``profile`` (matching ``only``) ask for, each once, in
    the order of the notebooks' first requests, whether the zoo holds them or not."""
    out, seen = [], set()
    for key, cfg, notebook, params in requests(root, profile, only):
        if key not in seen:
            seen.add(key)
            out.append(Pending(key, cfg, notebook, str(params.get("device", "auto"))))
    return out


def pending(root=None, profile: str = "quick", only: str | None = None) -> list[Pending]:
    """The models of :func:`requested` that the zoo does not hold yet."""
    from robattr import zoo

    return [m for m in requested(root, profile, only)
            if not all(p.exists() for p in zoo.paths(m.key))]


def cheapest_first(todo: list[Pending], seconds: dict[str, float]) -> list[Pending]:
    """``todo`` ordered by estimated training ``seconds`` (``{zoo key: seconds}``; a model
    without an estimate last, in its order), each model's teacher (a zoo key among its loss's
    values, ATEX's ``teacher``) moved before it: in one session of a long profile, as many
    models as possible, and the claims they decide, are done first."""
    by_key = {m.key: m for m in todo}
    ranked = sorted(todo, key=lambda m: seconds.get(m.key, float("inf")))
    out: list[Pending] = []
    placed: set[str] = set()

    def place(m: Pending, chain: tuple[str, ...] = ()) -> None:
        if m.key in placed:
            return
        if m.key in chain:
            raise ValueError(f"models that name each other as teachers: {' -> '.join(chain)}")
        for v in teachers(m.config, by_key):
            place(by_key[v], chain + (m.key,))
        placed.add(m.key)
        out.append(m)

    for m in ranked:
        place(m)
    return out


def _train_one(config: dict, device: str, threads: int) -> float:
    """Train (or load) one zoo model in a worker process; its test accuracy."""
    import torch

    from robattr import zoo

    torch.set_num_threads(threads)
    return float(zoo.get_config(config, device=device, progress=False).zoo_meta["test_acc"])


def pretrain(root=None, profile: str = "quick", only: str | None = None, *,
             progress: bool = True, log: Callable[[str], None] = print,
             order: str = "notebooks", jobs: int = 1, threads: int | None = None) -> int:
    """Train every model of :func:`pending`; returns how many were trained. A model that
    fails to train is reported and the others still train; the last failure is raised
    at the end. ``order``: ``"notebooks"`` (the order the notebooks ask for them) or
    ``"cheapest"`` (:func:`cheapest_first`, by ``robattr plan``'s estimates). ``jobs`` > 1:
    that many models at a time, each in its own process on ``threads`` threads (default:
    the cores shared out, at least one), a student once its teacher is trained."""
    from robattr import zoo

    if order not in ("notebooks", "cheapest"):
        raise ValueError(f"order must be 'notebooks' or 'cheapest', got {order!r}")
    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    todo = pending(root, profile, only)
    if order == "cheapest" and todo:
        from robattr.book.plan import plan

        estimates = {m.key: m.seconds for nb in plan(root, profile, only, log=log).notebooks
                     for m in nb.models if m.status == "train"}
        todo = cheapest_first(todo, estimates)
    partly = {m["key"]: m["epochs_done"] for m in zoo.partly_trained()}
    at_once = f", {jobs} at a time" if jobs > 1 and len(todo) > 1 else ""
    log(f"robattr train: profile {profile}, {len(todo)} model(s) to train in {zoo.zoo_dir()}"
        + at_once)
    n = len(todo)

    def started(i: int, m: Pending) -> None:
        done = partly.get(m.key)
        goes_on = f", going on after epoch {done}" if done else ""
        log(f"[{i}/{n}] {m.label} (for {m.notebook}{goes_on})")

    def finished(i: int, m: Pending, t0: float, accuracy: float) -> None:
        c = m.config
        log(f"[{i}/{n}] done in {time.perf_counter() - t0:.0f} s: "
            + judged(c["dataset"], c["arch"], c["method"], accuracy, c.get("loss")))

    if jobs > 1 and n > 1:
        return _pretrain_parallel(todo, jobs, threads, started, finished, log)
    failure = None
    for i, m in enumerate(todo, 1):
        started(i, m)
        t0 = time.perf_counter()
        try:
            model = zoo.get_config(m.config, device=m.device, progress=progress)
        except Exception as err:  # noqa: BLE001 - report it, train the others
            log(f"[{i}/{n}] FAILED: {type(err).__name__}: {err}")
            failure = err
            continue
        finished(i, m, t0, model.zoo_meta["test_acc"])
    if failure is not None:
        raise failure
    return n


def _pretrain_parallel(todo: list[Pending], jobs: int, threads: int | None,
                       started, finished, log) -> int:
    """:func:`pretrain` with ``jobs`` worker processes (spawned: a forked process would
    inherit torch's thread pool), a model handed out in ``todo``'s order once its teacher
    is done; the other models go on when one fails."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    threads = threads or worker_threads(jobs)
    keys = {m.key for m in todo}
    number = {m.key: i for i, m in enumerate(todo, 1)}
    waiting, running, done, failed = list(todo), {}, set(), {}
    failure = None
    with ProcessPoolExecutor(max_workers=jobs,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        while waiting or running:
            for m in list(waiting):
                if len(running) >= jobs:
                    break
                mine = teachers(m.config, keys)
                lost = [t for t in mine if t in failed]
                if lost:
                    waiting.remove(m)
                    failed[m.key] = failure = RuntimeError(
                        f"its teacher [{number[lost[0]]}/{len(todo)}] failed to train")
                    log(f"[{number[m.key]}/{len(todo)}] FAILED: {failure}")
                    continue
                if all(t in done for t in mine):
                    waiting.remove(m)
                    started(number[m.key], m)
                    fut = pool.submit(_train_one, m.config, m.device, threads)
                    running[fut] = (m, time.perf_counter())
            if not running:         # every model left waits for another: teachers in a cycle
                raise RuntimeError("robattr train: models that name each other as teachers: "
                                   + ", ".join(m.label for m in waiting))
            finished_now, _ = wait(running, return_when=FIRST_COMPLETED)
            for fut in finished_now:
                m, t0 = running.pop(fut)
                try:
                    accuracy = fut.result()
                except Exception as err:  # noqa: BLE001 - report it, train the others
                    log(f"[{number[m.key]}/{len(todo)}] FAILED: {type(err).__name__}: {err}")
                    failed[m.key] = failure = err
                    continue
                done.add(m.key)
                finished(number[m.key], m, t0, accuracy)
    if failure is not None:
        raise failure
    return len(todo)
