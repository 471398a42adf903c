"""``costmodel predict``: one layout, its full breakdown, power, temperature and energy."""
from __future__ import annotations

import dataclasses
import re
import sys
from typing import List, Optional

import typer

from .. import report
from ..errors import InputError
from ..formats import gemm_format
from ..launch import launch_settings
from ..layout_fields import FIELD_SPECS
from ..layouts import (LayoutTable, accounts_embedding_loss, check_layout, light_last_stage, pipeline_split,
                       stack_default_etp)
from ..pipeline_layout import with_pipeline_layout
from ..torchtitan_split import stage_layout_text
from ..moe import flex_crosses_efa
from ..predict import least_recompute, predict_run
from ..stacks import PRE_TE_MEGATRON_STACKS, get_stack
from ..run_checks import check_layout_switches
from .notes import (domain_fill_note, inlet_rating_note, note, positions_note, said, start, tight_hbm_note,
                    torchtitan_fp8_note, uniform_routing_note)
from ..layout_grid import fullest_rank_layers, uneven_pp_rule
from .common import (CLUSTER, CONFIG, config_origin, refuse_dense_etp, FORMAT, GBS, MODEL, NODES, PREC, PROFILE, SEQ, STACK, apply_run_config,
                     stack_defaults_note, check_format,
                     check_layout_flags, check_pipeline_accounting, context_line, fabric_notes, setup, unfitted_power_note, with_layout_flags, with_fabric_flags, with_recipe_flags)


def parse_derate(items: list) -> dict:
    """``--derate NODE:SLOT=MHZ`` values as (node, slot) -> MHz.

    Raises:
        InputError: a value not of that form, or the same GPU twice.
    """
    out = {}
    for it in items:
        mt = re.fullmatch(r"\s*(\d+):(\d+)\s*=\s*([0-9.eE+-]+)\s*", it)
        try:
            key, mhz = (int(mt.group(1)), int(mt.group(2))), float(mt.group(3))
        except (AttributeError, ValueError):
            raise InputError("--derate", "", f"{it!r} is not NODE:SLOT=MHZ (e.g. 0:3=400)") from None
        if key in out:
            raise InputError("--derate", "", f"GPU {key[0]}:{key[1]} is derated twice")
        out[key] = mhz
    return out


def _recompute_auto(layout_flags: dict) -> bool:
    """Whether --recompute is auto (the least recomputation that fits, predict's own choice).

    Raises:
        InputError: an unknown --recompute, or auto with --recompute-num-layers."""
    auto = layout_flags.get("recompute") == "auto"
    choices = FIELD_SPECS["recompute"].choices
    if layout_flags.get("recompute") not in (None, "auto", *choices):
        raise InputError("--recompute", "", f"{layout_flags['recompute']!r} is not one of {', '.join(choices)}, auto "
                         "(the fastest step that fits)")
    if auto and layout_flags.get("recompute_num_layers"):
        raise InputError("--recompute-num-layers", "", "--recompute auto chooses how many layers it recomputes: drop "
                         "one of the two")
    return auto


def parse_device_order(items: list) -> dict:
    """``--device-order [NODES:]SLOTS`` values as node -> slots (None: every node not named), NODES one
    node or a range ``A-B``, SLOTS the ``CUDA_VISIBLE_DEVICES`` list recommend's placement prints.

    Raises:
        InputError: a value not of that form, or a node ordered twice.
    """
    out: dict = {}
    for it in items:
        mt = re.fullmatch(r"\s*(?:(\d+)(?:-(\d+))?:)?\s*(\d+(?:\s*,\s*\d+)*)\s*", it)
        if mt is None or (mt.group(2) is not None and int(mt.group(2)) < int(mt.group(1))):
            raise InputError("--device-order", "", f"{it!r} is not [NODES:]SLOTS (e.g. 4,5,6,7,0,1,2,3 for every "
                             "node, or 0-3:4,5,6,7,0,1,2,3)")
        order = tuple(int(x) for x in mt.group(3).split(","))
        nodes = [None] if mt.group(1) is None else range(int(mt.group(1)), int(mt.group(2) or mt.group(1)) + 1)
        for node in nodes:
            if node in out:
                raise InputError("--device-order", "", ("every node" if node is None else f"node {node}")
                                 + " is ordered twice")
            out[node] = order
    return out


