"""Generate the chart's values.schema.json, its grammar template and docs/reference.md.

`make chart-docs` runs it. What the CLI accepts is decided by the CLI's own parsers
(`reconcile.cli.options.SETTINGS`); the chart must refuse and accept the same text with the
same words. So:

- values.schema.json keeps the types (a map is not a duration), refuses unknown keys and
  carries the durations' syntax: the CLI's own patterns (reconcile/rule/settings.py);
- templates/_grammar.tpl is the rest of the CLI's grammar as data (each setting's kind,
  bounds, choices and the fix the CLI prints; the settings no longer read), read by
  templates/_validate.tpl, which checks every value at `helm install` time and fails with
  the CLI's one-line message;
- docs/reference.md's tables: the commands, every setting (flag, environment variable,
  chart value, default, what it accepts, the commands that take it) from the settings table
  and the click commands built from it, the options a command defines outside the table,
  and the chart's values from values.yaml's helm-docs style `# --` comments. The prose
  around them is written by hand; the tables sit between markers.

    python scripts/chart_schema.py           # rewrite them
    python scripts/chart_schema.py --check   # exit 1 if one is out of date (a test runs it)
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import click
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reconcile.cli import cli, options  # noqa: E402
from reconcile.rule import settings as s  # noqa: E402

CHART = ROOT / "charts" / "karpenter-node-holder"
SCHEMA = CHART / "values.schema.json"
GRAMMAR = CHART / "templates" / "_grammar.tpl"
REFERENCE = ROOT / "docs" / "reference.md"
VALUES = CHART / "values.yaml"

#: One flat camelCase value per setting a user commonly sets (the original chart's names
#: where it had them: holdDuration, holdAnnotation).
FLAT: dict[str, str] = {
    "holdDuration": "HOLD_DURATION",
    "holdAnnotation": "HOLD_ANNOTATION",
    "holdScope": "HOLD_SCOPE",
    "holdGroupLabel": "HOLD_GROUP_LABEL",
    "holdTriggerSelector": "HOLD_TRIGGER_SELECTOR",
    "holdNodeSelector": "HOLD_NODE_SELECTOR",
    "holdMaxDuration": "HOLD_MAX_DURATION",
    "mechanism": "NODE_HOLDER_MECHANISM",
    "dryRun": "NODE_HOLDER_DRY_RUN",
    "events": "NODE_HOLDER_EVENTS",
    "timeout": "NODE_HOLDER_TIMEOUT",
    "logFormat": "NODE_HOLDER_LOG_FORMAT",
    "output": "NODE_HOLDER_OUTPUT",
}
#: Settings the chart does not offer: the pod always uses its in-cluster service account, and
#: its settings are the ConfigMap (--settings-from is for one-off commands).
NOT_IN_CHART = frozenset(
    {
        "KUBECONFIG",
        "NODE_HOLDER_CONTEXT",
        "NODE_HOLDER_SUSPEND_CRONJOB",
        "NODE_HOLDER_SETTINGS_FROM",
    }
)


def by_env() -> dict[str, options.Setting]:
    return dict(options.BY_ENV)


def map_envs() -> list[str]:
    """The `settings` map's keys: every other NODE_HOLDER_* variable the CLI reads."""
    flat = set(FLAT.values())
    return sorted(
        env
        for env in by_env()
        if env.startswith("NODE_HOLDER_") and env not in flat and env not in NOT_IN_CHART
    )


# --- the grammar, as the CLI's parsers define it ------------------------------------------

#: Text every parser refuses: its Invalid carries the setting's fix.
_JUNK = "x y"


def _refusal(setting: options.Setting, text: str) -> s.Invalid | None:
    try:
        setting.kind.parse(text)
    except s.Invalid as exc:
        return exc
    return None


#: The settings' kinds the chart's grammar knows, and the facts it takes from each.
_KINDS = {
    "duration": (),
    "keys": (),
    "selector": (),
    "label": (),
    "choice": ("choices",),
    "integer": ("low", "high"),
    "number": ("low", "high"),
    "boolean": (),
}


def rule(setting: options.Setting) -> dict[str, Any]:
    """One setting's grammar for templates/_validate.tpl: kind, bounds, choices, its fix."""
    kind = setting.kind
    if kind.name not in _KINDS:
        raise SystemExit(f"{setting.env}: no chart grammar for kind {kind.name!r}")
    junk = _refusal(setting, _JUNK)
    if junk is None:
        raise SystemExit(f"{setting.env}: {_JUNK!r} is accepted; pick other junk text")
    out: dict[str, Any] = {"env": setting.env, "fix": junk.fix, "kind": kind.name}
    out |= {
        fact: list(value) if isinstance(value, tuple) else value
        for fact in _KINDS[kind.name]
        for value in [kind.facts[fact]]
    }
    if kind.name == "duration":
        low, high = kind.facts["bounds"].low, kind.facts["bounds"].high
        out |= {
            "pattern": duration_pattern(setting),  # only for a YAML number: the schema did text
            "low": low.total_seconds(),
            "high": high.total_seconds(),
            "lowText": s.format_duration(low),
            "highText": s.format_duration(high),
        }
    return out


