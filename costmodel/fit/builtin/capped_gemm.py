"""The GEMM power (``flop_w``) of a part from matmuls timed under its own power limit.

A GEMM whose full-clock tensor utilisation is u (the burst rate the profile's GEMM fit gives for its
shape, over the dense peak) and whose operands stream at u_hbm of the HBM bandwidth draws
idle_w + flop_w u + hbm_w u_hbm at full clock (costmodel/power.py).  Held at a limit ``cap`` it
settles at the clock ratio s = measured / burst rate, where

    idle_w + g(s) (flop_w u + hbm_w u_hbm) = cap,  so  flop_w = ((cap - idle_w) / g(s) - hbm_w u_hbm) / u,

g the DVFS law of the profile (``gamma``, ``v_floor_clock_ratio``).  One value per timed shape; the
profile takes their median.  Used for the H100 of Meta's Grand Teton build (96 GB HBM2e, 500 W), whose
BF16 GEMMs FBGEMM timed at that limit (hardware/profiles/data/fbgemm_h100_500w_bf16_fp8_gemm.md): the
coefficient it had was the 700 W H100's, carried over by the same-die rule without a measurement.
"""
from __future__ import annotations

import math
import re

import numpy as np

from costmodel.gemm import gemm_bytes, gemm_efficiency
from costmodel.power import full_clock_power_w, ratio_under_cap
from costmodel.specs.params import GemmParams


_LINE = re.compile(r"^\s*(?P<kind>[a-z0-9 +]+):\s+shape \((?P<m>\d+), (?P<k>\d+), (?P<n>\d+)\)\s+tflops\s+"
                   r"(?P<tflops>[\d.]+)\s+ms\s+(?P<ms>[\d.]+)\s*$")


def read_fbgemm_bench(path) -> list[dict]:
    """Rows of an FBGEMM quantize-benchmark printout (``KIND: shape (M, K, N) tflops X ms Y``): dicts
    kind ('bf16', 'fp8 row gemm only', ...), m, n, k (k the reduction dim), tflops (TFLOP/s), time_s.

    Raises:
        ValueError: no benchmark line in the file, or a line whose TFLOP/s and time disagree with
            2 m n k by more than 1 % (a misread shape); the message names the file and line.
    """
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            mt = _LINE.match(line)
            if not mt:
                continue
            m, n, k = (int(mt[x]) for x in "mnk")
            tf, t = float(mt["tflops"]), float(mt["ms"]) * 1e-3
            if abs(2.0 * m * n * k / t / 1e12 / tf - 1.0) > 0.01:
                raise ValueError(f"{path}:{i}: {tf} TFLOP/s does not match 2 x {m} x {k} x {n} in {t * 1e3} ms")
            rows.append(dict(kind=mt["kind"].strip(), m=m, n=n, k=k, tflops=tf, time_s=t, line=i))
    if not rows:
        raise ValueError(f"{path}: no 'KIND: shape (M, K, N) tflops X ms Y' line")
    return rows


_SHAPE_ROW = re.compile(r"^(?P<name>[\w.]+)\s+\((?P<m>\d+), (?P<k>\d+), (?P<n>\d+)\)\s+(?P<t>\d+(?:\.\d+)?E[-+]\d+)\s")


def read_shape_times(path) -> list[dict]:
    """Rows of a ``name (M, K, N) bf16_time_s ...`` table (float8_experimental's Llama-70B shape
    benchmark): dicts kind 'bf16', name, m, n, k, time_s, tflops = 2 M K N / time.

    Raises:
        ValueError: no such row in the file (the message names it).
    """
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            mt = _SHAPE_ROW.match(line)
            if mt:
                m, k, n, t = int(mt["m"]), int(mt["k"]), int(mt["n"]), float(mt["t"])
                rows.append(dict(kind="bf16", name=mt["name"], m=m, n=n, k=k, time_s=t,
                                 tflops=round(2.0 * m * n * k / t / 1e12, 1), line=i))
    if not rows:
        raise ValueError(f"{path}: no 'NAME (M, K, N) TIME_S' row")
    return rows