def parse_caps(text: str | None, pp: int):
    """``--power-cap-w``: one cap (float) for every stage, or PP caps, comma-separated (list); None for
    the cluster's power limit (ClusterSpec.power_limit_w).  Their range is the energy model's check
    (costmodel.energy.check_cap).

    Raises:
        InputError: a value that is not a number, or neither one cap nor one per pipeline stage.
    """
    if text is None:
        return None
    try:
        caps = [float(x) for x in str(text).split(",")]
    except ValueError:
        raise InputError("--power-cap-w", "", f"{text!r} is not a number of watts, or one per pipeline stage "
                         "comma-separated (e.g. 450,450,575)") from None
    if len(caps) == 1:
        return caps[0]
    if len(caps) != pp:
        raise InputError("--power-cap-w", "", f"{len(caps)} caps for {pp} pipeline stages: give one, or one per stage")
    return caps


def _print_notes(notes: list) -> None:
    """Print the non-empty notes on stderr, one line each (costmodel.cli.notes keeps them)."""
    for n in filter(None, notes):
        note(n)


DERATE = typer.Option(None, "--derate", help="NODE:SLOT=MHZ pins that GPU's SM clock (a HW-slowdown or power-brake "
                      "straggler; repeatable); the synchronous step follows the slowest rank.")
DEVICE_ORDER = typer.Option(None, "--device-order", help="[NODES:]SLOTS: local rank r of those nodes (one, a range "
                            "A-B, or every node when omitted) runs on the r-th slot listed, as recommend's placement "
                            "exports CUDA_VISIBLE_DEVICES (repeatable); temperatures follow the slots.")
PP_LAYOUT = typer.Option(None, "--pp-layout", help="The run's own placement of layers on the pipeline (Megatron-core "
                         "--pipeline-model-parallel-layout, e.g. 'Et|(tt|)*30mL': E embedding, t layer, m MTP, L loss, "
                         "| stage end); lets PP x VP leave the layer count uneven.")


