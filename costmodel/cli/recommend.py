"""``costmodel recommend``: search every layout, rank them, and with an energy objective or limits hand the
best candidates to the ILP."""
from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from .. import report
from ..errors import InfeasibleError, InputError
from ..launch import launch_settings
from ..layout_grid import pinned_vp_refusal
from ..layouts import layout_name, light_last_stage
from ..moe import flex_crosses_efa
from ..pipeline_balance import balanced_pace_ratio
from ..optimize import OBJECTIVES
from ..pipeline_layout import layout_text, with_pipeline_layout
from ..predict import check_inlet_temp_c, predict_run, predict_runs, prediction_row
from ..search import PARTIAL_REACH, search
from ..stack_rules import check_megatron_rules
from ..stacks import get_stack
from .recommend_energy import energy_recommend
from .switch_search import search_open_switches
from ..run_checks import search_zero_stages
from ..predict_command import condition_args, predict_command
from .notes import (TIGHT_HBM_SHARE, fit_count, inlet_rating_note, note as say, positions_note, said, search_notes,
                    start, torchtitan_fp8_note, uniform_routing_note, window_cp_note)
from .common import (CLUSTER, FORMAT, GBS, MODEL, NODES, PREC, PROFILE, SEQ, STACK, check_format, check_layout_flags,
                     refuse_dense_etp, context_line, fabric_notes, setup, unfitted_power_note, with_fabric_flags, with_layout_flags, with_recipe_flags)


