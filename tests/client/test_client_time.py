"""Every time the tool reads is aware UTC, whatever the machine's time zone.

The API server's Date header may name UTC as `-0000` (RFC 5322); read naively in the local
zone it would end holds early (west of UTC) or late (east of it). Retry-After counts only as
a finite, non-negative number of seconds, as kube-apiserver sends it; an HTTP date there is
ignored like junk.
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconcile.cluster.transport import http_date, retry_after
from tests.helpers import KEY, OURS, REPO, old, run_python, young
from tests.kubeapi.apiserver import ApiServer


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


@pytest.mark.parametrize(
    "raw", ["nan", "NaN", "inf", "-inf", "-1", "soon", "", None, "Sun, 22 Nov 2026 12:00:00 GMT"]
)
def test_a_retry_after_that_is_not_a_finite_non_negative_number_is_ignored(
    raw: str | None,
) -> None:
    assert retry_after(raw) is None  # the caller's normal backoff applies


def test_retry_after_in_seconds() -> None:
    assert retry_after("0") == 0.0
    assert retry_after("2.5") == 2.5


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
