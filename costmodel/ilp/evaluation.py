"""Geometry of a layout on the nodes (stages, nodes, slot blocks) and the exact evaluation of a decision.

:func:`_times_energy` is the single arithmetic of step time and energy, shared by :func:`evaluate`,
the heuristic incumbents and the tests' brute-force oracle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from .instance import FEAS_RTOL, GpuRow, Instance, LayoutOption, Solution, _objective_value


@dataclass(frozen=True)
class _Geom:
    S: int
    G: int
    p: int
    Q: int                 # stages per node (blocks per node) when S < G, else 1
    whole: bool            # S >= G: stages fill whole nodes
    stage_nodes: tuple     # nodes of each stage
    node_stages: tuple     # stages of each used node
    blocks: tuple          # slots of each block (S < G); ((0..G-1),) when whole


def _geom(inst: Instance, o: LayoutOption) -> _Geom:
    S, G, p = o.stage_gpus, inst.gpus_per_node, o.pp
    if S >= G:
        per = S // G
        stage_nodes = tuple(tuple(range(s * per, (s + 1) * per)) for s in range(p))
        node_stages = tuple((q // per,) for q in range(p * per))
        return _Geom(S, G, p, 1, True, stage_nodes, node_stages, (tuple(range(G)),))
    Q = G // S
    return _Geom(S, G, p, Q, False, tuple((s // Q,) for s in range(p)),
                 tuple(tuple(range(q * Q, (q + 1) * Q)) for q in range(p // Q)),
                 tuple(tuple(range(b * S, (b + 1) * S)) for b in range(Q)))


def _node_temps(inst: Instance, p_slot: np.ndarray) -> np.ndarray:
    """Steady temperature of every slot of a node with per-slot power ``p_slot`` (G,), deg C."""
    return inst.inlet_c + inst.preheat_c_per_w.T @ p_slot + inst.r_th_c_per_w * p_slot


def _node_ok(inst: Instance, p_slot: np.ndarray, rtol: float = FEAS_RTOL, p_heat: np.ndarray | None = None) -> bool:
    """Temperature and power-budget check of one node at relative tolerance ``rtol``: the budget on the
    slots' power ``p_slot`` (LayoutOption.p_budget_w), the temperatures on ``p_heat`` (the power they follow, LayoutOption.
    p_thermal_w; default ``p_slot``)."""
    temps = _node_temps(inst, p_slot if p_heat is None else p_heat)
    return bool(np.all(temps <= inst.max_temp_c + rtol * abs(inst.max_temp_c))
                and float(np.sum(p_slot)) <= inst.node_power_budget_w * (1 + rtol))


def _mem_ok(inst: Instance, o: LayoutOption, layers: np.ndarray) -> np.ndarray:
    """Memory check per row of ``layers`` (N, p) -> bool (N,)."""
    need = o.mem_fixed_bytes + layers * o.mem_per_layer_bytes
    return np.all(need <= inst.hbm_bytes * (1 + FEAS_RTOL), axis=-1)


def _times_energy(o: LayoutOption, caps: Sequence[int], layers: np.ndarray):
    """Stage times (N, p), tau (N,), T (N,), E (N,) for one cap assignment and N layer splits.

    The single arithmetic used by :func:`evaluate` and the tests' brute-force oracle (bitwise identical)."""
    caps = np.asarray(caps, dtype=int)
    p = o.pp
    t = np.asarray(layers, dtype=float) * o.t_layer_s[caps]
    t[:, 0] = t[:, 0] + o.t_first_s[caps[0]]
    t[:, p - 1] = t[:, p - 1] + o.t_last_s[caps[p - 1]]
    tau = t.max(axis=1)
    T = o.periods * tau + o.const_time_s
    S, m = o.stage_gpus, o.microbatches
    E = np.zeros_like(T)
    for s in range(p):
        E = E + (S * m * (o.p_busy_w[caps[s]] - o.p_idle_w)) * t[:, s]
    E = E + (p * S * (o.p_idle_w + o.p_node_w)) * T + o.stage_comm_energy_j[caps].sum()
    return t, tau, T, E


