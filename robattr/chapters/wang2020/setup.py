"""The wang2020 chapter's (paper 000, Wang et al., NeurIPS 2020) runs: blocks, models, images.

Table 2 has one block per data set (CIFAR-10, Flower, ImageNet), each with its own image
size, top-k size and noise levels (:data:`TABLE2_BLOCKS`); :func:`table2_runs` turns a
notebook's list of blocks into the runs whose data are here (:mod:`robattr.blocks`), and
:func:`run_model` / :func:`eval_images` give each run its model (the zoo's, declared in
:mod:`.specs`, or a weights file's) and images. Two checks of
the released code's conventions: :func:`channel_mean_top_eigenvalue` (SSR's eigenvalue with
W averaged over colour channels, as the Keras loss does) and :func:`ug_reading_overlap`
(Uniform Gradient as the Keras evaluation computes it, against ours). Table 3's cost claim
rests on :func:`interleaved_step_seconds`: every method's training step timed fresh, in one
process, on the same batches, the methods interleaved round by round.

The table steps the notebooks share (attack curves, AUCs, cell verdicts) are in
:mod:`.evaluate`.
"""
from __future__ import annotations

import os
from typing import Sequence

import numpy as np
import pandas as pd
import torch
from torch import nn

from robattr.chapters.wang2020.evaluate import protocol_methods

__all__ = ["TABLE2_BLOCKS", "table2_runs", "data_label", "run_model", "eval_images", "run_label",
           "correct_indices", "prepare_run", "run_summary", "block_place", "prepare_runs",
           "pick_images", "table56_run", "table5_models",
           "channel_mean_top_eigenvalue", "uniform_grad_keras", "ug_reading_overlap",
           "interleaved_step_seconds"]


# --------------------------------------------------------------------------- Table 2's blocks
#: 000's Table 2 blocks (App. C1 and the caption of Table 2): the data set, the image side, the
#: top-k size (about 2 % of the pixels), SmoothGrad's noise ratio (sigma = ratio x (max - min))
#: and UG's cube radius in pixel units (4 on the 0-255 scale for CIFAR-10 and Flower;
#: 0.2 x (max - min) for ImageNet, used as 0.2: on [0, 1] pixels max - min is the full range
#: for nearly every photo, and the notebook prints it). ImageNet's data set is the user's
#: folder and its model a pretrained ResNet-50 (a weights file); the others train in the zoo.
TABLE2_BLOCKS = {
    "CIFAR-10": dict(dataset="cifar10", size=32, k=20, sg_noise=0.1, ug_radius=4 / 255),
    "Flower": dict(dataset="flowers102", size=64, k=80, sg_noise=0.1, ug_radius=4 / 255),
    "ImageNet": dict(dataset=None, size=224, k=1000, sg_noise=0.2, ug_radius=0.2),
}


def table2_runs(blocks: Sequence[str], *, dataset: str, k: int, imagenet_dir: str = "",
                imagenet_weights: str = "", echo=print) -> list[dict]:
    """The runs of a Table 2 notebook: one dict per block of ``blocks`` (names of
    :data:`TABLE2_BLOCKS`) whose data are here (:func:`robattr.blocks.select`, which prints a
    line for each block it skips), with the block's ``label``, ``dataset``, ``size``, ``k``,
    ``sg_noise``, ``ug_radius``, ``split`` (of the evaluated images) and ``weights`` (a file,
    or None: the zoo trains the model). ImageNet reads ``imagenet_dir`` (an ImageFolder) and
    the ResNet-50 weights ``imagenet_weights``. With no blocks (or none whose data are here,
    which ``echo`` then says), one run on ``dataset`` with ``k`` and the CIFAR-10 noise levels,
    compared with the paper's CIFAR-10 block."""
    from robattr.blocks import IMAGENET_HINT, Block, select

    fallback = [dict(label="CIFAR-10", dataset=dataset, size=None, k=k, sg_noise=0.1,
                     ug_radius=4 / 255, split="test", weights=None)]
    if not blocks:
        return fallback
    unknown = [b for b in blocks if b not in TABLE2_BLOCKS]
    if unknown:
        raise ValueError(f"unknown Table 2 blocks {unknown}; known: {list(TABLE2_BLOCKS)}")
    cand = []
    for name in blocks:
        spec = TABLE2_BLOCKS[name]
        if spec["dataset"] is None:
            cand.append(Block(name, imagenet_dir, size=spec["size"], splits=("val",),
                              weights=imagenet_weights,
                              what=f"{IMAGENET_HINT}, and a natural ResNet-50 weights file"))
        else:
            cand.append(Block(name, spec["dataset"], size=spec["size"]))
    runs = [dict(label=b.label, dataset=b.dataset, size=TABLE2_BLOCKS[b.label]["size"],
                 k=TABLE2_BLOCKS[b.label]["k"], sg_noise=TABLE2_BLOCKS[b.label]["sg_noise"],
                 ug_radius=TABLE2_BLOCKS[b.label]["ug_radius"], split=b.splits[-1],
                 weights=b.weights) for b in select(cand, echo=echo)]
    if not runs and echo is not None:
        echo(f"no block has its data here: one run on {dataset!r} instead, beside the paper's "
             "CIFAR-10 block")
    return runs or fallback