@with_fabric_flags(memory=True)
@with_recipe_flags()
@with_layout_flags(pin=True)
def recommend(model: str = MODEL, cluster: str = CLUSTER, nodes: Optional[int] = NODES, gbs: int = GBS,
              seq_len: Optional[int] = SEQ, precision: Optional[str] = PREC, profile: Optional[str] = PROFILE,
              stack: str = STACK,
              top: Optional[int] = typer.Option(None, "--top", help="Rows of the time objective's ranking table (default 10; the energy ILP answers one layout)."),
              max_mbs: int = typer.Option(16, "--max-mbs", help="Largest micro-batch size tried."),
              no_sp: bool = typer.Option(False, "--no-sp", help="Disable sequence parallelism."),
              no_overlap: bool = typer.Option(False, "--no-overlap", help="Search only layouts with every collective exposed (a what-if; predict --no-overlap)."),
              objective: str = typer.Option("time", "--objective", help="time, energy (J per token) or edp (energy x delay)."),
              power_cap_w: Optional[str] = typer.Option(None, "--power-cap-w", help="Highest per-GPU power cap allowed, W (default: the cluster's power limit, its TDP unless the cluster file sets power.gpu_power_limit); the ILP chooses each stage's cap up to it."),
              node_power_kw: Optional[float] = typer.Option(None, "--node-power-kw", help="Power budget of a node's GPUs, kW (default: the node's rating less its non-GPU power)."),
              node_power: Optional[bool] = typer.Option(None, "--node-power/--no-node-power", help="Count the nodes' non-GPU power (CPUs, NICs, switches, fans) in the energy (default: on for --objective energy and edp)."),
              max_temp_c: Optional[float] = typer.Option(None, "--max-temp-c", help="Steady GPU temperature limit, C (default: the GPU's slowdown temperature)."),
              inlet_temp_c: Optional[float] = typer.Option(None, "--inlet-temp-c", help="Cooling inlet temperature, C (default: the cluster's)."),
              step_time_slack: Optional[float] = typer.Option(None, "--step-time-slack", help="Energy or edp objective: allow a step up to (1 + slack) x the fastest under the same limits "
                                                                "(default: no bound; above 1 allowed)."),
              pareto: bool = typer.Option(False, "--pareto", help="Print the time-energy Pareto front."),
              plot: Optional[str] = typer.Option(None, "--plot", help="With --pareto: write the front as a PNG (needs the [plot] extra)."),
              solver: Optional[str] = typer.Option(None, "--solver", help="ILP solver: cbc (the default) or highs (needs the highspy package)."),
              cap_count: Optional[int] = typer.Option(None, "--cap-levels", help="Power-cap levels per stage, evenly spaced from the GPU's minimum limit to the top cap (2-21, default 9; 3, 5, 9 and 17 nest, each the previous one's levels and their midpoints: more is never worse, only slower)."),
              candidates_k: Optional[int] = typer.Option(None, "--candidates",
                                                         help="Layouts the ILP starts from and adds per round of the branch and bound (default 6)."),
              fmt: Optional[str] = FORMAT,
              as_json: bool = typer.Option(False, "--json", help="Print the ranked records as JSON."),
              recipe_flags: dict = None, fabric_flags: dict = None, layout_flags: dict = None):
    """Enumerate every valid layout, predict each, and print the best ones with the reasons.

    With --objective energy/edp, power or thermal limits, or --pareto, an ILP also chooses the
    per-stage power caps, the layers per stage and the GPU slots of each stage (exit 3 when no
    layout meets the limits).  A layout option (--tp, --ep, --recompute, ...) holds that field fixed."""
    start()
    power_cap_w = _one_cap_w(power_cap_w)
    top = _top_rows(top, objective, pareto, (power_cap_w, node_power_kw, max_temp_c, step_time_slack))
    _check_options(dict(power_cap_w=power_cap_w, node_power_kw=node_power_kw, max_temp_c=max_temp_c,
                        inlet_temp_c=inlet_temp_c, step_time_slack=step_time_slack), top, max_mbs, cap_count,
                   objective, solver, (layout_flags or {}).get("mbs"))
    if candidates_k is not None and candidates_k < 1:      # refused in either mode, before any work
        raise InputError("--candidates", "", f"must be >= 1, got {candidates_k}")
    _check_plot(plot, pareto)
    check_format(fmt)
    pins = {k: v for k, v in (layout_flags or {}).items() if v is not None}
    check_layout_flags(pins)
    if no_sp and (recipe_flags or {}).get("tp_comm_overlap"):
        # as predict refuses it (Megatron-LM validate_args); TP = 1 layouts have no TP comm to overlap
        raise InputError("--tp-comm-overlap", "", "needs sequence parallelism (Megatron-LM validate_args: 'Tensor "
                         "parallel communication/GEMM overlap can happen only when sequence parallelism is "
                         "enabled'): drop --no-sp or --tp-comm-overlap")
    m, c, r, p = setup(model, cluster, nodes, gbs, seq_len, precision, profile, stack, recipe_flags, fabric_flags)
    cond = condition_args(fabric_flags, profile, inlet_temp_c)      # what the printed predict command repeats
    _check_model_flags(m, r, pins)
    _check_inlet(c, inlet_temp_c)
    # the recipe's own Megatron-LM start-up rules (those of its switches, whatever layout wins)
    check_megatron_rules(r, {"recompute": "selective" if r.recomputed != ("core_attn",) else None}, m.is_moe)
    out = report.console()
    with Progress(TextColumn("searching layouts"), BarColumn(), TextColumn("{task.completed}/{task.total} layouts"),
                  TimeElapsedColumn(), console=report.console(stderr=True), transient=True,
                  disable=as_json or not sys.stderr.isatty()) as bar:
        task = bar.add_task("search", total=None)
        kw = dict(progress=lambda done, total: bar.update(task, completed=done, total=total),
                  max_mbs=max_mbs, sp_choices=(not no_sp,), overlaps=(not no_overlap,), pins=pins,
                  partial_reach=max(top, RERANK_MIN, PARTIAL_REACH), zero_stages=search_zero_stages(r))
        res = search(m, r, c, p, **kw)
        res, r, notes = search_open_switches(m, r, c, p, res, kw, recipe_flags or {}, no_overlap)
        # every layout was priced on that routing; said with the answer (an error stays one line)
        routing = "\n".join(filter(None, (uniform_routing_note(m, r), positions_note(m, r), window_cp_note(m, r),
                                          torchtitan_fp8_note(r, recipe_flags))))
        note = "\n".join(([routing] if routing else []) + notes + fabric_notes(p, c)
                         + search_notes(c, r, res.ranked, no_sp)) or None
    _refuse_empty(res, m, r, c, p, pins)
    if _uses_ilp(objective, pareto, (power_cap_w, node_power_kw, max_temp_c, step_time_slack),
                 (("--node-power/--no-node-power", node_power), ("--cap-levels", cap_count), ("--solver", solver),
                  ("--candidates", candidates_k))):
        energy_recommend(m, c, r, p, res, out, objective=objective, power_cap_w=power_cap_w,
                          node_power_kw=node_power_kw, max_temp_c=max_temp_c, inlet_temp_c=inlet_temp_c,
                          step_time_slack=step_time_slack, pareto=pareto, plot=plot, solver=solver,
                          k=candidates_k, as_json=as_json, note=note, node_power=node_power, cap_count=cap_count,
                          fmt=fmt, args=(model, cluster, nodes, cond))
        return
    for line in (note or "").split("\n"):
        say(line)
    res, runs = _rank_shortlist_at_the_limit(m, r, c, p, res, top, inlet_temp_c)
    unfitted = unfitted_power_note(p, c)
    if runs[0].energy is not None and unfitted:     # the ranking's steps are under the limit
        say(unfitted)
    best = report.run_record(runs[0])
    _note_over_budget(best, c)
    if as_json:
        # the first ``top`` layouts of the time model, ranked by the step under the power limit; each
        # record is predict's for its layout, so the two commands' keys mean one thing
        recs = [dict(report.run_record(x), **({"pipeline_rank_layers": list(x.model.pipeline_rank_layers)}
                                              if x.model.pipeline_rank_layers else {})) for x in runs[:top]]
        out_json = {"feasible": True, "n_valid": res.n_valid, "n_feasible": res.n_feasible, "ranked": recs,
                    "predict_command":
                    predict_command(model, cluster, nodes, m, r, c.gpu, best["layout"], _split_of(runs[0]),
                                    conditions=cond), "notes": said()}
        if fmt is not None and recs:
            title, text = launch_settings(recs[0]["layout"], m, r, fmt=fmt, layers=_split_of(runs[0]), gpu=c.gpu)
            out_json["launch"] = dict(format=fmt, title=title, text=text)
        print(report.json_text(out_json))
        return
    out.print(context_line(m, c, r, p))
    out.print(f"{fit_count(res, c.gpu.capacity_bytes)}; profile {p.path}"
              + (f"; cooling inlet {inlet_temp_c:g} C (--inlet-temp-c)" if inlet_temp_c is not None else ""))
    shown = min(top, len(runs))
    out.print(report.ranking_table(res.ranked, top, f"Fastest layouts (the first {shown} of the time model's "
                                   f"{len(runs)} re-ranked by the step under the {c.power_limit_w:.0f} W power limit, "
                                   "as predict prints it)", runs))
    _print_capped_winner(out, c, runs[0])
    _print_band(out, runs[:top])
    _print_memory_margin(out, res, c, runs)
    out.print("[bold]Why this layout:[/bold]")
    for line in report.reasons(res.ranked, res.faster_infeasible, c, runs[0].mfu, runs):
        out.print(f"  - {line}", highlight=False)
    out.print(report.breakdown_table(best, "Where the winner's step time goes"))
    out.print(report.memory_table(best))
    title, text = launch_settings(best["layout"], m, r, fmt=fmt, layers=_split_of(runs[0]), gpu=c.gpu)
    out.print(f"[bold]{title} for the winner:[/bold]")
    out.print(text, markup=False, highlight=False, soft_wrap=True)   # pasted into a shell: never wrapped
    out.print("[bold]The same prediction from predict:[/bold]")
    out.print(predict_command(model, cluster, nodes, m, r, c.gpu, best["layout"], _split_of(runs[0]), conditions=cond),
              markup=False, highlight=False, soft_wrap=True)


