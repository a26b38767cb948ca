"""RelEx (004): a saliency mask learned on noisy copies of the input."""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from robattr import precision as _precision

from ._core import (check_count, check_input, check_model, check_nonnegative, check_positive,
                    make_generator, per_input, rand, randn, refuse_graph, resolve_target,
                    chunks, select, value_range)

__all__ = ["relex", "relex_loss", "input_normalization", "MASKINGS", "grad_cam_graph"]

#: How :func:`relex` removes an input entry: ``"pixel"`` multiplies the [0, 1] pixels (a
#: removed pixel is black), ``"normalized"`` multiplies the normalised input, as 004's code
#: does (a removed pixel is the dataset mean).
MASKINGS = ("pixel", "normalized")


def relex_loss(model: nn.Module, m: torch.Tensor, xs: torch.Tensor, target: torch.Tensor, *,
               lambda1: float = 1e-4, lambda2: float = 1.0, eps: float = 1e-7,
               fill: torch.Tensor | None = None) -> torch.Tensor:
    """Per-row RelEx objective (004, Eq. 9-11) for masks ``m`` and inputs ``xs`` (same shape):

    ``-log p_t(m * x) + lambda1 ||m||_1 - lambda2 log(1 - p_t((1 - m) * x) + eps)``.

    The first term is Eq. 9 (keep the class with the mask), the second Eq. 10's
    sparsity, the third Eq. 11's B (the complement must *not* show the class), with
    004's code's ``eps = 1e-7`` inside the log. ``p_t`` is the softmax probability of
    the target class.

    ``fill`` (broadcastable to ``xs``) is the value a removed entry takes: the masked
    inputs are then ``fill + m * (x - fill)`` and ``fill + (1 - m) * (x - fill)``. None
    (default) is 0, i.e. ``m * x`` (black pixels); the per-channel dataset mean is 004's
    code's convention (see :func:`relex`, ``masking="normalized"``).
    """
    if fill is None:
        rows = torch.cat([m * xs, (1 - m) * xs])
    else:
        centred = xs - fill
        rows = torch.cat([fill + m * centred, fill + (1 - m) * centred])
    logits = model(rows)                                     # one pass for both terms
    if logits.dtype in (torch.float16, torch.bfloat16):    # autocast: the loss in fp32
        logits = logits.float()
    keep = F.log_softmax(logits[:len(xs)], dim=1)
    drop = F.softmax(logits[len(xs):], dim=1)
    fore = -select(keep, target)
    back = -torch.log(1 - select(drop, target, check=False) + eps)
    return fore + lambda1 * m.abs().flatten(1).sum(1) + lambda2 * back


def input_normalization(model: nn.Module, x: torch.Tensor, norm=None):
    """The per-channel ``(mean, std)`` of ``model``'s input normalisation, as tensors that
    broadcast against ``x`` (dtype and device of ``x``).

    ``norm``: an explicit ``(mean, std)`` pair (one value per channel, or one for all);
    None (default) reads the first :class:`robattr.models.Normalize` layer of ``model``
    (every robattr model has one as its first layer). Raises ``ValueError`` when there is
    none, or when a value does not fit ``x``'s channels or a ``std`` is not positive.
    """
    if norm is None:
        from robattr.models import Normalize

        layer = next((mod for mod in model.modules() if isinstance(mod, Normalize)), None)
        if layer is None:
            raise ValueError("masking='normalized' needs the input normalisation: the model has no "
                             "robattr.models.Normalize layer, so pass norm=(mean, std)")
        mean, std = layer.mean, layer.std
    else:
        try:
            mean, std = norm
        except (TypeError, ValueError):
            raise ValueError(f"norm must be a (mean, std) pair, got {norm!r}") from None
    shape = (1, -1) + (1,) * (x.ndim - 2)
    out = []
    for name, v in (("mean", mean), ("std", std)):
        v = torch.as_tensor(v, dtype=x.dtype).flatten().to(x.device)
        if v.numel() not in (1, x.shape[1]) or not bool(torch.isfinite(v).all()):
            raise ValueError(f"the normalisation's {name} needs 1 or {x.shape[1]} finite values "
                             f"(x has {x.shape[1]} channels), got {v.tolist()}")
        out.append(v.reshape(shape))
    if not bool((out[1] > 0).all()):
        raise ValueError(f"the normalisation's std must be > 0, got {out[1].flatten().tolist()}")
    return out[0], out[1]


