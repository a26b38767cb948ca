"""Each paper's quantities and bounds, one module per topic.

``gauss_newton``      Jacobians, input Hessians, the Gauss-Newton/SSR pieces, Hutchinson (000, 003)
``geometry``          saliency / SmoothGrad geometry: Lipschitz searches, Thms 1-3's bounds (000)
``smoothed_hessian``  Stein's gradient, the smoothed model's Hessian, ‖H_x‖₂ (000)
``deviation``         worst-case attribution deviations: matrix-free ξ_max, ℓ2/ℓp/ℓ∞/cosine bounds (001)
``jacobian``          the matrix-free Jacobian products and ξ_max that deviation builds on (001)
``linearity``         B.1's linearity residual, Thm 3's constant c (001)
``ig_structure``      C.1: the Jacobian of IG and how diagonal it is (001)
``ball``              uniform l2-ball smoothing: volume ratio, cosine certificate, Cor 1 (002)
``montecarlo``        the Monte-Carlo error of a smoothed attribution: generalised chi-square (002)
``center_smoothing``  Kumar & Goldstein's center-smoothing certificate for attribution maps (002)
``alignment``         003's l2 / cosine criteria, the α-transformation, Thm 6's bound terms (003)
``maxpool``           max-pooling switches and ties: where a max-pool network is not smooth
``relex``             RelEx's Theorems 1-2 on the masked loss: radius and loss bounds (004)

Everything public is re-exported here, so ``from robattr.bounds import X`` works for all.
"""
from __future__ import annotations

from robattr.bounds import (alignment, ball, center_smoothing, deviation, gauss_newton,
                            geometry, maxpool, montecarlo, relex, smoothed_hessian)
from robattr.bounds.alignment import *  # noqa: F401,F403
from robattr.bounds.ball import *  # noqa: F401,F403
from robattr.bounds.center_smoothing import *  # noqa: F401,F403
from robattr.bounds.deviation import *  # noqa: F401,F403
from robattr.bounds.gauss_newton import *  # noqa: F401,F403
from robattr.bounds.gauss_newton import _hutchinson  # noqa: F401  (used by the Hessian loss)
from robattr.bounds.geometry import *  # noqa: F401,F403
from robattr.bounds.maxpool import *  # noqa: F401,F403
from robattr.bounds.montecarlo import *  # noqa: F401,F403
from robattr.bounds.relex import *  # noqa: F401,F403
from robattr.bounds.smoothed_hessian import *  # noqa: F401,F403

__all__ = [*gauss_newton.__all__, *geometry.__all__, *smoothed_hessian.__all__,
           *deviation.__all__, *ball.__all__,
           *montecarlo.__all__, *center_smoothing.__all__, *alignment.__all__, *relex.__all__,
           *maxpool.__all__]
