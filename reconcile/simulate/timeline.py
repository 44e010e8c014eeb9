"""Node timelines for `node-holder simulate`: which nodes existed when, read from files.

YAML, JSON and CSV timelines, and kubectl's own output (Nodes, Karpenter NodeClaims, node
Events) so a cluster's data needs no conversion: docs/simulate.md, "Timeline formats".
Every problem is one TimelineError line `FILE:LINE: what is wrong; how to fix` (exit 2):
each format turns its records into fields that know where they sit (a path in the document,
or a CSV line), and one function checks them all; a bad value's path is looked up in the
file composed as YAML (JSON is YAML too).
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from reconcile.rule.names import DNS_SUBDOMAIN, label_value_problem, qualified_name_problem
from reconcile.rule.settings import NODE_HOLD, NODE_MAX_HOLD, ConfigError, format_time

ENTRY_KEYS = ("name", "created", "deleted", "labels", "annotations")  # CSV's columns too
TOP_KEYS = ("nodes", "start", "end", "description")
REGISTERED = frozenset({"RegisteredNode"})  # node lifecycle controller: "Registered Node x"
REMOVED = frozenset({"RemovingNode", "DeletingNode"})  # "Removing Node x from Controller"
TIME_EXAMPLE = "2024-05-14T08:30:00Z"
_EARLIEST, _LATEST = datetime.min.replace(tzinfo=UTC), datetime.max.replace(tzinfo=UTC)

Where = tuple[str | int, ...]  # where a value sits: ("nodes", 3, "created"), or (CSV line, key)
Fields = dict[str, tuple[Any, Where]]  # a record's raw values, each with where it sits


class TimelineError(ConfigError):
    """A timeline file that cannot be replayed: one line naming the file and line."""


@dataclass(frozen=True)
class TimelineNode:
    """One node's life: it exists from `created` until `deleted` (None: still there), with
    the annotations it has when it appears (docs/simulate.md, "Timeline formats")."""

    name: str
    created: datetime | None  # None: existed before the timeline (only a removal was seen)
    deleted: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def overlaps(self, other: TimelineNode) -> bool:
        """Whether two lives with the same name overlap (so they are the same node)."""
        return (self.created or _EARLIEST) < (other.deleted or _LATEST) and (
            other.created or _EARLIEST
        ) < (self.deleted or _LATEST)


@dataclass(frozen=True)
class Timeline:
    """The nodes of one file, or of all of them merged."""

    nodes: Sequence[TimelineNode]
    sources: tuple[str, ...] = ()
    start: datetime | None = None  # `start:` in a file
    end: datetime | None = None  # `end:` in a file
    notes: tuple[str, ...] = ()  # what was skipped or assumed, said once at the top


class _Problem(Exception):
    """A bad value at `where`; turned into `FILE:LINE: message` once the line is known.
    For a duplicate, `first` is where the name appeared before (`{first}` in the message)."""

    def __init__(self, where: Where, message: str, first: Where | None = None) -> None:
        super().__init__(message)
        self.where, self.message, self.first = where, message, first


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


def load_timeline(paths: Sequence[str]) -> Timeline:
    """Read and merge timeline files (`-` is standard input)."""
    sources = tuple("<stdin>" if p == "-" else p for p in paths)
    parsed = [_parse(_read(path), name) for path, name in zip(paths, sources, strict=True)]
    nodes = _merge(n for p in parsed for n in p.nodes)
    if not nodes:
        raise TimelineError(
            f"{', '.join(sources)}: no nodes in the timeline; list at least one node "
            "(see docs/simulate.md)"
        )
    return Timeline(
        nodes=tuple(sorted(nodes, key=lambda n: (n.created or _EARLIEST, n.name))),
        sources=sources,
        start=min((p.start for p in parsed if p.start), default=None),
        end=max((p.end for p in parsed if p.end), default=None),
        notes=tuple(note for p in parsed for note in p.notes),
    )


def _read(path: str) -> str:
    if path == "-":
        return sys.stdin.read()
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise TimelineError(
            f"{path}: no such file; pass a timeline file (YAML, JSON or CSV), "
            "e.g. reconcile/examples/batch-day.yaml"
        ) from None
    except OSError as exc:
        raise TimelineError(f"{path}: cannot read it ({exc.strerror}); check the path") from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TimelineError(
            f"{path}:{line}: not UTF-8 text; save the timeline as UTF-8 YAML, JSON or CSV"
        ) from None


def _format(text: str, name: str) -> str:
    """From the extension, else the content (JSON starts with `{` or `[`; CSV's first line
    is a header starting `name,`)."""
    known = {".yaml": "yaml", ".yml": "yaml", ".json": "json", ".csv": "csv"}
    if fmt := known.get(Path(name).suffix.lower()):
        return fmt
    if text.lstrip()[:1] in ("{", "["):
        return "json"
    first = next((s for s in text.splitlines() if s.strip() and s.strip()[0] != "#"), "")
    return "csv" if re.match(r"^\s*\"?name\"?\s*,", first) else "yaml"


def _parse(text: str, name: str) -> Timeline:
    """One file's nodes, start, end and notes; every problem a TimelineError with its line."""
    fmt = _format(text, name)
    try:
        if fmt == "csv":
            return Timeline(_entries(_csv(text, name)))
        return _interpret(_load_json(text, name) if fmt == "json" else _load_yaml(text, name))
    except _Problem as problem:
        line_of = _lines(text) if fmt != "csv" else lambda where: where[0]
        where, message = line_of(problem.where), problem.message
        if problem.first is not None:
            first = line_of(problem.first)
            message = message.replace("{first}", f"line {first}" if first else "earlier")
        place = f"{name}:{where}" if where else f"{name}: {_path_text(problem.where)}"
        raise TimelineError(f"{place}: {message}") from None


