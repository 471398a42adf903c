"""Solving: solver construction, heuristic incumbents, the bounded MIP runs (:class:`_Run`),
:func:`solve` (energy, time, EDP on the lower convex hull of the front) and :func:`pareto_front`.
"""
from __future__ import annotations

import dataclasses
import heapq
import math
import time

import numpy as np
import pulp

from ..errors import InputError, SolverUnavailableError
from .diagnose import _diagnose
from .evaluation import _Geom, _geom, _mem_ok, _node_ok, _node_temps, _times_energy, evaluate
from .instance import FEAS_RTOL, _ROW_SLACK, Instance, LayoutOption, Solution, _check_objective, _objective_value
from .model import _mem_bound, _Model

_FRONT_EPS = 1e-7         # relative step of the epsilon-constraint: next bound = T (1 - eps)
_AUGMENT = 1e-6          # weight of T (scaled) in the front trace's objective E + delta T (scaled)
# CBC: tight tolerances (rows are O(1)); an explicit tiny cutoff increment (otherwise CBC may derive
# a coarser one and stop short of the optimum); few root cut passes and no feasibility pump (the
# incumbent bounds make them cost more than they save on these models)
_CBC_OPTIONS = ("primalT 1e-9", "integerT 1e-9", "increment 1e-12", "passC 5", "feas off")


def check_solver(solver: str) -> None:
    """Raise costmodel.errors.InputError on ``--solver`` where PuLP cannot run ``solver`` ('cbc' or
    'highs'; :func:`_make_solver`), so that a command refuses it before any work or note."""
    try:
        _make_solver(solver, 1, None, False)
    except SolverUnavailableError as e:
        raise InputError("--solver", "", str(e)) from None


def _make_solver(solver: str, threads: int, time_limit_s: float | None, msg: bool):
    """A PuLP solver object: 'cbc' (bundled) or 'highs' (pulp.HiGHS via highspy, else HiGHS_CMD)."""
    name = solver.lower()
    if name == "cbc":
        # threads=1 runs CBC's serial code: passing "-threads 1" selects its threaded code path,
        # which was seen to stall for ~10 s in about 1 run in 60 on tiny models
        return pulp.PULP_CBC_CMD(msg=msg, threads=None if threads <= 1 else threads, timeLimit=time_limit_s,
                                 gapRel=1e-9, options=list(_CBC_OPTIONS))
    if name == "highs":
        kw = dict(msg=msg, timeLimit=time_limit_s, gapRel=1e-9, gapAbs=1e-12, threads=threads)
        for cls_name in ("HiGHS", "HiGHS_CMD"):
            cls = getattr(pulp, cls_name, None)
            if cls is None:
                continue
            try:
                s = cls(**kw)
            except TypeError:
                s = cls(msg=msg, timeLimit=time_limit_s)
            if s.available():
                return s
        raise SolverUnavailableError("--solver highs: HiGHS is not available to PuLP; install the "
                                     "'highspy' package or put the 'highs' executable on PATH "
                                     "(or use --solver cbc)")
    raise ValueError(f"unknown solver {solver!r}: expected 'cbc' or 'highs'")


def _slot_powers(o: LayoutOption, g: _Geom, stages, caps: list) -> tuple:
    """(budget, thermal) power of every slot of a node holding ``stages`` at their cap levels ``caps``
    (default placement: stage s on block s mod Q; LayoutOption.p_budget_w, p_thermal_w), W, arrays (G,)."""
    ps, ph = np.empty(g.G), np.empty(g.G)
    for s in stages:
        blk = list(g.blocks[s % g.Q])
        ps[blk], ph[blk] = o.p_budget_w[caps[s]], o.p_thermal_w[caps[s]]
    return ps, ph


