"""Low-precision GEMM formats (costmodel/formats.py): their bytes, their time on Blackwell, their memory,
the GPUs and stacks that run them, and the flags a launch needs."""
from pathlib import Path

import pytest

from conftest import layout
from costmodel.compute import compute_times
from costmodel.errors import InputError
from costmodel.formats import FORMATS, gemm_format
from costmodel.launch import megatron_args, nemo_overrides
from costmodel.memory import activation_bytes_per_layer
from costmodel.specs import Recipe, load_cluster, load_gpu, load_model, load_profile
from costmodel.stacks import get_stack, stack_recipe


def test_block_scaled_bytes_per_element():
    """MXFP8: 1 byte + one E8M0 scale per 32; NVFP4: half a byte + one E4M3 scale per 16.  Quantizing
    reads the bf16 tensor and writes row- and column-wise copies; NVFP4 reads it once more for its
    per-tensor amax."""
    assert (FORMATS["mxfp8"].operand_bytes, FORMATS["mxfp8"].cast_bytes) == (1 + 1 / 32, 2 + 2 * (1 + 1 / 32))
    assert (FORMATS["nvfp4"].operand_bytes, FORMATS["nvfp4"].cast_bytes) == (0.5 + 1 / 16, 4 + 2 * (0.5 + 1 / 16))
    assert [gemm_format(p).dtype for p in ("bf16", "fp8", "mxfp8", "nvfp4")] == ["bf16", "fp8", "fp8", "fp4"]
    assert not gemm_format("bf16").low and gemm_format("nvfp4").low
    with pytest.raises(InputError, match="--precision"):
        gemm_format("fp6")


def _times(precision):
    m, c = load_model("llama3-70b"), load_cluster("dgx-b200")
    p = load_profile(c.gpu.key)
    t = layout(tp=4, dp=2)
    return compute_times(m, Recipe(gbs=64, seq_len=8192, precision=precision), c, p,
                         t.view(compute_times.layout_fields)), m, c, p


def test_nvfp4_gemms_run_at_their_measured_rate_and_pay_more_casts():
    """B200: the FP4 peak is twice the FP8 one, but the FP4 GEMM's own fit (vLLM's CUTLASS NVFP4
    GEMM: at most 52% of the FP4 peak, where FP8 reaches 76% of its) makes the layer's GEMMs take
    about 0.73 of the FP8 time, the ratio of the two fits' best rates (launches, waves and the
    operands' HBM reads aside), not half; MXFP8's
    GEMMs run at the FP8 rate and its quantization moves (2 + 2 x 33/32) - 4 = 1/16 byte more per
    element of the four forward GEMM inputs than fp8's cast-transpose."""
    f8, m, c, p = _times("fp8")
    mx, nv = _times("mxfp8")[0], _times("nvfp4")[0]
    best = (p.gemm["fp8"].eta_max * c.gpu.peak_flops["fp8"]) / (p.gemm["fp4"].eta_max * c.gpu.peak_flops["fp4"])
    assert 0.70 < best < 0.76
    assert nv.layer_gemm_fwd_s[0] / f8.layer_gemm_fwd_s[0] == pytest.approx(best, rel=0.05)
    assert mx.layer_gemm_fwd_s[0] == pytest.approx(f8.layer_gemm_fwd_s[0], rel=0.01)
    tok, tp = 8192, 4
    in_f = tok * (m.hidden + m.q_dim / tp + m.hidden + m.ffn_hidden / tp)
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    assert mx.layer_ew_fwd_s[0] - f8.layer_ew_fwd_s[0] == pytest.approx((1 / 16) * in_f / bw, rel=1e-6)
    assert nv.logits_fwd_s[0] == pytest.approx(f8.logits_fwd_s[0], rel=1e-9)     # the output layer stays 16-bit


def test_nvfp4_hadamard_transforms_hide_under_the_cast_bytes_on_blackwell():
    """NVFP4's 16x16 RHT on the weight-gradient inputs: 2 passes x 16 MACs = 64 FLOPs per element on
    the 16-bit tensor cores, inside the amax and cast kernels (Transformer Engine).  On B200 the
    casts' bytes (5.125 per element) take longer than the FLOPs at 2.25 PFLOP/s, so the layer's
    memory-bound time is the bytes'; with a 16-bit peak 1000x lower the FLOPs set it."""
    import dataclasses
    import numpy as np
    assert FORMATS["nvfp4"].rht_flops == 64 and FORMATS["mxfp8"].rht_flops == 0 == FORMATS["fp8"].rht_flops
    nv, m, c, p = _times("nvfp4")
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    assert 64 / c.gpu.peak_flops["bf16"] < FORMATS["nvfp4"].cast_bytes / bw
    slow = dataclasses.replace(c, gpu=dataclasses.replace(
        c.gpu, peak_flops={k: v / 1000 if k in ("bf16", "fp16") else v for k, v in c.gpu.peak_flops.items()}))
    t = layout(tp=4, dp=2).view(compute_times.layout_fields)
    nv_slow = compute_times(m, Recipe(gbs=64, seq_len=8192, precision="nvfp4"), slow, p, t)
    tok, tp = 8192, 4
    in_f = tok * (m.hidden + m.q_dim / tp + m.hidden + m.ffn_hidden / tp)
    assert nv_slow.layer_ew_fwd_s[0] - nv.layer_ew_fwd_s[0] > 0.9 * 64 * in_f / (c.gpu.peak_flops["bf16"] / 1000)
    assert np.isfinite(nv_slow.layer_ew_fwd_s[0])


