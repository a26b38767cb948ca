"""The regularisers of the input gradient and its curvature: SSR (``ssr``, 000), the
Hessian norm (``hessian``) and 003's gradient alignment (``l2``, ``cosd``, ``l2_cosd``),
with the conversion of their gradients to the model's normalised input (:data:`UNITS`)."""
from __future__ import annotations

import contextlib
import types
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from robattr.models import Normalize, has_relu
from robattr.train.losses.base import Loss, register_loss

__all__ = ["UNITS", "ROBUSTAGA_CIFAR10", "SSR", "HessianNorm", "GradL2", "GradCosd", "GradL2Cosd"]


def _target_logit_sum(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return logits.gather(1, y[:, None]).sum()


#: ``units`` of 003's regularisers: gradients w.r.t. the normalised input with the model's
#: own normalisation (``"normalized"``), with the normalisation of 003's code for CIFAR-10
#: (``"robustaga"``: :data:`ROBUSTAGA_CIFAR10`, so that 003's lambda weighs the pixel
#: gradients exactly as in its code), or w.r.t. the raw pixels (``"pixel"``).
UNITS = ("normalized", "pixel", "robustaga")

#: The CIFAR-10 normalisation of 003's code (RobustAGA): (mean, std) per channel. Its std
#: is not the data's (robattr.data.info gives 0.2470, 0.2435, 0.2616), so the same lambda
#: in "normalized" units weighs robattr's pixel gradients (σ_ours/σ_theirs)² ≈ 1.5-1.7 (ℓ2)
#: and (σ_ours/σ_theirs)⁴ ≈ 2.2-2.9 (Hessian) times as much as 003's, channel by channel.
ROBUSTAGA_CIFAR10 = ((0.4914, 0.4822, 0.4465), (0.2023, 0.1994, 0.2010))


def _normalizer(model: nn.Module, x: torch.Tensor, units: str):
    """``(mean, std)`` of the model's first :class:`robattr.models.Normalize` layer
    (``model[0]`` in every :func:`robattr.models.build` model), shaped to broadcast to
    ``x``; :data:`ROBUSTAGA_CIFAR10` with ``units == "robustaga"``; None with
    ``units == "pixel"`` or without such a layer (the input is then taken as already
    normalised)."""
    if units == "pixel":
        return None
    if units == "robustaga":
        if x.dim() != 4 or x.shape[1] != 3:
            raise ValueError("units='robustaga' is 003's CIFAR-10 normalisation: it needs "
                             f"3-channel images (N x 3 x H x W), got {tuple(x.shape)}")
        mean, std = (torch.tensor(v, device=x.device, dtype=x.dtype)[None, :, None, None]
                     for v in ROBUSTAGA_CIFAR10)
        return mean, std
    norm = next((m for m in model.modules() if isinstance(m, Normalize)), None)
    if norm is None:
        return None
    mean = norm.mean.to(device=x.device, dtype=x.dtype)
    std = norm.std.to(device=x.device, dtype=x.dtype)
    try:
        torch.broadcast_shapes(std.shape, x.shape)
    except RuntimeError:
        raise ValueError(f"units='normalized': the model's Normalize std {tuple(std.shape)} "
                         f"does not broadcast to the input {tuple(x.shape)}") from None
    return mean, std


def _input_scale(model: nn.Module, x: torch.Tensor, units: str) -> torch.Tensor | None:
    """The per-channel std σ that turns a pixel gradient into a gradient w.r.t. the
    normalised input (``∇_n = σ ⊙ ∇_x`` for ``x_n = (x − μ) / σ``), shaped to broadcast to
    ``x``; None when ``units == "pixel"`` or the model has no Normalize layer (σ = 1):
    :func:`_normalizer`'s std."""
    found = _normalizer(model, x, units)
    return None if found is None else found[1]


def _hessian_vector_sq(logits: torch.Tensor, x: torch.Tensor, y: torch.Tensor, samples: int,
                       scale: torch.Tensor | None) -> torch.Tensor:
    """Per-example mean over ``samples`` draws ``v ~ N(0, I)`` of ``‖H v‖²`` (Hutchinson),
    H the input Hessian of the true-class logit, kept in the graph. With ``scale`` σ, H is
    the Hessian w.r.t. the normalised input: ``H_n v = σ ⊙ H_x (σ ⊙ v)`` (chain rule,
    x_n = (x − μ)/σ), v drawn in normalised units; without it, ``H_x v``."""
    (g,) = torch.autograd.grad(_target_logit_sum(logits, y), x, create_graph=True)
    total = x.new_zeros(x.shape[0])
    for _ in range(samples):
        v = torch.randn(x.shape, device=x.device, dtype=x.dtype)
        u = v if scale is None else v * scale
        (hv,) = torch.autograd.grad((g * u).sum(), x, create_graph=True, retain_graph=True)
        if scale is not None:
            hv = hv * scale
        total = total + hv.reshape(x.shape[0], -1).pow(2).sum(1)
    return total / samples


def _batchnorm_from_plain_ops(self: nn.modules.batchnorm._BatchNorm,
                              x: torch.Tensor) -> torch.Tensor:
    """``nn.BatchNorm*.forward`` on batch statistics, written with plain tensor ops
    (mean, biased variance, affine map), and the running statistics updated as PyTorch
    does (momentum, or the cumulative average when ``momentum`` is None; unbiased
    variance). A layer on running statistics (eval mode) runs its own forward, an affine
    map whose derivatives all exist."""
    if not (self.training or self.running_mean is None):
        return type(self).forward(self, x)
    dims = [0, *range(2, x.ndim)]
    shape = [1, -1] + [1] * (x.ndim - 2)
    n = x.numel() // x.shape[1]
    if self.training and n < 2:
        raise ValueError(f"Expected more than 1 value per channel when training, got input "
                         f"size {tuple(x.shape)}")
    mean, var = x.mean(dims), x.var(dims, correction=0)
    if self.training and self.track_running_stats:
        with torch.no_grad():
            self.num_batches_tracked.add_(1)
            m = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
            self.running_mean.mul_(1 - m).add_(mean.detach(), alpha=m)
            self.running_var.mul_(1 - m).add_(var.detach() * (n / (n - 1)), alpha=m)
    out = (x - mean.reshape(shape)) * torch.rsqrt(var.reshape(shape) + self.eps)
    return out * self.weight.reshape(shape) + self.bias.reshape(shape) if self.affine else out


@contextlib.contextmanager
def _differentiable_batchnorm(model: nn.Module):
    """BatchNorm layers that normalise with batch statistics compute them with plain tensor
    ops inside the block: the same values up to rounding, with derivatives of every order
    (PyTorch's fused batch_norm has no third derivative, which training through a
    Hessian-vector product needs). Each layer's forward is restored on exit (blocks nest)."""
    swapped = {m: vars(m).get("forward") for m in model.modules()
               if isinstance(m, nn.modules.batchnorm._BatchNorm)}
    for m in swapped:
        m.forward = types.MethodType(_batchnorm_from_plain_ops, m)
    try:
        yield model
    finally:
        for m, previous in swapped.items():
            if previous is None:
                del m.forward
            else:  # nested blocks: the outer block's forward
                m.forward = previous


# --------------------------------------------------------------------------- SSR
@register_loss
class SSR(Loss):
    """Smoothed surface regularisation (000, Def. 7 / B1):
    ``ssr_beta · scale · mean_n λ_max(W A Wᵀ) + (1 − ssr_beta) · CE(x)``.

    λ_max is the top eigenvalue of the Gauss-Newton input Hessian of CE (W the input
    Jacobian of the logits, A = diag(p) − ppᵀ), computed differentiably from the C×C
    matrix ``(WL)ᵀ(WL)`` (:func:`robattr.bounds.gauss_newton_top_eigenvalue`), from the
    same forward pass as CE; W costs C extra backward passes that keep no graph, plus one
    kept in the graph (``W L v``, v the top eigenvector). When BatchNorm normalises with
    batch statistics (train mode), which couples the examples, the C passes are kept in
    the graph instead. Works on ReLU networks (only first derivatives of the logits;
    Prop. 3: exact there).
    Defaults: ssr_beta = 0.3 (000 Sec. 5 / C2), scale = 1 (C2: "s = 1 is a good scaling
    factor" for [0, 1] data; 000 used 1e6 on [0, 255]). One difference from the reference
    code (robust/smooth_space.py): it averages W over colour channels before the
    eigen-problem; we use the full Jacobian, which is what Prop. 3 and B1 describe.
    """

    name = "ssr"
    defaults: ClassVar[dict[str, Any]] = {"ssr_beta": 0.3, "scale": 1.0}

    def validate(self):
        self._real("ssr_beta")
        if self.ssr_beta > 1:
            raise ValueError(f"loss 'ssr': ssr_beta must be in [0, 1], got {self.ssr_beta!r}")
        self._real("scale")

    def __call__(self, model, x, y):
        from robattr.bounds import gauss_newton_top_eigenvalue

        x = x.detach().requires_grad_(True)
        logits = model(x)
        ce = F.cross_entropy(logits, y)
        top = gauss_newton_top_eigenvalue(model, x, create_graph=True, logits=logits).mean()
        loss = self.ssr_beta * self.scale * top + (1 - self.ssr_beta) * ce
        return loss, {"ce": ce.detach(), "top_eig": top.detach(),
                      "acc": self.accuracy(logits, y)}


# --------------------------------------------------------------------------- Hessian
@register_loss
class HessianNorm(Loss):
    """Hessian-norm regulariser of Dombrowski et al. (2022) as 003 trains it:
    ``CE(x) + lam · mean_n ‖H v‖²``, ``v ~ N(0, I)`` (``samples`` draws averaged).

    ``E‖Hv‖² = ‖H‖²_F`` (Hutchinson), H the input Hessian of the true-class logit (003
    Eq. 1, Frobenius; joshua840/RobustAGA pl_hessian_classifier.py: one Gaussian v per
    step, the logit of the label, an exact Hessian-vector product by double backward, no
    finite difference). Needs a twice-differentiable model: H is zero through
    ReLU, so a ReLU model raises ValueError unless ``surrogate_beta`` is given; then CE
    is computed on the model as it is and the regulariser on a Softplus(surrogate_beta)
    copy sharing the weights. Training through ``‖Hv‖²`` needs third derivatives, which
    PyTorch's fused BatchNorm lacks: BatchNorm layers on batch statistics are computed with
    plain tensor ops for this loss (same values, :func:`_differentiable_batchnorm`).

    Units. ``units="normalized"`` (default), as RobustAGA: H is the Hessian w.r.t. the
    normalised input x_n = (x − μ)/σ and v is drawn in those units, so
    ``H v = σ ⊙ H_x (σ ⊙ v)`` with H_x the pixel Hessian and σ the std of the model's first
    :class:`robattr.models.Normalize` layer (a model without one: σ = 1). For one channel
    (or equal σ) the term is σ⁴ times the pixel-unit term (same v), so 003's lam = 1e-3
    is lam·σ⁴ in pixel units (≈ 4e-6 with robattr's CIFAR-10 σ ≈ 0.25, ≈ 1.6e-6 with
    RobustAGA's σ ≈ 0.2; see :class:`_GradAlign` on the two σ). ``units="pixel"``: H = H_x,
    v in pixel units (robattr's earlier behaviour, about 1/σ⁴ times 003's scale).
    Default lam = 1e-3 (003's LeNet choice).
    """

    name = "hessian"
    defaults: ClassVar[dict[str, Any]] = {"lam": 1e-3, "samples": 1, "surrogate_beta": None,
                                          "units": "normalized"}

    def validate(self):
        self._real("lam")
        self._int("samples", 1)
        if self.surrogate_beta is not None:
            self._real("surrogate_beta", positive=True)
            self.hparams["surrogate_beta"] = float(self.surrogate_beta)
        self._choice("units", UNITS)

    def __call__(self, model, x, y):
        from robattr.models import using_activation

        x = x.detach().requires_grad_(True)
        relu = has_relu(model)
        if relu and self.surrogate_beta is None:
            raise ValueError(
                "loss 'hessian' needs second derivatives of the network, which are zero "
                "through ReLU: train a softplus model (activation='softplus', beta=...) or "
                "pass surrogate_beta=... to regularise a Softplus copy sharing the weights")
        scale = _input_scale(model, x, self.units)
        with _differentiable_batchnorm(model):
            logits = model(x)
            ce = F.cross_entropy(logits, y)
            if relu:
                with using_activation(model, "softplus", self.surrogate_beta):
                    if has_relu(model):
                        raise ValueError("loss 'hessian': surrogate_beta swaps nn.ReLU modules "
                                         "only; this model has another piecewise-linear "
                                         "activation")
                    reg = _hessian_vector_sq(model(x), x, y, self.samples, scale).mean()
            else:
                reg = _hessian_vector_sq(logits, x, y, self.samples, scale).mean()
        loss = ce + self.lam * reg
        return loss, {"ce": ce.detach(), "hess_sq": reg.detach(), "acc": self.accuracy(logits, y)}


# --------------------------------------------------------------------------- 003
class _GradAlign(Loss):
    """003 Eq. 4-5 (Joo et al., AAAI 2023), shared by ``l2``, ``cosd`` and ``l2_cosd``.

    One δ ~ U([−eps, eps]^d) per example and step (no clipping to [0, 1], as the
    reference code); ``g = ∇z_y(x)`` from the same forward as CE and *detached*
    (003 "Training details": ~25% faster, same results), ``g_r = ∇z_y(x + δ)`` with
    create_graph; ``l2 = ‖g_r − g‖²`` (squared), ``cosd = (1 − cos(g_r, g)) / 2``, batch
    means; loss = CE + lam · l2 + lam_cos · cosd (joshua840/RobustAGA
    pl_l2_plus_cosd_classifier.py). Double backward through ReLU is fine (003), so any
    activation works; 003 trains Softplus(3) models. Defaults: 003's LeNet choices
    (l2+cosd: lam = 0.1, lam_cos = 1; l2: lam = 0.1), eps = 4/255 (RobustAGA's default
    ``--eps 4``; its script uses lam_l2 = 0.01).

    Units. RobustAGA feeds its network normalised inputs x_n = (x − μ)/σ (per-channel σ) and
    differentiates w.r.t. x_n; robattr's models take pixels and normalise inside. With
    ``units="normalized"`` (default) both gradients are taken w.r.t. the normalised input,
    ``∇_n = σ ⊙ ∇_x``, σ the std of the model's first :class:`robattr.models.Normalize`
    layer (a model without one is taken to receive normalised input: σ = 1). So
    ``l2 = ‖σ ⊙ (∇_x z_y(x+δ) − ∇_x z_y(x))‖²``: for one channel (or equal σ) it is σ²
    times the pixel-unit l2, and 003's lam = 0.1 is lam·σ² in pixel units (≈ 0.006 with
    robattr's CIFAR-10 σ ≈ 0.25; ≈ 0.004 with RobustAGA's σ ≈ 0.2). cosd is unchanged for
    equal σ and moves slightly with per-channel σ. The noise needs no conversion:
    RobustAGA draws ``U[−ε/(255σ), ε/(255σ)]`` in normalised units, i.e. ``U[−ε/255, ε/255]``
    per pixel, which is our ``eps`` in pixel units. ``units="pixel"`` takes both
    gradients w.r.t. the pixels (robattr's earlier behaviour: an l2 term about 1/σ² times
    003's). The σ is the model's own: RobustAGA normalises CIFAR-10 with std
    (0.2023, 0.1994, 0.2010), :func:`robattr.data.info` with the per-channel std of the
    data (0.2470, 0.2435, 0.2616), so on robattr's CIFAR-10 models the same lam weighs
    the pixel gradients (σ_ours/σ_theirs)² ≈ 1.5-1.7 times as much as RobustAGA's.
    """

    use_l2: ClassVar[bool] = True
    use_cos: ClassVar[bool] = True

    def validate(self):
        self._real("eps")
        for key in ("lam", "lam_cos"):
            if key in self.hparams:
                self._real(key)
        self._choice("units", UNITS)

    def __call__(self, model, x, y):
        x = x.detach().requires_grad_(True)
        logits = model(x)
        ce = F.cross_entropy(logits, y)
        (g,) = torch.autograd.grad(_target_logit_sum(logits, y), x, retain_graph=True)
        delta = (2 * torch.rand_like(x) - 1) * self.eps
        x_r = (x.detach() + delta).requires_grad_(True)
        (g_r,) = torch.autograd.grad(_target_logit_sum(model(x_r), y), x_r, create_graph=True)
        scale = _input_scale(model, x, self.units)
        if scale is not None:                    # gradients w.r.t. the normalised input
            g, g_r = g * scale, g_r * scale
        n = x.shape[0]
        g, g_r = g.reshape(n, -1), g_r.reshape(n, -1)
        loss, logs = ce, {"ce": ce.detach(), "acc": self.accuracy(logits, y)}
        if self.use_l2:
            l2 = (g_r - g).pow(2).sum(1).mean()
            loss = loss + self.lam * l2
            logs["l2"] = l2.detach()
        if self.use_cos:
            cosd = (1 - F.cosine_similarity(g_r, g, dim=1, eps=1e-12).mean()) / 2
            loss = loss + self.lam_cos * cosd
            logs["cosd"] = cosd.detach()
        return loss, logs


@register_loss
class GradL2(_GradAlign):
    __doc__ = "003's ℓ2 criterion: ``CE + lam · ‖∇z_y(x+δ) − ∇z_y(x)‖²``.\n\n" + _GradAlign.__doc__
    name = "l2"
    defaults: ClassVar[dict[str, Any]] = {"lam": 0.1, "eps": 4 / 255, "units": "normalized"}
    use_cos = False


@register_loss
class GradCosd(_GradAlign):
    __doc__ = "003 Eq. 4: ``CE + lam_cos · (1 − cos(∇z_y(x+δ), ∇z_y(x))) / 2``.\n\n" + _GradAlign.__doc__
    name = "cosd"
    defaults: ClassVar[dict[str, Any]] = {"lam_cos": 1.0, "eps": 4 / 255, "units": "normalized"}
    use_l2 = False


@register_loss
class GradL2Cosd(_GradAlign):
    __doc__ = "003 Eq. 5: ``CE + lam · l2 + lam_cos · cosd``.\n\n" + _GradAlign.__doc__
    name = "l2_cosd"
    defaults: ClassVar[dict[str, Any]] = {"lam": 0.1, "lam_cos": 1.0, "eps": 4 / 255,
                                          "units": "normalized"}
