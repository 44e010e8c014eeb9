"""The API boundary: cluster access, the metadata-only paged list, one guarded patch.

Client configuration (kubeconfig, in-cluster service account, exec plugins,
TLS, proxies) comes from the official `kubernetes` client; requests go through
its urllib3 pool, but are built here so that they stay small and cheap:
metadata-only Accept headers, gzip, responses always drained (keep-alive
survives), no typed models, and no retries hidden below our own policy. The
next list page is asked for while the current one is parsed, and credentials
are read from the client once a second, not per request (README, "Performance").
The CLI imports this module only inside commands: `node-holder --help` must
stay fast, and `import kubernetes` alone costs about 0.3 s.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import quote, urlencode

import urllib3
import yaml
from dateutil.parser import isoparse
from kubernetes import client, config

from reconcile.decide import NodePatch, NodeView, Transition, claimed_keys
from reconcile.settings import OWNERSHIP_MARKER, ClusterAccess, ConfigError

log = logging.getLogger(__name__)

ACCEPT_METADATA_LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
ACCEPT_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = "node-holder"
#: Ask the client for credentials at most this often: its refresh hook (expiring tokens, exec
#: plugins) re-applies the whole kubeconfig and re-reads proxy settings from the environment,
#: which made up a fifth of a patch's client CPU when it ran on every request.
AUTH_REFRESH_SECONDS = 1.0
EVENT_NAMESPACE = "default"  # where kubelet puts node events; `kubectl describe node` finds them
IN_CLUSTER_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
#: A list page is sized to hold about this many bytes (at most --page-size nodes): memory
#: follows the budget, not the size of the annotations people put on nodes.
PAGE_BYTES = 4 * 2**20
FIRST_PAGE = 20  # nodes in the first page, before anything is known about their size
MIN_PAGE = 10
#: After a stop (SIGTERM), requests in flight may take this long to finish; then they are cut.
STOP_GRACE = 1.5
WATCH_INTERVAL = 0.05  # how often the watchdog looks at the requests in flight


class ApiError(Exception):
    """The API server answered with an error Status (or something unparseable)."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        retry_after: float | None = None,
        verb: str = "",
        what: str = "",
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.verb = verb
        self.what = what

    @property
    def transient(self) -> bool:
        """Worth retrying: throttled or a server-side hiccup."""
        return self.status == 429 or self.status >= 500

    def explain(self) -> str:
        """One line for people, naming the fix for identity and RBAC problems."""
        if self.status == 401:
            return (
                f"401 Unauthorized while trying to {self.verb} {self.what}: the API server did not "
                "accept our credentials; check the kubeconfig user or the service account token"
            )
        if self.status == 403:
            return (
                f"403 Forbidden: {self.message}; grant the ClusterRole in cronjob/ "
                f"(it needs '{self.verb}' on {self.what})"
            )
        return (
            f"{self.status} {self.reason} while trying to {self.verb} {self.what}: {self.message}"
        )


class TransportError(Exception):
    """No HTTP answer: refused, reset, timed out, TLS failure. Always worth a retry."""


class MalformedNode(Exception):
    """A node whose metadata cannot be decided on (e.g. an unparseable timestamp)."""


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body) if self.body else {}

    @property
    def date(self) -> datetime | None:
        raw = self.headers.get("Date")
        if not raw:
            return None
        try:
            return parsedate_to_datetime(raw).astimezone(UTC)
        except (TypeError, ValueError):
            return None


@dataclass(frozen=True)
class Page:
    nodes: list[NodeView]
    continue_token: str | None
    date: datetime | None  # the response's Date header: the API server's clock
    next_page_size: int = 0  # ask for this many next: PAGE_BYTES at this page's bytes per node


def fitting_page_size(limit: int, body_bytes: int, max_page_size: int) -> int:
    """How many nodes fit PAGE_BYTES, judging by a page of `limit` nodes and `body_bytes`."""
    per_node = body_bytes / max(limit, 1)
    fit = int(PAGE_BYTES / per_node) if per_node else max_page_size
    return max(min(fit, max_page_size), min(MIN_PAGE, max_page_size))


@dataclass(frozen=True)
class Written:
    """Outcome of a successful write."""

    node: str
    resource_version: str


# --- configuration -----------------------------------------------------------


