"""The functions the cross-paper matrix notebook calls (robattr.chapters.crosspaper's rows,
tables and agreement modules): hand-made matrices and fake zoo models, seconds in all."""
from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
import torch

matplotlib.use("Agg")

from robattr.report import viz  # noqa: E402
from robattr.chapters import crosspaper as E  # noqa: E402
from robattr.chapters.crosspaper import agreement, rows, tables  # noqa: E402


def fake_model(key: str, loss: dict | None = None, **meta) -> SimpleNamespace:
    zoo_meta = {"key": key, "config": {"loss": loss or {}}, "test_acc": 0.9,
                "seconds_per_epoch": [1.0, 3.0], "cpu_seconds_per_epoch": 1.5,
                "train_seconds": 4.0, "peak_memory_bytes": 2 ** 21, **meta}
    return SimpleNamespace(zoo_meta=zoo_meta)


def cost_frame(step: dict) -> pd.DataFrame:
    """A cost table with the given step seconds and peak memory twice the step."""
    table = {r: {"step_seconds": s, "peak_memory_mb": 2 * s, "test_acc": 0.9}
             for r, s in step.items()}
    cost = pd.DataFrame(table).T
    ref = "CE" if "CE" in cost.index else cost.index[0]
    cost["step_vs_CE"] = cost.step_seconds / cost.loc[ref, "step_seconds"]
    cost["memory_vs_CE"] = cost.peak_memory_mb / cost.loc[ref, "peak_memory_mb"]
    return cost


def toy_matrix() -> pd.DataFrame:
    cols = pd.MultiIndex.from_tuples(
        [("wang2020", "kin_auc_SM"), ("wangkong2023", "T_c_deg_l2"),
         ("wangkong2025", "eps_cert_mean"), ("wangkong2025", "cert_violations"),
         ("joo2023", "rps_Grad"), ("lim2021", "retrieval_SimGrad"), ("cost", "test_acc"),
         ("cost", "step_seconds")], names=["paper", "metric"])
    data = [[0.1, 30.0, 0.05, 0, 0.90, 0.5, 0.9, 0.01],
            [0.2, 20.0, 0.10, 0, 0.95, 0.5, 0.8, 0.10],
            [0.3, 10.0, 0.20, 0, 0.99, 0.5, 0.7, 0.02]]
    return pd.DataFrame(data, index=["CE", "AT", "SSR"], columns=cols)


# ----------------------------------------------------------------------------- rows
def test_training_rows_hold_every_row_and_the_at_l2_radius():
    spec = E.training_rows(0.5)
    assert list(spec)[:3] == ["CE", "AT-linf", "AT-l2"]
    assert set(E.BASELINE_ROWS.values()) <= set(spec)
    assert spec["AT-l2"][1] == dict(norm="l2", eps=0.5, steps=7, step_size=0.125)
    assert spec["IG-NORM"] == ("ig_norm", {"batch_size": 16},
                               "wang2020, wangkong2023, wangkong2025")
    for bad in (0, -1.0, True, "0.5"):
        with pytest.raises(ValueError):
            E.training_rows(bad)


def test_not_run_rows_are_the_baselines_left_out():
    assert E.not_run_rows(["ATEX", "IGA", "AdvAAT"]) == {}
    assert E.not_run_rows(["IGA"]) == {"ATEX": viz.NOT_RUN, "AdvAAT": viz.NOT_RUN}
    with pytest.raises(ValueError, match="unknown baselines"):
        E.not_run_rows(["ART"])


def test_load_row_models_teaches_atex_with_the_ce_model(monkeypatch):
    asked = []

    def get_models(specs, **shared):
        asked.append((list(specs), shared))
        return {label: fake_model(f"{spec['method']}-key") for label, spec in specs.items()}

    monkeypatch.setattr(rows.zoo, "get_models", get_models)
    spec = {"ATEX's teacher (CE)": {"method": "ce"}, "ATEX": {"method": "atex"}}
    models, teachers = E.load_row_models(spec, device="cpu")
    assert asked == [(["ATEX's teacher (CE)", "ATEX"], {"device": "cpu"})]
    assert list(models) == ["ATEX"] and teachers["CE"].zoo_meta["key"] == "ce-key"
    models, teachers = E.load_row_models({"CE": {"method": "ce"}, "ATEX": {"method": "atex"}})
    assert list(models) == ["CE", "ATEX"] and teachers["CE"] is models["CE"]   # the CE row
    models, teachers = E.load_row_models({"CE": {"method": "ce"}, "SSR": {"method": "ssr"}})
    assert teachers == {}                                     # no ATEX, no teacher


