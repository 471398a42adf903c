"""The ``moe:`` section of a profile: routed expert GEMMs against the batched-GEMM model."""
from __future__ import annotations

import numpy as np

from ..gemm import gemm_time_s
from ..specs.hardware import GpuSpec
from ..specs.params import GemmParams
from .measurements import FitReport, Measurements
from .primitives import GEMM_BYTES, round_sig

#: profile key of each suite mode (calibration/suite/moe_gemm.py)
_KEYS = {"grouped": "grouped_gemm_slowdown", "sequential": "sequential_gemm_slowdown"}


def _predicted_s(r: dict, gp: GemmParams, peak: float, gpu: GpuSpec, hbm_eff: float, group_s: float = 0.0) -> float:
    """What costmodel.compute charges for one ``moe_gemm`` record: a grouped GEMM as one batched GEMM
    of the mean rows over the local experts plus ``group_s`` per expert; one GEMM per expert (each its
    own launch and waves)."""
    c = np.asarray(r["counts"], dtype=np.float64)
    eb = GEMM_BYTES.get(r["dtype"], 4.0 if r["dtype"] == "fp32" else 2.0)
    if r["mode"] == "grouped":
        return float(gemm_time_s(c.mean(), r["n"], r["k"], len(c), peak, gpu.hbm_bytes_per_s, hbm_eff, gp, eb)
                     + len(c) * group_s)
    c = c[c > 0]
    return float(np.sum(gemm_time_s(c, r["n"], r["k"], 1.0, peak, gpu.hbm_bytes_per_s, hbm_eff, gp, eb)))


def fit_moe_section(meas: Measurements, gpu: GpuSpec, prof: dict, report: FitReport) -> dict | None:
    """``moe.grouped_gemm_slowdown`` / ``moe.sequential_gemm_slowdown``: median over the suite's
    ``moe_gemm`` records of each mode of measured time over what the cost model charges for the same
    routed counts with the profile's fitted GEMM of that dtype (:func:`_predicted_s`).  The ratio
    holds what the batched model of the mean count leaves out: uneven rows across a rank's experts,
    the grouped kernel's own scheduling.  None when the suite timed no routed expert GEMM, or no
    record has a GEMM fit and a datasheet peak for its dtype."""
    recs = [r for s in meas.suites for r in s["moe_gemm"] if r["time_s"] > 0 and sum(r["counts"]) > 0]
    # the base profile's per-group time (public data) stays part of the model the ratio is taken against
    group_s = float((prof.get("moe") or {}).get("grouped_gemm_group_s", 0.0))
    out, fit = {}, {}
    for mode, key in _KEYS.items():
        ratios = []
        for r in (x for x in recs if x["mode"] == mode):
            g, peak = prof.get("gemm", {}).get(r["dtype"]), gpu.peak_flops.get(r["dtype"])
            if not isinstance(g, dict) or peak is None:
                continue
            gp = GemmParams.from_entry(g)
            ratios.append(r["time_s"] / _predicted_s(r, gp, peak, gpu, float(prof["hbm"]["efficiency"]), group_s))
        if ratios:
            a = np.array(ratios)
            out[key] = round_sig(float(np.median(a)))
            fit[mode] = dict(n_points=len(a), range=[round_sig(float(a.min())), round_sig(float(a.max()))])
            report.rows.append((f"moe.{key}", f"{np.median(a):.3f}", f"n={len(a)}"))
    if not out:
        if recs:
            report.warnings.append("moe: no moe_gemm record has a GEMM fit and a datasheet peak of its dtype")
        return None
    if group_s:
        out["grouped_gemm_group_s"] = group_s
    out["fit"] = dict(fit, method="median of measured / modelled time (batched GEMM of the mean count, plus the base "
                                  "profile's grouped_gemm_group_s per expert, or one GEMM per expert)",
                      inputs=sorted({str(s.path) for s in meas.suites}))
    return out
