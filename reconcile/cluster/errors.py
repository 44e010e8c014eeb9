"""What can go wrong talking to the API server, classified once, and redaction for every line.

Each error status a caller acts on has its own type; faults of the way there are a
`TransportError`. Each error carries the `Action` it interrupted, for its line.
"""

from __future__ import annotations

import json
import re
from typing import Any, NamedTuple


class Action(NamedTuple):
    """What a request does, in words for error lines (`patch node "x"`), and who grants it."""

    verb: str = ""
    what: str = ""
    grant: str = ""


#: How an error reads for people, by status; verb, what and grant come from its Action.
_EXPLAINED = {
    401: "401 Unauthorized while trying to {verb} {what}: the API server did not accept our "
    "credentials; check the kubeconfig user or the service account token",
    403: "403 Forbidden: {message}; grant {grant} (it needs '{verb}' on {what})",
}


class ApiError(Exception):
    """The API server answered with an error status; subclasses name the ones callers act on."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        retry_after: float | None = None,
        action: Action | None = None,
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message
        self.retry_after = retry_after
        self.action = action or Action()

    def explain(self) -> str:
        """One line for people: what was tried, and for a 401 or 403 what to fix or grant."""
        form = _EXPLAINED.get(
            self.status, "{status} {reason} while trying to {verb} {what}: {message}"
        )
        return form.format(**vars(self), **self.action._asdict())


class Unauthorized(ApiError):
    """401: the server did not accept our credentials."""


class Forbidden(ApiError):
    """403: our identity may not do this."""


class NotFound(ApiError):
    """404: the object is gone."""


class Conflict(ApiError):
    """409: the object changed since it was read (resourceVersion precondition failed)."""


class Gone(ApiError):
    """410: a list's continue token expired."""


class TooManyRequests(ApiError):
    """429: throttled; retry after the server's Retry-After."""


class ServerError(ApiError):
    """5xx: a server-side hiccup; retry."""


#: By status: the Status reason kube-apiserver gives (for an answer whose body names none), and
#: the error type callers catch (any other 5xx is a ServerError, anything else an ApiError).
_STATUSES: dict[int, tuple[str, type[ApiError]]] = {
    400: ("BadRequest", ApiError),
    401: ("Unauthorized", Unauthorized),
    403: ("Forbidden", Forbidden),
    404: ("NotFound", NotFound),
    409: ("Conflict", Conflict),
    410: ("Expired", Gone),
    422: ("Invalid", ApiError),
    429: ("TooManyRequests", TooManyRequests),
    500: ("InternalError", ServerError),
    503: ("ServiceUnavailable", ServerError),
    504: ("Timeout", ServerError),
}


def error_for_status(status: int, reason: str, message: str, **kw: Any) -> ApiError:
    """The one place a status becomes an error type."""
    _, kind = _STATUSES.get(status, ("", ServerError if status >= 500 else ApiError))
    return kind(status, reason, message, **kw)


def api_error(status: int, body: bytes, retry_after: float | None, action: Action) -> ApiError:
    """The error an answer with an error status stands for, read from its Status body."""
    reason, message = "", ""
    try:
        found = json.loads(body)
        if isinstance(found, dict):
            # a Kubernetes Status, or Prometheus' error answer (errorType, error)
            reason = str(found.get("reason") or found.get("errorType") or "")
            message = str(found.get("message") or found.get("error") or "")
    except ValueError:
        message = body[:200].decode("utf-8", "replace").strip()
    return error_for_status(
        status,
        reason or _STATUSES.get(status, ("Error",))[0],
        (message or "(no message)")[:1000],  # a line in our report, however long the answer
        retry_after=retry_after,
        action=action,
    )


class TransportError(Exception):
    """No usable HTTP answer: refused, reset, timed out, TLS failure. Always worth a retry."""


class UnreadableAnswer(TransportError):
    """A 2xx whose body is not what was asked for (a proxy's HTML page, a gzip body cut short,
    `{}`): a fault of the way there, retried like a reset connection."""


class Unconfirmed(Exception):
    """A write was sent but its answer could not be read: it may have landed. Never retried
    blindly: the caller reads the object again and decides again, as after a Conflict."""


_USERINFO = re.compile(r"(?P<scheme>\b[a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@\s]*@")
_SECRET_QUERY = re.compile(
    r"(?i)(?P<key>[?&;](?:access_token|id_token|token|password|passwd|pwd|secret|api_?key|key"
    r"|auth|authorization|sig|signature|x-amz-[a-z-]+|credential)=)[^&#;\s'\"]*"
)


def redact(text: str) -> str:
    """`text` with URL credentials (userinfo, token-like query values) hidden: applied to every
    URL and transport message the tool prints or logs."""
    text = _USERINFO.sub(r"\g<scheme>REDACTED@", text)
    return _SECRET_QUERY.sub(r"\g<key>REDACTED", text)
