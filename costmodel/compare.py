"""Compare a measured training run with the model's prediction of the same run, metric by metric.

Inputs are parsed measurements (``costmodel.readers``): a :class:`TrainingLog` (Megatron-LM,
Megatron-DeepSpeed, NeMo, torchtitan) and optionally power/temperature traces (:class:`PowerTrace`
from nvidia-smi CSV / dmon, DCGM, the suite's samples).  The layout, model size and recipe come from
the log's argument dump, filled or overridden by flags; a flag that contradicts the dump is an error.

Measured values (after the log's warm-up rows are dropped, :meth:`TrainingLog.aggregate`):

* step time: median of the kept ``step_time_s`` (spread: IQR);
* tokens/s/GPU = gbs x seq_len / step time / GPUs; model TFLOP/s/GPU = model FLOPs per step
  (Narayanan et al. SC21 / 6NT + attention, :func:`costmodel.compute.model_flops_per_step`, the
  convention of the prediction) / step time / GPUs; MFU = that / dense peak (DESIGN.md);
* the TFLOP/s the framework logged, in its own convention (Megatron-core and torchtitan: model FLOPs;
  Megatron-DeepSpeed ``TFLOPs``: executed FLOPs, 4/3 of model FLOPs under full recomputation), against
  the prediction converted to that convention;
* from the power trace, over the training window (see :func:`costmodel.trace_window.training_window`): average power per
  GPU (mean over GPUs of each GPU's mean), peak power per GPU (95th percentile of all samples: the
  densest sustained level a ~100 ms meter sees, the quantity ``peak_power_w`` predicts), energy per
  token = average power x GPUs x step time / tokens per step (GPU power only, as predicted),
  samples/(s.MJ) = (gbs / step time) / (energy per step / 1e6) (the seed paper's metric, as
  :mod:`costmodel.energy` predicts it), max GPU temperature, median SM clock.

Error % = 100 (predicted - measured) / measured.
"""
from __future__ import annotations

import ast

import math
from dataclasses import dataclass, field

import numpy as np

from . import metrics
from .errors import InputError
from .layout_fields import FIELD_SPECS, FIELDS
from .readers.training_logs.records import IMPLIED
from .specs import ModelSpec
from .trace_window import PEAK_PERCENTILE
from .specs.model import dense_layer_fields

LAYOUT_KEYS = FIELDS + ("gbs", "seq_len", "precision")
MODEL_KEYS = ("num_layers", "hidden", "ffn_hidden", "num_heads", "num_kv_heads", "vocab", "num_experts", "moe_topk",
              "moe_ffn_hidden")
# defaults where neither the dump nor a flag says: Megatron-LM's own argument defaults (arguments.py)
MEGATRON_DEFAULTS = dict(cp=1, ep=1, vp=1, recompute="none", recompute_num_layers=0, sp=False, zero=0, dp_replicate=1)
# what other stacks do where Megatron's default differs: torchtitan shards with FSDP2 over every
# data-parallel rank (data_parallel_shard_degree = -1 in its configs), llm-foundry with FSDP FULL_SHARD
# (torchtitan/config/job_config.py before 76d5c72e2, configs.py after: every parallel degree 1,
# data_parallel_shard_degree -1, sequence parallel with TP; its default activation checkpointing,
# "selective" with option "2", is full recompute of every second layer, which depends on the model:
# not defaulted); NeMo's pre-training configurations run the distributed optimizer and sequence
# parallelism (NeMo-Framework-Launcher conf/training/llama/llama2_70b.yaml and its siblings: optim.name
# distributed_fused_adam, sequence_parallel true), where Megatron-LM's arguments default both off
STACK_DEFAULTS = {"torchtitan": dict(tp=1, pp=1, cp=1, ep=1, vp=1, sp=True, zero=3),
                  # llm-foundry shards with FSDP and runs no model parallelism (costmodel.stacks: model_parallel ())
                  "llm-foundry": dict(tp=1, pp=1, cp=1, ep=1, vp=1, sp=False, zero=3),
                  # DeepSpeed's own engine: ZeRO data parallelism only (its zero stage from the config print)
                  "deepspeed": dict(tp=1, pp=1, cp=1, ep=1, vp=1, sp=False),
                  "nemo": dict(zero=1, sp=True)}
# a field neither the dump nor a flag gives: the layout's ``overlap`` lets communication hide under
# compute at all (Megatron's async TP backward all-reduce is on by default); the DP overlap itself is
# the recipe's ``dp_overlap`` (--overlap-grad-reduce, read from the dump, else the stack's default)
ASSUMED = dict(overlap=True)
MEGATRON_FAMILY = ("megatron", "megatron-legacy", "megatron-deepspeed", "nemo")
REQUIRED = ("tp", "pp", "mbs", "gbs", "seq_len")


@dataclass
class Resolved:
    """The run as the comparison models it: layout row, recipe fields, where each value came from."""

    layout: dict
    gbs: int
    seq_len: int
    precision: str
    world_size: int | None
    origin: dict = field(default_factory=dict)


