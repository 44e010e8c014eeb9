"""Node timelines for `node-holder simulate`: which nodes existed when, read from files.

Formats (docs/simulate.md has examples):
- YAML or JSON: `nodes: [{name, created, deleted, labels}]`, optional `start:`/`end:`;
- CSV: a header `name,created,deleted,labels`, labels written `k=v;k2=v2`;
- kubectl's own JSON or YAML output, so a cluster's data needs no conversion:
  `kubectl get nodes -o json` (NodeList or List of Node), Karpenter
  `kubectl get nodeclaims -o json`, and node Events
  (`kubectl get events -A --field-selector involvedObject.kind=Node -o json`).

Every problem is one ConfigError line `FILE:LINE: what is wrong; how to fix` (exit 2).
Lines come from the parser (YAML marks, JSON `lineno`, CSV rows); for a bad value
found later, the file is composed again as YAML (JSON is YAML too) and the path
of the entry (`nodes[3].created`) is looked up there.
"""

from __future__ import annotations

import csv
import io
import json
import re
import sys
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import yaml

from reconcile.names import label_value_problem, qualified_name_problem
from reconcile.settings import ConfigError

FORMATS = ("yaml", "json", "csv")
CSV_COLUMNS = ("name", "created", "deleted", "labels")
ENTRY_KEYS = ("name", "created", "deleted", "labels", "annotations")
TOP_KEYS = ("nodes", "start", "end", "description")
REGISTERED = frozenset({"RegisteredNode"})  # node lifecycle controller: "Registered Node x"
REMOVED = frozenset({"RemovingNode", "DeletingNode"})  # "Removing Node x from Controller"
TIME_EXAMPLE = "2024-05-14T08:30:00Z"
_NODE_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")

Where = tuple[str | int, ...]  # where a value sits in the document: ("nodes", 3, "created")


class TimelineError(ConfigError):
    """A timeline file that cannot be replayed: one line naming the file and line."""


@dataclass(frozen=True)
class TimelineNode:
    """One node's life: it exists from `created` until `deleted` (None: still there).

    `annotations` are those it has when it appears (say a do-not-disrupt set by hand):
    only timeline files give them; kubectl output shows today's, not the past's.
    """

    name: str
    created: datetime | None  # None: existed before the timeline (only a removal was seen)
    deleted: datetime | None = None
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)

    def overlaps(self, other: TimelineNode) -> bool:
        """Whether two lives with the same name overlap (so they are the same node)."""
        lo = datetime.min.replace(tzinfo=UTC)
        hi = datetime.max.replace(tzinfo=UTC)
        a0, a1 = self.created or lo, self.deleted or hi
        b0, b1 = other.created or lo, other.deleted or hi
        return a0 < b1 and b0 < a1


@dataclass(frozen=True)
class Timeline:
    nodes: tuple[TimelineNode, ...]
    sources: tuple[str, ...]
    start: datetime | None = None  # `start:` in a file
    end: datetime | None = None  # `end:` in a file
    notes: tuple[str, ...] = ()  # what was skipped or assumed, said once at the top

    @property
    def moments(self) -> list[datetime]:
        """Every known creation and deletion time, sorted."""
        times = [n.created for n in self.nodes if n.created is not None]
        times += [n.deleted for n in self.nodes if n.deleted is not None]
        return sorted(times)


