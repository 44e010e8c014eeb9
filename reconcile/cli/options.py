"""Every option, defined once: its flag, its environment variable, its typed parser.

A flag and its variable go through the same `convert()`: the same text, the same value or the
same one-line ConfigError (exit 2, before any API call). A `Setting[T]` parses to a T, reaches
a command as `parsed[SETTING]` and a settings dataclass typed. A command reads only the settings
it uses (`COMMANDS`); docs/reference.md#settings says the rules.
"""

from __future__ import annotations

import difflib
import functools
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from enum import StrEnum
from typing import Any, Generic, TypeVar, cast

import click
from click.core import ParameterSource

from reconcile.cli.logs import log, logging_option
from reconcile.rule import settings as s
from reconcile.rule.settings import (
    ClusterAccess,
    HoldSettings,
    Mode,
    PrometheusAccess,
    RunSettings,
)

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)
Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


# --- how text becomes a value ----------------------------------------------------------


class Kind(click.ParamType, Generic[T]):
    """A setting's parser, as a click type whose failures are one line:
    `--flag (ENV): 'text' problem; fix`. `facts` (bounds, choices) tell
    scripts/chart_schema.py the grammar, so that the chart refuses the same text."""

    def __init__(self, name: str, parse: Callable[[str], T], **facts: Any) -> None:
        self.name, self.parse, self.facts = name, parse, facts

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> T:
        if not isinstance(value, str):
            return cast(T, value)  # a default already converted, or a flag's own value
        try:
            return self.parse(value)
        except s.Invalid as exc:
            raise s.ConfigError(f"{label(param)}: {value!r} {exc}") from None

    def split_envvar_value(self, rv: str) -> tuple[str, ...]:
        return (rv,)  # the parser splits lists itself, the same way for flag and env var

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str | None:
        choices = self.facts.get("choices")
        return "[" + "|".join(choices) + "]" if choices else self.facts.get("metavar")


def label(param: click.Parameter | None) -> str:
    if param is None:
        return "value"
    if isinstance(param, click.Argument):  # NODE...: the argument as --help names it
        return (param.metavar or str(param.name)).rstrip(".")
    flag = max(param.opts, key=len) if param.opts else str(param.name)
    env = getattr(param, "envvar", None)
    return f"{flag} ({env})" if isinstance(env, str) else flag


def duration(bounds: s.DurationRange, bare_minutes: bool = False) -> Kind[timedelta]:
    """`bare_minutes`: the hold duration only (the original chart's `HOLD_DURATION=20`)."""
    parse = functools.partial(s.parse_duration, bounds=bounds, bare_minutes=bare_minutes)
    return Kind("duration", parse, bounds=bounds, optional=False, bare_minutes=bare_minutes)


#: `pin`/`unpin`'s NODE arguments: a name the API server could not have is said before a request.
NODE_NAME = Kind("NODE", s.parse_node_name)


def optional_duration(bounds: s.DurationRange) -> Kind[timedelta | None]:
    """Empty means "not set" (the manifests' way to say no cap)."""

    def parse(text: str) -> timedelta | None:
        return s.parse_duration(text, bounds) if text.strip(s.SPACE) else None

    return Kind("duration", parse, bounds=bounds, optional=True, bare_minutes=False)


def choice(enum: type[E]) -> Kind[E]:
    choices = tuple(map(str, enum))
    return Kind("choice", lambda text: enum(s.parse_choice(text, choices)), choices=choices)


def integer(low: int, high: int) -> Kind[int]:
    def parse(text: str) -> int:
        return int(s.parse_number(text, low, high, whole=True))

    return Kind("integer", parse, low=low, high=high, metavar="N")


def number(low: float, high: float) -> Kind[float]:
    parse = functools.partial(s.parse_number, low=low, high=high)
    return Kind("number", parse, low=low, high=high, metavar="N")


def _given(text: str) -> str:
    if not text.strip():
        raise s.Invalid("is empty", "give a value or unset it")
    return text


