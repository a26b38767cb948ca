"""The chapters: what only one chapter's notebooks use.

robattr has three halves, and imports run one way between them::

    the library            data, models, attributions, metrics, attacks, bounds, train,
    (robattr.*)            zoo, verdicts, papers, viz, cost   -- knows nothing of chapters
          ^
          |  import
    the chapters           robattr.chapters.<key>: a chapter's run setup, its paper's
    (robattr.chapters)     headline evaluation, its own claim rules, and its notebooks'
          ^                cost declarations for `robattr plan` (<key>.plan)
          |  reads the declarations only (robattr.chapters.declaration)
    the book machinery     robattr.book: finds and runs notebooks, profiles, references,
    (robattr.book)         the plan engine, the HTML build

One package per chapter: ``wang2020``, ``wangkong2023``, ``wangkong2025``, ``joo2023``,
``lim2021``, ``crosspaper``, ``example``. ``tests/book/test_layout.py`` enforces the direction.
"""
from __future__ import annotations

import importlib

__all__ = ["CHAPTERS", "declaration", "declarations"]

#: the chapter packages, in the book's order
CHAPTERS = ("example", "wang2020", "wangkong2023", "wangkong2025", "joo2023", "lim2021",
            "crosspaper")


def _plan(chapter: str):
    if chapter not in CHAPTERS:
        raise KeyError(f"no chapter {chapter!r}; chapters: {', '.join(CHAPTERS)}")
    return importlib.import_module(f"robattr.chapters.{chapter}.plan")


def declarations() -> dict:
    """Every notebook's cost declaration, ``{notebook key: Declaration}``, gathered from
    each chapter's ``plan`` module (its ``DECLARATIONS``, keyed by notebook name)."""
    out = {}
    for chapter in CHAPTERS:
        for name, decl in _plan(chapter).DECLARATIONS.items():
            out[f"{chapter}/{name}"] = decl
    return out


def declaration(key: str):
    """The cost declaration of notebook ``key`` (``"wang2020/table2_attacks"``)."""
    chapter, _, name = key.partition("/")
    decls = _plan(chapter).DECLARATIONS
    if name not in decls:
        raise KeyError(f"{key}: its chapter module robattr.chapters.{chapter}.plan declares "
                       f"no notebook {name!r} (it declares {', '.join(sorted(decls))})")
    return decls[name]
