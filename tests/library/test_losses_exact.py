"""Every training loss against a value (and a parameter gradient) computed without robattr.

The models are small enough to write down: a linear-plus-quadratic softmax classifier on a
few pixels, ``z_c(x) = W_c·x + b_c + ½ xᵀA_c x``. Its input gradient is
``W_c + H_c x`` with ``H_c = (A_c + A_cᵀ)/2`` and its input Hessian is ``H_c``, so every
regulariser has a closed form, evaluated here in NumPy from the parameters alone.
Parameter gradients are checked against central finite differences of those NumPy
formulas (float64). The random draws of the losses (003's uniform δ, Hutchinson's v, the
PGD inner loops of TRADES / IG-NORM / IGR) are replaced by fixed values, so every
expectation is exact; AT is run with the real PGD on a two-class linear model, whose
ℓ∞ / ℓ2 adversary does not depend on the random start.
"""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import torch
from torch import nn

from robattr.train import LOSSES, make_loss

PGD_MODULE = importlib.import_module("robattr.attacks.pgd")   # the module, not the function

#: The losses this file checks against independent values; a newly registered loss makes
#: test_every_registered_loss_has_an_exact_test fail until it gets one.
COVERED = {"ce", "at", "trades", "ig_norm", "igr", "ssr", "hessian", "l2", "cosd", "l2_cosd",
           "atex", "iga", "advaat"}   # the last three: tests/library/test_losses_alignment.py


# --------------------------------------------------------------------------- the model
class Quad(nn.Module):
    """``z = x Wᵀ + b + ½ [xᵀ A_c x]_c`` on flattened inputs (A optional)."""

    def __init__(self, P):
        super().__init__()
        self.W = nn.Parameter(torch.tensor(P["W"], dtype=torch.float64))
        self.b = nn.Parameter(torch.tensor(P["b"], dtype=torch.float64))
        self.A = nn.Parameter(torch.tensor(P["A"], dtype=torch.float64)) if "A" in P else None

    def forward(self, x):
        x = x.flatten(1)
        z = x @ self.W.T + self.b
        if self.A is not None:
            z = z + 0.5 * torch.einsum("ni,cij,nj->nc", x, self.A, x)
        return z


def params(seed, c=3, d=2, quad=True, scale=1.0):
    rng = np.random.default_rng(seed)
    P = {"W": scale * rng.standard_normal((c, d)), "b": 0.3 * rng.standard_normal(c)}
    if quad:
        P["A"] = scale * rng.standard_normal((c, d, d))
    return P


def inputs(seed, n=3, d=2):
    rng = np.random.default_rng(seed + 100)
    return rng.uniform(0.2, 0.8, (n, d)), rng.integers(0, 3, n)


def T(a):
    return torch.tensor(np.asarray(a), dtype=torch.float64)


# --------------------------------------------------------------------------- NumPy side
def np_logits(P, x):
    z = x @ P["W"].T + P["b"]
    if "A" in P:
        z = z + 0.5 * np.einsum("ni,cij,nj->nc", x, P["A"], x)
    return z


def np_log_softmax(z):
    m = z.max(1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(1, keepdims=True))


def np_ce(P, x, y):
    return float(-np_log_softmax(np_logits(P, x))[np.arange(len(y)), y].mean())


def np_kl(zp, zq):
    """Per-example KL(softmax(zp) ‖ softmax(zq)) -- the clean distribution first."""
    lp, lq = np_log_softmax(zp), np_log_softmax(zq)
    return (np.exp(lp) * (lp - lq)).sum(1)


def np_hess(P, c):
    """Input Hessian of logit c (constant)."""
    if "A" not in P:
        return np.zeros((P["W"].shape[1],) * 2)
    return 0.5 * (P["A"][c] + P["A"][c].T)


def np_grad(P, u, c):
    """Input gradient of logit c at the point u (d,)."""
    return P["W"][c] + np_hess(P, c) @ u


def np_jacobian(P, u):
    return np.stack([np_grad(P, u, c) for c in range(P["W"].shape[0])])


def fd_grad(f, P, h=1e-6):
    """Central finite differences of the scalar f(P) w.r.t. every entry of every array."""
    out = {}
    for key, val in P.items():
        g = np.zeros_like(val)
        for idx in np.ndindex(val.shape):
            up = {k: v.copy() for k, v in P.items()}
            dn = {k: v.copy() for k, v in P.items()}
            up[key][idx] += h
            dn[key][idx] -= h
            g[idx] = (f(up) - f(dn)) / (2 * h)
        out[key] = g
    return out


