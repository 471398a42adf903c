"""Power, temperature and energy: the six behaviours of the seed characterization
(32x H200 vs 64x H100 on 100 Gb/s InfiniBand, gbs 128), on the built-in catalog and profiles."""
import numpy as np
import pytest

from costmodel.comm import data_parallel_comm_times
from costmodel.errors import InputError
from costmodel.layouts import LayoutTable
from costmodel.predict import predict_run, predict_table
from costmodel.specs import Recipe, load_cluster, load_model, load_profile

L70 = load_model("llama3-70b")
R = Recipe(gbs=128, seq_len=8192)
BASE = dict(tp=4, pp=4, dp=2, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)


@pytest.fixture(scope="module")
def h200():
    c = load_cluster("paper-h200")
    return c, load_profile(c.gpu.key)


def layout_energy(model, recipe, c, p, lay, caps_w=None, **kw):
    """The energy report of one layout through the one prediction path (per-stage caps allowed)."""
    from costmodel.energy import layout_energy as per_stage
    run = predict_run(model, recipe, c, p, lay, energy=False)
    return per_stage(model, recipe, c, p, run.terms, caps_w=caps_w, **kw)


def energy(h200, **kw):
    c, p = h200
    inlet = kw.pop("inlet_temp_c", None)
    caps = kw.pop("caps_w", None)
    return layout_energy(L70, R, c, p, dict(BASE, **kw), caps_w=caps, inlet_temp_c=inlet)


def test_rear_slots_run_hotter_and_throttle_first_stretching_the_step(h200):
    e = energy(h200)
    node0 = [g for g in e.per_gpu if g["node"] == 0]
    front = np.mean([g["temp_c"] for g in node0 if g["slot"] < 4])
    rear = np.mean([g["temp_c"] for g in node0 if g["slot"] >= 4])
    assert rear > front + 3.0                       # preheated air: rear row hotter
    assert not e.throttled
    # raise the inlet until the first GPU reaches its slowdown temperature
    for inlet in range(31, 70):
        hot = energy(h200, inlet_temp_c=inlet)
        if hot.throttled:
            break
    assert hot.throttled
    first = {g["slot"] for g in hot.per_gpu if g["throttled"]}
    assert first and first <= {4, 5, 6, 7}          # only rear slots throttle first
    assert hot.step_time_s > e.step_time_s          # ... and the synchronous step slows for all
    assert hot.max_temp_c == pytest.approx(load_cluster("paper-h200").gpu.slowdown_temp_c, abs=0.05)


def test_bigger_microbatches_raise_peak_power_and_the_bubble(h200):
    c, p = h200
    peaks, bubbles, steps = [], [], []
    for mbs in (1, 2, 4, 8):
        lay = dict(BASE, tp=8, dp=1, mbs=mbs, recompute="full")
        pred = predict_table(L70, R, c, p, LayoutTable.from_rows([lay]))
        assert pred.feasible[0]
        bubbles.append(pred.breakdown["bubble_s"][0] / pred.step_time_s[0])
        e = layout_energy(L70, R, c, p, lay)
        peaks.append(e.peak_power_w)
        steps.append(e.step_time_s)
    assert np.all(np.diff(peaks) > 0)               # denser, longer GEMM bursts
    assert np.all(np.diff(bubbles) > 0)             # fewer micro-batches: (p-1)/m grows
    assert steps[-1] > steps[0]                     # past the point where throughput improves


def test_overlap_shortens_the_step_but_raises_peak_power_and_temperature(h200):
    on, off = energy(h200, overlap=True), energy(h200, overlap=False)
    assert on.step_time_s < off.step_time_s
    assert on.peak_power_w > off.peak_power_w
    assert on.max_temp_c > off.max_temp_c


def test_full_recompute_costs_energy_with_its_time(h200):
    """Full recompute re-runs the forward GEMMs: a longer step at the compute-bound step's power, so the
    energy grows with the time (within 10%) and the average power stays within 5% of the step without it."""
    none, full = energy(h200, recompute="none"), energy(h200, recompute="full")
    assert full.step_time_s > 1.15 * none.step_time_s
    assert full.energy_j_per_step / none.energy_j_per_step == pytest.approx(full.step_time_s / none.step_time_s,
                                                                             rel=0.10)
    assert full.avg_power_w == pytest.approx(none.avg_power_w, rel=0.05)


def test_power_cap_trades_time_for_energy(h200):
    free = energy(h200)
    capped = energy(h200, caps_w=[400.0] * 4)
    assert capped.step_time_s > free.step_time_s
    assert capped.energy_j_per_step < free.energy_j_per_step
    assert capped.peak_power_w <= 400.0 + 1e-6
    assert capped.sm_clock_mhz < free.sm_clock_mhz
    with pytest.raises(InputError, match="power-limit range"):
        energy(h200, caps_w=[150.0] * 4)            # below the H200's 200 W minimum limit


def _step(cluster, **kw):
    c = load_cluster(cluster)
    lay = dict(BASE, tp=8, **kw)
    lay["dp"] = c.num_gpus // (lay["tp"] * lay["pp"] * lay["cp"])
    return predict_table(L70, R, c, load_profile(c.gpu.key), LayoutTable.from_rows([lay])).step_time_s[0]


