"""GPU temperature per node slot: first-order RC with air preheating, steady state and warm-up.

Each slot j of a node is a lumped thermal RC (e.g. Skadron et al., "Temperature-aware
microarchitecture", ISCA 2003, the HotSpot compact model):

    dT_j/dt = (T_in,j + R_j P_j - T_j) / tau,    T_in,j = T_inlet + k_pre * sum_{i upstream of j} P_i

with R_j = R_th x r_th_scale_j the junction-to-inlet resistance at the slot, tau the time constant,
and k_pre = 1/(rho c_p V_dot) the air temperature rise per W dissipated upstream (energy balance of
the air stream: front-row GPUs preheat the air that cools the rear row).  Liquid cooling has no
upstream coupling.  ``R_th`` and ``tau`` come from the GPU's profile (fitted or derived,
costmodel/fit/builtin/power.py); the slot layout and k_pre from the cluster's ``cooling:`` section.

Thermal slowdown: above the GPU's slowdown temperature the driver lowers the clock until the
temperature holds (NVIDIA nvidia-smi "Clocks Event Reasons: HW Thermal Slowdown"); in steady state
that caps the slot's average power at P_max,j = (T_slow - T_in,j) / R_j (solved with the stage
times in costmodel.energy).
"""
from __future__ import annotations

import numpy as np

from .specs import CoolingSpec


def preheat_matrix(cooling: CoolingSpec) -> np.ndarray:
    """(G, G) matrix K with K[j, i] = inlet rise of slot j per W of slot i, C/W."""
    G = len(cooling.upstream)
    K = np.zeros((G, G))
    for j, ups in enumerate(cooling.upstream):
        for i in ups:
            K[j, i] = cooling.preheat_c_per_w
    return K


def slot_inlet_c(cooling: CoolingSpec, power_w: np.ndarray) -> np.ndarray:
    """Inlet temperature of every slot, C, given the power of every slot of the node (W, shape (..., G))."""
    return cooling.inlet_temp_c + np.asarray(power_w) @ preheat_matrix(cooling).T


def steady_temp_c(cooling: CoolingSpec, r_th_c_per_w: float, power_w: np.ndarray) -> np.ndarray:
    """Steady junction temperature of every slot, C: T_in,j + R_th r_j P_j (shape of power_w, (..., G))."""
    p = np.asarray(power_w, dtype=np.float64)
    return slot_inlet_c(cooling, p) + r_th_c_per_w * np.asarray(cooling.r_th_scale) * p


def temp_after_c(cooling: CoolingSpec, r_th_c_per_w: float, tau_s: float, power_w, start_power_w,
                 seconds: float) -> np.ndarray:
    """Temperature ``seconds`` after the node switches from ``start_power_w`` (steady) to ``power_w``.

    The exact solution of the linear RC per slot: T(t) = T_ss + (T_0 - T_ss) exp(-t / tau), where
    preheating follows the upstream slots' power with the same time constant (first order).
    """
    t_ss = steady_temp_c(cooling, r_th_c_per_w, power_w)
    t_0 = steady_temp_c(cooling, r_th_c_per_w, start_power_w)
    return t_ss + (t_0 - t_ss) * np.exp(-seconds / tau_s)

