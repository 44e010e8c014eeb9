"""The history `simulate --prometheus` replays: kube-state-metrics' node series, read from
Prometheus (or a Thanos, Mimir or Cortex front) in queries that grow with the nodes and the time
chunks, not with the steps (docs/simulate.md, "From Prometheus"). Requests go the API client's
way: transport.py's timeouts, pace.py's retries.
"""

from __future__ import annotations

import base64
import json
import logging
import math
import re
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import unquote, urlsplit

import urllib3

from reconcile.cluster.errors import Action, ApiError, UnreadableAnswer, redact
from reconcile.cluster.pace import Pace, explain
from reconcile.cluster.transport import Connection, Transport
from reconcile.rule.settings import ConfigError, PrometheusAccess

log = logging.getLogger(__name__)
CREATED, LABELS = "kube_node_created", "kube_node_labels"
CHUNK = timedelta(hours=6)  # the time one round of queries covers; halved when refused
RESOLUTION = 60  # seconds at most between a subquery's evaluations (5m lookback: every sample)
QUERY_TIMEOUT, PATIENCE = 120.0, 3600.0  # seconds: one answer, all of them with retries
#: Refusals for size, which a shorter chunk avoids. Prometheus' --query.max-samples (PromQL's
#: engine says it, so Mimir's -querier.max-samples too) and its 11,000 points per series;
#: Thanos store's --store.limits.request-samples/-series (pkg/store: "exceeded samples limit",
#: "exceeded series limit"); Mimir's per-query limits (pkg/util/limiter: "the query exceeded
#: the maximum number of series", "... of chunks", "... the aggregated chunks size limit").
TOO_BIG = re.compile(
    r"would load too many samples|exceeded maximum resolution|exceeded (samples|series|chunks) "
    r"limit|the query exceeded the (maximum number of|aggregated chunks size)"
)


class PrometheusFailed(Exception):
    """A query failed or found nothing: one line, exit 1."""


class History(NamedTuple):
    """Every node life seen, as a range query's series (one point at its first and one at its
    last sample, on the step's grid from `start`), and what reading them cost."""

    series: list[dict[str, Any]]
    end: datetime  # the last step of the grid, at or before the end asked for
    queries: int
    samples: int  # values in the answers
    refined: int  # names whose created value changed within a chunk, queried at the step


def connect(access: PrometheusAccess) -> Transport:
    """A request path to the server; a bad URL, header or file is a ConfigError (exit 2)."""
    parts = urlsplit(access.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"--prometheus: {redact(access.url)!r} is not an http(s) URL; give e.g. "
            "http://prometheus.monitoring:9090"
        )
    inner = access.match.strip()
    if inner and not re.fullmatch(r"\{.*\}", inner):
        raise ConfigError(
            f'--prometheus-match: {inner!r} is not a matcher; write {{cluster="prod-1"}}'
        )
    fixed = dict(_header(h) for h in access.headers)
    user = access.username or unquote(parts.username or "")
    secret = unquote(parts.password or "")
    files = {"--prometheus-bearer-token-file": access.bearer_token_file}
    files["--prometheus-password-file"] = access.password_file

    def credentials(renew: bool = False) -> dict[str, str]:
        """Read the files at every ask: a mounted token rotates."""
        read = {flag: _secret(path, flag) for flag, path in files.items() if path}
        if token := read.get("--prometheus-bearer-token-file"):
            return {**fixed, "authorization": f"Bearer {token}"}
        if user:
            pair = f"{user}:{read.get('--prometheus-password-file', secret)}".encode()
            return {**fixed, "authorization": f"Basic {base64.b64encode(pair).decode()}"}
        return fixed

    credentials()  # a missing file is said now, before any query
    if access.insecure_skip_tls_verify:
        warnings.filterwarnings("ignore", category=urllib3.exceptions.InsecureRequestWarning)
        log.warning(
            "--insecure-skip-tls-verify: %s's certificate is not checked", redact(access.url)
        )
    connection = Connection(
        plain(access.url),
        credentials,
        ca_file=access.ca_file,
        verify=not access.insecure_skip_tls_verify,
    )
    return Transport(connection, request_timeout=QUERY_TIMEOUT)


