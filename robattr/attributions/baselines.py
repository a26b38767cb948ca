"""004's non-differentiable baselines, in the standard call shape: Grad-CAM and DeepLIFT
(wrapping Captum) and the meaningful-perturbation mask (Fong & Vedaldi, 2017)."""
from __future__ import annotations

import contextlib
import math
import warnings

import torch
from torch import nn
from torch.nn import functional as F

from ._core import (check_count, check_input, check_like, check_model, check_nonnegative,
                    check_positive, num_classes, refuse_graph, resolve_target, select)

__all__ = ["grad_cam", "deeplift", "meaningful_perturbation", "last_conv"]


@contextlib.contextmanager
def _quiet_captum():
    """Captum warns at import (no ipywidgets for tqdm) and on every call (it sets
    requires_grad, adds hooks); none of it concerns our callers."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        warnings.filterwarnings("ignore", category=UserWarning, module=r"captum(\.|$)")
        yield


def _need_image(x, name):
    if x.ndim != 4:
        raise ValueError(f"{name} needs image inputs N x C x H x W, got x of shape {tuple(x.shape)}")


def last_conv(model: nn.Module) -> nn.Module:
    """The last ``nn.Conv2d`` in ``model.modules()`` order."""
    convs = [m for m in model.modules() if isinstance(m, nn.Conv2d)]
    if not convs:
        raise ValueError("grad_cam needs a convolutional layer; the model has no nn.Conv2d "
                         "(pass layer=...)")
    return convs[-1]


def resolve_layer(model: nn.Module, layer) -> nn.Module:
    """``layer`` as a module of ``model``: None (the last ``nn.Conv2d``), a submodule name,
    or the module itself."""
    if layer is None:
        return last_conv(model)
    if isinstance(layer, str):
        try:
            return model.get_submodule(layer)
        except AttributeError as e:
            raise ValueError(f"layer {layer!r} is not a submodule of the model") from e
    if not isinstance(layer, nn.Module):
        raise ValueError(f"layer must be a module, a module name or None, got {layer!r}")
    return layer


def grad_cam(model: nn.Module, x: torch.Tensor, target=None, *, layer=None, relu: bool = True,
             create_graph: bool = False) -> torch.Tensor:
    """Grad-CAM (Selvaraju et al., 2017) via Captum's ``LayerGradCam``.

    ``layer``: a module of ``model``, its name (``"net.layers.3"``), or None for the last
    ``nn.Conv2d`` (its output, before any activation). The class map
    ``relu(sum_k mean(dy/dA_k) A_k)`` is upsampled bilinearly to H x W and copied into
    every channel, so the result is shaped like ``x`` (``reduce_channels(a, "mean")``
    gives the map back). 004 rescales it with :func:`minmax_normalize`.
    Not differentiable here (``create_graph=True`` raises).
    """
    refuse_graph(create_graph, "grad_cam", "it wraps Captum, which does not keep the graph")
    check_model(model)
    x = check_input(x)
    _need_image(x, "grad_cam")
    with _quiet_captum():
        from captum.attr import LayerAttribution, LayerGradCam

    layer = resolve_layer(model, layer)
    target = resolve_target(model, x, target, num_classes(model, x))
    x = x.detach()
    with _quiet_captum():
        cam = LayerGradCam(model, layer).attribute(x, target=target, relu_attributions=relu)
    if cam.ndim != 4:
        raise ValueError(f"grad_cam needs a layer with N x C x h x w output, got {tuple(cam.shape)}")
    cam = LayerAttribution.interpolate(cam.sum(1, keepdim=True), tuple(x.shape[2:]), "bilinear")
    return cam.detach().repeat(1, x.shape[1], 1, 1)


def deeplift(model: nn.Module, x: torch.Tensor, target=None, *, baseline=None,
             create_graph: bool = False) -> torch.Tensor:
    """DeepLIFT, Rescale rule (Shrikumar et al., 2017), via Captum's ``DeepLift``.

    Baseline zero (black) unless given. Attributions sum to ``f(x) - f(baseline)``.
    Activations must be distinct, non-inplace modules (true of every robattr model).
    Not differentiable here (``create_graph=True`` raises).
    """
    refuse_graph(create_graph, "deeplift", "it wraps Captum, which does not keep the graph")
    check_model(model)
    x = check_input(x)
    with _quiet_captum():
        from captum.attr import DeepLift

    target = resolve_target(model, x, target, num_classes(model, x))
    b = torch.zeros_like(x) if baseline is None else check_like("baseline", baseline, x)
    with _quiet_captum():
        out = DeepLift(model).attribute(x.detach().clone(), baselines=b.detach().contiguous(),
                                        target=target)
    return out.detach()


def _blur(x: torch.Tensor, sigma: float) -> torch.Tensor:
    """Separable Gaussian blur with replicated borders."""
    radius = max(1, int(math.ceil(3 * sigma)))
    t = torch.arange(-radius, radius + 1, dtype=x.dtype, device=x.device)
    k = torch.exp(-0.5 * (t / sigma) ** 2)
    k = k / k.sum()
    c = x.shape[1]
    y = F.pad(x, (radius, radius, radius, radius), mode="replicate")
    y = F.conv2d(y, k.reshape(1, 1, 1, -1).repeat(c, 1, 1, 1), groups=c)
    return F.conv2d(y, k.reshape(1, 1, -1, 1).repeat(c, 1, 1, 1), groups=c)


def _tv(m: torch.Tensor, beta: float) -> torch.Tensor:
    dh = (m[..., 1:, :] - m[..., :-1, :]).abs().pow(beta).flatten(1).sum(1)
    dw = (m[..., :, 1:] - m[..., :, :-1]).abs().pow(beta).flatten(1).sum(1)
    return dh + dw


def meaningful_perturbation(model: nn.Module, x: torch.Tensor, target=None, *,
                            iterations: int = 300, lr: float = 0.1, l1: float = 1e-4,
                            tv: float = 1e-2, tv_beta: float = 3.0, mask_size: int = 28,
                            blur_sigma=None, create_graph: bool = False) -> torch.Tensor:
    """Meaningful perturbation (Fong & Vedaldi, ICCV 2017; 004's "MASK" baseline).

    A ``mask_size`` x ``mask_size`` mask ``m`` in [0, 1] (1 = keep), upsampled to the
    image, blends the image with its Gaussian blur, ``m x + (1 - m) blur(x)``; Adam
    (``lr``, ``iterations``) minimises ``l1 ||1 - m||_1 + tv TV_beta(m) + p_t(blend)``,
    the smallest deletion that kills the target's softmax probability. Defaults are the
    paper's (lambda1 1e-4, lambda2 1e-2, beta 3, 300 iterations, lr 0.1, sigma 10 at
    224 px; ``blur_sigma`` scales with the image as ``10 H / 224`` unless given), without
    its noise jitter. Returns the deletion map ``1 - m`` at image size, copied into every
    channel. Not differentiable (``create_graph=True`` raises).
    """
    refuse_graph(create_graph, "meaningful_perturbation", "it returns the end point of an "
                 "optimisation")
    check_model(model)
    x = check_input(x).detach()
    _need_image(x, "meaningful_perturbation")
    iterations, mask_size = check_count("iterations", iterations), check_count("mask_size", mask_size)
    lr, tv_beta = check_positive("lr", lr), check_positive("tv_beta", tv_beta)
    l1, tv = check_nonnegative("l1", l1), check_nonnegative("tv", tv)
    sigma = check_positive("blur_sigma", 10 * x.shape[2] / 224 if blur_sigma is None else blur_sigma)
    target = resolve_target(model, x, target, num_classes(model, x))
    size = (min(mask_size, x.shape[2]), min(mask_size, x.shape[3]))
    blurred = _blur(x, sigma)
    m = torch.ones((x.shape[0], 1) + size, dtype=x.dtype, device=x.device, requires_grad=True)
    opt = torch.optim.Adam([m], lr=lr)
    for _ in range(iterations):
        with torch.enable_grad():
            up = F.interpolate(m, size=tuple(x.shape[2:]), mode="bilinear", align_corners=False)
            blend = up * x + (1 - up) * blurred
            p = select(F.softmax(model(blend), dim=1), target)
            loss = (l1 * (1 - m).abs().flatten(1).sum(1) + tv * _tv(m, tv_beta) + p).sum()
            opt.zero_grad()
            loss.backward(inputs=[m])
        opt.step()
        with torch.no_grad():
            m.clamp_(0, 1)
    with torch.no_grad():
        up = F.interpolate(m, size=tuple(x.shape[2:]), mode="bilinear", align_corners=False)
    return (1 - up).detach().repeat(1, x.shape[1], 1, 1)
