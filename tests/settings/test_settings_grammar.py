"""One grammar per setting: the flag and the environment variable give the same verdict.

The parity test parses through click itself (`make_context`, which reads the environment
too) without running the command; the cases from the issue then run the real CLI against
the API test server and check that nothing was sent or changed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import click
import pytest

from reconcile.cli import cli
from reconcile.cli.options import BY_ENV, BY_NAME, COMMANDS
from reconcile.rule.settings import ConfigError
from tests.clusters import CliResult, run_cli
from tests.helpers import KEY, NODES, OURS, assert_one_clear_line, old, young
from tests.kubeapi.apiserver import ApiServer

#: Texts tried for every setting: good ones, bad ones, and ones that used to slip through.
COMMON = ["", " ", "0", "1", "20m", "abc", "a b", "true", "٣", "２０", "1e3"]  # noqa: RUF001
TEXTS: dict[str, list[str]] = {
    "hold_duration": [
        "90s",
        "1h30m",
        "PT20M",
        "20",
        "0.0000001s",
        "99999999999",
        "8d",
        "7d",
        "-5m",
        "nan",
    ],
    "annotation": [
        "karpenter.sh/do-not-disrupt",
        "karpenter.sh/do not disrupt",
        "a/b, c/d",
        "a/b,,c/d",
        "a/b,",
        " a/b ",
        "node-holder.dev/owned-annotations",
        "example.com/hold",
    ],
    "hold_scope": ["cluster", "GROUP", "node", "galaxy"],
    "group_label": ["karpenter.sh/nodepool", "bad label", "-x-"],
    "trigger_selector": ["karpenter.sh/nodepool", "a in (x,y)", "a in (", "=x"],
    "node_selector": ["a=b", "a notin b", "!a"],
    "max_hold": ["1h", "5m", "8d", "0.0000001s"],
    "mechanism": ["annotation", "Budget", "auto", "budgets"],
    "clock": ["server", "local", "sundial"],
    "timeout": ["45s", "0.0000001s", "2h", "1s"],
    "request_timeout": ["10s", "0.0000001s", "11m"],
    "page_size": ["500", "0", "10001", "1.5"],
    "dry_run": ["false", "yes", "maybe"],
    "workers": ["8", "65", "many"],
    "qps": ["1000", "0.5", "-1", "inf", "nan", "auto", " AUTO ", "automatic", ""],
    "events": ["true", "off", "sometimes"],
    "kubeconfig": ["/tmp/kc.yaml"],
    "suspend_cronjob": ["node-holder/node-holder", "x", "a/b/c", "UP/x", "ns/" + "n" * 53],
    "settings_from": ["", "x", "a/b/c", "UP/x", "ns/x_y", "ns/" + "n" * 254],
    "context": ["prod"],
    "output": ["json", "TEXT", "yaml"],
    "log_format": ["json", "logfmt"],
    "verbose": ["2", "loud", "4"],
    "nodes": ["true", "no", "maybe"],
}


#: Commands with a required argument get one, so that only the settings are judged.
ARGUMENTS = {"pin": ["node-a"], "unpin": ["node-a"]}


def _verdict(command: str, args: list[str], env: dict[str, str], monkeypatch) -> object:
    """The parsed value of every setting, or the one error line."""
    for variable in BY_ENV:
        monkeypatch.delenv(variable, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cmd = cli.commands[command]  # type: ignore[attr-defined]
    try:
        with cmd.make_context(command, [*args, *ARGUMENTS.get(command, [])]) as ctx:
            params = dict(ctx.params)
    except (ConfigError, click.UsageError) as exc:
        return ("error", str(exc).replace(_flag_of(exc), "<option>"))
    return params


def _flag_of(exc: Exception) -> str:
    text = str(exc)
    return text.split(":", 1)[0] if ":" in text else ""


def _flag_args(name: str, text: str) -> list[str]:
    setting = BY_NAME[name]
    if name in ("dry_run", "nodes"):
        return [setting.flag] if text.strip().lower() in ("true", "yes", "on", "1") else []
    if name == "events":
        on = text.strip().lower() in ("true", "yes", "on", "1")
        return ["--events" if on else "--no-events"]
    if name == "verbose":
        return ["-" + "v" * int(text)] if text.isdigit() and 0 < int(text) <= 3 else []
    return [setting.flag, text]


def _parity_cases() -> list[tuple[str, str, str]]:
    """Each (setting, text) once, judged by the first command that takes the setting: the
    commands share the Setting and its parser. Every other command that takes the setting
    gets its first text, a good one: the flag and the variable reach that command too."""
    cases: list[tuple[str, str, str]] = []
    judged: set[str] = set()
    for command, settings in COMMANDS.items():
        if command == "simulate":
            continue  # the same Setting objects; simulate has a required argument
        for setting in settings:
            texts = list(dict.fromkeys(TEXTS[setting.name] + COMMON))
            if setting.name in judged:
                texts = texts[:1]  # judged already: does this command take it too?
            cases += [(command, setting.name, text) for text in texts]
            judged.add(setting.name)
    return cases


@pytest.mark.parametrize(("command", "name", "text"), _parity_cases())
def test_flag_and_env_var_give_the_same_verdict(command, name, text, monkeypatch) -> None:
    setting = BY_NAME[name]
    through_env = _verdict(command, [], {setting.env: text}, monkeypatch)
    if text == TEXTS[name][0]:  # the good text every command that takes the setting gets
        assert isinstance(through_env, dict) and name in through_env, through_env
    if name in ("dry_run", "events", "verbose", "nodes"):
        # Switches: the flag spelling cannot carry arbitrary text. A good env value must mean
        # what the matching flag means; a bad one is refused with the env var's name.
        if isinstance(through_env, tuple):
            assert setting.env in through_env[1] or "<option>" in through_env[1]
            return
        through_flag = _verdict(command, _flag_args(name, text), {}, monkeypatch)
        assert through_flag == through_env
        return
    through_flag = _verdict(command, _flag_args(name, text), {}, monkeypatch)
    assert through_flag == through_env, (through_flag, through_env)
    if isinstance(through_env, tuple):
        assert "\n" not in through_env[1]


def test_every_option_of_every_command_is_defined_once_in_the_settings_table() -> None:
    """No command defines an option of its own (simulate had eight): each comes from the
    table, with its one parser, and --help lists nothing else."""
    for name, command in cli.commands.items():  # type: ignore[attr-defined]
        options = [p for p in command.params if isinstance(p, click.Option)]
        assert [p.name for p in options] == [s.name for s in COMMANDS[name]], name
        assert all(BY_NAME[p.name].kind is p.kind for p in options), name  # type: ignore[attr-defined]


def test_every_setting_of_every_command_is_in_the_parity_table() -> None:
    """simulate's own options have no environment variable: nothing to compare them with."""
    used = {setting.name for settings in COMMANDS.values() for setting in settings if setting.env}
    assert used <= set(TEXTS), used - set(TEXTS)


