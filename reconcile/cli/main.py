"""The command line: parse options (each with its environment variable), call, print.

No decisions here. Options arrive as text and are parsed by `settings`, so every
bad value gives one line naming the option and its environment variable (exit 2)
before any API call. Heavy modules (the Kubernetes client) are imported inside
the commands: `node-holder --help` stays fast.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import Any, NoReturn

import click

from reconcile import __version__
from reconcile.cli import logs
from reconcile.cli.logs import error_line, log, verbosity
from reconcile.cli.options import settings_for
from reconcile.rule.settings import (
    HISTORY_RANGE,
    INTERVAL_RANGE,
    KNOWN_HOLD_KEYS,
    Clock,
    ClusterAccess,
    ConfigError,
    DurationRange,
    HoldSettings,
    Invalid,
    Output,
    RunSettings,
    Scope,
    check_max_hold,
    parse_duration,
    unread_keys,
)

EXIT_OK, EXIT_RUNTIME, EXIT_CONFIG = 0, 1, 2
PROG = "node-holder"


class RuntimeFailure(Exception):
    """A run that reached the API and failed there: exit 1, one line."""


# --- option values -> settings ----------------------------------------------------------


def hold_settings(params: dict[str, Any]) -> HoldSettings:
    """The decision's settings from already-parsed option values (`reconcile.cli.options`)."""
    hold = HoldSettings(
        hold_duration=params["hold_duration"],
        annotations=_flat(params["annotations"]),
        scope=Scope(params["hold_scope"]),
        group_label=params["group_label"],
        trigger_selector=params["trigger_selector"],
        node_selector=params["node_selector"],
        max_hold=params["max_hold"],
    )
    check_max_hold(hold)
    return hold


def run_settings(params: dict[str, Any], *, dry_run: bool | None = None) -> RunSettings:
    """How one run behaves; settings a command does not take keep their defaults."""
    defaults = RunSettings()
    return RunSettings(
        dry_run=params.get("dry_run", False) if dry_run is None else dry_run,
        clock=Clock(params.get("clock", defaults.clock)),
        timeout=params["timeout"],
        workers=params.get("workers", defaults.workers),
        qps=params.get("qps", defaults.qps),
        page_size=params["page_size"],
        events=params.get("events", defaults.events),
        output=Output(params["output"]),
        only=tuple(dict.fromkeys(params.get("nodes", ()))),
    )


def access_settings(params: dict[str, Any]) -> ClusterAccess:
    return ClusterAccess(
        kubeconfig=params.get("kubeconfig"),
        context=params.get("context"),
        request_timeout=params["request_timeout"].total_seconds(),
    )


def _flat(values: Any) -> tuple[str, ...]:
    """Keys from a repeated flag (a tuple per flag) or the env var (one tuple), in order."""
    if values and isinstance(values[0], str):
        return tuple(values)
    keys: list[str] = []
    for group in values:
        keys.extend(k for k in group if k not in keys)
    return tuple(keys)


@dataclass(frozen=True)
class Invocation:
    command: str
    hold: HoldSettings
    run: RunSettings
    access: ClusterAccess


def _warn_about_keys(keys: tuple[str, ...]) -> None:
    for key in unread_keys(keys):
        log.warning(
            "--annotation (HOLD_ANNOTATION): %r is not read by Karpenter or cluster-autoscaler "
            "(they read %s); it is set anyway",
            key,
            ", ".join(KNOWN_HOLD_KEYS),
        )