def duration_pattern(setting: options.Setting) -> str:
    """The CLI's own duration grammar (reconcile/rule/settings.py), as a schema pattern."""
    facts = setting.kind.facts
    pattern = s.BARE_MINUTES_PATTERN if facts["bare_minutes"] else s.DURATION_PATTERN
    return f"{s.UNSET_PATTERN}|{pattern}" if facts["optional"] else pattern


def grammar() -> dict[str, dict[str, Any]]:
    envs = by_env()
    return {
        "values": {name: rule(envs[env]) for name, env in FLAT.items()},
        "settings": {env: rule(envs[env]) for env in map_envs()},
    }


def grammar_template() -> str:
    body = ",\n".join(
        f" {json.dumps(part)}: {{\n"
        + ",\n".join(
            f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)}" for k, v in rules.items()
        )
        + "\n }"
        for part, rules in grammar().items()
    )
    body = "{\n" + body + "\n}"
    return (
        "{{- /* Generated by scripts/chart_schema.py from the CLI's settings "
        "(reconcile/cli/options.py): `make chart-docs`. Do not edit. */ -}}\n"
        '{{- define "node-holder.grammar" -}}\n'
        f"{body}\n"
        "{{- end }}\n"
    )


# --- the schema: types, keys and the durations' syntax --------------------------------------

#: The YAML types a setting's value may have; its text is then judged by _validate.tpl.
_TYPES: dict[str, list[str]] = {
    "integer": ["number", "string"],  # 16.0 and "16" are 16; 16.5 gets the CLI's words
    "number": ["number", "string"],
    "boolean": ["boolean", "string"],  # "yes", "on": as NODE_HOLDER_DRY_RUN=yes
}


def setting_schema(setting: options.Setting) -> dict[str, Any]:
    """A duration's syntax is the CLI's pattern; its bounds and the other kinds' text are
    judged by _validate.tpl, with the CLI's words."""
    first_line = setting.help.split(". ")[0].rstrip(".")
    out: dict[str, Any] = {"description": f"{first_line} ({setting.env})."}
    kind = setting.kind
    if kind.name != "duration":
        return out | {"type": _TYPES.get(kind.name, "string")}
    # `holdDuration: 20` (minutes), as the original chart; every other duration needs a unit.
    pattern = {"pattern": duration_pattern(setting)}
    if kind.facts["bare_minutes"]:
        return out | {"type": ["string", "number"], "minimum": 0} | pattern  # 0: the CLI words it
    return out | {"type": "string"} | pattern


def _map(values: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"type": ["object", "null"], "additionalProperties": values or {"type": "string"}}


