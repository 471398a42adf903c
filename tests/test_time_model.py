"""Time model: collective conventions, chunked PP messages, the 1F1B bubble, scalar == vectorised."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from costmodel.collective import CollectiveParams, busbw_factor, collective_time_s
from costmodel.comm import group_time_s
from costmodel.layouts import enumerate_layouts
from costmodel.predict import predict_table
from costmodel.search import search
from costmodel.specs import Recipe, load_cluster, load_model, load_profile

from conftest import layout, predict_one

L70 = load_model("llama3-70b")


def test_nccl_tests_bus_bandwidth_factors():
    # nccl-tests doc/PERFORMANCE.md
    assert busbw_factor("all_reduce", 8) == pytest.approx(2 * 7 / 8)
    assert busbw_factor("all_gather", 8) == pytest.approx(7 / 8)
    assert busbw_factor("reduce_scatter", 16) == pytest.approx(15 / 16)
    assert busbw_factor("all_to_all", 4) == pytest.approx(3 / 4)
    assert busbw_factor("send_recv", 2) == 1.0


def test_alpha_beta_limits():
    # two protocols: a low-latency one (LL-like) and a high-bandwidth one (Simple-like)
    p = CollectiveParams.from_protocols([(10e-6, 0.1), (50e-6, 0.8)])
    big = collective_time_s("all_reduce", 1e12, 8, 100e9, p)
    assert 1e12 * 1.75 / big == pytest.approx(80e9, rel=1e-4)          # busbw -> 0.8 x link
    assert collective_time_s("all_reduce", 1.0, 8, 100e9, p) == pytest.approx(10e-6, rel=1e-3)
    # crossover where 10us + 1.75 n / 10e9 = 50us + 1.75 n / 80e9
    n_x = 40e-6 / (1.75 / 10e9 - 1.75 / 80e9)
    assert collective_time_s("all_reduce", n_x, 8, 100e9, p) == pytest.approx(10e-6 + 1.75 * n_x / 10e9, rel=1e-9)
    assert collective_time_s("all_reduce", 1e9, 1, 100e9, p) == 0.0


def test_tp_chunked_pp_messages_reach_lower_bandwidth(h200):
    # seed characterization: TP x PP sends 1/TP-size messages per rank, which use the link worse
    cluster, profile = h200
    n = 8192 * 8192 * 2.0
    eff = []
    for tp in (1, 2, 4, 8):
        t = group_time_s("send_recv", np.array([n / tp]), np.array([8]), np.array([4]), cluster, profile,
                         np.array([8]))
        eff.append(n / tp / t[0])
    assert all(a > b for a, b in zip(eff, eff[1:]))


def test_bubble_fraction_1f1b_and_interleaved(h200):
    """Llama 3 70B on PP 4 (20 layers a stage, the last one also runs the logits), m = 128: the step is
    the last stage's m periods plus the fill and drain through the other stages, each 1/VP of a
    period of 20 layers: bubble / busy = 3 / (v m) x (the period without the logits / with them),
    Narayanan et al. SC21's (p - 1) / (v m) for equal stages."""
    cluster, profile = h200
    r = Recipe(gbs=128, seq_len=4096)
    for vp in (1, 2, 5):
        pred = predict_one(L70, cluster, profile, r, tp=8, pp=4, dp=1, vp=vp, sp=True)
        m = 128
        busy = pred.step_time_s[0] - pred.breakdown["bubble_s"][0] - pred.breakdown["dp_comm_s"][0] \
            - pred.breakdown["optimizer_s"][0]
        ct = pred.terms.compute
        logits = float(ct.logits_fwd_s[0] + ct.logits_bwd_s[0])
        period = busy / m
        assert 0.0 < logits < 0.05 * period
        assert pred.breakdown["bubble_s"][0] / busy == pytest.approx(3 / (vp * m) * (period - logits) / period,
                                                                      rel=1e-9)


def test_a_heavier_last_stage_paces_the_steady_state_not_the_fill():
    """GPT-2-style h = 16384 on PP 64 (one layer a stage) with 4 micro-batches: the last stage's logits
    (vocabulary 50,688 / TP 4) make it slower than the rest; the step is the 63 lighter stages' fill
    and drain once plus the last stage's 4 periods, not 67 periods of the last stage."""
    from dataclasses import replace
    from costmodel.specs import load_cluster, load_model, load_profile
    c = load_cluster("dgx-a100", nodes=32)
    p = load_profile(c.gpu.key)
    m = replace(load_model("gpt3-175b"), num_layers=64, hidden=16384, ffn_hidden=65536, num_heads=128,
                num_kv_heads=128, head_dim=128, vocab=50688, seq_len=1024)
    pred = predict_one(m, c, p, Recipe(gbs=4, seq_len=1024), tp=4, pp=64, dp=1, mbs=1, recompute="full")
    bd, ct = pred.breakdown, pred.terms.compute
    period = (pred.step_time_s[0] - bd["bubble_s"][0] - bd["dp_comm_s"][0] - bd["optimizer_s"][0]) / 4
    logits = float(ct.logits_fwd_s[0] + ct.logits_bwd_s[0])
    assert logits > 0.1 * period
    assert bd["bubble_s"][0] == pytest.approx(63 * (period - logits), rel=1e-9)


def test_scalar_predict_equals_vectorised_table(h200):
    cluster, profile = h200
    r = Recipe(gbs=128, seq_len=8192)
    table = enumerate_layouts(L70, r, cluster.num_gpus, cluster.gpus_per_node)
    pred = predict_table(L70, r, cluster, profile, table)
    for i in np.random.default_rng(0).choice(len(table), 25, replace=False):
        one = predict_table(L70, r, cluster, profile, table.take(np.array([i])))
        assert one.step_time_s[0] == pytest.approx(pred.step_time_s[i], rel=1e-12)
        assert one.memory.peak_bytes[0] == pytest.approx(pred.memory.peak_bytes[i], rel=1e-12)


def test_search_winner_is_the_brute_force_optimum(h200):
    cluster, profile = h200
    r = Recipe(gbs=64, seq_len=4096)
    m = load_model("llama3-8b")
    res = search(m, r, cluster, profile)
    table = enumerate_layouts(m, r, cluster.num_gpus, cluster.gpus_per_node)
    best = min((predict_table(m, r, cluster, profile, table.take(np.array([i]))) for i in range(len(table))),
               key=lambda p: p.step_time_s[0] if p.feasible[0] else np.inf)
    assert res.ranked.step_time_s[0] == pytest.approx(best.step_time_s[0], rel=1e-12)
    assert res.n_feasible == int(predict_table(m, r, cluster, profile, table).feasible.sum())


@settings(max_examples=25, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), mbs=st.sampled_from([1, 2]),
       scale=st.floats(1.5, 8.0))
def test_faster_links_never_slow_the_step(h200, tp, pp, mbs, scale):
    from dataclasses import replace
    cluster, profile = h200
    dp = 32 // (tp * pp)
    r = Recipe(gbs=128, seq_len=4096)
    kw = dict(tp=tp, pp=pp, dp=dp, mbs=mbs, sp=tp > 1, recompute="full")
    base = predict_one(L70, cluster, profile, r, **kw).step_time_s[0]
    fast = replace(cluster, nic_bytes_per_s=cluster.nic_bytes_per_s * scale,
                   intra_bytes_per_s=cluster.intra_bytes_per_s * scale)
    assert predict_one(L70, fast, profile, r, **kw).step_time_s[0] <= base * (1 + 1e-12)


