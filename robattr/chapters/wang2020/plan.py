"""The cost declarations of the wang2020 chapter's notebooks, for ``robattr plan``."""
from __future__ import annotations

from robattr.catalog import TEST_SIZES
from robattr.chapters.wang2020 import specs
from robattr.cost import (TRAIN_SIZES, Declaration, eigh, family, flat, fwd, grads, grads2, hvps,
                          input_values, pgd, protocol_wang2020, steps_of, zoo_config)


def _methods_wang2020(p):
    return {"SM": 1, "IG": p["ig_steps"], "SG": p["n_samples"], "UG": p["n_samples"]}


def _table2_runs(p):
    """The runs of wang2020/table2_attacks: robattr.chapters.wang2020.setup.table2_runs (one
    per block of ``blocks`` whose data are here, else one on ``dataset``)."""
    from robattr.chapters.wang2020.setup import table2_runs

    return table2_runs(p["blocks"], dataset=p["dataset"], k=p["k"], imagenet_dir=p["imagenet_dir"],
                       imagenet_weights=p["imagenet_weights"], echo=None)


def _models(specs_of):
    """The models part of a Declaration: the specs of :mod:`robattr.chapters.wang2020.specs`'s
    function ``specs_of``, in order."""
    return lambda p: list(specs_of(p).values())


def _table2_attacks_data(p):
    from robattr.chapters.wang2020.setup import TABLE2_BLOCKS

    names = [TABLE2_BLOCKS[b]["dataset"] or p["imagenet_dir"] or "ImageNet (imagenet_dir)"
             for b in p["blocks"]]
    return list(dict.fromkeys(names or [p["dataset"]]))


def _table2_attacks_work(p):
    m = _methods_wang2020(p)
    out = []
    for r in _table2_runs(p):
        if r.get("weights"):
            fam = family(shape=(3, 224, 224), arch="resnet50", classes=1000)
            pool = 4 * p["n_eval"]
        else:
            fam = family(r["dataset"], p["arch"])
            pool = TEST_SIZES.get(r["dataset"], 4 * p["n_eval"])
        out += protocol_wang2020(fam, p["n_eval"], p["eps_255"], p["steps"], m, ("topk", "manipulate"),
                            surrogate=True, random_baseline=True, eval_rows={"x": 1})
        out += [grads(fam, p["n_eval"], sum(m.values()), what="no-attack k-in"),
                grads(fam, p["n_eval"], p["n_samples"], 2, "UG readings"),
                fwd(fam, pool, what="correctly classified images")]
    return out


def _table3_4_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    m = _methods_wang2020(p)
    labels = list(specs.table3_4_ssr(p))
    betas = [specs.beta_label(b) for b in p["betas"]]
    out = []
    for _ in [lb for lb in labels if lb not in betas]:  # the four, natural at the other seeds
        out += protocol_wang2020(fam, n, p["eps_255"], p["steps"], m, ("topk", "manipulate"),
                            surrogate=True, random_baseline=True, eval_rows={"x": 1})
    for _ in betas:
        out += protocol_wang2020(fam, n, p["eps_255"], p["steps"], {"SM": 1}, ("topk",),
                            surrogate=True, random_baseline=True)
        out.append(fwd(fam, TRAIN_SIZES.get(p["dataset"], 0), what="training-set accuracy"))
    return out + _table3_timing(p) + [fwd(fam, TEST_SIZES.get(p["dataset"], 0), 4)]


def _table3_timing(p):
    """Table 3's cost cell (``interleaved_step_seconds`` of robattr.chapters.wang2020.setup):
    a warm-up step and ``timing_rounds`` steps of each of SSR, Madry AT and IG-NORM, all at
    SSR's batch size."""
    zoo_specs = specs.table3_4_ssr(p)
    timed = [zoo_specs[name] for name in specs.TABLE3_TRAININGS[1:]]   # SSR, Madry, IG-NORM
    batch = zoo_config(timed[0])["batch_size"]
    return [steps_of(s, p.get("timing_rounds", 0) + 1, batch=batch,
                     what="Table 3 cost: interleaved steps") for s in timed]


