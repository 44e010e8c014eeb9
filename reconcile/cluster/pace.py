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
    """A write that could not start in time to be answered before the deadline: it is left for
    the next run, by design (docs/design.md, "Patches and concurrency")."""


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
    """The run's deadline (--timeout); every wait and every request timeout is cut to fit it."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds, self._clock = seconds, clock
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


#: Back-off: the API server's own word that it is overloaded, a 429 (API Priority and Fairness)
#: or a 5xx, halves the rate (at most once a second, never below MIN_QPS); from then on each
#: write it answers gives back RECOVERY of the ceiling per second since the cut (half to full:
#: 15 s). How long an answer took is no signal: the client cannot tell a slow server from its own
#: slowness (a starved CPU, the other workers holding the GIL), which a latency also measures.
RECOVERY, MIN_QPS = 1 / 30, 1.0


class RateLimiter:
    """A token bucket shared by the workers: at most `qps` writes a second on average, backing
    off under pressure, never above `ceiling` (the --qps given). A rate of 0 is no limit, and
    nothing to adapt."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ceiling = self.qps = self._halved = qps
        self.burst = max(burst, 1)
        self.clock = clock
        self._tokens = float(self.burst)
        self._stamp = clock()
        self._cut = -math.inf
        self._lock = threading.Lock()

    def _refill(self, now: float) -> None:
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
        self._stamp = now

    def acquire(
        self, deadline: Deadline, stop: threading.Event, cost: float = 1.0, reserve: float = 0.0
    ) -> None:
        """Wait for `cost` tokens; beyond the burst, the tokens go into debt for the next.

        The one place a write is left for the next run: a first try, whose `reserve` is the
        pace's end-of-run margin, that cannot start `reserve` seconds before the deadline (its
        tokens come later, or the time is up) raises Deferred; a retry (`reserve` 0) that cannot
        start before the deadline, DeadlineExceeded."""
        needed = min(cost, self.burst)
        while True:
            with self._lock:
                wait = 0.0
                if self.qps > 0:
                    self._refill(self.clock())
                    wait = max(needed - self._tokens, 0.0) / self.qps
                if wait >= deadline.remaining() - reserve:
                    raise Deferred("margin") if reserve else DeadlineExceeded("rate limit")
                if wait < 1e-9:  # float dust must not mean another wait
                    self._tokens -= cost
                    return
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
                grown = self._halved + self.ceiling * RECOVERY * (now - self._cut)
                self.qps = min(self.ceiling, grown)
            elif now - self._cut >= 1.0:
                self.qps = self._halved = max(self.qps / 2, min(MIN_QPS, self.ceiling))
                self._cut = now
                log.info("node writes slowed to %.3g/s (%s)", self.qps, refused)


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

    @classmethod
    def start(
        cls,
        seconds: float,
        request_timeout: float,
        *,
        workers: int = 1,
        qps: float = 0.0,
        stop: threading.Event | None = None,
        backoff: Backoff | None = None,
    ) -> Pace:
        """A pace whose deadline starts now; `qps` 0 leaves writes unlimited."""
        return cls(
            workers=workers,
            limiter=RateLimiter(qps, burst=workers),
            backoff=backoff or Backoff(),
            deadline=Deadline(seconds),
            stop=stop or threading.Event(),
            request_timeout=request_timeout,
        )

    @property
    def margin(self) -> float:
        """The end of the run kept for the last writes' answers: --request-timeout, at most a
        quarter of the run's deadline (--timeout). A write that cannot start before it is left
        for the next run (RateLimiter.acquire), so a run never cuts a write it sent."""
        return min(self.request_timeout, self.deadline.seconds / 4)

    def retry(
        self, call: Callable[[float], T], what: str, *, write: bool = False, cost: float = 1.0
    ) -> T:
        """Run `call(timeout)` until it succeeds, a non-transient error, or the deadline.

        A `write` waits for `cost` tokens of the rate limit before each try, and its answer
        (a 429 or a 5xx, or any other) steers the rate; a write whose first try cannot start
        before the end-of-run `margin` raises Deferred (RateLimiter.acquire). Transient: 429
        (after its Retry-After), 5xx, and transport errors (reset, refused, timed out). Anything
        else (400, 401, 403, 404, 409, 410, 422) is the caller's to handle and is raised at once.
        """
        attempt = 0
        while True:
            if self.stop.is_set():
                raise Interrupted(what)
            if write:
                reserve = self.margin if attempt == 0 else 0.0
                self.limiter.acquire(self.deadline, self.stop, cost, reserve)
            remaining = self.deadline.remaining()
            if remaining <= 0:
                raise DeadlineExceeded(what)
            refused = None  # the server's word that it is overloaded: a 429 or a 5xx
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
