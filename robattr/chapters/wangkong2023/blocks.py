"""wangkong2023's data blocks: Tables 7-8 (App. D.2) hold one block of rows per data set
(MNIST, Fashion-MNIST, CIFAR-10), each run where its data are (:mod:`robattr.blocks`)."""
from __future__ import annotations

from typing import Sequence

from robattr.blocks import Block, select

__all__ = ["TABLE78", "table78_runs", "fallback_scale"]

#: 001 (Wang & Kong, CVPR 2023) App. D.2, Tables 7-8: the paper's dataset label -> robattr's
#: dataset name. The budgets of each block are the tables' ``eps`` labels.
TABLE78 = {"MNIST": "mnist", "Fashion-MNIST": "fashion_mnist", "CIFAR-10": "cifar10"}


def fallback_scale(dataset: str, ref_dim: int) -> float:
    """The factor that gives an ℓ2 budget the same root-mean-square change per pixel on
    ``dataset`` as on an input of ``ref_dim`` values: ``sqrt(d / ref_dim)``."""
    import math

    from robattr import data

    c, h, w = data.info(dataset).shape
    return math.sqrt(c * h * w / ref_dim)


def table78_runs(blocks: Sequence[str], *, dataset: str, paper_dataset: str, eps_l2,
                 eps_linf, ref_dim: int, root=None, echo=print) -> list[dict]:
    """The runs of 001's Tables 7-8 (App. D.2), one dict per block: ``label`` (the tables'
    dataset), ``dataset`` (robattr's), ``eps_l2`` and ``eps_linf`` (budget labels as the
    tables print them, e.g. ``"4/255"``; :func:`robattr.blocks.eps_value` reads them) and
    ``l2_scale`` (the factor applied to the ℓ2 budgets).

    Each block of ``blocks`` (keys of :data:`TABLE78`) whose data are here
    (:func:`robattr.blocks.select`; ``echo`` gets a line per block skipped) runs on its own
    data set at the paper's budgets, unscaled. With no blocks, or none whose data are here, one run on
    ``dataset`` beside the ``paper_dataset`` rows, at ``eps_l2`` / ``eps_linf``, its ℓ2 budgets
    scaled by ``sqrt(d / ref_dim)`` (the same root-mean-square change per pixel)."""
    from robattr.report import papers

    unknown = [b for b in blocks if b not in TABLE78]
    if unknown:
        raise ValueError(f"unknown Tables 7-8 blocks {unknown}; known: {list(TABLE78)}")
    runs = []
    for b in select([Block(lab, TABLE78[lab]) for lab in blocks], root=root, echo=echo):
        eps = {}
        for nm, name in (("l2", "wangkong2023_table7"), ("linf", "wangkong2023_table8")):
            t = papers.table(name)
            eps[nm] = list(dict.fromkeys(t[t["dataset"] == b.label]["eps"].astype(str)))
        runs.append(dict(label=b.label, dataset=b.dataset, eps_l2=eps["l2"], eps_linf=eps["linf"],
                         l2_scale=1.0))
    if runs:
        return runs
    if blocks and echo is not None:
        echo(f"no block has its data here: one run on {dataset!r} instead, beside the paper's "
             f"{paper_dataset} rows")
    return [dict(label=paper_dataset, dataset=dataset, eps_l2=[str(e) for e in eps_l2],
                 eps_linf=[str(e) for e in eps_linf], l2_scale=fallback_scale(dataset, ref_dim))]
