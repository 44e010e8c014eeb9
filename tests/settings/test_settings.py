"""Parsing of durations, keys and selectors: every bad value is one readable line."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from reconcile.cli.options import BY_NAME
from reconcile.rule.decide import own_settings
from reconcile.rule.nodes import NodePoolSettings, node_view, nodepool_settings
from reconcile.rule.settings import (
    DEFAULT_GROUP_LABEL,
    HISTORY_RANGE,
    HOLD_RANGE,
    INTERVAL_RANGE,
    NODE_HOLD,
    NODE_MAX_HOLD,
    REQUEST_TIMEOUT_RANGE,
    TIMEOUT_RANGE,
    ConfigError,
    DurationRange,
    HoldSettings,
    Invalid,
    format_duration,
    format_time,
    parse_duration,
)


def convert(name: str, text: str):
    """Text through the setting's own click parameter, as for its flag and its env var."""

    @click.command()
    @BY_NAME[name].option()
    def command(**_: object) -> None: ...

    (param,) = command.params
    return param.kind.convert(text, param, None)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("90s", timedelta(seconds=90)),
        ("20m", timedelta(minutes=20)),
        ("1h30m", timedelta(minutes=90)),
        ("2d", timedelta(days=2)),
        ("1.5h", timedelta(minutes=90)),  # fractions stay: 1.5h is 90m, nothing else
        ("1H30M", timedelta(minutes=90)),
        ("+20m", timedelta(minutes=20)),
        ("1d1d", timedelta(days=2)),
        ("20", timedelta(minutes=20)),  # the original chart's holdDuration: 20
        ("0.5", timedelta(seconds=30)),
        (" 45m ", timedelta(minutes=45)),
    ],
)
def test_durations_people_write_are_understood(text: str, expected: timedelta) -> None:
    assert parse_duration(text, bare_minutes=True) == expected  # the hold duration's grammar


@pytest.mark.parametrize(
    "text",
    ["", "0", "0m", "-5m", "PT0S", "P", "PT", "5x", "m", "1h-5m", "abc", "nan", "+-5m", "1e3m"],
)
def test_bad_durations_name_the_option_and_show_examples(text: str) -> None:
    with pytest.raises(ConfigError) as info:
        convert("hold_duration", text)
    message = str(info.value)
    assert message.startswith("--hold-duration (HOLD_DURATION): ")
    assert "20m" in message and "1h30m" in message and "from 1s to 7d" in message
    assert "PT20M" not in message and "\n" not in message


@pytest.mark.parametrize("text", ["PT20M", "pt1h30m", "P1DT2H", "P1W", "1w", "1w2d", "2W"])
def test_iso_8601_and_weeks_get_the_grammar_s_one_line_error(text: str) -> None:
    """One grammar (no `PT20M`, no `w`) for flags, variables, the chart and NodePool
    annotations: an old form is "not a duration", as any other text the grammar refuses."""
    for name, option in (("hold_duration", "HOLD_DURATION"), ("max_hold", "HOLD_MAX_DURATION")):
        with pytest.raises(ConfigError) as info:
            convert(name, text)
        assert str(info.value).startswith(
            f"--{name.replace('_', '-')} ({option}): {text!r} is not a duration; "
            "use a duration from 1s to 7d, such as 90s, 20m, 1h30m, 2d"
        )


@given(st.integers(min_value=1, max_value=3599) | st.integers(1, 1439).map(lambda m: m * 60))
def test_format_then_parse_round_trips(seconds: int) -> None:
    """Exact while the value needs at most two units (format keeps the two largest)."""
    delta = timedelta(seconds=seconds)
    assert parse_duration(format_duration(delta)) == delta


def test_format_duration_reads_well() -> None:
    assert format_duration(timedelta(minutes=90)) == "1h30m"
    assert format_duration(timedelta(seconds=45)) == "45s"
    assert format_duration(timedelta(0)) == "0s"
    assert format_duration(timedelta(minutes=-3)) == "-3m"


