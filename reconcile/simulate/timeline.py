"""Node timelines for `node-holder simulate`: which nodes existed when, read from files.

YAML and JSON timelines, kubectl's own output (Nodes, Karpenter NodeClaims, and NodePools for
their own hold settings), and the answer of a Prometheus range query of kube-state-metrics'
`kube_node_created` (with `kube_node_labels` for the labels the settings use), saved or as
`simulate --prometheus` fetched it, so a cluster's data needs no conversion: docs/simulate.md,
"Timeline formats". Every problem is one TimelineError line (exit 2) naming the file and, for a bad
value, the record: `history.yaml: nodes[12] (name ip-10-0-1-2): created 'noon' is not an
RFC 3339 time; ...`. Syntax errors name the line the parser stopped at.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from functools import reduce
from itertools import groupby
from operator import itemgetter, or_
from pathlib import Path
from typing import Any, NamedTuple

import yaml

from reconcile.rule.names import DNS_SUBDOMAIN, label_value_problem, qualified_name_problem
from reconcile.rule.nodes import NodePoolOwn, NodePoolSettings, nodepool_settings
from reconcile.rule.settings import (
    DEFAULT_GROUP_LABEL,
    NODE_HOLD,
    NODE_MAX_HOLD,
    ConfigError,
    format_duration,
    format_time,
)

ENTRY_KEYS = ("name", "created", "deleted", "labels", "annotations")
TOP_KEYS = ("nodes", "start", "end", "description")
TIME_EXAMPLE = "2024-05-14T08:30:00Z"
#: kube-state-metrics: the node's creationTimestamp as the value; its labels, as ksm_label()
#: names them (with --metric-labels-allowlist=nodes=[karpenter.sh/nodepool,...])
CREATED, LABELS = "kube_node_created", "kube_node_labels"

#: Said of a kubectl list read without Prometheus' history
LIVE = (
    "a live list has no deleted nodes, so launches avoided is a lower bound; replay the "
    "history with --prometheus URL (docs/simulate.md)"
)
Fields = dict[str, tuple[Any, str]]  # a record's raw values, each with the word its file uses


class TimelineError(ConfigError):
    """A timeline file that cannot be replayed: one line naming the file and the record."""


@dataclass(frozen=True)
class TimelineNode:
    """One node's life: it exists from `created` until `deleted` (None: still there), with
    the annotations it has when it appears (docs/simulate.md, "Timeline formats")."""

    name: str
    created: datetime
    deleted: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def overlaps(self, other: TimelineNode) -> bool:
        """Whether two lives with the same name overlap (so they are the same node)."""
        return (self.deleted is None or other.created < self.deleted) and (
            other.deleted is None or self.created < other.deleted
        )


@dataclass(frozen=True)
class Timeline:
    """The nodes of one file, or of all of them merged."""

    nodes: Sequence[TimelineNode]
    sources: tuple[str, ...] = ()
    start: datetime | None = None  # `start:` in a file; a Prometheus answer's first sample
    end: datetime | None = None  # `end:` in a file; a Prometheus answer's last sample
    notes: tuple[str, ...] = ()  # what was skipped or assumed, said once at the top
    #: Each NodePool of a NodePool list (`kubectl get nodepools`), with its own hold settings
    nodepool_settings: NodePoolSettings = field(default_factory=dict)
    #: A Prometheus answer's step (removals known to within it); None: not read from Prometheus
    step: timedelta | None = None


class _Problem(Exception):
    """A bad record or value; the file's name is put before it once it is known."""


def iso(moment: datetime) -> str:
    """RFC 3339 UTC, to the millisecond where a file's time has a fraction."""
    return format_time(moment, fraction=bool(moment.microsecond))


def parse_time(raw: Any) -> datetime:
    """An RFC 3339 time with a zone (Z or an offset), as UTC; ValueError says why not.
    (The YAML loader keeps times as text, so every time comes here as text.)"""
    text = raw.strip() if isinstance(raw, str) else ""
    try:
        if not re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}", text):
            raise ValueError(text)
        moment = datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise ValueError("is not an RFC 3339 time") from None
    if moment.tzinfo is None:
        raise ValueError("has no time zone (add Z for UTC)")
    return moment.astimezone(UTC)


# --- reading ---------------------------------------------------------------------------


