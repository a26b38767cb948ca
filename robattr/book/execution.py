"""One notebook through papermill: executed into a file, a failure mapped to its source cell.

:func:`execute` runs a source notebook with its parameters in the output's folder, with
``ROBATTR_RESULTS`` pointing at :func:`results_path` of the output so that what the
notebook records (:mod:`robattr.report.results`) lands beside it. Where the run happens (this
process, a worker, a Ray node) is :mod:`robattr.book.executors`' business.
"""
from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from robattr import context
from robattr.report import results
from robattr.book.notebooks import Notebook, parameters_cell_index

__all__ = ["NotebookFailure", "execute", "results_path", "environ", "CellProgress", "KERNEL_ARGS"]


@dataclass
class NotebookFailure:
    """A notebook that failed: its key, its executed output, the failing cell (1-based,
    numbered as in the source; None when it failed before any cell) and the error."""

    key: str
    output: Path
    cell: int | None
    error: str

    def __str__(self) -> str:
        where = f"cell {self.cell} of the source" if self.cell is not None else "before any cell"
        return f"{self.key}: {where} failed: {self.error} (see {self.output})"


def results_path(output: Path) -> Path:
    """Where the scalar results of an executed notebook go: ``<name>.results.csv``."""
    return Path(output).with_suffix(".results.csv")


#: Set for the kernel of every executed notebook: progress bars (tqdm, the zoo's training
#: bars) stay out of the pages, where they would be a log of the build rather than a result
#: (the build shows its own progress per notebook in the terminal). Interactive users, who
#: run a notebook themselves, keep their bars. A PYTHONWARNINGS of the caller is kept, with
#: this filter added.
QUIET_ENV = {"TQDM_DISABLE": "1",
             # tqdm.auto warns at import in a kernel without ipywidgets; the pages have no
             # bars to show, so the warning tells the reader nothing
             "PYTHONWARNINGS": "ignore:IProgress not found"}


#: Arguments of every kernel the build starts: its own log (not the notebook's output)
#: keeps to errors, so a build's terminal does not show the kernel's start-up warnings
#: ("Kernel is running over TCP without encryption").
KERNEL_ARGS = ["--IPKernelApp.log_level=ERROR"]


class CellProgress:
    """A terminal bar over a notebook's code cells, named by the section being executed
    (``[k/N] <heading>``): papermill calls :meth:`start` before each cell."""

    def __init__(self, key: str, n_code_cells: int):
        from tqdm import tqdm

        self.key, self.heading = key, ""
        self.bar = tqdm(total=n_code_cells, unit="cell", leave=False, dynamic_ncols=True,
                        desc=key, bar_format="{desc}: cell {n_fmt} of {total_fmt} "
                                             "[{elapsed}]{postfix}")

    def watch(self, folder: Path) -> Path:
        """A file for the kernel's training bars (``ROBATTR_PROGRESS``): its last bar is
        shown after the cell's heading, once a second, until :meth:`close`."""
        import tempfile
        import threading

        fd, name = tempfile.mkstemp(dir=folder, prefix=".progress-", suffix=".txt")
        os.close(fd)
        self.file, self.stop = Path(name), threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)
        self.thread.start()
        return self.file

    def _poll(self):
        while not self.stop.wait(1.0):
            try:
                with open(self.file, "rb") as f:
                    f.seek(max(0, self.file.stat().st_size - 400))
                    tail = f.read().decode("utf-8", "replace")
            except OSError:
                continue
            parts = [p.strip() for p in tail.replace("\n", "\r").split("\r") if p.strip()]
            self.bar.set_postfix_str(f"training {parts[-1]}" if parts else "", refresh=True)

    def start(self, cell=None, cell_index=None, **_):
        if cell is None:
            return
        if cell.cell_type == "markdown":
            heads = [line.lstrip("#").strip() for line in cell.source.splitlines()
                     if line.startswith("#")]
            self.heading = heads[-1] if heads else self.heading
            return
        if cell.cell_type == "code":
            if self.bar.n < self.bar.total:
                self.bar.update()
            head = self.heading[:50] + ("…" if len(self.heading) > 50 else "")
            self.bar.set_description_str(f"{self.key} [{head}]" if head else self.key)
            self.bar.set_postfix_str("")
            if getattr(self, "file", None) is not None:
                self.file.write_text("")      # a new cell: the last one's bar is done

    def close(self):
        if getattr(self, "stop", None) is not None:
            self.stop.set()
            self.thread.join()
            self.file.unlink(missing_ok=True)
        self.bar.close()


