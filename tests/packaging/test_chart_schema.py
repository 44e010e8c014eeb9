"""values.schema.json: generated from the CLI's grammar, current, and never wider than the CLI.

The property test feeds values (strings drawn from the schema's own patterns, random text,
numbers, booleans, null) to the published schema (python `jsonschema`, draft-07) and, for
every value the schema accepts, turns it into the environment variable text exactly as the
chart's template does and hands it to the CLI's own parser (`setting.type.convert`): the
parser must accept it. So a value `helm install` lets through never makes the CronJob's runs
exit 2 a minute later.
"""

from __future__ import annotations

import importlib.util
import json
import math
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "karpenter-node-holder"
SCHEMA = json.loads((CHART / "values.schema.json").read_text())
VALIDATOR = jsonschema.Draft7Validator(SCHEMA)

options = pytest.importorskip("reconcile.options", reason="the settings grammar (options.py)")


def _load_generator() -> Any:
    spec = importlib.util.spec_from_file_location("chart_schema", ROOT / "scripts/chart_schema.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


GEN = _load_generator()
BY_ENV = {s.env: s for s in options.SETTINGS}
# (where the value sits in values.yaml, the setting)
PLACES = [((name,), BY_ENV[env]) for name, env in GEN.FLAT.items()] + [
    (("settings", env), BY_ENV[env]) for env in GEN.map_envs()
]


def helm_text(value: Any) -> str:
    """What templates/_helpers.tpl `node-holder.text` makes of a value (checked against helm
    in test_chart.py::test_settings_map_sets_the_other_knobs and the bare-minutes test)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value == math.floor(value):
        return str(int(value))  # sprig's int64: 20.0 -> 20, -0.0 -> 0
    return str(value)


def values_at(place: tuple[str, ...], value: Any) -> dict[str, Any]:
    return {place[0]: value} if len(place) == 1 else {place[0]: {place[1]: value}}


def _python_pattern(schema: dict[str, Any]) -> list[str]:
    found = []
    if "pattern" in schema:
        found.append(schema["pattern"])
    for sub in schema.get("anyOf", []) + schema.get("allOf", []):
        found += _python_pattern(sub)
    return found


def candidates(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values around what the schema allows: its patterns' strings, and everything else."""
    strategies: list[st.SearchStrategy[Any]] = [
        st.text(max_size=30),
        st.text(alphabet="0123456789smhdPTHM.,-/=!() abc", max_size=12),
        st.integers(min_value=-5, max_value=200_000),
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e6, max_value=1e6),
        st.booleans(),
        st.none(),
    ]
    strategies += [st.from_regex(p) for p in _python_pattern(schema)]
    if "enum" in schema:
        strategies.append(st.sampled_from(schema["enum"]))
    return st.one_of(*strategies)


@pytest.mark.parametrize(("place", "setting"), PLACES, ids=[".".join(p) for p, _ in PLACES])
def test_schema_accepts_nothing_the_cli_refuses(place, setting):
    prop = SCHEMA["properties"][place[0]]
    if len(place) == 2:
        prop = prop["properties"][place[1]]

    @settings(
        max_examples=150,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    )
    @given(candidates(prop))
    def check(value: Any) -> None:
        if not VALIDATOR.is_valid(values_at(place, value)):
            return
        text = helm_text(value)
        try:
            setting.type.convert(text, None, None)
        except Exception as exc:  # ConfigError, or anything else: a bug either way
            raise AssertionError(
                f"{'.'.join(place)}: the schema accepts {value!r} ({setting.env}={text!r}), "
                f"the CLI refuses it: {exc}"
            ) from None

    check()


def test_schema_accepts_the_defaults_and_every_ci_values_file():
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    VALIDATOR.validate(defaults)
    for path in sorted((CHART / "ci").glob("*-values.yaml")):
        VALIDATOR.validate({**defaults, **(yaml.safe_load(path.read_text()) or {})})
    VALIDATOR.validate({**defaults, "holdDuration": 20})  # the original chart's bare minutes


@pytest.mark.parametrize(
    "values",
    [
        {"bogus": 1},
        {"image": {"repository": "x", "bogus": 1}},
        {"serviceAccount": {"bogus": True}},
        {"settings": {"NODE_HOLDER_NOPE": "1"}},
        {"settings": {"HOLD_DURATION": "20m"}},  # would duplicate the env name
        {"holdDuration": "20 mins"},
        {"holdDuration": 0},
        {"holdScope": "everything"},
        {"holdAnnotation": "node-holder.dev/owned-annotations"},
        {"holdAnnotation": "a,,b"},
        {"holdGroupLabel": "-bad"},
        {"holdTriggerSelector": "a=b c"},
        {"timeout": "0s"},
        {"settings": {"NODE_HOLDER_QPS": 0.00001}},  # Helm would print 1e-05
        {"dryRun": "yes"},
        {"logFormat": "xml"},
    ],
    ids=repr,
)
def test_schema_refuses_unknown_keys_and_bad_values(values):
    assert not VALIDATOR.is_valid(values)


def test_schema_and_values_table_are_current():
    assert GEN.main(["--check"]) == 0, "run: python scripts/chart_schema.py"


def test_every_cli_setting_has_a_place_in_the_chart():
    placed = set(GEN.FLAT.values()) | set(GEN.map_envs()) | GEN.NOT_IN_CHART
    assert set(BY_ENV) - placed == set(), "map the new setting in scripts/chart_schema.py"


def test_every_value_is_in_the_schema_and_documented():
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    assert set(values) <= set(SCHEMA["properties"])
    documented = {key for key, _, _ in GEN.documented_values(text)}
    for key, value in values.items():
        if isinstance(value, dict) and value and all(f"{key}.{k}" in documented for k in value):
            continue
        assert key in documented, f"values.yaml: document {key} with a `# --` comment"


def test_patterns_are_re2():
    """Helm validates with Go's regexp: no lookaround, no backreferences."""
    patterns = re.findall(r'"pattern": "((?:[^"\\]|\\.)*)"', json.dumps(SCHEMA))
    assert patterns
    for pattern in patterns:
        assert not re.search(r"\(\?[=!<]|\\[1-9]", pattern), pattern
