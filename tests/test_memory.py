"""Memory against Korthikanti et al. 2022 and the ZeRO paper's bytes per parameter."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from costmodel.layouts import LayoutTable
from costmodel.memory import activation_bytes_per_layer, memory_bytes
from costmodel.specs import Recipe, load_model

from conftest import layout, predict_one

GPT3 = load_model("gpt3-175b")
UNFUSED = Recipe(gbs=64, seq_len=2048, precision="fp16", flash_attention=False)


@pytest.mark.parametrize("tp,mbs", [(1, 1), (8, 1), (8, 4), (4, 2)])
def test_korthikanti_activation_formula_with_sp(tp, mbs):
    s, h, a = 2048, GPT3.hidden, GPT3.num_heads
    t = layout(tp=tp, mbs=mbs, sp=tp > 1)
    ours = activation_bytes_per_layer(GPT3, UNFUSED, t)[0]
    # Korthikanti et al. 2022 eq. (2)/(4): s b h (34 + 5 a s / h) / t with TP + SP
    assert ours == pytest.approx(s * mbs * h * (34 + 5 * a * s / h) / tp, rel=1e-9)


def test_korthikanti_without_sp_keeps_10_sbh_replicated():
    s, h, a, tp = 2048, GPT3.hidden, GPT3.num_heads, 8
    ours = activation_bytes_per_layer(GPT3, UNFUSED, layout(tp=tp, sp=False))[0]
    assert ours == pytest.approx(s * h * (10 + 24 / tp + 5 * a * s / (h * tp)), rel=1e-9)


def test_selective_recompute_is_34_sbh_over_t():
    s, h, tp = 2048, GPT3.hidden, 8
    ours = activation_bytes_per_layer(GPT3, UNFUSED, layout(tp=tp, sp=True, recompute="selective"))[0]
    assert ours == pytest.approx(34 * s * h / tp, rel=1e-9)


def test_model_states_18_bytes_per_param_and_distributed_optimizer():
    m = load_model("llama3-8b")
    r = Recipe(gbs=64, seq_len=8192)
    z0 = memory_bytes(m, r, layout(dp=8, zero=0))
    z1 = memory_bytes(m, r, layout(dp=8, zero=1))
    z3 = memory_bytes(m, r, layout(dp=8, zero=3))
    N = m.params()
    assert (z0.weights_bytes + z0.grads_bytes + z0.optimizer_bytes)[0] == pytest.approx(18 * N, rel=1e-9)
    # Megatron distributed optimizer: 6 + 12/d bytes per parameter (docs, bf16 + fp32 grads)
    assert (z1.weights_bytes + z1.grads_bytes + z1.optimizer_bytes)[0] == pytest.approx((6 + 12 / 8) * N, rel=1e-9)
    states3 = (z3.weights_bytes + z3.grads_bytes + z3.optimizer_bytes)[0]
    assert states3 == pytest.approx(18 * N / 8 + 2 * 2 * m.layer_params(), rel=1e-6)


def test_llama3_70b_on_one_h200_does_not_fit_but_tp8_pp2_does():
    m = load_model("llama3-70b")
    r = Recipe(gbs=128, seq_len=8192)
    one = memory_bytes(m, r, layout(dp=16, zero=1))
    assert one.peak_bytes[0] > 141e9
    split = memory_bytes(m, r, layout(tp=8, pp=2, dp=1, sp=True, recompute="full"))
    assert split.peak_bytes[0] < 141e9


def test_interleaving_adds_1_plus_p_minus_1_over_pv():
    m = GPT3
    r = Recipe(gbs=512, seq_len=2048, precision="fp16", flash_attention=False)
    p, v = 8, 4
    base = memory_bytes(m, r, layout(tp=8, pp=p, dp=1, sp=True, vp=1))
    inter = memory_bytes(m, r, layout(tp=8, pp=p, dp=1, sp=True, vp=v))
    act_layer = activation_bytes_per_layer(m, r, layout(tp=8, sp=True))[0]
    L = m.num_layers
    # first stage: p micro-batches x L/p layers = L layers; interleaved: L (1 + (p-1)/(p v))
    # (Korthikanti et al. 2022 section 4.2.3), both plus nothing else on the first stage
    assert base.activations_bytes[0] == pytest.approx(L * act_layer, rel=1e-9)
    assert inter.activations_bytes[0] == pytest.approx(L * (1 + (p - 1) / (p * v)) * act_layer, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), mbs=st.sampled_from([1, 2, 4]), pp=st.sampled_from([1, 2, 4, 8]))
def test_recompute_never_increases_activation_memory(tp, mbs, pp):
    m = load_model("llama3-70b")
    r = Recipe(gbs=256, seq_len=4096, flash_attention=False)
    acts = [memory_bytes(m, r, layout(tp=tp, mbs=mbs, pp=pp, sp=tp > 1, recompute=rc)).activations_bytes[0]
            for rc in ("none", "selective", "full")]
    assert acts[0] >= acts[1] >= acts[2] > 0


@settings(max_examples=30, deadline=None)
@given(mbs=st.sampled_from([1, 2, 4]), zero=st.sampled_from([0, 1]))
def test_more_tp_never_needs_more_memory(mbs, zero):
    m = load_model("llama3-70b")
    r = Recipe(gbs=256, seq_len=4096)
    peaks = [memory_bytes(m, r, layout(tp=tp, mbs=mbs, sp=tp > 1, zero=zero, dp=2)).peak_bytes[0]
             for tp in (1, 2, 4, 8)]
    assert np.all(np.diff(peaks) < 0)


def test_optimizer_states_set_optimizer_memory_and_step(h200):
    """LionW keeps one fp32 state (Chen et al. 2023), Adam two: optimizer bytes 8 vs 12 per parameter
    (with the fp32 master weight), and the optimizer step moves 26 vs 34 bytes per local parameter."""
    import pytest as _pytest
    from costmodel.errors import InputError
    from costmodel.memory import optimizer_bytes_per_param
    from costmodel.optimizer_step import optimizer_step_bytes_per_param
    c, p = h200
    m = load_model("llama3-8b")
    adam, lion = Recipe(gbs=64, seq_len=4096), Recipe(gbs=64, seq_len=4096, optimizer="lionw")
    assert optimizer_bytes_per_param(adam) == 12.0 and optimizer_bytes_per_param(lion) == 8.0
    assert optimizer_step_bytes_per_param(adam) == 34.0 and optimizer_step_bytes_per_param(lion) == 26.0
    assert optimizer_bytes_per_param(Recipe(gbs=64, seq_len=4096, optimizer="adafactor")) == 4.0
    a = predict_one(m, c, p, adam, tp=1, pp=1, dp=32, zero=1)
    b = predict_one(m, c, p, lion, tp=1, pp=1, dp=32, zero=1)
    assert b.memory.optimizer_bytes[0] == _pytest.approx(a.memory.optimizer_bytes[0] * 8 / 12, rel=1e-12)
    assert b.memory.weights_bytes[0] == a.memory.weights_bytes[0]
    assert b.breakdown["optimizer_s"][0] == _pytest.approx(a.breakdown["optimizer_s"][0] * 26 / 34, rel=1e-12)
    with _pytest.raises(InputError, match="--optimizer"):
        Recipe(gbs=64, seq_len=4096, optimizer="lamb")


def test_capacity_is_the_cuda_visible_total_of_the_captures():
    from costmodel.specs import load_gpu
    # nvidia-smi -q 'FB Memory Usage' Free at idle = Total - Reserved: 81559 - 454 = 81106 MiB, which
    # CUDA's deviceQuery reports as 85,045,477,376 bytes on the same H100 node (thamada/nvidia-smi)
    assert load_gpu("h100-sxm-80gb").capacity_bytes == 81106 * 2**20
    assert abs(load_gpu("h100-sxm-80gb").capacity_bytes - 85_045_477_376) < 2**20
    assert load_gpu("h200-sxm-141gb").capacity_bytes == 143072 * 2**20     # Free at idle, Total 143771
    assert load_gpu("h100-sxm-80gb").hbm_bytes == 80e9            # the datasheet value stays


def test_reserve_is_cuda_context_plus_nccl_buffers_per_communicator():
    from costmodel.memory import CUDA_CONTEXT_BYTES, NCCL_COMM_BYTES, reserved_bytes
    # NCCL src/init.cc: Simple 4 MiB + LL128 4,915,200 B + LL 524,288 B per channel, 32 channels
    assert NCCL_COMM_BYTES == 32 * (4_194_304 + 4_915_200 + 524_288)
    assert reserved_bytes(layout(tp=1, dp=1))[0] == CUDA_CONTEXT_BYTES
    # TP, PP and DP groups: three communicators
    assert reserved_bytes(layout(tp=8, pp=2, dp=4))[0] == CUDA_CONTEXT_BYTES + 3 * NCCL_COMM_BYTES
    m = load_model("llama3-8b")
    mem = memory_bytes(m, Recipe(gbs=64, seq_len=8192), layout(tp=8, pp=2, dp=4))
    parts = (mem.weights_bytes + mem.grads_bytes + mem.optimizer_bytes + mem.activations_bytes
             + mem.reserved_bytes)
    assert mem.peak_bytes[0] == pytest.approx(parts[0], rel=1e-12)


def test_recomputing_some_layers_never_needs_more_memory_than_none():
    """Full recompute of 1 of Llama 2 7B's 32 layers on one rank (PP 1, one micro-batch in flight): the
    backward walks the 31 kept layers first and frees them before the one recomputed layer re-runs, so
    the re-run adds nothing and one layer's activations less its input are saved.  The re-run layer's
    working set had been added on top, 32 MiB above no recompute at all; all 32 layers recomputed keep
    the inputs of 31 and the one re-run layer (its input is its checkpoint)."""
    m = load_model("llama2-7b")
    r = Recipe(gbs=64, seq_len=4096)
    rows = [layout(tp=1, pp=1, dp=8, recompute="none")] + [layout(tp=1, pp=1, dp=8, recompute="full")] * 0
    none = memory_bytes(m, r, rows[0]).activations_bytes[0]
    t = lambda n: LayoutTable.from_rows([dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, recompute="full",   # noqa: E731
                                              recompute_num_layers=n, zero=1, sp=False, overlap=True)])
    act = activation_bytes_per_layer(m, r, rows[0])[0]
    layer_input = 4096 * m.hidden * 2
    acts = [memory_bytes(m, r, t(n)).activations_bytes[0] for n in range(1, 33)]
    assert acts[0] == pytest.approx(none - (act - layer_input), rel=1e-12)
    # recomputing the last layer too saves nothing: the backward re-runs it first, beside all the inputs
    assert np.all(np.diff(acts)[:-1] < 0) and acts[-1] == pytest.approx(acts[-2], rel=1e-12)
    assert acts[-1] == pytest.approx(acts[0] - 30 * (act - layer_input), rel=1e-12)


def test_block_recompute_of_n_layers_sits_between_none_and_full():
    """Megatron --recompute-method block --recompute-num-layers N recomputes N layers of each chunk:
    memory and step time move linearly from no recompute (N = 0 layers) to full (N = all), and
    --recompute auto picks the smallest N that fits (Llama 3 70B, TP8 PP4 on 80 GB H100s)."""
    from costmodel.predict import least_recompute, predict_table
    from costmodel.specs import load_cluster, load_profile
    from costmodel.layouts import LayoutTable
    m = load_model("llama3-70b")
    c, p = load_cluster("dgx-h100", 8), load_profile("h100-sxm-80gb")
    r = Recipe(gbs=512, seq_len=8192)
    base = dict(tp=8, pp=4, dp=2, cp=1, ep=1, vp=1, mbs=4, zero=1, sp=True, overlap=True)
    rows = [dict(base, recompute="none", recompute_num_layers=0)] + \
        [dict(base, recompute="full", recompute_num_layers=n) for n in (5, 10, 20, 0)]
    pred = predict_table(m, r, c, p, LayoutTable.from_rows(rows))
    acts, step = pred.memory.activations_bytes, pred.step_time_s
    assert acts[3] == pytest.approx(acts[4], rel=1e-12) and step[3] == pytest.approx(step[4], rel=1e-12)  # 20 = all
    assert acts[0] > acts[1] > acts[2] > acts[3] and step[0] < step[1] < step[2] < step[3]
    # linear in N from none (5 and 10 of 20 layers) while a layer stays kept, whose backward frees
    # more than the re-run takes; all 20 add the re-run layer's working set
    assert (acts[0] - acts[1]) == pytest.approx((acts[0] - acts[2]) / 2, rel=1e-9)
    act = activation_bytes_per_layer(m, r, LayoutTable.from_rows([dict(base, recompute="none")]))[0]
    per_layer_saved = (acts[0] - acts[1]) / 5
    layer_input = 4 * 8192 * m.hidden * 2 / 8                   # mbs x seq x hidden x 2 bytes / TP (SP)
    assert acts[3] == pytest.approx(acts[0] - 20 * per_layer_saved + act - layer_input, rel=1e-9)
    # the least N that fits: 8 of 20 layers
    fulls = predict_table(m, r, c, p, LayoutTable.from_rows([dict(base, recompute="full", recompute_num_layers=k)
                                                               for k in range(1, 21)]))
    n = 1 + int(np.argmax(fulls.feasible))
    assert n == 8 and not fulls.feasible[n - 2]
    # --recompute auto takes the fastest step that fits, of full(N) and the selective module sets: here
    # full recompute of 8 layers, a shade faster than Megatron's --recompute-modules mlp (the dense MLP
    # re-run, its SwiGLU activations dropped), which fits too
    rc, k, rm = least_recompute(m, r, c, p, dict(base, recompute="none"))
    assert (rc, k) == ("full", 8)
    mine = predict_table(m, rm, c, p, LayoutTable.from_rows([dict(base, recompute=rc, recompute_num_layers=k)]))
    assert mine.feasible[0] and mine.step_time_s[0] == pytest.approx(fulls.step_time_s[n - 1], rel=1e-12)
    from dataclasses import replace
    mlp = predict_table(m, replace(r, recompute_modules="mlp"), c, p,
                        LayoutTable.from_rows([dict(base, recompute="selective")]))
    assert mlp.feasible[0] and mine.step_time_s[0] < mlp.step_time_s[0] < 1.02 * mine.step_time_s[0]


def test_torchtitan_op_sac_keeps_what_its_policy_saves():
    """torchtitan's op-level SAC keeps the block input, every second matmul output and the attention
    output: for Llama 3 8B, 2h + (2q + kv) + ffn bf16 values per token plus the log-sum-exp,
    under half of what no recomputation stores; Megatron's selective with flash keeps everything."""
    m = load_model("llama3-8b")
    row = dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, zero=3, sp=False, overlap=True)
    from costmodel.layouts import LayoutTable
    per_tok = lambda st, rc: activation_bytes_per_layer(m, Recipe(gbs=8, seq_len=8192, stack=st),  # noqa: E731
                                                        LayoutTable.from_rows([dict(row, recompute=rc)]))[0] / 8192
    h, q, kv, ffn = m.hidden, m.q_dim, m.kv_dim, m.ffn_hidden
    lse = m.num_heads * 4.0
    assert per_tok("torchtitan", "selective") == pytest.approx(2 * (2 * h + 2 * q + kv + ffn) + lse, rel=1e-12)
    assert per_tok("megatron", "selective") == per_tok("megatron", "none") == per_tok("torchtitan", "none")
    assert per_tok("torchtitan", "selective") < 0.5 * per_tok("torchtitan", "none")


