"""Scale-out switch tiers (costmodel/fabric.py): hand-computed penalties, the DP and EP terms of a
16,384-GPU job on a DGX SuperPOD, the what-if flags and bad tier input."""
import dataclasses
from pathlib import Path

import numpy as np
import pytest

from costmodel.collective import hierarchical_time_s
from costmodel.comm import _params, _tree_params, group_time_s
from costmodel.errors import InputError
from costmodel.fabric import tier_penalty
from costmodel.specs import load_cluster, load_profile, with_fabric

POD = Path(__file__).resolve().parent.parent / "hardware" / "clusters" / "dgx-h100-superpod.yaml"
GIB = 2**30


def test_an_all_to_all_across_two_scalable_units_pays_half_the_oversubscription():
    """EP128 at stride 4 spans 64 nodes = 2 leaf groups of 32: half of every GPU's all-to-all traffic
    leaves its leaf group, whose uplinks carry 1/4 of the injected bandwidth at 4:1 -> divisor 2."""
    c = with_fabric(load_cluster("dgx-h100-superpod", nodes=2048), oversubscription=4)
    pen, lat = tier_penalty("all_to_all", 4, 128, c)
    assert float(pen) == 2.0 and float(lat) == 0.0
    assert float(tier_penalty("all_to_all", 4, 64, c)[0]) == 1.0          # 32 nodes: one leaf group


def test_a_dp_ring_pays_the_spine_only_past_its_boundary_share():
    """DP over all 2,048 nodes (stride 8): the ring leaves a 32-node leaf group at 64 of its 2,048
    hops (1/32); at 4:1 the uplinks keep up (1/32 x 4 < 1), at 64:1 they halve the NIC share."""
    pod = load_cluster("dgx-h100-superpod", nodes=2048)
    assert float(tier_penalty("all_reduce", 8, 2048, with_fabric(pod, oversubscription=4))[0]) == 1.0
    assert float(tier_penalty("all_reduce", 8, 2048, with_fabric(pod, oversubscription=64))[0]) == 2.0


def test_the_dp_all_reduce_of_a_16k_gpu_job_on_an_oversubscribed_pod():
    """A 1 GiB fp32-gradient all-reduce over DP 2,048 (TP 8, 16,384 GPUs): on the non-blocking pod it
    equals the same cluster without tiers; at 64:1 it is the hierarchical time with each GPU's NIC
    share (8 x 50 GB/s / 8 GPUs = 50 GB/s) halved, computed here by hand."""
    p = load_profile("h100-sxm-80gb")
    pod = load_cluster("dgx-h100-superpod", nodes=2048)
    flat = load_cluster("dgx-h100", nodes=2048)
    t_pod = float(group_time_s("all_reduce", GIB, 8, 2048, pod, p))
    assert t_pod == float(group_time_s("all_reduce", GIB, 8, 2048, flat, p))
    over = with_fabric(pod, oversubscription=64)
    # NCCL's ring and its double binary tree (the tree wins at 2,048 nodes: 2 log2 N hops, not 2 (N - 1))
    want = float(hierarchical_time_s("all_reduce", GIB, 1, 2048, 450e9, 50e9 / 2,
                                     _params(p, "intra_node", "all_reduce", 1, 0.6e-6),
                                     _params(p, "inter_node", "all_reduce", 2048, 2.7e-6, "infiniband", 400e9 / 8),
                                     _tree_params(np.array(2048.0), 0.0, over, p)))
    got = float(group_time_s("all_reduce", GIB, 8, 2048, over, p))
    assert got == pytest.approx(want, rel=1e-12) and got > 1.5 * t_pod


def test_tier_latency_is_paid_on_every_step_above_the_tier(tmp_path):
    """A 1 us spine hop: a ring all-reduce over 4 nodes of two leaf groups pays 2 x (4 - 1) steps x 1 us."""
    text = POD.read_text().replace("{name: leaf, nodes: 32, oversubscription: 1, latency: 0us}",
                                   "{name: leaf, nodes: 2, oversubscription: 1, latency: 1us}")
    f = tmp_path / "pod.yaml"
    f.write_text(text)
    c, p = load_cluster(str(f), nodes=4), load_profile("h100-sxm-80gb")
    base = load_cluster("dgx-h100", nodes=4)
    d = float(group_time_s("all_reduce", 8.0, 8, 4, c, p)) - float(group_time_s("all_reduce", 8.0, 8, 4, base, p))
    assert d == pytest.approx(2 * 3 * 1e-6, rel=1e-9)


