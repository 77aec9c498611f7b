PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: demo test lint typecheck unit bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(DEVSTAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(STAMP)

## demo: create .venv, install, build a demo workspace and show a parcel's history
demo: $(STAMP)
	$(BIN)/feedledger demo --dir demo-workspace

## test: create .venv with dev extras, lint, type-check and run the whole suite
test: $(DEVSTAMP) lint typecheck unit

lint: $(DEVSTAMP)
	$(BIN)/ruff check src tests bench
	$(BIN)/ruff format --check src tests bench

typecheck: $(DEVSTAMP)
	$(BIN)/mypy

unit: $(DEVSTAMP)
	$(BIN)/pytest

## bench: 1,000,000-parcel ingest benchmark on SQLite and PostgreSQL (see bench/README.md)
bench: $(DEVSTAMP)
	$(BIN)/python bench/ingest_bench.py --repeat 2

clean:
	rm -rf $(VENV) demo-workspace .pytest_cache .mypy_cache .ruff_cache