@with_fabric_flags(memory=True)
@with_layout_flags()
@with_recipe_flags()
def predict(ctx: typer.Context, model: str = MODEL, cluster: str = CLUSTER, nodes: Optional[int] = NODES, gbs: int = GBS,
            seq_len: Optional[int] = SEQ, precision: Optional[str] = PREC, profile: Optional[str] = PROFILE,
            stack: str = STACK,
            power_cap_w: Optional[str] = typer.Option(None, "--power-cap-w", help="Per-GPU power cap, W: one value, or "
                                                      "one per pipeline stage as recommend's ILP prints them, "
                                                      "comma-separated (default: the cluster's power limit, "
                                                      "its TDP unless the cluster file sets power.gpu_power_limit)."),
            inlet_temp_c: Optional[float] = typer.Option(None, "--inlet-temp-c", help="Override the cooling inlet temperature, C."),
            warm_steps: Optional[int] = typer.Option(None, "--warm-steps", help="Also report temperatures after N steps from a cold start."),
            derate: Optional[List[str]] = DERATE, device_order: Optional[List[str]] = DEVICE_ORDER,
            pp_layout: Optional[str] = PP_LAYOUT,
            fmt: Optional[str] = FORMAT, config: Optional[str] = CONFIG,
            as_json: bool = typer.Option(False, "--json", help="Print one JSON object."), layout_flags: dict = None,
            recipe_flags: dict = None, fabric_flags: dict = None):
    """Predict one layout: step time, throughput, MFU, memory, power, temperature and energy (exit 3, after the
    full report, when the layout does not fit)."""
    start()
    check_format(fmt)
    sc = dict(gbs=gbs, seq_len=seq_len, precision=precision, nodes=nodes, stack=stack)
    # the configuration's notes wait until the layout is known good: a refusal stays one line
    config_notes = apply_run_config(ctx, config, cluster, layout_flags, recipe_flags, sc, model)
    gbs, seq_len, precision, nodes, stack = sc["gbs"], sc["seq_len"], sc["precision"], sc["nodes"], sc["stack"]
    with config_origin(sc):
        m, c, r, p = setup(model, cluster, nodes, gbs, seq_len, precision, profile, stack, recipe_flags, fabric_flags)
    if sc.get("dropout") is not None and sc["dropout"] != m.dropout:
        m = dataclasses.replace(m, dropout=sc["dropout"])
        config_notes.append(f"dropout {'on' if m.dropout else 'off'}, as {sc['dropout_where']} says "
                            f"({m.name}'s own default is the other)")
    _check_etp(ctx, m, layout_flags)
    auto = _recompute_auto(layout_flags)
    lay = dict(layout_flags, recompute="none" if auto else layout_flags.get("recompute"))
    with config_origin(sc):
        check_layout_flags(lay)
    _stack_layout_defaults(ctx, m, c, r, lay, sc)
    sp_src = ctx.get_parameter_source("sp")
    if sp_src is None or sp_src.name in ("DEFAULT", "DEFAULT_MAP"):
        lay["sp"] = _default_sp(lay, r)
    with config_origin(sc):
        r = _tp_comm_overlap_needs_sp(r, lay, (recipe_flags or {}).get("tp_comm_overlap"))
        check_layout_switches(r, dict(lay, recompute=layout_flags.get("recompute")), m.is_moe, m.num_layers,
                              (recipe_flags or {}).get("recompute_modules") is not None)
        m, placed = _pp_layout(pp_layout, m, lay, sc)
        # flags alone: any split the stack's launch can name (an uneven interleaved one on Megatron-core)
        check_layout(LayoutTable.from_rows([lay]), m, r, c.num_gpus, c.scale_up_gpus,
                     uneven_pp=sc.get("uneven_pp", uneven_pp_rule(r.stack)))
    if placed is None:
        check_pipeline_accounting(sc.get("split_without_embedding"), m, lay)
    if placed is not None:
        config_notes.append(_pp_layout_note(placed, m, lay))
    else:
        config_notes.append(_uneven_chunks_note(m, lay))
    notes = [n for n in config_notes + ([stack_defaults_note(config, r, recipe_flags, m.is_moe)] if config else [])
             + [uniform_routing_note(m, r), positions_note(m, r), torchtitan_fp8_note(r, recipe_flags), _domain_note(lay, c, m.is_moe), _zero3_overlap_note(r, lay, recipe_flags),
                _flex_efa_note(m, r, c, lay), _fp8_param_gather_check(r, lay, recipe_flags)]
             if n]
    _print_notes(notes)
    with config_origin(sc):      # a profile without the kernel the file's backend picks names the file
        if auto:
            lay["recompute"], lay["recompute_num_layers"], r = least_recompute(m, r, c, p, lay)
            fits = bool(predict_run(m, r, c, p, lay, energy=False).feasible)
            n = lay["recompute_num_layers"]
            chose = lay["recompute"] + (f" on {n} layer{'s' if n > 1 else ''} per chunk (--recompute-method "
                                        f"block --recompute-num-layers {n})" if n else "") + (
                f" (--recompute-modules {' '.join(r.recomputed)})"
                if lay["recompute"] == "selective" and get_stack(r.stack).partial_recompute else "")
            note(f"--recompute auto chose {chose} (the fastest step that fits)" if fits else
                 f"--recompute auto: nothing fits; {chose} needs the least memory"
                 + (" of what --moe-ep-overlap runs (Megatron-core refuses full recompute with it)"
                    if r.moe_ep_overlap and m.is_moe and lay.get("ep", 1) > 1 else ""))
        run = predict_run(m, r, c, p, lay, caps_w=parse_caps(power_cap_w, lay["pp"]), warm_steps=warm_steps,
                          inlet_temp_c=inlet_temp_c, derate=parse_derate(derate or []),
                          device_order=parse_device_order(device_order or []))
    for n in fabric_notes(p, c) + [inlet_rating_note(c, inlet_temp_c)]:
        note(n)
    if run.energy_missing:
        note(f"no power/thermal prediction (missing: {', '.join(run.energy_missing)})")
    if run.energy is not None:
        note(unfitted_power_note(p, c))
    note(_selective_attention_note(m, r, c, p, lay, run))
    note(tight_hbm_note(run.peak_mem_bytes, c.gpu))
    rec = report.run_record(run)
    band, energy = run.band, run.energy
    if as_json:
        rec["notes"] = said()            # every note stderr printed, in order
        if placed is not None:
            rec["pp_layout"] = dict(text=placed.text, rank_layers=placed.rank_layers(), rank_mtp=placed.rank_mtp())
        if fmt is not None:
            title, text = _launch(rec["layout"], m, r, fmt, sc, config, placed, c.gpu)
            rec["launch"] = dict(format=fmt, title=title, text=text)
        print(report.json_text(rec))
        _exit_if_infeasible(rec)
        return
    out = report.console()
    out.print(context_line(m, c, r, p))
    lay = rec["layout"]
    out.print("layout: " + " ".join(f"{k}={v}" for k, v in lay.items()))
    _print_split(out, m, r, lay, placed, sc)
    if not rec["feasible"]:
        out.print(f"[bold red]infeasible:[/] {rec['reason']}")
    out.print(_step_line(rec, r))
    fits = (f"{100 * band.fit_rel:.1f}% over the fitted terms; no fit data for {', '.join(band.unfitted)}, whose "
            "datasheet-derived values carry only the model's error" if band.unfitted else f"{100 * band.fit_rel:.1f}%")
    out.print(f"  ± is one sigma: the fit residuals of {p.path} ({fits}) and the model's "
              f"error on published runs of its regime {band.model_form_key} ({100 * band.model_form_rel:.1f}%)",
              highlight=False)
    limited = report.power_limit_line(rec, c.gpu.full_clock_mhz)
    if limited:
        out.print(limited)
    out.print(report.breakdown_table(rec, "Step time breakdown (before the power limit)"))
    out.print(report.memory_table(rec))
    if energy is not None:
        out.print(report.energy_line(rec))
        out.print(report.per_gpu_table(rec["per_gpu"], top=16, num_gpus=rec["num_gpus"]))
    title, text = _launch(lay, m, r, fmt, sc, config, placed, c.gpu)
    out.print(f"[bold]{title}:[/bold]")
    out.print(text, markup=False, highlight=False, soft_wrap=True)   # pasted into a shell: never wrapped
    _exit_if_infeasible(rec)


