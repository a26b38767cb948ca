"""What a profile will cost before it runs: ``robattr plan``.

For every notebook of a profile, :func:`plan` says

* the **data** it reads and whether the files are there (:func:`robattr.data.available`:
  nothing is downloaded; the notebooks that run one block per data set choose their
  blocks as they do when they run, through :mod:`robattr.blocks`, which opens the data
  sets it finds);
* the **zoo models** it asks for, which of them the zoo already holds (with the
  ``seconds_per_epoch`` the zoo recorded when it trained them) and which it will train;
* an **estimate of its time** on the device it would run on here: the training of the
  models that are not cached (epochs x steps per epoch x the measured seconds of one
  training step of that loss, architecture and batch size), plus the notebook's own work
  (its gradient evaluations, forward passes, Monte-Carlo draws, dense eigenproblems and
  matrix products, each times its measured cost) and a measured fixed cost per notebook
  and per figure;
* the state of its kept **reference** run (``reference/<profile>/``).

The plan knows a notebook's zoo calls and its work before running it because each
notebook *declares* them here (:data:`DECLARATIONS`): a function of the notebook's
resolved parameters that returns its :func:`robattr.zoo.get_model` arguments, and one
that returns its work as :class:`Work` items. ``tests/test_plan.py`` executes notebooks
with an empty zoo and checks that the models they trained are exactly the declared ones,
so a notebook that changes its zoo calls without its declaration fails a test.

The work counts are first-order counts, not fits: each item is what the notebook's
loops call (an attack of ``steps`` steps on ``n`` images through a map of ``m`` samples is
``steps`` attack steps of ``n * m`` rows), costed by a linear model per call,
``t0 + rows * t1``, whose two constants are measured per model shape and kind of pass
(forward, gradient, gradient of a gradient, Hessian-vector product, attack step) by
:func:`calibrate`, on random inputs, taking the fastest of several runs and, on a CPU, the
faster of one thread and torch's thread count: the estimate is for an unloaded machine.
(On a loaded CPU, torch's threads wait for busy cores and small passes run tens to
hundreds of times slower than with one thread: a calibration at the full thread count
would measure the load, and a notebook run that way is slowed as much, which no estimate
foresees; ``OMP_NUM_THREADS=1`` avoids it on a shared machine.) Calibrations are
cached in ``<cache>/plan/`` by device name, torch version, on a CPU thread count, and
:data:`CALIBRATION_VERSION`. :func:`check_against_stamps` (the book's last build)
and :func:`check_run` (one executed notebook) compare the estimates with real runs;
:func:`check_training` compares the training estimates with the zoo's recorded epochs.
"""
from __future__ import annotations

import contextlib
import fnmatch
import json
import math
import os
import platform
import statistics
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from robattr.book.notebooks import Notebook, discover, project_root
from robattr.book.params import ParameterError
from robattr.book.profiles import effective_train_size, load_profile, resolve
from robattr.catalog import NUM_CLASSES, SHAPES, TEST_SIZES

__all__ = ["Work", "Declaration", "DECLARATIONS", "TRAIN_SIZES", "declared_models",
           "declared_work", "Calibration", "calibrate", "plan", "Plan", "NotebookPlan",
           "ModelPlan", "format_table", "check_against_stamps", "check_run", "format_check",
           "check_training", "format_training_check"]

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
        shape = _dataset_shape(dataset)
    if classes is None:
        classes = NUM_CLASSES.get(dataset, 1000 if dataset is None else 10)
    key = f"{arch}:{'x'.join(str(int(s)) for s in shape)}:{int(classes)}"
    return key + (":float64" if float64 else "")


def _dataset_shape(dataset: str) -> tuple:
    if dataset in SHAPES:
        return SHAPES[dataset]
    if dataset == "flowers102":
        return (3, 64, 64)
    return (3, 224, 224)                                # an ImageFolder path


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
    return Work("numpy", "numpy", 1, float(n), what)


def eigh(size, count=1, what="eigh"):
    return Work("eigh", "eigh", float(count), float(size), what)


def matmul(count, m, k, n, what="matmul"):
    """``count`` dense float64 products of an (m, k) and a (k, n) matrix."""
    return Work("matmul", "matmul", float(count), float(count) * m * k * n, what)


def _zoo_config(cfg: dict) -> dict:
    """The zoo configuration of ``get_model`` arguments (a zoo configuration as it is)."""
    if "loss" in cfg:
        return cfg
    from robattr import zoo

    spec = dict(cfg)
    return zoo.config(spec.pop("dataset"), spec.pop("arch"), spec.pop("method", "ce"), **spec)


def steps_of(cfg: dict, n: float, batch: int | None = None, what="training steps") -> Work:
    """``n`` training steps of a zoo configuration or of ``get_model`` arguments
    (``batch`` overrides the batch size)."""
    sig = _step_signature(_zoo_config(cfg), batch)
    return Work("step", sig, float(n), 0.0, what)


# --------------------------------------------------------------------------- declarations
Models = Callable[[dict], list]
WorkFn = Callable[[dict], list]


@dataclass(frozen=True)
class Declaration:
    """What a notebook asks of the zoo and what it computes, as functions of its
    resolved parameters: ``models(p)`` returns ``get_model`` argument dicts (``dataset``,
    ``arch``, ``method`` and the keywords), in call order; ``work(p)`` a list of
    :class:`Work`; ``data(p)`` the datasets it reads (default: ``p["dataset"]`` and the
    datasets of its zoo models)."""

    models: Models
    work: WorkFn
    data: Callable[[dict], list] | None = None


def _m(dataset, arch, method="ce", **hp) -> dict:
    return {"dataset": dataset, "arch": arch, "method": method, **hp}


def _flat(*items) -> list:
    out = []
    for it in items:
        if isinstance(it, Work):
            out.append(it)
        else:
            out.extend(_flat(*it))
    return out


def _values(dataset):
    """Values of one input (C x H x W): the outputs of an attribution map."""
    return math.prod(_dataset_shape(dataset))


# -- the cross-paper matrix ------------------------------------------------------------
_MATRIX_ROWS = {"CE": ("ce", {}), "AT-linf": ("at", {}), "TRADES": ("trades", {}),
                "IG-NORM": ("ig_norm", {"batch_size": 16}), "IGR": ("igr", {}), "SSR": ("ssr", {}),
                "Hessian": ("hessian", {}), "l2": ("l2", {}), "l2+cosd": ("l2_cosd", {})}


def _matrix_models(p):
    out = []
    for name in p["rows"]:
        if name == "AT-l2":
            e = p["at_l2_eps"]
            method, hp = "at", dict(norm="l2", eps=e, steps=7, step_size=e / 4)
        else:
            method, hp = _MATRIX_ROWS[name]
        out.append(_m(p["dataset"], p["arch"], method, epochs=p["epochs"],
                      activation="softplus", beta=p["beta"], **hp))
    return out


def _protocol_000(fam, n, eps_list, steps, methods, attacks=("topk",), *, surrogate=False,
                  eval_rows=None, random_baseline=False, what="000 protocol"):
    """robattr.evaluate.attack_eval_000 for each attack and attacked method: the clean
    maps, per budget the attack (and for "manipulate" the target map) and the maps of the
    attacked (and random) inputs. ``methods``: {name: rows per image of its map}."""
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


def _matrix_work(p):
    d, fam = p["dataset"], family(p["dataset"], p["arch"])
    n, out = p["n_eval"], []
    for cfg in _matrix_models(p):
        out.append(steps_of(cfg, 2 * p["n_cost_repeats"], batch=64, what="cost: timed steps"))
        m000 = {"SM": 1, "IG": p["n_ig_steps"], "SG": p["n_samples_000"], "UG": p["n_samples_000"]}
        for name, rows in m000.items():      # attack_auc_000
            out += _protocol_000(fam, n, p["eps_000"], p["n_steps_000"], {name: rows},
                                 what="000")
            out.append(grads(fam, n, rows, what="000: clean map"))
        for norm, steps in (("l2", 20), ("linf", p["n_steps_linf_001"])):   # deviation_bounds_001
            out += _bounds_001(fam, d, n, 1, norm, steps, 10)
        for _ in range(2):                    # certified_eps_002, twice
            out.append(grads(fam, n, p["n_samples_002"], what="002: smoothed map"))
            out += attack(fam, n, 10, 8, what="002: attack")
            out.append(grads(fam, n, 64, 2, what="002: check"))
        for _ in range(4):                    # interpretation_003, four methods
            out.append(grads(fam, n, p["n_rps_003"] + 1, what="003: RPS"))
            out += curve(fam, n, 20, "003: insertion") + curve(fam, n, 20, "003: adv-insertion")
            out += attack(fam, n, p["n_steps_003"], 1, what="003: targeted attack")
            out.append(grads(fam, n, 2, what="003: maps"))
        out += pgd(fam, n, p["n_pgd_004"], "004: pgd")   # retrieval_004 (SimGrad, RelEx)
        out.append(grads(fam, n, 1, what="004: SimGrad"))
        out += attr(fam, n, "relex", epochs=p["n_relex_004"], n_noisy=8, what="004: RelEx")
        out += curve(fam, n, 16, "004: deletion") * 4 + [fwd(fam, n, 2, what="004: retrieval")]
    return out


