"""003's units and protocols against the authors' formulas, written here from the math.

003's released code (joshua840/RobustAGA) feeds its networks the *normalised* input
x_n = (x − μ)/σ: its regularisers differentiate w.r.t. x_n and draw their noise in x_n's
units, its Insertion masks x_n (a missing pixel becomes the mean colour), and its RPS clamps
the noisy x_n to the clean batch's range. robattr's models take pixels and normalise in
their first layer (:class:`robattr.models.Normalize`). Each test builds random small
networks ``Normalize(μ, σ) → body``, computes the authors' quantity on ``body`` with x_n
as its input, and checks that robattr's loss or metric, called on the whole model with
pixels, gives the same number to ~1e-10 in float64.
"""
from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.nn import functional as F

from robattr.metrics import PROTOCOLS, adv_insertion, insertion, insertion_inputs, rps
from robattr.models import Normalize
from robattr.train import make_loss

TOL = dict(rel=1e-10, abs=1e-12)


# --------------------------------------------------------------------------- random nets
@st.composite
def nets(draw, max_channels=3):
    """(model, body, mean, std, x, y): a Softplus CNN behind a Normalize layer with random
    per-channel mean and std, float64, and a small batch of pixels in [0, 1]."""
    c = draw(st.integers(1, max_channels))
    side = draw(st.integers(3, 5))
    k = draw(st.integers(2, 4))
    n = draw(st.integers(1, 3))
    hidden = draw(st.integers(2, 4))
    beta = draw(st.floats(1.0, 5.0))
    mean = draw(st.lists(st.floats(-0.5, 1.0), min_size=c, max_size=c))
    std = draw(st.lists(st.floats(0.05, 1.5), min_size=c, max_size=c))
    seed = draw(st.integers(0, 2**16))
    torch.manual_seed(seed)
    body = nn.Sequential(nn.Conv2d(c, hidden, 3, padding=1), nn.Softplus(beta), nn.Flatten(),
                         nn.Linear(hidden * side * side, k)).double()
    model = nn.Sequential(Normalize(mean, std), *body).double()
    gen = torch.Generator().manual_seed(seed + 1)
    x = torch.rand(n, c, side, side, generator=gen, dtype=torch.float64)
    y = torch.randint(0, k, (n,), generator=gen)
    norm = model[0]
    return model, body, norm.mean, norm.std, x, y


def _logit_grad(f, inp, y, create_graph=False):
    """∇_inp of the true-class logit of f, summed over the batch (per-example gradients)."""
    inp = inp.detach().requires_grad_(True)
    out = f(inp)
    (g,) = torch.autograd.grad(out[torch.arange(len(y)), y].sum(), inp,
                               create_graph=create_graph)
    return g, out


def _align_terms(f, inp, noise, y):
    """003 Eq. 4-5 on the network f with input inp: (CE, l2, cosd), batch means."""
    g, out = _logit_grad(f, inp, y)
    g_r, _ = _logit_grad(f, inp + noise, y)
    g, g_r = g.flatten(1), g_r.flatten(1)
    l2 = ((g_r - g) ** 2).sum(1).mean()
    cos = (g_r * g).sum(1) / (g_r.norm(dim=1) * g.norm(dim=1))
    return F.cross_entropy(out, y).detach(), l2, (1 - cos.mean()) / 2


def _hessian_vector_sq(f, inp, v, y):
    inp = inp.detach().requires_grad_(True)
    out = f(inp)
    (g,) = torch.autograd.grad(out[torch.arange(len(y)), y].sum(), inp, create_graph=True)
    (hv,) = torch.autograd.grad((g * v).sum(), inp)
    return (hv ** 2).flatten(1).sum(1).mean()


def _fixed(mp, name, value):
    """torch.<name> (rand_like / randn) returns ``value`` for tensors of its shape."""
    real = getattr(torch, name)
    calls = []

    def fake(*args, **kw):
        shape = tuple(args[0].shape) if name == "rand_like" else tuple(
            args[0] if len(args) == 1 and not isinstance(args[0], int) else args)
        if shape != tuple(value.shape):
            return real(*args, **kw)
        calls.append(1)
        return value.clone()

    mp.setattr(torch, name, fake)
    return calls


