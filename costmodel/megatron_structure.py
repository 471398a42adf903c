"""The model-structure arguments of a Megatron-LM launch that Megatron would otherwise default silently:
the attention's shape (grouped queries, head width, Q/K norms and biases, sliding windows), the experts
and their placement, group-limited routing and multi-head latent attention."""
from __future__ import annotations

from .specs import ModelSpec
from .stacks import PRE_TE_MEGATRON_STACKS
from .specs.mlp_config import GPT_OSS_GLU_ALPHA as QUICK_GELU_ALPHA

#: Megatron-core's AttnBackend enum values by name (megatron/core/transformer/enums.py): the launch writes
#: them, a Megatron-Bridge YAML reads back
ATTN_BACKENDS = {"flash": 1, "fused": 2, "unfused": 3, "local": 4, "auto": 5}


def megatron_structure_args(model: ModelSpec) -> list[str]:
    """The model-structure arguments: the shape, and those Megatron-LM defaults silently where the priced
    model differs:
    the experts (--num-experts, --moe-router-topk, default 2; --moe-ffn-hidden-size, default
    --ffn-hidden-size; the shared experts; which layers are MoE, --moe-layer-freq, default every one, as a
    pattern of 1 (MoE) and 0 (dense); DeepSeek's group-limited routing) and multi-head latent attention
    (--multi-latent-attention and its ranks and head widths, which default to DeepSeek-V2's), and
    the attention's shape where it is not Megatron's full multi-head attention of hidden / heads wide heads
    (--group-query-attention --num-query-groups, --kv-channels), Q/K norms and MLA's latent norms
    (--qk-layernorm) and Q/K/V
    biases without the others (--add-qkv-bias), and
    sliding-window attention (--window-size, default none: full attention; --window-attn-skip-freq, a
    pattern of 1 (window) and 0 (full), default every layer; megatron/core/transformer/utils.py
    is_layer_window_attention; none for a hand-built spec that windows some layers without saying
    which), layers without rotary embedding (--no-rope-freq, default none) and a weightless L2 Q/K norm
    (--qk-l2-norm; Llama 4's), gpt-oss's attention sinks (--softmax-type learnable) and its clamped quick-GELU
    GLU with an offset linear half (--quick-geglu, --glu-linear-offset, --activation-func-clamp-value; the
    last three TransformerConfig fields, given as flags by arguments.py's ArgumentGroupFactory); the MLP
    (--swiglu for a SiLU GLU, --squared-relu; default GeLU), the linears' biases (--disable-bias-linear;
    default biased), an untied output layer (--untie-embeddings-and-output-weights; default tied) and
    rotary positions (--position-embedding-type rope; default learned absolute), after the shape
    (--num-layers, --hidden-size, --ffn-hidden-size: the dense layers' width, --num-attention-heads).  The
    tokenizer (which sets the padded vocabulary) and what changes no cost (--normalization, --rotary-base,
    --max-position-embeddings) are the script's.
    (megatron/training/arguments.py; megatron/core/transformer/transformer_config.py)"""
    # the shape (the dense layers' MLP width: an MoE layer's is --moe-ffn-hidden-size below)
    a = [f"--num-layers {model.num_layers} --hidden-size {model.hidden} --ffn-hidden-size {model.dense_mlp_width} "
         f"--num-attention-heads {model.num_heads}"]
    # the MLP, the biases, the tying and the positions, where Megatron's defaults (a GeLU MLP, biased
    # linears, a tied output layer, learned absolute positions) would build another model
    if model.gated and model.activation == "silu" and model.glu_alpha != QUICK_GELU_ALPHA:
        a.append("--swiglu")
    elif not model.gated and model.activation == "relu2":
        a.append("--squared-relu")
    if not model.bias:
        a.append("--disable-bias-linear")
    if not model.tie_embeddings:
        a.append("--untie-embeddings-and-output-weights")
    if not model.learned_positions and model.family != "bloom":       # BLOOM's ALiBi: no Megatron-core type
        a.append("--position-embedding-type rope")
    if not model.is_mla:
        # attention Megatron builds as full multi-head, hidden / heads wide, without Q/K norms or Q/K/V biases
        # unless told (its defaults: group_query_attention off, kv_channels hidden // heads, qk_layernorm
        # off, add_qkv_bias off)
        if model.num_kv_heads < model.num_heads:
            a.append(f"--group-query-attention --num-query-groups {model.num_kv_heads}")
        if model.head_dim * model.num_heads != model.hidden:
            a.append(f"--kv-channels {model.head_dim}")
    if model.qk_norm or (model.is_mla and (model.q_lora_rank or model.kv_lora_rank)):
        # MLA's latent norms (DeepSeek's q_a_layernorm, kv_a_layernorm) are Megatron's qk_layernorm too
        # (Megatron-Bridge's DeepSeekModelProvider sets qk_layernorm True)
        a.append("--qk-layernorm")
    if model.qkv_bias and not model.bias:
        a.append("--add-qkv-bias")
    if model.is_moe:
        a += [f"--num-experts {model.num_experts}", f"--moe-router-topk {model.topk}",
              f"--moe-ffn-hidden-size {model.ffn_hidden}"]
        if model.shared_ffn_hidden:
            a.append(f"--moe-shared-expert-intermediate-size {model.shared_ffn_hidden}")
        if model.num_dense_layers:
            dense = set(model.dense_layer_indices or range(model.num_dense_layers))
            a.append(f"--moe-layer-freq \"{_layer_pattern([0 if i in dense else 1 for i in range(model.num_layers)])}\"")
        if model.routing_groups:
            a.append(f"--moe-router-num-groups {model.routing_groups} --moe-router-group-topk {model.routing_group_limit}")
        a += router_args(model)
    every = model.sliding_layers >= model.num_layers
    if model.sliding_window and model.sliding_layers and (every or model.sliding_layer_indices):
        # TE's (left, right) window: a query sees itself and left earlier keys, so HF's sliding_window W
        # is (W - 1, 0) (Megatron-Bridge gemma2_bridge.py, exaone_moe_provider.py)
        a.append(f"--window-size \"({model.sliding_window - 1},0)\"")
        if not every:
            a.append(f"--window-attn-skip-freq {_period_form(model.sliding_layer_indices, model.num_layers, False)}")
    if model.nope_layer_indices:
        # Megatron's pattern marks 1 the layers without RoPE (transformer_config.py no_rope_freq)
        a.append(f"--no-rope-freq {_period_form(model.nope_layer_indices, model.num_layers, True)}")
    if model.qk_l2_norm:
        a.append("--qk-l2-norm")
    if model.attention_sinks:               # TransformerConfig.softmax_type (TE's fused attention runs it)
        a.append("--softmax-type learnable")
    if model.glu_alpha == QUICK_GELU_ALPHA:
        # Megatron's quick_gelu is x sigmoid(1.702 x) (fusions/fused_bias_geglu.py), gated by --quick-geglu
        # in place of --swiglu (training/argument_utils.py)
        a.append("--quick-geglu")
    if model.glu_linear_offset:
        a.append(f"--glu-linear-offset {model.glu_linear_offset:g}")
    if model.glu_clamp:
        a.append(f"--activation-func-clamp-value {model.glu_clamp:g}")
    if model.is_mla:
        a.append("--multi-latent-attention" + (f" --q-lora-rank {model.q_lora_rank}" if model.q_lora_rank else "")
                 + f" --kv-lora-rank {model.kv_lora_rank} --qk-head-dim {model.head_dim} --qk-pos-emb-head-dim "
                 f"{model.qk_rope_head_dim} --v-head-dim {model.v_head_dim}")
    return a


