"""The lim2021 chapter's (paper 004, Lim, Lee & Kim, CVPR 2021) shared evaluation steps.

What the chapter's notebooks repeat, in one place:

* :func:`to_mask`: an explanation map as a [0, 1] mask, by 004's supplement (S2.1)
  (:func:`robattr.attributions.to_mask`, re-exported here);
* :func:`all_masks`: every explainer's mask of a batch, in the chapter's order;
* :func:`random_twin`: the control of every attack, Gaussian noise of the attack's l2 size;
* :func:`mask_scores`: per-image retrieval, relevance and similarity of a batch of masks;
* :func:`per_image`: one stored per-image tensor as a float NumPy array;
* :func:`chapter_model`, :func:`chapter_models`: a zoo model, or the user's weights (004's
  ImageNet ResNet-50s); a notebook's models, declared in :mod:`.specs`;
* :func:`compare_maskings`, :func:`masking_table`, :func:`plot_maskings`: RelEx's two
  maskings (pixels, 004's normalised input) on the same images;
* :func:`masking_view`, :func:`masked_input`, :func:`masked_retrieval`: the network and
  inputs a masking multiplies, ``m ⊙ x`` in pixels, and class retrieval, under either
  masking;

and the theory notebook's checks of Theorem 1 (:func:`robattr.bounds.thm1_check`):
:func:`random_small_net` and :func:`random_masked_rows` (random cases),
:func:`confident_images` (test images whose unmasked input leaves Theorem 1 a budget),
:func:`thm1_along_directions` (random and gradient directions of a batch),
:func:`thm1_violations` and :func:`thm1_covered` (counting the rows that break a bound).

Printing the cells a combined verdict rests on is :func:`robattr.report.verdicts.print_cells`.
"""
from __future__ import annotations

from typing import Callable, Mapping

import numpy as np
import torch
from torch import nn

from robattr.attributions.postprocess import MASK_KINDS, to_mask  # noqa: F401  (re-exported)

__all__ = ["MASK_KINDS", "to_mask", "gradient_explainers", "all_masks", "random_twin",
           "mask_scores", "per_image", "chapter_model", "chapter_models", "compare_maskings",
           "masking_table",
           "plot_maskings", "masking_view", "masked_input", "masked_retrieval", "SMALL_NET_KINDS", "random_small_net", "random_masked_rows",
           "confident_images", "thm1_violations", "thm1_covered", "thm1_along_directions"]

