"""Logging on stderr: text or JSON lines, set up before any other option is parsed.

The `--log-format` and `-v` options are eager (`reconcile.cli.options`), so even the error
line about another option's bad value comes out in the format that was asked for.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconcile.rule.settings import format_time

log = logging.getLogger("reconcile")


class _JsonFormatter(logging.Formatter):
    """One JSON object per line; `time` is RFC 3339 UTC (`2026-11-22T20:41:22.123Z`)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": format_time(datetime.fromtimestamp(record.created, UTC), fraction=True),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry)


@dataclass
class _Logging:
    """What the eager --log-format and -v options said, for the final error line too."""

    json: bool = False
    verbose: int = 0


_logging = _Logging()


def setup_logging(fmt: str, verbose: int) -> None:
    _logging.json = str(fmt).lower() == "json"
    _logging.verbose = verbose
    handler = logging.StreamHandler(sys.stderr)
    if _logging.json:
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    level = logging.DEBUG if verbose >= 2 else logging.INFO if verbose == 1 else logging.WARNING
    log.setLevel(level)
    logging.getLogger("urllib3").setLevel(logging.DEBUG if verbose >= 3 else logging.ERROR)


def logging_option(ctx: Any, param: Any, value: Any) -> Any:
    """Eager: logging is set up before any other option is parsed (their errors log too)."""
    fmt = value if param.name == "log_format" else ("json" if _logging.json else "text")
    verbose = value if param.name == "verbose" else _logging.verbose
    setup_logging(fmt, verbose or 0)
    return value


def error_line(prog: str, message: str) -> str:
    """The run's last line on stderr, in the asked-for format: one line, whatever a bad
    input put in the message (a context name with a newline shows as `\\n`)."""
    message = "".join(c if c.isprintable() else repr(c)[1:-1] for c in message)
    if _logging.json:
        record = logging.makeLogRecord({"levelname": "ERROR", "name": prog, "msg": message})
        return _JsonFormatter().format(record)
    return f"{prog}: error: {message}"


def verbosity() -> int:
    return _logging.verbose


def start() -> None:
    """Before any option is parsed: the environment's log format, so that even a usage
    error (an unknown option, which click reports before any option callback) is JSON when
    NODE_HOLDER_LOG_FORMAT=json asks for it."""
    setup_logging(os.environ.get("NODE_HOLDER_LOG_FORMAT", "").strip(), 0)
