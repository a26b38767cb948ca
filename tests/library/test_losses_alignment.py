"""The baselines' training losses of robattr.train.losses.alignment: ATEX (``atex``), IGA
(``iga``, 001's ART) and AdvAAT (``advaat``).

Each loss is checked against a value worked out by hand on a model small enough to write
down (two or three pixels, linear or quadratic logits), against a NumPy computation on a
random one, and its parameter gradient against finite differences
(``torch.autograd.gradcheck`` in float64, the inner random draws and PGD seeded inside
the checked function, so every evaluation sees the same draws). Then every
hyper-parameter's validation, the teacher of ATEX, zoo training, and CUDA against the
CPU (skipped without a GPU).
"""
from __future__ import annotations

import importlib
import math

import numpy as np
import pytest
import torch
from torch import nn
from torch.nn import functional as F

from robattr import catalog, data, zoo
from robattr.models import Normalize
from robattr.train import LOSSES, make_loss
from robattr.train.losses import ATEX, IGA, AdvAAT

PGD_MODULE = importlib.import_module("robattr.attacks.pgd")
NAMES = ("atex", "iga", "advaat")


# --------------------------------------------------------------------------- models
class Quad(nn.Module):
    """``z = x Wᵀ + b + ½ [xᵀ A_c x]_c`` on flattened inputs (A optional), float64."""

    def __init__(self, W, b=None, A=None, normalize=None):
        super().__init__()
        W = np.asarray(W, dtype=float)
        self.norm = None
        if normalize is not None:        # inputs N x 1 x 1 x d; exact float64 mean and std
            self.norm = Normalize(*normalize).double()
            self.norm.mean.fill_(normalize[0][0])
            self.norm.std.fill_(normalize[1][0])
        self.W = nn.Parameter(torch.tensor(W))
        self.b = nn.Parameter(torch.tensor(np.zeros(W.shape[0]) if b is None else b,
                                           dtype=torch.float64))
        self.A = None if A is None else nn.Parameter(torch.tensor(np.asarray(A, dtype=float)))

    def forward(self, x):
        if self.norm is not None:
            x = self.norm(x)
        x = x.flatten(1)
        z = x @ self.W.T + self.b
        if self.A is not None:
            z = z + 0.5 * torch.einsum("ni,cij,nj->nc", x, self.A, x)
        return z


def T(a):
    return torch.tensor(np.asarray(a, dtype=float))


def np_log_softmax(z):
    z = np.asarray(z, dtype=float)
    m = z.max(-1, keepdims=True)
    return z - m - np.log(np.exp(z - m).sum(-1, keepdims=True))


def np_ce(z, y):
    return float(-np_log_softmax(z)[np.arange(len(y)), y].mean())


def np_kl(p, z):
    """Per-example KL(p ‖ softmax(z))."""
    return (p * (np.log(p) - np_log_softmax(z))).sum(-1)


def cos(a, b):
    return float(np.dot(a, b) / np.linalg.norm(a) / np.linalg.norm(b))


def tiny_mlp(seed=0, d=4, hidden=3, classes=3):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Flatten(), nn.Linear(d, hidden), nn.Softplus(beta=3.0),
                         nn.Linear(hidden, classes)).double()


def gradcheck_params(model, loss_fn, seed=0):
    """gradcheck of ``loss_fn(model)`` (a scalar) w.r.t. every parameter of ``model``,
    the global RNG reseeded before each evaluation."""
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach().clone().requires_grad_(True) for p in model.parameters())

    def f(*ps):
        torch.manual_seed(seed)
        return torch.func.functional_call(_Call(model, loss_fn),
                                          {f"model.{n}": p for n, p in zip(names, ps)}, ())

    assert torch.autograd.gradcheck(f, params, eps=1e-6, atol=1e-6, rtol=1e-4)


class _Call(nn.Module):
    """A module whose forward runs a loss on ``model``, so functional_call swaps the
    parameters for every model call the loss makes."""

    def __init__(self, model, loss_fn):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self):
        return self.loss_fn(self.model)


def fixed_attack(monkeypatch, x_adv, check_objective=None):
    """robattr's PGD replaced by a fixed answer; ``check_objective(model, x, y, loss)``
    sees the objective handed to PGD. Returns the keyword arguments of each call."""
    calls = []

    def fake(model, x, y, *, loss="ce", **kw):
        calls.append(kw)
        if check_objective is not None:
            check_objective(model, x, y, loss)
        return x_adv.clone()

    monkeypatch.setattr(PGD_MODULE, "pgd", fake)
    return calls


