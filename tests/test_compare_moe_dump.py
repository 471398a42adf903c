"""MoE and MLA models read from a Megatron argument dump (compare without --model), and the checks of a
dump against a catalog model: Megatron's ffn_hidden_size is the dense layers' width, moe_ffn_hidden_size
the experts' (Megatron-LM arguments.py: it defaults to ffn_hidden_size), moe_layer_freq places the MoE
layers (an int or the pattern string Megatron evaluates), MLA's ranks and head dims, the MTP module.
Published totals: Qwen3-30B-A3B 30.5B (3.3B active, Qwen3 technical report Table 1); DeepSeek-V3 671B
(37B active, without its 14B MTP module, arXiv:2412.19437)."""
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.compare import _moe_layer_pattern, check_model, model_from_log
from costmodel.errors import InputError
from costmodel.readers.training_logs import read_training_log
from costmodel.specs import load_model

REPO = Path(__file__).resolve().parents[1]

QWEN3_30B = dict(num_layers=48, hidden_size=2048, ffn_hidden_size=6144, moe_ffn_hidden_size=768, num_experts=128,
                 moe_router_topk=8, num_attention_heads=32, num_query_groups=4, group_query_attention=True,
                 kv_channels=128, padded_vocab_size=151936, seq_length=4096, global_batch_size=256,
                 micro_batch_size=1, world_size=16, tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                 context_parallel_size=1, expert_model_parallel_size=8, swiglu=True,
                 untie_embeddings_and_output_weights=True, position_embedding_type="rope", add_bias_linear=False,
                 bf16=True, use_distributed_optimizer=True, sequence_parallel=False, qk_layernorm=True,
                 moe_token_dispatcher_type="alltoall", moe_grouped_gemm=True)
DEEPSEEK_V3 = dict(QWEN3_30B, num_layers=61, hidden_size=7168, ffn_hidden_size=18432, moe_ffn_hidden_size=2048,
                   num_experts=256, moe_shared_expert_intermediate_size=2048, moe_layer_freq="([0]*3+[1]*58)",
                   multi_latent_attention=True, q_lora_rank=1536, kv_lora_rank=512, qk_head_dim=128,
                   qk_pos_emb_head_dim=64, v_head_dim=128, num_attention_heads=128, num_query_groups=128,
                   padded_vocab_size=129280, mtp_num_layers=1, world_size=256, expert_model_parallel_size=32,
                   pipeline_model_parallel_size=8)


def _log(tmp_path, args: dict, name="run.log", step_ms=7000.0) -> Path:
    lines = ["------------------------ arguments ------------------------"]
    lines += [f"  {k} {'.' * (48 - len(k))} {v}" for k, v in sorted(args.items())]
    lines.append("-------------------- end of arguments ---------------------")
    lines += [f" [2025-01-01 00:00:{i:02d}] iteration {i:8d}/    1000 | consumed samples: {256 * i:10d} | elapsed time "
              f"per iteration (ms): {step_ms:.1f} | learning rate: 1.0E-05 | global batch size:   256 | lm loss: 2.0E+00 | "
              "loss scale: 1.0 | grad norm: 1.0 | number of skipped iterations:   0 | number of nan iterations:   0 |"
              for i in range(1, 11)]
    f = tmp_path / name
    f.write_text("\n".join(lines) + "\n")
    return f


def _model(tmp_path, args):
    f = _log(tmp_path, args)
    t = read_training_log(f)
    return model_from_log(t.layout(), t.args, str(f)), t


def test_qwen3_moe_dump_gives_its_experts_width_not_the_dense_one(tmp_path):
    m, t = _model(tmp_path, QWEN3_30B)
    assert (m.ffn_hidden, m.num_experts, m.topk, m.num_dense_layers) == (768, 128, 8, 0)
    assert m.params() == pytest.approx(30.5e9, rel=0.005)
    assert m.params(active=True) == pytest.approx(3.3e9, rel=0.02)
    # the catalog's Qwen3-30B-A3B is the model of this dump: its 6144-wide ffn_hidden_size is the unused
    # dense width, its experts' 768 is moe_ffn_hidden_size
    check_model(load_model("qwen3-30b-a3b"), t.layout(), "qwen3-30b-a3b", "run.log")
    with pytest.raises(InputError, match=r"moe_ffn_hidden: qwen3-30b-a3b has moe_ffn_hidden = 768, the log \(run.log\) "
                                         "says 1024"):
        check_model(load_model("qwen3-30b-a3b"), dict(t.layout(), moe_ffn_hidden=1024), "qwen3-30b-a3b", "run.log")


