"""The wangkong2023 chapter: what only its notebooks use (see robattr.chapters).

``tables``  the bookkeeping of 001's Tables 6-10 around :func:`robattr.bounds.evaluate_bounds`:
            random reference, crossings, wide tables, the linear-share verdict
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("tables",))
