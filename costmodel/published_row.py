"""How a published run's CSV row reads as a model, a recipe and a layout, and what is assumed where it is silent.

A throughput CSV (the dev set's schema, README 'Validate') names the hardware, architecture and layout of
each run, and often not the rest.  This module reads the stack (the ``stack`` column, else the source),
the architecture family (the model's name), the recipe switches the notes or the source's software fix
(Liger-Kernel, a Megatron flag such as ``--overlap-grad-reduce``, FlashAttention 1 on llm-foundry's tables),
the sequence parallelism and ZeRO stage, and it chooses what a published run must have had where the row
does not say: the cheapest ZeRO stage and recompute at which the layout fits, and the micro-batch size
that predicts the shortest step (a published run is taken as tuned).  costmodel.validate lists every
assumption per row.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import replace

import numpy as np

from .config_keys import one_edit_apart
from .layouts import LayoutTable, validity
from .memory import memory_bytes
from .predict import predict_table, recompute_options
from .specs import (MOE_DISPATCHER_ALIASES, ModelSpec, megatron_capacity_factor, recompute_module_list,
                    recompute_modules_problem)
from .recipe_switches import RECIPE_SWITCHES, SWITCHES_BY_NAME
from .stacks import STACKS, Stack, attention_backend_switches


def cell_int(r: dict, k: str):
    """The row's cell ``k`` as an int (a float cell truncated), None when empty."""
    v = r.get(k, "").strip()
    return int(float(v)) if v else None


def cell_float(r: dict, k: str):
    """The row's cell ``k`` as a float, None when empty."""
    v = r.get(k, "").strip()
    return float(v) if v else None


_int, _float = cell_int, cell_float

#: the stack each shipped dev-set source ran on (its file name, without folders), for rows without a
#: ``stack`` cell; a file of one's own names its stack in that column (a word of a file name says nothing)
_SOURCE_STACKS = {
    "megatron_sc21_a100_weak_scaling_table1.md": "megatron-legacy",
    "megatron_korthikanti2022_a100_seqpar_selective_recompute.md": "megatron-legacy",
    "bloom_176B_tr11_training_log_excerpts_a100.md": "megatron-deepspeed",
    "bloom_tr11_176B_prequel_config_sweep_a100.md": "megatron-deepspeed",
    "bigscience_v100_megatron_pipeline_scaling_logs.md": "megatron-deepspeed",
    "megatron_lm_h100_weak_strong_scaling.md": "megatron",
    "flagperf_megatron_llm_a800_h100_h800.md": "megatron",
    "nemo_24.07_performance_summary_h100_fp8.md": "nemo",
    "torchtitan_llama3_h100_202412_torchtitan.md": "torchtitan",
    "torchtitan_asyncTP_llama3_h100_2025-06_torchtitan.md": "torchtitan",
    "torchtitan_llama3-8b_h200_202506_trainy-whitefiber.md": "torchtitan",
    "llmfoundry_mpt_throughput_mfu_h100_a100.md": "llm-foundry",
    "mlengineering_llama31_8b_h200_vs_b200_deepspeed.md": "deepspeed"}
_LLAMA_FAMILY = re.compile(r"llama|mistral|mixtral|qwen", re.IGNORECASE)
_SHARED_EXPERT = re.compile(r"shared expert \((\d+)\)", re.IGNORECASE)   # an MoE row's shared-expert width
_MAX_ASSUMED_MBS = 16   # the largest unpublished micro-batch size tried (:func:`_fastest_mbs`)
_CPU_OFFLOAD = r"CPU \w*\s*offload"   # ZeRO-Offload: optimizer step on the host
#: what, right before a phrase, says the run did not have it: "no CPU offload", "not LoRA",
#: "non-causal attention", "without liger", one word allowed between ("not using LoRA")
_NEGATED = re.compile(r"(?:\b(?:no|not|non|without|w/o|never)[\s-]+(?:[\w.]+[\s-]+)?|\bnon-)$", re.IGNORECASE)


def note_says(notes: str, pattern: str, flags: int = re.IGNORECASE) -> bool:
    """Whether ``notes`` (a row's free text) states ``pattern`` (a regular expression) positively: a
    match not preceded by a negation (:data:`_NEGATED`: "no degraded GPUs" does not say "degraded")."""
    return any(not _NEGATED.search(notes[max(0, m.start() - 40):m.start()])
               for m in re.finditer(pattern, notes, flags))
