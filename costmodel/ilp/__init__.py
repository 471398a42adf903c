"""Joint choice of parallel layout, per-stage power cap, layer split and slot placement (an ILP).

The package works on an abstract :class:`Instance` (the caller builds it from the cost model): a
handful of candidate layouts with per-cap-level times and powers, and a cluster of identical nodes
with a per-slot thermal model.  :func:`solve` returns the optimal :class:`Solution`,
:func:`pareto_front` the time-energy Pareto front; the brute-force oracle of the tests
(tests/ilp/ilp_oracle.py) enumerates every decision and agrees with them.

Modules: ``instance`` (the inputs :class:`LayoutOption`, :class:`Instance` and the outputs
:class:`GpuRow`, :class:`Solution`, with validation), ``evaluation`` (geometry of a layout on the
nodes and the exact evaluation :func:`evaluate`), ``model`` (the MIP and the read-back of its
decision), ``solver`` (heuristic incumbents, :func:`solve`, :func:`pareto_front`, EDP) and
``diagnose`` (infeasibility diagnosis).

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
    E = sum_s S m (Pb[c_s] - Pi) t_s  +  p S Pi T  +  sum_s Ec[c_s]

(each GPU computes for m t_s and idles for the rest of the step, except while it moves the step's
exposed DP, optimizer and stage-boundary traffic, Ec[c] above the waiting power: the link phase's
power held at the stage's cap; Pb averages the compute phase and the communication a layer leaves
exposed, at that same link power, as costmodel.energy.stage_state charges them).  T is the equal-stage schedule: it
bounds costmodel.schedule's critical path over unequal stages, m tau + (sum_s t_s - tau)/v, from
above by (p - 1)/v (tau - mean_s t_s) and meets it when the stages are equal, the split the period
term drives the ILP towards.  Memory: Mf[s] + n_s Ml[s] <= H.
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
from ..errors import InfeasibleError, SolverUnavailableError
from .evaluation import edp_lower_bound, evaluate, lower_bounds
from .instance import FEAS_RTOL, OBJECTIVES, GpuRow, Instance, LayoutOption, Solution
from .solver import pareto_front, solve

__all__ = [
    "OBJECTIVES", "FEAS_RTOL", "LayoutOption", "Instance", "GpuRow", "Solution", "InfeasibleError",
    "SolverUnavailableError", "solve", "pareto_front", "evaluate", "lower_bounds", "edp_lower_bound",
]
