"""The way to the API server: a urllib3 pool built from a `Connection`, and one request at a time.

The project's own client on urllib3 (what the official client is built on), not the `kubernetes`
package: a run needs metadata-only list pages, one deadline on a whole answer (urllib3 bounds
each read) and its own retry and write-rate policy (reconcile.cluster.pace); importing the
package's loader alone would add about 0.24 s of CPU and 18 MB to every run
(docs/maintainers/releases.md, "Dependencies").
Cheap and bounded requests: docs/maintainers/benchmarks.md ("What keeps it cheap", "Deadlines
and signals"); renewed credentials: docs/operations-notes.md. No retries hide below ours.
"""

from __future__ import annotations

import json
import math
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlencode

import urllib3

from reconcile.cluster.errors import (
    Action,
    TransportError,
    UnreadableAnswer,
    api_error,
    redact,
)

USER_AGENT = "node-holder"
#: Ask for credentials at most this often: a token file is read again at each ask (the
#: kubelet rotates it).
AUTH_REFRESH_SECONDS = 1.0
#: After a stop (SIGTERM), requests in flight may take this long to finish; then they are cut.
STOP_GRACE = 1.5
WATCH_INTERVAL = 0.05  # how often the watchdog looks at the requests in flight

#: The auth headers: called with no argument at most once per AUTH_REFRESH_SECONDS, and with
#: `renew=True` after a 401 (an exec plugin then runs again; a fixed token stays as it is).
Credentials = Callable[..., dict[str, str]]


def anonymous(renew: bool = False) -> dict[str, str]:
    """No auth headers."""
    return {}


@dataclass(frozen=True)
class Connection:
    """Where the API server is and how to reach it: all the client needs (built by access.py)."""

    server: str  # http(s)://host[:port][/base-path], no trailing slash
    #: The auth headers; asked for at most once per AUTH_REFRESH_SECONDS (tokens rotate).
    credentials: Credentials = field(default=anonymous, compare=False)
    ca_file: str | None = None  # neither this nor ca_data: the system's CAs
    ca_data: str | None = None  # PEM
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    tls_server_name: str | None = None
    proxy: str | None = None  # resolved by access.py: None when NO_PROXY names the server


def connection_pool(connection: Connection, size: int) -> urllib3.PoolManager:
    """A pool keeping up to `size` connections to the server; no retries below ours."""
    options: dict[str, Any] = {
        "maxsize": max(size, 1),
        "retries": False,
        "cert_reqs": ssl.CERT_REQUIRED if connection.verify else ssl.CERT_NONE,
        "ca_certs": connection.ca_file,
        "ca_cert_data": connection.ca_data,
        "cert_file": connection.cert_file,
        "key_file": connection.key_file,
    }
    if connection.tls_server_name:
        options["server_hostname"] = connection.tls_server_name
    if not connection.proxy:
        return urllib3.PoolManager(**options)
    if connection.proxy.lower().startswith("socks"):
        from urllib3.contrib.socks import SOCKSProxyManager  # noqa: PLC0415 (needs PySocks)

        return SOCKSProxyManager(connection.proxy, **options)
    return urllib3.ProxyManager(connection.proxy, **options)


@dataclass(frozen=True)
class Response:
    status: int
    headers: Mapping[str, str]
    body: bytes

    @property
    def date(self) -> datetime | None:
        """The Date header: the API server's clock, aware UTC."""
        return http_date(self.headers.get("Date"))