def gradient_explainers(sg_samples: int, ig_steps: int, seed: int) -> dict[str, Callable]:
    """The chapter's gradient-type explainers, ``name -> fn(model, x, target)``: SimGrad,
    SmoothGrad (``sg_samples`` draws from ``seed``), IntGrad (``ig_steps``) and DeepLIFT."""
    from robattr import attributions as A

    for name, v in (("sg_samples", sg_samples), ("ig_steps", ig_steps)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    return {
        "SimGrad": lambda m, x, t: A.grad(m, x, t),
        "SmoothGrad": lambda m, x, t: A.smoothgrad(m, x, t, n_samples=sg_samples, seed=seed),
        "IntGrad": lambda m, x, t: A.integrated_gradients(m, x, t, steps=ig_steps),
        "DeepLIFT": lambda m, x, t: A.deeplift(m, x, t),
    }


def all_masks(model: nn.Module, x: torch.Tensor, target: torch.Tensor, *, sg_samples: int,
              ig_steps: int, relex_epochs: int, n_noisy: int, seed: int,
              relex_epochs_long: int | None = None, mask_iterations: int | None = None,
              relex_batch_size: int | None = None,
              relex_masking: str = "pixel") -> dict[str, torch.Tensor]:
    """Every explainer's mask (:func:`to_mask`) of ``x`` for ``target``, detached, by name.

    In this order: the four :func:`gradient_explainers`, ``GradCAM``; ``MASK`` (meaningful
    perturbation, ``mask_iterations`` iterations) when ``mask_iterations`` is given;
    ``RelEx(<relex_epochs>)``; and, when ``relex_epochs_long`` is given, the same RelEx run
    continued to ``RelEx(<relex_epochs_long>)`` (one optimisation, two snapshots) and
    ``RelEx w/o batch`` (``relex_epochs`` steps without the noisy copies).
    ``relex_batch_size`` bounds RelEx's batch (all images in one batch by default);
    ``relex_masking`` is RelEx's ``masking`` (:data:`robattr.attributions.relex.MASKINGS`).
    """
    from robattr import attributions as A

    if relex_epochs_long is not None and relex_epochs_long <= relex_epochs:
        raise ValueError(f"relex_epochs_long ({relex_epochs_long}) must exceed relex_epochs "
                         f"({relex_epochs})")
    out = {name: to_mask(fn(model, x, target), "grad")
           for name, fn in gradient_explainers(sg_samples, ig_steps, seed).items()}
    out["GradCAM"] = to_mask(A.grad_cam(model, x, target), "cam")
    if mask_iterations is not None:
        out["MASK"] = to_mask(A.meaningful_perturbation(model, x, target,
                                                        iterations=mask_iterations), "mask")
    if relex_epochs_long is None:
        out[f"RelEx({relex_epochs})"] = A.relex(model, x, target, epochs=relex_epochs,
                                                n_noisy=n_noisy, seed=seed,
                                                batch_size=relex_batch_size,
                                                masking=relex_masking)
    else:
        short, long = A.relex(model, x, target, epochs=relex_epochs_long,
                              snapshots=(relex_epochs, relex_epochs_long), n_noisy=n_noisy,
                              seed=seed, batch_size=relex_batch_size, masking=relex_masking)
        out[f"RelEx({relex_epochs})"], out[f"RelEx({relex_epochs_long})"] = short, long
        out["RelEx w/o batch"] = A.relex(model, x, target, epochs=relex_epochs, batch=False,
                                         seed=seed, masking=relex_masking)
    return {k: v.detach() for k, v in out.items()}


def random_twin(x: torch.Tensor, l2: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """The random twin of an attacked batch: ``x`` plus a Gaussian direction (from
    ``generator``) scaled to the per-image l2 length ``l2`` (shape ``(n,)``), clipped to
    [0, 1] (which can only shorten it)."""
    if l2.shape != (x.shape[0],):
        raise ValueError(f"l2 must hold one length per image, shape ({x.shape[0]},), "
                         f"got {tuple(l2.shape)}")
    view = (-1,) + (1,) * (x.dim() - 1)
    noise = torch.randn(x.shape, generator=generator, device=x.device)
    return (x + noise / noise.flatten(1).norm(dim=1).view(view) * l2.view(view)).clamp(0, 1)


def mask_scores(model: nn.Module, x: torch.Tensor, masks: Mapping[str, torch.Tensor],
                clean_masks: Mapping[str, torch.Tensor], target: torch.Tensor, top_k: int,
                *, relevance: bool = False, ratios: int = 64,
                masking: str = "pixel") -> dict[tuple, torch.Tensor]:
    """Per-image scores of each method's mask ``masks[m]`` of ``x`` against its clean mask.

    Keys ``(key, m)``: ``"retrieval"`` (:func:`robattr.metrics.class_retrieval` of
    ``masks[m] ⊙ x``), ``"spearman"`` and ``"topk"`` (rank correlation and top-``top_k``
    intersection of the first channels of ``masks[m]`` and ``clean_masks[m]``). With
    ``relevance``: also ``"clean"`` (retrieval with the clean mask on ``x``), ``"l1"``
    (``||masks[m]||_1 / ||clean_masks[m]||_1``), deletion ``"D"``, preservation ``"P"``
    (``ratios`` steps) and feature relevance ``"R"``. ``masking`` says what a masked-out
    pixel becomes in retrieval, deletion and preservation (:func:`masking_view`: black, or
    the dataset mean with ``"normalized"``).
    """
    from robattr.metrics import (class_retrieval, deletion, feature_relevance, preservation,
                                 spearman, topk_intersection)

    missing = set(masks) - set(clean_masks)
    if missing:
        raise ValueError(f"clean_masks lacks the methods {sorted(missing)}")
    out = {}
    f, u = masking_view(model, x, masking)
    for m, mask in masks.items():
        m0 = clean_masks[m]
        out[("retrieval", m)] = class_retrieval(f, u, mask, target, normalize=None)
        if relevance:
            out[("clean", m)] = class_retrieval(f, u, m0, target, normalize=None)
            out[("l1", m)] = mask.flatten(1).sum(1) / m0.flatten(1).sum(1).clamp_min(1e-12)
            D = deletion(f, u, mask, target, ratios=ratios).auc
            P = preservation(f, u, mask, target, ratios=ratios).auc
            out[("D", m)], out[("P", m)], out[("R", m)] = D, P, feature_relevance(P, D)
        out[("spearman", m)] = spearman(mask[:, :1], m0[:, :1])
        out[("topk", m)] = topk_intersection(mask[:, :1], m0[:, :1], top_k)
    return out


def per_image(runs: Mapping, run, key) -> np.ndarray:
    """``runs[run][key]`` (one value per image) as a float NumPy array."""
    if run not in runs:
        raise ValueError(f"no run {run!r}; runs: {list(runs)[:6]}")
    row = runs[run]
    if key not in row:
        raise ValueError(f"run {run!r} has no entry {key!r}")
    return row[key].detach().cpu().numpy().astype(float)


def chapter_model(dataset: str, arch: str, method: str = "ce", *, weights: str = "",
                  epochs: int = 20, device="auto", acc_images: int = 1000) -> nn.Module:
    """The chapter's model of ``arch`` on ``dataset``, in eval mode on ``device``.

    Without ``weights``: the zoo's model trained with ``method`` for ``epochs`` epochs
    (:func:`robattr.zoo.get_model`; the rest of its recipe is the zoo's and the profile's). With ``weights`` (a state-dict file, e.g. torchvision's
    ImageNet ResNet-50, 004's natural model): :func:`robattr.models.build` loads it, nothing
    is trained, and ``zoo_meta["test_acc"]`` is the accuracy on the first ``acc_images``
    images of the test split (the whole folder when ``dataset`` is a folder without split
    folders), so the notebooks print the same fields for both.
    """
    from robattr import data, models, zoo
    from robattr.utils import get_device

    dev = get_device(device)
    if not weights:
        return zoo.get_model(dataset, arch, method, epochs=epochs, device=dev, progress=False)
    model = models.build(arch, dataset, weights=weights).to(dev).eval()
    test = data.load(dataset, split="test")
    n = min(int(acc_images), len(test))
    if n < 1:
        raise ValueError(f"acc_images must be >= 1 and the test split non-empty, got {acc_images}, "
                         f"{len(test)} images")
    right = 0
    with torch.no_grad():
        for start in range(0, n, 100):
            part = torch.utils.data.Subset(test, range(start, min(start + 100, n)))
            xb, yb = data.as_tensors(part, device=dev)
            right += int((model(xb).argmax(1) == yb).sum())
    model.zoo_meta = {"test_acc": right / n, "acc_images": n, "weights": str(weights),
                      "method": f"user weights ({method} in the chapter's naming)",
                      "config": {"dataset": str(dataset), "method": method}}
    return model


def chapter_models(specs: Mapping[str, dict], params: Mapping, device="auto") -> dict:
    """``label -> model`` of the chapter's models (:data:`~robattr.chapters.lim2021.specs.
    CHAPTER_MODELS`) that a notebook's parameters ``params`` (``run.params``) have a weights
    parameter for, in that order: the zoo's models of ``specs`` (the notebook's function of
    :mod:`~robattr.chapters.lim2021.specs`, through :func:`robattr.zoo.get_models`), the
    others loaded from their weights file (:func:`chapter_model`)."""
    from robattr import zoo
    from robattr.chapters.lim2021.specs import CHAPTER_MODELS
    from robattr.utils import get_device

    dev = get_device(device)
    trained = zoo.get_models(specs, device=dev, progress=False)
    out = {}
    for label, (method, weights) in CHAPTER_MODELS.items():
        if label in trained:
            out[label] = trained[label]
        elif params.get(weights):
            out[label] = chapter_model(params["dataset"], params["arch"], method,
                                       weights=params[weights], device=dev)
    return out


def compare_maskings(model: nn.Module, x: torch.Tensor, target: torch.Tensor, *, epochs: int,
                     n_noisy: int, seed: int, batch_size: int | None = None) -> dict:
    """RelEx's masks of ``x`` for ``target`` under both maskings, from the same seed (so the
    same initial mask and the same standard-normal draws, scaled differently).

    Returns ``{"masks": {masking: mask}, "cosine": ..., "spearman": ...}``, the last two per
    image over every entry of the masks (:func:`robattr.metrics.cosine_similarity`,
    :func:`robattr.metrics.spearman`).
    """
    from robattr import attributions as A
    from robattr.attributions.relex import MASKINGS
    from robattr.metrics import cosine_similarity, spearman

    masks = {mk: A.relex(model, x, target, epochs=epochs, n_noisy=n_noisy, seed=seed,
                         batch_size=batch_size, masking=mk).detach() for mk in MASKINGS}
    a, b = (masks[mk] for mk in MASKINGS)
    return {"masks": masks, "cosine": cosine_similarity(a, b), "spearman": spearman(a, b)}


def masking_table(cmp: Mapping):
    """One row per image of a :func:`compare_maskings` result: the cosine and the Spearman
    correlation between its two masks, and each mask's l1 norm as a share of its entries."""
    import pandas as pd

    rows = {"cosine": cmp["cosine"], "spearman": cmp["spearman"]}
    rows.update({f"mean mask ({mk})": m.flatten(1).mean(1) for mk, m in cmp["masks"].items()})
    df = pd.DataFrame({k: v.detach().cpu().double().numpy() for k, v in rows.items()})
    df.index.name = "image"
    return df


def plot_maskings(x: torch.Tensor, cmp: Mapping, n: int = 4):
    """A figure of the first ``n`` images of ``x`` (rows: the image, then each masking's
    RelEx mask averaged over the channels, all on [0, 1]), each mask column titled with the
    cosine between the two masks. Returns the figure."""
    import matplotlib.pyplot as plt

    n = max(1, min(int(n), x.shape[0]))
    masks = cmp["masks"]
    fig, axes = plt.subplots(1 + len(masks), n, figsize=(1.9 * n, 2.0 * (1 + len(masks))),
                             squeeze=False)
    for j in range(n):
        img = x[j].detach().cpu().permute(1, 2, 0).clamp(0, 1).numpy()
        axes[0, j].imshow(img[..., 0] if img.shape[-1] == 1 else img,
                          cmap="gray" if img.shape[-1] == 1 else None)
        axes[0, j].set_title(f"image {j}", fontsize=8)
        for i, (mk, m) in enumerate(masks.items(), start=1):
            image = axes[i, j].imshow(m[j].detach().cpu().mean(0).numpy(), cmap="magma",
                                      vmin=0, vmax=1)
            axes[i, j].set_title(f"{mk} (cos {float(cmp['cosine'][j]):.2f})" if i == 1 else mk,
                                 fontsize=8)
    for ax in axes.flat:
        ax.set_xticks([])
        ax.set_yticks([])
    fig.tight_layout()
    if masks:
        fig.colorbar(image, ax=list(axes[1:].ravel()), fraction=0.025, pad=0.02,
                     label="mask value (averaged over channels)")
    return fig


def masking_view(model: nn.Module, x: torch.Tensor, masking: str):
    """The network and the inputs a RelEx masking multiplies: ``(model, x)`` for
    ``"pixel"``; for ``"normalized"`` the network after its first layer, a
    :class:`robattr.models.Normalize`, and ``(x - mean) / std``. In that view
    ``relex(net, z)`` (pixel masking) is ``relex(model, x, masking="normalized")``, and
    the theorems' ``m * x`` is the paper's masked normalised image."""
    from robattr.attributions.relex import MASKINGS
    from robattr.models import Normalize

    if masking not in MASKINGS:
        raise ValueError(f"masking must be one of {MASKINGS}, got {masking!r}")
    if masking == "pixel":
        return model, x
    if not (isinstance(model, nn.Sequential) and len(model) > 1 and isinstance(model[0], Normalize)):
        raise ValueError("masking_view needs an nn.Sequential whose first layer is a "
                         "robattr.models.Normalize (every robattr model is one)")
    net = model[1:].eval()
    for key in ("zoo_meta", "arch"):
        if hasattr(model, key):
            setattr(net, key, getattr(model, key))
    return net, ((x - model[0].mean) / model[0].std).detach()


def masked_input(model: nn.Module, x: torch.Tensor, m: torch.Tensor, masking: str = "pixel"):
    """``m ⊙ x`` in pixels under a masking: ``m * x`` (``"pixel"``: a removed pixel is
    black), or ``mean + m * (x - mean)`` (``"normalized"``: ``m`` times the normalised image,
    so a removed pixel is the dataset mean of the model's Normalize layer)."""
    from robattr.attributions.relex import MASKINGS, input_normalization

    if masking not in MASKINGS:
        raise ValueError(f"masking must be one of {MASKINGS}, got {masking!r}")
    if masking == "pixel":
        return m * x
    mean, _ = input_normalization(model, x)
    return mean + m * (x - mean)


def masked_retrieval(model: nn.Module, x: torch.Tensor, mask: torch.Tensor, target,
                     masking: str = "pixel") -> torch.Tensor:
    """004's class retrieval of ``mask`` on ``x`` (:func:`robattr.metrics.class_retrieval`,
    the mask used as given) under ``masking`` (:func:`masked_input`): 1.0 per image whose
    masked input is classified as ``target``."""
    from robattr.metrics import class_retrieval

    f, u = masking_view(model, x, masking)
    return class_retrieval(f, u, mask, target, normalize=None)


# --------------------------------------------------------------------------- theory (Thm 1)
#: The activations of :func:`random_small_net`'s two-hidden-layer networks.
SMALL_NET_KINDS = ("linear", "tanh", "relu", "softplus")


def random_small_net(kind: str, d: int, k: int, generator: torch.Generator) -> nn.Module:
    """A random float64 classifier of ``d`` inputs and ``k`` classes, in eval mode.

    ``kind`` starting with ``"linear"``: one linear layer whose weight is scaled by a factor
    uniform in [0.5, 5]; ``"tanh"``, ``"relu"``, ``"softplus"``: two hidden layers of 32
    with that activation, every parameter scaled by 3 (steeper than the default init, so
    the loss moves). The global torch seed is set from ``generator`` first, so the network
    is a function of ``generator``'s state.
    """
    if not (kind.startswith("linear") or kind in SMALL_NET_KINDS):
        raise ValueError(f"kind must start with 'linear' or be one of {SMALL_NET_KINDS[1:]}, "
                         f"got {kind!r}")
    torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=generator)))
    if kind.startswith("linear"):
        net = nn.Linear(d, k)
        with torch.no_grad():
            net.weight.mul_(float(torch.empty(1).uniform_(0.5, 5)))
    else:
        act = {"tanh": nn.Tanh, "relu": nn.ReLU, "softplus": nn.Softplus}[kind]
        net = nn.Sequential(nn.Linear(d, 32), act(), nn.Linear(32, 32), act(), nn.Linear(32, k))
        with torch.no_grad():
            for p in net.parameters():
                p.mul_(3.0)
    return net.double().eval()


