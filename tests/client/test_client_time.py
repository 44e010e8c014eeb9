"""Every time the tool reads is aware UTC, whatever the machine's time zone.

The API server's Date header may name UTC as `-0000` (RFC 5322); read naively in the local
zone it would end holds early (west of UTC) or late (east of it). Retry-After counts only as
a finite, non-negative number of seconds or an HTTP date.
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path

import pytest

from reconcile.cluster.transport import http_date, retry_after
from tests.clusters import run_cli
from tests.helpers import KEY, NODES, OURS, REPO, old, run_python, young
from tests.kubeapi.apiserver import ApiServer, Fault


def reconcile_in_zone(kubeconfig: Path, tz: str) -> subprocess.CompletedProcess[str]:
    """The real CLI in its own process, with the machine's time zone set to `tz`."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "TZ": tz}
    env.pop("KUBECONFIG", None)
    args = ("-m", "reconcile", "reconcile", "--kubeconfig", str(kubeconfig))
    return run_python(*args, env=env, timeout=60)


@pytest.mark.parametrize("tz", ["America/New_York", "Asia/Tokyo", "UTC"])
def test_holds_start_and_end_by_the_server_clock_in_any_local_time_zone(
    api: ApiServer, kubeconfig: Path, tz: str
) -> None:
    api.set_clock(datetime(2026, 11, 22, 12, 0, tzinfo=UTC))
    api.date_zone = "-0000"  # UTC, as RFC 5322 allows it to be written
    old(api, "n1", "n2")
    young(api, "n3")  # two minutes old: the cluster is held until 12:18

    started = reconcile_in_zone(kubeconfig, tz)
    assert started.returncode == 0, started.stderr
    assert all(api.annotations(n) == OURS for n in ("n1", "n2", "n3"))

    api.advance_clock(timedelta(minutes=17))  # 12:17: still held
    assert reconcile_in_zone(kubeconfig, tz).returncode == 0
    assert all(api.annotations(n) == OURS for n in ("n1", "n2", "n3"))

    api.advance_clock(timedelta(minutes=2))  # 12:19: the hold is over
    ended = reconcile_in_zone(kubeconfig, tz)
    assert ended.returncode == 0, ended.stderr
    assert all(KEY not in api.annotations(n) for n in ("n1", "n2", "n3"))


def test_a_retry_after_date_in_zone_minus_zero_is_waited_for(
    api: ApiServer, kubeconfig: Path
) -> None:
    old(api, "n1")
    young(api, "n2")
    soon = format_datetime((api.now() + timedelta(seconds=3)).replace(tzinfo=None))  # -0000
    assert soon.endswith("-0000")
    api.inject(Fault(method="GET", path=f"^{NODES}$", status=429, headers={"Retry-After": soon}))

    result = run_cli("reconcile", "--kubeconfig", str(kubeconfig))

    assert result.code == 0, result.stderr
    assert api.annotations("n1") == OURS
    first, second = (r for r in api.requests if r.path == NODES)
    assert first.status == 429 and second.status == 200
    assert second.started - first.started > 1.0  # waited for: the date is 2-3 s ahead


@pytest.mark.parametrize("raw", ["nan", "NaN", "inf", "-inf", "-1", "soon", ""])
def test_a_retry_after_that_is_not_a_finite_non_negative_number_is_ignored(raw: str) -> None:
    assert retry_after(raw) is None  # the caller's normal backoff applies


def test_retry_after_seconds_and_dates() -> None:
    assert retry_after("0") == 0.0
    assert retry_after("2.5") == 2.5
    later = datetime.now(UTC) + timedelta(seconds=30)
    for written in (
        format_datetime(later, usegmt=True),
        format_datetime(later.replace(tzinfo=None)),
    ):
        assert 25 < (retry_after(written) or 0) <= 30
    past = format_datetime(datetime(2000, 1, 1, tzinfo=UTC), usegmt=True)
    assert retry_after(past) == 0.0  # a date gone by: retry now


def test_http_dates_are_aware_utc_whatever_the_zone_is_written_as() -> None:
    expected = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    for raw in (
        "Sun, 22 Nov 2026 12:00:00 GMT",
        "Sun, 22 Nov 2026 12:00:00 -0000",
        "Sun, 22 Nov 2026 12:00:00 +0000",
        "Sun, 22 Nov 2026 21:00:00 +0900",
    ):
        moment = http_date(raw)
        assert moment == expected and moment.tzinfo is UTC, raw
    assert http_date("not a date") is None
    assert http_date(None) is None