def test_fp8_pays_its_casts_and_keeps_the_output_layer_in_16_bit():
    """Transformer Engine's cast-transpose reads each fp8 GEMM input (2 bytes) and writes it twice
    in fp8 (1 + 1 bytes): four inputs per layer forward, four output gradients backward."""
    from costmodel.compute import compute_times
    from costmodel.formats import FORMATS
    FP8_CAST_BYTES = FORMATS["fp8"].cast_bytes
    assert FP8_CAST_BYTES == 4.0
    m = load_model("llama3-8b")
    c = load_cluster("dgx-h100")
    p = load_profile(c.gpu.key)
    t = layout(tp=2, dp=4)
    r16, r8 = Recipe(gbs=64, seq_len=4096), Recipe(gbs=64, seq_len=4096, precision="fp8")
    a = compute_times(m, r16, c, p, t.view(compute_times.layout_fields))
    b = compute_times(m, r8, c, p, t.view(compute_times.layout_fields))
    tok, tp, h, q, ffn = 4096, 2, m.hidden, m.q_dim, m.ffn_hidden
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    l16, l8 = p.gemm["bf16"].launch_s, p.gemm["fp8"].launch_s
    in_f = tok * (h + q / tp + h + ffn / tp)
    # the cast kernels are memory-bound: the 16-bit fit's launch, like every elementwise kernel
    assert l8 != l16
    assert b.layer_ew_fwd_s[0] - a.layer_ew_fwd_s[0] == pytest.approx(FP8_CAST_BYTES * in_f / bw + 4 * l16, rel=1e-9)
    assert b.layer_gemm_fwd_s[0] < 0.7 * a.layer_gemm_fwd_s[0]       # the GEMMs themselves run in fp8
    # the output layer's GEMMs and the cross-entropy are the 16-bit ones
    assert b.logits_fwd_s[0] == pytest.approx(a.logits_fwd_s[0], rel=1e-12)


def test_overlap_leaves_the_last_gradient_bucket_and_the_first_param_bucket_exposed(h200):
    """Megatron-core overlap_grad_reduce/overlap_param_gather hide every bucket but the last gradient
    bucket (reduced after the backward ends) and the first parameter bucket (gathered before the
    forward starts): with a long backward, exactly those two stay exposed."""
    from costmodel.comm import comm_times
    c, p = h200
    m = load_model("llama3-8b")
    r = Recipe(gbs=512, seq_len=8192)
    t = layout(tp=1, pp=1, dp=8, zero=1, mbs=1, overlap=True)
    pred = predict_one(m, c, p, r, tp=1, pp=1, dp=8, zero=1, mbs=1, overlap=True)
    cm = comm_times(m, r, c, p, t)
    assert cm.dp_grad_tail_s[0] > 0 and cm.dp_param_head_s[0] > 0
    assert cm.dp_grad_tail_s[0] < cm.dp_grad_s[0] / 10            # 8B params in 40M-param buckets
    assert pred.breakdown["dp_comm_s"][0] == pytest.approx(cm.dp_grad_tail_s[0] + cm.dp_param_head_s[0], rel=1e-12)


def test_a_short_micro_batch_waits_for_the_cpu_of_an_eager_stack(h200):
    """56 eager calls per layer pass at 4.5 us each (PyTorch dev-discuss 1836) bound a layer whose
    kernels take less: Llama 2 7B, 1 x 128 tokens on an H200; the fused Megatron block (12 calls)
    is GPU-bound there, and at 8k tokens neither waits."""
    from costmodel.compute import compute_times
    from costmodel.stacks import EAGER_OP_OVERHEAD_S
    c, p = h200
    m = load_model("llama2-7b")
    t = layout(tp=1, mbs=1)
    eager = compute_times(m, Recipe(gbs=8, seq_len=128, stack="deepspeed"), c, p, t)
    fused = compute_times(m, Recipe(gbs=8, seq_len=128, stack="megatron"), c, p, t)
    assert eager.layer_fwd_s[0] == pytest.approx(56 * EAGER_OP_OVERHEAD_S, rel=1e-12)
    assert fused.layer_fwd_s[0] < eager.layer_fwd_s[0] and fused.layer_fwd_s[0] > 12 * EAGER_OP_OVERHEAD_S
    long = compute_times(m, Recipe(gbs=8, seq_len=8192, stack="deepspeed"), c, p, t)
    assert long.layer_fwd_s[0] > 10 * 56 * EAGER_OP_OVERHEAD_S


def test_megatron_deepspeed_reduces_the_backward_tp_gradient_synchronously(h200):
    """BigScience's Megatron-DeepSpeed has no async TP all-reduce (its ColumnParallelLinear reduces the
    input gradient in copy_to_tensor_model_parallel_region): all backward TP comm is exposed, while
    Megatron-LM hides half of it under the weight-gradient GEMMs."""
    c, p = h200
    m = load_model("llama3-8b")
    kw = dict(tp=8, pp=1, dp=1, sp=False, mbs=1, overlap=True)
    mc = predict_one(m, c, p, Recipe(gbs=8, seq_len=4096, stack="megatron"), **kw)
    ds = predict_one(m, c, p, Recipe(gbs=8, seq_len=4096, stack="megatron-deepspeed"), **kw)
    off = predict_one(m, c, p, Recipe(gbs=8, seq_len=4096, stack="megatron"), **dict(kw, overlap=False))
    assert ds.breakdown["tp_comm_s"][0] > mc.breakdown["tp_comm_s"][0]
    assert ds.breakdown["tp_comm_s"][0] == pytest.approx(off.breakdown["tp_comm_s"][0], rel=1e-12)


def test_deepspeed_pipeline_sends_the_whole_activation_from_every_tp_rank(h200):
    """Megatron-LM sends 1/TP of the stage-boundary activation from each TP rank (SC21 sec. 4.1);
    DeepSpeed's pipeline engine (Megatron-DeepSpeed) sends the whole tensor: TP x the bytes."""
    from costmodel.comm import comm_times
    c, p = h200
    m = load_model("llama3-8b")
    t = layout(tp=8, pp=4, dp=1, mbs=1)
    mc = comm_times(m, Recipe(gbs=8, seq_len=4096, stack="megatron"), c, p, t).pp_p2p_s[0]
    ds = comm_times(m, Recipe(gbs=8, seq_len=4096, stack="megatron-deepspeed"), c, p, t).pp_p2p_s[0]
    n = 4096 * m.hidden * 2.0
    one = np.ones(1)
    assert mc == pytest.approx(float(group_time_s("send_recv", n / 8 * one, 8 * one, 4 * one, c, p, 8 * one)[0]),
                               rel=1e-12)
    assert ds == pytest.approx(float(group_time_s("send_recv", n * one, 8 * one, 4 * one, c, p, 8 * one)[0]),
                               rel=1e-12)
    assert ds > 4 * mc