def check_param_grads(model, expected, rtol=1e-6, atol=1e-8):
    for key, g in expected.items():
        got = getattr(model, key).grad
        assert got is not None, f"no gradient reached {key}"
        np.testing.assert_allclose(got.numpy(), g, rtol=rtol, atol=atol, err_msg=key)


def fixed_attack(monkeypatch, x_adv, check_objective=None):
    """Replace robattr's PGD (the inner loop of TRADES / IG-NORM / IGR) by a fixed answer.

    ``check_objective(model, x, y, loss)`` is called with the objective the loss hands to
    PGD, so a test can compare it with its own formula. Returns the list of the PGD
    keyword arguments of each call.
    """
    calls = []

    def fake(model, x, y, *, loss="ce", **kw):
        calls.append(kw)
        if check_objective is not None:
            check_objective(model, x, y, loss)
        return x_adv.clone()

    monkeypatch.setattr(PGD_MODULE, "pgd", fake)
    return calls


def test_every_registered_loss_has_an_exact_test():
    assert set(LOSSES) == COVERED


# --------------------------------------------------------------------------- CE
def test_ce_value_and_gradient():
    P = params(0)
    x, y = inputs(0)
    model = Quad(P)
    value, logs = make_loss("ce")(model, T(x), torch.as_tensor(y))
    assert float(value.detach()) == pytest.approx(np_ce(P, x, y), rel=1e-12)
    acc = float((np_logits(P, x).argmax(1) == y).mean())
    assert float(logs["acc"]) == pytest.approx(acc)
    value.backward()
    check_param_grads(model, fd_grad(lambda Q: np_ce(Q, x, y), P))


def test_ce_hand_computed():
    """Two pixels, two classes, z = (x1 - x2, 0): CE at x = (1, 0), y = 0 is log(1 + 1/e)."""
    P = {"W": np.array([[1.0, -1.0], [0.0, 0.0]]), "b": np.zeros(2)}
    value, _ = make_loss("ce")(Quad(P), T([[1.0, 0.0]]), torch.tensor([0]))
    assert float(value.detach()) == pytest.approx(math.log(1 + math.exp(-1)), rel=1e-12)


# --------------------------------------------------------------------------- AT
@pytest.mark.parametrize("norm", ["linf", "l2"])
@pytest.mark.parametrize("seed", [0, 1])
def test_at_on_a_two_class_linear_model(norm, seed):
    """Two classes, linear logits: ∇_x CE = (1 − p_y)(w_o − w_y), a fixed direction, so
    the PGD maximiser is x + eps·sign(w_o − w_y) (ℓ∞) or x + eps·(w_o − w_y)/‖·‖ (ℓ2)
    whatever the random start, once the steps are long enough; CE there is closed form."""
    P = {"W": np.array([[1.0, -2.0, 0.5], [-0.5, 1.0, 1.5]]), "b": np.array([0.1, -0.2])}
    x = np.array([[0.3, 0.6, 0.5], [0.7, 0.4, 0.35], [0.5, 0.5, 0.5]])
    y = np.array([0, 1, 1])
    eps = 0.1
    u = P["W"][1 - y] - P["W"][y]                                   # w_other − w_y, (N, d)
    if norm == "linf":
        x_adv = x + eps * np.sign(u)
        hp = dict(norm="linf", eps=eps, steps=4, step_size=0.1)      # 4·0.1 >> 2·eps
    else:
        x_adv = x + eps * u / np.linalg.norm(u, axis=1, keepdims=True)
        hp = dict(norm="l2", eps=eps, steps=10, step_size=1.0)       # off-axis part x (1/9)^k
    model = Quad(P).train()
    torch.manual_seed(seed)
    value, logs = make_loss("at", **hp)(model, T(x), torch.as_tensor(y))
    assert model.training
    assert float(value.detach()) == pytest.approx(np_ce(P, x_adv, y), rel=1e-7)
    assert float(logs["ce_adv"]) == pytest.approx(np_ce(P, x_adv, y), rel=1e-7)
    value.backward()
    # CE at a fixed (detached) x_adv: dW = (p − e_y)ᵀ x_adv / N, db = mean(p − e_y)
    r = np.exp(np_log_softmax(np_logits(P, x_adv))) - np.eye(2)[y]
    check_param_grads(model, {"W": r.T @ x_adv / len(y), "b": r.mean(0)}, rtol=1e-6, atol=1e-7)


