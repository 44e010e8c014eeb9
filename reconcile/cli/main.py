"""The command line: each command wires its options (options.py) to a call and prints what
report.py words. The HTTP client and simulate are imported inside the commands: `--help` stays
fast.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, NoReturn

import click

from reconcile import __version__
from reconcile.cli import logs, options
from reconcile.cli.logs import error_line, log, verbosity
from reconcile.cli.options import Parsed, hold_settings, run_settings, settings_for
from reconcile.rule.settings import SETTINGS_CONFIGMAP as INSTALLED_SETTINGS
from reconcile.rule.settings import (
    ConfigError,
    HoldSettings,
    Mode,
    Output,
    PrometheusAccess,
    RunSettings,
)

if TYPE_CHECKING:
    from reconcile.cluster.access import Connection

EXIT_OK, EXIT_RUNTIME, EXIT_CONFIG = 0, 1, 2
PROG = "node-holder"


#: simulate --prometheus: reads the history between two times (its URL, series and grid)
Fetch = Callable[[datetime, datetime], tuple[str, list[Any], Any]]


class RuntimeFailure(Exception):
    """A run that reached the API and failed there: exit 1, one line."""


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
    Exit codes: 0 done (dry runs too, and runs that leave nodes to the next run by design),
    1 API or runtime failure,
    2 bad input or configuration (nothing was sent to the API).
    """
    if ctx.invoked_subcommand is None:
        click.echo(ctx.get_help())


@cli.command()
@settings_for("reconcile")
def reconcile(parsed: Parsed) -> None:
    """One pass: hold or release the nodes, then exit.

    \b
    Examples:
      node-holder reconcile --dry-run
      node-holder reconcile --hold-duration 30m --output json
      HOLD_DURATION=45m node-holder reconcile
    """
    _execute("reconcile", parsed, lambda p: (hold_settings(p), run_settings(p, Mode.RECONCILE)))


@cli.command()
@settings_for("status")
def status(parsed: Parsed) -> None:
    """Read-only: the decision reconcile would take now, and the nodes' states.

    A node is "held by us" (this tool set its hold annotation), "held by others"
    (someone else set it to "true"), "exempt" (someone set it to "false": Karpenter may
    disrupt it), "pinned" (a person's `node-holder pin`: no run touches it) or "free".
    It writes nothing, so the write settings (--dry-run, --workers, --qps, --events) do
    not apply: their flags are refused and their environment variables are not read.
    It prints a summary whose size does not grow with the cluster: the decision, the
    nodes by state and the first hold windows (held first). --nodes adds every window
    and node: a table row each, or with --output json a JSON line each before the
    summary line.

    \b
    Examples:
      node-holder status
      node-holder status --nodes --output json | jq -c 'select(.node)'
    """
    _execute("status", parsed, lambda p: (hold_settings(p), run_settings(p, Mode.RECONCILE)))


@cli.command()
@settings_for("release")
def release(parsed: Parsed) -> None:
    """Remove every hold this tool owns, whatever the node ages.

    Run it before uninstalling, or in an emergency. Annotations set by anyone
    else stay. Honours --dry-run. Hold settings (duration, scope, selectors,
    --max-hold) do not apply and their environment variables are not read;
    --annotation names custom hold keys to remove besides the well-known ones.
    """
    _execute("release", parsed, lambda p: (_keys(p), run_settings(p, Mode.RELEASE)))


@cli.command()
@click.argument("names", nargs=-1, required=True, metavar="NODE...", type=options.NODE_NAME)
@settings_for("pin")
def pin(parsed: Parsed, names: tuple[str, ...]) -> None:
    """Pin the hold annotation(s) on these nodes: no run removes them.

    For each node, one patch lists every --annotation key in node-holder.dev/pinned and
    sets each absent one to "true": reconcile, release and the uninstall hook never add
    or remove a pinned key. A node where a key has another value (a person's "false") is
    left as it is and named. Run it with your own credentials (the admission policy
    refuses it to node-holder's service account). A node that does not exist or is left
    as it is makes the command exit 1.

    \b
    Examples:
      node-holder pin ip-10-0-3-17.ec2.internal
      node-holder pin --dry-run node-a node-b
    """
    _pinning(Mode.PIN, parsed, names)


