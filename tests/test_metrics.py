"""Derived figures (costmodel.metrics) and the one-layout prediction built on them."""
import pytest

from costmodel import metrics
from costmodel.compute import model_flops_per_step
from costmodel.predict import predict_run, predict_table
from costmodel.specs import Recipe, load_cluster, load_model, load_profile

from conftest import layout

R = Recipe(gbs=128, seq_len=8192)


def test_throughput_energy_and_seed_metric_by_hand():
    assert metrics.tokens_per_step(R) == 1_048_576
    assert metrics.tokens_per_s_per_gpu(R, 10.0, 32) == pytest.approx(3276.8)
    assert metrics.tokens_per_joule(R, 2_097_152.0) == pytest.approx(0.5)
    assert metrics.energy_j_per_token(R, 2_097_152.0) == pytest.approx(2.0)
    # samples/(s MJ): 128 samples in 8 s at 0.5 MJ per step = 16 / 0.5
    assert metrics.samples_per_s_per_mj(R, 8.0, 5e5) == pytest.approx(32.0)


def test_mfu_uses_model_flops_and_the_dense_bf16_peak():
    m, c = load_model("llama3-70b"), load_cluster("paper-h200")
    flops = model_flops_per_step(m, R)
    assert metrics.model_tflops_per_gpu(m, R, 10.0, 32) == pytest.approx(flops / 10.0 / 32 / 1e12)
    assert metrics.mfu(m, R, c, 10.0, 32) == pytest.approx(flops / 10.0 / 32 / 989.4e12)
    fp8 = Recipe(gbs=128, seq_len=8192, precision="fp8")       # fp8 runs count against the bf16 peak too
    assert metrics.mfu(m, fp8, c, 10.0, 32) == pytest.approx(flops / 10.0 / 32 / 989.4e12)


def test_one_layout_prediction_agrees_with_the_table_and_adds_band_and_energy(h200):
    c, p = h200
    m = load_model("llama3-70b")
    lay = dict(tp=4, pp=4, dp=2, cp=1, ep=1, vp=1, mbs=1, recompute="full", zero=1, sp=True, overlap=True)
    table = predict_table(m, R, c, p, layout(**lay))
    run = predict_run(m, R, c, p, lay)
    assert run.uncapped_step_time_s == table.step_time_s[0]
    assert sum(run.breakdown.values()) == pytest.approx(run.uncapped_step_time_s, rel=1e-12)
    assert run.energy is not None and run.step_time_s == run.energy.step_time_s
    assert run.step_time_s >= run.uncapped_step_time_s * (1 - 1e-12)      # capping never speeds up
    assert run.tokens_per_s_per_gpu == pytest.approx(128 * 8192 / run.step_time_s / 32)
    assert 0 < run.band.rel < 0.5 and run.step_time_band_s == pytest.approx(run.band.rel * run.step_time_s)
    no_energy = predict_run(m, R, c, p, lay, energy=False)
    assert no_energy.energy is None and no_energy.step_time_s == table.step_time_s[0]
    from dataclasses import replace       # a GPU without a slowdown temperature: time still predicted, energy named missing
    b2 = load_cluster("dgx-b200", nodes=4)
    b2 = replace(b2, gpu=replace(b2.gpu, slowdown_temp_c=None))
    run_b2 = predict_run(m, R, b2, load_profile(b2.gpu.key), dict(lay, tp=8, dp=b2.num_gpus // 32))
    assert run_b2.energy is None and run_b2.energy_missing == ("b200-sxm-180gb slowdown_temp",)
    mi = load_cluster("mi250")          # AMD: power and thermal from AMD's documentation and rocm-smi readings
    assert predict_run(m, R, mi, load_profile(mi.gpu.key), dict(lay, tp=8, dp=mi.num_gpus // 32)).energy is not None


def test_json_output_is_strict_and_free_of_binary_float_noise():
    """Every --json output goes through costmodel.report.json_text: NaN and inf are null (RFC 8259 has
    neither), numpy scalars are numbers, and a float keeps 15 significant digits, so a cap solved to 200 W
    prints 200.0, not 200.00000000000003 (the energy trial's JSON), while a value's real digits stay."""
    import json
    import numpy as np
    from costmodel.report import json_text
    got = json.loads(json_text({"cap_w": 200.00000000000003, "share": 0.1 + 0.2, "nan": float("nan"),
                                "inf": np.float64(np.inf), "step_s": np.float64(29.211282978972), "n": np.int64(3)}))
    assert got == {"cap_w": 200.0, "share": 0.3, "nan": None, "inf": None, "step_s": 29.211282978972, "n": 3}