def random_masked_rows(net: nn.Module, d: int, rows: int, generator: torch.Generator):
    """``rows`` random cases for ``net`` (float64, from ``generator``): inputs ``x`` uniform in
    [0, 1]^d, masks ``m`` uniform in [0, 1] with about 30 % of the entries set to 0,
    directions ``v`` standard normal, and targets ``t``, the prediction on ``m ⊙ x``.
    Returns ``(x, m, v, t)``."""
    x = torch.rand(rows, d, generator=generator, dtype=torch.float64)
    m = (torch.rand(rows, d, generator=generator, dtype=torch.float64)
         * (torch.rand(rows, d, generator=generator) < 0.7))
    v = torch.randn(rows, d, generator=generator, dtype=torch.float64)
    with torch.no_grad():
        t = net(m * x).argmax(1)
    return x, m, v, t


def confident_images(models, x: torch.Tensor, y: torch.Tensor, n: int, p_min: float, *,
                     batch_size: int = 256):
    """The first ``n`` images of ``(x, y)`` that every model of ``models`` classifies as ``y``
    with probability at least ``p_min``.

    With ``p_min = exp(-tau)`` these are the images whose unmasked input has the budget
    ``c = tau - L(x_0) > 0`` of Theorem 1 under every model (a weak model leaves most test
    images without one, and a row with ``c = 0`` tests nothing). Returns ``(x[idx], y[idx],
    idx)``; fewer than ``n`` images when fewer qualify, and a ``ValueError`` when none does.
    """
    models = [models] if isinstance(models, nn.Module) else list(models)
    if not models:
        raise ValueError("confident_images needs at least one model")
    if isinstance(n, bool) or int(n) != n or n < 1:
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    if not 0 < p_min < 1:
        raise ValueError(f"p_min must be in (0, 1), got {p_min!r}")
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x and y must have one entry per image, got {x.shape[0]} and {y.shape[0]}")
    ok = torch.ones(x.shape[0], dtype=torch.bool, device=x.device)
    with torch.no_grad():
        for model in models:
            p = torch.cat([torch.softmax(model(x[i:i + batch_size]), 1)
                           .gather(1, y[i:i + batch_size, None])[:, 0]
                           for i in range(0, x.shape[0], batch_size)])
            ok &= p >= p_min
    idx = ok.nonzero().flatten()[:int(n)]
    if idx.numel() == 0:
        raise ValueError(f"none of the {x.shape[0]} images is classified as its label with "
                         f"probability >= {p_min} by every model")
    return x[idx], y[idx], idx


