"""The ``overlap:`` section of a profile: GEMM slowdown while a collective runs."""
from __future__ import annotations

import numpy as np

from .measurements import FitReport, Measurements
from .primitives import round_sig


def fit_overlap_section(meas: Measurements, report: FitReport) -> dict | None:
    """``overlap.compute_slowdown``: median over the suite's overlap records of GEMM time while a
    collective runs on another stream over its time alone (>= 1: SMs and HBM shared with NCCL's
    kernels), with the communication slowdown beside it."""
    recs = [r for s in meas.suites for r in s["overlap"]]
    if not recs:
        return None
    g = np.array([r["gemm_overlapped_s"] / r["gemm_alone_s"] for r in recs])
    c = np.array([r["comm_overlapped_s"] / r["comm_alone_s"] for r in recs])
    fit = dict(n_points=len(recs), gemm_slowdown_range=[round_sig(g.min()), round_sig(g.max())],
               comm_slowdown=round_sig(np.median(c)), method="median of overlapped / alone time",
               inputs=sorted({str(s.path) for s in meas.suites}))
    med = float(np.median(g))
    report.rows.append(("overlap", f"compute_slowdown {med:.3f} comm_slowdown {np.median(c):.3f}",
                        f"n={len(recs)}"))
    if med < 1.0:
        # overlapped compute cannot outrun compute alone: a median below 1 is timing noise, kept in the fit
        fit["measured_median"] = round_sig(med)
        fit["note"] = "the measured median is below 1 (timing noise: overlap cannot speed compute up): 1 used"
    return dict(compute_slowdown=round_sig(max(med, 1.0)), fit=fit)
