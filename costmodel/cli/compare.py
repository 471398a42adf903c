"""``costmodel compare``: predict a measured run and print the error per metric (a thin typer layer over
:mod:`costmodel.compare`, the readers of :mod:`costmodel.readers` and :mod:`costmodel.trace`)."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.table import Table

from .. import report
from ..compare import (build_metrics, check_model, differs, logged_flops_check, logged_memory_check, model_from_log,
                       per_gpu_rows, wall_clock_note, check_measured_rate, resolve_run, throttle_warnings,
                       dump_defaults_note)
from ..trace_window import PAUSE_MIN_STEPS, capture_gpu_check, trace_coverage_notes, trace_metrics, training_window
from ..compare import STACK_DEFAULTS
from ..errors import InputError
from ..logged_recipe import dump_key, logged_switches
from ..moe import check_flex_fabric, check_moe_recipe
from .common import (check_layout_flags, check_pipeline_accounting, check_profile_gpu, check_recipe_flags, with_layout_flags,
                     with_recipe_flags)
from ..run_config import PIPELINE_ACCOUNTING_KEYS
from ..layouts import LayoutTable, check_layout, stack_default_etp
from ..pipeline_layout import with_pipeline_layout
from ..torchtitan_split import stage_layout_text
from ..predict import predict_run
from ..specs import Recipe, cluster_profile, load_cluster, load_model
from ..recipe_switches import MOE_SWITCHES, RECIPE_SWITCHES, SWITCHES_BY_NAME
from ..stacks import get_stack, stack_recipe, switch_values
from .compare_inputs import _ask_once, _local, _read_log, _read_trace, _records_text, _refuse_untimed, \
    trace_limit_note, unreadable_note

_O = lambda flag, help_=None: typer.Option(None, flag, help=help_)  # noqa: E731


def _recipe_of_log(tlog, run, c, recipe_flags, stack, m, allow_override, warnings, log):
    """:func:`_recipe`, whose refusal of a value the log gave names the log, not a flag never typed.

    Raises:
        InputError: as :func:`_recipe`, naming ``log`` and the key where the value came from the log.
    """
    try:
        return _recipe(tlog, run, c, recipe_flags, stack, m, allow_override, warnings)
    except InputError as e:
        key = e.where[2:].replace("-", "_") if e.where.startswith("--") else None
        if key is None or run.origin.get(key) != "log":
            raise
        said = {"precision": "its argument dump's fp8 / fp8_recipe / bf16"}.get(key, f"its {key}")
        raise InputError(log, key, f"{e.message} ({said}, not a flag)") from None


@with_layout_flags(from_log=True)
@with_recipe_flags("from the log, else the stack's")
def compare(
        log: str = typer.Option(..., "--log", help="Megatron-LM / Megatron-DeepSpeed / NeMo / torchtitan / llm-foundry (Composer console) / DeepSpeed log."),
        power: Optional[str] = _O("--power", "nvidia-smi CSV, dmon or -q, dcgmi dmon, rocm-smi, amd-smi or suite JSONL of the run."),
        model: Optional[str] = _O("--model", "Catalog name or config (default: from the log's argument dump)."),
        cluster: str = typer.Option(..., "--cluster", help="Catalog name or cluster YAML."),
        nodes: Optional[int] = _O("--nodes", "Nodes (default: the log's world size / GPUs per node)."),
        gbs: Optional[int] = _O("--gbs"), seq_len: Optional[int] = _O("--seq-len"),
        precision: Optional[str] = _O("--precision"),
        profile: Optional[str] = _O("--profile", "Calibrated profile YAML (default: the GPU's built-in one)."),
        stack: Optional[str] = _O("--stack", "Training stack whose defaults fill what the log does not say "
                                  "(default: the log's framework; costmodel/stacks.py)."),
        warmup_steps: Optional[int] = _O("--warmup-steps", "Logged records (iteration lines, whatever the log interval) to discard from the start (default: the reader's rule)."),
        rank: Optional[str] = _O("--rank", "Rank label to keep when several ranks print iterations."),
        plot: Optional[str] = _O("--plot", "Directory for PNG plots (needs the [plot] extra)."),
        trace: Optional[str] = _O("--trace", "Write the predicted schedule as Perfetto/Chrome trace JSON."),
        config: Optional[str] = _O("--config", "The run's NeMo YAML, Megatron-Bridge YAML or torchtitan TOML: "
                                   "fills what the log and the flags do not say; a value that contradicts the log "
                                   "is refused."),
        allow_override: bool = typer.Option(False, "--allow-override", help="Let flags override the log's "
                                            "argument dump (each difference is listed) instead of refusing."),
        as_json: bool = typer.Option(False, "--json", help="Print one JSON object."), layout_flags: dict = None,
        recipe_flags: dict = None):
    """Predict a measured run and report, per metric, measured vs predicted and the error: step time,
    tokens/s/GPU, TFLOP/s/GPU, MFU and, with --power, power, energy per token, temperature and clock."""
    if warmup_steps is not None and warmup_steps < 0:
        raise InputError("--warmup-steps", "", f"must be >= 0, got {warmup_steps}")
    check_layout_flags(layout_flags)
    check_recipe_flags(recipe_flags)
    load_cluster(cluster)       # an unknown --cluster is named before the flags the log leaves to give
    from ..files import output_dir
    if plot:
        from ..plots import require_matplotlib
        require_matplotlib()
        output_dir(plot, "--plot", "compare", files=_PLOTS[:4 if power else 2])
    if trace:       # after --plot made its folder: the README writes the trace into it
        _check_trace_path(trace, plot)
    tlog = _read_log(log, warmup_steps, rank)
    _refuse_untimed(tlog, log)
    warnings = list(tlog.errors) + list(tlog.warnings)
    sc = dict(uneven_pp=True)
    if config:
        sc = dict(gbs=gbs, seq_len=seq_len, precision=precision, nodes=nodes, uneven_pp=True)
        warnings += _config_under_log(config, tlog, layout_flags, recipe_flags, sc)
        gbs, seq_len, precision, nodes = sc["gbs"], sc["seq_len"], sc["precision"], sc["nodes"]
    _check_stack(stack, tlog, allow_override, warnings)
    flags = dict(layout_flags, gbs=gbs, seq_len=seq_len, precision=precision)
    if gbs is None and sc.get("local_batch_size") and tlog.layout().get("gbs") is None:
        flags["gbs"] = _gbs_from_local(sc["local_batch_size"], tlog.layout(), flags, cluster, nodes, stack or tlog.framework)
        sc.setdefault("config_where", {})["gbs"] = f"{config}: training.local_batch_size x DP"
    run, m, c = _resolve(tlog, log, model, cluster, nodes, flags, allow_override, warnings, stack)
    if m.is_moe and not str(run.origin.get("ep", "")).startswith(("log", "flag", "--config")):
        # an MoE run's EP sets its expert memory and dispatch: never a default (a partial dump says
        # nothing of the keys it does not show)
        raise InputError("--ep", "", f"the log ({log}) does not say: no expert_model_parallel_size in its argument "
                         f"dump or start-up lines, and {m.name} is an MoE model: pass it")
    if config:
        from ..run_config import check_model_dims, read_run_config
        check_model_dims(read_run_config(config), m)
    m = _own_pipeline_layout(tlog, run, m, sc, warnings)
    recipe = _recipe_of_log(tlog, run, c, recipe_flags, stack, m, allow_override, warnings, log)
    # what the configuration filled reaches the recipe as a flag would: say where it came from
    run.origin.update({k: f"--config {w}" for k, w in sc.get("config_where", {}).items() if k in run.origin})
    p = cluster_profile(c, profile)
    check_profile_gpu(p, c)
    try:
        check_layout(LayoutTable.from_rows([run.layout]), m, recipe, c.num_gpus, c.scale_up_gpus, uneven_pp=sc["uneven_pp"])
        check_pipeline_accounting(sc.get("split_without_embedding"), m, dict(run.layout, vp=run.layout["vp"] or 1))
    except InputError as e:     # name where each degree came from: the log, a flag or a default
        said = ", ".join(f"{k.upper()} {run.layout[k]} ({_origin_words(run.origin.get(k))})"
                         for k in ("tp", "pp", "vp", "dp", "cp", "ep") if k in run.layout)
        raise InputError(e.where, e.field, f"{e.message}; the layout of {log}: {said}") from None
    pred = predict_run(m, recipe, c, p, run.layout)
    rec = report.run_record(pred)
    if pred.energy_missing and power:
        warnings.append(f"no power/thermal prediction (missing: {', '.join(pred.energy_missing)}): "
                        "power metrics are measured only")
    agg = _aggregate(tlog, recipe, log, warnings, run.origin, c.num_gpus)
    pw, gpu_rows, window, ptrace = (_power_capture(power, c, allow_override, agg, tlog, rec.get("per_gpu"), warnings)
                                    if power else (None, [], None, None))
    stamps = tlog.iterations.t_unix[tlog.kept]
    stamps = stamps[np.isfinite(stamps)]
    metrics = build_metrics(pred, agg, tlog.framework, pw, float(stamps[0]) if len(stamps) else None)
    check_measured_rate(m, recipe, c, metrics, log, bool(model), run.origin)
    warnings += logged_flops_check(metrics, tlog.framework, pred.layout["recompute"], run.origin)
    warnings += logged_memory_check(metrics)
    used = int(agg["step_time_s"].n or agg["tokens_per_s_per_gpu"].n)
    warnings += unreadable_note(tlog, log, used)
    if not pred.feasible:
        warnings.append(_infeasible_note(pred, run.origin, m.is_moe))
    out = dict(metrics=metrics, feasible=rec["feasible"], peak_mem_bytes=rec["peak_mem_bytes"],
               hbm_capacity_bytes=rec["hbm_capacity_bytes"], **({"reason": rec["reason"]} if "reason" in rec else {}),
               layout=rec["layout"], warmup_steps_discarded=int((~tlog.kept).sum()),
               records_unreadable=int(tlog.unreadable_records),
               # the kept records that measured the step (one whose time is unreadable is kept, not used)
               iterations_used=used, framework=tlog.framework,
               log=log, power=power,
               model=m.name, cluster=c.key, num_gpus=c.num_gpus,
               recipe=dict(gbs=recipe.gbs, seq_len=recipe.seq_len, precision=recipe.precision, stack=recipe.stack,
                           **switch_values(recipe)),
               origin=run.origin, breakdown=rec["breakdown"], per_gpu=gpu_rows, warnings=warnings,
               # the band as predict --json names it (its seconds on the step under the power limit)
               **{k: rec[k] for k in ("step_time_band", "step_time_band_s") if k in rec},
               measured_step_time_s=agg["step_time_s"].as_dict() if agg["step_time_s"].n else None, profile=p.path,
               # the breakdown sums to the uncapped step; the power limit (or a derate) makes the predicted one
               **{k: rec[k] for k in ("uncapped_step_time_s", "sm_clock_mhz") if rec.get(k) is not None},
               power_limit_line=report.power_limit_line(rec, c.gpu.full_clock_mhz))
    if trace and Path(trace).is_file():
        out["warnings"].append(f"--trace: {trace} existed and was overwritten")
    if as_json:
        out["files"] = list(_write_files(pred, rec, metrics, ptrace, window, trace, plot))
        print(report.json_text(out))
        return
    _print(out, rec, tlog, pred.band)       # before the files: a write that fails loses none of the report
    for fpath in _write_files(pred, rec, metrics, ptrace, window, trace, plot):
        report.console().print(f"wrote {fpath}", highlight=False)


def _origin_words(origin) -> str:
    """A layout value's origin as a reader says it: "flag" is the flag, "log: X" the log's X."""
    o = str(origin or "default")
    return "flag" if o == "flag" else "the log" if o == "log" else o.replace("log: ", "the log's ", 1)


def _infeasible_note(pred, origin: dict, moe: bool) -> str:
    """The warning of a logged run the model predicts cannot run (out of memory, a GPU past its shutdown
    temperature): the run ran, so a setting the log does not print differs from the one assumed."""
    keys = ("recompute", "recompute_num_layers", "zero", "mbs", "sp") + (("ep", "etp") if moe else ())
    guessed = [f"{k} ({v})" for k, v in origin.items() if k in keys and not str(v).startswith(("log", "flag"))]
    hint = f"; settings not from the log: {', '.join(guessed)}: pass the ones the run used" if guessed else ""
    return f"the predicted layout does not fit this run ({pred.reason}), yet the logged run ran{hint}"


def _config_under_log(path, tlog, layout_flags, recipe_flags, scalars) -> list:
    """Fill from a run configuration (costmodel.run_config) what neither the log's argument dump nor the
    flags give, in place; returns a warning naming what it filled.

    Raises:
        InputError: a configuration of another framework than the log's, a configuration value that
            contradicts the log (both named), or a flag that contradicts the configuration.
    """
    from ..run_config import read_run_config
    from .common import STACKS_OF_FILE
    cfg = read_run_config(path)
    if tlog.framework not in STACKS_OF_FILE[cfg.stack]:
        raise InputError("--config", "", f"{path} is a {cfg.kind} (run by {' or '.join(STACKS_OF_FILE[cfg.stack])}); the "
                         f"log {tlog.path} is a {tlog.framework} run's: give that run's own configuration")
    ll = tlog.layout()
    filled = []
    for name, v in {**cfg.layout, **cfg.recipe}.items():
        target = layout_flags if name in cfg.layout else (scalars if name in scalars else recipe_flags)
        if name not in target:
            continue
        lv = ll.get(name)
        if lv is not None and lv != v:
            raise InputError(path, cfg.where.get(name, name).split(": ", 1)[-1],
                             f"{v!r} contradicts the log ({tlog.path}: {name} = {lv!r})")
        if target.get(name) is not None and target[name] != v:
            raise InputError("--" + name.replace("_", "-"), "", f"{target[name]!r} contradicts {cfg.where.get(name, path)} "
                             f"({v!r})")
        if lv is None and target.get(name) is None:
            target[name] = v
            filled.append(f"{name}={v}")
            scalars.setdefault("config_where", {})[name] = cfg.where.get(name, str(path))
    if cfg.nodes is not None and scalars.get("nodes") not in (None, cfg.nodes):
        raise InputError("--nodes", "", f"{scalars['nodes']} contradicts {path} ({cfg.nodes} nodes: trainer.num_nodes): "
                         "drop the flag or give the run's own configuration")
    if cfg.nodes is not None and scalars.get("nodes") is None:
        scalars["nodes"] = cfg.nodes
        filled.append(f"nodes={cfg.nodes}")
    scalars["uneven_pp"] = "any" if cfg.custom_pipeline_split else True
    if cfg.split_without_embedding and not cfg.custom_pipeline_split:
        scalars["split_without_embedding"] = cfg.split_without_embedding
    if cfg.pipeline_layout is not None:
        scalars["pp_layout"] = (cfg.pipeline_layout, cfg.where["pipeline_layout"])
    scalars["stage_split"] = cfg.stage_split
    if "local_batch_size" in cfg.recipe:                 # torchtitan: x DP once the world is known
        scalars["local_batch_size"] = cfg.recipe["local_batch_size"]
    return ([f"--config {path}: {', '.join(filled)} (what the log does not say)"] if filled else []) + cfg.notes


def _gbs_from_local(local: int, ll: dict, flags: dict, cluster: str, nodes, stack: str) -> int:
    """torchtitan's global batch: its configuration's local batch x DP, DP = world / (TP x PP x CP).

    Raises:
        InputError: the world is unknown (no --nodes, no world size in the log) or TP x PP x CP does
            not divide it.
    """
    own = STACK_DEFAULTS.get(stack, {})
    deg = {k: flags.get(k) or ll.get(k) or own.get(k) or 1 for k in ("tp", "pp", "cp")}
    world = ll.get("world_size") or (load_cluster(cluster, nodes).num_gpus if nodes else None)
    if not world:
        raise InputError("--nodes", "", "the configuration gives a local batch; the global batch is it x DP, and the "
                         "log prints no world size: pass --nodes (or --gbs)")
    mp = deg["tp"] * deg["pp"] * deg["cp"]
    if world % mp:
        raise InputError("--config", "", f"TP x PP x CP = {mp} does not divide the world of {world} GPUs")
    return int(local * (world // mp))



def _check_trace_path(trace: str, plot: str | None) -> None:
    """Refuse a --trace path that is --plot's folder or a file not named .json (a pipe or device takes it).

    Raises:
        InputError: naming --trace.
    """
    from ..files import check_output
    if plot and Path(trace).resolve() == Path(plot).resolve():
        raise InputError("--trace", "", f"{trace} is the --plot folder: name the trace file in it "
                         f"({Path(plot) / 'trace.json'})")
    check_output(trace, "--trace", stream=True)      # first: a path that is an input says so
    tp = Path(trace)
    # a pipe or device (/dev/stdout) takes the text whatever its name; a file is named for what it holds
    if tp.suffix.lower() != ".json" and not (tp.exists() and not tp.is_file()):
        kind = "an image" if tp.suffix.lower() in (".png", ".svg", ".pdf", ".jpg", ".jpeg") else f"'{tp.suffix or 'no suffix'}'"
        raise InputError("--trace", "", f"{trace}: the trace is Perfetto/Chrome JSON, not {kind}: name it .json")

def _resolve(tlog, log, model, cluster, nodes, flags, allow_override, warnings, stack=None):
    """The run's layout and recipe fields (log + flags), its model and its cluster sized by the
    log's world size; DP derived when neither says.  Returns (Resolved, ModelSpec, ClusterSpec)."""
    ll, sources = tlog.layout(), tlog.layout_sources()
    if allow_override:
        for k, v in flags.items():
            if v is not None and ll.get(k) is not None and ll[k] != v:
                warnings.append(f"--{k.replace('_', '-')} {v!r} overrides the log's {sources.get(k, 'argument dump')} "
                                f"({k} = {ll[k]!r})")
                ll[k] = None
    # a bound on the batch from the consumed-sample counts, where no override says the run resumed otherwise
    ll["gbs_floor"] = None if allow_override else tlog.gbs_floor()
    _ask_once(ll, flags, model, nodes, stack or tlog.framework, log, tlog.args)
    run = resolve_run(ll, flags, log, stack or tlog.framework, sources)
    if model:
        m = load_model(model)
        check_model(m, ll, model, log, tlog.args)
    else:
        m = model_from_log(ll, tlog.args, log)
        ffn = (f"{m.num_experts} experts (top {m.topk}) of FFN {m.ffn_hidden}" + (
            f" in {m.moe_layers} layers, {m.num_dense_layers} dense of FFN {m.dense_mlp_width}" if m.num_dense_layers
            else "") + (f", shared FFN {m.shared_ffn_hidden}" if m.shared_ffn_hidden else "")
            if m.is_moe else f"FFN {m.ffn_hidden}")
        warnings.append(f"model from the log's argument dump: {m.num_layers} layers, hidden {m.hidden}, {m.num_heads} "
                        f"heads ({'MLA' if m.is_mla else f'{m.num_kv_heads} KV'}), {ffn} {m.activation}, vocab "
                        f"{m.vocab}, {m.params() / 1e9:.2f}B parameters"
                        + (f" ({m.params(active=True) / 1e9:.2f}B active)" if m.is_moe else "")
                        + dump_defaults_note(m, tlog.args))
    c0 = load_cluster(cluster)
    lay = run.layout
    if not m.is_moe and lay.get("etp") is not None and run.origin.get("etp") == "log":
        # Megatron prints expert_tensor_parallel_size for every run; a dense model has no experts to split
        lay["etp"], run.origin["etp"] = None, "log's expert_tensor_parallel_size unused (a dense model)"
    if nodes is None and not run.world_size and lay["dp"] is not None:     # TP x PP x DP x CP is the world
        run.world_size = lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"]
    if nodes is None and run.world_size:
        if run.world_size % c0.gpus_per_node:
            raise InputError("--cluster", "", f"the run's world size {run.world_size} ({log}) is not a multiple of the "
                             f"{c0.gpus_per_node} GPUs per node of {c0.key}")
        nodes = run.world_size // c0.gpus_per_node
    c = load_cluster(cluster, nodes)
    if run.world_size and run.world_size != c.num_gpus:
        raise InputError("--nodes", "", f"{c.num_gpus} GPUs, but the log's world size is {run.world_size} ({log})")
    lay = run.layout
    if lay["dp"] is None:
        if c.num_gpus % (lay["tp"] * lay["pp"] * lay["cp"]):
            said = ", ".join(f"{k.upper()} {lay[k]} ({_origin_words(run.origin.get(k))})" for k in ("tp", "pp", "cp"))
            raise InputError("--tp/--pp/--cp", "", f"{said}: TP x PP x CP does not divide the {c.num_gpus} GPUs "
                             f"({log})")
        lay["dp"] = c.num_gpus // (lay["tp"] * lay["pp"] * lay["cp"])
        run.origin["dp"] = "GPUs / (TP x PP x CP)"
    world = lay["tp"] * lay["pp"] * lay["dp"] * lay["cp"]
    if world != c.num_gpus:
        # an override changed one degree but the log's others stand: name where each came from
        said = ", ".join(f"{k.upper()} {lay[k]} ({_origin_words(run.origin.get(k))})" for k in ("tp", "pp", "dp", "cp"))
        raise InputError("--tp/--pp/--dp/--cp", "", f"{said}: their product {world} is not the {c.num_gpus} GPUs; "
                         "pass the degrees that change with the one overridden")
    if m.is_moe and lay["tp"] > 1 and not lay["sp"] and run.origin.get("sp") == "Megatron default":
        # a run of MoE with TP > 1 had SP: Megatron-LM's validate_args asserted it until 2024-05, and
        # Megatron-core's MoELayer.forward raises in training without it since (moe/moe_layer.py)
        lay["sp"] = True
        run.origin["sp"] = "Megatron requires it for MoE with TP > 1"
    if lay.get("etp") is None:
        grid = lay["tp"] * lay["dp"] * lay["cp"]
        if lay["ep"] > 1 and grid % (lay["ep"] * lay["tp"]) and grid % lay["ep"] == 0:
            # Megatron-core's MoE parallel folding: EP x ETP ranks span TP x DP x CP; EP x TP does not
            # fit, so the experts ran unsplit (ETP 1, the only value that makes the dump's EP valid)
            lay["etp"] = 1
            run.origin["etp"] = (f"assumed ETP 1: EP {lay['ep']} x TP {lay['tp']} exceeds TP x DP x CP = {grid}, "
                                 f"so EP {lay['ep']} x ETP 1 spans it (MoE parallel folding)")
            if lay["dp"] % lay["ep"]:
                # before MoE parallel folding (Megatron-core 0.10, which added expert_tensor_parallel_size)
                # EP was carved out of DP: parallel_state.initialize_model_parallel raised "data_parallel_size
                # is not divisible by expert_model_parallel_size" (2023-10 to 2024-11)
                run.origin["etp"] += (f"; a Megatron-core without expert_tensor_parallel_size (before MoE parallel "
                                      f"folding, core 0.10) refuses EP {lay['ep']} with DP {lay['dp']} (EP must divide "
                                      "DP): the dump's EP and the logged layout may come from different runs")
                warnings.append(f"the log's EP {lay['ep']} and its DP {lay['dp']} cannot be one run of a Megatron-core "
                                "before MoE parallel folding (EP must divide DP): its dump, its layout line and its "
                                "iterations may come from different runs, and the comparison may not be of one run")
        else:
            name = stack or tlog.framework
            lay["etp"] = stack_default_etp(name, lay["tp"], lay["ep"]) if m.is_moe else lay["tp"]
            run.origin["etp"] = ("Megatron default (the layout's TP)" if get_stack(name).megatron_family
                                 else "the layout's TP (no expert layers to split)" if not m.is_moe
                                 else f"{name}: the experts run whole under EP" if lay["etp"] == 1 < lay["tp"]
                                 else f"{name}: the experts split over the layout's TP")
    return run, m, c


