"""The losses with a PGD inner loop: adversarial training (``at``), TRADES (``trades``),
IG-NORM (``ig_norm``) and IGR (``igr``, TRADES plus an IG-cosine term)."""
from __future__ import annotations

from typing import Any, ClassVar

import torch
from torch import nn
from torch.nn import functional as F

from robattr.train.losses.base import Loss, register_loss

__all__ = ["AdversarialTraining", "TRADES", "IGNorm", "IGR"]


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
