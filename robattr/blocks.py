"""Blocks: the part of a paper's table that belongs to one data set, run where its data are.

Many of the papers' tables hold one block of rows per data set (000's Table 2: CIFAR-10,
Flower, ImageNet; 001's Tables 7-8: MNIST, Fashion-MNIST, CIFAR-10; 002's Tables 5-7:
MNIST, CIFAR-10, ImageNet). A profile maps a notebook to one set of parameters, so a
notebook that reproduces several blocks takes the list of blocks as a parameter and runs
those whose files are on this machine. :func:`select` decides, block by block:

* a data set is present when :func:`robattr.data.load` finds every split the block needs
  (with ``download=False``: nothing is ever downloaded);
* a block that also needs a weights file (a pretrained ImageNet ResNet-50) is present only
  when that file exists.

Every block it leaves out gets one printed line that says what is missing and where to put
it; a missing block is never an error.

Each chapter keeps its own blocks: wang2020's Table 2 (``robattr.chapters.wang2020``),
wangkong2023's Tables 7-8 (``robattr.chapters.wangkong2023.blocks``), wangkong2025's Tables
5-7 (``robattr.chapters.wangkong2025.blocks``). :func:`pretrained` builds an ImageNet
ResNet from a user's weights file, including the checkpoints of MadryLab's ``robustness`` library that 000 used.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Callable, Sequence

__all__ = ["Block", "missing", "select", "eps_value", "pretrained", "torchvision_state_dict",
           "IMAGENET_HINT"]

#: Where an ImageNet block's images come from (the skip line quotes it).
IMAGENET_HINT = ("ImageNet validation images as an ImageFolder, one folder per class named by "
                 "its WordNet id (all 1000, so that the label indices are torchvision's)")

@dataclass(frozen=True)
class Block:
    """One data set's block of a paper's table.

    ``label`` is the paper's name for the data set (the ``dataset`` column of its table in
    :mod:`robattr.report.papers`); ``dataset`` a :func:`robattr.data.load` name or an ImageFolder
    path (``""``: the user has not given one); ``size`` the image side for ``flowers102`` and
    ImageFolder paths; ``splits`` the splits the block reads; ``weights`` the weights file the
    block needs (``None``: none, the zoo trains its models; ``""``: not given); ``what`` says
    what to get when something is missing.
    """

    label: str
    dataset: str
    size: int | None = None
    splits: tuple = ("train", "test")
    weights: str | None = None
    what: str = ""

    def __post_init__(self):
        if not isinstance(self.label, str) or not self.label:
            raise ValueError(f"a block needs a label, got {self.label!r}")
        if not isinstance(self.dataset, (str, os.PathLike)):
            raise TypeError(f"block {self.label!r}: dataset must be a name or a path, "
                            f"got {self.dataset!r}")
        if not self.splits or any(s not in ("train", "val", "test") for s in self.splits):
            raise ValueError(f"block {self.label!r}: splits must be among train, val, test, "
                             f"got {self.splits!r}")


def missing(block: Block, root=None) -> str | None:
    """``None`` when ``block``'s data (and weights file, if it needs one) are here; else one
    line that says what is missing and where to put it. Uses :func:`robattr.data.load` with
    ``download=False`` (``root``: the data root, default ``$ROBATTR_DATA``)."""
    from robattr import data

    hint = f" ({block.what})" if block.what else ""
    if not os.fspath(block.dataset):
        return f"skipped {block.label}: no data folder given{hint}"
    for split in block.splits:
        try:
            data.load(os.fspath(block.dataset), split, root=root, download=False, size=block.size)
        except data.DatasetNotFoundError as e:
            return f"skipped {block.label}: {e}"
        except (ValueError, OSError) as e:   # an unknown name, no such folder, no image in it
            return f"skipped {block.label}: {e}{hint}"
    if block.weights is not None:
        if not os.fspath(block.weights):
            return f"skipped {block.label}: no weights file given{hint}"
        if not os.path.isfile(os.path.expanduser(os.fspath(block.weights))):
            return f"skipped {block.label}: weights file not found: {block.weights}{hint}"
    return None


def select(blocks: Sequence[Block], root=None, echo: Callable[[str], None] | None = print
           ) -> list[Block]:
    """The blocks of ``blocks`` whose data are here (:func:`missing`), in their order; for each
    of the others, one line is passed to ``echo`` (default :func:`print`; ``None``: silent)."""
    labels = [b.label for b in blocks]
    if len(set(labels)) != len(labels):
        raise ValueError(f"block labels must be distinct, got {labels}")
    out = []
    for b in blocks:
        why = missing(b, root=root)
        if why is None:
            out.append(b)
        elif echo is not None:
            echo(why)
    return out


def eps_value(label) -> float:
    """A budget as the papers print it (``"0.1"``, ``"4/255"``, ``8``) as a float."""
    if isinstance(label, bool):
        raise ValueError(f"not a budget: {label!r}")
    if isinstance(label, (int, float)):
        return float(label)
    text = str(label).strip()
    try:
        if "/" in text:
            num, den = text.split("/")
            value = float(num) / float(den)
        else:
            value = float(text)
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"not a budget: {label!r}") from None
    if not value > 0 or value == float("inf"):
        raise ValueError(f"a budget must be a finite number > 0, got {label!r}")
    return value


def torchvision_state_dict(obj) -> dict:
    """A torchvision-keyed state dict from the usual checkpoint layouts.

    Accepts a bare state dict, ``{"state_dict": ...}`` or ``{"model": ...}`` (MadryLab's
    ``robustness`` checkpoints, whose keys are ``module.model.<torchvision key>`` beside
    ``module.attacker.model.*`` and ``module.normalizer.*``). A ``module.`` prefix is removed;
    when some keys start with ``model.``, only those are kept, without the prefix (the
    ``attacker`` copy and the normaliser, which robattr's Normalize layer replaces, are dropped).
    """
    import torch

    for key in ("state_dict", "model"):
        if isinstance(obj, dict) and isinstance(obj.get(key), dict):
            obj = obj[key]
    if not isinstance(obj, dict) or not obj or not all(
            isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in obj.items()):
        raise ValueError("the checkpoint holds no state dict (names -> tensors)")
    sd = {k.removeprefix("module."): v for k, v in obj.items()}
    if any(k.startswith("model.") for k in sd):
        sd = {k[len("model."):]: v for k, v in sd.items() if k.startswith("model.")}
    return sd


def pretrained(arch: str, dataset, weights, device="cpu"):
    """``robattr.models.build(arch, dataset)`` with the weights of the file ``weights`` (a
    ``.safetensors`` file or a ``torch.save`` checkpoint, read with ``weights_only=True``;
    see :func:`torchvision_state_dict` for the layouts), in eval mode on ``device``. The
    Normalize layer keeps ``dataset``'s statistics (ImageNet's for an ImageFolder path)."""
    import torch

    from robattr.models import build

    path = os.path.expanduser(os.fspath(weights))
    if not os.path.isfile(path):
        raise FileNotFoundError(f"weights file not found: {weights}")
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        obj = load_file(path, device="cpu")
    else:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    model = build(arch, dataset)
    target = getattr(model, "net", model)
    try:
        target.load_state_dict(torchvision_state_dict(obj), strict=True)
    except RuntimeError as e:
        raise ValueError(f"the weights in {weights} do not fit a {arch}: {e}") from e
    return model.to(device).eval()
