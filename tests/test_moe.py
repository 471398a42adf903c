"""MoE routing costs: the balls-into-bins load of the busiest rank, the dispatcher's token copies,
and the experts' own TP (ETP)."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from costmodel.compute import compute_times
from costmodel.memory import memory_bytes
from costmodel.moe import DISPATCH_COPIES, dispatch_bytes, max_load_factor
from costmodel.specs import Recipe, load_cluster, load_model, load_profile

from conftest import layout


def test_max_load_follows_raab_steger():
    """m/n + sqrt(2 (m/n) ln n) over m/n: 1024 assignments per rank over 8 ranks -> 1 + sqrt(2 ln 8 / 1024)."""
    assert max_load_factor(1024, 8) == pytest.approx(1 + math.sqrt(2 * math.log(8) / 1024))
    assert max_load_factor(1024, 1) == 1.0
    # more ranks or fewer tokens per rank: a busier busiest rank
    f = max_load_factor(np.array([4096, 1024, 1024]), np.array([8, 8, 64]))
    assert f[0] < f[1] < f[2]
    with pytest.raises(ValueError):
        max_load_factor(0, 8)


def test_dispatch_moves_four_copies_each_way():
    assert DISPATCH_COPIES == 4
    assert dispatch_bytes(1000, 2, 4096, 2.0) == 4 * 2 * 1000 * 2 * 4096 * 2.0


def test_expert_tp_moves_expert_flops_nowhere_and_shards_expert_weights_over_ep_x_etp():
    """Mixtral 8x7B on 16 H100, TP4 DP4: EP8 with ETP1 holds 1 whole expert per GPU, EP2 with ETP4
    holds 4 experts split 4 ways: the same expert parameters per GPU (8 x 176M / 8), and the same
    expert FLOPs (top-2 tokens / TP), so only the GEMM shapes and the balls-into-bins load differ."""
    m = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100", nodes=2)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096)
    a = layout(tp=4, dp=4, ep=8, etp=1, sp=True, zero=1)
    b = layout(tp=4, dp=4, ep=2, etp=4, sp=True, zero=1)
    ma, mb = memory_bytes(m, r, a), memory_bytes(m, r, b)
    assert ma.weights_bytes[0] == pytest.approx(mb.weights_bytes[0], rel=1e-12)
    ca, cb = compute_times(m, r, c, p, a), compute_times(m, r, c, p, b)
    assert ca.layer_flops_fwd[0] == pytest.approx(cb.layer_flops_fwd[0], rel=1e-12)
    # expert weights per GPU by hand: 32 layers x 8 experts x 3 x 4096 x 14336 / (EP x ETP = 8), bf16
    # (ZeRO-1 keeps the bf16 weights whole); the rest is the dense part over TP 4 and the embeddings
    expert = 32 * 8 * 3 * 4096 * 14336 / 8 * 2
    dense_only = memory_bytes(m, r, layout(tp=4, dp=4, ep=1, etp=4, sp=True, zero=1)).weights_bytes[0] - \
        32 * 8 * 3 * 4096 * 14336 / 4 * 2
    assert ma.weights_bytes[0] == pytest.approx(dense_only + expert, rel=1e-9)


def test_mtp_module_runs_a_layer_and_the_head_again_on_the_last_stage():
    """DeepSeek-V3's MTP module (D = 1): the last stage's logits pass grows by the 2h -> h projection,
    one transformer layer and a second output head + loss; the layers elsewhere are unchanged."""
    from dataclasses import replace
    m = load_model("deepseek-v3")
    c = load_cluster("dgx-h100", nodes=8)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096)
    t = layout(tp=1, pp=8, dp=8, ep=8, etp=1, zero=1)
    with_mtp, without = compute_times(m, r, c, p, t), compute_times(replace(m, mtp_layers=0), r, c, p, t)
    assert with_mtp.layer_fwd_s[0] == without.layer_fwd_s[0]
    extra = with_mtp.logits_fwd_s[0] - without.logits_fwd_s[0]
    assert without.layer_fwd_s[0] + without.logits_fwd_s[0] < extra < 1.2 * (without.layer_fwd_s[0] + without.logits_fwd_s[0])
    assert with_mtp.logits_flops_fwd[0] > 2 * without.logits_flops_fwd[0]


def test_expert_tp_gathers_the_dispatched_tokens_over_its_group():
    """Qwen3-30B-A3B at TP 4, EP 2 with SP: ETP 1 sends SP-sharded tokens straight to the all-to-all
    (the MoE layer's TP collective is the attention's alone); ETP 4 also gathers and reduce-scatters
    the top-8 dispatched tokens over 4 ranks."""
    from costmodel.comm import comm_times, group_time_s
    m = load_model("qwen3-30b-a3b")
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096)
    one, four = (comm_times(m, r, c, p, layout(tp=4, dp=2, ep=2, etp=e, sp=True)) for e in (1, 4))
    act = 4096 * 2048 * 2.0
    ones = np.ones(1)
    attn = group_time_s("all_gather", act, ones, 4, c, p) + group_time_s("reduce_scatter", act, ones, 4, c, p)
    assert one.tp_layer_fwd_s[0] == pytest.approx(attn[0], rel=1e-12)
    disp = act * 8
    moe = group_time_s("all_gather", disp, ones, 4, c, p) + group_time_s("reduce_scatter", disp, ones, 4, c, p)
    assert four.tp_layer_fwd_s[0] == pytest.approx(attn[0] + moe[0], rel=1e-12)
    # EP 1: the allgather dispatcher gathers the hidden states once, like a dense MLP under SP
    dense_like = comm_times(m, r, c, p, layout(tp=4, dp=2, ep=1, etp=4, sp=True))
    assert dense_like.tp_layer_fwd_s[0] == pytest.approx(2 * attn[0], rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(k=st.integers(1, 7), ep=st.sampled_from([1, 2, 4, 8]), etp=st.sampled_from([1, 2]))
def test_more_experts_per_token_never_shortens_the_step(k, ep, etp):
    """Routing each token to one more expert adds expert FLOPs, dispatch bytes and a2a volume: the
    predicted step of Mixtral-8x7B on 16 H100 (TP 2, DP 8) never gets shorter, and the active
    parameters grow by one expert's MLP per MoE layer."""
    from dataclasses import replace
    from costmodel.predict import predict_table
    from costmodel.layouts import LayoutTable
    m = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100", nodes=2)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096)
    lay = dict(tp=2, pp=1, dp=8, cp=1, ep=ep, etp=etp, vp=1, mbs=1, recompute="full", zero=1, sp=True, overlap=True)
    a, b = replace(m, topk=k), replace(m, topk=k + 1)
    ta = predict_table(a, r, c, p, LayoutTable.from_rows([lay])).step_time_s[0]
    tb = predict_table(b, r, c, p, LayoutTable.from_rows([lay])).step_time_s[0]
    assert tb >= ta
    assert b.params(active=True) - a.params(active=True) == m.num_layers * m.mlp_params(m.ffn_hidden)
    assert a.params() == b.params() == m.params()
