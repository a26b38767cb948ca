"""robattr.chapters.wangkong2025: a Tables 5-7 block's inputs and models, its certified budgets, and
Corollary 1's threshold ratio test."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

from robattr import data
from robattr.chapters.wangkong2025.blocks import table567_runs
from robattr.chapters import wangkong2025 as wk

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def block(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    mp.setenv("ROBATTR_CACHE", str(tmp_path_factory.mktemp("cache")))
    run = table567_runs([], dataset="digits", echo=None)[0]
    specs = wk.block_specs(dict(arch="mlp", methods=["ce"], epochs=1, beta=3.0), run)
    out = wk.block_inputs(run, specs, n_eval=3, seed=5, device="cpu")
    yield run, out
    mp.undo()


def test_block_inputs_draw_the_seeded_inputs_and_the_zoo_models(block):
    run, (x, y, models) = block
    assert run["table"] == "wangkong2025_table5" and run["label"] == "MNIST"
    ds = data.load("digits", "test")
    idx = torch.randperm(len(ds), generator=torch.Generator().manual_seed(5))[:3]
    assert torch.equal(x, torch.stack([ds[int(i)][0] for i in idx]))
    assert y.tolist() == [int(ds[int(i)][1]) for i in idx]
    assert list(models) == ["ce"] and models["ce"].zoo_meta["config"]["activation"] == "softplus"


def test_budgets_follow_corollary_1(block):
    _, (x, y, models) = block
    bud = wk.certified_budgets(models, x, y, radii=[0.5, 1.0], thresholds=[0.9, 0.8], n_samples=4,
                               ig_steps=2, seed=0)
    assert len(bud) == 3 * 2 * 2 * 2 and set(bud.model) == {"Standard"}
    wide = bud.pivot_table(index=["r", "sample", "T"], columns="form", values="eps_max")
    assert bool((wide["printed"] >= wide["corrected"]).all())       # sqrt(1/T^2 - 1) > sqrt(1 - T^2)
    per_r = bud[bud.form == "corrected"].pivot_table(index=["sample", "T"], columns="r", values="eps_max")
    assert bool((per_r[1.0] > 0).all())
    n_bad, n, low, lam = wk.threshold_ratio_violations(bud, 0.8, 0.9)
    assert n_bad == 0 and n == 6 and low >= lam == pytest.approx(0.6 / np.sqrt(1 - 0.81))
    mean = wk.mean_budgets(bud)
    assert list(mean.columns) == ["T", "model", "r", "value"] and set(mean.r) == {"0.5", "1.0"}
    assert mean.value.to_numpy() == pytest.approx(
        bud[bud.form == "corrected"].groupby(["T", "model", "r"])["eps_max"].mean().to_numpy())


def test_the_ratio_test_counts_a_violation():
    rows = [dict(model="Standard", r=1.0, sample=0, T=T, form="corrected", eps_max=e)
            for T, e in (("0.9", 1.0), ("0.8", 1.2))]
    n_bad, n, low, lam = wk.threshold_ratio_violations(pd.DataFrame(rows), 0.8, 0.9)
    assert (n_bad, n) == (1, 1) and low == pytest.approx(1.2) and lam > 1.2
    assert wk.k_T(0.8) == pytest.approx(0.6) and wk.k_T(0.8, corrected=False) == pytest.approx(0.75)
