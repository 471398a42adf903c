"""The training recipe: global batch, sequence length, precision and the recipe-level switches."""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass, fields, replace

import numpy as np

from ..errors import InputError
from ..formats import FORMATS, FP8_RECIPE_STACKS, FP8_RECIPES


def gemm_format_low(precision: str) -> bool:
    """Below 16 bits (costmodel.formats)."""
    return FORMATS[precision].low

PRECISIONS = tuple(FORMATS)      # costmodel/formats.py: bf16, fp16, fp8, mxfp8, nvfp4
_MAX_COUNT = 2 ** 53


@dataclass(frozen=True)
class OptimizerSpec:
    """What an optimizer keeps per parameter besides the fp32 master weight (mixed precision,
    Micikevicius et al. 2018), and where that comes from.

    Attributes:
        name: the ``--optimizer`` value.
        fp32_states: fp32 state tensors of the parameter's shape.
        source: the algorithm's paper (which states it keeps).
    """

    name: str
    fp32_states: int
    source: str


#: the optimizers a recipe may name
OPTIMIZERS = {o.name: o for o in (
    OptimizerSpec("adam", 2, "Kingma & Ba, ICLR 2015: first and second moments m, v"),
    OptimizerSpec("adamw", 2, "Loshchilov & Hutter, ICLR 2019: Adam's m, v with decoupled weight decay"),
    OptimizerSpec("lionw", 1, "Chen et al., 'Symbolic Discovery of Optimization Algorithms', NeurIPS 2023: "
                              "one momentum (the update is its sign); llm-foundry's DecoupledLionW"),
    OptimizerSpec("sgd", 1, "SGD with momentum (Polyak 1964; torch.optim.SGD momentum_buffer)"),
    OptimizerSpec("adafactor", 0, "Shazeer & Stern, ICML 2018: no first moment (beta1 = 0) and the second "
                                  "moment factored into row and column vectors, (n + m) / (n m) of a matrix: "
                                  "counted as 0 full-size states"),
)}


@dataclass(frozen=True)
class CrossEntropySpec:
    """How a cross-entropy implementation holds the logits (tokens x vocab / TP per micro-batch).

    Attributes:
        name: the ``--cross-entropy`` value.
        bytes_per_logit: bytes per logit element alive at the loss's memory peak.
        full_logits: False when the logits are never materialised for the whole micro-batch.
        source: the implementation this describes.
        pass_bytes: (forward, backward) HBM bytes per logit element its kernels read and write
            (:data:`_CE_PASSES`, counted in the implementation's code).
        kernels: (forward, backward) kernels over the logits (each at least a launch).
    """

    name: str
    bytes_per_logit: float
    full_logits: bool
    source: str
    pass_bytes: tuple = (0.0, 0.0)
    kernels: tuple = (0, 0)


#: HBM passes each cross-entropy makes over the logits: ((forward, backward) bytes per logit, (forward,
#: backward) kernels), each op reading its inputs and writing its outputs once (as costmodel.stacks'
#: EAGER_NORM_BYTES), counted in the implementations' code:
#: * eager (PyTorch F.cross_entropy on logits.float()): the upcast (read 2, write 4) and log_softmax
#:   (4 + 4); backward nll_loss's zeroed gradient (4), log_softmax's backward (4 + 4 + 4), the downcast (4 + 2).
#: * megatron (megatron/core/tensor_parallel/cross_entropy.py): the upcast (2 + 4), max (4), subtract,
#:   exp and divide in place (4 + 4 each), sum (4); backward the in-place scale (4 + 4), the downcast (4 + 2).
#: * megatron-fused (megatron/core/fusions/fused_cross_entropy.py, the native implementation): upcast with
#:   max (2 + 4), subtract-exp-sum (4 + 4), divide (4 + 4); backward the gradient with its downcast (4 + 2).
#: * fused (flash-attn's, llm-foundry's; Transformer Engine's Triton kernel reads the logits once more in
#:   the forward): one read (2); backward a read and the in-place gradient (2 + 2).
#: * chunked (Liger-Kernel): each chunk read and its gradient written in place in the forward (2 + 2).
_CE_PASSES = {"eager": ((14.0, 22.0), (3, 4)), "megatron": ((38.0, 14.0), (6, 2)),
              "megatron-fused": ((22.0, 6.0), (3, 1)), "fused": ((2.0, 4.0), (1, 1)), "chunked": ((4.0, 0.0), (1, 0))}

