"""Joint choice of parallel layout, per-stage power cap, layer split and slot placement (an ILP).

The module works on an abstract :class:`Instance` (the caller builds it from the cost model): a
handful of candidate layouts with per-cap-level times and powers, and a cluster of identical nodes
with a per-slot thermal model.  :func:`solve` returns the optimal :class:`Solution`,
:func:`pareto_front` the time-energy Pareto front; the brute-force oracle of the tests
(tests/ilp/ilp_oracle.py) enumerates every decision and agrees with them.

Data (SI units)
---------------
Layouts k = 1..K: p pipeline stages of S GPUs (S = TP x DP x CP), L layers, m micro-batches, v
virtual stages, cap-independent time D (exposed DP comm + optimizer).  Cap levels c = 0..C-1 with
caps W_c (W, increasing), shared by all layouts.  Per layout and cap level: tl[c] (one layer, fwd +
bwd, one micro-batch), tf[c] / tt[c] (extra time of the first / last stage: embedding / logits +
loss), Pb[c] <= W_c (busy power of a GPU), Pi (idle power).  A GPU of stage s needs
Mf[s] + n_s Ml[s] <= H bytes.  A node has G slots; slot j has inlet temperature theta_j, junction rise
r_j per W of its own power and rise h_ij per W dissipated in slot i of the same node (air
preheating; 0 for liquid cooling).  Limits: Tmax (steady temperature of every GPU), B (sum of GPU
power in a node), optional step-time slack sigma.

Decision and constraints
------------------------
Placement follows Megatron's rank order with PP outermost: stage s owns ranks [s S, (s+1) S).  If
S >= G (S a multiple of G) stage s fills nodes s S/G .. (s+1) S/G - 1: no placement choice.  If
S < G (S divides G) node q hosts the Q = G/S stages qQ .. qQ+Q-1, its slots form Q blocks of S
consecutive slots, and the decision is which block each of these stages takes.  p S must fill whole
nodes and fit in num_nodes (unused nodes are not modelled).

Each stage s gets a cap level c_s and n_s >= 1 layers, sum_s n_s = L; its time per micro-batch is
t_s = n_s tl[c_s] + [s = 0] tf[c_s] + [s = p-1] tt[c_s]; the period is tau = max_s t_s and

    T = (m + (p - 1)/v) tau + D,
    E = sum_s S m (Pb[c_s] - Pi) t_s  +  p S Pi T

(each GPU computes for m t_s and idles for the rest of the step).  Memory: Mf[s] + n_s Ml[s] <= H.
Thermal and power, conservatively with every GPU at its busy power P_i = Pb[cap of the stage in
slot i]:  theta_j + sum_i h_ij P_i + r_j P_j <= Tmax for every GPU (slot j) and sum_j P_j <= B for
every node.  Per-GPU power <= cap holds by construction (Pb[c] <= W_c).

MIP formulation
---------------
x_k in {0,1} chooses the layout (sum_k x_k = 1); every variable of layout k is forced to 0 with it.

Layers and caps: the product "n_s layers if c_s = c, else 0" of a binary and a bounded integer is
linearised exactly (F. Glover, "Improved linear integer programming formulations of nonlinear
integer problems", Management Science 22(4), 1975): K_sc in {0,1} (stage s at cap c), Z_sc integer
with K_sc <= Z_sc <= U_sc K_sc (Z_sc = n_s K_sc; the lower bound is n_s >= 1), sum_c K_sc = x_k,
n_s = sum_c Z_sc, sum_s n_s = L x_k.  U_sc is the exact bound from memory (max n with
Mf + n Ml <= H, and L - (p - 1)) and, when the step time or energy is bounded, from the period
(n tl[c] + extra <= tau_max).  Stage time and energy are linear in K, Z; tau >= t_s for every s.

Period levels (exact strengthening, used when tau is bounded by a known solution or a constraint):
with tau_lb a valid lower bound of the period (the busiest stage holds >= ceil(L/p) layers; the
period is >= the mean stage time), the layer counts with tau_lb < n tl[c] + extra <= tau_max are
modelled as explicit patterns N_scn in {0,1} (stage s at cap c with exactly n layers, time
theta = n tl[c] + extra) next to the low range K/Z (n tl[c] + extra <= tau_lb, where the period
cannot bind).  Binaries v_theta = [tau >= theta] over the sorted pattern times form a chain
(v_theta1 >= v_theta2 >= ...), tau >= tau_lb x_k + sum_i (theta_i - theta_{i-1}) v_thetai, and for
every stage the cumulative weight of its patterns at or above theta is <= v_theta.  One branch on
v_theta thus caps every stage at once, which closes most of the gap the max() leaves in the LP.

Symmetry (exact): when the period is bounded, the middle stages (0 < s < p-1) on interchangeable
nodes (S >= G or placement-free: identical nodes; S < G: the same node) form a unit of M stages modelled by counts
instead of per-stage binaries (K, N in 0..M, Z the unit's layers in the low range, cumulative rows
<= M v_theta): only the multiset of (cap, layers) of such stages matters.  Their memory bounds U_s
may differ (1F1B keeps more activations on early stages); the bounds are nested, so a multiset fits
iff for every threshold t, #(patterns with more than t layers) <= #(stages with U_s > t) (Hall's
condition), one row per distinct U_s.  Otherwise single middle stages with equal bounds are
ordered by C n_s + c_s, and thermally interchangeable blocks by cap.

Thermal / power: if S >= G every slot of a stage's nodes runs at that stage's cap, so cap c is
allowed iff max_j (theta_j + (sum_i h_ij + r_j) Pb[c]) <= Tmax and G Pb[c] <= B (one check per cap
for all the identical nodes); other caps are dropped.  If S < G only the multiset of caps on a node
decides which blocks can hold them, so block-cap binaries u_qbc replace stage-to-block binaries:
sum_c u_qbc = x_k, sum_b u_qbc = (number of node-q stages at cap c), and for every slot j of block
b(j):  sum_b' sum_c Pb[c] (sum_{i in b'} h_ij + [b' = b(j)] r_j) u_qb'c <= (Tmax - theta_j) x_k,
plus sum over the node's stages of S Pb[c] <= B.  Stages are mapped to blocks of their cap
afterwards.  Caps that violate a limit even with every other block at the lowest busy power are
dropped beforehand; rows that cannot bind are omitted, and a layout none of whose rows can bind
is placement-free (treated like S >= G).

Objectives
----------
'energy': min E.  'time': min T, then min E at that T.  With ``step_time_slack`` sigma every
objective adds T <= (1 + sigma) T_min, T_min the least step time under the same limits (this can
never make the instance infeasible).

'edp': min E T is not linear.  It is solved exactly on the time-energy front: if P* minimises E T,
every feasible P has E/E* + T/T* >= 2 sqrt(E T / (E* T*)) >= 2 (arithmetic-geometric mean), so P*
also minimises the linear E + (E*/T*) T: it is a supported point, a vertex of the lower convex hull
of the front (E T is concave along a hull edge, so a hull edge never beats its end vertices).  The
hull vertices between the fastest point and the least-energy point are found by the dichotomic
weighted-sum search (Y. P. Aneja, K. P. K. Nair, "Bicriteria transportation problem", Management
Science 25(1), 1979): for adjacent vertices A, B solve min E + lam T with lam the slope of AB, inside
T_A <= T <= T_B, E <= E_A (where any new vertex must lie); a gap is skipped once the corner of the
triangle that convexity leaves for new vertices has E T >= the best found.  :func:`pareto_front`
returns the whole front by the epsilon-constraint method (Y. Y. Haimes, L. S. Lasdon, D. A. Wismer,
"On a bicriterion formulation of the problems of integrated system identification and system
optimization", IEEE Trans. SMC 1(3), 1971) in its augmented form (G. Mavrotas, "Effective
implementation of the epsilon-constraint method in multi-objective mathematical programming
problems", Applied Mathematics and Computation 213(2), 2009): from beta = +inf, each point is
argmin E + delta T s.t. T <= beta (delta = 1e-6 in scaled units, so no point is dominated), then
beta = T (1 - 1e-7); points closer than that may be merged.

Every MIP is bounded by the best known feasible decision (greedy incumbents: uniform caps lowered
where a node overheats, the period-minimising layer split, a descent over single-stage cap changes;
and earlier MIP solutions): E <= E_known for energy objectives, T <= T_known for time -- exact,
since the optimum is never worse -- which also bounds the period and so the pattern window.

Infeasibility
-------------
If nothing fits, each limit family (temperature, node power, memory) is relaxed in turn by a slack
variable added to its limit, the slack minimised; the required limit is re-evaluated exactly on the
relaxed solution and the family with the least relative rise (required - limit) / limit is reported
by :class:`InfeasibleError`.  If no single family suffices all three are relaxed together.  The
step-time slack cannot bind, and caps cannot exceed the top level.

Numerics
--------
Rows and objectives are scaled to O(1); CBC runs with primal / integer tolerances 1e-9, relative gap
1e-9 and an explicit cutoff increment of 1e-12.  Solutions are read back by rounding and re-evaluated
by :func:`evaluate` with the same floating-point arithmetic as the brute-force oracle.  A limit counts
as met within a relative ``FEAS_RTOL`` = 1e-6 (the MIP's own limit rows use 1e-7).
"""
from __future__ import annotations

