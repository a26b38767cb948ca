"""Tests for the robust training losses (robattr.train.losses) and robattr.bounds' pieces."""
from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from robattr import bounds, data, zoo
from robattr.models import build, get_activation
from robattr.train import LOSSES, SavedTensorPeak, fit, make_loss

#: Cheap settings per loss (inner loops shortened) so every test stays fast.
FAST = {
    "ce": {},
    "at": dict(steps=2),
    "trades": dict(steps=2),
    "ig_norm": dict(steps=2, ig_steps=4, approx_factor=2),
    "igr": dict(steps=2, ig_steps=3),
    "ssr": {},
    "hessian": {},
    "l2": {},
    "cosd": {},
    "l2_cosd": {},
    "atex": dict(sg_samples=2),
    "iga": dict(steps=1),
    "advaat": dict(steps=2),
}

#: The hyper-parameters that switch each loss's extra term off.
ZERO = {
    "at": dict(eps=0.0),
    "trades": dict(trades_beta=0.0),
    "ig_norm": dict(gamma=0.0),
    "igr": dict(trades_beta=0.0, lam=0.0),
    "ssr": dict(ssr_beta=0.0),
    "hessian": dict(lam=0.0),
    "l2": dict(lam=0.0),
    "cosd": dict(lam_cos=0.0),
    "l2_cosd": dict(lam=0.0, lam_cos=0.0),
    "iga": dict(lam=0.0, eps=0.0),
    "advaat": dict(lam=0.0, eps=0.0),
}

TINY = {"shape": (1, 4, 4), "num_classes": 5, "mean": (0.5,), "std": (0.25,)}


@pytest.fixture(scope="module")
def batch():
    X, y = data.as_tensors(data.load("digits", "train"), n=8)
    return X, y


def _model(activation="softplus", beta=3.0, arch="cnn", info="digits", seed=0):
    torch.manual_seed(seed)
    return build(arch, info, activation, beta if activation == "softplus" else None).train()


def _grads(model):
    return [None if p.grad is None else p.grad.detach().clone() for p in model.parameters()]


def _ce_grads(model, x, y):
    model.zero_grad(set_to_none=True)
    ce = F.cross_entropy(model(x), y)
    ce.backward()
    g = _grads(model)
    model.zero_grad(set_to_none=True)
    return ce.detach(), g


def test_registry_has_every_loss():
    assert set(FAST) == set(LOSSES)
    for name, cls in LOSSES.items():
        assert cls.name == name and make_loss(name).config()["name"] == name


@pytest.mark.parametrize("activation", ["softplus", "relu"])
@pytest.mark.parametrize("name", sorted(FAST))
def test_loss_finite_and_reaches_params(name, activation, batch):
    x, y = batch
    model = _model(activation)
    hp = dict(FAST[name])
    if name == "hessian" and activation == "relu":
        hp["surrogate_beta"] = 3.0
    loss = make_loss(name, **hp)
    torch.manual_seed(1)
    value, logs = loss(model, x, y)
    assert value.ndim == 0 and torch.isfinite(value)
    assert all(math.isfinite(float(v)) for v in logs.values()) and 0 <= float(logs["acc"]) <= 1
    assert model.training and all(m.training for m in model.modules())
    assert get_activation(model) == (activation, 3.0 if activation == "softplus" else None)
    value.backward()
    grads = _grads(model)
    assert all(g is not None and torch.isfinite(g).all() for g in grads)
    if name != "ce":  # the extra term moves the gradient away from plain CE's
        _, ce_g = _ce_grads(model, x, y)
        diff = sum(float((a - b).abs().sum()) for a, b in zip(grads, ce_g))
        assert diff > 1e-6, f"{name}: the regulariser does not reach the parameters"


@pytest.mark.parametrize("name", sorted(ZERO))
def test_reduces_to_ce_at_zero_weight(name, batch):
    x, y = batch
    model = _model("softplus")
    ce, ce_g = _ce_grads(model, x, y)
    value, logs = make_loss(name, **{**FAST[name], **ZERO[name]})(model, x, y)
    value.backward()
    assert float(value.detach()) == pytest.approx(float(ce), rel=1e-6, abs=1e-7)
    for a, b in zip(_grads(model), ce_g):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-7)


