"""The targeted-transfer notebook's steps (004's Fig. 4, Fig. S2 and Table S2).

* :func:`target_map_images`: the clean class of each attacked image and the image whose map
  the structured attack pulls toward;
* :func:`attacked_methods`, :func:`raw_map`, :func:`check_grad_cam_graph`: the attacked
  methods, the per-pixel map an attack sees, and the check of the differentiable Grad-CAM;
* :func:`run_attacks`: both targeted attacks on every attacked method, with random twins;
* :func:`score_blocks`, :func:`attack_summary`: every mask of every image in one batch, its
  scores, and what each attack did to its criterion;
* :func:`run_mean`, :func:`noise_floor`, :func:`moves_table`, :func:`record_moves`,
  :func:`transfer_cells`: how far the maps move, and the cells of the claims;
* :func:`retrieval_table`, :func:`pgd_cells`: class retrieval under the attacks;
* :func:`table_s2_rows`, :func:`table_s2_view`, :func:`by_size`, :func:`size_ratios`:
  Table S2;
* :class:`MaskedModel`, :func:`direct_attack_note`: the exercise's masked-model attack.
"""
from __future__ import annotations

import time
from typing import Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from robattr.chapters.lim2021.evaluate import all_masks, mask_scores, masked_input, per_image
from robattr.models import predict

__all__ = ["ATTACKS", "TABLE_S2_LABEL", "target_map_images", "attacked_methods", "raw_map",
           "check_grad_cam_graph", "run_attacks", "score_blocks", "attack_summary", "run_mean",
           "noise_floor", "moves_table", "record_moves", "transfer_cells", "retrieval_table",
           "pgd_cells", "table_s2_rows", "table_s2_view", "by_size", "size_ratios",
           "MaskedModel", "direct_attack_note"]

#: The two targeted attacks: Dombrowski et al.'s (structured) and Ghorbani et al.'s top-k.
ATTACKS = ("structured", "unstructured")
#: The paper's spelling of each attacked method in Table S2.
TABLE_S2_LABEL = {"SimGrad": "SimGrad", "SmoothGrad": "SmGrad", "IntGrad": "IntGrad",
                  "GradCAM": "GradCam"}


def target_map_images(model: nn.Module, pool_x: torch.Tensor, n: int):
    """The first ``n`` images of ``pool_x`` are attacked; each one's target-map image is the
    next image of the rest of the pool (cyclically) whose predicted class differs.

    Returns ``(c0, x_t, c_t)``: the clean (predicted) classes of the attacked images, and the
    target-map images and their predicted classes."""
    if not 1 <= n < pool_x.shape[0]:
        raise ValueError(f"n must be in [1, {pool_x.shape[0]}), got {n}")
    c0 = predict(model, pool_x[:n])         # the clean class (the paper: the model's prediction)
    pool_pred = predict(model, pool_x)
    others = list(range(n, pool_x.shape[0]))
    t_idx = []
    for i in range(n):
        j = next((j for j in others[i:] + others[:i] if pool_pred[j] != c0[i]), None)
        if j is None:
            raise ValueError(f"no image of the pool has a class other than {int(c0[i])}")
        t_idx.append(j)
    return c0, pool_x[t_idx], pool_pred[t_idx]


def attacked_methods(attack_samples: int, seed: int) -> dict[str, tuple]:
    """The attacked methods: ``name -> (robattr method name or callable, its options inside
    the attack)``; SmoothGrad and IntGrad with ``attack_samples`` samples / steps, Grad-CAM
    through :func:`robattr.attributions.relex.grad_cam_graph` (differentiable)."""
    from robattr.attributions.relex import grad_cam_graph

    return {"SimGrad": ("grad", {}),
            "SmoothGrad": ("smoothgrad", {"n_samples": attack_samples, "seed": seed}),
            "IntGrad": ("integrated_gradients", {"steps": attack_samples}),
            "GradCAM": (grad_cam_graph, {})}


