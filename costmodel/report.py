"""Reports: rich tables, the stable JSON record, and ready-to-paste Megatron-LM arguments."""
from __future__ import annotations

import json
import math

import dataclasses
import numpy as np

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from . import metrics
from .layout_fields import RECOMPUTE
from .layouts import layout_name
from .optimize import CAP_TOL_W
from .predict import Prediction, RunPrediction
from .specs.model_config import known_family
from .schedule import BREAKDOWN_TERMS
from .specs import ClusterSpec, ModelSpec, Recipe
from .stacks import switch_values

GIB = 2.0**30
# every communication term is the part compute does not hide (costmodel.schedule)
_TERM_NAMES = {"compute_s": "compute", "tp_comm_s": "TP comm exposed", "cp_comm_s": "CP comm exposed",
               "ep_comm_s": "EP comm exposed", "pp_comm_s": "PP comm exposed", "bubble_s": "pipeline bubble",
               "dp_comm_s": "DP/FSDP comm exposed", "optimizer_s": "optimizer"}


def recompute_name(L, i: int) -> str:
    """Row ``i``'s recompute as :func:`costmodel.layouts.layout_name` writes it: 'full(3)' for full
    recompute on 3 layers of each pipeline chunk, else the choice's name."""
    n = int(L.recompute_num_layers[i])
    return RECOMPUTE[int(L.recompute[i])] + (f"({n})" if n else "")


def zero_name(L, i: int) -> str:
    """Row ``i``'s ZeRO stage as the ranking table writes it: '3', or under HSDP '3 x16' (16 replicas of
    the sharded states, costmodel.layouts.shard_dp)."""
    rep = int(L.dp_replicate[i])
    return str(int(L.zero[i])) + (f" x{rep}" if rep > 1 else "")


def run_record(run: RunPrediction) -> dict:
    """The JSON-ready record of one prediction; its names are stable (README, ``predict --json``).

    Keys: feasible, step_time_s, tokens_per_s_per_gpu, model_tflops_per_gpu, mfu, mfu_causal, peak_mem_bytes,
    hbm_capacity_bytes, memory (weights/grads/optimizer/activations bytes), layout, breakdown
    (seconds per term, uncapped), model, params and active_params (MTP modules excluded),
    model_read_as_plain_decoder (a config of a family the reader does not know), cluster,
    num_gpus, recipe, and reason when infeasible;
    with a band: step_time_band (rel, sigma, unfitted_terms, profile) and step_time_band_s; with an
    energy report: its fields (costmodel.energy.EnergyReport), uncapped_step_time_s and
    node_over_budget (a node's GPUs peak above node_gpu_budget_w).
    """
    rec = {
        "feasible": run.feasible,
        "step_time_s": run.step_time_s,
        "tokens_per_s_per_gpu": run.tokens_per_s_per_gpu,
        "model_tflops_per_gpu": run.model_tflops_per_gpu,
        "mfu": run.mfu,
        # the same over the model FLOPs with causal attention's half of the score matrix (Megatron-LM's own
        # count since 2025-03); mfu keeps SC21's s x s
        "mfu_causal": run.mfu * metrics.causal_flops_share(run.model, run.recipe),
        # bytes are whole (an expected byte count rounded), as their unit says
        "peak_mem_bytes": round(run.peak_mem_bytes),
        "hbm_capacity_bytes": round(run.cluster.gpu.capacity_bytes),
        "memory": {k: round(v) for k, v in dict(run.memory).items()},
        "layout": dict(run.layout),
        "breakdown": dict(run.breakdown),
        "model": run.model.name, "params": run.model.params(), "active_params": run.model.params(active=True),
        # a config of a family the reader does not know, read from its generic keys (an approximation)
        "model_read_as_plain_decoder": not known_family(run.model),
        "cluster": run.cluster.key, "num_gpus": run.cluster.num_gpus,
        "recipe": recipe_record(run.recipe, run.layout),
    }
    if run.cluster.what_if:
        rec["cluster_what_if"] = run.cluster.what_if
    if run.cluster.gpu.mem_headroom:        # hbm_capacity_bytes is then what the headroom leaves
        rec["mem_headroom"] = run.cluster.gpu.mem_headroom
        rec["hbm_total_bytes"] = round(run.cluster.gpu.total_capacity_bytes)
    if not run.feasible:
        rec["reason"] = run.reason
    if run.band is not None:
        # each breakdown term's relative sigma, keyed by the term without its seconds unit (a ratio)
        rec["step_time_band"] = {"rel": run.band.rel,
                                 "sigma_rel": {k.removesuffix("_s"): v for k, v in run.band.sigma.items()},
                                 "unfitted_terms": list(run.band.unfitted), "profile": run.profile.path,
                                 "fit_rel": run.band.fit_rel, "model_form_rel": run.band.model_form_rel,
                                 "model_form_regime": run.band.model_form_key}
    if run.energy is not None:
        rec.update(dataclasses.asdict(run.energy))
        rec["total_energy_j_per_step"] = run.energy.total_energy_j_per_step
        rec["node_other_power_source"] = run.cluster.node_other_power_source
        rec["uncapped_step_time_s"] = run.uncapped_step_time_s
        # a node whose GPUs peak above what its rating leaves them (the text's NODE OVER BUDGET)
        rec["node_over_budget"] = bool(run.energy.node_gpu_budget_w and
                                       run.energy.node_gpu_peak_w > run.energy.node_gpu_budget_w * (1 + 1e-9))
    if run.band is not None:
        rec["step_time_band_s"] = run.step_time_band_s
    return rec


