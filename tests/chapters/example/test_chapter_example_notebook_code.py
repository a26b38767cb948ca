"""The functions the example chapter's notebooks call (robattr.chapters.example): small
models and hand-made tables, seconds in all."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

matplotlib.use("Agg")

from robattr import attributions as A  # noqa: E402
from robattr.chapters import example as EX  # noqa: E402
from robattr.chapters.example import ig_completeness as IGC  # noqa: E402
from robattr.chapters.example import maps as MAPS  # noqa: E402
from robattr.models import random_mlp  # noqa: E402


def tiny_model(activation: nn.Module | None = None, seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(16, 8), activation or nn.Softplus(beta=3.0),
                         nn.Linear(8, 3)).eval()


def images(n: int = 2, seed: int = 0) -> torch.Tensor:
    return torch.rand(n, 1, 4, 4, generator=torch.Generator().manual_seed(seed))


# ----------------------------------------------------------------------------- noise
def test_uniform_noisy_stays_in_the_box_and_the_budget_and_repeats_with_its_seed():
    x = images(3)
    a = EX.uniform_noisy(x, 0.1, torch.Generator().manual_seed(1))
    b = EX.uniform_noisy(x, 0.1, torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    assert a.min() >= 0 and a.max() <= 1
    assert (a - x).abs().max() <= 0.1 + 1e-6
    assert not torch.equal(a, x)
    assert torch.equal(EX.uniform_noisy(x, 0.0, torch.Generator().manual_seed(1)), x)


def test_uniform_noisy_rejects_a_negative_budget():
    with pytest.raises(ValueError, match="eps"):
        EX.uniform_noisy(images(), -0.1, torch.Generator())


def test_grad_cosines_is_one_against_its_own_map_and_checks_shapes():
    model, x = tiny_model(), images(3)
    y = model(x).argmax(1)
    g = A.grad(model, x, y)
    cos = EX.grad_cosines(model, x, y, g)
    assert cos.shape == (3,)
    assert torch.allclose(cos, torch.ones(3), atol=1e-6)
    assert torch.allclose(EX.grad_cosines(model, x, y, -g), -torch.ones(3), atol=1e-6)
    with pytest.raises(ValueError, match="shape"):
        EX.grad_cosines(model, x, y, g[:2])


def test_stability_answer_reads_the_verdicts():
    held = SimpleNamespace(holds=True, fails=False)
    failed = SimpleNamespace(holds=False, fails=True)
    undecided = SimpleNamespace(holds=False, fails=False)
    assert EX.stability_answer([held, held]).endswith("more stable at both budgets")
    assert EX.stability_answer([held, failed]).endswith("less stable at some budget")
    assert "interval holds zero" in EX.stability_answer([held, undecided])
    with pytest.raises(ValueError):
        EX.stability_answer([])


# ----------------------------------------------------------------------------- attack tour
def test_attack_vs_noise_report_finds_the_first_budget_below_noise():
    curves = pd.DataFrame({"eps": [0.1, 0.2] * 2, "value": [0.5, 0.25, 0.5, 0.75],
                           "perturbation": ["top-k attack"] * 2 + ["random noise"] * 2})
    lines = EX.attack_vs_noise_report(curves, 4).splitlines()
    assert lines[0] == "eps = 0.10: top-4 intersection 0.500 under the attack, 0.500 under noise"
    assert lines[-1] == "the attack goes below noise first at eps = 0.2"
    never = curves.assign(value=[0.9, 0.9, 0.1, 0.1])
    assert EX.attack_vs_noise_report(never, 4).endswith("the attack never goes below noise here")
    with pytest.raises(ValueError, match="same budgets"):
        EX.attack_vs_noise_report(curves.iloc[:3], 4)


def test_attacked_inputs_puts_noise_of_the_budget_first():
    x = images(1)
    runs = {"a": SimpleNamespace(x_adv=x + 0.01), "b": SimpleNamespace(x_adv=x - 0.01)}
    out = EX.attacked_inputs(x, runs, eps=0.05, seed=0)
    assert list(out) == ["random l-inf", "a", "b"]
    assert (out["random l-inf"] - x).abs().max() <= 0.05 + 1e-6
    assert out["a"] is runs["a"].x_adv


def test_attack_metrics_table_of_the_clean_input_is_perfect_agreement():
    model, x = tiny_model(), images(1)
    y = model(x).argmax(1)
    g0 = A.grad(model, x, y)
    run = SimpleNamespace(history=torch.tensor([[[0.5]]]), criterion=torch.tensor([0.25]))
    table = EX.attack_metrics_table(model, x, y, g0, {"clean": x, "run": x}, {"run": run}, 4)
    row = table.loc["clean"]
    assert bool(row["label kept"]) and row["l-inf"] == 0 and row["l2"] == 0
    assert row["top-4 intersection"] == pytest.approx(1.0)
    assert row["cosine"] == pytest.approx(1.0, abs=1e-6)
    assert row["center dislocation (px)"] == pytest.approx(0.0, abs=1e-6)
    assert row["own criterion: clean -> attacked"] == ""
    assert table.loc["run", "own criterion: clean -> attacked"] == "0.5 -> 0.25"


def test_run_every_attack_needs_a_batch():
    with pytest.raises(ValueError, match="batch"):
        EX.run_every_attack(tiny_model(), images(1)[0], torch.tensor([0]), k=2, eps=0.1,
                            eps_l2=1.0, steps=1, surrogate_beta=10.0, seed=0, frame_width=1)


def test_own_losses_leave_out_the_baselines_and_loss_table_needs_ce():
    from robattr.catalog import BASELINE_LOSSES

    own = EX.own_losses()
    assert "ce" in own and not set(own) & set(BASELINE_LOSSES)
    with pytest.raises(ValueError, match="ce"):
        EX.loss_table({"at": tiny_model()}, images(), torch.tensor([0, 1]), seed=0, eps=0.1)


def test_plot_cost_vs_stability_labels_every_loss():
    table = pd.DataFrame({"time vs CE": [1.0, 3.0], "RPS": [0.5, 0.9]}, index=["ce", "at"])
    fig = EX.plot_cost_vs_stability(table, "RPS")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.texts] == ["ce", "at"]
    assert ax.get_xscale() == "log"


# ----------------------------------------------------------------------------- maps
def test_method_options_give_every_sampling_method_its_seed_and_check_counts():
    opts = EX.method_options(5, 7, 3, seed=11)
    assert opts["integrated_gradients"] == {"steps": 7}
    assert opts["smoothgrad"] == {"n_samples": 5, "seed": 11}
    assert opts["relex"] == {"n_noisy": 5, "epochs": 3, "seed": 11}
    assert opts["meaningful_perturbation"] == {"iterations": 3}
    assert set(opts) <= set(A.METHODS)
    for bad in (dict(n_samples=0), dict(ig_steps=1.5), dict(epochs=True)):
        kw = dict(n_samples=1, ig_steps=1, epochs=1, seed=0) | bad
        with pytest.raises(ValueError):
            EX.method_options(**kw)


def test_all_maps_passes_options_and_collects_refusals(monkeypatch):
    def doubled(model, x, target, factor=2.0):
        return x * factor

    def refuses(model, x, target):
        raise ValueError("not for this model")

    monkeypatch.setattr(MAPS.A, "METHODS", {"doubled": doubled, "refuses": refuses})
    x = images(1)
    maps, failures = EX.all_maps(None, x, None, {"doubled": {"factor": 3.0}})
    assert list(maps) == ["doubled"] and torch.equal(maps["doubled"], x * 3)
    assert failures == {"refuses": "not for this model"}


def test_second_derivative_norms_are_finite_and_positive_on_a_softplus_net(monkeypatch):
    monkeypatch.setattr(MAPS.A, "DIFFERENTIABLE", ("grad", "input_x_grad"))
    model, x = tiny_model(), images(1)
    rows = EX.second_derivative_norms(model, x, model(x).argmax(1), {})
    assert [r[0] for r in rows] == ["grad", "input_x_grad"]
    assert all(finite and norm > 0 for _, norm, finite in rows)


def test_plot_abs_attributions_lays_out_the_panels():
    x = images(1)
    fig = EX.plot_abs_attributions(x, {"a": x, "b": -x}, "title", cols=2)
    assert len(fig.axes) == 4 + 1                      # and the colour bar of the maps
    assert fig.axes[0].get_title() == "title" and fig.axes[2].get_title() == "b"
    assert not fig.axes[3].axison
    with pytest.raises(ValueError):
        EX.plot_abs_attributions(x, {"a": x}, "t", cols=0)


def test_photo_batch_names_the_photos_when_one_is_missing():
    with pytest.raises(ValueError, match="not installed here"):
        EX.photo_batch("no such photo", 8)


# ----------------------------------------------------------------------------- IG completeness
def test_ig_completeness_error_vanishes_on_a_linear_model():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Flatten(), nn.Linear(16, 3)).double().eval()
    assert EX.ig_completeness_error(net, images(2).double(), "midpoint", 4) < 1e-10


def test_ig_error_table_clips_what_it_shows_at_rounding():
    torch.manual_seed(0)
    nets = {"linear": nn.Sequential(nn.Flatten(), nn.Linear(16, 3)).double().eval()}
    table = EX.ig_error_table(nets, images(2).double(), ["left", "midpoint"], [2, 4])
    assert list(table.columns) == ["model", "rule", "steps", "error", "shown"]
    assert len(table) == 4 and (table.shown >= EX.ROUNDING).all()


def test_expected_slopes_follow_the_network_and_the_rule():
    rng = np.random.default_rng(0)
    smooth = random_mlp([4, 3, 2], "softplus", 3.0, rng=rng)
    relu = random_mlp([4, 3, 2], "relu", rng=rng)
    assert EX.ig_expected_slope(smooth, "midpoint") == -2.0
    assert EX.ig_expected_slope(smooth, "left") == -1.0
    assert EX.ig_expected_slope(smooth, "gauss") == -np.inf
    assert EX.ig_expected_slope(relu, "midpoint") == -1.0
    assert EX.smoothness_line("s", smooth) == "s: twice differentiable"
    assert EX.smoothness_line("r", relu).startswith("r: not twice differentiable: ")
    assert EX.default_ig_rule() == "midpoint"


def test_fitted_slope_and_its_text():
    m = np.array([4, 16, 64])
    assert EX.ig_fitted_slope(pd.DataFrame({"steps": m, "error": 3.0 / m ** 2})) == \
        pytest.approx(-2.0)
    below = pd.DataFrame({"steps": m, "error": [1e-3, 1e-13, 1e-14]})
    assert EX.ig_fitted_slope(below) == -np.inf
    assert EX.slope_text(-np.inf) == "rounding"
    assert EX.slope_text(-np.inf, expected=True) == "faster"
    assert EX.slope_text(-1.234) == "-1.23"


def test_slope_table_and_answer():
    rng = np.random.default_rng(0)
    nets = {"smooth": random_mlp([4, 3, 2], "softplus", 3.0, rng=rng)}
    m = np.array([4, 16, 64])
    errors = pd.DataFrame({"model": "smooth", "rule": ["midpoint"] * 3 + ["left"] * 3,
                           "steps": np.r_[m, m], "error": np.r_[1.0 / m ** 2, 1.0 / m ** 2]})
    table = EX.ig_slope_table(errors, nets)
    assert table.agrees.tolist() == [True, False]
    assert table.slope.tolist() == ["-2.00 (expected -2.00)", "-2.00 (expected -1.00)"]
    assert EX.ig_slope_answer(table) == ("answer: 1 of 2 fitted slopes are more than 0.3 from "
                                         "the expected rate: smooth, left")
    assert EX.ig_slope_answer(table.iloc[:1]).startswith("answer: every fitted slope")


def test_ig_test_models_are_float64_copies_and_random_mlps():
    model = tiny_model(nn.ReLU())
    smooth = tiny_model()
    x = images(2).double()
    nets = IGC.ig_test_models(model, smooth, "mlp", x, seed=0, n_random=1)
    assert list(nets) == ["trained mlp, ReLU", "same mlp, Softplus(3)", "random Softplus(3) MLP 1"]
    assert all(next(n.parameters()).dtype == torch.float64 for n in nets.values())
    assert next(model.parameters()).dtype == torch.float32   # the originals are untouched
    assert nets["random Softplus(3) MLP 1"](x).shape == (2, 10)
