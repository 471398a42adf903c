"""MoE routing costs: the balls-into-bins load of the busiest rank, the dispatcher's token copies,
and the experts' own TP (ETP)."""
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from costmodel.compute import compute_times
from costmodel.memory import memory_bytes
from costmodel.moe import (DISPATCH_COPIES, expert_load_factor, max_load_factor, permute_rows,
                           remote_nodes_per_token)
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


def test_dispatchers_copy_what_each_rank_holds():
    """1000 tokens, top-2: the all-to-all dispatcher copies the sent rows twice (permute, unpermute)
    and the received rows twice (sort, unsort): 4 x 2000 at ETP 1 and even load; with ETP 4 the
    received rows are the 4-way gather at the busiest rank's load.  The allgather dispatcher picks
    its rows and scatter-adds them back (2 x received) into all EP x ETP x 1000 gathered tokens."""
    assert DISPATCH_COPIES == 4
    assert permute_rows("alltoall", 1000, 2, 1, 8, 1.0) == 4 * 2000
    assert permute_rows("alltoall", 1000, 2, 4, 8, 1.25) == 2 * 2000 + 2 * 2000 * 4 * 1.25
    assert permute_rows("allgather", 1000, 2, 4, 2, 1.0) == 2 * 8000 + 8000
    assert permute_rows("flex", 1000, 2, 1, 8, 1.1) == pytest.approx(2 * 2200)


def test_capacity_caps_or_pads_the_busiest_load():
    """Dropless: the balls-into-bins load; capacity factor 1.25 drops what exceeds it; padded, every
    expert runs exactly its capacity (GShard)."""
    k = np.array([1.06, 1.6])
    assert list(expert_load_factor(k, 0.0, False)) == [1.06, 1.6]
    assert list(expert_load_factor(k, 1.25, False)) == [1.06, 1.25]
    assert list(expert_load_factor(k, 1.25, True)) == [1.25, 1.25]


def test_remote_nodes_per_token():
    """Top-8 over 4 nodes misses a given remote node with probability (3/4)^8: 3 (1 - 0.75^8) remote
    nodes on average (DeepSeek-V3's node-limited routing caps it at 4); one node: none."""
    assert remote_nodes_per_token(4, 8) == pytest.approx(3 * (1 - 0.75 ** 8))
    assert remote_nodes_per_token(1, 8) == 0.0
    assert remote_nodes_per_token(64, 1) == pytest.approx(63 / 64)
    # DeepSeek-V3 over 8 nodes: top-8 within 4 nodes hit 4 (1 - 0.75^8) of them, 7/8 remote
    assert remote_nodes_per_token(8, 8, 4) == pytest.approx(4 * (1 - 0.75 ** 8) * 7 / 8)
    assert remote_nodes_per_token(8, 8, 4) < remote_nodes_per_token(8, 8)


def test_per_expert_gemms_cost_launches_and_waves_the_grouped_gemm_saves():
    """Qwen3-30B-A3B at EP8 (16 local experts of width 768, ~1.5k rows each): one GEMM per expert
    pays 16 launches and 16 partial last waves; the grouped GEMM one launch and the H100 profile's
    per-group time per expert (TE's multi-stream groups overlap on the GPU), so the per-expert MLP is
    slower than the grouped one by at least 16 launches - 1 launch - 16 group times per GEMM."""
    from dataclasses import replace
    m = load_model("qwen3-30b-a3b")
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall")
    a = layout(tp=1, dp=8, ep=8, etp=1, zero=1)
    g, s = compute_times(m, r, c, p, a), compute_times(m, replace(r, moe_grouped_gemm=False), c, p, a)
    launch, grp = p.gemm["bf16"].launch_s, p.moe_grouped_group_s
    assert 2e-6 < grp < launch
    # 2 expert GEMMs x (fwd + dgrad + wgrad) x the launches saved, in the MoE layers (all of them)
    saved = 15 * launch - 16 * grp
    assert s.layer_fwd_s[0] - g.layer_fwd_s[0] >= 2 * saved * 0.999
    assert s.layer_bwd_s[0] - g.layer_bwd_s[0] >= 4 * saved * 0.999


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
    """Qwen3-30B-A3B (every layer MoE) at TP 4, EP 2 with SP: the TP collectives are the attention's
    alone; the all-to-all dispatcher sends the SP-sharded top-8 copies over EP (stride ETP) and,
    with ETP 4, gathers and reduce-scatters them over the experts' 4 ranks, all at the busiest
    rank's balls-into-bins load.  The allgather dispatcher at EP 1 gathers the hidden states once,
    like a dense MLP under SP."""
    from costmodel.comm import comm_times, group_time_s
    m = load_model("qwen3-30b-a3b")
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall")
    one, four = (comm_times(m, r, c, p, layout(tp=4, dp=2, ep=2, etp=e, sp=True)) for e in (1, 4))
    act = 4096 * 2048 * 2.0
    ones = np.ones(1)
    attn = group_time_s("all_gather", act, ones, 4, c, p) + group_time_s("reduce_scatter", act, ones, 4, c, p)
    assert one.tp_layer_fwd_s[0] == pytest.approx(attn[0], rel=1e-12)
    assert four.tp_layer_fwd_s[0] == pytest.approx(attn[0], rel=1e-12)
    k4 = max_load_factor(4096 * 8 * 4 / 4, 2)
    a2a = group_time_s("all_to_all", act / 4 * 8 * k4, 4 * ones, 2 * ones, c, p)
    gather = group_time_s("all_gather", act * 8 * k4, ones, 4, c, p) + \
        group_time_s("reduce_scatter", act * 8 * k4, ones, 4, c, p)
    assert four.ep_layer_fwd_s[0] == pytest.approx(2 * a2a[0] + gather[0], rel=1e-12)
    from dataclasses import replace
    dense_like = comm_times(m, replace(r, moe_dispatcher="allgather"), c, p, layout(tp=4, dp=2, ep=1, etp=4, sp=True))
    assert dense_like.ep_layer_fwd_s[0] == pytest.approx(attn[0], rel=1e-12)


