"""The GH100 die's GEMM power (``flop_w``) from one pair of matmul rates: the burst and the sustained.

mamf-finder (ml-engineering, hardware/profiles/data/mlengineering_mamf_vs_msmf_h200_b200.md) reports
for one H200 at its 700 W default limit the fastest BF16 matmul of a short boost-clock burst (MAMF,
834 TFLOP/s) and the fastest one a shape holds over a 2 s window at full load (MSMF, 755 TFLOP/s).  In
the power model (costmodel/power.py) a GEMM at full-clock tensor utilisation u = MAMF / peak draws
idle_w + flop_w u; held at the limit it runs at the clock ratio s = MSMF / MAMF, where
idle_w + flop_w u g(s) = TDP, so

    flop_w = (TDP - idle_w) / (u g(s)).

The GEMM's own HBM traffic is left out: a best shape does ~10^3 FLOP per byte, u_hbm < 0.05, under
2 % of its power.  idle_w is the H100 trace's (same board, die and limit), g the DVFS law fitted on
the A100 stage sweeps (costmodel/fit/builtin/dvfs.py).  H100 and H200 share the die: both take it.

Cross-check (not fitted): the same law, with the B200's coefficients fitted on its own sustained GEMMs
(costmodel/fit/builtin/b200.py), takes the B200's MAMF burst to the clock its 1000 W limit allows;
the table's B200 MSMF is the measured end.
"""
from __future__ import annotations

from costmodel.power import dynamic_power_ratio, full_clock_power_w
from costmodel.readers.markdown import markdown_tables

from .variants import capped_clock


def read_msmf_table(path) -> dict:
    """The file's table: accelerator -> {"peak", "mamf", "msmf", "tdp"} (TFLOP/s, W; None where blank).

    Raises:
        ValueError: no table with the columns, or a cell that is not a number (the file named).
    """
    want = ("accelerator", "peak_tflops", "mamf_tflops", "msmf_tflops", "tdp_w")
    for t in markdown_tables(path):
        if t.header and all(c in t.header for c in want):
            col = {c: t.header.index(c) for c in want}
            out = {}
            for r in t.rows:
                try:
                    out[r[col["accelerator"]]] = {k.split("_")[0]: (float(r[col[k]]) if r[col[k]].strip() else None)
                                                  for k in want[1:]}
                except ValueError as e:
                    raise ValueError(f"{path}: row {r[0]!r}: {e}") from None
            return out
    raise ValueError(f"{path}: no table with columns {', '.join(want)}")


def flop_w_from_msmf(row: dict, idle_w: float, gamma: float, v_floor: float, static_w: float) -> tuple[float, dict]:
    """``flop_w`` (W) from one accelerator's MAMF / MSMF / TDP (module docstring), and its fit record;
    ``static_w`` the clock-independent power of the DVFS law (costmodel/power.py).

    Raises:
        ValueError: MSMF not below MAMF, or a limit not above idle_w (no throttle to read).
    """
    u, s = row["mamf"] / row["peak"], row["msmf"] / row["mamf"]
    if not (0 < s < 1 and row["tdp"] > idle_w):
        raise ValueError(f"MSMF {row['msmf']} must lie below MAMF {row['mamf']} and the limit above idle_w {idle_w}")
    g = float(dynamic_power_ratio(s, gamma, v_floor))
    flop_w = (float(full_clock_power_w(row["tdp"], s, static_w, gamma, v_floor)) - idle_w) / u
    rec = dict(method="flop_w = (P_full - idle_w) / u, P_full = static_w + (TDP - static_w) / g(s) the sustained "
                      "matmul's power at full clock: u = MAMF / peak (the burst at full clock), s = MSMF / MAMF "
                      "(the clock the sustained matmul settles at under the limit), g the DVFS law; the GEMM's HBM "
                      "term left out (u_hbm < 0.05)", static_w=round(static_w, 1),
               mamf_tflops=row["mamf"], msmf_tflops=row["msmf"], peak_tflops=row["peak"], tdp_w=row["tdp"],
               u_burst=round(u, 4), clock_ratio=round(s, 4), g=round(g, 4), value_w=round(flop_w, 1))
    return flop_w, rec


def sustained_tflops(power: dict, mamf_tflops: float, peak_tflops: float, tdp_w: float) -> float:
    """The matmul rate (TFLOP/s) a burst of ``mamf_tflops`` holds under ``tdp_w`` by the power model
    (``power``: a profile's ``power:`` coefficients; the clock of :func:`.variants.capped_clock`)."""
    return mamf_tflops * capped_clock(power, mamf_tflops / peak_tflops, tdp_w)