# --- YAML and JSON -------------------------------------------------------------------


_SAFE = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's, where PyYAML has it: 6x faster


class _Loader(_SAFE):  # type: ignore[misc, valid-type]
    """A safe loader that keeps timestamps as text, so every time goes through one parser."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load_yaml(text: str, name: str) -> Any:
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


def _load_json(text: str, name: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise TimelineError(
            f"{name}:{exc.lineno}: not valid JSON: {exc.msg} (column {exc.colno}); "
            "fix the JSON there"
        ) from None


def _lines(text: str) -> Callable[[Where], int | None]:
    """The line of the deepest node along a path that exists (YAML and JSON alike)."""
    try:
        root = yaml.compose(text, Loader=_SAFE)
    except yaml.YAMLError:
        root = None  # JSON that YAML 1.1 cannot read: the message names the path instead

    def line_of(where: Where) -> int | None:
        node, best = root, (root.start_mark.line + 1 if root is not None else None)
        for step in where:
            if isinstance(node, yaml.MappingNode) and isinstance(step, str):
                pair = next(((k, v) for k, v in node.value if k.value == step), None)
                if pair is None:
                    return best
                node, best = pair[1], pair[0].start_mark.line + 1
            elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
                if not 0 <= step < len(node.value):
                    return best
                node = node.value[step]
                best = node.start_mark.line + 1
            else:
                return best
        return best

    return line_of


def _path_text(where: Where) -> str:
    text = ""
    for step in where:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text or "top level"


def _interpret(data: Any) -> Timeline:
    if isinstance(data, list):
        return Timeline(_entries(_fields(data, ())))
    if not isinstance(data, dict):
        raise _Problem(
            (),
            "not a timeline: expected a mapping with a `nodes:` list (see docs/simulate.md), "
            "or the output of `kubectl get nodes -o json`",
        )
    if "items" in data or str(data.get("kind", "")).endswith("List"):
        return _kube_list(data)
    if "nodes" not in data:
        raise _Problem(
            (),
            "not a timeline: no `nodes:` list and no kubectl `items:`; write "
            "`nodes: [{name, created, deleted, labels}]` (see docs/simulate.md)",
        )
    _known_keys(data, (), TOP_KEYS, f"; a timeline has only {', '.join(TOP_KEYS)}")
    if not isinstance(data["nodes"], list):
        raise _Problem(("nodes",), "`nodes` must be a list of entries like {name, created}")
    start, end = _time(data.get("start"), ("start",)), _time(data.get("end"), ("end",))
    if start and end and end <= start:
        raise _Problem(("end",), f"end {iso(end)} is not after start {iso(start)}; fix one")
    return Timeline(_entries(_fields(data["nodes"], ("nodes",))), (), start, end)


def _known_keys(data: dict, where: Where, keys: Sequence[str], fix: str) -> None:
    unknown = next((k for k in data if k not in keys), None)
    if unknown is not None:
        raise _Problem((*where, str(unknown)), f"unknown key {unknown!r}{fix}")


def _fields(items: list[Any], base: Where) -> Iterator[Fields]:
    for i, item in enumerate(items):
        where = (*base, i)
        if not isinstance(item, dict):
            raise _Problem(where, "each node entry must be a mapping like {name: x, created: T}")
        _known_keys(item, where, ENTRY_KEYS, f" in a node entry; use {', '.join(ENTRY_KEYS)}")
        yield {key: (item.get(key), (*where, key)) for key in ENTRY_KEYS}


# --- the one check of every record ----------------------------------------------------------


def _entries(records: Iterable[Fields]) -> list[TimelineNode]:
    """Entries of a timeline file; a name listed twice must not overlap its earlier life."""
    nodes: list[TimelineNode] = []
    seen: dict[str, list[tuple[TimelineNode, Where]]] = defaultdict(list)
    for fields in records:
        node = _node(fields)
        for other, where in seen[node.name]:
            if node.overlaps(other):
                raise _Problem(
                    fields["name"][1],
                    f"node {node.name!r} is listed twice with overlapping lifetimes (first at "
                    "{first}); a name may come back only after the earlier node was deleted",
                    first=where,
                )
        seen[node.name].append((node, fields["name"][1]))
        nodes.append(node)
    return nodes


def _node(fields: Fields) -> TimelineNode:
    name = _name(*fields["name"])
    created = _time(*fields["created"], required=True)
    deleted = _time(*fields["deleted"])
    if created is not None and deleted is not None and deleted < created:
        raise _Problem(
            fields["deleted"][1],
            f"deleted {iso(deleted)} is before created {iso(created)}; swap them or fix the times",
        )
    labels = _mapping(*fields["labels"], "label", "{karpenter.sh/nodepool: batch}")
    annotations = _mapping(
        *fields["annotations"], "annotation", "{karpenter.sh/do-not-disrupt: 'true'}"
    )
    return TimelineNode(name, created, deleted, labels, annotations)


def _name(raw: Any, where: Where) -> str:
    if raw is None or raw == "":
        raise _Problem(where, "node entry has no name; add `name: <node name>`")
    if not isinstance(raw, str):
        raise _Problem(where, f"name {raw!r} is not text; quote it")
    if len(raw) > 253 or not re.fullmatch(DNS_SUBDOMAIN, raw):
        raise _Problem(
            where,
            f"{raw!r} is not a valid node name; use lowercase letters, digits, '-' and '.' "
            "(like ip-10-0-1-2.ec2.internal)",
        )
    return raw


def _time(raw: Any, where: Where, required: bool = False) -> datetime | None:
    key = where[-1]
    if raw is None or raw == "":
        if required:
            raise _Problem(where, f"no `{key}` time; add `{key}: {TIME_EXAMPLE}`")
        return None
    try:
        return parse_time(raw)
    except ValueError as exc:
        raise _Problem(
            where, f"{key} {str(raw)!r} {exc}; write an RFC 3339 time such as {TIME_EXAMPLE}"
        ) from None


def _mapping(raw: Any, where: Where, kind: str, example: str) -> dict[str, str]:
    """Labels or annotations: qualified keys, text values (and label values as Kubernetes
    allows them)."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _Problem(where, f"{kind}s must be a mapping like {example}")
    for key, value in raw.items():
        at = (*where, str(key))
        if not isinstance(key, str) or (problem := qualified_name_problem(key)):
            why = problem if isinstance(key, str) else "not text"
            raise _Problem(at, f"{kind} key {key!r} is not valid ({why})")
        if not isinstance(value, str):
            raise _Problem(at, f"{kind} {key} has value {value!r}, which is not text; quote it")
        if kind == "label" and (problem := label_value_problem(value)):
            raise _Problem(at, f"label {key}={value!r}: the value {problem}")
    return dict(raw)