def test_allgather_dispatcher_moves_ep_times_the_tokens_and_deepep_sends_each_once_per_node():
    """Mixtral 8x7B, TP 1, EP 8 inside a node: the allgather dispatcher gathers all 8 ranks' tokens
    (8 x h per token) where the all-to-all moves top-2 copies, so it is slower; DeepSeek-V3 at EP 16
    over two nodes: DeepEP sends a token over RDMA once per remote node (at most 1 here) instead of
    once per remote expert (top-8: about 4), so flex beats alltoall."""
    from dataclasses import replace
    from costmodel.comm import comm_times
    m = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100", nodes=2)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall")
    t = layout(tp=1, dp=16, ep=8, etp=1)
    ag, a2a = (comm_times(m, replace(r, moe_dispatcher=d), c, p, t).ep_layer_fwd_s[0] for d in ("allgather", "alltoall"))
    assert ag > 2 * a2a
    d = load_model("deepseek-v3")
    t16 = layout(tp=1, pp=8, dp=16, ep=16, etp=1)
    c16 = load_cluster("dgx-h100", nodes=16)
    flex, a2a = (comm_times(d, replace(r, moe_dispatcher=x), c16, p, t16).ep_layer_fwd_s[0] for x in ("flex", "alltoall"))
    assert flex < a2a


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


def test_padded_capacity_holds_capacity_factor_times_the_routed_activations():
    """Mixtral 8x7B, EP 8: padding every expert to capacity factor 2 stores twice the mean routed
    tokens' MLP activations and dispatched copies; dropless stores the busiest rank's
    balls-into-bins load; a capacity factor of 1 without padding caps it at the mean."""
    from dataclasses import replace
    from costmodel.memory import activation_bytes_per_layer
    from costmodel.moe import busiest_rank_load
    m = load_model("mixtral-8x7b")
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall")
    t = layout(tp=1, dp=16, ep=8, etp=1)
    tok, B = 4096, 2.0
    routed = tok * (3 * 2 * 14336 + 2 * 4096 * 2) * B          # per unit load: SwiGLU in + FC2 in, dispatched copies
    base = activation_bytes_per_layer(m, replace(r, moe_capacity_factor=1.0), t)[0]
    padded = activation_bytes_per_layer(m, replace(r, moe_capacity_factor=2.0, moe_pad_to_capacity=True), t)[0]
    dropless = activation_bytes_per_layer(m, r, t)[0]
    assert padded - base == pytest.approx(routed, rel=1e-12)
    kappa = busiest_rank_load(2, 0.0, False, tok, 1, 1, 8)[()]
    assert dropless - base == pytest.approx((kappa - 1) * routed, rel=1e-12)


