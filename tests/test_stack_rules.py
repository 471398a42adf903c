"""What a training stack refuses at start-up (costmodel.stack_rules): the optimizers each stack has,
and the launch text that names the priced optimizer and says what Megatron cannot run."""
import pytest

from costmodel.errors import InputError
from costmodel.launch import launch_settings
from costmodel.specs import load_model
from costmodel.stacks import get_stack, stack_recipe

LAY = dict(tp=1, pp=1, dp=8, cp=1, ep=1, etp=1, vp=1, mbs=1, recompute="none", recompute_num_layers=0, zero=1,
           sp=False, overlap=True)


@pytest.mark.parametrize("stack,optimizer,offload,why", [
    ("torchtitan", "lionw", False, "the torchtitan stack trains with adam, adamw"),
    ("megatron", "adafactor", False, "the megatron stack trains with adam, adamw, sgd, lionw"),
    ("llm-foundry", "sgd", False, "the llm-foundry stack trains with adamw, lionw"),
    ("deepspeed", "adafactor", True, "for adam, adamw, lionw only")])
def test_an_optimizer_the_stack_lacks_is_refused(stack, optimizer, offload, why):
    """torchtitan had priced LionW and printed a configuration that trains AdamW; DeepSpeed refuses a
    client optimizer under ZeRO-Offload (zero_force_ds_cpu_optimizer)."""
    with pytest.raises(InputError, match=why) as e:
        stack_recipe(get_stack(stack), 64, 4096, "bf16", optimizer=optimizer, optimizer_offload=offload)
    assert e.value.where == "--optimizer"
    assert stack_recipe(get_stack("deepspeed"), 64, 4096, "bf16", optimizer="adafactor").optimizer == "adafactor"


def test_launch_texts_name_the_priced_optimizer_and_megatron_s_missing_zero2():
    """Megatron-LM trains Lion (--optimizer lion, 2026); its distributed optimizer shards the states but
    not the gradients, so a ZeRO-2 layout printed as Megatron arguments says so."""
    m = load_model("llama3-8b")
    lion = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", optimizer="lionw")
    _, text = launch_settings(LAY, m, lion, fmt="megatron")
    assert "--optimizer lion" in text and "has no" not in text
    _, nemo = launch_settings(LAY, m, lion, fmt="nemo")
    assert "recipe.optim.config.optimizer = 'lion'" in nemo
    z2 = stack_recipe(get_stack("llm-foundry"), 64, 4096, "bf16")
    _, text = launch_settings(dict(LAY, zero=2), m, z2, fmt="megatron")
    assert "Megatron-LM has no ZeRO-2: --use-distributed-optimizer shards the optimizer states, not the gradients" in text
    adam = stack_recipe(get_stack("torchtitan"), 64, 4096, "bf16", optimizer="adam")
    _, tt = launch_settings(dict(LAY, zero=3), m, adam, fmt="torchtitan")
    assert 'optimizer_name = "Adam"' in tt


def test_gemma2_soft_capped_attention_runs_unfused_on_the_megatron_family():
    """Gemma 2 soft-caps its attention scores (attn_logit_softcapping 50): NeMo runs it in
    Gemma2DotProductAttention, unfused (s x s scores in HBM), as Transformer Engine's fused attention takes
    no cap; it had been priced fused (67.8 GiB, feasible, where unfused needs 109.8 GiB at TP 2, seq 8192);
    flash-attn's softcap argument keeps the deepspeed stack fused; --flash-attention is refused."""
    from costmodel.specs import Recipe
    from costmodel.stack_rules import softcap_recipe
    g = load_model("tests/data/models/gemma-2-9b.json")
    assert g.attn_softcap == 50.0 and g.params() == pytest.approx(9.24e9, rel=0.005)
    te, note = softcap_recipe(g, stack_recipe(get_stack("nemo"), 64, 8192, "bf16"), {})
    assert not te.flash_attention and "Gemma2DotProductAttention" in note
    ds = stack_recipe(get_stack("deepspeed"), 64, 8192, "bf16")
    assert softcap_recipe(g, ds, {}) == (ds, None)
    with pytest.raises(InputError, match="soft-caps its attention scores") as e:
        softcap_recipe(g, Recipe(gbs=64, seq_len=8192), {"flash_attention": True})
    assert e.value.where == "--flash-attention"
    assert load_model("llama3-8b").attn_softcap == 0.0


def test_the_json_settings_say_which_dp_overlap_was_priced():
    """DeepSpeed's ZeRO-3 overlaps its gathers whatever --dp-overlap says (off by default for ZeRO 0-2):
    the record keeps the switch and says the overlap priced."""
    from costmodel.launch import settings_dict
    r = stack_recipe(get_stack("deepspeed"), 64, 4096, "bf16")
    out = settings_dict(dict(LAY, zero=3), load_model("llama3-8b"), r)
    assert out["dp_overlap"] is False and out["dp_overlap_priced"] is True
    assert settings_dict(dict(LAY, zero=1), load_model("llama3-8b"), r)["dp_overlap_priced"] is False