def test_deepspeed_pipeline_reduces_gradients_after_the_last_micro_batch(h200):
    """DeepSpeed's TrainSchedule runs ReduceGrads after the pipeline drains: on Megatron-DeepSpeed the
    whole DP gradient reduction is exposed even with overlap on; Megatron hides all but a bucket."""
    c, p = load_cluster("paper-h200"), load_profile("h200-sxm-141gb")
    m = load_model("llama3-8b")
    kw = dict(tp=2, pp=2, dp=8, sp=False, mbs=1, zero=1, overlap=True)
    mc = predict_one(m, c, p, Recipe(gbs=64, seq_len=4096, stack="megatron"), **kw)
    ds = predict_one(m, c, p, Recipe(gbs=64, seq_len=4096, stack="megatron-deepspeed"), **kw)
    from costmodel.comm import comm_times
    cm = comm_times(m, Recipe(gbs=64, seq_len=4096, stack="megatron-deepspeed"), c, p, layout(**kw))
    assert ds.breakdown["dp_comm_s"][0] > mc.breakdown["dp_comm_s"][0]
    assert ds.breakdown["dp_comm_s"][0] == pytest.approx(cm.dp_grad_s[0] + cm.dp_param_s[0], rel=1e-9)
    # reduced after the backward, the gradients go as one bucket: the same cost as with overlap off
    off = predict_one(m, c, p, Recipe(gbs=64, seq_len=4096, stack="megatron-deepspeed"), **dict(kw, overlap=False))
    assert ds.breakdown["dp_comm_s"][0] == pytest.approx(off.breakdown["dp_comm_s"][0], rel=1e-9)


def test_deepspeed_zero3_overlaps_where_zero2_waits():
    """DeepSpeed's overlap_comm defaults to on at stage 3 only (deepspeed/runtime/zero/config.py
    overlap_comm_valid) and ZeRO-3 prefetches its parameters: its per-layer gathers hide under the
    micro-batch (all but the first gather and the last reduce-scatter), while ZeRO-2's gradient
    reduction waits for the backward to end unless --dp-overlap turns overlap_comm on."""
    from costmodel.comm import comm_times
    from costmodel.stacks import get_stack, stack_recipe
    c, p = load_cluster("paper-h200"), load_profile("h200-sxm-141gb")
    m = load_model("llama3-8b")
    r = stack_recipe(get_stack("deepspeed"), 64, 4096, "bf16")
    assert not r.dp_overlap
    kw = dict(tp=1, pp=1, dp=8, sp=False, mbs=1, overlap=True)
    z3 = predict_one(m, c, p, r, **kw, zero=3)
    cm3 = comm_times(m, r, c, p, layout(**kw, zero=3))
    assert z3.breakdown["dp_comm_s"][0] == pytest.approx(cm3.fsdp_edge_s[0] * 8, rel=1e-9)
    assert cm3.fsdp_mb_s[0] > 10 * cm3.fsdp_edge_s[0]
    off3 = predict_one(m, c, p, r, **dict(kw, overlap=False), zero=3)
    assert off3.breakdown["dp_comm_s"][0] == pytest.approx(cm3.fsdp_mb_s[0] * 8, rel=1e-9)
    z2 = predict_one(m, c, p, r, **kw, zero=2)
    cm2 = comm_times(m, r, c, p, layout(**kw, zero=2))
    assert z2.breakdown["dp_comm_s"][0] == pytest.approx(cm2.dp_grad_s[0] + cm2.dp_param_s[0], rel=1e-9)
    on2 = predict_one(m, c, p, stack_recipe(get_stack("deepspeed"), 64, 4096, "bf16", dp_overlap=True), **kw, zero=2)
    assert on2.breakdown["dp_comm_s"][0] < 0.5 * z2.breakdown["dp_comm_s"][0]


def test_torchtitan_selective_recompute_reruns_every_second_matmul(h200):
    """torchtitan's op-level selective checkpointing re-runs every second matmul and the memory-bound
    ops (activation_checkpoint.py); Megatron's re-runs the checkpointed attention core, the fused flash
    kernel's forward included (attention.py _checkpointed_attention_forward), and nothing else by default."""
    from costmodel.compute import compute_times
    c, p = h200
    m = load_model("llama3-8b")
    t = layout(tp=1, mbs=1, recompute="selective")
    tt = compute_times(m, Recipe(gbs=8, seq_len=8192, stack="torchtitan"), c, p, t)
    mc = compute_times(m, Recipe(gbs=8, seq_len=8192, stack="megatron"), c, p, t)
    assert mc.layer_recompute_s[0] == mc.layer_attn_fwd_s[0] > 0
    assert tt.layer_recompute_s[0] == pytest.approx(0.5 * tt.layer_gemm_fwd_s[0] + tt.layer_ew_fwd_s[0], rel=1e-12)


def test_unfused_projections_run_as_separate_gemms(h200):
    """torchtitan (wq, wk, wv; w1, w3) and Hugging Face under DeepSpeed (q/k/v_proj, gate/up_proj) run
    Q, K, V and the gate and up projections as GEMMs of their own; Megatron fuses them (linear_qkv,
    linear_fc1) and llm-foundry fuses only Wqkv.  Llama 3 8B, 8192 tokens: the forward GEMM time
    differs from Megatron's by exactly the hand-computed difference of those GEMM shapes."""
    from costmodel.compute import compute_times
    from costmodel.gemm import gemm_time_s
    c, p = h200
    m = load_model("llama3-8b")
    t = layout(tp=1, mbs=1)
    tok, h = 8192, 4096
    g = lambda n, k: float(gemm_time_s(tok, n, k, 1, c.gpu.peak_flops["bf16"], c.gpu.hbm_bytes_per_s,  # noqa: E731
                                       p.hbm_efficiency, p.gemm["bf16"]))
    qkv = g(4096, h) + 2 * g(1024, h) - g(6144, h)
    gate_up = 2 * g(14336, h) - g(28672, h)
    fwd = {s: float(compute_times(m, Recipe(gbs=8, seq_len=tok, stack=s), c, p, t).layer_gemm_fwd_s[0])
           for s in ("megatron", "torchtitan", "deepspeed", "llm-foundry")}
    assert qkv > 0 and gate_up > 0
    assert fwd["torchtitan"] - fwd["megatron"] == pytest.approx(qkv + gate_up, rel=1e-9)
    assert fwd["deepspeed"] == pytest.approx(fwd["torchtitan"], rel=1e-12)
    assert fwd["llm-foundry"] - fwd["megatron"] == pytest.approx(gate_up, rel=1e-9)