import dataclasses
import heapq
import math
import time
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pulp

from .errors import InfeasibleError, SolverUnavailableError

__all__ = [
    "OBJECTIVES", "FEAS_RTOL", "LayoutOption", "Instance", "GpuRow", "Solution", "InfeasibleError",
    "SolverUnavailableError", "solve", "pareto_front", "evaluate",
]

OBJECTIVES = ("energy", "time", "edp")
FEAS_RTOL = 1e-6          # relative tolerance of every limit check (temperature, power, memory, slack)
_ROW_SLACK = 1e-7         # relative slack on the MIP's limit rows and incumbent bounds (< FEAS_RTOL)
_FRONT_EPS = 1e-7         # relative step of the epsilon-constraint: next bound = T (1 - eps)
_FAMILIES = ("temperature", "node_power", "memory")
_AUGMENT = 1e-6          # weight of T (scaled) in the front trace's objective E + delta T (scaled)
# CBC: tight tolerances (rows are O(1)); an explicit tiny cutoff increment (otherwise CBC may derive
# a coarser one and stop short of the optimum); few root cut passes and no feasibility pump (the
# incumbent bounds make them cost more than they save on these models)
_CBC_OPTIONS = ("primalT 1e-9", "integerT 1e-9", "increment 1e-12", "passC 5", "feas off")
_MAX_PATTERNS = 1500      # window patterns per layout (see _period_window); above it only the Glover bounds


# --------------------------------------------------------------------------------------- instance