BOOLEAN = Kind("boolean", s.parse_bool)
KEYS = Kind("keys", s.parse_annotation_keys)
SELECTOR = Kind("selector", s.parse_selector_text)
LABEL = Kind("label", s.parse_label_key)
#: `NAMESPACE/NAME`; empty: none.
CRONJOB = Kind("cronjob", functools.partial(s.parse_ref, kind="CronJob"))
CONFIGMAP = Kind("configmap", functools.partial(s.parse_ref, kind="ConfigMap"))
#: A path, a context name, a time: as given, not empty; absent: None.
TEXT: Kind[str | None] = Kind("text", _given)
#: simulate's --compare and --sweep: parsed by simulate, against the hold settings.
COLUMNS: Kind[str | None] = Kind("columns", str)


class _SettingOption(click.Option):
    """An option whose environment variable is read as-is: present but empty is ''.

    Switches keep click's own BOOL type for the flag spelling (click insists), and parse
    their environment variable with the setting's own parser. A repeatable option's values
    (a tuple of keys per flag) come as one tuple, in order, without repeats.
    """

    def __init__(self, *args: Any, kind: Kind[Any], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.kind = kind

    def value_from_envvar(self, ctx: click.Context) -> Any:
        rv = os.environ.get(self.envvar) if isinstance(self.envvar, str) else None
        if rv is None:
            return None
        if self.count or self.is_flag:
            return self.kind.convert(rv, self, ctx)
        return (rv,) if self.multiple else rv

    def process_value(self, ctx: click.Context, value: Any) -> Any:
        value = super().process_value(ctx, value)
        return tuple(dict.fromkeys(k for keys in value for k in keys)) if self.multiple else value


@dataclass(frozen=True, eq=False)  # each one is itself: compared and hashed by identity
class Setting(Generic[T]):
    """One option: the only place its flag, environment variable and parser are written."""

    flag: str  # `--events/--no-events`: an on/off switch
    env: str | None  # None: a flag of simulate's, never read from the environment
    kind: Kind[T]
    help: str
    default: str | None = None  # text, parsed like any other (click's own, for switches)
    metavar: str | None = None  # None: the kind's
    extra: Mapping[str, Any] = field(default_factory=dict)  # more for click.option

    @property
    def name(self) -> str:
        """The option's parameter name: `--hold-duration` is `hold_duration`."""
        return self.flag.split("/")[0].lstrip("-").replace("-", "_")

    def option(self) -> Decorator:
        extra = dict(self.extra)
        decls = [extra.pop("short"), self.flag] if "short" in extra else [self.flag]
        switch = extra.get("is_flag") or "/" in self.flag
        kwargs: dict[str, Any] = {
            "cls": _SettingOption,
            "kind": self.kind,
            "envvar": self.env,
            "show_envvar": self.env is not None,
            "type": click.BOOL if switch else self.kind,
            "default": self.default,
            "show_default": self.default not in (None, ""),
            "metavar": self.metavar,
            "help": self.help,
            **extra,
        }
        if kwargs.get("multiple") and isinstance(kwargs["default"], str):
            kwargs["default"] = (kwargs["default"],)
        return click.option(*decls, self.name, **kwargs)


# --- the settings ---------------------------------------------------------------------

HOLD_DURATION = Setting(
    "--hold-duration",
    "HOLD_DURATION",
    duration(s.HOLD_RANGE, bare_minutes=True),
    "Hold while the youngest node is younger than this: 90s, 20m, 1h30m, 2d, or a bare "
    "number of minutes; from 1s to 7d (longer is almost surely a mistake). A NodePool's "
    'node-holder.dev/hold-duration annotation ("0": never) wins for its nodes.',
    "20m",
)
ANNOTATION = Setting(
    "--annotation",
    "HOLD_ANNOTATION",
    KEYS,
    "Hold annotation(s) to set: repeat the flag or separate keys with commas. "
    "karpenter.sh/do-not-consolidate for Karpenter before v0.32; "
    "cluster-autoscaler.kubernetes.io/scale-down-disabled for cluster-autoscaler.",
    s.DEFAULT_ANNOTATION,
    extra={"multiple": True},
)
HOLD_SCOPE = Setting(
    "--hold-scope",
    "HOLD_SCOPE",
    choice(s.Scope),
    "cluster: a new node holds every node; group: only the nodes of its group "
    "(--group-label); node: each node is held until it is one hold duration old.",
    "cluster",
)
GROUP_LABEL = Setting(
    "--group-label",
    "HOLD_GROUP_LABEL",
    LABEL,
    "Label whose value forms a group for --hold-scope group; nodes without it form one "
    "group of their own.",
    s.DEFAULT_GROUP_LABEL,
)
TRIGGER_SELECTOR = Setting(
    "--trigger-selector",
    "HOLD_TRIGGER_SELECTOR",
    SELECTOR,
    "Label selector: only these nodes' arrival starts a hold (e.g. karpenter.sh/nodepool). "
    "Empty: every node.",
    "",
)
NODE_SELECTOR = Setting(
    "--node-selector",
    "HOLD_NODE_SELECTOR",
    SELECTOR,
    "Label selector: only these nodes get held. Empty: every node.",
    "",
)
MAX_HOLD = Setting(
    "--max-hold",
    "HOLD_MAX_DURATION",
    optional_duration(s.HOLD_RANGE),
    "Hard cap: no node is held continuously for longer than this (plus one run interval), "
    "however nodes come and go; then the window stays free for one hold duration. "
    "Empty: no cap. A NodePool's node-holder.dev/max-hold annotation wins for its nodes.",
    "",
)
MECHANISM = Setting(
    "--mechanism",
    "NODE_HOLDER_MECHANISM",
    choice(s.Mechanism),
    "annotation: on every held node; budget: a disruption budget entry on each held Karpenter "
    "v1 NodePool (cluster scope, or group by karpenter.sh/nodepool; no --node-selector); auto: "
    "budgets for NodePools' nodes, annotations for every other node.",
    "annotation",
)
TIMEOUT = Setting(
    "--timeout",
    "NODE_HOLDER_TIMEOUT",
    duration(s.TIMEOUT_RANGE),
    "Deadline for the whole run, from 1s to 1h; keep it below the CronJob's activeDeadlineSeconds.",
    "45s",
)
REQUEST_TIMEOUT = Setting(
    "--request-timeout",
    "NODE_HOLDER_REQUEST_TIMEOUT",
    duration(s.REQUEST_TIMEOUT_RANGE),
    "Give up on one request after this long (it is then retried within --timeout); "
    "from 100ms to 10m.",
    "10s",
)
PAGE_SIZE = Setting(
    "--page-size",
    "NODE_HOLDER_PAGE_SIZE",
    integer(1, 10_000),
    "At most this many nodes per list page (metadata only; pages are also sized to about 4 MB).",
    "500",
)
DRY_RUN = Setting(
    "--dry-run",
    "NODE_HOLDER_DRY_RUN",
    BOOLEAN,
    "Change nothing; print the decision and each patch that would be sent.",
    extra={"is_flag": True, "flag_value": True, "default": False},
)
WORKERS = Setting(
    "--workers", "NODE_HOLDER_WORKERS", integer(1, 64), "Patches in flight at once.", "8"
)
QPS = Setting(
    "--qps",
    "NODE_HOLDER_QPS",
    number(0, 10_000),
    "Node writes a second at most. Halved on 429 and 5xx answers, then recovers slowly; "
    "reconcile ends a hold at half the rate. 0: no limit.",
    "200",
)
EVENTS = Setting(
    "--events/--no-events",
    "NODE_HOLDER_EVENTS",
    BOOLEAN,
    "Record a Kubernetes Event when a hold starts, grows or ends.",
    extra={"default": True, "show_default": True},
)
KUBECONFIG = Setting(
    "--kubeconfig",
    "KUBECONFIG",
    TEXT,
    "Kubeconfig file(s), ':'-separated as for kubectl. Default: the in-cluster service "
    "account inside a pod, else ~/.kube/config.",
    metavar="PATH",
)
CONTEXT = Setting(
    "--context",
    "NODE_HOLDER_CONTEXT",
    TEXT,
    "Kubeconfig context. Default: the current context.",
    metavar="NAME",
)
SUSPEND_CRONJOB = Setting(
    "--suspend-cronjob",
    "NODE_HOLDER_SUSPEND_CRONJOB",
    CRONJOB,
    "First suspend this CronJob and wait until its running Jobs end, so that no run "
    "puts holds back after the release (the Helm chart's uninstall hook).",
    "",
    metavar="NAMESPACE/NAME",
)
SETTINGS_FROM = Setting(
    "--settings-from",
    "NODE_HOLDER_SETTINGS_FROM",
    CONFIGMAP,
    "Run with the CronJob's settings: read them from its ConfigMap through the API, with your "
    f"own credentials ({s.SETTINGS_CONFIGMAP} as installed). A flag wins over the ConfigMap, "
    "the ConfigMap over the environment; a dry run asked for by a flag or the environment "
    "holds whatever it says; the connection and how results are shown stay yours.",
    metavar="NAMESPACE/CONFIGMAP",
)
OUTPUT = Setting(
    "--output",
    "NODE_HOLDER_OUTPUT",
    choice(s.Output),
    "Results on stdout: text lines, or JSON lines (one per patch as it lands, then a "
    "summary as the last line).",
    "text",
)
STATUS_NODES = Setting(
    "--nodes",
    "NODE_HOLDER_STATUS_NODES",
    BOOLEAN,
    "status: also every node, a table row each (text) or a JSON line each before the "
    "summary (json). Without it, a summary whose size does not grow with the cluster.",
    extra={"is_flag": True, "flag_value": True, "default": False},
)
LOG_FORMAT = Setting(
    "--log-format",
    "NODE_HOLDER_LOG_FORMAT",
    choice(s.Output),
    "Logs and errors on stderr: text or JSON lines.",
    "text",
    extra={"is_eager": True, "callback": logging_option},
)
VERBOSE = Setting(
    "--verbose",
    "NODE_HOLDER_VERBOSE",
    integer(0, 3),
    "More logs (-v: info, -vv: debug) and tracebacks on errors; the env var takes 0-3.",
    "0",
    extra={
        "short": "-v",
        "count": True,
        "type": None,
        "default": 0,
        "show_default": False,
        "is_eager": True,
        "callback": logging_option,
    },
)

# simulate's own: a replay on a laptop, never configured through the environment.
COMPARE = Setting(
    "--compare",
    None,
    COLUMNS,
    "Also replay these configurations, side by side: hold durations, each optionally "
    "with /SCOPE, /max=DURATION and, as if NodePool NAME carried them, /nodepool:NAME=DURATION "
    "or /nodepool:NAME:max=DURATION, e.g. 10m,40m,20m/group,20m/max=1h,20m/nodepool:batch=45m. "
    "What a column leaves out comes from the options above.",
    "",
    metavar="COLUMNS",
)
SWEEP = Setting(
    "--sweep",
    None,
    COLUMNS,
    "Instead of --compare: replay the hold options with each of these hold durations "
    "(default 5m,10m,15m,20m,30m,45m,1h,2h) and show what each buys against what it costs: "
    "launches avoided against node-hours kept (estimates), as a table and, with --plot, a curve.",
    metavar="[DURATIONS]",
    extra={"is_flag": False, "flag_value": ""},
)
INTERVAL = Setting(
    "--interval",
    None,
    duration(s.INTERVAL_RANGE),
    "Time between two runs: the CronJob's schedule.",
    "1m",
)
START = Setting(
    "--start",
    None,
    TEXT,
    "Replay from this RFC 3339 time. Default: the timeline's start: or its first node.",
    metavar="TIME",
)
END = Setting(
    "--end",
    None,
    TEXT,
    "Replay until this RFC 3339 time. Default: the timeline's end:, or once the last "
    "hold could have ended.",
    metavar="TIME",
)
LAST = Setting(
    "--last",
    None,
    optional_duration(s.HISTORY_RANGE),
    "Replay only the last DURATION before the end (e.g. 24h): for a long history "
    "such as `kubectl get nodes -o json` of an old cluster.",
)
PROMETHEUS = Setting(
    "--prometheus",
    None,
    TEXT,
    "Read the history from this Prometheus (or Thanos, Mimir, Cortex) instead of a file: "
    "kube-state-metrics' kube_node_created and kube_node_labels over --last or --start/--end, "
    "in a few queries per 6 hours. The only option with which simulate uses the network.",
    metavar="URL",
)
PROMETHEUS_MATCH = Setting(
    "--prometheus-match",
    None,
    TEXT,
    "Label matchers added to every --prometheus query, to replay one cluster of a fleet: "
    "'{cluster=\"prod-1\"}'.",
    metavar="{MATCHERS}",
)
PROMETHEUS_BEARER_TOKEN_FILE = Setting(
    "--prometheus-bearer-token-file",
    None,
    TEXT,
    "Send the token in this file (read at each query) as `Authorization: Bearer`.",
    metavar="FILE",
)
PROMETHEUS_USERNAME = Setting(
    "--prometheus-username",
    None,
    TEXT,
    "Basic auth to --prometheus with this user name and --prometheus-password-file.",
    metavar="NAME",
)
PROMETHEUS_PASSWORD_FILE = Setting(
    "--prometheus-password-file", None, TEXT, "The basic auth password, in a file.", metavar="FILE"
)
PROMETHEUS_CA_FILE = Setting(
    "--prometheus-ca-file",
    None,
    TEXT,
    "Check --prometheus' certificate against these CAs (PEM) instead of the system's.",
    metavar="FILE",
)
INSECURE_SKIP_TLS_VERIFY = Setting(
    "--insecure-skip-tls-verify",
    None,
    BOOLEAN,
    "Do not check --prometheus' certificate (a test server's; never over a network you do "
    "not trust).",
    extra={"is_flag": True, "flag_value": True, "default": False},
)
PROMETHEUS_HEADER = Setting(
    "--prometheus-header",
    None,
    Kind("header", lambda text: (text,), metavar="'NAME: VALUE'"),
    "Send this header with every --prometheus query (repeatable), e.g. 'X-Scope-OrgID: "
    "tenant-1' for a Mimir or Cortex tenant.",
    extra={"multiple": True},
)
PLOT = Setting(
    "--plot",
    None,
    TEXT,
    "Also draw nodes held over time into a PNG (needs matplotlib).",
    metavar="FILE.png",
)

HOLD = (
    HOLD_DURATION,
    ANNOTATION,
    HOLD_SCOPE,
    GROUP_LABEL,
    TRIGGER_SELECTOR,
    NODE_SELECTOR,
    MAX_HOLD,
)
READ = (TIMEOUT, REQUEST_TIMEOUT, PAGE_SIZE)
WRITE = (DRY_RUN, WORKERS, QPS, EVENTS)
ACCESS = (KUBECONFIG, CONTEXT)
OUTPUTS = (OUTPUT, LOG_FORMAT, VERBOSE)
PIN = (ANNOTATION, DRY_RUN, TIMEOUT, REQUEST_TIMEOUT, PAGE_SIZE, *ACCESS, *OUTPUTS)
PROMETHEUS_ACCESS = (
    PROMETHEUS,
    PROMETHEUS_MATCH,
    PROMETHEUS_BEARER_TOKEN_FILE,
    PROMETHEUS_USERNAME,
    PROMETHEUS_PASSWORD_FILE,
    PROMETHEUS_CA_FILE,
    INSECURE_SKIP_TLS_VERIFY,
    PROMETHEUS_HEADER,
)
REPLAY = (COMPARE, SWEEP, INTERVAL, START, END, LAST, *PROMETHEUS_ACCESS, PLOT)  # simulate's own

#: Which settings each command uses; nothing else is read for it.
COMMANDS: dict[str, tuple[Setting[Any], ...]] = {
    "reconcile": (*HOLD, MECHANISM, *WRITE, *READ, *ACCESS, SETTINGS_FROM, *OUTPUTS),
    "status": (*HOLD, MECHANISM, *READ, *ACCESS, SETTINGS_FROM, *OUTPUTS, STATUS_NODES),
    # release needs no hold duration, scope, selector or cap: it removes every hold this tool
    # owns. --annotation names custom hold keys it may remove besides the well-known ones.
    "release": (ANNOTATION, SUSPEND_CRONJOB, *WRITE, *READ, *ACCESS, SETTINGS_FROM, *OUTPUTS),
    # A person's pin on the named nodes: no hold settings, no Events.
    "pin": PIN,
    "unpin": PIN,
    "simulate": (*HOLD, *OUTPUTS, *REPLAY, EVENTS),
}
#: Every setting, in the order docs/reference.md lists them.
SETTINGS = (
    *HOLD,
    MECHANISM,
    *READ,
    *WRITE,
    *ACCESS,
    SUSPEND_CRONJOB,
    SETTINGS_FROM,
    *OUTPUTS,
    STATUS_NODES,
    *REPLAY,
)
BY_NAME = {setting.name: setting for setting in SETTINGS}
BY_ENV = {setting.env: setting for setting in SETTINGS if setting.env}
#: What --settings-from never takes from the ConfigMap: the connection and how the answer is
#: shown stay the local choice (the CronJob's JSON is for its log pipeline, not a terminal).
LOCAL_ONLY = (*ACCESS, SETTINGS_FROM, *OUTPUTS, STATUS_NODES)


# --- parsed options -> settings --------------------------------------------------------


class Parsed:
    """One command's parsed options, read by their Setting: `parsed[TIMEOUT]` is a timedelta;
    `flags`: the names of those given on the command line."""

    def __init__(self, values: Mapping[str, Any], flags: frozenset[str] = frozenset()) -> None:
        self.values = values
        self.flags = flags

    def __getitem__(self, setting: Setting[T]) -> T:
        return cast(T, self.values[setting.name])

    def get(self, setting: Setting[T], default: T) -> T:
        """A setting the command may not take: its value, else `default`."""
        return cast(T, self.values.get(setting.name, default))


def hold_settings(parsed: Parsed) -> HoldSettings:
    """The decision's settings, each field from its option."""
    hold = HoldSettings(
        hold_duration=parsed[HOLD_DURATION],
        annotations=parsed[ANNOTATION],
        scope=parsed[HOLD_SCOPE],
        group_label=parsed[GROUP_LABEL],
        trigger_selector=parsed[TRIGGER_SELECTOR],
        node_selector=parsed[NODE_SELECTOR],
        max_hold=parsed[MAX_HOLD],
        mechanism=parsed.get(MECHANISM, s.Mechanism.ANNOTATION),
    )
    s.check_max_hold(hold)
    s.check_mechanism(hold)
    return hold


def run_settings(parsed: Parsed, mode: Mode, only: tuple[str, ...] = ()) -> RunSettings:
    """What one run does and how; a setting the command does not take keeps its default."""
    default = RunSettings()
    return RunSettings(
        mode=mode,
        dry_run=parsed.get(DRY_RUN, True),  # a command without --dry-run (status) never writes
        timeout=parsed[TIMEOUT],
        workers=parsed.get(WORKERS, default.workers),
        qps=parsed.get(QPS, default.qps),
        page_size=parsed[PAGE_SIZE],
        events=parsed.get(EVENTS, default.events),
        output=parsed[OUTPUT],
        only=tuple(dict.fromkeys(only)),
    )


def access_settings(parsed: Parsed) -> ClusterAccess:
    return ClusterAccess(
        kubeconfig=parsed[KUBECONFIG],
        context=parsed[CONTEXT],
        request_timeout=parsed[REQUEST_TIMEOUT].total_seconds(),
    )


def prometheus_access(parsed: Parsed) -> PrometheusAccess:
    return PrometheusAccess(
        url=parsed[PROMETHEUS],
        match=parsed[PROMETHEUS_MATCH] or "",
        bearer_token_file=parsed[PROMETHEUS_BEARER_TOKEN_FILE],
        username=parsed[PROMETHEUS_USERNAME],
        password_file=parsed[PROMETHEUS_PASSWORD_FILE],
        ca_file=parsed[PROMETHEUS_CA_FILE],
        insecure_skip_tls_verify=parsed[INSECURE_SKIP_TLS_VERIFY],
        headers=parsed[PROMETHEUS_HEADER],
    )


def settings_for(command: str) -> Decorator:
    """Decorate a command with exactly the options it uses, each defined once above; the
    command gets them as one `Parsed` (its arguments as keywords), once the environment's
    variable names are checked (when it runs, so that `--help` always answers)."""

    def apply(func: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(func)
        def checked(**values: Any) -> None:
            for warning in check_environment(os.environ):
                log.warning("%s", warning)
            source = click.get_current_context().get_parameter_source
            flags = frozenset(k for k in values if source(k) is ParameterSource.COMMANDLINE)
            func(Parsed(values, flags), **{k: v for k, v in values.items() if k not in BY_NAME})

        for setting in reversed(COMMANDS[command]):
            checked = setting.option()(checked)
        return checked

    return apply


#: The project's variables that are not settings: the test suite's (docs/maintainers/testing.md).
NOT_SETTINGS = ("NODE_HOLDER_REQUIRE_TOOLS", "NODE_HOLDER_E2E_KUBECONFIG")
#: What Kubernetes sets in a pod for a Service named `node-holder...` or `hold...`.
_SERVICE_LINK = re.compile(r"^[A-Z0-9_]+_(SERVICE_HOST|SERVICE_PORT(_\w+)?|PORT(_\d+_[A-Z]+\w*)?)$")


def check_environment(environ: Mapping[str, str]) -> list[str]:
    """Warnings for unknown `HOLD_*` variables; ConfigError for an unknown `NODE_HOLDER_*` one
    (`NODE_HOLDER_DRYRUN=true` would otherwise run for real), naming the closest."""
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


def with_configmap(
    parsed: Parsed, command: str, ref: s.ObjectRef, data: Mapping[str, str]
) -> Parsed:
    """The command's settings with those of the CronJob's ConfigMap (`--settings-from`): a flag
    wins, then the ConfigMap, then the local environment and the defaults, except that a dry
    run asked for locally holds. Its keys follow the environment's rules and each value goes
    through its setting's own parser: a ConfigError names the key."""
    where = f"ConfigMap {ref} (--settings-from)"
    try:
        for warning in check_environment(data):
            log.warning("%s: %s", where, warning)
    except s.ConfigError as exc:
        raise s.ConfigError(f"{where}: {exc}") from None
    values = dict(parsed.values)
    for setting in COMMANDS[command]:
        text = data.get(setting.env or "")
        if text is None or setting in LOCAL_ONLY or setting.name in parsed.flags:
            continue
        try:
            values[setting.name] = setting.kind.parse(text)
        except s.Invalid as exc:
            raise s.ConfigError(f"{where}, key {setting.env}: {text!r} {exc}") from None
    if DRY_RUN in COMMANDS[command]:
        values[DRY_RUN.name] = values[DRY_RUN.name] or parsed[DRY_RUN]
    return Parsed(values, parsed.flags)
