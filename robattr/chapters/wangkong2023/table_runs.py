"""The runs of the ``tables_bounds`` notebook (001's Tables 6-10) and their tables and verdicts.

:class:`Attacks` holds the attack settings shared by every cell and turns one (model, images,
norm, ε) into a run (:func:`robattr.bounds.evaluate_bounds` plus the random reference and each
case's image). Around it: the images (:func:`first_correct`, :func:`common_correct`; the models
are :func:`robattr.chapters.wangkong2023.specs.tables_bounds`), the training objectives of AdvAAT
and ART (:func:`objective_term`), our means beside the paper's (:func:`show_beside`,
:func:`block_table`, :func:`table6_frame`, :func:`table910_frame`, :func:`show_table910`), the
crossings (:func:`crossings_t78`, :func:`crossings_t6`, :func:`crossings_t910`), the pooled claims
(:func:`judged`, :func:`judged_bounds`, :func:`n_images`), Table 10's AT against CE
(:func:`ce_seed_spreads`, :func:`at_vs_ce`) and the exercise's budget
growth (:func:`budget_growth`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch

from robattr.chapters.wangkong2023.tables import (bound_summary, bound_table, case_hits, concat_groups,
                                                  concat_runs, crossing_shares, eps_label, guarded,
                                                  linearity_measured, random_deviation,
                                                  side_by_side)

__all__ = ["MODEL_LABELS", "ATTRIBUTION_LABELS", "QUANTITY_LABELS", "NO_REF", "LINF_NO_TP",
           "OBJECTIVE_TERMS", "Attacks", "first_correct", "common_correct",
           "objective_term", "show_beside", "block_table", "table6_frame", "table910_frame",
           "show_table910", "crossings_t78", "crossings_t6", "crossings_t910", "judged", "judged_bounds",
           "n_images",
           "ce_seed_spreads", "at_vs_ce", "budget_growth"]

#: the zoo losses under the names of the paper's rows
MODEL_LABELS = {"ce": "CE", "at": "AT", "ig_norm": "IG-NORM", "advaat": "AdvAAT", "iga": "ART",
                "trades": "TRADES", "igr": "TRADES+IGR"}
#: the attributions under the names of Table 6's rows
ATTRIBUTION_LABELS = {"sm": "SM", "ixg": "Input*gradient", "ig": "IG"}
#: the tables' quantities under the paper's column names
QUANTITY_LABELS = {"T_hat_e": "T̂e", "T_e": "Te", "T_prime_e": "T′e", "T_hat_c_deg": "T̂c (°)",
                   "T_c_deg": "Tc (°)", "pct_outside_T_e": "% outside Te"}
NO_REF = "the kept reference run recorded no value for this cell (a model or budget it did not run)"
LINF_NO_TP = "T′e is defined for ℓ2 budgets only: the paper reports none for ℓ∞"
#: the attribution term of AdvAAT's and ART's training objective: (key in the loss's logs, what)
OBJECTIVE_TERMS = {"advaat": ("dissim", "λ·(1 − Pearson) of clean and attacked maps"),
                   "iga": ("attr", "λ·triplet loss")}


@dataclass(frozen=True)
class Attacks:
    """The attack settings of every cell of the tables: IG steps, the top-``k`` size, the steps
    of the paper's ℓ2 attack (PGD) and ℓ∞ attack (IFIA), of the direct attack, and the seed."""
    ig_steps: int
    k: int
    l2_steps: int
    linf_steps: int
    direct_steps: int
    seed: int

    def evaluate(self, model, x, y, method: str, norm: str, eps: float, *, keep_label: bool,
                 paper_steps: int | None = None, direct_steps: int | None = None) -> dict:
        """:func:`robattr.bounds.evaluate_bounds` at these settings (the paper's attack's steps
        by norm unless ``paper_steps`` is given)."""
        from robattr.bounds import evaluate_bounds

        if paper_steps is None:
            paper_steps = self.l2_steps if norm == "l2" else self.linf_steps
        return evaluate_bounds(
            model, x, y, method=method, norm=norm, eps=eps, keep_label=keep_label,
            ig_steps=self.ig_steps, k=self.k, paper_steps=paper_steps,
            direct_steps=self.direct_steps if direct_steps is None else direct_steps, seed=self.seed)

    def run(self, model, x, y, method: str, norm: str, eps: float, *, keep_label: bool,
            image) -> dict:
        """One run: :meth:`evaluate`, plus ``dev_random`` (:func:`random_deviation` at the same
        size, seeded with ``seed + 1``) and ``image`` (the image of each case)."""
        r = self.evaluate(model, x, y, method, norm, eps, keep_label=keep_label)
        r["dev_random"] = random_deviation(model, x, y, method, norm, eps, ig_steps=self.ig_steps,
                                           seed=self.seed + 1)
        r["image"] = image
        return r


