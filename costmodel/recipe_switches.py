"""The recipe switches: the training settings a stack sets by default and a flag overrides, one
:class:`RecipeSwitch` each (the flag, its help, its Megatron-LM argument), and the flag naming every
command-line field shares (:class:`NamedFlag`).  Each stack's defaults for them are in costmodel.stacks.
"""
from __future__ import annotations

from dataclasses import dataclass

from .formats import FP8_RECIPES
from .specs import ATTENTION_KERNELS, CROSS_ENTROPIES, MOE_DISPATCHERS, OPTIMIZERS, RECOMPUTE_MODULES, STATE_DTYPES


def typed_flag(cli_flag: str, is_bool: bool, value) -> str:
    """The flag a user types to set ``value``: ``--no-sp`` for the bool ``--sp`` set False, else ``cli_flag``."""
    return "--no-" + cli_flag[2:] if is_bool and value is False else cli_flag


class NamedFlag:
    """The command-line flag of a field with a ``name`` and a ``kind`` ('bool' has a ``--no-`` form): the
    recipe switches here and the layout fields (costmodel.layout_fields) take their flags from it."""

    @property
    def cli_flag(self) -> str:
        """The flag users type: the name with dashes (``--flash-attention``, ``--recompute-num-layers``)."""
        return "--" + self.name.replace("_", "-")

    def flag_for(self, value) -> str:
        """The flag that sets ``value``: ``--no-<name>`` for a bool set False, else :attr:`cli_flag`."""
        return typed_flag(self.cli_flag, self.kind == "bool", value)


@dataclass(frozen=True)
class RecipeSwitch(NamedFlag):
    """One recipe field a stack sets by default and a flag overrides.

    Attributes:
        name: the :class:`costmodel.specs.Recipe` field (the flag is its name with dashes).
        kind: 'bool' (``--name/--no-name``), 'choice' (``--name VALUE``), 'float' (``--name X``) or
            'modules' (``--name A,B``: a subset of the choices).
        help: the flag's help, without the default.
        choices: the accepted values of a 'choice'.
        megatron_key: the Megatron-LM argument it maps to one-to-one (the argument dump's key; for the
            MoE switches also the TransformerConfig field of Megatron-Bridge configs and NeMo 2
            overrides, and with dashes the command-line flag); '' where none does.
        moe: applies to MoE models only (a dense model refuses it).
        summary: what turning it on does, in a few words (``recommend``'s notes).
    """

    name: str
    kind: str
    help: str
    choices: tuple = ()
    megatron_key: str = ""
    moe: bool = False
    summary: str = ""