def test_set_matrix_scale_names_the_models_and_their_architecture(monkeypatch):
    seen = []
    monkeypatch.setattr(rows.verdicts, "set_scale", lambda *a, **kw: seen.append((a, kw)))
    E.set_matrix_scale("digits", "CNN", 3.0, 8)
    E.set_matrix_scale("digits", "CNN", 3.0, 8, models=iter(["m"]), what="CE and x")
    assert seen[0] == (("digits", "CNN with Softplus(3), one per training method", 8),
                       {"unit": "test images per model"})
    assert seen[1][0][1] == "CNN with Softplus(3), CE and x" and seen[1][1]["models"] == ["m"]


def test_print_citations_prints_the_five_papers(capsys):
    E.print_citations()
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines] == list(E.PAPERS)


def test_at_l2_against_madry_converts_the_papers_radius():
    text = E.at_l2_against_madry(0.25)
    assert text.startswith("AT-l2: l2 radius 0.25 (pixel units); wang2020's Madry model: ")
    assert text.endswith("times larger")


def test_cost_table_takes_the_median_step_and_the_ratios_to_ce():
    models = {"CE": fake_model("a"), "AT": fake_model("b", {"eps": 0.031372, "norm": "linf"},
                                                      peak_memory_bytes=2 ** 22)}
    cost = E.cost_table(models, E.training_rows(0.25) | {"AT": ("at", {}, "src")},
                        {"CE": [1.0, 2.0, 9.0], "AT": [4.0, 4.0, 5.0]})
    assert cost.loc["CE", "step_seconds"] == 2.0 and cost.loc["AT", "step_vs_CE"] == 2.0
    assert cost.loc["AT", "memory_vs_CE"] == 2.0 and cost.loc["CE", "peak_memory_mb"] == 2.0
    assert cost.loc["AT", "hparams"] == "eps=0.03137, norm=linf"
    assert cost.loc["CE", "seconds_per_epoch"] == 2.0 and cost.loc["AT", "source"] == "src"
    assert E.unrecorded_columns(cost) == []
    cost.loc["AT", "train_seconds"] = np.nan
    assert E.unrecorded_columns(cost) == ["train_seconds"]
    with pytest.raises(ValueError):
        E.cost_table({}, {}, {})


def test_cost_against_wang2020_is_relative_to_at_l2():
    t3, p3 = E.cost_against_wang2020(cost_frame({"SSR": 1.0, "AT-l2": 2.0, "IG-NORM": 8.0}))
    assert t3.training.tolist() == ["SSR", "Madry", "IG-NORM"]
    assert t3.value.tolist() == [0.5, 1.0, 4.0]
    paper = (p3 / p3["Madry"])
    assert t3["paper (h/epoch, x Madry)"].tolist() == pytest.approx(
        [paper["SSR"], 1.0, paper["IG-NORM"]])
    text = E.wang2020_cost_text(t3, p3)
    assert text.startswith("Median step time relative to l2 AT: SSR 0.50, IG-NORM 4.00")
    assert f"SSR {paper['SSR']:.2f}" in text
    empty, _ = E.cost_against_wang2020(cost_frame({"SSR": 1.0, "CE": 2.0}))
    assert empty.empty


