"""The build pipeline: notebooks → papermill → jupyter-book.

A *notebook* is a source file under ``notebooks/`` with one cell tagged
``parameters``. Its *key* is its path below ``notebooks/`` without the suffix
(``example/digits_saliency``). Each parameter is a top-level assignment in that
cell; its default is the literal on the right, and the comment declares its rule
and its help, ``name = 3  # int >= 1 | help`` (the rule syntax is in
:mod:`robattr.params`).

A *profile* (``robattr/profiles/<name>.yml``) maps notebook keys to parameter
values; ``quick`` (the default) keeps the notebooks' own defaults, ``paper``
sets the papers' scale, ``smoke`` is the tiny profile the tests use::

    defaults:            # applied to every notebook that has the parameter
      device: auto
    notebooks:
      example/digits_saliency:
        epochs: 2

:func:`build` executes each notebook into ``book/<key>.ipynb``, skipping one
whose *stamp* (source bytes, resolved parameters, robattr version and source
hash) matches the last successful run, keeps going past failures, and then
runs ``jupyter-book build``. Before a notebook is re-executed its old output
and stamp are removed, so a changed parameter can never leave a stale page.
"""
from __future__ import annotations

import fnmatch
import hashlib
import json
import logging
import os
import subprocess
import sys
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml

from robattr import __version__
from robattr.catalog import PRECISIONS
from robattr.params import Parameter, ParameterError, check_values, coerce, read_cell, read_yaml

__all__ = [
    "Parameter", "Notebook", "BuildReport", "NotebookFailure",
    "project_root", "discover", "find", "read_parameters", "load_profile",
    "parse_value", "resolve", "execute", "build", "build_html", "PROFILES",
]

PROFILES = ("quick", "paper", "smoke")
STAMPS = ".robattr-stamps.json"
_PROFILE_DIR = Path(__file__).parent / "profiles"


# --------------------------------------------------------------------------- discovery
@dataclass(frozen=True)
class Notebook:
    path: Path                      # absolute path of the source notebook
    key: str                        # path below notebooks/, no suffix, '/'-separated
    parameters: dict[str, Parameter] = field(hash=False)

    def output(self, book_dir: Path) -> Path:
        return book_dir / f"{self.key}.ipynb"


def project_root(start: str | os.PathLike | None = None) -> Path:
    """The folder holding ``_toc.yml`` and ``notebooks/``: ``$ROBATTR_ROOT``, else the
    first such folder at or above ``start`` (default: the working directory)."""
    env = os.environ.get("ROBATTR_ROOT")
    here = Path(env or start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "_toc.yml").is_file() and (folder / "notebooks").is_dir():
            return folder
    raise FileNotFoundError(
        f"no robattr book found at or above {here} (looked for _toc.yml and notebooks/); "
        "run from the repository or set ROBATTR_ROOT")