@pytest.mark.parametrize("old,new,why", [
    ("{name: spine, nodes: 2048,", "{name: spine, nodes: 48,", "not a larger whole multiple"),
    ("{name: leaf, nodes: 32, oversubscription: 1,", "{name: leaf, nodes: 32, oversubscription: 0.5,", "outside 1 .. 64"),
    ("{name: leaf, nodes: 32, oversubscription: 1, latency: 0us}", "{name: leaf, nodes: 32, oversubscription: 1, "
     "latency: 0us, radix: 64}", "unknown key"),
    ("{name: spine, nodes: 2048, oversubscription: 1, latency: 0us}", "{name: spine, nodes: 2048, oversubscription: 1, "
     "latency: 1000000}", "outside 0 .. 1 ms"),
    ("{name: spine,", "{name: leaf,", "names an earlier tier again"),
    ("{name: spine,", "{name: '  ',", "is empty"),
    ("    - {name: spine, nodes: 2048, oversubscription: 1, latency: 0us}\n", "", None)])
def test_bad_tiers_name_their_field(tmp_path, old, new, why):
    text = POD.read_text()
    assert old in text
    f = tmp_path / "bad.yaml"
    f.write_text(text.replace(old, new))
    if why is None:                              # one tier is fine
        assert len(load_cluster(str(f), nodes=32).tiers) == 1
        return
    with pytest.raises(InputError, match=why) as e:
        load_cluster(str(f))
    assert "inter_node.tiers" in str(e.value)


def test_tiers_need_their_source(tmp_path):
    f = tmp_path / "nosrc.yaml"
    f.write_text("\n".join(l for l in POD.read_text().splitlines() if not l.startswith("  inter_node.tiers:")) + "\n")
    with pytest.raises(InputError, match="inter_node.tiers"):
        load_cluster(str(f))


def test_what_if_flags_check_their_range_and_the_cluster():
    pod = load_cluster("dgx-h100-superpod")
    assert with_fabric(pod, scale_out_gbps=100).nic_bytes_per_s == 100e9 / 8
    assert {t.oversubscription for t in with_fabric(pod, oversubscription=3).tiers} == {3.0}
    with pytest.raises(InputError, match="--oversubscription.*no inter_node.tiers"):
        with_fabric(load_cluster("dgx-h100"), oversubscription=2)
    with pytest.raises(InputError, match="--scale-out-gbps"):
        with_fabric(pod, scale_out_gbps=0.5)
    with pytest.raises(InputError, match="outside 1 .. 64"):
        with_fabric(pod, oversubscription=0.9)


def test_a_job_larger_than_the_top_tier_is_refused():
    """The pod's spine joins 2,048 nodes: 4,096 needs a tier the file does not describe."""
    assert load_cluster("dgx-h100-superpod", nodes=2048).num_gpus == 16384
    with pytest.raises(InputError, match="4096 nodes exceed the 2048") as e:
        load_cluster("dgx-h100-superpod", nodes=4096)
    assert e.value.where == "--nodes"


def test_a_link_latency_above_a_millisecond_is_refused(tmp_path):
    f = tmp_path / "slow.yaml"
    f.write_text(POD.read_text().replace("  latency: 2.7us", "  latency: 1000000", 1))
    with pytest.raises(InputError, match="inter_node.latency"):
        load_cluster(str(f))


def test_in_network_all_reduce_sends_each_slice_once_across_the_nodes():
    """SHARP: a 1 GiB all-reduce over DP 2,048 (one GPU per node, stride 8) streams each GPU's 1 GiB once
    through its 50 GB/s NIC share at the inter-node efficiency (NDR: NCCL's stated 47/50), where the ring moves
    2 x 2047/2048 of it: by hand, alpha + min_p(alpha_p + 2^30 / (eff_p x 50e9)); over 2 nodes
    the ring already sends each byte once, so SHARP changes nothing there."""
    p = load_profile("h100-sxm-80gb")
    pod = load_cluster("dgx-h100-superpod", nodes=2048)
    sharp = with_fabric(pod, sharp=True)
    assert sharp.sharp and "SHARP" in sharp.what_if and not pod.sharp
    g0 = p.comm_group_size["inter_node"]["all_reduce"]
    q = _params(p, "inter_node", "all_reduce", g0, pod.inter_latency_s, pod.inter_fabric, pod.nic_bytes_per_s)
    by_hand = q.alpha_s + min(a + GIB / (e * 50e9) for a, e in q.protocols)
    assert float(group_time_s("all_reduce", GIB, 8, 2048, sharp, p)) == pytest.approx(by_hand, rel=1e-12)
    ring = float(group_time_s("all_reduce", GIB, 8, 2048, pod, p))
    assert 1.9 < ring / by_hand < 2.6
    assert float(group_time_s("all_reduce", GIB, 8, 2, sharp, p)) == pytest.approx(
        float(group_time_s("all_reduce", GIB, 8, 2, pod, p)), rel=1e-12)
    # reduce-scatter and all-gather keep their rings (NCCL's CollNet prices the all-reduce)
    assert float(group_time_s("reduce_scatter", GIB, 8, 2048, sharp, p)) == float(
        group_time_s("reduce_scatter", GIB, 8, 2048, pod, p))


