"""Settings: frozen dataclasses, one parser per kind of setting, and the words they share:
this tool's annotation keys, durations and times.

A parser takes the text exactly as it arrived (flag or environment variable: the same verdict)
and refuses bad text with `Invalid(problem, fix)`, which reconcile/cli/options.py makes one
`ConfigError` line naming the option and its variable (exit 2, before any API call). Digits
are ASCII only: int() and float() also accept Arabic-Indic or full-width digits.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum

from reconcile.rule.names import DNS_LABEL, DNS_SUBDOMAIN, qualified_name_problem
from reconcile.rule.selectors import EVERYTHING, Selector, SelectorError, parse_selector

DEFAULT_ANNOTATION = "karpenter.sh/do-not-disrupt"
#: The CronJob's settings as the kustomize base and the chart (release node-holder) install them.
SETTINGS_CONFIGMAP = "node-holder/node-holder-settings"
DEFAULT_GROUP_LABEL = "karpenter.sh/nodepool"
DEFAULT_HOLD = timedelta(minutes=20)
#: Our own annotation: which hold annotations on this node this tool put there.
OWNERSHIP_MARKER = "node-holder.dev/owned-annotations"
HOLD_VALUE = "true"
#: With --max-hold: when the current stretch of holding began, written with the hold.
HOLD_STARTED = "node-holder.dev/hold-started"
#: After a stretch capped by --max-hold: no new hold starts before this time.
FREE_UNTIL = "node-holder.dev/free-until"
#: A person's pins (`node-holder pin`): hold keys no run adds, removes or claims on this node.
#: Written only by `pin`/`unpin`, never by reconcile, release or the uninstall hook.
PINNED = "node-holder.dev/pinned"
OWN_ANNOTATIONS = (OWNERSHIP_MARKER, HOLD_STARTED, FREE_UNTIL, PINNED)
#: A NodePool's own hold duration ("0": its nodes start no hold) and cap, in its own
#: metadata.annotations (read there only): people's, never written by this tool.
NODE_HOLD, NODE_MAX_HOLD = "node-holder.dev/hold-duration", "node-holder.dev/max-hold"
#: What a node view always keeps: this tool's own annotations, and a NodePool's settings that
#: a node carries itself (not read there: the run says so once).
KEPT_ANNOTATIONS = (*OWN_ANNOTATIONS, NODE_HOLD, NODE_MAX_HOLD)


class ConfigError(ValueError):
    """Bad input or configuration: one line, exit code 2, no API call made."""


class Scope(StrEnum):
    CLUSTER = "cluster"
    GROUP = "group"
    NODE = "node"


class Output(StrEnum):
    TEXT = "text"
    JSON = "json"


class Mechanism(StrEnum):
    """How a hold reaches Karpenter: node annotations, or NodePool budgets (rule/budget.py)."""

    ANNOTATION = "annotation"
    BUDGET = "budget"
    AUTO = "auto"

    @property
    def budgets(self) -> bool:
        return self is not Mechanism.ANNOTATION


class Mode(StrEnum):
    """What a run does: the command (`status` is a reconcile that writes nothing)."""

    RECONCILE = "reconcile"
    RELEASE = "release"  # remove every hold this tool owns, whatever the ages
    PIN = "pin"  # a person's pin on the named nodes (PINNED)
    UNPIN = "unpin"  # give the named nodes' pins back to the normal rule


@dataclass(frozen=True)
class HoldSettings:
    """What is held and for how long: everything the pure decision needs."""

    hold_duration: timedelta = DEFAULT_HOLD
    annotations: tuple[str, ...] = (DEFAULT_ANNOTATION,)
    scope: Scope = Scope.CLUSTER
    group_label: str = DEFAULT_GROUP_LABEL
    trigger_selector: Selector = EVERYTHING
    node_selector: Selector = EVERYTHING
    max_hold: timedelta | None = None
    mechanism: Mechanism = Mechanism.ANNOTATION

    @property
    def label_keys(self) -> frozenset[str]:
        """Labels the decision reads; a compact node view keeps only these."""
        keys = self.trigger_selector.keys | self.node_selector.keys
        if self.scope is Scope.GROUP:
            keys |= {self.group_label}
        if self.mechanism.budgets:
            keys |= {DEFAULT_GROUP_LABEL}  # which NodePool's budget holds the node
        return keys


@dataclass(frozen=True)
class RunSettings:
    """What one run does, and how it behaves towards the API server."""

    mode: Mode = Mode.RECONCILE
    dry_run: bool = False
    timeout: timedelta = timedelta(seconds=45)
    workers: int = 8
    qps: float = 200.0  # node writes a second at most (reconcile.cluster.pace); 0: no limit
    page_size: int = 500
    events: bool = True
    output: Output = Output.TEXT
    only: tuple[str, ...] = ()  # pin, unpin: the named nodes alone; empty: every node

    def after(self, spent: float) -> RunSettings:
        """The rest of the run once `spent` seconds of its --timeout are gone (a credential
        plugin): a run ends within --timeout counted from its start, not from its list."""
        left = max(self.timeout - timedelta(seconds=spent), timedelta(0))
        return replace(self, timeout=left)


@dataclass(frozen=True)
class ClusterAccess:
    """Where the API server is; None everywhere means in-cluster or ~/.kube/config."""

    kubeconfig: str | None = None
    context: str | None = None
    request_timeout: float = 10.0


@dataclass(frozen=True)
class PrometheusAccess:
    """Where `simulate --prometheus` reads history, how it signs in (as Prometheus' own scrape
    config does), and which series are the cluster's (`{cluster="prod-1"}`, in every query)."""

    url: str
    match: str = ""
    bearer_token_file: str | None = None
    username: str | None = None
    password_file: str | None = None
    ca_file: str | None = None
    insecure_skip_tls_verify: bool = False
    headers: tuple[str, ...] = ()  # `Name: value`, sent with every query


