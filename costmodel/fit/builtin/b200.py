"""B200 power from one public 8x B200 characterisation (hardware/profiles/data/
gpu_research_b200_8gpu_power_clocks_thermals.md: sustained GEMMs, idle and serving power, clocks,
temperatures on a DGX B200-class node).

* ``idle_w``: the median over the 8 GPUs of their power at < 10 % utilisation during live serving
  (a context held, clocks up, no kernel): the state the model's idle_w stands for.
* ``flop_w``: least squares over the 7 GPUs' sustained BF16 8192^3 GEMMs (the 8th is the note's own
  artifact), each pinned at the 1000 W limit at its own clock: P = static_w + g(s) (idle_w - static_w +
  flop_w u + hbm_w u_hbm) (static_w from the B200's idle capture, costmodel/fit/builtin/static_power.py), with s = clock / 1965 MHz (the clock the 2250 TFLOP/s dense peak is quoted at), u = the
  GEMM's TFLOP/s over the peak at that clock, u_hbm its operand traffic over the HBM bandwidth, g
  the fitted DVFS law (costmodel/power.py).  hbm_w, link_w, spin_w stay the H100's scaled by TDP.
* Cross-checks (not fitted): the FP8 GEMM on the same shape, and the steady temperature of the
  thermal model against the GEMM and serving temperatures at the note's 20 C inlet.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from costmodel.power import dynamic_power_ratio
from costmodel.readers.markdown import markdown_tables

from .data import rel
from .static_power import static_from_capture

#: the clock the B200's dense peaks are quoted at: 1321 TFLOP/s measured at ~1150 MHz scales to
#: 2257 at 1965 MHz (the note's own check, within 0.3 % of 2250; clocks.max.sm = 1965)
PEAK_CLOCK_MHZ = 1965.0
GEMM_N = 8192
INLET_C = 20.0          # the note: "Temperature is not on the critical path at 20 °C inlet"


def _num(cell: str) -> float:
    """The first number of a table cell ('**1267.8**', '988.2 W', '−4.74%')."""
    m = re.search(r"[-−]?\d+(?:\.\d+)?", cell.replace("*", ""))
    if not m:
        raise ValueError(f"no number in {cell!r}")
    return float(m.group(0).replace("−", "-"))


def read_b200_note(path) -> dict:
    """The tables of the B200 note.

    Returns:
        dict with ``ladder``: rows (gpu, tflops, clock_mhz, power_w) of the 8-way BF16 GEMM run;
        ``fp8``: (tflops, clock_mhz, power_w) of the FP8 GEMM; ``serving_idle_w``: per GPU, the power
        at < 10 % utilisation while serving; ``serving_energy_kj`` per GPU over 300.06 s;
        ``serving_temp_c`` per slot; ``gemm_temp_c`` per GPU of the ladder.
    Raises:
        ValueError: a table the fit needs is missing or malformed (the message names the file).
    """
    tabs = markdown_tables(path)

    def table(first_header: str, contains: str):
        for t in tabs:
            if t.header and t.header[0].lower() == first_header.lower() and any(contains in h for h in t.header):
                return t
        raise ValueError(f"{path}: no table with columns {first_header!r} and {contains!r}")
    try:
        lad = table("GPU", "clk p50")
        ladder = [(int(_num(r[0])), _num(r[1]), _num(r[3]), _num(r[5])) for r in lad.rows]
        temps = {int(_num(r[0])): _num(r[7]) for r in lad.rows}
        prec = table("", "FP8 e4m3 GEMM")
        cells = {r[0]: r for r in prec.rows}
        fp8 = (_num(cells["achieved TFLOP/s"][2]), _num(cells["SM clock p50"][2]), _num(cells["board power p50"][2]))
        serv = table("GPU", "util<10")
        idle = {int(_num(r[0])): _num(r[1].split("@")[1]) for r in serv.rows}
        per = table("GPU", "serving energy")
        energy = {int(_num(r[0])): _num(r[3]) for r in per.rows}
        slot = table("slot", "0")
        trow = next(r for r in slot.rows if r[0].startswith("median T"))
        stemp = [_num(c) for c in trow[1:]]
    except (KeyError, IndexError, StopIteration, ValueError) as e:
        raise ValueError(f"{path}: {e}") from None
    return dict(ladder=ladder, fp8=fp8, serving_idle_w=idle, serving_energy_kj=energy, serving_temp_c=stemp,
                gemm_temp_c=temps)


def _gemm_terms(tflops, clock_mhz, peak, hbm_bps, bytes_per_el, gamma, v_floor):
    """(g(s) u, g(s) u_hbm, g(s)) of a sustained square GEMM of side GEMM_N (module docstring)."""
    s = np.asarray(clock_mhz, float) / PEAK_CLOCK_MHZ
    u = np.asarray(tflops, float) * 1e12 / (peak * s)
    t = 2.0 * GEMM_N ** 3 / (np.asarray(tflops, float) * 1e12)
    uh = 3 * GEMM_N ** 2 * bytes_per_el / t / hbm_bps
    g = dynamic_power_ratio(s, gamma, v_floor)
    return g * u, g * uh, g


def fit_b200(note: dict, derived: dict, sheet, gamma: float, v_floor: float, r_th: float) -> tuple[dict, dict]:
    """idle_w and flop_w of the B200 from :func:`read_b200_note` (module docstring).

    Args:
        note: the note's tables.  derived: the TDP-derived power section (hbm_w used as is).
        sheet: the B200's :class:`costmodel.specs.GpuSpec`.  gamma, v_floor: the DVFS law.
        r_th: the B200 profile's thermal resistance, C/W (for the temperature cross-check).
    Returns:
        ``(values, record)``: {"idle_w", "flop_w", "static_w"} and the ``fit`` record for the profile.
    """
    idle = float(np.median(list(note["serving_idle_w"].values())))
    # the clock-independent part of idle (costmodel/fit/builtin/static_power.py); the rest scales with g(s)
    static = static_from_capture(sheet, idle, gamma, v_floor)
    static = idle if static is None else static
    gpu, tf, clk, pw = (np.array(c, float) for c in zip(*note["ladder"]))
    gu, guh, g = _gemm_terms(tf, clk, sheet.peak_flops["bf16"], sheet.hbm_bytes_per_s, 2, gamma, v_floor)
    base = static + (idle - static) * g
    y = pw - base - derived["hbm_w"] * guh
    flop_w = float(np.sum(gu * y) / np.sum(gu * gu))
    pred = base + flop_w * gu + derived["hbm_w"] * guh
    rel_err = np.abs(pred / pw - 1)
    f_tf, f_clk, f_pw = note["fp8"]
    fgu, fguh, fg = _gemm_terms(f_tf, f_clk, sheet.peak_flops["fp8"], sheet.hbm_bytes_per_s, 1, gamma, v_floor)
    p8 = float(static + (idle - static) * fg + flop_w * fgu + derived["hbm_w"] * fguh)
    t_gemm = INLET_C + r_th * pw
    meas_t = np.array([note["gemm_temp_c"][int(g)] for g in gpu])
    even = [note["serving_energy_kj"][g] * 1e3 / 300.06 for g in (0, 2, 4, 6)]
    t_serve = INLET_C + r_th * float(np.mean(even))
    rec = dict(
        data="8x B200 (driver 595.71.05): 45 s sustained BF16 8192^3 matmul per GPU at the 1000 W limit (clock, "
             "power, TFLOP/s per GPU); power at < 10 % utilisation during live serving (AmanSwar/GPU-research)",
        method="idle_w: median over the 8 GPUs of the < 10 % utilisation power while serving (context held, "
               "clocks up); flop_w: least squares of P = static_w + g(s) (idle_w - static_w + flop_w u + hbm_w u_hbm) "
               "over the 7 GEMM "
               "rows, s = clock / 1965 MHz, u = TFLOP/s / (2250 s), u_hbm = 3 x 8192^2 x 2 B per GEMM / time / "
               "7.7 TB/s, g the Perseus DVFS law",
        static_w=round(static, 1), n_points=len(pw), idle_w_per_gpu=[float(v) for v in note["serving_idle_w"].values()],
        clock_ratio_range=[round(float(clk.min() / PEAK_CLOCK_MHZ), 3), round(float(clk.max() / PEAK_CLOCK_MHZ), 3)],
        max_rel_err_power=round(float(rel_err.max()), 4), median_rel_err_power=round(float(np.median(rel_err)), 4),
        fp8_check=dict(measured_w=f_pw, predicted_w=round(p8, 1), rel_err=round(p8 / f_pw - 1, 3),
                       note="FP8 e4m3 8192^3 on the same GPU at 1177 MHz: not fitted"),
        thermal_check=dict(inlet_c=INLET_C, gemm_measured_median_c=float(np.median(meas_t)),
                           gemm_predicted_median_c=round(float(np.median(t_gemm)), 1),
                           serving_even_slots_measured_c=float(np.mean([note["serving_temp_c"][i] for i in (0, 2, 4, 6)])),
                           serving_even_slots_predicted_c=round(t_serve, 1),
                           note="steady T = inlet + R_th P with the derived R_th, at the note's 20 C inlet; the even "
                                "(upstream) slots while serving, at their mean power over 300 s (energy / time)"),
        inputs=[rel("b200_note")])
    return dict(idle_w=idle, flop_w=flop_w, static_w=static), rec


def b200_note_path(data=None) -> Path:
    """The note's copy under hardware/profiles/data (or ``data``)."""
    from .data import path
    return path("b200_note", data)


