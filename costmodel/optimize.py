"""Energy-aware layout choice: from the search's layouts to the ILP (costmodel.ilp) and back.

1. The vectorised search (costmodel.search) finds every feasible layout.
2. Every 1F1B layout, and every interleaved one whose layers split evenly over its virtual stages
   (the ILP keeps those at the even split), becomes an ILP option, tabulated per cap level
   for all layouts at once (:func:`option_table`, from costmodel.energy.layer_blocks): time of one layer and of the logits per micro-batch under the
   cap (DVFS: compute-bound time / clock ratio), power while computing, waiting power (idle +
   NCCL spin), the nodes' non-GPU power, per-stage memory (costmodel.memory.stage_memory_terms).
3. Branch and bound over layouts (:func:`solve_space`): each option has a lower bound of its
   objective over every decision (costmodel.ilp.lower_bounds); the ILP runs on the options of
   smallest bound, and options whose bound is below the best value found join it until none is
   left: the answer is the optimum over the whole space, though the ILP sees a handful.
4. costmodel.ilp chooses layout, per-stage caps, layers per stage and slot blocks.

Cap levels are evenly spaced from the GPU's minimum power limit to the user's cap (default: the cluster's power limit).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np

from . import ilp
from .energy import burst_classes, capped_classes, check_cap, layer_blocks, power_params, require_energy_inputs
from .errors import InputError
from .memory import stage_memory_terms
from .power import compute_under_cap, held_power_w, phase_power_w, wait_power_w
from .predict import RunPrediction, predict_runs, predict_table, prediction_row
from .search import SearchResult
from .specs import ClusterSpec, Profile
from .thermal import preheat_matrix

OBJECTIVES = ("time", "energy", "edp")


#: power-cap levels per stage the energy search prices by default: 9 evenly spaced levels nest 5's (and 3's),
#: so the optimum is never worse than theirs; Llama 3 70B at 55 C on paper-h200 gains 11% energy over 5
DEFAULT_CAP_LEVELS = 9
#: how far above a cap a GPU's busy power may sit before the cap counts as not held, W (the reports'
#: rounding; costmodel.report.unmet_caps reads it too)
CAP_TOL_W = 0.5


def cap_levels(cluster: ClusterSpec, profile: Profile, max_cap_w: float | None, n: int = DEFAULT_CAP_LEVELS) -> tuple:
    """``n`` evenly spaced caps from the GPU's minimum power limit to the cluster's power limit (its
    TDP unless the file sets power.gpu_power_limit), W, in whole watts inside the GPU's settable range;
    with ``max_cap_w`` the levels up to it and ``max_cap_w`` itself, so that a cap the optimum already
    keeps to leaves the levels it chose (a grid stretched to the cap had moved them).

    Raises:
        InputError: a cap outside the GPU's settable range.
    """
    pw = power_params(cluster, profile)
    top = pw.max_cap_w if max_cap_w is None else max_cap_w
    check_cap(cluster, pw, top)
    # whole watts, the levels `nvidia-smi -pl` is told to set: the lowest rounded up into the range (MI250's 47.2 W)
    grid = np.clip(np.round(np.linspace(pw.min_cap_w, pw.max_cap_w, n)), math.ceil(pw.min_cap_w), pw.max_cap_w)
    # a grid level within half a watt of the cap is the cap (the levels print and are set in whole watts)
    levels = sorted({float(x) for x in grid if x < top - 0.5} | {float(top)})
    return tuple(levels) if top > pw.min_cap_w else (top,)


def with_budget_share(caps: tuple, node_gpu_budget_w: float, gpus_per_node: int) -> tuple:
    """``caps`` (W, ascending) with the node GPU budget's even share per GPU, whole watts down, as one
    more level where it falls strictly between two: a grid step below it would leave part of the
    budget unused (8 GPUs under 3.0 kW: 375 W, between the 9-level grid's 325 and 388 W)."""
    share = float(np.floor(node_gpu_budget_w / gpus_per_node))
    return tuple(sorted(caps + (share,))) if caps[0] < share < caps[-1] and share not in caps else caps


def option_table(model, recipe, cluster, profile, terms, caps: tuple, node_power: bool = False) -> dict:
    """The fields of the ILP options (``ilp.LayoutOption`` keyword arguments) but their memory, for
    every layout of ``terms`` at once: per-cap layer and logits times (DVFS: compute-bound time /
    clock ratio) and busy power, waiting and node power, schedule constants.  Arrays over layouts
    (N,), per-cap ones (N, C); built from :func:`costmodel.energy.layer_blocks`."""
    pw = power_params(cluster, profile)
    b = layer_blocks(model, recipe, cluster, profile, terms)
    cap = np.asarray(caps, dtype=np.float64)[None, :]
    burst = burst_classes(profile, recipe)
    # communication draws the link phase's power held at the cap (costmodel.energy.stage_state)
    p_comm = held_power_w(pw, np.asarray(phase_power_w(pw, {"link": b["u_link"]}), dtype=np.float64), cap)

    def under_cap(blk):
        # each kernel class at the clock it reaches: the cap, or more where the GPU's lowest clock
        # cannot meet it (costmodel.energy.stage_state); the busy power is the average over the
        # compute phase and the communication the layer leaves exposed, at the link phase's power
        col = lambda v: np.asarray(v, dtype=np.float64)[:, None]
        classes = {k: (col(tc), {n: col(u) for n, u in util.items()}) for k, (tc, util) in blk["classes"].items()}
        comp, e, _, _ = compute_under_cap(pw, capped_classes(classes, burst), cap)
        t_all = comp + blk["exposed_s"][:, None]
        return t_all, (e + p_comm * blk["exposed_s"][:, None]) / np.where(t_all > 0, t_all, 1.0)

    t_layer, p_busy = under_cap(b["layer"])
    t_last, p_last = under_cap(b["logits"])
    t = terms.layouts
    n = t.tp * t.pp * t.dp * t.cp
    G = cluster.gpus_per_node
    # the step's exposed communication draws the link phase's power held at the stage's cap
    # (costmodel.energy.stage_state: the micro-batches' stage-boundary sends and the DP reduction with
    # the optimizer step), above the waiting power const_time_s is charged at
    p_wait = float(held_power_w(pw, wait_power_w(pw), float(min(caps))))
    ones = np.ones(len(terms.layouts))
    comm_s = np.asarray(b["const_s"] + b["m"] * b["pp_mb_s"], dtype=np.float64) * ones
    # the DP reduction at its own utilisations (costmodel.energy.dp_comm_util: NIC-paced across nodes)
    dp_s = np.asarray(b["dp_s"], dtype=np.float64) * ones
    p_dp = held_power_w(pw, np.asarray(phase_power_w(pw, b["dp_util"]), dtype=np.float64)[:, None] * ones[:, None], cap)
    stage_comm = np.asarray(b["stage_gpus"])[:, None] * (np.maximum(p_comm - p_wait, 0.0) * (comm_s - dp_s)[:, None]
                                                         + np.maximum(p_dp - p_wait, 0.0) * dp_s[:, None])
    const_s = b["const_s"] + b["bubble_factor"] * b["pp_mb_s"] + b["pp_fill_s"]
    p_heat = _thermal_power_w(model, t, b["m"], b["stage_gpus"], const_s, t_layer, (t_last, p_last), p_busy, p_wait,
                              stage_comm, cap)
    return dict(pp=t.pp, stage_gpus=b["stage_gpus"], num_layers=model.num_layers, microbatches=b["m"], vp=t.vp,
                const_time_s=const_s, t_layer_s=t_layer,
                t_first_s=np.zeros_like(t_layer), t_last_s=t_last, p_busy_w=p_busy, p_thermal_w=p_heat,
                # the node budget, an electrical limit, is kept by the caps themselves (a GEMM burst
                # draws up to the cap whatever the step's average)
                p_budget_w=np.maximum(np.broadcast_to(cap, p_busy.shape), p_busy),
                p_idle_w=np.full(len(t), p_wait), stage_comm_energy_j=stage_comm,
                p_node_w=(-(-n // G)) * cluster.node_other_power_w / n if node_power else np.zeros(len(t)),
                max_layers_per_stage=np.where(t.vp > 1, model.num_layers // t.pp, 0))


def _thermal_power_w(model, t, m, stage_gpus, const_s, t_layer, logits, p_busy, p_wait, stage_comm, caps_w):
    """(N, C) the power a GPU's steady temperature follows at each cap level, W: the busiest stage's
    (the last: ceil(L/p) layers and the logits, ``logits`` their (time, busy power), each (N, C)) average
    over a step with every stage at that cap, p_wait + (its layers' and logits' busy energy above waiting
    + its communication energy above waiting per GPU) / T,
    T = m x its period + the other stages' periods / v + the step's constant time: predict's 1F1B step
    (costmodel.schedule.pipeline_bubble_s) with the other stages holding the layers left, L - ceil(L/p),
    without the logits.  A slot's temperature settles on its average power over a step (the
    first-order RC of costmodel.thermal, tau about two minutes in the built-in profiles; predict prices
    throttling on the same average), so a cap whose busy power would pass the limit only in the compute
    phase is not excluded; a stage slower than the rest stretches T and cools the others, which this
    uniform-cap figure bounds from above (the ILP schedule's bubble of p - 1 whole periods, a longer T,
    would not: it had put answers 0.1 C above the limit predict then found)."""
    pp, vp = t.pp[:, None].astype(np.float64), t.vp[:, None].astype(np.float64)
    m = np.asarray(m, dtype=np.float64) * np.ones(len(t))
    t_last, p_last = logits
    busiest = np.ceil(model.num_layers / pp)
    period = busiest * t_layer + t_last
    T = (m[:, None] * period + (model.num_layers - busiest) * t_layer / vp
         + np.asarray(const_s, dtype=np.float64)[:, None] * np.ones_like(period))
    busy_j = m[:, None] * ((p_busy - p_wait) * busiest * t_layer + (p_last - p_wait) * t_last)
    S = np.asarray(stage_gpus, dtype=np.float64)[:, None] * np.ones_like(period)
    heat = p_wait + (busy_j + stage_comm / S) / np.where(T > 0, T, 1.0)
    # never above what the node budget reads (the cap, or the draw its lowest clock cannot bring under it)
    return np.clip(heat, p_wait, np.maximum(p_busy, caps_w))


def _whole_node_levels(tb: dict, cluster, load: tuple, max_temp_c: float, node_power_w: float) -> np.ndarray:
    """(N, C) mask of the cap levels each layout may use: False where its stages fill whole nodes
    and every slot at the level's thermal power (:func:`_thermal_power_w`) would pass ``max_temp_c``
    (steady, with the air preheating of the slots upstream) or its busy power the node's GPU power
    budget (read at :func:`option_table`'s ``p_budget_w``); every level of a layout that breaks them with all its GPUs at its lowest level's power (no
    decision draws less); True otherwise.  ``load``: :func:`_whole_node_load`'s (temperature, node power)."""
    hot, node = load
    bad = (hot > max_temp_c * (1 + 1e-9)) | (node > node_power_w * (1 + 1e-9))
    whole = (tb["stage_gpus"] % cluster.gpus_per_node == 0)[:, None]
    # every GPU draws at least its lowest level's power whatever the decision: a layout too hot or too
    # hungry with all its GPUs there meets the limits at no level, stages sharing nodes included
    lowest = _lowest_level(tb)
    hopeless = bad[np.arange(len(lowest)), lowest][:, None]
    return ~((bad & whole) | hopeless)


def _whole_node_load(tb: dict, cluster, profile, inlet_temp_c: float | None) -> tuple:
    """((N, C) hottest slot's steady temperature, C, and (N, C) a node's GPU power, W) of each layout
    of :func:`option_table` at each cap level with every GPU of a node at that level (:func:`_whole_node_levels`)."""
    cool = cluster.cooling
    inlet = cool.inlet_temp_c if inlet_temp_c is None else inlet_temp_c
    r = profile.thermal.r_th_c_per_w * np.asarray(cool.r_th_scale) + preheat_matrix(cool).T.sum(axis=0)
    hot = inlet + tb["p_thermal_w"][:, :, None] * r[None, None, :]
    return hot.max(axis=2), cluster.gpus_per_node * tb["p_budget_w"]


def _lowest_level(tb: dict) -> np.ndarray:
    """(N,) each layout's cap level of least busy power (the level no decision draws below)."""
    pb = tb["p_budget_w"]
    return np.argmin(np.where(np.isfinite(pb), pb, np.inf), axis=1)


def _uniform_cap_values(tb: dict, objective: str) -> np.ndarray:
    """The objective of every layout of :func:`option_table` at its best single cap for all stages
    with ceil(L/p) layers on the last stage (an estimate, not a bound: the limits are ignored)."""
    tl, tt = tb["t_layer_s"], tb["t_last_s"]
    L, p = tb["num_layers"], tb["pp"][:, None]
    a = (tb["microbatches"] + (tb["pp"] - 1) / tb["vp"])[:, None]
    T = a * (np.ceil(L / p) * tl + tt) + tb["const_time_s"][:, None]
    S, m = tb["stage_gpus"][:, None], tb["microbatches"][:, None]
    floor = (tb["p_idle_w"] + tb["p_node_w"])[:, None]
    E = (S * m * (tb["p_busy_w"] - tb["p_idle_w"][:, None]) * (L * tl + tt) + p * S * floor * T
         + p * tb["stage_comm_energy_j"])
    v = {"time": T, "energy": E, "edp": E * T}[objective]
    return v.min(axis=1)


def build_option(run: RunPrediction, caps: tuple, node_power: bool = False, fields: dict | None = None) -> "ilp.LayoutOption":
    """One ILP option: the layout's per-cap layer and logits times, busy power and stage memory;
    with ``node_power`` the nodes' non-GPU power enters its energy (the nodes a layout occupies,
    whole, over its GPUs); ``fields``: its row of :func:`option_table` when already computed."""
    model, recipe, layout = run.model, run.recipe, run.layout
    if fields is None:
        tb = option_table(model, recipe, run.cluster, run.profile, run.terms, caps, node_power)
        fields = {k: (v[0] if np.ndim(v) else v) for k, v in tb.items()}
    if layout["vp"] > 1:
        # held at the even split: every stage as the prediction's peak (the worst stage)
        fixed, per_layer = np.full(layout["pp"], run.peak_mem_bytes), np.zeros(layout["pp"])
    else:
        fixed, per_layer = stage_memory_terms(model, recipe, layout, run.cluster.gpu)
    conv = {k: (int(v) if k in ("pp", "vp", "stage_gpus", "num_layers", "microbatches", "max_layers_per_stage")
                else (float(v) if np.ndim(v) == 0 else np.asarray(v, dtype=np.float64))) for k, v in fields.items()}
    return ilp.LayoutOption(name=run.name, **conv, mem_fixed_bytes=fixed, mem_per_layer_bytes=per_layer)


def build_instance(runs: list[RunPrediction], caps: tuple, *, max_temp_c: float, node_power_w: float,
                   inlet_temp_c: float | None, step_time_slack: float | None,
                   node_power: bool = False, options: tuple | None = None) -> "ilp.Instance":
    """The ILP instance over the layouts of ``runs`` with the cluster's slot thermal
    model and the user's limits (``node_power_w``: the GPU power budget of a node); with
    ``node_power`` the energy counts the nodes' non-GPU power too; ``options``: the runs' options
    when already built."""
    cluster, profile = runs[0].cluster, runs[0].profile
    cool = cluster.cooling
    th = profile.thermal
    G = cluster.gpus_per_node
    inlet = cool.inlet_temp_c if inlet_temp_c is None else inlet_temp_c
    opts = tuple(options) if options is not None else tuple(build_option(run, caps, node_power) for run in runs)
    return ilp.Instance(
        options=opts, cap_levels_w=tuple(caps), gpus_per_node=G, num_nodes=cluster.nodes,
        hbm_bytes=cluster.gpu.capacity_bytes, inlet_c=np.full(G, inlet),
        r_th_c_per_w=th.r_th_c_per_w * np.asarray(cool.r_th_scale),
        preheat_c_per_w=preheat_matrix(cool).T, max_temp_c=max_temp_c, node_power_budget_w=node_power_w,
        step_time_slack=step_time_slack)


def candidates(model, recipe, cluster, profile, res: SearchResult, objective: str, *, pool: int = 48,
               k: int = 6, top_cap_w: float | None = None) -> list[RunPrediction]:
    """The ``k`` best 1F1B layouts by the objective at the top cap, from the ``pool`` fastest, as
    predictions with their energy at that cap (one vectorised pass over the pool): the candidates of
    benchmarks/ilp.py, which times the ILP against brute force (recommend uses :func:`solve_space`).

    Raises:
        InputError: no feasible 1F1B layout, or the power/thermal model lacks inputs.
    """
    L = res.ranked.layouts
    rows = np.flatnonzero(L.vp == 1)[:pool]
    if not len(rows):
        raise InputError("layout", "", "no feasible 1F1B (VP = 1) layout for the energy optimisation")
    require_energy_inputs(cluster, profile)   # names a missing power or thermal model before any work
    runs = predict_runs(model, recipe, cluster, profile, L.take(rows), caps_w=top_cap_w, searched=True)
    score = {"time": lambda e: e.step_time_s, "energy": lambda e: e.energy_j_per_step,
             "edp": lambda e: e.energy_j_per_step * e.step_time_s}[objective]
    return sorted(runs, key=lambda r: score(r.energy))[:k]


@dataclass
class SpaceSolution:
    """What :func:`solve_space` found.

    Attributes:
        solution: the ILP's optimal :class:`costmodel.ilp.Solution` (``layout_index`` indexes ``runs``).
        runs: the predictions of the layouts the final ILP saw.
        instance: that ILP instance.
        n_space: layouts in the space (1F1B, and interleaved with an even split).
        n_solved: layouts the final ILP saw; the others' lower bounds exceed its optimum.
        n_ilp_solves: ILP solves of the branch and bound.
    """

    solution: "ilp.Solution"
    runs: list
    instance: "ilp.Instance"
    n_space: int
    n_solved: int
    n_ilp_solves: int


def space_rows(model, res: SearchResult) -> np.ndarray:
    """Rows of ``res.ranked`` the energy search considers: VP = 1, or VP > 1 with L divisible by
    PP x VP (the ILP holds those at the even split); full recompute on every layer of a chunk only
    (the ILP's stages change their layer counts, which a fixed ``--recompute-num-layers`` N per chunk
    does not follow: its layouts with N > 0 are the search's, costmodel.search.partial_recompute)."""
    L = res.ranked.layouts
    return np.flatnonzero(((L.vp == 1) | (model.num_layers % (L.pp * L.vp) == 0)) & (L.recompute_num_layers == 0))


def _check_power_limit(sol, power_limit_w: float | None, cluster) -> None:
    """Refuse an answer whose GPUs draw more than ``power_limit_w`` (W) busy: the layouts that hold it were
    all left out, so none does (:func:`solve_space`).

    Raises:
        InfeasibleError: binding 'power_cap', with the answer's busy power as the least limit that holds.
    """
    over = max((g.power_w for g in sol.gpus), default=0.0)
    if power_limit_w is not None and over > power_limit_w + CAP_TOL_W:
        raise ilp.InfeasibleError("power_cap", f"no layout holds its GPUs under --power-cap-w {power_limit_w:.0f} W: "
                                  f"at {cluster.gpu.name}'s lowest clock the least hungry still draw {over:.0f} W busy "
                                  f"(layout {sol.layout_name!r}); the cap must rise to {over:.0f} W",
                                  {"power_cap": over}, {"power_cap": (over - power_limit_w) / power_limit_w})


def solve_space(model, recipe, cluster, profile, res: SearchResult, objective: str, caps: tuple, *,
                max_temp_c: float, node_power_w: float, inlet_temp_c: float | None,
                step_time_slack: float | None, node_power: bool, solver: str = "cbc",
                k: int = 6, power_limit_w: float | None = None) -> SpaceSolution:
    """The optimum of ``objective`` over every layout of :func:`space_rows` (module docstring, step 3).

    ``power_limit_w``: a per-GPU limit the caps must hold (recommend's --power-cap-w), W.  A cap at or
    under it that the GPU's lowest clock cannot hold leaves the GPU above it (the busy power of
    costmodel.power.compute_under_cap): a layout whose GPUs draw more than the limit at every level is
    left out, and an answer that still does is infeasible.

    Each option's bounds are :func:`costmodel.ilp.lower_bounds` (time; energy; their product for
    EDP).  Branch and bound, twice: first the fastest layout under the limits (the reference of a
    step-time slack, of EDP and of the report), from the ``k`` options of least time bound; then the
    objective, from the options whose bound is below a quick estimate of the optimum, plus the
    fastest layout (so the ILP's own reference is the global one).  After each ILP the options
    whose bound is below the optimum found join (``3 k`` at a time or as many as it saw, whichever is
    more, least bound first) and the ILP runs again, until none is left: the result is the optimum
    over the whole space.  When no option meets the limits
    the search widens, doubling, over every option with a cap level the limits leave usable, and
    then raises the ILP's diagnosis for those.

    Raises:
        InputError: no layout in the space, or missing power/thermal inputs.
        InfeasibleError: no layout meets the limits, or none holds its GPUs under ``power_limit_w``
            (binding 'power_cap', with the least limit that holds the answer's).
    """
    rows = space_rows(model, res)
    if not len(rows):
        raise InputError("layout", "", "no feasible 1F1B or evenly split interleaved layout for the energy optimisation")
    require_energy_inputs(cluster, profile)   # names a missing power or thermal model before any work
    pred = predict_table(model, recipe, cluster, profile, res.ranked.layouts.take(rows))
    tb = option_table(model, recipe, cluster, profile, pred.terms, caps, node_power)
    # levels no decision can use: a stage filling whole nodes at that level's busy power breaks
    # the temperature or the node power limit (the ILP's own pre-filter, exact for whole nodes)
    hot, node = _whole_node_load(tb, cluster, profile, inlet_temp_c)
    ok = _whole_node_levels(tb, cluster, (hot, node), max_temp_c, node_power_w)
    if power_limit_w is not None:       # the least busy power a layout reaches, at the level holding it lowest
        ok = ok & (tb["p_busy_w"].min(axis=1) <= power_limit_w + CAP_TOL_W)[:, None]
    masked = dict(tb, t_layer_s=np.where(ok, tb["t_layer_s"], np.inf), t_last_s=np.where(ok, tb["t_last_s"], np.inf),
                  t_first_s=np.where(ok, tb["t_first_s"], np.inf))
    with np.errstate(invalid="ignore"):
        t_lb, e_lb = ilp.lower_bounds(SimpleNamespace(**masked))
    e_lb = np.where(np.isnan(e_lb), np.inf, e_lb)
    # where nothing meets the limits, the diagnosis also sees the layouts nearest them: the coolest and the
    # least power-hungry at their lowest level (with a bound of inf, no widening reaches them)
    at_lowest = np.arange(len(hot)), _lowest_level(tb)
    nearest = list(dict.fromkeys(int(i) for v in (hot[at_lowest], node[at_lowest])
                                 for i in np.argsort(v, kind="stable")[:2 * k]))
    runs, opts = {}, {}

    def _run(i):
        if i not in runs:
            runs[i] = prediction_row(pred, i, model, recipe, cluster, profile)
        return runs[i]

    def option(i):
        if i not in opts:
            opts[i] = build_option(_run(i), caps, node_power, {k: (v[i] if np.ndim(v) else v) for k, v in tb.items()})
        return opts[i]
    lb = {"time": t_lb, "energy": e_lb, "edp": e_lb * t_lb}[objective]
    if objective == "edp":
        lb = np.maximum(lb, ilp.edp_lower_bound(SimpleNamespace(**masked)))
    solves = [0]

    def bnb(obj, bound, first):
        """Branch and bound of ``obj`` (bounds ``bound``) from the options ``first``: (solution,
        options the last ILP saw, its instance)."""
        order = [int(i) for i in np.argsort(bound, kind="stable")]
        chosen = list(dict.fromkeys(first))
        while True:
            inst = build_instance([_run(i) for i in chosen], caps, max_temp_c=max_temp_c,
                                  node_power_w=node_power_w, inlet_temp_c=inlet_temp_c,
                                  step_time_slack=step_time_slack, options=tuple(option(i) for i in chosen))
            solves[0] += 1
            seen = set(chosen)
            try:
                sol = ilp.solve(inst, obj, solver=solver)
            except ilp.InfeasibleError:
                # the limits bind: widen, doubling, over every option some cap level of which the
                # limits leave usable (finite bound: the fastest layouts run hot, the ones that meet
                # a tight limit are often slow), then report the ILP's diagnosis for them all
                rest = [i for i in order if i not in seen and np.isfinite(bound[i])]
                if not rest:
                    rest = [i for i in nearest if i not in seen]
                    if not rest:
                        raise
                    chosen += rest
                    continue
                grow = 4 * k - len(chosen) if len(chosen) < 4 * k else len(chosen)      # to 4 k, then doubling
                chosen += rest[:grow]
                continue
            best = sol.value(obj) * (1 + 1e-9)
            join = [i for i in order if bound[i] < best and i not in seen]
            if not join:
                return sol, chosen, inst
            # at least 3 k, then doubling: under a tight limit hundreds of bounds undercut the optimum,
            # and a fixed step re-solved a growing ILP once per step (58 solves, minutes)
            chosen += join[:max(3 * k, len(chosen))]

    # 1. the fastest layout under the limits: the reference of a slack, of EDP and of the report
    by_time = [int(i) for i in np.argsort(t_lb, kind="stable")]
    fast, fast_set, inst = bnb("time", t_lb, by_time[:k])
    if objective != "time":
        # 2. the objective, from every option whose bound is below a quick estimate of the optimum
        # (each layout at one cap for all stages, near-even split, limits ignored) and the fastest
        # layout, so the ILP's own reference is the global one
        est = float(np.min(_uniform_cap_values(tb, objective)))
        by_obj = [int(i) for i in np.argsort(lb, kind="stable")]
        first = [i for i in by_obj if lb[i] <= est][:4 * k] or by_obj[:k]
        sol, chosen, inst = bnb(objective, lb, first + [fast_set[fast.layout_index]])
    else:
        sol, chosen = fast, fast_set
    _check_power_limit(sol, power_limit_w, cluster)
    return SpaceSolution(sol, [_run(i) for i in chosen], inst, len(rows), len(chosen), solves[0])
