"""Settings: frozen dataclasses, and the parsing that turns raw option text into them.

Every bad value becomes one `ConfigError` line naming the option, its
environment variable and valid examples, raised before any API call (exit 2).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum

from reconcile.names import qualified_name_problem
from reconcile.selectors import EVERYTHING, Selector, SelectorError, parse_selector

DEFAULT_ANNOTATION = "karpenter.sh/do-not-disrupt"
DEFAULT_GROUP_LABEL = "karpenter.sh/nodepool"
DEFAULT_HOLD = timedelta(minutes=20)
#: Our own annotation: which hold annotations on this node this tool put there.
OWNERSHIP_MARKER = "node-holder.dev/owned-annotations"
HOLD_VALUE = "true"


class ConfigError(ValueError):
    """Bad input or configuration: one line, exit code 2, no API call made."""


class Scope(StrEnum):
    CLUSTER = "cluster"
    GROUP = "group"
    NODE = "node"


class Clock(StrEnum):
    SERVER = "server"
    LOCAL = "local"


class Output(StrEnum):
    TEXT = "text"
    JSON = "json"


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

    @property
    def label_keys(self) -> frozenset[str]:
        """Labels the decision reads; a compact node view keeps only these."""
        keys = self.trigger_selector.keys | self.node_selector.keys
        if self.scope is Scope.GROUP:
            keys |= {self.group_label}
        return keys


@dataclass(frozen=True)
class RunSettings:
    """How one run behaves towards the API server."""

    dry_run: bool = False
    clock: Clock = Clock.SERVER
    timeout: timedelta = timedelta(seconds=45)
    workers: int = 8
    qps: float = 1000.0  # a ceiling: the 8 workers bound the rate first (README, "Performance")
    page_size: int = 500
    events: bool = True
    output: Output = Output.TEXT


@dataclass(frozen=True)
class ClusterAccess:
    """Where the API server is; None everywhere means in-cluster or ~/.kube/config."""

    kubeconfig: str | None = None
    context: str | None = None
    request_timeout: float = 10.0


# --- durations -------------------------------------------------------------

_UNIT_SECONDS = {"w": 604800, "d": 86400, "h": 3600, "m": 60, "s": 1}
_GO_DURATION_RE = re.compile(r"^(?:\d+(?:\.\d+)?[wdhms])+$")
_GO_PART_RE = re.compile(r"(\d+(?:\.\d+)?)([wdhms])")
_ISO_DURATION_RE = re.compile(
    r"^P(?:(?P<w>\d+(?:\.\d+)?)W)?(?:(?P<d>\d+(?:\.\d+)?)D)?"
    r"(?:T(?:(?P<h>\d+(?:\.\d+)?)H)?(?:(?P<m>\d+(?:\.\d+)?)M)?(?:(?P<s>\d+(?:\.\d+)?)S)?)?$",
    re.IGNORECASE,
)
DURATION_EXAMPLES = "90s, 20m, 1h30m, PT20M, or a bare number of minutes"


def parse_duration(text: str) -> timedelta:
    """Parse `90s`, `20m`, `1h30m`, `2d`, ISO 8601 `PT20M`, or a bare number of minutes.

    A bare number means minutes because the original Helm chart's
    `holdDuration: 20` meant twenty minutes.
    """
    raw = text.strip()
    if not raw:
        raise ValueError("is empty")
    if raw.startswith("-"):
        raise ValueError("must be positive")
    seconds: float
    if re.fullmatch(r"\d+(?:\.\d+)?", raw):
        seconds = float(raw) * 60
    elif _GO_DURATION_RE.match(raw.lower()):
        seconds = sum(float(n) * _UNIT_SECONDS[u] for n, u in _GO_PART_RE.findall(raw.lower()))
    elif (m := _ISO_DURATION_RE.match(raw)) and any(m.groupdict().values()):
        if raw.upper().endswith("T"):
            raise ValueError("is not a duration")
        seconds = sum(float(v) * _UNIT_SECONDS[k] for k, v in m.groupdict().items() if v)
    else:
        raise ValueError("is not a duration")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError("must be positive")
    return timedelta(seconds=seconds)


def format_duration(delta: timedelta) -> str:
    """Human duration like `1h30m`, `20m`, `45s`, `2d3h`; negative gets a `-`."""
    total = round(delta.total_seconds())
    sign = "-" if total < 0 else ""
    total = abs(total)
    if total == 0:
        return "0s"
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        amount, total = divmod(total, size)
        if amount:
            parts.append(f"{amount}{unit}")
    return sign + "".join(parts[:2])


# --- option parsing ----------------------------------------------------------


def _label(option: str, env: str | None) -> str:
    return f"{option} ({env})" if env else option


def duration_option(text: str, option: str, env: str | None) -> timedelta:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise ConfigError(
            f"{_label(option, env)}: {text!r} {exc}; use a positive duration such as "
            f"{DURATION_EXAMPLES}"
        ) from None


def annotation_keys_option(
    values: tuple[str, ...] | list[str], option: str, env: str
) -> tuple[str, ...]:
    """Repeatable option whose env var is comma-separated; keys keep their order, no repeats."""
    keys: list[str] = []
    for value in values:
        for raw in value.split(","):
            key = raw.strip()
            if not key:
                continue
            problem = qualified_name_problem(key)
            if problem:
                raise ConfigError(
                    f"{_label(option, env)}: {key!r} is not a valid annotation key ({problem}); "
                    f"use a key such as {DEFAULT_ANNOTATION}"
                )
            if key == OWNERSHIP_MARKER:
                raise ConfigError(
                    f"{_label(option, env)}: {key!r} is this tool's own ownership marker; "
                    f"use a hold annotation such as {DEFAULT_ANNOTATION}"
                )
            if key not in keys:
                keys.append(key)
    if not keys:
        raise ConfigError(
            f"{_label(option, env)}: no annotation key given; use e.g. {DEFAULT_ANNOTATION}"
        )
    return tuple(keys)


def selector_option(text: str | None, option: str, env: str) -> Selector:
    try:
        return parse_selector(text)
    except SelectorError as exc:
        raise ConfigError(
            f"{_label(option, env)}: {text!r} is not a label selector ({exc}); "
            "use e.g. 'karpenter.sh/nodepool' or 'karpenter.sh/nodepool in (batch,default)'"
        ) from None


def label_key_option(text: str, option: str, env: str) -> str:
    key = text.strip()
    problem = qualified_name_problem(key)
    if problem:
        raise ConfigError(
            f"{_label(option, env)}: {text!r} is not a valid label key ({problem}); "
            f"use e.g. {DEFAULT_GROUP_LABEL}"
        )
    return key


def int_option(text: str, option: str, env: str | None, low: int, high: int) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ConfigError(
            f"{_label(option, env)}: {text!r} is not a whole number; "
            f"use a number from {low} to {high}"
        ) from None
    if not low <= value <= high:
        raise ConfigError(
            f"{_label(option, env)}: {value} is out of range; use a number from {low} to {high}"
        )
    return value


def number_option(text: str, option: str, env: str | None, low: float, high: float) -> float:
    try:
        value = float(str(text).strip())
    except ValueError:
        value = float("nan")
    if not low <= value <= high:
        raise ConfigError(
            f"{_label(option, env)}: {text!r} is not a number from {low:g} to {high:g}"
        )
    return value


def check_max_hold(
    hold: HoldSettings, option: str = "--max-hold", env: str = "HOLD_MAX_DURATION"
) -> None:
    if hold.max_hold is not None and hold.max_hold < hold.hold_duration:
        raise ConfigError(
            f"{_label(option, env)}: {format_duration(hold.max_hold)} is shorter than the hold "
            f"duration ({format_duration(hold.hold_duration)}); use a value of at least the hold "
            "duration, or leave it unset"
        )