def _stack_layout_defaults(ctx, m, c, r, lay: dict, sc: dict) -> None:
    """Fill ``lay`` in place with what the stack runs where the command line leaves it: its own ZeRO stage
    where Megatron's default (1) is not one of its stages or not with this PP, DP from the GPUs left, and
    the stack's expert TP (costmodel.layouts.stack_default_etp).

    Raises:
        InputError: TP x PP x CP does not divide the cluster's GPUs.
    """
    stages = get_stack(r.stack).zero_stages
    src = ctx.get_parameter_source("zero")
    if (lay["zero"] not in stages or (r.stack == "torchtitan" and lay["zero"] == 1 and lay["pp"] == 1)) and \
            (src is None or src.name in ("DEFAULT", "DEFAULT_MAP")):
        lay["zero"] = 1 if lay["pp"] > 1 and 1 in stages else stages[0]
    if lay["dp"] is None:
        n = lay["tp"] * lay["pp"] * lay["cp"]
        if c.num_gpus % n:
            with config_origin(sc):
                raise InputError("--tp/--pp/--cp", "", f"TP x PP x CP = {n} does not divide the {c.num_gpus} GPUs "
                                 f"of {c.key}")
        lay["dp"] = c.num_gpus // n
    if m.is_moe and lay.get("etp") is None:
        lay["etp"] = stack_default_etp(r.stack, lay["tp"], lay["ep"])


