"""The `paper` profile of the wang2020 chapter is 000's protocol (Wang et al., NeurIPS 2020,
supplementary material). Each value the supplement states is written once below, with the
place it comes from, or read from the paper's tables (robattr.report.papers); the test compares
them with what the profile makes every notebook run (its defaults, then the profile)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from robattr.report import papers
from robattr.book.notebooks import discover
from robattr.book.profiles import load_profile, resolve
from robattr.chapters import wang2020

ROOT = Path(__file__).resolve().parents[3]
YML = ROOT / "robattr" / "book" / "profiles" / "chapters" / "wang2020.yml"

# ---------------------------------------------------------------- what 000's supplement states
SAMPLES = 50                    # C1: "For IG, SG, and UG, we use 50 samples"
ATTACK_STEPS = 50               # C1: "we run the attack for 50 iterations"
EPS_255 = [2, 4, 8, 16]         # Tables 2-6 captions: eps_inf = 2, 4, 8, 16 (0-255 scale)
N_IMAGES = 500                  # C2: the attacks run "on same 500 images"
N_TRANSFER = 200                # C4: "Experiments are conducted on 200 images"
BETAS = [0.3, 0.5, 0.7, 0.9]    # C2 / Table 4: beta = 0.3, 0.5, 0.7, 0.9; Table 3 uses 0.3
SSR_SCALE_01 = 1.0              # C2: "if data range [0, 1] is used, s = 1 is a good scaling factor"
MADRY_L2_255 = 0.25             # Table 3: Madry's delta_2 = 0.25 (0-255 scale)
AT_LINF_255 = 8                 # Table 5 caption: adversarially trained with eps_inf = 8
BETA_SEARCH_EPOCHS = 25         # C2: "We train all the models on CIFAR-10 with 25 epochs"
UG_RADII_255 = [2, 4, 8, 16, 32, 64]   # D2: "noise radius from 2 to 64 under 0-255 scale"
UG_FIG_SAMPLES = 50             # D2: "with 50 times sampling"
#: Table 2's first column and caption (k about 2 % of the pixels), C1's noise levels, C4's K
BLOCKS = {"CIFAR-10": dict(size=32, k=20, sg_noise=0.1, ug_radius=4 / 255),
          "Flower": dict(size=64, k=80, sg_noise=0.1, ug_radius=4 / 255),
          "ImageNet": dict(size=224, k=1000, sg_noise=0.2, ug_radius=0.2)}


@pytest.fixture(scope="module")
def paper():
    """Every wang2020 notebook's parameters under the paper profile (defaults, then the profile)."""
    prof = load_profile("paper")
    return {nb.key: resolve(nb, prof) for nb in discover(ROOT) if nb.key.startswith("wang2020/")}


def test_the_profile_sets_every_wang2020_notebook(paper):
    entries = load_profile("paper")["notebooks"]
    assert {k for k in entries if k.startswith("wang2020/")} == set(paper)


@pytest.mark.parametrize("key", ["wang2020/table2_attacks", "wang2020/table3_4_ssr",
                                 "wang2020/table5_6_figs"])
def test_the_attack_protocol_is_c1s(paper, key):
    p = paper[key]
    assert p["eps_255"] == EPS_255
    assert p["steps"] == ATTACK_STEPS and p["n_samples"] == SAMPLES and p["ig_steps"] == SAMPLES
    assert p["dataset"] == "cifar10" and p["arch"] == "resnet20" and p["k"] == BLOCKS["CIFAR-10"]["k"]


def test_table2_runs_every_block_with_its_own_size_k_and_noise(paper):
    p = paper["wang2020/table2_attacks"]
    assert p["blocks"] == list(BLOCKS) and p["n_eval"] == N_IMAGES
    assert set(wang2020.TABLE2_BLOCKS) == set(BLOCKS)
    for name, want in BLOCKS.items():
        got = wang2020.TABLE2_BLOCKS[name]
        assert {k: got[k] for k in want} == pytest.approx(want, rel=1e-12), name
    # the paper's own table has exactly these blocks
    assert set(papers.table("wang2020_table2").dataset) == set(BLOCKS)


def test_ig_norm_trains_as_table_1(paper):
    t1 = papers.table("wang2020_table1").set_index("hyperparameter")["value"].astype(float)
    p = paper["wang2020/table3_4_ssr"]
    assert p["epochs_ig_norm"] == t1["epochs"]
    assert p["batch_size_ig_norm"] == t1["batch_size"]
    assert p["ig_norm_gamma"] == t1["gamma"]
    # the batch size reaches the zoo: the IG-NORM spec the notebook gives zoo.get_models
    # (robattr.chapters.wang2020.specs) carries it
    from robattr.chapters.wang2020 import specs

    ig = specs.table3_4_ssr(p)["IG-NORM"]
    assert (ig["method"], ig["batch_size"], ig["epochs"]) == ("ig_norm", t1["batch_size"],
                                                              t1["epochs"])
    nb = json.loads((ROOT / "notebooks" / "wang2020" / "table3_4_ssr.ipynb").read_text())
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "zoo.get_models(wang2020.table3_4_ssr(run.params)" in code
    # the loss's own defaults are Table 1's other settings
    from robattr.train import make_loss

    hp = make_loss("ig_norm").hparams
    assert hp["eps"] == pytest.approx(t1["eps_inf"] / 255) and hp["step_size"] == pytest.approx(t1["step_size"] / 255)
    assert hp["steps"] == t1["nbiter"] and hp["ig_steps"] == t1["m"] and hp["approx_factor"] == t1["approx_factor"]


def test_ssr_and_madry_settings_are_table_3_and_c2(paper):
    p = paper["wang2020/table3_4_ssr"]
    assert p["betas"] == BETAS and p["ssr_scale"] == SSR_SCALE_01
    assert p["at_eps_255"] == MADRY_L2_255 and p["epochs"] == BETA_SEARCH_EPOCHS
    assert p["n_eval"] == N_IMAGES
    assert sorted(papers.table("wang2020_table4").beta.astype(float)) == BETAS


def test_tables_5_6_and_the_figures(paper):
    p = paper["wang2020/table5_6_figs"]
    assert p["at_eps_255"] == AT_LINF_255 and p["n_transfer"] == N_TRANSFER
    assert p["ug_radii_255"] == UG_RADII_255 and p["ug_samples"] == UG_FIG_SAMPLES
    # without the ImageNet files Tables 5-6 run on CIFAR-10; with them, on C4's setting
    assert wang2020.table56_run(imagenet_dir="", natural_weights="", robust_weights="", echo=None) is None


def test_every_paper_setting_names_its_source():
    """Each `name: value` line of the paper section carries a comment naming the paper's place
    (App. section, table, figure) or saying that the paper does not state it."""
    text = YML.read_text()
    section = text[text.index("\npaper:\n"):]
    settings = [line for line in section.splitlines()[2:]
                if re.match(r"^    \w+:", line)]
    assert settings
    where = re.compile(r"#.*(\b[A-D]\d\b|Tables? \d|Fig\. \d|not stated)")
    bare = [line.strip() for line in settings if not where.search(line)]
    assert not bare, f"settings without their source: {bare}"
