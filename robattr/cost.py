"""The cost model's vocabulary: what a notebook's cost declaration is written in.

A notebook declares what it asks of the zoo and what it computes (a
:class:`Declaration` in its chapter's ``robattr.chapters.<key>.plan`` module), as
functions of its resolved parameters. The work is a list of :class:`Work` items,
first-order counts of what the notebook's loops call: an attack of ``steps`` steps on
``n`` images through a map of ``m`` samples is ``steps`` attack steps of ``n * m`` rows.
The helpers here (:func:`grads`, :func:`attr`, :func:`attack`, :func:`steps_of`, ...)
count the passes of robattr's own functions; ``robattr plan`` (:mod:`robattr.book.plan`)
prices each item with the costs it measured on this machine (``t0 + rows * t1`` per
call). This module is part of the library: it knows nothing of the chapters or the book.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Callable

from robattr.catalog import NUM_CLASSES, SHAPES

__all__ = ["Work", "Declaration", "TRAIN_SIZES", "CHUNK", "FWD_CHUNK", "family",
           "dataset_shape", "input_values", "fwd", "grads", "grads2", "hvps", "attr", "attack",
           "pgd", "curve", "numpy_draws", "eigh", "matmul", "protocol_wang2020", "bounds_wangkong2023",
           "steps_of", "step_signature", "step_passes",
           "zoo_config", "spec", "flat", "no_models", "no_data"]

#: Images in each dataset's train split (digits: robattr's stratified 80 % of 1797).
TRAIN_SIZES = {"digits": 1437, "mnist": 60000, "fashion_mnist": 60000, "cifar10": 50000,
               "flowers102": 1020}

#: Rows of one forward/backward pass when a method spreads samples over chunks (IG steps,
#: noise draws, RelEx copies): robattr.attributions' CPU chunk.
CHUNK = 128
#: Rows of one forward pass of the faithfulness curves (robattr.metrics' batch_size).
FWD_CHUNK = 256


# --------------------------------------------------------------------------- work items
@dataclass(frozen=True)
class Work:
    """One block of a notebook's work and how its cost is measured.

    ``kind``: ``"fwd"``, ``"grad"`` (forward + backward to the input), ``"grad2"`` (the
    gradient of a function of the input gradient, double backward), ``"hvp"`` (one
    backward pass through a retained graph of the input gradient) and ``"astep"`` (one
    step of an attribution attack) on the model
    ``family`` (``arch:CxHxW:classes[:float64]``), costing ``calls * t0 + rows * t1``;
    ``"step"`` (``calls`` training steps of the zoo configuration ``family``, a JSON
    string); ``"numpy"`` (``rows`` random draws and their arithmetic); ``"eigh"``
    (``calls`` dense symmetric eigenproblems of size ``rows``); ``"matmul"`` (``calls``
    dense float64 matrix products of ``rows`` multiply-adds in all)."""

    kind: str
    family: str
    calls: float
    rows: float = 0.0
    what: str = ""


def family(dataset: str | None = None, arch: str = "cnn", *, shape=None, classes=None,
           float64: bool = False) -> str:
    """The model family key of a dataset's (or an explicit shape's) ``arch``."""
    if shape is None:
        shape = dataset_shape(dataset)
    if classes is None:
        classes = NUM_CLASSES.get(dataset, 1000 if dataset is None else 10)
    key = f"{arch}:{'x'.join(str(int(s)) for s in shape)}:{int(classes)}"
    return key + (":float64" if float64 else "")


def dataset_shape(dataset: str) -> tuple:
    """C x H x W of one input of ``dataset`` (an ImageFolder path: 3 x 224 x 224)."""
    if dataset in SHAPES:
        return SHAPES[dataset]
    if dataset == "flowers102":
        return (3, 64, 64)
    return (3, 224, 224)                                # an ImageFolder path


def input_values(dataset) -> int:
    """Values of one input (C x H x W): the outputs of an attribution map."""
    return math.prod(dataset_shape(dataset))


def _passes(kind: str, fam: str, images: float, per_image: float = 1, repeat: float = 1,
            what: str = "", chunk: int = CHUNK) -> Work:
    rows = max(0.0, float(images) * float(per_image))
    calls = float(repeat) * max(1, math.ceil(rows / chunk)) if rows else 0.0
    return Work(kind, fam, calls, float(repeat) * rows, what)


def fwd(fam, images, per_image=1, repeat=1, what=""):
    """Forward passes (no gradient) of ``images * per_image`` rows, ``repeat`` times."""
    return _passes("fwd", fam, images, per_image, repeat, what, FWD_CHUNK)


def grads(fam, images, per_image=1, repeat=1, what=""):
    """Input gradients of ``images * per_image`` rows (in chunks), ``repeat`` times."""
    return _passes("grad", fam, images, per_image, repeat, what)


def grads2(fam, images, per_image=1, repeat=1, what=""):
    """Gradients of a function of the input gradient (double backward), ``repeat`` times."""
    return _passes("grad2", fam, images, per_image, repeat, what)


def hvps(fam, images, per_image=1, repeat=1, what=""):
    """Products with the Jacobian of the input gradient (Hessian-vector products, Lanczos
    and power-iteration steps, rows of a dense Jacobian): one backward pass each through
    the gradient's graph, built once and retained."""
    return _passes("hvp", fam, images, per_image, repeat, what)


