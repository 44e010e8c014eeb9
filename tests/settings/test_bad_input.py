"""Bad input. Every option with invalid values, broken cluster access,
an unreachable server, odd nodes and many nodes.

Input problems exit 2 with one line naming the option and its environment variable,
and send nothing: the kubeconfig points at a live API test server whose request log
must stay empty. Runtime problems exit 1, also with one line and no traceback.
"""

from __future__ import annotations

import logging
import re
import socket
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.clusters import CliResult, run_cli
from tests.helpers import NODES, OURS, assert_one_clear_line, old, young
from tests.kubeapi.apiserver import ApiServer

# (label, args, env, words the error line must contain)
BAD_OPTIONS: list[tuple[str, tuple[str, ...], dict[str, str], tuple[str, ...]]] = [
    ("hold-duration word", ("--hold-duration", "forever"), {}, ("--hold-duration",)),
    ("hold-duration negative", ("--hold-duration", "-5m"), {}, ("--hold-duration",)),
    ("hold-duration zero", ("--hold-duration", "0"), {}, ("--hold-duration",)),
    ("hold-duration empty", ("--hold-duration", ""), {}, ("--hold-duration",)),
    ("hold-duration env", (), {"HOLD_DURATION": "20 minutes"}, ("HOLD_DURATION",)),
    ("annotation bad key", ("--annotation", "not a key!"), {}, ("--annotation",)),
    ("annotation is the marker", ("--annotation", "node-holder.dev/owned-annotations"), {}, ()),
    ("annotation empty", ("--annotation", ""), {}, ("--annotation",)),
    ("annotation env", (), {"HOLD_ANNOTATION": "a/b/c"}, ("HOLD_ANNOTATION",)),
    ("hold-scope", ("--hold-scope", "galaxy"), {}, ("--hold-scope",)),
    ("hold-scope env", (), {"HOLD_SCOPE": "everything"}, ("HOLD_SCOPE",)),
    ("group-label", ("--group-label", "bad label"), {}, ("--group-label",)),
    ("group-label env", (), {"HOLD_GROUP_LABEL": "-x-"}, ("HOLD_GROUP_LABEL",)),
    ("trigger-selector", ("--trigger-selector", "a in ("), {}, ("--trigger-selector",)),
    ("trigger-selector env", (), {"HOLD_TRIGGER_SELECTOR": "=x"}, ("HOLD_TRIGGER_SELECTOR",)),
    ("node-selector", ("--node-selector", "a notin b"), {}, ("--node-selector",)),
    ("node-selector env", (), {"HOLD_NODE_SELECTOR": "a=b=c"}, ("HOLD_NODE_SELECTOR",)),
    ("max-hold word", ("--max-hold", "always"), {}, ("--max-hold",)),
    ("max-hold below hold", ("--max-hold", "5m"), {}, ("--max-hold", "shorter")),
    ("max-hold env", (), {"HOLD_MAX_DURATION": "x"}, ("HOLD_MAX_DURATION",)),
    ("dry-run env", (), {"NODE_HOLDER_DRY_RUN": "maybe"}, ("--dry-run",)),
    ("workers zero", ("--workers", "0"), {}, ("--workers",)),
    ("workers too many", ("--workers", "65"), {}, ("--workers",)),
    ("workers word", ("--workers", "many"), {}, ("--workers",)),
    ("workers env", (), {"NODE_HOLDER_WORKERS": "1.5"}, ("NODE_HOLDER_WORKERS",)),
    ("qps negative", ("--qps", "-1"), {}, ("--qps",)),
    ("qps nan", ("--qps", "nan"), {}, ("--qps",)),
    ("qps inf", ("--qps", "inf"), {}, ("--qps",)),
    ("qps env", (), {"NODE_HOLDER_QPS": "fast"}, ("NODE_HOLDER_QPS",)),
    ("qps auto (gone)", ("--qps", "auto"), {}, ("--qps", "'auto' is not a number; use a number")),
    ("events env", (), {"NODE_HOLDER_EVENTS": "sometimes"}, ("--events",)),
    ("mechanism", ("--mechanism", "budgets"), {}, ("--mechanism",)),
    ("mechanism env", (), {"NODE_HOLDER_MECHANISM": "both"}, ("NODE_HOLDER_MECHANISM",)),
    # A budget holds a whole NodePool: finer windows are refused, whichever way they come.
    (
        "budget in node scope",
        ("--mechanism", "budget", "--hold-scope", "node"),
        {},
        ("--mechanism (NODE_HOLDER_MECHANISM) budget", "--hold-scope (HOLD_SCOPE) node"),
    ),
    (
        "auto by another group label",
        ("--hold-scope", "group", "--group-label", "eks.amazonaws.com/nodegroup"),
        {"NODE_HOLDER_MECHANISM": "auto"},
        ("auto", "--group-label (HOLD_GROUP_LABEL) eks.amazonaws.com/nodegroup"),
    ),
    (
        "budget with a node selector",
        (),
        {"NODE_HOLDER_MECHANISM": "budget", "HOLD_NODE_SELECTOR": "team=a"},
        ("--node-selector (HOLD_NODE_SELECTOR) 'team=a'", "or --mechanism annotation"),
    ),
    ("timeout word", ("--timeout", "soon"), {}, ("--timeout",)),
    ("timeout zero", ("--timeout", "0s"), {}, ("--timeout",)),
    ("timeout env", (), {"NODE_HOLDER_TIMEOUT": "-1"}, ("NODE_HOLDER_TIMEOUT",)),
    ("request-timeout", ("--request-timeout", "-1s"), {}, ("--request-timeout",)),
    ("request-timeout env", (), {"NODE_HOLDER_REQUEST_TIMEOUT": "x"}, ("REQUEST_TIMEOUT",)),
    ("page-size zero", ("--page-size", "0"), {}, ("--page-size",)),
    ("page-size too big", ("--page-size", "10001"), {}, ("--page-size",)),
    ("page-size env", (), {"NODE_HOLDER_PAGE_SIZE": "lots"}, ("NODE_HOLDER_PAGE_SIZE",)),
    ("output", ("--output", "yaml"), {}, ("--output",)),
    ("output env", (), {"NODE_HOLDER_OUTPUT": "xml"}, ("NODE_HOLDER_OUTPUT",)),
    ("log-format", ("--log-format", "logfmt"), {}, ("--log-format",)),
    ("log-format env", (), {"NODE_HOLDER_LOG_FORMAT": "x"}, ("NODE_HOLDER_LOG_FORMAT",)),
    ("verbose env", (), {"NODE_HOLDER_VERBOSE": "loud"}, ("--verbose",)),
    ("settings-from", ("--settings-from", "node-holder"), {}, ("--settings-from",)),
    ("settings-from env", (), {"NODE_HOLDER_SETTINGS_FROM": "a/b/c"}, ("SETTINGS_FROM",)),
    ("unknown option", ("--hold-for", "20m"), {}, ("--hold-for",)),
]