def plain(url: str) -> str:
    """The URL without credentials: what lines name."""
    parts = urlsplit(url)
    return redact(parts._replace(netloc=parts.netloc.rpartition("@")[2]).geturl().rstrip("/"))


def _header(text: str) -> tuple[str, str]:
    name, colon, value = text.partition(":")
    if not colon or not re.fullmatch(r"[A-Za-z0-9!#$%&'*+.^_`|~-]+", name.strip()):
        raise ConfigError(
            f"--prometheus-header: {text!r} is not `Name: value`; e.g. X-Scope-OrgID: tenant-1"
        )
    return name.strip(), value.strip()


def _secret(path: str, flag: str) -> str:
    try:
        text = Path(path).read_text().strip()
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{flag}: cannot read {path} ({exc}); fix the path") from None
    if not text:
        raise ConfigError(f"{flag}: {path} is empty; put the secret in it")
    return text


class _Reader:
    """The queries of one history: each answer folded into first and last sample times."""

    def __init__(self, server: Transport, access: PrometheusAccess, step: timedelta) -> None:
        self.server, self.step, self.shown = server, step.total_seconds(), plain(access.url)
        self.inner = access.match.strip()[1:-1].strip()
        self.pace = Pace.start(PATIENCE, QUERY_TIMEOUT)
        self.queries = self.samples = 0
        self.lives: dict[tuple[str, str], list[float]] = {}  # (node, created value): first, last
        self.labels: dict[tuple[tuple[str, str], ...], list[float]] = {}  # label_* and node

    def selector(self, metric: str, more: str = "") -> str:
        return f"{metric}{{{', '.join(m for m in (self.inner, more) if m)}}}"

    def ask(self, path: str, query: dict[str, str]) -> list[dict[str, Any]]:
        """One query's result; a size refusal is an ApiError the caller splits on."""
        action = Action("query", f"{self.shown}{path}")
        self.queries += 1

        def call(timeout: float) -> Any:
            response = self.server.request("GET", path, action, query=query, timeout=timeout)
            try:
                return json.loads(response.body)["data"]["result"]
            except (ValueError, KeyError, TypeError):
                raise UnreadableAnswer(
                    f"{action.what} answered no result: not Prometheus' API"
                ) from None

        result = self.pace.retry(call, f"query {action.what}")
        self.samples += sum(len(s.get("values", ())) or 1 for s in result)
        return result

    def instant(self, expression: str, at: float) -> dict[Any, Any]:
        """Each series' value (by its labels), at `at`."""
        result = self.ask("/api/v1/query", {"query": expression, "time": f"{at:.3f}"})
        return {_key(s["metric"]): s["value"][1] for s in result}

    def chunk(self, begin: float, end: float) -> int:
        """Fold in the samples of (begin, end]; how many names were refined."""
        window, every = f"{round(end - begin)}s", f"{min(round(self.step), RESOLUTION)}s"
        created, labels = self.selector(CREATED), self.selector(LABELS)
        last = self.instant(f"max_over_time(timestamp({created})[{window}:{every}])", end)
        for key, value in self.instant(f"last_over_time({created}[{window}])", end).items():
            if key in last:  # else: only a sample before the chunk, within the lookback
                self._fold(self.lives, (dict(key).get("node", ""), value), value, last[key])
        first = self.instant(f"min_over_time(timestamp({labels})[{window}:{every}])", end)
        for key, seen in self.instant(
            f"max_over_time(timestamp({labels})[{window}:{every}])", end
        ).items():
            kept = tuple((k, v) for k, v in key if k == "node" or k.startswith("label_"))
            self._fold(self.labels, kept, first.get(key, seen), seen)
        changed = {
            dict(k).get("node", "") for k in self.instant(f"changes({created}[{window}]) > 0", end)
        }
        if changed:
            self.refine(sorted(changed), begin, end)
        return len(changed)

    def refine(self, names: list[str], begin: float, end: float) -> None:
        """The names whose created value changed in the chunk, at the step: each value's first
        and last sample (their times, not the step's, so the lookback-delta does not matter)."""
        nodes = "|".join(n.replace(".", "\\\\.") for n in names)  # node names: [a-z0-9.-]
        selector = self.selector(CREATED, f'node=~"{nodes}"')
        grid = {"start": f"{begin + self.step:.3f}", "end": f"{end:.3f}", "step": f"{self.step:g}s"}
        times = {
            _key(s["metric"]): dict(s["values"])
            for s in self.ask("/api/v1/query_range", {"query": f"timestamp({selector})", **grid})
        }
        for series in self.ask("/api/v1/query_range", {"query": selector, **grid}):
            stamps, node = times.get(_key(series["metric"]), {}), series["metric"].get("node", "")
            for at, value in series["values"]:
                if at in stamps:
                    self._fold(self.lives, (node, value), stamps[at], stamps[at])

    @staticmethod
    def _fold(into: dict[Any, list[float]], key: Any, first: str | float, last: str) -> None:
        """Widen the key's span to the times `first` and `last` (as Prometheus writes them)."""
        span = into.setdefault(key, [float(first), float(last)])
        span[0], span[1] = min(span[0], float(first)), max(span[1], float(last))


