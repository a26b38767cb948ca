"""The `paper` profile of the wangkong2023 and wangkong2025 chapters is the papers' protocol
(001: Wang & Kong, CVPR 2023, supplement; 002: Wang & Kong, ICLR 2025 submission, appendix).
Each value the papers state is written once below, with its place, or read from the papers'
tables (robattr.report.papers); the test compares them with what the profile makes each notebook
run (its defaults, then the profile)."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from robattr.report import papers
from robattr.chapters.wangkong2023 import blocks as blocks78
from robattr.chapters.wangkong2025 import blocks as blocks567
from robattr.book.notebooks import discover
from robattr.book.profiles import load_profile, resolve

ROOT = Path(__file__).resolve().parents[2]
CHAPTERS = ROOT / "robattr" / "book" / "profiles" / "chapters"

# ---------------------------------------------------------------- 001 (wangkong2023)
T78_BLOCKS = ["MNIST", "Fashion-MNIST", "CIFAR-10"]      # D.2: Tables 7-8's data sets
T78_EPS = {                                             # D.2: "for MNIST and Fashion-MNIST ... 0.1
    "MNIST": (["0.1", "0.2"], ["0.01", "0.03"]),        # and 0.2 in l2, 0.01 and 0.03 in l-inf;
    "Fashion-MNIST": (["0.1", "0.2"], ["0.01", "0.03"]),   # for CIFAR-10 ... 0.2 and 0.3 for l2,
    "CIFAR-10": (["0.2", "0.3"], ["4/255", "8/255"]),   # and 4/255 and 8/255 in l-inf"
}
L2_ATTACK_STEPS = 20           # D.3: "PGD-20 is used as l2 attack"
LINF_ATTACK_STEPS = 200        # D.3: "200-step IFIA is used as l-inf attack"
TABLE6_EPS = 0.1               # D.1: "The perturbation size is chosen to be 0.1"
T910_EPS = (0.1, 8 / 255)      # D.3: eps = 0.1 for l2 and 8/255 for l-inf
T7_ROWS = ["AT", "IG-NORM", "AdvAAT", "ART", "TRADES", "TRADES+IGR"]   # Tables 7-8's rows, every one
T6_ROWS = ["AT", "IG-NORM", "AdvAAT", "ART", "TRADES"]                  # Table 6's rows
T9_ROWS = ["AT", "AdvAAT", "TRADES", "TRADES+IGR"]                      # Table 9's rows (Flower)
# the zoo loss of each row: ART is Singh et al. 2020's method (iga), AdvAAT Ivankay et al. 2020's
ROW_OF = {"ce": "CE", "at": "AT", "ig_norm": "IG-NORM", "advaat": "AdvAAT", "iga": "ART",
          "trades": "TRADES", "igr": "TRADES+IGR"}

# ---------------------------------------------------------------- 002 (wangkong2025)
T567_BLOCKS = {"MNIST": "wangkong2025_table5", "CIFAR-10": "wangkong2025_table6",
               "ImageNet": "wangkong2025_table7"}       # C.4: "Tables 5 to 7, which correspond to
                                                        # MNIST, CIFAR-10 and ImageNet"
RADII = [0.5, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5]            # Tables 5-7: l2 smoothing radii
THRESHOLDS = [0.9, 0.8]                                 # Tables 5-7: T = 0.9 and T = 0.8
EPS_RMIN = [0.5, 1.0]                                   # Table 9: perturbation sizes
K_MNIST = 100                                           # App. B: k = 100 for MNIST
ATTACK_ITERS = 200                                      # App. B: 200 iterations
ATTACK_STEP = 0.1                                       # App. B: step size 0.1
ATTACKS_PER_SAMPLE = 20                                 # C.4: 20 attacks on each sample


@pytest.fixture(scope="module")
def paper():
    """Every wangkong notebook's parameters under the paper profile (defaults, then the profile)."""
    prof = load_profile("paper")
    return {nb.key: resolve(nb, prof) for nb in discover(ROOT)
            if nb.key.startswith(("wangkong2023/", "wangkong2025/"))}


def test_every_wangkong_notebook_has_a_paper_entry(paper):
    entries = load_profile("paper")["notebooks"]
    missing = [k for k in paper if k not in entries and not k.endswith("/montecarlo")]
    assert not missing, missing


