"""Metrics of attribution robustness and faithfulness, batched, one value per example.

Similarity of two attribution batches (:mod:`.similarity`): top-k intersection (both
papers' variants), Spearman, Kendall (tau-b and 002's concordant fraction), Pearson,
cosine similarity / distance / angle, SSIM (skimage's), mass centre and its
dislocation. Model-based scores (:mod:`.faithfulness`): Insertion and Adv-Insertion
(003's two protocols, :data:`PROTOCOLS`), deletion, preservation, feature relevance R,
target-class retrieval, random perturbation similarity (RPS). Helpers: channel
reduction, map normalisation and 000's area under the metric-vs-epsilon curve.

Every function takes batch-first tensors (N×D, N×H×W or N×C×H×W) on any device and
returns one value per example; degenerate maps (zero, constant, ties, one pixel) get
a documented value, never NaN. Bad arguments raise ``ValueError`` naming them.
"""
from __future__ import annotations

from ._common import auc_over_eps, normalize_map, reduce_channels
from .faithfulness import (PROTOCOLS, Curve, adv_insertion, class_retrieval, deletion,
                           feature_relevance, insertion, insertion_inputs, preservation, rps)
from .similarity import (average_ranks, center_dislocation, cosine_angle, cosine_distance,
                         cosine_similarity, kendall, mass_center, pearson, spearman, ssim,
                         topk_intersection)

__all__ = [
    "reduce_channels", "normalize_map", "auc_over_eps",
    "topk_intersection", "spearman", "kendall", "pearson", "cosine_similarity",
    "cosine_distance", "cosine_angle", "ssim", "mass_center", "center_dislocation",
    "average_ranks",
    "Curve", "PROTOCOLS", "insertion", "insertion_inputs", "deletion", "preservation",
    "adv_insertion", "feature_relevance", "class_retrieval", "rps",
]
