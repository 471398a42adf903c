"""PNG figures of `costmodel validate --plot` and `costmodel compare --plot` (matplotlib, the [plot] extra).

Every function writes one file and returns its path; each raises
:class:`costmodel.errors.InputError` (flag ``--plot``) when matplotlib is not installed or the file
cannot be written, so the CLI ends with one line and exit code 2.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from .errors import InputError


def _plt():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise InputError("--plot", "", "needs matplotlib: pip install '.[plot]' in the costmodel "
                         "checkout (or pip install matplotlib)") from None
    return plt


def require_matplotlib() -> None:
    """Check, before any work, that a --plot can be drawn.

    Raises:
        InputError: matplotlib is not installed (naming --plot and the extra to install).
    """
    _plt()


def _save(fig, path) -> str:
    plt = _plt()
    from .files import write_atomically
    try:
        write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"), "--plot")
    finally:
        plt.close(fig)
    return str(path)


def plain_log_ticks(ax) -> None:
    """Label both log axes of ``ax`` at 1, 2 and 5 times the powers of ten, as plain numbers (0.3, 2, 50),
    the other ticks unlabelled: matplotlib's default labels every minor tick of an axis spanning under a
    decade in scientific form, and "3x10^-1" ran into "4x10^-1"."""
    from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(LogLocator(base=10.0, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FormatStrFormatter("%g"))
        axis.set_minor_formatter(NullFormatter())


def validate_scatter(results, path) -> str:
    """Predicted vs measured step time (s) of every used row, log-log, one colour per source, with the
    y = x line and +/-10 % and +/-25 % bands.

    Args:
        results: :class:`costmodel.validate.RowResult` list (skipped rows are ignored).
        path: PNG to write.
    Returns:
        The path written, as a string.
    Raises:
        InputError: (on ``--plot``) every row was skipped: nothing to draw.
    """
    plt = _plt()
    used = [r for r in results if not r.skipped]
    if not used:
        raise InputError("--plot", "", "no row was predicted: nothing to draw")
    fig, ax = plt.subplots(figsize=(7, 6))
    for src in sorted({r.source for r in used}):
        rs = [r for r in used if r.source == src]
        ax.scatter([r.measured_s for r in rs], [r.predicted_s for r in rs], s=14, alpha=0.75,
                   label=f"{Path(src).stem} ({len(rs)})")
    lo = min(min(r.measured_s, r.predicted_s) for r in used) / 1.5
    hi = max(max(r.measured_s, r.predicted_s) for r in used) * 1.5
    x = np.geomspace(lo, hi, 50)
    ax.plot(x, x, "k-", lw=1)
    for f, ls in ((1.10, "--"), (1.25, ":")):
        ax.plot(x, x * f, "k" + ls, lw=0.7)
        ax.plot(x, x / f, "k" + ls, lw=0.7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    plain_log_ticks(ax)
    ax.set_xlabel("measured step time (s)")
    ax.set_ylabel("predicted step time (s)")
    ax.set_title("costmodel validate: predicted vs measured (dashed ±10 %, dotted ±25 %)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left")
    return _save(fig, path)


def metric_bars(metrics, path) -> str:
    """Measured and predicted value of each comparable metric, normalised to the measured value.

    Args:
        metrics: list of dicts with name, measured, predicted, error_pct (``compare --json`` rows); a
            metric without ``error_pct`` (a temperature, scored by its absolute error: a ratio of Celsius
            readings means nothing) is left out.
        path: PNG to write.
    Returns:
        The path written, as a string.
    Raises:
        InputError: (on ``--plot``) no metric has a nonzero measured value, a predicted value and an
            ``error_pct``: nothing to draw.
    """
    plt = _plt()
    rows = [m for m in metrics if m.get("measured") is not None and m.get("predicted") is not None and m["measured"]
            and m.get("error_pct") is not None]
    if not rows:
        raise InputError("--plot", "", "no metric has both a measured and a predicted value")
    fig, ax = plt.subplots(figsize=(max(6, 0.9 * len(rows)), 4))
    x = np.arange(len(rows))
    ax.bar(x - 0.2, [1.0] * len(rows), 0.4, label="measured")
    ax.bar(x + 0.2, [m["predicted"] / m["measured"] for m in rows], 0.4, label="predicted")
    for i, m in enumerate(rows):
        ax.text(i + 0.2, m["predicted"] / m["measured"], f"{m['error_pct']:+.0f}%", ha="center", va="bottom",
                fontsize=7)
    ax.set_xticks(x)
    ax.set_xticklabels([m["name"] for m in rows], rotation=30, ha="right", fontsize=8)
    ax.set_ylabel("value / measured")
    ax.axhline(1.0, color="k", lw=0.7)
    ax.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title("predicted vs measured, per metric")
    return _save(fig, path)


def breakdown_bar(breakdown: dict, path, names: dict | None = None) -> str:
    """The predicted step-time breakdown as one horizontal stacked bar (seconds)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(8, 2.2))
    left = 0.0
    for k, v in breakdown.items():
        if v <= 0:
            continue
        ax.barh([0], [v], left=left, label=(names or {}).get(k, k))
        left += v
    ax.set_yticks([])
    ax.set_xlabel("seconds per step (predicted, uncapped)")
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.45))
    ax.set_title("predicted step-time breakdown")
    return _save(fig, path)


def power_timeline(trace, window, predicted: dict, path, what="power_w") -> str:
    """Measured power (or temperature) over time per GPU with the predicted levels as lines.

    Args:
        trace: :class:`costmodel.readers.power_trace.PowerTrace`.
        window: (t0, t1) of the training window in the trace's time base (shaded), or None.
        predicted: label -> value drawn as horizontal lines (e.g. {"predicted avg": 540.0}).
        what: "power_w" or "temp_c".
    """
    plt = _plt()
    y = getattr(trace, what)
    t0 = float(np.nanmin(trace.t_unix))
    fig, ax = plt.subplots(figsize=(9, 4))
    for g in np.unique(trace.gpu):
        m = (trace.gpu == g) & np.isfinite(y)
        ax.plot(trace.t_unix[m] - t0, y[m], lw=0.6, label=f"GPU {int(g)}")
    for i, (lab, v) in enumerate(predicted.items()):
        if v is not None and np.isfinite(v):
            ax.axhline(v, color=f"C{i + 8}", ls="--", lw=1.2, label=lab)
    if window is not None:
        ax.axvspan(window[0] - t0, window[1] - t0, color="grey", alpha=0.12, label="training window")
    ax.set_xlabel("time (s)")
    ax.set_ylabel("power (W)" if what == "power_w" else "GPU temperature (C)")
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.grid(True, alpha=0.3)
    return _save(fig, path)