def load_configuration(access: ClusterAccess, pool_size: int) -> Any:
    """Resolve cluster access like kubectl does, without touching the network.

    Order: --kubeconfig, then $KUBECONFIG, then the in-cluster service account
    (inside a pod), then ~/.kube/config. Every failure is a ConfigError (exit 2).
    """
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
    cfg.retries = False  # our own retry policy is the only one (apply.py)
    return cfg


# --- the client ------------------------------------------------------------------


class Kube:
    """A few Node and Event calls over the official client's connection pool."""

    def __init__(
        self,
        configuration: Any,
        request_timeout: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._cfg = configuration
        self._pool = client.ApiClient(configuration).rest_client.pool_manager
        self._host = configuration.host.rstrip("/")
        # Without a proxy, go straight to the host's connection pool (same TLS settings, same
        # connections): no URL parsing and pool lookup under the manager's lock per request.
        self._direct: Any = None
        if type(self._pool) is urllib3.PoolManager:
            self._direct = self._pool.connection_from_url(self._host)
            self._base_path = urllib3.util.parse_url(self._host).path or ""
        self.request_timeout = request_timeout
        self.requests = 0  # how many requests this run sent (the summary reports it)
        self._lock = threading.Lock()
        self._clock = clock  # paces credential refreshes
        self._auth: dict[str, str] = {}
        self._auth_until = float("-inf")
        self._ahead: _Ahead | None = None  # the next list page, already asked for
        self._watchdog = _Watchdog()
        hosted = self._pool.connection_from_url(self._host)  # the pool every request goes through
        hosted._get_conn = self._watchdog.attaching(hosted._get_conn)

    def stop_on(self, stop: threading.Event) -> None:
        """Once `stop` is set, requests in flight get STOP_GRACE seconds, then are cut."""
        self._watchdog.stop = stop

    def _credentials(self) -> dict[str, str]:
        """Auth headers, asked of the client at most once per AUTH_REFRESH_SECONDS."""
        with self._lock:  # one refresh at a time: the other workers need its token anyway
            now = self._clock()
            if now >= self._auth_until:
                self._auth = {
                    auth["key"]: auth["value"]
                    for auth in self._cfg.auth_settings().values()
                    if auth.get("in") == "header" and auth.get("value")
                }
                self._auth_until = now + AUTH_REFRESH_SECONDS
            return self._auth

    def _seconds(self, timeout: float | None) -> float:
        """How long one request may take: the caller's cut of the deadline, or the default."""
        return self.request_timeout if timeout is None else max(timeout, 0.05)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
        verb: str = "",
        what: str = "",
    ) -> Response:
        """One HTTP request; the body is always read so the connection is reused."""
        target = path + (f"?{urlencode(query)}" if query else "")
        payload = None if body is None else json.dumps(body, separators=(",", ":"))
        seconds = self._seconds(timeout)
        with self._lock:
            self.requests += 1
        sent = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip", **(headers or {})}
        options: dict[str, Any] = {
            "body": payload,
            "headers": {**sent, **self._credentials()},
            "timeout": urllib3.Timeout(connect=min(seconds, 5.0), read=seconds),
            "preload_content": False,
            "retries": False,
            "redirect": False,
        }
        with self._watchdog.bound(seconds) as call:
            try:
                if self._direct is not None:
                    raw = self._direct.urlopen(method, self._base_path + target, **options)
                else:
                    raw = self._pool.request(method, self._host + target, **options)
                try:
                    data = raw.data  # decodes gzip; drains the socket
                finally:
                    raw.release_conn()
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if call.cut:
                    raise TransportError(call.cut.format(host=self._host, s=seconds)) from None
                if isinstance(exc, OSError):
                    raise TransportError(f"{type(exc).__name__}: {exc}") from None
                raise TransportError(_transport_message(exc, self._host)) from None
        response = Response(raw.status, raw.headers, data)  # case-insensitive, not copied
        if not 200 <= raw.status < 300:
            raise _api_error(response, verb, what)
        return response

    # --- nodes ---

    def list_page(
        self,
        *,
        page_size: int,
        annotation_keys: frozenset[str],
        label_keys: frozenset[str],
        continue_token: str | None = None,
        timeout: float | None = None,
        max_page_size: int | None = None,
    ) -> Page:
        """One page of the metadata-only node list, already compacted to node views.

        With `max_page_size`, the next page's size is chosen from this page's bytes per node
        (Page.next_page_size), so that a page holds about PAGE_BYTES whatever the nodes
        carry; the raw body is dropped as soon as it is parsed.
        """
        response = self._take_ahead(page_size, continue_token, timeout)
        if response is None:
            response = self._list_request(page_size, continue_token, timeout)
        body, date = response.body, response.date
        del response
        size = page_size
        if max_page_size:
            size = fitting_page_size(page_size, len(body), max_page_size)
        upcoming = _peek_continue(body)
        if upcoming:
            # Ask for the next page now: the server works on it while this one is parsed.
            self._ahead = _Ahead(size, upcoming)
            self._ahead.start(lambda: self._list_request(size, upcoming, timeout))
        with gc_paused():
            page = json.loads(body) if body else {}
            del body
            views = [
                node_view(item.get("metadata") or {}, annotation_keys, label_keys)
                for item in page.get("items") or ()
            ]
            meta = page.get("metadata") or {}
            del page
        token = meta.get("continue") or None
        if token != upcoming:
            self._ahead = None  # peeked wrong (an odd server): the caller asks for the real one
        return Page(views, token, date, size)

    def _list_request(
        self, page_size: int, continue_token: str | None, timeout: float | None
    ) -> Response:
        query = {"limit": str(page_size)}
        if continue_token:
            query["continue"] = continue_token
        return self.request(
            "GET",
            "/api/v1/nodes",
            query=query,
            headers={"Accept": ACCEPT_METADATA_LIST},
            timeout=timeout,
            verb="list",
            what='resource "nodes"',
        )

    def _take_ahead(
        self, page_size: int, continue_token: str | None, timeout: float | None
    ) -> Response | None:
        """The page asked for ahead, if it is this one; its error is raised as if sent now.

        Waited for no longer than this call's `timeout`: the request went out with the
        previous page's, and the run's deadline may have come closer since.
        """
        ahead, self._ahead = self._ahead, None
        if ahead is None or (ahead.page_size, ahead.continue_token) != (page_size, continue_token):
            return None  # a restarted list, or another page size: a direct request
        if not ahead.wait(self._seconds(timeout)):
            raise TransportError(f"{self._host} did not answer in time")
        return ahead.result()

    def read_node(
        self,
        name: str,
        *,
        annotation_keys: frozenset[str],
        label_keys: frozenset[str],
        timeout: float | None = None,
    ) -> NodeView | None:
        """Re-read one node (after a 409); None if it is gone."""
        try:
            response = self.request(
                "GET",
                f"/api/v1/nodes/{quote(name, safe='')}",
                headers={"Accept": ACCEPT_METADATA},
                timeout=timeout,
                verb="get",
                what=f'node "{name}"',
            )
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return node_view(response.json().get("metadata") or {}, annotation_keys, label_keys)

    def patch_node(self, patch: NodePatch, *, timeout: float | None = None) -> Written:
        """A merge patch of annotations, failing with 409 if the node changed since we read it."""
        response = self.request(
            "PATCH",
            f"/api/v1/nodes/{quote(patch.node, safe='')}",
            body=patch.body(),
            headers={"Content-Type": MERGE_PATCH, "Accept": ACCEPT_METADATA},
            timeout=timeout,
            verb="patch",
            what=f'node "{patch.node}"',
        )
        meta = response.json().get("metadata") or {}
        return Written(patch.node, str(meta.get("resourceVersion", "")))

    def create_event(
        self, transition: Transition, now: datetime, instance: str, timeout: float | None = None
    ) -> None:
        """A core/v1 Event on the node, in the namespace where node events live."""
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                # Unique without a clock: two runs in the same second must not collide.
                "generateName": f"{transition.node}.",
                "namespace": EVENT_NAMESPACE,
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Node",
                "name": transition.node,
                "uid": transition.node_uid or transition.node,
            },
            "reason": transition.reason,
            "message": transition.message,
            "type": "Normal",
            "source": {"component": USER_AGENT},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "reportingComponent": USER_AGENT,
            "reportingInstance": instance,
        }
        self.request(
            "POST",
            f"/api/v1/namespaces/{EVENT_NAMESPACE}/events",
            body=event,
            headers={"Content-Type": "application/json", "Accept": ACCEPT_METADATA},
            timeout=timeout,
            verb="create",
            what='resource "events" in namespace "default"',
        )


