"""Brute-force oracle and random instances for the ILP tests and benchmarks/ilp.py (not library code).

:func:`brute_force` (and :func:`brute_force_front`) enumerate every decision of an
:class:`costmodel.ilp.Instance` with the same constraints, objectives and floating-point arithmetic
as :func:`costmodel.ilp.solve`; :func:`random_instance` draws physically plausible instances.
"""
from __future__ import annotations

import itertools
import math
import time
from typing import Iterator

import numpy as np

from costmodel.ilp import FEAS_RTOL, InfeasibleError, Instance, LayoutOption, Solution, evaluate
from costmodel.ilp.evaluation import _geom, _mem_ok, _node_ok, _times_energy
from costmodel.ilp.instance import _ROW_SLACK, _check_objective

__all__ = ["brute_force", "brute_force_front", "random_instance"]


# -------------------------------------------------------------------------------- brute force

def _compositions(L: int, p: int) -> np.ndarray:
    """All compositions of L into p positive parts, shape (C(L-1, p-1), p)."""
    rows = [np.diff((0,) + bars + (L,)) for bars in itertools.combinations(range(1, L), p - 1)]
    return np.array(rows, dtype=int).reshape(-1, p)


def _brute_points(inst: Instance) -> Iterator:
    """Every feasible (k, caps, blocks, layers (N, p), T (N,), E (N,)) group, exhaustively."""
    for k, o in enumerate(inst.options):
        g = _geom(inst, o)
        comps = _compositions(o.num_layers, o.pp)
        comps = comps[_mem_ok(inst, o, comps)]
        if not len(comps):
            continue
        pb = o.p_busy_w
        cache = {}

        def node_place(node_caps):
            """First feasible assignment of the node's stages (in order) to blocks, or None."""
            if node_caps not in cache:
                cache[node_caps] = None
                for perm in itertools.permutations(range(g.Q)):
                    ps = np.empty(g.G)
                    for i, b in enumerate(perm):
                        ps[list(g.blocks[b])] = pb[node_caps[i]]
                    # at the MIP's own slack on its temperature and power rows (_ROW_SLACK < FEAS_RTOL, so
                    # that a MIP solution passes evaluate): a placement inside the band between them is
                    # feasible to evaluate but not to the MIP, and would make the oracle 'better'
                    if _node_ok(inst, ps, _ROW_SLACK):
                        cache[node_caps] = perm
                        break
            return cache[node_caps]

        for caps in itertools.product(range(len(inst.cap_levels_w)), repeat=o.pp):
            blocks = [0] * o.pp
            ok = True
            for st in g.node_stages:
                perm = node_place(tuple(caps[s] for s in st)) if not g.whole else node_place((caps[st[0]],))
                if perm is None:
                    ok = False
                    break
                if not g.whole:
                    for s, b in zip(st, perm):
                        blocks[s] = b
            if not ok:
                continue
            _, _, T, E = _times_energy(o, caps, comps)
            yield k, caps, blocks, comps, T, E


def brute_force(instance: Instance, objective: str = "energy") -> Solution:
    """Exhaustive optimum: every layout x cap assignment per stage x composition of L into p positive
    parts x placement of each node's stages on its slot blocks (same constraints, same objective and
    EDP definition, same step-time slack rule as :func:`solve`; ties in 'time' broken by energy).

    Only for small instances (cost ~ K C^p C(L-1, p-1) (G/S)!).

    Raises:
        InfeasibleError: nothing feasible (binding family 'unknown'; use :func:`solve` for the diagnosis).
        ValueError: unknown objective.
    """
    _check_objective(objective)
    t0 = time.perf_counter()
    groups = list(_brute_points(instance))
    if not groups:
        raise InfeasibleError("unknown", "brute force: no feasible decision")
    T_min = min(float(T.min()) for *_, T, _ in groups)
    T_bound = math.inf
    if instance.step_time_slack is not None and objective != "time":
        T_bound = (1 + instance.step_time_slack) * T_min * (1 + FEAS_RTOL)
    best, best_key = None, None
    for k, caps, blocks, comps, T, E in groups:
        ok = T <= T_bound
        if not np.any(ok):
            continue
        if objective == "energy":
            key = np.where(ok, E, np.inf)
            keys = np.stack([key, T])
        elif objective == "time":
            keys = np.stack([T, E])
        else:
            keys = np.stack([np.where(ok, E * T, np.inf), T])
        i = int(np.lexsort(keys[::-1])[0])
        cand = (float(keys[0, i]), float(keys[1, i]))
        if best_key is None or cand < best_key:
            best_key, best = cand, (k, caps, blocks, comps[i])
    k, caps, blocks, layers = best
    return evaluate(instance, k, caps, layers, blocks, objective=objective, status="brute-force",
                    solve_time_s=time.perf_counter() - t0)


def brute_force_front(instance: Instance) -> list:
    """Exhaustive time-energy Pareto front: list of (T s, E J, Solution), fastest first (respects
    the step-time slack).  Only for small instances."""
    groups = list(_brute_points(instance))
    if not groups:
        raise InfeasibleError("unknown", "brute force: no feasible decision")
    T_min = min(float(T.min()) for *_, T, _ in groups)
    T_bound = math.inf if instance.step_time_slack is None else \
        (1 + instance.step_time_slack) * T_min * (1 + FEAS_RTOL)
    pts = []
    for k, caps, blocks, comps, T, E in groups:
        for i in np.flatnonzero(T <= T_bound):
            pts.append((float(T[i]), float(E[i]), k, caps, blocks, comps[i]))
    pts.sort(key=lambda r: (r[0], r[1]))
    out, best_e = [], math.inf
    for T, E, k, caps, blocks, layers in pts:
        if E < best_e:
            best_e = E
            out.append((T, E, evaluate(instance, k, caps, layers, blocks, objective="edp", status="brute-force")))
    return out


