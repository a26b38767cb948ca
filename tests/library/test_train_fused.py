"""robattr.train.fused: the training-time Softplus is PyTorch's Softplus, computed faster."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from robattr.models import build
from robattr.train import fit
from robattr.train.fused import FusedSoftplus, fused_softplus

BETAS = st.sampled_from([0.5, 1.0, 3.0, 10.0, 50.0])


def _exact(x: torch.Tensor, beta: float) -> torch.Tensor:
    """softplus in float64 with log1p, no threshold."""
    return x.clamp_min(0) + torch.log1p(torch.exp(-beta * x.abs())) / beta


@settings(max_examples=30, deadline=None)
@given(beta=BETAS, seed=st.integers(0, 2**31 - 1), scale=st.sampled_from([0.1, 1.0, 30.0]))
def test_values_and_first_and_second_derivatives_in_float64(beta, seed, scale):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(257, generator=g, dtype=torch.float64) * scale).requires_grad_()
    ours = FusedSoftplus(beta)(x)
    # log(1 + u) against log1p(u): absolute error below float64's epsilon over beta
    torch.testing.assert_close(ours, _exact(x, beta), rtol=1e-13, atol=3e-16 / beta)
    (g1,) = torch.autograd.grad(ours.sum(), x, create_graph=True)
    torch.testing.assert_close(g1, torch.sigmoid(beta * x), rtol=1e-14, atol=0)
    (h1,) = torch.autograd.grad(g1.sum(), x)
    s = torch.sigmoid(beta * x)
    torch.testing.assert_close(h1, beta * s * (1 - s), rtol=1e-12, atol=1e-300)


@pytest.mark.parametrize("beta", [0.5, 3.0, 50.0])
def test_float32_gives_pytorchs_softplus_threshold_included(beta):
    x = torch.linspace(-60 / beta, 60 / beta, 40001).requires_grad_()
    ours, theirs = FusedSoftplus(beta)(x), F.softplus(x, beta)
    torch.testing.assert_close(ours, theirs, rtol=3e-7, atol=2e-7 / beta)
    linear = beta * x > 20                     # where PyTorch returns x itself
    assert torch.equal(ours[linear], x[linear])
    (g1,) = torch.autograd.grad(ours.sum(), x)
    (g2,) = torch.autograd.grad(theirs.sum(), x)
    torch.testing.assert_close(g1, g2, rtol=1e-6, atol=1e-7)
    assert torch.equal(g1[linear], g2[linear])


def test_gradcheck_and_gradgradcheck():
    xd = torch.randn(12, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(FusedSoftplus(2.0), (xd,))
    assert torch.autograd.gradgradcheck(FusedSoftplus(2.0), (xd,))


def test_swap_is_undone_on_exit_and_after_an_error():
    model = build("cnn", "digits", "softplus", 3.0)
    before = [m for m in model.modules() if isinstance(m, nn.Softplus)]
    assert before and not any(isinstance(m, FusedSoftplus) for m in before)
    with fused_softplus(model) as n:
        inside = [m for m in model.modules() if isinstance(m, nn.Softplus)]
        assert n == len(before) and all(isinstance(m, FusedSoftplus) for m in inside)
        assert [m.beta for m in inside] == [m.beta for m in before]
    assert [m for m in model.modules() if isinstance(m, nn.Softplus)] == before
    try:
        with fused_softplus(model):
            raise KeyError("boom")
    except KeyError:
        pass
    assert [m for m in model.modules() if isinstance(m, nn.Softplus)] == before
    relu = build("cnn", "digits")
    with fused_softplus(relu) as n:
        assert n == 0


def test_fit_trains_the_same_model_fused_or_not_and_gives_back_its_layers():
    torch.manual_seed(0)
    x, y = torch.rand(64, 1, 8, 8), torch.randint(0, 10, (64,))
    models = []
    for fused in (True, False):
        torch.manual_seed(1)
        model = build("cnn", "digits", "softplus", 3.0)
        layers = [m for m in model.modules() if isinstance(m, nn.Softplus)]
        fit(model, (x, y), epochs=2, batch_size=16, progress=False, fused=fused)
        assert [m for m in model.modules() if isinstance(m, nn.Softplus)] == layers
        models.append(model)
    for a, b in zip(models[0].parameters(), models[1].parameters()):
        torch.testing.assert_close(a, b, rtol=1e-3, atol=1e-4)  # Adam's steps
        # magnify rounding where a gradient is near zero; a wrong Softplus misses by far more
