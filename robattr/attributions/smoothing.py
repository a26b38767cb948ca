"""Noise-averaged attributions: SmoothGrad, Uniform Gradient, l2-ball smoothing.

All three are ``mean_j base(x + eta_j)`` over ``n_samples`` perturbations ``eta_j``; they
differ in the noise (Gaussian, uniform in an l-inf cube, uniform in an l2 ball) and, for
ball smoothing, in the base attribution. Perturbed copies of the batch are evaluated
``batch_size`` rows at a time (whole copies, at least one), so memory stays bounded.

Randomness: ``seed=`` (a fresh generator on ``x``'s device), ``generator=`` (any
``torch.Generator``; a CPU one gives the same draws on every device), or neither (torch's
global generator). Draws are made one copy of the batch at a time, so the result does not
depend on ``batch_size``. ``noise=`` injects the perturbations themselves, shaped
``(n_samples, *x.shape)`` (used by the tests to compare with Captum on the same noise).

With ``create_graph=True`` the result is differentiable w.r.t. ``x`` with the noise held
fixed (the noise scale computed from ``x``, e.g. SmoothGrad's ``sigma``, is detached).
"""
from __future__ import annotations

import torch
from torch import nn

from ._core import (check_count, check_input, check_model, check_positive, make_generator,
                    resolve_target, chunks)
from .gradient import grad
from .noise import ball_one, cube_one, gaussian_one, gaussian_sigma

__all__ = ["smoothgrad", "uniform_grad", "ball_smooth", "ball_smoothed", "noise_average"]


def noise_average(model: nn.Module, x: torch.Tensor, target, base, draw, *,
                  n_samples=None, noise=None, batch_size: int | None = None, generator=None,
                  seed=None, create_graph: bool = False) -> torch.Tensor:
    """``mean_j base(model, x + eta_j, target)``: the engine of the methods below.

    ``draw(x, generator)`` returns one perturbation shaped like ``x``; ``noise`` (shaped
    ``(n, *x.shape)``) replaces the draws. ``base`` is any method with the standard call
    shape; bind its options with :func:`functools.partial`.
    """
    check_model(model)
    x = check_input(x)
    if not callable(base):
        raise ValueError(f"base must be an attribution method, got {base!r}")
    if noise is not None:
        if not isinstance(noise, torch.Tensor) or noise.shape[1:] != x.shape \
                or noise.ndim != x.ndim + 1:
            raise ValueError(f"noise must be a tensor shaped (n_samples, *x.shape) = "
                             f"(n, {', '.join(map(str, x.shape))}), got "
                             f"{getattr(noise, 'shape', type(noise).__name__)}")
        if n_samples is not None and check_count("n_samples", n_samples) != noise.shape[0]:
            raise ValueError(f"n_samples={n_samples} but noise holds {noise.shape[0]} draws")
        n_samples = noise.shape[0]
        noise = noise.to(device=x.device, dtype=x.dtype)
    n = check_count("n_samples", 50 if n_samples is None else n_samples)
    target = resolve_target(model, x, target)
    gen = make_generator(x, generator, seed)
    xx = x if create_graph else x.detach()
    total = torch.zeros_like(x)
    for s, ks in chunks(batch_size, model, x, n, kind=f"noise:{base!r}", create_graph=create_graph):
        if noise is not None:
            eta = noise[s:s + ks]
        else:
            eta = torch.stack([draw(x, gen) for _ in range(ks)])
        xs = (xx.unsqueeze(0) + eta).reshape((ks * x.shape[0],) + x.shape[1:])
        a = base(model, xs, target.repeat(ks), create_graph=create_graph)
        total = total + a.reshape((ks,) + x.shape).sum(0)
    return total / n


def smoothgrad(model: nn.Module, x: torch.Tensor, target=None, *, n_samples=None,
               noise_ratio: float = 0.1, sigma=None, multiply_by_input: bool = False,
               noise=None, batch_size: int | None = None, generator=None, seed=None,
               create_graph: bool = False) -> torch.Tensor:
    """SmoothGrad (Smilkov et al., 2017): the mean gradient over Gaussian perturbations.

    ``sigma = noise_ratio * (max - min)`` of each input (000: ratio 0.1 on CIFAR and
    Flower, 0.2 on ImageNet), or the given ``sigma``; ``n_samples`` draws (default 50).
    000 (Prop. 1) reads it as the gradient of the Gaussian-smoothed model ``f * q``.
    ``multiply_by_input=True`` returns ``x * mean grad``, 000's attack setting.
    """
    x = check_input(x)
    s = gaussian_sigma(x, sigma, noise_ratio)
    a = noise_average(model, x, target, grad, lambda x, g: gaussian_one(x, s, g),
                      n_samples=n_samples, noise=noise, batch_size=batch_size,
                      generator=generator, seed=seed, create_graph=create_graph)
    return (x if create_graph else x.detach()) * a if multiply_by_input else a


