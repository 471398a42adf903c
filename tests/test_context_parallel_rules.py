"""Context-parallel layouts a stack cannot run (costmodel/context_parallel_rules.py)."""
import pytest

from costmodel.errors import InputError
from costmodel.layouts import check_layout
from costmodel.specs import load_model
from costmodel.stacks import get_stack, stack_recipe

from conftest import layout


def _titan(seq_len):
    return stack_recipe(get_stack("torchtitan"), 64, seq_len, "bf16")


def test_torchtitan_needs_microbatch_tokens_divisible_by_tp_times_2cp():
    """torchtitan's trainer raises unless mbs x seq_len divides by TP (sequence parallel) x 2 CP: 131,080
    tokens at TP 8 CP 4 (divisor 64) had been priced; 131,072 runs."""
    m = load_model("llama3.1-8b")
    row = dict(tp=8, pp=1, dp=1, cp=4, mbs=1, zero=3, sp=True)
    with pytest.raises(InputError, match=r"mbs x seq_len\) divisible by TP x 2 CP"):
        check_layout(layout(**row), m, _titan(131080), 32, 8)
    check_layout(layout(**row), m, _titan(131072), 32, 8)
    # Megatron's own rule (seq_len / CP divisible by TP) leaves 131,080 / 4 = 32,770 odd at TP 8 too, so the
    # torchtitan rule is the one that speaks where Megatron's does not: seq 65,544 at TP 4 CP 2
    with pytest.raises(InputError, match="torchtitan needs"):
        check_layout(layout(**dict(row, tp=4, cp=2, dp=4)), m, _titan(65544), 32, 8)


def test_torchtitan_shards_over_the_cp_ranks():
    """ParallelDims.fsdp_enabled is dp_shard or CP: CP > 1 without sharding (DDP, ZeRO 0) cannot run there
    (recommend had picked TP4 DP2 CP4 at ZeRO 0); Megatron's DDP with CP can."""
    m = load_model("llama3.1-8b")
    row = dict(tp=4, pp=1, dp=2, cp=4, mbs=1, zero=0, sp=True)
    with pytest.raises(InputError, match="torchtitan shards the model over the CP ranks"):
        check_layout(layout(**row), m, _titan(131072), 32, 8)
    check_layout(layout(**dict(row, zero=3)), m, _titan(131072), 32, 8)
    check_layout(layout(**row), m, stack_recipe(get_stack("megatron"), 64, 131072, "bf16"), 32, 8)