def _split_layers(inst: Instance, o: LayoutOption, g: _Geom, U: list, caps: list):
    """(T, E) of layout ``o`` with per-stage cap levels ``caps`` (default placement) and the layer
    split that minimises the period (each layer goes to the stage whose time grows least: optimal
    for identical layers on stages of different speeds; stage s holds at most U[s] layers), or None
    when a node breaks the thermal or power limit or a stage its memory.  Nodes are checked at the
    MIP's row slack (_ROW_SLACK), not evaluate's looser FEAS_RTOL: a decision in the band between
    them would bound the MIPs below everything they accept, and make a feasible instance infeasible."""
    p, L = o.pp, o.num_layers
    if g.whole:
        for c in set(caps):
            if not _node_ok(inst, np.full(g.G, float(o.p_budget_w[c])), _ROW_SLACK,
                            np.full(g.G, float(o.p_thermal_w[c]))):
                return None
    else:
        for st in g.node_stages:
            ps, ph = _slot_powers(o, g, st, caps)
            if not _node_ok(inst, ps, _ROW_SLACK, ph):
                return None
    tl = [float(o.t_layer_s[caps[s]]) for s in range(p)]
    extra = [(o.t_first_s[caps[s]] if s == 0 else 0.0) + (o.t_last_s[caps[s]] if s == p - 1 else 0.0)
             for s in range(p)]
    n = [1] * p
    heap = [(2 * tl[s] + extra[s], s) for s in range(p) if U[s] > 1]
    heapq.heapify(heap)
    for _ in range(L - p):
        _, s = heapq.heappop(heap)
        n[s] += 1
        if n[s] < U[s]:
            heapq.heappush(heap, ((n[s] + 1) * tl[s] + extra[s], s))
    if not _mem_ok(inst, o, np.array([n]))[0]:
        return None
    _, _, T, E = _times_energy(o, caps, np.array([n]))
    return (float(T[0]), float(E[0]))


def _cooled_caps(inst: Instance, o: LayoutOption, g: _Geom, c0: int) -> list | None:
    """Cap level c0 for every stage; where a node (S < G, default placement) breaks the thermal or
    power limit, the stage contributing most to the hottest slot (or to node power) drops one level
    until the node fits.  None when a node cannot fit even so."""
    caps = [c0] * o.pp
    if g.whole:
        return caps
    for st in g.node_stages:
        while True:
            ps, ph = _slot_powers(o, g, st, caps)
            if _node_ok(inst, ps, _ROW_SLACK, ph):             # the MIP's row slack (see _split_layers)
                break
            over_power = float(ps.sum()) > inst.node_power_budget_w * (1 + _ROW_SLACK)
            j = int(np.argmax(_node_temps(inst, ph) - inst.max_temp_c))
            cand = [s for s in st if caps[s] > 0]
            if not cand:
                return None

            def contrib(s):
                blk = list(g.blocks[s % g.Q])
                if over_power:
                    return float(o.p_budget_w[caps[s]])
                return float(o.p_thermal_w[caps[s]]) * (float(inst.preheat_c_per_w[blk, j].sum())
                                                        + (float(inst.r_th_c_per_w[j]) if j in blk else 0.0))
            caps[max(cand, key=contrib)] -= 1
    return caps


def _heuristic(inst: Instance, local_layouts: int = 3) -> list:
    """(T, E) of feasible decisions, used only to bound the MIPs (exact: the optimum is never worse
    than a known feasible decision; a better incumbent gives tighter period windows).

    Starts: every layout with every cap level c for all stages; where a node (S < G, default
    placement) breaks the thermal or power limit, the stage contributing most to the hottest slot
    (or to node power) drops one level until the node fits.  Each cap assignment gets the layer
    split that minimises the period (each layer goes to the stage whose time grows least: optimal
    for identical layers on stages of different speeds).  Then, for the ``local_layouts`` best
    layouts by energy and by step time, a descent over single-stage cap changes."""
    out = set()
    C = len(inst.cap_levels_w)
    ctx = {}

    def evalc(k, caps):
        te = _split_layers(inst, *ctx[k], caps)
        if te is not None:
            out.add(te)
        return te

    starts = []
    for k, o in enumerate(inst.options):
        g = _geom(inst, o)
        p, L = o.pp, o.num_layers
        U = [_mem_bound(inst, o, s, L - (p - 1)) for s in range(p)]
        if o.max_layers_per_stage:                 # the interleaved schedule's even split
            U = [min(u, o.max_layers_per_stage) for u in U]
        if min(U) < 1 or sum(U) < L:
            continue
        ctx[k] = (o, g, U)
        for c0 in range(C):
            caps = _cooled_caps(inst, o, g, c0)
            te = evalc(k, caps) if caps is not None else None
            if te is not None:
                starts.append((te, k, caps))
    for key in (1, 0):                       # descent on energy, then on step time
        best_per_layout = {}
        for te, k, caps in sorted(starts, key=lambda r: r[0][key]):
            best_per_layout.setdefault(k, (te, caps))
        for k, (te, caps) in sorted(best_per_layout.items(), key=lambda r: r[1][0][key])[:local_layouts]:
            caps = list(caps)
            for _ in range(2):
                improved = False
                for s in range(len(caps)):
                    for c in range(C):
                        if c == caps[s]:
                            continue
                        trial = caps[:s] + [c] + caps[s + 1:]
                        te2 = evalc(k, trial)
                        if te2 is not None and te2[key] < te[key]:
                            caps, te, improved = trial, te2, True
                if not improved:
                    break
    return sorted(out)


