# karpenter-node-holder image: `node-holder reconcile` by default.
#
#   docker build -t ghcr.io/karpenter-node-holder/karpenter-node-holder:0.1.0 .
#
# Both stages use the same base, pinned to an exact Python patch release on
# Debian bookworm. Bump PYTHON_VERSION deliberately (and, if you can, pin the
# digest too: python:3.11.14-slim-bookworm@sha256:...).
ARG PYTHON_VERSION=3.11.14

# ---- build: turn the source into a wheel --------------------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
WORKDIR /src
# Only what the wheel is built from (.dockerignore allow-lists the same).
COPY pyproject.toml README.md ./
COPY reconcile/ reconcile/
# The project is pure Python: no compiler, no apt-get.
RUN pip wheel --no-deps --wheel-dir /tmp/wheels .

# ---- runtime: the wheel and its dependencies, nothing else ------------------------
FROM python:${PYTHON_VERSION}-slim-bookworm
ARG PYTHON_VERSION
# Keep in step with reconcile.__version__ (tests/test_dockerfile.py checks).
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="karpenter-node-holder" \
      org.opencontainers.image.description="Holds every node with karpenter.sh/do-not-disrupt while the cluster has just scaled up; runs as a Kubernetes CronJob." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/karpenter-node-holder/karpenter-node-holder" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.base.name="docker.io/library/python:${PYTHON_VERSION}-slim-bookworm"

# Installs the wheel and its dependencies from PyPI without keeping pip's
# cache; --compile writes the .pyc files now, because the pod's root
# filesystem is read-only and every run would otherwise recompile everything.
# The user entry gives uid 65532 a name and a home for tools that ask.
COPY --from=build /tmp/wheels/ /tmp/wheels/
RUN pip install --no-cache-dir --disable-pip-version-check --compile /tmp/wheels/*.whl \
    && rm -rf /tmp/wheels \
    && groupadd --system --gid 65532 nonroot \
    && useradd --system --uid 65532 --gid 65532 --no-create-home \
       --home-dir /nonexistent --shell /usr/sbin/nologin nonroot

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1

# Numeric, so the kubelet can verify runAsNonRoot without reading /etc/passwd.
USER 65532:65532
ENTRYPOINT ["node-holder"]
CMD ["reconcile"]
