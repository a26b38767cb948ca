"""How the wangkong2025 chapter's notebooks set their numbers beside the paper's.

* :func:`reference_columns`: the kept reference runs' columns of a :func:`robattr.report.papers.compare`
  frame, with their short names;
* :func:`kept_runs_note`: what a caption says about those runs;
* :func:`show_budgets`: a frame of mean certified budgets (Tables 5-7) as one whole table;
* :func:`report_block_budgets`: a block after the first beside Table 6 or 7, shown and
  recorded.
"""
from __future__ import annotations

from typing import Iterable

import pandas as pd

__all__ = ["NO_REF", "reference_columns", "kept_runs_note", "show_budgets",
           "report_block_budgets"]

#: Why a kept reference run's cell lacks a value.
NO_REF = ("the kept reference run recorded no value for this cell (it ran other models, radii "
          "or blocks)")


def reference_columns(columns: Iterable[str]) -> dict[str, str]:
    """The columns of a kept reference run (``"medium ref (...)"``) among ``columns``, each
    mapped to its short name (the part before ``" ("``)."""
    return {c: c.split(" (")[0] for c in columns if " ref (" in c}


def kept_runs_note(refs: dict[str, str]) -> str:
    """The caption's tail on the kept reference runs of :func:`reference_columns`: one
    ``"; <short>: a kept run of the <profile> profile (<what>)"`` per run
    (:func:`robattr.report.tables.reference_note`; "" when there is none)."""
    from robattr.report.tables import reference_note

    return "".join(f"; {reference_note(c)}" for c in refs)


def show_budgets(compared: pd.DataFrame, caption: str) -> None:
    """Show a :func:`robattr.report.papers.compare` frame of mean budgets whole: one column per
    ``(T, model)``, for each radius the rows ours, each kept reference run's and the paper's;
    every '—' with its reason."""
    from robattr.report import viz

    t = (compared.drop(columns="note").pivot_table(index=["T", "model"], columns="r").T
         .swaplevel(0, 1).sort_index())
    refs = reference_columns(t.index.get_level_values(1).unique())
    t = t.rename(index=refs, level=1)

    def rank(s: str) -> int:
        return 2 if s.startswith("paper") else 1 if s in refs.values() else 0

    t = t.reindex(sorted(t.index, key=lambda row: (float(row[0]), rank(row[1]))))
    why = {row: viz.NOT_IN_PAPER if row[1].startswith("paper")
           else NO_REF if row[1] in refs.values() else viz.NOT_RUN
           for row in t.index[t.isna().any(axis=1)]}
    viz.show_table(t.round(4), why=why, caption=caption + kept_runs_note(refs))


def report_block_budgets(budgets: pd.DataFrame, run: dict) -> pd.DataFrame:
    """For one block after the first (a :func:`~robattr.chapters.wangkong2025.blocks.table567_runs` run
    with its per-input ``budgets``, :func:`.tables.certified_budgets`): show its mean corrected
    budgets beside the paper's Table 6 (CIFAR-10) or 7 (ImageNet) and record each mean as
    ``eps_max_mean`` (labels: block, T, model, r). Returns the means."""
    from robattr.report import papers
    from robattr.chapters.wangkong2025.tables import mean_budgets
    from robattr.report.results import record

    lab = run["label"]
    mean_b = mean_budgets(budgets)
    cmp_b = papers.compare(mean_b, run["table"], on=["T", "model", "r"], where={"dataset": lab},
                           ours_label=f"ours ({lab}, corrected)", paper_label=f"paper ({lab})")
    show_budgets(cmp_b, f"Table {6 if lab == 'CIFAR-10' else 7}, the {lab} block: the mean "
                        "certified budget ε_max per radius r, ours beside the paper's; inf: an "
                        "unbounded budget (q ≥ 2)")
    for row in mean_b.itertuples():
        record("eps_max_mean", row.value, notebook="certified_eps", block=lab, T=row.T,
               model=row.model, r=row.r)
    return mean_b
