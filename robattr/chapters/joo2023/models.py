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

__all__ = ["REGULARIZERS", "regularizers", "train_options"]

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