# --------------------------------------------------------------------------- registry
def test_registered_and_in_the_catalog():
    for name in NAMES:
        assert name in LOSSES and name in catalog.LOSS_NAMES
        assert make_loss(name).config()["name"] == name
    assert LOSSES["iga"] is IGA and LOSSES["atex"] is ATEX and LOSSES["advaat"] is AdvAAT


def test_the_cost_model_prices_every_new_loss():
    """In passes of the model family at the zoo's batch of 64: ATEX two student steps and
    sg_samples teacher gradients; IGA and AdvAAT one CE step plus their double backwards,
    one per attack step and one for the loss."""
    from robattr import cost

    def passes(name, **hp):
        return cost.step_passes(cost.step_signature(zoo.config("digits", "cnn", name, **hp)))

    assert passes("atex", sg_samples=4) == [("grad", 4, 256.0), ("fwd", 2, 128.0),
                                            ("train", 2, 128.0)]
    iga = passes("iga", steps=2)
    assert ("grad2", 3, 384.0) in iga and ("train", 1, 64.0) in iga
    advaat = passes("advaat", steps=5)
    assert ("grad2", 5, 320.0) in advaat and ("grad2", 1, 128.0) in advaat
    assert ("train", 1, 64.0) in advaat


# --------------------------------------------------------------------------- IGA
def test_iga_hand_computed():
    """Two pixels, three classes, z = (x1, x2, −x1), b = 0, at x = (0.6, 0.8), y = 0,
    eps = 0 (x_adv = x). Logits (0.6, 0.8, −0.6): the runner-up is class 1. ∇z_0 = (1, 0)
    and ∇z_1 = (0, 1), so cos(x, ∇z_0) = 0.6 and cos(x, ∇z_1) = 0.8, and
    L_attr = log(1 + exp((1 − 0.6) − (1 − 0.8))) = log(1 + e^0.2) (not log(1 + e^−0.2));
    CE = log(e^0.6 + e^0.8 + e^−0.6) − 0.6."""
    model = Quad([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    value, logs = make_loss("iga", lam=0.5, eps=0.0)(model, T([[0.6, 0.8]]), torch.tensor([0]))
    ce = math.log(math.exp(0.6) + math.exp(0.8) + math.exp(-0.6)) - 0.6
    attr = math.log(1 + math.exp(0.2))
    assert float(logs["attr"]) == pytest.approx(attr, rel=1e-12)
    assert float(logs["ce_adv"]) == pytest.approx(ce, rel=1e-12)
    assert float(value.detach()) == pytest.approx(ce + 0.5 * attr, rel=1e-12)


def np_iga_terms(W, b, A, x, y, mean=None, std=None, index=None):
    """Per-example L_attr on the quadratic model, optionally in normalised units and on
    ``index`` (N, k) only."""
    out = []
    for i in range(len(y)):
        u = x[i] if mean is None else (x[i] - mean) / std
        z = W @ u + b + (0.5 * np.einsum("i,cij,j->c", u, A, u) if A is not None else 0)
        z_o = z.copy()
        z_o[y[i]] = -np.inf
        o = int(z_o.argmax())

        def g(c):   # gradient w.r.t. the model's own input u
            return W[c] + (0.5 * (A[c] + A[c].T) @ u if A is not None else 0)

        gy, go, xs = g(y[i]), g(o), u   # normalised units: x_n = u and ∇_n = σ ∇_x = ∇_u
        if index is not None:
            xs, gy, go = xs[index[i]], gy[index[i]], go[index[i]]
        out.append(np.log1p(np.exp(cos(xs, go) - cos(xs, gy))))
    return np.array(out)


@pytest.mark.parametrize("normalized", [False, True])
def test_iga_value_against_numpy(monkeypatch, normalized):
    rng = np.random.default_rng(1)
    W, b = rng.standard_normal((4, 3)), 0.3 * rng.standard_normal(4)
    A = rng.standard_normal((4, 3, 3))
    x, y = rng.uniform(0.2, 0.8, (5, 3)), np.array([0, 1, 2, 3, 1])
    x_adv = np.clip(x + 0.05 * rng.choice([-1, 1], x.shape), 0, 1)
    mean, std = (0.4, 0.3) if normalized else (None, None)
    model = Quad(W, b, A, normalize=((mean,), (std,)) if normalized else None)
    k = 2

    shape = (len(y), 1, 1, 3)

    def check(m, xx, yy, objective):
        index = torch.as_tensor(np.argsort(-np.abs(np_grads_y(x)), axis=1)[:, :k])
        xa = T(x_adv).reshape(shape).requires_grad_(True)
        got = objective(m, xa, yy).detach().numpy()
        want = np_iga_terms(W, b, A, x_adv, y, mean, std, index=index.numpy())
        np.testing.assert_allclose(got, want, rtol=1e-10)

    def np_grads_y(xx):   # |∇z_y| in the loss's units is |∇_u z_y|: same order as pixels' for one σ
        u = xx if mean is None else (xx - mean) / std
        return np.stack([W[y[i]] + 0.5 * (A[y[i]] + A[y[i]].T) @ u[i] for i in range(len(y))])

    calls = fixed_attack(monkeypatch, T(x_adv).reshape(shape), check)
    lam = 0.8
    loss = make_loss("iga", lam=lam, eps=0.1, steps=2, step_size=0.05, topk=k)
    value, logs = loss(model, T(x).reshape(shape), torch.as_tensor(y))
    assert len(calls) == 1 and calls[0]["eps"] == 0.1 and calls[0]["norm"] == "linf"
    assert calls[0]["steps"] == 2 and calls[0]["step_size"] == 0.05
    u_adv = x_adv if mean is None else (x_adv - mean) / std
    z_adv = u_adv @ W.T + b + 0.5 * np.einsum("ni,cij,nj->nc", u_adv, A, u_adv)
    attr = np_iga_terms(W, b, A, x_adv, y, mean, std).mean()
    assert float(logs["attr"]) == pytest.approx(attr, rel=1e-10)
    assert float(value.detach()) == pytest.approx(np_ce(z_adv, y) + lam * attr, rel=1e-10)


def test_iga_pixel_units_differ_from_normalized():
    model = Quad([[1.0, -0.5], [0.2, 0.7]], normalize=((0.5,), (0.25,)))
    x, y = T([[0.3, 0.9]]).reshape(1, 1, 1, 2), torch.tensor([0])
    a, _ = make_loss("iga", eps=0.0, units="normalized")(model, x, y)
    b, _ = make_loss("iga", eps=0.0, units="pixel")(model, x, y)
    xn = (np.array([0.3, 0.9]) - 0.5) / 0.25
    want = np.log1p(np.exp(cos(xn, [0.2, 0.7]) - cos(xn, [1.0, -0.5])))   # σ cancels in cos
    ce = np_ce(np.array([[xn @ [1.0, -0.5], xn @ [0.2, 0.7]]]), [0])
    assert float(a.detach()) == pytest.approx(ce + 0.5 * want, rel=1e-12)
    assert abs(float(a.detach()) - float(b.detach())) > 1e-3


def test_iga_attack_stays_in_the_ball_and_raises_the_triplet_loss(monkeypatch):
    torch.manual_seed(0)
    model = tiny_mlp(d=6)
    x = torch.rand(8, 6, dtype=torch.float64)
    y = torch.randint(0, 3, (8,))
    loss = IGA(eps=0.1, steps=5, step_size=0.03)
    seen = {}
    real = PGD_MODULE.pgd

    def spy(*a, **kw):
        seen["x_adv"] = out = real(*a, **kw)
        return out

    monkeypatch.setattr(PGD_MODULE, "pgd", spy)
    loss(model, x, y)
    x_adv = seen["x_adv"]
    assert float((x_adv - x).abs().max()) <= 0.1 + 1e-12
    assert float(x_adv.min()) >= 0 and float(x_adv.max()) <= 1

    def attr(u):
        return loss.attr_loss(model, u.clone().requires_grad_(True), y).detach()

    assert float(attr(x_adv).mean()) > float(attr(x).mean())


def test_iga_gradcheck():
    model = tiny_mlp(seed=1)
    x = torch.rand(4, 4, dtype=torch.float64) * 0.6 + 0.2
    y = torch.tensor([0, 1, 2, 1])
    loss = IGA(lam=0.7, eps=0.05, steps=2, step_size=0.03, topk=3)
    gradcheck_params(model, lambda m: loss(m, x, y)[0])


# --------------------------------------------------------------------------- ATEX
def _fixed_draws(monkeypatch, along, across, r):
    calls = []

    def fake(self, x):
        calls.append(1)
        return T(along), T(across), T(r).reshape(x.shape)

    monkeypatch.setattr(ATEX, "_draws", fake)
    return calls


def test_atex_hand_computed(monkeypatch):
    """Two pixels, two classes. Teacher z = (x1, x2), student z = (x1/2, x2/2), x = (0.6,
    0.8), y = 0, eps = 0.2. The teacher's SmoothGrad of z_0 is (1, 0) whatever the noise,
    so u = (1, 0); with Δ/eps = 0.5, Δ'/eps = −1 and noise r = (0.3, 0.7), the direction
    across is (0, 1): x_i = (0.7, 0.8), x_p = (0.7, 0.6). The loss is
    KL(softmax(0.6, 0.8) ‖ softmax(0.3, 0.4)) + lam · KL(softmax(0.7, 0.8) ‖ softmax(0.35, 0.3))."""
    teacher = Quad([[1.0, 0.0], [0.0, 1.0]])
    student = Quad([[0.5, 0.0], [0.0, 0.5]])
    _fixed_draws(monkeypatch, [0.5], [-1.0], [[0.3, 0.7]])
    loss = ATEX(lam=2.0, eps=0.2, sg_samples=2)
    loss.set_teacher(student, teacher)
    value, logs = loss(student, T([[0.6, 0.8]]), torch.tensor([0]))

    def kl2(a, b):   # KL(softmax(a) ‖ softmax(b)) for two logits
        p = [1 / (1 + math.exp(a[1] - a[0])), 1 / (1 + math.exp(a[0] - a[1]))]
        q = [1 / (1 + math.exp(b[1] - b[0])), 1 / (1 + math.exp(b[0] - b[1]))]
        return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q))

    clean, aug = kl2((0.6, 0.8), (0.3, 0.4)), kl2((0.7, 0.8), (0.35, 0.3))
    assert float(logs["kl"]) == pytest.approx(clean, rel=1e-12)
    assert float(logs["kl_aug"]) == pytest.approx(aug, rel=1e-12)
    assert float(value.detach()) == pytest.approx(clean + 2.0 * aug, rel=1e-12)
    # the direction of the KL shows: KL(student ‖ teacher) differs
    assert abs(kl2((0.3, 0.4), (0.6, 0.8)) - clean) > 1e-3 * clean     # rel=1e-12 above


