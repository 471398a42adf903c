"""The library prices what the CLI prices (costmodel.run_checks): predict_run and search apply the same
model recipe and refuse the same switches as `costmodel predict`, and search tries the stack's ZeRO stages."""
import pytest

from costmodel.errors import InputError
from costmodel.predict import predict_run
from costmodel.search import search
from costmodel.specs import cluster_profile, load_cluster, load_model
from costmodel.stacks import get_stack, stack_recipe

H100 = load_cluster("dgx-h100", 1)
P = cluster_profile(H100, None)
LAY = dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1, sp=False, overlap=True)


def test_predict_run_prices_gemma2_as_the_cli_does():
    """Gemma 2 on the megatron stack had been priced fused in the library (23% faster, 26 GiB lighter than
    `costmodel predict`, which runs it unfused as NeMo's Gemma2DotProductAttention does)."""
    g = load_model("tests/data/models/gemma-2-9b.json")
    r = stack_recipe(get_stack("megatron"), 64, 8192, "bf16", gpu=H100.gpu)
    assert r.flash_attention
    run = predict_run(g, r, H100, P, dict(LAY, tp=2, dp=4, sp=True))
    assert not run.recipe.flash_attention
    unfused = predict_run(g, stack_recipe(get_stack("megatron"), 64, 8192, "bf16", gpu=H100.gpu,
                                          flash_attention=False), H100, P, dict(LAY, tp=2, dp=4, sp=True))
    assert run.step_time_s == unfused.step_time_s and run.peak_mem_bytes == unfused.peak_mem_bytes


@pytest.mark.parametrize("switches,layout,where", [
    (dict(optimizer_offload=True, stack="deepspeed"), dict(zero=0), "--optimizer-offload"),
    (dict(main_grads_dtype="bf16"), dict(zero=0), "--main-grads-dtype"),
    (dict(recompute_modules="mlp"), dict(recompute="full"), "--recompute-modules")])
def test_predict_run_refuses_what_the_cli_refuses(switches, layout, where):
    st = switches.pop("stack", "megatron")
    r = stack_recipe(get_stack(st), 64, 4096, "bf16", gpu=H100.gpu, **switches)
    with pytest.raises(InputError) as e:
        predict_run(load_model("llama3-8b"), r, H100, P, dict(LAY, **layout))
    assert e.value.where == where


def test_the_library_refuses_flex_where_deepep_cannot_run():
    l40s = load_cluster("l40s-8x-pcie", 1)
    r = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", gpu=l40s.gpu, moe_dispatcher="flex")
    with pytest.raises(InputError, match="Hopper or Blackwell|NVLink"):
        search(load_model("mixtral-8x7b"), r, l40s, cluster_profile(l40s, None))


def test_search_tries_the_zero_stages_of_the_stack():
    """llm-foundry has ZeRO-2 (SHARD_GRAD_OP); search had tried ZeRO 0, 1 and 3 only unless told."""
    c = load_cluster("dgx-h100", 2)
    r = stack_recipe(get_stack("llm-foundry"), 128, 8192, "bf16", gpu=c.gpu)
    found = search(load_model("llama3-8b"), r, c, cluster_profile(c, None))
    assert 2 in set(found.ranked.layouts.zero.tolist())


def test_library_arguments_of_the_wrong_kind_are_named():
    """load_cluster(nodes=8.5) had priced 68 GPUs and then failed in search; a pin of no field raised
    KeyError, a pinned 'auto' ValueError."""
    import numpy as np
    for n in (8.5, "8", True):
        with pytest.raises(InputError, match="must be a whole number"):
            load_cluster("dgx-h100", n)
    assert load_cluster("dgx-h100", np.int64(2)).num_gpus == 16
    r = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", gpu=H100.gpu)
    for pins in ({"tpp": 2}, {"recompute": "auto"}):
        with pytest.raises(InputError, match="pins no layout field's value"):
            search(load_model("llama3-8b"), r, H100, P, pins=pins)


def test_flex_needs_the_experts_own_tp_times_ep_above_one():
    """Megatron-core's DeepEP dispatcher takes the experts' TP group (pg_collection.expt_tp) and asserts
    TP x EP > 1 on it: TP 2, EP 1, ETP 1 had been accepted, priced and recommended."""
    from costmodel.layouts import LayoutTable, validity
    m = load_model("mixtral-8x7b")
    r = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", gpu=H100.gpu, moe_dispatcher="flex")
    row = dict(LAY, tp=2, dp=4, sp=True, ep=1)
    code, msgs = validity(LayoutTable.from_rows([dict(row, etp=1)]), m, r, 8, 8)
    assert code[0] >= 0 and "needs ETP x EP > 1" in msgs[code[0]]
    assert validity(LayoutTable.from_rows([dict(row, etp=2)]), m, r, 8, 8)[0][0] < 0


def test_an_offloaded_deepspeed_search_tries_zero_2():
    """ZeRO-Offload's classic stage is 2; the search had tried 1 and 3 only under --optimizer-offload."""
    from costmodel.run_checks import search_zero_stages
    r = stack_recipe(get_stack("deepspeed"), 64, 4096, "bf16", optimizer_offload=True)
    assert search_zero_stages(r) == (1, 2, 3)
    assert search_zero_stages(stack_recipe(get_stack("megatron"), 64, 4096, "bf16", optimizer_offload=True)) == (1,)
