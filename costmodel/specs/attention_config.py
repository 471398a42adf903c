"""Attention twists of a Hugging Face config that change which keys a query sees or how its scores are
formed: sliding windows, Llama 4's chunked local attention and NoPE layers, Gemma 2's soft-capped scores, gpt-oss's
attention sinks (each as the family's HF modeling code applies it)."""
from __future__ import annotations

from ..errors import InputError
from .loading import _get_int


def sliding_attention(d: dict, w: str, model_type: str, layers: int) -> dict:
    """Sliding-window attention, as each family's HF attention applies ``sliding_window``: the
    layers ``layer_types`` marks ``sliding_attention`` (gpt-oss, Gemma 2/3; gpt-oss and Gemma 2
    alternate them when the list is absent, Gemma 3 makes every ``sliding_window_pattern``-th global); every layer of Mistral and Mixtral; Qwen2/Qwen3 (MoE) layers from
    ``max_window_layers`` on when ``use_sliding_window``; {} otherwise.  Returns the window, the count of
    sliding layers and which they are (0-indexed; () where every layer slides).

    Raises:
        InputError: ``layer_types`` of the wrong length, or sliding layers without a window.
    """
    win = _get_int(d, ("sliding_window",), w, required=False, default=0, minimum=0)
    lt = d.get("layer_types")
    if isinstance(lt, list) and len(lt) != layers:
        raise InputError(w, "layer_types", f"lists {len(lt)} layers, the model has {layers}")
    if model_type in ("gpt_oss", "gemma2") and lt is None:
        # both alternate sliding and full layers, the first sliding, where the list is absent (HF
        # modeling_gemma2.py before layer_types: is_sliding = not bool(layer_idx % 2))
        lt = ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(layers)]
    elif model_type == "gemma3_text" and lt is None:
        # every sliding_window_pattern-th layer global, the rest local (Gemma3TextConfig.layer_types:
        # sliding unless (i + 1) % sliding_window_pattern == 0)
        every = _get_int(d, ("sliding_window_pattern",), w, minimum=1)
        lt = ["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(layers)]
    if isinstance(lt, list):
        at = tuple(i for i, x in enumerate(lt) if x == "sliding_attention")
        if at and not win:
            raise InputError(w, "sliding_window", f"missing or 0, but layer_types marks {len(at)} sliding layers")
    elif model_type in ("mistral", "mixtral"):
        at = tuple(range(layers))
    elif model_type in ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe") and d.get("use_sliding_window"):
        at = tuple(range(_get_int(d, ("max_window_layers",), w, required=False, default=0, minimum=0), layers))
    else:
        at = ()
    if not (win and at):
        return {}
    return dict(sliding_window=win, sliding_layers=len(at), sliding_layer_indices=() if len(at) == layers else at)


def llama4_attention(d: dict, w: str, model_type: str, layers: int) -> dict:
    """Llama 4's attention twists (HF modeling_llama4.py, Llama4TextConfig): ``no_rope_layers`` marks 1
    (RoPE layers; its default: every layer but each ``no_rope_layer_interval``-th, 4) and 0 (NoPE layers,
    no rotary embedding: ``nope_layer_indices``, 0-indexed); with ``attention_chunk_size`` C set, the RoPE
    layers attend within their C-token chunk, the NoPE layers globally (``layer_types``
    ``chunked_attention`` entries where given); ``use_qk_norm`` (default true) a weightless L2 norm of Q
    and K on the RoPE layers (Llama4TextL2Norm, built where ``use_qk_norm and use_rope``).  {} for other
    families.

    Raises:
        InputError: ``no_rope_layers`` of the wrong length or not 0/1.
    """
    if model_type != "llama4_text":
        return {}
    chunk = _get_int(d, ("attention_chunk_size",), w, required=False, default=0, minimum=0)
    nrl = d.get("no_rope_layers")
    if not nrl:
        interval = _get_int(d, ("no_rope_layer_interval",), w, required=False, default=4)
        nrl = [int((i + 1) % interval != 0) for i in range(layers)]
    if not isinstance(nrl, list) or len(nrl) != layers or any(x not in (0, 1) for x in nrl):
        raise InputError(w, "no_rope_layers", f"expected {layers} entries of 0 or 1")
    lt = d.get("layer_types")
    n = (sum(1 for x in lt if x == "chunked_attention") if isinstance(lt, list) else sum(nrl)) if chunk else 0
    out = dict(nope_layer_indices=tuple(i for i, x in enumerate(nrl) if x == 0),
               qk_l2_norm=bool(d.get("use_qk_norm", True)))
    return dict(out, attention_chunk=chunk, chunked_layers=n) if n else out


def softcap(d: dict, w: str) -> float:
    """Gemma 2's ``attn_logit_softcapping`` (Gemma2Config: 50.0; None or absent: no capping), a cap
    on the attention scores, which fused attention kernels must support (costmodel.stack_rules).

    Returns the cap (dimensionless, as the scores; 0.0: no capping). Raises InputError (on ``w``,
    field attn_logit_softcapping) when the value is neither null nor a positive number (a bool is refused).
    """
    v = d.get("attn_logit_softcapping")
    if v is None:
        return 0.0
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise InputError(w, "attn_logit_softcapping", f"expected a positive number or null, got {v!r}")
    return float(v)


def score_twists(d: dict, w: str, model_type: str) -> dict:
    """The twists of the softmax over a query's scores, as ModelSpec fields: ``attn_softcap``
    (:func:`softcap`) and ``attention_sinks``, gpt-oss's learnable logit per head that joins every row's
    softmax and takes no value (transformers modeling_gpt_oss.py: ``GptOssAttention.sinks``, one per
    attention head, concatenated to the scores before the softmax; Megatron-core's ``softmax_type``
    'learnable').  Raises InputError as :func:`softcap` does."""
    return dict(attn_softcap=softcap(d, w), attention_sinks=model_type == "gpt_oss")
