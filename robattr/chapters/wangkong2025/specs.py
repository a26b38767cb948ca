"""The zoo models the wangkong2025 chapter's notebooks train, declared once: for the notebooks
(``zoo.get_models(specs, device=..., progress=False)``) and for ``robattr plan``
(:mod:`robattr.chapters.wangkong2025.plan`).

One function per notebook that trains models, named after it: the notebook's parameters
(``run.params``) -> ``{label: spec}`` in the order the notebook uses them, a spec being
:func:`robattr.zoo.get_model`'s keyword arguments as one dict (:func:`robattr.cost.spec`).
Every model of the chapter is a Softplus(``beta``) ``arch`` trained ``epochs`` epochs at seed 0,
labelled by its training loss (:data:`robattr.chapters.wangkong2025.tables.MODEL_LABELS` names
the paper's rows). montecarlo and theory_ball_smoothing train none. This module imports no
torch.
"""
from __future__ import annotations

from typing import Sequence

from robattr.cost import spec

__all__ = ["softplus_specs", "attack_check", "center_smoothing", "t567_runs", "block_specs",
           "certified_eps"]


def softplus_specs(p: dict, dataset: str, methods: Sequence[str]) -> dict[str, dict]:
    """``{loss: spec}``: the Softplus(``beta``) ``arch`` model on ``dataset`` for each training
    loss of ``methods`` (``epochs`` epochs, seed 0)."""
    return {m: spec(dataset, p["arch"], m, epochs=p["epochs"], seed=0, activation="softplus",
                    beta=p["beta"]) for m in methods}


def attack_check(p: dict) -> dict[str, dict]:
    """Table 8's models on ``dataset``, one per loss of ``methods``."""
    return softplus_specs(p, p["dataset"], p["methods"])


def center_smoothing(p: dict) -> dict[str, dict]:
    """Table 4's one model on ``dataset``, trained with ``method``."""
    return softplus_specs(p, p["dataset"], [p["method"]])


def t567_runs(p: dict) -> list[dict]:
    """certified_eps' Tables 5-7 runs, one per block
    (:func:`robattr.chapters.wangkong2025.blocks.table567_runs`; the notebook's own call echoes
    the blocks it skips)."""
    from robattr.chapters.wangkong2025.blocks import table567_runs

    return table567_runs(p["blocks"], dataset=p["dataset"], imagenet_dir=p["imagenet_dir"],
                         imagenet_weights=p["imagenet_weights"], echo=None)


def block_specs(p: dict, run: dict) -> dict[str, dict]:
    """The zoo models of one Tables 5-7 run of certified_eps (:func:`t567_runs`), by loss:
    one per loss of ``methods`` on the run's data, or none for a run with a weights file
    (ImageNet: the pretrained standard ResNet-50, not a zoo model)."""
    return {} if run.get("weights") else softplus_specs(p, run["dataset"], p["methods"])


def certified_eps(p: dict) -> dict[str, dict]:
    """Every run's :func:`block_specs`, in the order of the runs, labelled
    ``"<block>: <loss>"`` (e.g. ``"MNIST: ce"``); the notebook asks for one block's at a time
    (:func:`robattr.chapters.wangkong2025.tables.block_inputs`)."""
    return {f"{r['label']}: {m}": s for r in t567_runs(p) for m, s in block_specs(p, r).items()}