def test_transformer_engine_keeps_smaller_copies_under_nvfp4():
    """A TE linear layer keeps its wgrad input quantized: at 0.5625 bytes per element under NVFP4 the
    stored activations are smaller than under fp8 (1 byte), which are smaller than bf16's."""
    m = load_model("llama3-70b")
    t = layout(tp=4, dp=2, recompute="selective")
    got = [float(activation_bytes_per_layer(m, stack_recipe(get_stack("megatron"), 64, 8192, pr), t)[0])
           for pr in ("bf16", "fp8", "nvfp4")]
    assert got[0] > got[1] > got[2]


@pytest.mark.parametrize("precision,gpu,stack,why", [
    ("mxfp8", "h100-sxm-80gb", "megatron", "runs on blackwell tensor cores; H100-SXM-80GB is hopper"),
    ("nvfp4", "a100-sxm-80gb", "megatron", "runs on blackwell tensor cores; A100-SXM-80GB is ampere"),
    ("fp8", "a100-sxm-80gb", "megatron", "fp8 tensor cores, which A100-SXM-80GB .ampere. lacks.*bf16 or fp16"),
    ("nvfp4", "b200-sxm-180gb", "torchtitan", "Transformer Engine's recipe"),
    ("mxfp8", "b200-sxm-180gb", "deepspeed", "Transformer Engine's recipe")])
def test_formats_only_where_they_run(precision, gpu, stack, why):
    with pytest.raises(InputError, match=why) as e:
        stack_recipe(get_stack(stack), 64, 4096, precision, gpu=load_gpu(gpu))
    assert e.value.where == "--precision"
    with pytest.raises(InputError, match="delayed fp8 recipe only"):
        Recipe(gbs=64, seq_len=4096, precision="nvfp4", optimizer_offload=True)


def test_launch_flags_name_the_recipe():
    m = load_model("llama3-8b")
    lay = dict(tp=1, pp=1, dp=8, cp=1, ep=1, etp=1, vp=1, mbs=1, recompute="none", recompute_num_layers=0,
               zero=1, sp=False, overlap=True)
    assert "--fp8-format e4m3 --fp8-recipe mxfp8" in megatron_args(lay, m, Recipe(gbs=8, seq_len=4096, precision="mxfp8"))
    assert "--fp4-format e2m1" in megatron_args(lay, m, Recipe(gbs=8, seq_len=4096, precision="nvfp4"))
    # NeMo 2 has no NVFP4 recipe function (that one is Megatron-Bridge's): MegatronMixedPrecision's fp4 arguments
    nv = nemo_overrides(lay, m, Recipe(gbs=8, seq_len=4096, precision="nvfp4", stack="nemo"))
    assert "bf16_with_nvfp4_mixed" not in nv and "recipe.trainer.plugins = bf16_mixed()" in nv
    assert "recipe.trainer.plugins.fp4 = 'e2m1'" in nv and "recipe.trainer.plugins.fp4_recipe = 'nvfp4'" in nv
    # the cross-entropy the prediction assumed: Megatron's fused loss by its flag, one it lacks by a note
    ce = {c: Recipe(gbs=8, seq_len=4096, cross_entropy=c) for c in ("megatron", "megatron-fused", "fused", "eager",
                                                                    "chunked")}
    assert "--cross-entropy-loss-fusion --cross-entropy-fusion-impl te" in megatron_args(lay, m, ce["fused"])
    assert "--cross-entropy-loss-fusion" in megatron_args(lay, m, ce["megatron-fused"])
    assert "fusion-impl" not in megatron_args(lay, m, ce["megatron-fused"])
    assert "cross-entropy" not in megatron_args(lay, m, ce["megatron"])
    assert megatron_args(lay, m, ce["eager"]).endswith("# Megatron-core has no eager cross-entropy (its vocab-parallel "
                                                        "loss, or --cross-entropy-loss-fusion): the prediction assumed "
                                                        "eager, these arguments run the vocab-parallel one")
    nemo = {c: nemo_overrides(lay, m, Recipe(gbs=8, seq_len=4096, cross_entropy=c, stack="nemo")) for c in ce}
    assert "recipe.model.config.cross_entropy_loss_fusion = True" in nemo["fused"]
    assert "recipe.model.config.cross_entropy_fusion_impl = 'te'" in nemo["fused"]
    assert "recipe.model.config.cross_entropy_loss_fusion = True" in nemo["megatron-fused"]
    # set either way: NeMo's DeepSeek-V3 recipe presets 'te'
    assert "recipe.model.config.cross_entropy_fusion_impl = 'native'" in nemo["megatron-fused"]
    assert "recipe.model.config.cross_entropy_loss_fusion = False" in nemo["megatron"]
    assert "# Megatron-core has no chunked cross-entropy" in nemo["chunked"]


