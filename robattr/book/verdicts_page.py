"""The book's Verdicts page, written at build time from the claims the notebooks recorded.

Every :func:`robattr.report.papers.claim` is recorded (metric ``claim``) in its notebook's
results CSV. Before jupyter-book runs, :func:`write` gathers them from
``book/**/*.results.csv`` into ``book/verdicts.md``: one table per paper, in the order of
the book's chapters (:func:`book_order`), with one short row per claim (the claim, its
verdict, each kept reference's verdict, the scale in a few words, a link to the claim in
its notebook; the rule, its numbers and the full scale a click away), and a figure
counting the verdicts per paper (``book/verdicts_counts.png``). Both files are build
outputs, like the executed notebooks.

The notebooks write their claims in plain ASCII ("Thm 2 (000): ||H~_x||_2 <= 2F /
sigma^2", "(kin_auc_SM)"); the page shows them in the reader's language
(:func:`reader_text`): the papers' keys for their codes 000-004, the papers' names for
our metric keys (:func:`metric_name`), and formulas typeset by MathJax (:func:`typeset`),
cut where a narrow column needs it: that layer is :mod:`robattr.report.reader`, which the
notebooks' claim lines use too.
"""
from __future__ import annotations

import re
from pathlib import Path

from robattr.book.lines import cell as _cell
from robattr.book.lines import details as _details
from robattr.book.lines import mark as _mark
from robattr.book.lines import names_place as _names_place
from robattr.book.lines import reference_parts as _reference_parts
from robattr.book.lines import scale_parts as _scale_parts
from robattr.book.lines import short_scale as _short_scale
from robattr.book.lines import verdict_word as _verdict_word
from robattr.book.lines import where as _where
from robattr.book.findings import chapter_findings
from robattr.book.stamps import read_stamps
from robattr.book.tallies import (all_tallies, chapter_tally, collect_untested, recorded,
                                  reference_tallied, tallies, tally_lines)
from robattr.report.reader import (PAPER_KEYS, metric_name, paper_keys,  # noqa: F401 (re-exported)
                            reader_text, typeset)

__all__ = ["PAGE", "FIGURE", "AGAINST", "PAPER_KEYS", "collect", "against", "changed",
           "book_order", "metric_name", "paper_keys", "typeset", "reader_text", "write"]

PAGE = "verdicts.md"
FIGURE = "verdicts_counts.png"
#: the anchor of the section listing the claims that went against the paper
AGAINST = "against-the-paper"
#: the kinds a kept reference's verdicts are read for: the tallied ones, and what a
#: reference made before statements were their own kind recorded them as ("claim", "" or a
#: "demonstration" of a statement as printed); this build's kind of the same line decides
#: in which tally it shows
_REFERENCE_KINDS = ("statement", "claim", "demonstration", "", "nan")
_GROUPS = {"crosspaper": "Across the papers (the cross-paper matrix)",
           "example": "Worked examples"}


def collect(book_dir: Path):
    """Every recorded claim under ``book_dir`` as a DataFrame (one row per claim, with the
    notebook ``key`` and the ``chapter``), in notebook order."""
    out = recorded(book_dir, "claim", ["kind", "text", "verdict", "rule", "scale", "evidence",
                                       "anchor", "erratum", "place", "of"])
    out.loc[out["kind"] == "", "kind"] = "claim"      # recorded before kinds existed
    return out


