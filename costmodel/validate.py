"""Validation: predict the published runs of a throughput CSV and report the step-time error.

The CSV schema is that of the dev set (benchmarks/data/dev_set.csv, documented in the README):
one measured run per row with its hardware, architecture, recipe and parallel layout.  A row's
measured step time comes from ``step_time_s``, else from ``hardware_tflops_per_gpu`` (Megatron's
executed-FLOPs count, 4/3 of model FLOPs under full recompute), ``model_tflops_per_gpu`` or
``tokens_per_s_per_gpu``.  Rows the model cannot represent faithfully are skipped with the reason.
"""
from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import metrics
from .compute import gemm_dtype, model_flops_per_step
from .energy import layout_energy, missing_inputs
from .errors import InputError
from .layouts import RECOMPUTE, LayoutTable, validity
from .memory import memory_bytes
from .model_error import load_model_form, regime
from .predict import predict_table, recompute_options
from .specs import ModelSpec, Recipe, load_cluster, load_profile
from .stacks import RECIPE_SWITCHES, STACKS, Stack, stack_recipe
from .uncertainty import step_time_band

# cluster of the catalog that matches each row's GPU and interconnect note
_CLUSTERS = (("Selene", "dgx-a100"), ("Jean Zay A100", "jean-zay-a100"), ("V100", "v100-4x"),
             ("DGX H100", "dgx-h100"))
# otherwise the catalog's reference cluster of the row's GPU (8-GPU NVSwitch nodes, 8 NICs per node; GB200:
# the NVL72 rack, trays of 4 GPUs in one 72-GPU NVLink domain)
_GPU_CLUSTERS = {"A100-SXM-80GB": "dgx-a100", "A100-SXM-40GB": "dgx-a100-40gb", "A800": "hgx-a800",
                 "H100-SXM-80GB": "dgx-h100", "H100-HBM2e-96GB": "grand-teton-h100", "H800": "hgx-h800", "H200-SXM-141GB": "hgx-h200", "B200": "dgx-b200",
                 "GB200": "gb200-nvl72",
                 "MI300X": "azure-nd-mi300x", "V100-32GB": "v100-4x"}


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

    @property
    def covered(self) -> bool:
        """The measured step time lies inside the prediction's one-sigma band."""
        return abs(self.predicted_s - self.measured_s) <= self.band_rel * self.predicted_s

    @property
    def error_pct(self) -> float:
        """Signed percentage error of the prediction, 100 (pred - meas) / meas."""
        return 100.0 * (self.predicted_s - self.measured_s) / self.measured_s


def _int(r: dict, k: str):
    v = r.get(k, "").strip()
    return int(float(v)) if v else None


def _float(r: dict, k: str):
    v = r.get(k, "").strip()
    return float(v) if v else None


