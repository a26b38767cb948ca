"""The book's tables: a DataFrame shown whole, as HTML, with "—" where a value is missing
and the reason for each "—" under the table (:func:`show_table`), and the notebook-wide
display settings that keep pandas from cutting a table (:func:`show_whole_tables`).

A kept reference run's column (``medium ref (mnist, 1a2b3c4, stale)``, as
:func:`robattr.report.references.label` names it) is headed ``medium ref`` in the HTML, and
what it is (profile, dataset, commit, whether the notebook changed since) goes into a note
under the table: a commit hash is provenance, not a column name.
:mod:`robattr.report.viz` re-exports every name, so notebooks write ``viz.show_table``."""
from __future__ import annotations

import html as _html
import re

__all__ = ["MISSING", "MISSING_NOTE", "NOT_BUILT", "NOT_IN_PAPER", "NOT_RUN", "table_html",
           "show_table", "show_whole_tables", "reference_note", "reference_text"]


#: what a table shows where it has no value, and the note printed under such a table
MISSING = "—"
MISSING_NOTE = "— : no value for this cell (see the text above the table)."

#: the reasons a book table gives for a "—" (:func:`show_table`); free text is allowed too
NOT_BUILT = "not built: a method or baseline robattr does not implement"
NOT_IN_PAPER = "not in the paper: the paper prints no number here"
NOT_RUN = "not run at this tier: the profile leaves it out (the paper profile runs it)"


#: a reference column's label with its provenance: ``<profile> ref (<what>)``
_REFERENCE = re.compile(r"(\S+) ref \(([^()]*)\)")


def _short(label):
    """A label with each reference's provenance cut: ``deletion (medium ref (mnist, 1a2b3c4))``
    -> ``deletion (medium ref)``; a MultiIndex tuple part by part; other labels unchanged."""
    if isinstance(label, tuple):
        return tuple(_short(part) for part in label)
    return _REFERENCE.sub(r"\1 ref", label) if isinstance(label, str) else label


def _provenance(df) -> tuple[object, list[str]]:
    """``df`` with its reference labels shortened (:func:`_short`, rows and columns, every
    level) and one note per reference: ``medium ref: a kept run of the medium profile
    (mnist; commit 1a2b3c4; made before this notebook last changed)``, as
    :func:`reference_note` words it."""
    found: dict[str, str] = {}
    for axis in (df.columns, df.index):
        for label in axis.to_flat_index():
            for part in label if isinstance(label, tuple) else (label,):
                if isinstance(part, str):
                    for m in _REFERENCE.finditer(part):
                        found.setdefault(m.group(1), m.group(2))
    if not found:
        return df, []
    notes = [f"{profile} ref: {reference_text(profile, inner)}" for profile, inner in found.items()]
    renamed = df.rename(columns=_short, index=_short)
    return renamed, notes


def reference_note(label: str) -> str:
    """A reference column's label in a note: ``medium ref (mnist, 1a2b3c4, stale)`` ->
    ``medium ref: a kept run of the medium profile (mnist; commit 1a2b3c4; made before this
    notebook last changed)`` (:func:`reference_text`)."""
    m = _REFERENCE.search(label)
    if m is None:
        profile = label.partition(" ref")[0]
        return f"{profile} ref: {reference_text(profile)}"
    return f"{m.group(1)} ref: {reference_text(m.group(1), m.group(2))}"


def reference_text(profile: str, inner: str = "") -> str:
    """What a kept reference run is, in words, from its label's parenthesis (``"mnist,
    1a2b3c4, stale"``): ``a kept run of the medium profile (mnist; commit 1a2b3c4; made
    before this notebook last changed)``."""
    bits = []
    for bit in (b.strip() for b in inner.split(",") if b.strip()):
        if bit == "stale":
            bits.append("made before this notebook last changed")
        elif re.fullmatch(r"[0-9a-f]{7}(\+dirty)?", bit):
            bits.append(f"commit {bit}")
        else:
            bits.append(bit)
    return f"a kept run of the {profile} profile" + (f" ({'; '.join(bits)})" if bits else "")


def _meaningful_index(df) -> bool:
    """Whether a table's row labels say something: pandas' default 0, 1, 2, ... (an unnamed
    RangeIndex from 0) is left out of the page, where it would read as a column of data."""
    import pandas as pd

    idx = df.index
    return not (isinstance(idx, pd.RangeIndex) and idx.name is None and idx.start == 0
                and idx.step == 1)


def _notes_html(lines: list[str], css: str) -> str:
    return f'<p class="{css}">' + "<br>".join(lines) + "</p>" if lines else ""