def test_the_heaviest_pipeline_stage_holds_the_moe_layers():
    """Qwen1.5-MoE with layers 12-23 dense (mlp_only_layers) at PP 2: one stage holds the 12 MoE
    layers, and the weights are checked there, not at the mean layer."""
    import json
    from costmodel.stage_params import stage_params
    from costmodel.specs import load_model as lm
    from conftest import layout as lay
    d = json.loads(open("tests/data/models/qwen1.5-moe-a2.7b.json").read())
    d["mlp_only_layers"] = list(range(12, 24))
    import tempfile, os
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "config.json")
        open(path, "w").write(json.dumps(d))
        m = lm(path)
    dense, exp = stage_params(m, lay(tp=1, pp=2, dp=4, ep=1))
    assert exp[0] == 12 * m.expert_params()
    assert dense[0] == 12 * (m.moe_layer_params() - m.expert_params()) + m.vocab * m.hidden + m.hidden



def test_the_mtp_module_sits_on_the_lighter_last_stage():
    """DeepSeek-V3's 61 layers over PP 16 split 4 x 13 | 3 x 3 with the lighter stages last: the
    last stage's 3 MoE layers, output layer and MTP module (one more MoE layer's experts) hold fewer
    experts than a middle stage's 4, so the busiest GPU holds 4 layers' experts, MTP or not; with one
    stage the MTP module's experts add to it.  The arguments build the module where it was priced."""
    from dataclasses import replace
    from costmodel.stage_params import stage_params
    from costmodel.launch import megatron_args
    from costmodel.specs import Recipe
    from conftest import layout as lay
    m = load_model("deepseek-v3")
    t = lay(tp=4, pp=16, dp=16, ep=16, etp=1)
    exp = stage_params(m, t, light_last=True)[1][0]
    assert exp == 4 * m.expert_params() / 16 == stage_params(replace(m, mtp_layers=0), t, light_last=True)[1][0]
    one = lay(tp=8, pp=1, dp=32, ep=64, etp=1)
    gap = stage_params(m, one)[1][0] - stage_params(replace(m, mtp_layers=0), one)[1][0]
    assert gap == m.expert_params() / 64
    args = megatron_args(t.row(0), m, Recipe(gbs=1024, seq_len=4096))
    assert "--mtp-num-layers 1" in args and '|tttmL"' in args


