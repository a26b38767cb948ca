"""Hypothesis profiles, chosen with ``HYPOTHESIS_PROFILE``:

``dev`` (default)  random examples, so every local ``make test`` explores new cases;
``ci``             derandomized: the same examples on every run, so CI's verdict depends on
                   the commit alone (``.ci/run`` selects it).

A counterexample found locally is kept as an explicit test (see
``test_lim2021_bounds.test_convexity_alone_does_not_make_eq5_exact``).
"""
import os

from hypothesis import settings

settings.register_profile("dev")
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