# --- the cases from the issue, for real ---------------------------------------------------


def reconcile(kubeconfig: Path, *args: str, env: dict[str, str] | None = None) -> CliResult:
    return run_cli("reconcile", "--kubeconfig", str(kubeconfig), *args, env=env)


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"HOLD_ANNOTATION": "karpenter.sh/do not disrupt"}, ("HOLD_ANNOTATION", "space")),
        ({"HOLD_DURATION": "99999999999"}, ("HOLD_DURATION", "longer than 7d")),
        ({"HOLD_DURATION": "0.0000001s"}, ("HOLD_DURATION", "shorter than 1s")),
        ({"HOLD_DURATION": ""}, ("HOLD_DURATION", "empty")),
        ({"HOLD_DURATION": "٢٠"}, ("HOLD_DURATION", "not a duration")),
        ({"NODE_HOLDER_WORKERS": "８"}, ("NODE_HOLDER_WORKERS", "not a whole number")),  # noqa: RUF001
        ({"NODE_HOLDER_TIMEOUT": "0.0000001s"}, ("NODE_HOLDER_TIMEOUT", "shorter than 1s")),
        ({"HOLD_MAX_DURATION": "99999999999h"}, ("HOLD_MAX_DURATION", "longer than 7d")),
        ({"NODE_HOLDER_REQUEST_TIMEOUT": "1d"}, ("NODE_HOLDER_REQUEST_TIMEOUT", "10m")),
    ],
)
def test_bad_env_values_exit_2_before_any_request_and_change_nothing(
    api: ApiServer, kubeconfig: Path, env: dict[str, str], words: tuple[str, ...]
) -> None:
    young(api, "new")
    old(api, "held", annotations=OURS)

    result = reconcile(kubeconfig, env=env)

    assert result.code == 2, result
    line = assert_one_clear_line(result.stderr)
    for word in words:
        assert word in line
    assert api.requests == []
    assert api.annotations("held") == OURS
    assert KEY not in api.annotations("new")


