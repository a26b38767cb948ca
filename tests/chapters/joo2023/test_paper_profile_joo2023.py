"""The joo2023 chapter's ``paper`` profile against the values paper 003 (Joo et al., AAAI
2023) and its released code (joshua840/RobustAGA) state, each written once here with its
place."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from robattr.book import notebooks, profiles
from robattr.metrics import PROTOCOLS

ROOT = Path(__file__).resolve().parents[3]
CHAPTER_YML = ROOT / "robattr" / "book" / "profiles" / "chapters" / "joo2023.yml"
#: the notebooks that train the chapter's zoo models (toy_fig1 trains 2-D toys, not in the zoo)
TRAINING = ("joo2023/theory_alignment", "joo2023/table1_robustness", "joo2023/table2_cost")

#: 003 App. A, "Hyperparameters of training LeNet with CIFAR10 dataset" (and App.
#: "Experiment setting in details"), the CIFAR-10 LeNet of Table 1
LENET = {
    "dataset": ("cifar10", "Experimental settings / Table 1 (CIFAR10, LeNet)"),
    "arch": ("lenet", "App. Architecture (LeNet)"),
    "beta": (3.0, "App. A, Activation: Softplus(beta = 3)"),
    "epochs": (200, "App. A, Epochs: 200"),
    "optimizer": ("adam", "App. A, Optimizer: Adam (all but IGA)"),
    "lr": (1e-3, "App. A, Adam(learning-rate=1e-3)"),
    "weight_decay": (4e-5, "App. A, Adam(weight-decay=4e-5)"),
    "batch_size": (128, "App. A, Training batch size: 128"),
    "milestones": ([100, 150], "App. A, Learning rate decay: 1/10 at [100, 150] epochs"),
    "lam": (0.1, "App. A, l2 + cosd and l2: bold lambda = 1e-1"),
    "lam_cos": (1.0, "App. A, l2 + cosd: bold lambda_c = 1"),
    "hessian_lam": (1e-3, "App. A, Hessian: bold lambda = 1e-3"),
    "train_eps": (4 / 255, "RobustAGA's --eps 4 (003's Eq. 4-5 leave epsilon open)"),
}

#: (notebook, parameter) -> (the value 003 or its code states, where)
PAPER = {
    **{(nb, name): spec for nb in TRAINING for name, spec in LENET.items()},
    ("joo2023/table1_robustness", "protocol"): ("robustaga", "the authors' code made Table 1"),
    ("joo2023/table2_cost", "protocol"): ("robustaga", "the authors' code made Table 1"),
    ("joo2023/table1_robustness", "rps_eps"): (16 / 255, "Quantitative results: RPS at eps 16"),
    ("joo2023/table2_cost", "rps_eps"): (16 / 255, "Quantitative results: RPS at eps 16"),
    ("joo2023/table1_robustness", "rps_samples"): (10, "Metrics, RPS: 10 samples"),
    ("joo2023/table2_cost", "rps_samples"): (10, "Metrics, RPS: 10 samples"),
    ("joo2023/table1_robustness", "rps_eps_list"): ([4 / 255, 8 / 255, 16 / 255],
                                                    "Metrics, RPS: eps 4, 8, 16"),
    ("joo2023/table1_robustness", "attack_eps"): (4 / 255, "Metrics, A-Ins: 4/255 for LeNet"),
    ("joo2023/table1_robustness", "attack_eps_list"): ([2 / 255, 4 / 255], "App. Table 4"),
    ("joo2023/table1_robustness", "attack_steps"): (100, "Metrics, A-Ins: PGD iter = 100"),
    ("joo2023/table1_robustness", "frame_width"): (5, "RobustAGA test_adv_insertion.py"),
    ("joo2023/table1_robustness", "table4_methods"): (["Grad", "xGrad", "GBP", "LRP"],
                                                      "App. Table 4"),
    ("joo2023/table1_robustness", "baselines"): (["ATEX", "IGA"], "Table 1, LeNet block"),
    ("joo2023/table1_robustness", "iga_lam"): (1.0, "App. A, IGA: bold lambda = 1"),
    ("joo2023/table1_robustness", "resnet_arch"): ("resnet18_cifar",
                                                   "App. Architecture: kuangliu's CIFAR ResNet18"),
    ("joo2023/table1_robustness", "resnet_optimizer"): ("adamw", "App. A (ResNet): AdamW"),
    ("joo2023/table1_robustness", "resnet_weight_decay"): (1e-2, "App. A (ResNet): AdamW(wd=1e-2)"),
    ("joo2023/table1_robustness", "resnet_l2_lam"): (1.0, "App. A (ResNet): l2, bold lambda = 1"),
    ("joo2023/table1_robustness", "resnet_hessian_lam"): (1e-5, "App. A (ResNet): Hessian, 1e-5"),
    ("joo2023/table1_robustness", "resnet_attack_eps"): (2 / 255, "Metrics, A-Ins: 2/255 for ResNet18"),
    ("joo2023/table1_robustness", "resnet_baselines"): ([], "Table 1: no ATEX or IGA on ResNet18"),
    ("joo2023/table2_cost", "grid_lam"): ([0.0, 0.01, 0.1, 1.0], "App. A, l2 + cosd lambda"),
    ("joo2023/table2_cost", "grid_lam_cos"): ([0.01, 0.1, 1.0], "App. A, l2 + cosd lambda_c"),
}


@pytest.fixture(scope="module")
def found():
    return {nb.key: nb for nb in notebooks.discover(ROOT)}


@pytest.fixture(scope="module")
def paper_values(found):
    assert set(TRAINING) <= set(found)
    return {key: profiles.resolve(found[key], "paper") for key in TRAINING}


def _same(got, want) -> bool:
    if isinstance(want, float):
        return isinstance(got, (int, float)) and got == pytest.approx(want, rel=1e-12)
    if isinstance(want, list):
        return isinstance(got, list) and len(got) == len(want) and all(
            _same(g, w) for g, w in zip(got, want))
    return got == want


@pytest.mark.parametrize("notebook, name", sorted(PAPER), ids=lambda v: str(v))
def test_paper_profile_sets_the_papers_value(paper_values, notebook, name):
    value, where = PAPER[(notebook, name)]
    got = paper_values[notebook][name]
    assert _same(got, value), f"{notebook}: {name} = {got!r}, 003 ({where}) says {value!r}"


def test_paper_profile_entries_are_in_the_chapter_file():
    """load_profile("paper")["notebooks"] holds the chapter's entries, with the training
    settings written there (not left to the notebooks' quick defaults)."""
    entries = profiles.load_profile("paper")["notebooks"]
    for key in TRAINING:
        for name in ("batch_size", "weight_decay", "milestones", "lr", "optimizer"):
            assert name in entries[key], f"{key}: the paper profile does not set {name}"


def test_the_training_notebooks_share_their_models(paper_values):
    """The zoo key hashes every training setting: the three notebooks must agree on all of
    them, or each trains its own copy of the 200-epoch models."""
    first = paper_values[TRAINING[0]]
    for key in TRAINING[1:]:
        for name in LENET:
            assert _same(paper_values[key][name], first[name]), (key, name)


def test_quick_defaults_stay_the_zoos(found):
    """The quick profile keeps the zoo's defaults (so its models keep their keys) and the
    text's Insertion protocol; the paper profile uses the code's."""
    from robattr.zoo import DEFAULTS

    for key in TRAINING:
        quick = profiles.resolve(found[key], "quick")
        assert quick["dataset"] == "digits"
        for name in ("lr", "batch_size", "optimizer", "weight_decay"):
            assert quick[name] == DEFAULTS[name], (key, name)
        assert (quick["milestones"] or None) == DEFAULTS["milestones"]
        if "protocol" in quick:
            assert quick["protocol"] == "robattr" and quick["protocol"] in PROTOCOLS


def test_every_paper_setting_names_its_source():
    """Each ``key: value`` line of the ``paper:`` section carries a comment saying where the
    value comes from (a section of 003, its code, or 'not in 003')."""
    text = CHAPTER_YML.read_text()
    section = text[text.index("\npaper:\n"):]
    settings = [line for line in section.splitlines() if re.match(r"^    [a-z_0-9]+: ", line)]
    assert len(settings) >= 3 * len(LENET)
    bare = [line for line in settings if "#" not in line]
    assert not bare, f"paper settings without a source comment: {bare}"
    for line in settings:
        comment = line.split("#", 1)[1]
        assert re.search(r"003|RobustAGA|not a paper setting", comment), line


def test_the_papers_data_train_the_baselines_and_several_seeds(found):
    """003 Table 1 has six rows: the medium and paper profiles train ATEX and IGA (11-14 CE
    runs each) and three models per regulariser; the quick one (its cold build's budget)
    trains neither, its rows then say why; smoke trains both baselines and two seeds, so
    that the tests run that code."""
    key = "joo2023/table1_robustness"
    for tier in ("medium", "paper"):
        assert profiles.resolve(found[key], tier)["baselines"] == ["ATEX", "IGA"], tier
        assert profiles.resolve(found[key], tier)["reg_seeds"] == 3, tier
    assert profiles.resolve(found[key], "quick")["baselines"] == []
    assert profiles.resolve(found[key], "quick")["reg_seeds"] == 1
    assert profiles.resolve(found[key], "smoke")["baselines"] == ["ATEX", "IGA"]
    assert profiles.resolve(found[key], "smoke")["reg_seeds"] == 2


def test_the_resnet_block_runs_in_the_paper_profile_only(found):
    """Table 1's second block (CIFAR-10 ResNet-18) is the paper profile's; quick, smoke and
    medium leave ``resnet_arch`` empty (the block's rows then show '—', not run)."""
    key = "joo2023/table1_robustness"
    for tier in ("quick", "smoke", "medium"):
        assert profiles.resolve(found[key], tier)["resnet_arch"] == "", tier
    assert profiles.resolve(found[key], "paper")["resnet_arch"] == "resnet18_cifar"


def test_the_resnet_block_declares_the_papers_resnet_models(found):
    """The plan declares the second block's four models with 003's ResNet-18 settings (App. A,
    "Hyperparameters of training ResNet with CIFAR10 dataset") and the same training settings
    as the LeNet block otherwise."""
    from robattr.book import plan

    prof = profiles.load_profile("paper")
    key = "joo2023/table1_robustness"
    params = profiles.resolve(found[key], prof)
    cfgs = plan.declared_models(key, params, profiles.effective_train_size(prof, key),
                                profiles.effective_recipe(prof))
    res = {c["method"]: c for c in cfgs if c["arch"] == "resnet18_cifar"}
    assert set(res) == {"ce", "hessian", "l2", "l2_cosd"}          # no ATEX or IGA on ResNet18
    for c in res.values():
        assert c["dataset"] == "cifar10"
        assert c["optimizer"] == "adamw" and c["weight_decay"] == pytest.approx(1e-2)
        assert c["lr"] == pytest.approx(1e-3) and c["batch_size"] == 128
        assert c["epochs"] == 200 and list(c["milestones"]) == [100, 150]
        assert c["activation"] == "softplus" and c["beta"] == pytest.approx(3.0)
    assert res["l2"]["loss"]["lam"] == pytest.approx(1.0)
    assert res["hessian"]["loss"]["lam"] == pytest.approx(1e-5)
    assert res["l2_cosd"]["loss"]["lam"] == pytest.approx(0.1)
    assert res["l2_cosd"]["loss"]["lam_cos"] == pytest.approx(1.0)
    # the smoke profile declares no ResNet unless the block is turned on
    smoke = profiles.resolve(found[key], "smoke")
    assert not [c for c in plan.declared_models(key, smoke) if c["arch"].startswith("resnet")]
    on = plan.declared_models(key, {**smoke, "resnet_arch": "resnet20",
                                    "resnet_baselines": ["ATEX"]})
    assert sorted(c["method"] for c in on if c["arch"] == "resnet20") == [
        "atex", "ce", "hessian", "l2", "l2_cosd"]
