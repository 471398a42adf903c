"""The MoE router each family's modeling code builds, and the Megatron-core settings that train it."""
import dataclasses
import json
from pathlib import Path

import pytest

from costmodel.errors import InputError
from costmodel.launch import launch_settings
from costmodel.megatron_structure import router_args, router_notes
from costmodel.specs import load_model
from costmodel.specs.model_config import read_model_config
from costmodel.specs.router_config import RouterSpec
from costmodel.stacks import get_stack, stack_recipe

CATALOG = Path(__file__).resolve().parents[1] / "costmodel" / "catalog"
LAY = dict(tp=1, pp=1, dp=8, cp=1, ep=8, etp=1, vp=1, mbs=1, recompute="none", recompute_num_layers=0, zero=1,
           sp=False, overlap=True)


def _catalog(name: str) -> dict:
    return json.loads((CATALOG / f"{name}.json").read_text())


def test_each_family_routes_as_its_modeling_code_does():
    """DeepSeek-V3: sigmoid scores, an expert bias picking the top 8, renormalised and scaled by 2.5
    (modeling_deepseek_v3.py); Llama 4: the sigmoid of the picked logit on the expert's input
    (modeling_llama4.py); Grok-1: the softmax probabilities of the top 2 as they are (xai-org/grok-1
    model.py); Qwen3-30B-A3B (norm_topk_prob true), Mixtral and GPT-OSS: renormalised softmax weights,
    Megatron's default."""
    assert load_model("deepseek-v3").router == RouterSpec("sigmoid", True, 2.5, True, False)
    assert load_model("llama4-scout").router == RouterSpec("sigmoid", False, 1.0, False, True)
    assert load_model("grok1-314b").router == RouterSpec(renormalised=False)
    for name in ("qwen3-30b-a3b", "mixtral-8x7b", "gpt-oss-120b", "llama3-8b"):
        assert load_model(name).router == RouterSpec(), name


def test_unnormalised_and_scaled_routers_are_read_from_their_keys():
    """Qwen-MoE's norm_topk_prob defaults to false (Qwen1.5-MoE, Qwen2-MoE); DeepSeek-V2 scales the
    unrenormalised weights by routed_scaling_factor (16 in its published file); DBRX renormalises by the
    p-norm of moe_normalize_expert_weights, null for none."""
    qwen = {k: v for k, v in _catalog("qwen3-30b-a3b").items() if k != "norm_topk_prob"}
    assert read_model_config(qwen, Path("q.json")).router == RouterSpec(renormalised=False)
    v2 = dict(_catalog("deepseek-v3"), model_type="deepseek_v2", scoring_func="softmax", norm_topk_prob=False,
              routed_scaling_factor=16.0, topk_method="group_limited_greedy", num_nextn_predict_layers=0)
    assert read_model_config(v2, Path("v2.json")).router == RouterSpec(renormalised=False, topk_scaling=16.0)
    dbrx = {"model_type": "dbrx", "d_model": 6144, "n_heads": 48, "n_layers": 40, "vocab_size": 100352,
            "max_seq_len": 32768, "tie_word_embeddings": False,
            "attn_config": {"kv_n_heads": 8},
            "ffn_config": {"ffn_hidden_size": 10752, "moe_num_experts": 16, "moe_top_k": 4}}
    assert read_model_config(dbrx, Path("dbrx.json")).router == RouterSpec()
    unnormed = dict(dbrx, ffn_config=dict(dbrx["ffn_config"], moe_normalize_expert_weights=None))
    assert read_model_config(unnormed, Path("dbrx.json")).router == RouterSpec(renormalised=False)
    with pytest.raises(InputError, match="moe_normalize_expert_weights"):
        read_model_config(dict(dbrx, ffn_config=dict(dbrx["ffn_config"], moe_normalize_expert_weights=2.0)), Path("d.json"))
    with pytest.raises(InputError, match="says how its router weighs the experts with its own keys") as e:
        read_model_config(dict(_catalog("qwen3-30b-a3b"), _router_renormalised=False), Path("q.json"))
    assert e.value.field == "_router_renormalised"
    with pytest.raises(InputError, match="scoring_func"):
        read_model_config(dict(_catalog("deepseek-v3"), scoring_func="tanh"), Path("v3.json"))


