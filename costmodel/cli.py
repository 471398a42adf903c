"""The ``costmodel`` command line: a thin typer layer over the library.

Every :class:`costmodel.errors.InputError` becomes one line on stderr and exit code 2.
"""
from __future__ import annotations

import json
import sys
from typing import Optional

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from . import report
from .errors import CostmodelError, InfeasibleError, InputError
from .layouts import RECOMPUTE, LayoutTable, check_layout, layout_name
from .predict import predict_run, prediction_row
from .optimize import OBJECTIVES
from .search import search
from .cli_calibrate import app as calibrate_app
from .cli_compare import compare as compare_command
from .specs import (ClusterSpec, Recipe, list_clusters, list_gpus, list_models, load_cluster,
                    load_gpu, load_model, load_profile)

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Calibrated cost model of distributed LLM training: predict step time and "
                       "memory of any parallel layout, and recommend the best one.")
app.add_typer(calibrate_app, name="calibrate")
app.command()(compare_command)

MODEL = typer.Option(..., "--model", help="Catalog name (see `costmodel models`) or a HF config.json / YAML path.")
CLUSTER = typer.Option(..., "--cluster", help="Catalog name (see `costmodel hardware`) or a cluster YAML path.")
NODES = typer.Option(None, "--nodes", help="Override the cluster's node count.")
GBS = typer.Option(128, "--gbs", help="Global batch size, sequences.")
SEQ = typer.Option(None, "--seq-len", help="Sequence length, tokens (default: the model's training length).")
PREC = typer.Option(None, "--precision", help="bf16, fp16 or fp8 (default: bf16, fp16 on GPUs without bf16).")
PROFILE = typer.Option(None, "--profile", help="Calibrated profile YAML (default: hardware/profiles/<gpu>.yaml).")
NOFLASH = typer.Option(False, "--no-flash-attention", help="Model unfused attention (s^2 softmax in HBM).")


def _setup(model_arg, cluster_arg, nodes, gbs, seq_len, precision, profile_arg, no_flash):
    model = load_model(model_arg)
    cluster = load_cluster(cluster_arg, nodes)
    if precision is None:
        precision = "bf16" if "bf16" in cluster.gpu.peak_flops else "fp16"
    recipe = Recipe(gbs=gbs, seq_len=seq_len or model.seq_len, precision=precision,
                    flash_attention=not no_flash)
    profile = load_profile(profile_arg or cluster.gpu.key)
    for note in profile_notes(profile, cluster):
        print(f"costmodel: note: {note}", file=sys.stderr)
    return model, cluster, recipe, profile


def profile_notes(profile, cluster: ClusterSpec) -> list:
    """Warnings about a profile that may not speak for the cluster: fitted for another GPU, or from
    measurements the suite took on CPU (a plumbing check)."""
    out = []
    if profile.gpu != cluster.gpu.key:
        out.append(f"profile {profile.path} was fitted for {profile.gpu}, the cluster has {cluster.gpu.key}")
    devices = ((profile.raw.get("provenance") or {}).get("measured") or {}).get("devices") or []
    if "cpu" in devices:
        out.append(f"profile {profile.path} was fitted from a suite run on CPU: its numbers describe no GPU")
    return out


def _context_line(model, cluster: ClusterSpec, recipe) -> str:
    return (f"{model.display_name} ({model.params() / 1e9:.1f}B params) on {cluster.name}: "
            f"{cluster.nodes} x {cluster.gpus_per_node} {cluster.gpu.name}; gbs {recipe.gbs}, "
            f"seq_len {recipe.seq_len}, {recipe.precision}")


