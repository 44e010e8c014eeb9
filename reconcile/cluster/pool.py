"""The one request path: how hard a command may push, and how it stays polite and bounded.

Every request of every command (the list, a named node's read, patches, Events, the
uninstall hook's hand-over) goes through `Pool.retry`: within the deadline, not after a stop,
writes under the rate limit, transient failures retried with capped jittered backoff and
Retry-After honoured. The workers that apply a plan take their number from here too.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from reconcile.cluster.errors import ApiError, ServerError, TooManyRequests, TransportError

log = logging.getLogger(__name__)
T = TypeVar("T")


class Interrupted(Exception):
    """SIGTERM (or SIGINT) arrived: start nothing new."""


class DeadlineExceeded(Exception):
    """The run's --timeout is used up."""


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


class RateLimiter:
    """A token bucket shared by the workers: at most `qps` requests a second on average."""

    def __init__(self, qps: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.qps = qps
        self.burst = max(burst, 1)
        self._clock = clock
        self._tokens = float(self.burst)
        self._stamp = clock()
        self._lock = threading.Lock()

    def acquire(self, deadline: Deadline, stop: threading.Event) -> None:
        if self.qps <= 0:
            return
        while True:
            with self._lock:
                now = self._clock()
                self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.qps)
                self._stamp = now
                if self._tokens >= 1 - 1e-9:  # float dust must not mean another wait
                    self._tokens = max(self._tokens - 1, 0.0)
                    return
                wait = (1 - self._tokens) / self.qps
            if wait >= deadline.remaining():
                raise DeadlineExceeded("rate limit")
            if stop.wait(wait):
                raise Interrupted("rate limit")


@dataclass(frozen=True)
class Pool:
    """How hard a command may push: workers, the write rate, retries, time, and its stop flag."""

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
    ) -> Pool:
        """A pool whose deadline starts now; `qps` 0 leaves writes unlimited."""
        return cls(
            workers=workers,
            limiter=RateLimiter(qps, burst=workers),
            backoff=backoff or Backoff(),
            deadline=Deadline(seconds),
            stop=stop or threading.Event(),
            request_timeout=request_timeout,
        )

    def retry(self, call: Callable[[float], T], what: str, *, write: bool = False) -> T:
        """Run `call(timeout)` until it succeeds, a non-transient error, or the budget ends.

        A `write` waits for the rate limit before each try. Transient: 429 (after its
        Retry-After), 5xx, and transport errors (reset, refused, timed out). Anything else
        (400, 401, 403, 404, 409, 410, 422) is the caller's to handle and is raised at once.
        """
        attempt = 0
        while True:
            if self.stop.is_set():
                raise Interrupted(what)
            if write:
                self.limiter.acquire(self.deadline, self.stop)
            remaining = self.deadline.remaining()
            if remaining <= 0:
                raise DeadlineExceeded(what)
            try:
                return call(min(self.request_timeout, remaining))
            except (TooManyRequests, ServerError) as exc:
                error: Exception = exc
                retry_after = exc.retry_after
            except TransportError as exc:
                error, retry_after = exc, None
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