def burst_tflops(gemm: dict, peak_flops: float, m: int, n: int, k: int) -> float:
    """The full-clock rate (TFLOP/s) a profile's GEMM entry ``gemm`` (a dict of
    costmodel.specs.GemmParams fields) gives one GEMM of ``m x n x k`` (costmodel/gemm.py)."""
    return float(gemm_efficiency(m, n, k, 1, GemmParams.from_entry(gemm))) * peak_flops / 1e12


def flop_w_from_capped(rows: list[dict], gemm: dict, power: dict, peak_flops: float, hbm_bytes_per_s: float,
                       cap_w: float, bytes_per_element: float = 2.0) -> tuple[float, dict]:
    """``flop_w`` (W) from GEMMs timed under ``cap_w`` (module docstring) and its fit record.

    Args:
        rows: :func:`read_fbgemm_bench` rows of one dtype.
        gemm: the profile's GEMM entry of that dtype (its burst efficiency model).
        power: the profile's ``power:`` (idle_w, hbm_w, gamma, v_floor_clock_ratio are read).
        peak_flops, hbm_bytes_per_s: datasheet dense peak (FLOP/s) and HBM bandwidth (B/s).
    Raises:
        ValueError: a measured rate at or above the burst rate (no throttle to read), or a limit
            not above idle_w.
    """
    if cap_w <= power["idle_w"]:
        raise ValueError(f"limit {cap_w} W is not above idle_w {power['idle_w']} W")
    per = []
    for r in rows:
        burst = burst_tflops(gemm, peak_flops, r["m"], r["n"], r["k"])
        s = r["tflops"] / burst
        if not 0 < s < 1:
            raise ValueError(f"shape {r['m']}x{r['n']}x{r['k']}: measured {r['tflops']} TFLOP/s is not below the "
                             f"burst rate {burst:.1f}: no clock reduction to read")
        u = burst * 1e12 / peak_flops
        u_hbm = gemm_bytes(r["m"], r["n"], r["k"], 1.0, bytes_per_element) / r["time_s"] / hbm_bytes_per_s
        full = float(full_clock_power_w(cap_w, s, power.get("static_w", power["idle_w"]), power["gamma"],
                                        power["v_floor_clock_ratio"]))
        per.append(dict(shape=[r["m"], r["n"], r["k"]], measured_tflops=r["tflops"], burst_tflops=round(burst, 1),
                        clock_ratio=round(s, 4), u=round(u, 4), u_hbm=round(u_hbm, 4),
                        flop_w=round((full - power["idle_w"] - power["hbm_w"] * u_hbm) / u, 1)))
    flop_w = float(np.median([p["flop_w"] for p in per]))
    return flop_w, dict(method="flop_w = (P_full - idle_w - hbm_w u_hbm) / u per shape, P_full = static_w + (limit - "
                               "static_w) / g(s) the GEMM's power at full clock, s = measured / burst "
                               "rate of the profile's GEMM fit, u = burst / peak, u_hbm = operand bytes / time / HBM "
                               "bandwidth; the median over the shapes", limit_w=cap_w, per_shape=per,
                        value_w=round(flop_w, 1))


def capped_rate_check(rows: list[dict], gemm: dict, power: dict, peak_flops: float, cap_w: float) -> list[dict]:
    """Cross-check rows: each GEMM's rate under ``cap_w`` by the profile against the measured one
    (TFLOP/s).  As costmodel.power.compute_under_cap charges it: the fit's rate for the shape was
    measured at full clock (``power_limited`` false) or held at the profile's ``kernel_limit_w``; at
    utilisation u of its own dtype's peak (costmodel.energy counts a low-precision GEMM so) it draws
    idle_w + flop_w u, at most that limit, and the cap lowers the clock from there."""
    out = []
    limit = math.inf if not gemm.get("power_limited", True) else power["kernel_limit_w"]
    for r in rows:
        rate = burst_tflops(gemm, peak_flops, r["m"], r["n"], r["k"])
        w_full = min(power["idle_w"] + power["flop_w"] * rate * 1e12 / peak_flops, limit)
        s = float(ratio_under_cap(w_full, cap_w, power.get("static_w", power["idle_w"]), power["gamma"],
                                  power["v_floor_clock_ratio"]))
        out.append(dict(shape=[r["m"], r["n"], r["k"]], measured_tflops=r["tflops"],
                        predicted_tflops=round(rate * s, 1), rel_err=round(rate * s / r["tflops"] - 1.0, 4)))
    return out