@cli.command()
@click.argument("names", nargs=-1, required=True, metavar="NODE...", type=options.NODE_NAME)
@settings_for("unpin")
def unpin(parsed: Parsed, names: tuple[str, ...]) -> None:
    """Give pinned nodes back to the normal rule.

    For each node, the --annotation keys leave node-holder.dev/pinned. A "true" that
    node-holder wrote goes back to the normal rule (the next reconcile removes it when no
    hold is due); one a person set before the pin stays theirs. Pins on other keys stay.
    """
    _pinning(Mode.UNPIN, parsed, names)


def _pinning(mode: Mode, parsed: Parsed, nodes: tuple[str, ...]) -> None:
    _execute(str(mode), parsed, lambda p: (_keys(p), run_settings(p, mode, only=nodes)))


def _keys(parsed: Parsed) -> HoldSettings:
    """release, pin and unpin: the hold keys alone."""
    return HoldSettings(annotations=parsed[options.ANNOTATION])


# --- simulate: replay a node timeline in memory (docs/simulate.md) ---------------------------


@cli.command()
@click.argument("timeline", nargs=-1, metavar="[TIMELINE...]")
@settings_for("simulate")
def simulate(parsed: Parsed, timeline: tuple[str, ...]) -> None:
    """Replay a node timeline through the reconciler's decision, to choose a hold duration.

    TIMELINE is YAML or JSON (`nodes: [{name, created, deleted, labels}]`), kubectl
    output (`kubectl get nodes -o json`, `kubectl get nodeclaims -o json`) or the JSON
    answer of a Prometheus range query of kube_node_created (and kube_node_labels);
    several files are merged, `-` reads standard input. Every run
    decides with the same pure decide() as the CronJob and applies its patches to
    the nodes in memory. No cluster is touched; only --prometheus URL uses the network, to
    read the history from Prometheus. See docs/simulate.md.

    \b
    Examples:
      node-holder simulate reconcile/examples/batch-day.yaml --compare 10m,40m,20m/group
      node-holder simulate reconcile/examples/batch-day.yaml --sweep 10m,20m,40m,1h
      node-holder simulate --prometheus http://prometheus:9090 --last 7d --sweep
      node-holder simulate history.json --hold-duration 30m --output json
    """
    from reconcile.simulate import plot, replay  # noqa: PLC0415 (--help needs none of it)
    from reconcile.simulate import report as simulate_report  # noqa: PLC0415

    png = parsed[options.PLOT]
    if png:
        plot.check_available(png)
    asked = replay.Asked(
        compare=parsed[options.COMPARE] or "",
        interval=parsed[options.INTERVAL],
        start=parsed[options.START],
        end=parsed[options.END],
        last=parsed[options.LAST],
        sweep=parsed[options.SWEEP],
    )
    url = parsed[options.PROMETHEUS]
    if not timeline and not url:
        raise ConfigError(
            "simulate: give a TIMELINE file (`-`: standard input) or --prometheus URL "
            "(see docs/simulate.md)"
        )
    fetch = _history(options.prometheus_access(parsed), asked.interval) if url else None
    try:
        request = replay.prepare(timeline, hold_settings(parsed), asked, fetch)
        finished = simulate_report.Finished(sys.stderr, len(request.holds))
        result = replay.simulate(request, replay.ReplayOptions(parsed[options.EVENTS], finished))
    except replay.SimulationFailed as exc:
        raise RuntimeFailure(f"simulate: {exc}") from None
    except KeyboardInterrupt:
        click.echo(f"\n{PROG}: interrupted", err=True)
        sys.exit(130)  # 128 + SIGINT, as a shell reports it
    if png:
        plot.write_png(result, png)
    for line in simulate_report.render(result, parsed[options.OUTPUT], png):
        click.echo(line)


def _history(where: PrometheusAccess, step: timedelta) -> Fetch:
    """What reads the history from Prometheus, once simulate knows the range."""
    from reconcile.cluster import prometheus  # noqa: PLC0415 (only --prometheus needs HTTP)
    from reconcile.simulate.timeline import Grid  # noqa: PLC0415

    server = prometheus.connect(where)

    def say(line: str) -> None:
        click.echo(f"simulate: {line}", err=True)

    def fetch(start: datetime, end: datetime) -> tuple[str, list[Any], Grid]:
        try:
            got = prometheus.read_history(server, where, start, end, step, say)
        except prometheus.PrometheusFailed as exc:
            raise RuntimeFailure(f"simulate: {exc}") from None
        shown = prometheus.plain(where.url)
        log.info("%s: %d queries, %d samples, %d names refined", shown, *got[2:])
        return shown, got.series, Grid(start, got.end, step)

    return fetch


