"""What a profile will cost before it runs: ``robattr plan``.

For every notebook of a profile, :func:`plan` says

* the **data** it reads and whether the files are there (:func:`robattr.data.available`:
  nothing is downloaded; the notebooks that run one block per data set choose their
  blocks as they do when they run, through :mod:`robattr.blocks`, which opens the data
  sets it finds);
* the **zoo models** it asks for, which of them the zoo already holds (with the
  ``seconds_per_epoch`` the zoo recorded when it trained them) and which it will train;
* an **estimate of its time** on the device it would run on here: the training of the
  models that are not cached (epochs x steps per epoch x the measured seconds of one
  training step of that loss, architecture and batch size), plus the notebook's own work
  (its gradient evaluations, forward passes, Monte-Carlo draws, dense eigenproblems and
  matrix products, each times its measured cost, :mod:`robattr.book.calibration`) and a
  measured fixed cost per notebook and per figure;
* the state of its kept **reference** run (``reference/<profile>/``).

The plan knows a notebook's zoo calls and its work before running it because each
notebook *declares* them, in its chapter's module ``robattr.chapters.<key>.plan``
(read through :func:`robattr.chapters.declaration`): a
:class:`robattr.cost.Declaration`, a function of the notebook's resolved parameters that
returns its :func:`robattr.zoo.get_model` arguments, and one that returns its work as
:class:`robattr.cost.Work` items. ``tests/book/test_plan.py`` executes notebooks with an empty
zoo and checks that the models they trained are exactly the declared ones, so a notebook
that changes its zoo calls without its declaration fails a test.
:mod:`robattr.book.plan_check` compares the estimates with real runs.
"""
from __future__ import annotations

import fnmatch
import json
import math
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable

from robattr.book.calibration import Calibration, calibrate
from robattr.book.notebooks import Notebook, discover, project_root
from robattr.book.params import ParameterError
from robattr.book.profiles import (effective_recipe, effective_train_size, load_profile,
                                   resolve)
from robattr.catalog import TEST_SIZES
from robattr.chapters import declaration, declarations
from robattr.cost import TRAIN_SIZES, Declaration, Work, family, fwd, steps_of
from robattr.targets import judged

__all__ = ["Work", "Declaration", "DECLARATIONS", "TRAIN_SIZES", "declared_models",
           "declared_work", "declared_data", "Calibration", "calibrate", "plan", "Plan",
           "NotebookPlan", "ModelPlan", "format_table", "count_figures", "worker_threads",
           "jobs_seconds", "teachers", "schedule"]


def __getattr__(name: str):
    if name == "DECLARATIONS":      # every notebook's declaration, by key (former name)
        return declarations()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# --------------------------------------------------------------------------- declarations
def _declaration(key: str) -> Declaration:
    try:
        return declaration(key)
    except KeyError as err:
        why = str(err.args[0]).removeprefix(f"{key}: ")
        raise ParameterError(f"{key}: no plan declaration ({why}); add one, its zoo models "
                             "and its work, to its chapter's robattr/chapters/<key>/plan.py"
                             ) from None


def declared_models(key: str, params: dict, train_size: int | None = None,
                    recipe: dict | None = None) -> list[dict]:
    """The zoo configurations (:func:`robattr.zoo.config`) notebook ``key`` asks for with
    ``params``, each once, in the order of its first call; ``train_size`` and ``recipe``
    (by dataset) are the profile's (:func:`~robattr.book.profiles.effective_train_size`,
    :func:`~robattr.book.profiles.effective_recipe`)."""
    import json

    from robattr import zoo
    from robattr.book.execution import environ
    from robattr.catalog import RECIPE_ENV, TRAIN_SIZE_ENV

    # the environment the notebook's kernel would have (profiles.profile_env), so that a
    # declaration that derives a model's key (ATEX's teacher) derives the kernel's key
    env = {}
    if recipe:
        env[RECIPE_ENV] = json.dumps(recipe, sort_keys=True)
    if train_size is not None:
        env[TRAIN_SIZE_ENV] = (json.dumps(train_size, sort_keys=True)
                               if isinstance(train_size, dict) else str(train_size))
    with environ(env):
        specs = list(_declaration(key).models(params))
    out, seen = [], set()
    for spec in specs:
        spec = dict(spec)
        for field, value in ((recipe or {}).get(spec["dataset"]) or {}).items():
            spec.setdefault(field, value)
        cfg = zoo.config(spec.pop("dataset"), spec.pop("arch"), spec.pop("method", "ce"),
                         train_size=train_size, **spec)
        k = _zoo_key(cfg)
        if k not in seen:
            seen.add(k)
            out.append(cfg)
    return out