def _own_pipeline_layout(tlog, run, m, sc: dict, warnings: list):
    """The model with the run's own pipeline split where the log's argument dump (or the --config file)
    gives a Megatron-core ``pipeline_model_parallel_layout``: parsed against the logged PP, VP and the
    model (costmodel.pipeline_layout), priced by its fullest rank; PP x VP may then leave the layers
    uneven (``sc["uneven_pp"]`` "any").  The model unchanged otherwise; a Megatron dump that sets no
    split then needs PP x VP to divide its layers (``sc["uneven_pp"]`` False: Megatron asserts it).

    Raises:
        InputError: a layout Megatron-core would refuse, naming the log's key or the file's.
    """
    text = tlog.args.get("pipeline_model_parallel_layout")
    where = f"{tlog.path}: pipeline_model_parallel_layout"
    if not isinstance(text, str) or text.strip() in ("", "None"):
        text, where = sc.get("pp_layout") or (None, None)
    spec = sc.get("stage_split")
    if text is None and spec and run.layout["pp"] > 1:      # a torchtitan file's own split
        where = spec["where"]
        text = stage_layout_text(spec, m.num_layers, run.layout["pp"], run.layout["vp"] or 1, m.mtp_layers)
    if text is None:
        text, where = _uneven_stages_layout(tlog, run, m)
    if text is None:
        text, where = _accounted_layout(tlog, run, m)
    if text is None:
        if tlog.framework in ("megatron", "nemo") and "num_layers" in tlog.args:
            sc["uneven_pp"] = False     # no key sets the split: Megatron asserts PP divides the layers
            if all(tlog.args.get(k) is False for k in PIPELINE_ACCOUNTING_KEYS):
                sc.setdefault("split_without_embedding", f"{tlog.path}: " + " and ".join(
                    f"{k} False" for k in PIPELINE_ACCOUNTING_KEYS))
        return m
    m, placed = with_pipeline_layout(m, text, run.layout["pp"], run.layout["vp"] or 1, where=where)
    sc["uneven_pp"] = "any"
    warnings.append(f"pipeline split {placed.describe()} transformer layers per pipeline rank, as {where} places them")
    return m


