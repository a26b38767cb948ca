"""How one recorded line reads on a page: its verdict word and mark, the scale in a few
words, a reference's verdict on it, a table cell with details a click away, a link to it
in its notebook. Shared by the Verdicts page (:mod:`robattr.book.verdicts_page`) and the
chapters' "What we found" boxes (:mod:`robattr.book.findings`)."""
from __future__ import annotations

import re

__all__ = ["COLOURS", "coloured", "cell", "details", "mark", "verdict_word", "short_scale", "scale_parts",
           "split_top", "reference_parts", "where", "names_place"]


def cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def split_top(text: str) -> list[str]:
    """``text`` split at the commas that are outside brackets."""
    parts, depth, cur = [], 0, ""
    for k, ch in enumerate(text):
        depth += ch in "([{"
        depth -= ch in ")]}"
        if ch == "," and depth == 0 and text[k + 1:k + 2] == " ":
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [p for p in parts + [cur.strip()] if p]


def scale_parts(scale: str) -> list[str]:
    """The parts of a scale line without the profile (the page says which profile ran)."""
    return [p for p in split_top(str(scale))
            if not p.startswith("profile ") and p != "run outside the pipeline"]


def short_scale(scale: str) -> str:
    """The scale in a few words: the data, the trained models' test accuracy and the
    number of items (the model and its training budget are with the rule)."""
    parts = scale_parts(scale)
    if not parts:
        return ""
    head = parts[0]
    if not re.fullmatch(r"[\w-]+ \d+×\d+", head) and len(head) > 40:
        head = re.split(r" \(|:", head)[0]
    out = [head]
    for p in parts[1:]:
        m = re.match(r"test accuracy ([\d.–]+ %)", p)
        if m:
            out.append(f"test accuracy {m.group(1)}")
    if len(parts) > 1 and re.match(r"\d", parts[-1]):
        out.append(parts[-1])
    return " · ".join(out)


def details(head: str, body: str, summary: str = "numbers") -> str:
    """A table cell with ``body`` a click away (an HTML details element on one line; its
    text is still Markdown, so ``$...$`` is typeset)."""
    if not body:
        return head
    return (f"{head} <details><summary>{summary}</summary>"
            f"{cell(body).replace('<', '&lt;')}</details>").strip()


def where(key: str, anchor: str) -> str:
    """A short link to a claim in its notebook (the notebook's name, which may break at
    "_"; the chapter is the section's)."""
    name = key.split("/")[-1].replace("_", "_<wbr>")
    return f'<a href="{key}.html#{anchor}">{name}</a>'


def verdict_word(kind: str, verdict: str) -> str:
    from robattr.report.papers import STATEMENT_WORDS
    from robattr.report.verdicts import VERDICTS

    if kind == "statement" and verdict in STATEMENT_WORDS:
        return STATEMENT_WORDS[verdict]
    return VERDICTS.get(verdict, verdict)


def names_place(text: str, place: str) -> bool:
    """Whether a claim's text already opens with its place ("Prop 1: ..." for "Prop. 1")."""
    def norm(t: str) -> str:
        return re.sub(r"[.\s]", "", t).lower()
    head = norm(" ".join(place.replace(",", " ").split()[:2]))
    return bool(head) and head in norm(text[:40])


def mark(word: str, kind: str = "claim") -> str:
    """A verdict word as the page shows it (with its mark; a statement's "as printed"),
    keeping a " (stale)"."""
    verdict = word.removesuffix(" (stale)")
    if verdict in ("no run", "not tested"):
        return word
    return verdict_word(kind, verdict) + word[len(verdict):]


def reference_parts(ref: dict, key: str, text: str, scale: str = "") -> tuple[str, str]:
    """A reference's verdict word on a claim and what lies behind it (its rule and numbers
    and its own scale, or that it ran at this build's settings)."""
    from robattr.report.papers import _same_scale

    state = ref["status"].get(key, "missing")
    if state == "missing":
        return "no run", ""
    verdict = ref["claims"].get((key, text))
    if not verdict:
        return "not tested", ""
    word = verdict + (" (stale)" if state == "stale" else "")
    rule, where = ref.get("detail", {}).get((key, text), ("", ""))
    if where and scale and _same_scale(where, scale):
        return word, "same settings as this build: the same evidence, not a corroboration"
    return word, "; ".join(p for p in (rule, where) if p)



#: the colour of each verdict's mark and word (the word carries the meaning)
COLOURS = {"holds": "#1a7f37", "holds partly": "#9a6700", "does not hold": "#cf222e",
           "inconclusive": "#57606a", "not comparable": "#57606a"}


def coloured(kind: str, verdict: str) -> str:
    """A verdict's mark and word in its colour (an HTML span), so that it survives print and
    colour blindness by its word."""
    word = verdict_word(kind, verdict)
    colour = COLOURS.get(verdict)
    return f'<span style="color:{colour}">{word}</span>' if colour else word