def table_html(df) -> str:
    """A DataFrame as the book shows it: every row and column, and "—" (:data:`MISSING`)
    instead of NaN, with one line under the table saying what "—" means, and a kept
    reference run's provenance in a note, not in its column's name. pandas' default row
    numbers (0, 1, 2, ...) are left out."""
    df, refs = _provenance(df)
    html = df.to_html(na_rep=MISSING, notebook=True, max_rows=None, max_cols=None,
                      border=0, index=_meaningful_index(df))
    has_missing = bool(df.isna().to_numpy().any()) if df.size else False
    return (html + (f'<p class="robattr-missing">{MISSING_NOTE}</p>' if has_missing else "")
            + _notes_html([_html.escape(n) for n in refs], "robattr-provenance"))


def _label(label) -> str:
    """A row or column label as a reader reads it: a MultiIndex tuple joined by " · "."""
    return " · ".join(map(str, label)) if isinstance(label, tuple) else str(label)


def _missing_reasons(df, why) -> dict[str, list[str]]:
    """For each reason, the labels of the rows or columns whose "—" it explains; raises
    if a missing cell has no reason (a reader should never meet an unexplained "—")."""
    missing = df.isna()
    if isinstance(why, str):
        return {why: []} if missing.to_numpy().any() else {}
    why = dict(why or {})
    unknown = [k for k in why if k not in df.columns and k not in df.index]
    if unknown:
        raise ValueError(f"show_table: why= names no row or column of the table: {unknown}")
    used: dict[str, list[str]] = {}
    unexplained = []
    for row in df.index:
        for col in df.columns:
            if not missing.at[row, col]:
                continue
            label = col if col in why else row if row in why else None
            if label is None:
                unexplained.append(f"({row}, {col})")
                continue
            names = used.setdefault(why[label], [])
            if _label(label) not in names:
                names.append(_label(label))
    if unexplained:
        raise ValueError("show_table: no reason given for the missing cells "
                         + ", ".join(unexplained[:8]) + (" ..." if len(unexplained) > 8 else "")
                         + "; pass why={row or column: reason} (viz.NOT_BUILT, NOT_IN_PAPER, "
                           "NOT_RUN or your own words)")
    return used


def show_table(df, *, why=None, caption: str | None = None, max_columns: int = 12):
    """Show a table whole, as HTML, with "—" where a value is missing and a note under it
    saying why each "—" is there.

    ``why`` is one reason for every missing cell (a string) or ``{row or column label:
    reason}``; a missing cell is explained by its column's entry, else its row's. A missing
    cell without a reason raises ``ValueError``: the book never prints an unexplained "—".
    Use :data:`NOT_BUILT`, :data:`NOT_IN_PAPER`, :data:`NOT_RUN` or your own words. A table
    wider than ``max_columns`` is shown transposed when that makes it narrower, so it never
    needs a sideways scroll that hides the paper's numbers beside ours. Returns the
    ``IPython.display.HTML`` object it displayed (or the HTML string outside IPython).
    A kept reference run's column is headed ``medium ref``, its provenance in a note."""
    import pandas as pd

    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"show_table takes a pandas DataFrame, got {type(df).__name__}")
    if max_columns < 1:
        raise ValueError(f"max_columns must be >= 1, got {max_columns}")
    reasons = _missing_reasons(df, why)
    df, refs = _provenance(df)
    shown = df.T if df.shape[1] > max_columns and df.shape[0] < df.shape[1] else df
    body = shown.to_html(na_rep=MISSING, notebook=True, max_rows=None, max_cols=None, border=0,
                         index=_meaningful_index(shown))
    notes = []
    for reason, labels in reasons.items():
        where = f" ({', '.join(_short(label) for label in labels)})" if labels else ""
        notes.append(f"{MISSING}{_html.escape(where)}: {_html.escape(reason)}")
    out = (f"<p><b>{_html.escape(caption)}</b></p>" if caption else "") + body
    if notes:
        out += '<p class="robattr-missing">' + "<br>".join(notes) + "</p>"
    out += _notes_html([_html.escape(n) for n in refs], "robattr-provenance")
    try:
        from IPython.display import HTML, display
    except ImportError:
        return out
    obj = HTML(out)
    display(obj)
    return obj


def show_whole_tables() -> None:
    """Show every row and column of a table in a notebook: pandas' default cuts a frame at
    20 columns and 60 rows with a "…", which in the book hides exactly the paper's numbers
    beside ours. Wide tables scroll sideways in the HTML page instead. In IPython, a
    DataFrame is then shown by :func:`table_html` ("—" where a value is missing)."""
    import pandas as pd

    pd.set_option("display.max_columns", None)
    pd.set_option("display.max_rows", 500)
    pd.set_option("display.width", None)
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["text/html"].for_type(pd.DataFrame, table_html)