@pytest.mark.parametrize("value,why", [("'yes'", "expected true or false"), ("1", "expected true or false"),
                                       ("true", "sources")])
def test_sharp_is_a_sourced_boolean(tmp_path, value, why):
    f = tmp_path / "sharp.yaml"
    f.write_text(POD.read_text().replace("  latency: 2.7us\n", f"  latency: 2.7us\n  sharp: {value}\n", 1))
    with pytest.raises(InputError, match=why) as e:
        load_cluster(str(f))
    assert "inter_node.sharp" in str(e.value)


def test_sharp_is_infiniband_only(tmp_path):
    """SHARP reduces on InfiniBand switches (NCCL CollNet): asked of AWS p5's EFA, as a what-if or in a
    cluster file whose fabric is RoCE, it is refused naming the flag or the file's field."""
    with pytest.raises(InputError, match="fabric is efa") as e:
        with_fabric(load_cluster("aws-p5", nodes=4), sharp=True)
    assert e.value.where == "--sharp"
    assert with_fabric(load_cluster("aws-p5", nodes=4), sharp=False).sharp is False
    f = tmp_path / "roce_sharp.yaml"
    text = POD.read_text().replace("  latency: 2.7us\n", "  latency: 2.7us\n  sharp: true\n", 1)
    f.write_text(text.replace("fabric: infiniband", "fabric: roce", 1).replace(
        "sources:\n", "sources:\n  inter_node.sharp: a test\n", 1))
    with pytest.raises(InputError, match="fabric is roce") as e:
        load_cluster(str(f))
    assert "inter_node.sharp" in str(e.value)


@pytest.mark.parametrize("old,new,field", [("bandwidth_per_nic: 400Gbps", "bandwidth_per_nic: 400", "bandwidth_per_nic"),
                                           ("bandwidth_per_gpu: 450GB/s", "bandwidth_per_gpu: 450", "bandwidth_per_gpu")])
def test_a_link_bandwidth_without_its_unit_is_refused(tmp_path, old, new, field):
    """A bare number reads as bytes/s: 400 meant as Gb/s would price the NIC at 400 B/s."""
    f = tmp_path / "unitless.yaml"
    f.write_text(POD.read_text().replace(old, new, 1))
    with pytest.raises(InputError, match="give a unit") as e:
        load_cluster(str(f))
    assert field in e.value.where or field in str(e.value)


def test_an_efa_capture_lends_its_bandwidth_not_its_latency_to_an_infiniband_cluster():
    """The built-in inter-node fits are AWS EFA captures (tens to hundreds of us of small-message
    latency).  On an InfiniBand cluster the efficiencies carry over and NCCL's ring latency model
    takes the latency's place: an 8-byte send between two DGX H100 nodes costs the LL base 6.6 us +
    one 2.7 us hop (NCCL tuning.cc), while on AWS p5 (EFA, the capture's own fabric) it keeps the
    fitted 46 us.  A 1 GiB send streams at the capture's efficiency on EFA and at NCCL's stated 47 of
    50 GB/s per NDR NIC on InfiniBand NDR (nccl-tests#290); HDR InfiniBand (200 Gb/s per NIC: 24 GB/s stated,
    nccl-tests#119) at the same 47/50 of half the NIC share."""
    p = load_profile("h100-sxm-80gb")
    assert p.comm_fabric["inter_node"]["send_recv"] == "efa"
    ib, efa = load_cluster("dgx-h100", nodes=2), load_cluster("aws-p5", nodes=2)
    assert (ib.inter_fabric, efa.inter_fabric) == ("infiniband", "efa")
    t_ib = float(group_time_s("send_recv", 8.0, 8, 2, ib, p))
    t_efa = float(group_time_s("send_recv", 8.0, 8, 2, efa, p))
    assert t_ib == pytest.approx(6.6e-6 + 2.7e-6, rel=0.02)
    assert t_efa > 4e-5
    big_ib = float(group_time_s("send_recv", GIB, 8, 2, ib, p))
    big_efa = float(group_time_s("send_recv", GIB, 8, 2, efa, p))
    per_gpu = lambda c: c.node_nic_bytes_per_s / c.gpus_per_node
    assert per_gpu(ib) == per_gpu(efa) == 50e9
    simple = dict(zip(p.comm_protocols["inter_node"]["send_recv"], p.comm["inter_node"]["send_recv"].protocols))["Simple"]
    assert simple[1] == pytest.approx(0.63, abs=0.01)
    assert big_efa / big_ib == pytest.approx(0.94 / simple[1], rel=0.02)
    hdr = load_cluster("dgx-a100", nodes=2)
    assert (hdr.inter_fabric, per_gpu(hdr)) == ("infiniband", 25e9)
    assert float(group_time_s("send_recv", GIB, 8, 2, hdr, p)) == pytest.approx(2 * big_ib, rel=0.02)


