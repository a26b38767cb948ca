"""Kept until the plan split lands: ``robattr.chapters.wang2020.plan`` (split from
``robattr.book.plan``) still imports ``from robattr.wang2020 import table2_runs,
TABLE2_BLOCKS``. The wang2020 chapter's helpers live in :mod:`robattr.chapters.wang2020`;
importing this module gives that package. Delete this file (and its exception in
``tests/test_layout.py``) once nothing imports ``robattr.wang2020``.
"""
import importlib
import sys

sys.modules[__name__] = importlib.import_module("robattr.chapters.wang2020")
