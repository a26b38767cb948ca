"""The joo2023 notebooks' models, declared once (robattr.chapters.joo2023.specs): what each
notebook's tables need, with its own default parameters (and the smoke profile's, which
trains the baselines and more seeds), and the same list for ``robattr plan``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from robattr.book import notebooks, profiles
from robattr.chapters.joo2023 import models, plan, specs

ROOT = Path(__file__).resolve().parents[3]
FOUR = ["CE only", "Hessian", "l2", "l2+Cosd"]


def defaults(name: str) -> dict:
    return notebooks.defaults(f"joo2023/{name}", ROOT)


def smoke(name: str) -> dict:
    nb = notebooks.find(f"joo2023/{name}", notebooks.discover(ROOT))
    return profiles.resolve(nb, profiles.load_profile("smoke"))


def key(cfg: dict) -> str:
    from robattr import zoo

    hp = {k: v for k, v in cfg.items() if k not in ("dataset", "arch", "method")}
    return zoo.config_hash(cfg["dataset"], cfg["arch"], cfg["method"], **hp)


@pytest.mark.parametrize("name", ["table1_robustness", "table2_cost", "theory_alignment"])
@pytest.mark.parametrize("params", [defaults, smoke], ids=["defaults", "smoke"])
def test_plan_declares_the_notebooks_specs(name, params):
    p = params(name)
    assert plan.DECLARATIONS[name].models(p) == list(getattr(specs, name)(p).values())


def test_every_model_shares_the_notebooks_training_options():
    p = defaults("table2_cost")
    for cfg in specs.table2_cost(p).values():
        assert {k: cfg[k] for k in specs.train_options(p)} == specs.train_options(p)


def test_table1_by_default_four_models_the_ce_spread_and_the_broken_model():
    p = defaults("table1_robustness")
    got = specs.table1_robustness(p)
    assert list(got) == [*FOUR, "CE only, seed 1", "CE only, seed 2",
                         specs.broken_label(p["break_lam_cos"])]
    assert list(models.block(got)) == FOUR                    # no baselines: ATEX, IGA not run
    assert [got[k]["method"] for k in FOUR] == ["ce", "hessian", "l2", "l2_cosd"]
    assert got["CE only, seed 2"] == {**got["CE only"], "seed": 2}
    broken = got["cosd only, lam_c = 100"]
    assert broken["method"] == "cosd" and broken["lam_cos"] == p["break_lam_cos"]


def test_table1_smoke_trains_the_baselines_and_every_regulariser_at_two_seeds():
    p = smoke("table1_robustness")
    got = specs.table1_robustness(p)
    assert len(got) == 12 and list(models.block(got)) == list(specs.REGULARIZERS)
    assert got["ATEX"]["teacher"] == key(got["CE only"]) and got["IGA"]["lam"] == p["iga_lam"]
    assert all(specs.seed_label(r, 1) in got for r in FOUR)   # CE's seed 1 is the spread's


def test_table1_second_block_has_its_own_weights_optimiser_and_teacher():
    p = {**defaults("table1_robustness"), "resnet_arch": "resnet18_cifar",
         "resnet_baselines": ["ATEX"]}
    got = specs.table1_robustness(p)
    block = models.block(got, prefix="resnet18_cifar ")
    assert list(block) == ["CE only", "ATEX", "Hessian", "l2", "l2+Cosd"]
    assert all(c["arch"] == "resnet18_cifar" and c["optimizer"] == p["resnet_optimizer"]
               for c in block.values())
    assert block["l2"]["lam"] == p["resnet_l2_lam"] and block["l2+Cosd"]["lam"] == p["lam"]
    assert block["Hessian"]["lam"] == p["resnet_hessian_lam"]
    assert block["ATEX"]["teacher"] == key(block["CE only"]) != key(got["CE only"])
    with pytest.raises(ValueError, match="unknown baselines"):
        specs.table1_robustness({**p, "baselines": ["SmoothGrad"]})


def test_table2_the_four_then_the_grid():
    p = defaults("table2_cost")
    got = specs.table2_cost(p)
    grid = [specs.grid_label(lm, lc) for lc in p["grid_lam_cos"] for lm in p["grid_lam"]]
    assert list(got) == FOUR + grid and len(grid) == 2
    assert got[specs.grid_label(1.0, 1.0)]["lam"] == 1.0


def test_theory_the_four_softplus_models_and_a_relu_ce():
    p = defaults("theory_alignment")
    got = specs.theory_alignment(p)
    assert list(got) == FOUR + [specs.RELU_CE]
    assert "activation" not in got[specs.RELU_CE] and got["l2"]["activation"] == "softplus"


def code(name: str) -> str:
    path = ROOT / "notebooks" / "joo2023" / f"{name}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("name", ["table1_robustness", "table2_cost", "theory_alignment"])
def test_each_notebook_asks_the_zoo_for_its_specs_and_for_no_other_model(name):
    src = code(name)
    assert f"zoo.get_models(joo2023.{name}(run.params)" in src
    assert "zoo.get_model(" not in src and "at_seeds(" not in src