def test_logs_and_configs_name_the_block_scaled_recipes():
    """A Megatron argument dump with fp8 + fp8_recipe mxfp8 is an MXFP8 run, one with fp4 set an NVFP4
    run; Megatron-Bridge's mixed_precision recipe names and mappings likewise."""
    from costmodel.readers.training_logs.dumps import _layout
    from costmodel.run_config import RunConfig
    from costmodel.run_config_bridge import _bridge_precision
    assert _layout({"fp8": "e4m3", "fp8_recipe": "mxfp8"})["precision"] == "mxfp8"
    assert _layout({"fp8": "hybrid", "fp8_recipe": "delayed"})["precision"] == "fp8"
    assert _layout({"fp8": True, "bf16": True})["precision"] == "fp8"
    # a value Megatron never writes is no precision at all, not fp8 and not the bf16 beside it
    assert _layout({"fp8": "banana", "bf16": True})["precision"] is None
    assert _layout({"fp8": "None", "bf16": True})["precision"] == "bf16"
    assert _layout({"fp4": "e2m1", "bf16": True})["precision"] == "nvfp4"
    for mp, want in (("bf16_with_mxfp8_mixed", "mxfp8"), ("bf16_with_nvfp4_mixed", "nvfp4"),
                     ({"fp8": "e4m3", "fp8_recipe": "mxfp8"}, "mxfp8"), ({"fp4": "e2m1"}, "nvfp4")):
        cfg = RunConfig()
        _bridge_precision(mp, "x.yaml", cfg)
        assert cfg.recipe["precision"] == want


def test_bf16_edge_layers_blend_the_slowest_stage():
    """--bf16-edge-layers N (Megatron --first-last-layers-bf16): with PP 2 over 80 layers an edge stage
    holds N of its 40 layers in BF16; with every layer of the stage in BF16 the step is the BF16
    recipe's (the output layer is 16-bit in both); PP 1 holds 2N of 80."""
    from costmodel.compute import edge_layer_share
    from costmodel.predict import predict_table
    m, c = load_model("llama3-70b"), load_cluster("dgx-b200", nodes=8)
    p = load_profile(c.gpu.key)
    t = layout(tp=4, pp=2, dp=8, recompute="selective")
    r = lambda pr, n=0: stack_recipe(get_stack("megatron"), 256, 8192, pr, bf16_edge_layers=n)  # noqa: E731
    assert float(edge_layer_share(m, r("nvfp4", 2), t)[0]) == 2 / 40
    assert float(edge_layer_share(m, r("nvfp4", 2), layout(tp=4, dp=16))[0]) == 4 / 80
    step = lambda rec: float(predict_table(m, rec, c, p, t).step_time_s[0])  # noqa: E731
    s0, s2, s40, s16 = step(r("nvfp4")), step(r("nvfp4", 2)), step(r("nvfp4", 40)), step(r("bf16"))
    assert s0 < s2 < s40 and s40 == pytest.approx(s16, rel=1e-3)
    with pytest.raises(InputError, match="--bf16-edge-layers"):
        r("bf16", 2)
    with pytest.raises(InputError, match="whole number"):
        r("fp8", 1.5)
    lay = dict(tp=4, pp=2, dp=8, cp=1, ep=1, etp=1, vp=1, mbs=1, recompute="selective", recompute_num_layers=0,
               zero=1, sp=True, overlap=True)
    assert "--num-layers-at-start-in-bf16 2 --num-layers-at-end-in-bf16 2" in megatron_args(lay, m, r("nvfp4", 2))


def test_a_low_precision_gemm_flop_draws_power_for_its_share_of_the_tensor_cores():
    """The power model counts utilisation in 16-bit FLOPs: an fp8 GEMM FLOP holds the tensor cores for
    half the time of a bf16 one on B200 (2,250 vs 4,500 TFLOP/s), an fp4 FLOP a quarter; attention
    FLOPs stay 16-bit.  Llama 3 70B, TP 4, 8,192 tokens: the layer's forward FLOPs split into the
    linear GEMMs (2 x 8192 x the layer's matmul parameters / 4) and attention; the GEMM class runs at
    its FLOPs over the format's peak and its forward time, attention at its FLOPs over the 16-bit
    peak and its forward time."""
    from costmodel.compute import layer_matmul_flops_per_token
    from costmodel.energy import layer_blocks
    from costmodel.predict import predict_table
    m, c = load_model("llama3-70b"), load_cluster("dgx-b200", nodes=8)
    p = load_profile(c.gpu.key)
    t = layout(tp=4, pp=2, dp=8, recompute="none")
    peak16 = c.gpu.peak_flops["bf16"]
    for pr, ratio in (("fp8", 0.5), ("nvfp4", 0.25), ("bf16", 1.0)):
        r = stack_recipe(get_stack("megatron"), 256, 8192, pr)
        ct = predict_table(m, r, c, p, t).terms.compute
        f = float(ct.layer_flops_fwd[0])
        gemm = 8192 * layer_matmul_flops_per_token(m) / 4
        classes = layer_blocks(m, r, c, p, predict_table(m, r, c, p, t).terms)["layer"]["classes"]
        u_gemm = gemm * ratio / (peak16 * float(ct.layer_gemm_fwd_s[0]))
        assert float(classes["gemm"][1]["flop"][0]) == pytest.approx(min(u_gemm, 1.0), rel=1e-9)
        u_attn = (f - gemm) / (peak16 * float(ct.layer_attn_fwd_s[0]))
        assert float(classes["attention"][1]["flop"][0]) == pytest.approx(u_attn, rel=1e-9)
        assert 0.3 < u_gemm < 0.9 and 0.1 < u_attn < 0.9