def _note_over_budget(best: dict, c) -> None:
    """Say on stderr when the time answer's GPUs (``best``, a run record) peak above a node's power
    rating: the time objective prices the power limit; the ILP keeps the caps a node's rating allows."""
    if best.get("node_over_budget"):
        kw = math.floor(best["node_gpu_budget_w"] / 10.0) / 100.0          # never rounded above the budget
        say(f"the winner's GPUs peak at {best['node_gpu_peak_w'] / 1e3:.2f} kW a node, above "
            f"{c.key}'s {best['node_gpu_budget_w'] / 1e3:.3f} kW GPU budget (its rating less its non-GPU power): "
            f"the node's power capping would slow it; recommend --node-power-kw {kw:.2f} searches power caps that fit")


def _print_memory_margin(out, res, c, runs: list) -> None:
    """Where the winner's predicted peak is above :data:`TIGHT_HBM_SHARE` of the HBM, say so and name the
    fastest ranked layout below it, with its step time (under the power limit for the shortlisted
    ``runs``, at full clocks beyond them).  Silent under ``--mem-headroom``: the user set the margin."""
    cap = c.gpu.capacity_bytes
    # the priced rows at the split predict prices them at (the table's memory), the rest as ranked
    mem = np.array(res.ranked.memory.peak_bytes, dtype=np.float64)
    mem[:len(runs)] = [x.peak_mem_bytes for x in runs]
    if not len(mem) or mem[0] <= TIGHT_HBM_SHARE * cap or c.gpu.mem_headroom:
        return
    line = (f"the winner's predicted peak is {mem[0] / 2**30:.1f} of {cap / 2**30:.1f} GiB "
            f"({100 * mem[0] / cap:.0f}%): fragmentation the model leaves out may not fit it (--mem-headroom keeps room)")
    roomy = np.flatnonzero(mem <= TIGHT_HBM_SHARE * cap)
    if len(roomy):
        i = int(roomy[0])
        if i < len(runs):
            t0, ti, how = runs[0].step_time_s, runs[i].step_time_s, ""
        else:
            t0, ti, how = float(res.ranked.step_time_s[0]), float(res.ranked.step_time_s[i]), " at full clocks"
        line += (f"; the fastest ranked layout under {100 * TIGHT_HBM_SHARE:.0f}% is {layout_name(res.ranked.layouts.row(i))} "
                 f"at {mem[i] / 2**30:.1f} GiB, {ti:.3f} s per step{how} ({100 * (ti / t0 - 1):+.1f}%); "
                 f"--mem-headroom {1 - TIGHT_HBM_SHARE:g} searches every layout, partial recomputation included, "
                 "with that room")
    out.print(line, highlight=False)