#: the structure arguments the Megatron forks before Megatron-core take (Megatron-LM 2021-22, e1c334b
#: megatron/arguments.py; BigScience's Megatron-DeepSpeed): the shape and the head width
PRE_CORE_STRUCTURE_FLAGS = ("--num-layers", "--kv-channels")


def stack_structure_args(model: ModelSpec, stack: str) -> list[str]:
    """:func:`megatron_structure_args` as the Megatron of ``stack`` takes them: on a fork that predates
    Megatron-core (megatron-legacy, megatron-deepspeed) only those it has (:data:`PRE_CORE_STRUCTURE_FLAGS`;
    the 2022 parser refuses an unknown flag; :func:`pre_core_note` names the rest)."""
    args = megatron_structure_args(model)
    return [x for x in args if x.startswith(PRE_CORE_STRUCTURE_FLAGS)] if stack in PRE_TE_MEGATRON_STACKS else args


def pre_core_note(model: ModelSpec, stack: str) -> str | None:
    """The structure arguments a pre-core fork has no flag for (:func:`stack_structure_args`), or None: it
    builds GPT's GeLU MLP, biased linears, tied output layer, learned positions and full multi-head
    attention."""
    if stack not in PRE_TE_MEGATRON_STACKS:
        return None
    lost = [x.split()[0] for x in megatron_structure_args(model) if not x.startswith(PRE_CORE_STRUCTURE_FLAGS)]
    return (f"the {stack} stack's Megatron has no {', '.join(lost)}: it builds GPT's structure (a GeLU MLP, biased "
            "linears, a tied output layer, learned positions, full multi-head attention), not this model's, which "
            "was priced; Megatron-core (--stack megatron) builds it" if lost else None)