def test_a_space_in_a_key_given_as_flag_is_refused_with_the_same_words(
    api: ApiServer, kubeconfig: Path
) -> None:
    young(api, "new")
    flag = reconcile(kubeconfig, "--annotation", "karpenter.sh/do not disrupt")
    env = reconcile(kubeconfig, env={"HOLD_ANNOTATION": "karpenter.sh/do not disrupt"})
    assert flag.code == env.code == 2
    strip = lambda r: r.stderr.split(":", 3)[-1]  # noqa: E731 - past the option's name
    assert strip(flag) == strip(env)
    assert api.requests == []


def test_release_works_whatever_the_hold_settings_in_the_environment_say(
    api: ApiServer, kubeconfig: Path
) -> None:
    young(api, "new", annotations=OURS)
    env = {"HOLD_DURATION": "forever", "HOLD_MAX_DURATION": "x", "HOLD_SCOPE": "galaxy"}

    result = run_cli("release", "--kubeconfig", str(kubeconfig), env=env)

    assert result.code == 0, result
    assert api.annotations("new") == {}


@pytest.mark.parametrize(
    "flag",
    [
        ("--node-selector", "a=b"),
        ("--hold-duration", "20m"),
        ("--hold-scope", "group"),
        ("--max-hold", "1h"),
        ("--trigger-selector", "a"),
    ],
)
def test_release_refuses_flags_it_would_ignore(
    api: ApiServer, kubeconfig: Path, flag: tuple[str, str]
) -> None:
    old(api, "held", annotations=OURS)

    result = run_cli("release", "--kubeconfig", str(kubeconfig), *flag)

    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    assert flag[0] in line
    assert api.requests == []
    assert api.annotations("held") == OURS


def test_status_does_not_take_write_settings(api: ApiServer, kubeconfig: Path) -> None:
    result = run_cli("status", "--kubeconfig", str(kubeconfig), "--workers", "3")
    assert result.code == 2
    assert "--workers" in assert_one_clear_line(result.stderr)
    assert api.requests == []


def test_status_is_not_blocked_by_write_settings_in_the_environment(
    api: ApiServer, kubeconfig: Path
) -> None:
    young(api, "new")
    env = {"NODE_HOLDER_WORKERS": "lots", "NODE_HOLDER_DRY_RUN": "maybe"}
    result = run_cli("status", "--kubeconfig", str(kubeconfig), env=env)
    assert result.code == 0, result


@pytest.mark.parametrize("key", ["do-not-disrupt", "example.com/hold"])
def test_keys_nobody_reads_get_a_warning_but_are_set(
    api: ApiServer, kubeconfig: Path, key: str
) -> None:
    young(api, "new")

    result = reconcile(kubeconfig, "--annotation", key)

    assert result.code == 0, result
    assert "not read by Karpenter or cluster-autoscaler" in result.stderr
    assert result.stderr.count(f"'{key}'") == 1  # said once
    assert api.annotations("new")[key] == "true"


def test_known_keys_get_no_warning(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "new")
    result = reconcile(kubeconfig, "--annotation", "karpenter.sh/do-not-disrupt")
    assert result.code == 0
    assert "not read by" not in result.stderr


