"""The ``thermal:`` section of a profile: thermal resistance and time constant per slot."""
from __future__ import annotations

import numpy as np
from scipy.optimize import curve_fit, least_squares

from .measurements import FitReport, Measurements
from .primitives import median_of, round_sig


def _step(t, t0, dT, tau):
    return t0 + dT * (1.0 - np.exp(-t / tau))


def fit_thermal_section(meas: Measurements, base: dict, report: FitReport) -> dict | None:
    """``thermal:`` R_th and tau per slot from the suite's sustained-GEMM step response.

    Model (costmodel/thermal.py, first-order RC): after the load starts at t = 0,
    T(t) = T_0 + dT (1 - exp(-t / tau)) with dT = R_th (P_load - P_idle), fitted per slot by
    ``scipy.optimize.curve_fit``; P_idle is the median power of the slot's idle phase (or of the
    first second of the step), P_load the median over the step.  The profile keeps the median over
    slots and lists every slot (``per_slot``) so a cluster file can set ``cooling.slots[].r_th_scale``.
    Without a step response, monitor traces with a power range of >= 50 W give R_th and tau by the
    RC fit of :func:`_trace_fit`.
    """
    per_slot = []
    for s in meas.suites:
        samples = {}
        for r in s["sample"]:
            if r["temp_c"] is not None and r["power_w"] is not None:
                samples.setdefault((r["host"], r["slot"]), []).append(r)
        idle = {(ph["host"], ph["slot"]): ph for ph in s["phase"] if ph["name"] == "idle"}
        for ph in s["phase"]:
            if ph["name"] != "sustained_gemm":
                continue
            key = (ph["host"], ph["slot"])
            rows = sorted((r for r in samples.get(key, []) if ph["t_start_unix"] <= r["t_unix"] <= ph["t_end_unix"]),
                          key=lambda r: r["t_unix"])
            if len(rows) < 20:
                report.warnings.append(f"thermal: slot {key[1]} on {key[0]}: {len(rows)} samples in the sustained "
                                       "GEMM, the step fit needs >= 20")
                continue
            t = np.array([r["t_unix"] for r in rows]) - ph["t_start_unix"]
            T = np.array([r["temp_c"] for r in rows], float)
            P = np.array([r["power_w"] for r in rows], float)
            ip = idle.get(key)
            idle_rows = [r for r in samples.get(key, []) if ip and ip["t_start_unix"] <= r["t_unix"] <= ip["t_end_unix"]]
            p_idle = median_of(idle_rows, "power_w") if idle_rows else float(np.median(P[t < 1.0])) if (t < 1.0).any() else P[0]
            p_load = float(np.median(P[t > 0.2 * t[-1]]))
            try:
                (T0, dT, tau), _ = curve_fit(_step, t, T, p0=[T[0], max(T[-1] - T[0], 1.0), max(t[-1] / 3, 1.0)],
                                             bounds=([-50, 0, 0.5], [150, 150, 1e5]), maxfev=20000)
            except (RuntimeError, ValueError) as e:
                report.warnings.append(f"thermal: slot {key[1]} on {key[0]}: step fit failed ({e})")
                continue
            Tm = _step(t, T0, dT, tau)
            ss = float(np.sum((T - T.mean()) ** 2))
            per_slot.append(dict(host=key[0], slot=key[1], r_th_c_per_w=round_sig(dT / max(p_load - p_idle, 1.0)),
                                 tau_s=round_sig(tau), t0_c=round_sig(T0), delta_t_c=round_sig(dT),
                                 p_idle_w=round_sig(p_idle), p_load_w=round_sig(p_load), n_points=len(t),
                                 r2=round_sig(1 - float(np.sum((T - Tm) ** 2)) / ss, 4) if ss > 0 else None,
                                 max_abs_err_c=round_sig(np.abs(T - Tm).max(), 3),
                                 run_s=round_sig(t[-1]), extrapolated=bool(t[-1] < 3 * tau)))
    files = sorted({str(s.path) for s in meas.suites if s["sample"]})
    if per_slot:
        r = float(np.median([x["r_th_c_per_w"] for x in per_slot]))
        tau = float(np.median([x["tau_s"] for x in per_slot]))
        for x in per_slot:
            x["r_th_scale"] = round_sig(x["r_th_c_per_w"] / r, 3)
        if any(x["extrapolated"] for x in per_slot):
            report.warnings.append("thermal: the sustained GEMM ran shorter than 3 tau on some slots: their steady "
                                   "temperature is extrapolated by the fit (run longer with --sustain-s)")
        report.rows.append(("thermal", f"r_th_c_per_w {r:.4f} tau_s {tau:.0f} over {len(per_slot)} slots",
                            "R2 " + ", ".join(str(x["r2"]) for x in per_slot)))
        return dict(r_th_c_per_w=round_sig(r), tau_s=round_sig(tau),
                    fit=dict(method="curve_fit of T0 + dT (1 - exp(-t/tau)) per slot over the sustained GEMM; "
                                    "R_th = dT / (P_load - P_idle); profile value = median over slots",
                             per_slot=per_slot, inputs=files))
    return _trace_fit(meas, base, report)


