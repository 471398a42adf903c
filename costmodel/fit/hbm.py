"""The ``hbm:`` section of a profile: achieved over datasheet HBM bandwidth."""
from __future__ import annotations

import numpy as np

from costmodel.errors import FitError
from costmodel.specs import GpuSpec

from .measurements import FitReport, Measurements
from .primitives import quality, round_sig


#: the least HBM efficiency a GPU's copy and triad may show: they run at 0.81-0.88 of the datasheet in
#: the built-in profiles (hbm.efficiency, fitted on public copy/triad results); a fifth is host memory
#: (a CPU run: 0.007 of an H100's), a time in another unit or another GPU, never this one's HBM
HBM_EFF_MIN = 0.2


def fit_hbm_section(meas: Measurements, gpu: GpuSpec, report: FitReport) -> dict | None:
    """``hbm:`` efficiency = median achieved / datasheet bandwidth over the copy and triad records.

    The upper bound (1: no copy beats the datasheet) is the profile loader's (costmodel.specs.profile).

    Raises:
        FitError: the efficiency is under :data:`HBM_EFF_MIN`, naming the suite files.
    """
    recs = [r for s in meas.suites for r in s["hbm"]]
    if not recs:
        return None
    eff = np.array([r["bytes_per_s"] for r in recs]) / gpu.hbm_bytes_per_s
    e = float(np.median(eff))
    if e < HBM_EFF_MIN:
        files = ", ".join(sorted({str(s.path) for s in meas.suites if s["hbm"]}))
        raise FitError(f"{files}: hbm: the copies ran at {e:.3f} of {gpu.key}'s datasheet "
                       f"{gpu.hbm_bytes_per_s / 1e12:g} TB/s (median {e * gpu.hbm_bytes_per_s / 1e9:.3g} GB/s over "
                       f"{len(recs)} records), under the {HBM_EFF_MIN} no GPU's HBM runs at: host memory, times in "
                       "another unit, or another GPU's capture; nothing written")
    rel = np.abs(eff / e - 1.0)
    fit = dict(n_points=len(recs), median_rel_err=round_sig(np.median(rel), 3), max_rel_err=round_sig(rel.max(), 3),
               by_op={op: round_sig(np.median(eff[[r["op"] == op for r in recs]])) for op in sorted({r["op"] for r in recs})},
               method="median of achieved / datasheet HBM bandwidth over copy and triad",
               inputs=sorted({str(s.path) for s in meas.suites}))
    report.rows.append(("hbm", f"efficiency {e:.3f}", quality(fit)))
    return dict(efficiency=round_sig(e), fit=fit)