# --------------------------------------------------------------------------- the losses
@settings(max_examples=25, deadline=None)
@given(net=nets(), eps=st.floats(1e-3, 0.3), data=st.data())
def test_align_losses_equal_the_authors_terms_in_normalised_units(net, eps, data):
    """l2, cosd and l2_cosd (default units) = RobustAGA's terms: gradients w.r.t. x_n, the
    noise ε(2u − 1) per pixel drawn as ε(2u − 1)/σ in x_n's units."""
    model, body, mean, std, x, y = net
    u = torch.rand(x.shape, generator=torch.Generator().manual_seed(data.draw(
        st.integers(0, 999))), dtype=torch.float64)
    ce, l2, cosd = _align_terms(body, (x - mean) / std, eps * (2 * u - 1) / std, y)
    lam, lam_cos = 0.7, 1.3
    for name, hp in (("l2", dict(lam=lam)), ("cosd", dict(lam_cos=lam_cos)),
                     ("l2_cosd", dict(lam=lam, lam_cos=lam_cos))):
        with pytest.MonkeyPatch.context() as mp:
            calls = _fixed(mp, "rand_like", u)
            value, logs = make_loss(name, eps=eps, **hp)(model, x, y)
        assert calls == [1]
        want = ce
        if "lam" in hp:
            assert float(logs["l2"]) == pytest.approx(float(l2), **TOL)
            want = want + lam * l2
        if "lam_cos" in hp:
            assert float(logs["cosd"]) == pytest.approx(float(cosd), **TOL)
            want = want + lam_cos * cosd
        assert float(value.detach()) == pytest.approx(float(want), **TOL)


@settings(max_examples=25, deadline=None)
@given(net=nets(), eps=st.floats(1e-3, 0.3), data=st.data())
def test_align_losses_in_pixel_units_differentiate_wrt_pixels(net, eps, data):
    """units="pixel": the same formula on the whole model, w.r.t. the pixels."""
    model, _, _, _, x, y = net
    u = torch.rand(x.shape, generator=torch.Generator().manual_seed(data.draw(
        st.integers(0, 999))), dtype=torch.float64)
    ce, l2, cosd = _align_terms(model, x, eps * (2 * u - 1), y)
    with pytest.MonkeyPatch.context() as mp:
        _fixed(mp, "rand_like", u)
        value, logs = make_loss("l2_cosd", lam=0.7, lam_cos=1.3, eps=eps, units="pixel")(
            model, x, y)
    assert float(logs["l2"]) == pytest.approx(float(l2), **TOL)
    assert float(logs["cosd"]) == pytest.approx(float(cosd), **TOL)
    assert float(value.detach()) == pytest.approx(float(ce + 0.7 * l2 + 1.3 * cosd), **TOL)


@settings(max_examples=25, deadline=None)
@given(net=nets(), data=st.data())
def test_hessian_loss_equals_the_authors_term_in_normalised_units(net, data):
    """hessian (default units) = RobustAGA's ‖H_n v‖², H_n the Hessian of the true-class
    logit w.r.t. x_n, v ~ N(0, I) in x_n's units; units="pixel": H_x and v in pixels."""
    model, body, mean, std, x, y = net
    v = torch.randn(x.shape, generator=torch.Generator().manual_seed(data.draw(
        st.integers(0, 999))), dtype=torch.float64)
    theirs = _hessian_vector_sq(body, (x - mean) / std, v, y)
    pixel = _hessian_vector_sq(model, x, v, y)
    ce = F.cross_entropy(model(x), y).detach()
    for units, want in (("normalized", theirs), ("pixel", pixel)):
        with pytest.MonkeyPatch.context() as mp:
            calls = _fixed(mp, "randn", v)
            value, logs = make_loss("hessian", lam=0.3, units=units)(model, x, y)
        assert calls == [1]
        assert float(logs["hess_sq"]) == pytest.approx(float(want), **TOL)
        assert float(value.detach()) == pytest.approx(float(ce + 0.3 * want), **TOL)


