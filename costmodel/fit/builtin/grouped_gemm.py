"""``moe.grouped_gemm_group_s``: the time each group adds to a multi-stream grouped GEMM.

Transformer Engine's grouped GEMM (Megatron-core's TEGroupedMLP, ``--moe-grouped-gemm``) runs on Hopper
as one cuBLAS GEMM per local expert, issued one after another over several CUDA streams (TE pull
request 2045: "the current Multi-Stream implementation").  The GEMMs overlap on the GPU, so their
tensor work takes what one batched GEMM of the same rows takes (costmodel/gemm.py); what they add is
per group: its launch and its own tile schedule.  So

    t_grouped(g, m, n, k) = t_batched(g, m, n, k) + g t_group,

fitted to TE's benchmark of two shapes of equal FLOPs that differ in the group count
(hardware/profiles/data/te_grouped_gemm_h100_pr2045.md, H100, BF16): t_group is the median over the
shapes of (measured - batched model) / g, the batched model being the profile's own BF16 GEMM fit.
The two shapes agree on t_group within a few percent in each TE version, which is what makes it a
per-group cost rather than an efficiency factor (an efficiency would scale both shapes alike).
"""
from __future__ import annotations

import re

import numpy as np

from costmodel.gemm import gemm_time_s
from costmodel.specs.params import GemmParams

_HEADER = re.compile(r"^Shape\(g,m,n,k\)\s*\|(?P<cols>.*)$")
_ROW = re.compile(r"^\((?P<g>\d+), (?P<m>\d+), (?P<n>\d+), (?P<k>\d+)\)\s*\|(?P<cells>.*)$")


def read_grouped_gemm_tables(path) -> list[dict]:
    """Rows of the ``Shape(g,m,n,k) | COLUMN (TFLOPs) | ...`` tables: dicts g, m, n, k, line and
    ``tflops``: column name (its text before the parenthesis) -> TFLOP/s.

    Raises:
        ValueError: a row before any header, a cell that is not a number, or no row at all (the
            message names the file and line).
    """
    rows, cols = [], None
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            s = line.strip()
            h = _HEADER.match(s)
            if h:
                cols = [c.split("(")[0].strip() for c in h["cols"].split("|")]
                continue
            r = _ROW.match(s)
            if not r:
                continue
            if cols is None:
                raise ValueError(f"{path}:{i}: a shape row before any 'Shape(g,m,n,k) | ...' header")
            cells = [c.strip() for c in r["cells"].split("|")]
            tf = {}
            for name, c in zip(cols, cells):
                if c.endswith("%"):
                    continue                                  # the speed-up column
                try:
                    tf[name] = float(c)
                except ValueError:
                    raise ValueError(f"{path}:{i}: {name} cell {c!r} is not a number") from None
            rows.append(dict(g=int(r["g"]), m=int(r["m"]), n=int(r["n"]), k=int(r["k"]), tflops=tf, line=i))
    if not rows:
        raise ValueError(f"{path}: no '(g, m, n, k) | TFLOP/s ...' row")
    return rows


def per_group_s(rows: list[dict], column: str, gemm: dict, peak_flops: float, hbm_bytes_per_s: float,
                hbm_efficiency: float) -> tuple[float, list[dict]]:
    """Median over ``rows`` of (measured - batched model) / g for ``column`` (s), and the per-row
    record.  ``gemm``: the profile's BF16 GEMM entry (costmodel.specs.GemmParams fields).

    Raises:
        ValueError: a row without ``column``.
    """
    gp = GemmParams.from_entry(gemm)
    per = []
    for r in rows:
        if column not in r["tflops"]:
            raise ValueError(f"row {r['g'], r['m'], r['n'], r['k']} has no {column!r} column")
        flops = 2.0 * r["g"] * r["m"] * r["n"] * r["k"]
        t = flops / (r["tflops"][column] * 1e12)
        tb = float(gemm_time_s(r["m"], r["n"], r["k"], r["g"], peak_flops, hbm_bytes_per_s, hbm_efficiency, gp))
        per.append(dict(shape=[r["g"], r["m"], r["n"], r["k"]], measured_us=round(t * 1e6, 2),
                        batched_model_us=round(tb * 1e6, 2), per_group_us=round((t - tb) / r["g"] * 1e6, 3)))
    return float(np.median([p["per_group_us"] for p in per])) * 1e-6, per


#: the fitted column (TE 2.7's multi-stream default) and the cross-checks recorded beside it
FIT_COLUMN, CHECK_COLUMNS = "TE V2.7", ("TE V2.2", "Cutlass")


def grouped_gemm_section(path, gemm: dict, peak_flops: float, hbm_bytes_per_s: float, hbm_efficiency: float,
                         rel_path: str) -> dict:
    """The ``moe:`` section of the profile whose BF16 GEMM fit is ``gemm`` (module docstring).

    Raises:
        ValueError: the file lacks the fitted column or a negative per-group time comes out (the
            batched model slower than the measured grouped GEMM: the fit's premise fails).
    """
    rows = read_grouped_gemm_tables(path)
    fit_rows = [r for r in rows if FIT_COLUMN in r["tflops"]]
    value, per = per_group_s(fit_rows, FIT_COLUMN, gemm, peak_flops, hbm_bytes_per_s, hbm_efficiency)
    if value <= 0:
        raise ValueError(f"{path}: {FIT_COLUMN} is not slower than one batched GEMM of the same rows")
    checks = {}
    for col in CHECK_COLUMNS:
        rs = [r for r in rows if col in r["tflops"]]
        if rs:
            checks[col] = per_group_s(rs, col, gemm, peak_flops, hbm_bytes_per_s, hbm_efficiency)[1]
    return dict(grouped_gemm_group_s=float(f"{value:.3g}"),
                fit=dict(method="t_group = median over shapes of (measured - batched GEMM model) / groups; the "
                                f"column {FIT_COLUMN!r} (multi-stream cuBLAS, TE 2.7, CUDA 12.9)",
                         per_shape=per, cross_checks=checks,
                         note="not fitted: TE 2.2's multi-stream path pays a larger, again shape-independent, "
                              "per-group time; the single-kernel CUTLASS grouped GEMM does not grow with the "
                              "groups (its excess is mostly fixed)",
                         inputs=[rel_path]))