L8B = load_model("llama3-8b")


def test_recompute_modules_drop_what_megatron_does_not_keep():
    """Llama 3 8B, 8192 tokens, TP 2 with SP: selective recompute of the dense MLP ('mlp') keeps
    only its input, dropping FC1's gate and up outputs and FC2's input: 3 x 14336 / 2 x 2 bytes per
    token; MLA up-projections drop the up-projected Q, K, V of DeepSeek-V3 (192 + 192 + 128 dims per
    head of 128 heads / TP)."""
    s, tp = 8192, 2
    t = layout(tp=tp, sp=True, recompute="selective")
    base = activation_bytes_per_layer(L8B, Recipe(gbs=64, seq_len=s), t)[0]
    mlp = activation_bytes_per_layer(L8B, Recipe(gbs=64, seq_len=s, recompute_modules="core_attn,mlp"), t)[0]
    assert base - mlp == pytest.approx(s * 3 * 14336 / tp * 2, rel=1e-12)
    none = activation_bytes_per_layer(L8B, Recipe(gbs=64, seq_len=s, recompute_modules="mlp"), layout(tp=tp, sp=True))[0]
    # the modules act under selective recompute only (and under flash attention core_attn frees nothing)
    assert none == base > mlp
    ds = load_model("deepseek-v3")
    r0, r1 = Recipe(gbs=64, seq_len=4096), Recipe(gbs=64, seq_len=4096, recompute_modules="core_attn,mla_up_proj")
    d = activation_bytes_per_layer(ds, r0, t)[0] - activation_bytes_per_layer(ds, r1, t)[0]
    assert d == pytest.approx(4096 * 128 * (192 + 192 + 128) / tp * 2, rel=1e-12)
    with pytest.raises(Exception, match="'mlpp' is not one of"):
        Recipe(gbs=64, seq_len=s, recompute_modules="core_attn,mlpp")