def test_tables_7_8_run_every_block_at_its_printed_budgets(paper):
    p = paper["wangkong2023/tables_bounds"]
    assert p["blocks"] == T78_BLOCKS
    assert list(blocks78.TABLE78) == T78_BLOCKS
    assert set(blocks78.TABLE78.values()) == {"mnist", "fashion_mnist", "cifar10"}
    # the budgets a block runs at are the tables' own labels, read by robattr.blocks
    for label, (l2, linf) in T78_EPS.items():
        for table, want in (("wangkong2023_table7", l2), ("wangkong2023_table8", linf)):
            t = papers.table(table)
            assert list(dict.fromkeys(t[t.dataset == label].eps.astype(str))) == want, (label, table)
    assert p["dataset"] == "mnist" and p["paper_dataset"] == "MNIST"
    assert [float(e) for e in T78_EPS["MNIST"][0]] == p["eps_l2"]      # the one-run fallback
    assert [float(e) for e in T78_EPS["MNIST"][1]] == p["eps_linf"]


def test_001_attacks_and_budgets(paper):
    p = paper["wangkong2023/tables_bounds"]
    assert p["l2_steps"] == L2_ATTACK_STEPS and p["linf_steps"] == LINF_ATTACK_STEPS
    assert p["table6_eps"] == TABLE6_EPS
    assert (p["t910_eps_l2"], p["t910_eps_linf"]) == pytest.approx(T910_EPS, rel=1e-12)
    assert [ROW_OF[m] for m in p["models"]] == T7_ROWS
    for table in ("wangkong2023_table7", "wangkong2023_table8"):
        assert list(dict.fromkeys(papers.table(table).model)) == T7_ROWS, table
    assert [ROW_OF[m] for m in p["table6_models"]] == T6_ROWS
    assert list(dict.fromkeys(papers.table("wangkong2023_table6").model)) == T6_ROWS
    t910 = {ROW_OF[m] for m in p["t910_models"]}
    assert set(T9_ROWS) <= t910 and set(papers.table("wangkong2023_table9").model) == set(T9_ROWS)
    assert set(papers.table("wangkong2023_table10").model) <= t910


def test_tables_5_7_run_every_block_at_the_printed_radii_and_thresholds(paper):
    p = paper["wangkong2025/certified_eps"]
    assert p["blocks"] == list(T567_BLOCKS)
    assert {k: v[1] for k, v in blocks567.TABLE567.items()} == T567_BLOCKS
    assert p["radii"] == RADII and p["thresholds"] == THRESHOLDS and p["eps_rmin"] == EPS_RMIN
    assert p["dataset"] == "mnist"
    for label, table in T567_BLOCKS.items():
        t = papers.table(table)
        assert set(t.dataset) == {label}
        assert sorted(float(r) for r in set(t.r)) == RADII
        assert sorted({float(T) for T in t["T"]}, reverse=True) == THRESHOLDS
    rows = {"ce": "Standard", "ig_norm": "IG-NORM", "igr": "IGR"}
    assert {rows[m] for m in p["methods"]} == set(papers.table("wangkong2025_table6").model)
    assert set(papers.table("wangkong2025_table7").model) == {"Standard"}   # ImageNet: standard only


def test_002_attack_protocol(paper):
    p = paper["wangkong2025/attack_check"]
    assert p["dataset"] == "mnist" and p["k"] == K_MNIST
    assert p["steps"] == ATTACK_ITERS and p["step_size"] == ATTACK_STEP
    assert p["restarts"] == ATTACKS_PER_SAMPLE and p["radii"] == RADII
    assert paper["wangkong2025/center_smoothing"]["k_top"] == K_MNIST


@pytest.mark.parametrize("chapter", ["wangkong2023", "wangkong2025"])
def test_every_paper_setting_names_its_source(chapter):
    """Each `name: value` line of the paper section carries a comment naming the paper's place
    (section, table, figure) or saying that the paper does not state it."""
    text = (CHAPTERS / f"{chapter}.yml").read_text()
    section = text[text.index("\npaper:\n"):]
    settings = [line for line in section.splitlines() if re.match(r"^    \w+:", line)]
    assert settings
    where = re.compile(r"#.*(\b(App\. )?[A-E](\.\d)+\b|App\. B|Tables? \d|Fig\. \d|not stated)")
    bare = [line.strip() for line in settings if not where.search(line)]
    assert not bare, f"{chapter}: settings without their source: {bare}"