@pytest.mark.parametrize(
    ("command", "args", "env", "named"),
    [
        ("reconcile", (), {"NODE_HOLDER_TIMEOUT": "45"}, "--timeout (NODE_HOLDER_TIMEOUT): '45'"),
        ("status", ("--request-timeout", "10"), {}, "--request-timeout (NODE_HOLDER_REQUEST"),
        ("reconcile", (), {"HOLD_MAX_DURATION": "60"}, "--max-hold (HOLD_MAX_DURATION): '60'"),
        ("release", ("--timeout", "1"), {}, "--timeout (NODE_HOLDER_TIMEOUT): '1'"),
        ("simulate", ("-", "--interval", "1"), {}, "--interval: '1'"),
        ("simulate", ("-", "--last", "24"), {}, "--last: '24'"),
    ],
)
def test_a_duration_without_a_unit_is_refused_but_for_the_hold_duration(
    api: ApiServer, kubeconfig: Path, command: str, args: tuple[str, ...], env, named: str
) -> None:
    """`HOLD_DURATION=20` is the original chart's 20 minutes; `NODE_HOLDER_TIMEOUT=45` was
    45 minutes too, which nobody means: every other duration needs its unit."""
    young(api, "new")
    access = () if command == "simulate" else ("--kubeconfig", str(kubeconfig))

    result = run_cli(command, *access, *args, env=env)

    assert result.code == 2, result
    line = assert_one_clear_line(result.stderr)
    assert named in line and "has no unit" in line and "bare number" not in line, line
    assert api.requests == []
    held = reconcile(kubeconfig, "--output", "json", env={"HOLD_DURATION": "20"})
    assert held.code == 0 and held.json["holdDuration"] == "20m", held


def test_an_unknown_hold_variable_gets_a_warning_naming_it(
    api: ApiServer, kubeconfig: Path
) -> None:
    young(api, "new")

    result = reconcile(kubeconfig, env={"HOLD_DURATON": "45m"})

    assert result.code == 0, result
    assert "HOLD_DURATON is not a node-holder setting" in result.stderr
    assert "closest is HOLD_DURATION" in result.stderr
    assert api.annotations("new") == OURS


@pytest.mark.parametrize("name", ["NODE_HOLDER_CLOCK", "NODE_HOLDER_SPEED"])
def test_the_removed_clock_setting_is_refused_as_any_unknown_variable(
    api: ApiServer, kubeconfig: Path, name: str
) -> None:
    """NODE_HOLDER_CLOCK (--clock, gone) is no setting: exit 2 before any request, in the same
    words as a variable that never was one."""
    young(api, "new")

    result = reconcile(kubeconfig, "--dry-run", env={name: "local"})

    assert result.code == 2, result
    line = assert_one_clear_line(result.stderr)
    assert line.startswith(f"node-holder: error: {name} is not a node-holder setting"), line
    assert line.endswith("fix its name or unset it"), line
    assert api.requests == []


def test_every_setting_s_variable_is_an_environment_variable_name() -> None:
    """What the import-time assert in options.py checked: a name a shell and a ConfigMap take."""
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", env) for env in BY_ENV)


VALID = {
    "HOLD_DURATION": "20",
    "HOLD_ANNOTATION": KEY,
    "HOLD_SCOPE": "cluster",
    "HOLD_GROUP_LABEL": "karpenter.sh/nodepool",
    "HOLD_TRIGGER_SELECTOR": "",
    "HOLD_NODE_SELECTOR": "",
    "HOLD_MAX_DURATION": "",
    "NODE_HOLDER_MECHANISM": "annotation",
    "NODE_HOLDER_TIMEOUT": "45s",
    "NODE_HOLDER_REQUEST_TIMEOUT": "10s",
    "NODE_HOLDER_PAGE_SIZE": "500",
    "NODE_HOLDER_DRY_RUN": "false",
    "NODE_HOLDER_WORKERS": "8",
    "NODE_HOLDER_QPS": "1000",
    "NODE_HOLDER_EVENTS": "true",
    "NODE_HOLDER_SUSPEND_CRONJOB": "",
    "NODE_HOLDER_SETTINGS_FROM": "",  # empty: none
    "NODE_HOLDER_OUTPUT": "text",
    "NODE_HOLDER_LOG_FORMAT": "text",
    "NODE_HOLDER_VERBOSE": "0",
    "NODE_HOLDER_STATUS_NODES": "false",
    # not settings: the test suite's, and what a Service named node-holder puts in a pod
    "NODE_HOLDER_REQUIRE_TOOLS": "1",
    "NODE_HOLDER_E2E_KUBECONFIG": "/nowhere",
    "NODE_HOLDER_SERVICE_HOST": "10.0.0.1",
    "NODE_HOLDER_PORT_8080_TCP_ADDR": "10.0.0.1",
}


