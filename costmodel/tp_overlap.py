"""What TP-communication overlap costs the GEMMs it hides under: they run in chunks.

To overlap a sequence-parallel all-gather or reduce-scatter with the GEMM that consumes or
produces it, both stacks that do it split the GEMM along its token (M) dimension and run one
chunk per communication step:

* Transformer Engine's userbuffers (Megatron-core, NeMo ``tp_comm_overlap``): the column-parallel
  forward GEMMs (QKV, FC1) and the row-parallel input-gradient GEMMs (output projection, FC2
  dgrad) overlap by ``ring_exchange``, one chunk per TP rank; the row-parallel forward GEMMs
  (output projection, FC2 fprop) by ``pipeline``, ``num_splits`` = 4 chunks; the column-parallel
  backward collectives by ``bulk`` overlap, which leaves their GEMMs whole
  (NVIDIA/TransformerEngine transformer_engine/pytorch/module/base.py ``initialize_ub``:
  ``"num_splits": tp_size if method == "ring_exchange" else 4`` and the method lists).
* PyTorch's micro-pipelined async TP (torchtitan): ``fused_all_gather_matmul`` and
  ``fused_matmul_reduce_scatter`` run one matmul per rank's shard, TP chunks each
  (torch/distributed/_symmetric_memory/__init__.py, ``_pipelined_all_gather_and_consume`` /
  ``_pipelined_produce_and_all2all``); in the backward only the row-parallel layers' gradient
  all-gathers are fused (costmodel.stacks.Stack.async_tp_backward).

A chunk of M / n rows fills fewer output tiles than the whole GEMM, so its last wave leaves more
SMs idle, and each chunk pays its own launch: n x t(M / n) > t(M).  The difference is priced with
the profile's fitted GEMM model (costmodel.gemm: tile and wave quantisation, launch), no constant
of its own.  The schedule's pipelined exposure (costmodel.schedule) then hides the collective under
these chunked GEMMs.

PyTorch's ``fused_matmul_reduce_scatter`` reduces after the pipeline, not inside it: each rank
writes its M / n-row partial for every destination into ``stacked_partials`` (the whole M x N
output, 16-bit), the copy engines exchange them, and one ``torch.sum`` over the n stacked partials
(reading M x N, writing M / n x N) runs after the GEMMs and the copies have finished, exposed on the
critical path, at 23-43% of HBM peak: ATen's reduce_kernel is instruction-bound for a reduction of
extent 2-8 (pytorch/pytorch PR 191803 and PR 191801, 2026-07, which replace it; the sum at
torch/distributed/_symmetric_memory/__init__.py ``_fused_matmul_reduce_scatter_impl``,
``reduce_fn(stacked_partials_view, dim=0)``).  :func:`rs_partials_reduce_s` prices it at the middle
of that range.  Transformer Engine's pipelined reduce-scatter reduces in its communication kernels.
"""
from __future__ import annotations

import numpy as np

from .specs import ModelSpec
from .stacks import Stack

#: HBM efficiency of the final ``torch.sum`` of PyTorch's ``fused_matmul_reduce_scatter``: the middle
#: of the 23-43% of HBM peak pytorch/pytorch PR 191803 measured for it (module docstring)
SYMM_MEM_RS_REDUCE_HBM_EFFICIENCY = 0.5 * (0.23 + 0.43)


def chunked_extra(gemm_s, m, n, k, chunks):
    """Seconds ``chunks`` GEMMs of m / chunks rows take beyond one GEMM of m rows (arrays broadcast).

    Args:
        gemm_s: time of one GEMM y[m, n] = x[m, k] w[k, n], s (costmodel.gemm.gemm_time_s bound to
            a GPU and dtype), taking array-likes.
        m, n, k: the whole GEMM's shape; chunks: pieces M is split into (>= 1).
    """
    c = np.maximum(np.asarray(chunks, dtype=np.float64), 1.0)
    return c * gemm_s(m / c, n, k) - gemm_s(m, n, k)