def test_measured_router_imbalance_spreads_over_the_rank_experts():
    """Blom's expected maximum of 8 standard normals is within 1% of the exact 1.4236 (Harter 1961
    tables); a per-expert load CV of 0.14 on Mixtral's 8 experts over EP 8 (one per rank) makes the
    busiest rank 1 + 0.14 z_8 the mean, over EP 2 (four per rank) 1 + 0.14 / 2 z_2; below the
    balls-into-bins bound the bound stays."""
    from costmodel.moe import busiest_rank_load, expected_max_normal
    z8 = float(expected_max_normal(8))
    assert z8 == pytest.approx(1.4236, rel=0.01) and float(expected_max_normal(1)) == 0.0
    got = busiest_rank_load(2, 0.0, False, 4096, 1, 1, np.array([8, 2]), 8, 0.14)
    assert got[0] == pytest.approx(1 + 0.14 * z8, rel=1e-12)
    assert got[1] == pytest.approx(1 + 0.14 / 2 * float(expected_max_normal(2)), rel=1e-12)
    floor = busiest_rank_load(2, 0.0, False, 64, 1, 1, 8, 8, 0.0)
    assert busiest_rank_load(2, 0.0, False, 64, 1, 1, 8, 8, 0.01) == pytest.approx(floor)


def test_stack_capacity_defaults_give_way_to_the_dispatcher_and_capacity_given():
    """DeepSpeed-MoE's defaults (all-to-all, capacity 1.0 padded) belong together: a dropless capacity
    given drops the padding, another dispatcher given drops both; a padding given without a capacity
    is still refused."""
    from costmodel.errors import InputError
    from costmodel.stacks import get_stack, stack_recipe
    ds = get_stack("deepspeed")
    r = stack_recipe(ds, 64, 4096, "bf16")
    assert (r.moe_dispatcher, r.moe_capacity_factor, r.moe_pad_to_capacity) == ("alltoall", 1.0, True)
    r = stack_recipe(ds, 64, 4096, "bf16", moe_capacity_factor=0.0)
    assert (r.moe_capacity_factor, r.moe_pad_to_capacity) == (0.0, False)
    r = stack_recipe(ds, 64, 4096, "bf16", moe_dispatcher="allgather")
    assert (r.moe_capacity_factor, r.moe_pad_to_capacity) == (0.0, False)
    with pytest.raises(InputError, match="--moe-pad-to-capacity"):
        stack_recipe(ds, 64, 4096, "bf16", moe_capacity_factor=0.0, moe_pad_to_capacity=True)


def test_unfused_permutation_pays_an_atomic_scatter_add_pass_each_way():
    """TileOPs PR 608's scatter-add unpermute on an H200 (2 x 512 and 2 x 2048 rows of 4096 in 0.06 and
    0.20 ms): 12,582,912 elements in 0.14 ms, 8.99e10 elements/s, 11.3x the time of reading and
    writing them at the H200's 4.8 TB/s x 0.85.  Mixtral at TP8 EP1 on the allgather dispatcher (SP):
    each GPU's experts hold 4096 / 8 tokens x top-2 x ETP 8 = 8192 rows, so the unfused permutation
    adds (11.3 - 1) x 2 x 8192 x 4096 x 2 B at the H100's copy bandwidth to the forward and to the
    backward of every layer; the all-to-all dispatcher's pass is over the rank's own 4096 / 8 x 2."""
    from dataclasses import replace
    from costmodel.moe import ATOMIC_SCATTER_ELEMS_PER_S_H200, ATOMIC_SCATTER_SLOWDOWN, atomic_permute_rows
    assert ATOMIC_SCATTER_ELEMS_PER_S_H200 == pytest.approx(12_582_912 / 0.14e-3)
    assert ATOMIC_SCATTER_SLOWDOWN == pytest.approx(4.8e12 * 0.85 / (4 * 8.988e10), rel=1e-3)
    assert 11.3 < ATOMIC_SCATTER_SLOWDOWN < 11.4
    assert atomic_permute_rows("alltoall", 512, 2, 4, 1.2) == 1024            # its own tokens' copies
    assert atomic_permute_rows("allgather", 512, 2, 8, 1.0) == 8192          # its experts' rows
    m = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="allgather", moe_permute_fusion=True)
    a = layout(tp=8, dp=1, ep=1, etp=8, sp=True, zero=1)
    fused, unfused = compute_times(m, r, c, p, a), compute_times(m, replace(r, moe_permute_fusion=False), c, p, a)
    extra = (ATOMIC_SCATTER_SLOWDOWN - 1) * 2 * 8192 * 4096 * 2 / (c.gpu.hbm_bytes_per_s * p.hbm_efficiency)
    assert unfused.layer_fwd_s[0] - fused.layer_fwd_s[0] == pytest.approx(extra, rel=1e-6)
    assert unfused.layer_bwd_s[0] - fused.layer_bwd_s[0] == pytest.approx(extra, rel=1e-6)
    # Megatron's default is unfused; the stacks whose permutations add no atomics price none
    from costmodel.stacks import get_stack, stack_recipe
    assert stack_recipe(get_stack("megatron"), 64, 4096, "bf16").moe_permute_fusion is False
    assert stack_recipe(get_stack("deepspeed"), 64, 4096, "bf16").moe_permute_fusion is True