def first_correct(model, n: int, xs: torch.Tensor, ys: torch.Tensor, device):
    """The first ``n`` images of ``xs`` (labels ``ys``) that ``model`` classifies correctly, on
    ``device``, and their indices (a numpy array: the image each case belongs to)."""
    from robattr import models

    ok = models.correctly_classified(model, xs.to(device), ys, n).cpu()
    return xs[ok].to(device), ys[ok].to(device), ok.numpy()


def common_correct(models: dict, xs: torch.Tensor, ys: torch.Tensor, n: int, device) -> torch.Tensor:
    """The indices (CPU) of the first ``n`` images of ``xs`` that every model of ``models``
    (name → model) classifies correctly."""
    with torch.no_grad():
        ok = torch.stack([m(xs.to(device)).argmax(1).cpu() == ys for m in models.values()]).all(0)
    return ok.nonzero()[:, 0][:n]


def objective_term(name: str, model, x: torch.Tensor, y: torch.Tensor) -> tuple[str, float, float]:
    """AdvAAT's or ART's training objective (loss ``name``, see :data:`OBJECTIVE_TERMS`) at
    ``model`` (the one trained with it) on ``(x, y)``: what its attribution term is, the term
    (λ times the logged value) and the cross-entropy at the attacked input."""
    from robattr.train import make_loss

    if name not in OBJECTIVE_TERMS:
        raise ValueError(f"name must be one of {sorted(OBJECTIVE_TERMS)}, got {name!r}")
    loss_fn, (key, what) = make_loss(name), OBJECTIVE_TERMS[name]
    _, logs = loss_fn(model, x, y)
    return what, loss_fn.lam * float(logs[key]), float(logs["ce_adv"])


def show_beside(compared, index, quantities, caption: str, labels=MODEL_LABELS) -> None:
    """One block of a paper table, whole: per quantity our value beside each kept reference run's
    and the paper's. A '—' is a row this tier does not run (every row of the paper's has a zoo
    loss; a model not in ``labels`` would be one robattr lacks), or a cell the paper or the
    reference run has no number for; a table wider than 12 columns is shown transposed."""
    from robattr.report import viz
    from robattr.report.tables import reference_note

    t = side_by_side(compared, index, quantities, drop_empty_rows=True)
    refs = {c: c.split(" (")[0] for c in t.columns.get_level_values(1).unique() if " ref (" in c}
    t = t.rename(columns=refs, level=1).rename(columns=QUANTITY_LABELS, level=0)
    why = {c: viz.NOT_IN_PAPER if c[1] == "paper" else NO_REF for c in t.columns if c[1] != "ours"}
    ours_missing = t.xs("ours", axis=1, level=1).isna().any(axis=1)
    why.update({row: viz.NOT_RUN if row[-1] in labels.values() else viz.NOT_BUILT
                for row in t.index[ours_missing]})
    kept = "".join(f"; {reference_note(c)}" for c in refs)
    viz.show_table(t.round(4), why=why, caption=caption + kept)


