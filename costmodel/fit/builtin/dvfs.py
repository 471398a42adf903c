"""The DVFS curve of the built-in power sections: gamma and the voltage-floor clock, fitted to
locked-clock sweeps of LLM training stages (Perseus, SOSP'24: GPT-3 175B and BLOOM stages on A100 SXM).

Each sweep (one model's forward or backward pass at every SM clock from 1410 down to 855 MHz) gives
the pass's average power P = energy / time at each clock.  The model of costmodel/power.py,

    P(f) = P_0 + D g(f / f_max),  g(s) = s^gamma above the floor s_v, s_v^gamma s / s_v below,

is fitted to each sweep by least squares on relative residuals (P_0, D, s_v, gamma free; f_max the
sweep's highest clock, A100's maximum boost); the built-in value of gamma and of s_v is the median
over the sweeps.  Power-limit sweeps of whole training runs (Zeus) stay out of this fit: they check it.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares

from costmodel.power import dynamic_power_ratio


def fit_sweep(clock_mhz, power_w) -> dict:
    """Fit P = P_0 + D g(f / f_max) to one locked-clock sweep (arrays of equal length >= 5).

    Returns:
        dict p0_w, dyn_w (D), v_floor (s_v), gamma, f_max_mhz, knee_mhz, max_rel_err, n_points.
    Raises:
        ValueError: fewer than 5 points.
    """
    f = np.asarray(clock_mhz, dtype=np.float64)
    p = np.asarray(power_w, dtype=np.float64)
    if len(f) < 5:
        raise ValueError(f"a sweep needs >= 5 clocks, got {len(f)}")
    fmax = float(f.max())
    s = f / fmax

    def res(x):
        p0, d, sv, gam = x
        return (p0 + d * dynamic_power_ratio(s, gam, sv) - p) / p

    r = least_squares(res, [0.2 * p.max(), 0.8 * p.max(), 0.7, 2.5],
                      bounds=([0.0, 0.0, float(s.min()), 1.0], [p.max(), 3 * p.max(), 1.0, 6.0]))
    p0, d, sv, gam = r.x
    return dict(p0_w=float(p0), dyn_w=float(d), v_floor=float(sv), gamma=float(gam), f_max_mhz=fmax,
                knee_mhz=float(sv * fmax), max_rel_err=float(np.abs(res(r.x)).max()), n_points=len(f),
                min_energy_clock_mhz=None)


def fit_dvfs(sweeps: dict) -> dict:
    """Fit every sweep and take the medians.

    Args:
        sweeps: name -> list of costmodel.readers.PerseusRow (one pipeline stage is used: the
            profiles repeat the same stage for every stage index).
    Returns:
        dict gamma, v_floor (medians), per_sweep (name/pass -> :func:`fit_sweep` record with the clock
        of least energy per pass).
    """
    per = {}
    for name, rows in sweeps.items():
        stage = min(r.stage for r in rows)
        for instr in ("forward", "backward"):
            rr = sorted((r for r in rows if r.stage == stage and r.instruction == instr), key=lambda r: r.sm_clock_mhz)
            rec = fit_sweep([r.sm_clock_mhz for r in rr], [r.power_w for r in rr])
            rec["min_energy_clock_mhz"] = min(rr, key=lambda r: r.energy_j).sm_clock_mhz
            per[f"{name}/{instr}"] = rec
    return dict(gamma=float(np.median([r["gamma"] for r in per.values()])),
                v_floor=float(np.median([r["v_floor"] for r in per.values()])), per_sweep=per)
