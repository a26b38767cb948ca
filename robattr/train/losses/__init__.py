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
(:class:`~robattr.train.losses.gradient._GradAlign` gives the conversion;
``units="pixel"`` keeps pixel units).

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
atex       KL(f(x) ‖ g(x)) + lam · KL(f(x_i) ‖ g(x_p)), f a frozen teacher,      003 App.
           x_i along / x_p across the teacher's SmoothGrad (Tang et al. 2022)
iga        CE(x_adv) + lam · softplus(d(∇z_y, x) − d(∇z_i*, x)) at x_adv,         003 App.
           x_adv = PGD on that term, d = 1 − cos (Singh et al. 2020; 001's ART)
advaat     CE(x_adv) + lam · d(∇z_y(x), ∇z_y(x_adv)), x_adv = PGD on the same    FAR
           sum, d = 1 − Pearson (Ivankay et al. 2020; 001's AdvAAT)
========== ==================================================================== =========

Second derivatives: only ``hessian`` needs the Hessian of the network itself
(Hessian-vector products), which is zero through ReLU; given a ReLU model it raises a
ValueError unless ``surrogate_beta`` is set, in which case its regulariser is computed
on a Softplus(surrogate_beta) copy sharing the weights (:func:`robattr.models.using_activation`).
The others differentiate a gradient w.r.t. the *parameters* (double backward), which
is nonzero through ReLU (003, "Second order derivatives"); SSR's W A Wᵀ needs only
first derivatives of the logits (and is the exact input Hessian of CE for ReLU nets).

The package's modules: :mod:`~robattr.train.losses.base` (the protocol, the registry and
``ce``), :mod:`~robattr.train.losses.adversarial` (the losses with a PGD inner loop:
``at``, ``trades``, ``ig_norm``, ``igr``) and :mod:`~robattr.train.losses.gradient` (the
regularisers of the input gradient and its curvature: ``ssr``, ``hessian``, ``l2``,
``cosd``, ``l2_cosd``) and :mod:`~robattr.train.losses.alignment` (the baselines of 001
and 003 from other papers: ``atex``, ``iga``, ``advaat``). Every name is importable from
``robattr.train.losses``.
"""
from __future__ import annotations

from robattr.models import has_relu

# The losses register in the order of the table above (LOSSES): base (ce), then adversarial,
# then gradient, then alignment.
from robattr.train.losses.base import (LOSSES, RESERVED_HPARAMS, CrossEntropy, Loss, make_loss,
                                       register_loss)
from robattr.train.losses.adversarial import IGR, TRADES, AdversarialTraining, IGNorm
from robattr.train.losses.gradient import (SSR, UNITS, GradCosd, GradL2, GradL2Cosd,
                                           HessianNorm)
from robattr.train.losses.gradient import _differentiable_batchnorm  # noqa: F401 (tests)
from robattr.train.losses.alignment import ATEX, IGA, AdvAAT

__all__ = [
    "Loss", "LOSSES", "RESERVED_HPARAMS", "register_loss", "make_loss", "CrossEntropy",
    "AdversarialTraining", "TRADES", "IGNorm", "IGR", "SSR", "HessianNorm", "GradL2",
    "GradCosd", "GradL2Cosd", "ATEX", "IGA", "AdvAAT", "has_relu",
]
