"""TP-communication overlap runs the GEMMs under it in chunks: their extra wave and launch time."""
import numpy as np
import pytest

from costmodel.compute import compute_times
from costmodel.gemm import gemm_time_s
from costmodel.specs import Recipe, load_model
from costmodel.specs.params import GemmParams
from costmodel.stacks import STACKS
from costmodel.tp_overlap import SYMM_MEM_RS_REDUCE_HBM_EFFICIENCY, chunked_extra, rs_partials_reduce_s, tp_chunk_extra_s

from conftest import layout

# H100-like: 989 TFLOP/s, 64 x 64 tiles on 132 SMs, no K-loop loss, 5 us a launch
P = GemmParams(eta_max=0.8, k_half=0.0, launch_s=5e-6, tile_m=64, tile_n=64, num_sms=132)


def one(m, n, k):
    return gemm_time_s(m, n, k, 1.0, 989e12, 3.35e12, 0.9, P)


def test_chunks_lose_to_the_partial_last_wave_and_pay_a_launch_each():
    """Llama-3-70B's QKV GEMM per TP8 rank (8192 tokens x 1280 outputs, K 8192): 128 x 20 = 2560
    tiles fill 20 waves of 132 SMs to 2560 / 2640; a ring-exchange chunk of 1024 tokens has 320
    tiles in 3 waves, 320 / 396 full.  Eight chunks take (2560 / 2640) / (320 / 396) = 1.2 x the
    FLOP time of the whole GEMM, plus 7 more launches."""
    flops_s = 2 * 8192 * 1280 * 8192 / (989e12 * 0.8)
    whole = flops_s / (2560 / 2640)
    chunks = flops_s / (320 / 396)
    assert one(8192, 1280, 8192) == pytest.approx(whole + 5e-6, rel=1e-12)
    assert chunked_extra(one, 8192, 1280, 8192, 8) == pytest.approx(chunks - whole + 7 * 5e-6, rel=1e-12)
    # a split that keeps every wave full costs only the launches
    assert chunked_extra(one, 132 * 64 * 4, 1280, 4096, 4) == pytest.approx(3 * 5e-6, rel=1e-9)
    assert chunked_extra(one, 8192, 1280, 8192, 1) == 0.0


def test_megatron_splits_row_parallel_forward_in_four_torchtitan_in_tp():
    """Transformer Engine pipelines the row-parallel forward reduce-scatter in num_splits = 4 chunks
    and ring-exchanges the rest in TP chunks; PyTorch's fused matmul + reduce-scatter uses TP chunks
    and its three Q, K, V matmuls are chunked each."""
    m = load_model("llama3-70b")
    tok, tp, h = 8192.0, np.array([8.0]), m.hidden
    f_mg, b_mg = tp_chunk_extra_s(m, STACKS["megatron"], tok, tp, one)
    want_f = (chunked_extra(one, tok, (m.q_dim + m.k_dim + m.v_dim) / 8, h, 8)
              + chunked_extra(one, tok, h, m.attn_out_dim / 8, 4)
              + chunked_extra(one, tok, 2 * m.ffn_hidden / 8, h, 8) + chunked_extra(one, tok, h, m.ffn_hidden / 8, 4))
    want_b = chunked_extra(one, tok, m.attn_out_dim / 8, h, 8) + chunked_extra(one, tok, m.ffn_hidden / 8, h, 8)
    assert f_mg[0] == pytest.approx(want_f, rel=1e-12) and b_mg[0] == pytest.approx(want_b, rel=1e-12)
    f_tt, _ = tp_chunk_extra_s(m, STACKS["torchtitan"], tok, tp, one)
    want_tt = (sum(chunked_extra(one, tok, n / 8, h, 8) for n in (m.q_dim, m.k_dim, m.v_dim))
               + chunked_extra(one, tok, h, m.attn_out_dim / 8, 8)
               + 2 * chunked_extra(one, tok, m.ffn_hidden / 8, h, 8) + chunked_extra(one, tok, h, m.ffn_hidden / 8, 8))
    assert f_tt[0] == pytest.approx(want_tt, rel=1e-12)
    assert f_mg[0] > 0 and f_tt[0] > 0


