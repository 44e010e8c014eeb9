"""Every setting, defined once: its flag, its environment variable, its typed parser.

A flag and its environment variable go through the same `convert()`, so the same text
gets the same verdict wherever it comes from: a value or one ConfigError line naming
both spellings and a fix (exit 2, before any API call). An environment variable that is
set but empty is read as empty (click would treat it as unset), and list-valued
variables are split on commas by the parser, never on whitespace by click.

Commands declare only the settings they use (`settings_for`): an environment variable of
a setting the command does not use is never read, and its flag is refused by click. Every
command knows every setting's variable (`check_environment`): an unknown `NODE_HOLDER_*`
variable is a mistake (exit 2), an unknown `HOLD_*` one gets a warning.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import click

from reconcile.cli.logs import log, logging_option
from reconcile.rule import settings as s

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


# --- typed parameters --------------------------------------------------------------


class SettingType(click.ParamType):
    """A click type whose failures are one line: `--flag (ENV): 'text' problem; fix`."""

    name = "text"

    def parse(self, text: str) -> Any:
        raise NotImplementedError

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, os.PathLike):
            value = os.fspath(value)  # in-process callers pass paths; a shell passes text
        if not isinstance(value, str):
            return value  # a default already converted, or a flag's own value
        try:
            return self.parse(value)
        except s.Invalid as exc:
            raise s.ConfigError(f"{label(param)}: {value!r} {exc}") from None

    def split_envvar_value(self, rv: str) -> tuple[str, ...]:
        return (rv,)  # the parser splits lists itself, the same way for flag and env var


def label(param: click.Parameter | None) -> str:
    if param is None:
        return "value"
    flag = max(param.opts, key=len) if param.opts else str(param.name)
    env = getattr(param, "envvar", None)
    return f"{flag} ({env})" if isinstance(env, str) else flag


class Duration(SettingType):
    name = "duration"

    def __init__(
        self, bounds: s.DurationRange, optional: bool = False, bare_minutes: bool = False
    ) -> None:
        self.bounds = bounds
        self.optional = optional
        self.bare_minutes = bare_minutes  # the hold duration only: `HOLD_DURATION=20`

    def parse(self, text: str) -> timedelta | None:
        if self.optional:
            return s.parse_optional_duration(text, self.bounds)
        return s.parse_duration(text, self.bounds, bare_minutes=self.bare_minutes)


class AnnotationKeys(SettingType):
    name = "keys"

    def parse(self, text: str) -> tuple[str, ...]:
        return s.parse_annotation_keys(text)


class LabelSelector(SettingType):
    name = "selector"

    def parse(self, text: str) -> s.Selector:
        return s.parse_selector_text(text)


class LabelKey(SettingType):
    name = "label"

    def parse(self, text: str) -> str:
        return s.parse_label_key(text)


class Choice(SettingType):
    name = "choice"

    def __init__(self, choices: Iterable[str]) -> None:
        self.choices = tuple(str(c) for c in choices)

    def parse(self, text: str) -> str:
        return s.parse_choice(text, self.choices)

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str:
        return "[" + "|".join(self.choices) + "]"


class Integer(SettingType):
    name = "integer"

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high

    def parse(self, text: str) -> int:
        return s.parse_int(text, self.low, self.high)


class Number(SettingType):
    name = "number"

    def __init__(self, low: float, high: float, auto: bool = False) -> None:
        self.low, self.high, self.auto = low, high, auto

    def parse(self, text: str) -> float | None:
        return s.parse_number(text, self.low, self.high, self.auto)


class Boolean(SettingType):
    name = "boolean"

    def parse(self, text: str) -> bool:
        return s.parse_bool(text)


class Verbosity(SettingType):
    """`-v`/`-vv` count; NODE_HOLDER_VERBOSE says the same with a number."""

    name = "verbosity"

    def parse(self, text: str) -> int:
        return s.parse_int(text, 0, 3)


class CronJobName(SettingType):
    """`NAMESPACE/NAME` of a CronJob; empty: none."""

    name = "cronjob"

    def parse(self, text: str) -> s.CronJobRef | None:
        return s.parse_cronjob_ref(text)


class Text(SettingType):
    """Free text (a path, a context name) that must not be empty when given."""

    name = "text"

    def parse(self, text: str) -> str:
        if not text.strip():
            raise s.Invalid("is empty", "give a value or unset it")
        return text


class _SettingOption(click.Option):
    """An option whose environment variable is read as-is: present but empty is ''.

    Boolean flags keep click's own BOOL type for the flag spelling (click insists), and
    parse their environment variable with the setting's own Boolean parser.
    """

    def __init__(self, *args: Any, setting_type: SettingType, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.setting_type = setting_type

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        if isinstance(self.envvar, str) and self.envvar in os.environ:
            return os.environ[self.envvar]
        return None

    def value_from_envvar(self, ctx: click.Context) -> Any:
        rv = self.resolve_envvar_value(ctx)
        if rv is None:
            return None
        if self.count or self.is_flag:
            return self.setting_type.convert(rv, self, ctx)
        return (rv,) if self.multiple else rv


# --- the settings ---------------------------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One setting: the only place its flag, environment variable and parser are written."""

    name: str
    flag: str
    env: str
    type: SettingType
    default: str | None
    help: str
    metavar: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def option(self) -> Decorator:
        extra = dict(self.extra)
        decls = [extra.pop("short"), self.flag] if "short" in extra else [self.flag]
        kwargs: dict[str, Any] = {
            "cls": _SettingOption,
            "setting_type": self.type,
            "envvar": self.env,
            "show_envvar": True,
            "type": click.BOOL if extra.get("is_flag") or "/" in self.flag else self.type,
            "default": self.default,
            "show_default": self.default not in (None, ""),
            "metavar": self.metavar,
            "help": self.help,
        }
        kwargs.update(extra)
        if kwargs.get("multiple") and isinstance(kwargs["default"], str):
            kwargs["default"] = (kwargs["default"],)
        return click.option(*decls, self.name, **kwargs)


