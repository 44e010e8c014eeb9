# karpenter-node-holder image: `node-holder reconcile` by default.
#
#   make image                          # CI's and a developer's build (buildah, no registry)
#   make image IMAGE_BASES=release      # the release's build: these ARG defaults
#   docker build -t ghcr.io/karpenter-node-holder/karpenter-node-holder:0.1.0 .
#
# Debian bookworm's python3 in both stages (docs/maintainers/releases.md, "The image"). The release builds
# on the two images below, pinned by the digest of their multi-architecture index (Renovate
# keeps the digests current: .github/renovate.json). `make image` passes BUILD_BASE and
# RUNTIME_BASE made from the same Debian packages by scripts/debian_bases.sh, because the
# machines it runs on reach Debian's archive but no container registry.
ARG BUILD_BASE=docker.io/library/debian:bookworm-slim@sha256:96e378d7e6531ac9a15ad505478fcc2e69f371b10f5cdf87857c4b8188404716
ARG RUNTIME_BASE=gcr.io/distroless/python3-debian12:latest@sha256:2fdb05402a2cf21cf78fdb3ba4c5db167241e9e498140f5bf689d7efb773731f

# ---- build: the wheel, and a venv holding it and the locked dependencies ------
FROM ${BUILD_BASE} AS build
ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
# Debian's python3 and its venv module: the interpreter the runtime base runs (python3.11 of
# bookworm). No compiler: the project is pure Python and every locked dependency is a wheel.
RUN apt-get -qq update \
    && apt-get -qq install -y --no-install-recommends python3-venv=3.11.2-1+b1 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# Only what the wheel is built from (.dockerignore allow-lists the same).
COPY requirements/build.lock requirements/runtime.lock requirements/
COPY pyproject.toml README.md ./
COPY reconcile/ reconcile/
# The release passes the tag's commit time: wheel entries and .pyc files (checked-hash, not
# mtime-based, when it is set) come out the same for the same sources.
ARG SOURCE_DATE_EPOCH
# /opt/build: pip, setuptools and wheel from requirements/build.lock (--require-hashes: every
# file must match a hash in the lock); the wheel is built with them, not with whatever an
# isolated build would download. /opt/node-holder: the runtime venv, made without pip; the
# build venv's pip installs into it (--python), so no pip, setuptools or wheel reaches the
# runtime stage. --no-deps on the wheel: its dependencies are exactly the locked ones.
# --compile writes the .pyc files now: the pod's root filesystem is read-only.
RUN python3 -m venv /opt/build \
    && /opt/build/bin/pip install --require-hashes --no-deps -r requirements/build.lock \
    && /opt/build/bin/pip wheel --no-deps --no-build-isolation --check-build-dependencies \
       --wheel-dir /tmp/wheels . \
    && python3 -m venv --without-pip /opt/node-holder \
    && /opt/build/bin/pip --python /opt/node-holder/bin/python install --compile \
       --require-hashes --no-deps -r requirements/runtime.lock \
    && /opt/build/bin/pip --python /opt/node-holder/bin/python install --compile --no-deps \
       /tmp/wheels/*.whl

# ---- runtime: the base's python3 and the venv, nothing else -----------------------
FROM ${RUNTIME_BASE}
# Keep in step with reconcile.__version__ (tests/install/test_dockerfile.py checks);
# the release passes the tag.
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="karpenter-node-holder" \
      org.opencontainers.image.description="Holds every node with karpenter.sh/do-not-disrupt while the cluster has just scaled up; runs as a Kubernetes CronJob." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/karpenter-node-holder/karpenter-node-holder" \
      org.opencontainers.image.licenses="Apache-2.0"

COPY --from=build /opt/node-holder /opt/node-holder

ENV PATH="/opt/node-holder/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

WORKDIR /
# Numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd. Nothing needs
# a passwd entry or a home: inside a pod the service account is found by path, and
# ~/.kube/config is looked for only when no other source applies (make image-test runs the
# image with uid 65532, no passwd entry and no HOME).
USER 65532:65532
ENTRYPOINT ["node-holder"]
CMD ["reconcile"]
