"""What the work of a notebook costs on this machine: the calibration of ``robattr plan``.

Each :class:`robattr.cost.Work` item is priced by a linear model per call,
``t0 + rows * t1``, whose two constants :func:`calibrate` measures per model shape and
kind of pass (forward, gradient, gradient of a gradient, Hessian-vector product, attack
step, cross-entropy training step) on random inputs, taking the fastest of several runs
and, on a CPU, the faster of one thread and torch's thread count: the estimate is for an
unloaded machine. (On a
loaded CPU, torch's threads wait for busy cores and small passes run tens to hundreds of
times slower than with one thread: a calibration at the full thread count would measure
the load, and a notebook run that way is slowed as much, which no estimate foresees;
``OMP_NUM_THREADS=1`` avoids it on a shared machine.) A training step of any loss is priced
from its family's passes (:func:`robattr.cost.step_passes`), so a model family costs a
handful of small measurements however many losses and hyper-parameters train on it; those
passes are timed as training runs them, with the fused Softplus of
:mod:`robattr.train.fused` (``kind|family|fused``), and the notebook's own passes with
PyTorch's ``nn.Softplus``, as attributions, attacks and bounds run them. Numpy
draws, dense eigenproblems and products, and the fixed cost of a notebook and of a figure
are measured too. Calibrations are cached in ``<cache>/plan/`` by device name, torch
version, on a CPU thread count, and :data:`CALIBRATION_VERSION`.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from robattr import context
from robattr.cost import Work, family, step_passes

__all__ = ["Calibration", "CALIBRATION_VERSION", "calibrate"]


def _device_slug(device) -> tuple[str, str]:
    """(a file-name-safe key, a description) of a torch device on this machine."""
    import torch

    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"{platform.processor() or platform.machine()} {torch.get_num_threads()} threads"
    desc = f"{device.type} ({name}), torch {torch.__version__}"
    slug = "".join(c if c.isalnum() or c in "-." else "_" for c in
                   f"{device.type}-{name}-torch{torch.__version__}")
    return slug, desc


@dataclass
class Calibration:
    """Measured costs on one device: ``passes[kind|family] = (t0, t1)`` (seconds per call
    and per row; a training step is priced from them, :func:`_step_keys`), ``numpy``
    (seconds per draw), ``eigh`` (seconds per size**3), ``matmul`` (seconds per float64
    multiply-add of a dense product), ``notebook`` (kernel start and imports) and
    ``figure`` (one figure drawn and shown), seconds."""

    device: str
    description: str
    passes: dict = field(default_factory=dict)
    numpy: float | None = None
    eigh: float | None = None
    matmul: float | None = None
    notebook: float | None = None
    figure: float | None = None

    def cost(self, w: Work) -> float:
        if w.kind == "step":
            fam = _step_family(w.family)
            return w.calls * sum(self._pass(_fused_key(kind, fam), c, r)
                                 for kind, c, r in step_passes(w.family))
        if w.kind == "numpy":
            return w.rows * self.numpy
        if w.kind == "eigh":
            return w.calls * w.rows ** 3 * self.eigh
        if w.kind == "matmul":
            return w.rows * self.matmul
        return self._pass(f"{w.kind}|{w.family}", w.calls, w.rows)

    def _pass(self, key: str, calls: float, rows: float) -> float:
        """``calls * t0 + rows * t1`` of the pass ``key``; a training pass (``...|fused``)
        not measured falls back on the same pass with PyTorch's Softplus. A backward pass
        alone (``bwd|...``) is a gradient less its forward, and at least a forward."""
        if key.startswith("bwd|"):
            rest = key[len("bwd|"):]
            fwd = self._pass(f"fwd|{rest}", calls, rows)
            return max(self._pass(f"grad|{rest}", calls, rows) - fwd, fwd)
        if key not in self.passes and key.endswith(FUSED):
            key = key[: -len(FUSED)]
        t0, t1 = self.passes[key]
        return calls * t0 + rows * t1


#: The way :func:`calibrate` measures; a calibration cached by another version is measured
#: again (2: the faster of one thread and all threads, more repetitions; 3: training steps
#: priced from their family's passes, a CE training step among them; 4: a family's thread
#: count chosen once per batch size, a costly pass timed at one row only, 0.3 s a timing;
#: 5: a training step's passes timed with the fused Softplus that training runs).
CALIBRATION_VERSION = 5
#: the suffix of a pass key timed as training runs it (:func:`robattr.train.fused.fused_softplus`)
FUSED = "|fused"


def _fused_key(kind: str, fam: str) -> str:
    return f"{kind}|{fam}{FUSED}"


def _step_family(sig: str) -> str:
    s = json.loads(sig)
    return family(s["dataset"], s["arch"])


def _step_keys(sig: str) -> set[str]:
    """The ``kind|family`` passes a training step of signature ``sig`` is priced from."""
    fam = _step_family(sig)
    kinds = {kind for kind, _, _ in step_passes(sig)}
    if "bwd" in kinds:                       # priced from a gradient and a forward
        kinds = (kinds - {"bwd"}) | {"grad", "fwd"}
    return {_fused_key(kind, fam) for kind in kinds}


def _calibration_path(slug: str) -> Path:
    from robattr.utils import cache_dir

    return Path(cache_dir()) / "plan" / f"calibration-{slug}-v{CALIBRATION_VERSION}.json"


def _load_calibration(device) -> Calibration:
    slug, desc = _device_slug(device)
    path = _calibration_path(slug)
    try:
        data = json.loads(path.read_text())
        return Calibration(**{**data, "device": str(device), "description": desc})
    except (FileNotFoundError, ValueError, TypeError):
        return Calibration(str(device), desc)


def _save_calibration(cal: Calibration, device) -> None:
    slug, _ = _device_slug(device)
    path = _calibration_path(slug)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(cal), indent=1, sort_keys=True))
    os.replace(tmp, path)


def _timed(fn, sync, budget: float = 0.3, least: int = 3, most: int = 25,
           beat: float | None = None, clock=None) -> float:
    """The fastest of the timed runs of ``fn()`` after one warm-up (at least ``least``
    runs, or one when the warm-up alone took over ``budget``; more while the total stays
    under ``budget`` seconds, at most ``most``): on a shared machine the other processes
    only ever add time, so the minimum is the cost of the work. ``beat``: a time already
    measured another way (another thread count); when the first timed run is more than
    twice as slow, measuring on cannot beat it and stops. ``clock``: wall time (default),
    or the process's CPU time for one thread on a CPU (what the pass computed, not how long
    other processes kept it waiting)."""
    clock = clock or time.perf_counter
    t = clock()
    fn()
    sync()
    if clock() - t > budget:        # a long pass: one timed run, its noise is small beside it
        least = 1
    times = []
    while len(times) < least or (sum(times) < budget and len(times) < most):
        t = clock()
        fn()
        sync()
        times.append(clock() - t)
        if beat is not None and times[0] > 2 * beat:
            break
    return min(times)


@contextlib.contextmanager
def _threads(n: int):
    """torch's intra-op thread count set to ``n`` inside the block."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