def test_igr_without_cosine_term_is_trades(batch):
    x, y = batch
    model = _model("softplus")
    torch.manual_seed(3)
    a, _ = make_loss("igr", lam=0.0, steps=2, ig_steps=2)(model, x, y)
    torch.manual_seed(3)
    b, _ = make_loss("trades", steps=2)(model, x, y)
    assert float(a.detach()) == pytest.approx(float(b.detach()), rel=1e-6)


def test_trades_zoo_call_shape_and_reserved_names():
    loss = make_loss("trades", trades_beta=6)
    assert loss.trades_beta == 6.0 and isinstance(loss.trades_beta, float)
    assert make_loss("ssr", ssr_beta=0.3).ssr_beta == 0.3


# --------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("name, hp, match", [
    ("at", dict(eps=-0.1), "eps"),
    ("trades", dict(eps=float("nan")), "eps"),
    ("at", dict(steps=0), "steps"),
    ("igr", dict(steps=1.5), "steps"),
    ("at", dict(norm="l1"), "norm"),
    ("ig_norm", dict(norm="Linf"), "norm"),
    ("ig_norm", dict(ig_steps=50, approx_factor=7), "multiple"),
    ("ig_norm", dict(reduction="max"), "reduction"),
    ("ssr", dict(ssr_beta=1.5), "ssr_beta"),
    ("l2_cosd", dict(lam=-1.0), "lam"),
    ("l2", dict(eps=-1.0), "eps"),
    ("hessian", dict(samples=0), "samples"),
    ("hessian", dict(surrogate_beta=0.0), "surrogate_beta"),
    ("trades", dict(beta=6.0), "no hyper-parameter"),
])
def test_bad_hparams_raise(name, hp, match):
    with pytest.raises(ValueError, match=match):
        make_loss(name, **hp)


def test_hessian_on_relu_needs_surrogate(batch):
    x, y = batch
    model = _model("relu")
    with pytest.raises(ValueError, match="surrogate_beta"):
        make_loss("hessian")(model, x, y)
    value, logs = make_loss("hessian", surrogate_beta=3)(model, x, y)
    assert logs["hess_sq"] > 0 and get_activation(model) == ("relu", None)
    # the ReLU model's own logit Hessian is zero: that is why the surrogate is needed
    est = bounds.hutchinson_hessian_sq_norm(model, x[:4], y[:4], samples=2)
    assert float(est.abs().max()) == 0.0


def _bn_net():
    """A small softplus CNN with BatchNorm, float64, train mode (batch statistics)."""
    torch.manual_seed(6)
    return torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.Softplus(2.0),
        torch.nn.Flatten(), torch.nn.Linear(12, 5)).double().train()


@pytest.mark.parametrize("momentum", [0.1, None])
def test_plain_op_batchnorm_matches_torch(momentum):
    from robattr.train.losses import _differentiable_batchnorm

    fused = torch.nn.BatchNorm2d(3, momentum=momentum).double()
    with torch.no_grad():
        fused.weight.uniform_(0.5, 2.0)
        fused.bias.uniform_(-1.0, 1.0)
    plain = torch.nn.BatchNorm2d(3, momentum=momentum).double()
    plain.load_state_dict(fused.state_dict())
    torch.manual_seed(7)
    for _ in range(3):
        x = 2 * torch.randn(4, 3, 5, 5, dtype=torch.float64) + 1
        with _differentiable_batchnorm(plain):
            out = plain(x)
        torch.testing.assert_close(out, fused(x), rtol=1e-12, atol=1e-12)
        for key, value in fused.state_dict().items():
            torch.testing.assert_close(plain.state_dict()[key], value, rtol=1e-12, atol=1e-12)
    assert "forward" not in vars(plain)  # the module's own forward is back
    with _differentiable_batchnorm(plain):
        with _differentiable_batchnorm(plain):
            pass
        assert "forward" in vars(plain)      # an inner block restores the outer's
    assert "forward" not in vars(plain)