def data_label(run: dict) -> str:
    """What a Table 2 run ran on, as the notebooks' tables, figures and claim lines name it:
    the block's name (``CIFAR-10``, ``Flower``, ``ImageNet``) when the run is on the block's
    own data, else the name of the data set it ran on (the quick profile's run on
    ``digits`` is set beside the paper's CIFAR-10 block, but it is not that block). A run of
    :func:`table2_runs` is on its block's data when it carries the block's image size."""
    if run.get("size") is not None:
        return str(run["label"])
    return os.path.basename(os.fspath(run["dataset"]).rstrip("/")) or str(run["dataset"])


def run_model(run: dict, models: dict, device):
    """The model of one run: the pretrained ResNet-50 of ``run["weights"]``
    (:func:`robattr.blocks.pretrained`), else ``models[run["label"]]``, the run's zoo model
    (``zoo.get_models`` of :func:`robattr.chapters.wang2020.specs.table2_attacks`)."""
    from robattr.blocks import pretrained

    if run.get("weights"):
        return pretrained("resnet50", run["dataset"], run["weights"], device=device)
    if run["label"] not in models:
        raise KeyError(f"no zoo model for the run {run['label']!r}: models has {list(models)}")
    return models[run["label"]]


def eval_images(run: dict, n_eval: int, device):
    """``(x, y)``: the images a run draws its ``n_eval`` from: the whole split of the data
    set, or for a run with a pretrained model (an ImageNet folder) its first ``4 n_eval``
    images (classes interleaved, :mod:`robattr.data`), enough to find ``n_eval`` that the
    model classifies correctly."""
    from robattr import data

    ds = data.load(run["dataset"], run.get("split", "test"), size=run.get("size")
                   if run["dataset"] not in data.DATASETS or run["dataset"] == "flowers102" else None)
    n = min(len(ds), 4 * n_eval) if run.get("weights") else None
    return data.as_tensors(ds, n, device=device)


def run_label(run: dict, arch: str) -> str:
    """How a run names its model on a claim line."""
    return "ResNet-50, pretrained weights" if run.get("weights") else f"{arch}, natural training"


def correct_indices(model: nn.Module, x: torch.Tensor, y: torch.Tensor, batch: int = 1024):
    """Indices of the images of ``x`` that ``model`` classifies as ``y`` (in chunks of ``batch``)."""
    with torch.no_grad():
        ok = torch.cat([model(x[i:i + batch]).argmax(1) == y[i:i + batch]
                        for i in range(0, len(x), batch)])
    return ok.nonzero().squeeze(1)


def prepare_run(run: dict, models: dict, *, n_eval: int, n_samples: int, ig_steps: int,
                seed: int, device):
    """``(model, x, methods)`` of one Table 2 run: its model (:func:`run_model` of
    ``models``), ``n_eval`` of its images that the model classifies correctly, drawn in a
    random order fixed by ``seed``, and :func:`protocol_methods` at the run's noise levels."""
    model = run_model(run, models, device)
    x_all, y_all = eval_images(run, n_eval, device)
    keep = correct_indices(model, x_all, y_all)
    idx = keep[torch.randperm(len(keep), generator=torch.Generator().manual_seed(seed))[:n_eval]]
    return model, x_all[idx], protocol_methods(n_samples, ig_steps, run["sg_noise"], run["ug_radius"])