@app.command()
def recommend(model: str = MODEL, cluster: str = CLUSTER, nodes: Optional[int] = NODES, gbs: int = GBS,
              seq_len: Optional[int] = SEQ, precision: Optional[str] = PREC, profile: Optional[str] = PROFILE,
              no_flash_attention: bool = NOFLASH,
              top: int = typer.Option(10, "--top", help="Rows of the ranking table."),
              max_mbs: int = typer.Option(16, "--max-mbs", help="Largest micro-batch size tried."),
              no_sp: bool = typer.Option(False, "--no-sp", help="Disable sequence parallelism."),
              no_overlap: bool = typer.Option(False, "--no-overlap", help="Disable DP/TP comm overlap."),
              objective: str = typer.Option("time", "--objective", help="time, energy (J per token) or edp (energy x delay)."),
              power_cap_w: Optional[float] = typer.Option(None, "--power-cap-w", help="Highest per-GPU power cap allowed, W (default: TDP)."),
              node_power_kw: Optional[float] = typer.Option(None, "--node-power-kw", help="Power budget of a node's GPUs, kW (default: the node's rating)."),
              max_temp_c: Optional[float] = typer.Option(None, "--max-temp-c", help="Steady GPU temperature limit, C (default: the GPU's slowdown temperature)."),
              inlet_temp_c: Optional[float] = typer.Option(None, "--inlet-temp-c", help="Cooling inlet temperature, C (default: the cluster's)."),
              step_time_slack: Optional[float] = typer.Option(None, "--step-time-slack", help="Allow step time up to (1 + slack) x the fastest under the limits."),
              pareto: bool = typer.Option(False, "--pareto", help="Print the time-energy Pareto front."),
              plot: Optional[str] = typer.Option(None, "--plot", help="With --pareto: write the front as a PNG (needs the [plot] extra)."),
              solver: str = typer.Option("cbc", "--solver", help="ILP solver: cbc or highs."),
              candidates_k: Optional[int] = typer.Option(None, "--candidates",
                                                         help="Layouts handed to the ILP (default: 6, 3 with --pareto)."),
              as_json: bool = typer.Option(False, "--json", help="Print the ranked records as JSON.")):
    """Enumerate every valid layout, predict each, and print the best ones with the reasons.

    With --objective energy/edp, power or thermal limits, or --pareto, an ILP also chooses the
    per-stage power caps, the layers per stage and the GPU slots of each stage (exit 3 when no
    layout meets the limits)."""
    if objective not in OBJECTIVES:
        raise InputError("--objective", "", f"{objective!r} is not one of {', '.join(OBJECTIVES)}")
    if solver not in ("cbc", "highs"):
        raise InputError("--solver", "", f"{solver!r} is not one of cbc, highs")
    if plot and not pareto:
        raise InputError("--plot", "", "draws the Pareto front: add --pareto")
    if plot:
        try:
            import matplotlib  # noqa: F401  (fail before a long solve, not after)
        except ImportError:
            raise InputError("--plot", "", "needs matplotlib: pip install 'costmodel[plot]'") from None
    m, c, r, p = _setup(model, cluster, nodes, gbs, seq_len, precision, profile, no_flash_attention)
    out = report.console()
    with Progress(TextColumn("searching layouts"), BarColumn(), TextColumn("{task.completed}/{task.total} layouts"),
                  TimeElapsedColumn(), console=report.console(stderr=True), transient=True,
                  disable=as_json) as bar:
        task = bar.add_task("search", total=None)
        res = search(m, r, c, p, progress=lambda done, total: bar.update(task, completed=done, total=total),
                     max_mbs=max_mbs, sp_choices=(not no_sp,), overlaps=(not no_overlap,))
    if res.n_valid == 0:
        raise InputError("layout", "", f"no valid layout of {m.name} on {c.num_gpus} GPUs with gbs {r.gbs}: "
                         "check that gbs is divisible by a data-parallel size and the GPU count by TP x PP")
    if res.n_feasible == 0:
        rec = report.run_record(prediction_row(res.closest_infeasible, 0, m, r, c, p))
        raise InputError("layout", "", f"none of the {res.n_valid:,} valid layouts fits in memory; the "
                         f"smallest needs {rec['peak_mem_bytes'] / 2**30:.1f} GiB per GPU ({rec['reason']}); "
                         "add nodes or use a GPU with more HBM")
    best = report.run_record(prediction_row(res.ranked, 0, m, r, c, p))
    limits = (power_cap_w, node_power_kw, max_temp_c, inlet_temp_c, step_time_slack)
    if objective != "time" or pareto or any(v is not None for v in limits):
        _energy_recommend(m, c, r, p, res, out, objective=objective, power_cap_w=power_cap_w,
                          node_power_kw=node_power_kw, max_temp_c=max_temp_c, inlet_temp_c=inlet_temp_c,
                          step_time_slack=step_time_slack, pareto=pareto, plot=plot, solver=solver,
                          k=candidates_k, as_json=as_json)
        return
    if as_json:
        recs = [report.run_record(prediction_row(res.ranked, i, m, r, c, p))
                for i in range(min(top, len(res.ranked.layouts)))]
        print(json.dumps({"n_valid": res.n_valid, "n_feasible": res.n_feasible, "ranked": recs}, indent=2))
        return
    out.print(_context_line(m, c, r))
    out.print(f"{res.n_valid:,} valid layouts, {res.n_feasible:,} fit in {c.gpu.hbm_bytes / 2**30:.0f} GiB; "
              f"profile {p.path}")
    out.print(report.ranking_table(res.ranked, top, "Fastest layouts (step time)"))
    out.print("[bold]Why this layout:[/bold]")
    for line in report.reasons(res.ranked, res.faster_infeasible, c):
        out.print(f"  - {line}", highlight=False)
    out.print(report.breakdown_table(best, "Where the winner's step time goes"))
    out.print(report.memory_table(best))
    out.print("[bold]Megatron-LM arguments for the winner:[/bold]")
    out.print(report.megatron_args(best["layout"], m, r), markup=False, highlight=False)