def test_a_faster_nic_never_streams_slower_and_the_source_of_the_efficiency_is_said():
    """InfiniBand and RoCE stream at NCCL's stated 47/50 of line rate at any rate (NDR's 46-48 GB/s,
    nccl-tests#290; HDR's 24 GB/s, #119; no cliff below 100 Gb/s), other fabrics at the EFA capture's: a 1 GiB
    send scales with the what-if line rate (399 Gb/s had cost 49% more than 400), RoCE streams as InfiniBand
    does (it had taken the EFA capture's 63%), and the note a multi-node prediction prints says which figure
    priced it."""
    from costmodel.nic_efficiency import inter_node_efficiency_note
    p = load_profile("h100-sxm-80gb")
    base = load_cluster("dgx-h100", nodes=2)
    rates = (50, 99, 100, 200, 399, 400, 401, 500)          # 512 Gb/s is the PCIe link (test below)
    t = [float(group_time_s("send_recv", GIB, 8, 2, with_fabric(base, scale_out_gbps=g), p)) for g in rates]
    for g, x in zip(rates, t):
        assert x == pytest.approx(GIB / (0.94 * g * 1e9 / 8), rel=0.01), g
    assert "NCCL's stated 94% of line rate (nccl-tests#290, #119)" in inter_node_efficiency_note(p, base)
    roce = dataclasses.replace(base, inter_fabric="roce")
    assert float(group_time_s("send_recv", GIB, 8, 2, roce, p)) == pytest.approx(t[5], rel=1e-9)
    opa = inter_node_efficiency_note(p, dataclasses.replace(base, inter_fabric="omnipath"))
    assert "no omnipath measurement at 400 Gb/s" in opa and "(63% of line rate" in opa
    assert inter_node_efficiency_note(p, load_cluster("aws-p5", nodes=2)) is None      # the capture's own fabric
    # printed only where collectives leave the NVLink domain: not on one node, nor on 2 GB200 trays of one rack
    from costmodel.cli.common import fabric_notes
    assert fabric_notes(p, load_cluster("dgx-h100", nodes=1)) == []
    assert fabric_notes(p, load_cluster("gb200-nvl72", nodes=2)) == []
    assert fabric_notes(p, base) == ["costmodel: note: " + inter_node_efficiency_note(p, base)]


def test_a_profile_entry_names_a_known_fabric(tmp_path):
    import yaml
    from costmodel.specs import load_profile as lp
    d = yaml.safe_load((Path(__file__).resolve().parent.parent / "hardware" / "profiles" / "h100-sxm-80gb.yaml").read_text())
    d["comm"]["inter_node"]["all_reduce"]["fabric"] = "myrinet"
    f = tmp_path / "h100-sxm-80gb.yaml"
    f.write_text(yaml.safe_dump(d))
    with pytest.raises(InputError, match="myrinet") as e:
        lp(str(f))
    assert "comm.inter_node.all_reduce.fabric" in str(e.value)


@pytest.mark.parametrize("temp", ["140C", "-40C"])
def test_a_cluster_inlet_temperature_no_data_centre_runs_is_refused(tmp_path, temp):
    """The file's inlet gets the range the --inlet-temp-c flag gets (-20 .. 60 C), at load, naming the field."""
    f = tmp_path / "hot.yaml"
    f.write_text(POD.read_text().replace("inlet_temp: 30C", f"inlet_temp: {temp}", 1))
    with pytest.raises(InputError, match="between -20 and 60 C") as e:
        load_cluster(str(f))
    assert "cooling.inlet_temp" in str(e.value)