#: The thread count that won a family's first measurement at each batch size, keyed by
#: (family, batch > 1), reused for its other passes within one :func:`calibrate` call (set there).
_winners: dict | None = None


def _fastest(fn, device, key=None, **kw) -> float:
    """:func:`_timed` of ``fn`` on ``device``; on a CPU the faster of one thread and of
    torch's thread count (the one a notebook uses). On an idle machine more threads are
    never much slower than one; on a loaded one, threads that wait for busy cores make a
    small pass tens to hundreds of times slower (measured: a gradient of the digits CNN,
    0.2 ms with one thread, 140 ms with two threads on two busy cores), so a calibration
    at the full thread count alone measures the load, not the work. One thread is timed
    in process CPU time, which other processes on the machine do not inflate. ``key``
    (a family and batch size): inside :func:`calibrate` only the first pass measured under
    a key times both thread counts; the family's other passes at that batch size reuse the
    winner (half the measurements of a cold ``robattr plan``)."""
    sync = _sync(device)
    if device.type != "cpu":
        return _timed(fn, sync, **kw)
    import torch

    counts = tuple(dict.fromkeys((1, torch.get_num_threads())))
    if key is not None and _winners is not None and key in _winners:
        counts = (_winners[key],)
    best = best_n = None
    for n in counts:
        clock = time.process_time if n == 1 else None
        with _threads(n):
            t = _timed(fn, sync, beat=best, clock=clock, **kw)
        if best is None or t < best:
            best, best_n = t, n
    if key is not None and _winners is not None:
        _winners.setdefault(key, best_n)
    return best


def _sync(device):
    import torch

    if device.type == "cuda":
        return lambda: torch.cuda.synchronize(device)
    return lambda: None