def _reference_verdicts(root: Path) -> dict[str, dict]:
    """Per kept reference: ``{"claims": {(key, text): verdict}, "stale": {key: bool},
    "prov": provenance}``."""
    from robattr.report import results
    from robattr.book import reference
    from robattr.book.notebooks import discover

    names = reference.profiles(root)
    if not names:
        return {}
    notebooks = discover(root)
    out = {}
    for name in names:
        status = reference.status(root, name, notebooks)
        claims, detail, kinds = {}, {}, {}
        for key, state in status.items():
            path = reference.results_file(root, name, key)
            if state == "missing":
                continue
            df = results.read(path)
            if "text" in df and (df["metric"] == "claim").any():
                for _, r in df[df["metric"] == "claim"].iterrows():
                    if str(r.get("kind", "claim")) in _REFERENCE_KINDS:
                        claims[(key, r["text"])] = r["verdict"]
                        kinds[(key, r["text"])] = str(r.get("kind", "claim"))
                        detail[(key, r["text"])] = (str(r.get("rule", "")),
                                                    str(r.get("scale", "")))
        out[name] = {"claims": claims, "detail": detail, "status": status, "kinds": kinds,
                     "prov": reference.provenance(root, name)}
    return out


# --------------------------------------------------------------------------- reader's text
def _chapter_title(chapter: str) -> str:
    """A chapter's heading: the paper's first author, its year and its key."""
    from robattr.report.papers import CITATIONS

    cite = CITATIONS.get(chapter)
    if not cite:
        return _GROUPS.get(chapter, chapter)
    authors = cite.split(". ")[0].split(", ")
    year = re.findall(r"\b(?:19|20)\d\d\b", cite)[-1]
    first = authors[0].split(" ")[-1]
    who = f"{first} et al." if len(authors) > 2 else \
        f"{first} and {authors[1].split(' ')[-1]}" if len(authors) == 2 else first
    return f"{who} ({year}, `{chapter}`)"


def _rows(chapter: str, group, refs: dict[str, dict], head: str) -> list[str]:
    ref_heads = "".join(f" {name} ref |" for name in refs)
    lines = [f"| {head} | verdict |{ref_heads} scale | where |",
             "|---|---|" + "---|" * len(refs) + "---|---|"]
    for _, r in group.iterrows():
        body = [reader_text(r["rule"], chapter)]
        if str(r["evidence"]).strip():
            body.append(reader_text(str(r["evidence"]).strip(), chapter))
        scale = "; ".join(_scale_parts(r["scale"]))
        if scale:
            body.append(f"Scale: {reader_text(scale, chapter)}.")
        rule = " ".join(b if b.endswith(".") or b is body[-1] else b + "." for b in body)
        ref_cells = "".join(
            f" {_details(_mark(word, r['kind']), reader_text(more, chapter))} |"
            for word, more in (_reference_parts(ref, r["key"], r["text"], r["scale"])
                               for ref in refs.values()))
        place = str(r.get("place", "") or "").strip()
        text = reader_text(r["text"], chapter) + (f" ({place})" if place and not
                                                  _names_place(str(r["text"]), place) else "")
        claim = _details(_cell(text), rule, "rule and numbers")
        lines.append(f"| {claim} "
                     f"| {_verdict_word(r['kind'], r['verdict'])} |{ref_cells} "
                     f"{_cell(reader_text(_short_scale(r['scale']), chapter))} | "
                     f"{_where(r['key'], r['anchor'])} |")
    return lines + [""]


def _chapter_lines(chapter: str, group, refs: dict[str, dict]) -> list[str]:
    """A chapter's section: its statements as printed, then its empirical claims, one short
    row each (the claim, its verdict, each kept reference's verdict, the scale in a few
    words, a link to the notebook), with the rule, the numbers and the full scale a click
    away."""
    from robattr.report.papers import CITATIONS

    lines = [f"## {_chapter_title(chapter)}", ""]
    if chapter in CITATIONS:
        lines += [f"*{CITATIONS[chapter]}* The chapter: {{doc}}`{chapter} <{chapter}/index>`.",
                  ""]
    statements = group[group["kind"] == "statement"]
    claims = group[group["kind"] == "claim"]
    if len(statements):
        lines += [f"**Statements, tested as printed** ({len(statements)}).", ""]
        lines += _rows(chapter, statements, refs, "statement")
    if len(claims):
        lines += [f"**Empirical claims** ({len(claims)}).", ""]
        lines += _rows(chapter, claims, refs, "claim")
    return lines