def test_ecmp_busiest_uplink_matches_balls_into_bins():
    """The Poisson approximation of the busiest of U uplinks under F hashed flows against a seeded
    simulation of the hash (4,000 draws): 8 flows on 256 links (mostly no collision), 256 on 256, and
    2,560 on 256 (near the mean of 10); and 2 flows on 2 links, exactly 1.5."""
    from costmodel.fabric import ecmp_max_load
    rng = np.random.default_rng(0)
    for F, U in ((8, 256), (256, 256), (2560, 256)):
        sim = np.mean([np.bincount(rng.integers(0, U, F), minlength=U).max() for _ in range(4000)])
        assert float(ecmp_max_load(np.array([F]), U)[0]) == pytest.approx(sim, rel=0.03)
    assert float(ecmp_max_load(np.array([2.0]), 2.0)[0]) == pytest.approx(1.5, rel=0.02)


def _ecmp_leaf(tmp_path, name, oversubscription):
    """The superpod file with an ECMP leaf tier (one flow per NIC) at ``oversubscription``: (path, text)."""
    text = POD.read_text().replace("{name: leaf, nodes: 32, oversubscription: 1, latency: 0us}",
                                   f"{{name: leaf, nodes: 32, oversubscription: {oversubscription}, latency: 0us, "
                                   "routing: ecmp, flows_per_nic: 1}")
    f = tmp_path / name
    f.write_text(text)
    return f, text


def test_an_ecmp_spine_slows_a_ring_by_its_collisions(tmp_path):
    """DP over 64 nodes (2 leaf groups of 32, 8 NICs each) with ECMP on the leaves' uplinks: the ring
    leaves each group at 2 of its 64 hops, 8 flows per group with one flow per NIC, hashed onto 256
    uplinks: the busiest carries two
    with probability 1 - prod(1 - i/256, i < 8) = 10.4% (the birthday bound), so the divisor is about
    1.10 where adaptive routing gives 1; 16 flows per NIC spread 128 flows and the divisor falls
    towards the balanced 1/32.  An all-to-all's 127 flows per NIC collide too, but on a non-blocking
    leaf the busiest uplink stays under the NIC rate."""
    f, text = _ecmp_leaf(tmp_path, "ecmp.yaml", 1)
    c = load_cluster(str(f), nodes=64)
    assert c.tiers[0].routing == "ecmp" and c.tiers[1].routing == "adaptive"
    pen = float(tier_penalty("all_reduce", 8, 64, c)[0])
    birthday = 1 - np.prod([1 - i / 256 for i in range(8)])
    assert pen == pytest.approx(1 + birthday, rel=0.02)
    assert float(tier_penalty("all_reduce", 8, 64, load_cluster("dgx-h100-superpod", nodes=64))[0]) == 1.0
    f.write_text(text.replace("flows_per_nic: 1}", "flows_per_nic: 16}"))
    many = float(tier_penalty("all_reduce", 8, 64, load_cluster(str(f), nodes=64))[0])
    assert 1.0 <= many < pen
    assert float(tier_penalty("all_to_all", 4, 128, c)[0]) == 1.0


def test_an_ecmp_all_to_all_pays_its_busiest_uplink(tmp_path):
    """An all-to-all over 128 ranks (4 apart, 2 leaf groups of 32 nodes, one NIC per GPU) on 2:1
    oversubscribed ECMP leaves: each NIC sends to 127 peers, half of them across, so the 128 uplinks
    of a group carry 64 x 127 x 2 = 16,256 hashed flows, 127 a link on average, exactly the NIC rate
    (adaptive routing: divisor 1).  Hashed, the busiest link holds the maximum of 128 loads, which a
    seeded simulation of the hash puts about 23% over the mean: the all-to-all slows by that much."""
    f, text = _ecmp_leaf(tmp_path, "ecmp2.yaml", 2)
    c = load_cluster(str(f), nodes=64)
    f2 = tmp_path / "ar2.yaml"
    f2.write_text(text.replace(", routing: ecmp, flows_per_nic: 1}", "}"))
    assert float(tier_penalty("all_to_all", 4, 128, load_cluster(str(f2), nodes=64))[0]) == pytest.approx(1.0)
    rng = np.random.default_rng(1)
    sim = np.mean([np.bincount(rng.integers(0, 128, 16256), minlength=128).max() for _ in range(2000)]) / 127
    pen = float(tier_penalty("all_to_all", 4, 128, c)[0])
    assert pen == pytest.approx(sim, rel=0.02) and 1.15 < pen < 1.35
    # rail-optimised leaves: each of the 8 rails hashes its 2,032 flows over its own 16 uplinks, the
    # same mean of 127 a link over fewer links, so a smaller maximum (its own simulation)
    f.write_text(text.replace("flows_per_nic: 1}", "flows_per_nic: 1, rails: true}"))
    rail = float(tier_penalty("all_to_all", 4, 128, load_cluster(str(f), nodes=64))[0])
    sim16 = np.mean([np.bincount(rng.integers(0, 16, 2032), minlength=16).max() for _ in range(2000)]) / 127
    assert rail == pytest.approx(sim16, rel=0.02) and 1.0 < rail < pen