def test_te_fp8_keeps_gemm_inputs_in_one_byte():
    """Megatron fp8 (Transformer Engine): the QKV, FC1 and FC2 inputs are saved as fp8 (one byte less
    per element each), the attention output gains a one-byte copy for the output projection; a
    torchtitan fp8 run keeps its 16-bit tensors."""
    s, tp, h = 8192, 2, 4096
    t = layout(tp=tp, sp=True)
    bf = activation_bytes_per_layer(L8B, Recipe(gbs=64, seq_len=s), t)[0]
    f8 = activation_bytes_per_layer(L8B, Recipe(gbs=64, seq_len=s, precision="fp8"), t)[0]
    assert bf - f8 == pytest.approx(s * (h / tp + h / tp + 14336 / tp) - s * h / tp, rel=1e-12)
    titan = dict(gbs=64, seq_len=s, stack="torchtitan")
    assert activation_bytes_per_layer(L8B, Recipe(**titan, precision="fp8", fp8_recipe="tensorwise"), t)[0] == \
        activation_bytes_per_layer(L8B, Recipe(**titan), t)[0]


def test_precision_aware_optimizer_bytes():
    """Megatron's precision-aware optimizer: bf16 main grads (2 bytes) and Adam's two bf16 moments
    beside the 16-bit remainder of the fp32 master (6 bytes) instead of 4 + 12."""
    r = Recipe(gbs=64, seq_len=8192, main_grads_dtype="bf16", optimizer_states_dtype="bf16")
    t = layout(dp=8, zero=0)
    base = memory_bytes(L8B, Recipe(gbs=64, seq_len=8192), t)
    low = memory_bytes(L8B, r, t)
    assert low.grads_bytes[0] == pytest.approx(base.grads_bytes[0] / 2, rel=1e-12)
    assert low.optimizer_bytes[0] == pytest.approx(base.optimizer_bytes[0] * 6 / 12, rel=1e-12)


def test_modules_without_core_attn_keep_the_attention_scores():
    """Unfused attention: '--recompute-modules mlp' alone keeps the s x s scores (Megatron checkpoints
    only what the list names), so it stores more than 'core_attn,mlp' by Korthikanti's 5 a s / h term."""
    s, h, a, tp = 2048, GPT3.hidden, GPT3.num_heads, 8
    t = layout(tp=tp, sp=True, recompute="selective")
    mk = lambda mods: Recipe(gbs=64, seq_len=s, precision="fp16", flash_attention=False, recompute_modules=mods)
    only = activation_bytes_per_layer(GPT3, mk("mlp"), t)[0]
    both = activation_bytes_per_layer(GPT3, mk("core_attn,mlp"), t)[0]
    assert only - both == pytest.approx(s * h * 5 * a * s / (h * tp), rel=1e-9)


def test_activations_are_those_of_the_stage_with_the_most_moe_layers():
    """DeepSeek-V3 (3 dense + 58 MoE layers): at PP 1 the stage's MoE share is 58/61; at PP 8 (8 layers
    per stage) the heaviest stage is all MoE, as its model states are (costmodel.stage_params.stage_params)."""
    from costmodel.memory import stage_moe_fraction
    ds = load_model("deepseek-v3")
    assert stage_moe_fraction(ds, layout(pp=1))[0] == pytest.approx(58 / 61, rel=1e-12)
    assert stage_moe_fraction(ds, layout(pp=8))[0] == 1.0
    assert stage_moe_fraction(L8B, layout(pp=2))[0] == 0.0


def test_deepep_buffers_follow_deepeps_size_hints():
    """DeepEP's NVLink and RDMA buffers per GPU (csrc/legacy/config.hpp size hints) at Megatron's 20 SMs,
    worked by hand for a 7168-wide model: EP 8, 10 channels x 8 NVLink peers x ((2 + 3) x 4 B of
    counters + 256 receive slots x (14336 B hidden + 8 B metadata + 128 x (8 + 4 + 4) B top-k ids,
    weights and scales)); EP 16 adds a second RDMA rank and the RDMA buffer (140 slots, send and
    receive, each 16 B longer)."""
    from costmodel.moe import deepep_buffer_bytes
    slot = 14336 + 8 + 128 * 16
    ep8 = 10 * 8 * ((2 + 3) * 4 + 256 * slot)
    ep16 = 10 * 8 * ((4 + 3) * 4 + 288 * slot) + 10 * 2 * (18 * 2 * 4 + 140 * (slot + 16) * 2)
    got = deepep_buffer_bytes(7168, np.array([1, 8, 16]))
    assert got.tolist() == [0.0, float(ep8), float(ep16)]


def test_flex_dispatcher_reserves_deepep_buffers_beside_nccls():
    """The same MoE layout with the flex (DeepEP) dispatcher reserves DeepEP's buffers for its EP x ETP
    group on top of what the all-to-all dispatcher's layout reserves; a dense model reserves none."""
    from costmodel.memory import reserved_bytes
    from costmodel.moe import deepep_buffer_bytes
    m = load_model("qwen3-30b-a3b")
    t = layout(tp=2, dp=8, ep=8, etp=1, sp=True)
    a2a = reserved_bytes(t, m, Recipe(gbs=64, seq_len=4096, moe_dispatcher="alltoall"))
    flex = reserved_bytes(t, m, Recipe(gbs=64, seq_len=4096, moe_dispatcher="flex"))
    assert flex[0] - a2a[0] == pytest.approx(float(deepep_buffer_bytes(m.hidden, 8))) and flex[0] - a2a[0] > 1e8
    dense = load_model("llama3-8b")
    assert reserved_bytes(t, dense, Recipe(gbs=64, seq_len=4096, moe_dispatcher="flex"))[0] == reserved_bytes(t)[0]


