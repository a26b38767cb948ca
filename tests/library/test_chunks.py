"""Device-aware chunking of the sample loops (robattr.attributions._core.chunks).

The CUDA branch sizes chunks by free memory; here it is exercised on the CPU by
pretending that the CPU has a given amount of free memory (``_free_bytes``)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from robattr import attributions as A
from robattr.attributions import _core
from robattr.models import build

RGB = SimpleNamespace(shape=(3, 8, 8), num_classes=5, mean=(0.3, 0.4, 0.5), std=(0.2, 0.3, 0.25))


def close(a, b, tol):
    """Equal shapes, and values within ``tol`` relative to ``b``'s largest magnitude."""
    assert a.shape == b.shape
    err = (a - b).abs().max().item()
    assert err <= tol * max(1.0, b.abs().max().item()), err


@pytest.fixture
def model_x():
    torch.manual_seed(0)
    model = build("lenet", RGB, "softplus", 3.0).double().eval()
    x = torch.rand(4, *RGB.shape, dtype=torch.float64)
    return model, x, torch.arange(4) % 10


def test_cpu_default_is_128_rows(model_x):
    model, x, t = model_x
    A.integrated_gradients(model, x, t, steps=50)
    assert A.last_chunk_rows() == 128                  # 32 copies of 4 inputs
    A.integrated_gradients(model, x, t, steps=50, batch_size=8)
    assert A.last_chunk_rows() == 8
    with pytest.raises(ValueError, match="batch_size"):
        A.smoothgrad(model, x, t, n_samples=3, batch_size=0)


@pytest.mark.parametrize("free", [10**12, 2 * 10**6])
def test_memory_sized_chunks_learn_bytes_per_row_and_keep_the_result(model_x, monkeypatch, free):
    model, x, t = model_x
    ref = A.integrated_gradients(model, x, t, steps=200, batch_size=800)
    sg_ref = A.smoothgrad(model, x, t, n_samples=60, seed=1, batch_size=4)
    monkeypatch.setattr(_core, "_free_bytes", lambda device: free)
    monkeypatch.setattr(_core, "_ROW_BYTES", type(_core._ROW_BYTES)())
    assert A.chunk_rows(model, x, 200) is None          # nothing measured yet
    got = A.integrated_gradients(model, x, t, steps=200)
    close(got, ref, tol=1e-12)
    per_row = _core._ROW_BYTES[model][_core._row_key(x, "grad", False)]
    assert per_row > 0
    rows = A.chunk_rows(model, x, 200)
    expect = int(_core.CUDA_MEMORY_SHARE * free / (_core.CUDA_OVERHEAD * per_row))
    assert rows == max(4, min(800, expect))
    A.integrated_gradients(model, x, t, steps=200)      # the second call starts at that size
    assert A.last_chunk_rows() == rows // 4 * 4
    if free == 10**12:
        assert rows == 800                              # everything in one pass
    else:
        assert rows < 800                               # bounded by the memory
    # noise is drawn copy by copy: the chunk size does not change the draws
    close(A.smoothgrad(model, x, t, n_samples=60, seed=1), sg_ref, tol=1e-12)


def test_relex_masks_do_not_depend_on_the_chunks(model_x, monkeypatch):
    model, x, t = model_x
    ref = A.relex(model, x, t, epochs=3, n_noisy=6, seed=2, batch_size=4)
    monkeypatch.setattr(_core, "_free_bytes", lambda device: 10**9)
    monkeypatch.setattr(_core, "_ROW_BYTES", type(_core._ROW_BYTES)())
    close(A.relex(model, x, t, epochs=3, n_noisy=6, seed=2), ref, tol=1e-10)
    assert A.last_chunk_rows() == 24


def test_relex_precision_argument(model_x):
    model, x, t = model_x
    with pytest.raises(ValueError, match="precision"):
        A.relex(model, x, t, epochs=1, n_noisy=2, precision="fp16")
    # on the CPU every mode computes in full precision (bf16 autocasts CUDA only)
    base = A.relex(model, x, t, epochs=2, n_noisy=2, seed=0)
    for mode in ("fp32", "tf32", "bf16"):
        close(A.relex(model, x, t, epochs=2, n_noisy=2, seed=0, precision=mode), base, tol=0)
