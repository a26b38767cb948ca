"""Training cost of every robust loss relative to CE, beside 003 Table 2's ratios.

    python benchmarks/training.py [--archs lenet cnn] [--losses ...] [--steps 2]
                                  [--n 2048] [--batch-size 128] [--device auto]

For each architecture, every loss trains its own copy of the same initial model
(Softplus(β=3), as 003 trains all of them; Adam, lr 1e-3) on the same batches, with its
default hyper-parameters (robattr.train.LOSSES[name].defaults). Per loss:

* step 0 measures the peak memory of one training step. On CUDA:
  ``torch.cuda.max_memory_allocated`` after a reset, minus what was allocated before
  (activations, temporaries, gradients; the parameters and Adam state existed already);
  the "+state" column adds the parameters, gradients and Adam's two moments back
  (4 x parameter bytes). On the CPU (no allocator statistics): the peak bytes of the
  *activations* autograd holds for backward (robattr.train.SavedTensorPeak, parameter
  storages excluded; temporaries never saved for backward are not seen), and "+state"
  adds the same 4 x parameter bytes -- the closer analogue of a GPU memory figure such as
  003's, which includes the fixed training state and so compresses the ratios;
* steps 1..--steps are timed, the losses interleaved round-robin (a burst of load from
  other processes hits every loss alike); the step time is the fastest of them, measured
  on the CPU as process CPU time (``time.process_time``: what this process computed,
  not how long others kept it waiting; use --threads 1 on a shared machine) and on CUDA
  as synchronised wall time. seconds/epoch = step time x batches per epoch.

Architectures: ``lenet`` is 003's LeNet on 3x32x32 inputs, trained on --n random images
(uniform pixels, random labels of 10 classes: cost does not depend on the data);
``cnn`` is the digits CNN on the digits training set (8x8 grey, 10 classes).

The paper's column is 003 Table 2 (CIFAR-10, LeNet, GPU: time and memory relative to CE
only), read from ../shared/papers/tables/joo2023_table2.csv (or $ROBATTR_PAPER_TABLES)
when present, else "n/a". The paper measured on A100 / RTX A5000 GPUs; a CPU run
compares a different machine's balance of compute and memory traffic.
"""
from __future__ import annotations

import argparse
import csv
import math
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: our loss name -> 003 Table 2's regularizer label
PAPER_NAMES = {"ce": "CE only", "hessian": "Hessian", "l2_cosd": "l2+Cosd"}
PAPER_ONLY = ("ATEX (3rd step)", "IGA")  # in Table 2, not implemented here


def paper_ratios() -> dict[tuple[str, str], str]:
    """{(regularizer, resource): value} for CIFAR10 / LeNet, or {} if the table is absent."""
    root = os.environ.get("ROBATTR_PAPER_TABLES")
    candidates = [Path(root)] if root else []
    here = Path(__file__).resolve()
    candidates += [p / "shared" / "papers" / "tables" for p in here.parents]
    for folder in candidates:
        path = folder / "joo2023_table2.csv"
        if path.is_file():
            with open(path, newline="", encoding="utf-8") as f:
                return {(r["regularizer"], r["resource"]): r["value"] or "n/a"
                        for r in csv.DictReader(f)
                        if r["dataset"] == "CIFAR10" and r["model"] == "LeNet"}
    return {}


def _batches(arch: str, n: int, batch_size: int, count: int, seed: int):
    import torch

    from robattr import data

    g = torch.Generator().manual_seed(seed)
    if arch == "lenet":
        info = {"shape": (3, 32, 32), "num_classes": 10, "mean": (0.4914, 0.4822, 0.4465),
                "std": (0.2470, 0.2435, 0.2616)}
        x = torch.rand(n, 3, 32, 32, generator=g)
        y = torch.randint(0, 10, (n,), generator=g)
        desc = f"LeNet, {n} random 3x32x32 images"
    else:
        info = "digits"
        x, y = data.as_tensors(data.load("digits", "train"))
        n = len(y)
        desc = f"digits CNN, {n} digits images (1x8x8)"
    perm = torch.randperm(n, generator=g)
    per_epoch = math.ceil(n / batch_size)
    batches = [(x[perm[i * batch_size:(i + 1) * batch_size]],
                y[perm[i * batch_size:(i + 1) * batch_size]]) for i in range(min(count, per_epoch))]
    while len(batches) < count:
        batches.append(batches[len(batches) % per_epoch])
    return info, batches, per_epoch, desc


def _step(model, opt, loss, x, y):
    opt.zero_grad(set_to_none=True)
    value, _ = loss(model, x, y)
    value.backward()
    opt.step()


