"""The ``gemm:`` section of a profile fitted to the suite's GEMM records."""
from __future__ import annotations

import numpy as np

from costmodel.errors import FitError
from costmodel.gemm import gemm_time_s
from costmodel.specs import GemmParams, GpuSpec

from .measurements import FitReport, Measurements
from .primitives import GEMM_BYTES, fit_gemm, fit_stats, gemm_entry, quality, warn_outliers


#: a GEMM fit whose median time error exceeds this is no fit (a good one: 2-6 %, costmodel/fit docs)
NO_FIT_MEDIAN_ERR = 0.5


#: how far above the datasheet dense peak a measured GEMM may run before it is refused: timer
#: granularity on a microsecond kernel and a boost clock a few per cent over the datasheet's
#: (the peak counts the boost clock, so a GEMM beyond it ran on another GPU or was timed wrongly)
PEAK_TOLERANCE = 0.02


def _suite_of(meas: Measurements, rec) -> str:
    """The path of the suite file that holds record ``rec`` (by identity)."""
    return next((str(su.path) for su in meas.suites if any(r is rec for r in su["gemm"])), "suite JSONL")


def _check_under_peak(meas: Measurements, dt: str, rows: list, peak: float, gpu: GpuSpec) -> None:
    """Refuse GEMM records of dtype ``dt`` that ran faster than ``peak`` (the datasheet dense peak,
    FLOP/s) by more than :data:`PEAK_TOLERANCE`: no kernel beats its GPU's peak, and the fit (eta_max
    <= 1) would clamp at 1 and write a table of another GPU's or of wrong times, as HBM copies above
    the datasheet are refused.

    Raises:
        FitError: naming the file, line, shape and rate of the fastest such record, and the count.
    """
    rate = [2.0 * r["b"] * r["m"] * r["n"] * r["k"] / r["time_s"] for r in rows]
    over = [i for i, x in enumerate(rate) if x > peak * (1.0 + PEAK_TOLERANCE)]
    if not over:
        return
    i = max(over, key=lambda j: rate[j])
    r = rows[i]
    shape = f"{r['m']}x{r['n']}x{r['k']}" + (f" (batch {r['b']})" if r["b"] != 1 else "")
    raise FitError(f"{_suite_of(meas, r)}:{r['_line']}: gemm {dt} {shape} ran at {rate[i] / 1e12:.0f} TFLOP/s, "
                   f"{rate[i] / peak:.2f}x {gpu.key}'s datasheet dense {dt} peak {peak / 1e12:g} TFLOP/s ({len(over)} of "
                   f"{len(rows)} {dt} GEMMs above it by more than {PEAK_TOLERANCE:.0%}): no GEMM beats the peak; "
                   "times too short (another unit, an unsynchronised timer) or another GPU's; nothing written")


#: spellings of a dtype that torch and NumPy use, and the name the catalog's peak tables give it
_DTYPE_SPELLINGS = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float32": "fp32", "float": "fp32",
                    "tfloat32": "tf32", "float8": "fp8", "float8_e4m3fn": "fp8", "e4m3": "fp8"}


def _catalog_dtypes() -> set:
    """The dtype names the catalog GPUs' dense peaks are given in (hardware/gpus/*.yaml peak_tflops), and
    those the suite times (calibration/suite/gemm.py DTYPES: bf16, fp16, fp32, fp8)."""
    from ..specs import list_gpus, load_gpu
    return {dt for key in list_gpus() for dt in load_gpu(key).peak_flops} | {"bf16", "fp16", "fp32", "fp8"}