def test_hessian_trains_through_train_mode_batchnorm():
    """PyTorch's fused BatchNorm has no third derivative; the loss still trains (same
    regulariser value, parameter gradient equal to a central finite difference)."""
    model, (x, y) = _bn_net(), _tiny_pair(8)
    loss = make_loss("hessian", lam=1.0)

    def value(seed=9):
        torch.manual_seed(seed)
        return loss(model, x, y)

    total, logs = value()
    torch.manual_seed(9)
    xr = x.detach().requires_grad_(True)
    ref = bounds._hutchinson(model(xr), xr, y, 1, None, False).mean()
    assert float(logs["hess_sq"]) == pytest.approx(float(ref), rel=1e-10)
    weight = model[0].weight
    (grad,) = torch.autograd.grad(total, weight)
    direction = torch.randn_like(weight)
    h = 1e-5

    def shifted(step):
        with torch.no_grad():
            weight.add_(step * direction)
        out = value()[0].detach()
        with torch.no_grad():
            weight.sub_(step * direction)
        return out

    up, down = shifted(h), shifted(-h)
    assert float((grad * direction).sum()) == pytest.approx(float((up - down) / (2 * h)),
                                                            rel=1e-6)


# --------------------------------------------------------------------------- SSR / Gauss-Newton
def _tiny_pair(seed=0):
    torch.manual_seed(seed)
    x = torch.rand(4, 1, 4, 4, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 3])
    return x, y


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
def test_ssr_eigenvalue_matches_dense_and_exact_hessian(arch):
    x, y = _tiny_pair()
    relu = _model("relu", arch=arch, info=TINY).double()
    dense = bounds.gauss_newton_hessian(relu, x, y)                   # W A Wᵀ, (N, d, d)
    exact = bounds.loss_input_hessian(relu, x, y)                     # autograd, exact
    top = bounds.gauss_newton_top_eigenvalue(relu, x)                 # C×C trick
    eig_dense = torch.linalg.eigvalsh(dense)
    eig_exact = torch.linalg.eigvalsh(exact)
    assert float(eig_dense[:, -1].min()) > 0
    torch.testing.assert_close(top, eig_dense[:, -1], rtol=1e-9, atol=1e-14)
    # 000 Prop. 3: for a piecewise-linear network W A Wᵀ IS the input Hessian of CE
    torch.testing.assert_close(dense, exact, rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(top, eig_exact[:, -1], rtol=1e-9, atol=1e-14)
    # PSD (up to rounding), and W A Wᵀ = (WL)(WL)ᵀ with the closed-form root of A
    assert float(eig_dense.min()) > -1e-12 * float(eig_dense.max())
    with torch.no_grad():
        logits = relu(x)
    lf = bounds.gauss_newton_factor(logits)
    p = logits.softmax(1)
    torch.testing.assert_close(lf @ lf.transpose(1, 2),
                               torch.diag_embed(p) - p[:, :, None] * p[:, None, :])


def test_ssr_on_softplus_is_gauss_newton_part_only():
    x, y = _tiny_pair(1)
    smooth = _model("softplus", beta=2.0, arch="mlp", info=TINY).double()
    dense = bounds.gauss_newton_hessian(smooth, x)
    exact = bounds.loss_input_hessian(smooth, x, y)
    top = bounds.gauss_newton_top_eigenvalue(smooth, x)
    torch.testing.assert_close(top, torch.linalg.eigvalsh(dense)[:, -1], rtol=1e-9, atol=1e-14)
    assert float((dense - exact).abs().max()) > 1e-8  # the curvature term of the logits


def test_ssr_eigenvalue_is_differentiable():
    x, _ = _tiny_pair(2)
    model = _model("softplus", beta=2.0, arch="mlp", info=TINY).double()
    x = x[:2].requires_grad_(True)
    assert torch.autograd.gradcheck(
        lambda v: bounds.gauss_newton_top_eigenvalue(model, v, create_graph=True), (x,))


def test_ssr_loss_value(batch):
    x, y = batch
    model = _model("relu")
    value, logs = make_loss("ssr", ssr_beta=0.3, scale=2.0)(model, x, y)
    top = bounds.gauss_newton_top_eigenvalue(model, x).mean()
    with torch.no_grad():
        ce = F.cross_entropy(model(x), y)
    assert float(logs["top_eig"]) == pytest.approx(float(top), rel=1e-4)
    assert float(value.detach()) == pytest.approx(float(0.3 * 2.0 * top + 0.7 * ce), rel=1e-4)


def test_jacobian_loop_equals_vectorized(batch):
    x, _ = batch
    model = _model("relu")
    torch.testing.assert_close(bounds.input_jacobian(model, x[:4]),
                               bounds.input_jacobian(model, x[:4], vectorize=True))


def _top_eigenvalue_by_definition(model, x):
    """λ_max of (WL)ᵀ(WL) with W's C columns kept in the graph (C backward passes)."""
    logits = model(x)
    jac = bounds.logit_jacobian(logits, x, create_graph=True)
    return torch.linalg.eigvalsh(bounds.gauss_newton_small_matrix(jac, logits))[:, -1]


def _value_and_grads(fn, model, x):
    x = x.detach().requires_grad_(True)
    top = fn(x)
    grads = torch.autograd.grad(top.sum(), [x, *model.parameters()])
    return top.detach(), grads


@pytest.mark.parametrize("arch", ["mlp", "cnn"])
@pytest.mark.parametrize("vectorize", [False, True])
def test_ssr_one_backward_graph_equals_c_column_graph(arch, vectorize):
    """SSR's eigenvalue through one kept backward pass (λ = ‖W L v‖², v the top
    eigenvector held fixed) has the value and first derivatives (w.r.t. the input and every
    parameter) of the C-column definition."""
    torch.manual_seed(4)
    x = torch.rand(5, 1, 4, 4, dtype=torch.float64)
    for activation in ("softplus", "relu"):
        model = _model(activation, beta=2.0, arch=arch, info=TINY, seed=1).double()
        assert not bounds.uses_batch_statistics(model)
        ref, ref_grads = _value_and_grads(lambda v: _top_eigenvalue_by_definition(model, v),
                                          model, x)
        top, grads = _value_and_grads(lambda v: bounds.gauss_newton_top_eigenvalue(
            model, v, create_graph=True, vectorize=vectorize), model, x)
        torch.testing.assert_close(top, ref, rtol=1e-10, atol=0.0)
        for g, r in zip(grads, ref_grads):
            torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-10 * float(r.abs().max()))


