"""Fig. 10 of the wang2020 chapter: Uniform Gradient maps at growing radii beside the saliency
map, and how rough each is.

* :func:`roughness`: total variation over mass of one map;
* :func:`ug_maps`: one image's saliency map and UG maps at each radius, their roughness and
  cosine to the saliency map;
* :func:`random_photo_cnn`: an untrained CNN for a natural photo (the second row of the figure);
* :func:`ug_maps_figure` and :func:`roughness_table`: the figure, and its numbers as a table;
* :func:`roughness_verdicts`: per image, whether roughness falls at every radius step.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

__all__ = ["roughness", "ug_maps", "random_photo_cnn", "ug_maps_figure", "roughness_table",
           "roughness_verdicts"]


def roughness(a: torch.Tensor) -> float:
    """Total variation over total mass of a non-negative map (H, W)."""
    if a.ndim != 2:
        raise ValueError(f"a must be one map H×W, got shape {tuple(a.shape)}")
    tv = (a[:, 1:] - a[:, :-1]).abs().sum() + (a[1:, :] - a[:-1, :]).abs().sum()
    return (tv / a.sum().clamp_min(1e-30)).item()


def ug_maps(model: nn.Module, x1: torch.Tensor, radii_255: Sequence[float], *, n_samples: int,
            seed: int):
    """One image ``x1`` (1×C×H×W) explained for the model's predicted class:
    ``(sm, maps, rough, rough_sm, cos)``: the saliency map, the UG map at each radius of
    ``radii_255`` (0-255 scale, ``n_samples`` draws), both ``|.|`` summed over channels (H, W);
    the UG maps' :func:`roughness`, the saliency map's, and each UG map's cosine to it."""
    from robattr.attributions import METHODS, reduce_channels

    target = model(x1).argmax(1)
    sm = reduce_channels(METHODS["grad"](model, x1, target).detach(), "abs_sum")[0]
    maps = [reduce_channels(METHODS["uniform_grad"](model, x1, target, radius=r / 255,
                                                     n_samples=n_samples, seed=seed).detach(),
                            "abs_sum")[0]
            for r in radii_255]
    cos = [torch.nn.functional.cosine_similarity(m.flatten(), sm.flatten(), 0).item() for m in maps]
    return sm, maps, [roughness(m) for m in maps], roughness(sm), cos


def random_photo_cnn(photo_size: int, seed: int, device):
    """``(label, model, x1)``: the first of :func:`robattr.data.sample_images` at
    ``photo_size`` pixels, and an untrained CNN for it (10 classes, seeded by ``seed``)."""
    from robattr import data
    from robattr.models import build

    photos, names = data.sample_images(size=photo_size)
    torch.manual_seed(seed)
    rand_cnn = build("cnn", dict(shape=(3, photo_size, photo_size), num_classes=10,
                                 mean=(0.5,) * 3, std=(0.25,) * 3)).to(device).eval()
    return f"photo '{names[0]}' (random CNN)", rand_cnn, photos[:1].to(device)


def ug_maps_figure(images: dict, maps: dict, radii_255: Sequence[float]) -> None:
    """Fig. 10: one row per image of ``images`` (name -> ``(model, x1)``): the image, its
    saliency map and its UG map at each radius, titled with roughness and cosine to SM
    (``maps``: name -> :func:`ug_maps`)."""
    import matplotlib.pyplot as plt

    from robattr.report import viz

    fig, axes = plt.subplots(len(images), len(radii_255) + 2,
                             figsize=(1.7 * (len(radii_255) + 2), 2.3 * len(images)), squeeze=False)
    for i, (name, (_, x1)) in enumerate(images.items()):
        sm, ug, rough, rough_sm, cos = maps[name]
        img = x1[0].permute(1, 2, 0).cpu().numpy()
        axes[i, 0].imshow(img.squeeze(), cmap="gray" if img.shape[2] == 1 else None)
        axes[i, 0].set_title(name, fontsize=7)
        image = viz.show_map(axes[i, 1], sm)
        axes[i, 1].set_title(f"SM\nrough {rough_sm:.2f}", fontsize=7)
        for j, (r, a) in enumerate(zip(radii_255, ug)):
            viz.show_map(axes[i, j + 2], a)
            axes[i, j + 2].set_title(f"UG r={r}\nrough {rough[j]:.2f}, cos {cos[j]:.2f}", fontsize=7)
    for ax in axes.flat:
        ax.axis("off")
    plt.tight_layout()
    viz.map_colorbar(fig, image, axes[:, 1:])
    plt.show()


def roughness_table(maps: dict, radii_255: Sequence[float]) -> pd.DataFrame:
    """Fig. 10's numbers (``maps``: name -> :func:`ug_maps`): one row per image and radius,
    columns ``image``, ``radius_255``, ``roughness``, ``cos_to_SM``, ``roughness_SM``."""
    rows = [dict(image=name, radius_255=r, roughness=ro, cos_to_SM=c, roughness_SM=rough_sm)
            for name, (_, _, rough, rough_sm, cos) in maps.items()
            for r, ro, c in zip(radii_255, rough, cos)]
    return pd.DataFrame(rows, columns=["image", "radius_255", "roughness", "cos_to_SM",
                                       "roughness_SM"])


def roughness_verdicts(table: pd.DataFrame, radii_255: Sequence[float]) -> dict:
    """Per image of :func:`roughness_table`: :func:`robattr.report.verdicts.exact` on whether
    roughness falls from each UG radius to the next, and at the largest radius is below SM's
    (SM to the smallest radius is not a step: it adds UG's Monte-Carlo noise, not a radius)."""
    from robattr.report import verdicts

    out = {}
    for name, g in table.groupby("image"):
        rough = g.sort_values("radius_255").roughness.to_numpy()
        viol = int((np.diff(rough) >= 0).sum()) + int(rough[-1] >= g.roughness_SM.iloc[0])
        out[name] = verdicts.exact(viol, len(rough), what=f"cases: {len(rough) - 1} radius steps "
                                                          f"and r = {radii_255[-1]} against SM")
    return out
