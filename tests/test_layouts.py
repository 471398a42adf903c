"""Layout validity (Megatron-core rules), enumeration and rank-order group placement."""
import json
import math

import numpy as np
import pytest

from costmodel.comm import group_span
from costmodel.errors import InputError
from costmodel.layouts import check_layout, enumerate_layouts, validity
from costmodel.specs import Recipe, load_model

from conftest import layout

L70 = load_model("llama3-70b")
MIX = load_model("mixtral-8x7b")
R = Recipe(gbs=128, seq_len=8192, pp_overlap=True)      # Megatron-core runs interleaving with P2P overlap


@pytest.mark.parametrize("kw,rule", [
    (dict(tp=4, pp=4, dp=4), "must equal the number of GPUs"),
    (dict(tp=16, pp=2, dp=1), "TP must divide the GPUs of one NVLink domain (8"),
    (dict(tp=4, pp=3, dp=2, cp=1), "must equal"),
    (dict(tp=4, pp=8, dp=1, vp=3), "divisible by PP x VP"),
    (dict(tp=8, pp=1, dp=4, mbs=3), "gbs (128) must be divisible by DP x mbs"),
    (dict(tp=8, pp=1, dp=4, vp=2), "VP > 1 needs PP > 1"),
    (dict(tp=8, pp=1, dp=1, cp=4, sp=True), "seq_len (8192) must be divisible by 2 x CP"),
])
def test_invalid_layouts_name_their_rule(kw, rule):
    t = layout(**kw)
    n = 32 if "cp" not in kw else 32
    with pytest.raises(InputError, match=None) as e:
        check_layout(t, L70, R if kw.get("cp", 1) < 4 else Recipe(gbs=128, seq_len=8190), n, 8)
    assert rule.split(" (")[0] in str(e.value)


def test_partial_recompute_rules():
    """Llama-3-70B (80 layers) at PP4 VP2: 10 layers per chunk.  --recompute-num-layers 10 is the whole
    chunk, 11 is more than it has; torchtitan has no partial recompute (it checkpoints whole layers)."""
    ok = layout(tp=8, pp=4, vp=2, recompute="full", recompute_num_layers=10)
    code, _ = validity(ok, L70, R, 32, 8)
    assert code[0] == -1
    code, msgs = validity(layout(tp=8, pp=4, vp=2, recompute="full", recompute_num_layers=11), L70, R, 32, 8)
    assert "must not exceed the layers of one pipeline chunk" in msgs[code[0]]
    tt = Recipe(gbs=128, seq_len=8192, stack="torchtitan")
    ok = layout(tp=8, pp=4, vp=2, sp=True, recompute="full", recompute_num_layers=10)
    code, msgs = validity(ok, L70, tt, 32, 8)
    assert "needs a Megatron-family stack" in msgs[code[0]] and "torchtitan" in msgs[code[0]]
    code, _ = validity(layout(tp=8, pp=4, vp=2, sp=True, recompute="full"), L70, tt, 32, 8)
    assert code[0] == -1
    code, msgs = validity(layout(tp=8, pp=4, vp=2, recompute="full"), L70, tt, 32, 8)
    assert "torchtitan runs sequence parallelism" in msgs[code[0]]


def test_moe_rules():
    code, msgs = validity(layout(tp=1, dp=32, ep=3), MIX, R, 32, 8)
    assert "EP must divide the number of experts" in msgs[code[0]]
    # Megatron-core's expert grid: EP x ETP ranks over TP x DP x CP (16 here)
    code, msgs = validity(layout(tp=8, dp=2, pp=2, ep=8, sp=True), MIX, R, 32, 8)
    assert "EP x ETP must not exceed the GPUs (32)" in msgs[code[0]]     # ETP = TP = 8: 64 > 32 GPUs
    code, msgs = validity(layout(tp=8, dp=2, pp=2, ep=4, sp=True), MIX, R, 32, 8)
    assert "EP x ETP must divide TP x DP x CP" in msgs[code[0]]          # 32 GPUs, but 32 > TP x DP x CP 16
    code, _ = validity(layout(tp=8, dp=2, pp=2, ep=8, etp=1, sp=True), MIX, R, 32, 8)
    assert code[0] == -1                                                  # ETP 1: 8 divides 16
    code, _ = validity(layout(tp=2, dp=8, pp=2, ep=8, sp=True), MIX, R, 32, 8)
    assert code[0] == -1
    code, msgs = validity(layout(tp=2, dp=8, pp=2, ep=8, sp=False), MIX, R, 32, 8)
    assert "MoE with TP > 1 needs sequence parallelism" in msgs[code[0]]
    code, msgs = validity(layout(tp=2, dp=16, etp=1), L70, R, 32, 8)
    assert "ETP applies to MoE models" in msgs[code[0]]


def test_context_parallelism_skips_sliding_window_models_on_transformer_engine():
    """Transformer Engine's CP attention asserts 'Context parallelism does not support sliding window
    attention with cp_comm_type=p2p' (a2a and all_gather only), and the model prices the p2p ring: a
    Megatron or NeMo layout of GPT-OSS (alternating 128-token windows) or Mistral 7B (every layer
    windowed) with CP > 1 is refused by name and recommend offers none; a full-attention model's CP
    stays, as does CP 1."""
    for name in ("gpt-oss-120b", "mistral-7b"):
        m = load_model(name)
        assert m.sliding_window and m.sliding_layers
        for stack in ("megatron", "nemo"):
            r = Recipe(gbs=64, seq_len=8192, stack=stack)
            code, msgs = validity(layout(tp=1, dp=8, cp=2, ep=8 if m.is_moe else 1, etp=1 if m.is_moe else None),
                                  m, r, 16, 8)
            assert "sliding-window layers" in msgs[code[0]] and "--cp-comm-type a2a or all_gather" in msgs[code[0]]
        ok = layout(tp=1, dp=16, ep=8 if m.is_moe else 1, etp=1 if m.is_moe else None)
        assert validity(ok, m, Recipe(gbs=64, seq_len=8192), 16, 8)[0][0] == -1
        grid = enumerate_layouts(m, Recipe(gbs=64, seq_len=8192), 64, 8)
        assert len(grid) and (np.asarray(grid.cp) == 1).all()
    assert validity(layout(tp=1, dp=8, cp=2), L70, Recipe(gbs=64, seq_len=8192), 16, 8)[0][0] == -1
    # Mistral's 4096-token window over a 4096-token sequence is full attention: its CP stays
    assert validity(layout(tp=1, dp=8, cp=2), load_model("mistral-7b"), Recipe(gbs=64, seq_len=4096), 16, 8)[0][0] == -1