def test_joo2023_cost_text_and_comparison():
    cost = cost_frame({"CE": 0.01, "Hessian": 0.03, "l2+cosd": 0.02})
    p2 = E.joo2023_time_ratios()
    assert {"Hessian", "l2+Cosd"} <= set(p2.index)
    text = E.joo2023_cost_text(cost, "CE")
    assert text.startswith("Median step on 64 digits: l2+cosd 20 ms, Hessian 30 ms (CE 10 ms)")
    assert f"Hessian {p2['Hessian']:.2f}, l2+Cosd {p2['l2+Cosd']:.2f}" in text
    shown = E.cost_against_joo2023(cost, "digits", "cnn")
    ours = shown["ours (digits cnn, x CE)"]
    assert ours["Hessian, time"] == pytest.approx(3.0)
    assert ours["l2+Cosd, memory"] == pytest.approx(2.0)
    without_ce = E.cost_against_joo2023(cost.drop(index="CE"), "digits", "cnn")
    assert without_ce["ours (digits cnn, x CE)"].isna().all()


def test_too_few_rounds_says_why_there_is_no_verdict():
    text = E.too_few_rounds("what", "measured", 2)
    assert text.startswith("what: 2 timing rounds, fewer than ")
    assert text.endswith("Measured: measured")


def test_test_subset_is_seeded_and_checks_n():
    x, y = E.test_subset("digits", 4, 0)
    x2, y2 = E.test_subset("digits", 4, 0)
    x3, _ = E.test_subset("digits", 4, 1)
    assert x.shape[0] == 4 and torch.equal(x, x2) and torch.equal(y, y2)
    assert not torch.equal(x, x3)
    with pytest.raises(ValueError):
        E.test_subset("digits", 0, 0)


# ----------------------------------------------------------------------------- tables
def test_matrix_row_adds_the_certificate_check_quantus_and_the_cost(monkeypatch):
    monkeypatch.setattr(tables, "evaluate_all",
                        lambda m, x, y, kw: ({("wang2020", "a"): 1.0}, {"wangkong2025": 1.0}))
    seen = {}

    def cert(m, x, y, **kw):
        seen.update(kw)
        return {"cos_attack_min": 0.9, "cert_violations": 0}

    monkeypatch.setattr(tables, "certified_eps_wangkong2025", cert)
    cost = pd.Series({c: 1.5 for c in E.COST_COLUMNS})
    row, seconds = E.matrix_row(None, None, None, {"wangkong2025": {"attack_eps": 0.5, "r": 1}},
                                cost)
    assert seen == {"attack_eps": None, "r": 1}
    assert row[("wangkong2025", "cert_violations")] == 0
    assert row[("cost", "step_seconds")] == 1.5 and "Quantus" not in seconds
    assert seconds["wangkong2025"] >= 1.0


def test_matrix_frame_and_the_clean_references():
    cells = {"CE": {("wang2020", "kin_auc_SM"): 0.1, ("wang2020", "kin_auc_clean_SM"): 0.3,
                    ("wangkong2025", "attack_eps"): 0.5},
             "AT": {("wang2020", "kin_auc_SM"): 0.2, ("wang2020", "kin_auc_clean_SM"): 0.4,
                    ("wangkong2025", "attack_eps"): 0.5}}
    matrix = E.matrix_frame(cells)
    assert list(matrix.columns) == [("wang2020", "kin_auc_SM"), ("wang2020", "kin_auc_clean_SM")]
    ranked, clean = E.split_clean_references(matrix)
    assert list(ranked.columns) == [("wang2020", "kin_auc_SM")]
    assert clean[("wang2020", "kin_auc_clean_SM")].tolist() == [0.3, 0.4]
    with pytest.raises(ValueError):
        E.matrix_frame({})


def test_arrow_and_headline_columns():
    assert E.arrow("rps_Grad") == "↑" and E.arrow("T_c_deg_l2") == "↓"
    head = E.headline_columns()
    assert len(head) == 7 and list(head)[-1] == ("cost", "step_seconds")
    with_q = E.headline_columns(["Max-Sensitivity"])
    assert list(with_q)[5] == ("Quantus", "Max-Sensitivity")
    assert with_q[("Quantus", "Max-Sensitivity")] == "Quantus: Max-Sensitivity (Grad)"