# --------------------------------------------------------------------------- synthetic instances

def random_instance(rng: np.random.Generator, *, num_layouts: int = 3, gpus_per_node: int = 8,
                    num_nodes: int = 1, num_caps: int = 3, pp_range: tuple = (2, 4), max_layers: int = 8,
                    num_layers: int | None = None, fill: bool = False, cooling: str | None = None,
                    slack: float | None = None) -> Instance:
    """A random, physically plausible :class:`Instance` (tests and benchmarks/ilp.py).

    Caps spread over 250-700 W; per-layer time grows as the cap drops below the layout's demand
    (t = t0 (1 + a (1 - P/demand)) style, non-increasing in the cap); busy power = min(cap, demand);
    memory per layer falls with the stage index (1F1B in-flight micro-batches); air cooling has
    cooler front slots (first half) preheating the rear half, liquid cooling has no preheating.
    Limits (max temperature, node power, HBM) are drawn around the values the caps produce, so
    they bind in some instances and not in others.

    Args:
        rng: numpy Generator.  num_layouts: K.  gpus_per_node, num_nodes: cluster shape.
        num_caps: C.  pp_range: (min, max) pipeline stages.  max_layers: L is drawn in
        [p, max_layers] unless ``num_layers`` fixes it.  fill: every layout uses all GPUs
        (p S = G x num_nodes).  cooling: 'air', 'liquid' or None (random).  slack: step_time_slack.

    Raises:
        ValueError: no (p, S) pair fits the cluster shape.
    """
    G, N = gpus_per_node, gpus_per_node * num_nodes
    s_vals = [d for d in range(1, G + 1) if G % d == 0] + list(range(2 * G, N + 1, G))
    pairs = [(p, S) for p in range(pp_range[0], pp_range[1] + 1) for S in s_vals
             if (p * S) % G == 0 and p * S <= N and (not fill or p * S == N)]
    if not pairs:
        raise ValueError(f"no (pp, stage_gpus) fits {num_nodes} nodes of {G} GPUs with pp in {pp_range}")
    caps = np.sort(rng.uniform(250, 700, num_caps))
    while np.any(np.diff(caps) < 5):
        caps = np.sort(rng.uniform(250, 700, num_caps))
    opts = []
    pb_all = []
    for k in range(num_layouts):
        p, S = pairs[rng.integers(len(pairs))]
        L = int(num_layers) if num_layers is not None else int(rng.integers(p, max(p, max_layers) + 1))
        demand = rng.uniform(450, 800)
        sens = rng.uniform(0.2, 1.0)
        factor = 1 + sens * np.maximum(0.0, 1 - caps / demand)
        t0 = rng.uniform(1e-3, 4e-3)
        idle = rng.uniform(60, 120)
        pb = np.minimum(caps, demand) * rng.uniform(0.85, 1.0)
        pb = np.maximum(pb, idle)
        pb_all.append(pb)
        mpl = rng.uniform(0.5e9, 2e9) * (1 + (p - 1 - np.arange(p)) / p)
        mf = rng.uniform(5e9, 20e9, p)
        const = float(rng.uniform(0, 0.05))
        # the stage's exposed communication at the link phase's power held at each cap (above the wait)
        comm = S * np.maximum(np.minimum(rng.uniform(150, 400), caps) - idle, 0.0) * const * rng.uniform(0, 1)
        opts.append(LayoutOption(
            name=f"L{k}-pp{p}-s{S}", pp=p, stage_gpus=S, num_layers=L,
            microbatches=int(rng.integers(1, 9)), vp=int(rng.integers(1, 3)),
            const_time_s=const, t_layer_s=t0 * factor,
            t_first_s=rng.uniform(0, 1.0) * t0 * factor, t_last_s=rng.uniform(0, 2.5) * t0 * factor,
            p_busy_w=pb, p_idle_w=idle, mem_fixed_bytes=mf, mem_per_layer_bytes=mpl, stage_comm_energy_j=comm))
    cooling = cooling or ("air" if rng.random() < 0.7 else "liquid")
    inlet = rng.uniform(20, 30, G)
    r_th = rng.uniform(0.03, 0.08, G)
    pre = np.zeros((G, G))
    if cooling == "air":
        half = G // 2
        inlet[half:] += rng.uniform(0, 5, G - half)
        pre[:half, half:] = rng.uniform(0.002, 0.01, (half, G - half))
    pb_all = np.array(pb_all)
    lo = float(np.max(inlet + (pre.sum(0) + r_th) * pb_all.min()))
    hi = float(np.max(inlet + (pre.sum(0) + r_th) * pb_all.max()))
    # each limit family is tight (drawn inside the range the caps produce) with probability 0.6
    tmax = rng.uniform(lo, lo + 0.7 * (hi - lo)) if rng.random() < 0.6 else hi + 5
    budget = G * (rng.uniform(pb_all.min(), pb_all.max()) if rng.random() < 0.6 else 1.2 * pb_all.max())
    need = max(float(np.max(o.mem_fixed_bytes + o.mem_per_layer_bytes * (o.num_layers / o.pp))) for o in opts)
    hbm = need * (rng.uniform(0.8, 1.3) if rng.random() < 0.6 else 3.0)
    return Instance(options=tuple(opts), cap_levels_w=tuple(caps), gpus_per_node=G, num_nodes=num_nodes,
                    hbm_bytes=hbm, inlet_c=inlet, r_th_c_per_w=r_th, preheat_c_per_w=pre,
                    max_temp_c=max(float(tmax), float(inlet.min()) + 1), node_power_budget_w=budget,
                    step_time_slack=slack)