def test_megatron_arguments_train_the_router_the_model_has():
    """Megatron-core's router is a softmax over the top-k logits unless told: DeepSeek-V3's arguments had
    launched it with softmax weights, no expert bias and no 2.5 scaling, and Llama 4 Scout's had launched a
    top-1 softmax router, which TransformerConfig refuses ('Please use --moe-router-pre-softmax when topk
    is 1')."""
    r = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", moe_dispatcher="alltoall")
    v3 = launch_settings(LAY, load_model("deepseek-v3"), r, fmt="megatron")[1]
    for arg in ("--moe-router-score-function sigmoid", "--moe-router-topk-scaling-factor 2.5",
                "--moe-router-enable-expert-bias"):
        assert arg in v3, arg
    scout = router_args(load_model("llama4-scout"))
    assert scout == ["--moe-router-score-function sigmoid", "--moe-apply-probs-on-input"]
    assert router_args(load_model("grok1-314b")) == ["--moe-router-pre-softmax"]
    assert router_args(load_model("mixtral-8x7b")) == router_args(load_model("llama3-8b")) == []


@pytest.mark.parametrize("name", sorted(p.stem for p in CATALOG.glob("*.json")))
def test_every_catalog_router_passes_megatrons_own_checks(name):
    """TransformerConfig.__post_init__ (megatron/core/transformer/transformer_config.py) refuses a top-1
    router with a softmax after the top-k and an expert bias without a sigmoid score: no catalog model's
    arguments may trip either."""
    m = load_model(name)
    a = router_args(m)
    if m.is_moe and m.topk == 1 and "--moe-router-score-function sigmoid" not in a:
        assert "--moe-router-pre-softmax" in a
    if "--moe-router-enable-expert-bias" in a:
        assert "--moe-router-score-function sigmoid" in a


def test_what_megatron_cannot_reproduce_is_said_at_the_end():
    """A top-1 router renormalised to weight 1 runs pre-softmax in Megatron (its weight becomes p): the
    arguments say so in the comment that ends them, not silently."""
    r = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", moe_dispatcher="alltoall")
    top1 = dataclasses.replace(load_model("mixtral-8x7b"), topk=1)
    assert router_args(top1) == ["--moe-router-pre-softmax"]
    assert "renormalises it to 1" in router_notes(top1)[0]
    text = launch_settings(LAY, top1, r, fmt="megatron")[1]
    assert text.rstrip().splitlines()[-1].lstrip().startswith("# ") and "renormalises it to 1" in text
    sig = dataclasses.replace(load_model("deepseek-v3"), router=RouterSpec("sigmoid", False, 1.0, True, False))
    assert "does not" in router_notes(sig)[0]
    assert router_notes(load_model("deepseek-v3")) == router_notes(load_model("llama3-8b")) == []


def test_llama4_nope_layers_and_l2_qk_norm_are_read_and_launched():
    """Llama 4 Scout: every fourth layer applies no rotary embedding and the others an L2 norm of Q and K
    (HF Llama4TextConfig no_rope_layers, use_qk_norm; modeling_llama4.py).  Megatron-LM defaults to RoPE on
    every layer and no Q/K norm: its arguments say --no-rope-freq 4 --qk-l2-norm, and a comment that
    Megatron-LM's norm covers the NoPE layers too; the NoPE layers' rotary kernels are not priced."""
    from costmodel.compute import compute_times
    from costmodel.layouts import LayoutTable
    from costmodel.specs import load_cluster, load_profile
    m = load_model("llama4-scout")
    assert m.nope_layer_indices == tuple(range(3, 48, 4)) and m.qk_l2_norm
    a = router_args(m)
    r = stack_recipe(get_stack("megatron"), 64, 8192, "bf16", moe_dispatcher="alltoall")
    text = launch_settings(LAY, m, r, fmt="megatron")[1]
    assert "--no-rope-freq 4 " in text and "--qk-l2-norm " in text and a[-1] == "--moe-apply-probs-on-input"
    assert "--qk-l2-norm normalises Q and K on every layer, llama4-scout on its RoPE layers only" in text
    plain = load_model("llama3-8b")
    assert plain.nope_layer_indices == () and not plain.qk_l2_norm and "--no-rope-freq" not in \
        launch_settings(dict(LAY, ep=1), plain, r, fmt="megatron")[1]
    c = load_cluster("dgx-h100")
    p, t = load_profile(c.gpu.key), LayoutTable.from_rows([dict(LAY, ep=1)])
    every = dataclasses.replace(m, nope_layer_indices=())
    ew, ew_all = compute_times(m, r, c, p, t).layer_ew_fwd_s, compute_times(every, r, c, p, t).layer_ew_fwd_s
    assert float(ew[0]) < float(ew_all[0])