def test_deepseek_v3_dump_reads_mla_dense_first_layers_shared_experts_and_mtp(tmp_path):
    m, t = _model(tmp_path, DEEPSEEK_V3)
    assert (m.num_dense_layers, m.dense_mlp_width, m.shared_ffn_hidden, m.mtp_layers) == (3, 18432, 2048, 1)
    assert (m.q_lora_rank, m.kv_lora_rank, m.head_dim, m.qk_rope_head_dim, m.v_head_dim) == (1536, 512, 128, 64, 128)
    assert m.dense_layer_indices == ()                          # the first three: DeepSeek's place for them
    assert m.params() == pytest.approx(671e9, rel=0.005)
    assert m.params(active=True) == pytest.approx(37e9, rel=0.02)
    assert m.params() == pytest.approx(load_model("deepseek-v3").params(), rel=1e-6)


@pytest.mark.parametrize("value,want", [
    (1, [1] * 6), (2, [1, 0, 1, 0, 1, 0]), ("([0]*2+[1]*4)", [0, 0, 1, 1, 1, 1]), ("[1,0]*3", [1, 0] * 3),
    ("3*[0,1]", [0, 1] * 3)])
def test_moe_layer_freq_as_megatron_reads_it(value, want):
    assert _moe_layer_pattern(value, 6, "run.log") == want


@pytest.mark.parametrize("value,why", [
    ("__import__('os')", "not a layer pattern"), ("[0,2]*3", "not a layer pattern"), ("[1]*5", "gives 5 layers"),
    (0, "whole number >= 1"), ("[True]*6", "not a layer pattern")])
def test_a_moe_layer_freq_that_is_no_pattern_is_refused_without_running_it(value, why):
    with pytest.raises(InputError, match=why) as e:
        _moe_layer_pattern(value, 6, "run.log")
    assert e.value.where == "run.log" and e.value.field == "moe_layer_freq"


def test_interleaved_moe_layers_come_from_the_dump(tmp_path):
    """moe_layer_freq 2: MoE in layers 0, 2, 4...: half the layers dense, not the first half."""
    m, _ = _model(tmp_path, dict(QWEN3_30B, moe_layer_freq=2))
    assert m.num_dense_layers == 24 and m.dense_layer_indices == tuple(range(1, 48, 2))


def test_a_dump_whose_top_k_exceeds_its_experts_is_refused_by_name(tmp_path):
    f = _log(tmp_path, dict(QWEN3_30B, moe_router_topk=200))
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "compare", "--log", str(f), "--cluster", "dgx-h100",
                        "--nodes", "2"], capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and "Traceback" not in r.stderr and "Warning" not in r.stderr
    assert r.stderr.strip() == (f"costmodel: error: {f}: moe_router_topk: 200 exceeds the 128 experts (num_experts): "
                                "a token cannot pick more experts than there are")


