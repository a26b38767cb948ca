"""One trainer (:func:`fit`), :func:`evaluate`, and the training losses.

    hist = fit(model, train_set, loss="l2_cosd", epochs=10)     # or a Loss object
    loss = make_loss("trades", trades_beta=6.0)
    value, logs = loss(model, x, y)                              # scalar, dict of batch means

:mod:`robattr.train.losses` holds the loss protocol (:class:`Loss`, :func:`register_loss`,
:data:`LOSSES`) and every loss: ``ce``, ``at``, ``trades``, ``ig_norm``, ``igr``,
``ssr``, ``hessian``, ``l2``, ``cosd``, ``l2_cosd``, and the baselines the papers train
against, ``atex`` (Tang et al. 2022), ``iga`` (Singh et al. 2020; 001's "ART") and
``advaat`` (Ivankay et al. 2020); :mod:`robattr.train.trainer` holds
:func:`fit` (with per-epoch timings and the peak memory of the run), :func:`evaluate`
and :class:`History`; :mod:`robattr.train.checkpoint` the checkpoints that let
:func:`fit` stop after any epoch and go on (:class:`FileCheckpoint`).
"""
from __future__ import annotations

from robattr.train.losses import (ATEX, IGA, LOSSES, RESERVED_HPARAMS, SSR, TRADES, AdvAAT,
                                  AdversarialTraining, CrossEntropy, GradCosd, GradL2, GradL2Cosd,
                                  HessianNorm, IGNorm, IGR, Loss, has_relu, make_loss,
                                  register_loss)
from robattr.train.checkpoint import Checkpoint, CheckpointWarning, FileCheckpoint
from robattr.train.trainer import OPTIMIZERS, History, SavedTensorPeak, evaluate, fit

__all__ = [
    "Loss", "CrossEntropy", "LOSSES", "RESERVED_HPARAMS", "register_loss", "make_loss", "History",
    "fit", "evaluate", "OPTIMIZERS", "SavedTensorPeak", "AdversarialTraining", "TRADES", "IGNorm",
    "IGR", "SSR", "HessianNorm", "GradL2", "GradCosd", "GradL2Cosd", "ATEX", "IGA", "AdvAAT",
    "has_relu", "Checkpoint", "FileCheckpoint", "CheckpointWarning",
]