def test_ecmp_max_load_takes_the_normal_extreme_at_thousands_of_flows_per_link():
    """Above 500 flows a link the busiest load is the normal extreme value; at 600 it matches the
    exact Poisson sum within 0.5% (and a simulation of the hash within 2%)."""
    from costmodel import fabric
    U, lam = 64, 600.0
    k = np.arange(2000)[:, None]
    from scipy.stats import poisson
    exact = float(np.sum(1.0 - poisson.cdf(k, lam) ** U))
    assert float(fabric.ecmp_max_load(np.array([lam * U]), U)[0]) == pytest.approx(exact, rel=0.005)
    rng = np.random.default_rng(2)
    sim = np.mean([rng.poisson(lam, U).max() for _ in range(4000)])
    assert float(fabric.ecmp_max_load(np.array([lam * U]), U)[0]) == pytest.approx(sim, rel=0.02)


@pytest.mark.parametrize("extra,why", [(", routing: hashed", "not one of adaptive, ecmp"),
                                       (", rails: yes please", "expected true or false"),
                                       (", rial: true", "unknown key"),
                                       (", routing: ecmp", "flows_per_nic"),
                                       (", routing: ecmp, flows_per_nic: 0", "flows_per_nic"),
                                       (", flows_per_nic: 4", "applies only with routing: ecmp")])
def test_bad_routing_names_its_field(tmp_path, extra, why):
    old = "{name: spine, nodes: 2048, oversubscription: 1, latency: 0us}"
    f = tmp_path / "bad.yaml"
    f.write_text(POD.read_text().replace(old, old[:-1] + extra + "}"))
    with pytest.raises(InputError, match=why) as e:
        load_cluster(str(f))
    assert "inter_node.tiers[1]" in str(e.value)


def test_a_small_all_reduce_over_thousands_of_nodes_takes_the_tree():
    """8 bytes over DP 2,048 (one GPU a node, stride 8): a ring pays 2 x 2,047 network hops (11 ms at
    2.7 us); NCCL's double binary tree 2 x floor(log2 2048) = 22 hops at its 5.0 us tree hop, on top
    of the 2-node measurement the inter-node lines were fitted at; by hand from the profile's lines."""
    p = load_profile("h100-sxm-80gb")
    pod = load_cluster("dgx-h100-superpod", nodes=2048)
    ring = float(hierarchical_time_s("all_reduce", 8.0, 1, 2048, 450e9, 50e9,
                                     _params(p, "intra_node", "all_reduce", 1, 0.6e-6),
                                     _params(p, "inter_node", "all_reduce", 2048, 2.7e-6, "infiniband", 400e9 / 8)))
    assert ring > 2 * 2047 * 2.7e-6
    q = _params(p, "inter_node", "all_reduce", 12, 2.7e-6 * 5.0 / 2.7, "infiniband")
    # 8 B lies below NCCL's 64 B correction table: no correction
    tree = q.alpha_s + min(a + 2 * 8.0 / (0.92 * e * 50e9) for a, e in q.protocols)
    got = float(group_time_s("all_reduce", 8.0, 8, 2048, pod, p))
    assert got == pytest.approx(tree, rel=1e-12) and got < ring / 50


def test_the_tree_corrects_its_bandwidth_by_nccls_measured_factor():
    """A 1 MiB buffer (64 B x 2^14): NCCL's tree runs its Simple protocol at 0.5 of the model's
    bandwidth (treeCorrectionFactor); 1 GiB (2^24 x 64 B) is past the table and takes no correction."""
    from costmodel.collective import CollectiveParams, tree_all_reduce_inter_s
    p = CollectiveParams(alpha_s=0.0, protocols=((0.0, 1.0),))
    base = 2 * 2**20 / (0.92 * 1e9)
    assert float(tree_all_reduce_inter_s(2**20, 1, 1e9, p, ("Simple",))) == pytest.approx(base / 0.5)
    assert float(tree_all_reduce_inter_s(2**20, 1, 1e9, p, ("Other",))) == pytest.approx(base)
    assert float(tree_all_reduce_inter_s(GIB, 4, 1e9, p, ("Simple",))) == pytest.approx(2 * GIB / 4 / 0.92e9)