def relex(model: nn.Module, x: torch.Tensor, target=None, *, n_noisy: int = 50,
          noise_ratio: float = 0.1, epochs: int = 50, lr: float = 0.1, momentum: float = 0.99,
          lambda1: float = 1e-4, lambda2: float = 1.0, batch: bool = True,
          init: float = 0.01, masking: str = "pixel", norm=None, batch_size: int | None = None,
          generator=None, seed=None, snapshots=None, precision: str | None = None,
          create_graph: bool = False):
    """RelEx (Lim, Lee & Kim, CVPR 2021; paper 004): the mask minimising Eq. 11.

    For each input a mask ``m`` of the input's full shape starts ``U(0, init)``
    (``init = 0.01``). Each of ``epochs`` steps draws ``n_noisy`` fresh copies
    ``x~ = x + N(0, sigma^2)``, ``sigma = noise_ratio (max - min)`` of that input, averages
    :func:`relex_loss` over them, rescales the mask's gradient to unit l2 norm (per
    input), takes an SGD step (learning rate ``lr``, heavy-ball ``momentum``), and clamps
    ``m`` to [0, 1]. ``batch=False`` is the paper's "without the batch" variant: one
    noise-free copy. Several inputs are optimised at once, each with its own mask and
    step. Returns the mask, shaped like ``x``.

    Defaults follow 004's released code (50 copies, 50 iterations, lr 0.1, momentum 0.99,
    lambda1 1e-4, lambda2 1); its supplement states 100 copies and plain SGD with lr 0.001.
    Keep the model in eval mode (BatchNorm in train mode would couple the copies).

    ``masking`` (one of :data:`MASKINGS`) says what a removed entry becomes.
    ``"pixel"`` (default): the mask multiplies the [0, 1] pixels, so a removed pixel is
    black, and ``sigma`` is ``noise_ratio`` times the pixel range of the input.
    ``"normalized"``: 004's code, whose network takes the normalised image
    ``z = (x - mean) / std`` and whose mask and noise act on ``z``: the masked inputs are
    ``m * (z + n)`` and ``(1 - m) * (z + n)``, ``n ~ N(0, s^2)``, ``s = noise_ratio
    (max z - min z)`` per input. In pixels (what robattr models take) that is
    ``mean + m * (x + std * n - mean)``: a removed pixel is the dataset mean, and the noise
    has standard deviation ``std * s`` in each channel. ``mean`` and ``std`` come from the
    model's :class:`robattr.models.Normalize` layer, or from ``norm=(mean, std)``
    (:func:`input_normalization`). With ``mean = 0, std = 1`` both maskings agree.

    ``snapshots``: a sequence of epoch counts (each in ``1..epochs``); the call then returns
    the list of masks after those many epochs, in the given order, from one run (e.g.
    004's 50- and 100-epoch variants with ``epochs=100, snapshots=(50, 100)``).
    ``batch_size`` bounds the rows (images x copies) of one forward pass (each row is
    evaluated twice, masked and complemented, in one pass); None (default) is
    device-aware (:func:`robattr.attributions.chunk_rows`).

    ``precision``: the arithmetic of the mask optimisation, one of
    :data:`robattr.precision.MODES`; None (default) is the mode in force (full fp32
    unless the user chose otherwise, see :mod:`robattr.precision`). ``"bf16"`` runs the
    model under bfloat16 autocast on CUDA (the mask, its gradient and the step stay
    fp32): several times faster on a recent GPU, and ``benchmarks/relex.py`` measures
    how far its masks are from the fp32 masks. A model and input in channels-last
    memory format (``model.to(memory_format=torch.channels_last)``) are kept in it.

    Not differentiable w.r.t. ``x``: the result is the end point of an optimisation, whose
    derivative would need unrolling every step; ``create_graph=True`` raises
    :class:`NotDifferentiableError`.
    """
    refuse_graph(create_graph, "relex", "it returns the end point of an optimisation")
    check_model(model)
    x = check_input(x).detach()
    epochs, n_noisy = check_count("epochs", epochs), check_count("n_noisy", n_noisy)
    lr = check_positive("lr", lr)
    momentum = check_nonnegative("momentum", momentum)
    init = check_nonnegative("init", init)
    lambda1, lambda2 = check_nonnegative("lambda1", lambda1), check_nonnegative("lambda2", lambda2)
    noise_ratio = check_positive("noise_ratio", noise_ratio)
    if masking not in MASKINGS:
        raise ValueError(f"masking must be one of {MASKINGS}, got {masking!r}")
    if masking == "pixel":
        fill = None
        sigma = per_input(noise_ratio * value_range(x), x)
    else:                                    # 004's code: mask and noise on z = (x - mean) / std
        fill, std = input_normalization(model, x, norm)
        sigma = per_input(noise_ratio * value_range((x - fill) / std), x) * std
    target = resolve_target(model, x, target)
    gen = make_generator(x, generator, seed)
    copies = n_noisy if batch else 1
    if batch_size is not None:
        check_count("batch_size", batch_size)
    if precision is not None:
        _precision.check(precision)
    if snapshots is not None:
        try:
            snaps = [int(e) for e in snapshots]
        except (TypeError, ValueError):
            raise ValueError(f"snapshots must be a sequence of epoch counts, got {snapshots!r}") from None
        if not snaps or any(e < 1 or e > epochs or e != s_ for e, s_ in zip(snaps, snapshots)):
            raise ValueError(f"snapshots must be integers in 1..epochs={epochs}, got {snapshots!r}")
        kept = {}
    mode = _precision.get() if precision is None else precision
    channels_last = x.ndim == 4 and not x.is_contiguous() \
        and x.is_contiguous(memory_format=torch.channels_last)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    m = (init * rand(x.shape, x, gen)).contiguous(memory_format=fmt)
    velocity = torch.zeros_like(m)
    with _precision.scope(mode):
        for epoch in range(epochs):
            g = torch.zeros_like(m)
            for s, ks in chunks(batch_size, model, x, copies, kind="relex"):
                xs = x.unsqueeze(0).expand((ks,) + x.shape)
                if batch:
                    xs = xs + torch.stack([sigma * randn(x.shape, x, gen) for _ in range(ks)])
                xs = xs.reshape((ks * x.shape[0],) + x.shape[1:]).contiguous(memory_format=fmt)
                mm = m.detach().requires_grad_(True)
                with torch.enable_grad():
                    rows = mm.unsqueeze(0).expand((ks,) + x.shape).reshape(xs.shape).contiguous(memory_format=fmt)
                    loss = relex_loss(model, rows, xs, target.repeat(ks), lambda1=lambda1,
                                      lambda2=lambda2, fill=fill).sum() / copies
                    (gm,) = torch.autograd.grad(loss, mm)
                g = g + gm
            norm = g.flatten(1).norm(dim=1).clamp_min(torch.finfo(x.dtype).tiny)
            g = g / per_input(norm, x)
            velocity = momentum * velocity + g
            m = (m - lr * velocity).clamp(0, 1)
            if snapshots is not None and epoch + 1 in snaps:
                kept[epoch + 1] = m.clone()
    if snapshots is not None:
        return [kept[e] for e in snaps]
    return m


