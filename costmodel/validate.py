"""Validation: predict the published runs of a throughput CSV and report the step-time error.

The CSV schema is that of the dev set (benchmarks/data/dev_set.csv, documented in the README):
one measured run per row with its hardware, architecture, recipe and parallel layout.  A row's
measured step time comes from ``step_time_s``, else from ``hardware_tflops_per_gpu`` (Megatron's
executed-FLOPs count, 4/3 of model FLOPs under full recompute), ``model_tflops_per_gpu`` or
``tokens_per_s_per_gpu``.  Rows the model cannot represent faithfully are skipped with the reason.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from . import metrics
from .compute import dense_peak_flops, gemm_dtype, model_flops_per_step
from .energy import layout_energy, missing_inputs
from .errors import InputError
from .layout_fields import RECOMPUTE
from .layouts import LayoutTable, validity
from .model_error import load_model_form, regime
from .predict import predict_table
from .published_row import (note_says, _fastest_mbs, stack_pipeline_mbs, _least_costly_fit, _shared_expert, cell_float as _float,
                            cell_int as _int, misspelt_note_flags, notes_dist_opt, notes_name_dist_opt, catalog_mismatch, catalog_row_model, row_family, row_model, row_sp,
                            row_stack, row_switches, row_zero, switch_problem)
from .published_cluster import row_cluster
from .specs import ModelSpec, Recipe, cluster_profile, load_cluster, load_profile
from .specs.recipe import PRECISIONS
from .stacks import STACKS, TE_STACKS, stack_recipe
from .uncertainty import step_time_band
from .runs_csv import LINE, METRICS, RUN_COLUMNS, read_runs_csv

__all__ = ["METRICS", "MIN_PEAK_FRACTION", "RUN_COLUMNS", "RowResult", "read_runs_csv", "summarize", "validate_rows"]

@dataclass
class RowResult:
    """One row: its id, source, measured and predicted step time (s), or the reason it was skipped."""

    row_id: str
    source: str
    measured_s: float | None = None
    predicted_s: float | None = None
    skipped: str | None = None
    sweep: str = ""
    metric: str | None = None
    predicted_oom: bool = False
    regime: tuple | None = None
    band_rel: float | None = None
    assumed: tuple = ()
    cluster: str = ""           # the catalog cluster it was predicted on (the note's system, or its GPU's reference)
    line: int | None = None     # where the row starts in its file
    flop_convention: str | None = None   # a TFLOP/s measure's attention count: "causal" or "s x s"
    malformed: bool = False     # skipped for a cell that cannot be read (not for a run the model does not cover)

    @property
    def place(self) -> str:
        """Where the row is, as the command's errors name it: "line 3 (row_id 'a2')", or "row_id 'a2'"
        for a row read without its line."""
        return f"line {self.line} (row_id {self.row_id!r})" if self.line else f"row_id {self.row_id!r}"

    @property
    def covered(self) -> bool:
        """The measured step time lies inside the prediction's one-sigma band."""
        return abs(self.predicted_s - self.measured_s) <= self.band_rel * self.predicted_s

    @property
    def error_pct(self) -> float:
        """Signed percentage error of the prediction, 100 (pred - meas) / meas."""
        return 100.0 * (self.predicted_s - self.measured_s) / self.measured_s