def test_logs_and_bridge_configs_name_the_permute_fusion():
    """Megatron's argument dump and Megatron-Bridge's model config carry moe_permute_fusion; a value
    that is not true/false is reported, not guessed."""
    from types import SimpleNamespace
    from costmodel.logged_recipe import logged_switches
    log = lambda v: SimpleNamespace(args={"moe_permute_fusion": v}, framework="megatron", iterations=None)  # noqa: E731
    out, where, notes = logged_switches(log(True), True, 8)
    assert out["moe_permute_fusion"] is True and not notes
    out, _, notes = logged_switches(log("yes"), True, 8)
    assert "moe_permute_fusion" not in out and "moe_permute_fusion = 'yes' is not true/false" in notes[0]
    from pathlib import Path
    from costmodel.run_config import read_run_config
    configs = Path(__file__).parent / "data" / "configs"
    dsv3 = read_run_config(configs / "megatron_bridge_deepseek_v3_pretrain_h100_fp8_sc_v1.yaml")
    assert dsv3.recipe["moe_permute_fusion"] is True and dsv3.recipe["moe_dispatcher"] == "flex"
    # its flex dispatcher runs NVIDIA's HybridEP backend, priced with DeepEP's measurements: said so
    assert any("moe_flex_dispatcher_backend 'hybridep' is priced as DeepEP" in n for n in dsv3.notes)


def test_batch_level_ep_overlap_hides_each_all_to_all_under_a_block_of_the_paired_pass():
    """Megatron-core's --overlap-moe-expert-parallel-comm pairs the forward of one micro-batch with the
    backward of another: the forward's dispatch runs under the backward's MLP and its combine under the
    backward's attention, the backward's combine under the forward's attention and its dispatch under
    the forward's MLP.  On Mixtral 8x7B at EP 8 without a pipeline, m = 8 micro-batches leave one
    forward and one backward unpaired (1/8 of them): the exposed EP time is the four slots' leftovers
    on 7/8 of the passes plus the whole all-to-all on 1/8; the hidden seconds slow the compute by the
    profile's contention factor."""
    from dataclasses import replace
    from costmodel.comm import comm_times
    from costmodel.schedule import ep_overlap_unpaired, exposed_layer_comm
    m = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall")
    t = layout(tp=1, dp=8, ep=8, etp=1)
    on = replace(r, moe_ep_overlap=True)
    assert ep_overlap_unpaired(on, t)[0] == pytest.approx(1 / 8)
    ct, cm = compute_times(m, r, c, p, t), comm_times(m, r, c, p, t)
    off, ov = exposed_layer_comm(r, t, ct, cm), exposed_layer_comm(on, t, ct, cm)
    assert (off["ep_f"][0], off["ep_b"][0]) == (cm.ep_layer_fwd_s[0], cm.ep_layer_bwd_s[0])
    f, b, F, B, mlp = (x[0] for x in (cm.ep_layer_fwd_s, cm.ep_layer_bwd_s, ct.layer_fwd_s, ct.layer_bwd_s,
                                      ct.layer_mlp_fwd_s))
    mlp_b = B * mlp / F
    hid_f = 7 / 8 * (min(f / 2, mlp_b) + min(f / 2, B - mlp_b))
    hid_b = 7 / 8 * (min(b / 2, F - mlp) + min(b / 2, mlp))
    assert ov["ep_f"][0] == pytest.approx(f - hid_f, rel=1e-12) and ov["ep_b"][0] == pytest.approx(b - hid_b, rel=1e-12)
    assert 0 < hid_f <= f and 0 < hid_b <= b
    # the whole step: faster by the hidden all-to-all, less the contention on the compute beside it
    from costmodel.predict import predict_table
    s_off, s_on = (predict_table(m, x, c, p, t) for x in (r, on))
    saved = (s_off.breakdown["ep_comm_s"] - s_on.breakdown["ep_comm_s"])[0]
    slowed = (s_on.breakdown["compute_s"] - s_off.breakdown["compute_s"])[0]
    assert saved > 0 and slowed == pytest.approx((p.overlap_slowdown - 1) * saved, rel=1e-6)
    # without EP there is nothing to hide (and the layout is refused, as Megatron asserts)
    assert ep_overlap_unpaired(on, layout(tp=1, pp=4, vp=2, dp=2, ep=2, etp=1))[0] == pytest.approx(
        min(1.0, (2 * 3 + 1 * 4) / (64 / 2 * 2)))


