"""Training losses: the protocol, plain CE, and the robust losses of the five papers.

A loss is a small object built from its hyper-parameters and called on a batch::

    loss = make_loss("trades", trades_beta=6.0)   # or TRADES(...), or LOSSES["trades"](...)
    value, logs = loss(model, x, y)               # scalar to backprop, dict of logged values

The protocol every loss follows:

* subclass :class:`Loss`, set ``name`` (the key in :data:`LOSSES` and the zoo's
  ``method``) and ``defaults`` (every hyper-parameter with its default; the zoo hashes
  the full set, so adding a hyper-parameter later changes no existing key only if its
  default reproduces the old behaviour); validate them in :meth:`Loss.validate`;
* decorate with :func:`register_loss`;
* ``__call__(model, x, y)`` returns ``(loss, logs)``: ``loss`` a scalar tensor, ``logs``
  a dict name -> 0-dim tensor or float (batch means; the trainer averages them over the
  epoch, weighted by batch size, and reads them once per epoch). By convention
  ``logs["acc"]`` is the clean accuracy of the batch, which the trainer's ``History``
  reports as train accuracy. A loss may switch the model to eval mode inside (the PGD
  inner loops do) but leaves every module's mode as it found it.

Hyper-parameter names must avoid :data:`RESERVED_HPARAMS` (the zoo passes its extra
keywords to the loss): TRADES' and SSR's β are ``trades_beta`` and ``ssr_beta``, since
``beta`` is the Softplus β of the model. Every ε is in pixel units ([0, 1] scale); every
gradient is taken w.r.t. the raw pixels (the models normalise inside), except in 003's
regularisers (``hessian``, ``l2``, ``cosd``, ``l2_cosd``): with ``units="normalized"`` (their
default) they measure input gradients w.r.t. the *normalised* input ``(x − mean) / std``, as
003's code does, so that 003's λ values mean what they mean in the paper
(:class:`_GradAlign` gives the conversion; ``units="pixel"`` keeps pixel units).

The losses (each class docstring gives the definition and the evidence):

========== ==================================================================== =========
name       objective (batch mean unless said)                                    source
========== ==================================================================== =========
ce         CE(x)                                                                 --
at         CE(x_adv), x_adv = PGD on CE (Madry et al. 2018)                      000
trades     CE(x) + trades_beta · KL(p(x) ‖ p(x_adv)), x_adv = PGD on the KL      002 Eq.38
ig_norm    CE(x) + gamma · ‖IG_CE(x → x_adv)‖₁, x_adv = PGD on that norm         000 Tab.1
igr        TRADES + lam · (1 − cos(IG(x), IG(x_adv)))                            002 Eq.39
ssr        ssr_beta · scale · λ_max(W A Wᵀ) + (1 − ssr_beta) · CE(x)             000 B1
hessian    CE(x) + lam · ‖∇² z_y(x) v‖², v ~ N(0, I) (Hutchinson)                003
l2         CE(x) + lam · ‖∇z_y(x+δ) − ∇z_y(x)‖², δ ~ U([−eps, eps]^d)             003 Eq.5
cosd       CE(x) + lam_cos · (1 − cos(∇z_y(x+δ), ∇z_y(x))) / 2                   003 Eq.4
l2_cosd    CE(x) + lam · l2 + lam_cos · cosd                                     003 Eq.5
========== ==================================================================== =========

Second derivatives: only ``hessian`` needs the Hessian of the network itself
(Hessian-vector products), which is zero through ReLU; given a ReLU model it raises a
ValueError unless ``surrogate_beta`` is set, in which case its regulariser is computed
on a Softplus(surrogate_beta) copy sharing the weights (:func:`robattr.models.using_activation`).
The others differentiate a gradient w.r.t. the *parameters* (double backward), which
is nonzero through ReLU (003, "Second order derivatives"); SSR's W A Wᵀ needs only
first derivatives of the logits (and is the exact input Hessian of CE for ReLU nets).
"""
from __future__ import annotations

import contextlib
import math
import numbers
import sys
import types
from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from robattr.models import Normalize, has_relu

__all__ = [
    "Loss", "LOSSES", "RESERVED_HPARAMS", "register_loss", "make_loss", "CrossEntropy",
    "AdversarialTraining", "TRADES", "IGNorm", "IGR", "SSR", "HessianNorm", "GradL2",
    "GradCosd", "GradL2Cosd", "has_relu",
]