def resolve_run(log_layout: dict, flags: dict, log_path: str, stack: str = "megatron",
                sources: dict | None = None) -> Resolved:
    """Merge the log's layout (``TrainingLog.layout()``) with flags; flags fill gaps, never contradict.

    Args:
        log_layout: key -> value or None (keys of :data:`LAYOUT_KEYS`, ``world_size``).
        flags: key -> value or None (None: flag not given).
        log_path: for messages.
        stack: the run's stack (costmodel.stacks): its defaults (:data:`STACK_DEFAULTS`) replace
            Megatron's where neither the dump nor a flag says.
        sources: key -> where the log gave it (``TrainingLog.layout_sources``: argument dump,
            start-up lines, iteration lines), for messages; the argument dump where not given.
        ``log_layout["gbs_floor"]``, where the log's consumed-sample counts bound the batch from below:
            a --gbs under it is refused.
    Returns:
        :class:`Resolved` (dp is left None when neither says: the caller derives it from the GPUs).
    Raises:
        InputError: a flag contradicts the dump (names the flag, both values and the file), a --gbs
            under the log's floor, or a required value (tp, pp, mbs, gbs, seq_len) is in neither.
    """
    missing = [k for k in REQUIRED if flags.get(k) is None and log_layout.get(k) is None
               and k not in STACK_DEFAULTS.get(stack, {})]
    if missing:
        raise InputError(" ".join(f"--{k.replace('_', '-')}" for k in missing), "",
                         f"not in the log ({log_path}): pass {'them' if len(missing) > 1 else 'it'}")
    out, origin = {}, {}
    for k in LAYOUT_KEYS:
        lv, fv = log_layout.get(k), flags.get(k)
        if fv is not None and lv is not None and differs(fv, lv):
            spec = FIELD_SPECS.get(k)
            flag = spec.flag_for(fv) if spec else f"--{k.replace('_', '-')}"
            said = "" if spec is not None and spec.kind == "bool" else f"{fv!r} "
            raise InputError(flag, "", f"{said}contradicts the log's "
                             f"{(sources or {}).get(k, 'argument dump')} ({log_path}: {k} = {lv!r}); drop the flag, "
                             "or pass --allow-override to let it win")
        if fv is not None:
            out[k], origin[k] = fv, ("log" if lv is not None and not differs(fv, lv) else "flag")
        elif lv is not None:
            # a value the dump implies without printing it says so (the key it lacks and the default)
            src = (sources or {}).get(k, "")
            out[k], origin[k] = lv, (f"log: {src}" if IMPLIED in src else "log")
        elif k in STACK_DEFAULTS.get(stack, {}):
            out[k], origin[k] = STACK_DEFAULTS[stack][k], f"{stack} default"
        elif k in MEGATRON_DEFAULTS:
            out[k] = MEGATRON_DEFAULTS[k]
            origin[k] = "Megatron default" if stack in MEGATRON_FAMILY else \
                f"not in the log: {MEGATRON_DEFAULTS[k]!r} assumed (pass --{k.replace('_', '-')} if the {stack} run differs)"
        elif k in ASSUMED:
            out[k], origin[k] = ASSUMED[k], "assumed on: communication may hide under compute; the DP overlap is dp_overlap"
        elif k in REQUIRED:
            raise InputError(f"--{k.replace('_', '-')}", "", f"not in the log ({log_path}): pass it")
        else:
            out[k], origin[k] = None, "unset"
    floor = log_layout.get("gbs_floor")
    if floor and origin["gbs"] == "flag" and out["gbs"] < floor:
        # a log that prints no batch size of its own (NeMo's progress bar): a ramp-up's early batches are
        # smaller than the last, never larger, so the mean so far bounds the batch from below
        raise InputError("--gbs", "", f"{out['gbs']} is less than the {floor} samples per step the log's "
                         f"consumed_samples count already averages ({log_path}): the run's global batch size is at "
                         "least that (a run resumed with a smaller batch: pass --allow-override)")
    lay = {k: out[k] for k in FIELDS}
    lay["sp"] = bool(lay["sp"]) and lay["tp"] > 1
    return Resolved(layout=lay, gbs=int(out["gbs"]), seq_len=int(out["seq_len"]), precision=out["precision"],
                    world_size=log_layout.get("world_size"), origin=origin)


def differs(a, b) -> bool:
    """True when a flag's value ``a`` disagrees with a logged ``b`` (numbers to 1e-9 relative)."""
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return not math.isclose(float(a), float(b), rel_tol=1e-9)
    return a != b


