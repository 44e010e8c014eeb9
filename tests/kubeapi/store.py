"""The object store: etcd-like revisions, copy-on-write entries and consistent list snapshots.

Every stored change takes the next value of one global revision counter (as etcd does), and the
object's `metadata.resourceVersion` is that revision. Entries are immutable: a write builds a new
entry (sharing untouched subtrees with the old object), so a list snapshot is just a tuple of
entries, and its pages are served by joining each entry's cached JSON bytes.

Continue tokens are the real format (storage/continue.go): base64url (no padding) of
`{"v":"meta.k8s.io/v1","rv":<rev>,"start":"<key>\\u0000"}`; a token whose revision was compacted
answers 410 Expired with a fresh `rv:-1` token for an inconsistent continuation, as the etcd3
store does; a token that does not decode answers 400 "invalid continue token: ...".
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from tests.kubeapi.statuses import CONTINUE_EXPIRED_MSG, ApiError, bad_request, expired

_META_ORDER = (
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
)
_META_RANK = {k: i for i, k in enumerate(_META_ORDER)}


def dumps(value: Any) -> bytes:
    """Compact JSON like Go's encoder (UTF-8, no spaces)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def ordered_meta(meta: dict[str, Any]) -> dict[str, Any]:
    """ObjectMeta keys in the Go struct's order (what a real server's JSON shows)."""
    return dict(sorted(meta.items(), key=lambda kv: _META_RANK.get(kv[0], len(_META_RANK))))


@dataclass(frozen=True, slots=True)
class Entry:
    """One stored object version; never mutated."""

    key: str
    obj: dict[str, Any]
    rv: int
    item: bytes  # JSON without kind/apiVersion (how list items look)
    meta: bytes  # JSON of metadata alone (PartialObjectMetadata)

    @property
    def labels(self) -> dict[str, str]:
        """The object's labels (read-only)."""
        return self.obj["metadata"].get("labels") or {}

    def full(self, kind: str, api_version: str) -> bytes:
        """The single-object JSON (with kind/apiVersion first)."""
        head = b'{"kind":' + dumps(kind) + b',"apiVersion":' + dumps(api_version)
        return head + (b"," + self.item[1:] if len(self.item) > 2 else b"}")


