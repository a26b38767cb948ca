"""The wang2020 chapter: what only its notebooks use (see robattr.chapters).

``specs``           the zoo models each notebook trains, declared once (for ``robattr plan``
                    too), and the labels of models trained alike at several seeds
``evaluate``        the table steps the notebooks share: attack curves per image, AUCs, the
                    guarded cell verdicts, the smoothed-against-gradient claim, tables compared
``setup``           the runs: Table 2's blocks, models and images, Tables 5-6, the checks of the
                    released code's conventions, Table 3's interleaved step times
``show``            what the pages show: attack curves with their bootstrap band and the random
                    baseline, tables of ours beside the paper's, readable log-axis labels
``theory``          the theory notebooks' computations: Prop 3, B1 and B2 on the Gauss-Newton
                    input Hessian; Thm 1-3 and Prop 1-2 on the smoothed geometry
``theory_figures``  the theory notebooks' figures
``training``        comparisons of training methods (Tables 3-5, Figs. 7-8): cost, cell verdicts,
                    shares of cells, rank trends, training accuracy, Hessian eigenvalues
``smoothing_maps``  Fig. 10: UG maps at growing radii, their roughness and its verdicts
"""
from robattr.chapters._exports import exports

__getattr__, __dir__ = exports(__name__, ("specs", "evaluate", "setup", "show", "theory",
                                             "theory_figures", "training", "smoothing_maps"))
