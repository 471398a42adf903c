"""The power model's kernel classes under a cap (costmodel/power.py), by hand and on a catalog GPU."""
import numpy as np
import pytest

from costmodel.power import PowerParams, compute_under_cap, dynamic_power_ratio

P = PowerParams(idle_w=100.0, coeff_w={"flop": 800.0, "hbm": 300.0, "link": 0.0, "spin": 30.0}, gamma=2.5,
                min_cap_w=200.0, max_cap_w=700.0, kernel_limit_w=700.0)


def _classes(gemm_s=1.0, mem_s=0.5, u=0.75):
    return {"gemm": (gemm_s, True, {"flop": u}), "memory": (mem_s, False, {"hbm": 0.8})}


def test_a_cap_above_every_class_changes_nothing():
    """GEMMs at 75% of the peak draw 100 + 800 x 0.75 = 700 W for 1 s, memory-bound kernels at 80% of
    the bandwidth 100 + 300 x 0.8 = 340 W for 0.5 s: at a 700 W cap nothing stretches."""
    t, e, s, top = compute_under_cap(P, _classes(), 700.0)
    assert t == pytest.approx(1.5) and e == pytest.approx(700.0 + 340.0 * 0.5)
    assert s == pytest.approx(1.0) and top == pytest.approx(700.0)


def test_a_cap_above_the_average_still_slows_the_gemms():
    """The phase averages (700 + 170) / 1.5 = 580 W; a 600 W cap is above it but below the GEMMs' 700 W:
    they run at the clock s with 100 + 600 g(s) = 600, g(s) = s^2.5 = 5/6, and take 1 / s seconds;
    the memory-bound kernels, at 340 W, keep their clock and their time."""
    t, e, s, top = compute_under_cap(P, _classes(), 600.0)
    s_want = (5.0 / 6.0) ** (1 / 2.5)
    assert s == pytest.approx(s_want, rel=1e-9)
    assert t == pytest.approx(1.0 / s_want + 0.5, rel=1e-9)
    assert e == pytest.approx(600.0 / s_want + 170.0, rel=1e-9)
    assert top == pytest.approx(600.0)
    assert float(dynamic_power_ratio(s, 2.5)) == pytest.approx(5.0 / 6.0)


def test_a_class_draws_at_most_the_limit_its_kernels_were_measured_under():
    """GEMMs the linear model puts at 100 + 800 x 0.9 = 820 W were measured at 90% of the peak under a
    700 W limit, so they drew 700 W there, held at the clock s0 with 100 + 720 g(s0) = 700: a 700 W
    cap does not slow them again (the clock reported is s0), a 600 W one slows them from 700 W, not
    from 820 W, to s0 x ((600 - 100) / 600)^(1/2.5)."""
    hot = _classes(u=0.9)
    s0 = (600.0 / 720.0) ** (1 / 2.5)
    t, _, s, top = compute_under_cap(P, hot, 700.0)
    assert t == pytest.approx(1.5) and s == pytest.approx(s0, rel=1e-9) and top == pytest.approx(700.0)
    t600, _, s600, _ = compute_under_cap(P, hot, 600.0)
    rel = ((600.0 - 100.0) / 600.0) ** (1 / 2.5)
    assert s600 == pytest.approx(s0 * rel, rel=1e-9) and t600 == pytest.approx(1.0 / rel + 0.5, rel=1e-9)
    # a pin above the held clock changes nothing; one below it slows the GEMMs by s0 / pin
    assert compute_under_cap(P, hot, 700.0, clock_max=0.99)[0] == pytest.approx(1.5)
    assert compute_under_cap(P, hot, 700.0, clock_max=0.5)[0] == pytest.approx(s0 / 0.5 + 0.5, rel=1e-9)


def test_arrays_broadcast_over_layouts_and_cap_levels():
    """(N, 1) class times and utilisations against (1, C) caps give (N, C) results, each the scalar one."""
    times = np.array([[1.0], [2.0]])
    cls = {"gemm": (times, True, {"flop": np.array([[0.75], [0.5]])}), "memory": (0.5 * times, False, {"hbm": 0.8})}
    caps = np.array([[600.0, 700.0]])
    t, _, _, _ = compute_under_cap(P, cls, caps)
    assert t.shape == (2, 2)
    one, _, _, _ = compute_under_cap(P, {"gemm": (2.0, True, {"flop": 0.5}), "memory": (1.0, False, {"hbm": 0.8})},
                                     600.0)
    assert t[1, 0] == pytest.approx(one)