def power_b200(derived: dict, gamma: float, v_floor: float, r_th: float, data=None) -> dict:
    """``power:`` of the B200: idle_w and flop_w fitted on the note (:func:`fit_b200`), the other terms
    the TDP-derived section ``derived`` (costmodel/fit/builtin/power.py)."""
    from costmodel.specs import load_gpu
    sheet = load_gpu("b200-sxm-180gb")
    vals, rec = fit_b200(read_b200_note(b200_note_path(data)), derived, sheet, gamma, v_floor, r_th)
    out = dict(derived, idle_w=float(f"{vals['idle_w']:.4g}"), flop_w=float(f"{vals['flop_w']:.4g}"),
               static_w=float(f"{vals['static_w']:.4g}"))
    out["basis"] = dict(derived["basis"], idle_w="fitted", flop_w="fitted")
    out["fit"] = dict(b200=rec)
    out["derived_from"] = "idle_w, flop_w: fitted on B200 (fit.b200); hbm_w, link_w, spin_w: " + derived["derived_from"]
    out["note"] = (f"idle_w and flop_w FITTED on a public 8x B200 characterisation: sustained BF16 GEMMs sit at the "
                   f"1000 W limit at {rec['clock_ratio_range'][0]:.2f}-{rec['clock_ratio_range'][1]:.2f} of the 1965 MHz "
                   f"clock, so flop_w ({vals['flop_w']:.0f} W) is {vals['flop_w'] / derived['flop_w']:.2f}x the TDP-scaled "
                   "H100 value: a B200 at full clock would draw far more than its TDP. The other terms: " + derived["note"])
    return out