def check_model(model: ModelSpec, log_layout: dict, model_arg: str, log_path: str, args: dict | None = None) -> None:
    """The catalog/config model must match the dimensions the log prints: layers, hidden, FFN widths,
    heads, KV heads, experts, top-k, and from the raw dump ``args`` the architecture keys (swiglu,
    multi_latent_attention and its ranks, mtp_num_layers, the shared experts' width, moe_layer_freq's
    dense layers) where it prints them, and the parameter count a torchtitan log prints (within 1 %).

    Raises:
        InputError: the first printed value that differs, naming it.
    """
    args = args or {}
    arch = []
    if isinstance(args.get("swiglu"), bool):
        arch.append(("swiglu", model.gated, args["swiglu"]))
    if isinstance(args.get("multi_latent_attention"), bool):
        arch.append(("multi_latent_attention", model.is_mla, args["multi_latent_attention"]))
        if args["multi_latent_attention"] and model.is_mla:
            arch += [("kv_lora_rank", model.kv_lora_rank, args.get("kv_lora_rank")),
                     ("q_lora_rank", model.q_lora_rank, args.get("q_lora_rank") or 0)]
    if "mtp_num_layers" in args:
        arch.append(("mtp_num_layers", model.mtp_layers, args.get("mtp_num_layers") or 0))
    if model.is_moe and "moe_shared_expert_intermediate_size" in args:
        arch.append(("moe_shared_expert_intermediate_size", model.shared_ffn_hidden,
                     args.get("moe_shared_expert_intermediate_size") or 0))
    if model.is_moe and args.get("moe_layer_freq") is not None:
        flags = _moe_layer_pattern(args["moe_layer_freq"], model.num_layers, log_path)
        arch.append(("moe_layer_freq", f"{model.num_dense_layers} dense layers",
                     f"{flags.count(0)} dense layers"))
    logged = args.get("total_parameters")          # torchtitan's model-size line: all parameters
    if isinstance(logged, int) and logged > 0 and abs(model.params() / logged - 1) > 0.01:
        raise InputError("--model", "total_parameters", f"{model_arg} has {model.params():,} parameters, the log "
                         f"({log_path}) prints {logged:,}: pick the model that ran")
    for k, mv, lv in arch:
        if lv is not None and mv != lv:
            raise InputError("--model", k, f"{model_arg} has {mv!r}, the log ({log_path}) says "
                             f"{lv!r}: pick the model that ran")
    # Megatron's ffn_hidden_size is the dense MLP's width and moe_ffn_hidden_size the experts' (it
    # defaults to ffn_hidden_size: a dump without it, or of a dense model, gives the one width)
    moe_w = log_layout.get("moe_ffn_hidden")
    dense_w = (model.dense_mlp_width if not model.is_moe or model.num_dense_layers else None) if moe_w else \
        model.ffn_hidden
    pairs = (("num_layers", model.num_layers), ("hidden", model.hidden), ("num_heads", model.num_heads),
             ("num_kv_heads", model.num_kv_heads), ("num_experts", model.num_experts),
             ("moe_topk", model.topk if model.is_moe else None), ("ffn_hidden", dense_w),
             ("moe_ffn_hidden", model.ffn_hidden if model.is_moe else None))
    for k, mv in pairs:
        lv = log_layout.get(k)
        if k == "num_experts" and lv is not None and int(lv) <= 1:
            continue                   # Megatron prints num_experts None (or 1) for a dense model
        if lv is not None and mv is not None and int(lv) != int(mv):
            raise InputError("--model", k, f"{model_arg} has {k} = {mv}, the log ({log_path}) "
                             f"says {lv}: pick the model that ran")


def _moe_layer_pattern(value, num_layers: int, log_path: str) -> list:
    """Megatron's ``moe_layer_freq`` as one flag per layer (1 = MoE): an int N puts experts in every Nth
    layer from the first (``i % N == 0``), a list gives the flags, a string the Python expression
    Megatron evaluates ("([0]*3+[1]*58)": lists of 0/1, + and * by whole numbers only, read here
    without evaluating code).

    Raises:
        InputError: naming the log and moe_layer_freq, for anything else or a pattern of another length.
    """
    def bad(why):
        return InputError(log_path, "moe_layer_freq", f"{value!r}: {why}")

    def ev(node):
        if isinstance(node, ast.List) and all(isinstance(e, ast.Constant) and e.value in (0, 1) and
                                              not isinstance(e.value, bool) for e in node.elts):
            return [e.value for e in node.elts]
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            a, b = ev(node.left), ev(node.right)
            if isinstance(a, list) and isinstance(b, list):
                return a + b
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            a, b = ev(node.left), ev(node.right)
            if isinstance(a, list) and isinstance(b, int):
                return a * b
            if isinstance(a, int) and isinstance(b, list):
                return b * a
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        raise bad("not a layer pattern (an integer, or lists of 0 and 1 joined by + and *)")

    if isinstance(value, int) and not isinstance(value, bool):
        if value < 1:
            raise bad("expected a whole number >= 1")
        return [1 if i % value == 0 else 0 for i in range(num_layers)]
    try:
        flags = ev(ast.parse(str(value), mode="eval").body)
    except SyntaxError:
        raise bad("not a layer pattern (an integer, or lists of 0 and 1 joined by + and *)") from None
    if not isinstance(flags, list):
        return _moe_layer_pattern(flags, num_layers, log_path)
    if len(flags) != num_layers:
        raise bad(f"gives {len(flags)} layers, num_layers is {num_layers}")
    return flags


