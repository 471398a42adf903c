"""ILP infeasibility diagnosis (costmodel.ilp.diagnose): the binding limit family and how far it must rise."""
import dataclasses

import numpy as np
import pytest

from costmodel.ilp import InfeasibleError, solve

from ilp_cases import instance, option


# ------------------------------------------------------------------------------------ infeasible

def test_memory_binds_and_names_the_required_capacity():
    # Stage 0 needs 10 + 2 n GB, stage 1 10 + n GB; 4 layers.  With 12 GB the stages hold 1 + 2 = 3
    # layers.  The least capacity that fits is 13 GB: split (1, 3).
    opt = option(mem_fixed_bytes=[10e9, 10e9], mem_per_layer_bytes=[2e9, 1e9])
    inst = instance([opt], hbm_bytes=12e9)
    with pytest.raises(InfeasibleError) as e:
        solve(inst, "energy")
    assert e.value.binding == "memory"
    assert e.value.required["memory"] == pytest.approx(13e9)
    assert "HBM capacity 12.000 GB must rise to 13.000 GB" in e.value.message
    assert solve(dataclasses.replace(inst, hbm_bytes=13e9), "energy").layers == (1, 3)


def test_temperature_binds_and_names_the_required_limit():
    opt = option(t_layer_s=[2.0, 1.0], p_busy_w=[300.0, 600.0])
    inst = instance([opt], cap_levels_w=(300.0, 600.0), inlet_c=np.full(8, 30.0),
                    r_th_c_per_w=np.full(8, 0.1), max_temp_c=55.0)
    with pytest.raises(InfeasibleError) as e:
        solve(inst, "time")
    assert e.value.binding == "temperature"
    assert e.value.required["temperature"] == pytest.approx(60.0)
    assert "max temperature 55.0 C must rise to 60.0 C (+5.0 C," in e.value.message


def test_node_power_binds():
    opt = option(t_layer_s=[2.0, 1.0], p_busy_w=[300.0, 600.0])
    inst = instance([opt], cap_levels_w=(300.0, 600.0), node_power_budget_w=2000.0)
    with pytest.raises(InfeasibleError) as e:
        solve(inst, "edp")
    assert e.value.binding == "node_power"
    assert e.value.required["node_power"] == pytest.approx(8 * 300.0)
    assert "node power budget 2 kW must rise to 2.4 kW" in e.value.message


def test_two_limits_binding_together_are_both_named():
    opt = option(t_layer_s=[2.0, 1.0], p_busy_w=[300.0, 600.0], mem_fixed_bytes=[10e9, 10e9],
                 mem_per_layer_bytes=[2e9, 1e9])
    inst = instance([opt], cap_levels_w=(300.0, 600.0), inlet_c=np.full(8, 30.0),
                    r_th_c_per_w=np.full(8, 0.1), max_temp_c=55.0, hbm_bytes=12e9)
    with pytest.raises(InfeasibleError) as e:
        solve(inst, "energy")
    assert e.value.binding == "temperature+memory"
    assert e.value.required == pytest.approx({"temperature": 60.0, "memory": 13e9})
