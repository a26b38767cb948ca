"""RelEx throughput: many images and their noisy copies in one batch vs one image at a time.

    python benchmarks/relex.py [--n-images 16] [--loop-images 4] [--epochs 50] [--copies 50]
        [--rows 4096] [--threads 1] [--device auto] [--resnet] [--quick]

For the zoo's digits CNN (and, with ``--resnet``, a 224x224 torchvision ResNet-50 with
random weights on ``robattr.data.sample_images``; weights do not change the cost) it times
``robattr.attributions.relex``:

  batched    one call on ``--n-images`` images, ``--rows`` rows (images x copies) per pass
  per-image  one call per image (004's procedure: one image, its copies in one batch),
             ``--loop-images`` of them

and prints seconds per image and the ratio per-image / batched (> 1: batching pays).
Times are the process CPU time on a CPU (steadier on a shared machine; use ``--threads
1``) and synchronised wall time on CUDA. 004 reports about 17 s per ImageNet image on an
RTX 2080 Ti (50 epochs, 100 copies); the goal here is 2 s or less on a modern GPU.
``--quick`` shrinks everything for a smoke test.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

from robattr import data, get_device, zoo  # noqa: E402
from robattr.attributions import relex  # noqa: E402


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
    p.add_argument("--quick", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.n_images, args.loop_images, args.epochs, args.copies = 4, 2, 3, 4
    for name in ("n_images", "loop_images", "epochs", "copies", "rows", "resnet_images"):
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


if __name__ == "__main__":
    main()