def _te_h200nvl_pass_ms():
    """(autocast, pre-quantized) FP8CurrentScaling ms per pass of TE's H200 NVL benchmark file."""
    import re
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "hardware" / "profiles" / "data"
            / "te_gemm_profiling_h200nvl_fp8_quantization.md").read_text()
    auto, pre = text.split("Pre-quantized")[:2]
    get = lambda block, pas: float(re.search(rf"^{pas}:\s+[\d.]+\s+([\d.]+)", block, re.M).group(1))  # noqa: E731
    return {pas: (get(auto, pas), get(pre, pas)) for pas in ("Fprop", "Dgrad", "Wgrad")}


def test_current_scaling_reads_each_cast_tensor_once_more_as_te_measures_on_h200_nvl():
    """TE's GEMM benchmark (hidden 4096, FFN 16384, M = 15,872 tokens) times each GEMM shape as a
    te.Linear forward under Float8CurrentScaling (input and weight quantized on every call) and
    pre-quantized.  The difference per pass is the quantization: input-side operands at 6 bytes per
    element (amax read 2, cast read 2, row- and column-wise writes 1 + 1), weights at 5 (no column-wise
    copy: the benchmark's input needs no gradient).  Those bytes move at 82-84 % of the H200 NVL's
    4.8 TB/s, where the H200 profile's memory-bound kernels run (0.85); delayed scaling's 4 bytes
    (3 for weights) would have moved at 52-55 %."""
    from costmodel.formats import FP8_RECIPES, cast_bytes
    M, h, f = 15872, 4096, 16384
    fprop = [(h, 3 * h), (h, h), (h, f), (f, h)]                  # (K, N) of QKV, out, up, down
    w = sum(k * n for k, n in fprop)
    elems = {"Fprop": (M * sum(k for k, _ in fprop), w),           # (activation-side, weight-side)
             "Dgrad": (M * sum(n for _, n in fprop), w),
             "Wgrad": (M * sum(k for k, _ in fprop), M * sum(n for _, n in fprop))}
    ms = _te_h200nvl_pass_ms()
    assert ms["Fprop"] == (6.503, 5.577) and ms["Wgrad"] == (6.987, 5.547)
    fp8 = gemm_format("fp8")
    assert cast_bytes(fp8, "tensorwise") == 6.0 and cast_bytes(fp8, "delayed") == 4.0 == fp8.cast_bytes
    assert cast_bytes(gemm_format("mxfp8"), "tensorwise") == FORMATS["mxfp8"].cast_bytes    # fp8 only
    assert FP8_RECIPES["tensorwise"] == 2.0
    for pas, (a_el, w_el) in elems.items():
        dt = (ms[pas][0] - ms[pas][1]) * 1e-3
        assert 0.81 < (a_el * 6 + w_el * 5) / dt / 4.8e12 < 0.85, pas
        assert 0.51 < (a_el * 4 + w_el * 3) / dt / 4.8e12 < 0.55, pas
    with pytest.raises(InputError, match="--fp8-recipe"):
        cast_bytes(fp8, "banana")