def _family_model(fam: str, device):
    import types

    import torch

    from robattr.models import build

    parts = fam.split(":")
    arch, shape, classes = parts[0], tuple(int(s) for s in parts[1].split("x")), int(parts[2])
    info = types.SimpleNamespace(shape=shape, num_classes=classes, mean=(0.5,) * shape[0],
                                 std=(0.25,) * shape[0])
    model = build(arch, info, "softplus", 3.0).to(device).eval()
    dtype = torch.float64 if parts[3:] == ["float64"] else torch.float32
    return model.to(dtype), shape, dtype


_PASSES = ("fwd", "grad", "grad2", "hvp", "astep", "train")
#: The larger batch of a pass measurement takes about this long at the one-row time.
BIG_BATCH_SECONDS = 0.05


def _measure_pass(kind: str, fam: str, device, fused: bool = False) -> tuple[float, float]:
    """(t0, t1) of one pass of ``kind`` on the family's model: timed at 1 row and at a
    larger batch, ``t(b) = t0 + b * t1``; ``fused``: with the model's Softplus layers fused,
    as a training step runs them (:func:`robattr.train.fused.fused_softplus`). The larger batch is as many rows as fit in about
    :data:`BIG_BATCH_SECONDS` at the one-row time (2 to 64), so a cheap pass is timed on
    many rows; a pass whose one row takes half that or more (a ResNet's attack step) is
    priced per row from its one-row time alone."""
    import torch

    from robattr.train.fused import fused_softplus

    model, shape, dtype = _family_model(fam, device)
    model_classes = int(fam.split(":")[2])
    with fused_softplus(model) if fused else contextlib.nullcontext():
        return _measure_pass_of(kind, model, shape, dtype, model_classes, fam, device)


def _measure_pass_of(kind, model, shape, dtype, model_classes, fam, device):
    import torch

    def run(b):
        x = torch.rand((b, *shape), device=device, dtype=dtype)
        if kind == "fwd":
            def f():
                with torch.no_grad():
                    model(x)
        elif kind == "train":        # one cross-entropy step: forward, backward, Adam
            model.train()
            y = torch.randint(0, model_classes, (b,), device=device)
            opt = torch.optim.Adam(model.parameters(), lr=1e-6)

            def f():
                opt.zero_grad(set_to_none=True)
                torch.nn.functional.cross_entropy(model(x), y).backward()
                opt.step()
        elif kind == "astep":        # robattr's top-k attack, 2 steps (its setup shared)
            from robattr.attacks import topk_attack

            y = torch.zeros(b, dtype=torch.long, device=device)

            def f():
                topk_attack(model, x, y, k=min(4, shape[-1] * shape[-2]), eps=0.03, steps=2,
                            criterion="mass")
            return _fastest(f, device, key=(fam, b > 1)) / 2
        elif kind == "hvp":
            xg = x.clone().requires_grad_(True)
            (g,) = torch.autograd.grad(model(xg)[:, 0].sum(), xg, create_graph=True)
            v = torch.randn_like(x)

            def f():
                torch.autograd.grad(g, xg, v, retain_graph=True)
        else:
            def f():
                xg = x.clone().requires_grad_(True)
                out = model(xg)[:, 0].sum()
                (g,) = torch.autograd.grad(out, xg, create_graph=kind == "grad2")
                if kind == "grad2":
                    torch.autograd.grad(g.pow(2).sum(), xg)
        return _fastest(f, device, key=(fam, b > 1))

    t_small = run(1)
    if t_small >= BIG_BATCH_SECONDS / 2:
        # a pass this costly is all per-row work (the larger batch would be 2 rows, and
        # t(2) - t(1) mostly noise): price it at t_small a row, and save its slowest timing
        return 1e-6, t_small
    big = int(min(64, max(2, BIG_BATCH_SECONDS / max(t_small, 1e-9))))
    t_big = run(big)
    t1 = max(0.0, (t_big - t_small) / (big - 1))
    return max(t_small - t1, 1e-6), t1


def _measure_numpy() -> float:
    import numpy as np

    rng = np.random.default_rng(0)

    def f():
        z = rng.standard_normal((100_000, 8))
        (z / np.linalg.norm(z, axis=1, keepdims=True)).sum(0)
    return _timed(f, lambda: None) / 800_000


def _measure_eigh() -> float:
    import torch

    a = torch.rand(384, 384, dtype=torch.float64)
    a = a + a.T
    return _fastest(lambda: torch.linalg.eigvalsh(a), torch.device("cpu")) / 384 ** 3


