"""wangkong2025's data blocks: Tables 5-7 (App. C.4) hold one block of rows per data set
(MNIST, CIFAR-10, ImageNet), each run where its data are (:mod:`robattr.blocks`)."""
from __future__ import annotations

from typing import Sequence

from robattr.blocks import IMAGENET_HINT, Block, select

__all__ = ["TABLE567", "table567_runs"]

#: 002 (Wang & Kong, ICLR 2025 submission) App. C.4, Tables 5-7: the paper's dataset label ->
#: (robattr's dataset name, the table of its certified budgets). ImageNet has no name: it is
#: the user's ImageFolder, and only a standard (pretrained) model, as in Table 7.
TABLE567 = {"MNIST": ("mnist", "wangkong2025_table5"),
            "CIFAR-10": ("cifar10", "wangkong2025_table6"),
            "ImageNet": (None, "wangkong2025_table7")}


def table567_runs(blocks: Sequence[str], *, dataset: str, imagenet_dir: str = "",
                  imagenet_weights: str = "", root=None, echo=print) -> list[dict]:
    """The runs of 002's Tables 5-7 (App. C.4), one dict per block: ``label`` (the tables'
    dataset), ``dataset`` (robattr's name, or the ImageNet folder), ``table`` (the paper's
    table of that block), ``size``, ``split`` and ``weights`` (ImageNet's pretrained standard
    ResNet-50; None: the zoo trains the models).

    Each block of ``blocks`` (keys of :data:`TABLE567`) whose data are here runs
    (``echo`` gets a line per block skipped); ImageNet reads ``imagenet_dir`` and
    ``imagenet_weights``. With no blocks, or none whose data are here, one run on ``dataset``
    beside Table 5's MNIST rows."""
    unknown = [b for b in blocks if b not in TABLE567]
    if unknown:
        raise ValueError(f"unknown Tables 5-7 blocks {unknown}; known: {list(TABLE567)}")
    cand = []
    for lab in blocks:
        name, _ = TABLE567[lab]
        cand.append(Block(lab, imagenet_dir, size=224, splits=("val",), weights=imagenet_weights,
                          what=f"{IMAGENET_HINT}, and a standard ResNet-50 weights file")
                    if name is None else Block(lab, name))
    runs = [dict(label=b.label, dataset=b.dataset, table=TABLE567[b.label][1],
                 size=b.size, split=b.splits[-1], weights=b.weights)
            for b in select(cand, root=root, echo=echo)]
    if runs:
        return runs
    if blocks and echo is not None:
        echo(f"no block has its data here: one run on {dataset!r} instead, beside the paper's "
             "MNIST rows (Table 5)")
    return [dict(label="MNIST", dataset=dataset, table="wangkong2025_table5", size=None,
                 split="test", weights=None)]