def thm1_violations(r: Mapping[str, torch.Tensor], key: str = "bound", rtol: float = 1e-6):
    """Rows of a :func:`robattr.bounds.thm1_check` result ``r`` where the radius bound ``key``
    (``"bound"``: Eq. 5, ``"lipschitz"``: the mean-value bound) exceeds the radius.

    Only rows that crossed (finite ``alpha``) with a positive budget ``c`` count. Returns
    ``(rows, violations, ratio)``: how many rows count, how many have
    ``r[key] > alpha (1 + rtol)``, and ``r[key] / alpha`` on the counted rows.
    """
    if key not in r:
        raise ValueError(f"r has no entry {key!r}; entries: {sorted(r)}")
    ok = torch.isfinite(r["alpha"]) & (r["c"] > 0)
    bad = ok & (r[key] > r["alpha"] * (1 + rtol))
    return int(ok.sum()), int(bad.sum()), r[key][ok] / r["alpha"][ok]


def thm1_covered(r: Mapping[str, torch.Tensor], rtol: float = 1e-6) -> tuple[int, int]:
    """Theorem 1 under its hypothesis: among the rows of a :func:`robattr.bounds.thm1_check`
    result that crossed with ``c > 0`` and whose trapezoid covers the budget
    (``trapezoid >= c + 1e-9``), ``(violations of Eq. 5, rows)``; the proof makes the first 0."""
    cov = torch.isfinite(r["alpha"]) & (r["c"] > 0) & (r["trapezoid"] >= r["c"] + 1e-9)
    return int((cov & (r["bound"] > r["alpha"] * (1 + rtol))).sum()), int(cov.sum())