#: Rows per image of each attribution method (robattr.attributions.METHODS) and the name
#: of its sample-count option; RelEx and the meaningful perturbation iterate (see attr()).
_ROWS = {"grad": 1, "input_x_grad": 1, "guided_backprop": 1, "lrp": 1, "grad_cam": 1,
         "deeplift": 2}


def attr(fam, images, method, what="", **opts) -> list[Work]:
    """The work of one attribution call on ``images`` images (options as the method's)."""
    what = what or method
    if method in _ROWS:
        return [grads(fam, images, _ROWS[method], what=what)]
    if method == "integrated_gradients":
        return [grads(fam, images, opts.get("steps", 50), what=what)]
    if method in ("smoothgrad", "uniform_grad", "ball_smooth"):
        return [grads(fam, images, opts.get("n_samples") or 50, what=what)]
    if method == "relex":               # each copy is two rows: m x and (1 - m) x
        copies = opts.get("n_noisy", 50) if opts.get("batch", True) else 1
        return [grads(fam, images, 2 * copies, repeat=opts.get("epochs", 50), what=what)]
    if method == "meaningful_perturbation":
        return [grads(fam, images, 1, repeat=opts.get("iterations", 300), what=what)]
    raise ValueError(f"no cost declared for attribution method {method!r}")


def attack(fam, images, steps, per_image=1, *, restarts=1, surrogate=False, what="attack"):
    """An attribution attack (robattr.attacks): every step differentiates the map
    (``per_image`` rows per image) through the model, costed as a measured step of
    robattr's top-k attack (``"astep"``); with a Softplus surrogate each iterate is also
    scored on the original model."""
    n = steps * restarts
    out = [Work("astep", fam, n, n * images * per_image, what)]
    if surrogate:
        out.append(grads(fam, images, per_image, n, what + " (scored on the model)"))
    return out


def pgd(fam, images, steps, what="pgd"):
    """Projected gradient descent on the loss: one gradient per step."""
    return [grads(fam, images, 1, steps, what), fwd(fam, images, 1, steps, what)]


def curve(fam, images, ratios, what="curve"):
    """An insertion / deletion / preservation curve of ``ratios`` steps (forward only)."""
    return [fwd(fam, images, ratios + 1, what=what)]


def numpy_draws(n, what="numpy"):
    """``n`` random draws with numpy and their arithmetic."""
    return Work("numpy", "numpy", 1, float(n), what)


def eigh(size, count=1, what="eigh"):
    """``count`` dense symmetric eigenproblems of size ``size``."""
    return Work("eigh", "eigh", float(count), float(size), what)


def matmul(count, m, k, n, what="matmul"):
    """``count`` dense float64 products of an (m, k) and a (k, n) matrix."""
    return Work("matmul", "matmul", float(count), float(count) * m * k * n, what)