class _Ahead:
    """The next list page, requested on a thread while the current one is parsed.

    Still one list request in flight at a time (page k+1 is asked for once page k has
    arrived), but the parse of page k leaves the critical path. Thread.start() returns once
    the thread runs, and the thread normally keeps the GIL until its request is on the wire
    (the JSON parse, which holds the GIL throughout, comes after). A run stopped mid-list
    may thus have sent one page request more than it reads.
    """

    def __init__(self, page_size: int, continue_token: str) -> None:
        self.page_size = page_size
        self.continue_token: str | None = continue_token
        self._done = threading.Event()
        self._response: Response | None = None
        self._error: BaseException | None = None

    def start(self, fetch: Callable[[], Response]) -> None:
        def run() -> None:
            try:
                self._response = fetch()
            except BaseException as exc:  # handed to the caller of result()
                self._error = exc
            finally:
                self._done.set()

        threading.Thread(target=run, name="list-ahead", daemon=True).start()

    def wait(self, timeout: float) -> bool:
        return self._done.wait(timeout)

    def result(self) -> Response:
        self._done.wait()
        if self._error is not None:
            raise self._error
        assert self._response is not None
        return self._response


class _Call:
    """One request in flight: when its time is up, and its connection once it has one."""

    __slots__ = ("conn", "cut", "end")

    def __init__(self, end: float) -> None:
        self.end = end
        self.conn: Any = None
        self.cut = ""  # why the watchdog shut its socket, if it did