def test_torchtitan_ring_attention_merges_and_accumulates_in_fp32(h200):
    """PyTorch's ring attention (torchtitan CP; torch/distributed/tensor/experimental/_attention.py)
    merges each step's output in eager fp32 ops and accumulates and rotates the gradients in fp32
    (costmodel.ring_attention): at CP 2 that is 50 bytes per output element and 4 per key/value element
    forward, 30 and 53 backward.  Llama 3 8B, 8192 tokens per rank: the layer's memory-bound time at
    CP 4 exceeds the same tokens without CP by exactly those bytes and 6 kernels a step; the backward
    sends the keys and values again plus their fp32 gradients every step, 1 + 2 x 4/3 times the
    forward's traffic (Megatron's 2)."""
    from costmodel.comm import microbatch_comm_times
    from costmodel.compute import compute_times
    from costmodel.ring_attention import merge_bytes
    c, p = h200
    assert [float(x) for x in merge_bytes(2, 1.0, 0.0)] == [50.0, 30.0]
    assert [float(x) for x in merge_bytes(2, 0.0, 1.0)] == [4.0, 53.0]
    assert [float(x) for x in merge_bytes(1, 1.0, 1.0)] == [0.0, 0.0]
    m = load_model("llama3-8b")
    tok = 8192
    cp4 = compute_times(m, Recipe(gbs=8, seq_len=4 * tok, stack="torchtitan"), c, p, layout(tp=1, cp=4, mbs=1))
    cp1 = compute_times(m, Recipe(gbs=8, seq_len=tok, stack="torchtitan"), c, p, layout(tp=1, cp=1, mbs=1))
    e_q, e_kv = tok * 4096, tok * 2048
    bw, launch = c.gpu.hbm_bytes_per_s * p.hbm_efficiency, p.gemm["bf16"].launch_s
    f, b = (float(x) for x in merge_bytes(4, e_q, e_kv))
    assert f == 12 * e_q + 3 * (38 * e_q + 4 * e_kv)
    assert float(cp4.layer_ew_fwd_s[0] - cp1.layer_ew_fwd_s[0]) == pytest.approx(f / bw + 24 * launch, rel=1e-9)
    assert float(cp4.layer_ew_bwd_s[0] - cp1.layer_ew_bwd_s[0]) == pytest.approx(b / bw + 24 * launch, rel=1e-9)
    lay = layout(tp=1, cp=4, mbs=1)
    tt = microbatch_comm_times(m, Recipe(gbs=8, seq_len=4 * tok, stack="torchtitan"), c, p, lay)
    mg = microbatch_comm_times(m, Recipe(gbs=8, seq_len=4 * tok, stack="megatron"), c, p, lay)
    assert float(tt.cp_layer_bwd_s[0] / tt.cp_layer_fwd_s[0]) == pytest.approx(1 + 2 * 4 / 3, rel=1e-12)
    assert float(mg.cp_layer_bwd_s[0] / mg.cp_layer_fwd_s[0]) == pytest.approx(2.0, rel=1e-12)
    # the ring hides its sends under the attention; --no-overlap (every collective exposed) exposes them
    from costmodel.schedule import exposed_layer_comm
    r4 = Recipe(gbs=8, seq_len=4 * tok, stack="torchtitan")
    for ov, want in ((True, 0.0), (False, float(tt.cp_layer_fwd_s[0]))):
        t = layout(tp=1, cp=4, mbs=1, overlap=ov)
        e = exposed_layer_comm(r4, t, compute_times(m, r4, c, p, t), microbatch_comm_times(m, r4, c, p, t))
        assert float(e["cp_f"][0]) == pytest.approx(want, abs=1e-12)


def test_repeated_kv_heads_cost_a_copy_each_way_and_grow_the_ring_and_the_saved_inputs(h200):
    """torchtitan's Llama attention before pytorch/torchtitan#2259 repeats GQA's K and V to the query
    heads (``repeat_kv``) before SDPA: Llama 3 8B's 8 K/V heads become 32, so the kernel reads 4 x 2048
    elements per token.  The copy reads K and V and writes the repeated ones (2048 + 8192 elements of 2
    bytes a token, 2 kernels), its backward sums them back (the same bytes); a CP ring rotates the
    repeated blocks (4x the bytes a send), merges 4x the key/value
    elements, and the layer stores the repeated K and V (6,144 more elements a token) where it keeps
    the kernel's inputs.  MLA's K and V are per head already."""
    from costmodel.comm import microbatch_comm_times
    from costmodel.compute import compute_times
    from costmodel.memory import activation_bytes_per_layer
    from costmodel.ring_attention import merge_bytes
    c, p = h200
    m = load_model("llama3-8b")
    assert m.kv_repeat_factor == 4 and m.attention_kv_width(False) == 2048 and m.attention_kv_width(True) == 8192
    ds = load_model("deepseek-v3")
    assert ds.attention_kv_width(True) == ds.attention_kv_width(False) == ds.k_dim + ds.v_dim
    tok = 8192
    bw, launch = c.gpu.hbm_bytes_per_s * p.hbm_efficiency, p.gemm["bf16"].launch_s
    rec = {k: Recipe(gbs=8, seq_len=tok, stack="torchtitan", kv_repeat=k) for k in (False, True)}
    one = {k: compute_times(m, r, c, p, layout(tp=1, cp=1, mbs=1)) for k, r in rec.items()}
    copy = tok * (2048 + 8192) * 2
    for d in ("fwd", "bwd"):
        diff = float(getattr(one[True], f"layer_ew_{d}_s")[0] - getattr(one[False], f"layer_ew_{d}_s")[0])
        assert diff == pytest.approx(copy / bw + 2 * launch, rel=1e-9)
    assert one[True].layer_attn_fwd_s[0] == one[False].layer_attn_fwd_s[0]
    full = layout(tp=1, cp=1, mbs=1, recompute="none")
    saved = [float(activation_bytes_per_layer(m, r, full)[0]) for r in rec.values()]
    assert saved[1] - saved[0] == tok * (8192 - 2048) * 2
    sac = layout(tp=1, cp=1, mbs=1, recompute="selective")       # op-SAC keeps V as wv's output, not the kernel's
    assert float(activation_bytes_per_layer(m, rec[True], sac)[0]) == float(activation_bytes_per_layer(m, rec[False], sac)[0])
    ring = {k: Recipe(gbs=8, seq_len=4 * tok, stack="torchtitan", kv_repeat=k) for k in (False, True)}
    lay = layout(tp=1, cp=4, mbs=1)
    cp = {k: compute_times(m, r, c, p, lay) for k, r in ring.items()}
    rep_f = float(merge_bytes(4, 0.0, tok * 8192)[0] - merge_bytes(4, 0.0, tok * 2048)[0])
    assert float(cp[True].layer_ew_fwd_s[0] - cp[False].layer_ew_fwd_s[0]) == pytest.approx(
        copy / bw + 2 * launch + rep_f / bw, rel=1e-9)
    for r, width in zip(ring.values(), (2048, 8192)):        # CP - 1 = 3 sends of the kernel's K and V
        step = group_time_s("send_recv", np.array([tok * width * 2.0]), np.array([1]), np.array([4]), c, p, 1)
        assert float(microbatch_comm_times(m, r, c, p, lay).cp_layer_fwd_s[0]) == pytest.approx(3 * float(step[0]),
                                                                                                 rel=1e-12)


def test_a_hop_across_nodes_gets_one_nic_however_few_gpus_cross():
    """A CP ring or pipeline boundary that crosses nodes with one GPU per node is one GPU's stream to one
    peer: NCCL runs it over that GPU's closest NIC, so it moves no faster than one NIC (50 GB/s on a DGX
    H100) and takes as long as when every GPU of the node crosses at once; inside a node it runs on NVLink."""
    c = load_cluster("dgx-h100", 2)
    p = load_profile(c.gpu.key)
    n = 64 * 2**20
    one, all8 = (float(group_time_s("send_recv", np.array([n]), np.array([1]), np.array([16]), c, p, k)[0])
                 for k in (1, 8))
    intra = float(group_time_s("send_recv", np.array([n]), np.array([1]), np.array([8]), c, p, 1)[0])
    assert one == pytest.approx(all8, rel=1e-12)
    assert n / one < c.nic_bytes_per_s and intra < one