# recipe switches a row's notes name, the CSV having no column for them
# Liger-Kernel's apply_liger_kernel_to_llama (defaults rope, rms_norm, swiglu and fused linear cross-
# entropy on: linkedin/Liger-Kernel src/liger_kernel/transformers/monkey_patch.py) and torch.compile
# fuse the norms, the rotary embedding and SwiGLU
_NOTE_SWITCHES = (("liger", {"cross_entropy": "chunked", "fused_elementwise": True}),
                  ("torch.compile", {"fused_elementwise": True}),
                  # torchtitan's tables name it "+ compile" ("3D FSDP8 x TP8 x PP8 + compile + Float8")
                  ("+ compile", {"fused_elementwise": True}),
                  ("flash-attn-3", {"attention_kernel": "fa3"}), ("flash-attn-4", {"attention_kernel": "fa4"}),
                  # torchtitan's async TP (torch.compile's micro-pipelined all-gather/reduce-scatter
                  # matmuls over symmetric memory, PyTorch dev-discuss "Introducing Async Tensor
                  # Parallelism in PyTorch", 2024) hides TP collectives under their GEMMs as TE's
                  # userbuffer overlap does; its tables write "mode=async TP" or "+ AsyncTP"
                  ("mode=async tp", {"tp_comm_overlap": True}), ("+ asynctp", {"tp_comm_overlap": True}),
                  ("float8 rowwise", {"fp8_recipe": "rowwise"}),
                  # GQA's K/V heads repeated before the attention kernel (costmodel.stacks kv_repeat): the
                  # flag, its --no- form last so it wins (the code's name, repeat_kv: _REPEAT_KV)
                  ("--kv-repeat", {"kv_repeat": True}), ("--no-kv-repeat", {"kv_repeat": False}))
# a note naming the code that repeats the K/V heads, not its absence ("without repeat_kv", "no repeat_kv")
_REPEAT_KV = re.compile(r"(?<!without )(?<!no )\brepeat_kv\b")
# a recipe switch named by its Megatron flag in the notes.  On/off: ``--overlap-grad-reduce`` or the
# bare ``moe-grouped-gemm`` turns it on; ``--no-X``, ``without X``, ``no X`` or ``X off|false|disabled``
# turns it off.  Valued (``--moe-token-dispatcher-type alltoall``, ``--moe-expert-capacity-factor 1.0``):
# only with the dashes, so prose naming an option is not read as its value
_OFF_WORDS = ("off", "false", "disabled")
_BOOL_FLAGS = tuple((s.name, re.compile(
    r"(?P<neg>\b(?:without|no)\s+)?(?<![\w-])(?:--)?(?P<no>no-)?" + re.escape(s.megatron_key.replace("_", "-"))
    + r"(?![\w-])(?:[\s=:]+(?P<val>on|off|true|false|enabled|disabled)\b)?", re.IGNORECASE))
    for s in RECIPE_SWITCHES if s.kind == "bool" and s.megatron_key)
_VALUE_FLAGS = tuple((s, re.compile(r"(?<![\w-])--" + re.escape(s.megatron_key.replace("_", "-"))
                                    + (r"(?:\s+|=)(?P<v>[a-z_]+(?: +(?!--)[a-z_]+)*)" if s.kind == "modules" else
                                       r"(?:\s+|=)(?P<v>[^\s;,|\"']+)")))
                     for s in RECIPE_SWITCHES if s.kind in ("choice", "float", "modules") and s.megatron_key)
