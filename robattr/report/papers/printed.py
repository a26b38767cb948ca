"""The papers' printed tables, as transcribed in ``tables/`` (one row per printed number;
``tables/README.md`` describes the format and every uncertain cell). Kept apart from
:mod:`robattr.report.papers` so that modules the verdicts need (:mod:`robattr.targets`) can read
a printed number without importing the verdicts' own consumers."""
from __future__ import annotations

from pathlib import Path

__all__ = ["TABLES_DIR", "tables", "table"]

TABLES_DIR = Path(__file__).parent / "tables"


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
