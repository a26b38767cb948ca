"""Comparisons of training methods with several trained models per method.

A paper that reports the mean of several training runs per method (003 Table 1: three)
claims something about the *methods*, so the book trains as many models per method and
lets both sources of noise into the interval: which models the seeds gave, and which
images were evaluated. :func:`gap_seeded` is that rule; with one model per method the book
falls back on :func:`robattr.report.verdicts.beyond_seeds` (a difference set against the
seed-to-seed spread of the cheapest method).
"""
from __future__ import annotations

import math

import numpy as np

from robattr.report.verdicts.rules import Verdict, _difference, _fmt, _past, _signed

__all__ = ["gap_seeded"]


def _table(name: str, v) -> np.ndarray:
    arr = np.asarray(v.detach().cpu() if hasattr(v, "detach") else v, dtype=float)
    if arr.ndim != 2 or min(arr.shape) < 1:
        raise ValueError(f"{name} must be one row of per-image values per seed (2-D), got "
                         f"shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} holds non-finite values")
    return arr


def _seed_image_means(x: np.ndarray, seeds: np.ndarray, images: np.ndarray) -> np.ndarray:
    """For each resample r: the mean of ``x`` over the seeds ``seeds[r]`` and the images
    ``images[r]`` (a seed drawn twice counts twice)."""
    per_seed = np.stack([x[s][images].mean(-1) for s in range(x.shape[0])])  # seeds x boot
    return np.take_along_axis(per_seed, seeds.T, axis=0).mean(0)


def gap_seeded(a, b, *, margin: float = 0.0, higher_is_better: bool = True,
               level: float = 0.95, what: str = "a − b", unit: str = "images",
               n_boot: int = 4000, seed: int = 0, chunk: int = 500) -> Verdict:
    """"Method A is better than method B" (``margin`` 0), or "A is as good as B or better"
    (``margin`` > 0: worse by less than the margin still counts, a non-inferiority test),
    from several trained models per method: ``a[s, i]`` is the value of A's model of seed
    ``s`` on image ``i``, ``b[t, i]`` B's on the same images. The statistic is the
    difference of the grand means. Its interval is a two-level percentile bootstrap: each
    resample draws A's seeds and B's seeds with replacement, and the images with
    replacement (one draw for both methods, which keeps the pairing by image), so that the
    interval carries the seed-to-seed noise as well as the images'. Entirely above
    ``-margin`` (above 0 without a margin) → holds; entirely below it → does not hold;
    otherwise inconclusive. Each method needs two seeds or more (one seed has no seed
    noise to measure)."""
    a, b = _table("a", a), _table("b", b)
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"a and b must hold the same images, got {a.shape[1]} and {b.shape[1]}")
    if min(a.shape[0], b.shape[0]) < 2:
        raise ValueError(f"each method needs 2 seeds or more, got {a.shape[0]} and {b.shape[0]}")
    if not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 0):
        raise ValueError(f"margin must be a finite number >= 0, got {margin!r}")
    if not 0 < level < 1:
        raise ValueError(f"level must be in (0, 1), got {level!r}")
    sign = 1.0 if higher_is_better else -1.0
    diff = sign * (a.mean() - b.mean())
    rng = np.random.default_rng(seed)
    n = a.shape[1]
    boots = []
    for start in range(0, n_boot, chunk):
        k = min(chunk, n_boot - start)
        images = rng.integers(0, n, size=(k, n))
        sa = rng.integers(0, a.shape[0], size=(k, a.shape[0]))
        sb = rng.integers(0, b.shape[0], size=(k, b.shape[0]))
        boots.append(sign * (_seed_image_means(a, sa, images) - _seed_image_means(b, sb, images)))
    lo, hi = np.quantile(np.concatenate(boots), [(1 - level) / 2, (1 + level) / 2])
    where = _difference(what, diff, lo, hi, higher_is_better, level,
                        f"{a.shape[0]} and {b.shape[0]} seeds × {n} {unit} (seeds and {unit} "
                        "resampled)")
    if lo > -margin:
        return Verdict("holds", f"{where}: {_past(-margin, higher_is_better)}"
                       + (", the margin of comparable" if margin else ""))
    if hi < -margin:
        return Verdict("does not hold", f"{where}: " + (f"worse by more than the margin "
                                                        f"{_fmt(margin)}" if margin else
                                                        "the other way"))
    edge = _signed(-margin if higher_is_better else margin)
    return Verdict("inconclusive", f"{where}: the interval holds "
                   + (f"{edge}, the margin of comparable" if margin else "no effect"))