def _object(properties: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": False, "properties": properties, **extra}


INT = {"type": "integer"}
BOOL = {"type": "boolean"}
STR = {"type": "string"}


def kubernetes_properties() -> dict[str, Any]:
    """The chart's own values: defaults equal to the kustomize base (cronjob/base)."""
    return {
        "global": {"type": "object", "description": "Set by a parent chart; unused."},
        "initialDelay": {
            "description": "The original chart's start-up delay: accepted and ignored "
            "(NOTES.txt warns).",
            "type": ["string", "number", "null"],
        },
        "settings": {
            "description": "The other NODE_HOLDER_* settings, by environment variable.",
            **_object({env: setting_schema(by_env()[env]) for env in map_envs()}),
        },
        "image": {
            "description": "A map; the original chart's `repo:tag` string is refused by the "
            "templates with a message saying how to convert it.",
            "anyOf": [
                _object(
                    {
                        "repository": {"type": "string", "minLength": 1},
                        "tag": {"type": "string", "pattern": r"^$|^[\w][\w.-]{0,127}$"},
                        "digest": {"type": "string", "pattern": "^$|^sha256:[0-9a-f]{64}$"},
                        "pullPolicy": {"enum": ["Always", "IfNotPresent", "Never"]},
                    },
                    required=["repository"],
                ),
                {"type": "string"},
            ],
        },
        "imagePullSecrets": {
            "type": "array",
            "items": _object({"name": {"type": "string", "minLength": 1}}, required=["name"]),
        },
        "nameOverride": STR,
        "fullnameOverride": STR,
        "serviceAccount": _object({"create": BOOL, "name": STR, "annotations": _map()}),
        "rbac": _object({"create": BOOL}),
        "admissionPolicy": _object({"enabled": BOOL}),
        # The cross-field rules (timeout < activeDeadlineSeconds < the schedule's interval,
        # the hook's deadline) are checked by templates/_validate.tpl with readable words.
        "uninstall": _object({"releaseHolds": BOOL, "activeDeadlineSeconds": INT}),
        "schedule": {"type": "string", "minLength": 1},
        "timeZone": {"type": "string", "minLength": 1},
        "suspend": BOOL,
        # Below 10 s the CronJob controller may never start a run.
        "startingDeadlineSeconds": {"type": "integer", "minimum": 10},
        "successfulJobsHistoryLimit": {"type": "integer", "minimum": 0},
        "failedJobsHistoryLimit": {"type": "integer", "minimum": 0},
        "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
        "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
        "podAnnotations": _map(),
        "podLabels": _map(),
        "podSecurityContext": {"type": ["object", "null"]},
        "securityContext": {"type": ["object", "null"]},
        "resources": {"type": ["object", "null"]},
        "affinity": {"type": ["object", "null"]},
        "tolerations": {"type": ["array", "null"], "items": {"type": "object"}},
        "nodeSelector": _map(),
        "priorityClassName": STR,
        # The durations' grammar (Prometheus', whole h, m, s) is checked by
        # templates/prometheusrule.yaml, with a readable message.
        "prometheusRule": _object(
            {
                "enabled": BOOL,
                "labels": _map(),
                "failedRuns": {"type": "integer", "minimum": 1},
                "noSuccessFor": STR,
                "capMargin": STR,
                "severity": _object(
                    dict.fromkeys(("runsFailing", "noSuccessfulRun", "heldBeyondCap"), STR)
                ),
            }
        ),
    }


def schema() -> dict[str, Any]:
    envs = by_env()
    properties = {name: setting_schema(envs[env]) for name, env in FLAT.items()}
    properties |= kubernetes_properties()
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "karpenter-node-holder values",
        "description": "Generated by scripts/chart_schema.py (`make chart-docs`); do not edit. "
        "Types, keys and the durations' syntax (the CLI's own pattern); templates/_validate.tpl "
        "judges the bounds, the other settings' text and the rules across values with the CLI's "
        "words.",
        **_object(properties),
    }


# --- the values table -----------------------------------------------------------------


def documented_values(text: str) -> list[tuple[str, str | None, str]]:
    """(dotted key, type or None, description) for each key after a `# --` comment."""
    found: list[tuple[str, str | None, str]] = []
    path: list[tuple[int, str]] = []
    comment: list[str] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if stripped.startswith("# --"):
            comment = [stripped[4:].strip()]
            continue
        if stripped.startswith("#"):
            if comment is not None:
                comment.append(stripped[1:].strip())
            continue
        match = re.match(r"^(\s*)([A-Za-z_][\w-]*):", line)
        if not match:
            continue
        while path and path[-1][0] >= indent:
            path.pop()
        path.append((indent, match.group(2)))
        if comment is not None:
            text_ = " ".join(comment)
            kind = None
            typed = re.match(r"^\(([^)]*)\)\s*(.*)$", text_)
            if typed:
                kind, text_ = typed.group(1), typed.group(2)
            found.append((".".join(p for _, p in path), kind, text_))
            comment = None
    return found


def _lookup(values: dict[str, Any], dotted: str) -> Any:
    node: Any = values
    for part in dotted.split("."):
        node = node[part]
    return node


def _type_name(value: Any) -> str:
    if value is None:
        return "string"
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list"}.get(
        type(value), "object"
    )


def values_table() -> str:
    text = VALUES.read_text()
    values = yaml.safe_load(text)
    rows = ["| Key | Type | Default | Description |", "| --- | --- | --- | --- |"]
    for key, kind, description in documented_values(text):
        if key in FLAT:  # a setting's own value: its row of the settings table says it all
            continue
        value = _lookup(values, key)
        default = json.dumps(value, separators=(",", ":"))
        if isinstance(value, dict | list) and len(default) > 40:
            default = "see values.yaml"
        cells = [f"`{key}`", kind or _type_name(value), f"`{default}`", description]
        rows.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
    return "\n".join(rows)


# --- the reference: commands and settings, from the click commands the table builds --------


def _commands() -> dict[str, click.Command]:
    return dict(
        sorted(cli.commands.items(), key=lambda item: list(options.COMMANDS).index(item[0]))
    )


def _in_table(param: click.Parameter) -> bool:
    """An option made from the settings table (every option is: a test says so)."""
    setting = options.BY_NAME.get(str(param.name))
    return setting is not None and getattr(param, "envvar", None) == setting.env


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