def reconcile(kubeconfig: str | Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli("reconcile", "--kubeconfig", str(kubeconfig), *args, env=env)


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [pytest.param(a, e, w, id=label) for label, a, e, w in BAD_OPTIONS],
)
def test_an_invalid_option_exits_2_with_one_line_and_sends_nothing(
    api: ApiServer,
    kubeconfig: Path,
    args: tuple[str, ...],
    env: dict[str, str],
    words: tuple[str, ...],
) -> None:
    young(api, "n")

    result = reconcile(kubeconfig, *args, env=env)

    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    for word in words:
        assert word in line
    assert result.stdout == ""
    assert api.requests == []


def test_every_reconcile_option_has_an_invalid_value_case() -> None:
    """Keeps the table above complete when an option is added."""
    from reconcile.cli import cli  # noqa: PLC0415

    command = cli.commands["reconcile"]  # type: ignore[attr-defined]
    covered = {token for _, args, env, words in BAD_OPTIONS for token in (*args, *env, *words)}
    missing = [
        p.opts[0]
        for p in command.params
        if p.opts[0] not in ("--kubeconfig", "--context", "--help")  # tested further down
        and not covered & {*p.opts, str(getattr(p, "envvar", None))}
    ]
    assert not missing, f"no invalid-value case for {missing}"


