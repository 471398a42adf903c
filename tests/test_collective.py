"""costmodel.collective: NCCL's tuner model t = alpha_s + min_p(alpha_p + f n / (eff_p link)), and its loading."""
from dataclasses import replace

import numpy as np
import pytest
import yaml

from costmodel.collective import (CollectiveParams, busbw_factor, collective_time_s, effective_busbw,
                                  hierarchical_time_s)
from costmodel.errors import InputError
from costmodel.specs import hardware_dir, load_profile

LINK = 100e9
# LL: 10 us, 25 % of the link; Simple: 20 us, 90 % (the shape of NCCL tuning.cc's LL/Simple pair)
P = CollectiveParams.from_protocols([(10e-6, 0.25), (20e-6, 0.9)])
F8 = 2 * 7 / 8  # all-reduce bus factor at g = 8
N_CROSS = 10e-6 / (F8 * (1 / 0.25 - 1 / 0.9) / LINK)  # LL and Simple take the same time here, bytes


def test_from_protocols_puts_the_smallest_latency_in_alpha_s():
    assert P.alpha_s == 10e-6 and P.protocols == ((0.0, 0.25), (10e-6, 0.9))
    assert P.absolute_protocols == ((10e-6, 0.25), (20e-6, 0.9))


def test_small_messages_are_latency_bound_large_ones_reach_eff_times_link():
    t8 = collective_time_s("all_reduce", 8.0, 8, LINK, P)
    assert t8 == pytest.approx(10e-6 + F8 * 8 / (0.25 * LINK), rel=1e-12) and t8 == pytest.approx(10e-6, rel=1e-4)
    n = 1e12
    assert F8 * n / collective_time_s("all_reduce", n, 8, LINK, P) == pytest.approx(0.9 * LINK, rel=1e-4)
    assert effective_busbw(n, LINK, P, "all_reduce", 8) == pytest.approx(0.9 * LINK, rel=1e-4)
    assert effective_busbw(1e12, LINK, P) == pytest.approx(0.9 * LINK, rel=1e-4)  # send/recv: f = 1


def test_the_faster_protocol_wins_on_each_side_of_the_crossover():
    ll = lambda n: 10e-6 + F8 * n / (0.25 * LINK)
    simple = lambda n: 20e-6 + F8 * n / (0.9 * LINK)
    assert ll(N_CROSS) == pytest.approx(simple(N_CROSS), rel=1e-12)
    for n in (N_CROSS / 2, N_CROSS / 10):
        assert collective_time_s("all_reduce", n, 8, LINK, P) == pytest.approx(ll(n), rel=1e-12) and ll(n) < simple(n)
    for n in (2 * N_CROSS, 10 * N_CROSS):
        assert collective_time_s("all_reduce", n, 8, LINK, P) == pytest.approx(simple(n), rel=1e-12) and simple(n) < ll(n)
    # busbw rises with size: the min of lines is NCCL's bandwidth ramp
    n = np.geomspace(1e3, 1e10, 50)
    assert np.all(np.diff(effective_busbw(n, LINK, P, "all_reduce", 8)) > 0)


def test_single_protocol_is_hockney_alpha_beta():
    p = CollectiveParams.from_protocols([(5e-6, 0.8)])
    assert collective_time_s("all_gather", 1e8, 4, LINK, p) == pytest.approx(5e-6 + 0.75 * 1e8 / (0.8 * LINK), rel=1e-12)


def test_one_rank_and_empty_messages_cost_nothing():
    assert collective_time_s("all_reduce", 1e9, 1, LINK, P) == 0.0
    assert collective_time_s("all_gather", 0.0, 8, LINK, P) == 0.0
    assert collective_time_s("send_recv", 1e6, 1, LINK, P) > 0  # a send/recv always has a peer
    assert collective_time_s("send_recv", 0.0, 2, LINK, P) == 0.0


def test_arrays_broadcast_and_alpha_shift_applies_to_every_protocol():
    rng = np.random.default_rng(0)
    m = 1_000_000
    n = 10 ** rng.uniform(2, 10, m)
    g = rng.choice([1, 2, 4, 8, 16], m)
    link = rng.choice([50e9, 450e9], m)
    extra = rng.uniform(0, 30e-6, m)
    t = collective_time_s("reduce_scatter", n, g, link, replace(P, alpha_s=P.alpha_s + extra))
    assert t.shape == (m,)
    f = busbw_factor("reduce_scatter", g)
    ref = 10e-6 + extra + np.minimum(f * n / (0.25 * link), 10e-6 + f * n / (0.9 * link))
    assert np.allclose(t, np.where(g > 1, ref, 0.0), rtol=1e-12, atol=0)
    grid = collective_time_s("all_reduce", n[:5, None], np.array([2, 8])[None, :], LINK, P)
    assert grid.shape == (5, 2)
    assert grid[3, 1] == collective_time_s("all_reduce", n[3], 8, LINK, P)