# --------------------------------------------------------------------------- TRADES
def _kl_objective_check(P, x, x_adv):
    """The PGD objective of TRADES / IGR must be KL(p(x) ‖ p(x_adv)) per example."""
    def check(model, xx, yy, loss):
        assert callable(loss)
        got = loss(model, T(x_adv), yy).detach().numpy()
        np.testing.assert_allclose(got, np_kl(np_logits(P, x), np_logits(P, x_adv)),
                                   rtol=1e-10, atol=1e-14)
    return check


def test_trades_value_and_gradient(monkeypatch):
    P = params(2, scale=2.0)
    x, y = inputs(2)
    x_adv = np.clip(x + 0.3 * np.array([[1, -1], [-1, -1], [1, 1]]), 0, 1)
    calls = fixed_attack(monkeypatch, T(x_adv), _kl_objective_check(P, x, x_adv))
    beta = 2.5
    model = Quad(P)
    loss = make_loss("trades", trades_beta=beta, eps=0.3, steps=3, step_size=0.1)
    value, logs = loss(model, T(x), torch.as_tensor(y))
    assert len(calls) == 1 and calls[0]["eps"] == 0.3 and calls[0]["norm"] == "linf"

    def expected(Q):   # TRADES: CE(x) + beta · mean KL(p(x) ‖ p(x_adv)), through both sides
        return np_ce(Q, x, y) + beta * np_kl(np_logits(Q, x), np_logits(Q, x_adv)).mean()

    kl = np_kl(np_logits(P, x), np_logits(P, x_adv)).mean()
    reverse = np_kl(np_logits(P, x_adv), np_logits(P, x)).mean()
    assert abs(kl - reverse) > 0.5 * kl             # the direction shows in the value
    assert float(logs["kl"]) == pytest.approx(kl, rel=1e-9)
    assert float(value.detach()) == pytest.approx(expected(P), rel=1e-10)
    value.backward()
    check_param_grads(model, fd_grad(expected, P))


# --------------------------------------------------------------------------- IG-NORM
def np_ig_logprob(P, x0, x1, y, n):
    """IG of log p_y from x0 to x1, right Riemann sum with n points, per example."""
    out = np.zeros_like(x1)
    for i in range(len(y)):
        acc = np.zeros(x1.shape[1])
        for k in range(1, n + 1):
            u = x0[i] + k / n * (x1[i] - x0[i])
            J = np_jacobian(P, u)
            p = np.exp(np_log_softmax(np_logits(P, u[None]))[0])
            acc += J[y[i]] - p @ J                                   # ∇ log p_y
        out[i] = (x1[i] - x0[i]) * acc / n
    return out


@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_ig_norm_value_and_gradient(monkeypatch, reduction):
    P = params(2)
    x, y = inputs(2)
    x_adv = x + np.array([[0.1, -0.1], [-0.1, 0.05], [0.1, 0.1]])
    ig_steps, af, gamma = 12, 3, 0.7
    n = ig_steps // af                                               # 4 points: 1/4 ... 1

    def check(model, xx, yy, loss):
        got = loss(model, T(x_adv), yy).detach().numpy()
        want = np.abs(np_ig_logprob(P, x, x_adv, y, n)).sum(1)
        np.testing.assert_allclose(got, want, rtol=1e-10)

    fixed_attack(monkeypatch, T(x_adv), check)
    model = Quad(P)
    loss = make_loss("ig_norm", gamma=gamma, ig_steps=ig_steps, approx_factor=af,
                     eps=0.1, steps=2, step_size=0.05, reduction=reduction)
    value, logs = loss(model, T(x), torch.as_tensor(y))

    def expected(Q):   # CE + gamma · (sum | mean) ‖IG_CE(x → x_adv)‖₁ (IG_CE = −IG_log p_y)
        l1 = np.abs(-np_ig_logprob(Q, x, x_adv, y, n)).sum(1)
        return np_ce(Q, x, y) + gamma * (l1.sum() if reduction == "sum" else l1.mean())

    l1 = np.abs(np_ig_logprob(P, x, x_adv, y, n)).sum(1)
    assert float(logs["ig_l1"]) == pytest.approx(l1.mean(), rel=1e-10)
    assert float(value.detach()) == pytest.approx(expected(P), rel=1e-10)
    value.backward()
    check_param_grads(model, fd_grad(expected, P))


