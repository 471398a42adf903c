"""The recipe switches a training log states: Megatron's argument dump and its MoE loss records.

``compare`` predicts a logged run with the recipe the run used.  Each switch (costmodel.stacks
RECIPE_SWITCHES) comes from the key of Megatron-LM's argument dump in :data:`DUMP_KEYS` when the
dump prints it with a value the model knows; a value it does not know is reported and left to the
stack's default, never guessed.  The router's imbalance comes from the iteration records: Megatron-
core logs ``load_balancing_loss``, its auxiliary loss over the coefficient, E sum_i P_i f_i (1 when
balanced; moe_utils.switch_load_balancing_loss_func), whose excess over 1 bounds the squared
coefficient of variation of the expert loads from below (costmodel.moe).
"""
from __future__ import annotations

import math

import numpy as np

from .errors import InputError
from .formats import FP8_FORMATS, FP8_RECIPE_STACKS, TE_FP8_RECIPES
from .moe import max_load_cv
from .specs import (MOE_DISPATCHER_ALIASES, MOE_DISPATCHERS, OPTIMIZERS, RECOMPUTE_MODULES, megatron_capacity_factor,
                    megatron_cross_entropy)
from .recipe_switches import MOE_FLAG_SWITCHES, RECIPE_SWITCHES
from .stacks import attention_backend_switches

#: recipe switch -> the Megatron argument-dump key (or iteration field) it is read from: the
#: switch's ``megatron_key`` (costmodel.stacks), else the argument that implies it
DUMP_KEYS = {**{s.name: s.megatron_key for s in RECIPE_SWITCHES if s.megatron_key},
             "flash_attention": "use_flash_attn", "cross_entropy": "cross_entropy_loss_fusion",
             "moe_expert_load_cv": "load_balancing_loss", "bf16_edge_layers": "first_last_layers_bf16",
             "optimizer_offload": "optimizer_cpu_offload", "fused_elementwise": "torch_compile"}
#: Megatron-LM's argument for the DP gradient buffer's dtype under bf16 (megatron/training/arguments.py
#: validate_args: on unless --grad-reduce-in-bf16 or --main-grads-dtype bf16)
_FP32_GRADS = "accumulate_allreduce_grads_in_fp32"
#: dtype spellings of an argument dump (torch dtypes print as torch.bfloat16)
_DTYPES = {"torch.bfloat16": "bf16", "bfloat16": "bf16", "bf16": "bf16", "torch.float32": "fp32", "float32": "fp32",
           "fp32": "fp32"}


def _bool(a: dict, key: str, out: dict, switch: str, notes: list) -> None:
    if key in a:
        if isinstance(a[key], bool):
            out[switch] = a[key]
        else:
            notes.append(f"argument dump: {key} = {a[key]!r} is not true/false: not used")


