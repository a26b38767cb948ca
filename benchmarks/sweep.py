"""Wall time of an 8-run sweep with 1 and with 2 workers (local processes, and Ray if
installed): the ratio says how much a second worker buys on this machine.

    .venv/bin/python benchmarks/sweep.py [--notebook example/digits_saliency] [--ray]

Each run is one execution of the notebook in the smoke profile with a different seed
(outputs and a fresh, empty model zoo per timing go to a temporary folder; the book and
your zoo are not touched).
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time

from robattr.book.sweep import sweep


def timed(notebook: str, executor: str, jobs: int, out: str) -> float:
    # an empty model zoo for every timing, so no configuration profits from an earlier one
    os.environ["ROBATTR_CACHE"] = f"{out}/zoo"
    t0 = time.perf_counter()
    report = sweep(notebook, {"seed": list(range(8))}, profile="smoke", output=out,
                   executor=executor, jobs=jobs, figure=False, log=lambda *a: None)
    if report.failed:
        raise SystemExit(f"a run failed: {report.failed[0]}")
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notebook", default="example/digits_saliency")
    ap.add_argument("--ray", action="store_true", help="also time the Ray executor")
    args = ap.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for executor in ["local"] + (["ray"] if args.ray else []):
            one = timed(args.notebook, executor, 1, f"{tmp}/{executor}1")
            two = timed(args.notebook, executor, 2, f"{tmp}/{executor}2")
            rows.append((executor, one, two))
    print(f"8-run sweep of {args.notebook} (smoke profile), {os.cpu_count()} CPU cores")
    print(f"{'executor':<10}{'1 worker (s)':>14}{'2 workers (s)':>15}{'speed-up':>10}")
    for executor, one, two in rows:
        print(f"{executor:<10}{one:>14.1f}{two:>15.1f}{one / two:>9.2f}×")


if __name__ == "__main__":
    main()