@settings(max_examples=15, deadline=None)
@given(net=nets(max_channels=1), eps=st.floats(1e-3, 0.3))
def test_one_channel_conversion_is_sigma_squared_and_sigma_to_the_fourth(net, eps):
    """With one channel the normalised l2 is σ² times the pixel l2 (same δ) and the
    normalised Hessian term σ⁴ times the pixel one (same v): 003's λ = 0.1 and 1e-3 are
    0.1·σ² and 1e-3·σ⁴ in pixel units (≈ 0.004 and 1.6e-6 for σ = 0.2)."""
    model, _, _, std, x, y = net
    s = float(std.flatten()[0])
    u = torch.rand(x.shape, dtype=torch.float64)
    v = torch.randn(x.shape, dtype=torch.float64)
    got = {}
    for units in ("normalized", "pixel"):
        with pytest.MonkeyPatch.context() as mp:
            _fixed(mp, "rand_like", u)
            _fixed(mp, "randn", v)
            got[units] = (make_loss("l2", eps=eps, units=units)(model, x, y)[1]["l2"],
                          make_loss("hessian", units=units)(model, x, y)[1]["hess_sq"])
    assert float(got["normalized"][0]) == pytest.approx(s ** 2 * float(got["pixel"][0]), **TOL)
    assert float(got["normalized"][1]) == pytest.approx(s ** 4 * float(got["pixel"][1]), **TOL)


def test_units_default_and_validation():
    for name in ("l2", "cosd", "l2_cosd", "hessian"):
        assert make_loss(name).units == "normalized"
        assert make_loss(name).config()["units"] == "normalized"   # part of the zoo key
        with pytest.raises(ValueError, match="units"):
            make_loss(name, units="pixels")
    assert make_loss("l2").lam == 0.1 and make_loss("hessian").lam == 1e-3
    assert make_loss("l2").eps == pytest.approx(4 / 255)


def test_a_model_without_normalize_layer_is_taken_as_normalised_input():
    torch.manual_seed(0)
    body = nn.Sequential(nn.Flatten(), nn.Linear(8, 6), nn.Softplus(3.0), nn.Linear(6, 3))
    body = body.double()
    x, y = torch.rand(4, 2, 2, 2, dtype=torch.float64), torch.tensor([0, 1, 2, 0])
    u = torch.rand(x.shape, dtype=torch.float64)
    logs = {}
    for units in ("normalized", "pixel"):
        with pytest.MonkeyPatch.context() as mp:
            _fixed(mp, "rand_like", u)
            logs[units] = make_loss("l2_cosd", units=units)(body, x, y)[1]
    assert float(logs["normalized"]["l2"]) == float(logs["pixel"]["l2"])
    assert float(logs["normalized"]["l2"]) > 0


# --------------------------------------------------------------------------- Insertion
def _authors_insertion(body, mean, std, x, h, y):
    """RobustAGA's Insertion per image: |h| summed over channels; at ratio i/20 (i < 20)
    keep the pixels whose score is strictly above the floor(r·P)-th largest (0-based),
    multiply the *normalised* input by that mask, read the true-class probability."""
    xn = (x - mean) / std
    s = h.abs().sum(1)
    flat = s.flatten(1)
    p = flat.shape[1]
    top = flat.sort(dim=1, descending=True).values
    probs = []
    for i in range(20):
        k = int(i / 20 * p)
        mask = (s > top[:, k][:, None, None])[:, None]
        with torch.no_grad():
            probs.append(body(xn * mask).softmax(1)[torch.arange(len(y)), y])
    return torch.stack(probs, 1).mean(1)


@settings(max_examples=25, deadline=None)
@given(net=nets(), tied=st.booleans(), data=st.data())
def test_insertion_robustaga_protocol_equals_the_authors_game(net, tied, data):
    """protocol="robustaga": mean-colour baseline, 20 ratios (0 to 0.95), strict threshold
    (tied scores at the threshold stay out; ``tied`` draws maps with many ties)."""
    model, body, mean, std, x, y = net
    gen = torch.Generator().manual_seed(data.draw(st.integers(0, 999)))
    h = torch.randn(x.shape, generator=gen, dtype=torch.float64)
    if tied:
        h = torch.randint(-1, 2, x.shape, generator=gen).double()
    want = _authors_insertion(body, mean, std, x, h, y)
    got = insertion(model, x, h, y, protocol="robustaga")
    assert got.scores.shape == (len(y), 20)
    torch.testing.assert_close(got.mean, want, rtol=1e-10, atol=1e-12)


