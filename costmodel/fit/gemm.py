"""The ``gemm:`` section of a profile fitted to the suite's GEMM records."""
from __future__ import annotations

from costmodel.specs import GpuSpec

from .measurements import FitReport, Measurements
from .primitives import GEMM_BYTES, fit_gemm, fit_stats, gemm_entry, quality, warn_outliers


def fit_gemm_section(meas: Measurements, gpu: GpuSpec, hbm_eff: float, report: FitReport) -> dict:
    """``gemm:`` entries per dtype fitted to the suite's GEMM records (:func:`costmodel.fit.primitives.fit_gemm`).

    eta_max is bounded by 1 (the datasheet dense peak); every other factor comes from the tile/wave
    model.  Returns dtype -> entry (with ``fit``); dtypes with fewer than 4 shapes are skipped with a
    warning.
    """
    out = {}
    recs = [r for s in meas.suites for r in s["gemm"]]
    for dt in sorted({r["dtype"] for r in recs}):
        rows = [r for r in recs if r["dtype"] == dt]
        peak = gpu.peak_flops.get(dt)
        if peak is None:
            report.warnings.append(f"gemm.{dt}: {gpu.key} has no datasheet peak for {dt}: {len(rows)} records unused")
            continue
        if len(rows) < 4:
            report.warnings.append(f"gemm.{dt}: {len(rows)} shapes measured, the fit needs >= 4: kept from the base")
            continue
        pts = dict(b=[r["b"] for r in rows], m=[r["m"] for r in rows], n=[r["n"] for r in rows],
                   k=[r["k"] for r in rows], t=[r["time_s"] for r in rows])
        p, tm = fit_gemm(pts, peak, gpu.hbm_bytes_per_s, hbm_eff, gpu.num_sms, GEMM_BYTES.get(dt, 2.0), 1.0)
        fit = fit_stats(tm, pts["t"], sorted({str(s.path) for s in meas.suites}),
                        method="least_squares soft_l1 on log time; tile chosen among {64,128,256}^2; eta_max <= 1")
        warn_outliers(f"gemm.{dt}", tm, pts["t"], [f"{r['m']}x{r['n']}x{r['k']} (line {r['_line']})" for r in rows], report)
        out[dt] = gemm_entry(p, fit)
        report.rows.append((f"gemm.{dt}", f"eta_max {p.eta_max:.3f} k_half {p.k_half:.0f} tile {p.tile_m}x{p.tile_n}",
                            quality(fit)))
    return out