def tp_chunk_extra_s(model: ModelSpec, stack: Stack, tok, tp, gemm_s) -> tuple:
    """Extra forward and backward seconds of one layer's weight GEMMs when the TP-communication
    overlap splits them (module docstring); arrays over layouts, per micro-batch on one GPU.

    Args:
        model: the model (attention projections; dense MLP and shared experts: the routed experts'
            tokens arrive through the dispatcher, not an SP all-gather).
        stack: its ``fused_qkv`` / ``fused_gate_up`` decide how many GEMMs run, its
            ``tp_overlap_rs_splits`` how the row-parallel forward GEMMs split (0: TP chunks).
        tok: tokens of the micro-batch on this CP rank (the gathered M); tp: TP degree (arrays).
        gemm_s: one GEMM's time, s, as in :func:`chunked_extra`.
    Returns:
        (extra_fwd_s, extra_bwd_s), arrays.
    """
    tp = np.asarray(tp, dtype=np.float64)
    rs = np.full_like(tp, stack.tp_overlap_rs_splits) if stack.tp_overlap_rs_splits else tp
    h = model.hidden
    ext_f = ext_b = 0.0
    for n, k, split in model.attention_projections(stack.fused_qkv):
        if split == "col" and k == h:            # input all-gathered: ring-exchange chunks
            ext_f = ext_f + chunked_extra(gemm_s, tok, n / tp, k, tp)
        elif split == "row":                     # forward reduce-scatter, backward all-gather of its gradient
            ext_f = ext_f + chunked_extra(gemm_s, tok, n, k / tp, rs)
            ext_b = ext_b + chunked_extra(gemm_s, tok, k / tp, n, tp)
    fmoe = model.moe_layer_fraction
    for width, share in ((model.dense_mlp_width, 1.0 - fmoe), (model.shared_ffn_hidden, fmoe)):
        if not width or not share:
            continue
        mats = 2 if model.gated else 1
        n_up, w_up = (1, mats) if stack.fused_gate_up else (mats, 1)
        ext_f = ext_f + share * (n_up * chunked_extra(gemm_s, tok, w_up * width / tp, h, tp)
                                 + chunked_extra(gemm_s, tok, h, width / tp, rs))
        ext_b = ext_b + share * chunked_extra(gemm_s, tok, width / tp, h, tp)
    return ext_f, ext_b


def rs_partials_reduce_s(model: ModelSpec, stack: Stack, tok, tp, hbm_bytes_per_s: float, out_bytes: float,
                         launch_s: float):
    """Exposed seconds of one layer's forward spent reducing the stacked partials of PyTorch's
    ``fused_matmul_reduce_scatter`` (module docstring); 0 for stacks whose reduce-scatter overlap
    reduces inside the collective (``stack.tp_overlap_rs_splits`` > 0: Transformer Engine).

    Args:
        model: its row-parallel forward GEMMs: the attention output projection, the dense MLP's
            down projection (its layers' share) and the shared experts' (the MoE layers' share).
        stack: the training stack.
        tok: tokens of the micro-batch on this CP rank (the GEMMs' M); tp: TP degree (arrays).
        hbm_bytes_per_s: the GPU's datasheet HBM bandwidth, bytes/s.
        out_bytes: bytes per element of the partials (the GEMM's 16-bit output).
        launch_s: one kernel launch, s.
    Returns:
        seconds per micro-batch (array like ``tok``).
    """
    if stack.tp_overlap_rs_splits:
        return np.zeros_like(np.asarray(tok, dtype=np.float64))
    tp = np.asarray(tp, dtype=np.float64)
    fmoe = model.moe_layer_fraction
    # the output projection, and the down projection of a layer's dense MLP or shared experts (a share)
    mlp = (1.0 - fmoe) * bool(model.dense_mlp_width) + fmoe * bool(model.shared_ffn_hidden)
    n_out = sum(n for n, _, split in model.attention_projections(stack.fused_qkv) if split == "row") + mlp * model.hidden
    reductions = 1.0 + mlp
    moved = out_bytes * tok * n_out * (1.0 + 1.0 / tp)
    return moved / (hbm_bytes_per_s * SYMM_MEM_RS_REDUCE_HBM_EFFICIENCY) + reductions * launch_s
