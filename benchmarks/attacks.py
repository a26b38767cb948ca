"""Attribution-attack throughput: batched over images vs one image at a time.

    python benchmarks/attacks.py [--n-images 32] [--loop-images 4] [--steps 50]
        [--samples 50] [--methods smoothgrad grad] [--threads 1] [--device auto] [--quick]

The top-k attack (robattr.attacks.topk_attack, k = 8 of the 64 pixels, l-inf eps = 0.1)
on the zoo's digits CNN (ReLU, attacked through a Softplus(10) surrogate as 000 does, the
criterion evaluated on the ReLU model every step), for each method:

  batched   one call on ``--n-images`` images (robattr's way)
  per-image one call per image, ``--loop-images`` of them: the papers' procedure
            (000's notebooks attack one image at a time, its noise samples in one batch)

and prints images per second and the ratio batched / per-image. ``smoothgrad`` uses
``--samples`` noise draws: the per-image call evaluates them in one chunk (50 rows, as
the papers), the batched call in chunks of ``--rows`` rows (``batch_size``; 200-400 rows
are fastest on a CPU, cache-bound beyond); ``grad`` is there for contrast
(one row per image: where batching over images pays most). Times are the process CPU
time on a CPU (``time.process_time``: steadier on a shared machine; use ``--threads 1``)
and synchronised wall time on CUDA; the wall time is printed too. ``--quick`` shrinks the
run (8 images, 2 in the loop, 5 steps, 10 samples) for a smoke test. The model is trained
once into the zoo cache ($ROBATTR_CACHE), a few seconds.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _timed(fn, device):
    import torch
    if device.type == "cuda":
        torch.cuda.synchronize()
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    wall, cpu = time.perf_counter() - w0, time.process_time() - c0
    return (wall if device.type == "cuda" else cpu), wall


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-images", type=int, default=32, help="images in the batched call")
    ap.add_argument("--loop-images", type=int, default=4,
                    help="images attacked one at a time (the rate is extrapolated)")
    ap.add_argument("--steps", type=int, default=50, help="attack iterations")
    ap.add_argument("--samples", type=int, default=50, help="SmoothGrad noise draws")
    ap.add_argument("--rows", type=int, default=256,
                    help="rows per chunk of noisy copies in the batched call (batch_size)")
    ap.add_argument("--methods", nargs="+", default=["smoothgrad", "grad"],
                    choices=["smoothgrad", "uniform_grad", "grad", "input_x_grad"])
    ap.add_argument("--surrogate-beta", type=float, default=10.0)
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads (0: default)")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--quick", action="store_true", help="a tiny run (smoke test)")
    args = ap.parse_args(argv)
    if args.quick:
        args.n_images, args.loop_images, args.steps, args.samples = 8, 2, 5, 10

    import torch

    from robattr import data
    from robattr.attacks import topk_attack
    from robattr.utils import get_device
    from robattr.zoo import get_model

    if args.threads > 0:
        torch.set_num_threads(args.threads)
    device = get_device(args.device)
    model = get_model("digits", "cnn", progress=False, device=device)
    x, _ = data.as_tensors(data.load("digits", "test"), n=max(args.n_images, args.loop_images),
                           device=device)

    def options(method, n):
        if method in ("smoothgrad", "uniform_grad"):
            rows = args.samples if n == 1 else args.rows
            return {"n_samples": args.samples, "batch_size": rows}
        return {}

    def attack(method, xs):
        return topk_attack(model, xs, k=8, eps=0.1, steps=args.steps, method=method,
                           method_options=options(method, xs.shape[0]),
                           surrogate_beta=args.surrogate_beta, seed=0)

    clock = "wall" if device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__}, device {device}, threads {torch.get_num_threads()}, "
          f"digits CNN (8x8), top-k attack: {args.steps} steps, k = 8, eps = 0.1 (l-inf), "
          f"surrogate Softplus({args.surrogate_beta:g}); time = {clock} time")
    head = (f"{'method':14} {'mode':10} {'images':>6} {'time s':>8} {'wall s':>8} "
            f"{'img/s':>8} {'speedup':>8}")
    print(head)
    print("-" * len(head))
    for method in args.methods:
        label = f"{method}" + (f" x{args.samples}" if method in ("smoothgrad", "uniform_grad")
                               else "")
        attack(method, x[:2])                                     # warm-up
        t_b, w_b = _timed(lambda: attack(method, x[:args.n_images]), device)
        t_l, w_l = _timed(lambda: [attack(method, x[i:i + 1]) for i in range(args.loop_images)],
                          device)
        rate_b, rate_l = args.n_images / t_b, args.loop_images / t_l
        print(f"{label:14} {'per-image':10} {args.loop_images:>6} {t_l:8.2f} {w_l:8.2f} "
              f"{rate_l:8.2f} {1.0:8.2f}")
        print(f"{label:14} {'batched':10} {args.n_images:>6} {t_b:8.2f} {w_b:8.2f} "
              f"{rate_b:8.2f} {rate_b / rate_l:8.2f}")


if __name__ == "__main__":
    main()
