"""robattr.precision on any machine: the default policy turns TF32 off, the switches turn it
on and restore it, and bf16 autocasts CUDA only (so CPU arithmetic is unchanged).

PyTorch's flags (``torch.backends.cuda.matmul.allow_tf32``, ``torch.backends.cudnn.allow_tf32``)
can be read and set without a GPU. That no import applies the policy, and what
``precision.apply`` sets from ``$ROBATTR_PRECISION``, are checked in fresh interpreters, so
that no other test's state is involved. The CUDA side of bf16 (a
convolution's output in bfloat16) is tested in ``tests/library/test_cuda.py``
(``test_bf16_scope_autocasts_convolutions_on_cuda``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from torch import nn

from robattr import precision


def tf32_flags() -> tuple[bool, bool]:
    """(matmul, cudnn) TF32 flags."""
    return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32


def fresh_interpreter(code: str, env_value: str | None) -> subprocess.CompletedProcess:
    """Run ``code`` in a new Python with ``$ROBATTR_PRECISION`` set to ``env_value`` (unset
    when None)."""
    env = {k: v for k, v in os.environ.items() if k != precision.ENV}
    if env_value is not None:
        env[precision.ENV] = env_value
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=120)


IMPORT_AND_READ = """
import json, torch
before = [torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32]
import robattr.attributions, robattr.zoo, robattr.utils, robattr.train
from robattr import precision
after = [torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32]
print(json.dumps([before == after, precision.applied()]))
"""

APPLY_AND_READ = """
import json, torch
from robattr import precision
mode = precision.apply()
print(json.dumps([mode, precision.get(), torch.backends.cuda.matmul.allow_tf32,
                  torch.backends.cudnn.allow_tf32]))
"""


@pytest.mark.parametrize("env_value", [None, "tf32"])
def test_no_import_touches_pytorchs_flags(env_value):
    done = fresh_interpreter(IMPORT_AND_READ, env_value)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == [True, False]


@pytest.mark.parametrize("env_value,expected", [
    (None, ["fp32", "fp32", False, False]),   # full fp32 (PyTorch's own cuDNN default: TF32)
    ("tf32", ["tf32", "tf32", True, True]),
    (" TF32 ", ["tf32", "tf32", True, True]),
    ("", ["fp32", "fp32", False, False]),
])
def test_apply_sets_the_policy_of_the_environment(env_value, expected):
    done = fresh_interpreter(APPLY_AND_READ, env_value)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1]) == expected


def test_environment_rejects_an_unknown_or_block_only_mode():
    for value, hint in (("fp16", "got 'fp16'"), ("bf16", "only inside")):
        done = fresh_interpreter("from robattr import precision; precision.apply()", value)
        assert done.returncode != 0
        assert "ValueError" in done.stderr and "$ROBATTR_PRECISION" in done.stderr
        assert hint in done.stderr


def test_the_first_cuda_device_applies_the_policy(monkeypatch):
    """Without a GPU: ``get_device`` of a CUDA device applies the policy once, a CPU device
    does not."""
    from robattr import utils

    calls = []
    monkeypatch.setitem(precision._state, "applied", False)
    monkeypatch.setattr(precision, "apply", lambda: calls.append(1))
    assert utils.get_device("cpu").type == "cpu" and calls == []
    assert utils.get_device(torch.device("cuda")).type == "cuda" and calls == [1]


def test_default_mode_in_this_process():
    assert precision.get() == "fp32"
    assert tf32_flags() == (False, False)


def test_set_switches_the_process_wide_mode():
    try:
        precision.set("tf32")
        assert precision.get() == "tf32" and tf32_flags() == (True, True)
    finally:
        precision.set("fp32")
    assert precision.get() == "fp32" and tf32_flags() == (False, False)


def test_tf32_scope_turns_flags_on_and_restores():
    with precision.scope("tf32"):
        assert precision.get() == "tf32" and tf32_flags() == (True, True)
    assert precision.get() == "fp32" and tf32_flags() == (False, False)
    with pytest.raises(RuntimeError, match="inside"):
        with precision.scope("tf32"):
            raise RuntimeError("inside")
    assert precision.get() == "fp32" and tf32_flags() == (False, False)


def test_scopes_nest_and_restore_the_outer_mode():
    with precision.scope("tf32"):
        with precision.scope("fp32"):
            assert precision.get() == "fp32" and tf32_flags() == (False, False)
        assert precision.get() == "tf32" and tf32_flags() == (True, True)
    assert tf32_flags() == (False, False)


def test_bf16_scope_leaves_cpu_arithmetic_alone():
    conv = nn.Conv2d(3, 4, 3)
    x = torch.rand(2, 3, 8, 8)
    with precision.scope("bf16"):
        assert precision.get() == "bf16" and tf32_flags() == (True, True)
        assert conv(x).dtype == torch.float32
    assert precision.get() == "fp32" and tf32_flags() == (False, False)


def test_autocast_is_a_no_op_without_bf16_or_without_cuda():
    for mode in ("fp32", "tf32"):
        with precision.autocast(mode):
            assert not torch.is_autocast_enabled("cuda")
    if not torch.cuda.is_available():
        with precision.autocast("bf16"):
            assert not torch.is_autocast_enabled("cuda")


def test_bad_modes_are_refused_with_the_choices():
    with pytest.raises(ValueError, match="only inside robattr.precision.scope"):
        precision.set("bf16")
    with pytest.raises(ValueError, match="'fp32', 'tf32'"):
        precision.set("fp16")
    with pytest.raises(ValueError, match="'fp32', 'tf32', 'bf16'"):
        with precision.scope("fp64"):
            pass
    with pytest.raises(ValueError, match="got 'fast'"):
        precision.autocast("fast")
    assert precision.get() == "fp32" and tf32_flags() == (False, False)
