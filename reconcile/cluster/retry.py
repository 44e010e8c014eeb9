"""Retries, deadlines and the client-side rate limit: how a run stays polite and bounded."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from reconcile.cluster.client import ServerError, TooManyRequests, TransportError

log = logging.getLogger(__name__)
T = TypeVar("T")


class Interrupted(Exception):
    """SIGTERM (or SIGINT) arrived: start nothing new."""


class DeadlineExceeded(Exception):
    """The run's --timeout is used up."""


class Deadline:
    """The per-run time budget; every wait and every request timeout is cut to fit it."""

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.seconds = seconds
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


def retrying(
    call: Callable[[float], T],
    *,
    what: str,
    backoff: Backoff,
    deadline: Deadline,
    stop: threading.Event,
    request_timeout: float,
) -> T:
    """Run `call(timeout)` until it succeeds, a non-transient error, or the budget ends.

    Transient: 429 (after its Retry-After), 5xx, and transport errors (reset,
    refused, timed out). Anything else (400, 401, 403, 404, 409, 410, 422) is
    the caller's to handle and is raised at once.
    """
    attempt = 0
    while True:
        if stop.is_set():
            raise Interrupted(what)
        remaining = deadline.remaining()
        if remaining <= 0:
            raise DeadlineExceeded(what)
        try:
            return call(min(request_timeout, remaining))
        except (TooManyRequests, ServerError) as exc:
            error: Exception = exc
            retry_after = exc.retry_after
        except TransportError as exc:
            error, retry_after = exc, None
        attempt += 1
        if attempt >= backoff.attempts:
            raise error
        pause = backoff.delay(attempt - 1, retry_after)
        if pause >= deadline.remaining():
            raise error
        # INFO, not WARNING: a retry that works is not news, and one that fails ends in the
        # run's single error line; `-v` shows every attempt.
        log.info("%s: %s; retry %d in %.2fs", what, error, attempt, pause)
        if stop.wait(pause):
            raise Interrupted(what)


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