def test_volta_runs_unfused_attention_and_refuses_a_fused_kernel():
    """No fused-attention kernel runs on V100 (FlashAttention: Turing or newer; TE fused attention
    sm80+): the stack's flash default gives way to unfused attention, which keeps the s x s scores
    in HBM and runs them as batched GEMMs; asking for flash attention there is refused."""
    from costmodel.errors import InputError
    from costmodel.stacks import get_stack, stack_recipe
    mg = get_stack("megatron")
    assert stack_recipe(mg, 16, 4096, "fp16").flash_attention
    from costmodel.specs import load_gpu
    v100 = load_gpu("v100-sxm2-32gb")
    v = stack_recipe(mg, 16, 4096, "fp16", gpu=v100)
    assert not v.flash_attention
    assert stack_recipe(mg, 16, 4096, "bf16", gpu=load_gpu("a100-sxm-80gb")).flash_attention
    for kw in (dict(flash_attention=True), dict(attention_kernel="fa2")):
        with pytest.raises(InputError, match="no fused-attention kernel runs on V100-SXM2-32GB"):
            stack_recipe(mg, 16, 4096, "fp16", gpu=v100, **kw)


def test_a_recomputed_module_re_runs_its_forward_in_every_backward():
    """Selective recompute of Llama 3 8B's dense MLP ('mlp') re-runs FC1, SwiGLU and FC2 forward in each
    layer's backward: more than the two GEMMs' bare FLOP time, less than the whole layer forward, and the
    step grows by exactly that per layer and micro-batch; a recomputed MoE layer also dispatches again."""
    from costmodel.compute import compute_times
    from costmodel.predict import predict_run
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100", 1)
    p = load_profile("h100-sxm-80gb")
    t = layout(tp=1, dp=8, mbs=1, recompute="selective")
    base, mlp = Recipe(gbs=64, seq_len=8192), Recipe(gbs=64, seq_len=8192, recompute_modules="core_attn,mlp")
    ct0, ct1 = compute_times(m, base, c, p, t), compute_times(m, mlp, c, p, t)
    extra = float(ct1.layer_recompute_s[0] - ct0.layer_recompute_s[0])
    bare = 2 * 8192 * 3 * 4096 * 14336 / c.gpu.peak_flops["bf16"]        # FC1 (gate, up) + FC2 at peak
    assert bare < extra < float(ct0.layer_fwd_s[0])
    lay = dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, recompute="selective", zero=1, sp=False, overlap=True)
    r0, r1 = predict_run(m, base, c, p, lay, energy=False), predict_run(m, mlp, c, p, lay, energy=False)
    assert r1.breakdown["compute_s"] - r0.breakdown["compute_s"] == pytest.approx(8 * 32 * extra, rel=1e-9)
    q = load_model("qwen3-30b-a3b")
    moe = dict(lay, ep=8)
    q0 = predict_run(q, base, c, p, moe, energy=False)
    q1 = predict_run(q, Recipe(gbs=64, seq_len=8192, recompute_modules="core_attn,moe"), c, p, moe, energy=False)
    assert q1.breakdown["ep_comm_s"] > q0.breakdown["ep_comm_s"] > 0


def test_eager_norm_rope_and_swiglu_cost_their_hbm_round_trips(h200):
    """torchtitan without torch.compile runs RMSNorm (8 ops: 36 bytes per element), the complex rotary
    product (20) and silu * up (10) eagerly; fused kernels move 4, 4 and 6.  For Llama 3 8B (h 4096,
    q 4096 + kv 1024, FFN 14336) the layer forward's memory-bound time differs by exactly those bytes over
    the fitted HBM bandwidth; torchtitan's default is eager, a [compile] section turns it fused."""
    from costmodel.compute import compute_times
    from costmodel.run_config import read_run_config
    c, p = h200
    m = load_model("llama3-8b")
    t = layout(tp=1, mbs=1)
    tok = 8192
    eager = compute_times(m, Recipe(gbs=8, seq_len=tok, stack="torchtitan", fused_elementwise=False), c, p, t)
    fused = compute_times(m, Recipe(gbs=8, seq_len=tok, stack="torchtitan", fused_elementwise=True), c, p, t)
    extra = tok * (2 * (36 - 4) * 4096 + (20 - 4) * (4096 + 1024) + (10 - 6) * 14336)
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    assert float(eager.layer_ew_fwd_s[0] - fused.layer_ew_fwd_s[0]) == pytest.approx(extra / bw, rel=1e-9)
    from costmodel.stacks import get_stack, stack_recipe
    assert not stack_recipe(get_stack("torchtitan"), 8, tok, "bf16").fused_elementwise
    assert stack_recipe(get_stack("megatron"), 8, tok, "bf16").fused_elementwise
    cfg = read_run_config("tests/data/configs/torchtitan_llama3_8b.toml")     # [compile] enable = false
    assert cfg.recipe["fused_elementwise"] is False


def test_an_offloaded_optimizer_steps_on_the_host():
    """ZeRO-Offload of Llama 3 8B over 8 H200 (ZeRO-3): each GPU's 1/8 of the parameters sends 2-byte
    gradients over its 64 GB/s PCIe link, the host steps each rank's partition at the fitted per-rank
    rate (its DRAM pass, 8 ranks x 34 bytes per parameter over 614.4 GB/s, is shorter), and 2-byte
    parameters come back; no optimizer bytes stay in HBM."""
    from costmodel.optimizer_step import HOST_STEP_S_PER_PARAM
    from costmodel.predict import predict_run
    m, c, p = load_model("llama3-8b"), load_cluster("hgx-h200", 1), load_profile("h200-sxm-141gb")
    r = Recipe(gbs=8, seq_len=8192, stack="deepspeed", optimizer="adamw", optimizer_offload=True)
    lay = dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, recompute="full", zero=3, sp=False, overlap=True)
    run = predict_run(m, r, c, p, lay, energy=False)
    local = m.params() / 8
    assert 34 * local * 8 / 614.4e9 < local * HOST_STEP_S_PER_PARAM
    want = local * 2 / 64e9 + local * HOST_STEP_S_PER_PARAM + local * 2 / 64e9
    assert run.breakdown["optimizer_s"] == pytest.approx(want, rel=1e-9)
    assert run.memory["optimizer_bytes"] == 0.0
    from costmodel.errors import InputError
    with pytest.raises(InputError, match="host: missing"):
        predict_run(m, r, load_cluster("aws-p5", 1), load_profile("h100-sxm-80gb"), lay, energy=False)


def test_tp_overlap_is_a_pipeline_of_tp_chunks_with_one_chunk_exposed():
    """A collective pipelined with its GEMM in n = TP chunks leaves max(C, G) + min(C, G)/n - G
    exposed: 8 ms of comm under 4 ms of GEMM at TP8 exposes 4 + 0.5 ms; 2 ms under 4 ms at TP4 exposes
    0.5 ms (the first chunk); one chunk is no overlap at all."""
    from costmodel.schedule import _pipelined_exposed
    assert float(_pipelined_exposed(8e-3, 4e-3, 8)) == pytest.approx(4.5e-3)
    assert float(_pipelined_exposed(2e-3, 4e-3, 4)) == pytest.approx(0.5e-3)
    assert float(_pipelined_exposed(3e-3, 4e-3, 1)) == pytest.approx(3e-3)
    # the exposed part never exceeds the collective and falls with more chunks
    c, g = np.linspace(0, 1e-2, 11), 5e-3
    for n in (2, 4, 8):
        e = _pipelined_exposed(c, g, n)
        assert np.all(e <= c + 1e-15) and np.all(e >= _pipelined_exposed(c, g, 2 * n) - 1e-15)