def lower_bounds(o) -> tuple:
    """(T_lb s, E_lb J): bounds below the step time and the energy of every decision of layout ``o``
    (any caps, layer split and placement; the limits only remove decisions), from the arithmetic of
    :func:`_times_energy`, with t_s = n_s tl[c_s] + extras, sum n_s = L, tl non-increasing in the cap.

    * T: the period is at least the mean stage time at the top cap and at least one layer plus the
      first or last stage's extra.
    * E = sum_s S m (Pb[c_s] - Pi) t_s + p S (Pi + Pn) (a tau + D) with tau >= mean_s t_s, so
      E >= sum_s S t_s (m (Pb[c_s] - Pi) + (Pi + Pn) a) + p S (Pi + Pn) D: each layer (and each
      extra) at its own best cap, the waiting and node power charged for the time it adds; also
      E >= the busy energy at the cheapest caps + p S (Pi + Pn) T_lb.  The larger of the two.

    ``o``: a :class:`LayoutOption`, or any object with its fields as arrays over N layouts (scalars
    of shape (N,), per-cap fields of shape (N, C)); the bounds then come as arrays of shape (N,).
    """
    tl, tf, tt = np.asarray(o.t_layer_s), np.asarray(o.t_first_s), np.asarray(o.t_last_s)
    L, p = o.num_layers, o.pp
    # the fastest level is the highest one allowed (a caller may mark levels no decision can use
    # with infinite times: they never count; with none left the bounds are infinite)
    lo = lambda x: np.min(x, axis=-1)
    per = np.maximum((L * lo(tl) + lo(tf) + lo(tt)) / p, lo(tl) + np.maximum(lo(tf), lo(tt)))
    a = o.microbatches + (p - 1) / o.vp
    T = a * per + o.const_time_s
    floor = o.p_idle_w + o.p_node_w
    S, m, N = o.stage_gpus, o.microbatches, o.pp * o.stage_gpus
    de = np.expand_dims(S * m, -1) * (np.asarray(o.p_busy_w) - np.expand_dims(o.p_idle_w, -1))
    busy = L * lo(de * tl) + lo(de * tf) + lo(de * tt)
    w = de + np.expand_dims(S * floor * a, -1)       # J per s of stage time, waiting and nodes included
    coupled = L * lo(w * tl) + lo(w * tf) + lo(w * tt) + N * floor * o.const_time_s
    E = np.maximum(busy + N * floor * T, coupled) + comm_energy_lb_j(o)
    return (float(T), float(E)) if np.ndim(T) == 0 else (T, E)


def comm_energy_lb_j(o):
    """Least communication energy of a step of layout ``o`` over its cap decisions, J: every stage
    at its cheapest level (``stage_comm_energy_j`` is non-decreasing in the level; arrays over
    layouts as in :func:`lower_bounds`)."""
    return o.pp * np.min(np.asarray(o.stage_comm_energy_j, dtype=np.float64), axis=-1)


def edp_lower_bound(o):
    """A bound below E x T over every decision of layout ``o`` (same conventions as
    :func:`lower_bounds`, arrays over layouts allowed).

    With x_c the share of the layers at cap level c (relaxed to a simplex), the tail's level c_t
    and the first stage's c_f: T >= a (L sum_c x_c tl[c] + tf[c_f] + tt[c_t]) / p + D and
    E >= S m sum (Pb - Pi) t + p S (Pi + Pn) T are affine in x, so E T is bounded below by the
    product of two positive affine functions.  That product is quasi-concave on the positive
    orthant (its superlevel sets are convex), so its least value over the simplex is at a vertex:
    every layer at one level.  The bound is the least product over (c, c_t, c_f)."""
    tl, tf, tt = np.asarray(o.t_layer_s), np.asarray(o.t_first_s), np.asarray(o.t_last_s)
    L, p = o.num_layers, o.pp
    a = np.asarray(o.microbatches + (p - 1) / o.vp, dtype=np.float64)
    S, m = o.stage_gpus, o.microbatches
    floor = np.asarray(o.p_idle_w + o.p_node_w, dtype=np.float64)
    N = np.asarray(o.pp * o.stage_gpus, dtype=np.float64)
    de = np.expand_dims(S * m, -1) * (np.asarray(o.p_busy_w) - np.expand_dims(o.p_idle_w, -1))
    ex = lambda x, k: np.asarray(x, dtype=np.float64)[..., None, None, None]
    # axes (..., c, c_t, c_f)
    t_sum = (L * tl)[..., :, None, None] + tt[..., None, :, None] + tf[..., None, None, :]
    with np.errstate(invalid="ignore"):
        e_busy = (L * de * tl)[..., :, None, None] + (de * tt)[..., None, :, None] + (de * tf)[..., None, None, :]
    T = ex(a, 0) * t_sum / ex(np.asarray(p, dtype=np.float64), 0) + ex(np.asarray(o.const_time_s, dtype=np.float64), 0)
    E = e_busy + ex(N * floor, 0) * T + ex(comm_energy_lb_j(o), 0)
    with np.errstate(invalid="ignore"):
        v = E * T
    v = np.where(np.isnan(v), np.inf, v)
    out = v.reshape(v.shape[:-3] + (-1,)).min(axis=-1)
    return float(out) if np.ndim(out) == 0 else out


def _default_blocks(g: _Geom) -> list:
    return [0] * g.p if g.whole else [s % g.Q for s in range(g.p)]


