"""The search's partial full recompute (costmodel.search.partial_recompute): the least
--recompute-num-layers that fits, where nothing less fits, faster than recomputing every layer."""
from dataclasses import replace

import numpy as np
import pytest

from costmodel.layout_fields import RECOMPUTE
from costmodel.layouts import LayoutTable
from costmodel.optimize import space_rows
from costmodel.predict import least_recompute, predict_table
from costmodel.search import search
from costmodel.specs import Recipe, load_cluster, load_model, load_profile


@pytest.fixture(scope="module")
def nemotron():
    """Nemotron-4 340B on 16 DGX-H100 nodes, gbs 256, seq 4096: its full-recompute FSDP layouts hold
    96 layers on one stage, where 93 recomputed layers fit in 79 GiB and 92 do not."""
    m, c = load_model("nemotron4-340b"), load_cluster("dgx-h100", nodes=16)
    return m, Recipe(gbs=256, seq_len=4096), c, load_profile(c.gpu.key)


def _rows(L, mask):
    return [L.row(int(i)) for i in np.flatnonzero(mask)]


def test_partial_layouts_are_the_least_recompute_that_fits_and_beat_full(nemotron):
    m, r, c, p = nemotron
    res = search(m, r, c, p)
    L = res.ranked.layouts
    part = _rows(L, L.recompute_num_layers > 0)
    assert part, "the search found no partial recompute"
    names = {(d["tp"], d["pp"], d["dp"], d["mbs"], d["zero"], d["recompute_num_layers"]) for d in part}
    assert (2, 1, 64, 2, 3, 92) in names
    for lay in part:
        # predict's --recompute auto (every option, no bisection) finds no slower fitting step than the
        # search's least N
        rc, k, rm = least_recompute(m, r, c, p, dict(lay, recompute="none", recompute_num_layers=0))
        auto = predict_table(m, rm, c, p, LayoutTable.from_rows([dict(lay, recompute=rc, recompute_num_layers=k)]))
        n_pred = predict_table(m, r, c, p, LayoutTable.from_rows([lay]))
        assert auto.feasible[0] and auto.step_time_s[0] <= n_pred.step_time_s[0] * (1 + 1e-9)
        full = predict_table(m, r, c, p, replace(L.take(np.array([0])), **{
            k: np.array([v]) for k, v in dict(lay, recompute=RECOMPUTE.index("full"), recompute_num_layers=0).items()}))
        mine = res.ranked.step_time_s[[i for i in range(len(L)) if L.row(i) == lay][0]]
        assert mine < full.step_time_s[0]
    assert np.all(np.diff(res.ranked.step_time_s) >= 0)
    assert np.all(res.ranked.feasible)


def test_no_partial_recompute_where_pinned_otherwise_switched_off_or_the_stack_has_none(nemotron):
    m, r, c, p = nemotron
    for res in (search(m, r, c, p, partial_reach=0), search(m, r, c, p, pins={"recompute": "selective"}),
                search(m, replace(r, stack="torchtitan"), c, p, zero_stages=(3,))):
        assert not np.any(res.ranked.layouts.recompute_num_layers)
    # a full pin keeps full recompute, on fewer layers where they fit
    full = search(m, r, c, p, pins={"recompute": "full"})
    assert np.all(full.ranked.layouts.recompute == RECOMPUTE.index("full"))
    assert np.any(full.ranked.layouts.recompute_num_layers)


def test_the_energy_search_leaves_partial_layouts_out(nemotron):
    m, r, c, p = nemotron
    res = search(m, r, c, p)
    rows = space_rows(m, res)
    assert np.any(res.ranked.layouts.recompute_num_layers)
    assert not np.any(res.ranked.layouts.recompute_num_layers[rows])


def test_a_pinned_recompute_num_layers_prices_that_block_recompute_everywhere():
    m, c = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=8)
    p, r = load_profile(c.gpu.key), Recipe(gbs=128, seq_len=8192)
    res = search(m, r, c, p, pins={"recompute_num_layers": 4})
    L = res.ranked.layouts
    assert len(L) and np.all(L.recompute == RECOMPUTE.index("full")) and np.all(L.recompute_num_layers == 4)
    # the winner prices as predict prices that layout
    one = predict_table(m, r, c, p, L.take(np.array([0])))
    assert one.step_time_s[0] == pytest.approx(res.ranked.step_time_s[0], rel=1e-12)