#: the cross-entropy implementations a recipe may name
CROSS_ENTROPIES = {c.name: replace(c, pass_bytes=_CE_PASSES[c.name][0], kernels=_CE_PASSES[c.name][1]) for c in (
    CrossEntropySpec("eager", 10.0, True, "PyTorch F.cross_entropy on logits upcast to fp32 (HF transformers, "
                     "torchtitan): bf16 logits 2 + fp32 log-softmax 4 + its fp32 gradient 4 bytes"),
    CrossEntropySpec("megatron", 6.0, True, "Megatron-core vocab_parallel_cross_entropy: fp32 exp-logits kept "
                     "(4 bytes), the gradient computed in place, bf16 logits (2) alive beside them"),
    CrossEntropySpec("megatron-fused", 6.0, True, "Megatron-core's --cross-entropy-loss-fusion, its native jit-fused "
                     "implementation: the fp32 exp-logits kept as unfused"),
    CrossEntropySpec("fused", 2.0, True, "a fused kernel writing the gradient into the bf16 logits in place "
                     "(flash-attn CrossEntropyLoss inplace_backward, llm-foundry's fused_crossentropy; "
                     "Megatron --cross-entropy-loss-fusion --cross-entropy-fusion-impl te)"),
    CrossEntropySpec("chunked", 0.0, False, "fused linear + cross-entropy over token chunks (Liger-Kernel "
                     "LigerFusedLinearCrossEntropyLoss): a chunk's logits only, counted as 0 full logits"),
)}


#: the cross-entropies Megatron-core runs -> (cross_entropy_loss_fusion, cross_entropy_fusion_impl):
#: its vocab-parallel loss, unfused or with --cross-entropy-loss-fusion, native (its default,
#: megatron/core/model_parallel_config.py) or Transformer Engine's kernel (te)
MEGATRON_CROSS_ENTROPIES = {"megatron": (False, None), "megatron-fused": (True, "native"), "fused": (True, "te")}


def megatron_cross_entropy(loss_fusion: bool, fusion_impl=None) -> str:
    """The ``--cross-entropy`` that Megatron-core's ``cross_entropy_loss_fusion`` and
    ``cross_entropy_fusion_impl`` (None: its default, native) run (:data:`MEGATRON_CROSS_ENTROPIES`)."""
    return ("fused" if fusion_impl == "te" else "megatron-fused") if loss_fusion else "megatron"


#: fused-attention kernels a recipe may name (each profile fits the ones measured on its GPU)
ATTENTION_KERNELS = {
    "fa1": "FlashAttention (v1, Dao et al. 2022; flash-attn 1.x), no Hopper-specific path",
    "fa2": "FlashAttention-2 (Dao 2023; flash-attn 2.x, PyTorch SDPA's flash backend), any GPU from Ampere",
    "fa3": "FlashAttention-3 (Shah et al. 2024; flash-attn 3.x hopper/), Hopper only",
    "fa4": "FlashAttention-4 (flash-attn 4.x CuTe DSL), Blackwell only",
    "cudnn": "cuDNN fused attention (Transformer Engine's FusedAttention, F16_arbitrary_seqlen), any GPU from Ampere",
}

