"""Small hand-built ILP instances for the tests in this folder (not a test file)."""
import numpy as np

from costmodel.ilp import Instance, LayoutOption


def option(**kw):
    """A LayoutOption with small defaults (2 stages of 8 GPUs, 4 layers, one cap level)."""
    C = len(kw.get("t_layer_s", [1.0]))
    p = kw.get("pp", 2)
    d = dict(name="L0", pp=p, stage_gpus=8, num_layers=4, microbatches=1, vp=1, const_time_s=0.0,
             t_layer_s=[1.0] * C, t_first_s=[0.0] * C, t_last_s=[0.0] * C, p_busy_w=[500.0] * C,
             p_idle_w=100.0, mem_fixed_bytes=[1e9] * p, mem_per_layer_bytes=[1e9] * p)
    d.update(kw)
    return LayoutOption(**d)


def instance(options, **kw):
    """An Instance with loose limits: liquid-cooled nodes of 8 slots, 80 GB HBM."""
    G = kw.pop("gpus_per_node", 8)
    d = dict(options=tuple(options), cap_levels_w=(500.0,), gpus_per_node=G, num_nodes=2, hbm_bytes=80e9,
             inlet_c=np.full(G, 25.0), r_th_c_per_w=np.full(G, 0.01), preheat_c_per_w=np.zeros((G, G)),
             max_temp_c=90.0, node_power_budget_w=1e5, step_time_slack=None)
    d.update(kw)
    return Instance(**d)


def air_node(G=8):
    """Air-cooled node: front slots 0..3 at 25 C, rear slots 4..7 at 35 C, each front slot heats each
    rear slot by 0.005 C/W, junction rise 0.05 C/W everywhere."""
    inlet = np.array([25.0] * (G // 2) + [35.0] * (G - G // 2))
    pre = np.zeros((G, G))
    pre[:G // 2, G // 2:] = 0.005
    return dict(inlet_c=inlet, r_th_c_per_w=np.full(G, 0.05), preheat_c_per_w=pre)
