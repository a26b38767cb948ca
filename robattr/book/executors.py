"""Where notebook executions run: here, in local worker processes, or on a Ray cluster.

One execution is a :class:`Job` (:func:`make_job` makes one for a notebook under a
profile): the source notebook's bytes, its parameters, the resources it needs and the
environment it must see (``ROBATTR_CACHE``, ``ROBATTR_DATA``).
:func:`run_job` executes it anywhere (a worker process, a Ray node) and returns a
:class:`JobResult` holding the executed notebook and its results CSV as bytes, so nothing
but the zoo cache has to be shared between machines. Executors yield results as jobs
finish; a failing job is one result among the others, never an exception that stops them.

    local (default)   ``jobs=1``: in this process, one after the other;
                      ``jobs=N``: N worker processes on this machine, each kernel capped
                      at its share of the cores (``OMP_NUM_THREADS``, unless already set)
    ray               each job a Ray task declaring ``num_cpus``/``num_gpus``; ``address``
                      joins an existing cluster (``"auto"``, ``"ray://head:10001"``),
                      None starts a private local one. Needs ``pip install .[ray]``.

Models are shared through the zoo: give every node the same ``ROBATTR_CACHE`` folder (a
shared file system) and the zoo's lock files make one task train each model while the
others wait and load it.
"""
from __future__ import annotations

import os
import platform
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from robattr import context
from robattr.report import results
from robattr.book.execution import environ, execute, results_path
from robattr.book.notebooks import Notebook, read_parameters
from robattr.book.profiles import profile_env, profile_label, resources
from robattr.book.reference import install
from robattr.report.verdicts import PROFILE_ENV

__all__ = ["Job", "JobResult", "handed_references", "make_job", "run_job", "run_jobs",
           "worker_threads", "write_result", "EXECUTORS", "SHARED_ENV"]

EXECUTORS = ("local", "ray")
#: Environment variables a job carries to the process that runs it.
SHARED_ENV = (context.CACHE_ENV, context.DATA_ENV, context.ZOO_LOCK_STALE_ENV,
              context.PRECISION_ENV, context.TRAIN_SIZE_ENV, context.RECIPE_ENV,
              context.ZOO_REQUESTS_ENV)


@dataclass(frozen=True)
class Job:
    """One notebook execution. ``name`` identifies it in reports (a key or a sweep run)."""

    name: str
    key: str
    source: bytes
    params: dict[str, Any]
    output_name: str
    cpus: float = 1.0
    gpus: float = 0.0
    env: dict[str, str] = field(default_factory=dict)
    #: reference runs shown beside this one (:func:`robattr.book.reference.for_notebook`)
    references: dict[str, dict] = field(default_factory=dict)


@dataclass
class JobResult:
    name: str
    key: str
    notebook: bytes | None          # the executed notebook (also when a cell failed)
    results_csv: bytes | None       # what the notebook recorded with robattr.report.results
    cell: int | None                # failing cell (1-based, source numbering) or None
    error: str | None               # None on success
    seconds: float
    host: str

    @property
    def ok(self) -> bool:
        return self.error is None


def shared_env() -> dict[str, str]:
    """The :data:`SHARED_ENV` variables set in this process."""
    return context.exported(SHARED_ENV)


def make_job(nb: Notebook, params: dict[str, Any], prof: dict, name: str | None = None,
             output_name: str | None = None, references: dict | None = None) -> Job:
    """The :class:`Job` that executes ``nb`` with ``params``: the resources the profile
    gives it, the environment it needs (:data:`SHARED_ENV`, the profile's label for its
    claims, the profile's precision and training-set size) and the reference runs to show
    beside its numbers (:func:`robattr.book.reference.for_notebook`)."""
    res = resources(prof, nb.key)
    env = {**shared_env(), PROFILE_ENV: profile_label(nb, params, prof),
           results.NOTEBOOK_ENV: nb.key, **profile_env(prof, nb.key)}
    return Job(name=name or nb.key, key=nb.key, source=nb.path.read_bytes(), params=params,
               output_name=output_name or nb.path.name, cpus=res["cpus"], gpus=res["gpus"],
               env=env, references=references or {})


@contextmanager
def handed_references(refs: dict[str, dict]) -> Iterator[None]:
    """Hand a notebook's references (:func:`robattr.book.reference.for_notebook`) to the
    kernels started inside the block: install them in a temporary folder named by
    ``$ROBATTR_REFERENCE_DIR`` (none: the variable is unset)."""
    from robattr.report import references

    os.environ.pop(references.ENV, None)
    with tempfile.TemporaryDirectory(prefix="robattr-refs-") as tmp:
        if refs:
            install(refs, Path(tmp) / "reference")
            os.environ[references.ENV] = str(Path(tmp) / "reference")
        try:
            yield
        finally:
            os.environ.pop(references.ENV, None)


