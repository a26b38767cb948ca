"""The Verdicts page in the reader's language: one short row per claim, in the book's
chapter order, paper keys instead of the codes 000-004, the papers' names for our metric
keys, formulas typeset by MathJax, no emoji (robattr.book.verdicts_page)."""
from __future__ import annotations

import re
import shutil
import unicodedata
from pathlib import Path

import pytest

from robattr.report import papers, results
from robattr.book import verdicts_page as vp
from robattr.report.verdicts import VERDICTS, Verdict

ROOT = Path(__file__).resolve().parents[2]

#: made-up claims, written the way notebooks write them (ASCII formulas, codes, our keys),
#: in an order that is neither the book's nor the alphabet's
CLAIMS = {
    "lim2021/untargeted": [("Eq. 7 as printed: L(x_0 + alpha v, m) <= alpha ||m||_1 "
                            "(||g(x_0 + alpha v) - g(x_0)|| / 2 + ||g(x_0)||).", "does not hold"),
                           ("RelEx has the best (lowest) deletion score (Table S3).",
                            "inconclusive")],
    "crosspaper/matrix": [("wang2020: the methods beat standard training on its own headline "
                           "(kin_auc_SM)", "holds partly"),
                          ("wangkong2025: the same on its headline (eps_cert_mean)",
                           "not comparable"),
                          ("003 (Table 2): l2+Cosd beats CE on rps_Grad", "holds")],
    "wang2020/theory_geometry": [("Lemma 1 / Thm 1 (000): lambda <= 2L / ||x - x*||", "holds"),
                                 ("Thm 2 (000): ||H~_x||_2 <= 2F / sigma^2", "holds")],
    "wangkong2023/theory_bounds": [("Cor 1 (l_p, p > 2): for linear g, ||g(x + delta) - g(x)|| "
                                    "<= d^(1/2 - 1/p) xi_max eps", "holds")],
}
INTERNAL = ("kin_auc_SM", "eps_cert_mean", "rps_Grad")


@pytest.fixture
def page(tmp_path, monkeypatch):
    shutil.copy(ROOT / "_toc.yml", tmp_path / "_toc.yml")
    for key, claims in CLAIMS.items():
        path = tmp_path / "book" / f"{key}.results.csv"
        path.parent.mkdir(parents=True, exist_ok=True)
        monkeypatch.setenv(results.ENV, str(path))
        for text, verdict in claims:
            papers.claim(text, Verdict(verdict, "0 violations in 9 (model, delta) cases, "
                                                "eps = 0.1 (a violation: ratio > 1e-08)"),
                         dataset="digits", model="cnn", n=9, unit="images")
    return vp.write(tmp_path, log=lambda *a: None).read_text()


def _section(page: str, heading: str) -> str:
    return page.split(heading, 1)[1].split("\n## ", 1)[0]


def _math_spans(text: str) -> list[str]:
    return re.findall(r"\$([^$]+)\$", text)


def test_one_short_row_per_claim_in_the_books_chapter_order(page):
    headings = [line for line in page.splitlines() if line.startswith("## ")]
    chapters = [h for h in headings if "`" in h or "Across" in h]
    assert [re.search(r"`(\w+)`", h).group(1) if "`" in h else "crosspaper"
            for h in chapters] == ["wang2020", "wangkong2023", "lim2021", "crosspaper"]
    for heading in chapters:
        key = re.search(r"`(\w+)`", heading).group(1) if "`" in heading else "crosspaper"
        section = _section(page, heading)
        rows = [line for line in section.splitlines()
                if line.startswith("| ") and not line.startswith("| claim |")]
        expected = [c for k, cs in CLAIMS.items() if k.startswith(key + "/") for c in cs]
        assert len(rows) == len(expected), heading
        for row in rows:
            # claim (its rule a click away) | verdict | scale | where: the scale is short
            cells = re.split(r"(?<!\\)\|", row)[1:-1]
            assert len(cells) == 4
            assert "<details><summary>rule and numbers</summary>" in cells[0]
            assert cells[1].strip() in VERDICTS.values()
            assert cells[2].strip() == "digits 8×8 · 9 images"
            assert "profile" not in row and 'href="' in cells[3]


def test_the_page_speaks_the_readers_language(page):
    body = re.sub(r"`[^`]*`", "", page)             # code spans name our own things
    for name in INTERNAL:
        assert name not in page
    assert "top-k intersection of SM" in page and "mean certified budget" in page
    assert "random perturbation similarity (RPS) of Grad" in page
    assert not re.search(r"(?<![\w.])00[0-4](?![\w.])", body), "a bare paper code"
    assert "joo2023 (Table 2)" in page
    # in its own chapter, "(000)" after a statement's name goes
    assert "| Lemma 1 / Thm 1: $" in page
    # formulas in MathJax, no ASCII left
    for ascii_math in ("<=", "||", "lambda", "sigma^2", "xi_max", "x_0", "d^("):
        assert not re.search(r"(?<!\\)" + re.escape(ascii_math), body), ascii_math
    assert r"$\lambda \le 2L" in page and r"\xi_{\max}" in page and r"\tilde{H}_{x}" in page
    for tex in _math_spans(page):
        assert "|" not in tex and "<" not in tex, tex          # safe in a table cell
        assert tex.count("{") == tex.count("}"), tex
    # words that only look like variables stay words
    assert "(Table S3)" in page and "ℓ₂+Cosd" in page