def run_summary(run: dict, model: nn.Module, x: torch.Tensor, arch: str) -> str:
    """One line on a run: data (and, for a run on other data, the paper's block it is set
    beside, :func:`data_label`), model (test accuracy when the zoo trained it), images, k, the
    noise levels, and for a pretrained model the images' pixel range (UG's radius is 0.2 of it)."""
    meta = getattr(model, "zoo_meta", None)
    acc = f"test accuracy {meta['test_acc']:.3f}" if meta else "pretrained weights"
    name = os.path.basename(os.fspath(run["dataset"]).rstrip("/")) or run["dataset"]
    head = (f"{run['label']} block: {name} {tuple(x.shape[-2:])}" if data_label(run) == run["label"]
            else f"{name} {tuple(x.shape[-2:])}, beside the paper's {run['label']} block:")
    line = (f"{head} {arch if meta else 'resnet50'} ({acc}); {len(x)} images, "
            f"k = {run['k']}, SG noise ratio {run['sg_noise']:g}, UG radius {255 * run['ug_radius']:.3g}/255")
    if run.get("weights"):
        rng = (x.flatten(1).amax(1) - x.flatten(1).amin(1)).cpu()
        line += f"; max − min of the images: mean {float(rng.mean()):.3f}, min {float(rng.min()):.3f}"
    return line


def block_place(run: dict) -> str:
    """Where a Table 2 run's numbers sit: ``"CIFAR-10 block"`` for a run on its block's own
    data, else ``"digits (beside the paper's CIFAR-10 block)"`` (:func:`data_label`)."""
    shown = data_label(run)
    if shown == run["label"]:
        return f"{shown} block"
    return f"{shown} (beside the paper's {run['label']} block)"


def prepare_runs(runs: dict, models: dict, *, arch: str, n_eval: int, n_samples: int,
                 ig_steps: int, seed: int, device, eps_list: Sequence[float], steps: int,
                 surrogate_beta: float, echo=print) -> dict:
    """Per run of ``runs`` (label -> run of :func:`table2_runs`), in order:
    ``(model, x, methods, protocol)``, the first three from :func:`prepare_run` (the zoo
    models by run label: ``models``) and ``protocol`` the arguments of
    :func:`robattr.chapters.wang2020.attack_curves` at the run's k (``eps_list``, ``k``,
    ``steps``, ``surrogate_beta``, ``seed``). ``echo`` gets each run's :func:`run_summary`
    line (``arch``: the zoo models' architecture)."""
    out = {}
    for label, run in runs.items():
        model, x, methods = prepare_run(run, models, n_eval=n_eval, n_samples=n_samples,
                                        ig_steps=ig_steps, seed=seed, device=device)
        protocol = dict(eps_list=eps_list, k=run["k"], steps=steps, surrogate_beta=surrogate_beta,
                        seed=seed)
        out[label] = (model, x, methods, protocol)
        if echo is not None:
            echo(run_summary(run, model, x, arch))
    return out


def pick_images(models, x: torch.Tensor, y: torch.Tensor, n: int, seed: int) -> torch.Tensor:
    """The first ``n`` images of ``x`` (in a random order fixed by ``seed``) that every model of
    ``models`` classifies as ``y``; an error when fewer are."""
    models = list(models)
    if not models:
        raise ValueError("models must hold at least one model")
    if len(x) != len(y):
        raise ValueError(f"x has {len(x)} images but y {len(y)} labels")
    order = torch.randperm(len(x), generator=torch.Generator().manual_seed(seed)).to(x.device)
    with torch.no_grad():
        ok = torch.stack([m(x[order]).argmax(1) == y[order] for m in models]).all(0)
    sel = order[ok][:n]
    if len(sel) < n:
        raise RuntimeError(f"only {len(sel)} test images are correct for every model; lower n")
    return x[sel]