def test_insertion_protocols_differ_where_they_should():
    """The robustaga game starts from the mean colour and never evaluates γ = 1; the
    robattr game starts from black and ends at x. A zero map: robustaga inserts nothing."""
    torch.manual_seed(1)
    model = nn.Sequential(Normalize([0.4, 0.5], [0.2, 0.3]), nn.Flatten(),
                          nn.Linear(2 * 4 * 4, 3)).double()
    x, y = torch.rand(2, 2, 4, 4, dtype=torch.float64), torch.tensor([0, 2])
    h = torch.randn(2, 2, 4, 4, dtype=torch.float64)
    mean_img = model[0].mean.expand_as(x)
    with torch.no_grad():
        p = lambda inp: model(inp).softmax(1)[torch.arange(2), y]   # noqa: E731
        p_mean, p_black, p_x = p(mean_img), p(torch.zeros_like(x)), p(x)
    ours = insertion(model, x, h, y, protocol="robattr")
    theirs = insertion(model, x, h, y, protocol="robustaga")
    torch.testing.assert_close(ours.scores, insertion(model, x, h, y).scores)
    torch.testing.assert_close(ours.scores[:, 0], p_black)
    torch.testing.assert_close(ours.scores[:, -1], p_x)
    torch.testing.assert_close(theirs.scores[:, 0], p_mean)
    torch.testing.assert_close(theirs.ratios, torch.tensor(PROTOCOLS["robustaga"]["ratios"],
                                                           dtype=torch.float64))
    zero = insertion(model, x, torch.zeros_like(h), y, protocol="robustaga")
    torch.testing.assert_close(zero.scores, p_mean[:, None].expand(2, 20))
    # what the game feeds the model at one ratio
    half = insertion_inputs(model, x, h, 0.5, protocol="robustaga")
    kept = (half == x).all(1)
    assert int(kept[0].sum()) == 8 and torch.equal(half[~kept.unsqueeze(1).expand_as(x)],
                                                   mean_img[~kept.unsqueeze(1).expand_as(x)])
    with pytest.raises(ValueError, match="protocol"):
        insertion(model, x, h, y, protocol="robustaga", ratios=10)
    with pytest.raises(ValueError, match="protocol"):
        insertion(model, x, h, y, protocol="paper")


