"""Zoo benchmark: time to train a digits model vs time to fetch it from the cache.

    python benchmarks/bench_zoo.py [--archs mlp cnn lenet] [--epochs N] [--device auto]

Uses a fresh temporary ROBATTR_CACHE (your cache is untouched), the zoo's default
hyper-parameters unless --epochs is given, and prints one row per arch: the first
get_model call (train + evaluate + save), the median of --repeats cache hits
(hash + sha256 check + load + build), and their ratio.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", nargs="+", default=["mlp", "cnn", "lenet"])
    ap.add_argument("--dataset", default="digits")
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--device", default="auto")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="robattr-bench-") as tmp:
        os.environ["ROBATTR_CACHE"] = tmp
        import torch

        from robattr import zoo
        from robattr.utils import get_device

        extra = {} if args.epochs is None else {"epochs": args.epochs}
        zoo.get_model(args.dataset, "mlp", epochs=1, device=args.device, progress=False)  # warm-up
        dev = get_device(args.device)
        print(f"zoo cache: {args.dataset}, device {dev}, torch {torch.__version__}, "
              f"{torch.get_num_threads()} threads, epochs {extra.get('epochs', zoo.DEFAULTS['epochs'])}")
        header = f"{'arch':<8} {'test acc':>8} {'train s':>9} {'hit ms':>9} {'ratio':>9}"
        print(header)
        print("-" * len(header))
        for arch in args.archs:
            t0 = time.perf_counter()
            model = zoo.get_model(args.dataset, arch, device=args.device, progress=False, **extra)
            first = time.perf_counter() - t0
            hits = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                zoo.get_model(args.dataset, arch, device=args.device, progress=False, **extra)
                hits.append(time.perf_counter() - t0)
            hit = statistics.median(hits)
            print(f"{arch:<8} {model.zoo_meta['test_acc']:>8.3f} {first:>9.2f} "
                  f"{hit * 1e3:>9.2f} {first / hit:>8.0f}x")


if __name__ == "__main__":
    main()