def raw_map(model: nn.Module, attacked: Mapping[str, tuple], meth: str, x: torch.Tensor,
            t: torch.Tensor) -> torch.Tensor:
    """The map of ``meth`` an attack sees: ``|.|`` summed over channels, detached."""
    from robattr import attributions as A

    fn, opts = attacked[meth]
    fn = A.METHODS[fn] if isinstance(fn, str) else fn
    return A.reduce_channels(fn(model, x, t, **opts), "abs_sum").detach()


def check_grad_cam_graph(model: nn.Module, x: torch.Tensor, t: torch.Tensor,
                         tol: float = 1e-4) -> float:
    """The largest difference between the plain-autograd Grad-CAM and Captum's; a
    ``RuntimeError`` when it exceeds ``tol``."""
    from robattr import attributions as A
    from robattr.attributions.relex import grad_cam_graph

    gap = float((grad_cam_graph(model, x, t) - A.grad_cam(model, x, t)).abs().max())
    if gap > tol:
        raise RuntimeError(f"grad_cam_graph does not reproduce Captum's Grad-CAM ({gap:.2e})")
    return gap


def run_attacks(model: nn.Module, x: torch.Tensor, c0: torch.Tensor, attacked: Mapping,
                x_t: torch.Tensor, c_t: torch.Tensor, *, eps_structured: float,
                eps_unstructured: float, top_k: int, steps: int, surrogate_beta,
                seed: int, progress: Callable = lambda it, **kw: it) -> dict:
    """Both :data:`ATTACKS` on every attacked method (the structured attack's target: the
    :func:`raw_map` of ``x_t`` for ``c_t`` by the attacked method), each adversarial batch
    with its random twin (one generator from ``seed`` on ``x``'s device, drawn in the order
    of the loops).

    Returns ``runs[(attack, method)]`` with ``x_adv``, ``x_rand``, ``l2``, ``kept`` (label
    kept), ``moved`` (``l2 > 0``), ``seconds``, ``crit0`` and ``crit`` (the attack's
    criterion before and after). ``progress`` wraps each loop over the methods (tqdm)."""
    from robattr.attacks import targeted_attack, topk_attack
    from robattr.chapters.lim2021.evaluate import random_twin

    gen = torch.Generator(device=x.device).manual_seed(seed)
    beta = tuple(surrogate_beta)
    runs = {}
    for attack in ATTACKS:
        for meth in progress(attacked, desc=attack, leave=False):
            fn, opts = attacked[meth]
            t0 = time.perf_counter()
            if attack == "structured":
                tmap = raw_map(model, attacked, meth, x_t, c_t)
                res = targeted_attack(model, x, c0, target_map=tmap,
                                      eps=eps_structured, method=fn, method_options=opts,
                                      steps=steps, surrogate_beta=beta, seed=seed)
            else:
                res = topk_attack(model, x, c0, k=top_k, eps=eps_unstructured, method=fn,
                                  method_options=opts, steps=steps, surrogate_beta=beta,
                                  seed=seed)
            t_attack = time.perf_counter() - t0
            l2 = (res.x_adv - x).flatten(1).norm(dim=1)
            kept = predict(model, res.x_adv) == c0
            runs[(attack, meth)] = {"x_adv": res.x_adv, "x_rand": random_twin(x, l2, gen),
                                    "l2": l2, "kept": kept, "moved": l2 > 0,
                                    "seconds": t_attack, "crit0": res.history[0, 0],
                                    "crit": res.criterion}
    return runs


