"""What a training stack refuses at start-up, refused here so that no printed launch fails: Megatron-LM's
argument and TransformerConfig checks on the stacks that run its code, the optimizers each stack has, and
the attention a stack runs for a model whose scores it cannot fuse (Gemma 2's soft-capping).
(costmodel.stacks sets each stack's defaults; these rules apply to the recipe it builds.)"""
from __future__ import annotations

from dataclasses import replace

from .errors import InputError
from .specs import Recipe

#: the optimizers (costmodel.specs.OPTIMIZERS names) each stack can train with:
#: * megatron, nemo: ``--optimizer`` adam (decoupled weight decay: AdamW), sgd, lion (megatron/training/
#:   arguments.py, 2026: choices adam, sgd, muon, dist_muon, lion, soap, adaptive_muon; NeMo 2 and
#:   Megatron-Bridge build Megatron-core's OptimizerConfig);
#: * megatron-legacy, megatron-deepspeed: adam, sgd (their arguments.py);
#: * torchtitan: Adam, AdamW (torchtitan/components/optimizer/optimizer.py ``_resolve_optimizer_factory``;
#:   its DistMuon is not priced);
#: * llm-foundry: decoupled_adamw, decoupled_lionw and its Lion variants (llmfoundry/optim/__init__.py
#:   registry);
#: * deepspeed: its Adam, AdamW and Lion, and any client torch optimizer (HF Trainer's Adafactor, SGD).
STACK_OPTIMIZERS = {"megatron": ("adam", "adamw", "sgd", "lionw"), "nemo": ("adam", "adamw", "sgd", "lionw"),
                    "megatron-legacy": ("adam", "adamw", "sgd"), "megatron-deepspeed": ("adam", "adamw", "sgd"),
                    "torchtitan": ("adam", "adamw"), "llm-foundry": ("adamw", "lionw")}
#: optimizers DeepSpeed's ZeRO-Offload steps on the host: DeepSpeedCPUAdam (Adam, AdamW) and
#: DeepSpeedCPULion (deepspeed/ops/adam, deepspeed/ops/lion); with another (client) optimizer it refuses
#: the offload unless told ``zero_force_ds_cpu_optimizer: false`` (deepspeed/runtime/engine.py)
DEEPSPEED_OFFLOAD_OPTIMIZERS = ("adam", "adamw", "lionw")


def softcap_recipe(model, recipe: Recipe, given: dict) -> tuple[Recipe, str | None]:
    """The recipe a model with soft-capped attention scores (``model.attn_softcap``, Gemma 2) runs, and
    a note: on the Megatron family the attention is unfused, as NeMo's Gemma 2 swaps in
    Gemma2DotProductAttention (nemo/collections/llm/gpt/model/gemma2.py: baddbmm scores, the tanh cap,
    softmax; Transformer Engine's fused kernels take no cap); flash-attn >= 2.6 and FlashAttention-3 cap
    inside the kernel (their ``softcap`` argument), so the other stacks keep it.

    Raises:
        InputError: --flash-attention or --attention-kernel given for such a model on the Megatron family.
    """
    from .stacks import TE_STACKS
    if not model.attn_softcap or not recipe.flash_attention or recipe.stack not in TE_STACKS:
        return recipe, None
    for k in ("flash_attention", "attention_kernel"):
        if given.get(k):
            raise InputError("--" + k.replace("_", "-"), "", f"{model.name} soft-caps its attention scores "
                             f"(attn_logit_softcapping {model.attn_softcap:g}), which Transformer Engine's fused "
                             "attention cannot: NeMo runs Gemma2DotProductAttention, unfused (drop the flag)")
    return replace(recipe, flash_attention=False), (
        f"{model.name} soft-caps its attention scores ({model.attn_softcap:g} tanh(s / {model.attn_softcap:g})), "
        f"which Transformer Engine's fused attention cannot: priced unfused, the s x s scores in HBM, as NeMo's "
        "Gemma2DotProductAttention runs it")


def check_stack_optimizer(stack: str, optimizer: str, offload: bool) -> None:
    """Refuse an optimizer the stack has no implementation of (:data:`STACK_OPTIMIZERS`), and on the
    deepspeed stack an offloaded one its host kernels lack (:data:`DEEPSPEED_OFFLOAD_OPTIMIZERS`).

    Raises:
        InputError: naming --optimizer and what the stack offers.
    """
    have = STACK_OPTIMIZERS.get(stack)
    if have is not None and optimizer not in have:
        raise InputError("--optimizer", "", f"{optimizer}: the {stack} stack trains with {', '.join(have)} "
                         "(costmodel/stack_rules.py names each stack's source)")
    if stack == "deepspeed" and offload and optimizer not in DEEPSPEED_OFFLOAD_OPTIMIZERS:
        raise InputError("--optimizer", "", f"{optimizer} with --optimizer-offload: DeepSpeed steps an offloaded "
                         f"optimizer with its own host kernels, for {', '.join(DEEPSPEED_OFFLOAD_OPTIMIZERS)} only "
                         "(a client optimizer is refused: zero_force_ds_cpu_optimizer)")


