"""Cluster access fails early and says why: plugins, certificates, contexts, kubeconfig lists.

Each bad access is exit 2 with one line naming it, before any request reaches the API test
server; URLs the tool prints carry no credentials.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from reconcile.cluster import access
from tests.clusters import CliResult, run_cli
from tests.helpers import OURS, REPO, assert_one_clear_line, old, run_python, young
from tests.kubeapi.apiserver import ApiServer, Fault

V1 = "client.authentication.k8s.io/v1"
JSON_LOGS = ("--log-format", "json", "--page-size", "2")


def reconcile(kubeconfig: Path | str, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli("reconcile", "--kubeconfig", str(kubeconfig), *args, env=env)


def edited(api: ApiServer, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A kubeconfig without credentials (no token in the URL either), then `change`d."""
    path = api.write_kubeconfig(tmp_path / "kubeconfig", identity="noauth")
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc))
    return path


def plugin(tmp_path: Path, script: str) -> str:
    path = tmp_path / "get-token"
    path.write_text("#!/bin/sh\n" + script)
    path.chmod(0o755)
    return str(path)


def with_exec(command: str, **more: Any) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["users"][0]["user"] = {"exec": {"apiVersion": V1, "command": command, **more}}

    return change


def credential(token: str, api_version: str = V1) -> str:
    doc = {"apiVersion": api_version, "kind": "ExecCredential", "status": {"token": token}}
    return json.dumps(doc)


# --- exec credential plugins ----------------------------------------------------------


def test_a_working_plugin_s_token_is_used(api: ApiServer, tmp_path: Path) -> None:
    old(api, "n1")
    young(api, "n2")
    script = plugin(tmp_path, f"echo '{credential(api.token('admin'))}'\n")
    result = reconcile(edited(api, tmp_path, with_exec(script)))
    assert result.code == 0, result.stderr
    assert api.annotations("n1") == OURS
    assert {r.identity for r in api.requests} == {"admin"}


def test_a_plugin_that_asks_for_cluster_info_is_told_the_cluster(
    api: ApiServer, tmp_path: Path
) -> None:
    old(api, "n1")
    script = plugin(
        tmp_path,
        f"""case "$KUBERNETES_EXEC_INFO" in
  *'"interactive": false'*'"server": "{api.url}"'*) echo '{credential(api.token("admin"))}';;
  *) echo "no cluster in $KUBERNETES_EXEC_INFO" >&2; exit 3;;
esac
""",
    )
    kubeconfig = edited(api, tmp_path, with_exec(script, provideClusterInfo=True))
    result = reconcile(kubeconfig, "--dry-run")
    assert result.code == 0, result.stderr
    assert {r.identity for r in api.requests} == {"admin"}


PLUGIN_FAILURES = {
    "missing": (None, "was not found: run 'brew install aws'"),
    "fails": ("echo 'An error occurred (ExpiredToken)' >&2; exit 255", "failed (exit 255)"),
    "prints garbage": ("echo 'Enter MFA code:'", "is not JSON"),
    "prints JSON of another kind": ('echo \'{"kind": "Status"}\'', "printed no ExecCredential"),
    "prints no token": (
        f"echo '{json.dumps({'apiVersion': V1, 'kind': 'ExecCredential', 'status': {}})}'",
        "printed no token nor certificate",
    ),
    "answers another apiVersion": (
        f"echo '{credential('x', 'client.authentication.k8s.io/v1beta1')}'",
        "not the 'client.authentication.k8s.io/v1' asked for",
    ),
}


