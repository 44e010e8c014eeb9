"""Retry policy, deadline, rate limiter and its back-off, on a fake clock: no sleeps, no timing."""

from __future__ import annotations

import random
import threading

import pytest

from reconcile.cluster.errors import ApiError, TransportError, error_for_status
from reconcile.cluster.pace import (
    MIN_QPS,
    RECOVERY,
    Backoff,
    Deadline,
    DeadlineExceeded,
    Deferred,
    Interrupted,
    Pace,
    RateLimiter,
)


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class FakeStop(threading.Event):
    """An Event whose wait() advances the fake clock instead of sleeping."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self.clock = clock
        self.waits: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        self.waits.append(timeout or 0.0)
        self.clock.now += timeout or 0.0
        return self.is_set()


def test_backoff_grows_exponentially_with_a_cap_and_full_jitter() -> None:
    backoff = Backoff(base=0.25, cap=5.0, rng=random.Random(1))
    for attempt in range(10):
        bound = min(5.0, 0.25 * 2**attempt)
        samples = [backoff.delay(attempt) for _ in range(200)]
        assert all(0 <= s <= bound for s in samples)
        assert max(samples) > bound * 0.8  # jitter spreads over the whole range


def test_retry_after_wins_over_backoff_but_is_capped() -> None:
    backoff = Backoff(retry_after_cap=30)
    assert backoff.delay(0, retry_after=7) == 7
    assert backoff.delay(5, retry_after=600) == 30


def make(clock: FakeClock, seconds: float = 45) -> tuple[Deadline, FakeStop]:
    return Deadline(seconds, clock=clock), FakeStop(clock)


def pace(deadline: Deadline, stop: FakeStop, backoff: Backoff, request_timeout: float) -> Pace:
    """A pace on the fake clock, no rate limit: its retries wait on `stop`, which advances
    the clock."""
    return Pace(1, RateLimiter(0, 1), backoff, deadline, stop, request_timeout)


def test_transient_errors_are_retried_until_success() -> None:
    clock = FakeClock()
    deadline, stop = make(clock)
    errors = [
        error_for_status(429, "TooManyRequests", "slow down", retry_after=2),
        TransportError("reset"),
        error_for_status(503, "ServiceUnavailable", "x"),
    ]
    timeouts: list[float] = []

    def call(timeout: float) -> str:
        timeouts.append(timeout)
        if errors:
            raise errors.pop(0)
        return "ok"

    result = pace(deadline, stop, Backoff(rng=random.Random(0)), 10).retry(call, "t")
    assert result == "ok"
    assert stop.waits[0] == 2  # Retry-After honoured exactly
    assert len(timeouts) == 4


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 410, 422])
def test_other_errors_are_raised_at_once(status: int) -> None:
    clock = FakeClock()
    deadline, stop = make(clock)
    calls = []

    def call(timeout: float) -> None:
        calls.append(timeout)
        raise error_for_status(status, "X", "no")

    with pytest.raises(ApiError):
        pace(deadline, stop, Backoff(), 10).retry(call, "t")
    assert len(calls) == 1


def test_attempts_are_bounded() -> None:
    clock = FakeClock()
    deadline, stop = make(clock, 10_000)
    calls = []

    def call(timeout: float) -> None:
        calls.append(timeout)
        raise TransportError("refused")

    with pytest.raises(TransportError):
        pace(deadline, stop, Backoff(attempts=4), 1).retry(call, "t")
    assert len(calls) == 4


def test_no_wait_outlives_the_deadline_and_timeouts_shrink_to_fit() -> None:
    clock = FakeClock()
    deadline, stop = make(clock, 3)
    timeouts: list[float] = []

    def call(timeout: float) -> None:
        timeouts.append(timeout)
        clock.now += timeout  # each attempt times out
        raise TransportError("timed out")

    with pytest.raises((TransportError, DeadlineExceeded)):
        pace(deadline, stop, Backoff(rng=random.Random(3)), 2).retry(call, "t")
    assert clock.now <= 3 + 1e-9
    assert timeouts[0] == 2 and all(t <= 3 for t in timeouts)


def test_a_stop_request_ends_retrying() -> None:
    clock = FakeClock()
    deadline, stop = make(clock)
    stop.set()
    with pytest.raises(Interrupted):
        pace(deadline, stop, Backoff(), 1).retry(lambda t: None, "t")


def test_rate_limiter_allows_a_burst_then_the_rate() -> None:
    clock = FakeClock()
    deadline, stop = make(clock, 1000)
    limiter = RateLimiter(qps=10, burst=5, clock=clock)
    for _ in range(5):
        limiter.acquire(deadline, stop)
    assert clock.now == 0  # the burst costs no wait
    for _ in range(20):
        limiter.acquire(deadline, stop)
    assert clock.now == pytest.approx(2.0, rel=0.01)  # 20 more at 10/s


def test_rate_limiter_off_and_deadline() -> None:
    clock = FakeClock()
    deadline, stop = make(clock, 0.05)
    unlimited = RateLimiter(qps=0, burst=1, clock=clock)
    for _ in range(1000):
        unlimited.acquire(deadline, stop)
    slow = RateLimiter(qps=1, burst=1, clock=clock)
    slow.acquire(deadline, stop)
    with pytest.raises(DeadlineExceeded):
        slow.acquire(deadline, stop)


def test_writes_wait_for_the_rate_limit_and_reads_do_not() -> None:
    clock = FakeClock()
    deadline, stop = make(clock, 1000)
    limited = Pace(1, RateLimiter(qps=10, burst=1, clock=clock), Backoff(), deadline, stop, 1)
    for _ in range(5):
        limited.retry(lambda t: None, "read")
    assert clock.now == 0
    for _ in range(5):
        limited.retry(lambda t: None, "write", write=True)
    assert clock.now == pytest.approx(0.4, rel=0.01)  # the first from the burst, 4 at 10/s


# --- the write rate and backing off on 429 and 5xx -----------------------------------------


def test_a_429_halves_the_rate_once_a_second_and_answers_win_it_back_slowly() -> None:
    clock = FakeClock()
    deadline, stop = make(clock, 1000)
    limiter = RateLimiter(200, burst=8, clock=clock)
    tries = iter([error_for_status(429, "TooManyRequests", "slow down", retry_after=0), None])

    def answer(timeout: float) -> None:
        clock.now += 0.01
        if (error := next(tries)) is not None:
            raise error

    Pace(8, limiter, Backoff(), deadline, stop, 10).retry(answer, "patch", write=True)
    halved = 100 + 200 * RECOVERY * 0.01  # the retry 0.01 s later gives a little back
    assert limiter.qps == pytest.approx(halved)
    limiter.observe("429")  # eight workers hit by the same overload: once a second
    assert limiter.qps == pytest.approx(halved)
    clock.now += 1
    limiter.observe("429")
    assert limiter.qps == pytest.approx(halved / 2)
    for _ in range(5):  # 5 s of answers give back 5/30 of the ceiling
        clock.now += 1
        limiter.observe()
    assert limiter.qps == pytest.approx(halved / 2 + 200 * RECOVERY * 5)
    clock.now += 60
    limiter.observe()
    assert limiter.qps == 200  # never above the ceiling

    def overloaded(timeout: float) -> None:
        clock.now += timeout
        raise error_for_status(429, "TooManyRequests", "slow down", retry_after=0)

    with pytest.raises(ApiError):
        Pace(8, limiter, Backoff(attempts=1), deadline, stop, 10).retry(overloaded, "list")
    assert limiter.qps == 200  # only writes steer the rate


def test_slow_answers_keep_the_rate_a_5xx_halves_it(caplog: pytest.LogCaptureFixture) -> None:
    """A write that takes seconds may be the client's own slowness (a starved CPU, the GIL):
    only the server's word, a 429 or a 5xx, slows the writes down."""
    clock = FakeClock()
    deadline, stop = make(clock, 1000)
    limiter = RateLimiter(200, burst=8, clock=clock)
    pace = Pace(8, limiter, Backoff(), deadline, stop, 10)

    def slow(timeout: float) -> None:
        clock.now += 5.0  # every answer 5 s late, as on a client starved of CPU

    for _ in range(100):
        pace.retry(slow, "patch", write=True)
    assert limiter.qps == 200
    tries = iter([error_for_status(503, "ServiceUnavailable", "etcd", retry_after=0), None])

    def unavailable(timeout: float) -> None:
        if (error := next(tries)) is not None:
            raise error

    with caplog.at_level("INFO", "reconcile.cluster.pace"):
        pace.retry(unavailable, "patch", write=True)
    assert limiter.qps == 100
    assert "node writes slowed to 100/s (503 Service Unavailable)" in caplog.text
    for _ in range(1000):  # a server that keeps refusing: down to the floor, never to a stop
        clock.now += 1
        limiter.observe("503")
    assert limiter.qps == pytest.approx(MIN_QPS)