def test_scale_up_vs_scale_out():
    # communication-bound: deep interleaved PP (VP 10: 2 layers a chunk) over 8 nodes on one 100 Gb/s NIC
    # each (H100) loses to 32 H200 (at NCCL's stated 12 of 12.5 GB/s per 100G NIC VP 5 no longer does)
    assert _step("paper-h200", pp=4) < _step("paper-h100", pp=8, vp=10)
    # compute-bound: 64 H100 with one stage per node beat 32 H200
    assert _step("paper-h100", pp=8) < _step("paper-h200", pp=4)


def test_warm_up_from_cold_stays_below_steady_state(h200):
    c, p = h200
    steady = layout_energy(L70, R, c, p, BASE)
    warm = layout_energy(L70, R, c, p, BASE, warm_steps=2)
    assert warm.warm_max_temp_c < steady.max_temp_c
    many = layout_energy(L70, R, c, p, BASE, warm_steps=1000)
    assert many.warm_max_temp_c == pytest.approx(steady.max_temp_c, abs=0.01)


def test_hot_inlets_never_take_the_clock_below_hw_slowdown(h200):
    """Llama 3 70B on the paper's H200 cluster from 0 to 60 C inlet: the clock never falls below half the
    maximum (HW slowdown, nvml.h 'a factor of 2 or more'); where even that cannot hold the slowdown
    temperature the report says HW slowdown and the GPU runs hotter than it; the step grows with
    the inlet."""
    c, p = h200
    boost = c.gpu.full_clock_mhz       # 1980 MHz, not the 1830 the peaks are quoted at
    steps = []
    for inlet in (0.0, 20.0, 40.0, 50.0, 55.0, 60.0):
        e = energy(h200, recompute="full", inlet_temp_c=inlet)
        assert e.sm_clock_mhz >= 0.5 * boost - 1e-6
        assert e.hw_slowdown == (e.max_temp_c > c.gpu.slowdown_temp_c + 0.05)
        steps.append(e.step_time_s)
    assert steps == sorted(steps)
    # a what-if GPU that slows down at 65 C: at a 55 C inlet even half the clock cannot hold it there
    from dataclasses import replace
    c65 = replace(c, gpu=replace(c.gpu, slowdown_temp_c=65.0))
    cool = energy((c65, p), recompute="full", inlet_temp_c=20.0)
    hot = energy((c65, p), recompute="full", inlet_temp_c=55.0)
    assert not cool.hw_slowdown and cool.max_temp_c < 65.0
    assert hot.hw_slowdown and hot.max_temp_c > 65.0
    assert hot.sm_clock_mhz == pytest.approx(0.5 * boost, rel=1e-9)
    assert any(r["hw_slowdown"] for r in hot.per_gpu)


def test_peak_power_is_never_below_the_average():
    """Qwen3-30B-A3B on 8 H100 with 64-token sequences: the step-level terms draw more than the
    micro-batch period, yet the peak a meter sees is at least the step's average (every GPU)."""
    c = load_cluster("dgx-h100", nodes=1)
    p = load_profile(c.gpu.key)
    m = load_model("qwen3-30b-a3b")
    r = Recipe(gbs=8, seq_len=64, moe_dispatcher="alltoall")
    e = predict_run(m, r, c, p, dict(BASE, tp=1, pp=1, dp=8, ep=8, sp=False)).energy
    assert e.peak_power_w >= e.avg_power_w
    assert all(g["peak_power_w"] >= g["power_w"] - 1e-9 for g in e.per_gpu)


def test_a_cap_never_takes_the_clock_below_the_gpus_lowest():
    """Llama 3 8B on one DGX B200 at its 200 W minimum limit: the clock holds at the B200's lowest,
    120 MHz, where the GPU draws more than the cap it cannot meet (an idle B200 draws 190 W there,
    nvidia-smi); on one DGX A100 the 100 W minimum limit holds, at about 250 MHz, above the A100's
    lowest 210 MHz: of its 85 W idle only the static 57 W stays at a low clock."""
    m = load_model("llama3-8b")
    lay = dict(BASE, tp=1, pp=1, dp=8, recompute="full")
    c = load_cluster("dgx-b200", nodes=1)
    floor = predict_run(m, R, c, load_profile(c.gpu.key), lay, caps_w=200.0).energy
    assert c.gpu.min_clock_mhz == 120 and floor.sm_clock_mhz == pytest.approx(120.0)
    assert floor.avg_power_w > 200.0 and floor.cap_unmet
    # 250 W holds, just above the lowest clock: not flagged, and no class reported above the cap (the
    # B200's 251 W idle_w is no floor once the clock falls)
    met = predict_run(m, R, c, load_profile(c.gpu.key), lay, caps_w=250.0).energy
    assert 120.0 < met.sm_clock_mhz < 140.0 and not met.cap_unmet and met.compute_power_w <= 250.0 + 1e-6
    c = load_cluster("dgx-a100")
    low = predict_run(m, R, c, load_profile(c.gpu.key), lay, caps_w=100.0).energy
    assert 230.0 < low.sm_clock_mhz < 270.0 and low.peak_power_w <= 100.0 + 1e-6 and not low.cap_unmet