def test_moe_dispatch_holds_its_buffer_beside_the_saved_activations():
    """While an MoE layer runs, the allgather dispatcher holds every token of its EP x ETP group
    (Mixtral 8x7B, TP 2 with SP, EP 8: 4096 / 2 tokens x 8 ranks x 4096 x 2 B = 128 MiB); the all-to-all
    dispatcher holds its received rows (2048 x top-2 at the busiest rank's load); the peak carries the
    difference, and a dense model holds none."""
    from costmodel.memory import dispatch_transient_bytes, memory_bytes
    from costmodel.moe import run_rank_load
    m = load_model("mixtral-8x7b")
    t = layout(tp=2, dp=8, ep=8, etp=1, sp=True)
    ag, a2a = (Recipe(gbs=64, seq_len=4096, moe_dispatcher=d) for d in ("allgather", "alltoall"))
    assert dispatch_transient_bytes(m, ag, t)[0] == 2048 * 8 * 4096 * 2 == 128 * 2**20
    load = float(run_rank_load(m, a2a, np.array([4096.0]), np.array([2.0]), t.etp, t.ep)[0])
    assert 1.0 < load < 1.2
    assert dispatch_transient_bytes(m, a2a, t)[0] == pytest.approx(2048 * 2 * load * 4096 * 2, rel=1e-12)
    diff = memory_bytes(m, ag, t).peak_bytes[0] - memory_bytes(m, a2a, t).peak_bytes[0]
    assert diff == pytest.approx(2048 * 4096 * 2 * (8 - 2 * load), rel=1e-9)
    assert dispatch_transient_bytes(load_model("llama3-8b"), ag, t)[0] == 0.0


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_deepspeed_zero_offload_keeps_the_reduce_bucket_not_the_gradients(zero):
    """DeepSpeed's offload_optimizer copies each reduced bucket to pinned host memory: the GPU holds
    its 5e8-element bf16 reduce bucket (1e9 bytes) and, under ZeRO-1/2, a staging copy of the largest
    parameter (Llama 3 8B's 128,256 x 4,096 embedding); Megatron's offload keeps its gradient buffer."""
    m = load_model("llama3-8b")
    t = layout(dp=8, zero=zero)
    ds = memory_bytes(m, Recipe(gbs=64, seq_len=8192, stack="deepspeed", optimizer="adamw", optimizer_offload=True), t)
    staging = 0 if zero == 3 else 2 * 128256 * 4096
    assert ds.grads_bytes[0] == pytest.approx(2 * 5e8 + staging)
    assert ds.optimizer_bytes[0] == 0
    if zero < 3:
        mg = memory_bytes(m, Recipe(gbs=64, seq_len=8192, optimizer_offload=True), t)
        full = m.params() / (8 if zero == 2 else 1)
        assert mg.grads_bytes[0] == pytest.approx(4 * full, rel=0.02)


@pytest.mark.parametrize("zero", [0, 1, 2])
def test_deepspeed_keeps_bf16_gradients_and_gives_the_master_an_fp32_gradient(zero):
    """DeepSpeed's grad_accum_dtype defaults to the model's dtype (engine.py get_data_types): bf16 gradients,
    2 bytes per parameter (sharded at ZeRO-2), and its step converts its share into the fp32 master's
    gradient (stage_1_and_2.py: flat_grad_partition.to(fp32)): 12 + 4 bytes per parameter over DP at
    ZeRO >= 1.  Priced as Megatron's fp32 main grads, Mistral 7B at ZeRO-1 on 16 A100 40GB had not fit."""
    m = load_model("llama3-8b")
    t = layout(dp=8, zero=zero)
    ds = memory_bytes(m, Recipe(gbs=64, seq_len=8192, stack="deepspeed", optimizer="adamw"), t)
    n = m.params()
    assert ds.grads_bytes[0] == pytest.approx(2 * n / (8 if zero == 2 else 1), rel=1e-6)
    assert ds.optimizer_bytes[0] == pytest.approx(16 * n / (8 if zero else 1), rel=1e-6)
    from costmodel.stage_params import grad_bytes
    assert grad_bytes(Recipe(gbs=64, seq_len=8192, stack="deepspeed", optimizer="adamw")) == 2.0
    assert grad_bytes(Recipe(gbs=64, seq_len=8192)) == 4.0


def test_a_runs_own_split_peaks_on_its_fullest_rank_states_and_activations_together():
    """Llama 3 70B at TP 2, PP 8 (64 micro-batches), layers 10, 11 x 6, 4 (the energy ILP's split): rank 0
    holds 10 layers, the embedding and 8 micro-batches in flight, rank 1 11 layers and 7; the peak is
    the larger of the ranks' own totals, here rank 0's, which the even split of 10 a stage has too.
    Adding the 11-layer rank's states to rank 0's activations had reported 4.7 GiB more."""
    from costmodel.pipeline_layout import with_pipeline_layout
    m = load_model("llama3-70b")
    r = Recipe(gbs=128, seq_len=8192)
    t = layout(tp=2, pp=8, dp=2, mbs=1, zero=1, sp=True)
    own, _ = with_pipeline_layout(m, "E" + "t" * 10 + "|" + "|".join(["t" * 11] * 6) + "|ttttL", 8, 1)
    even = memory_bytes(m, r, t)
    got = memory_bytes(own, r, t)
    assert got.peak_bytes[0] == pytest.approx(even.peak_bytes[0], rel=1e-6)      # but the final norm
    # rank 1 (11 layers, 7 in flight) reports its own states: one layer more than rank 0's, no embedding
    assert got.peak_bytes[0] < 139.7 * 2 ** 30 < (even.peak_bytes[0] + 4.7 * 2 ** 30)


