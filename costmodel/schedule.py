"""Pipeline schedule: step time of 1F1B / interleaved 1F1B with exposed communication, and its parts.

Per micro-batch the slowest stage (the last one: L/PP layers plus the logits) needs
T_mb = t_fwd + t_bwd + 2 VP t_p2p (a send of the activation and one of the gradient per virtual
stage).  With equal stages a step of m micro-batches takes (m + (PP-1)/VP) T_mb: the 1F1B bubble
is (PP-1)/m of the ideal time, the interleaved one (PP-1)/(VP m) (Narayanan et al. SC21, sections
2.2.1-2.2.2).  Stages are not equal (the last one runs the logits, an uneven split gives some
stages a layer more): the critical path of 1F1B is the first micro-batch's forward through every
stage, the slowest stage's m periods, and the last micro-batch's backward back through every
stage, so the bubble is (sum_s T_s - T_max) / VP (:func:`pipeline_bubble_s`); with equal stages
it is (PP-1)/VP T_mb again.
Exposed communication (DESIGN.md "Overlap"): comm - hideable window, floored at 0.  The stage-
boundary sends of an interleaved schedule hide under the next virtual stage's compute where the
stack overlaps them (:func:`stage_sends_s`), except in the warm-up and flush.  With overlap on,
the backward TP collectives of the column-parallel layers hide under their weight-gradient GEMMs
(Megatron async TP all-reduce, TE userbuffers' bulk overlap; not in BigScience's Megatron-DeepSpeed
nor under PyTorch's DTensor TP, costmodel.stacks) and, with SP on Megatron and TE, the re-gather of
their inputs under their input-gradient GEMMs (Stack.sp_regather_backward), and with SP the TP comm
hides under the GEMMs it feeds or drains (Megatron tp_comm_overlap, torchtitan async TP: the
attention's all-gather under QKV, its reduce-scatter under the output projection, the MLP's under FC1
and FC2, the row-parallel gradient all-gathers under those layers' input-gradient GEMMs; one fused
op ends before the next starts, so no collective borrows another's window) as a pipeline of
chunks: each step moves one chunk while the GEMM of the previous one runs, so the first chunk of the
shorter side stays exposed, max(C, G) + min(C, G) / n per pair (Wang et al., "Overlap Communication
with Dependent Computation via Decomposition", ASPLOS 2023; n = TP for Transformer Engine's
userbuffers ring exchange and PyTorch's micro-pipelined async TP, Stack.tp_overlap_rs_splits for
TE's pipelined reduce-scatter); the excess of a collective over its window stays exposed; the CP ring hides
under attention (always, Megatron-core CP); EP all-to-all is exposed, except under Megatron-core's
batch-level EP overlap, where each all-to-all of one micro-batch's pass runs beside a block of another
micro-batch's opposite pass (:func:`exposed_layer_comm`; the windows are not shared out with the TP
comm hidden under the same GEMMs); DP gradient reduction hides
under the backward of the last micro-batch and the ZeRO-1 parameter all-gather under the forward
of the first (Megatron overlap_grad_reduce / overlap_param_gather), except the last gradient
bucket and the first parameter bucket, which no compute can hide (nothing hides on DeepSpeed's
pipeline engine, which reduces after the last micro-batch: costmodel.stacks); FSDP's per-layer
gathers hide under the micro-batch's compute, except the first layer's gather and the last one's
reduction.  Compute that hides communication shares the SMs and HBM with NCCL's kernels and runs
slower: each hidden second of communication adds (s - 1) seconds of compute, s =
``Profile.overlap_slowdown`` measured by the calibration suite (the published mean 1.189 of
arXiv:2507.03114 when not measured).  The
optimizer step is costmodel.optimizer_step's: an HBM-bound pass on the GPU, or ZeRO-Offload's PCIe
round trip and host step.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .comm import CommTimes
from .stage_params import grad_bytes, stage_params
from .compute import ACT_BYTES, ComputeTimes, kernel_launch_s
from .fsdp_copies import KERNELS as FSDP_KERNELS, copy_bytes as fsdp_copy_bytes
from .specs import ClusterSpec, ModelSpec, Profile, Recipe
from .layouts import (LayoutTable, accounts_embedding_loss, light_last_stage, expert_shard_dp, shard_dp, layers_per_stage, microbatches, recomputed_fraction)
from .layout_fields import uses_layout_fields
from .optimizer_step import optimizer_step_time_s
from .stacks import dp_overlap_on, get_stack

BREAKDOWN_TERMS = ("compute_s", "tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s", "bubble_s",
                   "dp_comm_s", "optimizer_s")


def bubble_periods(pp, vp):
    """The pipeline bubble in micro-batch periods: (PP - 1) / VP (arrays broadcast).

    A step of m micro-batches whose slowest stage needs T_mb per micro-batch takes
    (m + bubble_periods) T_mb; the bubble fraction of the ideal time is bubble_periods / m
    ((PP-1)/m for 1F1B, (PP-1)/(VP m) interleaved; Narayanan et al. SC21, sections 2.2.1-2.2.2).
    """
    return (pp - 1) / vp


def pipeline_bubble_s(stage_sum_s, slowest_s, vp):
    """The pipeline bubble of a step, s (arrays broadcast): (sum over stages of their period per
    micro-batch - the slowest stage's) / VP (module docstring).  A step is m x ``slowest_s`` plus it.
    Equal stages give (PP - 1) / VP periods, :func:`bubble_periods`."""
    d = stage_sum_s - slowest_s
    # one stage sums to its own period up to rounding: no bubble, not 5.6e-17 s of one
    return np.where(d > 1e-9 * slowest_s, d, 0.0) / vp


def _pipelined_exposed(comm_s, gemm_s, n_chunks):
    """Exposed seconds of a collective pipelined with a GEMM in ``n_chunks`` steps (module docstring):
    max(C, G) + min(C, G) / n - G, the fill (or drain) chunk of the shorter side left uncovered."""
    return np.maximum(0.0, comm_s - gemm_s) + np.minimum(comm_s, gemm_s) / np.maximum(n_chunks, 1.0)


def exposed_layer_comm(recipe: Recipe, t: LayoutTable, ct: ComputeTimes, cm: CommTimes, rec_frac=None) -> dict:
    """Exposed TP / CP / EP communication of one layer per micro-batch, after overlap (arrays, s).

    The overlap rules of the module docstring, shared by :func:`step_times` and the Perfetto
    trace (costmodel/trace.py), which splits each op into compute and collectives with them.

    Returns:
        dict of arrays (len(t)), seconds: ``tp_f, tp_b, cp_f, cp_b, ep_f, ep_b`` (the backward
        terms include the recomputed forward's comm under full recompute, the MoE layer's
        dispatch and combine when selective recompute re-runs it, and the input gathers op-level
        SAC repeats) and ``rec_tp, rec_cp, rec_ep`` (that recomputed part alone, per layer on
        average: ``rec_frac`` of the layers recompute their forward,
        :func:`costmodel.layouts.recomputed_fraction`; default 1 under full recompute, else 0), and
        ``rec_tp_raw``: the recomputed TP collectives before overlap.
    """
    full = np.where(t.recompute == 2, 1.0, 0.0) if rec_frac is None else rec_frac
    tp_overlap = t.overlap & t.sp & recipe.tp_comm_overlap
    stack = get_stack(recipe.stack)
    n_chunks = t.tp.astype(np.float64)
    rs_chunks = np.full_like(n_chunks, stack.tp_overlap_rs_splits) if stack.tp_overlap_rs_splits else n_chunks
    # each SP collective can hide only under the GEMMs it feeds or drains (the fused or userbuffers
    # op finishes before the next one starts): the attention block's all-gather under QKV, its
    # reduce-scatter under the output projection, a dense MLP's under FC1 and FC2
    ag, rs, w_mlp = cm.tp_ag_s, cm.tp_rs_s, cm.tp_mlp_share
    g_col, g_row = (ct.attn_col_fwd_s, ct.dense_mlp_col_fwd_s), (ct.attn_row_fwd_s, ct.dense_mlp_row_fwd_s)
    per_block = lambda fn, c, gs: fn(c, gs[0]) + w_mlp * fn(c, gs[1])      # noqa: E731
    ring = lambda c, g: _pipelined_exposed(c, g, n_chunks)                  # noqa: E731
    # (the pipelined terms only where some layout overlaps: the search's hot path, mostly without)
    any_ov = bool(np.any(tp_overlap))
    rs_exposed_f = per_block(lambda c, g: _pipelined_exposed(c, g, rs_chunks), rs, g_row) if any_ov else 0.0
    tp_f = np.where(tp_overlap, per_block(ring, ag, g_col) + rs_exposed_f, cm.tp_layer_fwd_s) if any_ov \
        else cm.tp_layer_fwd_s
    # backward: the column-parallel layers' input gradients are reduced asynchronously under their
    # weight-gradient GEMMs (Megatron async tensor-parallel all-reduce / SP reduce-scatter overlap,
    # Korthikanti et al. 2022 sec. 4.2.2; TE userbuffers' bulk overlap; a DTensor reduce-scatter
    # waited on after the weight gradient), and where the stack re-gathers their inputs for those
    # weight gradients, the re-gather runs under their input-gradient GEMMs (same FLOPs as the
    # forward): the excess over each window stays exposed; the row-parallel layers' gradient
    # all-gathers are exposed, or pipelined with their input-gradient GEMMs under tp_comm_overlap.
    # Without SP: the two all-reduces, half exposed and half under the column-parallel weight gradients
    regather = cm.tp_regather_s if stack.sp_regather_backward else np.zeros_like(cm.tp_regather_s)
    bulk = lambda c, g: np.maximum(0.0, c - g)                              # noqa: E731
    async_ok = t.overlap & stack.async_tp_backward
    half = 0.5 * (cm.tp_layer_bwd_s - regather)
    colpar_sp = per_block(bulk, rs, g_col) + (per_block(bulk, ag, g_col) if stack.sp_regather_backward else 0.0)
    colpar_b = np.where(async_ok, np.where(t.sp, colpar_sp, np.maximum(0.0, half - ct.layer_colpar_fwd_s)),
                        np.where(t.sp, (1.0 + w_mlp) * rs, half) + regather)
    rowpar_b = np.where(t.sp, (1.0 + w_mlp) * ag, half)
    rowpar_b = np.where(tp_overlap, per_block(ring, ag, g_row), rowpar_b) if any_ov else rowpar_b
    tp_b = np.where(async_ok | tp_overlap, rowpar_b + colpar_b, cm.tp_layer_bwd_s)
    # what the overlap's SM-holding methods hide (the pipelined reduce-scatters, the bulk backward
    # collectives): their cost is the GEMMs' reserved SMs (costmodel.compute), not the contention of
    # kernels that share them
    sm_ov = tp_overlap & (stack.tp_overlap_sm_margin > 0)
    colpar_raw = (1.0 + w_mlp) * (rs + (ag if stack.sp_regather_backward else 0.0))
    tp_sm_f = np.where(sm_ov, (1.0 + w_mlp) * rs - rs_exposed_f, 0.0)
    tp_sm_b = np.where(sm_ov & async_ok, colpar_raw - colpar_sp, 0.0)
    # the ring posts the next chunk's send before the attention on this one; off, every send waits
    cp_f = np.where(t.overlap, np.maximum(0.0, cm.cp_layer_fwd_s - ct.layer_attn_fwd_s), cm.cp_layer_fwd_s)
    cp_b = np.where(t.overlap, np.maximum(0.0, cm.cp_layer_bwd_s - ct.layer_attn_bwd_s), cm.cp_layer_bwd_s)
    ep_f, ep_b = cm.ep_layer_fwd_s, cm.ep_layer_bwd_s
    # batch-level EP overlap: each all-to-all of one pass runs beside a block of the paired pass
    # (DeepSeek-V3 sec. 3.2.1, fig. 4): the forward's dispatch under the backward's MLP, its combine
    # under the backward's attention, the backward's combine under the forward's attention and its
    # dispatch under the forward's MLP; the passes without a partner hide nothing (ep_overlap_unpaired)
    ep_hid_f = ep_hid_b = np.zeros_like(ep_f)
    if recipe.moe_ep_overlap:
        paired = np.where(t.overlap & (t.ep > 1), 1.0 - ep_overlap_unpaired(recipe, t), 0.0)
        mlp_f = ct.layer_mlp_fwd_s
        mlp_b = ct.layer_bwd_s * mlp_f / np.maximum(ct.layer_fwd_s, 1e-30)     # the MLP's share of each pass
        attn_f, attn_b = ct.layer_fwd_s - mlp_f, ct.layer_bwd_s - mlp_b
        ep_hid_f = paired * (np.minimum(0.5 * ep_f, mlp_b) + np.minimum(0.5 * ep_f, attn_b))
        ep_hid_b = paired * (np.minimum(0.5 * ep_b, attn_f) + np.minimum(0.5 * ep_b, mlp_f))
    ep_f, ep_b = ep_f - ep_hid_f, ep_b - ep_hid_b
    rec = {d: full * v for d, v in (("tp", tp_f), ("cp", cp_f), ("ep", ep_f))}
    rec_tp_raw = full * cm.tp_layer_fwd_s
    if stack.selective_recompute == "op-sac":
        # op-level SAC saves no all-gather output (torchtitan activation_checkpoint.py: of the
        # collectives only reduce-scatter and all-to-all outputs are saved): the recomputed column-
        # parallel inputs are gathered again, before their matmuls (pipelined with the recomputed
        # half of them under async TP)
        sac = np.where(tp_overlap, _pipelined_exposed(cm.tp_regather_s, 0.5 * ct.layer_colpar_fwd_s, n_chunks),
                       cm.tp_regather_s)
        rec["tp"] = rec["tp"] + np.where(t.recompute == 1, sac, 0.0)
        rec_tp_raw = rec_tp_raw + np.where(t.recompute == 1, cm.tp_regather_s, 0.0)
    if "moe" in recipe.recomputed:              # a recomputed MoE layer dispatches and combines again
        rec["ep"] = rec["ep"] + np.where(t.recompute == 1, ep_f, 0.0)
    return {"tp_f": tp_f, "tp_b": tp_b + rec["tp"], "cp_f": cp_f, "cp_b": cp_b + rec["cp"],
            "ep_f": ep_f, "ep_b": ep_b + rec["ep"], "rec_tp": rec["tp"], "rec_cp": rec["cp"],
            "rec_ep": rec["ep"], "rec_tp_raw": rec_tp_raw, "ep_hid_f": ep_hid_f, "ep_hid_b": ep_hid_b,
            "tp_sm_f": tp_sm_f, "tp_sm_b": tp_sm_b + full * tp_sm_f}


def ep_overlap_unpaired(recipe: Recipe, t: LayoutTable) -> np.ndarray:
    """Share of a stage's forward passes (and as many backward ones) that batch-level EP overlap leaves
    without a partner, so that their dispatch and combine stay exposed (array).

    Megatron-core's ``--overlap-moe-expert-parallel-comm`` runs the forward of one micro-batch and the
    backward of an earlier one as a single schedule (megatron/core/pipeline_parallel: the combined
    1F1B of its MoE README's "EP A2A Overlap", DeepSeek-V3 sec. 3.2.1): only the steady state has
    pairs.  The warm-up forwards and the flush backwards run alone: one of each without a pipeline,
    and with an interleaved one the first rank's 2 (PP - 1) + (VP - 1) PP warm-up forwards
    (Narayanan et al. SC21 sec. 2.2.2, Megatron's get_pp_rank_microbatches), of the stage's m VP
    forward passes.
    """
    n = microbatches(recipe, t.dp, t.mbs) * t.vp
    warm = np.where(t.pp > 1, 2 * (t.pp - 1) + (t.vp - 1) * t.pp, 1)
    return np.minimum(1.0, warm / np.maximum(n, 1))


def fsdp_copy_s(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, t) -> tuple:
    """(forward, backward) time of one layer's ZeRO-3 memory passes per micro-batch, s (arrays; 0 unless
    ZeRO-3 on a stack whose FSDP makes them, costmodel.stacks ``fsdp_copies``): costmodel.fsdp_copies'
    bytes of the dense part (sharded over DP x CP, or its HSDP shard group) and the experts (over the
    expert-DP group's) at the
    fitted HBM bandwidth, and their kernels' launches."""
    zero = np.zeros(len(t))
    flavour = get_stack(recipe.stack).fsdp_copies
    if not flavour:
        return zero, zero
    expert = model.mean_expert_params()
    gb = grad_bytes(recipe)
    d_f, d_b = fsdp_copy_bytes((model.layer_params() - expert) / t.tp, shard_dp(t), ACT_BYTES, gb, flavour)
    e_f, e_b = fsdp_copy_bytes(expert / (t.ep * t.etp), expert_shard_dp(t), ACT_BYTES, gb, flavour)
    ag_kernels, rs_kernels = FSDP_KERNELS[flavour]
    bw, launch = cluster.gpu.hbm_bytes_per_s * profile.hbm_efficiency, kernel_launch_s(profile)
    # with EP the experts are a unit of their own, sharded on their own mesh (torchtitan's MoE models'
    # parallelize: fully_shard of the experts over the DP ranks outside EP)
    units = 1.0 + ((t.ep > 1) & (expert > 0))
    on = (t.zero == 3) & (shard_dp(t) > 1)
    f = (d_f + e_f) / bw + units * ag_kernels * launch
    b = (d_b + e_b) / bw + units * (ag_kernels + rs_kernels) * launch
    return np.where(on, f, 0.0), np.where(on, b, 0.0)


def grad_accum_s(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, t) -> np.ndarray:
    """One layer's gradient accumulation pass per micro-batch after the first, s (array; 0 unless the
    stack leaves it to autograd, costmodel.stacks ``grad_accum_bytes``, under ZeRO 0-1): the bytes per
    local parameter of the layer (dense over TP, experts over EP x ETP) at the fitted HBM bandwidth,
    one kernel per parameter tensor (the projections' weights and the two norms', with their biases)."""
    z0, z1 = get_stack(recipe.stack).grad_accum_bytes
    if not (z0 or z1):
        return np.zeros(len(t))
    nbytes = np.where(t.zero == 0, z0, z1)
    expert = model.mean_expert_params()
    local = (model.layer_params() - expert) / t.tp + expert / (t.ep * t.etp)
    tensors = (len(model.attention_projections()) + (3 if model.gated else 2) + 2) * (2 if model.bias else 1)
    s = nbytes * local / (cluster.gpu.hbm_bytes_per_s * profile.hbm_efficiency) + tensors * kernel_launch_s(profile)
    return np.where((t.zero <= 1) & (nbytes > 0), s, 0.0)


@dataclass
class StepTimes:
    """Step time and its additive breakdown, seconds (arrays over layouts).

    The terms of :data:`BREAKDOWN_TERMS` sum to ``step_time_s``.  ``t_mb_s`` is the slowest
    stage's time per micro-batch, ``fwd_s``/``bwd_s`` its forward/backward parts.
    ``layer_contention_s``: the compute time one layer loses per micro-batch (forward + backward)
    to the collectives hidden under it and to FSDP2's copies around its own (:func:`fsdp_copy_s`); ``step_contention_s``: the same for the DP/FSDP
    communication and the overlapped stage-boundary sends hidden under a step's compute (both
    inside ``breakdown["compute_s"]``).
    ``layer_exposed_comm_s``: the TP, CP and EP communication one layer leaves exposed per
    micro-batch (forward + backward).  ``stages_fwd_s``/``stages_bwd_s``: forward/backward per
    micro-batch summed over every stage (all the layers with their exposed collectives, the logits).
    ``pp_contention_s``: the compute time a micro-batch loses to the stage-boundary sends hidden
    under it (inside ``t_mb_s``; 0 where they block); ``pp_hidden_s``: those sends' own time per
    micro-batch, which the warm-up and flush still expose (inside the bubble).
    ``layer_memory_pass_s``: the HBM-bound part of ``layer_contention_s`` (FSDP's copies, an unfused
    gradient accumulation): kernels whose time and power follow the memory, not the SM clock.
    """

    step_time_s: np.ndarray
    breakdown: dict
    t_mb_s: np.ndarray
    fwd_s: np.ndarray
    bwd_s: np.ndarray
    layer_contention_s: np.ndarray
    step_contention_s: np.ndarray
    layer_exposed_comm_s: np.ndarray
    stages_fwd_s: np.ndarray
    stages_bwd_s: np.ndarray
    pp_contention_s: np.ndarray
    pp_hidden_s: np.ndarray
    layer_memory_pass_s: np.ndarray


def pp_sends_overlapped(recipe: Recipe, overlap, vp):
    """Whether stage-boundary sends hide under the next virtual stage (bool, or a bool array where
    ``overlap`` / ``vp`` are layout columns): the recipe's ``pp_overlap``, the layout's ``overlap``
    and VP > 1, since Megatron-core forces ``overlap_p2p_comm`` off without a virtual pipeline
    (megatron/training/arguments.py).  The schedule and the launch flags read the same rule."""
    return np.logical_and(np.logical_and(recipe.pp_overlap, overlap), np.asarray(vp) > 1)


def stage_sends_s(recipe: Recipe, t: LayoutTable, p2p_s, fwd_s, bwd_s):
    """(all, exposed) stage-boundary send time per micro-batch on the slowest stage, s (arrays).

    Each virtual stage sends its forward output on and its input gradient back: 2 VP transfers of
    ``p2p_s`` a micro-batch.  Blocking, all are exposed.  Overlapped (:func:`pp_sends_overlapped`;
    Megatron-core ``overlap_p2p_comm``) each transfer is posted before the next virtual stage's forward (``fwd_s / VP``) or backward
    (``bwd_s / VP``) and waited for after it, so only its excess over that compute stays exposed
    (Megatron-core pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving).
    """
    raw = 2 * t.vp * p2p_s                     # p2p_s is 0 without a pipeline (costmodel.comm)
    exposed = t.vp * (np.maximum(p2p_s - fwd_s / t.vp, 0.0) + np.maximum(p2p_s - bwd_s / t.vp, 0.0))
    return raw, np.where(pp_sends_overlapped(recipe, t.overlap, t.vp), exposed, raw)


@uses_layout_fields("tp", "pp", "dp", "cp", "ep", "etp", "vp", "mbs", "recompute", "recompute_num_layers", "zero", "sp",
                    "overlap", "dp_replicate")
def step_times(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
               t: LayoutTable, ct: ComputeTimes, cm: CommTimes, params=None) -> StepTimes:
    """Assemble compute and communication into the step time of every layout (module docstring).
    ``params``: the (dense, expert) parameters per GPU of costmodel.stage_params.stage_params, where
    the caller has them (computed here otherwise)."""
    L = layers_per_stage(model, t)
    m = microbatches(recipe, t.dp, t.mbs)
    full = recomputed_fraction(model, t)          # fraction of layers that recompute their forward
    e = exposed_layer_comm(recipe, t, ct, cm, full)
    tp_f, tp_b, cp_f, cp_b, ep_f, ep_b = (e[k] for k in ("tp_f", "tp_b", "cp_f", "cp_b", "ep_f", "ep_b"))

    # compute that runs while a collective is in flight shares SMs and HBM with it and slows by the
    # profile's measured contention factor (DESIGN.md "Overlap"; calibration suite ``overlap`` records)
    slow = profile.overlap_slowdown - 1.0
    # FSDP's memory passes around its per-layer collectives run on the compute stream too (costmodel.fsdp_copies)
    copy_f, copy_b = fsdp_copy_s(model, recipe, cluster, profile, t)
    # and so does an unfused gradient accumulation, in every micro-batch but the first (on average)
    accum = grad_accum_s(model, recipe, cluster, profile, t) * (m - 1) / m
    # the EP all-to-all batch-level overlap hides slows the other pass: a forward's under a backward
    cont_f = slow * ((cm.tp_layer_fwd_s - tp_f - e["tp_sm_f"]) + (cm.cp_layer_fwd_s - cp_f) + e["ep_hid_b"]) + copy_f
    cont_b = slow * ((cm.tp_layer_bwd_s + e["rec_tp_raw"] - tp_b - e["tp_sm_b"])
                     + (cm.cp_layer_bwd_s + full * cm.cp_layer_fwd_s - cp_b) + e["ep_hid_f"]) + copy_b + accum
    # the last stage runs the logits; with the embedding and loss counted as pipeline layers (PP > 2: at
    # PP 2 both stages hold L/2, layers_per_stage's count), or an uneven split on a stack that lightens
    # the last stage, it has one transformer layer fewer than the fullest stages, and the slower of the
    # two sets the pace
    acc_el = accounts_embedding_loss(model, t)
    acc = (acc_el & (t.pp > 2)) | ((model.num_layers % t.pp != 0) & ~acc_el & light_last_stage(recipe))
    lay_f = ct.layer_fwd_s + cont_f
    # full recompute re-runs the forward of the recomputed share of the layers
    rec = np.where(t.recompute == 2, full * ct.layer_recompute_s, ct.layer_recompute_s)
    lay_b = ct.layer_bwd_s + rec + cont_b
    comm_f, comm_b = tp_f + cp_f + ep_f, tp_b + cp_b + ep_b
    # the last stage's MTP modules each run a transformer layer (DeepSeek-V3 sec. 2.2): its compute is in
    # the logits' time (costmodel.compute), its collectives with the logits here
    mtp = float(model.mtp_layers)
    lg_f, lg_b = ct.logits_fwd_s + mtp * comm_f, ct.logits_bwd_s + mtp * comm_b
    # the pace is the slower of a full stage (L layers with their collectives) and the last stage
    # (L - 1 layers, their collectives and the logits); without the lighter last stage, L layers and
    # the logits
    last = acc & (lg_f + lg_b > lay_f + lay_b + comm_f + comm_b)
    n_comm = L - last                          # layers whose collectives the slowest stage runs
    with_logits = ~(acc & ~last)
    if model.pipeline_rank_layers:
        # a run's own split: the slower of its fullest rank before the last and its last rank with the logits
        own = np.asarray(t.pp) == len(model.pipeline_rank_layers)
        ranks = model.pipeline_rank_layers
        l_mid, l_last = float(max(ranks[:-1], default=0)), float(ranks[-1])
        per = lay_f + lay_b + comm_f + comm_b
        last_slower = l_last * per + lg_f + lg_b >= l_mid * per
        n_comm = np.where(own, np.where(last_slower, l_last, l_mid), n_comm)
        with_logits = np.where(own, last_slower, with_logits)
    comp_f = n_comm * lay_f + np.where(with_logits, ct.logits_fwd_s, 0.0)
    comp_b = n_comm * lay_b + np.where(with_logits, ct.logits_bwd_s, 0.0)
    n_comm_all = n_comm + np.where(with_logits, mtp, 0.0)           # with the MTP layers' collectives
    fwd = comp_f + n_comm_all * comm_f
    bwd = comp_b + n_comm_all * comm_b
    pp_raw, pp_mb = stage_sends_s(recipe, t, cm.pp_p2p_s, fwd, bwd)
    pp_slow = slow * (pp_raw - pp_mb)             # compute slowed by the sends hidden under it
    # the last gradient bucket is reduced after the backward ends and the first parameter bucket
    # is gathered before the forward starts: overlap hides all but those (FSDP: its first gather
    # and last reduce-scatter per micro-batch)
    dp_ov = dp_overlap_on(recipe, t.zero, t.overlap)
    fsdp = np.where(dp_ov, np.maximum(cm.fsdp_edge_s, cm.fsdp_mb_s - (fwd + bwd)), cm.fsdp_mb_s)
    t_mb = fwd + bwd + pp_mb + pp_slow + fsdp
    # every stage's period summed: all the layers with their collectives, the logits, and each
    # stage's boundary sends (exposed in the warm-up and flush, overlap or not) and FSDP edges
    stages_f = model.num_layers * (lay_f + comm_f) + lg_f
    stages_b = model.num_layers * (lay_b + comm_b) + lg_b
    bubble = pipeline_bubble_s(stages_f + stages_b + t.pp * (pp_raw + fsdp), t_mb, t.vp)

    # the last backward's hidden stage sends and the gradient reduction under it share each GPU's NIC
    # where both leave the node: the reduction hides in what the sends leave of that window
    win = bwd - cm.dp_shares_pp_nic * t.vp * np.minimum(cm.pp_p2p_s, bwd / t.vp) \
        * pp_sends_overlapped(recipe, t.overlap, t.vp)
    dp_grad = np.where(dp_ov, np.maximum(cm.dp_grad_tail_s, cm.dp_grad_s - win), cm.dp_grad_s)
    dp_param = np.where(dp_ov, np.maximum(cm.dp_param_head_s, cm.dp_param_s - fwd), cm.dp_param_s)
    dp_hidden_slow = slow * ((cm.dp_grad_s - dp_grad) + (cm.dp_param_s - dp_param) + m * (cm.fsdp_mb_s - fsdp))
    step_slow = dp_hidden_slow + m * pp_slow

    dense, exp = params if params is not None else stage_params(model, t, light_last_stage(recipe))
    local = np.where(t.zero >= 1, dense / shard_dp(t) + exp / expert_shard_dp(t), dense + exp)
    opt = optimizer_step_time_s(recipe, cluster, profile, local)

    bd = {
        "compute_s": m * (comp_f + comp_b) + step_slow,
        "tp_comm_s": m * n_comm_all * (tp_f + tp_b),
        "cp_comm_s": m * n_comm_all * (cp_f + cp_b),
        "ep_comm_s": m * n_comm_all * (ep_f + ep_b),
        "pp_comm_s": m * pp_mb,
        "bubble_s": bubble,
        "dp_comm_s": dp_grad + dp_param + m * fsdp,
        "optimizer_s": opt,
    }
    total = sum(bd.values())
    return StepTimes(total, bd, t_mb, fwd, bwd, cont_f + cont_b, step_slow, comm_f + comm_b, stages_f, stages_b,
                     pp_slow, pp_raw - pp_mb, np.zeros(len(t)) + copy_f + copy_b + accum)


def take_rows(obj, idx):
    """A dataclass of arrays (or dicts of arrays) restricted to rows ``idx`` (index array or mask)."""
    return type(obj)(**{k: ({kk: vv[idx] for kk, vv in v.items()} if isinstance(v, dict) else v[idx])
                        for k, v in vars(obj).items()})


@dataclass
class LayoutTerms:
    """Every cost term of a table of layouts before power and temperature (arrays over layouts):
    the raw compute and communication times and the step they assemble into.  What the energy
    model and the Perfetto trace build on, so neither re-evaluates the time model.
    """

    layouts: LayoutTable
    compute: ComputeTimes
    comm: CommTimes
    step: StepTimes

    def take(self, idx) -> "LayoutTerms":
        """The terms of rows ``idx``."""
        return LayoutTerms(self.layouts.take(idx), take_rows(self.compute, idx), take_rows(self.comm, idx),
                           take_rows(self.step, idx))