def _energy_recommend(m, c, r, p, res, out, *, objective, power_cap_w, node_power_kw, max_temp_c,
                      inlet_temp_c, step_time_slack, pareto, plot, solver, k, as_json):
    from . import ilp
    from .optimize import build_instance, cap_levels, candidates
    if step_time_slack is not None and step_time_slack < 0:
        raise InputError("--step-time-slack", "", f"must be >= 0, got {step_time_slack}")
    if k is None:
        k = 3 if pareto else 6   # every front point is a MIP solve: keep the front quick
    if k < 1:
        raise InputError("--candidates", "", f"must be >= 1, got {k}")
    caps = cap_levels(c, p, power_cap_w)
    slow = c.gpu.slowdown_temp_c
    limit_t = max_temp_c if max_temp_c is not None else slow
    if limit_t is None:
        raise InputError("--max-temp-c", "", f"{c.gpu.name} has no slowdown temperature in its catalog file: "
                         "give the limit")
    inlet = c.cooling.inlet_temp_c if inlet_temp_c is None else inlet_temp_c
    if limit_t <= inlet:
        raise InputError("--max-temp-c", "", f"{limit_t:g} C is not above the inlet temperature {inlet:g} C")
    node_w = c.node_power_budget_w if node_power_kw is None else node_power_kw * 1e3
    if node_w <= 0:
        raise InputError("--node-power-kw", "", f"must be positive, got {node_power_kw}")
    if node_w < c.gpus_per_node * caps[0]:
        raise InputError("--node-power-kw", "", f"{node_w / 1e3:g} kW cannot feed {c.gpus_per_node} GPUs even at "
                         f"their lowest power limit ({caps[0]:g} W each)")
    lays = candidates(m, r, c, p, res, objective, k=k, top_cap_w=power_cap_w)
    inst = build_instance(lays, caps, max_temp_c=limit_t, node_power_w=node_w,
                          inlet_temp_c=inlet_temp_c, step_time_slack=step_time_slack)
    try:
        if pareto:
            front = ilp.pareto_front(inst, solver=solver)
            sol = min((s for _, _, s in front), key=lambda s: s.value(objective))
        else:
            front = None
            sol = ilp.solve(inst, objective, solver=solver)
    except ilp.SolverUnavailableError as e:
        raise InputError("--solver", "", str(e)) from None
    lay = lays[sol.layout_index].layout
    summary = report.solution_record(sol, lay, m, c, r, caps, objective)
    if as_json:
        if front is not None:
            summary["pareto"] = [{"step_time_s": T, "energy_j_per_step": E, "layout": f.layout_name,
                                  "caps_w": list(f.caps_w), "layers": list(f.layers)} for T, E, f in front]
        print(json.dumps(summary, indent=2))
        return
    out.print(_context_line(m, c, r))
    out.print(f"objective {objective}; caps {', '.join(f'{x:.0f}' for x in caps)} W; node GPU budget "
              f"{node_w / 1e3:.2f} kW; max temperature {limit_t:.1f} C; inlet {inlet:.1f} C"
              + (f"; step-time slack {step_time_slack:g}" if step_time_slack is not None else ""))
    out.print(f"ILP over {len(lays)} candidate layouts ({solver}, {sol.status}, {sol.solve_time_s:.2f} s)")
    out.print(report.solution_table(sol, [x.layout for x in lays]))
    out.print(f"step time {sol.step_time_s:.3f} s, {sol.energy_j / 1e3:,.1f} kJ per step, "
              f"{summary['tokens_per_joule']:.3f} tokens/J, {summary['samples_per_s_per_mj']:.2f} samples/(s MJ)")
    fastest = res.ranked.step_time_s[0]
    out.print(f"the fastest layout without limits ({layout_name(res.ranked.layouts.row(0))}) takes "
              f"{fastest:.3f} s per step (time model at TDP, no caps)")
    if front is not None:
        out.print(report.pareto_table(front))
        if plot:
            report.plot_pareto(front, plot, title=f"{m.display_name} on {c.name}")
            out.print(f"wrote {plot}")
    out.print(report.per_gpu_ilp_table(sol, top=16))
    out.print("[bold]Megatron-LM arguments:[/bold]")
    out.print(report.megatron_args(lay, m, r, layers=list(sol.layers)), markup=False, highlight=False)
    out.print("[bold]Power caps (run on each node; GPU index = local rank):[/bold]")
    out.print(report.nvidia_smi_lines(sol, c.gpus_per_node), markup=False, highlight=False)