def _row(**kw):
    row = dict(tp=1, pp=1, dp=1, cp=1, ep=1, etp=None, vp=1, mbs=1, recompute="none", zero=1, sp=False, overlap=True)
    row.update(kw)
    row["etp"] = row["etp"] or row["tp"]
    return row


def test_the_ilps_stage_terms_hold_the_embedding_states_on_the_first_stage():
    """Llama 3 70B at TP 8, PP 4, DP 2, ZeRO-1: the first stage's fixed bytes exceed a middle stage's by
    the vocab-parallel embedding's states, 128256 x 8192 / 8 parameters at 2 + 4 + 12 / 2 bytes each
    (bf16 weight, fp32 main gradient, Adam's 12 bytes sharded over DP 2); a layer adds its states and its
    activations once more per micro-batch in flight, so stage s's per-layer bytes fall by one layer's
    stored activations from one stage to the next."""
    from costmodel.memory import stage_memory_terms
    m = load_model("llama3-70b")
    r = Recipe(gbs=1024, seq_len=4096)
    lay = _row(tp=8, pp=4, dp=2, recompute="selective", sp=True)
    fixed, per_layer = stage_memory_terms(m, r, lay)
    assert fixed[0] - fixed[1] == pytest.approx(128256 * 8192 / 8 * 12, rel=1e-9)
    stored = activation_bytes_per_layer(m, r, LayoutTable.from_rows([lay]))[0]
    assert np.diff(per_layer) == pytest.approx([-stored] * 3, rel=1e-9)


