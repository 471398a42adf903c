"""Training stacks and the defaults each one runs with: the recipe switches the cost model has for them.

A stack's defaults are what its own code does when a user sets nothing (each cited below); a recipe
flag the user gives overrides them.  The switches are :data:`RECIPE_SWITCHES` (one command-line
flag each, costmodel.recipe_switches), plus Megatron's vocabulary padding.

=====================  =======  =======  =========  ==============  =================================================
stack                  flash    TP-comm  optimizer  cross-          source of the defaults
                       attn     overlap             entropy
=====================  =======  =======  =========  ==============  =================================================
megatron               yes      off      adam       megatron        Megatron-core (TE fused attention; ``--tp-comm-
                                                                    overlap`` defaults to False, megatron/training/
                                                                    arguments.py; ``--optimizer adam``, its Adam is
                                                                    AdamW; vocab_parallel_cross_entropy)
megatron-legacy        no       off      adam       megatron        Megatron-LM 2021-22 (SC21, Korthikanti et al.
                                                                    2022): before flash attention and TE
megatron-deepspeed     no       off      adam       megatron        Megatron-DeepSpeed of BigScience (BLOOM, 2022)
nemo                   yes      on       adam       megatron-fused  NeMo 2 performance recipes (TE; ``tp_comm_overlap=
                                                                    True`` in the LLM pre-training recipes for TP > 1;
                                                                    GPTConfig ``cross_entropy_loss_fusion=True`` since
                                                                    NeMo PR 10209, 2024-09, Megatron-Bridge's
                                                                    GPTModelProvider alike; NeMo 1 files: megatron)
torchtitan             yes      off      adamw      eager           torchtitan (SDPA flash backend; async TP is its own
                                                                    switch, off by default; AdamW in its configs; its
                                                                    loss is F.cross_entropy on logits cast to fp32)
llm-foundry            yes      off      adamw      fused           llm-foundry MPT yamls/pretrain (``attn_impl:
                                                                    flash``; ``decoupled_adamw``, its benchmarks' since
                                                                    918a22af6; ``loss_fn: fused_crossentropy``)
deepspeed              yes      off      adamw      eager           DeepSpeed with HF transformers (flash-attention
                                                                    ``attn_implementation``; AdamW; the model's loss
                                                                    upcasts the logits to fp32)
=====================  =======  =======  =========  ==============  =================================================

DP overlap (``dp_overlap``): off on Megatron-LM (``--overlap-grad-reduce`` and ``--overlap-param-gather``
are store_true flags, megatron/training/arguments.py; before 2023 it had neither) and on DeepSpeed
at ZeRO 0-2 (ZeRO ``overlap_comm`` defaults to false below stage 3; its pipeline engine reduces after
the last micro-batch), where ZeRO-3 overlaps anyway (:attr:`Stack.zero3_overlap`);
on in NeMo 2's pre-training recipes (``DistributedDataParallelConfig(overlap_grad_reduce=True,
overlap_param_gather=True)``), in PyTorch DDP (bucketed all-reduce hooks fire during the backward)
and FSDP (torchtitan, llm-foundry).

Pipeline-send overlap (``pp_overlap``, interleaved schedules only): on in Megatron-core (the
store_false ``--no-overlap-p2p-communication``; arguments.py forces it off without VP) and NeMo
(NeMo-Framework-Launcher llama2_70b.yaml: ``overlap_p2p_comm: True``); off in 2021-22 Megatron-LM,
whose ``_communicate`` synchronised every send (SC21, Korthikanti et al.), in DeepSpeed's blocking
pipeline engine and torchtitan's pipelining schedules (no measurement of their overlap was found).

FP8 scaling (``fp8_recipe``, with ``--precision fp8``): delayed on Megatron-LM (``--fp8-recipe``
defaults to delayed, megatron/training/arguments.py), NeMo's ``bf16_with_fp8_mixed`` and llm-foundry
(Transformer Engine's DelayedScaling in its ``fp8_config``); tensorwise (current scaling) on torchtitan,
whose torchao float8 linears scale every cast dynamically from the tensor's own amax.  FP8 parameters
(``fp8_param_gather``): off in Megatron-LM (store_true ``--fp8-param-gather``), on in NeMo 2, whose
fp8 precision plugins set ``fp8_param_gather=True`` (nemo/collections/llm/recipes/precision/mixed_precision.py).

Attention kernel (``attention_kernel``): FlashAttention-2 (flash-attn 2.x, PyTorch SDPA's flash backend),
except on the Transformer Engine stacks (megatron, nemo) on Hopper and Blackwell: TE has run its cuDNN FusedAttention
instead of FlashAttention there since v1.2 (2023-12; get_attention_backend: "Disabling FlashAttention to give
FusedAttention preference on Hopper+"), priced from the FlashAttention-3 paper's cuDNN bars on an H100 and
cuDNN 9.19.1's times on a GB200 for Blackwell (:data:`TE_CUDNN_GENERATIONS`;
hardware/profiles/data/flash_attention_kernel_times_h100_b200.md).  The speed
differs by cuDNN release: a 2026 release's microbenchmark runs up to 23% faster.  A run can switch it off:
NeMo 24.01-24.07's launcher set NVTE_FUSED_ATTN=0 for every job, so those releases' tables ran
FlashAttention-2 (costmodel.published_row, ``_SOURCE_SWITCHES``).

CPU dispatch: each stack's Python issues ``layer_ops`` framework calls per transformer layer and
pass (counted below); at :data:`EAGER_OP_OVERHEAD_S` each, a layer whose kernels finish sooner
waits for the CPU (small models, few tokens per micro-batch).  Counts, forward (the backward
replays one autograd node per differentiable call, counted the same):

* eager Llama/MPT block (HF transformers LlamaDecoderLayer, torchtitan, llm-foundry): 2 RMSNorms of
  8 ops (to, pow, mean, add, rsqrt, mul, mul, to), 3 QKV linears + 3 view/transpose pairs (6),
  rotary embedding on q and k (2 x 9: cos/sin slices, mul, rotate_half's 2 slices, neg, cat, mul,
  add), attention (3 transposes, the kernel, a reshape), the output linear, 2 residual adds, the
  MLP (3 linears, SiLU, mul): 8+8+3+6+18+5+1+2+5 = 56.
* Megatron-core with Transformer Engine: LayerNormLinear (QKV), fused RoPE on q and k (2),
  DotProductAttention and 2 reshapes (3), Linear (proj), bias-dropout-add, LayerNormLinear (FC1),
  fused SwiGLU, Linear (FC2), bias-dropout-add: 12.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import InputError
from .recipe_switches import RECIPE_SWITCHES
from .stack_rules import check_stack_switches
from .specs import Recipe


#: CPU time of one eager PyTorch call, s: ``x + 1`` in eager mode takes 4.5 us of fixed overhead
#: (Jason Ansel, "Micro-optimizations for the most micro of benchmarks", dev-discuss.pytorch.org/t/1836,
#: 2023, i9-11900K), the dispatcher, autograd recording and the launch together.
EAGER_OP_OVERHEAD_S = 4.5e-6
EAGER_LAYER_OPS = 56      # eager Llama/MPT block, forward (module docstring)
#: stacks built on Transformer Engine, whose userbuffer TP-communication overlap a user can switch on
TE_STACKS = ("megatron", "nemo")
#: Megatron forks that predate Transformer Engine and --attention-backend: flash-attn (--use-flash-attn) or unfused
PRE_TE_MEGATRON_STACKS = ("megatron-legacy", "megatron-deepspeed")
FUSED_LAYER_OPS = 12      # Megatron-core + Transformer Engine block, forward (module docstring)

#: HBM bytes per element of the memory-bound ops of a layer's forward, fused kernels vs eager
#: PyTorch (each eager op reads its inputs from HBM and writes its output back):
#: * RMSNorm: fused, read + write bf16 (4).  Eager (torchtitan's RMSNorm, HF LlamaRMSNorm, and
#:   torch.nn.RMSNorm's composite rms_norm): x.float() 2 + 4, pow(2) 4 + 4, mean 4, x * rsqrt 4 + 4,
#:   type_as 4 + 2, * weight 2 + 2 = 36.
#: * Rotary embedding on q and k: fused, read + write (4).  Eager: torchtitan's complex product
#:   (xq.float() 2 + 4, * freqs_cis 4 + 4, type_as 4 + 2) = 20; HF's rotate_half (q * cos 4,
#:   neg of half 2, cat 4, * sin 4, add 6) = 20.
#: * SwiGLU: fused, read gate and up, write (6).  Eager silu(gate) * up: silu 2 + 2, mul 4 + 2 = 10.
#: Eager by default (``fused_elementwise`` off): torchtitan without ``compile`` (norms.py) and HF
#: transformers under DeepSpeed (modeling_llama.py); the Megatron family runs TE's or Apex's fused
#: kernels, llm-foundry's MPT a native LayerNorm kernel and GELU, one pass each.
FUSED_NORM_BYTES, EAGER_NORM_BYTES = 4.0, 36.0
FUSED_ROPE_BYTES, EAGER_ROPE_BYTES = 4.0, 20.0
FUSED_SWIGLU_BYTES, EAGER_SWIGLU_BYTES = 6.0, 10.0




@dataclass(frozen=True)
class Stack:
    """One training stack's defaults (module docstring for the sources).

    Attributes:
        name: the ``--stack`` value.
        defaults: the value of every :data:`RECIPE_SWITCHES` field on this stack.
        pads_vocab: the vocabulary is padded to a multiple of 128 x TP (Megatron
            ``--make-vocab-size-divisible-by 128``).
        layer_ops: framework calls the CPU issues per transformer layer and pass (module docstring).
        async_tp_backward: the backward TP all-reduce of the column-parallel layers runs
            asynchronously under their weight-gradient GEMMs (Megatron-LM's
            LinearWithGradAccumulationAndAsyncCommunication, since 2021).  False for BigScience's
            Megatron-DeepSpeed, whose ColumnParallelLinear reduces the input gradient synchronously
            (copy_to_tensor_model_parallel_region, bigscience-workshop/Megatron-DeepSpeed
            megatron/mpu/layers.py at 119a0d2d), and for the stacks whose TP is PyTorch's DTensor
            (torchtitan, llm-foundry): autograd's backward of each linear computes its input and
            weight gradients in one node, and the reduce-scatter of the summed input gradients (Q,
            K and V; gate and up) is issued after them, its result needed by the next node (the
            norm's backward), so no GEMM runs under it; its async TP does not fuse them either (the
            inductor pass matches matmul + reduce-scatter, and a sum of matmuls feeds each of these:
            pytorch/pytorch PR 149946, review of torch/_inductor/fx_passes/micro_pipeline_tp.py,
            2025-03-28: "only valid ...-reduce-scatter patterns in the forward graph, but not in the
            backward graph").
        pp_scatter_gather: each TP rank sends its 1/TP slice of the stage-boundary activation
            (Megatron-LM's scatter-gather optimisation, Narayanan et al. SC21 sec. 4.1).  False for
            Megatron-DeepSpeed, whose DeepSpeed pipeline engine sends the whole activation from every
            TP rank (microsoft/DeepSpeed deepspeed/runtime/pipe/engine.py ``_exec_send_activations``:
            ``p2p.send(outputs, self.next_stage)``).
        dp_overlap: the DP gradient reduction (and ZeRO's parameter gather) can overlap the backward
            when the layout's ``overlap`` is on.  False for Megatron-DeepSpeed: DeepSpeed's pipeline
            schedule reduces gradients after the last micro-batch (microsoft/DeepSpeed
            deepspeed/runtime/pipe/schedule.py, TrainSchedule.steps: ReduceTiedGrads, ReduceGrads,
            OptimizerStep at the end of the batch).
        selective_recompute: what ``--recompute selective`` re-runs: "attention" (Megatron:
            the attention core's forward, a fused kernel's too, and the other ``recompute_modules``;
            Korthikanti et al. 2022, megatron/core/transformer/attention.py) or
            "op-sac" (torchtitan's op-level selective checkpointing: every second matmul and all
            non-matmul ops, the attention kernel's output saved; pytorch/torchtitan
            torchtitan/distributed/activation_checkpoint.py, "Save output of all ops in save list,
            except every second mm").
        model_parallel: the model-parallel dimensions the stack can run (besides data and expert
            parallelism): Megatron-core, NeMo and torchtitan all of TP, PP and CP; Megatron-LM
            2021-22 and BigScience's Megatron-DeepSpeed TP and PP (context parallelism came with
            Megatron-core 0.5, 2024); llm-foundry none (Composer FSDP: its ``tp_config`` shards only
            the FFN, inputs split by batch, llmfoundry/tp/ffn_tp_strategy.py, which is not Megatron's TP
            and not priced); DeepSpeed with HF transformers ZeRO data parallelism only.
        light_last_stage: when PP does not divide the layers (VP 1), the extra layers go to the
            first stages and the last stage, which runs the logits and the loss, holds one fewer
            (Megatron-LM's --decoder-first/last-pipeline-num-layers are set that way; torchtitan's
            partitioner, distributed/pipeline_parallel.py, counts the output and the embedding as a layer
            each over the L + 2, the remainder first, so its last stage is the lighter one too, and its
            first one layer lighter than priced here); False: the
            fullest stages last, as BigScience's DeepSpeed pipeline partitioned BLOOM's 70 layers
            over 12 stages (its logs fit that split: costmodel validate, bloom_176B_tr11 rows).
        partial_recompute: full recompute can be limited to N layers per pipeline chunk (Megatron's
            ``--recompute-method block --recompute-num-layers N``, megatron/training/arguments.py;
            NeMo's ``activations_checkpoint_num_layers``).  The other stacks recompute every layer
            they checkpoint.
        sp_gather_copies: the sequence-parallel all-gathers and reduce-scatters work on the sequence
            dim of [batch, seq, hidden] activations (torchtitan's DTensor SequenceParallel, Shard(1)),
            so PyTorch's functional collectives copy the full tensor once around each: torch.cat of
            torch.chunk after the all-gather and before the reduce-scatter when the dim is not 0
            (torch/distributed/_functional_collectives.py all_gather_tensor, reduce_scatter_tensor);
            the all-gather's becomes a view for one sequence a micro-batch.  Megatron keeps
            activations [seq, batch, hidden], gathering on dim 0 without a copy.  Async TP's fused
            all-gather-matmul works on the chunks and skips them.
        tp_overlap_sm_margin: SMs the TP-communication overlap's bulk and pipelined methods reserve
            for their communication kernels while the GEMM beside them runs on the rest: 16 in
            Transformer Engine's userbuffers (transformer_engine/pytorch/module/base.py
            ``initialize_ub`` default config: ``"num_sm": 1 if method == "ring_exchange" else 16``,
            ``"set_sm_margin": not method == "ring_exchange"``; bulk for QKV's and FC1's input- and
            weight-gradient GEMMs, pipeline for the output projection's and FC2's forward); its ring
            exchange moves chunks by copy engine and reserves none.  0 for PyTorch's async TP, whose
            symmetric-memory all-gathers and reduce-scatters run on the copy engines.
        tp_overlap_rs_splits: chunks the TP-communication overlap splits a row-parallel forward GEMM
            into for its pipelined reduce-scatter: 4, Transformer Engine's ``pipeline`` default
            (transformer_engine/pytorch/module/base.py ``initialize_ub``: ``num_splits`` 4 unless
            ``ring_exchange``); 0 = one per TP rank (PyTorch's ``fused_matmul_reduce_scatter``,
            torchtitan).  costmodel.tp_overlap prices the chunking.
        fused_qkv: Q, K and V are one GEMM (Megatron's linear_qkv / query_key_value, llm-foundry's
            Wqkv: llmfoundry/models/layers/attention.py ``fused_qkv=True``).  False where the model
            code keeps three linears: torchtitan (wq, wk, wv in torchtitan/models/llama3/model.py)
            and Hugging Face transformers under DeepSpeed (q_proj, k_proj, v_proj in
            transformers/models/llama/modeling_llama.py); each is its own GEMM with its own launch
            and partial last wave.
        fused_gate_up: a gated MLP's gate and up projections are one GEMM of twice the width
            (Megatron-core's linear_fc1 with gated_linear_unit).  False for torchtitan (w1, w3, and
            the experts' w1 / w3 grouped GEMMs), Hugging Face (gate_proj, up_proj) and llm-foundry's
            MPTGLU (gate_proj beside up_proj, llmfoundry/models/layers/ffn.py).
        cp_ring_merge: context parallelism is PyTorch's experimental ring attention (torchtitan):
            eager fp32 merges of the partial outputs, fp32 gradient accumulation, fp32 key/value
            gradients on the ring (costmodel.ring_attention).  Transformer Engine's CP (Megatron,
            NeMo) corrects its outputs in fused kernels the model does not price apart.
        sequence_parallel: the stack can shard the TP group's norm and dropout activations on the
            sequence (Korthikanti et al. 2022, Megatron-LM's ``--sequence-parallel``).  False for
            BigScience's Megatron-DeepSpeed (its fork predates it: no such argument in
            bigscience-workshop/Megatron-DeepSpeed megatron/arguments.py) and DeepSpeed with HF
            transformers (no tensor parallelism).
        sp_regather_backward: with sequence parallelism the column-parallel linears (QKV, FC1) keep
            only this rank's sequence shard of their input and all-gather it again in the backward
            for the weight-gradient GEMM, asynchronously under the input-gradient GEMM
            (Megatron-core's LinearWithGradAccumulationAndAsyncCommunication.backward and Transformer
            Engine's LayerNormLinear ``ln_out_needs_gather``, NVIDIA/Megatron-LM
            megatron/core/tensor_parallel/layers.py and NVIDIA/TransformerEngine
            transformer_engine/pytorch/module/layernorm_linear.py; with TE's userbuffers overlap it
            is the bulk all-gather under the dgrad GEMM).  False for PyTorch's DTensor TP
            (torchtitan, llm-foundry): autograd saves the gathered input of each matmul (torchtitan's
            op-level SAC, which saves no all-gather output, gathers it again to recompute:
            costmodel.schedule).
        fp8_sp_gather: the fp8 scaling recipes under which the sequence-parallel all-gathers move
            fp8: the layer input is cast on this rank's shard and gathered in fp8, as are the
            row-parallel layers' output gradients in backward (costmodel.formats.sp_gather_quantized).
            Transformer Engine (megatron, nemo) for both its recipes; torchtitan for tensorwise only
            ("float8 all-gather with TP is only supported for tensorwise float8 scaling recipes. For
            rowwise recipes, we use regular TP and all-gather happens in high precision",
            torchtitan/models/llama3/infra/parallelize.py).
        zero_stages: the ZeRO stages the stack's data parallelism has, its default first where the
            Megatron default (1) is not one: torchtitan shards with FSDP2 ``fully_shard`` (3; HSDP is
            priced as FSDP over all of DP), with a pipeline keeping the parameters gathered through
            the step (``reshard_after_forward`` False, its default with PP: priced as 1, the
            gradients and states sharded), or replicates (0); llm-foundry's Composer FSDP has
            FULL_SHARD (3), SHARD_GRAD_OP (2) and NO_SHARD (0); Megatron-LM 2021-22 has DDP (0) and its
            distributed optimizer (1) but no FSDP; Megatron-core (megatron, nemo) has DDP (0), the
            distributed optimizer (1: it shards the optimizer states and reduce-scatters the gradients
            but keeps the whole gradient buffer on every rank, megatron/core/distributed
            param_and_grad_buffer.py) and FSDP (3), no ZeRO-2.
        fsdp_copies: the ZeRO-3 implementation whose memory passes around its collectives run on the
            compute stream (costmodel.fsdp_copies): 'fsdp2' (torchtitan's ``fully_shard``), 'fsdp1'
            (llm-foundry's Composer FSDP), 'deepspeed' (ZeRO-3); '' where the buffers are the
            parameters' and gradients' own storage (Megatron's distributed optimizer, Megatron-FSDP).
        pp_default_microbatches: with no micro-batch count set, a pipeline runs PP x stages-per-rank
            micro-batches, and a multi-stage (interleaved) schedule two stages per rank: torchtitan
            (torchtitan/distributed/pipeline.py ``build_pipeline_schedule``: ``if n_microbatches is
            None: n_microbatches = num_total_stages``; ``generate_split_points``: ``num_stages_per_rank
            = 2`` for a PipelineScheduleMulti), as its end-2024 benchmarks ran (commit 9dec370);
            later torchtitan configs set ``pipeline_parallel_microbatch_size`` instead (the torchtitan
            TOML reader, costmodel.run_config, reads it).  Megatron has no such default (its
            micro-batch size is an argument).
        grad_accum_bytes: HBM bytes per local parameter of the gradient accumulation pass each
            micro-batch after the first makes, at (ZeRO 0, ZeRO 1): 6 on Megatron-DeepSpeed, whose
            DeepSpeed engine (fp16/bf16, ZeRO-1 or none, gradients reduced after the last micro-batch)
            leaves the 16-bit gradients to autograd's AccumulateGrad (``param.grad += new``: read both,
            write one); on torchtitan 6 under DDP (the same, into its buckets) and 10 under ZeRO-1, its
            FSDP2 under a pipeline, which keeps the unsharded gradients of every micro-batch in the fp32
            reduce dtype (torch/distributed/fsdp/_fully_shard/_fsdp_param.py
            ``accumulate_unsharded_grad_if_needed``: ``accumulated += grad``, read 4 and 2, write 4); 0
            where the weight-gradient GEMM accumulates into the main gradient (Megatron's
            ``gradient_accumulation_fusion``, TE's ``fuse_wgrad_accumulation``) or the gradients are
            reduced every micro-batch (FSDP without a pipeline, ZeRO-2/3).
        zero3_overlap: at ZeRO-3 the DP traffic overlaps the compute whatever ``dp_overlap`` says:
            DeepSpeed prefetches ZeRO-3 parameters ahead of the module that needs them
            (``stage3_prefetch_bucket_size``, default 5e7 elements; deepspeed/runtime/zero/
            partitioned_param_coordinator.py) and its ``overlap_comm`` defaults to on at stage 3 and
            off below (deepspeed/runtime/zero/config.py ``overlap_comm_valid``: ``self.stage ==
            ZeroStageEnum.weights``), so ``dp_overlap`` (``overlap_comm``) decides ZeRO 0-2 only.
            Megatron-LM's ZeRO-3 is PyTorch FSDP2 (``--use-torch-fsdp2``), whose ``fully_shard``
            prefetches the next module's all-gather while the current one computes (implicit
            prefetching, torch/distributed/fsdp/_fully_shard) whatever ``--overlap-grad-reduce`` says.
        sharded_dp_overlap: the DP reduction of a sharded optimizer (ZeRO >= 1) may overlap the backward.
            False for Megatron-LM 2021-22, whose distributed optimizer reduces after the backward and
            whose only overlap was PyTorch DDP's (``--DDP-impl torch``, ZeRO 0).
        grads_in_model_dtype: gradients accumulated and reduced in the model's 16-bit dtype, the step giving
            the fp32 master an fp32 copy of its share: DeepSpeed (runtime/engine.py ``get_data_types``:
            ``grad_accum_dtype`` defaults to the model dtype; runtime/zero/stage_1_and_2.py ``.to(fp32)``).
        hsdp_zero_stages: the ZeRO stages the stack runs as HSDP, its sharded states replicated over
            ``dp_replicate`` groups (costmodel.layouts.shard_dp): Megatron-core's distributed optimizer
            (``--num-distributed-optimizer-instances``, parallel_state.py: the intra-instance groups
            are consecutive ranks of the DP x CP group; the gradient is reduce-scattered in them, then
            all-reduced across the instances, param_and_grad_buffer.py) on megatron and nemo, and at
            ZeRO-3 Megatron-FSDP over the same groups (distributed/fsdp/mcore_fsdp_adapter.py: HSDP
            where the instances are more than one, its outer group the inter-instance one); FSDP2's
            2-D device mesh (``data_parallel_replicate_degree`` x ``data_parallel_shard_degree``,
            torchtitan/distributed/parallel_dims.py; reduce-scatter over the shard dim then all-reduce
            over the replicate dim, torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py) on
            torchtitan, whose ZeRO-1 under a pipeline is FSDP2 too; PyTorch FSDP's ``HYBRID_SHARD`` and
            ``_HYBRID_SHARD_ZERO2`` (ZeRO 3 and 2 in the shard group, the shard's gradient all-reduced
            across the replicas, torch/distributed/fsdp/_runtime_utils.py ``_reduce_grad``; the shard
            group one node by default, _init_utils.py ``_init_intra_and_inter_node_groups``) on
            llm-foundry, whose Composer ``fsdp_config`` also takes the two degrees
            (``data_parallel_shard_degree``, ``data_parallel_replicate_degree``: composer/utils/parallelism.py).
    """

    name: str
    defaults: dict = field(hash=False)
    pads_vocab: bool = False
    layer_ops: int = EAGER_LAYER_OPS
    async_tp_backward: bool = True
    pp_scatter_gather: bool = True
    dp_overlap: bool = True
    selective_recompute: str = "attention"
    partial_recompute: bool = False
    model_parallel: tuple = ("tp", "pp", "cp")
    light_last_stage: bool = False
    sp_gather_copies: bool = False
    tp_overlap_rs_splits: int = 4
    tp_overlap_sm_margin: int = 0
    fused_qkv: bool = True
    fused_gate_up: bool = True
    cp_ring_merge: bool = False
    zero_stages: tuple = (0, 1, 2, 3)
    sequence_parallel: bool = True
    fp8_sp_gather: tuple = ()
    sp_regather_backward: bool = False
    fsdp_copies: str = ""
    grad_accum_bytes: tuple = (0.0, 0.0)
    pp_default_microbatches: bool = False
    zero3_overlap: bool = False
    sharded_dp_overlap: bool = True
    grads_in_model_dtype: bool = False
    hsdp_zero_stages: tuple = ()

    @property
    def megatron_family(self) -> bool:
        """Megatron-LM, its forks and NeMo (Megatron's vocabulary padding marks them): Megatron-LM's
        command-line arguments configure the layout."""
        return self.pads_vocab

    @property
    def flash_attention(self) -> bool:
        """Fused attention by default."""
        return self.defaults["flash_attention"]


#: MoE defaults: Megatron-core's TransformerConfig / arguments.py (``moe_token_dispatcher_type``
#: "allgather", ``moe_grouped_gemm`` False, ``moe_expert_capacity_factor`` None = dropless); NeMo's MoE
#: model configs set all-to-all dispatch, and grouped GEMM and fused permutation but for Mixtral's
#: (nemo/collections/llm/gpt/model/qwen3.py, deepseek.py, gpt_oss.py; mixtral.py sets the dispatcher
#: only; Megatron-Bridge's model bridges likewise): NeMo's default is theirs; DeepSpeed-MoE (deepspeed/moe/layer.py MoE: ``capacity_factor=1.0``,
#: ``drop_tokens=True``, tokens einsum-dispatched into fixed [experts, capacity] buffers, one GEMM per
#: local expert in its Experts loop), which BigScience's Megatron-DeepSpeed uses; torchtitan
#: (all_to_all_single dispatch, ``use_grouped_mm`` True, dropless); llm-foundry (MegaBlocks dMoE:
#: all-to-all, dropless, grouped/block-sparse expert GEMMs).  ``moe_permute_fusion``: Megatron-core's
#: default is off (TransformerConfig), its unfused permutation an atomic PyTorch scatter-add each way;
#: DeepSpeed-MoE's einsum dispatch and MegaBlocks' gather/scatter kernels add no atomics, and
#: torchtitan's scatter-add runs PyTorch's deterministic (sort-based) kernel, which the measured
#: atomic rate does not describe: on for those.  ``moe_router_fusion``: off in Megatron-core's TransformerConfig and
#: Megatron-Bridge's H100 library recipes (recipes/*/h100: ``moe_router_fusion = False``; its perf_recipes: on)
_MOE_MEGATRON = dict(moe_dispatcher="allgather", moe_grouped_gemm=False, moe_capacity_factor=0.0,
                     moe_pad_to_capacity=False, moe_expert_load_cv=0.0, moe_permute_fusion=False, moe_ep_overlap=False,
                     moe_router_fusion=False)
_MOE_DEEPSPEED = dict(moe_dispatcher="alltoall", moe_grouped_gemm=False, moe_capacity_factor=1.0,
                      moe_pad_to_capacity=True, moe_expert_load_cv=0.0, moe_permute_fusion=True, moe_ep_overlap=False,
                      moe_router_fusion=False)
_MOE_DROPLESS_GROUPED = dict(moe_dispatcher="alltoall", moe_grouped_gemm=True, moe_capacity_factor=0.0,
                             moe_pad_to_capacity=False, moe_expert_load_cv=0.0, moe_permute_fusion=True, moe_ep_overlap=False,
                             moe_router_fusion=False)


def _stack(name, flash, tp_overlap, dp_overlap, optimizer, cross_entropy, pads_vocab, moe, dims=("tp", "pp", "cp")):
    # every stack's default kernel is FlashAttention-2: flash-attn 2.x / SDPA's flash backend; the
    # Megatron family (vocabulary padding) runs fused TE modules, the others eager PyTorch blocks
    return Stack(name, dict(flash_attention=flash, tp_comm_overlap=tp_overlap, dp_overlap=dp_overlap,
                            pp_overlap=name in ("megatron", "nemo"), optimizer=optimizer,
                            fp8_recipe="tensorwise" if name == "torchtitan" else "delayed",
                            fp8_param_gather=name == "nemo",     # NeMo 2's fp8 precision plugins set it
                            cross_entropy=cross_entropy, attention_kernel="fa2", recompute_modules="core_attn",
                            main_grads_dtype="fp32", optimizer_states_dtype="fp32", optimizer_offload=False,
                            fused_elementwise=name not in ("torchtitan", "deepspeed"), bf16_edge_layers=0, doc_tokens=0, kv_repeat=False,
                            **moe), pads_vocab,
                 FUSED_LAYER_OPS if pads_vocab else EAGER_LAYER_OPS, pads_vocab and name != "megatron-deepspeed",
                 *(2 * (name != "megatron-deepspeed",)),
                 "op-sac" if name == "torchtitan" else "attention", pads_vocab, tuple(dims),
                 (pads_vocab and name != "megatron-deepspeed") or name == "torchtitan", sp_gather_copies=name == "torchtitan",
                 tp_overlap_rs_splits=0 if name == "torchtitan" else 4, tp_overlap_sm_margin=16 if name in TE_STACKS else 0,
                 fused_qkv=name not in ("torchtitan", "deepspeed"), fused_gate_up=pads_vocab, cp_ring_merge=name == "torchtitan",
                 zero_stages={"torchtitan": (3, 0, 1), "llm-foundry": (3, 2, 0), "megatron": (0, 1, 3),
                              "nemo": (0, 1, 3), "megatron-legacy": (0, 1)}.get(name, (0, 1, 2, 3)),
                 sequence_parallel=name not in ("megatron-deepspeed", "deepspeed"),
                 fp8_sp_gather={"megatron": ("delayed", "tensorwise"), "nemo": ("delayed", "tensorwise"),
                                "torchtitan": ("tensorwise",)}.get(name, ()),
                 sp_regather_backward=name in ("megatron", "megatron-legacy", "nemo"),
                 fsdp_copies={"torchtitan": "fsdp2", "llm-foundry": "fsdp1", "deepspeed": "deepspeed",
                              "megatron-deepspeed": "deepspeed"}.get(name, ""),
                 grad_accum_bytes={"megatron-deepspeed": (6.0, 6.0), "torchtitan": (6.0, 10.0)}.get(name, (0.0, 0.0)),
                 pp_default_microbatches=name == "torchtitan", zero3_overlap=name in ("deepspeed", "megatron"),
                 sharded_dp_overlap=name != "megatron-legacy", grads_in_model_dtype=name == "deepspeed",
                 hsdp_zero_stages={"megatron": (1, 3), "nemo": (1, 3), "torchtitan": (1, 3),
                                   "llm-foundry": (2, 3)}.get(name, ()))


STACKS = {s.name: s for s in (
    _stack("megatron", True, False, False, "adam", "megatron", True, _MOE_MEGATRON),
    _stack("megatron-legacy", False, False, False, "adam", "megatron", True, _MOE_MEGATRON, ("tp", "pp")),
    _stack("megatron-deepspeed", False, False, False, "adam", "megatron", True, _MOE_DEEPSPEED, ("tp", "pp")),
    _stack("nemo", True, True, True, "adam", "megatron-fused", True, _MOE_DROPLESS_GROUPED),
    _stack("torchtitan", True, False, True, "adamw", "eager", False, _MOE_DROPLESS_GROUPED),
    _stack("llm-foundry", True, False, True, "adamw", "fused", False, _MOE_DROPLESS_GROUPED, ()),
    _stack("deepspeed", True, False, False, "adamw", "eager", False, _MOE_DEEPSPEED, ()),
)}


#: GPU generations (costmodel.model_error.generation) no fused-attention kernel runs on: FlashAttention
#: supports Turing, Ampere, Ada and Hopper (Dao-AILab/flash-attention README; FA2 needs Ampere or
#: newer) and Transformer Engine's fused attention sm80+; Volta keeps Megatron's unfused attention
NO_FUSED_ATTENTION = ("volta",)


#: Megatron-core's ``--attention-backend`` values (megatron/core/transformer/enums.py AttnBackend) as switches:
#: ``flash`` TE's FlashAttention backend (flash-attn 2; 3 where installed on Hopper), ``fused`` its cuDNN
#: FusedAttention, ``unfused`` and ``local`` no fused kernel, ``auto`` TE's own pick (the stack's default)
MEGATRON_ATTENTION_BACKENDS = {"flash": {"flash_attention": True, "attention_kernel": "fa2"},
                               "fused": {"flash_attention": True, "attention_kernel": "cudnn"},
                               "unfused": {"flash_attention": False}, "local": {"flash_attention": False},
                               "auto": {"flash_attention": True}}


def attention_backend_switches(value) -> dict | None:
    """The switches of a Megatron-core attention backend (``flash``, ``AttnBackend.fused``, ...; :data:`MEGATRON_ATTENTION_BACKENDS`), or None."""
    return MEGATRON_ATTENTION_BACKENDS.get(str(value).rsplit(".", 1)[-1].strip().lower())


#: GPU generations on which Transformer Engine runs its cuDNN FusedAttention rather than FlashAttention
#: (transformer_engine/pytorch/attention/dot_product_attention/utils.py get_attention_backend, since TE v1.2:
#: "FusedAttention preference on Hopper+"), each priced from cuDNN's own kernel times on that generation (H100:
#: the FlashAttention-3 paper's cuDNN bars; Blackwell: cuDNN 9.19.1 on a GB200, cudnn-frontend's benchmark;
#: hardware/profiles/data/flash_attention_kernel_times_h100_b200.md).
TE_CUDNN_GENERATIONS = ("hopper", "blackwell")


def te_prefers_cudnn(stack: Stack, gpu) -> bool:
    """Whether ``stack`` runs Transformer Engine's cuDNN fused attention by default on ``gpu`` (a
    costmodel.specs.GpuSpec; :data:`TE_CUDNN_GENERATIONS` by its architecture; TE stacks only)."""
    from .model_error import generation
    return stack.name in TE_STACKS and generation(gpu) in TE_CUDNN_GENERATIONS


def stack_recipe(stack: Stack | str, gbs: int, seq_len: int, precision: str, gpu=None, **switches) -> Recipe:
    """The recipe of a run on ``stack`` (a :class:`Stack` or its name): the switches the caller gives
    (None = not given), the stack's defaults for the rest.  On a GPU of :data:`NO_FUSED_ATTENTION`
    (``gpu``, a costmodel.specs.GpuSpec or a catalog GPU's name, by its architecture) the stack's
    flash-attention default gives way to unfused attention; on a GPU where Transformer Engine prefers
    cuDNN (:func:`te_prefers_cudnn`) a TE stack's kernel is cuDNN's.

    Raises:
        InputError: a bad recipe value (costmodel.specs.Recipe), an attention kernel named for
            unfused attention, ``flash_attention`` asked for on a GPU no fused kernel runs on, a
            precision the GPU's tensor cores do not run (costmodel.formats), an ``fp8_recipe``
            given with a precision other than fp8, FP8/FP4 precision or TP-communication overlap
            on a stack that predates Transformer Engine (:data:`PRE_TE_MEGATRON_STACKS`), fp16 on
            torchtitan, or torchtitan's async TP without its compiled (fused) elementwise ops.
        InputError: an unknown stack or GPU name (:func:`get_stack`, costmodel.specs.load_gpu).
        TypeError: a keyword that is not one of :data:`RECIPE_SWITCHES`, a ``stack`` or ``gpu`` of another type.
    """
    from .formats import check_format_on_gpu
    from .model_error import generation
    from .specs import GpuSpec, load_gpu
    stack = get_stack(stack, "stack") if isinstance(stack, str) else stack
    gpu = load_gpu(gpu) if isinstance(gpu, str) else gpu
    if not isinstance(stack, Stack) or not (gpu is None or isinstance(gpu, GpuSpec)):
        raise TypeError(f"stack_recipe takes a Stack (or its name) and a GpuSpec (or its name, or None), got "
                        f"{type(stack).__name__} and {type(gpu).__name__}")
    if gpu is not None:
        check_format_on_gpu(precision, gpu)
    if gpu is not None and generation(gpu) in NO_FUSED_ATTENTION:
        if switches.get("flash_attention") or switches.get("attention_kernel") is not None:
            flag = "--flash-attention" if switches.get("flash_attention") else "--attention-kernel"
            raise InputError(flag, "", f"no fused-attention kernel runs on {gpu.name} ({generation(gpu)}): "
                             "FlashAttention needs Turing or newer (FA2 Ampere), Transformer Engine's fused "
                             "attention sm80+; drop the flag (unfused attention is the default there)")
        switches = dict(switches, flash_attention=False)
    known = {w.name for w in RECIPE_SWITCHES}
    unknown = set(switches) - known
    if unknown:
        raise TypeError(f"not recipe switches: {', '.join(sorted(unknown))}")
    values = {k: (switches[k] if switches.get(k) is not None else stack.defaults[k]) for k in known}
    given = {k for k in known if switches.get(k) is not None}
    if "attention_kernel" not in given and gpu is not None and te_prefers_cudnn(stack, gpu):
        values["attention_kernel"] = "cudnn"
    # a stack's capacity default belongs to its all-to-all dispatch: a dispatcher or a dropless
    # capacity the caller gives takes the dependent defaults with it
    if "moe_capacity_factor" not in given and ("moe_dispatcher" in given and values["moe_dispatcher"] != "alltoall"):
        values["moe_capacity_factor"] = 0.0
    # (a capacity factor runs under every dispatcher: Megatron-core dropped its alltoall-only check with
    # DeepEP's integration, NVIDIA/Megatron-LM 0d389f5, 2025-02; the router drops the tokens)
    if "moe_pad_to_capacity" not in given and (values["moe_capacity_factor"] == 0.0 or values["moe_dispatcher"] == "flex"):
        values["moe_pad_to_capacity"] = False
    if values.get("bf16_edge_layers") and stack.name not in TE_STACKS:
        raise InputError("--bf16-edge-layers", "", f"is Megatron-core's --first-last-layers-bf16 (the megatron and nemo "
                         f"stacks); the {stack.name} stack has no such switch, so no run of it can be priced with one")
    if values["fp8_param_gather"] and "fp8_param_gather" in given and precision != "fp8":
        raise InputError("--fp8-param-gather", "", f"keeps the parameters of --precision fp8 in fp8, not {precision}'s "
                         "(the priced fp8 parameters are per-tensor scaled): drop one of the two")
    if "fp8_recipe" in given and precision != "fp8":
        raise InputError("--fp8-recipe", "", f"sets the scaling of --precision fp8, not {precision} "
                         "(mxfp8 and nvfp4 carry their own block scales): drop one of the two")
    if stack.name == "torchtitan" and values["tp_comm_overlap"]:
        # torchtitan's async TP runs only under torch.compile of the model (config/configs.py: "Async TP
        # requires 'model' in --compile.components and --compile.enable"), whose kernels are fused
        if "fused_elementwise" in given and not values["fused_elementwise"]:
            raise InputError("--fused-elementwise/--tp-comm-overlap", "", "torchtitan's async TP runs only under "
                             "torch.compile, which fuses the elementwise ops: drop one of the two")
        values["fused_elementwise"] = True
    if stack.name == "torchtitan" and precision == "fp16":
        # torchtitan/config/configs.py: mixed_precision_param: Literal["bfloat16", "float32"]
        raise InputError("--precision", "", "fp16: torchtitan trains in bfloat16 (its mixed_precision_param takes "
                         "bfloat16 or float32): bf16, or fp8 (its float8 converter)")
    if stack.name in PRE_TE_MEGATRON_STACKS and precision not in ("bf16", "fp16"):
        raise InputError("--precision", "", f"{precision}: the {stack.name} stack predates Transformer Engine's "
                         "low-precision training (bf16 or fp16 there): --stack megatron runs it")
    if stack.name in PRE_TE_MEGATRON_STACKS and values["tp_comm_overlap"]:
        raise InputError("--tp-comm-overlap", "", f"is Transformer Engine's userbuffer overlap, which the {stack.name} "
                         "stack predates: --stack megatron runs it")
    if switches.get("attention_kernel") == "cudnn" and stack.name in PRE_TE_MEGATRON_STACKS:
        raise InputError("--attention-kernel", "", f"cudnn is Transformer Engine's fused attention; the {stack.name} "
                         "stack runs flash-attn (--use-flash-attn) or unfused attention: name fa2, or --stack megatron")
    if switches.get("attention_kernel") is not None and not values["flash_attention"]:
        raise InputError("--attention-kernel", "", "names a fused-attention kernel, but the recipe runs unfused "
                         "attention (--no-flash-attention or the stack's default): drop one of the two")
    check_stack_switches(stack, switches, values)
    return Recipe(gbs=gbs, seq_len=seq_len, precision=precision, stack=stack.name, **values)


def dp_overlap_on(recipe: Recipe, zero, overlap):
    """Whether the DP gradient reduction and ZeRO parameter gathers of a layout may hide under
    compute: ``zero`` (ZeRO stage) and ``overlap`` (the layout's switch) are scalars or equal-length
    arrays, and so is the answer (bool).  On when the layout overlaps at all, the stack can
    (:attr:`Stack.dp_overlap`) and the recipe's ``dp_overlap`` is on, or the stage is ZeRO-3 on a
    stack that overlaps it regardless (:attr:`Stack.zero3_overlap`: DeepSpeed).
    """
    st = get_stack(recipe.stack)
    want = np.logical_or(recipe.dp_overlap, st.zero3_overlap & (np.asarray(zero) == 3))
    if not st.sharded_dp_overlap:          # only its DDP (ZeRO 0) overlaps
        want = np.logical_and(want, np.asarray(zero) == 0)
    return np.logical_and(np.asarray(overlap, dtype=bool), st.dp_overlap & want)


def switch_values(recipe: Recipe) -> dict:
    """Every recipe switch (:data:`RECIPE_SWITCHES`) -> its value in ``recipe``, for reports; a switch
    the recipe does not read is None: ``fp8_recipe`` outside fp8, ``attention_kernel`` under unfused
    attention (as ``predict --json`` reports it); ``main_grads_dtype`` is fp16 under fp16 training,
    whose gradients are reduced in fp16 (costmodel.stage_params.grad_bytes)."""
    out = {w.name: getattr(recipe, w.name) for w in RECIPE_SWITCHES}
    if recipe.precision == "fp16":
        out["main_grads_dtype"] = "fp16"
    if recipe.precision != "fp8":
        out["fp8_recipe"] = None
    if not recipe.flash_attention:
        out["attention_kernel"] = None
    return out


def get_stack(name: str, where: str = "--stack") -> Stack:
    """The :class:`Stack` called ``name``.

    Raises:
        InputError: an unknown name (naming ``where`` and the known stacks).
    """
    try:
        return STACKS[name]
    except KeyError:
        raise InputError(where, "", f"{name!r} is not one of {', '.join(STACKS)}") from None
