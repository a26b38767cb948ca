"""The zoo models the wang2020 chapter's notebooks train, declared once: for the notebooks
(``zoo.get_models(specs, device=..., progress=False)``) and for ``robattr plan``
(:mod:`robattr.chapters.wang2020.plan`).

One function per notebook that trains models, named after it: the notebook's parameters
(``run.params``) -> ``{label: spec}`` in the order the notebook uses them, a spec being
:func:`robattr.zoo.get_model`'s keyword arguments as one dict (:func:`robattr.cost.spec`).
A model that a weights file gives (the ImageNet ResNet-50s of Tables 2, 5 and 6) is not a
zoo model and is not declared; which runs have one is decided by
:func:`robattr.chapters.wang2020.setup.table2_runs` and
:func:`~robattr.chapters.wang2020.setup.table56_run`, imported only when called (they look for
the user's files). Models trained alike but for the seed are labelled :func:`seed_label`
and read back in order with :func:`seeded`. This module imports no torch.
"""
from __future__ import annotations

from robattr.cost import spec

__all__ = ["TABLE3_TRAININGS", "seed_label", "seeded", "beta_label", "fig7_label",
           "table2_attacks", "table3_4_ssr", "table5_6_figs", "theory_gauss_newton",
           "theory_geometry"]

#: Table 3's four trainings, in the order of its tables (the labels of table3_4_ssr's models)
TABLE3_TRAININGS = ("Natural", "SSR", "Madry", "IG-NORM")


def seed_label(label: str, seed: int) -> str:
    """The label of the model ``label`` trained alike at the seed ``seed`` (``label`` itself
    is seed 0)."""
    return f"{label}, seed {seed}"


def seeded(models: dict, label: str) -> list:
    """The entries of ``models`` (labelled as the specs of this module) of ``label`` at
    seeds 0, 1, ...: ``models[label]``, then ``models[seed_label(label, s)]`` for as long as
    they follow one another."""
    out, s = [models[label]], 1
    while seed_label(label, s) in models:
        out.append(models[seed_label(label, s)])
        s += 1
    return out


def beta_label(beta) -> str:
    """The label of Table 4's / Fig. 8's SSR model at the weight ``beta``."""
    return f"SSR, beta = {beta}"


def fig7_label(radius_255) -> str:
    """The label of Fig. 7's model at the l2 training radius ``radius_255`` (0-255 scale;
    0: natural training)."""
    return "Fig. 7, natural" if radius_255 == 0 else f"Fig. 7, l2 radius {radius_255:g}/255"


def _seeds(label: str, s: dict, n_seeds: int) -> dict[str, dict]:
    """``s`` at seeds 1 .. n_seeds - 1, labelled :func:`seed_label` of ``label``."""
    return {seed_label(label, k): {**s, "seed": k} for k in range(1, n_seeds)}


def table2_attacks(p: dict) -> dict[str, dict]:
    """One naturally trained ``arch`` per run of Table 2 (labelled by its block, as
    :func:`~robattr.chapters.wang2020.setup.table2_runs` names it: ``CIFAR-10`` for the run
    on ``dataset`` when no block has its data here) trained on the run's data set for
    ``epochs`` epochs; none for a run with a weights file (ImageNet)."""
    from robattr.chapters.wang2020.setup import table2_runs

    runs = table2_runs(p["blocks"], dataset=p["dataset"], k=p["k"], imagenet_dir=p["imagenet_dir"],
                       imagenet_weights=p["imagenet_weights"], echo=None)
    return {r["label"]: spec(r["dataset"], p["arch"], "ce", epochs=p["epochs"])
            for r in runs if not r.get("weights")}


