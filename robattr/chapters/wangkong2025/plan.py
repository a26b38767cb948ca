"""The cost declarations of the wangkong2025 chapter's notebooks, for ``robattr plan``."""
from __future__ import annotations

from robattr.chapters.wangkong2025 import specs
from robattr.cost import (Declaration, attack, eigh, family, grads, no_data, no_models,
                          numpy_draws)


def _models(specs_of):
    """The Declaration's models: the notebook's specs (robattr.chapters.wangkong2025.specs)."""
    return lambda p: list(specs_of(p).values())


def _attack_check_work(p):
    fam, n, ig = family(p["dataset"], p["arch"]), p["n_eval"], p["ig_steps"]
    out = []
    for _ in specs.attack_check(p):
        for _ in p["radii"]:
            out += [grads(fam, n, p["n_cert"] * ig, what="budgets")]
            out += attack(fam, n, p["steps"], p["n_attack"] * ig, restarts=p["restarts"],
                          what="attack on the smoothed map")
            out += [grads(fam, n, p["n_check"] * ig, 2, "check")]
    return out + [grads(fam, 1, p["n_check"] * ig, 2, "exercise")]


def _center_work(p):
    fam = family(p["dataset"], p["arch"])
    return [grads(fam, 1, p["n_pred"] + p["n_cert"], p["n_eval"], "center smoothing"),
            grads(fam, 1, p["n_ball"], p["n_eval"], "ball smoothing"),
            grads(fam, p["n_fig"], p["n_ball"] * p["ig_steps"], 2, "Fig. 3"),
            numpy_draws(3 * 20000 * 5)]


def _certified_data(p):
    from robattr.chapters.wangkong2025.blocks import TABLE567

    names = [TABLE567[b][0] or p["imagenet_dir"] or "ImageNet (imagenet_dir)"
             for b in p["blocks"]]
    return list(dict.fromkeys([p["dataset"]] + names))


def _certified_work(p):
    out = []
    for i, r in enumerate(specs.t567_runs(p)):
        if r.get("weights"):
            fam, n_models = family(shape=(3, 224, 224), arch="resnet50", classes=1000), 1
        else:
            fam, n_models = family(r["dataset"], p["arch"]), len(specs.block_specs(p, r))
        k = len(p["radii"]) + (len(p["radii_extra"]) if i == 0 else 0)
        out.append(grads(fam, p["n_eval"], p["n_samples"] * p["ig_steps"], k * n_models,
                         "smoothed IG"))
    return out


def _montecarlo_work(p):
    d = p["d"]
    return [numpy_draws((p["n_ref"] + p["n_samples"] * p["n_repeats"]) * d, "Monte-Carlo draws"),
            eigh(d, 1 + p["n_repeats"], "covariances")]


def _ball_smoothing_work(p):
    n, d = p["n_mc"], p["d"]
    return [numpy_draws(n * (20 * d + 16 * 4 + 2 * d), "Monte-Carlo volumes and fields"),
            numpy_draws(p["n_random"] * 2000, "random fields")]


DECLARATIONS = {
    "attack_check": Declaration(_models(specs.attack_check), _attack_check_work),
    "center_smoothing": Declaration(_models(specs.center_smoothing), _center_work),
    "certified_eps": Declaration(_models(specs.certified_eps), _certified_work,
                                 data=_certified_data),
    "montecarlo": Declaration(no_models, _montecarlo_work, data=no_data),
    "theory_ball_smoothing": Declaration(no_models, _ball_smoothing_work, data=no_data),
}