def test_records_give_idle_switches_as_predict_takes_them():
    """recommend's JSON had answered a TP 1 layout with tp_comm_overlap true, and a layout without
    selective recompute with recompute_modules ['core_attn'], both of which predict refuses."""
    from costmodel.launch import settings_dict
    from costmodel.report import recipe_record
    r = stack_recipe(get_stack("nemo"), 64, 4096, "bf16")
    assert r.tp_comm_overlap and r.recomputed == ("core_attn",)
    rec, st = recipe_record(r, LAY), settings_dict(LAY, load_model("llama3-8b"), r)
    assert rec["tp_comm_overlap"] is st["tp_comm_overlap"] is False
    assert rec["recompute_modules"] == "" and st["recompute_modules"] == []
    tp = dict(LAY, tp=2, dp=4, sp=True, recompute="selective")
    assert recipe_record(r, tp)["tp_comm_overlap"] is True and recipe_record(r, tp)["recompute_modules"] == "core_attn"


def test_blackwell_needs_no_single_device_connection():
    """Megatron-LM asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP > 1 only below compute capability 10
    (arguments.py: 'requirement no longer exists since the Blackwell architecture'): a GB200 layout had
    printed the export, which would serialise its overlaps."""
    from costmodel.specs import load_gpu
    m, r = load_model("llama3-8b"), stack_recipe(get_stack("megatron"), 64, 4096, "bf16")
    tp = dict(LAY, tp=2, dp=4, sp=True)
    env = "export CUDA_DEVICE_MAX_CONNECTIONS=1"
    assert env in launch_settings(tp, m, r, fmt="megatron", gpu=load_gpu("h100-sxm-80gb"))[1]
    assert env not in launch_settings(tp, m, r, fmt="megatron", gpu=load_gpu("gb200-186gb"))[1]


def test_megatron_arguments_set_the_structure_megatron_would_default_otherwise():
    """Megatron-LM builds every layer MoE with top-2 experts of --ffn-hidden-size and DeepSeek-V2's MLA
    ranks unless told otherwise: DeepSeek-V3's arguments name its 256 experts of 2048, top-8, one shared
    expert, 3 dense first layers, group-limited routing and MLA; a dense model gets none of them."""
    m = load_model("deepseek-v3")
    r = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", moe_dispatcher="alltoall")
    _, text = launch_settings(dict(LAY, ep=8, dp=8), m, r, fmt="megatron")
    for arg in ("--num-experts 256", "--moe-router-topk 8", "--moe-ffn-hidden-size 2048",
                "--moe-shared-expert-intermediate-size 2048", '--moe-layer-freq "([0]*3+[1]*58)"',
                "--moe-router-num-groups 8 --moe-router-group-topk 4",
                "--multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512 --qk-head-dim 128 "
                "--qk-pos-emb-head-dim 64 --v-head-dim 128"):
        assert arg in text, arg
    dense = launch_settings(LAY, load_model("llama3-8b"), r, fmt="megatron")[1]
    assert "--num-experts" not in dense and "--multi-latent-attention" not in dense


def test_megatron_arguments_set_the_sliding_window_the_model_was_priced_with():
    """Megatron-LM attends fully unless --window-size is given: the arguments had priced gpt-oss's 128-token
    windows and Mistral's 4096 but launched full attention.  TE's window is (W - 1, 0) for HF's W
    (Megatron-Bridge gemma2_bridge.py); every second layer full is --window-attn-skip-freq 2
    (is_layer_window_attention: layer_number % N != 0 slides), Qwen2's sliding layers from
    max_window_layers on a 1/0 pattern; a hand-built spec that does not say which layers slide gets none."""
    import dataclasses
    from costmodel.megatron_structure import megatron_structure_args
    from costmodel.specs.attention_config import sliding_attention
    r = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", moe_dispatcher="alltoall")
    oss = launch_settings(dict(LAY, ep=8, dp=8), load_model("gpt-oss-120b"), r, fmt="megatron")[1]
    assert '--window-size "(127,0)"' in oss and "--window-attn-skip-freq 2 " in oss
    mistral = launch_settings(LAY, load_model("mistral-7b"), r, fmt="megatron")[1]
    assert '--window-size "(4095,0)"' in mistral and "--window-attn-skip-freq" not in mistral
    assert "--window-size" not in launch_settings(LAY, load_model("llama3-8b"), r, fmt="megatron")[1]
    qwen = {"sliding_window": 4096, "use_sliding_window": True, "max_window_layers": 21}
    m = dataclasses.replace(load_model("llama3-8b"), num_layers=28, **sliding_attention(qwen, "q.json", "qwen2", 28))
    assert m.sliding_layers == 7 and m.sliding_layer_indices == tuple(range(21, 28))
    assert '--window-attn-skip-freq "([0]*21+[1]*7)"' in " ".join(megatron_structure_args(m))
    gemma3 = sliding_attention({"sliding_window": 1024, "sliding_window_pattern": 6}, "g.json", "gemma3_text", 12)
    m3 = dataclasses.replace(load_model("llama3-8b"), num_layers=12, **gemma3)
    assert "--window-attn-skip-freq 6" in megatron_structure_args(m3)
    bare = dataclasses.replace(load_model("llama3-8b"), sliding_window=4096, sliding_layers=16)
    assert not any("window" in a for a in megatron_structure_args(bare))
    # and the launch says so, rather than let the run attend fully where windows were priced
    said = launch_settings(LAY, bare, r, fmt="megatron")[1]
    assert "priced 16 sliding-window layers whose places the model does not say" in said