# --- cluster access -------------------------------------------------------------------


def _kubeconfig_text(api: ApiServer, tmp_path: Path) -> str:
    return api.write_kubeconfig(tmp_path / "good").read_text()


BROKEN_KUBECONFIGS: dict[str, Any] = {
    "missing file": None,
    "a directory": "DIR",
    "empty": "",
    "yaml syntax error": "apiVersion: v1\nclusters: [\n  - name: x\n    }\n",
    "a tab where yaml forbids it": "apiVersion: v1\n\tkind: Config\n",
    "not a mapping": "- just\n- a list\n",
    "binary junk": "\x00\x01\x02",
    "no server": lambda text, url: text.replace(f"server: {url}", "insecure: true"),
    "server not a URL": lambda text, url: text.replace(url, "not a url"),
    "server without a scheme": lambda text, url: text.replace("http://", ""),
    "no current context": lambda text, url: text.replace("current-context: test", ""),
}


@pytest.mark.parametrize("case", list(BROKEN_KUBECONFIGS))
def test_broken_cluster_access_exits_2_with_one_line(
    api: ApiServer, tmp_path: Path, case: str
) -> None:
    spec = BROKEN_KUBECONFIGS[case]
    path = tmp_path / "kubeconfig"
    if spec == "DIR":
        path.mkdir()
    elif callable(spec):
        path.write_text(spec(_kubeconfig_text(api, tmp_path), api.url))
    elif spec is not None:
        path.write_text(spec)

    result = reconcile(path)

    assert result.code == 2, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert "kubeconfig" in line.lower()
    assert api.requests == []


def test_an_unknown_context_exits_2(api: ApiServer, kubeconfig: Path) -> None:
    by_option = reconcile(kubeconfig, "--context", "prod")
    by_env = reconcile(kubeconfig, env={"NODE_HOLDER_CONTEXT": "prod"})
    for result in (by_option, by_env):
        assert result.code == 2
        line = assert_one_clear_line(result.stderr)
        assert "prod" in line and "--context" in line
    assert api.requests == []