def test_torchtitan_sequence_parallel_pays_the_functional_collectives_copies():
    """torchtitan's SP all-gathers and reduce-scatters run on the sequence dim of [batch, seq, hidden]:
    PyTorch's functional collectives copy the full tensor (one read, one write) after each gather
    and before each scatter; the gather's copy is a view for one sequence a micro-batch; Megatron's
    [seq, batch, hidden] layout has none, and async TP's fused gather-matmul skips them.  Llama-3-8B,
    TP8 SP, mbs 12 x 8192 tokens on H100: 2 gathers and 2 scatters a layer pass, 805 MB each."""
    from costmodel.comm import microbatch_comm_times
    from costmodel.stacks import STACKS, stack_recipe
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    act = 12 * 8192 * m.hidden * 2.0
    copy = 2 * act / (c.gpu.hbm_bytes_per_s * p.hbm_efficiency)
    assert act == pytest.approx(805.3e6, rel=1e-3)

    def tp_f(stack, mbs=12, **kw):
        r = stack_recipe(STACKS[stack], 96, 8192, "bf16", **kw)
        t = layout(tp=8, mbs=mbs, sp=True).view(microbatch_comm_times.layout_fields)
        return float(microbatch_comm_times(m, r, c, p, t).tp_layer_fwd_s[0])

    assert tp_f("torchtitan") - tp_f("megatron") == pytest.approx(2 * 2 * copy, rel=1e-6)
    assert tp_f("torchtitan", mbs=1) - tp_f("megatron", mbs=1) == pytest.approx(2 * copy / 12, rel=1e-6)
    assert tp_f("torchtitan", tp_comm_overlap=True) == pytest.approx(tp_f("megatron"), rel=1e-9)


def test_interleaved_pipeline_sends_hide_under_the_next_virtual_stage(h200):
    """Megatron-core overlaps an interleaved schedule's stage-boundary sends with the next virtual
    stage's compute (overlap_p2p_comm): a send shorter than a chunk's forward and backward is fully
    hidden, the compute pays the profile's contention on it, and the warm-up and flush still wait
    for every send; without VP Megatron forces the overlap off, and 2021 Megatron-LM had none."""
    from costmodel.comm import comm_times
    c, p = h200
    m = load_model("llama3-70b")
    kw = dict(tp=8, pp=4, dp=1, vp=5, mbs=1, sp=True)
    on, off = (Recipe(gbs=32, seq_len=4096, pp_overlap=v) for v in (True, False))
    a, b = predict_one(m, c, p, on, **kw), predict_one(m, c, p, off, **kw)
    p2p = float(comm_times(m, on, c, p, layout(**kw)).pp_p2p_s[0])
    hidden = 32 * 2 * 5 * p2p                          # 32 micro-batches x 2 VP transfers
    assert b.breakdown["pp_comm_s"][0] == pytest.approx(hidden, rel=1e-12)
    assert a.breakdown["pp_comm_s"][0] == 0.0
    assert a.breakdown["compute_s"][0] - b.breakdown["compute_s"][0] == pytest.approx(
        (p.overlap_slowdown - 1) * hidden, rel=1e-9)
    assert a.breakdown["bubble_s"][0] > b.breakdown["bubble_s"][0] - 1e-12   # warm-up sends stay exposed
    for same in (dict(kw, vp=1), dict(kw, overlap=False)):      # forced off without VP; --no-overlap
        assert predict_one(m, c, p, on, **same).step_time_s[0] == predict_one(m, c, p, off, **same).step_time_s[0]
    from costmodel.stacks import STACKS
    assert [s for s in STACKS if STACKS[s].defaults["pp_overlap"]] == ["megatron", "nemo"]


def test_torchtitan_tp_backward_reduce_scatters_stay_exposed(h200):
    """DTensor TP (torchtitan) issues the input-gradient reduce-scatter after the linears' backward
    nodes, so none of it hides under their weight gradients; its async TP micro-pipelines the forward
    and the backward all-gathers but finds no matmul + reduce-scatter to fuse in the backward (the
    reduce-scatter takes a sum of matmuls).  Megatron hides each reduce-scatter under its own
    column-parallel weight gradient (TE's overlap the same way: bulk), and each collective of the
    overlap pipelines only with the GEMM it feeds or drains: the attention's all-gather with QKV, its
    reduce-scatter with the output projection (in TE's 4 splits), the MLP's with FC1 and FC2."""
    from costmodel.comm import comm_times
    from costmodel.compute import compute_times
    from costmodel.schedule import _pipelined_exposed, exposed_layer_comm
    c, p = h200
    m = load_model("llama3-8b")
    t = layout(tp=8, pp=1, dp=1, mbs=2, sp=True, zero=1)
    ring = lambda c_, g: float(_pipelined_exposed(c_, g, 8.0))        # noqa: E731
    bulk = lambda c_, g: max(0.0, c_ - g)                             # noqa: E731
    for stack in ("torchtitan", "megatron"):
        for ov in (False, True):
            r = Recipe(gbs=2, seq_len=8192, stack=stack, tp_comm_overlap=ov)
            ct, cm = compute_times(m, r, c, p, t), comm_times(m, r, c, p, t)
            ag, rs = cm.tp_ag_s[0], cm.tp_rs_s[0]
            cols, rows = (ct.attn_col_fwd_s[0], ct.dense_mlp_col_fwd_s[0]), (ct.attn_row_fwd_s[0], ct.dense_mlp_row_fwd_s[0])
            assert cm.tp_layer_fwd_s[0] == pytest.approx(2 * (ag + rs), rel=1e-12)
            e = exposed_layer_comm(r, t, ct, cm)
            rs_splits = 8.0 if stack == "torchtitan" else 4.0
            want_f = (sum(ring(ag, g) for g in cols) + sum(float(_pipelined_exposed(rs, g, rs_splits)) for g in rows)
                      if ov else 2 * (ag + rs))
            assert e["tp_f"][0] == pytest.approx(want_f, rel=1e-12), (stack, ov)
            rowpar = sum(ring(ag, g) for g in rows) if ov else 2 * ag
            if stack == "torchtitan":
                assert cm.tp_layer_bwd_s[0] == cm.tp_layer_fwd_s[0]
                want = rowpar + 2 * rs if ov else 2 * (ag + rs)
            else:
                assert cm.tp_regather_s[0] == pytest.approx(2 * ag, rel=1e-12)
                want = rowpar + sum(bulk(rs, g) + bulk(ag, g) for g in cols)
            assert e["tp_b"][0] == pytest.approx(want, rel=1e-12), (stack, ov)
            # TE's pipelined reduce-scatters and bulk backward collectives hold SMs (priced in the GEMMs):
            # what they hide is kept out of the contention the other overlaps pay
            held = stack == "megatron" and ov
            want_sm_f = sum(rs - float(_pipelined_exposed(rs, g, 4.0)) for g in rows) if held else 0.0
            want_sm_b = sum(rs - bulk(rs, g) + ag - bulk(ag, g) for g in cols) if held else 0.0
            assert e["tp_sm_f"][0] == pytest.approx(want_sm_f, rel=1e-12)
            assert e["tp_sm_b"][0] == pytest.approx(want_sm_b, rel=1e-12)
    # the attention's collectives outweigh its small GEMMs (GQA's QKV is 1.5 h wide): pairing them
    # with their own GEMMs exposes more than pooling every collective under every GEMM would
    r = Recipe(gbs=2, seq_len=8192, stack="megatron", tp_comm_overlap=True)
    ct, cm = compute_times(m, r, c, p, t), comm_times(m, r, c, p, t)
    assert cm.tp_ag_s[0] > ct.attn_row_fwd_s[0]
    assert exposed_layer_comm(r, t, ct, cm)["tp_f"][0] > float(_pipelined_exposed(cm.tp_layer_fwd_s, ct.layer_gemm_fwd_s, 8.0)[0])