def bench(arch: str, names: list[str], args, dev) -> list[dict]:
    import torch

    from robattr.models import build
    from robattr.train import SavedTensorPeak, make_loss

    info, batches, per_epoch, desc = _batches(arch, args.n, args.batch_size, args.steps + 1,
                                              args.seed)
    print(f"\n== {desc}; batch {args.batch_size}, {per_epoch} batches/epoch, Softplus(3), "
          f"device {dev}, {torch.get_num_threads()} threads", flush=True)
    runs = {}
    for name in names:
        torch.manual_seed(args.seed)
        model = build(arch, info, "softplus", 3.0).to(dev).train()
        runs[name] = dict(model=model, opt=torch.optim.Adam(model.parameters(), lr=1e-3),
                          loss=make_loss(name), times=[])
    for name, r in runs.items():  # step 0: memory (also the warm-up)
        x, y = (t.to(dev) for t in batches[0])
        params = list(r["model"].parameters())
        r["state"] = 4 * sum(p.numel() * p.element_size() for p in params)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            base = torch.cuda.memory_allocated(dev)
            _step(r["model"], r["opt"], r["loss"], x, y)
            torch.cuda.synchronize(dev)
            r["mem"] = torch.cuda.max_memory_allocated(dev) - base
        else:
            with SavedTensorPeak(exclude=params) as probe:
                r["opt"].zero_grad(set_to_none=True)
                value, _ = r["loss"](r["model"], x, y)
                value.backward()
            r["opt"].step()
            r["mem"] = probe.peak_bytes
        print(f"  {name:<8} memory measured", flush=True)
    clock = time.perf_counter if dev.type == "cuda" else time.process_time
    for i in range(1, args.steps + 1):
        x, y = (t.to(dev) for t in batches[i])
        for name, r in runs.items():
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            t0 = clock()
            _step(r["model"], r["opt"], r["loss"], x, y)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
            r["times"].append(clock() - t0)
        print(f"  timed step {i}/{args.steps}", flush=True)
    rows = []
    for name, r in runs.items():
        rows.append(dict(loss=name, sec_epoch=min(r["times"]) * per_epoch,
                         mem=r["mem"], state=r["state"]))
    return rows


def _fmt_ratio(v: float) -> str:
    return f"x{v:.2f}"


def print_table(arch: str, rows: list[dict], paper: dict, dev) -> None:
    ce = next((r for r in rows if r["loss"] == "ce"), None)
    mem_unit = "step MB" if dev.type == "cuda" else "activ. MB"

    def ratio(a, b):
        return _fmt_ratio(a / b) if b else "n/a"

    def paper_cell(label, resource):
        v = paper.get((label, resource), "n/a") if label else "n/a"
        return v if v == "n/a" else f"x{float(v):.2f}"

    head = (f"{'loss':<10} {'s/epoch':>9} {'time':>8} {'003 time':>9} | {mem_unit:>10} "
            f"{'memory':>8} {'+state':>8} {'003 mem':>8}")
    print(f"\n{arch}: ratios relative to ce ('003' = Table 2, CIFAR10 LeNet, GPU; "
          f"state = {ce['state'] / 2**20 if ce else 0:.1f} MB)")
    print(head)
    print("-" * len(head))
    for r in rows:
        pname = PAPER_NAMES.get(r["loss"])
        t_ratio = ratio(r["sec_epoch"], ce["sec_epoch"]) if ce else "n/a"
        m_ratio = ratio(r["mem"], ce["mem"]) if ce else "n/a"
        s_ratio = ratio(r["mem"] + r["state"], ce["mem"] + ce["state"]) if ce else "n/a"
        print(f"{r['loss']:<10} {r['sec_epoch']:>9.2f} {t_ratio:>8} {paper_cell(pname, 'time'):>9} | "
              f"{r['mem'] / 2**20:>10.1f} {m_ratio:>8} {s_ratio:>8} {paper_cell(pname, 'memory'):>8}")
    for label in PAPER_ONLY:
        pt, pm = paper_cell(label, "time"), paper_cell(label, "memory")
        if pt != "n/a" or pm != "n/a":
            print(f"{label[:10]:<10} {'--':>9} {'--':>8} {pt:>9} | {'--':>10} {'--':>8} {'--':>8} "
                  f"{pm:>8}   (not implemented in robattr)")


def main(argv=None) -> None:
    import torch

    from robattr.train import LOSSES
    from robattr.utils import get_device

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", nargs="+", default=["lenet", "cnn"], choices=["lenet", "cnn"])
    ap.add_argument("--losses", nargs="+", default=None, help="default: every registered loss")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per loss (after 1 untimed)")
    ap.add_argument("--n", type=int, default=2048, help="random images for lenet")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    names = args.losses or list(LOSSES)
    unknown = sorted(set(names) - set(LOSSES))
    if unknown:
        ap.error(f"unknown loss(es) {unknown}; known: {', '.join(LOSSES)}")
    if "ce" not in names:
        names = ["ce", *names]
    dev = get_device(args.device)
    paper = paper_ratios()
    print(f"robattr training benchmark: torch {torch.__version__}, device {dev}"
          + (f" ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else "")
          + f"; 003 Table 2 {'found' if paper else 'not found (n/a)'}")
    t0 = time.perf_counter()
    for arch in args.archs:
        rows = bench(arch, names, args, dev)
        print_table(arch, rows, paper, dev)
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
