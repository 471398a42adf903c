"""Per-GPU power by phase, average and peak power, and the DVFS response to a power cap.

Phases of one GPU's step (durations from the time model, costmodel.schedule):

* GEMM / attention (tensor cores busy at utilisation u_flop = achieved / peak FLOP/s),
* memory-bound kernels (HBM busy at utilisation u_hbm),
* exposed communication (NVLink/NIC busy at u_link),
* communication overlapped with compute (both at once),
* waiting (pipeline bubble, a slower stage or the DP reduction): the GPU spins in an NCCL kernel
  at full clock and draws idle + spin power, not idle power (:func:`wait_power_w`).

Power of a phase is linear in the utilisations above an idle floor (Kandiah et al., "AccelWattch",
MICRO 2021: constant + activity-proportional dynamic power; Hong & Kim, ISCA 2010):

    P = P_idle + c_flop u_flop + c_hbm u_hbm + c_link u_link + c_spin u_spin

with the coefficients fitted per GPU from power traces (costmodel/fit/).  costmodel.energy
composes these per stage: average power
is the time-weighted mean over the step; peak power is the mean over the steady 1F1B period (a
micro-batch's forward + backward with its overlapped communication), the densest sustained window
that a power meter averaging over ~100 ms sees; it grows with mbs because larger GEMMs run at a
higher u_flop.

Power cap / DVFS: dynamic power P_dyn ~ C V(f)^2 f.  Above the voltage floor the supply voltage
rises with the clock and P_dyn scales as s^gamma (s = f / f_max); below the floor clock ratio s_v
the voltage stays at its minimum and P_dyn falls only linearly with the clock:

    g(s) = s^gamma                 for s >= s_v
    g(s) = s_v^gamma (s / s_v)     for s <  s_v

(gamma and s_v fitted to locked-clock sweeps of LLM training stages, costmodel/fit/builtin/dvfs.py).
Not all of the idle power stays when the clock falls: a GPU held by a job with no kernel running
keeps its clock and voltage up, so its idle power holds a clock-scaled share (clock tree, leakage at
the higher voltage) above a clock-independent static power P_static (the intercept P_0 of the same
locked-clock sweeps: 43-58 W on A100 SXM against 85 W idle; an H100 with no process at its lowest
clock draws 85 W against 122 W held, costmodel/fit/builtin/static_power.py).  A phase drawing P at full clock draws

    P(s) = P_static + (P - P_static) g(s)

and one whose power exceeds the cap runs at the clock ratio where P(s) meets the cap; its
compute-bound time grows as 1/s while HBM- and link-bound time does not depend on the SM clock.

The cap acts on each kernel class of the compute phase apart (:func:`compute_under_cap`): the
tensor-core kernels (GEMMs, fused attention) and the memory-bound kernels between them draw
different power, and the limiter follows them: Zeus (NSDI'23, hardware/profiles/data zeus_*.csv)
measures V100 training whose average power is 195 W uncapped run 3.9 % slower under a 200 W limit
(ShuffleNet-v2, batch 1024, Adam: 7.37 -> 7.66 s per epoch) at 159 W average, and a whole-phase
average cannot bind a cap above it.  Uncapped, the split changes nothing (power is linear in the
utilisations, so the time-weighted sub-phases average to the blended phase).  Below s_v a lower cap buys little power for its lost clock, so the energy per step turns
up again: the U shape of energy against the power cap.
"""
from __future__ import annotations

import math

import numpy as np

from .specs.params import POWER_TERMS, PowerParams


def phase_power_w(p: PowerParams, util: dict):
    """Uncapped power of a phase, W (arrays broadcast): P_idle + sum_k c_k u_k over the terms of
    costmodel.specs.params.POWER_TERMS (``util``: term name -> utilisation 0..1; a term it lacks is 0)."""
    out = p.idle_w
    for term in POWER_TERMS:
        out = out + p.coeff_w[term.name] * np.asarray(util.get(term.name, 0.0))
    return out