#: the recipe switches, in the order the flags are listed
RECIPE_SWITCHES = (
    RecipeSwitch("flash_attention", "bool", "Fused (flash) attention; off models the s^2 softmax in HBM."),
    RecipeSwitch("tp_comm_overlap", "bool", "Transformer Engine TP-communication overlap (userbuffers).",
                 megatron_key="tp_comm_overlap", summary="Transformer Engine TP-comm overlap"),
    RecipeSwitch("dp_overlap", "bool", "DP gradient reduce / parameter gather overlapped with the backward / "
                 "forward in buckets (Megatron --overlap-grad-reduce --overlap-param-gather).",
                 megatron_key="overlap_grad_reduce", summary="the DP gradient/parameter overlap"),
    RecipeSwitch("pp_overlap", "bool", "Interleaved pipeline (VP > 1): stage-boundary sends and receives run "
                 "under the next virtual stage's compute (Megatron overlap_p2p_comm; --no-overlap-p2p-"
                 "communication turns it off); the warm-up and flush sends stay in the bubble; no effect "
                 "with VP 1 or --no-overlap.", megatron_key="overlap_p2p_comm"),
    RecipeSwitch("fp8_recipe", "choice", "With --precision fp8: per-tensor scales from the amax history "
                 "(delayed) or from each tensor itself (tensorwise: current scaling, one more read of every "
                 "cast tensor), or per row along both axes (rowwise: torchao's, torchtitan only; its casts "
                 "and gradient rescales are priced, its slower forward GEMM is not).", tuple(FP8_RECIPES),
                 megatron_key="fp8_recipe"),
    RecipeSwitch("fp8_param_gather", "bool", "With --precision fp8 on the Megatron family: parameters kept and "
                 "all-gathered in fp8 (Megatron --fp8-param-gather, with the distributed optimizer): no 16-bit "
                 "weight or cached fp8 copy beside them, one byte an element gathered.",
                 megatron_key="fp8_param_gather", summary="fp8 parameters"),
    RecipeSwitch("optimizer", "choice", "Optimizer: its fp32 states set the optimizer memory and step.",
                 tuple(OPTIMIZERS), megatron_key="optimizer"),
    RecipeSwitch("cross_entropy", "choice", "Cross-entropy implementation: the logits bytes it keeps.",
                 tuple(CROSS_ENTROPIES)),
    RecipeSwitch("attention_kernel", "choice", "Fused-attention kernel: its fitted efficiency by sequence length.",
                 tuple(ATTENTION_KERNELS)),
    RecipeSwitch("moe_dispatcher", "choice", "MoE token dispatcher: what the dispatch and combine move, and "
                 "the token copies around them.", tuple(MOE_DISPATCHERS), megatron_key="moe_token_dispatcher_type",
                 moe=True),
    RecipeSwitch("moe_grouped_gemm", "bool", "MoE: the local experts as one grouped GEMM (off: one GEMM per "
                 "expert, each with its launch and its own partial wave).", megatron_key="moe_grouped_gemm",
                 moe=True, summary="grouped expert GEMMs"),
    RecipeSwitch("moe_capacity_factor", "float", "MoE: expert capacity as a multiple of the mean tokens per "
                 "expert, tokens beyond it dropped; 0 = dropless.", megatron_key="moe_expert_capacity_factor",
                 moe=True),
    RecipeSwitch("moe_pad_to_capacity", "bool", "MoE: pad every expert's tokens to its capacity (fixed-size "
                 "buffers; needs a capacity factor).", megatron_key="moe_pad_expert_input_to_capacity", moe=True,
                 summary="experts padded to their capacity"),
    RecipeSwitch("moe_permute_fusion", "bool", "MoE: token permutation as fused kernels (Megatron "
                 "--moe-permute-fusion); off: PyTorch's index_select / scatter_add_, an atomic add per element "
                 "once each way.", megatron_key="moe_permute_fusion", moe=True,
                 summary="fused token permutation"),
    RecipeSwitch("moe_router_fusion", "bool", "MoE: the router's top-k, score function and aux-loss kernels "
                 "fused (Megatron-core --moe-router-fusion, Transformer Engine's fused router): 31 kernels a layer's "
                 "forward instead of 72 (costmodel.moe).", megatron_key="moe_router_fusion", moe=True,
                 summary="fused router kernels"),
    RecipeSwitch("moe_ep_overlap", "bool", "MoE: Megatron-core's batch-level EP overlap (--overlap-moe-expert-"
                 "parallel-comm --delay-wgrad-compute): the forward of one micro-batch and the backward of another "
                 "run as one schedule, each one's dispatch and combine under the other's compute (all but the "
                 "pipeline's warm-up and flush); needs EP > 1, the alltoall or flex dispatcher, no full "
                 "recompute and, with PP > 1, VP > 1.", megatron_key="overlap_moe_expert_parallel_comm", moe=True,
                 summary="EP all-to-all under the other micro-batch's compute"),
    RecipeSwitch("recompute_modules", "modules", "What --recompute selective re-runs on Megatron-family stacks "
                 "(Megatron-core --recompute-modules), comma- or space-separated.", tuple(RECOMPUTE_MODULES),
                 megatron_key="recompute_modules"),
    RecipeSwitch("fused_elementwise", "bool", "RMSNorm, rotary embedding and SwiGLU as fused kernels (TE, Apex, "
                 "Liger-Kernel, torch.compile); off: eager PyTorch op sequences, each op a pass over HBM."),
    RecipeSwitch("optimizer_offload", "bool", "ZeRO-Offload: optimizer states on the host, the step on the CPU "
                 "(DeepSpeed offload_optimizer cpu): gradients and parameters cross PCIe, the host's DRAM runs it."),
    RecipeSwitch("main_grads_dtype", "choice", "Dtype of the gradients accumulated and reduced over DP (Megatron "
                 "--main-grads-dtype; bf16 halves the grad buffer and the DP traffic).", STATE_DTYPES,
                 megatron_key="main_grads_dtype"),
    RecipeSwitch("optimizer_states_dtype", "choice", "Optimizer states' dtype; bf16 is Megatron's precision-aware "
                 "optimizer (bf16 moments, the fp32 master kept as its 16-bit remainder).", STATE_DTYPES,
                 megatron_key="exp_avg_dtype"),
    RecipeSwitch("bf16_edge_layers", "float", "Under fp8, mxfp8 or nvfp4: the first and the last N transformer "
                 "layers stay in BF16 (Megatron --first-last-layers-bf16 --num-layers-at-start/end-in-bf16 N)."),
    RecipeSwitch("doc_tokens", "float", "Packed sequences: documents of this many tokens (up to --seq-len), "
                 "each attending to itself only (fused attention's variable-length kernels; unfused attention "
                 "still computes the whole masked s x s scores); 0 = one document per sequence."),
    RecipeSwitch("kv_repeat", "bool", "GQA keys and values repeated to the query heads before the attention kernel, "
                 "as torchtitan did before pytorch/torchtitan#2259 of 2026-01-27 (off by default on every stack): a "
                 "copy of K and V each way, the repeated K and V kept for the backward where the layer keeps the "
                 "kernel's inputs (no recomputation), and a context-parallel ring rotating the repeated heads."),
    RecipeSwitch("moe_expert_load_cv", "float", "MoE: measured coefficient of variation of the tokens per expert "
                 "(e.g. sqrt(load_balancing_loss - 1) from a Megatron log, a lower bound); 0 = uniform routing, "
                 "the balls-into-bins floor.  A trained router, run dropless, can sit far above it: Qwen3-235B-A22B's "
                 "on SlimPajama is about 1.6 per 16k-token micro-batch (NVIDIA's forced-balance vs dropless runs, "
                 "benchmarks/data/moe_modelzoo_qwen3_235b_h100_long_context.csv).", moe=True),
)
#: the switches of MoE models only, and those of them Megatron turns on with a bare flag
#: (``--moe-grouped-gemm``): the dump, the Megatron-Bridge config and the NeMo 2 override all name
#: them by ``megatron_key``, the launch settings print them from it
MOE_SWITCHES = tuple(s.name for s in RECIPE_SWITCHES if s.moe)
MOE_FLAG_SWITCHES = tuple(s for s in RECIPE_SWITCHES if s.moe and s.kind == "bool" and s.megatron_key)
SWITCHES_BY_NAME = {s.name: s for s in RECIPE_SWITCHES}
#: the dispatchers batch-level EP overlap runs with (Megatron-core TransformerConfig asserts them), and
#: the stacks that run it (Megatron-core's: TE_STACKS)
EP_OVERLAP_DISPATCHERS = ("alltoall", "flex")
