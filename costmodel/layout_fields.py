"""The fields of a parallel layout: the one list the layout table, the cost terms' dedupe keys, the CLI
flags of ``predict``/``compare`` and the reports are generated from (Megatron-core semantics:
costmodel.layouts), and the view a cost term gets of the fields it declares."""
from __future__ import annotations

from dataclasses import dataclass

from .recipe_switches import NamedFlag

RECOMPUTE = ("none", "selective", "full")


@dataclass(frozen=True)
class LayoutField(NamedFlag):
    """One field of a parallel layout: the single list the table, the dedupe keys of the cost terms,
    the CLI flags of ``predict``/``compare`` and the reports are generated from.

    Attributes:
        name: attribute of :class:`LayoutTable` and key of a layout dict.
        kind: 'degree' (integer >= 1), 'int' (integer), 'choice' (index into ``choices``) or 'bool'.
        help: one line for the CLI.
        default: value ``predict`` uses when the flag is not given (None: derived, as DP is).
        choices: names of a 'choice' field (stored as their index).
        minimum, maximum: accepted integer range of an 'int' field.
    """

    name: str
    kind: str
    help: str
    default: object = None
    choices: tuple = ()
    minimum: int = 0
    maximum: int = 0


#: every layout field, in table and report order (Megatron-core semantics, module docstring)
LAYOUT_FIELDS = (
    LayoutField("tp", "degree", "Tensor-parallel size.", 1),
    LayoutField("pp", "degree", "Pipeline-parallel size.", 1),
    LayoutField("dp", "degree", "Data-parallel size (default: GPUs / (TP x PP x CP)).", None),
    LayoutField("cp", "degree", "Context-parallel size.", 1),
    LayoutField("ep", "degree", "Expert-parallel size.", 1),
    LayoutField("etp", "degree", "Expert tensor-parallel size: the TP of the expert GEMMs (Megatron "
                "--expert-tensor-parallel-size; default: TP).", None),
    LayoutField("vp", "degree", "Virtual pipeline chunks per rank (interleaved 1F1B).", 1),
    LayoutField("mbs", "degree", "Micro-batch size, sequences.", 1),
    LayoutField("recompute", "choice", "Activation recomputation: none, selective or full (predict also takes "
                "auto: the least that fits).", "none", choices=RECOMPUTE),
    LayoutField("recompute_num_layers", "int", "With --recompute full: layers recomputed per pipeline chunk "
                "(Megatron --recompute-method block --recompute-num-layers N); 0 recomputes every layer.", 0,
                minimum=0, maximum=1_000_000),
    LayoutField("zero", "int", "0 DDP, 1 distributed optimizer, 2, 3 FSDP.", 1, minimum=0, maximum=3),
    LayoutField("sp", "bool", "Sequence parallelism (applies when TP > 1)", True),
    LayoutField("overlap", "bool", "Communication may hide under compute at all (off: every collective exposed, "
                "a what-if); which overlaps run is the recipe's (--dp-overlap, --tp-comm-overlap, --pp-overlap)", True),
    LayoutField("dp_replicate", "degree", "HSDP: replicas of the ZeRO-sharded states across DP, each sharded over "
                "DP x CP / this (Megatron --num-distributed-optimizer-instances, torchtitan "
                "data_parallel_replicate_degree; 1: one shard group).", 1),
)
FIELDS = tuple(f.name for f in LAYOUT_FIELDS)
FIELD_SPECS = {f.name: f for f in LAYOUT_FIELDS}
_BOOL_FIELDS = tuple(f.name for f in LAYOUT_FIELDS if f.kind == "bool")
_CHOICE_FIELDS = {f.name: f.choices for f in LAYOUT_FIELDS if f.kind == "choice"}


def uses_layout_fields(*names: str):
    """Declare the layout fields a cost term reads (decorator); raises ValueError on a name not in :data:`FIELDS`.

    :func:`costmodel.predict.predict_table` evaluates the term on the distinct rows of exactly these
    fields and hands it a :class:`LayoutView` that holds nothing else, so a term that reads an
    undeclared field fails at once instead of sharing results between layouts that differ in it.
    """
    unknown = set(names) - set(FIELDS)
    if unknown:
        raise ValueError(f"unknown layout fields {sorted(unknown)}")

    def mark(fn):
        fn.layout_fields = tuple(names)
        return fn
    return mark


class LayoutView:
    """Some fields of a :class:`LayoutTable` (arrays of equal length); reading another field raises
    AttributeError naming it (see :func:`uses_layout_fields`)."""

    __slots__ = ("_cols", "_n")

    def __init__(self, cols: dict, n: int):
        object.__setattr__(self, "_cols", cols)
        object.__setattr__(self, "_n", n)

    def __getattr__(self, name):
        try:
            return self._cols[name]
        except KeyError:
            raise AttributeError(f"layout field {name!r} is read but not declared by the cost term "
                                 f"(declared: {', '.join(self._cols)}): add it to its uses_layout_fields") from None

    def __len__(self) -> int:
        return self._n