def _triangle_edp(L, A, B, R) -> float:
    """Lower bound of E T over the region where a new lower-hull vertex between adjacent vertices
    A and B can lie: the triangle under the chord AB and above the extensions of the neighbouring
    edges L-A and B-R (vertical T = T_A / horizontal E = E_B without a neighbour).  E T is concave
    on every edge (negative slopes), so the minimum is at a corner; A and B are known points, the
    third corner X is returned (never below T_A E_B)."""
    TA, EA, TB, EB = A.step_time_s, A.energy_j, B.step_time_s, B.energy_j
    box = TA * EB
    s1 = None if L is None or A.step_time_s <= L.step_time_s else (EA - L.energy_j) / (TA - L.step_time_s)
    s2 = None if R is None or R.step_time_s <= TB else (R.energy_j - EB) / (R.step_time_s - TB)
    if s1 is None and s2 is None:
        return box
    if s1 is None:
        X = (TA, EB + s2 * (TA - TB))
    elif s2 is None:
        X = (TA + (EB - EA) / s1, EB) if s1 < 0 else (TA, EB)
    elif s2 - s1 > 0:
        t = (EB - EA + s1 * TA - s2 * TB) / (s1 - s2)
        X = (t, EA + s1 * (t - TA))
    else:
        return box
    tx = min(max(X[0], TA), TB)
    ex = min(max(X[1], EB), EA)
    return max(box, tx * ex)