def _measure_matmul() -> float:
    import torch

    a = torch.rand(8, 256, 256, dtype=torch.float64)
    return _fastest(lambda: a @ a, torch.device("cpu")) / (8 * 256 ** 3)


_PROBE = '''import time, json, os
t = time.perf_counter()
import matplotlib.pyplot as plt
import numpy as np
import robattr
from robattr.report import viz
viz.set_theme()
for i in range(3):
    fig, ax = plt.subplots(figsize=(6, 3))
    ax.plot(np.arange(100), np.random.default_rng(i).standard_normal(100))
    plt.show()
from robattr.context import current
open(current().plan_probe, "w").write(json.dumps((time.perf_counter() - t) / 3))'''


def _measure_notebook(device) -> tuple[float, float]:
    """(seconds of a notebook with no work: kernel start, imports, papermill; seconds of
    one figure), measured by executing a small notebook as the build does."""
    import tempfile

    import nbformat
    import papermill

    from robattr.book.execution import KERNEL_ARGS, environ

    with tempfile.TemporaryDirectory() as tmp:
        src, out, probe = Path(tmp, "probe.ipynb"), Path(tmp, "out.ipynb"), Path(tmp, "fig.json")
        nb = nbformat.v4.new_notebook()
        nb.cells = [nbformat.v4.new_code_cell("import torch\nimport pandas\nimport scipy"),
                    nbformat.v4.new_code_cell(_PROBE)]
        nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                     "language": "python"}
        nbformat.write(nb, src)
        # one run: a kernel start takes seconds, and its noise is small beside them
        with environ({context.PLAN_PROBE_ENV: str(probe)}):
            t = time.perf_counter()
            papermill.execute_notebook(str(src), str(out), progress_bar=False, cwd=tmp,
                                       kernel_name="python3", extra_arguments=KERNEL_ARGS)
            total = time.perf_counter() - t
        figure = json.loads(probe.read_text())
    return max(total - 3 * figure, 0.0), figure


def calibrate(works: list[Work], device="auto", *, notebook: bool = True,
              log: Callable[[str], None] | None = None) -> Calibration:
    """The :class:`Calibration` of ``device`` with every cost ``works`` need, measuring
    (and caching under ``<cache>/plan/``) those not measured yet on this device and
    torch version. ``notebook``: also the fixed cost of a notebook and of a figure."""
    from robattr.utils import get_device

    device = get_device(device)
    cal = _load_calibration(device)
    needed = {f"{w.kind}|{w.family}" for w in works if w.kind in _PASSES}
    for sig in {w.family for w in works if w.kind == "step"}:
        needed |= _step_keys(sig)
    todo_p = sorted(needed - set(cal.passes))
    need_np = cal.numpy is None and any(w.kind == "numpy" for w in works)
    need_eig = cal.eigh is None and any(w.kind == "eigh" for w in works)
    need_mm = cal.matmul is None and any(w.kind == "matmul" for w in works)
    need_nb = notebook and (cal.notebook is None or cal.figure is None)
    n = len(todo_p) + need_np + need_eig + need_mm + need_nb
    if not n:
        return cal
    busy = _busy(device)
    if log:
        log(f"robattr plan: calibrating {n} cost(s) on {cal.description} "
            + (f"while the machine is busy ({busy}): these figures measure the load too and are "
               "not cached; plan again on a quiet machine" if busy else "(cached afterwards)"))
    global _winners
    _winners = {}
    try:
        for key in todo_p:
            kind, fam = key.removesuffix(FUSED).split("|", 1)
            cal.passes[key] = list(_measure_pass(kind, fam, device, fused=True)
                                   if key.endswith(FUSED) else _measure_pass(kind, fam, device))
    finally:
        _winners = None
    if need_np:
        cal.numpy = _measure_numpy()
    if need_eig:
        cal.eigh = _measure_eigh()
    if need_mm:
        cal.matmul = _measure_matmul()
    if need_nb:
        cal.notebook, cal.figure = _measure_notebook(device)
    if not busy:
        _save_calibration(cal, device)
    return cal


def _busy(device) -> str:
    """On a CPU whose load average over the last minute is half its cores or more (another
    training, a test suite), what the load is; else "". A calibration measured then prices
    the load, not the work, so :func:`calibrate` does not cache it."""
    if getattr(device, "type", str(device)) != "cpu" or not hasattr(os, "getloadavg"):
        return ""
    load, cores = os.getloadavg()[0], os.cpu_count() or 1
    return f"load {load:.1f} on {cores} core(s)" if load >= cores / 2 else ""