# --------------------------------------------------------------------------- protocols
def protocol_wang2020(fam, n, eps_list, steps, methods, attacks=("topk",), *, surrogate=False,
                 eval_rows=None, random_baseline=False, what="000 protocol"):
    """robattr.attack_protocol.attack_eval_wang2020 (wang2020's evaluation, also a column of the
    cross-paper matrix) for each attack and attacked method: the clean maps, per budget
    the attack (and for "manipulate" the target map) and the maps of the attacked (and
    random) inputs. ``methods``: {name: rows per image of its map}."""
    out = []
    eval_rows = methods if eval_rows is None else eval_rows
    e_rows = sum(eval_rows.values())
    moved = 2 if random_baseline else 1
    for a in attacks:
        for name, rows in methods.items():
            out.append(grads(fam, n, e_rows, what=f"{what}: clean maps"))
            for _ in eps_list:
                if a == "manipulate":
                    out.append(grads(fam, n, rows, what=f"{what}: target map"))
                out += attack(fam, n, steps, rows, surrogate=surrogate, what=f"{what}: {a} {name}")
                out.append(grads(fam, n, e_rows, moved, what=f"{what}: attacked maps"))
    return out


def bounds_wangkong2023(fam, dataset, n, m_rows, norm, steps, direct_steps, lanczos=100):
    """robattr.bounds.evaluate_bounds (wangkong2023's evaluation, also a column of the
    cross-paper matrix): the Lanczos iteration (one jvp and one vjp of the map per step, at
    most ``lanczos``), for l-inf the dense Jacobian (one vjp per value of the map) and Thm
    2's sum over ``J^T J`` (one d x d x d product per image,
    robattr.bounds.linf_deviation_bound), the paper's attack and the direct attack."""
    d = input_values(dataset)
    out = [grads2(fam, n, m_rows, 1, "001: the map's graph"),
           hvps(fam, n, m_rows, 2 * lanczos, "001: Lanczos"),
           grads2(fam, n, m_rows, 4, "001: Taylor constant")]
    if norm == "linf":
        out += [hvps(fam, n, m_rows, d, "001: dense Jacobian"),
                matmul(n, d, d, d, "001: l-inf bound, J^T J")]
    out += attack(fam, n, steps, m_rows, what="001: paper's attack")
    out += attack(fam, n, direct_steps, m_rows, what="001: direct attack")
    return out


# --------------------------------------------------------------------------- training steps
def zoo_config(cfg: dict) -> dict:
    """The zoo configuration of ``get_model`` arguments (a zoo configuration as it is)."""
    if "loss" in cfg:
        return cfg
    from robattr import zoo

    spec_ = dict(cfg)
    return zoo.config(spec_.pop("dataset"), spec_.pop("arch"), spec_.pop("method", "ce"), **spec_)


def step_signature(cfg: dict, batch: int | None = None) -> str:
    """What the seconds of one training step depend on: the configuration without its
    schedule (epochs, learning rate, seed, ...), at ``batch`` (default its batch size)."""
    keep = ("dataset", "arch", "method", "loss", "batch_size", "optimizer", "activation", "beta")
    sig = {k: cfg[k] for k in keep}
    if batch is not None:
        sig["batch_size"] = int(batch)
    return json.dumps(sig, sort_keys=True)


