"""The scale a verdict carries: data, models (their accuracy and training budget), how many
items, profile (see :mod:`robattr.report.verdicts`)."""
from __future__ import annotations

from dataclasses import dataclass

from robattr import context
from robattr.report.verdicts.guards import _shortfalls
from robattr.report.verdicts.rules import Verdict

__all__ = ["PROFILE_ENV", "Scale", "set_scale", "training_summary", "current_scale",
           "print_cells"]

#: Set by the pipeline for the kernel: the profile a notebook runs in (``quick``,
#: ``quick+2`` when two parameters differ from the profile's values).
PROFILE_ENV = context.PROFILE_ENV


@dataclass(frozen=True)
class Scale:
    """Where a verdict comes from: dataset and input size, model, how many items."""

    dataset: str = ""
    model: str = ""
    n: int | None = None
    unit: str = "images"
    #: the trained models' quality and budget (:func:`training_summary`), or "" when the
    #: claim rests on no trained model (a synthetic case says so in ``model``)
    trained: str = ""

    def text(self, profile: str | None = None) -> str:
        from robattr import catalog

        parts = []
        if self.dataset:
            shape = catalog.SHAPES.get(self.dataset)
            size = f" {shape[1]}×{shape[2]}" if shape else ""
            parts.append(f"{self.dataset}{size}")
        if self.model:
            parts.append(self.model)
        if self.trained:
            parts.append(self.trained)
        if self.n is not None:
            unit = self.unit
            if self.n == 1 and unit.isalpha():       # one word: "1 image", "1 class"
                unit = unit[:-2] if unit.endswith("sses") else unit.removesuffix("s")
            parts.append(f"{self.n} {unit}")
        profile = profile or context.current().profile
        parts.append(f"profile {profile}" if profile else "run outside the pipeline")
        return ", ".join(parts)


_SCALE = [Scale()]


def _span(values, fmt) -> str:
    lo, hi = min(values), max(values)
    return fmt(lo) if fmt(lo) == fmt(hi) else f"{fmt(lo)}–{fmt(hi)}"


def training_summary(models) -> str:
    """What a claim on trained models must show beside its verdict: their clean test
    accuracy and training budget, read from the zoo's metadata (``model.zoo_meta``), e.g.
    ``"test accuracy 38.5 %, 3 epochs on 1000 images"`` or, for several models,
    ``"test accuracy 35–41 % (4 models), 3 epochs on 1000 images, 4 below their accuracy
    target"`` (:func:`robattr.targets.target`, :func:`models_fit`). Models
    without zoo metadata (built in the notebook) are counted as such."""
    models = [models] if hasattr(models, "parameters") else list(models)
    if not models:
        raise ValueError("training_summary needs at least one model")
    metas = [getattr(m, "zoo_meta", None) for m in models]
    known = [m for m in metas if isinstance(m, dict) and "test_acc" in m]
    if not known:
        plural = "s" * (len(models) > 1)
        return f"{len(models)} model{plural} not from the zoo (no recorded accuracy)"
    acc = _span([100 * float(m["test_acc"]) for m in known], lambda v: f"{v:.1f}")
    trained = [m for m in known if "epochs" in m.get("config", {})]
    count = f" ({len(known)} models)" if len(known) > 1 else ""
    text = f"test accuracy {acc} %{count}"
    if trained:
        epochs = _span([int(m["config"]["epochs"]) for m in trained], str)
        images = _span([int(m.get("train_images") or 0) for m in trained], str)
        text += f", {epochs} epoch{'' if epochs == '1' else 's'} on {images} images"
    if len(trained) < len(known):         # loaded from weights the user gave, not trained here
        text += f", {len(known) - len(trained)} from given weights"
    if len(known) < len(models):
        text += f", and {len(models) - len(known)} not from the zoo"
    short = _shortfalls(models)
    if short:
        text += f", {len(short)} below {'its' if len(short) == 1 else 'their'} accuracy target"
    return text


def set_scale(dataset: str = "", model: str = "", n: int | None = None,
              unit: str = "images", *, models=None) -> Scale:
    """The scale every later claim of this notebook shows (one call in the setup cell);
    a claim may override ``n`` or ``unit``. ``models``: the trained model(s) the claims
    rest on, whose test accuracy and training budget the line then shows
    (:func:`training_summary`); leave it out only for a synthetic case, which ``model``
    then names."""
    if n is not None and (isinstance(n, bool) or int(n) != n or n < 1):
        raise ValueError(f"n must be an integer >= 1, got {n!r}")
    trained = "" if models is None else training_summary(models)
    _SCALE[0] = Scale(str(dataset), str(model), None if n is None else int(n), unit, trained)
    return _SCALE[0]


def current_scale() -> Scale:
    return _SCALE[0]


def print_cells(title: str, cells) -> None:
    """Print ``title``, then one line per cell of ``cells`` (a mapping ``name -> Verdict``):
    the verdict and the rule that decided it, the evidence a combined claim rests on."""
    if not hasattr(cells, "items"):
        raise ValueError(f"cells must be a mapping name -> Verdict, got {type(cells).__name__}")
    print(title)
    for name, v in cells.items():
        if not isinstance(v, Verdict):
            raise ValueError(f"cell {name!r} is not a Verdict: {v!r}")
        print(f"  {name}: {v.verdict} ({v.rule})")