class _Watchdog:
    """Shuts the socket of a request that outlives its time, whatever urllib3 is waiting for.

    urllib3's read timeout bounds each socket read, not a response: a body (or a header)
    that trickles in a byte at a time never trips it. Each request here has a wall-clock end
    (its cut of the run's deadline); past it, or STOP_GRACE seconds after a stop, its socket
    is shut down and the read in progress fails at once. One thread for every request in
    flight; it ends when there has been nothing to watch for a second.
    """

    def __init__(self) -> None:
        self.stop: threading.Event | None = None
        self._calls: set[_Call] = set()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._running = False
        self._stopped_at: float | None = None

    @contextmanager
    def bound(self, seconds: float) -> Iterator[_Call]:
        call = _Call(time.monotonic() + seconds)
        self._local.call = call
        with self._lock:
            self._calls.add(call)
            if not self._running:
                self._running = True
                threading.Thread(target=self._watch, name="watchdog", daemon=True).start()
        try:
            yield call
        finally:
            self._local.call = None
            with self._lock:
                self._calls.discard(call)

    def attaching(self, get_conn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap a pool's `_get_conn`: the connection a request takes is the one to watch."""

        def attach(*args: Any, **kwargs: Any) -> Any:
            conn = get_conn(*args, **kwargs)
            call = getattr(self._local, "call", None)
            if call is not None:
                call.conn = conn
            return conn

        return attach

    def _watch(self) -> None:
        idle_since = time.monotonic()
        while True:
            time.sleep(WATCH_INTERVAL)
            now = time.monotonic()
            if self.stop is not None and self.stop.is_set() and self._stopped_at is None:
                self._stopped_at = now
            stopping = self._stopped_at is not None and now >= self._stopped_at + STOP_GRACE
            with self._lock:
                calls = list(self._calls)
                if calls:
                    idle_since = now
                elif now - idle_since > 1.0:
                    self._running = False
                    return
            for call in calls:
                if call.cut:
                    continue
                if now >= call.end:
                    _shut(call, "{host} did not answer in time (whole answer within {s:.1f}s)")
                elif stopping:
                    _shut(call, "request to {host} abandoned: stopping")


def _shut(call: _Call, why: str) -> None:
    sock = getattr(call.conn, "sock", None)
    if sock is None:
        return  # not connected yet (the connect timeout bounds that); look again next time
    call.cut = why
    with suppress(OSError):
        # The plain socket's shutdown, even under TLS: the reading thread owns the TLS state.
        socket.socket.shutdown(sock, socket.SHUT_RDWR)


# --- helpers -------------------------------------------------------------------

_LIST_META = re.compile(rb'"metadata":(\{[^{}]*\})')


def _peek_continue(body: bytes) -> str | None:
    """The continue token, read from the list's metadata without parsing the items.

    Kubernetes writes a list's metadata before its items; if the first `"metadata":` is
    not a flat object (another server's field order), there is nothing to peek.
    """
    start = body.find(b'"metadata":', 0, 4096)
    found = _LIST_META.match(body, start) if start >= 0 else None
    if found is None:
        return None
    try:
        meta = json.loads(found.group(1))
    except ValueError:
        return None
    token = meta.get("continue") if isinstance(meta, dict) else None
    return token if isinstance(token, str) and token else None


@contextmanager
def gc_paused() -> Iterator[None]:
    """Parsing a page makes many small containers; the cyclic GC only slows that down.

    Every collection also walks the Kubernetes client's hundreds of thousands of objects.
    """
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def parse_timestamp(raw: Any, node: str) -> datetime:
    if not isinstance(raw, str) or not raw:
        raise MalformedNode(f"node/{node}: creationTimestamp is missing")
    try:
        moment = datetime.fromisoformat(raw)
    except ValueError:
        try:
            moment = isoparse(raw)
        except (ValueError, OverflowError):
            raise MalformedNode(
                f"node/{node}: creationTimestamp {raw!r} is not an RFC 3339 time"
            ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment


def node_view(
    metadata: Mapping[str, Any], annotation_keys: frozenset[str], label_keys: frozenset[str]
) -> NodeView:
    """Keep only what the decision reads: a few hundred bytes instead of ~10 KB."""
    name = str(metadata.get("name", ""))
    annotations = metadata.get("annotations") or _EMPTY
    labels = metadata.get("labels") or _EMPTY
    keep = annotation_keys
    if OWNERSHIP_MARKER in annotations:
        keep = annotation_keys | claimed_keys(annotations) | {OWNERSHIP_MARKER}
    kept_labels = {k: labels[k] for k in label_keys if k in labels} if label_keys else _EMPTY
    kept = {k: annotations[k] for k in keep if k in annotations}
    return NodeView(
        name=name,
        created=parse_timestamp(metadata.get("creationTimestamp"), name),
        resource_version=str(metadata.get("resourceVersion", "")),
        uid=str(metadata.get("uid", "")),
        deleting=bool(metadata.get("deletionTimestamp")),
        labels=kept_labels or _EMPTY,
        annotations=kept or _EMPTY,
    )


_EMPTY: Mapping[str, str] = MappingProxyType({})  # shared by every node without labels we read


def _retry_after(headers: Mapping[str, str]) -> float | None:
    raw = headers.get("Retry-After")
    if raw is None:
        return None
    try:
        return max(float(raw), 0.0)
    except ValueError:
        try:
            moment = parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        return max((moment - datetime.now(UTC)).total_seconds(), 0.0)


def _api_error(response: Response, verb: str, what: str) -> ApiError:
    reason, message = "", ""
    try:
        status = json.loads(response.body)
        if isinstance(status, dict):
            reason = str(status.get("reason") or "")
            message = str(status.get("message") or "")
    except ValueError:
        message = response.body[:200].decode("utf-8", "replace").strip()
    return ApiError(
        response.status,
        reason or _REASONS.get(response.status, "Error"),
        message or "(no message)",
        retry_after=_retry_after(response.headers),
        verb=verb,
        what=what,
    )


_REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


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


def _transport_message(exc: Exception, host: str) -> str:
    cause = getattr(exc, "reason", None) or exc
    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
        return f"{host} did not answer in time"
    # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: test it first, or a
    # refused connection reads "timed out".
    if isinstance(exc, urllib3.exceptions.NewConnectionError | urllib3.exceptions.MaxRetryError):
        text = str(cause)
        if "Connection refused" in text:
            return f"cannot connect to {host}: connection refused"
        if "Name or service not known" in text or "nodename nor servname" in text:
            return f"cannot connect to {host}: host name not found"
        return f"cannot connect to {host}: {text}"
    if isinstance(exc, urllib3.exceptions.ConnectTimeoutError):
        return f"cannot connect to {host}: timed out"
    if isinstance(exc, urllib3.exceptions.ProtocolError):
        return f"connection to {host} dropped: {cause}"
    if isinstance(exc, urllib3.exceptions.SSLError):
        return f"TLS error talking to {host}: {cause}"
    return f"{type(exc).__name__} talking to {host}: {cause}"
