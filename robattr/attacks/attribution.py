"""Attribution attacks: move an explanation while keeping the prediction.

    res = topk_attack(model, x, k=8, eps=8/255)                       # Ghorbani et al.
    res = topk_attack(model, x, k=8, eps=8/255, method="smoothgrad",
                      method_options=dict(n_samples=50), seed=0)      # through the samples
    res = mass_center_attack(model, x, eps=8/255, surrogate_beta=10.0)
    res = targeted_attack(model, x, target_map=frame_target((32, 32), 5), eps=2/255,
                          gamma=0.5)                                  # 003's frame AAM
    res.x_adv, res.criterion, res.history

Every attack takes any robattr attribution method (a name from
:data:`robattr.attributions.METHODS` or a callable with the standard call shape) with its
options, and differentiates *through* it (``create_graph=True``): SmoothGrad, Uniform
Gradient and ball smoothing are attacked through their noisy samples. The attribution is
reduced to one value per pixel (``reduce="abs_sum"``: ``|a|`` summed over channels, as
all five papers do) before the attack's loss and criterion see it.

The engine is projected gradient descent, batched over the images: ℓ∞ steps follow the
sign of the gradient, ℓ2 steps the gradient normalised per example; after each step the
iterate is projected onto the ε-ball and onto [0, 1] (:func:`robattr.attacks.project`).
Each iterate (the start included) is scored by the attack's own *criterion* on the
original model (top-k intersection, centre dislocation, distance to the target map);
the best iterate per example is returned, with its criterion and the whole history.

**Label constraint** (``keep_label=True``, the default, as in Ghorbani et al.'s and 000's
code): an iterate whose predicted class differs from that of ``x`` is never returned
(its history entry is NaN); the original ``x`` is the fallback.

**Surrogate** (``surrogate_beta``): the gradient of a gradient vanishes almost everywhere
in a ReLU network, so the papers attack a copy whose ReLUs are Softplus(beta) (000's
code: beta = 1; Dombrowski et al.: beta grown geometrically from 10 to 100 over the
steps, ``surrogate_beta=(10, 100)``). The criterion and the label constraint are always
evaluated on the original model, which is never modified.

**Restarts**: the first run starts at ``x`` (or at a uniform draw from the ball with
``random_start=True``), every further restart at a fresh uniform draw; the best iterate
over all of them is kept.

Randomness (random starts and, unless ``method_options`` says otherwise, the noise of a
sampling method) comes from ``generator=`` or ``seed=``, else from torch's global RNG.
A sampling method draws fresh noise at every evaluation, so its criterion is noisy and
the best of many noisy values is biased in the attacker's favour: judge the returned
``x_adv`` with fresh draws (or pass ``method_options={"seed": s}`` to hold the noise fixed
-- common random numbers -- for the whole attack).
"""
from __future__ import annotations

import copy
import inspect
import math
import numbers
import warnings
from typing import Callable, NamedTuple

import torch
from torch import nn

from robattr.attacks.pgd import eval_mode
from robattr.utils import check_int
from robattr.attacks.projection import (check_eps, check_norm, per_example_norm, project,
                                        random_in_ball)
from robattr.attributions import DIFFERENTIABLE, METHODS, reduce_channels, resolve_target
from robattr.models import has_relu
from robattr.utils import make_generator
from robattr.metrics import center_dislocation, mass_center, normalize_map, topk_intersection

__all__ = ["AttackResult", "VanishingGradientWarning", "topk_attack", "ifia",
           "l2_attribution_attack", "mass_center_attack", "targeted_attack", "frame_target",
           "random_perturbation"]


class AttackResult(NamedTuple):
    """What every attribution attack returns (all detached, on ``x``'s device).

    ``x_adv``: the best iterate per example (shape of ``x``; ``x`` itself where no
    admissible iterate beat it). ``criterion``: its criterion value, shape (N,), the best
    of the clean input and every entry of ``history``. ``history``: shape
    (restarts, steps + 1, N), the criterion of every iterate (``[r, 0]`` is the start of
    restart ``r``, ``[r, t]`` the iterate after ``t`` steps), NaN where the iterate
    changed the predicted label under ``keep_label=True``.
    """
    x_adv: torch.Tensor
    criterion: torch.Tensor
    history: torch.Tensor


