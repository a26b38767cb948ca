"""Similarity between two batches of attribution maps, one value per example.

Every function takes two batch-first tensors of the same shape (N×D, N×H×W or
N×C×H×W) and returns a tensor of N values. The core functions compare the maps as
flat vectors; ``reduce`` first turns each map into one score per feature, as the
papers do (``"abs_sum"``: ``|a|`` summed over channels, see
:func:`robattr.metrics.reduce_channels`).

Degenerate inputs never give NaN; their values are fixed by convention:

* cosine similarity with a zero map is 0 (distance 1, or 1/2 with ``half=True``);
* Pearson / Spearman / Kendall with a constant map (or a single feature) is 0;
* ties are ranked by average ranks (Spearman, as scipy) and handled by tau-b (Kendall);
* the mass centre of a zero map is the image centre;
* top-k ties are broken by the lower flat index (a stable sort), the mass of a zero
  map is 0.
"""
from __future__ import annotations

import math

import torch

from robattr.utils import check_int

from ._common import Reduce, check_batch, check_pair, reduce_channels

__all__ = [
    "topk_intersection", "spearman", "kendall", "pearson", "cosine_similarity",
    "cosine_distance", "cosine_angle", "ssim", "mass_center", "center_dislocation",
    "average_ranks",
]


def _flat_pair(a, b, reduce: Reduce) -> tuple[torch.Tensor, torch.Tensor]:
    a, b = check_pair(a, b)
    a, b = reduce_channels(a, reduce), reduce_channels(b, reduce)
    return a.reshape(a.shape[0], -1), b.reshape(b.shape[0], -1)


