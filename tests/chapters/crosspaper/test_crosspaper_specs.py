"""The cross-paper matrix's models, declared once (robattr.chapters.crosspaper.specs): one
per row the notebook's parameters ask for, ATEX distilling the CE model of the same settings,
and the same list for ``robattr plan``."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from robattr.book import notebooks
from robattr.chapters import crosspaper as E
from robattr.chapters.crosspaper import plan, specs

ROOT = Path(__file__).resolve().parents[3]
DEFAULTS = notebooks.defaults("crosspaper/matrix", ROOT)



def key(cfg: dict) -> str:
    from robattr import zoo

    hp = {k: v for k, v in cfg.items() if k not in ("dataset", "arch", "method")}
    return zoo.config_hash(cfg["dataset"], cfg["arch"], cfg["method"], **hp)


def test_one_model_per_row_with_the_rows_method_and_shared_settings():
    p = dict(DEFAULTS)
    got = specs.matrix(p)
    assert list(got) == p["rows"] and len(got) == 10           # no baselines by default
    methods = E.training_rows(p["at_l2_eps"])
    for row, cfg in got.items():
        assert cfg["method"] == methods[row][0]
        assert (cfg["epochs"], cfg["activation"], cfg["beta"]) == (p["epochs"], "softplus",
                                                                   p["beta"])
    assert got["AT-l2"]["eps"] == p["at_l2_eps"] and got["IG-NORM"]["batch_size"] == 16
    assert plan.DECLARATIONS["matrix"].models(p) == list(got.values())


def test_the_baselines_follow_and_atex_distils_the_ce_rows_model():
    p = {**DEFAULTS, "baselines": ["IGA", "ATEX", "AdvAAT"]}
    got = specs.matrix(p)
    assert list(got)[-3:] == ["IGA / ART", "ATEX", "AdvAAT"] and specs.TEACHER not in got
    assert got["ATEX"]["teacher"] == key(got["CE"])
    assert plan.DECLARATIONS["matrix"].models(p) == list(got.values())


def test_without_a_ce_row_the_teacher_is_declared_before_atex():
    p = {**DEFAULTS, "rows": ["SSR", "l2"], "baselines": ["ATEX"]}
    got = specs.matrix(p)
    assert list(got) == ["SSR", "l2", specs.TEACHER, "ATEX"]
    assert got[specs.TEACHER]["method"] == "ce" and got["ATEX"]["teacher"] == key(
        got[specs.TEACHER])
    with pytest.raises(ValueError, match="not known"):
        specs.matrix({**p, "rows": ["Madry"]})


def code(name: str) -> str:
    path = ROOT / "notebooks" / "crosspaper" / f"{name}.ipynb"
    cells = json.loads(path.read_text())["cells"]
    return "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")


@pytest.mark.parametrize("name", ["matrix"])
def test_each_notebook_asks_the_zoo_for_its_specs_and_for_no_other_model(name):
    src = code(name)
    assert "E.load_row_models(specs.matrix(run.params)" in src
    assert "zoo.get_model(" not in src