def score_blocks(model: nn.Module, x: torch.Tensor, c0: torch.Tensor, runs: dict,
                 x_pgd: torch.Tensor, top_k: int, *, n_noisy: int, masking: str = "pixel",
                 **mask_options):
    """Every method's mask (:func:`all_masks`) of the clean, attacked, random-twin and PGD
    images in one batch (RelEx: all images in one batch), then each attacked and twin mask
    scored against the clean one (:func:`mask_scores`).

    Adds ``madv`` (the masks of ``x_adv``) and the scores ``(key, "adv" | "rand", method)``
    to each entry of ``runs``; returns ``(m0, m_pgd)``, the masks of ``x`` and ``x_pgd``."""
    n = x.shape[0]
    blocks = [x] + [r[key] for r in runs.values() for key in ("x_adv", "x_rand")] + [x_pgd]
    big = all_masks(model, torch.cat(blocks), c0.repeat(len(blocks)), n_noisy=n_noisy,
                    relex_batch_size=max(128, len(blocks) * n * n_noisy), relex_masking=masking,
                    **mask_options)
    split = [{k: v[i * n:(i + 1) * n] for k, v in big.items()} for i in range(len(blocks))]
    m0, m_pgd = split[0], split[-1]
    for b, row in enumerate(runs.values()):
        row["madv"] = split[1 + 2 * b]
        for tag, masks, xx in (("adv", split[1 + 2 * b], row["x_adv"]),
                               ("rand", split[2 + 2 * b], row["x_rand"])):
            scores = mask_scores(model, xx, masks, m0, c0, top_k, masking=masking)
            row.update({(key, tag, ex): v for (key, ex), v in scores.items()})
    return m0, m_pgd


def attack_summary(runs: Mapping):
    """One row per (attack, attacked method): seconds, the share of labels kept and of images
    moved, and the mean criterion before and after the attack."""
    import pandas as pd

    return pd.DataFrame([{"attack": a, "attacked": m, "seconds": r["seconds"],
                          "label kept": float(r["kept"].float().mean()),
                          "images moved": float(r["moved"].float().mean()),
                          "criterion clean": float(r["crit0"].mean()),
                          "criterion attacked": float(r["crit"].mean())}
                         for (a, m), r in runs.items()]).set_index(["attack", "attacked"])


def run_mean(runs: Mapping, attack: str, meth: str, key: str, tag: str, ex: str) -> float:
    """The mean over the images of score ``key`` of explainer ``ex`` on the ``tag`` images
    (``"adv"`` or ``"rand"``) of the attack ``(attack, meth)``."""
    return float(runs[(attack, meth)][(key, tag, ex)].mean())


def noise_floor(m_again: torch.Tensor, m0: torch.Tensor, top_k: int) -> tuple[float, float]:
    """RelEx's noise floor: the mean Spearman and top-k intersection (first channel) between
    two RelEx masks of the same clean images from different seeds."""
    from robattr.metrics import spearman, topk_intersection

    return (float(spearman(m_again[:, :1], m0[:, :1]).mean()),
            float(topk_intersection(m_again[:, :1], m0[:, :1], top_k).mean()))


def moves_table(runs: Mapping, attacked: Sequence[str], relex: str, top_k: int):
    """Per attack and attacked method, the mean similarity of adversarial and clean maps: the
    attacked method's and RelEx's Spearman (on the attack and on its random twins) and their
    top-k intersections."""
    import pandas as pd

    rows = []
    for attack in ATTACKS:
        for meth in attacked:
            def mean(key, tag, ex):
                return run_mean(runs, attack, meth, key, tag, ex)
            rows.append({"attack": attack, "attacked": meth,
                         "spearman attacked": mean("spearman", "adv", meth),
                         "spearman attacked (random twin)": mean("spearman", "rand", meth),
                         "spearman RelEx": mean("spearman", "adv", relex),
                         "spearman RelEx (random twin)": mean("spearman", "rand", relex),
                         f"top-{top_k} attacked": mean("topk", "adv", meth),
                         f"top-{top_k} RelEx": mean("topk", "adv", relex)})
    return pd.DataFrame(rows)