def book_order(root: Path, keys) -> list[str]:
    """Notebook keys in the order of the book's table of contents (unknown keys last)."""
    import yaml

    toc = Path(root) / "_toc.yml"
    order: list[str] = []
    if toc.is_file():
        def walk(node):
            if isinstance(node, dict):
                f = node.get("file")
                if isinstance(f, str) and f.startswith("book/"):
                    order.append(f.removeprefix("book/"))
                for v in node.values():
                    walk(v)
            elif isinstance(node, list):
                for v in node:
                    walk(v)
        walk(yaml.safe_load(toc.read_text()))
    rank = {k: i for i, k in enumerate(order)}
    return sorted(dict.fromkeys(keys), key=lambda k: (rank.get(k, len(rank)), k))


def _reference_cell(ref: dict, key: str, text: str, scale: str = "") -> str:
    """The reference's verdict on a claim with its own numbers and scale, in one string."""
    word, more = _reference_parts(ref, key, text, scale)
    return f"{_mark(word)} ({more})" if more else _mark(word)


def _reference_section(refs: dict[str, dict]) -> list[str]:
    lines = ["## Reference runs", "",
             "Kept runs of other profiles (`robattr build --profile NAME --keep-reference`), "
             "committed under `reference/NAME/` and shown beside this build's numbers. "
             "*Stale* means the notebook changed after the run.", "",
             "| reference | notebooks | stale | datasets | commits | devices | dates |",
             "|---|---|---|---|---|---|---|"]
    for name, ref in refs.items():
        prov = ref["prov"]
        kept = [k for k, v in ref["status"].items() if v != "missing"]
        stale = [k for k, v in ref["status"].items() if v == "stale"]
        datasets = sorted({str((e.get("params") or {}).get("dataset")) for e in prov.values()
                           if (e.get("params") or {}).get("dataset")})
        commits = sorted({str(e.get("commit", ""))[:7] for e in prov.values()})
        devices = sorted({str(e.get("device", "")) for e in prov.values()})
        dates = sorted(str(e.get("date", ""))[:10] for e in prov.values())
        span = f"{dates[0]} to {dates[-1]}" if dates and dates[0] != dates[-1] else \
            (dates[0] if dates else "")
        lines.append(f"| {name} | {len(kept)} of {len(ref['status'])} | {len(stale)} | "
                     f"{', '.join(datasets)} | {', '.join(commits)} | "
                     f"{_cell('; '.join(devices))} | {span} |")
    return lines + [""]


def changed(claims, ref: dict) -> list[tuple[str, str, str, str]]:
    """The claims whose verdict in this build differs from the reference's:
    ``(key, text, this build's verdict, the reference's verdict)``; claims the reference
    did not test are left out."""
    out = []
    for _, r in claims.iterrows():
        other = ref["claims"].get((r["key"], r["text"]))
        if other is not None and other != r["verdict"]:
            out.append((r["key"], r["text"], r["verdict"], other))
    return out


def _changed_section(claims, refs: dict[str, dict]) -> list[str]:
    from robattr.report.verdicts import VERDICTS

    lines = []
    for name, ref in refs.items():
        diff = changed(claims, ref) if not claims.empty else []
        both = sum((r["key"], r["text"]) in ref["claims"] for _, r in claims.iterrows())
        lines += [f"## Where the {name} reference decides otherwise", "",
                  f"{len(diff)} of the {both} claims tested in both this build and the {name} "
                  "reference get a different verdict there.", ""]
        if diff:
            lines += ["| claim | this build | " + f"{name} ref | where |", "|---|---|---|---|"]
            for key, text, here, there in diff:
                lines.append(f"| {_cell(reader_text(text, key.split('/')[0]))} | "
                             f"{VERDICTS.get(here, here)} | "
                             f"{VERDICTS.get(there, there)} | {{doc}}`{key}` |")
            lines.append("")
    return lines


