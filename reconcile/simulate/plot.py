"""`simulate --plot out.png`: per configuration, nodes held over nodes present; with
`--sweep`, launches avoided against node-hours kept, one point per hold duration.

matplotlib is optional: without it, --plot is a one-line error (exit 2) before the replay.
"""

from __future__ import annotations

from typing import Any

from reconcile.rule.settings import ConfigError, format_duration
from reconcile.simulate.replay import Simulation


def check_available(path: str) -> None:
    """Fail before replaying anything if the PNG cannot be written."""
    if not path.lower().endswith(".png"):
        raise ConfigError(f"--plot: {path!r} does not end in .png; name a PNG file, e.g. hold.png")
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        raise ConfigError(
            "--plot needs matplotlib, which is not installed; pip install matplotlib "
            "(or leave out --plot: the terminal sparklines show the same)"
        ) from None


def write_png(sim: Simulation, path: str) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: PLC0415

    title = (
        f"node-holder simulate: {', '.join(sim.timeline.sources)} "
        f"(a run every {format_duration(sim.span.interval)}; UTC)"
    )
    fig = _sweep(plt, sim) if sim.sweep else _strips(plt, sim)
    fig.axes[0].set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _strips(plt: Any, sim: Simulation) -> Any:
    import matplotlib.dates as mdates  # noqa: PLC0415

    times = [sim.span.tick(i) for i in range(sim.span.runs)]
    present = sim.primary.present_nodes
    rows = len(sim.results)
    fig, axes = plt.subplots(rows, 1, figsize=(12, 1.2 + 1.3 * rows), sharex=True, squeeze=False)
    for ax, result in zip(axes[:, 0], sim.results, strict=True):
        ax.fill_between(times, present, step="post", color="#d0d0d0", label="nodes")
        ax.fill_between(times, result.held_nodes, step="post", color="#d9534f", label="held")
        share = sum(result.held_nodes) / max(sum(present), 1)
        ax.set_ylabel(result.label, rotation=0, ha="right", va="center")
        note = f"{len(result.periods)} holds, {share:.0%} of node-minutes held"
        ax.text(1.0, 0.9, note, transform=ax.transAxes, ha="right", va="top", fontsize=8)
        ax.set_ylim(0, max(present, default=1) * 1.15 + 0.5)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].legend(loc="upper left", fontsize=8, ncols=2)
    axes[-1, 0].xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    return fig


def _sweep(plt: Any, sim: Simulation) -> Any:
    results = sorted(sim.results, key=lambda r: r.hold.hold_duration)
    kept = [r.node_hours_kept for r in results]
    avoided = [r.launches_avoided for r in results]
    fig, ax = plt.subplots(figsize=(8, 5))
    ax.plot(kept, avoided, marker="o", color="#d9534f")
    for result, x, y in zip(results, kept, avoided, strict=True):
        ax.annotate(result.label, (x, y), textcoords="offset points", xytext=(5, -12), fontsize=8)
    ax.set_xlabel("node-hours kept (estimate)")
    ax.set_ylabel("launches avoided (estimate)")
    ax.grid(alpha=0.3)
    return fig
