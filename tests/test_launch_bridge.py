"""--format bridge: a layout as Megatron-Bridge ConfigContainer overrides, which the Bridge reader of
predict --config reads back as the layout and recipe they came from (a user had been given the settings
in words for a Bridge file, and NeMo 2 overrides no Bridge file has)."""
import pytest
import yaml

from costmodel.launch import launch_settings
from costmodel.launch_bridge import bridge_overrides
from costmodel.run_config import read_run_config
from costmodel.specs import load_model
from costmodel.stacks import STACKS, stack_recipe

_BASE = dict(cp=1, etp=None, mbs=1, sp=True, zero=1, recompute="none", recompute_num_layers=0, overlap=True)


@pytest.mark.parametrize("name, lay, switches", [
    # 126 layers + embedding + loss = PP 8 x VP 8 x 2: the accounted split, which Bridge runs only when told
    ("llama3.1-405b", dict(tp=8, pp=8, vp=8, dp=4, ep=1, recompute="full", recompute_num_layers=2),
     dict(precision="fp8", fp8_recipe="tensorwise", main_grads_dtype="bf16")),
    ("llama3-70b", dict(tp=4, pp=1, vp=1, dp=16, ep=1, zero=3, recompute="selective"), dict(precision="bf16")),
    ("llama3-8b", dict(tp=2, pp=2, vp=1, dp=16, ep=1, dp_replicate=4), dict(precision="bf16")),
    ("qwen3-30b-a3b", dict(tp=1, pp=2, vp=3, dp=8, ep=8, sp=False),
     dict(precision="bf16", moe_dispatcher="flex", moe_ep_overlap=True)),
])
def test_bridge_overrides_read_back_as_the_layout_they_came_from(tmp_path, name, lay, switches):
    m = load_model(name)
    precision = switches.pop("precision")
    r = stack_recipe(STACKS["nemo"], 256, 4096, precision, **switches)
    layout = dict(_BASE, **lay)
    text = bridge_overrides(layout, m, r)
    doc = yaml.safe_load(text)
    assert set(doc) == {"model", "train", "dataset", "optimizer", "ddp", "comm_overlap", "mixed_precision"}
    # Bridge's own dataset field (GPTDatasetConfig.seq_length, copied over Megatron-core's sequence_length at
    # finalize) and a CommOverlapConfig instantiated whole (a recipe may leave comm_overlap None)
    assert doc["dataset"] == {"seq_length": r.seq_len}
    assert doc["comm_overlap"]["_target_"] == "megatron.bridge.training.comm_overlap.CommOverlapConfig"
    f = tmp_path / "overrides.yaml"
    f.write_text(text)
    cfg = read_run_config(f)
    for k in ("tp", "pp", "cp", "vp", "mbs", "zero", "recompute"):
        assert cfg.layout[k] == layout[k], k
    assert cfg.layout.get("dp_replicate", 1) == layout.get("dp_replicate", 1)
    assert cfg.layout["sp"] == layout["sp"]
    for k in ("gbs", "seq_len", "precision", "cross_entropy", "dp_overlap"):
        assert cfg.recipe[k] == getattr(r, k), k
    # TP-comm overlap runs with SP at TP > 1 only: off where it has nothing to do
    assert cfg.recipe["tp_comm_overlap"] == (r.tp_comm_overlap and layout["sp"] and layout["tp"] > 1)
    if m.is_moe:
        assert cfg.layout["ep"] == layout["ep"] and cfg.recipe["moe_dispatcher"] == "flex"
        assert doc["model"]["moe_flex_dispatcher_backend"] == "deepep"
        # the EP overlap in comm_overlap, whose setup writes it over the model's (Bridge comm_overlap.py)
        assert doc["comm_overlap"]["overlap_moe_expert_parallel_comm"] is True
        assert doc["comm_overlap"]["delay_wgrad_compute"] is True and "overlap_moe_expert_parallel_comm" not in doc["model"]
        assert cfg.recipe["moe_ep_overlap"] is True
        assert doc["model"]["moe_shared_expert_overlap"] is False       # Megatron-core refuses both at once
    if name == "llama3.1-405b":
        assert doc["model"]["account_for_embedding_in_pipeline_split"] is True and cfg.split_without_embedding is None
        assert cfg.recipe["fp8_recipe"] == "tensorwise" and cfg.recipe["main_grads_dtype"] == "bf16"
        # NeMo's fp8 parameters, priced with the distributed optimizer, and read back as priced
        assert doc["mixed_precision"]["fp8_param_gather"] is (layout["zero"] in (1, 2))
        assert cfg.recipe["fp8_param_gather"] is (layout["zero"] in (1, 2))
        assert cfg.layout["recompute_num_layers"] == 2
    # every precision and optimizer-dtype field set, so none of a recipe's survives a merge
    assert {"fp8", "fp4", "fp8_param_gather", "fp4_param_gather"} <= set(doc["mixed_precision"])
    assert {"use_precision_aware_optimizer", "main_grads_dtype", "exp_avg_dtype", "exp_avg_sq_dtype"} <= set(doc["optimizer"])
    if layout["zero"] == 3:
        assert doc["ddp"]["use_megatron_fsdp"] is True