@pytest.mark.parametrize("recipe_kw,layout_kw,why", [
    ({}, dict(tp=1, dp=8, ep=1, etp=1), "needs EP > 1"),
    (dict(moe_dispatcher="allgather"), dict(tp=1, dp=8, ep=8, etp=1), "alltoall or flex dispatcher, not allgather"),
    ({}, dict(tp=1, dp=8, ep=8, etp=1, recompute="full"), "full recompute"),
    ({}, dict(tp=1, pp=2, dp=4, ep=4, etp=1), "PP > 1 needs VP > 1"),
    (dict(stack="torchtitan"), dict(tp=1, dp=8, ep=8, etp=1), "Megatron-core's"),
    (dict(recompute_modules="moe"), dict(tp=1, dp=8, ep=8, etp=1, recompute="selective"), "recompute the MoE layer"),
])
def test_batch_level_ep_overlap_is_refused_where_megatron_asserts_it(recipe_kw, layout_kw, why):
    """Megatron-core's TransformerConfig refuses --overlap-moe-expert-parallel-comm without EP, with the
    allgather dispatcher, under full recompute or a recomputed MoE layer, and with PP > 1 but no
    virtual pipeline; it is Megatron-core's alone.  The layout is refused naming the rule."""
    from costmodel.errors import InputError
    from costmodel.layouts import check_layout
    m = load_model("mixtral-8x7b")
    r = Recipe(gbs=64, seq_len=4096, moe_ep_overlap=True, **{"moe_dispatcher": "alltoall", **recipe_kw})
    with pytest.raises(InputError, match=why):
        check_layout(layout(**layout_kw), m, r, 8, 8)
    check_layout(layout(tp=1, dp=8, ep=8, etp=1), m, Recipe(gbs=64, seq_len=4096, moe_ep_overlap=True), 8, 8)


def test_batch_level_ep_overlap_runs_at_most_one_mtp_layer():
    """Megatron-core asserts 'MTP supports at most one layer when enabling overlap_moe_expert_parallel_comm':
    DeepSeek-V3's one MTP module passes, three are refused by name, and without the overlap pass."""
    from dataclasses import replace
    from costmodel.errors import InputError
    from costmodel.layouts import check_layout
    d = load_model("deepseek-v3")
    assert d.mtp_layers == 1
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall", moe_ep_overlap=True)
    lay = layout(tp=1, dp=64, ep=64, etp=1)
    check_layout(lay, d, r, 64, 8)
    with pytest.raises(InputError, match=r"at most one MTP layer \(3 here"):
        check_layout(lay, replace(d, mtp_layers=3), r, 64, 8)
    check_layout(lay, replace(d, mtp_layers=3), replace(r, moe_ep_overlap=False), 64, 8)


