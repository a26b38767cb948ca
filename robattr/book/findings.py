""""What we found": the box that opens each chapter's landing page, written by the build
as ``book/<chapter>/findings.md`` from the recorded lines (:mod:`robattr.book.verdicts_page`
calls :func:`chapter_findings`).

One row per statement and empirical claim of the paper: the claim, its verdict at the
strongest scale on record, that scale in a few words, and a link to the cell that decides
it. The strongest scale is a kept reference of the ``paper`` profile, else one of the
``medium`` profile (the papers' own data), else this build; a reference is used only where
it recorded the line, and is marked *stale* where its notebook changed after it was made.
The verdict shows a mark and a word, in colour, so that it survives print and colour
blindness; the rule and the numbers, and the other runs' verdicts, are a click away.
"""
from __future__ import annotations

from pathlib import Path

from robattr.book import lines as show
from robattr.book.lines import COLOURS

__all__ = ["TIERS", "COLOURS", "strongest", "finding_rows", "chapter_findings"]

#: kept references, strongest first: the papers' scale, then the papers' data at CPU size
TIERS = ("paper", "medium")

def strongest(refs: dict[str, dict], key: str, text: str, build_verdict: str,
              build_scale: str, build_rule: str = "") -> tuple[str, str, str, str]:
    """``(run, verdict, scale, rule)`` of a line at the strongest scale on record: the first
    reference of :data:`TIERS` that recorded it (``run`` is e.g. ``"medium reference
    (stale)"``), else this build."""
    for name in TIERS:
        ref = refs.get(name)
        if not ref:
            continue
        state = ref["status"].get(key, "missing")
        verdict = ref["claims"].get((key, text))
        if state == "missing" or not verdict:
            continue
        rule, scale = ref.get("detail", {}).get((key, text), ("", ""))
        run = f"{name} reference" + (" (stale)" if state == "stale" else "")
        return run, verdict, scale, rule
    return "this build", build_verdict, build_scale, build_rule


def finding_rows(chapter: str, group, refs: dict[str, dict]) -> list[str]:
    """The box's table for the recorded statements and claims of ``chapter`` (``group``:
    rows of :func:`robattr.book.verdicts_page.collect`)."""
    from robattr.report.reader import reader_text

    lines = ["| claim | verdict | at | cell |", "|---|---|---|---|"]
    for _, r in group.iterrows():
        run, verdict, scale, rule = strongest(refs, r["key"], r["text"], r["verdict"],
                                              r["scale"], r["rule"])
        place = str(r.get("place", "") or "").strip()
        text = reader_text(r["text"], chapter) + (
            f" ({place})" if place and not show.names_place(str(r["text"]), place) else "")
        others = [f"this build: {show.mark(r['verdict'], r['kind'])}"] if run != "this build" else []
        others += [f"{name} reference: {show.mark(word, r['kind'])}"
                   for name, ref in refs.items() if not run.startswith(f"{name} ")
                   for word, _ in [show.reference_parts(ref, r["key"], r["text"], r["scale"])]]
        body = "; ".join(p for p in (reader_text(rule, chapter), ". ".join(others)) if p)
        at = f"{run}: {reader_text(show.short_scale(scale), chapter)}".rstrip(": ")
        lines.append(f"| {show.details(show.cell(text), body, 'rule, numbers, other runs')} | "
                     f"{show.coloured(r['kind'], verdict)} | {show.cell(at)} | "
                     f"{show.where(r['key'], r['anchor'])} |")
    return lines + [""]


def chapter_findings(root: Path, chapter: str, claims, refs: dict[str, dict]) -> None:
    """``book/<chapter>/findings.md``: the chapter's "What we found" box (statements as
    printed, then empirical claims), or a line saying that nothing is recorded yet."""
    path = Path(root) / "book" / chapter / "findings.md"
    if not path.parent.is_dir():
        return
    mine = claims[claims["chapter"] == chapter] if len(claims) else claims
    intro = ("Each row is one statement or empirical claim of the paper, with its verdict at "
             "the strongest scale on record: a kept run on the papers' data where there is "
             "one, else this build (a verdict on 8×8 digits is a verdict on 8×8 digits). "
             "Open a claim for the rule, the numbers and the other runs' verdicts; the last "
             "column links to the cell that decides it.")
    lines = [intro, ""]
    if not len(mine):
        lines.append("No run of this build has recorded this chapter's statements or claims "
                     "yet.")
    for kind, head in (("statement", "Statements, tested as printed"),
                       ("claim", "Empirical claims")):
        group = mine[mine["kind"] == kind] if len(mine) else mine
        if len(group):
            lines += [f"**{head}** ({len(group)}).", "", *finding_rows(chapter, group, refs)]
    path.write_text("\n".join(lines) + "\n")
