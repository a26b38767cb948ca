"""The five papers: citations, their printed tables, and the book's verdict on each claim.

The tables in ``tables/`` are the project's transcription of every numeric table of the
five papers, one row per printed number (``tables/README.md`` describes the format and
every uncertain cell). They are copied verbatim from ``shared/papers/tables`` so that the
book builds from a clean clone; ``tests/report/test_papers.py`` checks the copy is unchanged
whenever the shared folder is present.

>>> from robattr import papers
>>> papers.table("wang2020_table4")            # doctest: +SKIP
   beta  value printed note
...

Notebooks put our number beside the paper's with :func:`compare`. What a notebook judges
is recorded with its kind, and each paper gets two tallies, kept symmetric:

* :func:`statement`: a theorem, lemma, proposition, corollary or equation **as printed**,
  with its place in the paper: "holds as printed" or "does not hold as printed" (then it
  links to its erratum); a statement that fails is counted as failing;
* :func:`claim`: an **empirical claim** of the paper (what it says its tables, figures and
  text show about trained models and data), with its place, judged by the noise rules.

Apart, never credited to a paper: :func:`check` (our own arithmetic and the book's
corrected forms: a failure is a bug), :func:`demonstrate` (a counterexample the book builds
to explain an erratum, shown beside the statement's own verdict) and :func:`question` (the
book's own questions, attack preconditions, descriptive rows, and a paper's claim re-tested
at the cross-paper matrix's common setting, which points to the chapter that counts it).
"""
from __future__ import annotations

from typing import Sequence

from robattr.report.papers.printed import TABLES_DIR, table, tables
from robattr.report.verdicts import VERDICTS, Verdict  # the verdicts a claim can carry

__all__ = ["TABLES_DIR", "CITATIONS", "LINKS", "tables", "table", "compare", "statement", "claim",
           "check", "demonstrate", "question", "untested", "CheckFailed", "KINDS", "TALLIED", "VERDICTS",
           "STATEMENT_WORDS"]

#: what a recorded line is: a statement of the paper as printed, an empirical claim of the
#: paper, a check of our arithmetic, the demonstration of an erratum, or the book's own
#: question (only statements and claims count in a paper's tallies, each in its own)
KINDS = ("statement", "claim", "check", "demonstration", "question")
#: the kinds tallied for a paper, each in a tally of its own
TALLIED = ("statement", "claim")
#: how a statement's verdict reads (it is tested as printed)
STATEMENT_WORDS = {"holds": "✓ holds as printed", "does not hold": "✗ does not hold as printed"}

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

#: Where each paper can be read (arXiv; joo2023 also by its DOI), linked from its chapter page
LINKS = {
    "wang2020": "https://arxiv.org/abs/2006.06643",
    "wangkong2023": "https://arxiv.org/abs/2303.00340",
    "wangkong2025": "https://arxiv.org/abs/2405.06361",
    "joo2023": "https://arxiv.org/abs/2211.15900",
    "lim2021": "https://arxiv.org/abs/2103.14332",
}


def compare(ours, name: str, on: Sequence[str], *, value: str = "value",
            where: dict | None = None, ours_label: str = "ours", paper_label: str = "paper"):
    """Our numbers beside the paper's.

    ``ours`` is a DataFrame with the key columns ``on`` and a ``value`` column; ``name`` a
    paper table; ``where`` fixes other dimensions of the paper table (e.g.
    ``{"dataset": "CIFAR-10"}``), whose rows are matched on ``on`` after that filter. Keys
    are compared as strings, so label ours with the paper's printed labels. Returns one row
    per key of either side: ``on`` columns, ``ours``, then one column per reference run
    handed to the notebook (:mod:`robattr.report.references`, e.g. ``medium ref (mnist, 1a2b3c4)``),
    ``paper``, and the paper's ``note``. Each of our rows is recorded (metric ``compare``,
    labels ``table``, ``where`` and ``key``), which is what a later build's reference column reads.
    """
    import json

    import pandas as pd

    from robattr.report import references, results

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


