"""The cost declarations of the wangkong2023 chapter's notebooks, for ``robattr plan``."""
from __future__ import annotations

from robattr.catalog import TEST_SIZES
from robattr.chapters.wangkong2023 import specs
from robattr.cost import (Declaration, bounds_wangkong2023, family, flat, fwd, grads, grads2, hvps,
                          input_values, numpy_draws)


def _ig_gradient_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_images"]
    d = input_values(p["dataset"])
    small = family(shape=(1, 1, 8), arch="mlp", classes=3)
    big = family(shape=(1, p["large_size"], p["large_size"]), arch="mlp", classes=10)
    steps_study = (2 * sum(p["steps_grid"]) + p["limit_steps"]
                   + len(p["beta_grid"]) * sum(p["beta_steps"]))
    out = [hvps(small, 1, 8 * 4, p["n_random_nets"] * 8, "C.1: random nets"),
           hvps(fam, n, p["ig_steps"], d, "C.1: trained model"),
           hvps(fam, n, steps_study, d, "C.1: steps and beta studies"),
           hvps(big, 1, p["large_steps"], p["large_size"] ** 2, "C.1: larger input")]
    lin = family(p["dataset"], p["arch"], float64=True)
    m = p["n_linearity"]
    out += [grads2(lin, m, p["ig_steps"] + 1, 3 * (2 + 2 * p["n_delta"]), "B.1: linearity"),
            grads2(lin, m, 1, 2 * 2 * 15, "B.1: linearization ratio")]
    res = family(shape=(3, p["imagenet_size"], p["imagenet_size"]), arch="resnet18", classes=1000)
    return out + [grads2(res, 1, 1, 1, "ResNet-18 map"),
                  hvps(res, 1, 1, 2 * p["lanczos_max_iter"], "ResNet-18 Lanczos")]


def _tables_bounds_data(p):
    from robattr.chapters.wangkong2023.blocks import TABLE78

    return list(dict.fromkeys([p["dataset"]] + [TABLE78[b] for b in p["blocks"]]))


_ATTR_ROWS = {"sm": lambda p: 1, "ixg": lambda p: 1, "ig": lambda p: p["ig_steps"]}


def _tables_bounds_work(p):
    rows = _ATTR_ROWS[p["attribution"]](p)
    ds = p["direct_steps"]
    out = []

    def bounds(dataset, n, r, norm):
        fam = family(dataset, p["arch"])
        steps = p["l2_steps"] if norm == "l2" else p["linf_steps"]
        return (bounds_wangkong2023(fam, dataset, n, r, norm, steps, ds)
                + [grads(fam, n, r, 2, "random deviation")])

    for b in specs.t78_runs(p):
        for nm in ("l2", "linf"):
            out += flat(bounds(b["dataset"], p["n_eval"], rows, nm)
                        for _ in p["models"] for _ in b[f"eps_{nm}"])
        out.append(fwd(family(b["dataset"], p["arch"]), TEST_SIZES.get(b["dataset"], 0),
                       2 * len(p["models"]), what="correct images"))
    d = p["dataset"]
    for _ in p["table6_models"]:
        for a in ("sm", "ixg", "ig"):
            out += flat(bounds(d, p["table6_n_eval"], _ATTR_ROWS[a](p), nm)
                        for nm in ("l2", "linf"))
    for _ in dict.fromkeys(p["t910_models"]):
        out += flat(bounds(d, p["t910_n_eval"], rows, nm) for nm in ("l2", "linf"))
    for _ in range(1, p["t910_seeds"]):                # CE at the other seeds: the bounds only
        out += flat(bounds_wangkong2023(family(d, p["arch"]), d, p["t910_n_eval"], rows, nm, 1, 1)
                    for nm in ("l2", "linf"))
    out += flat(bounds(d, 8, p["ig_steps"], "l2") for _ in range(2))
    n_term = min(256, TEST_SIZES.get(d, 256))          # AdvAAT's and ART's objective at the trained model
    steps = {"advaat": 7 + 2, "iga": 2 * (3 + 1) + 1}   # the losses' default attack steps (robattr.cost.step_passes)
    out += [grads2(family(d, p["arch"]), n_term, 1, steps[m], f"{m}: its training objective")
            for m in dict.fromkeys(list(p["models"]) + list(p["table6_models"])) if m in steps]
    return out + [fwd(family(d, p["arch"]), TEST_SIZES.get(d, 0), 4, what="correct images")]


def _theory_bounds_work(p):
    fam, n, d = family(p["dataset"], p["arch"]), p["n_eval"], p["dataset"]
    pix = input_values(d)
    s, ig = p["attack_steps"], p["ig_steps"]
    out = []
    for rows in (1, 1, ig):                                # SM, Input*gradient, IG
        out += [hvps(fam, n, rows, 2 * 150 + pix, "spectral norms (Lanczos, power, dense)"),
                grads2(fam, n, rows, 4 + 2 * s, "Thm 1 and l-inf attacks"),
                hvps(fam, n, rows, pix + 10, "dense Jacobian, Taylor constants")]
    out += [grads2(family(d, "cnn"), n, 1, 4, "linearity, cnn"), grads2(fam, n, 1, 4, "linearity"),
            grads(fam, n, 8, 6, "Prop 1"),
            numpy_draws(p["n_random"] * 2 ** (p["max_vertex_dim"] - 1) * p["max_vertex_dim"] / 2,
                        "Thm 2: vertices"),
            numpy_draws(p["n_random"] * 400, "random checks")]
    return out


def _models(specs_of):
    """The Declaration's models: the notebook's specs (robattr.chapters.wangkong2023.specs)."""
    return lambda p: list(specs_of(p).values())


DECLARATIONS = {
    "ig_gradient": Declaration(_models(specs.ig_gradient), _ig_gradient_work),
    "tables_bounds": Declaration(_models(specs.tables_bounds), _tables_bounds_work,
                                 data=_tables_bounds_data),
    "theory_bounds": Declaration(_models(specs.theory_bounds), _theory_bounds_work),
}
