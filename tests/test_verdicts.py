"""Verdict rules reach each of their outcomes; claims are recorded with their scale; the
Verdicts page lists them; no notebook writes a verdict by hand."""
from __future__ import annotations

import ast
import json
from pathlib import Path
from types import SimpleNamespace

import nbformat
import numpy as np
import pytest

from robattr import papers, results, verdicts
from robattr.verdicts import VERDICTS, Verdict

ROOT = Path(__file__).resolve().parents[1]


def test_gap_reaches_every_outcome():
    rng = np.random.default_rng(0)
    base = rng.normal(size=40)
    assert verdicts.gap(base + 1.0, base).verdict == "holds"
    assert verdicts.gap(base - 1.0, base).verdict == "does not hold"
    noise = rng.normal(scale=1.0, size=40)
    assert verdicts.gap(base + noise * 0.0 + rng.normal(scale=1, size=40) * 0.01 - 0.0, base
                        + rng.normal(scale=1, size=40) * 0.01).verdict == "inconclusive"
    # lower is better flips the orientation; min_effect demands more than a sign
    assert verdicts.gap(base - 1.0, base, higher_is_better=False).verdict == "holds"
    assert verdicts.gap(base + 0.05, base, min_effect=0.1).verdict == "inconclusive"
    # one pair: no interval, so no decision
    v = verdicts.gap([2.0], [1.0])
    assert v.verdict == "inconclusive" and "single pair" in v.rule
    assert "bootstrap interval" in verdicts.gap(base + 1, base).rule


