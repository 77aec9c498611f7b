PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: demo test test-thorough lint typecheck unit bench clean
.PHONY: bench-peers bench-peers-smoke

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

# An editable install gets no bytecode (pip compiles a wheel's modules, not a source
# tree), and where PYTHONDONTWRITEBYTECODE is set no run ever writes it: every command
# would compile feedledger's modules again (~0.1-0.15 s of each process). So the install
# compiles them once, as pip does for a wheel; `make compile` again after editing.
COMPILE := $(BIN)/python -m compileall -q src

$(STAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q -c constraints.txt -e .
	$(COMPILE)
	touch $@

$(DEVSTAMP): pyproject.toml constraints.txt | $(BIN)/python
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev]'
	$(COMPILE)
	touch $@ $(STAMP)

.PHONY: compile
## compile: feedledger's modules to bytecode (done by the install; again after edits)
compile: | $(BIN)/python
	$(COMPILE)

## demo: create .venv, install, build a demo workspace and show a parcel's history
demo: $(STAMP)
	$(BIN)/feedledger demo --dir demo-workspace

## test: create .venv with dev extras, lint, type-check and run the whole suite
test: $(DEVSTAMP) lint typecheck unit

# lint-imports: the contracts of docs/architecture.md ([tool.importlinter] in pyproject.toml):
# layers point down, only storage modules import SQLAlchemy, the CLI calls only the API
lint: $(DEVSTAMP)
	$(BIN)/ruff check src tests bench tools
	$(BIN)/ruff format --check src tests bench tools
	$(BIN)/lint-imports --no-cache

typecheck: $(DEVSTAMP)
	$(BIN)/mypy

# the suite on every core (pytest-xdist): PYTEST_WORKERS=0 runs it in this one process
PYTEST_WORKERS ?= auto
PYTEST_DIST ?= loadfile

unit: $(DEVSTAMP)
	@start=$$(date +%s); \
	$(BIN)/pytest -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST) --durations=15; status=$$?; \
	echo "unit tests: $$(( $$(date +%s) - start )) s (pytest -n $(PYTEST_WORKERS) --dist $(PYTEST_DIST))"; \
	exit $$status

## test-thorough: the suite with five times the examples of its heaviest property tests
## (tests/example_budget.py): a deeper run before a release (not timed here)
test-thorough:
	FEEDLEDGER_TEST_EXAMPLES=5 $(MAKE) unit

## bench: 1,000,000-parcel ingest benchmark on SQLite and PostgreSQL (see bench/README.md)
bench: $(DEVSTAMP)
	$(BIN)/python bench/ingest_bench.py --repeat 2

# The peers (dlt, dbt) live in their own virtual environment, never mixed with ours;
# created once (stamp file). Registry only: their telemetry is off in bench/peers/.
# polars: histories.py decodes feedledger's stored attributes with ledger/encoding/codec.py.
PEERS := bench/.peers
PEERS_STAMP := $(PEERS)/.installed

$(PEERS_STAMP):
	$(PY) -m venv $(PEERS)
	$(PEERS)/bin/python -m pip install -q --upgrade pip
	$(PEERS)/bin/python -m pip install -q 'dlt[duckdb]' pyarrow 'dbt-duckdb' 'dbt-core<1.12' polars
	touch $@

## bench-peers: feedledger vs dlt scd2 vs dbt snapshot, 100k and 1M parcels (bench/README.md)
bench-peers: $(DEVSTAMP) $(PEERS_STAMP)
	$(BIN)/python bench/peers/run.py

## bench-peers-smoke: the same at N=1,000, D=3, plus the cross-check and the outage test
bench-peers-smoke: $(DEVSTAMP) $(PEERS_STAMP)
	$(BIN)/python bench/peers/run.py --smoke
	$(BIN)/python -m pytest -q -p no:cacheprovider bench/peers/test_outage.py

clean:
	rm -rf $(VENV) demo-workspace .pytest_cache .mypy_cache .ruff_cache