def reasons(ranked: Prediction, faster_infeasible: Prediction | None, cluster: ClusterSpec,
            mfu: float | None = None, runs: list | None = None) -> list[str]:
    """Plain-language reasons for the winner (row 0 of ``ranked``): where its time goes, what
    limits it, and how the best layouts of other shapes compare; ``mfu``: the winner's as predict
    prints it (under the power limit), else the time model's.  With ``runs`` (costmodel.predict.
    RunPrediction of the first layouts, in ranking order, at the pipeline split each runs) the shares
    are the winner's printed breakdown and the comparisons their steps under the power limit, as the
    ranking table shows them; else the time model's at the default split."""
    L = ranked.layouts
    t0 = runs[0].uncapped_step_time_s if runs else ranked.step_time_s[0]
    bd = {k: (runs[0].breakdown[k] if runs else ranked.breakdown[k][0]) for k in BREAKDOWN_TERMS}
    m0 = ranked.mfu[0] if mfu is None else mfu
    share = metrics.causal_flops_share(runs[0].model, runs[0].recipe) if runs else 1.0
    # long sequences: the s x s count can pass 100%; Megatron-LM counts the causal half the kernels compute
    causal = f" (attention as s x s; {100 * m0 * share:.1f}% counting its causal half)" if share < 0.99 else ""
    out = [f"compute is {100 * bd['compute_s'] / t0:.0f}% of the step; MFU {100 * m0:.1f}%{causal}."]
    over = sorted(((v, k) for k, v in bd.items() if k != "compute_s"), reverse=True)
    if over[0][0] > 0.01 * t0:
        v, k = over[0]
        out.append(f"the largest overhead is {_TERM_NAMES[k]}: {v:.3f} s ({100 * v / t0:.1f}%).")
    seen = {(int(L.tp[0]), int(L.pp[0]))}
    for i in range(1, len(L)):
        key = (int(L.tp[i]), int(L.pp[i]))
        if key in seen:
            continue
        seen.add(key)
        if len(seen) > 3:
            break
        slower = 100 * (runs[i].step_time_s / runs[0].step_time_s - 1 if runs and i < len(runs)
                        else ranked.step_time_s[i] / ranked.step_time_s[0] - 1)
        how = (f"is {slower:.1f}% slower" if slower >= 0 else
               f"is {-slower:.1f}% faster at full clocks, slower under the power limit")
        # the same recipe switches as the winner's: its own best switches may differ (a pinned search finds them)
        out.append(f"the best layout with TP={key[0]} PP={key[1]} (DP={int(L.dp[i])} CP={int(L.cp[i])} "
                   f"mbs={int(L.mbs[i])} recompute={recompute_name(L, i)}) {how} with the winner's switches "
                   f"(--tp {key[0]} --pp {key[1]} searches its own).")
    if faster_infeasible is not None:
        # both at full clocks and the stack's own pipeline split, as the search priced them (the winner's
        # printed step may run a split of its own)
        f, ref = faster_infeasible, ranked.step_time_s[0]
        gain = 100 * (1 - f.step_time_s[0] / ref)
        split = " (both at the stack's own pipeline split)" if runs and runs[0].uncapped_step_time_s != ref else ""
        out.append(f"{layout_name(f.layouts.row(0))} would be {gain:.1f}% faster{split} but needs "
                   f"{f.memory.peak_bytes[0] / GIB:.0f} GiB per GPU ({cluster.gpu.capacity_bytes / GIB:.0f} GiB available).")
    return out


def ranking_table(pred: Prediction, top: int, title: str, runs: list | None = None) -> Table:
    """Rich table of the first ``top`` layouts of ``pred`` (already ranked).  With ``runs`` (their
    costmodel.predict.RunPrediction, in the same order) the step, throughput and MFU are theirs
    (under the power limit, what predict prints), beside the time model's step at full clocks, and the
    peak memory is theirs (at the pipeline split each runs)."""
    share = metrics.causal_flops_share(runs[0].model, runs[0].recipe) if runs else 1.0
    from .formats import gemm_format
    low = bool(runs) and gemm_format(runs[0].recipe.precision).low
    notes = ([f"TFLOP/s and MFU count attention as s x s (SC21); Megatron-LM's causal count is {share:.2f} of them"]
             if share < 0.99 else []) + ([f"MFU is over the dense 16-bit peak, which a {runs[0].recipe.precision} run "
                                          "can pass"] if low else [])
    tb = Table(title=title, header_style="bold", caption="; ".join(notes) or None)
    L = pred.layouts
    moe = bool(len(L)) and bool(np.any(L.ep > 1) or np.any(L.etp != L.tp))
    cols = ("tp", "pp", "dp", "cp", "ep") + (("etp",) if moe else ()) + ("vp", "mbs")
    for c in ("#", *(f.upper() if f != "mbs" else f for f in cols), "recompute", "ZeRO", "step s",
              *(("full-clock s",) if runs else ()), "tok/s/GPU", "TFLOP/s/GPU", "MFU", "mem GiB"):
        tb.add_column(c, justify="right" if c not in ("recompute",) else "left")
    for i in range(min(top, len(L))):
        if runs:
            x = runs[i]
            figures = (f"{x.step_time_s:.3f}", f"{x.uncapped_step_time_s:.3f}", f"{x.tokens_per_s_per_gpu:,.0f}",
                       f"{x.model_tflops_per_gpu:.1f}", f"{100 * x.mfu:.1f}%")
        else:
            figures = (f"{pred.step_time_s[i]:.3f}", f"{pred.tokens_per_s_per_gpu[i]:,.0f}",
                       f"{pred.model_tflops_per_gpu[i]:.1f}", f"{100 * pred.mfu[i]:.1f}%")
        tb.add_row(str(i + 1), *(str(int(getattr(L, f)[i])) for f in cols),
                   recompute_name(L, i), zero_name(L, i), *figures,
                   f"{(runs[i].peak_mem_bytes if runs else pred.memory.peak_bytes[i]) / GIB:.1f}")
    return tb


