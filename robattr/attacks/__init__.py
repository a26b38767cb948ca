"""Attacks: PGD on the prediction (:func:`pgd`) and the projections every attack shares.

All attacks take and return pixels in [0, 1] (the models normalise inside), batch-first,
and keep each example inside its own ε-ball (:func:`project`). The attribution attacks
(top-k, mass center, targeted manipulate, IFIA, random perturbation) live in their own
modules of this package.
"""
from __future__ import annotations

from robattr.attacks.pgd import eval_mode, pgd
from robattr.attacks.projection import (NORMS, per_example_norm, project, project_l2,
                                        project_linf)

__all__ = ["pgd", "eval_mode", "project", "project_linf", "project_l2", "per_example_norm",
           "NORMS"]

# attribution attacks (robattr/attacks/attribution.py)
from robattr.attacks.attribution import (AttackResult, VanishingGradientWarning,  # noqa: E402
                                         frame_target, ifia, l2_attribution_attack,
                                         mass_center_attack, random_perturbation, targeted_attack,
                                         topk_attack)

__all__ += ["AttackResult", "VanishingGradientWarning", "topk_attack", "ifia",
            "l2_attribution_attack", "mass_center_attack", "targeted_attack", "frame_target",
            "random_perturbation"]