_NUMERIC = ("num_gpus", "gpus_per_node", "num_layers", "hidden", "ffn_hidden", "num_heads", "num_kv_heads", "vocab",
            "seq_len", "num_experts", "moe_topk", "gbs", "mbs", "tp", "pp", "dp", "cp", "ep", "vp", "step_time_s",
            "tokens_per_s_per_gpu", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu")


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
            x = float(v)
        except ValueError:
            return f"{k} is not a number ({v!r})"
        if not math.isfinite(x) or x <= 0:
            return f"{k} must be a finite positive number, got {v!r}"
        if k not in _MEASURED and (not x.is_integer() or x > _MAX_COUNT):
            return f"{k} must be a whole number up to 2^53, got {v!r}"
    return None


# the stack a source ran on, by a token of its file name, where the row has no ``stack`` column
_SOURCE_STACKS = (("megatron_sc21", "megatron-legacy"), ("korthikanti", "megatron-legacy"),
                  ("bloom", "megatron-deepspeed"), ("bigscience", "megatron-deepspeed"),
                  ("megatron_lm_h100", "megatron"), ("flagperf_megatron", "megatron"), ("nemo", "nemo"),
                  ("torchtitan", "torchtitan"), ("llmfoundry", "llm-foundry"), ("mlengineering", "deepspeed"))
_LLAMA_FAMILY = re.compile(r"llama|mistral|mixtral|qwen", re.IGNORECASE)
_CAUSAL = re.compile(r"causal attention", re.IGNORECASE)
_SHARED_EXPERT = re.compile(r"shared expert \((\d+)\)", re.IGNORECASE)   # an MoE row's shared-expert width
_MAX_ASSUMED_MBS = 16   # the largest unpublished micro-batch size tried (:func:`_fastest_mbs`)
_CPU_OFFLOAD = re.compile(r"CPU \w*\s*offload", re.IGNORECASE)   # ZeRO-Offload: optimizer step on the host
# recipe switches a row's notes name, the CSV having no column for them
# Liger-Kernel's apply_liger_kernel_to_llama (defaults rope, rms_norm, swiglu and fused linear cross-
# entropy on: linkedin/Liger-Kernel src/liger_kernel/transformers/monkey_patch.py) and torch.compile
# fuse the norms, the rotary embedding and SwiGLU
_NOTE_SWITCHES = (("liger", {"cross_entropy": "chunked", "fused_elementwise": True}),
                  ("torch.compile", {"fused_elementwise": True}),
                  ("flash-attn-3", {"attention_kernel": "fa3"}), ("flash-attn-4", {"attention_kernel": "fa4"}),
                  # torchtitan's async TP (torch.compile's micro-pipelined all-gather/reduce-scatter
                  # matmuls over symmetric memory, PyTorch dev-discuss "Introducing Async Tensor
                  # Parallelism in PyTorch", 2024) hides TP collectives under their GEMMs as TE's
                  # userbuffer overlap does; its tables write "mode=async TP" or "+ AsyncTP"
                  ("mode=async tp", {"tp_comm_overlap": True}), ("+ asynctp", {"tp_comm_overlap": True}),
                  ("float8 rowwise", {"fp8_recipe": "rowwise"}))
# an on/off recipe switch named by its Megatron flag in the notes (``--overlap-grad-reduce``,
# ``moe-grouped-gemm``), not its ``--no-`` form
_FLAG_SWITCHES = tuple((re.compile(r"(?<![\w-])(?:--)?" + re.escape(s.megatron_key.replace("_", "-")) + r"(?![\w-])"),
                        {s.name: True}) for s in RECIPE_SWITCHES if s.kind == "bool" and s.megatron_key)
# Megatron's distributed optimizer (ZeRO-1), named or implied: --overlap-param-gather runs only with
# it (megatron/training/arguments.py asserts use_distributed_optimizer)
_DIST_OPT = re.compile(r"--use-distributed-optimizer|--overlap-param-gather")
# recipe switches a source's software fixes, the rows not saying them: llm-foundry's MPT benchmark
# tables ran FlashAttention 1 (its launcher installs llm-foundry[gpu], whose setup.py pins
# flash-attn==v1.0.3.post0 (2023-06, A100 tables) and flash-attn==1.0.9 (2023-10, H100 tables;
# FlashAttention-2 was the separate gpu-flash2 extra): mosaicml/llm-foundry setup.py at a7d6a447 and
# b2a43a14, scripts/train/benchmarking/submit_benchmarks.py) when the row says attn_impl=flash;
# NeMo 24.07 trained Nemotron-4 340B with the distributed optimizer reducing bf16 gradients
# (NeMo-Framework-Launcher conf/training/nemotron/nemotron_340b.yaml: ``optim: {name:
# mcore_distributed_optim, grad_sync_dtype: bf16}``, no activation checkpointing)
_SOURCE_SWITCHES = (("llmfoundry_mpt_throughput", "attn_impl=flash", {"attention_kernel": "fa1"}),
                    ("nemo_24.07_performance", "nemotron4config340b", {"main_grads_dtype": "bf16"}))
# stacks whose recipes run sequence parallelism whenever TP > 1 (NeMo's LLM recipes set
# sequence_parallel=True with TP > 1; Megatron-LM's Llama/GPT example scripts pass --sequence-parallel;
# torchtitan's TP plan shards the norms' activations on the sequence: SequenceParallel() on
# attention_norm and ffn_norm, RowwiseParallel(output_layouts=Shard(1)) on wo and w2,
# torchtitan/models/llama3/infra/parallelize.py apply_tp)
_SP_WITH_TP = ("megatron", "nemo", "torchtitan")


def row_switches(r: dict) -> dict:
    """Recipe switches the row's source fixes (:data:`_SOURCE_SWITCHES`) or its notes name
    (:data:`_NOTE_SWITCHES`), e.g. Liger-Kernel's chunked loss."""
    notes = r.get("notes", "").lower()
    out: dict = {}
    for source, key, switches in _SOURCE_SWITCHES:
        if source in r.get("source_file", "") and key in notes:
            out.update(switches)
    for key, switches in _NOTE_SWITCHES:
        if key in notes:
            out.update(switches)
    for flag, switches in _FLAG_SWITCHES:
        if flag.search(notes):
            out.update(switches)
    if _CPU_OFFLOAD.search(r.get("notes", "")):      # ZeRO-Offload: the step runs on the host CPU
        out["optimizer_offload"] = True
    return out


def row_sp(r: dict, stack: Stack, tp: int) -> tuple[bool, bool]:
    """(sequence parallelism, assumed): the ``sequence_parallel`` column where it says true/false,
    else on with TP > 1 for the stacks of :data:`_SP_WITH_TP` (assumed = True)."""
    v = (r.get("sequence_parallel") or "").strip().lower()
    if v in ("true", "false"):
        return v == "true", False
    return tp > 1 and stack.name in _SP_WITH_TP, tp > 1


def _least_costly_fit(model, recipe, cluster, row: dict, zeros, recomputes) -> dict:
    """The row with the cheapest unpublished settings at which its layout fits: ZeRO stages and
    recompute choices tried cheapest first (ZeRO-1 only adds an overlapped all-gather, so it comes
    before any recomputation); the last candidate when none fits.  A run that ran fitted."""
    opts = [o for rc in recomputes for o in (recompute_options(model, row, recipe)
                                             if rc == "full" and len(recomputes) > 1 else [(rc, 0)])
            if o[0] == rc]
    cands = [dict(row, zero=z, recompute=rc, recompute_num_layers=n) for rc, n in opts for z in zeros]
    for c in cands:
        if memory_bytes(model, recipe, LayoutTable.from_rows([c])).peak_bytes[0] <= cluster.gpu.capacity_bytes:
            return c
    return cands[-1]


def _fastest_mbs(model, recipe, cluster, profile, row: dict, zeros, recomputes) -> dict:
    """The row at the unpublished micro-batch size that predicts the shortest step: every mbs dividing
    the batch of one DP rank (gbs / DP, at most :data:`_MAX_ASSUMED_MBS`), each with the cheapest ZeRO
    stage and recompute at which it fits (:func:`_least_costly_fit`); a published run is taken to be
    tuned, so the best layout that fits is the assumption.  Sizes that fit nowhere count only when none
    fits (then the smallest)."""
    per_rank = max(1, recipe.gbs // (row["dp"] or 1))
    sizes = [m for m in range(1, min(per_rank, _MAX_ASSUMED_MBS) + 1) if per_rank % m == 0]
    cands = [_least_costly_fit(model, recipe, cluster, dict(row, mbs=m), zeros, recomputes) for m in sizes]
    pred = predict_table(model, recipe, cluster, profile, LayoutTable.from_rows(cands))
    step = np.where(pred.feasible, pred.step_time_s, np.inf)
    return cands[int(np.argmin(step))] if np.isfinite(step).any() else cands[0]


def row_stack(r: dict) -> Stack | None:
    """The row's training stack: its ``stack`` column, else the stack of its source (by file name);
    None when neither says (the row is skipped)."""
    name = (r.get("stack") or "").strip()
    if name:
        return STACKS.get(name)
    src = r.get("source_file", "").lower()
    return next((STACKS[s] for key, s in _SOURCE_STACKS if key in src), None)


def row_zero(r: dict) -> int | None:
    """ZeRO stage of the row's ``fsdp_or_zero``: zero-1 -> 1; zero-2 or FSDP SHARD_GRAD_OP -> 2; zero-3
    or FSDP (FULL_SHARD, PyTorch's default sharding strategy) -> 3; empty with notes naming Megatron's
    distributed optimizer (``--use-distributed-optimizer``, or ``--overlap-param-gather``, which needs
    it) -> 1; empty, none or zero-0 -> 0; None for any other value."""
    v = (r.get("fsdp_or_zero") or "").strip().lower()
    if v == "" and _DIST_OPT.search(r.get("notes", "")):
        return 1
    if v in ("", "none", "zero-0"):
        return 0
    if re.fullmatch(r"zero-1\b.*", v):
        return 1
    if re.fullmatch(r"zero-2\b.*", v) or "shard_grad_op" in v:
        return 2
    if re.fullmatch(r"zero-3\b.*", v) or v.startswith("fsdp"):
        return 3
    return None


def row_family(r: dict) -> str:
    """The architecture family :func:`row_model` prices a row as, from its model name (and source):
    bloom, llama (Llama, Mistral, Mixtral, Qwen), mpt, nemotron, gpt (GPT, Megatron, MT-NLG), or
    ``unrecognised`` (priced as Megatron GPT too, an assumption the row report lists)."""
    name = r.get("model") or ""
    if "BLOOM" in name or "bloom" in (r.get("source_file") or ""):
        return "bloom"
    if _LLAMA_FAMILY.search(name):
        return "llama"
    for fam in ("mpt", "nemotron"):
        if name.lower().startswith(fam):
            return fam
    return "gpt" if re.search(r"GPT|MEGATRON|MT-NLG", name.upper()) else "unrecognised"


def row_model(r: dict, stack: Stack) -> ModelSpec:
    """The ModelSpec of a dev-set row, by architecture family of its model name.

    * Llama, Mistral, Mixtral, Qwen: SwiGLU MLP of the row's ``ffn_hidden``, RoPE, untied output
      layer, no biases, no dropout (the families' Hugging Face configs).
    * MPT: 4h GELU MLP, a learned position table, tied embeddings, no biases, no dropout (llm-foundry
      MPTConfig defaults ``learned_pos_emb: true``, ``no_bias: true``, which its benchmark yamls keep:
      the dev set's parameter counts include the seq x d table).
    * BLOOM: GPT-style with ALiBi and no dropout (BigScience tr11 config).
    * Nemotron-3 and -4: squared-ReLU MLP of the row's ``ffn_hidden``, RoPE, untied output layer, no
      biases, no dropout (NeMo nemo/collections/llm/gpt/model/nemotron.py NemotronConfig).
    * anything else: Megatron GPT, learned positions, biases and dropout 0.1.
    * an MoE row whose notes give a shared expert ("shared expert (5632)") has one of that width.
    Stacks that pad the vocabulary (Megatron, ``make_vocab_size_divisible_by`` 128) pad it to a
    multiple of 128 x TP unless the row already gives a padded size.
    """
    name = r.get("model") or ""
    family = row_family(r)
    bloom, llama, mpt, nemotron = (family == f for f in ("bloom", "llama", "mpt", "nemotron"))
    tp = _int(r, "tp") or 1
    vocab = _int(r, "vocab")
    if stack.pads_vocab:
        mult = 128 * tp
        vocab = int(math.ceil(vocab / mult) * mult)
    h, heads = _int(r, "hidden"), _int(r, "num_heads")
    experts = _int(r, "num_experts") or 1
    gpt = family in ("gpt", "unrecognised")
    learned = gpt or mpt
    return ModelSpec(
        name=name, display_name=name, num_layers=_int(r, "num_layers"), hidden=h,
        ffn_hidden=_int(r, "ffn_hidden") or 4 * h, num_heads=heads,
        num_kv_heads=_int(r, "num_kv_heads") or heads, head_dim=h // heads, vocab=vocab, gated=llama,
        activation="silu" if llama else "relu2" if nemotron else "gelu", tie_embeddings=not (llama or nemotron),
        num_experts=experts,
        topk=_int(r, "moe_topk") or 1, learned_positions=learned, max_positions=_int(r, "seq_len") if learned else 0,
        dropout=gpt, bias=gpt or bloom, seq_len=_int(r, "seq_len"),
        shared_ffn_hidden=(_shared_expert(r) or 0) if experts > 1 else 0)


METRICS = {
    "step_time_s": "step time as published",
    "hardware_tflops_per_gpu": "hardware TFLOP/s (executed FLOPs: model FLOPs x 4/3 under full recompute, "
                               "Narayanan et al. SC21 / Megatron-DeepSpeed 'TFLOPs')",
    "model_tflops_per_gpu": "model TFLOP/s (Megatron formula, no recompute; attention s x s, or its causal "
                            "half where the row's notes say 'causal attention')",
    "tokens_per_s_per_gpu": "tokens/s/GPU (gbs x seq_len / step time / GPUs)",
}


def _shared_expert(r: dict) -> int | None:
    """The shared-expert width an MoE row's notes give ('shared expert (5632)'), or None when they
    give none or an unreadable one (not a whole number in 1..10^6)."""
    m = _SHARED_EXPERT.search(r.get("notes", ""))
    return int(m.group(1)) if m and 1 <= int(m.group(1)) <= 10**6 else None


def measured_step_s(r: dict, model: ModelSpec, recipe: Recipe, n_gpus: int, recompute: str):
    """The row's measured step time in seconds and the column it came from (``(None, None)`` if none).

    Order of preference (:data:`METRICS`): the columns that need no FLOP convention first,
    ``step_time_s``, then ``tokens_per_s_per_gpu``; else ``hardware_tflops_per_gpu`` (executed FLOPs:
    the model FLOPs of Narayanan et al. SC21 times 4/3 under full recomputation, the convention of
    Megatron-DeepSpeed's "TFLOPs" log field); ``model_tflops_per_gpu`` (model FLOPs, whose attention
    convention differs between sources).
    """
    st = _float(r, "step_time_s")
    if st:
        return st, "step_time_s"
    tk = _float(r, "tokens_per_s_per_gpu")
    if tk:
        return metrics.tokens_per_step(recipe) / (tk * n_gpus), "tokens_per_s_per_gpu"
    # a source that says its FLOPs count causal attention counts half the s x s scores
    mflops = model_flops_per_step(model, recipe, causal=_CAUSAL.search(r.get("notes", "")) is not None)
    hw = _float(r, "hardware_tflops_per_gpu")
    if hw:
        factor = 4.0 / 3.0 if recompute == "full" else 1.0
        return mflops * factor / (hw * 1e12 * n_gpus), "hardware_tflops_per_gpu"
    mt = _float(r, "model_tflops_per_gpu")
    if mt:
        return mflops / (mt * 1e12 * n_gpus), "model_tflops_per_gpu"
    return None, None


def _skip_reason(r: dict) -> str | None:
    notes = r.get("notes", "")
    for need in ("num_layers", "hidden", "num_heads", "vocab", "seq_len", "gbs", "tp", "pp"):
        if not r.get(need, "").strip():
            return f"{need} not published"
    if r.get("precision", "") == "":
        return "precision not published"
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
    if "degraded" in notes.lower():
        return "measured during a degraded-GPU period"
    if re.search(r"task=lora\b|\bLoRA\b", notes):
        return "LoRA fine-tuning is not modelled (frozen base weights: no base gradients or optimizer states)"
    if re.search(r"task=sft\b", notes) and re.search(r"\bpacked\b", notes):
        # each packed sequence holds many short documents, each attending to itself only
        return "packed-sequence fine-tuning without its document length (each packed document attends to itself only: --doc-tokens)"
    return None


def _cluster_for(r: dict) -> tuple:
    """``(cluster key, None)`` of the catalog cluster a row ran on: a named system of the interconnect
    note, else the reference cluster of its GPU; ``(None, why)`` when the gpu cell is empty, names no
    catalog GPU, or names another GPU than the note's system (the row is skipped, never predicted on
    another GPU)."""
    gpu = (r.get("gpu") or "").strip()
    if not gpu:
        return None, "gpu is empty"
    ref = _reference_cluster(gpu)
    if ref is None:
        return None, (f"no catalog GPU {gpu!r} (known: {', '.join(_GPU_CLUSTERS)}, or their hardware/gpus file "
                      "stems)")
    note = r.get("interconnect_note", "")
    for key, name in _CLUSTERS:
        if key in note:
            if _gpu_of(name) != _gpu_of(ref):
                return None, (f"gpu {gpu!r} contradicts the interconnect note's system {key!r} "
                              f"({_gpu_of(name)})")
            return name, None
    return ref, None


@functools.lru_cache(maxsize=None)
def _reference_cluster(gpu: str) -> str | None:
    """The reference cluster of a gpu cell: a dev-set name (``A100-SXM-80GB``, any case) or the catalog's
    GPU file stem (``a100-sxm-80gb``); None when neither."""
    for name, ref in _GPU_CLUSTERS.items():
        if gpu.lower() in (name.lower(), _gpu_of(ref)):
            return ref
    return None


@functools.lru_cache(maxsize=None)
def _gpu_of(cluster: str) -> str:
    return load_cluster(cluster).gpu.key


def _row_problem(r: dict) -> str | None:
    """Why a row's categorical cells cannot be read (an unknown recompute, sharding or SP value)."""
    rc = (r.get("recompute") or "").strip()
    if rc not in ("", "unknown") + RECOMPUTE:
        return f"recompute {rc!r} is not one of {', '.join(RECOMPUTE)} (or empty)"
    z = (r.get("fsdp_or_zero") or "").strip()
    if z and row_zero(r) is None:
        return f"fsdp_or_zero {z!r} is not none, zero-0/1/2/3 or fsdp[-strategy]"
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
    return None


def _prepare(r: dict, cache: dict):
    """A usable row as (cluster key, model, recipe, layout row, RowResult), or the reason to skip it.

    Raises:
        InputError: a recipe value the model refuses (caught by :func:`validate_rows`, which skips
            the row naming the field).
    """
    rid, src = r.get("row_id", "?"), r.get("source_file", "?")
    why = _bad_number(r) or _skip_reason(r) or _row_problem(r)
    cname, gpu_why = _cluster_for(r)
    why = why or gpu_why
    if why:
        return why
    n_gpus, gpn = _int(r, "num_gpus"), _int(r, "gpus_per_node")
    key = (cname, n_gpus)
    if key not in cache:
        per_node = load_cluster(cname).gpus_per_node       # a row may count a whole NVLink domain as its node
        c = load_cluster(cname, nodes=max(1, n_gpus // per_node))
        cache[key] = (c, load_profile(c.gpu.key))
    cluster, profile = cache[key]
    if gpn is None:
        return "gpus_per_node missing"
    if cluster.num_gpus != n_gpus:
        return (f"num_gpus {n_gpus} is not a whole number of {cluster.key}'s {cluster.gpus_per_node}-GPU nodes "
                "(partial nodes are not modelled)")
    if gpn not in (cluster.gpus_per_node, cluster.scale_up_gpus):
        return f"{gpn} GPUs per node; the catalog's {cluster.key} has {cluster.gpus_per_node}" + (
            f" ({cluster.scale_up_gpus} per NVLink domain)" if cluster.scale_up_gpus != cluster.gpus_per_node else "")
    stack = row_stack(r)
    if stack is None:
        return "stack unknown: add a stack column"
    model = row_model(r, stack)
    switches = row_switches(r)
    recipe = stack_recipe(stack, _int(r, "gbs"), _int(r, "seq_len"), r["precision"], gpu_key=cluster.gpu.key,
                          **switches)
    if recipe.flash_attention:
        # raises for an unfitted kernel or a head dim the kernel does not run
        profile.attention_efficiency(recipe.attention_kernel, recipe.seq_len, model.qk_head_dim,
                                     model.attn_out_dim / model.num_heads)
    tp, pp, cp = _int(r, "tp"), _int(r, "pp"), _int(r, "cp") or 1
    dp = _int(r, "dp") or n_gpus // (tp * pp * cp)
    sp, sp_assumed = row_sp(r, stack, tp)
    # overlap of DP and backward TP communication: Megatron's default since 2021 (torch DDP
    # buckets, async tensor-parallel all-reduce); the runs logged with DDP_impl=local had none
    ddp_local = re.search(r"DDP[_ ]impl[= ]local", r.get("notes", "")) is not None
    rc_known = r.get("recompute") not in ("", "unknown", None)
    row = dict(tp=tp, pp=pp, dp=dp, cp=cp, ep=_int(r, "ep") or 1, vp=_int(r, "vp") or 1, mbs=_int(r, "mbs"),
               recompute=r["recompute"] if rc_known else "none", zero=row_zero(r), sp=sp, overlap=not ddp_local)
    # torchtitan's FSDP2 under a pipeline keeps each stage's parameters gathered across its micro-batches
    # and reduce-scatters once (torchtitan/models/llama3/infra/parallelize.py apply_fsdp: reshard_after_
    # forward = not pp_enabled): ZeRO-1's traffic and memory
    fsdp_pp = row["zero"] == 3 and pp > 1 and stack.name == "torchtitan"
    if fsdp_pp:
        row["zero"] = 1
    assumed = (tuple(f"{k}={v}" for k, v in switches.items()) + ((f"sp={sp}",) if sp_assumed else ())
               + (("zero=1(FSDP2 under PP)",) if fsdp_pp else ())
               + (("ep=1",) if model.is_moe and not (r.get("ep") or "").strip() else ())
               + ((f"shared_expert={model.shared_ffn_hidden}",) if model.shared_ffn_hidden else ())
               + (("arch=megatron-gpt(unrecognised model name)",) if row_family(r) == "unrecognised" else ()))
    mbs_known = row["mbs"] is not None
    code, msgs = validity(LayoutTable.from_rows([dict(row, recompute="none", zero=row["zero"] or 0,
                                                      mbs=row["mbs"] or 1)]), model,
                          recipe, cluster.num_gpus, cluster.scale_up_gpus, uneven_pp=True)
    if code[0] >= 0:
        return f"layout not representable: {msgs[code[0]]}"
    zero_known = bool((r.get("fsdp_or_zero") or "").strip()) or row_zero(r) == 1 or dp * cp == 1
    zeros = (row["zero"],) if zero_known else (0, 1)
    recomputes = (row["recompute"],) if rc_known else ("none", "selective", "full")
    if not mbs_known:
        row = _fastest_mbs(model, recipe, cluster, profile, row, zeros, recomputes)
        assumed += (f"mbs={row['mbs']}",)
    elif not (zero_known and rc_known):
        row = _least_costly_fit(model, recipe, cluster, row, zeros, recomputes)
    assumed += (() if zero_known else (f"zero={row['zero']}",)) + \
        (() if rc_known else (f"recompute={row['recompute']}" + (f"({row['recompute_num_layers']} layers)"
                                                                 if row.get("recompute_num_layers") else ""),))
    code, msgs = validity(LayoutTable.from_rows([row]), model, recipe, cluster.num_gpus, cluster.scale_up_gpus,
                          uneven_pp=True)
    if code[0] >= 0:
        return f"layout not representable: {msgs[code[0]]}"
    meas, metric = measured_step_s(r, model, recipe, n_gpus, row["recompute"])
    if meas is None:
        return "no throughput metric"
    # a measurement above the GPU's dense peak cannot be a step of this run
    peak = cluster.gpu.peak_flops.get(gemm_dtype(recipe), 0.0)
    if model_flops_per_step(model, recipe, causal=True) / (meas * n_gpus) > peak:
        return f"{metric} implies more than {cluster.gpu.name}'s dense {gemm_dtype(recipe)} peak"
    res = RowResult(rid, src, meas, None, sweep=f"{src}|{r.get('model', '')}|{n_gpus}", metric=metric, assumed=assumed)
    return key, model, recipe, row, res


def validate_rows(rows: list[dict], where: str = "runs.csv") -> list[RowResult]:
    """Predict every usable row; return one :class:`RowResult` per row (skipped ones with why: a
    bad or unknown cell names its column, a repeated ``row_id`` keeps the first row).

    Rows of the same model, recipe and cluster are predicted as one layout table (one vectorised
    pass each).  The predicted step is the one ``predict`` prints: the power-limited step of the
    energy model (clocks under the TDP, costmodel.energy) where the GPU has a power model, else the
    time model's step at full clocks.
    """
    out: list = []
    cache, groups, seen = {}, {}, set()
    for r in rows:
        # csv.DictReader gives None for the cells a short row lacks and keys extra ones by None
        short = sum(v is None for k, v in r.items() if k is not None)
        r = {k: ("" if v is None else v) for k, v in r.items() if k is not None}
        rid, src = r.get("row_id", "?"), r.get("source_file", "?")
        if short:
            out.append(RowResult(rid, src, skipped=f"{short} cell(s) fewer than the header's columns"))
            continue
        if rid in seen:
            out.append(RowResult(rid, src, skipped="duplicate row_id (an earlier row has it: that one is used, "
                                                   "or reported if it was skipped; give each row its own id)"))
            continue
        seen.add(rid)
        try:
            got = _prepare(r, cache)
        except InputError as e:     # a recipe flag's value names the row's column; a file names itself
            got = (f"{e.where[2:].replace('-', '_')}: {e.message}" if e.where.startswith("--") else str(e))
        if isinstance(got, str):
            out.append(RowResult(rid, src, skipped=got))
            continue
        key, model, recipe, row, res = got
        out.append(res)
        groups.setdefault((key, model, recipe), []).append((row, res))
    mf_table = load_model_form()
    for (key, model, recipe), members in groups.items():
        cluster, profile = cache[key]
        pred = predict_table(model, recipe, cluster, profile, LayoutTable.from_rows([row for row, _ in members]))
        reg = regime(recipe.stack, cluster.gpu.key, model.params(), model.is_moe)
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


def read_runs_csv(path: str | Path) -> list[dict]:
    """Read a throughput CSV (dev-set schema), skipping '#' comment lines.

    Raises:
        InputError: unreadable file, another separator than the comma, a repeated column, a header
            without the dev-set columns or any measured column (:data:`METRICS`), a row with more
            cells than the header, or no row (a row with fewer is skipped by :func:`validate_rows`).
    """
    path = Path(path)
    try:
        # utf-8-sig: a spreadsheet's "CSV UTF-8" starts with a byte-order mark
        lines = [ln for ln in path.read_text(encoding="utf-8-sig").splitlines() if not ln.startswith("#")]
    except OSError as e:
        raise InputError(path, "", f"cannot read file ({e.strerror})") from None
    except UnicodeDecodeError as e:
        raise InputError(path, "", f"not a UTF-8 text file (byte {e.start}: {e.reason})") from None
    if not any(ln.strip() for ln in lines):
        raise InputError(path, "", "is empty (no header, no row)")
    head = next(csv.reader(lines[:1]), [])
    for sep, name in ((";", "semicolons"), ("\t", "tabs")):
        if len(head) == 1 and sep in head[0]:
            raise InputError(path, "header", f"its columns are separated by {name}: save it as a comma-separated CSV")
    dup = sorted({c for c in head if head.count(c) > 1})
    if dup:                          # a repeated column: which copy a row means is ambiguous
        raise InputError(path, "header", f"column {dup[0]!r} appears {head.count(dup[0])} times")
    reader = csv.DictReader(lines)
    rows = list(reader)
    for i, r in enumerate(rows):
        if None in r:                # DictReader keeps cells beyond the header under None
            raise InputError(path, f"row {i + 1}", f"{len(r[None])} cell(s) more than the header's columns")
    need = {"row_id", "gpu", "num_gpus", "gpus_per_node", "num_layers", "hidden", "num_heads", "gbs", "mbs",
            "tp", "pp", "seq_len"}
    header = set(reader.fieldnames or [])
    if not need <= header:
        raise InputError(path, "header", f"missing columns {sorted(need - header)}")
    if not header & set(METRICS):
        raise InputError(path, "header", f"no measured column: one of {', '.join(METRICS)}")
    if not rows:
        raise InputError(path, "", "has a header but no row")
    return rows


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
        s["band_coverage"] = s.pop("covered") / s["used"] if s["used"] else None
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