# --- kubectl output ----------------------------------------------------------------------


def _kube_list(data: dict[str, Any]) -> Timeline:
    """Nodes, NodeClaims and node Events from one kubectl list, and what was left out."""
    items = data.get("items")
    if not isinstance(items, list):
        raise _Problem(("items",), "`items` must be a list (kubectl get ... -o json)")
    list_kind = str(data.get("kind", ""))
    default_kind = list_kind.removesuffix("List") if list_kind != "List" else ""
    nodes: list[TimelineNode] = []
    events: list[tuple[datetime, str, str]] = []
    claims = ignored = 0
    for i, item in enumerate(items):
        where: Where = ("items", i)
        if not isinstance(item, dict):
            raise _Problem(where, "each item must be a Kubernetes object")
        kind = str(item.get("kind") or default_kind)
        if kind in ("Node", "NodeClaim"):
            fields = _kube_fields(item, where, kind)
            nodes += [_node(fields)] if fields else []
            claims += fields is None
        elif kind == "Event":
            event = _node_event(item, where)
            events += [event] if event else []
            ignored += event is None
        else:
            raise _Problem(
                (*where, "kind"),
                f"kind {kind or '(none)'} is not Node, NodeClaim or Event; use "
                "`kubectl get nodes -o json`, `kubectl get nodeclaims -o json` or node Events",
            )
    notes = [f"{claims} NodeClaim(s) without status.nodeName left out (no node)"] if claims else []
    lives = _lives(events)
    nodes += lives
    if unknown := sum(1 for n in lives if n.created is None):
        notes.append(
            f"{unknown} node(s) only have a removal Event; they count as existing "
            "since long before the replay"
        )
    if ignored and not events:
        notes.append(
            f"{ignored} Event(s) ignored: only RegisteredNode, RemovingNode and "
            "DeletingNode on Nodes tell when nodes came and went"
        )
    return Timeline(nodes, notes=tuple(notes))