def _uses_ilp(objective: str, pareto: bool, limits: tuple, ilp_flags: tuple) -> bool:
    """Whether recommend answers with the energy ILP: an energy or edp objective, --pareto, or a limit
    it answers (``limits``: power cap, node power, temperature, step-time slack; the inlet temperature
    is a condition every layout is predicted under, not a limit).

    Raises:
        InputError: --step-time-slack with the time objective, or one of ``ilp_flags`` ((flag, value)
            pairs that only the ILP reads) given where no ILP runs.
    """
    if limits[-1] is not None and objective == "time":
        raise InputError("--step-time-slack", "", "bounds the step of an energy or edp answer (--objective energy or "
                         "edp); the time objective takes the fastest")
    ilp = objective != "time" or pareto or any(v is not None for v in limits)
    for flag, v in ilp_flags:
        if v is not None and not ilp:
            raise InputError(flag, "", "applies to the energy ILP: use it with --objective energy or edp, a power "
                             "or thermal limit, or --pareto")
    return ilp


def _check_model_flags(m, r, pins: dict) -> None:
    """Refuse, before the search, what no layout of ``m`` can hold: more BF16 edge layers than half its
    layers, and an --etp pin on a dense model (its MLP runs at the layout's TP), as predict refuses them.

    Raises:
        InputError: naming --bf16-edge-layers or --etp.
    """
    from ..layouts import bf16_edge_layers_problem
    why = bf16_edge_layers_problem(r, m.num_layers)
    if why:
        raise InputError("--bf16-edge-layers", "", why)
    refuse_dense_etp(m, pins.get("etp"), pins.get("tp"))


