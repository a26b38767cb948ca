"""The clean-classes notebook's steps (004's Table S3 and Fig. 6 / S5).

* :func:`clean_masks` and :func:`deletion_preservation`: every method's mask of clean images
  and its per-image deletion and preservation (Table S3); :func:`table_s3_rows` records them;
  :func:`relex_against_others` and :func:`runner_up` compare RelEx with the other methods;
  :func:`table_s3_view` shapes the compared table for display;
* :func:`class_images`, :func:`every_class`, :func:`class_score`, :func:`relex_every_class`,
  :func:`every_class_scores`: the images of one class explained for every class, and the
  softmax score of class ``c`` on ``m_c ⊙ x``;
* :func:`moved_from_clean`, :func:`flip_note`, :func:`fig6_cells`: the attack guard and the
  cells of the Fig. 6 claims;
* :func:`noise_scores`: the exercise's control, the same scores on uniform noise images.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
from torch import nn

from robattr.chapters.lim2021.evaluate import masked_input, masking_view, to_mask

__all__ = ["clean_masks", "deletion_preservation", "table_s3_rows", "relex_against_others",
           "runner_up", "table_s3_view", "class_images", "every_class", "class_score",
           "relex_every_class", "every_class_scores", "moved_from_clean", "flip_note",
           "fig6_cells", "noise_scores", "FIG6_OTHERS"]

#: The methods RelEx is compared with in Fig. 6 (the clean-classes notebook's names).
FIG6_OTHERS = ("SimGrad", "SmGrad", "IntGrad", "GradCAM")


def clean_masks(model: nn.Module, x: torch.Tensor, target: torch.Tensor, *, sg_samples: int,
                ig_steps: int, relex_epochs: int, n_noisy: int, seed: int,
                masking: str = "pixel") -> dict[str, torch.Tensor]:
    """Table S3's masks of ``x`` for ``target``, by the notebook's method names, in the order
    SimGrad, GradCAM, SmGrad, IntGrad, DeepLIFT, RelEx (:func:`to_mask` of each map; RelEx's
    mask as learned with ``masking``)."""
    from robattr import attributions as A

    return {
        "SimGrad": to_mask(A.grad(model, x, target), "grad"),
        "GradCAM": to_mask(A.grad_cam(model, x, target), "cam"),
        "SmGrad": to_mask(A.smoothgrad(model, x, target, n_samples=sg_samples, seed=seed), "grad"),
        "IntGrad": to_mask(A.integrated_gradients(model, x, target, steps=ig_steps), "grad"),
        "DeepLIFT": to_mask(A.deeplift(model, x, target), "grad"),
        "RelEx": A.relex(model, x, target, epochs=relex_epochs, n_noisy=n_noisy, seed=seed,
                         masking=masking),
    }


def deletion_preservation(model: nn.Module, x: torch.Tensor, masks: Mapping[str, torch.Tensor],
                          target: torch.Tensor, masking: str = "pixel",
                          ratios: int = 64) -> dict[str, dict[str, np.ndarray]]:
    """``{method: {"deletion": ..., "preservation": ...}}``: the per-image AUCs of each mask
    (``ratios`` steps), with a removed pixel black or, ``masking="normalized"``, the mean."""
    from robattr.metrics import deletion, preservation

    f, u = masking_view(model, x, masking)   # a removed pixel is 0 there
    return {meth: {"deletion": deletion(f, u, m, target, ratios=ratios).auc.cpu().numpy(),
                   "preservation": preservation(f, u, m, target, ratios=ratios).auc.cpu().numpy()}
            for meth, m in masks.items()}


def table_s3_rows(scores: Mapping[str, Mapping[str, np.ndarray]]):
    """The mean deletion and preservation of every method as a long table (``method``,
    ``metric``, ``value``), each value recorded as ``tableS3_<metric>``."""
    import pandas as pd

    from robattr.report.results import record

    rows = []
    for meth, s in scores.items():
        D, P = float(s["deletion"].mean()), float(s["preservation"].mean())
        rows += [{"method": meth, "metric": "deletion", "value": D},
                 {"method": meth, "metric": "preservation", "value": P}]
        record("tableS3_deletion", D, method=meth)
        record("tableS3_preservation", P, method=meth)
    return pd.DataFrame(rows)


def relex_against_others(scores: Mapping[str, Mapping[str, np.ndarray]], metric: str, *,
                         higher_is_better: bool = True, relex: str = "RelEx") -> dict:
    """``{method: verdicts.gap(RelEx, method)}`` on ``metric``, paired over the images, for
    every method but ``relex``."""
    from robattr.report import verdicts

    if relex not in scores:
        raise ValueError(f"no {relex!r} among the methods {list(scores)}")
    out = {}
    for m in scores:
        if m == relex:
            continue
        kw = {} if higher_is_better else {"higher_is_better": False}
        out[m] = verdicts.gap(scores[relex][metric], scores[m][metric], **kw,
                              what=f"{relex} − {m} {metric}")
    return out


def runner_up(scores: Mapping[str, Mapping[str, np.ndarray]], metric: str, *,
              higher_is_better: bool = True, relex: str = "RelEx") -> str:
    """The best method but ``relex`` by its mean ``metric``."""
    means = {m: scores[m][metric].mean() for m in scores if m != relex}
    if not means:
        raise ValueError("no method besides RelEx")
    return max(means, key=means.get) if higher_is_better else min(means, key=means.get)


def table_s3_view(cmp):
    """Table S3 for display from its :func:`robattr.report.papers.compare` frame: one row per method
    (the paper's order), the columns ``"<metric> (<source>)"``; returns ``(wide, why)``, the
    reasons of its missing cells."""
    import pandas as pd

    from robattr.report.papers import table
    from robattr.report.references import value_columns

    cols = value_columns(cmp)   # ours, any kept reference runs, the paper's
    wide = (cmp.set_index(["method", "metric"])[cols].apply(pd.to_numeric, errors="coerce")
            .unstack("metric"))
    order = list(dict.fromkeys(list(table("lim2021_tableS3")["method"])
                               + list(cmp["method"])))
    wide = wide.reindex(order)   # the paper's order of the methods
    wide.columns = [f"{metric} ({src})" for src, metric in wide.columns]
    wide = wide[[f"{metric} ({src})" for metric in ("deletion", "preservation") for src in cols]]
    why = {"FGVis": "not built: the paper quotes FGVis from another paper, and robattr has no "
                    "implementation",
           "preservation (paper)": "not in the paper: Table S3 prints no preservation score for "
                                   "FGVis"}
    why.update({c: "not in this kept reference run" for c in wide.columns
                if " ref" in c and wide[c].drop(index="FGVis", errors="ignore").isna().any()})
    return wide, why


def class_images(x: torch.Tensor, y: torch.Tensor, c: int, n: int):
    """The first ``n`` images of ``x`` labelled ``c``: ``(images, indices)``; a ``ValueError``
    when there is none."""
    idx = (y == c).nonzero().flatten()[:n]
    if idx.numel() == 0:
        raise ValueError(f"no test image of class {c}")
    return x[idx], idx


def every_class(x: torch.Tensor, n_classes: int):
    """``x`` repeated once per class (class-major) and the class each copy explains."""
    cls = torch.arange(n_classes, device=x.device).repeat_interleave(x.shape[0])
    return x.repeat(n_classes, *([1] * (x.dim() - 1))), cls


def class_score(model: nn.Module, x: torch.Tensor, m: torch.Tensor, cls: torch.Tensor,
                masking: str = "pixel") -> torch.Tensor:
    """The softmax score of ``cls`` on ``m ⊙ x`` (:func:`masked_input`), per row."""
    with torch.no_grad():
        p = torch.softmax(model(masked_input(model, x, m, masking)), 1)
    return p.gather(1, cls[:, None])[:, 0]


def relex_every_class(model: nn.Module, x: torch.Tensor, n_classes: int, *, relex_epochs: int,
                      n_noisy: int, seed: int, masking: str = "pixel") -> torch.Tensor:
    """RelEx's mask of every image of ``x`` for every class (rows as :func:`every_class`)."""
    from robattr import attributions as A

    xr, cls = every_class(x, n_classes)
    return A.relex(model, xr, cls, epochs=relex_epochs, n_noisy=n_noisy, seed=seed,
                   masking=masking)


def every_class_scores(model: nn.Module, x: torch.Tensor, n_classes: int, *, sg_samples: int,
                       ig_steps: int, relex_epochs: int, n_noisy: int, seed: int,
                       masking: str = "pixel"):
    """Fig. 6: each method explains every class ``c`` on every image of ``x``.

    Returns ``(scores, relex_mask)``: ``scores[method]`` the softmax score of ``c`` on
    ``m_c ⊙ x``, an array ``n_classes x len(x)``; the methods SimGrad, SmGrad, IntGrad,
    GradCAM and RelEx; and RelEx's masks (rows as :func:`every_class`)."""
    from robattr import attributions as A

    xr, cls = every_class(x, n_classes)
    ms = {"SimGrad": to_mask(A.grad(model, xr, cls), "grad"),
          "SmGrad": to_mask(A.smoothgrad(model, xr, cls, n_samples=sg_samples, seed=seed), "grad"),
          "IntGrad": to_mask(A.integrated_gradients(model, xr, cls, steps=ig_steps), "grad"),
          "GradCAM": to_mask(A.grad_cam(model, xr, cls), "cam"),
          "RelEx": A.relex(model, xr, cls, epochs=relex_epochs, n_noisy=n_noisy, seed=seed,
                           masking=masking)}
    scores = {meth: class_score(model, xr, m, cls, masking).reshape(n_classes, x.shape[0])
              .cpu().numpy() for meth, m in ms.items()}
    return scores, ms["RelEx"]


def moved_from_clean(masks: Mapping[str, torch.Tensor], tags, clean: str = "clean") -> dict:
    """``{tag: 1 - Spearman(masks[tag], masks[clean])}`` per row, on the first channel."""
    from robattr.metrics import spearman

    return {t: 1 - spearman(masks[t][:, :1], masks[clean][:, :1]).cpu().numpy() for t in tags}


def flip_note(n_flip: int, k: int) -> str:
    """The sentence saying how many of ``k`` attacked images changed their predicted class."""
    if not 0 <= n_flip <= k:
        raise ValueError(f"n_flip must be in [0, {k}], got {n_flip}")
    return (f"The PGD attack changed the predicted class of {n_flip} of {k} "
            f"image{'s' if k != 1 else ''}"
            + (": none of the attacked images is adversarial, so the attacked half below "
               "compares explanations of perturbed images that keep their class, not of "
               "misclassified ones." if n_flip == 0 else
               "; the others keep their class." if n_flip < k else "."))


def fig6_cells(scores: Mapping, tag: str, others=FIG6_OTHERS) -> dict:
    """The cells of a Fig. 6 claim on the ``tag`` images: RelEx's score close to 1 (above 0.8
    in at least 80 % of the (class, image) cases), and above each of ``others``, paired over
    the same cases."""
    from robattr.report import verdicts

    rx = scores[(tag, "RelEx")].ravel()
    cells = {"close to 1": verdicts.share(int((rx > 0.8).sum()), rx.size, at_least=0.8,
                                          what="cases with a score above 0.8")}
    for m in others:
        cells[f"above {m}"] = verdicts.gap(rx, scores[(tag, m)].ravel(),
                                           what=f"RelEx − {m} score")
    return cells


def noise_scores(model: nn.Module, like: torch.Tensor, n_classes: int, *, seed: int,
                 relex_epochs: int, n_noisy: int, masking: str = "pixel") -> np.ndarray:
    """The exercise's control: images of uniform noise shaped like ``like`` (drawn on the
    CPU from ``seed + 2``), RelEx explaining every class on each, and the softmax score of
    ``c`` on ``m_c ⊙ x`` as an array ``n_classes x len(like)``."""
    gen = torch.Generator().manual_seed(seed + 2)
    noise = torch.rand(like.shape, generator=gen).to(like.device)
    xn, cls = every_class(noise, n_classes)
    m = relex_every_class(model, noise, n_classes, relex_epochs=relex_epochs, n_noisy=n_noisy,
                          seed=seed, masking=masking)
    return class_score(model, xn, m, cls, masking).reshape(n_classes, like.shape[0]).cpu().numpy()