def _key(metric: dict[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in metric.items() if k != "__name__"))


def read_history(
    server: Transport,
    access: PrometheusAccess,
    start: datetime,
    end: datetime,
    step: timedelta,
    say: Callable[[str], None],
) -> History:
    """Every node life between start and end (on the step's grid), chunk by chunk; a chunk
    refused for its size is halved, said once. PrometheusFailed: a query failed, or no node."""
    reader = _Reader(server, access, step)
    seconds = step.total_seconds()
    chunk = first = math.ceil(CHUNK.total_seconds() / seconds) * seconds
    stop = start.timestamp() + (end - start) // step * seconds  # the grid's last step
    at, refined = start.timestamp() - seconds, 0  # from a step before: the first step's sample
    while at < stop:
        try:
            refined += reader.chunk(at, min(at + chunk, stop))
        except ApiError as exc:
            if not TOO_BIG.search(exc.message) or chunk <= 2 * seconds:
                raise PrometheusFailed(explain(exc)) from None
            if chunk == first:
                say(
                    f"Prometheus refused a query for its size ({exc.message}); asking for less time"
                )
            chunk = math.ceil(chunk / 2 / seconds) * seconds
            continue
        except Exception as exc:  # transport failures, the deadline, unreadable answers
            raise PrometheusFailed(f"cannot query {reader.shown}: {explain(exc)}") from None
        at += chunk
    if not reader.lives:
        raise PrometheusFailed(
            f"{reader.shown}: no {CREATED} series from {start:%Y-%m-%dT%H:%M:%SZ} to "
            f"{end:%Y-%m-%dT%H:%M:%SZ}{' matching ' + access.match if access.match else ''}; check "
            f"that kube-state-metrics' --resources includes nodes, that no --metric-denylist drops "
            f"{CREATED}, and that Prometheus scrapes it"
        )
    series = _series(reader, start.timestamp())
    return History(
        series, datetime.fromtimestamp(stop, UTC), reader.queries, reader.samples, refined
    )


def _series(reader: _Reader, origin: float) -> list[dict[str, Any]]:
    """The lives and label sets as a range query's series: first and last on the grid."""

    def points(span: list[float], value: str) -> list[list[Any]]:
        return [
            [origin + math.ceil(round(t - origin, 3) / reader.step) * reader.step, value]
            for t in span
        ]

    series = [
        {"metric": {"__name__": CREATED, "node": node}, "values": points(span, value)}
        for (node, value), span in reader.lives.items()
    ]
    return series + [
        {"metric": {"__name__": LABELS, **dict(key)}, "values": points(span, "1")}
        for key, span in reader.labels.items()
    ]