def breakdown_table(rec: dict, title: str) -> Table:
    """Rich table of one record's time breakdown before the power limit (seconds and share of the step they
    sum to, ``uncapped_step_time_s`` when power capping changed the step)."""
    tb = Table(title=title, header_style="bold")
    tb.add_column("term")
    tb.add_column("seconds", justify="right")
    tb.add_column("share", justify="right")
    total = rec.get("uncapped_step_time_s", rec["step_time_s"])
    for k in BREAKDOWN_TERMS:
        v = rec["breakdown"][k]
        tb.add_row(_TERM_NAMES[k], f"{v:.4f}", f"{100 * v / total:.1f}%")
    tb.add_row("[bold]step", f"[bold]{total:.4f}", "100%")
    return tb


def memory_table(rec: dict) -> Table:
    """Rich table of one record's peak memory per GPU."""
    tb = Table(title="Peak memory per GPU", header_style="bold")
    tb.add_column("part")
    tb.add_column("GiB", justify="right")
    for k, v in rec["memory"].items():
        tb.add_row(k.replace("_bytes", ""), f"{v / GIB:.2f}")
    tb.add_row("[bold]peak", f"[bold]{rec['peak_mem_bytes'] / GIB:.2f}")
    if "mem_headroom" in rec:
        tb.add_row("HBM capacity", f"{rec['hbm_total_bytes'] / GIB:.2f}")
        tb.add_row(f"usable (--mem-headroom {rec['mem_headroom']:g})", f"{rec['hbm_capacity_bytes'] / GIB:.2f}")
    else:
        tb.add_row("HBM capacity", f"{rec['hbm_capacity_bytes'] / GIB:.2f}")
    return tb


def power_limit_line(rec: dict, full_clock_mhz: float | None) -> str | None:
    """The line that says why a record's step exceeds its breakdown's sum: a GPU the record derates
    (its per_gpu rows' derated_mhz), else the power limit holding the clocks of kernels measured above
    it (costmodel.power.compute_under_cap), against the GPU's ``full_clock_mhz``
    (costmodel.specs.GpuSpec.full_clock_mhz), led by the hottest throttled GPU where the heat holds the
    clock; None where neither does."""
    unc = rec.get("uncapped_step_time_s")
    if unc is None or not rec["step_time_s"] > unc * (1 + 1e-3):
        return None
    derated = [g for g in rec.get("per_gpu") or [] if g.get("derated_mhz")]
    # a derate binds where it holds the GPU's clock (at or under what the power limit leaves)
    pinned = [g for g in derated if g.get("sm_clock_mhz") is None or g["derated_mhz"] <= g["sm_clock_mhz"] + 0.5]
    loose = "".join(f"; the derate of GPU {g['node']}:{g['slot']} to {g['derated_mhz']:.0f} MHz does not bind "
                    f"(it runs at {g['sm_clock_mhz']:.0f} MHz)" for g in derated if g not in pinned)
    if pinned:
        # a pinned clock, not the power limit, holds the slowest stage (and the synchronous step)
        said = ", ".join(f"GPU {g['node']}:{g['slot']} at {g['derated_mhz']:.0f} MHz" for g in pinned)
        return (f"derated: {said} sets its stage's pace, and the synchronous step waits for it: "
                f"{rec['step_time_s']:.3f} s per step, against {unc:.3f} s at the clocks the profile's kernel "
                "tables were measured at (the breakdown)")
    caps = sorted(set(round(float(x)) for x in rec.get("caps_w") or []))
    # a GPU file without max_clock_mhz / boost_clock_mhz gives the power model a clock ratio, not MHz
    mhz = (f"{rec['sm_clock_mhz']:.0f} of {full_clock_mhz:.0f} MHz" if full_clock_mhz and rec.get("sm_clock_mhz")
           else f"{rec['sm_clock_mhz']:.0f} MHz" if rec.get("sm_clock_mhz") else
           "a lower SM clock (the GPU file gives no max_clock_mhz to say which)")
    # with several caps the power is the busiest stage's and the clock the slowest stage's: said apart
    said = (f"the {caps[0]} W limit the compute kernels draw {rec['compute_power_w']:.0f} W and run at {mhz}"
            if len(caps) < 2 else
            f"the {'/'.join(str(c) for c in caps)} W limits the compute kernels draw up to "
            f"{rec['compute_power_w']:.0f} W and the slowest stage's run at {mhz}")
    # the GPU that sets the pace: the slowest throttled one (the hottest among equals)
    hot = sorted((g for g in rec.get("per_gpu") or [] if g.get("throttled")),
                 key=lambda g: (g.get("sm_clock_mhz") or 0.0, -round(g["temp_c"], 1), g["node"], g["slot"]))
    # a GPU at its slowdown temperature lowers its clock below what the power limit leaves: the heat,
    # not the watts, holds the step (costmodel.energy's thermal clocks)
    lead = (f"thermally throttled: GPU {hot[0]['node']}:{hot[0]['slot']} at {hot[0]['temp_c']:.0f} C sets its "
            f"stage's pace (and the synchronous step's); under" if hot else "power-limited: under")
    return (f"{lead} {said}: {rec['step_time_s']:.3f} s per step, against "
            f"{unc:.3f} s at the clocks the profile's kernel tables were measured at (the breakdown){loose}")


