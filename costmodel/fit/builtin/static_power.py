"""``power.static_w`` of the built-in profiles: the part of the idle power that does not fall with the clock.

A GPU held by a job with no kernel running draws ``idle_w`` with its clock and voltage up; parked at
its lowest clock with no process it draws the GPU file's ``idle_power`` (nvidia-smi -q captures, each
file's ``sources``).  Under the DVFS law of costmodel/power.py, P(s) = P_static + (P - P_static) g(s),
the idle GPU at its lowest clock ratio s_min draws

    idle_power = P_static + (idle_w - P_static) g(s_min)   =>   P_static = (idle_power - idle_w g) / (1 - g)

with s_min = min_clock_mhz / the full clock (max_clock_mhz, else boost_clock_mhz) of the GPU file and g the fitted DVFS law.  A GPU whose
file has no idle capture takes the static share P_static / idle_w of the GPU its power section comes
from (``borrowed``).

Cross-checks recorded in the A100 profiles (not fitted): the intercept P_0 of the Perseus locked-clock
sweeps (the same law fitted to A100 training stages, costmodel/fit/builtin/dvfs.py) and the no-kernel
GPU of a hung A100 job at 1155 MHz (huggingface/m4-logs, hardware/profiles/data README).
"""
from __future__ import annotations

import numpy as np

from costmodel.power import dynamic_power_ratio, power_at_ratio_w
from costmodel.specs import GpuSpec


def _r(x, sig=4):
    return float(f"{float(x):.{sig}g}")


def static_from_capture(gpu: GpuSpec, idle_w: float, gamma: float, v_floor: float):
    """P_static (W) of ``gpu`` from its idle capture and ``idle_w`` (module docstring), or None where the
    GPU file has no ``idle_power`` or no min/full clock.  Clipped to [0, idle_w] (a capture above
    idle_w would mean the parked GPU draws more than a held one: then nothing of idle falls with the
    clock).
    """
    if gpu.idle_power_w is None or not (gpu.min_clock_mhz and gpu.full_clock_mhz):
        return None
    g = float(dynamic_power_ratio(gpu.min_clock_mhz / gpu.full_clock_mhz, gamma, v_floor))
    return float(np.clip((gpu.idle_power_w - idle_w * g) / (1.0 - g), 0.0, idle_w))


def static_section(gpu: GpuSpec, idle_w: float, gamma: float, v_floor: float, source: tuple | None = None):
    """``(static_w, basis, record)`` of one GPU's power section.

    Args:
        gpu: the GPU's spec (its ``idle_power``, ``min_clock_mhz``, ``full_clock_mhz``).
        idle_w: the section's idle_w, W.  gamma, v_floor: the section's DVFS law.
        source: ``(name, static_w, idle_w)`` of the GPU whose static share a GPU without a capture
            borrows.
    Raises:
        ValueError: no idle capture and no ``source``.
    """
    own = static_from_capture(gpu, idle_w, gamma, v_floor)
    if own is not None:
        s_min = gpu.min_clock_mhz / gpu.full_clock_mhz
        return _r(own), "derived", dict(
            method="P_static = (idle_power - idle_w g(s_min)) / (1 - g(s_min)): the GPU file's idle capture "
                   "(no process, lowest clock) under the DVFS law, s_min = min_clock / full clock (max_clock_mhz, else boost_clock_mhz)",
            idle_power_w=gpu.idle_power_w, min_clock_ratio=_r(s_min, 3),
            g_min=_r(dynamic_power_ratio(s_min, gamma, v_floor), 3), value_w=_r(own),
            source=str(gpu.sources.get("idle_power", "")))
    if source is None:
        raise ValueError(f"{gpu.key}: no idle_power capture and no GPU to borrow the static share from")
    name, s_w, i_w = source
    share = s_w / i_w
    return _r(share * idle_w), "borrowed", dict(
        method=f"no idle capture of this GPU: {name}'s static share static_w / idle_w = {s_w:.4g} / {i_w:.4g} "
               f"= {share:.3f} x this idle_w", value_w=_r(share * idle_w))


def a100_cross_checks(static_w: float, idle_w: float, gamma: float, v_floor: float, dvfs: dict, wait: dict) -> dict:
    """The A100 profiles' checks of ``static_w`` (W): the Perseus sweeps' P_0 (``dvfs``: fit_dvfs's
    result) and the no-kernel GPU of the hung-job capture (``wait``: fit_a100_wait's result)."""
    p0 = {k: _r(r["p0_w"], 3) for k, r in dvfs["per_sweep"].items()}
    s = wait["idle_clock_mhz"] / wait["wait_clock_mhz"]
    pred = float(power_at_ratio_w(idle_w, s, static_w, gamma, v_floor))
    return dict(
        perseus_p0_w=dict(per_sweep=p0, median=_r(np.median(list(p0.values())), 3),
                          note="the clock-independent intercept of the locked-clock sweeps of A100 training stages "
                               "(the same law, fitted on other data)"),
        no_kernel_at_clock=dict(clock_mhz=wait["idle_clock_mhz"], measured_w=_r(wait["held_idle_w"]),
                                predicted_w=_r(pred), predicted_without_static_w=_r(idle_w),
                                note="a GPU of a hung job with its context up and no kernel, at its default "
                                     "application clock (huggingface/m4-logs nvidia-smi -q)"))
