"""The printed launch settings checked against the frameworks that read them: Megatron-Bridge's enum
form, NeMo recipes' presets the overrides must clear, Megatron-LM's assertions on the environment and on
Transformer Engine's cross-entropy."""
import yaml

from costmodel.launch import launch_settings
from costmodel.specs import Recipe, load_model
from costmodel.specs.hardware import load_cluster

H100 = load_cluster("dgx-h100").gpu
DENSE = dict(tp=1, pp=1, dp=8, cp=1, ep=1, etp=1, vp=1, mbs=1, recompute="none", recompute_num_layers=0, zero=1,
             sp=False, overlap=True, dp_replicate=1)


def test_bridge_sets_the_attention_backend_as_the_enum_its_yaml_writes():
    """A plain 'fused' stays a string in Bridge's overrides, which Megatron-core's backend choice
    (language_module._set_attention_backend: ``== AttnBackend.fused``) never matches."""
    m = load_model("llama3-8b")
    r = Recipe(gbs=64, seq_len=8192, stack="nemo", attention_kernel="cudnn")
    _, text = launch_settings(DENSE, m, r, fmt="bridge", gpu=H100)
    ab = yaml.safe_load(text)["model"]["attention_backend"]
    assert ab == {"_target_": "megatron.core.transformer.enums.AttnBackend", "_call_": True, "_args_": [2],
                  "_name_": "fused"}


def test_nemo_clears_what_deepseek_v3_s_recipe_presets():
    """NeMo's DeepSeek-V3 recipe presets first/last stage layer counts (refused beside a layout), MLA
    recompute modules, the precision-aware optimizer and DeepEPCallback (which turns the flex dispatcher on
    over an alltoall the prediction priced): the overrides set each field the prediction priced."""
    m = load_model("deepseek-v3")
    lay = dict(DENSE, pp=8, vp=4, dp=64, ep=64, recompute="selective")
    r = Recipe(gbs=4096, seq_len=4096, stack="nemo", moe_dispatcher="alltoall", moe_grouped_gemm=True)
    _, text = launch_settings(lay, m, r, fmt="nemo", gpu=H100)
    lines = text.splitlines()
    for want in ("recipe.trainer.strategy.num_layers_in_first_pipeline_stage = None",
                 "recipe.trainer.strategy.num_layers_in_last_pipeline_stage = None",
                 "recipe.model.config.recompute_modules = ['core_attn']",
                 "recipe.optim.config.use_precision_aware_optimizer = False",
                 "recipe.optim.config.exp_avg_dtype = torch.float32",
                 "from nemo.lightning.pytorch.callbacks.deepep import DeepEPCallback",
                 "recipe.trainer.callbacks = [cb for cb in (recipe.trainer.callbacks or []) "
                 "if cb.__fn_or_cls__ is not DeepEPCallback]"):
        assert want in lines, want
    assert any(x.startswith("recipe.trainer.strategy.pipeline_model_parallel_layout = 'E") for x in lines)
    # a model whose NeMo recipe adds no DeepEPCallback gets no line importing it (older NeMo lacks the module)
    mix = dict(DENSE, ep=8)
    _, text = launch_settings(mix, load_model("mixtral-8x7b"), Recipe(gbs=64, seq_len=4096, stack="nemo"), fmt="nemo")
    assert "DeepEPCallback" not in text


def test_megatron_lm_s_assertions_on_fsdp_and_te_cross_entropy_are_met_or_named():
    """Megatron-FSDP asserts CUDA_DEVICE_MAX_CONNECTIONS is not 1 at any TP (validate_args), and
    Megatron-LM refuses --cross-entropy-fusion-impl te since 168cb15d (2026-06-03)."""
    m = load_model("llama3-8b")
    _, text = launch_settings(dict(DENSE, zero=3), m, Recipe(gbs=64, seq_len=8192), fmt="megatron", gpu=H100)
    assert text.startswith("unset CUDA_DEVICE_MAX_CONNECTIONS")
    _, text = launch_settings(DENSE, m, Recipe(gbs=64, seq_len=8192, cross_entropy="fused"), fmt="megatron", gpu=H100)
    assert "--cross-entropy-fusion-impl te" in text and "Megatron-LM refuses --cross-entropy-fusion-impl te" in text
    _, text = launch_settings(DENSE, m, Recipe(gbs=64, seq_len=8192, stack="nemo", cross_entropy="fused"), fmt="nemo",
                              gpu=H100)
    assert "refuses" not in text and "recipe.model.config.cross_entropy_fusion_impl = 'te'" in text


def test_megatron_deepspeed_prints_the_deepspeed_config_its_arguments_name():
    """The fork's --zero-stage only turns on zero.Init at stage 3 (pretrain_gpt.py): the ZeRO stage, the
    precision and the batch DeepSpeed runs come from ds_config.json, which had not been printed."""
    import json
    m = load_model("bloom-176b")
    lay = dict(DENSE, tp=4, pp=12, dp=8, mbs=2, recompute="full")
    _, text = launch_settings(lay, m, Recipe(gbs=2048, seq_len=2048, stack="megatron-deepspeed"), fmt="megatron")
    last = text.splitlines()[-1]
    assert last.startswith("# ds_config.json: ")
    assert json.loads(last.removeprefix("# ds_config.json: ")) == {
        "train_batch_size": 2048, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 128,
        "zero_optimization": {"stage": 1}, "bf16": {"enabled": True}}


def test_the_2022_megatron_gets_its_environment_line_and_no_flag_it_lacks():
    """Megatron-LM of 2022 (e1c334b megatron/arguments.py) raises unless CUDA_DEVICE_MAX_CONNECTIONS is 1 and
    has no --swiglu, --disable-bias-linear, --untie-embeddings-and-output-weights, --position-embedding-type
    or --group-query-attention (its parser refuses them): Llama 3 70B's launch on the megatron-legacy stack
    had printed those and no environment line; the shape stays, the rest is said."""
    lay = dict(DENSE, tp=8, pp=4, dp=1, vp=5, sp=True)
    _, text = launch_settings(lay, load_model("llama3-70b"), Recipe(gbs=128, seq_len=8192, stack="megatron-legacy"),
                              fmt="megatron", gpu=H100)
    assert text.startswith("export CUDA_DEVICE_MAX_CONNECTIONS=1")
    flags = [ln for ln in text.splitlines() if not ln.lstrip().startswith(("#", "export"))]
    for absent in ("--swiglu", "--disable-bias-linear", "--untie-embeddings", "--position-embedding-type",
                   "--group-query-attention"):
        assert not any(absent in ln for ln in flags), absent
    assert "--num-layers 80 --hidden-size 8192 --ffn-hidden-size 28672 --num-attention-heads 64" in text
    assert "the megatron-legacy stack's Megatron has no --swiglu" in text
    # BLOOM on BigScience's fork: GPT's structure with ALiBi, nothing to say, no environment line
    bloom = dict(DENSE, tp=4, pp=12, dp=8)
    _, t2 = launch_settings(bloom, load_model("bloom-176b"), Recipe(gbs=2048, seq_len=2048, stack="megatron-deepspeed"),
                            fmt="megatron")
    assert "Megatron has no" not in t2 and "CUDA_DEVICE_MAX_CONNECTIONS" not in t2