def energy_line(rec: dict) -> str:
    """One line of power, energy and temperature figures of a record with energy fields."""
    warm = (f", after the warm-up steps {rec['warm_max_temp_c']:.1f} C" if rec.get("warm_max_temp_c") is not None
            else "")
    clock = f", SM clock {rec['sm_clock_mhz']:.0f} MHz" if rec.get("sm_clock_mhz") else ""
    # the peak is a window average over compute and communication; the GEMMs alone draw compute_power_w
    gemm = (f" (GEMMs {rec['compute_power_w']:.0f} W)" if rec.get("compute_power_w")
            and rec["compute_power_w"] > 1.02 * rec["peak_power_w"] else "")
    return (f"power: {rec['avg_power_w']:.0f} W average, {rec['peak_power_w']:.0f} W peak window{gemm} per GPU; "
            f"{rec['energy_j_per_step'] / 1e3:,.1f} kJ per step, {rec['tokens_per_joule']:.2f} tokens/J, "
            f"{rec['samples_per_s_per_mj']:.2f} samples/(s MJ); hottest GPU {rec['max_temp_c']:.1f} C steady{warm}"
            f"{clock}{'; THERMALLY THROTTLED' if rec['throttled'] else ''}"
            + ("; CAP NOT MET: at its lowest clock the GPU still draws more than the cap" if rec.get("cap_unmet") else "")
            + (f"; NODE OVER BUDGET: a node's GPUs peak at {rec['node_gpu_peak_w'] / 1e3:.2f} kW together, above the "
               f"{rec['node_gpu_budget_w'] / 1e3:.2f} kW its rating leaves them (the node's own power capping would "
               "slow them: recommend --node-power-kw searches caps that fit)"
               if rec.get("node_gpu_budget_w") and rec.get("node_gpu_peak_w", 0.0) > rec["node_gpu_budget_w"] * (1 + 1e-9)
               else "")
            + ("; HW SLOWDOWN: the cooling cannot hold the hottest GPU at its slowdown temperature even at half "
               "its maximum clock, where HW slowdown holds it (nvml.h: 'a factor of 2 or more')"
               if rec.get("hw_slowdown") else "")
            + (f"\nnodes (non-GPU: CPUs, NICs, switches, fans): {rec['nodes']} x {rec['node_other_power_w'] / 1e3:.2f} kW, "
               f"{rec['node_energy_j_per_step'] / 1e3:,.1f} kJ per step; with the GPUs "
               f"{rec['total_energy_j_per_step'] / 1e3:,.1f} kJ per step ({rec['node_other_power_source']})"
               if rec.get("nodes") else ""))


def per_gpu_table(rows: list[dict], top: int = 16, num_gpus: int | None = None) -> Table:
    """Rich table of per-GPU power and temperature, hottest first (``top`` rows).  ``rows`` may list
    representative GPUs only (costmodel.energy.layout_energy: a stage's nodes run alike, so its first
    nodes stand for the rest); ``num_gpus`` (the job's) says so in the title."""
    listed = f"{len(rows)} listed of {num_gpus} GPUs, the other nodes of a stage alike" if (
        num_gpus is not None and num_gpus > len(rows)) else f"{len(rows)}"
    tb = Table(title=f"Per-GPU power and temperature (hottest {min(top, len(rows))} of {listed})",
               header_style="bold")
    for c in ("rank", "node", "slot", "stage", "avg W", "peak W", "temp C", "SM MHz", "throttled"):
        tb.add_column(c, justify="right")
    # derated GPUs first (the stragglers the step waits for), then the hottest
    for r in sorted(rows, key=lambda r: (r.get("derated_mhz") is None, -r["temp_c"]))[:top]:
        why = ", ".join(w for w, on in (("HW slowdown", r.get("hw_slowdown")), ("thermal", r["throttled"]),
                                        (f"derated to {r['derated_mhz']:.0f} MHz" if r.get("derated_mhz") else "",
                                         r.get("derated_mhz"))) if on)
        tb.add_row(str(r["rank"]), str(r["node"]), str(r["slot"]), str(r["stage"]), f"{r['power_w']:.0f}",
                   f"{r['peak_power_w']:.0f}", f"{r['temp_c']:.1f}",
                   f"{r['sm_clock_mhz']:.0f}" if r.get("sm_clock_mhz") else "-", why)
    return tb


def recipe_record(recipe: Recipe, layout: dict | None = None) -> dict:
    """JSON-ready recipe: batch, length, precision, stack and every recipe switch (costmodel.stacks);
    ``attention_kernel`` is null under unfused attention (``flash_attention`` false), which runs none.
    With the ``layout`` it ran, a switch the layout leaves idle reads as ``predict`` takes it: TP-comm
    overlap off without TP and sequence parallelism, no ``recompute_modules`` but under selective
    recompute (predict refuses either)."""
    out = {"gbs": recipe.gbs, "seq_len": recipe.seq_len, "precision": recipe.precision, "stack": recipe.stack,
           **switch_values(recipe)}
    if layout is not None:
        out.update(idle_switches(layout, ""))
    return out


