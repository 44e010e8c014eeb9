"""The one request path: how hard a command may push, and how it stays polite and bounded.

Every request of every command goes through `Pace.retry`: within the deadline, not after a stop,
writes under the rate limit, transient failures retried with backoff (docs/performance.md,
"Node writes at scale"; docs/design.md, "Patches and concurrency").
"""

from __future__ import annotations

import logging
import math
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.client import responses
from typing import TypeVar

from reconcile.cluster.errors import ApiError, ServerError, TooManyRequests, TransportError

log = logging.getLogger(__name__)
T = TypeVar("T")


class Interrupted(Exception):
    """SIGTERM (or SIGINT) arrived: start nothing new."""


class DeadlineExceeded(Exception):
    """The run's --timeout is used up."""


class Deferred(DeadlineExceeded):
    """Too little of the run's time is left to send a write and hear its answer: the write is
    left for the next run, by design (docs/design.md, "Patches and concurrency")."""


def explain(exc: Exception) -> str:
    """One line for people on why a request did not succeed."""
    if isinstance(exc, ApiError):
        return exc.explain()
    if isinstance(exc, Interrupted):
        return "stopped by signal"
    if isinstance(exc, DeadlineExceeded):
        return "run timeout reached"
    return str(exc) or type(exc).__name__