def table3_4_ssr(p: dict) -> dict[str, dict]:
    """Table 3's four trainings (:data:`TABLE3_TRAININGS`: natural, SSR at the first of
    ``betas``, Madry's l2 adversarial training at radius ``at_eps_255``, IG-NORM), natural
    training at seeds 1 .. ``natural_seeds`` - 1 (:func:`seed_label`), then SSR at each of
    ``betas`` (:func:`beta_label`; the first is Table 3's SSR model again). Every SSR model
    trains ``epochs_ssr`` epochs (0: ``epochs``), the same at every β, since Table 4
    compares them."""
    d, a, e = p["dataset"], p["arch"], p["epochs"]
    e_ssr = p.get("epochs_ssr") or e
    at_eps = p["at_eps_255"] / 255
    out = {"Natural": spec(d, a, "ce", epochs=e),
           "SSR": spec(d, a, "ssr", epochs=e_ssr, ssr_beta=float(p["betas"][0]),
                       scale=float(p["ssr_scale"])),
           "Madry": spec(d, a, "at", epochs=e, norm="l2", eps=at_eps, steps=7,
                         step_size=at_eps / 4),
           "IG-NORM": spec(d, a, "ig_norm", epochs=p["epochs_ig_norm"],
                           gamma=float(p["ig_norm_gamma"]), batch_size=p["batch_size_ig_norm"])}
    out.update(_seeds("Natural", out["Natural"], p["natural_seeds"]))
    out.update({beta_label(b): spec(d, a, "ssr", epochs=e_ssr, ssr_beta=float(b),
                                    scale=float(p["ssr_scale"])) for b in p["betas"]})
    return out


def _table56_on_imagenet(p: dict) -> bool:
    """Whether Tables 5 and 6 run on the user's ImageNet ResNet-50s (the folder and both
    weights files are here: :func:`~robattr.chapters.wang2020.setup.table56_run`)."""
    if not (p["imagenet_dir"] or p["imagenet_weights"] or p["robust_weights"]):
        return False
    from robattr.chapters.wang2020.setup import table56_run

    return table56_run(imagenet_dir=p["imagenet_dir"], natural_weights=p["imagenet_weights"],
                       robust_weights=p["robust_weights"], echo=None) is not None


def table5_6_figs(p: dict) -> dict[str, dict]:
    """Table 5's natural (``Natural``) and l-inf adversarially trained (``AT``: radius
    ``at_eps_255``, ``at_steps`` PGD steps of a quarter of it) ``arch``, ``epochs`` epochs,
    and natural training at seeds 1 .. ``natural_seeds`` - 1, unless Tables 5 and 6 run on the
    ImageNet weights files; then Fig. 7's models, ``fig7_epochs`` epochs (:func:`fig7_label`):
    natural training, Madry's l2 training at each radius of ``fig7_eps_255``, and natural
    training at the other seeds."""
    d, a, n = p["dataset"], p["arch"], p["natural_seeds"]
    out = {}
    if not _table56_on_imagenet(p):
        at_eps = p["at_eps_255"] / 255
        out["Natural"] = spec(d, a, "ce", epochs=p["epochs"])
        out["AT"] = spec(d, a, "at", epochs=p["epochs"], norm="linf", eps=at_eps,
                         steps=p["at_steps"], step_size=at_eps / 4)
        out.update(_seeds("Natural", out["Natural"], n))
    nat7 = spec(d, a, "ce", epochs=p["fig7_epochs"])
    out[fig7_label(0)] = nat7
    out.update({fig7_label(e): spec(d, a, "at", epochs=p["fig7_epochs"], norm="l2", eps=e / 255,
                                    steps=p["at_steps"], step_size=e / 255 / 4)
                for e in p["fig7_eps_255"]})
    out.update(_seeds(fig7_label(0), nat7, n))
    return out


def theory_gauss_newton(p: dict) -> dict[str, dict]:
    """The naturally trained ReLU ``arch`` (``ReLU``) and its Softplus(``beta``) counterpart
    (``Softplus``, ``softplus_epochs`` epochs)."""
    return {"ReLU": spec(p["dataset"], p["arch"], "ce", epochs=p["epochs"]),
            "Softplus": spec(p["dataset"], p["arch"], "ce", activation="softplus",
                             beta=p["beta"], epochs=p["softplus_epochs"])}


def theory_geometry(p: dict) -> dict[str, dict]:
    """The trained Softplus(``beta``) ``arch`` (``trained``; the random MLPs beside it are
    not zoo models)."""
    return {"trained": spec(p["dataset"], p["arch"], "ce", activation="softplus",
                            beta=p["beta"], epochs=p["epochs"])}
