"""The untargeted notebook's steps: 004's PGD sweep (Fig. 3, Table S1, Table 1, Fig. 5 / S1).

* :func:`clean_class_masks`, :func:`attack_and_score`: the clean class and masks of a model,
  and one budget's attack, random twin, masks and scores;
* :func:`success_rates`, :func:`attack_guards`, :func:`pooled`: whether the attack does
  anything at each budget, and per-image values pooled over the budgets where it does;
* :func:`eps_curve`, :func:`curve_frame`: mean scores against the budget, as a tidy table;
* :func:`harder_to_attack`, :func:`harder_note`: is the PGD-trained model harder to attack?
* :func:`retrieval_cells`, :func:`retrieval_verdicts`, :func:`m0_cells`,
  :func:`variant_cells`, :func:`relevance_cells`, :func:`similarity_cells`: the cells of the
  notebook's claims; :func:`record_retrieval` records the retrieval rates;
* :func:`table_s1_view`, :func:`table1_rows`, :func:`table1_view`: Tables S1 and 1.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
from torch import nn

from robattr.chapters.lim2021.evaluate import all_masks, mask_scores, per_image, random_twin
from robattr.models import predict

__all__ = ["clean_class_masks", "attack_and_score", "success_rates", "attack_guards", "pooled",
           "eps_curve", "curve_frame", "retrieval_cells", "variant_cells", "relevance_cells",
           "similarity_cells", "table_s1_view", "table1_rows", "table1_view",
           "harder_to_attack", "harder_note", "record_retrieval", "retrieval_verdicts",
           "m0_cells"]


def clean_class_masks(model: nn.Module, x: torch.Tensor, mask_options: Mapping) -> dict:
    """``{"c0": the predicted (clean) class, "masks": every method's mask for it}``
    (:func:`all_masks` with ``mask_options``)."""
    c0 = predict(model, x)          # the clean class (the paper: the model's prediction)
    return dict(c0=c0, masks=all_masks(model, x, c0, **mask_options))


def attack_and_score(model: nn.Module, x: torch.Tensor, clean: Mapping, eps: float,
                     gen_twin: torch.Generator, *, pgd_steps: int, step_size: float | None,
                     seed: int, top_k: int, masking: str, mask_options: Mapping) -> dict:
    """One budget ``eps`` (pixels) of the sweep: PGD on ``x`` away from ``clean["c0"]``
    (generator from ``seed``), the random twin (noise from ``gen_twin``), whether each is
    misclassified, every method's masks of the attacked images for the clean class, and
    their :func:`mask_scores` (with relevance) against ``clean["masks"]``.

    Returns ``x_adv``, ``fooled``, ``fooled_rand``, ``l2`` and the ``(key, method)`` scores."""
    from robattr.attacks import pgd

    c0 = clean["c0"]
    x_adv = pgd(model, x, c0, eps=eps, steps=pgd_steps, step_size=step_size,
                generator=torch.Generator(device=x.device).manual_seed(seed))
    l2 = (x_adv - x).flatten(1).norm(dim=1)
    x_rand = random_twin(x, l2, gen_twin)    # the clean image plus noise of the attack's l2 length
    fooled, fooled_rand = predict(model, x_adv) != c0, predict(model, x_rand) != c0
    madv = all_masks(model, x_adv, c0, **mask_options)
    return {"x_adv": x_adv, "fooled": fooled, "fooled_rand": fooled_rand, "l2": l2,
            **mask_scores(model, x_adv, madv, clean["masks"], c0, top_k, relevance=True,
                          masking=masking)}


def success_rates(results: Mapping, mname: str, eps_list: Sequence[float],
                  key: str = "fooled") -> list[float]:
    """The share of images whose label flips (``key``: ``"fooled"`` for PGD,
    ``"fooled_rand"`` for the random twins) at each budget, rounded to 2 digits."""
    return [round(float(results[(mname, e)][key].float().mean()), 2) for e in eps_list]


def attack_guards(results: Mapping, model_names, eps_list: Sequence[float]) -> dict:
    """``{(model, eps): verdicts.attack_effective(PGD flips, twin flips)}``: ``None`` where
    PGD flips more labels than its random twins, else the guard's undecided verdict."""
    from robattr.report import verdicts

    return {(mname, e): verdicts.attack_effective(
                results[(mname, e)]["fooled"].float().cpu().numpy(),
                results[(mname, e)]["fooled_rand"].float().cpu().numpy())
            for mname in model_names for e in eps_list}


def pooled(results: Mapping, guard: Mapping, mname: str, key: str, meth: str,
           eps_list: Sequence[float]):
    """Per-image values of ``(key, meth)`` over the budgets of ``eps_list`` where the attack is
    effective, stacked: ``(values or None, those budgets)``."""
    eff = [e for e in eps_list if guard[(mname, e)] is None]
    vals = (np.concatenate([per_image(results, (mname, e), (key, meth)) for e in eff])
            if eff else None)
    return vals, eff


def eps_curve(results: Mapping, mname: str, key: str, meth: str,
              eps_list: Sequence[float]) -> np.ndarray:
    """The mean of ``(key, meth)`` over the images at each budget of ``eps_list``."""
    return np.array([float(results[(mname, e)][(key, meth)].mean()) for e in eps_list])


def curve_frame(results: Mapping, model_names, methods: Sequence[str],
                eps_list: Sequence[float], names: Mapping[str, str], by: str):
    """:func:`eps_curve` for every model, method and quantity of ``names`` (``{key: label}``,
    the label in column ``by``) as a tidy table, with a ``family`` column (RelEx first)."""
    import pandas as pd

    df = pd.DataFrame([{"model": f"{mname} model", by: label, "method": meth,
                        "family": "RelEx" if meth.startswith("RelEx") else "other methods",
                        "eps": e, "value": v}
                       for mname in model_names for key, label in names.items() for meth in methods
                       for e, v in zip(eps_list, eps_curve(results, mname, key, meth, eps_list))])
    df["family"] = pd.Categorical(df["family"], ["RelEx", "other methods"])  # RelEx solid
    return df


def retrieval_cells(results: Mapping, guard: Mapping, mname: str, eps_list: Sequence[float],
                    relex: str, others: Sequence[str]):
    """RelEx's retrieval against each other method's, per budget where the attack works,
    paired over the images: ``(cells, budgets)``, ``cells[(eps, method)]``."""
    from robattr.report import verdicts

    eff = [e for e in eps_list if guard[(mname, e)] is None]
    cells = {(e, meth): verdicts.gap(per_image(results, (mname, e), ("retrieval", relex)),
                                     per_image(results, (mname, e), ("retrieval", meth)),
                                     what=f"retrieval, {relex} − {meth}")
             for e in eff for meth in others}
    return cells, eff


def variant_cells(results: Mapping, guard: Mapping, model_names, eps_list: Sequence[float],
                  pairs: Mapping[str, tuple[str, str]]) -> dict:
    """Per model and change ``what -> (before, after)``: m_0's retrieval on the attacked
    images, after − before, paired over images and the budgets where the attack works (the
    guard of the largest budget where none does)."""
    from robattr.report import verdicts

    cells = {}
    for mname in model_names:
        for what, (before, after) in pairs.items():
            a, _ = pooled(results, guard, mname, "clean", after, eps_list)
            b, _ = pooled(results, guard, mname, "clean", before, eps_list)
            cells[f"{mname}, {what}"] = guard[(mname, eps_list[-1])] if a is None else verdicts.gap(
                a, b, what=f"m_0 retrieval, {after} − {before}")
    return cells


def relevance_cells(results: Mapping, mname: str, eps_list: Sequence[float], relex: str,
                    others: Sequence[str]):
    """RelEx's feature relevance R against each other method's, paired over images and all
    budgets: ``(cells, runner_up)``, the runner-up the other method with the highest mean R."""
    from robattr.report import verdicts

    def stacked(meth):
        return np.concatenate([per_image(results, (mname, e), ("R", meth)) for e in eps_list])

    rx = stacked(relex)
    cells = {meth: verdicts.gap(rx, stacked(meth), what=f"R, {relex} − {meth}")
             for meth in others}
    runner_up = max(others, key=lambda meth: np.mean(
        [per_image(results, (mname, e), ("R", meth)) for e in eps_list]))
    return cells, runner_up


def similarity_cells(results: Mapping, guard: Mapping, model_names, eps_list: Sequence[float],
                     relex: str, others: Sequence[str]) -> dict:
    """Per model: the most similar other method's Spearman (adversarial vs clean map) minus
    RelEx's, pooled over the budgets where the attack works (else the guard)."""
    from robattr.report import verdicts

    cells = {}
    for mname in model_names:
        rx, _ = pooled(results, guard, mname, "spearman", relex, eps_list)
        if rx is None:
            cells[mname] = guard[(mname, eps_list[-1])]
            continue
        sp_other = {meth: pooled(results, guard, mname, "spearman", meth, eps_list)[0]
                    for meth in others}
        best = max(sp_other, key=lambda meth: sp_other[meth].mean())
        cells[mname] = verdicts.gap(
            sp_other[best], rx, what=f"Spearman, most similar other method ({best}) − {relex}")
    return cells


def table_s1_view(results: Mapping, eps_list: Sequence[float], eps_scale: float, d_ours: int,
                  d_paper: int):
    """Table S1: the mean l2 size of the natural model's perturbation on the normalised scale
    at each budget (recorded as ``tableS1_l2``), beside any reference and the paper's, with
    the per-coordinate RMS of each. Returns ``(shown, why)``."""
    import pandas as pd

    from robattr.report import viz
    from robattr.report.papers import compare
    from robattr.report.results import record

    rows = []
    for e in eps_list:
        l2 = float(results[("natural", e)]["l2"].mean())
        rows.append({"eps": f"{e:g}", "value": l2 / eps_scale,
                     "rms_ours": l2 / eps_scale / d_ours ** 0.5})
        record("tableS1_l2", l2 / eps_scale, eps=e, scale="normalised")
    ours = pd.DataFrame(rows)
    cmp = compare(ours, "lim2021_tableS1", on=["eps"])
    cmp["rms_ours"] = cmp["eps"].map(dict(zip(ours["eps"], ours["rms_ours"])))
    cmp["rms_paper"] = cmp["paper"].astype(float) / d_paper ** 0.5
    shown = (cmp.set_index("eps").drop(columns="note").apply(pd.to_numeric, errors="coerce")
             .round(4))
    shown.index = [f"eps = {e}" for e in shown.index]
    why = {r: viz.NOT_RUN for r in shown.index[shown["ours"].isna()]}
    why.update({c: "not in this kept reference run" for c in shown.columns
                if " ref" in c and shown[c].isna().any()})
    return shown, why


def table1_rows(results: Mapping, model_names, eps_list: Sequence[float],
                methods: Sequence[str], relex: str):
    """Table 1 ours: the mean R of every model, budget and method (recorded as
    ``table1_R``). Returns ``(ours, ours_main)``: all rows, and the paper's methods only
    (``relex`` named ``RelEx``)."""
    import pandas as pd

    from robattr.report.results import record

    rows = []
    for mname in model_names:
        for e in eps_list:
            for meth in methods:
                rows.append({"model": mname, "eps": str(float(e)), "method": meth,
                             "value": float(results[(mname, e)][("R", meth)].mean())})
                record("table1_R", rows[-1]["value"], model=mname, eps=float(e), method=meth)
    ours = pd.DataFrame(rows)
    main = ours.replace({"method": {relex: "RelEx", "SmoothGrad": "SmoothGrad"}})
    main = main[main["method"].isin(["SimGrad", "IntGrad", "SmoothGrad", "DeepLIFT", "GradCAM",
                                     "MASK", "RelEx"])]
    return ours, main


def table1_view(ours_main, mname: str, paper_model: str):
    """Table 1 of one model for display: R per method (rows) and budget and source (columns
    ``"eps = <e>, <source>"``; a budget the paper or a reference does not print is left out).
    Returns ``(wide, why, budgets the paper prints)``."""
    import pandas as pd

    from robattr.report import viz
    from robattr.report.papers import compare
    from robattr.report.references import value_columns

    cmp = compare(ours_main[ours_main["model"] == mname], "lim2021_table1", on=["eps", "method"],
                  where={"model": paper_model})
    cols = value_columns(cmp)
    wide = (cmp.set_index(["method", "eps"])[cols].apply(pd.to_numeric, errors="coerce")
            .unstack("eps"))
    keep = [(s, e) for e in sorted(set(wide.columns.get_level_values(1)), key=float) for s in cols
            if s == "ours" or wide[(s, e)].notna().any()]
    wide = wide[keep]
    wide.columns = [f"eps = {e}, {s}" for s, e in keep]
    others = wide.drop(index="RT-Sal", errors="ignore")
    rtsal = ("not built: it needs a masking network trained on ImageNet (see the top of this "
             "notebook)")
    if "RT-Sal" in wide.index and wide.loc["RT-Sal"].isna().all():
        rtsal += "; the paper prints none for this model either (N/A)"
    why = {"RT-Sal": rtsal} if "RT-Sal" in wide.index else {}
    why.update({c: viz.NOT_RUN for c in wide.columns
                if c.endswith(", ours") and others[c].isna().all()})
    why.update({c: "not in this kept reference run" for c in wide.columns
                if " ref" in c and others[c].isna().any()})
    return wide.round(3), why, sorted({e for s, e in keep if s == "paper"}, key=float)


def harder_to_attack(results: Mapping, eps_list: Sequence[float]):
    """Is the PGD-trained ("robust") model harder to attack than the natural one? PGD's
    success on the natural model minus on the robust one, paired over images and budgets."""
    from robattr.report import verdicts

    fooled = {mname: np.concatenate([results[(mname, e)]["fooled"].float().cpu().numpy()
                                     for e in eps_list]) for mname in ("natural", "robust")}
    return verdicts.gap(fooled["natural"], fooled["robust"],
                        what="PGD success, natural − PGD-trained model")


def harder_note(models: Mapping[str, nn.Module], holds: bool) -> str:
    """The line after :func:`harder_to_attack`: both models' clean accuracy, and what
    "robust" means in the tables that follow."""
    return (f"Clean test accuracy: natural {models['natural'].zoo_meta['test_acc']:.3f}, "
            f"PGD-trained {models['robust'].zoo_meta['test_acc']:.3f}. At these budgets PGD "
            + ("succeeds less often on the PGD-trained model." if holds else
               "does not succeed measurably less often on the PGD-trained model: below, "
               "'robust' names the PGD-trained model (the paper's robust ResNet-50 plays that "
               "part), not a property it shows at this scale."))


def record_retrieval(results: Mapping, model_names, methods: Sequence[str],
                     eps_list: Sequence[float]) -> None:
    """Records every model's and method's mean retrieval over the budgets, with the attacked
    image's mask (``mask="adv"``) and with the clean one (``mask="clean"``)."""
    from robattr.report.results import record

    for mname in model_names:
        for meth in methods:
            for key, mask in (("retrieval", "adv"), ("clean", "clean")):
                record("retrieval", eps_curve(results, mname, key, meth, eps_list).mean(),
                       model=mname, method=meth, mask=mask)


def retrieval_verdicts(results: Mapping, guard: Mapping, model_names,
                       eps_list: Sequence[float], relex: str, others: Sequence[str]):
    """Per model, :func:`retrieval_cells` combined (the guard of the largest budget where the
    attack works nowhere), and the grid of their verdicts (rows: budgets, columns: methods).
    Returns ``(per_model, grids)``; a model without an effective budget has no grid."""
    import pandas as pd

    from robattr.report import verdicts

    per_model, grids = {}, {}
    for mname in model_names:
        cells, eff = retrieval_cells(results, guard, mname, eps_list, relex, others)
        if not cells:
            per_model[mname] = guard[(mname, eps_list[-1])]
            continue
        per_model[mname] = verdicts.combine(list(cells.values()), what="(eps, method) cells")
        grids[mname] = pd.DataFrame([[cells[(e, meth)].verdict for meth in others] for e in eff],
                                    index=[f"{e:g}" for e in eff], columns=list(others))
    return per_model, grids


def m0_cells(results: Mapping, guard: Mapping, model_names, eps_list: Sequence[float],
             relex: str, at_least: float = 0.75) -> dict:
    """Per model: the share of attacked images (budgets of ``eps_list`` where the attack
    works) that the clean image's RelEx mask ``m_0`` retrieves, at least ``at_least``."""
    from robattr.report import verdicts

    cells = {}
    for mname in model_names:
        vals, eff = pooled(results, guard, mname, "clean", relex, eps_list)
        cells[mname] = guard[(mname, eps_list[-1])] if vals is None else verdicts.share(
            int(vals.sum()), vals.size, at_least=at_least,
            what=f"attacked images retrieved by m_0 (eps {', '.join(f'{e:g}' for e in eff)})")
    return cells