@contextlib.contextmanager
def environ(values: dict[str, str]):
    """``os.environ`` updated with ``values`` inside the block (kernels started there
    inherit them), and restored afterwards."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


#: how many times a notebook whose kernel died while starting, before any cell ran, is
#: started: such a death (a port taken by a kernel starting beside it, a slow machine) is
#: the machine's, not the notebook's, and nothing of the run is lost by starting again
KERNEL_START_ATTEMPTS = 3
_STARTUP_DEATH = "before replying to kernel_info"


def _died_starting(err: BaseException) -> bool:
    """Whether ``err`` is a kernel that died before it answered its first request."""
    return isinstance(err, RuntimeError) and _STARTUP_DEATH in str(err)


def execute(nb: Notebook, params: dict[str, Any], output: Path, *,
            progress: bool = True) -> NotebookFailure | None:
    """papermill ``nb`` with ``params`` into ``output`` (run in the output's folder).
    Returns None on success, else what failed and where. A kernel that dies while
    starting is started again, up to :data:`KERNEL_START_ATTEMPTS` times in all."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    # papermill re-parses the parameters cell and warns ("Unable to parse line",
    # "Passed unknown parameter") on comments it cannot read; resolve() has already
    # checked every name and value, so its warnings are noise here
    for name in ("papermill", "papermill.translators"):
        logging.getLogger(name).setLevel(logging.ERROR)
    output.parent.mkdir(parents=True, exist_ok=True)
    results_csv = results_path(output)
    results_csv.unlink(missing_ok=True)
    env = {results.ENV: str(results_csv), **QUIET_ENV}    # inherited by the kernel process
    if os.environ.get("PYTHONWARNINGS"):
        env["PYTHONWARNINGS"] = f"{os.environ['PYTHONWARNINGS']},{QUIET_ENV['PYTHONWARNINGS']}"
    cells = CellProgress(nb.key, _code_cells(nb.path) + 1) if progress else None  # + injected
    if progress:          # the kernel's zoo trainings write their bars where the cells' bar reads
        env[context.PROGRESS_ENV] = str(cells.watch(output.parent))
    hooks = {"on_cell_start": cells.start} if cells else {}
    try:
        for attempt in range(1, KERNEL_START_ATTEMPTS + 1):
            try:
                with environ(env):
                    papermill.execute_notebook(str(nb.path), str(output), parameters=params,
                                               progress_bar=False, cwd=str(output.parent),
                                               kernel_name="python3",
                                               extra_arguments=KERNEL_ARGS, **hooks)
                break
            except RuntimeError as err:
                if not _died_starting(err) or attempt == KERNEL_START_ATTEMPTS:
                    raise
                time.sleep(attempt)
    except PapermillExecutionError as err:
        # papermill inserts one cell after the parameters cell: map back to the source
        cell = err.cell_index - (err.cell_index > parameters_cell_index(nb.path))
        first = next((line for line in err.source.splitlines() if line.strip()), "")
        return NotebookFailure(nb.key, output, cell + 1,
                               f"{err.ename}: {err.evalue} [in `{first.strip()[:60]}`]")
    except Exception as err:  # kernel died, bad notebook file, ...
        return NotebookFailure(nb.key, output, None, f"{type(err).__name__}: {err}")
    finally:
        if cells is not None:
            cells.close()
    _tag_injected_cell(nb, params, output)
    _add_findings_cell(nb, output, results_csv)
    _hide_predicted_answers(output)
    _fold_machinery(output)
    return None


#: the tag of the "What this notebook finds" cell the build adds after a notebook's title
FINDINGS_TAG = "findings"


def findings_markdown(key: str, results_csv: Path) -> str | None:
    """The "What this notebook finds" box of an executed notebook: one row per statement
    and empirical claim it recorded (verdict with its mark, word and colour; a link to the
    line in the page), or None when it recorded none."""
    from robattr.book import lines as show
    from robattr.report.papers import TALLIED
    from robattr.report.reader import reader_text

    if not Path(results_csv).exists():
        return None
    df = results.read(results_csv)
    if "text" not in df or not (df["metric"] == "claim").any():
        return None
    df = df[df["metric"] == "claim"].fillna("")
    kind = df["kind"].replace("", "claim") if "kind" in df else "claim"
    df = df.assign(kind=kind)
    df = df[df["kind"].isin(TALLIED)]
    if df.empty:
        return None
    chapter = key.split("/")[0]
    rows = ["**What this notebook finds.** Each statement and claim of the paper it tests, "
            "with this run's verdict; the line below each claim in the page gives the rule, "
            "the numbers and the scale.", "", "| claim | verdict | |", "|---|---|---|"]
    for _, r in df.iterrows():
        rows.append(f"| {show.cell(reader_text(r['text'], chapter))} | "
                    f"{show.coloured(r['kind'], r['verdict'])} | "
                    f'<a href="#{r["anchor"]}">go</a> |')
    return "\n".join(rows)


def _add_findings_cell(nb: Notebook, output: Path, results_csv: Path) -> None:
    """Put the notebook's findings box after its title (the first Markdown cell)."""
    import nbformat

    text = findings_markdown(nb.key, results_csv)
    if text is None:
        return
    executed = nbformat.read(output, as_version=4)
    at = next((i + 1 for i, c in enumerate(executed.cells) if c.cell_type == "markdown"), 0)
    cell = nbformat.v4.new_markdown_cell(text)
    cell.metadata["tags"] = [FINDINGS_TAG]
    executed.cells.insert(at, cell)
    nbformat.write(executed, output)


#: the admonition that asks the reader to predict an outcome before reading it
PREDICT = "{admonition} Predict before you run"


def _hide_predicted_answers(output: Path) -> None:
    """The outputs of the code cell that answers a "Predict before you run" prompt start
    folded (``hide-output``: the page shows a button), so the answer is not read before
    the prediction is made; the code stays in view."""
    import nbformat

    executed = nbformat.read(output, as_version=4)
    changed = False
    for prompt, answer in zip(executed.cells, executed.cells[1:]):
        if prompt.cell_type == "markdown" and PREDICT in prompt.source \
                and answer.cell_type == "code":
            tags = answer.metadata.setdefault("tags", [])
            if "hide-output" not in tags:
                tags.append("hide-output")
                changed = True
    if changed:
        nbformat.write(executed, output)


#: the tag of a code cell that shows the idea of its notebook: it stays open on the page
IDEA_TAG = "idea"
#: tags that already say how a cell shows (the build leaves those cells alone)
_SHOWN = {IDEA_TAG, "parameters", "injected-parameters", "hide-input", "hide-cell",
          "remove-cell", "remove-input"}


def _fold_machinery(output: Path) -> None:
    """Fold the code of every cell that only sets up, loads, computes tables or draws
    (``hide-input``: its output stays in view, its code a click away): what stays open is
    the parameters cell and the cells a notebook tags ``idea``, the few that show how the
    notebook's question is answered."""
    import nbformat

    executed = nbformat.read(output, as_version=4)
    changed = False
    for cell in executed.cells:
        if cell.cell_type != "code":
            continue
        tags = cell.metadata.setdefault("tags", [])
        if not _SHOWN & set(tags):
            tags.append("hide-input")
            changed = True
    if changed:
        nbformat.write(executed, output)


def _code_cells(path: Path) -> int:
    import json

    return sum(c.get("cell_type") == "code"
               for c in json.loads(Path(path).read_text(encoding="utf-8"))["cells"])


def _tag_injected_cell(nb: Notebook, params: dict[str, Any], output: Path) -> None:
    """Papermill adds a cell with the values it injected. When they are the notebook's
    own defaults the cell repeats the parameters cell, so the book drops it; otherwise
    it stays visible, since it says which values produced the page."""
    import nbformat

    executed = nbformat.read(output, as_version=4)
    defaults = dict(nb.defaults)
    for cell in executed.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags and params == defaults:
            cell["metadata"]["tags"] = [*tags, "remove-cell"]
    nbformat.write(executed, output)