# --------------------------------------------------------------------------- IGR
def test_igr_value_and_gradient(monkeypatch):
    """IG of z_y from the zero baseline on the quadratic model: ∇z_y(αx) = W_y + αH_y x is
    linear in α, so the midpoint rule is exact: IG = x ⊙ (W_y + ½ H_y x)."""
    P = params(3)
    x, y = inputs(3)
    x_adv = x + np.array([[0.1, -0.1], [-0.1, 0.1], [0.1, 0.1]])
    fixed_attack(monkeypatch, T(x_adv), _kl_objective_check(P, x, x_adv))
    beta, lam = 1.5, 0.8
    model = Quad(P)
    loss = make_loss("igr", trades_beta=beta, lam=lam, eps=0.1, steps=2, step_size=0.05,
                     ig_steps=3)
    value, logs = loss(model, T(x), torch.as_tensor(y))

    def ig(Q, u):
        return np.stack([u[i] * (Q["W"][y[i]] + 0.5 * np_hess(Q, y[i]) @ u[i])
                         for i in range(len(y))])

    def cos(Q):
        a, b = ig(Q, x), ig(Q, x_adv)
        return (a * b).sum(1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)

    def expected(Q):
        kl = np_kl(np_logits(Q, x), np_logits(Q, x_adv)).mean()
        return np_ce(Q, x, y) + beta * kl + lam * (1 - cos(Q)).mean()

    assert float(logs["ig_cos"]) == pytest.approx(cos(P).mean(), rel=1e-10)
    assert float(value.detach()) == pytest.approx(expected(P), rel=1e-10)
    value.backward()
    check_param_grads(model, fd_grad(expected, P))


# --------------------------------------------------------------------------- SSR
@pytest.mark.parametrize("quad", [False, True])
def test_ssr_value_and_gradient(quad):
    """λ_max of the Gauss-Newton input Hessian Jᵀ(diag p − ppᵀ)J, J the logit Jacobian
    (on a linear model J = W), from a dense d×d eigen-solve in NumPy."""
    P = params(4, c=3, d=4, quad=quad)
    rng = np.random.default_rng(5)
    x, y = rng.uniform(0.2, 0.8, (3, 4)), np.array([0, 2, 1])
    beta, scale = 0.4, 3.0

    def top(Q):
        vals = []
        for i in range(len(y)):
            J = np_jacobian(Q, x[i])
            p = np.exp(np_log_softmax(np_logits(Q, x[i:i + 1]))[0])
            vals.append(np.linalg.eigvalsh(J.T @ (np.diag(p) - np.outer(p, p)) @ J)[-1])
        return np.mean(vals)

    def expected(Q):
        return beta * scale * top(Q) + (1 - beta) * np_ce(Q, x, y)

    model = Quad(P)
    value, logs = make_loss("ssr", ssr_beta=beta, scale=scale)(model, T(x), torch.as_tensor(y))
    assert float(logs["top_eig"]) == pytest.approx(top(P), rel=1e-10)
    assert float(value.detach()) == pytest.approx(expected(P), rel=1e-10)
    value.backward()
    check_param_grads(model, fd_grad(expected, P))


# --------------------------------------------------------------------------- Hessian
def test_hessian_norm_value_and_gradient(monkeypatch):
    """‖H_y v‖² with H_y the (constant) input Hessian of the quadratic model's true-class
    logit and the Gaussian draws v replaced by fixed vectors."""
    P = params(6, d=3)
    x, y = inputs(6, d=3)
    rng = np.random.default_rng(7)
    vs = [rng.standard_normal(x.shape) for _ in range(2)]
    queue = [T(v) for v in vs]
    real_randn = torch.randn

    def fake_randn(*shape, **kw):
        size = shape[0] if len(shape) == 1 and not isinstance(shape[0], int) else shape
        if tuple(size) != x.shape:
            return real_randn(*shape, **kw)
        assert queue, "the loss drew more Hutchinson vectors than samples"
        return queue.pop(0).to(kw.get("dtype") or torch.float64)

    lam = 0.3

    def reg(Q):
        return np.mean([np.mean([np.sum((np_hess(Q, y[i]) @ v[i]) ** 2) for v in vs])
                        for i in range(len(y))])

    def expected(Q):
        return np_ce(Q, x, y) + lam * reg(Q)

    model = Quad(P)
    monkeypatch.setattr(torch, "randn", fake_randn)
    value, logs = make_loss("hessian", lam=lam, samples=2)(model, T(x), torch.as_tensor(y))
    monkeypatch.undo()
    assert not queue, "the loss drew fewer Hutchinson vectors than samples"
    assert float(logs["hess_sq"]) == pytest.approx(reg(P), rel=1e-12)
    assert float(value.detach()) == pytest.approx(expected(P), rel=1e-12)
    value.backward()
    check_param_grads(model, fd_grad(expected, P))