def test_format_bridge_is_a_format_and_a_bridge_config_gets_its_own_keys():
    m = load_model("llama3-8b")
    r = stack_recipe(STACKS["nemo"], 128, 8192, "bf16")
    title, text = launch_settings(dict(_BASE, tp=2, pp=1, vp=1, dp=8, ep=1), m, r, fmt="bridge")
    assert title.startswith("Megatron-Bridge") and "tensor_model_parallel_size: 2" in text


@pytest.mark.parametrize("stack, zero, key", [("llm-foundry", 2, "fsdp_config.sharding_strategy: SHARD_GRAD_OP"),
                                              ("llm-foundry", 3, "fsdp_config.sharding_strategy: FULL_SHARD"),
                                              ("deepspeed", 2, "zero_optimization.stage: 2")])
def test_the_settings_of_a_stack_without_a_format_name_its_own_sharding_key(stack, zero, key):
    """llm-foundry's settings had said 'DP with ZeRO-2', not the fsdp_config value to write."""
    m = load_model("llama3-8b")
    r = stack_recipe(STACKS[stack], 64, 4096, "bf16")
    _, text = launch_settings(dict(_BASE, tp=1, pp=1, vp=1, dp=8, ep=1, zero=zero, sp=False), m, r, fmt="settings")
    assert key in text


def test_the_flex_dispatcher_s_backend_is_one_its_framework_runs_on_the_gpu():
    """Megatron-Bridge refuses DeepEP on a compute-capability-10 device not named B200 or B300
    (flex_dispatcher_backend.py validate_flex_dispatcher_backend): on GB200 and GB300 every format had
    printed moe_flex_dispatcher_backend deepep, a launch stopped at start-up; they print hybridep, as
    Bridge's own GB200 recipes do, and DeepEP stays on Hopper and the B200/B300 boards."""
    from costmodel.specs import load_gpu
    m = load_model("qwen3-30b-a3b")
    r = stack_recipe(STACKS["megatron"], 256, 4096, "bf16", moe_dispatcher="flex", moe_grouped_gemm=True)
    lay = dict(tp=1, pp=1, dp=16, cp=1, ep=16, etp=1, vp=1, mbs=1, recompute="none", recompute_num_layers=0, zero=1,
               sp=False, overlap=True)
    for gpu, want in (("gb200-186gb", "hybridep"), ("gb300-288gb", "hybridep"), ("b200-sxm-180gb", "deepep"),
                      ("h100-sxm-80gb", "deepep")):
        g = load_gpu(gpu)
        meg = launch_settings(lay, m, r, fmt="megatron", gpu=g)[1]
        assert f"--moe-flex-dispatcher-backend {want}" in meg, gpu
        # NeMo 2 turns DeepEP on as its DeepEPCallback does (moe_enable_deepep), which its containers'
        # Megatron-core knows; HybridEP by the newer field
        nemo = launch_settings(lay, m, r, fmt="nemo", gpu=g)[1]
        assert ("moe_enable_deepep = True" in nemo) if want == "deepep" else \
            (f"moe_flex_dispatcher_backend = {want!r}" in nemo and "moe_enable_deepep" not in nemo)
        doc = yaml.safe_load(launch_settings(lay, m, r, fmt="bridge", gpu=g)[1])
        assert doc["model"]["moe_flex_dispatcher_backend"] == want


def test_the_bridge_mixed_precision_section_sets_the_dtypes_its_instantiation_would_clear():
    """Megatron-Bridge instantiates a _target_ mapping anew and copies every MixedPrecisionConfig field over
    the model's (update_config_with_precision_overrides): the printed section had no params_dtype or
    pipeline_dtype (None there), which would have replaced the model's bf16 parameters; it sets them as
    bf16_mixed does, in Bridge's YAML form of a torch dtype."""
    m = load_model("llama3-8b")
    lay = dict(tp=2, pp=2, dp=4, cp=1, ep=1, vp=1, mbs=1, recompute="none", recompute_num_layers=0, zero=1, sp=True,
               overlap=True)
    for prec, dt in (("bf16", "torch.bfloat16"), ("fp8", "torch.bfloat16"), ("fp16", "torch.float16")):
        mp = yaml.safe_load(bridge_overrides(lay, m, stack_recipe(STACKS["megatron"], 64, 4096, prec)))["mixed_precision"]
        assert mp["params_dtype"] == mp["pipeline_dtype"] == {"_target_": dt, "_call_": False}, prec
        assert mp["autocast_enabled"] is False
        # delayed scaling keeps bf16_with_fp8_delayed_scaling_mixed's amax history, not the class's 1 / most_recent
        assert (mp.get("fp8_amax_history_len"), mp.get("fp8_amax_compute_algo")) == (
            (1024, "max") if prec == "fp8" else (None, None))