@pytest.mark.parametrize("command", ["reconcile", "status", "release", "simulate"])
def test_every_command_takes_every_setting_s_variable_and_refuses_an_unknown_one(
    api: ApiServer, kubeconfig: Path, command: str, tmp_path: Path
) -> None:
    """The chart feeds one ConfigMap of settings to every command; `NODE_HOLDER_DRYRUN=true`
    ran for real before."""
    assert set(VALID) >= set(BY_ENV) - {"KUBECONFIG", "NODE_HOLDER_CONTEXT"}
    young(api, "new")
    timeline = tmp_path / "timeline.yaml"
    timeline.write_text("nodes: [{name: a, created: 2026-11-22T12:00:00Z}]\n")
    where = (str(timeline),) if command == "simulate" else ("--kubeconfig", str(kubeconfig))

    refused = run_cli(command, *where, env={**VALID, "NODE_HOLDER_DRYRUN": "true"})

    assert refused.code == 2, refused
    line = assert_one_clear_line(refused.stderr)
    assert "NODE_HOLDER_DRYRUN" in line and "closest is NODE_HOLDER_DRY_RUN" in line, line
    assert api.requests == []
    assert KEY not in api.annotations("new")

    result = run_cli(command, *where, env=VALID)

    assert result.code == 0, result
    assert "not a node-holder setting" not in result.stderr


@pytest.mark.parametrize("command", ["reconcile", "status", "release", "simulate"])
def test_help_answers_whatever_the_environment_holds(command: str) -> None:
    """An unknown variable blocks a run, never the help that would show the right name."""
    result = run_cli(command, "--help", env={"NODE_HOLDER_DRYRUN": "true", "HOLD_DURATON": "1h"})
    assert result.code == 0, result
    assert f"Usage: node-holder {command}" in result.stdout and result.stderr == ""


def test_no_command_prints_help_on_stdout_and_exits_0() -> None:
    result = run_cli()
    assert result.code == 0
    assert result.stderr == ""
    assert "Usage: node-holder" in result.stdout and "reconcile" in result.stdout


def test_the_boolean_error_names_the_accepted_words(api: ApiServer, kubeconfig: Path) -> None:
    result = reconcile(kubeconfig, env={"NODE_HOLDER_DRY_RUN": "maybe"})
    assert result.code == 2
    line = assert_one_clear_line(result.stderr)
    assert "NODE_HOLDER_DRY_RUN" in line and "use true or false" in line
    assert "''" not in line


# --- logging: every stderr line is JSON when JSON is asked for ------------------------------


def test_the_final_error_line_is_json_when_json_logs_are_asked_for(
    api: ApiServer, kubeconfig: Path
) -> None:
    result = reconcile(
        kubeconfig, env={"NODE_HOLDER_LOG_FORMAT": "json", "HOLD_DURATION": "forever"}
    )
    assert result.code == 2
    (line,) = result.stderr.splitlines()
    entry = json.loads(line)
    assert entry["level"] == "error" and "HOLD_DURATION" in entry["message"]
    assert entry["time"].endswith("Z") and "+0000" not in entry["time"]


def test_json_log_times_are_rfc3339(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "new")
    result = reconcile(kubeconfig, "--log-format", "json", "-v", "--annotation", "example.com/x")
    assert result.code == 0
    lines = result.stderr.splitlines()
    assert lines
    for line in lines:
        entry = json.loads(line)
        assert entry["time"].endswith("Z"), entry["time"]


def test_verbose_flag_and_env_var_behave_the_same(api: ApiServer, kubeconfig: Path) -> None:
    young(api, "new")
    by_flag = reconcile(kubeconfig, "--dry-run", "-vv")
    by_env = reconcile(kubeconfig, "--dry-run", env={"NODE_HOLDER_VERBOSE": "2"})
    quiet = reconcile(kubeconfig, "--dry-run")
    assert by_flag.code == by_env.code == quiet.code == 0
    assert "run finished" in by_flag.stderr and "run finished" in by_env.stderr
    assert "run finished" not in quiet.stderr
    assert KEY not in api.annotations("new") and NODES


def test_a_usage_error_is_json_too_when_the_environment_asks_for_json_logs() -> None:
    result = run_cli("reconcile", "--no-such-option", env={"NODE_HOLDER_LOG_FORMAT": "json"})
    assert result.code == 2
    (line,) = result.stderr.splitlines()
    assert json.loads(line)["message"].startswith("No such option")
