"""The book build: the notebooks of a profile executed into ``book/``, each stamped.

:func:`build` executes each notebook into ``book/<key>.ipynb``, skipping one whose
*stamp* (source bytes, resolved parameters, precision, robattr version and source hash;
:mod:`robattr.book.stamps`) matches the last successful run, keeps going past failures,
and then runs ``jupyter-book build`` (:mod:`robattr.book.html`). Before a notebook is
re-executed its old output and stamp are removed, so a changed parameter can never leave
a stale page; page and stamp are written under the stamps' lock, so they always come
from the same run. :func:`run_one` executes one notebook (always) the same way.
"""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robattr.report import results
from robattr.book.execution import NotebookFailure, execute, results_path
from robattr.book.executors import (JobResult, handed_references, make_job, run_job, run_jobs,
                                    write_result)
from robattr.book.html import build_html
from robattr.book.notebooks import Notebook, discover, project_root
from robattr.book.params import ParameterError
from robattr.book.profiles import (check_profile_keys, effective_precision,
                                   effective_recipe, effective_train_size, load_profile,
                                   profile_env, profile_label, resolve)
from robattr.book import reference
from robattr.book.stamps import read_stamps, stamp, stamps_lock, write_stamps
from robattr.report.verdicts import PROFILE_ENV

__all__ = ["BuildReport", "build", "run_one"]


@dataclass
class BuildReport:
    """What a build did: notebooks executed, skipped (stamp unchanged) and failed, and
    the HTML book's ``index.html`` when it was built."""

    executed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[NotebookFailure] = field(default_factory=list)
    html: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


def _log_partly_trained(log, what: str, wanted: set[str] | None = None) -> None:
    """One line per zoo model whose training stopped before its last epoch and that
    ``wanted`` (zoo keys; None: every model) holds; the others, left by configurations these
    notebooks no longer ask for, are counted on one line, since nothing resumes them."""
    from robattr import zoo

    left = 0
    for m in zoo.partly_trained():
        if wanted is not None and m["key"] not in wanted:
            left += 1
            continue
        cfg = m["config"] or {}
        name = " ".join(str(cfg.get(k, "?")) for k in ("dataset", "arch", "method"))
        log(f"partly trained: {name} ({m['key'][:12]}), {m['epochs_done']} of "
            f"{m['epochs'] or '?'} epochs: {what}")
    if left:
        log(f"{left} partly trained checkpoint(s) in the zoo belong to no model these "
            f"notebooks ask for (left by a changed configuration): not resumed")


def _wanted_keys(todo: dict, prof: dict) -> set[str] | None:
    """The zoo keys of every model the notebooks in ``todo`` ask for (None when a
    declaration cannot say)."""
    from robattr.book.plan import _zoo_key, declared_models

    try:
        return {_zoo_key(cfg) for nb, params in todo.values()
                for cfg in declared_models(nb.key, params, effective_train_size(prof, nb.key),
                                           effective_recipe(prof))}
    except ParameterError:
        return None