def test_no_emoji_on_the_page(page):
    emoji = [c for c in page if ord(c) >= 0x1F000 or c in "\ufe0f\u2705\u274c\u274e\u2b55"
             or unicodedata.name(c, "").startswith(("EMOJI", "HEAVY CHECK", "CROSS MARK"))]
    assert emoji == []
    for mark in VERDICTS.values():                  # the marks are text, every font has them
        assert all(ord(c) < 0x2800 for c in mark)


@pytest.mark.parametrize("ascii_text, expected", [
    ("lambda <= 2L / ||x - x*||", r"$\lambda \le 2L / \Vert x - x^* \Vert$"),
    ("for linear g, the map", "for linear $g$, the map"),
    ("up to eps = 1.", r"up to $\varepsilon = 1$."),
    ("the C x C matrix (WL)^T(WL), so", r"the $C \times C$ matrix $(WL)^\top (WL)$, so"),
    ("sign(P_ij) = s_i s_j for one s",
     r"$\operatorname{sign}(P_{ij}) = s_{i} s_{j}$ for one $s$"),
    ("its central (1 - alpha) interval", r"its central $(1 - \alpha )$ interval"),
    ("at x = 0, eps = 1, delta = e2", r"at $x = 0$, $\varepsilon = 1$, $\delta = e_2$"),
    ("eps sqrt(sum |P_ij|)", r"$\varepsilon \sqrt{\sum \vert P_{ij} \vert}$"),
    ("Appendix B (as printed), Table S3, panel (b), 0-255 scale, w/o batch",
     "Appendix B (as printed), Table S3, panel (b), 0-255 scale, w/o batch"),
    ("mean a − b = 0.02, 95 % bootstrap interval [0.01, 0.03] over 8",      # a result
     "mean $a - b$ = 0.02, 95 % bootstrap interval [0.01, 0.03] over 8"),
    ("see certified_eps and wang2020/table2_attacks",
     "see certified_eps and wang2020/table2_attacks"),
    ("an l2 ball and l-inf budgets", "an ℓ₂ ball and ℓ∞ budgets"),
    ("already $x$ typeset || here", "already $x$ typeset || here"),
    ("code `a_b <= c` stays", "code `a_b <= c` stays"),
])
def test_typeset_turns_ascii_formulas_into_mathjax(ascii_text, expected):
    assert vp.typeset(ascii_text) == expected


def test_a_formula_stays_one_formula_however_long():
    """Issue 41: a formula cut into pieces side by side (``$a$ $\\le b$``) reads as two, and
    a cut inside parentheses leaves both halves unbalanced; the browser check counts them."""
    long = vp.typeset("Thm 1 (as printed): cos(h(x), h(x~)) >= ||h(x)|| / "
                      "sqrt(||h(x)||^2 + a^2) for every g")
    spans = _math_spans(long)
    assert len(spans) == 2 and r"\ge" in spans[0] and spans[1] == "g"
    eq7 = vp.typeset("Eq. 7 as printed: L(x_0 + alpha v, m) <= alpha ||m||_1 "
                     "(||g(x_0 + alpha v) - g(x_0)|| / 2 + ||g(x_0)||)")
    (whole,) = _math_spans(eq7)
    assert whole.count("(") == whole.count(")") and whole.count("{") == whole.count("}")
    assert "$ $" not in vp.typeset("sign(P_ij) = s_i s_j, and a x b = c")
    assert vp.typeset("lambda <= 2L") == r"$\lambda \le 2L$"


def test_paper_keys_and_metric_names():
    assert vp.paper_keys("003 (Table 2) and 004, at 0.001 and 1000") == \
        "joo2023 (Table 2) and lim2021, at 0.001 and 1000"
    assert vp.paper_keys("Prop 3 (000): x; B2 (000, cited)", "wang2020") == \
        "Prop 3: x; B2 (cited)"
    assert vp.metric_name("kin_auc_SM").startswith("top-k intersection of SM under attack")
    assert vp.metric_name("T_e_linf") == "the bound T_e (ℓ∞)"
    assert vp.metric_name("retrieval_RelEx") == "class retrieval rate of RelEx"
    assert vp.metric_name("not_a_metric") == "not_a_metric"
    assert vp.reader_text("headline (rps_Grad), |R_i| <= c") == \
        r"headline (random perturbation similarity (RPS) of Grad), $\vert R_{i} \vert \le c$"