def test_atex_value_against_numpy(monkeypatch):
    rng = np.random.default_rng(3)
    Wt, bt = rng.standard_normal((3, 4)), rng.standard_normal(3)
    Ws, bs = rng.standard_normal((3, 4)), rng.standard_normal(3)
    x, y = rng.uniform(0.2, 0.8, (5, 4)), np.array([0, 2, 1, 1, 0])
    along, across, r = rng.uniform(-1, 1, 5), rng.uniform(-1, 1, 5), rng.uniform(-1, 1, (5, 4))
    _fixed_draws(monkeypatch, along, across, r)
    lam, eps, temp = 1.7, 0.3, 2.0
    loss = ATEX(lam=lam, eps=eps, temperature=temp, sg_samples=3)
    student = Quad(Ws, bs)
    loss.set_teacher(student, Quad(Wt, bt))
    value, logs = loss(student, T(x), torch.as_tensor(y))
    u = Wt[y] / np.linalg.norm(Wt[y], axis=1, keepdims=True)
    v = r - (r * u).sum(1, keepdims=True) * u
    v = v / np.linalg.norm(v, axis=1, keepdims=True)
    x_i = x + eps * along[:, None] * u
    x_p = x_i + eps * across[:, None] * v

    def probs(z):
        return np.exp(np_log_softmax(z))

    clean = np_kl(probs((x @ Wt.T + bt) / temp), x @ Ws.T + bs).mean()
    aug = np_kl(probs((x_i @ Wt.T + bt) / temp), x_p @ Ws.T + bs).mean()
    assert float(value.detach()) == pytest.approx(clean + lam * aug, rel=1e-10)
    assert float(logs["kl"]) == pytest.approx(clean, rel=1e-10)


