"""The ``hbm:`` section of a profile: achieved over datasheet HBM bandwidth."""
from __future__ import annotations

import numpy as np

from costmodel.specs import GpuSpec

from .measurements import FitReport, Measurements
from .primitives import quality, round_sig


def fit_hbm_section(meas: Measurements, gpu: GpuSpec, report: FitReport) -> dict | None:
    """``hbm:`` efficiency = median achieved / datasheet bandwidth over the copy and triad records."""
    recs = [r for s in meas.suites for r in s["hbm"]]
    if not recs:
        return None
    eff = np.array([r["bytes_per_s"] for r in recs]) / gpu.hbm_bytes_per_s
    e = float(np.median(eff))
    rel = np.abs(eff / e - 1.0)
    fit = dict(n_points=len(recs), median_rel_err=round_sig(np.median(rel), 3), max_rel_err=round_sig(rel.max(), 3),
               by_op={op: round_sig(np.median(eff[[r["op"] == op for r in recs]])) for op in sorted({r["op"] for r in recs})},
               method="median of achieved / datasheet HBM bandwidth over copy and triad",
               inputs=sorted({str(s.path) for s in meas.suites}))
    report.rows.append(("hbm", f"efficiency {e:.3f}", quality(fit)))
    return dict(efficiency=round_sig(e), fit=fit)
