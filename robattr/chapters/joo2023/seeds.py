"""The seed-to-seed spread behind joo2023 Table 1's comparisons of training methods.

Table 1 compares regularisers through one trained model each where the profile trains no
more (003 does not say how many runs a number stands for). Before a difference between two
of them is called a win or a loss, it is set against how much the same cell moves when only
the training seed changes: standard training
(CE, the cheapest model) at :data:`robattr.verdicts.MIN_SEEDS` seeds or more, evaluated on
the same images with the same protocol (:func:`robattr.verdicts.beyond_seeds`).
"""
from __future__ import annotations

import torch

__all__ = ["SEED_CELLS", "seed_cells"]

#: the cells whose spread is measured: the ones Table 1's claims compare
SEED_CELLS = (("Grad", "RPS"), ("xGrad", "RPS"), ("Grad", "A-Ins"), ("", "accuracy"))


def seed_cells(models, X, Y, methods: dict, *, rps_eps: float, rps_samples: int, clamp,
               seed: int, target_map, attack_eps: float, attack_gamma: float,
               attack_steps: int, protocol: str) -> dict[tuple[str, str], list[float]]:
    """Each of :data:`SEED_CELLS` on each model of ``models`` (one value per model: the mean
    over the images, as Table 1 prints it; RPS as a fraction, Adv-Insertion and accuracy in
    points), by the same calls and settings as the table's own cells."""
    from robattr.attacks import targeted_attack
    from robattr.metrics import adv_insertion, rps

    out: dict[tuple[str, str], list[float]] = {c: [] for c in SEED_CELLS}
    for m in models:
        for attr in ("Grad", "xGrad"):
            r = rps(m, methods[attr], X, Y, eps=rps_eps, n_samples=rps_samples, clamp=clamp,
                    generator=torch.Generator(device=X.device).manual_seed(seed))
            out[attr, "RPS"].append(float(r.mean()))
        res = targeted_attack(m, X, Y, target_map=target_map, eps=attack_eps,
                              method=methods["Grad"], gamma=attack_gamma, steps=attack_steps)
        ains = adv_insertion(m, methods["Grad"], X, res.x_adv, Y, protocol=protocol)
        out["Grad", "A-Ins"].append(100 * float(ains.mean.mean()))
        out["", "accuracy"].append(100 * float(m.zoo_meta["test_acc"]))
    return out