def test_atex_samples_along_and_across_the_explanation():
    torch.manual_seed(0)
    teacher = tiny_mlp(seed=3, d=6)
    x = torch.rand(7, 6, dtype=torch.float64)
    y = torch.randint(0, 3, (7,))
    loss = ATEX(eps=0.2, sg_samples=4)
    torch.manual_seed(1)
    x_i, x_p = loss.samples(teacher, x, y)
    torch.manual_seed(1)
    h = loss.explanation(teacher, x, y)
    step_i, step_p = x_i - x, x_p - x_i
    assert float(step_i.norm(dim=1).max()) <= 0.2 + 1e-12
    assert float(step_p.norm(dim=1).max()) <= 0.2 + 1e-12
    # along: parallel to h; across: orthogonal to it
    assert float((F.cosine_similarity(step_i, h, dim=1).abs() - 1).abs().max()) < 1e-9
    assert float(((step_p * h).sum(1) / h.norm(dim=1)).abs().max()) < 1e-12


def test_atex_gradcheck():
    student, teacher = tiny_mlp(seed=1), tiny_mlp(seed=2)
    x = torch.rand(4, 4, dtype=torch.float64)
    y = torch.tensor([0, 1, 2, 1])
    loss = ATEX(lam=1.5, eps=0.3, temperature=2.0, sg_samples=3)
    loss.set_teacher(student, teacher)
    gradcheck_params(student, lambda m: loss(m, x, y)[0])