def test_the_stacks_before_transformer_engine_refuse_what_it_brought():
    """Megatron-LM 2021-22 and BigScience's Megatron-DeepSpeed train in bf16 or fp16: FP8 and TE's
    userbuffer TP overlap are refused by flag; 2021-22 Megatron-LM's distributed optimizer keeps the
    whole gradient buffer (ZeRO-1), so ZeRO-2 is refused and recommend never answers it."""
    from dataclasses import replace
    from costmodel.stacks import get_stack, stack_recipe
    for name in ("megatron-legacy", "megatron-deepspeed"):
        with pytest.raises(InputError, match="predates Transformer Engine's low-precision training"):
            stack_recipe(get_stack(name), 64, 2048, "fp8")
        with pytest.raises(InputError, match="userbuffer overlap"):
            stack_recipe(get_stack(name), 64, 2048, "bf16", tp_comm_overlap=True)
        assert stack_recipe(get_stack(name), 64, 2048, "fp16").precision == "fp16"
    legacy = replace(R, stack="megatron-legacy")
    assert get_stack("megatron-legacy").zero_stages == (0, 1)
    code, msgs = validity(layout(tp=4, pp=4, dp=2, zero=2), load_model("gpt3-175b"), legacy, 32, 8)
    assert "ZeRO stages 0, 1 only" in msgs[code[0]]


def test_each_stack_refuses_what_its_framework_asserts():
    """DeepSpeed's engine refuses MoE under ZeRO-3 and its pipeline ZeRO-2/3 (runtime/engine.py, runtime/pipe/
    engine.py asserts); Megatron-LM 2021-22 has no MoE layers.  ZeRO-2 with MoE, and ZeRO-1 under a
    DeepSpeed pipeline (BLOOM's layout), stay valid."""
    from dataclasses import replace
    ds, mds, legacy = (replace(R, stack=s) for s in ("deepspeed", "megatron-deepspeed", "megatron-legacy"))
    code, msgs = validity(layout(dp=32, ep=2, zero=3), MIX, ds, 32, 8)
    assert "refuses MoE under ZeRO-3" in msgs[code[0]]
    assert validity(layout(dp=32, ep=2, zero=2), MIX, ds, 32, 8)[0][0] == -1
    code, msgs = validity(layout(tp=2, pp=2, dp=8, zero=2), L70, mds, 32, 8)
    assert "refuses ZeRO-2 and ZeRO-3" in msgs[code[0]]
    assert validity(layout(tp=2, pp=2, dp=8, zero=1), L70, mds, 32, 8)[0][0] == -1
    code, msgs = validity(layout(dp=32, ep=8), MIX, legacy, 32, 8)
    assert "has no MoE layers" in msgs[code[0]]
    assert validity(layout(dp=32), L70, legacy, 32, 8)[0][0] == -1
    # Megatron-core's distributed optimizer keeps the whole gradient buffer: a ZeRO-2 priced with sharded
    # gradients would run as ZeRO-1 under the flags printed for it (--use-distributed-optimizer)
    for stack in ("megatron", "nemo"):
        code, msgs = validity(layout(dp=32, zero=2), L70, replace(R, stack=stack), 32, 8)
        assert "ZeRO stages 0, 1, 3 only (Megatron-core" in msgs[code[0]]
        assert all(validity(layout(dp=32, zero=z), L70, replace(R, stack=stack), 32, 8)[0][0] == -1 for z in (0, 1, 3))
    assert validity(layout(dp=32, zero=2), L70, ds, 32, 8)[0][0] == -1
    # Megatron-LM's validate_args: the interleaved schedule without P2P overlap only at PP > 2; the search
    # applies it too, so recommend never prints a launch Megatron refuses; torchtitan interleaves at PP 2
    no_p2p = replace(R, pp_overlap=False)
    code, msgs = validity(layout(pp=2, vp=4, dp=16), L70, no_p2p, 32, 8)
    assert "--no-pp-overlap" in msgs[code[0]] and "only at PP > 2" in msgs[code[0]]
    assert validity(layout(pp=4, vp=4, dp=8), L70, no_p2p, 32, 8)[0][0] == -1
    assert validity(layout(pp=2, vp=4, dp=16), L70, R, 32, 8)[0][0] == -1
    assert validity(layout(pp=2, vp=4, dp=16, zero=1), L70, replace(no_p2p, stack="torchtitan"), 32, 8)[0][0] == -1
    # NeMo builds Megatron-core's schedules without Megatron-LM's validate_args (a NeMo 1 file without
    # overlap_p2p_comm had been refused naming --no-pp-overlap, a flag the user never gave)
    assert validity(layout(pp=2, vp=4, dp=16), L70, replace(no_p2p, stack="nemo"), 32, 8)[0][0] == -1
    t = enumerate_layouts(L70, no_p2p, 32, 8)
    assert len(t) and not ((t.vp > 1) & (t.pp <= 2)).any() and ((t.vp > 1) & (t.pp > 2)).any()