def _check_etp(ctx, m, layout_flags: dict) -> None:
    """Refuse an --etp typed for a dense model (its MLP runs at --tp); a configuration file's expert TP of a
    dense model is left to the file reader, which ignores it.

    Raises:
        InputError: naming --etp.
    """
    src = ctx.get_parameter_source("etp")
    if src is not None and src.name == "COMMANDLINE":
        refuse_dense_etp(m, layout_flags.get("etp"), layout_flags.get("tp"))


def _print_split(out, m, r, lay: dict, placed, sc: dict) -> None:
    """Print the pipeline split where it is not even: the run's own layout (``placed``) per rank, or the
    split the model chose and why."""
    split = pipeline_split(m, lay, light_last_stage(r))
    if placed is not None:
        by = (sc["pp_layout"][1] if sc.get("pp_layout") else sc["stage_split"]["where"] if sc.get("stage_split")
              else "--pp-layout")
        out.print(f"pipeline split: {placed.describe()} transformer layers per pipeline rank, as {by} places them",
                  highlight=False)
    elif len(set(split)) > 1:
        by = ("Megatron --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split"
              if get_stack(r.stack).megatron_family else f"{r.stack}'s pipeline split")
        how = (f"the embedding and the loss counted as one pipeline layer each ({by})"
               if bool(accounts_embedding_loss(m, LayoutTable.from_rows([lay]))[0])
               else ("uneven stages, the last one lighter (it also runs the logits and the loss)" if light_last_stage(r)
                     else "uneven stages, the last ones fuller (the stack's pipeline partitioner)"))
        out.print(f"pipeline split: {'|'.join(str(int(x)) for x in split)} transformer layers per stage, {how}")


def _step_line(rec: dict, r) -> str:
    """The step time, its band, throughput and MFU of a run record (MFU over the dense 16-bit peak, said
    where a low-precision run is measured against it)."""
    return (f"step time {rec['step_time_s']:.3f} ± {rec['step_time_band_s']:.3f} s, "
            f"{rec['tokens_per_s_per_gpu']:,.0f} tokens/s/GPU, "
            f"{rec['model_tflops_per_gpu']:.1f} model TFLOP/s/GPU, MFU {100 * rec['mfu']:.1f}%"
            + (" of the dense 16-bit peak" if gemm_format(r.precision).low else "")
            + (f" (attention as s x s; {100 * rec['mfu_causal']:.1f}% counting its causal half)"
               if rec["mfu_causal"] < 0.99 * rec["mfu"] else ""))


def _selective_attention_note(m, r, c, p, lay: dict, run) -> str | None:
    """A note where selective recompute re-runs only a fused attention core: the core keeps no s x s
    scores (its saved output is the projection's input anyway), so the recomputation buys no memory
    (costmodel.memory) and costs the core's forward in every backward; None elsewhere."""
    if (lay["recompute"] != "selective" or not r.flash_attention or tuple(r.recomputed) != ("core_attn",)
            or get_stack(r.stack).selective_recompute == "op-sac"):
        return None
    ref = predict_run(m, r, c, p, dict(lay, recompute="none", recompute_num_layers=0), energy=False)
    saved_gib = (ref.peak_mem_bytes - run.peak_mem_bytes) / 2**30
    cost_s = run.uncapped_step_time_s - ref.uncapped_step_time_s
    # only Megatron-core names other modules (costmodel.specs.recipe: --recompute-modules)
    other = "name other modules (--recompute-modules) or " if r.stack in ("megatron", "nemo") else ""
    return (f"--recompute selective re-runs only the attention core here (core_attn); the "
            f"fused ({r.attention_kernel}) core keeps no s x s scores, so it saves {saved_gib:.2f} GiB per GPU and "
            f"costs {cost_s:.3f} s per step: {other}use --recompute none")