def record_moves(moves, floor_sp: float) -> None:
    """Records the Spearman of each attacked method and of RelEx, and RelEx's noise floor."""
    from robattr.report.results import record

    for _, r in moves.iterrows():
        record("spearman_attacked", r["spearman attacked"], attack=r["attack"],
               attacked=r["attacked"])
        record("spearman_relex_transfer", r["spearman RelEx"], attack=r["attack"],
               attacked=r["attacked"])
    record("relex_noise_floor_spearman", floor_sp)


def transfer_cells(runs: Mapping, relex: str):
    """Per attack ``"<attack>/<method>"``: ``(hit, guards, transfer)``. ``hit``: the attack
    moves its own map more than its random twin does (Spearman, paired); ``guards``:
    :func:`robattr.report.verdicts.attack_effective` (``None`` where effective); ``transfer``: RelEx's
    mask against the attacked map, or the guard where the attack is ineffective."""
    from robattr.report import verdicts

    hit, guards, transfer = {}, {}, {}
    for attack, meth in runs:
        name = f"{attack}/{meth}"
        sp_adv = per_image(runs, (attack, meth), ("spearman", "adv", meth))
        sp_rand = per_image(runs, (attack, meth), ("spearman", "rand", meth))
        hit[name] = verdicts.gap(sp_rand, sp_adv, what=f"{meth} Spearman, random twin − attacked")
        guards[name] = verdicts.attack_effective(1 - sp_adv, 1 - sp_rand)
        transfer[name] = guards[name] if guards[name] is not None else verdicts.gap(
            per_image(runs, (attack, meth), ("spearman", "adv", relex)), sp_adv,
            what=f"Spearman(adversarial, clean), RelEx − {meth}")
    return hit, guards, transfer


def retrieval_table(runs: Mapping, explainers: Sequence[str], clean: Mapping[str, float]):
    """The retrieval rate of every explainer (rows) under every attack (columns ``(attack,
    attacked method)``), and on the clean images (last column ``("clean", "-")``); each
    value recorded as ``retrieval_targeted``."""
    import pandas as pd

    from robattr.report.results import record

    ret = pd.DataFrame({(a, m): {ex: run_mean(runs, a, m, "retrieval", "adv", ex)
                                 for ex in explainers} for a, m in runs})
    ret[("clean", "-")] = pd.Series(dict(clean))
    for (a, m), col in ret.items():
        for ex, v in col.items():
            record("retrieval_targeted", v, attack=a, attacked=m, method=ex)
    return ret


def pgd_cells(runs: Mapping, pgd_retrieval: Mapping[str, np.ndarray],
              methods: Sequence[str]) -> dict:
    """Per method, retrieval under the targeted attacks (per image, mean over the attacks)
    against retrieval under PGD (``pgd_retrieval[method]``), paired over the images."""
    from robattr.report import verdicts

    return {ex: verdicts.gap(np.mean([per_image(runs, (a, m), ("retrieval", "adv", ex))
                                      for a, m in runs], axis=0),
                             pgd_retrieval[ex], what=f"{ex} retrieval, targeted − PGD")
            for ex in methods}


def table_s2_rows(runs: Mapping, eps_scale: float):
    """Table S2 ours: the min, mean and max l2 size of each attack's perturbations on the
    normalised scale (divided by ``eps_scale``), each recorded as ``tableS2_l2``."""
    import pandas as pd

    from robattr.report.results import record

    if eps_scale <= 0:
        raise ValueError(f"eps_scale must be > 0, got {eps_scale}")
    rows = []
    for (attack, meth), row in runs.items():
        l2 = row["l2"] / eps_scale
        for stat, v in (("min", l2.min()), ("avg", l2.mean()), ("max", l2.max())):
            rows.append({"attack": attack, "statistic": stat,
                         "target_method": TABLE_S2_LABEL[meth], "value": float(v)})
            record("tableS2_l2", float(v), attack=attack, statistic=stat, attacked=meth,
                   scale="normalised")
    return pd.DataFrame(rows)


