"""Every attribution method of ``robattr.attributions`` on one image: the options that make
each map reproducible, the maps, their picture, the photo model, and the check that the
differentiable methods can be differentiated once more (``example/attribution_methods``).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
import torch
from torch import nn

from robattr import attributions as A
from robattr import data, models
from robattr.report import viz

__all__ = ["method_options", "all_maps", "plot_abs_attributions", "photo_batch",
           "imagenet_resnet18", "second_derivative_norms"]


def method_options(n_samples: int, ig_steps: int, epochs: int, seed: int) -> dict:
    """Per-method keyword arguments of ``robattr.attributions.METHODS``: the noise draws
    (``n_samples``) and seeds of the sampling methods, the steps of Integrated Gradients, and
    the optimisation steps (``epochs``) of RelEx and the meaningful-perturbation mask, so that
    every map is reproducible. A method not named takes its defaults."""
    for name, v in (("n_samples", n_samples), ("ig_steps", ig_steps), ("epochs", epochs)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    return {
        "integrated_gradients": dict(steps=ig_steps),
        "smoothgrad": dict(n_samples=n_samples, seed=seed),
        "uniform_grad": dict(n_samples=n_samples, radius=0.1, seed=seed),
        "ball_smooth": dict(n_samples=n_samples, r=1.0, seed=seed),
        "relex": dict(n_noisy=n_samples, epochs=epochs, seed=seed),
        "meaningful_perturbation": dict(iterations=epochs),
    }


def all_maps(model: nn.Module, x: torch.Tensor, target: torch.Tensor,
             options: dict) -> tuple[dict, dict]:
    """Every method of ``robattr.attributions.METHODS`` on ``x``: ``(maps, failures)``, the
    detached map of each method that ran and, for a method that refused the model (a
    ValueError, e.g. LRP on a network it does not support), its message."""
    maps, failures = {}, {}
    for name, method in A.METHODS.items():
        try:
            maps[name] = method(model, x, target, **options.get(name, {})).detach()
        except ValueError as err:
            failures[name] = str(err)
    return maps, failures


def plot_abs_attributions(image: torch.Tensor, maps: dict, title: str, cols: int = 6):
    """The first image of ``image`` (titled ``title``), then each map's first image:
    |map| summed over channels and scaled by its 99th percentile, ``cols`` panels a row.
    Returns the figure."""
    if cols < 1:
        raise ValueError(f"cols must be >= 1, got {cols!r}")
    names = list(maps)
    rows = -(-(len(names) + 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(2.1 * cols, 2.3 * rows))
    axes = axes.ravel()
    img = image[0].permute(1, 2, 0).squeeze(-1).cpu()
    axes[0].imshow(img, cmap="gray" if img.ndim == 2 else None)
    axes[0].set_title(title, fontsize=9)
    for ax, name in zip(axes[1:], names):
        heat = A.percentile_normalize(A.reduce_channels(maps[name], "abs_sum"))[0].cpu()
        image = ax.imshow(heat, cmap="hot", vmin=0, vmax=1)
        ax.set_title(name, fontsize=9)
    for ax in axes:
        ax.set_xticks([]), ax.set_yticks([])
    for ax in axes[len(names) + 1:]:
        ax.axis("off")
    fig.tight_layout()
    if names:
        viz.map_colorbar(fig, image, axes[1:len(names) + 1],
                         label="|attribution| / its 99th percentile in the map (clipped at 1)")
    return fig


def photo_batch(photo: str, size: int) -> torch.Tensor:
    """The photo named ``photo`` of ``robattr.data.sample_images(size)`` as a batch of one,
    (1, 3, size, size); a ValueError names the photos installed when it is not one."""
    photos, names = data.sample_images(size)
    if photo not in names:
        raise ValueError(f"parameter 'photo': {photo!r} is not installed here; one of {names}")
    return photos[names.index(photo)][None]


def imagenet_resnet18(size: int, weights: str = "", seed: int = 0) -> nn.Module:
    """A ResNet-18 for ImageNet inputs of side ``size`` (1000 classes, ImageNet's
    normalisation) in eval mode: the checkpoint ``weights``, or random weights drawn after
    ``torch.manual_seed(seed)`` when ``weights`` is empty."""
    imagenet = {"shape": (3, size, size), "num_classes": 1000,
                "mean": (0.485, 0.456, 0.406), "std": (0.229, 0.224, 0.225)}
    torch.manual_seed(seed)
    return models.build("resnet18", imagenet, weights=weights or None).eval()


def second_derivative_norms(model: nn.Module, x: torch.Tensor, y: torch.Tensor,
                            options: dict) -> list[tuple[str, float, bool]]:
    """For each method of ``robattr.attributions.DIFFERENTIABLE``: the map with
    ``create_graph=True``, differentiated once more (the gradient of its squared norm with
    respect to ``x``). Returns ``(method, norm of that gradient, all finite)`` per method."""
    rows = []
    for name in A.DIFFERENTIABLE:
        xg = x.clone().requires_grad_(True)
        a = A.METHODS[name](model, xg, y, create_graph=True, **options.get(name, {}))
        (g,) = torch.autograd.grad(a.pow(2).sum(), xg)
        rows.append((name, float(g.norm()), bool(torch.isfinite(g).all())))
    return rows