def test_two_nodes_keep_the_ring():
    """Over 2 nodes the ring and the tree take the same 2 hops, and the ring moves half the bytes."""
    p = load_profile("h100-sxm-80gb")
    pod = load_cluster("dgx-h100-superpod", nodes=2)
    want = hierarchical_time_s("all_reduce", np.array([8.0, 2.0**20, GIB]), 8, 2, 450e9, 50e9,
                               _params(p, "intra_node", "all_reduce", 8, 0.6e-6),
                               _params(p, "inter_node", "all_reduce", 2, 2.7e-6, "infiniband", 400e9 / 8))
    got = group_time_s("all_reduce", np.array([8.0, 2.0**20, GIB]), np.ones(3), np.full(3, 16), pod, p)
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("n_bytes", [8.0, 2.0**20, 2.0**26, GIB])
def test_an_all_reduce_never_gets_faster_with_more_nodes(n_bytes):
    p = load_profile("h100-sxm-80gb")
    pod = load_cluster("dgx-h100-superpod", nodes=2048)
    nodes = 2 ** np.arange(1, 12)
    t = group_time_s("all_reduce", np.full(nodes.size, n_bytes), np.full(nodes.size, 8), nodes, pod, p)
    assert np.all(np.diff(t) >= -1e-15)


def test_a_small_collective_across_two_nodes_pays_the_hops_of_both_parts():
    """8 bytes over 16 GPUs of 2 nodes: the NVLink part (25 us, NVLS) is the slower, and the first
    chunk still crosses InfiniBand: the step over one node's 8 GPUs plus the 2-node inter-node
    latency (NCCL's base + 2 hops of 2.7 us), where the slower part alone would add nothing."""
    from costmodel.collective import collective_time_s
    p = load_profile("h100-sxm-80gb")
    pod = load_cluster("dgx-h100-superpod", nodes=2)
    one = float(group_time_s("all_reduce", 8.0, 1, 8, pod, p))
    two = float(group_time_s("all_reduce", 8.0, 1, 16, pod, p))
    lat_out = float(collective_time_s("all_reduce", 1.0, 2, 50e9,
                                      _params(p, "inter_node", "all_reduce", 2, 2.7e-6, "infiniband", 400e9 / 8)))
    assert two - one == pytest.approx(lat_out, rel=1e-9)
    assert 6.6e-6 + 2 * 2.7e-6 <= lat_out < one


def test_meta_roce_cluster_prices_its_aggregation_taper_and_its_hash_collisions():
    """Meta's 24K-GPU RoCE cluster (Llama 3 paper sec. 3.3.1): 3,072 nodes in 8 pods of 384 at 1:7
    above the pods, E-ECMP with 16 flows per GPU pair.  An all-to-all over 768 nodes (stride 8) sends
    half of each GPU's traffic to the other pod, whose uplinks carry 1/7 of the NICs' rate: 3.5 with
    even load.  Hashed, each NIC's 767 peer flows (half across) land on 384 x 8 / 7 = 438.9 uplinks at
    lambda = 0.5 x 7 x 767 = 2,684.5 a link; by the normal extreme-value form (David and Nagaraja,
    sec. 10.5) with a = sqrt(2 ln 438.9) = 3.489 the busiest holds
    lambda + sqrt(lambda) (a - (ln ln U + ln 4 pi) / (2a) + gamma / a) = 2,684.5 + 51.81 x 3.033
    = 2,841.6 flows, 3.705 x a NIC's share.  A DP ring over all 2,048 nodes of a 16K job crosses a
    pod boundary on 6 of its 2,048 hops, so the taper never binds it."""
    c = load_cluster("meta-roce-h100", nodes=3072)
    assert c.num_gpus == 24576 and [t.oversubscription for t in c.tiers] == [1, 7, 1]
    assert all(t.routing == "ecmp" and t.ecmp_flows_per_nic == 16 and not t.rails for t in c.tiers)
    assert float(tier_penalty("all_to_all", 8, 768, c)[0]) == pytest.approx(3.705, rel=2e-3)
    assert float(tier_penalty("all_reduce", 8, 2048, c)[0]) == 1.0
    with pytest.raises(InputError, match="3073 nodes exceed the 3072"):
        load_cluster("meta-roce-h100", nodes=3073)


def test_a_group_that_straddles_a_pod_boundary_pays_the_taper():
    """EP256 at stride 8 spans 256 nodes; Meta's pods hold 384.  In a 256-node job it sits in one pod
    (only the racks' ECMP collisions cost: 1.10).  In a 512-node job the second group, nodes
    256-511, straddles the pod boundary at 384 (the block residue 384 - gcd(256, 384) = 256 reaches
    it): half its traffic crosses at 1:7, 3.5 with even load, and hashed its 255 peer flows per NIC
    land at lambda = 0.5 x 7 x 255 = 892.5 a link on 438.9 uplinks, the busiest
    892.5 + 29.875 x 3.033 = 983.1: 3.855 x.  The catalog table names the tiers' routing."""
    from costmodel.cli.hardware import _cluster_record, _tier_text
    inside = float(tier_penalty("all_to_all", 8, 256, load_cluster("meta-roce-h100", nodes=256))[0])
    assert inside == pytest.approx(1.10, abs=0.01)
    assert float(tier_penalty("all_to_all", 8, 256, load_cluster("meta-roce-h100", nodes=512))[0]) == pytest.approx(
        3.855, rel=2e-3)
    tiers = _cluster_record("meta-roce-h100")["fabric_tiers"]
    assert _tier_text(tiers[1]) == ", pod 384 nodes 7:1 ECMP x16"


