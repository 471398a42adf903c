"""The model-structure arguments of a Megatron-LM launch that Megatron would otherwise default silently:
the experts and their placement, group-limited routing and multi-head latent attention."""
from __future__ import annotations

from .specs import ModelSpec


def megatron_structure_args(model: ModelSpec) -> list[str]:
    """The model-structure arguments that Megatron-LM defaults silently where the priced model differs:
    the experts (--num-experts, --moe-router-topk, default 2; --moe-ffn-hidden-size, default
    --ffn-hidden-size; the shared experts; which layers are MoE, --moe-layer-freq, default every one, as a
    pattern of 1 (MoE) and 0 (dense); DeepSeek's group-limited routing) and multi-head latent attention
    (--multi-latent-attention and its ranks and head widths, which default to DeepSeek-V2's).  The
    arguments a model script cannot omit (--num-layers, --hidden-size, ...) are the script's.
    (megatron/training/arguments.py; megatron/core/transformer/transformer_config.py)"""
    a = []
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
    if model.is_mla:
        a.append("--multi-latent-attention" + (f" --q-lora-rank {model.q_lora_rank}" if model.q_lora_rank else "")
                 + f" --kv-lora-rank {model.kv_lora_rank} --qk-head-dim {model.head_dim} --qk-pos-emb-head-dim "
                 f"{model.qk_rope_head_dim} --v-head-dim {model.v_head_dim}")
    return a


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