def test_grand_teton_s_500_w_limit_binds_below_its_average_power():
    """Llama 3 8B, FSDP over 8 Grand Teton H100 (500 W limit, the 700 W H100's GEMM tables): the run
    averages under 500 W, yet its GEMMs (about 690 W at full clock) run below the maximum clock and the
    step is longer than at full clock; on a 700 W DGX H100 the same GEMMs, whose tables are bursts at
    the maximum clock (power_limited: false), settle near the clock an H200's sustained matmul holds at
    700 W (MSMF / MAMF = 755 / 834 = 0.905 at the best shape's higher utilisation) and lengthen the step
    by less than the 500 W part."""
    from costmodel.predict import predict_run
    from costmodel.specs import load_cluster, load_model, load_profile
    from costmodel.stacks import get_stack, stack_recipe
    m = load_model("llama3-8b")
    lay = dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=2, recompute="selective", zero=3, sp=False, overlap=True)
    out = {}
    for name in ("grand-teton-h100", "dgx-h100"):
        c = load_cluster(name, nodes=1)
        p = load_profile(c.gpu.key)
        r = stack_recipe(get_stack("torchtitan"), 16, 8192, "bf16", c.gpu)
        out[name] = predict_run(m, r, c, p, lay)
    gt, dgx = out["grand-teton-h100"], out["dgx-h100"]
    assert gt.energy.avg_power_w < 500.0 < gt.energy.compute_power_w + 1e-6
    assert gt.energy.sm_clock_mhz < 0.9 * 1980 and gt.step_time_s > 1.05 * gt.uncapped_step_time_s
    assert 0.905 * 1980 < dgx.energy.sm_clock_mhz < 0.96 * 1980
    assert gt.energy.sm_clock_mhz < dgx.energy.sm_clock_mhz
    assert 1.02 * dgx.uncapped_step_time_s < dgx.step_time_s < gt.step_time_s


def test_a_burst_measured_gemm_is_throttled_by_the_cap_it_never_saw():
    """The same 820 W GEMMs measured in a burst at the maximum clock (limit inf): a 700 W cap holds them
    at s with 100 + 720 g(s) = 700, the s0 above, and they take 1 / s0 where the class measured under
    the limit took 1 s; below the draw nothing changes."""
    hot = {"gemm": (1.0, True, {"flop": 0.9}, float("inf")), "memory": (0.5, False, {"hbm": 0.8})}
    s0 = (600.0 / 720.0) ** (1 / 2.5)
    t, _, s, top = compute_under_cap(P, hot, 700.0)
    assert s == pytest.approx(s0, rel=1e-9) and t == pytest.approx(1.0 / s0 + 0.5, rel=1e-9)
    assert top == pytest.approx(700.0)
    cool = {"gemm": (1.0, True, {"flop": 0.5}, float("inf"))}
    assert compute_under_cap(P, cool, 700.0)[0] == pytest.approx(1.0)


def test_the_recipes_gemm_entry_says_which_class_is_a_burst():
    """H100 BF16 GEMMs come from XLA's 10-kernel bursts and MAMF's ~15 ms best shape (power_limited:
    false); its FP8 GEMMs from Azure's rows after 10,000 warm-up iterations (power-limited)."""
    from costmodel.energy import burst_classes
    from costmodel.specs import Recipe, load_profile
    h = load_profile("h100-sxm-80gb")
    assert not h.gemm["bf16"].power_limited and h.gemm["fp8"].power_limited
    assert burst_classes(h, Recipe(gbs=8, seq_len=2048)) == ("gemm",)
    assert burst_classes(h, Recipe(gbs=8, seq_len=2048, precision="fp8")) == ()
    assert load_profile("a100-sxm-80gb").gemm["bf16"].power_limited


def test_the_b200_burst_held_at_1000_w_lands_near_its_sustained_matmul():
    """MAMF's B200 BF16 burst (1745 TFLOP/s) under the B200's fitted coefficients at 1000 W: within 7%
    of mamf-finder's sustained MSMF (1429; 1338 predicted, -6.4 %) and above the slowest 8192^3 GEMM the
    B200 note holds (1178-1331)."""
    from costmodel.fit.builtin.msmf import sustained_tflops
    from costmodel.specs import load_profile
    p = load_profile("b200-sxm-180gb").power
    power = dict(idle_w=p.idle_w, static_w=p.static_w, flop_w=p.coeff_w["flop"], gamma=p.gamma,
                 v_floor_clock_ratio=p.v_floor_clock_ratio)
    got = sustained_tflops(power, 1745.0, 2250.0, 1000.0)
    assert got == pytest.approx(1429.0, rel=0.07) and 1178.0 < got < 1429.0


def test_attention_held_at_the_b200_limit_throttles_as_flashinfer_measured():
    """FlashAttention-4 (BF16, b 4, s 8192, 16 heads of 128) back to back on a B200 (flashinfer PR 2899,
    hardware/profiles/data/flashinfer_b200_fa4_power_throttle.md): 1,450 TFLOP/s at 1,965 MHz, then
    1,237 at ~1,580 MHz under the 1,000 W limit.  The profile's coefficients, fitted to sustained GEMMs
    and never to attention, price the kernel as tensor-core work at its burst utilisation (1450 / 2250;
    its HBM traffic is negligible): the clock and the throughput it gives under the cap are within 5%
    of the measured ones.  A cross-check of the power model on a kernel class it was not fitted to."""
    from costmodel.specs import load_profile
    p = load_profile("b200-sxm-180gb").power
    fa4 = {"attention": (1.0, True, {"flop": 1450.0 / 2250.0}, float("inf"))}
    t, _, s, top = compute_under_cap(p, fa4, 1000.0)
    assert s == pytest.approx(1580.0 / 1965.0, rel=0.05)
    assert 1450.0 / t == pytest.approx(1237.0, rel=0.05)
    assert top == pytest.approx(1000.0)