_NUMERIC = ("num_gpus", "gpus_per_node", "num_layers", "hidden", "ffn_hidden", "num_heads", "num_kv_heads", "vocab",
            "seq_len", "num_experts", "moe_topk", "gbs", "mbs", "tp", "pp", "dp", "cp", "ep", "etp", "vp", "head_dim",
            "dp_replicate",
            "step_time_s",
            "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "params_b")
# (mfu is informational, never read as the step: checked to be a percentage, then against the measures,
# :func:`_mfu_disagrees`)
#: two published measurements of one step that differ by more than this fraction are not of one run
_MEASURES_AGREE = 0.05


_MEASURED = ("step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu")
_MAX_COUNT = 2 ** 53        # counts the model computes exactly in float64


def _bad_number(r: dict) -> str | None:
    """Why a row's numeric cell cannot be used (not a number, not finite, not positive, a count that
    is not a whole number up to 2^53), or None."""
    for k in _NUMERIC:
        v = (r.get(k) or "").strip()
        if not v:
            continue
        try:
            if "_" in v:                        # float() reads '1_28' as 128
                raise ValueError(v)
            x = float(v)
        except ValueError:
            return f"{k} is not a number ({v!r})"
        if not math.isfinite(x) or x <= 0:
            return f"{k} must be a finite positive number, got {v!r}"
        if k not in _MEASURED + ("params_b",) and (not x.is_integer() or x > _MAX_COUNT):
            return f"{k} must be a whole number up to 2^53, got {v!r}"
    mfu = (r.get("mfu") or "").strip()
    try:                                # not read, but a value it cannot be is a slip in the row ('39.3%' is one)
        bad_mfu = bool(mfu) and not 0 < float(mfu.removesuffix("%")) <= 100
    except ValueError:
        bad_mfu = True
    return f"mfu must be a percentage in (0, 100], got {mfu!r}" if bad_mfu else None


#: two columns that need a FLOP convention (a TFLOP/s and another measure) agree within this factor when
#: they are of one run: the attention's s x s or causal count and the 4/3 of recomputation move them by up
#: to 21 % on the dev sets' published pairs (benchmarks/data/dev_set*.csv)
_FLOP_MEASURES_AGREE = 1.5


def _measures_disagree(steps: dict) -> str | None:
    """Why the row's measured columns cannot all be its run's (``steps``: :func:`implied_steps_s`): two
    that need no FLOP convention (step time, tokens/s/GPU) imply steps more than :data:`_MEASURES_AGREE`
    apart, or a TFLOP/s column one more than :data:`_FLOP_MEASURES_AGREE` times another's; None when
    they agree (validate reads the first)."""
    cols = list(steps)
    for i, a in enumerate(cols):
        for b in cols[i + 1:]:
            x, y = steps[a], steps[b]
            flops = "tflops" in a or "tflops" in b
            if (max(x, y) / min(x, y) > _FLOP_MEASURES_AGREE) if flops else abs(y / x - 1) > _MEASURES_AGREE:
                return (f"{a} and {b} imply {x:.4g} s and {y:.4g} s a step (more than "
                        f"{f'{_FLOP_MEASURES_AGREE:g}x' if flops else f'{100 * _MEASURES_AGREE:g}%'} apart): one "
                        "of them is not this run's")
    return None


def _flop_convention_gap(r: dict, model: ModelSpec, recipe: Recipe, n_gpus: int, steps: dict) -> tuple:
    """Notes for the TFLOP/s columns of a row that also publishes a step or tokens/s (``steps``:
    :func:`implied_steps_s`, the first entry the one validate reads) and misses it by more than
    :data:`_MEASURES_AGREE` under every FLOP convention a source uses: attention s x s or its causal
    half, with or without the 4/3 of full recomputation.  Within :data:`_FLOP_MEASURES_AGREE` the row
    is kept (:func:`_measures_disagree` skips it beyond), but the gap is the source's and is shown."""
    metric, meas = next(iter(steps.items()))
    if "tflops" in metric:
        return ()
    out = []
    for col in ("model_tflops_per_gpu", "hardware_tflops_per_gpu"):
        tf = _float(r, col)
        if not tf or col not in steps:
            continue
        implied = [model_flops_per_step(model, recipe, causal=c) * f / (tf * 1e12 * n_gpus)
                   for c in (False, True) for f in (1.0, 4.0 / 3.0)]
        best = min(implied, key=lambda s: abs(s / meas - 1))
        if abs(best / meas - 1) > _MEASURES_AGREE:
            out.append(f"{col}-apart: {tf:g} TFLOP/s implies {best:.4g} s at best (s x s or causal attention, "
                       f"with or without recompute's 4/3), {100 * (best / meas - 1):+.0f}% from {metric}'s "
                       f"{meas:.4g} s, which is read")
    return tuple(out)


def mfu_fractions(cell: str) -> tuple:
    """The fractions of the peak an ``mfu`` cell may mean: '38' or '38%' -> (0.38,); a value up to 1
    written without '%' ('0.38') is read both as a fraction and as a percentage -> (0.38, 0.0038),
    sources publishing either; () for an empty cell (:func:`_bad_number` has refused any other)."""
    v = (cell or "").strip()
    if not v:
        return ()
    x = float(v.removesuffix("%"))
    return (x, x / 100.0) if x <= 1.0 and not v.endswith("%") else (x / 100.0,)


def _mfu_disagrees(r: dict, model: ModelSpec, recipe: Recipe, cluster, steps: dict) -> str | None:
    """Why a row's ``mfu`` cannot be of the run its measured columns give (``steps``: :func:`implied_steps_s`),
    or None: the step the MFU implies (model FLOPs / (MFU x peak x GPUs)) is more than
    :data:`_FLOP_MEASURES_AGREE` times from a column's step under every reading a source may have
    used: attention s x s or its causal half, with or without recompute's 4/3 (HFU published as MFU),
    the GPU's dense peak of the row's precision or its 16-bit one (the usual MFU denominator, fp8 runs
    too), and a cell up to 1 as a fraction or a percentage (:func:`mfu_fractions`).  A TFLOP/s column
    holding another quantity (tokens/s) is caught so, where its value alone looks plausible."""
    fracs = mfu_fractions(r.get("mfu") or "")
    if not fracs or not steps:
        return None
    n_gpus, gpu = cluster.num_gpus, cluster.gpu
    peaks_flops = {p for p in (gpu.peak_flops.get(gemm_dtype(recipe)), dense_peak_flops(cluster, recipe)) if p}
    flops = [model_flops_per_step(model, recipe, causal=c) * f for c in (False, True) for f in (1.0, 4.0 / 3.0)]
    implied_s = [fl / (m * p * n_gpus) for fl in flops for m in fracs for p in peaks_flops]
    for col, meas_s in steps.items():
        best_s = min(implied_s, key=lambda s: abs(math.log(s / meas_s)))
        if max(best_s, meas_s) / min(best_s, meas_s) > _FLOP_MEASURES_AGREE:
            peaks = " or ".join(f"{p / 1e12:g}" for p in sorted(peaks_flops))
            return (f"mfu-apart: mfu {r['mfu'].strip()} and {col} disagree: the MFU implies {best_s:.4g} s a step at "
                    f"best (of {gpu.name}'s dense peak, {peaks} TFLOP/s; s x s or causal attention, with or without "
                    f"recompute's 4/3), {col} {meas_s:.4g} s, more than {_FLOP_MEASURES_AGREE:g}x apart: one of them "
                    "is not this run's (a TFLOP/s column holding tokens/s?)")
    return None


_CAUSAL = r"causal attention"     # "non-causal attention" is not (published_row.note_says)
#: the architecture columns a catalog model fills where a row leaves them empty
_ARCH_COLUMNS = ("num_layers", "hidden", "num_heads", "vocab")


def implied_steps_s(r: dict, model: ModelSpec, recipe: Recipe, n_gpus: int, recompute: str | None) -> dict:
    """The step time, s, each measured column of the row implies, in :data:`METRICS`' order of preference
    (column -> seconds; the row's empty columns absent): ``step_time_s`` as published;
    ``tokens_per_s_per_gpu`` as gbs x seq_len / (tokens/s x GPUs); ``hardware_tflops_per_gpu`` from
    executed FLOPs (the model FLOPs of Narayanan et al. SC21 times 4/3 under full recomputation, the
    convention of Megatron-DeepSpeed's "TFLOPs" log field); ``model_tflops_per_gpu`` from model FLOPs
    (whose attention convention differs between sources: a row whose notes say 'causal attention'
    counts half the s x s scores).  ``recompute`` None (the row does not publish it): no step from
    hardware TFLOP/s, whose executed FLOPs depend on it."""
    out = {}
    st, tk = _float(r, "step_time_s"), _float(r, "tokens_per_s_per_gpu")
    if st:
        out["step_time_s"] = st
    if tk:
        out["tokens_per_s_per_gpu"] = metrics.tokens_per_step(recipe) / (tk * n_gpus)
    hw, mt = _float(r, "hardware_tflops_per_gpu"), _float(r, "model_tflops_per_gpu")
    if hw or mt:
        mflops = model_flops_per_step(model, recipe, causal=note_says(r.get("notes", ""), _CAUSAL))
        if hw and recompute is not None:
            out["hardware_tflops_per_gpu"] = mflops * (4.0 / 3.0 if recompute == "full" else 1.0) / (hw * 1e12 * n_gpus)
        if mt:
            out["model_tflops_per_gpu"] = mflops / (mt * 1e12 * n_gpus)
    return out


def _skip_reason(r: dict) -> str | None:
    notes = r.get("notes", "")
    # a row naming a catalog model (its filled columns agreeing) takes the architecture from it
    catalog = catalog_row_model(r) is not None
    for need in ("num_gpus", "num_layers", "hidden", "num_heads", "vocab", "seq_len", "gbs", "tp", "pp"):
        if not r.get(need, "").strip() and not (catalog and need in _ARCH_COLUMNS):
            mis = catalog_mismatch(r) if need in _ARCH_COLUMNS else None
            return f"{need} not published" + ("" if need not in _ARCH_COLUMNS else
                                              f" (the row departs from the catalog model it names: {mis}, so it is "
                                              "read from its own columns)" if mis else
                                              " (or name a catalog model: `costmodel models`)")
    if not r.get("ffn_hidden", "").strip() and row_family(r) == "llama" and not catalog:
        return "ffn_hidden not published (a SwiGLU MLP's width is no fixed multiple of hidden)"
    if r.get("precision", "") == "":
        return "precision not published"
    if (prec := r["precision"].strip().lower()) in UNPRICED_PRECISIONS:
        return f"precision {prec!r} is a format the model does not price ({', '.join(PRECISIONS)} are)"
    experts = _int(r, "num_experts") or 1
    if not (r.get("row_id") or "").strip():
        return "row_id is empty"
    if experts == 1 and (_int(r, "moe_topk") or 1) > 1:
        return f"moe_topk {r['moe_topk']} on a row without experts (num_experts empty or 1)"
    if experts > 1 and "shared expert" in notes.lower() and _shared_expert(r) is None:
        return "the notes name a shared expert but no width 'shared expert (N)', N a whole number up to 10^6"
    if experts > 1 and not (r.get("moe_topk") or "").strip():
        return "moe_topk not published (an MoE row's experts per token)"
    if experts > 1 and (_int(r, "moe_topk") or 1) > experts:
        return f"moe_topk {r['moe_topk']} exceeds num_experts {experts}"
    if "PARALLEL MISMATCH" in notes:
        return "published TP x PP x DP x CP differs from the GPU count"
    if "includes warm-up" in notes:
        return "logged interval includes warm-up iterations"
    if "pipeline not filled" in notes:
        return "batch-size ramp-up: the published config is not the one that ran"
    if note_says(notes, r"degraded"):
        return "measured during a degraded-GPU period"
    if note_says(notes, r"task=lora\b|\bLoRA\b", 0):
        return "LoRA fine-tuning is not modelled (frozen base weights: no base gradients or optimizer states)"
    if re.search(r"task=sft\b", notes) and re.search(r"\bpacked\b", notes):
        # each packed sequence holds many short documents, each attending to itself only
        return "packed-sequence fine-tuning without its document length (each packed document attends to itself only: --doc-tokens)"
    return None


#: precisions a published row may state that the model does not price (the row is skipped, not malformed)
UNPRICED_PRECISIONS = ("fp32", "tf32")


def _row_problem(r: dict) -> str | None:
    """Why a row's categorical cells cannot be read (an unknown recompute, sharding, precision or SP value)."""
    rc = (r.get("recompute") or "").strip()
    if rc not in ("", "unknown") + RECOMPUTE:
        return f"recompute {rc!r} is not one of {', '.join(RECOMPUTE)} (or empty)"
    z = (r.get("fsdp_or_zero") or "").strip()
    if z and row_zero(r) is None:
        return f"fsdp_or_zero {z!r} is not none, zero-0/1/2/3 or fsdp[-strategy]"
    if "hybrid_shard" in z.lower() and not (r.get("dp_replicate") or "").strip():
        # PyTorch FSDP shards within a node by default, over the degrees a device mesh gives otherwise
        return (f"fsdp_or_zero {z!r} is HSDP: give its replicas in a dp_replicate column (the nodes where FSDP "
                "shards within a node, its default; 1 on one node)")
    if z.lower() in ("none", "zero-0") and notes_name_dist_opt(r):
        return (f"fsdp_or_zero {z!r} contradicts the notes, which name Megatron's distributed optimizer "
                "(--use-distributed-optimizer or --overlap-param-gather: ZeRO-1)")
    prec = (r.get("precision") or "").strip().lower()
    if prec and prec not in PRECISIONS + UNPRICED_PRECISIONS:    # fp32 / tf32 are formats, skipped unpriced
        return f"precision {prec!r} is not one of {', '.join(PRECISIONS + UNPRICED_PRECISIONS)}"
    spv = (r.get("sequence_parallel") or "").strip().lower()
    if spv not in ("", "true", "false"):
        return f"sequence_parallel {spv!r} is not true, false or empty"
    name = (r.get("stack") or "").strip()
    if name and name not in STACKS:
        return f"stack {name!r} is not one of {', '.join(STACKS)}"
    h, heads, kv = _int(r, "hidden"), _int(r, "num_heads"), _int(r, "num_kv_heads")
    if h and heads and h % heads:
        return f"hidden {h} is not a multiple of num_heads {heads} (no whole head dimension)"
    if heads and kv and heads % kv:
        return f"num_heads {heads} is not a multiple of num_kv_heads {kv} (GQA groups must be whole)"
    slips = misspelt_note_flags(r.get("notes", ""))
    if slips:
        return "notes: " + "; ".join(f"{a} is not a flag the reader knows; did you mean {b}?" for a, b in slips)
    return None


def _no_metric(r: dict, recompute_known: bool = True) -> str:
    """Why a row has no measured step: none of the columns a step is read from, or hardware TFLOP/s
    without the recompute that sets its executed FLOPs; an MFU alone is not read back into one, as the
    peak and FLOP convention it divides by are the source's."""
    if not recompute_known and (r.get("hardware_tflops_per_gpu") or "").strip():
        return ("hardware_tflops_per_gpu without its recompute: the executed FLOPs it counts depend on it "
                "(4/3 of the model FLOPs under full recompute); give the recompute column or another measure")
    return "no throughput metric (step_time_s, tokens_per_s_per_gpu, hardware_tflops_per_gpu or model_tflops_per_gpu)" + (
        "; mfu alone is not used: the peak and FLOP convention it divides by are the source's"
        if (r.get("mfu") or "").strip() else "")


def _effective_switches(r: dict, model, tp: int) -> dict:
    """The recipe switches a row names (costmodel.published_row.row_switches) less those that cannot act
    on it: a TP-comm overlap at TP 1, repeated K/V heads where there are as many as query heads (or MLA)."""
    switches = row_switches(r)
    if tp == 1:
        switches.pop("tp_comm_overlap", None)
    if model.kv_repeat_factor == 1:
        switches.pop("kv_repeat", None)
    return switches


def _row_assumptions(r: dict, stack, model: ModelSpec, recipe: Recipe, catalog: bool, switches: dict, sp_assumed,
                     stack_zero: bool, fsdp_pp: bool) -> tuple:
    """What :func:`_prepare` assumes of a row beyond its cells, as ``name=value(why)`` strings: the stack of
    its source file, the stack's default sharding, the switches its notes name, SP (``sp_assumed``: the
    assumed value, or None when published), FSDP2 under a pipeline, the distributed optimizer of its
    notes, EP 1, the shared expert, the catalog model or family, the widths a missing column leaves,
    a stated size its architecture contradicts, the attention kernel it does not name, and balanced routing
    for a dropless run."""
    stated = _float(r, "params_b")
    mis = catalog_mismatch(r)
    return (((f"stack={stack.name}(its source file)",) if not (r.get("stack") or "").strip() else ())
            + ((f"zero={stack.zero_stages[0]}({stack.name}'s default data parallelism)",) if stack_zero else ())
            + tuple(f"{k}={v}" for k, v in switches.items()) + ((f"sp={sp_assumed}",) if sp_assumed is not None else ())
            # the fused-attention kernel a row does not name is its stack's on its GPU (cuDNN's under
            # Transformer Engine on Hopper and Blackwell): it sets the attention time, so it is said
            + ((f"attention_kernel={recipe.attention_kernel}({stack.name}'s default)",)
               if recipe.flash_attention and "attention_kernel" not in switches else ())
            + (("zero=1(FSDP2 under PP)",) if fsdp_pp else ("zero=1(distributed optimizer)",) if notes_dist_opt(r)
               else ())
            + (("ep=1",) if model.is_moe and not (r.get("ep") or "").strip() else ())
            + ((f"shared_expert={model.shared_ffn_hidden}",) if model.shared_ffn_hidden else ())
            + ((f"arch=catalog {model.name}",) if catalog
               else ("arch=megatron-gpt(unrecognised model name)",) if row_family(r) == "unrecognised" else ())
            + ((f"arch={row_family(r)} from the row's columns ({mis})",) if mis else ())
            + tuple(f"{c}={v}({f'catalog {model.name}' if catalog else why})"
                    for c, v, why in (("ffn_hidden", model.ffn_hidden, "4 x hidden"),
                                      ("num_kv_heads", model.num_kv_heads, "MHA: num_heads"))
                    if not (r.get(c) or "").strip())
            # params_b is informational, but one far from the architecture's count says a column is not the run's
            + ((f"params_b={stated:g}(the row's architecture gives {model.params() / 1e9:.1f}B)",)
               if stated and not 0.8 <= model.params() / (stated * 1e9) <= 1.25 else ())
            # a trained router's uneven expert loads are in the measured step: balanced routing is priced
            + (("moe_expert_load_cv=0(dropless: the router's imbalance is not published)",)
               if model.is_moe and not recipe.moe_expert_load_cv and re.search(r"\bdropless\b", r.get("notes", ""), re.I)
               else ()))


def _prepare(r: dict, cache: dict, hw: tuple = (None, None)):
    """A usable row as (cluster key, model, recipe, layout row, RowResult), or the reason to skip it;
    ``hw``: the ``--cluster`` and ``--profile`` every row runs on (None: the row's own, costmodel.published_cluster).

    Raises:
        InputError: a recipe value the model refuses (caught by :func:`validate_rows`, which skips
            the row naming the field).
    """
    rid, src = r.get("row_id", "?"), source_name(r)
    why = _bad_number(r) or _skip_reason(r) or _row_problem(r)
    cname, gpu_why, hw_assumed = row_cluster(r, hw[0])
    why = why or gpu_why
    if why:
        return why
    n_gpus, gpn = _int(r, "num_gpus"), _int(r, "gpus_per_node")
    key = (cname, n_gpus)
    if key not in cache:
        per_node = load_cluster(cname).gpus_per_node       # a row may count a whole NVLink domain as its node
        c = load_cluster(cname, nodes=max(1, n_gpus // per_node))
        cache[key] = (c, cluster_profile(c, hw[1]))
    cluster, profile = cache[key]
    if gpn is None:
        return "gpus_per_node missing"
    if cluster.num_gpus != n_gpus:
        return (f"num_gpus {n_gpus} is not a whole number of {cluster.key}'s {cluster.gpus_per_node}-GPU nodes "
                f"(partial nodes are not modelled; --cluster takes a cluster file of {gpn or 'fewer'}-GPU nodes: "
                "hardware/README.md)")
    if gpn not in (cluster.gpus_per_node, cluster.scale_up_gpus):
        return f"{gpn} GPUs per node; the catalog's {cluster.key} has {cluster.gpus_per_node}" + (
            f" ({cluster.scale_up_gpus} per NVLink domain)" if cluster.scale_up_gpus != cluster.gpus_per_node else "") + (
            f" (--cluster takes a cluster file of {gpn}-GPU nodes: hardware/README.md)")
    tp, pp, cp = _int(r, "tp"), _int(r, "pp"), _int(r, "cp") or 1
    dp = _int(r, "dp") or n_gpus // (tp * pp * cp)
    if tp * pp * dp * cp != n_gpus:
        return (f"TP {tp} x PP {pp} x DP {dp}{'' if _int(r, 'dp') else ' (num_gpus / TP x PP x CP)'} x CP {cp} = "
                f"{tp * pp * dp * cp}, not num_gpus {n_gpus}")
    stack = row_stack(r)
    if stack is None:
        return "stack unknown: add a stack column"
    model, catalog = row_model(r, stack), catalog_row_model(r) is not None
    sp, sp_assumed = row_sp(r, stack, tp)
    switches = _effective_switches(r, model, tp)
    why = switch_problem(model, switches, tp, sp)
    if why:
        return why
    recipe = stack_recipe(stack, _int(r, "gbs"), _int(r, "seq_len"), r["precision"].strip().lower(), gpu=cluster.gpu,
                          **switches)
    if recipe.flash_attention:
        # raises for an unfitted kernel or a head dim the kernel does not run
        profile.attention_efficiency(recipe.attention_kernel, recipe.seq_len, model.qk_head_dim,
                                     model.attn_out_dim / model.num_heads, through_te=recipe.stack in TE_STACKS)
    # overlap of DP and backward TP communication: Megatron's default since 2021 (torch DDP
    # buckets, async tensor-parallel all-reduce); the runs logged with DDP_impl=local had none
    ddp_local = re.search(r"DDP[_ ]impl[= ]local", r.get("notes", "")) is not None
    rc_known = r.get("recompute") not in ("", "unknown", None)
    # an unpublished sharding on a stack whose data parallelism shards by default (FSDP: torchtitan,
    # llm-foundry) is that default; elsewhere the cheapest stage that fits (below)
    zero_given = bool((r.get("fsdp_or_zero") or "").strip()) or notes_dist_opt(r)
    stack_zero = not zero_given and dp * cp > 1 and stack.zero_stages[0] != 0
    row = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=_int(r, "ep") or 1, etp=_int(r, "etp"), vp=_int(r, "vp") or 1,
               mbs=_int(r, "mbs"), recompute=r["recompute"] if rc_known else "none",
               zero=stack.zero_stages[0] if stack_zero else row_zero(r), sp=sp, overlap=not ddp_local,
               dp_replicate=_int(r, "dp_replicate") or 1)
    # torchtitan's FSDP2 under a pipeline keeps each stage's parameters gathered across its micro-batches
    # and reduce-scatters once (torchtitan/models/llama3/infra/parallelize.py apply_fsdp: reshard_after_
    # forward = not pp_enabled): ZeRO-1's traffic and memory
    fsdp_pp = row["zero"] == 3 and pp > 1 and stack.name == "torchtitan"
    row["zero"] = 1 if fsdp_pp else row["zero"]
    assumed = hw_assumed + _row_assumptions(r, stack, model, recipe, catalog, switches,
                                             (f"{sp}({sp_assumed})" if isinstance(sp_assumed, str) else sp)
                                             if sp_assumed else None,
                                            stack_zero, fsdp_pp)
    row, pp_assumed = stack_pipeline_mbs(r, stack, row, _int(r, "gbs"))
    assumed += pp_assumed
    # params_b is informational, but one far from the architecture's count says a column is not the run's
    mbs_known = row["mbs"] is not None
    if mbs_known:
        code, msgs = validity(LayoutTable.from_rows([dict(row, recompute="none", zero=row["zero"] or 0)]), model,
                              recipe, cluster.num_gpus, cluster.scale_up_gpus, uneven_pp=True)
        if code[0] >= 0:
            return f"layout not representable ({_layout_words(row)}): {msgs[code[0]]}"
    zero_known = zero_given or stack_zero or dp * cp == 1
    zeros = (row["zero"],) if zero_known else (0, 1)
    recomputes = (row["recompute"],) if rc_known else ("none", "selective", "full")
    if not mbs_known:
        row = _fastest_mbs(model, recipe, cluster, profile, row, zeros, recomputes)
        if isinstance(row, str):
            return f"layout not representable: {row}"
        assumed += (f"mbs={row['mbs']}",)
    elif not (zero_known and rc_known):
        row = _least_costly_fit(model, recipe, cluster, row, zeros, recomputes)
    assumed += (() if zero_known else (f"zero={row['zero']}",)) + \
        (() if rc_known else (f"recompute={row['recompute']}" + (f"({row['recompute_num_layers']} layers)"
                                                                 if row.get("recompute_num_layers") else ""),))
    code, msgs = validity(LayoutTable.from_rows([row]), model, recipe, cluster.num_gpus, cluster.scale_up_gpus,
                          uneven_pp=True)
    if code[0] >= 0:
        return f"layout not representable ({_layout_words(row)}): {msgs[code[0]]}"
    steps = implied_steps_s(r, model, recipe, n_gpus, row["recompute"] if rc_known else None)
    if not steps:
        return _no_metric(r, rc_known)
    metric, meas = next(iter(steps.items()))
    # a measurement above the GPU's dense peak cannot be a step of this run; one far below any published
    # run's is a value in other units (a step in ms read as s)
    peak = cluster.gpu.peak_flops.get(gemm_dtype(recipe), 0.0)
    used = model_flops_per_step(model, recipe, causal=True) / (meas * n_gpus) / peak if peak else float("nan")
    if used > 1:
        return (f"{metric} with this model, gbs {recipe.gbs} and seq_len {recipe.seq_len} implies more than "
                f"{cluster.gpu.name}'s dense {gemm_dtype(recipe)} peak (one of them is not the run's)")
    if used < MIN_PEAK_FRACTION:
        return (f"{metric} with this model, gbs {recipe.gbs} and seq_len {recipe.seq_len} implies "
                f"{100 * used:.2g}% of {cluster.gpu.name}'s dense {gemm_dtype(recipe)} peak, under "
                f"{100 * MIN_PEAK_FRACTION:g}%: a value in other units (a step in ms?) or another run's")
    if (why := _measures_disagree(steps) or _mfu_disagrees(r, model, recipe, cluster, steps)):
        return why
    assumed += _flop_convention_gap(r, model, recipe, n_gpus, steps)
    res = RowResult(rid, src, meas, None, sweep=f"{src}|{r.get('model', '')}|{n_gpus}", metric=metric, assumed=assumed,
                    cluster=cluster.key, flop_convention=(("causal" if note_says(r.get("notes", ""), _CAUSAL)
                                                           else "s x s") if "tflops" in metric else None))
    return key, model, recipe, row, res


def _layout_words(row: dict) -> str:
    """The row's layout as its rules read it: 'TP 8 PP 4 DP 2 CP 1 mbs 3' (and EP, VP where above 1)."""
    words = [f"{k.upper()} {row[k]}" for k in ("tp", "pp", "dp", "cp") if row.get(k) is not None]
    words += [f"{k.upper()} {row[k]}" for k in ("ep", "vp") if (row.get(k) or 1) > 1]
    return " ".join(words + ([f"mbs {row['mbs']}"] if row.get("mbs") is not None else []))


#: the least fraction of the dense peak a row's measured step may imply: 5x under the slowest published
#: run of the dev sets (2.4%: BigScience's V100 pipeline-scaling logs, 64 layers at PP 64 and gbs 4, almost
#: all bubble; benchmarks/data/dev_set.csv rows v100logs-063..067); a step in ms read as s lands 1000x lower
MIN_PEAK_FRACTION = 0.005


def validate_rows(rows: list[dict], where: str = "runs.csv", cluster: str | None = None,
                  profile: str | None = None) -> list[RowResult]:
    """Predict every usable row; return one :class:`RowResult` per row (skipped ones with why; a cell
    that cannot be read, named by its column, a row short of cells or a repeated ``row_id``, which keeps
    the first row, marks its row ``malformed``).  ``cluster``
    (a catalog name or cluster file) and ``profile`` (a profile file): what every row ran on and is
    priced with, instead of each row's catalog cluster (costmodel.published_cluster) and its GPU's
    built-in profile; a row of another GPU is skipped.

    Raises:
        InputError: ``cluster`` or ``profile`` cannot be read (named as ``--cluster`` / the profile file).

    Rows of the same model, recipe and cluster are predicted as one layout table (one vectorised
    pass each).  The predicted step is the one ``predict`` prints: the power-limited step of the
    energy model (clocks under the TDP, costmodel.energy) where the GPU has a power model, else the
    time model's step at full clocks.
    """
    if cluster:
        load_cluster(cluster)                   # a bad --cluster or --profile is the command's error, not every row's
    if profile:
        load_profile(profile)
    out: list = []
    cache, groups, seen = {}, {}, set()
    for i, r in enumerate(rows):
        # csv.DictReader gives None for the cells a short row lacks and keys extra ones by None
        short = sum(v is None for k, v in r.items() if k is not None)
        line = r.get(LINE)
        r = {k: ("" if v is None else v) for k, v in r.items() if k not in (None, LINE)}
        # a row without an id is named by its line in the file, or its place among the data rows
        rid, src = (r.get("row_id") or "").strip() or f"{f'line {line}' if line else f'data row {i + 1}'}", source_name(r)
        bad = (f"{short} cell(s) fewer than the header's columns" if short else
               "duplicate row_id (an earlier row has it: that one is used, or reported if it was skipped; give each "
               "row its own id)" if rid in seen else _bad_number(r) or _row_problem(r))
        seen.add(rid)
        if bad:
            out.append(RowResult(rid, src, skipped=bad, line=line, malformed=True))
            continue
        try:
            got = _prepare(r, cache, (cluster, profile))
        except InputError as e:     # a recipe flag's value names the row's column; a file names itself
            got = (f"{e.where[2:].replace('-', '_')}: {_flags_as_columns(e.message)}" if e.where.startswith("--")
                   else str(e))
        if isinstance(got, str):
            out.append(RowResult(rid, src, skipped=got, line=line))
            continue
        key, model, recipe, row, res = got
        res.line = line
        out.append(res)
        groups.setdefault((key, model, recipe), []).append((row, res))
    mf_table = load_model_form()
    for (key, model, recipe), members in groups.items():
        cluster, profile = cache[key]
        pred = predict_table(model, recipe, cluster, profile, LayoutTable.from_rows([row for row, _ in members]))
        reg = regime(recipe.stack, cluster.gpu, model.params(), model.is_moe)
        mf, dtype = mf_table.sigma(reg), gemm_dtype(recipe)
        power = not missing_inputs(cluster, profile)
        for i, (row, res) in enumerate(members):
            # the step predict prints: clocks under the power limit where the GPU has a power model
            res.predicted_s = (float(layout_energy(model, recipe, cluster, profile,
                                                   pred.terms.take(np.array([i]))).step_time_s)
                               if power else float(pred.step_time_s[i]))
            res.predicted_oom = not bool(pred.feasible[i])
            res.regime = reg
            bd = {k: float(v[i]) for k, v in pred.breakdown.items()}
            res.band_rel = step_time_band(bd, row, cluster.gpus_per_node, profile, dtype, mf).rel
    return out


def source_name(r: dict) -> str:
    """The row's source as the report groups it: its ``source_file``, or "(no source_file)"."""
    return (r.get("source_file") or "").strip() or "(no source_file)"


def _flags_as_columns(message: str) -> str:
    """``message`` with each ``--flag`` that is a column of the schema named as that column (a row's
    precision is its cell, not a flag validate takes)."""
    def col(m):
        name = m.group(1).replace("-", "_")
        return f"the {name} column" if name in RUN_COLUMNS else m.group(0)
    return re.sub(r"--([a-z0-9][a-z0-9-]*)", col, message)


def _spearman(pairs) -> float | None:
    """Spearman's rho of (measured, predicted) pairs; None below 4 pairs or when either side is
    constant (rank correlation undefined)."""
    if len(pairs) < 4:
        return None
    m, p = zip(*pairs)
    if len(set(m)) < 2 or len(set(p)) < 2:
        return None
    from scipy.stats import spearmanr      # scipy.stats takes a second to import: only validate needs it
    return float(spearmanr(m, p).statistic)


def repeat_spread(pairs) -> dict | None:
    """What the measurement itself leaves unranked in one sweep: the rows the model was given the same
    inputs for (equal predictions) and their measured spread.

    Args:
        pairs: (measured_s, predicted_s) of one sweep's used rows.
    Returns:
        None when no two rows share a prediction; else {"groups": configurations measured more than
        once, "rows": rows in them, "max_spread_pct": largest (max / min - 1) x 100 of their measured
        steps, "ceiling": Spearman's rho of the measured steps against each configuration's mean
        measured step (the best rank agreement a model that sees only these inputs can reach; None
        when undefined)}.
    Formula: the noise ceiling of a rank correlation (repeated measurements of one condition bound the
    agreement any predictor of that condition can show).
    """
    groups: dict = {}
    for m, p in pairs:
        groups.setdefault(round(p, 9), []).append(m)
    repeated = [g for g in groups.values() if len(g) > 1]
    if not repeated:
        return None
    means = {k: float(np.mean(g)) for k, g in groups.items()}
    return {"groups": len(repeated), "rows": sum(len(g) for g in repeated),
            "max_spread_pct": float(max(100.0 * (max(g) / min(g) - 1.0) for g in repeated)),
            "ceiling": _spearman([(m, means[round(p, 9)]) for m, p in pairs])}


def summarize(results: list[RowResult]) -> dict:
    """Per source: rows used/skipped, mean and max |error| %; Spearman rank correlation per sweep.

    Returns {"sources": {source: {used, skipped, skip_reasons, skip_rows (reason -> row ids), metrics
    (column -> rows measured from it), predicted_oom (used rows whose predicted peak memory exceeds the GPU's: a published run
    that ran, so a memory-model miss), mean/max_abs_err_pct, spearman}},
    "overall": {...}, "spearman": {sweep: rho}, "spearman_repeats": {sweep: :func:`repeat_spread`}}.
    Spearman (scipy.stats.spearmanr) is computed within each group of >= 4 rows that share a
    source, model and GPU count (a configuration sweep); where a sweep measured one configuration
    more than once, spearman_repeats says how far apart and the rho its noise allows.
    """
    by_src: dict = {}
    for r in results:
        s = by_src.setdefault(r.source, {"used": 0, "skipped": 0, "abs_err": [], "skip_reasons": {}, "skip_rows": {},
                                         "metrics": {},
                                         "predicted_oom": 0, "covered": 0})
        if r.skipped:
            s["skipped"] += 1
            s["skip_reasons"][r.skipped] = s["skip_reasons"].get(r.skipped, 0) + 1
            s["skip_rows"].setdefault(r.skipped, []).append(r.row_id)
        else:
            s["used"] += 1
            s["abs_err"].append(abs(r.error_pct))
            s["metrics"][r.metric] = s["metrics"].get(r.metric, 0) + 1
            s["predicted_oom"] += int(r.predicted_oom)
            s["covered"] += int(r.covered)
    for src, s in by_src.items():
        pairs = [(r.measured_s, r.predicted_s) for r in results if r.source == src and not r.skipped]
        s["spearman"] = _spearman(pairs)
        e = s.pop("abs_err")
        s["mean_abs_err_pct"] = float(np.mean(e)) if e else None
        s["max_abs_err_pct"] = float(np.max(e)) if e else None
        covered = s.pop("covered")
        s["band_coverage"] = covered / s["used"] if s["used"] else None
    used = [abs(r.error_pct) for r in results if not r.skipped]
    sweeps: dict = {}
    for r in results:
        if not r.skipped:
            sweeps.setdefault(r.sweep, []).append((r.measured_s, r.predicted_s))
    rho = {k: r for k, v in sweeps.items() if (r := _spearman(v)) is not None}
    # a sweep of one prediction has no rho, but its measured spread is still worth a line
    repeats = {k: got for k, v in sweeps.items() if len(v) >= 4 and (got := repeat_spread(v)) is not None}
    overall = {"used": len(used), "skipped": len(results) - len(used),
               "predicted_oom": sum(int(r.predicted_oom) for r in results if not r.skipped),
               "band_coverage": (sum(int(r.covered) for r in results if not r.skipped) / len(used)) if used else None,
               "mean_abs_err_pct": float(np.mean(used)) if used else None,
               "max_abs_err_pct": float(np.max(used)) if used else None}
    return {"sources": by_src, "overall": overall, "spearman": rho, "spearman_repeats": repeats}
