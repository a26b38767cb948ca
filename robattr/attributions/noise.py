"""Noise samplers of the smoothing methods, exposed so the book can check them.

Each returns ``n`` draws shaped ``(n, *x.shape)``, one perturbation per input per draw,
in ``x``'s dtype and device. Draws are made one copy of the batch at a time, so the
stream of random numbers (and hence every result) does not depend on how the draws are
later chunked.
"""
from __future__ import annotations

import torch

from ._core import (check_count, check_input, check_positive, make_generator, per_input,
                    rand, randn, value_range)

__all__ = ["gaussian_noise", "cube_noise", "ball_noise"]


def _draws(n, x, generator, seed, one):
    n = check_count("n_samples", n)
    x = check_input(x)
    gen = make_generator(x, generator, seed)
    return torch.stack([one(x, gen) for _ in range(n)])


def gaussian_noise(x: torch.Tensor, n: int, *, sigma=None, noise_ratio: float = 0.1,
                   generator=None, seed=None) -> torch.Tensor:
    """N(0, sigma^2 I) with ``sigma = noise_ratio * (max - min)`` of each input (000, 004),
    or the given ``sigma`` (a number)."""
    s = gaussian_sigma(x, sigma, noise_ratio)
    return _draws(n, x, generator, seed, lambda x, g: gaussian_one(x, s, g))


def gaussian_sigma(x: torch.Tensor, sigma, noise_ratio) -> torch.Tensor:
    if sigma is not None:
        return torch.as_tensor(check_positive("sigma", sigma), dtype=x.dtype, device=x.device)
    ratio = check_positive("noise_ratio", noise_ratio)
    return per_input(ratio * value_range(x), x)


def cube_noise(x: torch.Tensor, n: int, *, radius: float, generator=None,
               seed=None) -> torch.Tensor:
    """Uniform in the l-inf cube ``[-radius, radius]^d``, coordinate by coordinate (000's
    Uniform Gradient)."""
    r = check_positive("radius", radius)
    return _draws(n, x, generator, seed, lambda x, g: cube_one(x, r, g))


def ball_noise(x: torch.Tensor, n: int, *, r: float, generator=None,
               seed=None) -> torch.Tensor:
    """Uniform in the l2 ball ``B(0; r)`` of dimension ``d = x[0].numel()`` (002), sampled
    exactly: a Gaussian direction ``g / ||g||`` times the radius ``r U^(1/d)``,
    ``U ~ U[0, 1)``. Hence ``(||eta|| / r)^d`` is U[0, 1): mean 1/2."""
    r = check_positive("r", r)
    return _draws(n, x, generator, seed, lambda x, g: ball_one(x, r, g))


# one copy of the batch each: the smoothing methods draw through these, copy by copy
def gaussian_one(x, sigma, gen):
    return sigma * randn(x.shape, x, gen)


def cube_one(x, r, gen):
    return r * (2 * rand(x.shape, x, gen) - 1)


def ball_one(x, r, gen):
    d = x[0].numel()
    direction = randn(x.shape, x, gen)
    norms = direction.flatten(1).norm(dim=1)
    radius = r * rand((x.shape[0],), x, gen) ** (1.0 / d)
    return direction * per_input(radius / norms, x)