SETTINGS: tuple[Setting, ...] = (
    Setting(
        "hold_duration",
        "--hold-duration",
        "HOLD_DURATION",
        Duration(s.HOLD_RANGE, bare_minutes=True),
        "20m",
        "Hold while the youngest node is younger than this: 90s, 20m, 1h30m, PT20M, or a bare "
        "number of minutes; from 1s to 7d (longer is almost surely a mistake).",
        "DURATION",
    ),
    Setting(
        "annotations",
        "--annotation",
        "HOLD_ANNOTATION",
        AnnotationKeys(),
        s.DEFAULT_ANNOTATION,
        "Hold annotation(s) to set: repeat the flag or separate keys with commas. "
        "karpenter.sh/do-not-consolidate for Karpenter before v0.32; "
        "cluster-autoscaler.kubernetes.io/scale-down-disabled for cluster-autoscaler.",
        "KEYS",
        {"multiple": True},
    ),
    Setting(
        "hold_scope",
        "--hold-scope",
        "HOLD_SCOPE",
        Choice(s.Scope),
        "cluster",
        "cluster: a new node holds every node; group: only the nodes of its group "
        "(--group-label); node: each node is held until it is one hold duration old.",
    ),
    Setting(
        "group_label",
        "--group-label",
        "HOLD_GROUP_LABEL",
        LabelKey(),
        s.DEFAULT_GROUP_LABEL,
        "Label whose value forms a group for --hold-scope group; nodes without it form one "
        "group of their own.",
        "LABEL",
    ),
    Setting(
        "trigger_selector",
        "--trigger-selector",
        "HOLD_TRIGGER_SELECTOR",
        LabelSelector(),
        "",
        "Label selector: only these nodes' arrival starts a hold (e.g. karpenter.sh/nodepool). "
        "Empty: every node.",
        "SELECTOR",
    ),
    Setting(
        "node_selector",
        "--node-selector",
        "HOLD_NODE_SELECTOR",
        LabelSelector(),
        "",
        "Label selector: only these nodes get held. Empty: every node.",
        "SELECTOR",
    ),
    Setting(
        "max_hold",
        "--max-hold",
        "HOLD_MAX_DURATION",
        Duration(s.HOLD_RANGE, optional=True),
        "",
        "Hard cap: no node is held continuously for longer than this (plus one run interval), "
        "however nodes come and go; then the window stays free for one hold duration. "
        "Empty: no cap.",
        "DURATION",
    ),
    Setting(
        "clock",
        "--clock",
        "NODE_HOLDER_CLOCK",
        Choice(s.Clock),
        "server",
        "Whose clock is now: the API server's (its Date header) or this machine's.",
    ),
    Setting(
        "timeout",
        "--timeout",
        "NODE_HOLDER_TIMEOUT",
        Duration(s.TIMEOUT_RANGE),
        "45s",
        "Deadline for the whole run, from 1s to 1h; keep it below the CronJob's "
        "activeDeadlineSeconds.",
        "DURATION",
    ),
    Setting(
        "request_timeout",
        "--request-timeout",
        "NODE_HOLDER_REQUEST_TIMEOUT",
        Duration(s.REQUEST_TIMEOUT_RANGE),
        "10s",
        "Give up on one request after this long (it is then retried within --timeout); "
        "from 100ms to 10m.",
        "DURATION",
    ),
    Setting(
        "page_size",
        "--page-size",
        "NODE_HOLDER_PAGE_SIZE",
        Integer(1, 10_000),
        "500",
        "At most this many nodes per list page (metadata only; pages are also sized to "
        "about 4 MB).",
        "N",
    ),
    Setting(
        "dry_run",
        "--dry-run",
        "NODE_HOLDER_DRY_RUN",
        Boolean(),
        None,
        "Change nothing; print the decision and each patch that would be sent.",
        extra={"is_flag": True, "flag_value": True, "default": False},
    ),
    Setting(
        "workers",
        "--workers",
        "NODE_HOLDER_WORKERS",
        Integer(1, 64),
        "8",
        "Patches in flight at once.",
        "N",
    ),
    Setting(
        "qps",
        "--qps",
        "NODE_HOLDER_QPS",
        Number(0, 10_000, auto=True),
        "auto",
        "Node writes a second at most; auto: max(200, nodes/300). Halved on 429 and on slow "
        "answers, then recovers slowly; reconcile ends a hold at half the rate. 0: no limit.",
        "N",
    ),
    Setting(
        "events",
        "--events/--no-events",
        "NODE_HOLDER_EVENTS",
        Boolean(),
        None,
        "Record a Kubernetes Event when a hold starts, grows or ends.",
        extra={"default": True, "show_default": True},
    ),
    Setting(
        "kubeconfig",
        "--kubeconfig",
        "KUBECONFIG",
        Text(),
        None,
        "Kubeconfig file(s), ':'-separated as for kubectl. Default: the in-cluster service "
        "account inside a pod, else ~/.kube/config.",
        "PATH",
    ),
    Setting(
        "context",
        "--context",
        "NODE_HOLDER_CONTEXT",
        Text(),
        None,
        "Kubeconfig context. Default: the current context.",
        "NAME",
    ),
    Setting(
        "suspend_cronjob",
        "--suspend-cronjob",
        "NODE_HOLDER_SUSPEND_CRONJOB",
        CronJobName(),
        "",
        "First suspend this CronJob and wait until its running Jobs end, so that no run "
        "puts holds back after the release (the Helm chart's uninstall hook).",
        "NAMESPACE/NAME",
    ),
    Setting(
        "output",
        "--output",
        "NODE_HOLDER_OUTPUT",
        Choice(s.Output),
        "text",
        "Results on stdout: text lines, or JSON lines (one per patch as it lands, then a "
        "summary as the last line; status: one whole document).",
    ),
    Setting(
        "log_format",
        "--log-format",
        "NODE_HOLDER_LOG_FORMAT",
        Choice(s.Output),
        "text",
        "Logs and errors on stderr: text or JSON lines.",
        extra={"is_eager": True, "callback": logging_option},
    ),
    Setting(
        "verbose",
        "--verbose",
        "NODE_HOLDER_VERBOSE",
        Verbosity(),
        "0",
        "More logs (-v: info, -vv: debug) and tracebacks on errors; the env var takes 0-3.",
        extra={
            "short": "-v",
            "count": True,
            "type": None,
            "default": 0,
            "show_default": False,
            "is_eager": True,
            "callback": logging_option,
        },
    ),
)

