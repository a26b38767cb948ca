"""The wang2020 chapter's models, declared once (robattr.chapters.wang2020.specs): with each
notebook's own default parameters, the models its tables need, under the labels it reads;
the same list for ``robattr plan``; and the notebooks ask the zoo for them through
``zoo.get_models`` only."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from robattr.book import notebooks
from robattr.chapters.wang2020 import plan, specs

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = ("table2_attacks", "table3_4_ssr", "table5_6_figs", "theory_gauss_newton",
             "theory_geometry")


def defaults(name: str) -> dict:
    return notebooks.defaults(f"wang2020/{name}", ROOT)


def code(name: str) -> str:
    cells = json.loads((ROOT / "notebooks" / "wang2020" / f"{name}.ipynb").read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_plan_declares_the_notebooks_specs(name):
    p = defaults(name)
    got = plan.DECLARATIONS[name].models(p)
    assert got == list(getattr(specs, name)(p).values()) and got


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_each_notebook_asks_the_zoo_for_its_specs_and_for_no_other_model(name):
    src = code(name)
    assert f"zoo.get_models(wang2020.{name}(run.params)" in src \
        or f"zoo.get_models({name}(run.params)" in src
    assert "zoo.get_model(" not in src and "at_seeds(" not in src


def test_table2_one_natural_model_per_run_labelled_by_its_block(tmp_path, monkeypatch):
    from PIL import Image

    p = defaults("table2_attacks")
    assert specs.table2_attacks(p) == {"CIFAR-10": dict(dataset=p["dataset"], arch=p["arch"],
                                                        method="ce", epochs=p["epochs"])}
    # ImageNet's run reads a weights file: no zoo model for it, none for the fallback either
    monkeypatch.setenv("ROBATTR_DATA", str(tmp_path))
    folder = tmp_path / "imagenet" / "val" / "n01440764"
    folder.mkdir(parents=True)
    Image.fromarray(np.zeros((12, 12, 3), dtype=np.uint8)).save(folder / "0.JPEG")
    weights = tmp_path / "natural.pt"
    weights.write_bytes(b"x")
    q = {**p, "blocks": ["ImageNet"], "imagenet_dir": str(tmp_path / "imagenet"),
         "imagenet_weights": str(weights)}
    assert specs.table2_attacks(q) == {}
    assert plan.DECLARATIONS["table2_attacks"].models(q) == []
    # no weights file: the ImageNet block is skipped and the run on `dataset` trains
    assert list(specs.table2_attacks({**q, "imagenet_weights": ""})) == ["CIFAR-10"]


def test_table3_4_the_four_trainings_the_natural_seeds_and_ssr_at_each_beta():
    p = defaults("table3_4_ssr")
    got = specs.table3_4_ssr(p)
    seeds = [specs.seed_label("Natural", s) for s in range(1, p["natural_seeds"])]
    betas = [specs.beta_label(b) for b in p["betas"]]
    assert list(got) == list(specs.TABLE3_TRAININGS) + seeds + betas
    assert [got[n]["method"] for n in specs.TABLE3_TRAININGS] == ["ce", "ssr", "at", "ig_norm"]
    assert got["SSR"] == got[betas[0]]                     # Table 3's SSR is Table 4's first beta
    assert [got[b]["ssr_beta"] for b in betas] == [float(b) for b in p["betas"]]
    assert got["Madry"]["norm"] == "l2" and got["Madry"]["eps"] == p["at_eps_255"] / 255
    assert got["Madry"]["step_size"] == got["Madry"]["eps"] / 4 and got["Madry"]["steps"] == 7
    ig = got["IG-NORM"]
    assert (ig["epochs"], ig["gamma"], ig["batch_size"]) == (p["epochs_ig_norm"],
                                                             p["ig_norm_gamma"],
                                                             p["batch_size_ig_norm"])
    for s, label in enumerate(seeds, start=1):
        assert got[label] == {**got["Natural"], "seed": s}
    assert "seed" not in got["Natural"]
    assert len(specs.seeded(got, "Natural")) == p["natural_seeds"]
    # epochs_ssr: 0 trains SSR as long as the others; a count applies to every beta alike
    assert p["epochs_ssr"] == 0 and got["SSR"]["epochs"] == got["Natural"]["epochs"]
    longer = specs.table3_4_ssr({**p, "epochs_ssr": p["epochs"] + 3})
    assert {longer[b]["epochs"] for b in betas} == {p["epochs"] + 3}
    assert longer["Natural"] == got["Natural"] and longer["Madry"] == got["Madry"]


def test_table5_6_table5s_pair_and_seeds_then_fig7s_radii_and_seeds(monkeypatch):
    p = defaults("table5_6_figs")
    got = specs.table5_6_figs(p)
    n = p["natural_seeds"]
    nat7 = specs.fig7_label(0)
    radii = [specs.fig7_label(e) for e in p["fig7_eps_255"]]
    assert list(got) == (["Natural", "AT"] + [specs.seed_label("Natural", s) for s in range(1, n)]
                         + [nat7] + radii + [specs.seed_label(nat7, s) for s in range(1, n)])
    assert got["Natural"]["epochs"] == got["AT"]["epochs"] == p["epochs"]
    assert got["AT"]["norm"] == "linf" and got["AT"]["eps"] == p["at_eps_255"] / 255
    assert got["AT"]["steps"] == p["at_steps"]
    assert [got[r]["eps"] * 255 for r in radii] == pytest.approx(p["fig7_eps_255"])
    assert {got[r]["norm"] for r in radii} == {"l2"}
    assert {got[m]["epochs"] for m in [nat7, *radii]} == {p["fig7_epochs"]}
    assert [m.get("seed", 0) for m in specs.seeded(got, nat7)] == list(range(n))
    assert [m.get("seed", 0) for m in specs.seeded(got, "Natural")] == list(range(n))
    # with the ImageNet ResNet-50s, Table 5 trains nothing: Fig. 7's models only
    monkeypatch.setattr(specs, "_table56_on_imagenet", lambda p: True)
    assert list(specs.table5_6_figs(p)) == list(got)[n + 1:]


def test_the_theory_notebooks_models():
    p = defaults("theory_gauss_newton")
    got = specs.theory_gauss_newton(p)
    assert list(got) == ["ReLU", "Softplus"] and "activation" not in got["ReLU"]
    assert got["Softplus"]["activation"] == "softplus" and got["Softplus"]["beta"] == p["beta"]
    assert got["Softplus"]["epochs"] == p["softplus_epochs"]
    q = defaults("theory_geometry")
    assert specs.theory_geometry(q) == {"trained": dict(
        dataset=q["dataset"], arch=q["arch"], method="ce", activation="softplus", beta=q["beta"],
        epochs=q["epochs"])}


def test_seeded_reads_the_seeds_in_order_up_to_the_first_gap():
    models = {"a": 0, specs.seed_label("a", 1): 1, specs.seed_label("a", 2): 2,
              specs.seed_label("a", 4): 4, "b": 9}
    assert specs.seeded(models, "a") == [0, 1, 2] and specs.seeded(models, "b") == [9]
    with pytest.raises(KeyError):
        specs.seeded(models, "c")
