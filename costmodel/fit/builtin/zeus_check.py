"""The Zeus (NSDI'23) power-limit check of the DVFS exponent of the built-in power sections.

Zeus measured whole DNN training runs (V100, A40, RTX6000, P100) under NVML power limits: time per
epoch and average power per limit.  Kept out of the DVFS fit (costmodel/fit/builtin/dvfs.py), they
bound gamma from above (:func:`fit_zeus_gamma`); the bound goes into every profile's ``fit.gamma_check``.
"""
from __future__ import annotations

import numpy as np
from scipy.optimize import least_squares, minimize_scalar

from .data import rel as _rel

ZEUS_GPUS = ("v100", "a40", "rtx6000", "p100")


def _r(x, sig=4):
    return float(f"{float(x):.{sig}g}")


def fit_zeus_gamma(table, frac=0.5, min_stretch=1.10, max_rms=0.03):
    """DVFS exponent of one GPU from a Zeus power-limit sweep table.

    Model per workload w and limit L (power.py's DVFS law applied to the epoch average):
    s = min(1, ((L - idle) / (k_w D_w))^(1/gamma)), P = idle + D_w s^gamma (= idle + (L - idle)/k_w when
    capped), T = T0_w (c_w / s + 1 - c_w).  idle = the lowest average power in the table (input-bound
    runs: clocks up, GPU mostly waiting), D_w, k_w (peak-to-average dynamic power) from the power
    column; gamma from the time column with c_w = 1.  Because T depends on c/gamma to first order, a
    sweep with c_w < 1 would need a smaller gamma: each sweep gives an upper bound, and gamma is the
    bound of the most clock-bound sweep.

    Args:
        table: :class:`costmodel.readers.zeus.ZeusTable`.
        frac: keep limits >= frac x the sweep's largest limit.
        min_stretch: keep sweeps whose time grows by at least this factor over the kept limits.
        max_rms: keep sweeps whose c = 1 fit has an RMS log-time error <= this.
    Returns:
        dict gamma, idle_w, n_sweeps (capped), n_used, quantiles of the per-sweep bounds, the workload
        that sets the bound, its RMS error, and the per-sweep bounds.
    """
    idle = min(r.average_power_w for r in table.rows)
    bounds = []
    for wk, rows in table.sweeps().items():
        if len(rows) < 4 or rows[0].average_power_w < 0.9 * rows[0].power_limit_w:
            continue  # never capped: the limit does not bind
        lmax = max(r.power_limit_w for r in rows)
        rows = [r for r in rows if r.power_limit_w >= frac * lmax]
        L = np.array([r.power_limit_w for r in rows])
        T = np.array([r.time_per_epoch_s for r in rows])
        P = np.array([r.average_power_w for r in rows])
        if len(rows) < 3 or T.max() / T[np.argmax(L)] < min_stretch:
            continue

        def pres(x):
            return (idle + np.minimum(np.exp(x[0]), (L - idle) / (1 + np.exp(x[1])))) / P - 1

        px = least_squares(pres, [np.log(max(P.max() - idle, 1.0)), np.log(0.05)]).x
        kd = np.exp(px[0]) * (1 + np.exp(px[1]))

        def tsse(g):
            s = np.minimum(1.0, np.maximum((L - idle) / kd, 1e-6) ** (1.0 / g))
            lr = np.log(T * s)
            lr = lr - lr.mean()
            return float(lr @ lr)

        o = minimize_scalar(tsse, bounds=(0.5, 10.0), method="bounded")
        rms = float(np.sqrt(o.fun / len(T)))
        if rms <= max_rms:
            bounds.append((float(o.x), rms, wk, float(T.max() / T[np.argmax(L)])))
    bounds.sort()
    g = np.array([b[0] for b in bounds])
    best = bounds[0]
    return dict(gamma=best[0], idle_w=idle, n_used=len(bounds), bound_rms_log_time=best[1],
                bound_workload="/".join(str(x) for x in best[2]), bound_stretch=best[3],
                q25=float(np.percentile(g, 25)), median=float(np.median(g)), max=float(g.max()), frac=frac,
                per_sweep=[_r(x, 3) for x in g])


def zeus_record(zfit):
    """The ``fit.gamma`` record of every profile from the per-GPU Zeus fits."""
    return dict(
        data="Zeus NSDI'23 traces: time per epoch and average power vs NVML power limit (V100, A40, RTX6000, P100; "
             "6 DNN workloads x batch sizes)",
        method="per sweep: P = idle + min(D, (L - idle)/k) for the power column, T = T0/s with s = ((L - idle)/(k D))^"
               "(1/gamma) (compute-bound fraction c = 1) for the time column, limits >= 50 % of the sweep's largest; a "
               "sweep with c < 1 needs a smaller gamma, so each sweep bounds gamma from above and the GPU's value is "
               "the bound of its most clock-bound sweep; the catalog uses the median of the four GPUs",
        per_gpu={g: dict(gamma=_r(z["gamma"], 3), n_sweeps_used=z["n_used"], bound_workload=z["bound_workload"],
                         bound_time_stretch=_r(z["bound_stretch"], 3), bound_rms_log_time=_r(z["bound_rms_log_time"], 3),
                         per_sweep_q25_median_max=[_r(z["q25"], 3), _r(z["median"], 3), _r(z["max"], 3)],
                         idle_w=_r(z["idle_w"])) for g, z in zfit.items()},
        median_of="v100, a40, rtx6000, p100", inputs=[_rel(f"zeus_{g}") for g in ZEUS_GPUS],
        note="the data do not identify gamma below the bound (the time stretch depends on c/gamma); physics gives "
             "gamma >= 1 (P_dyn ~ V^2 f, V non-decreasing in f). Limits under 50 % of the largest give lower local "
             "exponents (voltage floor); 60 % gives larger ones.")
