"""Memory probes shared by the trainer and the attribution methods' chunking.

:class:`SavedTensorPeak` measures what autograd keeps for backward, the memory that grows
with the number of rows of a forward pass: the trainer reports it per training step, and
:func:`robattr.attributions.chunk_rows` sizes the sample chunks of IG, SmoothGrad and RelEx
on CUDA from it.
"""
from __future__ import annotations

import weakref

import torch

__all__ = ["SavedTensorPeak"]


class _Saved:
    __slots__ = ("tensor", "__weakref__")

    def __init__(self, tensor):
        self.tensor = tensor


class SavedTensorPeak:
    """Context manager: peak bytes of the distinct storages autograd holds for backward.

        with SavedTensorPeak() as probe:
            loss = loss_fn(model, x, y)[0]; loss.backward()
        probe.peak_bytes

    Storages are counted once however many graph nodes save them (keyed by data
    pointer and device) and released when the last node holding them is freed.
    ``exclude``: tensors (e.g. ``model.parameters()``) whose storages are not counted,
    to measure activations only.
    """

    def __init__(self, exclude=()):
        self.current = 0
        self.peak = 0
        self._live: dict[tuple, list[int]] = {}
        self._hooks = None
        self._exclude = {(t.untyped_storage().data_ptr(), str(t.device)) for t in exclude}

    @property
    def peak_bytes(self) -> int:
        return self.peak

    def _release(self, key):
        entry = self._live.get(key)
        if entry is None:
            return
        entry[0] -= 1
        if entry[0] == 0:
            self.current -= entry[1]
            del self._live[key]

    def _pack(self, t: torch.Tensor):
        st = t.untyped_storage()
        key = (st.data_ptr(), str(t.device))
        if key in self._exclude:
            return t
        entry = self._live.get(key)
        if entry is None:
            self._live[key] = [1, st.nbytes()]
            self.current += st.nbytes()
            self.peak = max(self.peak, self.current)
        else:
            entry[0] += 1
        handle = _Saved(t)
        weakref.finalize(handle, self._release, key)
        return handle

    @staticmethod
    def _unpack(handle):
        return handle if torch.is_tensor(handle) else handle.tensor

    def __enter__(self):
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc):
        self._hooks.__exit__(*exc)
        return False