def router_args(model: ModelSpec) -> list[str]:
    """Megatron-core's router settings for the model's router (costmodel.specs.router_config), where they
    differ from Megatron's default (the top-k of the logits, a softmax over the k): the score function,
    --moe-router-pre-softmax for softmax weights not renormalised over the k, the top-k scaling, the
    expert bias, the weights on the experts' input.  Megatron's TransformerConfig refuses top-1 with a
    softmax after the top-k (a softmax over one logit has no gradient): such a router runs pre-softmax
    (:func:`router_notes` says what differs then).  [] for a dense model."""
    r, a = model.router, []
    if not model.is_moe:
        return a
    if r.score_function != "softmax":
        a.append(f"--moe-router-score-function {r.score_function}")
    elif not r.renormalised or model.topk == 1:
        a.append("--moe-router-pre-softmax")
    if r.topk_scaling != 1.0:
        a.append(f"--moe-router-topk-scaling-factor {r.topk_scaling!r}")
    if r.expert_bias:
        a.append("--moe-router-enable-expert-bias")
    if r.probs_on_input:
        a.append("--moe-apply-probs-on-input")
    return a


def router_notes(model: ModelSpec) -> list[str]:
    """What Megatron-core's router cannot reproduce of the model's (empty for a dense model): a top-1
    softmax renormalised to 1 runs pre-softmax (:func:`router_args`), and a sigmoid router that does not
    renormalise is renormalised whenever k > 1 (moe_utils.py topk_routing_with_score_function)."""
    r = model.router
    if not model.is_moe:
        return []
    if r.score_function == "softmax" and r.renormalised and model.topk == 1:
        return [f"Megatron refuses a top-1 softmax after the top-k: the expert's weight is its softmax "
                f"probability, where {model.name}'s router renormalises it to 1"]
    if r.score_function != "softmax" and not r.renormalised and model.topk > 1:
        return [f"Megatron renormalises sigmoid weights over the top {model.topk}; {model.name}'s router does not"]
    return []


def _period_form(marked, layers: int, on_multiples: bool) -> str:
    """Megatron's period form N of the 0-indexed ``marked`` layers of ``layers``, else the quoted pattern of
    1 (marked) and 0: ``on_multiples`` marks the layers whose layer_number % N == 0 (--no-rope-freq 4: the
    fourth, eighth, ... layers skip RoPE), else the others (--window-attn-skip-freq N: layer_number % N != 0
    slides, megatron/core/transformer/utils.py is_layer_window_attention; gpt-oss's and Gemma 2's
    alternation is 2, Gemma 3's 6)."""
    at = set(marked)
    for n in range(2, layers + 1):
        if at == {i for i in range(layers) if ((i + 1) % n == 0) == on_multiples}:
            return str(n)
    return f"\"{_layer_pattern([int(i in at) for i in range(layers)])}\""


def _layer_pattern(bits: list) -> str:
    """Megatron's --moe-layer-freq list expression of ``bits`` (1 MoE, 0 dense), runs joined:
    ``([0]*3+[1]*58)``."""
    runs: list = []
    for b in bits:
        if runs and runs[-1][0] == b:
            runs[-1][1] += 1
        else:
            runs.append([b, 1])
    return "(" + "+".join(f"[{b}]*{n}" for b, n in runs) + ")"