def wait_power_w(p: PowerParams) -> float:
    """Power of a GPU waiting for a peer (a pipeline bubble, a slower stage or TP/DP rank), W:
    NCCL's kernel spins at full clock, so idle_w + spin_w, not idle_w (costmodel.calibration's
    ``wait`` benchmark; the 8x H100 DDP trace, costmodel/fit/builtin/power.py)."""
    return float(phase_power_w(p, {"spin": 1.0}))


def dynamic_power_ratio(s, gamma: float, v_floor: float = 0.0):
    """g(s): dynamic power at clock ratio ``s`` over dynamic power at s = 1 (module docstring);
    ``v_floor`` = 0 is the pure power law.  Arrays broadcast."""
    s = np.asarray(s, dtype=np.float64)
    if v_floor <= 0:
        return s ** gamma
    return np.where(s >= v_floor, s ** gamma, v_floor ** gamma * s / v_floor)


def clock_for_dynamic_ratio(r, gamma: float, v_floor: float = 0.0, min_ratio: float = 1e-3):
    """The clock ratio s with g(s) = ``r`` (the inverse of :func:`dynamic_power_ratio`), clipped to
    [``min_ratio``, 1] (the GPU's lowest clock).  Arrays broadcast."""
    r = np.asarray(r, dtype=np.float64)
    if v_floor <= 0:
        s = r ** (1.0 / gamma)
    else:
        knee = v_floor ** gamma
        s = np.where(r >= knee, np.maximum(r, 0.0) ** (1.0 / gamma), r * v_floor ** (1.0 - gamma))
    return np.clip(s, min_ratio, 1.0)


def power_at_ratio_w(power_w, s, static_w, gamma: float, v_floor: float = 0.0):
    """P(s) = P_static + (P - P_static) g(s) (module docstring): the power of a phase drawing
    ``power_w`` at full clock when it runs at clock ratio ``s``; ``static_w`` the clock-independent
    power, W.  The one DVFS law every capped figure and every fit through a cap uses.  Arrays broadcast."""
    power_w = np.asarray(power_w, dtype=np.float64)
    return static_w + np.maximum(power_w - static_w, 0.0) * dynamic_power_ratio(s, gamma, v_floor)


def full_clock_power_w(power_w, s, static_w, gamma: float, v_floor: float = 0.0):
    """The inverse of :func:`power_at_ratio_w` in the power: what a phase measured drawing ``power_w``
    at clock ratio ``s`` (held there by a limit) would draw at full clock, W.  Arrays broadcast."""
    return static_w + (np.asarray(power_w, dtype=np.float64) - static_w) / dynamic_power_ratio(s, gamma, v_floor)


def ratio_under_cap(power_w, cap_w, static_w, gamma: float, v_floor: float = 0.0, min_ratio: float = 1e-3):
    """The clock ratio at which :func:`power_at_ratio_w` meets ``cap_w`` (W), clipped to
    [``min_ratio``, 1]: 1 where ``power_w`` is under the cap.  Arrays broadcast; raises nothing."""
    head = np.maximum(np.asarray(cap_w, dtype=np.float64) - static_w, 1e-9)
    dyn = np.maximum(np.asarray(power_w, dtype=np.float64) - static_w, 1e-9)
    return clock_for_dynamic_ratio(head / dyn, gamma, v_floor, min_ratio)


def power_at_clock_w(p: PowerParams, power_w, s):
    """Power of a phase drawing ``power_w`` at full clock when it runs at clock ratio ``s`` on the GPU
    of ``p`` (:func:`power_at_ratio_w` with its static power).  Arrays broadcast."""
    return power_at_ratio_w(power_w, s, p.static_floor_w, p.gamma, p.v_floor_clock_ratio)