@app.command()
def predict(model: str = MODEL, cluster: str = CLUSTER, nodes: Optional[int] = NODES, gbs: int = GBS,
            seq_len: Optional[int] = SEQ, precision: Optional[str] = PREC, profile: Optional[str] = PROFILE,
            no_flash_attention: bool = NOFLASH,
            tp: int = typer.Option(1, "--tp"), pp: int = typer.Option(1, "--pp"),
            dp: Optional[int] = typer.Option(None, "--dp", help="(default: GPUs / (TP x PP x CP))"),
            cp: int = typer.Option(1, "--cp"), ep: int = typer.Option(1, "--ep"), vp: int = typer.Option(1, "--vp"),
            mbs: int = typer.Option(1, "--mbs"),
            recompute: str = typer.Option("none", "--recompute", help="none, selective or full"),
            zero: int = typer.Option(1, "--zero", help="0 DDP, 1 distributed optimizer, 2, 3 FSDP"),
            no_sp: bool = typer.Option(False, "--no-sp", help="Disable sequence parallelism."),
            no_overlap: bool = typer.Option(False, "--no-overlap", help="Disable DP/TP comm overlap."),
            power_cap_w: Optional[float] = typer.Option(None, "--power-cap-w", help="Per-GPU power cap, W (default: TDP)."),
            inlet_temp_c: Optional[float] = typer.Option(None, "--inlet-temp-c", help="Override the cooling inlet temperature, C."),
            warm_steps: Optional[int] = typer.Option(None, "--warm-steps", help="Also report temperatures after N steps from a cold start."),
            as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")):
    """Predict one layout: step time, throughput, MFU, memory, power, temperature and energy."""
    m, c, r, p = _setup(model, cluster, nodes, gbs, seq_len, precision, profile, no_flash_attention)
    if recompute not in RECOMPUTE:
        raise InputError("--recompute", "", f"{recompute!r} is not one of {', '.join(RECOMPUTE)}")
    for flag, v in (("--tp", tp), ("--pp", pp), ("--cp", cp), ("--ep", ep), ("--vp", vp), ("--mbs", mbs)):
        if v < 1:
            raise InputError(flag, "", f"must be >= 1, got {v}")
    if dp is None:
        if c.num_gpus % (tp * pp * cp):
            raise InputError("--tp/--pp/--cp", "", f"TP x PP x CP = {tp * pp * cp} does not divide the "
                             f"{c.num_gpus} GPUs of {c.key}")
        dp = c.num_gpus // (tp * pp * cp)
    lay = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=ep, vp=vp, mbs=mbs, recompute=recompute, zero=zero,
               sp=(tp > 1 and not no_sp), overlap=not no_overlap)
    check_layout(LayoutTable.from_rows([lay]), m, r, c.num_gpus, c.gpus_per_node, uneven_pp=True)
    run = predict_run(m, r, c, p, lay, caps_w=power_cap_w, warm_steps=warm_steps, inlet_temp_c=inlet_temp_c)
    if run.energy_missing:
        print(f"costmodel: note: no power/thermal prediction (missing: {', '.join(run.energy_missing)})",
              file=sys.stderr)
    rec = report.run_record(run)
    band, energy = run.band, run.energy
    if as_json:
        print(json.dumps(rec, indent=2))
        return
    out = report.console()
    out.print(_context_line(m, c, r))
    lay = rec["layout"]
    out.print("layout: " + " ".join(f"{k}={v}" for k, v in lay.items()))
    if not rec["feasible"]:
        out.print(f"[bold red]infeasible:[/] {rec['reason']}")
    out.print(f"step time {rec['step_time_s']:.3f} ± {rec['step_time_band_s']:.3f} s, "
              f"{rec['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU, "
              f"{rec['model_tflops_per_gpu']:.1f} model TFLOP/s/GPU, MFU {100 * rec['mfu']:.1f}%")
    out.print(f"  ± is one sigma from the fit residuals of {p.path}"
              + (f"; not in the band (no fit data): {', '.join(band.unfitted)}" if band.unfitted else ""),
              highlight=False)
    out.print(report.breakdown_table(rec, "Step time breakdown (uncapped)"))
    out.print(report.memory_table(rec))
    if energy is not None:
        out.print(report.energy_line(rec))
        out.print(report.per_gpu_table(rec["per_gpu"], top=16))
    out.print("[bold]Megatron-LM arguments:[/bold]")
    out.print(report.megatron_args(lay, m, r), markup=False, highlight=False)


