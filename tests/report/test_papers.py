"""The papers' tables, the compare/claim helpers, recorded results and chapter profiles."""
from __future__ import annotations

import filecmp
import math
from pathlib import Path

import pandas as pd
import pytest

from robattr.report import papers, results
from robattr.book import profiles

SHARED = Path(__file__).resolve().parents[3] / "shared" / "papers" / "tables"


@pytest.mark.skipif(not SHARED.is_dir(), reason="shared/papers/tables is not next to the checkout")
def test_vendored_tables_equal_the_shared_ones():
    shared = sorted(p.name for p in SHARED.iterdir() if p.suffix in (".csv", ".md"))
    ours = sorted(p.name for p in papers.TABLES_DIR.iterdir() if p.suffix in (".csv", ".md"))
    assert ours == shared
    _, mismatch, errors = filecmp.cmpfiles(SHARED, papers.TABLES_DIR, shared, shallow=False)
    assert mismatch == [] and errors == []


def test_every_table_parses_with_values_or_notes():
    names = papers.tables()
    assert len(names) == 24
    for name in names:
        df = papers.table(name)
        assert {"value", "printed", "note"} <= set(df.columns)
        empty = df["value"].isna()
        assert (df.loc[empty, "note"] != "").all(), name          # empty cells carry a note
        assert (~empty).any(), f"{name}: no printed value at all"
        assert (df.loc[~empty, "printed"] != "").all(), name


def test_table_keeps_the_printed_string():
    df = papers.table("wangkong2025_table5")
    row = df[(df["T"] == "0.9") & (df["model"] == "Standard") & (df["r"] == "2.0")].iloc[0]
    assert row["printed"] == "0.2164" and row["value"] == pytest.approx(0.2164)


def test_unknown_table_names_the_known_ones():
    with pytest.raises(KeyError, match="wang2020_table2"):
        papers.table("wang2020_table99")


def test_compare_aligns_on_keys_and_keeps_unmatched_rows():
    ours = pd.DataFrame({"beta": ["0.3", "0.5", "0.6"], "value": [0.1, 0.2, 0.3]})
    out = papers.compare(ours, "wang2020_table4", on=["beta"])
    paper = papers.table("wang2020_table4").set_index("beta")["value"]
    got = out.set_index("beta")
    assert got.loc["0.3", "ours"] == 0.1 and got.loc["0.3", "paper"] == paper["0.3"]
    assert math.isnan(got.loc["0.6", "paper"])                  # ours only
    assert math.isnan(got.loc["0.9", "ours"])                   # paper only


def test_compare_refuses_an_ambiguous_key():
    ours = pd.DataFrame({"r": ["0.5"], "value": [0.0]})
    with pytest.raises(ValueError, match="does not identify one row"):
        papers.compare(ours, "wangkong2025_table5", on=["r"])
    out = papers.compare(ours, "wangkong2025_table5", on=["r"],
                         where={"T": "0.9", "model": "Standard", "dataset": "MNIST"})
    assert out.loc[out["r"] == "0.5", "paper"].item() == pytest.approx(0.0389)


def test_claim_renders_a_computed_verdict_and_refuses_a_literal_one():
    from robattr.report import verdicts

    verdicts.set_scale("digits", "cnn", 8)
    v = verdicts.gap([0.5, 0.6, 0.7, 0.55], [0.1, 0.2, 0.15, 0.1], what="SG − SM")
    md = papers.claim("SG is more robust than SM", v, "AUC 1.2 vs 0.4.")
    assert "holds" in md.data and "AUC 1.2" in md.data and "SG − SM" in md.data
    assert "digits 8×8, cnn, 8 images" in md.data
    for literal in ("holds", "does not hold"):
        with pytest.raises(TypeError, match="must come from a rule"):
            papers.claim("x", literal)


def test_record_appends_rows_to_the_results_file(tmp_path, monkeypatch):
    path = tmp_path / "nb.results.csv"
    monkeypatch.setenv(results.ENV, str(path))
    assert results.record("acc", 0.5, model="ce", eps=0.1) == 0.5
    results.record("n", 3)
    df = results.read(path)
    assert list(df["metric"]) == ["acc", "n"]
    assert df.loc[0, "model"] == "ce" and df.loc[0, "eps"] == 0.1 and df.loc[1, "value"] == 3
    with pytest.raises(ValueError, match="must be a number"):
        results.record("bad", "high")
    with pytest.raises(ValueError, match="label"):
        results.record("bad", 1.0, model=None)


def test_chapter_profile_files_are_merged_and_checked(tmp_path, monkeypatch):
    smoke = profiles.load_profile("smoke")["notebooks"]
    assert "wangkong2025/montecarlo" in smoke and "example/digits_saliency" in smoke
    fake = tmp_path / "profiles"
    (fake / "chapters").mkdir(parents=True)
    (fake / "smoke.yml").write_text("notebooks: {}\n")
    (fake / "chapters" / "ch.yml").write_text("smoke:\n  other/nb: {a: 1}\n")
    monkeypatch.setattr(profiles, "_PROFILE_DIR", fake)
    with pytest.raises(profiles.ParameterError, match="not in chapter 'ch'"):
        profiles.load_profile("smoke")
    (fake / "chapters" / "ch.yml").write_text("smook:\n  ch/nb: {a: 1}\n")
    with pytest.raises(profiles.ParameterError, match="unknown profiles"):
        profiles.load_profile("smoke")
    (fake / "chapters" / "ch.yml").write_text("smoke:\n  ch/nb: {a: 1}\n")
    assert profiles.load_profile("smoke")["notebooks"] == {"ch/nb": {"a": 1}}


def test_every_chapter_page_links_its_paper():
    root = Path(__file__).resolve().parents[2]
    assert set(papers.LINKS) == set(papers.CITATIONS)
    for key, url in papers.LINKS.items():
        assert url in (root / "book" / key / "index.md").read_text(encoding="utf-8"), key


def test_the_glossary_defines_the_books_terms_once_and_is_in_the_book():
    import re

    root = Path(__file__).resolve().parents[2]
    text = (root / "book" / "glossary.md").read_text(encoding="utf-8")
    body = text.split("```{glossary}", 1)[1].split("```", 1)[0]
    terms = re.findall(r"^(\S.*)$", body, flags=re.M)
    assert len(terms) == len(set(terms)) >= 30
    for term in ("top-k intersection", "RPS", "Insertion", "Adv-Insertion", "T_e", "T'_e",
                 "verdict", "statement", "empirical claim"):
        assert term in terms, term
    toc = (root / "_toc.yml").read_text(encoding="utf-8")
    assert "file: book/glossary" in toc and "file: book/setup" in toc
