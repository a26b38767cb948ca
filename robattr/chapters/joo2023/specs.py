"""The zoo models the joo2023 notebooks train, declared once: for the notebooks
(``zoo.get_models(joo2023.<notebook>(run.params), ...)``) and for ``robattr plan``
(:mod:`robattr.chapters.joo2023.plan`).

One function per notebook that trains models, named after it: the notebook's parameters
(``run.params``) -> ``{label: spec}`` in the order the notebook asks for them, a spec being
:func:`robattr.zoo.get_model`'s keyword arguments as one dict (:func:`robattr.cost.spec`).
This module imports no torch (ATEX's teacher key is derived with a lazy import of the zoo).

**Units of λ.** 003's code feeds its network the normalised input x_n = (x − μ)/σ and
differentiates w.r.t. it, so its λ weighs σ ⊙ ∇_x. robattr's models take pixels and
normalise inside; ``units`` says which σ the regularisers use (:data:`robattr.train.losses
.gradient.UNITS`): ``"normalized"``, the model's own (robattr's CIFAR-10 σ is the data's
std, 0.247-0.262), or ``"robustaga"``, the σ of 003's code (0.199-0.202), with which 003's
λ weighs the pixel gradients exactly as its code does. The medium and paper profiles use
``"robustaga"``; the quick profile's digits (one channel) the model's own.
"""
from __future__ import annotations

from robattr.cost import spec

__all__ = ["REGULARIZERS", "BASELINES", "RELU_CE", "regularizers", "train_options",
           "seed_label", "broken_label", "grid_label", "table1_robustness", "table2_cost",
           "theory_alignment"]

#: 003 Table 1's rows in its order: the regularisers, then its baselines
REGULARIZERS = ("CE only", "ATEX", "IGA", "Hessian", "l2", "l2+Cosd")
#: 003's baselines, trained beside its four models where a notebook asks for them
BASELINES = ("ATEX", "IGA")
#: the label of theory_alignment's ReLU CE model (the others are Softplus)
RELU_CE = "ReLU CE"

#: the training settings of a notebook's parameters that every zoo model of the chapter takes
_TRAIN_PARAMS = ("epochs", "lr", "batch_size", "optimizer", "weight_decay", "milestones")


def regularizers(*, lam: float, lam_cos: float, train_eps: float, hessian_lam: float,
                 units: str = "normalized") -> dict[str, tuple[str, dict]]:
    """003's four models: Table 1's label -> (zoo loss name, its hyper-parameters)."""
    return {"CE only": ("ce", {}),
            "Hessian": ("hessian", dict(lam=hessian_lam, units=units)),
            "l2": ("l2", dict(lam=lam, eps=train_eps, units=units)),
            "l2+Cosd": ("l2_cosd", dict(lam=lam, lam_cos=lam_cos, eps=train_eps, units=units))}


def train_options(p: dict, *, softplus: bool = True) -> dict:
    """The training options every zoo model of a notebook takes, from its parameters:
    Softplus(``beta``) (003's LeNets; the zoo's default ReLU when ``softplus`` is false),
    ``epochs``, ``lr``, ``batch_size``, ``optimizer``, ``weight_decay``, ``milestones``."""
    missing = [k for k in ("beta", *_TRAIN_PARAMS) if k not in p]
    if missing:
        raise KeyError(f"train_options: parameters missing: {missing}")
    act = dict(activation="softplus", beta=p["beta"]) if softplus else {}
    return {**act, **{k: p[k] for k in _TRAIN_PARAMS}}


def seed_label(label: str, seed: int) -> str:
    """The label of the model ``label`` trained at another seed: ``"CE only, seed 1"``."""
    return f"{label}, seed {seed}"


def broken_label(lam_cos: float) -> str:
    """The label of table1_robustness' cosd-only model (the broken-maps check)."""
    return f"cosd only, lam_c = {lam_cos:g}"


def grid_label(lam: float, lam_cos: float) -> str:
    """The label of table2_cost's ℓ2 + cosd model at one point of the λ × λ_c grid."""
    return f"l2+Cosd, lam = {lam:g}, lam_c = {lam_cos:g}"