class Transport:
    """One connection pool to the API server; `request` sends, reads and classifies."""

    def __init__(
        self,
        connection: Connection,
        request_timeout: float = 10.0,
        pool_size: int = 1,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._credentials_of = connection.credentials
        self._pool = connection_pool(connection, pool_size)
        self._host = connection.server.rstrip("/")
        self._shown = redact(self._host)  # what messages name: no credentials
        hosted = self._pool.connection_from_url(self._host)  # the pool every request goes through
        # Without a proxy, go straight to the host's connection pool (same TLS settings, same
        # connections): no URL parsing and pool lookup under the manager's lock per request.
        self._direct: Any = None if connection.proxy else hosted
        self._base_path = urllib3.util.parse_url(self._host).path or ""
        self.request_timeout = request_timeout
        self.requests = 0  # how many requests this run sent (the summary reports it)
        self._lock = threading.Lock()
        self._clock = clock  # paces credential refreshes
        self._auth: dict[str, str] = {}
        self._auth_until = float("-inf")
        self._watchdog = _Watchdog()
        hosted.ConnectionCls = self._watchdog.watching(hosted.ConnectionCls)

    def stop_on(self, stop: threading.Event) -> None:
        """Once `stop` is set, requests in flight get STOP_GRACE seconds, then are cut."""
        self._watchdog.stop = stop

    def _credentials(self, refused: dict[str, str] | None = None) -> dict[str, str]:
        """Auth headers, asked for at most once per AUTH_REFRESH_SECONDS; after a 401 on
        `refused`, renewed once (not again when another worker already renewed them)."""
        with self._lock:  # one refresh at a time: the other workers need its token anyway
            now = self._clock()
            if refused is not None and refused == self._auth:
                self._auth = dict(self._credentials_of(renew=True))
                self._auth_until = now + AUTH_REFRESH_SECONDS
            elif now >= self._auth_until:
                self._auth = dict(self._credentials_of())
                self._auth_until = now + AUTH_REFRESH_SECONDS
            return self._auth

    def request(
        self,
        method: str,
        path: str,
        action: Action,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """One HTTP request within `timeout` (the caller's cut of the run's deadline), sent
        again once after a 401 if the renewed credentials differ; an error status raises its
        ApiError."""
        target = path + (f"?{urlencode(query)}" if query else "")
        payload = None if body is None else json.dumps(body, separators=(",", ":"))
        sent = {"User-Agent": USER_AGENT, "Accept-Encoding": "gzip", **(headers or {})}
        seconds = self.request_timeout if timeout is None else max(timeout, 0.05)
        end = time.monotonic() + seconds  # both tries together
        auth = self._credentials()
        response = self._send(method, target, payload, {**sent, **auth}, seconds, action)
        if response.status == 401 and (renewed := self._credentials(auth)) != auth:
            left = max(end - time.monotonic(), 0.05)
            response = self._send(method, target, payload, {**sent, **renewed}, left, action)
        if not 200 <= response.status < 300:
            later = retry_after(response.headers.get("Retry-After"))
            raise api_error(response.status, response.body, later, action)
        return response

    def _send(
        self,
        method: str,
        target: str,
        payload: str | None,
        headers: dict[str, str],
        seconds: float,
        action: Action,
    ) -> Response:
        """Send once within `seconds` and read the whole answer, whatever its status."""
        with self._lock:
            self.requests += 1
        options: dict[str, Any] = {
            "body": payload,
            "headers": headers,
            "timeout": urllib3.Timeout(connect=min(seconds, 5.0), read=seconds),
            "preload_content": False,
            "retries": False,
            "redirect": False,
        }
        with self._watchdog.bound(seconds) as call:  # the whole answer, not each read
            try:
                if self._direct is not None:
                    raw = self._direct.urlopen(method, self._base_path + target, **options)
                else:
                    raw = self._pool.request(method, self._host + target, **options)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                raise TransportError(self._why(call, exc)) from None
            try:
                data = raw.data  # decodes gzip; drains the socket
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                if 200 <= raw.status < 300:
                    raise UnreadableAnswer(
                        f"the answer to {action.verb} {action.what} was cut short or could not "
                        f"be decoded ({self._why(call, exc)})"
                    ) from None
                data = b""  # an error status says enough without its body
            finally:
                raw.release_conn()
        return Response(raw.status, raw.headers, data)  # case-insensitive, not copied

    def _why(self, call: _Call, exc: Exception) -> str:
        """One line on a failed request: the watchdog's reason if it cut it, else urllib3's."""
        if call.cut:
            return call.cut.format(host=self._shown, s=call.seconds)
        if isinstance(exc, urllib3.exceptions.HTTPError):
            return redact(_transport_message(exc, self._shown))
        return redact(f"{type(exc).__name__}: {exc}")


# --- the watchdog ------------------------------------------------------------------


@dataclass(slots=True, eq=False)  # in a set by identity
class _Call:
    """One request in flight: when its time is up, and its connection once it has one."""

    seconds: float
    end: float  # time.monotonic()
    conn: Any = None
    cut: str = ""  # why the watchdog shut its socket, if it did

    def shut(self, why: str) -> None:
        sock = getattr(self.conn, "sock", None)
        if sock is None:
            return  # not connected yet (the connect timeout bounds that); look again next time
        self.cut = why
        with suppress(OSError):
            # The plain socket's shutdown, even under TLS: the reading thread owns the TLS state.
            socket.socket.shutdown(sock, socket.SHUT_RDWR)


class _Watchdog:
    """Shuts the socket of a request past its end or STOP_GRACE after a stop: urllib3 bounds
    each read, not an answer (docs/maintainers/benchmarks.md, "Deadlines and signals"). One
    thread for every request in flight; it ends after a second with nothing to watch."""

    def __init__(self) -> None:
        self.stop: threading.Event | None = None
        self._calls: set[_Call] = set()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._running = False
        self._stopped_at = math.inf

    @contextmanager
    def bound(self, seconds: float) -> Iterator[_Call]:
        self._local.call = call = _Call(seconds, time.monotonic() + seconds)
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

    def watching(self, connection_class: type) -> type:
        """The pool's own connection class (plain, TLS, SOCKS), subclassed to say which
        connection a request connects (a TLS handshake, a proxy's CONNECT) and sends on."""
        local = self._local

        class Watched(connection_class):  # type: ignore[valid-type,misc]
            def connect(self) -> None:
                if call := getattr(local, "call", None):
                    call.conn = self
                super().connect()

            def request(self, *args: Any, **kwargs: Any) -> None:
                if call := getattr(local, "call", None):
                    call.conn = self
                super().request(*args, **kwargs)

        return Watched

    def _watch(self) -> None:
        idle_since = time.monotonic()
        while True:
            time.sleep(WATCH_INTERVAL)
            now = time.monotonic()
            if self.stop is not None and self.stop.is_set():
                self._stopped_at = min(self._stopped_at, now)
            with self._lock:
                calls = [call for call in self._calls if not call.cut]
                if self._calls:
                    idle_since = now
                elif now - idle_since > 1.0:
                    self._running = False
                    return
            for call in calls:
                if now >= call.end:
                    call.shut("{host} did not answer in time (whole answer within {s:.1f}s)")
                elif now >= self._stopped_at + STOP_GRACE:
                    call.shut("request to {host} abandoned: stopping")


# --- headers and failures, in words ------------------------------------------------


def http_date(raw: str | None) -> datetime | None:
    """An HTTP date as aware UTC, or None if absent or unreadable; the zone `-0000`, which
    `parsedate_to_datetime` leaves naive, is UTC (RFC 5322), never the local zone."""
    if not raw:
        return None
    try:
        moment = parsedate_to_datetime(raw)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC)


def retry_after(raw: str | None) -> float | None:
    """Retry-After in seconds, as kube-apiserver sends it; None: not given, an HTTP date, or not
    a finite, non-negative number (`nan`, `-1`), so the caller falls back to its normal backoff."""
    try:
        seconds = float(raw or "")
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _transport_message(exc: Exception, host: str) -> str:
    cause = getattr(exc, "reason", None) or exc
    errors = urllib3.exceptions
    # The first match wins. NewConnectionError subclasses ConnectTimeoutError in urllib3 2: it
    # comes first, or a refused connection reads "timed out".
    forms = (
        (errors.ReadTimeoutError, "{host} did not answer in time"),
        (errors.NewConnectionError | errors.MaxRetryError, "cannot connect to {host}: {failure}"),
        (errors.ConnectTimeoutError, "cannot connect to {host}: timed out"),
        (errors.ProtocolError, "connection to {host} dropped: {cause}"),
        (errors.SSLError, "TLS error talking to {host}: {cause}"),
    )
    form = next(
        (f for kind, f in forms if isinstance(exc, kind)), "{kind} talking to {host}: {cause}"
    )
    failure = _connect_failure(str(cause))
    return form.format(host=host, cause=cause, failure=failure, kind=type(exc).__name__)


def _connect_failure(text: str) -> str:
    if "Connection refused" in text:
        return "connection refused"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "host name not found"
    return text