def test_torchtitan_scales_fp8_from_each_tensor_and_megatron_from_the_history():
    """The stacks' defaults (torchao's dynamic float8 vs Megatron-LM's --fp8-recipe delayed) and what
    they cost: the layer's memory-bound time grows by 2 bytes per element of every GEMM input (forward)
    and output gradient (backward) at the profile's HBM rate; the launch flags name the recipe."""
    m, c = load_model("llama3-70b"), load_cluster("dgx-h100")
    p = load_profile(c.gpu.key)
    t = layout(tp=4, dp=2).view(compute_times.layout_fields)
    assert get_stack("torchtitan").defaults["fp8_recipe"] == "tensorwise"
    assert all(get_stack(s).defaults["fp8_recipe"] == "delayed" for s in ("megatron", "nemo", "llm-foundry"))
    d, cur = (compute_times(m, Recipe(gbs=64, seq_len=8192, precision="fp8", fp8_recipe=r), c, p, t)
              for r in ("delayed", "tensorwise"))
    tok, tp = 8192, 4
    in_f = tok * (m.hidden + m.q_dim / tp + m.hidden + m.ffn_hidden / tp)
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    assert cur.layer_ew_fwd_s[0] - d.layer_ew_fwd_s[0] == pytest.approx(2 * in_f / bw, rel=1e-6)
    assert cur.layer_gemm_fwd_s[0] == d.layer_gemm_fwd_s[0]
    r = Recipe(gbs=64, seq_len=8192, precision="fp8", fp8_recipe="tensorwise")
    lay = dict(tp=4, pp=1, dp=2, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    assert "--fp8-format hybrid --fp8-recipe tensorwise" in megatron_args(lay, m, r)
    assert "--fp8-recipe" not in megatron_args(lay, m, Recipe(gbs=64, seq_len=8192, precision="fp8"))
    nemo = nemo_overrides(lay, m, r)
    assert "bf16_with_fp8_current_scaling_mixed()" in nemo and "first_last_layers_bf16 = False" in nemo
    with pytest.raises(InputError, match="--fp8-recipe"):
        Recipe(gbs=64, seq_len=8192, precision="fp8", fp8_recipe="blockwise")


def test_logs_and_configs_name_the_attention_backend():
    """Megatron-core's attention backend in an argument dump or a Megatron-Bridge config names the kernel:
    ``fused`` is Transformer Engine's cuDNN attention, ``flash`` its FlashAttention (2), ``unfused`` none,
    ``auto`` leaves TE's pick (the stack's default); a value Megatron-core does not have is reported."""
    from types import SimpleNamespace
    from costmodel.logged_recipe import logged_switches
    out, where, notes = logged_switches(SimpleNamespace(args={"attention_backend": "AttnBackend.fused"}), False)
    assert out == {"flash_attention": True, "attention_kernel": "cudnn"} and not notes
    assert where["attention_kernel"] == "attention_backend = 'AttnBackend.fused'"
    assert logged_switches(SimpleNamespace(args={"attention_backend": "flash"}), False)[0]["attention_kernel"] == "fa2"
    assert logged_switches(SimpleNamespace(args={"attention_backend": "unfused", "use_flash_attn": True}),
                           False)[0] == {"flash_attention": False}
    assert "attention_kernel" not in logged_switches(SimpleNamespace(args={"attention_backend": "auto"}), False)[0]
    out, _, notes = logged_switches(SimpleNamespace(args={"attention_backend": "magic"}), False)
    assert not out and "attention_backend = 'magic' is not a Megatron-core backend" in notes[0]


def test_logs_and_configs_name_the_fp8_scaling():
    """Megatron's argument dump (``fp8_recipe``, read only when ``fp8`` is set) and Megatron-Bridge's
    mixed_precision (a recipe name or its ``fp8_recipe``) give the scaling; a recipe the model does
    not price is reported, not guessed."""
    from types import SimpleNamespace
    from costmodel.logged_recipe import logged_switches
    from costmodel.run_config import RunConfig
    from costmodel.run_config_bridge import _bridge_precision
    out, where, notes = logged_switches(SimpleNamespace(args={"fp8": "hybrid", "fp8_recipe": "tensorwise"}), False)
    assert out["fp8_recipe"] == "tensorwise" and not notes
    out, _, notes = logged_switches(SimpleNamespace(args={"fp8": "hybrid", "fp8_recipe": "blockwise"}), False)
    assert out["fp8_recipe"] == "delayed" and "blockwise" in notes[0] and "priced as delayed" in notes[0]
    out, _, notes = logged_switches(SimpleNamespace(args={"fp8": "hybrid", "fp8_recipe": "banana"}), False)
    assert "fp8_recipe" not in out and "'banana'" in notes[0]
    out, _, notes = logged_switches(SimpleNamespace(args={"fp8": "banana", "fp8_recipe": "tensorwise"}), False)
    assert "fp8_recipe" not in out and "fp8 = 'banana' is not an --fp8-format value (e4m3, hybrid)" in notes[0]
    assert "fp8_recipe" not in logged_switches(SimpleNamespace(args={"fp8": None, "fp8_recipe": "tensorwise"}),
                                               False)[0]
    for mp, want in (("bf16_with_fp8_current_scaling_mixed", "tensorwise"), ("bf16_with_fp8_mixed", "delayed"),
                     ({"fp8": "hybrid", "fp8_recipe": "tensorwise"}, "tensorwise")):
        cfg = RunConfig()
        _bridge_precision(mp, "f.yaml", cfg)
        assert (cfg.recipe["precision"], cfg.recipe["fp8_recipe"]) == ("fp8", want), mp
    for mp in ({"fp8": "hybrid", "fp8_recipe": "blockwise"}, "bf16_with_fp8_subchannel_scaling_mixed"):
        cfg = RunConfig()
        _bridge_precision(mp, "f.yaml", cfg)
        assert cfg.recipe["fp8_recipe"] == "delayed" and "priced as delayed" in cfg.notes[0], mp
    # values of the wrong kind name the key, never a silent bf16 or delayed
    for mp, key in ((42, "mixed_precision"), (["bf16_with_fp8_mixed"], "mixed_precision"), (True, "mixed_precision"),
                    ({"fp8": "banana"}, "mixed_precision.fp8"), ({"fp8": 1}, "mixed_precision.fp8"),
                    ({"fp8": "hybrid", "fp8_recipe": 5}, "mixed_precision.fp8_recipe"),
                    ({"fp8": "hybrid", "fp8_recipe": "rowwise"}, "mixed_precision.fp8_recipe")):
        with pytest.raises(InputError) as e:
            _bridge_precision(mp, "f.yaml", RunConfig())
        assert e.value.field == key, mp


def test_rowwise_casts_each_operand_along_both_axes_and_rescales_the_gradients():
    """torchao's row-wise fp8 (torchtitan): every GEMM operand is cast along each axis, 8 bytes per
    element against tensorwise's 6, and each input and weight gradient is rescaled in place after its
    GEMM (4 bytes per element, one kernel per backward GEMM).  Llama 3 8B, TP 1, 8192 tokens: the
    layer's memory-bound time grows by exactly those bytes; Transformer Engine's stacks refuse it.
    Against torchao's own torchtitan benchmark (8 H100, Llama 3 8B: row-wise at 0.88 of tensorwise's
    tokens/s) the model's row-wise step is slower than tensorwise's but by less: its CUTLASS forward
    GEMM, slower for some shapes (pytorch issue 147971), is priced at the per-tensor rate."""
    from costmodel.formats import cast_bytes, grad_rescale_bytes
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    p = load_profile(c.gpu.key)
    t = layout(tp=1, dp=8, mbs=1).view(compute_times.layout_fields)
    tok, h, ffn = 8192, 4096, 14336
    rec = {r: Recipe(gbs=8, seq_len=tok, precision="fp8", stack="torchtitan", fp8_recipe=r)
           for r in ("tensorwise", "rowwise")}
    ct = {r: compute_times(m, x, c, p, t) for r, x in rec.items()}
    fp8 = gemm_format("fp8")
    assert (cast_bytes(fp8, "rowwise"), grad_rescale_bytes(fp8, "rowwise")) == (8.0, 4.0)
    assert grad_rescale_bytes(fp8, "tensorwise") == 0.0 == grad_rescale_bytes(gemm_format("mxfp8"), "rowwise")
    gemm_in = h + h + h + ffn                                   # QKV, out, gate/up, down inputs
    gemm_out = (h + 2 * 1024) + h + 2 * ffn + h                 # their outputs
    weights = h * (h + 2 * 1024) + h * h + 3 * h * ffn        # QKV, out, gate/up/down weights
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    launch = p.gemm["bf16"].launch_s
    d_f = float(ct["rowwise"].layer_ew_fwd_s[0] - ct["tensorwise"].layer_ew_fwd_s[0])
    d_b = float(ct["rowwise"].layer_ew_bwd_s[0] - ct["tensorwise"].layer_ew_bwd_s[0])
    assert d_f == pytest.approx(2 * tok * gemm_in / bw, rel=1e-9)
    norms = 2 * h                                               # the layer's two RMSNorm weights
    assert d_b == pytest.approx((2 * tok * gemm_out + 4 * (tok * gemm_in + weights + norms)) / bw + 8 * launch,
                                rel=1e-9)
    with pytest.raises(InputError, match="--fp8-recipe: rowwise is torchao's axis-wise scaling"):
        stack_recipe(get_stack("megatron"), 64, 4096, "fp8", fp8_recipe="rowwise")
    from costmodel.predict import predict_run
    lay = dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, recompute="selective", zero=3, sp=False, overlap=True)
    step = {r: predict_run(m, x, c, p, lay).step_time_s for r, x in rec.items()}
    assert 0.88 < step["tensorwise"] / step["rowwise"] < 1.0


