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
    step is longer than at full clock; the same layout on a 700 W DGX H100 runs at the clock of its
    GEMM tables, its full-clock step."""
    from costmodel.predict import predict_run
    from costmodel.specs import load_cluster, load_model, load_profile
    from costmodel.stacks import get_stack, stack_recipe
    m = load_model("llama3-8b")
    lay = dict(tp=1, pp=1, dp=8, cp=1, ep=1, vp=1, mbs=2, recompute="selective", zero=3, sp=False, overlap=True)
    out = {}
    for name in ("grand-teton-h100", "dgx-h100"):
        c = load_cluster(name, nodes=1)
        p = load_profile(c.gpu.key)
        r = stack_recipe(get_stack("torchtitan"), 16, 8192, "bf16", c.gpu.key)
        out[name] = predict_run(m, r, c, p, lay)
    gt, dgx = out["grand-teton-h100"], out["dgx-h100"]
    assert gt.energy.avg_power_w < 500.0 < gt.energy.compute_power_w + 1e-6
    assert gt.energy.sm_clock_mhz < 0.9 * 1830 and gt.step_time_s > 1.05 * gt.uncapped_step_time_s
    # the 700 W part runs its GEMMs at the clock its tables were measured at: no slower than they say
    assert 0.95 * 1830 < dgx.energy.sm_clock_mhz <= 1830.0
    assert dgx.step_time_s == pytest.approx(dgx.uncapped_step_time_s)
