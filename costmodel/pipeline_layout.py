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

import dataclasses
import re
from dataclasses import dataclass

from .errors import InputError

_SYMBOLS = {"E": "embedding", "t": "transformer layer", "m": "MTP module", "L": "loss"}
#: Megatron-core's two expansions, each applied once over the string in this order
#: (PipelineParallelLayerLayout.parse_str_to_list): a parenthesised group, then a single character
_GROUP = re.compile(r"\(([^)]+)\)\*(\d+)")
_ONE = re.compile(r"(.)\*(\d+)")
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
    """The layout with its cosmetic commas dropped and its repeats written out, as Megatron-core does
    (one pass of ``(...)*N``, then one of ``X*N``: a nested group is left unexpanded, as there).

    Raises:
        InputError: an expansion beyond :data:`_MAX_SYMBOLS`.
    """
    out = text.replace(",", "")
    for pattern in (_GROUP, _ONE):
        total = len(out) + sum(len(mt.group(1)) * int(mt.group(2)) for mt in pattern.finditer(out))
        if total > _MAX_SYMBOLS:
            raise InputError(where, "", f"{text!r} expands to more than {_MAX_SYMBOLS:,} symbols")
        out = pattern.sub(lambda mt: mt.group(1) * int(mt.group(2)), out)
    return out


def layout_text(layers, pp: int, vp: int = 1, mtp_layers: int = 0) -> str:
    """The ``--pipeline-model-parallel-layout`` text of ``layers`` transformer layers per pipeline rank
    (length PP): one '|' segment per virtual stage in model order (virtual stage v of rank s is segment
    v x PP + s), each rank's layers spread over its VP chunks, 'E' the embedding before the first, the
    MTP modules ('m') and the loss ('L') after the last (Megatron-core PipelineParallelLayerLayout)."""
    chunks = [[n // vp + (1 if j < n % vp else 0) for j in range(vp)] for n in layers]
    segs = ["t" * chunks[s][v] for v in range(vp) for s in range(pp)]
    segs[0], segs[-1] = "E" + segs[0], segs[-1] + "m" * mtp_layers + "L"
    return "|".join(segs)


def with_pipeline_layout(model, text: str, pp: int, vp: int, where: str = "--pp-layout"):
    """``(model, layout)``: the model carrying the run's own per-rank split
    (``ModelSpec.pipeline_rank_layers``, which costmodel.layouts prices) and the parsed layout.

    Raises:
        InputError: as :func:`parse_pipeline_layout`.
    """
    placed = parse_pipeline_layout(text, pp, vp, model.num_layers, model.mtp_layers, where=where)
    return dataclasses.replace(model, pipeline_rank_layers=tuple(placed.rank_layers())), placed


def parse_pipeline_layout(text: str, pp: int, vp: int, num_layers: int, mtp_layers: int = 0,
                          where: str = "--pp-layout") -> PipelineLayout:
    """Parse and check a Megatron-core pipeline layout as Megatron-core does (module docstring;
    PipelineParallelLayerLayout.parse_str_to_list and validate_layer_layout): commas are cosmetic,
    a stage may be empty (a trailing '|' adds one).

    Args:
        text: the layout string.
        pp, vp: pipeline and virtual-pipeline sizes (the layout must have PP x VP stages).
        num_layers: the model's transformer layers (the ``t`` must number exactly these).
        mtp_layers: the model's MTP modules (the ``m`` must number exactly these).
        where: the flag or file key named in messages.

    Raises:
        InputError: a character that is not a layer (a space, a nested or unbalanced parenthesis), a
            stage count other than PP x VP, a ``t`` / ``m`` count other than the model's, a first layer
            other than the embedding or a last other than the loss (or either repeated), an MTP module
            before a transformer layer or outside its rank's last virtual stage, or MTP modules split
            over stages (Megatron-core refuses all of these).
    """
    if not isinstance(text, str) or not text.strip():
        raise InputError(where, "", "empty: give the layout, e.g. 'Et|(tt|)*30mL'")
    flat = _expand(text, where)
    bad = sorted(set(flat) - set(_SYMBOLS) - {"|"})
    if bad:
        why = ("; a parenthesis left after the repeats are written out is unbalanced, nested (Megatron-core "
               "expands one level of (...)*N) or without its *N" if {"(", ")"} & set(bad) else "")
        # '*', digits and parentheses belong to the repeats: a stray one is named only when nothing else is
        # wrong (in 't*-16' the '-' is the mistake, not the '*' and '16' it strands)
        odd = [b for b in bad if b not in "*()0123456789"]
        what = (f"{', '.join(repr(b) for b in odd)} {'is not a layout symbol' if len(odd) == 1 else 'are not layout symbols'}"
                if odd else f"{', '.join(repr(b) for b in bad)} left after the repeats are written out (a repeat "
                            "is X*N or (...)*N, N a count)")
        raise InputError(where, "", f"{text!r}: {what} (E embedding, t transformer layer, m MTP module, L loss, "
                                    f"| stage end, X*N and (...)*N repeats, ',' cosmetic){why}")
    stages = tuple(flat.split("|"))
    if len(stages) != pp * vp:
        trailing = " (a trailing '|' opens an empty one)" if flat.endswith("|") else ""
        raise InputError(where, "", f"{text!r} has {len(stages)} stage{'s' if len(stages) != 1 else ''}{trailing}; "
                                    f"PP {pp} x VP {vp} needs {pp * vp}")
    layers = flat.replace("|", "")
    for sym, n in (("t", num_layers), ("m", mtp_layers)):
        got = layers.count(sym)
        if got != n:
            raise InputError(where, "", f"{text!r} places {got} {_SYMBOLS[sym]}s; the model has {n}")
    if layers.count("E") != 1 or not layers.startswith("E"):
        raise InputError(where, "", f"{text!r}: the embedding 'E' must be the first layer, once")
    if layers.count("L") != 1 or not layers.endswith("L"):
        raise InputError(where, "", f"{text!r}: the loss 'L' must be the last layer, once")
    if "m" in layers and "t" in layers[layers.index("m"):]:
        raise InputError(where, "", f"{text!r}: the transformer layers must come before the MTP modules")
    holding = [i for i, st in enumerate(stages) if "m" in st]
    if holding and (len(holding) > 1 or holding[0] // pp != vp - 1):
        raise InputError(where, "", f"{text!r}: the MTP modules must be in one stage, the last virtual stage of its "
                                    "pipeline rank")
    return PipelineLayout(text=text, stages=stages, pp=pp, vp=vp)