#: A command's settings from its parsed options: the hold settings and the run's.
Build = Callable[[Parsed], tuple[HoldSettings, RunSettings]]


def _execute(command: str, parsed: Parsed, build: Build) -> None:
    """Connect, read the CronJob's settings (--settings-from), hand over from the CronJob
    (release --suspend-cronjob), run once, report."""
    # Imported here: --help, settings errors and simulate need none of it.
    from reconcile.cli import report  # noqa: PLC0415
    from reconcile.cluster import access, client, handover, pace, read  # noqa: PLC0415
    from reconcile.run import run_once  # noqa: PLC0415

    hold, run = build(parsed)  # bad input: exit 2 before any request
    where = options.access_settings(parsed)
    started = time.monotonic()
    connection = access.connection_for(where, plugin_timeout=run.timeout.total_seconds())
    if parsed.get(options.SETTINGS_FROM, None) is not None:
        parsed = _settings_from(connection, where.request_timeout, command, parsed)
        hold, run = build(parsed)
        where = options.access_settings(parsed)
    for warning in report.unread_keys(hold, run):
        log.warning("%s", warning)
    run = run.after(time.monotonic() - started)
    kube = client.Client(
        connection,
        request_timeout=max(min(where.request_timeout, run.timeout.total_seconds()), 0.1),
        pool_size=run.workers + 1,
    )
    stop = threading.Event()
    _on_signals(stop)
    suspend = parsed.get(options.SUSPEND_CRONJOB, None)
    as_json = run.output is Output.JSON

    def landed(result: report.NodeResult | report.PoolResult) -> None:
        """Each line as its patch lands: a run killed later leaves them in its log."""
        click.echo(report.landed(result, as_json))
        sys.stdout.flush()

    try:
        if suspend is not None:
            handover.suspend_and_wait(kube, suspend, dry_run=run.dry_run)
        result = run_once(
            kube, hold, run, stop=stop, on_result=landed, describe=report.event_message
        )
    except (handover.HandoverFailed, read.ListFailed) as exc:
        raise RuntimeFailure(str(exc)) from None
    except pace.Interrupted:
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
    for warning in report.warnings(result, command):
        log.warning("%s", warning)
    if command == "release" and suspend is None and result.plan.patches:
        log.warning(
            "a scheduled run (the CronJob) holds these nodes again at its next run unless it "
            "is suspended or uninstalled: release with --suspend-cronjob NAMESPACE/NAME "
            "(node-holder/node-holder as installed) to suspend it first"
        )
    for line in report.final_lines(
        result, command, as_json, parsed.get(options.STATUS_NODES, False)
    ):
        click.echo(line)
    # The uninstall hook's release (--suspend-cronjob) has no next run to leave nodes to.
    failure = report.failure(result, next_run=suspend is None)
    if failure:
        raise RuntimeFailure(failure)


def _settings_from(connection: Connection, timeout: float, command: str, parsed: Parsed) -> Parsed:
    """The options with the CronJob's ConfigMap, read with the caller's credentials: one that
    does not exist or that the caller may not read is bad input (exit 2); any other failure
    to read it is exit 1."""
    from reconcile.cluster import client, errors, pace  # noqa: PLC0415

    ref = parsed[options.SETTINGS_FROM]
    kube = client.Client(connection, request_timeout=timeout, pool_size=1)
    try:
        data = kube.configmap_data(ref.namespace, ref.name)
    except errors.NotFound as exc:
        fix = f"name the ConfigMap the CronJob reads ({INSTALLED_SETTINGS} as installed)"
        raise ConfigError(f"--settings-from {ref}: {exc.explain()}; {fix}") from None
    except errors.Forbidden as exc:
        raise ConfigError(f"--settings-from {ref}: {exc.explain()}") from None
    except (errors.ApiError, errors.TransportError) as exc:
        raise RuntimeFailure(f"--settings-from {ref}: {pace.explain(exc)}") from None
    return options.with_configmap(parsed, command, ref, data)


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
    logs.start()
    try:
        cli.main(args=argv, prog_name=PROG, standalone_mode=False)
    except click.exceptions.Exit as exc:
        sys.exit(exc.exit_code)
    except click.exceptions.Abort:
        _fail(EXIT_RUNTIME, "aborted")
    except click.UsageError as exc:
        where = f"'{exc.ctx.command_path} --help'" if exc.ctx else f"'{PROG} --help'"
        _fail(EXIT_CONFIG, f"{exc.format_message()} (see {where})")
    except (click.ClickException, ConfigError) as exc:
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
