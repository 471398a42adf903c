"""The MoE router's and dispatch preprocess's small kernels (costmodel.moe.router_kernels): NVIDIA's
Nsight Systems counts (72 router kernels a layer's forward, 31 fused, 17 router + preprocess under
DeepEP) and the source counts around them."""
import json
import subprocess
import sys

import pytest

from costmodel.errors import InputError
from costmodel.moe import check_moe_recipe, router_kernels
from costmodel.published_row import row_switches
from costmodel.specs import Recipe, load_cluster, load_model, load_profile


@pytest.mark.parametrize("dispatcher, fused, counts", [("alltoall", False, (72 + 11, 18)), ("alltoall", True, (31 + 11, 9)),
                                                      ("allgather", True, (31 + 10, 9)), ("flex", True, (17, 9)),
                                                      ("flex", False, (17 + 72 - 31, 18))])
def test_router_kernel_counts_per_dispatcher_and_fusion(dispatcher, fused, counts):
    r = Recipe(gbs=8, seq_len=4096, stack="megatron", moe_dispatcher=dispatcher, moe_router_fusion=fused)
    assert router_kernels(r) == counts
    # stacks whose routers nobody counted price none (their copies and GEMMs still priced)
    assert router_kernels(Recipe(gbs=8, seq_len=4096, stack="torchtitan", moe_dispatcher=dispatcher)) == (0, 0)


def test_fusing_the_router_saves_its_kernels_launch_time_each_layer_and_micro_batch():
    """Qwen3-30B-A3B on 16 H100 (48 MoE layers, 64 micro-batches a step, no pipeline): unfused under the
    flex dispatcher the router runs 41 more forward and 9 more backward kernels a layer, each one
    kernel launch (the H100 profile's 5.299 us): 50 x 5.299e-6 x 48 x 64 = 0.814 s of compute a step."""
    args = ["--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "2", "--tp", "1", "--pp", "1", "--ep", "16",
            "--gbs", "1024", "--mbs", "1", "--seq-len", "4096", "--stack", "nemo", "--recompute", "none",
            "--moe-dispatcher", "flex", "--json"]
    out = {}
    for flag in ("--moe-router-fusion", "--no-moe-router-fusion"):
        p = subprocess.run([sys.executable, "-m", "costmodel.cli", "predict", *args, flag], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        out[flag] = json.loads(p.stdout)
    launch = load_profile("h100-sxm-80gb").gemm["bf16"].launch_s
    gap = out["--no-moe-router-fusion"]["breakdown"]["compute_s"] - out["--moe-router-fusion"]["breakdown"]["compute_s"]
    assert launch == pytest.approx(5.299e-6)
    assert gap == pytest.approx(50 * launch * 48 * 64, rel=1e-9)
    assert out["--moe-router-fusion"]["recipe"]["moe_router_fusion"] is True


def test_the_fused_router_is_megatron_core_s_and_a_row_s_notes_name_it():
    m, gpu = load_model("mixtral-8x7b"), load_cluster("dgx-h100").gpu
    with pytest.raises(InputError, match="fused router is Megatron-core's") as e:
        check_moe_recipe(m, Recipe(gbs=8, seq_len=4096, stack="torchtitan", moe_router_fusion=True), gpu)
    assert e.value.where == "--moe-router-fusion"
    assert row_switches({"notes": "--moe-permute-fusion; --moe-router-fusion; --use-distributed-optimizer"})[
        "moe_router_fusion"] is True
    assert "moe_router_fusion" not in row_switches({"notes": "router fusion on"})


def test_the_settings_format_says_the_router_is_fused():
    from costmodel.launch_generic import generic_settings
    lay = dict(tp=1, pp=1, dp=8, cp=1, ep=8, etp=1, vp=1, mbs=1, sp=False, zero=1, recompute="none",
               recompute_num_layers=0, overlap=True, dp_replicate=1)
    m = load_model("mixtral-8x7b")
    on = generic_settings(lay, m, Recipe(gbs=64, seq_len=4096, moe_router_fusion=True))
    off = generic_settings(lay, m, Recipe(gbs=64, seq_len=4096))
    assert "fused router kernels" in on and "fused router kernels" not in off