#: head dims each fused-attention kernel is compiled for: a head dim between two runs as the next
#: one, computing (and wasting) the padding.  Sources (Dao-AILab/flash-attention):
#: fa1: v1.0.9 csrc/flash_attn/src/fmha_{fwd,bwd}_hdim{32,64,128}.cu (fmha_api.cpp: head_size % 8 == 0 and <= 128);
#: fa2: csrc/flash_attn/src/static_switch.h HEADDIM_SWITCH (32, 64, 96, 128, 192, 256);
#: fa3: hopper/flash_api.cpp round_up_headdim (64, 96, 128, 192, 256; the value head dim rounds alike);
#: fa4: flash_attn/cute/interface.py _validate_head_dims on SM100 (multiples of 8 up to 128, DeepSeek's
#: 192 with a value head dim of 128, and 256).  cudnn: multiples of 8 up to 256 on Hopper and newer, d_qk 192 with
#: d_v 128 included (cuDNN frontend docs, operations/Attention, support matrix; Transformer Engine requires
#: head dims divisible by 8 for FusedAttention).
ATTENTION_HEAD_DIMS = {"fa1": (32, 64, 128), "fa2": (32, 64, 96, 128, 192, 256), "fa3": (64, 96, 128, 192, 256),
                       "fa4": tuple(range(8, 129, 8)) + (192, 256), "cudnn": tuple(range(8, 257, 8))}


#: kernels that run only the head dims they list, with no padding: cuDNN's fused attention takes head dims
#: that are multiples of 8 (Transformer Engine's FusedAttention, its caller, is then disabled and TE falls
#: back to unfused attention: TE get_attention_backend, where FlashAttention-2 too needs "padded head_dim %8 = 0")
UNPADDED_KERNELS = ("cudnn",)


def kernel_head_dim(kernel: str, head_dim: float) -> int:
    """The head dim fused-attention ``kernel`` runs ``head_dim`` at: the smallest it is compiled for that is
    at least ``head_dim`` (:data:`ATTENTION_HEAD_DIMS`); the head dim itself for :data:`UNPADDED_KERNELS`.

    Raises:
        ValueError: ``head_dim`` is above the kernel's largest (FlashAttention v1 stops at 128), or is not
            one an unpadded kernel runs.
    """
    dims = ATTENTION_HEAD_DIMS[kernel]
    if kernel in UNPADDED_KERNELS and head_dim <= dims[-1] and head_dim not in dims:
        raise ValueError(f"{kernel} runs head dims that are multiples of {dims[0]} up to {dims[-1]}, not "
                         f"{head_dim:g} (Transformer Engine then falls back to unfused attention)")
    for d in dims:
        if head_dim <= d:
            return d
    raise ValueError(f"{kernel} runs head dims up to {dims[-1]}, not {head_dim:g}")


#: submodules Megatron-core's selective recomputation can re-run (``--recompute-modules``,
#: megatron/core/transformer/transformer_config.py ``recompute_modules``; default ``core_attn``):
#: "moe_act", "layernorm" and "mla_up_proj" discard their outputs and recompute them, the others
#: checkpoint the whole submodule, keeping only its input
RECOMPUTE_MODULES = {
    "core_attn": "the attention core (scores, softmax, context)",
    "moe_act": "the routed experts' activation function (its output, FC2's input, is not kept)",
    "layernorm": "the pre-MLP norm of MoE layers (the input norm and the dense pre-MLP norm are fused into TE "
                 "linear layers, where there is nothing to recompute)",
    "mla_up_proj": "MLA's Q and KV up-projections and RoPE (the latents are kept)",
    "mlp": "the dense MLP (dense layers only)",
    "moe": "the whole MoE layer, its dispatch and combine included",
    "shared_experts": "the shared experts of MoE layers",
}


def recompute_modules_problem(model, modules) -> str | None:
    """Why a ``--recompute-modules`` list names a module ``model`` does not have (MoE modules on a dense
    model, MLA's up-projections without MLA, shared experts without any, the dense MLP of a model
    whose every layer is MoE), or None: recomputing it would change nothing."""
    has = {"moe_act": model.is_moe, "layernorm": model.is_moe, "moe": model.is_moe,
           "shared_experts": bool(model.shared_ffn_hidden), "mla_up_proj": model.is_mla,
           "mlp": model.moe_layer_fraction < 1}
    bad = [m for m in modules if not has.get(m, True)]
    return (f"{', '.join(bad)}: {model.name} has no such module ({'; '.join(RECOMPUTE_MODULES[m] for m in bad)})"
            if bad else None)