def _fsdp_16_h100_gpu_0_3_at_400_mhz():
    """(cluster, profile, model, layout, energy unpinned, energy with GPU 0:3 at 400 MHz) of Llama 3 8B
    FSDP on 2 x 8 H100."""
    c = load_cluster("dgx-h100", nodes=2)
    p = load_profile(c.gpu.key)
    m = load_model("llama3-8b")
    lay = dict(BASE, tp=1, pp=1, dp=16, zero=3)
    return (c, p, m, lay, predict_run(m, R, c, p, lay).energy,
            predict_run(m, R, c, p, lay, derate={(0, 3): 400.0}).energy)


def test_a_derated_gpu_slows_the_whole_synchronous_step():
    """Llama 3 8B FSDP on 2 x 8 H100 (one stage of 16 GPUs): pinning GPU 0:3 at 400 MHz stretches the
    compute-bound time of every rank by at most 1980/400 (they wait for it in every collective; 1980 MHz
    is the H100's 'Max Clocks: SM', where the unthrottled kernels of the profile ran), the memory- and
    communication-bound time not at all; a pin at the maximum changes nothing; the per-GPU rows name
    the slow GPU; a GPU outside the layout or a clock outside the GPU's range is refused."""
    c, p, m, lay, free, slow = _fsdp_16_h100_gpu_0_3_at_400_mhz()
    ratio = slow.step_time_s / free.step_time_s
    assert 1.5 < ratio < 1980 / 400
    assert slow.sm_clock_mhz == pytest.approx(400.0)
    assert [(g["node"], g["slot"]) for g in slow.per_gpu if g["derated_mhz"]] == [(0, 3)]
    with pytest.raises(InputError, match="not in the layout"):
        predict_run(m, R, c, p, lay, derate={(2, 0): 400.0})
    at_max = predict_run(m, R, c, p, lay, derate={(0, 3): 1980.0}).energy
    assert at_max.step_time_s == pytest.approx(free.step_time_s, rel=1e-9)
    with pytest.raises(InputError, match="outside H100-SXM-80GB's clocks 345-1980 MHz"):
        predict_run(m, R, c, p, lay, derate={(0, 0): 100.0})


def test_a_derated_gpus_stage_mates_run_at_their_own_clock_and_wait_drawing_power():
    """The 15 other GPUs of that stage run their kernels at the clock they had, then wait in the
    collectives for the slow one at the waiting power (idle + spin, README 'Power'): each draws more
    than the derated GPU and more than waiting alone; the step's energy rises with its length
    (a straggler costs energy, it saves none), and is the sum of the 16 GPUs' average powers x step."""
    c, p, m, lay, free, slow = _fsdp_16_h100_gpu_0_3_at_400_mhz()
    pinned = [g for g in slow.per_gpu if g["derated_mhz"]]
    mates = [g for g in slow.per_gpu if not g["derated_mhz"]]
    assert all(g["sm_clock_mhz"] == pytest.approx(free.per_gpu[0]["sm_clock_mhz"]) for g in mates)
    wait_w = p.power.idle_w + p.power.coeff_w["spin"]
    assert all(g["power_w"] > max(pinned[0]["power_w"], wait_w) for g in mates)
    assert slow.energy_j_per_step > free.energy_j_per_step
    rows = {(g["node"], g["slot"]): g["power_w"] for g in slow.per_gpu}
    listed = rows[(0, 3)] + 7 * rows[(0, 0)] + 8 * rows[(1, 0)] if (1, 0) in rows else rows[(0, 3)] + 15 * rows[(0, 0)]
    assert slow.energy_j_per_step == pytest.approx(listed * slow.step_time_s, rel=1e-9)


def test_thermal_caps_are_a_fixed_point_a_derate_above_the_thermal_clock_changes_nothing():
    """Llama 3 70B on 2 x 8 H100 at a 60 C inlet: the rear-row stages throttle; derating a GPU of a
    throttled stage above the clock that stage already runs at changes nothing (the stages are
    re-solved in turn until none changes, so no earlier throttle sticks); compute_power_w is the
    level above which a cap stops binding (the step at that cap equals the uncapped one, a cap 5 %
    lower slows it); a cap the lowest clock cannot meet is flagged."""
    c = load_cluster("dgx-h100", nodes=2)
    p = load_profile(c.gpu.key)
    lay = dict(BASE, tp=4, pp=4, dp=1, recompute="full")
    hot = predict_run(L70, R, c, p, lay, inlet_temp_c=60.0).energy
    slow_stage = max(hot.per_gpu, key=lambda g: -g["sm_clock_mhz"])
    node, slot, mhz = slow_stage["node"], slow_stage["slot"], slow_stage["sm_clock_mhz"]
    same = predict_run(L70, R, c, p, lay, inlet_temp_c=60.0, derate={(node, slot): min(mhz + 100, 1980.0)}).energy
    # the same fixed point, to the solver's clock tolerance (1e-8 of the maximum clock)
    assert same.step_time_s == pytest.approx(hot.step_time_s, rel=1e-7)
    assert same.energy_j_per_step == pytest.approx(hot.energy_j_per_step, rel=1e-7)
    free = predict_run(L70, R, c, p, lay).energy
    at = predict_run(L70, R, c, p, lay, caps_w=min(700.0, free.compute_power_w + 0.5)).energy
    below = predict_run(L70, R, c, p, lay, caps_w=0.95 * free.compute_power_w).energy
    assert at.step_time_s == pytest.approx(free.step_time_s, rel=1e-6) and below.step_time_s > free.step_time_s
    assert not free.cap_unmet and free.compute_power_w > free.peak_power_w


