"""The lim2021 chapter's models, declared once (robattr.chapters.lim2021.specs): the natural
model, and the PGD-trained one where a notebook compares both, each left to the user's
weights file when one is given; the same list for ``robattr plan``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from robattr.book import notebooks
from robattr.chapters.lim2021 import evaluate, plan, specs

ROOT = Path(__file__).resolve().parents[3]
LABELS = {"clean_classes": ["natural"], "targeted_transfer": ["natural"],
          "theory_relex": ["natural", "robust"], "untargeted": ["natural", "robust"]}


def defaults(name: str) -> dict:
    return notebooks.defaults(f"lim2021/{name}", ROOT)


@pytest.mark.parametrize("name", sorted(LABELS))
def test_each_notebook_trains_its_models_unless_weights_are_given(name):
    p = defaults(name)
    got = getattr(specs, name)(p)
    assert list(got) == LABELS[name]
    assert [c["method"] for c in got.values()] == ["ce", "at"][:len(got)]
    assert all(c == dict(dataset=p["dataset"], arch=p["arch"], method=c["method"],
                         epochs=p["epochs"]) for c in got.values())
    assert plan.DECLARATIONS[name].models(p) == list(got.values())
    assert "natural" not in getattr(specs, name)({**p, "weights": "natural.pt"})
    if "robust" in LABELS[name]:
        assert list(getattr(specs, name)({**p, "robust_weights": "r.pt"})) == ["natural"]


def test_chapter_models_takes_the_zoos_and_loads_the_users(monkeypatch):
    from robattr import zoo

    asked, loaded = [], []
    monkeypatch.setattr(zoo, "get_models", lambda s, **kw: asked.append((list(s), kw)) or
                        {k: f"zoo {k}" for k in s})
    monkeypatch.setattr(evaluate, "chapter_model", lambda d, a, method, weights, device:
                        loaded.append((method, weights)) or f"file {weights}")
    p = {**defaults("untargeted"), "robust_weights": "r.pt"}
    models = evaluate.chapter_models(specs.untargeted(p), p, "cpu")
    assert models == {"natural": "zoo natural", "robust": "file r.pt"}
    assert asked[0][0] == ["natural"] and asked[0][1]["progress"] is False
    assert loaded == [("at", "r.pt")]
    q = defaults("clean_classes")                      # no robust_weights parameter: one model
    assert list(evaluate.chapter_models(specs.clean_classes(q), q, "cpu")) == ["natural"]


def code(name: str) -> str:
    path = ROOT / "notebooks" / "lim2021" / f"{name}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("name", sorted(LABELS))
def test_each_notebook_asks_the_zoo_for_its_specs_and_for_no_other_model(name):
    src = code(name)
    assert f"ch.chapter_models(ch.{name}(run.params), run.params, dev)" in src
    assert "zoo.get_model(" not in src and "chapter_model(" not in src
