"""How an MoE router turns a token's logits into the weights of the experts it goes to, read from a
Hugging Face config, in the terms of Megatron-core's router settings (transformer_config.py:
moe_router_score_function, moe_router_pre_softmax, moe_router_topk_scaling_factor,
moe_router_enable_expert_bias, moe_apply_probs_on_input).

The routing costs the same whichever way the weights are made (a softmax or a sigmoid over the
router's E logits, a division over k): the step time does not read it.  What a launch must set to train
the model the file describes does (costmodel.megatron_structure).  Families (transformers' modeling
files unless named):

* Mixtral (modeling_mixtral.py), GPT-OSS (modeling_gpt_oss.py GptOssTopKRouter): softmax weights
  renormalised over the k picked: Megatron's default (the top-k of the logits, a softmax over the k).
* Qwen2-MoE / Qwen3-MoE / OLMoE: softmax over every expert, then the top k, renormalised only with
  ``norm_topk_prob`` (default false; Qwen3-30B-A3B's and 235B's files set it true).  Not renormalised is
  Megatron's --moe-router-pre-softmax.
* DeepSeek-V2 (deepseek-ai/DeepSeek-V2 modeling_deepseek.py MoEGate): softmax over every expert, the
  top k (group-limited), renormalised with ``norm_topk_prob`` (the published files: false) and otherwise
  scaled by ``routed_scaling_factor``.
* DeepSeek-V3 / Kimi K2 (``deepseek_v3``) and GLM-4.5 (``glm4_moe``): sigmoid scores (``scoring_func``),
  the top k picked on score + a learned per-expert bias (e_score_correction_bias: the auxiliary-loss-free
  balancing of arXiv:2412.19437 sec. 2.1.2), renormalised with ``norm_topk_prob`` and scaled by
  ``routed_scaling_factor`` (V3: 2.5).
* Llama 4 (modeling_llama4.py Llama4Router, Llama4TextMoe): the sigmoid of the picked logit, multiplied
  into the expert's input, not its output.
* DBRX (modeling_dbrx.py): softmax, the top k, divided by their p-norm, p = ffn_config's
  ``moe_normalize_expert_weights`` (1: the sum, Megatron's default; null: not renormalised).
* Grok-1 (xai-org/grok-1 model.py Router and MoELayer): softmax over every expert, the top k used as
  they are (a catalog file without a model_type says so with ``_router_renormalised: false``).
A family the reader does not know keeps Megatron's default.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

SCORE_FUNCTIONS = ("softmax", "sigmoid")
#: the families whose router :func:`router_spec` reads from their own keys or architecture
_OWN_KEYS_FAMILIES = ("qwen2_moe", "qwen3_moe", "olmoe", "deepseek", "deepseek_v2", "deepseek_v3", "glm4_moe",
                      "llama4_text", "dbrx", "grok", "grok-1", "mixtral", "gpt_oss")


@dataclass(frozen=True)
class RouterSpec:
    """The weights an MoE router gives a token's k experts (module docstring for each family).

    Attributes:
        score_function: 'softmax' (over every expert, or over the k picked when ``renormalised``) or
            'sigmoid' (each expert's score on its own).
        renormalised: the k weights are divided by their sum.
        topk_scaling: the k weights are multiplied by this (DeepSeek's ``routed_scaling_factor``); 1 = none.
        expert_bias: the top k are picked on score + a learned per-expert bias that the weights leave out
            (auxiliary-loss-free balancing, arXiv:2412.19437 sec. 2.1.2).
        probs_on_input: the weight multiplies the expert's input (Llama 4) rather than its output.
    """

    score_function: str = "softmax"
    renormalised: bool = True
    topk_scaling: float = 1.0
    expert_bias: bool = False
    probs_on_input: bool = False


def _flag(d: dict, key: str, w: str, default: bool) -> bool:
    v = d.get(key, default)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise InputError(w, key, f"expected true or false, got {v!r}")
    return v


def _scaling(d: dict, w: str) -> float:
    v = d.get("routed_scaling_factor", 1.0)
    if v is None:
        return 1.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        raise InputError(w, "routed_scaling_factor", f"expected a positive number, got {v!r}")
    return float(v)


def router_spec(d: dict, w: str, model_type: str, experts: int) -> RouterSpec:
    """The router of the MoE model a config mapping ``d`` (from file ``w``) of ``model_type`` describes
    (module docstring); the default RouterSpec for a dense model or an unknown family.

    Raises:
        InputError: ``scoring_func`` neither softmax nor sigmoid, a non-boolean ``norm_topk_prob`` or
            ``_router_renormalised`` (or the latter for a family read from its own keys), a non-positive
            ``routed_scaling_factor``, or a DBRX
            ``moe_normalize_expert_weights`` other than 1 or null (Megatron-core renormalises by the
            sum or not at all).
    """
    if experts <= 1:
        return RouterSpec()
    if d.get("_router_renormalised") is not None and model_type in _OWN_KEYS_FAMILIES:
        raise InputError(w, "_router_renormalised", f"model_type {model_type!r} says how its router weighs the "
                         "experts with its own keys (norm_topk_prob, scoring_func, ...): the catalog key is for a "
                         "family the reader does not know")
    if model_type in ("qwen2_moe", "qwen3_moe", "olmoe"):
        return RouterSpec(renormalised=_flag(d, "norm_topk_prob", w, False))
    if model_type in ("deepseek", "deepseek_v2"):
        renorm = _flag(d, "norm_topk_prob", w, False)
        return RouterSpec(renormalised=renorm, topk_scaling=1.0 if renorm else _scaling(d, w))
    if model_type in ("deepseek_v3", "glm4_moe"):
        score = d.get("scoring_func", "sigmoid")
        if score not in SCORE_FUNCTIONS:
            raise InputError(w, "scoring_func", f"{score!r} is not one of {', '.join(SCORE_FUNCTIONS)}")
        return RouterSpec(score_function=score, renormalised=_flag(d, "norm_topk_prob", w, True),
                          topk_scaling=_scaling(d, w), expert_bias=score == "sigmoid")
    if model_type == "llama4_text":
        return RouterSpec(score_function="sigmoid", renormalised=False, probs_on_input=True)
    if model_type == "dbrx":
        p = d.get("moe_normalize_expert_weights", 1.0)
        if p is not None and (isinstance(p, bool) or p != 1):
            raise InputError(w, "ffn_config.moe_normalize_expert_weights",
                             f"{p!r}: Megatron-core renormalises a token's expert weights by their sum (1) or "
                             f"not at all (null), not by another norm")
        return RouterSpec(renormalised=p is not None)
    if model_type in ("grok", "grok-1"):
        return RouterSpec(renormalised=False)
    return RouterSpec(renormalised=_flag(d, "_router_renormalised", w, True))