def test_ssr_keeps_c_columns_when_batchnorm_couples_examples():
    """With BatchNorm on batch statistics each example's logits depend on the others, so
    one cotangent per example would mix them: the C-column graph is kept (same value and
    gradients as the definition), and it differs from ‖W L v‖² there."""
    torch.manual_seed(5)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 3, 3), torch.nn.BatchNorm2d(3), torch.nn.Softplus(2.0),
        torch.nn.Flatten(), torch.nn.Linear(12, 5)).double().train()
    x = torch.rand(5, 1, 4, 4, dtype=torch.float64)
    assert bounds.uses_batch_statistics(model)
    ref, ref_grads = _value_and_grads(lambda v: _top_eigenvalue_by_definition(model, v),
                                      model, x)
    top, grads = _value_and_grads(
        lambda v: bounds.gauss_newton_top_eigenvalue(model, v, create_graph=True), model, x)
    torch.testing.assert_close(top, ref, rtol=1e-10, atol=0.0)
    for g, r in zip(grads, ref_grads):
        torch.testing.assert_close(g, r, rtol=1e-10, atol=1e-10 * float(r.abs().max()))
    mixed = bounds.gauss_newton._top_eigenvalue_from_eigenvector(
        model(x.requires_grad_(True)), x, vectorize=False).detach()
    assert float((mixed - ref).abs().max()) > 1e-6 * float(ref.abs().max())
    assert not bounds.uses_batch_statistics(model.eval())