# --------------------------------------------------------------------------- 003: l2, cosd
def _fixed_uniform(monkeypatch, u):
    """torch.rand_like returns u (003's δ = (2u − 1)·eps becomes a known vector)."""
    calls = []

    def fake(t, **kw):
        assert tuple(t.shape) == u.shape
        calls.append(1)
        return T(u).to(t.dtype)

    monkeypatch.setattr(torch, "rand_like", fake)
    return calls


def np_align_terms(P, x, y, delta, P_clean=None):
    """(‖g_r − g‖², (1 − cos(g_r, g))/2) per example: g = ∇z_y(x) with the parameters
    P_clean (the detached clean gradient), g_r = ∇z_y(x + δ) with P."""
    Pc = P if P_clean is None else P_clean
    l2, cosd = [], []
    for i in range(len(y)):
        g = np_grad(Pc, x[i], y[i])
        g_r = np_grad(P, x[i] + delta[i], y[i])
        l2.append(np.sum((g_r - g) ** 2))
        cosd.append((1 - g @ g_r / np.linalg.norm(g) / np.linalg.norm(g_r)) / 2)
    return np.array(l2), np.array(cosd)


@pytest.mark.parametrize("name, lam, lam_cos", [("l2", 0.7, 0.0), ("cosd", 0.0, 1.3),
                                                 ("l2_cosd", 0.7, 1.3)])
def test_grad_alignment_value_and_gradient(monkeypatch, name, lam, lam_cos):
    """003 Eq. 4-5 on the quadratic model: g_r − g = H_y δ; the clean gradient is detached,
    so the expected parameter gradient differentiates only through g_r."""
    P = params(8, scale=2.0)
    x, y = inputs(8)
    u = np.array([[0.9, 0.15], [0.2, 0.7], [0.95, 0.6]])
    eps = 0.3
    delta = (2 * u - 1) * eps
    calls = _fixed_uniform(monkeypatch, u)
    hp = {"eps": eps, **({"lam": lam} if name != "cosd" else {}),
          **({"lam_cos": lam_cos} if name != "l2" else {})}
    model = Quad(P)
    value, logs = make_loss(name, **hp)(model, T(x), torch.as_tensor(y))
    assert calls == [1]
    l2, cosd = np_align_terms(P, x, y, delta)
    # the terms must be far from the values their mutations would give
    assert np.all(np.abs(np.sqrt(l2) - l2) > 0.05) and np.all(cosd > 1e-3)
    if name != "cosd":
        assert float(logs["l2"]) == pytest.approx(l2.mean(), rel=1e-12)
    if name != "l2":
        assert float(logs["cosd"]) == pytest.approx(cosd.mean(), rel=1e-12)

    def expected(Q):
        a, b = np_align_terms(Q, x, y, delta, P_clean=P)
        return np_ce(Q, x, y) + lam * a.mean() + lam_cos * b.mean()

    assert float(value.detach()) == pytest.approx(expected(P), rel=1e-12)
    value.backward()
    check_param_grads(model, fd_grad(expected, P))


def test_grad_alignment_hand_computed(monkeypatch):
    """Two pixels, two classes, z_0 = x1 + 2·x2², z_1 = 0, at x = (0.5, 0), y = 0:
    g = ∇z_0(x) = (1, 0). With eps = 1 and u = (0.5, 0.75), δ = (0, 0.5) and
    g_r = ∇z_0(x + δ) = (1, 4·0.5) = (1, 2). So l2 = ‖(0, 2)‖² = 4 (not 2),
    cos = 1/√5 and cosd = (1 − 1/√5)/2 ≈ 0.2764 (not (1 + 1/√5)/2 ≈ 0.7236), and
    CE = log(1 + e^(−0.5))."""
    P = {"W": np.array([[1.0, 0.0], [0.0, 0.0]]), "b": np.zeros(2),
         "A": np.array([[[0.0, 0.0], [0.0, 4.0]], [[0.0, 0.0], [0.0, 0.0]]])}
    _fixed_uniform(monkeypatch, np.array([[0.5, 0.75]]))
    value, logs = make_loss("l2_cosd", lam=0.5, lam_cos=2.0, eps=1.0)(
        Quad(P), T([[0.5, 0.0]]), torch.tensor([0]))
    ce = math.log(1 + math.exp(-0.5))
    cosd = (1 - 1 / math.sqrt(5)) / 2
    assert float(logs["l2"]) == pytest.approx(4.0, rel=1e-12)
    assert float(logs["cosd"]) == pytest.approx(cosd, rel=1e-12)
    assert float(value.detach()) == pytest.approx(ce + 0.5 * 4.0 + 2.0 * cosd, rel=1e-12)
