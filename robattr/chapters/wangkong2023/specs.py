"""The zoo models the wangkong2023 chapter's notebooks train, declared once: for the notebooks
(``zoo.get_models(specs, device=..., progress=False)``) and for ``robattr plan``
(:mod:`robattr.chapters.wangkong2023.plan`).

One function per notebook that trains models, named after it: the notebook's parameters
(``run.params``) -> ``{label: spec}`` in the order the notebook uses them, a spec being
:func:`robattr.zoo.get_model`'s keyword arguments as one dict (:func:`robattr.cost.spec`).
Every model of the chapter is trained at seed 0 (but Table 10's CE at the other seeds), with
Softplus(``beta``) activations but ig_gradient's ReLU CNN. This module imports no torch.
"""
from __future__ import annotations

from robattr.cost import spec

__all__ = ["OBJECTIVE_LOSSES", "t78_runs", "t78_label", "ce_seed_label", "ig_gradient",
           "tables_bounds", "theory_bounds"]

#: the losses whose training objective tables_bounds evaluates on its ``dataset`` (AdvAAT's and
#: ART's attribution terms: the keys of ``table_runs.OBJECTIVE_TERMS``)
OBJECTIVE_LOSSES = ("advaat", "iga")


def _softplus(p: dict, dataset: str, arch: str, method: str) -> dict:
    """The Softplus(``beta``) model of ``arch`` trained ``train_epochs`` epochs at seed 0."""
    return spec(dataset, arch, method, epochs=p["train_epochs"], seed=0, activation="softplus",
                beta=p["beta"])


def ig_gradient(p: dict) -> dict[str, dict]:
    """``"<arch> (softplus)"``, the smooth model of the C.1 studies (the one tables_bounds and
    theory_bounds use when the parameters agree), then B.1's two max-pooling CNNs,
    ``"cnn (softplus, max-pool)"`` and ``"cnn (relu, max-pool)"``, all trained with
    ``model_method``."""
    d, m = p["dataset"], p["model_method"]
    return {f"{p['arch']} (softplus)": _softplus(p, d, p["arch"], m),
            "cnn (softplus, max-pool)": _softplus(p, d, "cnn", m),
            "cnn (relu, max-pool)": spec(d, "cnn", m, epochs=p["train_epochs"], seed=0)}


def theory_bounds(p: dict) -> dict[str, dict]:
    """``arch``'s model of the checks on a trained model, then ``"cnn (max-pool)"``, the CNN
    §2 shows is not locally linear, both trained with ``model_method``."""
    d, m = p["dataset"], p["model_method"]
    return {p["arch"]: _softplus(p, d, p["arch"], m),
            "cnn (max-pool)": _softplus(p, d, "cnn", m)}


def t78_label(block: dict, loss: str) -> str:
    """The label of Tables 7-8's model trained with ``loss`` on ``block``'s data (a run of
    :func:`robattr.chapters.wangkong2023.blocks.table78_runs`), e.g. ``"MNIST: at"``."""
    return f"{block['label']}: {loss}"


def ce_seed_label(seed: int) -> str:
    """The label of Table 10's CE model at ``seed`` (1, 2, ...: seed 0 is ``"ce"``)."""
    return f"ce, seed {seed}"


def t78_runs(p: dict) -> list[dict]:
    """tables_bounds' Tables 7-8 runs, one per block
    (:func:`robattr.chapters.wangkong2023.blocks.table78_runs`; the notebook's own call echoes
    the blocks it skips)."""
    from robattr.chapters.wangkong2023.blocks import table78_runs

    return table78_runs(p["blocks"], dataset=p["dataset"], paper_dataset=p["paper_dataset"],
                        eps_l2=p["eps_l2"], eps_linf=p["eps_linf"], ref_dim=p["ref_dim"],
                        echo=None)


def tables_bounds(p: dict) -> dict[str, dict]:
    """Tables 7-8's models, one per loss of ``models`` and block (:func:`t78_label`); then, on
    ``dataset`` and labelled by their loss, those of Table 6 (``table6_models``), of the
    training objectives (:data:`OBJECTIVE_LOSSES` among ``models`` and ``table6_models``), of
    Tables 9-10 (``t910_models``) and of the exercise (``"ig_norm"``); last Table 10's CE at
    seeds 1 .. ``t910_seeds`` - 1 (:func:`ce_seed_label`), for its seed-to-seed spread."""
    d, a = p["dataset"], p["arch"]
    out = {t78_label(b, m): _softplus(p, b["dataset"], a, m)
           for b in t78_runs(p) for m in p["models"]}
    objective = [m for m in [*p["models"], *p["table6_models"]] if m in OBJECTIVE_LOSSES]
    for m in [*p["table6_models"], *objective, *p["t910_models"], "ig_norm"]:
        out[m] = _softplus(p, d, a, m)
    for s in range(1, p["t910_seeds"]):
        out[ce_seed_label(s)] = {**_softplus(p, d, a, "ce"), "seed": s}
    return out