def rc_response(t, P, T_start, t_amb_c, r_th, tau_s):
    """Temperature of a first-order RC (costmodel/thermal.py) driven by the power samples ``P`` (W) at
    times ``t`` (s), from ``T_start`` (C): each interval holds the mean of its two samples' power and
    relaxes towards ``t_amb_c + r_th P`` with time constant ``tau_s`` (exact where the power holds
    that mean through the interval).  Arrays of one GPU's samples, in time order; returns C."""
    out = np.empty(len(t))
    out[0] = T_start
    a = np.exp(-np.diff(t) / tau_s)
    target = t_amb_c + r_th * 0.5 * (P[1:] + P[:-1])
    for i in range(1, len(t)):
        out[i] = target[i - 1] + (out[i - 1] - target[i - 1]) * a[i - 1]
    return out


#: samples per GPU the RC fit integrates over at most: a longer trace is averaged into this many
#: equal time bins (an hour at 1 Hz: 0.9 s bins, far below any GPU's thermal time constant)
MAX_RC_POINTS = 4000


def _binned(t, P, T):
    """``(t, P, T)`` averaged into at most :data:`MAX_RC_POINTS` equal time bins (the empty ones dropped)."""
    if len(t) <= MAX_RC_POINTS:
        return t, P, T
    idx = np.minimum((t / (t[-1] / MAX_RC_POINTS)).astype(int), MAX_RC_POINTS - 1)
    n = np.bincount(idx, minlength=MAX_RC_POINTS)
    ok = n > 0
    return tuple((np.bincount(idx, weights=x, minlength=MAX_RC_POINTS) / np.maximum(n, 1))[ok] for x in (t, P, T))


def _fit_rc(t, P, T, tau_base):
    """(r_th, tau, t_amb, fitted T, tau fitted?) of one GPU's trace: least squares of
    :func:`rc_response` on its temperatures; tau kept at ``tau_base`` when the trace does not pin it
    (the fit runs into a bound: a trace with no transient)."""
    def resid(x, tau=None):
        return rc_response(t, P, T[0], x[0], x[1], tau if tau is not None else x[2]) - T
    lo, hi = [-40.0, 1e-4, 1.0], [100.0, 1.0, 3600.0]
    x0 = [float(np.min(T)), 0.05, float(tau_base or 100.0)]
    r = least_squares(resid, x0, bounds=(lo, hi))
    tau = float(r.x[2])
    if not (1.05 * lo[2] < tau < 0.95 * hi[2]) and tau_base:
        r = least_squares(lambda x: resid(x, float(tau_base)), x0[:2], bounds=(lo[:2], hi[:2]))
        return float(r.x[1]), float(tau_base), float(r.x[0]), resid(r.x, float(tau_base)) + T, False
    return float(r.x[1]), tau, float(r.x[0]), resid(r.x) + T, True


