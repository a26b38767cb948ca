# Two commands do all set-up on a fresh machine:
#   make book   -> book/_build/html/index.html  (quick profile by default)
#   make test   -> pytest (unit, property, oracle and notebook smoke tests)
# Both create .venv with pip and install what they need the first time; after
# that they only redo what changed.

PYTHON  ?= python3
VENV    ?= .venv
PROFILE ?= quick
# notebooks executed at a time (robattr build --jobs): one per core, at most 4; each kernel
# then runs on cores/JOBS threads, which suits the book's small models better than one
# notebook on all cores
JOBS    ?= $(shell n=$$(nproc 2>/dev/null || echo 1); [ $$n -gt 4 ] && n=4; echo $$n)
PY      := $(VENV)/bin/python
MATHJAX_VERSION := 3.2.2
MATHJAX := book/mathjax/tex-mml-chtml.js

.PHONY: book test venv ray quantus mathjax clean distclean help

help:
	@echo "make book     build the HTML book (PROFILE=quick|medium|paper|smoke, default quick;"
	@echo "              JOBS=n notebooks at a time, default one per core up to 4)"
	@echo "make test     run the tests"
	@echo "make clean    remove executed notebooks and the HTML build"

# The environment: re-installed only when requirements.txt or pyproject.toml change.
$(VENV)/.installed: requirements.txt pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $@

venv: $(VENV)/.installed

# The optional Ray executor: the tests need it, the book does not.
$(VENV)/.ray: requirements-ray.txt $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-ray.txt
	@touch $@

ray: $(VENV)/.ray

# The optional Quantus extra (robattr.metrics.quantus_adapter): the tests need it, and the
# book's cross-paper matrix shows Quantus's robustness metrics with it.
$(VENV)/.quantus: requirements-quantus.txt $(VENV)/.installed
	$(PY) -m pip install --quiet -r requirements-quantus.txt
	@touch $@

quantus: $(VENV)/.quantus

# MathJax 3 from the npm registry, served by the book itself (no CDN at read time).
$(MATHJAX):
	@command -v npm >/dev/null || { echo "npm is needed once to install MathJax 3 (apt-get install npm)"; exit 1; }
	npm install --silent --no-save --no-audit --no-fund --prefix .cache/npm mathjax@$(MATHJAX_VERSION)
	mkdir -p book/mathjax
	cd .cache/npm/node_modules/mathjax/es5 && cp -r tex-mml-chtml.js input output ui a11y sre adaptors $(CURDIR)/book/mathjax/

mathjax: $(MATHJAX)

book: venv quantus mathjax
	$(VENV)/bin/robattr build --profile $(PROFILE) --jobs $(JOBS)

test: venv ray quantus mathjax
	$(PY) -m pytest -q

clean:
	rm -rf book/_build book/.robattr-stamps.json book/.robattr-stamps.json.lock book/*/tally.md
	find book -name '*.ipynb' -not -path '*/.ipynb_checkpoints/*' -delete

distclean: clean
	rm -rf $(VENV) .cache book/mathjax