def _plain_pinned_row(c, r, pins: dict) -> dict:
    """The plainest layout with ``pins``: the other degrees 1, DP the rest of the GPUs; where that DP
    leaves no whole micro-batch count, the least unpinned TP that does (so the rule named is the pin's,
    not the batch's)."""
    base = {**dict(tp=1, pp=1, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1, overlap=True), **pins}
    tps = [base["tp"]] if "tp" in pins or "dp" in pins else [t for t in (1, 2, 4, 8, 16, 32, 64, 72)
                                                             if t <= c.scale_up_gpus]
    rows = []
    for tp in tps:
        row = dict(base, tp=tp)
        row.setdefault("sp", tp > 1)
        if "dp" not in pins:
            row["dp"] = max(c.num_gpus // max(tp * row["pp"] * row["cp"], 1), 1)
        rows.append(row)
    return next((x for x in rows if r.gbs % (x["dp"] * x["mbs"]) == 0
                 and c.num_gpus == x["tp"] * x["pp"] * x["cp"] * x["dp"]), rows[0])


def _no_pinned_layout(m, r, c, pins: dict) -> str:
    """The message for pinned degrees no valid layout has: the rule the plainest layout with those pins
    breaks (the other degrees 1, DP the rest of the GPUs), as predict would name it."""
    from ..layouts import LayoutTable, validity
    head = (f"no valid layout of {m.name} on {c.num_gpus} GPUs with gbs {r.gbs} has "
            + ", ".join(f"{k}={v}" for k, v in pins.items()))
    row = _plain_pinned_row(c, r, pins)
    for k in ("tp", "pp", "dp", "cp"):
        if k in pins and c.num_gpus % pins[k]:
            return f"{head}: {k.upper()} {pins[k]} does not divide the {c.num_gpus} GPUs (TP x PP x DP x CP = GPUs)"
    if why := pinned_vp_refusal(m.num_layers, c.num_gpus, pins, r.stack):
        return f"{head}: {why}"
    code, msgs = validity(LayoutTable.from_rows([row]), m, r, c.num_gpus, c.scale_up_gpus)
    if code[0] >= 0:
        return f"{head}: {msgs[code[0]]} (for {layout_name(row)})"
    if "etp" in pins and pins["etp"] != 1 and pins.get("tp") != pins["etp"]:
        return (f"{head}: the search runs the experts at the layout's TP or unsplit (ETP = TP or 1, Megatron-core's "
                f"default and DeepSeek's): pin --tp {pins['etp']} with it, or --etp 1")
    if m.is_moe and r.moe_dispatcher == "flex" and flex_crosses_efa(c, row.get("etp", 1), row["ep"]).item():
        return (f"{head}: the search keeps the flex dispatcher's EP groups inside a node on AWS EFA (upstream "
                "DeepEP's internode kernels need IBGDA on mlx5 NICs; costmodel.moe.flex_crosses_efa): pin an EP that "
                "fits a node, or give --moe-dispatcher alltoall (predict prices such a layout, with a note)")
    return head + ": predict that layout to see the rule it breaks"


#: layouts the power limit re-ranks at least (the default --top), so that a shorter table (--top 1) shows
#: the same winner: a search setting, not a model constant
RERANK_MIN = 10
#: layouts the power limit re-ranks at most: past the first RERANK_MIN, the next ones are priced while their
#: full-clock step is below the best step under the limit so far (a search setting, not a model constant)
RERANK_MAX = 60
#: rows of the ranking table by default
TOP_DEFAULT = 10


def _check_inlet(c, inlet_temp_c) -> None:
    """Before the search, as predict does: refuse an inlet no cooling delivers (check_inlet_temp_c), and say
    one outside what the cooling's equipment is rated for (the cluster's own inlet too)."""
    if inlet_temp_c is not None:
        check_inlet_temp_c(inlet_temp_c, c)
    say(inlet_rating_note(c, inlet_temp_c))


def _rank_shortlist_at_the_limit(m, r, c, p, res, top: int, inlet_temp_c: float | None = None):
    """(search result, runs): the time model's first max(``top``, :data:`RERANK_MIN`) layouts, then (up to
    :data:`RERANK_MAX` in all) every other one that could still win, predicted as ``predict`` does (under
    the GPU's power limit, whose clocks the kernel tables measured in bursts do not hold, and its thermal
    throttle at the cooling inlet ``inlet_temp_c``, C, or the cluster's; 1F1B stages at their balanced
    split, :func:`_best_split_runs`) and put in the order of that step, the rest of the ranking after them
    unchanged; runs are their predictions in the new order (a layout that powers a GPU off last).  The
    limit and the throttle only slow a layout and a balanced split speeds it by at most
    costmodel.pipeline_balance.balanced_pace_ratio, so a layout whose time-model step times that ratio
    is not below the best step found cannot win."""
    if inlet_temp_c is not None:
        check_inlet_temp_c(inlet_temp_c, c)
    n = len(res.ranked.layouts)
    k = min(max(top, RERANK_MIN), n)
    picked = list(range(k))
    runs = _best_split_runs(m, r, c, p, res.ranked.layouts.take(np.arange(k)), inlet_temp_c)
    bound = res.ranked.step_time_s * _balanced_ratio(m, r, c, p, res.ranked.layouts, k)
    # the layouts that could still win, least bound first, priced a batch at a time
    rest = np.argsort(bound[k:], kind="stable")[:max(RERANK_MAX - k, 0)] + k
    while len(rest):
        best = min((run.step_time_s for run in runs if run.feasible), default=np.inf)
        batch = rest[:RERANK_MIN][bound[rest[:RERANK_MIN]] < best]
        if not len(batch):
            break
        picked += [int(i) for i in batch]
        runs += _best_split_runs(m, r, c, p, res.ranked.layouts.take(batch), inlet_temp_c)
        rest = rest[RERANK_MIN:]
    order = sorted(range(len(picked)), key=lambda j: (not runs[j].feasible, runs[j].step_time_s))
    new = [picked[j] for j in order]
    # rebuilt whenever a priced layout moved or came from past the first ones: row i is runs[i]'s layout
    if new != list(range(len(new))):
        rest = np.setdiff1d(np.arange(n), new, assume_unique=True)
        res = dataclasses.replace(res, ranked=res.ranked.take(np.concatenate([np.array(new), rest]).astype(np.int64)))
        runs = [runs[j] for j in order]
    return res, runs


def _balanced_ratio(m, r, c, p, L, start: int) -> np.ndarray:
    """Per ranked layout of ``L`` from place ``start`` on (1 before it), the least its step can fall by
    the balanced split :func:`_best_split_runs` gives 1F1B layouts: costmodel.pipeline_balance's bound
    with the logits, loss and MTP modules counted in layers of the layer's compute time (costmodel.compute;
    without its exposed communication, which would make the end stage weigh less)."""
    from ..compute import compute_times
    from ..run_checks import model_recipe
    ratio = np.ones(len(L))
    rows = np.flatnonzero((np.arange(len(L)) >= start) & (L.vp == 1) & (L.pp > 1))
    if m.pipeline_rank_layers or not len(rows):
        return ratio
    ct = compute_times(m, model_recipe(m, r, c), c, p, L.take(rows))
    extra = (ct.logits_fwd_s + ct.logits_bwd_s) / np.maximum(ct.layer_fwd_s + ct.layer_bwd_s, 1e-30)
    ratio[rows] = balanced_pace_ratio(m.num_layers, L.pp[rows], extra, light_last_stage(r))
    return ratio


def _split_of(run):
    """The layers per stage of a run whose model carries its own split (:func:`_best_split_runs`), else None."""
    return [int(n) for n in run.model.pipeline_rank_layers] or None


def _best_split_runs(m, r, c, p, layouts, inlet_temp_c=None) -> list:
    """``predict_runs`` of each layout of the table ``layouts`` at its default pipeline split, or at the
    split that balances its stages (costmodel.pipeline_balance: the embedding, logits, loss and MTP weigh
    on the end stages) where that one is faster and fits; such a run's model carries the split
    (``pipeline_rank_layers``), which the printed launcher flags set.  1F1B stages only (VP 1); a model
    with its own placement keeps it."""
    runs = predict_runs(m, r, c, p, layouts, inlet_temp_c=inlet_temp_c, searched=True)
    return [_balanced_split_run(m, r, c, p, layouts.row(i), run, inlet_temp_c) for i, run in enumerate(runs)]


def _balanced_split_run(m, r, c, p, lay: dict, run, inlet_temp_c=None):
    """``run`` (``lay`` at its default split), or ``lay`` at the split that balances its stages where
    that one is faster and fits (:func:`_best_split_runs`)."""
    from ..layouts import pipeline_split
    from ..memory import stage_memory_terms
    from ..optimize import build_option
    from ..pipeline_balance import balanced_split
    if lay["pp"] < 2 or lay["vp"] > 1 or m.pipeline_rank_layers or not run.feasible:
        return run
    o = build_option(run, (c.power_limit_w,))
    extra = np.zeros(lay["pp"])
    extra[0] += float(np.ravel(o.t_first_s)[0])
    extra[-1] += float(np.ravel(o.t_last_s)[0])
    fixed, per_layer = stage_memory_terms(m, r, lay, c.gpu)
    room = np.where(per_layer > 0, (c.gpu.capacity_bytes - fixed) / np.where(per_layer > 0, per_layer, 1.0), np.inf)
    split = balanced_split(m.num_layers, float(np.ravel(o.t_layer_s)[0]), extra, room)
    if split is None or np.array_equal(split, pipeline_split(m, lay, light_last_stage(r))):
        return run
    m2, _ = with_pipeline_layout(m, layout_text(split, lay["pp"], 1, m.mtp_layers), lay["pp"], 1, where="recommend")
    alt = predict_run(m2, r, c, p, lay, inlet_temp_c=inlet_temp_c, searched=True)
    return alt if alt.feasible and alt.step_time_s < run.step_time_s * (1 - 1e-3) else run


def _print_capped_winner(out, c, run) -> None:
    """Where the power limit slows the winner (kernel tables measured in bursts, which the limit holds
    below their clock), its step at full clocks, the time model's figure its breakdown adds up to."""
    if run.step_time_s > run.uncapped_step_time_s * (1 + 1e-3):
        e = getattr(run, "energy", None)
        why = ("GPUs at their slowdown temperature throttle the winner's clocks" if e is not None and e.throttled
               else f"under its {c.power_limit_w:.0f} W power limit the winner's clocks drop")
        hint = (f"; --max-temp-c {c.gpu.slowdown_temp_c:g} has the ILP choose per-stage caps that keep every GPU under "
                "it instead, which can pace the job faster than a throttled stage" if e is not None and e.throttled
                and c.gpu.slowdown_temp_c is not None else "")
        out.print(f"{why}: {run.step_time_s:.3f} s per step, against {run.uncapped_step_time_s:.3f} s at the clocks the "
                  f"kernel tables were measured at (the breakdown below){hint}")


def _print_band(out, runs) -> None:
    """The winner's one-sigma band (fit residuals and the model's error on published runs of its regime,
    costmodel.uncertainty) and whether the listed layouts lie inside it: there the order among them is
    the model's, which its error cannot confirm."""
    w = runs[0]
    if w.band is None or not w.feasible:
        return
    rel = w.band.rel
    fine = [r for r in runs if r.feasible]
    spread = fine[-1].step_time_s / w.step_time_s - 1.0
    within = (f"all {len(fine)} listed lie within {100 * spread:.1f}% of it, inside that band: their order is the "
              "model's, for a short measured run to settle" if spread < rel else
              f"the listed steps span {100 * spread:.1f}%, beyond it")
    none = f" over the fitted terms, none for {', '.join(w.band.unfitted)}" if w.band.unfitted else ""
    out.print(f"the winner's step {w.step_time_s:.3f} ± {rel * w.step_time_s:.3f} s at one sigma (fit residuals "
              f"{100 * w.band.fit_rel:.1f}%{none}, the model's error on published runs of its regime "
              f"{w.band.model_form_key} {100 * w.band.model_form_rel:.1f}%); {within}", highlight=False)


def _one_cap_w(text: str | None) -> float | None:
    """recommend's --power-cap-w: one number, W (predict takes one per stage; here the ILP chooses them).

    Raises:
        InputError: a list or a word, naming the flag.
    """
    if text is None:
        return None
    if "," in text:
        raise InputError("--power-cap-w", "", f"{text!r}: recommend takes one cap, the highest any stage may get (the "
                         "ILP chooses each stage's); one cap per stage is predict's --power-cap-w")
    try:
        return float(text)
    except ValueError:
        raise InputError("--power-cap-w", "", f"{text!r} is not a number of watts") from None


def _refuse_empty(res, m, r, c, p, pins: dict) -> None:
    """Refuse a search with no valid layout, or none that fits in memory (naming the pinned fields, which
    a user may relax, beside nodes and HBM).

    Raises:
        InputError: no valid layout.  InfeasibleError: none fits (the least memory one needs).
    """
    if res.n_valid == 0:
        if pins:
            raise InputError("layout", "", _no_pinned_layout(m, r, c, pins))
        mp = get_stack(r.stack).model_parallel
        raise InputError("layout", "", f"no valid layout of {m.name} on {c.num_gpus} GPUs with gbs {r.gbs}: " + (
            f"the {r.stack} stack runs data parallelism only (DP = the {c.num_gpus} GPUs), which a gbs of {r.gbs} "
            "does not fill with whole micro-batches: a gbs that is a multiple of the GPU count, or fewer nodes"
            if not mp else "check that gbs is divisible by a data-parallel size and the GPU count by TP x PP"))
    if res.n_feasible == 0:
        rec = report.run_record(prediction_row(res.closest_infeasible, 0, m, r, c, p))
        need = rec["peak_mem_bytes"]
        relax = f"relax the pinned {', '.join('--' + k.replace('_', '-') for k in pins)}, " if pins else ""
        raise InfeasibleError("memory", f"none of the {res.n_valid:,} valid layouts fits in memory; the smallest "
                              f"needs {need / 2**30:.1f} GiB per GPU ({rec['reason']}); {relax}"
                              + _memory_advice(rec, r, m, c), {"memory": need}, {"memory": need / c.gpu.capacity_bytes - 1.0})


def _memory_advice(rec: dict, r, m, c) -> str:
    """What can shrink the smallest layout's memory (``rec``: its predict record): the logits' own kernel
    where they hold a quarter of it or more, and more nodes only where a stack shards activations over
    them (context parallelism); a GPU with more HBM always."""
    from types import SimpleNamespace
    from ..memory import logits_bytes
    logits = float(logits_bytes(m, r, SimpleNamespace(**{k: rec["layout"][k] for k in ("tp", "cp", "mbs")})))
    out = []
    if r.cross_entropy != "chunked" and logits >= 0.25 * rec["peak_mem_bytes"]:
        out.append(f"--cross-entropy chunked (the logits hold {logits / 2**30:.1f} GiB of it)")
    if "cp" in get_stack(r.stack).model_parallel:
        out.append("add nodes (more GPUs shard the model's states and, by context parallelism, the sequence)")
    else:
        out.append(f"add nodes (more GPUs shard the model's states, not a sequence's activations: the {r.stack} stack "
                   "has no context parallelism) or a shorter --seq-len")
    return ", ".join(out) + ", or use a GPU with more HBM"


def _top_rows(top, objective: str, pareto: bool, limits: tuple) -> int:
    """The ranking table's rows: ``--top``, else :data:`TOP_DEFAULT`.

    Raises:
        InputError: --top where the energy ILP answers (an energy or edp objective, a limit, --pareto):
            it answers one layout, no table to size.
    """
    if top is not None and (objective != "time" or pareto or any(v is not None for v in limits)):
        raise InputError("--top", "", "sizes the time objective's ranking table; the energy ILP (an energy or edp "
                         "objective, a limit, --pareto) answers one layout: drop --top")
    return TOP_DEFAULT if top is None else top


def _check_options(limits: dict, top: int, max_mbs: int, cap_count, objective: str, solver: str,
                   mbs: int | None = None) -> None:
    """Refuse a non-finite limit, a count below 1, a cap grid outside 2..21 levels, an unknown objective
    or solver, a pinned --mbs above --max-mbs, each naming its flag, before any work."""
    if mbs is not None and mbs > max_mbs:
        raise InputError("--mbs", "", f"{mbs} is above --max-mbs {max_mbs}, the largest micro-batch the search "
                         "tries: raise --max-mbs or drop one")
    for name, v in limits.items():
        if v is not None and not math.isfinite(v):
            raise InputError("--" + name.replace("_", "-"), "", f"must be a finite number, got {v}")
    for flag, v in (("--top", top), ("--max-mbs", max_mbs)):
        if v < 1:
            raise InputError(flag, "", f"must be >= 1, got {v}")
    if cap_count is not None and not 2 <= cap_count <= 21:
        raise InputError("--cap-levels", "", f"must be between 2 and 21, got {cap_count}")
    if objective not in OBJECTIVES:
        raise InputError("--objective", "", f"{objective!r} is not one of {', '.join(OBJECTIVES)}")
    if solver not in (None, "cbc", "highs"):
        raise InputError("--solver", "", f"{solver!r} is not one of cbc, highs")


def _check_plot(plot: str | None, pareto: bool) -> None:
    """``--plot``: only with ``--pareto``, a PNG file in an existing folder, matplotlib installed;
    checked before the search and the solve.

    Raises:
        InputError: any of those not met.
    """
    if plot is not None and not pareto:
        raise InputError("--plot", "", "draws the Pareto front: add --pareto")
    if plot is not None:
        target = Path(plot)
        if not plot.strip() or target.is_dir() or plot.endswith(("/", "\\")) or target.suffix.lower() != ".png":
            raise InputError("--plot", "", f"{plot!r}: name the PNG file to write (e.g. front.png)")
        from ..files import check_output
        from ..plots import require_matplotlib
        check_output(target, "--plot")
        require_matplotlib()                # fail before a long solve, not after