#: What a setting of each kind takes, in words; durations, choices and numbers say their bounds.
_ACCEPTS = {
    "keys": "annotation keys, comma-separated (spaces around a key are trimmed, one inside is "
    "an error) or the flag repeated",
    "selector": "a label selector; empty: every node",
    "label": "a label key",
    "boolean": "`true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`",
    "cronjob": "`NAMESPACE/NAME`; empty: none",
    "configmap": "`NAMESPACE/NAME`; empty: none",
    "text": "text, not empty",
    "columns": "configurations in `--compare`'s syntax, read by simulate",
    "header": "`Name: value`, the flag repeated for more",
}


def accepts(setting: options.Setting) -> str:
    """What a setting's parser takes, from its kind (the bounds the CLI enforces)."""
    kind, facts = setting.kind, setting.kind.facts
    if setting.extra.get("count"):
        return f"`{facts['low']}` to `{facts['high']}` (the flag counts: `-vv`)"
    if kind.name == "duration":
        low, high = s.format_duration(facts["bounds"].low), s.format_duration(facts["bounds"].high)
        text = f"a duration, from {low} to {high}"
        if facts["bare_minutes"]:
            text += ", or a bare number of minutes"
        return text + ("; empty: none" if facts["optional"] else "")
    if kind.name == "choice":
        return " or ".join(f"`{choice}`" for choice in facts["choices"])
    if kind.name == "integer":
        return f"an integer, {facts['low']:,} to {facts['high']:,}"
    if kind.name == "number":
        return f"a number, {facts['low']:,g} to {facts['high']:,g}"
    return _ACCEPTS[kind.name]


def _default(setting: options.Setting) -> str:
    value = setting.extra.get("default", setting.default)
    if value is True or value is False:
        return "on" if value else "off"
    if value is None:
        return "none"
    return f"`{value}`" if str(value) else "empty"


def chart_value(setting: options.Setting, values: dict[str, Any]) -> str:
    flat = {env: name for name, env in FLAT.items()}
    if setting.env in flat:
        name = flat[setting.env]
        return f"`{name}` (`{json.dumps(values[name])}`)"
    if setting.env in map_envs():
        return f"`settings.{setting.env}` (unset)"
    return "not in the chart"


def commands_table() -> str:
    rows = ["| command | arguments | what it does |", "| --- | --- | --- |"]
    for name, command in _commands().items():
        arguments = " ".join(
            f"`{p.metavar or str(p.name).upper()}`"
            for p in command.params
            if isinstance(p, click.Argument)
        )
        summary = (command.help or "").split("\n\n")[0]
        rows.append(f"| `node-holder {name}` | {arguments} | {_cell(summary)} |")
    return "\n".join(rows)


def settings_table() -> str:
    """One row per setting of the table, with every command whose click command takes it."""
    values = yaml.safe_load(VALUES.read_text())
    taking: dict[str, list[str]] = {}
    for name, command in _commands().items():
        for param in command.params:
            if _in_table(param):
                taking.setdefault(str(param.name), []).append(name)
    rows = [
        "| option | environment variable | chart value (its default) | default | accepts "
        "| commands | meaning |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for setting in options.SETTINGS:
        flags = [setting.extra["short"]] if "short" in setting.extra else []
        flags.append(setting.flag)
        cells = [
            ", ".join(f"`{f}`" for f in flags),
            f"`{setting.env}`" if setting.env else "none (a flag only)",
            chart_value(setting, values),
            _default(setting),
            accepts(setting),
            ", ".join(taking.get(setting.name, [])) or "none",
            setting.help,
        ]
        rows.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows)


#: docs/reference.md's generated blocks, each between its two markers.
BLOCKS = {
    "commands table": commands_table,
    "settings table": settings_table,
    "values table": values_table,
}


def markers(block: str) -> tuple[str, str]:
    return (
        f"<!-- {block}: generated by scripts/chart_schema.py (make chart-docs), do not edit -->",
        f"<!-- end of {block} -->",
    )


def reference() -> str:
    text = REFERENCE.read_text()
    for block, make in BLOCKS.items():
        start, end = markers(block)
        before, sep, rest = text.partition(start)
        _, sep2, after = rest.partition(end)
        if not sep or not sep2:
            raise SystemExit(f"{REFERENCE}: markers {start!r} ... {end!r} are missing")
        text = f"{before}{start}\n{make()}\n{end}{after}"
    return text


def rendered() -> dict[Path, str]:
    return {
        SCHEMA: json.dumps(schema(), indent=2) + "\n",
        GRAMMAR: grammar_template(),
        REFERENCE: reference(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail if a file is out of date")
    args = parser.parse_args(argv)
    stale = []
    for path, text in rendered().items():
        if path.exists() and path.read_text() == text:
            continue
        if args.check:
            stale.append(path.relative_to(ROOT))
        else:
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        names = ", ".join(map(str, stale))
        print(f"out of date: {names}; run make chart-docs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
