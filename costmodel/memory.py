"""Peak HBM bytes per GPU of a layout: model states + activations of the in-flight micro-batches.

* Model states (Rajbhandari et al. SC20 "ZeRO", mixed precision): 2 bytes bf16 weights, 4 bytes
  fp32 main gradients (2 under fp16), and the optimizer's fp32 master weight + its fp32 states per
  parameter: 12 bytes for Adam (m, v), 8 for LionW or SGD with momentum, 4 for Adafactor (factored
  second moment; costmodel.specs.recipe.OPTIMIZERS).  ZeRO-1 (Megatron distributed optimizer) shards
  the optimizer bytes over DP x CP, ZeRO-2 also the
  gradients, ZeRO-3/FSDP everything (plus two gathered layers in flight); PyTorch's FSDP (torchtitan,
  llm-foundry) shards the fp32 parameter itself, which is the master: 4 bytes of weights, the states
  alone in the optimizer's share.  Expert parameters shard
  over the expert-data-parallel group DP x CP / EP.  DeepSpeed's ZeRO-Offload moves the gradients
  to the host as they are reduced (:func:`offloaded_grad_bytes`): the GPU keeps its reduce bucket.
* Activations per layer and micro-batch (Korthikanti et al. 2022, "Reducing Activation
  Recomputation in Large Transformer Models", section 4): s b h (34 + 5 a s / h) bytes for GPT
  with dropout, generalised here term by term to GQA (K and V of width kv), gated MLPs, MoE top-k
  and no-dropout models; with TP and SP everything divides by t; without SP the norm and dropout
  terms stay replicated (10 + 24/t); selective recompute drops the s^2 attention terms; full
  recompute keeps only the layer input (2 s b h / t) plus, while one layer re-runs, the rest of its
  activations (with some layers kept, as --recompute-num-layers keeps them, the backward frees those
  first, so the re-run adds nothing once one whole layer is kept).  Flash
  attention (Dao 2022) stores no s^2 tensor but the output and the fp32 log-sum-exp.
* In-flight micro-batches of 1F1B (Narayanan et al. SC21): the first stage holds min(PP, m)
  micro-batches of its L/PP layers; interleaved with VP chunks it holds
  min(VP m, (PP-1) 2 + (VP-1) PP + 1) chunks of L/(PP VP) layers (Megatron-core warm-up count),
  i.e. about L (1 + (PP-1)/(PP VP)) layers' worth, and one chunk more under batch-level EP overlap.  The last
  stage holds one micro-batch of its layers (interleaved, the (VP-1) PP + 1 chunks of its own warm-up) but also
  the logits of the cross-entropy, at the bytes per logit of the recipe's implementation
  (costmodel.specs.recipe.CROSS_ENTROPIES: 10 eager fp32, 6 Megatron, 2 fused in place, 0 chunked), and
  with multi-token prediction each MTP module's layer and logits again (DeepSeek-V3 sec. 2.2).
* An MoE layer's dispatch holds one buffer beside what it saves while it runs
  (:func:`dispatch_transient_bytes`): the allgather dispatcher's hidden states of the whole EP x ETP
  group, the all-to-all and flex dispatchers' received rows before their permutation.
* Transformer Engine's cached quantized weights (:func:`fp8_weight_bytes_per_layer`): under an FP8
  format on the Megatron family every fp8 linear layer keeps its weight's quantized copy (with its
  transpose where the GPU's FP8 GEMM takes only the TN layout) from the first micro-batch to the
  last, beside the 16-bit weight; with fp8 parameters (``--fp8-param-gather``) that copy is the weight.
* Reserved outside the allocator's tensors (:func:`reserved_bytes`): the CUDA context and NCCL's
  receive buffers of each communicator in use, and DeepEP's buffers under the flex dispatcher.  Capacity is the CUDA-visible total of the GPU
  (:attr:`costmodel.specs.GpuSpec.capacity_bytes`).  Allocator fragmentation is not modelled:
  the peak is what the tensors need, a lower bound of what the caching allocator reserves.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .comm import fp8_layer_share, fp8_params_on
from .stage_params import grad_bytes, layer_params_per_gpu, rank_params, stage_params
from .compute import ACT_BYTES
from .formats import gemm_format
from .moe import deepep_buffer_bytes, dispatch_transient_rows, run_rank_load
from .layouts import (LayoutTable, expert_shard_dp, shard_dp, layers_per_stage, light_last_stage, microbatches, recomputed_fraction)
from .layout_fields import uses_layout_fields
from .specs import ModelSpec, Recipe
from .stacks import TE_STACKS, get_stack


def stage_moe_fraction(model: ModelSpec, t: LayoutTable) -> np.ndarray:
    """Share of MoE layers on the stage memory is checked on: the one holding the most of them
    (costmodel.stage_params.stage_params: a model's dense layers sit together, e.g. DeepSeek's first three),
    so its activations and its model states describe the same GPU (array over layouts)."""
    per_stage = layers_per_stage(model, t).astype(np.float64)
    return np.where(model.is_moe, np.minimum(per_stage, model.moe_layers) / per_stage, 0.0)


def activation_bytes_per_layer(model: ModelSpec, recipe: Recipe, t: LayoutTable):
    """Activation bytes one layer stores for backward, per micro-batch, on one GPU (array).

    Returns the no-recompute / selective figure by layout (full recompute is handled by
    :func:`memory_bytes`).  Korthikanti et al. 2022 eq. (1)-(4), term by term; selective on a stack
    with op-level SAC (torchtitan, costmodel.stacks) keeps only what its policy saves.  With
    ``bf16_edge_layers`` the fullest stage's share of BF16 layers (costmodel.compute.edge_layer_share)
    stores their 16-bit activations (no fp8 copies of the GEMM inputs).
    """
    if recipe.bf16_edge_layers:
        from .compute import edge_layer_share, edge_recipe16
        share = edge_layer_share(model, recipe, t)
        return ((1.0 - share) * _activation_bytes(model, replace(recipe, bf16_edge_layers=0), t)
                + share * _activation_bytes(model, edge_recipe16(recipe), t))
    return _activation_bytes(model, recipe, t)


def _activation_bytes(model: ModelSpec, recipe: Recipe, t: LayoutTable):
    """:func:`activation_bytes_per_layer` of a recipe whose layers all run its format."""
    s = recipe.seq_len
    tok = t.mbs * s / t.cp
    tp = t.tp.astype(np.float64)
    sp_div = np.where(t.sp, tp, 1.0)
    h, q, ffn = model.hidden, model.q_dim, model.ffn_hidden
    B = ACT_BYTES
    drop = 1.0 if model.dropout else 0.0
    # replicated-or-SP-sharded: 2 norm inputs, QKV input, FC1 input, 2 dropout masks
    sharded = tok * (2 * h * B + h * B + h * B + 2 * drop * h) / sp_div
    # TP-sharded: Q, K, V (the kernel's inputs: repeated heads where the stack repeats them), attention
    # output (out-proj input); MLA also keeps the Q and KV latents (inputs of the up-projections,
    # duplicated over TP)
    qkvo = model.q_dim + model.attention_kv_width(recipe.kv_repeat) + model.attn_out_dim
    attn = tok * qkvo * B / tp
    if model.is_mla:
        attn = attn + tok * (model.q_lora_rank + model.kv_lora_rank) * B
    heads_local = model.num_heads / tp
    if recipe.flash_attention:
        attn = attn + t.mbs * heads_local * (s / t.cp) * 4.0          # fp32 log-sum-exp
    s2 = score_bytes(model, recipe, t)
    # activation input and FC2 input of each MLP a token passes: the mean of MoE layers (top-k
    # routed experts, shared experts, dispatched and combined tokens) and dense layers
    mats_in = 2 if model.gated else 1
    dense_mlp = tok * (mats_in + 1) * model.dense_mlp_width * B / tp
    f = stage_moe_fraction(model, t)
    # the busiest EP rank holds its load over the mean (padded: the capacity) of routed tokens
    load = run_rank_load(model, recipe, tok, tp, t.etp, t.ep) if model.is_moe else 1.0
    if model.is_moe:
        moe_w = model.topk * ffn * load + model.shared_ffn_hidden
        moe_mlp = tok * (mats_in + 1) * moe_w * B / tp + tok * model.topk * h * B * 2 * load / sp_div
        mlp = f * moe_mlp + (1 - f) * dense_mlp
    else:
        mlp = dense_mlp
    if not recipe.fused_elementwise:
        sharded, mlp = _eager_extra_bytes(model, tok, tp, sp_div, f, load, sharded, mlp)
    selective = t.recompute == 1
    # selective recompute drops the s^2 scores where the attention core is recomputed; under full
    # recompute the layers it keeps hold them, and the one it re-runs does while it runs (memory_bytes)
    core = selective & ("core_attn" in recipe.recomputed)
    full_store = sharded + attn + mlp + np.where(core, 0.0, s2)
    stack = get_stack(recipe.stack)
    if stack.selective_recompute != "op-sac":
        mods = np.where(selective, _module_bytes(model, recipe, tok, tp, sp_div, f, load), 0.0)
        fp8 = _te_fp8_saved_bytes(model, recipe, tok, tp, sp_div, selective, f, load) if (
            gemm_format(recipe.precision).low and stack.megatron_family) else 0.0
        return full_store - mods - fp8
    # torchtitan op-level SAC keeps the block input, every second matmul's output (Q, V, FC1's first
    # projection, FC2's output in Llama's wq wk wv wo w1 w3 w2 order) and the attention kernel's
    # output and log-sum-exp; the rest is recomputed in backward
    mlp_w = f * (model.topk * ffn + model.shared_ffn_hidden) + (1 - f) * model.dense_mlp_width
    sac = (tok * (h + h) * B / sp_div + tok * (q + model.v_dim + model.attn_out_dim) * B / tp
           + tok * mlp_w * B / tp + (attn - tok * qkvo * B / tp))
    return np.where(selective, sac, full_store)


#: bytes per element an eager RMSNorm saves for backward (torchtitan's RMSNorm, HF LlamaRMSNorm, the
#: composite torch.nn.functional.rms_norm): ``x.float()``'s fp32 copy (4), which ``pow`` and the ``* rsqrt``
#: product both save, and the normalised tensor cast back to bf16 (2), which ``* weight`` saves for the
#: weight's gradient; a fused norm (TE, Apex) keeps its 2-byte input and a per-row rstd
EAGER_NORM_SAVED_BYTES = 6.0


def _eager_extra_bytes(model: ModelSpec, tok, tp, sp_div, f, load, sharded, mlp):
    """``sharded`` and ``mlp`` of :func:`_activation_bytes` with what eager (unfused) elementwise ops keep
    besides: each of the layer's two RMSNorms :data:`EAGER_NORM_SAVED_BYTES` a hidden element for the
    2-byte input counted, and a gated MLP ``silu(gate)``'s output, which the ``* up`` product saves
    beside ``gate`` (saved by silu) and ``up`` (PyTorch autograd's saved tensors of each op; a fused
    SwiGLU keeps gate and up and recomputes the activation).  A model with biased LayerNorms
    (``model.bias``: GPT, BLOOM, MPT) runs PyTorch's native layer_norm kernel, which keeps its input and
    per-row statistics alone (nothing is added for it)."""
    if not model.bias:
        sharded = sharded + tok * 2 * model.hidden * (EAGER_NORM_SAVED_BYTES - ACT_BYTES) / sp_div
    if model.gated:
        width = f * (model.topk * model.ffn_hidden * load + model.shared_ffn_hidden) + (1 - f) * model.dense_mlp_width
        mlp = mlp + tok * width * ACT_BYTES / tp
    return sharded, mlp


def score_bytes(model: ModelSpec, recipe: Recipe, t: LayoutTable):
    """Bytes of one layer's materialised attention scores per micro-batch on one GPU (array; 0 under fused
    attention, which keeps none): the softmax output, and with dropout its mask and output, of the
    local heads' (s / CP) x s scores (Korthikanti et al. 2022: the 5 a s^2 b term with dropout, 2 a s^2 b
    without)."""
    if recipe.flash_attention:
        return np.zeros(len(t))
    drop = 1.0 if model.dropout else 0.0
    scores = t.mbs * (model.num_heads / t.tp) * (recipe.seq_len / t.cp) * recipe.seq_len
    return scores * (ACT_BYTES + drop * (1 + ACT_BYTES))


def _module_bytes(model: ModelSpec, recipe: Recipe, tok, tp, sp_div, f, load):
    """Bytes per layer and micro-batch that Megatron-core's ``--recompute-modules`` beyond the attention
    core (costmodel.specs.RECOMPUTE_MODULES) do not keep, on the terms of
    :func:`activation_bytes_per_layer`: ``mla_up_proj`` the up-projected Q, K, V; ``layernorm`` the
    pre-MLP norm output of MoE layers; ``moe_act`` the routed experts' FC2 input; ``shared_experts``
    the shared experts' tensors; ``moe`` everything of an MoE layer but its input; ``mlp`` the dense
    MLP's tensors but its input (megatron/core/transformer/transformer_layer.py, moe/experts.py).
    ``f``: the stage's MoE-layer share, ``load``: the busiest EP rank's load over the mean."""
    mods = recipe.recomputed
    B = ACT_BYTES
    mats = (2 if model.gated else 1) + 1
    out = 0.0
    if "mla_up_proj" in mods and model.is_mla:
        out = out + tok * (model.q_dim + model.k_dim + model.v_dim) * B / tp
    if "mlp" in mods:
        out = out + (1 - f) * tok * mats * model.dense_mlp_width * B / tp
    if model.is_moe:
        if "layernorm" in mods:
            out = out + f * tok * model.hidden * B / sp_div
        if "moe" in mods:
            moe_w = model.topk * model.ffn_hidden * load + model.shared_ffn_hidden
            out = out + f * (tok * mats * moe_w * B / tp + tok * model.topk * model.hidden * B * 2 * load / sp_div)
        else:
            if "moe_act" in mods:
                out = out + f * tok * model.topk * model.ffn_hidden * load * B / tp
            if "shared_experts" in mods:
                out = out + f * tok * mats * model.shared_ffn_hidden * B / tp
    return out


def _te_fp8_saved_bytes(model: ModelSpec, recipe: Recipe, tok, tp, sp_div, selective, f, load):
    """Bytes per layer and micro-batch that Transformer Engine's low-precision GEMMs save against the
    16-bit tensors of :func:`activation_bytes_per_layer`: a TE linear layer under fp8 (or MXFP8, NVFP4:
    costmodel.formats' operand bytes, scales included) keeps its input for the weight-gradient GEMM as
    the quantized tensor (1 byte in fp8, column-wise usage only; NVIDIA/
    TransformerEngine transformer_engine/pytorch/module/linear.py, ``saved_inputmat = inputmat``
    after ``update_usage(rowwise_usage=False, columnwise_usage=True)``; the same in LayerNormLinear,
    LayerNormMLP and GroupedLinear).  The inputs of the QKV (or MLA down-) projection, of FC1 (the
    dispatched tokens in MoE layers) and of FC2 shrink by one byte per element; the attention output,
    which the fused attention keeps in 16 bits for its own backward, gains a 1-byte copy for the
    output projection.  Inputs of modules that selective recomputation drops are not counted twice."""
    mods = recipe.recomputed
    h = model.hidden
    q = gemm_format(recipe.precision).operand_bytes     # the quantized copy's bytes per element
    one = ACT_BYTES - q
    dense_mlp_kept = np.where(selective & ("mlp" in mods), 0.0, 1.0)
    saved = tok * h * one / sp_div                                           # QKV / MLA down-projection input
    saved = saved + (1 - f) * tok * (h / sp_div + dense_mlp_kept * model.dense_mlp_width / tp) * one
    if model.is_moe:
        moe_kept = np.where(selective & ("moe" in mods), 0.0, 1.0)
        act_kept = np.where(selective & ("moe_act" in mods), 0.0, 1.0) * moe_kept
        shared_kept = np.where(selective & ("shared_experts" in mods), 0.0, 1.0) * moe_kept
        saved = saved + f * one * tok * (moe_kept * model.topk * h * load / sp_div
                                         + act_kept * model.topk * model.ffn_hidden * load / tp
                                         + shared_kept * model.shared_ffn_hidden / tp)
    return saved - tok * model.attn_out_dim * q / tp


def fp8_weight_bytes_per_layer(model: ModelSpec, recipe: Recipe, t, gpu=None) -> np.ndarray:
    """Bytes per GPU and transformer layer that low-precision weights add to the 16-bit weights
    (array over layouts; reads ``tp``, ``dp``, ``cp``, ``ep``, ``etp``, ``zero``): the quantized copies
    Transformer Engine keeps between micro-batches, or, with fp8 parameters (costmodel.comm.fp8_params_on),
    those less the 16-bit weights they replace
    (Megatron ``--fp8-param-gather``: the model's parameters are TE Float8Tensors, with their
    transpose where the GEMM needs it, and no cache).

    Megatron-core passes ``is_first_microbatch`` to every TE linear layer (megatron/core/extensions/
    transformer_engine.py, unless ``disable_parameter_transpose_cache``), so TE quantizes each weight
    once per step and caches the copy in the module's ``_fp8_workspaces`` (transformer_engine/pytorch/
    module/base.py ``quantize_weight``, linear.py ``cache_weight``; GroupedLinear one per expert).  The
    copy holds the row-wise data and, where the GEMM needs it, the column-wise data: FP8 on a GPU
    whose FP8 GEMM takes only the TN layout (Hopper, Ada; ``is_non_tn_fp8_gemm_supported`` is
    compute capability 10.x or >= 13) keeps a transpose too, MXFP8 and NVFP4 keep both block-scaled
    directions; one copy for FP8 on Blackwell.  Each element at costmodel.formats' operand bytes,
    scales included.  0 outside the Megatron family (torchao and llm-foundry's TE layers cast per
    call), without a low-precision format, under ZeRO-3 (gathered weights), and for the BF16 edge
    layers (``--first-last-layers-bf16``: their share of the layers).  ``gpu`` None takes the TN-only
    layout (two copies under FP8).
    """
    fmt = gemm_format(recipe.precision)
    n = len(np.asarray(t.tp))
    if not fmt.low or not get_stack(recipe.stack).megatron_family:
        return np.zeros(n)
    one_copy = recipe.precision == "fp8" and gpu is not None and gpu.architecture == "blackwell"
    copies = 1.0 if one_copy else 2.0
    fp8_share = fp8_layer_share(model, recipe)
    z = np.asarray(t.zero)
    fp8_params = fp8_params_on(recipe, z, t.dp * t.cp)
    per = (copies * fmt.operand_bytes - np.where(fp8_params, ACT_BYTES, 0.0)) * fp8_share * layer_params_per_gpu(model, t)
    return np.where(z == 3, 0.0, per)


# CUDA context of a PyTorch process with lazy module loading (CUDA >= 11.7): ~300 MB, the driver,
# the loaded kernels and the cuBLAS workspace (PyTorch maintainer, pytorch/pytorch#107667, 2023).
CUDA_CONTEXT_BYTES = 300 * 2**20
# NCCL receive buffers per peer connection and channel, one per protocol: Simple 4 MiB
# (DEFAULT_BUFFSIZE = 1 << 22), LL128 120 x 640 x 8 steps x 8 B = 4,915,200 B, LL 8 x 512 x 8 steps
# x 16 B = 512 KiB (NVIDIA/nccl src/init.cc DEFAULT_*_BUFFSIZE), over NCCL's MAXCHANNELS = 32
# channels (src/include/device.h): ~294 MiB per communicator whose ring is connected.
NCCL_CHANNELS = 32
NCCL_COMM_BYTES = NCCL_CHANNELS * ((1 << 22) + 120 * 640 * 8 * 8 + 8 * 512 * 8 * 16)


@uses_layout_fields("tp", "pp", "dp", "cp", "ep", "etp")
def dispatch_transient_bytes(model: ModelSpec, recipe: Recipe, t: LayoutTable) -> np.ndarray:
    """Bytes of the dispatch buffer an MoE layer holds while it runs, on top of the stored activations
    (costmodel.moe.dispatch_transient_rows), at the busiest EP rank's load; 0 for a dense model or a
    stage without MoE layers."""
    if not model.is_moe:
        return np.zeros(len(t))
    tok = t.mbs * recipe.seq_len / t.cp
    tp = t.tp.astype(np.float64)
    sp_tok = tok / np.where(t.sp, tp, 1.0)
    load = run_rank_load(model, recipe, tok, tp, t.etp, t.ep)
    rows = dispatch_transient_rows(recipe.moe_dispatcher, sp_tok, model.topk, t.etp, t.ep, load)
    return np.where(stage_moe_fraction(model, t) > 0, rows * model.hidden * ACT_BYTES, 0.0)


def reserved_bytes(t: LayoutTable, model: ModelSpec | None = None, recipe: Recipe | None = None) -> np.ndarray:
    """Bytes per GPU held outside the model's tensors (array over layouts): the CUDA context plus
    NCCL's buffers for each parallel group of more than one rank (TP, CP, DP x CP gradients, EP,
    PP send/recv, and under HSDP the shard and the replica groups), and with the flex dispatcher of an MoE ``model`` DeepEP's own buffers for its
    EP x ETP group (costmodel.moe.deepep_buffer_bytes).  Sources: see CUDA_CONTEXT_BYTES and
    NCCL_COMM_BYTES.
    """
    groups = ((t.tp > 1).astype(np.float64) + (t.cp > 1) + (t.dp * t.cp > 1) + (t.ep > 1) + (t.pp > 1)
              + 2 * (t.dp_replicate > 1))
    out = CUDA_CONTEXT_BYTES + NCCL_COMM_BYTES * groups
    if model is not None and recipe is not None and model.is_moe and recipe.moe_dispatcher == "flex":
        out = out + deepep_buffer_bytes(model.hidden, t.ep * t.etp)
    if model is not None and recipe is not None:
        out = out + userbuffer_bytes(model, recipe, t)
    return out


#: Transformer Engine's userbuffer communicators of the TP-comm overlap, one per overlapped GEMM
#: (transformer_engine/pytorch/module/base.py initialize_ub at NVIDIA/TransformerEngine d0067d0d): ring
#: exchange qkv_fprop, fc1_fprop, proj_dgrad, fc2_dgrad; pipeline proj_fprop, fc2_fprop; bulk qkv_dgrad,
#: qkv_wgrad, fc1_dgrad, fc1_wgrad; external proj_wgrad, fc2_wgrad.  Each registers one buffer of the
#: shape Megatron passes, [seq x mbs / CP, hidden] (megatron/training/initialize.py
#: _initialize_tp_communicators), in bf16, or in one byte under FP8 for the all-gather side
#: (``layers_all_gather_overlap``, 8 of the 12; common/comm_gemm_overlap/comm_gemm_overlap.cpp: the
#: all-gather ring-exchange buffer is the whole shape too)
UB_BUFFERS_16BIT, UB_BUFFERS_FP8_SIDE = 12, 8


def userbuffer_bytes(model: ModelSpec, recipe: Recipe, t) -> np.ndarray:
    """Bytes of Transformer Engine's TP-comm-overlap userbuffers per GPU (array over layouts; reads
    ``tp``, ``sp``, ``overlap``, ``mbs``, ``cp``): allocated once at start-up where the overlap runs
    (a TE stack, TP > 1 with SP), :data:`UB_BUFFERS_16BIT` buffers of seq x mbs / CP x hidden, the
    all-gather ones in one byte under an FP8 format; an FP8 run keeping BF16 edge layers registers a
    second, 16-bit set (Megatron's quantization_modes); 0 elsewhere."""
    on = (t.tp > 1) & t.sp & t.overlap & bool(recipe.tp_comm_overlap) & (recipe.stack in TE_STACKS)
    shape = t.mbs * recipe.seq_len / t.cp * model.hidden
    fp8 = recipe.precision in ("fp8", "mxfp8")
    per = (UB_BUFFERS_FP8_SIDE + 2.0 * (UB_BUFFERS_16BIT - UB_BUFFERS_FP8_SIDE)) if fp8 else 2.0 * UB_BUFFERS_16BIT
    if fp8 and recipe.bf16_edge_layers > 0:
        per = per + 2.0 * UB_BUFFERS_16BIT
    return np.where(on, per * shape, 0.0)


def optimizer_bytes_per_param(recipe: Recipe) -> float:
    """Optimizer bytes per parameter: the fp32 master weight + the optimizer's fp32 states (4 bytes
    each), e.g. 12 for Adam, 8 for LionW (costmodel.specs.recipe.OPTIMIZERS for the sources); with
    ``optimizer_states_dtype`` bf16, 2 bytes each: the bf16 states and the master's 16-bit remainder
    (Megatron's precision-aware optimizer, store_param_remainders), 6 for Adam; 0 on the GPU when the
    optimizer is offloaded to the host.  A stack that reduces 16-bit gradients (DeepSpeed,
    costmodel.stacks.Stack.grads_in_model_dtype) adds the fp32 gradient its step gives the master
    weights, 4 bytes, sharded as they are."""
    if recipe.optimizer_offload:            # ZeRO-Offload: master and states live in host memory
        return 0.0
    per = 2.0 if recipe.optimizer_states_dtype == "bf16" else 4.0
    fp32_grad = 4.0 if get_stack(recipe.stack).grads_in_model_dtype else 0.0
    return per * (1 + recipe.optimizer_spec.fp32_states) + fp32_grad


#: DeepSpeed's ZeRO reduce bucket, elements: ``reduce_bucket_size`` default 5e8
#: (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig)
DS_REDUCE_BUCKET_ELEMS = 5e8


def offloaded_grad_bytes(model: ModelSpec, recipe: Recipe, t) -> np.ndarray:
    """GPU bytes of the gradients under DeepSpeed's ZeRO-Offload (``offload_optimizer``; array over
    layouts, reads ``t.zero`` and ``t.tp``): the gradients go to pinned host buffers as each bucket is
    reduced, so the GPU holds the reduce bucket, ``reduce_bucket_size`` elements in the model's 16-bit
    dtype (ZeRO-3: deepspeed/runtime/zero/stage3.py, the ipg bucket on the GPU and
    ``grad_partitions_flat_buffer`` on ``self.device``, the CPU under offload); ZeRO-1/2 add a
    staging copy of their largest parameter (stage_1_and_2.py ``temp_grad_buffer_for_gpu_offload``,
    ``largest_param_numel``), the embedding (vocab x hidden / TP) or a layer's widest matrix.
    Megatron's optimizer offload keeps its gradient buffer on the GPU (not this function)."""
    widest = max(model.vocab * model.hidden, model.hidden * max(model.ffn_hidden, model.dense_mlp_width,
                                                               model.q_dim))
    staging = np.where(t.zero == 3, 0.0, ACT_BYTES * widest / np.asarray(t.tp, dtype=np.float64))
    return ACT_BYTES * DS_REDUCE_BUCKET_ELEMS + staging


@dataclass
class MemoryBreakdown:
    """Peak bytes per GPU (arrays over layouts): weights, grads, optimizer, activations, reserved
    (CUDA context + NCCL buffers) and their total."""

    weights_bytes: np.ndarray
    grads_bytes: np.ndarray
    optimizer_bytes: np.ndarray
    activations_bytes: np.ndarray
    peak_bytes: np.ndarray
    reserved_bytes: np.ndarray


@dataclass
class _MemoryParts:
    """What every pipeline rank's memory is built from (arrays over layouts): ``states(dense, expert,
    col)`` -> (weights, grads, optimizer) bytes of those parameters per GPU, the stored activation bytes
    of one layer and micro-batch, the working set one layer adds while it runs, the last stage's logits,
    the micro-batches per step, the reserved bytes, the cached quantized weights of one layer
    (:func:`fp8_weight_bytes_per_layer`) and the chunks an interleaved schedule keeps in flight beyond
    its warm-up count (:func:`interleaved_flight`)."""

    states: object
    stored_layer: np.ndarray
    working: np.ndarray
    logits: np.ndarray
    microbatches: np.ndarray
    reserved: np.ndarray
    fp8_weight_layer: np.ndarray
    extra_chunks: np.ndarray
    rerun: np.ndarray = 0.0
    kept_share: np.ndarray = 0.0

    def working_at(self, layers_per_chunk, col=lambda a: a) -> np.ndarray:
        """The working set beside the chunks in flight, bytes: ``working`` plus, under full recompute, the
        re-run layer's activations beyond its stored input, less what the backward has freed by then: it
        walks the chunk's stored (not recomputed) layers first, each at least as large, so those hold the
        peak while one or more of them is kept (Megatron's block method recomputes a chunk's first
        layers).  ``col`` lays the per-layout fields beside ``layers_per_chunk`` (a column per rank)."""
        kept = col(np.asarray(self.kept_share, dtype=np.float64)) * np.asarray(layers_per_chunk, dtype=np.float64)
        return col(np.asarray(self.working, dtype=np.float64)) + col(np.asarray(self.rerun, dtype=np.float64)) \
            * np.clip(1.0 - kept, 0.0, 1.0)


def extra_interleaved_chunks(model: ModelSpec, recipe: Recipe, t: LayoutTable) -> np.ndarray:
    """Chunks beyond the warm-up count an interleaved schedule keeps in flight: one under batch-level EP
    overlap, whose schedule runs one more forward before the 1F1B steps so that each step's forward and
    backward are independent (megatron/core/pipeline_parallel/schedules.py get_pp_rank_microbatches:
    ``num_warmup_microbatches + 1`` with overlap_moe_expert_parallel_comm); else none (array)."""
    on = bool(model.is_moe and recipe.moe_ep_overlap)
    return np.where(on & (np.asarray(t.ep) > 1) & (np.asarray(t.pp) > 1) & (np.asarray(t.vp) > 1), 1.0, 0.0)


def interleaved_flight(pp, vp, m, r, extra):
    """Chunks (micro-batch x model chunk) rank ``r`` of an interleaved schedule holds at its peak, its
    warm-up (PP - r - 1) x 2 + (VP - 1) x PP plus the one in its 1F1B step plus ``extra``
    (:func:`extra_interleaved_chunks`), at most all VP x m (Megatron-core get_pp_rank_microbatches).
    Arrays broadcast."""
    return np.minimum(vp * m, (pp - r - 1) * 2 + (vp - 1) * pp + 1 + extra)


def logits_bytes(model: ModelSpec, recipe: Recipe, t) -> np.ndarray:
    """Bytes of the logits the last stage keeps per micro-batch on one GPU (array over layouts): its tokens
    (mbs x seq_len / CP) x vocab / TP at the cross-entropy's bytes per logit, and each MTP module's own
    logits and loss beside the main head's for the backward (DeepSeek-V3 sec. 2.2; Megatron-core
    multi_token_prediction.py).  ``t``: a LayoutTable, or anything with its tp, cp and mbs."""
    tok = t.mbs * recipe.seq_len / t.cp
    return tok * model.vocab / t.tp * recipe.cross_entropy_spec.bytes_per_logit * (1 + model.mtp_layers)


def _memory_parts(model: ModelSpec, recipe: Recipe, t: LayoutTable, gpu=None) -> _MemoryParts:
    """The parts :func:`memory_bytes` and :func:`rank_memory_bytes` share (see :class:`_MemoryParts`)."""
    # ZeRO shards over the shard group: DP x CP, or its share of one HSDP replica
    dpcp = shard_dp(t).astype(np.float64)
    edp = expert_shard_dp(t)
    gb = grad_bytes(recipe)
    z = np.asarray(t.zero)
    offloaded = offloaded_grad_bytes(model, recipe, t) if recipe.optimizer_offload and recipe.stack == "deepspeed" \
        else None
    # ZeRO-3: the current and the prefetched layer are gathered in full (bf16)
    gathered = np.where(z == 3, 2 * ACT_BYTES * layer_params_per_gpu(model, t), 0.0)

    opt_b = optimizer_bytes_per_param(recipe)
    # PyTorch's FSDP under mixed precision (fully_shard's MixedPrecisionPolicy, FullyShardedDataParallel's
    # MixedPrecision) keeps the sharded parameter in fp32 and casts it to 16 bits only into the
    # all-gather's input: that fp32 shard is the optimizer's master weight, with no 16-bit shard beside it
    # (costmodel.fsdp_copies); DeepSpeed and Megatron keep a 16-bit shard and a separate fp32 master
    fp32_shard = (z == 3) & (get_stack(recipe.stack).fsdp_copies in ("fsdp1", "fsdp2")) & (opt_b >= 4.0)
    per_layout = np.ones_like(dpcp)             # bytes per parameter of each layout, which col() lays beside a split
    w_b = np.where(fp32_shard, 4.0, ACT_BYTES) * per_layout
    o_b = np.where(fp32_shard, opt_b - 4.0, opt_b) * per_layout

    def states(dense, exp, col=lambda a: a):
        """(weights, grads, optimizer) bytes of ``dense`` / ``exp`` parameters per GPU; ``col`` lays
        a per-layout array beside them (a column for the ranks of an own split)."""
        shard = lambda on, d: col(np.where(on, d, 1.0))                   # noqa: E731
        per = lambda b, on: col(b) * (dense / shard(on, dpcp) + exp / shard(on, edp))   # noqa: E731
        grads = per(gb * per_layout, z >= 2) if offloaded is None else np.broadcast_to(col(offloaded), np.shape(dense))
        return per(w_b, z == 3) + col(gathered), grads, per(o_b, z >= 1)

    act_layer = activation_bytes_per_layer(model, recipe, t)
    tok = t.mbs * recipe.seq_len / t.cp
    sp_div = np.where(t.sp, t.tp, 1)
    # full recompute keeps a recomputed layer's input only (Megatron block method: the recomputed
    # share of each chunk), the rest their activations; one layer's working set at a time
    frac = recomputed_fraction(model, t)
    stored_layer = frac * tok * model.hidden * ACT_BYTES / sp_div + (1.0 - frac) * act_layer
    # the re-run layer's activations (its scores too) under full recompute; a recomputed unfused
    # attention core's scores while it re-runs under selective
    selective_core = (t.recompute == 1) & ("core_attn" in recipe.recomputed)
    working = np.where(selective_core, score_bytes(model, recipe, t), 0.0) + dispatch_transient_bytes(model, recipe, t)
    # each MTP module on the last stage: its transformer layer's activations beside its own logits
    logits = logits_bytes(model, recipe, t) + model.mtp_layers * stored_layer
    return _MemoryParts(states, stored_layer, working, logits, microbatches(recipe, t.dp, t.mbs),
                        reserved_bytes(t, model, recipe), fp8_weight_bytes_per_layer(model, recipe, t, gpu),
                        extra_interleaved_chunks(model, recipe, t),
                        # its input is the checkpoint already stored
                        np.where(t.recompute == 2, act_layer - tok * model.hidden * ACT_BYTES / sp_div, 0.0),
                        np.where(t.recompute == 2, 1.0 - frac, 0.0))


def _rank_parts(model: ModelSpec, t: LayoutTable, parts: _MemoryParts, rank_layers) -> tuple:
    """(weights, grads, optimizer, activations) bytes of each pipeline rank holding ``rank_layers[r]``
    layers (arrays, layouts x ranks)."""
    col = lambda a: np.asarray(a, dtype=np.float64)[:, None]                # noqa: E731
    rw, rg, ro = parts.states(*rank_params(model, t, rank_layers), col=col)
    rw = rw + col(parts.fp8_weight_layer) * np.asarray(rank_layers, dtype=np.float64)[None, :]
    ra = _split_activations(t, rank_layers, parts)
    return rw, rg, ro, ra


@uses_layout_fields("tp", "pp", "dp", "cp", "ep", "etp", "vp", "mbs", "recompute", "recompute_num_layers", "zero",
                    "sp", "overlap", "dp_replicate")
def memory_bytes(model: ModelSpec, recipe: Recipe, t: LayoutTable, gpu=None, params=None) -> MemoryBreakdown:
    """Peak memory per GPU, the max of the first stage (most in-flight micro-batches) and the last
    stage (logits), in bytes; with a run's own split (``model.pipeline_rank_layers``) the fullest of
    its ranks (:func:`rank_memory_bytes`).  See the module docstring for the formulas and their sources.
    ``gpu`` (costmodel.specs.GpuSpec) decides the FP8 weight cache's layout
    (:func:`fp8_weight_bytes_per_layer`).  ``params``: the (dense, expert) parameters per GPU of
    costmodel.stage_params.stage_params, where the caller has them (computed here otherwise).
    """
    parts = _memory_parts(model, recipe, t, gpu)
    weights, grads, optim = parts.states(*(params if params is not None
                                           else stage_params(model, t, light_last_stage(recipe))))
    L_stage = layers_per_stage(model, t)
    weights = weights + L_stage * parts.fp8_weight_layer
    m, stored_layer, logits = parts.microbatches, parts.stored_layer, parts.logits
    chunks = np.where(t.vp > 1, interleaved_flight(t.pp, t.vp, m, 0, parts.extra_chunks), np.minimum(t.pp, m))
    layers_per_chunk = L_stage / t.vp
    working = parts.working_at(layers_per_chunk)
    first = chunks * layers_per_chunk * stored_layer + working
    # the last rank keeps its own warm-up's chunks in flight under interleaving (about VP - 1 micro-batches
    # of its chunks beside the one in its 1F1B step), one micro-batch of its layers without
    last_chunks = np.where(t.vp > 1, interleaved_flight(t.pp, t.vp, m, t.pp - 1, parts.extra_chunks), t.vp)
    last = last_chunks * layers_per_chunk * stored_layer + working + logits
    last = np.where(t.pp == 1, first + logits, last)
    acts = np.maximum(first, last)
    if model.pipeline_rank_layers and np.any(np.asarray(t.pp) == len(model.pipeline_rank_layers)):
        # a run's own split: each rank's states and activations together, the fullest rank's peak
        own = np.asarray(t.pp) == len(model.pipeline_rank_layers)
        rw, rg, ro, ra = _rank_parts(model, t, parts, model.pipeline_rank_layers)
        i = np.argmax(rw + rg + ro + ra, axis=1)
        at = lambda a: a[np.arange(len(i)), i]                              # noqa: E731
        weights, grads, optim, acts = (np.where(own, at(a), b) for a, b in
                                       ((rw, weights), (rg, grads), (ro, optim), (ra, acts)))
    peak = weights + grads + optim + acts + parts.reserved
    return MemoryBreakdown(weights, grads, optim, acts, peak, parts.reserved)


def rank_memory_bytes(model: ModelSpec, recipe: Recipe, t: LayoutTable, rank_layers, gpu=None) -> np.ndarray:
    """Peak bytes per GPU of each pipeline rank when rank r holds ``rank_layers[r]`` layers (array,
    layouts x ranks; the layouts' PP is ``len(rank_layers)``): its model states (the first rank also
    the embedding, the last the output layer, final norm and MTP modules), its layers' activations for
    the micro-batches its schedule has in flight, the working set, the last rank's logits and the
    reserved bytes, by the formulas of :func:`memory_bytes` (whose fullest rank this is)."""
    return _rank_peaks(model, t, _memory_parts(model, recipe, t, gpu), rank_layers)


def _rank_peaks(model: ModelSpec, t: LayoutTable, parts: _MemoryParts, rank_layers) -> np.ndarray:
    """:func:`rank_memory_bytes` from its parts (computed once for several splits)."""
    return sum(_rank_parts(model, t, parts, rank_layers)) + np.asarray(parts.reserved, dtype=np.float64)[:, None]


def _split_activations(t, rank_layers, parts: _MemoryParts) -> np.ndarray:
    """Activation bytes of each pipeline rank of a split (layouts x ranks):
    rank r keeps its layers' activations for the micro-batches its schedule has in flight, min(PP - r, m)
    in 1F1B (Narayanan et al. SC21) and Megatron-core's interleaved warm-up, (PP - r - 1) x 2 + (VP - 1)
    x PP + 1 chunks of its VP (at most VP x m); the last rank also holds the logits."""
    ranks = np.asarray(rank_layers, dtype=np.float64)
    pp = len(ranks)
    r = np.arange(pp)[None, :]
    vp = np.asarray(t.vp, dtype=np.float64)[:, None]
    mb = np.asarray(parts.microbatches, dtype=np.float64).reshape(-1, 1)
    extra = np.asarray(parts.extra_chunks, dtype=np.float64).reshape(-1, 1)
    flight = np.where(vp > 1, interleaved_flight(pp, vp, mb, r, extra), np.minimum(pp - r, mb))
    col = lambda a: np.asarray(a, dtype=np.float64).reshape(-1, 1)          # noqa: E731
    per_rank = (flight * ranks[None, :] / vp * col(parts.stored_layer)
                + parts.working_at(ranks[None, :] / vp, col))
    per_rank[:, -1] += np.broadcast_to(np.asarray(parts.logits, dtype=np.float64), per_rank[:, -1].shape)
    return per_rank


def stage_memory_terms(model: ModelSpec, recipe: Recipe, layout: dict, gpu=None) -> tuple[np.ndarray, np.ndarray]:
    """Memory of each 1F1B stage as fixed + n_s x per_layer bytes per GPU (arrays of length PP), the
    form the energy ILP's memory constraint takes: :func:`rank_memory_bytes` (the same formulas as
    ``predict``), which is affine in each rank's layer count n_s, read at one and at two layers a rank,
    but for the re-run layer's working set under partial full recompute, bounded from above by its
    value at one layer.
    A layer counts as the model's heaviest (an MoE layer where the model has any), as the fullest
    stage of :func:`memory_bytes` does.

    Raises:
        ValueError: VP > 1 (interleaved stages are not split per stage here).
    """
    if layout["vp"] != 1:
        raise ValueError("stage_memory_terms models 1F1B (VP = 1) stages only")
    t = LayoutTable.from_rows([layout])
    parts = _memory_parts(model, recipe, t, gpu)
    one, two = (_rank_peaks(model, t, parts, [n] * layout["pp"])[0] for n in (1, 2))
    # under partial full recompute the re-run layer's working set shrinks to nothing once a rank keeps a
    # layer (_MemoryParts.working_at), which no line follows: the slope is read without it and the fixed
    # part carries its largest value at one layer, an upper bound exact where a rank keeps none
    hinge = lambda n: float(np.asarray(parts.working_at(n) - parts.working)[0])           # noqa: E731
    per = (two - hinge(2)) - (one - hinge(1))
    return one - per, np.full_like(one, per)