def _trace_fit(meas: Measurements, base: dict, report: FitReport) -> dict | None:
    """``thermal:`` from monitor traces (nvidia-smi, DCGM, rocm-smi): per GPU, R_th, tau and the inlet
    temperature of the first-order RC (:func:`rc_response`) fitted by least squares to the whole trace,
    its warm-up and cool-down included (a slope of temperature on power over such a trace reads about
    half the true R_th); a GPU whose power spans < 50 W is not used (no excitation).  The profile keeps
    the median over GPUs."""
    per_gpu, files, short = [], set(), []
    tau_base = (base.get("thermal") or {}).get("tau_s")
    for tr in meas.traces:
        for g in np.unique(tr.gpu):
            m = (tr.gpu == g) & np.isfinite(tr.power_w) & np.isfinite(tr.temp_c)
            order = np.argsort(tr.t_unix[m], kind="stable")
            t, P, T = (np.asarray(x[m], float)[order] for x in (tr.t_unix, tr.power_w, tr.temp_c))
            # a capture shorter than 3 time constants has not levelled off: its R_th rests on the
            # time constant the fit guesses with it
            if len(t) < 20:
                continue
            if tau_base and float(np.ptp(t)) < 3 * float(tau_base):
                short.append(f"{tr.path} GPU {int(g)} ({float(np.ptp(t)):.0f} s)")
                continue
            keep = np.concatenate(([True], np.diff(t) > 0))       # one sample per instant
            t, P, T = _binned(t[keep] - t[0], P[keep], T[keep])
            if len(t) < 20 or np.ptp(P) < 50:
                continue
            r_th, tau, t_amb, Tm, tau_fitted = _fit_rc(t, P, T, tau_base)
            ss = float(np.sum((T - T.mean()) ** 2))
            per_gpu.append(dict(gpu=int(g), r_th_c_per_w=round_sig(r_th), tau_s=round_sig(tau), tau_fitted=tau_fitted,
                                t_amb_c=round_sig(t_amb), n_points=len(t),
                                r2=round_sig(1 - float(np.sum((T - Tm) ** 2)) / ss, 4) if ss > 0 else None,
                                max_abs_err_c=round_sig(float(np.abs(T - Tm).max()), 3)))
            files.add(str(tr.path))
    if short:
        report.warnings.append(f"thermal: {len(short)} GPU capture(s) shorter than 3 x the base profile's tau "
                               f"({float(tau_base):.0f} s), not at steady temperature, not used: {', '.join(short[:3])}"
                               + (f" and {len(short) - 3} more" if len(short) > 3 else ""))
    if not per_gpu:
        return None
    r = float(np.median([x["r_th_c_per_w"] for x in per_gpu]))
    fitted_tau = [x["tau_s"] for x in per_gpu if x["tau_fitted"]]
    tau = float(np.median(fitted_tau)) if fitted_tau else tau_base
    if not fitted_tau:
        report.warnings.append("thermal.tau_s: the traces hold no transient that pins the time constant: kept from "
                               "the base (run the suite's sustained GEMM for a step response)")
    r2 = [x["r2"] for x in per_gpu if x["r2"] is not None]
    report.rows.append(("thermal", f"r_th_c_per_w {r:.4f} tau_s {float(tau):.0f} (RC fit of {len(per_gpu)} GPU "
                                   f"trace(s){'' if fitted_tau else '; tau kept'})",
                        f"n {sum(x['n_points'] for x in per_gpu)} R2 {min(r2) if r2 else '-'}.."
                        f"{max(r2) if r2 else '-'} max {max(x['max_abs_err_c'] for x in per_gpu):.2g} C"))
    return dict(r_th_c_per_w=round_sig(r), tau_s=round_sig(float(tau)) if tau is not None else None,
                fit=dict(method="least squares of a first-order RC driven by the sampled power (T_amb, R_th, tau per "
                                "GPU) over the whole trace; median over GPUs",
                         per_gpu=per_gpu, tau_s="fitted" if fitted_tau else "kept from the base profile",
                         inputs=sorted(files)))
