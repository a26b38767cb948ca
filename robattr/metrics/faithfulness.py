"""Faithfulness and robustness scores that query the model: 003's insertion,
Adv-Insertion and random perturbation similarity (RPS); 004's deletion, preservation,
feature relevance R and target-class retrieval.

Conventions (the papers' released code settles what their texts leave open):

* Features are removed or inserted per pixel (all channels at once), ranked by the
  attribution reduced over channels (``rank_by="abs_sum"``: ``|a|`` summed over
  channels, as both codes do). Ties in the ranking go to the lower flat index.
* The score at each ratio is the softmax probability of ``target`` (``output="logit"``
  gives the logit). ``target=None`` means the model's predicted class on the clean
  ``x``: 004's convention. 003 uses the true label: pass it.
* The reference image defaults to zeros in pixel space (black). Both papers' codes
  feed normalised inputs, so their "zero" image is the dataset-mean colour: pass
  ``baseline="mean"`` (the mean of the model's :class:`robattr.models.Normalize` layer)
  to reproduce that, or ``protocol="robustaga"`` for 003's whole released protocol
  (:data:`PROTOCOLS`). A model without a Normalize layer is taken to receive normalised
  input already (mean 0, std 1).
* The forward passes of all (ratio, example) pairs run in chunks of ``batch_size``.
  Call ``model.eval()`` first; nothing here changes the model's mode.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import torch
from torch import nn

from robattr.attributions import resolve_target
from robattr.utils import check_eps, check_int

from ._common import Reduce, check_batch, normalize_map, reduce_channels
from .similarity import cosine_similarity

__all__ = [
    "Curve", "PROTOCOLS", "insertion", "insertion_inputs", "deletion", "preservation",
    "adv_insertion", "feature_relevance", "class_retrieval", "rps",
]

#: 003's Insertion / Adv-Insertion protocols by name: the ``baseline``, ``ratios`` and
#: ``ties`` that ``insertion(..., protocol=name)`` uses, and the ``clamp`` of :func:`rps`
#: that goes with them (``rps_clamp``).
#:
#: * ``"robattr"`` (the defaults): 003's text (Sec. "Insertion and Adv-Insertion game"):
#:   insertion into a zero-valued image at γ ∈ {0, 0.05, …, 1} (21 ratios), the zero read
#:   in pixel units (a black image); exactly
#:   ``floor(γ·P)`` pixels inserted, ties in the ranking going to the lower flat index.
#: * ``"robustaga"``: 003's released code (joshua840/RobustAGA, test_insertion.py and
#:   test_adv_insertion.py), which produced the paper's numbers: it masks the
#:   *normalised* input, so a missing pixel is the dataset-mean colour; 20 ratios
#:   i/20, i = 0..19 (γ = 1 is never evaluated); a pixel is inserted when its score is
#:   strictly above the score ranked ``floor(γ·P)`` (0-based, descending), so tied
#:   scores at the threshold stay out (an all-zero map inserts nothing).
#:
#: Both rank pixels by ``|h|`` summed over channels. RPS: ``"robattr"`` clamps the noisy
#: pixels to [0, 1], ``"robustaga"`` to the clean batch's range in normalised units
#: (``clamp="robustaga"``, see :func:`rps`).
PROTOCOLS: dict[str, dict] = {
    "robattr": {"baseline": None, "ratios": 20, "ties": "index", "rps_clamp": (0.0, 1.0)},
    "robustaga": {"baseline": "mean", "ratios": tuple(i / 20 for i in range(20)),
                  "ties": "strict", "rps_clamp": "robustaga"},
}


class Curve(NamedTuple):
    """A perturbation curve and its summaries.

    ``ratios`` (R,): fraction of pixels inserted / removed at each point.
    ``scores`` (N×R): target probability (or logit) at each ratio.
    ``auc`` (N,): trapezoid area over the ratio axis (004's deletion / preservation
    score; its code integrates over [0, 1] this way).
    ``mean`` (N,): plain mean over the ratios (003's Insertion; ×100 in its tables).
    """

    ratios: torch.Tensor
    scores: torch.Tensor
    auc: torch.Tensor
    mean: torch.Tensor


def _ratios(ratios, device, dtype) -> torch.Tensor:
    if isinstance(ratios, int) and not isinstance(ratios, bool):
        check_int("ratios", ratios)
        return torch.linspace(0.0, 1.0, ratios + 1, device=device, dtype=dtype)
    r = torch.as_tensor(ratios, device=device, dtype=dtype)
    if r.ndim != 1 or r.numel() == 0 or not bool(((r >= 0) & (r <= 1)).all()):
        raise ValueError(f"ratios must be a number of steps (int >= 1) or a 1-D sequence of "
                         f"values in [0, 1], got {ratios!r}")
    return r


def _pixel_scores(attribution, x: torch.Tensor, rank_by) -> tuple[torch.Tensor, tuple]:
    """One score per pixel (N×P) and the shape of the per-pixel mask (N, 1, H, W)."""
    a = check_batch(attribution, "attribution")
    if a.shape[0] != x.shape[0]:
        raise ValueError(f"attribution and x must have the same batch size, got "
                         f"{a.shape[0]} and {x.shape[0]}")
    if x.ndim == 4:
        n, c, h, w = x.shape
        if a.shape == x.shape:
            s = reduce_channels(a, rank_by)
        elif a.shape in ((n, h, w), (n, 1, h, w)):
            s = reduce_channels(a.reshape(n, 1, h, w), rank_by)
        else:
            raise ValueError(f"attribution must be shaped like x {tuple(x.shape)}, or N×H×W / "
                             f"N×1×H×W, got {tuple(a.shape)}")
        s = s.reshape(n, -1)
        if s.shape[1] != h * w:
            raise ValueError(f"rank_by must leave one score per pixel ({h * w}), got "
                             f"{s.shape[1]}")
        return s, (n, 1, h, w)
    if a.shape != x.shape:
        raise ValueError(f"attribution must be shaped like x {tuple(x.shape)}, got "
                         f"{tuple(a.shape)}")
    s = reduce_channels(a, rank_by).reshape(x.shape[0], -1)
    if s.shape[1] != x[0].numel():
        raise ValueError("rank_by must leave one score per feature")
    return s, tuple(x.shape)


def _normalization(model: nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) of the model's first :class:`robattr.models.Normalize` layer, on x's
    device and dtype; (0, 1) for a model without one."""
    from robattr.models import Normalize

    norm = next((m for m in model.modules() if isinstance(m, Normalize)), None)
    if norm is None:
        return x.new_zeros(()), x.new_ones(())
    return (norm.mean.to(device=x.device, dtype=x.dtype),
            norm.std.to(device=x.device, dtype=x.dtype))


def _baseline(baseline, x: torch.Tensor, model: nn.Module | None = None) -> torch.Tensor:
    if baseline is None:
        return torch.zeros_like(x)
    if isinstance(baseline, str):
        if baseline != "mean" or model is None:
            raise ValueError(f"baseline must be None, 'mean', a float or a tensor, got "
                             f"{baseline!r}")
        baseline = _normalization(model, x)[0]
    if isinstance(baseline, (int, float)) and not isinstance(baseline, bool):
        return torch.full_like(x, float(baseline))
    if not isinstance(baseline, torch.Tensor):
        raise ValueError(f"baseline must be None, 'mean', a float or a tensor, got "
                         f"{type(baseline).__name__}")
    try:
        return torch.broadcast_to(baseline.to(device=x.device, dtype=x.dtype), x.shape)
    except RuntimeError:
        raise ValueError(f"baseline of shape {tuple(baseline.shape)} does not broadcast to x "
                         f"{tuple(x.shape)}") from None


def _selector(scores: torch.Tensor, counts: torch.Tensor, descending: bool, ties: str):
    """``select(ni, ri)``: the B×P mask of the pixels changed for the (example ``ni``,
    ratio ``ri``) pairs. ``ties="index"``: exactly ``counts[ri]`` pixels, first in the
    ranking, ties going to the lower flat index. ``ties="strict"`` (descending only):
    the pixels whose score is strictly above the ``counts[ri]``-th largest (0-based), all
    pixels at ``counts == P`` (RobustAGA's threshold rule)."""
    n, p = scores.shape
    if ties == "strict":
        top = torch.sort(scores, dim=1, descending=True).values
        thr = top[:, counts.clamp(max=p - 1)]                          # N×R
        thr = thr.masked_fill((counts >= p)[None, :], float("-inf"))
        return lambda ni, ri: scores[ni] > thr[ni, ri][:, None]
    order = torch.sort(scores, dim=1, descending=descending, stable=True).indices
    rank = torch.empty_like(order).scatter_(
        1, order, torch.arange(p, device=scores.device).expand(n, p))
    return lambda ni, ri: rank[ni] < counts[ri][:, None]


def _check_ties(ties: str) -> None:
    if ties not in ("index", "strict"):
        raise ValueError(f"ties must be 'index' or 'strict', got {ties!r}")


def _protocol(protocol: str | None, baseline, ratios, ties) -> tuple:
    """(baseline, ratios, ties) after applying a named protocol of :data:`PROTOCOLS`."""
    if protocol is None:
        return baseline, (20 if ratios is None else ratios), ties
    if protocol not in PROTOCOLS:
        raise ValueError(f"protocol must be None or one of {', '.join(map(repr, PROTOCOLS))}, "
                         f"got {protocol!r}")
    if baseline is not None or ratios is not None or ties != "index":
        raise ValueError(f"protocol={protocol!r} sets baseline, ratios and ties; do not pass "
                         "them too")
    spec = PROTOCOLS[protocol]
    return spec["baseline"], spec["ratios"], spec["ties"]


def _counts(r: torch.Tensor, p: int) -> torch.Tensor:
    """Pixels changed at each ratio: ``floor(r · P)`` (a hair of slack against rounding)."""
    return torch.floor(r.double() * p + 1e-6).long().clamp(0, p)


def _curve(model, x, attribution, target, *, mode, baseline, ratios, rank_by, batch_size,
           output, ties="index") -> Curve:
    x = check_batch(x, "x")
    check_int("batch_size", batch_size)
    _check_ties(ties)
    if output not in ("prob", "logit"):
        raise ValueError(f"output must be 'prob' or 'logit', got {output!r}")
    x = x.detach()
    target = resolve_target(model, x, target)
    scores, mask_shape = _pixel_scores(attribution, x, rank_by)
    scores = scores.detach()
    base = _baseline(baseline, x, model)
    r = _ratios(ratios, x.device, x.dtype)
    n, p = scores.shape
    counts = _counts(r, p)
    select = _selector(scores, counts, mode != "preservation", ties)
    out = torch.empty(n, r.numel(), dtype=x.dtype, device=x.device)
    total = n * r.numel()
    with torch.no_grad():
        for start in range(0, total, batch_size):
            ids = torch.arange(start, min(start + batch_size, total), device=x.device)
            ri, ni = ids // n, ids % n
            chosen = select(ni, ri).reshape(ids.numel(), *mask_shape[1:])
            if mode == "insertion":
                xin = torch.where(chosen, x[ni], base[ni])
            else:
                xin = torch.where(chosen, base[ni], x[ni])
            logits = model(xin)
            vals = logits.softmax(dim=1) if output == "prob" else logits
            out[ni, ri] = vals.gather(1, target[ni][:, None])[:, 0].to(out.dtype)
    auc = torch.trapezoid(out, x=r, dim=1) if r.numel() > 1 else torch.zeros(n, dtype=out.dtype,
                                                                               device=out.device)
    return Curve(r, out, auc, out.mean(dim=1))


_CURVE_DOC = """
    ``attribution`` is shaped like ``x`` (N×C×H×W), or N×H×W / N×1×H×W; for flat
    inputs N×D it is N×D. ``ratios``: an int number of steps (``20`` gives 003's
    {0, 0.05, ..., 1}; ``224`` gives 004's 224-pixel steps on 224×224 images) or a
    sequence of fractions in [0, 1]; ratio r changes ``floor(r · P)`` of the P pixels.
    ``baseline``: None (zeros), ``"mean"`` (the model's Normalize mean: zero in
    normalised units), a float or a tensor broadcastable to ``x``.
    Returns a :class:`Curve` (ratios, N×R scores, auc, mean).
"""


def insertion(model: nn.Module, x: torch.Tensor, attribution, target=None, *, baseline=None,
              ratios: int | Sequence[float] | None = None, rank_by: Reduce = "abs_sum",
              ties: str = "index", protocol: str | None = None, batch_size: int = 256,
              output: str = "prob") -> Curve:
    """003's Insertion game: start from the baseline, insert the pixels of ``x`` in
    decreasing order of attribution; the score is the target probability. Ratio 0 is
    the baseline, ratio 1 is ``x``. 003 reports ``mean`` × 100 with the true label as
    target. Pixels are ranked by ``rank_by`` (default ``|h|`` summed over channels, as
    003's code); ``ratios=None`` means 20 steps (21 ratios, 0 to 1); ``ties``: ``"index"``
    (exactly ``floor(r·P)`` pixels, ties to the lower flat index) or ``"strict"``
    (RobustAGA's threshold rule, :data:`PROTOCOLS`). ``protocol`` (``"robattr"`` or
    ``"robustaga"``) sets ``baseline``, ``ratios`` and ``ties`` at once; pass either it
    or them. ``protocol="robustaga"`` is what produced 003's tables: a mean-colour
    baseline and 20 ratios, 0 to 0.95.
    """
    baseline, ratios, ties = _protocol(protocol, baseline, ratios, ties)
    return _curve(model, x, attribution, target, mode="insertion", baseline=baseline,
                  ratios=ratios, rank_by=rank_by, batch_size=batch_size, output=output,
                  ties=ties)


def insertion_inputs(model: nn.Module, x: torch.Tensor, attribution, ratio: float, *,
                     baseline=None, rank_by: Reduce = "abs_sum", ties: str = "index",
                     protocol: str | None = None) -> torch.Tensor:
    """The inputs :func:`insertion` feeds the model at one ``ratio`` in [0, 1] (the
    baseline with the top ``floor(ratio · P)`` pixels of ``x`` put back), shaped like
    ``x``: for showing what the game sees. Same ``baseline`` / ``ties`` / ``protocol``
    as :func:`insertion` (a protocol's own ratios are not used here)."""
    baseline, _, ties = _protocol(protocol, baseline, None, ties)
    _check_ties(ties)
    x = check_batch(x, "x").detach()
    scores, mask_shape = _pixel_scores(attribution, x, rank_by)
    r = _ratios([float(ratio)], x.device, x.dtype)
    n, p = scores.shape
    select = _selector(scores.detach(), _counts(r, p), True, ties)
    ni = torch.arange(n, device=x.device)
    chosen = select(ni, torch.zeros_like(ni)).reshape(n, *mask_shape[1:])
    return torch.where(chosen, x, _baseline(baseline, x, model))


def deletion(model: nn.Module, x: torch.Tensor, attribution, target=None, *, baseline=None,
             ratios: int | Sequence[float] = 20, rank_by: Reduce = "abs_sum",
             batch_size: int = 256, output: str = "prob") -> Curve:
    """004's deletion (pixel flipping): replace the pixels of ``x`` by the baseline in
    decreasing order of attribution; the score is ``auc`` of the target probability
    (lower is better). Ratio 0 is ``x``, ratio 1 the baseline."""
    return _curve(model, x, attribution, target, mode="deletion", baseline=baseline,
                  ratios=ratios, rank_by=rank_by, batch_size=batch_size, output=output)


def preservation(model: nn.Module, x: torch.Tensor, attribution, target=None, *,
                 baseline=None, ratios: int | Sequence[float] = 20,
                 rank_by: Reduce = "abs_sum", batch_size: int = 256,
                 output: str = "prob") -> Curve:
    """004's preservation: as :func:`deletion` but removing the *least* important
    pixels first (increasing order); the score is ``auc`` (higher is better)."""
    return _curve(model, x, attribution, target, mode="preservation", baseline=baseline,
                  ratios=ratios, rank_by=rank_by, batch_size=batch_size, output=output)


for _f in (insertion, deletion, preservation):
    _f.__doc__ += _CURVE_DOC


def adv_insertion(model: nn.Module, method: Callable, x: torch.Tensor, x_adv: torch.Tensor,
                  target=None, *, method_kwargs: dict | None = None, **insertion_kwargs) -> Curve:
    """003's Adv-Insertion: the insertion game on the clean ``x``, with the pixel order
    given by the attribution of the attacked input ``x_adv``
    (``method(model, x_adv, target)``). 003 uses the true label as target.
    ``insertion_kwargs`` go to :func:`insertion` (``protocol="robustaga"`` for the
    authors' released protocol, as in their test_adv_insertion.py)."""
    x = check_batch(x, "x")
    x_adv = check_batch(x_adv, "x_adv")
    if x.shape != x_adv.shape:
        raise ValueError(f"x and x_adv must have the same shape, got {tuple(x.shape)} and "
                         f"{tuple(x_adv.shape)}")
    target = resolve_target(model, x, target)
    attr = method(model, x_adv.detach(), target, **(method_kwargs or {})).detach()
    return insertion(model, x, attr, target, **insertion_kwargs)


def feature_relevance(preservation, deletion) -> torch.Tensor:
    """004's feature relevance R, the harmonic mean of P and 1 - D:
    ``1/R = (1/P + 1/(1-D)) / 2``, i.e. ``R = 2 P (1-D) / (P + 1 - D)``.

    Takes tensors or floats (per-example scores; 004's code computes R per example,
    then averages) or :class:`Curve` results (their ``auc``). R = 0 when P = 0 or D = 1.
    """
    p = preservation.auc if isinstance(preservation, Curve) else torch.as_tensor(preservation)
    d = deletion.auc if isinstance(deletion, Curve) else torch.as_tensor(deletion)
    if not p.is_floating_point():
        p = p.to(torch.get_default_dtype())
    p, d = torch.broadcast_tensors(p, d.to(device=p.device, dtype=p.dtype))
    q = 1 - d
    den = p + q
    ok = (p > 0) & (q > 0) & (den > 0)
    return torch.where(ok, 2 * p * q / torch.where(ok, den, torch.ones_like(den)),
                       torch.zeros_like(den))


def class_retrieval(model: nn.Module, x: torch.Tensor, mask, target, *,
                    normalize: str | None = "minmax", q: float = 1.0) -> torch.Tensor:
    """004's target-class retrieval: 1.0 where ``argmax f(m ⊙ x) == target``, else 0.0
    (per example; the mean is the retrieval rate).

    004 applies it to an attacked ``x`` with its own explanation ``m``, and ``target``
    the class of the clean image (its code: the model's prediction on the clean image).
    ``normalize="minmax"`` first turns the explanation into a [0, 1] pixel mask:
    ``|.|`` summed over channels, then min-max scaled per example with the ``q``-quantile
    as top (``q=0.99`` is the 99th-percentile scaling of 004's code); ``"max"`` divides
    by the max instead. ``normalize=None`` uses ``mask`` as given (e.g. a RelEx mask,
    already in [0, 1] and shaped like ``x``); it must broadcast to ``x``.
    """
    x = check_batch(x, "x").detach()
    mask = check_batch(mask, "mask").detach()
    if mask.shape[0] != x.shape[0]:
        raise ValueError(f"mask and x must have the same batch size, got {mask.shape[0]} and "
                         f"{x.shape[0]}")
    target = resolve_target(model, x, target)
    if normalize is not None:
        if normalize not in ("minmax", "max"):
            raise ValueError(f"normalize must be 'minmax', 'max' or None, got {normalize!r}")
        m = normalize_map(reduce_channels(mask, "abs_sum"), normalize, q=q)
        if x.ndim == 4 and m.ndim == 3:
            m = m[:, None]
    else:
        m = mask
    try:
        masked = x * m
    except RuntimeError:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to x "
                         f"{tuple(x.shape)}") from None
    if masked.shape != x.shape:
        raise ValueError(f"mask of shape {tuple(mask.shape)} does not broadcast to x "
                         f"{tuple(x.shape)}")
    with torch.no_grad():
        pred = model(masked).argmax(dim=1)
    return (pred == target).to(x.dtype)