# --------------------------------------------------------------------------- Hutchinson
def test_hutchinson_mean_matches_exact_frobenius():
    x, y = _tiny_pair(3)
    model = _model("softplus", beta=2.0, arch="mlp", info=TINY).double()
    exact = bounds.logit_input_hessian(model, x, y).flatten(1).pow(2).sum(1)
    gen = torch.Generator().manual_seed(0)
    reps, samples = 500, 4  # 2000 draws per example: 500 copies of the batch, 4 draws each
    est = bounds.hutchinson_hessian_sq_norm(model, x.repeat(reps, 1, 1, 1), y.repeat(reps),
                                            samples=samples, generator=gen)
    est = est.reshape(reps, len(x)).mean(0)
    torch.testing.assert_close(est, exact, rtol=0.08, atol=0.0)
    # and the training loss in pixel units regularises exactly this estimator (the default,
    # normalised units, is pinned against 003's formula in test_joo2023_units.py)
    torch.manual_seed(5)
    _, logs = make_loss("hessian", lam=1.0, samples=3, units="pixel")(model, x, y)
    torch.manual_seed(5)
    xr = x.detach().requires_grad_(True)
    ref = bounds._hutchinson(model(xr), xr, y, 3, None, False).mean()
    assert float(logs["hess_sq"]) == pytest.approx(float(ref), rel=1e-9)


# --------------------------------------------------------------------------- memory, zoo
def test_saved_tensor_peak_grows_with_the_regulariser(batch):
    x, y = batch
    peaks = {}
    for name in ("ce", "l2_cosd", "hessian"):
        model = _model("softplus")
        with SavedTensorPeak() as probe:
            value, _ = make_loss(name)(model, x, y)
            value.backward()
        peaks[name] = probe.peak_bytes
        assert probe.current == 0  # everything released after backward
    assert 0 < peaks["ce"] < peaks["l2_cosd"] and peaks["ce"] < peaks["hessian"]


def test_fit_records_memory(batch):
    hist = fit(_model("softplus"), batch, loss="l2_cosd", epochs=1, batch_size=8, progress=False)
    assert hist.saved_tensor_peak_bytes > 0 and hist.peak_memory_bytes > 0
    assert isinstance(hist.memory_measure, str)
    if not torch.cuda.is_available():  # CPU: activations + parameters, grads, Adam moments
        n_bytes = sum(p.numel() * p.element_size() for p in _model("softplus").parameters())
        state = hist.peak_memory_bytes - hist.saved_tensor_peak_bytes
        assert 4 * n_bytes <= state <= 4 * n_bytes + 1024  # + Adam's scalar step counters


def test_zoo_round_trip_with_a_robust_loss(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path))
    kw = dict(trades_beta=6.0, steps=1, epochs=1, batch_size=256, progress=False)
    model = zoo.get_model("digits", "cnn", "trades", **kw)
    meta = model.zoo_meta
    assert meta["config"]["method"] == "trades"
    assert meta["config"]["loss"] == make_loss("trades", trades_beta=6.0, steps=1).hparams
    assert meta["config"]["loss"]["trades_beta"] == 6.0
    assert 0 <= meta["train_acc"] <= 1 and 0 <= meta["test_acc"] <= 1
    assert meta["seconds_per_epoch"] > 0
    assert meta["peak_memory_bytes"] > 0 and meta["peak_memory_measure"]
    calls = []
    import robattr.train as train

    real = train.fit
    monkeypatch.setattr(train, "fit", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = zoo.get_model("digits", "cnn", "trades", **kw)
    assert not calls and again.zoo_meta == meta
    assert zoo.config_hash("digits", "cnn", "trades", trades_beta=6.0, steps=1) != \
        zoo.config_hash("digits", "cnn", "trades", trades_beta=1.0, steps=1)
    with pytest.raises(ValueError, match="eps"):
        zoo.config_hash("digits", "cnn", "at", eps=-1.0)
