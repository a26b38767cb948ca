"""Training cost of every robust loss relative to CE and to AT, beside the papers' ratios.

    python benchmarks/training.py [--archs lenet cnn] [--losses ...] [--steps 3]
                                  [--n 50000] [--batch-size 128] [--device auto]
                                  [--threads N] [--pipeline-batches 20]

The default is a small run (3 timed steps per loss at batch 128). On a GPU, the papers'
architectures and the losses they time::

    python benchmarks/training.py --device cuda --archs lenet resnet20 resnet18_cifar \\
        --losses ce at ssr ig_norm l2_cosd hessian atex iga

For each architecture, every loss trains its own copy of the same initial model
(Softplus(β=3), as 003 trains all of them; Adam, lr 1e-3) on the same batches, with its
default hyper-parameters (robattr.train.LOSSES[name].defaults). ``ce`` and ``at`` are
always run: they are the two baselines. Per loss:

* step 0 (also the warm-up) counts the multiply-adds of one training step (convolutions
  and matrix products, forward and every backward, as ``torch.utils.flop_counter``
  counts them; element-wise work is not counted): the device-independent cost, which a
  compute-bound device approaches. It measures the peak memory of the step too. On CUDA:
  ``torch.cuda.max_memory_allocated`` after a reset, minus what was allocated before
  (activations, temporaries, gradients; the parameters and Adam state existed already);
  the "+state" column adds the parameters, gradients and Adam's two moments back
  (4 x parameter bytes). On the CPU (no allocator statistics): the peak bytes of the
  *activations* autograd holds for backward (robattr.memory.SavedTensorPeak, parameter
  storages excluded; temporaries never saved for backward are not seen), and "+state"
  adds the same 4 x parameter bytes -- the closer analogue of a GPU memory figure such as
  003's, which includes the fixed training state and so compresses the ratios;
* steps 1..--steps are timed, the losses interleaved round-robin (a burst of load from
  other processes hits every loss alike); the step time is the fastest of them, measured
  on the CPU as process CPU time (``time.process_time``: what this process computed,
  not how long others kept it waiting; use --threads 1 on a shared machine) and on CUDA
  as wall time between two ``torch.cuda.synchronize``. seconds/epoch = step time x
  batches per epoch (--n examples; the default 50,000 is a CIFAR-10 epoch).

Architectures: ``lenet`` (003's LeNet), ``resnet20`` (000's ResNet-20) and
``resnet18_cifar`` (003's ResNet-18) on 3x32x32 random images (uniform pixels, random
labels of 10 classes: the cost does not depend on the data, so only the batches timed are
drawn); ``cnn`` is the digits CNN on the digits training set (8x8 grey, 10 classes).

The papers' columns, read from the tables shipped in robattr/report/papers/tables (verbatim
copies of ../shared/papers/tables):

* "003 xCE": 003 Table 2 (CIFAR-10 on A100 / RTX A5000 GPUs; time and memory relative
  to CE only) for LeNet and ResNet-18 (the rows of ``lenet`` and ``resnet18_cifar``);
* "000 xAT": 000 Table 3's hours per epoch (CIFAR-10, ResNet-20, a GPU) relative to
  Madry's AT, for SSR and IG-NORM. 000 trained IG-NORM at batch size 16 (its Table 1) and
  does not give the others' batch size; Madry's AT there is l2 (delta = 0.25), ours
  defaults to linf 8/255, with the same 7 steps (the same cost).

``--variants`` prints only a smaller table: the training step of a few losses (default CE,
AT, Hessian, l2+cosd) run four ways -- PyTorch's ``nn.Softplus`` (eager), robattr's
``FusedSoftplus`` (fused; what ``robattr.train.fit`` trains with), ``torch.compile`` of the
model (inductor), and both. What it showed on 2 CPU threads (LeNet, batch 128, nothing else
running, 2026-11-29): fused cuts a Softplus step by 4-20 % (CE, AT, Hessian, l2+cosd,
IGA); compile fails on every loss that differentiates a gradient (double backward is not
supported by inductor), pays only together with fused on CE and AT, and makes a ReLU
LeNet's AT step slower (``--activation relu``). So ``fit`` trains with the fused Softplus
and does not compile; rerun it to check that on another machine.

A CPU run compares a different machine's balance of compute and memory traffic than
the papers' GPUs.

``--jobs N`` prints only the question ``robattr train --jobs N`` rests on: does training N
models at once, one thread each, finish sooner than training them one after the other on N
threads? For each of --variant-losses (and --archs), it times ``robattr.train.fit`` in wall
time (--pipeline-batches batches, the medium recipe) of N copies of the model: one after
the other with N threads, then N processes at once with one thread each, and prints the
ratio. Run it on a machine doing nothing else. What it showed on 2 CPU cores (LeNet, batch
64, 60 batches, 2026-11-29, the other processes stopped): one after the other on two
threads took x0.98 (CE), x1.07 (AT) and x1.17 (l2+cosd) the time of two at once on one
thread each, i.e. a LeNet step runs nearly twice as fast on two threads as on one, and ``robattr train
--jobs 2`` gains little there.

"img/s" is the examples per second of one loss's step (batch size / step time). After the
tables, "the trainer's own loop" times ``robattr.train.fit`` (CE, --pipeline-batches
batches of uint8 CIFAR-shaped images held in memory, the medium recipe: random crop and
flip, one-cycle schedule) against the same number of bare CE steps on ready float batches
of the same model: the difference is the share of a training step spent outside the model
(cutting, converting and augmenting the batch, the schedule, Python), both in process CPU
time on the CPU.
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

#: our loss name -> 003 Table 2's regularizer label
PAPER_JOO2023 = {"ce": "CE only", "hessian": "Hessian", "l2_cosd": "l2+Cosd",
             "atex": "ATEX (3rd step)",
             "iga": "IGA"}
PAPER_003_ONLY = ()  # in Table 2, not implemented here
#: our architecture -> 003 Table 2's CIFAR10 model
MODEL_JOO2023 = {"lenet": "LeNet", "resnet18_cifar": "ResNet18"}
#: our loss name -> 000 Table 3's training label
PAPER_WANG2020 = {"at": "Madry", "ssr": "SSR", "ig_norm": "IG-NORM"}
#: the architectures trained on random 3x32x32 images (CIFAR-10's shape)
CIFAR_ARCHS = ("lenet", "resnet20", "resnet18_cifar")
ARCHS = (*CIFAR_ARCHS, "cnn")
BASELINES = ("ce", "at")


def paper_ratios() -> dict:
    """The papers' cost ratios from the shipped tables.

    ``{"003": {(model, regularizer, resource): ratio to CE}, "000": {training: ratio of
    its hours per epoch to Madry's}}`` (floats; cells the paper left empty are omitted).
    """
    from robattr.report import papers

    t3 = papers.table("joo2023_table2")
    t3 = t3[(t3["dataset"] == "CIFAR10") & t3["value"].notna()]
    t0 = papers.table("wang2020_table3")
    hours = {r.training: r.value for r in t0[t0["metric"] == "time_per_epoch_h"].itertuples()}
    return {"003": {(r.model, r.regularizer, r.resource): r.value for r in t3.itertuples()},
            "000": {k: v / hours["Madry"] for k, v in hours.items()}}


def _batches(arch: str, n: int, batch_size: int, count: int, seed: int):
    import torch

    from robattr import data

    g = torch.Generator().manual_seed(seed)
    if arch in CIFAR_ARCHS:
        info = {"shape": (3, 32, 32), "num_classes": 10, "mean": (0.4914, 0.4822, 0.4465),
                "std": (0.2470, 0.2435, 0.2616)}
        batches = [(torch.rand(batch_size, 3, 32, 32, generator=g),
                    torch.randint(0, 10, (batch_size,), generator=g)) for _ in range(count)]
        return info, batches, math.ceil(n / batch_size), f"{arch}, random 3x32x32 images"
    info = "digits"
    x, y = data.as_tensors(data.load("digits", "train"))
    n = len(y)
    perm = torch.randperm(n, generator=g)
    per_epoch = math.ceil(n / batch_size)
    batches = [(x[perm[i * batch_size:(i + 1) * batch_size]],
                y[perm[i * batch_size:(i + 1) * batch_size]]) for i in range(min(count, per_epoch))]
    while len(batches) < count:
        batches.append(batches[len(batches) % per_epoch])
    return info, batches, per_epoch, f"digits CNN, {n} digits images (1x8x8)"


def _step(model, opt, loss, x, y):
    opt.zero_grad(set_to_none=True)
    value, _ = loss(model, x, y)
    value.backward()
    opt.step()


def _flop_counter():
    """A dispatch mode that sums ``torch.utils.flop_counter``'s FLOPs of every op it sees
    (``.total``). FlopCounterMode itself hooks the modules, which breaks the
    ``autograd.grad`` calls of the attacks."""
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils.flop_counter import flop_registry

    class FlopCount(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.total = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            out = func(*args, **kwargs)
            count = flop_registry.get(func._overloadpacket)
            if count is not None:
                self.total += count(*args, **kwargs, out_val=out)
            return out

    return FlopCount()


def bench(arch: str, names: list[str], args, dev) -> list[dict]:
    import torch

    from robattr.memory import SavedTensorPeak
    from robattr.models import build
    from robattr.train import make_loss

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
    for name, r in runs.items():  # step 0: FLOPs and memory (also the warm-up)
        x, y = (t.to(dev) for t in batches[0])
        params = list(r["model"].parameters())
        r["state"] = 4 * sum(p.numel() * p.element_size() for p in params)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            base = torch.cuda.memory_allocated(dev)
            with _flop_counter() as flops:
                _step(r["model"], r["opt"], r["loss"], x, y)
            torch.cuda.synchronize(dev)
            r["mem"] = torch.cuda.max_memory_allocated(dev) - base
        else:
            with SavedTensorPeak(exclude=params) as probe, _flop_counter() as flops:
                r["opt"].zero_grad(set_to_none=True)
                value, _ = r["loss"](r["model"], x, y)
                value.backward()
            r["opt"].step()
            r["mem"] = probe.peak_bytes
        r["flops"] = flops.total
        print(f"  {name:<8} FLOPs and memory measured", flush=True)
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
    return [dict(loss=name, sec_epoch=min(r["times"]) * per_epoch, flops=r["flops"],
                 mem=r["mem"], state=r["state"], img_s=args.batch_size / min(r["times"]))
            for name, r in runs.items()]


def pipeline(arch: str, args, dev) -> None:
    """The share of a CE training step outside the model: ``robattr.train.fit`` on uint8
    images held in memory (crop + flip, one-cycle) against bare steps on ready batches."""
    import torch

    from robattr.models import build
    from robattr.train import fit, make_loss

    if arch not in CIFAR_ARCHS:
        return
    n = args.pipeline_batches * args.batch_size
    g = torch.Generator().manual_seed(args.seed)
    images = torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    info = {"shape": (3, 32, 32), "num_classes": 10, "mean": (0.4914, 0.4822, 0.4465),
            "std": (0.2470, 0.2435, 0.2616)}
    clock = time.perf_counter if dev.type == "cuda" else time.process_time
    torch.manual_seed(args.seed)
    model = build(arch, info, "softplus", 3.0).to(dev)
    fit(model, (images[:args.batch_size], labels[:args.batch_size]), epochs=1,
        batch_size=args.batch_size, device=dev, progress=False, measure_memory=False)  # warm-up
    t0 = clock()
    fit(model, (images, labels), epochs=1, batch_size=args.batch_size, device=dev,
        progress=False, measure_memory=False, augment="crop+flip", schedule="onecycle")
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    loop = clock() - t0
    model.train()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss = make_loss("ce")
    ready = [(images[i:i + args.batch_size].float().div(255).to(dev),
              labels[i:i + args.batch_size].to(dev))
             for i in range(0, n, args.batch_size)]
    t0 = clock()
    for x, y in ready:
        _step(model, opt, loss, x, y)
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)
    bare = clock() - t0
    print(f"{arch}, the trainer's own loop (CE, {args.pipeline_batches} batches of "
          f"{args.batch_size}, crop+flip, one-cycle): {n / loop:.0f} img/s; bare CE steps on "
          f"ready batches: {n / bare:.0f} img/s; outside the model: "
          f"{100 * max(0.0, 1 - bare / loop):.0f} % of the loop")


def variants(arch: str, args, dev) -> None:
    """Training-step time of a few losses under four ways of running the same model:
    PyTorch's ``nn.Softplus`` (eager), robattr's :class:`~robattr.train.fused.FusedSoftplus`
    (fused), ``torch.compile`` (inductor) of the model, and both. Same initial weights and
    batches for every cell; the fastest of --steps timed steps after 2 untimed (compilation
    happens there; its cost is printed apart). A cell whose step fails says why."""
    import torch

    from robattr.models import build
    from robattr.train import make_loss
    from robattr.train.fused import fused_softplus

    info, batches, per_epoch, desc = _batches(arch, args.n, args.batch_size, args.steps + 2,
                                              args.seed)
    clock = time.perf_counter if dev.type == "cuda" else time.process_time
    ways = ("eager", "fused", "compile", "fused+compile")
    act = ("softplus", 3.0) if args.activation == "softplus" else ("relu", None)
    print(f"\n== variants: {desc}, {args.activation}; batch {args.batch_size}, {torch.get_num_threads()} "
          f"threads; seconds per epoch ({per_epoch} batches)")
    print(f"{'loss':<10}" + "".join(f"{w:>15}" for w in ways) + f"{'best/eager':>12}"
          + f"{'compile s':>11}")
    for name in args.variant_losses:
        cells, first = {}, None
        for way in ways:
            torch.manual_seed(args.seed)
            model = build(arch, info, *act).to(dev).train()
            opt = torch.optim.Adam(model.parameters(), lr=1e-3)
            loss = make_loss(name)
            with fused_softplus(model) if "fused" in way else _nothing():
                run = torch.compile(model) if "compile" in way else model
                try:
                    times = []
                    for i, (x, y) in enumerate(batches):
                        x, y = x.to(dev), y.to(dev)
                        t0 = clock()
                        _step(run, opt, loss, x, y)
                        if dev.type == "cuda":
                            torch.cuda.synchronize(dev)
                        times.append(clock() - t0)
                    cells[way] = min(times[2:]) * per_epoch
                    if "compile" in way:
                        first = max(first or 0.0, times[0] - min(times[2:]))
                except Exception as err:  # noqa: BLE001 -- a benchmark reports and goes on
                    cells[way] = f"fails: {type(err).__name__}"
            torch._dynamo.reset()
        timed = [v for v in cells.values() if isinstance(v, float)]
        row = "".join(f"{v:>15.1f}" if isinstance(v, float) else f"{v[:14]:>15}"
                      for v in cells.values())
        best = min(timed) / cells["eager"] if isinstance(cells["eager"], float) else None
        print(f"{name:<10}{row}{_x(best):>12}"
              + (f"{first:>11.1f}" if first is not None else f"{'--':>11}"), flush=True)


def _fit_wall(arch: str, loss: str, batches: int, batch_size: int, threads: int,
              seed: int) -> float:
    """Wall seconds of ``robattr.train.fit`` of one model (Softplus(3), ``loss``) on
    ``batches`` batches of random uint8 CIFAR-shaped images, crop + flip and one-cycle, on
    ``threads`` CPU threads (after a one-batch warm-up). A process of its own in --jobs."""
    import torch

    from robattr.models import build
    from robattr.train import fit

    torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(seed)
    n = batches * batch_size
    images = torch.randint(0, 256, (n, 3, 32, 32), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, 10, (n,), generator=g)
    info = {"shape": (3, 32, 32), "num_classes": 10, "mean": (0.4914, 0.4822, 0.4465),
            "std": (0.2470, 0.2435, 0.2616)}
    torch.manual_seed(seed)
    model = build(arch, info, "softplus", 3.0)
    kw = dict(batch_size=batch_size, progress=False, measure_memory=False, loss=loss)
    fit(model, (images[:batch_size], labels[:batch_size]), epochs=1, **kw)   # warm-up
    t0 = time.perf_counter()
    fit(model, (images, labels), epochs=1, augment="crop+flip", schedule="onecycle", **kw)
    return time.perf_counter() - t0


def jobs_table(args) -> None:
    """N models one after the other on N threads against N processes at once, one thread
    each: wall seconds and the ratio (> 1: training them at once is faster)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    n = args.jobs
    archs = [a for a in args.archs if a in CIFAR_ARCHS]
    print(f"\n== {n} models, {args.pipeline_batches} batches of {args.batch_size} each "
          "(fit, crop+flip, one-cycle), wall seconds")
    print(f"{'arch':<16}{'loss':<10}{f'serial, {n} threads':>20}{f'{n} at once, 1 thread':>22}"
          f"{'serial / at once':>18}")
    ctx = multiprocessing.get_context("spawn")
    for arch in archs:
        for loss in args.variant_losses:
            job = (arch, loss, args.pipeline_batches, args.batch_size)
            with ProcessPoolExecutor(1, mp_context=ctx) as pool:     # a fresh process, N threads
                serial = sum(pool.submit(_fit_wall, *job, n, args.seed + i).result()
                             for i in range(n))
            with ProcessPoolExecutor(n, mp_context=ctx) as pool:
                t0 = time.perf_counter()
                futures = [pool.submit(_fit_wall, *job, 1, args.seed + i) for i in range(n)]
                [f.result() for f in futures]
                # the slowest process bounds the wall time; the warm-up runs inside each
                at_once = max(f.result() for f in futures)
            print(f"{arch:<16}{loss:<10}{serial:>20.1f}{at_once:>22.1f}"
                  f"{_x(serial / at_once):>18}", flush=True)


@contextmanager
def _nothing():
    yield


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"x{value:.2f}"


def print_table(arch: str, rows: list[dict], paper: dict, dev) -> None:
    by = {r["loss"]: r for r in rows}
    ce, at = by["ce"], by["at"]
    model_joo2023 = MODEL_JOO2023.get(arch)
    mem_unit = "step MB" if dev.type == "cuda" else "activ. MB"

    def p003(label, resource):
        return paper["003"].get((model_joo2023, label, resource)) if label and model_joo2023 else None

    group = (f"{'':<10} {' time ':-^49} | {' FLOPs ':-^24} | {' memory ':-^36}")
    head = (f"{'loss':<10} {'img/s':>7} {'s/epoch':>9} {'xCE':>7} {'003 xCE':>7} {'xAT':>7} "
            f"{'000 xAT':>7} | "
            f"{'GFLOP':>8} {'xCE':>7} {'xAT':>7} | {mem_unit:>9} {'xCE':>7} {'+state':>8} "
            f"{'003 xCE':>8}")
    print(f"\n{arch} (state = parameters, gradients and Adam moments: "
          f"{ce['state'] / 2**20:.1f} MB)")
    print(group)
    print(head)
    print("-" * len(head))
    for r in rows:
        label = PAPER_JOO2023.get(r["loss"])
        print(f"{r['loss']:<10} {r['img_s']:>7.0f} {r['sec_epoch']:>9.2f} "
              f"{_x(r['sec_epoch'] / ce['sec_epoch']):>7} "
              f"{_x(p003(label, 'time')):>7} {_x(r['sec_epoch'] / at['sec_epoch']):>7} "
              f"{_x(paper['000'].get(PAPER_WANG2020.get(r['loss']))):>7} | "
              f"{r['flops'] / 1e9:>8.1f} {_x(r['flops'] / ce['flops']):>7} "
              f"{_x(r['flops'] / at['flops']):>7} | "
              f"{r['mem'] / 2**20:>9.1f} {_x(r['mem'] / ce['mem']):>7} "
              f"{_x((r['mem'] + r['state']) / (ce['mem'] + ce['state'])):>8} "
              f"{_x(p003(label, 'memory')):>8}")
    for label in PAPER_003_ONLY:
        pt, pm = p003(label, "time"), p003(label, "memory")
        if pt is not None or pm is not None:
            print(f"{label[:10]:<10} {'--':>7} {'--':>9} {'--':>7} {_x(pt):>7} {'--':>7} "
                  f"{'--':>7} | "
                  f"{'--':>8} {'--':>7} {'--':>7} | {'--':>9} {'--':>7} {'--':>8} {_x(pm):>8}"
                  "   (not in robattr)")
    print(f"003 xCE: 003 Table 2, CIFAR10 {model_joo2023 or '-- (no such model)'}, relative to CE. "
          "000 xAT: 000 Table 3, CIFAR10 ResNet-20, hours/epoch relative to Madry's AT.")


def main(argv=None) -> None:
    import torch

    from robattr import precision
    from robattr.train import LOSSES
    from robattr.utils import get_device

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--archs", nargs="+", default=["lenet", "cnn"], choices=ARCHS)
    ap.add_argument("--losses", nargs="+", default=None,
                    help="default: every registered loss (ce and at are always added)")
    ap.add_argument("--steps", type=int, default=3, help="timed steps per loss (after 1 untimed)")
    ap.add_argument("--n", type=int, default=50_000,
                    help="examples per epoch of the random-image archs (CIFAR-10's 50,000)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    ap.add_argument("--variants", action="store_true",
                    help="only the eager / fused Softplus / torch.compile table")
    ap.add_argument("--variant-losses", nargs="+", default=["ce", "at", "hessian", "l2_cosd"],
                    help="losses of the --variants table")
    ap.add_argument("--activation", choices=("softplus", "relu"), default="softplus",
                    help="activation of the --variants models (the main tables: Softplus(3))")
    ap.add_argument("--pipeline-batches", type=int, default=20,
                    help="batches of the trainer-loop measurement (0: skip it)")
    ap.add_argument("--jobs", type=int, default=0, metavar="N",
                    help="only the table of N models trained at once (one thread each) "
                         "against one after the other (N threads): robattr train --jobs N")
    args = ap.parse_args(argv)
    if args.pipeline_batches < 0:
        ap.error(f"--pipeline-batches must be >= 0, got {args.pipeline_batches}")
    if args.jobs < 0 or args.jobs == 1 or (args.jobs and not args.pipeline_batches):
        ap.error(f"--jobs must be >= 2 (and --pipeline-batches >= 1), got {args.jobs}")
    for key in ("steps", "n", "batch_size"):
        if getattr(args, key) < 1:
            ap.error(f"--{key.replace('_', '-')} must be >= 1, got {getattr(args, key)}")
    if args.threads:
        torch.set_num_threads(args.threads)
    names = args.losses or list(LOSSES)
    unknown = sorted(set(names) - set(LOSSES))
    if unknown:
        ap.error(f"unknown loss(es) {unknown}; known: {', '.join(LOSSES)}")
    names = [*BASELINES, *(n for n in dict.fromkeys(names) if n not in BASELINES)]
    dev = get_device(args.device)
    paper = paper_ratios()
    print(f"robattr training benchmark: torch {torch.__version__}, device {dev}"
          + (f" ({torch.cuda.get_device_name(dev)}, precision {precision.get()})"
             if dev.type == "cuda" else ""))
    t0 = time.perf_counter()
    if args.jobs:
        jobs_table(args)
        print(f"\n(total {time.perf_counter() - t0:.0f} s)")
        return
    for arch in args.archs:
        if args.variants:
            variants(arch, args, dev)
            continue
        rows = bench(arch, names, args, dev)
        print_table(arch, rows, paper, dev)
        if args.pipeline_batches:
            pipeline(arch, args, dev)
    print(f"\n(total {time.perf_counter() - t0:.0f} s)")


if __name__ == "__main__":
    main()
