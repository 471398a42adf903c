"""The ``power:`` section of a profile: coefficients per utilisation, idle power and the DVFS exponent."""
from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares

from costmodel.specs import GpuSpec
from costmodel.specs.params import POWER_TERMS

from .measurements import FitReport, Measurements
from .primitives import median_of, quality, round_sig

# NVML clock event reasons that mean the SM clock was held below what the load asked for (nvml.h:
# nvmlClocksEventReasonSwPowerCap 0x4, HwSlowdown 0x8, SwThermalSlowdown 0x20, HwThermalSlowdown 0x40,
# HwPowerBrakeSlowdown 0x80); samples with any of them are left out of the unthrottled power fit
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
EDGE_TRIM = 0.2        # fraction of a phase window dropped at each end (the monitor lags the kernels)
MIN_PHASE_SAMPLES = 3  # samples a phase needs to count in the power fit
MIN_IDLE_SAMPLES = 20  # idle samples an idle-only fit needs: a median robust to a few transients
#: the profile's power coefficients in the order of the fit's design matrix (costmodel.specs.params.POWER_TERMS)
NAMES = ("idle_w",) + tuple(t.key for t in POWER_TERMS)


def _phase_samples(meas: Measurements):
    """Per suite phase: (phase record, samples of its slot inside the trimmed window, host)."""
    out = []
    for s in meas.suites:
        samples = {}
        for r in s["sample"]:
            samples.setdefault((r["host"], r["slot"]), []).append(r)
        for ph in s["phase"]:
            rows = samples.get((ph["host"], ph["slot"]), [])
            t0, t1 = ph["t_start_unix"], ph["t_end_unix"]
            cut = EDGE_TRIM * (t1 - t0)
            inside = [r for r in rows if t0 + cut <= r["t_unix"] <= t1 - cut and r["power_w"] is not None]
            out.append((ph, inside))
    return out