def fit_gemm_section(meas: Measurements, gpu: GpuSpec, hbm_eff: float, report: FitReport) -> dict:
    """``gemm:`` entries per dtype fitted to the suite's GEMM records (:func:`costmodel.fit.primitives.fit_gemm`).

    eta_max is bounded by 1 (the datasheet dense peak); every other factor comes from the tile/wave
    model.  Returns dtype -> entry (with ``fit``); dtypes with fewer than 4 shapes are skipped with a
    warning.

    Raises:
        FitError: a dtype whose fit explains none of its times (R2 below 0 or median error above
            :data:`NO_FIT_MEDIAN_ERR`): another unit than seconds, or another GPU; a GEMM faster than
            the datasheet peak (:func:`_check_under_peak`).
    """
    out = {}
    recs = [r for s in meas.suites for r in s["gemm"]]
    for dt in sorted({r["dtype"] for r in recs}):
        rows = [r for r in recs if r["dtype"] == dt]
        peak = gpu.peak_flops.get(dt)
        if peak is None and dt not in _catalog_dtypes():
            # a spelling no GPU's peak table uses ('bfloat16'): its records would be lost unseen
            first = rows[0]
            where = _suite_of(meas, first)
            raise FitError(f"{where}:{first['_line']}: gemm dtype {dt!r} is no dtype "
                           f"name of the catalog ({', '.join(sorted(_catalog_dtypes()))}): write "
                           f"{_DTYPE_SPELLINGS.get(dt.lower(), 'one of them')!r}")
        if peak is None:
            report.warnings.append(f"gemm.{dt}: {gpu.key} has no datasheet peak for {dt}: {len(rows)} records unused")
            continue
        if len(rows) < 4:
            report.warnings.append(f"gemm.{dt}: {len(rows)} shapes measured, the fit needs >= 4: kept from the base")
            continue
        _check_under_peak(meas, dt, rows, peak, gpu)
        pts = dict(b=[r["b"] for r in rows], m=[r["m"] for r in rows], n=[r["n"] for r in rows],
                   k=[r["k"] for r in rows], t=[r["time_s"] for r in rows])
        p, tm = fit_gemm(pts, peak, gpu.hbm_bytes_per_s, hbm_eff, gpu.num_sms, GEMM_BYTES.get(dt, 2.0), 1.0)
        fit = fit_stats(tm, pts["t"], sorted({str(s.path) for s in meas.suites}),
                        method="least_squares soft_l1 on log time; tile chosen among {64,128,256}^2; eta_max <= 1")
        warn_outliers(f"gemm.{dt}", tm, pts["t"], [f"{r['m']}x{r['n']}x{r['k']} (line {r['_line']})" for r in rows], report)
        if (fit.get("r2") is not None and fit["r2"] < 0) or fit["median_rel_err"] > NO_FIT_MEDIAN_ERR:
            # the roofline explains the times worse than their mean: another unit, or not this GPU
            raise FitError(f"gemm.{dt}: the fit explains none of {len(rows)} measured times (R2 {fit['r2']}, median "
                           f"error {100 * fit['median_rel_err']:.0f}%, eta_max {p.eta_max:.3f}): times not in "
                           f"seconds, or not of a {gpu.name}? ({', '.join(fit['inputs'])}); nothing written")
        if p.eta_max >= 0.999:
            # every GEMM at or under the peak, yet the fit needs all of it: the largest shapes ran at the
            # datasheet peak, which no measured GPU sustains (the built-in profiles' eta_max: 0.29-0.86)
            report.warnings.append(f"gemm.{dt}: eta_max {p.eta_max:.3f} sits at its bound 1 (the datasheet dense "
                                   f"peak): the fastest GEMMs ran at {gpu.key}'s peak; check the times and the GPU "
                                   f"({', '.join(fit['inputs'])})")
        out[dt] = gemm_entry(p, fit, **_power_limited(meas, dt, p, peak, gpu, hbm_eff, report))
        report.rows.append((f"gemm.{dt}", f"eta_max {p.eta_max:.3f} k_half {p.k_half:.0f} tile {p.tile_m}x{p.tile_n}",
                            quality(fit)))
    return out


#: a sustained GEMM more than this far below the table's rate for its shape shows the table's
#: calls ran above the clock the power limit holds (the B200 burst/sustained gap is 18-25%, the
#: H200's 9%; run-to-run spread of the same GEMM on one GPU is ~1-2%)
BURST_GAP = 0.03


def _power_limited(meas: Measurements, dtype: str, p: GemmParams, peak: float, gpu: GpuSpec, hbm_eff: float,
                   report: FitReport) -> dict:
    """``power_limited`` of the fitted table (costmodel.specs.GemmParams): false when the suite's
    sustained GEMM of this dtype (calibration/suite/thermal.py, seconds back to back under the
    limit) runs more than :data:`BURST_GAP` below the rate the fitted table gives its shape, i.e.
    the table's short timed loops (5 + 20 calls a shape) ran above the sustained clock.  Without a
    sustained GEMM of the dtype: true (the suite's premise), with a warning."""
    runs = [ph for s in meas.suites for ph in s["phase"]
            if ph["name"] == "sustained_gemm" and ph.get("dtype") == dtype and ph.get("flops_per_s")]
    if not runs:
        report.warnings.append(f"gemm.{dtype}: no sustained GEMM of this dtype in the inputs: its table is taken as "
                               "measured under the power limit (power_limited: true)")
        return dict(power_limited=True)
    ratios = []
    for ph in runs:
        m, n, k = (float(ph[x]) for x in ("m", "n", "k"))
        t = float(gemm_time_s(m, n, k, 1.0, peak, gpu.hbm_bytes_per_s, hbm_eff, p, GEMM_BYTES.get(dtype, 2.0)))
        ratios.append(ph["flops_per_s"] / (2.0 * m * n * k / t))
    r = float(np.median(ratios))
    burst = r < 1.0 - BURST_GAP
    report.rows.append((f"gemm.{dtype} power", f"sustained / table rate {r:.3f} over {len(ratios)} run(s)",
                        "burst: power_limited false" if burst else "power-limited"))
    return dict(power_limited=not burst,
                power_check=dict(sustained_over_table=round(r, 4), n_runs=len(ratios), gap=BURST_GAP,
                                 method="median over the suite's sustained GEMMs of their FLOP/s over the fitted "
                                        "table's for the same shape; below 1 - gap the table ran above the "
                                        "sustained clock"))
