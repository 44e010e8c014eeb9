"""The command line: parse options (each with its environment variable), call, print.

No decisions here. Options arrive as text and are parsed by `settings`, so every
bad value gives one line naming the option and its environment variable (exit 2)
before any API call. Heavy modules (the Kubernetes client) are imported inside
the commands: `node-holder --help` stays fast.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from reconcile import __version__
from reconcile.settings import (
    DEFAULT_ANNOTATION,
    DEFAULT_GROUP_LABEL,
    Clock,
    ClusterAccess,
    ConfigError,
    HoldSettings,
    Output,
    RunSettings,
    Scope,
    annotation_keys_option,
    check_max_hold,
    duration_option,
    int_option,
    label_key_option,
    number_option,
    selector_option,
)

EXIT_OK, EXIT_RUNTIME, EXIT_CONFIG = 0, 1, 2
PROG = "node-holder"
log = logging.getLogger("reconcile")


class RuntimeFailure(Exception):
    """A run that reached the API and failed there: exit 1, one line."""


# --- options ----------------------------------------------------------------------

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


def _options(*decorators: Decorator) -> Decorator:
    def apply(func: Callable[..., Any]) -> Callable[..., Any]:
        for decorator in reversed(decorators):
            func = decorator(func)
        return func

    return apply


def _choice(name: str, env: str, choices: type, default: str, help: str) -> Decorator:
    return click.option(
        name,
        envvar=env,
        show_envvar=True,
        default=default,
        show_default=True,
        type=click.Choice([str(c) for c in choices], case_sensitive=False),
        help=help,
    )


hold_options = _options(
    click.option(
        "--hold-duration",
        envvar="HOLD_DURATION",
        show_envvar=True,
        metavar="DURATION",
        default="20m",
        show_default=True,
        help="Hold while the youngest node is younger than this: 90s, 20m, 1h30m, PT20M, "
        "or a bare number of minutes.",
    ),
    click.option(
        "--annotation",
        "annotations",
        envvar="HOLD_ANNOTATION",
        show_envvar=True,
        metavar="KEY",
        multiple=True,
        default=[DEFAULT_ANNOTATION],
        show_default=True,
        help="Hold annotation to set (repeatable; comma-separated in the env var). "
        "karpenter.sh/do-not-consolidate for Karpenter before v0.32; "
        "cluster-autoscaler.kubernetes.io/scale-down-disabled for cluster-autoscaler.",
    ),
    _choice(
        "--hold-scope",
        "HOLD_SCOPE",
        Scope,
        "cluster",
        "cluster: a new node holds every node; group: only the nodes of its group "
        "(--group-label); node: each node is held until it is one hold duration old.",
    ),
    click.option(
        "--group-label",
        envvar="HOLD_GROUP_LABEL",
        show_envvar=True,
        metavar="LABEL",
        default=DEFAULT_GROUP_LABEL,
        show_default=True,
        help="Label whose value forms a group for --hold-scope group; "
        "nodes without it form one group of their own.",
    ),
    click.option(
        "--trigger-selector",
        envvar="HOLD_TRIGGER_SELECTOR",
        show_envvar=True,
        metavar="SELECTOR",
        default="",
        help="Label selector: only these nodes' arrival starts a hold "
        "(e.g. karpenter.sh/nodepool). Default: every node.",
    ),
    click.option(
        "--node-selector",
        envvar="HOLD_NODE_SELECTOR",
        show_envvar=True,
        metavar="SELECTOR",
        default="",
        help="Label selector: only these nodes get held. Default: every node.",
    ),
    click.option(
        "--max-hold",
        envvar="HOLD_MAX_DURATION",
        show_envvar=True,
        metavar="DURATION",
        default="",
        help="Cap one stretch of holding at this long, even while nodes keep arriving; "
        "then stay free for one hold duration. Default: no cap.",
    ),
)

access_options = _options(
    click.option(
        "--kubeconfig",
        envvar="KUBECONFIG",
        show_envvar=True,
        metavar="PATH",
        default=None,
        help="Kubeconfig file. Default: in-cluster service account inside a pod, "
        "else ~/.kube/config.",
    ),
    click.option(
        "--context",
        envvar="NODE_HOLDER_CONTEXT",
        show_envvar=True,
        metavar="NAME",
        default=None,
        help="Kubeconfig context. Default: the current context.",
    ),
)


def read_options(timeout_default: str = "45s") -> Decorator:
    return _options(
        _choice(
            "--clock",
            "NODE_HOLDER_CLOCK",
            Clock,
            "server",
            "Whose clock is now: the API server's (its Date header) or this machine's.",
        ),
        click.option(
            "--timeout",
            envvar="NODE_HOLDER_TIMEOUT",
            show_envvar=True,
            metavar="DURATION",
            default=timeout_default,
            show_default=True,
            help="Deadline for the whole run; keep it below the CronJob's activeDeadlineSeconds.",
        ),
        click.option(
            "--request-timeout",
            envvar="NODE_HOLDER_REQUEST_TIMEOUT",
            show_envvar=True,
            metavar="DURATION",
            default="10s",
            show_default=True,
            help="Give up on one request after this long (it is then retried within --timeout).",
        ),
        click.option(
            "--page-size",
            envvar="NODE_HOLDER_PAGE_SIZE",
            show_envvar=True,
            metavar="N",
            default="500",
            show_default=True,
            help="Nodes per list page (metadata only).",
        ),
    )


write_options = _options(
    click.option(
        "--dry-run",
        envvar="NODE_HOLDER_DRY_RUN",
        show_envvar=True,
        is_flag=True,
        default=False,
        help="Change nothing; print the decision and each patch that would be sent.",
    ),
    click.option(
        "--workers",
        envvar="NODE_HOLDER_WORKERS",
        show_envvar=True,
        metavar="N",
        default="8",
        show_default=True,
        help="Patches in flight at once.",
    ),
    click.option(
        "--qps",
        envvar="NODE_HOLDER_QPS",
        show_envvar=True,
        metavar="N",
        default="1000",
        show_default=True,
        help="Client-side limit on requests per second (0: no limit).",
    ),
    click.option(
        "--events/--no-events",
        envvar="NODE_HOLDER_EVENTS",
        show_envvar=True,
        default=True,
        show_default=True,
        help="Record a Kubernetes Event when a hold starts, grows or ends.",
    ),
)

output_options = _options(
    _choice(
        "--output",
        "NODE_HOLDER_OUTPUT",
        Output,
        "text",
        "Results on stdout: text or one JSON object.",
    ),
    _choice(
        "--log-format",
        "NODE_HOLDER_LOG_FORMAT",
        Output,
        "text",
        "Logs on stderr: text or JSON lines.",
    ),
    click.option(
        "-v",
        "--verbose",
        envvar="NODE_HOLDER_VERBOSE",
        show_envvar=True,
        count=True,
        help="More logs (-v: info, -vv: debug) and tracebacks on errors.",
    ),
)


# --- option text -> settings --------------------------------------------------------


def hold_settings(opts: dict[str, Any]) -> HoldSettings:
    max_hold = opts.get("max_hold") or ""
    hold = HoldSettings(
        hold_duration=duration_option(opts["hold_duration"], "--hold-duration", "HOLD_DURATION"),
        annotations=annotation_keys_option(opts["annotations"], "--annotation", "HOLD_ANNOTATION"),
        scope=Scope(opts["hold_scope"].lower()),
        group_label=label_key_option(opts["group_label"], "--group-label", "HOLD_GROUP_LABEL"),
        trigger_selector=selector_option(
            opts["trigger_selector"], "--trigger-selector", "HOLD_TRIGGER_SELECTOR"
        ),
        node_selector=selector_option(
            opts["node_selector"], "--node-selector", "HOLD_NODE_SELECTOR"
        ),
        max_hold=duration_option(max_hold, "--max-hold", "HOLD_MAX_DURATION")
        if max_hold.strip()
        else None,
    )
    check_max_hold(hold)
    return hold


def run_settings(opts: dict[str, Any]) -> RunSettings:
    timeout = duration_option(opts["timeout"], "--timeout", "NODE_HOLDER_TIMEOUT")
    return RunSettings(
        dry_run=bool(opts.get("dry_run", False)),
        clock=Clock(opts["clock"].lower()),
        timeout=timeout,
        workers=int_option(opts.get("workers", "1"), "--workers", "NODE_HOLDER_WORKERS", 1, 64),
        qps=number_option(opts.get("qps", "0"), "--qps", "NODE_HOLDER_QPS", 0, 10_000),
        page_size=int_option(opts["page_size"], "--page-size", "NODE_HOLDER_PAGE_SIZE", 1, 10_000),
        events=bool(opts.get("events", False)),
        output=Output(opts["output"].lower()),
    )


@dataclass(frozen=True)
class Invocation:
    command: str
    hold: HoldSettings
    run: RunSettings
    access: ClusterAccess
    verbose: int


def parse(command: str, opts: dict[str, Any]) -> Invocation:
    setup_logging(opts.get("log_format", "text"), opts.get("verbose", 0))
    return Invocation(
        command=command,
        hold=hold_settings(opts),
        run=run_settings(opts),
        access=ClusterAccess(
            kubeconfig=opts.get("kubeconfig"),
            context=opts.get("context"),
            request_timeout=duration_option(
                opts["request_timeout"], "--request-timeout", "NODE_HOLDER_REQUEST_TIMEOUT"
            ).total_seconds(),
        ),
        verbose=opts.get("verbose", 0),
    )


# --- logging -----------------------------------------------------------------------


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S%z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def setup_logging(fmt: str, verbose: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if str(fmt).lower() == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    level = logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING
    log.setLevel(level)
    logging.getLogger("urllib3").setLevel(logging.DEBUG if verbose >= 3 else logging.ERROR)


# --- commands ----------------------------------------------------------------------


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "--version", prog_name=PROG)
def cli() -> None:
    """Hold Karpenter nodes for a while after a scale-up, to stop node churn.

    While any node is younger than the hold duration, every node carries
    karpenter.sh/do-not-disrupt="true"; once the youngest node is older, the
    annotation comes off again, only where this tool put it. Stateless: run it
    every minute from a CronJob; each run reads the cluster, decides, patches.

    \b
    Exit codes: 0 done (dry runs too), 1 API or runtime failure,
    2 bad input or configuration (nothing was sent to the API).
    """


@cli.command()
@hold_options
@write_options
@read_options()
@access_options
@output_options
def reconcile(**opts: Any) -> None:
    """One pass: hold or release the nodes, then exit.

    \b
    Examples:
      node-holder reconcile --dry-run
      node-holder reconcile --hold-duration 30m --output json
      HOLD_DURATION=45m node-holder reconcile
    """
    _execute(parse("reconcile", opts), mode="reconcile")


@cli.command()
@hold_options
@read_options()
@access_options
@output_options
def status(**opts: Any) -> None:
    """Read-only: the decision reconcile would take now, and each node's state.

    A node is "held by us" (this tool set its hold annotation), "held by others"
    (someone else did, whatever the value) or "free".
    """
    _execute(parse("status", opts), mode="status")


@cli.command()
@hold_options
@write_options
@read_options()
@access_options
@output_options
@click.option(
    "--suspend-cronjob",
    envvar="NODE_HOLDER_SUSPEND_CRONJOB",
    show_envvar=True,
    metavar="NAMESPACE/NAME",
    default="",
    help="First suspend this CronJob and wait until its running Jobs end, so that no run "
    "puts holds back after the release (the Helm chart's uninstall hook).",
)
def release(suspend_cronjob: str = "", **opts: Any) -> None:
    """Remove every hold this tool owns, whatever the node ages.

    Run it before uninstalling, or in an emergency. Annotations set by anyone
    else stay. Honours --dry-run.
    """
    from reconcile.handover import parse_cronjob_ref  # noqa: PLC0415

    inv = parse("release", opts)
    suspend = (
        parse_cronjob_ref(suspend_cronjob, "--suspend-cronjob", "NODE_HOLDER_SUSPEND_CRONJOB")
        if suspend_cronjob.strip()
        else None
    )
    _execute(inv, mode="release", suspend=suspend)


# --- simulate (issue 8): replay a node timeline; owned by the simulate work --------------


@cli.command()
@click.argument("timeline", nargs=-1, required=True, metavar="TIMELINE...")
@hold_options
@click.option(
    "--compare",
    default="",
    metavar="COLUMNS",
    help="Also replay these configurations, side by side: hold durations, each optionally "
    "with /SCOPE and /max=DURATION, e.g. 10m,40m,20m/group,20m/node,20m/max=1h. "
    "What a column leaves out comes from the options above.",
)
@click.option(
    "--interval",
    default="1m",
    show_default=True,
    metavar="DURATION",
    help="Time between two runs: the CronJob's schedule.",
)
@click.option(
    "--start",
    default=None,
    metavar="TIME",
    help="Replay from this RFC 3339 time. Default: the timeline's start: or its first node.",
)
@click.option(
    "--end",
    default=None,
    metavar="TIME",
    help="Replay until this RFC 3339 time. Default: the timeline's end:, or once the last "
    "hold could have ended.",
)
@click.option(
    "--last",
    default=None,
    metavar="DURATION",
    help="Replay only the last DURATION before the end (e.g. 24h): for a long history "
    "such as `kubectl get nodes -o json` of an old cluster.",
)
@click.option(
    "--plot",
    default=None,
    metavar="FILE.png",
    help="Also draw nodes held over time into a PNG (needs matplotlib).",
)
@click.option(
    "--jobs",
    default="0",
    show_default=True,
    metavar="N",
    help="Configurations replayed at once, each in its own process (0: one per CPU core).",
)
@click.option(
    "--events/--no-events",
    default=True,
    show_default=True,
    help="Record Events during the replay, as the CronJob does (they are counted).",
)
@output_options
def simulate(timeline: tuple[str, ...], **opts: Any) -> None:
    """Replay a node timeline through the real reconciler, to choose a hold duration.

    TIMELINE is YAML, JSON or CSV (`nodes: [{name, created, deleted, labels}]`),
    or kubectl output: `kubectl get nodes -o json`, `kubectl get nodeclaims -o json`
    or node Events; several files are merged, `-` reads standard input. Each
    configuration gets its own API test server with a simulated clock, and every
    run goes over HTTP through the same code as the CronJob. No cluster is touched.
    See docs/simulate.md.

    \b
    Examples:
      node-holder simulate reconcile/examples/batch-day.yaml --compare 10m,40m,20m/group
      kubectl get nodes -o json | node-holder simulate - --last 24h
      node-holder simulate history.csv --hold-duration 30m --output json
    """
    _simulate(timeline, opts)


def _simulate(paths: tuple[str, ...], opts: dict[str, Any]) -> None:
    # Imported here: the replay needs the Kubernetes client; --help doesn't.
    from reconcile.simulate import plot  # noqa: PLC0415
    from reconcile.simulate import report as simulate_report  # noqa: PLC0415
    from reconcile.simulate.replay import (  # noqa: PLC0415
        SimulationFailed,
        configurations,
        parse_compare,
        replay_window,
    )
    from reconcile.simulate.replay import simulate as run_simulation  # noqa: PLC0415
    from reconcile.simulate.timeline import load_timeline, parse_time  # noqa: PLC0415

    setup_logging(opts["log_format"], opts["verbose"])
    base = hold_settings(opts)
    holds = configurations(base, parse_compare(opts["compare"], base))
    interval = duration_option(opts["interval"], "--interval", None)
    if interval.total_seconds() < 10 or interval.total_seconds() % 1:
        raise ConfigError("--interval: use whole seconds, at least 10s (the CronJob runs every 1m)")

    def moment(option: str) -> Any:
        raw = opts[option.lstrip("-")]
        if raw is None:
            return None
        try:
            return parse_time(raw)
        except ValueError as exc:
            raise ConfigError(f"{option}: {raw!r} {exc}; use e.g. 2024-05-14T00:00:00Z") from None

    start, end = moment("--start"), moment("--end")
    last = duration_option(opts["last"], "--last", None) if opts["last"] else None
    jobs = str(opts["jobs"]).strip()
    if not jobs.isdigit() or int(jobs) > 64:
        raise ConfigError(f"--jobs: {jobs!r} is not a number from 0 to 64 (0: one per core)")
    if opts["plot"]:
        plot.check_available(opts["plot"])
    timeline = load_timeline(list(paths))
    window = replay_window(timeline, holds, interval, start=start, end=end, last=last)
    try:
        result = run_simulation(timeline, window, holds, events=opts["events"], jobs=int(jobs))
    except SimulationFailed as exc:
        raise RuntimeFailure(f"simulate: {exc}") from None
    if opts["plot"]:
        plot.write_png(result, opts["plot"])
    if str(opts["output"]).lower() == "json":
        data = simulate_report.render_json(result)
        if opts["plot"]:
            data["plot"] = opts["plot"]
        click.echo(json.dumps(data, indent=2))
        return
    for line in simulate_report.render_text(result):
        click.echo(line)
    if opts["plot"]:
        click.echo(f"Plot written to {opts['plot']}.")


# --- end of simulate -------------------------------------------------------------------


def _execute(inv: Invocation, mode: str, suspend: Any = None) -> None:
    # Imported here: the Kubernetes client is slow to import and --help doesn't need it.
    from reconcile import report  # noqa: PLC0415
    from reconcile.decide import Mode  # noqa: PLC0415
    from reconcile.kube import Kube, load_configuration  # noqa: PLC0415
    from reconcile.retry import Interrupted  # noqa: PLC0415
    from reconcile.run import ListFailed, run_once  # noqa: PLC0415

    configuration = load_configuration(inv.access, pool_size=inv.run.workers + 1)
    kube = Kube(
        configuration,
        request_timeout=min(inv.access.request_timeout, inv.run.timeout.total_seconds()),
    )
    stop = threading.Event()
    _on_signals(stop)
    if suspend is not None:
        from reconcile.handover import HandoverFailed, suspend_and_wait  # noqa: PLC0415

        try:
            suspend_and_wait(kube, suspend, dry_run=inv.run.dry_run)
        except HandoverFailed as exc:
            raise RuntimeFailure(str(exc)) from None
    try:
        result = run_once(
            kube,
            inv.hold,
            inv.run,
            mode=Mode.RELEASE if mode == "release" else Mode.RECONCILE,
            write=mode != "status",
            stop=stop,
        )
    except ListFailed as exc:
        raise RuntimeFailure(str(exc)) from None
    except Interrupted:
        raise RuntimeFailure(
            "stopped by a signal while listing nodes; nothing was changed"
        ) from None
    log.info(
        "run finished: %d nodes in %d list page(s), %d request(s), %d write(s), clock %s",
        len(result.plan.decisions),
        result.listing.pages,
        result.requests,
        result.applied.writes if result.applied else 0,
        result.listing.clock,
    )
    if inv.run.output is Output.JSON:
        data = (
            report.render_status_json(result)
            if mode == "status"
            else report.render_json(result, mode)
        )
        click.echo(json.dumps(data, indent=2))
    else:
        lines = (
            report.render_status_text(result) if mode == "status" else report.render_text(result)
        )
        for line in lines:
            click.echo(line)
    applied = result.applied
    if applied is not None and applied.failed:
        if applied.fatal:
            raise RuntimeFailure(applied.fatal)
        why = (
            "stopped by a signal"
            if applied.interrupted
            else "run timeout reached"
            if applied.timed_out
            else ""
        )
        names = ", ".join(r.node for r in applied.failed[:5])
        more = f" and {len(applied.failed) - 5} more" if len(applied.failed) > 5 else ""
        why = f" ({why})" if why else ""
        raise RuntimeFailure(
            f"{len(applied.failed)} node(s) not patched{why}: {names}{more}; "
            "the next run retries them"
        )


def _on_signals(stop: threading.Event) -> None:
    """SIGTERM (the CronJob's deadline, a node drain) and SIGINT: start nothing new."""

    def handler(signum: int, _frame: object) -> None:
        stop.set()  # first: no worker may start a patch while the log line is written
        log.warning(
            "received %s: finishing patches in flight, starting no new ones",
            signal.Signals(signum).name,
        )

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)