class Deadline:
    """The per-run time budget; every wait and every request timeout is cut to fit it."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._end = clock() + seconds

    def remaining(self) -> float:
        return max(self._end - self._clock(), 0.0)

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0


@dataclass(frozen=True)
class Backoff:
    """Capped exponential backoff with full jitter; Retry-After wins when the server sends it."""

    base: float = 0.25
    cap: float = 5.0
    attempts: int = 6  # tries per request, the first included
    retry_after_cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            return min(retry_after, self.retry_after_cap)
        return self.rng.uniform(0, min(self.cap, self.base * 2**attempt))


#: The default write rate (`--qps auto`): max(200, nodes / 300) a second, about what the
#: kubelets' own Node status updates (one per node every 5 minutes) already cost the control plane.
AUTO_QPS, AUTO_NODES_PER_QPS = 200.0, 300
#: Back-off: the API server's own word that it is overloaded, a 429 (API Priority and Fairness)
#: or a 5xx, halves the rate (at most once a second, never below MIN_QPS); each write it answers
#: gives back RECOVERY of the ceiling per second since the last change (half to full: 15 s).
#: How long an answer took is no signal: the client cannot tell a slow server from its own
#: slowness (a starved CPU, the other workers holding the GIL), which a latency also measures.
RECOVERY, MIN_QPS = 1 / 30, 1.0
#: The time kept at the end of a run for the last writes' answers: the p95 of the run's last
#: SAMPLES answers, never less than ANSWER_FLOOR seconds. A write that cannot start before then
#: is left for the next run, so a run never cuts a write it sent.
SAMPLES, ANSWER_FLOOR = 20, 0.5


class RateLimiter:
    """A token bucket shared by the workers: at most `qps` writes a second on average, backing
    off under pressure, never above `ceiling` (the --qps given, or the auto rate once `fit`
    knows the cluster's size). A rate of 0 is no limit, and nothing to adapt."""

    def __init__(
        self, qps: float | None, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.auto = qps is None
        self.ceiling = self.qps = AUTO_QPS if qps is None else qps
        self.burst = max(burst, 1)
        self.clock = clock
        self._tokens = float(self.burst)
        self._stamp = self._changed = clock()
        self._cut = -math.inf
        self._lock = threading.Lock()

    def fit(self, nodes: int) -> None:
        """The auto rate for a cluster of `nodes`; a --qps given stays as it is."""
        if self.auto:
            with self._lock:
                self.ceiling = self.qps = max(AUTO_QPS, nodes / AUTO_NODES_PER_QPS)

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    def capacity(self, seconds: float) -> float:
        """The tokens there are to spend in the next `seconds`, at the rate as it is now."""
        if self.qps <= 0:
            return math.inf
        with self._lock:
            self._refill(self.clock())
            return self._tokens + self.qps * max(seconds, 0.0)

    def acquire(
        self, deadline: Deadline, stop: threading.Event, cost: float = 1.0, reserve: float = 0.0
    ) -> None:
        """Wait for `cost` tokens; beyond the burst, the tokens go into debt for the next. A
        wait that would end less than `reserve` seconds (> 0) before the deadline: Deferred."""
        if self.qps <= 0:
            return
        needed = min(cost, self.burst)
        while True:
            with self._lock:
                self._refill(self.clock())
                if self._tokens >= needed - 1e-9:  # float dust must not mean another wait
                    self._tokens -= cost
                    return
                wait = (needed - self._tokens) / self.qps
            if wait >= deadline.remaining() - reserve:
                raise Deferred("rate limit") if reserve else DeadlineExceeded("rate limit")
            if stop.wait(wait):
                raise Interrupted("rate limit")

    def observe(self, refused: str | None = None) -> None:
        """One write's answer: the server's refusal (`refused`: why, e.g. "429 Too Many
        Requests") halves the rate, any other answer gives some of it back."""
        if self.ceiling <= 0:
            return
        with self._lock:
            now = self.clock()
            self._refill(now)  # the tokens so far at the rate so far
            if refused is None:
                grown = self.qps + self.ceiling * RECOVERY * (now - self._changed)
                self.qps, self._changed = min(self.ceiling, grown), now
            elif now - self._cut >= 1.0:
                self.qps = max(self.qps / 2, min(MIN_QPS, self.ceiling))
                self._cut = self._changed = now
                log.info("node writes slowed to %.3g/s (%s)", self.qps, refused)


class Answers:
    """How long the run's writes took to be answered, the last SAMPLES of them."""

    def __init__(self) -> None:
        self._seconds: deque[float] = deque(maxlen=SAMPLES)

    def record(self, seconds: float) -> None:
        self._seconds.append(seconds)  # deque.append is thread-safe

    def margin(self) -> float:
        """The time to keep for a write's answer: the p95 so far, at least ANSWER_FLOOR."""
        seen = sorted(self._seconds)
        return max(ANSWER_FLOOR, seen[math.ceil(0.95 * len(seen)) - 1] if seen else 0.0)


@dataclass(frozen=True)
class Pace:
    """How a command paces its requests: workers, the write rate, retries, its deadline and its
    stop flag. (Not a NodePool, nor the connection pool: one word for one thing.)"""

    workers: int
    limiter: RateLimiter
    backoff: Backoff
    deadline: Deadline
    stop: threading.Event
    request_timeout: float
    answers: Answers = field(default_factory=Answers, compare=False)

    @classmethod
    def start(
        cls,
        seconds: float,
        request_timeout: float,
        *,
        workers: int = 1,
        qps: float | None = 0.0,
        stop: threading.Event | None = None,
        backoff: Backoff | None = None,
    ) -> Pace:
        """A pace whose deadline starts now; `qps` 0 leaves writes unlimited, None: auto."""
        return cls(
            workers=workers,
            limiter=RateLimiter(qps, burst=workers),
            backoff=backoff or Backoff(),
            deadline=Deadline(seconds),
            stop=stop or threading.Event(),
            request_timeout=request_timeout,
        )

    def write_capacity(self) -> float:
        """The write tokens this run can still spend and hear answered (math.inf: no limit)."""
        return self.limiter.capacity(self.deadline.remaining() - self.answers.margin())

    def too_late_to_write(self) -> bool:
        """Whether a write started now might be answered after the deadline."""
        return self.deadline.remaining() <= self.answers.margin()

    def retry(
        self, call: Callable[[float], T], what: str, *, write: bool = False, cost: float = 1.0
    ) -> T:
        """Run `call(timeout)` until it succeeds, a non-transient error, or the budget ends.

        A `write` waits for `cost` tokens of the rate limit before each try, and its answer
        (a 429 or a 5xx, or any other) steers the rate; a write whose first try cannot start in
        time to be answered before the deadline raises Deferred. Transient: 429 (after its
        Retry-After), 5xx, and transport errors (reset, refused, timed out). Anything else (400,
        401, 403, 404, 409, 410, 422) is the caller's to handle and is raised at once.
        """
        attempt = 0
        while True:
            if self.stop.is_set():
                raise Interrupted(what)
            if write:
                reserve = self.answers.margin() if attempt == 0 else 0.0
                self.limiter.acquire(self.deadline, self.stop, cost, reserve)
                if attempt == 0 and self.too_late_to_write():
                    raise Deferred(what)
            remaining = self.deadline.remaining()
            if remaining <= 0:
                raise DeadlineExceeded(what)
            refused = None  # the server's word that it is overloaded: a 429 or a 5xx
            started = self.limiter.clock()
            try:
                return call(min(self.request_timeout, remaining))
            except (TooManyRequests, ServerError) as exc:
                error: Exception = exc
                retry_after = exc.retry_after
                refused = f"{exc.status} {responses.get(exc.status, exc.reason)}"
            except TransportError as exc:  # a reset or a timeout: could be either side's fault
                error, retry_after = exc, None
            finally:
                if write:
                    self.answers.record(self.limiter.clock() - started)
                    self.limiter.observe(refused)
            attempt += 1
            if attempt >= self.backoff.attempts:
                raise error
            pause = self.backoff.delay(attempt - 1, retry_after)
            if pause >= self.deadline.remaining():
                raise error
            # INFO, not WARNING: a retry that works is not news, and one that fails ends in the
            # run's single error line; `-v` shows every attempt.
            log.info("%s: %s; retry %d in %.2fs", what, error, attempt, pause)
            if self.stop.wait(pause):
                raise Interrupted(what)