def test_invalid_parameters_are_rejected():
    with pytest.raises(ValueError):
        CollectiveParams(alpha_s=1e-6)
    with pytest.raises(ValueError):
        CollectiveParams.from_protocols([(1e-6, 0.0)])


def test_hierarchical_is_the_slower_of_the_two_pipelined_parts_plus_the_fill():
    """Two nodes: the NIC-bound part (n/k over 2 nodes) sets the pace and the first chunk still
    crosses NVLink, whose latency (the smaller of the two) is added."""
    p_out = CollectiveParams.from_protocols([(50e-6, 0.1), (100e-6, 0.6)])
    n = np.array([1e3, 1e6, 1e9])
    one_node = hierarchical_time_s("all_reduce", n, 8, 1, 450e9, 25e9, P, p_out)
    assert np.allclose(one_node, collective_time_s("all_reduce", n, 8, 450e9, P), rtol=1e-12)
    two = hierarchical_time_s("all_reduce", n, 8, 2, 450e9, 25e9, P, p_out)
    fill = min(float(collective_time_s("all_reduce", 1.0, 8, 450e9, P)),
               float(collective_time_s("all_reduce", 1.0, 2, 25e9, p_out)))
    assert two[-1] == pytest.approx(100e-6 + 1e9 / 8 / (0.6 * 25e9) + fill, rel=1e-12)
    assert np.all(two >= one_node)


def test_built_in_profile_loads_the_protocol_lines():
    prof = load_profile("h100-sxm-80gb")
    raw = prof.raw["comm"]["inter_node"]["all_reduce"]["protocols"]
    p = prof.comm["inter_node"]["all_reduce"]
    assert [q["name"] for q in raw] == ["LL", "LL128", "Simple"]
    flat = [x for pair in p.absolute_protocols for x in pair]
    assert flat == pytest.approx([x for q in raw for x in (q["alpha_s"], q["busbw_efficiency"])], rel=1e-12)
    assert max(e for _, e in p.protocols) <= 1.0  # no protocol beats the NICs' line rate


def _broken(tmp_path, edit):
    d = yaml.safe_load((hardware_dir() / "profiles" / "h100-sxm-80gb.yaml").read_text())
    edit(d["comm"]["intra_node"]["all_reduce"])
    path = tmp_path / "p.yaml"
    path.write_text(yaml.safe_dump(d))
    return str(path)


@pytest.mark.parametrize("edit, field, words", [
    (lambda e: e.pop("protocols"), "comm.intra_node.all_reduce.protocols", "missing"),
    (lambda e: e.update(protocols=[], n_half_bytes=1e6), "comm.intra_node.all_reduce.protocols", "old single-ramp"),
    (lambda e: e["protocols"][1].pop("alpha_s"), "comm.intra_node.all_reduce.protocols[1].alpha_s", "missing"),
    (lambda e: e["protocols"][2].update(busbw_efficiency=0), "comm.intra_node.all_reduce.protocols[2].busbw_efficiency",
     "positive"),
    (lambda e: e["protocols"][0].update(alpha_s=-1e-6), "comm.intra_node.all_reduce.protocols[0].alpha_s", "positive"),
    (lambda e: e["protocols"][0].update(name="Tree"), "comm.intra_node.all_reduce.protocols[0].name", "LL, LL128, Simple"),
    (lambda e: e.update(group_size=0), "comm.intra_node.all_reduce.group_size", "integer >= 1"),
])
def test_profile_errors_name_the_field(tmp_path, edit, field, words):
    with pytest.raises(InputError) as ei:
        load_profile(_broken(tmp_path, edit))
    assert ei.value.field == field and words in ei.value.message


def test_profile_accepts_latency_units(tmp_path):
    path = _broken(tmp_path, lambda e: e["protocols"][0].update(alpha_s="25us"))
    assert load_profile(path).comm["intra_node"]["all_reduce"].alpha_s == pytest.approx(25e-6)
