"""Training batches cut, augmented and converted on the training device, and the
learning-rate schedules.

A training set held in memory (:class:`robattr.data.InMemoryDataset`, a ``Subset`` of one,
or a tuple of tensors) is moved to the device whole, as stored (uint8 images stay uint8,
a quarter of float32's size). Each epoch draws a seeded permutation; each batch is one
indexing call, one conversion to float in [0, 1] and, when asked, one augmentation of the
whole batch: no per-image Python in a training step, on the CPU as on CUDA.

Augmentations (:data:`AUGMENTATIONS`), the ones the papers' released code trains CIFAR-10
with (RobustAGA for 003, 000's release): ``"crop"`` pads each image by
``CROP_PADDING`` zero pixels and cuts a random window of the original size (torchvision's
``RandomCrop(32, padding=4)``); ``"flip"`` mirrors each image left-right with probability
one half (``RandomHorizontalFlip``); ``"crop+flip"`` does both; ``"none"`` nothing.

Schedules (:data:`SCHEDULES`): ``"step"`` multiplies the learning rate by 0.1 at each of
the ``milestones`` epochs (none: a constant rate); ``"cosine"`` anneals it to 0 over all
steps; ``"onecycle"`` warms it up to ``lr`` over the first 30 % of the steps and anneals
it to ``lr / 1e4`` (PyTorch's ``OneCycleLR`` with its defaults).
"""
from __future__ import annotations

from typing import Any, Iterator

import torch
from torch.utils.data import Subset, TensorDataset

from robattr.catalog import AUGMENTATIONS, SCHEDULES

__all__ = ["AUGMENTATIONS", "SCHEDULES", "CROP_PADDING", "augment", "DeviceBatches",
           "device_batches", "make_scheduler", "check_augment", "check_schedule"]


#: zero pixels added on each side before a random crop (the CIFAR-10 recipes' 4)
CROP_PADDING = 4


def check_augment(augment: str) -> str:
    if augment not in AUGMENTATIONS:
        raise ValueError(f"augment must be one of {', '.join(AUGMENTATIONS)}, got {augment!r}")
    return augment


def check_schedule(schedule: str) -> str:
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
    return schedule


def augment(x: torch.Tensor, kind: str, generator: torch.Generator,
            padding: int = CROP_PADDING) -> torch.Tensor:
    """``x`` (``B x C x H x W``) augmented as ``kind`` says, with random draws from
    ``generator`` (on ``x``'s device), in a few whole-batch operations."""
    check_augment(kind)
    if kind == "none" or len(x) == 0:
        return x
    b, c, h, w = x.shape
    dev = x.device
    if "crop" in kind:
        xp = torch.nn.functional.pad(x, (padding,) * 4)
        oy = torch.randint(0, 2 * padding + 1, (b,), generator=generator, device=dev)
        ox = torch.randint(0, 2 * padding + 1, (b,), generator=generator, device=dev)
        rows = (oy[:, None] + torch.arange(h, device=dev))[:, None, :, None]
        cols = (ox[:, None] + torch.arange(w, device=dev))[:, None, None, :]
        x = xp[torch.arange(b, device=dev)[:, None, None, None],
               torch.arange(c, device=dev)[None, :, None, None], rows, cols]
    if "flip" in kind:
        flip = torch.rand(b, generator=generator, device=dev) < 0.5
        x = torch.where(flip[:, None, None, None], x.flip(3), x)
    return x


def _bytes_scale(images: torch.Tensor) -> float:
    """What divides stored images into [0, 1]: 255 for uint8 pixel bytes, else 1."""
    return 255.0 if images.dtype == torch.uint8 else 1.0


def _stored(dataset: Any) -> tuple[torch.Tensor, torch.Tensor, float] | None:
    """``(images as stored, targets, scale)`` of an in-memory training set, or None."""
    from robattr.data import InMemoryDataset

    if isinstance(dataset, (tuple, list)) and len(dataset) == 2 and \
            all(torch.is_tensor(t) for t in dataset):
        return dataset[0], dataset[1].long(), _bytes_scale(dataset[0])
    if isinstance(dataset, TensorDataset) and len(dataset.tensors) == 2:
        return dataset.tensors[0], dataset.tensors[1].long(), _bytes_scale(dataset.tensors[0])
    if isinstance(dataset, InMemoryDataset):
        return dataset.images, dataset.targets, float(dataset.scale)
    if isinstance(dataset, Subset):
        inner = _stored(dataset.dataset)
        if inner is not None:
            idx = torch.as_tensor(list(dataset.indices), dtype=torch.long)
            return inner[0][idx], inner[1][idx], inner[2]
    return None


class DeviceBatches:
    """The batches of one training set, held whole on ``device``: ``len()`` batches per
    epoch; iterating yields ``(x, y)`` on the device, shuffled by a seeded permutation,
    converted to float in [0, 1] and augmented. ``drop_single`` leaves out a last batch
    of one image (BatchNorm cannot train on it)."""

    def __init__(self, images: torch.Tensor, targets: torch.Tensor, scale: float, *,
                 batch_size: int, seed: int, device: torch.device, augment: str = "none",
                 drop_single: bool = False):
        self.images = images.to(device)
        self.targets = targets.to(device)
        self.scale, self.batch_size, self.device = scale, int(batch_size), device
        self.augment = check_augment(augment)
        self.generator = torch.Generator(device=device).manual_seed(int(seed))
        n = len(self.targets)
        self.n_batches = -(-n // self.batch_size)
        if drop_single and n % self.batch_size == 1 and n > 1:
            self.n_batches -= 1

    def __len__(self) -> int:
        return self.n_batches

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        n = len(self.targets)
        order = torch.randperm(n, generator=self.generator, device=self.device)
        for i in range(self.n_batches):
            idx = order[i * self.batch_size:(i + 1) * self.batch_size]
            x = self.images[idx].float()
            if self.scale != 1.0:
                x = x.div_(self.scale)
            yield augment(x, self.augment, self.generator), self.targets[idx]


def device_batches(dataset: Any, *, batch_size: int, seed: int, device: torch.device,
                   augment: str = "none", drop_single: bool = False) -> DeviceBatches | None:
    """:class:`DeviceBatches` of ``dataset`` when it is held in memory, else None (the
    trainer then reads it through a DataLoader, and cannot augment it)."""
    stored = _stored(dataset)
    if stored is None:
        return None
    images, targets, scale = stored
    return DeviceBatches(images, targets, scale, batch_size=batch_size, seed=seed,
                         device=device, augment=augment, drop_single=drop_single)


def make_scheduler(opt: torch.optim.Optimizer, schedule: str, *, lr: float, epochs: int,
                   steps_per_epoch: int, milestones: list[int] | None = None):
    """``(scheduler, per_step)``: the scheduler of ``schedule`` and whether it steps after
    every batch (True) or every epoch (False); ``(None, False)`` for a constant rate."""
    check_schedule(schedule)
    total = max(1, epochs * steps_per_epoch)
    if schedule == "cosine":
        return torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total), True
    if schedule == "onecycle":
        return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=total), True
    if milestones:
        return torch.optim.lr_scheduler.MultiStepLR(opt, sorted(milestones), gamma=0.1), False
    return None, False