def idle_switches(layout: dict, no_modules) -> dict:
    """The switches ``layout`` leaves idle, as ``predict`` accepts them (:func:`recipe_record`);
    ``no_modules``: the record's empty ``recompute_modules`` ('' where it holds the flag's text, [] a list)."""
    out = {}
    if layout.get("tp", 1) == 1 or not layout.get("sp", False):
        out["tp_comm_overlap"] = False
    if layout.get("recompute") != "selective":
        out["recompute_modules"] = no_modules
    return out


def unmet_caps(sol) -> dict:
    """Stage -> the highest busy power of its GPUs (W) where it is above the stage's cap: the GPU's
    lowest clock cannot hold the cap (costmodel.power.compute_under_cap), so it runs above it."""
    out = {}
    for g in sol.gpus:
        if g.power_w > sol.caps_w[g.stage] + CAP_TOL_W:
            out[g.stage] = max(out.get(g.stage, 0.0), g.power_w)
    return out


def energy_split(total_j, step_time_s, cluster: ClusterSpec, node_power: bool) -> dict:
    """An ILP energy (``total_j``, J per step: with the nodes' non-GPU power when ``node_power``) as
    ``predict`` names its parts: ``energy_j_per_step`` (the GPUs), ``node_energy_j_per_step`` (every
    node's non-GPU power over the step, which the nodes draw whether or not the ILP counted it) and
    ``total_energy_j_per_step`` (their sum)."""
    node_j = cluster.nodes * (cluster.node_other_power_w or 0.0) * step_time_s
    gpu_j = total_j - node_j if node_power else total_j
    return {"energy_j_per_step": gpu_j, "node_energy_j_per_step": node_j, "total_energy_j_per_step": gpu_j + node_j}


def solution_record(sol, lay: dict, model: ModelSpec, cluster: ClusterSpec, recipe: Recipe, caps,
                    objective: str, node_power: bool = False, max_temp_limit_c: float | None = None) -> dict:
    """JSON-ready record of an ILP solution (costmodel.ilp.Solution) and its layout; its energy split
    as ``predict --json`` names it (:func:`energy_split`: ``energy_j_per_step`` and ``tokens_per_joule``
    the GPUs', ``total_energy_j_per_step`` with the nodes' non-GPU power, what the ILP minimised with
    ``node_power``).  ``max_temp_c`` is the hottest GPU's steady temperature, C, as in predict's record;
    ``max_temp_limit_c`` the temperature limit the ILP kept every GPU under, C (``--max-temp-c``, else
    the GPU's slowdown temperature)."""
    e = energy_split(sol.energy_j, sol.step_time_s, cluster, node_power)
    return {
        "objective": objective, "layout": lay, "step_time_s": sol.step_time_s, **e,
        "tokens_per_joule": metrics.tokens_per_joule(recipe, e["energy_j_per_step"]),
        "samples_per_s_per_mj": metrics.samples_per_s_per_mj(recipe, sol.step_time_s, e["energy_j_per_step"]),
        "tokens_per_s_per_gpu": metrics.tokens_per_s_per_gpu(recipe, sol.step_time_s, cluster.num_gpus),
        "cap_levels_w": list(caps),
        "stages": [{"stage": s, "cap_w": sol.caps_w[s], "layers": sol.layers[s], "slots": list(sol.slot_blocks[s]),
                    "nodes": list(sol.stage_nodes[s]), "time_per_microbatch_s": sol.stage_time_s[s]}
                   for s in range(len(sol.layers))],
        # the ILP's checks: each GPU's busy power at its stage's cap (the node budget's) and the steady
        # temperature of its power averaged over a step at that cap (the thermal constraint's)
        "per_gpu": [{"node": g.node, "slot": g.slot, "stage": g.stage, "busy_power_w": g.power_w,
                     "temp_bound_c": g.temp_c} for g in sol.gpus],
        "device_order_by_node": {str(k): list(v) for k, v in device_orders(sol, cluster.gpus_per_node).items()},
        "cap_unmet_stages": sorted(unmet_caps(sol)),
        "max_temp_c": max(g.temp_c for g in sol.gpus), "max_temp_limit_c": max_temp_limit_c,
        "solver_status": sol.status,
        "solve_time_s": sol.solve_time_s, "model": model.name, "cluster": cluster.key,
        "recipe": recipe_record(recipe, lay),
    }


def solution_table(sol, layouts: list[dict]) -> Table:
    """Rich table of the ILP's decision per pipeline stage."""
    tb = Table(title=f"Chosen layout: {layout_name(layouts[sol.layout_index])}", header_style="bold")
    for c in ("stage", "cap W", "layers", "slots", "nodes", "s per micro-batch"):
        tb.add_column(c, justify="right")
    for s in range(len(sol.layers)):
        nodes = sol.stage_nodes[s]
        tb.add_row(str(s), f"{sol.caps_w[s]:.0f}", str(sol.layers[s]), ",".join(map(str, sol.slot_blocks[s])),
                   f"{nodes[0]}-{nodes[-1]}" if len(nodes) > 1 else str(nodes[0]), f"{sol.stage_time_s[s]:.4f}")
    return tb


def per_gpu_ilp_table(sol, top: int = 16) -> Table:
    """Rich table of the ILP solution's per-GPU busy power (what the node budget checks) and steady
    temperature (of the power averaged over a step at the stage's cap: what the thermal constraint
    checks), hottest first."""
    tb = Table(title=f"Per-GPU busy power and steady temperature, the ILP's checks (hottest "
                     f"{min(top, len(sol.gpus))} of {len(sol.gpus)}; the temperature from the step-averaged "
                     "power at uniform caps)", header_style="bold")
    for c in ("node", "slot", "stage", "busy W", "steady C"):
        tb.add_column(c, justify="right")
    for g in sorted(sol.gpus, key=lambda g: -g.temp_c)[:top]:
        tb.add_row(str(g.node), str(g.slot), str(g.stage), f"{g.power_w:.0f}", f"{g.temp_c:.1f}")
    return tb