@pytest.mark.parametrize("case", list(PLUGIN_FAILURES))
def test_a_plugin_failure_is_a_configuration_error_before_any_request(
    api: ApiServer, tmp_path: Path, case: str
) -> None:
    script, expected = PLUGIN_FAILURES[case]
    command = str(tmp_path / "aws") if script is None else plugin(tmp_path, script + "\n")
    kubeconfig = edited(api, tmp_path, with_exec(command, installHint="run 'brew install aws'"))

    result = reconcile(kubeconfig)

    assert result.code == 2, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert f'credential plugin "{command}"' in line and expected in line, line
    if case == "fails":
        assert "ExpiredToken" in line  # the plugin's own message
    assert api.requests == []


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (killed, but not yet reaped by its new parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_plugin_that_hangs_is_killed_and_named_against_the_configured_timeout(
    api: ApiServer, tmp_path: Path
) -> None:
    """The line names --timeout as set ("1s"), not what was left of it when the plugin started
    (it said "0.99873s"); the plugin and the child it started, which keeps the pipes open, are
    both killed."""
    pids = tmp_path / "pids"
    script = plugin(tmp_path, f"sleep 60 &\necho $$ $! > {pids}\nsleep 60\n")
    kubeconfig = edited(api, tmp_path, with_exec(script))

    result = reconcile(kubeconfig, "--timeout", "1s")

    assert result.code == 2, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert line.endswith(
        f'credential plugin "{script}" (kubeconfig user exec) did not finish within '
        "--timeout (1s): does it wait for input?"
    ), line
    shell, child = map(int, pids.read_text().split())
    # SIGKILL is delivered when the kernel next runs the process: on a loaded machine a
    # moment after the CLI exits. A process the CLI never signalled would live for 60 s.
    for _ in range(100):
        if not alive(shell) and not alive(child):
            break
        time.sleep(0.1)
    assert not alive(shell) and not alive(child)
    assert api.requests == []


def test_the_plugin_s_time_counts_against_the_run_timeout(api: ApiServer, tmp_path: Path) -> None:
    """A run ends within --timeout of its start, the credential plugin included: after a
    plugin that takes 3 of the 4 seconds, a list the server answers in 2 s is past the run's
    deadline, so the run gives up (exit 1) having sent that one list and nothing else. Were
    the deadline counted from the plugin's end, the answer would come in time and n1 would be
    held."""
    old(api, "n1")
    young(api, "n2")
    script = plugin(tmp_path, f"sleep 3\necho '{credential(api.token('admin'))}'\n")
    kubeconfig = edited(api, tmp_path, with_exec(script))
    slow = Fault(method="GET", path="^/api/v1/nodes$", delay=2, times=None)
    api.inject(slow)

    result = reconcile(kubeconfig, "--timeout", "4s")

    assert result.code == 1, result.stderr
    assert "cannot list nodes:" in result.stderr and "did not answer in time" in result.stderr
    assert slow.hits == 1  # the one list, given what was left after the plugin
    assert all(r.method == "GET" for r in api.requests)
    assert api.annotations("n1") == {}


def counting_plugin(tmp_path: Path, tokens: list[str], expires: list[str]) -> str:
    """A plugin that hands out `tokens[k]` expiring at `expires[k]` on its k-th run and counts
    its runs in tmp_path/runs."""
    answers = [
        {
            "apiVersion": V1,
            "kind": "ExecCredential",
            "status": {"token": t, "expirationTimestamp": e},
        }
        for t, e in zip(tokens, expires, strict=True)
    ]
    (tmp_path / "answers").write_text("".join(json.dumps(a) + "\n" for a in answers))
    return plugin(tmp_path, f'cd {tmp_path}; echo run >> runs; sed -n "$(wc -l < runs)p" answers\n')


def test_a_credential_refused_mid_run_is_renewed_and_the_held_cluster_ends_fully_held(
    api: ApiServer, tmp_path: Path
) -> None:
    """The issue's run: a plugin's token expires (at the server's time) after 60 of 200 patches.
    Each 401 runs the plugin once more and sends the refused request again once."""
    start = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    api.set_clock(start)
    api.add_nodes(199, created=start - timedelta(hours=3), eks=False)
    young(api, "new-node")
    tokens, expiry = [f"short-lived-{k}" for k in range(6)], []
    for k, token in enumerate(tokens):
        expiry.append(start + timedelta(minutes=k + 1))  # each token lasts 60 patches
        api.accept_token(token, "admin", expires=expiry[-1])
    # The server's clock runs a second per patch: the plugin's expirationTimestamp (right for
    # the server) is still ahead for this machine's clock, so only the 401 tells.
    api.on_request(lambda r: r.method == "PATCH" and api.advance_clock(timedelta(seconds=1)))
    stamps = [e.strftime("%Y-%m-%dT%H:%M:%SZ") for e in expiry]
    kubeconfig = edited(api, tmp_path, with_exec(counting_plugin(tmp_path, tokens, stamps)))

    result = reconcile(kubeconfig, "--output", "json")

    assert result.code == 0, result.stderr
    assert all(api.annotations(n) == OURS for n in api.node_names())
    assert result.json["summary"]["added"] == 200
    refused = [r for r in api.requests if r.status == 401]
    assert refused and {r.method for r in refused} == {"PATCH"}
    assert (tmp_path / "runs").read_text().count("run") == 4  # 200 patches, 60 per token


def test_an_exec_credential_is_renewed_once_its_expiration_timestamp_passes(
    api: ApiServer, tmp_path: Path
) -> None:
    """Before it is refused: a token past its expirationTimestamp is not sent again."""
    api.write_latency = 0.15  # 12 patches one at a time: the run lasts more than a second
    api.add_nodes(11, created=api.now() - timedelta(hours=3), eks=False)
    young(api, "new-node")
    passed = (datetime.now(UTC) - timedelta(seconds=5)).strftime("%Y-%m-%dT%H:%M:%SZ")
    script = counting_plugin(tmp_path, [api.token("admin")] * 50, [passed] * 50)
    kubeconfig = edited(api, tmp_path, with_exec(script))

    result = reconcile(kubeconfig, "--workers", "1")

    assert result.code == 0, result.stderr
    assert all(api.annotations(n) == OURS for n in api.node_names())
    assert (tmp_path / "runs").read_text().count("run") >= 2
    assert 401 not in {r.status for r in api.requests}  # renewed before any refusal


# --- certificates ------------------------------------------------------------------------


def https(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    """Point the kubeconfig at https (the check must come before any connection)."""

    def both(doc: dict[str, Any]) -> None:
        cluster = doc["clusters"][0]["cluster"]
        cluster["server"] = cluster["server"].replace("http://", "https://")
        change(doc)

    return both


def user(**fields: str) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        doc["users"][0]["user"] = dict(fields)

    return change


NOT_A_CERT = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nnot really\n").decode()
CERT_FAILURES = {
    "certificate data not base64": (
        user(**{"client-certificate-data": "not base64!", "client-key-data": "eA=="}),
        "client-certificate-data is not base64",
    ),
    "certificate file missing": (
        user(**{"client-certificate": "/nowhere/client.crt", "client-key": "/nowhere/k.key"}),
        "client-certificate file /nowhere/client.crt does not exist",
    ),
    "CA data not base64": (
        lambda doc: doc["clusters"][0]["cluster"].update({"certificate-authority-data": "%%"}),
        "certificate-authority-data is not base64",
    ),
    "certificate data that is no certificate": (
        user(**{"client-certificate-data": NOT_A_CERT, "client-key-data": NOT_A_CERT}),
        "client-certificate/client-key do not load",
    ),
}


@pytest.mark.parametrize("case", list(CERT_FAILURES))
def test_bad_certificates_are_configuration_errors(
    api: ApiServer, tmp_path: Path, case: str
) -> None:
    change, expected = CERT_FAILURES[case]
    result = reconcile(edited(api, tmp_path, https(change)))
    assert result.code == 2, result.stderr
    line = assert_one_clear_line(result.stderr)
    assert expected in line, line
    assert api.requests == []


# --- contexts, kubeconfig lists, in-cluster ----------------------------------------------


def test_an_unknown_context_is_named_as_kubectl_does(api: ApiServer, kubeconfig: Path) -> None:
    result = reconcile(kubeconfig, "--context", "nope")
    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    assert 'context "nope" does not exist' in line and "--context" in line
    assert "test" in line  # the contexts there are
    assert api.requests == []


def test_missing_entries_of_a_kubeconfig_list_are_skipped_as_kubectl_does(
    api: ApiServer, kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old(api, "n1")
    young(api, "n2")
    missing = tmp_path / "missing"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(missing), str(kubeconfig)]))
    result = run_cli("reconcile")
    assert result.code == 0, result.stderr
    assert api.annotations("n1") == OURS