def test_compute_times_add_the_chunking_only_where_the_overlap_runs(h200):
    """The chunks' extra time lands in the layer's GEMM window and its forward and backward, with
    TP > 1, SP and the overlap on, and so do the SMs Transformer Engine's bulk and pipelined methods
    hold (16 of the H200's 132: the output projection's and FC2's forward, QKV's and FC1's input- and
    weight-gradient GEMMs run 132 / 116 as long); off, or without SP (no overlap then), the GEMMs
    stay whole; torchtitan's async TP reserves no SMs."""
    c, p = h200
    m = load_model("llama3-70b")
    on, off = (Recipe(gbs=1, seq_len=8192, stack="megatron", tp_comm_overlap=v) for v in (True, False))
    t = layout(tp=8, mbs=1, sp=True)
    a, b = compute_times(m, on, c, p, t), compute_times(m, off, c, p, t)
    g = p.gemm["bf16"]
    gpu = c.gpu
    f, bw = tp_chunk_extra_s(m, STACKS["megatron"], 8192.0, np.array([8.0]),
                             lambda mm, n, k: gemm_time_s(mm, n, k, 1.0, gpu.peak_flops["bf16"], gpu.hbm_bytes_per_s,
                                                          p.hbm_efficiency, g))
    assert c.gpu.num_sms == 132
    margin = 132.0 / 116.0 - 1.0
    sm_f, sm_b = margin * (b.attn_row_fwd_s[0] + b.dense_mlp_row_fwd_s[0]), margin * 2 * (b.attn_col_fwd_s[0]
                                                                                         + b.dense_mlp_col_fwd_s[0])
    assert a.layer_gemm_fwd_s[0] - b.layer_gemm_fwd_s[0] == pytest.approx(f[0] + sm_f, rel=1e-9)
    assert a.layer_fwd_s[0] - b.layer_fwd_s[0] == pytest.approx(f[0] + sm_f, rel=1e-9)
    assert a.layer_bwd_s[0] - b.layer_bwd_s[0] == pytest.approx(bw[0] + sm_b, rel=1e-9)
    tt_on, tt_off = (Recipe(gbs=1, seq_len=8192, stack="torchtitan", tp_comm_overlap=v) for v in (True, False))
    f_tt, _ = tp_chunk_extra_s(m, STACKS["torchtitan"], 8192.0, np.array([8.0]),
                               lambda mm, n, k: gemm_time_s(mm, n, k, 1.0, gpu.peak_flops["bf16"], gpu.hbm_bytes_per_s,
                                                            p.hbm_efficiency, g))
    assert (compute_times(m, tt_on, c, p, t).layer_gemm_fwd_s[0] - compute_times(m, tt_off, c, p, t).layer_gemm_fwd_s[0]
            == pytest.approx(f_tt[0], rel=1e-9))
    assert f[0] > 0.01 * b.layer_gemm_fwd_s[0]
    for same in (layout(tp=8, mbs=1, sp=False), layout(tp=1, mbs=1, sp=True), layout(tp=8, mbs=1, sp=True, overlap=False)):
        assert compute_times(m, on, c, p, same).layer_fwd_s[0] == compute_times(m, off, c, p, same).layer_fwd_s[0]


def test_torchtitan_async_tp_reduces_its_stacked_partials_after_the_pipeline(h200):
    """PyTorch's fused_matmul_reduce_scatter sums the TP stacked 16-bit partials after the pipeline
    at 23-43% of HBM peak (pytorch/pytorch PR 191803): Llama 3 70B at TP 8, 131,072 tokens, reads the
    whole 131,072 x 8,192 output of the output projection and of FC2 and writes an eighth of each,
    2 x 2 x 131,072 x 8,192 x 1.125 bytes at 0.33 x 4.8 TB/s on an H200, 3.1 ms a layer's forward;
    Transformer Engine reduces inside its collective (none); the forward's memory-bound time carries it."""
    c, p = h200
    m = load_model("llama3-70b")
    hbm, launch = c.gpu.hbm_bytes_per_s, p.gemm["bf16"].launch_s
    assert SYMM_MEM_RS_REDUCE_HBM_EFFICIENCY == pytest.approx(0.33)
    got = rs_partials_reduce_s(m, STACKS["torchtitan"], np.array([131072.0]), np.array([8.0]), hbm, 2.0, launch)
    moved = 2 * 2 * 131072 * 8192 * 1.125
    assert got[0] == pytest.approx(moved / (0.33 * hbm) + 2 * launch, rel=1e-9)
    assert got[0] == pytest.approx(3.06e-3, rel=0.01)
    assert rs_partials_reduce_s(m, STACKS["megatron"], np.array([131072.0]), np.array([8.0]), hbm, 2.0, launch)[0] == 0
    on, off = (Recipe(gbs=16, seq_len=8192, stack="torchtitan", tp_comm_overlap=v) for v in (True, False))
    t = layout(tp=8, mbs=16, sp=True)
    a, b = compute_times(m, on, c, p, t), compute_times(m, off, c, p, t)
    assert a.layer_ew_fwd_s[0] - b.layer_ew_fwd_s[0] == pytest.approx(got[0], rel=1e-9)
