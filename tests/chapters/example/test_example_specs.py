"""The example chapter's models, declared once (robattr.chapters.example.specs): what each
notebook's tables need, with its own default parameters, and the same list for
``robattr plan``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from robattr.book import notebooks
from robattr.catalog import BASELINE_LOSSES
from robattr.chapters.example import plan, specs

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = ("attacks_and_defenses", "attribution_methods", "digits_saliency")


def defaults(name: str) -> dict:
    return notebooks.defaults(f"example/{name}", ROOT)


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_plan_declares_the_notebooks_specs(name):
    p = defaults(name)
    assert plan.DECLARATIONS[name].models(p) == list(getattr(specs, name)(p).values())


def test_one_model_of_the_notebooks_settings_for_the_maps():
    p = defaults("digits_saliency")
    assert specs.digits_saliency(p) == {"CE": dict(dataset=p["dataset"], arch=p["arch"],
                                                   method="ce", epochs=p["epochs"],
                                                   seed=p["seed"])}
    q = defaults("attribution_methods")
    (cfg,) = specs.attribution_methods({**q, "seed": 7}).values()
    assert cfg["seed"] == 0 and cfg["epochs"] == q["epochs"]     # its seed is the noise's


def test_attacks_and_defenses_attacks_a_relu_model_and_tables_every_own_loss():
    from robattr import train

    p = defaults("attacks_and_defenses")
    got = specs.attacks_and_defenses(p)
    attacked = got.pop(specs.ATTACKED)
    assert attacked == dict(dataset=p["dataset"], arch=p["arch"], method="ce",
                            epochs=p["epochs"], seed=0)
    own = [n for n in train.LOSSES if n not in BASELINE_LOSSES]   # the registry's order
    assert list(got) == own == specs.own_losses() and "ce" in got  # the ratios' reference
    for name, cfg in got.items():
        assert cfg["method"] == name and cfg["activation"] == "softplus" and cfg["beta"] == 3.0
        assert cfg["epochs"] == p["train_epochs"] and cfg["seed"] == p["seed"]


def code(name: str) -> str:
    path = ROOT / "notebooks" / "example" / f"{name}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_notebook_asks_the_zoo_for_its_specs_and_for_no_other_model(name):
    src = code(name)
    assert f"zoo.get_models(EX.{name}(run.params)" in src
    assert "zoo.get_model(" not in src
