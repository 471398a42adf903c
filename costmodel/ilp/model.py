"""The MIP (PuLP model) of one instance: layout choice, per-stage caps and layers (Glover linearisation),
period levels over a window of explicit patterns, counts for interchangeable stages, block-cap
placement with thermal and node-power rows, symmetry breaking; read-back of the rounded decision.

The formulation is described in the :mod:`costmodel.ilp` docstring.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pulp

from .evaluation import _Geom, _geom, _node_temps, comm_energy_lb_j
from .instance import FEAS_RTOL, _ROW_SLACK, Instance, LayoutOption

_MAX_PATTERNS = 1500      # window patterns per layout (see _period_window); above it only the Glover bounds


def _mem_bound(inst: Instance, o: LayoutOption, s: int, cap: int) -> int:
    """Largest n <= cap with mem_fixed[s] + n mem_per_layer[s] within HBM (same test as evaluate), or 0."""
    mf, ml = float(o.mem_fixed_bytes[s]), float(o.mem_per_layer_bytes[s])
    lim = inst.hbm_bytes * (1 + FEAS_RTOL)
    if ml <= 0:
        return cap if mf <= lim else 0
    n = int(min(cap, max(0.0, math.floor((lim - mf) / ml) + 1)))
    while n > 0 and mf + n * ml > lim:
        n -= 1
    return n


def _block_symmetry(inst: Instance, g: _Geom) -> list:
    """Pairs (b, b') of blocks, b < b', consecutive within classes of thermally interchangeable blocks."""
    if g.whole or g.Q < 2:
        return []

    def swappable(a, b):
        perm = np.arange(g.G)
        for i, j in zip(g.blocks[a], g.blocks[b]):
            perm[i], perm[j] = j, i
        return (np.array_equal(inst.inlet_c[perm], inst.inlet_c)
                and np.array_equal(inst.r_th_c_per_w[perm], inst.r_th_c_per_w)
                and np.array_equal(inst.preheat_c_per_w[np.ix_(perm, perm)], inst.preheat_c_per_w))

    parent = list(range(g.Q))

    def find(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for a in range(g.Q):
        for b in range(a + 1, g.Q):
            if find(a) != find(b) and swappable(a, b):
                parent[find(b)] = find(a)
    classes = {}
    for b in range(g.Q):
        classes.setdefault(find(b), []).append(b)
    return [(c[i], c[i + 1]) for c in classes.values() for i in range(len(c) - 1)]


def _period_window(o: LayoutOption, Usc: list, extra: list, tau_max: float, tau_min: float = 0.0,
                   max_patterns: int = _MAX_PATTERNS):
    """Split each stage's layer range at cap c into a low part (n tl[c] + extra <= tau_lb: the period
    can never bind) and a window of explicit patterns n with tau_lb < n tl[c] + extra <= tau_max.

    tau_lb is a valid lower bound on the period of any feasible decision of the layout (the busiest
    stage holds >= ceil(L/p) layers, and the period is >= the mean stage time) at the fastest cap.
    Returns (tau_lb, base[s][c] = size of the low part, window[s][c] = [(n, theta)]); with tau_max
    infinite or more than ``max_patterns`` patterns, the window is empty and base = Usc."""
    p, L = o.pp, o.num_layers
    full = [dict(r) for r in Usc]
    empty = [{} for _ in range(p)]
    if not math.isfinite(tau_max):
        return 0.0, full, empty
    caps_used = sorted({c for r in Usc for c in r})
    tl_min = min(float(o.t_layer_s[c]) for c in caps_used)
    tf_min = min(float(o.t_first_s[c]) for c in caps_used)
    tt_min = min(float(o.t_last_s[c]) for c in caps_used)
    lb = max(math.ceil(L / p) * tl_min, (L * tl_min + tf_min + tt_min) / p,
             tl_min + tf_min + (tt_min if p == 1 else 0.0), tl_min + tt_min)
    tau_lb = max(lb * (1 - 1e-9), tau_min)
    hi = tau_max * (1 + 1e-9)
    base = [{} for _ in range(p)]
    window = [{} for _ in range(p)]
    count = 0
    for s in range(p):
        for c, U in Usc[s].items():
            tl, ex = float(o.t_layer_s[c]), extra[s][c]
            nb, pats = 0, []
            for m in range(1, U + 1):
                th = m * tl + ex
                if th <= tau_lb:
                    nb = m
                elif th <= hi:
                    pats.append((m, th))
                else:
                    break
            base[s][c] = nb
            if pats:
                window[s][c] = pats
                count += len(pats)
    if count > max_patterns:
        return 0.0, full, empty
    return tau_lb, base, window


def _tau_max(o: LayoutOption, T_max: float, E_max: float, weighted: tuple | None) -> float:
    """Bound on the period of layout ``o`` from T <= T_max, from E <= E_max (the idle energy
    p S Pi T grows with tau) and from the weighted sum E + lam T <= V; inf when unbounded."""
    pb, L = o.p_busy_w, o.num_layers
    a, Em, idle = o.periods, o.stage_gpus * o.microbatches, o.num_gpus * (o.p_idle_w + o.p_node_w)
    tau_max = math.inf
    if math.isfinite(T_max):
        tau_max = (T_max - o.const_time_s) / a
    if math.isfinite(E_max) and idle > 0:
        de = Em * (pb - o.p_idle_w)
        ce_lb = (float(np.min(de * o.t_layer_s)) * L + float(np.min(de * o.t_first_s))
                 + float(np.min(de * o.t_last_s)))
        tau_max = min(tau_max, ((E_max - float(comm_energy_lb_j(o)) - ce_lb) / idle - o.const_time_s) / a)
    if weighted is not None:
        # E + lam T <= V with E >= ce_lb + idle T: T <= (V - ce_lb) / (idle + lam)
        lam, V = weighted
        de = Em * (pb - o.p_idle_w)
        ce_lb = (float(np.min(de * o.t_layer_s)) * L + float(np.min(de * o.t_first_s))
                 + float(np.min(de * o.t_last_s)))
        if idle + lam > 0:
            tau_max = min(tau_max, ((V * (1 + _ROW_SLACK) - float(comm_energy_lb_j(o)) - ce_lb) / (idle + lam)
                                    - o.const_time_s) / a)
    return tau_max


def _layer_bounds(o: LayoutOption, allowed: list, U: list, extra: list, tau_max: float) -> list:
    """Glover bounds U_sc: per stage, cap -> most layers (memory bound U[s], and
    floor((tau_max - extra_sc) / tl[c]) when the period is bounded); caps with U_sc < 1 left out."""
    Usc = []
    for s in range(o.pp):
        row = {}
        for c in allowed:
            u_ = U[s]
            if math.isfinite(tau_max):
                room = (tau_max - extra[s][c]) * (1 + 1e-9)
                u_ = min(u_, math.floor(room / o.t_layer_s[c]) if room >= 0 else 0)
            if u_ >= 1:
                row[c] = int(u_)
        Usc.append(row)
    return Usc


def _units(g: _Geom, free: bool, grouped: bool) -> list:
    """Stages modelled together: single stages, or (``grouped``: strict mode, bounded period) groups
    of interchangeable middle stages -- same bounds, and identical nodes (S >= G or placement-free)
    or the same node (S < G) -- modelled by counts (exact: only the multiset of (cap, layers) of a
    group matters)."""
    p = g.p
    if grouped and p > 2:
        groups = {}
        for s in range(1, p - 1):
            groups.setdefault(None if g.whole or free else s // g.Q, []).append(s)
        return [[0]] + list(groups.values()) + [[p - 1]]
    return [[s] for s in range(p)]


def _unit_patterns(lay: _Lay, st: list, caps_u: list):
    """Low range shared by all stages of the unit (cap -> layers) and the explicit patterns
    (c, m) -> theta (None below tau_lb, where the period cannot bind)."""
    low = {c: min(lay.base[s][c] for s in st) for c in caps_u}
    pats = {}
    for s in st:
        for c in caps_u:
            for m in range(low[c] + 1, lay.base[s][c] + 1):
                pats[c, m] = None
            for m, th in lay.window[s].get(c, []):
                pats[c, m] = th
    return low, pats


def _yterms(Yv: list, s: int, c: int, coef: float = 1.0) -> list:
    """Terms (variable, coef) of the variables that put stage (unit) s at cap c."""
    return [(var, coef) for var in Yv[s].get(c, [])]


@dataclass
class _Lay:
    """A layout while its variables and rows are built (see :class:`_Model`)."""

    k: int
    o: LayoutOption
    g: _Geom
    x: pulp.LpVariable      # the layout is chosen
    tau: pulp.LpVariable    # its period / ts
    ts: float               # period scale, s
    v: dict                 # theta -> period-level binary v_theta = [tau >= theta]
    U: list                 # per stage, memory bound on its layers
    Usc: list               # per stage, cap -> Glover bound U_sc
    base: list              # per stage, cap -> size of the low range
    window: list            # per stage, cap -> [(layers, theta)] explicit patterns
    extra: list             # per stage, per cap: extra time of the first / last stage, s
    Yv: list                # per unit, at its first stage: cap -> variables of that cap
    nexpr: list             # per single stage: its layer expression


class _Model:
    """The PuLP model for one instance.

    ``relax`` names limit families given a slack variable (infeasibility diagnosis).  ``T_max`` and
    ``E_max`` (s, J) are bounds that the caller will impose through the ``tbound``/``ebound`` rows;
    they are also used to tighten the Glover bounds: a stage at cap c can hold at most
    U_sc = floor((tau_max - extra_sc) / tl[c]) layers when tau <= tau_max, with tau_max from
    T <= T_max (tau <= (T_max - D)/(m + (p-1)/v)) and from E <= E_max (the idle energy
    p S Pi T grows with tau).  Caps with U_sc < 1 are dropped for that stage.  Both tightenings are
    exact (they only remove decisions violating the bounds).
    """

    def __init__(self, inst: Instance, relax=(), T_max: float = math.inf, E_max: float = math.inf,
                 T_rtol: float = _ROW_SLACK, E_rtol: float = _ROW_SLACK, T_min: float = 0.0,
                 weighted: tuple | None = None):
        self.inst, self.relax = inst, frozenset(relax)
        T_max, E_max = T_max * (1 + T_rtol), E_max * (1 + E_rtol)
        T_min = T_min * (1 - _ROW_SLACK)
        self.T_max, self.E_max = T_max, E_max
        Tmax, B, H = inst.max_temp_c, inst.node_power_budget_w, inst.hbm_bytes
        self.tlim = Tmax + FEAS_RTOL * abs(Tmax)
        self.blim = B * (1 + FEAS_RTOL)
        self.prob = pulp.LpProblem("layout_cap_placement", pulp.LpMinimize)
        self.sig = {f: pulp.LpVariable(f"sig_{f}", lowBound=0) for f in self.relax}
        self.limits = {"temperature": Tmax, "node_power": B, "memory": H}
        self.strict = not self.relax
        self.lay = []
        self.solves = 0
        # reference scales (rows and objectives are O(1))
        self.T_ref = min(o.periods * (math.ceil(o.num_layers / o.pp) * o.t_layer_s[-1]
                                      + o.t_first_s[-1] + o.t_last_s[-1]) + o.const_time_s
                         for o in inst.options)
        self.E_ref = min(o.num_gpus * o.p_busy_w[-1] for o in inst.options) * self.T_ref
        self.T_terms, self.E_terms = [], []
        self.colsum = inst.preheat_c_per_w.sum(axis=0)
        for k, o in enumerate(inst.options):
            self.lay.append(self._add_layout(k, o, T_max, E_max, T_min, weighted))
        xs = [d["x"] for d in self.lay if d is not None]
        self.empty = not xs
        if self.empty:
            return
        self.prob += pulp.lpSum(xs) == 1, "one_layout"
        self.T_expr = pulp.LpAffineExpression(self.T_terms)
        self.E_expr = pulp.LpAffineExpression(self.E_terms)
        self.tbound = self.T_expr <= 1e9
        self.ebound = self.E_expr <= 1e9
        self.prob += self.tbound, "tbound"
        self.prob += self.ebound, "ebound"
        self.set_bounds(T_max, E_max)

    # ------------------------------------------------------------------ building
    def _add_layout(self, k: int, o: LayoutOption, T_max: float, E_max: float, T_min: float,
                    weighted: tuple | None) -> dict | None:
        """Variables and rows of layout k; None when no decision of it meets the limits and bounds."""
        inst, prob = self.inst, self.prob
        C = len(inst.cap_levels_w)
        g = _geom(inst, o)
        p, L = o.pp, o.num_layers
        a, idle = o.periods, o.num_gpus * (o.p_idle_w + o.p_node_w)
        allowed = self._allowed_caps(o, g)
        # per-stage layer bounds: memory, and the period bound from T_max / E_max
        Lcap = L - (p - 1)
        U = [Lcap if "memory" in self.relax else _mem_bound(inst, o, s, Lcap) for s in range(p)]
        if o.max_layers_per_stage:
            U = [min(u, o.max_layers_per_stage) for u in U]
        extra = [[(o.t_first_s[c] if s == 0 else 0.0) + (o.t_last_s[c] if s == p - 1 else 0.0)
                  for c in range(C)] for s in range(p)]
        tau_max = _tau_max(o, T_max, E_max, weighted)
        tau_min = max(0.0, (T_min - o.const_time_s) / a) if T_min > 0 else 0.0
        if tau_min > tau_max:
            return None
        Usc = _layer_bounds(o, allowed, U, extra, tau_max)
        if not allowed or any(not r for r in Usc) or sum(max(r.values()) for r in Usc) < L:
            return None
        # period levels and window patterns (only when tau is bounded)
        tau_lb, base, window = _period_window(o, Usc, extra, tau_max, tau_min)
        has_window = any(window[s] for s in range(p))
        x = pulp.LpVariable(f"x_{k}", cat="Binary")
        ts = max(math.ceil(L / p) * float(o.t_layer_s[-1]), 1e-30)   # tau scale, s
        tau = pulp.LpVariable(f"tau_{k}", lowBound=0)                 # tau / ts
        v = self._add_period_levels(k, x, tau, ts, tau_lb, window)
        lay = _Lay(k, o, g, x, tau, ts, v, U, Usc, base, window, extra, Yv=[None] * p, nexpr=[None] * p)
        # S < G with no thermal or power row able to bind (every slot cool enough and the node
        # under budget even with every block at the highest allowed busy power): placement is
        # irrelevant and the layout is treated like whole-node stages (exact)
        free = self._placement_free(o, g, allowed)
        units = _units(g, free, self.strict and has_window)
        single = {st[0] for st in units if len(st) == 1}
        layer_terms, ulist = [], []
        for ui, st in enumerate(units):
            ulist.append(self._add_unit(lay, ui, st, layer_terms))
        prob += pulp.LpAffineExpression(layer_terms + [(x, -float(L))]) == 0, f"layers_{k}"
        self.T_terms += [(tau, a * ts / self.T_ref), (x, o.const_time_s / self.T_ref)]
        self.E_terms += [(tau, idle * a * ts / self.E_ref),
                         (x, idle * o.const_time_s / self.E_ref)]
        # thermal / node power
        u = None
        if g.whole:
            self._add_whole_node_rows(lay)
        elif not free:
            u = [self._add_node_placement(lay, q, st) for q, st in enumerate(lay.g.node_stages)]
        if self.strict:
            self._add_stage_symmetry(lay, single)
        return dict(k=k, x=x, units=ulist, u=u, g=g)

    def _allowed_caps(self, o: LayoutOption, g: _Geom) -> list:
        """Caps allowed by the thermal / power pre-filters (exact; skipped for a relaxed family)."""
        inst = self.inst
        C, G = len(inst.cap_levels_w), inst.gpus_per_node
        S, pb, ph = o.stage_gpus, o.p_budget_w, o.p_thermal_w
        tlim, blim = self.tlim, self.blim
        allowed = []
        pmin, hmin = float(pb.min()), float(ph.min())
        for c in range(C):
            ok = True
            if g.whole:
                need_t = float(np.max(inst.inlet_c + (self.colsum + inst.r_th_c_per_w) * ph[c]))
                if "temperature" not in self.relax and need_t > tlim:
                    ok = False
                if "node_power" not in self.relax and G * pb[c] > blim:
                    ok = False
            else:
                if "temperature" not in self.relax:
                    fits = False
                    for b in range(g.Q):
                        ps = np.full(G, hmin)
                        ps[list(g.blocks[b])] = ph[c]
                        if np.all(_node_temps(inst, ps) <= tlim):
                            fits = True
                            break
                    ok = ok and fits
                if "node_power" not in self.relax and S * pb[c] + (G - S) * pmin > blim:
                    ok = False
            if ok:
                allowed.append(c)
        return allowed

    def _placement_free(self, o: LayoutOption, g: _Geom, allowed: list) -> bool:
        """S < G and (strict mode) no thermal or node-power row can bind at the highest allowed cap."""
        inst, S, pb, ph = self.inst, o.stage_gpus, o.p_budget_w, o.p_thermal_w
        Tmax, B, G = inst.max_temp_c, inst.node_power_budget_w, inst.gpus_per_node
        return (not g.whole and self.strict
                and g.Q * S * max(pb[c] for c in allowed) <= B * (1 + _ROW_SLACK)
                and bool(np.all(_node_temps(inst, np.full(G, max(ph[c] for c in allowed)))
                                <= Tmax + _ROW_SLACK * abs(Tmax))))

    def _add_period_levels(self, k: int, x, tau, ts: float, tau_lb: float, window: list) -> dict:
        """Level binaries v_theta over the sorted window times: a chain under x, and
        tau >= tau_lb x + sum_i (theta_i - theta_{i-1}) v_thetai (all in units of ts)."""
        prob, p = self.prob, len(window)
        thetas = sorted({th for s in range(p) for c in window[s] for _, th in window[s][c]})
        v = {th: pulp.LpVariable(f"v_{k}_{i}", cat="Binary") for i, th in enumerate(thetas)}
        if thetas:
            prob += v[thetas[0]] - x <= 0, f"lvx_{k}"
            for i in range(1, len(thetas)):
                prob += v[thetas[i]] - v[thetas[i - 1]] <= 0, f"lvchain_{k}_{i}"
            steps = [(v[th], (th - (thetas[i - 1] if i else tau_lb)) / ts) for i, th in enumerate(thetas)]
            prob += tau - pulp.LpAffineExpression(steps + [(x, tau_lb / ts)]) >= 0, f"lvtau_{k}"
        return v

    def _add_unit(self, lay: _Lay, ui: int, st: list, layer_terms: list) -> dict:
        """Variables and rows of unit ``ui`` (stages ``st``): Glover pairs K/Z over the low range and
        pattern variables N, the Hall rows, the period-level rows, (single stage) the exact period
        and relaxed memory rows, and the energy terms.  Appends the unit's layer terms to
        ``layer_terms``; returns its read-back record."""
        prob, k, x, o = self.prob, lay.k, lay.x, lay.o
        s0, M = st[0], len(st)
        cat = "Binary" if M == 1 else "Integer"
        caps_u = sorted(lay.Usc[s0])
        # low range shared by all stages of the unit; the rest are explicit patterns
        low, pats = _unit_patterns(lay, st, caps_u)
        Kc = {c: pulp.LpVariable(f"K_{k}_{ui}_{c}", lowBound=0, upBound=M, cat=cat)
              for c in caps_u if low[c] >= 1}
        Zc = {c: pulp.LpVariable(f"Z_{k}_{ui}_{c}", lowBound=0, upBound=M * low[c], cat="Integer")
              for c in Kc}
        Nc = {cm: pulp.LpVariable(f"N_{k}_{ui}_{cm[0]}_{cm[1]}", lowBound=0, upBound=M, cat=cat)
              for cm in sorted(pats)}
        prob += pulp.lpSum(Kc.values()) + pulp.lpSum(Nc.values()) - M * x == 0, f"onecap_{k}_{ui}"
        for c in Kc:
            prob += Zc[c] - Kc[c] >= 0, f"zlo_{k}_{ui}_{c}"
            prob += Zc[c] - low[c] * Kc[c] <= 0, f"zhi_{k}_{ui}_{c}"
        self._add_hall_rows(k, ui, st, lay.U, Nc)
        self._add_level_rows(k, ui, M, pats, Nc, lay.v)
        lay_terms = [(Zc[c], 1.0) for c in Kc] + [(Nc[cm], float(cm[1])) for cm in Nc]
        layer_terms += lay_terms
        Yv = {c: ([Kc[c]] if c in Kc else []) + [Nc[cm] for cm in Nc if cm[0] == c] for c in caps_u}
        lay.Yv[s0] = {c: vs for c, vs in Yv.items() if vs}
        if M == 1:
            self._add_single_stage_rows(lay, ui, s0, Kc, Zc, Nc, lay_terms)
        Em, ec = o.stage_gpus * o.microbatches, o.stage_comm_energy_j
        for c in Kc:
            dp = Em * (o.p_busy_w[c] - o.p_idle_w)
            self.E_terms.append((Zc[c], dp * o.t_layer_s[c] / self.E_ref))
            if lay.extra[s0][c] or ec[c]:      # the stage's extra time and its communication at cap c
                self.E_terms.append((Kc[c], (dp * lay.extra[s0][c] + ec[c]) / self.E_ref))
        for c, m in Nc:
            dp = Em * (o.p_busy_w[c] - o.p_idle_w)
            self.E_terms.append((Nc[c, m], (dp * (m * o.t_layer_s[c] + lay.extra[s0][c]) + ec[c]) / self.E_ref))
        return dict(stages=st, K=Kc, Z=Zc, N=Nc, U=[lay.U[s] for s in st])

    def _add_hall_rows(self, k: int, ui: int, st: list, U: list, Nc: dict):
        """Stages of a unit differ at most in their memory bound U_s (nested): the patterns fit iff,
        for every threshold t, #patterns with more than t layers <= #stages with U_s > t (Hall's
        condition for nested neighbourhoods)."""
        Us = sorted({U[s] for s in st})
        for t_ in Us[:-1]:
            big = [(Nc[cm], 1.0) for cm in Nc if cm[1] > t_]
            if big:
                self.prob += (pulp.LpAffineExpression(big) <= sum(1 for s in st if U[s] > t_)), f"hall_{k}_{ui}_{t_}"

    def _add_level_rows(self, k: int, ui: int, M: int, pats: dict, Nc: dict, v: dict):
        """A stage on a pattern of time >= theta forces tau >= theta: the cumulative count of the
        unit's patterns at or above theta is <= M v_theta."""
        by_th = {}
        for cm, th in pats.items():
            if th is not None:
                by_th.setdefault(th, []).append(Nc[cm])
        prev = None
        for i, th in enumerate(sorted(by_th, reverse=True)):
            cum = pulp.LpVariable(f"W_{k}_{ui}_{i}", lowBound=0)
            terms = [(cum, 1.0)] + [(var, -1.0) for var in by_th[th]] + ([(prev, -1.0)] if prev is not None else [])
            self.prob += pulp.LpAffineExpression(terms) == 0, f"wcum_{k}_{ui}_{i}"
            self.prob += cum - M * v[th] <= 0, f"wlv_{k}_{ui}_{i}"
            prev = cum

    def _add_single_stage_rows(self, lay: _Lay, ui: int, s0: int, Kc: dict, Zc: dict, Nc: dict,
                               lay_terms: list):
        """Exact period row of a single stage (implied by the levels when the window exists), its
        layer expression, and its memory row when memory is relaxed."""
        prob, k, x, o, ts, extra = self.prob, lay.k, lay.x, lay.o, lay.ts, lay.extra
        H = self.inst.hbm_bytes
        tterms = ([(Zc[c], o.t_layer_s[c] / ts) for c in Kc]
                  + [(Kc[c], extra[s0][c] / ts) for c in Kc if extra[s0][c]]
                  + [(Nc[c, m], (m * o.t_layer_s[c] + extra[s0][c]) / ts) for c, m in Nc])
        prob += lay.tau - pulp.LpAffineExpression(tterms) >= 0, f"period_{k}_{ui}"
        lay.nexpr[s0] = pulp.LpAffineExpression(lay_terms)
        if "memory" in self.relax:
            prob += (pulp.LpAffineExpression([(var, cf * o.mem_per_layer_bytes[s0] / H) for var, cf in lay_terms]
                                             + [(x, (o.mem_fixed_bytes[s0] - H) / H),
                                                (self.sig["memory"], -1.0 / H)]) <= 0, f"mem_{k}_{s0}")

    def _add_whole_node_rows(self, lay: _Lay):
        """S >= G: every slot of a stage's nodes runs at its cap; the caps were pre-filtered, so rows
        are needed only for a relaxed family (temperature, node power) with its slack."""
        inst, prob, k, x, o, Yv = self.inst, self.prob, lay.k, lay.x, lay.o, lay.Yv
        G, pb, ph = inst.gpus_per_node, o.p_budget_w, o.p_thermal_w
        Tmax, B = inst.max_temp_c, inst.node_power_budget_w
        for s in range(o.pp):
            if "temperature" in self.relax:
                need = {c: float(np.max(inst.inlet_c + (self.colsum + inst.r_th_c_per_w) * ph[c]))
                        for c in Yv[s]}
                prob += (pulp.LpAffineExpression([t for c in Yv[s] for t in _yterms(Yv, s, c, need[c] / Tmax)]
                                                 + [(x, -1.0), (self.sig["temperature"], -1.0 / Tmax)])
                         <= 0, f"temp_{k}_{s}")
            if "node_power" in self.relax:
                prob += (pulp.LpAffineExpression([t for c in Yv[s] for t in _yterms(Yv, s, c, G * pb[c] / B)]
                                                 + [(x, -1.0), (self.sig["node_power"], -1.0 / B)])
                         <= 0, f"power_{k}_{s}")

    def _add_node_placement(self, lay: _Lay, q: int, st) -> list:
        """S < G, node q: block-cap binaries u_qbc (one cap per block, the node's multiset of caps),
        a temperature row per slot and a node-power row (those that can bind), block symmetry.
        Returns u_q: per block, cap -> binary."""
        inst, prob, k, x, o, g, Yv = self.inst, self.prob, lay.k, lay.x, lay.o, lay.g, lay.Yv
        G, S, pb, ph = inst.gpus_per_node, o.stage_gpus, o.p_budget_w, o.p_thermal_w
        Tmax, B = inst.max_temp_c, inst.node_power_budget_w
        st = [s for s in st if Yv[s] is not None]
        ucaps = sorted({c for s in st for c in Yv[s]})
        uq = [{c: pulp.LpVariable(f"u_{k}_{q}_{b}_{c}", cat="Binary") for c in ucaps}
              for b in range(g.Q)]
        for b in range(g.Q):
            prob += pulp.lpSum(uq[b].values()) - x == 0, f"occ_{k}_{q}_{b}"
        for c in ucaps:
            prob += (pulp.LpAffineExpression([(uq[b][c], 1.0) for b in range(g.Q)]
                                             + [t for s in st for t in _yterms(Yv, s, c, -1.0)]) == 0,
                     f"mset_{k}_{q}_{c}")
        for j in range(G):
            bj = j // S
            terms, hi = [], 0.0
            for b in range(g.Q):
                hsum = float(sum(inst.preheat_c_per_w[i, j] for i in g.blocks[b]))
                coef_b = hsum + (float(inst.r_th_c_per_w[j]) if b == bj else 0.0)
                if coef_b:
                    terms += [(uq[b][c], ph[c] * coef_b / Tmax) for c in ucaps]
                    hi += max(ph[c] for c in ucaps) * coef_b / Tmax
            rhs = (Tmax + _ROW_SLACK * abs(Tmax) - float(inst.inlet_c[j])) / Tmax
            terms.append((x, -rhs))
            if "temperature" in self.relax:
                terms.append((self.sig["temperature"], -1.0 / Tmax))
            elif hi <= rhs:
                continue          # cannot bind
            prob += pulp.LpAffineExpression(terms) <= 0, f"temp_{k}_{q}_{j}"
        pw = [t for s in st for c in Yv[s] for t in _yterms(Yv, s, c, S * pb[c] / B)] + [(x, -1.0 - _ROW_SLACK)]
        if "node_power" in self.relax:
            pw.append((self.sig["node_power"], -1.0 / B))
        elif g.Q * S * max(pb[c] for c in ucaps) <= B:
            pw = None
        if pw is not None:
            prob += pulp.LpAffineExpression(pw) <= 0, f"power_{k}_{q}"
        if self.strict:
            for b1, b2 in _block_symmetry(inst, g):
                prob += (pulp.lpSum(c * uq[b1][c] for c in ucaps)
                         - pulp.lpSum(c * uq[b2][c] for c in ucaps) >= 0), f"bsym_{k}_{q}_{b1}"
        return uq

    def _add_stage_symmetry(self, lay: _Lay, single: set):
        """Single middle stages with equal bounds on interchangeable nodes: ordered by C n_s + c_s."""
        k, o, g, n, Yv = lay.k, lay.o, lay.g, lay.nexpr, lay.Yv
        C, p = len(self.inst.cap_levels_w), o.pp
        groups = {}
        for s in range(1, p - 1):
            if s not in single:
                continue
            key = (tuple(sorted(lay.Usc[s].items())),) + ((s // g.Q,) if not g.whole else ())
            groups.setdefault(key, []).append(s)
        for members in groups.values():
            for s1, s2 in zip(members, members[1:]):
                self.prob += (n[s1] * C - n[s2] * C
                              + pulp.LpAffineExpression([t for c in Yv[s1] for t in _yterms(Yv, s1, c, c)]
                                                        + [t for c in Yv[s2] for t in _yterms(Yv, s2, c, -c)]) >= 0,
                              f"ssym_{k}_{s1}")

    # ------------------------------------------------------------------ solving & read-back
    def set_bounds(self, T_max: float = math.inf, E_max: float = math.inf):
        """Right-hand sides of T <= T_max and E <= E_max (must not be looser than the build bounds)."""
        self.tbound.changeRHS(min(T_max / self.T_ref, 1e9))
        self.ebound.changeRHS(min(E_max / self.E_ref, 1e9))

    def run(self, objective, solver) -> bool:
        """Solve with ``objective`` (a PuLP expression); True if a solution was found."""
        self.prob.setObjective(objective)
        self.prob.solve(solver)
        self.solves += 1
        if self.prob.status == pulp.LpStatusInfeasible:
            return False
        if self.prob.sol_status in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            self.last_status = "optimal" if self.prob.sol_status == pulp.LpSolutionOptimal else "feasible (time limit)"
            return True
        if self.prob.status == pulp.LpStatusNotSolved:
            raise RuntimeError("MIP solver stopped (time limit?) without a feasible solution")
        if self.prob.status == pulp.LpStatusUndefined:
            return False
        raise RuntimeError(f"MIP solver returned status {pulp.LpStatus[self.prob.status]}")

    def decision(self):
        """Rounded decision (k, caps, layers, blocks) of the last solve."""
        for d in self.lay:
            if d is not None and (d["x"].varValue or 0) > 0.5:
                break
        else:
            raise RuntimeError("no layout selected in the MIP solution")
        g = d["g"]
        caps, layers = [0] * g.p, [0] * g.p
        val = lambda var: var.varValue or 0.0  # noqa: E731
        for un in d["units"]:
            # patterns (c, m) and low-mode (c, stages, layers) of the unit, rounded
            assign = []
            for (c, m), var in un["N"].items():
                assign += [(c, m)] * int(round(val(var)))
            for c, var in un["K"].items():
                cnt, tot = int(round(val(var))), int(round(val(un["Z"][c])))
                for i in range(cnt):
                    assign.append((c, tot // cnt + (1 if i < tot % cnt else 0)))
            if len(assign) != len(un["stages"]):
                raise RuntimeError("MIP solution does not assign every stage of a unit")
            # largest layer counts to the stages with the largest memory bounds (Hall order)
            assign.sort(key=lambda cm: (-cm[1], -cm[0]))
            order = sorted(range(len(un["stages"])), key=lambda i: (-un["U"][i], i))
            for i, (c, m) in zip(order, assign):
                caps[un["stages"][i]], layers[un["stages"][i]] = c, m
        blocks = None
        if not g.whole and d["u"] is not None:
            blocks = [0] * g.p
            for q, st in enumerate(g.node_stages):
                uq = d["u"][q]
                bcap = [max(uq[b], key=lambda c: uq[b][c].varValue or 0) for b in range(g.Q)]
                free = list(range(g.Q))
                for s in st:
                    b = next((b for b in free if bcap[b] == caps[s]), free[0])
                    free.remove(b)
                    blocks[s] = b
        return d["k"], caps, layers, blocks