def grad_cam_graph(model: nn.Module, x: torch.Tensor, target=None, *, layer=None,
                   relu: bool = True, create_graph: bool = False) -> torch.Tensor:
    """Grad-CAM (Selvaraju et al., 2017) in plain autograd, differentiable w.r.t. ``x``.

    The same map as :func:`robattr.attributions.grad_cam` (which wraps Captum and drops the
    graph): with ``A`` the output of ``layer`` (default: the last ``nn.Conv2d``) and ``y`` the
    target logit, ``relu(sum_k mean_hw(dy/dA_k) A_k)``, upsampled bilinearly to H x W and
    copied into every channel. With ``create_graph=True`` the result keeps its graph, so an
    attack can descend through it (004's targeted attacks on Grad-CAM, Fig. 4 / Table S2).
    """
    from .baselines import resolve_layer

    check_model(model)
    x = check_input(x)
    if x.ndim != 4:
        raise ValueError(f"grad_cam_graph needs images N x C x H x W, got {tuple(x.shape)}")
    layer = resolve_layer(model, layer)
    target = resolve_target(model, x, target)
    store = []
    handle = layer.register_forward_hook(lambda mod, inp, out: store.append(out))
    try:
        with torch.enable_grad():
            xin = x if (create_graph and x.requires_grad) else x.detach().requires_grad_(True)
            logits = model(xin)
            if len(store) != 1 or store[0].ndim != 4:
                raise ValueError("grad_cam_graph needs a layer called once with N x C x h x w output")
            act = store[0]
            (g,) = torch.autograd.grad(select(logits, target).sum(), act, create_graph=create_graph)
            cam = (g.mean((2, 3), keepdim=True) * act).sum(1, keepdim=True)
            if relu:
                cam = F.relu(cam)
            cam = F.interpolate(cam, size=tuple(x.shape[2:]), mode="bilinear", align_corners=False)
    finally:
        handle.remove()
    cam = cam.repeat(1, x.shape[1], 1, 1)
    return cam if create_graph else cam.detach()