def test_fp8_recipe_flag_needs_fp8_and_reports_none_elsewhere():
    """--fp8-recipe sets per-tensor scaling: given with bf16 or a block-scaled format it is refused;
    reports show it only for fp8 runs."""
    from costmodel.stacks import switch_values
    with pytest.raises(InputError, match="--fp8-recipe"):
        stack_recipe(get_stack("megatron"), 64, 4096, "bf16", fp8_recipe="tensorwise")
    with pytest.raises(InputError, match="--fp8-recipe"):
        stack_recipe(get_stack("megatron"), 64, 4096, "mxfp8", fp8_recipe="delayed")
    assert switch_values(stack_recipe(get_stack("torchtitan"), 64, 4096, "bf16"))["fp8_recipe"] is None
    assert switch_values(stack_recipe(get_stack("torchtitan"), 64, 4096, "fp8"))["fp8_recipe"] == "tensorwise"


def test_torchtitan_and_nemo_configs_name_their_fp8_scaling(tmp_path):
    """torchtitan's float8 converter runs torchao's tensorwise recipe, or a row-wise one the model
    prices as tensorwise and says so; NeMo's model.fp8_recipe is read, a bad one refused naming it."""
    from pathlib import Path
    from costmodel.run_config import read_run_config
    data = Path(__file__).resolve().parent / "data" / "configs"
    toml = (data / "torchtitan_llama3_8b.toml").read_text().replace('# converters = ["float8"]',
                                                                     'converters = ["float8"]')
    for name, want, note in (("tensorwise", "tensorwise", False), ("rowwise", "rowwise", False),
                             ("rowwise_with_gw_hp", "rowwise", True)):
        f = tmp_path / f"tt_{name}.toml"
        f.write_text(toml.replace("[quantize.linear.float8]\n", f'[quantize.linear.float8]\nrecipe_name = "{name}"\n'))
        cfg = read_run_config(f)
        assert (cfg.recipe["precision"], cfg.recipe["fp8_recipe"]) == ("fp8", want)
        assert any("'rowwise_with_gw_hp' is priced as rowwise" in n for n in cfg.notes) == note
    f = tmp_path / "tt_bad.toml"
    f.write_text(toml.replace("[quantize.linear.float8]\n", '[quantize.linear.float8]\nrecipe_name = "blockwise"\n'))
    with pytest.raises(InputError) as e:
        read_run_config(f)
    assert e.value.field == "quantize.linear.float8.recipe_name"
    nemo = (data / "nemo_launcher_llama3_8b.yaml").read_text().replace(
        "  fp8: False # enables fp8", "  fp8_recipe: tensorwise\n  fp8: True # enables fp8")
    f = tmp_path / "nemo.yaml"
    f.write_text(nemo)
    cfg = read_run_config(f)
    assert (cfg.recipe["precision"], cfg.recipe["fp8_recipe"]) == ("fp8", "tensorwise")
    f.write_text(nemo.replace("fp8_recipe: tensorwise", "fp8_recipe: 7"))
    with pytest.raises(InputError) as e:
        read_run_config(f)
    assert e.value.field == "model.fp8_recipe"


