"""`simulate --plot out.png`: one strip per configuration, nodes held over nodes present.

matplotlib is optional: without it, --plot is a one-line error (exit 2) before the replay.
"""

from __future__ import annotations

from datetime import datetime

from reconcile.settings import ConfigError, format_duration
from reconcile.simulate.replay import Simulation

INSTALL_HINT = "pip install matplotlib"


def check_available(path: str) -> None:
    """Fail before replaying anything if the PNG cannot be written."""
    if not path.lower().endswith(".png"):
        raise ConfigError(f"--plot: {path!r} does not end in .png; name a PNG file, e.g. hold.png")
    try:
        import matplotlib  # noqa: F401, PLC0415
    except ImportError:
        raise ConfigError(
            f"--plot needs matplotlib, which is not installed; {INSTALL_HINT} "
            "(or leave out --plot: the terminal sparklines show the same)"
        ) from None


def write_png(sim: Simulation, path: str) -> None:
    import matplotlib  # noqa: PLC0415

    matplotlib.use("Agg")
    import matplotlib.dates as mdates  # noqa: PLC0415
    import matplotlib.pyplot as plt  # noqa: PLC0415

    window = sim.window
    times: list[datetime] = [window.tick(i) for i in range(window.runs)]
    present = sim.primary.present_nodes
    rows = len(sim.results)
    fig, axes = plt.subplots(rows, 1, figsize=(12, 1.2 + 1.3 * rows), sharex=True, squeeze=False)
    for ax, result in zip(axes[:, 0], sim.results, strict=True):
        ax.fill_between(times, present, step="post", color="#d0d0d0", label="nodes")
        ax.fill_between(times, result.held_nodes, step="post", color="#d9534f", label="held")
        share = sum(result.held_nodes) / max(sum(present), 1)
        ax.set_ylabel(result.label, rotation=0, ha="right", va="center")
        ax.text(
            1.0,
            0.9,
            f"{len(result.periods)} holds, {share:.0%} of node-minutes held",
            transform=ax.transAxes,
            ha="right",
            va="top",
            fontsize=8,
        )
        ax.set_ylim(0, max(present, default=1) * 1.15 + 0.5)
        ax.grid(axis="x", alpha=0.3)
    axes[0, 0].legend(loc="upper left", fontsize=8, ncols=2)
    axes[0, 0].set_title(
        f"node-holder simulate: {', '.join(sim.timeline.sources)} "
        f"(a run every {format_duration(window.interval)}; UTC)"
    )
    axes[-1, 0].xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