def _four(p: dict, arch: str, common: dict, *, hessian_lam: float, l2_lam: float | None = None,
          prefix: str = "") -> dict[str, dict]:
    """003's four models of ``arch`` (:func:`regularizers`), labelled ``prefix + label``."""
    regs = regularizers(lam=p["lam"], lam_cos=p["lam_cos"], train_eps=p["train_eps"],
                        hessian_lam=hessian_lam, units=p["reg_units"])
    if l2_lam is not None:
        regs["l2"][1]["lam"] = l2_lam
    return {prefix + label: spec(p["dataset"], arch, method, **hp, **common)
            for label, (method, hp) in regs.items()}


def _baselines(p: dict, arch: str, baselines, common: dict, prefix: str = "") -> dict:
    """003's baselines ``baselines`` of ``arch``, in that order: ATEX distils the block's
    CE model, named by its zoo key (computed here, in the kernel's environment, as the zoo
    computes it), IGA with the weight ``iga_lam``."""
    unknown = [b for b in baselines if b not in BASELINES]
    if unknown:
        raise ValueError(f"unknown baselines {unknown}; known: {list(BASELINES)}")
    out = {}
    for b in baselines:
        if b == "ATEX":
            from robattr import zoo

            hp = dict(teacher=zoo.config_hash(p["dataset"], arch, "ce", **common))
        else:
            hp = dict(lam=p["iga_lam"])
        out[prefix + b] = spec(p["dataset"], arch, b.lower(), **hp, **common)
    return out


def table1_robustness(p: dict) -> dict[str, dict]:
    """Table 1's first block (``arch``: 003's four models, then the baselines of
    ``baselines``), CE at seeds 1 .. ``ce_seeds`` - 1 (the seed-to-seed spread), the four
    at seeds 1 .. ``reg_seeds`` - 1 (:func:`seed_label`), the second block when
    ``resnet_arch`` is set (its own optimiser, weight decay, Hessian and ℓ2 weights and
    baselines ``resnet_baselines``, each labelled ``"<resnet_arch> <label>"``), and the
    cosd-only model of the broken-maps check (:func:`broken_label`)."""
    d, a, common = p["dataset"], p["arch"], train_options(p)
    out = _four(p, a, common, hessian_lam=p["hessian_lam"])
    out.update(_baselines(p, a, p["baselines"], common))
    for s in range(1, p["ce_seeds"]):
        out[seed_label("CE only", s)] = spec(d, a, "ce", seed=s, **common)
    for label, cfg in _four(p, a, common, hessian_lam=p["hessian_lam"]).items():
        for s in range(1, p["reg_seeds"]):
            out.setdefault(seed_label(label, s), {**cfg, "seed": s})   # CE's: the spread's
    if p.get("resnet_arch"):
        r, prefix = p["resnet_arch"], f"{p['resnet_arch']} "
        res = {**common, "optimizer": p["resnet_optimizer"],
               "weight_decay": p["resnet_weight_decay"]}
        out.update(_four(p, r, res, hessian_lam=p["resnet_hessian_lam"],
                         l2_lam=p["resnet_l2_lam"], prefix=prefix))
        out.update(_baselines(p, r, p["resnet_baselines"], res, prefix))
    out[broken_label(p["break_lam_cos"])] = spec(d, a, "cosd", lam_cos=p["break_lam_cos"],
                                                 eps=p["train_eps"], units=p["reg_units"],
                                                 **common)
    return out


def table2_cost(p: dict) -> dict[str, dict]:
    """003's four models (timed), then ℓ2 + cosd at every point of the ``grid_lam_cos`` ×
    ``grid_lam`` grid (:func:`grid_label`)."""
    common = train_options(p)
    out = _four(p, p["arch"], common, hessian_lam=p["hessian_lam"])
    for lc in p["grid_lam_cos"]:
        for lm in p["grid_lam"]:
            out[grid_label(lm, lc)] = spec(p["dataset"], p["arch"], "l2_cosd", lam=lm,
                                           lam_cos=lc, eps=p["train_eps"],
                                           units=p["reg_units"], **common)
    return out


def theory_alignment(p: dict) -> dict[str, dict]:
    """003's four (Softplus) models, then the ReLU CE model (:data:`RELU_CE`) with the same
    training options."""
    out = _four(p, p["arch"], train_options(p), hessian_lam=p["hessian_lam"])
    out[RELU_CE] = spec(p["dataset"], p["arch"], "ce", **train_options(p, softplus=False))
    return out
