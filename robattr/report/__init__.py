"""What a page of the book shows and records, in one room.

``papers``       the five papers: citations, their printed tables (``papers/tables``), our
                 number beside theirs (``compare``) and the recorded verdicts (``statement``,
                 ``claim``, ``check``, ``demonstrate``, ``question``)
``verdicts``     the tested rules that turn a run's numbers into a verdict, with its scale
                 and the guards (accuracy targets, seeds)
``results``      the scalars a notebook records, kept next to the executed notebook
``references``   the kept reference runs of other profiles, shown beside this run
``reader``       how a verdict reads to a person (marks, words, colours)
``tables``       tables for the page: whole tables, a reason for every missing cell
``viz``          the book's figure style, heatmaps and plots

Import the module you need (``from robattr.report import papers, verdicts``); this package
imports nothing itself (``robattr.report.papers`` after ``import robattr`` loads the module
on first use). Of the rest of the library, only the modules that judge or cite
(``targets``, ``seeds``, ``timing``, ``attack_protocol``, ``blocks``) use it.
"""
from __future__ import annotations

import importlib

_MODULES = ("papers", "verdicts", "results", "references", "reader", "tables", "viz")
__all__ = list(_MODULES)


def __getattr__(name: str):
    if name in _MODULES:
        return importlib.import_module(f"robattr.report.{name}")
    raise AttributeError(f"module 'robattr.report' has no attribute {name!r}")