@app.command()
def validate(runs: str = typer.Argument(..., help="CSV of published runs (schema: README, 'Validate')."),
             plot: Optional[str] = typer.Option(None, "--plot", help="Directory for predicted_vs_measured.png."),
             rows: bool = typer.Option(False, "--rows", help="Also print every row's error."),
             as_json: bool = typer.Option(False, "--json", help="Print the summary and rows as JSON.")):
    """Predict every published run of a CSV and report the step-time error per source: rows used and
    skipped (with why), mean and max |error|, Spearman rank correlation within each sweep."""
    from .validate import read_runs_csv, summarize, validate_rows
    results = validate_rows(read_runs_csv(runs), runs)
    summary = summarize(results)
    if plot is not None:
        from .plots import validate_scatter
        from pathlib import Path
        summary["plot"] = validate_scatter(results, Path(plot) / "predicted_vs_measured.png")
    if as_json:
        summary["rows"] = [dict(row_id=r.row_id, source=r.source, measured_s=r.measured_s, predicted_s=r.predicted_s,
                                error_pct=None if r.skipped else r.error_pct, metric=r.metric, skipped=r.skipped)
                           for r in results]
        print(json.dumps(summary, indent=2))
        return
    out = report.console()
    for x in report.validate_tables(summary, results, rows):
        out.print(x, highlight=False) if isinstance(x, str) else out.print(x)
    if plot is not None:
        out.print(f"wrote {summary['plot']}", highlight=False)


@app.command()
def models():
    """The built-in model catalog with parameter counts."""
    tb = Table(title="Model catalog", header_style="bold")
    for col in ("name", "model", "layers", "hidden", "heads/kv", "FFN", "experts", "params (B)",
                "active (B)", "seq_len"):
        tb.add_column(col, justify="left" if col in ("name", "model") else "right")
    for name in list_models():
        s = load_model(name)
        tb.add_row(name, s.display_name, str(s.num_layers), str(s.hidden), f"{s.num_heads}/{s.num_kv_heads}",
                   f"{s.ffn_hidden}{' gated' if s.gated else ''}",
                   f"{s.num_experts} top-{s.topk}" if s.is_moe else "-",
                   f"{s.params() / 1e9:.2f}", f"{s.params(active=True) / 1e9:.2f}", str(s.seq_len))
    report.console().print(tb)