def _launch(lay: dict, m, r, fmt, sc: dict, config, placed=None, gpu=None) -> tuple[str, str]:
    """(title, text) of the launch settings: the stack's own format, except for a NeMo or Megatron-Bridge
    YAML given as --config, whose keys NeMo 2's recipe overrides do not address: a Bridge file gets its own
    keys (costmodel.launch_bridge), a NeMo 1 file the settings in the field's terms, to set in it
    (costmodel.launch); ``placed``: the --pp-layout given, echoed."""
    kind = sc.get("config_kind")
    if fmt is None and kind == "Megatron-Bridge YAML":
        title, text = launch_settings(lay, m, r, layers=placed, fmt="bridge", gpu=gpu)
        return f"{title}: the keys to set in {config}", text
    if fmt is None and kind == "NeMo YAML":
        title, text = launch_settings(lay, m, r, fmt="settings", gpu=gpu)
        return (f"Settings to set in {config} (in words: find each in its {kind} keys; NeMo 2 recipe "
                "overrides do not apply to it)", text)
    return launch_settings(lay, m, r, layers=placed, fmt=fmt, gpu=gpu)


def _pp_layout(text, m, lay: dict, sc: dict):
    """``(model, layout)``: the model with the split of ``--pp-layout`` or the --config file's layout
    (costmodel.pipeline_layout.with_pipeline_layout), else ``(m, None)``; with one the layout may leave
    PP x VP not dividing the layers (``sc["uneven_pp"]`` "any").

    Raises:
        InputError: a bad layout (costmodel.pipeline_layout), or a --config that splits the pipeline its own way.
    """
    spec = sc.get("stage_split")
    if text is None and sc.get("pp_layout") is None and spec and lay["pp"] > 1:
        # a torchtitan file's own split: the stages it names, or torchtitan's
        text = stage_layout_text(spec, m.num_layers, lay["pp"], lay["vp"], m.mtp_layers)
        return with_pipeline_layout(m, text, lay["pp"], lay["vp"], where=spec["where"])
    if text is None and sc.get("pp_layout") is None:
        return m, None
    if text is None:                           # the --config file's own layout
        text, where = sc["pp_layout"]
        return with_pipeline_layout(m, text, lay["pp"], lay["vp"], where=where)
    if sc.get("uneven_pp") == "any":
        raise InputError("--pp-layout", "", "the --config file sets its own pipeline split: drop the flag or the file's split")
    if sc.get("stack") in PRE_TE_MEGATRON_STACKS:
        raise InputError("--pp-layout", "", f"is Megatron-core's --pipeline-model-parallel-layout (2025), which the "
                         f"{sc['stack']} stack predates: --stack megatron runs it")
    sc["uneven_pp"] = "any"
    return with_pipeline_layout(m, text, lay["pp"], lay["vp"])


def _domain_note(lay: dict, c, moe: bool) -> str | None:
    """A note where NVLink domains of several nodes (GB200 NVL72) are not tiled by the job: a partly
    filled domain, or CP / EP groups whose blocks of ranks straddle a domain boundary (ranks fill nodes
    and nodes domains in order, costmodel.comm.group_span), so the slowest group's traffic crosses the
    NICs and paces every other."""
    from ..fabric import blocks_touched
    d, n = c.scale_up_gpus, c.num_gpus
    if d <= c.gpus_per_node or n <= d:
        return None
    said = domain_fill_note(c)
    for name, stride, size in (("CP", lay["tp"], lay["cp"]), ("EP", lay.get("etp") or lay["tp"], lay["ep"] if moe else 1)):
        b = stride * size
        if size > 1 and b < d and float(blocks_touched(b, d, n)) > 1:
            said.append(f"the {name} groups' blocks of {b} ranks do not tile the {d}-GPU domain: the slowest straddles "
                        f"two domains and its traffic crosses the NICs (--domain-gpus {d // b * b // c.gpus_per_node * c.gpus_per_node}, "
                        "GPUs used per domain, keeps each group inside one)")
    return "; ".join(said) or None


