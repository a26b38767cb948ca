"""The cost declarations of the joo2023 chapter's notebooks, for ``robattr plan``."""
from __future__ import annotations

from robattr.catalog import TEST_SIZES
from robattr.chapters.joo2023.models import regularizers
from robattr.cost import (Declaration, attack, curve, family, flat, fwd, grads, grads2, hvps,
                          input_values, no_data, no_models, spec, steps_of)


def _joo_specs(p, common):
    d, a = p["dataset"], p["arch"]
    regs = regularizers(lam=p["lam"], lam_cos=p["lam_cos"], train_eps=p["train_eps"],
                        hessian_lam=p["hessian_lam"], units=p["reg_units"])
    return [spec(d, a, method, **hp, **common) for method, hp in regs.values()]


def _joo_train(p):
    """The training options the joo2023 notebooks pass to every zoo model."""
    return dict(epochs=p["epochs"], lr=p["lr"], batch_size=p["batch_size"],
                optimizer=p["optimizer"], weight_decay=p["weight_decay"],
                milestones=p["milestones"])


def _joo_common(p):
    return dict(activation="softplus", beta=p["beta"], **_joo_train(p))


def _baseline_specs(p, arch, baselines, common):
    """003's baselines a block trains (``baselines``) on ``arch``: ATEX distils the block's
    CE model, named by its zoo key (the key the notebook reads from ``zoo_meta``, computed
    here from the same settings and the same environment), IGA with 003's lambda."""
    from robattr import zoo

    d, out = p["dataset"], []
    if "ATEX" in baselines:
        out.append(spec(d, arch, "atex", teacher=zoo.config_hash(d, arch, "ce", **common),
                        **common))
    if "IGA" in baselines:
        out.append(spec(d, arch, "iga", lam=p["iga_lam"], **common))
    return out


def _table1_models(p):
    common = _joo_common(p)
    broken = spec(p["dataset"], p["arch"], "cosd", lam_cos=p["break_lam_cos"], eps=p["train_eps"],
                  units=p["reg_units"], **common)
    seeds = [spec(p["dataset"], p["arch"], "ce", seed=s, **common)
             for s in range(1, p["ce_seeds"])]     # the seed-to-seed spread of CE
    regs = regularizers(lam=p["lam"], lam_cos=p["lam_cos"], train_eps=p["train_eps"],
                        hessian_lam=p["hessian_lam"], units=p["reg_units"])
    seeded = [spec(p["dataset"], p["arch"], method, seed=s, **hp, **common)
              for method, hp in regs.values() for s in range(1, p["reg_seeds"])
              if not (method == "ce" and s < p["ce_seeds"])]      # CE's are the spread's
    return (_joo_specs(p, common) + _baseline_specs(p, p["arch"], p["baselines"], common)
            + seeds + seeded + [broken] + _resnet_specs(p))


def _resnet_common(p):
    """The second block's training options: the first block's, with its own optimiser."""
    return {**_joo_common(p), "optimizer": p["resnet_optimizer"],
            "weight_decay": p["resnet_weight_decay"]}


def _resnet_specs(p):
    """The second block of Table 1 (``resnet_arch``; none when it is empty): 003's four
    models with the block's weights, then the baselines of ``resnet_baselines`` (ATEX's
    teacher is this block's CE model)."""
    a = p.get("resnet_arch") or ""
    if not a:
        return []
    d, common = p["dataset"], _resnet_common(p)
    regs = regularizers(lam=p["lam"], lam_cos=p["lam_cos"], train_eps=p["train_eps"],
                        hessian_lam=p["resnet_hessian_lam"], units=p["reg_units"])
    regs["l2"][1]["lam"] = p["resnet_l2_lam"]
    out = [spec(d, a, method, **hp, **common) for method, hp in regs.values()]
    return out + _baseline_specs(p, a, p["resnet_baselines"], common)


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


def _table2_models(p):
    common = _joo_common(p)
    grid = [spec(p["dataset"], p["arch"], "l2_cosd", lam=lm, lam_cos=lc, eps=p["train_eps"],
                 units=p["reg_units"], **common) for lc in p["grid_lam_cos"] for lm in p["grid_lam"]]
    return _joo_specs(p, common) + grid


def _table2_work(p):
    fam = family(p["dataset"], p["arch"])
    out = [steps_of(cfg, 2 * p["timing_rounds"], batch=p["batch_size"], what="timed steps")
           for cfg in _joo_specs(p, _joo_common(p))]
    n_grid = len(p["grid_lam_cos"]) * len(p["grid_lam"])
    return out + [grads(fam, p["n_eval"], p["rps_samples"] + 1, n_grid, "grid RPS")]


def _alignment_models(p):
    return _joo_specs(p, _joo_common(p)) + [spec(p["dataset"], p["arch"], "ce", **_joo_train(p))]


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
    "table1_robustness": Declaration(_table1_models, _table1_work),
    "table2_cost": Declaration(_table2_models, _table2_work),
    "theory_alignment": Declaration(_alignment_models, _alignment_work),
    "toy_fig1": Declaration(no_models, _toy_work, data=no_data),
}
