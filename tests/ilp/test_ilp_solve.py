"""The layout / power-cap / layer-split / placement ILP (costmodel.ilp.solve, pareto_front): hand-checked
cases and a property test against the brute-force oracle."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel.ilp import OBJECTIVES, InfeasibleError, evaluate, pareto_front, solve

from ilp_cases import air_node, instance, option
from ilp_oracle import brute_force, brute_force_front, random_instance


# ------------------------------------------------------------------------------ hand-checked cases

@pytest.mark.parametrize("objective", OBJECTIVES)
def test_logits_stage_gets_fewer_layers(objective):
    # 4 layers of 1 s, the last stage adds 1.5 s of logits: (2, 2) -> period 3.5, (3, 1) -> 3.
    inst = instance([option(t_last_s=[1.5])])
    sol = solve(inst, objective)
    assert sol.layers == (3, 1)
    assert sol.stage_time_s == pytest.approx((3.0, 2.5))
    assert sol.step_time_s == pytest.approx((1 + 1) * 3.0)
    # busy 8 GPUs x 400 W above idle for 3 + 2.5 s, plus 16 GPUs x 100 W idle floor for 6 s
    assert sol.energy_j == pytest.approx(8 * 400 * 5.5 + 16 * 100 * 6.0)
    assert sol.objective_value == pytest.approx(sol.value(objective))
    assert len(sol.gpus) == 16 and {g.node for g in sol.gpus} == {0, 1}


@pytest.mark.parametrize("objective", ["time", "energy", "edp"])
def test_hot_rear_slots_get_the_low_cap_stage(objective):
    # One node, 2 stages of 4 GPUs.  The last stage needs the 600 W cap (logits); the rear block
    # (slots 4-7) is preheated by the front one.  Temperatures (C): high front + low rear 55 / 62,
    # low front + high rear 40 / 71, both high 55 / 77, limit 65.  Megatron's default order puts the
    # last stage at the rear: infeasible at 600 W; the ILP swaps the blocks.
    opt = option(stage_gpus=4, num_layers=2, t_layer_s=[2.0, 1.0], t_first_s=[0.0, 0.0], t_last_s=[2.0, 1.0],
                 p_busy_w=[300.0, 600.0], p_idle_w=50.0)
    inst = instance([opt], cap_levels_w=(300.0, 600.0), num_nodes=1, max_temp_c=65.0, **air_node())
    assert evaluate(inst, 0, [0, 1], [1, 1]).violations          # default placement overheats
    sol = solve(inst, objective)
    assert sol.caps_w == (300.0, 600.0) and sol.layers == (1, 1)
    assert sol.slot_blocks == ((4, 5, 6, 7), (0, 1, 2, 3))
    assert sol.step_time_s == pytest.approx(4.0)
    assert sol.energy_j == pytest.approx(4 * (250 * 2 + 550 * 2) + 8 * 50 * 4)
    temps = {g.slot: g.temp_c for g in sol.gpus}
    assert temps[0] == pytest.approx(55.0) and temps[7] == pytest.approx(62.0)
    assert max(temps.values()) <= 65.0


def test_the_thermal_limit_reads_the_step_averaged_power_and_the_node_budget_the_busy_power():
    """A GPU's temperature settles on its power averaged over the step (LayoutOption.p_thermal_w), not its
    busy power.  4 layers, 2 stages of 4 GPUs, limit 65 C: busy at 600 W the rear block would reach
    35 + 0.05 x 600 + 4 x 0.005 x 600 = 77 C, so it runs at 300 W (2 s a layer) and the step's period is
    3 s (3 layers at the front); averaging 400 W at the 600 W cap it reaches 35 + 20 + 8 = 63 C and both
    stages run at 600 W, 2 layers each, period 2 s.  The node budget still reads the busy power, and the
    rows report it beside the temperature the constraint checks; p_thermal_w outside [p_idle_w, p_budget_w]
    is refused."""
    base = dict(stage_gpus=4, num_layers=4, t_layer_s=[2.0, 1.0], p_busy_w=[300.0, 600.0], p_idle_w=50.0)
    kw = dict(cap_levels_w=(300.0, 600.0), num_nodes=1, max_temp_c=65.0, **air_node())
    busy = solve(instance([option(**base)], **kw), "time")
    assert busy.tau_s == pytest.approx(3.0) and sorted(busy.caps_w) == [300.0, 600.0]
    avg = solve(instance([option(**base, p_thermal_w=[300.0, 400.0])], **kw), "time")
    assert avg.tau_s == pytest.approx(2.0) and avg.caps_w == (600.0, 600.0) and avg.layers == (2, 2)
    rear = [g for g in avg.gpus if g.slot >= 4]
    assert all(g.power_w == 600.0 and g.temp_c == pytest.approx(63.0) for g in rear)
    tight = solve(instance([option(**base, p_thermal_w=[300.0, 400.0])], **dict(kw, node_power_budget_w=3700.0)), "time")
    assert sorted(tight.caps_w) == [300.0, 600.0]          # 8 x 600 W busy exceeds 3.7 kW: one block held low
    with pytest.raises(ValueError, match="p_thermal_w must lie between p_idle_w and p_budget_w"):
        option(**base, p_thermal_w=[300.0, 700.0])
    # a logits layer drawing more than the layers, up to the level's cap (the budget's reading), is taken
    assert option(**base, p_budget_w=[300.0, 700.0], p_thermal_w=[300.0, 650.0]).p_thermal_w[1] == 650.0


def test_rear_block_cap_is_lowered_and_gets_fewer_layers():
    # Symmetric stages, 3 layers.  Whatever the front block does, 600 W at the rear exceeds 65 C, so
    # the rear stage runs at 300 W with 1 layer (2 s) and the front one at 600 W with 2 (2 x 1 s).
    opt = option(stage_gpus=4, num_layers=3, t_layer_s=[2.0, 1.0], p_busy_w=[300.0, 600.0], p_idle_w=50.0)
    inst = instance([opt], cap_levels_w=(300.0, 600.0), num_nodes=1, max_temp_c=65.0, **air_node())
    sol = solve(inst, "time")
    by_block = {sol.slot_blocks[s][0]: (sol.caps_w[s], sol.layers[s]) for s in range(2)}
    assert by_block == {0: (600.0, 2), 4: (300.0, 1)}
    assert sol.tau_s == pytest.approx(2.0)


def test_temperature_lowers_the_cap_of_whole_node_stages():
    # Liquid cooling, 30 C inlet, 0.05 C/W: 300 W -> 45 C, 600 W -> 60 C > 50 C.
    opt = option(t_layer_s=[2.0, 1.0], p_busy_w=[300.0, 600.0])
    kw = dict(cap_levels_w=(300.0, 600.0), inlet_c=np.full(8, 30.0), r_th_c_per_w=np.full(8, 0.05))
    assert solve(instance([opt], max_temp_c=70.0, **kw), "time").caps_w == (600.0, 600.0)
    assert solve(instance([opt], max_temp_c=50.0, **kw), "time").caps_w == (300.0, 300.0)


def test_layout_choice_and_step_time_slack():
    # A fast power-hungry layout and a slow frugal one: time picks the first, energy the second,
    # and a 10% slack on the least step time (6 s) forbids the slow one (9 s).
    fast = option(name="fast", p_busy_w=[700.0], p_idle_w=100.0, t_last_s=[1.5])
    slow = option(name="slow", t_layer_s=[1.5], p_busy_w=[300.0], p_idle_w=100.0, t_last_s=[1.5])
    inst = instance([fast, slow], cap_levels_w=(700.0,))
    assert solve(inst, "time").layout_name == "fast"
    assert solve(inst, "energy").layout_name == "slow"
    slacked = dataclasses.replace(inst, step_time_slack=0.1)
    sol = solve(slacked, "energy")
    assert sol.layout_name == "fast" and sol.step_time_s <= 1.1 * 6.0


def test_edp_is_the_best_point_of_the_pareto_front():
    inst = random_instance(np.random.default_rng(3), num_layouts=3, gpus_per_node=8, num_nodes=2)
    front = pareto_front(inst)
    T = [t for t, _, _ in front]
    E = [e for _, e, _ in front]
    assert T == sorted(T) and E == sorted(E, reverse=True)
    best = solve(inst, "edp")
    assert best.edp == pytest.approx(min(t * e for t, e, _ in front), rel=1e-6)
    oracle = brute_force_front(inst)
    assert len(front) == len(oracle)
    for (t1, e1, _), (t2, e2, _) in zip(front, oracle):
        assert t1 == pytest.approx(t2, rel=1e-6) and e1 == pytest.approx(e2, rel=1e-6)


# ------------------------------------------------------------------------------ property test

@settings(max_examples=100, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), G=st.sampled_from([4, 6, 8]), nodes=st.sampled_from([1, 1, 2]),
       layouts=st.integers(1, 3), slack=st.sampled_from([None, None, 0.0, 0.1]))
def test_ilp_matches_brute_force(seed, G, nodes, layouts, slack):
    inst = random_instance(np.random.default_rng(seed), num_layouts=layouts, gpus_per_node=G, num_nodes=nodes,
                           num_caps=3, pp_range=(2, 4), max_layers=8, slack=slack)
    for objective in OBJECTIVES:
        try:
            want = brute_force(inst, objective)
        except InfeasibleError:
            with pytest.raises(InfeasibleError):
                solve(inst, objective)
            continue
        got = solve(inst, objective)
        assert not got.violations
        assert sum(got.layers) == inst.options[got.layout_index].num_layers
        assert got.objective_value == pytest.approx(want.objective_value, rel=1e-6)
        if slack is not None:
            fastest = brute_force(inst, "time").step_time_s
            assert got.step_time_s <= (1 + slack) * fastest * (1 + 1e-6)


def test_a_placement_out_of_rank_order_is_exported_per_node():
    """Two 4-GPU stages per 8-GPU node: Megatron's rank order puts stage 6 on local ranks 0-3 and stage
    7 on 4-7; an answer that gives stage 7 the front slots 0-3 must export the device order that makes
    local ranks 4-7 open them (in nvidia-smi's PCI order, the caps' indices); nodes in rank order get no
    line, and an AMD node the HIP variable."""
    from types import SimpleNamespace
    from costmodel.ilp import GpuRow
    from costmodel.report import device_order_lines, device_orders
    rows = [GpuRow(2, sl, 4 + sl // 4, 450.0, 80.0) for sl in range(8)]
    rows += [GpuRow(3, sl, 7 if sl < 4 else 6, 450.0, 80.0) for sl in range(8)]
    sol = SimpleNamespace(gpus=rows)
    assert device_orders(sol, 8) == {3: (4, 5, 6, 7, 0, 1, 2, 3)}
    assert device_order_lines(sol, SimpleNamespace(vendor="nvidia"), 8) == (
        "# node 3\nexport CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=4,5,6,7,0,1,2,3")
    assert "HIP_VISIBLE_DEVICES=4,5,6,7,0,1,2,3" in device_order_lines(sol, SimpleNamespace(vendor="amd"), 8)
    assert device_order_lines(SimpleNamespace(gpus=rows[:8]), SimpleNamespace(vendor="nvidia"), 8) == ""
    from costmodel.report import device_order_flags
    assert device_order_flags(sol, 8) == "--device-order 3:4,5,6,7,0,1,2,3"
    more = rows + [GpuRow(4, sl, 9 if sl < 4 else 8, 450.0, 80.0) for sl in range(8)]
    assert device_order_flags(SimpleNamespace(gpus=more), 8) == "--device-order 3-4:4,5,6,7,0,1,2,3"
