"""Energy-aware layout choice: from the search's candidates to the ILP (costmodel.ilp) and back.

1. The vectorised search (costmodel.search) ranks every feasible layout by step time.
2. The fastest ``pool`` 1F1B layouts (VP = 1: the ILP re-splits layers per stage, which the
   interleaved schedule does not allow) get an energy report at the top cap (costmodel.energy),
   a lower bound of what caps can save is not needed for ranking because caps only trade time for
   energy; the best ``k`` by the objective at the top cap become ILP options.
3. Each option is tabulated per cap level (costmodel.energy.stage_terms): time of one layer and of
   the logits per micro-batch under the cap (DVFS: compute-bound time / clock ratio), power while
   computing (min(P, cap)), waiting power (idle + NCCL spin), per-stage memory (costmodel.memory.stage_memory_terms).
4. costmodel.ilp chooses layout, per-stage caps, layers per stage and slot blocks.

Cap levels are evenly spaced from the GPU's minimum power limit to the user's cap (default TDP).
"""
from __future__ import annotations

import numpy as np

from . import ilp
from .energy import check_cap, power_params, stage_terms
from .errors import InputError
from .memory import stage_memory_terms
from .power import clock_ratio, phase_power_w, power_at_clock_w, wait_power_w
from .predict import RunPrediction, predict_runs
from .search import SearchResult
from .specs import ClusterSpec, Profile
from .thermal import preheat_matrix

OBJECTIVES = ("time", "energy", "edp")


def cap_levels(cluster: ClusterSpec, profile: Profile, max_cap_w: float | None, n: int = 5) -> tuple:
    """``n`` evenly spaced caps from the GPU's minimum power limit to ``max_cap_w`` (default TDP), W.

    Raises:
        InputError: a cap outside the GPU's settable range.
    """
    pw = power_params(cluster, profile)
    top = pw.max_cap_w if max_cap_w is None else max_cap_w
    check_cap(cluster, pw, top)
    return tuple(float(x) for x in np.linspace(pw.min_cap_w, top, n)) if top > pw.min_cap_w else (top,)


def node_power_per_gpu_w(run: RunPrediction) -> float:
    """The nodes' non-GPU power per GPU of the layout, W: nodes used x the cluster's
    node_other_power_w / GPUs (a job on part of a node still pays the whole node)."""
    n = run.layout["tp"] * run.layout["pp"] * run.layout["dp"] * run.layout["cp"]
    G = run.cluster.gpus_per_node
    return -(-n // G) * run.cluster.node_other_power_w / n


def build_option(run: RunPrediction, caps: tuple, node_power: bool = False) -> "ilp.LayoutOption":
    """One ILP option: the layout's per-cap layer and logits times, busy power and stage memory;
    with ``node_power`` the nodes' non-GPU power enters its energy (:func:`node_power_per_gpu_w`)."""
    model, recipe, cluster, profile, layout = run.model, run.recipe, run.cluster, run.profile, run.layout
    st = stage_terms(model, recipe, cluster, profile, run.terms)
    pw = power_params(cluster, profile)

    def under_cap(blk):
        p = float(phase_power_w(pw, blk["util"]))
        out_t, out_p = [], []
        for c in caps:
            s = float(clock_ratio(pw, p, c))
            out_t.append(blk["bound_s"] / s + (blk["compute_s"] - blk["bound_s"]) + blk["exposed_s"])
            # the DVFS curve's power at the clock reached: the cap, or more where the GPU's lowest
            # clock cannot meet it (costmodel.energy.stage_state)
            out_p.append(float(power_at_clock_w(pw, p, s)))
        return np.array(out_t), np.array(out_p)

    t_layer, p_busy = under_cap(st.layer)
    t_last, _ = under_cap(st.logits)
    fixed, per_layer = stage_memory_terms(model, recipe, layout)
    return ilp.LayoutOption(
        name=run.name, pp=layout["pp"], stage_gpus=st.stage_gpus, num_layers=model.num_layers,
        microbatches=st.m, vp=layout["vp"], const_time_s=st.const_s + st.bubble_factor * st.pp_mb_s,
        t_layer_s=t_layer, t_first_s=np.zeros(len(caps)), t_last_s=t_last, p_busy_w=p_busy,
        p_idle_w=min(wait_power_w(pw), min(caps)), mem_fixed_bytes=fixed, mem_per_layer_bytes=per_layer,
        p_node_w=node_power_per_gpu_w(run) if node_power else 0.0)


def build_instance(runs: list[RunPrediction], caps: tuple, *, max_temp_c: float, node_power_w: float,
                   inlet_temp_c: float | None, step_time_slack: float | None,
                   node_power: bool = False) -> "ilp.Instance":
    """The ILP instance over the layouts of ``runs`` (:func:`candidates`) with the cluster's slot thermal
    model and the user's limits (``node_power_w``: the GPU power budget of a node); with
    ``node_power`` the energy counts the nodes' non-GPU power too."""
    cluster, profile = runs[0].cluster, runs[0].profile
    cool = cluster.cooling
    th = profile.thermal
    G = cluster.gpus_per_node
    inlet = cool.inlet_temp_c if inlet_temp_c is None else inlet_temp_c
    opts = tuple(build_option(run, caps, node_power) for run in runs)
    return ilp.Instance(
        options=opts, cap_levels_w=tuple(caps), gpus_per_node=G, num_nodes=cluster.nodes,
        hbm_bytes=cluster.gpu.capacity_bytes, inlet_c=np.full(G, inlet),
        r_th_c_per_w=th.r_th_c_per_w * np.asarray(cool.r_th_scale),
        preheat_c_per_w=preheat_matrix(cool).T, max_temp_c=max_temp_c, node_power_budget_w=node_power_w,
        step_time_slack=step_time_slack)


def candidates(model, recipe, cluster, profile, res: SearchResult, objective: str, *, pool: int = 48,
               k: int = 6, top_cap_w: float | None = None, node_power: bool = False) -> list[RunPrediction]:
    """The ``k`` best 1F1B layouts by the objective at the top cap, from the ``pool`` fastest, as
    predictions with their energy at that cap (one vectorised pass over the pool); with
    ``node_power`` the energy includes the nodes' non-GPU power.

    Raises:
        InputError: no feasible 1F1B layout, or the power/thermal model lacks inputs.
    """
    L = res.ranked.layouts
    rows = np.flatnonzero(L.vp == 1)[:pool]
    if not len(rows):
        raise InputError("layout", "", "no feasible 1F1B (VP = 1) layout for the energy optimisation")
    power_params(cluster, profile)          # names a missing power model before any work
    runs = predict_runs(model, recipe, cluster, profile, L.take(rows), caps_w=top_cap_w)
    if runs[0].energy is None:
        raise InputError(profile.path, "", f"no power/thermal model: missing {', '.join(runs[0].energy_missing)}")
    joules = (lambda e: e.total_energy_j_per_step) if node_power else (lambda e: e.energy_j_per_step)
    score = {"time": lambda e: e.step_time_s, "energy": joules, "edp": lambda e: joules(e) * e.step_time_s}[objective]
    return sorted(runs, key=lambda r: score(r.energy))[:k]
