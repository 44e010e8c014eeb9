"""Cluster access: which cluster, as whom, resolved like kubectl without touching the network.

Order (the first that applies wins):

1. `--kubeconfig` (NODE_HOLDER_KUBECONFIG), else `$KUBECONFIG`: a list of files separated by
   `os.pathsep`, merged as kubectl merges them (the first file to set a value wins);
   `--context` picks a context, else the merged `current-context`;
2. inside a pod (`KUBERNETES_SERVICE_HOST` set and the service account token mounted): the
   pod's service account;
3. `~/.kube/config`.

Every failure is a `ConfigError` (exit 2) naming the setting and a fix, raised before any
request. The result is the official client's `Configuration`; `reconcile.client` sends the
requests.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kubernetes import client, config

from reconcile.settings import ClusterAccess, ConfigError

IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")


def load_configuration(access: ClusterAccess, pool_size: int) -> Any:
    """Resolve cluster access (see the module docstring); every failure is a ConfigError."""
    cfg = client.Configuration()
    explicit = access.kubeconfig or os.environ.get("KUBECONFIG")
    in_cluster = bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and IN_CLUSTER_TOKEN.exists()
    default = Path.home() / ".kube" / "config"
    try:
        if explicit:
            for path in explicit.split(os.pathsep):
                if path and not Path(path).expanduser().exists():
                    raise ConfigError(
                        f"--kubeconfig/KUBECONFIG: {path} does not exist; point it at a "
                        "kubeconfig file, or unset it to use the in-cluster service account"
                    )
            config.load_kube_config(
                config_file=explicit, context=access.context, client_configuration=cfg
            )
        elif in_cluster:
            if access.context:
                raise ConfigError(
                    "--context (NODE_HOLDER_CONTEXT) needs a kubeconfig; inside a pod the "
                    "service account is used, so unset it or pass --kubeconfig"
                )
            config.load_incluster_config(client_configuration=cfg)
        elif default.exists():
            config.load_kube_config(
                config_file=str(default), context=access.context, client_configuration=cfg
            )
        else:
            raise ConfigError(
                "no cluster access: not running in a pod and no kubeconfig found; "
                "pass --kubeconfig or set KUBECONFIG"
            )
    except ConfigError:
        raise  # already one line naming the fix (ConfigError is a ValueError: keep it first)
    except config.ConfigException as exc:
        detail = " ".join(str(exc).split())
        raise ConfigError(
            f"cannot load cluster access: {detail}; check --kubeconfig/KUBECONFIG and --context"
        ) from None
    except (ValueError, TypeError, KeyError, OSError, yaml.YAMLError) as exc:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        raise ConfigError(
            f"cannot load cluster access: malformed kubeconfig ({detail}); "
            "check --kubeconfig/KUBECONFIG"
        ) from None
    _check_server_url(str(cfg.host or ""))
    cfg.connection_pool_maxsize = max(pool_size, 1)
    cfg.retries = False  # our own retry policy is the only one (reconcile.retry)
    return cfg


def _check_server_url(host: str) -> None:
    """A kubeconfig without a usable server URL is bad input (exit 2), not an outage to retry."""
    try:
        url = urllib3.util.parse_url(host)
    except ValueError:
        url = None
    if url is None or url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            f"cannot load cluster access: the cluster's server {host!r} is not an http(s) URL; "
            "check --kubeconfig/KUBECONFIG and --context"
        )