def recompute_module_list(value: str, flag: str = "--recompute-modules") -> tuple[str, ...]:
    """The module names of a ``--recompute-modules`` value (comma- or space-separated).

    Raises:
        InputError: an empty list, an unknown name or a repeated one (naming ``flag``).
    """
    names = tuple(x for x in str(value).replace(",", " ").split() if x)
    if not names:
        raise InputError(flag, "", f"names no module (known: {', '.join(RECOMPUTE_MODULES)})")
    for x in names:
        if x not in RECOMPUTE_MODULES:
            shown = x if len(x) <= 60 else x[:57] + "..."
            raise InputError(flag, "", f"{shown!r} is not one of {', '.join(RECOMPUTE_MODULES)}")
    if len(set(names)) != len(names):
        raise InputError(flag, "", f"{value!r} names a module twice")
    return names


#: dtypes of the main gradients and of the optimizer states (Megatron-core OptimizerConfig)
STATE_DTYPES = ("fp32", "bf16")

#: MoE token dispatchers a recipe may name (Megatron-core ``--moe-token-dispatcher-type``)
MOE_DISPATCHERS = {
    "alltoall": "all-to-all of the routed tokens over EP (Megatron-core MoEAlltoAllTokenDispatcher; "
                "torchtitan, MegaBlocks and DeepSpeed-MoE dispatch the same way)",
    "allgather": "all-gather of the hidden states over the EP x ETP group, each rank keeping its experts' "
                 "tokens, and a reduce-scatter back (Megatron-core MoEAllGatherTokenDispatcher)",
    "flex": "DeepEP's normal dispatch/combine kernels: NVLink forwarding inside a node, each token sent "
            "once per destination node over RDMA (Megatron-core MoEFlexTokenDispatcher)",
}
#: dispatcher names of Megatron-core the model prices as another: alltoall_seq (the all-to-all
#: dispatcher over a sequence-sharded input, MoEAlltoAllSEQTokenDispatcher) moves the same tokens
MOE_DISPATCHER_ALIASES = {"alltoall_seq": "alltoall"}


def megatron_capacity_factor(v) -> float:
    """Megatron-core's ``moe_expert_capacity_factor`` as a recipe's ``moe_capacity_factor``: None or
    below 0 is dropless, 0 (its TransformerConfig sets a negative factor to None), else the factor.

    Raises:
        ValueError: a value that is not a finite number (a bool, a string, NaN, inf).
    """
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ValueError(v)
    return max(float(v), 0.0)