def block_table(runs: dict, blocks, norm: str, quantities, table: str, labels=MODEL_LABELS):
    """Our means of every block (runs keyed (block, model, norm, ε)) beside the paper's table
    ``table``, one block after another (:func:`robattr.report.papers.compare`)."""
    from robattr.report import papers

    parts = [papers.compare(bound_table({k[1:]: r for k, r in runs.items() if k[0] == b["label"]},
                                        norm, quantities, labels),
                            table, on=["eps", "model", "quantity"],
                            where={"dataset": b["label"]}).assign(dataset=b["label"])
             for b in blocks]
    return pd.concat(parts, ignore_index=True)


def table6_frame(runs: dict, labels=MODEL_LABELS, attr_labels=ATTRIBUTION_LABELS) -> pd.DataFrame:
    """Our means of Table 6 (runs keyed (model, attribution, norm)), tidy: norm, attribution,
    model, quantity, value; no ``T_prime_e`` for ℓ∞."""
    out = []
    for (name, attr, norm), r in runs.items():
        for q, v in bound_summary(r).items():
            if norm == "linf" and q == "T_prime_e":
                continue
            out.append({"norm": norm, "attribution": attr_labels[attr], "model": labels[name],
                        "quantity": q, "value": float(v)})
    return pd.DataFrame(out)


def table910_frame(runs: dict, eps_l2: float, eps_linf: float, labels=MODEL_LABELS):
    """Our means of Tables 9-10 (runs keyed (model, norm)), tidy (norm, eps, model, quantity,
    value) with the bracketed share of images outside ``T_e`` (%, the paper's attack); no
    ``T_prime_e`` for ℓ∞. The budgets are labelled as the paper prints them (:func:`eps_label`)."""
    out = []
    for (name, norm), r in runs.items():
        vals = dict(bound_summary(r))
        vals["pct_outside_T_e"] = 100 * float((r["dev_paper"] > r["T_e"]).double().mean())
        if norm == "linf":
            vals.pop("T_prime_e")
        for q, v in vals.items():
            out.append({"norm": norm, "eps": eps_label(eps_l2 if norm == "l2" else eps_linf),
                        "model": labels[name], "quantity": q, "value": float(v)})
    return pd.DataFrame(out)


#: the quantities of Tables 9-10, in the paper's order
Q910 = ["T_hat_e", "T_e", "T_prime_e", "T_hat_c_deg", "T_c_deg", "pct_outside_T_e"]


def show_table910(ours: pd.DataFrame, name: str, paper_dataset: str, dataset: str, arch: str) -> None:
    """Our rows (:func:`table910_frame`) for the models of the paper's table ``name`` beside the
    paper's (rows of ``paper_dataset``), one table per norm."""
    from robattr.report import papers

    t = papers.compare(ours[ours.model.isin(set(papers.table(name)["model"]))], name,
                       on=["norm", "eps", "model", "quantity"], where={"dataset": paper_dataset})
    for nm, label in (("l2", "ℓ2"), ("linf", "ℓ∞")):
        show_beside(t[t.norm == nm], ["norm", "eps", "model"],
                    [q for q in Q910 if nm == "l2" or q != "T_prime_e"],
                    f"{name.split('_')[-1].replace('table', 'Table ')}, {label}: ours on {dataset} "
                    f"{arch.upper()}s (ℓ2 budget scaled), the paper's on {paper_dataset}; not "
                    "comparable in absolute terms")


def _linearity_columns(r: dict, att: str) -> dict:
    from robattr.bounds import LINEARITY_TOL

    return {f"locally linear (<= {LINEARITY_TOL:g}) %":
            100 * float((r["linearity"] <= LINEARITY_TOL).double().mean()),
            "remainder at the worst case: median": float(r["linearity"].median()),
            "remainder at the attack: median": float(r[f"linearity_{att}"].median())}