def _arr(name: str, value, shape=None, where: str = "") -> np.ndarray:
    a = np.array(value, dtype=float)
    if shape is not None and a.shape != shape:
        raise ValueError(f"{where}{name} must have shape {shape}, got {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError(f"{where}{name} must be finite")
    a.setflags(write=False)
    return a


def _nonincreasing(a: np.ndarray) -> bool:
    return bool(np.all(a[1:] <= a[:-1] * (1 + 1e-9) + 1e-300))


@dataclass(frozen=True, eq=False)
class LayoutOption:
    """One candidate parallel layout k (times per micro-batch, powers per GPU; SI units).

    Attributes:
        name: label of the layout (e.g. ``"tp8-pp4-dp32"``).
        pp: pipeline stages p >= 1.
        stage_gpus: S = TP x DP x CP GPUs per stage (S divides G or is a multiple of G).
        num_layers: L >= p transformer layers in total (every stage gets >= 1).
        microbatches: m >= 1 micro-batches per step.
        vp: v >= 1 virtual stages (interleaving); the bubble is (p - 1)/v periods.
        const_time_s: cap-independent time per step (exposed DP comm + optimizer), s, >= 0.
        t_layer_s: shape (C,), fwd+bwd time of one layer for one micro-batch at each cap level, s,
            non-increasing in the cap.
        t_first_s, t_last_s: shape (C,), extra per micro-batch time of the first stage (embedding)
            and of the last stage (logits + loss), s, non-increasing in the cap.
        p_busy_w: shape (C,), power of a GPU while computing at each cap level, W (<= the cap).
        p_idle_w: power of an idle/waiting GPU, W (<= every p_busy_w).
        mem_fixed_bytes, mem_per_layer_bytes: shape (p,), memory of a GPU of stage s is
            mem_fixed[s] + n_s mem_per_layer[s] bytes (the per-layer figure includes the activations
            of the micro-batches in flight at that stage).

    Raises:
        ValueError: on wrong shapes, non-finite or negative values, L < p, times increasing with
            the cap.  Lengths against the cap levels are checked by :class:`Instance`.
    """

    name: str
    pp: int
    stage_gpus: int
    num_layers: int
    microbatches: int
    vp: int
    const_time_s: float
    t_layer_s: np.ndarray
    t_first_s: np.ndarray
    t_last_s: np.ndarray
    p_busy_w: np.ndarray
    p_idle_w: float
    mem_fixed_bytes: np.ndarray
    mem_per_layer_bytes: np.ndarray

    def __post_init__(self):
        w = f"layout {self.name!r}: "
        for f in ("pp", "stage_gpus", "num_layers", "microbatches", "vp"):
            v = getattr(self, f)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{w}{f} must be a positive integer, got {v!r}")
            object.__setattr__(self, f, int(v))
        if self.num_layers < self.pp:
            raise ValueError(f"{w}num_layers {self.num_layers} < pp {self.pp}: every stage needs >= 1 layer")
        for f in ("const_time_s", "p_idle_w"):
            v = float(getattr(self, f))
            if not math.isfinite(v) or v < 0:
                raise ValueError(f"{w}{f} must be finite and >= 0, got {v!r}")
            object.__setattr__(self, f, v)
        for f in ("t_layer_s", "t_first_s", "t_last_s", "p_busy_w"):
            a = _arr(f, getattr(self, f), where=w)
            if a.ndim != 1 or a.size == 0:
                raise ValueError(f"{w}{f} must be a non-empty 1-D array (one value per cap level)")
            if np.any(a < 0):
                raise ValueError(f"{w}{f} must be >= 0 (negative time or power)")
            if f.startswith("t_") and not _nonincreasing(a):
                raise ValueError(f"{w}{f} must be non-increasing in the cap level")
            object.__setattr__(self, f, a)
        if np.any(self.t_layer_s <= 0):
            raise ValueError(f"{w}t_layer_s must be > 0 at every cap level")
        if np.any(self.p_busy_w <= 0):
            raise ValueError(f"{w}p_busy_w must be > 0 at every cap level")
        if np.any(self.p_busy_w < self.p_idle_w):
            raise ValueError(f"{w}p_busy_w must be >= p_idle_w at every cap level")
        for f in ("mem_fixed_bytes", "mem_per_layer_bytes"):
            a = _arr(f, getattr(self, f), (self.pp,), where=w)
            if np.any(a < 0):
                raise ValueError(f"{w}{f} must be >= 0")
            object.__setattr__(self, f, a)

    @property
    def num_gpus(self) -> int:
        """p x S, the GPUs of the layout."""
        return self.pp * self.stage_gpus

    @property
    def periods(self) -> float:
        """m + (p - 1)/v: step time = periods x tau + const_time_s."""
        return self.microbatches + (self.pp - 1) / self.vp


@dataclass(frozen=True, eq=False)
class Instance:
    """The optimisation instance: candidate layouts, cap levels, node/slot thermal model, limits.

    Attributes:
        options: tuple of :class:`LayoutOption` (K >= 1).
        cap_levels_w: allowed per-GPU power caps, W, strictly increasing (C levels).
        gpus_per_node: G slots per node.
        num_nodes: nodes available (a layout may use fewer).
        hbm_bytes: memory capacity per GPU, bytes.
        inlet_c: shape (G,), inlet temperature of each slot before preheating, deg C.
        r_th_c_per_w: shape (G,), junction rise of slot j per W of its own power, deg C / W.
        preheat_c_per_w: shape (G, G), [i][j] = rise of slot j per W dissipated in slot i of the
            same node, deg C / W (0 for liquid cooling; the diagonal, if non-zero, adds to r_th).
        max_temp_c: limit on the steady temperature of every GPU, deg C.
        node_power_budget_w: limit on the sum of GPU power in a node, W.
        step_time_slack: None, or sigma >= 0: step time <= (1 + sigma) x the least step time.

    Raises:
        ValueError: caps not increasing or non-positive, per-cap arrays of the wrong length,
            p_busy above the cap, S neither dividing G nor a multiple of G, a layout not filling
            whole nodes or needing more nodes than available, negative thermal coefficients,
            max_temp_c at or below every inlet, non-positive budgets, negative slack.
    """

    options: tuple
    cap_levels_w: tuple
    gpus_per_node: int
    num_nodes: int
    hbm_bytes: float
    inlet_c: np.ndarray
    r_th_c_per_w: np.ndarray
    preheat_c_per_w: np.ndarray
    max_temp_c: float
    node_power_budget_w: float
    step_time_slack: float | None = None

    def __post_init__(self):
        opts = tuple(self.options)
        if not opts or not all(isinstance(o, LayoutOption) for o in opts):
            raise ValueError("options must be a non-empty sequence of LayoutOption")
        object.__setattr__(self, "options", opts)
        caps = tuple(float(c) for c in self.cap_levels_w)
        if not caps or not all(math.isfinite(c) and c > 0 for c in caps):
            raise ValueError("cap_levels_w must be non-empty, finite and > 0")
        if any(b <= a for a, b in zip(caps, caps[1:])):
            raise ValueError(f"cap_levels_w must be strictly increasing, got {caps}")
        object.__setattr__(self, "cap_levels_w", caps)
        for f in ("gpus_per_node", "num_nodes"):
            v = getattr(self, f)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{f} must be a positive integer, got {v!r}")
            object.__setattr__(self, f, int(v))
        G = self.gpus_per_node
        for f in ("hbm_bytes", "node_power_budget_w", "max_temp_c"):
            v = float(getattr(self, f))
            if not math.isfinite(v):
                raise ValueError(f"{f} must be finite")
            object.__setattr__(self, f, v)
        if self.hbm_bytes <= 0:
            raise ValueError("hbm_bytes must be > 0")
        if self.node_power_budget_w <= 0:
            raise ValueError("node_power_budget_w must be > 0")
        object.__setattr__(self, "inlet_c", _arr("inlet_c", self.inlet_c, (G,)))
        for f, shape in (("r_th_c_per_w", (G,)), ("preheat_c_per_w", (G, G))):
            a = _arr(f, getattr(self, f), shape)
            if np.any(a < 0):
                raise ValueError(f"{f} must be >= 0")
            object.__setattr__(self, f, a)
        if self.max_temp_c <= float(self.inlet_c.min()):
            raise ValueError(f"max_temp_c {self.max_temp_c} C is at or below every slot's inlet "
                             f"temperature (min {float(self.inlet_c.min())} C)")
        if self.step_time_slack is not None:
            s = float(self.step_time_slack)
            if not math.isfinite(s) or s < 0:
                raise ValueError(f"step_time_slack must be None or finite and >= 0, got {self.step_time_slack!r}")
            object.__setattr__(self, "step_time_slack", s)
        C = len(caps)
        for o in opts:
            w = f"layout {o.name!r}: "
            for f in ("t_layer_s", "t_first_s", "t_last_s", "p_busy_w"):
                if getattr(o, f).shape != (C,):
                    raise ValueError(f"{w}{f} has {getattr(o, f).size} values, expected one per cap level ({C})")
            if np.any(o.p_busy_w > np.array(caps) * (1 + 1e-12)):
                raise ValueError(f"{w}p_busy_w exceeds the cap at some level")
            S = o.stage_gpus
            if S >= G:
                if S % G:
                    raise ValueError(f"{w}stage_gpus {S} >= gpus_per_node {G} must be a multiple of it")
            elif G % S:
                raise ValueError(f"{w}stage_gpus {S} < gpus_per_node {G} must divide it")
            if o.num_gpus % G:
                raise ValueError(f"{w}pp x stage_gpus = {o.num_gpus} must fill whole nodes of {G} GPUs")
            if o.num_gpus > G * self.num_nodes:
                raise ValueError(f"{w}needs {o.num_gpus // G} nodes, only {self.num_nodes} available")


@dataclass(frozen=True)
class GpuRow:
    """One GPU of the chosen layout: node index, slot in the node, pipeline stage, busy power (W)
    and steady temperature (deg C) under the conservative all-busy thermal model."""

    node: int
    slot: int
    stage: int
    power_w: float
    temp_c: float


@dataclass(frozen=True)
class Solution:
    """A complete decision and its exact evaluation.

    Attributes:
        objective: 'energy', 'time', 'edp' (or 'evaluated' from :func:`evaluate`).
        objective_value: E (J), T (s) or E x T (J s) of this solution.
        layout_index, layout_name: the chosen layout.
        cap_levels: per stage, index of the cap level; caps_w: per stage, the cap (W).
        layers: per stage, number of layers (sum = L).
        slot_blocks: per stage, the slots (0..G-1) its GPUs occupy in each of its nodes.
        stage_nodes: per stage, the node indices it occupies.
        stage_time_s: per stage, time per micro-batch t_s (s).
        tau_s: pipeline period max_s t_s (s); step_time_s: T (s); energy_j: E per step (J).
        gpus: one :class:`GpuRow` per GPU of the layout, ordered by (node, slot).
        status: solver status ('optimal', 'feasible (time limit)', 'brute-force', 'evaluated').
        solve_time_s: wall time of the whole solve, s; num_solves: MIP solves used.
        violations: descriptions of violated limits (empty when feasible).
    """

    objective: str
    objective_value: float
    layout_index: int
    layout_name: str
    cap_levels: tuple
    caps_w: tuple
    layers: tuple
    slot_blocks: tuple
    stage_nodes: tuple
    stage_time_s: tuple
    tau_s: float
    step_time_s: float
    energy_j: float
    gpus: tuple
    status: str = "evaluated"
    solve_time_s: float = 0.0
    num_solves: int = 0
    violations: tuple = ()

    @property
    def edp(self) -> float:
        """Energy x delay, J s."""
        return self.energy_j * self.step_time_s

    @property
    def feasible(self) -> bool:
        """True when no limit (temperature, node power, memory) is violated."""
        return not self.violations

    def value(self, objective: str) -> float:
        """The value of ``objective`` ('energy' J, 'time' s, 'edp' J s) for this solution."""
        return _objective_value(objective, self.step_time_s, self.energy_j)


# -------------------------------------------------------------------------- geometry & evaluation

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


def _node_ok(inst: Instance, p_slot: np.ndarray) -> bool:
    return bool(np.all(_node_temps(inst, p_slot) <= inst.max_temp_c + FEAS_RTOL * abs(inst.max_temp_c))
                and float(np.sum(p_slot)) <= inst.node_power_budget_w * (1 + FEAS_RTOL))


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
    E = E + (p * S * o.p_idle_w) * T
    return t, tau, T, E


def _objective_value(objective: str, T: float, E: float) -> float:
    if objective == "energy":
        return E
    if objective == "time":
        return T
    if objective == "edp":
        return E * T
    return float("nan")


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
    pb = o.p_busy_w
    rows, viol = [], []
    tlim = inst.max_temp_c + FEAS_RTOL * abs(inst.max_temp_c)
    slot_blocks, worst_t, worst_p = [], -np.inf, -np.inf
    for q, st in enumerate(g.node_stages):
        p_slot = np.empty(g.G)
        stage_of = np.empty(g.G, dtype=int)
        for s in st:
            sl = list(g.blocks[blocks[s]])
            p_slot[sl] = pb[caps[s]]
            stage_of[sl] = s
        temps = _node_temps(inst, p_slot)
        worst_t, worst_p = max(worst_t, float(temps.max())), max(worst_p, float(p_slot.sum()))
        rows.extend(GpuRow(q, j, int(stage_of[j]), float(p_slot[j]), float(temps[j])) for j in range(g.G))
    for s in range(o.pp):
        slot_blocks.append(tuple(g.blocks[blocks[s]]))
    if worst_t > tlim:
        viol.append(f"temperature {worst_t:.3f} C > max {inst.max_temp_c} C")
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


# ------------------------------------------------------------------------------------ the model

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
        C, G = len(inst.cap_levels_w), inst.gpus_per_node
        Tmax, B, H = inst.max_temp_c, inst.node_power_budget_w, inst.hbm_bytes
        tlim = Tmax + FEAS_RTOL * abs(Tmax)
        blim = B * (1 + FEAS_RTOL)
        prob = pulp.LpProblem("layout_cap_placement", pulp.LpMinimize)
        self.sig = {f: pulp.LpVariable(f"sig_{f}", lowBound=0) for f in self.relax}
        self.limits = {"temperature": Tmax, "node_power": B, "memory": H}
        strict = not self.relax
        self.lay = []
        self.solves = 0
        # reference scales (rows and objectives are O(1))
        self.T_ref = min(o.periods * (math.ceil(o.num_layers / o.pp) * o.t_layer_s[-1]
                                      + o.t_first_s[-1] + o.t_last_s[-1]) + o.const_time_s
                         for o in inst.options)
        self.E_ref = min(o.num_gpus * o.p_busy_w[-1] for o in inst.options) * self.T_ref
        T_terms, E_terms, xs = [], [], []
        colsum = inst.preheat_c_per_w.sum(axis=0)
        for k, o in enumerate(inst.options):
            g = _geom(inst, o)
            p, S, L, pb = o.pp, o.stage_gpus, o.num_layers, o.p_busy_w
            a, Em, idle = o.periods, S * o.microbatches, o.num_gpus * o.p_idle_w
            # caps allowed by the thermal / power pre-filters (exact; skipped for a relaxed family)
            allowed = []
            pmin = float(pb.min())
            for c in range(C):
                ok = True
                if g.whole:
                    need_t = float(np.max(inst.inlet_c + (colsum + inst.r_th_c_per_w) * pb[c]))
                    if "temperature" not in self.relax and need_t > tlim:
                        ok = False
                    if "node_power" not in self.relax and G * pb[c] > blim:
                        ok = False
                else:
                    if "temperature" not in self.relax:
                        fits = False
                        for b in range(g.Q):
                            ps = np.full(G, pmin)
                            ps[list(g.blocks[b])] = pb[c]
                            if np.all(_node_temps(inst, ps) <= tlim):
                                fits = True
                                break
                        ok = ok and fits
                    if "node_power" not in self.relax and S * pb[c] + (G - S) * pmin > blim:
                        ok = False
                if ok:
                    allowed.append(c)
            # per-stage layer bounds: memory, and the period bound from T_max / E_max
            Lcap = L - (p - 1)
            U = [Lcap if "memory" in self.relax else _mem_bound(inst, o, s, Lcap) for s in range(p)]
            extra = [[(o.t_first_s[c] if s == 0 else 0.0) + (o.t_last_s[c] if s == p - 1 else 0.0)
                      for c in range(C)] for s in range(p)]
            tau_max = math.inf
            if math.isfinite(T_max):
                tau_max = (T_max - o.const_time_s) / a
            if math.isfinite(E_max) and idle > 0:
                de = Em * (pb - o.p_idle_w)
                ce_lb = (float(np.min(de * o.t_layer_s)) * L + float(np.min(de * o.t_first_s))
                         + float(np.min(de * o.t_last_s)))
                tau_max = min(tau_max, ((E_max - ce_lb) / idle - o.const_time_s) / a)
            if weighted is not None:
                # E + lam T <= V with E >= ce_lb + idle T: T <= (V - ce_lb) / (idle + lam)
                lam, V = weighted
                de = Em * (pb - o.p_idle_w)
                ce_lb = (float(np.min(de * o.t_layer_s)) * L + float(np.min(de * o.t_first_s))
                         + float(np.min(de * o.t_last_s)))
                if idle + lam > 0:
                    tau_max = min(tau_max, ((V * (1 + _ROW_SLACK) - ce_lb) / (idle + lam) - o.const_time_s) / a)
            tau_min = max(0.0, (T_min - o.const_time_s) / a) if T_min > 0 else 0.0
            if tau_min > tau_max:
                self.lay.append(None)
                continue
            Usc = []
            for s in range(p):
                row = {}
                for c in allowed:
                    u_ = U[s]
                    if math.isfinite(tau_max):
                        room = (tau_max - extra[s][c]) * (1 + 1e-9)
                        u_ = min(u_, math.floor(room / o.t_layer_s[c]) if room >= 0 else 0)
                    if u_ >= 1:
                        row[c] = int(u_)
                Usc.append(row)
            if not allowed or any(not r for r in Usc) or sum(max(r.values()) for r in Usc) < L:
                self.lay.append(None)
                continue
            # period levels and window patterns (only when tau is bounded)
            tau_lb, base, window = _period_window(o, Usc, extra, tau_max, tau_min)
            has_window = any(window[s] for s in range(p))
            x = pulp.LpVariable(f"x_{k}", cat="Binary")
            xs.append(x)
            ts = max(math.ceil(L / p) * float(o.t_layer_s[-1]), 1e-30)   # tau scale, s
            tau = pulp.LpVariable(f"tau_{k}", lowBound=0)                 # tau / ts
            thetas = sorted({th for s in range(p) for c in window[s] for _, th in window[s][c]})
            v = {th: pulp.LpVariable(f"v_{k}_{i}", cat="Binary") for i, th in enumerate(thetas)}
            if thetas:
                prob += v[thetas[0]] - x <= 0, f"lvx_{k}"
                for i in range(1, len(thetas)):
                    prob += v[thetas[i]] - v[thetas[i - 1]] <= 0, f"lvchain_{k}_{i}"
                steps = [(v[th], (th - (thetas[i - 1] if i else tau_lb)) / ts) for i, th in enumerate(thetas)]
                prob += tau - pulp.LpAffineExpression(steps + [(x, tau_lb / ts)]) >= 0, f"lvtau_{k}"
            # units: single stages, or (strict mode, bounded period) groups of interchangeable
            # middle stages -- same bounds, and identical nodes (S >= G) or the same node (S < G) --
            # modelled by counts (exact: only the multiset of (cap, layers) of a group matters)
            # S < G with no thermal or power row able to bind (every slot cool enough and the node
            # under budget even with every block at the highest allowed busy power): placement is
            # irrelevant and the layout is treated like whole-node stages (exact)
            free = (not g.whole and strict
                    and g.Q * S * max(pb[c] for c in allowed) <= B * (1 + _ROW_SLACK)
                    and bool(np.all(_node_temps(inst, np.full(G, max(pb[c] for c in allowed)))
                                    <= Tmax + _ROW_SLACK * abs(Tmax))))
            units = []
            if strict and has_window and p > 2:
                groups = {}
                for s in range(1, p - 1):
                    groups.setdefault(None if g.whole or free else s // g.Q, []).append(s)
                units = [[0]] + list(groups.values()) + [[p - 1]]
            else:
                units = [[s] for s in range(p)]
            Yv = [None] * p          # per unit, at its first stage: cap -> count variables
            single = {st[0] for st in units if len(st) == 1}
            nexpr = [None] * p       # per stage (single units): layer expression
            layer_terms, ulist = [], []
            for ui, st in enumerate(units):
                s0, M = st[0], len(st)
                cat = "Binary" if M == 1 else "Integer"
                caps_u = sorted(Usc[s0])
                # low range shared by all stages of the unit; the rest are explicit patterns
                # (c, m) -> theta (None below tau_lb, where the period cannot bind)
                low = {c: min(base[s][c] for s in st) for c in caps_u}
                pats = {}
                for s in st:
                    for c in caps_u:
                        for m in range(low[c] + 1, base[s][c] + 1):
                            pats[c, m] = None
                        for m, th in window[s].get(c, []):
                            pats[c, m] = th
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
                # stages of a unit differ at most in their memory bound U_s (nested): the patterns
                # fit iff, for every threshold t, #patterns with more than t layers <= #stages with
                # U_s > t (Hall's condition for nested neighbourhoods)
                Us = sorted({U[s] for s in st})
                for t_ in Us[:-1]:
                    big = [(Nc[cm], 1.0) for cm in Nc if cm[1] > t_]
                    if big:
                        prob += (pulp.LpAffineExpression(big) <= sum(1 for s in st if U[s] > t_)), f"hall_{k}_{ui}_{t_}"
                # a stage on a pattern of time >= theta forces tau >= theta: the cumulative count
                # of the unit's patterns at or above theta is <= M v_theta
                by_th = {}
                for cm, th in pats.items():
                    if th is not None:
                        by_th.setdefault(th, []).append(Nc[cm])
                prev = None
                for i, th in enumerate(sorted(by_th, reverse=True)):
                    cum = pulp.LpVariable(f"W_{k}_{ui}_{i}", lowBound=0)
                    terms = [(cum, 1.0)] + [(var, -1.0) for var in by_th[th]] + ([(prev, -1.0)] if prev is not None else [])
                    prob += pulp.LpAffineExpression(terms) == 0, f"wcum_{k}_{ui}_{i}"
                    prob += cum - M * v[th] <= 0, f"wlv_{k}_{ui}_{i}"
                    prev = cum
                lay_terms = [(Zc[c], 1.0) for c in Kc] + [(Nc[cm], float(cm[1])) for cm in Nc]
                layer_terms += lay_terms
                Yv[s0] = {c: ([Kc[c]] if c in Kc else []) + [Nc[cm] for cm in Nc if cm[0] == c] for c in caps_u}
                Yv[s0] = {c: vs for c, vs in Yv[s0].items() if vs}
                if M == 1:
                    # exact period row of a single stage (implied by the levels when the window exists)
                    tterms = ([(Zc[c], o.t_layer_s[c] / ts) for c in Kc]
                              + [(Kc[c], extra[s0][c] / ts) for c in Kc if extra[s0][c]]
                              + [(Nc[c, m], (m * o.t_layer_s[c] + extra[s0][c]) / ts) for c, m in Nc])
                    prob += tau - pulp.LpAffineExpression(tterms) >= 0, f"period_{k}_{ui}"
                    nexpr[s0] = pulp.LpAffineExpression(lay_terms)
                    if "memory" in self.relax:
                        prob += (pulp.LpAffineExpression([(var, cf * o.mem_per_layer_bytes[s0] / H) for var, cf in lay_terms]
                                                         + [(x, (o.mem_fixed_bytes[s0] - H) / H),
                                                            (self.sig["memory"], -1.0 / H)]) <= 0, f"mem_{k}_{s0}")
                for c in Kc:
                    dp = Em * (pb[c] - o.p_idle_w)
                    E_terms.append((Zc[c], dp * o.t_layer_s[c] / self.E_ref))
                    if extra[s0][c]:
                        E_terms.append((Kc[c], dp * extra[s0][c] / self.E_ref))
                for c, m in Nc:
                    dp = Em * (pb[c] - o.p_idle_w)
                    E_terms.append((Nc[c, m], dp * (m * o.t_layer_s[c] + extra[s0][c]) / self.E_ref))
                ulist.append(dict(stages=st, K=Kc, Z=Zc, N=Nc, U=[U[s] for s in st]))
            prob += pulp.LpAffineExpression(layer_terms + [(x, -float(L))]) == 0, f"layers_{k}"
            T_terms += [(tau, a * ts / self.T_ref), (x, o.const_time_s / self.T_ref)]
            E_terms += [(tau, idle * a * ts / self.E_ref), (x, idle * o.const_time_s / self.E_ref)]
            n = nexpr

            def Y(s, c, coef=1.0):
                return [(var, coef) for var in Yv[s].get(c, [])]

            # thermal / node power
            u = None
            if g.whole:
                for s in range(p):
                    if "temperature" in self.relax:
                        need = {c: float(np.max(inst.inlet_c + (colsum + inst.r_th_c_per_w) * pb[c]))
                                for c in Yv[s]}
                        prob += (pulp.LpAffineExpression([t for c in Yv[s] for t in Y(s, c, need[c] / Tmax)]
                                                         + [(x, -1.0), (self.sig["temperature"], -1.0 / Tmax)])
                                 <= 0, f"temp_{k}_{s}")
                    if "node_power" in self.relax:
                        prob += (pulp.LpAffineExpression([t for c in Yv[s] for t in Y(s, c, G * pb[c] / B)]
                                                         + [(x, -1.0), (self.sig["node_power"], -1.0 / B)])
                                 <= 0, f"power_{k}_{s}")
            elif not free:
                u = []
                for q, st in enumerate(g.node_stages):
                    st = [s for s in st if Yv[s] is not None]
                    ucaps = sorted({c for s in st for c in Yv[s]})
                    uq = [{c: pulp.LpVariable(f"u_{k}_{q}_{b}_{c}", cat="Binary") for c in ucaps}
                          for b in range(g.Q)]
                    u.append(uq)
                    for b in range(g.Q):
                        prob += pulp.lpSum(uq[b].values()) - x == 0, f"occ_{k}_{q}_{b}"
                    for c in ucaps:
                        prob += (pulp.LpAffineExpression([(uq[b][c], 1.0) for b in range(g.Q)]
                                                         + [t for s in st for t in Y(s, c, -1.0)]) == 0,
                                 f"mset_{k}_{q}_{c}")
                    for j in range(G):
                        bj = j // S
                        terms, hi = [], 0.0
                        for b in range(g.Q):
                            hsum = float(sum(inst.preheat_c_per_w[i, j] for i in g.blocks[b]))
                            coef_b = hsum + (float(inst.r_th_c_per_w[j]) if b == bj else 0.0)
                            if coef_b:
                                terms += [(uq[b][c], pb[c] * coef_b / Tmax) for c in ucaps]
                                hi += max(pb[c] for c in ucaps) * coef_b / Tmax
                        rhs = (Tmax + _ROW_SLACK * abs(Tmax) - float(inst.inlet_c[j])) / Tmax
                        terms.append((x, -rhs))
                        if "temperature" in self.relax:
                            terms.append((self.sig["temperature"], -1.0 / Tmax))
                        elif hi <= rhs:
                            continue          # cannot bind
                        prob += pulp.LpAffineExpression(terms) <= 0, f"temp_{k}_{q}_{j}"
                    pw = [t for s in st for c in Yv[s] for t in Y(s, c, S * pb[c] / B)] + [(x, -1.0 - _ROW_SLACK)]
                    if "node_power" in self.relax:
                        pw.append((self.sig["node_power"], -1.0 / B))
                    elif g.Q * S * max(pb[c] for c in ucaps) <= B:
                        pw = None
                    if pw is not None:
                        prob += pulp.LpAffineExpression(pw) <= 0, f"power_{k}_{q}"
                    if strict:
                        for b1, b2 in _block_symmetry(inst, g):
                            prob += (pulp.lpSum(c * uq[b1][c] for c in ucaps)
                                     - pulp.lpSum(c * uq[b2][c] for c in ucaps) >= 0), f"bsym_{k}_{q}_{b1}"
            # stage symmetry: single middle stages with equal bounds on interchangeable nodes
            if strict:
                groups = {}
                for s in range(1, p - 1):
                    if s not in single:
                        continue
                    key = (tuple(sorted(Usc[s].items())),) + ((s // g.Q,) if not g.whole else ())
                    groups.setdefault(key, []).append(s)
                for members in groups.values():
                    for s1, s2 in zip(members, members[1:]):
                        prob += (n[s1] * C - n[s2] * C
                                 + pulp.LpAffineExpression([t for c in Yv[s1] for t in Y(s1, c, c)]
                                                           + [t for c in Yv[s2] for t in Y(s2, c, -c)]) >= 0,
                                 f"ssym_{k}_{s1}")
            self.lay.append(dict(k=k, x=x, units=ulist, u=u, g=g))
        self.empty = not xs
        if self.empty:
            return
        prob += pulp.lpSum(xs) == 1, "one_layout"
        self.T_expr = pulp.LpAffineExpression(T_terms)
        self.E_expr = pulp.LpAffineExpression(E_terms)
        self.tbound = self.T_expr <= 1e9
        self.ebound = self.E_expr <= 1e9
        prob += self.tbound, "tbound"
        prob += self.ebound, "ebound"
        self.prob = prob
        self.set_bounds(T_max, E_max)

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
        o, g, U = ctx[k]
        p, L = o.pp, o.num_layers
        if g.whole:
            for c in set(caps):
                if not _node_ok(inst, np.full(g.G, float(o.p_busy_w[c]))):
                    return None
        else:
            for st in g.node_stages:
                ps = np.empty(g.G)
                for s in st:
                    ps[list(g.blocks[s % g.Q])] = o.p_busy_w[caps[s]]
                if not _node_ok(inst, ps):
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
        te = (float(T[0]), float(E[0]))
        out.add(te)
        return te

    starts = []
    for k, o in enumerate(inst.options):
        g = _geom(inst, o)
        p, L, S = o.pp, o.num_layers, o.stage_gpus
        U = [_mem_bound(inst, o, s, L - (p - 1)) for s in range(p)]
        if min(U) < 1 or sum(U) < L:
            continue
        ctx[k] = (o, g, U)
        for c0 in range(C):
            caps = [c0] * p
            ok = True
            if not g.whole:
                for st in g.node_stages:
                    while ok:
                        ps = np.empty(g.G)
                        for s in st:
                            ps[list(g.blocks[s % g.Q])] = o.p_busy_w[caps[s]]
                        if _node_ok(inst, ps):
                            break
                        over_power = float(ps.sum()) > inst.node_power_budget_w * (1 + FEAS_RTOL)
                        j = int(np.argmax(_node_temps(inst, ps) - inst.max_temp_c))
                        cand = [s for s in st if caps[s] > 0]
                        if not cand:
                            ok = False
                            break

                        def contrib(s):
                            blk = list(g.blocks[s % g.Q])
                            if over_power:
                                return float(o.p_busy_w[caps[s]])
                            return float(o.p_busy_w[caps[s]]) * (float(inst.preheat_c_per_w[blk, j].sum())
                                                                 + (float(inst.r_th_c_per_w[j]) if j in blk else 0.0))
                        caps[max(cand, key=contrib)] -= 1
            te = evalc(k, caps) if ok else None
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


def _check_objective(objective: str):
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}: expected one of {OBJECTIVES}")


def solve(instance: Instance, objective: str = "energy", *, solver: str = "cbc", threads: int = 1,
          time_limit_s: float | None = None, msg: bool = False) -> Solution:
    """Optimal layout, per-stage cap, layer split and placement (formulation: module docstring).

    Args:
        instance: the :class:`Instance`.
        objective: 'energy' (min J per step), 'time' (min s per step, ties broken by least energy)
            or 'edp' (min energy x step time, exactly: the best vertex of the front's lower convex
            hull, found by the dichotomic weighted-sum search of Aneja & Nair 1979; see the module
            docstring for why the optimum is such a vertex).
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
    T_bound, T_min, fast = math.inf, None, None
    if slack is not None or objective == "edp":
        fast = run.fastest()
        if fast is None:
            raise _diagnose(instance, slv)
        T_min = fast.step_time_s
        if slack is not None:
            T_bound = (1 + slack) * T_min * (1 + FEAS_RTOL)
    if objective == "energy":
        best = run.min_energy(T_max=T_bound, T_rtol=0.0)
        if best is None:
            raise _diagnose(instance, slv)
        return run.finish(best, objective)
    return run.finish(run.edp(fast, T_bound), objective)


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


# ------------------------------------------------------------------------------- infeasibility

def _diagnose(inst: Instance, solver) -> InfeasibleError:
    """Relax each limit family alone (then all together) with a minimised slack; build the error."""
    names = {"temperature": "max temperature", "node_power": "node power budget", "memory": "HBM capacity"}

    def fmt(f, v):
        return f"{v:.1f} C" if f == "temperature" else f"{v:.0f} W" if f == "node_power" else f"{v / 1e9:.3f} GB"

    def required_by(sol: Solution, fams):
        o = inst.options[sol.layout_index]
        vals = {"temperature": max(r.temp_c for r in sol.gpus),
                "node_power": max(sum(r.power_w for r in sol.gpus if r.node == q)
                                  for q in {r.node for r in sol.gpus}),
                "memory": float(np.max(o.mem_fixed_bytes + np.array(sol.layers) * o.mem_per_layer_bytes))}
        return {f: max(vals[f], _limit(inst, f)) for f in fams}

    def relaxed(fams):
        m = _Model(inst, relax=fams)
        if m.empty:
            return None
        m.set_bounds()
        if not m.run(pulp.lpSum(m.sig[f] * (1.0 / m.limits[f]) for f in fams), solver):
            return None
        k, caps, layers, blocks = m.decision()
        sol = evaluate(inst, k, caps, layers, blocks)
        return sol, required_by(sol, fams)

    required, relative, layout_of = {}, {}, {}
    for f in _FAMILIES:
        r = relaxed((f,))
        if r is not None:
            required[f] = r[1][f]
            relative[f] = (required[f] - _limit(inst, f)) / _limit(inst, f)
            layout_of[f] = r[0].layout_name
    if required:
        order = sorted(required, key=lambda f: relative[f])
        f = order[0]
        msg = (f"no layout meets the limits: {names[f]} {fmt(f, _limit(inst, f))} must rise to "
               f"{fmt(f, required[f])} (+{100 * relative[f]:.2f}%, layout {layout_of[f]!r})")
        others = [f"{names[g]} {fmt(g, _limit(inst, g))} -> {fmt(g, required[g])} (+{100 * relative[g]:.2f}%)"
                  for g in order[1:]]
        if others:
            msg += "; alternatively " + ", ".join(others)
        return InfeasibleError(f, msg, required, relative)
    r = relaxed(_FAMILIES)
    if r is None:  # cannot happen for a validated instance
        return InfeasibleError("unknown", "no layout meets the limits, even with every limit relaxed")
    sol, req = r
    fams = [f for f in _FAMILIES if req[f] > _limit(inst, f) * (1 + FEAS_RTOL)]
    rel = {f: (req[f] - _limit(inst, f)) / _limit(inst, f) for f in fams}
    msg = ("no layout meets the limits and no single limit suffices: " +
           ", ".join(f"{names[f]} {fmt(f, _limit(inst, f))} must rise to {fmt(f, req[f])} (+{100 * rel[f]:.2f}%)"
                     for f in fams) + f" (layout {sol.layout_name!r})")
    return InfeasibleError("+".join(fams), msg, {f: req[f] for f in fams}, rel)


def _limit(inst: Instance, family: str) -> float:
    return {"temperature": inst.max_temp_c, "node_power": inst.node_power_budget_w,
            "memory": inst.hbm_bytes}[family]