def test_batch_level_ep_overlap_is_printed_and_read_as_megatron_names_it():
    """The Megatron-LM arguments carry --overlap-moe-expert-parallel-comm with --delay-wgrad-compute (the
    pairing the MoE README gives it), NeMo 2 the two TransformerConfig fields; a published row's
    notes naming the flag turn the switch on."""
    from costmodel.launch import megatron_args, nemo_overrides
    from costmodel.published_row import row_switches
    m = load_model("mixtral-8x7b")
    r = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall", moe_ep_overlap=True)
    lay = dict(tp=1, pp=1, dp=8, cp=1, ep=8, etp=1, vp=1, mbs=1, recompute="none", zero=1, sp=False, overlap=True)
    args = megatron_args(lay, m, r)
    assert "--overlap-moe-expert-parallel-comm" in args and "--delay-wgrad-compute" in args
    nemo = nemo_overrides(lay, m, r)
    assert "recipe.model.config.overlap_moe_expert_parallel_comm = True" in nemo
    assert "recipe.model.config.delay_wgrad_compute = True" in nemo
    # Megatron-core refuses it beside the shared-expert overlap, on in NeMo's DeepSeek and Llama 4 configs
    assert "recipe.model.config.moe_shared_expert_overlap = False" in nemo
    assert "moe_shared_expert_overlap" not in nemo_overrides(lay, m, Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall"))
    assert row_switches({"notes": "--delay-wgrad-compute --overlap-moe-expert-parallel-comm"}) == {"moe_ep_overlap": True}


def test_ep_overlap_respects_no_overlap_and_recompute_auto_and_is_refused_by_recipe():
    """--no-overlap hides nothing, the EP all-to-all included; --recompute auto never picks the full
    recompute the overlap cannot run with; the recipe check names --moe-ep-overlap for a stack or a
    dispatcher it does not run with (before any layout is searched)."""
    from dataclasses import replace
    from costmodel.comm import comm_times
    from costmodel.errors import InputError
    from costmodel.moe import check_moe_recipe
    from costmodel.predict import recompute_options
    from costmodel.schedule import exposed_layer_comm
    m = load_model("mixtral-8x7b")
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    on = Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall", moe_ep_overlap=True)
    t = layout(tp=1, dp=8, ep=8, etp=1, overlap=False)
    ct, cm = compute_times(m, on, c, p, t), comm_times(m, on, c, p, t)
    e = exposed_layer_comm(on, t, ct, cm)
    assert (e["ep_f"][0], e["ep_b"][0]) == (cm.ep_layer_fwd_s[0], cm.ep_layer_bwd_s[0])
    lay = dict(tp=1, pp=2, dp=4, cp=1, ep=4, etp=1, vp=2, mbs=1, recompute="none", zero=1, sp=False, overlap=True)
    assert all(rc != "full" for rc, _ in recompute_options(m, lay, on))
    assert ("full", 0) in recompute_options(m, lay, replace(on, moe_ep_overlap=False))
    for bad, why in ((replace(on, moe_dispatcher="allgather"), "not allgather"),
                     (replace(on, stack="torchtitan"), "not the torchtitan stack's")):
        with pytest.raises(InputError, match=why) as err:
            check_moe_recipe(m, bad, c.gpu)
        assert err.value.where == "--moe-ep-overlap"


def test_recommend_tries_ep_overlap_with_the_all_to_all_dispatcher_it_needs():
    """With no MoE switch given, recommend tries the overlap with the all-to-all dispatcher (Megatron's
    default allgather cannot run it): Mixtral 8x22B on 16 DGX A100 nodes at gbs 1024 (A100, where DeepEP's
    flex dispatcher does not run) keeps both and says so, and the printed Megatron arguments carry them."""
    import subprocess
    import sys
    from pathlib import Path
    repo = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "costmodel.cli", "recommend", "--model", "mixtral-8x22b", "--cluster",
                          "dgx-a100", "--nodes", "16", "--gbs", "1024", "--seq-len", "4096"], capture_output=True,
                         text=True, cwd=repo)
    assert out.returncode == 0, out.stderr
    notes = " ".join(out.stderr.split())
    assert "(--moe-ep-overlap; off by default in megatron)" in notes
    assert ("kept, as the EP overlap the search keeps needs it (the overlap does not run with megatron's default "
            "allgather dispatcher)") in notes
    assert "--overlap-moe-expert-parallel-comm" in out.stdout and "--moe-token-dispatcher-type alltoall" in out.stdout


MAVERICK = {"model_type": "llama4", "text_config": {
    "model_type": "llama4_text", "hidden_size": 5120, "num_hidden_layers": 48, "num_local_experts": 128,
    "num_experts_per_tok": 1, "intermediate_size": 8192, "intermediate_size_mlp": 16384, "interleave_moe_layer_step": 2,
    "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 202048,
    "tie_word_embeddings": False, "max_position_embeddings": 1048576, "rope_theta": 500000.0, "hidden_act": "silu"}}


def _brute_stage_moe(dense_at, L, pp, vp):
    """MoE layers of the fullest stage, layer by layer: PP x VP chunks in order, stage s takes s, s + PP, ..."""
    sizes = [L // (pp * vp) + (1 if c < L % (pp * vp) else 0) for c in range(pp * vp)]
    starts = [sum(sizes[:c]) for c in range(pp * vp)]
    return max(sum(1 for c in range(s, pp * vp, pp) for i in range(starts[c], starts[c] + sizes[c]) if i not in dense_at)
               for s in range(pp))


def test_interleaved_moe_layers_are_counted_per_stage(tmp_path):
    """Llama 4 Maverick puts experts in every second layer (interleave_moe_layer_step 2): each of 4
    pipeline stages holds 6 MoE layers of its 12, so its weights are those of 6 MoE and 6 dense layers,
    not of 12 MoE layers as for a model whose dense layers come first; an all-MoE variant holds 12."""
    import json
    from costmodel.layouts import LayoutTable, stage_moe_layers
    f = tmp_path / "maverick.json"
    f.write_text(json.dumps(MAVERICK))
    m = load_model(str(f))
    assert m.num_dense_layers == 24 and m.dense_layer_indices == tuple(range(0, 48, 2))
    assert m.params() == pytest.approx(400e9, rel=0.005) and m.params(active=True) == pytest.approx(17e9, rel=0.02)
    rows = [dict(tp=4, pp=pp, dp=16, cp=1, ep=16, etp=1, vp=vp, mbs=1, recompute="none", zero=1, sp=False, overlap=True)
            for pp, vp in ((1, 1), (2, 1), (4, 1), (4, 3), (8, 3), (16, 1))]
    got = stage_moe_layers(m, LayoutTable.from_rows(rows))
    want = [_brute_stage_moe(set(m.dense_layer_indices), 48, r["pp"], r["vp"]) for r in rows]
    assert list(got) == want == [24, 12, 6, 6, 3, 2]
    # memory: the stage's expert weights are its MoE layers' (6 of 12 at PP 4)
    r = Recipe(gbs=512, seq_len=8192)
    f1 = tmp_path / "all_moe.json"
    f1.write_text(json.dumps({**MAVERICK, "text_config": {**MAVERICK["text_config"], "interleave_moe_layer_step": 1}}))
    m1 = load_model(str(f1))
    lay = layout(tp=4, pp=4, dp=16, ep=16, etp=1)
    w, w1 = (memory_bytes(x, r, lay).weights_bytes[0] for x in (m, m1))
    exp_gpu = m.expert_params() / 16
    assert w1 - w == pytest.approx(2.0 * 6 * (exp_gpu + (m.moe_layer_params() - m.expert_params()) / 4
                                            - m.dense_layer_params() / 4), rel=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.booleans(), min_size=8, max_size=40), st.sampled_from([(1, 1), (2, 1), (2, 2), (4, 1), (4, 2)]))
