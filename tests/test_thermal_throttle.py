"""The per-GPU thermal slowdown solver (costmodel.thermal_throttle): its root search and fixed point."""
import numpy as np
import pytest

from costmodel.predict import predict_run
from costmodel.specs import load_cluster, load_model, load_profile
from costmodel.stacks import get_stack, stack_recipe
from costmodel.thermal_throttle import _root, stage_pace


def test_the_root_search_lands_on_the_slowdown_temperature_for_any_monotone_heat():
    """20,000 excess-temperature curves (linear, concave, convex in the clock, slopes 0.5-60 C per unit
    clock, roots across the HW-slowdown-to-maximum range): the clock returned holds each within 1e-6 C
    of its slowdown temperature.  A search that stopped on an evaluation near the root had answered
    with its stale lower bracket, up to 29 C cool (the HW-slowdown clock) on linear curves."""
    rng = np.random.default_rng(1)
    n = 20_000
    root, slope, shape = rng.uniform(0.5, 1.0, n), rng.uniform(0.5, 60.0, n), rng.integers(0, 3, n)

    def excess(x):
        return np.where(shape == 0, slope * (x - root),
                        np.where(shape == 1, slope * (np.sqrt(x) - np.sqrt(root)), slope * (x ** 3 - root ** 3)))

    lo, hi = np.full(n, 0.5), np.ones(n)
    f_hi = excess(hi)
    hot = f_hi > 1e-6
    clock = _root(excess, lo, hi, f_hi, hot)
    assert np.abs(excess(clock)[hot]).max() <= 1e-6
    assert (clock[~hot] == 1.0).all()
    # too hot even at the HW-slowdown clock: it runs there
    stuck = _root(lambda x: x + 1.0, lo[:3], hi[:3], hi[:3] + 1.0, np.ones(3, dtype=bool))
    assert (stuck == 0.5).all()


def test_stage_pace_is_the_slowest_listed_gpu():
    assert stage_pace(np.array([1.0, 0.8, 0.9, 1.0]), np.array([0, 0, 1, 1]), 3).tolist() == [0.8, 0.9, 1.0]


@pytest.mark.parametrize("inlet_c", [57.0, 57.2])
def test_throttled_gpus_hold_at_the_slowdown_temperature(inlet_c):
    """Llama 3 8B, TP2 PP2 DP2 on a Grand Teton H100 node (500 W) at a 57 C inlet: every throttled GPU
    sits at its 89 C slowdown temperature (the stale bracket had left them at 88.987 C, the step 0.05 %
    long), the others at or below it, none slower than its stage's pace."""
    m, c = load_model("llama3-8b"), load_cluster("grand-teton-h100")
    p, r = load_profile(c.gpu.key), stack_recipe(get_stack("megatron"), 64, 8192, "bf16", gpu=c.gpu)
    lay = dict(tp=2, pp=2, dp=2, cp=1, ep=1, etp=2, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    e = predict_run(m, r, c, p, lay, inlet_temp_c=inlet_c).energy
    slow = c.gpu.slowdown_temp_c
    assert e.throttled and any(g["throttled"] for g in e.per_gpu)
    for g in e.per_gpu:
        assert g["temp_c"] == pytest.approx(slow, abs=0.01) if g["throttled"] else g["temp_c"] <= slow + 0.01
    pace = {s: min(g["sm_clock_mhz"] for g in e.per_gpu if g["stage"] == s) for s in (0, 1)}
    assert e.sm_clock_mhz == pytest.approx(min(pace.values()), rel=1e-9)
