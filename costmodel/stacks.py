"""Training stacks and the defaults each one runs with: the recipe switches the cost model has for them.

A stack's defaults are what its own code does when a user sets nothing (each cited below); a recipe
flag the user gives overrides them.  The model's switches today are: fused (flash) attention,
Transformer Engine's TP-communication overlap, the optimizer, and Megatron's vocabulary padding.

=====================  =======  =======  =========  =========================================================
stack                  flash    TP-comm  optimizer  source of the defaults
                       attn     overlap
=====================  =======  =======  =========  =========================================================
megatron               yes      off      adam       Megatron-core (TE fused attention; ``--tp-comm-overlap``
                                                    defaults to False, megatron/training/arguments.py;
                                                    ``--optimizer adam``, its Adam is AdamW)
megatron-legacy        no       off      adam       Megatron-LM 2021-22 (SC21, Korthikanti et al. 2022):
                                                    before flash attention and Transformer Engine
megatron-deepspeed     no       off      adam       Megatron-DeepSpeed of BigScience (BLOOM, 2022)
nemo                   yes      on       adam       NeMo 2 performance recipes (TE; ``tp_comm_overlap=True``
                                                    in the LLM pre-training recipes for TP > 1)
torchtitan             yes      off      adamw      torchtitan (SDPA flash backend; async TP is its own
                                                    switch, off by default; AdamW in its configs)
llm-foundry            yes      off      lionw      llm-foundry MPT yamls (``attn_impl: flash`` or triton;
                                                    ``optimizer: decoupled_lionw``)
deepspeed              yes      off      adamw      DeepSpeed with HF transformers (flash-attention
                                                    ``attn_implementation``; AdamW)
=====================  =======  =======  =========  =========================================================
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import InputError
from .specs import Recipe


@dataclass(frozen=True)
class Stack:
    """One training stack's defaults (module docstring for the sources).

    Attributes:
        name: the ``--stack`` value.
        flash_attention: fused attention (no s^2 tensor in HBM).
        tp_comm_overlap: Transformer Engine's userbuffer TP-communication overlap on by default.
        optimizer: the optimizer its examples use (costmodel.specs.recipe.OPTIMIZERS).
        pads_vocab: the vocabulary is padded to a multiple of 128 x TP (Megatron
            ``--make-vocab-size-divisible-by 128``).
    """

    name: str
    flash_attention: bool
    tp_comm_overlap: bool
    optimizer: str
    pads_vocab: bool


STACKS = {s.name: s for s in (
    Stack("megatron", True, False, "adam", True),
    Stack("megatron-legacy", False, False, "adam", True),
    Stack("megatron-deepspeed", False, False, "adam", True),
    Stack("nemo", True, True, "adam", True),
    Stack("torchtitan", True, False, "adamw", False),
    Stack("llm-foundry", True, False, "lionw", False),
    Stack("deepspeed", True, False, "adamw", False),
)}


def stack_recipe(stack: Stack, gbs: int, seq_len: int, precision: str, *, flash_attention: bool | None = None,
                 tp_comm_overlap: bool | None = None, optimizer: str | None = None) -> Recipe:
    """The recipe of a run on ``stack``: what the caller gives, the stack's defaults for the rest.

    Raises:
        InputError: a bad recipe value (costmodel.specs.Recipe).
    """
    pick = lambda given, default: default if given is None else given  # noqa: E731
    return Recipe(gbs=gbs, seq_len=seq_len, precision=precision,
                  flash_attention=pick(flash_attention, stack.flash_attention),
                  tp_comm_overlap=pick(tp_comm_overlap, stack.tp_comm_overlap),
                  optimizer=pick(optimizer, stack.optimizer), stack=stack.name)


def get_stack(name: str, where: str = "--stack") -> Stack:
    """The :class:`Stack` called ``name``.

    Raises:
        InputError: an unknown name (naming ``where`` and the known stacks).
    """
    try:
        return STACKS[name]
    except KeyError:
        raise InputError(where, "", f"{name!r} is not one of {', '.join(STACKS)}") from None