class _Run:
    """Solve bookkeeping: one model per bound pair, a pool of known feasible solutions (their T and
    E bound the next MIPs: exact, the optimum is never worse than a known solution), exact
    re-evaluation of every MIP solution."""

    def __init__(self, inst, solver, objective):
        self.inst, self.solver, self.objective = inst, solver, objective
        self.t0 = time.perf_counter()
        self.status = "optimal"
        self.solves = 0
        self.pool = _heuristic(inst)

    def _solve(self, what: str, T_max=math.inf, E_max=math.inf, T_rtol=_ROW_SLACK, lam: float = 0.0,
               T_min: float = 0.0, V: float | None = None):
        # tighten the bound that is not the objective with the best known feasible solution
        # ('W', the weighted sum E + lam T, gets its bounds from the caller)
        if what in ("E", "E+"):
            known = [e for t, e in self.pool if t <= T_max and e <= E_max]
            E_max = min(known, default=E_max)
        elif what == "T":
            known = [t for t, e in self.pool if e <= E_max and t <= T_max]
            T_max = min(known, default=T_max)
        m = _Model(self.inst, T_max=T_max, E_max=E_max, T_rtol=T_rtol, T_min=T_min,
                   weighted=(lam, V) if what == "W" and V is not None else None)
        if m.empty:
            return None
        if what == "W":
            obj = m.E_expr + (lam * m.T_ref / m.E_ref) * m.T_expr
        else:
            obj = {"E": m.E_expr, "T": m.T_expr, "E+": m.E_expr + _AUGMENT * m.T_expr}[what]
        ok = m.run(obj, self.solver)
        self.solves += 1
        if not ok:
            return None
        if m.last_status != "optimal":
            self.status = m.last_status
        k, caps, layers, blocks = m.decision()
        sol = evaluate(self.inst, k, caps, layers, blocks)
        if sol.violations:
            raise RuntimeError(f"MIP solution violates limits after rounding: {sol.violations}")
        self.pool.append((sol.step_time_s, sol.energy_j))
        return sol

    def min_energy(self, T_max=math.inf, E_max=math.inf, T_rtol=_ROW_SLACK):
        return self._solve("E", T_max, E_max, T_rtol)

    def min_time(self, T_max=math.inf, E_max=math.inf):
        return self._solve("T", T_max, E_max)

    def fastest(self):
        """Least T, then least E at that T (a Pareto point)."""
        a = self.min_time()
        if a is None:
            return None
        b = self.min_energy(T_max=a.step_time_s)
        return b if b is not None and b.step_time_s <= a.step_time_s * (1 + FEAS_RTOL) else a

    def edp(self, fast: Solution, T_bound=math.inf) -> Solution:
        """Least E x T: the best vertex of the lower convex hull of the (T, E) points, found by the
        dichotomic weighted-sum search (Y. P. Aneja, K. P. K. Nair, "Bicriteria transportation
        problem", Management Science 25(1), 1979) between the fastest and the least-energy point.

        Exact: if P* minimises E T then, for every feasible P, E/E* + T/T* >= 2 sqrt(E T/(E* T*)) >= 2
        (arithmetic-geometric mean), so P* minimises E + (E*/T*) T -- it is a supported point; and
        E T is concave along any line of negative slope, so its least value on the hull is at a
        vertex.  A new vertex between adjacent vertices A, B improves E + lam T, lam = (E_A - E_B) /
        (T_B - T_A), below its value V at A and B, so it lies in T_A < T < T_B, E < E_A: those bounds
        are imposed (exact).  By convexity it also lies above the extensions of the neighbouring hull
        edges, in a triangle whose corner X bounds its E T from below (concavity again): a gap is
        skipped once E_X T_X >= the best E T found."""
        slow = self._solve("E+", T_max=T_bound, T_rtol=0.0)
        hull = [fast] if slow is None or slow.step_time_s <= fast.step_time_s else [fast, slow]
        edges = set()                                   # (id A, id B) proven hull edges
        while True:
            best = min(q.edp for q in hull)
            gap, gap_lb = None, math.inf
            for i in range(len(hull) - 1):
                A, B = hull[i], hull[i + 1]
                if (id(A), id(B)) in edges or A.energy_j <= B.energy_j:
                    continue
                lb = _triangle_edp(hull[i - 1] if i > 0 else None, A, B, hull[i + 2] if i + 2 < len(hull) else None)
                if lb >= best * (1 - 1e-12):
                    edges.add((id(A), id(B)))
                    continue
                if lb < gap_lb:
                    gap, gap_lb = i, lb
            if gap is None:
                return min(hull, key=lambda q: (q.edp, q.step_time_s))
            A, B = hull[gap], hull[gap + 1]
            lam = (A.energy_j - B.energy_j) / (B.step_time_s - A.step_time_s)
            V = max(A.energy_j + lam * A.step_time_s, B.energy_j + lam * B.step_time_s)
            P = self._solve("W", T_max=B.step_time_s, E_max=A.energy_j, lam=lam, T_min=A.step_time_s, V=V)
            if (P is None or P.energy_j + lam * P.step_time_s >= V * (1 - 1e-9)
                    or not A.step_time_s < P.step_time_s < B.step_time_s):
                edges.add((id(A), id(B)))
            else:
                hull.insert(gap + 1, P)

    def front(self, T_bound=math.inf, T_min=None):
        """Augmented epsilon-constraint trace of the Pareto front from the slow end.

        Each point is argmin E + delta T s.t. T <= beta (delta = ``_AUGMENT`` in the scaled units,
        so the point is never dominated), then beta = T (1 - eps), until infeasible or T_min is
        reached.  Returns the list of Solutions, slowest first."""
        pts, beta = [], T_bound
        while True:
            b = self._solve("E+", T_max=beta, T_rtol=0.0)
            if b is None:
                break
            pts.append(b)
            if T_min is not None and b.step_time_s <= T_min * (1 + 1e-12):
                break
            beta = min(b.step_time_s, beta) * (1 - _FRONT_EPS)   # strictly decreasing
        return pts

    def finish(self, sol: Solution, objective: str) -> Solution:
        return dataclasses.replace(
            sol, objective=objective, objective_value=_objective_value(objective, sol.step_time_s, sol.energy_j),
            status=self.status, solve_time_s=time.perf_counter() - self.t0,
            num_solves=self.solves)


