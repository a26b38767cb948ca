"""robattr.chapters.crosspaper: the five papers' headline evaluations as one call each, the
matrix's cost and direction helpers, and the library's robattr.timing.

Small random models on 8 x 8 images; every function must return its documented keys
with values in range, be deterministic under a seed, refuse bad arguments, and give the
known answer on models where the answer is known (constant attributions, a linear
attribution, a constant classifier).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

from robattr import timing
from robattr.attack_protocol import ATTACK_METHODS_WANG2020
from robattr.bounds import ball_smoothing_max_eps
from robattr.chapters import crosspaper as E

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")   # Captum and friends, this file only

SMALL = {
    "attack_auc_wang2020": dict(eps_list=(2 / 255, 8 / 255), k=4, steps=2, ig_steps=2, n_samples=2),
    "deviation_bounds_wangkong2023": dict(k=4, l2_steps=2, linf_steps=2, direct_steps=2, ig_steps=2),
    "certified_eps_wangkong2025": dict(n_samples=4, n_attack=2, n_check=4, steps=2, k=4),
    "interpretation_joo2023": dict(rps_samples=2, attack_steps=2, ratios=4),
    "retrieval_lim2021": dict(pgd_steps=2, relex_epochs=2, n_noisy=2, ratios=4,
                          methods=("SimGrad", "SmoothGrad", "IntGrad", "RelEx"), sg_samples=2,
                          ig_steps=2),
}


class Linear(nn.Module):
    """Logits W x + b: the gradient of every logit is constant. (The zero quadratic term
    keeps x in the graph of the gradient, which the attacks differentiate.)"""

    def __init__(self, seed=0, k=3):
        super().__init__()
        torch.manual_seed(seed)
        self.fc = nn.Linear(64, k)

    def forward(self, x):
        z = x.flatten(1)
        return self.fc(z) + 0.0 * (z ** 2).sum(1, keepdim=True)


class Quadratic(nn.Module):
    """Logit 0 = ½‖Bᵀx‖², logit 1 = −logit 0: the gradient B Bᵀ x is linear in x."""

    def __init__(self, B):
        super().__init__()
        self.register_buffer("B", B)

    def forward(self, x):
        q = 0.5 * ((x.flatten(1) @ self.B) ** 2).sum(1)
        return torch.stack([q, -q], 1)


class Constant(nn.Module):
    """The same logits for every input (a classifier an attack cannot move)."""

    def __init__(self):
        super().__init__()
        self.b = nn.Parameter(torch.tensor([0.0, 2.0, -1.0]))

    def forward(self, x):
        return self.b.expand(x.shape[0], -1) + 0.0 * x.flatten(1).sum(1, keepdim=True)


def _run(name, model, x, y, **kw):
    return getattr(E, name)(model, x, y, **{**SMALL[name], **kw})


# --------------------------------------------------------------------------- keys and ranges
@pytest.fixture(scope="module")
def cnn_results(cnn, batch):
    model, (x, y) = cnn(), batch()
    return {name: _run(name, model, x, y) for name in SMALL}


def test_keys_and_ranges(cnn_results):
    r = cnn_results["attack_auc_wang2020"]
    assert set(r) == {f"{p}_{m}" for p in ("kin_auc", "kin_auc_clean", "spearman_auc")
                      for m in ATTACK_METHODS_WANG2020}
    for m in ATTACK_METHODS_WANG2020:
        assert 0 <= r[f"kin_auc_{m}"] <= 1 + 1e-9
        # mass form: the clean top-k share of a map lies in [k/64, 1]; two budgets, AUC = mean
        assert 4 / 64 - 1e-9 <= r[f"kin_auc_clean_{m}"] <= 1 + 1e-9
        assert -1 - 1e-9 <= r[f"spearman_auc_{m}"] <= 1 + 1e-9
    r = cnn_results["deviation_bounds_wangkong2023"]
    for n in ("l2", "linf"):
        assert set(k for k in r if k.endswith(n)) == {f"{p}_{n}" for p in (
            "T_e", "T_c_deg", "dev", "angle_deg", "dev_over_Te", "frac_above_Te")}
        assert r[f"T_e_{n}"] > 0 and r[f"dev_{n}"] >= 0
        assert 0 <= r[f"T_c_deg_{n}"] <= 90 and 0 <= r[f"angle_deg_{n}"] <= 180
        assert 0 <= r[f"frac_above_Te_{n}"] <= 1
    r = cnn_results["certified_eps_wangkong2025"]
    assert set(r) == {"eps_cert_mean", "eps_cert_min", "h_unit_norm", "attack_eps",
                      "cos_attack_mean", "cos_attack_min", "frac_certified", "cert_violations"}
    assert 0 <= r["eps_cert_min"] <= r["eps_cert_mean"] and 0 < r["h_unit_norm"] <= 1 + 1e-6
    assert r["attack_eps"] == pytest.approx(r["eps_cert_min"])   # default: certificate check
    assert r["frac_certified"] == 1.0 and r["cert_violations"] == 0
    assert -1 <= r["cos_attack_min"] <= r["cos_attack_mean"] <= 1 + 1e-9
    r = cnn_results["interpretation_joo2023"]
    assert set(r) == {f"{p}_{m}" for p in ("rps", "ins", "advins") for m in E.METHODS_JOO2023}
    for m in E.METHODS_JOO2023:
        assert -1 <= r[f"rps_{m}"] <= 1 + 1e-6
        assert 0 <= r[f"ins_{m}"] <= 100 and 0 <= r[f"advins_{m}"] <= 100
    r = cnn_results["retrieval_lim2021"]
    assert set(r) == {"fooled"} | {f"{p}_{m}" for p in ("retrieval", "R") for m in E.METHODS_LIM2021}
    assert all(0 <= v <= 1 for v in r.values())


def test_deterministic_under_seed(cnn, batch, cnn_results):
    model, (x, y) = cnn(), batch()
    for name in ("attack_auc_wang2020", "certified_eps_wangkong2025", "retrieval_lim2021"):
        again = _run(name, model, x, y)
        assert again == pytest.approx(cnn_results[name], rel=1e-6, abs=1e-9), name


def test_seed_changes_noisy_results(cnn, batch):
    model, (x, y) = cnn(), batch()
    a = _run("certified_eps_wangkong2025", model, x, y, seed=0)
    b = _run("certified_eps_wangkong2025", model, x, y, seed=1)
    assert a["h_unit_norm"] != b["h_unit_norm"]


# --------------------------------------------------------------------------- known answers
@pytest.mark.parametrize("method", ["SM", "SG", "UG"])
def test_000_constant_attribution_keeps_its_clean_reference(batch, method):
    """A linear model's (mean) gradient is the same everywhere: no attack can move it, so
    Spearman is 1 at every budget (AUC len(eps_list) - 1) and the mass-form k-in equals its
    no-attack reference exactly -- which is below len(eps_list) - 1, since a map's own
    top-k holds only part of its mass. (IG always carries the factor x - 0, so its map is
    not constant.)"""
    model, (x, y) = Linear(), batch(2)
    eps = (1 / 255, 2 / 255, 4 / 255, 8 / 255)
    r = E.attack_auc_wang2020(model, x, y, methods=(method,), eps_list=eps, k=5, steps=2,
                         ig_steps=3, n_samples=3, multiply_by_input=False)
    assert r[f"kin_auc_{method}"] == pytest.approx(r[f"kin_auc_clean_{method}"], abs=1e-12)
    assert r[f"spearman_auc_{method}"] == pytest.approx(3.0, abs=1e-9)
    # the reference is 3 x the top-5 share of |W_y| (the gradient of the explained logit)
    w = model.fc.weight.detach().abs()[y]
    share = w.sort(1, descending=True).values[:, :5].sum(1) / w.sum(1)
    assert r[f"kin_auc_clean_{method}"] == pytest.approx(3 * share.double().mean().item(), rel=1e-5)
    assert r[f"kin_auc_clean_{method}"] < 3.0 - 1e-3


def test_000_attack_moves_a_nonlinear_map(cnn, batch):
    """On a random CNN the attack must lower k-in below its no-attack reference."""
    model, (x, y) = cnn(1), batch(4, 1)
    r = E.attack_auc_wang2020(model, x, y, methods=("SM",), eps_list=(8 / 255, 32 / 255, 64 / 255),
                         k=4, steps=5)
    assert r["kin_auc_SM"] < r["kin_auc_clean_SM"] - 1e-3


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10 ** 6), p=st.integers(1, 6), eps=st.floats(0.01, 0.5))
def test_001_linear_attribution_never_exceeds_T_e(seed, p, eps):
    """For logits ½‖Bᵀx‖² the saliency B Bᵀ x is linear, so Thm 1 (ℓ2) and Thm 2 (ℓ∞) are
    exact: no attack exceeds T_e, and T_e(ℓ2) = σ_max(B)² ε."""
    g = torch.Generator().manual_seed(seed)
    B = torch.randn(64, p, generator=g) / 8
    model = Quadratic(B)
    x = torch.rand(2, 1, 8, 8, generator=g)
    y = torch.zeros(2, dtype=torch.long)
    r = E.deviation_bounds_wangkong2023(model, x, y, eps_l2=eps, eps_linf=eps / 8, k=4, l2_steps=3,
                               linf_steps=3, direct_steps=3)
    assert r["T_e_l2"] == pytest.approx(float(torch.linalg.matrix_norm(B, 2)) ** 2 * eps,
                                        rel=1e-4)
    assert r["frac_above_Te_l2"] == 0 and r["frac_above_Te_linf"] == 0
    assert r["dev_over_Te_l2"] <= 1 + 1e-4 and r["dev_over_Te_linf"] <= 1 + 1e-4


def test_002_constant_map_is_certified_exactly(batch):
    """A linear model's unit-normalised gradient is constant: ‖h‖ = 1, the certified budget
    is Cor 1 (corrected) at ‖h‖ = M = 1, and no attack lowers the cosine."""
    model, (x, y) = Linear(), batch(2)
    r = E.certified_eps_wangkong2025(model, x, y, r=0.5, T=0.8, n_samples=4, n_attack=2, n_check=4,
                            steps=2, k=4, attack_eps=0.3)
    assert r["h_unit_norm"] == pytest.approx(1.0, abs=1e-5)
    assert r["eps_cert_mean"] == pytest.approx(float(ball_smoothing_max_eps(1.0, 1.0, 64, 0.5,
                                                                            0.8)), rel=1e-4)
    assert r["cos_attack_min"] == pytest.approx(1.0, abs=1e-5)
    assert r["frac_certified"] == 0.0 and r["cert_violations"] == 0   # 0.3 > certified budget


def test_003_constant_gradient_rps_one_and_attack_cannot_move_insertion(batch):
    model, (x, y) = Linear(), batch(3)
    r = E.interpretation_joo2023(model, x, y, methods=("Grad",), rps_samples=3, attack_steps=3,
                             ratios=5)
    assert r["rps_Grad"] == pytest.approx(1.0, abs=1e-6)
    assert r["advins_Grad"] == pytest.approx(r["ins_Grad"], abs=1e-9)


def test_004_constant_classifier_is_never_fooled_and_always_retrieved(batch):
    model, (x, y) = Constant(), batch(3)
    r = E.retrieval_lim2021(model, x, y, methods=("SimGrad", "RelEx"), pgd_steps=2, relex_epochs=2,
                        n_noisy=2, ratios=4)
    assert r["fooled"] == 0.0
    assert r["retrieval_SimGrad"] == 1.0 and r["retrieval_RelEx"] == 1.0


def test_004_pgd_fools_a_linear_model_at_a_large_budget(batch):
    model, (x, y) = Linear(2), batch(4, 2)
    r = E.retrieval_lim2021(model, x, y, methods=("SimGrad",), eps=0.5, pgd_steps=10, ratios=4)
    assert r["fooled"] > 0


# --------------------------------------------------------------------------- bad arguments
BAD = [
    ("attack_auc_wang2020", dict(methods=("XX",))),
    ("attack_auc_wang2020", dict(methods="SM")),
    ("attack_auc_wang2020", dict(eps_list=(0.1,))),
    ("attack_auc_wang2020", dict(eps_list=(0.2, 0.1))),
    ("attack_auc_wang2020", dict(k=0)),
    ("attack_auc_wang2020", dict(k=65)),
    ("attack_auc_wang2020", dict(steps=0)),
    ("deviation_bounds_wangkong2023", dict(norms=("l3",))),
    ("deviation_bounds_wangkong2023", dict(method="lrp")),
    ("deviation_bounds_wangkong2023", dict(eps_l2=-1.0)),
    ("certified_eps_wangkong2025", dict(T=1.0)),
    ("certified_eps_wangkong2025", dict(r=0.0)),
    ("certified_eps_wangkong2025", dict(base="gbp")),
    ("certified_eps_wangkong2025", dict(n_samples=1)),
    ("certified_eps_wangkong2025", dict(attack_eps=-0.1)),
    ("interpretation_joo2023", dict(gamma=1.5)),
    ("interpretation_joo2023", dict(methods=("Grad", "IG"))),
    ("interpretation_joo2023", dict(rps_eps=0.0)),
    ("retrieval_lim2021", dict(methods=("MASK",))),
    ("retrieval_lim2021", dict(eps=float("nan"))),
    ("retrieval_lim2021", dict(seed=-1)),
]


@pytest.mark.parametrize("name, kw", BAD)
def test_bad_arguments_raise(batch, name, kw):
    model, (x, y) = Linear(), batch(2)
    with pytest.raises(ValueError):
        getattr(E, name)(model, x, y, **kw)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_bad_inputs_raise(batch, name):
    model, (x, y) = Linear(), batch(2)
    fn = getattr(E, name)
    with pytest.raises(ValueError, match="model"):
        fn("not a model", x, y)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        fn(model, x + 2, y)
    with pytest.raises(ValueError, match="label"):
        fn(model, x, y[:1])
    with pytest.raises(ValueError, match="batch"):
        fn(model, x.flatten(1), y)


# --------------------------------------------------------------------------- cost, directions
def test_training_cost_reads_zoo_meta():
    model = Linear()
    with pytest.raises(ValueError, match="zoo_meta"):
        E.training_cost(model)
    model.zoo_meta = {"test_acc": 0.9, "seconds_per_epoch": 0.5, "train_seconds": 5.0,
                      "peak_memory_bytes": 2 ** 21, "cpu_seconds_per_epoch": 0.4}
    assert E.training_cost(model) == {"test_acc": 0.9, "seconds_per_epoch": 0.5,
                                      "cpu_seconds_per_epoch": 0.4, "train_seconds": 5.0,
                                      "peak_memory_mb": 2.0}
    model.zoo_meta = {"test_acc": 0.9, "cpu_seconds_per_epoch": None}   # an older record
    got = E.training_cost(model)
    assert math.isnan(got["peak_memory_mb"]) and math.isnan(got["cpu_seconds_per_epoch"])


def test_training_step_seconds(cnn, batch):
    model, (x, y) = cnn(), batch(4)
    before = [p.detach().clone() for p in model.parameters()]
    s = timing.training_step_seconds(model, x, y, method="l2", repeats=2)
    assert 0 < s < 60
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))   # untouched
    assert all(p.grad is None for p in model.parameters())
    with pytest.raises(ValueError, match="method"):
        timing.training_step_seconds(model, x, y)       # no zoo config and no method
    with pytest.raises(ValueError, match="labels"):
        timing.training_step_seconds(model, x, None, method="ce")


def test_directions():
    up = ["kin_auc_SM", "spearman_auc_IG", "eps_cert_mean", "cos_attack_min", "rps_Grad",
          "ins_LRP", "advins_GBP", "retrieval_RelEx", "R_SimGrad", "test_acc"]
    down = ["T_e_l2", "T_c_deg_linf", "dev_l2", "angle_deg_l2", "frac_above_Te_l2", "fooled",
            "seconds_per_epoch", "cpu_seconds_per_epoch", "train_seconds", "step_seconds",
            "peak_memory_mb", "cert_violations"]
    assert all(E.higher_is_better(k) for k in up)
    assert not any(E.higher_is_better(k) for k in down)
    with pytest.raises(ValueError):
        E.higher_is_better("")
    assert set(E.EVALUATIONS) == {"wang2020", "wangkong2023", "wangkong2025", "joo2023",
                                  "lim2021"}


def test_quantus_columns_are_lower_is_better():
    """The matrix's Quantus block (its four robustness metrics, by the adapter's names) ranks
    a smaller sensitivity or Lipschitz ratio as more robust."""
    from robattr.metrics.quantus_adapter import ROBUSTNESS_METRICS

    assert len(ROBUSTNESS_METRICS) == 4
    assert not any(E.higher_is_better(k) for k in ROBUSTNESS_METRICS)
    vals = np.array([0.1, 0.5, 0.3])                  # three rows' Max-Sensitivity
    s = 1.0 if E.higher_is_better("Max-Sensitivity") else -1.0
    ranks = (-vals * s).argsort().argsort() + 1        # the notebook's ranking, 1 = most robust
    assert ranks.tolist() == [1, 3, 2]


def test_learned_rows_drops_the_models_that_did_not_learn():
    import pandas as pd

    acc = pd.Series({"CE": 0.76, "AT": 0.71, "IG-NORM": 0.1135, "SSR": 0.5})
    kept, dropped = E.learned_rows(acc, 0.5)
    assert kept == ["CE", "AT", "SSR"] and dropped == ["IG-NORM"]       # 0.5 itself is kept
    assert E.learned_rows({"a": 0.2, "b": 0.3}, 0.0) == (["a", "b"], [])
    with pytest.raises(ValueError, match="only 1 of 4 rows.*IG-NORM 0.114"):
        E.learned_rows(acc, 0.75)
    assert E.learned_rows(acc, 0.75, at_least=1) == (["CE"], ["AT", "IG-NORM", "SSR"])
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="min_acc"):
            E.learned_rows(acc, bad)
    with pytest.raises(ValueError, match="accuracies"):
        E.learned_rows({"a": 1.5}, 0.5)


# --------------------------------------------------------------------------- timing rounds
def test_step_time_rounds_times_every_model_once_per_round(cnn, batch):
    (x, y) = batch(4)
    models = {}
    for name, method in (("ce", "ce"), ("l2", "l2")):
        m = cnn()
        m.zoo_meta = {"config": {"method": method, "loss": {}}}
        models[name] = m
    t = timing.step_time_rounds(models, x, y, 3)
    assert set(t) == {"ce", "l2"}
    assert all(v.shape == (3,) and (v > 0).all() and (v < 60).all() for v in t.values())
    with pytest.raises(ValueError, match="rounds"):
        timing.step_time_rounds(models, x, y, 0)
    with pytest.raises(ValueError, match="models"):
        timing.step_time_rounds({}, x, y, 2)


def test_faster_per_step_needs_enough_rounds_and_reaches_each_outcome():
    n = timing.MIN_TIMING_ROUNDS
    slow, fast = np.linspace(2.0, 2.1, n), np.linspace(1.0, 1.1, n)
    assert timing.faster_per_step({"a": slow, "b": fast}, "a", "b").verdict == "holds"
    assert timing.faster_per_step({"a": fast, "b": slow}, "a", "b").verdict == "does not hold"
    noisy = np.array([1.0, 2.0, 1.0, 2.0, 1.5][:n] + [1.5] * max(0, n - 5))
    assert timing.faster_per_step({"a": noisy, "b": noisy[::-1]}, "a", "b").verdict == "inconclusive"
    assert timing.faster_per_step({"a": slow[:n - 1], "b": fast[:n - 1]}, "a", "b") is None   # too few rounds
    assert timing.faster_per_step({"a": slow[:2], "b": fast[:2]}, "a", "b", min_rounds=2).verdict == "holds"
    assert "a − b seconds per training step, paired by round" in \
        timing.faster_per_step({"a": slow, "b": fast}, "a", "b").rule
    with pytest.raises(ValueError, match="no step times"):
        timing.faster_per_step({"a": slow}, "a", "b")
    with pytest.raises(ValueError, match="paired"):
        timing.faster_per_step({"a": slow, "b": fast[:-1]}, "a", "b")
    with pytest.raises(ValueError, match="min_rounds"):
        timing.faster_per_step({"a": slow, "b": fast}, "a", "b", min_rounds=1)