@pytest.mark.parametrize("edit,field,needle", [
    (dict(mtp_num_layers="two"), "mtp_num_layers", "'two' is not a whole number >= 0"),
    (dict(mtp_num_layers=-1), "mtp_num_layers", "-1 is not a whole number >= 0"),
    (dict(hidden_dropout="abc"), "hidden_dropout", "not a dropout probability"),
    (dict(kv_channels=0), "kv_channels", "0 is not a whole number >= 1"),
    (dict(max_position_embeddings=-5), "max_position_embeddings", "not a whole number >= 1"),
    (dict(num_query_groups=5), "num_query_groups", "5 does not divide num_attention_heads 32"),
    (dict(recompute_granularity="partial"), "recompute_granularity", "'partial' is not one of full, selective"),
    (dict(data_parallel_size=4, world_size=8), "data_parallel_size", "is not the world_size 8 the dump prints"),
    (dict(tensor_model_parallel_size=2, world_size=16, tp_comm_overlap=True, sequence_parallel=False),
     "tp_comm_overlap", "without sequence_parallel"),
    (dict(moe_router_topk="None"), "moe_router_topk", "not printed for a run with 128 experts"),
    (dict(moe_layer_freq=0), "moe_layer_freq", "expected a whole number >= 1"),
    (dict(moe_layer_freq="[0]*48"), "moe_layer_freq", "places no MoE layer"),
    (dict(multi_latent_attention=True, kv_lora_rank="None"), "kv_lora_rank", "not printed for a multi_latent"),
])
def test_a_dump_value_no_run_has_is_refused_by_name(tmp_path, edit, field, needle):
    """Every model-defining value a dump prints is checked where it is read: one error naming the log and
    the key (never a traceback, never a silent stand-in such as top-1 routing or MoE in every layer)."""
    f = _log(tmp_path, dict(QWEN3_30B, **edit))
    with pytest.raises(InputError) as e:
        t = read_training_log(f)
        model_from_log(t.layout(), t.args, str(f))
    assert e.value.where == str(f) and e.value.field == field and needle in e.value.message


def test_a_log_with_two_dumps_that_disagree_is_two_runs(tmp_path):
    f = _log(tmp_path, QWEN3_30B)
    g = _log(tmp_path, dict(QWEN3_30B, hidden_size=4096), name="second.log")
    f.write_text(f.read_text() + g.read_text())
    with pytest.raises(InputError, match="hidden_size 4096 contradicts 2048 at line .*: two runs in one log"):
        read_training_log(f)


def test_an_unset_ffn_width_is_megatron_s_and_said(tmp_path):
    """Megatron-LM sets ffn_hidden_size it was not given: 4h, or int(8h/3/64)*64 with SwiGLU (arguments.py)."""
    m, _ = _model(tmp_path, dict(QWEN3_30B, num_experts="None", moe_router_topk="None", moe_ffn_hidden_size="None",
                                 expert_model_parallel_size=1, ffn_hidden_size="None"))
    assert not m.is_moe and m.ffn_hidden == int(4 * 2048 * 2 / 3 / 64) * 64 == 5440


def test_model_is_checked_against_the_dump_s_architecture_keys(tmp_path):
    """--model must be the run's: DeepSeek-V3's catalog model against a dump without MLA, with three MTP
    modules, a wider shared expert, no dense layers, or (Qwen3) GELU is refused by the key."""
    ds = load_model("deepseek-v3")
    for edit, key in ((dict(multi_latent_attention=False), "multi_latent_attention"), (dict(mtp_num_layers=3), "mtp_num_layers"),
                      (dict(moe_shared_expert_intermediate_size=8192), "moe_shared_expert_intermediate_size"),
                      (dict(moe_layer_freq=1), "moe_layer_freq")):
        t = read_training_log(_log(tmp_path, dict(DEEPSEEK_V3, **edit)))
        with pytest.raises(InputError, match=f"--model: {key}: deepseek-v3 has .*pick the model that ran"):
            check_model(ds, t.layout(), "deepseek-v3", "run.log", t.args)
    t = read_training_log(_log(tmp_path, DEEPSEEK_V3))
    check_model(ds, t.layout(), "deepseek-v3", "run.log", t.args)
    t = read_training_log(_log(tmp_path, dict(QWEN3_30B, swiglu=False)))
    with pytest.raises(InputError, match="swiglu: qwen3-30b-a3b has True"):
        check_model(load_model("qwen3-30b-a3b"), t.layout(), "qwen3-30b-a3b", "run.log", t.args)