def against(claims, refs: dict[str, dict],
            others=()) -> list[tuple[str, str, str, dict[str, str]]]:
    """The claims that **do not hold** in this build or in a kept reference that is not
    stale: ``(key, text, this build's verdict or "", {reference: verdict})``, in this
    build's order, then the references' own (claims this build did not record).
    ``others`` are ``(key, text)`` pairs this build records as checks or demonstrations,
    which a reference made before kinds existed recorded as claims: they are left out."""
    seen, out = set(others), []

    def row(key, text, here):
        there = {name: ref["claims"][(key, text)] for name, ref in refs.items()
                 if (key, text) in ref["claims"] and ref["status"].get(key) == "fresh"}
        if "does not hold" in (here, *there.values()):
            out.append((key, text, here, there))
        seen.add((key, text))

    for _, r in claims.iterrows():
        row(r["key"], r["text"], r["verdict"])
    for ref in refs.values():
        for key, text in ref["claims"]:
            if (key, text) not in seen:
                row(key, text, "")
    return out


def _against_section(claims, refs: dict[str, dict], others=()) -> list[str]:
    from robattr.report.verdicts import VERDICTS

    rows = against(claims, refs, others)
    names = list(refs)
    lines = [f"({AGAINST})=", "## Where a run goes against the paper", "",
             "The claims that do not hold in this build, or in a kept reference run that is "
             "not stale"
             + (f" ({', '.join(names)})" if names else "") + ": statements that do not hold "
             "as printed (each beside its erratum) and empirical claims that do not hold. A "
             "claim's verdict is one at the scale shown on its line, which a run at another "
             "scale may reverse; a statement as printed fails at any scale.", ""]
    if not rows:
        return lines + ["None.", ""]
    lines += [f"{len(rows)} statements and claims.", "",
              "| claim | this build |" + "".join(f" {n} ref |" for n in names) + " where |",
              "|---|---|" + "---|" * len(names) + "---|"]
    for key, text, here, there in rows:
        cells = "".join(f" {VERDICTS.get(there[n], there[n]) if n in there else '—'} |"
                        for n in names)
        lines.append(f"| {_cell(reader_text(text, key.split('/')[0]))} | "
                     f"{VERDICTS.get(here, here) if here else 'not run'} |"
                     f"{cells} {{doc}}`{key}` |")
    return lines + [""]


def _apart_section(checks, demos, questions=None) -> list[str]:
    """Checks of our arithmetic, demonstrations of errata and the book's own questions:
    listed, never tallied."""
    lines = ["(checks-and-demonstrations)=",
             "## Checks, demonstrations and the book's questions (not counted)", ""]
    lines += [f"**Checks of our own arithmetic.** {len(checks)} passed in this build (a check "
              "that fails stops its notebook)." if len(checks) else
              "**Checks of our own arithmetic.** None in this build.", ""]
    if len(checks):
        lines += ["| check | rule and numbers | where |", "|---|---|---|"]
        for _, r in checks.iterrows():
            link = f"{_where(r['key'], r['anchor'])} ({r['chapter']})"
            lines.append(f"| {_cell(reader_text(r['text'], r['chapter']))} | "
                         f"{_cell(reader_text(r['rule'], r['chapter']))} | {link} |")
        lines.append("")
    lines += [f"**Counterexamples built to explain an erratum.** {len(demos)} in this build, "
              "each beside its statement's own verdict above and linked to its entry on the "
              "{doc}`errata page <errata>`." if len(demos) else
              "**Counterexamples built to explain an erratum.** None in this build.", ""]
    if len(demos):
        lines += ["| statement as printed | the counterexample | erratum | where |",
                  "|---|---|---|---|"]
        for _, r in demos.iterrows():
            link = f"{_where(r['key'], r['anchor'])} ({r['chapter']})"
            lines.append(f"| {_cell(reader_text(r['text'], r['chapter']))} | "
                         f"{_cell(reader_text(r['rule'], r['chapter']))} | "
                         f"{{ref}}`{r['erratum']}` | {link} |")
        lines.append("")
    if questions is not None and len(questions):
        from robattr.report.verdicts import VERDICTS

        lines += [f"**The book's own questions.** {len(questions)} in this build: questions no "
                  "paper asks, attack preconditions, descriptive rows, and papers' claims "
                  "re-tested at the cross-paper matrix's common setting (each counted once, "
                  "in its chapter).", "",
                  "| question | verdict | counted in | where |", "|---|---|---|---|"]
        for _, r in questions.iterrows():
            of = str(r.get("of", "") or "")
            counted = f"{{doc}}`{of}`" if of else "—"
            lines.append(f"| {_cell(reader_text(r['text'], r['chapter']))} | "
                         f"{VERDICTS.get(r['verdict'], r['verdict'])} | {counted} | "
                         f"{_where(r['key'], r['anchor'])} ({r['chapter']}) |")
        lines.append("")
    return lines