def load_timeline(
    paths: Sequence[str],
    label_keys: Iterable[str] = (DEFAULT_GROUP_LABEL,),
    fetched: tuple[str, list[Any], Grid] | None = None,
) -> Timeline:
    """Read and merge timeline files (`-` is standard input), or the series `simulate
    --prometheus` fetched (its URL, its series, their grid). Prometheus answers are read
    together (kube_node_labels may come in a file of its own), with the labels `label_keys`
    from kube_node_labels."""
    sources = tuple("<stdin>" if p == "-" else p for p in paths)
    documents = [
        (name, _load(_read(path), name)) for path, name in zip(paths, sources, strict=True)
    ]
    answers = [(name, data) for name, data in documents if _is_answer(data)]
    parsed = [_parse(data, name) for name, data in documents if not _is_answer(data)]
    if answers:
        parsed.append(_prometheus(answers, label_keys))
    if fetched:
        sources += fetched[:1]
        parsed.append(_prometheus([fetched[:2]], label_keys, fetched[2]))
    return _combine(parsed, sources)


def _combine(parsed: Sequence[Timeline], sources: tuple[str, ...]) -> Timeline:
    """One timeline of several read, the same node (by name and time) once."""
    nodes = _merge(n for p in parsed for n in p.nodes)
    step = next((p.step for p in parsed if p.step), None)  # Prometheus: nodes a live list lacks
    if not nodes:
        raise TimelineError(
            f"{', '.join(sources)}: no nodes in the timeline; list at least one node "
            "(see docs/simulate.md)"
        )
    return Timeline(
        nodes=tuple(sorted(nodes, key=lambda n: (n.created, n.name))),
        sources=sources,
        start=min((p.start for p in parsed if p.start), default=None),
        end=max((p.end for p in parsed if p.end), default=None),
        notes=tuple(n for p in parsed for n in p.notes if n != LIVE or not step) + _unread(nodes),
        nodepool_settings={k: v for p in parsed for k, v in p.nodepool_settings.items()},
        step=step,
    )


def _unread(nodes: Iterable[TimelineNode]) -> tuple[str, ...]:
    """Nodes that carry a NodePool's hold settings: not read there, as a run does not read them."""
    count = sum(1 for n in nodes if NODE_HOLD in n.annotations or NODE_MAX_HOLD in n.annotations)
    if not count:
        return ()
    return (
        f"{count} node(s) carry {NODE_HOLD} or {NODE_MAX_HOLD}, which are not read on nodes: "
        "give the NodePools' own as a NodePool list (kubectl get nodepools -o json), or a "
        "column's nodepool:NAME=DURATION",
    )


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TimelineError(
            f"{path}: no such file; pass a timeline file (YAML or JSON) or a Prometheus "
            "answer, e.g. reconcile/examples/batch-day.yaml"
        ) from None
    except OSError as exc:
        raise TimelineError(f"{path}: cannot read it ({exc.strerror}); check the path") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TimelineError(f"{path}:{line}: not UTF-8 text; save the timeline as UTF-8") from None


def _parse(data: Any, name: str) -> Timeline:
    """One file's nodes, start and end and notes; every problem a TimelineError."""
    try:
        return _interpret(data)
    except _Problem as problem:
        raise TimelineError(f"{name}: {problem}") from None


def _at(record: str, message: str) -> _Problem:
    return _Problem(f"{record}: {message}" if record else message)


# --- YAML and JSON -------------------------------------------------------------------


_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it: 6x faster


