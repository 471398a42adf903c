"""The energy search over the whole layout space (costmodel.optimize.solve_space): its lower bounds
hold for every decision, and the branch and bound returns the optimum of solving every layout alone."""
from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from costmodel import ilp
from costmodel.optimize import build_instance, cap_levels, option_table, solve_space, space_rows
from costmodel.predict import predict_table, prediction_row
from costmodel.search import search
from costmodel.specs import Recipe, load_cluster, load_model, load_profile


@pytest.fixture(scope="module")
def small():
    """Llama 3 8B on 2 x 8 H100, gbs 16: 24 layouts of its space of one shard group each, every third by step
    time (1F1B and interleaved ones among them), with the cluster's limits."""
    m, c = load_model("llama3-8b"), load_cluster("dgx-h100", nodes=2)
    p, r = load_profile(c.gpu.key), Recipe(gbs=16, seq_len=4096)
    res = search(m, r, c, p)
    rows = [i for i in space_rows(m, res) if res.ranked.layouts.dp_replicate[i] == 1][::3][:24]
    sub = replace(res, ranked=res.ranked.take(rows))
    return m, r, c, p, sub, cap_levels(c, p, None, n=5)


def _alone(m, r, c, p, sub, caps, objective, node_power):
    """Per-layout optimum: the ILP on each layout by itself (no pruning), and the reference."""
    pred = predict_table(m, r, c, p, sub.ranked.layouts)
    vals, fastest = [], np.inf
    for i in range(len(pred.layouts)):
        run = prediction_row(pred, i, m, r, c, p)
        inst = build_instance([run], caps, max_temp_c=c.gpu.slowdown_temp_c, node_power_w=c.node_power_budget_w,
                              inlet_temp_c=None, step_time_slack=None, node_power=node_power)
        try:
            s = ilp.solve(inst, objective)
        except ilp.InfeasibleError:
            continue
        vals.append((s.value(objective), run.name))
        fastest = min(fastest, s.reference.step_time_s if s.reference is not None else s.step_time_s)
    return min(vals), fastest


@pytest.mark.parametrize("objective,node_power", [("energy", True), ("energy", False), ("edp", True)])
def test_pruned_search_returns_the_per_layout_optimum(small, objective, node_power):
    m, r, c, p, sub, caps = small
    got = solve_space(m, r, c, p, sub, objective, caps, max_temp_c=c.gpu.slowdown_temp_c,
                      node_power_w=c.node_power_budget_w, inlet_temp_c=None, step_time_slack=None,
                      node_power=node_power)
    (best, name), fastest = _alone(m, r, c, p, sub, caps, objective, node_power)
    assert got.solution.value(objective) == pytest.approx(best, rel=1e-6)
    assert got.solution.reference.step_time_s == pytest.approx(fastest, rel=1e-6)
    assert got.n_space == 24 and got.n_solved < 24          # some layouts were bounded out
    assert any(x.layout["vp"] > 1 for x in got.runs) or any(v > 1 for v in sub.ranked.layouts.vp)


def test_lower_bounds_hold_for_every_decision(small):
    """Brute force over cap assignments x layer splits of the 2-stage layouts (interleaved ones too: their
    even split is one of the splits): no decision beats the time, energy or EDP bound."""
    from itertools import product
    from costmodel.ilp.evaluation import _times_energy
    m, r, c, p, sub, caps = small
    pred = predict_table(m, r, c, p, sub.ranked.layouts)
    tb = option_table(m, r, c, p, pred.terms, caps, node_power=True)
    t_lb, e_lb = ilp.lower_bounds(SimpleNamespace(**tb))
    checked = 0
    for i in np.flatnonzero(pred.layouts.pp == 2):
        from costmodel.optimize import build_option
        o = build_option(prediction_row(pred, i, m, r, c, p), caps, True)
        assert ilp.lower_bounds(o) == pytest.approx((t_lb[i], e_lb[i]), rel=1e-12)
        edp_lb = ilp.edp_lower_bound(o)
        assert edp_lb == pytest.approx(ilp.edp_lower_bound(SimpleNamespace(**tb))[i], rel=1e-12)
        L = o.num_layers
        splits = np.array([[n, L - n] for n in range(1, L)])
        for cs in product(range(len(caps)), repeat=2):
            _, _, T, E = _times_energy(o, cs, splits)
            assert T.min() >= t_lb[i] * (1 - 1e-12) and E.min() >= e_lb[i] * (1 - 1e-12)
            assert (E * T).min() >= edp_lb * (1 - 1e-12)
        checked += 1
    assert checked >= 1


def test_the_thermal_power_bounds_predicts_busiest_stage_at_a_uniform_cap():
    """The ILP keeps temperatures under a limit with each layout's thermal power: the busiest stage's
    average over predict's 1F1B step at a uniform cap, predict's own figure for Llama 3 70B at TP4 PP4.
    Over a bubble of p - 1 whole periods (a longer step than predict's, whose bubble is the other stages'
    own periods) and with the logits at the layers' power it averaged up to 2.5 W lower, and answers at a
    --max-temp-c limit came out 0.1 C over it when predict priced them."""
    from costmodel.energy import layout_energy
    m, c = load_model("llama3-70b"), load_cluster("paper-h200")
    p, r = load_profile(c.gpu.key), Recipe(gbs=128, seq_len=8192)
    lay = dict(tp=4, pp=4, dp=2, cp=1, ep=1, vp=1, mbs=1, recompute="full", zero=1, sp=True, overlap=True)
    from costmodel.layouts import LayoutTable
    pred = predict_table(m, r, c, p, LayoutTable.from_rows([lay]))
    caps = cap_levels(c, p, None, n=5)
    tb = option_table(m, r, c, p, pred.terms, caps)
    run = prediction_row(pred, 0, m, r, c, p)
    for j, cap in enumerate(caps):
        rep = layout_energy(m, r, c, p, run.terms, caps_w=[cap] * 4)
        busiest = max(g["power_w"] for g in rep.per_gpu)
        assert tb["p_thermal_w"][0, j] == pytest.approx(busiest, rel=1e-6), cap
