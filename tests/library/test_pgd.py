"""Tests for robattr.attacks: PGD on the prediction and the projections."""
from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

from robattr import data
from robattr.attacks import pgd, project, project_l2, project_linf
from robattr.models import build
from robattr.train import fit


@pytest.fixture(scope="module")
def trained():
    """A digits MLP trained for a few epochs (~0.5 s) and 64 test images."""
    torch.manual_seed(0)
    model = build("mlp", "digits")
    fit(model, data.load("digits", "train"), epochs=4, batch_size=64, progress=False,
        measure_memory=False)
    x, y = data.as_tensors(data.load("digits", "test"), n=64)
    return model.eval(), x, y


def _ce(model, x, y):
    with torch.no_grad():
        return F.cross_entropy(model(x), y, reduction="none")


def _dist(x_adv, x, norm):
    d = (x_adv - x).flatten(1)
    return d.abs().amax(1) if norm == "linf" else d.norm(dim=1)


# --------------------------------------------------------------------------- projections
def test_project_linf_and_l2():
    delta = torch.tensor([[3.0, -4.0], [0.1, 0.2]])
    assert torch.equal(project_linf(delta, 0.5), torch.tensor([[0.5, -0.5], [0.1, 0.2]]))
    out = project_l2(delta, 1.0)
    torch.testing.assert_close(out[0], torch.tensor([0.6, -0.8]))
    assert torch.equal(out[1], delta[1])  # inside the ball: untouched
    assert torch.equal(project_l2(torch.zeros(2, 3), 0.0), torch.zeros(2, 3))
    x = torch.tensor([[0.95, 0.05]])
    torch.testing.assert_close(project(torch.tensor([[1.5, -0.5]]), x, 0.2, "linf"),
                               torch.tensor([[1.0, 0.0]]))
    with pytest.raises(ValueError, match="norm"):
        project(x, x, 0.1, "l1")
    with pytest.raises(ValueError, match="eps"):
        project_l2(delta, -1.0)


# --------------------------------------------------------------------------- feasibility
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(norm=st.sampled_from(["linf", "l2"]), eps=st.floats(0.0, 1.0), steps=st.integers(1, 4),
       restarts=st.integers(1, 2), random_start=st.booleans(), targeted=st.booleans(),
       step_mult=st.floats(0.1, 5.0), seed=st.integers(0, 2**16))
def test_never_leaves_the_ball_or_the_pixel_range(trained, norm, eps, steps, restarts,
                                                  random_start, targeted, step_mult, seed):
    model, x, y = trained
    x, y = x[:16], y[:16]
    if norm == "l2":
        eps = 4 * eps
    gen = torch.Generator().manual_seed(seed)
    x_adv = pgd(model, x, (y + 1) % 10 if targeted else y, eps=eps, norm=norm, steps=steps,
                step_size=step_mult * eps / steps, restarts=restarts,
                random_start=random_start, targeted=targeted, generator=gen)
    assert x_adv.shape == x.shape and x_adv.dtype == x.dtype and not x_adv.requires_grad
    assert float(_dist(x_adv, x, norm).max()) <= eps + 1e-6
    assert float(x_adv.min()) >= 0.0 and float(x_adv.max()) <= 1.0


# --------------------------------------------------------------------------- strength
@pytest.mark.parametrize("norm, eps", [("linf", 0.1), ("l2", 1.0)])
def test_raises_the_loss(trained, norm, eps):
    model, x, y = trained
    clean = _ce(model, x, y)
    x_adv = pgd(model, x, y, eps=eps, norm=norm, steps=10, random_start=False)
    adv = _ce(model, x_adv, y)
    with torch.no_grad():
        wrong = model(x_adv).argmax(1) != y
    # the first iterate is x itself, and the best iterate is kept: never worse
    assert bool(((adv >= clean - 1e-6) | wrong).all())
    assert float(adv.mean()) > float(clean.mean()) + 0.5
    with torch.no_grad():
        assert float((model(x_adv).argmax(1) == y).float().mean()) < \
            float((model(x).argmax(1) == y).float().mean())


