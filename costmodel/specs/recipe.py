"""The training recipe: global batch, sequence length, precision and the recipe-level switches."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError

PRECISIONS = ("bf16", "fp16", "fp8")



@dataclass(frozen=True)
class Recipe:
    """The training recipe: global batch (sequences), sequence length (tokens), precision.

    Optimizer is Adam with fp32 master weights (Megatron-LM mixed precision); ``flash_attention``
    False models the unfused attention of pre-2022 Megatron (softmax materialised, s^2 memory);
    ``tp_comm_overlap`` False models Megatron before Transformer Engine's userbuffers (2023), where
    only the backward input-gradient TP collectives overlap (async all-reduce).
    """

    gbs: int
    seq_len: int
    precision: str = "bf16"
    flash_attention: bool = True
    tp_comm_overlap: bool = True

    def __post_init__(self):
        if self.gbs < 1:
            raise InputError("--gbs", "", f"must be >= 1, got {self.gbs}")
        if self.seq_len < 1:
            raise InputError("--seq-len", "", f"must be >= 1, got {self.seq_len}")
        if self.precision not in PRECISIONS:
            raise InputError("--precision", "", f"{self.precision!r} is not one of {', '.join(PRECISIONS)}")