# --- entry point -------------------------------------------------------------------


def _fail(code: int, message: str) -> NoReturn:
    click.echo(f"{PROG}: error: {message}", err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console script: exit 0/1/2 with one line on stderr, never a traceback unless -v."""
    verbose = any(a in ("-v", "-vv", "-vvv", "--verbose") for a in (argv or sys.argv[1:]))
    try:
        cli.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _fail(EXIT_RUNTIME, "aborted")
    except click.UsageError as exc:
        where = f"'{exc.ctx.command_path} --help'" if exc.ctx else f"'{PROG} --help'"
        _fail(EXIT_CONFIG, f"{exc.format_message()} (see {where})")
    except click.ClickException as exc:
        _fail(EXIT_CONFIG, exc.format_message())
    except ConfigError as exc:
        _fail(EXIT_CONFIG, str(exc))
    except RuntimeFailure as exc:
        _fail(EXIT_RUNTIME, str(exc))
    except KeyboardInterrupt:
        _fail(EXIT_RUNTIME, "interrupted")
    except Exception as exc:  # the last line of defence: one line, exit 1
        if verbose:
            traceback.print_exc()
        _fail(EXIT_RUNTIME, f"unexpected {type(exc).__name__}: {exc} (run with -v for a traceback)")
    sys.exit(EXIT_OK)
