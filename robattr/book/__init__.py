"""The book machinery: notebooks → papermill → jupyter-book, and the ``robattr`` command.

The science core (``robattr.data``, ``models``, ``attributions``, ...) never imports
this subpackage; here each module is one concept and imports only modules listed above
it (``tests/book/test_layout.py`` checks both):

``params``         the rule language of a parameters cell, ``check_notebook``
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

What a notebook records (:mod:`robattr.report.results`) stays in the core: notebooks and
:func:`robattr.report.papers.claim` write it, the build reads it.

Import the module that defines a name (``from robattr.book.builder import build``); the
package itself defines none. A notebook's prologue, ``robattr.start()``, is
:func:`robattr.book.session.start`.
"""