class _Loader(_SAFE):  # type: ignore[misc, valid-type]
    """A safe loader that keeps timestamps as text, so every time goes through one parser."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load(text: str, name: str) -> Any:
    """JSON by the extension `.json` or a first `{` or `[`; else YAML. A syntax error names
    the line the parser stopped at."""
    suffix = Path(name).suffix.lower()
    if not text.strip():
        raise TimelineError(
            f"{name}: empty, most likely a failed download (`curl -f` leaves an empty file on "
            "an HTTP error); fetch it again and check that command's exit status"
        )
    if suffix == ".json" or (suffix not in (".yaml", ".yml") and text.lstrip()[:1] in "{["):
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
                raise TimelineError(
                    f"{name}: the JSON stops before its end (line {exc.lineno}), most likely a "
                    "cut download; fetch it again"
                ) from None
            raise TimelineError(
                f"{name}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno}); "
                "fix the JSON there"
            ) from None
    try:
        return yaml.load(text, Loader=_Loader)  # a safe loader: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        raise TimelineError(
            f"{name}:{mark.line + 1 if mark else 1}: not valid YAML: "
            f"{f'{problem} ({context})' if context else problem}; fix the YAML there "
            "(quote values that contain ': ' or ' #')"
        ) from None


def _interpret(data: Any) -> Timeline:
    if isinstance(data, list):
        return Timeline(_entries(_records(data, "")))
    if not isinstance(data, dict):
        raise _Problem(
            "not a timeline: expected a mapping with a `nodes:` list (see docs/simulate.md), "
            "the output of `kubectl get nodes -o json`, or a Prometheus range query's answer"
        )
    if data.get("kind") == "NodePool":  # one, as `kubectl get nodepool batch -o json` shows it
        return _kube_list({"items": [data]})
    if "items" in data or str(data.get("kind", "")).endswith("List"):
        return _kube_list(data)
    if "nodes" not in data:
        raise _Problem(
            "not a timeline: no `nodes:` list, no kubectl `items:` and no Prometheus `data:`; "
            "write `nodes: [{name, created, deleted, labels}]` (see docs/simulate.md)"
        )
    _known_keys(data, "", TOP_KEYS, f"; a timeline has only {', '.join(TOP_KEYS)}")
    if not isinstance(data["nodes"], list):
        raise _Problem("`nodes` must be a list of entries like {name, created}")
    start, end = _time(data.get("start"), "start", ""), _time(data.get("end"), "end", "")
    if start and end and end <= start:
        raise _Problem(f"end {iso(end)} is not after start {iso(start)}; fix one")
    return Timeline(_entries(_records(data["nodes"], "nodes")), (), start, end)


def _known_keys(data: dict, record: str, keys: Sequence[str], fix: str) -> None:
    unknown = next((k for k in data if k not in keys), None)
    if unknown is not None:
        raise _at(record, f"unknown key {unknown!r}{fix}")


def _records(items: list[Any], base: str) -> Iterable[tuple[str, Fields]]:
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _Problem(f"{base}[{i}]: each node entry must be a mapping like {{name, created}}")
        name = item.get("name")
        record = f"{base}[{i}]" + (f" (name {name})" if isinstance(name, str) and name else "")
        _known_keys(item, record, ENTRY_KEYS, f" in a node entry; use {', '.join(ENTRY_KEYS)}")
        yield record, {key: (item.get(key), key) for key in ENTRY_KEYS}


# --- the one check of every record ----------------------------------------------------------


def _entries(records: Iterable[tuple[str, Fields]]) -> list[TimelineNode]:
    """Entries of a timeline file; a name listed twice must not overlap its earlier life."""
    nodes: list[TimelineNode] = []
    seen: dict[str, list[tuple[TimelineNode, str]]] = defaultdict(list)
    for record, fields in records:
        node = _node(record, fields)
        for other, first in seen[node.name]:
            if node.overlaps(other):
                raise _at(
                    record,
                    f"node {node.name!r} is listed twice with overlapping lifetimes (first at "
                    f"{first}); a name may come back only after the earlier node was deleted",
                )
        seen[node.name].append((node, record))
        nodes.append(node)
    return nodes


def _node(record: str, fields: Fields) -> TimelineNode:
    name = _name(*fields["name"], record)
    created, deleted = _time(*fields["created"], record), _time(*fields["deleted"], record)
    if created is None:
        key = fields["created"][1]
        raise _at(record, f"no `{key}` time; add `{key}: {TIME_EXAMPLE}`")
    if deleted is not None and deleted < created:
        raise _at(
            record,
            f"deleted {iso(deleted)} is before created {iso(created)}; swap them or fix the times",
        )
    labels = _mapping(*fields["labels"], record, "{karpenter.sh/nodepool: batch}")
    given = fields.get("annotations", (None, "annotations"))
    annotations = _mapping(*given, record, "{karpenter.sh/do-not-disrupt: 'true'}")
    return TimelineNode(name, created, deleted, labels, annotations)


def _name(raw: Any, key: str, record: str) -> str:
    if raw is None or raw == "":
        raise _at(record, f"no {key}; add `{key}: <node name>`")
    if not isinstance(raw, str):
        raise _at(record, f"{key} {raw!r} is not text; quote it")
    if len(raw) > 253 or not re.fullmatch(DNS_SUBDOMAIN, raw):
        raise _at(
            record,
            f"{raw!r} is not a valid node name; use lowercase letters, digits, '-' and '.' "
            "(like ip-10-0-1-2.ec2.internal)",
        )
    return raw


def _time(raw: Any, key: str, record: str) -> datetime | None:
    if raw is None or raw == "":
        return None
    try:
        return parse_time(raw)
    except ValueError as exc:
        raise _at(
            record, f"{key} {str(raw)!r} {exc}; write an RFC 3339 time such as {TIME_EXAMPLE}"
        ) from None


def _mapping(raw: Any, key: str, record: str, example: str) -> dict[str, str]:
    """Labels or annotations: qualified keys, text values (and label values as Kubernetes
    allows them)."""
    kind = key.removesuffix("s")
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _at(record, f"{key} must be a mapping like {example}")
    for k, value in raw.items():
        if not isinstance(k, str) or (problem := qualified_name_problem(k)):
            why = problem if isinstance(k, str) else "not text"
            raise _at(record, f"{kind} key {k!r} is not valid ({why})")
        if not isinstance(value, str):
            raise _at(record, f"{kind} {k} has value {value!r}, which is not text; quote it")
        if kind == "label" and (problem := label_value_problem(value)):
            raise _at(record, f"label {k}={value!r}: the value {problem}")
    return dict(raw)


# --- kubectl output ----------------------------------------------------------------------


def _kube_list(data: dict[str, Any]) -> Timeline:
    """Nodes and NodeClaims from one kubectl list, and what was left out."""
    items = data.get("items")
    if not isinstance(items, list):
        raise _Problem("`items` must be a list (kubectl get ... -o json)")
    list_kind = str(data.get("kind", ""))
    default_kind = list_kind.removesuffix("List") if list_kind != "List" else ""
    nodes: list[TimelineNode] = []
    pools: dict[str, NodePoolOwn | None] = {}
    claims = 0
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise _Problem(f"items[{i}]: each item must be a Kubernetes object")
        kind = str(item.get("kind") or default_kind)
        meta = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
        record = f"items[{i}] ({kind} {meta.get('name')})" if meta.get("name") else f"items[{i}]"
        if kind not in ("Node", "NodeClaim", "NodePool"):
            raise _at(
                record,
                f"kind {kind or '(none)'} is not Node, NodeClaim or NodePool; use `kubectl get "
                "nodes -o json`, `kubectl get nodeclaims -o json` or `kubectl get nodepools "
                "-o json`",
            )
        if kind == "NodePool":  # its own hold settings, for the nodes of that pool
            _name(meta.get("name"), "metadata.name", record)
            _mapping(meta.get("annotations"), "annotations", record, "{}")
            pools.update(nodepool_settings([item]))
            continue
        fields = _kube_fields(item, meta, kind)
        nodes += [_node(record, fields)] if fields else []
        claims += fields is None
    notes = [f"{claims} NodeClaim(s) without status.nodeName left out (no node)"] if claims else []
    notes += [LIVE] if nodes else []
    return Timeline(nodes, notes=tuple(notes), nodepool_settings=pools)


def _kube_fields(item: dict[str, Any], meta: dict[str, Any], kind: str) -> Fields | None:
    """A Node as kubectl shows it, or a Karpenter v1 NodeClaim: its node appeared when the
    claim became Registered. No annotations: today's are not those it had when it appeared
    (a NodePool's hold settings are read from a NodePool list)."""
    fields: Fields = {
        "name": (meta.get("name"), "metadata.name"),
        "created": (meta.get("creationTimestamp"), "creationTimestamp"),
        "deleted": (meta.get("deletionTimestamp"), "deletionTimestamp"),
        "labels": (meta.get("labels"), "labels"),
    }
    if kind == "Node":
        return fields
    status = item.get("status") or {}
    if not status.get("nodeName"):
        return None
    fields["name"] = (status["nodeName"], "status.nodeName")
    for condition in status.get("conditions") or ():
        if (
            isinstance(condition, dict)
            and condition.get("type") == "Registered"
            and condition.get("status") == "True"
            and condition.get("lastTransitionTime")
        ):
            fields["created"] = (condition["lastTransitionTime"], "Registered lastTransitionTime")
    return fields


def _merge(nodes: Iterable[TimelineNode]) -> list[TimelineNode]:
    """Same name and overlapping lifetimes (from several files or kinds): one node."""
    by_name: dict[str, list[TimelineNode]] = defaultdict(list)
    for node in nodes:
        group = by_name[node.name]
        i = next((i for i, other in enumerate(group) if node.overlaps(other)), None)
        if i is None:
            group.append(node)
            continue
        a = group[i]
        deleted = [t for t in (a.deleted, node.deleted) if t is not None]  # one file saw it go
        group[i] = replace(
            a,
            created=min(a.created, node.created),
            deleted=max(deleted, default=None),
            labels={**a.labels, **node.labels},
            annotations={**a.annotations, **node.annotations},
        )
    return [n for group in by_name.values() for n in group]


# --- a Prometheus range query's answer ---------------------------------------------------


def _is_answer(data: Any) -> bool:
    """The HTTP API's answer (`{"status": ..., "data": ...}`) or `promtool query range -o
    json`'s (the matrix alone: a list of `{metric, values}`)."""
    if isinstance(data, dict):
        return "status" in data and ("data" in data or "error" in data)
    return (
        bool(data) and isinstance(data, list) and isinstance(data[0], dict) and "metric" in data[0]
    )


def _matrix(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if data.get("status") != "success":
        raise _Problem(
            f"Prometheus answered {data.get('status')!r}: {data.get('errorType', '')} "
            f"{data.get('error', '')}; fix the query and save its answer again"
        )
    body = data.get("data")
    kind = body.get("resultType") if isinstance(body, dict) else None
    if kind is None:
        raise _Problem(
            "not a range query's answer (no data.resultType); save the JSON that "
            "/api/v1/query_range answers (docs/simulate.md, 'From Prometheus')"
        )
    if kind != "matrix":
        raise _Problem(
            f"not a range query: resultType is {kind!r}, not 'matrix' (/api/v1/query answers "
            "one instant); ask /api/v1/query_range with start, end and step"
        )
    if not isinstance(body.get("result"), list):
        raise _Problem("data.result is not a list of series; save the answer unchanged")
    return body["result"]


def ksm_label(key: str) -> str:
    """kube-state-metrics' name for a node label in kube_node_labels (its labelName)."""
    name = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"[^a-zA-Z0-9_]", "_", key))
    return f"label_{name.lower()}"


