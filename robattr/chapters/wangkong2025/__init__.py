"""The wangkong2025 chapter: what only its notebooks use (see robattr.chapters).

``tables``  the certified_eps notebook's steps for 002's Tables 5-7: a block's inputs and
            models, the certified budgets, their means, Corollary 1's ratio test
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("tables",))
