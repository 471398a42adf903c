"""A power or temperature trace beside a training log: the window of the log's kept iterations in the
trace's time base, the capture's GPUs against the cluster's, and the measured figures over the window.

Split from :mod:`costmodel.compare`, which builds the metrics from them.
"""
from __future__ import annotations

import math

import numpy as np

from .errors import InputError
from .readers.clock_events import throttle_shares
from .readers.power_trace import misread_units

PEAK_PERCENTILE = 95.0


def training_window(iter_t_unix, step_time_s: float, trace_t_unix, absolute: bool, util=None, iterations=None):
    """(t0, t1, how) of the kept training iterations in the trace's time base (``iterations``: their
    iteration numbers, which give the steps a log without timestamps covers).

    With wall-clock times on both sides: from the first kept record minus one logged interval (a
    Megatron record is printed at the end of its interval) to the last kept record.  Otherwise (a
    log without timestamps, or a trace in seconds from its start): the span of samples with GPU
    utilisation >= 50 % (``util``), which is what a run's steady phase looks like from the GPU.
    Raises:
        InputError: absolute times that do not overlap (names both ranges), or no way to align.
    """
    t = np.asarray(iter_t_unix, float)
    tt = np.asarray(trace_t_unix, float)
    if absolute and t.size and np.isfinite(t).all():
        lo = float(t.min()) - step_time_s * max(1.0, _records_interval(t, step_time_s))
        hi = float(t.max())
        a, b = max(lo, float(np.nanmin(tt))), min(hi, float(np.nanmax(tt)))
        if b < a:
            from datetime import datetime
            f = lambda x: datetime.fromtimestamp(x).strftime("%Y-%m-%d %H:%M:%S")
            raise InputError("--power", "", f"the power trace covers {f(np.nanmin(tt))} .. {f(np.nanmax(tt))}, the log's "
                             f"kept iterations {f(lo)} .. {f(hi)}: they do not overlap (wrong file, or clocks in "
                             "different time zones)")
        # one snapshot inside the window (nvidia-smi -q taken once): the window is that instant
        share = (b - a) / (hi - lo) if hi > lo else 1.0
        part = (f"; the trace covers only {share:.0%} of the kept iterations' {hi - lo:.0f} s: its power is of "
                "that part" if b > a and share < 0.9 else "")
        return a, (b if b > a else a + 1e-3), "log timestamps" + part
    if util is not None and np.isfinite(util).any():
        busy = np.asarray(util, float) >= 50
        if busy.any():
            a, b = float(tt[busy].min()), float(tt[busy].max())
            run_s = _run_span_s(t, step_time_s, iterations)
            known = math.isfinite(run_s) and run_s > 0
            part = (f"; its {b - a:.0f} s of work cover at most {(b - a) / run_s:.0%} of the kept iterations' "
                    f"{run_s:.0f} s: with no common clock nothing shows it is this run's (check the file)"
                    if known and b - a < 0.5 * run_s else
                    # the busy span of another (longer) job, or of several: its average is not this run's
                    f"; its {b - a:.0f} s of work span {(b - a) / run_s:.1f} x the kept iterations' {run_s:.0f} s: "
                    "with no common clock nothing shows which part is this run's (check the file; a trace of this "
                    "run alone, or one with wall-clock times, aligns)" if known and b - a > 2.0 * run_s else "")
            return a, b, "samples at >= 50 % GPU utilisation (no common clock)" + part
    clock = ("the log has no timestamps" if not (t.size and np.isfinite(t).all()) else
             "the trace's times count from its start, not wall-clock")
    busy = ("the trace has no utilisation column" if util is None or not np.isfinite(util).any() else
            f"no trace sample reaches 50 % GPU utilisation (at most {float(np.nanmax(util)):.0f} %)")
    raise InputError("--power", "", f"cannot align the trace with the log: {clock}, and {busy}")


def _run_span_s(t, step_time_s: float, iterations=None) -> float:
    """The kept iterations' span, s: their wall clock; else the steps they cover (the iteration numbers'
    range plus one logged interval: a log prints every N steps) x the step; else their count x the step."""
    if t.size > 1 and np.isfinite(t).all():
        return float(t.max() - t.min())
    it = np.asarray(iterations if iterations is not None else [], dtype=float)
    it = it[np.isfinite(it)]
    if it.size > 1:
        interval = float(np.median(np.diff(np.sort(it)))) or 1.0
        return (float(it.max() - it.min()) + interval) * step_time_s
    return t.size * step_time_s


