"""The models the joo2023 notebooks train: 003's regularisers with their weights, declared
once for the notebooks and for ``robattr plan`` (:mod:`robattr.chapters.joo2023.plan`).

**Units of λ.** 003's code feeds its network the normalised input x_n = (x − μ)/σ and
differentiates w.r.t. it, so its λ weighs σ ⊙ ∇_x. robattr's models take pixels and
normalise inside; ``units`` says which σ the regularisers use (:data:`robattr.train.losses
.gradient.UNITS`): ``"normalized"``, the model's own (robattr's CIFAR-10 σ is the data's
std, 0.247-0.262), or ``"robustaga"``, the σ of 003's code (0.199-0.202), with which 003's
λ weighs the pixel gradients exactly as its code does. The medium and paper profiles use
``"robustaga"``; the quick profile's digits (one channel) the model's own.
"""
from __future__ import annotations

__all__ = ["REGULARIZERS", "BASELINES", "ARCH_NAMES", "regularizers", "train_options", "arch_name", "model_name",
           "zoo_options", "regularizer_specs", "zoo_models", "baseline_specs", "table_models"]

#: 003 Table 1's rows in its order: the regularisers, then its baselines
REGULARIZERS = ("CE only", "ATEX", "IGA", "Hessian", "l2", "l2+Cosd")


def regularizers(*, lam: float, lam_cos: float, train_eps: float, hessian_lam: float,
                 units: str = "normalized") -> dict[str, tuple[str, dict]]:
    """003's four models: Table 1's label -> (zoo loss name, its hyper-parameters)."""
    return {"CE only": ("ce", {}),
            "Hessian": ("hessian", dict(lam=hessian_lam, units=units)),
            "l2": ("l2", dict(lam=lam, eps=train_eps, units=units)),
            "l2+Cosd": ("l2_cosd", dict(lam=lam, lam_cos=lam_cos, eps=train_eps, units=units))}


def train_options(*, beta: float, epochs: int, lr: float, batch_size: int, optimizer: str,
                  weight_decay: float, milestones: list[int]) -> dict:
    """The training options every joo2023 zoo model takes (Softplus(β) LeNets in 003)."""
    return dict(activation="softplus", beta=beta, epochs=epochs, lr=lr, batch_size=batch_size,
                optimizer=optimizer, weight_decay=weight_decay, milestones=milestones)


#: 003's baselines, trained beside its four models where a notebook asks for them
BASELINES = ("ATEX", "IGA")

#: the architecture names the chapter's captions print
ARCH_NAMES = {"mlp": "MLP", "cnn": "CNN", "lenet": "LeNet"}

#: the training settings of a notebook's parameters that every zoo model of the chapter takes
TRAIN_PARAMS = ("epochs", "lr", "batch_size", "optimizer", "weight_decay", "milestones")


def arch_name(arch: str) -> str:
    """The printed name of a zoo architecture (``"cnn"`` -> ``"CNN"``; others as they are)."""
    return ARCH_NAMES.get(arch, arch)


def model_name(arch: str, beta: float) -> str:
    """The scale line's model: ``"CNN with Softplus(3)"``."""
    return f"{arch_name(arch)} with Softplus({beta:g})"


def zoo_options(params: dict, device=None, *, softplus: bool = True) -> dict:
    """The keyword arguments of :func:`robattr.zoo.get_model` that every model of a notebook
    shares, from its parameters (``run.params``): :func:`train_options` (without the
    Softplus activation when ``softplus`` is false: the zoo's default ReLU), no progress
    bar, and ``device`` when one is given."""
    missing = [k for k in ("beta", *TRAIN_PARAMS) if k not in params]
    if missing:
        raise KeyError(f"zoo_options: parameters missing: {missing}")
    opts = train_options(beta=params["beta"], **{k: params[k] for k in TRAIN_PARAMS})
    if not softplus:
        opts = {k: v for k, v in opts.items() if k not in ("activation", "beta")}
    opts["progress"] = False
    if device is not None:
        opts["device"] = device
    return opts


def regularizer_specs(params: dict, *, hessian_lam: float | None = None) -> dict:
    """:func:`regularizers` with a notebook's parameters (``run.params``); ``hessian_lam``
    replaces the parameter of that name (the ResNet block's own weight)."""
    return regularizers(lam=params["lam"], lam_cos=params["lam_cos"],
                        train_eps=params["train_eps"],
                        hessian_lam=params["hessian_lam"] if hessian_lam is None else hessian_lam,
                        units=params["reg_units"])


def zoo_models(dataset: str, arch: str, specs: dict, options: dict) -> dict:
    """``label -> zoo model`` for each ``label -> (zoo loss name, hyper-parameters)`` of
    ``specs``, all with the shared ``options`` (:func:`zoo_options`)."""
    from robattr import zoo

    return {k: zoo.get_model(dataset, arch, m, **options, **hp) for k, (m, hp) in specs.items()}


def baseline_specs(ce_model, iga_lam: float) -> dict:
    """003's two baselines as ``label -> (zoo loss name, hyper-parameters)``: ATEX distils
    ``ce_model`` (named by its zoo key), IGA with the weight ``iga_lam``."""
    return {"ATEX": ("atex", dict(teacher=ce_model.zoo_meta["key"])),
            "IGA": ("iga", dict(lam=iga_lam))}


def table_models(dataset: str, arch: str, specs: dict, baselines, iga_lam: float,
                 options: dict) -> dict:
    """A block of Table 1: the models of ``specs`` (003's four, :func:`regularizers`), then
    the baselines ``baselines`` (ATEX's teacher the block's ``"CE only"`` model), in the
    table's row order (:data:`REGULARIZERS`)."""
    unknown = [k for k in baselines if k not in BASELINES]
    if unknown:
        raise ValueError(f"unknown baselines {unknown}; known: {list(BASELINES)}")
    models = zoo_models(dataset, arch, specs, options)
    known = baseline_specs(models["CE only"], iga_lam)
    models.update(zoo_models(dataset, arch, {k: known[k] for k in baselines}, options))
    return {k: models[k] for k in REGULARIZERS if k in models}