# Megatron-core's --attention-backend (costmodel.stacks.MEGATRON_ATTENTION_BACKENDS): the kernel and flash switch
_ATTENTION_BACKEND = re.compile(r"(?<![\w-])--attention-backend(?:\s+|=)(?P<v>[^\s;,|\"']+)")
# Megatron's distributed optimizer (ZeRO-1), named or implied: --overlap-param-gather runs only with it
# and with --overlap-grad-reduce (megatron/training/arguments.py asserts both)
_DIST_OPT = re.compile(r"--use-distributed-optimizer|--overlap-param-gather")
_PARAM_GATHER = re.compile(r"(?<![\w-])--overlap-param-gather(?![\w-])")
# recipe switches a source's software fixes, the rows not saying them: llm-foundry's MPT benchmark
# tables ran FlashAttention 1 (its launcher installs llm-foundry[gpu], whose setup.py pins
# flash-attn==v1.0.3.post0 (2023-06, A100 tables) and flash-attn==1.0.9 (2023-10, H100 tables;
# FlashAttention-2 was the separate gpu-flash2 extra): mosaicml/llm-foundry setup.py at a7d6a447 and
# b2a43a14, scripts/train/benchmarking/submit_benchmarks.py) when the row says attn_impl=flash;
# NeMo 24.07 trained Nemotron-4 340B with the distributed optimizer reducing bf16 gradients
# (NeMo-Framework-Launcher conf/training/nemotron/nemotron_340b.yaml: ``optim: {name:
# mcore_distributed_optim, grad_sync_dtype: bf16}``, no activation checkpointing);
# NeMo 24.01 to 24.07 ran FlashAttention-2, not cuDNN's fused attention: the launcher of those releases
# sets ``NVTE_FUSED_ATTN: 0  # Disable cudnn FA until we've tested it more`` for every job
# (NVIDIA/NeMo-Framework-Launcher launcher_scripts/conf/config.yaml env_vars at tags 24.01, 24.03,
# 24.03.01, 24.05 and 24.07, from commit 562dcb45 of 2024-02-13; removed for 24.09), and Transformer
# Engine then falls back to the flash-attn package (TE v1.8 DotProductAttention backend selection);
# NeMo 24.07 ran NeMo 1 (its launcher's YAML), whose GPT model builds Megatron-core's TransformerConfig
# (cross_entropy_loss_fusion default False): the launcher's 24.07 configs set it true for Llama 3 and
# Nemotron 3 (conf/training/llama/llama3_*.yaml, nemotron/nemotron_{8b,15b,22b}.yaml, from commit 43844fe4,
# 2024-06-17) and leave the GPT-3, Llama 2 and Nemotron-4 340B configs unfused;
# torchtitan's Llama attention repeated the GQA K/V heads (``repeat_kv``) before the kernel until
# pytorch/torchtitan#2259 (commit ff0829c1, 2026-01-27): its end-2024 (commit 9dec370), June-2025
# async-TP (820504e) and Trainy June-2025 benchmark tables ran before it
_SOURCE_SWITCHES = (("torchtitan_llama3_h100_202412", "", {"kv_repeat": True}),
                    ("torchtitan_asyncTP_llama3_h100_2025-06", "", {"kv_repeat": True}),
                    ("torchtitan_llama3-8b_h200_202506", "", {"kv_repeat": True}),
                    ("llmfoundry_mpt_throughput", "attn_impl=flash", {"attention_kernel": "fa1"}),
                    ("nemo_24.07_performance", "nemotron4config340b", {"main_grads_dtype": "bf16",
                                                                       "cross_entropy": "megatron"}),
                    ("nemo_24.07_performance", "standard config (gpt3-", {"cross_entropy": "megatron"}),
                    ("nemo_24.07_performance", "standard config (llama2-", {"cross_entropy": "megatron"}),
                    ("nemo_24.07_performance", "nemo 24.03", {"attention_kernel": "fa2"}),
                    ("nemo_24.07_performance", "nemo 24.07", {"attention_kernel": "fa2"}))
# stacks whose recipes run sequence parallelism whenever TP > 1 (NeMo's LLM recipes set
# sequence_parallel=True with TP > 1; Megatron-LM's Llama/GPT example scripts pass --sequence-parallel;
# torchtitan's TP plan shards the norms' activations on the sequence: SequenceParallel() on
# attention_norm and ffn_norm, RowwiseParallel(output_layouts=Shard(1)) on wo and w2,
# torchtitan/models/llama3/infra/parallelize.py apply_tp)
_SP_WITH_TP = ("megatron", "nemo", "torchtitan")


#: the flags the notes are read for (recipe switches by their Megatron key, --kv-repeat, the attention
#: backend, the distributed optimizer): a flag one slip away from one of them is a typo whose switch
#: would otherwise be dropped unseen (:func:`misspelt_note_flags`)
_READ_FLAGS = frozenset(["--" + s.megatron_key.replace("_", "-") for s in RECIPE_SWITCHES if s.megatron_key]
                        + ["--attention-backend", "--use-distributed-optimizer", "--overlap-param-gather", "--kv-repeat"])