def test_atex_teacher_snapshot_is_frozen():
    """teacher=None: a copy of the model at the first call, which training leaves alone."""
    model = tiny_mlp(seed=4)
    x, y = torch.rand(6, 4, dtype=torch.float64), torch.tensor([0, 1, 2, 0, 1, 2])
    loss = ATEX(eps=0.2, sg_samples=2)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    value, logs = loss(model, x, y)
    assert float(logs["kl"]) == pytest.approx(0.0, abs=1e-12)    # the teacher is the model
    teacher = loss.teacher_of(model)
    before = [p.detach().clone() for p in teacher.parameters()]
    start = [p.detach().clone() for p in model.parameters()]
    for _ in range(3):
        opt.zero_grad()
        value.backward()
        opt.step()
        value, logs = loss(model, x, y)
    assert any(not torch.equal(a, b) for a, b in zip(start, model.parameters()))
    assert loss.teacher_of(model) is teacher and not teacher.training
    assert all(torch.equal(a, b) for a, b in zip(before, teacher.parameters()))
    assert all(not p.requires_grad for p in teacher.parameters())


# --------------------------------------------------------------------------- AdvAAT
def test_advaat_hand_computed(monkeypatch):
    """Two pixels, two classes, z_0 = x1 + x2², z_1 = 0, y = 0, at x = (0.5, 0.5) with the
    attack's answer x_adv = (0.5, 1.0). The saliency maps are ∇z_0 = (1, 2·x2): (1, 1) and
    (1, 2), so the cosine dissimilarity is 1 − 3/√10; CE at x_adv is log(1 + e^−1.5)."""
    model = Quad([[1.0, 0.0], [0.0, 0.0]], A=[[[0.0, 0.0], [0.0, 2.0]], [[0.0, 0.0], [0.0, 0.0]]])
    fixed_attack(monkeypatch, T([[0.5, 1.0]]))
    loss = make_loss("advaat", lam=0.7, dissimilarity="cosine", eps=0.5, steps=1, step_size=0.5)
    value, logs = loss(model, T([[0.5, 0.5]]), torch.tensor([0]))
    d = 1 - 3 / math.sqrt(10)
    ce = math.log(1 + math.exp(-1.5))
    assert float(logs["dissim"]) == pytest.approx(d, rel=1e-12)
    assert float(logs["ce_adv"]) == pytest.approx(ce, rel=1e-12)
    assert float(value.detach()) == pytest.approx(ce + 0.7 * d, rel=1e-12)


