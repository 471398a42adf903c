"""ILP input validation (costmodel.ilp.instance): inconsistent instances, unknown objective or solver,
bad decisions, and the HiGHS availability message."""
import numpy as np
import pytest

from costmodel.ilp import SolverUnavailableError, evaluate, solve

from ilp_cases import instance, option


# ------------------------------------------------------------------------------------ validation

@pytest.mark.parametrize("opt_kw, inst_kw, match", [
    ({}, dict(cap_levels_w=(600.0, 300.0)), "strictly increasing"),
    (dict(t_layer_s=[1.0, -1.0]), {}, ">= 0"),
    (dict(t_layer_s=[1.0, 2.0]), {}, "non-increasing"),
    (dict(p_busy_w=[700.0, 400.0]), {}, "exceeds the cap"),
    (dict(p_busy_w=[300.0, 620.0]), {}, "exceeds the cap"),      # over at a level above one that is met
    (dict(p_busy_w=[300.0, 600.0], p_idle_w=400.0), {}, "p_idle_w"),
    (dict(p_budget_w=[250.0, 600.0]), {}, "p_budget_w must be >= p_busy_w"),
    (dict(p_budget_w=[650.0, 620.0]), {}, "p_budget_w must be >= p_busy_w and non-decreasing"),
    (dict(t_layer_s=[2.0, 1.0, 0.5]), {}, "one per cap level"),
    (dict(stage_gpus=3), {}, "divide"),
    (dict(stage_gpus=12), {}, "multiple"),
    (dict(pp=3, stage_gpus=4, mem_fixed_bytes=[1e9] * 3, mem_per_layer_bytes=[1e9] * 3), {}, "whole nodes"),
    (dict(pp=4, mem_fixed_bytes=[1e9] * 4, mem_per_layer_bytes=[1e9] * 4), {}, "nodes"),
    (dict(mem_fixed_bytes=[1e9] * 3), {}, "shape"),
    (dict(num_layers=1), {}, "num_layers"),
    ({}, dict(max_temp_c=20.0), "inlet"),
    ({}, dict(step_time_slack=-0.1), "step_time_slack"),
    ({}, dict(node_power_budget_w=0.0), "node_power_budget_w"),
    ({}, dict(r_th_c_per_w=np.full(8, -0.1)), "r_th_c_per_w"),
])
def test_inconsistent_instances_are_rejected(opt_kw, inst_kw, match):
    okw = dict(t_layer_s=[2.0, 1.0], p_busy_w=[300.0, 600.0])
    okw.update(opt_kw)
    with pytest.raises(ValueError, match=match):
        instance([option(**okw)], **{"cap_levels_w": (300.0, 600.0), **inst_kw})


def test_unmet_caps_at_the_lowest_levels_are_accepted():
    """A kernel class pinned at the lowest clock keeps its power while the others meet the cap: the
    phase's mean exceeds the two lowest caps by different amounts (llama3-70b, TP4 PP8 VP10 on 8 DGX
    H100 at caps 200 / 212 / 225 W: 211.6 / 212.9 / 225 W) and is still a consistent instance."""
    o = option(t_layer_s=[3.0, 2.9, 2.5], p_busy_w=[211.6, 212.9, 225.0])
    inst = instance([o], cap_levels_w=(200.0, 212.0, 225.0))
    assert list(inst.options[0].p_busy_w) == [211.6, 212.9, 225.0]


def test_bad_objective_solver_and_decision():
    inst = instance([option()])
    with pytest.raises(ValueError, match="objective"):
        solve(inst, "power")
    with pytest.raises(ValueError, match="solver"):
        solve(inst, "energy", solver="gurobi")
    with pytest.raises(ValueError, match="sum to 4"):
        evaluate(inst, 0, [0, 0], [2, 1])


def test_highs_solves_or_says_it_is_missing():
    inst = instance([option(t_last_s=[1.5])])
    try:
        sol = solve(inst, "time", solver="highs")
    except SolverUnavailableError as e:
        assert "highspy" in str(e)
    else:
        assert sol.layers == (3, 1)