def clock_ratio(p: PowerParams, power_w, cap_w):
    """SM-clock ratio f/f_max at which a phase drawing ``power_w`` uncapped fits under ``cap_w`` on the
    GPU of ``p`` (:func:`ratio_under_cap`), never below the GPU's lowest clock (``p.min_clock_ratio``;
    a cap below what the phase draws there is then not met).  Raises nothing.
    """
    return ratio_under_cap(power_w, cap_w, p.static_floor_w, p.gamma, p.v_floor_clock_ratio, p.min_clock_ratio)


def held_power_w(p: PowerParams, power_w, cap_w):
    """Power of a phase drawing ``power_w`` uncapped (communication, waiting) under ``cap_w``, W: the cap
    where it binds, never below what the phase draws at the GPU's lowest clock (:func:`power_at_clock_w`
    at ``p.min_clock_ratio``: a cap below that is not met, as for compute, :func:`clock_ratio`).
    Arrays broadcast; raises nothing."""
    power_w = np.asarray(power_w, dtype=np.float64)
    return np.minimum(power_w, np.maximum(cap_w, power_at_clock_w(p, power_w, p.min_clock_ratio)))


def compute_under_cap(p: PowerParams, classes: dict, cap_w, clock_max=None):
    """A compute phase made of kernel classes, each capped on its own (module docstring).

    ``classes``: name -> (time_s at full clock, stretches, util[, limit_w]): ``stretches`` is True
    for SM-clock-bound classes (GEMMs, fused attention: time / clock ratio) and False for HBM-bound
    ones (time unchanged); ``util`` maps power terms to the class's utilisations.  A class's power at
    its measured efficiency is at most ``limit_w`` (default ``p.kernel_limit_w``), the power limit its
    kernels were measured under (a GEMM table taken at the TDP already holds the throttle of the TDP;
    inf for a burst measured at the maximum clock, which the cap throttles here).  ``cap_w``: W;
    ``clock_max``: a pinned clock ratio (a derated GPU).  Arrays broadcast.

    Returns (time_s, energy_j, clock ratio, class power W): the stretched time, the energy over it,
    the lowest SM clock (over the maximum) a stretching class runs at, counting the clock its kernels
    were measured at when the limit held them there (B200 GEMMs at 1000 W), and the highest power a
    class draws at its clock (above the cap only where the GPU's lowest clock cannot meet it).
    ``clock_max`` bounds that absolute clock.  Raises nothing.
    """
    time_s = energy = 0.0
    clock, top_w = 1.0, 0.0
    for t_s, stretches, util, *limit in classes.values():
        limit = limit[0] if limit else p.kernel_limit_w
        p_lin = phase_power_w(p, util)
        # the clock the measured efficiency came with: kernels that would draw more than the limit
        # they were measured under ran held at it
        s_meas = np.where(p_lin > limit, clock_ratio(p, p_lin, limit), 1.0) if math.isfinite(limit) else 1.0
        w_full = np.minimum(p_lin, limit)
        # under the cap, relative to the measured state; a pin or a thermal ceiling (clock_max) and
        # the GPU's lowest clock bound the absolute clock s x s_meas
        s = np.maximum(clock_ratio(p, w_full, cap_w), np.minimum(p.min_clock_ratio / s_meas, 1.0))
        if clock_max is not None:
            s = np.minimum(s, np.asarray(clock_max) / s_meas)
        w = power_at_clock_w(p, w_full, s)
        t = np.asarray(t_s, dtype=np.float64) / (s if stretches else 1.0)
        time_s, energy = time_s + t, energy + w * t
        # a class that does not run draws nothing of its own (an idle GPU can draw less than idle_w
        # under a cap: idle_w holds its clock up)
        top_w = np.maximum(top_w, np.where(np.asarray(t_s) > 0, w, 0.0))
        if stretches:
            clock = np.minimum(clock, np.where(np.asarray(t_s) > 0, s * s_meas, 1.0))
    return time_s, energy, clock, top_w