def pareto_table(front, node_power: bool = False) -> Table:
    """Rich table of the time-energy Pareto front [(T s, E J, Solution), ...], fastest first; the
    title says whose energy it counts (``node_power``: the nodes' non-GPU power too)."""
    whose = "the GPUs and the nodes' non-GPU power" if node_power else "the GPUs only"
    tb = Table(title=f"Time-energy Pareto front (energy of {whose})", header_style="bold")
    for c in ("step s", "kJ/step", "layout", "caps W", "layers"):
        # caps and layers fold onto more lines rather than end in an ellipsis: the last stage's often differs
        tb.add_column(c, justify="right" if c in ("step s", "kJ/step") else "left",
                      overflow="fold" if c in ("caps W", "layers") else "ellipsis")
    for T, E, s in front:
        tb.add_row(f"{T:.3f}", f"{E / 1e3:,.1f}", s.layout_name, ",".join(f"{c:.0f}" for c in s.caps_w),
                   ",".join(map(str, s.layers)))
    return tb


def non_dominated(front) -> list:
    """The points of ``front`` ((T s, E J, solution) tuples) no other point beats in both time and
    energy (ties kept once), fastest first."""
    pts = sorted(front, key=lambda x: (x[0], x[1]))
    out = []
    for p in pts:
        if not out or p[1] < out[-1][1] * (1 - 1e-12):
            out.append(p)
    return out


def plot_pareto(front, path: str, title: str, chosen=None, node_power: bool = False) -> None:
    """Write the Pareto front as a PNG (matplotlib, the [plot] extra): the non-dominated points
    (:func:`non_dominated`), and ``chosen`` (a solution with step_time_s and energy_j) marked; the energy
    axis says what the ILP counted (``node_power``: the nodes' non-GPU power too, else the GPUs only).

    Raises:
        InputError: matplotlib is not installed, or the file cannot be written.
    """
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        from .errors import InputError
        raise InputError("--plot", "", "needs matplotlib: pip install '.[plot]' in the costmodel "
                         "checkout (or pip install matplotlib)") from None
    pts = non_dominated(front)
    T = [t for t, _, _ in pts]
    E = [e / 1e3 for _, e, _ in pts]
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(T, E, "o-", label="Pareto front")
    if chosen is not None:
        ax.plot([chosen.step_time_s], [chosen.energy_j / 1e3], "r*", markersize=14,
                label=f"chosen ({chosen.layout_name})")
        ax.legend(fontsize=7)
    ax.set_xlabel("step time (s)")
    ax.set_ylabel("energy per step (kJ, " + ("GPUs and nodes)" if node_power else "GPUs only)"))
    ax.set_title(title)
    ax.grid(True, alpha=0.3)
    from .files import write_atomically
    try:
        write_atomically(path, lambda tmp: fig.savefig(tmp, dpi=120, bbox_inches="tight"), "--plot")
    finally:
        plt.close(fig)


def device_orders(sol, gpus_per_node: int) -> dict:
    """Per node whose slots the solution fills out of Megatron's rank order (PP outermost: local rank r
    of node q is global rank q G + r, stage (q G + r) // S), the physical slot each local rank must run
    on: node -> tuple (slot of local rank 0, 1, ...).  Nodes in rank order are left out.  The ILP may
    give a node's hotter stage its cooler slots (costmodel.ilp); exported as ``CUDA_VISIBLE_DEVICES``
    on that node, the order makes local rank r open the slot the answer priced."""
    G = gpus_per_node
    by_node: dict = {}
    for g in sol.gpus:
        by_node.setdefault(g.node, []).append(g)
    out = {}
    for node, rows in by_node.items():
        slots_of = {}
        for g in sorted(rows, key=lambda g: g.slot):
            slots_of.setdefault(g.stage, []).append(g.slot)
        # Megatron's order: the node's stages in turn, each its S consecutive local ranks
        order = tuple(slot for stage in sorted(slots_of) for slot in slots_of[stage])
        if len(order) == G and order != tuple(range(G)):
            out[node] = order
    return out


def device_order_flags(sol, gpus_per_node: int) -> str:
    """The ``predict --device-order`` arguments that price :func:`device_orders`' placement (consecutive
    nodes with one order as a range ``A-B``); '' when every node runs in rank order."""
    blocks: list = []
    for node, order in sorted(device_orders(sol, gpus_per_node).items()):
        if blocks and blocks[-1][2] == order and blocks[-1][1] == node - 1:
            blocks[-1][1] = node
        else:
            blocks.append([node, node, order])
    return " ".join(f"--device-order {a}{'' if a == b else f'-{b}'}:{','.join(map(str, o))}" for a, b, o in blocks)


