"""ILP inputs and outputs: candidate layouts, the instance, per-GPU rows and the solution (with validation).

The formulation is described in the :mod:`costmodel.ilp` docstring.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..schedule import bubble_periods

OBJECTIVES = ("energy", "time", "edp")
FEAS_RTOL = 1e-6          # relative tolerance of every limit check (temperature, power, memory, slack)
_ROW_SLACK = 1e-7         # relative slack on the MIP's limit rows and incumbent bounds (< FEAS_RTOL)


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
        p_busy_w: shape (C,), power of a GPU while computing at each cap level, W: <= the cap, except
            at levels below what the GPU draws at its lowest clock (cap unmet), which all hold
            that power; non-decreasing in the level.
        p_idle_w: power of an idle/waiting GPU, W (<= every p_busy_w).
        p_node_w: the nodes' non-GPU power (CPUs, NICs, switches, fans) per GPU of the layout, W,
            drawn for the whole step; 0 counts GPU energy only.
        stage_comm_energy_j: shape (C,), energy per step of one stage's GPUs above the waiting power
            at each cap level, J, >= 0 and non-decreasing in the level (default none): during the
            step's exposed communication (DP, optimizer, stage-boundary sends) they draw their
            communication phase's power held at their stage's cap (costmodel.energy.stage_state), not
            the waiting power ``const_time_s`` is charged.
        p_thermal_w: shape (C,), the power a GPU's steady temperature follows at each cap level, W:
            its average over the step (busy, exposed communication, waiting), between p_idle_w and
            p_budget_w (its logits may draw more than its layers); default p_busy_w (busy all step).
        p_budget_w: shape (C,), the power the node power budget reads at each cap level, W, >= p_busy_w
            and non-decreasing in the level; default p_busy_w.  An electrical limit is kept by the caps
            themselves: the level's cap, or what the GPU draws where its lowest clock cannot meet it.
        max_layers_per_stage: most layers a stage may take (0: no limit); L / p forces the even
            split an interleaved schedule (v > 1) needs.
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
    p_node_w: float = 0.0
    max_layers_per_stage: int = 0
    stage_comm_energy_j: np.ndarray | None = None
    p_thermal_w: np.ndarray | None = None
    p_budget_w: np.ndarray | None = None

    def __post_init__(self):
        w = f"layout {self.name!r}: "
        for f in ("pp", "stage_gpus", "num_layers", "microbatches", "vp"):
            v = getattr(self, f)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ValueError(f"{w}{f} must be a positive integer, got {v!r}")
            object.__setattr__(self, f, int(v))
        if self.num_layers < self.pp:
            raise ValueError(f"{w}num_layers {self.num_layers} < pp {self.pp}: every stage needs >= 1 layer")
        m = self.max_layers_per_stage
        if isinstance(m, bool) or int(m) != m or m < 0 or (m and m * self.pp < self.num_layers):
            raise ValueError(f"{w}max_layers_per_stage must be 0 or an integer with pp x it >= num_layers, got {m!r}")
        object.__setattr__(self, "max_layers_per_stage", int(m))
        for f in ("const_time_s", "p_idle_w", "p_node_w"):
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
        e = (np.zeros_like(self.p_busy_w) if self.stage_comm_energy_j is None
             else _arr("stage_comm_energy_j", self.stage_comm_energy_j, self.p_busy_w.shape, where=w))
        if np.any(e < 0) or np.any(np.diff(e) < -1e-9 * max(1.0, float(e.max(initial=0.0)))):
            raise ValueError(f"{w}stage_comm_energy_j must be >= 0 and non-decreasing in the cap level")
        e.setflags(write=False)
        object.__setattr__(self, "stage_comm_energy_j", e)
        if np.any(self.t_layer_s <= 0):
            raise ValueError(f"{w}t_layer_s must be > 0 at every cap level")
        if np.any(self.p_busy_w <= 0):
            raise ValueError(f"{w}p_busy_w must be > 0 at every cap level")
        if np.any(self.p_busy_w < self.p_idle_w):
            raise ValueError(f"{w}p_busy_w must be >= p_idle_w at every cap level")
        tol = 1e-9 * float(self.p_busy_w.max())
        bud = (self.p_busy_w.copy() if self.p_budget_w is None
               else _arr("p_budget_w", self.p_budget_w, self.p_busy_w.shape, where=w))
        # (p_busy_w itself is checked against the caps with the instance's levels)
        if self.p_budget_w is not None and (np.any(bud < self.p_busy_w - tol) or np.any(np.diff(bud) < -tol)):
            raise ValueError(f"{w}p_budget_w must be >= p_busy_w and non-decreasing in the cap level")
        h = (self.p_busy_w.copy() if self.p_thermal_w is None
             else _arr("p_thermal_w", self.p_thermal_w, self.p_busy_w.shape, where=w))
        # the busiest stage's logits may draw more than its layers do, up to the level's budget reading
        if np.any(h < self.p_idle_w - tol) or np.any(h > bud + 1e-9 * float(bud.max())):
            raise ValueError(f"{w}p_thermal_w must lie between p_idle_w and p_budget_w at every cap level")
        h.setflags(write=False)
        object.__setattr__(self, "p_thermal_w", h)
        bud.setflags(write=False)
        object.__setattr__(self, "p_budget_w", bud)
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
        """m + (p - 1)/v (costmodel.schedule.bubble_periods): step time = periods x tau + const_time_s."""
        return self.microbatches + bubble_periods(self.pp, self.vp)


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
            # above the cap only where the GPU cannot meet it: a kernel class already at the lowest
            # clock keeps that clock's power (costmodel.power.clock_ratio) while the others meet the
            # cap, so the phase's mean may exceed the cap, at the lowest levels only (a cap a GPU
            # cannot meet, it cannot meet at any lower level either)
            over = o.p_busy_w > np.array(caps) * (1 + 1e-12)
            if np.any(over[1:] & ~over[:-1]) or np.any(np.diff(o.p_busy_w) < -1e-9 * max(1.0, float(o.p_busy_w.max()))):
                raise ValueError(f"{w}p_busy_w exceeds the cap at some level (allowed only at the lowest levels, "
                                 "where a kernel class holds the power of the GPU's lowest clock) or falls as the "
                                 "cap rises")
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
        reference: the fastest solution under the same limits (what a step-time slack is measured
            against), set by :func:`costmodel.ilp.solve` for the energy and EDP objectives.
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
    reference: "Solution | None" = None

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


def _objective_value(objective: str, T: float, E: float) -> float:
    if objective == "energy":
        return E
    if objective == "time":
        return T
    if objective == "edp":
        return E * T
    return float("nan")


def _check_objective(objective: str):
    if objective not in OBJECTIVES:
        raise ValueError(f"unknown objective {objective!r}: expected one of {OBJECTIVES}")