def _series(
    i: int, series: Any, wanted: Mapping[str, str]
) -> tuple[str, str, dict[str, str], list[tuple[str, float, float]]]:
    """A series' metric, node, the labels `wanted` names (kube-state-metrics' name: the
    label's) and runs of one value: (value, first sample, last sample). A node deleted and
    created again under one name goes on with a new value."""
    metric = series.get("metric") if isinstance(series, dict) else None
    metric = metric if isinstance(metric, dict) else {}
    what, node = metric.get("__name__"), metric.get("node")
    record = f"result[{i}] ({what or ''}" + (f'{{node="{node}"}})' if node else ")")
    if what not in (CREATED, LABELS) or not node:
        wrong = "no node label" if what in (CREATED, LABELS) else f"not {CREATED} or {LABELS}"
        raise _at(record, f"{wrong}: query kube-state-metrics' series themselves, unaggregated")
    name = _name(node, "node", record)
    labels = _labels(metric, wanted, record)
    values = series.get("values")
    if not isinstance(values, list) or not values:
        raise _at(record, "no `values`: not a range query's series; ask /api/v1/query_range")
    try:
        runs = [list(run) for _, run in groupby(values, key=itemgetter(1))]
        return what, name, labels, [(r[0][1], float(r[0][0]), float(r[-1][0])) for r in runs]
    except (TypeError, IndexError, KeyError, ValueError):
        raise _at(
            record, 'each sample must be [time, "value"]; save the answer unchanged'
        ) from None


