"""Tests of robattr.metrics: oracles (scipy, skimage, numpy), properties (hypothesis),
degenerate inputs, bad inputs and gradients."""
from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from hypothesis.extra import numpy as hnp
from skimage.metrics import structural_similarity
from torch import nn

import robattr.metrics as M

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# --------------------------------------------------------------------------- helpers
def _grad(model, x, target=None, *, create_graph=False):
    """Plain input gradient with the package's call shape (kept local so these tests do
    not depend on the attributions module while it changes)."""
    if target is None:
        with torch.no_grad():
            target = model(x).argmax(1)
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        out = model(x).gather(1, target[:, None]).sum()
        (g,) = torch.autograd.grad(out, x, create_graph=create_graph)
    return g


def _mlp(seed=0, c=1, h=8, w=8, classes=4, act=None):
    torch.manual_seed(seed)
    layers = [nn.Flatten(), nn.Linear(c * h * w, 16), act or nn.Softplus(beta=3.0),
              nn.Linear(16, classes)]
    return nn.Sequential(*layers).eval()


def _ties_vectors(rng, n, d):
    """Random rows, about half of them with many ties (small integer values)."""
    rows = []
    for i in range(n):
        if i % 2:
            rows.append(rng.integers(-3, 4, size=d).astype(np.float64))
        else:
            rows.append(rng.normal(size=d))
    return np.stack(rows)


# map batches for hypothesis: values from a small set so that ties, zeros and
# constant maps are frequent
_values = hs.sampled_from([-2.0, -1.0, -0.5, 0.0, 0.0, 0.25, 0.5, 1.0, 3.0])
_floats = hs.floats(-10, 10, allow_nan=False, width=32)


@hs.composite
def map_pairs(draw, elements=None, min_d=1, max_d=24):
    n = draw(hs.integers(1, 3))
    d = draw(hs.integers(min_d, max_d))
    el = elements or hs.one_of(_values, _floats)
    a = draw(hnp.arrays(np.float64, (n, d), elements=el))
    b = draw(hnp.arrays(np.float64, (n, d), elements=el))
    return torch.from_numpy(a), torch.from_numpy(b)


# --------------------------------------------------------------------------- oracles
def test_rank_and_linear_correlations_match_scipy():
    rng = np.random.default_rng(0)
    for d in (2, 3, 10, 57):
        a = _ties_vectors(rng, 12, d)
        b = _ties_vectors(rng, 12, d)[::-1].copy()
        b[0] = a[0] * 2 + 1                           # a perfectly monotone pair
        ta, tb = torch.from_numpy(a), torch.from_numpy(b)
        sp, kd, pc = M.spearman(ta, tb), M.kendall(ta, tb), M.pearson(ta, tb)
        compared = 0
        for i in range(len(a)):
            if np.ptp(a[i]) == 0 or np.ptp(b[i]) == 0:
                continue                               # scipy gives NaN; tested below
            compared += 1
            assert sp[i].item() == pytest.approx(st.spearmanr(a[i], b[i])[0], abs=1e-10)
            assert kd[i].item() == pytest.approx(st.kendalltau(a[i], b[i])[0], abs=1e-10)
            assert pc[i].item() == pytest.approx(st.pearsonr(a[i], b[i])[0], abs=1e-10)
        assert compared >= 10, (d, compared)       # most rows are not constant


def test_float32_correlations_close_to_scipy():
    rng = np.random.default_rng(1)
    a = rng.normal(size=(5, 300)).astype(np.float32)
    b = (a + rng.normal(size=a.shape)).astype(np.float32)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for i in range(5):
        assert M.pearson(ta, tb)[i].item() == pytest.approx(st.pearsonr(a[i], b[i])[0], abs=1e-5)
        assert M.spearman(ta, tb)[i].item() == pytest.approx(st.spearmanr(a[i], b[i])[0],
                                                             abs=1e-5)


