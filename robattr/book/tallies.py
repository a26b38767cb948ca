"""Each paper's two tallies, from the recorded lines of a build or a kept reference:
*statements* tested as printed (holds / does not hold as printed / other) and *empirical
claims* (the five verdicts), with checks, demonstrations and the book's own questions
counted apart and never credited to a paper. :mod:`robattr.book.verdicts_page` shows them
on the Verdicts page, and writes ``book/<chapter>/tally.md`` for each chapter's landing
page and ``book/crosspaper/tally.md`` (every paper) for the cross-paper page."""
from __future__ import annotations

from pathlib import Path

__all__ = ["TALLY_COLUMNS", "TALLY_ROWS", "DECIDED", "decided", "by_category", "tallies",
           "tally_lines",
           "chapter_tally", "all_tallies", "recorded", "collect_untested", "reference_tallied"]


#: the columns of a paper's two tallies: statements as printed, then empirical claims
TALLY_COLUMNS = (("statement", "holds"), ("statement", "does not hold"), ("statement", "other"),
                 ("claim", "holds"), ("claim", "holds partly"), ("claim", "does not hold"),
                 ("claim", "inconclusive"), ("claim", "not comparable"))
#: The reader's name of each of :data:`TALLY_COLUMNS`, a row of the tables (transposed:
#: a tally's categories run down the page, its runs or papers across, so it fits the page).
TALLY_ROWS = ("statements: hold as printed", "statements: do not hold as printed",
              "statements: other", "empirical claims: hold", "empirical claims: hold partly",
              "empirical claims: do not hold", "empirical claims: inconclusive",
              "empirical claims: not comparable")


#: the verdicts of an empirical claim that decide it (either way)
DECIDED = ("holds", "holds partly", "does not hold")


def decided(*rows: dict) -> tuple[int, int]:
    """``(decided, claims)``: how many of the empirical claims counted in ``rows`` (tallies
    of :func:`tallies`) got a verdict that decides them, either way (:data:`DECIDED`), and
    how many there are."""
    claims = sum(n for row in rows for (kind, _), n in row.items() if kind == "claim")
    done = sum(row.get(("claim", v), 0) for row in rows for v in DECIDED)
    return done, claims


def _share(done: int, claims: int) -> str:
    return f"{done} of {claims}" + (f" ({100 * done / claims:.0f} %)" if claims else "")