@pytest.mark.parametrize("dissimilarity", ["pearson", "cosine"])
def test_advaat_value_against_numpy(monkeypatch, dissimilarity):
    rng = np.random.default_rng(5)
    W, b, A = rng.standard_normal((3, 4)), rng.standard_normal(3), rng.standard_normal((3, 4, 4))
    x, y = rng.uniform(0.2, 0.8, (5, 4)), np.array([0, 2, 1, 1, 0])
    x_adv = x + 0.1 * rng.choice([-1, 1], x.shape)
    H = 0.5 * (A + A.transpose(0, 2, 1))
    lam = 0.9

    def sal(u):
        return np.stack([W[y[i]] + H[y[i]] @ u[i] for i in range(len(y))])

    def d(a, c):
        if dissimilarity == "pearson":
            a, c = a - a.mean(1, keepdims=True), c - c.mean(1, keepdims=True)
        return np.array([1 - cos(a[i], c[i]) for i in range(len(a))])

    def logits(u):
        return u @ W.T + b + 0.5 * np.einsum("ni,cij,nj->nc", u, A, u)

    def check(m, xx, yy, objective):     # CE(x') + lam · d(A(x), A(x')), per example
        got = objective(m, T(x_adv).requires_grad_(True), yy).detach().numpy()
        ce = -np_log_softmax(logits(x_adv))[np.arange(len(y)), y]
        np.testing.assert_allclose(got, ce + lam * d(sal(x), sal(x_adv)), rtol=1e-10)

    fixed_attack(monkeypatch, T(x_adv), check)
    loss = make_loss("advaat", lam=lam, dissimilarity=dissimilarity, eps=0.1, steps=2,
                     step_size=0.05)
    value, logs = loss(Quad(W, b, A), T(x), torch.as_tensor(y))
    want = np_ce(logits(x_adv), y) + lam * d(sal(x), sal(x_adv)).mean()
    assert float(value.detach()) == pytest.approx(want, rel=1e-10)


def test_pearson_ignores_a_shift_that_cosine_sees():
    loss_p, loss_c = AdvAAT(dissimilarity="pearson"), AdvAAT(dissimilarity="cosine")
    a = torch.tensor([[1.0, 2.0, 4.0]], dtype=torch.float64)
    assert float(loss_p.dissim(a, a + 5)) == pytest.approx(0.0, abs=1e-12)
    assert float(loss_c.dissim(a, a + 5)) > 1e-3


def test_advaat_gradcheck():
    model = tiny_mlp(seed=5)
    x = torch.rand(4, 4, dtype=torch.float64) * 0.6 + 0.2
    y = torch.tensor([2, 1, 0, 1])
    loss = AdvAAT(lam=0.6, eps=0.05, steps=2, step_size=0.03)
    gradcheck_params(model, lambda m: loss(m, x, y)[0])


# --------------------------------------------------------------------------- validation
@pytest.mark.parametrize("name, hp, match", [
    ("atex", dict(lam=-1.0), "lam"),
    ("atex", dict(eps=float("nan")), "eps"),
    ("atex", dict(temperature=0.0), "temperature"),
    ("atex", dict(sg_samples=0), "sg_samples"),
    ("atex", dict(sg_sigma=-0.1), "sg_sigma"),
    ("atex", dict(teacher="abc"), "teacher"),
    ("atex", dict(teacher=7), "teacher"),
    ("atex", dict(from_teacher=1), "from_teacher"),
    ("iga", dict(lam=float("inf")), "lam"),
    ("iga", dict(eps=-0.1), "eps"),
    ("iga", dict(steps=0), "steps"),
    ("iga", dict(step_size=-1.0), "step_size"),
    ("iga", dict(topk=0), "topk"),
    ("iga", dict(units="raw"), "units"),
    ("advaat", dict(lam=-0.5), "lam"),
    ("advaat", dict(norm="l1"), "norm"),
    ("advaat", dict(eps=-1.0), "eps"),
    ("advaat", dict(steps=1.5), "steps"),
    ("advaat", dict(step_size=float("nan")), "step_size"),
    ("advaat", dict(dissimilarity="l2"), "dissimilarity"),
    ("advaat", dict(gamma=1.0), "no hyper-parameter"),
])
def test_bad_hparams_raise(name, hp, match):
    with pytest.raises(ValueError, match=match):
        make_loss(name, **hp)


def test_defaults_are_the_documented_values():
    assert make_loss("atex").hparams == {"lam": 3.0, "eps": 4 / 255, "temperature": 1.0,
                                         "sg_samples": 10, "sg_sigma": 0.08, "teacher": None,
                                         "from_teacher": False}
    assert make_loss("iga").hparams == {"lam": 0.5, "eps": 8 / 255, "steps": 3,
                                        "step_size": 5 / 255, "topk": 1000,
                                        "units": "normalized"}
    assert make_loss("advaat").hparams == {"lam": 1.0, "norm": "linf", "eps": 8 / 255,
                                           "steps": 7, "step_size": 2 / 255,
                                           "dissimilarity": "pearson"}


# --------------------------------------------------------------------------- the zoo
@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ROBATTR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ROBATTR_TRAIN_SIZE", raising=False)
    monkeypatch.delenv("ROBATTR_RECIPE", raising=False)
    return tmp_path / "cache"