def test_stage_moe_layers_match_a_layer_by_layer_count(flags, ppvp):
    """Any placement of dense layers among MoE ones: the fullest stage's MoE layers, counted layer by layer."""
    import dataclasses
    from costmodel.layouts import stage_moe_layers
    pp, vp = ppvp
    L = len(flags) - len(flags) % (pp * vp)
    flags = flags[:L]
    dense_at = tuple(i for i, f in enumerate(flags) if not f)
    if L == 0 or len(dense_at) == L:
        return
    base = load_model("mixtral-8x7b")
    m = dataclasses.replace(base, num_layers=L, num_dense_layers=len(dense_at),
                            dense_layer_indices=() if dense_at == tuple(range(len(dense_at))) else dense_at)
    assert stage_moe_layers(m, layout(tp=1, pp=pp, dp=1, vp=vp))[0] == _brute_stage_moe(set(dense_at), L, pp, vp)


EP_LATENCY = Path(__file__).resolve().parents[1] / "hardware/profiles/data/megatron_moe_report_ep_dispatch_latency.md"


def _ep_latency_table():
    """{(platform, dispatcher, op, ep): seconds} of the Megatron-Core MoE report's Table 7."""
    from costmodel.readers.markdown import markdown_tables
    (tab,) = markdown_tables(EP_LATENCY)
    cols = {"GB200 HybridEP (µs)": ("gb200", "flex"), "GB200 all-to-all (µs)": ("gb200", "alltoall"),
            "H100 HybridEP (µs)": ("h100", "flex"), "H100 all-to-all (µs)": ("h100", "alltoall")}
    out = {}
    for row in tab.rows:
        for name, (gpu, disp) in cols.items():
            out[gpu, disp, row[0], int(row[1])] = float(row[tab.header.index(name)]) * 1e-6
    return out


