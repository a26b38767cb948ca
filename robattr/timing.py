"""Training time, measured so that two methods can be compared: one step, in paired rounds.

* :func:`training_step_seconds`: the seconds of one training step (loss and backward) of a
  model's training method on a batch, on a copy of the model;
* :func:`step_time_rounds`: every model timed once per round, one after the other, so that
  the times of a round share the machine's load and the rounds pair the models;
* :func:`faster_per_step`: "this method takes less time per step than that one", a paired
  verdict over the rounds (:func:`robattr.report.verdicts.gap`), none below
  :data:`MIN_TIMING_ROUNDS` rounds.

In the library rather than in a chapter: the joo2023 chapter's Table 2 and the cross-paper
matrix both rest their claims about training time on these measurements.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from robattr.utils import check_image_batch, check_int, check_model

__all__ = ["training_step_seconds", "MIN_TIMING_ROUNDS", "step_time_rounds", "faster_per_step"]


def training_step_seconds(model: nn.Module, x: torch.Tensor, y, *, method: str | None = None,
                          repeats: int = 3, **hparams) -> float:
    """Seconds of one training step (loss, backward) of ``method`` on the batch ``(x, y)``,
    the median of ``repeats`` timed steps after one warm-up, on a copy of ``model`` in
    train mode (the model itself is not touched). ``method`` and ``hparams`` default to
    the model's zoo configuration (``model.zoo_meta["config"]``). Unlike the zoo's
    recorded ``seconds_per_epoch`` -- measured whenever and wherever each model was
    trained -- every model timed in one session shares the machine's load."""
    import copy
    import time

    from robattr.train import make_loss

    model = check_model(model)
    x, y = check_image_batch(x, y)
    if y is None:
        raise ValueError("y (the labels of the training batch) is required")
    repeats = check_int("repeats", repeats)
    if method is None:
        cfg = (getattr(model, "zoo_meta", None) or {}).get("config")
        if not cfg:
            raise ValueError("give method= (the model has no zoo configuration)")
        method, hparams = cfg["method"], {**cfg["loss"], **hparams}
    loss = make_loss(method, **hparams)
    m = copy.deepcopy(model).train()
    times = []
    for i in range(repeats + 1):
        t0 = time.perf_counter()
        value, _ = loss(m, x, y)
        value.backward()
        m.zero_grad(set_to_none=True)
        if x.is_cuda:
            torch.cuda.synchronize(x.device)     # CUDA runs asynchronously: time the work, not its launch
        if i:
            times.append(time.perf_counter() - t0)
    return float(np.median(times))


#: The fewest timed rounds from which a claim about training time is decided
#: (:func:`faster_per_step`). Two or three rounds give two or three numbers, not an
#: interval: below this the notebooks print the measurement beside the paper's ratio,
#: without a verdict.
MIN_TIMING_ROUNDS = 5


def step_time_rounds(models: dict, x: torch.Tensor, y, rounds: int) -> dict:
    """Seconds of one training step of every model of ``models`` (name -> zoo model) on
    the batch ``(x, y)``, in ``rounds`` rounds. Each round times every model once
    (:func:`training_step_seconds` with ``repeats=1``: one warm-up step, one timed step),
    one model after the other, so that the times of a round share the machine's load and
    the rounds pair the models. Returns name -> numpy array of ``rounds`` seconds."""
    if not isinstance(models, dict) or not models:
        raise ValueError("models must be a non-empty dict name -> model")
    rounds = check_int("rounds", rounds)
    times = {name: [] for name in models}
    for _ in range(rounds):
        for name, m in models.items():
            times[name].append(training_step_seconds(m, x, y, repeats=1))
    return {name: np.asarray(t, dtype=float) for name, t in times.items()}


def faster_per_step(step_times: dict, slow: str, fast: str, *,
                    min_rounds: int = MIN_TIMING_ROUNDS):
    """"``fast`` takes less time per training step than ``slow``", from the per-round times
    of :func:`step_time_rounds`: :func:`robattr.report.verdicts.gap` of ``slow − fast`` paired by
    round (its bootstrap interval over the rounds decides). ``None`` when there are fewer
    than ``min_rounds`` rounds: too few for an interval, so the caller reports the
    measurement without a verdict."""
    from robattr.report import verdicts

    for name in (slow, fast):
        if name not in step_times:
            raise ValueError(f"no step times for {name!r}; known: {sorted(step_times)}")
    a, b = np.asarray(step_times[slow], float), np.asarray(step_times[fast], float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"the times of {slow!r} and {fast!r} must be paired by round (same "
                         f"length), got {a.shape} and {b.shape}")
    min_rounds = check_int("min_rounds", min_rounds, 2)
    if a.size < min_rounds:
        return None
    return verdicts.gap(a, b, what=f"{slow} − {fast} seconds per training step, paired by round")
