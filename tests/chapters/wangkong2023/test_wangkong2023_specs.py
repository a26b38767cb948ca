"""The wangkong2023 chapter's models, declared once (robattr.chapters.wangkong2023.specs): what
each notebook's tables need, with its own default parameters, and the same list for
``robattr plan``."""
from __future__ import annotations

from pathlib import Path

import pytest

from robattr.book import notebooks
from robattr.chapters.wangkong2023 import plan, specs

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = ("ig_gradient", "tables_bounds", "theory_bounds")


def defaults(name: str) -> dict:
    return notebooks.defaults(f"wangkong2023/{name}", ROOT)


def softplus(p: dict, dataset: str, arch: str, method: str, seed: int = 0) -> dict:
    return dict(dataset=dataset, arch=arch, method=method, epochs=p["train_epochs"], seed=seed,
                activation="softplus", beta=p["beta"])


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_plan_declares_the_notebooks_specs(name):
    p = defaults(name)
    assert plan.DECLARATIONS[name].models(p) == list(getattr(specs, name)(p).values())


def test_ig_gradient_has_the_smooth_model_and_two_max_pooling_cnns():
    p = defaults("ig_gradient")
    got = specs.ig_gradient(p)
    d, m = p["dataset"], p["model_method"]
    assert got == {f"{p['arch']} (softplus)": softplus(p, d, p["arch"], m),
                   "cnn (softplus, max-pool)": softplus(p, d, "cnn", m),
                   "cnn (relu, max-pool)": dict(dataset=d, arch="cnn", method=m,
                                                epochs=p["train_epochs"], seed=0)}


def test_theory_bounds_checks_the_smooth_model_beside_the_cnn():
    p = defaults("theory_bounds")
    got = specs.theory_bounds(p)
    assert list(got) == [p["arch"], "cnn (max-pool)"]
    assert got[p["arch"]] == softplus(p, p["dataset"], p["arch"], p["model_method"])
    assert got["cnn (max-pool)"] == softplus(p, p["dataset"], "cnn", p["model_method"])


def test_the_smooth_model_is_shared_by_the_three_notebooks():
    ig, tb, th = (defaults(n) for n in NOTEBOOKS)
    shared = specs.ig_gradient(ig)[f"{ig['arch']} (softplus)"]
    assert shared == specs.theory_bounds(th)[th["arch"]] == specs.tables_bounds(tb)["at"]


def test_tables_bounds_has_every_model_its_tables_ask_for():
    p = defaults("tables_bounds")
    got = specs.tables_bounds(p)
    (block,) = specs.t78_runs(p)                      # no blocks: one run on dataset
    assert block["dataset"] == p["dataset"] and block["label"] == p["paper_dataset"]
    t78 = [specs.t78_label(block, m) for m in p["models"]]
    assert list(got)[:len(t78)] == t78
    for m in p["models"]:
        assert got[specs.t78_label(block, m)] == softplus(p, block["dataset"], p["arch"], m)
    own = [*p["table6_models"], *p["t910_models"], *specs.OBJECTIVE_LOSSES, "ig_norm"]
    for m in own:                                     # Table 6, 9-10, the objectives, exercise
        assert got[m] == softplus(p, p["dataset"], p["arch"], m)
    seeds = [specs.ce_seed_label(s) for s in range(1, p["t910_seeds"])]
    assert list(got)[-len(seeds):] == seeds and len(seeds) == p["t910_seeds"] - 1 >= 2
    for s, label in enumerate(seeds, start=1):
        assert got[label] == softplus(p, p["dataset"], p["arch"], "ce", seed=s)
    assert set(got) == set(t78) | set(own) | set(seeds)


def test_tables_bounds_with_blocks_trains_each_blocks_models_on_its_data(monkeypatch):
    import robattr.chapters.wangkong2023.blocks as B

    p = {**defaults("tables_bounds"), "blocks": ["MNIST", "CIFAR-10"], "models": ["at"],
         "table6_models": ["at"], "t910_models": ["ce", "at"], "dataset": "mnist"}
    monkeypatch.setattr(B, "select", lambda cand, root=None, echo=None: cand)  # data "here"
    got = specs.tables_bounds(p)
    assert got["MNIST: at"]["dataset"] == "mnist" and got["CIFAR-10: at"]["dataset"] == "cifar10"
    assert got["at"]["dataset"] == got["ce"]["dataset"] == "mnist"
    assert "advaat" not in got and "iga" not in got     # no objective to evaluate


def test_the_objective_losses_are_the_ones_the_notebook_evaluates():
    from robattr.chapters.wangkong2023 import table_runs

    assert set(specs.OBJECTIVE_LOSSES) == set(table_runs.OBJECTIVE_TERMS)
