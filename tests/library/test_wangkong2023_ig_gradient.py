"""001 (Wang & Kong 2023), Sec. C.1: the structure of the Jacobian of Integrated Gradients."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st
from torch import nn

from robattr.attributions import IG_METHODS
from robattr.bounds import deviation as D

FAST = settings(max_examples=12, deadline=None)


def random_softplus_net(seed, d, h, k, beta, depth):
    torch.manual_seed(seed)
    layers, w = [], d
    for _ in range(depth):
        layers += [nn.Linear(w, h), nn.Softplus(beta)]
        w = h
    return nn.Sequential(*layers, nn.Linear(w, k)).double().eval()


class Quadratic(nn.Module):
    """Logit c is ½ xᵀ A_c x + b_cᵀ x: a constant Hessian A_c per class."""

    def __init__(self, A, b):
        super().__init__()
        self.A, self.b = A, b

    def forward(self, x):
        return 0.5 * torch.einsum("ni,cij,nj->nc", x, self.A, x) + x @ self.b.T


@FAST
@given(seed=st.integers(0, 10_000), d=st.integers(1, 6), depth=st.integers(1, 3),
       steps=st.integers(1, 9), method=st.sampled_from(IG_METHODS[:4]),
       beta=st.floats(0.5, 20))
def test_parts_sum_to_the_autograd_jacobian_of_ig(seed, d, depth, steps, method, beta):
    if method == "trapezoid" and steps < 2:
        steps = 2
    model = random_softplus_net(seed, d, 5, 3, beta, depth)
    x = torch.randn(3, d, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    x[0, 0] = 0.0                                   # one pixel at the baseline
    a, B = D.ig_jacobian_parts(model, x, 1, steps=steps, method=method)
    fn = D.attribution_function(model, "ig", 1, steps=steps, ig_method=method)
    J = D.dense_jacobian(fn, x)
    full = torch.diag_embed(a.reshape(3, d)) + B
    assert torch.allclose(full, J, rtol=1e-9, atol=1e-11)
    # rows with x_i = 0 carry no Hessian term: exactly diagonal
    assert torch.all(B[0, 0] == 0)
    assert torch.all(J[0, 0, 1:] == 0)


@FAST
@given(seed=st.integers(0, 10_000), d=st.integers(2, 6), steps=st.integers(1, 64),
       method=st.sampled_from(["left", "right", "midpoint"]))
def test_quadratic_offdiagonal_is_exactly_x_i_A_ij_times_the_weight(seed, d, steps, method):
    rng = np.random.default_rng(seed)
    A = torch.from_numpy(rng.standard_normal((2, d, d)))
    A = A + A.transpose(1, 2)
    b = torch.from_numpy(rng.standard_normal((2, d)))
    x = torch.from_numpy(rng.standard_normal((2, d)))
    w = D.ig_hessian_weight(steps, method)
    expected = {"right": (steps + 1) / (2 * steps), "left": (steps - 1) / (2 * steps),
                "midpoint": 0.5}[method]
    assert w == pytest.approx(expected, rel=1e-12, abs=1e-15)
    _, B = D.ig_jacobian_parts(Quadratic(A, b), x, 0, steps=steps, method=method)
    assert torch.allclose(B, w * x[:, :, None] * A[0][None], rtol=1e-10, atol=1e-12)
    # the paper's claim would make this vanish as steps grow; it tends to x_i A_ij / 2
    if method == "right":
        assert w > 0.5


def test_hessian_weight_limits():
    assert D.ig_hessian_weight(1, "right") == pytest.approx(1.0)
    assert D.ig_hessian_weight(1, "left") == pytest.approx(0.0)
    for m in (2, 10, 1000):
        assert D.ig_hessian_weight(m, "trapezoid") == pytest.approx(0.5)
        assert D.ig_hessian_weight(m, "gausslegendre") == pytest.approx(0.5)
    assert D.ig_hessian_weight(10 ** 5, "right") == pytest.approx(0.5, abs=1e-5)
    with pytest.raises(ValueError):
        D.ig_hessian_weight(0)
    with pytest.raises(ValueError):
        D.ig_hessian_weight(4, "simpson")


def test_diagonal_dominance_rows_mask():
    J = torch.tensor([[[2.0, 1.0, 0.0], [3.0, 1.0, 0.0], [0.0, 0.0, 5.0]]])
    full = D.diagonal_dominance(J)
    assert full["diag_mass"].item() == pytest.approx(8 / 12)
    assert full["dominant_rows"].item() == pytest.approx(2 / 3)
    part = D.diagonal_dominance(J, rows=torch.tensor([[True, True, False]]))
    assert part["diag_mass"].item() == pytest.approx(3 / 7)
    assert part["dominant_rows"].item() == pytest.approx(1 / 2)
    none = D.diagonal_dominance(J, rows=torch.zeros(1, 3, dtype=torch.bool))
    assert torch.isnan(none["diag_mass"]).all()
    with pytest.raises(ValueError):
        D.diagonal_dominance(J, rows=torch.ones(3, dtype=torch.bool))


def test_ig_jacobian_parts_bad_input_and_refusal():
    model = random_softplus_net(0, 4, 5, 3, 3.0, 1)
    x = torch.rand(2, 4, dtype=torch.float64)
    with pytest.raises(ValueError):
        D.ig_jacobian_parts("not a model", x)
    with pytest.raises(ValueError):
        D.ig_jacobian_parts(model, x, steps=0)
    with pytest.raises(ValueError):
        D.ig_jacobian_parts(model, x[0])
    with pytest.raises(D.DenseJacobianTooLarge, match="one image"):
        D.ig_jacobian_parts(model, x, steps=4, max_bytes=100)


def test_ig_jacobian_parts_takes_a_few_images_at_a_time_within_its_memory():
    model = random_softplus_net(0, 4, 5, 3, 3.0, 1)
    x = torch.rand(5, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    whole = D.ig_jacobian_parts(model, x, steps=4)
    one_image = 4 * 4 * 4 * 8 * 2                       # steps x d x d x float64 x 2
    for budget in (one_image, 2 * one_image + 1):       # one image, then two, at a time
        parts = D.ig_jacobian_parts(model, x, steps=4, max_bytes=budget)
        for got, want in zip(parts, whole):
            torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_relu_limit_fixed_steps_becomes_diagonal():
    """At a fixed step count, a very large softplus beta makes the sampled Hessians
    vanish (no node sits on a kink), so J_IG is diagonal: the beta limit of the paper."""
    model = random_softplus_net(1, 5, 6, 3, 1e5, 2)
    x = torch.rand(2, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(3)) + 0.1
    _, B = D.ig_jacobian_parts(model, x, 0, steps=3)
    assert float(B.abs().max()) < 1e-8