def by_category(columns: list[tuple[str, dict]], corner: str = "") -> list[str]:
    """A Markdown table of tallies, one column per ``(name, counts)`` of ``columns`` and one
    row per category of :data:`TALLY_ROWS`, then the empirical claims decided either way
    (:func:`decided`)."""
    lines = [f"| {corner} | " + " | ".join(name for name, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for label, cat in zip(TALLY_ROWS, TALLY_COLUMNS):
        lines.append(f"| {label} | " + " | ".join(str(row[cat]) for _, row in columns) + " |")
    lines.append("| empirical claims: decided | "
                 + " | ".join(_share(*decided(row)) for _, row in columns) + " |")
    return lines


def tallies(records, kinds_of: dict | None = None) -> dict[str, dict[tuple[str, str], int]]:
    """Per chapter, the two tallies of its paper: ``{chapter: {(kind, verdict): count}}``
    over :data:`TALLY_COLUMNS`, plus ``("check", "")``, ``("demonstration", "")`` and
    ``("question", "")`` counted apart. A statement's verdict other than holds / does not
    hold (inconclusive, not comparable) counts as ``"other"``. ``records``: a frame of
    recorded lines (``chapter``, ``kind``, ``verdict``; :func:`collect`) or
    ``{(key, text): verdict}`` with ``kinds_of`` mapping ``(key, text)`` to its kind in this
    build (a kept reference read through this build's kinds; lines this build does not
    record keep ``"claim"``)."""
    out: dict[str, dict[tuple[str, str], int]] = {}

    def add(chapter, kind, verdict):
        row = out.setdefault(chapter, {c: 0 for c in TALLY_COLUMNS})
        if kind == "statement" and verdict not in ("holds", "does not hold"):
            verdict = "other"
        if kind not in ("statement", "claim"):
            verdict = ""
        row[(kind, verdict)] = row.get((kind, verdict), 0) + 1

    if isinstance(records, dict):
        for (key, text), verdict in records.items():
            add(key.split("/")[0], (kinds_of or {}).get((key, text), "claim"), verdict)
    else:
        for _, r in records.iterrows():
            add(r["chapter"], r["kind"], r["verdict"])
    return out


def tally_lines(counts: dict[str, dict[tuple[str, str], int]], chapters,
                label: str = "paper") -> list[str]:
    """The two tallies as one Markdown table, a column per chapter of ``chapters`` that has
    records (the papers' chapters; the matrix and the examples count no paper's claims), a
    row per category, and a last row for the lines not counted."""
    from robattr.report.papers import CITATIONS

    columns = [(chapter, counts[chapter]) for chapter in chapters
               if chapter in counts and chapter in CITATIONS]
    lines = by_category(columns, corner=label)
    apart = [sum(row.get((k, ""), 0) for k in ("check", "demonstration", "question"))
             for _, row in columns]
    lines.append("| checks, demonstrations, questions (not counted) | "
                 + " | ".join(map(str, apart)) + " |")
    if len(columns) > 1:
        lines += ["", f"Empirical claims decided (they hold, hold partly or do not hold), over "
                  f"these papers: "
                  f"{_share(*decided(*(row for _, row in columns)))}."]
    return lines + [""]


def recorded(book_dir: Path, metric: str, cols: list[str]):
    """The rows of ``metric`` recorded under ``book_dir`` (every ``*.results.csv`` but the
    HTML build's), with the notebook ``key`` and ``chapter`` and the label columns ``cols``
    (empty where a row has none), in notebook order."""
    import pandas as pd

    from robattr.report import results

    frames = []
    for csv in sorted(Path(book_dir).rglob("*.results.csv")):
        if "_build" in csv.parts:
            continue
        df = results.read(csv)
        if "metric" not in df or not (df["metric"] == metric).any():
            continue
        df = df[df["metric"] == metric].copy()
        key = csv.relative_to(book_dir).as_posix().removesuffix(".results.csv")
        df["key"], df["chapter"] = key, key.split("/")[0]
        frames.append(df)
    cols = ["chapter", "key", *cols]
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    for c in cols:
        if c not in out:
            out[c] = ""
    return out[cols].fillna("")


def collect_untested(book_dir: Path):
    """Every claim a notebook of this build says it does not test
    (:func:`robattr.report.papers.untested`): ``chapter``, ``key``, ``text``, ``why``, ``place``."""
    return recorded(book_dir, "untested", ["text", "why", "place"]).drop_duplicates(["key", "text"])


def reference_tallied(ref: dict, kinds_of: dict) -> tuple[dict, dict]:
    """A kept reference's tallied lines and their kinds: a line this build records takes
    this build's kind; a line of a notebook unchanged since the reference (fresh) keeps its
    recorded kind; a line of a changed (stale) notebook that this build no longer records is
    left out, so that a claim the notebook dropped or rewrote is not credited."""
    from robattr.report.papers import TALLIED

    lines, kinds = {}, {}
    for k, verdict in ref["claims"].items():
        own = ref.get("kinds", {}).get(k, "claim")
        kind = kinds_of.get(k) or (("claim" if own in ("", "nan") else own)
                                   if ref["status"].get(k[0]) == "fresh" else None)
        if kind in TALLIED:
            lines[k], kinds[k] = verdict, kind
    return lines, kinds


def _stale(ref: dict, chapter: str) -> str:
    """" (stale)" when a notebook of ``chapter`` changed after the reference was made."""
    keys = [k for k, v in ref.get("status", {}).items() if k.split("/")[0] == chapter]
    return " (stale)" if any(ref["status"][k] == "stale" for k in keys) else ""


def chapter_tally(root: Path, chapter: str, counts: dict, refs: dict[str, dict],
                  ref_counts: dict[str, dict], untested=None) -> None:
    """``book/<chapter>/tally.md``: the paper's two tallies in this build and in each kept
    reference, included at the top of the chapter's landing page."""
    path = Path(root) / "book" / chapter / "tally.md"
    if not path.parent.is_dir():
        return
    runs = [("this build", counts.get(chapter))] + [
        (f"{name} reference{_stale(ref, chapter)}", ref_counts[name].get(chapter))
        for name, ref in refs.items()]
    runs = [(name, row) for name, row in runs if row]
    lines = by_category(runs) if runs else [
        "No run of this build has recorded this chapter's statements or claims yet."]
    text = ("Each statement is tested as printed; each empirical claim is judged by the noise "
            "rules at the scale its line shows; *decided* counts those that hold, hold partly "
            "or do not hold. Checks of the book's own arithmetic, "
            "demonstrations and the book's own questions are not counted. The "
            "{doc}`Verdicts page <../verdicts>` lists every line.")
    mine = untested[untested["chapter"] == chapter] if untested is not None else []
    if len(mine):
        from robattr.report.reader import reader_text

        lines += ["", "**Not tested by this build**, so the tally is not coverage: the claims the "
                  "notebooks name as untested, and why.", ""]
        for _, r in mine.iterrows():
            place = f" ({r['place']})" if r["place"] else ""
            lines.append(f"- {reader_text(r['text'].rstrip('.'), chapter)}{place}: {reader_text(r['why'], chapter)} "
                         f"({{doc}}`{r['key'].split('/')[-1]} <{r['key'].split('/')[-1]}>`)")
    path.write_text("\n".join([text, "", *lines, ""]))


def all_tallies(root: Path, counts: dict, refs: dict[str, dict], ref_counts: dict) -> None:
    """``book/crosspaper/tally.md``: every paper's two tallies, in this build and in each
    kept reference (the cross-paper page includes it)."""
    from robattr.report.papers import CITATIONS

    path = Path(root) / "book" / "crosspaper" / "tally.md"
    if not path.parent.is_dir():
        return
    lines = ["**This build.**", "", *tally_lines(counts, list(CITATIONS))]
    for name in refs:
        stale = [c for c in CITATIONS if _stale(refs[name], c)]
        note = (f" Stale for {', '.join(stale)}: made before those notebooks changed."
                if stale else "")
        lines += [f"**The {name} reference.**{note}", "",
                  *tally_lines(ref_counts[name], list(CITATIONS))]
    path.write_text("\n".join(lines))