def _table5_6_work(p):
    fam, n, nt = family(p["dataset"], p["arch"]), p["n_eval"], p["n_transfer"]
    m = _methods_wang2020(p)
    proto = dict(surrogate=True, random_baseline=True)
    out = []
    for _ in range(2):                                             # Table 5
        out += protocol_wang2020(fam, n, p["eps_255"], p["steps"], m, ("topk", "manipulate"),
                            eval_rows={"x": 1}, **proto)
        out.append(grads(fam, n, sum(m.values()), what="no-attack k-in"))
    zoo_specs = specs.table5_6_figs(p)          # natural training at seeds 0, 1, ... of each:
    nat5 = specs.seeded(zoo_specs, "Natural") if "Natural" in zoo_specs else []  # none: ImageNet
    for _ in nat5[1:]:                                             # Table 5's cells
        out += protocol_wang2020(fam, n, p["eps_255"], p["steps"], m, ("topk", "manipulate"),
                            eval_rows={"x": 1}, **proto)
    for _ in specs.seeded(zoo_specs, specs.fig7_label(0))[1:]:     # Fig. 7's cells
        out += protocol_wang2020(fam, n, p["eps_255"], p["steps"], {"SM": 1}, ("topk", "manipulate"),
                            **proto)
    out += protocol_wang2020(fam, nt, p["eps_255"], p["steps"], {"SM": 1}, ("mass_center",),
                        eval_rows=m, **proto)                     # Table 6
    for _ in range(1 + len(p["fig7_eps_255"])):                    # Fig. 7
        out += protocol_wang2020(fam, n, p["eps_255"], p["steps"], {"SM": 1}, ("topk", "manipulate"),
                            **proto) + [grads(fam, n, 1)]
    out += [grads(fam, 1, p["ug_samples"], len(p["ug_radii_255"]), "Fig. 10")]
    if p["photo_size"]:
        photo = family(shape=(3, p["photo_size"], p["photo_size"]), arch="cnn", classes=10)
        out.append(grads(photo, 1, p["ug_samples"], len(p["ug_radii_255"]), "Fig. 10 photo"))
    out += protocol_wang2020(fam, nt, p["eps_255"], p["steps"], {"UG": p["n_samples"]},
                        ("mass_center",), eval_rows=m, **proto)
    return out + [fwd(fam, TEST_SIZES.get(p["dataset"], 0), 6, what="pick")]


def _gauss_newton_work(p):
    fam = family(p["dataset"], p["arch"], float64=True)
    n, d = p["n_eval"], input_values(p["dataset"])
    out = [hvps(fam, n, 1, 2 * d, "loss Hessians"), eigh(d, 2 * n, "Gauss-Newton spectra"),
           grads(fam, n, 1, 2 * 10, "Gauss-Newton Jacobians")]
    for dim in p["dims"]:
        tiny = family(shape=(1, 1, dim), arch="mlp", classes=p["n_classes"])
        out += [grads(tiny, 1, 1, p["n_classes"] * p["repeats"], "B1: Jacobian"),
                eigh(dim, p["repeats"], "B1: dense spectrum")]
    relu = family(p["dataset"], p["arch"])
    return out + flat(pgd(relu, n, p["steps"]) for _ in p["deltas"])


def _geometry_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    net = family(p["dataset"], "mlp")
    two_d = family(shape=(1, 1, 2), arch="mlp", classes=1)
    out = [grads2(fam, n, 1, 3 * p["steps"], "Thm 1: searches"),
           grads2(net, n, 1, 3 * p["steps"] * p["n_random"], "Thm 1: random nets"),
           fwd(fam, n, sum(p["stein_ns"]), 2, "Prop 1: Stein"),
           fwd(net, n, sum(p["stein_ns"]), 2, "Prop 1: Stein, random net"),
           grads(fam, n, 1, 2 * len(p["stein_ns"]), "Prop 1: path gradient"),
           grads2(two_d, 6400, 1, 2 * p["n_quad"], "Thm 2: quadrature"),
           hvps(fam, n, p["n_hess"], 30 * len(p["sigmas"]), "Thm 2: smoothed Hessian"),
           grads2(fam, n, 1, 2 * p["steps"], "Prop 2: searches")]
    # Thm 3's study (wang2020.gradient_change_study) on its own n_thm3 points, per model: the
    # top Hessian direction (200 power iterations), then per radius a search of `steps`
    # ascent steps from 3 starts in its first round and 2 in each later one, priced at
    # search_rounds rounds, which the trained model's searches reach at tol 1e-3
    m3 = p["n_thm3"]
    search = len(p["deltas"]) * p["steps"] * (3 + 2 * (p["search_rounds"] - 1))
    return out + [hvps(fam, m3, 1, 200, "Thm 3: Hessian norm"),
                  hvps(net, m3, 1, 200 * p["n_random"], "Thm 3: Hessian norm, random nets"),
                  grads2(fam, m3, 1, search, "Thm 3: searches"),
                  grads2(net, m3, 1, search * p["n_random"], "Thm 3: searches, random nets")]


DECLARATIONS = {
    "table2_attacks": Declaration(_models(specs.table2_attacks), _table2_attacks_work,
                                  data=_table2_attacks_data),
    "table3_4_ssr": Declaration(_models(specs.table3_4_ssr), _table3_4_work),
    "table5_6_figs": Declaration(_models(specs.table5_6_figs), _table5_6_work),
    "theory_gauss_newton": Declaration(_models(specs.theory_gauss_newton), _gauss_newton_work),
    "theory_geometry": Declaration(_models(specs.theory_geometry), _geometry_work),
}
