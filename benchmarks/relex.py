"""RelEx throughput: batching, precision and memory format, with the masks' agreement.

    python benchmarks/relex.py [--n-images 16] [--loop-images 4] [--epochs 50] [--copies 50]
        [--rows 4096] [--threads 1] [--device auto] [--resnet] [--resnet-images 2]
        [--resnet-copies 100] [--quick]

For the zoo's digits CNN (and, with ``--resnet``, a 224x224 torchvision ResNet-50 with
random weights on ``robattr.data.sample_images``; weights do not change the cost) it times
``robattr.attributions.relex``:

  batched    one call on ``--n-images`` images, ``--rows`` rows (images x copies) per pass
  per-image  one call per image (004's procedure: one image, its copies in one batch),
             ``--loop-images`` of them

and prints seconds per image and the ratio per-image / batched (> 1: batching pays).

With ``--resnet`` a second table times the ResNet-50 (``--resnet-copies`` copies, default
100 as in 004) in each precision and memory format, one call on ``--resnet-images``
images with the default ``batch_size`` (device-aware), and prints how far each
configuration's masks are from the full-precision (fp32, NCHW) masks of the same seed:
the Spearman rank correlation and the top-10 % intersection (share of the fp32 mask's
top 10 % pixels also in this mask's top 10 %; IoU = f / (2 - f)), the minimum over the
images. The row "fp32, other seed" is the floor: two fp32 runs that differ only in their
noise draws. 004 reports about 17 s per ImageNet image on an RTX 2080 Ti (50 epochs,
100 copies); the goal here is 1 s or less on an H100, with Spearman >= 0.99 or top-10 %
IoU >= 0.95 against fp32.

Times are the process CPU time on a CPU (steadier on a shared machine; use ``--threads
1``) and synchronised wall time on CUDA. ``--quick`` shrinks everything for a smoke test.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from robattr import data, get_device, zoo  # noqa: E402
from robattr.attributions import last_chunk_rows, relex  # noqa: E402
from robattr.metrics import spearman, topk_intersection  # noqa: E402

#: (label, precision, channels_last) of the ResNet-50 table; the first is the reference
CONFIGS = [("fp32", "fp32", False), ("tf32, channels-last", "tf32", True),
           ("bf16", "bf16", False), ("bf16, channels-last", "bf16", True)]


def clock(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
        return time.perf_counter()
    return time.process_time()


def timed(fn, dev):
    t0, w0 = clock(dev), time.perf_counter()
    fn()
    return clock(dev) - t0, time.perf_counter() - w0


def bench(name, model, X, t, args, dev):
    opts = dict(epochs=args.epochs, n_noisy=args.copies, seed=0)
    n, k = X.shape[0], min(args.loop_images, X.shape[0])
    cb, wb = timed(lambda: relex(model, X, t, batch_size=args.rows, **opts), dev)
    cl, wl = timed(lambda: [relex(model, X[i:i + 1], t[i:i + 1], batch_size=args.copies, **opts)
                            for i in range(k)], dev)
    per_b, per_l = cb / n, cl / k
    print(f"{name:<28} {n:>4} {per_b:>14.3f} {per_l:>16.3f} {per_l / per_b:>7.2f}   "
          f"(wall {wb / n:.3f} / {wl / k:.3f} s per image)")


def agreement(m, ref) -> tuple[float, float]:
    """(min Spearman, min top-10 % intersection) of masks ``m`` against ``ref``, over images."""
    k = max(1, ref[0].numel() // 10)
    rho = spearman(m.double().cpu(), ref.double().cpu())
    top = topk_intersection(m.double().cpu(), ref.double().cpu(), k)
    return float(rho.min()), float(top.min())


def precision_table(net, imgs, t, args, dev):
    """Seconds per image and agreement with fp32 of every configuration in CONFIGS."""
    opts = dict(epochs=args.epochs, n_noisy=args.resnet_copies)
    print(f"\nResNet-50 224x224 (random weights), {imgs.shape[0]} images, {args.epochs} epochs, "
          f"{args.resnet_copies} copies, one call, default batch_size")
    print(f"{'configuration':<22} {'s/img':>7} {'rows':>6} {'spearman':>9} {'top10%':>7} "
          f"{'IoU':>6}")
    ref = None
    for label, precision, channels_last in CONFIGS + [("fp32, other seed", "fp32", False)]:
        fmt = torch.channels_last if channels_last else torch.contiguous_format
        model = net.to(memory_format=fmt)
        x = imgs.contiguous(memory_format=fmt)
        seed = 1 if label == "fp32, other seed" else 0
        relex(model, x[:1], t[:1], epochs=1, n_noisy=args.resnet_copies, seed=seed,
              precision=precision)                                     # warm-up
        out = []
        sec, _ = timed(lambda: out.append(relex(model, x, t, seed=seed, precision=precision,
                                                **opts)), dev)
        m = out[0].contiguous()
        if ref is None:
            ref = m
        rho, top = agreement(m, ref)
        print(f"{label:<22} {sec / x.shape[0]:7.3f} {last_chunk_rows():>6} {rho:9.4f} "
              f"{top:7.3f} {top / (2 - top):6.3f}")
    net.to(memory_format=torch.contiguous_format)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-images", type=int, default=16)
    p.add_argument("--loop-images", type=int, default=4)
    p.add_argument("--epochs", type=int, default=50)
    p.add_argument("--copies", type=int, default=50)
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--device", default="auto")
    p.add_argument("--resnet", action="store_true", help="also time a 224x224 ResNet-50")
    p.add_argument("--resnet-images", type=int, default=2)
    p.add_argument("--resnet-copies", type=int, default=100)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.n_images, args.loop_images, args.epochs, args.copies = 4, 2, 3, 4
        args.resnet_copies = 4
    for name in ("n_images", "loop_images", "epochs", "copies", "rows", "resnet_images",
                 "resnet_copies"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)
    dev = get_device(args.device)
    print(f"device {dev}, {torch.get_num_threads()} threads; {args.epochs} epochs, "
          f"{args.copies} noisy copies; times: {'wall (synchronised)' if dev.type == 'cuda' else 'process CPU'}")
    print(f"{'model':<28} {'N':>4} {'batched s/img':>14} {'per-image s/img':>16} {'ratio':>7}")
    model = zoo.get_model("digits", "cnn", device=dev, progress=False)
    X, y = data.as_tensors(data.load("digits", split="test"), args.n_images, device=dev)
    bench("digits cnn (8x8)", model, X, y, args, dev)
    if args.resnet:
        from torchvision.models import resnet50

        net = resnet50(weights=None).to(dev).eval()
        imgs, _ = data.sample_images(224)
        imgs = imgs[:args.resnet_images].to(dev)
        with torch.no_grad():
            t = net(imgs).argmax(1)
        rows = min(args.rows, 128 if dev.type == "cuda" else 16)   # ResNet-50 backward memory
        a2 = argparse.Namespace(**{**vars(args), "rows": rows,
                                   "loop_images": min(args.loop_images, imgs.shape[0])})
        bench("resnet50 (224x224, random)", net, imgs, t, a2, dev)
        precision_table(net, imgs, t, args, dev)


if __name__ == "__main__":
    main()