def device_order_lines(sol, gpu, gpus_per_node: int) -> str:
    """``export CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=...`` (``HIP_VISIBLE_DEVICES`` on
    AMD) per node that
    :func:`device_orders` reorders, consecutive nodes with the same order in one block; '' when every
    node runs in rank order."""
    # CUDA numbers devices fastest first unless told PCI order, nvidia-smi's (and the caps') order
    var = "HIP_VISIBLE_DEVICES" if gpu.vendor == "amd" else "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES"
    blocks = []
    for node, order in sorted(device_orders(sol, gpus_per_node).items()):
        line = f"export {var}={','.join(map(str, order))}"
        if blocks and blocks[-1][2] == line and blocks[-1][1] == node - 1:
            blocks[-1][1] = node
        else:
            blocks.append([node, node, line])
    return "\n".join(f"# node {a}\n{ln}" if a == b else f"# nodes {a}-{b} (each)\n{ln}" for a, b, ln in blocks)


def power_cap_lines(sol, gpu) -> str:
    """The commands that apply the solution's caps, grouped per node: ``nvidia-smi -i N -pl W`` on
    NVIDIA, ``amd-smi set -g N --power-cap W`` on AMD (amd-smi CLI).  Devices that share a package
    limit (``gpu.devices_per_package``, an MI250 OAM's two GCDs) get one command on the package's
    first device with the sum of their caps: the package splits its budget between them.  Consecutive
    nodes that take the same commands share one block (``# nodes 0-1535``): a 100,000-GPU answer stays
    readable and is written in one pass."""
    k = max(1, gpu.devices_per_package)
    cmd = "amd-smi set -g {i} --power-cap {w:.0f}" if gpu.vendor == "amd" else "nvidia-smi -i {i} -pl {w:.0f}"
    per_node: dict = {}
    for g in sol.gpus:
        per_node.setdefault(g.node, {})[g.slot] = sol.caps_w[g.stage]
    blocks = []                              # [first node, last node, commands]
    for node in sorted(per_node):
        caps = per_node[node]
        lines = tuple(cmd.format(i=first, w=sum(caps.get(first + j, 0.0) for j in range(k)))
                      for first in sorted({s - s % k for s in caps}))
        if blocks and blocks[-1][2] == lines and blocks[-1][1] == node - 1:
            blocks[-1][1] = node
        else:
            blocks.append([node, node, lines])
    note = f" (one limit per {k} devices, set on the first)" if k > 1 else ""
    out = []
    for a, b, lines in blocks:
        out.append((f"# node {a}" if a == b else f"# nodes {a}-{b} (each)") + note)
        out.extend(lines)
    return "\n".join(out)


#: a folding column's words longer than this fold (a URL, a path); shorter ones (every number) stay whole
_FOLD_WORD = 40


def whole_width(con: Console, table: Table) -> int:
    """The narrowest width at which ``table`` cuts no word: every column as wide as its longest word (a
    folding column's only up to :data:`_FOLD_WORD`, beyond which it folds rather than cuts)."""
    wide = con.options.update_width(1 << 16)
    try:            # rich's own measures and its own narrowing (which may take a column below its words)
        pads = [table._get_padding_width(c._index) for c in table.columns]
        need = [m if c.overflow != "fold" else min(m, _FOLD_WORD + p) for m, p, c in
                zip((table._measure_column(con, wide, c).minimum for c in table.columns), pads, table.columns)]
        extra, width = table._extra_width, table._extra_width + sum(need)
        for _ in range(64):
            got = table._calculate_column_widths(con, con.options.update_width(width - extra))
            short = sum(max(0, n - g) for n, g in zip(need, got))
            if not short:
                return width
            width += short
        return width
    except (AttributeError, TypeError):      # a rich without these (private): the widest measure
        return Measurement.get(con, wide, table).maximum


class _WholeCells(Console):
    """A console that prints a table too wide for it at :func:`whole_width` (the terminal wraps its lines)
    rather than cutting numbers to "1…" (rich's answer to a narrow terminal)."""

    def print(self, *objects, **kwargs) -> None:
        """Console.print, each table as wide as its words need."""
        need = max([whole_width(self, o) for o in objects if isinstance(o, Table)], default=0)
        if need <= self.width:
            return super().print(*objects, **kwargs)
        width, self.width = self.width, need
        try:
            super().print(*objects, **kwargs)
        finally:
            self.width = width


def console(stderr: bool = False, min_width: int = 0) -> Console:
    """A rich console (wide enough for the ranking table when output is not a terminal, and at least
    ``min_width`` columns in a terminal) that prints a table wider than the terminal rather than cut a
    cell (:class:`_WholeCells`); no emoji codes, so a ``file:1234:`` location in a note prints as written."""
    term = Console(stderr=stderr)
    width = max(term.width, min_width) if term.is_terminal else max(160, min_width)
    return _WholeCells(stderr=stderr, width=width, emoji=False)


