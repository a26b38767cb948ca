"""The wangkong2025 chapter's models, declared once (robattr.chapters.wangkong2025.specs): what
each notebook's tables need, with its own default parameters, and the same list for
``robattr plan``."""
from __future__ import annotations

from pathlib import Path

import pytest

from robattr.book import notebooks
from robattr.chapters.wangkong2025 import plan, specs

ROOT = Path(__file__).resolve().parents[3]
NOTEBOOKS = ("attack_check", "center_smoothing", "certified_eps")


def defaults(name: str) -> dict:
    return notebooks.defaults(f"wangkong2025/{name}", ROOT)


def softplus(p: dict, dataset: str, method: str) -> dict:
    return dict(dataset=dataset, arch=p["arch"], method=method, epochs=p["epochs"], seed=0,
                activation="softplus", beta=p["beta"])


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_plan_declares_the_notebooks_specs(name):
    p = defaults(name)
    assert plan.DECLARATIONS[name].models(p) == list(getattr(specs, name)(p).values())


@pytest.mark.parametrize("name", ("montecarlo", "theory_ball_smoothing"))
def test_the_synthetic_notebooks_train_nothing(name):
    assert plan.DECLARATIONS[name].models(defaults(name)) == []


def test_attack_check_has_one_model_per_row_of_table_8():
    from robattr.chapters.wangkong2025.tables import MODEL_LABELS

    p = defaults("attack_check")
    got = specs.attack_check(p)
    assert list(got) == p["methods"] == list(MODEL_LABELS)     # Standard, IG-NORM, IGR
    assert got == {m: softplus(p, p["dataset"], m) for m in p["methods"]}


def test_center_smoothing_has_its_one_model():
    p = defaults("center_smoothing")
    assert specs.center_smoothing(p) == {p["method"]: softplus(p, p["dataset"], p["method"])}
    assert specs.center_smoothing({**p, "method": "ce"}) == {"ce": softplus(p, p["dataset"], "ce")}


def test_certified_eps_has_the_first_blocks_models_by_loss():
    p = defaults("certified_eps")
    (run,) = specs.t567_runs(p)                     # no blocks: one run on dataset
    assert run["dataset"] == p["dataset"] and not run["weights"]
    block = specs.block_specs(p, run)
    assert block == {m: softplus(p, p["dataset"], m) for m in p["methods"]}
    assert specs.certified_eps(p) == {f"{run['label']}: {m}": s for m, s in block.items()}


def test_certified_eps_asks_the_zoo_nothing_for_imagenet(monkeypatch):
    import robattr.chapters.wangkong2025.blocks as B

    p = {**defaults("certified_eps"), "blocks": ["MNIST", "ImageNet"], "imagenet_dir": "/in",
         "imagenet_weights": "/w.pt"}
    monkeypatch.setattr(B, "select", lambda cand, root=None, echo=None: cand)  # data "here"
    runs = specs.t567_runs(p)
    assert [r["label"] for r in runs] == ["MNIST", "ImageNet"] and runs[1]["weights"]
    assert specs.block_specs(p, runs[1]) == {}
    got = specs.certified_eps(p)
    assert list(got) == [f"MNIST: {m}" for m in p["methods"]]
    assert all(s["dataset"] == "mnist" for s in got.values())