def model_from_log(log_layout: dict, args: dict, log_path: str) -> ModelSpec:
    """A ModelSpec from the log's argument dump (Megatron names: swiglu, untie_embeddings_and_output_weights,
    position_embedding_type, add_bias_linear, kv_channels; for MoE num_experts, moe_router_topk,
    moe_ffn_hidden_size (the experts' width, ffn_hidden_size then the dense layers'),
    moe_shared_expert_intermediate_size, moe_layer_freq; multi_latent_attention with q_lora_rank,
    kv_lora_rank, qk_head_dim, qk_pos_emb_head_dim, v_head_dim; mtp_num_layers), with Megatron's
    defaults (arguments.py / TransformerConfig) for the keys a dump leaves out.

    Raises:
        InputError: a dimension the model needs (layers, hidden, heads, vocab) is not in the dump, or
            a moe_layer_freq that is no layer pattern.
    """
    need = [k for k in ("num_layers", "hidden", "num_heads", "vocab") if log_layout.get(k) is None]
    if need:
        raise InputError("--model", "", f"the log ({log_path}) does not print {', '.join(need)}: pass --model "
                         "(catalog name or config.json)")
    h, heads, L = int(log_layout["hidden"]), int(log_layout["num_heads"]), int(log_layout["num_layers"])
    gated = bool(args.get("swiglu", False))
    # Megatron-LM's ffn_hidden_size when the run left it unset (arguments.py): 4h, or for SwiGLU
    # 2/3 of it rounded down to a multiple of 64 (its two input projections)
    ffn = int(log_layout.get("ffn_hidden") or (int(4 * h * 2 / 3 / 64) * 64 if gated else 4 * h))
    experts = int(log_layout.get("num_experts") or 1)
    if experts > 1 and not log_layout.get("moe_topk"):
        raise InputError(log_path, "moe_router_topk", f"not printed for a run with {experts} experts: the experts "
                         "each token takes set its cost (pass --model)")
    pos = str(args.get("position_embedding_type", "learned_absolute"))
    moe = {}
    if experts > 1:
        freq = args.get("moe_layer_freq")
        flags = _moe_layer_pattern(1 if freq is None else freq, L, log_path)     # Megatron's default: every layer
        dense_at = tuple(i for i, f in enumerate(flags) if not f)
        if len(dense_at) == L:
            raise InputError(log_path, "moe_layer_freq", f"places no MoE layer, yet the run has {experts} experts")
        moe = dict(ffn_hidden=int(log_layout.get("moe_ffn_hidden") or ffn), dense_ffn_hidden=ffn if dense_at else 0,
                   shared_ffn_hidden=int(args.get("moe_shared_expert_intermediate_size") or 0),
                   **dense_layer_fields(dense_at))
    mla = {}
    if args.get("multi_latent_attention") is True:
        # the KV latent sets the attention's size: no default stands in for it; q_lora_rank None is
        # Megatron-LM's default (no Q bottleneck), the head dims default to 128 / 64 / 128 (arguments.py)
        if not args.get("kv_lora_rank"):
            raise InputError(log_path, "kv_lora_rank", "not printed for a multi_latent_attention run: its KV latent "
                             "sets the attention's size (pass --model)")
        mla = dict(q_lora_rank=int(args.get("q_lora_rank") or 0), kv_lora_rank=int(args["kv_lora_rank"]),
                   qk_rope_head_dim=int(args.get("qk_pos_emb_head_dim") or 64),
                   v_head_dim=int(args.get("v_head_dim") or 128))
    head_dim = int(args.get("qk_head_dim") or 128) if mla else int(args.get("kv_channels") or h // heads)
    return ModelSpec(
        name="from-log", display_name=f"model of {log_path}", num_layers=L, hidden=h,
        ffn_hidden=moe.pop("ffn_hidden", ffn), num_heads=heads, num_kv_heads=heads if mla else int(log_layout.get("num_kv_heads") or heads),
        head_dim=head_dim, vocab=int(log_layout["vocab"]), gated=gated,
        activation="swiglu" if gated else "gelu", tie_embeddings=not args.get("untie_embeddings_and_output_weights", False),
        num_experts=experts, topk=int(log_layout.get("moe_topk") or 1), learned_positions=pos == "learned_absolute",
        max_positions=int(args.get("max_position_embeddings") or 0), dropout=float(args.get("hidden_dropout") or 0) > 0,
        bias=bool(args.get("add_bias_linear", True)), seq_len=int(log_layout.get("seq_len") or 0) or 2048,
        mtp_layers=int(args.get("mtp_num_layers") or 0), source=f"argument dump of {log_path}", **moe, **mla)


def catalog_models_where(test) -> list[str]:
    """The names of the catalog models (costmodel/catalog) whose ModelSpec passes ``test``, in catalog order:
    what compare suggests for --model when a log's shape or parameter count is one of theirs."""
    from .specs.model import list_models, load_model
    return [n for n in list_models() if test(load_model(n))]


def dump_defaults_note(m: ModelSpec, args: dict) -> str:
    """The clause that follows a model read from an argument dump: the value Megatron's default gave each
    structure key the dump leaves out (:func:`model_from_log`), and the catalog models whose sizes (layers,
    hidden, heads, KV heads, vocabulary, experts) the dump's are, when their structure differs: a partial
    dump of a SwiGLU model reads as a GeLU one.  '' when the dump gives every key."""
    said = lambda k: args.get(k) is not None        # noqa: E731
    values = {"swiglu": "off (a GeLU MLP)", "untie_embeddings_and_output_weights": "off (tied embeddings)",
              "position_embedding_type": "learned_absolute", "add_bias_linear": "on (biased linears)",
              "ffn_hidden_size": f"{m.dense_mlp_width if m.is_moe else m.ffn_hidden} (Megatron's default: 4 x hidden, "
                                 "2/3 of it with SwiGLU)"}
    if args.get("multi_latent_attention") is True:
        values.update(q_lora_rank="none", qk_head_dim="128", qk_pos_emb_head_dim="64", v_head_dim="128")
    unsaid = [f"{k} {v}" for k, v in values.items() if not said(k)]
    if not unsaid:
        return ""
    shape = lambda x: (x.num_layers, x.hidden, x.num_heads, x.num_kv_heads, x.vocab, x.num_experts)  # noqa: E731
    built = lambda x: (x.gated, x.tie_embeddings)      # noqa: E731
    alike = catalog_models_where(lambda x: shape(x) == shape(m) and built(x) != built(m))
    return (f"; not in the dump, Megatron's defaults: {', '.join(unsaid)}"
            + (f"; its sizes are the catalog's {' / '.join(alike)}, built otherwise: pass --model if the run trained it"
               if alike else ""))


def _fastest_catalog_peak(dtype: str) -> float:
    """The highest dense peak in ``dtype`` of the catalog's GPUs (hardware/gpus), FLOP/s; 0 where none has one."""
    from .specs.hardware import list_gpus, load_gpu
    return max((load_gpu(g).peak_flops.get(dtype, 0.0) for g in list_gpus()), default=0.0)


def check_measured_rate(m, recipe, c, metrics: list, log: str, model_flag: bool = False,
                        origin: dict | None = None) -> None:
    """Refuse a log whose measured step no run of this model could have made on this cluster: more
    model FLOP/s per GPU (causal attention, the least count) than the GPU's dense peak in the recipe's
    GEMM dtype (the run ran on other GPUs), or under validate's MIN_PEAK_FRACTION of it (a step in
    other units, or an edited log), as validate does for a published row; or a logged peak memory above
    the GPU's whole memory, or a TFLOP/s the log prints above the peak even where it counts the attention
    scores a causal kernel skips.  ``model_flag`` (the model came from --model) and ``origin`` (field -> 'flag',
    'log', ...): the flags that set the model, batch or sequence, named beside --cluster as what else
    can be wrong.

    Raises:
        InputError: naming the log (above every catalog GPU's peak: a time in other units; below the
            floor), --cluster and ``given`` (above this GPU's peak) or --cluster (above the memory, or a
            printed TFLOP/s above the peak).
    """
    from .compute import gemm_dtype, model_flops_per_step
    from .validate import MIN_PEAK_FRACTION
    st = next((x["measured"] for x in metrics if x["name"] == "step_time_s"), None)
    peak = c.gpu.peak_flops.get(gemm_dtype(recipe), 0.0)
    rate = model_flops_per_step(m, recipe, causal=True) / (st * c.num_gpus) if st else 0.0
    given = tuple(f for f, on in (("--model", model_flag), ("--gbs", (origin or {}).get("gbs") == "flag"),
                                   ("--seq-len", (origin or {}).get("seq_len") == "flag")) if on)
    fastest = _fastest_catalog_peak(gemm_dtype(recipe)) if peak and rate > peak else 0.0
    if peak and rate > max(peak, fastest):
        raise InputError(log, "", f"its step time ({st:.4g} s) makes {rate / 1e12:.0f} TFLOP/s per GPU, above the "
                         f"dense {gemm_dtype(recipe)} peak of every GPU in the catalog ({fastest / 1e12:.0f} at most): "
                         "not a step any GPU took (a time in other units, or an edited log)")
    if peak and rate > peak:
        others = (f", or {' / '.join(given)} (given, not read from the log) is not the run's" if given else "")
        raise InputError(" ".join(("--cluster",) + tuple(given)), "", f"the log's step time makes {rate / 1e12:.0f} "
                         f"TFLOP/s per GPU, above {c.gpu.name}'s dense {gemm_dtype(recipe)} peak of {peak / 1e12:.0f} "
                         f"({c.key}): the run did not run on these GPUs{others}; name the cluster it ran on")
    # the log's own TFLOP/s: executed FLOPs, unless it counts the whole s x s attention block where a causal
    # kernel runs half of it; above the peak even at that count, the run ran elsewhere whatever our model
    printed = next((x["measured"] for x in metrics if x["name"] == "logged_tflops_per_gpu"), None)
    full_attn = model_flops_per_step(m, recipe) / model_flops_per_step(m, recipe, causal=True)
    if peak and printed and printed * 1e12 > peak * full_attn:
        raise InputError("--cluster", "", f"the log prints {printed:.1f} TFLOP/s per GPU, above {c.gpu.name}'s dense "
                         f"{gemm_dtype(recipe)} peak of {peak / 1e12:.0f} ({c.key}) even if it counts every attention "
                         "score a causal kernel skips: the run did not run on these GPUs; name the cluster it ran on")
    mem = next((x["measured"] for x in metrics if x["name"] == "peak_memory_gib"), None)
    if mem and mem * 2**30 > c.gpu.total_capacity_bytes * 1.01:      # 1%: the print's rounding
        raise InputError("--cluster", "", f"the log's peak memory {mem:.1f} GiB is more than {c.gpu.name}'s "
                         f"{c.gpu.total_capacity_bytes / 2**30:.1f} GiB ({c.key}): the run did not run on these GPUs; "
                         "name the cluster it ran on")
    if peak and st and rate < MIN_PEAK_FRACTION * peak:
        raise InputError(log, "", f"its step time ({st:.4g} s) makes {rate / 1e12:.3g} TFLOP/s per GPU, under "
                         f"{100 * MIN_PEAK_FRACTION:g}% of {c.gpu.name}'s dense {gemm_dtype(recipe)} peak: not a step of "
                         "this model and batch on these GPUs (a time in other units, or an edited log)")


def wall_clock_note(iteration, t_unix, step_time_s) -> str | None:
    """What the records' wall-clock times say of their printed step times, or None when they agree.

    Over the kept records (arrays: iteration numbers, print times in Unix s, printed step times in s), the
    clock's seconds per iteration, (last t - first t) / (last iteration - first iteration), against the
    median printed step: below 2/3 of it the printed steps take longer than the wall clock allows (an
    edited log, or another run's lines), above 3 times it the run spent time between records that no
    step counts (evaluation, checkpoints, stalls; the step time printed is the one compared).  None
    with fewer than 20 s of clock (a one-second timestamp resolution) where the printed steps add to
    under a minute, or with no times.
    """
    it, t, st = (np.asarray(x, dtype=np.float64) for x in (iteration, t_unix, step_time_s))
    ok = np.isfinite(it) & np.isfinite(t)
    st = st[np.isfinite(st) & (st > 0)]
    if ok.sum() < 2 or not st.size:
        return None
    it, t = it[ok], t[ok]
    span, steps = float(t.max() - t.min()), float(it.max() - it.min())
    step = float(np.median(st))
    # under 20 s of clock the timestamps' resolution decides, unless the printed steps add to three
    # times that (a clock that stood still through a minute of printed steps)
    if steps <= 0 or (span < 20.0 and steps * step < 60.0):
        return None
    per = span / steps
    if per < step * 2 / 3:
        return (f"its timestamps advance {per:.3g} s per iteration, the printed step time is {step:.3g} s: the steps "
                "take longer than the clock allows (an edited log, or lines of another run)")
    if per > 3 * step:
        return (f"its timestamps advance {per:.3g} s per iteration, {per / step:.1f}x the printed step time "
                f"{step:.3g} s: time between the records (evaluation, checkpoints, stalls) is not in the step "
                "compared")
    return None


# ------------------------------------------------------------------------------------------ metrics
#: units on an interval scale, whose zero is not "none of it": a percentage of a Celsius reading means
#: nothing, so their error is the difference (``error_abs``, in the unit) and ``error_pct`` is None
INTERVAL_UNITS = ("C",)


def _metric(name, unit, measured, predicted, band=None, note=None):
    ok = lambda v: v is not None and isinstance(v, (int, float)) and math.isfinite(v)
    meas = float(measured) if ok(measured) else None
    pred = float(predicted) if ok(predicted) else None
    both = meas is not None and pred is not None
    err = 100.0 * (pred - meas) / meas if both and meas != 0.0 and unit not in INTERVAL_UNITS else None
    d = dict(name=name, unit=unit, measured=meas, predicted=pred, error_pct=err)
    if unit in INTERVAL_UNITS:
        d["error_abs"] = pred - meas if both else None
    if band is not None:
        d["predicted_band"] = float(band)
    if note:
        d["note"] = note
    return d


#: Megatron-LM's logged TFLOP/s counts causal attention, half the s x s scores, since commit 8873b55d
#: (2025-03-06, megatron/training/training.py num_floating_point_operations: "Only half of the
#: attention matrix is non-zero and needs to be multiplied with V"); before it, the whole s x s
MEGATRON_CAUSAL_FLOPS_SINCE_UNIX = 1741219200.0       # 2025-03-06 00:00 UTC


def logged_tflops_factor(framework: str, recompute: str, model=None, recipe=None, log_unix=None,
                         measured_ratio=None) -> tuple[float, str]:
    """Factor from model FLOPs (full s x s attention) to the FLOPs a framework's logged TFLOP/s counts,
    with its convention.  Megatron-LM's depends on its version (:data:`MEGATRON_CAUSAL_FLOPS_SINCE_UNIX`):
    told by the log's first timestamp (``log_unix``, s), else by the convention nearer the logged
    figure (``measured_ratio``: model FLOPs at the measured step over the logged ones); ``model`` and
    ``recipe`` price the causal count (costmodel.compute.model_flops_per_step)."""
    if framework == "megatron-deepspeed":
        return (4.0 / 3.0 if recompute == "full" else 1.0), "executed FLOPs (Megatron-DeepSpeed 'TFLOPs')"
    if framework != "megatron" or model is None or recipe is None:
        return 1.0, "model FLOPs"
    from .compute import model_flops_per_step
    causal = model_flops_per_step(model, recipe, causal=True) / model_flops_per_step(model, recipe)
    if log_unix is not None and log_unix == log_unix:
        if log_unix >= MEGATRON_CAUSAL_FLOPS_SINCE_UNIX:
            return causal, "model FLOPs, causal attention (Megatron-LM since 2025-03-06, the log's date)"
        return 1.0, "model FLOPs, the whole s x s attention (Megatron-LM before 2025-03-06, the log's date)"
    if measured_ratio is not None and abs(causal * measured_ratio - 1) < abs(measured_ratio - 1):
        return causal, ("model FLOPs, causal attention (Megatron-LM since 2025-03-06: the nearer to the logged "
                        "figure)")
    return 1.0, ("model FLOPs, the whole s x s attention (Megatron-LM before 2025-03-06: the nearer to the "
                 "logged figure)")


#: the logged peak reserved memory over the predicted tensors' peak beyond which compare warns (a bound
#: for a message, not a model constant): PyTorch's caching allocator reserves its cache and fragmentation
#: above the tensors (PyTorch docs, "CUDA semantics: memory management"), so a little above is expected
MEMORY_RATIO_WARN = (0.9, 1.5)


def logged_memory_check(rows: list) -> list[str]:
    """A warning when the log's peak memory is outside :data:`MEMORY_RATIO_WARN` times the predicted
    peak: a batch, recompute or sharding setting is likely not the run's (or the model misses memory)."""
    m = next((r for r in rows if r["name"] == "peak_memory_gib"), None)
    if not m or not m["measured"] or not m["predicted"]:
        return []
    ratio = m["measured"] / m["predicted"]
    lo, hi = MEMORY_RATIO_WARN
    if lo <= ratio <= hi:
        return []
    return [f"the log's peak memory {m['measured']:.1f} GiB is {ratio:.2f}x the predicted {m['predicted']:.1f} GiB "
            f"(outside {lo:g}-{hi:g}x, what the allocator's cache explains): check --mbs, --recompute and --zero "
            "against the run; if they are its own, the memory model misses what this run holds"]


def logged_flops_check(rows: list, framework: str, recompute: str, origin: dict | None = None) -> list[str]:
    """A warning when the log's own TFLOP/s/GPU disagrees by more than 10% with the model FLOPs per
    measured step of the model, sequence length and batch used: one of them is not the run's.  The
    warning says where the sequence length and the global batch came from (``origin``: "flag", "log:
    ..." or a default), so the suspect is the one the log did not give."""
    by = {r["name"]: r for r in rows}
    src = lambda k: ("the log" if str((origin or {}).get(k, "")).startswith("log") else     # noqa: E731
                     f"--{k.replace('_', '-')}" if (origin or {}).get(k) == "flag" else str((origin or {}).get(k, "?")))
    logged, model = by.get("logged_tflops_per_gpu"), by.get("model_tflops_per_gpu")
    if not logged or not model or not logged["measured"] or not model["measured"] == model["measured"]:
        return _logged_mfu_check(by, src)
    # the convention build_metrics priced the logged figure in: its predicted over the model FLOPs'
    f = (logged["predicted"] / model["predicted"] if logged.get("predicted") and model.get("predicted")
         else logged_tflops_factor(framework, recompute)[0])
    ratio = f * model["measured"] / logged["measured"]
    if abs(ratio - 1) <= 0.10:
        return []
    # Megatron-DeepSpeed counts a full recompute's extra forward (4/3): a ratio of 3/4 says the run recomputed
    hint = ("; the log's figure is 4/3 of it, as Megatron-DeepSpeed counts full recomputation: pass --recompute full"
            if framework == "megatron-deepspeed" and recompute != "full" and abs(ratio - 0.75) <= 0.02 else "")
    return [f"the log prints {logged['measured']:.1f} TFLOP/s/GPU, but the model with seq_len from {src('seq_len')} and "
            f"gbs from {src('gbs')} makes {f * model['measured']:.1f} at the measured step ({100 * (ratio - 1):+.0f}%): "
            "one of them is not the run's" + hint]


def _logged_mfu_check(by: dict, src) -> list[str]:
    """:func:`logged_flops_check` for a log that prints an MFU and no TFLOP/s (torchtitan without
    ``tflops``): the model's MFU at the measured step against the log's, the same 10%."""
    logged, ours = by.get("logged_mfu"), by.get("mfu")
    if not logged or not ours or not logged["measured"] or not ours["measured"] == ours["measured"]:
        return []
    ratio = ours["measured"] / logged["measured"]
    if abs(ratio - 1) <= 0.10:
        return []
    return [f"the log prints an MFU of {100 * logged['measured']:.1f}%, but the model with seq_len from "
            f"{src('seq_len')} and gbs from {src('gbs')} makes {100 * ours['measured']:.1f}% at the measured step "
            f"({100 * (ratio - 1):+.0f}%): one of them, or the model, is not the run's (or the framework divides by "
            "another peak than the GPU's dense BF16 datasheet figure)"]


def build_metrics(run, agg: dict, framework: str, power: dict | None, log_unix=None) -> list:
    """The comparison rows (names stable: the ``--json`` contract in the README).

    Args:
        run: the :class:`costmodel.predict.RunPrediction` of the logged run (band and energy when the
            profile has them).
        agg: ``TrainingLog.aggregate()``.  power: :func:`costmodel.trace_window.trace_metrics` aggregate or None.
        log_unix: the log's first timestamp (s), which tells Megatron-LM's FLOP convention (or None).
    Measured and predicted figures both come from costmodel.metrics.
    """
    model, recipe, cluster, num_gpus = run.model, run.recipe, run.cluster, run.cluster.num_gpus
    st = agg["step_time_s"].median if agg["step_time_s"].n else float("nan")
    meas_tok = metrics.tokens_per_s_per_gpu(recipe, st, num_gpus) if st == st else agg["tokens_per_s_per_gpu"].median
    if not st == st and meas_tok == meas_tok and meas_tok:
        st = metrics.tokens_per_step(recipe) / meas_tok / num_gpus      # torchtitan: step time from tokens/s
    t_pred = run.step_time_s
    band = run.step_time_band_s if run.band is not None and run.band.rel > 0 else None
    out = [
        _metric("step_time_s", "s", st, t_pred, band),
        _metric("tokens_per_s_per_gpu", "tokens/s", meas_tok, run.tokens_per_s_per_gpu),
        _metric("model_tflops_per_gpu", "TFLOP/s", metrics.model_tflops_per_gpu(model, recipe, st, num_gpus),
                run.model_tflops_per_gpu),
        _metric("mfu", "fraction", metrics.mfu(model, recipe, cluster, st, num_gpus), run.mfu),
    ]
    lt = agg["tflops_per_gpu"]
    if lt.n:
        mt = metrics.model_tflops_per_gpu(model, recipe, st, num_gpus)
        f, conv = logged_tflops_factor(framework, run.layout["recompute"], model, recipe, log_unix,
                                       mt / lt.median if lt.median else None)
        out.append(_metric("logged_tflops_per_gpu", "TFLOP/s", lt.median, f * run.model_tflops_per_gpu,
                           note=f"as the log prints it: {conv}"))
    lm = agg.get("mfu")
    if lm is not None and lm.n:
        out.append(_metric("logged_mfu", "fraction", lm.median, run.mfu,
                           note="as the log prints it: model FLOPs over the framework's own peak"))
    mem = agg.get("memory_gib")
    if mem is not None and mem.n:
        out.append(_metric("peak_memory_gib", "GiB", mem.median, run.peak_mem_bytes / 2**30,
                           note="measured: the peak the log prints (torchtitan's memory, Megatron's report_memory "
                                "max reserved of its fullest rank: the caching allocator's peak reserved, which holds "
                                "its cache and fragmentation above the tensors priced; DeepSpeed's MaxMemAllocated: "
                                "the tensors' own peak)"))
    if power is not None:
        e = run.energy
        avg = power["avg_power_w"]
        e_meas = avg * num_gpus * st if avg == avg else None
        seen = power.get("n_gpus")
        # a trace of some of the run's GPUs (one node of several) stands for all of them
        scaled = (f"measured: the mean power of the trace's {seen} GPUs times the run's {num_gpus}"
                  if seen and seen < num_gpus else None)
        out += [_metric("avg_power_w", "W", avg, e and e.avg_power_w),
                _metric("peak_power_w", "W", power["peak_power_w"], e and e.peak_power_w,
                        note=f"measured: {PEAK_PERCENTILE:.0f}th percentile of samples"),
                _metric("energy_j_per_token", "J/token", e_meas and metrics.energy_j_per_token(recipe, e_meas),
                        e and metrics.energy_j_per_token(recipe, e.energy_j_per_step), note=scaled),
                _metric("samples_per_s_per_mj", "samples/(s.MJ)",
                        e_meas and metrics.samples_per_s_per_mj(recipe, st, e_meas), e and e.samples_per_s_per_mj,
                        note=scaled),
                _metric("max_temp_c", "C", power["max_temp_c"], _captured_max_temp_c(e, power.get("gpus"), num_gpus),
                        note="predicted: the hottest of the captured slots (node 0's, as the per-GPU table)"
                        if power.get("gpus") and len(power["gpus"]) < num_gpus else None),
                _metric("sm_clock_mhz", "MHz", power["sm_clock_mhz"], e and e.sm_clock_mhz)]
    return out


def _captured_max_temp_c(energy, captured, num_gpus: int):
    """The predicted temperature to score a capture's hottest GPU against: the run's hottest GPU when the
    capture holds every GPU, else the hottest of node 0's slots it captured (the slots the per-GPU table
    pairs it with: a one-GPU capture of a front slot is not the rear slot's temperature); None without
    an energy report or a captured slot the prediction has."""
    if energy is None:
        return None
    if not captured or len(captured) >= num_gpus:
        return energy.max_temp_c
    slots = set(captured)
    temps = [r["temp_c"] for r in energy.per_gpu if r.get("node") == 0 and r.get("slot") in slots]
    return max(temps) if temps else None


def per_gpu_rows(measured_rows: list, predicted_rows: list | None, node: int = 0) -> list:
    """Measured per-GPU rows (hottest first) with the predicted values of the same slot of ``node``."""
    pred = {r["slot"]: r for r in (predicted_rows or []) if r["node"] == node}
    out = []
    for r in measured_rows:
        p = pred.get(r["gpu"], {})
        out.append(dict(r, predicted_avg_power_w=p.get("power_w"), predicted_peak_power_w=p.get("peak_power_w"),
                        predicted_temp_c=p.get("temp_c"), predicted_sm_clock_mhz=p.get("sm_clock_mhz"),
                        stage=p.get("stage")))
    return out


def throttle_warnings(rows: list) -> list:
    """One line per GPU the trace shows throttled, naming why and how often (rows of :func:`costmodel.trace_window.trace_metrics`)."""
    out = []
    for r in rows:
        t = r.get("throttle") or {}
        if t:
            why = ", ".join(f"{k} {100 * v:.0f}%" for k, v in sorted(t.items(), key=lambda kv: -kv[1]))
            out.append(f"GPU {r['gpu']} throttled in the training window: {why} of its samples")
    return out