def run_job(job: Job, progress: bool = False) -> JobResult:
    """Execute ``job`` in a fresh temporary folder and return its executed notebook and
    results as bytes. Runs in whatever process calls it; the job's environment holds for
    the run only (a later job, or a later build in the same process, does not inherit it)."""
    t0 = time.perf_counter()
    with environ(job.env), tempfile.TemporaryDirectory(prefix="robattr-job-") as tmp:
        src = Path(tmp) / "source" / f"{Path(job.key).name}.ipynb"
        src.parent.mkdir()
        src.write_bytes(job.source)
        nb = Notebook(src, job.key, read_parameters(src))
        out = Path(tmp) / job.output_name
        with handed_references(job.references):
            failure = execute(nb, job.params, out, progress=progress)
        res = results_path(out)
        notebook = out.read_bytes() if out.exists() else None
        results_csv = res.read_bytes() if res.exists() else None
    return JobResult(job.name, job.key, notebook, results_csv,
                     failure.cell if failure else None, failure.error if failure else None,
                     time.perf_counter() - t0, platform.node())


def write_result(res: JobResult, out: Path) -> None:
    """Put an executed notebook (and its results CSV) at ``out`` (and beside it)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if res.notebook is not None:
        out.write_bytes(res.notebook)
    if res.results_csv is not None:
        results_path(out).write_bytes(res.results_csv)


def run_jobs(jobs: Iterable[Job], *, executor: str = "local", jobs_at_once: int = 1,
             address: str | None = None, progress: bool = False) -> Iterator[JobResult]:
    """Run ``jobs``, yielding each :class:`JobResult` as it finishes.

    ``jobs_at_once`` caps the jobs in flight (local: worker processes; Ray: tasks
    submitted at once, 0 = all). ``progress`` shows papermill's cell bar (local, one at
    a time only).
    """
    jobs = list(jobs)
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    if isinstance(jobs_at_once, bool) or not isinstance(jobs_at_once, int) or jobs_at_once < 0:
        raise ValueError(f"jobs must be an integer >= 0, got {jobs_at_once!r}")
    if executor == "ray":
        yield from _run_ray(jobs, address, jobs_at_once)
    elif address is not None:
        raise ValueError("--address needs --executor ray")
    elif jobs_at_once <= 1:
        for job in jobs:
            yield run_job(job, progress)
    else:
        yield from _run_processes(jobs, jobs_at_once)


#: Environment variables that cap the threads of torch / numpy in a kernel.
THREAD_VARS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS")


def worker_threads(workers: int, cpus: int | None = None) -> int:
    """Threads per kernel when ``workers`` notebooks run at once on ``cpus`` cores (default:
    this machine's): the cores shared out, at least one. More threads than cores makes
    torch's threads wait for each other, and small passes then run many times slower."""
    cpus = (os.cpu_count() or 1) if cpus is None else cpus
    return max(1, int(cpus) // max(1, int(workers)))


def _limit_threads(threads: int) -> None:
    """Worker initialiser: cap the threads of this worker's kernels (inherited through the
    environment) unless the user set the variables already."""
    for var in THREAD_VARS:
        os.environ.setdefault(var, str(threads))


def _run_processes(jobs: list[Job], n: int) -> Iterator[JobResult]:
    import concurrent.futures as cf
    import multiprocessing as mp

    workers = min(n, len(jobs)) or 1
    with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"),
                                initializer=_limit_threads,
                                initargs=(worker_threads(workers),)) as pool:
        futures = {pool.submit(run_job, job): job for job in jobs}
        for fut in cf.as_completed(futures):
            yield _result_or_crash(fut, futures[fut])


def _result_or_crash(fut, job: Job) -> JobResult:
    """The job's result, or a failed result when the worker itself died."""
    try:
        return fut.result()
    except Exception as err:  # worker process killed, Ray task lost, ...
        return JobResult(job.name, job.key, None, None, None,
                         f"{type(err).__name__}: {err}", 0.0, "?")


def _import_ray():
    try:
        import ray
    except ImportError:
        raise RuntimeError("the ray executor needs Ray: pip install '.[ray]' "
                           "(or pip install ray)") from None
    return ray


def _run_ray(jobs: list[Job], address: str | None, at_once: int) -> Iterator[JobResult]:
    ray = _import_ray()
    started_here = not ray.is_initialized()
    if started_here:
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
    try:
        total = ray.cluster_resources()
        for job in jobs:
            for res, need in (("CPU", job.cpus), ("GPU", job.gpus)):
                if need > total.get(res, 0):
                    raise RuntimeError(
                        f"{job.name} needs {need:g} {res} but the Ray cluster has "
                        f"{total.get(res, 0):g} in all; lower the profile's 'resources' or "
                        "join a cluster that has them")
        task = ray.remote(run_job)
        pending = list(jobs)
        running: dict[Any, Job] = {}
        limit = at_once or len(jobs)
        while pending or running:
            while pending and len(running) < limit:
                job = pending.pop(0)
                ref = task.options(num_cpus=job.cpus, num_gpus=job.gpus,
                                   max_retries=0).remote(job)
                running[ref] = job
            done, _ = ray.wait(list(running), num_returns=1)
            for ref in done:
                job = running.pop(ref)
                yield _ray_result(ray, ref, job)
    finally:
        if started_here:
            ray.shutdown()


def _ray_result(ray, ref, job: Job) -> JobResult:
    try:
        return ray.get(ref)
    except Exception as err:  # the task's process died; run_job itself never raises
        return JobResult(job.name, job.key, None, None, None,
                         f"{type(err).__name__}: {err}", 0.0, "?")
