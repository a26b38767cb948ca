"""The cost declarations of the joo2023 chapter's notebooks, for ``robattr plan``."""
from __future__ import annotations

from robattr.catalog import TEST_SIZES
from robattr.chapters.joo2023 import specs
from robattr.cost import (Declaration, attack, curve, family, flat, fwd, grads, grads2, hvps,
                          input_values, no_data, no_models, steps_of)


def _resnet_work(p):
    """The second block's evaluation: Table 1's four attributions on each of its models."""
    if not p.get("resnet_arch"):
        return []
    fam, n, r = family(p["dataset"], p["resnet_arch"]), p["n_eval"], p["rps_samples"]
    out = []
    for _ in range(4 + len(p["resnet_baselines"])):
        for _ in range(4):                  # Grad, xGrad, GBP, LRP
            out += [grads(fam, n, r + 1, what="ResNet RPS"), grads(fam, n, 2, what="ResNet maps")]
            out += curve(fam, n, 20, "ResNet insertion") + curve(fam, n, 20, "ResNet adv-insertion")
            out += attack(fam, n, p["attack_steps"], what="ResNet targeted attack")
    return out


def _table1_work(p):
    fam, n, r = family(p["dataset"], p["arch"]), p["n_eval"], p["rps_samples"]
    out = []
    for _ in range(4 + len(p["baselines"])):   # models: 003's four and its baselines trained here
        for _ in range(4):                  # Grad, xGrad, GBP, LRP
            out += [grads(fam, n, r + 1, what="RPS"), grads(fam, n, 2, what="maps")]
            out += curve(fam, n, 20, "insertion") + curve(fam, n, 20, "adv-insertion")
            out += attack(fam, n, p["attack_steps"], what="targeted attack")
        out.append(grads(fam, n, 2 * len(p["rps_eps_list"]) * (r + 1), what="appendix RPS"))
        extra = [e for e in p["attack_eps_list"] if e != p["attack_eps"]]
        for _ in p["table4_methods"]:
            out += flat(attack(fam, n, p["attack_steps"], what="Table 4") for _ in extra)
            out += flat(curve(fam, n, 20, "Table 4 adv-insertion") for _ in p["attack_eps_list"])
    for _ in range(1, p["ce_seeds"]):       # CE at the other seeds: the compared cells
        out += [grads(fam, n, r + 1, 2, what="seed spread: RPS")]
        out += attack(fam, n, p["attack_steps"], what="seed spread: targeted attack")
        out += curve(fam, n, 20, "seed spread: adv-insertion")
    if p["reg_seeds"] > 1:                  # every seed of the four regularisers, image by image
        for _ in range(4 * p["reg_seeds"]):
            out += [grads(fam, n, r + 1, 2, what="seeded cells: RPS")]
            out += attack(fam, n, p["attack_steps"], what="seeded cells: targeted attack")
            out += curve(fam, n, 20, "seeded cells: adv-insertion")
            out.append(fwd(fam, TEST_SIZES.get(p["dataset"], 0), what="seeded cells: accuracy"))
    out += [grads(fam, n, r + 1, 5, "RPS: guard, broken maps, large noise"),
            fwd(fam, TEST_SIZES.get(p["dataset"], 0), 2 + ("ATEX" in p["baselines"]),
                what="accuracy")]
    return out + curve(fam, n, 20, "broken maps: insertion") * 2 + _resnet_work(p)


def _table2_work(p):
    fam = family(p["dataset"], p["arch"])
    out = [steps_of(cfg, 2 * p["timing_rounds"], batch=p["batch_size"], what="timed steps")
           for label, cfg in specs.table2_cost(p).items() if label in specs.REGULARIZERS]
    n_grid = len(p["grid_lam_cos"]) * len(p["grid_lam"])
    return out + [grads(fam, p["n_eval"], p["rps_samples"] + 1, n_grid, "grid RPS")]


def _alignment_work(p):
    fam = family(p["dataset"], p["arch"], float64=True)
    small = family(shape=(1, 1, 32), arch="mlp", classes=4, float64=True)   # sample_random_mlp
    n, k, it, ne = p["n_eval"], len(p["alphas"]), p["power_iters"], len(p["eps_l2"])
    d = input_values(p["dataset"])
    frob = d if d <= 1024 else 0                              # bounds.FROBENIUS_MAX_D
    out = [grads(fam, n, 2, 2 * k * 5, "Lemma 3 / Prop 5"), grads(fam, n, 2, 8, "exp logit"),
           grads(small, 8, 2, 2 * k * p["n_random"], "random nets: scaling"),
           grads(small, 16, 1, 4 * p["n_random"], "random nets: homogeneity"),
           grads(fam, n, 1, 4, "trained: homogeneity"),
           hvps(small, 4, 1, p["n_random"] * (it + 32), "random nets: Thm 6 power iteration"),
           grads2(small, 4, 1, p["n_random"] * ne, "random nets: Thm 6"),
           grads(small, 4, 2, p["n_random"] * ne)]
    for _ in range(5):                                         # trained models, Thm 6
        out += [hvps(fam, n, 1, it + frob, "trained: Thm 6 power iteration, Frobenius"),
                grads2(fam, n, 1, ne, "trained: Thm 6"), grads(fam, n, 2, ne)]
    return out + [grads(fam, n, 4, what="bound terms")]


def _toy_work(p):
    fam = family(shape=(1, 1, 2), arch="mlp", classes=2)
    n, e, pairs = p["n_train"], p["epochs"], p["n_pairs"]
    return [grads(fam, n, 1, 4 * e, "fit (a)-(c), strong MaxEnt"),
            grads2(fam, n, 2, e, "fit (d): l2 + cosd"),
            fwd(fam, 32000, 1, 6, "decision grids"),
            grads(fam, pairs, 4, 6, "alignment of random pairs")]


DECLARATIONS = {
    "table1_robustness": Declaration(lambda p: list(specs.table1_robustness(p).values()),
                                     _table1_work),
    "table2_cost": Declaration(lambda p: list(specs.table2_cost(p).values()), _table2_work),
    "theory_alignment": Declaration(lambda p: list(specs.theory_alignment(p).values()),
                                    _alignment_work),
    "toy_fig1": Declaration(no_models, _toy_work, data=no_data),
}