@settings(max_examples=10, deadline=None)
@given(net=nets())
def test_adv_insertion_robustaga_orders_by_the_attacked_map(net):
    model, body, mean, std, x, y = net
    x_adv = (x + 0.1 * torch.randn_like(x)).clamp(0, 1)

    def method(m, inp, target):
        g, _ = _logit_grad(m, inp, target)
        return g

    want = _authors_insertion(body, mean, std, x, method(model, x_adv, y), y)
    got = adv_insertion(model, method, x, x_adv, y, protocol="robustaga")
    torch.testing.assert_close(got.mean, want, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- RPS
@settings(max_examples=20, deadline=None)
@given(net=nets(), eps=st.floats(0.05, 0.8), seed=st.integers(0, 999))
def test_rps_robustaga_clamp_equals_the_authors(net, eps, seed):
    """clamp="robustaga": the noisy normalised input x_n + ε(2u − 1)/σ is clamped to
    [min, max] of the clean normalised batch (one range for all images and channels)."""
    model, _, mean, std, x, y = net

    def method(m, inp, target):
        g, _ = _logit_grad(m, inp, target)
        return g

    n_samples = 3
    gen = torch.Generator().manual_seed(seed)
    xn = (x - mean) / std
    lo, hi = xn.min(), xn.max()
    h0 = method(model, x, y).abs().sum(1).flatten(1)
    sims = []
    for _ in range(n_samples):
        u = torch.rand(x.shape, generator=gen, dtype=torch.float64)
        noisy = xn + eps * (2 * u - 1) / std
        h = method(model, mean + std * noisy.clamp(lo, hi), y).abs().sum(1).flatten(1)
        sims.append((h * h0).sum(1) / (h.norm(dim=1) * h0.norm(dim=1)))
    want = torch.stack(sims, 1).mean(1)
    got = rps(model, method, x, y, eps=eps, n_samples=n_samples, clamp="robustaga",
              generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_rps_robustaga_clamp_is_the_batch_range_not_the_pixel_range():
    """A batch whose pixels span [0.4, 0.6]: the authors' clamp keeps the noisy pixels
    there, the [0, 1] clamp lets them reach 0.4 ± eps. With the input itself as the map
    (an identity "attribution") the clamped maps stay closer to the clean one."""
    model = nn.Sequential(Normalize([0.5], [0.25]), nn.Flatten(), nn.Linear(16, 2)).double()
    x = 0.5 + 0.1 * torch.tensor([1.0, -1.0]).repeat(16)[:32].reshape(2, 1, 4, 4).double()
    identity = lambda m, inp, t: inp                                  # noqa: E731
    kw = dict(eps=0.3, n_samples=4, return_samples=True)
    theirs = rps(model, identity, x, 0, clamp="robustaga",
                 generator=torch.Generator().manual_seed(0), **kw)
    ours = rps(model, identity, x, 0, generator=torch.Generator().manual_seed(0), **kw)
    assert bool((theirs > ours).all())
    # the authors' range, checked directly: every noisy input lies in [0.4, 0.6]
    seen = []
    rps(model, lambda m, inp, t: seen.append(inp) or inp, x, 0, eps=0.3, n_samples=2,
        clamp="robustaga", generator=torch.Generator().manual_seed(0))
    noisy = torch.cat(seen[1:])
    assert float(noisy.min()) == pytest.approx(0.4) and float(noisy.max()) == pytest.approx(0.6)
    with pytest.raises(ValueError, match="clamp"):
        rps(model, identity, x, 0, eps=0.1, clamp="authors")


@settings(max_examples=20, deadline=None)
@given(net=nets(max_channels=3).filter(lambda n: n[4].shape[1] == 3), eps=st.floats(1e-3, 0.3),
       data=st.data())
def test_robustaga_units_are_the_authors_terms_with_their_cifar10_normalisation(net, eps, data):
    """units="robustaga": whatever the model's own normalisation, the regularisers are
    RobustAGA's terms for its input x_n = (x − μ_RA)/σ_RA (its CIFAR-10 constants), i.e. the
    same pixel function seen through the authors' normalisation."""
    from robattr.train.losses.gradient import ROBUSTAGA_CIFAR10

    model, _, _, _, x, y = net
    mu, sd = (torch.tensor(v, dtype=torch.float64)[None, :, None, None]
              for v in ROBUSTAGA_CIFAR10)

    def theirs(xn):                      # the authors' network: it takes x_n
        return model(xn * sd + mu)

    u = torch.rand(x.shape, generator=torch.Generator().manual_seed(data.draw(
        st.integers(0, 999))), dtype=torch.float64)
    v = torch.randn(x.shape, generator=torch.Generator().manual_seed(data.draw(
        st.integers(0, 999))), dtype=torch.float64)
    ce, l2, cosd = _align_terms(theirs, (x - mu) / sd, eps * (2 * u - 1) / sd, y)
    hess = _hessian_vector_sq(theirs, (x - mu) / sd, v, y)
    with pytest.MonkeyPatch.context() as mp:
        _fixed(mp, "rand_like", u)
        _fixed(mp, "randn", v)
        value, logs = make_loss("l2_cosd", lam=0.7, lam_cos=1.3, eps=eps, units="robustaga")(
            model, x, y)
        _, hlogs = make_loss("hessian", units="robustaga")(model, x, y)
    assert float(logs["l2"]) == pytest.approx(float(l2), **TOL)
    assert float(logs["cosd"]) == pytest.approx(float(cosd), **TOL)
    assert float(value.detach()) == pytest.approx(float(ce + 0.7 * l2 + 1.3 * cosd), **TOL)
    assert float(hlogs["hess_sq"]) == pytest.approx(float(hess), **TOL)


def test_robustaga_units_need_three_channels():
    model = nn.Sequential(Normalize([0.5], [0.3]), nn.Flatten(), nn.Linear(4, 2)).double()
    x, y = torch.rand(2, 1, 2, 2, dtype=torch.float64), torch.tensor([0, 1])
    with pytest.raises(ValueError, match="3-channel"):
        make_loss("l2", units="robustaga")(model, x, y)