def _flex_efa_note(m, r, c, lay: dict) -> str | None:
    """A note where the flex dispatcher's EP groups cross nodes on AWS EFA (costmodel.moe.flex_crosses_efa,
    the layouts recommend leaves out)."""
    if not (m.is_moe and r.moe_dispatcher == "flex"
            and flex_crosses_efa(c, lay.get("etp") or lay["tp"], lay["ep"]).item()):
        return None
    return ("flex across nodes on EFA: upstream DeepEP's internode kernels need InfiniBand or RoCE mlx5 NICs (IBGDA; "
            "deepseek-ai/DeepEP#369) and HybridEP traps on EFA (Megatron-Bridge#3343); only DeepEP V2 over NCCL's GIN "
            "plugin runs there, priced here with DeepEP's InfiniBand measurement capped at the EFA NICs' rate "
            "(recommend keeps flex's EP groups inside a node there)")


def _fp8_param_gather_check(r, lay: dict, flags) -> str | None:
    """A note where --fp8-param-gather is given for FSDP (ZeRO-3), whose fp8 gathers Megatron runs but the
    model prices at 16 bits (costmodel.comm.fp8_params_on).

    Raises:
        InputError: given with ZeRO 0 over more than one DP x CP rank: Megatron-LM asserts the distributed
            optimizer or FSDP (megatron/training/arguments.py, '--fp8-param-gather only supported with
            distributed optimizer, torch fsdp2, megatron fsdp, or inference mode').
    """
    if not ((flags or {}).get("fp8_param_gather") and r.precision == "fp8" and get_stack(r.stack).megatron_family):
        return None
    if lay["zero"] == 0 and lay["dp"] * lay["cp"] > 1:
        raise InputError("--fp8-param-gather", "", "needs Megatron's distributed optimizer or FSDP (--zero 1, 2 or 3), "
                         "as Megatron-LM asserts; not --zero 0")
    if lay["zero"] == 3:
        return "--fp8-param-gather under FSDP (ZeRO-3) is priced as 16-bit parameter gathers and weights"
    return None


def _zero3_overlap_note(r, lay: dict, flags) -> str | None:
    """A note where --dp-overlap / --no-dp-overlap is given for ZeRO-3 on a stack whose FSDP overlaps its
    gathers and reduce-scatters whatever the switch says (costmodel.stacks.Stack.zero3_overlap)."""
    if lay["zero"] != 3 or (flags or {}).get("dp_overlap") is None or not get_stack(r.stack).zero3_overlap:
        return None
    return (f"--{'' if flags['dp_overlap'] else 'no-'}dp-overlap changes nothing at ZeRO-3 on the {r.stack} stack: its "
            "FSDP prefetches the next gather and reduce-scatters under the compute whatever it says "
            "(costmodel.stacks Stack.zero3_overlap); --no-overlap prices that traffic exposed")


def _pp_layout_note(placed, m, lay: dict) -> str | None:
    """A note where ``placed`` puts the MTP modules on another pipeline rank than the last, where the
    model prices them (costmodel.compute), or gives one rank's virtual chunks unequal layer counts,
    which the interleaved schedule prices as equal (costmodel.schedule)."""
    notes = []
    mtp = placed.rank_mtp()
    if any(mtp[:-1]):
        notes.append(f"the pipeline layout puts the MTP modules on rank {next(i for i, k in enumerate(mtp) if k)}; "
                     "the model prices them on the last rank, with the logits")
    fullest = max(range(lay["pp"]), key=lambda s: placed.rank_layers()[s])
    chunks = [placed.stages[v * lay["pp"] + fullest].count("t") for v in range(lay["vp"])]
    if len(set(chunks)) > 1:
        notes.append(f"the pipeline layout's fullest rank {fullest} holds {'+'.join(map(str, chunks))} layers in its "
                     f"virtual chunks; the interleaved schedule is priced with its {sum(chunks)} layers spread evenly")
    return "; ".join(notes) or None


