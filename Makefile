VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install run test check lint types bench clean browser haproxy vendor-ui

CHROMIUM := /usr/bin/chromium
HAPROXY := /usr/sbin/haproxy
UI_VENDOR := proxy/static/ui/vendor

install: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: install
	$(VENV)/bin/areamem serve --config config.yaml

test: install browser haproxy
	$(PY) -m pytest -q

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

# The inspector's third-party files, pinned by ui/package-lock.json, copied into the
# package and committed (running and testing need no npm). Run after changing ui/package.json.
vendor-ui:
	cd ui && npm ci --ignore-scripts
	mkdir -p $(UI_VENDOR)
	cp ui/node_modules/cytoscape/dist/cytoscape.min.js $(UI_VENDOR)/
	cp ui/node_modules/cytoscape/LICENSE $(UI_VENDOR)/cytoscape.LICENSE.txt

lint: install
	$(VENV)/bin/ruff check proxy memory_core policies tests scripts

types: install
	$(VENV)/bin/mypy

check: lint types test

bench: install
	$(PY) scripts/bench_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