def test_sequence_parallel_backward_gathers_column_parallel_inputs_again(h200):
    """Megatron and Transformer Engine keep the sequence shard of QKV's and FC1's input and
    all-gather it again in the backward for the weight gradient, under the input-gradient GEMM
    (Megatron-core layers.py LinearWithGradAccumulationAndAsyncCommunication.backward; TE
    layernorm_linear.py ln_out_needs_gather): two more all-gathers per layer, exactly the forward's
    two.  DTensor TP (torchtitan) saves the gathered input: none.  Without SP there is no gather."""
    from costmodel.comm import comm_times, group_time_s
    from costmodel.compute import compute_times
    from costmodel.schedule import exposed_layer_comm
    c, p = h200
    m = load_model("llama3-70b")
    t = layout(tp=8, pp=1, dp=1, mbs=1, sp=True, zero=1)
    act = 8192 * m.hidden * 2.0
    ag = group_time_s("all_gather", np.array([act]), np.ones(1), np.array([8]), c, p)[0]
    r = Recipe(gbs=1, seq_len=8192, stack="megatron")
    cm = comm_times(m, r, c, p, t)
    assert cm.tp_regather_s[0] == pytest.approx(2 * ag, rel=1e-12)
    assert cm.tp_layer_bwd_s[0] == pytest.approx(cm.tp_layer_fwd_s[0] + 2 * ag, rel=1e-12)
    tt = comm_times(m, Recipe(gbs=1, seq_len=8192, stack="torchtitan"), c, p, t)
    assert tt.tp_layer_bwd_s[0] == pytest.approx(tt.tp_layer_fwd_s[0], rel=1e-12)     # DTensor: no re-gather
    assert comm_times(m, r, c, p, layout(tp=8, pp=1, dp=1, mbs=1, sp=False, zero=1)).tp_regather_s[0] == 0.0
    # synchronous (overlap off) the gathers add to the exposed backward; async they hide under the
    # column-parallel input-gradient GEMMs, as long as their forward, and only the excess stays
    ct = compute_times(m, r, c, p, t)
    on = exposed_layer_comm(r, t, ct, cm)["tp_b"][0]
    off = exposed_layer_comm(r, layout(tp=8, pp=1, dp=1, mbs=1, sp=True, zero=1, overlap=False), ct, cm)["tp_b"][0]
    assert off == pytest.approx(cm.tp_layer_bwd_s[0], rel=1e-12)
    # the row-parallel gradient gathers exposed, each reduce-scatter and re-gather under its own GEMMs
    rs = cm.tp_rs_s[0]
    cols = (ct.attn_col_fwd_s[0], ct.dense_mlp_col_fwd_s[0])
    assert on == pytest.approx(2 * ag + sum(max(0.0, rs - g) + max(0.0, ag - g) for g in cols), rel=1e-12)


def test_op_level_sac_gathers_the_recomputed_inputs_again(h200):
    """torchtitan's op-level selective checkpointing saves the outputs of matmuls, attention and the
    reduce-scatters but not of the all-gathers (torchtitan/distributed/activation_checkpoint.py), so
    the recompute gathers QKV's and FC1's inputs again: the backward's exposed TP time grows by
    exactly those two gathers without async TP, and by less with it (pipelined with the recomputed
    matmuls); no recompute, none."""
    from costmodel.comm import comm_times
    from costmodel.compute import compute_times
    from costmodel.schedule import exposed_layer_comm
    c, p = h200
    m = load_model("llama3-8b")
    for ov in (False, True):
        r = Recipe(gbs=12, seq_len=8192, stack="torchtitan", tp_comm_overlap=ov)
        b = {}
        for rc in ("none", "selective"):
            t = layout(tp=8, pp=1, dp=1, mbs=12, sp=True, zero=3, recompute=rc)
            ct, cm = compute_times(m, r, c, p, t), comm_times(m, r, c, p, t)
            b[rc] = exposed_layer_comm(r, t, ct, cm)["tp_b"][0]
        assert cm.tp_regather_s[0] > 0
        if ov:
            assert 0 < b["selective"] - b["none"] < cm.tp_regather_s[0]
        else:
            assert b["selective"] - b["none"] == pytest.approx(cm.tp_regather_s[0], rel=1e-9)


def test_packed_documents_attend_to_themselves_only(h200):
    """A sequence of s tokens packing documents of D tokens: each query sees the mean keys of its own
    document (q D k(D) + r k(r)) / s; fused attention then costs what a batch of s / D sequences of D
    tokens costs (the variable-length kernel), while unfused attention still computes the whole
    masked s x s scores."""
    from costmodel.compute import compute_times
    c, p = h200
    m = load_model("llama3-8b")
    assert m.causal_keys_per_query(8192, 512) == 256.0 and m.causal_keys_per_query(8192, 8192) == 4096.0
    assert m.causal_keys_per_query(1000, 300) == pytest.approx((3 * 300 * 150 + 100 * 50) / 1000)
    packed = compute_times(m, Recipe(gbs=8, seq_len=8192, doc_tokens=1024), c, p, layout(mbs=1))
    short = compute_times(m, Recipe(gbs=64, seq_len=1024), c, p, layout(mbs=8))
    assert packed.layer_attn_fwd_s[0] == pytest.approx(short.layer_attn_fwd_s[0], rel=1e-12)
    assert packed.layer_attn_bwd_s[0] == pytest.approx(short.layer_attn_bwd_s[0], rel=1e-12)
    whole = compute_times(m, Recipe(gbs=8, seq_len=8192), c, p, layout(mbs=1))
    assert whole.layer_attn_fwd_s[0] > 4 * packed.layer_attn_fwd_s[0]
    unfused = [compute_times(m, Recipe(gbs=8, seq_len=8192, flash_attention=False, doc_tokens=d), c, p,
                             layout(mbs=1)).layer_attn_fwd_s[0] for d in (0, 1024)]
    assert unfused[0] == unfused[1]


def test_packed_documents_under_cp_split_over_the_ring_like_whole_sequences(h200):
    """Under CP, Transformer Engine's THD attention splits every packed document over the CP ranks as it
    splits a whole sequence (2 CP chunks), so a ring step sees D / CP keys of a document, not D: 8192
    tokens packing 1024-token documents at CP 4 cost what 8 sequences of 1024 tokens cost at CP 4; a
    document shorter than 2 CP tokens cannot be split and is refused."""
    from costmodel.compute import compute_times
    from costmodel.layouts import validity
    c, p = h200
    m = load_model("llama3-8b")
    packed = compute_times(m, Recipe(gbs=8, seq_len=8192, doc_tokens=1024), c, p, layout(mbs=1, cp=4))
    short = compute_times(m, Recipe(gbs=64, seq_len=1024), c, p, layout(mbs=8, cp=4))
    assert packed.layer_attn_fwd_s[0] == pytest.approx(short.layer_attn_fwd_s[0], rel=1e-12)
    assert packed.layer_attn_bwd_s[0] == pytest.approx(short.layer_attn_bwd_s[0], rel=1e-12)
    code, why = validity(layout(cp=4, dp=2), m, Recipe(gbs=8, seq_len=8192, doc_tokens=4), 8, 8)
    assert code[0] >= 0 and "--doc-tokens must be at least 2 x CP" in why[code[0]]
    code, _ = validity(layout(cp=4, dp=2), m, Recipe(gbs=8, seq_len=8192, doc_tokens=8), 8, 8)
    assert code[0] == -1