def build(root: str | os.PathLike | None = None, *, profile: str = "quick",
          only: str | None = None, overrides: dict[str, Any] | None = None,
          force: bool = False, html: bool = True, progress: bool = True,
          executor: str = "local", jobs: int = 1, address: str | None = None,
          keep_reference: str | None = None, log=print) -> BuildReport:
    """Execute the notebooks of a profile into ``book/`` and build the HTML book.

    ``only`` is a glob matched against notebook keys (``wang2020/*``) or paths.
    ``overrides`` applies to every selected notebook (an unknown name is an error).
    A notebook whose stamp is unchanged is skipped unless ``force``. ``executor``,
    ``jobs`` and ``address`` choose where executions run (:mod:`robattr.book.executors`).
    ``keep_reference`` (a name, usually the profile's) keeps the results of every notebook
    that ran or was up to date as a reference run (:mod:`robattr.book.reference`); every
    page shows the kept references of other names beside its own numbers.
    """
    root = project_root(root)
    book_dir = root / "book"
    prof = load_profile(profile)
    if keep_reference is not None:
        if overrides:
            raise ParameterError("a reference is a profile's own run: --keep-reference "
                                 "cannot be combined with -p overrides")
        if not keep_reference or "/" in keep_reference or keep_reference.startswith("."):
            raise ParameterError(f"--keep-reference: bad name {keep_reference!r}")
    notebooks = discover(root)
    check_profile_keys(prof, notebooks, profile)
    selected = [nb for nb in notebooks
                if only is None or fnmatch.fnmatch(nb.key, only)
                or fnmatch.fnmatch(f"notebooks/{nb.key}.ipynb", only)]
    if only is not None and not selected:
        raise ParameterError(f"--only {only!r} matches no notebook; known: "
                             + ", ".join(nb.key for nb in notebooks))
    # validate everything before doing any work
    plan = [(nb, resolve(nb, prof, overrides)) for nb in selected]

    _drop_orphans(book_dir, {nb.key for nb in notebooks}, log)
    report = BuildReport()
    todo = {}
    with stamps_lock(book_dir):
        stamps = read_stamps(book_dir)
        for nb, params in plan:
            if not force and nb.output(book_dir).exists() \
                    and stamps.get(nb.key, {}).get("stamp") \
                    == stamp(nb, params, effective_precision(prof),
                             effective_train_size(prof, nb.key), effective_recipe(prof)):
                report.skipped.append(nb.key)
                continue
            todo[nb.key] = (nb, params)
            _clear_page(nb, book_dir, stamps)
        write_stamps(book_dir, stamps)
    if todo:
        where = executor if executor == "ray" or jobs <= 1 else f"{jobs} local processes"
        log(f"executing {len(todo)} notebook(s) ({profile} profile, {where})")
        wanted = _wanted_keys(todo, prof)
        _log_partly_trained(log, "goes on from its checkpoint", wanted)
    job_list = [make_job(nb, params, prof,
                         references=_shown_references(root, nb, profile, prof, keep_reference))
                for nb, params in todo.values()]
    for i, res in enumerate(run_jobs(job_list, executor=executor, jobs_at_once=jobs,
                                     address=address, progress=progress), 1):
        nb, params = todo[res.key]
        failure = _into_book(nb, params, res, book_dir, profile)
        if failure is None:
            report.executed.append(nb.key)
            if keep_reference:
                _keep(root, keep_reference, nb, params, profile, res.seconds)
            log(f"[{i}/{len(todo)}] {nb.key}: done in {res.seconds:.1f} s")
        else:
            report.failed.append(failure)
            log(f"[{i}/{len(todo)}] FAILED: {failure}")
    if report.failed:
        _log_partly_trained(log, "the next build goes on from its checkpoint", wanted)
    if keep_reference:
        stamps = read_stamps(book_dir)
        for nb, params in plan:
            if nb.key in report.skipped:
                _keep(root, keep_reference, nb, params, profile,
                      stamps.get(nb.key, {}).get("seconds"))
        log(f"kept reference {keep_reference!r}: "
            f"{len(report.executed) + len(report.skipped)} notebook(s) in "
            f"{root / reference.FOLDER / keep_reference}")
    if not report.executed and not report.failed:
        log(f"nothing changed: no notebook executed ({len(report.skipped)} up to date)")
    else:
        log(f"executed {len(report.executed)}, skipped {len(report.skipped)} (unchanged), "
            f"failed {len(report.failed)}")
    if html:
        report.html = build_html(root, log=log)
    return report


def _shown_references(root: Path, nb: Notebook, profile: str, prof: dict,
                      keep_reference: str | None = None) -> dict[str, dict]:
    """The kept references a run of ``nb`` under ``profile`` shows: all but the profile's
    own (and the one this run is about to keep), which would stand beside themselves."""
    hidden = {profile, prof["name"], keep_reference}
    return {k: v for k, v in reference.for_notebook(root, nb).items() if k not in hidden}


