"""The lim2021 chapter's ``paper`` profile against the values paper 004 (Lim, Lee & Kim,
CVPR 2021) and its released code state, each written once here with its place."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from robattr.book import notebooks, profiles

ROOT = Path(__file__).resolve().parents[3]
CHAPTER_YML = ROOT / "robattr" / "book" / "profiles" / "chapters" / "lim2021.yml"
NOTEBOOKS = ("lim2021/theory_relex", "lim2021/untargeted", "lim2021/clean_classes",
             "lim2021/targeted_transfer")

#: 004's top-k: k = 1000 of the 224 x 224 pixels of an ImageNet input (S2.2, Fig. 5 / S1),
#: as the same share of a CIFAR-10 image's 32 x 32 pixels
TOP_K_CIFAR = round(1000 / (224 * 224) * 32 * 32)

#: (notebook, parameter) -> (the value the paper or its code states, where)
PAPER = {
    **{(nb, "dataset"): ("cifar10", "Sec. 5, Fig. 6 (the CIFAR-10 setting)") for nb in NOTEBOOKS},
    **{(nb, "arch"): ("resnet18_cifar", "Sec. 5, Fig. 6 (natural ResNet-18)") for nb in NOTEBOOKS},
    **{(nb, "masking"): ("normalized", "S2.1 with 004's code (mask on the normalised image)")
       for nb in NOTEBOOKS},
    **{(nb, "n_noisy"): (50, "004's code (batch_size = 50)") for nb in NOTEBOOKS},
    **{(nb, "relex_epochs"): (50, "S2.1 (50 epochs, Ours(50))") for nb in NOTEBOOKS},
    **{(nb, "sg_samples"): (50, "004's code (SmoothGrad sample_size = 50)") for nb in NOTEBOOKS[1:]},
    **{(nb, "ig_steps"): (100, "004's code (IntegratedGradient steps = 100)") for nb in NOTEBOOKS[1:]},
    ("lim2021/untargeted", "eps_paper"): ([0.07, 0.1, 0.3, 1.0, 2.0, 4.0, 8.0], "Sec. 5 and S2.2"),
    ("lim2021/untargeted", "pgd_steps"): (40, "S2.2 (40 PGD iterations)"),
    ("lim2021/untargeted", "pgd_step"): (0.01, "S2.2 (step size 0.01, normalised scale)"),
    ("lim2021/untargeted", "relex_epochs_long"): (100, "Fig. 3 (Ours(100))"),
    ("lim2021/untargeted", "top_k"): (TOP_K_CIFAR, "S2.2 (k = 1000 of 224 x 224)"),
    ("lim2021/clean_classes", "source_class"): (8, "Sec. 5, Fig. 6 (class 8)"),
    ("lim2021/clean_classes", "n_class_images"): (400, "Sec. 5 (400 images of class 8)"),
    ("lim2021/clean_classes", "attack_eps"): (8 / 255, "Sec. 5 (l-inf 8 out of 255)"),
    ("lim2021/targeted_transfer", "attack_steps"): (300, "S2.2 (300 unstructured iterations)"),
    ("lim2021/targeted_transfer", "top_k"): (TOP_K_CIFAR, "S2.2 (k = 1000 of 224 x 224)"),
}


@pytest.fixture(scope="module")
def paper_values():
    found = {nb.key: nb for nb in notebooks.discover(ROOT)}
    assert set(NOTEBOOKS) <= set(found)
    return {key: profiles.resolve(found[key], "paper") for key in NOTEBOOKS}


@pytest.mark.parametrize("notebook, name", sorted(PAPER), ids=lambda v: str(v))
def test_paper_profile_sets_the_papers_value(paper_values, notebook, name):
    value, where = PAPER[(notebook, name)]
    got = paper_values[notebook][name]
    assert got == pytest.approx(value, rel=1e-12) if isinstance(value, float) else got == value, \
        f"{notebook}: {name} = {got!r}, 004 ({where}) says {value!r}"


def test_lambda1_sweep_includes_the_papers_lambda1(paper_values):
    grid = paper_values["lim2021/theory_relex"]["lambda1_grid"]
    assert 1e-4 in grid, "S2.1: lambda1 = 1e-4 must be a point of the sweep"


def test_paper_profile_differs_from_quick_where_the_paper_does():
    """The paper profile must not fall back to the notebooks' digits defaults (issue 18)."""
    found = {nb.key: nb for nb in notebooks.discover(ROOT)}
    for key in NOTEBOOKS:
        quick = profiles.resolve(found[key], "quick")
        assert quick["dataset"] == "digits" and quick["masking"] == "pixel"
        assert profiles.load_profile("paper")["notebooks"][key]["dataset"] != quick["dataset"]


def test_every_paper_setting_names_its_source():
    """Each ``key: value`` line of the ``paper:`` section carries a comment saying where the
    value comes from (a section of 004, its code, or 'not in the paper')."""
    text = CHAPTER_YML.read_text()
    section = text[text.index("\npaper:\n"):]
    settings = [line for line in section.splitlines()
                if re.match(r"^    [a-z_0-9]+: ", line)]
    assert len(settings) >= 4 * 5
    missing = [line for line in settings if "#" not in line]
    assert not missing, f"settings without a source comment: {missing}"
    sourced = [line for line in settings
               if re.search(r"(Sec\. \d|S\d\.\d|Fig\. \d|004's code|not in the paper|not stated)",
                            line.split("#", 1)[1])]
    assert sourced == settings
