"""The gated MLP's own twists in a Hugging Face config: gpt-oss's clamped GLU with a sigmoid slope and an
offset on its linear half, as its HF modeling code applies it."""
from __future__ import annotations

from ..errors import InputError

#: gpt-oss's GLU (transformers modeling_gpt_oss.py ``GptOssExperts``): ``gate.clamp(max=limit)``,
#: ``up.clamp(-limit, limit)``, ``(up + 1) * gate * sigmoid(1.702 * gate)``: the sigmoid's slope is
#: ``alpha = 1.702`` (quick GELU) and its linear half is offset by 1
GPT_OSS_GLU_ALPHA = 1.702
GPT_OSS_GLU_OFFSET = 1.0
#: GptOssConfig's ``swiglu_limit`` default (configuration_gpt_oss.py), which every released gpt-oss sets
GPT_OSS_SWIGLU_LIMIT = 7.0


def glu_twists(d: dict, w: str, model_type: str) -> dict:
    """ModelSpec's ``glu_alpha``, ``glu_clamp`` and ``glu_linear_offset`` for gpt-oss (its ``swiglu_limit``,
    else the config class's default 7.0); {} for every other family (x * sigmoid(x), no clamp, no offset).
    The GLU's FLOPs and bytes are a SwiGLU's: these change what the launch must build, not the price.

    Raises:
        InputError: a ``swiglu_limit`` that is not a positive number (names ``w`` and the key).
    """
    if model_type != "gpt_oss":
        return {}
    v = d.get("swiglu_limit", GPT_OSS_SWIGLU_LIMIT)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not v > 0:
        raise InputError(w, "swiglu_limit", f"expected a positive number, got {v!r}")
    return dict(glu_alpha=GPT_OSS_GLU_ALPHA, glu_clamp=float(v), glu_linear_offset=GPT_OSS_GLU_OFFSET)