def _figure(claims, path: Path) -> None:
    import seaborn as sns
    from matplotlib.figure import Figure
    from matplotlib.ticker import MaxNLocator

    from robattr.report.verdicts import VERDICTS
    from robattr.report.viz import VERDICT_COLORS, theme

    order = [c for c in dict.fromkeys(claims["chapter"])]
    with theme():
        fig = Figure(figsize=(1.3 * len(order) + 3, 3.2))
        ax = fig.subplots()
        sns.countplot(data=claims, x="chapter", hue="verdict", order=order,
                      hue_order=[v for v in VERDICTS if v in set(claims["verdict"])],
                      palette=VERDICT_COLORS, ax=ax)
        ax.set_xlabel("chapter")
        ax.set_ylabel("statements and claims")
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title("Verdicts per chapter in this build")
        ax.legend(title="verdict", loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
        fig.tight_layout()
        fig.savefig(path, dpi=110)


def write(root: Path, log=print) -> Path:
    """Write ``book/verdicts.md`` (and its figure) from the recorded claims."""
    from robattr.report.verdicts import VERDICTS

    book_dir = Path(root) / "book"
    everything = collect(book_dir)
    if not everything.empty:
        rank = {k: i for i, k in enumerate(book_order(root, everything["key"]))}
        everything = everything.sort_values("key", key=lambda c: c.map(rank), kind="stable")
    from robattr.report.papers import TALLIED

    claims = everything[everything["kind"].isin(TALLIED)]
    checks = everything[everything["kind"] == "check"]
    demos = everything[everything["kind"] == "demonstration"]
    questions = everything[everything["kind"] == "question"]
    others = {(r["key"], r["text"]) for _, r in everything.iterrows()
              if r["kind"] not in TALLIED}
    order = list(dict.fromkeys(everything["chapter"]))
    stamps = read_stamps(book_dir)
    refs = _reference_verdicts(Path(root))
    profiles = sorted({m.group(1) for s in everything["scale"]
                       for m in [re.search(r"profile (\S+)$", str(s))] if m})
    ran = (f"This build ran the `{profiles[0]}` profile and " if len(profiles) == 1 else
           f"This build ran the profiles {', '.join(f'`{p}`' for p in profiles)} and "
           if profiles else "This build ")
    lines = [
        "(verdicts)=",
        "# Verdicts",
        "",
        "Where each paper stands in this build: every claim of a paper that the notebooks",
        "test, as this build decided it, in the order of the book's chapters. A verdict is",
        "never written by hand: a rule in `robattr.report.verdicts` computes it from the run's",
        "numbers and their uncertainty (a bootstrap interval over images, a Wilson interval",
        "over cases, or a count of violations). *Inconclusive* means that the effect is",
        "within that noise. *Not comparable* means that the run cannot test the claim: its",
        "models break a hypothesis the statement is made under, a comparison of training",
        "methods rests on a model below its accuracy target, or the attack moved the maps no",
        "more than random noise of the same size does. A claim that combines cells sets such",
        "cells aside, counts them, and is judged on the others.",
        "",
        "Each claim takes one row: the claim, its verdict, what each kept reference run",
        "found, the scale it was decided at (the data, the trained models' test accuracy,",
        "the number of items) and where the claim is in its notebook. A verdict on 8×8",
        "digits is a verdict on 8×8 digits. Open *rule and numbers* under a claim for the",
        "rule and the numbers behind its verdict and the full scale (models and training",
        "budget), and *numbers* under a reference's verdict for what that run measured.",
        "",
        "Each paper gets two tallies, kept symmetric. Its *statements* (theorems, lemmas,",
        "propositions, corollaries, equations) are tested as printed and read *holds as",
        "printed* or *does not hold as printed*; one that fails counts as failing, beside its",
        "erratum. Its *empirical claims* (what it says its tables, figures and text show)",
        "are judged by the noise rules. Not counted: checks of our own arithmetic and of the",
        "book's corrected forms (a failure is a bug, and the build stops on it),",
        "counterexamples built to explain an erratum, and the book's own questions; all are",
        "listed at the end of the page.",
        "",
    ]
    if claims.empty:
        lines += ["No notebook of this build has recorded a claim yet.", ""]
    else:
        _figure(claims, book_dir / FIGURE)
        n_st = int((claims["kind"] == "statement").sum())
        emp = claims[claims["kind"] == "claim"]
        counts = emp["verdict"].value_counts()
        summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS if v in counts)
        lines += [f"{ran}recorded {n_st} statements and {len(emp)} empirical claims"
                  + (f" ({summary})" if summary else "") + ". Per paper:", ""]
        lines += tally_lines(tallies(everything), order)
        lines += [f"![Verdicts per chapter]({FIGURE})", ""]
        for chapter, group in claims.groupby("chapter", sort=False):
            lines += _chapter_lines(chapter, group, refs)
    lines += _against_section(claims, refs, others)
    lines += _apart_section(checks, demos, questions)
    if refs:
        lines += _reference_section(refs)
        lines += _changed_section(claims, refs)
    timed = {k: v.get("seconds") for k, v in stamps.items() if v.get("seconds") is not None}
    if timed:
        lines += ["## Run time of each notebook", "",
                  "Seconds of the last successful run of each page in this book folder, and "
                  "the profile it ran in.", "",
                  "| notebook | seconds | profile |", "|---|---|---|"]
        for key in sorted(timed):
            lines.append(f"| {{doc}}`{key}` | {timed[key]:.0f} | "
                         f"{stamps[key].get('profile', '')} |")
        lines.append("")
    counts = tallies(everything) if not everything.empty else {}
    kinds_of = {(r["key"], r["text"]): r["kind"] for _, r in everything.iterrows()}
    ref_counts = {name: tallies(*reference_tallied(ref, kinds_of)) for name, ref in refs.items()}
    if refs:
        lines += ["## Each paper's tallies in the kept references", "",
                  "A kept reference's verdicts, read with this build's kind of each line (a "
                  "reference made before statements were a kind of their own recorded them as "
                  "claims or demonstrations). A line of a notebook changed since the reference "
                  "counts only if this build still records it.", ""]
        for name in refs:
            lines += [f"**{name} reference.**", ""]
            lines += tally_lines(ref_counts[name], order or list(ref_counts[name]))
    from robattr.report.papers import CITATIONS

    untested = collect_untested(book_dir)
    for chapter in CITATIONS:
        chapter_tally(root, chapter, counts, refs, ref_counts, untested)
        chapter_findings(root, chapter, claims, refs)
    all_tallies(root, counts, refs, ref_counts)
    page = book_dir / PAGE
    page.write_text("\n".join(lines))
    log(f"verdicts page: {len(claims)} statements and claims")
    return page
