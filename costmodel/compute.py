"""Compute time and FLOPs of one transformer layer per micro-batch on one GPU, for a layout table.

Operations of a pre-norm decoder layer (Vaswani et al. 2017; GQA per Ainslie et al. 2023; SwiGLU
per Shazeer 2020; MoE top-k routing per Fedus et al. 2022), sharded Megatron-style (Shoeybi et al.
2019: column-parallel QKV/FC1, row-parallel output/FC2; Korthikanti et al. 2022: sequence
parallelism shards norms and elementwise ops over TP; CP splits the sequence; EP splits experts):

* GEMMs: QKV, attention output, MLP FC1 (x2 when gated) and FC2 (per active expert), router,
  logits (last stage).  Backward = dgrad + wgrad, the same FLOPs twice (Narayanan et al. SC21).
  Each GEMM's time is :func:`costmodel.gemm.gemm_time_s` with the fitted efficiency.
* Attention core: flash attention (Dao 2023) at the profile's fitted efficiency of the recipe's
  kernel (FlashAttention-2/3/4) at the sequence length each kernel call sees (s / CP),
  causal (half the s^2 FLOPs executed); backward executes 2.5x the forward matmul FLOPs
  (FlashAttention-2 recomputes QK^T: 5 matmuls vs 2, Dao 2023 section 3.1).  Unfused attention
  (pre-2022 Megatron) runs the full s^2 batched GEMMs plus a materialised softmax.
* Memory-bound ops (norms, activation, residual/dropout, rotary, softmax, cross-entropy): HBM bytes
  / (datasheet bandwidth x fitted HBM efficiency) + one kernel launch each.
* Recompute: full re-runs the layer forward inside backward; selective re-runs the attention core
  (Korthikanti et al. 2022 section 5), or on torchtitan every second matmul and the memory-bound
  ops (its op-level selective checkpointing, costmodel.stacks).
* CPU dispatch: a layer pass takes at least the CPU time its stack needs to issue it
  (costmodel.stacks: framework calls per layer x the eager per-call overhead); the GPU waits when
  its kernels are shorter (small models, few tokens per micro-batch).

Model FLOPs follow the Megatron convention (Narayanan et al. SC21 appendix): full s^2 attention,
backward = 2x forward, no recomputation; per step 72 B s l h^2 (1 + s/(6h) + V/(16 l h)) for GPT.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .errors import InputError
from .formats import cast_bytes, gemm_format, grad_rescale_bytes, sp_gather_cast_bytes, sp_gather_quantized
from .gemm import gemm_time_s
from .layout_fields import uses_layout_fields
from .layouts import LayoutTable
from .moe import (ATOMIC_SCATTER_SLOWDOWN, DISPATCH_COPIES, atomic_permute_rows, permute_rows, router_kernels,
                  run_rank_load)
from .ring_attention import KERNELS_PER_STEP as RING_KERNELS_PER_STEP, merge_bytes as ring_merge_bytes
from .specs import CROSS_ENTROPIES, ClusterSpec, ModelSpec, Profile, Recipe
from .tp_overlap import rs_partials_reduce_s, tp_chunk_extra_s
from .stacks import (EAGER_NORM_BYTES, EAGER_OP_OVERHEAD_S, EAGER_ROPE_BYTES, EAGER_SWIGLU_BYTES, FUSED_NORM_BYTES,
                     FUSED_ROPE_BYTES, FUSED_SWIGLU_BYTES, TE_STACKS, get_stack)

ACT_BYTES = 2.0  # bf16/fp16 activations and weights (Micikevicius et al. 2018, mixed precision)
FLASH_BWD_FLOP_RATIO = 2.5  # FlashAttention-2 backward matmul FLOPs / forward (Dao 2023, sec. 3.1)
#: Attention dropout inside a fused kernel: FlashAttention draws a Philox random number per attention
#: probability in the forward and draws it again in the backward (no mask is stored); cuDNN's kernel
#: likewise.  Measured once: FlashAttention-4 and cuDNN on GB200 run dropout at fwd ~75-85 % and bwd
#: ~60-70 % of their no-dropout TFLOPS (Dao-AILab/flash-attention PR #2597, p = 0.125, head dims 64 and
#: 128, ~32k total tokens, "roughly constant across seqlen").  The midpoints' extra time over the
#: no-dropout kernel, per pass:
DROPOUT_FWD_EXTRA = 1 / 0.80 - 1
DROPOUT_BWD_EXTRA = 1 / 0.65 - 1
#: The no-dropout efficiency of that measured kernel, the B200 profile's FlashAttention-4 fit
#: (hardware/profiles/b200-sxm-180gb.yaml attention_kernels.fa4.eta_max).  The draws are CUDA-core work
#: per score element, so the extra time is priced per element at that reference kernel's speed relative
#: to the GPU's bf16 peak, whatever the kernel in use: a slower kernel does not draw more slowly.  The
#: ratio of CUDA-core to tensor-core throughput is taken as GB200's on every GPU (borrowed).
DROPOUT_REF_EFFICIENCY = 0.561


def layer_matmul_flops_per_token(model: ModelSpec) -> float:
    """Forward FLOPs per token of the mean layer's weight GEMMs (no attention core): 2 x active
    weights.  Attention projections (ModelSpec.attention_projections: QKV and output, or MLA's
    down/up projections); MoE layers: top-k routed experts, shared experts, router 2hE; dense layers
    of an MoE model their own MLP; weighted by the share of MoE layers.
    """
    h, mats = model.hidden, model.mlp_mats
    attn = sum(2 * n * k for n, k, _ in model.attention_projections())
    dense = 2 * mats * h * model.dense_mlp_width
    if not model.is_moe:
        return attn + dense
    moe = 2 * mats * h * (model.ffn_hidden * model.topk + model.shared_ffn_hidden) + 2 * h * model.num_experts
    f = model.moe_layer_fraction
    return attn + f * moe + (1 - f) * dense


def attention_flops_per_token(model: ModelSpec, seq_len: int, causal: bool = False, doc_tokens=0) -> float:
    """Forward FLOPs per token of the attention core, full s x s (Megatron convention): QK^T 2 s q_dim
    plus AV 2 s x (attention output width); 4 s q_dim for MHA/GQA.  ``causal`` counts the lower
    triangle; sliding-window layers count their window, packed documents of ``doc_tokens`` their own
    block (ModelSpec.attended_keys)."""
    return 2.0 * model.attended_keys(seq_len, causal, doc_tokens) * (model.q_dim + model.attn_out_dim)


def model_flops_per_step(model: ModelSpec, recipe: Recipe, causal: bool = False) -> float:
    """Model FLOPs of one training step: 3 x forward (fwd + 2x bwd), no recompute.

    forward = tokens x (L x (weight GEMMs + attention core) + 2 h V logits), tokens = gbs x seq_len.
    For GPT this equals 72 B s l h^2 (1 + s/(6h) + V/(16 l h)) (Narayanan et al. SC21, eq. 3).
    ``causal`` counts only the lower triangle of the attention scores (half the s x s FLOPs), the
    convention of sources that report "causal" model FLOPs (e.g. ml-engineering's 6 s^2 d h L).
    Packed documents (``recipe.doc_tokens``) count each document's own attention.
    """
    attn = attention_flops_per_token(model, recipe.seq_len, causal, recipe.doc_tokens)
    per_token = (model.num_layers * (layer_matmul_flops_per_token(model) + attn)
                 + 2.0 * model.hidden * model.vocab)
    return 3.0 * per_token * recipe.gbs * recipe.seq_len


def _dtype16(profile: Profile) -> str:
    """The profile's 16-bit GEMM dtype: bf16, else fp16 (the fp8 fit when it has neither)."""
    return next((d for d in ("bf16", "fp16") if d in profile.gemm), "fp8")


def kernel_launch_s(profile: Profile) -> float:
    """One kernel launch, s: the fitted launch term of the profile's 16-bit GEMMs (costmodel.gemm), what
    every memory-bound kernel pays whatever the GEMMs' format."""
    return profile.gemm[_dtype16(profile)].launch_s


def gemm_dtype(recipe: Recipe) -> str:
    """The profile/datasheet dtype key of the weight GEMMs (costmodel.formats: fp8 and mxfp8 recipes run
    the linear layers at the fp8 rate, nvfp4 at the fp4 rate)."""
    return gemm_format(recipe.precision).dtype


def _peak(cluster: ClusterSpec, dtype: str) -> float:
    try:
        return cluster.gpu.peak_flops[dtype]
    except KeyError:
        raise InputError("--precision", "", f"{cluster.gpu.name} has no {dtype} tensor-core peak "
                         f"(datasheet gives {', '.join(cluster.gpu.peak_flops)})") from None


def dense_peak_flops(cluster: ClusterSpec, recipe: Recipe) -> float:
    """Dense 16-bit peak used for MFU, FLOP/s (bf16, else fp16; fp8 and fp4 recipes too, by convention)."""
    peaks = cluster.gpu.peak_flops
    return peaks.get("bf16", peaks.get("fp16")) if gemm_format(recipe.precision).low else _peak(cluster, recipe.precision)


@dataclass
class ComputeTimes:
    """Per-GPU, per-micro-batch compute times in seconds (arrays over layouts).

    layer_fwd_s / layer_bwd_s: one transformer layer, forward / backward (recompute excluded).
    layer_recompute_s: extra time inside backward from recomputation (0, attention core, or a forward).
    layer_gemm_fwd_s: the weight-GEMM part of layer_fwd_s (the window TP-comm overlap can hide under).
    layer_colpar_fwd_s: forward time of the column-parallel GEMMs (QKV, FC1); their weight-gradient
        GEMMs, of the same FLOPs, hide the backward input-gradient communication.
    layer_attn_fwd_s, layer_attn_bwd_s: attention core (the window CP ring exchange hides under).
    logits_fwd_s, logits_bwd_s: output layer + cross-entropy on the last stage (with the model's
        multi-token-prediction modules, which run there too).
    layer_ew_fwd_s, layer_ew_bwd_s: the memory-bound (elementwise) part of layer_fwd_s / layer_bwd_s.
    layer_flops_fwd: FLOPs one layer's forward executes on this GPU per micro-batch (causal flash
        attention executes half the s^2 block); backward executes twice that.
    logits_flops_fwd: FLOPs of the output layer's forward per micro-batch on this GPU.
    logits_ce_s: the memory-bound cross-entropy part of logits_fwd_s + logits_bwd_s.
    layer_attn_recompute_s: the attention-core part of layer_recompute_s.
    layer_cpu_wait_s: the part of layer_fwd_s + layer_bwd_s the GPU waits for the CPU to issue
        kernels (a stack whose dispatch is slower than the layer's kernels).
    layer_mlp_fwd_s: the MLP block's part of layer_fwd_s (its GEMMs, routed and shared experts and
        router or the dense MLP, and the token permutation around the experts); the rest is the
        attention block (the windows batch-level EP overlap pairs the all-to-alls with).
    attn_col_fwd_s, attn_row_fwd_s: forward time of the attention's column-parallel GEMMs on the
        gathered hidden state (QKV; MLA's are its column-parallel projections of the hidden state) and
        of its row-parallel ones (the output projection): the windows of the attention block's SP
        all-gather and reduce-scatter (their input- and weight-gradient GEMMs have the same FLOPs).
    dense_mlp_col_fwd_s, dense_mlp_row_fwd_s: the same for one dense layer's MLP (FC1, FC2); an MoE
        layer's routed experts get their tokens through the dispatcher instead.
    """

    layer_fwd_s: np.ndarray
    layer_bwd_s: np.ndarray
    layer_recompute_s: np.ndarray
    layer_gemm_fwd_s: np.ndarray
    layer_colpar_fwd_s: np.ndarray
    layer_attn_fwd_s: np.ndarray
    layer_attn_bwd_s: np.ndarray
    logits_fwd_s: np.ndarray
    logits_bwd_s: np.ndarray
    layer_ew_fwd_s: np.ndarray
    layer_ew_bwd_s: np.ndarray
    layer_flops_fwd: np.ndarray
    logits_flops_fwd: np.ndarray
    logits_ce_s: np.ndarray
    layer_attn_recompute_s: np.ndarray
    layer_cpu_wait_s: np.ndarray
    layer_mlp_fwd_s: np.ndarray
    attn_col_fwd_s: np.ndarray
    attn_row_fwd_s: np.ndarray
    dense_mlp_col_fwd_s: np.ndarray
    dense_mlp_row_fwd_s: np.ndarray


def _weight_gemms(model: ModelSpec, recipe: Recipe, profile: Profile, t: LayoutTable, tok, tp, gemm3) -> dict:
    """Weight-GEMM times of the mean layer per micro-batch on one GPU (arrays, s): attention
    projections as TP splits them (column: output width / TP, row: input width / TP, duplicated:
    whole), the MLP of dense layers and of MoE layers (routed experts over the local experts, router,
    shared experts) weighted by the MoE share; the local experts run as one grouped GEMM, or one
    GEMM each (its own launch and partial wave) without ``moe_grouped_gemm``, either times the
    profile's measured slowdown of routed expert GEMMs.  Also the GEMM input /
    output widths per token, which fp8 recipes cast (keys gemm_in, gemm_out), and the parts of those
    a sequence-parallel all-gather assembles (gathered_in, gathered_out), and the forward GEMMs each
    SP collective pairs with (attn_col_f, attn_row_f; one dense layer's mlp_col_f, mlp_row_f)."""
    h, ffn = model.hidden, model.ffn_hidden
    proj_f = proj_b = colpar_f = up_f = 0.0
    gemm_in = gemm_out = 0.0
    stack = get_stack(recipe.stack)
    fused_qkv, fused_up = stack.fused_qkv, stack.fused_gate_up
    ups = (model.q_lora_rank, model.kv_lora_rank) if model.is_mla else ()
    attn_col_f = attn_row_f = 0.0
    for n, k, split in model.attention_projections(fused_qkv):
        n_l, k_l = (n / tp if split == "col" else n), (k / tp if split == "row" else k)
        f_, b_ = gemm3(tok, n_l, k_l)
        proj_f, proj_b = proj_f + f_, proj_b + b_
        colpar_f = colpar_f + (f_ if split == "col" else 0.0)
        # the GEMMs a layer's SP all-gather feeds (column-parallel on the hidden state) and the ones
        # its reduce-scatter drains (row-parallel): the only ones each collective can hide under
        attn_col_f = attn_col_f + (f_ if split == "col" and k == h else 0.0)
        attn_row_f = attn_row_f + (f_ if split == "row" else 0.0)
        up_f = up_f + (f_ if split == "col" and k in ups else 0.0)      # MLA's Q / KV up-projections
    # the cast widths do not depend on fusing: Q, K and V cast the layer input once.  Of those, a
    # sequence-parallel all-gather assembles the layer input of the column-parallel (and duplicated
    # MLA down) projections (forward) and the output gradients of the row-parallel ones (backward)
    gathered_in = gathered_out = 0.0
    for n, k, split in model.attention_projections():
        gemm_in = gemm_in + (k / tp if split == "row" else k)
        gemm_out = gemm_out + (n / tp if split == "col" else n)
        gathered_in = gathered_in + (k if split != "row" and k == h else 0.0)
        gathered_out = gathered_out + (n if split == "row" else 0.0)
    mats_in = 2 if model.gated else 1
    # a gated MLP's gate and up projections: one GEMM of twice the width, or two (fused_gate_up)
    n_up, w_up = (1, mats_in) if fused_up else (mats_in, 1)

    def up_gemm(m, width, batch=1.0):
        return tuple(n_up * x for x in gemm3(m, w_up * width, h, batch))

    fmoe, dw = model.moe_layer_fraction, model.dense_mlp_width
    # the dense or shared-expert MLP's input and output gradient are gathered too; the routed
    # experts' tokens arrive through the dispatcher instead
    gathered_mlp = (1 - fmoe) * h + fmoe * (h if model.shared_ffn_hidden else 0.0)
    gathered_in, gathered_out = gathered_in + gathered_mlp, gathered_out + gathered_mlp
    fc1_f, fc1_b = up_gemm(tok, dw / tp)
    fc2_f, fc2_b = gemm3(tok, h, dw / tp)
    mlp_col_f, mlp_row_f = fc1_f, fc2_f         # one dense layer's (its MLP's SP collectives pair with them)
    mlp_in, mlp_out = h + dw / tp, mats_in * dw / tp + h
    dense_mlp_f, moe_mlp_f, shared_f = (1 - fmoe) * (fc1_f + fc2_f), 0.0, 0.0
    if model.is_moe:
        # E / EP local experts of width ffn / ETP; the rows each sees keep the GPU's share of the
        # expert FLOPs at tok x topk / TP (the expert grid spans the same GPUs as TP x DP x CP)
        E_local = model.num_experts / t.ep
        etp = t.etp.astype(np.float64)
        m_exp = tok * model.topk * t.ep * etp / (model.num_experts * tp)
        # the busiest EP rank sets the pace: its load over the mean (costmodel.moe)
        m_exp = m_exp * run_rank_load(model, recipe, tok, tp, t.etp, t.ep)
        # the profile's measured slowdown of routed expert GEMMs over this model (costmodel/fit/moe.py)
        if recipe.moe_grouped_gemm:
            # each local expert adds its per-group time to every grouped call: one forward, two
            # backward (dgrad, wgrad) per GEMM (costmodel/fit/builtin/grouped_gemm.py)
            sd, grp = profile.moe_grouped_slowdown, E_local * profile.moe_grouped_group_s
            e1_f, e1_b = (sd * x + n * n_up * grp for x, n in zip(up_gemm(m_exp, ffn / etp, E_local), (1, 2)))
            e2_f, e2_b = (sd * x + n * grp for x, n in zip(gemm3(m_exp, h, ffn / etp, E_local), (1, 2)))
        else:
            sd = profile.moe_sequential_slowdown
            e1_f, e1_b = (sd * E_local * x for x in up_gemm(m_exp, ffn / etp))
            e2_f, e2_b = (sd * E_local * x for x in gemm3(m_exp, h, ffn / etp))
        rt_f, rt_b = gemm3(tok, float(model.num_experts), h)
        sw = model.shared_ffn_hidden
        s1_f, s1_b = up_gemm(tok, sw / tp) if sw else (0.0, 0.0)
        s2_f, s2_b = gemm3(tok, h, sw / tp) if sw else (0.0, 0.0)
        mix = lambda moe, dense: fmoe * moe + (1 - fmoe) * dense        # noqa: E731
        moe_mlp_f, shared_f = fmoe * (e1_f + rt_f + s1_f + e2_f + s2_f), fmoe * (s1_f + s2_f)
        fc1_f, fc1_b = mix(e1_f + rt_f + s1_f, fc1_f), mix(e1_b + rt_b + s1_b, fc1_b)
        fc2_f, fc2_b = mix(e2_f + s2_f, fc2_f), mix(e2_b + s2_b, fc2_b)
        k = model.topk
        mlp_in = mix(h * k + ffn / tp * k + (h + sw / tp if sw else 0), mlp_in)
        mlp_out = mix(mats_in * ffn / tp * k + h * k + (mats_in * sw / tp + h if sw else 0), mlp_out)
    return dict(gemm_f=proj_f + fc1_f + fc2_f, gemm_b=proj_b + fc1_b + fc2_b, colpar_f=colpar_f, fc1_f=fc1_f,
                gemm_in=gemm_in + mlp_in, gemm_out=gemm_out + mlp_out, up_f=up_f, dense_mlp_f=dense_mlp_f,
                moe_mlp_f=moe_mlp_f, shared_f=shared_f, gathered_in=gathered_in, gathered_out=gathered_out,
                attn_col_f=attn_col_f, attn_row_f=attn_row_f, mlp_col_f=mlp_col_f, mlp_row_f=mlp_row_f)


def _module_recompute_s(model: ModelSpec, recipe: Recipe, w: dict, tok, tp, sp_div, mem, perm_s):
    """Forward time one layer re-runs in its backward for the ``--recompute-modules`` beyond the
    attention core (costmodel.specs.RECOMPUTE_MODULES), per micro-batch (array, s): the modules' weight
    GEMMs (``w``: :func:`_weight_gemms`) and memory-bound kernels (``mem(bytes, kernels)``); ``moe``
    also its token permutation (``perm_s``; its dispatch and combine repeat in costmodel.schedule)."""
    mods = recipe.recomputed
    B, f = ACT_BYTES, model.moe_layer_fraction
    act = 3 if model.gated else 2                   # SwiGLU reads two inputs and writes one
    out = 0.0
    if "mla_up_proj" in mods and model.is_mla:
        out = out + w["up_f"]
    if "mlp" in mods and f < 1:
        out = out + w["dense_mlp_f"] + (1 - f) * mem(act * model.dense_mlp_width / tp * B * tok, 1)
    if not model.is_moe:
        return out
    routed = model.topk * model.ffn_hidden / tp * tok
    if "layernorm" in mods:
        out = out + f * mem(2 * model.hidden * B * tok / sp_div, 1)
    if "moe" in mods:
        out = out + w["moe_mlp_f"] + perm_s + f * mem(act * (routed + model.shared_ffn_hidden / tp * tok) * B, 2)
    else:
        if "moe_act" in mods:
            out = out + f * mem(act * routed * B, 1)
        if "shared_experts" in mods and model.shared_ffn_hidden:
            out = out + w["shared_f"] + f * mem(act * model.shared_ffn_hidden / tp * tok * B, 1)
    return out


def _moe_token_s(model: ModelSpec, recipe: Recipe, t: LayoutTable, tok, tp, sp_div, mem):
    """(permutation s, router kernels forward, backward) of the mean layer per micro-batch (arrays or 0):
    the token copies around the dispatch and combine (costmodel.moe: unfused, one of them an atomic
    scatter-add pass at ATOMIC_SCATTER_SLOWDOWN x a copy) and the router's and dispatch preprocess's
    small kernels (costmodel.moe.router_kernels: a launch each on the GPU, a call on the CPU), both
    on the MoE layers only.  ``mem(bytes, kernels)`` prices memory-bound kernels."""
    if not model.is_moe:
        return 0.0, 0.0, 0.0
    load = run_rank_load(model, recipe, tok, tp, t.etp, t.ep)
    rows = permute_rows(recipe.moe_dispatcher, tok / sp_div, model.topk, t.etp, t.ep, load)
    atomic = 0.0 if recipe.moe_permute_fusion else atomic_permute_rows(recipe.moe_dispatcher, tok / sp_div,
                                                                         model.topk, t.etp, load)
    perm_s = model.moe_layer_fraction * mem(2.0 * (rows + (ATOMIC_SCATTER_SLOWDOWN - 1) * atomic) * model.hidden
                                            * ACT_BYTES, 2 * DISPATCH_COPIES)
    router_f, router_b = (model.moe_layer_fraction * k for k in router_kernels(recipe))
    return perm_s, router_f, router_b


def _logits_times(model: ModelSpec, recipe: Recipe, profile: Profile, dt: str, tok, tp, gemm3, mem, layer_f,
                  layer_b):
    """(forward s, backward s, cross-entropy s, forward FLOPs) of the last stage's output layer and
    loss per micro-batch, with the model's multi-token-prediction modules (DeepSeek-V3 sec. 2.2:
    each runs its 2h -> h projection, one transformer layer and the shared head + loss again).
    The output layer runs in 16-bit under fp8 recipes (Megatron's output layer is not a TE module);
    the loss's passes over the logits are the recipe's cross-entropy's (CrossEntropySpec.pass_bytes)."""
    h, V = model.hidden, model.vocab
    lg_f, lg_b = gemm3(tok, V / tp, h, dtype=dt if dt in ("bf16", "fp16") else _dtype16(profile))
    spec = CROSS_ENTROPIES[recipe.cross_entropy]
    ce_f, ce_b = (mem(tok * V / tp * b, k) for b, k in zip(spec.pass_bytes, spec.kernels))
    ce = ce_f + ce_b
    lg_f = lg_f + ce_f
    lg_b = lg_b + ce_b
    lg_flops = 2.0 * tok * h * V / tp
    if model.mtp_layers:
        n = model.mtp_layers
        eh_f, eh_b = gemm3(tok, h / tp, 2 * h)
        lg_f, lg_b = lg_f + n * (eh_f + layer_f + lg_f), lg_b + n * (eh_b + layer_b + lg_b)
        ce = ce * (1 + n)
        lg_flops = lg_flops * (1 + n) + n * tok * (layer_matmul_flops_per_token(model) + 4.0 * h * h) / tp
    return lg_f, lg_b, ce, lg_flops


def _attention_core_s(model: ModelSpec, recipe: Recipe, profile: Profile, t: LayoutTable, tok, peak16, hbm_eff,
                      gp, mem, launch_s):
    """(forward s, backward s, forward FLOPs) of the attention core per micro-batch on one GPU (arrays):
    the fused kernel at its fitted efficiency over the keys each query sees (causal, windowed, packed
    documents), or unfused attention's batched GEMMs and softmax passes over the whole s x s scores.
    ``tok``: queries on this rank; ``hbm_eff``: (HBM bytes/s, its achievable fraction);
    ``mem(bytes, kernels)`` prices memory-bound kernels; ``launch_s`` one kernel launch."""
    s = recipe.seq_len
    tp, cp = t.tp.astype(np.float64), t.cp.astype(np.float64)
    hbm, eta_hbm = hbm_eff
    # keys over the full sequence (the CP ring brings them); causal, each query sees s/2 on average
    # (fewer under a sliding window or packing), unfused attention computes all s
    keys = model.causal_keys_per_query(s, recipe.doc_tokens) if recipe.flash_attention else s
    fl = 2.0 * tok * keys * (model.q_dim + model.attn_out_dim) / tp
    if recipe.flash_attention:
        # each kernel call (a CP ring step) sees s / CP keys per query; packed, each document runs as a
        # sequence of its own, split over the CP ranks like the whole sequence (THD's load balancing:
        # D / CP of it per step), at the kernel's compiled head dims (its padding is computed, not useful)
        seen = (min(s, recipe.doc_tokens) if recipe.doc_tokens else s) / cp
        eff = profile.attention_efficiency(recipe.attention_kernel, seen, model.qk_head_dim,
                                           model.attn_out_dim / model.num_heads, through_te=recipe.stack in TE_STACKS)
        # in-kernel attention dropout: the random draws per score element (DROPOUT_* above)
        drop = fl / (peak16 * DROPOUT_REF_EFFICIENCY) if model.dropout else 0.0
        return (fl / (peak16 * eff) + DROPOUT_FWD_EXTRA * drop + launch_s * cp,
                FLASH_BWD_FLOP_RATIO * (fl / (peak16 * eff) + DROPOUT_BWD_EXTRA * drop) + launch_s * cp, fl)
    bmm = t.mbs * model.num_heads / tp
    sq = s / cp
    dqk, dv = model.qk_head_dim, model.attn_out_dim / model.num_heads
    qk_f, qk_b = (gemm_time_s(sq, s, dqk, bmm, peak16, hbm, eta_hbm, gp),
                  2 * gemm_time_s(sq, dqk, s, bmm, peak16, hbm, eta_hbm, gp))
    av_f, av_b = (gemm_time_s(sq, dv, s, bmm, peak16, hbm, eta_hbm, gp),
                  2 * gemm_time_s(sq, s, dv, bmm, peak16, hbm, eta_hbm, gp))
    scores = bmm * sq * s
    # fused scale-mask-softmax: read+write scores; dropout: read, write, 1-byte mask
    sm_bytes = scores * (2 * ACT_BYTES + (2 * ACT_BYTES + 1 if model.dropout else 0))
    return qk_f + av_f + mem(sm_bytes, 2), qk_b + av_b + mem(2 * sm_bytes, 2), fl


def _low_precision_casts_s(model: ModelSpec, recipe: Recipe, stack, t: LayoutTable, tok, tp, w: dict, mem, peak16):
    """Forward and backward seconds of a low-precision recipe's operand casts and gradient rescales
    per layer and micro-batch on one GPU (arrays): ``w`` is :func:`_weight_gemms`' result, ``mem``
    prices bytes and kernels at the fitted HBM rate."""
    fmt, gemm_in, gemm_out = gemm_format(recipe.precision), w["gemm_in"], w["gemm_out"]
    # Transformer Engine quantizes each low-precision GEMM operand with a fused kernel that reads
    # the bf16 tensor and writes it row-wise and column-wise (the transpose, for the weight-gradient
    # GEMM) with its scales: costmodel.formats' cast bytes per element; forward quantizes the four
    # GEMM inputs, backward the four output gradients (NVIDIA Transformer Engine docs, "Using FP8
    # with Transformer Engine"); NVFP4's Hadamard transforms run on the 16-bit tensor cores inside
    # the same kernels: the roofline max of their FLOPs and the bytes (costmodel.formats)
    cb = cast_bytes(fmt, recipe.fp8_recipe)
    cast_f, cast_b = cb * tok * gemm_in, cb * tok * gemm_out
    if sp_gather_quantized(fmt, recipe.fp8_recipe, stack):
        # operands gathered in fp8 are cast on this rank's shard and transposed once gathered
        extra = np.where(t.sp & (t.tp > 1), sp_gather_cast_bytes(fmt, recipe.fp8_recipe, tp) - cb, 0.0) * tok
        cast_f, cast_b = cast_f + extra * w["gathered_in"], cast_b + extra * w["gathered_out"]
    cast = lambda b, elems: np.maximum(mem(b, 4), fmt.rht_flops * elems / peak16)  # noqa: E731
    add_f, add_b = cast(cast_f, tok * gemm_in), cast(cast_b, tok * gemm_out)
    rescale = grad_rescale_bytes(fmt, recipe.fp8_recipe)
    if rescale:
        # row-wise scaling rescales each dgrad output (the inputs' gradients) and wgrad output
        # (this GPU's weights of the mean layer) in place, one kernel per backward GEMM
        w_gpu = ((model.layer_params() - model.mean_expert_params()) / tp
                 + model.mean_expert_params() / (t.ep * t.etp))
        add_b = add_b + mem(rescale * (tok * gemm_in + w_gpu), 2 * (len(model.attention_projections()) + 2))
    return add_f, add_b


def _attention_copies_s(model: ModelSpec, recipe: Recipe, stack, tok, tp, cp, mem):
    """(forward, backward) seconds of the memory-bound copies around the attention kernel per micro-batch
    (arrays): ``repeat_kv`` where the recipe repeats GQA's K/V heads, and PyTorch's ring-attention merges
    and fp32 accumulations under CP (costmodel.ring_attention).  ``mem(bytes, kernels)`` prices a pass."""
    f = b = 0.0
    kv_in = tok * model.attention_kv_width(recipe.kv_repeat) / tp     # K and V elements the kernel reads
    if recipe.kv_repeat and model.kv_repeat_factor > 1:
        # the copy (expand + reshape) reads K and V and writes their repeated heads; its backward sums
        # the repeated gradients back (read the repeated, write one): one kernel each for K and V
        rep_b = (tok * (model.k_dim + model.v_dim) / tp + kv_in) * ACT_BYTES
        f, b = f + mem(rep_b, 2), b + mem(rep_b, 2)
    if stack.cp_ring_merge:
        mf, mb = ring_merge_bytes(cp, tok * model.attn_out_dim / tp, kv_in)
        ring = np.where(cp > 1, 1.0, 0.0)
        f = f + ring * mem(mf, RING_KERNELS_PER_STEP * cp)
        b = b + ring * mem(mb, RING_KERNELS_PER_STEP * cp)
    return f, b


@uses_layout_fields("tp", "cp", "mbs", "ep", "etp", "sp", "recompute", "overlap")
def compute_times(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                  t: LayoutTable) -> ComputeTimes:
    """Roofline compute times of one layer and of the logits per micro-batch, for every layout.

    Shapes: every array has len(t) entries.  Units: seconds.
    Raises:
        InputError: the GPU has no peak or the profile no GEMM fit for the recipe's precision.
    """
    gpu = cluster.gpu
    dt = gemm_dtype(recipe)
    if dt not in profile.gemm:
        raise InputError("--precision", "", f"{recipe.precision} runs its GEMMs on {dt} tensor cores, which "
                         f"{profile.path} has no fit for (gemm.{dt}) on {gpu.name}: give a calibrated profile that "
                         f"measured them (costmodel calibrate) with --profile, or another --precision")
    gp = profile.gemm[dt]
    peak = _peak(cluster, dt)
    peak16 = gpu.peak_flops.get("bf16", gpu.peak_flops.get("fp16"))
    hbm, eta_hbm = gpu.hbm_bytes_per_s, profile.hbm_efficiency
    fmt = gemm_format(recipe.precision)
    stack = get_stack(recipe.stack)
    wbytes = fmt.operand_bytes if fmt.low else ACT_BYTES
    s = recipe.seq_len
    tp = t.tp.astype(np.float64)
    cp = t.cp.astype(np.float64)
    tok = t.mbs * s / cp                        # tokens of this CP rank per micro-batch
    sp_div = np.where(t.sp, tp, 1.0)
    h, q, kv, ffn = model.hidden, model.q_dim, model.kv_dim, model.ffn_hidden
    launch = kernel_launch_s(profile)

    def gemm3(m, n, k, batch=1.0, dtype=dt):
        """forward, dgrad and wgrad time of y[m,n] = x[m,k] w[k,n] in ``dtype``."""
        if dtype == dt:
            pk, p_, wb = peak, gp, wbytes
        else:
            pk, p_, wb = peak16, profile.gemm.get(dtype, gp), ACT_BYTES
        g = lambda a, b_, c: gemm_time_s(a, b_, c, batch, pk, hbm, eta_hbm, p_, wb)
        return g(m, n, k), g(m, k, n) + g(k, n, m)

    def mem(bytes_, kernels):
        return bytes_ / (hbm * eta_hbm) + kernels * launch

    w = _weight_gemms(model, recipe, profile, t, tok, tp, gemm3)
    fc1_f, colpar_f, gemm_f, gemm_b = w["fc1_f"], w["colpar_f"], w["gemm_f"], w["gemm_b"]
    tp_overlap = t.overlap & t.sp & (t.tp > 1) & recipe.tp_comm_overlap
    rs_reduce_f = 0.0
    if np.any(tp_overlap):
        # the overlap runs the GEMMs under it in chunks, each with its own partial wave and launch
        one = lambda m, n, k: gemm_time_s(m, n, k, 1.0, peak, hbm, eta_hbm, gp, wbytes)  # noqa: E731
        chunk_f, chunk_b = tp_chunk_extra_s(model, stack, tok, tp, one)
        gemm_f, gemm_b = gemm_f + np.where(tp_overlap, chunk_f, 0.0), gemm_b + np.where(tp_overlap, chunk_b, 0.0)
        rs_reduce_f = np.where(tp_overlap, rs_partials_reduce_s(model, stack, tok, tp, hbm, ACT_BYTES, launch), 0.0)
        if stack.tp_overlap_sm_margin:
            # the bulk and pipelined overlaps hold SMs for their kernels for the whole GEMM beside
            # them (costmodel.stacks): the row-parallel forward GEMMs and the column-parallel input-
            # and weight-gradient GEMMs run on the rest, at a throughput in proportion
            sms = float(gpu.num_sms)
            margin = sms / (sms - stack.tp_overlap_sm_margin) - 1.0
            dense = 1.0 - model.moe_layer_fraction
            row_f, col_f = w["attn_row_f"] + dense * w["mlp_row_f"], w["attn_col_f"] + dense * w["mlp_col_f"]
            gemm_f = gemm_f + np.where(tp_overlap, margin * row_f, 0.0)
            gemm_b = gemm_b + np.where(tp_overlap, margin * 2.0 * col_f, 0.0)
    fmoe, dw = model.moe_layer_fraction, model.dense_mlp_width

    attn_f, attn_b, attn_flops = _attention_core_s(model, recipe, profile, t, tok, peak16, (hbm, eta_hbm), gp, mem,
                                                   launch)

    # memory-bound elementwise ops, bytes per micro-batch on this GPU (forward)
    tok_sp = tok / sp_div                       # tokens per GPU in the SP-sharded regions
    eager = not recipe.fused_elementwise
    norm_b = 2 * (EAGER_NORM_BYTES if eager else FUSED_NORM_BYTES) * h * tok_sp      # 2 norms per layer
    resid_b = 2 * (3 * h * ACT_BYTES + (h if model.dropout else 0)) * tok_sp
    act_w = (fmoe * (ffn * model.topk + model.shared_ffn_hidden) + (1 - fmoe) * dw) / tp
    act_b = ((EAGER_SWIGLU_BYTES if eager else FUSED_SWIGLU_BYTES) if model.gated else 2 * ACT_BYTES) * act_w * tok
    # rotary embedding on Q and K (MLA: only their rotary parts, one shared rotary key)
    rope_w = (model.num_heads * model.qk_rope_head_dim / tp + model.qk_rope_head_dim if model.is_mla
              else (q + kv) / tp)
    # NoPE layers (Llama 4's every fourth) apply none: the mean layer carries the rotary layers' share
    rope_b = 0 if model.learned_positions else ((EAGER_ROPE_BYTES if eager else FUSED_ROPE_BYTES) * rope_w * tok
                                                * (1.0 - len(model.nope_layer_indices) / model.num_layers))
    ew_f = mem(norm_b + resid_b + act_b + rope_b, 7)
    ew_b = mem(2 * (norm_b + resid_b + act_b + rope_b), 7)
    perm_s, router_f, router_b = _moe_token_s(model, recipe, t, tok, tp, sp_div, mem)
    ew_f, ew_b = ew_f + perm_s + router_f * launch, ew_b + perm_s + router_b * launch
    if fmt.low:
        cast_f, cast_b = _low_precision_casts_s(model, recipe, stack, t, tok, tp, w, mem, peak16)
        ew_f, ew_b = ew_f + cast_f, ew_b + cast_b

    side_f, side_b = _attention_copies_s(model, recipe, stack, tok, tp, cp, mem)
    ew_f, ew_b = ew_f + side_f + rs_reduce_f, ew_b + side_b

    cpu_f, cpu_b = ((stack.layer_ops + k) * EAGER_OP_OVERHEAD_S for k in (router_f, router_b))
    gpu_f, gpu_b = gemm_f + attn_f + ew_f, gemm_b + attn_b + ew_b
    layer_f, layer_b = np.maximum(gpu_f, cpu_f), np.maximum(gpu_b, cpu_b)
    if stack.selective_recompute == "op-sac":
        # torchtitan op-level SAC: every second matmul and the memory-bound ops run again, not the
        # reductions after the fused reduce-scatters, whose outputs it saves
        selective, selective_attn = 0.5 * gemm_f + ew_f - rs_reduce_f, 0.0
    else:
        # Megatron: a checkpointed attention core re-runs its forward in the backward, the fused
        # (flash) kernel too (megatron/core/transformer/attention.py _checkpointed_attention_forward)
        selective_attn = attn_f if "core_attn" in recipe.recomputed else 0.0
        selective = selective_attn + _module_recompute_s(model, recipe, w, tok, tp, sp_div, mem, perm_s)
    recompute, recompute_attn = (np.where(t.recompute == 2, full, np.where(t.recompute == 1, sel, 0.0))
                                 for full, sel in ((layer_f, selective), (attn_f, selective_attn)))
    lg_f, lg_b, ce, lg_flops = _logits_times(model, recipe, profile, dt, tok, tp, gemm3, mem, layer_f, layer_b)
    flops_f = tok * layer_matmul_flops_per_token(model) / tp + attn_flops
    zero = np.zeros(len(t))
    return ComputeTimes(layer_f, layer_b, recompute, gemm_f, colpar_f + fc1_f, attn_f, attn_b, lg_f, lg_b,
                        ew_f, ew_b, flops_f, lg_flops, ce, recompute_attn,
                        (layer_f - gpu_f) + (layer_b - gpu_b), w["moe_mlp_f"] + w["dense_mlp_f"] + perm_s,
                        *(zero + w[k] for k in ("attn_col_f", "attn_row_f", "mlp_col_f", "mlp_row_f")))


def edge_layer_share(model: ModelSpec, recipe: Recipe, t) -> np.ndarray:
    """Share of the slowest stage's layers that ``recipe.bf16_edge_layers`` keeps in BF16 (array; reads
    ``t.pp`` and ``t.vp``): Megatron's --first-last-layers-bf16 puts the first N layers on the first
    stage and the last N on the last one, so with PP > 1 an edge stage holds min(N, its layers) of
    them; with PP = 1 the one stage holds min(2N, L) of L.  (With VP > 1 the N layers are assumed to
    sit in the stage's own chunks.)"""
    from .layouts import layers_per_stage
    n = float(recipe.bf16_edge_layers)
    per = layers_per_stage(model, t)
    return np.where(t.pp > 1, np.minimum(n, per) / per, min(2.0 * n, model.num_layers) / model.num_layers)


def edge_recipe16(recipe: Recipe) -> Recipe:
    """The BF16 recipe of the layers ``recipe.bf16_edge_layers`` keeps out of the low-precision format."""
    return replace(recipe, precision="bf16", bf16_edge_layers=0)


def blend_edge_layers(ct: ComputeTimes, ct16: ComputeTimes, share) -> ComputeTimes:
    """The per-layer times and FLOPs of ``ct`` (the recipe's format) with ``share`` of the layers at
    ``ct16``'s (BF16) instead; the output layer is 16-bit in both and stays ``ct``'s."""
    mix = lambda a, b: (1.0 - share) * a + share * b  # noqa: E731
    keep = ("logits_fwd_s", "logits_bwd_s", "logits_flops_fwd", "logits_ce_s")
    return ComputeTimes(**{k: (v if k in keep else mix(v, getattr(ct16, k))) for k, v in vars(ct).items()})