class _Problem(Exception):
    """A bad value at `path`; turned into `FILE:LINE: message` once the line is known."""

    def __init__(self, path: Where, message: str, first: Where | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.message = message
        self.first = first  # for duplicates: where the name appeared before


@dataclass(frozen=True)
class _Parsed:
    nodes: list[TimelineNode]
    start: datetime | None = None
    end: datetime | None = None
    notes: tuple[str, ...] = ()


# --- reading ---------------------------------------------------------------------------


def load_timeline(paths: Sequence[str]) -> Timeline:
    """Read and merge timeline files (`-` is standard input)."""
    parsed: list[_Parsed] = []
    for path in paths:
        name, text = _read(path)
        parsed.append(parse_text(text, name, _format_of(path, text)))
    nodes = _merge([n for p in parsed for n in p.nodes])
    if not nodes:
        raise TimelineError(
            f"{', '.join(_display(p) for p in paths)}: no nodes in the timeline; list at least "
            "one node (see docs/simulate.md)"
        )
    starts = [p.start for p in parsed if p.start]
    ends = [p.end for p in parsed if p.end]
    notes = tuple(note for p in parsed for note in p.notes)
    return Timeline(
        nodes=tuple(sorted(nodes, key=_order)),
        sources=tuple(_display(p) for p in paths),
        start=min(starts) if starts else None,
        end=max(ends) if ends else None,
        notes=notes,
    )


def _order(node: TimelineNode) -> tuple[datetime, str]:
    return (node.created or datetime.min.replace(tzinfo=UTC), node.name)


def _display(path: str) -> str:
    return "<stdin>" if path == "-" else path


def _read(path: str) -> tuple[str, str]:
    if path == "-":
        return "<stdin>", sys.stdin.read()
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
        return path, data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise TimelineError(
            f"{path}:{line}: not UTF-8 text; save the timeline as UTF-8 YAML, JSON or CSV"
        ) from None


def _format_of(path: str, text: str) -> str:
    suffix = Path(path).suffix.lower()
    if suffix in (".yaml", ".yml"):
        return "yaml"
    if suffix in (".json", ".csv"):
        return suffix[1:]
    return sniff(text)


def sniff(text: str) -> str:
    """JSON starts with `{` or `[`; CSV's first line is a header starting `name,`."""
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        return "json"
    for line in stripped.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return "csv" if re.match(r"^\s*\"?name\"?\s*,", line) else "yaml"
    return "yaml"


def parse_text(text: str, name: str, fmt: str) -> _Parsed:
    """Parse one file's text; every problem becomes a TimelineError with its line."""
    if fmt == "csv":
        return _parse_csv(text, name)
    data = _load_json(text, name) if fmt == "json" else _load_yaml(text, name)
    try:
        return _interpret(data)
    except _Problem as problem:
        raise TimelineError(_locate_message(text, name, problem)) from None


# --- YAML and JSON -------------------------------------------------------------------


class _Loader(yaml.SafeLoader):
    """SafeLoader that keeps timestamps as text, so every time goes through one parser."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}


def _load_yaml(text: str, name: str) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)  # a SafeLoader subclass: no arbitrary objects
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"{mark.line + 1}" if mark is not None else "1"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        context = getattr(exc, "context", None)
        what = f"{problem} ({context})" if context else problem
        raise TimelineError(
            f"{name}:{line}: not valid YAML: {what}; fix the YAML there "
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


def _locate_message(text: str, name: str, problem: _Problem) -> str:
    root = _compose(text)
    line = _line_of(root, problem.path)
    where = f"{name}:{line}" if line else f"{name}: {_path_text(problem.path)}"
    message = problem.message
    if problem.first is not None:
        first = _line_of(root, problem.first)
        message = message.replace("{first}", f"line {first}" if first else "earlier")
    return f"{where}: {message}"


def _compose(text: str) -> yaml.Node | None:
    loader_class = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        return yaml.compose(text, Loader=loader_class)
    except yaml.YAMLError:
        return None  # JSON that YAML 1.1 cannot read: the message names the path instead


def _line_of(root: yaml.Node | None, path: Where) -> int | None:
    """The line of the deepest node along `path` that exists."""
    node = root
    best = root.start_mark.line + 1 if root is not None else None
    for step in path:
        if isinstance(node, yaml.MappingNode) and isinstance(step, str):
            found = next((v for k, v in node.value if getattr(k, "value", None) == step), None)
            key = next((k for k, _ in node.value if getattr(k, "value", None) == step), None)
            if found is None or key is None:
                return best
            node, best = found, key.start_mark.line + 1
        elif isinstance(node, yaml.SequenceNode) and isinstance(step, int):
            if not 0 <= step < len(node.value):
                return best
            node = node.value[step]
            best = node.start_mark.line + 1
        else:
            return best
    return best


def _path_text(path: Where) -> str:
    text = ""
    for step in path:
        text += f"[{step}]" if isinstance(step, int) else (f".{step}" if text else step)
    return text or "top level"


def _interpret(data: Any) -> _Parsed:
    if isinstance(data, list):
        return _Parsed(_entries(data, ()))
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
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise _Problem(
            (str(unknown[0]),),
            f"unknown key {unknown[0]!r}; a timeline has only {', '.join(TOP_KEYS)}",
        )
    if not isinstance(data["nodes"], list):
        raise _Problem(("nodes",), "`nodes` must be a list of entries like {name, created}")
    start = _time(data.get("start"), ("start",), required=False)
    end = _time(data.get("end"), ("end",), required=False)
    if start and end and end <= start:
        raise _Problem(("end",), f"end {_iso(end)} is not after start {_iso(start)}; fix one")
    return _Parsed(_entries(data["nodes"], ("nodes",)), start=start, end=end)


def _entries(items: list[Any], base: Where) -> list[TimelineNode]:
    nodes: list[TimelineNode] = []
    seen: dict[str, list[tuple[TimelineNode, Where]]] = defaultdict(list)
    for i, item in enumerate(items):
        path = (*base, i)
        if not isinstance(item, dict):
            raise _Problem(path, "each node entry must be a mapping like {name: x, created: T}")
        unknown = [k for k in item if k not in ENTRY_KEYS]
        if unknown:
            raise _Problem(
                (*path, str(unknown[0])),
                f"unknown key {unknown[0]!r} in a node entry; use {', '.join(ENTRY_KEYS)}",
            )
        name = _name(item.get("name"), (*path, "name"))
        created = _time(item.get("created"), (*path, "created"), required=True)
        deleted = _time(item.get("deleted"), (*path, "deleted"), required=False)
        _check_order(created, deleted, (*path, "deleted"))
        labels = _labels(item.get("labels"), (*path, "labels"))
        annotations = _annotations(item.get("annotations"), (*path, "annotations"))
        node = TimelineNode(name, created, deleted, labels, annotations)
        for other, other_path in seen[name]:
            if node.overlaps(other):
                raise _Problem(
                    (*path, "name"),
                    f"node {name!r} is listed twice with overlapping lifetimes (first at "
                    "{first}); a name may come back only after the earlier node was deleted",
                    first=(*other_path, "name"),
                )
        seen[name].append((node, path))
        nodes.append(node)
    return nodes


def _check_order(created: datetime | None, deleted: datetime | None, path: Where) -> None:
    if created is not None and deleted is not None and deleted < created:
        raise _Problem(
            path,
            f"deleted {_iso(deleted)} is before created {_iso(created)}; "
            "swap them or fix the times",
        )


def _name(raw: Any, path: Where) -> str:
    if raw is None or raw == "":
        raise _Problem(path, "node entry has no name; add `name: <node name>`")
    if not isinstance(raw, str):
        raise _Problem(path, f"name {raw!r} is not text; quote it")
    if len(raw) > 253 or not _NODE_NAME_RE.match(raw):
        raise _Problem(
            path,
            f"{raw!r} is not a valid node name; use lowercase letters, digits, '-' and '.' "
            "(like ip-10-0-1-2.ec2.internal)",
        )
    return raw


def parse_time(raw: Any) -> datetime:
    """An RFC 3339 time with a zone (Z or an offset), as UTC; ValueError says why not."""
    if isinstance(raw, datetime):
        moment = raw
    elif isinstance(raw, date):
        raise ValueError("is a date without a time of day")
    elif isinstance(raw, str) and raw.strip():
        text = raw.strip()
        if not re.match(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}", text):
            raise ValueError("is not an RFC 3339 time")
        try:
            moment = datetime.fromisoformat(text.replace("z", "Z"))
        except ValueError:
            raise ValueError("is not an RFC 3339 time") from None
    else:
        raise ValueError("is not an RFC 3339 time")
    if moment.tzinfo is None:
        raise ValueError("has no time zone (add Z for UTC)")
    return moment.astimezone(UTC)


def _time(raw: Any, path: Where, *, required: bool) -> datetime | None:
    key = path[-1]
    if raw is None or raw == "":
        if required:
            raise _Problem(path, f"no `{key}` time; add `{key}: {TIME_EXAMPLE}`")
        return None
    try:
        return parse_time(raw)
    except ValueError as exc:
        raise _Problem(
            path, f"{key} {str(raw)!r} {exc}; write an RFC 3339 time such as {TIME_EXAMPLE}"
        ) from None


def _labels(raw: Any, path: Where) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _Problem(path, "labels must be a mapping like {karpenter.sh/nodepool: batch}")
    labels: dict[str, str] = {}
    for key, value in raw.items():
        _check_label(key, value, (*path, str(key)))
        labels[key] = value
    return labels


def _annotations(raw: Any, path: Where) -> dict[str, str]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise _Problem(
            path, "annotations must be a mapping like {karpenter.sh/do-not-disrupt: 'true'}"
        )
    for key, value in raw.items():
        if not isinstance(key, str) or (problem := qualified_name_problem(key)):
            why = problem if isinstance(key, str) else "not text"
            raise _Problem((*path, str(key)), f"annotation key {key!r} is not valid ({why})")
        if not isinstance(value, str):
            raise _Problem(
                (*path, key), f"annotation {key} has value {value!r}, which is not text; quote it"
            )
    return dict(raw)


def _check_label(key: Any, value: Any, path: Where) -> None:
    if not isinstance(key, str) or (problem := qualified_name_problem(key)):
        why = problem if isinstance(key, str) else "not text"
        raise _Problem(path, f"label key {key!r} is not valid ({why})")
    if not isinstance(value, str):
        raise _Problem(path, f"label {key} has value {value!r}, which is not text; quote it")
    if problem := label_value_problem(value):
        raise _Problem(path, f"label {key}={value!r}: the value {problem}")


# --- kubectl output ----------------------------------------------------------------------


def _kube_list(data: dict[str, Any]) -> _Parsed:
    items = data.get("items")
    if not isinstance(items, list):
        raise _Problem(("items",), "`items` must be a list (kubectl get ... -o json)")
    list_kind = str(data.get("kind", ""))
    found = _KubeItems(list_kind[: -len("List")] if list_kind not in ("", "List") else "")
    for i, item in enumerate(items):
        found.add(item, ("items", i))
    return found.parsed()


@dataclass
class _KubeItems:
    """Nodes, NodeClaims and node Events from one kubectl list, and what was left out."""

    default_kind: str  # `kind: NodeList` items may leave out their own kind
    nodes: list[TimelineNode] = field(default_factory=list)
    events: list[tuple[datetime, str, str, Where]] = field(default_factory=list)
    skipped_claims: int = 0
    ignored_events: int = 0

    def add(self, item: Any, path: Where) -> None:
        if not isinstance(item, dict):
            raise _Problem(path, "each item must be a Kubernetes object")
        kind = str(item.get("kind") or self.default_kind)
        if kind == "Node":
            self.nodes.append(_kube_node(item, path))
        elif kind == "NodeClaim":
            node = _node_claim(item, path)
            if node is None:
                self.skipped_claims += 1
            else:
                self.nodes.append(node)
        elif kind == "Event":
            found = _node_event(item, path)
            if found is None:
                self.ignored_events += 1
            else:
                self.events.append(found)
        else:
            raise _Problem(
                (*path, "kind"),
                f"kind {kind or '(none)'} is not Node, NodeClaim or Event; use "
                "`kubectl get nodes -o json`, `kubectl get nodeclaims -o json` or node Events",
            )

    def parsed(self) -> _Parsed:
        notes: list[str] = []
        if self.skipped_claims:
            notes.append(
                f"{self.skipped_claims} NodeClaim(s) without status.nodeName left out (no node)"
            )
        nodes = list(self.nodes)
        if self.events:
            from_events, unknown = _lives_from_events(self.events)
            nodes.extend(from_events)
            if unknown:
                notes.append(
                    f"{unknown} node(s) only have a removal Event; they count as existing "
                    "since long before the replay"
                )
        elif self.ignored_events:
            notes.append(
                f"{self.ignored_events} Event(s) ignored: only RegisteredNode, RemovingNode and "
                "DeletingNode on Nodes tell when nodes came and went"
            )
        return _Parsed(nodes, notes=tuple(notes))


def _kube_node(item: dict[str, Any], path: Where) -> TimelineNode:
    """A Node as kubectl shows it; its annotations are today's, so they are left out."""
    meta = item.get("metadata") or {}
    name = _name(meta.get("name"), (*path, "metadata", "name"))
    created = _time(
        meta.get("creationTimestamp"), (*path, "metadata", "creationTimestamp"), required=True
    )
    deleted = _time(
        meta.get("deletionTimestamp"), (*path, "metadata", "deletionTimestamp"), required=False
    )
    labels = _labels(meta.get("labels"), (*path, "metadata", "labels"))
    return TimelineNode(name, created, deleted, labels)


def _node_claim(item: dict[str, Any], path: Where) -> TimelineNode | None:
    """A Karpenter v1 NodeClaim: its node appeared when the claim became Registered."""
    meta = item.get("metadata") or {}
    status = item.get("status") or {}
    node_name = status.get("nodeName")
    if not node_name:
        return None
    name = _name(node_name, (*path, "status", "nodeName"))
    created_raw = meta.get("creationTimestamp")
    created_path: Where = (*path, "metadata", "creationTimestamp")
    for j, condition in enumerate(status.get("conditions") or ()):
        if (
            isinstance(condition, dict)
            and condition.get("type") == "Registered"
            and condition.get("status") == "True"
            and condition.get("lastTransitionTime")
        ):
            created_raw = condition["lastTransitionTime"]
            created_path = (*path, "status", "conditions", j, "lastTransitionTime")
    created = _time(created_raw, created_path, required=True)
    deleted = _time(
        meta.get("deletionTimestamp"), (*path, "metadata", "deletionTimestamp"), required=False
    )
    labels = _labels(meta.get("labels"), (*path, "metadata", "labels"))
    return TimelineNode(name, created, deleted, labels)


def _node_event(item: dict[str, Any], path: Where) -> tuple[datetime, str, str, Where] | None:
    regarding = item.get("involvedObject") or item.get("regarding") or {}
    reason = str(item.get("reason") or "")
    if regarding.get("kind") != "Node" or reason not in REGISTERED | REMOVED:
        return None
    name = _name(regarding.get("name"), (*path, "involvedObject", "name"))
    meta = item.get("metadata") or {}
    keys = ("firstTimestamp", "eventTime") if reason in REGISTERED else ("lastTimestamp",)
    keys += ("eventTime", "firstTimestamp")
    for key in keys:
        if item.get(key):
            return _time(item[key], (*path, key), required=True), reason, name, path  # type: ignore[return-value]
    when = _time(
        meta.get("creationTimestamp"), (*path, "metadata", "creationTimestamp"), required=True
    )
    return when, reason, name, path  # type: ignore[return-value]


def _lives_from_events(
    events: list[tuple[datetime, str, str, Where]],
) -> tuple[list[TimelineNode], int]:
    """Pair each RegisteredNode with the next removal of that name."""
    open_: dict[str, datetime] = {}
    nodes: list[TimelineNode] = []
    unknown = 0
    for when, reason, name, _path in sorted(events, key=lambda e: (e[0], e[2])):
        if reason in REGISTERED:
            if name not in open_:
                open_[name] = when
        elif name in open_:
            nodes.append(TimelineNode(name, open_.pop(name), when))
        else:
            nodes.append(TimelineNode(name, None, when))
            unknown += 1
    nodes.extend(TimelineNode(name, created) for name, created in open_.items())
    return nodes, unknown


def _merge(nodes: Iterable[TimelineNode]) -> list[TimelineNode]:
    """Same name and overlapping lifetimes (from several files or kinds): one node."""
    by_name: dict[str, list[TimelineNode]] = defaultdict(list)
    for node in nodes:
        group = by_name[node.name]
        for i, other in enumerate(group):
            if node.overlaps(other):
                group[i] = _combine(other, node)
                break
        else:
            group.append(node)
    return [n for group in by_name.values() for n in group]


def _combine(a: TimelineNode, b: TimelineNode) -> TimelineNode:
    created = [t for t in (a.created, b.created) if t is not None]
    deleted = [t for t in (a.deleted, b.deleted) if t is not None]
    return replace(
        a,
        created=min(created) if created else None,
        deleted=max(deleted) if deleted else None,
        labels={**a.labels, **b.labels},
        annotations={**a.annotations, **b.annotations},
    )


# --- CSV -----------------------------------------------------------------------------------


def _parse_csv(text: str, name: str) -> _Parsed:
    lines = [line if not line.lstrip().startswith("#") else "" for line in text.splitlines()]
    reader = csv.reader(io.StringIO("\n".join(lines)))
    header: list[str] | None = None
    nodes: list[TimelineNode] = []
    seen: dict[str, list[tuple[TimelineNode, int]]] = defaultdict(list)
    try:
        for row in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if header is None:
                header = [cell.strip().lower() for cell in row]
                _check_header(header, name, line)
                continue
            if len(row) > len(header):
                raise TimelineError(
                    f"{name}:{line}: {len(row)} fields but the header has {len(header)}; "
                    "quote fields that contain a comma"
                )
            cells = dict(zip(header, (c.strip() for c in row), strict=False))
            node = _csv_node(cells, name, line)
            for other, other_line in seen[node.name]:
                if node.overlaps(other):
                    raise TimelineError(
                        f"{name}:{line}: node {node.name!r} is listed twice with overlapping "
                        f"lifetimes (first at line {other_line}); a name may come back only "
                        "after the earlier node was deleted"
                    )
            seen[node.name].append((node, line))
            nodes.append(node)
    except csv.Error as exc:
        raise TimelineError(f"{name}:{reader.line_num}: not valid CSV: {exc}") from None
    if header is None:
        raise TimelineError(
            f"{name}:1: empty CSV; start with the header line `{','.join(CSV_COLUMNS)}`"
        )
    return _Parsed(nodes)


def _check_header(header: list[str], name: str, line: int) -> None:
    unknown = [c for c in header if c not in CSV_COLUMNS]
    missing = [c for c in ("name", "created") if c not in header]
    if unknown or missing:
        what = f"unknown column {unknown[0]!r}" if unknown else f"no {missing[0]!r} column"
        raise TimelineError(
            f"{name}:{line}: {what}; the header must be `{','.join(CSV_COLUMNS)}` "
            "(deleted and labels may be left out)"
        )


def _csv_node(cells: dict[str, str], name: str, line: int) -> TimelineNode:
    try:
        node_name = _name(cells.get("name", ""), ("name",))
        created = _time(cells.get("created", ""), ("created",), required=True)
        deleted = _time(cells.get("deleted", ""), ("deleted",), required=False)
        _check_order(created, deleted, ("deleted",))
        labels: dict[str, str] = {}
        for part in (cells.get("labels") or "").split(";"):
            if not part.strip():
                continue
            key, eq, value = part.strip().partition("=")
            if not eq:
                raise _Problem(
                    ("labels",),
                    f"label {part.strip()!r} has no '='; write labels as k=v;k2=v2",
                )
            _check_label(key.strip(), value.strip(), ("labels",))
            labels[key.strip()] = value.strip()
    except _Problem as problem:
        raise TimelineError(f"{name}:{line}: {problem.message}") from None
    return TimelineNode(node_name, created, deleted, labels)


def _iso(moment: datetime) -> str:
    fraction = f".{moment.microsecond:06d}".rstrip("0") if moment.microsecond else ""
    return moment.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"