def test_enumeration_is_exactly_the_valid_grid():
    t = enumerate_layouts(L70, R, 32, 8)
    code, _ = validity(t, L70, R, 32, 8, uneven_pp="any")
    assert len(t) > 0 and (code < 0).all()
    assert (t.tp * t.pp * t.dp * t.cp == 32).all()
    assert set(np.unique(t.tp)) == {1, 2, 4, 8}
    # brute force over the same grid counts the same layouts
    n = 0
    for tp in (1, 2, 4, 8):
        for cp in (1, 2, 4, 8, 16, 32):
            for pp in (1, 2, 4, 5, 8, 10, 16, 20, 32, 40, 80):      # 32: 80 layers split unevenly, VP 1
                if 32 % (tp * cp * pp):
                    continue
                dp = 32 // (tp * cp * pp)
                vps = {v for v in range(1, 81) if (80 // pp) % v == 0 and (v == 1 or pp > 1)} if 80 % pp == 0 else {1}
                # or equal chunks of the 80 layers plus the embedding and the loss (82 = 2 x 41)
                vps |= {v for v in range(2, 83) if 82 % pp == 0 and (82 // pp) % v == 0 and pp > 1}
                # neither: Megatron-core's own layout interleaves uneven ranks at VP 2 and 4 where the fullest
                # rank's layers make equal chunks (PP 32: 3 layers, none)
                vps |= {v for v in (2, 4) if pp > 1 and vps == {1} and pp * v <= 80 and -(-80 // pp) % v == 0}
                for vp in vps:
                    for mbs in (1, 2, 4, 8, 16):
                        m = 128 / (dp * mbs)
                        if m != int(m) or (vp > 1 and m % pp):
                            continue
                        zeros = 1 if dp * cp == 1 else (3 if pp == 1 else 2)   # ZeRO 0,1 (+3 without PP)
                        # ZeRO 3 also as HSDP where DP x CP leaves the 8-GPU node: sharded over its share of
                        # the node (gcd), replicated across (Megatron-FSDP's instances)
                        shard = math.gcd(8 // tp, dp * cp)
                        zeros += pp == 1 and shard > 1 and dp * cp // shard > 1
                        n += 2 * zeros   # recompute none/full (selective = none under flash)
    assert len(t) == n


class _Recorded:
    """A recipe whose every attribute read is recorded."""

    def __init__(self, recipe):
        object.__setattr__(self, "_recipe", recipe)
        object.__setattr__(self, "read", set())

    def __getattr__(self, name):
        self.read.add(name)
        return getattr(self._recipe, name)


@pytest.mark.parametrize("model, stack, kw", [
    ("llama3-70b", "megatron", {}), ("mixtral-8x7b", "nemo", dict(moe_ep_overlap=True)),
    ("deepseek-v3", "megatron", dict(moe_dispatcher="flex", moe_grouped_gemm=True)),
    ("llama3-8b", "torchtitan", {}), ("llama3-8b", "deepspeed", {}), ("llama3-8b", "llm-foundry", {}),
    ("gpt3-175b", "megatron-legacy", {}), ("llama3-8b", "megatron-deepspeed", {})])
def test_enumeration_reads_only_its_rule_fields_of_the_recipe(model, stack, kw):
    """enumerate_layouts keeps its last table by the recipe fields its grid and validity rules read
    (RULE_RECIPE_FIELDS), so that recommend's switch variants share it: a recipe that records its reads
    is read in no other field, on every stack, dense and MoE; and a variant apart in a rule field
    (the EP overlap) is enumerated anew, one apart elsewhere (router fusion) shares the table."""
    import dataclasses
    from costmodel.layouts import RULE_RECIPE_FIELDS, _enumerate
    from costmodel.stacks import get_stack, stack_recipe
    m = load_model(model)
    r = stack_recipe(get_stack(stack), 256, 4096, "bf16", **kw)
    rec = _Recorded(r)
    t = _enumerate(m, rec, 64, 8, (1, 2), (0, 1, 3), (True, False), (True, False), {})
    assert len(t) > 0
    assert {"stack", "gbs", "seq_len"} <= rec.read <= set(RULE_RECIPE_FIELDS), rec.read - set(RULE_RECIPE_FIELDS)
    if m.is_moe and stack == "nemo":
        same = enumerate_layouts(m, dataclasses.replace(r, moe_router_fusion=True), 64, 8)
        base = enumerate_layouts(m, r, 64, 8)
        assert all((getattr(same, f) == getattr(base, f)).all() for f in ("tp", "pp", "ep", "mbs", "recompute"))
        # the EP overlap runs without full recompute (costmodel.layouts._ep_overlap_rules): fewer layouts
        off = enumerate_layouts(m, dataclasses.replace(r, moe_ep_overlap=False), 64, 8)
        assert len(off) != len(base)


def test_group_span_follows_megatron_rank_order():
    # TP=4 x DP=4 on 8-GPU nodes: a DP group (stride 4) has 2 ranks per node over 2 nodes
    k, nn = group_span(np.array([4]), np.array([4]), 8)
    assert (k[0], nn[0]) == (2, 2)
    # TP=8: DP ranks are one per node
    k, nn = group_span(np.array([8]), np.array([4]), 8)
    assert (k[0], nn[0]) == (1, 4)
    # TP=2, DP=4: one node holds the whole group
    k, nn = group_span(np.array([2]), np.array([4]), 8)
    assert (k[0], nn[0]) == (4, 1)


def test_layout_table_columns_are_the_field_list():
    from dataclasses import fields
    from costmodel.layout_fields import FIELDS
    from costmodel.layouts import LayoutTable
    assert tuple(f.name for f in fields(LayoutTable)) == FIELDS
    row = dict(tp=2, pp=4, dp=8, cp=1, ep=1, etp=2, vp=2, mbs=1, recompute="full", recompute_num_layers=3, zero=1,
               sp=True, overlap=False, dp_replicate=2)
    assert LayoutTable.from_rows([row]).row(0) == row
    # a row without recompute_num_layers recomputes every layer it recomputes; one without
    # dp_replicate shards over its whole DP x CP group
    short = {k: v for k, v in row.items() if k not in ("recompute_num_layers", "dp_replicate")}
    assert LayoutTable.from_rows([short]).row(0)["recompute_num_layers"] == 0
    assert LayoutTable.from_rows([short]).row(0)["dp_replicate"] == 1
    # a choice by index: 0 is its first name ('none'), not a degree below 1
    assert LayoutTable.from_rows([dict(row, recompute=0)]).row(0)["recompute"] == "none"
    with pytest.raises(InputError, match="recompute: 3 is out of range"):
        LayoutTable.from_rows([dict(row, recompute=3)])


def test_a_cost_term_cannot_read_an_undeclared_field():
    from costmodel.compute import compute_times
    from costmodel.layout_fields import uses_layout_fields
    t = layout(tp=4, pp=2, dp=4)
    view = t.view(compute_times.layout_fields)
    assert len(view) == 1 and int(view.tp[0]) == 4
    with pytest.raises(AttributeError, match="'pp' is read but not declared"):
        view.pp

    @uses_layout_fields("tp")
    def reads_pp(tt):
        return tt.pp
    with pytest.raises(AttributeError, match="'pp'"):
        reads_pp(t.view(reads_pp.layout_fields))
    with pytest.raises(ValueError, match="unknown layout fields"):
        uses_layout_fields("tpp")


def test_every_cost_term_reads_only_what_it_declares(h200):
    """A table whose rows differ in every field: the terms run on views of their declared fields
    (predict_table), so an undeclared read raises; deduped and row-by-row predictions agree."""
    from costmodel.predict import predict_table
    c, p = h200
    t = enumerate_layouts(MIX, R, c.num_gpus, c.gpus_per_node, sp_choices=(True, False), zero_stages=(0, 1, 2, 3),
                          overlaps=(True, False))
    pick = np.arange(0, len(t), max(1, len(t) // 40))
    whole = predict_table(MIX, R, c, p, t.take(pick))
    for j, i in enumerate(pick[:10]):
        one = predict_table(MIX, R, c, p, t.take(np.array([i])))
        assert one.step_time_s[0] == whole.step_time_s[j]
        assert one.memory.peak_bytes[0] == whole.memory.peak_bytes[j]


def test_layout_name_is_the_one_formatter():
    from costmodel.layouts import layout_name
    lay = dict(tp=8, pp=4, dp=1, cp=1, ep=1, vp=2, mbs=1, recompute="full", zero=1, sp=False, overlap=False)
    assert layout_name(lay) == "TP8 PP4 DP1 CP1 EP1 VP2 mbs1 full-recompute ZeRO1 no-SP no-overlap"
    with pytest.raises(InputError, match=r"\(got TP8 PP4 DP2 CP1 EP1 VP2 mbs1 full-recompute ZeRO1 no-SP no-overlap\)"):
        check_layout(layout(**dict(lay, dp=2)), L70, R, 32, 8)


def test_pp2_with_embedding_and_loss_counted_paces_l_over_2_layers():
    """At PP 2 both stages are edge stages: 80 layers at PP2 VP41 (82 = 2 x 41) hold 40 each, as PP2 VP10
    does; the pace had been a 41-layer middle stage that does not exist (compute 3% above VP10's)."""
    from costmodel.layouts import accounts_embedding_loss, layers_per_stage, pipeline_split
    from costmodel.predict import predict_run
    from costmodel.specs import load_cluster, load_profile
    from costmodel.stacks import get_stack, stack_recipe
    m, r = load_model("llama3.1-70b"), stack_recipe(get_stack("megatron"), 64, 8192, "bf16")
    row = dict(tp=8, pp=2, dp=8, cp=1, ep=1, vp=41, mbs=1, recompute="full", zero=1, sp=True, overlap=True)
    t = layout(**row)
    assert bool(accounts_embedding_loss(m, t)[0]) and layers_per_stage(m, t)[0] == 40
    assert list(pipeline_split(m, row)) == [40, 40]
    c, prof = load_cluster("dgx-h100", 16), load_profile("h100-sxm-80gb")
    acc, even = (predict_run(m, r, c, prof, dict(row, vp=v)).breakdown["compute_s"] for v in (41, 10))
    assert acc == pytest.approx(even, rel=0.015)          # the sends of 41 chunks slow it a little


def test_405b_pp8_vp8_counts_embedding_and_loss_as_pipeline_layers():
    """Llama 3.1 405B: 126 layers; NVIDIA's recipe runs PP8 VP8 with the embedding and the loss
    counted as pipeline layers (128 = 8 x 8 x 2): valid, split 15|16x6|15, Megatron flags printed,
    and the energy model's stage split gives the schedule's step."""
    from costmodel.layouts import accounts_embedding_loss, layers_per_stage, pipeline_split
    from costmodel.predict import predict_run
    from costmodel.launch import megatron_args
    from costmodel.specs import load_cluster, load_profile
    m = load_model("llama3.1-405b")
    r = Recipe(gbs=2048, seq_len=8192)
    row = dict(tp=8, pp=8, dp=8, cp=1, ep=1, vp=8, mbs=1, recompute="full", zero=1, sp=True, overlap=True)
    t = layout(**row)
    check_layout(t, m, r, 512, 8)
    assert bool(accounts_embedding_loss(m, t)[0]) and layers_per_stage(m, t)[0] == 16
    assert list(pipeline_split(m, row)) == [15, 16, 16, 16, 16, 16, 16, 15]
    args = megatron_args(row, m, r)
    assert "--account-for-embedding-in-pipeline-split" in args and "--num-layers-per-virtual-pipeline-stage 2" in args
    # VP 1 keeps the uneven split (BLOOM / DeepSpeed): ceil(126/8) = 16 on the fullest stages
    t1 = layout(**dict(row, vp=1))
    assert not bool(accounts_embedding_loss(m, t1)[0]) and layers_per_stage(m, t1)[0] == 16
    with pytest.raises(InputError, match="num_layers"):
        check_layout(layout(**dict(row, vp=3)), m, r, 512, 8)
    c = load_cluster("dgx-h100", 64)
    run = predict_run(m, r, c, load_profile("h100-sxm-80gb"), row)
    assert run.uncapped_step_time_s == pytest.approx(sum(run.breakdown.values()), rel=1e-12)
    assert run.energy is not None and run.energy.step_time_s >= run.uncapped_step_time_s * (1 - 1e-9)


def test_stacks_offer_only_the_parallelism_they_run_and_interleaving_uses_the_embedding_split():
    """Megatron-LM 2021-22 has no context parallelism, llm-foundry no pipeline or context parallelism
    and no Megatron TP (its tp_config shards the FFN only), HF + DeepSpeed ZeRO data parallelism only:
    the enumeration never offers the others, and a pinned one is refused naming why.  Llama 3.1
    405B's 126 layers interleave at PP 16 VP 8 by counting the embedding and the loss (128 = 16 x 8)."""
    from dataclasses import replace
    for stack, allowed in (("megatron-legacy", ("tp", "pp")), ("llm-foundry", ()), ("deepspeed", ())):
        t = enumerate_layouts(L70, replace(R, stack=stack), 32, 8)
        assert len(t) > 0
        for dim in ("tp", "pp", "cp"):
            assert dim in allowed or (getattr(t, dim) == 1).all(), (stack, dim)
    from costmodel.errors import InputError
    from costmodel.layouts import LayoutTable
    bad = LayoutTable.from_rows([dict(tp=2, pp=1, dp=16, cp=1, ep=1, etp=2, vp=1, mbs=1, recompute="full",
                                      recompute_num_layers=0, zero=3, sp=False, overlap=True)])
    with pytest.raises(InputError, match="llm-foundry's tp_config shards only the FFN"):
        check_layout(bad, L70, replace(R, stack="llm-foundry"), 32, 8)
    from costmodel.specs import load_model
    big = load_model("llama3.1-405b")
    t = enumerate_layouts(big, replace(R, gbs=2048), 16384, 8)
    assert ((t.pp == 16) & (t.vp == 8)).any() and ((t.pp == 8) & (t.vp == 8)).any()


def test_uneven_splits_follow_the_stacks_partitioner():
    """70 layers over 12 stages: Megatron-family stacks lighten the last stage (it runs the logits
    and the loss: --decoder-last-pipeline-num-layers), BigScience's DeepSpeed pipeline puts the
    fullest stages last (BLOOM's logs fit that split)."""
    from costmodel.layouts import light_last_stage, uneven_split
    from dataclasses import replace
    assert list(uneven_split(70, 12, True)) == [6] * 10 + [5] * 2
    assert list(uneven_split(70, 12, False)) == [5] * 2 + [6] * 10
    assert light_last_stage(R) and not light_last_stage(replace(R, stack="megatron-deepspeed"))
    assert uneven_split(70, 12, True).sum() == 70 and list(uneven_split(64, 8, True)) == [8] * 8


def test_light_last_stage_charges_the_collectives_of_the_layers_it_runs():
    """DeepSeek-V3's 61 layers over PP 8 split 8|8|8|8|8|7|7|7, the logits on the last stage; with
    a 129k vocabulary the last stage (7 layers, their EP/TP collectives and the logits) sets the
    pace, so the schedule charges 7 layers' collectives, not 8 (and the MTP module's layer's), and agrees
    with the energy model's per-stage step when no cap binds (FP8, as DeepSeek-V3 trained: the H100's FP8
    GEMM table was measured under its 700 W limit, so the limit holds them at no lower clock than the
    table's)."""
    from costmodel.predict import predict_run
    from costmodel.specs import load_cluster, load_profile
    m, r = load_model("deepseek-v3"), Recipe(gbs=8192, seq_len=4096, precision="fp8")
    row = dict(tp=2, pp=8, dp=64, cp=1, ep=64, etp=2, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    run = predict_run(m, r, load_cluster("dgx-h100", 128), load_profile("h100-sxm-80gb"), row)
    assert run.energy.layers == [8, 8, 8, 8, 8, 7, 7, 7] and not run.energy.throttled
    assert run.energy.sm_clock_mhz == 1980.0                   # the full (maximum) clock: no cap binds
    assert run.energy.step_time_s == pytest.approx(run.uncapped_step_time_s, rel=1e-9)
    ct, st = run.terms.compute, run.terms.step
    lay = float(ct.layer_fwd_s[0] + ct.layer_bwd_s[0] + ct.layer_recompute_s[0] + st.layer_contention_s[0])
    comm = float(st.layer_exposed_comm_s[0])
    logits = float(ct.logits_fwd_s[0] + ct.logits_bwd_s[0])
    assert logits > lay + comm                                 # the last stage is the slowest
    pp_mb = run.breakdown["pp_comm_s"] / 128
    # the MTP module's transformer layer runs its collectives with the logits
    assert float(st.t_mb_s[0]) == pytest.approx(7 * (lay + comm) + logits + m.mtp_layers * comm + pp_mb, rel=1e-9)


def test_launch_flags_carry_recompute_modules_and_the_precision_aware_optimizer():
    """The Megatron arguments of a selective layout name its extra recompute modules, and bf16 main grads
    and states the precision-aware optimizer's flags; NeMo 2 overrides the same."""
    from costmodel.launch import launch_settings, megatron_args
    m = load_model("deepseek-v3")
    r = Recipe(gbs=8192, seq_len=4096, recompute_modules="mla_up_proj,mlp", main_grads_dtype="bf16",
               optimizer_states_dtype="bf16")
    row = dict(tp=2, pp=8, dp=64, cp=1, ep=64, etp=1, vp=1, mbs=1, recompute="selective", zero=1, sp=True,
               overlap=True)
    args = megatron_args(row, m, r)
    for flag in ("--recompute-granularity selective", "--recompute-modules mla_up_proj mlp",
                 "--use-precision-aware-optimizer", "--main-grads-dtype bf16", "--exp-avg-dtype bf16",
                 "--exp-avg-sq-dtype bf16"):
        assert flag in args
    assert "--recompute-modules" not in megatron_args(row, m, Recipe(gbs=8192, seq_len=4096))
    _, nemo = launch_settings(row, m, r, fmt="nemo")
    assert "recipe.model.config.recompute_modules = ['mla_up_proj', 'mlp']" in nemo
    # the fused token permutation is a switch of its own, printed only when on (Megatron's default is off)
    assert "--moe-permute-fusion" in args and "recipe.model.config.moe_permute_fusion = True" in nemo
    off = Recipe(gbs=8192, seq_len=4096, moe_permute_fusion=False)
    assert "--moe-permute-fusion" not in megatron_args(row, m, off)
    assert "recipe.model.config.moe_permute_fusion = False" in launch_settings(row, m, off, fmt="nemo")[1]
    # padded experts: the capacity and the padding, on both command lines, read back from a dump as written
    pad = Recipe(gbs=8192, seq_len=4096, moe_capacity_factor=1.25, moe_pad_to_capacity=True)
    args = megatron_args(row, m, pad)
    assert "--moe-expert-capacity-factor 1.25" in args and "--moe-pad-expert-input-to-capacity" in args
    nemo = launch_settings(row, m, pad, fmt="nemo")[1]
    assert ("recipe.model.config.moe_expert_capacity_factor = 1.25" in nemo
            and "recipe.model.config.moe_pad_expert_input_to_capacity = True" in nemo)
    assert "recipe.model.config.moe_expert_capacity_factor = None" in launch_settings(row, m, r, fmt="nemo")[1]
    from costmodel.logged_recipe import _moe_switches
    out, notes = {}, []
    _moe_switches({"moe_expert_capacity_factor": 1.25, "moe_pad_expert_input_to_capacity": True,
                   "moe_grouped_gemm": True, "moe_permute_fusion": False}, out, notes)
    assert out == dict(moe_capacity_factor=1.25, moe_pad_to_capacity=True, moe_grouped_gemm=True,
                       moe_permute_fusion=False) and not notes


def test_launch_flags_turn_the_interleaved_send_overlap_off_only_where_asked():
    """Megatron-core overlaps the interleaved schedule's sends by default: the arguments say
    --no-overlap-p2p-communication only for a recipe without it, and NeMo's overrides name both."""
    from costmodel.launch import launch_settings, megatron_args
    m = load_model("llama3-70b")
    row = dict(tp=8, pp=4, dp=1, cp=1, ep=1, vp=5, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    assert "--no-overlap-p2p-communication" in megatron_args(row, m, Recipe(gbs=32, seq_len=4096, pp_overlap=False))
    assert "--no-overlap-p2p-communication" not in megatron_args(row, m, Recipe(gbs=32, seq_len=4096, pp_overlap=True))
    _, nemo = launch_settings(row, m, Recipe(gbs=32, seq_len=4096, stack="nemo", pp_overlap=True), fmt="nemo")
    assert "recipe.model.config.overlap_p2p_comm = True" in nemo and "batch_p2p_comm = False" in nemo


def test_distinct_rows_and_divisors_of_huge_values_stay_cheap():
    """A column of values far beyond the row count (a 2e9-layer model's VP) is ranked by sorting, not
    through a table as long as its largest value (8 GB for 1e9), and a layer count of 2e9 has its 110
    divisors found from sqrt pairs: recommend on such a model answers (infeasible) in about a second."""
    import numpy as np
    from costmodel.layout_grid import divisors as _divisors
    from costmodel.predict import unique_rows
    vp = np.array([1, 1_000_000_001, 1, 7, 1_000_000_001, 7])
    mbs = np.array([2, 2, 2, 4, 2, 4])
    first, inv = unique_rows(vp, mbs)
    assert len(first) == 3
    assert (vp[first][inv] == vp).all() and (mbs[first][inv] == mbs).all()
    assert _divisors(2_000_000_000)[-3:] == (500_000_000, 1_000_000_000, 2_000_000_000)
    assert len(_divisors(2_000_000_000)) == 110
    assert _divisors(126) == (1, 2, 3, 6, 7, 9, 14, 18, 21, 42, 63, 126)


def test_an_uneven_interleaved_split_is_one_layout_string_on_both_command_lines():
    """61 layers on PP 8 x VP 4 (DeepSeek-V3 as its Megatron-Bridge recipe runs it): 32 segments in model
    order, stage s's layers spread over its 4 chunks, E and L at the ends, and no
    --num-layers-per-virtual-pipeline-stage beside it (Megatron refuses both); NeMo sets the same
    layout, the accounted split of 61 layers on PP 7 x VP 3, and DeepEP for the flex dispatcher."""
    from costmodel.launch import megatron_args, nemo_overrides, pipeline_split_settings
    m = load_model("deepseek-v3")
    r = Recipe(gbs=8192, seq_len=4096, moe_dispatcher="flex")
    row = dict(tp=2, pp=8, dp=64, cp=1, ep=64, etp=1, vp=4, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    kind, text = pipeline_split_settings(row, m, r)
    segs = text.split("|")
    assert kind == "layout" and len(segs) == 32 and sum(s.count("t") for s in segs) == 61
    assert segs[0].startswith("E") and segs[-1].endswith("L")
    for s in range(8):       # each stage's chunks: segments s, s + 8, s + 16, s + 24
        assert sum(segs[v * 8 + s].count("t") for v in range(4)) == (8 if s < 5 else 7)
    args = megatron_args(row, m, r)
    assert f'--pipeline-model-parallel-layout "{text}"' in args and "--num-layers-per-virtual-pipeline-stage" not in args
    nemo = nemo_overrides(row, m, r)
    assert f"recipe.trainer.strategy.pipeline_model_parallel_layout = {text!r}" in nemo
    assert "recipe.model.config.moe_enable_deepep = True" in nemo
    assert "--moe-token-dispatcher-type flex \\\n  --moe-flex-dispatcher-backend deepep" in args   # not the deprecated flag
    acc = dict(row, pp=7, vp=3, dp=73)
    assert pipeline_split_settings(acc, m, r) == ("accounted", None)
    assert "recipe.trainer.strategy.account_for_loss_in_pipeline_split = True" in nemo_overrides(acc, m, r)
    # a split the ILP chose (layers per stage) reaches both command lines
    ilp = dict(row, vp=1)
    nemo = nemo_overrides(ilp, m, r, layers=[7, 8, 8, 8, 8, 8, 8, 6])
    assert ("recipe.trainer.strategy.num_layers_in_first_pipeline_stage = 7" in nemo
            and "recipe.trainer.strategy.num_layers_in_last_pipeline_stage = 6" in nemo)
    assert "--decoder-first-pipeline-num-layers 7" in megatron_args(ilp, m, r, layers=[7, 8, 8, 8, 8, 8, 8, 6])
    even = dict(row, pp=8, vp=1)
    assert pipeline_split_settings(dict(even), load_model("llama3-70b"), Recipe(gbs=8, seq_len=8192)) == (None, None)


def test_every_format_says_the_moe_switches_it_was_priced_with():
    """The settings line names the token permutation, JSON carries every MoE switch, and torchtitan's
    configuration, whose MoE cannot be switched, says what the prediction assumed instead."""
    from costmodel.launch import launch_settings
    m = load_model("qwen3-30b-a3b")
    row = dict(tp=1, pp=1, dp=8, cp=1, ep=8, etp=1, vp=1, mbs=1, recompute="none", zero=1, sp=False, overlap=True)
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="allgather", moe_grouped_gemm=False, moe_permute_fusion=False,
               stack="torchtitan")
    assert "unfused (atomic scatter-add) token permutation" in launch_settings(row, m, r, fmt="settings")[1]
    js = json.loads(launch_settings(row, m, r, fmt="json")[1])
    assert (js["moe_dispatcher"], js["moe_grouped_gemm"], js["moe_permute_fusion"]) == ("allgather", False, False)
    tt = launch_settings(row, m, r, fmt="torchtitan")[1]
    assert "# the prediction assumed moe_dispatcher = 'allgather', moe_grouped_gemm = False, moe_permute_fusion = False" in tt
    ok = Recipe(gbs=64, seq_len=4096, stack="torchtitan", moe_dispatcher="alltoall", moe_grouped_gemm=True,
                moe_permute_fusion=True)
    assert "the prediction assumed" not in launch_settings(row, m, ok, fmt="torchtitan")[1]


def test_a_torchtitan_configuration_says_when_it_cannot_shard_as_predicted():
    """torchtitan has FSDP2 (ZeRO-3), ZeRO-1 only under a pipeline, and DDP: a Megatron ZeRO-1 or ZeRO-2
    layout written as its configuration says what runs instead, as a comment."""
    from costmodel.launch import torchtitan_config
    from costmodel.specs import Recipe
    m = load_model("llama3-8b")
    r = Recipe(gbs=64, seq_len=8192)
    row = dict(tp=2, pp=1, dp=4, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    assert "no ZeRO-1 without a pipeline: this configuration shards with FSDP (ZeRO-3)" in torchtitan_config(row, m, r)
    assert "no ZeRO-2 without a pipeline: this configuration shards nothing (DDP)" in torchtitan_config(
        dict(row, zero=2), m, r)
    for fine in (dict(row, zero=3), dict(row, zero=0), dict(row, zero=1, pp=2, dp=2)):
        assert "# torchtitan has no ZeRO" not in torchtitan_config(fine, m, r)

    # what the prediction priced is set either way (a recipe's base_config() may turn it on, as the
    # 405B one does): async TP at TP > 1 (under torch.compile), compile where fused, eager launches
    # (torchtitan's CUDA graphs off: they also refuse PP)
    from dataclasses import replace
    on = torchtitan_config(row, m, replace(r, tp_comm_overlap=True, fused_elementwise=False))
    assert "config.compile.enable_async_tensor_parallel = True" in on and "config.compile.enable = True" in on
    off = torchtitan_config(row, m, replace(r, tp_comm_overlap=False, fused_elementwise=False))
    assert "config.compile.enable_async_tensor_parallel = False" in off and "config.compile.enable = False" in off
    assert "compile.enable = True" in torchtitan_config(row, m, replace(r, fused_elementwise=True))
    assert "enable_async_tensor_parallel = False" in torchtitan_config(dict(row, tp=1, dp=8), m,
                                                                       replace(r, tp_comm_overlap=True))
    assert "config.training.disable_cuda_graphs = True" in torchtitan_config(dict(row, pp=2, dp=2), m, r)


def test_unfused_elementwise_ops_and_an_exact_capacity_factor_reach_the_launch():
    """--no-fused-elementwise prices unfused SwiGLU, RoPE and norms: Megatron-LM's arguments turn its
    activation and rotary fusions off (--no-bias-swiglu-fusion, --no-rope-fusion; a GELU model's
    --no-bias-gelu-fusion and no rotary flag for learned positions) and say the norms stay fused in TE;
    NeMo's overrides set the two TransformerConfig fields.  A capacity factor is printed as given, not
    rounded to six digits."""
    from dataclasses import replace
    from costmodel.launch import megatron_args, nemo_overrides
    row = dict(tp=2, pp=2, dp=2, cp=1, ep=2, etp=1, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    r = Recipe(gbs=64, seq_len=4096, fused_elementwise=False, moe_dispatcher="alltoall", moe_capacity_factor=1.123456789)
    args = megatron_args(row, MIX, r)
    assert "--no-bias-swiglu-fusion" in args and "--no-rope-fusion" in args and "norms unfused too" in args
    assert "--moe-expert-capacity-factor 1.123456789" in args
    assert "no-bias-swiglu-fusion" not in megatron_args(row, MIX, replace(r, fused_elementwise=True))
    nemo = nemo_overrides(row, MIX, r)
    assert "bias_activation_fusion = False" in nemo and "apply_rope_fusion = False" in nemo
    assert "moe_expert_capacity_factor = 1.123456789" in nemo
    gpt = load_model("gpt3-175b")
    dense = dict(row, ep=1, etp=None, dp=2)
    g = megatron_args(dense, gpt, Recipe(gbs=64, seq_len=2048, fused_elementwise=False))
    assert "--no-bias-gelu-fusion" in g and "--no-rope-fusion" not in g
    # the json format carries every switch the prediction priced, so the record reproduces it
    from costmodel.launch import launch_settings
    from costmodel.recipe_switches import RECIPE_SWITCHES
    js = json.loads(launch_settings(row, MIX, r, fmt="json")[1])
    assert all(sw.name in js for sw in RECIPE_SWITCHES)
    assert js["fused_elementwise"] is False and js["moe_capacity_factor"] == 1.123456789
    assert {"dp_overlap", "tp_comm_overlap", "cross_entropy", "attention_kernel"} <= set(js)


def test_torchtitan_async_tp_is_priced_compiled():
    """torchtitan runs async TP only under torch.compile of the model (torchtitan/config/configs.py: 'Async TP
    requires 'model' in --compile.components and --compile.enable'), whose kernels fuse the elementwise ops:
    --tp-comm-overlap on the torchtitan stack prices them fused, as the printed configuration compiles, and
    --no-fused-elementwise beside it is refused by flag.  Without async TP the eager default stays."""
    from costmodel.stacks import get_stack, stack_recipe
    tt = get_stack("torchtitan")
    assert stack_recipe(tt, 64, 8192, "bf16", tp_comm_overlap=True).fused_elementwise is True
    assert stack_recipe(tt, 64, 8192, "bf16").fused_elementwise is False
    with pytest.raises(InputError, match="runs only under torch.compile"):
        stack_recipe(tt, 64, 8192, "bf16", tp_comm_overlap=True, fused_elementwise=False)
    # and it trains in bfloat16 (mixed_precision_param: "bfloat16" or "float32"), not fp16
    with pytest.raises(InputError, match="torchtitan trains in bfloat16"):
        stack_recipe(tt, 64, 8192, "fp16")


@pytest.mark.parametrize("m,torchtitan_ok", [(6, True), (9, False), (10, True), (8, True)])
def test_interleaved_microbatch_count_follows_each_stacks_schedule(m, torchtitan_ok):
    """VP > 1 at PP 4, DP 2: Megatron-LM needs the micro-batch count to be a multiple of PP; PyTorch's
    ScheduleInterleaved1F1B (torchtitan) a multiple of its rounds max(1, m // PP): 6 (one round) and 10
    (two rounds of 5) run there, 9 (two rounds) does not."""
    t = layout(pp=4, dp=2, vp=2)
    L8 = load_model("llama3-8b")
    code, msgs = validity(t, L8, Recipe(gbs=2 * m, seq_len=8192, stack="torchtitan"), 8, 8)
    assert (code[0] == -1) == torchtitan_ok
    if not torchtitan_ok:
        assert "ScheduleInterleaved1F1B" in msgs[code[0]]
    code, _ = validity(t, L8, Recipe(gbs=2 * m, seq_len=8192), 8, 8)
    assert (code[0] == -1) == (m % 4 == 0)


def test_tp_may_span_all_of_a_jobs_gpus_inside_one_nvlink_domain():
    """64 GPUs of a 72-GPU GB200 NVL72 domain: TP 16 groups stay inside the rack and are valid (and
    enumerated); over two racks (144 GPUs) a TP 16 group would straddle the 72-GPU boundary."""
    g3 = load_model("gpt3-175b")
    r = Recipe(gbs=64, seq_len=2048)
    code, _ = validity(layout(tp=16, pp=4, dp=1), g3, r, 64, 72)
    assert code[0] == -1
    assert 16 in set(enumerate_layouts(g3, r, 64, 72).tp.tolist())
    code, msgs = validity(layout(tp=16, pp=3, dp=3), g3, Recipe(gbs=72, seq_len=2048), 144, 72)
    assert "NVLink domain (72" in msgs[code[0]]


def test_hugging_face_checkpointing_under_deepspeed_has_no_selective_recompute():
    """HF's gradient_checkpointing wraps whole decoder layers: --recompute selective on the deepspeed stack
    had been priced as Megatron's attention-only recompute; full and none stay."""
    m = load_model("llama3.1-8b")
    r = Recipe(gbs=64, seq_len=4096, stack="deepspeed", optimizer="adamw")
    with pytest.raises(InputError, match="re-runs whole layers"):
        check_layout(layout(dp=8, zero=3, recompute="selective"), m, r, 8, 8)
    for rc in ("full", "none"):
        check_layout(layout(dp=8, zero=3, recompute=rc), m, r, 8, 8)


def test_more_bf16_edge_layers_than_a_pipeline_stage_holds_is_refused():
    """Llama 3 8B at PP 3: 32 // 3 = 10 layers a stage, Megatron-core's cap on num_layers_at_start/end_in_bf16."""
    from costmodel.stacks import STACKS, stack_recipe
    from costmodel.stack_rules import check_megatron_rules
    r = stack_recipe(STACKS["megatron"], 64, 4096, "fp8", fp8_recipe="tensorwise", bf16_edge_layers=11)
    with pytest.raises(InputError, match="11 exceeds the 10 layers of a pipeline stage"):
        check_megatron_rules(r, dict(pp=3, recompute="none"), False, 32)
    check_megatron_rules(stack_recipe(STACKS["megatron"], 64, 4096, "fp8", fp8_recipe="tensorwise", bf16_edge_layers=10),
                         dict(pp=3, recompute="none"), False, 32)


@pytest.mark.parametrize("extra,field,needle", [
    (dict(vpp=4), "vpp", "did you mean vp?"), (dict(recompute_num_layers=-3), "recompute_num_layers", "-3 is out of range"),
    (dict(recompute=7), "recompute", "an index of none, selective, full"), (dict(zero=-1), "zero", "-1 is out of range")])
def test_a_layout_key_that_is_none_or_a_value_out_of_range_is_refused(extra, field, needle):
    """A misspelt key (vpp for vp) had been ignored, the layout priced without it; a negative recomputed-layer
    count priced as 0; a choice index beyond the choices raised IndexError."""
    from costmodel.errors import InputError
    from costmodel.layouts import LayoutTable
    row = dict(tp=2, pp=2, dp=4, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    with pytest.raises(InputError, match=needle) as e:
        LayoutTable.from_rows([dict(row, **extra)])
    assert e.value.field == field


def test_distinct_rows_match_a_sort_whatever_the_key_range():
    """The presence-table dedupe finds exactly np.unique's distinct rows, also where the combined key
    range passes 4n (it renumbers) and where one column holds nearly n distinct values (it sorts)."""
    import numpy as np
    from costmodel.predict import unique_rows
    rng = np.random.default_rng(7)
    n = 5000
    cols = [rng.integers(0, 9, n), rng.integers(0, 4097, n), rng.random(n) < 0.5,
            rng.integers(0, 33, n), rng.permutation(n) * 3, rng.integers(0, 2, n)]
    for k in range(1, len(cols) + 1):
        sub = cols[:k]
        first, inv = unique_rows(*sub)
        stacked = np.stack([c.astype(np.int64) for c in sub])
        assert len(first) == np.unique(stacked, axis=1).shape[1]
        assert (stacked[:, first][:, inv] == stacked).all()


def test_a_sequence_tp_does_not_divide_runs_those_layouts_without_sp():
    """Megatron-core splits the sequence evenly over TP under SP (mappings.py _split_along_first_dim): at
    seq_len 8191 every TP > 1 layout had been dropped (SP forced on), leaving TP 1 only; they stay, with SP
    off, and where TP divides seq_len / CP SP stays on."""
    m = load_model("llama3-70b")
    odd = enumerate_layouts(m, Recipe(gbs=128, seq_len=8191), 32, 8)
    assert set(odd.tp.tolist()) == {1, 2, 4, 8} and not odd.sp.any()
    even = enumerate_layouts(m, Recipe(gbs=128, seq_len=8192), 32, 8)
    assert even.sp[even.tp > 1].all() and len(odd) == (even.cp == 1).sum()     # 8191: no CP either
    # 4104 = 8 x 513: TP 8 divides it, but not its CP 2 share 2052, where SP is off; TP 4 divides both
    t = enumerate_layouts(m, Recipe(gbs=128, seq_len=4104), 32, 8)
    assert t.sp[(t.tp == 8) & (t.cp == 1)].all() and not t.sp[(t.tp == 8) & (t.cp == 2)].any()
    assert t.sp[(t.tp == 4) & (t.cp == 2)].all() and len(t.sp[(t.tp == 8) & (t.cp == 2)])


def test_a_table_edited_in_place_is_priced_again_and_pins_are_checked():
    """The split terms were kept by the identity of the table's pp and vp arrays: a sweep script that
    edited a table in place (PP 4 -> 8) got the old split's step back (31.8 s where the table built anew
    gives 17.1 s). Pins of no field, or of the wrong kind, had been ignored by enumerate_layouts (a
    string degree matched no layout in search, silently)."""
    from costmodel.predict import predict_table
    from costmodel.specs import cluster_profile, load_cluster
    from costmodel.stacks import get_stack, stack_recipe
    m, c = load_model("llama3-70b"), load_cluster("dgx-h100", 8)
    p, r = cluster_profile(c, None), stack_recipe(get_stack("megatron"), 128, 8192, "bf16", gpu=c.gpu)
    t = layout(tp=8, pp=4, dp=2, recompute="selective", sp=True)
    before = predict_table(m, r, c, p, t).step_time_s[0]
    t.pp[:], t.dp[:] = 8, 1
    edited = predict_table(m, r, c, p, t)
    fresh = predict_table(m, r, c, p, layout(tp=8, pp=8, dp=1, recompute="selective", sp=True))
    assert edited.step_time_s[0] == fresh.step_time_s[0] != before
    assert edited.memory.peak_bytes[0] == fresh.memory.peak_bytes[0]
    for pins, msg in (({"foo": 3}, "pins no layout field's value"), ({"tp": "8"}, "'8': expected a whole number"),
                      ({"recompute": "fulll"}, "pins no layout field's value"), ({"sp": 1}, "expected true or false")):
        with pytest.raises(InputError, match=msg):
            enumerate_layouts(m, r, 64, 8, pins=pins)
    assert len(enumerate_layouts(m, r, 64, 8, pins={"tp": np.int64(8), "recompute": "full", "sp": True}))
    for n in (64.0, 0, True):                          # a float GPU count had raised a bare TypeError
        with pytest.raises(InputError, match="need a whole number, at least 1"):
            enumerate_layouts(m, r, n, 8)


def test_the_loaders_refuse_a_value_that_is_no_name_or_path():
    """load_model(None) had raised AttributeError ('NoneType' has no 'strip'); a Path is taken as its text."""
    from pathlib import Path
    from costmodel.specs import load_cluster
    for call, msg in ((lambda: load_model(None), "--model: expected a catalog model name or a file path, got NoneType"),
                      (lambda: load_cluster(8, 8), "--cluster: expected a catalog cluster name or a file path, got int")):
        with pytest.raises(InputError, match=msg):
            call()
    from costmodel.specs import catalog_dir
    assert load_model(Path(catalog_dir()) / "llama3-8b.json").name == "llama3-8b"