def test_informative_ranks_follow_the_directions_and_skip_constants():
    ranks = E.informative_ranks(toy_matrix())
    assert ("lim2021", "retrieval_SimGrad") not in ranks          # constant
    assert ("wangkong2025", "cert_violations") not in ranks       # a check, not a rank
    assert ranks[("wang2020", "kin_auc_SM")].tolist() == [3.0, 2.0, 1.0]    # higher is better
    assert ranks[("wangkong2023", "T_c_deg_l2")].tolist() == [3.0, 2.0, 1.0]  # lower is better
    assert ranks[("cost", "step_seconds")].tolist() == [1.0, 3.0, 2.0]
    mean = E.mean_rank_by_paper(ranks)
    assert mean.index[0] == "SSR" and mean.loc["SSR", "overall"] == 1.0
    assert "cost" in mean and mean.loc["CE", "overall"] == 3.0      # cost not in overall
    assert len(E.plot_rank_heatmap(ranks).axes) >= 1


def test_certificate_line_and_evidence():
    m = toy_matrix()
    m[("wangkong2025", "cos_at_own_budget_min")] = [0.95, 0.9, 0.99]
    viol = pd.Series([0, 1, 0], index=m.index, dtype=float)
    line = E.certificate_line(viol, m[("wangkong2025", "cos_at_own_budget_min")], 24, 0.8)
    assert line == ("wangkong2025 certificate: violations per row: CE 0, AT 1, SSR 0; "
                    "total 1 of 24 attacked inputs; smallest cosine at the own budget 0.9000 "
                    "(T = 0.8)")
    ev = E.certificate_evidence(m, 0.8, 1.0)
    assert ev.startswith("Smallest cosine 0.900, T = 0.8. The certified budgets are small "
                         "(mean 0.117 in l2 at r = 1.0)")


def test_first_order_table_plot_and_evidence():
    cols = [("wangkong2023", f"{a}_{n}") for a in ("frac_above_Te", "dev_over_Te")
            for n in ("l2", "linf")]
    m = pd.DataFrame([[0.5, 0.0, 2.0, 0.5], [0.0, 0.0, 1.0, 0.5]], index=["CE", "AT"],
                     columns=pd.MultiIndex.from_tuples(cols))
    fo = E.first_order_table(m)
    assert list(fo.columns) == cols and fo.dtypes.eq(float).all()
    assert len(E.plot_first_order(fo).axes[0].patches) == 4
    assert E.first_order_evidence(fo, "CNN", None) == (
        "Mean ratio of the attacked deviation to T_e 1.50; the bound is exact only where the map "
        "is linear on the ball.")
    assert E.first_order_evidence(fo, "CNN", "max-pooling").endswith(
        ", and a CNN with max-pooling is not twice differentiable: the chapter on wangkong2023 "
        "tests the bound on smooth models.")


def test_cost_efficiency_and_the_pareto_plot():
    cost = cost_frame({"CE": 1.0, "AT": 4.0, "SSR": 0.5})
    score = pd.Series({"CE": 2.5, "AT": 1.0, "SSR": 2.5})
    front = E.pareto_front(score, cost.step_seconds[score.index])
    assert front == ["AT", "SSR"]
    table = E.cost_efficiency_table(score, cost, front)
    assert table.Pareto.tolist() == [False, True, True]
    gain = table["rank gain over CE per extra step-second"]
    assert gain["AT"] == pytest.approx(1.5 / 3.0) and np.isnan(gain["SSR"]) and np.isnan(gain["CE"])
    assert "rank gain over CE per extra step-second" not in E.cost_efficiency_table(
        score.drop("CE"), cost, front)
    fig, ordered = E.plot_pareto(cost.step_seconds[score.index], score, front)
    assert ordered == ["SSR", "AT"] and fig.axes[0].get_xscale() == "log"


def test_zoo_trainings_reads_this_process_since_the_mark(monkeypatch):
    import os

    log = pd.DataFrame({"key": ["a", "b", "a", "c"], "pid": [1, os.getpid(), os.getpid(), 1],
                        "train_seconds": [1.0, 2.0, 3.0, 4.0]})
    monkeypatch.setattr(tables.zoo, "training_log", lambda: log)
    new, mine, keys = E.zoo_trainings(1, [fake_model("a"), fake_model("b"), fake_model("a")])
    assert keys == ["a", "b"]
    assert new.train_seconds.tolist() == [2.0, 3.0]
    assert mine.key.tolist() == ["a", "b", "a"]