def test_uneven_first_and_last_stages_are_priced_as_the_dump_gives_them(tmp_path):
    """decoder_first/last_pipeline_num_layers: 14 | 24 | 24 | 18 of Llama 3 70B's 80 layers at PP 4, the
    fullest rank (24) pacing the step; a split whose rest does not divide the middle stages is refused."""
    llama = dict(QWEN3_30B, num_layers=80, hidden_size=8192, ffn_hidden_size=28672, num_attention_heads=64,
                 num_query_groups=8, padded_vocab_size=128256, tensor_model_parallel_size=8,
                 pipeline_model_parallel_size=4, world_size=64, sequence_parallel=True, num_experts="None",
                 moe_router_topk="None", moe_ffn_hidden_size="None", expert_model_parallel_size=1)
    base = ["compare", "--cluster", "dgx-h100"]

    def run(edit):
        f = _log(tmp_path, dict(llama, **edit), step_ms=40000.0)
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", *base, "--log", str(f)], capture_output=True,
                           text=True, cwd=REPO, timeout=120)
        return r
    r = run(dict(decoder_first_pipeline_num_layers=14, decoder_last_pipeline_num_layers=18))
    assert r.returncode == 0, r.stderr
    assert "pipeline split 14|24|24|18 transformer layers per pipeline rank" in r.stdout + r.stderr
    r = run(dict(decoder_first_pipeline_num_layers=15, decoder_last_pipeline_num_layers=18))
    assert r.returncode == 2 and "decoder_first_pipeline_num_layers: first 15, last 18 of 80 layers over PP 4" in r.stderr
    # no key sets the split: Megatron asserts PP divides the layers, so 80 layers over PP 3 did not run
    r = run(dict(pipeline_model_parallel_size=3, world_size=48))
    assert r.returncode == 2 and "num_layers (80) must be divisible by PP x VP" in r.stderr, r.stderr
    assert "PP 3 (the log)" in r.stderr and "Traceback" not in r.stderr


def test_a_dump_whose_tp_does_not_divide_its_query_groups_is_refused_in_megatron_words(tmp_path):
    """Qwen3-30B-A3B's 4 query groups at TP 8: Megatron-core's attention divides num_query_groups by TP
    (divide() asserts), so the message names Megatron's key beside the Hugging Face one."""
    f = _log(tmp_path, dict(QWEN3_30B, tensor_model_parallel_size=8, expert_model_parallel_size=2,
                            sequence_parallel=True))
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "compare", "--cluster", "dgx-h100", "--log", str(f)],
                       capture_output=True, text=True, cwd=REPO, timeout=120)
    assert r.returncode == 2 and "the KV heads (4; num_query_groups in Megatron" in r.stderr, r.stderr


def test_the_records_wall_clock_is_checked_against_their_printed_steps():
    """Records 1 s apart that print 150 s steps cannot be one run's; 30 s apart at 7 s steps, the run spent
    time between them (evaluation, checkpoints) that the compared step leaves out; 7 s apart agree, and
    under 20 s of clock (one-second timestamps) nothing is said unless the printed steps add to a minute."""
    import numpy as np
    from costmodel.compare import wall_clock_note
    it = np.arange(1, 31)
    assert "take longer than the clock allows" in wall_clock_note(it, 1e9 + it * 1.0, np.full(30, 150.0))
    assert "1.0x" not in wall_clock_note(it, 1e9 + it * 30.0, np.full(30, 7.0))
    assert "4.3x the printed step time 7 s" in wall_clock_note(it, 1e9 + it * 30.0, np.full(30, 7.0))
    assert wall_clock_note(it, 1e9 + it * 7.0, np.full(30, 7.0)) is None
    # under 20 s of clock, one-second timestamps decide nothing where the printed steps add to under a
    # minute; a clock that stands still through 2 x 150 s of printed steps does
    assert wall_clock_note(it[:3], 1e9 + it[:3] * 1.0, np.full(3, 5.0)) is None
    assert "take longer than the clock allows" in wall_clock_note(it[:3], 1e9 + it[:3] * 1.0, np.full(3, 150.0))
    assert "advance 0 s per iteration" in wall_clock_note(it, np.full(30, 1e9), np.full(30, 17.0))
    assert wall_clock_note(it, np.full(30, np.nan), np.full(30, 7.0)) is None