def test_llm_foundry_checkpoints_whole_blocks_as_deepspeed_does():
    """llm-foundry had accepted --recompute selective and printed 'activation checkpointing: selective',
    which no llm-foundry key sets (its FSDP activation checkpointing re-runs whole blocks)."""
    from costmodel.layouts import LayoutTable, validity
    m = load_model("llama3-8b")
    for st in ("llm-foundry", "deepspeed"):
        r = stack_recipe(get_stack(st), 64, 4096, "bf16")
        code, msgs = validity(LayoutTable.from_rows([dict(LAY, zero=3, recompute="selective")]), m, r, 8, 8)
        assert code[0] >= 0 and "--recompute full or none" in msgs[code[0]]
        code, _ = validity(LayoutTable.from_rows([dict(LAY, zero=3, recompute="full")]), m, r, 8, 8)
        assert code[0] < 0


def test_megatron_deepspeed_arguments_name_sgd():
    """The BigScience fork's arguments had dropped --optimizer sgd (a launch would train Adam)."""
    r = stack_recipe(get_stack("megatron-deepspeed"), 64, 4096, "bf16", optimizer="sgd")
    _, text = launch_settings(dict(LAY, recompute="full"), load_model("llama3-8b"), r, fmt="megatron")
    assert "--optimizer sgd" in text


def test_the_predict_command_repeats_recommend_s_conditions():
    """The pasted predict had dropped --domain-gpus (23% apart on two NVL72 racks), --inlet-temp-c, --profile
    and the fabric what-ifs recommend was given."""
    from costmodel.predict_command import condition_args
    got = condition_args(dict(scale_out_gbps=100.0, oversubscription=None, sharp=False, domain_gpus=64,
                              mem_headroom=0.1), "my profile.yaml", 60.0)
    assert got == ["--scale-out-gbps 100", "--no-sharp", "--domain-gpus 64", "--mem-headroom 0.1",
                   "--profile 'my profile.yaml'", "--inlet-temp-c 60"]


def test_torchtitan_fp8_settings_say_its_current_converter_has_no_tensorwise_recipe():
    """The torchtitan configuration (keys of 2026-08) had said 'add the float8 model converter of your torchtitan
    version' under tensorwise pricing, while that torchtitan's converter takes rowwise recipes only
    (components/quantization/float8.py since 6348d93d1): the settings say so and name the rowwise pricing."""
    m = load_model("llama3-8b")
    lay = dict(LAY, zero=3)
    tw = launch_settings(lay, m, stack_recipe(get_stack("torchtitan"), 64, 4096, "fp8"), fmt="torchtitan")[1]
    assert "torchtitan dropped its tensorwise float8 recipe (6348d93d1" in tw and "--fp8-recipe rowwise" in tw
    rw = launch_settings(lay, m, stack_recipe(get_stack("torchtitan"), 64, 4096, "fp8", fp8_recipe="rowwise"),
                         fmt="torchtitan")[1]
    assert 'recipe_name = "rowwise"' in rw and "dropped its tensorwise" not in rw