def read_parameters(path: str | os.PathLike) -> dict[str, Parameter]:
    """Parameters of a notebook: the declared lines of its ``parameters`` cell
    (``name = literal  # RULE | help``, :mod:`robattr.params`)."""
    nb = json.loads(Path(path).read_text())
    cells = [c for c in nb.get("cells", [])
             if "parameters" in c.get("metadata", {}).get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{path}: expected exactly one cell tagged 'parameters', found {len(cells)}")
    source = cells[0]["source"]
    source = "".join(source) if isinstance(source, list) else source
    return read_cell(source, where=str(path))


def discover(root: str | os.PathLike | None = None) -> list[Notebook]:
    """Every source notebook under ``<root>/notebooks``, sorted by key."""
    root = project_root(root)
    base = root / "notebooks"
    found = []
    for path in sorted(base.rglob("*.ipynb")):
        if ".ipynb_checkpoints" in path.parts:
            continue
        key = path.relative_to(base).with_suffix("").as_posix()
        found.append(Notebook(path, key, read_parameters(path)))
    return found


def find(name: str, notebooks: Iterable[Notebook]) -> Notebook:
    """A notebook by key, by path (absolute or relative to the root/cwd), or by file name."""
    notebooks = list(notebooks)
    wanted = Path(name)
    for nb in notebooks:
        if name in (nb.key, f"{nb.key}.ipynb", f"notebooks/{nb.key}.ipynb", nb.path.name, nb.path.stem):
            return nb
        if wanted.exists() and wanted.resolve() == nb.path:
            return nb
    keys = ", ".join(nb.key for nb in notebooks)
    raise ParameterError(f"no notebook {name!r}; known notebooks: {keys}")


# --------------------------------------------------------------------------- profiles and parameters
def load_profile(name: str) -> dict[str, Any]:
    """A profile by name (``quick``, ``paper``, ``smoke``) or by path to a YAML file."""
    path = Path(name) if name.endswith((".yml", ".yaml")) else _PROFILE_DIR / f"{name}.yml"
    if not path.is_file():
        raise ParameterError(f"unknown profile {name!r}; known profiles: {', '.join(PROFILES)} "
                             "(or a path to a .yml file)")
    data = read_yaml(path.read_text()) or {}
    unknown = set(data) - {"defaults", "notebooks", "description", "resources", "precision"}
    if unknown:
        raise ParameterError(f"profile {name!r}: unknown sections {sorted(unknown)}")
    if data.get("precision", "fp32") not in PRECISIONS:
        raise ParameterError(f"profile {name!r}: precision must be one of "
                             f"{', '.join(PRECISIONS)}, got {data['precision']!r}")
    for pattern, spec in (data.get("resources") or {}).items():
        bad = set(spec or {}) - {"cpus", "gpus"}
        if bad or any(not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0
                      for v in (spec or {}).values()):
            raise ParameterError(f"profile {name!r}: resources[{pattern!r}] must map 'cpus' "
                                 f"and 'gpus' to numbers >= 0, got {spec!r}")
    notebooks = dict(data.get("notebooks") or {})
    if path.parent == _PROFILE_DIR:
        for key, params in _chapter_entries(name).items():
            if key in notebooks:
                raise ParameterError(f"profile {name!r}: notebook {key!r} is set both in "
                                     f"{path.name} and in chapters/")
            notebooks[key] = params
    return {"name": path.stem, "defaults": data.get("defaults") or {}, "notebooks": notebooks,
            "resources": data.get("resources") or {}, "precision": data.get("precision")}


def _chapter_entries(profile: str) -> dict[str, dict]:
    """A chapter keeps its notebooks' settings for every profile in one file,
    ``profiles/chapters/<chapter>.yml``: ``{profile: {notebook key: {param: value}}}``."""
    entries: dict[str, dict] = {}
    for path in sorted((_PROFILE_DIR / "chapters").glob("*.yml")):
        data = read_yaml(path.read_text()) or {}
        unknown = set(data) - set(PROFILES)
        if unknown:
            raise ParameterError(f"profiles/chapters/{path.name}: unknown profiles "
                                 f"{sorted(unknown)}; known: {', '.join(PROFILES)}")
        for key, params in (data.get(profile) or {}).items():
            if not key.startswith(f"{path.stem}/"):
                raise ParameterError(f"profiles/chapters/{path.name}: notebook {key!r} is "
                                     f"not in chapter {path.stem!r}")
            entries[key] = params or {}
    return entries


def parse_value(text: str, param: Parameter, notebook: str | None = None) -> Any:
    """Read a command-line value as YAML and check its type against the parameter's rule
    (its range is checked by :func:`resolve`, which sees the other parameters)."""
    try:
        value = read_yaml(text) if isinstance(text, str) else text
    except yaml.YAMLError:
        value = text
    return coerce(param, value, notebook)


def resolve(nb: Notebook, profile: str | dict = "quick",
            overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The full parameter dict for one notebook: defaults ← profile ← overrides, checked
    against the notebook's declared rules.

    Unknown names (in the profile's entry for this notebook or in ``overrides``) and
    values that break their rule raise :class:`~robattr.params.ParameterError`, naming
    the notebook and the parameter, before any work.
    """
    prof = load_profile(profile) if isinstance(profile, str) else profile
    valid = ", ".join(nb.parameters)
    values = {name: p.default for name, p in nb.parameters.items()}
    for name, value in prof["defaults"].items():
        if name in nb.parameters:
            values[name] = value
    layers = [("profile", prof["notebooks"].get(nb.key) or {}), ("command line", overrides or {})]
    for where, layer in layers:
        for name, value in layer.items():
            if name not in nb.parameters:
                raise ParameterError(f"{nb.key}: unknown parameter {name!r} ({where}); "
                                     f"valid parameters: {valid}")
            values[name] = value
    return check_values(nb.parameters, values, notebook=nb.key)


def _check_profile_keys(prof: dict, notebooks: list[Notebook], name: str) -> None:
    keys = {nb.key for nb in notebooks}
    missing = sorted(set(prof["notebooks"]) - keys)
    if missing:
        raise ParameterError(f"profile {name!r} names notebooks that do not exist: {missing}")


# --------------------------------------------------------------------------- execution
@dataclass
class NotebookFailure:
    key: str
    output: Path
    cell: int | None
    error: str

    def __str__(self) -> str:
        where = f"cell {self.cell} of the source" if self.cell is not None else "before any cell"
        return f"{self.key}: {where} failed: {self.error} (see {self.output})"


@dataclass
class BuildReport:
    executed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failed: list[NotebookFailure] = field(default_factory=list)
    html: Path | None = None

    @property
    def ok(self) -> bool:
        return not self.failed


def _package_hash() -> str:
    h = hashlib.sha256(__version__.encode())
    for path in sorted(Path(__file__).parent.rglob("*")):
        if path.suffix in {".py", ".yml"}:
            h.update(path.relative_to(Path(__file__).parent).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()


def stamp(nb: Notebook, params: dict[str, Any], precision: str = "fp32") -> str:
    """What an executed notebook depends on: its source, parameters, the precision on
    CUDA (:func:`effective_precision`) and the package."""
    h = hashlib.sha256(nb.path.read_bytes())
    h.update(json.dumps(params, sort_keys=True, default=str).encode())
    h.update(precision.encode())
    h.update(_package_hash().encode())
    return h.hexdigest()


def _read_stamps(book_dir: Path) -> dict[str, Any]:
    try:
        return json.loads((book_dir / STAMPS).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _write_stamps(book_dir: Path, stamps: dict[str, Any]) -> None:
    book_dir.mkdir(parents=True, exist_ok=True)
    tmp = book_dir / f"{STAMPS}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps(stamps, indent=1, sort_keys=True))
    os.replace(tmp, book_dir / STAMPS)


@contextmanager
def _stamps_lock(book_dir: Path):
    """An exclusive lock on the book's stamps, so that two builds (or a run and a build)
    at once merge their changes instead of each writing back what it read at its start."""
    import fcntl

    book_dir.mkdir(parents=True, exist_ok=True)
    with open(book_dir / f"{STAMPS}.lock", "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _parameters_cell_index(path: Path) -> int:
    cells = json.loads(path.read_text())["cells"]
    return next(i for i, c in enumerate(cells)
                if "parameters" in c.get("metadata", {}).get("tags", []))


def execute(nb: Notebook, params: dict[str, Any], output: Path, *,
            progress: bool = True) -> NotebookFailure | None:
    """papermill ``nb`` with ``params`` into ``output`` (run in the output's folder).
    Returns None on success, else what failed and where."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from robattr import results

    # papermill re-parses the parameters cell and warns ("Unable to parse line",
    # "Passed unknown parameter") on comments it cannot read; resolve() has already
    # checked every name and value, so its warnings are noise here
    for name in ("papermill", "papermill.translators"):
        logging.getLogger(name).setLevel(logging.ERROR)
    output.parent.mkdir(parents=True, exist_ok=True)
    results_csv = results_path(output)
    results_csv.unlink(missing_ok=True)
    saved = os.environ.get(results.ENV)
    os.environ[results.ENV] = str(results_csv)    # inherited by the kernel process
    try:
        papermill.execute_notebook(str(nb.path), str(output), parameters=params,
                                   progress_bar=progress, cwd=str(output.parent),
                                   kernel_name="python3")
    except PapermillExecutionError as err:
        # papermill inserts one cell after the parameters cell: map back to the source
        cell = err.cell_index - (err.cell_index > _parameters_cell_index(nb.path))
        first = next((line for line in err.source.splitlines() if line.strip()), "")
        return NotebookFailure(nb.key, output, cell + 1,
                               f"{err.ename}: {err.evalue} [in `{first.strip()[:60]}`]")
    except Exception as err:  # kernel died, bad notebook file, ...
        return NotebookFailure(nb.key, output, None, f"{type(err).__name__}: {err}")
    finally:
        if saved is None:
            os.environ.pop(results.ENV, None)
        else:
            os.environ[results.ENV] = saved
    _tag_injected_cell(nb, params, output)
    return None


def results_path(output: Path) -> Path:
    """Where the scalar results of an executed notebook go: ``<name>.results.csv``."""
    return Path(output).with_suffix(".results.csv")


def _tag_injected_cell(nb: Notebook, params: dict[str, Any], output: Path) -> None:
    """Papermill adds a cell with the values it injected. When they are the notebook's
    own defaults the cell repeats the parameters cell, so the book drops it; otherwise
    it stays visible, since it says which values produced the page."""
    import nbformat

    executed = nbformat.read(output, as_version=4)
    defaults = {name: p.default for name, p in nb.parameters.items()}
    for cell in executed.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and params == defaults:
            cell["metadata"]["tags"] = [*tags, "remove-cell"]
    nbformat.write(executed, output)


def build(root: str | os.PathLike | None = None, *, profile: str = "quick",
          only: str | None = None, overrides: dict[str, Any] | None = None,
          force: bool = False, html: bool = True, progress: bool = True,
          executor: str = "local", jobs: int = 1, address: str | None = None,
          log=print) -> BuildReport:
    """Execute the notebooks of a profile into ``book/`` and build the HTML book.

    ``only`` is a glob matched against notebook keys (``wang2020/*``) or paths.
    ``overrides`` applies to every selected notebook (an unknown name is an error).
    A notebook whose stamp is unchanged is skipped unless ``force``. ``executor``,
    ``jobs`` and ``address`` choose where executions run (:mod:`robattr.executors`).
    """
    from robattr.executors import run_jobs

    root = project_root(root)
    book_dir = root / "book"
    prof = load_profile(profile)
    notebooks = discover(root)
    _check_profile_keys(prof, notebooks, profile)
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
    with _stamps_lock(book_dir):
        stamps = _read_stamps(book_dir)
        for nb, params in plan:
            if not force and nb.output(book_dir).exists() \
                    and stamps.get(nb.key, {}).get("stamp") \
                    == stamp(nb, params, effective_precision(prof)):
                report.skipped.append(nb.key)
                continue
            todo[nb.key] = (nb, params)
            _clear_page(nb, book_dir, stamps)
        _write_stamps(book_dir, stamps)
    if todo:
        where = executor if executor == "ray" or jobs <= 1 else f"{jobs} local processes"
        log(f"executing {len(todo)} notebook(s) ({profile} profile, {where})")
    job_list = [make_job(nb, params, prof) for nb, params in todo.values()]
    for i, res in enumerate(run_jobs(job_list, executor=executor, jobs_at_once=jobs,
                                     address=address, progress=progress), 1):
        nb, params = todo[res.key]
        failure = _into_book(nb, params, res, book_dir, profile)
        if failure is None:
            report.executed.append(nb.key)
            log(f"[{i}/{len(todo)}] {nb.key}: done in {res.seconds:.1f} s")
        else:
            report.failed.append(failure)
            log(f"[{i}/{len(todo)}] FAILED: {failure}")
    if not report.executed and not report.failed:
        log(f"nothing changed: no notebook executed ({len(report.skipped)} up to date)")
    else:
        log(f"executed {len(report.executed)}, skipped {len(report.skipped)} (unchanged), "
            f"failed {len(report.failed)}")
    if html:
        report.html = build_html(root, log=log)
    return report


def make_job(nb: Notebook, params: dict[str, Any], prof: dict, name: str | None = None,
             output_name: str | None = None):
    """The :class:`~robattr.executors.Job` that executes ``nb`` with ``params``, with the
    resources the profile gives it."""
    from robattr.executors import Job, shared_env

    from robattr.verdicts import PROFILE_ENV

    res = resources(prof, nb.key)
    env = {**shared_env(), PROFILE_ENV: profile_label(nb, params, prof), **precision_env(prof)}
    return Job(name=name or nb.key, key=nb.key, source=nb.path.read_bytes(), params=params,
               output_name=output_name or nb.path.name, cpus=res["cpus"], gpus=res["gpus"],
               env=env)


def precision_env(prof: dict) -> dict[str, str]:
    """``{ROBATTR_PRECISION: mode}`` when the profile sets ``precision:`` (``fp32`` or
    ``tf32``, see :mod:`robattr.precision`), else nothing: the kernel inherits the
    caller's environment, and robattr's default is full fp32."""
    return {"ROBATTR_PRECISION": prof["precision"]} if prof.get("precision") else {}


def effective_precision(prof: dict) -> str:
    """The precision a notebook runs with: the profile's ``precision:``, else
    ``$ROBATTR_PRECISION``, else ``fp32``."""
    return prof.get("precision") or os.environ.get("ROBATTR_PRECISION", "").strip().lower() \
        or "fp32"


def profile_label(nb: Notebook, params: dict[str, Any], prof: dict) -> str:
    """How a run's claims name their profile: ``quick``, or ``quick, eps changed`` when
    parameters differ from the profile's values."""
    base = resolve(nb, prof)
    changed = [k for k in params if params[k] != base.get(k)]
    name = prof.get("name", "custom")
    return f"{name}, {', '.join(changed)} changed" if changed else name


def resources(prof: dict, key: str) -> dict[str, float]:
    """CPUs and GPUs one execution of notebook ``key`` asks for: the profile's
    ``resources`` section, ``{default: {cpus, gpus}, <glob>: {...}}``, last match wins."""
    out = {"cpus": 1.0, "gpus": 0.0}
    for pattern, spec in (prof.get("resources") or {}).items():
        if pattern == "default" or fnmatch.fnmatch(key, pattern):
            out.update({k: float(v) for k, v in (spec or {}).items()})
    return out


def _write_result(res, out: Path) -> None:
    """Put an executed notebook (and its results CSV) where the book expects it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    if res.notebook is not None:
        out.write_bytes(res.notebook)
    if res.results_csv is not None:
        results_path(out).write_bytes(res.results_csv)


def _drop_orphans(book_dir: Path, keys: set[str], log) -> None:
    """Remove executed notebooks whose source notebook is gone."""
    if not book_dir.exists():
        return
    with _stamps_lock(book_dir):
        stamps = _read_stamps(book_dir)
        for key in sorted(set(stamps) - keys):
            (book_dir / f"{key}.ipynb").unlink(missing_ok=True)
            stamps.pop(key)
            log(f"removed {key}.ipynb: its source notebook is gone")
        _write_stamps(book_dir, stamps)


def _clear_page(nb: Notebook, book_dir: Path, stamps: dict) -> None:
    """Remove ``nb``'s executed page, its results CSV and its stamp before it runs again,
    so no stale page survives a failure (the caller holds the lock and writes the stamps)."""
    stamps.pop(nb.key, None)
    nb.output(book_dir).unlink(missing_ok=True)
    results_path(nb.output(book_dir)).unlink(missing_ok=True)


def _into_book(nb: Notebook, params: dict[str, Any], res, book_dir: Path,
               profile: str) -> NotebookFailure | None:
    """Put one :class:`~robattr.executors.JobResult` into the book: the executed notebook
    and its results CSV at ``book/<key>.ipynb``, and its stamp only on success (the
    caller has cleared the old page with :func:`_clear_page`). Page and stamp are written
    under one lock, so they always come from the same run."""
    out = nb.output(book_dir)
    with _stamps_lock(book_dir):
        _write_result(res, out)
        stamps = _read_stamps(book_dir)
        if res.ok:
            precision = effective_precision(load_profile(profile))
            stamps[nb.key] = {"stamp": stamp(nb, params, precision), "params": params,
                              "profile": profile, "precision": precision,
                              "seconds": round(res.seconds, 1)}
        else:
            stamps.pop(nb.key, None)
        _write_stamps(book_dir, stamps)
    return None if res.ok else NotebookFailure(nb.key, out, res.cell, res.error)


def run_one(nb: Notebook, params: dict[str, Any], *, root: Path, output: Path | None = None,
            profile: str = "quick", progress: bool = True) -> NotebookFailure | None:
    """Execute one notebook (always) into the book, or into ``output`` if given. Into the
    book it takes the same path as :func:`build`: one local job, then :func:`_into_book`."""
    from robattr.executors import run_job

    if output is not None:
        from robattr.verdicts import PROFILE_ENV

        prof = load_profile(profile)
        os.environ[PROFILE_ENV] = profile_label(nb, params, prof)
        os.environ.update(precision_env(prof))
        return execute(nb, params, Path(output), progress=progress)
    book_dir = root / "book"
    with _stamps_lock(book_dir):
        stamps = _read_stamps(book_dir)
        _clear_page(nb, book_dir, stamps)
        _write_stamps(book_dir, stamps)
    res = run_job(make_job(nb, params, load_profile(profile)), progress=progress)
    return _into_book(nb, params, res, book_dir, profile)


def build_html(root: str | os.PathLike | None = None, *, log=print) -> Path:
    """Write the Verdicts page from the recorded claims (when the table of contents lists
    it), run ``jupyter-book build`` on the project; return the path of ``index.html``."""
    from robattr import verdicts_page

    root = project_root(root)
    if (root / "_toc.yml").read_text().find(f"book/{Path(verdicts_page.PAGE).stem}") >= 0:
        verdicts_page.write(root, log=log)
    exe = Path(sys.executable).with_name("jupyter-book")
    cmd = [str(exe) if exe.exists() else "jupyter-book", "build", str(root),
           "--path-output", str(root / "book")]
    log("building the HTML book (jupyter-book)")
    proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-30:])
        raise RuntimeError(f"jupyter-book build failed:\n{tail}")
    warnings = [line for line in proc.stderr.splitlines() if "WARNING" in line]
    for line in warnings[:20]:
        log(line)
    index = root / "book" / "_build" / "html" / "index.html"
    log(f"book: {index}")
    return index