def test_waiting_gpus_draw_spin_power_not_idle_power(h200):
    """Llama 3 70B, TP4 PP4 DP2 on 32 H200 with 64 micro-batches: every GPU waits through the
    pipeline bubble and, on the faster stages, for the slowest one.  Waiting is spinning in NCCL at
    idle + spin_w (34 W on Hopper, fitted from the H100 DDP trace), so the step's energy exceeds the
    same prediction with spin_w = 0 by exactly spin_w x the summed waiting time of every GPU."""
    from dataclasses import replace as dc_replace
    from costmodel.energy import power_params, stage_state, stage_terms
    from costmodel.power import wait_power_w
    c, p = h200
    lay = dict(BASE, recompute="full")
    run = predict_run(L70, R, c, p, lay, energy=False)
    spin = p.power.coeff_w["spin"]
    assert spin == pytest.approx(33.9, abs=0.5)
    still = dc_replace(p, power=dc_replace(p.power, coeff_w=dict(p.power.coeff_w, spin=0.0)))
    e_spin = layout_energy(L70, R, c, p, lay)
    e_still = layout_energy(L70, R, c, still, lay)
    st = stage_terms(L70, R, c, p, run.terms)
    pw = power_params(c, p)
    s = stage_state(st, pw, np.full(4, pw.max_cap_w))
    wait_s = s.step_time_s - st.m * (s.t_mb_s - st.exposed_comm_s) - st.m * st.exposed_comm_s - st.const_s
    assert wait_s.min() >= 3 * s.t_mb_s.min() - 1e-9       # at least the bubble: PP - 1 micro-batch periods
    expect = spin * float(np.sum(wait_s * st.stage_gpus))
    assert e_spin.energy_j_per_step - e_still.energy_j_per_step == pytest.approx(expect, rel=1e-6)
    assert wait_power_w(pw) == pytest.approx(pw.idle_w + spin)


def test_a_gpu_past_its_shutdown_temperature_makes_the_layout_infeasible(tmp_path):
    """A chassis whose slots run 3.8x the rated junction rise: at a 25 C inlet the thermal throttle holds
    the GPUs at their 89 C slowdown temperature; at 30 C the rear GPUs hold in HW slowdown (about 92.5 C,
    below the H100's 95 C shutdown: nvidia-smi -q margin -8 C over 87 C); at 45 C they would pass 95 C
    even at half clock, so the layout cannot run and the reason names the GPU."""
    import yaml
    from costmodel.specs import hardware_dir
    src = yaml.safe_load((hardware_dir() / "clusters" / "dgx-h100.yaml").read_text())
    src["cooling"]["slots"] = [dict(s, r_th_scale=3.8) for s in src["cooling"]["slots"]]
    f = tmp_path / "hot.yaml"
    f.write_text(yaml.safe_dump(src))
    c = load_cluster(str(f))
    p = load_profile(c.gpu.key)
    m = load_model("llama3-8b")
    lay = dict(BASE, tp=4, pp=1, dp=2, recompute="full")
    r = Recipe(gbs=128, seq_len=2048)
    held = predict_run(m, r, c, p, lay, inlet_temp_c=25.0)
    assert held.feasible and held.energy.throttled and not held.energy.hw_slowdown
    assert held.energy.max_temp_c == pytest.approx(89.0, abs=0.1)
    ok = predict_run(m, r, c, p, lay, inlet_temp_c=30.0)
    assert ok.feasible and ok.energy.hw_slowdown and c.gpu.shutdown_temp_c == 95.0
    assert 89.0 < ok.energy.max_temp_c <= 95.0
    hot = predict_run(m, r, c, p, lay, inlet_temp_c=45.0)
    assert not hot.feasible and hot.energy.max_temp_c > 95.0
    assert "GPU 0:4" in hot.reason and "shutdown temperature 95 C" in hot.reason