def validate_tables(summary: dict, results, show_rows: bool = False) -> list:
    """Rich renderables of `costmodel validate`: per-source error table, skip reasons, the metric each
    source's measured step time came from, Spearman per sweep, and optionally every row."""
    from .validate import METRICS
    tb = Table(title="Step-time error per source (predicted vs measured)", header_style="bold")
    for c in ("source", "used", "skipped", "OOM", "mean |err| %", "max |err| %", "in band", "Spearman",
              "measured from"):
        tb.add_column(c, justify="left" if c in ("source", "measured from") else "right")
    fmt = lambda v, f="{:.1f}": "-" if v is None else f.format(v)
    pct = lambda v: "-" if v is None else f"{100 * v:.0f}%"
    for src, s in summary["sources"].items():
        tb.add_row(src.split("/")[-1], str(s["used"]), str(s["skipped"]), str(s["predicted_oom"]),
                   fmt(s["mean_abs_err_pct"]), fmt(s["max_abs_err_pct"]), pct(s["band_coverage"]),
                   fmt(s["spearman"], "{:.3f}"), ", ".join(f"{k} ({n})" for k, n in s.get("metrics", {}).items()))
    o = summary["overall"]
    tb.add_row("[bold]all", str(o["used"]), str(o["skipped"]), str(o["predicted_oom"]), fmt(o["mean_abs_err_pct"]),
               fmt(o["max_abs_err_pct"]), pct(o["band_coverage"]), "", "")
    out = [tb]
    def ids(s, why):
        got = s.get("skip_rows", {}).get(why, [])
        # --rows lists every skipped row; the summary names four and counts the rest
        shown = got if show_rows else got[:4]
        return (f" (rows {', '.join(shown)}{f', and {len(got) - 4} more (--rows lists them)' if len(got) > len(shown) else ''})"
                if got else "")
    lines = [f"  skipped {n:3d} of {src.split('/')[-1]}: {why}{ids(s, why)}"
             for src, s in summary["sources"].items() for why, n in s["skip_reasons"].items()]
    bad = [r for r in results if r.malformed]
    if bad:     # each named as the command's error names the first, so the file can be fixed line by line
        lines.append(f"  {len(bad)} malformed row(s), a cell that cannot be read (the command exits 2 after this "
                     "report):")
        lines += [f"    {r.place}: {r.skipped}" for r in bad]
    gpt = [r.row_id for r in results if not r.skipped and "arch=megatron-gpt(unrecognised model name)" in r.assumed]
    if gpt:     # a Llama-like row under a name of its own would be priced with a GELU MLP, silently
        lines.append(f"  {len(gpt)} row(s) priced as Megatron GPT (a GELU MLP of ffn_hidden, learned positions, "
                     f"biases, dropout 0.1): their model names no family the reader knows ({', '.join(gpt[:4])}{', ...' if len(gpt) > 4 else ''}); "
                     "name a catalog model or a family (llama, mistral, qwen, mpt, bloom) in the model column")
    used_metrics = {k for s in summary["sources"].values() for k in s.get("metrics", {})}
    lines.append("OOM: used rows predicted not to fit in HBM (a published run ran: counted apart, errors kept); "
                 "in band: used rows whose measured step lies inside the one-sigma band; Spearman: the rank "
                 "correlation of all of a source's used rows (4 or more), whatever their configurations")
    if used_metrics:
        lines += ["FLOP conventions: " + "; ".join(f"{k} = {METRICS[k]}" for k in sorted(used_metrics))]
    rep = summary.get("spearman_repeats", {})
    if summary["spearman"] or rep:
        lines.append("Spearman within configuration sweeps (>= 4 rows of one source, model and GPU count; the "
                     "table's Spearman column ranks all of a source's rows together):")

        def noise(k):
            r = rep.get(k)
            if r is None:
                return ""
            ceil = "" if r["ceiling"] is None else f"; the measurement's own ceiling {r['ceiling']:+.3f}"
            return (f"  (same inputs measured apart: {r['groups']} configuration(s), {r['rows']} rows, "
                    f"up to {r['max_spread_pct']:.1f}%{ceil})")
        lines += [(f"  {summary['spearman'][k]:+.3f}  " if k in summary["spearman"] else "    n/a  ") + f"{k}{noise(k)}"
                  for k in dict.fromkeys([*summary["spearman"], *rep])]
        if rep:
            lines.append("  ceiling: Spearman of the measured steps against each configuration's mean measured "
                         "step, the best a model given only these inputs can rank")
    if show_rows:
        lines += [(_skipped_row_line(r) if r.skipped else
                   f"{r.row_id:22s} measured {r.measured_s:9.3f} s  predicted {r.predicted_s:9.3f} s  {r.error_pct:+6.1f}%"
                   + (" OOM" if r.predicted_oom else "") + (f"  on {r.cluster}" if r.cluster else "")
                   + (f"  assumed {' '.join(r.assumed)}" if r.assumed else ""))
                  for r in results]
        lines.append("assumed: what the row does not publish, filled by the stack's recipes (sp), the least "
                     "sharding and recompute that fit (zero, recompute), the fastest micro-batch that fits (mbs) "
                     "or the notes (switches, the distributed optimizer); *-not-modelled: a cost in the "
                     "measured step that the model lacks")
    return out + lines


def _skipped_row_line(r) -> str:
    """A skipped row's line of ``validate --rows``: its id, reason and where it is in the file, a malformed
    one (a cell that cannot be read, which makes the command exit 2) marked so."""
    where = ", ".join(([f"line {r.line}"] if r.line else []) + (["malformed"] if r.malformed else []))
    return f"{r.row_id:22s} skipped: {r.skipped}" + (f"  ({where})" if where else "")


def _finite(x):
    """``x`` with every non-finite float (NaN, inf) replaced by None, recursively: strict JSON; finite floats
    at 15 significant digits (DBL_DIG, the decimal digits a double keeps), so 200.00000000000003 W prints
    as 200.0."""
    if isinstance(x, float):
        return float(f"{x:.15g}") if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    if hasattr(x, "item") and callable(x.item) and getattr(x, "ndim", None) == 0:     # numpy scalars
        return _finite(x.item())
    return x


def json_text(obj, indent: int = 2) -> str:
    """``obj`` as strict JSON (RFC 8259 has no NaN or Infinity: a value not measured is null), for
    every ``--json`` output; numpy scalars become numbers."""
    return json.dumps(_finite(obj), indent=indent, allow_nan=False, default=lambda v: _finite(float(v)))