def declared_work(key: str, params: dict) -> list[Work]:
    """The work items notebook ``key`` runs with ``params``."""
    return [w for w in _declaration(key).work(params) if w.calls or w.rows]


def declared_data(key: str, params: dict) -> list[str]:
    """The datasets notebook ``key`` reads with ``params``."""
    decl = _declaration(key)
    if decl.data is not None:
        return list(decl.data(params))
    names = [params["dataset"]] if "dataset" in params else []
    for cfg in declared_models(key, params):
        if cfg["dataset"] not in names:
            names.append(cfg["dataset"])
    return names


def _zoo_key(cfg: dict) -> str:
    """The zoo key of a configuration: sha256 of its canonical JSON (robattr.zoo's rule)."""
    import hashlib

    text = json.dumps(cfg, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- the plan
@dataclass
class ModelPlan:
    """One zoo model of a notebook: ``status`` is ``"cached"`` (in the zoo), ``"train"``
    (this notebook trains it) or ``"shared"`` (an earlier notebook of the plan trains it).
    ``seconds``: the estimated training time (``"train"`` only); ``recorded_*``: what the
    zoo recorded when it trained a cached model."""

    key: str
    config: dict
    status: str
    seconds: float = 0.0
    steps: int = 0
    step_seconds: float | None = None
    recorded_seconds_per_epoch: float | None = None
    recorded_device: str | None = None
    recorded_test_acc: float | None = None
    recorded_cpu: str = ""             # CPU seconds per epoch and threads, when recorded
    epochs_done: int = 0               # a partly trained model: epochs its checkpoint holds

    @property
    def label(self) -> str:
        c = self.config
        act = "" if c["activation"] == "relu" else f" {c['activation']}({c['beta']:g})"
        return f"{c['dataset']} {c['arch']}{act} {c['method']}, {c['epochs']} epochs"


@dataclass
class NotebookPlan:
    """The plan of one notebook (seconds are estimates on ``device``)."""

    key: str
    device: str
    data: dict[str, bool]
    models: list[ModelPlan]
    train_seconds: float
    work_seconds: float
    fixed_seconds: float
    figures: int
    reference: str
    work: list[tuple[str, float]]      # the largest items: (what, seconds)

    @property
    def seconds(self) -> float:
        return self.train_seconds + self.work_seconds + self.fixed_seconds

    @property
    def data_found(self) -> bool:
        return all(self.data.values())


@dataclass
class Plan:
    profile: str
    notebooks: list[NotebookPlan]
    calibrations: list[str]

    @property
    def seconds(self) -> float:
        return sum(nb.seconds for nb in self.notebooks)

    def wall_seconds(self, jobs: int = 1) -> float:
        """Estimated wall time of ``robattr build --jobs N``: the notebooks start in plan
        order, each on the first free worker; a notebook that uses a model which another
        notebook trains waits until that notebook has finished (a conservative reading of
        the zoo's lock, which only makes it wait for the model). Each notebook takes the
        seconds this plan gives it: for N > 1, a plan priced on a worker's threads
        (``plan(..., threads=worker_threads(N))``), since a LeNet's training step runs about
        twice as fast on two threads as on one (``benchmarks/training.py --jobs 2``)."""
        if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
            raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
        if jobs == 1:
            return self.seconds
        import heapq

        trainer = {m.key: nb.key for nb in self.notebooks for m in nb.models
                   if m.status == "train"}
        free = [0.0] * jobs
        done: dict[str, float] = {}
        for nb in self.notebooks:
            start = heapq.heappop(free)
            waits = [done[trainer[m.key]] for m in nb.models
                     if m.status == "shared" and trainer.get(m.key) in done]
            end = max([start] + waits) + nb.seconds
            done[nb.key] = end
            heapq.heappush(free, end)
        return max(done.values(), default=0.0)

    def train_first_seconds(self, jobs: int) -> tuple[float, float]:
        """Estimated wall seconds of ``robattr train --jobs N`` (the models to train, in the
        order the notebooks ask for them, N at a time: :func:`robattr.book.pretrain.schedule`)
        and of the ``robattr build --jobs N`` that follows (the notebooks' own work, N at a
        time, every model cached)."""
        import heapq

        todo = [m for nb in self.notebooks for m in nb.models if m.status == "train"]
        train = schedule(todo, {m.key: m.seconds for m in todo}, jobs)
        free = [0.0] * jobs
        for nb in self.notebooks:
            heapq.heappush(free, heapq.heappop(free) + nb.work_seconds + nb.fixed_seconds)
        return train, max(free)

    def to_dict(self) -> dict:
        nbs = []
        for nb in self.notebooks:
            d = {k: v for k, v in asdict(nb).items() if k not in ("models", "work")}
            d["seconds"] = nb.seconds
            d["models"] = [{"key": m.key, "model": m.label, "status": m.status,
                            "train_seconds": m.seconds, "steps": m.steps,
                            "step_seconds": m.step_seconds,
                            "recorded_seconds_per_epoch": m.recorded_seconds_per_epoch,
                            "recorded_device": m.recorded_device,
                            "epochs_done": m.epochs_done, "config": m.config}
                           for m in nb.models]
            d["work"] = [{"what": w, "seconds": s} for w, s in nb.work]
            nbs.append(d)
        return {"profile": self.profile, "seconds": self.seconds,
                "calibrations": self.calibrations, "notebooks": nbs,
                "data_missing": sorted({n for nb in self.notebooks
                                        for n, ok in nb.data.items() if not ok}),
                "models_to_train": sum(m.status == "train" for nb in self.notebooks
                                       for m in nb.models)}


def count_figures(path: Path) -> int:
    """Figures a notebook shows: its ``plt.show()`` calls, and one for a code cell that
    draws (``plt.subplots``, ``plt.figure`` or a ``viz`` plot) without calling it."""
    import re

    cells = json.loads(Path(path).read_text())["cells"]
    n = 0
    for c in cells:
        if c["cell_type"] != "code":
            continue
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        shows = src.count("plt.show()")
        draws = re.search(r"plt\.(subplots|figure)\(|viz\.(?!set_theme)\w+\(", src)
        n += shows if shows else int(bool(draws))
    return n


def _n_train(cfg: dict) -> int:
    """The images a model trains on per epoch: its ``train_size``, capped by the split's
    size (the zoo takes the whole split when ``train_size`` exceeds it)."""
    d = cfg["dataset"]
    if d in TRAIN_SIZES:
        full = TRAIN_SIZES[d]
    else:
        root = Path(d) / "train" if (Path(d) / "train").is_dir() else Path(d)
        full = sum(1 for f in root.rglob("*") if f.is_file())      # an ImageFolder path
    return min(int(cfg["train_size"]), full) if cfg.get("train_size") else full


def _zoo_state(cfg: dict) -> dict | None:
    """The zoo's metadata of a configuration when it is cached, else None."""
    from robattr import zoo

    wpath, jpath = zoo.paths(_zoo_key(cfg))
    if not (wpath.exists() and jpath.exists()):
        return None
    try:
        meta = json.loads(jpath.read_text())
    except (OSError, ValueError):
        return None
    return meta if meta.get("key") == _zoo_key(cfg) else None


def _epochs_done(key: str) -> int:
    """Epochs a partly trained model's checkpoint holds (0 without one)."""
    from robattr.zoo import store

    if not store.checkpoint_path(key).exists():
        return 0
    return store.checkpoint(key).epochs_done() or 0


def _training_works(cfg: dict, epochs_done: int = 0) -> list[Work]:
    """What training ``cfg`` costs: its steps (those of the epochs a checkpoint does not
    hold yet) and the test accuracy."""
    steps = (cfg["epochs"] - epochs_done) * max(1, math.ceil(_n_train(cfg) / cfg["batch_size"]))
    return [steps_of(cfg, steps, what="training"),
            fwd(family(cfg["dataset"], cfg["arch"]), TEST_SIZES.get(cfg["dataset"], 0),
                what="test accuracy")]


def _select(notebooks: list[Notebook], only: str | None) -> list[Notebook]:
    if not only:
        return notebooks
    chosen = [nb for nb in notebooks if fnmatch.fnmatch(nb.key, only)]
    if not chosen:
        raise ParameterError(f"--only {only!r} matches no notebook; known notebooks: "
                             + ", ".join(nb.key for nb in notebooks))
    return chosen


def _reference_status(root: Path, name: str, notebooks: list[Notebook]) -> dict[str, str]:
    """The kept reference of profile ``name`` per notebook (robattr.book.reference)."""
    from robattr.book import reference

    return reference.status(root, name, notebooks)


def plan(root=None, profile: str = "quick", only: str | None = None, *,
         log: Callable[[str], None] | None = None,
         assume_trained: set[str] | None = None, threads: int | None = None) -> Plan:
    """The plan of ``profile`` (a name or a .yml path) for the notebooks whose key
    matches the glob ``only``: see the module docstring. Costs not yet measured on the
    device a notebook would use are measured first (:func:`calibrate`).
    ``assume_trained``: zoo keys to treat as not cached (what :func:`check_against_stamps`
    needs to replay a past run); default: the zoo's current state. ``threads``: price the
    CPU work on that many threads (a worker of ``--jobs N``: :func:`worker_threads`);
    default: torch's thread count."""
    if threads is not None:
        from robattr.book.calibration import _threads

        if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
            raise ValueError(f"threads must be an integer >= 1, got {threads!r}")
        with _threads(threads):
            return plan(root, profile, only, log=log, assume_trained=assume_trained)
    from robattr import data as rdata
    from robattr.utils import get_device

    root = project_root(root)
    prof = load_profile(profile)
    nbs = _select(discover(root), only)
    refs = _reference_status(root, prof["name"], nbs)
    items = []
    for nb in nbs:
        params = resolve(nb, prof)
        dev = get_device(params.get("device", "auto"))
        cfgs = declared_models(nb.key, params, effective_train_size(prof, nb.key),
                               effective_recipe(prof))
        items.append((nb, params, dev, cfgs, declared_work(nb.key, params)))
    cals = {}
    for dev in dict.fromkeys(d for _, _, d, _, _ in items):
        works = [w for _, _, d, cfgs, ws in items if d == dev
                 for w in ws + [x for c in cfgs for x in _training_works(c)]]
        cals[dev] = calibrate(works, dev, log=log)
    out, planned = [], set()
    for nb, params, dev, cfgs, works in items:
        cal = cals[dev]
        models = []
        for cfg in cfgs:
            key, meta = _zoo_key(cfg), _zoo_state(cfg)
            cached = key not in assume_trained if assume_trained is not None else meta is not None
            if cached:
                spe = (meta or {}).get("seconds_per_epoch")
                if isinstance(spe, (list, tuple)):
                    spe = statistics.fmean(spe) if spe else None
                models.append(ModelPlan(key, cfg, "cached", recorded_seconds_per_epoch=spe,
                                        recorded_device=(meta or {}).get("device_name"),
                                        recorded_test_acc=(meta or {}).get("test_acc"),
                                        recorded_cpu=_cpu_text(meta or {})))
            elif key in planned:
                models.append(ModelPlan(key, cfg, "shared"))
            else:
                planned.add(key)
                done = _epochs_done(key) if assume_trained is None else 0
                tw = _training_works(cfg, done)
                models.append(ModelPlan(key, cfg, "train", sum(cal.cost(w) for w in tw),
                                        int(tw[0].calls), cal.cost(steps_of(cfg, 1)),
                                        epochs_done=done))
        costs: dict[str, float] = {}
        for w in works:
            costs[w.what or w.kind] = costs.get(w.what or w.kind, 0.0) + cal.cost(w)
        figures = count_figures(nb.path)
        data = {name: rdata.available(name) for name in declared_data(nb.key, params)}
        out.append(NotebookPlan(
            nb.key, cal.description, data, models,
            train_seconds=sum(m.seconds for m in models), work_seconds=sum(costs.values()),
            fixed_seconds=cal.notebook + figures * cal.figure, figures=figures,
            reference=refs.get(nb.key, "n/a"),
            work=sorted(costs.items(), key=lambda kv: -kv[1])[:5]))
    return Plan(prof["name"], out, [c.description for c in cals.values()])


def teachers(config: dict, keys) -> list[str]:
    """The zoo keys among ``keys`` that the model of ``config`` trains from (a key among its
    loss's values: ATEX's ``teacher``)."""
    keys = set(keys)
    return [v for v in (config.get("loss") or {}).values() if isinstance(v, str) and v in keys]


def schedule(todo: list, seconds: dict[str, float], jobs: int) -> float:
    """The wall seconds of training ``todo`` (models with a zoo ``key`` and ``config``) with
    ``jobs`` models at a time, as ``robattr train --jobs N`` hands them out: whenever a
    worker is free, the first model of ``todo`` whose teacher (:func:`teachers`) is done;
    ``seconds`` are the models' estimated training times."""
    import heapq

    if isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1:
        raise ValueError(f"jobs must be an integer >= 1, got {jobs!r}")
    keys = {m.key for m in todo}
    waiting, running, done, now = list(todo), [], set(), 0.0
    while waiting or running:
        for m in list(waiting):
            if len(running) >= jobs:
                break
            if all(t in done for t in teachers(m.config, keys)):
                waiting.remove(m)
                heapq.heappush(running, (now + seconds.get(m.key, 0.0), m.key))
        if not running:
            raise ValueError("models wait for teachers that nothing trains: "
                             + ", ".join(m.key for m in waiting))
        now, key = heapq.heappop(running)
        done.add(key)
    return now


def worker_threads(jobs: int) -> int:
    """The CPU threads of each of ``jobs`` workers (``robattr build --jobs N``, ``robattr
    train --jobs N``): the cores shared out, at least one."""
    import os

    return max(1, (os.cpu_count() or 1) // jobs)


# --------------------------------------------------------------------------- output
def _hms(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def _cpu_text(meta: dict) -> str:
    """`` (CPU 310.2 s/epoch, 1 thread)`` from a zoo record that has them: wall seconds count
    whatever else ran on the machine, the process's CPU seconds do not."""
    cpu, threads = meta.get("cpu_seconds_per_epoch"), meta.get("threads")
    if not isinstance(cpu, (int, float)):
        return ""
    return f" (CPU {cpu:.2f} s/epoch" + (f", {threads} thread(s))" if threads else ")")


def jobs_seconds(worker_plan: Plan, jobs: int) -> dict:
    """Wall seconds with ``jobs`` workers, from a plan priced on a worker's threads:
    ``build`` (``robattr build --jobs N`` from the zoo as it is), ``train`` and
    ``then_build`` (``robattr train --jobs N``, then the build's notebooks, every model
    cached)."""
    train, then_build = worker_plan.train_first_seconds(jobs)
    return {"jobs": jobs, "threads_per_worker": worker_threads(jobs),
            "build": worker_plan.wall_seconds(jobs), "train": train, "then_build": then_build}


def format_table(p: Plan, models: bool = False, jobs: int = 1,
                 worker_plan: Plan | None = None) -> str:
    """The plan as a text table and a total; ``models``: one line per zoo model too;
    ``jobs`` > 1: the wall time with that many workers too, from ``worker_plan`` (the plan
    priced on a worker's threads, :func:`worker_threads`; default ``p``)."""
    rows = [("notebook", "data", "models", "training", "work", "total", "reference")]
    for nb in p.notebooks:
        data = ", ".join(n if ok else f"{n} MISSING" for n, ok in nb.data.items()) or "-"
        n_t = sum(m.status == "train" for m in nb.models)
        n_s = sum(m.status == "shared" for m in nb.models)
        mod = "-" if not nb.models else f"{len(nb.models)}: {n_t} to train" + (
            f", {n_s} shared" if n_s else "")
        rows.append((nb.key, data, mod, _hms(nb.train_seconds) if nb.train_seconds else "-",
                     _hms(nb.work_seconds + nb.fixed_seconds), _hms(nb.seconds), nb.reference))
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"robattr plan: profile {p.profile}, {len(p.notebooks)} notebook(s); estimated on "
             + "; ".join(p.calibrations)]
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i < 3 else c.rjust(w) if i < 6 else c
                               for i, (c, w) in enumerate(zip(r, width))).rstrip())
        if models and j:
            for m in p.notebooks[j - 1].models:
                if m.status == "cached":
                    rec = (f"{m.recorded_seconds_per_epoch:.2f} s/epoch recorded on "
                           f"{m.recorded_device}{m.recorded_cpu}"
                           if m.recorded_seconds_per_epoch is not None else "no timing recorded")
                    if m.recorded_test_acc is not None:
                        c = m.config
                        rec += "; " + judged(c["dataset"], c["arch"], c["method"],
                                             m.recorded_test_acc, c.get("loss"))
                    lines.append(f"      cached  {m.label} ({rec})")
                elif m.status == "shared":
                    lines.append(f"      shared  {m.label} (trained by an earlier notebook)")
                else:
                    part = (f" (partly trained: {m.epochs_done} of {m.config['epochs']} "
                            "epochs done)" if m.epochs_done else "")
                    lines.append(f"      train   {m.label}: {m.steps} steps x "
                                 f"{m.step_seconds:.3g} s = {_hms(m.seconds)}{part}")
    d = p.to_dict()
    train = sum(nb.train_seconds for nb in p.notebooks)
    missing = ""
    if d["data_missing"]:
        from robattr.data import data_root

        missing = (f"; data missing: {', '.join(d['data_missing'])} (looked under {data_root()}; "
                   "ROBATTR_DATA sets it)")
    lines.append(f"total: {_hms(p.seconds)} (training {_hms(train)}, {d['models_to_train']} "
                 f"model(s) to train){missing}")
    if jobs > 1:
        j = jobs_seconds(worker_plan or p, jobs)
        each = f"{j['threads_per_worker']} thread(s) each"
        lines.append(f"robattr build --jobs {jobs} (notebooks {jobs} at a time, {each}): about "
                     f"{_hms(j['build'])} of wall time")
        if any(m.status == "train" for nb in p.notebooks for m in nb.models):
            lines.append(f"robattr train --jobs {jobs} (models {jobs} at a time, {each}), then "
                         f"robattr build --jobs {jobs}: about {_hms(j['train'] + j['then_build'])}"
                         f" of wall time (training {_hms(j['train'])}, then the notebooks "
                         f"{_hms(j['then_build'])})")
    return "\n".join(lines)