# --- commands ----------------------------------------------------------------------


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
    invoke_without_command=True,
)
@click.version_option(__version__, "--version", prog_name=PROG)
@click.pass_context
def cli(ctx: click.Context) -> None:
    """Hold Karpenter nodes for a while after a scale-up, to stop node churn.

    While any node is younger than the hold duration, every node carries
    karpenter.sh/do-not-disrupt="true"; once the youngest node is older, the
    annotation comes off again, only where this tool put it. Stateless: run it
    every minute from a CronJob; each run reads the cluster, decides, patches.

    \b
    Exit codes: 0 done (dry runs too), 1 API or runtime failure,
    2 bad input or configuration (nothing was sent to the API).
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@cli.command()
@settings_for("reconcile")
def reconcile(**params: Any) -> None:
    """One pass: hold or release the nodes, then exit.

    \b
    Examples:
      node-holder reconcile --dry-run
      node-holder reconcile --hold-duration 30m --output json
      HOLD_DURATION=45m node-holder reconcile
    """
    hold = hold_settings(params)
    _warn_about_keys(hold.annotations)
    _execute(Invocation("reconcile", hold, run_settings(params), access_settings(params)))


@cli.command()
@settings_for("status")
def status(**params: Any) -> None:
    """Read-only: the decision reconcile would take now, and each node's state.

    A node is "held by us" (this tool set its hold annotation), "held by others"
    (someone else set it to "true"), "exempt" (someone set it to "false": Karpenter may
    disrupt it), "pinned" (a person's `node-holder pin`: no run touches it) or "free".
    It writes nothing, so the write settings (--dry-run, --workers, --qps, --events) do
    not apply: their flags are refused and their environment variables are not read.
    With --output json it prints one whole JSON document (every window, patch and
    node), for scripts: unlike the other commands' lines, its length grows with the
    cluster.
    """
    hold = hold_settings(params)
    _warn_about_keys(hold.annotations)
    run = run_settings(params, dry_run=True)
    _execute(Invocation("status", hold, run, access_settings(params)))


@cli.command()
@settings_for("release")
def release(**params: Any) -> None:
    """Remove every hold this tool owns, whatever the node ages.

    Run it before uninstalling, or in an emergency. Annotations set by anyone
    else stay. Honours --dry-run. Hold settings (duration, scope, selectors,
    --max-hold) do not apply and their environment variables are not read;
    --annotation names custom hold keys to remove besides the well-known ones.
    """
    suspend = params.pop("suspend_cronjob")
    hold = HoldSettings(annotations=_flat(params["annotations"]))
    inv = Invocation("release", hold, run_settings(params), access_settings(params))
    _execute(inv, suspend=suspend)


@cli.command()
@click.argument("nodes", nargs=-1, required=True, metavar="NODE...")
@settings_for("pin")
def pin(**params: Any) -> None:
    """Pin the hold annotation(s) on these nodes: no run removes them.

    For each node, one patch sets every --annotation key to "true", lists it in
    node-holder.dev/pinned and drops node-holder's own claim on it: reconcile, release
    and the uninstall hook never add, remove or claim a pinned key. Run it with your own
    credentials (the admission policy refuses it to node-holder's service account).
    A node that does not exist is reported and makes the command exit 1.

    \b
    Examples:
      node-holder pin ip-10-0-3-17.ec2.internal
      node-holder pin --dry-run node-a node-b
    """
    _pinning("pin", params)


@cli.command()
@click.argument("nodes", nargs=-1, required=True, metavar="NODE...")
@settings_for("unpin")
def unpin(**params: Any) -> None:
    """Give pinned nodes back to the normal rule.

    For each node, the --annotation keys leave node-holder.dev/pinned; each one still
    "true" is claimed by node-holder again, so the next reconcile removes it when no
    hold is due (or keeps it while one is). Pins on other keys stay.
    """
    _pinning("unpin", params)


def _pinning(command: str, params: dict[str, Any]) -> None:
    hold = HoldSettings(annotations=_flat(params["annotations"]))
    _warn_about_keys(hold.annotations)
    _execute(Invocation(command, hold, run_settings(params), access_settings(params)))


# --- simulate: replay a node timeline in memory (docs/simulate.md) ---------------------------


@cli.command()
@click.argument("timeline", nargs=-1, required=True, metavar="TIMELINE...")
@settings_for("simulate")
@click.option(
    "--compare",
    default="",
    metavar="COLUMNS",
    help="Also replay these configurations, side by side: hold durations, each optionally "
    "with /SCOPE and /max=DURATION, e.g. 10m,40m,20m/group,20m/node,20m/max=1h. "
    "What a column leaves out comes from the options above.",
)
@click.option(
    "--sweep",
    is_flag=False,
    flag_value="",
    default=None,
    metavar="[DURATIONS]",
    help="Instead of --compare: replay the hold options with each of these hold durations "
    "(default 5m,10m,15m,20m,30m,45m,1h,2h) and show what each buys against what it costs: "
    "launches avoided against node-hours kept (estimates), as a table and, with --plot, a curve.",
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
@click.option("--jobs", default=None, hidden=True, help="Ignored: the replay is in memory.")
@click.option(
    "--events/--no-events",
    default=True,
    show_default=True,
    help="Record Events during the replay, as the CronJob does (they are counted).",
)
def simulate(timeline: tuple[str, ...], **opts: Any) -> None:
    """Replay a node timeline through the reconciler's decision, to choose a hold duration.

    TIMELINE is YAML, JSON or CSV (`nodes: [{name, created, deleted, labels}]`),
    or kubectl output: `kubectl get nodes -o json`, `kubectl get nodeclaims -o json`
    or node Events; several files are merged, `-` reads standard input. Every run
    decides with the same pure decide() as the CronJob and applies its patches to
    the nodes in memory. No cluster is touched. See docs/simulate.md.

    \b
    Examples:
      node-holder simulate reconcile/examples/batch-day.yaml --compare 10m,40m,20m/group
      node-holder simulate reconcile/examples/batch-day.yaml --sweep 10m,20m,40m,1h
      kubectl get nodes -o json | node-holder simulate - --last 24h
      node-holder simulate history.csv --hold-duration 30m --output json
    """
    _simulate(timeline, opts)


def _simulate(paths: tuple[str, ...], opts: dict[str, Any]) -> None:
    # Imported here: --help needs none of it.
    from reconcile.simulate import plot  # noqa: PLC0415
    from reconcile.simulate import report as simulate_report  # noqa: PLC0415
    from reconcile.simulate.replay import (  # noqa: PLC0415
        Asked,
        ReplayOptions,
        SimulationFailed,
        prepare,
    )
    from reconcile.simulate.replay import simulate as run_simulation  # noqa: PLC0415

    if opts["jobs"] is not None:
        log.warning("--jobs is ignored: simulate runs in one process")  # JSON with JSON logs
    interval = _simulate_duration(opts["interval"], "--interval", INTERVAL_RANGE)
    last = _simulate_duration(opts["last"], "--last", HISTORY_RANGE) if opts["last"] else None
    if opts["plot"]:
        plot.check_available(opts["plot"])
    try:
        asked = Asked(opts["compare"], interval, opts["start"], opts["end"], last, opts["sweep"])
        request = prepare(paths, hold_settings(opts), asked)
        progress = simulate_report.ProgressLine(sys.stderr, len(request.holds))
        result = run_simulation(request, ReplayOptions(opts["events"], progress))
        progress.close()
    except SimulationFailed as exc:
        raise RuntimeFailure(f"simulate: {exc}") from None
    except KeyboardInterrupt:
        click.echo(f"\n{PROG}: interrupted", err=True)
        sys.exit(130)  # 128 + SIGINT, as a shell reports it
    if opts["plot"]:
        plot.write_png(result, opts["plot"])
    for line in simulate_report.render(result, str(opts["output"]).lower(), opts["plot"]):
        click.echo(line)


def _simulate_duration(text: str, flag: str, bounds: DurationRange) -> Any:
    try:
        return parse_duration(text, bounds)
    except Invalid as exc:
        raise ConfigError(f"{flag}: {text!r} {exc}") from None


# --- end of simulate -------------------------------------------------------------------


def _execute(inv: Invocation, suspend: Any = None) -> None:
    mode = inv.command
    # Imported here: --help, settings errors and simulate need none of it.
    from reconcile.cli import report  # noqa: PLC0415
    from reconcile.cluster.access import connection_for  # noqa: PLC0415
    from reconcile.cluster.client import Client  # noqa: PLC0415
    from reconcile.cluster.read import ListFailed  # noqa: PLC0415
    from reconcile.cluster.retry import Interrupted  # noqa: PLC0415
    from reconcile.rule.decide import Mode  # noqa: PLC0415
    from reconcile.run import run_once  # noqa: PLC0415

    started = time.monotonic()
    connection = connection_for(inv.access, plugin_timeout=inv.run.timeout.total_seconds())
    run = inv.run.after(time.monotonic() - started)
    kube = Client(
        connection,
        request_timeout=max(min(inv.access.request_timeout, run.timeout.total_seconds()), 0.1),
        pool_size=run.workers + 1,
    )
    stop = threading.Event()
    _on_signals(stop)
    if suspend is not None:
        from reconcile.cluster.handover import HandoverFailed, suspend_and_wait  # noqa: PLC0415

        try:
            suspend_and_wait(kube, suspend, dry_run=inv.run.dry_run)
        except HandoverFailed as exc:
            raise RuntimeFailure(str(exc)) from None
    as_json = inv.run.output is Output.JSON

    def landed(node: Any) -> None:
        """Each node's line as its patch lands: a run killed later leaves them in its log."""
        line = json.dumps(report.landed_json(node)) if as_json else report.landed_line(node)
        click.echo(line)
        sys.stdout.flush()

    try:
        result = run_once(
            kube,
            inv.hold,
            run,
            mode=Mode.RECONCILE if mode == "status" else Mode(mode),
            stop=stop,
            on_result=landed,
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
    for warning in report.warnings(result, mode):
        log.warning("%s", warning)
    for line in report.final_lines(result, mode, as_json):
        click.echo(line)
    failure = _failure(result)
    if failure:
        raise RuntimeFailure(failure)


def _names(names: list[str]) -> str:
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return ", ".join(names[:5]) + more


def _failure(result: Any) -> str | None:
    """The one error line of a run that did not do all it had to, or None."""
    applied = result.applied
    failed = list(applied.failed) if applied is not None else []
    if failed and applied.fatal:
        return str(applied.fatal)
    parts = []
    if result.missing:  # pin, unpin: the others were still patched
        parts.append(f"{len(result.missing)} node(s) not found: {_names(list(result.missing))}")
    if failed:
        why = (
            "stopped by a signal"
            if applied.interrupted
            else "run timeout reached"
            if applied.timed_out
            else ""
        )
        why = f" ({why})" if why else ""
        names = _names([r.node for r in failed])
        parts.append(f"{len(failed)} node(s) not patched{why}: {names}; the next run retries them")
    return "; ".join(parts) or None


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
    click.echo(error_line(PROG, message), err=True)
    sys.exit(code)


def main(argv: list[str] | None = None) -> None:
    """Console script: exit 0/1/2 with one line on stderr, never a traceback unless -v."""
    logs.start(dict(os.environ))
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
        if verbosity():
            traceback.print_exc()
        _fail(EXIT_RUNTIME, f"unexpected {type(exc).__name__}: {exc} (run with -v for a traceback)")
    sys.exit(EXIT_OK)