def test_kendall_concordant_fraction_naive_and_chunking():
    rng = np.random.default_rng(2)
    a, b = _ties_vectors(rng, 6, 23), _ties_vectors(rng, 6, 23)
    want = []
    for x, y in zip(a, b):
        d = len(x)
        conc = sum((x[i] - x[j]) * (y[i] - y[j]) > 0 for i in range(d) for j in range(i + 1, d))
        want.append(conc / (d * (d - 1) / 2))
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    got = M.kendall(ta, tb, variant="concordant")
    np.testing.assert_allclose(got.numpy(), want, atol=1e-12)
    # chunk size does not change anything, for either variant
    for variant in ("tau_b", "concordant"):
        torch.testing.assert_close(M.kendall(ta, tb, variant=variant, chunk_elems=7),
                                   M.kendall(ta, tb, variant=variant))
    # without ties: (tau + 1) / 2
    x, y = torch.randn(4, 40, dtype=torch.float64), torch.randn(4, 40, dtype=torch.float64)
    torch.testing.assert_close(M.kendall(x, y, variant="concordant"),
                               (M.kendall(x, y) + 1) / 2)


def test_average_ranks_match_scipy_rankdata():
    rng = np.random.default_rng(3)
    a = _ties_vectors(rng, 8, 31)
    got = M.average_ranks(torch.from_numpy(a)).numpy()
    np.testing.assert_allclose(got, st.rankdata(a, axis=1), atol=0)


def test_ssim_matches_skimage():
    rng = np.random.default_rng(4)
    x = rng.random((3, 12, 15))
    y = np.clip(x + 0.3 * rng.normal(size=x.shape), 0, 1)
    tx, ty = torch.from_numpy(x), torch.from_numpy(y)
    got = M.ssim(tx, ty, data_range=1.0)
    for i in range(3):
        assert got[i].item() == pytest.approx(structural_similarity(x[i], y[i], data_range=1.0),
                                              abs=1e-10)
    got = M.ssim(tx, ty, data_range=2.0, gaussian=True, use_sample_covariance=False)
    for i in range(3):
        want = structural_similarity(x[i], y[i], data_range=2.0, gaussian_weights=True,
                                     use_sample_covariance=False)
        assert got[i].item() == pytest.approx(want, abs=1e-10)
    # channels: skimage's channel_axis mean; per-example data range
    xc, yc = rng.random((2, 3, 9, 9)), rng.random((2, 3, 9, 9))
    got = M.ssim(torch.from_numpy(xc), torch.from_numpy(yc), data_range=torch.tensor([1.0, 3.0]))
    for i, r in enumerate((1.0, 3.0)):
        want = structural_similarity(xc[i], yc[i], data_range=r, channel_axis=0)
        assert got[i].item() == pytest.approx(want, abs=1e-10)
    # float32 path
    got32 = M.ssim(tx.float(), ty.float(), data_range=1.0, win_size=5)
    for i in range(3):
        want = structural_similarity(x[i], y[i], data_range=1.0, win_size=5)
        assert got32[i].item() == pytest.approx(want, abs=1e-5)


def test_topk_fraction_matches_numpy_sets():
    rng = np.random.default_rng(5)
    a, b = _ties_vectors(rng, 10, 40), _ties_vectors(rng, 10, 40)
    ta, tb = torch.from_numpy(a), torch.from_numpy(b)
    for k in (1, 5, 17, 40):
        got = M.topk_intersection(ta, tb, k)
        for i in range(len(a)):
            ka = set(np.argsort(-a[i], kind="stable")[:k])
            kb = set(np.argsort(-b[i], kind="stable")[:k])
            assert got[i].item() == pytest.approx(len(ka & kb) / k)


def test_topk_mass_matches_000_formula():
    rng = np.random.default_rng(6)
    a, b = rng.normal(size=(4, 3, 5, 5)), rng.normal(size=(4, 3, 5, 5))
    got = M.topk_intersection(torch.from_numpy(a), torch.from_numpy(b), 6, variant="mass",
                              reduce="abs_sum")
    for i in range(4):
        z, zp = np.abs(a[i]).sum(0).ravel(), np.abs(b[i]).sum(0).ravel()
        top = np.argsort(-(z / z.sum()), kind="stable")[:6]
        assert got[i].item() == pytest.approx((zp / zp.sum())[top].sum(), abs=1e-12)