def table_s2_view(cmp, attack: str, d_ours: int, d_paper: int):
    """Table S2 of one attack for display, from its :func:`robattr.report.papers.compare` frame:
    rows the attacked methods, columns ``"<stat> (<source>)"`` and the per-coordinate RMS of
    the mean; returns ``(shown, why)``."""
    import pandas as pd

    from robattr.report.references import value_columns

    cols = value_columns(cmp)   # ours, any kept reference runs, the paper's
    num = (cmp.set_index(["attack", "target_method", "statistic"])[cols]
           .apply(pd.to_numeric, errors="coerce"))
    t = num.loc[attack].unstack("statistic")   # rows: attacked method; columns: (source, stat)
    shown = pd.DataFrame({f"{st} ({src})": t[(src, st)] for st in ("min", "avg", "max")
                          for src in cols})
    shown["avg RMS (ours)"] = t[("ours", "avg")] / d_ours ** 0.5
    shown["avg RMS (paper)"] = t[("paper", "avg")] / d_paper ** 0.5
    others = shown.drop(index="RT-Sal", errors="ignore")
    why = {"RT-Sal": "not built: RT-Sal needs a masking network trained on ImageNet (see the "
                     "untargeted notebook)"}
    why = {k: v for k, v in why.items() if k in shown.index}
    why.update({c: "not in the paper: it does not attack SimGrad" for c in shown.columns
                if c.endswith("(paper)")})
    why.update({c: "not in this kept reference run" for c in shown.columns
                if " ref" in c and others[c].isna().any()})
    return shown, why


def by_size(avg, attack: str, column: str) -> str:
    """The methods with a mean l2 in ``column`` of ``avg`` (indexed by attack and method) for
    this attack, smallest first, as ``"<method> <l2>, ..."``."""
    import pandas as pd

    col = pd.to_numeric(avg.loc[attack, column], errors="coerce").dropna().sort_values()
    return ", ".join(f"{m} {v:.1f}" for m, v in col.items())


def size_ratios(avg, methods: Sequence[str]) -> str:
    """Structured over unstructured mean l2 per method of ``methods`` (the paper's too, where
    it has both), as one line."""
    def ratio(m, src):
        return avg.loc[("structured", m), src] / avg.loc[("unstructured", m), src]

    return ", ".join(f"{m} ours {ratio(m, 'ours'):.1f}"
                     + (f", the paper's {ratio(m, 'paper'):.1f}"
                        if np.isfinite(avg.loc[("structured", m), "paper"]) else "")
                     for m in methods)


class MaskedModel(nn.Module):
    """``x -> net(m ⊙ x)`` for a fixed mask ``mask`` under ``masking``
    (:func:`masked_input`): the differentiable stand-in of the exercise's attack on RelEx."""

    def __init__(self, net: nn.Module, mask: torch.Tensor, masking: str = "pixel"):
        super().__init__()
        self.net, self.mask, self.masking = net, mask, masking

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(masked_input(self.net, x, self.mask, self.masking))


def direct_attack_note(sp_new: float, sp_transfer: float, floor_sp: float) -> str:
    """Which attack moved RelEx's mask more (lower Spearman = moved more): the direct attack
    on the masked model (``sp_new``) or the transferred ones (``sp_transfer``), and which
    moved it beyond RelEx's noise floor ``floor_sp``."""
    way = ("less than" if sp_new > sp_transfer else "more than" if sp_new < sp_transfer
           else "as much as")
    beyond = [name for name, s in (("the direct attack", sp_new),
                                   ("the transferred attacks", sp_transfer)) if s < floor_sp]
    return (f"RelEx's mask moved {way.split()[0]} under the direct attack on the masked model "
            f"{way.split()[1]} under the transferred unstructured attacks (higher Spearman = "
            f"moved less); beyond RelEx's own noise floor: "
            f"{' and '.join(beyond) if beyond else 'neither'}.")