def _labels(metric: Mapping[str, str], wanted: Mapping[str, str], record: str) -> dict[str, str]:
    """The labels `wanted` names, read under their kube-state-metrics names; none of several
    labels that kube-state-metrics could not tell apart."""
    labels = {key: metric[ksm] for ksm, key in wanted.items() if ksm in metric}
    for ksm, key in wanted.items():
        if clash := sorted(k for k in metric if re.fullmatch(f"{ksm}_conflict\\d+", k)):
            raise _at(
                record,
                f"kube-state-metrics renamed colliding labels to {', '.join(clash)}: several "
                f"node labels read {ksm}, so none of them is surely {key}; allowlist only {key} "
                "in --metric-labels-allowlist",
            )
    for key, value in labels.items():
        if problem := label_value_problem(value):
            raise _at(record, f"the label {key} ({ksm_label(key)}={value!r}) {problem}")
    return labels


class Grid(NamedTuple):
    """The range and step a history was asked for (`simulate --prometheus`)."""

    start: datetime
    end: datetime
    step: timedelta


def _prometheus(
    answers: list[tuple[str, Any]],
    label_keys: Iterable[str],
    grid: Grid | None = None,
) -> Timeline:
    """Each node's life from kube_node_created: created is the value, deleted the last sample
    plus the step (or the next life of its name, if sooner), unless the series is still there
    at the last sample of the range. Its labels: those of kube_node_labels at the time."""
    wanted = {ksm_label(key): key for key in label_keys}
    lives: dict[tuple[str, float], tuple[float, float]] = {}  # (node, created): samples' span
    tags: dict[str, list[tuple[float, float, dict]]] = defaultdict(list)  # node: span, labels
    stamps: set[int] = set()  # milliseconds: the step is their differences' greatest divisor
    for source, data in answers:
        try:
            for i, series in enumerate(_matrix(data)):
                what, name, labels, runs = _series(i, series, wanted)
                if what == LABELS:
                    tags[name] += [(first, last, labels) for _, first, last in runs]
                    continue
                stamps.update(round(float(v[0]) * 1000) for v in series["values"][:2])
                for value, first, last in runs:
                    created = _epoch(value, f'result[{i}] ({what}{{node="{name}"}})')
                    stamps.add(round(last * 1000))
                    was = lives.get((name, created), (first, last))
                    lives[name, created] = (min(was[0], first), max(was[1], last))
        except _Problem as problem:
            raise TimelineError(f"{source}: {problem}") from None
    names = ", ".join(source for source, _ in answers)
    if not lives:
        raise TimelineError(
            f"{names}: no {CREATED} series; query "
            f'{{__name__=~"{CREATED}|{LABELS}"}} (docs/simulate.md, "From Prometheus")'
        )
    start, end, step = grid or _grid(stamps, names)
    nodes, later = [], {}  # the next life's creation, by name
    for (name, created), (first, last) in sorted(lives.items(), reverse=True):
        born, seen = (datetime.fromtimestamp(t, UTC) for t in (created, last))
        gone = None if seen >= end else min(seen + step, later.get(name, seen + step))
        later[name] = born
        labels = [tag for f, l_, tag in tags[name] if f <= last and first <= l_]
        nodes.append(TimelineNode(name, born, gone and max(born, gone), reduce(or_, labels, {})))
    note = (
        f"read from Prometheus: a removal is the node's last sample plus the step "
        f"({format_duration(step)}), so it is known to within {format_duration(step)}"
    )
    return Timeline(nodes, (), start, end, notes=(note,), step=step)


def _grid(stamps: set[int], names: str) -> Grid:
    """A saved answer's range and step: its first and last sample, their greatest divisor."""
    start, end = min(stamps), max(stamps)
    step = timedelta(milliseconds=reduce(math.gcd, (t - start for t in stamps)))
    if not step:
        raise TimelineError(
            f"{names}: every sample is at one instant, so the step is unknown; query a range "
            "of several steps"
        )
    return Grid(*(datetime.fromtimestamp(t / 1000, UTC) for t in (start, end)), step)


def _epoch(value: Any, record: str) -> float:
    """A creation time as kube_node_created's value: seconds since 1970."""
    try:
        seconds = float(value)
        datetime.fromtimestamp(seconds, UTC)
    except (TypeError, ValueError, OverflowError, OSError):
        seconds = math.nan
    if not math.isfinite(seconds) or seconds <= 0:
        raise _at(
            record,
            f"value {value!r} is not a creation time in seconds since 1970; query {CREATED} itself",
        )
    return seconds