def test_rank_change_lines_say_whether_ranks_change():
    again = pd.DataFrame({"rps_Grad (new inputs)": [0.9, 0.8], "rps_Grad (above)": [0.7, 0.6],
                          "retrieval (new inputs)": [0.5, 1.0], "retrieval (above)": [1.0, 0.5]},
                         index=["CE", "AT"])
    lines = E.rank_change_lines(again).splitlines()
    assert lines[0].endswith("above CE 1, AT 2; new inputs CE 1, AT 2: the same")
    assert "{" not in lines[1] and "CE 2, AT 1" in lines[1]
    assert lines[1].endswith("they change")


def test_quantus_available_answers_a_bool():
    assert isinstance(E.quantus_available(report=False), bool)


# ----------------------------------------------------------------------------- agreement
def test_oriented_headlines_and_spearman_between():
    m = toy_matrix()
    head = {("wang2020", "kin_auc_SM"): "A", ("wangkong2023", "T_c_deg_l2"): "B",
            ("lim2021", "retrieval_SimGrad"): "C"}
    oriented = E.oriented_headlines(m, head)
    assert oriented["B"].tolist() == [-30.0, -20.0, -10.0]
    rho, pval = E.spearman_between(oriented)
    assert rho.loc["A", "B"] == pytest.approx(1.0)
    assert np.isnan(rho.loc["A", "C"]) and np.isnan(pval.loc["C", "C"])
    pairs = E.headline_pairs(rho, pval, ["A", "B", "C"])
    assert [tuple(p) for p in pairs[["evaluation A", "evaluation B"]].values][0] == ("A", "B")
    assert pairs.rho.isna().sum() == 2
    assert len(E.plot_agreement(rho, 3).axes) >= 1
    assert E.most_robust_rows(oriented, ["A", "B", "C"]) == {"A": "SSR", "B": "SSR"}


def test_agreement_counts_and_report():
    valid = pd.DataFrame({"evaluation A": ["a: x", "a: x"], "evaluation B": ["b: y", "c: z"],
                          "rho": [-0.6, 0.8], "p": [0.2, 0.01]})
    counts = E.agreement_counts(valid)
    assert counts == {"n_pos": 1, "n_sig_pos": 1, "n_neg": 1, "n_sig_neg": 0,
                      "mean_rho": pytest.approx(0.1)}
    assert np.isnan(E.agreement_counts(valid.iloc[:0])["mean_rho"])
    names = ["a: x", "b: y", "c: z"]
    rho = pd.DataFrame([[1, -0.6, 0.8], [-0.6, 1, 0.0], [0.8, 0.0, 1]], index=names,
                       columns=names)
    lines = E.agreement_report(valid, rho, 6, names).splitlines()
    assert lines[0] == "with 6 rows, |rho| > 0.811 is significant at the 5 % level"
    assert lines[2] == "strongest disagreement: a: x vs b: y (rho -0.60)"
    assert lines[-3] == "  a: x: agrees with c; ranks the rows against b"
    assert "significant at the 5 % level" not in E.agreement_report(valid, rho, 2, names)


def test_pair_verdicts_and_kendall_beside_spearman():
    oriented = pd.DataFrame({"a: x": [1.0, 2.0, 3.0, 4.0, 5.0], "b: y": [1.0, 2.0, 3.0, 5.0, 4.0],
                             "c: z": [1.0, 1.0, 1.0, 1.0, 1.0]})
    rho, pval = E.spearman_between(oriented)
    valid = E.headline_pairs(rho, pval, list(oriented)).dropna(subset=["rho"])
    judged = E.pair_verdicts(valid, oriented)
    assert len(judged) == 1 and "a, b" in judged[0].rule
    kt = E.kendall_against_spearman(oriented, rho, list(oriented), valid, judged)
    assert kt[["a", "b"]].values.tolist() == [["a: x", "b: y"]]
    assert kt.tau.iloc[0] == pytest.approx(0.8) and bool(kt.same_sign.iloc[0])
    assert kt["verdict in §5"].iloc[0] == judged[0].verdict
    unjudged = E.kendall_against_spearman(oriented, rho, list(oriented), valid.iloc[:0], [])
    assert unjudged["verdict in §5"].tolist() == ["not judged"]
    assert not unjudged["decided in §5"].iloc[0]