def _uneven_stages_layout(tlog, run, m) -> tuple:
    """(layout text, where) for a dump's ``decoder_first_pipeline_num_layers`` /
    ``decoder_last_pipeline_num_layers`` (Megatron-LM's uneven pipeline: the first and last stages hold
    what they say, the other stages share the rest evenly), written as the equivalent
    ``pipeline_model_parallel_layout``, the MTP modules on the last stage; (None, None) where the dump gives
    neither.

    Raises:
        InputError: naming the key, where Megatron-LM refuses the split (the rest does not divide over
            the middle stages, or counts beyond the layers) or with VP > 1 (not modelled).
    """
    first, last = (tlog.args.get(f"decoder_{k}_pipeline_num_layers") for k in ("first", "last"))
    if first is None and last is None:
        return None, None
    key = "decoder_first_pipeline_num_layers" if first is not None else "decoder_last_pipeline_num_layers"
    where = f"{tlog.path}: {key}"
    pp, vp, L = run.layout["pp"], run.layout["vp"] or 1, m.num_layers
    if vp > 1:
        raise InputError(tlog.path, key, "with a virtual pipeline (VP > 1) is not modelled: give the run's "
                         "--pp-layout instead")
    for k, v in (("first", first), ("last", last)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise InputError(tlog.path, f"decoder_{k}_pipeline_num_layers", f"{v!r} is not a whole number of layers")
    middle_stages = pp - (first is not None) - (last is not None)
    rest = L - (first or 0) - (last or 0)
    if pp < 2 or rest < 0 or (middle_stages and rest % middle_stages) or (not middle_stages and rest):
        raise InputError(tlog.path, key, f"first {first}, last {last} of {L} layers over PP {pp}: the rest does not "
                         "split evenly over the other stages (Megatron-LM refuses it)")
    mid = rest // middle_stages if middle_stages else 0
    counts = [first if first is not None else mid] + [mid] * (pp - 2) + [last if last is not None else mid]
    stages = ["t" * n for n in counts]
    # without a layout Megatron-core builds the MTP modules on the last stage, before the loss
    # (megatron/core/transformer/multi_token_prediction.py, mtp_on_this_rank)
    stages[0], stages[-1] = "E" + stages[0], stages[-1] + "m" * m.mtp_layers + "L"
    return "|".join(stages), where


def _accounted_layout(tlog, run, m) -> tuple:
    """(layout text, where) of a dump whose ``account_for_embedding_in_pipeline_split`` /
    ``account_for_loss_in_pipeline_split`` count the embedding and the loss as layers (Megatron-LM
    arguments.py adds one to num_layers for each): PP x VP chunks of (L + those) / (PP VP) layers, the first
    chunk one transformer layer short for the embedding, the last for the loss (the MTP modules there too);
    (None, None) where neither is set.

    Raises:
        InputError: the counted layers do not divide over PP x VP (Megatron-LM asserts it), naming the key."""
    e, loss = (tlog.args.get(k) is True for k in PIPELINE_ACCOUNTING_KEYS)
    if not (e or loss) or run.layout["pp"] < 2:
        return None, None
    key = PIPELINE_ACCOUNTING_KEYS[0 if e else 1]
    n = run.layout["pp"] * (run.layout["vp"] or 1)
    total = m.num_layers + e + loss
    if total % n:
        raise InputError(tlog.path, key, f"{m.num_layers} layers with the embedding and loss counted ({total}) do not "
                         f"divide over PP x VP = {n} chunks (Megatron-LM asserts it)")
    per = total // n
    segs = ["t" * per for _ in range(n)]
    segs[0] = "E" + "t" * (per - e)
    segs[-1] = "t" * (per - loss) + "m" * m.mtp_layers + "L"
    return "|".join(segs), f"{tlog.path}: {key}"


def _check_stack(stack_name, tlog, allow_override: bool, warnings: list) -> None:
    """A ``--stack`` the log's framework cannot have run is refused (unless ``allow_override``): a
    Megatron-family log runs on a Megatron-family stack (megatron, megatron-legacy, nemo,
    megatron-deepspeed), any other log on its own framework's stack.

    Raises:
        InputError: naming --stack, the log and its framework.
    """
    if not stack_name or stack_name == tlog.framework:
        return
    want, have = get_stack(stack_name), get_stack(tlog.framework)
    # a Megatron-LM log does not say which generation or launcher ran it (Megatron-core, 2021-22
    # Megatron-LM, NeMo): another of the family is the user's to say; DeepSpeed's own lines are not
    if want.megatron_family and have.megatron_family and "megatron-deepspeed" not in (stack_name, tlog.framework):
        warnings.append(f"--stack {stack_name}: the log's lines are a {tlog.framework} run's; priced with "
                        f"{stack_name}'s defaults (fusions, overlaps, recompute vocabulary), as the flag says")
        return
    if not allow_override:
        raise InputError("--stack", "", f"{stack_name!r} contradicts the log ({tlog.path} is a {tlog.framework} log); "
                         "drop the flag, or pass --allow-override to let it win")
    warnings.append(f"--stack {stack_name} overrides the log's framework ({tlog.framework})")


def _recipe(tlog, run, c, flags: dict, stack_name, model, allow_override: bool, warnings: list) -> Recipe:
    """The recipe the log ran: precision (the GPU's 16-bit type by default); each recipe switch from
    its flag, else from the log (costmodel.logged_recipe: the argument dump and the MoE loss
    records), else the defaults of the run's stack (``--stack``, else the log's framework;
    costmodel/stacks.py).  The origin of the DP and send overlaps, of an fp8 run's scaling recipe, and
    for an MoE model of each MoE switch, goes into ``run.origin``.

    Raises:
        InputError: a flag that contradicts the log (unless ``allow_override``: then a warning), or a
            value from the log the model refuses (naming the log file and its field).
    """
    stack = get_stack(stack_name or tlog.framework)
    prec = run.precision or ("bf16" if "bf16" in c.gpu.peak_flops else "fp16")
    if run.precision is None:
        run.origin["precision"] = f"not in the log: {prec} assumed (the GPU's 16-bit type; pass --precision)"
    logged, where, notes = logged_switches(tlog, model.is_moe, model.num_experts)
    warnings += [f"{tlog.path}: {n}" for n in notes]
    given = {k: v for k, v in flags.items() if v is not None}
    for k, v in given.items():
        # a logged number is as precise as the log prints it
        close = isinstance(v, float) and isinstance(logged.get(k), float) and math.isclose(v, logged[k], rel_tol=1e-3)
        if k == "moe_expert_load_cv" and k in logged and v >= logged[k]:
            # the log's sqrt(L - 1) bounds the spread from below: a larger measured one agrees with it
            warnings.append(f"--moe-expert-load-cv {v:g} is at or above the log's lower bound {logged[k]:.3g} "
                            f"({where[k]}): the flag's value used")
            continue
        if k in logged and differs(v, logged[k]) and not close:
            sw = SWITCHES_BY_NAME.get(k)
            flag = sw.flag_for(v) if sw else "--" + k.replace("_", "-")
            said = "" if isinstance(v, bool) else f"{v!r} "      # a switch as typed says its value
            if not allow_override:
                raise InputError(flag, "", f"{said}contradicts the log ({tlog.path}: {where[k]}); drop the flag, "
                                 "or pass --allow-override to let it win")
            warnings.append(f"{flag} {said}overrides the log ({where[k]})")
    # every switch the prediction reads, each with its origin (the fp8 recipe with fp8 only, the MoE ones
    # for an MoE model; the attention kernel below)
    for k in (w.name for w in RECIPE_SWITCHES):
        if (k == "fp8_recipe" and prec != "fp8") or (k in MOE_SWITCHES and not model.is_moe) or k == "attention_kernel":
            continue
        run.origin[k] = ("flag" if k in given else f"log: {where[k]}" if k in logged
                         else f"{stack.name} default" + (" (uniform routing)" if k == "moe_expert_load_cv" else ""))
    try:
        recipe = stack_recipe(stack, run.gbs, run.seq_len, prec, gpu=c.gpu, **{**logged, **given})
    except InputError as e:
        k = next((k for k in logged if "--" + k.replace("_", "-") == e.where and k not in given), None)
        if k is None:
            raise
        raise InputError(tlog.path, dump_key(k, tlog.args), f"{logged[k]!r}: {e.message}") from None
    check_moe_recipe(model, recipe, c.gpu, given)
    check_flex_fabric(model, recipe, c)
    # the attention kernel priced, and whence: a stack's default differs by GPU (costmodel.stacks)
    kernel = recipe.attention_kernel if recipe.flash_attention else "unfused"
    src = next((k for k in ("attention_kernel", "flash_attention") if k in logged), None)
    run.origin["attention_kernel"] = ("flag" if {"attention_kernel", "flash_attention"} & set(given)
                                      else f"log: {where[src]}" if src else f"{stack.name} default: {kernel}")
    return recipe


def _power_capture(power, c, allow_override: bool, agg: dict, tlog, per_gpu, warnings: list) -> tuple:
    """(power metrics, per-GPU rows, (t0, t1) window, the trace) of the ``--power`` capture over the kept
    iterations' window (costmodel.trace_window), its notes added to ``warnings``.

    Raises:
        InputError: a capture whose GPU indices a node of ``c`` does not have (naming --power).
    """
    ptrace, tw = _read_trace(power, c.gpus_per_node)
    warnings += tw + capture_gpu_check(ptrace, c, allow_override) + trace_limit_note(ptrace, c)
    st = agg["step_time_s"].median if agg["step_time_s"].n else float("nan")
    kept_t = tlog.iterations.t_unix[tlog.kept]
    t0, t1, how = training_window(kept_t, st, ptrace.t_unix, ptrace.absolute_time, ptrace.util_gpu_pct,
                                  tlog.iterations.iteration[tlog.kept])
    pw, rows = trace_metrics(ptrace, t0, t1, st)
    if pw["gpus"] and max(pw["gpus"]) >= c.gpus_per_node:
        raise InputError("--power", "", f"the capture holds GPU indices up to {max(pw['gpus'])}, but a {c.key} node "
                         f"has {c.gpus_per_node} GPUs (indices 0..{c.gpus_per_node - 1}): a capture of another "
                         "machine, or of several nodes without a host column")
    warnings.append(f"power samples aligned by {how}: {pw['n_samples']} samples of {pw['n_gpus']} GPUs "
                    f"over {t1 - t0:.0f} s")
    if pw["pauses"]:
        ps = pw["pauses"]
        warnings.append(f"{ps['share']:.0%} of those samples fall in {ps['n']} pause(s) between iterations ({ps['seconds']:.0f} s "
                        f"with a GPU idle for {PAUSE_MIN_STEPS:g} steps or more: a checkpoint write or an evaluation, which "
                        f"the log's step times leave out): the measured power leaves them out too (with them "
                        f"{ps['avg_power_w']:.0f} W)")
    warnings += throttle_warnings(rows) + trace_coverage_notes(pw["n_gpus"], t1 - t0, st, c)
    return pw, per_gpu_rows(rows, per_gpu), (t0, t1), ptrace


def _aggregate(tlog, recipe, log, warnings, origin: dict | None = None, num_gpus: int = 0) -> dict:
    """Median and spread of the kept iterations that ran the recipe's global batch size; the records'
    wall clock against their steps (``num_gpus`` times the step of a log printing tokens/s per GPU).

    Raises:
        InputError: no kept iteration at that batch size, or no step time nor tokens/s logged.
    """
    gb = tlog.iterations.global_batch_size
    other = tlog.kept & (gb == gb) & (gb != recipe.gbs)
    if other.any():
        tlog.kept = tlog.kept & ~other
        warnings.append(f"{int(other.sum())} iteration(s) otherwise kept ran another global batch size than {recipe.gbs} "
                        f"(batch-size ramp-up?), lines {', '.join(map(str, tlog.iterations.line[other][:5]))}: "
                        "left out")
        if not tlog.kept.any():
            src = (origin or {}).get("gbs", "flag")
            ran = ", ".join(str(int(x)) for x in sorted(set(gb[gb == gb].tolist())))
            where = (("--gbs", "") if src == "flag" else
                     (log, src[5:] if src.startswith("log: ") else "global_batch_size"))
            raise InputError(*where, f"{recipe.gbs} ({src}), but every logged iteration ran another global batch size "
                             f"({ran}): the dump and the iterations may come from different runs")
    if not tlog.kept.any():
        n = len(tlog.kept)
        raise InputError("--warmup-steps", "", f"discards all {n} logged iteration(s) of {log} as warm-up: keep "
                         f"some (fewer than {n})")
    agg = tlog.aggregate()
    if not agg["step_time_s"].n and not agg["tokens_per_s_per_gpu"].n:
        bad = [e for e in tlog.errors if "is not a positive finite value" in e or "beyond any training step" in e]
        if bad:       # printed, but not a time: name the first such value
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise InputError(log, "", f"no usable step time or tokens/s: {_local(bad[0], log)}{more}")
        raise InputError(log, "", f"the {tlog.framework} log prints no step time nor tokens/s in its kept iterations "
                         "(NeMo: enable log_step_timing; torchtitan: tps; llm-foundry: the speed_monitor callback)")
    # a log printing tokens/s per GPU (torchtitan) times its step as gbs x seq_len / (tokens/s x GPUs)
    its, gpus = tlog.iterations, num_gpus
    steps = np.where(np.isfinite(its.step_time_s), its.step_time_s,
                     recipe.gbs * recipe.seq_len / (its.tokens_per_s_per_gpu * gpus) if gpus else np.nan)
    clock = wall_clock_note(its.iteration[tlog.kept], its.t_unix[tlog.kept], steps[tlog.kept])
    if clock:
        warnings.append(f"{log}: {clock}")
    return agg


#: the files compare --plot writes into its folder: the last two with --power only
_PLOTS = ("metrics.png", "breakdown.png", "power.png", "temperature.png")


def _write_files(pred, rec, metrics, ptrace, window, trace, plot):
    """The Perfetto trace and the PNG plots asked for (:data:`_PLOTS`): yields each path once written."""
    if trace:
        from ..trace import write_trace
        write_trace(trace, pred.model, pred.recipe, pred.cluster, pred.profile, pred.terms, 0)
        yield trace
    if plot:
        from .. import plots
        d = Path(plot)
        yield plots.metric_bars(metrics, d / _PLOTS[0])
        yield plots.breakdown_bar(rec["breakdown"], d / _PLOTS[1], report._TERM_NAMES)
        if ptrace is not None:
            yield plots.power_timeline(ptrace, window, {"predicted avg": rec.get("avg_power_w"),
                                                        "predicted peak": rec.get("peak_power_w")},
                                       d / _PLOTS[2], "power_w")
            if ptrace.temp_c is not None and (ptrace.temp_c == ptrace.temp_c).any():
                yield plots.power_timeline(ptrace, window, {"predicted max": rec.get("max_temp_c")},
                                           d / _PLOTS[3], "temp_c")


def _fmt(v, unit):
    if v is None:
        return "-"
    if unit == "fraction":
        return f"{100 * v:.1f}%"
    if abs(v) < 1e3:                # four significant digits kept: a 1 s step reads 1.000 beside 12.12
        return f"{v:#.4g}".rstrip(".")
    return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"


def _print(out, rec, tlog, band):
    con = report.console()
    lay = out["layout"]
    con.print(f"{tlog.framework} log {out['log']}: {_records_text(tlog, out)} ({tlog.warmup})", highlight=False)
    rc = out["recipe"]
    con.print(f"{out['model']} on {out['cluster']} ({out['num_gpus']} GPUs): "
              + " ".join(f"{k}={v}" for k, v in lay.items())
              + f" gbs={rc['gbs']} seq_len={rc['seq_len']} precision={rc['precision']}", highlight=False)
    given = ", ".join(f"{k} ({v})" for k, v in out["origin"].items() if not v.startswith("log"))
    derived = ", ".join(f"{k} ({v[5:]})" for k, v in out["origin"].items() if v.startswith("log: "))
    if derived:
        con.print(f"  derived from the log: {derived}", highlight=False)
    if given:
        con.print(f"  not from the log: {given}", highlight=False)
    tb = Table(title="Measured vs predicted", header_style="bold")
    for col in ("metric", "measured", "predicted", "error"):
        tb.add_column(col, justify="left" if col == "metric" else "right")
    for mt in out["metrics"]:
        pred = _fmt(mt["predicted"], mt["unit"])
        if mt.get("predicted_band") is not None:
            pred += f" ± {_fmt(mt['predicted_band'], mt['unit'])}"
        err = (f"{mt['error_abs']:+.1f} {mt['unit']}" if mt.get("error_abs") is not None
               else "-" if mt["error_pct"] is None else f"{mt['error_pct']:+.1f}%")
        tb.add_row(f"{mt['name']} [{mt['unit']}]", _fmt(mt["measured"], mt["unit"]), pred, err)
    con.print(tb)
    if out["measured_step_time_s"]:
        s = out["measured_step_time_s"]
        con.print(f"measured step time: median {s['median']:.4g} s, IQR {s['iqr']:.3g} s, range {s['min']:.4g}"
                  f"-{s['max']:.4g} s over {s['n']} record{'s' if s['n'] != 1 else ''}", highlight=False)
    if band.sigma:
        con.print(f"± is one sigma: the fit residuals of {out['profile']} and the model's error on published "
                  f"runs of its regime ({band.model_form_key}, {100 * band.model_form_rel:.0f}%)"
                  + (f" (no fit data: {', '.join(band.unfitted)})" if band.unfitted else ""), highlight=False)
    con.print(report.breakdown_table(rec, "Predicted step time breakdown (uncapped)"))
    if out.get("power_limit_line"):
        con.print(out["power_limit_line"], highlight=False)
    if out["per_gpu"]:
        tg = Table(title="Per GPU (hottest first), measured | predicted for the same slot of node 0", header_style="bold")
        for col in ("GPU", "stage", "avg W", "pred avg W", "peak W", "pred peak W", "max C", "pred C", "SM MHz",
                    "pred MHz"):
            tg.add_column(col, justify="right")
        f = lambda v: "-" if v is None or v != v else f"{v:.0f}"  # noqa: E731
        for r in out["per_gpu"]:
            tg.add_row(str(r["gpu"]), "-" if r["stage"] is None else str(r["stage"]), f(r["avg_power_w"]),
                       f(r["predicted_avg_power_w"]), f(r["peak_power_w"]), f(r["predicted_peak_power_w"]),
                       f(r["max_temp_c"]), f(r["predicted_temp_c"]), f(r["sm_clock_mhz"]), f(r["predicted_sm_clock_mhz"]))
        con.print(tg)
    for w in out["warnings"]:
        con.print(f"[yellow]note:[/] {w}", highlight=False)