def test_in_a_kubeconfig_list_the_first_current_context_wins_as_in_kubectl(
    api: ApiServer, kubeconfig: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old(api, "n1")
    young(api, "n2")
    other = tmp_path / "other"
    other.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "elsewhere", "cluster": {"server": "ftp://nowhere"}}],
                "users": [{"name": "someone", "user": {}}],
                "contexts": [
                    {"name": "elsewhere", "context": {"cluster": "elsewhere", "user": "someone"}}
                ],
                "current-context": "elsewhere",
            }
        )
    )
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(kubeconfig), str(other)]))
    assert run_cli("reconcile").code == 0  # "test", from the first file
    assert api.annotations("n1") == OURS
    by_name = run_cli("reconcile", "--context", "elsewhere")  # still there to pick by name
    assert by_name.code == 2 and "ftp://nowhere" in by_name.stderr


def test_a_kubeconfig_list_with_every_entry_missing_names_them(
    api: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(first), str(second)]))
    result = run_cli("reconcile")
    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    assert str(first) in line and str(second) in line and "does not exist" in line


def in_a_pod(
    monkeypatch: pytest.MonkeyPatch,
    home: Path,
    port: int | None,
    token: str | None = None,
    ca: str | None = None,
    host: str = "10.0.0.1",
) -> None:
    """A pod's environment: KUBERNETES_SERVICE_HOST/PORT (None: unset), what is given of the
    service account mounted under home/serviceaccount, and no kubeconfig."""
    mounted = home / "serviceaccount"
    mounted.mkdir(exist_ok=True)
    for name, content in (("token", token), ("ca.crt", ca)):
        if content is not None:
            (mounted / name).write_text(content)
    monkeypatch.setattr(access, "IN_CLUSTER_TOKEN", mounted / "token")
    monkeypatch.setattr(access, "IN_CLUSTER_CA", mounted / "ca.crt")
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    if port is None:
        monkeypatch.delenv("KUBERNETES_SERVICE_PORT", raising=False)
    else:
        monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))