def test_nics_beyond_the_gpus_pcie_links_stream_at_the_links_total():
    """GPUDirect RDMA streams each GPU's traffic through its own PCIe link (dgx-h100: host.pcie_bandwidth_per_gpu
    64 GB/s, Gen5 x16): 32 NICs of 400 Gb/s (200 GB/s per GPU) had sent a 1 GiB message at 188 GB/s per GPU;
    they send at 0.94 x 64 GB/s, and the note says the links bind.  8 NICs (50 GB/s per GPU) are not capped."""
    from costmodel.cli.common import fabric_notes
    from costmodel.nic_efficiency import pcie_bound_note
    p = load_profile("h100-sxm-80gb")
    base = load_cluster("dgx-h100", nodes=2)
    wide = dataclasses.replace(base, nics_per_node=32)
    assert wide.node_nic_bytes_per_s == pytest.approx(8 * 64e9) and base.node_nic_bytes_per_s == pytest.approx(8 * 50e9)
    t = float(group_time_s("send_recv", GIB, 8, 2, wide, p))
    assert t == pytest.approx(GIB / (0.94 * 64e9), rel=0.01)
    assert pcie_bound_note(base) is None and "exceed the 8 GPUs' PCIe links" in pcie_bound_note(wide)
    assert any("PCIe links" in n for n in fabric_notes(p, wide))
    # hardware shows the PCIe link and SHARP the cluster is priced with
    from costmodel.cli.hardware import _cluster_record
    rec = _cluster_record("dgx-h100")
    assert rec["host_pcie_gb_per_s_per_gpu"] == pytest.approx(64.0) and rec["sharp"] is False


def test_blocks_touched_is_the_worst_block_that_exists():
    """Brute force: blocks of B consecutive units' members tile a job of T in order; the worst touches the
    most units of U (a 44-node job in leaf groups of 32 touches 2, not the 3 a 45th block would)."""
    from costmodel.fabric import blocks_touched
    for total in (24, 44, 64, 88, 96, 128, 144):
        for unit in (8, 32, 72):
            for block in range(1, total + 1):
                if total % block:
                    continue
                brute = max(((j * block) % unit + block + unit - 1) // unit for j in range(total // block))
                want = float(-(-block // unit)) if total <= unit else float(brute)
                assert blocks_touched(float(block), unit, float(total)) == want, (block, unit, total)
    assert np.array_equal(blocks_touched(np.array([44.0, 12.0]), 32, 88.0), [2.0, 2.0])


def test_a_multi_node_ring_moves_the_flat_rings_share_per_nic():
    """NCCL's rings run through all kN GPUs, so a NIC carries (kN - 1)/kN of n/k per pass and the
    busbw of a large all-reduce or all-gather stays under k x the NIC share at any node count
    (8 x 400G H100 nodes: ~370-380 GB/s, NVIDIA/nccl#1649; 381.8 GB/s measured on 4 p6-b200 nodes,
    hardware/profiles/data/mlengineering_allreduce_bench_h200_b200_pytorch.md); over 2 nodes the
    all-reduce's tree moves n/k per direction and its busbw goes above that (AWS p5: 437-487 GB/s,
    hardware/profiles/data/aws_p5_2node_16xH100_allreduce.txt)."""
    from costmodel.collective import busbw_factor
    p = load_profile("h100-sxm-80gb")
    share = None
    for nodes in (2, 3, 4, 8, 16, 64):
        c = load_cluster("dgx-h100", nodes=nodes)
        share = c.node_nic_bytes_per_s                      # k x the per-GPU NIC share
        g = 8 * nodes
        for coll in ("all_reduce", "all_gather", "reduce_scatter"):
            t = float(group_time_s(coll, GIB, 1, g, c, p))
            busbw = GIB / t * float(busbw_factor(coll, g))
            if nodes > 2 or coll != "all_reduce":
                assert busbw <= share, (coll, nodes, busbw / 1e9)
            else:
                assert busbw > share
    assert share == 8 * 400e9 / 8