@pytest.mark.parametrize("nic_gbps", [400, 100])
def test_ilp_option_prices_the_step_communication_as_the_stage_model_does(nic_gbps):
    """An ILP option's energy at TDP caps and the default split against predict's per-stage energy
    (GPUs only): the exposed DP reduction, optimizer step and stage-boundary sends draw the link phase's
    power held at the stage's cap in both (the option's stage_comm_energy_j), not the waiting power;
    Llama 3 70B TP4 PP4 VP10 over 1,024-way DP, on NDR NICs and on 100 Gb/s ones, where that
    communication is a large share of a 4-micro-batch step (a cap-independent charge at the lowest
    cap's power once left the ILP 10% short there; the NIC-paced DP reduction now draws about idle +
    spin, under every cap, so the stage-boundary sends and the optimizer carry the cap's share)."""
    from costmodel.ilp.evaluation import _times_energy
    from costmodel.optimize import build_option, cap_levels
    from costmodel.specs import with_fabric
    m, p = load_model("llama3-70b"), load_profile("h100-sxm-80gb")
    c = with_fabric(load_cluster("dgx-h100", 2048), scale_out_gbps=nic_gbps)
    r = Recipe(gbs=4096, seq_len=8192, dp_overlap=True, tp_comm_overlap=True)
    lay = dict(tp=4, pp=4, dp=1024, cp=1, ep=1, vp=10, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    run = predict_run(m, r, c, p, lay)
    caps = cap_levels(c, p, None, n=5)
    o = build_option(run, caps)
    e = o.stage_comm_energy_j
    assert e[0] > 0 and np.all(np.diff(e) >= 0) and e[-1] > e[0]      # the link phase held at each cap
    top = [len(caps) - 1] * 4
    t, tau, T, E = _times_energy(o, top, np.array([[20, 20, 20, 20]]))
    # the ILP prices the equal-stage schedule (m + (p-1)/v) tau; the stage model the critical path
    # m tau + (sum_s t_s - tau)/v, lower by (p-1)/v (tau - mean_s t_s): the logits' stage is slower
    gap = 3 / 10 * float(tau[0] - t[0].mean())
    assert gap > 0 and float(T[0]) - gap == pytest.approx(run.energy.step_time_s, rel=1e-3)
    assert float(E[0]) == pytest.approx(run.energy.energy_j_per_step, rel=0.002)
    # charged at the lowest cap's link power instead, the communication-heavy step falls short
    low = float(E[0]) - 4 * (e[-1] - e[0])
    assert abs(low / run.energy.energy_j_per_step - 1) > (0.02 if nic_gbps == 100 else 0.002)


def test_stages_straddling_nodes_are_evaluated_on_representative_nodes(h200, monkeypatch):
    """PP2 of TP4 x DP15 = 60 GPUs a stage on 8-GPU nodes: stages straddle node 7.  Evaluating each
    stage's first, second and last nodes gives the step, energy, power and hottest GPU of listing
    all 15 nodes (nodes do not heat each other), with rows for nodes 0, 1, 7, 8, 14; a 3,168,560-node recommend
    once built 25M rows and ran out of memory."""
    import costmodel.energy as en
    c, p = h200
    c = load_cluster("paper-h200", 15)          # 120 GPUs: the layout's
    lay = dict(BASE, tp=4, pp=2, dp=15)
    m = load_model("llama3-8b")
    r = Recipe(gbs=120, seq_len=4096)
    full = layout_energy(m, r, c, p, lay)
    monkeypatch.setattr(en, "EVERY_NODE_UP_TO", 0)
    rep = layout_energy(m, r, c, p, lay)
    assert len(full.per_gpu) == 120 and {g["node"] for g in rep.per_gpu} == {0, 1, 7, 8, 14}
    for f in ("step_time_s", "energy_j_per_step", "avg_power_w", "peak_power_w", "max_temp_c"):
        assert getattr(rep, f) == pytest.approx(getattr(full, f), rel=1e-12), f
    by_gpu = {(g["node"], g["slot"]): g["temp_c"] for g in full.per_gpu}
    assert all(g["temp_c"] == pytest.approx(by_gpu[(g["node"], g["slot"])]) for g in rep.per_gpu)


@pytest.mark.parametrize("pp_overlap", [True, False])
def test_a_limit_that_binds_nothing_leaves_the_schedules_step(pp_overlap):
    """NeMo's Llama 3 70B at TP4 PP4 VP10 with the stage-boundary sends hidden under the next virtual
    stage (or not): at the 700 W limit, which no kernel of it reaches, the stage model's step equals the time model's, to
    the rounding; the warm-up and flush expose every stage's sends in both (a step shorter than the
    uncapped one was the stage model forgetting them)."""
    m, c, p = load_model("llama3-70b"), load_cluster("dgx-h100", 8), load_profile("h100-sxm-80gb")
    r = Recipe(gbs=128, seq_len=8192, precision="fp8", stack="nemo", pp_overlap=pp_overlap)
    lay = dict(tp=4, pp=4, dp=2, cp=1, ep=1, vp=10, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    run = predict_run(m, r, c, p, lay, caps_w=700.0)
    assert run.energy.step_time_s == pytest.approx(run.step_time_s, rel=1e-9)
    if pp_overlap:
        assert run.terms.step.pp_hidden_s[0] > 0


def test_fsdp_copies_and_gradient_accumulation_are_memory_bound_kernels(h200):
    """FSDP2's copies around its collectives (ZeRO-3 without a pipeline) and torchtitan's fp32
    gradient accumulation under a pipeline (ZeRO-1, 8 micro-batches) are HBM passes inside the
    layer's contention term: the energy model's memory class holds them (time set by HBM, not by the
    SM clock), and the GEMM class keeps only the rest."""
    from costmodel.energy import layer_blocks
    from costmodel.layouts import microbatches, recomputed_fraction
    from costmodel.schedule import fsdp_copy_s, grad_accum_s
    from conftest import layout
    c, p = h200
    m = load_model("llama3-8b")
    r = Recipe(gbs=64, seq_len=8192, stack="torchtitan")
    for kw in (dict(dp=8, zero=3, mbs=1), dict(pp=2, dp=4, zero=1, mbs=2)):
        t = layout(**kw)
        pred = predict_table(m, r, c, p, t)
        ct, st = pred.terms.compute, pred.terms.step
        f, b = fsdp_copy_s(m, r, c, p, t)
        n_mb = microbatches(r, t.dp, t.mbs)
        passes = f + b + grad_accum_s(m, r, c, p, t) * (n_mb - 1) / n_mb
        assert st.layer_memory_pass_s[0] == pytest.approx(float(np.asarray(passes).ravel()[0]), rel=1e-12)
        assert st.layer_memory_pass_s[0] > 0
        ew = ct.layer_ew_fwd_s * (1 + recomputed_fraction(m, t)) + ct.layer_ew_bwd_s
        mem_s = layer_blocks(m, r, c, p, pred.terms)["layer"]["classes"]["memory"][0]
        assert mem_s[0] == pytest.approx(ew[0] + st.layer_memory_pass_s[0], rel=1e-12)


def test_a_nic_paced_dp_reduction_draws_the_nccl_kernel_s_power_not_nvlink_s():
    """Llama 3 8B over 32-way DP on the paper's H200 cluster (100 Gb/s InfiniBand a node), where the
    exposed all-reduce is most of the step: across nodes the GPU's links carry the NIC's rate (1.6 of
    450 GB/s a GPU) while NCCL's kernels run (idle + spin + a sliver of link power), inside a node NVLink
    runs at the fitted all-reduce efficiency.  GPU energy against the power cap is then one U (it had
    a second hump where the cap met the reduction's NVLink-rate power)."""
    from costmodel.energy import _u_link, dp_comm_util
    c = load_cluster("paper-h200")
    p = load_profile(c.gpu.key)
    u = _u_link(p)
    t = LayoutTable.from_rows([dict(BASE, tp=1, pp=1, dp=32, sp=False), dict(BASE, tp=1, pp=1, dp=8, sp=False)])
    m = load_model("llama3-8b")
    r = Recipe(gbs=64, seq_len=8192)
    out = data_parallel_comm_times(m, r, c, p, t).dp_scale_out_share
    assert list(out) == [1.0, 0.0]
    got = dp_comm_util(c, out, u)
    share = c.node_nic_bytes_per_s / c.gpus_per_node / c.intra_bytes_per_s
    assert got["link"][0] == pytest.approx(u * share) and share < 0.01 and got["spin"][0] == 1.0
    assert got["link"][1] == pytest.approx(u) and got["spin"][1] == 0.0
    # an NVL72 rack's nodes share one NVLink domain: 16-way DP over 4 of its nodes stays NVLink-paced
    nvl = load_cluster("gb200-nvl72", nodes=18)
    t16 = LayoutTable.from_rows([dict(BASE, tp=1, pp=1, dp=16, sp=False)])
    assert data_parallel_comm_times(m, r, nvl, load_profile(nvl.gpu.key), t16).dp_scale_out_share[0] == 0.0
    lay = dict(BASE, tp=1, pp=1, dp=32, sp=False)
    runs = [predict_run(m, r, c, p, lay, caps_w=float(w)) for w in (200, 250, 300, 350, 400, 460, 550, 620, 700)]
    assert runs[-1].breakdown["dp_comm_s"] > 0.5 * runs[-1].step_time_s
    e = np.array([x.energy.energy_j_per_step for x in runs])
    turns = np.flatnonzero(np.diff(np.sign(np.diff(e))) != 0)
    assert len(turns) == 1 and e[turns[0] + 1] < min(e[0], e[-1]), e       # one minimum, inside the range


def test_hsdp_dp_phase_mixes_nvlink_shard_traffic_with_nic_paced_replica_traffic():
    """HSDP on 4 DGX H100 nodes, ZeRO-1 sharded over each node's 8 GPUs and replicated 4 times: the
    reduce-scatter and all-gather stay on NVLink, the replica all-reduce of each shard crosses the
    NICs.  The DP phase's scale-out share is the replica all-reduce's share of the DP time (each part
    timed apart with costmodel.collective.group_time_s), and its link utilisation the time-weighted mix
    of NVLink's rate and the NIC's; plain ZeRO-1 over the 32 ranks spans the nodes throughout."""
    from costmodel.comm import group_time_s
    from costmodel.energy import _u_link, dp_comm_util
    from costmodel.stage_params import grad_bytes, stage_params
    c = load_cluster("dgx-h100", nodes=4)
    p = load_profile(c.gpu.key)
    m = load_model("llama3-8b")
    r = Recipe(gbs=64, seq_len=8192, dp_overlap=False)          # one bucket: each part one collective
    rows = [dict(BASE, tp=1, pp=1, dp=32, sp=False, zero=1, dp_replicate=4),
            dict(BASE, tp=1, pp=1, dp=32, sp=False, zero=1)]
    t = LayoutTable.from_rows(rows)
    f = data_parallel_comm_times(m, r, c, p, t).dp_scale_out_share
    params = float(stage_params(m, t.take([0]), False)[0][0])
    gb = grad_bytes(r)
    rs = group_time_s("reduce_scatter", params * gb, 1, 8, c, p)
    ag = group_time_s("all_gather", params * 2, 1, 8, c, p)             # bf16 parameters
    ar = group_time_s("all_reduce", params / 8 * gb, 8, 4, c, p)
    assert f[0] == pytest.approx(ar / (rs + ag + ar), rel=1e-9) and 0.0 < f[0] < 1.0
    assert f[1] == 1.0
    u = _u_link(p)
    nic = c.node_nic_bytes_per_s / c.gpus_per_node / c.intra_bytes_per_s
    got = dp_comm_util(c, f, u)
    assert got["link"][0] == pytest.approx(u * ((1 - f[0]) + f[0] * nic)) and got["spin"][0] == pytest.approx(f[0])


def test_a_derated_gpu_is_listed_whatever_node_stands_for_its_stage():
    """GPT-3 175B at TP 8 PP 2 on the paper's H100 cluster: a stage fills whole nodes, so its first
    node stands for the others in the per-GPU rows; derating GPU 5:3 lists node 5 too, naming the GPU,
    and the line under the breakdown blames the pin, not the power limit."""
    from costmodel import report
    c = load_cluster("paper-h100")
    p = load_profile(c.gpu.key)
    lay = dict(BASE, tp=8, pp=2, dp=c.num_gpus // 16, recompute="full")
    run = predict_run(load_model("gpt3-175b"), Recipe(gbs=256, seq_len=2048), c, p, lay, derate={(5, 3): 1200.0})
    rows = [g for g in run.energy.per_gpu if g["derated_mhz"]]
    assert [(g["node"], g["slot"], g["derated_mhz"]) for g in rows] == [(5, 3, 1200.0)]
    assert rows[0]["sm_clock_mhz"] == pytest.approx(1200.0)
    line = report.power_limit_line(report.run_record(run), c.gpu.full_clock_mhz)
    assert line.startswith("derated: GPU 5:3 at 1200 MHz sets its stage's pace")


def test_a_derate_follows_the_device_order_to_its_stage(h200):
    """--derate names a physical GPU: under an order that runs local rank 0 on slot 7, pinning slot 7
    slows stage 0 (rank 0's), and the row of slot 7 carries the pin."""
    c, p = h200
    lay = dict(BASE, tp=2, pp=4, dp=4)
    order = {None: (7, 6, 5, 4, 3, 2, 1, 0)}
    e = layout_energy(L70, R, c, p, lay, derate={(0, 7): 900.0}, device_order=order)
    pinned = [g for g in e.per_gpu if g["derated_mhz"]]
    assert [(g["node"], g["slot"], g["rank"], g["stage"]) for g in pinned] == [(0, 7, 0, 0)]
    with pytest.raises(InputError, match="is not each of the 8 slots 0-7 once"):
        layout_energy(L70, R, c, p, lay, device_order={0: (0, 1, 2, 3, 4, 5, 6, 6)})
    with pytest.raises(InputError, match="node 9 is not in the layout"):
        layout_energy(L70, R, c, p, lay, device_order={9: tuple(range(8))})


def test_a_hot_gpu_slows_alone_while_its_stage_mates_wait_at_their_own_clock(h200, tmp_path):
    """paper-h200 with a rear slot 7 whose junction runs 3x hotter per watt: only that GPU reaches its
    slowdown temperature.  Thermal slowdown is per device (nvml.h: the GPU reduces its own core clocks),
    so its stage-mates run at the unthrottled clock and wait for it at the waiting power, as for a
    derated straggler: the throttled step costs more energy than the cool one, where the whole stage
    had been slowed and the step had looked 14 % cheaper."""
    from costmodel.specs import load_cluster as load
    src = open(load("paper-h200").path).read()
    rear = "    - {row: rear, r_th_scale: 1.0}\n"
    assert src.count(rear) == 4
    i = src.rindex(rear)
    f = tmp_path / "hot.yaml"
    f.write_text(src[:i] + "    - {row: rear, r_th_scale: 3.0}\n" + src[i + len(rear):])
    c, p = load(str(f), nodes=8), h200[1]
    lay = dict(BASE, dp=1, recompute="full")
    hot = predict_run(L70, R, c, p, lay).energy
    cool = predict_run(L70, R, load("paper-h200", nodes=8), p, lay).energy
    node0 = sorted((g for g in hot.per_gpu if g["node"] == 0), key=lambda g: g["slot"])
    assert [g["throttled"] for g in node0] == [False] * 7 + [True]
    free_mhz = node0[0]["sm_clock_mhz"]
    assert all(g["sm_clock_mhz"] == pytest.approx(free_mhz) for g in node0[:7])
    assert node0[7]["sm_clock_mhz"] < 0.9 * free_mhz
    assert node0[7]["temp_c"] == pytest.approx(c.gpu.slowdown_temp_c, abs=0.05)
    assert hot.step_time_s > 1.1 * cool.step_time_s
    assert hot.energy_j_per_step > cool.energy_j_per_step


def test_only_the_gpus_past_their_slowdown_on_their_own_clock_throttle(h200):
    """paper-h200 at a 58 C inlet: the rear row throttles at 89 C; the front row, at 87 C on its own clock,
    does not (it had been slowed with its stage to 84 C and counted throttled)."""
    c, p = h200
    lay = dict(BASE, tp=2, pp=4, cp=2, dp=1, vp=2)
    rows = predict_run(L70, R, c, p, lay, inlet_temp_c=58.0).energy.per_gpu
    node0 = sorted((g for g in rows if g["node"] == 0), key=lambda g: g["slot"])
    assert [g["throttled"] for g in node0] == [False] * 4 + [True] * 4
    assert all(g["temp_c"] < c.gpu.slowdown_temp_c - 0.5 for g in node0[:4])
    assert all(g["temp_c"] == pytest.approx(c.gpu.slowdown_temp_c, abs=0.05) for g in node0[4:])
    assert node0[0]["sm_clock_mhz"] > node0[4]["sm_clock_mhz"] + 100


def test_a_derate_beside_a_hot_gpu_never_slows_the_step_past_both(h200, tmp_path):
    """A stage with a GPU whose junction runs 3x hotter per watt and a stage-mate pinned below the hot
    GPU's thermal clock: the pin sets the pace, the hot GPU runs at it, cooler than its slowdown.  Its
    stage's ceiling had been bisected to the HW-slowdown clock for a GPU it did not slow (a step 11 %
    slower than with no derate at all); a derated GPU that also holds at its slowdown temperature is
    said throttled."""
    from costmodel.specs import load_cluster as load
    src = open(load("paper-h200").path).read()
    rear = "    - {row: rear, r_th_scale: 1.0}\n"
    i = src.rindex(rear)
    f = tmp_path / "hot.yaml"
    f.write_text(src[:i] + "    - {row: rear, r_th_scale: 3.0}\n" + src[i + len(rear):])
    c, p = load(str(f), nodes=2), h200[1]
    lay = dict(BASE, dp=1, recompute="full")
    boost = c.gpu.full_clock_mhz
    hot = predict_run(L70, R, c, p, lay).energy
    pinned_cool = predict_run(L70, R, load("paper-h200", nodes=2), p, lay, derate={(0, 4): 0.65 * boost}).energy
    both = predict_run(L70, R, c, p, lay, derate={(0, 4): 0.65 * boost}).energy
    assert both.step_time_s <= max(hot.step_time_s, pinned_cool.step_time_s) * (1 + 1e-4)   # bisection tolerance
    assert not both.hw_slowdown
    held = predict_run(L70, R, c, p, lay, derate={(0, 7): 0.99 * boost, (1, 7): 0.99 * boost}).energy
    assert held.throttled and any(g["throttled"] for g in held.per_gpu if g["slot"] == 7)


def test_a_warmer_inlet_never_speeds_the_step_and_each_gpu_throttles_only_as_far_as_it_must():
    """Llama 3 8B, TP2 DP4 on one DGX H100, inlets 56-60 C by 0.25 C: past the slowdown each GPU holds
    at its own clock (nvml.h: the GPU reduces its own core clocks), so the front row, just past its
    89 C, runs faster than the rear row that sets the pace, and the step only lengthens as the inlet
    warms.  The front row had been held at the rear's clock, so its lower power preheated the rear
    less: at 58.25 C the step came out 1.2 % faster than at 58 C and the energy 8.6 % lower."""
    from costmodel.stacks import get_stack, stack_recipe
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100")
    p, r = load_profile(c.gpu.key), stack_recipe(get_stack("megatron"), 64, 8192, "bf16", gpu=c.gpu)
    lay = dict(tp=2, pp=1, dp=4, cp=1, ep=1, etp=2, vp=1, mbs=1, recompute="none", zero=1, sp=True, overlap=True)
    runs = [predict_run(m, r, c, p, lay, inlet_temp_c=t).energy for t in np.arange(56.0, 60.01, 0.25)]
    steps = np.array([e.step_time_s for e in runs])
    assert (np.diff(steps) >= -1e-9 * steps[1:]).all() and steps[-1] > steps[0] * 1.03
    energies = np.array([e.energy_j_per_step for e in runs])
    assert np.abs(np.diff(energies) / energies[1:]).max() < 0.01        # no jump: continuous in the inlet
    slow = c.gpu.slowdown_temp_c
    for e in runs:
        rear = min(e.per_gpu, key=lambda g: g["sm_clock_mhz"])
        assert rear["throttled"] and rear["temp_c"] == pytest.approx(slow, abs=0.01)
        for g in e.per_gpu:
            # a throttled GPU holds at the slowdown temperature; one at its top clock is cooler
            assert g["temp_c"] == pytest.approx(slow, abs=0.01) if g["throttled"] else g["temp_c"] <= slow + 0.01
            assert g["sm_clock_mhz"] >= rear["sm_clock_mhz"] - 1e-6
    at58 = runs[8].per_gpu                                          # 58.0 C
    front, back = at58[0], at58[4]
    assert front["sm_clock_mhz"] > back["sm_clock_mhz"] + 100 and back["throttled"]


def test_cap_levels_under_a_cap_keep_the_grid_and_stay_settable():
    """A --power-cap-w had stretched the level grid to itself, moving levels an answer under it used (the
    README's energy example: 450/512 W without the cap, 462/506 W with 550 W, 0.5% more energy), and
    MI250's lowest level rounded to 47 W, under its 47.2 W minimum, which predict refuses."""
    from costmodel.optimize import cap_levels
    from costmodel.specs.profile import cluster_profile
    c = load_cluster("paper-h200")
    p = cluster_profile(c)
    assert cap_levels(c, p, None) == (200.0, 262.0, 325.0, 388.0, 450.0, 512.0, 575.0, 638.0, 700.0)
    assert cap_levels(c, p, 550.0) == (200.0, 262.0, 325.0, 388.0, 450.0, 512.0, 550.0)
    assert cap_levels(c, p, 200.4, n=3) == (200.4,)          # not 200 and 200.4, two levels half a watt apart
    mi = load_cluster("mi250")
    assert cap_levels(mi, cluster_profile(mi), None)[0] == 48.0