def crossings_t78(runs: dict, labels=MODEL_LABELS) -> pd.DataFrame:
    """Tables 7-8's crossings (runs keyed (block, model, norm, ε)): per cell and attack, the
    shares above each bound (:func:`crossing_shares`), the largest deviation over ``T_e``, the
    mean deviation and the local linearity at the budget."""
    rows = []
    for (lab, name, norm, e), r in runs.items():
        for att in ("paper", "direct"):
            dv = r[f"dev_{att}"]
            rows.append({"dataset": lab, "norm": norm, "eps": e, "model": labels[name],
                         "attack": att, **crossing_shares(r, att, norm),
                         "max dev / T_e": float((dv / r["T_e"]).max()), "mean dev": float(dv.mean()),
                         **_linearity_columns(r, att)})
    return pd.DataFrame(rows)


def crossings_t6(runs: dict, labels=MODEL_LABELS, attr_labels=ATTRIBUTION_LABELS) -> pd.DataFrame:
    """Table 6's crossings (runs keyed (model, attribution, norm)): per cell and attack, the
    shares above each bound (:func:`crossing_shares`)."""
    return pd.DataFrame([{"norm": norm, "attribution": attr_labels[attr], "model": labels[name],
                          "attack": att, **crossing_shares(r, att, norm)}
                         for (name, attr, norm), r in runs.items() for att in ("paper", "direct")])


def crossings_t910(runs: dict, labels=MODEL_LABELS) -> pd.DataFrame:
    """Tables 9-10's crossings (runs keyed (model, norm)): per cell and attack, the shares above
    each bound (:func:`crossing_shares`) and the largest deviation over ``T_e``."""
    return pd.DataFrame([{"norm": norm, "model": labels[name], "attack": att,
                          **crossing_shares(r, att, norm),
                          "max dev / T_e": float((r[f"dev_{att}"] / r["T_e"]).max())}
                         for (name, norm), r in runs.items() for att in ("paper", "direct")])


def judged(runs, hits, attacked, probe: str, at_least: float, what: str, broken):
    """A claim of Tables 6-10, "the attacked deviations stay within the bound on at least a
    share ``at_least`` of the cases", over every case of ``runs`` (``hits``: case within the
    bound), with whole images resampled, behind the attack guard and the architecture's
    hypothesis (``broken``, see :func:`guarded`).

    Every case, for ``T_e`` as for ``T′_e``: these are the paper's empirical claims about its
    trained models, and its tables count every image its attacks reached with no filter on
    local linearity (D.2: for l-inf "T_e has bounded all" the attacked deviations, so no
    ``T′_e`` is printed; Tables 9-10's brackets: the share of all images outside ``T_e``).
    The theorems themselves are judged under their hypothesis in ``theory_bounds``
    (:func:`~robattr.chapters.wangkong2023.tables.linear_share`). The rule says how many cases were locally linear at the budget
    (measured at ``probe``), so the reader sees how far from that hypothesis they lie."""
    from robattr.report import verdicts

    groups = concat_groups(runs)
    v = verdicts.share_clustered(hits, groups, at_least=at_least, what=what)
    _, linear = linearity_measured(concat_runs(runs, "linearity"), groups, probe=probe)
    rule = verdicts.Verdict(v.verdict, f"{v.rule}; {linear}, every case judged, as the paper's "
                                       "tables count every image")
    return guarded(rule, attacked, concat_runs(runs, "dev_random"), broken=broken)


def judged_bounds(runs, attack: str, bounds, probe: str, at_least: float, what: str, broken):
    """:func:`judged` for the cases of ``runs`` whose attacked deviation (``attack``: "paper" or
    "direct") stays within every bound in ``bounds`` (:func:`case_hits`), the attack guard on that
    attack's deviations."""
    return judged(runs, case_hits(runs, attack, bounds), concat_runs(runs, f"dev_{attack}"), probe,
                  at_least, what, broken)


def n_images(runs) -> dict:
    """The scale of a pooled claim: its distinct images, and how many cases they make."""
    return dict(n=len(np.unique(concat_groups(runs))),
                unit=f"distinct images ({sum(len(r['T_e']) for r in runs)} cases)")