_FLAG_TOKEN = re.compile(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", re.IGNORECASE)


def misspelt_note_flags(notes: str) -> list:
    """(written, meant) for each ``--flag`` in ``notes`` that is not one the reader reads (nor its ``--no-``
    form) but is one edit from one (costmodel.config_keys.one_edit_apart, as for a configuration's
    keys); flags farther from every read one (``--finetune``, ``--load``) are prose."""
    out = []
    for tok in dict.fromkeys(t.lower() for t in _FLAG_TOKEN.findall(notes or "")):
        bare = "--" + tok[5:] if tok.startswith("--no-") else tok
        near = [f for f in sorted(_READ_FLAGS) if one_edit_apart(bare, f)] if bare not in _READ_FLAGS else []
        if near:
            out.append((tok, near[0]))
    return out


def row_switches(r: dict) -> dict:
    """Recipe switches the row's source fixes (:data:`_SOURCE_SWITCHES`) or its notes name
    (:data:`_NOTE_SWITCHES`), e.g. Liger-Kernel's chunked loss."""
    notes = r.get("notes", "").lower()
    out: dict = {}
    for source, key, switches in _SOURCE_SWITCHES:
        if source in r.get("source_file", "") and key in notes:
            out.update(switches)
    if _REPEAT_KV.search(notes):          # before the note switches, so a --no-kv-repeat there wins
        out["kv_repeat"] = True
    for key, switches in _NOTE_SWITCHES:
        if note_says(notes, re.escape(key), 0):
            out.update(switches)
    out.update(_flag_switches(r.get("notes", "")))
    if note_says(r.get("notes", ""), _CPU_OFFLOAD):      # ZeRO-Offload: the step runs on the host CPU
        out["optimizer_offload"] = True
    return out


def _flag_switches(notes: str) -> dict:
    """The recipe switches Megatron flags in ``notes`` set (module comments above :data:`_BOOL_FLAGS`),
    the last mention of a flag winning; values as the flag spells them (the dispatcher's alias
    ``alltoall_seq`` read as ``alltoall``; the capacity factor by :func:`megatron_capacity_factor`,
    an unreadable one kept as written so the recipe refuses it by name; ``--recompute-modules`` takes
    the space-separated lower-case names after it)."""
    out: dict = {}
    for name, rx in _BOOL_FLAGS:
        for m in rx.finditer(notes):
            out[name] = not (m.group("neg") or m.group("no") or (m.group("val") or "").lower() in _OFF_WORDS)
    if _PARAM_GATHER.search(notes):
        out["dp_overlap"] = True
    for m in _ATTENTION_BACKEND.finditer(notes):
        # an unknown backend is kept as the kernel's value, which the recipe refuses by name
        out.update(attention_backend_switches(m.group("v")) or {"attention_kernel": m.group("v")})
    for sw, rx in _VALUE_FLAGS:
        for m in rx.finditer(notes):
            v = m.group("v")
            if sw.kind == "float":
                try:
                    v = megatron_capacity_factor(float(v)) if sw.name == "moe_capacity_factor" else float(v)
                except ValueError:
                    pass
            elif sw.kind == "choice":
                v = MOE_DISPATCHER_ALIASES.get(v, v)
            out[sw.name] = v
    return out


def row_sp(r: dict, stack: Stack, tp: int) -> tuple[bool, bool | str]:
    """(sequence parallelism, assumed): the ``sequence_parallel`` column where it says true/false (true
    at TP 1 is off, as Megatron-LM turns it off there: assumed is then the reason), else on with TP > 1
    for the stacks of :data:`_SP_WITH_TP` (assumed = True)."""
    v = (r.get("sequence_parallel") or "").strip().lower()
    if v == "true" and tp == 1:
        # sequence parallelism splits the TP group's activations: with no TP group there is none
        return False, ("Megatron-LM turns sequence parallelism off at TP 1" if stack.megatron_family else
                       "sequence parallelism splits over a TP group: none at TP 1")
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
    fits = memory_bytes(model, recipe, LayoutTable.from_rows(cands), cluster.gpu).peak_bytes <= cluster.gpu.capacity_bytes
    return cands[int(np.argmax(fits))] if fits.any() else cands[-1]


def _fastest_mbs(model, recipe, cluster, profile, row: dict, zeros, recomputes) -> dict | str:
    """The row at the unpublished micro-batch size that predicts the shortest step: every mbs dividing
    the batch of one DP rank (gbs / DP, at most :data:`_MAX_ASSUMED_MBS`) that gives a valid layout
    (costmodel.layouts.validity: e.g. a number of micro-batches VP can interleave), each with the
    cheapest ZeRO stage and recompute at which it fits (:func:`_least_costly_fit`); a published run is
    taken to be tuned, so the best layout that fits is the assumption.  Sizes that fit nowhere count
    only when none fits (then the smallest).  The reason to skip the row where no size is valid."""
    dp = row["dp"] or 1
    if recipe.gbs % dp:
        return f"gbs {recipe.gbs} is not divisible by DP {dp}: no micro-batch size gives every DP rank whole micro-batches"
    per_rank = recipe.gbs // dp
    sizes = [m for m in range(1, min(per_rank, _MAX_ASSUMED_MBS) + 1) if per_rank % m == 0]
    code, msgs = validity(LayoutTable.from_rows([dict(row, mbs=m, recompute="none", zero=row["zero"] or 0)
                                                 for m in sizes]), model, recipe, cluster.num_gpus,
                          cluster.scale_up_gpus, uneven_pp=True)
    sizes = [m for m, c in zip(sizes, code) if c < 0]
    if not sizes:
        first = msgs[code[0]]
        return (first if len(set(code)) > 1 or "micro-batch" not in first and "mbs" not in first else
                f"no micro-batch size dividing gbs / DP = {per_rank} gives a valid layout ({first})")
    cands = [_least_costly_fit(model, recipe, cluster, dict(row, mbs=m), zeros, recomputes) for m in sizes]
    pred = predict_table(model, recipe, cluster, profile, LayoutTable.from_rows(cands))
    step = np.where(pred.feasible, pred.step_time_s, np.inf)
    return cands[int(np.argmin(step))] if np.isfinite(step).any() else cands[0]


def stack_pipeline_mbs(r: dict, stack: Stack, row: dict, gbs: int) -> tuple[dict, tuple]:
    """The row at the micro-batch size (and VP) its stack's pipeline defaults to when the row states
    no micro-batch size, with what that assumes; the row unchanged and () where the stack has no such
    default (costmodel.stacks.Stack.pp_default_microbatches), there is no pipeline, or the batch of
    a DP rank does not split into PP x VP micro-batches.  VP is the row's, else 2 where its notes
    name an interleaved schedule, else 1."""
    dp, pp = row["dp"] or 1, row["pp"]
    if not stack.pp_default_microbatches or pp <= 1 or row["mbs"] is not None or gbs % dp:
        return row, ()
    vp_given = bool((r.get("vp") or "").strip())
    vp = row["vp"] if vp_given else (2 if "interleaved" in (r.get("notes") or "").lower() else 1)
    n_mb, per_rank = pp * vp, gbs // dp
    if per_rank % n_mb:
        return row, ()
    mbs = per_rank // n_mb
    return dict(row, mbs=mbs, vp=vp), ((f"mbs={mbs}({stack.name}: PP x {vp} stage(s) per rank = {n_mb} "
                                        "micro-batches)",) + ((f"vp={vp}",) if vp != row["vp"] else ()))


def switch_problem(model: ModelSpec, switches: dict, tp: int, sp: bool) -> str | None:
    """Why the switches a row's notes set contradict the row, or None: an MoE switch on a dense model
    (``predict`` refuses it), TP-comm overlap with TP > 1 and no sequence parallelism (Megatron asserts
    ``sequence_parallel`` with ``tp_comm_overlap``, megatron/training/arguments.py), a recompute module
    the row's model lacks.

    Raises:
        InputError: an unknown recompute module in the notes (caught by validate, naming the row).
    """
    moe = [k for k in switches if k in SWITCHES_BY_NAME and SWITCHES_BY_NAME[k].moe]
    if moe and not model.is_moe:
        return f"the notes name the MoE switch(es) {', '.join(moe)} on a dense row (num_experts empty or 1)"
    if switches.get("tp_comm_overlap") and tp > 1 and not sp:
        return "the notes turn TP-comm overlap on, which needs sequence parallelism (sequence_parallel is false)"
    if switches.get("recompute_modules"):
        why = recompute_modules_problem(model, recompute_module_list(switches["recompute_modules"], "notes"))
        if why:
            return f"the notes' --recompute-modules {why}"
    return None


def notes_name_dist_opt(r: dict) -> bool:
    """Whether the row's notes name Megatron's distributed optimizer (``--use-distributed-optimizer``, or
    ``--overlap-param-gather``, which needs it), whatever its ``fsdp_or_zero`` says."""
    return _DIST_OPT.search(r.get("notes", "")) is not None


def notes_dist_opt(r: dict) -> bool:
    """Whether the row's ZeRO stage comes from its notes naming Megatron's distributed optimizer (an
    empty ``fsdp_or_zero``; :func:`row_zero`)."""
    return not (r.get("fsdp_or_zero") or "").strip() and notes_name_dist_opt(r)


def row_stack(r: dict) -> Stack | None:
    """The row's training stack: its ``stack`` column, else the stack of its source where that is a
    shipped dev-set source (:data:`_SOURCE_STACKS`, by file name); None when neither says (the row is
    skipped)."""
    name = (r.get("stack") or "").strip()
    if name:
        return STACKS.get(name)
    src = (r.get("source_file") or "").strip().replace("\\", "/").rsplit("/", 1)[-1]
    return STACKS[_SOURCE_STACKS[src]] if src in _SOURCE_STACKS else None


def row_zero(r: dict) -> int | None:
    """ZeRO stage of the row's ``fsdp_or_zero``: zero-1 -> 1; zero-2 or FSDP SHARD_GRAD_OP (or its hybrid,
    _HYBRID_SHARD_ZERO2) -> 2; zero-3 or FSDP (FULL_SHARD, PyTorch's default sharding strategy, also alone;
    HYBRID_SHARD) -> 3; empty with notes naming Megatron's
    distributed optimizer (``--use-distributed-optimizer``, or ``--overlap-param-gather``, which needs
    it) -> 1; empty, none or zero-0 -> 0; None for any other value."""
    if notes_dist_opt(r):
        return 1
    v = (r.get("fsdp_or_zero") or "").strip().lower()
    if v in ("", "none", "zero-0"):
        return 0
    if re.fullmatch(r"zero-1\b.*", v):
        return 1
    if re.fullmatch(r"zero-2\b.*", v) or "shard_grad_op" in v or "hybrid_shard_zero2" in v:
        return 2
    if re.fullmatch(r"zero-3\b.*", v) or v.startswith("fsdp") or v in ("full_shard", "hybrid_shard"):
        return 3
    return None


def row_family(r: dict) -> str:
    """The architecture family :func:`row_model` prices a row as, from its model name:
    bloom, llama (Llama, Mistral, Mixtral, Qwen), mpt, nemotron, gpt (GPT, Megatron, MT-NLG), or
    ``unrecognised`` (priced as Megatron GPT too, an assumption the row report lists)."""
    name = r.get("model") or ""
    if "BLOOM" in name.upper():
        return "bloom"
    if _LLAMA_FAMILY.search(name):
        return "llama"
    for fam in ("mpt", "nemotron"):
        if name.lower().startswith(fam):
            return fam
    return "gpt" if re.search(r"GPT|MEGATRON|MT-NLG", name.upper()) else "unrecognised"


#: architecture columns a row shares with a catalog model, and the ModelSpec field each one gives
_CATALOG_COLUMNS = (("num_layers", "num_layers"), ("hidden", "hidden"), ("ffn_hidden", "ffn_hidden"),
                    ("num_heads", "num_heads"), ("num_kv_heads", "num_kv_heads"), ("head_dim", "head_dim"),
                    ("vocab", "vocab"), ("num_experts", "num_experts"), ("moe_topk", "topk"))


def _name_key(name: str) -> str:
    """A model name without case, spaces, hyphens or underscores: 'GPT OSS 120B' and 'gpt-oss-120b' agree."""
    return re.sub(r"[^a-z0-9.]", "", name.lower())


@functools.lru_cache(maxsize=None)
def _catalog_model(key: str) -> ModelSpec | None:
    """The catalog ModelSpec whose name has :func:`_name_key` ``key``, None when the catalog has none
    (read once per name)."""
    from .specs import list_models, load_model
    names = {_name_key(n): n for n in list_models()}
    return load_model(names[key]) if key in names else None


def catalog_mismatch(r: dict) -> str | None:
    """Where a row naming a catalog model departs from it (``num_layers 81, catalog 80``), None when it
    names none or agrees (:func:`catalog_row_model`)."""
    spec = _catalog_model(_name_key(r.get("model") or ""))
    if spec is None or catalog_row_model(r) is not None:
        return None
    for col, attr in _CATALOG_COLUMNS:
        v = _int(r, col)
        if v is not None and v != getattr(spec, attr):
            return f"{col} {v}, catalog {spec.name} {getattr(spec, attr)}"
    return None


def catalog_row_model(r: dict) -> ModelSpec | None:
    """The catalog model a row names (its ``model`` cell, case, spaces, hyphens and underscores aside:
    ``GPT OSS 120B`` is ``gpt-oss-120b``) when every architecture column the row fills agrees with it, else None.

    The catalog knows what a row's columns cannot say (MLA, sliding-window layers, attention sinks,
    biases, QK norms, dense-first layers, shared experts), so a row of a catalog model is priced as that
    model; a row whose columns differ from it ran something else and is read from its columns."""
    spec = _catalog_model(_name_key(r.get("model") or ""))
    if spec is None:
        return None
    for col, attr in _CATALOG_COLUMNS:
        v = _int(r, col)
        dense_either_way = col == "num_experts" and v is not None and v <= 1 and spec.num_experts == 1
        if v is not None and v != getattr(spec, attr) and not dense_either_way:
            return None
    return spec


def row_model(r: dict, stack: Stack) -> ModelSpec:
    """The ModelSpec of a dev-set row: the catalog model it names (:func:`catalog_row_model`), else one
    built by the architecture family of its model name.

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
    * the optional ``head_dim`` column sets the attention head width (default hidden / heads: Qwen3
      and Gemma decouple the two).
    Stacks that pad the vocabulary (Megatron, ``make_vocab_size_divisible_by`` 128) pad it to a
    multiple of 128 x TP unless the row already gives a padded size.
    """
    name = r.get("model") or ""
    family = row_family(r)
    bloom, llama, mpt, nemotron = (family == f for f in ("bloom", "llama", "mpt", "nemotron"))
    tp = _int(r, "tp") or 1
    catalog = catalog_row_model(r)
    vocab = catalog.vocab if catalog else _int(r, "vocab")
    if stack.pads_vocab:
        mult = 128 * tp
        vocab = int(math.ceil(vocab / mult) * mult)
    if catalog:
        return replace(catalog, vocab=vocab, seq_len=_int(r, "seq_len") or catalog.seq_len)
    h, heads = _int(r, "hidden"), _int(r, "num_heads")
    experts = _int(r, "num_experts") or 1
    gpt = family in ("gpt", "unrecognised")
    learned = gpt or mpt
    return ModelSpec(
        name=name, display_name=name, num_layers=_int(r, "num_layers"), hidden=h,
        ffn_hidden=_int(r, "ffn_hidden") or 4 * h, num_heads=heads,
        num_kv_heads=_int(r, "num_kv_heads") or heads, head_dim=_int(r, "head_dim") or h // heads, vocab=vocab,
        gated=llama,
        activation="silu" if llama else "relu2" if nemotron else "gelu", tie_embeddings=not (llama or nemotron),
        num_experts=experts,
        topk=_int(r, "moe_topk") or 1, learned_positions=learned, max_positions=_int(r, "seq_len") if learned else 0,
        dropout=gpt, bias=gpt or bloom, seq_len=_int(r, "seq_len"),
        shared_ffn_hidden=(_shared_expert(r) or 0) if experts > 1 else 0)


def _shared_expert(r: dict) -> int | None:
    """The shared-expert width an MoE row's notes give ('shared expert (5632)'), or None when they
    give none or an unreadable one (not a whole number in 1..10^6)."""
    m = _SHARED_EXPERT.search(r.get("notes", ""))
    return int(m.group(1)) if m and 1 <= int(m.group(1)) <= 10**6 else None