def _kube_fields(item: dict[str, Any], where: Where, kind: str) -> Fields | None:
    """A Node as kubectl shows it, or a Karpenter v1 NodeClaim: its node appeared when the
    claim became Registered. Of the annotations (today's), only its NodePool's hold settings:
    Karpenter copied them from the NodePool's template when it launched the node."""
    meta = item.get("metadata") or {}
    at = (*where, "metadata")
    pool = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k in (NODE_HOLD, NODE_MAX_HOLD)
    }
    fields: Fields = {
        "name": (meta.get("name"), (*at, "name")),
        "created": (meta.get("creationTimestamp"), (*at, "creationTimestamp")),
        "deleted": (meta.get("deletionTimestamp"), (*at, "deletionTimestamp")),
        "labels": (meta.get("labels"), (*at, "labels")),
        "annotations": (pool, (*at, "annotations")),
    }
    if kind == "Node":
        return fields
    status = item.get("status") or {}
    if not status.get("nodeName"):
        return None
    fields["name"] = (status["nodeName"], (*where, "status", "nodeName"))
    for j, condition in enumerate(status.get("conditions") or ()):
        if (
            isinstance(condition, dict)
            and condition.get("type") == "Registered"
            and condition.get("status") == "True"
            and condition.get("lastTransitionTime")
        ):
            at = (*where, "status", "conditions", j, "lastTransitionTime")
            fields["created"] = (condition["lastTransitionTime"], at)
    return fields