def test_in_a_pod_without_a_mounted_token_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    in_a_pod(monkeypatch, tmp_path, port=443)
    result = run_cli("reconcile")
    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    assert "not running in a pod" not in line
    assert str(tmp_path / "serviceaccount" / "token") in line
    assert "automountServiceAccountToken" in line


@pytest.mark.parametrize("missing", ["KUBERNETES_SERVICE_PORT", "ca.crt"])
def test_in_a_pod_a_missing_port_or_ca_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, missing: str
) -> None:
    port = None if missing == "KUBERNETES_SERVICE_PORT" else 443
    ca = None if missing == "ca.crt" else "not read: the error comes first"
    in_a_pod(monkeypatch, tmp_path, port=port, token="t0k", ca=ca)
    result = run_cli("reconcile")
    assert result.code == 2, result.stderr
    assert missing in assert_one_clear_line(result.stderr)


def test_in_a_pod_cluster_access_reads_no_yaml(tmp_path: Path) -> None:
    """The CronJob's run (in a pod, no kubeconfig) never imports yaml: 12 ms of start-up,
    every minute. A kubeconfig still loads it (the other tests here). The mounted CA here is
    not one: access goes as far as loading it, and says to check that file, not a kubeconfig."""
    (tmp_path / "token").write_text("t0k")
    (tmp_path / "ca.crt").write_text("not read before the connection is used")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from reconcile.cli import main\n"  # the command line and the run, as the CronJob
        "from reconcile import run\n"
        "from reconcile.cluster import access\n"
        "from reconcile.rule.settings import ClusterAccess\n"
        f"access.IN_CLUSTER_TOKEN = Path({str(tmp_path / 'token')!r})\n"
        f"access.IN_CLUSTER_CA = Path({str(tmp_path / 'ca.crt')!r})\n"
        "try:\n"
        "    access.connection_for(ClusterAccess())\n"
        "except Exception as exc:\n"
        "    print(type(exc).__name__, exc)\n"
        "print('server', 'yaml' in sys.modules)\n"
    )
    env = {**os.environ, "KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
    env.pop("KUBECONFIG", None)
    done = run_python("-c", code, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "server False", done.stdout
    first = done.stdout.splitlines()[0]
    assert first.startswith("ConfigError the cluster's certificate-authority does not load"), first
    assert first.endswith(f"check the CA mounted at {tmp_path / 'ca.crt'}, or pass --kubeconfig")


# --- credentials in URLs -----------------------------------------------------------------


def test_a_password_in_the_server_url_is_never_printed(
    api: ApiServer, tmp_path: Path, unused_port: int
) -> None:
    def change(doc: dict[str, Any]) -> None:
        doc["clusters"][0]["cluster"]["server"] = (
            f"http://admin:secret@127.0.0.1:{unused_port}/?token=hunter2"
        )

    result = reconcile(edited(api, tmp_path, change), "--timeout", "1s", "-v")
    assert result.code == 1
    assert "secret" not in result.stderr and "hunter2" not in result.stderr
    assert "REDACTED" in result.stderr


def test_a_password_in_a_server_url_that_is_not_http_is_never_printed(
    api: ApiServer, tmp_path: Path
) -> None:
    def change(doc: dict[str, Any]) -> None:
        doc["clusters"][0]["cluster"]["server"] = "ftp://admin:secret@example.com"

    result = reconcile(edited(api, tmp_path, change))
    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    assert "secret" not in line and "ftp://REDACTED@example.com" in line


@pytest.fixture
def unused_port() -> int:
    import socket  # noqa: PLC0415

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --- insecure-skip-tls-verify -----------------------------------------------------------


def test_inside_a_pod_the_mounted_service_account_is_used(
    tls_api: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old(tls_api, "n1")
    young(tls_api, "n2")
    ca = (tmp_path / "tls.crt").read_text()
    token = tls_api.token("admin")
    in_a_pod(monkeypatch, tmp_path, port=tls_api.port, token=token, ca=ca, host="127.0.0.1")

    result = run_cli("reconcile")

    assert result.code == 0, result.stderr
    assert tls_api.annotations("n1") == OURS
    assert {r.identity for r in tls_api.requests} == {"admin"}  # verified TLS, the token


def test_insecure_skip_tls_verify_is_said_once_as_a_json_log_record(
    tls_api: ApiServer, tmp_path: Path
) -> None:
    names = [f"n{i}" for i in range(6)]
    old(tls_api, *names[:-1])
    young(tls_api, names[-1])

    def insecure(doc: dict[str, Any]) -> None:
        doc["clusters"][0]["cluster"]["insecure-skip-tls-verify"] = True

    kubeconfig = tls_api.write_kubeconfig(tmp_path / "kc")
    doc = yaml.safe_load(kubeconfig.read_text())
    insecure(doc)
    kubeconfig.write_text(yaml.safe_dump(doc))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = ("-m", "reconcile", "reconcile", "--kubeconfig", str(kubeconfig), *JSON_LOGS)
    done = run_python(*args, env=env, timeout=60)

    assert done.returncode == 0, done.stderr
    assert all(tls_api.annotations(n) == OURS for n in names)
    assert len(tls_api.requests) > 6  # pages, patches and an Event: many requests, one line
    lines = done.stderr.splitlines()
    records = [json.loads(line) for line in lines]  # every line is JSON
    said = [r for r in records if "insecure-skip-tls-verify" in json.dumps(r)]
    assert len(said) == 1, done.stderr
    assert "InsecureRequestWarning" not in done.stderr


# --- a user without a home ----------------------------------------------------------------

NO_PASSWD_UID = 65532  # the image's user: no passwd entry, and runtimes may leave HOME unset
SYSTEM_PYTHON = Path("/usr/bin/python3")  # the venv's interpreter lives under root's 0700 home


def run_as_homeless_user(args: list[str], shared: Path) -> subprocess.CompletedProcess[str]:
    """The real CLI in a child process as a uid with no passwd entry and no HOME."""
    import pwd  # noqa: PLC0415
    import sysconfig  # noqa: PLC0415

    if os.geteuid() != 0 or not SYSTEM_PYTHON.exists():
        pytest.skip("needs root (to switch uid) and /usr/bin/python3")
    with pytest.raises(KeyError):
        pwd.getpwuid(NO_PASSWD_UID)  # the premise: no passwd entry for this uid
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    return subprocess.run(
        [str(SYSTEM_PYTHON), "-m", "reconcile", *args],
        user=NO_PASSWD_UID,
        group=NO_PASSWD_UID,
        extra_groups=[],
        env=env,
        cwd=shared,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def shared_dir() -> Any:
    """A directory another uid can read (pytest's tmp_path is private to root)."""
    import shutil  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    folder = Path(tempfile.mkdtemp(prefix="node-holder-homeless-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_a_user_without_home_runs_with_a_kubeconfig(api: ApiServer, shared_dir: Path) -> None:
    """uid 65532 without HOME: `~/.kube/config` is never looked for when --kubeconfig is given."""
    young(api, "n1")
    kubeconfig = api.write_kubeconfig(shared_dir / "kubeconfig")
    kubeconfig.chmod(0o644)
    done = run_as_homeless_user(["reconcile", "--kubeconfig", str(kubeconfig)], shared_dir)
    assert done.returncode == 0, done.stderr
    assert "home directory" not in done.stderr
    assert api.annotations("n1") == OURS


def test_a_user_without_home_and_no_kubeconfig_is_told_there_is_no_access(
    shared_dir: Path,
) -> None:
    """A missing home is "no default kubeconfig": exit 2 with the usual line, not exit 1."""
    done = run_as_homeless_user(["status"], shared_dir)
    assert done.returncode == 2, done.stderr
    line = assert_one_clear_line(done.stderr)
    assert "no cluster access" in line and "home directory" not in line