def rps(model: nn.Module, method: Callable, x: torch.Tensor, target=None, eps: float = 16 / 255,
        n_samples: int = 10, *, similarity: Callable = cosine_similarity,
        reduce: Reduce = "abs_sum", generator: torch.Generator | None = None,
        clamp: tuple[float, float] | str | None = (0.0, 1.0), batch_size: int = 256,
        method_kwargs: dict | None = None, return_samples: bool = False) -> torch.Tensor:
    """003's random perturbation similarity: the mean over ``n_samples`` draws of
    ``delta ~ U[-eps, eps]^d`` of ``similarity(h(x + delta), h(x))``, per example.

    ``h = method(model, ., target)`` (``target=None``: predicted class; 003 uses the
    true label), reduced by ``reduce`` (default ``|.|`` summed over channels, as 003's
    code; a callable is applied to each attribution batch) before ``similarity(a, b)``,
    which returns N values (for SSIM pass e.g.
    ``lambda a, b: ssim(normalize_map(a), normalize_map(b), data_range=1.0)``).
    Perturbed inputs are clamped to ``clamp``: a (low, high) pixel range (default
    [0, 1]), None (no clamp), or ``"robustaga"``, 003's released code (test_rps.py): the
    perturbed *normalised* input is clamped to [min, max] of the clean normalised batch,
    one range over all images, channels and pixels of ``x`` (the authors' batches hold 100
    test images), i.e. channel c of the pixels to [μ_c + σ_c·min, μ_c + σ_c·max] with μ, σ
    of the model's Normalize layer: close to [0, 1] on a large batch, not equal to it.
    ``eps`` is in pixel units (003's Table 1: 16/255; RobustAGA draws ε/(255σ) in
    normalised units, the same noise). Draws come from ``generator`` in sample
    order, so results do not depend on ``batch_size``; the perturbed inputs of several
    samples are batched into one ``method`` call of up to ``batch_size`` inputs.
    Returns N values, or N×n_samples with ``return_samples=True``.
    """
    x = check_batch(x, "x").detach()
    eps = check_eps(eps)
    check_int("n_samples", n_samples)
    check_int("batch_size", batch_size)
    if isinstance(clamp, str):
        if clamp != "robustaga":
            raise ValueError(f"clamp must be None, 'robustaga' or a (low, high) pair, got "
                             f"{clamp!r}")
        mean, std = _normalization(model, x)
        xn = (x - mean) / std
        clamp = (mean + std * xn.min(), mean + std * xn.max())   # per channel, pixel units
    elif clamp is not None and (len(clamp) != 2 or not clamp[0] <= clamp[1]):
        raise ValueError(f"clamp must be None, 'robustaga' or a (low, high) pair with "
                         f"low <= high, got {clamp!r}")
    kwargs = method_kwargs or {}
    target = resolve_target(model, x, target)
    n = x.shape[0]

    def attribution(inp, tgt):
        return reduce_channels(method(model, inp, tgt, **kwargs).detach(), reduce)

    h0 = attribution(x, target)
    sims = torch.empty(n, n_samples, dtype=x.dtype, device=x.device)
    gen_device = generator.device if generator is not None else x.device
    pending: list[tuple[int, int, int, torch.Tensor]] = []   # (sample, start, stop, inputs)
    size = 0

    def flush():
        nonlocal pending, size
        if not pending:
            return
        inp = torch.cat([p[3] for p in pending])
        idx = torch.cat([torch.arange(p[1], p[2], device=x.device) for p in pending])
        h = attribution(inp, target[idx])
        vals = similarity(h, h0[idx])
        off = 0
        for s, a, b, _ in pending:
            sims[a:b, s] = vals[off:off + b - a].to(sims.dtype)
            off += b - a
        pending, size = [], 0

    for s in range(n_samples):
        u = torch.rand(x.shape, generator=generator, device=gen_device, dtype=x.dtype)
        xs = x + eps * (2 * u.to(x.device) - 1)
        if isinstance(clamp, tuple) and isinstance(clamp[0], torch.Tensor):
            xs = torch.minimum(torch.maximum(xs, clamp[0]), clamp[1])
        elif clamp is not None:
            xs = xs.clamp(clamp[0], clamp[1])
        for a in range(0, n, batch_size):
            b = min(a + batch_size, n)
            if size + (b - a) > batch_size:
                flush()
            pending.append((s, a, b, xs[a:b]))
            size += b - a
    flush()
    return sims if return_samples else sims.mean(dim=1)
