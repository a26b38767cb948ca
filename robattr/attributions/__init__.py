"""Differentiable, batched attribution methods.

Every method has one call shape, batch-first::

    attr = method(model, x, target, *, create_graph=False, **options)

``x`` is a floating batch, N x C x H x W (or N x D) of pixels in [0, 1]; ``target`` an
int tensor of N class indices (or one int, or None for the predicted class). The result
has the shape of ``x``. With ``create_graph=True`` the result stays differentiable w.r.t.
``x`` (when ``x.requires_grad``) and the model's parameters, which attacks and robust
training need; methods without a useful derivative raise :class:`NotDifferentiableError`.
Sampling methods evaluate their samples ``batch_size`` rows at a time and take
``generator=`` or ``seed=``. Bad arguments raise ``ValueError`` naming the argument.

=========================  ==============================================  ===============
method                     paper                                           create_graph
=========================  ==============================================  ===============
grad                       Simonyan 2014; 000 "saliency", 003 "Grad"       yes
input_x_grad               Shrikumar 2017; 003 "xGrad"                     yes
integrated_gradients       Sundararajan 2017; 000, 001                     yes
smoothgrad                 Smilkov 2017; 000                               yes
uniform_grad               000 "Uniform Gradient"                          yes
ball_smooth                002 (l2-ball smoothing of any base method)      yes (if base)
guided_backprop            Springenberg 2015; 003 "GBP"                    yes
lrp                        Bach 2015, 003's z+ / zB                        yes
relex                      004 RelEx, Eq. 9-11                             no
grad_cam, deeplift         004 baselines (Captum)                          no
meaningful_perturbation    004 "MASK" (Fong & Vedaldi 2017)                no
=========================  ==============================================  ===============

Post-processing: :func:`reduce_channels`, :func:`percentile_normalize`,
:func:`minmax_normalize`, :func:`saliency_wang2020`, :func:`to_mask` (004's map as a [0, 1]
mask). Noise samplers (for the book's checks): :func:`gaussian_noise`, :func:`cube_noise`,
:func:`ball_noise`.
"""
from __future__ import annotations

from ._core import NotDifferentiableError, chunk_rows, last_chunk_rows, logit_grad, resolve_target
from .baselines import deeplift, grad_cam, last_conv, meaningful_perturbation
from .gradient import grad, input_x_grad
from .guided_backprop import guided_activations, guided_backprop
from .integrated_gradients import IG_METHODS, integrated_gradients, path_points
from .lrp import Epsilon, ZBox, ZPlus, lrp, stabilize
from .noise import ball_noise, cube_noise, gaussian_noise
from .postprocess import (MASK_KINDS, minmax_normalize, percentile_normalize, reduce_channels,
                          saliency_wang2020, to_mask)
from .relex import relex, relex_loss
from .smoothing import ball_smooth, ball_smoothed, noise_average, smoothgrad, uniform_grad

#: The methods with the standard call shape, by name.
METHODS = {
    f.__name__: f for f in (
        grad, input_x_grad, integrated_gradients, smoothgrad, uniform_grad, ball_smooth,
        guided_backprop, lrp, relex, grad_cam, deeplift, meaningful_perturbation)
}

#: The methods that support ``create_graph=True``.
DIFFERENTIABLE = ("grad", "input_x_grad", "integrated_gradients", "smoothgrad", "uniform_grad",
                  "ball_smooth", "guided_backprop", "lrp")

__all__ = [
    "METHODS", "DIFFERENTIABLE", "NotDifferentiableError", "resolve_target", "logit_grad",
    "chunk_rows", "last_chunk_rows",
    "grad", "input_x_grad", "integrated_gradients", "IG_METHODS", "path_points",
    "smoothgrad", "uniform_grad", "ball_smooth", "ball_smoothed", "noise_average",
    "guided_backprop", "guided_activations", "lrp", "ZPlus", "ZBox", "Epsilon", "stabilize",
    "relex", "relex_loss", "grad_cam", "deeplift", "meaningful_perturbation", "last_conv",
    "gaussian_noise", "cube_noise", "ball_noise",
    "reduce_channels", "percentile_normalize", "minmax_normalize", "saliency_wang2020",
    "MASK_KINDS", "to_mask",
]
