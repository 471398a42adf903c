"""FSDP2's copies around its collectives (costmodel.fsdp_copies) and their place in the step."""
import dataclasses

import pytest

from costmodel.fsdp_copies import copy_bytes
from costmodel.layouts import microbatches
from costmodel.predict import predict_table
from costmodel.schedule import fsdp_copy_s
from costmodel.specs import load_cluster, load_model, load_profile
from costmodel.stacks import STACKS, stack_recipe

from conftest import layout


def test_copy_bytes_of_a_unit():
    """1e9 parameters sharded 8 ways, bf16 gather, fp32 reduce: the copy-in reads the fp32 shard and
    writes it in bf16 (6 B per local element), the copy-out reads and writes every parameter (4 B);
    the backward gathers again and chunk-cats the bf16 gradients into fp32 (6 B)."""
    f, b = copy_bytes(1e9, 8, 2.0, 4.0)
    assert float(f) == pytest.approx(6e9 / 8 + 4e9)
    assert float(b) == pytest.approx(6e9 / 8 + 4e9 + 6e9)


def test_copy_bytes_of_fsdp1_and_deepspeed():
    """FSDP1: the fp32 shard cast before each gather (6 B per local element); the backward's split
    concatenation (4 B), cast to the fp32 reduce dtype (6 B) and in-place pre-divide (8 B) per element.
    DeepSpeed ZeRO-3: nothing forward; bucket copy, concatenation and division in bf16 (3 x 4 B)."""
    f, b = copy_bytes(1e9, 8, 2.0, 4.0, "fsdp1")
    assert float(f) == pytest.approx(6e9 / 8) and float(b) == pytest.approx(6e9 / 8 + 18e9)
    f, b = copy_bytes(1e9, 8, 2.0, 2.0, "fsdp1")            # a bf16 reduce: no cast
    assert float(b) == pytest.approx(6e9 / 8 + 8e9)
    f, b = copy_bytes(1e9, 8, 2.0, 4.0, "deepspeed")
    assert float(f) == 0.0 and float(b) == pytest.approx(12e9)
    with pytest.raises(ValueError, match="not one of"):
        copy_bytes(1e9, 8, 2.0, 4.0, "fsdp3")


def _llama8b_fsdp(stack, **kw):
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    r = stack_recipe(STACKS[stack], 16, 8192, "bf16")
    t = layout(dp=8, mbs=2, zero=3, recompute="selective", **kw)
    return m, r, c, p, t


def test_only_zero3_on_a_copying_fsdp_pays():
    """torchtitan's FSDP2 copies under ZeRO-3, llm-foundry's FSDP1 casts and divides; Megatron's buffers
    are the parameters' own, and a replicated layout (ZeRO-0) gathers nothing."""
    m, r, c, p, t = _llama8b_fsdp("torchtitan")
    f, b = fsdp_copy_s(m, r, c, p, t)
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    params = m.layer_params()                 # 218,112,000 for Llama-3-8B
    assert params == 218_112_000
    launch = p.gemm["bf16"].launch_s
    assert float(f[0]) == pytest.approx((6 * params / 8 + 4 * params) / bw + 2 * launch, rel=1e-9)
    assert float(b[0]) == pytest.approx((6 * params / 8 + 4 * params + 6 * params) / bw + 3 * launch, rel=1e-9)
    assert fsdp_copy_s(*_llama8b_fsdp("megatron"))[1][0] == 0.0
    m, r, c, p, t = _llama8b_fsdp("llm-foundry")
    assert r.main_grads_dtype == "fp32"
    assert float(fsdp_copy_s(m, r, c, p, t)[1][0]) == pytest.approx((6 * params / 8 + 18 * params) / bw
                                                                     + 4 * launch, rel=1e-9)
    m, r, c, p, _ = _llama8b_fsdp("torchtitan")
    assert fsdp_copy_s(m, r, c, p, layout(dp=8, mbs=2, zero=0))[1][0] == 0.0


def test_the_copies_lengthen_every_layer_of_every_micro_batch(monkeypatch):
    """The step with the copies exceeds the one without by m x L x (forward + backward copies): they run
    on the compute stream, between the layer's kernels."""
    m, r, c, p, t = _llama8b_fsdp("torchtitan")
    f, b = fsdp_copy_s(m, r, c, p, t)
    with_copies = float(predict_table(m, r, c, p, t).step_time_s[0])
    monkeypatch.setitem(STACKS, "torchtitan", dataclasses.replace(STACKS["torchtitan"], fsdp_copies=""))
    without = float(predict_table(m, r, c, p, t).step_time_s[0])
    n_mb = float(microbatches(r, t.dp, t.mbs)[0])
    assert n_mb == 1
    assert with_copies - without == pytest.approx(n_mb * m.num_layers * float(f[0] + b[0]), rel=1e-6)


def test_deepspeed_engine_accumulates_gradients_in_an_unfused_pass(monkeypatch):
    """Megatron-DeepSpeed leaves the 16-bit gradients to autograd's AccumulateGrad: every micro-batch
    after the first reads the stored and the new gradient and writes the sum (6 B per local parameter),
    so 8 micro-batches pay 7 passes per layer; ZeRO-2 reduces every micro-batch and accumulates
    nothing, and Megatron-core fuses the accumulation into its weight-gradient GEMMs."""
    from costmodel.schedule import grad_accum_s
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    r = stack_recipe(STACKS["megatron-deepspeed"], 64, 4096, "bf16")
    t = layout(dp=8, mbs=1, zero=1)
    bw = c.gpu.hbm_bytes_per_s * p.hbm_efficiency
    one = float(grad_accum_s(m, r, c, p, t)[0])
    assert one == pytest.approx(6 * m.layer_params() / bw + (2 + 3 + 2) * p.gemm["bf16"].launch_s, rel=1e-9)
    assert float(grad_accum_s(m, r, c, p, layout(dp=8, mbs=1, zero=2))[0]) == 0.0
    assert float(grad_accum_s(m, stack_recipe(STACKS["megatron"], 64, 4096, "bf16"), c, p, t)[0]) == 0.0
    # torchtitan's FSDP2 under a pipeline (ZeRO-1 here) adds each micro-batch's bf16 gradient into its fp32
    # accumulation (10 B); without a pipeline it reduce-scatters every micro-batch (ZeRO-3: nothing)
    tt = stack_recipe(STACKS["torchtitan"], 64, 4096, "bf16")
    assert float(grad_accum_s(m, tt, c, p, layout(dp=4, pp=2, mbs=1, zero=1))[0]) == pytest.approx(
        10 * m.layer_params() / bw + 7 * p.gemm["bf16"].launch_s, rel=1e-9)
    assert float(grad_accum_s(m, tt, c, p, layout(dp=8, mbs=1, zero=3))[0]) == 0.0
    n_mb = float(microbatches(r, t.dp, t.mbs)[0])
    assert n_mb == 8
    with_accum = float(predict_table(m, r, c, p, t).step_time_s[0])
    monkeypatch.setitem(STACKS, "megatron-deepspeed", dataclasses.replace(STACKS["megatron-deepspeed"],
                                                                           grad_accum_bytes=(0.0, 0.0)))
    without = float(predict_table(m, r, c, p, t).step_time_s[0])
    assert with_accum - without == pytest.approx((n_mb - 1) * m.num_layers * one, rel=1e-6)