def test_times_are_written_one_way_rfc3339_in_utc() -> None:
    """Stamps, Events and reports to the second; log lines to the millisecond."""
    moment = datetime(2026, 11, 22, 21, 41, 22, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert format_time(moment) == "2026-11-22T20:41:22Z"
    assert format_time(moment, fraction=True) == "2026-11-22T20:41:22.123Z"
    assert format_time(moment.replace(microsecond=0), fraction=True) == "2026-11-22T20:41:22.000Z"


def test_annotation_keys_split_commas_keep_order_and_drop_repeats() -> None:
    keys = convert(
        "annotation",
        "karpenter.sh/do-not-disrupt, cluster-autoscaler.kubernetes.io/scale-down-disabled,"
        "karpenter.sh/do-not-disrupt",
    )
    assert keys == (
        "karpenter.sh/do-not-disrupt",
        "cluster-autoscaler.kubernetes.io/scale-down-disabled",
    )


@pytest.mark.parametrize(
    "key",
    [
        "bad key",
        "Karpenter.SH/x",
        "/x",
        "x/",
        "-x",
        "a/b/c",
        "x" * 64,
        "node-holder.dev/owned-annotations",
        ",",
    ],
)
def test_bad_annotation_keys_are_refused(key: str) -> None:
    with pytest.raises(ConfigError) as info:
        convert("annotation", key)
    assert str(info.value).startswith("--annotation (HOLD_ANNOTATION): ")


def test_bad_selector_names_the_option() -> None:
    with pytest.raises(ConfigError) as info:
        convert("node_selector", "a in (")
    assert str(info.value).startswith(
        "--node-selector (HOLD_NODE_SELECTOR): 'a in (' is not a label selector"
    )


@pytest.mark.parametrize(
    "bounds",
    [HOLD_RANGE, TIMEOUT_RANGE, REQUEST_TIMEOUT_RANGE, INTERVAL_RANGE, HISTORY_RANGE],
    ids=["hold", "timeout", "request-timeout", "interval", "last"],
)
def test_the_bounds_an_error_names_are_accepted(bounds: DurationRange) -> None:
    """A fix that says "from 100ms to 10m" must accept `100ms` and `10m` as written."""
    with pytest.raises(Invalid) as refused:
        parse_duration("0s", bounds)
    for text in (format_duration(bounds.low), format_duration(bounds.high)):
        assert text in refused.value.fix
        assert parse_duration(text, bounds) in (bounds.low, bounds.high)


def test_milliseconds_are_not_minutes() -> None:
    assert parse_duration("100ms", REQUEST_TIMEOUT_RANGE) == timedelta(milliseconds=100)
    assert parse_duration("1m30s") == timedelta(seconds=90)
    with pytest.raises(Invalid, match="shorter than 100ms"):
        parse_duration("99ms", REQUEST_TIMEOUT_RANGE)


def test_a_nodepool_annotation_in_an_old_form_is_bad_input_as_any_other_text() -> None:
    """node-holder.dev/hold-duration and max-hold take the same grammar: `PT45M` and `1w` are
    not durations; the NodePool's nodes use the configured settings and the report says why."""
    hold = HoldSettings(hold_duration=timedelta(minutes=20), max_hold=timedelta(hours=2))
    created = {"name": "n", "creationTimestamp": "2026-11-22T12:00:00Z"}
    node = created | {"labels": {DEFAULT_GROUP_LABEL: "batch"}}

    def nodepool(**own: str) -> NodePoolSettings:
        return nodepool_settings([{"metadata": {"name": "batch", "annotations": own}}])

    old = nodepool(**{NODE_HOLD: "PT45M", NODE_MAX_HOLD: "1w"})
    own = own_settings(node_view(node, frozenset(), frozenset(), old).own, hold)
    assert (own.duration, own.cap, own.sources) == (
        hold.hold_duration,
        hold.max_hold,
        (None, None),
    )
    assert own.bad == (
        (
            "nodepool/batch",
            f"{NODE_HOLD}='PT45M' is not a duration",
        ),
        (
            "nodepool/batch",
            f"{NODE_MAX_HOLD}='1w' is not a duration",
        ),
    )
    fixed = nodepool(**{NODE_HOLD: "45m", NODE_MAX_HOLD: "7d"})
    own = own_settings(node_view(node, frozenset(), frozenset(), fixed).own, hold)
    assert (own.duration, own.cap) == (timedelta(minutes=45), timedelta(days=7))