def test_megatron_arguments_set_the_attention_shape_megatron_would_default_otherwise():
    """Megatron builds full multi-head attention of hidden / heads wide heads, without Q/K norms or Q/K/V biases,
    unless told: Qwen3-30B-A3B (4 KV groups, heads of 128 where 2048 / 32 is 64, Q/K norms) had printed none of
    it; Llama 3 8B needs its 8 query groups only; DeepSeek-V3's MLA none of them; a Qwen2-style Q/K/V bias
    --add-qkv-bias.  Llama 4's chunked attention, which Megatron-LM lacks, is said."""
    import dataclasses
    from costmodel.megatron_structure import megatron_structure_args
    r = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", moe_dispatcher="alltoall")
    q = " ".join(megatron_structure_args(load_model("qwen3-30b-a3b")))
    assert "--group-query-attention --num-query-groups 4" in q and "--kv-channels 128" in q and "--qk-layernorm" in q
    ll = " ".join(megatron_structure_args(load_model("llama3-8b")))
    assert "--num-query-groups 8" in ll and "--kv-channels" not in ll and "--qk-layernorm" not in ll
    ds = " ".join(megatron_structure_args(load_model("deepseek-v3")))
    assert "--group-query-attention" not in ds and "--kv-channels" not in ds and "--qk-layernorm" in ds
    assert "--add-qkv-bias" in megatron_structure_args(dataclasses.replace(load_model("llama3-8b"), qkv_bias=True))
    scout = launch_settings(dict(LAY, ep=8, dp=8), load_model("llama4-scout"),
                            stack_recipe(get_stack("megatron"), 64, 16384, "bf16", moe_dispatcher="alltoall"),
                            fmt="megatron")[1]
    assert "Megatron-LM has no chunked local attention: its 36 chunked layers" in scout
    assert "chunked" not in launch_settings(LAY, load_model("llama3-8b"), r, fmt="megatron")[1]


def test_megatron_arguments_build_the_mlp_biases_tying_and_positions_megatron_defaults_otherwise():
    """Megatron-LM builds a GeLU MLP, biased linears, a tied output layer and learned absolute positions
    unless told (arguments.py: --swiglu, --squared-relu, add_bias_linear True, --untie-embeddings-and-
    output-weights, --position-embedding-type learned_absolute): Llama 3 8B needs all four switches, GPT-3
    none, Nemotron-4 its squared ReLU, gpt-oss its quick GeGLU instead of --swiglu and its biases kept."""
    from costmodel.megatron_structure import megatron_structure_args
    llama = megatron_structure_args(load_model("llama3-8b"))
    for arg in ("--swiglu", "--disable-bias-linear", "--untie-embeddings-and-output-weights",
                "--position-embedding-type rope"):
        assert arg in llama, arg
    gpt3 = " ".join(megatron_structure_args(load_model("gpt3-175b")))
    for arg in ("--swiglu", "--squared-relu", "--disable-bias-linear", "--untie", "--position-embedding-type"):
        assert arg not in gpt3, arg
    nemotron = megatron_structure_args(load_model("nemotron4-15b"))
    assert "--squared-relu" in nemotron and "--swiglu" not in nemotron
    oss = megatron_structure_args(load_model("gpt-oss-120b"))
    assert "--quick-geglu" in oss and "--swiglu" not in oss and "--disable-bias-linear" not in oss
    assert "--position-embedding-type" not in " ".join(megatron_structure_args(load_model("bloom-176b")))
    # the shape, with DeepSeek-V3's dense layers' width as --ffn-hidden-size (its experts' is --moe-ffn-hidden-size)
    assert llama[0] == "--num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 --num-attention-heads 32"
    ds = megatron_structure_args(load_model("deepseek-v3"))
    assert ds[0] == "--num-layers 61 --hidden-size 7168 --ffn-hidden-size 18432 --num-attention-heads 128"
    assert "--moe-ffn-hidden-size 2048" in " ".join(ds)


def test_megatron_arguments_build_gpt_oss_s_sinks_and_clamped_glu():
    """gpt-oss's attention sinks and its GLU, (up + 1) x gate x sigmoid(1.702 gate) on inputs clamped to 7
    (transformers modeling_gpt_oss.py, swiglu_limit), are Megatron's softmax_type 'learnable', quick_gelu
    behind --quick-geglu, glu_linear_offset 1 and activation_func_clamp_value 7 (as Megatron-Bridge's
    gpt_oss_bridge.py sets them); without them the launch trains vanilla-softmax attention and a plain
    GLU.  A config's own swiglu_limit is read; other families get none of these."""
    import dataclasses
    from costmodel.megatron_structure import megatron_structure_args
    from costmodel.specs.mlp_config import glu_twists
    oss = megatron_structure_args(load_model("gpt-oss-120b"))
    for arg in ("--softmax-type learnable", "--quick-geglu", "--glu-linear-offset 1", "--activation-func-clamp-value 7"):
        assert arg in oss, arg
    llama = " ".join(megatron_structure_args(load_model("llama3-8b")))
    assert "softmax-type" not in llama and "quick-geglu" not in llama and "clamp" not in llama
    m = dataclasses.replace(load_model("gpt-oss-120b"), **glu_twists({"swiglu_limit": 5}, "o.json", "gpt_oss"))
    assert "--activation-func-clamp-value 5" in megatron_structure_args(m)
    with pytest.raises(InputError, match="swiglu_limit"):
        glu_twists({"swiglu_limit": -1}, "o.json", "gpt_oss")