def test_gap_refuses_what_it_cannot_judge():
    with pytest.raises(ValueError, match="empty"):
        verdicts.gap([], [])
    with pytest.raises(ValueError, match="paired"):
        verdicts.gap([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="non-finite"):
        verdicts.gap([1.0, float("nan")], [0.0, 0.0])


def test_combine_reaches_every_outcome():
    h, p, f, i = (Verdict(v, "") for v in ("holds", "holds partly", "does not hold", "inconclusive"))
    assert verdicts.combine([h, h, h]).verdict == "holds"
    assert verdicts.combine([h, h, i]).verdict == "holds partly"   # one cell within the noise
    assert verdicts.combine([h, i]).verdict == "holds partly"
    assert verdicts.combine([f, f, i]).verdict == "does not hold"
    assert verdicts.combine([f, i, i]).verdict == "inconclusive"
    assert verdicts.combine([h, f, h]).verdict == "holds partly"
    assert verdicts.combine([p, h]).verdict == "holds partly"
    assert verdicts.combine([i, i, h]).verdict == "inconclusive"
    assert "2 of 3 cells hold" in verdicts.combine([h, h, f]).rule
    with pytest.raises(ValueError):
        verdicts.combine([])


def test_exact_and_share_reach_every_outcome():
    assert verdicts.exact(0, 200).verdict == "holds"
    assert verdicts.exact(1, 200).verdict == "does not hold"
    with pytest.raises(ValueError):
        verdicts.exact(3, 2)
    assert verdicts.share(98, 100, at_least=0.8).verdict == "holds"
    assert verdicts.share(40, 100, at_least=0.8).verdict == "does not hold"
    assert verdicts.share(7, 8, at_least=0.8).verdict == "inconclusive"
    lo_hi = verdicts.share(7, 8, at_least=0.8).rule
    assert "Wilson" in lo_hi and "7 of 8" in lo_hi


def test_attack_effective_guards_robustness_claims():
    rng = np.random.default_rng(1)
    rand = rng.uniform(0.1, 0.2, size=30)
    assert verdicts.attack_effective(rand + 0.3, rand) is None
    v = verdicts.attack_effective(rand + rng.normal(scale=0.001, size=30), rand)
    assert v.verdict == "inconclusive" and "ineffective" in v.rule


def test_within_hypothesis_makes_a_statement_outside_it_not_comparable():
    from torch import nn

    from robattr.models import build, not_twice_differentiable

    measured = verdicts.exact(5, 8, what="attacked inputs")
    assert verdicts.within_hypothesis(measured, "a twice-differentiable classifier", None) is measured
    v = verdicts.within_hypothesis(measured, "a twice-differentiable classifier", "max-pooling")
    assert v.verdict == "not comparable"
    assert "a twice-differentiable classifier" in v.rule and "max-pooling" in v.rule
    assert "5 violations in 8 attacked inputs" in v.rule          # what was measured stays
    with pytest.raises(ValueError):
        verdicts.within_hypothesis(measured, " ", "max-pooling")
    with pytest.raises(TypeError):
        verdicts.within_hypothesis("holds", "h", None)
    # what breaks twice-differentiability, read off the modules
    info = SimpleNamespace(shape=(1, 8, 8), num_classes=10, mean=(0.5,), std=(0.3,))
    assert not_twice_differentiable(build("mlp", info, "softplus", 3.0)) is None
    assert not_twice_differentiable(build("cnn", info, "softplus", 3.0)) == "max-pooling"
    assert not_twice_differentiable(build("mlp", info, "relu")) == \
        "piecewise-linear activations (ReLU family)"
    assert not_twice_differentiable(build("lenet", info, "relu")) == \
        "piecewise-linear activations (ReLU family) and max-pooling"
    assert not_twice_differentiable(nn.Sequential(nn.Linear(2, 2), nn.AdaptiveMaxPool1d(1))) \
        == "max-pooling"


def test_the_scale_says_one_image_and_one_class():
    assert verdicts.Scale("digits", "cnn", 1, "images").text("quick") == "digits 8×8, cnn, 1 image, profile quick"
    assert verdicts.Scale(n=1, unit="classes").text("quick") == "1 class, profile quick"
    assert verdicts.Scale(n=2, unit="classes").text("quick") == "2 classes, profile quick"


def test_claims_are_recorded_with_scale_and_profile(tmp_path, monkeypatch):
    path = tmp_path / "nb.results.csv"
    monkeypatch.setenv(results.ENV, str(path))
    monkeypatch.setenv(verdicts.PROFILE_ENV, "quick")
    verdicts.set_scale("mnist", "lenet", 16)
    md = papers.claim("Eq. 5 holds", verdicts.exact(0, 30), n=30, unit="directions")
    assert "mnist 28×28, lenet, 30 directions, profile quick" in md.data
    df = results.read(path)
    row = df[df["metric"] == "claim"].iloc[-1]
    assert row["verdict"] == "holds" and row["text"] == "Eq. 5 holds"
    assert row["scale"] == "mnist 28×28, lenet, 30 directions, profile quick"
    assert row["anchor"].startswith("claim-") and f'id="{row["anchor"]}"' in md.data


def test_verdicts_page_lists_every_recorded_claim(tmp_path, monkeypatch):
    from robattr.book import verdicts_page

    book = tmp_path / "book"
    for key, outcomes in {"wang2020/t2": ["holds", "inconclusive"],
                          "lim2021/t": ["does not hold"]}.items():
        path = book / f"{key}.results.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(results.ENV, str(path))
        for i, o in enumerate(outcomes):
            papers.claim(f"claim {key} {i}", Verdict(o, f"rule {i}"))
        results.record("acc", 0.9)
    (book / ".robattr-stamps.json").write_text(json.dumps(
        {"wang2020/t2": {"seconds": 12.3, "profile": "quick"}}))
    page = verdicts_page.write(tmp_path, log=lambda *a: None).read_text()
    assert page.count("| claim | verdict |") == 2 and "recorded 3 claims" in page
    # lim2021's claim twice: in its chapter's table and among those against the paper
    assert page.count("| claim wang2020/t2 ") == 2 and page.count("| claim lim2021/t ") == 2
    for key in ("wang2020/t2", "lim2021/t"):
        assert f'href="{key}.html#claim-' in page
    assert "❌ does not hold" in page and "≈ inconclusive" in page
    assert (book / verdicts_page.FIGURE).exists()
    assert "{doc}`wang2020/t2` | 12 | quick" in page
    # the one claim that does not hold is listed again, in its own section
    section = page.split("## Where a run goes against the paper")[1].split("## ")[0]
    assert "1 claims." in section and "| claim lim2021/t 0 | ❌ does not hold | {doc}`lim2021/t` |" \
        in section and "wang2020" not in section


def test_against_lists_what_does_not_hold_here_or_in_a_fresh_reference():
    import pandas as pd

    from robattr.book import verdicts_page

    claims = pd.DataFrame([
        {"key": "a/x", "text": "held here and there", "verdict": "holds"},
        {"key": "a/x", "text": "fails there", "verdict": "holds"},
        {"key": "a/x", "text": "fails here", "verdict": "does not hold"},
        {"key": "b/y", "text": "fails in a stale run", "verdict": "inconclusive"}])
    refs = {"medium": {"status": {"a/x": "fresh", "b/y": "stale", "c/z": "fresh"},
                       "claims": {("a/x", "held here and there"): "holds",
                                  ("a/x", "fails there"): "does not hold",
                                  ("a/x", "fails here"): "holds partly",
                                  ("b/y", "fails in a stale run"): "does not hold",
                                  ("c/z", "only in the reference"): "does not hold"}}}
    got = verdicts_page.against(claims, refs)
    assert got == [("a/x", "fails there", "holds", {"medium": "does not hold"}),
                   ("a/x", "fails here", "does not hold", {"medium": "holds partly"}),
                   ("c/z", "only in the reference", "", {"medium": "does not hold"})]
    assert verdicts_page.against(claims.iloc[:2], {}) == []
    lines = verdicts_page._against_section(claims, refs)
    assert "| only in the reference | not run | ❌ does not hold | {doc}`c/z` |" in lines
    assert "None." in verdicts_page._against_section(claims.iloc[:1], {})


VERDICT_WORDS = {"holds", "holds partly", "does not hold", "inconclusive", "not comparable"}


def test_verdict_holds_property():
    assert Verdict("holds", "r").holds
    assert not any(Verdict(v, "r").holds for v in VERDICTS if v != "holds")


def test_no_notebook_writes_a_verdict_by_hand():
    """Verdicts come from robattr.verdicts' rules: no verdict word as a string literal and
    no Verdict(...) in any notebook's code."""
    found = []
    for path in sorted((ROOT / "notebooks").glob("*/*.ipynb")):
        for i, cell in enumerate(nbformat.read(path, 4).cells):
            if cell.cell_type != "code":
                continue
            tree = ast.parse(cell.source)
            for node in ast.walk(tree):
                if isinstance(node, ast.Constant) and node.value in VERDICT_WORDS:
                    found.append(f"{path.relative_to(ROOT)} cell {i}: {node.value!r}")
                if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(
                        node.func, "attr", None)) == "Verdict":
                    found.append(f"{path.relative_to(ROOT)} cell {i}: Verdict(...)")
    assert found == [], "\n".join(found)