# --------------------------------------------------------------------------- protocol
class Loss:
    """Base class of training losses: ``loss(model, x, y) -> (scalar, logs)``.

    ``hparams`` holds every hyper-parameter, defaults filled in (ints given for float
    defaults become floats, so ``lam=1`` and ``lam=1.0`` are the same configuration);
    each is also readable as an attribute (``loss.lam``). Invalid values raise a
    ValueError at construction (so the zoo rejects a bad configuration before training).
    """

    name: ClassVar[str] = ""
    defaults: ClassVar[dict[str, Any]] = {}

    def __init__(self, **hparams: Any):
        unknown = sorted(set(hparams) - set(self.defaults))
        if unknown:
            known = ", ".join(self.defaults) or "none"
            raise ValueError(f"loss {self.name!r} has no hyper-parameter "
                             f"{', '.join(map(repr, unknown))} (it takes: {known})")
        self.hparams = {k: _coerce(k, d, hparams.get(k, d)) for k, d in self.defaults.items()}
        self.validate()

    def validate(self) -> None:
        """Check ``self.hparams``; raise ValueError with a clear message. Override."""

    def __getattr__(self, key: str) -> Any:
        hp = self.__dict__.get("hparams", {})
        if key in hp:
            return hp[key]
        raise AttributeError(f"{type(self).__name__!s} has no attribute {key!r}")

    def __call__(self, model: nn.Module, x: torch.Tensor,
                 y: torch.Tensor) -> tuple[torch.Tensor, dict[str, Any]]:
        raise NotImplementedError

    def config(self) -> dict[str, Any]:
        """``{"name": ..., **hparams}``: what defines this loss (used by the zoo's key)."""
        return {"name": self.name, **self.hparams}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.hparams.items())
        return f"{type(self).__name__}({args})"

    @staticmethod
    def accuracy(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Batch accuracy as a detached 0-dim tensor (no device sync)."""
        return (logits.detach().argmax(1) == y).float().mean()

    # validation helpers for subclasses
    def _real(self, key: str, positive: bool = False) -> None:
        v = self.hparams[key]
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not math.isfinite(v) \
                or (v <= 0 if positive else v < 0):
            raise ValueError(f"loss {self.name!r}: {key} must be a finite number "
                             f"{'> 0' if positive else '>= 0'}, got {v!r}")

    def _int(self, key: str, lo: int = 1) -> None:
        v = self.hparams[key]
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo:
            raise ValueError(f"loss {self.name!r}: {key} must be an integer >= {lo}, got {v!r}")

    def _choice(self, key: str, choices: tuple) -> None:
        if self.hparams[key] not in choices:
            raise ValueError(f"loss {self.name!r}: {key} must be one of "
                             f"{', '.join(map(repr, choices))}, got {self.hparams[key]!r}")


def _coerce(key: str, default: Any, value: Any) -> Any:
    if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


LOSSES: dict[str, type[Loss]] = {}

#: Names a loss hyper-parameter may not take: :func:`robattr.zoo.get_model` passes its
#: extra keyword arguments to the loss, so these would be ambiguous there (e.g. TRADES'
#: beta must be called something else, since ``beta`` is the Softplus beta).
RESERVED_HPARAMS = frozenset({
    "dataset", "arch", "method", "epochs", "lr", "batch_size", "optimizer", "weight_decay",
    "milestones", "seed", "activation", "beta", "device", "retrain", "progress", "name",
})


def _registry() -> dict[str, type[Loss]]:
    """The live registry: ``robattr.train.LOSSES`` (so swapping that attribute, as a test
    may, swaps the registry used by :func:`register_loss` and :func:`make_loss`)."""
    pkg = sys.modules.get(__name__.rpartition(".")[0])
    reg = getattr(pkg, "LOSSES", None)
    return reg if isinstance(reg, dict) else LOSSES


def register_loss(cls: type[Loss]) -> type[Loss]:
    """Class decorator: add a :class:`Loss` subclass to :data:`LOSSES` under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} needs a non-empty `name`")
    clash = sorted(RESERVED_HPARAMS & set(cls.defaults))
    if clash:
        raise ValueError(f"loss {cls.name!r}: hyper-parameter name(s) {clash} are reserved "
                         "(they mean something else to fit/get_model); rename them")
    reg = _registry()
    if cls.name in reg and reg[cls.name] is not cls:
        raise ValueError(f"a loss named {cls.name!r} is already registered")
    reg[cls.name] = cls
    return cls