@pytest.mark.parametrize("gpu,cluster,gpus_per_node", [("h100", "dgx-h100", 8), ("gb200", "gb200-nvl72", 4)])
def test_dispatch_matches_the_megatron_moe_report_ep_scaling_table(gpu, cluster, gpus_per_node):
    """DeepSeek-V3 routing (top-8 of 256 experts, 4 of 8 groups), 4096 BF16 tokens of hidden 7168 per
    rank, EP 8 to 64: one dispatch (half of the layer's forward token movement) against arXiv:2603.07685
    Table 7.  The all-to-all dispatcher within 17 % on both platforms; the flex dispatcher (priced
    with DeepEP's bandwidths) against NVIDIA's HybridEP, which routes the same way: within 26 %.  On
    H100 at EP 8 (one node) HybridEP takes 661 us: a token crosses NVLink once per GPU holding its
    experts (3.6 GPUs under group-limited routing), not once per expert (7 of 8), which priced it at
    1.15 ms."""
    from costmodel.comm import comm_times
    table = _ep_latency_table()
    d = load_model("deepseek-v3")
    for ep in (8, 16, 32, 64):
        c = load_cluster(cluster, nodes=max(ep // gpus_per_node, 1))
        p = load_profile(c.gpu.key)
        for disp, tol in (("alltoall", 0.17), ("flex", 0.26)):
            r = Recipe(gbs=ep, seq_len=4096, moe_dispatcher=disp)
            one = comm_times(d, r, c, p, layout(tp=1, dp=ep, ep=ep, etp=1)).ep_layer_fwd_s[0] / 2
            for op in ("dispatch", "combine"):
                assert one == pytest.approx(table[gpu, disp, op, ep], rel=tol), (gpu, disp, op, ep)
    if gpu == "h100":
        c = load_cluster(cluster, nodes=1)
        r = Recipe(gbs=8, seq_len=4096, moe_dispatcher="flex")
        one = comm_times(d, r, c, load_profile(c.gpu.key), layout(tp=1, dp=8, ep=8, etp=1)).ep_layer_fwd_s[0] / 2
        assert one == pytest.approx(table["h100", "flex", "dispatch", 8], rel=0.15)


def test_recommend_s_winner_does_not_depend_on_the_length_of_its_table():
    """recommend re-ranks the time model's first layouts under the power limit: at least ten of them, so
    --top 1 answers the winner --top 10 lists first (re-ranking only the first --top, it had answered
    DeepSeek-V3 on 36 GB200 NVL72 trays with TP 1 CP 2 at 12.225 s, where TP 2 takes 12.168 s), and
    --json lists --top records."""
    import json
    import subprocess
    import sys
    base = [sys.executable, "-m", "costmodel.cli", "recommend", "--model", "deepseek-v3", "--cluster",
            "gb200-nvl72", "--nodes", "36", "--gbs", "1024", "--json"]
    got = {}
    for top in ("1", "10"):
        out = subprocess.run([*base, "--top", top], capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stderr
        got[top] = json.loads(out.stdout)["ranked"]
    assert len(got["1"]) == 1 and len(got["10"]) == 10
    assert got["1"][0]["layout"] == got["10"][0]["layout"] and got["1"][0]["layout"]["tp"] == 2
    assert got["1"][0]["step_time_s"] == pytest.approx(got["10"][0]["step_time_s"], rel=1e-9)


def test_nemo_moe_defaults_are_its_model_configs_all_to_all_with_grouped_gemms():
    """NeMo's MoE model configs (Qwen3, DeepSeek, GPT-OSS: nemo/collections/llm/gpt/model/*.py) set the
    all-to-all dispatcher, grouped GEMM and fused permutation; --stack nemo had priced Megatron-core's
    allgather with one GEMM per expert (Qwen3-30B-A3B on 16 H100 at EP 8: 6.59 s)."""
    from costmodel.stacks import get_stack, stack_recipe
    r = stack_recipe(get_stack("nemo"), 256, 4096, "bf16")
    assert (r.moe_dispatcher, r.moe_grouped_gemm, r.moe_permute_fusion, r.moe_capacity_factor) == ("alltoall", True,
                                                                                                    True, 0.0)
    m = stack_recipe(get_stack("megatron"), 256, 4096, "bf16")
    assert (m.moe_dispatcher, m.moe_grouped_gemm, m.moe_permute_fusion) == ("allgather", False, False)


def test_an_mtp_module_runs_its_layer_s_collectives_and_keeps_its_activations_and_logits():
    """DeepSeek-V3's MTP module is a transformer layer with its own head and loss (DeepSeek-V3 sec. 2.2):
    its compute had been priced but not its TP and EP collectives nor its activations and logits. At PP 1
    the one stage runs 61 layers and the module: 62/61 of the collectives; it keeps one more layer's
    activations and a second set of logits."""
    import dataclasses
    from costmodel.memory import _memory_parts
    from costmodel.predict import predict_run
    from costmodel.specs import cluster_profile, load_cluster
    from costmodel.stacks import get_stack, stack_recipe
    m = load_model("deepseek-v3")
    c = load_cluster("dgx-h100", 32)
    p = cluster_profile(c, None)
    r = stack_recipe(get_stack("megatron"), 1024, 4096, "bf16", gpu=c.gpu, moe_dispatcher="flex", moe_grouped_gemm=True)
    lay = dict(tp=8, pp=1, dp=32, cp=1, ep=256, etp=1, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    with_mtp, without = (predict_run(x, r, c, p, lay, energy=False) for x in (m, dataclasses.replace(m, mtp_layers=0)))
    for k in ("tp_comm_s", "ep_comm_s"):
        assert with_mtp.breakdown[k] == pytest.approx(without.breakdown[k] * 62 / 61, rel=1e-9), k
    t = layout(**lay)
    one, none = (_memory_parts(x, r, t, c.gpu) for x in (m, dataclasses.replace(m, mtp_layers=0)))
    assert one.logits[0] == pytest.approx(2 * none.logits[0] + none.stored_layer[0], rel=1e-12)
    gained = with_mtp.memory["activations_bytes"] - without.memory["activations_bytes"]
    assert gained == pytest.approx(none.logits[0] + none.stored_layer[0], rel=1e-9)