def _safe_cos(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Row-wise cosine of N×D tensors; 0 where either row is zero; finite gradients.

    Each row is first divided by its (detached) max-abs value; cosine is invariant to
    that, so values and gradients are unchanged, but every non-zero row then has a
    norm >= 1 and the denominator can be clamped at 1 without changing any value.
    A zero row gives 0 / 1 = 0, with a bounded gradient.
    """
    sa = a.detach().abs().amax(dim=1, keepdim=True)
    sb = b.detach().abs().amax(dim=1, keepdim=True)
    a = a / torch.where(sa > 0, sa, torch.ones_like(sa))
    b = b / torch.where(sb > 0, sb, torch.ones_like(sb))
    num = (a * b).sum(dim=1)
    den = ((a * a).sum(dim=1) * (b * b).sum(dim=1)).clamp_min(1.0).sqrt()
    return (num / den).clamp(-1.0, 1.0)


def _center(a: torch.Tensor) -> torch.Tensor:
    """Row-centred N×D tensor; rows that are exactly constant become exactly zero."""
    const = a.amax(dim=1) == a.amin(dim=1)
    return (a - a.mean(dim=1, keepdim=True)).masked_fill(const[:, None], 0.0)


def cosine_similarity(a, b, *, reduce: Reduce = None) -> torch.Tensor:
    """Cosine similarity ``<a, b> / (|a| |b|)`` per example, in [-1, 1].

    003's RPS similarity and 002's evaluation metric. Differentiable (attacks and the
    l2 + cosd regulariser use it); a zero map gives 0 and finite gradients.
    """
    a, b = _flat_pair(a, b, reduce)
    return _safe_cos(a, b)


def cosine_distance(a, b, *, half: bool = False, reduce: Reduce = None) -> torch.Tensor:
    """Cosine distance per example: ``1 - cos`` (000's "cosd", in [0, 2]) or, with
    ``half=True``, ``(1 - cos) / 2`` (003's cosine robust criterion and regulariser,
    in [0, 1]). Differentiable; a zero map gives cos = 0, i.e. 1 (or 1/2)."""
    d = 1.0 - cosine_similarity(a, b, reduce=reduce)
    return d / 2 if half else d


def cosine_angle(a, b, *, degrees: bool = True, reduce: Reduce = None) -> torch.Tensor:
    """Angle ``arccos(cos(a, b))`` per example, in degrees by default, as 001 and 002
    report cosine deviations. Not differentiable at identical maps (use
    :func:`cosine_distance` in losses)."""
    ang = torch.arccos(cosine_similarity(a, b, reduce=reduce))
    return torch.rad2deg(ang) if degrees else ang


def pearson(a, b, *, reduce: Reduce = None) -> torch.Tensor:
    """Pearson correlation (003's PCC) per example, in [-1, 1]; matches
    ``scipy.stats.pearsonr``. A constant map gives 0. Differentiable."""
    a, b = _flat_pair(a, b, reduce)
    return _safe_cos(_center(a), _center(b))


def average_ranks(a: torch.Tensor) -> torch.Tensor:
    """Ranks 1..D of each row of an N×D tensor, ties given their average rank
    (``scipy.stats.rankdata(method="average")``)."""
    n, d = a.shape
    vals, idx = torch.sort(a, dim=1, stable=True)
    pos = torch.arange(d, device=a.device).expand(n, d)
    starts = torch.ones_like(vals, dtype=torch.bool)
    starts[:, 1:] = vals[:, 1:] != vals[:, :-1]
    ends = torch.ones_like(starts)
    ends[:, :-1] = starts[:, 1:]
    first = torch.where(starts, pos, torch.zeros_like(pos)).cummax(dim=1).values
    last = torch.where(ends, pos, torch.full_like(pos, d - 1)).flip(1).cummin(dim=1).values.flip(1)
    avg = (first + last).to(torch.float64 if a.dtype == torch.float64 else torch.float32) / 2 + 1
    return torch.empty_like(avg).scatter_(1, idx, avg)


def spearman(a, b, *, reduce: Reduce = None) -> torch.Tensor:
    """Spearman's rank correlation per example (000's "cor", 004's similarity): the
    Pearson correlation of average ranks, as ``scipy.stats.spearmanr``. A constant map
    gives 0. Not differentiable (ranks)."""
    a, b = _flat_pair(a, b, reduce)
    ra, rb = average_ranks(a.detach()), average_ranks(b.detach())
    return _safe_cos(_center(ra), _center(rb)).to(a.dtype)


KENDALL_VARIANTS = ("tau_b", "concordant")


def kendall(a, b, *, variant: str = "tau_b", reduce: Reduce = None,
            chunk_elems: int = 1 << 22) -> torch.Tensor:
    """Kendall's rank correlation per example.

    ``variant="tau_b"`` (default): tau-b, as ``scipy.stats.kendalltau``; in [-1, 1].
    ``variant="concordant"``: the fraction of the ``D (D - 1) / 2`` feature pairs that
    are ordered the same way (strictly) in both maps, in [0, 1] -- the "proportion of
    pairs of features that have the same order" by which 002 (App. B.2) defines its
    "Kendall's rank correlation". Without ties it equals ``(tau + 1) / 2``; a pair tied
    in either map counts as not concordant.

    A constant map (or D = 1) gives tau-b = 0 and concordant fraction 0. Exact O(D^2)
    pair counting, chunked so that a chunk holds at most ``chunk_elems`` pair signs.
    Not differentiable.
    """
    if variant not in KENDALL_VARIANTS:
        raise ValueError(f"variant must be one of {KENDALL_VARIANTS}, got {variant!r}")
    check_int("chunk_elems", chunk_elems)
    a, b = _flat_pair(a, b, reduce)
    a, b = a.detach(), b.detach()
    n, d = a.shape
    s = torch.zeros(n, dtype=torch.int64, device=a.device)   # sum sign(da) sign(db)
    m = torch.zeros_like(s)                                  # pairs untied in both
    ua = torch.zeros_like(s)                                 # pairs untied in a
    ub = torch.zeros_like(s)                                 # pairs untied in b
    step = max(1, chunk_elems // max(1, n * d))
    for i in range(0, d, step):
        sa = torch.sign(a[:, i:i + step, None] - a[:, None, :]).to(torch.int8)
        sb = torch.sign(b[:, i:i + step, None] - b[:, None, :]).to(torch.int8)
        prod = sa * sb
        s += prod.sum(dim=(1, 2))
        m += (prod != 0).sum(dim=(1, 2))
        ua += (sa != 0).sum(dim=(1, 2))
        ub += (sb != 0).sum(dim=(1, 2))
    # every count is over ordered pairs (i, j), i != j: twice the unordered count
    dt = torch.float64
    if variant == "tau_b":
        den = (ua.to(dt) * ub.to(dt)).sqrt()
        tau = torch.where(den > 0, s.to(dt) / torch.where(den > 0, den, torch.ones_like(den)),
                          torch.zeros_like(den))
        return tau.clamp(-1, 1).to(a.dtype)
    if d < 2:
        return torch.zeros(n, dtype=a.dtype, device=a.device)
    concordant = (m + s).to(dt) / 4                         # unordered concordant pairs
    return (concordant / (d * (d - 1) / 2)).to(a.dtype)


TOPK_VARIANTS = ("fraction", "mass")


def topk_intersection(a, b, k: int, *, variant: str = "fraction",
                      reduce: Reduce = None) -> torch.Tensor:
    """Top-k intersection per example.

    ``variant="fraction"``: ``|K(a) ∩ K(b)| / k`` with ``K(.)`` the indices of the k
    largest values -- what 000's and 004's released code compute (``np.intersect1d``
    of the two top-k sets over k), and 002's "proportion of k largest features that
    overlap". Symmetric in a and b; 1 for identical maps.

    ``variant="mass"``: ``sum_{i in K(a)} n(b)_i`` with ``n(b) = |b| / sum|b|``, the
    formula printed in 000's App. C1 (a is the original map, b the perturbed one). Not
    symmetric, and for ``b = a`` it is the share of a's mass in its own top k, not 1.
    It is differentiable in ``b`` (K(a) is fixed), which makes it a top-k attack loss.
    A zero ``b`` gives 0.

    Values are ranked as given: pass ``reduce="abs_sum"`` for 000's setting (``|.|``
    summed over channels). Ties are broken by the lower flat index.
    """
    if variant not in TOPK_VARIANTS:
        raise ValueError(f"variant must be one of {TOPK_VARIANTS}, got {variant!r}")
    a, b = _flat_pair(a, b, reduce)
    d = a.shape[1]
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= d:
        raise ValueError(f"k must be an int in [1, {d}] (the number of features), got {k!r}")
    top_a = torch.sort(a.detach(), dim=1, descending=True, stable=True).indices[:, :k]
    if variant == "mass":
        mass = b.abs()
        total = mass.sum(dim=1, keepdim=True)
        nb = torch.where(total > 0, mass / torch.where(total > 0, total, torch.ones_like(total)),
                         torch.zeros_like(mass))
        return nb.gather(1, top_a).sum(dim=1)
    top_b = torch.sort(b.detach(), dim=1, descending=True, stable=True).indices[:, :k]
    in_a = torch.zeros_like(a, dtype=torch.bool).scatter_(1, top_a, True)
    return in_a.gather(1, top_b).sum(dim=1).to(a.dtype) / k


def _band(g: torch.Tensor, size: int) -> torch.Tensor:
    """(size - len(g) + 1) × size matrix whose row i holds g at columns i .. i+len(g)-1."""
    k = g.numel()
    rows = size - k + 1
    idx = torch.arange(rows, device=g.device)[:, None] + torch.arange(k, device=g.device)
    return torch.zeros(rows, size, dtype=g.dtype, device=g.device).scatter_(1, idx, g.expand(rows, k))


def _images(a: torch.Tensor, name: str) -> torch.Tensor:
    """N×H×W or N×C×H×W → (N·C)×H×W."""
    if a.ndim == 3:
        return a
    if a.ndim == 4:
        return a.reshape(-1, *a.shape[2:])
    raise ValueError(f"{name} must be N×H×W or N×C×H×W maps, got shape {tuple(a.shape)}")


def ssim(a, b, *, data_range, gaussian: bool = False, win_size: int | None = None,
         sigma: float = 1.5, K1: float = 0.01, K2: float = 0.03,
         use_sample_covariance: bool = True, reduce: Reduce = None) -> torch.Tensor:
    """Mean structural similarity per example, as ``skimage.metrics.structural_similarity``.

    The defaults are skimage's: a 7×7 uniform window, sample covariance, K1 = 0.01,
    K2 = 0.03, mean of the SSIM map over the pixels whose window fits in the image.
    ``gaussian=True`` uses skimage's Gaussian weights (sigma 1.5, an 11×11 window);
    with ``use_sample_covariance=False`` that is Wang et al. (2004). ``data_range``
    (the value range of the maps: a float, or one value per example) must be given, as
    skimage requires for float images. Maps are N×H×W, or N×C×H×W whose per-channel
    SSIMs are averaged (skimage's ``channel_axis``). Both sides at least ``win_size``.
    Differentiable. Note that 003's released code uses a different SSIM (7×7 Gaussian
    window, zero padding, constants from the first map's range).
    """
    a, b = check_pair(a, b)
    a, b = reduce_channels(a, reduce), reduce_channels(b, reduce)
    n = a.shape[0]
    x, y = _images(a, "a"), _images(b, "b")
    c = x.shape[0] // n
    h, w = x.shape[-2:]
    if not (isinstance(sigma, (int, float)) and math.isfinite(sigma) and sigma > 0):
        raise ValueError(f"sigma must be a finite float > 0, got {sigma!r}")
    if not all(isinstance(k, (int, float)) and math.isfinite(k) and k >= 0 for k in (K1, K2)):
        raise ValueError(f"K1 and K2 must be finite floats >= 0, got {K1!r}, {K2!r}")
    if gaussian:
        r = int(3.5 * sigma + 0.5)
        if win_size is not None and win_size != 2 * r + 1:
            raise ValueError(f"win_size must be None or {2 * r + 1} (the Gaussian filter size "
                             f"for sigma={sigma}) when gaussian=True, got {win_size!r}")
        win_size = 2 * r + 1
    elif win_size is None:
        win_size = 7
    if isinstance(win_size, bool) or not isinstance(win_size, int) or win_size < 3 \
            or win_size % 2 == 0:
        raise ValueError(f"win_size must be an odd int >= 3, got {win_size!r}")
    if win_size > min(h, w):
        raise ValueError(f"win_size ({win_size}) exceeds the map size {h}×{w}")
    rng = torch.as_tensor(data_range, dtype=x.dtype, device=x.device)
    if rng.ndim == 0:
        rng = rng.expand(n)
    if rng.shape != (n,) or not bool(torch.isfinite(rng).all()) or not bool((rng > 0).all()):
        raise ValueError(f"data_range must be a finite float > 0 or one such value per example, "
                         f"got {data_range!r}")
    if gaussian:
        t = torch.arange(-r, r + 1, dtype=x.dtype, device=x.device)
        g = torch.exp(-(t * t) / (2 * sigma * sigma))
        g = g / g.sum()
    else:
        g = torch.full((win_size,), 1.0 / win_size, dtype=x.dtype, device=x.device)
    npix = win_size ** 2
    cov_norm = npix / (npix - 1) if use_sample_covariance else 1.0
    # the 2-D window is separable: a "valid" filter is band_h @ z @ band_w^T, which only
    # uses pixels inside the image -- exactly skimage's filter after its edge crop
    band_h, band_w = _band(g, h), _band(g, w)

    def filt(z):
        return band_h @ z @ band_w.T

    ux, uy = filt(x), filt(y)
    vx = cov_norm * (filt(x * x) - ux * ux)
    vy = cov_norm * (filt(y * y) - uy * uy)
    vxy = cov_norm * (filt(x * y) - ux * uy)
    rr = rng.repeat_interleave(c)[:, None, None]
    c1, c2 = (K1 * rr) ** 2, (K2 * rr) ** 2
    s = ((2 * ux * uy + c1) * (2 * vxy + c2)) / ((ux * ux + uy * uy + c1) * (vx + vy + c2))
    return s.mean(dim=(1, 2)).reshape(n, c).mean(dim=1)


def mass_center(a, *, reduce: Reduce = "abs_sum") -> torch.Tensor:
    """Centre of mass (row, column), in pixels, of each map: N×2.

    The mass is ``|a|`` summed over channels (``reduce="abs_sum"``, 000's saliency);
    with ``reduce=None`` the maps must already be non-negative N×H×W (or N×1×H×W). A
    zero map has its centre at the image centre ``((H-1)/2, (W-1)/2)``.
    Differentiable in ``a`` (the mass-centre attack uses it).
    """
    a = check_batch(a, "a")
    if a.ndim not in (3, 4):
        raise ValueError(f"a must be N×H×W or N×C×H×W maps, got shape {tuple(a.shape)}")
    m = reduce_channels(a, reduce)
    if m.ndim == 4:
        if m.shape[1] != 1:
            raise ValueError(f"with reduce={reduce!r} the maps must be N×H×W or N×1×H×W, got "
                             f"shape {tuple(m.shape)}")
        m = m[:, 0]
    if m.ndim != 3:
        raise ValueError(f"reduce must leave N×H×W maps, got shape {tuple(m.shape)}")
    h, w = m.shape[-2:]
    rows = torch.arange(h, dtype=m.dtype, device=m.device)[:, None]
    cols = torch.arange(w, dtype=m.dtype, device=m.device)[None, :]
    total = m.sum(dim=(1, 2))
    ok = total > 0
    safe = torch.where(ok, total, torch.ones_like(total))
    r = (m * rows).sum(dim=(1, 2)) / safe
    cc = (m * cols).sum(dim=(1, 2)) / safe
    r = torch.where(ok, r, torch.full_like(r, (h - 1) / 2))
    cc = torch.where(ok, cc, torch.full_like(cc, (w - 1) / 2))
    return torch.stack([r, cc], dim=1)


def center_dislocation(a, b, *, reduce: Reduce = "abs_sum") -> torch.Tensor:
    """000's mass-centre dislocation ("cdl"), per example: the Euclidean (l2) distance, in
    pixels, between the centres of mass of the two maps.

    Each map's mass is ``|a|`` summed over the channels (``reduce="abs_sum"``, 000's
    saliency of a gradient × input map; ``reduce=None``: the maps as given, non-negative
    N×H×W). Its centre is the mass-weighted mean (row, column) pixel index
    (:func:`mass_center`), so the scale of a map does not matter, and the distance between
    the two centres is ``sqrt(Δrow² + Δcol²)`` in pixels: 0 for maps with the same centre, at
    most the image diagonal. 000's tables use it through :func:`robattr.attack_protocol.metrics_wang2020`
    (the clean and the attacked map of one method). 000's App. C1 prints the formula as
    ``sum_i |z_i - z'_i|``, an l1 distance between the maps, not between their centres; its
    released code computes the centre distance above (eval/keras_v1/utils.py and
    eval/pytorch; the Keras version truncates each centre to integers first, the PyTorch one
    does not, nor do we). Differentiable except where the centres coincide (gradient 0 there)."""
    a, b = check_pair(a, b)
    d = mass_center(a, reduce=reduce) - mass_center(b, reduce=reduce)
    sq = (d * d).sum(dim=1)
    pos = sq > 0   # sqrt has an infinite slope at 0: keep the gradient finite there
    return torch.where(pos, torch.where(pos, sq, torch.ones_like(sq)).sqrt(), torch.zeros_like(sq))
