"""The ``thermal:`` section of a profile: thermal resistance and time constant per slot."""
from __future__ import annotations

import numpy as np
from scipy.optimize import curve_fit

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
    Without a step response, traces with a power range of >= 50 W give R_th alone, as the slope of
    T on P over their samples (steady-state assumption), and tau is kept from the base.
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
    slopes, files, short = [], set(), []
    tau_base = (base.get("thermal") or {}).get("tau_s")
    for tr in meas.traces:
        for g in np.unique(tr.gpu):
            m = (tr.gpu == g) & np.isfinite(tr.power_w) & np.isfinite(tr.temp_c)
            # the slope reads steady temperatures: a capture shorter than 3 time constants has not
            # levelled off (its slope would make the GPU look 5-10x better cooled than it is)
            if m.sum() >= 20 and tau_base and float(np.ptp(tr.t_unix[m])) < 3 * float(tau_base):
                short.append(f"{tr.path} GPU {int(g)} ({float(np.ptp(tr.t_unix[m])):.0f} s)")
                continue
            if m.sum() >= 20 and np.ptp(tr.power_w[m]) >= 50:
                b, a = np.polyfit(tr.power_w[m], tr.temp_c[m], 1)
                slopes.append((int(g), float(b)))
                files.add(str(tr.path))
    if short:
        report.warnings.append(f"thermal: {len(short)} GPU capture(s) shorter than 3 x the base profile's tau "
                               f"({float(tau_base):.0f} s), not at steady temperature, not used: {', '.join(short[:3])}"
                               + (f" and {len(short) - 3} more" if len(short) > 3 else ""))
    if not slopes:
        return None
    r = float(np.median([b for _, b in slopes]))
    report.warnings.append("thermal.tau_s: no step response in the inputs (run the suite's sustained GEMM): kept "
                           "from the base; R_th is the slope of temperature on power (steady-state assumption)")
    report.rows.append(("thermal", f"r_th_c_per_w {r:.4f} (T-vs-P slope, {len(slopes)} GPUs)", "tau kept"))
    return dict(r_th_c_per_w=round_sig(r), tau_s=(base.get("thermal") or {}).get("tau_s"),
                fit=dict(method="least squares slope of temperature on power per GPU over the trace; median",
                         per_gpu=[dict(gpu=g, r_th_c_per_w=round_sig(b)) for g, b in slopes],
                         tau_s="kept from the base profile", inputs=sorted(files)))