def run_one(nb: Notebook, params: dict[str, Any], *, root: Path, output: Path | None = None,
            profile: str = "quick", progress: bool = True) -> NotebookFailure | None:
    """Execute one notebook (always) into the book, or into ``output`` if given. Into the
    book it takes the same path as :func:`build`: one local job, then :func:`_into_book`.
    Either way the notebook sees its kept references (other profiles' runs)."""
    prof = load_profile(profile)
    refs = _shown_references(root, nb, profile, prof)
    if output is not None:
        os.environ[PROFILE_ENV] = profile_label(nb, params, prof)
        os.environ[results.NOTEBOOK_ENV] = nb.key
        os.environ.update(profile_env(prof, nb.key))
        with handed_references(refs):
            return execute(nb, params, Path(output), progress=progress)
    book_dir = root / "book"
    with stamps_lock(book_dir):
        stamps = read_stamps(book_dir)
        _clear_page(nb, book_dir, stamps)
        write_stamps(book_dir, stamps)
    res = run_job(make_job(nb, params, prof, references=refs), progress=progress)
    return _into_book(nb, params, res, book_dir, profile)


def _keep(root: Path, name: str, nb: Notebook, params: dict[str, Any], profile: str,
          seconds: float | None) -> None:
    """Keep ``nb``'s results in the book as reference ``name`` (``profile``: the name or
    path the build was given, so :func:`reference.is_stale` can resolve it again)."""
    prof = load_profile(profile)
    csv = results_path(nb.output(root / "book"))
    reference.keep(root, name, nb, csv if csv.exists() else None, profile=profile,
                   params=params, seconds=seconds, precision=effective_precision(prof),
                   train_size=effective_train_size(prof, nb.key),
                   recipe=effective_recipe(prof))


def _drop_orphans(book_dir: Path, keys: set[str], log) -> None:
    """Remove executed notebooks whose source notebook is gone."""
    if not book_dir.exists():
        return
    with stamps_lock(book_dir):
        stamps = read_stamps(book_dir)
        for key in sorted(set(stamps) - keys):
            (book_dir / f"{key}.ipynb").unlink(missing_ok=True)
            stamps.pop(key)
            log(f"removed {key}.ipynb: its source notebook is gone")
        write_stamps(book_dir, stamps)


def _clear_page(nb: Notebook, book_dir: Path, stamps: dict) -> None:
    """Remove ``nb``'s executed page, its results CSV and its stamp before it runs again,
    so no stale page survives a failure (the caller holds the lock and writes the stamps)."""
    stamps.pop(nb.key, None)
    nb.output(book_dir).unlink(missing_ok=True)
    results_path(nb.output(book_dir)).unlink(missing_ok=True)


def _into_book(nb: Notebook, params: dict[str, Any], res: JobResult, book_dir: Path,
               profile: str) -> NotebookFailure | None:
    """Put one :class:`~robattr.book.executors.JobResult` into the book: the executed
    notebook and its results CSV at ``book/<key>.ipynb``, and its stamp only on success
    (the caller has cleared the old page with :func:`_clear_page`). Page and stamp are
    written under one lock, so they always come from the same run."""
    out = nb.output(book_dir)
    with stamps_lock(book_dir):
        write_result(res, out)
        stamps = read_stamps(book_dir)
        if res.ok:
            prof = load_profile(profile)
            precision = effective_precision(prof)
            n_train = effective_train_size(prof, nb.key)
            recipe = effective_recipe(prof)
            stamps[nb.key] = {"stamp": stamp(nb, params, precision, n_train, recipe),
                              "params": params,
                              "profile": profile, "precision": precision,
                              "seconds": round(res.seconds, 1)}
            if n_train is not None:
                stamps[nb.key]["train_size"] = n_train
            if recipe:
                stamps[nb.key]["recipe"] = recipe
        else:
            stamps.pop(nb.key, None)
        write_stamps(book_dir, stamps)
    return None if res.ok else NotebookFailure(nb.key, out, res.cell, res.error)