class CheckFailed(AssertionError):
    """A check of our own arithmetic failed, or a built counterexample did not show its
    erratum: a bug in robattr or in the notebook, never a finding about a paper."""


def _record(kind: str, text: str, verdict: Verdict, evidence: str, overrides: dict,
            **extra) -> tuple[int, str]:
    """Record one claim, check or demonstration (metric ``claim``, label ``kind``) and
    return its index and scale text."""
    from dataclasses import replace

    from robattr.report import results
    from robattr.report.verdicts import current_scale

    if not isinstance(verdict, Verdict):
        raise TypeError(f"a {kind}'s verdict must come from a rule of robattr.report.verdicts "
                        f"(gap, combine, exact, share, attack_effective), not {verdict!r}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"a {kind} needs its text")
    scale = replace(current_scale(), **{k: v for k, v in overrides.items() if v is not None})
    where = scale.text()
    index = sum(r["metric"] == "claim" for r in results.rows()) + 1
    extra = {k: v for k, v in extra.items() if v is not None}
    results.record("claim", list(VERDICTS).index(verdict.verdict), text=text,
                   verdict=verdict.verdict, rule=verdict.rule, scale=where,
                   evidence=evidence, anchor=f"claim-{index}", kind=kind, **extra)
    return index, where


def _reference_tail(text: str, where: str) -> str:
    """What each reference run handed to the notebook says of the same claim: its verdict,
    its own numbers and scale; the same settings as this run are the same evidence twice."""
    from robattr.report import references

    tail = ""
    for profile, meta in references.available().items():
        ref = references.claim_record(profile, text)
        name = references.label(profile, meta)
        if ref is None:
            tail += f" *{name}: not tested there.*"
            continue
        word = VERDICTS.get(ref["verdict"], ref["verdict"])
        if ref["scale"] and _same_scale(ref["scale"], where):
            tail += (f" *{name}: **{word}**, at the same settings as this run (the same "
                     "evidence again, not a corroboration).*")
        else:
            tail += f" *{name}: **{word}** ({ref['rule']}; {ref['scale']}).*"
    return tail


def _same_scale(a: str, b: str) -> bool:
    """Two scale lines that say what they ran on and differ at most in the profile they
    name (a line that names only its profile says too little to call two runs the same)."""
    def strip(s: str) -> str:
        return ", ".join(p for p in s.split(", ") if not p.startswith("profile ")
                         and p != "run outside the pipeline")
    return bool(strip(a)) and strip(a) == strip(b)


def _shown(text: str) -> str:
    """A claim line's part in the reader's language (:func:`robattr.report.reader.reader_text`:
    paper keys, the papers' metric names, MathJax), for the notebook ``$ROBATTR_NOTEBOOK``
    names; the recorded text stays as written."""
    from robattr import context
    from robattr.report.reader import reader_text

    chapter = context.current().chapter
    return reader_text(text, chapter) if text else text


def _place(place) -> str | None:
    if place is None:
        return None
    if not isinstance(place, str) or not place.strip():
        raise ValueError(f"place must name where the paper says it (a section, equation, "
                         f"table, figure or paragraph), got {place!r}")
    return place.strip()


def claim(text: str, verdict: Verdict, evidence: str = "", *, place: str | None = None,
          n: int | None = None, unit: str | None = None, dataset: str | None = None,
          model: str | None = None):
    """An **empirical claim of the paper** (what it says its tables, figures and text show)
    with our verdict, rendered as Markdown and recorded; ``place`` names where the paper
    makes it ("Table 3", "Sec. 5, par. 2"; a claim read from a table where the paper states
    no sentence says so in its text).

    Claims count in the paper's empirical tally. A theorem or equation as printed is a
    :func:`statement`; an identity or the book's own corrected form a :func:`check`; a
    counterexample built to show an erratum a :func:`demonstrate`; the book's own question
    a :func:`question`.

    ``verdict`` must come from a rule of :mod:`robattr.report.verdicts` (a :class:`Verdict`: the
    outcome and the sentence that states the rule and its numbers); a literal string is
    refused. The line shows the scale set by :func:`robattr.report.verdicts.set_scale` (``n``,
    ``unit``, ``dataset`` and ``model`` override it for this claim) and the profile.
    ``evidence`` adds a sentence. The claim is recorded (metric ``claim``, kind ``claim``)
    beside the notebook's results, for the book's Verdicts page, and carries an anchor
    ``claim-<i>`` that page links to. When the notebook has reference runs
    (:mod:`robattr.report.references`), the line adds what each found for the same claim: its
    verdict, its numbers and its scale.
    """
    from IPython.display import Markdown

    place = _place(place)
    index, where = _record("claim", text, verdict, evidence,
                           dict(n=n, unit=unit, dataset=dataset, model=model), place=place)
    tail = (f" {_shown(evidence)}" if evidence else "") + _reference_tail(text, where)
    head = f"**Claim ({place}):**" if place else "**Claim:**"
    return Markdown(f'<span id="claim-{index}"></span>{head} {_shown(text)} — '
                    f"**{VERDICTS[verdict.verdict]}** ({_shown(verdict.rule)}; {_shown(where)})."
                    f"{tail}")


def statement(text: str, verdict: Verdict, evidence: str = "", *, place: str,
              erratum: str | None = None, n: int | None = None, unit: str | None = None,
              dataset: str | None = None, model: str | None = None):
    """A **statement of the paper as printed** (a theorem, lemma, proposition, corollary or
    equation), tested as printed, with ``place`` its place in the paper ("Thm 2",
    "App. B, Eq. 39"). It reads "holds as printed" or "does not hold as printed"
    (:data:`STATEMENT_WORDS`; a first-order statement judged by a share may also be
    inconclusive, and one whose hypothesis the run's models break, not comparable), and it
    counts in the paper's tally of statements either way: a statement that fails is counted
    as failing, not filed away.

    ``erratum``: the label of its entry on the errata page (``"erratum-wk25-thm1"``), for a
    statement the book knows to be wrong as printed; the line links to it. A statement
    that fails without one is a finding of this run, and the line says that no erratum is
    filed."""
    from IPython.display import Markdown

    if erratum is not None and (not isinstance(erratum, str) or not erratum.startswith("erratum-")):
        raise ValueError(f"erratum must be a label of book/errata.md starting with "
                         f"'erratum-', got {erratum!r}")
    place = _place(place)
    if place is None:
        raise ValueError("a statement needs its place in the paper")
    index, where = _record("statement", text, verdict, evidence,
                           dict(n=n, unit=unit, dataset=dataset, model=model), place=place,
                           erratum=erratum)
    word = STATEMENT_WORDS.get(verdict.verdict, VERDICTS[verdict.verdict])
    tail = (f" {_shown(evidence)}" if evidence else "")
    if verdict.fails:
        tail += (f" See {{ref}}`its erratum <{erratum}>`." if erratum else
                 " No erratum is filed for it: a finding of this run.")
    tail += _reference_tail(text, where)
    return Markdown(f'<span id="claim-{index}"></span>**Statement ({place}):** {_shown(text)} '
                    f"— **{word}** ({_shown(verdict.rule)}; {_shown(where)}).{tail}")


def question(text: str, verdict: Verdict, evidence: str = "", *, of: str | None = None,
             n: int | None = None, unit: str | None = None, dataset: str | None = None,
             model: str | None = None):
    """**The book's own question**, judged by the same rules but never credited to a paper:
    a question no paper asks (do the five papers rank methods alike?), a precondition of an
    attack (does it work at all at this scale?), a descriptive row, or a paper's claim
    re-tested at the cross-paper matrix's common setting; ``of`` then names the chapter
    notebook whose verdict counts (``"joo2023/table2_cost"``), so each claim is counted
    once. Recorded with kind ``question``."""
    from IPython.display import Markdown

    if of is not None and (not isinstance(of, str) or "/" not in of):
        raise ValueError(f"of must name a notebook as chapter/name, got {of!r}")
    index, where = _record("question", text, verdict, evidence,
                           dict(n=n, unit=unit, dataset=dataset, model=model), of=of)
    tail = (f" {_shown(evidence)}" if evidence else "")
    if of:
        tail += (f" Not counted here: the paper's claim is counted once, in "
                 f"{{doc}}`{of} </book/{of}>`.")
    tail += _reference_tail(text, where)
    return Markdown(f'<span id="claim-{index}"></span>**The book\'s question (not counted):** '
                    f"{_shown(text)} — **{VERDICTS[verdict.verdict]}** ({_shown(verdict.rule)}; "
                    f"{_shown(where)}).{tail}")


def check(text: str, verdict: Verdict, evidence: str = "", *, n: int | None = None,
          unit: str | None = None, dataset: str | None = None, model: str | None = None):
    """A check of **our own arithmetic**: an identity, a code round-trip or the book's own
    corrected form, which only a bug can break. It never counts in a paper's tally. It
    must pass: a ``verdict`` other than "holds" raises :class:`CheckFailed`, so the build
    reports the notebook as failed. Recorded like a claim, with kind ``check``; the line
    shows what the reference runs found, as a claim's does."""
    from IPython.display import Markdown

    if isinstance(verdict, Verdict) and verdict.verdict != "holds":
        raise CheckFailed(f"check failed (a bug, not a finding): {text} ({verdict.rule})")
    index, where = _record("check", text, verdict, evidence,
                           dict(n=n, unit=unit, dataset=dataset, model=model))
    tail = (f" {_shown(evidence)}" if evidence else "") + _reference_tail(text, where)
    return Markdown(f'<span id="claim-{index}"></span>**Check (our arithmetic):** {_shown(text)} '
                    f"— **✔ passes** ({_shown(verdict.rule)}; {_shown(where)}).{tail}")


def demonstrate(text: str, verdict: Verdict, erratum: str, evidence: str = "", *,
                n: int | None = None, unit: str | None = None, dataset: str | None = None,
                model: str | None = None):
    """A **demonstration of an erratum**: a counterexample built to show that a statement
    of the paper is wrong as printed. Such a case can only come out one way, so it is not
    a claim and does not count in the paper's tally; it links to its entry ``erratum`` (a
    label of ``book/errata.md``, e.g. ``"erratum-wk25-thm1"``). The built case must
    refute the statement: a ``verdict`` other than "does not hold" raises
    :class:`CheckFailed`. Recorded like a claim, with kind ``demonstration``."""
    from IPython.display import Markdown

    if not isinstance(erratum, str) or not erratum.startswith("erratum-"):
        raise ValueError(f"erratum must be a label of book/errata.md starting with "
                         f"'erratum-', got {erratum!r}")
    if isinstance(verdict, Verdict) and verdict.verdict != "does not hold":
        raise CheckFailed(f"the counterexample did not show its erratum ({erratum}), a bug: "
                          f"{text} ({verdict.rule})")
    index, where = _record("demonstration", text, verdict, evidence,
                           dict(n=n, unit=unit, dataset=dataset, model=model), erratum=erratum)
    tail = (f" {_shown(evidence)}" if evidence else "") + _reference_tail(text, where)
    return Markdown(f'<span id="claim-{index}"></span>**Erratum shown:** {_shown(text)} — '
                    f"**the counterexample refutes it as printed** ({_shown(verdict.rule)}; "
                    f"{_shown(where)}). "
                    f"See {{ref}}`the errata entry <{erratum}>`.{tail}")


def untested(text: str, why: str, *, place: str | None = None):
    """A claim of the paper that this run does **not** test, and why (a block the tier does
    not run, a model the book cannot build, a size that is not comparable). Recorded
    (metric ``untested``) so that each chapter page lists, from the records, what its tally
    does not cover; it carries no verdict and counts in no tally."""
    from IPython.display import Markdown

    from robattr.report import results

    if not isinstance(text, str) or not text.strip():
        raise ValueError("an untested claim needs its text")
    if not isinstance(why, str) or not why.strip():
        raise ValueError("an untested claim needs the reason it is not tested")
    place = _place(place)
    results.record("untested", 0, text=text.strip(), why=why.strip(), place=place or "")
    where = f" ({place})" if place else ""
    return Markdown(f"*Not tested here{where}:* {_shown(text.strip())} {_shown(why.strip())}")