def make_entry(key: str, obj: dict[str, Any], rv: int) -> Entry:
    """Serialize once at write time; readers only join bytes."""
    meta = dumps(obj.get("metadata") or {})
    rest = dumps({k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")})
    # One serialization pass: the item is metadata's bytes followed by the rest of the object.
    item = b'{"metadata":' + meta + (b"," + rest[1:] if len(rest) > 2 else b"}")
    return Entry(key, obj, rv, item, meta)


def encode_continue(key: str, rv: int) -> str:
    """storage.EncodeContinue (start key is the last returned key + NUL)."""
    raw = json.dumps(
        {"v": "meta.k8s.io/v1", "rv": rv, "start": key + "\x00"}, separators=(",", ":")
    )
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[str, int]:
    """storage.DecodeContinue -> (start key, rv); 400 when it does not decode."""
    try:
        data = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        if base64.urlsafe_b64encode(data).decode().rstrip("=") != token.rstrip("="):
            raise binascii.Error("illegal base64 data at input byte 0")
    except (binascii.Error, ValueError) as exc:
        raise bad_request(f"invalid continue token: continue key is not valid: {exc}") from None
    try:
        parsed = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise bad_request(f"invalid continue token: continue key is not valid: {exc}") from None
    if not isinstance(parsed, dict) or parsed.get("v") != "meta.k8s.io/v1":
        version = parsed.get("v") if isinstance(parsed, dict) else parsed
        raise bad_request(
            f"invalid continue token: server does not recognize this encoded version {version}"
        )
    rv = parsed.get("rv")
    if not isinstance(rv, int) or rv == 0:
        raise bad_request(
            "invalid continue token: continue key is not valid: incorrect encoded start "
            "resourceVersion (version meta.k8s.io/v1)"
        )
    start = parsed.get("start")
    if not isinstance(start, str) or not start:
        raise bad_request(
            "invalid continue token: continue key is not valid: encoded start key empty "
            "(version meta.k8s.io/v1)"
        )
    if start.startswith("/") or "/../" in f"/{start}/" or "/./" in f"/{start}/":
        raise bad_request(f"invalid continue token: continue key is not valid: {start}")
    return start, rv


class Collection:
    """The objects of one resource, by key (`name` or `namespace/name`)."""

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self._sorted_keys: list[str] | None = None

    def ordered(self) -> tuple[Entry, ...]:
        """All entries in etcd key order."""
        if self._sorted_keys is None:
            self._sorted_keys = sorted(self.entries)
        entries = self.entries
        return tuple(entries[k] for k in self._sorted_keys)

    def set(self, entry: Entry) -> None:
        """Insert or replace (key order only changes on insert)."""
        if entry.key not in self.entries:
            self._sorted_keys = None
        self.entries[entry.key] = entry

    def pop(self, key: str) -> Entry | None:
        """Remove a key."""
        entry = self.entries.pop(key, None)
        if entry is not None:
            self._sorted_keys = None
        return entry


class Store:
    """All collections, the revision counter, kept list snapshots and the compaction mark."""

    MAX_SNAPSHOTS = 64

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.rv = 1
        self.collections: dict[str, Collection] = {
            name: Collection()
            for name in ("nodes", "events", "cronjobs", "jobs", "nodepools", "configmaps")
        }
        self._snapshots: OrderedDict[tuple[str, int], tuple[Entry, ...]] = OrderedDict()
        self.compacted_rv = 0

    def get(self, resource: str, key: str) -> Entry | None:
        """The current entry."""
        return self.collections[resource].entries.get(key)

    def put(self, resource: str, key: str, obj: dict[str, Any]) -> Entry:
        """Store `obj` as a new revision; the caller holds the lock and passes a fresh top level."""
        self.rv += 1
        meta = dict(obj.get("metadata") or {})
        meta["resourceVersion"] = str(self.rv)
        head = {k: obj[k] for k in ("kind", "apiVersion") if k in obj}
        rest = {k: v for k, v in obj.items() if k not in ("kind", "apiVersion", "metadata")}
        stored = {**head, "metadata": ordered_meta(meta), **rest}
        entry = make_entry(key, stored, self.rv)
        self.collections[resource].set(entry)
        return entry

    def delete(self, resource: str, key: str) -> Entry | None:
        """Remove an object (an etcd delete also takes a revision)."""
        entry = self.collections[resource].pop(key)
        if entry is not None:
            self.rv += 1
        return entry

    def snapshot(self, resource: str) -> tuple[int, tuple[Entry, ...]]:
        """(revision, entries) as of now."""
        with self.lock:
            return self.rv, self.collections[resource].ordered()

    def remember(self, resource: str, rv: int, entries: tuple[Entry, ...]) -> None:
        """Keep a snapshot so later pages at `rv` see exactly the same objects."""
        with self.lock:
            self._snapshots[(resource, rv)] = entries
            self._snapshots.move_to_end((resource, rv))
            while len(self._snapshots) > self.MAX_SNAPSHOTS:
                (_, old_rv), _ = self._snapshots.popitem(last=False)
                self.compacted_rv = max(self.compacted_rv, old_rv)

    def recall(self, resource: str, rv: int, start: str) -> tuple[int, tuple[Entry, ...]]:
        """The snapshot a continue token refers to, or 410 Expired (with an rv=-1 token)."""
        with self.lock:
            if rv == -1:
                return self.rv, self.collections[resource].ordered()
            found = self._snapshots.get((resource, rv))
            if found is None or rv <= self.compacted_rv:
                raise expired(
                    CONTINUE_EXPIRED_MSG,
                    encode_continue(start[:-1] if start.endswith("\x00") else start, -1),
                )
            return rv, found

    def compact(self) -> None:
        """Like etcd compaction: every continue token issued so far expires."""
        with self.lock:
            self.compacted_rv = self.rv
            # The next list must be distinguishable from the compacted revision.
            self.rv += 1
            self._snapshots.clear()


def require(condition: bool, error: ApiError) -> None:
    """Raise `error` unless `condition`."""
    if not condition:
        raise error