def make_loss(name: str | Loss, **hparams: Any) -> Loss:
    """Build a registered loss by name (``make_loss("ce")``); a Loss object passes through."""
    if isinstance(name, Loss):
        if hparams:
            raise ValueError("hyper-parameters go to the Loss constructor, not make_loss")
        return name
    reg = _registry()
    if name not in reg:
        raise ValueError(f"unknown loss {name!r}; known: {', '.join(reg)}")
    return reg[name](**hparams)


# --------------------------------------------------------------------------- helpers
def _target_logit_sum(logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return logits.gather(1, y[:, None]).sum()


#: ``units`` of 003's regularisers: gradients w.r.t. the normalised input (003's code) or
#: w.r.t. the raw pixels.
UNITS = ("normalized", "pixel")


def _input_scale(model: nn.Module, x: torch.Tensor, units: str) -> torch.Tensor | None:
    """The per-channel std σ that turns a pixel gradient into a gradient w.r.t. the
    normalised input (``∇_n = σ ⊙ ∇_x`` for ``x_n = (x − μ) / σ``), shaped to broadcast to
    ``x``; None when ``units == "pixel"`` or the model has no
    :class:`robattr.models.Normalize` layer (its input is then taken as already
    normalised: σ = 1). The std is the first Normalize module's (``model[0]`` in every
    :func:`robattr.models.build` model)."""
    if units == "pixel":
        return None
    norm = next((m for m in model.modules() if isinstance(m, Normalize)), None)
    if norm is None:
        return None
    std = norm.std.to(device=x.device, dtype=x.dtype)
    try:
        torch.broadcast_shapes(std.shape, x.shape)
    except RuntimeError:
        raise ValueError(f"units='normalized': the model's Normalize std {tuple(std.shape)} "
                         f"does not broadcast to the input {tuple(x.shape)}") from None
    return std


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


def _clean_logits(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """Logits of the clean batch for logging only: no graph, eval mode (BatchNorm's running
    statistics are neither used from nor updated by this extra pass)."""
    from robattr.attacks.pgd import eval_mode

    with torch.no_grad(), eval_mode(model):
        return model(x)


def _kl(logits_p: torch.Tensor, logits_q: torch.Tensor) -> torch.Tensor:
    """Per-example KL(softmax(logits_p) ‖ softmax(logits_q)), (N,)."""
    lp, lq = F.log_softmax(logits_p, 1), F.log_softmax(logits_q, 1)
    return (lp.exp() * (lp - lq)).sum(1)


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


class _LogProb(nn.Module):
    """``log_softmax(model(x))``: lets a logit attribution (IG) explain ``log p_y``, i.e.
    minus the cross-entropy, whose IG is what IG-NORM penalises."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, x):
        return F.log_softmax(self.model(x), dim=1)


def _integrated_gradients():
    """The package's IG (``robattr.attributions.integrated_gradients``); no private copy."""
    try:
        from robattr.attributions import integrated_gradients
    except ImportError as e:  # pragma: no cover - only while the attributions package lands
        raise ImportError("this loss needs robattr.attributions.integrated_gradients, which "
                          "this installation lacks") from e
    return integrated_gradients


class _PGDMixin:
    """Hyper-parameter checks shared by the losses with a PGD inner loop."""

    def _check_pgd(self: Loss) -> None:
        self._choice("norm", ("linf", "l2"))
        self._real("eps")
        self._real("step_size")
        self._int("steps", 1)

    def _attack(self: Loss, model, x, y, **kw):
        from robattr.attacks.pgd import pgd

        return pgd(model, x, y, eps=self.eps, norm=self.norm, steps=self.steps,
                   step_size=self.step_size, random_start=True, select="last", **kw)


# --------------------------------------------------------------------------- CE
@register_loss
class CrossEntropy(Loss):
    """Plain cross-entropy on clean inputs (the "CE only" baseline of every paper)."""

    name = "ce"
    defaults: ClassVar[dict[str, Any]] = {}

    def __call__(self, model, x, y):
        logits = model(x)
        loss = F.cross_entropy(logits, y)
        return loss, {"ce": loss.detach(), "acc": self.accuracy(logits, y)}


# --------------------------------------------------------------------------- AT
@register_loss
class AdversarialTraining(_PGDMixin, Loss):
    """Madry et al. (ICLR 2018): cross-entropy at the PGD adversarial example.

    ``x_adv = pgd(model, x, y, eps, norm, steps, step_size)`` from a uniform random start
    (the final iterate, model in eval mode), then ``CE(model(x_adv), y)`` in train mode.
    ``eps = 0`` gives plain CE. Defaults: ℓ∞, 8/255, 7 steps of 2/255 (Madry's CIFAR
    training attack); 000 Table 3's Madry model is ℓ2 (``norm="l2"``). Logs the clean
    accuracy (an extra no-grad eval-mode forward) and the adversarial one.
    """

    name = "at"
    defaults: ClassVar[dict[str, Any]] = {"norm": "linf", "eps": 8 / 255, "steps": 7,
                                          "step_size": 2 / 255}

    def validate(self):
        self._check_pgd()

    def __call__(self, model, x, y):
        x_adv = self._attack(model, x, y)
        logits_adv = model(x_adv)
        loss = F.cross_entropy(logits_adv, y)
        return loss, {"ce_adv": loss.detach(), "adv_acc": self.accuracy(logits_adv, y),
                      "acc": self.accuracy(_clean_logits(model, x), y)}


# --------------------------------------------------------------------------- TRADES
@register_loss
class TRADES(_PGDMixin, Loss):
    """Zhang et al. (ICML 2019), 002 Eq. 38: ``CE(x) + trades_beta · KL(p(x) ‖ p(x_adv))``.

    ``x_adv`` maximises the per-example KL to the clean prediction (held fixed during the
    attack) by PGD in eval mode; the outer KL is differentiated through both ``p(x)`` and
    ``p(x_adv)`` as in the reference code. Defaults: β = 6, ℓ∞ 8/255, 10 steps of 2/255
    (the reference uses 0.031 / 0.007). One difference: the reference starts the attack
    at ``x + 0.001·N(0, I)``; ours starts uniformly in the ball (KL has zero gradient at
    ``x_adv = x``, any start off ``x`` works).
    """

    name = "trades"
    defaults: ClassVar[dict[str, Any]] = {"trades_beta": 6.0, "norm": "linf", "eps": 8 / 255,
                                          "steps": 10, "step_size": 2 / 255}

    def validate(self):
        self._real("trades_beta")
        self._check_pgd()

    def _adversary(self, model, x, y):
        logits_nat = _clean_logits(model, x)
        x_adv = self._attack(model, x, y, loss=lambda m, xa, _: _kl(logits_nat, m(xa)))
        return x_adv, logits_nat

    def __call__(self, model, x, y):
        x_adv, _ = self._adversary(model, x, y)
        logits = model(x)
        logits_adv = model(x_adv)
        ce = F.cross_entropy(logits, y)
        kl = _kl(logits, logits_adv).mean()
        loss = ce + self.trades_beta * kl
        return loss, {"ce": ce.detach(), "kl": kl.detach(), "acc": self.accuracy(logits, y),
                      "adv_acc": self.accuracy(logits_adv, y)}


# --------------------------------------------------------------------------- IG-NORM
@register_loss
class IGNorm(_PGDMixin, Loss):
    """IG-NORM (Chen et al., NeurIPS 2019) as 000 trains it (Table 1, smoothed_geometry).

    ``CE(x) + gamma · ‖IG(x, x_adv)‖₁`` where IG explains the cross-entropy along the
    straight path from the clean ``x`` (the baseline) to ``x_adv``, and ``x_adv``
    maximises that ℓ1 norm by ℓ∞ PGD (sign steps, random start, ``steps`` = Table 1's
    nbiter, ``step_size``, ``eps``). IG uses ``ig_steps // approx_factor`` right-endpoint
    points (Table 1: m = 50 and approx_factor = 10 give 5 points, alpha = 0.2, ..., 1.0;
    the reference code keeps every approx_factor-th of the m right Riemann points), in
    the attack and in the loss alike (smoothed_geometry's robust/ig_norm.py; Chen et al.'s
    own code uses all m in the loss). IG of the CE equals minus IG of ``log p_y``, so we
    call :func:`robattr.attributions.integrated_gradients` on ``log_softmax(model)``.

    ``reduction="sum"`` (default): as in both reference implementations the ℓ1 norm is
    summed over the batch while CE is averaged, so Table 1's gamma = 0.1 at batch size 16
    reproduces 000's training; ``"mean"`` averages it (weight per example independent of
    the batch size: gamma_mean = gamma_sum · batch_size). Defaults: Table 1.
    """

    name = "ig_norm"
    defaults: ClassVar[dict[str, Any]] = {"gamma": 0.1, "norm": "linf", "eps": 8 / 255,
                                          "steps": 7, "step_size": 2 / 255, "ig_steps": 50,
                                          "approx_factor": 10, "reduction": "sum"}

    def validate(self):
        self._real("gamma")
        self._check_pgd()
        self._int("ig_steps", 1)
        self._int("approx_factor", 1)
        if self.ig_steps % self.approx_factor:
            raise ValueError(f"loss 'ig_norm': ig_steps ({self.ig_steps}) must be a multiple of "
                             f"approx_factor ({self.approx_factor})")
        self._choice("reduction", ("sum", "mean"))

    def ig_l1(self, model: nn.Module, x: torch.Tensor, x_adv: torch.Tensor, y: torch.Tensor,
              create_graph: bool = True) -> torch.Tensor:
        """Per-example ‖IG_CE(x → x_adv)‖₁, (N,)."""
        n = self.ig_steps // self.approx_factor
        ig = _integrated_gradients()(_LogProb(model), x_adv, y, baseline=x, steps=n,
                                     method="right", batch_size=n * x.shape[0],
                                     create_graph=create_graph)
        return ig.abs().reshape(x.shape[0], -1).sum(1)

    def __call__(self, model, x, y):
        x = x.detach()
        x_adv = self._attack(model, x, y, loss=lambda m, xa, yy: self.ig_l1(m, x, xa, yy))
        logits = model(x)
        ce = F.cross_entropy(logits, y)
        reg = self.ig_l1(model, x, x_adv, y)
        reg_total = reg.sum() if self.reduction == "sum" else reg.mean()
        loss = ce + self.gamma * reg_total
        return loss, {"ce": ce.detach(), "ig_l1": reg.detach().mean(),
                      "acc": self.accuracy(logits, y)}


# --------------------------------------------------------------------------- IGR
@register_loss
class IGR(TRADES):
    """IGR (Wang & Kong, NeurIPS 2022) as 002 Eq. 39 states it:
    ``CE(x) + trades_beta · KL(p(x) ‖ p(x_adv)) + lam · (1 − cos(IG(x), IG(x_adv)))``.

    Our reading, where 002 is silent: ``x_adv`` is TRADES' KL-maximising PGD example (Eq.
    39 is TRADES' objective plus the cosine term, and 001 calls the model "TRADES+IGR");
    IG explains the true-class logit from a zero (black) baseline with ``ig_steps``
    midpoint points, differentiated through (create_graph) at both ``x`` and ``x_adv``;
    cosine over the flattened map, batch mean. ``lam = 0`` is TRADES, and with
    ``trades_beta = 0`` too it is CE. ``lam = 1`` is our default (002 gives no value).
    """

    name = "igr"
    defaults: ClassVar[dict[str, Any]] = {"trades_beta": 6.0, "lam": 1.0, "norm": "linf",
                                          "eps": 8 / 255, "steps": 10, "step_size": 2 / 255,
                                          "ig_steps": 10}

    def validate(self):
        super().validate()
        self._real("lam")
        self._int("ig_steps", 1)

    def __call__(self, model, x, y):
        x = x.detach()
        x_adv, _ = self._adversary(model, x, y)
        n = x.shape[0]
        logits = model(x)
        logits_adv = model(x_adv)
        ce = F.cross_entropy(logits, y)
        kl = _kl(logits, logits_adv).mean()
        ig = _integrated_gradients()(model, torch.cat([x, x_adv]), torch.cat([y, y]),
                                     steps=self.ig_steps, method="midpoint",
                                     batch_size=2 * n * self.ig_steps, create_graph=True)
        cos = F.cosine_similarity(ig[:n].reshape(n, -1), ig[n:].reshape(n, -1), dim=1,
                                  eps=1e-12)
        cos_term = (1 - cos).mean()
        loss = ce + self.trades_beta * kl + self.lam * cos_term
        return loss, {"ce": ce.detach(), "kl": kl.detach(), "ig_cos": cos.detach().mean(),
                      "acc": self.accuracy(logits, y), "adv_acc": self.accuracy(logits_adv, y)}


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
