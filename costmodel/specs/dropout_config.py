"""Dropout of a Hugging Face config: whether the model trains with it (its masks stored for the backward,
its attention's random draws priced), from the family's attention- and residual-dropout probabilities."""
from __future__ import annotations

from ..errors import InputError


#: Hugging Face keys of the attention-dropout probability (Llama/Qwen/Mistral ``attention_dropout``,
#: GPT-2 ``attn_pdrop``, BERT ``attention_probs_dropout_prob``); transformers' GPT2Config defaults
#: attn_pdrop to 0.1 (configuration_gpt2.py), the other families' configs to 0.0
_ATTN_DROPOUT_KEYS = ("attention_dropout", "attn_pdrop", "attention_probs_dropout_prob")
#: and of the residual (hidden) dropout: Falcon/BLOOM ``hidden_dropout``, GPT-2/DBRX ``resid_pdrop``, GPT-Neo
#: ``resid_dropout``, OPT ``dropout``, BERT ``hidden_dropout_prob``; dropout is one switch, on when either
#: probability is above 0 (as a run's own configuration sets it, costmodel.run_config)
_RESID_DROPOUT_KEYS = ("hidden_dropout", "resid_pdrop", "resid_dropout", "dropout", "hidden_dropout_prob")


def dropout(d: dict, w: str, model_type: str) -> bool:
    """Whether the model trains with dropout (its masks stored, its attention draws priced): the
    catalog's ``_dropout`` where given, else an attention- or residual-dropout probability above 0
    (:data:`_ATTN_DROPOUT_KEYS`, :data:`_RESID_DROPOUT_KEYS`), else GPT2Config's default for ``gpt2``
    configs.

    Raises:
        InputError: ``_dropout`` not true/false, or a probability outside [0, 1).
    """
    given = d.get("_dropout")
    if given is not None:
        if not isinstance(given, bool):
            raise InputError(w, "_dropout", f"expected true or false, got {given!r}")
        return given
    probs = []
    for key in _ATTN_DROPOUT_KEYS + _RESID_DROPOUT_KEYS:
        v = d.get(key)
        if v is None:
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
            raise InputError(w, key, f"expected a dropout probability in [0, 1), got {v!r}")
        probs.append(v)
    return any(v > 0 for v in probs) if probs else model_type == "gpt2"