class VanishingGradientWarning(UserWarning):
    """The model has ReLUs and no ``surrogate_beta``: second derivatives vanish."""


# --------------------------------------------------------------------------- checks
def _check_x(x) -> torch.Tensor:
    if not torch.is_tensor(x) or not x.is_floating_point() or x.ndim < 2 or x.shape[0] == 0 \
            or x[0].numel() == 0:
        raise ValueError("x must be a non-empty floating-point batch tensor (N, ...), got "
                         f"{getattr(x, 'shape', type(x).__name__)}")
    x = x.detach()
    if float(x.min()) < 0.0 or float(x.max()) > 1.0:
        raise ValueError("x must be pixels in [0, 1] (robattr models normalise inside)")
    return x


def _check_beta(surrogate_beta):
    """None, a beta > 0, or a (start, end) schedule of two betas > 0."""
    if surrogate_beta is None:
        return None

    def ok(b):
        return not isinstance(b, bool) and isinstance(b, numbers.Real) and math.isfinite(b) \
            and b > 0

    if ok(surrogate_beta):
        return (float(surrogate_beta), float(surrogate_beta))
    if isinstance(surrogate_beta, (tuple, list)) and len(surrogate_beta) == 2 \
            and all(ok(b) for b in surrogate_beta):
        return (float(surrogate_beta[0]), float(surrogate_beta[1]))
    raise ValueError("surrogate_beta must be None, a number > 0 (a fixed Softplus beta) or a "
                     f"pair (start, end) of numbers > 0 (a geometric schedule), got "
                     f"{surrogate_beta!r}")


def _method_name(method) -> str | None:
    name = getattr(method, "__name__", None)
    if name is None:
        name = getattr(getattr(method, "func", None), "__name__", None)
    return name


def _resolve_method(method) -> Callable:
    if isinstance(method, str):
        if method not in METHODS:
            raise ValueError(f"unknown attribution method {method!r}; one of {sorted(METHODS)}")
        fn = METHODS[method]
    elif callable(method):
        fn = method
    else:
        raise ValueError(f"method must be a method name or a callable "
                         f"method(model, x, target, *, create_graph, **options), got {method!r}")
    name = _method_name(fn)
    if name in METHODS and name not in DIFFERENTIABLE:
        raise ValueError(f"{name} cannot be attacked by gradient: it is not differentiable "
                         f"w.r.t. x (create_graph=True); differentiable methods: "
                         f"{', '.join(DIFFERENTIABLE)}")
    return fn


