"""Parameter sweeps: one notebook over a grid of parameter values.

    robattr sweep wangkong2025/montecarlo -p n_samples 50,100,200 -p d 8,32 --jobs 2

Each run is executed (locally or on Ray, :mod:`robattr.book.executors`) into
``<output>/<name=value,...>/<notebook>.ipynb``; what the runs record with
:func:`robattr.report.results.record` is gathered into ``<output>/results.csv`` (one row per
recorded number, one column per swept parameter, then ``metric``, ``value`` and the
labels), ``<output>/runs.csv`` lists every run with its status, and
``<output>/summary.png`` plots each metric against the first swept parameter.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robattr.report import results as results_mod
from robattr.book.execution import NotebookFailure, results_path
from robattr.book.executors import make_job, run_jobs, write_result
from robattr.book.notebooks import discover, find, project_root
from robattr.book.params import Parameter, ParameterError, read_yaml
from robattr.book.profiles import load_profile, parse_value, resolve

__all__ = ["parse_values", "grid", "run_name", "sweep", "SweepReport"]


@dataclass
class SweepReport:
    output: Path
    runs: list[dict[str, Any]] = field(default_factory=list)
    failed: list[NotebookFailure] = field(default_factory=list)
    results: Path | None = None
    figure: Path | None = None


def parse_values(text: str, param: Parameter, notebook: str | None = None) -> list[Any]:
    """``"1,2,4"`` → ``[1, 2, 4]``, each value read as YAML and checked against the
    parameter's rule (its type; ranges are checked per run); list values keep their
    brackets: ``"[1,2],[4]"``."""
    import yaml

    try:
        raw = read_yaml(f"[{text}]")
    except yaml.YAMLError as err:
        raise ParameterError(f"cannot read values {text!r} of {param.name!r}: {err}") from None
    if not raw:
        raise ParameterError(f"no values given for {param.name!r}")
    return [parse_value(v, param, notebook) for v in raw]


def grid(values: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every combination of the swept values, the first parameter varying slowest."""
    names = list(values)
    return [dict(zip(names, combo)) for combo in itertools.product(*values.values())]


def run_name(point: dict[str, Any]) -> str:
    """A folder name for one run: ``eps=0.1,steps=20`` (unsafe characters replaced)."""
    return ",".join(f"{k}={re.sub(r'[^A-Za-z0-9._+-]', '_', str(v))}" for k, v in point.items())


def sweep(notebook: str, values: dict[str, str | list[Any]], *, root=None,
          profile: str = "quick", fixed: dict[str, Any] | None = None,
          output: str | Path | None = None, executor: str = "local", jobs: int = 1,
          address: str | None = None, figure: bool = True, log=print) -> SweepReport:
    """Run ``notebook`` for every point of the grid ``values`` (each a comma-separated
    string or a list), with ``fixed`` parameters on every run. Returns a
    :class:`SweepReport`; a failing run is reported (notebook, cell, error) and the others
    go on."""
    root = project_root(root)
    nb = find(notebook, discover(root))
    if not values:
        raise ParameterError("a sweep needs at least one -p NAME VALUES")
    parsed: dict[str, list[Any]] = {}
    for name, vals in values.items():
        if name not in nb.parameters:
            raise ParameterError(f"{nb.key}: unknown parameter {name!r}; valid parameters: "
                                 + ", ".join(nb.parameters))
        parsed[name] = (parse_values(vals, nb.parameters[name], nb.key) if isinstance(vals, str)
                        else [parse_value(v, nb.parameters[name], nb.key) for v in vals])
    prof = load_profile(profile)
    points = grid(parsed)
    # validate every run before any work
    plans = [(pt, resolve(nb, prof, {**(fixed or {}), **pt})) for pt in points]
    out_dir = Path(output) if output else root / "sweeps" / nb.key
    out_dir.mkdir(parents=True, exist_ok=True)
    report = SweepReport(out_dir)
    by_name = {}
    jobs_list = []
    for pt, params in plans:
        name = run_name(pt)
        by_name[name] = pt
        jobs_list.append(make_job(nb, params, prof, name=name,
                                  output_name=f"{name}/{nb.path.name}"))
    log(f"sweep {nb.key}: {len(jobs_list)} run(s) into {out_dir}")
    frames = []
    for i, res in enumerate(run_jobs(jobs_list, executor=executor, jobs_at_once=jobs,
                                     address=address), 1):
        pt = by_name[res.name]
        out = out_dir / res.name / nb.path.name
        write_result(res, out)
        row = {**pt, "status": "ok" if res.ok else "failed", "seconds": round(res.seconds, 2),
               "host": res.host, "notebook": str(out.relative_to(out_dir)),
               "error": "" if res.ok else f"cell {res.cell}: {res.error}"}
        report.runs.append(row)
        if res.ok:
            log(f"[{i}/{len(jobs_list)}] {res.name}: done in {res.seconds:.1f} s")
            if res.results_csv:
                df = results_mod.read(results_path(out))
                for k, v in reversed(list(pt.items())):
                    df.insert(0, k, str(v) if isinstance(v, (list, tuple)) else v)
                frames.append(df)
        else:
            failure = NotebookFailure(f"{nb.key} [{res.name}]", out, res.cell, res.error)
            report.failed.append(failure)
            log(f"[{i}/{len(jobs_list)}] FAILED: {failure}")
    _write_tables(report, frames, list(parsed), figure)
    log(f"{len(report.runs) - len(report.failed)} run(s) ok, {len(report.failed)} failed; "
        f"results: {report.results}")
    return report


def _write_tables(report: SweepReport, frames: list, names: list[str], figure: bool) -> None:
    import pandas as pd

    runs = pd.DataFrame(report.runs)
    runs.to_csv(report.output / "runs.csv", index=False)
    tidy = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(
        columns=[*names, "metric", "value"])
    if frames:
        tidy = tidy.sort_values(by=names, kind="stable", key=lambda c: c.map(
            lambda v: (0, v) if isinstance(v, (int, float)) else (1, str(v))))
    report.results = report.output / "results.csv"
    tidy.to_csv(report.results, index=False)
    if figure and frames:
        report.figure = summary_figure(tidy, names, report.output / "summary.png")


def summary_figure(tidy, names: list[str], path: Path) -> Path:
    """Each metric (mean over its labelled rows per run) against the first swept
    parameter, one line per value of the second; saved to ``path``."""
    import matplotlib

    matplotlib.use("Agg")            # a script, not a notebook: no display
    import matplotlib.pyplot as plt

    metrics = list(dict.fromkeys(tidy["metric"]))[:9]
    x, hue = names[0], (names[1] if len(names) > 1 else None)
    cols = min(3, len(metrics))
    rows = -(-len(metrics) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, metric in zip(axes.flat, metrics):
        sub = tidy[tidy["metric"] == metric]
        keys = [x] + ([hue] if hue else [])
        mean = sub.groupby(keys, sort=True)["value"].mean().reset_index()
        for label, part in (mean.groupby(hue) if hue else [(None, mean)]):
            ax.plot(part[x].astype(str) if part[x].dtype == object else part[x], part["value"],
                    marker="o", label=f"{hue}={label}" if hue else None)
        labels = [c for c in sub.columns if c not in (*names, "metric", "value")
                  and sub[c].nunique() > 1]
        ax.set_title(metric + (f" (mean over {', '.join(labels)})" if labels else ""),
                     fontsize=10)
        ax.set_xlabel(x)
        if hue:
            ax.legend(fontsize=8)
    for ax in list(axes.flat)[len(metrics):]:
        ax.set_visible(False)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
