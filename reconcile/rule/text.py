"""Plain-text tables, for `status` and `simulate` alike: both import the rule, neither the other."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def table(
    head: Sequence[str], rows: Sequence[Sequence[str]], right: Collection[int] = ()
) -> list[str]:
    """Columns two spaces apart, each as wide as its widest cell; `right`: the columns of
    figures, aligned right. No line ends in spaces."""
    lines = [head, *rows]
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in lines
    ]