def logged_switches(tlog, moe: bool, num_experts: int = 1) -> tuple[dict, dict, list]:
    """The recipe switches ``tlog`` (a costmodel.readers.TrainingLog) states.

    Returns:
        (switch -> value, switch -> a description of where it was read, notes on values not used).
    Raises:
        InputError: (on ``tlog.path``, field cp_comm_type) context parallelism > 1 with a
            ``cp_comm_type`` other than p2p (a2a, allgather, a2a+p2p): the model prices only the p2p ring.
    """
    a, out, notes = tlog.args, {}, []
    cp_comm = str(a.get("cp_comm_type") or "p2p").strip("[]'\" ")
    if (a.get("context_parallel_size") or 1) > 1 and cp_comm not in ("p2p", "None"):
        # Megatron --cp-comm-type a2a / allgather / a2a+p2p (Transformer Engine's CP attention) move other
        # tensors at other times than the ring the model prices
        raise InputError(tlog.path, "cp_comm_type", f"{a['cp_comm_type']!r} is not priced: the model prices "
                         "context parallelism as the p2p ring (Megatron's default)")
    if "use_flash_attn" in a:
        out["flash_attention"] = bool(a["use_flash_attn"])
    if a.get("attention_backend") not in (None, "None"):
        sw = attention_backend_switches(a["attention_backend"])
        if sw is None:
            notes.append(f"argument dump: attention_backend = {a['attention_backend']!r} is not a Megatron-core "
                         "backend (flash, fused, unfused, local, auto): not used")
        else:
            out.update(sw)
    keys = [k for k in ("tp_comm_overlap", "ub_tp_comm_overlap") if k in a]
    if keys:
        out["tp_comm_overlap"] = bool(a[keys[0]])
    if str(a.get("optimizer", "")).lower() in OPTIMIZERS:       # Megatron-LM's adam (AdamW) or sgd
        out["optimizer"] = str(a["optimizer"]).lower()
    if isinstance(a.get("cross_entropy_loss_fusion"), bool):
        # False: Megatron's vocab-parallel cross-entropy, unfused (its default), as the dump says; fused, its
        # native jit-fused steps unless the dump names Transformer Engine's kernel
        out["cross_entropy"] = megatron_cross_entropy(a["cross_entropy_loss_fusion"], a.get("cross_entropy_fusion_impl"))
    _bool(a, "overlap_grad_reduce", out, "dp_overlap", notes)
    _bool(a, "overlap_p2p_comm", out, "pp_overlap", notes)
    _bool(a, "optimizer_cpu_offload", out, "optimizer_offload", notes)
    if a.get("overlap_grad_reduce") is True and a.get("overlap_param_gather") is False and a.get("use_distributed_optimizer"):
        notes.append("argument dump: overlap_param_gather = False beside overlap_grad_reduce = True: the parameter "
                     "all-gather is priced overlapped as well (one DP-overlap switch)")
    if isinstance(a.get("fp8_param_gather"), bool) and (a.get("fp8") in (None, False, "None") or
                                                        str(a.get("fp8_recipe", "")) == "mxfp8"):
        if a["fp8_param_gather"]:
            notes.append("argument dump: fp8_param_gather = True without per-tensor fp8: priced as 16-bit "
                         "parameter gathers and weights")
    else:
        _bool(a, "fp8_param_gather", out, "fp8_param_gather", notes)
    lb = str(a.get("moe_router_load_balancing_type") or "").strip("[]'\" ")
    if lb in ("none", "seq_aux_loss"):
        notes.append(f"argument dump: moe_router_load_balancing_type = {lb!r}: the expert load is not read from the "
                     "log (its load_balancing_loss bound is for aux_loss); routing priced as given by "
                     "--moe-expert-load-cv (uniform by default)")
    notes += _unpriced_notes(a)
    if a.get("fp8") not in (None, False, True, "None") and str(a["fp8"]).lower() not in FP8_FORMATS:
        notes.append(f"argument dump: fp8 = {a['fp8']!r} is not an --fp8-format value ({', '.join(FP8_FORMATS)}): "
                     "the precision is not read from the log")
    elif a.get("fp8") not in (None, False, "None") and "fp8_recipe" in a:
        rec = str(a["fp8_recipe"])
        if rec in TE_FP8_RECIPES or getattr(tlog, "framework", None) in FP8_RECIPE_STACKS.get(rec, ()):
            out["fp8_recipe"] = rec
        elif rec == "blockwise":
            out["fp8_recipe"] = "delayed"
            notes.append("argument dump: fp8_recipe = 'blockwise' (block-wise scaling) is priced as delayed per-tensor "
                         "fp8: its casts move about as many bytes, but its block-scaled GEMM, slower on Hopper, is "
                         "not modelled")
        elif rec != "mxfp8":                 # mxfp8 is a precision of its own (the dump reader's)
            notes.append(f"argument dump: fp8_recipe = {a['fp8_recipe']!r} is not a recipe the model prices "
                         f"({', '.join(TE_FP8_RECIPES)}, blockwise as delayed, mxfp8): not used")
    if a.get("use_precision_aware_optimizer") is True:
        for switch, key in ((k, DUMP_KEYS[k]) for k in ("main_grads_dtype", "optimizer_states_dtype")):
            if key in a:
                d = _DTYPES.get(str(a[key]))
                if d is None:
                    notes.append(f"argument dump: {key} = {a[key]!r} is not fp32 or bf16: not used")
                else:
                    out[switch] = d
    grads_from = None if "main_grads_dtype" in out else _grads_dtype(tlog, out, notes)
    mods = _dump_list(a.get("recompute_modules"))
    if isinstance(mods, (list, tuple)) and mods and all(isinstance(x, str) for x in mods):
        known = [x for x in mods if x in RECOMPUTE_MODULES]
        if len(known) == len(mods) and len(set(known)) == len(known):
            out["recompute_modules"] = ",".join(known)
        else:
            notes.append(f"argument dump: recompute_modules = {mods!r} names modules the model does not price "
                         f"({', '.join(RECOMPUTE_MODULES)}): the default core_attn used")
    _edge_layers(a, out, notes)
    if moe:
        _moe_switches(a, out, notes)
        lbl = load_balancing_loss(tlog, num_experts, notes)
        topk = a.get("moe_router_topk")
        cv_max = max_load_cv(num_experts, topk) if isinstance(topk, int) and 0 < topk < num_experts else math.inf
        if lbl is not None and math.sqrt(max(lbl - 1.0, 0.0)) > cv_max:
            notes.append(f"load_balancing_loss median {lbl:.4f}: sqrt(L - 1) exceeds sqrt(E/k - 1) = {cv_max:.3g}, "
                         "the most spread loads top-k routing allows (a loss scaled by its coefficient?): not used")
        elif lbl is not None:
            out["moe_expert_load_cv"] = math.sqrt(max(lbl - 1.0, 0.0))
    if a.get("torch_compile") is True:
        out["fused_elementwise"] = True         # torch.compile fuses the norms, RoPE and SwiGLU
    where = {k: dump_key(k, a) + (f" (median {lbl:.4f} of the kept iterations; sqrt(L - 1), a lower bound)"
                                  if k == "moe_expert_load_cv" else f" = {a.get(dump_key(k, a))!r}")
             for k in out}
    if grads_from:
        where["main_grads_dtype"] = grads_from
    dated = _torchtitan_repeat_kv(tlog)
    if dated:
        out["kv_repeat"], where["kv_repeat"] = True, dated
    return out, where, notes