def test_packed_documents_count_their_own_attention_in_model_flops():
    """Model FLOPs of packed documents of D tokens count each document's D x D block (Megatron's
    convention) or its causal half: the attention term shrinks by s / D, the rest is unchanged; a
    document longer than the sequence is refused, and -0 or 512.0 read as whole tokens."""
    from costmodel.compute import model_flops_per_step
    from costmodel.errors import InputError
    m = load_model("llama3-8b")
    assert m.attended_keys(8192, False, 512) == 512.0 and m.attended_keys(8192, True, 512) == 256.0
    whole, packed = (model_flops_per_step(m, Recipe(gbs=4, seq_len=8192, doc_tokens=d)) for d in (0, 512))
    attn = 3 * 4 * 8192 * m.num_layers * 2.0 * (m.q_dim + m.attn_out_dim)      # per key per query
    assert whole - packed == pytest.approx(attn * (8192 - 512), rel=1e-12)
    with pytest.raises(InputError, match="--doc-tokens: must be a whole number of tokens from 0 .* to --seq-len 8192"):
        Recipe(gbs=4, seq_len=8192, doc_tokens=16384)
    assert Recipe(gbs=4, seq_len=8192, doc_tokens=-0.0).doc_tokens == 0
    assert repr(Recipe(gbs=4, seq_len=8192, doc_tokens=512.0).doc_tokens) == "512"


def test_attention_dropout_draws_cost_a_share_of_the_reference_kernel_time(h200):
    """In-kernel attention dropout (FlashAttention's Philox draws, again in the backward) adds per score
    element the measured FlashAttention-4 / cuDNN share on GB200 (fwd 1/0.80 - 1, bwd 1/0.65 - 1 of the
    no-dropout time, flash-attention PR #2597) at the reference kernel's efficiency, the B200 profile's
    FlashAttention-4 fit: the same seconds whichever kernel runs; unfused attention keeps its own
    softmax-dropout bytes."""
    import dataclasses
    from costmodel.compute import (DROPOUT_BWD_EXTRA, DROPOUT_FWD_EXTRA, DROPOUT_REF_EFFICIENCY, FLASH_BWD_FLOP_RATIO,
                                   compute_times)
    assert DROPOUT_REF_EFFICIENCY == load_profile("b200-sxm-180gb").attention_kernels["fa4"][0].eta_max
    c, p = h200
    plain = load_model("llama3-8b")
    drop = dataclasses.replace(plain, dropout=True)
    peak16 = c.gpu.peak_flops["bf16"]
    for kernel in ("fa2", "fa3"):
        r = Recipe(gbs=8, seq_len=4096, attention_kernel=kernel)
        a, b = (compute_times(m, r, c, p, layout(mbs=1, tp=2, sp=True)) for m in (plain, drop))
        # causal: each of the 4096 queries sees 2048 keys on average; TP 2 halves the heads
        unit = 2.0 * 4096 * 2048 * (plain.q_dim + plain.attn_out_dim) / 2
        unit /= peak16 * DROPOUT_REF_EFFICIENCY
        assert b.layer_attn_fwd_s[0] - a.layer_attn_fwd_s[0] == pytest.approx(DROPOUT_FWD_EXTRA * unit, rel=1e-9)
        assert b.layer_attn_bwd_s[0] - a.layer_attn_bwd_s[0] == pytest.approx(
            FLASH_BWD_FLOP_RATIO * DROPOUT_BWD_EXTRA * unit, rel=1e-9)
    assert (DROPOUT_FWD_EXTRA, round(DROPOUT_BWD_EXTRA, 4)) == (0.25, 0.5385)


def test_megatron_zero3_is_fsdp2_which_overlaps_its_own_gathers(h200):
    """Megatron-LM's ZeRO-3 runs PyTorch FSDP2 (--use-torch-fsdp2), which prefetches the next module's
    all-gather under the current one's compute whatever --overlap-grad-reduce says: Llama 3 70B at TP 4
    over 64 H100 had priced 10.6 s of exposed FSDP traffic in a 23 s step; the printed arguments carry
    FSDP2 and no --overlap-grad-reduce the run did not ask for."""
    from costmodel.launch import megatron_args
    from costmodel.stacks import get_stack, stack_recipe
    c, p = load_cluster("dgx-h100", nodes=8), load_profile("h100-sxm-80gb")
    m = load_model("llama3-70b")
    r = stack_recipe(get_stack("megatron"), 128, 8192, "bf16")
    assert not r.dp_overlap
    kw = dict(tp=4, pp=1, dp=16, sp=True, mbs=1, overlap=True, recompute="full")
    z3 = predict_one(m, c, p, r, **kw, zero=3)
    from costmodel.comm import comm_times
    cm = comm_times(m, r, c, p, layout(**kw, zero=3))
    assert z3.breakdown["dp_comm_s"][0] < 0.2 * cm.fsdp_mb_s[0] * (128 // 16)
    args = megatron_args(dict(kw, dp=16, cp=1, ep=1, vp=1, zero=3, recompute_num_layers=0), m, r)
    assert "--use-torch-fsdp2" in args and "--overlap-grad-reduce" not in args


def test_the_last_backward_hides_the_sends_and_the_dp_reduction_in_one_nic_window():
    """Llama 3 70B, TP1 PP2 DP16 VP40 on paper-h200 with the DP overlap: the stage sends and the DP
    gradient reduction both leave the node, through the same NICs, so what the last backward hides of
    both is at most that backward.  Each had been hidden in the whole window, so full recompute (whose
    longer backward hid both) came out 1.8 % faster than none; it is now the slower, as recomputation is."""
    from costmodel.predict import predict_run
    from costmodel.specs import load_cluster, load_model, load_profile
    from costmodel.stacks import get_stack, stack_recipe
    m, c = load_model("llama3-70b"), load_cluster("paper-h200")
    p = load_profile(c.gpu.key)
    r = stack_recipe(get_stack("megatron"), 128, 8192, "bf16", gpu=c.gpu, dp_overlap=True)
    lay = dict(tp=1, pp=2, dp=16, cp=1, ep=1, vp=40, mbs=4, zero=0, sp=False, overlap=True)
    none, full = (predict_run(m, r, c, p, dict(lay, recompute=rc)) for rc in ("none", "full"))
    assert full.uncapped_step_time_s > none.uncapped_step_time_s
    exposed = lambda run: run.breakdown["pp_comm_s"] + run.breakdown["dp_comm_s"]      # noqa: E731
    # the communication recompute uncovers less of is at most the compute it adds
    assert exposed(none) - exposed(full) <= full.breakdown["compute_s"] - none.breakdown["compute_s"]
