"""benchmarks/gpu_check.sh, the GPU checks in one go, run here as a dry run on the CPU.

A lent GPU machine gives a session one command of at most 600 s and 15 minutes of device
time in all, so the script must run every step and stay inside its budget. The dry run
(``GPU_CHECK_DRY_RUN=1``) takes every step's code path with tiny sizes on the CPU and
builds the example chapter into a scratch root; the second test gives it a budget too
small for its steps and checks that they are stopped, reported and counted.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "gpu_check.sh"
STEPS = ("pytest_cuda", "notebooks", "bench_relex", "bench_attributions", "bench_training")

pytestmark = pytest.mark.slow


def _run(tmp_path: Path, budget: int) -> tuple[subprocess.CompletedProcess, Path, float]:
    root = tmp_path / "root"
    root.mkdir()
    shutil.copy(REPO / "_toc.yml", root)
    shutil.copytree(REPO / "notebooks", root / "notebooks")
    out = tmp_path / "out"
    env = {**os.environ, "GPU_CHECK_DRY_RUN": "1", "GPU_CHECK_BUDGET": str(budget),
           "PYTHON": sys.executable, "ROBATTR_ROOT": str(root),
           "ROBATTR_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1"}
    t0 = time.monotonic()
    res = subprocess.run(["bash", str(SCRIPT), str(out)], cwd=REPO, env=env, text=True,
                         capture_output=True, timeout=budget + 240)
    return res, out, time.monotonic() - t0


def test_dry_run_runs_every_step_and_reports(tmp_path):
    res, out, _ = _run(tmp_path, budget=400)
    summary = (out / "summary.txt").read_text()
    assert res.returncode == 0, summary + res.stderr[-3000:]
    for name in STEPS:
        assert re.search(rf"^{name}: exit 0 in \d+ s$", summary, re.M), (name, summary)
        assert (out / f"{name}.log").stat().st_size > 0
    assert "notebooks executed on device auto: 3 of 3" in summary
    assert "NOT DONE" not in summary
    assert "failed steps: 0" in summary
    # what a lent machine sends back: at most 8 files, none in a sub-folder
    files = sorted(p.name for p in out.iterdir())
    assert len(files) <= 8 and all((out / f).is_file() for f in files), files
    report = (out / "cuda_report.csv").read_text().splitlines()
    assert report[0] == "test,method,model,dtype,rel_l2,tolerance" and len(report) > 1
    assert "cnn" in (out / "bench_training.log").read_text()


def test_a_budget_too_small_stops_the_steps_and_counts_them(tmp_path):
    budget = 12
    res, out, seconds = _run(tmp_path, budget=budget)
    summary = (out / "summary.txt").read_text()
    stopped = re.findall(r"^(\w+): exit 124 in \d+ s \(stopped at its \d+ s budget\)$",
                         summary, re.M)
    assert "notebooks" in stopped, summary
    assert res.returncode == summary.count(": exit ") - summary.count(": exit 0 "), summary
    assert res.returncode >= len(stopped) >= 1
    assert re.search(r"notebooks executed on device auto: [0-2] of 3", summary), summary
    assert "NOT DONE" in summary
    # the budget bounds the steps; what is outside them (two short Python reports) is small
    assert seconds < budget + 30, (seconds, summary)