def ce_seed_spreads(ce_models, runs: dict, x, y, budgets: dict, attacks: Attacks, method: str,
                    quantities=("T_e", "T_c_deg")) -> dict:
    """The seed-to-seed spread (:func:`robattr.seeds.spreads`) of the mean bounds of the CE
    models ``ce_models`` (seed 0 first, its runs in ``runs`` keyed ("ce", norm)) on the images
    ``x``, per (norm, quantity); ``budgets``: norm → ε. A bound does not depend on the attacks,
    so those of the other seeds run one step."""
    from robattr.seeds import spreads

    values = {(nm, q): [float(runs[("ce", nm)][q].mean())] for nm in budgets for q in quantities}
    for m in ce_models[1:]:
        for nm, e in budgets.items():
            r = attacks.evaluate(m, x, y, method, nm, e, keep_label=True, paper_steps=1,
                                 direct_steps=1)
            for q in quantities:
                values[nm, q].append(float(r[q].mean()))
    return spreads(values)


def at_vs_ce(runs: dict, spread: dict, n_seeds: int, paper) -> tuple[list, pd.DataFrame]:
    """Table 10's AT against CE on the same images (runs keyed (model, norm)), per norm and bound
    (``T_e``, ``T_c_deg``): a :func:`robattr.report.verdicts.gap` that must exceed the CE seeds' spread
    (``spread``, from :func:`ce_seed_spreads`; :func:`robattr.report.verdicts.beyond_seeds`), and a table
    of the means, the verdict, the share of images where AT's bound is the smaller and whether the
    paper's is (``paper``: Table 10's values indexed (norm, model, quantity))."""
    from robattr.report import verdicts

    rows, cells = [], []
    for norm in ("l2", "linf"):
        for q in ("T_e", "T_c_deg"):
            at, ce = runs[("at", norm)][q], runs[("ce", norm)][q]
            cells.append(verdicts.beyond_seeds(
                verdicts.gap(at, ce, higher_is_better=False, what=f"AT − CE {q} ({norm})"),
                float(at.mean() - ce.mean()), spread[norm, q], n_seeds=n_seeds,
                what=f"AT − CE {q} ({norm})"))
            rows.append({"norm": norm, "bound": q, "ours AT": float(at.mean()),
                         "ours CE": float(ce.mean()), "ours: AT − CE": cells[-1].verdict,
                         "images with AT < CE (%)": 100 * float((at < ce).double().mean()),
                         "paper AT < CE": bool(paper[(norm, "AT", q)] < paper[(norm, "CE", q)])})
    return cells, pd.DataFrame(rows)


def budget_growth(model, x, y, eps0: float, scale: float, attacks: Attacks, factors=(1, 4, 16),
                  label: float | None = None) -> pd.DataFrame:
    """The exercise on Eq. 39's ``c``: IG, ℓ2, at the budgets ``factor · eps0 · scale``; per
    budget (labelled ``factor × label``, ``label`` defaulting to ``eps0``) the scaled ε, the median
    ``c = T′_e / T_e``, the images the direct attack pushes above ``T′_e`` and the images."""
    from robattr.bounds import evaluate_bounds

    label = eps0 if label is None else label
    rows = []
    for factor in factors:
        e = factor * eps0 * scale
        r = evaluate_bounds(model, x, y, method="ig", norm="l2", eps=e, ig_steps=attacks.ig_steps,
                            k=attacks.k, paper_steps=attacks.l2_steps,
                            direct_steps=attacks.direct_steps, seed=attacks.seed)
        rows.append({"budget": f"{factor} × {label:g}", "ε (scaled)": e,
                     "median c": float(r["T_prime_e"].div(r["T_e"]).median()),
                     "images above T′e (direct attack)": int((r["dev_direct"] > r["T_prime_e"]).sum()),
                     "images": len(x)})
    return pd.DataFrame(rows).set_index("budget")
