"""recommend's energy answer: the ILP over the searched layouts under the power, node-power and temperature
limits (costmodel.optimize), its report and the checks of those limits; recommend calls
:func:`energy_recommend` when an objective, a limit or --pareto asks for it."""
from __future__ import annotations

import numpy as np

from .. import report
from ..errors import InfeasibleError, InputError
from ..launch import launch_settings
from ..layouts import layout_name
from ..predict import check_inlet_temp_c
from ..predict_command import predict_command
from .common import context_line, unfitted_power_note
from .notes import note as say, said


def node_cap_sums_w(caps_w, stage_gpus: int, gpus_per_node: int) -> list:
    """The sum of the per-GPU caps on each node, W: stage s holds ranks s x stage_gpus onwards (the
    pipeline outermost, Megatron's rank order), node k ranks k x gpus_per_node onwards."""
    per_rank = np.repeat(np.asarray(caps_w, dtype=np.float64), stage_gpus)
    return np.bincount(np.arange(len(per_rank)) // gpus_per_node, weights=per_rank).tolist()


def _print_cap_budget(out, sol, lay: dict, c, node_w: float) -> None:
    """A note where the caps set on a node add to more than its GPU budget: the ILP keeps the predicted
    draw within the budget, which the caps alone do not guarantee (a kernel may draw up to its cap)."""
    sums = node_cap_sums_w(sol.caps_w, lay["tp"] * lay["dp"] * lay["cp"], c.gpus_per_node)
    k = max(range(len(sums)), key=sums.__getitem__)
    if sums[k] > node_w * (1 + 1e-9):
        out.print(f"the caps of node {k} add to {sums[k] / 1e3:.2f} kW, above its {node_w / 1e3:.2f} kW GPU budget: the "
                  "predicted draw stays within the budget (the ILP's constraint), a kernel drawing up to its cap "
                  "would not; lower --power-cap-w to guarantee it", highlight=False)


def _print_cap_edges(out, sol, caps, gpu_name: str) -> None:
    """The notes on the chosen caps: stages at the lowest settable cap, and stages whose GPUs stay
    above their cap at the lowest clock (costmodel.report.unmet_caps)."""
    edge = [i for i, x in enumerate(sol.caps_w) if x <= caps[0] + 1e-9]
    if edge and len(caps) > 1:
        out.print(f"stage(s) {', '.join(map(str, edge))} sit at the lowest settable cap ({caps[0]:.0f} W, "
                  f"{gpu_name}'s minimum power limit): the grid cannot go lower")
    for s_, w in report.unmet_caps(sol).items():
        out.print(f"CAP NOT MET: stage {s_}'s GPUs draw {w:.0f} W busy at {gpu_name}'s lowest clock, above its "
                  f"{sol.caps_w[s_]:.0f} W cap: the limit cannot hold them there")


def _ilp_limits(c, caps, max_temp_c, inlet_temp_c, node_power_kw) -> tuple:
    """(temperature limit C, inlet C, node GPU budget W) of the energy ILP, each checked.

    Raises:
        InputError: a temperature limit missing, at or above the shutdown temperature, above the slowdown
            temperature or not above the inlet; a node budget not positive or over 100 x the GPUs' TDP.
        InfeasibleError: a node budget below the GPUs' lowest caps (binding node_power).
    """
    slow = c.gpu.slowdown_temp_c
    limit_t = max_temp_c if max_temp_c is not None else slow
    if limit_t is None:
        raise InputError("--max-temp-c", "", f"{c.gpu.name} has no slowdown temperature in its catalog file: "
                         "give the limit")
    inlet = c.cooling.inlet_temp_c if inlet_temp_c is None else inlet_temp_c
    if inlet_temp_c is not None:
        check_inlet_temp_c(inlet_temp_c, c)
    stop = c.gpu.shutdown_temp_c
    if stop is not None and limit_t >= stop:
        raise InputError("--max-temp-c", "", f"{limit_t:g} C is at or above {c.gpu.name}'s shutdown temperature "
                         f"{stop:g} C: the GPU would power off")
    if slow is not None and limit_t > slow:
        raise InputError("--max-temp-c", "", f"{limit_t:g} C is above {c.gpu.name}'s slowdown temperature {slow:g} C: "
                         "a GPU held there throttles its clocks, which the ILP's step time does not price; give at "
                         f"most {slow:g} C (the default), and predict shows what throttling costs")
    if limit_t <= inlet:
        raise InputError("--max-temp-c", "", f"{limit_t:g} C is not above the inlet temperature {inlet:g} C")
    node_w = c.gpu_power_budget_w if node_power_kw is None else node_power_kw * 1e3
    if node_w <= 0:
        raise InputError("--node-power-kw", "", f"must be positive, got {node_power_kw}")
    # (a cluster file's own budget always feeds its GPUs at their lowest limit: its loader checks it)
    need, limit_sum = c.gpus_per_node * caps[0], c.gpus_per_node * c.power_limit_w
    if node_power_kw is not None and node_w < need:
        raise InfeasibleError("node_power", f"--node-power-kw {node_w / 1e3:g} kW cannot feed {c.gpus_per_node} GPUs "
                              f"even at their lowest power limit ({caps[0]:g} W each): it must rise to {need / 1e3:g} kW "
                              f"(+{(need - node_w) / 1e3:g} kW)", {"node_power": need}, {"node_power": need / node_w - 1})
    if node_power_kw is not None and node_w > 100 * limit_sum:      # watts given to the kW flag
        raise InputError("--node-power-kw", "", f"{node_power_kw:g} kW is over 100 x the {limit_sum / 1e3:g} kW its "
                         f"{c.gpus_per_node} GPUs draw at their power limit: the flag takes kW (did you give watts?)")
    if node_power_kw is not None and node_w >= limit_sum:
        say(f"--node-power-kw {node_power_kw:g} kW is at or above the {limit_sum / 1e3:g} kW the GPUs draw at their "
            "power limit: it binds nothing")
    return limit_t, inlet, node_w


def energy_recommend(m, c, r, p, res, out, *, objective, power_cap_w, node_power_kw, max_temp_c,
                      inlet_temp_c, step_time_slack, pareto, plot, solver, k, as_json, note=None, node_power=None,
                      cap_count=None, fmt=None, args=None):
    from .. import ilp
    from ..ilp.solver import check_solver
    from ..optimize import DEFAULT_CAP_LEVELS, cap_levels, solve_space, with_budget_share
    solver = solver or "cbc"
    check_solver(solver)            # before any note: a solver PuLP cannot run is one error line
    if step_time_slack is not None and step_time_slack < 0:
        raise InputError("--step-time-slack", "", f"must be >= 0, got {step_time_slack}")
    if k is None:
        k = 6
    if k < 1:
        raise InputError("--candidates", "", f"must be >= 1, got {k}")
    # 9: the 5 levels' midpoints too (at 55 C on paper-h200 Llama 3 70B takes 11% less energy than at 5,
    # in less time); 5, 9, 17 nest, so a finer grid never answers worse
    caps = cap_levels(c, p, power_cap_w, n=cap_count or DEFAULT_CAP_LEVELS)
    limit_t, inlet, node_w = _ilp_limits(c, caps, max_temp_c, inlet_temp_c, node_power_kw)
    caps = with_budget_share(caps, node_w, c.gpus_per_node)
    if node_power is None:
        node_power = objective in ("energy", "edp")
    space = None
    try:
        space = solve_space(m, r, c, p, res, objective, caps, max_temp_c=limit_t, node_power_w=node_w,
                            inlet_temp_c=inlet_temp_c, step_time_slack=step_time_slack, node_power=node_power,
                            solver=solver, k=k, power_limit_w=power_cap_w)
        sol, lays = space.solution, space.runs
        front = None
        if pareto:
            # the front over the layouts the search kept (the optimum and the fastest among them),
            # so --pareto never changes the answer or its reference
            front = report.non_dominated(ilp.pareto_front(space.instance, solver=solver))
    except ilp.SolverUnavailableError as e:
        raise InputError("--solver", "", str(e)) from None
    lay = lays[sol.layout_index].layout
    summary = _solution_summary(sol, lay, m, c, r, caps, objective, bool(node_power), space,
                                limits=dict(max_temp_limit_c=limit_t, node_gpu_budget_w=node_w, inlet_temp_c=inlet,
                                            step_time_slack=step_time_slack))
    for line in (note or "").split("\n"):
        say(line)
    unfitted = unfitted_power_note(p, c)
    if unfitted:
        say(unfitted)
    if as_json:
        if front is not None:
            summary["pareto"] = [{"step_time_s": T, **report.energy_split(E, T, c, bool(node_power)),
                                  "layout": f.layout_name, "caps_w": list(f.caps_w), "layers": list(f.layers)}
                                 for T, E, f in front]
        if fmt is not None:         # as in time mode: the launch text only when --format asks for it
            title, text = launch_settings(lay, m, r, layers=list(sol.layers), fmt=fmt, gpu=c.gpu)
            summary["launch"] = dict(format=fmt, title=title, text=text)
        summary["power_cap_commands"] = report.power_cap_lines(sol, c.gpu)
        summary["device_order_commands"] = report.device_order_lines(sol, c.gpu, c.gpus_per_node)
        summary["predict_command"] = _energy_predict_command(args, m, r, c, lay, sol, inlet_temp_c)
        summary["notes"] = said()
        print(report.json_text(summary))
        if plot and front is not None:      # after the answer: a write that fails loses none of it
            report.plot_pareto(front, plot, title=f"{m.display_name} on {c.name}", chosen=sol, node_power=bool(node_power))
        return
    out.print(context_line(m, c, r, p))
    out.print(f"objective {objective}; caps {', '.join(f'{x:.0f}' for x in caps)} W; node GPU budget "
              f"{node_w / 1e3:.2f} kW; max temperature {limit_t:.1f} C; inlet {inlet:.1f} C"
              + (f"; step-time slack {step_time_slack:g}" if step_time_slack is not None else ""))
    if space is not None:
        out.print(f"ILP over the whole space of {space.n_space:,} layouts (1F1B, and interleaved at the even split): "
                  f"{space.n_solved} reached the ILP, the rest are bounded out by a lower bound of the objective "
                  f"({space.n_ilp_solves} ILP solve(s), {solver}, {sol.status})")
    else:
        out.print(f"ILP over {len(lays)} candidate layouts ({solver}, {sol.status}, {sol.solve_time_s:.2f} s)")
    out.print(report.solution_table(sol, [x.layout for x in lays]))
    what = ("GPUs and nodes (non-GPU " + f"{c.node_other_power_w / 1e3:.2f} kW per node)" if node_power else "GPUs only")
    out.print(f"step time {sol.step_time_s:.3f} s, {sol.energy_j / 1e3:,.1f} kJ per step ({what}); the GPUs "
              f"{summary['energy_j_per_step'] / 1e3:,.1f} kJ, {summary['tokens_per_joule']:.3f} tokens/J, "
              f"{summary['samples_per_s_per_mj']:.2f} samples/(s MJ)")
    if sol.reference is not None:
        ref = sol.reference
        out.print(f"reference, the fastest under the same limits: {ref.layout_name} at caps "
                  f"{'/'.join(f'{x:.0f}' for x in ref.caps_w)} W, {ref.step_time_s:.3f} s, {ref.energy_j / 1e3:,.1f} kJ "
                  f"per step; the choice takes {100 * (sol.step_time_s / ref.step_time_s - 1):+.1f}% time, "
                  f"{100 * (sol.energy_j / ref.energy_j - 1):+.1f}% energy")
    _print_cap_edges(out, sol, caps, c.gpu.name)
    _print_cap_budget(out, sol, lay, c, node_w)
    if sol.reference is None:
        fastest = res.ranked.step_time_s[0]
        out.print(f"the time model's fastest layout ({layout_name(res.ranked.layouts.row(0))}) takes "
                  f"{fastest:.3f} s per step with an even split before the power limit (the time model alone; the "
                  f"step above and predict apply the limit)")
    if front is not None:
        out.print(report.pareto_table(front, node_power))
    out.print(report.per_gpu_ilp_table(sol, top=16))
    title, text = launch_settings(lay, m, r, layers=list(sol.layers), fmt=fmt, gpu=c.gpu)
    out.print(f"[bold]{title}:[/bold]")
    out.print(text, markup=False, highlight=False, soft_wrap=True)   # pasted into a shell: never wrapped
    order = report.device_order_lines(sol, c.gpu, c.gpus_per_node)
    if order:
        out.print("[bold]Placement (export on these nodes before the launch: local rank r runs on the r-th device "
                  "listed, so each stage lands in the slots priced above; predict prices it with "
                  f"{report.device_order_flags(sol, c.gpus_per_node)}):[/bold]", markup=True, highlight=False)
        out.print(order, markup=False, highlight=False, soft_wrap=True)
    tool = "amd-smi" if c.gpu.vendor == "amd" else "nvidia-smi"
    out.print(f"[bold]Power caps (run on each node; GPU index = {tool}'s device index, the slot):[/bold]")
    out.print(report.power_cap_lines(sol, c.gpu), markup=False, highlight=False, soft_wrap=True)
    if args is not None:
        out.print("[bold]The same layout, caps and placement in predict (its step under the caps):[/bold]")
        out.print(_energy_predict_command(args, m, r, c, lay, sol, inlet_temp_c), markup=False, highlight=False,
                  soft_wrap=True)
    if plot and front is not None:      # last, as in --json
        report.plot_pareto(front, plot, title=f"{m.display_name} on {c.name}", chosen=sol, node_power=bool(node_power))
        out.print(f"wrote {plot}", highlight=False)


def _solution_summary(sol, lay: dict, m, c, r, caps, objective: str, node_power: bool, space, limits: dict) -> dict:
    """The JSON record of an ILP answer: report.solution_record's, ``feasible`` true (as the refusal's
    record says false, so a script tests one key), the nodes' non-GPU power, the ``limits`` it solved under
    (max_temp_limit_c, node_gpu_budget_w in W, inlet_temp_c, step_time_slack, as the text's header prints
    them), the search's counts and the reference (the fastest layout under the same limits)."""
    summary = dict(feasible=True, **report.solution_record(sol, lay, m, c, r, caps, objective, node_power,
                                                           max_temp_limit_c=limits["max_temp_limit_c"]))
    summary["node_power"] = dict(included=node_power, node_other_power_w=c.node_other_power_w,
                                 source=c.node_other_power_source)
    summary.update({k: v for k, v in limits.items() if k != "max_temp_limit_c"})
    if space is not None:
        summary["search"] = dict(space_layouts=space.n_space, ilp_layouts=space.n_solved,
                                 ilp_solves=space.n_ilp_solves)
    if sol.reference is not None:
        ref = sol.reference
        summary["reference"] = dict(layout=ref.layout_name, caps_w=list(ref.caps_w), layers=list(ref.layers),
                                    step_time_s=ref.step_time_s,
                                    **report.energy_split(ref.energy_j, ref.step_time_s, c, node_power),
                                    what="the fastest layout under the same limits")
    return summary


def _energy_predict_command(args, m, r, c, lay: dict, sol, inlet_temp_c) -> str | None:
    """The predict command of an ILP answer: its layout, split, per-stage caps, device order and the
    conditions recommend was given (``args``: model, cluster, nodes and their condition flags)."""
    if args is None:
        return None
    return predict_command(*args[:3], m, r, c.gpu, lay, list(sol.layers), sol.caps_w, report.device_order_flags(
        sol, c.gpus_per_node), conditions=args[3])