@pytest.mark.parametrize("name,lay", [
    ("mixtral-8x7b", dict(tp=2, pp=4, dp=4, ep=4, etp=1, sp=True)),
    ("deepseek-v3", dict(tp=1, pp=16, dp=32, ep=32, etp=1, recompute="selective")),
    ("llama3-70b", dict(tp=4, pp=8, dp=2, mbs=2, recompute="full", zero=3, sp=True)),
])
def test_the_ilps_stage_terms_are_predicts_memory_at_the_split_the_ilp_picks(name, lay):
    """The energy ILP's memory constraint (fixed + n_s x per_layer, costmodel.memory.stage_memory_terms)
    and ``predict``'s peak (memory_bytes of the run's own split) are one computation: the fullest stage's
    terms give predict's peak, DeepSeek-V3's MTP module on its last stage, its MoE layers (each stage
    holding as many as its layers allow, an upper bound for the dense first three) and the dispatchers'
    transient buffers included."""
    from costmodel.memory import stage_memory_terms
    from costmodel.pipeline_layout import layout_text, with_pipeline_layout
    m = load_model(name)
    lay = _row(**lay)
    r = Recipe(gbs=1024, seq_len=4096)
    fixed, per_layer = stage_memory_terms(m, r, lay)
    pp = lay["pp"]
    n = [m.num_layers // pp + (1 if s < m.num_layers % pp else 0) for s in range(pp)]
    own, _ = with_pipeline_layout(m, layout_text(np.asarray(n), pp, 1, m.mtp_layers), pp, 1)
    got = memory_bytes(own, r, LayoutTable.from_rows([lay])).peak_bytes[0]
    assert got == pytest.approx(max(fixed + np.asarray(n) * per_layer), rel=1e-9)


def test_unfused_attention_scores_stay_with_the_layers_full_recompute_keeps():
    """Llama 3 8B at TP 8 and 32k tokens with unfused attention: recomputing 1 of 32 layers (Megatron
    --recompute-num-layers 1) leaves 31 holding their s x s scores (2 a s^2 b / t bytes each, 8 GiB),
    so the stored activations are within one layer's of no recompute (they had dropped to flash
    attention's 20 GiB); under full recompute of every layer the re-run layer's scores are its working
    set, one layer's score_bytes above flash attention's peak."""
    from costmodel.memory import score_bytes
    m = load_model("llama3-8b")
    r = Recipe(gbs=8, seq_len=32768, flash_attention=False)
    none = memory_bytes(m, r, layout(tp=8, sp=True))
    part = memory_bytes(m, r, layout(tp=8, sp=True, recompute="full", recompute_num_layers=1))
    t = layout(tp=8, sp=True, recompute="full")
    s2 = score_bytes(m, r, t)[0]
    assert s2 == 2 * (32 / 8) * 32768 ** 2                                  # 2 a s^2 b / t, no dropout
    assert none.activations_bytes[0] - part.activations_bytes[0] < 1.01 * (none.activations_bytes[0] / 32)
    assert part.activations_bytes[0] > 250 * 2 ** 30
    full = memory_bytes(m, r, t)
    flash = memory_bytes(m, Recipe(gbs=8, seq_len=32768), t)
    assert full.peak_bytes[0] - flash.peak_bytes[0] == pytest.approx(s2, rel=0.01)


def test_bf16_edge_layers_are_priced_as_bf16_layers_in_time_traffic_and_memory():
    """Megatron --first-last-layers-bf16 with every layer of Llama 3 8B kept in BF16 (16 first, 16 last)
    prices as the BF16 recipe: the same step at full clocks, TP traffic (16-bit SP gathers, not fp8) and
    stored activations (no fp8 copies), where only the GEMM time had been switched."""
    from costmodel.predict import predict_table
    from costmodel.specs import load_cluster, load_profile
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    p = load_profile(c.gpu.key)
    t = layout(tp=2, dp=4, sp=True)
    bf16 = predict_table(m, Recipe(gbs=64, seq_len=4096), c, p, t)
    edge = predict_table(m, Recipe(gbs=64, seq_len=4096, precision="fp8", fp8_recipe="tensorwise",
                                   bf16_edge_layers=16), c, p, t)
    fp8 = predict_table(m, Recipe(gbs=64, seq_len=4096, precision="fp8", fp8_recipe="tensorwise"), c, p, t)
    assert edge.step_time_s[0] == pytest.approx(bf16.step_time_s[0], rel=1e-9)
    assert edge.breakdown["tp_comm_s"][0] == pytest.approx(bf16.breakdown["tp_comm_s"][0], rel=1e-9)
    assert edge.memory.activations_bytes[0] == pytest.approx(bf16.memory.activations_bytes[0], rel=1e-9)
    assert fp8.memory.activations_bytes[0] < 0.95 * bf16.memory.activations_bytes[0]


def test_pytorch_fsdp_shards_the_fp32_master_as_its_parameter():
    """torchtitan's FSDP2 (and Composer's FSDP) keep the sharded parameter in fp32, the optimizer's master
    itself: 4 bytes of weights and Adam's 8 of states per parameter and DP rank, 2 bytes fewer than a
    16-bit shard beside a separate fp32 master (Megatron-FSDP)."""
    m = load_model("llama3-8b")
    t = layout(dp=16, zero=3, recompute="full")
    tt = memory_bytes(m, Recipe(gbs=16, seq_len=4096, stack="torchtitan"), t)
    ds = memory_bytes(m, Recipe(gbs=16, seq_len=4096), t)          # Megatron-FSDP: 16-bit shard + master
    p = m.params()
    assert tt.optimizer_bytes[0] == pytest.approx(8.0 * p / 16, rel=1e-9)
    assert ds.optimizer_bytes[0] == pytest.approx(12.0 * p / 16, rel=1e-9)
    assert tt.weights_bytes[0] - ds.weights_bytes[0] == pytest.approx(2.0 * p / 16, rel=1e-9)


def test_te_userbuffers_of_the_tp_comm_overlap_are_reserved():
    """Transformer Engine registers 12 userbuffers of [seq x mbs / CP, hidden] for the TP-comm overlap
    (initialize_ub; Megatron's _initialize_tp_communicators shape): 12 x 8192 x 8192 x 2 B = 1.5 GiB for
    Llama-3-70B at seq 8192, the 8 all-gather ones in one byte under FP8; none without the overlap."""
    m = load_model("llama3-70b")
    t = layout(tp=8, pp=2, dp=1, sp=True, mbs=1, recompute="full")
    on = Recipe(gbs=64, seq_len=8192, tp_comm_overlap=True)
    off = Recipe(gbs=64, seq_len=8192, tp_comm_overlap=False)
    fp8 = Recipe(gbs=64, seq_len=8192, tp_comm_overlap=True, precision="fp8")
    r_on, r_off, r_fp8 = (memory_bytes(m, r, t).reserved_bytes[0] for r in (on, off, fp8))
    assert r_on - r_off == 12 * 8192 * 8192 * 2
    assert r_fp8 - r_off == (8 * 1 + 4 * 2) * 8192 * 8192
    assert memory_bytes(m, on, layout(tp=8, pp=2, dp=1, sp=True, mbs=1, recompute="full",
                                      overlap=False)).reserved_bytes[0] == r_off


def test_fp8_weight_cache_is_the_quantized_copy_and_its_transpose_on_hopper():
    """Megatron passes is_first_microbatch, so TE caches each fp8 weight (and on Hopper its
    transpose) for the step: Llama-3-70B at TP8 PP4 holds 20 layers x 1/8 of a layer's parameters,
    two bytes each, beside its bf16 weights; one byte on Blackwell, whose FP8 GEMM takes any layout."""
    from costmodel.stage_params import layer_params_per_gpu
    from costmodel.specs import load_cluster
    m = load_model("llama3-70b")
    t = layout(tp=8, pp=4, dp=2, sp=True)
    hopper, blackwell = load_cluster("dgx-h100").gpu, load_cluster("dgx-b200").gpu
    w = lambda gpu, **kw: memory_bytes(m, Recipe(gbs=64, seq_len=8192, **kw), t, gpu).weights_bytes[0]  # noqa: E731
    per_layer = layer_params_per_gpu(m, t)[0]
    assert per_layer == pytest.approx(m.layer_params() / 8)
    base = w(hopper)
    assert w(hopper, precision="fp8") - base == pytest.approx(2 * 20 * per_layer)
    assert w(blackwell, precision="fp8") - base == pytest.approx(20 * per_layer)
    # MXFP8 keeps both block-scaled directions: 2 x (1 + 1/32) bytes
    assert w(blackwell, precision="mxfp8") - base == pytest.approx(2 * (1 + 1 / 32) * 20 * per_layer)
    # BF16 edge layers (4 of 80) are not cached; torchao's float8 (torchtitan) casts per call
    assert w(hopper, precision="fp8", bf16_edge_layers=2) - base == pytest.approx(2 * 20 * per_layer * 76 / 80)
    assert w(hopper, precision="fp8", stack="torchtitan", fp8_recipe="tensorwise") == pytest.approx(w(hopper, stack="torchtitan"))


def test_fp8_parameters_replace_the_16bit_weight_and_gather_one_byte():
    """--fp8-param-gather (NeMo's fp8 default): the parameters are TE Float8Tensors, so on Hopper the
    data and its transpose (2 B) replace the bf16 weight (2 B) and no cache is kept; on Blackwell 1 B;
    without the distributed optimizer (ZeRO 0, which Megatron refuses it with) the cache stays.  The
    parameter all-gather moves one byte for the layers' share of the stage and for the experts."""
    from costmodel.comm import param_gather_bytes
    from costmodel.stage_params import layer_params_per_gpu, stage_params
    from costmodel.specs import load_cluster
    from costmodel.stacks import STACKS, stack_recipe
    from costmodel.errors import InputError
    m = load_model("llama3-70b")
    hopper, blackwell = load_cluster("dgx-h100").gpu, load_cluster("dgx-b200").gpu
    t = layout(tp=8, pp=4, dp=2, sp=True, zero=1)
    w = lambda gpu, tab=t, **kw: memory_bytes(m, Recipe(gbs=64, seq_len=8192, stack="nemo", **kw), tab, gpu).weights_bytes[0]  # noqa: E731
    per_layer = layer_params_per_gpu(m, t)[0]
    assert w(hopper, precision="fp8", fp8_param_gather=True) == pytest.approx(w(hopper))
    assert w(blackwell, precision="fp8", fp8_param_gather=True) == pytest.approx(w(blackwell) - 20 * per_layer)
    z0 = layout(tp=8, pp=4, dp=2, sp=True, zero=0)
    assert w(hopper, z0, precision="fp8", fp8_param_gather=True) - w(hopper, z0) == pytest.approx(2 * 20 * per_layer)
    r = Recipe(gbs=64, seq_len=8192, stack="nemo", precision="fp8", fp8_param_gather=True)
    dense, _ = stage_params(m, t)
    d_b, e_b = param_gather_bytes(m, r, t, dense)
    layers = 20 * per_layer                      # the stage's layer parameters; the rest is the embedding
    assert d_b[0] == pytest.approx(2.0 - layers / dense[0]) and e_b == 1.0
    assert param_gather_bytes(m, Recipe(gbs=64, seq_len=8192, stack="nemo", precision="fp8"), t, dense) == (2.0, 2.0)
    # a 16-bit run ignores NeMo's default; asked for by name with bf16, or on torchtitan, it is refused
    assert stack_recipe(STACKS["nemo"], 64, 8192, "bf16").fp8_param_gather is True
    with pytest.raises(InputError, match="--fp8-param-gather"):
        stack_recipe(STACKS["megatron"], 64, 8192, "bf16", fp8_param_gather=True)
    with pytest.raises(InputError, match="--fp8-param-gather"):
        Recipe(gbs=64, seq_len=8192, stack="torchtitan", fp8_param_gather=True)


def test_eager_elementwise_ops_keep_more_than_fused_kernels():
    """Llama 3 8B at seq 8192, mbs 1, no recompute: HF's eager LlamaRMSNorm and silu(gate) * up (the
    deepspeed stack's default, no fused elementwise) keep 15 bytes a hidden element more per layer than
    TE's fused kernels: 2 norms x 4 bytes x 4096 + 2 bytes x 14336 = 61,440 bytes a token, 15.0 GiB over
    32 layers; GPT-3's biased LayerNorm and GELU keep the same either way."""
    m = load_model("llama3-8b")
    row = LayoutTable.from_rows([dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, zero=3, sp=False, overlap=True,
                                      recompute="none")])
    act = lambda model, fused, st="deepspeed": activation_bytes_per_layer(  # noqa: E731
        model, Recipe(gbs=8, seq_len=8192, stack=st, fused_elementwise=fused), row)[0]
    assert act(m, False) - act(m, True) == pytest.approx(8192 * 61440, rel=1e-12)
    assert 32 * (act(m, False) - act(m, True)) / 2**30 == pytest.approx(15.0, abs=0.01)
    assert act(GPT3, False, "megatron") == act(GPT3, True, "megatron")