def test_a_patch_that_ends_a_hold_costs_two_tokens_so_holds_end_at_half_the_rate() -> None:
    clock = FakeClock()
    deadline, stop = make(clock, 1000)
    for burst in (1, 8):
        limiter = RateLimiter(10, burst=burst, clock=clock)
        for _ in range(burst):
            limiter.acquire(deadline, stop)  # spend the burst
        start = clock.now
        for _ in range(20):
            limiter.acquire(deadline, stop, cost=2)
        assert clock.now - start == pytest.approx(4.0, abs=0.2)  # 20 at 5/s, not 2 s at 10/s


# --- the end of the run: the one place a write is left for the next run -------------------


@pytest.mark.parametrize(
    ("seconds", "request_timeout", "margin"),
    [(20, 10, 5), (20, 2, 2), (45, 10, 10)],  # a quarter of the deadline, or --request-timeout
)
@pytest.mark.parametrize("qps", [0, 10])  # no limit, or a rate with tokens to spare
def test_a_write_that_would_start_within_the_end_of_run_margin_is_left_unsent(
    seconds: float, request_timeout: float, margin: float, qps: float
) -> None:
    """The margin is min(--request-timeout, a quarter of --timeout), however the last answers
    went: a first try that would start inside it is Deferred and never sent."""
    clock = FakeClock()
    deadline, stop = make(clock, seconds)
    limiter = RateLimiter(qps, burst=8, clock=clock)
    pace = Pace(8, limiter, Backoff(), deadline, stop, request_timeout)
    sent: list[float] = []

    def call(timeout: float) -> None:
        sent.append(clock.now)

    clock.now = seconds - margin - 0.01
    pace.retry(call, "patch", write=True)
    clock.now = seconds - margin + 0.01
    with pytest.raises(Deferred):
        pace.retry(call, "patch", write=True)
    assert sent == [pytest.approx(seconds - margin - 0.01)]
    assert pace.margin == margin
    pace.retry(call, "read")  # reads are not left: they have the whole deadline
    assert len(sent) == 2