def fit_power_section(meas: Measurements, gpu: GpuSpec, base: dict, report: FitReport) -> dict | None:
    """``power:`` coefficients from suite phases (median power of each phase window, edges trimmed).

    Model (costmodel/power.py): P = idle_w + flop_w u_flop + hbm_w u_hbm + link_w u_link + spin_w u_spin
    with u_flop = achieved FLOP/s / datasheet peak of the phase's dtype, u_hbm = achieved HBM B/s /
    datasheet bandwidth, u_link = achieved busbw / NVLink bandwidth, u_spin = 1 while the GPU waits
    for a peer in NCCL (the ``wait`` benchmark's ``nccl_wait`` phase; its ``host_wait`` phase, a GPU
    with no kernel, counts as idle).  ``basis`` says which coefficients were fitted here and which
    were kept from the base profile (with the base's own basis).  Phases whose samples show a
    power-cap or thermal clock event (:data:`THROTTLE_MASK`) or a lowered power limit are left out:
    their power is the cap, not the demand.  Bounded linear least squares (all coefficients >= 0);
    a coefficient whose utilisation never varies in the data is held at the base profile's value.
    static_w: the base profile's share of idle_w (:func:`_static_w`).  gamma: from the power-limit
    phases, least squares of log(P - static_w) = log k + gamma log(f_sm).
    Without suite phases, idle_w comes from trace samples at 0 % utilisation.
    """
    bp = dict(base.get("power") or {})
    rows, X, y = [], [], []
    limit_pts = []
    for ph, smp in _phase_samples(meas):
        if len(smp) < MIN_PHASE_SAMPLES:
            continue
        p_w = median_of(smp, "power_w")
        if ph["name"].startswith("power_limit"):
            limit_pts.append((ph["power_limit_w"], median_of(smp, "sm_clock_mhz"), p_w))
            continue
        throttled = any((r.get("clock_event_reasons") or 0) & THROTTLE_MASK for r in smp)
        if throttled:
            continue
        peak = gpu.peak_flops.get(ph.get("dtype") or "bf16", max(gpu.peak_flops.values()))
        u = [(ph["flops_per_s"] or 0.0) / peak, (ph["hbm_bytes_per_s"] or 0.0) / gpu.hbm_bytes_per_s,
             (ph["link_bytes_per_s"] or 0.0) / (gpu.nvlink_bytes_per_s or 1.0), float(ph.get("spin") or 0.0)]
        X.append([1.0] + u)
        y.append(p_w)
        rows.append(ph["name"])
    sample_files = sorted({str(s.path) for s in meas.suites if s["sample"]})
    if len(y) >= 2:
        X, y = np.array(X), np.array(y)
        names = list(NAMES)
        free = [0] + [j for j in range(1, len(names)) if np.ptp(X[:, j]) > 0.02]
        fixed = {j: float(bp.get(names[j], 0.0)) for j in range(1, len(names)) if j not in free}
        yy = y - sum(X[:, j] * v for j, v in fixed.items())
        r = least_squares(lambda c: X[:, free] @ c - yy, np.full(len(free), 100.0), bounds=(0.0, np.inf),
                          loss="soft_l1", f_scale=10.0)
        coef = dict(fixed)
        coef.update({j: float(c) for j, c in zip(free, r.x)})
        pred = X @ np.array([coef[j] for j in range(len(names))])
        rel = np.abs(pred / y - 1)
        ss = float(np.sum((y - y.mean()) ** 2))
        fit = dict(n_points=int(len(y)), r2=round_sig(1 - float(np.sum((pred - y) ** 2)) / ss, 4) if ss > 0 else None,
                   median_rel_err=round_sig(np.median(rel), 3), max_rel_err=round_sig(rel.max(), 3),
                   phases=sorted(set(rows)), held_at_base=[names[j] for j in fixed],
                   method="bounded soft_l1 least squares over unthrottled phase medians (edges trimmed "
                          f"{EDGE_TRIM:.0%}), P = idle + flop u_flop + hbm u_hbm + link u_link + spin u_spin "
                          "(u_spin = 1 in the wait benchmark's nccl_wait phase)",
                   inputs=sample_files)
        out = {names[j]: round_sig(coef[j]) for j in range(len(names))}
        basis = {names[j]: "fitted" if j in free else (bp.get("basis") or {}).get(names[j], "borrowed")
                 for j in range(len(names))}
        if fixed:
            report.warnings.append(f"power: {', '.join(names[j] for j in fixed)} not identifiable from the measured "
                                   "phases (utilisation never varied): kept from the base profile")
    else:
        said = len(report.warnings)
        idle = _trace_idle_w(meas, gpu, report)
        if idle is None:
            if meas.traces and len(report.warnings) == said:       # no reason of its own given
                n = sum(int(((tr.util_gpu_pct == 0) & np.isfinite(tr.power_w)).sum()) for tr in meas.traces)
                unpowered = [tr for tr in meas.traces if not np.isfinite(tr.power_w).any()]
                why = (f"{len(unpowered)} of {len(meas.traces)} trace(s) hold no power reading (no power column, "
                       "nvidia-smi's power.draw): " if unpowered else "")
                report.warnings.append(f"power: {why}the traces hold no benchmark phases and {n} idle sample(s) "
                                       f"(utilisation 0 % with a power reading): idle power needs >= {MIN_IDLE_SAMPLES}")
            return None
        held = [k for k in NAMES[1:] if k in bp]
        out = dict(idle_w=round_sig(idle[0]), **{k: bp[k] for k in held})
        basis = dict({k: (bp.get("basis") or {}).get(k, "borrowed") for k in held}, idle_w="fitted")
        fit = dict(n_points=idle[1], method="median power of samples at utilization.gpu == 0 above the lowest SM "
                                            "clock (a GPU a process holds)",
                   held_at_base=held, inputs=idle[2])
        report.warnings.append("power: only idle power is measurable from the traces (no benchmark phases): "
                               f"{', '.join(held)} kept from the base profile")
    static = _static_w(bp, out, basis)
    gamma_fit = None
    pts = [(lim, f, p) for lim, f, p in limit_pts if np.isfinite(f) and p > out["idle_w"] + 5]
    if len(pts) >= 3:
        f = np.array([q[1] for q in pts])
        pw = np.array([q[2] for q in pts]) - static
        A = np.c_[np.ones(len(f)), np.log(f)]
        (c0, gam), *_ = np.linalg.lstsq(A, np.log(pw), rcond=None)
        res = np.exp(A @ [c0, gam]) / pw - 1
        gamma_fit = dict(n_points=len(pts), max_rel_err=round_sig(np.abs(res).max(), 3),
                         limits_w=[round_sig(q[0]) for q in pts],
                         method="least squares of log(P - static_w) on log(SM clock) over the power-limit phases")
        out["gamma"] = round_sig(gam)
        basis["gamma"] = "fitted"
    else:
        out["gamma"] = bp.get("gamma")
        report.warnings.append("power.gamma: no power-limit sweep in the inputs (needs the right to set limits): "
                               "kept from the base profile")
    fit["gamma"] = gamma_fit or dict(kept_from="base profile")
    basis.setdefault("gamma", (bp.get("basis") or {}).get("gamma", "borrowed"))
    if "v_floor_clock_ratio" in bp:
        out["v_floor_clock_ratio"] = bp["v_floor_clock_ratio"]
        basis["v_floor_clock_ratio"] = (bp.get("basis") or {}).get("v_floor_clock_ratio", "borrowed")
    out["basis"] = basis
    out["fit"] = fit
    # a value this fit did not measure says so: kept from the base profile, or derived from the idle
    # power fitted here (static_w)
    kept = set(fit.get("held_at_base") or ()) | ({"gamma"} if gamma_fit is None else set())

    def tag(k):
        return " (kept)" if k in kept else " (derived)" if k == "static_w" and basis.get(k) == "derived" else ""
    report.rows.append(("power", " ".join(f"{k} {out[k]}{tag(k)}"
                                          for k in NAMES[:1] + ("static_w",) + NAMES[1:] + ("gamma",) if k in out),
                        quality(fit)))
    return out


