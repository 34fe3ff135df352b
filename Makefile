VENV ?= .venv
PY := $(VENV)/bin/python
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install install-dev install-bench run test test-unit check lint types bench clean \
	browser haproxy

CHROMIUM := /usr/bin/chromium
HAPROXY := /usr/sbin/haproxy
UNIT := not e2e and not browser and not cluster and not fuzz

# Each install is a stamp in the venv: `make run` needs the runtime only; the tests, lint
# and types need the dev extra (which holds the browser and bench extras); the benchmarks
# the bench extra. README says how large each is.
install: $(VENV)/.installed-runtime
install-dev: $(VENV)/.installed-dev
install-bench: $(VENV)/.installed-bench

$(PY):
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(VENV)/.installed-runtime: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-runtime $(VENV)/.installed-bench

$(VENV)/.installed-bench: pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e '.[bench]'
	touch $@ $(VENV)/.installed-runtime

run: install
	$(VENV)/bin/areamem serve --config config.yaml

test: install-dev browser haproxy
	$(PY) -m pytest -q

# The fast loop: no real proxy, browser, cluster or fuzzing (see the markers in pyproject.toml).
test-unit: install-dev
	$(PY) -m pytest -q -m "$(UNIT)"

# The inspector's browser test (tests/test_ui_browser.py) drives Debian's chromium, never
# a downloaded browser: installed here when missing (Debian, as root).
browser:
	@test -x $(CHROMIUM) || { \
	  echo "$(CHROMIUM) is missing: apt-get install chromium"; \
	  { apt-get update && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y --no-install-recommends chromium; } || true; \
	  test -x $(CHROMIUM) || { \
	    echo "could not install chromium: run 'apt-get install chromium' as root" \
	      "(tests/test_ui_browser.py needs $(CHROMIUM))" >&2; exit 1; }; }

# The cluster's router (deploy/haproxy.cfg, scripts/cluster.py; tests/test_cluster_script.py
# checks the configs with haproxy -c): Debian's haproxy, installed here when missing.
haproxy:
	@command -v haproxy >/dev/null || test -x $(HAPROXY) || { \
	  echo "haproxy is missing: apt-get install haproxy"; \
	  { apt-get update && DEBIAN_FRONTEND=noninteractive \
	    apt-get install -y --no-install-recommends haproxy; } || true; \
	  test -x $(HAPROXY) || { \
	    echo "could not install haproxy: run 'apt-get install haproxy' as root" \
	      "(scripts/cluster.py and tests/test_cluster_script.py need it)" >&2; exit 1; }; }

lint: install-dev
	$(VENV)/bin/ruff check proxy memory_core policies tests scripts

types: install-dev
	$(VENV)/bin/mypy

# Lint, types and every test: what CI runs (.ci/run).
check: lint types test

bench: install-bench
	$(PY) scripts/bench_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