def capture_gpu_check(trace, cluster, allow_override: bool = False) -> list:
    """The capture's tool's vendor and its device names against the cluster's GPU
    (costmodel.fit.assembly.gpu_key_for).

    Returns:
        warnings: a device name that matches no catalog GPU; with ``allow_override``, a mismatch.
    Raises:
        InputError: the capture comes from another vendor's tool (amd-smi on an NVIDIA cluster) or names
            another catalog GPU than the cluster's (its measured power would be compared with another
            GPU's prediction), unless ``allow_override``.
    """
    from .fit.assembly import gpu_key_for
    from .readers.registry import REGISTRY
    out = []
    # the vendor whose GPUs the capture's tool reads (its Format's): it reads only that vendor's driver
    fmt = REGISTRY.get(trace.source_format)
    vendor = fmt.vendor if fmt else None
    if vendor and vendor != cluster.gpu.vendor:
        msg = (f"{trace.path or 'the capture'} is {trace.source_format} output, from an {vendor.upper()} GPU; the "
               f"cluster {cluster.key} has {cluster.gpu.key} ({cluster.gpu.vendor.upper()})")
        if not allow_override:
            raise InputError("--power", "", msg + ": pass the capture's cluster, or --allow-override to compare anyway")
        out.append("--power: " + msg)
    keys = {name: gpu_key_for(name) for name in trace.device_names}
    # only a capture of the cluster's GPU (or an unnamed one) has its watts read against this GPU's TDP:
    # an A10's 150 W under an H100's 700 W is another GPU, not a kW column
    if all(k == cluster.gpu.key for k in keys.values()):
        bad = misread_units(trace, cluster.gpu.tdp_w, cluster.gpu.devices_per_package)
        if bad:
            raise InputError("--power", "", f"{trace.path or 'the capture'}: {bad}")
    for name, key in keys.items():
        if key is None:
            out.append(f"--power: the capture's GPU {name!r} matches no catalog GPU; compared with the cluster's "
                       f"{cluster.gpu.key}")
        elif key != cluster.gpu.key:
            msg = (f"{trace.path or 'the capture'} was taken on {name!r} ({key}), the cluster {cluster.key} has "
                   f"{cluster.gpu.key}")
            if not allow_override:
                raise InputError("--power", "", msg + ": pass the capture's cluster, or --allow-override to compare anyway")
            out.append("--power: " + msg)
    return out


def trace_coverage_notes(n_gpus: int, span_s: float, step_time_s: float, cluster) -> list:
    """What a power capture aligned with a run covers, where too little to stand for it: fewer GPUs than
    the run has on a node (its figures are those GPUs', not the node's), or under 3 of the run's steps
    (its average is not a step's: a step's phases draw apart).  ``cluster``: the run's ClusterSpec."""
    out = []
    per_node = min(cluster.gpus_per_node, cluster.num_gpus)
    if 0 < n_gpus < per_node:
        out.append(f"--power: the capture holds {n_gpus} GPU(s) of the run's {per_node} a node: its figures are "
                   "those GPUs', not the run's (capture every GPU of a node)")
    elif 0 < n_gpus < cluster.num_gpus:
        out.append(f"--power: the capture holds {n_gpus} of the run's {cluster.num_gpus} GPUs: the measured energy "
                   f"per token and samples/(s.MJ) take their mean power for every GPU of the run")
    if math.isfinite(step_time_s) and step_time_s > 0 and span_s < 3 * step_time_s:
        out.append(f"--power: the aligned capture spans {span_s:.0f} s, under 3 steps of {step_time_s:.1f} s: its "
                   "average is not a step's (capture several steps)")
    return out


def _records_interval(t, step_time_s):
    """Iterations between consecutive log records (log interval), from their spacing; 1 if unknown."""
    if t.size < 2 or not step_time_s > 0:
        return 1.0
    return max(1.0, round(float(np.median(np.diff(np.sort(t)))) / step_time_s))


#: median GPU utilisation (nvidia-smi's utilization.gpu: the share of time a kernel ran) under which a
#: capture aligned with training steps is taken as idle: every step launches kernels back to back
IDLE_UTIL_PCT = 5.0
#: utilisation readings the idle rule needs: a snapshot or two (nvidia-smi -q) may fall in a pause
IDLE_MIN_SAMPLES = 10


#: a GPU idle (under IDLE_UTIL_PCT) for this many steps in a row marks a pause between iterations (a
#: checkpoint write, an evaluation): every GPU launches kernels within each of its steps, spinning ones
#: included while it waits for a peer, so no step leaves one idle that long
PAUSE_MIN_STEPS = 2.0


