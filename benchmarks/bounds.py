"""Matrix-free vs dense ξ_max (001's ℓ2 bound), from digits size to ImageNet size.

    python benchmarks/bounds.py [--sizes 64 784 3072 224x224] [--repeats 1] [--threads 1]
        [--max-iter 60] [--tol 1e-6] [--device cpu]

For each input size, the saliency map (gradient of a logit) of a random Softplus(β=3)
network at one input: ``mlp`` for d = 64 (8×8), 784 (28×28) and 3072 (3×32×32), and
torchvision's ResNet-18 (random weights, Softplus) on a 224×224 sample photo
(``robattr.data.sample_images``). Prints the wall time of ξ_max by Lanczos (matrix-free,
``robattr.bounds.jacobian_spectral_norm``) and by the dense Jacobian + SVD, their ratio,
the relative difference, and the memory of each method's own arrays (dense: the d×d
Jacobian and its SVD copy; Lanczos: the Krylov basis). The dense path is refused at
224×224 (``DenseJacobianTooLarge``, a MemoryError) and the refusal is printed.
Goal: ≥ 10× faster at d = 784 with ≤ 1e-3 relative error.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _model(size: str, device):
    import torch
    from robattr import data, models

    torch.manual_seed(0)
    if size == "224x224":
        m = models.build("resnet18", SimpleNamespace(shape=(3, 224, 224), num_classes=1000,
                                                     mean=(0.485, 0.456, 0.406),
                                                     std=(0.229, 0.224, 0.225)))
        models.set_activation(m, "softplus", 3.0)
        x = data.sample_images(224)[0][:1]
    else:
        d = int(size)
        shape = {64: (1, 8, 8), 784: (1, 28, 28), 3072: (3, 32, 32)}[d]
        m = models.build("mlp", SimpleNamespace(shape=shape, num_classes=10,
                                                mean=(0.5,) * shape[0], std=(0.25,) * shape[0]),
                         "softplus", 3.0)
        x = torch.rand((1,) + shape, generator=torch.Generator().manual_seed(0))
    return m.to(device).eval(), x.to(device)


def main(argv=None) -> None:
    import torch
    from robattr.bounds import DenseJacobianTooLarge, attribution_function, jacobian_spectral_norm

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", nargs="+", default=["64", "784", "3072", "224x224"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-iter", type=int, default=60)
    ap.add_argument("--tol", type=float, default=1e-6)
    ap.add_argument("--device", default="cpu")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device(args.device)
    print(f"{'size':>8} {'d':>7} {'lanczos s':>10} {'iters':>6} {'dense s':>9} {'speed-up':>9} "
          f"{'rel. diff':>10} {'lanczos MB':>11} {'dense MB':>10}")
    for size in args.sizes:
        model, x = _model(size, dev)
        d = x[0].numel()
        fn = attribution_function(model, "sm", 0)
        if size != "224x224":       # warm-up (first-call overheads), not timed
            jacobian_spectral_norm(fn, x, "lanczos", max_iter=2)
        t_l, res = [], None
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            res = jacobian_spectral_norm(fn, x, "lanczos", tol=args.tol, max_iter=args.max_iter,
                                         return_vector=True)
            t_l.append(time.perf_counter() - t0)
        tl = min(t_l)
        mem_l = (res.iterations + 2) * d * 8 / 2 ** 20
        try:
            t_d = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                dense = jacobian_spectral_norm(fn, x, "dense")
                t_d.append(time.perf_counter() - t0)
            td = min(t_d)
            rel = float(((res.value - dense) / dense).abs().max())
            print(f"{size:>8} {d:>7} {tl:>10.3f} {res.iterations:>6} {td:>9.3f} {td / tl:>9.1f} "
                  f"{rel:>10.1e} {mem_l:>11.2f} {2 * d * d * 4 / 2 ** 20:>10.1f}")
        except DenseJacobianTooLarge as e:
            print(f"{size:>8} {d:>7} {tl:>10.3f} {res.iterations:>6} {'refused':>9} {'-':>9} "
                  f"{'-':>10} {mem_l:>11.2f} {2 * d * d * 4 / 2 ** 20:>10.0f}")
            print(f"         xi_max = {float(res.value[0]):.4g} (converged: "
                  f"{bool(res.converged[0])}); dense path: {e}")


if __name__ == "__main__":
    main()
