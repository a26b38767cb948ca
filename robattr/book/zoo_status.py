"""``robattr zoo list``: each zoo model a profile's notebooks ask for, with what the zoo
holds of it and, once trained, its test accuracy beside its accuracy target.

A claim that compares training methods is judged only on models that meet their targets
(:mod:`robattr.targets`, the book's guard policy), so before a long build a reader wants to
know which models are trained, which are still training, and which miss their target and
will leave their claims "not comparable". This reads the zoo's metadata only: nothing is
loaded or trained.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from robattr.targets import Target, target

__all__ = ["ModelStatus", "statuses", "summary", "table"]

#: the loss settings a model's line shows (the others are the method's defaults in practice)
_SHOWN = ("norm", "eps", "lam", "lam_cos", "ssr_beta", "trades_beta", "gamma")


@dataclass
class ModelStatus:
    """One zoo model of a profile: its ``key`` and ``config``, the notebooks that ask for it,
    and what the zoo holds: ``state`` is ``"trained"``, ``"in progress"`` (a checkpoint after
    ``epochs_done`` epochs) or ``"not trained"``; a trained model has its ``test_acc`` and the
    ``seconds`` its epochs took (all of them, across resumed runs, where the zoo recorded
    them)."""

    key: str
    config: dict
    notebooks: list[str] = field(default_factory=list)
    state: str = "not trained"
    epochs_done: int = 0
    test_acc: float | None = None
    seconds: float | None = None

    @property
    def target(self) -> Target | None:
        c = self.config
        return target(c["dataset"], c["arch"], c.get("method", "ce"), c.get("loss"))

    @property
    def met(self) -> bool | None:
        """Whether the trained model meets its target (None: not trained, or no target)."""
        t = self.target
        return None if t is None or self.test_acc is None else t.met(self.test_acc)

    @property
    def label(self) -> str:
        c = self.config
        act = "" if c.get("activation", "relu") == "relu" else f" {c['activation']}({c['beta']:g})"
        loss = c.get("loss") or {}
        shown = ", ".join(f"{k} {_number(loss[k], k)}" for k in _SHOWN if k in loss)
        return f"{c['dataset']} {c['arch']}{act} {c.get('method', 'ce')}" + (f" ({shown})" if shown else "")


def _number(v, name: str = "") -> str:
    """A loss setting as a reader writes it: a radius (``eps``) in 255ths of the pixel range
    where it is a whole number of them or a quarter of one (``8/255``, ``0.25/255``), else
    ``%g`` (``0.1``)."""
    if name == "eps" and isinstance(v, float) and 0 < v < 1:
        r = v * 255
        if abs(r - round(r)) < 1e-6 or (r < 1 and abs(4 * r - round(4 * r)) < 1e-6):
            return f"{round(4 * r) / 4:g}/255"
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def statuses(root=None, profile: str = "quick", only: str | None = None) -> list[ModelStatus]:
    """Every model the notebooks of ``profile`` (matching ``only``) ask for, once, in the
    order of their first request, with what this machine's zoo holds of it."""
    from robattr import zoo
    from robattr.book.pretrain import requests
    from robattr.zoo.store import _Corrupt, _read_meta

    out: dict[str, ModelStatus] = {}
    for key, cfg, notebook, _ in requests(root, profile, only):
        row = out.setdefault(key, ModelStatus(key, cfg))
        if notebook not in row.notebooks:
            row.notebooks.append(notebook)
    partly = {p["key"]: p["epochs_done"] for p in zoo.partly_trained()}
    for key, row in out.items():
        wpath, jpath = zoo.paths(key)
        if wpath.exists() and jpath.exists():
            try:
                meta = _read_meta(jpath)
            except _Corrupt:
                continue
            if meta.get("key") != key or "test_acc" not in meta:
                continue
            seconds = (meta.get("history") or {}).get("seconds")
            row.state, row.epochs_done = "trained", int(row.config.get("epochs", 0))
            row.test_acc = float(meta["test_acc"])
            row.seconds = float(sum(seconds)) if seconds else meta.get("train_seconds")
        elif key in partly:
            row.state, row.epochs_done = "in progress", int(partly[key])
    return list(out.values())


def summary(rows: list[ModelStatus]) -> str:
    """One line: how many models are trained (meeting, missing or without their target),
    in progress and not trained."""
    trained = [r for r in rows if r.state == "trained"]
    met = sum(r.met is True for r in trained)
    missed = sum(r.met is False for r in trained)
    parts = [f"{len(rows)} model(s): {len(trained)} trained ({met} meet their target, "
             f"{missed} miss it, {len(trained) - met - missed} have none)"]
    parts.append(f"{sum(r.state == 'in progress' for r in rows)} in progress")
    parts.append(f"{sum(r.state == 'not trained' for r in rows)} not trained")
    return ", ".join(parts)


def _cells(r: ModelStatus) -> list[str]:
    c, t = r.config, r.target
    epochs = (f"{c.get('epochs')}" if r.state != "in progress"
              else f"{r.epochs_done} of {c.get('epochs')}")
    acc = "" if r.test_acc is None else f"{100 * r.test_acc:.1f} %"
    verdict = {True: "met", False: "missed", None: ""}[r.met]
    if r.state == "trained" and t is None:
        verdict = "no target"
    return [r.label, str(c.get("seed", 0)), epochs, str(c.get("train_size", "")),
            r.state, "" if r.seconds is None else f"{r.seconds:,.0f}", acc,
            "" if t is None else f"{100 * t.least:.1f} %", verdict,
            "" if t is None else f"{100 * t.accuracy:.1f} %, {t.source}",
            ", ".join(r.notebooks)]


_HEAD = ["model", "seed", "epochs", "images", "state", "seconds", "test accuracy", "target",
         "", "target's reference (source)", "for"]


def _told_apart(rows: list[ModelStatus]) -> list[str]:
    """Each row's label, followed by the settings in which it differs from the other rows of
    the same label and seed (two standard LeNets trained with other batch sizes)."""
    groups: dict[tuple, list[ModelStatus]] = {}
    for r in rows:
        groups.setdefault((r.label, r.config.get("seed")), []).append(r)
    out = []
    for r in rows:
        group = groups[(r.label, r.config.get("seed"))]
        keys = sorted({k for other in group for k in (*r.config, *other.config)
                       if k != "loss" and r.config.get(k) != other.config.get(k)})
        out.append(r.label + "".join(f", {k} {_number(r.config.get(k))}" for k in keys))
    return out


def table(rows: list[ModelStatus], markdown: bool = False) -> list[str]:
    """The rows as text lines: aligned columns, or a Markdown table (``markdown``)."""
    body = [[label, *_cells(r)[1:]] for label, r in zip(_told_apart(rows), rows)]
    if markdown:
        return ["| " + " | ".join(_HEAD) + " |", "|" + "---|" * len(_HEAD)] + [
            "| " + " | ".join(cells) + " |" for cells in body]
    widths = [max(len(x) for x in col) for col in zip(_HEAD, *body)]
    fmt = lambda cells: "  ".join(x.ljust(w) for x, w in zip(cells, widths)).rstrip()  # noqa: E731
    return [fmt(_HEAD)] + [fmt(cells) for cells in body]