def test_sequence_parallel_gathers_move_fp8_where_the_stack_casts_before_gathering():
    """Transformer Engine and torchtitan's tensorwise float8 TP cast this rank's shard, all-gather
    fp8 and transpose the gathered tensor; torchtitan's row-wise recipe gathers bf16 and casts the
    gathered tensor.  Llama 3 8B, TP 8 with SP, 8192 tokens: per gathered element the tensorwise
    cast moves (6 - 1) / 8 + 2 = 2.625 bytes instead of 6 (the layer input of QKV and gate/up,
    forward; the output gradients of the out and down projections, backward), and each all-gather
    carries 1 byte per element instead of 2."""
    from costmodel.comm import group_time_s, microbatch_comm_times
    from costmodel.formats import sp_gather_cast_bytes, sp_gather_quantized
    fp8 = gemm_format("fp8")
    assert sp_gather_cast_bytes(fp8, "delayed", 8) == pytest.approx(3 / 8 + 2)
    assert sp_gather_cast_bytes(fp8, "tensorwise", 8) == pytest.approx(5 / 8 + 2)
    assert sp_gather_quantized(fp8, "tensorwise", get_stack("torchtitan"))
    assert not sp_gather_quantized(fp8, "rowwise", get_stack("torchtitan"))
    assert sp_gather_quantized(fp8, "delayed", get_stack("megatron"))
    assert not sp_gather_quantized(gemm_format("bf16"), "delayed", get_stack("nemo"))
    assert not sp_gather_quantized(gemm_format("mxfp8"), "delayed", get_stack("megatron"))

    m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    p = load_profile(c.gpu.key)
    tok, h = 8192, 4096
    t = layout(tp=8, dp=1, mbs=1, sp=True)
    rec = {r: Recipe(gbs=8, seq_len=tok, precision="fp8", stack="torchtitan", fp8_recipe=r)
           for r in ("tensorwise", "rowwise")}
    bf16 = Recipe(gbs=8, seq_len=tok, precision="bf16", stack="torchtitan")
    ct = {r: compute_times(m, x, c, p, t.view(compute_times.layout_fields)) for r, x in rec.items()}
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    # row-wise casts every gathered element at 8 bytes, tensorwise at 2.625; the other operands
    # (out and down inputs forward, QKV and gate/up output gradients backward) differ by 2 as before
    ffn = 14336
    d_f = float(ct["rowwise"].layer_ew_fwd_s[0] - ct["tensorwise"].layer_ew_fwd_s[0])
    assert d_f == pytest.approx(((8 - 2.625) * tok * 2 * h + 2 * tok * (h + ffn) / 8) / bw, rel=1e-9)
    tp = {r: microbatch_comm_times(m, x, c, p, t.view(microbatch_comm_times.layout_fields)).tp_layer_fwd_s[0]
          for r, x in {**rec, "bf16": bf16}.items()}
    assert tp["rowwise"] == pytest.approx(tp["bf16"], rel=1e-12)
    one = t.tp[:1] * 0 + 1
    ag = lambda n_bytes: float(group_time_s("all_gather", n_bytes, one, t.tp[:1], c, p)[0])  # noqa: E731
    # two all-gathers a layer forward; the tensor is tok x h, copied around each (mbs 1: the
    # all-gather's copy is a view), at 1 byte an element instead of 2
    assert tp["rowwise"] - tp["tensorwise"] == pytest.approx(2 * (ag(2.0 * tok * h) - ag(1.0 * tok * h)), rel=1e-9)