def step_passes(sig: str | dict) -> list[tuple[str, float, float]]:
    """What one training step of a signature (:func:`step_signature`) costs, in passes of
    its model family: ``(kind, calls, rows)``, priced like any :class:`Work` item
    (``calls * t0 + rows * t1``). ``"train"`` is one cross-entropy step (forward, backward
    to the parameters, optimizer step); ``"grad"``, ``"grad2"``, ``"hvp"`` and ``"fwd"`` are
    the passes of :class:`Work`; ``"bwd"`` is a backward pass alone, priced as a ``"grad"``
    less a ``"fwd"`` but never below a ``"fwd"`` (the difference of two fitted timings can
    come out negative; a reverse pass costs at least its forward). The counts follow each loss of :mod:`robattr.train.losses` at batch
    ``b``: an attack step is a gradient of the batch; IG-NORM's attack takes the gradient of
    an IG of ``ig_steps // approx_factor`` points through its graph (a ``grad2`` of ``b * n``
    rows) at each of its steps and once more for the loss; IGR adds to TRADES an IG of
    ``ig_steps`` points at two inputs kept in the graph; SSR adds ``C`` backward passes for
    the input Jacobian and one kept in the graph; the Hessian penalty a gradient kept in
    the graph, a Hessian-vector product and the backward through both per sample; 003's
    gradient-alignment losses a detached backward and a gradient kept in the graph; ATEX
    the teacher's SmoothGrad (``sg_samples`` gradients of the batch), two teacher forwards
    and two student steps (clean and perturbed batch); IGA (ART) a gradient for its top-k
    values, then per attack step and once more for the loss the two input gradients of
    the true and runner-up logits kept in the graph (a ``grad2`` of ``2 b`` rows), besides
    the CE step at x_adv; AdvAAT the clean saliency map, per attack step a ``grad2`` of
    the batch (CE plus the map's dissimilarity), then both maps in the graph (``2 b``
    rows) besides the CE step at x_adv. A first-order model: ``robattr plan --check``
    compares it with the zoo's recorded times."""
    s = json.loads(sig) if isinstance(sig, str) else sig
    b, method, hp = float(s["batch_size"]), s["method"], s.get("loss") or {}
    classes = NUM_CLASSES.get(s["dataset"], 10)
    train = [("train", 1, b)]
    bwd = [("bwd", 1, b)]
    if method == "ce":
        return train
    if method == "at":
        return [("grad", hp.get("steps", 7), hp.get("steps", 7) * b)] + train
    if method in ("trades", "igr"):
        k = hp.get("steps", 10)
        out = [("fwd", 1, b), ("grad", k, k * b), ("train", 2, 2 * b)]
        if method == "igr":
            m = hp.get("ig_steps", 10)
            out.append(("grad2", 1, 2 * m * b))
        return out
    if method == "ig_norm":
        k, n = hp.get("steps", 7), hp.get("ig_steps", 50) // max(1, hp.get("approx_factor", 10))
        return [("grad2", k + 1, (k + 1) * n * b)] + train
    if method == "ssr":
        return train + [("bwd", classes, classes * b), ("grad2", 1, b)]
    if method == "hessian":
        n = hp.get("samples", 1)
        return train + [("grad2", n, n * b), ("hvp", n, n * b)]
    if method in ("l2", "cosd", "l2_cosd"):
        return train + bwd + [("grad2", 1, b)]
    if method == "atex":
        n = hp.get("sg_samples", 10)
        return [("grad", n, n * b), ("fwd", 2, 2 * b), ("train", 2, 2 * b)]
    if method == "iga":
        k = hp.get("steps", 3) if hp.get("eps", 8 / 255) > 0 else 0
        top = [("grad", 1, b)] if k else []
        return top + [("grad2", k + 1, 2 * (k + 1) * b)] + train
    if method == "advaat":
        k = hp.get("steps", 7)
        return [("grad", 1, b), ("grad2", k, k * b), ("grad2", 1, 2 * b)] + train
    raise ValueError(f"no cost model for the loss {method!r}: add it to robattr.cost.step_passes")


def steps_of(cfg: dict, n: float, batch: int | None = None, what="training steps") -> Work:
    """``n`` training steps of a zoo configuration or of ``get_model`` arguments
    (``batch`` overrides the batch size)."""
    return Work("step", step_signature(zoo_config(cfg), batch), float(n), 0.0, what)


# --------------------------------------------------------------------------- declarations
Models = Callable[[dict], list]
WorkFn = Callable[[dict], list]


@dataclass(frozen=True)
class Declaration:
    """What a notebook asks of the zoo and what it computes, as functions of its
    resolved parameters: ``models(p)`` returns ``get_model`` argument dicts (``dataset``,
    ``arch``, ``method`` and the keywords, see :func:`spec`), in call order; ``work(p)`` a
    list of :class:`Work`; ``data(p)`` the datasets it reads (default: ``p["dataset"]``
    and the datasets of its zoo models)."""

    models: Models
    work: WorkFn
    data: Callable[[dict], list] | None = None


def spec(dataset, arch, method="ce", **hp) -> dict:
    """The ``get_model`` arguments of one zoo model."""
    return {"dataset": dataset, "arch": arch, "method": method, **hp}


def flat(*items) -> list:
    """Work items and (nested) lists of them, as one list."""
    out = []
    for it in items:
        if isinstance(it, Work):
            out.append(it)
        else:
            out.extend(flat(*it))
    return out


def no_models(p) -> list:
    """The models of a notebook that trains none (and the data of one that reads none)."""
    return []


no_data = no_models