#: when torchtitan's attention stopped repeating GQA's K/V heads: pytorch/torchtitan#2259, "GQA without kv
#: repeats", merged as commit ff0829c1 on 2026-01-27 (its Llama, Qwen 3, Llama 4 and GPT-OSS attention)
TORCHTITAN_GQA_NATIVE_UNIX = 1769472000.0          # 2026-01-27 00:00 UTC


def _torchtitan_repeat_kv(tlog) -> str:
    """Where a torchtitan log says its run repeated the K/V heads ('' when it does not): every record
    dated before :data:`TORCHTITAN_GQA_NATIVE_UNIX` ran a torchtitan that did (a later date says
    nothing of the version, and the stack's default holds)."""
    its = getattr(tlog, "iterations", None)
    if getattr(tlog, "framework", None) != "torchtitan" or its is None:
        return ""
    t = np.asarray(its.t_unix, dtype=np.float64)
    t = t[np.isfinite(t)]
    if not t.size or t.max() >= TORCHTITAN_GQA_NATIVE_UNIX:
        return ""
    from datetime import datetime, timezone
    day = datetime.fromtimestamp(float(t.max()), tz=timezone.utc).strftime("%Y-%m-%d")
    return (f"records dated {day}, before pytorch/torchtitan#2259 (2026-01-27) dropped repeat_kv: that "
            "torchtitan repeated the K/V heads")


def _dump_list(v):
    """A list the argument dump prints as Python's repr ("['core_attn', 'mlp']") as a list; any other
    value as it is.  ``ast.literal_eval`` reads literals only, never code."""
    if isinstance(v, str) and v.strip().startswith("[") and v.strip().endswith("]"):
        import ast
        try:
            return ast.literal_eval(v.strip())
        except (ValueError, SyntaxError):
            return v
    return v


def _unpriced_notes(a: dict) -> list:
    """Notes on what an argument dump runs that the model does not price: activation offloading to the
    host (Megatron's cpu_offloading, fine_grained_activation_offloading), CUDA graphs (enable_cuda_graph,
    external_cuda_graph, cuda_graph_impl) and DeepSpeed's ZeRO-3 parameter offload."""
    out = []
    for k in ("cpu_offloading", "fine_grained_activation_offloading"):
        if a.get(k) is True:
            out.append(f"argument dump: {k} = True: activation offloading to the host is not priced: the memory "
                       "counts the activations on the GPU and the step leaves out their copies")
    graphs = [f"{k} = {a[k]!r}" for k in ("enable_cuda_graph", "external_cuda_graph", "cuda_graph_impl")
              if a.get(k) not in (None, False, "none", "None", "")]
    if graphs:
        out.append(f"argument dump: {', '.join(graphs)}: CUDA graphs are not priced (each kernel's launch is)")
    if a.get("offload_param") is True:
        out.append("DeepSpeed zero_config: offload_param (ZeRO-3 parameters on the host) is not priced: the "
                   "parameters are counted in HBM and their host transfers left out")
    return out


def _grads_dtype(tlog, out: dict, notes: list) -> str | None:
    """Set ``out['main_grads_dtype']`` from a bf16 Megatron-LM dump as validate_args settles it, returning
    where it was read (None where the dump does not say): ``accumulate_allreduce_grads_in_fp32`` as
    printed (True: fp32, its default; False: bf16, by --grad-reduce-in-bf16 or --main-grads-dtype bf16),
    else ``main_grads_dtype`` with ``grad_reduce_in_bf16``.  bf16 gradients are priced with the distributed
    optimizer's buffers only (costmodel.run_checks): without it they are said in ``notes`` and not set."""
    a = tlog.args
    if getattr(tlog, "framework", "megatron") != "megatron" or a.get("bf16") is not True:
        return None
    if isinstance(a.get(_FP32_GRADS), bool):
        d, src = ("fp32" if a[_FP32_GRADS] else "bf16"), f"{_FP32_GRADS} = {a[_FP32_GRADS]}"
    elif _DTYPES.get(str(a.get("main_grads_dtype"))):
        bf16_reduce = a.get("grad_reduce_in_bf16") is True
        d = "bf16" if bf16_reduce else _DTYPES[str(a["main_grads_dtype"])]
        src = "grad_reduce_in_bf16 = True" if bf16_reduce else f"main_grads_dtype = {a['main_grads_dtype']!r}"
    else:
        return None
    if d == "bf16" and a.get("use_distributed_optimizer") is not True:
        notes.append(f"argument dump: {src}: bf16 gradients without the distributed optimizer are not priced: "
                     "fp32 ones are")
        return None
    out["main_grads_dtype"] = d
    return src