# --------------------------------------------------------------------------- the code's conventions
def channel_mean_top_eigenvalue(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """SSR's eigenvalue as the released Keras loss computes it (robust/smooth_space.py,
    ``compute_W``): the largest eigenvalue of ``W̄ A W̄ᵀ`` where ``W̄`` is the logit Jacobian
    *averaged over the colour channels* (one row per pixel), A = diag(p) − ppᵀ; per example,
    (N,), no graph. Equal to :func:`robattr.bounds.gauss_newton_top_eigenvalue` for one
    channel; for C channels at most 1/C of it (``‖mean_c w_c‖² ≤ Σ_c ‖w_c‖² / C``), equal
    when every channel has the same gradient."""
    from robattr.bounds import gauss_newton_small_matrix, logit_jacobian

    if x.ndim != 4:
        raise ValueError(f"x must be images N×C×H×W, got shape {tuple(x.shape)}")
    x = x.detach().requires_grad_(True)
    with torch.enable_grad():
        logits = model(x)
        jac = logit_jacobian(logits, x)                                  # (N, C·H·W, K)
    n, _, k = jac.shape
    w_bar = jac.reshape(n, x.shape[1], -1, k).mean(1)                    # (N, H·W, K)
    small = gauss_newton_small_matrix(w_bar, logits.detach())
    return torch.linalg.eigvalsh(small)[:, -1].clamp_min(0.0).detach()


def _ug_draws(model, x, target, noise):
    """Mean over the draws of the gradient of the target logit and of its softmax probability."""
    g_logit, g_prob = torch.zeros_like(x), torch.zeros_like(x)
    rows = torch.arange(len(x), device=x.device)
    for eta in noise:
        xs = (x + eta).detach().requires_grad_(True)
        with torch.enable_grad():
            logits = model(xs)
            gl, = torch.autograd.grad(logits[rows, target].sum(), xs, retain_graph=True)
            gp, = torch.autograd.grad(logits.softmax(1)[rows, target].sum(), xs)
        g_logit += gl / len(noise)
        g_prob += gp / len(noise)
    return g_logit, g_prob


def uniform_grad_keras(model: nn.Module, x: torch.Tensor, target, *, radius: float,
                       n_samples: int, seed: int = 0) -> torch.Tensor:
    """Uniform Gradient as 000's Keras evaluation computes it (eval/keras_v1: ``BallWrapper``
    on the noisy copies of ``UniGradientsAttack``): the mean over ``n_samples`` copies
    ``x + η``, η uniform in ``[-radius, radius]^d``, of the gradient of the target's
    *softmax probability*, times the *last noisy copy* (not ``x``). Ours
    (:func:`robattr.attributions.uniform_grad` with ``multiply_by_input``) differentiates the
    logit and multiplies by ``x``, as the authors' PyTorch notebook (eval/pytorch/UG.ipynb)."""
    noise = _cube_noise(x, radius, n_samples, seed)
    target = torch.as_tensor(target, device=x.device).long()
    _, g_prob = _ug_draws(model, x.detach(), target, noise)
    return g_prob * (x.detach() + noise[-1])


def _cube_noise(x, radius, n_samples, seed):
    if isinstance(n_samples, bool) or int(n_samples) != n_samples or n_samples < 1:
        raise ValueError(f"n_samples must be an integer >= 1, got {n_samples!r}")
    if not float(radius) > 0:
        raise ValueError(f"radius must be > 0, got {radius!r}")
    gen = torch.Generator().manual_seed(int(seed))
    u = torch.rand((int(n_samples), *x.shape), generator=gen, dtype=x.dtype)
    return ((2 * u - 1) * float(radius)).to(x.device)


def ug_reading_overlap(model: nn.Module, x: torch.Tensor, *, k: int, radius: float,
                       n_samples: int, seed: int = 0) -> pd.DataFrame:
    """How far the Keras reading of UG (:func:`uniform_grad_keras`) is from ours, per image:
    the top-``k`` overlap (:func:`robattr.metrics.topk_intersection`, ``|.|`` summed over
    channels, fraction of k) of our map (logit gradient × ``x``) with the Keras map, and with
    each of its two changes alone (softmax probability × ``x``; logit × last noisy copy),
    all from the same noise draws and the model's predicted class. Columns ``image``,
    ``reading``, ``overlap``."""
    from robattr.metrics import topk_intersection

    x = x.detach()
    with torch.no_grad():
        target = model(x).argmax(1)
    noise = _cube_noise(x, radius, n_samples, seed)
    g_logit, g_prob = _ug_draws(model, x, target, noise)
    last = x + noise[-1]
    ours = g_logit * x
    readings = {"softmax × last noisy copy (Keras)": g_prob * last,
                "softmax × x": g_prob * x, "logit × last noisy copy": g_logit * last}
    rows = []
    for name, m in readings.items():
        ov = topk_intersection(ours, m, k, reduce="abs_sum").cpu().tolist()
        rows += [dict(image=i, reading=name, overlap=v) for i, v in enumerate(ov)]
    return pd.DataFrame(rows)


# --------------------------------------------------------------------------- Tables 5 and 6
def table56_run(*, imagenet_dir: str, natural_weights: str, robust_weights: str,
                echo=print) -> dict | None:
    """The ImageNet run of Tables 5 and 6 (C3, C4: ResNet-50s, 224×224, k = 1000, ImageNet's
    noise levels of :data:`TABLE2_BLOCKS`), as a :func:`table2_runs` run with
    ``robust_weights`` added, when the folder and both weights files are here (a naturally
    trained ResNet-50 for Table 6 and Table 5's natural row; an ℓ∞ 8/255 adversarially trained
    one for Table 5). Else None, and ``echo`` gets one line saying what is missing."""
    from robattr.blocks import IMAGENET_HINT, Block, missing

    what = (f"{IMAGENET_HINT}; a naturally trained ResNet-50 (imagenet_weights) and an l-inf "
            "8/255 adversarially trained one (robust_weights), e.g. MadryLab robustness's")
    spec = TABLE2_BLOCKS["ImageNet"]
    why = missing(Block("ImageNet", imagenet_dir, size=spec["size"], splits=("val",),
                        weights=natural_weights, what=what))
    if why is None and not (robust_weights and os.path.isfile(os.path.expanduser(robust_weights))):
        why = (f"skipped ImageNet: robust weights file {'not found: ' + robust_weights if robust_weights else 'not given'}"
               f" ({what})")
    if why is not None:
        if echo is not None:
            echo(why)
        return None
    return dict(label="ImageNet", dataset=imagenet_dir, size=spec["size"], k=spec["k"],
                sg_noise=spec["sg_noise"], ug_radius=spec["ug_radius"], split="val",
                weights=natural_weights, robust_weights=robust_weights)


def table5_models(run: dict | None, models: dict, device) -> dict:
    """Table 5's two models, ``Natural`` and ``AT``: with an ImageNet ``run``
    (:func:`table56_run`) the natural and the robust pretrained ResNet-50s; else those of
    ``models``, the zoo's (:func:`robattr.chapters.wang2020.specs.table5_6_figs`: cross-entropy
    and Madry's ℓ∞ PGD training)."""
    from robattr.blocks import pretrained

    if run is not None:
        return {"Natural": pretrained("resnet50", run["dataset"], run["weights"], device=device),
                "AT": pretrained("resnet50", run["dataset"], run["robust_weights"], device=device)}
    return {"Natural": models["Natural"], "AT": models["AT"]}


# --------------------------------------------------------------------------- Table 3's cost
def _timing_losses(models: dict, losses) -> dict:
    """Each model's training loss: ``losses[name]`` (a loss name, a ``(name, hparams)`` pair
    or a :class:`robattr.train.Loss`) where given, else the model's zoo configuration."""
    from robattr.train import make_loss

    losses = {} if losses is None else dict(losses)
    unknown = sorted(set(losses) - set(models))
    if unknown:
        raise ValueError(f"losses names {unknown}, which are not among the models {list(models)}")
    out = {}
    for name, model in models.items():
        spec = losses.get(name)
        if spec is None:
            cfg = (getattr(model, "zoo_meta", None) or {}).get("config")
            if not cfg:
                raise ValueError(f"model {name!r} has no zoo configuration: give its loss in losses=")
            out[name] = make_loss(cfg["method"], **cfg["loss"])
        elif isinstance(spec, tuple):
            out[name] = make_loss(spec[0], **dict(spec[1]))
        else:
            out[name] = make_loss(spec)
    return out


def interleaved_step_seconds(models: dict, x: torch.Tensor, y: torch.Tensor, *, batch_size: int,
                             rounds: int = 5, seed: int = 0, losses: dict | None = None,
                             clock=None) -> dict[str, np.ndarray]:
    """Seconds of one training step (the loss, then its backward pass) of each model's own
    loss, timed fresh in this process, on the same batches, the methods interleaved.

    ``models``: ``{name: model}``; each loss is the model's zoo configuration
    (``model.zoo_meta["config"]``) unless ``losses[name]`` gives it (a loss name, a
    ``(name, hparams)`` pair or a :class:`robattr.train.Loss`). Every one of ``rounds``
    rounds draws one batch of ``batch_size`` examples of ``(x, y)`` (seeded by ``seed``) and
    times one step of every model on that batch, in the models' order on even rounds and in
    the reverse order on odd ones, so a change of the machine's load between rounds reaches
    every method alike. Each model steps on its own copy in train mode (the models are not
    touched; no optimiser step, which costs the same for every loss of one architecture),
    after one untimed warm-up step on the first batch. ``clock`` defaults to wall time
    around a ``torch.cuda.synchronize`` on CUDA and to the process's CPU time
    (``time.process_time``: what this process computed, not how long other processes kept
    the CPU) elsewhere.

    Returns ``{name: array of rounds seconds}``, paired by round: their spread over the
    rounds is the timing noise a verdict needs. At one batch size the ratio of two methods'
    step times is the ratio of their epoch times.
    """
    import copy
    import time

    if not hasattr(models, "items") or not models:
        raise ValueError("models must be a non-empty mapping name -> model")
    for name, m in models.items():
        if not isinstance(m, nn.Module):
            raise TypeError(f"models[{name!r}] is not a torch module: {type(m).__name__}")
    for label, v in (("batch_size", batch_size), ("rounds", rounds)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{label} must be an integer >= 1, got {v!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    if not (torch.is_tensor(x) and torch.is_tensor(y)) or x.ndim < 2 or y.ndim != 1 \
            or len(x) != len(y) or len(x) == 0:
        raise ValueError("x must be a batch of inputs and y their labels (1-D), of the same "
                         f"non-zero length; got shapes {tuple(getattr(x, 'shape', ()))} and "
                         f"{tuple(getattr(y, 'shape', ()))}")
    if batch_size > len(x):
        raise ValueError(f"batch_size {batch_size} is larger than the {len(x)} examples given")
    loss_fns = _timing_losses(models, losses)
    copies = {name: copy.deepcopy(m).train() for name, m in models.items()}
    devices = {name: next(iter(m.parameters()), x).device for name, m in copies.items()}
    cuda = any(d.type == "cuda" for d in devices.values())
    if clock is None:
        clock = time.perf_counter if cuda else time.process_time

    def sync():
        if cuda:
            torch.cuda.synchronize()

    def step(name, xb, yb):
        m = copies[name]
        xb, yb = xb.to(devices[name]), yb.to(devices[name])
        sync()
        t0 = clock()
        value, _ = loss_fns[name](m, xb, yb)
        value.backward()
        sync()
        seconds = clock() - t0
        m.zero_grad(set_to_none=True)
        return seconds

    g = torch.Generator().manual_seed(int(seed))
    batches = [torch.randperm(len(x), generator=g)[:batch_size].to(x.device) for _ in range(rounds)]
    names = list(models)
    for name in names:                                   # warm-up: caches, allocator, lazy init
        step(name, x[batches[0]], y[batches[0]])
    times = {name: np.empty(rounds) for name in names}
    for r, idx in enumerate(batches):
        xb, yb = x[idx], y[idx]
        for name in (names if r % 2 == 0 else names[::-1]):
            times[name][r] = step(name, xb, yb)
    return times