def test_defense_gaps_check_the_matrix_and_compare_with_the_reference(monkeypatch):
    values = {"CE": np.array([0.1, 0.2, 0.3, 0.2]), "SSR": np.array([0.5, 0.6, 0.7, 0.6])}
    monkeypatch.setattr(agreement, "headline_per_image", lambda paper, m, x, y, **kw: values[m])
    matrix = pd.DataFrame({("joo2023", "rps_Grad"): [0.2, 0.6]}, index=["CE", "SSR"])
    gaps = E.defense_gaps("joo2023", {"CE": "CE", "SSR": "SSR"}, ["CE", "SSR"], None, None, {},
                          matrix, ("joo2023", "rps_Grad"), "RPS (Grad)")
    assert len(gaps) == 1 and gaps[0].holds and "SSR − CE RPS (Grad)" in gaps[0].rule
    matrix.loc["SSR", ("joo2023", "rps_Grad")] = 0.5
    with pytest.raises(AssertionError):
        E.defense_gaps("joo2023", {"CE": "CE", "SSR": "SSR"}, ["CE", "SSR"], None, None, {},
                       matrix, ("joo2023", "rps_Grad"), "RPS (Grad)")
    with pytest.raises(ValueError):
        E.defense_gaps("joo2023", {}, ["CE"], None, None, {}, matrix, ("joo2023", "rps_Grad"), "")


def test_defense_evidence_lists_every_defense():
    g = pd.DataFrame({"defense": ["SSR", "AT"], "defense_value": [0.5, 0.25], "CE": [0.1, 0.1],
                      "beats_CE_on_other_headlines": ["1 of 4", "0 of 4"]})
    assert E.defense_evidence(g) == (
        "SSR 0.500 vs CE 0.100, and better than CE on 1 of 4 of the other papers' headlines; "
        "AT 0.250 vs CE 0.100, and better than CE on 0 of 4 of the other papers' headlines.")


def test_the_cost_table_is_shown_as_two_tables_named_in_words(monkeypatch):
    from robattr.chapters import crosspaper as E

    shown = []
    monkeypatch.setattr(E.rows.viz, "show_table",
                        lambda df, why=None, caption=None: shown.append((df, why, caption)))
    cost = pd.DataFrame({"method": ["ce", "at"], "source": ["-", "wang2020"], "hparams": ["-", "eps=1"],
                         "test_acc": [0.9, np.nan], "seconds_per_epoch": [1.0, 2.0],
                         "cpu_seconds_per_epoch": [0.8, np.nan],
                         "train_seconds": [10.0, 20.0], "peak_memory_mb": [3.0, 3.0],
                         "step_seconds": [0.1, 0.3], "step_vs_CE": [1.0, 3.0],
                         "memory_vs_CE": [1.0, 1.0]}, index=pd.Index(["CE", "AT-l2"], name="row"))
    E.show_cost_table(cost, {"ATEX": "not trained"})
    (models, why1, _), (costs, why2, _) = shown
    assert list(models.columns) == list(E.COST_WORDS[0].values())
    assert list(costs.columns) == list(E.COST_WORDS[1].values())
    assert list(models.index) == ["CE", "AT-l2", "ATEX"] and costs.loc["AT-l2", "step time (× CE)"] == 3.0
    assert why1 == {"ATEX": "not trained", "test accuracy": E.NOT_RECORDED}
    assert why2 == {"ATEX": "not trained", "CPU seconds per epoch": E.NOT_RECORDED}
    assert not any("_" in c for c in [*models.columns, *costs.columns])


def test_a_teacher_key_is_named_by_its_row_not_printed_as_a_hash():
    key = "ab" * 32
    text = rows._hparams_text({"eps": 0.015686, "teacher": key, "lam": 3}, {key: "CE"})
    assert text == "eps=0.01569, teacher=the CE model, lam=3"
    assert rows._hparams_text({"teacher": key}) == "teacher=a zoo model"
    assert rows._hparams_text({"units": "normalized"}) == "units=normalized"
