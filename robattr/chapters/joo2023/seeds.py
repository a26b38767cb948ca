"""The seed-to-seed spread behind joo2023 Table 1's comparisons of training methods.

Table 1 compares regularisers through one trained model each where the profile trains no
more (003 does not say how many runs a number stands for). Before a difference between two
of them is called a win or a loss, it is set against how much the same cell moves when only
the training seed changes: standard training
(CE, the cheapest model) at :data:`robattr.report.verdicts.MIN_SEEDS` seeds or more, evaluated on
the same images with the same protocol (:func:`robattr.report.verdicts.beyond_seeds`).
"""
from __future__ import annotations

__all__ = ["SEED_CELLS", "seed_cells"]

#: the cells whose spread is measured: the ones Table 1's claims compare
SEED_CELLS = (("Grad", "RPS"), ("xGrad", "RPS"), ("Grad", "A-Ins"), ("", "accuracy"))


def seed_cells(models, X, Y, methods: dict, *, rps_eps: float, rps_samples: int, clamp,
               seed: int, target_map, attack_eps: float, attack_gamma: float,
               attack_steps: int, protocol: str) -> dict[tuple[str, str], list[float]]:
    """Each of :data:`SEED_CELLS` on each model of ``models`` (one value per model: the mean
    over the images, as Table 1 prints it; RPS as a fraction, Adv-Insertion and accuracy in
    points), by the same calls and settings as the table's own cells."""
    from robattr.chapters.joo2023.compare import per_image_cells

    out: dict[tuple[str, str], list[float]] = {c: [] for c in SEED_CELLS}
    for m in models:
        cells = per_image_cells(m, X, Y, methods, rps_eps=rps_eps, rps_samples=rps_samples,
                                clamp=clamp, seed=seed, target_map=target_map,
                                attack_eps=attack_eps, attack_gamma=attack_gamma,
                                attack_steps=attack_steps, protocol=protocol)
        for cell, values in cells.items():
            out[cell].append(float(values.mean()))
        out["", "accuracy"].append(100 * float(m.zoo_meta["test_acc"]))
    return out
