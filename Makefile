# Two commands set everything up on a fresh machine: `make test` and `make demo`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

.PHONY: test demo lint bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## test: create .venv, install the project with its test extras, lint, run the whole suite
test: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

## demo: compare hold durations on a bundled day of batch-job churn (in memory, through the
## reconciler's decision; docs/simulate.md), then run the real `node-holder reconcile` through a
## short scale-up against the API test server (tests/kubeapi/demo.py); no cluster needed
DEMO_ARGS ?= reconcile/examples/batch-day.yaml --compare 10m,40m,20m/group,20m/node
demo: $(STAMP)
	$(PY) -m reconcile simulate $(DEMO_ARGS)
	$(PY) -m tests.kubeapi.demo

lint: $(STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports

## bench: the benchmark table (README "Performance")
bench: $(STAMP)
	$(PY) benchmarks/bench_runs.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