def _node_event(item: dict[str, Any], where: Where) -> tuple[datetime, str, str] | None:
    """(when, reason, node) of a RegisteredNode, RemovingNode or DeletingNode Event."""
    regarding = item.get("involvedObject") or item.get("regarding") or {}
    reason = str(item.get("reason") or "")
    if regarding.get("kind") != "Node" or reason not in REGISTERED | REMOVED:
        return None
    name = _name(regarding.get("name"), (*where, "involvedObject", "name"))
    keys = ("firstTimestamp", "eventTime") if reason in REGISTERED else ("lastTimestamp",)
    key = next((k for k in (*keys, "eventTime", "firstTimestamp") if item.get(k)), None)
    if key is not None:
        return _time(item[key], (*where, key)), reason, name  # type: ignore[return-value]
    meta = item.get("metadata") or {}
    at = (*where, "metadata", "creationTimestamp")
    return _time(meta.get("creationTimestamp"), at, required=True), reason, name  # type: ignore[return-value]


def _lives(events: list[tuple[datetime, str, str]]) -> list[TimelineNode]:
    """Pair each RegisteredNode with the next removal of that name (a removal alone: a node
    from before the Events, created None)."""
    registered: dict[str, datetime] = {}
    nodes: list[TimelineNode] = []
    for when, reason, name in sorted(events, key=lambda e: (e[0], e[2])):
        if reason in REGISTERED:
            registered.setdefault(name, when)
        else:
            nodes.append(TimelineNode(name, registered.pop(name, None), when))
    return nodes + [TimelineNode(name, created) for name, created in registered.items()]


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
        created = [t for t in (a.created, node.created) if t is not None]
        deleted = [t for t in (a.deleted, node.deleted) if t is not None]
        group[i] = replace(
            a,
            created=min(created, default=None),
            deleted=max(deleted, default=None),
            labels={**a.labels, **node.labels},
            annotations={**a.annotations, **node.annotations},
        )
    return [n for group in by_name.values() for n in group]


# --- CSV -----------------------------------------------------------------------------------


def _csv(text: str, name: str) -> Iterator[Fields]:
    """Each row as fields; `where` starts with the row's line (comments and blanks count)."""
    lines = [line if not line.lstrip().startswith("#") else "" for line in text.splitlines()]
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header: list[str] | None = None
    fix = f"the header must be `{','.join(ENTRY_KEYS)}` (only name and created are needed)"
    try:
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip().lower() for cell in row]
                unknown = [c for c in header if c not in ENTRY_KEYS]
                missing = [c for c in ("name", "created") if c not in header]
                if unknown or missing:
                    what = (
                        f"unknown column {unknown[0]!r}" if unknown else f"no {missing[0]!r} column"
                    )
                    raise TimelineError(f"{name}:{line}: {what}; {fix}")
                continue
            if len(row) > len(header):
                raise TimelineError(
                    f"{name}:{line}: {len(row)} fields but the header has "
                    f"{len(header)}; quote fields that contain a comma"
                )
            cells = dict(zip(header, (c.strip() for c in row), strict=False))
            fields = {key: (cells.get(key) or None, (line, key)) for key in ENTRY_KEYS}
            for column in ("labels", "annotations"):
                pairs = {}
                for part in filter(None, (p.strip() for p in cells.get(column, "").split(";"))):
                    key, eq, value = part.partition("=")
                    if not eq:
                        why = f"{column[:-1]} {part!r} has no '='; write {column} as k=v;k2=v2"
                        raise _Problem((line,), why)
                    pairs[key.strip()] = value.strip()
                fields[column] = (pairs, (line, column))
            yield fields
    except csv.Error as exc:
        raise TimelineError(f"{name}:{reader.line_num}: not valid CSV: {exc}") from None
    if header is None:
        raise TimelineError(
            f"{name}:1: empty CSV; start with the header line `{','.join(ENTRY_KEYS)}`"
        )
