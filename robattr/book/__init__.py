"""The book machinery: notebooks → papermill → jupyter-book, and the ``robattr`` command.

The science core (``robattr.data``, ``models``, ``attributions``, ...) never imports
this subpackage; here each module is one concept and imports only modules listed above
it (``tests/test_layout.py`` checks both):

``params``         the rule language of a parameters cell; ``check_notebook`` is
                   ``robattr.check_params()``
``notebooks``      the book's root, its notebooks (key, path) and their parameters
``profiles``       profiles (``quick``, ``paper``, ``smoke``: YAML files in this
                   package's folder) and one notebook's values: defaults ← profile ←
                   command line
``stamps``         what an executed page depends on (``book/.robattr-stamps.json``),
                   read and written under a lock
``execution``      one notebook through papermill, a failure mapped to its source cell
``executors``      where executions run: here, worker processes, a Ray cluster
``verdicts_page``  the book's Verdicts page, from the recorded claims
``html``           the HTML book (``jupyter-book build``)
``builder``        the build: execute what changed into ``book/`` and stamp it
``sweep``          one notebook over a grid of parameter values, results as one CSV
``cli``            the ``robattr`` command

What a notebook records (:mod:`robattr.results`) stays in the core: notebooks and
:func:`robattr.papers.claim` write it, the build reads it.

The names of the former ``robattr.pipeline`` module are attributes of this package
(``robattr.pipeline`` is this package), loaded on first use.
"""
from __future__ import annotations

import importlib

#: The former ``robattr.pipeline``'s names: {name: the module that now defines it}.
_PIPELINE_NAMES = {
    "Parameter": "params", "ParameterError": "params",
    "Notebook": "notebooks", "project_root": "notebooks", "discover": "notebooks",
    "find": "notebooks", "read_parameters": "notebooks",
    "PROFILES": "profiles", "load_profile": "profiles", "parse_value": "profiles",
    "resolve": "profiles", "effective_precision": "profiles", "precision_env": "profiles",
    "profile_label": "profiles", "resources": "profiles",
    "STAMPS": "stamps", "stamp": "stamps",
    "NotebookFailure": "execution", "execute": "execution", "results_path": "execution",
    "make_job": "executors",
    "BuildReport": "builder", "build": "builder", "run_one": "builder",
    "build_html": "html",
}

__all__ = sorted(_PIPELINE_NAMES)


def __getattr__(name: str):
    if name in _PIPELINE_NAMES:
        return getattr(importlib.import_module(f"robattr.book.{_PIPELINE_NAMES[name]}"), name)
    raise AttributeError(f"module 'robattr.book' has no attribute {name!r}")