def _accepts(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


# --------------------------------------------------------------------------- the maps
class _Maps:
    """``reduce(method(model, x, target, create_graph=..., **options))`` for a fixed target."""

    def __init__(self, method, options, reduce, target, generator):
        self.fn = _resolve_method(method)
        options = dict(options or {})
        for bad in ("create_graph", "target", "model", "x"):
            if bad in options:
                raise ValueError(f"method_options must not contain {bad!r} (the attack sets it)")
        if generator is not None and "generator" not in options and "seed" not in options \
                and _accepts(self.fn, "generator"):
            options["generator"] = generator     # one stream for the whole attack
        self.options, self.reduce, self.target = options, reduce, target

    def __call__(self, model, x, create_graph: bool) -> torch.Tensor:
        a = self.fn(model, x, self.target, create_graph=create_graph, **self.options)
        return reduce_channels(a, self.reduce)


# --------------------------------------------------------------------------- the engine
def _run(model, x, target, spec, *, eps, norm, steps, step_size, restarts, random_start,
         keep_label, surrogate_beta, generator, seed, progress, method, method_options,
         reduce, name):
    """Projected gradient ascent on ``spec.objective`` (see the module docstring)."""
    x = _check_x(x)
    eps = check_eps(eps)
    check_norm(norm)
    steps = check_int("steps", steps, 1)
    restarts = check_int("restarts", restarts, 1)
    step_size = 2.5 * eps / steps if step_size is None else check_eps(step_size, "step_size")
    betas = _check_beta(surrogate_beta)
    if not isinstance(keep_label, bool):
        raise ValueError(f"keep_label must be True or False, got {keep_label!r}")
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    gen = make_generator(x, generator, seed)
    n = x.shape[0]
    view = (-1,) + (1,) * (x.ndim - 1)
    relu = betas is None and has_relu(model)
    if relu:
        warnings.warn(f"{name}: the model has ReLU activations and no surrogate_beta, so the "
                      "derivatives of its gradient-based attributions vanish almost everywhere; "
                      "pass surrogate_beta (e.g. 10.0, or (10.0, 100.0) for a schedule) to "
                      "attack a Softplus surrogate", VanishingGradientWarning, stacklevel=3)

    with eval_mode(model), torch.enable_grad():
        with torch.no_grad():
            label0 = model(x).argmax(1)
        target = resolve_target(model, x, target)
        maps = _Maps(method, method_options, reduce, target, gen)
        map0 = maps(model, x, False).detach()
        spec.setup(model, x, map0)
        best_c = spec.criterion(map0).detach().clone()
        best = x.clone()
        lower = spec.lower_is_better
        history = torch.full((restarts, steps + 1, n), float("nan"), dtype=best_c.dtype,
                             device=x.device)
        surrogate = None
        if betas is not None:
            surrogate = copy.deepcopy(model).eval()
            _set_softplus(surrogate, betas[0])

        def evaluate(x_adv):
            """(criterion, label kept) of each iterate, on the original model."""
            with torch.no_grad():
                pred = model(x_adv).argmax(1)
            c = spec.criterion(maps(model, x_adv, False).detach())
            return c, pred == label0

        def record(r, t, x_adv, c, kept):
            nonlocal best_c
            c = c.detach()
            ok = kept if keep_label else torch.ones_like(kept)
            history[r, t] = torch.where(ok, c, torch.full_like(c, float("nan")))
            better = ok & ((c < best_c) if lower else (c > best_c))
            best[better] = x_adv.detach()[better]
            best_c = torch.where(better, c, best_c)

        bar = None
        if progress:
            from tqdm.auto import tqdm
            bar = tqdm(total=restarts * steps, desc=name, leave=False)
        try:
            for r in range(restarts):
                if r == 0 and not random_start:
                    x_adv = x.clone()
                else:
                    x_adv = project(x + random_in_ball(x, eps, norm, gen), x, eps, norm)
                for t in range(steps):
                    m = model
                    if surrogate is not None:
                        b0, b1 = betas
                        _set_softplus(surrogate, b0 * (b1 / b0) ** (t / steps))
                        m = surrogate
                    xa = x_adv.detach().requires_grad_(True)
                    amap = maps(m, xa, True)
                    obj = spec.objective(m, xa, amap)
                    (g,) = torch.autograd.grad(obj.sum(), xa)
                    if relu and r == 0 and t == 0 and not bool(g.ne(0).any()):
                        raise ValueError(
                            f"{name}: the attack gradient is zero for every input (a ReLU "
                            "model: the derivative of its gradient vanishes); pass "
                            "surrogate_beta to attack a Softplus surrogate")
                    if surrogate is None:   # the map at xa is the original model's: reuse it
                        with torch.no_grad():
                            kept = model(xa).argmax(1) == label0
                        c = spec.criterion(amap.detach())
                    else:
                        c, kept = evaluate(xa.detach())
                    record(r, t, x_adv, c, kept)
                    if norm == "linf":
                        step = g.sign()
                    else:
                        step = g / per_example_norm(g, "l2").clamp_min(1e-12).reshape(view)
                    x_adv = project(x_adv.detach() + step_size * step, x, eps, norm)
                    if bar is not None:
                        bar.update(1)
                c, kept = evaluate(x_adv)
                record(r, steps, x_adv, c, kept)
        finally:
            if bar is not None:
                bar.close()
    return AttackResult(best, best_c, history)


def _set_softplus(model: nn.Module, beta: float) -> None:
    from robattr.models import set_activation
    try:
        set_activation(model, "softplus", beta)
    except ValueError as e:
        raise ValueError(f"surrogate_beta needs ReLU or Softplus modules to swap: {e}") from e


def _common(kw):
    return dict(eps=kw.pop("eps"), norm=kw.pop("norm"), steps=kw.pop("steps"),
                step_size=kw.pop("step_size"), restarts=kw.pop("restarts"),
                random_start=kw.pop("random_start"), keep_label=kw.pop("keep_label"),
                surrogate_beta=kw.pop("surrogate_beta"), generator=kw.pop("generator"),
                seed=kw.pop("seed"), progress=kw.pop("progress"), method=kw.pop("method"),
                method_options=kw.pop("method_options"), reduce=kw.pop("reduce"))


# --------------------------------------------------------------------------- top-k
class _TopK:
    """Ghorbani et al.'s top-k attack: shrink the share of the map's mass in a top-k set."""
    lower_is_better = True

    def __init__(self, k, mask, criterion):
        if mask not in ("fixed", "recompute"):
            raise ValueError(f"mask must be 'fixed' (the original map's top k) or 'recompute' "
                             f"(the current map's top k, every step), got {mask!r}")
        if criterion not in ("fraction", "mass"):
            raise ValueError(f"criterion must be 'fraction' or 'mass', got {criterion!r}")
        if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 1:
            raise ValueError(f"k must be a positive integer, got {k!r}")
        self.k, self.mask, self.variant = int(k), mask, criterion

    def setup(self, model, x, map0):
        d = map0[0].numel()
        if self.k > d:
            raise ValueError(f"k must be at most the number of map features ({d}), got {self.k}")
        self.map0 = map0

    def objective(self, model, x_adv, amap):
        ref = self.map0 if self.mask == "fixed" else amap   # topk_intersection detaches it
        return -topk_intersection(ref, amap, self.k, variant="mass")

    def criterion(self, amap):
        return topk_intersection(self.map0, amap, self.k, variant=self.variant)


def topk_attack(model: nn.Module, x: torch.Tensor, target=None, *, k: int, eps: float,
                norm: str = "linf", method="grad", method_options: dict | None = None,
                reduce="abs_sum", mask: str = "fixed", criterion: str = "fraction",
                steps: int = 50, step_size: float | None = None, restarts: int = 1,
                random_start: bool = False, keep_label: bool = True, surrogate_beta=None,
                generator=None, seed=None, progress: bool = False) -> AttackResult:
    """Top-k attack (Ghorbani, Abid & Zou, AAAI 2019; 000, 002, 004's "unstructured").

    Descends the share of the (reduced) map's mass inside a top-k set ``K``:
    ``sum_{i in K} n(h(x'))_i`` with ``n(h) = |h| / sum |h|`` -- 000's top-k intersection
    in its "mass" form, :func:`robattr.metrics.topk_intersection`. ``mask="fixed"``:
    ``K`` is the original map's top k (Ghorbani et al.'s and 000's TF code);
    ``mask="recompute"``: ``K`` is the current map's top k, re-taken each step (000's
    PyTorch notebooks). ``k`` counts map features (pixels after ``reduce``).

    The criterion, minimised, is the top-k intersection of the original map and the
    iterate's map on the original model: ``"fraction"`` ``|K(h) ∩ K(h')| / k`` (the
    released codes' measure), or ``"mass"`` (the loss above with the original ``K``).
    ``target`` is the class whose attribution is attacked (default: the prediction).
    ``step_size`` defaults to ``2.5 eps / steps``; 000 used 50 steps of 0.005 (ℓ∞).
    """
    kw = dict(locals())
    kw.pop("model"), kw.pop("x"), kw.pop("target")
    spec = _TopK(kw.pop("k"), kw.pop("mask"), kw.pop("criterion"))
    return _run(model, x, target, spec, name="topk_attack", **_common(kw))


def ifia(model: nn.Module, x: torch.Tensor, target=None, *, k: int, eps: float,
         steps: int = 200, step_size: float | None = None, **options) -> AttackResult:
    """Iterative Feature Importance Attack (Ghorbani et al., 2019, Alg. 1), 001's ℓ∞
    attack ("200-step IFIA"): ℓ∞ sign steps on the top-k loss with the original map's
    top-k set held fixed, the label constraint on, and the returned iterate the one with
    the smallest top-k intersection among those that keep the label. Every other option
    of :func:`topk_attack` can be passed on.
    """
    for fixed in ("norm", "mask"):
        if fixed in options:
            raise ValueError(f"ifia fixes {fixed!r} (ℓ∞, the original top-k); use topk_attack")
    options.setdefault("keep_label", True)
    return topk_attack(model, x, target, k=k, eps=eps, norm="linf", mask="fixed", steps=steps,
                       step_size=step_size, **options)


def l2_attribution_attack(model: nn.Module, x: torch.Tensor, target=None, *, k: int,
                          eps: float, steps: int = 200, step_size: float = 0.1,
                          **options) -> AttackResult:
    """002's ℓ2 attribution attack (App. B, "adapted from Ghorbani et al."): the top-k loss,
    200 PGD steps of ℓ2 length 0.1 (002: k = 100 on MNIST, 1000 on CIFAR-10). Every other
    option of :func:`topk_attack` can be passed on (``mask``, ``restarts``, ...).
    """
    if "norm" in options:
        raise ValueError("l2_attribution_attack fixes norm='l2'; use topk_attack")
    return topk_attack(model, x, target, k=k, eps=eps, norm="l2", steps=steps,
                       step_size=step_size, **options)


# --------------------------------------------------------------------------- mass center
class _MassCenter:
    lower_is_better = False

    def setup(self, model, x, map0):
        if map0.ndim not in (3, 4):
            raise ValueError("mass_center_attack needs image maps: reduce must leave N x H x W "
                             f"(or N x 1 x H x W), got shape {tuple(map0.shape)}")
        self.map0 = map0
        self.c0 = mass_center(map0, reduce=None)

    def objective(self, model, x_adv, amap):
        return ((mass_center(amap, reduce=None) - self.c0) ** 2).sum(1)

    def criterion(self, amap):
        return center_dislocation(self.map0, amap, reduce=None)


def mass_center_attack(model: nn.Module, x: torch.Tensor, target=None, *, eps: float,
                       norm: str = "linf", method="grad", method_options: dict | None = None,
                       reduce="abs_sum", steps: int = 50, step_size: float | None = None,
                       restarts: int = 1, random_start: bool = False, keep_label: bool = True,
                       surrogate_beta=None, generator=None, seed=None,
                       progress: bool = False) -> AttackResult:
    """Mass-centre attack (Ghorbani et al., 2019; 000): ascend the squared distance between
    the centre of mass of the (reduced, non-negative) map and the original one. The
    criterion, maximised, is 000's centre dislocation in pixels
    (:func:`robattr.metrics.center_dislocation`) on the original model.
    """
    kw = dict(locals())
    kw.pop("model"), kw.pop("x"), kw.pop("target")
    return _run(model, x, target, _MassCenter(), name="mass_center_attack", **_common(kw))


# --------------------------------------------------------------------------- targeted
MAP_NORMS = ("sum", "max", "sum_hw", None)


def _norm_map(a: torch.Tensor, how) -> torch.Tensor:
    if how is None:
        return a
    if how == "sum":
        return normalize_map(a, "sum")
    if how == "max":
        return normalize_map(a, "max")
    return normalize_map(a, "sum") * a[0].numel()       # "sum_hw": 000's code, sums to H W


def frame_target(shape, width: int, *, dtype=torch.float32, device=None) -> torch.Tensor:
    """003's target map for the targeted AAM: ones on a border ``width`` pixels wide, zeros
    inside (RobustAGA: width 5 on 32 x 32, 35 on 224 x 224). ``shape`` is ``(H, W)`` or
    any shape ending in ``H, W``; the result has that shape."""
    shape = tuple(int(s) for s in shape)
    if len(shape) < 2 or any(s < 1 for s in shape):
        raise ValueError(f"shape must end in (H, W) with positive sizes, got {shape}")
    width = check_int("width", width, 1)
    h, w = shape[-2:]
    t = torch.ones(shape, dtype=dtype, device=device)
    if h > 2 * width and w > 2 * width:
        t[..., width:h - width, width:w - width] = 0
    return t


class _Targeted:
    lower_is_better = True

    def __init__(self, target_map, weights, gamma, map_norm, output):
        if gamma is not None:
            if isinstance(gamma, bool) or not isinstance(gamma, numbers.Real) \
                    or not 0.0 <= gamma <= 1.0:
                raise ValueError(f"gamma must be a number in [0, 1], got {gamma!r}")
            self.w_map, self.w_out, self.pixel_sum = float(gamma), 1.0 - float(gamma), True
            map_norm = "max" if map_norm == "default" else map_norm
        else:
            if not (isinstance(weights, (tuple, list)) and len(weights) == 2 and all(
                    not isinstance(w, bool) and isinstance(w, numbers.Real) and math.isfinite(w)
                    and w >= 0 for w in weights)):
                raise ValueError(f"weights must be a pair (w_map, w_out) of numbers >= 0, "
                                 f"got {weights!r}")
            self.w_map, self.w_out, self.pixel_sum = float(weights[0]), float(weights[1]), False
            map_norm = "sum" if map_norm == "default" else map_norm
        if map_norm not in MAP_NORMS:
            raise ValueError(f"map_norm must be one of {MAP_NORMS}, got {map_norm!r}")
        if output not in ("logits", "probs"):
            raise ValueError(f"output must be 'logits' or 'probs', got {output!r}")
        if not torch.is_tensor(target_map) or not target_map.is_floating_point():
            raise ValueError("target_map must be a floating-point tensor (one value per pixel), "
                             f"got {type(target_map).__name__}")
        self.raw_target, self.map_norm, self.output = target_map.detach(), map_norm, output

    def _out(self, model, x):
        logits = model(x)
        return logits.softmax(1) if self.output == "probs" else logits

    def setup(self, model, x, map0):
        t = self.raw_target.to(device=map0.device, dtype=map0.dtype)
        if t.ndim == map0.ndim + 1 and t.shape[-3] == 1 and t.shape[0] == map0.shape[0]:
            t = t.squeeze(-3)                           # N x 1 x H x W against N x H x W
        if t.shape == map0.shape[1:]:
            t = t.expand_as(map0)
        elif t.ndim == map0.ndim and t.shape[0] == 1 and t.shape[1:] == map0.shape[1:]:
            t = t.expand_as(map0)
        if t.shape != map0.shape:
            raise ValueError(f"target_map must be one map shaped like the reduced attribution "
                             f"{tuple(map0.shape[1:])} or one per input {tuple(map0.shape)}, "
                             f"got {tuple(self.raw_target.shape)}")
        self.target = _norm_map(t, self.map_norm)
        with torch.no_grad():
            self.out0 = self._out(model, x)

    def _map_term(self, amap):
        d = (_norm_map(amap, self.map_norm) - self.target).flatten(1) ** 2
        return d.sum(1) if self.pixel_sum else d.mean(1)

    def objective(self, model, x_adv, amap):
        loss = self.w_map * self._map_term(amap)
        if self.w_out:
            loss = loss + self.w_out * ((self._out(model, x_adv) - self.out0) ** 2).mean(1)
        return -loss

    def criterion(self, amap):
        return self._map_term(amap)


def targeted_attack(model: nn.Module, x: torch.Tensor, target=None, *,
                    target_map: torch.Tensor, eps: float, norm: str = "linf", method="grad",
                    method_options: dict | None = None, reduce="abs_sum",
                    weights=(1e11, 1e6), gamma: float | None = None, map_norm="default",
                    output: str = "logits", steps: int = 100, step_size: float | None = None,
                    restarts: int = 1, random_start: bool = False, keep_label: bool = True,
                    surrogate_beta=None, generator=None, seed=None,
                    progress: bool = False) -> AttackResult:
    """Targeted manipulation (Dombrowski et al., NeurIPS 2019): drive the map toward
    ``target_map`` while keeping the model's output -- 000's "manipulate", 003's targeted
    AAM, 004's "structured" attack (target = another image's map).

    Minimises, per example, ``w_map * D(n(h(x')), n(h_t)) + w_out * mean_c (f(x') - f(x))_c^2``:

    * default (Dombrowski's / 000's): ``weights=(1e11, 1e6)``, maps normalised to sum 1
      (``map_norm="sum"``, Dombrowski's ``get_expl``), ``D`` the mean squared difference
      over pixels (``F.mse_loss``);
    * ``gamma=g`` (003, RobustAGA's code): ``w_map = g``, ``w_out = 1 - g``, maps divided
      by their maximum (``map_norm="max"``), ``D`` summed over pixels.

    ``map_norm`` may also be ``"sum_hw"`` (000's notebooks: sum H W) or None. ``f`` is the
    logits (000, 003) or, with ``output="probs"``, the softmax (Dombrowski's code).
    ``target_map`` is one value per pixel of the reduced map: (H, W), (1, H, W) or
    (N, H, W) for ``reduce="abs_sum"`` -- e.g. :func:`frame_target`, or
    ``reduce_channels(grad(model, x_other, y_other), "abs_sum")``; it is normalised like
    the map. The criterion, minimised, is ``D`` on the original model.
    ``surrogate_beta=(10, 100)`` is Dombrowski's beta growth. 003: ℓ∞, 100 steps,
    eps = 2/255 or 4/255, frame target.
    """
    kw = dict(locals())
    kw.pop("model"), kw.pop("x"), kw.pop("target")
    spec = _Targeted(kw.pop("target_map"), kw.pop("weights"), kw.pop("gamma"),
                     kw.pop("map_norm"), kw.pop("output"))
    return _run(model, x, target, spec, name="targeted_attack", **_common(kw))


# --------------------------------------------------------------------------- random
def random_perturbation(x: torch.Tensor, *, eps: float, norm: str = "linf",
                        linf: str = "cube", l2: str = "sphere", generator=None,
                        seed=None) -> torch.Tensor:
    """``x`` plus random noise in the ε-ball, clipped to [0, 1] (the baseline the papers
    compare attacks with).

    ℓ∞: ``linf="cube"`` draws each coordinate uniformly in ``[-eps, eps]``;
    ``"vertices"`` draws ``±eps`` (the cube's corners: every coordinate at full size, the
    analogue of 000's random-sign steps). ℓ2: ``l2="sphere"`` draws a uniform direction
    of length exactly ``eps``; ``"ball"`` draws uniformly in the solid ball. Clipping to
    the pixel range can only shrink the perturbation. Returns a detached tensor.
    """
    x = _check_x(x)
    eps = check_eps(eps)
    check_norm(norm)
    if linf not in ("cube", "vertices"):
        raise ValueError(f"linf must be 'cube' or 'vertices', got {linf!r}")
    if l2 not in ("sphere", "ball"):
        raise ValueError(f"l2 must be 'sphere' or 'ball', got {l2!r}")
    gen = make_generator(x, generator, seed)
    gdev = gen.device if gen is not None else x.device
    if norm == "linf" and linf == "cube" or norm == "l2" and l2 == "ball":
        delta = random_in_ball(x, eps, norm, gen)
    elif norm == "linf":
        u = torch.rand(x.shape, generator=gen, device=gdev, dtype=x.dtype).to(x.device)
        delta = eps * torch.where(u < 0.5, -torch.ones_like(u), torch.ones_like(u))
    else:
        g = torch.randn(x.shape, generator=gen, device=gdev, dtype=x.dtype).to(x.device)
        norms = per_example_norm(g, "l2").clamp_min(1e-12)
        delta = eps * g / norms.reshape((-1,) + (1,) * (x.ndim - 1))
    return project(x + delta, x, eps, norm)
