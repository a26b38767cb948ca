"""The wang2020 chapter: what only its notebooks use (see robattr.chapters).

``evaluate``  the table steps the notebooks share: attack curves per image, AUCs, the
              guarded cell verdicts, the smoothed-against-gradient claim, tables compared
``setup``     the runs: Table 2's blocks, models and images, Tables 5-6, the checks of the
              released code's conventions, Table 3's interleaved step times
``show``      what the pages show: attack curves with their bootstrap band and the random
              baseline, tables of ours beside the paper's, readable log-axis labels
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("evaluate", "setup", "show"))
