"""The five papers: citations, their printed tables, and the book's verdict on each claim.

The tables in ``tables/`` are the project's transcription of every numeric table of the
five papers, one row per printed number (``tables/README.md`` describes the format and
every uncertain cell). They are copied verbatim from ``shared/papers/tables`` so that the
book builds from a clean clone; ``tests/test_papers.py`` checks the copy is unchanged
whenever the shared folder is present.

>>> from robattr import papers
>>> papers.table("wang2020_table4")            # doctest: +SKIP
   beta  value printed note
...

Notebooks put our number beside the paper's with :func:`compare` and state each claim
with :func:`claim`.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from robattr.verdicts import VERDICTS, Verdict  # the verdicts a claim can carry

__all__ = ["TABLES_DIR", "CITATIONS", "tables", "table", "compare", "claim", "VERDICTS"]

TABLES_DIR = Path(__file__).parent / "tables"

CITATIONS = {
    "wang2020": "Zifan Wang, Haofan Wang, Shakul Ramkumar, Piotr Mardziel, Matt Fredrikson, "
                "Anupam Datta. Smoothed Geometry for Robust Attribution. NeurIPS 2020.",
    "wangkong2023": "Fan Wang, Adams Wai-Kin Kong. A Practical Upper Bound for the Worst-Case "
                    "Attribution Deviations. CVPR 2023.",
    "wangkong2025": "Fan Wang, Adams Wai-Kin Kong. Certified l2 Attribution Robustness via "
                    "Uniformly Smoothed Attributions. arXiv:2405.06361 (ICLR 2025 submission).",
    "joo2023": "Sunghwan Joo, Seokhyeon Jeong, Juyeon Heo, Adrian Weller, Taesup Moon. Towards "
               "More Robust Interpretation via Local Gradient Alignment. AAAI 2023.",
    "lim2021": "Dohun Lim, Hyeonseok Lee, Sungchan Kim. Building Reliable Explanations of "
               "Unreliable Neural Networks: Locally Smoothing Perspective of Model "
               "Interpretation. CVPR 2021.",
}

def tables() -> list[str]:
    """The names of the transcribed tables, e.g. ``['joo2023_table1', ...]``."""
    return sorted(p.stem for p in TABLES_DIR.glob("*.csv"))


def table(name: str):
    """One paper table as a pandas DataFrame.

    The dimension columns are kept as printed (strings); ``value`` is the printed number
    as a float (NaN where the paper printed none), ``printed`` the exact string, and
    ``note`` the transcription note ('' when the cell is certain).
    """
    import pandas as pd

    path = TABLES_DIR / f"{name}.csv"
    if not path.is_file():
        raise KeyError(f"no paper table {name!r}; known tables: {', '.join(tables())}")
    df = pd.read_csv(path, dtype=str, keep_default_na=False)
    df.insert(df.columns.get_loc("value") + 1, "printed", df["value"])
    df["value"] = pd.to_numeric(df["value"].replace("", None), errors="raise").astype(float)
    return df


def compare(ours, name: str, on: Sequence[str], *, value: str = "value",
            where: dict | None = None, ours_label: str = "ours", paper_label: str = "paper"):
    """Our numbers beside the paper's.

    ``ours`` is a DataFrame with the key columns ``on`` and a ``value`` column; ``name`` a
    paper table; ``where`` fixes other dimensions of the paper table (e.g.
    ``{"dataset": "CIFAR-10"}``), whose rows are matched on ``on`` after that filter. Keys
    are compared as strings, so label ours with the paper's printed labels. Returns one row
    per key of either side: ``on`` columns, ``ours``, then one column per reference run
    handed to the notebook (:mod:`robattr.references`, e.g. ``medium ref (mnist, 1a2b3c4)``),
    ``paper``, and the paper's ``note``. Each of our rows is recorded (metric ``compare``,
    labels ``table``, ``where`` and ``key``), which is what a later build's reference column reads.
    """
    import json

    import pandas as pd

    from robattr import references, results

    paper = table(name)
    for col, val in (where or {}).items():
        if col not in paper.columns:
            raise KeyError(f"{name} has no column {col!r}; columns: {list(paper.columns)}")
        paper = paper[paper[col] == str(val)]
    missing = [c for c in on if c not in paper.columns or c not in ours.columns]
    if missing:
        raise KeyError(f"key columns {missing} are not in both tables")
    if paper.duplicated(list(on)).any():
        raise ValueError(f"the key {list(on)} does not identify one row of {name} after "
                         f"filtering by {where}; add the other dimensions to 'where' or 'on'")
    left = ours[list(on) + [value]].rename(columns={value: ours_label}).copy()
    right = paper[list(on) + ["value", "note"]].rename(columns={"value": paper_label}).copy()
    for frame in (left, right):
        for c in on:
            frame[c] = frame[c].astype(str)
    where_label = json.dumps(where or {}, sort_keys=True, default=str)
    for key, v in zip(left[list(on)].itertuples(index=False),
                      pd.to_numeric(left[ours_label], errors="coerce")):
        results.record("compare", v, table=name, where=where_label, key=json.dumps(list(key)))
    out = left.merge(right, on=list(on), how="outer", sort=False)
    out["note"] = out["note"].fillna("")
    keys = [tuple(r) for r in out[list(on)].astype(str).itertuples(index=False)]
    for i, (profile, meta) in enumerate(references.available().items()):
        out.insert(len(on) + 1 + i, references.label(profile, meta),
                   references.compare_values(profile, name, where_label, keys))
    return out


def claim(text: str, verdict: Verdict, evidence: str = "", *, n: int | None = None,
          unit: str | None = None, dataset: str | None = None, model: str | None = None):
    """A claim of the paper with our verdict, rendered as Markdown and recorded.

    ``verdict`` must come from a rule of :mod:`robattr.verdicts` (a :class:`Verdict`: the
    outcome and the sentence that states the rule and its numbers); a literal string is
    refused. The line shows the scale set by :func:`robattr.verdicts.set_scale` (``n``,
    ``unit``, ``dataset`` and ``model`` override it for this claim) and the profile. ``evidence`` adds a sentence.
    The claim is recorded (metric ``claim``) beside the notebook's results, for the book's
    Verdicts page, and carries an anchor ``claim-<i>`` that page links to. When the
    notebook has reference runs (:mod:`robattr.references`), the line adds the verdict each
    gave the same claim.
    """
    from dataclasses import replace

    from IPython.display import Markdown

    from robattr import references, results
    from robattr.verdicts import current_scale

    if not isinstance(verdict, Verdict):
        raise TypeError("a claim's verdict must come from a rule of robattr.verdicts (gap, "
                        f"combine, exact, share, attack_effective), not {verdict!r}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("a claim needs its text")
    scale = current_scale()
    scale = replace(scale, **{k: v for k, v in (("n", n), ("unit", unit), ("dataset", dataset),
                                                ("model", model)) if v is not None})
    where = scale.text()
    index = sum(r["metric"] == "claim" for r in results.rows()) + 1
    results.record("claim", list(VERDICTS).index(verdict.verdict), text=text,
                   verdict=verdict.verdict, rule=verdict.rule, scale=where,
                   evidence=evidence, anchor=f"claim-{index}")
    tail = f" {evidence}" if evidence else ""
    for profile, meta in references.available().items():
        ref = references.claim_verdict(profile, text)
        seen = f"**{VERDICTS.get(ref, ref)}**" if ref else "not tested there"
        tail += f" *{references.label(profile, meta)}: {seen}.*"
    return Markdown(f'<span id="claim-{index}"></span>**Claim:** {text} — '
                    f"**{VERDICTS[verdict.verdict]}** ({verdict.rule}; {where}).{tail}")