BY_NAME = {setting.name: setting for setting in SETTINGS}
BY_ENV = {setting.env: setting for setting in SETTINGS}

HOLD = (
    "hold_duration",
    "annotations",
    "hold_scope",
    "group_label",
    "trigger_selector",
    "node_selector",
    "max_hold",
)
READ = ("clock", "timeout", "request_timeout", "page_size")
WRITE = ("dry_run", "workers", "qps", "events")
ACCESS = ("kubeconfig", "context")
OUTPUT = ("output", "log_format", "verbose")
PIN = ("annotations", "dry_run", "timeout", "request_timeout", "page_size", *ACCESS, *OUTPUT)

#: Which settings each command uses; nothing else is read for it.
COMMANDS: dict[str, tuple[str, ...]] = {
    "reconcile": HOLD + WRITE + READ + ACCESS + OUTPUT,
    "status": HOLD + READ + ACCESS + OUTPUT,
    # release needs no hold duration, scope, selector or cap: it removes every hold this tool
    # owns. --annotation names custom hold keys it may remove besides the well-known ones.
    "release": ("annotations", "suspend_cronjob", *WRITE, *READ, *ACCESS, *OUTPUT),
    # A person's pin on the named nodes: no hold settings, no clock, no Events.
    "pin": PIN,
    "unpin": PIN,
    "simulate": (*HOLD, "output", "log_format", "verbose"),
}