def test_ep_overlap_keeps_one_more_chunk_in_flight_under_an_interleaved_pipeline():
    """Megatron-core schedules one more forward before the 1F1B steps under batch-level EP overlap
    (schedules.py get_pp_rank_microbatches: num_warmup_microbatches + 1): Qwen3-30B-A3B at PP 2 VP 2 keeps
    6 chunks of 12 layers on its first stage, not 5; without interleaving nothing changes."""
    m = load_model("qwen3-30b-a3b")
    base = Recipe(gbs=256, seq_len=4096, moe_dispatcher="alltoall", moe_grouped_gemm=True, moe_permute_fusion=True)
    over = Recipe(gbs=256, seq_len=4096, moe_dispatcher="alltoall", moe_grouped_gemm=True, moe_permute_fusion=True,
                  moe_ep_overlap=True)
    row = dict(tp=1, pp=2, dp=16, cp=1, ep=16, etp=1, vp=2, mbs=1, recompute="none", zero=1, sp=False, overlap=True)
    t = LayoutTable.from_rows([row])
    one_chunk = 12 * activation_bytes_per_layer(m, base, t)[0]
    assert memory_bytes(m, over, t).activations_bytes[0] - memory_bytes(m, base, t).activations_bytes[0] == \
        pytest.approx(one_chunk, rel=1e-9)
    flat = LayoutTable.from_rows([dict(row, vp=1)])
    assert memory_bytes(m, over, flat).activations_bytes[0] == memory_bytes(m, base, flat).activations_bytes[0]


def test_the_last_interleaved_rank_holds_its_own_warm_up_beside_the_logits():
    """Megatron-core's interleaved schedule runs (VP - 1) x PP + 1 chunks on the last rank before its first
    backward (schedules.py get_pp_rank_microbatches: 2 (PP - r - 1) + (VP - 1) PP): Llama 3 8B at TP 2 PP 2
    VP 16 keeps 31 one-layer chunks and the logits there, not one micro-batch's 16, as its own --pp-layout of
    the same split already said (a recommend answer priced 15 GiB below its pasted predict)."""
    m = load_model("llama3-8b")
    r = Recipe(gbs=16, seq_len=2048)
    row = dict(tp=2, pp=2, dp=2, cp=1, ep=1, vp=16, mbs=4, recompute="none", zero=1, sp=True, overlap=True)
    t = LayoutTable.from_rows([row])
    even = memory_bytes(m, r, t)
    from costmodel.memory import rank_memory_bytes
    split = rank_memory_bytes(m, r, t, [16, 16])
    assert even.peak_bytes[0] == pytest.approx(split.max(), rel=1e-9)
    act = activation_bytes_per_layer(m, r, t)[0]
    assert even.activations_bytes[0] >= 31 * act


def test_the_ilps_stage_memory_bounds_every_split_from_above_under_partial_recompute():
    """Llama 3 70B, TP8 PP4, full recompute of N of each rank's 20 layers: the energy ILP's affine
    stage memory (fixed + n x per layer) never falls below the memory predict gives a rank of n layers,
    for even and uneven splits; it had been read as a line through one and two layers, 1.1-3.0 GiB
    low, since the re-run layer's working set vanishes once a rank keeps a layer."""
    from costmodel.memory import rank_memory_bytes, stage_memory_terms
    m, r = load_model("llama3-70b"), Recipe(gbs=512, seq_len=8192)
    for n_rec in (0, 2, 5, 10, 19, 20):
        lay = dict(tp=8, pp=4, dp=2, cp=1, ep=1, vp=1, mbs=1, recompute="full" if n_rec else "none",
                   recompute_num_layers=n_rec, zero=1, sp=True, overlap=True)
        fixed, per = stage_memory_terms(m, r, lay)
        for split in ([20] * 4, [26, 18, 18, 18], [1, 26, 26, 27], [5, 25, 25, 25]):
            true = rank_memory_bytes(m, r, LayoutTable.from_rows([lay]), split)[0]
            over = fixed + per * np.asarray(split) - true
            assert over.min() >= -1.0 and over.max() < 0.25 * 2 ** 30        # bytes: at most 0.25 GiB above