@pytest.mark.parametrize("name, hp", [("iga", {}), ("advaat", dict(steps=3))])
def test_zoo_trains_a_digits_mlp(cache, name, hp):
    model = zoo.get_model("digits", "mlp", name, epochs=1, progress=False, **hp)
    meta = model.zoo_meta
    assert meta["config"]["method"] == name and math.isfinite(meta["final_loss"])
    assert meta["test_acc"] > 0.3
    again = zoo.get_model("digits", "mlp", name, epochs=1, progress=False, **hp)
    assert again.zoo_meta["key"] == meta["key"] and zoo.stats()["hits"] >= 1


def test_zoo_trains_atex_from_a_ce_teacher(cache):
    teacher = zoo.get_model("digits", "mlp", "ce", epochs=1, progress=False)
    key = teacher.zoo_meta["key"]
    student = zoo.get_model("digits", "mlp", "atex", teacher=key, epochs=1, sg_samples=2,
                            progress=False)
    meta = student.zoo_meta
    assert meta["config"]["loss"]["teacher"] == key and math.isfinite(meta["final_loss"])
    assert meta["test_acc"] > 0.3
    other = zoo.config_hash("digits", "mlp", "atex", epochs=1, sg_samples=2)
    assert other != meta["key"]                      # the teacher is part of the key
    # from_teacher: the student starts at the teacher's weights (KL = 0 at the first step)
    loss = ATEX(teacher=key, from_teacher=True)
    fresh = zoo.get_model("digits", "mlp", "ce", epochs=1, progress=False, seed=1)
    X, y = data.as_tensors(data.load("digits", "train"), n=16)
    _, logs = loss(fresh, X, y)
    assert float(logs["kl"]) == pytest.approx(0.0, abs=1e-6)
    for a, b in zip(fresh.state_dict().values(), teacher.state_dict().values()):
        torch.testing.assert_close(a, b)


def test_atex_teacher_errors(cache):
    with pytest.raises(ValueError, match="not in the zoo cache"):
        ATEX(teacher="0" * 64)(zoo.get_model("digits", "mlp", "ce", epochs=1, progress=False),
                               *data.as_tensors(data.load("digits", "train"), n=4))
    key = zoo.get_model("digits", "mlp", "ce", epochs=1, progress=False).zoo_meta["key"]
    cnn = zoo.get_model("digits", "cnn", "ce", epochs=1, progress=False)
    with pytest.raises(ValueError, match="architecture differs"):
        ATEX(teacher=key)(cnn, *data.as_tensors(data.load("digits", "train"), n=4))


# --------------------------------------------------------------------------- CUDA
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
@pytest.mark.parametrize("name", NAMES)
def test_cuda_matches_cpu(monkeypatch, name):
    """Deterministic settings (no attack: eps = 0 for IGA and AdvAAT; fixed draws and a
    plain-gradient explanation for ATEX) give the CPU's value and gradients on CUDA."""
    hp = {"iga": dict(eps=0.0), "advaat": dict(eps=0.0),
          "atex": dict(eps=0.3, sg_sigma=0.0)}[name]
    rng = np.random.default_rng(0)
    along, across, r = rng.uniform(-1, 1, 6), rng.uniform(-1, 1, 6), rng.uniform(-1, 1, (6, 4))
    monkeypatch.setattr(ATEX, "_draws", lambda self, x: tuple(
        T(a).to(x.device) for a in (along, across, r)))
    out = {}
    for dev in ("cpu", "cuda"):
        model = tiny_mlp(seed=7).to(dev)
        x = (torch.rand(6, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
             .to(dev))
        y = torch.tensor([0, 1, 2, 0, 1, 2], device=dev)
        loss = make_loss(name, **hp)
        if name == "atex":
            loss.set_teacher(model, tiny_mlp(seed=8).to(dev))
        value, logs = loss(model, x, y)
        grads = torch.autograd.grad(value, list(model.parameters()))
        assert value.device.type == dev
        out[dev] = (value.detach().cpu(), [g.cpu() for g in grads])
    torch.testing.assert_close(out["cuda"][0], out["cpu"][0], rtol=1e-9, atol=1e-12)
    for a, b in zip(out["cuda"][1], out["cpu"][1]):
        torch.testing.assert_close(a, b, rtol=1e-8, atol=1e-10)