def settings_for(command: str) -> Decorator:
    """Decorate a command with exactly the options it uses, each defined once above, and
    check the environment's variable names when it runs (so `--help` always answers)."""
    decorators = [BY_NAME[name].option() for name in COMMANDS[command]]

    def apply(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def checked(*args: Any, **params: Any) -> Any:
            for warning in check_environment(os.environ):
                log.warning("%s", warning)
            return func(*args, **params)

        for decorator in reversed(decorators):
            checked = decorator(checked)
        return checked

    return apply


def env_names(command: str) -> tuple[str, ...]:
    return tuple(BY_NAME[name].env for name in COMMANDS[command])


#: The project's variables that are not settings: the test suite's (docs/testing.md).
NOT_SETTINGS = ("NODE_HOLDER_REQUIRE_TOOLS", "NODE_HOLDER_E2E_KUBECONFIG")
#: What Kubernetes sets in a pod for a Service named `node-holder...` or `hold...`.
_SERVICE_LINK = re.compile(r"^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_[A-Z]+\w*)?)$")


def check_environment(environ: Mapping[str, str]) -> list[str]:
    """Warnings for unknown `HOLD_*` variables; ConfigError for an unknown `NODE_HOLDER_*`
    one (`NODE_HOLDER_DRYRUN=true` would otherwise run for real), naming the closest."""
    found = [
        name
        for name in sorted(environ, key=lambda n: not n.startswith("NODE_HOLDER_"))
        if name.startswith(("NODE_HOLDER_", "HOLD_"))
        and name not in BY_ENV
        and name not in NOT_SETTINGS
        and not _SERVICE_LINK.match(name)
    ]
    warnings = []
    for name in found:
        closest = difflib.get_close_matches(name, list(BY_ENV), n=1, cutoff=0)[0]
        if name.startswith("NODE_HOLDER_"):
            raise s.ConfigError(
                f"{name} is not a node-holder setting (the closest is {closest}); "
                "fix its name or unset it"
            )
        warnings.append(
            f"{name} is not a node-holder setting and is ignored (the closest is {closest})"
        )
    return warnings


_ENV_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
assert all(_ENV_RE.match(setting.env) for setting in SETTINGS)