def thm1_along_directions(model: nn.Module, x: torch.Tensor, m: torch.Tensor, y: torch.Tensor,
                          *, n_dirs: int, generator: torch.Generator, tau: float,
                          alpha_max: float, n_grid: int) -> dict[str, torch.Tensor]:
    """:func:`robattr.bounds.thm1_check` of every image of ``x`` with mask ``m`` and target
    ``y`` along ``n_dirs`` random directions (standard normal, drawn from ``generator`` on
    the CPU) and the direction in which the masked loss rises fastest (``-m ⊙ g``, the last
    one). Rows are direction-major (``n_dirs + 1`` blocks of ``len(x)`` rows); the result
    adds ``is_grad``, true on the gradient direction's rows."""
    from robattr.bounds import masked_grad, thm1_check

    if isinstance(n_dirs, bool) or int(n_dirs) != n_dirs or n_dirs < 1:
        raise ValueError(f"n_dirs must be an integer >= 1, got {n_dirs!r}")
    _, g0 = masked_grad(model, x, m, y)
    dirs = torch.cat([torch.randn((n_dirs,) + tuple(x.shape), generator=generator).to(x.device),
                      -(m * g0).unsqueeze(0)], 0)           # ascent of L is -m * g
    k = dirs.shape[0]

    def rep(t):
        return t.unsqueeze(0).expand(k, *t.shape).reshape(-1, *t.shape[1:])

    r = thm1_check(model, rep(x), rep(m), dirs.reshape(-1, *x.shape[1:]), y.repeat(k), tau=tau,
                   alpha_max=alpha_max, n_grid=n_grid)
    r["is_grad"] = torch.arange(k, device=x.device).repeat_interleave(x.shape[0]) == k - 1
    return r