@dataclass(frozen=True)
class Recipe:
    """The training recipe: global batch (sequences), sequence length (tokens), precision.

    The field defaults below are no stack's own: a run of a stack takes that stack's defaults (and
    its GPU's attention kernel) from ``costmodel.stacks.stack_recipe(get_stack(name), gbs, seq_len,
    precision, gpu=cluster.gpu, **switches)``, as every command does; ``stack`` here only names it.
    Raises :class:`costmodel.errors.InputError` (naming the CLI flag of the field) for a value of the
    wrong kind or outside its choices.

    ``optimizer`` names one of :data:`OPTIMIZERS`, kept with fp32 master weights (Megatron-LM mixed
    precision; Adam by default); ``stack`` names the training stack whose defaults the recipe took
    (costmodel.stacks; it selects the regime of the model-form error); ``fp8_recipe`` (delayed |
    tensorwise | rowwise, :data:`costmodel.formats.FP8_RECIPES`) is where an ``fp8`` precision's
    scales come from: the amax history, or the tensor itself at one more read, or each row of it along
    both axes (torchao's axis-wise scaling, torchtitan only); ``flash_attention``
    False models the unfused attention of pre-2022 Megatron (softmax materialised, s^2 memory);
    ``tp_comm_overlap`` False models Megatron before Transformer Engine's userbuffers (2023), where
    only the backward input-gradient TP collectives overlap (async all-reduce); ``dp_overlap`` overlaps
    the DP gradient reduction (and the distributed optimizer's parameter gather) with the backward
    (forward) in buckets (Megatron ``--overlap-grad-reduce`` / ``--overlap-param-gather``; PyTorch
    DDP's bucketed hooks); ``pp_overlap`` runs the interleaved schedule's stage-boundary sends and
    receives asynchronously under the compute of the next virtual stage (Megatron-core
    ``overlap_p2p_comm``, which it forces off without VP; costmodel.schedule); ``cross_entropy``
    names one of :data:`CROSS_ENTROPIES`, how the loss holds the logits; ``attention_kernel`` one
    of :data:`ATTENTION_KERNELS` (used with ``flash_attention``).  MoE models only:
    ``moe_dispatcher`` names one of :data:`MOE_DISPATCHERS`; ``moe_grouped_gemm`` runs the local
    experts as one grouped GEMM (False: one GEMM per expert, Megatron's SequentialMLP);
    ``moe_capacity_factor`` caps each expert at that multiple of its mean token count, dropping the
    rest (0: dropless, Megatron's default); ``moe_pad_to_capacity`` pads every expert to its capacity
    (``--moe-pad-expert-input-to-capacity``; needs a capacity factor); ``moe_expert_load_cv`` is the
    measured coefficient of variation of the per-expert token load (0: uniform routing, the
    balls-into-bins floor; costmodel.moe); ``moe_permute_fusion`` permutes the tokens with fused
    kernels (Megatron's ``--moe-permute-fusion``, Transformer Engine's); False is Megatron-core's
    unfused PyTorch path, one atomic scatter-add pass per direction (costmodel.moe).  ``moe_router_fusion``
    runs the router's elementwise work as Transformer Engine's fused kernels (``--moe-router-fusion``;
    fewer small kernels, costmodel.moe.router_kernels).  ``moe_ep_overlap``
    runs Megatron-core's batch-level EP overlap (``--overlap-moe-expert-parallel-comm
    --delay-wgrad-compute``): the forward of one micro-batch and the backward of another as one
    schedule, each one's dispatch and combine under the other's compute (costmodel.schedule).
    ``fp8_param_gather`` keeps the parameters in fp8 under ``precision`` fp8 on the Megatron family
    (``--fp8-param-gather``; costmodel.memory.fp8_weight_bytes_per_layer; no effect in 16 bits).
    ``recompute_modules``: what selective recomputation re-runs
    on Megatron-family stacks, :data:`RECOMPUTE_MODULES` names separated by commas.
    ``optimizer_offload`` keeps the optimizer states and master weights in host memory and runs the step
    on the CPU (DeepSpeed ZeRO-Offload, ``offload_optimizer: {device: cpu}``; Ren et al., USENIX ATC
    2021).  ``fused_elementwise`` False runs RMSNorm, the rotary embedding and SwiGLU as eager PyTorch op
    sequences (costmodel.stacks.EAGER_NORM_BYTES and its neighbours).
    ``main_grads_dtype`` (fp32 | bf16) is the dtype of the gradients accumulated and reduced over DP
    (fp16 recipes keep fp16 gradients whatever it says); ``optimizer_states_dtype`` bf16 is Megatron's
    precision-aware optimizer (``--use-precision-aware-optimizer --exp-avg-dtype bf16
    --exp-avg-sq-dtype bf16``): the states in bf16 and the fp32 master weight stored as the 16 bits
    the bf16 weight lacks (``store_param_remainders``, on by default; megatron/core/optimizer/
    optimizer_config.py).  ``doc_tokens`` > 0: each sequence packs documents of that many tokens,
    each attending to itself only (packed sequences: FlashAttention's variable-length kernels,
    Megatron-core and NeMo packed sequences with cu_seqlens); 0: a sequence is one document.
    ``kv_repeat`` repeats GQA's K and V heads to the query heads before the attention kernel, as
    torchtitan did until pytorch/torchtitan#2259 (2026-01-27, ``repeat_kv`` in its Llama attention) and
    Hugging Face's eager and SDPA attention do without ``enable_gqa``: the copy costs HBM traffic each way,
    the kernel's saved inputs and a context-parallel ring's rotated blocks grow by the repeat factor
    (:meth:`costmodel.specs.model.ModelSpec.attention_kv_width`).
    """

    gbs: int
    seq_len: int
    precision: str = "bf16"
    fp8_recipe: str = "delayed"
    fp8_param_gather: bool = False
    flash_attention: bool = True
    tp_comm_overlap: bool = False
    dp_overlap: bool = True
    pp_overlap: bool = False
    optimizer: str = "adam"
    stack: str = "megatron"
    cross_entropy: str = "megatron"
    attention_kernel: str = "fa2"
    moe_dispatcher: str = "alltoall"
    moe_grouped_gemm: bool = True
    moe_capacity_factor: float = 0.0
    moe_pad_to_capacity: bool = False
    moe_permute_fusion: bool = True
    moe_ep_overlap: bool = False
    moe_router_fusion: bool = False
    moe_expert_load_cv: float = 0.0
    recompute_modules: str = "core_attn"
    fused_elementwise: bool = True
    optimizer_offload: bool = False
    main_grads_dtype: str = "fp32"
    optimizer_states_dtype: str = "fp32"
    bf16_edge_layers: int = 0
    doc_tokens: int = 0
    kv_repeat: bool = False

    @property
    def precision_label(self) -> str:
        """The precision as reports name it: fp8 with its scaling recipe (``fp8 (tensorwise scaling)``;
        row-wise says its forward GEMM is priced at the per-tensor rate, costmodel.formats)."""
        if self.precision != "fp8":
            return self.precision
        bound = ", forward GEMM at the per-tensor rate: a lower bound" if self.fp8_recipe == "rowwise" else ""
        return f"fp8 ({self.fp8_recipe} scaling{bound})"

    @property
    def optimizer_spec(self) -> OptimizerSpec:
        """The :class:`OptimizerSpec` of ``optimizer``."""
        return OPTIMIZERS[self.optimizer]

    def _check_megatron_core_switches(self) -> None:
        """Megatron-core's recompute modules and precision-aware optimizer exist on its stacks only, and
        the latter with Adam and bf16 or fp8 (megatron/core/optimizer/optimizer_config.py asserts
        'only supported with adam')."""
        core = self.stack in ("megatron", "nemo")
        if self.fp8_param_gather and not core:
            raise InputError("--fp8-param-gather", "", f"is Megatron-core's (--stack megatron or nemo), not "
                             f"{self.stack}'s")
        if self.recomputed != ("core_attn",) and not core:
            raise InputError("--recompute-modules", "", f"is Megatron-core's (--stack megatron or nemo), not "
                             f"{self.stack}'s: its selective recompute is its own")
        for flag, v in (("--main-grads-dtype", self.main_grads_dtype),
                        ("--optimizer-states-dtype", self.optimizer_states_dtype)):
            if v == "bf16" and not core:
                raise InputError(flag, "", f"bf16 is Megatron-core's precision-aware optimizer (--stack megatron "
                                 f"or nemo), not {self.stack}'s")
            if v == "bf16" and self.precision == "fp16":
                raise InputError(flag, "", "bf16 with --precision fp16: the precision-aware optimizer runs with "
                                 "bf16 or fp8 training")
        if self.optimizer_offload and self.stack not in ("megatron", "nemo", "deepspeed"):
            raise InputError("--optimizer-offload", "", f"{self.stack} has no optimizer offload the model prices "
                             "(DeepSpeed's offload_optimizer, Megatron-core's --optimizer-cpu-offload)")
        if self.precision == "fp8" and self.fp8_recipe == "delayed" and self.stack == "torchtitan":
            raise InputError("--fp8-recipe", "", "torchtitan's float8 (torchao) scales from each tensor: tensorwise or "
                             "rowwise (torchtitan deleted delayed scaling, pytorch/torchtitan PR 812, 2025-01)")
        only = FP8_RECIPE_STACKS.get(self.fp8_recipe)
        if self.precision == "fp8" and only is not None and self.stack not in only:
            raise InputError("--fp8-recipe", "", f"{self.fp8_recipe} is torchao's axis-wise scaling ("
                             f"--stack {' or '.join(only)}); {self.stack}'s fp8 is Transformer Engine's, "
                             "which has no row-wise recipe: use delayed or tensorwise")
        if self.precision in ("mxfp8", "nvfp4"):
            # Megatron-LM docs, "Low-Precision Training Guide": both are Transformer Engine recipes
            # (--fp8-recipe mxfp8, --fp4-format e2m1), neither runs with optimizer CPU offload
            if self.stack not in ("megatron", "nemo"):
                raise InputError("--precision", "", f"{self.precision} is priced as Transformer Engine's recipe "
                                 f"(--stack megatron or nemo), not {self.stack}'s")
            if self.optimizer_offload:
                raise InputError("--optimizer-offload", "", f"Megatron-core runs optimizer CPU offload with the "
                                 f"delayed fp8 recipe only, not {self.precision}")
        if self.optimizer_states_dtype == "bf16" and self.optimizer not in ("adam", "adamw"):
            raise InputError("--optimizer-states-dtype", "", f"bf16 states are the precision-aware optimizer's, "
                             f"which Megatron-core supports with Adam only, not {self.optimizer}")

    @functools.cached_property
    def recomputed(self) -> tuple[str, ...]:
        """The :data:`RECOMPUTE_MODULES` names of ``recompute_modules`` (parsed once: the cost terms of
        every layout ask)."""
        return recompute_module_list(self.recompute_modules)

    @property
    def precision_aware(self) -> bool:
        """Megatron-core's precision-aware optimizer: bf16 main grads or bf16 states."""
        return "bf16" in (self.main_grads_dtype, self.optimizer_states_dtype)

    @property
    def cross_entropy_spec(self) -> CrossEntropySpec:
        """The :class:`CrossEntropySpec` of ``cross_entropy``."""
        return CROSS_ENTROPIES[self.cross_entropy]

    def __post_init__(self):
        # a library caller's values are typed as the CLI's are: "no" is not False, 128.5 not a batch
        for f in fields(self):
            v, flag = getattr(self, f.name), "--" + f.name.replace("_", "-")
            if f.type in ("bool", bool) and not isinstance(v, (bool, np.bool_)):
                raise InputError(flag, "", f"must be True or False, got {v!r}")
            # (doc_tokens and bf16_edge_layers come as floats from their flags: checked below with their range)
            if f.type in ("int", int) and f.name not in ("doc_tokens", "bf16_edge_layers") and (
                    isinstance(v, (bool, np.bool_)) or not isinstance(v, numbers.Integral)):
                raise InputError(flag, "", f"must be a whole number, got {v!r}")
            if f.type in ("str", str) and not isinstance(v, str):
                raise InputError(flag, "", f"must be a name, got {v!r}")
        from ..stacks import STACKS        # stacks builds on this module: imported when a recipe is made
        if self.stack not in STACKS:
            raise InputError("--stack", "", f"{self.stack!r} is not one of {', '.join(STACKS)}")
        # the model computes in float64, exact for integers up to 2^53: larger counts are not a batch
        for flag, v in (("--gbs", self.gbs), ("--seq-len", self.seq_len)):
            if not 1 <= v <= _MAX_COUNT:
                raise InputError(flag, "", f"must be between 1 and 2^53, got {v}")
        if self.precision not in PRECISIONS:
            raise InputError("--precision", "", f"{self.precision!r} is not one of {', '.join(PRECISIONS)}")
        if self.optimizer not in OPTIMIZERS:
            raise InputError("--optimizer", "", f"{self.optimizer!r} is not one of {', '.join(OPTIMIZERS)}")
        if self.fp8_recipe not in FP8_RECIPES:
            raise InputError("--fp8-recipe", "", f"{self.fp8_recipe!r} is not one of {', '.join(FP8_RECIPES)}")
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise InputError("--attention-kernel", "", f"{self.attention_kernel!r} is not one of "
                             f"{', '.join(ATTENTION_KERNELS)}")
        if self.moe_dispatcher not in MOE_DISPATCHERS:
            raise InputError("--moe-dispatcher", "", f"{self.moe_dispatcher!r} is not one of "
                             f"{', '.join(MOE_DISPATCHERS)}")
        cf = self.moe_capacity_factor
        if not (isinstance(cf, (int, float)) and 0.0 <= cf <= 1e6):
            raise InputError("--moe-capacity-factor", "", f"must be 0 (dropless) or a positive factor up to 10^6, "
                             f"got {cf}")
        if 0.0 < cf < 1.0:
            raise InputError("--moe-capacity-factor", "", f"{cf:g} is below 1: every expert would drop tokens even "
                             "under perfect balance, work the model's FLOP count still includes; use 0 (dropless) "
                             "or a factor >= 1")
        recompute_module_list(self.recompute_modules)
        for flag, v in (("--main-grads-dtype", self.main_grads_dtype), ("--optimizer-states-dtype",
                                                                        self.optimizer_states_dtype)):
            if v not in STATE_DTYPES:
                raise InputError(flag, "", f"{v!r} is not one of {', '.join(STATE_DTYPES)}")
        self._check_megatron_core_switches()
        d = self.doc_tokens
        if not (isinstance(d, (int, float)) and float(d).is_integer() and 0 <= d <= self.seq_len):
            raise InputError("--doc-tokens", "", f"must be a whole number of tokens from 0 (one document per "
                             f"sequence) to --seq-len {self.seq_len}, got "
                             f"{int(d) if math.isfinite(d) and float(d).is_integer() else d}" if isinstance(d, (int, float))
                             else f"must be a whole number of tokens, got {d!r}")
        object.__setattr__(self, "doc_tokens", int(d))        # -0.0 and 512.0 read as 0 and 512
        n = self.bf16_edge_layers
        if not (isinstance(n, (int, float)) and float(n).is_integer() and 0 <= n <= 1024):
            raise InputError("--bf16-edge-layers", "", f"must be a whole number of layers 0 .. 1024, got {n:g}"
                             if isinstance(n, (int, float)) else f"must be a whole number of layers, got {n!r}")
        object.__setattr__(self, "bf16_edge_layers", int(n))   # a layer count: 2.0 reads as 2
        if n and not gemm_format_low(self.precision):
            raise InputError("--bf16-edge-layers", "", f"keeps edge layers in BF16 under an fp8 or fp4 recipe; "
                             f"--precision is {self.precision}")
        cv = self.moe_expert_load_cv
        if not (isinstance(cv, (int, float)) and 0.0 <= cv <= 100.0):
            raise InputError("--moe-expert-load-cv", "", f"must be a coefficient of variation between 0 and 100, "
                             f"got {cv}")
        if self.moe_pad_to_capacity and self.moe_dispatcher == "flex":
            raise InputError("--moe-pad-to-capacity", "", "the flex (DeepEP) dispatcher does not pad to capacity "
                             "(Megatron-core: 'Flex token dispatcher does not support "
                             "--moe-pad-expert-input-to-capacity')")
        if self.moe_pad_to_capacity and cf == 0.0:
            raise InputError("--moe-pad-to-capacity", "", "pads each expert to its capacity, which needs "
                             "--moe-capacity-factor > 0 (Megatron: moe_pad_expert_input_to_capacity requires "
                             "moe_expert_capacity_factor)")
        if self.cross_entropy not in CROSS_ENTROPIES:
            raise InputError("--cross-entropy", "", f"{self.cross_entropy!r} is not one of "
                             f"{', '.join(CROSS_ENTROPIES)}")