def _edge_layers(a: dict, out: dict, notes: list) -> None:
    """Megatron-core's ``first_last_layers_bf16`` under fp8 or fp4: the first num_layers_at_start_in_bf16
    and the last num_layers_at_end_in_bf16 layers in BF16 (TransformerConfig defaults: 1 each), as
    one count, the larger (the model keeps as many at each end)."""
    low = a.get("fp8") not in (None, False, "None") or a.get("fp4") not in (None, False, "None")
    if a.get("first_last_layers_bf16") is not True or not low:
        return
    ends = [a.get(k, 1) for k in ("num_layers_at_start_in_bf16", "num_layers_at_end_in_bf16")]
    if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in ends):
        notes.append(f"argument dump: num_layers_at_start/end_in_bf16 = {ends[0]!r}/{ends[1]!r} are not layer "
                     "counts: the BF16 edge layers not used")
        return
    out["bf16_edge_layers"] = max(ends)
    if ends[0] != ends[1]:
        notes.append(f"argument dump: {ends[0]} BF16 layers at the start, {ends[1]} at the end: priced as "
                     f"{max(ends)} at each end")


def dump_key(switch: str, args: dict) -> str:
    """The argument-dump key (or iteration field) ``switch`` is read from in ``args``: a known
    ``attention_backend`` sets the attention switches, NeMo's ``ub_tp_comm_overlap`` the TP-comm
    overlap where the dump has no ``tp_comm_overlap``, else :data:`DUMP_KEYS`."""
    if switch in ("flash_attention", "attention_kernel") and attention_backend_switches(
            args.get("attention_backend")) is not None:
        return "attention_backend"
    if switch == "tp_comm_overlap" and "tp_comm_overlap" not in args and "ub_tp_comm_overlap" in args:
        return "ub_tp_comm_overlap"             # NeMo's configuration key
    return DUMP_KEYS[switch]


def _moe_switches(a: dict, out: dict, notes: list) -> None:
    """Megatron-core's MoE arguments (a capacity factor of None or below 0 is dropless: Megatron-core
    TransformerConfig sets a negative moe_expert_capacity_factor to None)."""
    if "moe_token_dispatcher_type" in a:
        d = str(a["moe_token_dispatcher_type"])
        d = MOE_DISPATCHER_ALIASES.get(d, d)
        if d in MOE_DISPATCHERS:
            out["moe_dispatcher"] = d
        else:
            notes.append(f"argument dump: moe_token_dispatcher_type = {a['moe_token_dispatcher_type']!r} is not "
                         f"one the model prices ({', '.join(MOE_DISPATCHERS)}, alltoall_seq): the stack's default used")
    for sw in MOE_FLAG_SWITCHES:
        _bool(a, sw.megatron_key, out, sw.name, notes)
    if "moe_expert_capacity_factor" in a:
        cf = a["moe_expert_capacity_factor"]
        try:
            out["moe_capacity_factor"] = megatron_capacity_factor(cf)
        except ValueError:
            notes.append(f"argument dump: moe_expert_capacity_factor = {cf!r} is not a number: not used")


def load_balancing_loss(tlog, num_experts: int, notes: list):
    """Median of Megatron-core's logged ``load_balancing_loss`` over the kept iterations, or None
    when the log prints none.  Values outside [0, E] (E sum_i P_i f_i cannot leave it) or not
    finite are left out, with a note."""
    if tlog.framework != "megatron" or tlog.iterations is None or not len(tlog.iterations):
        return None
    v = tlog.iterations.load_balancing_loss[tlog.kept]
    printed = np.isfinite(v) | np.isinf(v)
    if not np.any(printed):
        return None
    v = v[printed]
    ok = np.isfinite(v) & (v >= 0) & (v <= max(num_experts, 1))
    if np.any(~ok):
        notes.append(f"{int((~ok).sum())} load_balancing_loss value(s) outside 0..{num_experts} (the number of "
                     "experts bounds E sum P f) left out of the router's imbalance")
    if not np.any(ok):
        return None
    med = float(np.median(v[ok]))
    if med < 1.0:
        notes.append(f"load_balancing_loss median {med:.4f} is below 1 (the router's probabilities and loads "
                     "anti-correlated): no imbalance derived from it")
    return med
