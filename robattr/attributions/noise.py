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

__all__ = ["gaussian_noise", "cube_noise", "ball_noise", "ball_noise_numpy", "random_l2_shift"]


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


def ball_noise_numpy(n: int, d: int, r: float, rng):
    """``n`` points uniform in the l2 ball ``B(0; r)`` of ``R^d``, as a NumPy array ``(n, d)``
    drawn from the NumPy generator ``rng`` (the synthetic checks of 002 work in NumPy; the
    same law as :func:`ball_noise`): a Gaussian direction ``g / ||g||`` times ``r U^(1/d)``.
    ``rng`` is called twice, ``standard_normal((n, d))`` then ``random((n, 1))``."""
    import numpy as np

    for name, v in (("n", n), ("d", d)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    r = check_positive("r", r)
    if not isinstance(rng, np.random.Generator):
        raise ValueError(f"rng must be a numpy.random.Generator, got {rng!r}")
    u = rng.standard_normal((n, d))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    return u * r * rng.random((n, 1)) ** (1.0 / d)


def random_l2_shift(x: torch.Tensor, dist, *, seed: int) -> torch.Tensor:
    """``x`` moved by ``dist`` (a number or one per input) in a uniformly random direction
    per input: ``x + dist * u / ||u||``, ``u`` Gaussian drawn on the CPU from a generator
    seeded with ``seed`` (so the shift is the same on every device). No clamping to the
    pixel range: the shift's norm is exactly ``dist``. The random-noise guard of an attack
    at the same distance."""
    x = check_input(x)
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an integer >= 0, got {seed!r}")
    dist = torch.as_tensor(dist, dtype=x.dtype, device=x.device)
    if dist.ndim > 1 or (dist.ndim == 1 and dist.shape[0] != x.shape[0]) or (dist < 0).any():
        raise ValueError("dist must be a number >= 0 or one number >= 0 per input")
    u = torch.randn(x.shape, generator=torch.Generator().manual_seed(seed)).to(x.device)
    u = u / per_input(u.flatten(1).norm(dim=1), x)
    return x + u * per_input(dist.expand(x.shape[0]), x)


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
