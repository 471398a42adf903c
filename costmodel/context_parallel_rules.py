"""Which context-parallel layouts each stack can run: the rules costmodel.layouts.validity checks beside
the divisibility of the parallel degrees."""
from __future__ import annotations

import numpy as np

from .specs import ModelSpec, Recipe
from .stacks import TE_STACKS, get_stack


def window_blocks_cp(model: ModelSpec, recipe: Recipe) -> bool:
    """Whether the model's sliding-window layers keep every layout at CP 1 on this stack (:func:`cp_rules`'
    first rule): windows shorter than the sequence, run through Transformer Engine's CP attention."""
    return bool(model.sliding_window and model.sliding_layers and recipe.seq_len > model.sliding_window
                and recipe.stack in TE_STACKS)


def cp_rules(t, model: ModelSpec, recipe: Recipe) -> list:
    """(message, mask) rules of context parallelism on the layouts ``t`` (a costmodel.layouts.LayoutTable),
    for costmodel.layouts.validity.  Megatron-core runs it through
    Transformer Engine's attention only (its unfused attention asserts CP 1).  Transformer Engine's CP
    attention (the megatron and nemo stacks) runs sliding-window layers only with the a2a or
    all_gather exchange (transformer_engine/pytorch/attention/dot_product_attention/
    context_parallel.py: 'Context parallelism does not support sliding window attention with
    cp_comm_type=...'); Megatron's default --cp-comm-type p2p is the ring the model prices.  A window
    no shorter than the sequence is full attention, which a run sets without the window."""
    titan = recipe.stack == "torchtitan"
    # torchtitan's trainer: a micro-batch's tokens divisible by TP (its sequence parallelism) x 2 CP (the
    # load-balanced halves of the sequence) (torchtitan/trainer.py; ParallelDims.seq_len_divisor)
    divisor = np.where(t.sp, t.tp, 1) * np.where(t.cp > 1, 2 * t.cp, 1)
    return [
        ("CP > 1 with {name}'s sliding-window layers: Transformer Engine's context parallelism runs them "
         "only with --cp-comm-type a2a or all_gather, not the p2p ring the model prices (CP must be 1)",
         np.full(len(t.tp), window_blocks_cp(model, recipe)) & (t.cp > 1)),
        # megatron/core/transformer/dot_product_attention.py DotProductAttention.__init__
        ("Megatron-core's unfused attention refuses CP > 1 (DotProductAttention: 'Context parallelism is only supported "
         "by TEDotProductAttention!'): drop --no-flash-attention or --cp",
         (t.cp > 1) & (not recipe.flash_attention) & get_stack(recipe.stack).megatron_family),
        ("torchtitan needs a micro-batch's tokens (mbs x seq_len) divisible by TP x 2 CP (its trainer raises: "
         "sequence parallelism splits them over TP, load-balanced CP into 2 CP chunks)",
         titan & (t.cp > 1) & ((t.mbs * recipe.seq_len) % divisor != 0)),
        # transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py: THD's load balancing
        # splits every sequence of cu_seqlens into 2 CP chunks (Megatron pads each to a multiple of 2 CP)
        ("packed documents under CP: Transformer Engine's THD attention splits each document into 2 x CP "
         "chunks, so --doc-tokens must be at least 2 x CP",
         (recipe.doc_tokens > 0) & (recipe.stack in TE_STACKS) & (t.cp > 1) & (recipe.doc_tokens < 2 * t.cp)),
        ("torchtitan shards the model over the CP ranks whenever CP > 1 (ParallelDims.fsdp_enabled: dp_shard "
         "or CP; parallelize applies fully_shard): --zero 3, or 1 with a pipeline",
         titan & (t.cp > 1) & (t.zero == 0)),
    ]
