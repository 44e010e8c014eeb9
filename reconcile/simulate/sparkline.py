"""Terminal sparklines: a day of runs squeezed into one line of block characters."""

from __future__ import annotations

import math
from collections.abc import Sequence
from datetime import datetime, timedelta

BLOCKS = " ▁▂▃▄▅▆▇█"
EIGHTHS = " ▏▎▍▌▋▊▉"  # a bar's last character
WIDTH = 72
BAR_WIDTH = 16
_LABEL_STEPS = [
    timedelta(minutes=m) for m in (5, 10, 15, 30, 60, 120, 180, 360, 720, 1440, 2880, 10080)
]


def runs_per_char(runs: int, width: int = WIDTH) -> int:
    """How many runs one character stands for, so the line fits in `width`."""
    return max(1, math.ceil(runs / width))


def _chunks(values: Sequence[int], per: int) -> list[Sequence[int]]:
    return [values[i : i + per] for i in range(0, len(values), per)]


def _block(fraction: float) -> str:
    """Blank for nothing, at least the lowest block for anything above nothing."""
    if fraction <= 0:
        return " "
    return BLOCKS[max(1, min(8, round(fraction * 8)))]


def bar(fraction: float, width: int = BAR_WIDTH) -> str:
    """A row's bar, in eighths of a character; anything above nothing shows at least `▏`."""
    eighths = max(round(min(fraction, 1.0) * width * 8), 1 if fraction > 0 else 0)
    full, rest = divmod(eighths, 8)
    return "█" * full + EIGHTHS[rest].strip()


def share_line(held: Sequence[int], present: Sequence[int], per: int) -> str:
    """Per character: the share of node-minutes that carried the hold (█ all, blank none)."""
    line = []
    for h, p in zip(_chunks(held, per), _chunks(present, per), strict=True):
        total = sum(p)
        line.append(_block(sum(h) / total if total else 0.0))
    return "".join(line)


def level_line(values: Sequence[int], per: int) -> tuple[str, int]:
    """Per character: the average value, scaled to the peak; returns the line and the peak."""
    peak = max(values, default=0)
    if peak == 0:
        return " " * len(_chunks(values, per)), 0
    return "".join(_block(sum(c) / len(c) / peak) for c in _chunks(values, per)), peak


def axis(start: datetime, interval: timedelta, runs: int, per: int) -> str:
    """Clock times under the line, at round steps at least 12 characters apart."""
    chars = len(_chunks(range(runs), per))
    char_span = interval * per
    step = next((s for s in _LABEL_STEPS if s / char_span >= 12), _LABEL_STEPS[-1])
    line = [" "] * (chars + 6)
    multi_day = interval * runs > timedelta(days=1)
    epoch = datetime(1970, 1, 1, tzinfo=start.tzinfo)
    first = epoch + math.ceil((start - epoch) / step) * step
    moment = first
    while moment < start + interval * runs:
        pos = round((moment - start) / char_span)
        label = moment.strftime("%m-%d %H:%M" if multi_day else "%H:%M")
        free = all(c == " " for c in line[max(0, pos - 1) : pos + len(label)])
        if pos + len(label) <= len(line) and free:
            line[pos : pos + len(label)] = list(label)
        moment += step
    return "".join(line).rstrip()
