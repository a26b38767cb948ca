"""The cost declaration of the cross-paper matrix, for ``robattr plan``: every row of the
matrix is a zoo model run through each paper's headline evaluation."""
from __future__ import annotations

import importlib.util

import robattr.chapters.crosspaper.specs as specs   # not through the package: no torch
from robattr.cost import (Declaration, attack, attr, bounds_wangkong2023, curve, family, fwd, grads, pgd,
                          protocol_wang2020, steps_of)


def _matrix_work(p):
    d, fam = p["dataset"], family(p["dataset"], p["arch"])
    n, out = p["n_eval"], []
    quantus = importlib.util.find_spec("quantus") is not None   # the Quantus block runs only with the extra
    for cfg in (c for row, c in specs.matrix(p).items() if row != specs.TEACHER):  # evaluated
        out.append(steps_of(cfg, 2 * p["n_cost_repeats"], batch=64, what="cost: timed steps"))
        m000 = {"SM": 1, "IG": p["n_ig_steps"], "SG": p["n_samples_wang2020"], "UG": p["n_samples_wang2020"]}
        for name, rows in m000.items():      # attack_auc_wang2020
            out += protocol_wang2020(fam, n, p["eps_wang2020"], p["n_steps_wang2020"], {name: rows},
                                what="000")
            out.append(grads(fam, n, rows, what="000: clean map"))
        for norm, steps in (("l2", 20), ("linf", p["n_steps_linf_wangkong2023"])):   # deviation_bounds_wangkong2023
            out += bounds_wangkong2023(fam, d, n, 1, norm, steps, 10)
        for _ in range(2):                    # certified_eps_wangkong2025, twice
            out.append(grads(fam, n, p["n_samples_wangkong2025"], what="002: smoothed map"))
            out += attack(fam, n, 10, 8, what="002: attack")
            out.append(grads(fam, n, 64, 2, what="002: check"))
        for _ in range(4):                    # interpretation_joo2023, four methods
            out.append(grads(fam, n, p["n_rps_joo2023"] + 1, what="003: RPS"))
            out += curve(fam, n, 20, "003: insertion") + curve(fam, n, 20, "003: adv-insertion")
            out += attack(fam, n, p["n_steps_joo2023"], 1, what="003: targeted attack")
            out.append(grads(fam, n, 2, what="003: maps"))
        out += pgd(fam, n, p["n_pgd_lim2021"], "004: pgd")   # retrieval_lim2021 (SimGrad, RelEx)
        out.append(grads(fam, n, 1, what="004: SimGrad"))
        out += attr(fam, n, "relex", epochs=p["n_relex_lim2021"], n_noisy=8, what="004: RelEx")
        out += curve(fam, n, 16, "004: deletion") * 4 + [fwd(fam, n, 2, what="004: retrieval")]
        if quantus:                           # four metrics, n_quantus perturbed maps (Grad) per image each
            q = p["n_quantus"]
            out += [grads(fam, n, 4 * (q + 1), what="Quantus: robustness metrics (Grad)"),
                    fwd(fam, n, 4 * (q + 1), what="Quantus: predictions")]
    return out


DECLARATIONS = {
    "matrix": Declaration(lambda p: list(specs.matrix(p).values()), _matrix_work),
}