def test_no_cluster_access_at_all_exits_2(
    api: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.kube/config either

    result = run_cli("reconcile")

    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    assert "--kubeconfig" in line and "KUBECONFIG" in line


# --- an unreachable server: exit 1 within seconds ----------------------------------------


@pytest.fixture
def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def silent_server() -> Iterator[int]:
    """Accepts connections (the kernel does) and never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(16)
        yield int(s.getsockname()[1])


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A port whose accept queue is full: new connections get no answer at all."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(0)
        port = int(s.getsockname()[1])
        fillers = []
        for _ in range(3):
            c = socket.socket()
            c.setblocking(False)
            c.connect_ex(("127.0.0.1", port))
            fillers.append(c)
        try:
            yield port
        finally:
            for c in fillers:
                c.close()


def pointed_at(api: ApiServer, tmp_path: Path, port: int) -> Path:
    path = tmp_path / "elsewhere"
    path.write_text(_kubeconfig_text(api, tmp_path).replace(api.url, f"http://127.0.0.1:{port}"))
    return path


class Retries(logging.Handler):
    """The retries the client announces (at INFO: `-v` shows them), counted here and kept
    off stderr, so that the run's settings and its one line stay the defaults'."""

    def __init__(self) -> None:
        super().__init__()
        self.numbers: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        if found := re.search(r"; retry (\d+) in [\d.]+s$", record.getMessage()):
            self.numbers.append(int(found[1]))


@pytest.fixture
def retries() -> Iterator[Retries]:
    logger = logging.getLogger("reconcile.cluster.pace")
    handler, level, propagate = Retries(), logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def test_a_refused_connection_gives_up_within_seconds_with_default_settings(
    api: ApiServer, tmp_path: Path, closed_port: int, retries: Retries
) -> None:
    """Six tries with capped backoff (seconds), not the 45 s --timeout: the tries are
    counted, not the seconds."""
    result = reconcile(pointed_at(api, tmp_path, closed_port))

    assert result.code == 1
    line = assert_one_clear_line(result.stderr)
    assert "connection refused" in line and "nothing was changed" in line
    assert retries.numbers == [1, 2, 3, 4, 5]  # six tries, then it gave up


@pytest.mark.parametrize(
    ("server", "words"),
    [("silent_server", "did not answer in time"), ("blackhole", "cannot connect")],
)
def test_a_server_that_never_answers_is_given_up_on_at_the_timeout(
    api: ApiServer,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    server: str,
    words: str,
    retries: Retries,
) -> None:
    """Bounded by --timeout: tries of 1 s within 3 s end before the six tries do (a busy
    machine makes fewer tries, never more)."""
    port = request.getfixturevalue(server)
    kubeconfig = pointed_at(api, tmp_path, port)
    result = reconcile(kubeconfig, "--timeout", "3s", "--request-timeout", "1s")

    assert result.code == 1
    line = assert_one_clear_line(result.stderr)
    assert "cannot list" in line and "nothing was changed" in line
    assert words in line or "cannot connect" in line
    tries = retries.numbers
    assert tries and tries == list(range(1, len(tries) + 1)) and len(tries) < 5, tries


# --- odd nodes, many nodes -------------------------------------------------------------


def test_nodes_without_any_annotations_or_labels_are_held(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "bare")
    old(api, "plain")

    def strip(obj: dict[str, Any]) -> None:
        obj["metadata"].pop("labels", None)
        obj["metadata"].pop("annotations", None)

    api.edit_node("bare", strip)
    api.edit_node("plain", strip)
    assert "annotations" not in api.get_node("bare")["metadata"]  # type: ignore[index]

    result = reconcile(kubeconfig, "--hold-scope", "group")

    assert result.code == 0, result.stderr
    assert api.annotations("bare") == OURS and api.annotations("plain") == OURS


@pytest.mark.parametrize("stamp", ["yesterday", "2026-13-45T25:61:00Z", "", None])
def test_a_node_with_a_malformed_timestamp_changes_nothing(
    api: ApiServer, kubeconfig: Path, stamp: str | None
) -> None:
    young(api, "fine")
    old(api, "broken")

    def corrupt(obj: dict[str, Any]) -> None:
        if stamp is None:
            del obj["metadata"]["creationTimestamp"]
        else:
            obj["metadata"]["creationTimestamp"] = stamp

    # The test server stores a person's edit as given (a real API server would refuse it).
    api.edit_node("broken", corrupt)

    result = reconcile(kubeconfig)

    assert result.code == 1
    line = assert_one_clear_line(result.stderr)
    assert "node/broken" in line and "creationTimestamp" in line
    assert "nothing was changed" in line
    assert api.writes() == []


def test_thousands_of_nodes_get_exactly_one_write_each(api: ApiServer, kubeconfig: Path) -> None:
    names = api.add_nodes(3000, created=api.now() - timedelta(days=1), eks=False)
    young(api, "new")

    result = reconcile(kubeconfig, "--workers", "16", "--qps", "0")

    assert result.code == 0, result.stderr
    stored = Counter(r.path for r in api.writes() if r.status == 200)
    assert stored == Counter(f"{NODES}/{n}" for n in [*names, "new"])
    assert len(api.writes()) == 3001
    assert result.lines[-1].endswith(
        "3001 nodes: 3001 added, 0 removed, 0 unchanged, 0 held by others, 0 exempt, 0 deleting"
    )