def test_a_write_whose_tokens_come_within_the_margin_is_left_without_waiting_for_them() -> None:
    """1 write a second, 40.5 s, --request-timeout 10s (margin 10 s): writes start at 0, 1, ...,
    30 s; the 32nd's token would come at 31 s, inside the margin, so it is Deferred at once,
    without a wait into the margin."""
    clock = FakeClock()
    deadline, stop = make(clock, 40.5)
    pace = Pace(1, RateLimiter(1, burst=1, clock=clock), Backoff(), deadline, stop, 10)
    sent: list[float] = []
    with pytest.raises(Deferred):
        while True:
            pace.retry(lambda timeout: sent.append(clock.now), "patch", write=True)
    assert sent == pytest.approx([float(n) for n in range(31)])
    assert clock.now == pytest.approx(30)


def test_a_write_sent_before_the_margin_is_retried_inside_it_until_the_deadline() -> None:
    """The margin is for the answers of writes already sent: a 503's retry inside it is made,
    and a retry that cannot start before the deadline is DeadlineExceeded, not Deferred."""
    clock = FakeClock()
    deadline, stop = make(clock, 20)  # margin 5 s: writes start before 15 s
    pace = Pace(1, RateLimiter(10, burst=1, clock=clock), Backoff(), deadline, stop, 10)
    tries: list[float] = []

    def unavailable_once(timeout: float) -> str:
        tries.append(clock.now)
        if len(tries) == 1:
            raise error_for_status(503, "ServiceUnavailable", "etcd", retry_after=3)
        return "ok"

    clock.now = 14.5
    assert pace.retry(unavailable_once, "patch", write=True) == "ok"
    assert tries == pytest.approx([14.5, 17.5])

    def unavailable(timeout: float) -> None:
        raise error_for_status(503, "ServiceUnavailable", "etcd", retry_after=0)

    clock.now = 14.5
    slow = Pace(1, RateLimiter(0.1, burst=1, clock=clock), Backoff(), deadline, stop, 10)
    with pytest.raises(DeadlineExceeded) as raised:
        slow.retry(unavailable, "patch", write=True)  # the retry's token: 10 s later
    assert type(raised.value) is DeadlineExceeded and clock.now == pytest.approx(14.5)
