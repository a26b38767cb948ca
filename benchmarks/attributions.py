"""Attribution benchmark: robattr vs Captum for IG and SmoothGrad, and IG's cost per step.

    python benchmarks/attributions.py [--models lenet resnet18_cifar] [--batch 16 4]
        [--steps 50] [--repeats 3] [--threads 1] [--devices cpu cuda] [--tv224]

For each model and device, on the same model and inputs in one run, prints the median
wall time of:
  grad            one gradient of the batch (robattr.attributions.grad)
  IG / SG captum  Captum's IntegratedGradients (riemann_middle) / NoiseTunnel(Saliency)
                  with all samples in one pass (Captum's default)
  robattr         robattr's default call (batch_size=None: 128 rows per pass on the CPU, on
                  CUDA as many rows as the free memory holds; column "rows")
  1 pass          robattr in Captum's single pass (batch_size = all rows)
  cg              robattr (default chunks) with create_graph=True (graph kept)
and the ratios ``speedup = captum / robattr`` (goal >= 1.0; for robattr's default and
for the same single pass) and ``/(m grad)``, robattr's default time over ``m`` single
gradients (goal <= 1.15 for IG). On a CPU one huge pass is slower than 128-row chunks
(cache); Captum's default is the one huge pass. On CUDA the run ends with the
precision check: the relative l2 difference of ``grad`` of each model on CUDA vs the
CPU (fp32), under robattr's default (full fp32) and with TF32 on. Models are random (weights do not change the cost),
in eval mode; inputs are uniform pixels. ``--tv224`` adds torchvision's ResNet-18 at
224x224 (slow on a CPU). ``--threads`` sets torch's CPU threads (1 is steadier on a
shared machine; 0 keeps torch's default).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _median_times(fns: dict, repeats: int, device) -> dict:
    """Median wall time of each function; the repeats are interleaved (one of each, then
    again) so that a change of load on a shared machine hits every entry alike."""
    import torch

    def once(fn):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - t0

    for fn in fns.values():
        fn()  # warm-up
    times = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            times[k].append(once(fn))
    return {k: statistics.median(v) for k, v in times.items()}


def bench(arch, size, n, steps, repeats, device):
    import torch
    from captum.attr import IntegratedGradients, NoiseTunnel, Saliency

    from robattr import attributions as A
    from robattr.models import build

    info = SimpleNamespace(shape=(3, size, size), num_classes=10, mean=(0.45,) * 3,
                           std=(0.25,) * 3)
    torch.manual_seed(0)
    model = build(arch, info).to(device).eval()
    x = torch.rand(n, 3, size, size, device=device)
    xg = x.clone().requires_grad_(True)
    t = torch.arange(n, device=device) % 10
    rows = n * steps
    sigma = float(0.1 * (x.max() - x.min()))
    nt = NoiseTunnel(Saliency(model))
    fns = {
        "grad": lambda: A.grad(model, x, t),
        "IG captum": lambda: IntegratedGradients(model).attribute(
            x, target=t, n_steps=steps, method="riemann_middle"),
        "IG ours": lambda: A.integrated_gradients(model, x, t, steps=steps),
        "IG one": lambda: A.integrated_gradients(model, x, t, steps=steps, batch_size=rows),
        "IG cg": lambda: A.integrated_gradients(model, xg, t, steps=steps, create_graph=True),
        "SG captum": lambda: nt.attribute(x, nt_type="smoothgrad", nt_samples=steps,
                                          stdevs=sigma, target=t, abs=False),
        "SG ours": lambda: A.smoothgrad(model, x, t, n_samples=steps, sigma=sigma),
        "SG one": lambda: A.smoothgrad(model, x, t, n_samples=steps, sigma=sigma,
                                       batch_size=rows),
        "SG cg": lambda: A.smoothgrad(model, xg, t, n_samples=steps, sigma=sigma,
                                      create_graph=True),
    }
    tm = _median_times(fns, repeats, device)
    rows_used = {}
    for m in ("IG", "SG"):
        fns[f"{m} ours"]()
        rows_used[m] = A.last_chunk_rows()
    out = [(m, tm[f"{m} captum"], tm[f"{m} ours"], rows_used[m], tm[f"{m} one"], tm[f"{m} cg"],
            tm[f"{m} ours"] / (steps * tm["grad"])) for m in ("IG", "SG")]
    return tm["grad"], out


def precision_check(arch, size, n, device) -> dict:
    """Relative l2 difference of ``grad`` on ``device`` vs the CPU, fp32 and TF32."""
    import torch

    import robattr
    from robattr import attributions as A
    from robattr.models import build

    info = SimpleNamespace(shape=(3, size, size), num_classes=10, mean=(0.45,) * 3,
                           std=(0.25,) * 3)
    torch.manual_seed(0)
    model = build(arch, info).eval()
    x = torch.rand(n, 3, size, size)
    t = torch.arange(n) % 10
    ref = A.grad(model, x, t)
    out = {}
    for mode in ("fp32", "tf32"):
        with robattr.precision.scope(mode):
            g = A.grad(model.to(device), x.to(device), t.to(device)).cpu()
        out[mode] = float((g - ref).norm() / ref.norm())
    model.cpu()
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["lenet", "resnet18_cifar"],
                    help="robattr archs at 32x32 (default: lenet resnet18_cifar)")
    ap.add_argument("--batch", nargs="+", type=int, default=[16, 2],
                    help="batch size per model (last one repeats)")
    ap.add_argument("--steps", type=int, default=50, help="IG steps = SmoothGrad samples")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--devices", nargs="+", default=None, help="default: cpu, and cuda if present")
    ap.add_argument("--tv224", action="store_true", help="add torchvision resnet18 at 224x224")
    ap.add_argument("--tv224-batch", type=int, default=2)
    args = ap.parse_args(argv)

    import torch

    warnings.filterwarnings("ignore")
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    devices = args.devices or (["cpu", "cuda"] if torch.cuda.is_available() else ["cpu"])
    cases = [(m, 32, args.batch[min(i, len(args.batch) - 1)]) for i, m in enumerate(args.models)]
    if args.tv224:
        cases.append(("resnet18", 224, args.tv224_batch))

    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}, m = {args.steps} "
          f"steps/samples, median of {args.repeats}; times in ms")
    head = (f"{'device':6} {'model':15} {'input':11} {'N':>3} {'method':6} {'grad':>8} "
            f"{'captum':>9} {'robattr':>9} {'rows':>6} {'speedup':>7} {'1 pass':>9} {'speedup':>7} "
            f"{'cg':>9} {'/(m grad)':>9}")
    print(head)
    print("-" * len(head))
    for dev in devices:
        device = torch.device(dev)
        name = torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu"
        for arch, size, n in cases:
            t_grad, rows = bench(arch, size, n, args.steps, args.repeats, device)
            for method, cap, ours, used, one, cg, per in rows:
                print(f"{dev:6} {arch:15} {f'3x{size}x{size}':11} {n:>3} {method:6} "
                      f"{1e3 * t_grad:8.1f} {1e3 * cap:9.1f} {1e3 * ours:9.1f} {used:>6} "
                      f"{cap / ours:6.2f}x {1e3 * one:9.1f} {cap / one:6.2f}x "
                      f"{1e3 * cg:9.1f} {per:9.2f}")
        if device.type == "cuda":
            print(f"  ({dev}: {name})")
    for dev in devices:
        device = torch.device(dev)
        if device.type != "cuda":
            continue
        print(f"\nprecision: relative l2 of grad on {dev} vs the CPU (fp32 CPU reference)")
        print(f"{'model':15} {'input':11} {'N':>3} {'fp32 (default)':>15} {'tf32':>10}")
        for arch, size, n in cases:
            d = precision_check(arch, size, min(n, 4), device)
            print(f"{arch:15} {f'3x{size}x{size}':11} {min(n, 4):>3} {d['fp32']:15.2e} "
                  f"{d['tf32']:10.2e}")


if __name__ == "__main__":
    main()