#: the stacks whose framework overlaps an interleaved pipeline's sends with compute as a setting
#: (Megatron-core's overlap_p2p_comm, NeMo's recipes); torchtitan's PyTorch schedules, the 2021-22
#: Megatron-LM and Megatron-DeepSpeed have none
PP_OVERLAP_STACKS = ("megatron", "nemo")


def check_stack_switches(stack, switches: dict, values: dict) -> None:
    """Refuse a switch given on the command line (``switches``, None = not given) that the stack's
    framework has no setting for, so its printed settings could not run what was priced: Megatron-core's
    vocab-parallel cross-entropy (``megatron``, ``megatron-fused``) off the Megatron family, TP-comm overlap
    on a stack without TP, pipeline-send overlap off :data:`PP_OVERLAP_STACKS`; then the optimizer
    (:func:`check_stack_optimizer`).
    ``stack``: costmodel.stacks.Stack; ``values``: the recipe's resolved switches.

    Raises:
        InputError: naming the flag, the stack and the stacks that have it.
    """
    ce = switches.get("cross_entropy")
    if ce in ("megatron", "megatron-fused") and not stack.megatron_family:
        raise InputError("--cross-entropy", "", f"{ce} is Megatron-core's vocab-parallel loss, which the {stack.name} "
                         f"stack does not run (its own: {stack.defaults['cross_entropy']}; eager, fused or chunked "
                         "name the others)")
    if switches.get("tp_comm_overlap") and "tp" not in stack.model_parallel:
        raise InputError("--tp-comm-overlap", "", f"the {stack.name} stack runs no tensor parallelism: no TP "
                         "collectives to overlap")
    if switches.get("pp_overlap") and stack.name not in PP_OVERLAP_STACKS:
        raise InputError("--pp-overlap", "", f"the {stack.name} stack has no setting that overlaps an interleaved "
                         "pipeline's sends with compute (Megatron-core's overlap_p2p_comm: --stack megatron or nemo)")
    check_stack_optimizer(stack.name, values["optimizer"], values["optimizer_offload"])


def check_megatron_rules(recipe: Recipe, layout: dict, is_moe: bool, num_layers: int | None = None) -> None:
    """Combinations Megatron-LM refuses at start-up, refused here on the stacks that run its code
    (megatron, nemo: :data:`TE_STACKS`) so a printed launch never fails:

    * ``--optimizer-offload`` with ZeRO-3: the offload is the distributed optimizer's
      (``--use-precision-aware-optimizer``, megatron/core/optimizer/__init__.py), which FSDP2 excludes
      (megatron/training/arguments.py: ``--use-torch-fsdp2`` asserts no distributed optimizer);
    * delayed FP8 scaling with BF16 first/last layers or with ``moe_act`` / ``layernorm`` recomputation
      (megatron/core/transformer/transformer_config.py: "Delayed scaling does not support ..."), and more BF16
      first or last layers than a pipeline stage holds (``num_layers`` // PP, the same check);
    * ``moe_act`` recomputation without grouped GEMM (transformer_config.py).

    Rules that depend on the layout's degrees (the interleaved schedule without P2P overlap at PP <= 2)
    are layout rules (:func:`costmodel.layouts.validity`), which the search applies too.

    Raises:
        InputError: naming the flag and the Megatron-LM rule.
    """
    from .stacks import TE_STACKS
    if recipe.stack not in TE_STACKS:
        return
    if recipe.optimizer_offload and layout.get("zero") == 3:
        raise InputError("--optimizer-offload", "", "is Megatron's distributed-optimizer offload (--optimizer-cpu-"
                         "offload needs --use-precision-aware-optimizer, which needs the distributed optimizer), and "
                         "ZeRO-3 (--use-torch-fsdp2) excludes the distributed optimizer: use --zero 1 or 2")
    delayed = recipe.precision == "fp8" and recipe.fp8_recipe == "delayed"
    if delayed and recipe.bf16_edge_layers:
        raise InputError("--bf16-edge-layers", "", "Megatron-LM's delayed FP8 scaling does not support BF16 first/last "
                         "layers (TransformerConfig): add --fp8-recipe tensorwise or drop --bf16-edge-layers")
    cap = num_layers // layout["pp"] if num_layers and layout.get("pp") else None
    if cap is not None and recipe.bf16_edge_layers > cap and recipe.precision in ("fp8", "mxfp8", "nvfp4"):
        raise InputError("--bf16-edge-layers", "", f"{recipe.bf16_edge_layers} exceeds the {cap} layers of a pipeline "
                         f"stage (num_layers // PP): Megatron-core's TransformerConfig refuses it")
    mods = set(recipe.recomputed) if layout.get("recompute") == "selective" else set()
    if delayed and mods & {"moe_act", "layernorm"}:
        raise InputError("--recompute-modules", "", "Megatron-LM's delayed FP8 scaling does not support moe_act or "
                         "layernorm recomputation (TransformerConfig): add --fp8-recipe tensorwise or drop those modules")
    if is_moe and "moe_act" in mods and not recipe.moe_grouped_gemm:
        raise InputError("--recompute-modules", "", "moe_act recomputation runs on grouped GEMM experts only "
                         "(Megatron-LM TransformerConfig): add --moe-grouped-gemm or drop moe_act")
