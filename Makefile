VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export LITELLM_LOCAL_MODEL_COST_MAP := True

.PHONY: install run test check lint types bench clean

install: $(STAMP)

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

run: install
	$(VENV)/bin/areamem serve --config config.yaml

test: install
	$(PY) -m pytest -q

lint: install
	$(VENV)/bin/ruff check proxy memory_core policies tests scripts

types: install
	$(VENV)/bin/mypy

check: lint types test

bench: install
	$(PY) scripts/bench_overhead.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