@pytest.mark.parametrize("value", ["'no'", "1", "maybe"])
def test_power_limited_is_a_yaml_boolean(tmp_path, value):
    from costmodel.errors import InputError
    from costmodel.specs import hardware_dir, load_profile
    text = (hardware_dir() / "profiles" / "h100-sxm-80gb.yaml").read_text()
    f = tmp_path / "p.yaml"
    f.write_text(text.replace("    power_limited: false\n", f"    power_limited: {value}\n", 1))
    with pytest.raises(InputError, match="expected true or false") as e:
        load_profile(str(f))
    assert "gemm.bf16.power_limited" in str(e.value)


@pytest.mark.parametrize("old,new,field,why", [
    ("    power_limited: false\n", "    power_limitd: false\n", "gemm.bf16.power_limitd", "unknown key"),
    ("  hbm_w: 378.2\n", "  hbm_w: -5\n", "power.hbm_w", "must be >= 0"),
    ("  spin_w: 33.91\n", "  spin_w: -200\n", "power.spin_w", "must be >= 0"),
    ("    k_half: 101.7\n", "    k_half: -101.7\n", "gemm.bf16.k_half", "must be >= 0"),
    ("    launch_s: 5.299e-06\n", "    launch_s: -5.299e-06\n", "gemm.bf16.launch_s", "must be >= 0"),
    ("    tile_m: 64\n", "    tile_m: 0\n", "gemm.bf16.tile_m", "must be >= 1"),
    ("gpu: h100-sxm-80gb\n", "", ": gpu", "missing"),
])
def test_a_misspelt_gemm_key_or_a_negative_power_term_is_refused(tmp_path, old, new, field, why):
    """A misspelt key would leave its default in force unseen; a negative activity term would have a
    busy GPU draw less than an idle one."""
    from costmodel.errors import InputError
    from costmodel.specs import hardware_dir, load_profile
    text = (hardware_dir() / "profiles" / "h100-sxm-80gb.yaml").read_text()
    assert old in text
    f = tmp_path / "p.yaml"
    f.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError, match=why) as e:
        load_profile(str(f))
    assert field in str(e.value)


def test_only_the_power_above_the_static_floor_falls_with_the_clock():
    """The same GPU with 60 of its 100 W idle static: under a 400 W cap the 700 W GEMMs run where
    60 + 640 g(s) = 400 (g = 340/640), faster than where all 100 W stay (100 + 600 g = 400, g = 1/2),
    and draw exactly the cap."""
    from dataclasses import replace
    from costmodel.power import clock_ratio, power_at_clock_w
    held = replace(P, static_w=60.0)
    assert P.static_floor_w == 100.0 and held.static_floor_w == 60.0
    s_all, s_static = float(clock_ratio(P, 700.0, 400.0)), float(clock_ratio(held, 700.0, 400.0))
    assert s_all == pytest.approx(0.5 ** (1 / 2.5)) and s_static == pytest.approx((340 / 640) ** (1 / 2.5))
    assert s_static > s_all and float(power_at_clock_w(held, 700.0, s_static)) == pytest.approx(400.0)


@pytest.mark.parametrize("v_floor", [0.0, 0.777])
def test_the_clock_under_a_cap_inverts_the_power_law(v_floor):
    """Property: for any phase power, static floor and cap between the phase's power at the lowest
    clock and at full clock, the power at the clock the cap sets is the cap (costmodel/power.py), and
    a higher cap never sets a lower clock."""
    from hypothesis import given, settings, strategies as st
    from costmodel.power import power_at_ratio_w, ratio_under_cap

    @settings(max_examples=200, deadline=None)
    @given(p=st.floats(150.0, 1500.0), static=st.floats(0.0, 140.0), f=st.floats(0.0, 1.0), df=st.floats(0.0, 0.2))
    def check(p, static, f, df):
        lo = float(power_at_ratio_w(p, 0.05, static, 2.53, v_floor))
        cap = lo + f * (p - lo)
        s = float(ratio_under_cap(p, cap, static, 2.53, v_floor, 0.05))
        assert float(power_at_ratio_w(p, s, static, 2.53, v_floor)) == pytest.approx(cap, rel=1e-9, abs=1e-9)
        assert float(ratio_under_cap(p, cap + df * (p - lo), static, 2.53, v_floor, 0.05)) >= s - 1e-12

    check()
