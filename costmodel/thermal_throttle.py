"""Thermal slowdown per GPU: the SM clock at which each GPU's own heat holds it at its slowdown
temperature, and the pace the slowest GPU of each pipeline stage sets.

A GPU past its slowdown temperature lowers its own core clocks (NVIDIA nvml.h,
nvmlClocksThrottleReasonSwThermalSlowdown: "SW Thermal Slowdown ... reducing the core clocks") until it
holds there, never below the HW-slowdown clock (:data:`HW_SLOWDOWN_CLOCK_RATIO`), where it runs hotter.
The clock is each GPU's own: a synchronous stage runs at the pace of its slowest GPU, and a GPU whose
own clock is faster finishes its kernels first and waits for it at the waiting power.  So a GPU just
past its slowdown temperature throttles only as far as its own heat requires, whatever a hotter
stage-mate needs, and its temperature, clock and power change continuously with the inlet.

The GPUs heat each other (a slot's inlet is the air its upstream slots warmed, costmodel.thermal) and
share the step, so the clocks are a fixed point: each sweep solves every GPU's clock with the other
GPUs' powers and the step held (regula falsi, vectorised over GPUs), then recomputes the step from
the new pace, until no clock changes.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

#: the SM clock ratio of HW slowdown: "reducing the core clocks by a factor of 2 or more" (NVIDIA
#: nvml.h, nvmlClocksThrottleReasonHwSlowdown): a GPU the thermal response cannot hold below its
#: slowdown temperature runs at half its maximum clock, hotter than the slowdown temperature
HW_SLOWDOWN_CLOCK_RATIO = 0.5
_SWEEPS = 200          # fixed-point sweeps (a few tens where GPUs heat each other strongly)
_ROOT_EVALS = 40       # at most, per sweep (regula falsi takes about ten)


def stage_pace(clock: np.ndarray, stage_of: np.ndarray, pp: int) -> np.ndarray:
    """Per stage (length ``pp``), the clock ratio of its slowest listed GPU (``clock``, ``stage_of``:
    one entry per GPU); 1 for a stage that lists none."""
    out = np.ones(pp)
    np.minimum.at(out, stage_of, clock)
    return out


def thermal_clocks(top: np.ndarray, r_own: np.ndarray, slow_c: float,
                   power_w: Callable[[np.ndarray, float], np.ndarray],
                   temps_c: Callable[[np.ndarray], np.ndarray],
                   step_s: Callable[[np.ndarray], float]) -> tuple[np.ndarray, float]:
    """The clock ratio each GPU runs at under thermal slowdown, and the step those clocks give.

    Args:
        top: (n,) each GPU's clock ceiling, ratio of the maximum: 1, or a derated GPU's pin.
        r_own: (n,) C/W: how much a GPU's own power raises its junction (costmodel.thermal's R_th
            times the slot's scale), so the others' heat is what is left of its temperature.
        slow_c: the slowdown temperature, C.
        power_w: (clocks (n,), step s) -> (n,) average power of each GPU at its clock in a step of
            that length (costmodel.energy.stage_state with ``rows``).
        temps_c: (n,) powers -> (n,) steady junction temperatures, C (costmodel.thermal).
        step_s: clocks (n,) -> the step they give, each stage at its slowest GPU's clock.
    Returns:
        (clock (n,), step_s): every GPU at or below ``slow_c`` at its clock, or at the HW-slowdown
        clock (or its pin, if lower) and hotter; at ``top`` where it holds below ``slow_c`` there.
        Raises nothing.
    """
    top = np.asarray(top, dtype=np.float64)
    floor = np.minimum(HW_SLOWDOWN_CLOCK_RATIO, top)
    clock, T = top.copy(), step_s(top)
    step_prev, relax = None, 1.0
    for _ in range(_SWEEPS):
        p = power_w(clock, T)
        others = temps_c(p) - r_own * p           # the inlet and the upstream slots' heat, held

        def excess(x):
            return others + r_own * power_w(x, T) - slow_c

        f_top = excess(top)
        hot = f_top > 1e-6
        new = np.where(hot, _root(excess, floor, top, f_top, hot), top) if hot.any() else top.copy()
        step = new - clock
        # the sweeps alternate about the fixed point (a cooler GPU heats its neighbours less, and a
        # slower pace lengthens the step every GPU averages its power over): under-relax by the
        # dominant mode, read off the ratio of successive steps (damped ones: ratio = 1 + w (lambda - 1))
        if step_prev is not None and step_prev @ step_prev > 0:
            ratio = float(step @ step_prev / (step_prev @ step_prev))
            lam = 1.0 - (1.0 - ratio) / relax        # the undamped map's rate
            relax = min(max(1.0 / (1.0 - min(lam, 0.0)), 0.02), 1.0)
            new = np.clip(clock + relax * step, floor, top)
        T_new = step_s(new)
        done = np.abs(new - clock).max() <= 1e-8
        clock, T, step_prev = new, T_new, step
        if done:
            break
    return clock, T


def _root(excess, lo: np.ndarray, hi: np.ndarray, f_hi: np.ndarray, hot: np.ndarray) -> np.ndarray:
    """Per ``hot`` GPU, the clock in [lo, hi] where its excess temperature (increasing in the clock,
    positive at ``hi``: ``f_hi``) crosses 0, from below: ``lo`` where even that is too hot (HW slowdown).
    The Illinois variant of regula falsi, vectorised (a handful of evaluations where bisection takes
    forty); entries not ``hot`` are returned as ``hi``."""
    a, b, fb = lo.copy(), hi.copy(), f_hi.copy()
    fa = excess(a)
    active = hot & (fa <= 1e-6)                  # too hot even at the lowest clock: HW slowdown
    fa = np.minimum(fa, 0.0)
    side = np.zeros(len(a))
    x_end, f_end = a.copy(), np.full(len(a), np.inf)       # each search's last evaluation
    for _ in range(_ROOT_EVALS):
        span = fb - fa
        x = np.where(span > 0, (a * fb - b * fa) / np.where(span > 0, span, 1.0), 0.5 * (a + b))
        x = np.clip(x, a, b)
        fx = excess(x)
        x_end, f_end = np.where(active, x, x_end), np.where(active, fx, f_end)
        up = active & (fx > 0.0)                   # x too hot: it bounds from above
        down = active & ~up
        # Illinois: the end kept twice in a row has its value halved, so the bracket closes from both sides
        fa = np.where(up & (side == 1), 0.5 * fa, fa)
        fb = np.where(down & (side == -1), 0.5 * fb, fb)
        b, fb = np.where(up, x, b), np.where(up, fx, fb)
        a, fa = np.where(down, x, a), np.where(down, fx, fa)
        side = np.where(up, 1, -1)
        active &= (b - a > 1e-12) & (np.abs(fx) > 1e-7)
        if not active.any():
            break
    # a search that stopped on an evaluation this close to the slowdown temperature answers with it
    return np.where(hot, np.where(np.abs(f_end) <= 1e-7, x_end, a), hi)