def _uneven_chunks_note(m, lay: dict) -> str | None:
    """A note where ``--vp`` alone interleaves an uneven split whose fullest rank's layers make unequal
    virtual chunks (the launch spreads them, costmodel.pipeline_layout.layout_text), which the
    interleaved schedule prices as equal; None otherwise."""
    from ..layouts import accounts_embedding_loss
    L, pp, vp = m.num_layers, lay["pp"], lay["vp"]
    if vp < 2 or L % (pp * vp) == 0 or len(m.pipeline_rank_layers) == pp:
        return None
    fullest = fullest_rank_layers(L, pp)
    if fullest % vp == 0 or bool(accounts_embedding_loss(m, LayoutTable.from_rows([lay]))[0]):
        return None
    return (f"VP {vp} over the fullest rank's {fullest} layers makes unequal virtual chunks; the interleaved "
            f"schedule is priced with them spread evenly ({fullest / vp:g} a chunk)")


def _default_sp(lay: dict, r) -> bool:
    """Sequence parallelism where no flag sets it: on wherever TP > 1 and the stack runs it, as
    recommend's search has it (costmodel.layout_grid.candidate_grid), but off, with a note, where
    Megatron-core could not split seq_len / CP evenly over TP."""
    sp = bool(lay["sp"]) and lay["tp"] > 1 and get_stack(r.stack).sequence_parallel
    if sp and get_stack(r.stack).megatron_family and (r.seq_len // lay["cp"]) % lay["tp"]:
        note(f"seq_len {r.seq_len} / CP {lay['cp']} is not divisible by TP {lay['tp']}: priced without sequence "
             "parallelism (Megatron-core splits the sequence evenly over the TP group under it)")
        return False
    return sp


def _tp_comm_overlap_needs_sp(r, lay: dict, given):
    """The recipe with TP-communication overlap as it runs on ``lay``: Megatron-LM refuses it without
    sequence parallelism (megatron/training/arguments.py validate_args: 'Tensor parallel
    communication/GEMM overlap can happen only when sequence parallelism is enabled').  Given on the
    command line (``given``) for a TP > 1 layout without SP, or at TP 1, refused; a stack default
    (NeMo) is switched off for a TP > 1 layout without SP, with a note, so the report, its JSON and
    its launch agree (at TP 1 it has nothing to do).

    Raises:
        InputError: naming --tp-comm-overlap.
    """
    if not r.tp_comm_overlap or lay["sp"]:
        return r
    if lay["tp"] == 1:       # nothing to overlap; Megatron-LM turns SP off at TP 1 and then refuses it
        if given:
            raise InputError("--tp-comm-overlap", "", "has no TP collectives to overlap at TP 1 (Megatron-LM turns "
                             "sequence parallelism off at TP 1, and validate_args then refuses the overlap): drop it "
                             "or raise --tp")
        return r
    why = ("needs sequence parallelism (torchtitan's async TP fuses the sequence-parallel all-gathers and "
           "reduce-scatters with their matmuls)" if r.stack == "torchtitan" else
           "needs sequence parallelism (Megatron-LM validate_args: 'Tensor parallel communication/GEMM overlap can "
           "happen only when sequence parallelism is enabled')")
    if given:
        raise InputError("--tp-comm-overlap", "", f"{why}: add --sp or drop --tp-comm-overlap")
    note(f"the {r.stack} stack's TP-communication overlap {why}: off for this --no-sp layout")
    return dataclasses.replace(r, tp_comm_overlap=False)


def _exit_if_infeasible(rec: dict) -> None:
    """After the full record is printed, an infeasible layout exits 3 with its reason on stderr.

    Raises:
        typer.Exit: code 3 when ``rec["feasible"]`` is false.
    """
    if not rec["feasible"]:
        print(f"costmodel: infeasible: {rec['reason']}", file=sys.stderr)
        raise typer.Exit(3)