class Invalid(ValueError):
    """Why a setting's text is refused, and what to write instead."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}; {fix}")
        self.problem = problem
        self.fix = fix


#: The one duration grammar: number+unit parts (`90s`, `20m`, `1h30m`, `2d`, `100ms`, `1.5h`),
#: units in either case, an optional `+`, spaces around. The chart's schema carries these same
#: patterns (scripts/chart_schema.py), so the chart and the CLI cannot read a text differently.
_NUM = r"[0-9]+(?:\.[0-9]+)?"
_UNIT = r"(?:[mM][sS]|[dDhHmMsS])"  # `ms` first: `100ms` is not 100 minutes and a stray `s`
SPACE = " \t\r\n"  # what may surround a value: the same characters in Go's regexp and Python's
_SPACE = r"[ \t\r\n]*"
DURATION_PATTERN = rf"^{_SPACE}[+]?(?:{_NUM}{_UNIT})+{_SPACE}$"
#: An optional duration's "not set" (`--max-hold`, the manifests' empty value).
UNSET_PATTERN = rf"^{_SPACE}$"
#: The hold duration's grammar: also a bare number of minutes (the original chart's `20`).
BARE_MINUTES_PATTERN = rf"^{_SPACE}[+]?(?:{_NUM}|(?:{_NUM}{_UNIT})+){_SPACE}$"
_PART_RE = re.compile(rf"({_NUM})({_UNIT})")
_UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0.001}


@dataclass(frozen=True)
class DurationRange:
    """What a duration setting accepts; outside it, the value is almost surely a mistake."""

    low: timedelta = timedelta(seconds=1)
    high: timedelta = timedelta(days=7)


HOLD_RANGE = DurationRange(timedelta(seconds=1), timedelta(days=7))
TIMEOUT_RANGE = DurationRange(timedelta(seconds=1), timedelta(hours=1))
REQUEST_TIMEOUT_RANGE = DurationRange(timedelta(milliseconds=100), timedelta(minutes=10))
INTERVAL_RANGE = DurationRange(timedelta(seconds=10), timedelta(days=1))  # simulate --interval
HISTORY_RANGE = DurationRange(timedelta(minutes=1), timedelta(days=400))  # simulate --last


def parse_duration(
    text: str, bounds: DurationRange = HOLD_RANGE, *, bare_minutes: bool = False
) -> timedelta:
    """`90s`, `20m`, `1h30m`, `2d` (DURATION_PATTERN), within bounds; with `bare_minutes` (the
    hold duration only: the original chart's `holdDuration: 20`) also a bare number of minutes.

    The range is checked on the number before a timedelta exists, so `99999999999` is
    refused as out of range instead of overflowing.
    """
    examples = "90s, 20m, 1h30m, 2d" + (", or a bare number of minutes" if bare_minutes else "")
    within = f"from {format_duration(bounds.low)} to {format_duration(bounds.high)}"
    fix = f"use a duration {within}, such as {examples}"
    raw = text.strip(SPACE)
    pattern = BARE_MINUTES_PATTERN if bare_minutes else DURATION_PATTERN
    if not raw:
        raise Invalid("is empty", fix)
    if not re.fullmatch(pattern, raw):
        if re.fullmatch(_NUM, raw.lstrip("+-")):
            raise Invalid("has no unit" if not bare_minutes else "is not a positive duration", fix)
        if raw[0] == "-" and re.fullmatch(pattern, raw[1:]):
            raise Invalid("is not a positive duration", fix)
        raise Invalid("is not a duration", fix)
    if re.fullmatch(_NUM, raw.lstrip("+")):
        raw += "m"  # the hold duration's bare number of minutes
    seconds = sum(float(n) * _UNIT_SECONDS[unit.lower()] for n, unit in _PART_RE.findall(raw))
    if seconds <= 0:
        raise Invalid("is not a positive duration", fix)
    if not math.isfinite(seconds) or seconds > bounds.high.total_seconds():
        raise Invalid(f"is longer than {format_duration(bounds.high)}", fix)
    if seconds < bounds.low.total_seconds():
        raise Invalid(f"is shorter than {format_duration(bounds.low)}", fix)
    return timedelta(seconds=seconds)


def format_duration(delta: timedelta) -> str:
    """Human duration like `1h30m`, `20m`, `45s`, `2d3h` (its two largest units, to the
    second); negative gets a `-`."""
    if 0 < abs(delta.total_seconds()) < 1:
        return f"{round(delta.total_seconds() * 1000)}ms"
    total = round(delta.total_seconds())
    sign = "-" if total < 0 else ""
    total = abs(total)
    written = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, total = divmod(total, size)
        if amount:
            written.append(f"{amount}{unit}")
    return sign + ("".join(written[:2]) or "0s")


#: Our stamps' form (`node-holder.dev/hold-started`), as kube-apiserver writes its times.
STAMP_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def format_time(moment: datetime, fraction: bool = False) -> str:
    """The one way this tool writes a time: RFC 3339 in UTC with a `Z`, to the second
    (`2026-11-22T20:41:22Z`: stamps, Events, reports); with `fraction`, to the millisecond
    (`2026-11-22T20:41:22.123Z`: log lines)."""
    moment = moment.astimezone(UTC)
    if not fraction:
        return moment.strftime(STAMP_FORMAT)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


#: Hold annotations that Karpenter or cluster-autoscaler read on a node.
KNOWN_HOLD_KEYS = (
    "karpenter.sh/do-not-disrupt",  # Karpenter v0.32 and later
    "karpenter.sh/do-not-consolidate",  # Karpenter before v0.32
    "cluster-autoscaler.kubernetes.io/scale-down-disabled",  # cluster-autoscaler
)
#: This tool's own annotations live under this prefix; none of them is a hold annotation.
OWN_PREFIX = "node-holder.dev/"


def parse_annotation_keys(text: str) -> tuple[str, ...]:
    """A comma-separated list of annotation keys, in order, without repeats; spaces around
    an item are trimmed, a space inside one is an error (`do not disrupt` is no key)."""
    fix = f"use comma-separated keys such as {DEFAULT_ANNOTATION}"
    keys: list[str] = []
    for raw in text.split(","):
        key = raw.strip()
        if not key:
            if raw or "," in text:
                raise Invalid("has an empty item", fix)
            continue
        if any(c.isspace() for c in key):
            raise Invalid(f"has a space inside the key {key!r}", fix)
        if problem := qualified_name_problem(key):
            raise Invalid(f"is not a valid annotation key ({problem})", fix)
        if key.startswith(OWN_PREFIX):
            raise Invalid(f"names {key!r}, one of this tool's own annotations", fix)
        if key not in keys:
            keys.append(key)
    if not keys:
        raise Invalid("names no annotation key", fix)
    return tuple(keys)


def parse_selector_text(text: str) -> Selector:
    try:
        return parse_selector(text)
    except SelectorError as exc:
        raise Invalid(
            f"is not a label selector ({exc})",
            "use e.g. 'karpenter.sh/nodepool' or 'karpenter.sh/nodepool in (batch,default)'",
        ) from None


def parse_label_key(text: str) -> str:
    key = text.strip()
    if problem := qualified_name_problem(key):
        raise Invalid(f"is not a valid label key ({problem})", f"use e.g. {DEFAULT_GROUP_LABEL}")
    return key


def parse_number(text: str, low: float, high: float, whole: bool = False) -> float:
    """A number within bounds; with `whole`, a whole number (kept exact: every bound here
    is far below 2**53)."""
    raw = text.strip()
    what = "whole number" if whole else "number"
    fix = f"use a {what} from {low:g} to {high:g}"
    pattern = r"[+]?[0-9]+" if whole else r"[+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    if not re.fullmatch(pattern, raw, re.ASCII):
        raise Invalid(f"is not a {what}", fix)
    value = float(raw)
    if not low <= value <= high:
        raise Invalid("is out of range", fix)
    return value


_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")


def parse_bool(text: str) -> bool:
    raw = text.strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise Invalid("is not a boolean", "use true or false")


def parse_choice(text: str, choices: tuple[str, ...]) -> str:
    raw = text.strip().lower()
    if raw not in choices:
        raise Invalid(f"is not one of {', '.join(choices)}", f"use one of {', '.join(choices)}")
    return raw


@dataclass(frozen=True)
class ObjectRef:
    """A namespaced object by namespace and name: the CronJob of `release --suspend-cronjob`,
    the ConfigMap of `--settings-from`."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


NAMESPACE_MAX = 63
NAME_MAX = 253  # a DNS subdomain: a node's name, a ConfigMap's
#: Each kind a `NAMESPACE/NAME` option names: its longest name, and an example.
_REF_KINDS = {
    "CronJob": (52, "node-holder/node-holder"),  # the Jobs' derived names must fit in 63
    "ConfigMap": (NAME_MAX, SETTINGS_CONFIGMAP),
}


def parse_ref(text: str, kind: str) -> ObjectRef | None:
    """`namespace/name` of a `kind` object; empty means none."""
    if not text.strip():
        return None
    namespace, sep, name = text.strip().partition("/")
    name_max, example = _REF_KINDS[kind]
    fix = f"use NAMESPACE/NAME of the {kind}, e.g. {example}"
    if not sep or not namespace or not name or "/" in name:
        raise Invalid("is not NAMESPACE/NAME", fix)
    if not re.fullmatch(DNS_LABEL, namespace) or len(namespace) > NAMESPACE_MAX:
        raise Invalid(f"names {namespace!r}, which is not a namespace name", fix)
    if not re.fullmatch(DNS_SUBDOMAIN, name) or len(name) > name_max:
        raise Invalid(f"names {name!r}, which is not a {kind} name", fix)
    return ObjectRef(namespace, name)


def parse_node_name(text: str) -> str:
    """A Node's name as the API server takes it (a DNS subdomain), so that a typo is bad input
    said before any request, not a 404 or a list of every node."""
    if not re.fullmatch(DNS_SUBDOMAIN, text) or len(text) > NAME_MAX:
        raise Invalid("is not a node name", "give a name as `kubectl get nodes` prints it")
    return text


def check_max_hold(
    hold: HoldSettings, option: str = "--max-hold", env: str | None = "HOLD_MAX_DURATION"
) -> None:
    if hold.max_hold is not None and hold.max_hold < hold.hold_duration:
        label = f"{option} ({env})" if env else option
        raise ConfigError(
            f"{label}: {format_duration(hold.max_hold)} is shorter than the hold "
            f"duration ({format_duration(hold.hold_duration)}); use a value of at least the hold "
            "duration, or leave it unset"
        )


def check_mechanism(hold: HoldSettings) -> None:
    """A budget entry holds a whole NodePool: a window must be the cluster or one NodePool."""
    if hold.scope is Scope.NODE:
        finer = "--hold-scope (HOLD_SCOPE) node"
    elif hold.scope is Scope.GROUP and hold.group_label != DEFAULT_GROUP_LABEL:
        finer = f"--group-label (HOLD_GROUP_LABEL) {hold.group_label}"
    else:
        selector = hold.node_selector
        finer = f"--node-selector (HOLD_NODE_SELECTOR) {selector.text!r}" if selector else ""
    if hold.mechanism.budgets and finer:
        raise ConfigError(
            f"--mechanism (NODE_HOLDER_MECHANISM) {hold.mechanism}: {finer} holds less than a "
            "whole NodePool, which a budget cannot; use --hold-scope cluster, or group with "
            f"--group-label {DEFAULT_GROUP_LABEL}, and no --node-selector; or --mechanism "
            "annotation"
        )