def solve(instance: Instance, objective: str = "energy", *, solver: str = "cbc", threads: int = 1,
          time_limit_s: float | None = None, msg: bool = False) -> Solution:
    """Optimal layout, per-stage cap, layer split and placement (formulation: the :mod:`costmodel.ilp` docstring).

    Args:
        instance: the :class:`Instance`.
        objective: 'energy' (min J per step), 'time' (min s per step, ties broken by least energy)
            or 'edp' (min energy x step time, exactly: the best vertex of the front's lower convex
            hull, found by the dichotomic weighted-sum search of Aneja & Nair 1979; see the
            :mod:`costmodel.ilp` docstring for why the optimum is such a vertex).
        solver: 'cbc' (PuLP's bundled CBC) or 'highs' (pulp.HiGHS, else pulp.HiGHS_CMD).
        threads: solver threads (1 for reproducible single-core timings).
        time_limit_s: per-MIP time limit, s (None: none); a solution found at the limit is
            returned with status 'feasible (time limit)'.
        msg: print the solver log.

    Returns:
        The optimal :class:`Solution` (``objective_value`` in J, s or J s).

    Raises:
        InfeasibleError: no decision meets the limits; names the binding limit family and how far
            it must be relaxed.
        SolverUnavailableError: ``solver='highs'`` but HiGHS is not installed.
        ValueError: unknown objective or solver.
    """
    _check_objective(objective)
    slv = _make_solver(solver, threads, time_limit_s, msg)
    run = _Run(instance, slv, objective)
    slack = instance.step_time_slack
    if objective == "time":
        best = run.fastest()
        if best is None:
            raise _diagnose(instance, slv)
        return run.finish(best, objective)
    T_bound = math.inf
    fast = run.fastest()                  # the reference: a slack is measured against it
    if fast is None:
        raise _diagnose(instance, slv)
    if slack is not None:
        T_bound = (1 + slack) * fast.step_time_s * (1 + FEAS_RTOL)
    if objective == "energy":
        best = run.min_energy(T_max=T_bound, T_rtol=0.0)
        if best is None:
            raise _diagnose(instance, slv)
    else:
        best = run.edp(fast, T_bound)
    ref = dataclasses.replace(fast, objective="time", objective_value=fast.step_time_s, status=run.status)
    return dataclasses.replace(run.finish(best, objective), reference=ref)


def pareto_front(instance: Instance, *, solver: str = "cbc", threads: int = 1,
                 time_limit_s: float | None = None) -> list:
    """The time-energy Pareto front (augmented epsilon-constraint method: Haimes et al. 1971,
    Mavrotas 2009).

    Every non-dominated (step time, energy) pair under the instance's limits (and its step-time
    slack, if set), from the least-energy end: argmin E + delta T s.t. T <= beta (delta = 1e-6 in
    scaled units), then beta = T (1 - 1e-7); points closer than that in T, or whose energy differs by
    less than delta times the step-time difference, may be merged.  Costs one MIP per point.

    Args:
        instance: the :class:`Instance`.  solver, threads, time_limit_s: as :func:`solve`.

    Returns:
        List of (T s, E J, :class:`Solution`) tuples, fastest first (E decreasing).

    Raises:
        InfeasibleError: no decision meets the limits.  SolverUnavailableError: as :func:`solve`.
    """
    slv = _make_solver(solver, threads, time_limit_s, False)
    run = _Run(instance, slv, "edp")
    fast = run.fastest()
    if fast is None:
        raise _diagnose(instance, slv)
    T_bound = math.inf
    if instance.step_time_slack is not None:
        T_bound = (1 + instance.step_time_slack) * fast.step_time_s * (1 + FEAS_RTOL)
    pts = run.front(T_bound, fast.step_time_s)
    if not pts or pts[-1].step_time_s > fast.step_time_s * (1 + 1e-12):
        pts.append(fast)
    pts = _nondominated(pts)
    return [(s.step_time_s, s.energy_j, run.finish(s, "edp")) for s in pts]


def _nondominated(sols: list) -> list:
    out, best_e = [], math.inf
    for s in sorted(sols, key=lambda s: (s.step_time_s, s.energy_j)):
        if s.energy_j < best_e:
            out.append(s)
            best_e = s.energy_j
    return out