def test_center_dislocation_by_hand():
    a = torch.zeros(2, 3, 6, 8)
    b = torch.zeros(2, 3, 6, 8)
    a[0, 1, 1, 2] = -2.0                      # |.| over channels: all mass at (1, 2)
    b[0, 0, 4, 6] = 0.5                       # at (4, 6): distance 5
    a[1, :, 0, 0] = 1.0                       # half the mass at (0, 0) ...
    a[1, 2, 2, 4] = 3.0                       # ... half at (2, 4): centre (1, 2)
    b[1, 0, 5, 7] = 1.0                       # centre (5, 7): distance sqrt(16 + 25)
    torch.testing.assert_close(M.mass_center(a), torch.tensor([[1.0, 2.0], [1.0, 2.0]]))
    torch.testing.assert_close(M.center_dislocation(a, b), torch.tensor([5.0, math.sqrt(41)]))
    # a zero map sits at the image centre ((H-1)/2, (W-1)/2)
    torch.testing.assert_close(M.mass_center(torch.zeros(1, 6, 8)), torch.tensor([[2.5, 3.5]]))


def test_cosine_matches_torch_and_conventions():
    a, b = torch.randn(5, 2, 4, 4, dtype=torch.float64), torch.randn(5, 2, 4, 4,
                                                                      dtype=torch.float64)
    want = nn.functional.cosine_similarity(a.flatten(1), b.flatten(1))
    torch.testing.assert_close(M.cosine_similarity(a, b), want)
    torch.testing.assert_close(M.cosine_distance(a, b), 1 - want)
    torch.testing.assert_close(M.cosine_distance(a, b, half=True), (1 - want) / 2)
    torch.testing.assert_close(M.cosine_angle(a, b), torch.rad2deg(torch.arccos(want)))
    torch.testing.assert_close(M.cosine_angle(a, a), torch.zeros(5, dtype=torch.float64))
    torch.testing.assert_close(M.cosine_angle(a, -a, degrees=False),
                               torch.full((5,), math.pi, dtype=torch.float64))
    # tiny and huge scales do not underflow / overflow
    torch.testing.assert_close(M.cosine_similarity(a.float() * 1e-30, b.float() * 1e30),
                               want.float(), atol=1e-5, rtol=1e-5)


# --------------------------------------------------------------------------- properties
SYMMETRIC = {
    "cosine": M.cosine_similarity,
    "pearson": M.pearson,
    "spearman": M.spearman,
    "kendall": M.kendall,
    "kendall_concordant": lambda a, b: M.kendall(a, b, variant="concordant"),
}


