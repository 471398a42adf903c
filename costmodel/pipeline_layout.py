"""Megatron-core's ``--pipeline-model-parallel-layout``: a run's own placement of the embedding,
transformer layers, multi-token-prediction modules and loss on the virtual pipeline stages.

Syntax (megatron/core/transformer/pipeline_parallel_layer_layout.py, PipelineParallelLayerLayout.from_str,
and the DeepSeek-V3 recipes that use it, e.g. ``"Et|(tt|)*30mL"`` for 61 layers on PP 16 x VP 2):
``|`` ends a virtual stage; ``E`` is the embedding, ``t`` a transformer (decoder) layer, ``m`` an MTP
module, ``L`` the loss; ``X*N`` repeats the symbol X, ``(...)*N`` the group, which may hold ``|``.
There are PP x VP virtual stages in model order; stage i runs on pipeline rank i mod PP as its
virtual chunk i div PP (Megatron's interleaved schedule).
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .errors import InputError

_SYMBOLS = {"E": "embedding", "t": "transformer layer", "m": "MTP module", "L": "loss"}
_GROUP = re.compile(r"\(([^()]*)\)\*(\d+)")
_ONE = re.compile(r"([EtmL])\*(\d+)")
#: a layout of more symbols than this is not a pipeline anyone runs (and would only cost memory)
_MAX_SYMBOLS = 100_000


@dataclass(frozen=True)
class PipelineLayout:
    """A parsed layout.

    Attributes:
        text: the layout as given.
        stages: each virtual stage's symbols in model order (PP x VP strings of E/t/m/L).
        pp, vp: the pipeline and virtual-pipeline sizes it was checked against.
    """
    text: str
    stages: tuple
    pp: int
    vp: int

    def rank_layers(self) -> list[int]:
        """Transformer layers held by each pipeline rank (length PP): the ``t`` of its VP chunks."""
        return [sum(self.stages[v * self.pp + s].count("t") for v in range(self.vp)) for s in range(self.pp)]

    def rank_mtp(self) -> list[int]:
        """MTP modules held by each pipeline rank (length PP)."""
        return [sum(self.stages[v * self.pp + s].count("m") for v in range(self.vp)) for s in range(self.pp)]

    def describe(self) -> str:
        """Transformer layers per pipeline rank, '|'-separated, with '+Nm' where a rank holds MTP modules."""
        return "|".join(f"{n}" + (f"+{k}m" if k else "") for n, k in zip(self.rank_layers(), self.rank_mtp()))


def _expand(text: str, where: str) -> str:
    """The layout with every repetition written out.

    Raises:
        InputError: a repetition count of 0, or an expansion beyond :data:`_MAX_SYMBOLS`.
    """
    out = text.replace(" ", "")
    for pattern in (_GROUP, _ONE):
        while True:
            mt = pattern.search(out)
            if mt is None:
                break
            n = int(mt.group(2))
            if n < 1:
                raise InputError(where, "", f"repetition '*{mt.group(2)}' in {text!r} must be >= 1")
            if len(mt.group(1)) * n > _MAX_SYMBOLS:
                raise InputError(where, "", f"{text!r} expands to more than {_MAX_SYMBOLS:,} symbols")
            out = out[:mt.start()] + mt.group(1) * n + out[mt.end():]
    return out


def parse_pipeline_layout(text: str, pp: int, vp: int, num_layers: int, mtp_layers: int = 0,
                          where: str = "--pp-layout") -> PipelineLayout:
    """Parse and check a Megatron-core pipeline layout (module docstring for the syntax).

    Args:
        text: the layout string.
        pp, vp: pipeline and virtual-pipeline sizes (the layout must have PP x VP stages).
        num_layers: the model's transformer layers (the ``t`` must number exactly these).
        mtp_layers: the model's MTP modules (the ``m`` must number exactly these).
        where: the flag or file key named in messages.

    Raises:
        InputError: an unknown symbol or unbalanced parenthesis, a stage count other than PP x VP, a
            ``t`` / ``m`` count other than the model's, an embedding not at the start of the first
            stage or a loss not at the end of the last (or either missing or repeated), or an empty
            stage (Megatron-core refuses all of these).
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError(where, "", "empty: give the layout, e.g. 'Et|(tt|)*30mL'")
    flat = _expand(text, where)
    bad = sorted(set(flat) - set(_SYMBOLS) - {"|"})
    if bad:
        raise InputError(where, "", f"{text!r}: {', '.join(repr(b) for b in bad)} "
                                    f"{'is not a layout symbol' if len(bad) == 1 else 'are not layout symbols'} "
                                    "(E embedding, t transformer layer, m MTP module, L loss, | stage end, "
                                    "X*N and (...)*N repeats)")
    stages = tuple(flat.split("|"))
    if len(stages) > 1 and stages[-1] == "":
        stages = stages[:-1]              # a trailing '|' closes the last stage
    if len(stages) != pp * vp:
        raise InputError(where, "", f"{text!r} has {len(stages)} stages; PP {pp} x VP {vp} needs {pp * vp}")
    empty = [i for i, s in enumerate(stages) if not s]
    if empty:
        raise InputError(where, "", f"{text!r}: virtual stage {empty[0]} is empty")
    for sym, n in (("t", num_layers), ("m", mtp_layers)):
        got = flat.count(sym)
        if got != n:
            raise InputError(where, "", f"{text!r} places {got} {_SYMBOLS[sym]}s; the model has {n}")
    if flat.count("E") != 1 or not stages[0].startswith("E"):
        raise InputError(where, "", f"{text!r}: the embedding 'E' must open the first stage, once")
    if flat.count("L") != 1 or not stages[-1].endswith("L"):
        raise InputError(where, "", f"{text!r}: the loss 'L' must close the last stage, once")
    return PipelineLayout(text=text, stages=stages, pp=pp, vp=vp)