def evaluate(instance: Instance, layout: int, caps: Sequence[int], layers: Sequence[int],
             blocks: Sequence[int] | None = None, *, objective: str = "evaluated",
             status: str = "evaluated", solve_time_s: float = 0.0, num_solves: int = 0) -> Solution:
    """Evaluate one decision exactly (times, energy, per-GPU power and temperature, violations).

    Args:
        instance: the :class:`Instance`.
        layout: index k of the layout in ``instance.options``.
        caps: per stage (length p), the cap level index 0..C-1.
        layers: per stage, layers n_s >= 1 summing to L.
        blocks: per stage, the slot block (0..G/S - 1) it takes inside its node when S < G; each
            node's stages must take distinct blocks.  None: Megatron's default (stage order).
            Ignored when S >= G.
        objective, status, solve_time_s, num_solves: copied into the :class:`Solution`
            (``objective_value`` is computed for 'energy', 'time', 'edp').

    Returns:
        A :class:`Solution`; ``violations`` lists the temperature, node-power and memory limits it
        breaks (relative tolerance ``FEAS_RTOL``).  The step-time slack is not checked here.

    Raises:
        ValueError: wrong lengths, cap index out of range, n_s < 1, sum n_s != L, bad blocks.
    """
    inst = instance
    o = inst.options[layout]
    g = _geom(inst, o)
    C = len(inst.cap_levels_w)
    caps = [int(c) for c in caps]
    layers = [int(n) for n in layers]
    if len(caps) != o.pp or len(layers) != o.pp:
        raise ValueError(f"caps and layers need {o.pp} entries (one per stage)")
    if any(c < 0 or c >= C for c in caps):
        raise ValueError(f"cap level index out of range 0..{C - 1}: {caps}")
    if any(n < 1 for n in layers) or sum(layers) != o.num_layers:
        raise ValueError(f"layers must be >= 1 and sum to {o.num_layers}: {layers}")
    blocks = _default_blocks(g) if (blocks is None or g.whole) else [int(b) for b in blocks]
    if not g.whole:
        for q, st in enumerate(g.node_stages):
            if sorted(blocks[s] for s in st) != list(range(g.Q)):
                raise ValueError(f"node {q}: stages {st} must take distinct blocks 0..{g.Q - 1}, got "
                                 f"{[blocks[s] for s in st]}")
    t, tau, T, E = _times_energy(o, caps, np.array([layers]))
    pb, ph, pbud = o.p_busy_w, o.p_thermal_w, o.p_budget_w
    rows, viol = [], []
    tlim = inst.max_temp_c + FEAS_RTOL * abs(inst.max_temp_c)
    slot_blocks, worst_t, worst_p = [], -np.inf, -np.inf
    for q, st in enumerate(g.node_stages):
        p_slot, h_slot, b_slot = np.empty(g.G), np.empty(g.G), np.empty(g.G)
        stage_of = np.empty(g.G, dtype=int)
        for s in st:
            sl = list(g.blocks[blocks[s]])
            p_slot[sl], h_slot[sl], b_slot[sl] = pb[caps[s]], ph[caps[s]], pbud[caps[s]]
            stage_of[sl] = s
        temps = _node_temps(inst, h_slot)
        worst_t, worst_p = max(worst_t, float(temps.max())), max(worst_p, float(b_slot.sum()))
        rows.extend(GpuRow(q, j, int(stage_of[j]), float(p_slot[j]), float(temps[j])) for j in range(g.G))
    for s in range(o.pp):
        slot_blocks.append(tuple(g.blocks[blocks[s]]))
    if worst_t > tlim:
        viol.append(f"temperature {worst_t:.3f} C > max {inst.max_temp_c} C")
    if o.max_layers_per_stage and max(layers) > o.max_layers_per_stage:
        viol.append(f"a stage has {max(layers)} layers > {o.max_layers_per_stage} (the interleaved schedule's even split)")
    if worst_p > inst.node_power_budget_w * (1 + FEAS_RTOL):
        viol.append(f"node power {worst_p:.1f} W > budget {inst.node_power_budget_w} W")
    need = o.mem_fixed_bytes + np.array(layers) * o.mem_per_layer_bytes
    if np.any(need > inst.hbm_bytes * (1 + FEAS_RTOL)):
        viol.append(f"memory {float(need.max()):.4g} B > HBM {inst.hbm_bytes:.4g} B")
    Tf, Ef = float(T[0]), float(E[0])
    return Solution(
        objective=objective, objective_value=_objective_value(objective, Tf, Ef), layout_index=layout,
        layout_name=o.name, cap_levels=tuple(caps), caps_w=tuple(inst.cap_levels_w[c] for c in caps),
        layers=tuple(layers), slot_blocks=tuple(slot_blocks), stage_nodes=g.stage_nodes,
        stage_time_s=tuple(float(v) for v in t[0]), tau_s=float(tau[0]), step_time_s=Tf, energy_j=Ef,
        gpus=tuple(rows), status=status, solve_time_s=solve_time_s, num_solves=num_solves,
        violations=tuple(viol))