def _bounds_001(fam, dataset, n, m_rows, norm, steps, direct_steps, lanczos=100):
    """robattr.bounds.evaluate_bounds: the Lanczos iteration (one jvp and one vjp of the
    map per step, at most ``lanczos``), for l-inf the dense Jacobian (one vjp per value of
    the map) and Thm 2's sum over ``J^T J`` (one d x d x d product per image,
    robattr.bounds.linf_deviation_bound), the paper's attack and the direct attack."""
    d = _values(dataset)
    out = [grads2(fam, n, m_rows, 1, "001: the map's graph"),
           hvps(fam, n, m_rows, 2 * lanczos, "001: Lanczos"),
           grads2(fam, n, m_rows, 4, "001: Taylor constant")]
    if norm == "linf":
        out += [hvps(fam, n, m_rows, d, "001: dense Jacobian"),
                matmul(n, d, d, d, "001: l-inf bound, J^T J")]
    out += attack(fam, n, steps, m_rows, what="001: paper's attack")
    out += attack(fam, n, direct_steps, m_rows, what="001: direct attack")
    return out


# -- example chapter ---------------------------------------------------------------------
def _digits_saliency_models(p):
    return [_m(p["dataset"], p["arch"], epochs=p["epochs"], seed=p["seed"])]


def _digits_saliency_work(p):
    fam = family(p["dataset"], p["arch"])
    return [grads(fam, p["n_show"], 1, 10, "Grad maps"), fwd(fam, TEST_SIZES.get(p["dataset"], 0))]


def _attribution_methods_models(p):
    return [_m(p["dataset"], p["arch"], epochs=p["epochs"], seed=0)]


def _all_maps(fam, images, n, steps, epochs):
    return _flat(attr(fam, images, m) for m in ("grad", "input_x_grad", "guided_backprop", "lrp",
                                                "grad_cam", "deeplift")) + _flat(
        attr(fam, images, "integrated_gradients", steps=steps),
        attr(fam, images, "smoothgrad", n_samples=n),
        attr(fam, images, "uniform_grad", n_samples=n),
        attr(fam, images, "ball_smooth", n_samples=n),
        attr(fam, images, "relex", n_noisy=n, epochs=epochs),
        attr(fam, images, "meaningful_perturbation", iterations=epochs))