@pytest.mark.parametrize("norm, eps", [("linf", 0.05), ("l2", 0.5)])
def test_restarts_never_worse_than_one_start(trained, norm, eps):
    model, x, y = trained
    one = pgd(model, x, y, eps=eps, norm=norm, steps=3, restarts=1,
              generator=torch.Generator().manual_seed(7))
    many = pgd(model, x, y, eps=eps, norm=norm, steps=3, restarts=4,
               generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        w1, w4 = model(one).argmax(1) != y, model(many).argmax(1) != y
    l1, l4 = _ce(model, one, y), _ce(model, many, y)
    assert bool((w4 | ~w1).all())                       # success is never lost
    same = w1 == w4
    assert bool((l4[same] >= l1[same] - 1e-6).all())    # among equals, the loss never drops


def test_targeted_moves_toward_the_target(trained):
    model, x, y = trained
    target = (y + 3) % 10
    x_adv = pgd(model, x, target, eps=0.2, steps=20, targeted=True,
                generator=torch.Generator().manual_seed(0))
    before, after = _ce(model, x, target), _ce(model, x_adv, target)
    assert float(after.mean()) < float(before.mean()) - 0.5
    with torch.no_grad():
        hit_before = float((model(x).argmax(1) == target).float().mean())
        hit_after = float((model(x_adv).argmax(1) == target).float().mean())
    assert hit_after > hit_before + 0.2


def test_custom_loss_and_reproducibility(trained):
    model, x, y = trained
    logit0 = lambda m, xa, _: m(xa)[:, 0]  # noqa: E731 - push every input towards class 0
    x_adv = pgd(model, x, y, eps=0.1, loss=logit0, steps=5)
    with torch.no_grad():
        assert float((model(x_adv)[:, 0] - model(x)[:, 0]).min()) > 0
    a = pgd(model, x, y, eps=0.1, steps=2, generator=torch.Generator().manual_seed(1))
    b = pgd(model, x, y, eps=0.1, steps=2, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a, b)
    last = pgd(model, x, y, eps=0.1, steps=2, select="last",
               generator=torch.Generator().manual_seed(1))
    assert float(_dist(last, x, "linf").max()) <= 0.1 + 1e-6
    with pytest.raises(ValueError, match="one value per example"):
        pgd(model, x, y, eps=0.1, loss=lambda m, xa, _: m(xa).sum())


def test_eps_zero_returns_the_input(trained):
    model, x, y = trained
    assert torch.equal(pgd(model, x, y, eps=0.0), x)


def test_model_mode_and_grads_untouched():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(16, 8), nn.BatchNorm1d(8), nn.ReLU(),
                          nn.Dropout(0.5), nn.Linear(8, 3)).train()
    model[2].eval()  # a frozen BatchNorm inside a training model keeps its own mode
    stats = model[2].running_mean.clone()
    x, y = torch.rand(5, 1, 4, 4), torch.tensor([0, 1, 2, 0, 1])
    pgd(model, x, y, eps=0.1, steps=3)
    assert model.training and model[4].training and not model[2].training
    assert torch.equal(model[2].running_mean, stats)
    assert all(p.grad is None for p in model.parameters())
    model.train()
    pgd(model, x, y, eps=0.1, steps=2)
    assert torch.equal(model[2].running_mean, stats)  # eval mode during the attack


@pytest.mark.parametrize("kwargs, match", [
    (dict(eps=-0.1), "eps"),
    (dict(eps=float("inf")), "eps"),
    (dict(eps=0.1, steps=0), "steps"),
    (dict(eps=0.1, steps=2.0), "steps"),
    (dict(eps=0.1, norm="l1"), "norm"),
    (dict(eps=0.1, restarts=0), "restarts"),
    (dict(eps=0.1, step_size=-1.0), "step_size"),
    (dict(eps=0.1, loss="mse"), "loss"),
    (dict(eps=0.1, select="first"), "select"),
])
def test_bad_input_raises(trained, kwargs, match):
    model, x, y = trained
    with pytest.raises(ValueError, match=match):
        pgd(model, x[:4], y[:4], **kwargs)


def test_bad_tensors_raise(trained):
    model, x, y = trained
    with pytest.raises(ValueError, match="one label per example"):
        pgd(model, x[:4], y[:3], eps=0.1)
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        pgd(model, x[:4] * 2 - 0.5, y[:4], eps=0.1)
    with pytest.raises(ValueError, match="floating-point"):
        pgd(model, (x[:4] * 255).long(), y[:4], eps=0.1)
