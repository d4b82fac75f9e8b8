# Transfer Lab: `make run` sets up and starts the app, `make test` sets up and runs the tests (and builds the
# documentation: `make docs` alone).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.requirements-installed
RAY_STAMP := $(VENV)/.requirements-ray-installed
DOCS_STAMP := $(VENV)/.requirements-docs-installed
HOST   ?= 127.0.0.1
PORT   ?= 8501

.PHONY: run test test-slow setup setup-ray setup-docs docs assets browser clean-cache

setup: $(STAMP)

PIP     := $(PY) -m pip install --disable-pip-version-check -q --no-compile
# pip compiles every installed module on one core; compileall -j 0 does the same work on every core. The
# compiled files matter: where PYTHONDONTWRITEBYTECODE is set, nothing is compiled on import, and every
# process would compile torch again. A module that does not compile is skipped, as pip skips it (torch
# ships test helpers in newer Python syntax).
COMPILE := $(PY) -m compileall -q -j 0 $(VENV)/lib >/dev/null || true

# torch first and alone: torch==2.13.0 is the local CPU wheel; resolving it together with the rest
# could let pip pick a CUDA build from the registry.
$(STAMP): requirements.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) "$$(head -n 1 requirements.txt)"
	$(PIP) -r requirements.txt -c constraints.txt
	$(COMPILE)
	touch $(STAMP)

# The optional Ray executor: `make test` installs it so tests/test_ray.py runs; `make run` never needs it.
setup-ray: $(RAY_STAMP)

$(RAY_STAMP): $(STAMP) requirements-ray.txt
	$(PIP) -r requirements-ray.txt -c constraints.txt
	$(COMPILE)
	touch $(RAY_STAMP)

# The documentation (mkdocs.yml, docs/) into site/. The API reference reads the docstrings from the source, so
# the docs need neither the lab's requirements nor its assets. --strict turns every warning into a failure: a
# broken link, anchor or snippet (the README's links too), or a symbol the reference names that the library
# lacks. Never with --quiet: it hides the warnings from --strict, which then passes them.
setup-docs: $(DOCS_STAMP)

$(DOCS_STAMP): requirements-docs.txt constraints.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) -r requirements-docs.txt -c constraints.txt
	touch $(DOCS_STAMP)

docs: $(DOCS_STAMP)
	$(VENV)/bin/mkdocs build --strict

assets: setup
	$(PY) -m labcore assets fetch --default

run: assets
	$(VENV)/bin/streamlit run app.py --server.address $(HOST) --server.port $(PORT)

# The browser test needs Debian's chromium; install it where apt-get exists, skip quietly elsewhere.
browser:
	@command -v chromium >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || \
	  [ "$$(id -u)" != 0 ] || (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) || \
	  echo "chromium could not be installed: the browser test will be skipped"

# The layer contracts (.importlinter) first: a broken layer fails fast, before the slower tests.
# The tests run in TEST_WORKERS processes, a test file to each at a time (its module fixtures built once): much
# of the suite waits on workers, servers and a browser, so even two cores run it in about two thirds of the
# time; three processes fill more of the waits (with three, 1.46 of two cores were busy on average; the
# timing-sensitive files must pass with a busy process on each core beside them anyway). The longest files go
# out first (tests/conftest.py's LONGEST_FIRST), not xdist's most-tests-first order. Assets and kept
# stores are fetched and built under a lock, once. TEST_WORKERS=0 runs it in one process.
# The documentation is built first, so CI fails on a broken link or a missing symbol too.
TEST_WORKERS ?= 3
test: setup setup-ray browser docs
	$(VENV)/bin/lint-imports --no-cache
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder

test-slow: setup browser
	$(PY) -m pytest -m "slow"

clean-cache:
	rm -rf cache/assets cache/datasets