@SETTINGS
@given(map_pairs())
def test_symmetric_bounded_and_finite(pair):
    a, b = pair
    for name, f in SYMMETRIC.items():
        ab, ba = f(a, b), f(b, a)
        assert ab.shape == (a.shape[0],)
        assert torch.isfinite(ab).all(), name
        torch.testing.assert_close(ab, ba, atol=1e-12, rtol=0)
        low = 0.0 if name == "kendall_concordant" else -1.0
        assert bool(((ab >= low - 1e-12) & (ab <= 1 + 1e-12)).all()), name
    k = max(1, a.shape[1] // 3)
    t = M.topk_intersection(a, b, k)
    torch.testing.assert_close(t, M.topk_intersection(b, a, k))
    assert bool(((t >= 0) & (t <= 1)).all())
    m = M.topk_intersection(a, b, k, variant="mass")
    assert bool(((m >= 0) & (m <= 1 + 1e-12)).all())
    d = M.cosine_distance(a, b)
    assert bool(((d >= 0) & (d <= 2)).all())


@SETTINGS
@given(map_pairs(min_d=2))
def test_identity_gives_one(pair):
    a, _ = pair
    nonzero = a.abs().amax(1) > 0
    nonconst = a.amax(1) > a.amin(1)
    one = torch.ones(a.shape[0], dtype=a.dtype)
    # every row is checked: 1 where defined, the documented 0 for a zero / constant map
    # (Hypothesis draws such maps often, so a check on the defined rows alone is often empty)
    torch.testing.assert_close(M.cosine_similarity(a, a), torch.where(nonzero, one, 0 * one))
    for f in (M.pearson, M.spearman, M.kendall):
        torch.testing.assert_close(f(a, a), torch.where(nonconst, one, 0 * one))
    for k in (1, a.shape[1]):
        torch.testing.assert_close(M.topk_intersection(a, a, k), one)


@SETTINGS
@given(hs.integers(1, 3), hs.integers(7, 12), hs.integers(7, 12),
       hs.floats(-2, 2, allow_nan=False), hs.booleans())
def test_ssim_identity_and_constant_maps(n, h, w, c, gaussian):
    x = torch.rand(n, h, w, dtype=torch.float64)
    kw = dict(data_range=1.0, gaussian=gaussian) if not gaussian or min(h, w) >= 11 else \
        dict(data_range=1.0)
    torch.testing.assert_close(M.ssim(x, x, **kw), torch.ones(n, dtype=torch.float64))
    const = torch.full((n, h, w), c, dtype=torch.float64)
    torch.testing.assert_close(M.ssim(const, const, **kw), torch.ones(n, dtype=torch.float64))
    s = M.ssim(const, torch.zeros_like(const), **kw)
    assert torch.isfinite(s).all() and bool((s <= 1 + 1e-12).all())


def test_degenerate_maps_have_documented_values():
    z = torch.zeros(2, 1, 4, 4)
    c = torch.full((2, 1, 4, 4), 0.7)
    r = torch.randn(2, 1, 4, 4)
    zero = torch.zeros(2)
    for f in (M.cosine_similarity, M.pearson, M.spearman, M.kendall):
        torch.testing.assert_close(f(z, r), zero)
        torch.testing.assert_close(f(z, z), zero)
    for f in (M.pearson, M.spearman, M.kendall):
        torch.testing.assert_close(f(c, r), zero)
        torch.testing.assert_close(f(c, c), zero)
    torch.testing.assert_close(M.cosine_distance(z, r), torch.ones(2))
    torch.testing.assert_close(M.cosine_distance(z, r, half=True), torch.full((2,), 0.5))
    torch.testing.assert_close(M.kendall(c, r, variant="concordant"), zero)
    torch.testing.assert_close(M.topk_intersection(r, z, 3, variant="mass"), zero)
    torch.testing.assert_close(M.center_dislocation(z, z), zero)
    # single feature / single pixel
    one = torch.tensor([[2.0], [-1.0]])
    for f in (M.pearson, M.spearman, M.kendall):
        torch.testing.assert_close(f(one, one), zero)
    torch.testing.assert_close(M.cosine_similarity(one, one), torch.ones(2))
    torch.testing.assert_close(M.topk_intersection(one, one, 1), torch.ones(2))
    torch.testing.assert_close(M.center_dislocation(torch.ones(2, 1, 1), torch.ones(2, 1, 1)),
                               zero)
    # all ties in both maps but not constant: tau-b is defined; equal maps give 1
    t = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    torch.testing.assert_close(M.kendall(t, t), torch.ones(1))
    torch.testing.assert_close(M.spearman(t, t), torch.ones(1))


def test_auc_over_eps():
    assert M.auc_over_eps([1.0, 1.0, 1.0, 1.0]).item() == pytest.approx(3.0)
    v = torch.tensor([[1.0, 0.5, 0.25, 0.0], [0.2, 0.2, 0.2, 0.2]])
    torch.testing.assert_close(M.auc_over_eps(v, eps=[2, 4, 8, 16]),
                               torch.tensor([0.75 + 0.375 + 0.125, 0.6]))
    torch.testing.assert_close(M.auc_over_eps([1.0, 1.0, 1.0, 1.0], eps=[2, 4, 8, 16],
                                              spacing="eps"), torch.tensor(14.0))
    with pytest.raises(ValueError, match="eps"):
        M.auc_over_eps([1.0, 1.0], eps=[2, 4, 8])
    with pytest.raises(ValueError, match="eps"):
        M.auc_over_eps([1.0, 1.0], eps=[4, 2])
    with pytest.raises(ValueError, match="values"):
        M.auc_over_eps([1.0])
    with pytest.raises(ValueError, match="spacing"):
        M.auc_over_eps([1.0, 1.0], spacing="log")


def test_normalize_map_and_reduce_channels():
    a = torch.tensor([[[[-2.0, 1.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, -3.0]]]])
    torch.testing.assert_close(M.reduce_channels(a), torch.tensor([[[3.0, 1.0], [0.0, 4.0]]]))
    torch.testing.assert_close(M.reduce_channels(a, "sum"), torch.tensor([[[-1.0, 1.0],
                                                                          [0.0, -2.0]]]))
    s = M.reduce_channels(a)
    torch.testing.assert_close(M.normalize_map(s, "max"), s / 4)
    torch.testing.assert_close(M.normalize_map(s, "sum"), s / 8)
    torch.testing.assert_close(M.normalize_map(s, "minmax"), s / 4)
    q = M.normalize_map(torch.arange(101.0)[None], "minmax", q=0.99)
    assert q[0, 99].item() == pytest.approx(1.0) and q[0, 100].item() == 1.0
    assert q[0, 50].item() == pytest.approx(50 / 99)
    for mode in ("max", "sum", "minmax"):
        assert torch.equal(M.normalize_map(torch.zeros(2, 3), mode), torch.zeros(2, 3))
    with pytest.raises(ValueError, match="mode"):
        M.normalize_map(s, "l2")
    with pytest.raises(ValueError, match="q"):
        M.normalize_map(s, "minmax", q=0.0)
    with pytest.raises(ValueError, match="reduce"):
        M.reduce_channels(a, "max")


# --------------------------------------------------------------------------- gradients
def test_gradients_finite_on_zero_and_constant_maps():
    r = torch.randn(3, 1, 4, 4)
    for a0 in (torch.zeros(3, 1, 4, 4), torch.full((3, 1, 4, 4), 0.3)):
        for f in (M.cosine_similarity, M.cosine_distance, M.pearson,
                  lambda a, b: M.cosine_distance(a, b, half=True),
                  lambda a, b: M.topk_intersection(b, a, 4, variant="mass", reduce="abs_sum"),
                  lambda a, b: M.ssim(a, b, data_range=1.0, win_size=3),
                  lambda a, b: M.center_dislocation(a, b)):
            for pair in ((a0, r), (r, a0), (a0, a0.clone())):
                a = pair[0].clone().requires_grad_(True)
                b = pair[1].clone().requires_grad_(True)
                f(a, b).sum().backward()
                grads = [t.grad for t in (a, b) if t.grad is not None]
                assert grads and all(torch.isfinite(g).all() for g in grads)
    m = torch.zeros(2, 5, 5, requires_grad=True)
    M.mass_center(m).sum().backward()
    assert torch.isfinite(m.grad).all()


def test_gradcheck_differentiable_metrics():
    a = torch.randn(2, 7, dtype=torch.float64, requires_grad=True)
    b = torch.randn(2, 7, dtype=torch.float64, requires_grad=True)
    for f in (M.cosine_similarity, M.cosine_distance, M.pearson,
              lambda x, y: M.topk_intersection(x.detach(), y, 3, variant="mass")):
        assert torch.autograd.gradcheck(f, (a, b))
    x = torch.rand(1, 7, 7, dtype=torch.float64, requires_grad=True)
    y = torch.rand(1, 7, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda u, v: M.ssim(u, v, data_range=1.0, win_size=3), (x, y))
    assert torch.autograd.gradcheck(lambda u, v: M.center_dislocation(u, v), (x, y))


# --------------------------------------------------------------------------- model-based
class _SumModel(nn.Module):
    """Logit 0 = weighted pixel sum, logit 1 = 0: makes inserted / removed pixels visible."""

    def __init__(self, weights):
        super().__init__()
        self.register_buffer("w", weights)

    def forward(self, x):
        s = (x * self.w).flatten(1).sum(1)
        return torch.stack([s, torch.zeros_like(s)], dim=1)


def test_insertion_endpoints_equal_model_probabilities():
    model = _mlp(1, c=3, h=6, w=6)
    x = torch.rand(5, 3, 6, 6)
    attr = torch.randn(5, 3, 6, 6)
    y = torch.tensor([0, 1, 2, 3, 0])
    base = torch.rand(1, 3, 1, 1)
    with torch.no_grad():
        p_x = model(x).softmax(1)[torch.arange(5), y]
        p_b = model(base.expand_as(x)).softmax(1)[torch.arange(5), y]
    for batch_size in (1, 7, 256):
        ins = M.insertion(model, x, attr, y, baseline=base, batch_size=batch_size)
        assert ins.scores.shape == (5, 21) and ins.ratios.shape == (21,)
        torch.testing.assert_close(ins.scores[:, -1], p_x)
        torch.testing.assert_close(ins.scores[:, 0], p_b)
        torch.testing.assert_close(ins.mean, ins.scores.mean(1))
        for f in (M.deletion, M.preservation):
            c = f(model, x, attr, y, baseline=base, batch_size=batch_size)
            torch.testing.assert_close(c.scores[:, 0], p_x)
            torch.testing.assert_close(c.scores[:, -1], p_b)
    # default baseline is zeros, default target the predicted class
    ins = M.insertion(model, x, attr, ratios=[0.0, 1.0])
    with torch.no_grad():
        pred = model(x).argmax(1)
        p0 = model(torch.zeros_like(x)).softmax(1)[torch.arange(5), pred]
    torch.testing.assert_close(ins.scores[:, 0], p0)
    torch.testing.assert_close(ins.auc, ins.scores.mean(1))   # two points: trapezoid = mean


def test_curves_insert_and_remove_pixels_in_attribution_order():
    h = w = 4
    x = torch.ones(1, 2, h, w)
    weights = torch.arange(h * w, dtype=torch.float32).reshape(1, 1, h, w)
    model = _SumModel(weights)
    attr = weights.expand(1, 2, h, w).clone()           # most important = highest index
    ratios = [0.0, 0.25, 0.5, 1.0]
    # 2 channels × the sum of the top-n pixel indices
    top = lambda n: 2 * sum(range(16 - n, 16))           # noqa: E731
    low = lambda n: 2 * sum(range(n))                    # noqa: E731
    ins = M.insertion(model, x, attr, 0, ratios=ratios, output="logit")
    torch.testing.assert_close(ins.scores[0], torch.tensor([0.0, top(4), top(8), top(16)]))
    dele = M.deletion(model, x, attr, 0, ratios=ratios, output="logit")
    full = float(top(16))
    torch.testing.assert_close(dele.scores[0], torch.tensor([full, full - top(4), full - top(8),
                                                             0.0]))
    pres = M.preservation(model, x, attr, 0, ratios=ratios, output="logit")
    torch.testing.assert_close(pres.scores[0], torch.tensor([full, full - low(4), full - low(8),
                                                             0.0]))
    torch.testing.assert_close(pres.auc, torch.trapezoid(pres.scores, x=torch.tensor(ratios)))
    # an N×H×W attribution ranks the same way; flat N×D inputs work too
    ins2 = M.insertion(model, x, weights[:, 0], 0, ratios=ratios, output="logit")
    torch.testing.assert_close(ins2.scores, ins.scores)
    flat_model = nn.Sequential(nn.Unflatten(1, (2, h, w)), model)
    ins3 = M.insertion(flat_model, x.flatten(1), attr.flatten(1), 0, ratios=[0.0, 0.5],
                       output="logit")
    assert ins3.scores[0, 1].item() == pytest.approx(2 * sum(range(8, 16)))  # per feature


def test_adv_insertion_uses_attribution_at_x_adv():
    model = _mlp(2)
    x = torch.rand(3, 1, 8, 8)
    x_adv = (x + 0.05 * torch.randn_like(x)).clamp(0, 1)
    y = torch.tensor([0, 1, 2])
    got = M.adv_insertion(model, _grad, x, x_adv, y, ratios=10)
    want = M.insertion(model, x, _grad(model, x_adv, y), y, ratios=10)
    torch.testing.assert_close(got.scores, want.scores)


def test_feature_relevance():
    torch.testing.assert_close(M.feature_relevance(torch.tensor([0.4, 0.0, 0.5, 1.0]),
                                                   torch.tensor([0.2, 0.3, 1.0, 0.0])),
                               torch.tensor([2 * 0.4 * 0.8 / 1.2, 0.0, 0.0, 1.0]))
    assert M.feature_relevance(0.5, 0.5).item() == pytest.approx(0.5)
    model = _mlp(3)
    x, attr = torch.rand(2, 1, 8, 8), torch.randn(2, 1, 8, 8)
    p, d = M.preservation(model, x, attr), M.deletion(model, x, attr)
    torch.testing.assert_close(M.feature_relevance(p, d), M.feature_relevance(p.auc, d.auc))
    r = M.feature_relevance(p, d)
    assert bool(((r >= 0) & (r <= 1)).all())


def test_class_retrieval():
    model = _mlp(4)
    x = torch.rand(6, 1, 8, 8)
    with torch.no_grad():
        pred = model(x).argmax(1)
        pred0 = model(torch.zeros_like(x)).argmax(1)
    ones = torch.ones(6, 1, 8, 8)
    torch.testing.assert_close(M.class_retrieval(model, x, ones, pred, normalize=None),
                               torch.ones(6))
    torch.testing.assert_close(M.class_retrieval(model, x, 0 * ones, pred, normalize=None),
                               (pred0 == pred).float())
    # normalised explanation: a mask concentrated on one pixel
    expl = torch.zeros(6, 8, 8)
    expl[:, 3, 3] = -5.0
    got = M.class_retrieval(model, x, expl, pred)
    m = torch.zeros(6, 1, 8, 8)
    m[:, :, 3, 3] = 1.0
    with torch.no_grad():
        want = (model(x * m).argmax(1) == pred).float()
    torch.testing.assert_close(got, want)


def test_rps_properties_and_reproducibility():
    x = torch.rand(4, 1, 8, 8)
    y = torch.tensor([0, 1, 2, 3])
    linear = nn.Sequential(nn.Flatten(), nn.Linear(64, 4)).eval()
    # a linear model's gradient does not move: RPS = 1 whatever eps
    torch.testing.assert_close(M.rps(linear, _grad, x, y, eps=0.3), torch.ones(4))
    model = _mlp(5)
    torch.testing.assert_close(M.rps(model, _grad, x, y, eps=0.0, n_samples=2), torch.ones(4))
    runs = [M.rps(model, _grad, x, y, eps=0.2, n_samples=5,
                  generator=torch.Generator().manual_seed(7), batch_size=bs,
                  return_samples=True) for bs in (1, 3, 256)]
    assert runs[0].shape == (4, 5)
    for r in runs[1:]:
        torch.testing.assert_close(r, runs[0])
    assert bool((runs[0] <= 1).all()) and bool((runs[0].mean() < 1).item())
    pcc = M.rps(model, _grad, x, y, eps=0.2, n_samples=3, similarity=M.pearson)
    ss = M.rps(model, _grad, x, y, eps=0.2, n_samples=3,
               similarity=lambda a, b: M.ssim(M.normalize_map(a), M.normalize_map(b),
                                              data_range=1.0))
    assert torch.isfinite(pcc).all() and torch.isfinite(ss).all()


# --------------------------------------------------------------------------- bad input
def test_bad_inputs_raise_value_errors_naming_the_argument():
    a, b = torch.randn(2, 10), torch.randn(2, 10)
    model = _mlp(6)
    x = torch.rand(2, 1, 8, 8)
    with pytest.raises(ValueError, match="same shape"):
        M.cosine_similarity(a, torch.randn(2, 11))
    with pytest.raises(ValueError, match="same shape"):
        M.spearman(a, torch.randn(3, 10))
    with pytest.raises(ValueError, match="batch-first"):
        M.pearson(torch.randn(10), torch.randn(10))
    with pytest.raises(ValueError, match="must be a torch.Tensor"):
        M.kendall(a.numpy(), b)
    for k in (0, 11, -1, 2.0, True):
        with pytest.raises(ValueError, match="k must be"):
            M.topk_intersection(a, b, k)
    with pytest.raises(ValueError, match="variant"):
        M.topk_intersection(a, b, 2, variant="soft")
    with pytest.raises(ValueError, match="variant"):
        M.kendall(a, b, variant="tau_c")
    with pytest.raises(ValueError, match="reduce"):
        M.cosine_similarity(a, b, reduce="l2")
    img = torch.rand(2, 8, 8)
    with pytest.raises(TypeError):
        M.ssim(img, img)                                     # data_range is required
    for bad in (0.0, -1.0, float("nan"), torch.tensor([1.0, 1.0, 1.0])):
        with pytest.raises(ValueError, match="data_range"):
            M.ssim(img, img, data_range=bad)
    with pytest.raises(ValueError, match="win_size"):
        M.ssim(img, img, data_range=1.0, win_size=9)
    with pytest.raises(ValueError, match="win_size"):
        M.ssim(img, img, data_range=1.0, win_size=4)
    with pytest.raises(ValueError, match="win_size"):
        M.ssim(img, img, data_range=1.0, gaussian=True)      # 11×11 window > 8×8
    with pytest.raises(ValueError, match="N×H×W"):
        M.ssim(a, b, data_range=1.0)
    with pytest.raises(ValueError, match="N×H×W"):
        M.center_dislocation(a, b)
    for n in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n_samples"):
            M.rps(model, _grad, x, None, 0.1, n_samples=n)
    for eps in (-0.1, float("inf"), "0.1"):
        with pytest.raises(ValueError, match="eps"):
            M.rps(model, _grad, x, None, eps)
    with pytest.raises(ValueError, match="batch_size"):
        M.rps(model, _grad, x, None, 0.1, batch_size=0)
    with pytest.raises(ValueError, match="clamp"):
        M.rps(model, _grad, x, None, 0.1, clamp=(1.0, 0.0))
    attr = torch.randn(2, 1, 8, 8)
    with pytest.raises(ValueError, match="attribution"):
        M.insertion(model, x, torch.randn(2, 1, 8, 7))
    with pytest.raises(ValueError, match="batch size"):
        M.deletion(model, x, torch.randn(3, 1, 8, 8))
    for bad in ([-0.1, 0.5], [0.5, 1.5], [], [[0.1]], 0):
        with pytest.raises(ValueError, match="ratios"):
            M.insertion(model, x, attr, ratios=bad)
    with pytest.raises(ValueError, match="target"):
        M.insertion(model, x, attr, torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="target"):
        M.preservation(model, x, attr, torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError, match="baseline"):
        M.insertion(model, x, attr, baseline=torch.zeros(3, 8, 8))
    with pytest.raises(ValueError, match="output"):
        M.insertion(model, x, attr, output="loss")
    with pytest.raises(ValueError, match="batch_size"):
        M.insertion(model, x, attr, batch_size=0)
    with pytest.raises(ValueError, match="x_adv"):
        M.adv_insertion(model, _grad, x, torch.rand(2, 1, 8, 9))
    with pytest.raises(ValueError, match="normalize"):
        M.class_retrieval(model, x, attr, None, normalize="sum")
    with pytest.raises(ValueError, match="mask"):
        M.class_retrieval(model, x, torch.rand(2, 1, 7, 7), None, normalize=None)
    with pytest.raises(ValueError, match="mask"):
        M.class_retrieval(model, x, torch.rand(3, 1, 8, 8), None)
