# karpenter-node-holder image: `node-holder reconcile` by default.
#
#   docker build -t ghcr.io/karpenter-node-holder/karpenter-node-holder:0.1.0 .
#
# Reproducible: the base is pinned by digest and every dependency is installed
# from requirements/runtime.lock with its sha256 (`pip install --require-hashes`).
#
# Both stages use the same base: an exact Python patch release on Debian
# bookworm, pinned by the digest of its multi-architecture index (linux/amd64
# and linux/arm64 resolve from the same digest). To bump it:
#   docker buildx imagetools inspect python:3.11.15-slim-bookworm   # "Digest:" line
# then change PYTHON_VERSION and PYTHON_DIGEST together (tests/packaging checks
# the form), and `make lock` if the Python version changes what resolves.
ARG PYTHON_VERSION=3.11.14
ARG PYTHON_DIGEST=sha256:65a93d69fa75478d554f4ad27c85c1e69fa184956261b4301ebaf6dbb0a3543d

# ---- build: the wheel, and a venv holding it and the locked dependencies ------
FROM python:${PYTHON_VERSION}-slim-bookworm@${PYTHON_DIGEST} AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the wheel is built from (.dockerignore allow-lists the same).
COPY requirements/runtime.lock requirements/runtime.lock
COPY pyproject.toml README.md ./
COPY reconcile/ reconcile/
# The project is pure Python: no compiler, no apt-get. The venv is created
# without pip: the base image's pip installs into it (--python), so neither
# pip nor setuptools nor wheel ends up in what the runtime stage copies.
# --require-hashes: every file pip installs must match a hash in the lock.
# --no-deps on the wheel: its dependencies are exactly the locked ones.
# --compile writes the .pyc files now: the pod's root filesystem is read-only.
RUN pip wheel --no-deps --wheel-dir /tmp/wheels . \
    && python -m venv --without-pip /opt/node-holder \
    && pip --python /opt/node-holder/bin/python install --compile --require-hashes \
       --no-deps -r requirements/runtime.lock \
    && pip --python /opt/node-holder/bin/python install --compile --no-deps /tmp/wheels/*.whl

# ---- runtime: the venv, nothing else -------------------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm@${PYTHON_DIGEST}
ARG PYTHON_VERSION
# Keep in step with reconcile.__version__ (tests/packaging/test_dockerfile.py checks);
# the release workflow passes the tag.
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="karpenter-node-holder" \
      org.opencontainers.image.description="Holds every node with karpenter.sh/do-not-disrupt while the cluster has just scaled up; runs as a Kubernetes CronJob." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/karpenter-node-holder/karpenter-node-holder" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:${PYTHON_VERSION}-slim-bookworm"

COPY --from=build /opt/node-holder /opt/node-holder

ENV PATH="/opt/node-holder/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd;
# no /etc/passwd entry is needed (HOME is never read: the pod mounts no
# kubeconfig, and the in-cluster service account is found by path).
USER 65532:65532
ENTRYPOINT ["node-holder"]
CMD ["reconcile"]