@app.command()
def hardware(show_sources: bool = typer.Option(True, "--sources/--no-sources", help="Print each number's source.")):
    """GPUs and clusters of the catalog, with the numbers the model uses and their sources."""
    out = report.console()
    tb = Table(title="GPUs (datasheet) and fitted profiles", header_style="bold")
    for col in ("gpu", "name", "bf16/fp16 TFLOP/s", "fp8 TFLOP/s", "HBM GiB", "HBM TB/s", "TDP W", "SMs",
                "GEMM eta_max", "HBM eff", "power model", "R_th C/W", "profile"):
        tb.add_column(col)
    sources, prov = [], []
    for key in list_gpus():
        g = load_gpu(key)
        try:
            p = load_profile(key)
            d = "bf16" if "bf16" in p.gemm else next(iter(p.gemm))
            eta, hbm_eff, pfile = f"{p.gemm[d].eta_max:.3f}", f"{p.hbm_efficiency:.3f}", p.path
            pfile = p.key
            pw, th = p.raw.get("power") or {}, p.raw.get("thermal") or {}
            power = (f"{p.power.idle_w:.0f} + {p.power.flop_w:.0f} u W, gamma {p.power.gamma:.2f}"
                     if p.power else "none")
            rth = f"{p.thermal.r_th_c_per_w:.3f}" if p.thermal else "-"
            for sec, d in (("power", pw), ("thermal", th)):
                if d:
                    prov.append((key, sec, f"derived: {d['derived_from']}" if d.get("derived_from")
                                 else "fitted (see the profile's fit: section)"))
        except InputError as e:
            eta = hbm_eff = power = rth = "-"
            pfile = f"none ({e.message})"
        pk = g.peak_flops.get("bf16", g.peak_flops.get("fp16"))
        tb.add_row(key, g.name, f"{pk / 1e12:.1f}",
                   f"{g.peak_flops['fp8'] / 1e12:.1f}" if "fp8" in g.peak_flops else "-",
                   f"{g.hbm_bytes / 2**30:.1f}", f"{g.hbm_bytes_per_s / 1e12:.2f}", f"{g.tdp_w:.0f}",
                   str(g.num_sms), eta, hbm_eff, power, rth, pfile)
        sources += [(key, f, s) for f, s in g.sources.items()]
    out.print(tb)
    tv = Table(title="Power and thermal parameters: fitted or derived", header_style="bold")
    for col in ("gpu", "section", "provenance"):
        tv.add_column(col)
    for row in prov:
        tv.add_row(*row)
    out.print(tv)
    tc = Table(title="Clusters", header_style="bold")
    for col in ("cluster", "GPUs", "intra-node", "inter-node per node", "node power kW", "cooling"):
        tc.add_column(col)
    for key in list_clusters():
        c = load_cluster(key)
        tc.add_row(key, f"{c.nodes} x {c.gpus_per_node} {c.gpu.key}",
                   f"{c.intra_fabric} {c.intra_bytes_per_s / 1e9:.0f} GB/s/GPU, {c.intra_latency_s * 1e6:.1f} us",
                   f"{c.nics_per_node} x {c.nic_bytes_per_s * 8 / 1e9:.0f} Gb/s {c.inter_fabric}, "
                   f"{c.inter_latency_s * 1e6:.1f} us",
                   f"{c.node_power_budget_w / 1e3:.1f}", f"{c.cooling.type}, inlet {c.cooling.inlet_temp_c:.0f} C")
        sources += [(key, f, s) for f, s in c.sources.items()]
    out.print(tc)
    if show_sources:
        ts = Table(title="Sources", header_style="bold")
        for col in ("file", "field", "source"):
            ts.add_column(col)
        for row in sources:
            ts.add_row(*map(str, row))
        out.print(ts)


def main() -> None:
    """Console entry point: run the typer app; a CostmodelError becomes one line and its exit code."""
    try:
        rc = app(standalone_mode=False)   # returns the code of a typer.Exit raised by a command
        if isinstance(rc, int) and rc:
            sys.exit(rc)
    except CostmodelError as e:
        kind = "infeasible" if isinstance(e, InfeasibleError) else "error"
        print(f"costmodel: {kind}: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        print("costmodel: aborted", file=sys.stderr)
        sys.exit(1)
    except Exception as e:
        # usage errors (bad flag, missing option, no command) come from click, or from the copy of
        # click that typer >= 0.29 vendors: both carry show() and exit_code
        if callable(getattr(e, "show", None)) and isinstance(getattr(e, "exit_code", None), int):
            e.show()
            sys.exit(e.exit_code)
        raise


if __name__ == "__main__":
    main()