def _attribution_methods_work(p):
    fam = family(p["dataset"], p["arch"])
    photo = family(shape=(3, p["photo_size"], p["photo_size"]), arch="resnet18", classes=1000)
    return (_all_maps(fam, 1, p["n_samples"], p["ig_steps"], p["relex_epochs"])
            + _all_maps(photo, 1, p["photo_samples"], p["ig_steps"],
                        max(10, p["relex_epochs"] // 5))
            + [grads2(fam, 1, 3, 8, "differentiability check: 8 maps, 24 rows"),
               grads(fam, 1, 125, what="IG completeness")])


def _attacks_models(p):
    from robattr.train import LOSSES

    return [_m(p["dataset"], p["arch"], epochs=p["epochs"], seed=0)] + [
        _m(p["dataset"], p["arch"], name, epochs=p["train_epochs"], seed=p["seed"],
           activation="softplus", beta=3.0) for name in LOSSES]


def _attacks_work(p):
    from robattr.train import LOSSES

    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    out = _flat(attack(fam, 1, p["steps"], surrogate=True, what="five attacks") for _ in range(5))
    for _ in LOSSES:
        out += pgd(fam, n, 10) + [grads(fam, n, 5, what="RPS")]
    out += _flat(attack(fam, 1, p["steps"], surrogate=True, what="budgets") for _ in range(4))
    return out


# -- joo2023 -----------------------------------------------------------------------------
def _joo_specs(p, common):
    d, a = p["dataset"], p["arch"]
    return [_m(d, a, "ce", **common), _m(d, a, "hessian", lam=p["hessian_lam"], **common),
            _m(d, a, "l2", lam=p["lam"], eps=p["train_eps"], **common),
            _m(d, a, "l2_cosd", lam=p["lam"], lam_cos=p["lam_cos"], eps=p["train_eps"], **common)]


def _joo_train(p):
    """The training options the joo2023 notebooks pass to every zoo model."""
    return dict(epochs=p["epochs"], lr=p["lr"], batch_size=p["batch_size"],
                optimizer=p["optimizer"], weight_decay=p["weight_decay"],
                milestones=p["milestones"])


def _joo_common(p):
    return dict(activation="softplus", beta=p["beta"], **_joo_train(p))


def _table1_models(p):
    common = _joo_common(p)
    return _joo_specs(p, common) + [_m(p["dataset"], p["arch"], "cosd", lam_cos=p["break_lam_cos"],
                                       eps=p["train_eps"], **common)]


def _table1_work(p):
    fam, n, r = family(p["dataset"], p["arch"]), p["n_eval"], p["rps_samples"]
    out = []
    for _ in range(4):                      # models
        for _ in range(4):                  # Grad, xGrad, GBP, LRP
            out += [grads(fam, n, r + 1, what="RPS"), grads(fam, n, 2, what="maps")]
            out += curve(fam, n, 20, "insertion") + curve(fam, n, 20, "adv-insertion")
            out += attack(fam, n, p["attack_steps"], what="targeted attack")
        out.append(grads(fam, n, 2 * len(p["rps_eps_list"]) * (r + 1), what="appendix RPS"))
        extra = [e for e in p["attack_eps_list"] if e != p["attack_eps"]]
        for _ in p["table4_methods"]:
            out += _flat(attack(fam, n, p["attack_steps"], what="Table 4") for _ in extra)
            out += _flat(curve(fam, n, 20, "Table 4 adv-insertion") for _ in p["attack_eps_list"])
    out += [grads(fam, n, r + 1, 5, "RPS: guard, broken maps, large noise"),
            fwd(fam, TEST_SIZES.get(p["dataset"], 0), 2, what="accuracy")]
    return out + curve(fam, n, 20, "broken maps: insertion") * 2


def _table2_models(p):
    common = _joo_common(p)
    grid = [_m(p["dataset"], p["arch"], "l2_cosd", lam=lm, lam_cos=lc, eps=p["train_eps"], **common)
            for lc in p["grid_lam_cos"] for lm in p["grid_lam"]]
    return _joo_specs(p, common) + grid


def _table2_work(p):
    fam = family(p["dataset"], p["arch"])
    out = [steps_of(cfg, 2 * p["timing_rounds"], batch=p["batch_size"], what="timed steps")
           for cfg in _joo_specs(p, _joo_common(p))]
    n_grid = len(p["grid_lam_cos"]) * len(p["grid_lam"])
    return out + [grads(fam, p["n_eval"], p["rps_samples"] + 1, n_grid, "grid RPS")]


def _alignment_models(p):
    return _joo_specs(p, _joo_common(p)) + [_m(p["dataset"], p["arch"], "ce", **_joo_train(p))]


def _alignment_work(p):
    fam = family(p["dataset"], p["arch"], float64=True)
    small = family(shape=(1, 1, 32), arch="mlp", classes=4, float64=True)   # sample_random_mlp
    n, k, it, ne = p["n_eval"], len(p["alphas"]), p["power_iters"], len(p["eps_l2"])
    d = math.prod(_dataset_shape(p["dataset"]))
    frob = d if d <= 1024 else 0                              # bounds.FROBENIUS_MAX_D
    out = [grads(fam, n, 2, 2 * k * 5, "Lemma 3 / Prop 5"), grads(fam, n, 2, 8, "exp logit"),
           grads(small, 8, 2, 2 * k * p["n_random"], "random nets: scaling"),
           grads(small, 16, 1, 4 * p["n_random"], "random nets: homogeneity"),
           grads(fam, n, 1, 4, "trained: homogeneity"),
           hvps(small, 4, 1, p["n_random"] * (it + 32), "random nets: Thm 6 power iteration"),
           grads2(small, 4, 1, p["n_random"] * ne, "random nets: Thm 6"),
           grads(small, 4, 2, p["n_random"] * ne)]
    for _ in range(5):                                         # trained models, Thm 6
        out += [hvps(fam, n, 1, it + frob, "trained: Thm 6 power iteration, Frobenius"),
                grads2(fam, n, 1, ne, "trained: Thm 6"), grads(fam, n, 2, ne)]
    return out + [grads(fam, n, 4, what="bound terms")]


def _toy_work(p):
    fam = family(shape=(1, 1, 2), arch="mlp", classes=2)
    n, e, pairs = p["n_train"], p["epochs"], p["n_pairs"]
    return [grads(fam, n, 1, 4 * e, "fit (a)-(c), strong MaxEnt"),
            grads2(fam, n, 2, e, "fit (d): l2 + cosd"),
            fwd(fam, 32000, 1, 6, "decision grids"),
            grads(fam, pairs, 4, 6, "alignment of random pairs")]


# -- lim2021 -----------------------------------------------------------------------------
def _natural(p):
    """robattr.lim2021.chapter_model: the zoo's model unless the user gives weights."""
    return [] if p.get("weights") else [_m(p["dataset"], p["arch"])]


def _natural_and_at(p):
    return _natural(p) + ([] if p.get("robust_weights") else [_m(p["dataset"], p["arch"], "at")])


def _gradient_explainers(fam, n, p, deeplift=True):
    """SimGrad, SmoothGrad, IntGrad, (DeepLIFT,) Grad-CAM on ``n`` images."""
    out = (attr(fam, n, "grad") + attr(fam, n, "smoothgrad", n_samples=p["sg_samples"])
           + attr(fam, n, "integrated_gradients", steps=p["ig_steps"]))
    if deeplift:
        out += attr(fam, n, "deeplift")
    return out + attr(fam, n, "grad_cam")


def _clean_classes_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    c = NUM_CLASSES.get(p["dataset"], 10)
    k = p["n_class_images"]
    relex = dict(epochs=p["relex_epochs"], n_noisy=p["n_noisy"])
    out = _gradient_explainers(fam, n, p) + attr(fam, n, "relex", **relex)
    out += _flat(curve(fam, n, 64, "deletion / preservation") for _ in range(12))
    out += pgd(fam, k, p["pgd_steps"])
    for _ in range(2):                                        # clean and attacked, every class
        out += _gradient_explainers(fam, c * k, p, deeplift=False)
        out += attr(fam, c * k, "relex", **relex) + [fwd(fam, c * k, 5)]
    out += attr(fam, c * k, "relex", **relex) + attr(fam, c, "relex", **relex)
    return out + _flat(attr(fam, p.get("n_compare", 0), "relex", what="masking comparison",
                            **relex) for _ in range(2))


def _all_masks(fam, n, p, long=None, mask_iterations=None):
    out = _gradient_explainers(fam, n, p)
    if mask_iterations:
        out += attr(fam, n, "meaningful_perturbation", iterations=mask_iterations)
    if long:
        out += attr(fam, n, "relex", epochs=long, n_noisy=p["n_noisy"])
        out += attr(fam, n, "relex", epochs=p["relex_epochs"], batch=False)
    else:
        out += attr(fam, n, "relex", epochs=p["relex_epochs"], n_noisy=p["n_noisy"])
    return out


def _untargeted_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    out = []
    for _ in range(2):
        out += _all_masks(fam, n, p, p["relex_epochs_long"], p["mask_iterations"])
        for _ in p["eps_paper"]:
            out += pgd(fam, n, p["pgd_steps"]) + [fwd(fam, n, 2)]
            out += _all_masks(fam, n, p, p["relex_epochs_long"], p["mask_iterations"])
            out += [fwd(fam, n, 2, 9, "retrieval")] + _flat(curve(fam, n, 64) for _ in range(18))
    return out


def _targeted_work(p):
    fam, n, s = family(p["dataset"], p["arch"]), p["n_eval"], p["attack_steps"]
    out = attr(fam, n, "relex", epochs=p["relex_epochs"], n_noisy=p["n_noisy"])
    rows = {"SimGrad": 1, "SmoothGrad": p["attack_samples"], "IntGrad": p["attack_samples"],
            "GradCAM": 1}
    for attack_name in ("structured", "unstructured"):
        for r in rows.values():
            if attack_name == "structured":
                out.append(grads(fam, n, r, what="target maps"))
            out += attack(fam, n, s, r, surrogate=True, what=f"{attack_name} attack")
    out += pgd(fam, n, s) + _all_masks(fam, 18 * n, p)
    out += _flat(curve(fam, n, 1, "retrieval") for _ in range(16 * 6))
    return out + attr(fam, n, "relex", epochs=p["relex_epochs"], n_noisy=p["n_noisy"])


def _theory_relex_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_images"]
    small = family(shape=(1, 1, 16), arch="mlp", classes=5, float64=True)
    g = p["n_grid"]
    rows_dirs = n * (p["n_dirs"] + 1)
    relex = dict(epochs=p["relex_epochs"], n_noisy=p["n_noisy"])

    def thm1(f, rows, repeat=1):
        return [grads(f, rows, 1, repeat * (2 * g + 4), "Thm 1: crossing search"),
                fwd(f, rows, 1, repeat * 30, "Thm 1: bisection")]

    out = thm1(small, 8, 22 * p["n_random"])
    for _ in range(2):
        out += attr(fam, n, "relex", **relex) + thm1(fam, rows_dirs, 3)
        out += [grads(fam, n, 1, 5, "Eq. 7")]
    for _ in p["lambda1_grid"]:
        out += attr(fam, n, "relex", **relex) + thm1(fam, rows_dirs)
    return out + [grads(fam, n, 2, 2 * 2 * 5 * max(1, p["n_dirs"] // 4), "Thm 2")]


# -- wang2020 ----------------------------------------------------------------------------
def _methods_000(p):
    return {"SM": 1, "IG": p["ig_steps"], "SG": p["n_samples"], "UG": p["n_samples"]}


def _table2_runs(p):
    """The runs of wang2020/table2_attacks: robattr.wang2020.table2_runs (one per block of
    ``blocks`` whose data are here, else one on ``dataset``)."""
    from robattr.wang2020 import table2_runs

    return table2_runs(p["blocks"], dataset=p["dataset"], k=p["k"], imagenet_dir=p["imagenet_dir"],
                       imagenet_weights=p["imagenet_weights"], echo=None)


def _table2_attacks_models(p):
    return [_m(r["dataset"], p["arch"], "ce", epochs=p["epochs"])
            for r in _table2_runs(p) if not r.get("weights")]


def _table2_attacks_data(p):
    from robattr.wang2020 import TABLE2_BLOCKS

    names = [TABLE2_BLOCKS[b]["dataset"] or p["imagenet_dir"] or "ImageNet (imagenet_dir)"
             for b in p["blocks"]]
    return list(dict.fromkeys(names or [p["dataset"]]))


def _table2_attacks_work(p):
    m = _methods_000(p)
    out = []
    for r in _table2_runs(p):
        if r.get("weights"):
            fam = family(shape=(3, 224, 224), arch="resnet50", classes=1000)
            pool = 4 * p["n_eval"]
        else:
            fam = family(r["dataset"], p["arch"])
            pool = TEST_SIZES.get(r["dataset"], 4 * p["n_eval"])
        out += _protocol_000(fam, p["n_eval"], p["eps_255"], p["steps"], m, ("topk", "manipulate"),
                             surrogate=True, random_baseline=True, eval_rows={"x": 1})
        out += [grads(fam, p["n_eval"], sum(m.values()), what="no-attack k-in"),
                grads(fam, p["n_eval"], p["n_samples"], 2, "UG readings"),
                fwd(fam, pool, what="correctly classified images")]
    return out


def _table3_4_models(p):
    d, a, e = p["dataset"], p["arch"], p["epochs"]
    at_eps = p["at_eps_255"] / 255
    fixed = [_m(d, a, "ce", epochs=e),
             _m(d, a, "ssr", epochs=e, ssr_beta=float(p["betas"][0]), scale=float(p["ssr_scale"])),
             _m(d, a, "at", epochs=e, norm="l2", eps=at_eps, steps=7, step_size=at_eps / 4),
             _m(d, a, "ig_norm", epochs=p["epochs_ig_norm"], gamma=float(p["ig_norm_gamma"]),
                **({"batch_size": p["batch_size_ig_norm"]} if "batch_size_ig_norm" in p else {}))]
    return fixed + [_m(d, a, "ssr", epochs=e, ssr_beta=float(b), scale=float(p["ssr_scale"]))
                    for b in p["betas"]]


def _table3_4_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    m = _methods_000(p)
    out = []
    for _ in range(4):
        out += _protocol_000(fam, n, p["eps_255"], p["steps"], m, ("topk", "manipulate"),
                             surrogate=True, random_baseline=True, eval_rows={"x": 1})
    for _ in p["betas"]:
        out += _protocol_000(fam, n, p["eps_255"], p["steps"], {"SM": 1}, ("topk",),
                             surrogate=True, random_baseline=True)
        out.append(fwd(fam, TRAIN_SIZES.get(p["dataset"], 0), what="training-set accuracy"))
    return out + _table3_timing(p) + [fwd(fam, TEST_SIZES.get(p["dataset"], 0), 4)]


def _table3_timing(p):
    """Table 3's cost cell (robattr.wang2020.interleaved_step_seconds): a warm-up step and
    ``timing_rounds`` steps of each of SSR, Madry AT and IG-NORM, all at SSR's batch size."""
    specs = _table3_4_models(p)[1:4]                  # SSR, Madry AT, IG-NORM
    batch = _zoo_config(specs[0])["batch_size"]
    return [steps_of(s, p.get("timing_rounds", 0) + 1, batch=batch,
                     what="Table 3 cost: interleaved steps") for s in specs]


def _table5_6_models(p):
    d, a = p["dataset"], p["arch"]
    at_eps = p["at_eps_255"] / 255
    out = [_m(d, a, "ce", epochs=p["epochs"]),
           _m(d, a, "at", epochs=p["epochs"], norm="linf", eps=at_eps, steps=p["at_steps"],
              step_size=at_eps / 4),
           _m(d, a, "ce", epochs=p["fig7_epochs"])]
    return out + [_m(d, a, "at", epochs=p["fig7_epochs"], norm="l2", eps=e / 255,
                     steps=p["at_steps"], step_size=e / 255 / 4) for e in p["fig7_eps_255"]]


def _table5_6_work(p):
    fam, n, nt = family(p["dataset"], p["arch"]), p["n_eval"], p["n_transfer"]
    m = _methods_000(p)
    proto = dict(surrogate=True, random_baseline=True)
    out = []
    for _ in range(2):                                             # Table 5
        out += _protocol_000(fam, n, p["eps_255"], p["steps"], m, ("topk", "manipulate"),
                             eval_rows={"x": 1}, **proto)
        out.append(grads(fam, n, sum(m.values()), what="no-attack k-in"))
    out += _protocol_000(fam, nt, p["eps_255"], p["steps"], {"SM": 1}, ("mass_center",),
                         eval_rows=m, **proto)                     # Table 6
    for _ in range(1 + len(p["fig7_eps_255"])):                    # Fig. 7
        out += _protocol_000(fam, n, p["eps_255"], p["steps"], {"SM": 1}, ("topk", "manipulate"),
                             **proto) + [grads(fam, n, 1)]
    out += [grads(fam, 1, p["ug_samples"], len(p["ug_radii_255"]), "Fig. 10")]
    if p["photo_size"]:
        photo = family(shape=(3, p["photo_size"], p["photo_size"]), arch="cnn", classes=10)
        out.append(grads(photo, 1, p["ug_samples"], len(p["ug_radii_255"]), "Fig. 10 photo"))
    out += _protocol_000(fam, nt, p["eps_255"], p["steps"], {"UG": p["n_samples"]},
                         ("mass_center",), eval_rows=m, **proto)
    return out + [fwd(fam, TEST_SIZES.get(p["dataset"], 0), 6, what="pick")]


def _gauss_newton_models(p):
    return [_m(p["dataset"], p["arch"], "ce", epochs=p["epochs"]),
            _m(p["dataset"], p["arch"], "ce", activation="softplus", beta=p["beta"], epochs=10)]


def _gauss_newton_work(p):
    fam = family(p["dataset"], p["arch"], float64=True)
    n, d = p["n_eval"], math.prod(_dataset_shape(p["dataset"]))
    out = [hvps(fam, n, 1, 2 * d, "loss Hessians"), eigh(d, 2 * n, "Gauss-Newton spectra"),
           grads(fam, n, 1, 2 * 10, "Gauss-Newton Jacobians")]
    for dim in p["dims"]:
        tiny = family(shape=(1, 1, dim), arch="mlp", classes=p["n_classes"])
        out += [grads(tiny, 1, 1, p["n_classes"] * p["repeats"], "B1: Jacobian"),
                eigh(dim, p["repeats"], "B1: dense spectrum")]
    relu = family(p["dataset"], p["arch"])
    return out + _flat(pgd(relu, n, p["steps"]) for _ in p["deltas"])


def _geometry_models(p):
    return [_m(p["dataset"], p["arch"], "ce", activation="softplus", beta=p["beta"],
               epochs=p["epochs"])]


def _geometry_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_eval"]
    net = family(p["dataset"], "mlp")
    two_d = family(shape=(1, 1, 2), arch="mlp", classes=1)
    out = [grads2(fam, n, 1, 3 * p["steps"], "Thm 1: searches"),
           grads2(net, n, 1, 3 * p["steps"] * p["n_random"], "Thm 1: random nets"),
           fwd(fam, n, sum(p["stein_ns"]), 2, "Prop 1: Stein"),
           fwd(net, n, sum(p["stein_ns"]), 2, "Prop 1: Stein, random net"),
           grads(fam, n, 1, 2 * len(p["stein_ns"]), "Prop 1: path gradient"),
           grads2(two_d, 6400, 1, 2 * p["n_quad"], "Thm 2: quadrature"),
           hvps(fam, n, p["n_hess"], 30 * len(p["sigmas"]), "Thm 2: smoothed Hessian"),
           grads2(fam, n, 1, 2 * p["steps"], "Prop 2: searches"),
           hvps(fam, n, 1, 50, "Thm 3: Hessian norm"),
           hvps(net, n, 1, 50 * p["n_random"], "Thm 3: random nets")]
    return out + [grads(fam, n, 2, len(p["deltas"]) * (1 + p["n_random"]), "Thm 3: radii")]


# -- wangkong2023 ------------------------------------------------------------------------
def _ig_gradient_models(p):
    d, e = p["dataset"], p["train_epochs"]
    soft = dict(activation="softplus", beta=p["beta"])
    return [_m(d, p["arch"], p["model_method"], epochs=e, seed=0, **soft),
            _m(d, "cnn", p["model_method"], epochs=e, seed=0, **soft),
            _m(d, "cnn", p["model_method"], epochs=e, seed=0)]


def _ig_gradient_work(p):
    fam, n = family(p["dataset"], p["arch"]), p["n_images"]
    d = math.prod(_dataset_shape(p["dataset"]))
    small = family(shape=(1, 1, 8), arch="mlp", classes=3)
    big = family(shape=(1, p["large_size"], p["large_size"]), arch="mlp", classes=10)
    steps_study = (2 * sum(p["steps_grid"]) + p["limit_steps"]
                   + len(p["beta_grid"]) * sum(p["beta_steps"]))
    out = [hvps(small, 1, 8 * 4, p["n_random_nets"] * 8, "C.1: random nets"),
           hvps(fam, n, p["ig_steps"], d, "C.1: trained model"),
           hvps(fam, n, steps_study, d, "C.1: steps and beta studies"),
           hvps(big, 1, p["large_steps"], p["large_size"] ** 2, "C.1: larger input")]
    lin = family(p["dataset"], p["arch"], float64=True)
    m = p["n_linearity"]
    out += [grads2(lin, m, p["ig_steps"] + 1, 3 * (2 + 2 * p["n_delta"]), "B.1: linearity"),
            grads2(lin, m, 1, 2 * 2 * 15, "B.1: linearization ratio")]
    res = family(shape=(3, p["imagenet_size"], p["imagenet_size"]), arch="resnet18", classes=1000)
    return out + [grads2(res, 1, 1, 1, "ResNet-18 map"),
                  hvps(res, 1, 1, 2 * p["lanczos_max_iter"], "ResNet-18 Lanczos")]


def _t78(p):
    """The Tables 7-8 runs of wangkong2023/tables_bounds (robattr.blocks.table78_runs_001)."""
    from robattr.blocks import table78_runs_001

    return table78_runs_001(p["blocks"], dataset=p["dataset"], paper_dataset=p["paper_dataset"],
                            eps_l2=p["eps_l2"], eps_linf=p["eps_linf"], ref_dim=p["ref_dim"],
                            echo=None)


def _tables_bounds_models(p):
    def get(name, ds):
        return _m(ds, p["arch"], name, epochs=p["train_epochs"], seed=0, activation="softplus",
                  beta=p["beta"])

    blocks = [get(name, b["dataset"]) for b in _t78(p) for name in p["models"]]
    rest = list(p["table6_models"]) + list(p["t910_models"]) + ["ig_norm"]
    return blocks + [get(name, p["dataset"]) for name in rest]


def _tables_bounds_data(p):
    from robattr.blocks import WANGKONG2023_TABLE78

    return list(dict.fromkeys([p["dataset"]] + [WANGKONG2023_TABLE78[b] for b in p["blocks"]]))


_ATTR_ROWS = {"sm": lambda p: 1, "ixg": lambda p: 1, "ig": lambda p: p["ig_steps"]}


def _tables_bounds_work(p):
    rows = _ATTR_ROWS[p["attribution"]](p)
    ds = p["direct_steps"]
    out = []

    def bounds(dataset, n, r, norm):
        fam = family(dataset, p["arch"])
        steps = p["l2_steps"] if norm == "l2" else p["linf_steps"]
        return (_bounds_001(fam, dataset, n, r, norm, steps, ds)
                + [grads(fam, n, r, 2, "random deviation")])

    for b in _t78(p):
        for nm in ("l2", "linf"):
            out += _flat(bounds(b["dataset"], p["n_eval"], rows, nm)
                         for _ in p["models"] for _ in b[f"eps_{nm}"])
        out.append(fwd(family(b["dataset"], p["arch"]), TEST_SIZES.get(b["dataset"], 0),
                       2 * len(p["models"]), what="correct images"))
    d = p["dataset"]
    for _ in p["table6_models"]:
        for a in ("sm", "ixg", "ig"):
            out += _flat(bounds(d, p["table6_n_eval"], _ATTR_ROWS[a](p), nm)
                         for nm in ("l2", "linf"))
    for _ in dict.fromkeys(p["t910_models"]):
        out += _flat(bounds(d, p["t910_n_eval"], rows, nm) for nm in ("l2", "linf"))
    out += _flat(bounds(d, 8, p["ig_steps"], "l2") for _ in range(2))
    return out + [fwd(family(d, p["arch"]), TEST_SIZES.get(d, 0), 4, what="correct images")]


def _theory_bounds_models(p):
    soft = dict(epochs=p["train_epochs"], seed=0, activation="softplus", beta=p["beta"])
    return [_m(p["dataset"], p["arch"], p["model_method"], **soft),
            _m(p["dataset"], "cnn", p["model_method"], **soft)]


def _theory_bounds_work(p):
    fam, n, d = family(p["dataset"], p["arch"]), p["n_eval"], p["dataset"]
    pix = math.prod(_dataset_shape(d))
    s, ig = p["attack_steps"], p["ig_steps"]
    out = []
    for rows in (1, 1, ig):                                # SM, Input*gradient, IG
        out += [hvps(fam, n, rows, 2 * 150 + pix, "spectral norms (Lanczos, power, dense)"),
                grads2(fam, n, rows, 4 + 2 * s, "Thm 1 and l-inf attacks"),
                hvps(fam, n, rows, pix + 10, "dense Jacobian, Taylor constants")]
    out += [grads2(family(d, "cnn"), n, 1, 4, "linearity, cnn"), grads2(fam, n, 1, 4, "linearity"),
            grads(fam, n, 8, 6, "Prop 1"),
            numpy_draws(p["n_random"] * 2 ** (p["max_vertex_dim"] - 1) * p["max_vertex_dim"] / 2,
                        "Thm 2: vertices"),
            numpy_draws(p["n_random"] * 400, "random checks")]
    return out


# -- wangkong2025 ------------------------------------------------------------------------
def _smoothed_models(p):
    return [_m(p["dataset"], p["arch"], m, epochs=p["epochs"], seed=0, activation="softplus",
               beta=p["beta"]) for m in p["methods"]]


def _attack_check_work(p):
    fam, n, ig = family(p["dataset"], p["arch"]), p["n_eval"], p["ig_steps"]
    out = []
    for _ in p["methods"]:
        for _ in p["radii"]:
            out += [grads(fam, n, p["n_cert"] * ig, what="budgets")]
            out += attack(fam, n, p["steps"], p["n_attack"] * ig, restarts=p["restarts"],
                          what="attack on the smoothed map")
            out += [grads(fam, n, p["n_check"] * ig, 2, "check")]
    return out + [grads(fam, 1, p["n_check"] * ig, 2, "exercise")]


def _center_models(p):
    return [_m(p["dataset"], p["arch"], p["method"], epochs=p["epochs"], seed=0,
               activation="softplus", beta=p["beta"])]


def _center_work(p):
    fam = family(p["dataset"], p["arch"])
    return [grads(fam, 1, p["n_pred"] + p["n_cert"], p["n_eval"], "center smoothing"),
            grads(fam, 1, p["n_ball"], p["n_eval"], "ball smoothing"),
            grads(fam, p["n_fig"], p["n_ball"] * p["ig_steps"], 2, "Fig. 3"),
            numpy_draws(3 * 20000 * 5)]


def _t567(p):
    """The Tables 5-7 runs of wangkong2025/certified_eps (robattr.blocks.table567_runs_002)."""
    from robattr.blocks import table567_runs_002

    return table567_runs_002(p["blocks"], dataset=p["dataset"], imagenet_dir=p["imagenet_dir"],
                             imagenet_weights=p["imagenet_weights"], echo=None)


def _certified_models(p):
    return [_m(r["dataset"], p["arch"], m, epochs=p["epochs"], seed=0, activation="softplus",
               beta=p["beta"]) for r in _t567(p) if not r.get("weights") for m in p["methods"]]


def _certified_data(p):
    from robattr.blocks import WANGKONG2025_TABLE567

    names = [WANGKONG2025_TABLE567[b][0] or p["imagenet_dir"] or "ImageNet (imagenet_dir)"
             for b in p["blocks"]]
    return list(dict.fromkeys([p["dataset"]] + names))


def _certified_work(p):
    out = []
    for i, r in enumerate(_t567(p)):
        if r.get("weights"):
            fam, n_models = family(shape=(3, 224, 224), arch="resnet50", classes=1000), 1
        else:
            fam, n_models = family(r["dataset"], p["arch"]), len(p["methods"])
        k = len(p["radii"]) + (len(p["radii_extra"]) if i == 0 else 0)
        out.append(grads(fam, p["n_eval"], p["n_samples"] * p["ig_steps"], k * n_models,
                         "smoothed IG"))
    return out


def _montecarlo_work(p):
    d = p["d"]
    return [numpy_draws((p["n_ref"] + p["n_samples"] * p["n_repeats"]) * d, "Monte-Carlo draws"),
            eigh(d, 1 + p["n_repeats"], "covariances")]


def _ball_smoothing_work(p):
    n, d = p["n_mc"], p["d"]
    return [numpy_draws(n * (20 * d + 16 * 4 + 2 * d), "Monte-Carlo volumes and fields"),
            numpy_draws(p["n_random"] * 2000, "random fields")]


def _nothing(p):
    return []


#: Every notebook's declaration, by key.
DECLARATIONS: dict[str, Declaration] = {
    "crosspaper/matrix": Declaration(_matrix_models, _matrix_work),
    "example/attacks_and_defenses": Declaration(_attacks_models, _attacks_work),
    "example/attribution_methods": Declaration(_attribution_methods_models,
                                               _attribution_methods_work),
    "example/digits_saliency": Declaration(_digits_saliency_models, _digits_saliency_work),
    "joo2023/table1_robustness": Declaration(_table1_models, _table1_work),
    "joo2023/table2_cost": Declaration(_table2_models, _table2_work),
    "joo2023/theory_alignment": Declaration(_alignment_models, _alignment_work),
    "joo2023/toy_fig1": Declaration(_nothing, _toy_work, data=lambda p: []),
    "lim2021/clean_classes": Declaration(_natural, _clean_classes_work),
    "lim2021/targeted_transfer": Declaration(_natural, _targeted_work),
    "lim2021/theory_relex": Declaration(_natural_and_at, _theory_relex_work),
    "lim2021/untargeted": Declaration(_natural_and_at, _untargeted_work),
    "wang2020/table2_attacks": Declaration(_table2_attacks_models, _table2_attacks_work,
                                           data=_table2_attacks_data),
    "wang2020/table3_4_ssr": Declaration(_table3_4_models, _table3_4_work),
    "wang2020/table5_6_figs": Declaration(_table5_6_models, _table5_6_work),
    "wang2020/theory_gauss_newton": Declaration(_gauss_newton_models, _gauss_newton_work),
    "wang2020/theory_geometry": Declaration(_geometry_models, _geometry_work),
    "wangkong2023/ig_gradient": Declaration(_ig_gradient_models, _ig_gradient_work),
    "wangkong2023/tables_bounds": Declaration(_tables_bounds_models, _tables_bounds_work,
                                              data=_tables_bounds_data),
    "wangkong2023/theory_bounds": Declaration(_theory_bounds_models, _theory_bounds_work),
    "wangkong2025/attack_check": Declaration(_smoothed_models, _attack_check_work),
    "wangkong2025/center_smoothing": Declaration(_center_models, _center_work),
    "wangkong2025/certified_eps": Declaration(_certified_models, _certified_work,
                                              data=_certified_data),
    "wangkong2025/montecarlo": Declaration(_nothing, _montecarlo_work, data=lambda p: []),
    "wangkong2025/theory_ball_smoothing": Declaration(_nothing, _ball_smoothing_work,
                                                      data=lambda p: []),
}


def _declaration(key: str) -> Declaration:
    try:
        return DECLARATIONS[key]
    except KeyError:
        raise ParameterError(f"{key}: no plan declaration in robattr/book/plan.py (add one: "
                             "its zoo models and its work)") from None


def declared_models(key: str, params: dict, train_size: int | None = None) -> list[dict]:
    """The zoo configurations (:func:`robattr.zoo.config`) notebook ``key`` asks for with
    ``params``, each once, in the order of its first call."""
    from robattr import zoo

    out, seen = [], set()
    for spec in _declaration(key).models(params):
        spec = dict(spec)
        cfg = zoo.config(spec.pop("dataset"), spec.pop("arch"), spec.pop("method", "ce"),
                         train_size=train_size, **spec)
        k = _zoo_key(cfg)
        if k not in seen:
            seen.add(k)
            out.append(cfg)
    return out


def declared_work(key: str, params: dict) -> list[Work]:
    """The work items notebook ``key`` runs with ``params``."""
    return [w for w in _declaration(key).work(params) if w.calls or w.rows]


def declared_data(key: str, params: dict) -> list[str]:
    """The datasets notebook ``key`` reads with ``params``."""
    decl = _declaration(key)
    if decl.data is not None:
        return list(decl.data(params))
    names = [params["dataset"]] if "dataset" in params else []
    for cfg in declared_models(key, params):
        if cfg["dataset"] not in names:
            names.append(cfg["dataset"])
    return names


def _step_signature(cfg: dict, batch: int | None = None) -> str:
    """What the seconds of one training step depend on: the configuration without its
    schedule (epochs, learning rate, seed, ...), at ``batch`` (default its batch size)."""
    keep = ("dataset", "arch", "method", "loss", "batch_size", "optimizer", "activation", "beta")
    sig = {k: cfg[k] for k in keep}
    if batch is not None:
        sig["batch_size"] = int(batch)
    return json.dumps(sig, sort_keys=True)


def _zoo_key(cfg: dict) -> str:
    """The zoo key of a configuration: sha256 of its canonical JSON (robattr.zoo's rule)."""
    import hashlib

    text = json.dumps(cfg, sort_keys=True, separators=(",", ":"), ensure_ascii=True,
                      allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


# --------------------------------------------------------------------------- calibration
def _device_slug(device) -> tuple[str, str]:
    """(a file-name-safe key, a description) of a torch device on this machine."""
    import torch

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{platform.processor() or platform.machine()} {torch.get_num_threads()} threads"
    desc = f"{device.type} ({name}), torch {torch.__version__}"
    slug = "".join(c if c.isalnum() or c in "-." else "_" for c in
                   f"{device.type}-{name}-torch{torch.__version__}")
    return slug, desc


@dataclass
class Calibration:
    """Measured costs on one device: ``passes[kind|family] = (t0, t1)`` (seconds per call
    and per row), ``steps[signature]`` (seconds per training step), ``numpy`` (seconds per
    draw), ``eigh`` (seconds per size**3), ``matmul`` (seconds per float64 multiply-add of
    a dense product), ``notebook`` (kernel start and imports) and ``figure`` (one figure
    drawn and shown), seconds."""

    device: str
    description: str
    passes: dict = field(default_factory=dict)
    steps: dict = field(default_factory=dict)
    numpy: float | None = None
    eigh: float | None = None
    matmul: float | None = None
    notebook: float | None = None
    figure: float | None = None

    def cost(self, w: Work) -> float:
        if w.kind == "step":
            return w.calls * self.steps[w.family]
        if w.kind == "numpy":
            return w.rows * self.numpy
        if w.kind == "eigh":
            return w.calls * w.rows ** 3 * self.eigh
        if w.kind == "matmul":
            return w.rows * self.matmul
        t0, t1 = self.passes[f"{w.kind}|{w.family}"]
        return w.calls * t0 + w.rows * t1


#: The way :func:`calibrate` measures; a calibration cached by another version is measured
#: again (2: the faster of one thread and all threads, more repetitions).
CALIBRATION_VERSION = 2


def _calibration_path(slug: str) -> Path:
    from robattr.utils import cache_dir

    return Path(cache_dir()) / "plan" / f"calibration-{slug}-v{CALIBRATION_VERSION}.json"


def _load_calibration(device) -> Calibration:
    slug, desc = _device_slug(device)
    path = _calibration_path(slug)
    try:
        data = json.loads(path.read_text())
        return Calibration(**{**data, "device": str(device), "description": desc})
    except (FileNotFoundError, ValueError, TypeError):
        return Calibration(str(device), desc)


def _save_calibration(cal: Calibration, device) -> None:
    slug, _ = _device_slug(device)
    path = _calibration_path(slug)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(cal), indent=1, sort_keys=True))
    os.replace(tmp, path)


def _timed(fn, sync, budget: float = 0.5, least: int = 3, most: int = 25,
           beat: float | None = None) -> float:
    """The fastest of the timed runs of ``fn()`` after one warm-up (at least ``least``
    runs, more while the total stays under ``budget`` seconds, at most ``most``): on a
    shared machine the other processes only ever add time, so the minimum is the cost of
    the work. ``beat``: a time already measured another way (another thread count); when
    the first timed run is more than twice as slow, measuring on cannot beat it and stops."""
    fn()
    sync()
    times = []
    while len(times) < least or (sum(times) < budget and len(times) < most):
        t = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t)
        if beat is not None and times[0] > 2 * beat:
            break
    return min(times)


@contextlib.contextmanager
def _threads(n: int):
    """torch's intra-op thread count set to ``n`` inside the block."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def _fastest(fn, device, **kw) -> float:
    """:func:`_timed` of ``fn`` on ``device``; on a CPU the faster of one thread and of
    torch's thread count (the one a notebook uses). On an idle machine more threads are
    never much slower than one; on a loaded one, threads that wait for busy cores make a
    small pass tens to hundreds of times slower (measured: a gradient of the digits CNN,
    0.2 ms with one thread, 140 ms with two threads on two busy cores), so a calibration
    at the full thread count alone measures the load, not the work."""
    sync = _sync(device)
    if device.type != "cpu":
        return _timed(fn, sync, **kw)
    import torch

    best = None
    for n in dict.fromkeys((1, torch.get_num_threads())):
        with _threads(n):
            t = _timed(fn, sync, beat=best, **kw)
        best = t if best is None else min(best, t)
    return best


def _sync(device):
    import torch

    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _family_model(fam: str, device):
    import types

    import torch

    from robattr.models import build

    parts = fam.split(":")
    arch, shape, classes = parts[0], tuple(int(s) for s in parts[1].split("x")), int(parts[2])
    info = types.SimpleNamespace(shape=shape, num_classes=classes, mean=(0.5,) * shape[0],
                                 std=(0.25,) * shape[0])
    model = build(arch, info, "softplus", 3.0).to(device).eval()
    dtype = torch.float64 if parts[3:] == ["float64"] else torch.float32
    return model.to(dtype), shape, dtype


_PASSES = ("fwd", "grad", "grad2", "hvp", "astep")


def _measure_pass(kind: str, fam: str, device) -> tuple[float, float]:
    """(t0, t1) of one pass of ``kind`` on the family's model: timed at 1 row and at a
    larger batch, ``t(b) = t0 + b * t1``."""
    import torch

    model, shape, dtype = _family_model(fam, device)
    big = 64 if math.prod(shape) <= 4096 else (16 if math.prod(shape) <= 65536 else 4)

    def run(b):
        x = torch.rand((b, *shape), device=device, dtype=dtype)
        if kind == "fwd":
            def f():
                with torch.no_grad():
                    model(x)
        elif kind == "astep":        # robattr's top-k attack, 4 steps (its setup shared)
            from robattr.attacks import topk_attack

            y = torch.zeros(b, dtype=torch.long, device=device)

            def f():
                topk_attack(model, x, y, k=min(4, shape[-1] * shape[-2]), eps=0.03, steps=4,
                            criterion="mass")
            return _fastest(f, device) / 4
        elif kind == "hvp":
            xg = x.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(model(xg)[:, 0].sum(), xg, create_graph=True)
            v = torch.randn_like(x)

            def f():
                torch.autograd.grad(g, xg, v, retain_graph=True)
        else:
            def f():
                xg = x.clone().requires_grad_(True)
                out = model(xg)[:, 0].sum()
                (g,) = torch.autograd.grad(out, xg, create_graph=kind == "grad2")
                if kind == "grad2":
                    torch.autograd.grad(g.pow(2).sum(), xg)
        return _fastest(f, device)

    t_small, t_big = run(1), run(big)
    t1 = max(0.0, (t_big - t_small) / (big - 1))
    return max(t_small - t1, 1e-6), t1


def _measure_step(sig: str, device) -> float:
    """Seconds of one training step (loss, backward, optimizer step) of a signature, on
    random inputs of the dataset's shape: measured at the batch size on CUDA; on a CPU at
    up to 8 and up to 32 rows and extended linearly to the batch size."""
    import torch

    from robattr import data
    from robattr.models import build
    from robattr.train import OPTIMIZERS, make_loss

    s = json.loads(sig)
    shape = _dataset_shape(s["dataset"])
    classes = NUM_CLASSES.get(s["dataset"], 10)
    info = data.info(s["dataset"]) if s["dataset"] in SHAPES else None
    if info is None:
        import types
        info = types.SimpleNamespace(shape=shape, num_classes=classes, mean=(0.5,) * shape[0],
                                     std=(0.25,) * shape[0])
    model = build(s["arch"], info, s["activation"], s["beta"]).to(device).train()
    loss = make_loss(s["method"], **s["loss"])
    opt = OPTIMIZERS[s["optimizer"]](model.parameters(), 1e-3, 0.0)

    def run(b):
        x = torch.rand((b, *shape), device=device)
        y = torch.randint(0, classes, (b,), device=device)

        def f():
            opt.zero_grad(set_to_none=True)
            value, _ = loss(model, x, y)
            value.backward()
            opt.step()
        return _fastest(f, device, least=2, most=3)

    bs = s["batch_size"]
    if device.type == "cuda" or bs <= 8:
        return run(bs)
    lo, hi = min(bs, 8), min(bs, 32)
    t_lo, t_hi = run(lo), run(hi)
    if hi == bs:
        return t_hi
    return max(t_hi, t_hi + (bs - hi) * (t_hi - t_lo) / (hi - lo))


def _measure_numpy() -> float:
    import numpy as np

    rng = np.random.default_rng(0)

    def f():
        z = rng.standard_normal((100_000, 8))
        (z / np.linalg.norm(z, axis=1, keepdims=True)).sum(0)
    return _timed(f, lambda: None) / 800_000


def _measure_eigh() -> float:
    import torch

    a = torch.rand(384, 384, dtype=torch.float64)
    a = a + a.T
    return _fastest(lambda: torch.linalg.eigvalsh(a), torch.device("cpu")) / 384 ** 3


def _measure_matmul() -> float:
    import torch

    a = torch.rand(8, 256, 256, dtype=torch.float64)
    return _fastest(lambda: a @ a, torch.device("cpu")) / (8 * 256 ** 3)


_PROBE = '''import time, json, os
t = time.perf_counter()
import matplotlib.pyplot as plt
import numpy as np
import robattr
from robattr import viz
viz.set_theme()
for i in range(3):
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(np.arange(100), np.random.default_rng(i).standard_normal(100))
    plt.show()
open(os.environ["ROBATTR_PLAN_PROBE"], "w").write(json.dumps((time.perf_counter() - t) / 3))'''


def _measure_notebook(device) -> tuple[float, float]:
    """(seconds of a notebook with no work: kernel start, imports, papermill; seconds of
    one figure), measured by executing a small notebook as the build does."""
    import tempfile

    import nbformat
    import papermill

    with tempfile.TemporaryDirectory() as tmp:
        src, out, probe = Path(tmp, "probe.ipynb"), Path(tmp, "out.ipynb"), Path(tmp, "fig.json")
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("import torch\nimport pandas\nimport scipy"),
                    nbformat.v4.new_code_cell(_PROBE)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nbformat.write(nb, src)
        old = os.environ.get("ROBATTR_PLAN_PROBE")
        os.environ["ROBATTR_PLAN_PROBE"] = str(probe)
        runs = []
        try:
            for _ in range(2):                 # the faster of two runs, as in _timed
                t = time.perf_counter()
                papermill.execute_notebook(str(src), str(out), progress_bar=False, cwd=tmp,
                                           kernel_name="python3")
                runs.append((time.perf_counter() - t, json.loads(probe.read_text())))
        finally:
            if old is None:
                os.environ.pop("ROBATTR_PLAN_PROBE", None)
            else:
                os.environ["ROBATTR_PLAN_PROBE"] = old
    total, figure = min(runs)
    return max(total - 3 * figure, 0.0), figure


def calibrate(works: list[Work], device="auto", *, notebook: bool = True,
              log: Callable[[str], None] | None = None) -> Calibration:
    """The :class:`Calibration` of ``device`` with every cost ``works`` need, measuring
    (and caching under ``<cache>/plan/``) those not measured yet on this device and
    torch version. ``notebook``: also the fixed cost of a notebook and of a figure."""
    from robattr.utils import get_device

    device = get_device(device)
    cal = _load_calibration(device)
    todo_p = sorted({f"{w.kind}|{w.family}" for w in works if w.kind in _PASSES}
                    - set(cal.passes))
    todo_s = sorted({w.family for w in works if w.kind == "step"} - set(cal.steps))
    need_np = cal.numpy is None and any(w.kind == "numpy" for w in works)
    need_eig = cal.eigh is None and any(w.kind == "eigh" for w in works)
    need_mm = cal.matmul is None and any(w.kind == "matmul" for w in works)
    need_nb = notebook and (cal.notebook is None or cal.figure is None)
    n = len(todo_p) + len(todo_s) + need_np + need_eig + need_mm + need_nb
    if not n:
        return cal
    if log:
        log(f"robattr plan: calibrating {n} cost(s) on {cal.description} (cached afterwards)")
    for key in todo_p:
        kind, fam = key.split("|", 1)
        cal.passes[key] = list(_measure_pass(kind, fam, device))
    for i, sig in enumerate(todo_s):
        if log:
            s = json.loads(sig)
            log(f"  training step {i + 1}/{len(todo_s)}: {s['dataset']} {s['arch']} "
                f"{s['method']}, batch {s['batch_size']}")
        cal.steps[sig] = _measure_step(sig, device)
        _save_calibration(cal, device)
    if need_np:
        cal.numpy = _measure_numpy()
    if need_eig:
        cal.eigh = _measure_eigh()
    if need_mm:
        cal.matmul = _measure_matmul()
    if need_nb:
        cal.notebook, cal.figure = _measure_notebook(device)
    _save_calibration(cal, device)
    return cal


# --------------------------------------------------------------------------- the plan
@dataclass
class ModelPlan:
    """One zoo model of a notebook: ``status`` is ``"cached"`` (in the zoo), ``"train"``
    (this notebook trains it) or ``"shared"`` (an earlier notebook of the plan trains it).
    ``seconds``: the estimated training time (``"train"`` only); ``recorded_*``: what the
    zoo recorded when it trained a cached model."""

    key: str
    config: dict
    status: str
    seconds: float = 0.0
    steps: int = 0
    step_seconds: float | None = None
    recorded_seconds_per_epoch: float | None = None
    recorded_device: str | None = None

    @property
    def label(self) -> str:
        c = self.config
        act = "" if c["activation"] == "relu" else f" {c['activation']}({c['beta']:g})"
        return f"{c['dataset']} {c['arch']}{act} {c['method']}, {c['epochs']} epochs"


@dataclass
class NotebookPlan:
    """The plan of one notebook (seconds are estimates on ``device``)."""

    key: str
    device: str
    data: dict[str, bool]
    models: list[ModelPlan]
    train_seconds: float
    work_seconds: float
    fixed_seconds: float
    figures: int
    reference: str
    work: list[tuple[str, float]]      # the largest items: (what, seconds)

    @property
    def seconds(self) -> float:
        return self.train_seconds + self.work_seconds + self.fixed_seconds

    @property
    def data_found(self) -> bool:
        return all(self.data.values())


@dataclass
class Plan:
    profile: str
    notebooks: list[NotebookPlan]
    calibrations: list[str]

    @property
    def seconds(self) -> float:
        return sum(nb.seconds for nb in self.notebooks)

    def to_dict(self) -> dict:
        nbs = []
        for nb in self.notebooks:
            d = {k: v for k, v in asdict(nb).items() if k not in ("models", "work")}
            d["seconds"] = nb.seconds
            d["models"] = [{"key": m.key, "model": m.label, "status": m.status,
                            "train_seconds": m.seconds, "steps": m.steps,
                            "step_seconds": m.step_seconds,
                            "recorded_seconds_per_epoch": m.recorded_seconds_per_epoch,
                            "recorded_device": m.recorded_device, "config": m.config}
                           for m in nb.models]
            d["work"] = [{"what": w, "seconds": s} for w, s in nb.work]
            nbs.append(d)
        return {"profile": self.profile, "seconds": self.seconds,
                "calibrations": self.calibrations, "notebooks": nbs,
                "data_missing": sorted({n for nb in self.notebooks
                                        for n, ok in nb.data.items() if not ok}),
                "models_to_train": sum(m.status == "train" for nb in self.notebooks
                                       for m in nb.models)}


def count_figures(path: Path) -> int:
    """Figures a notebook shows: its ``plt.show()`` calls, and one for a code cell that
    draws (``plt.subplots``, ``plt.figure`` or a ``viz`` plot) without calling it."""
    import re

    cells = json.loads(Path(path).read_text())["cells"]
    n = 0
    for c in cells:
        if c["cell_type"] != "code":
            continue
        src = "".join(c["source"]) if isinstance(c["source"], list) else c["source"]
        shows = src.count("plt.show()")
        draws = re.search(r"plt\.(subplots|figure)\(|viz\.(?!set_theme)\w+\(", src)
        n += shows if shows else int(bool(draws))
    return n


def _n_train(cfg: dict) -> int:
    if cfg.get("train_size"):
        return int(cfg["train_size"])
    d = cfg["dataset"]
    if d in TRAIN_SIZES:
        return TRAIN_SIZES[d]
    root = Path(d) / "train" if (Path(d) / "train").is_dir() else Path(d)
    return sum(1 for f in root.rglob("*") if f.is_file())          # an ImageFolder path


def _zoo_state(cfg: dict) -> dict | None:
    """The zoo's metadata of a configuration when it is cached, else None."""
    from robattr import zoo

    wpath, jpath = zoo.paths(_zoo_key(cfg))
    if not (wpath.exists() and jpath.exists()):
        return None
    try:
        meta = json.loads(jpath.read_text())
    except (OSError, ValueError):
        return None
    return meta if meta.get("key") == _zoo_key(cfg) else None


def _training_works(cfg: dict) -> list[Work]:
    steps = cfg["epochs"] * max(1, math.ceil(_n_train(cfg) / cfg["batch_size"]))
    return [steps_of(cfg, steps, what="training"),
            fwd(family(cfg["dataset"], cfg["arch"]), TEST_SIZES.get(cfg["dataset"], 0),
                what="test accuracy")]


def _select(notebooks: list[Notebook], only: str | None) -> list[Notebook]:
    if not only:
        return notebooks
    chosen = [nb for nb in notebooks if fnmatch.fnmatch(nb.key, only)]
    if not chosen:
        raise ParameterError(f"--only {only!r} matches no notebook; known notebooks: "
                             + ", ".join(nb.key for nb in notebooks))
    return chosen


def _reference_status(root: Path, name: str, notebooks: list[Notebook]) -> dict[str, str]:
    """The kept reference of profile ``name`` per notebook (robattr.book.reference)."""
    from robattr.book import reference

    return reference.status(root, name, notebooks)


def plan(root=None, profile: str = "quick", only: str | None = None, *,
         log: Callable[[str], None] | None = None,
         assume_trained: set[str] | None = None) -> Plan:
    """The plan of ``profile`` (a name or a .yml path) for the notebooks whose key
    matches the glob ``only``: see the module docstring. Costs not yet measured on the
    device a notebook would use are measured first (:func:`calibrate`).
    ``assume_trained``: zoo keys to treat as not cached (what :func:`check_against_stamps`
    needs to replay a past run); default: the zoo's current state."""
    from robattr import data as rdata
    from robattr.utils import get_device

    root = project_root(root)
    prof = load_profile(profile)
    nbs = _select(discover(root), only)
    refs = _reference_status(root, prof["name"], nbs)
    items = []
    for nb in nbs:
        params = resolve(nb, prof)
        dev = get_device(params.get("device", "auto"))
        cfgs = declared_models(nb.key, params, effective_train_size(prof, nb.key))
        items.append((nb, params, dev, cfgs, declared_work(nb.key, params)))
    cals = {}
    for dev in dict.fromkeys(d for _, _, d, _, _ in items):
        works = [w for _, _, d, cfgs, ws in items if d == dev
                 for w in ws + [x for c in cfgs for x in _training_works(c)]]
        cals[dev] = calibrate(works, dev, log=log)
    out, planned = [], set()
    for nb, params, dev, cfgs, works in items:
        cal = cals[dev]
        models = []
        for cfg in cfgs:
            key, meta = _zoo_key(cfg), _zoo_state(cfg)
            cached = key not in assume_trained if assume_trained is not None else meta is not None
            if cached:
                spe = (meta or {}).get("seconds_per_epoch")
                if isinstance(spe, (list, tuple)):
                    spe = statistics.fmean(spe) if spe else None
                models.append(ModelPlan(key, cfg, "cached", recorded_seconds_per_epoch=spe,
                                        recorded_device=(meta or {}).get("device_name")))
            elif key in planned:
                models.append(ModelPlan(key, cfg, "shared"))
            else:
                planned.add(key)
                tw = _training_works(cfg)
                models.append(ModelPlan(key, cfg, "train", sum(cal.cost(w) for w in tw),
                                        int(tw[0].calls), cal.steps[tw[0].family]))
        costs: dict[str, float] = {}
        for w in works:
            costs[w.what or w.kind] = costs.get(w.what or w.kind, 0.0) + cal.cost(w)
        figures = count_figures(nb.path)
        data = {name: rdata.available(name) for name in declared_data(nb.key, params)}
        out.append(NotebookPlan(
            nb.key, cal.description, data, models,
            train_seconds=sum(m.seconds for m in models), work_seconds=sum(costs.values()),
            fixed_seconds=cal.notebook + figures * cal.figure, figures=figures,
            reference=refs.get(nb.key, "n/a"),
            work=sorted(costs.items(), key=lambda kv: -kv[1])[:5]))
    return Plan(prof["name"], out, [c.description for c in cals.values()])


# --------------------------------------------------------------------------- output
def _hms(seconds: float) -> str:
    s = int(round(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


def format_table(p: Plan, models: bool = False) -> str:
    """The plan as a text table and a total; ``models``: one line per zoo model too."""
    rows = [("notebook", "data", "models", "training", "work", "total", "reference")]
    for nb in p.notebooks:
        data = ", ".join(n if ok else f"{n} MISSING" for n, ok in nb.data.items()) or "-"
        n_t = sum(m.status == "train" for m in nb.models)
        n_s = sum(m.status == "shared" for m in nb.models)
        mod = "-" if not nb.models else f"{len(nb.models)}: {n_t} to train" + (
            f", {n_s} shared" if n_s else "")
        rows.append((nb.key, data, mod, _hms(nb.train_seconds) if nb.train_seconds else "-",
                     _hms(nb.work_seconds + nb.fixed_seconds), _hms(nb.seconds), nb.reference))
    width = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"robattr plan: profile {p.profile}, {len(p.notebooks)} notebook(s); estimated on "
             + "; ".join(p.calibrations)]
    for j, r in enumerate(rows):
        lines.append("  ".join(c.ljust(w) if i < 3 else c.rjust(w) if i < 6 else c
                               for i, (c, w) in enumerate(zip(r, width))).rstrip())
        if models and j:
            for m in p.notebooks[j - 1].models:
                if m.status == "cached":
                    rec = (f"{m.recorded_seconds_per_epoch:.2f} s/epoch recorded on "
                           f"{m.recorded_device}" if m.recorded_seconds_per_epoch is not None
                           else "no timing recorded")
                    lines.append(f"      cached  {m.label} ({rec})")
                elif m.status == "shared":
                    lines.append(f"      shared  {m.label} (trained by an earlier notebook)")
                else:
                    lines.append(f"      train   {m.label}: {m.steps} steps x "
                                 f"{m.step_seconds:.3g} s = {_hms(m.seconds)}")
    d = p.to_dict()
    train = sum(nb.train_seconds for nb in p.notebooks)
    missing = ""
    if d["data_missing"]:
        from robattr.data import data_root

        missing = (f"; data missing: {', '.join(d['data_missing'])} (looked under {data_root()}; "
                   "ROBATTR_DATA sets it)")
    lines.append(f"total: {_hms(p.seconds)} (training {_hms(train)}, {d['models_to_train']} "
                 f"model(s) to train){missing}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- validation
def _run_window(path: Path):
    """(start, end) of the papermill run that wrote an executed notebook, as datetimes."""
    import datetime as dt

    meta = json.loads(path.read_text()).get("metadata", {}).get("papermill", {})
    try:
        return (_utc(dt.datetime.fromisoformat(meta["start_time"])),
                _utc(dt.datetime.fromisoformat(meta["end_time"])))
    except (KeyError, TypeError, ValueError):
        return None


def _utc(t):
    """A datetime with a time zone (a naive one is read as UTC, as papermill and the zoo
    write them)."""
    import datetime as dt

    return t if t.tzinfo is not None else t.replace(tzinfo=dt.timezone.utc)


def _trained_between(start, end) -> set[str]:
    """Zoo keys that ``trainings.jsonl`` records as trained in [start, end] (+1 s)."""
    import datetime as dt

    from robattr import zoo

    path = zoo.zoo_dir() / "trainings.jsonl"
    keys = set()
    if not path.exists():
        return keys
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
            t = _utc(dt.datetime.fromisoformat(rec["created"]))
        except (ValueError, KeyError, TypeError):
            continue
        if start <= t <= end + dt.timedelta(seconds=1):
            keys.add(rec["key"])
    return keys


def check_against_stamps(root=None, profile: str = "quick", only: str | None = None, *,
                         log: Callable[[str], None] | None = None) -> list[dict]:
    """The estimate of each notebook against the seconds of its last run in the book
    (``book/.robattr-stamps.json``, written by ``robattr build``), for the notebooks last
    built with ``profile`` (:func:`check_run` for each). Returns one dict per notebook:
    key, estimate, actual, ratio (estimate / actual), trained (models trained in that
    run), ``params_changed`` (the run had other parameter values than the notebook's
    current ones in this profile: the estimate is for the current ones) and the
    estimate's parts."""
    from robattr.book.stamps import read_stamps

    root = project_root(root)
    book = root / "book"
    stamps = read_stamps(book)
    prof = load_profile(profile)
    out = []
    for nb in _select(discover(root), only):
        st = stamps.get(nb.key)
        if not st or st.get("profile") != prof["name"]:
            continue
        row = check_run(root, nb.key, nb.output(book), profile, seconds=float(st["seconds"]),
                        log=log)
        row["params_changed"] = st.get("params") != resolve(nb, prof)
        out.append(row)
    return out


def check_run(root, key: str, executed, profile: str = "quick", *, seconds: float | None = None,
              log: Callable[[str], None] | None = None) -> dict:
    """The estimate of notebook ``key`` in ``profile`` against one executed run of it (the
    notebook papermill wrote, ``executed``): ``seconds`` (default papermill's duration)
    against the plan with the zoo of that run replayed: the models ``trainings.jsonl``
    records as trained between papermill's start and end times count as trained, the
    others as cached."""
    executed = Path(executed)
    meta = json.loads(executed.read_text()).get("metadata", {}).get("papermill", {}) \
        if executed.exists() else {}
    if seconds is None:
        seconds = float(meta["duration"])
    window = _run_window(executed) if executed.exists() else None
    trained = _trained_between(*window) if window else set()
    est = plan(root, profile, only=key, log=log, assume_trained=trained).notebooks[0]
    return {"key": key, "estimate": est.seconds, "actual": seconds,
            "ratio": est.seconds / seconds,
            "trained": sum(m.status == "train" for m in est.models),
            "work": est.work_seconds, "fixed": est.fixed_seconds, "training": est.train_seconds}


def check_training(device="auto", *, log: Callable[[str], None] | None = None) -> list[dict]:
    """The estimated seconds per epoch of every model in the zoo that was trained on this
    device (same device name, CPU or GPU), against the seconds per epoch the zoo recorded
    when it trained it. One dict per model: key, model, estimate, recorded, ratio."""
    from robattr import zoo
    from robattr.utils import get_device

    device = get_device(device)
    import torch

    here = (torch.cuda.get_device_name(device) if device.type == "cuda"
            else platform.processor() or platform.machine())
    metas = []
    for jpath in sorted(zoo.zoo_dir().glob("*.json")):
        try:
            meta = json.loads(jpath.read_text())
            cfg, spe = meta["config"], meta["seconds_per_epoch"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        same = str(meta.get("device", "")).split(":")[0] == device.type
        if meta.get("device_name") != here or not same:
            continue
        if isinstance(spe, (list, tuple)):
            spe = statistics.fmean(spe) if spe else None
        if spe:
            metas.append((cfg, float(spe)))
    works = [steps_of(cfg, 1) for cfg, _ in metas]
    cal = calibrate(works, device, notebook=False, log=log)
    out = []
    for cfg, spe in metas:
        steps = max(1, math.ceil(_n_train(cfg) / cfg["batch_size"]))
        est = steps * cal.steps[_step_signature(cfg)]
        out.append({"key": _zoo_key(cfg), "model": ModelPlan("", cfg, "").label,
                    "estimate": est, "recorded": spe, "ratio": est / spe})
    return out


def format_check(rows: list[dict], profile: str) -> str:
    """:func:`check_against_stamps` as a table with the spread of the ratios."""
    if not rows:
        return (f"robattr plan --check: no notebook of the book was last built with profile "
                f"{profile!r} and its current parameters (run robattr build --profile {profile})")
    lines = [f"estimate / actual, profile {profile} (actual: the seconds of the book's last build)",
             f"{'notebook':36s} {'estimate':>9s} {'actual':>9s} {'ratio':>6s}  trained"]
    for r in rows:
        flag = "" if 1 / 3 <= r["ratio"] <= 3 else "   <- outside [1/3, 3]"
        star = "*" if r.get("params_changed") else " "
        lines.append(f"{r['key'] + star:36s} {_hms(r['estimate']):>9s} {_hms(r['actual']):>9s} "
                     f"{r['ratio']:6.2f}  {r['trained']}{flag}")
    ratios = [r["ratio"] for r in rows]
    total_e, total_a = sum(r["estimate"] for r in rows), sum(r["actual"] for r in rows)
    within = sum(1 / 3 <= x <= 3 for x in ratios)
    lines.append(f"total {_hms(total_e)} estimated, {_hms(total_a)} actual (ratio "
                 f"{total_e / total_a:.2f}); median ratio {statistics.median(ratios):.2f}; "
                 f"{within} of {len(ratios)} within a factor of 3")
    if any(r.get("params_changed") for r in rows):
        lines.append("* the notebook's parameters in this profile changed since that run: the "
                     "estimate is for the current ones")
    return "\n".join(lines)


def format_training_check(rows: list[dict], full: bool = False) -> str:
    """:func:`check_training` as a summary line (and one line per model with ``full``)."""
    if not rows:
        return "training: no model in the zoo was trained on this device"
    ratios = sorted(r["ratio"] for r in rows)
    within = sum(1 / 3 <= x <= 3 for x in ratios)
    lines = [f"training: {len(rows)} zoo model(s) trained on this device; estimated / recorded "
             f"seconds per epoch: median {statistics.median(ratios):.2f}, from {ratios[0]:.2f} "
             f"to {ratios[-1]:.2f}; {within} within a factor of 3 (a recorded time includes "
             "whatever else the machine ran then)"]
    if full:
        lines += [f"  {r['model']:55s} {r['estimate']:9.2f} s {r['recorded']:9.2f} s "
                  f"{r['ratio']:6.2f}" for r in sorted(rows, key=lambda r: r["ratio"])]
    return "\n".join(lines)