def test_megatron_arguments_come_with_the_device_connections_megatron_asserts():
    """Megatron-LM's validate_args asserts CUDA_DEVICE_MAX_CONNECTIONS=1 with TP or CP > 1 on Hopper and
    earlier, and FSDP wants it unset: the arguments lead with that line, and without TP or CP none."""
    m = load_model("llama3-8b")
    r = stack_recipe(get_stack("megatron"), 64, 8192, "bf16")
    base = dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1, sp=False, overlap=True)
    first = lambda **kw: megatron_args(dict(base, **kw), m, r).splitlines()[0]      # noqa: E731
    assert first(tp=2, sp=True).startswith("export CUDA_DEVICE_MAX_CONNECTIONS=1")
    assert first(cp=2).startswith("export CUDA_DEVICE_MAX_CONNECTIONS=1")
    assert first(tp=2, sp=True, zero=3).startswith("unset CUDA_DEVICE_MAX_CONNECTIONS")
    assert first().startswith("--tensor-model-parallel-size 1")
    # EP overlap: validate_args only warns with TP > 1, and NVIDIA's MoE recipes run it with 32 queues
    mx = load_model("mixtral-8x7b")
    ro = stack_recipe(get_stack("megatron"), 64, 4096, "bf16", moe_dispatcher="alltoall", moe_ep_overlap=True)
    lines = megatron_args(dict(base, tp=2, sp=True, ep=8, vp=1), mx, ro).splitlines()
    assert lines[0].startswith("export CUDA_DEVICE_MAX_CONNECTIONS=32") and "--overlap-moe-expert-parallel-comm" in "".join(lines)


def test_nemo_mxfp8_gathers_16_bit_parameters_as_priced():
    """NeMo's bf16_with_mxfp8_mixed() gathers the parameters in fp8 into the gradient buffer
    (fp8_param_gather, reuse_grad_buf_for_mxfp8_param_ag): the overrides turn both off, as for fp8."""
    m = load_model("llama3-8b")
    lay = dict(tp=2, pp=1, dp=4, cp=1, ep=1, etp=1, vp=1, mbs=1, recompute="none", recompute_num_layers=0,
               zero=1, sp=True, overlap=True)
    text = nemo_overrides(lay, m, Recipe(gbs=8, seq_len=4096, precision="mxfp8", stack="nemo"))
    assert "recipe.trainer.plugins.fp8_param_gather = False" in text
    assert "recipe.trainer.plugins.reuse_grad_buf_for_mxfp8_param_ag = False" in text


def test_nemo_tp_overlap_is_a_callback_that_keeps_the_priced_p2p_and_dp_overlaps():
    """TP overlap in NeMo 2 is MegatronCommOverlapCallback, whose setup() writes overlap_p2p_comm on at
    VP > 1 and the DP overlaps over the printed configs: the callback line passes the priced values
    (here the pipeline sends exposed, --no-pp-overlap), so it keeps them."""
    from dataclasses import replace
    m = load_model("llama3.1-70b")
    lay = dict(tp=4, pp=4, dp=4, cp=1, ep=1, etp=4, vp=4, mbs=1, recompute="none", recompute_num_layers=0,
               zero=1, sp=True, overlap=True)
    r = replace(stack_recipe(get_stack("nemo"), 128, 8192, "bf16"), tp_comm_overlap=True, pp_overlap=False)
    text = nemo_overrides(lay, m, r)
    assert ("recipe.trainer.callbacks.append(run.Config(MegatronCommOverlapCallback, tp_comm_overlap=True, "
            "overlap_p2p_comm=False, batch_p2p_comm=True, overlap_grad_reduce=True, overlap_param_gather=True))") in text
    assert "recipe.model.config.overlap_p2p_comm = False" in text
    assert "import nemo_run as run" in text.splitlines()[:2] and "import MegatronCommOverlapCallback" in text


def test_a_sequence_past_the_model_s_positions_prints_max_position_embeddings():
    """validate_args asserts max_position_embeddings >= seq_length: Llama 3.1 8B (131,072 positions) at
    262,144 tokens prints --max-position-embeddings 262144 and says the RoPE extension is the run's;
    within its positions no such flag."""
    m = load_model("llama3.1-8b")
    row = dict(tp=2, pp=1, dp=1, cp=16, ep=1, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    long = megatron_args(row, m, stack_recipe(get_stack("megatron"), 64, 262144, "bf16"))
    assert "--max-position-embeddings 262144" in long and "past llama3.1-8b's 131072 positions" in long
    assert "--max-position-embeddings" not in megatron_args(row, m, stack_recipe(get_stack("megatron"), 64, 131072,
                                                                                    "bf16"))


def test_predict_gives_mfu_with_attention_s_by_s_and_with_its_causal_half():
    """Llama 3.1 8B at 262,144 tokens: attention is most of the model FLOPs, so SC21's s x s count reads
    78% where the causal half reads about 43%; the JSON gives both and their ratio is the FLOP ratio."""
    import json
    import subprocess
    import sys
    from costmodel.compute import model_flops_per_step
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "predict", "--model", "llama3.1-8b", "--cluster",
                        "dgx-h100", "--nodes", "4", "--tp", "2", "--cp", "16", "--mbs", "1", "--gbs", "64",
                        "--seq-len", "262144", "--json"], capture_output=True, text=True, timeout=300,
                       cwd=Path(__file__).resolve().parents[1])
    d = json.loads(r.stdout)
    m, rec = load_model("llama3.1-8b"), stack_recipe(get_stack("megatron"), 64, 262144, "bf16")
    share = model_flops_per_step(m, rec, causal=True) / model_flops_per_step(m, rec)
    assert d["mfu_causal"] == pytest.approx(d["mfu"] * share, rel=1e-9) and 0.5 < share < 0.6