def pause_spans(trace, m, step_time_s: float) -> list:
    """(start, end) Unix-s intervals, disjoint and sorted, inside the samples ``m`` (bool over the trace)
    over which one GPU's utilisation stays under :data:`IDLE_UTIL_PCT` for at least :data:`PAUSE_MIN_STEPS` steps of
    ``step_time_s`` s; [] without a utilisation column or a step time."""
    if trace.util_gpu_pct is None or not step_time_s > 0:
        return []
    spans = []
    for g in np.unique(trace.gpu[m]):
        k = np.flatnonzero(m & (trace.gpu == g))
        k = k[np.argsort(trace.t_unix[k], kind="stable")]
        idle = np.concatenate(([False], trace.util_gpu_pct[k] < IDLE_UTIL_PCT, [False]))
        edges = np.flatnonzero(np.diff(idle.astype(np.int8)))
        for a, b in zip(edges[::2], edges[1::2] - 1):      # runs of idle samples, first and last index
            t_a, t_b = float(trace.t_unix[k[a]]), float(trace.t_unix[k[b]])
            if t_b - t_a >= PAUSE_MIN_STEPS * step_time_s:
                spans.append((t_a, t_b))
    merged = []             # one pause seen idle on several GPUs is one interval
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def trace_metrics(trace, t0: float, t1: float, step_time_s: float = float("nan")) -> tuple[dict, list]:
    """Measured power/temperature metrics over [t0, t1] and a per-GPU table (hottest first), without
    the pauses between iterations (:func:`pause_spans`, ``step_time_s`` the log's step, s) whose samples
    leave at least half the window: the log's step times leave the pauses out too.

    Returns:
        ({avg_power_w, peak_power_w, max_temp_c, sm_clock_mhz, n_samples, n_gpus, gpus (the captured indices),
        pauses: None or {n, seconds, share (of the window's samples), avg_power_w (with them)}}, per-GPU rows
        {gpu, avg_power_w, peak_power_w, max_temp_c, sm_clock_mhz, n, throttle}); NaN where the trace
        lacks a column; ``throttle``: throttling reason -> share of the GPU's samples it was active in
        (costmodel.readers.clock_events), None when the trace has no clock-event field.
    Raises:
        InputError: no sample in the window, or the captured GPUs idle in it (median utilisation under
            :data:`IDLE_UTIL_PCT` over :data:`IDLE_MIN_SAMPLES` readings or more).
    """
    m = (trace.t_unix >= t0) & (trace.t_unix <= t1)
    if not m.any():
        raise InputError("--power", "", "no power sample inside the training window")
    util = _finite(trace.util_gpu_pct[m]) if trace.util_gpu_pct is not None else np.array([])
    if util.size >= IDLE_MIN_SAMPLES and float(np.median(util)) < IDLE_UTIL_PCT:
        # a training step keeps its GPUs busy: a capture idle throughout was taken elsewhere or at another time
        raise InputError("--power", "", f"the captured GPUs sat idle while the log's kept iterations ran (median "
                         f"utilisation {float(np.median(util)):.0f}% over {int(m.sum())} samples, mean power "
                         f"{_nanmean(trace.power_w[m]):.0f} W): the trace is of other GPUs or another time, or its "
                         "utilisation column is not measured there (nvidia-smi reads 0 under MIG and on some virtual "
                         "machines): capture utilization.gpu where it reads")
    pauses = None
    spans = pause_spans(trace, m, step_time_s)
    if spans:
        out = np.zeros_like(m)
        for a, b in spans:
            out |= m & (trace.t_unix >= a) & (trace.t_unix <= b)
        if out.sum() <= 0.5 * m.sum():
            pauses = dict(n=len(spans), seconds=sum(b - a for a, b in spans), share=float(out.sum() / m.sum()),
                          avg_power_w=_nanmean(trace.power_w[m]))
            m = m & ~out
    rows = []
    for g in np.unique(trace.gpu[m]):
        k = m & (trace.gpu == g)
        rows.append(dict(gpu=int(g), avg_power_w=_nanmean(trace.power_w[k]),
                         peak_power_w=_nanpct(trace.power_w[k], PEAK_PERCENTILE), max_temp_c=_nanmax(trace.temp_c[k]),
                         sm_clock_mhz=_nanmedian(trace.sm_clock_mhz[k]), n=int(k.sum()),
                         throttle=(throttle_shares([trace.clock_events[i] for i in np.flatnonzero(k)])
                                   if trace.clock_events is not None else None)))
    rows.sort(key=lambda r: (-(r["max_temp_c"] if np.isfinite(r["max_temp_c"]) else -1e9), -r["avg_power_w"]))
    agg = dict(avg_power_w=_nanmean([r["avg_power_w"] for r in rows]),
               peak_power_w=_nanpct(trace.power_w[m], PEAK_PERCENTILE), max_temp_c=_nanmax(trace.temp_c[m]),
               sm_clock_mhz=_nanmedian(trace.sm_clock_mhz[m]), n_samples=int(m.sum()), n_gpus=len(rows),
               gpus=sorted(r["gpu"] for r in rows), pauses=pauses)
    return agg, rows


def _finite(x):
    x = np.asarray(x, float)
    return x[np.isfinite(x)]


def _nanmean(x):
    f = _finite(x)
    return float(f.mean()) if f.size else float("nan")


def _nanmax(x):
    f = _finite(x)
    return float(f.max()) if f.size else float("nan")


def _nanmedian(x):
    f = _finite(x)
    return float(np.median(f)) if f.size else float("nan")


def _nanpct(x, q):
    f = _finite(x)
    return float(np.percentile(f, q)) if f.size else float("nan")
