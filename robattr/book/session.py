"""A notebook's prologue and epilogue: :func:`start` and :meth:`NotebookRun.finish`.

Every notebook opens its (folded) setup cell with ``run = robattr.start()`` and closes with
``run.finish()``. What the prologue sets is global state, set here in one visible call
rather than as a side effect of an import:

* checks the parameters against the declarations of the notebook's parameters cell
  (:func:`robattr.book.params.check_notebook`);
* the book's figure style (:func:`robattr.report.viz.set_theme`) and whole tables in the output
  (:func:`robattr.report.tables.show_whole_tables`: pandas' display options and the HTML table
  formatter);
* robattr's precision policy on CUDA (:func:`robattr.precision.apply`: full fp32 unless the
  profile asks for TF32);
* seeds Python, NumPy and torch with the ``seed`` parameter when the notebook has one
  (:func:`robattr.utils.seed_everything`);
* picks the device from the ``device`` parameter (``"auto"`` when the notebook has none);
* starts the clock that :meth:`NotebookRun.finish` reads.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["NotebookRun", "start"]


@dataclass
class NotebookRun:
    """What :func:`start` set up: the checked parameters, the device, the seed, the clock."""

    params: dict[str, Any]
    device: torch.device
    seed: int | None
    precision: str
    started: float = field(default_factory=time.perf_counter)

    def seconds(self) -> float:
        """Seconds since :func:`start`."""
        return time.perf_counter() - self.started

    def finish(self) -> None:
        """The epilogue: print the notebook's compute time since :func:`start` (a sentence;
        it returns nothing, so the page shows no bare number after it)."""
        print(f"notebook compute time: {self.seconds():.1f} s")


def start(namespace: dict[str, Any] | None = None, source: str | None = None) -> NotebookRun:
    """The prologue of a notebook (module docstring). ``namespace`` and ``source`` are for
    use outside a notebook, as in :func:`robattr.book.params.check_notebook`."""
    from robattr import precision
    from robattr.report import viz
    from robattr.book.params import check_notebook
    from robattr.report.tables import show_whole_tables
    from robattr.utils import get_device, seed_everything

    params = check_notebook(namespace, source)
    viz.set_theme()
    show_whole_tables()
    mode = precision.apply()
    seed = params.get("seed")
    if seed is not None:
        seed_everything(int(seed))
    return NotebookRun(params=params, device=get_device(params.get("device", "auto")),
                       seed=seed, precision=mode)