def uniform_grad(model: nn.Module, x: torch.Tensor, target=None, *, radius: float = 4 / 255,
                 n_samples=None, multiply_by_input: bool = False, noise=None,
                 batch_size: int | None = None, generator=None, seed=None,
                 create_graph: bool = False) -> torch.Tensor:
    """Uniform Gradient (000, Sec. 5): the mean gradient over noise drawn uniformly from
    the l-inf cube ``[-radius, radius]^d`` (each coordinate independently).

    000 uses ``radius = 4`` on the 0-255 scale for CIFAR and Flower (our default,
    ``4/255`` in pixel units) and ``0.2 * (max - min)`` for ImageNet, 50 samples
    (``n_samples``, default 50). ``multiply_by_input=True`` returns ``x * mean grad``.
    """
    x = check_input(x)
    r = check_positive("radius", radius)
    a = noise_average(model, x, target, grad, lambda x, g: cube_one(x, r, g),
                      n_samples=n_samples, noise=noise, batch_size=batch_size,
                      generator=generator, seed=seed, create_graph=create_graph)
    return (x if create_graph else x.detach()) * a if multiply_by_input else a


def ball_smooth(model: nn.Module, x: torch.Tensor, target=None, *, r: float, base=grad,
                n_samples=None, noise=None, batch_size: int | None = None, generator=None,
                seed=None, create_graph: bool = False) -> torch.Tensor:
    """Uniform l2-ball smoothing of any attribution (002): ``E_{eta ~ U(B(0; r))} base(x + eta)``.

    The expectation is estimated with ``n_samples`` exact draws (default 50): a Gaussian
    direction times the radius ``r U^(1/d)`` (see :func:`robattr.attributions.ball_noise`).
    ``base`` is any method with the standard call shape (default :func:`grad`); bind its
    options with ``functools.partial``, e.g. ``base=partial(integrated_gradients, steps=20)``
    (002 smooths IG). To get a smoothed *method* to pass around (to an attack, a metric,
    or another smoother), use :func:`ball_smoothed`.
    """
    x = check_input(x)
    r = check_positive("r", r)
    return noise_average(model, x, target, base, lambda x, g: ball_one(x, r, g),
                         n_samples=n_samples, noise=noise, batch_size=batch_size,
                         generator=generator, seed=seed, create_graph=create_graph)


def ball_smoothed(base=grad, *, r: float, n_samples=None, **options):
    """The method ``ball_smooth(..., base=base, r=r, n_samples=n_samples, **options)``.

    It has the standard call shape ``method(model, x, target, *, create_graph=False,
    **more)`` (``more`` overrides ``options``), so it composes: it can be the base of
    another smoother, or be handed to an attack that expects an attribution method::

        ug_ig = ball_smoothed(partial(integrated_gradients, steps=20), r=0.5, seed=0)
        attr = ug_ig(model, x, y)

    A ``generator`` given to the method at call time (attacks pass theirs, so that a
    seeded attack is reproducible) replaces a ``seed`` bound here.
    """
    check_positive("r", r)
    if n_samples is not None:
        check_count("n_samples", n_samples)
    if not callable(base):
        raise ValueError(f"base must be an attribution method, got {base!r}")
    bound = dict(options, r=r, n_samples=n_samples, base=base)

    def method(model, x, target=None, *, create_graph: bool = False, generator=None, **more):
        opts = {**bound, **more}
        if generator is not None:        # a caller's generator (an attack's) replaces a bound seed
            opts.pop("seed", None)
            opts["generator"] = generator
        return ball_smooth(model, x, target, create_graph=create_graph, **opts)

    name = getattr(base, "__name__", None) or getattr(getattr(base, "func", None),
                                                      "__name__", repr(base))
    method.__name__ = method.__qualname__ = f"ball_smoothed({name}, r={r})"
    method.__doc__ = ball_smoothed.__doc__
    return method