def _static_w(bp: dict, out: dict, basis: dict) -> float:
    """The section's static_w (W; costmodel/power.py): the base profile's share static_w / idle_w of
    the idle power just fitted, written into ``out`` and ``basis`` (derived); idle_w itself where the
    base has none (the whole idle power taken as clock-independent, as the loader does)."""
    if bp.get("static_w") is None or not bp.get("idle_w"):
        return out["idle_w"]
    out["static_w"] = round_sig(out["idle_w"] * bp["static_w"] / bp["idle_w"])
    basis["static_w"] = "derived" if basis.get("idle_w") == "fitted" else (bp.get("basis") or {}).get("static_w",
                                                                                                      "borrowed")
    return out["static_w"]


def _trace_idle_w(meas: Measurements, gpu: GpuSpec, report: FitReport | None = None):
    """(median power at 0 % utilisation, n samples, files) over the traces, or None (fewer than
    :data:`MIN_IDLE_SAMPLES`).  idle_w is a GPU inside a job between kernels (a process holds it, its
    clocks up: costmodel/power.py); a sample at the GPU's lowest SM clock (within 10 % of
    ``min_clock_mhz``) is a GPU no process holds (an H100's 70 W against 122 W in a job), left out,
    and said when that leaves too few."""
    vals, files, deep = [], set(), 0
    lowest = 1.1 * gpu.min_clock_mhz if gpu.min_clock_mhz else None
    for tr in meas.traces:
        m = (tr.util_gpu_pct == 0) & np.isfinite(tr.power_w)
        if lowest is not None:
            asleep = m & np.isfinite(tr.sm_clock_mhz) & (tr.sm_clock_mhz <= lowest)
            deep += int(asleep.sum())
            m &= ~asleep
        if m.any():
            vals.append(tr.power_w[m])
            files.add(str(tr.path))
    v = np.concatenate(vals) if vals else np.array([])
    if v.size < MIN_IDLE_SAMPLES and deep >= MIN_IDLE_SAMPLES and report is not None:
        report.warnings.append(f"power: the traces' {deep} idle sample(s) are at the lowest SM clock "
                               f"({gpu.min_clock_mhz:g} MHz): a GPU no process holds, below what a GPU waiting "
                               "inside a job draws (the model's idle_w): kept from the base profile (capture idle "
                               "samples while the job runs)")
    return (float(np.median(v)), int(v.size), sorted(files)) if v.size >= MIN_IDLE_SAMPLES else None
