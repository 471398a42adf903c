"""costmodel collectives: the predicted nccl-tests table and its error against real captures."""
import json

import pytest
from pathlib import Path

from test_cli import assert_one_line_error, run

REPO = Path(__file__).resolve().parents[2]
P5 = REPO / "hardware" / "profiles" / "data" / "aws_p5_2node_16xH100_allreduce.txt"
RCCL = REPO / "tests" / "data" / "readers" / "rccl_tests_mi300x_8gpu_allreduce_excerpt.txt"


def test_predicted_table_follows_nccl_tests_conventions():
    """busbw = algbw x 2(g-1)/g for all-reduce, (g-1)/g for all-gather; busbw grows with size to the
    fitted plateau (NVLS on H100: above the 450 GB/s NVLink rate, under 1.2x of it)."""
    d = json.loads(run("collectives", "--cluster", "aws-p5", "--collective", "all_reduce,all_gather", "--json").stdout)
    rows = d["rows"]
    assert {(r["collective"], r["scope"]) for r in rows} == {(c, s) for c in ("all_reduce", "all_gather")
                                                             for s in ("intra-node", "cluster")}
    for r in rows:
        g = r["ranks"]
        f = 2 * (g - 1) / g if r["collective"] == "all_reduce" else (g - 1) / g
        assert abs(r["busbw_gb_s"] - r["algbw_gb_s"] * f) < 1e-6 * max(1.0, r["busbw_gb_s"])
        assert abs(r["algbw_gb_s"] - r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9) < 1e-6 * max(1.0, r["algbw_gb_s"])
    ar = [r for r in rows if r["collective"] == "all_reduce" and r["scope"] == "intra-node" and r["ranks"] == 8]
    bus = [r["busbw_gb_s"] for r in ar]
    assert bus == sorted(bus) and 450 < bus[-1] < 1.2 * 450
    # the profile's own fit of 2-GPU groups comes first: ring (no NVLS at 2 GPUs), under the link rate
    ar2 = [r["busbw_gb_s"] for r in rows if r["collective"] == "all_reduce" and r["ranks"] == 2]
    assert len(ar2) == len(bus) and 200 < ar2[-1] < 450


def test_compare_reproduces_the_capture_its_profile_was_fitted_on():
    """The AWS p5 2-node all-reduce sweep is the H100 profile's inter-node fit data: read from the file
    (all_reduce_perf, 16 ranks on 2 nodes), it comes back within the fit's error."""
    d = json.loads(run("collectives", "--cluster", "aws-p5", "--compare", str(P5), "--json").stdout)
    assert {r["ranks"] for r in d["rows"]} == {16} and {r["scope"] for r in d["rows"]} == {"cluster"}
    assert d["summary"]["large"]["median_abs_rel_err"] < 0.05 and d["summary"]["all"]["n"] >= 30


def test_compare_an_rccl_capture_and_bad_input():
    p = run("collectives", "--cluster", "azure-nd-mi300x", "--compare", str(RCCL), "--collective", "all_reduce")
    assert p.returncode == 0, p.stderr
    assert "8 ranks (1 node(s) x 8)" in p.stdout and "time error" in p.stdout
    named = run("collectives", "--cluster", "azure-nd-mi300x", "--compare", str(RCCL))   # all_reduce from the file name
    assert named.returncode == 0 and "all_reduce" in named.stdout, named.stderr
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--compare", str(RCCL)), "AMD Instinct MI300X",
                          "h100-sxm-80gb")
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--collective", ""), "--collective")
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--gpus-per-node", "4"), "--gpus-per-node")
    assert_one_line_error(run("collectives", "--cluster", "azure-nd-mi300x", "--compare", str(RCCL),
                              "--collective", "all_reduce", "--nodes", "2"), "--nodes", "contradicts")
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--collective", "bogus"), "--collective")
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--compare", str(REPO)), "is a directory")
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--compare", str(REPO / "README.md"),
                              "--collective", "all_reduce"), "README.md")
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--nodes", "0"), "--nodes")


def test_a_capture_without_rank_lines_is_never_given_the_cluster_s_size():
    """The 2-GPU H100 PCIe capture (NVIDIA/nccl#1161) prints no rank lines: busbw/algbw = 1 over
    all_reduce says 2 ranks, which aws-p5's 8 GPUs per node cannot split: refused (it used to be compared
    as 16 ranks, 51 % off); with --nodes 1 it is 2 ranks on one node. A capture taken on a GPU outside
    the catalog (EKS Tesla T4) is refused against an H100 cluster."""
    pcie = REPO / "tests" / "data" / "readers" / "nccl_tests_h100_pcie_nvlink_bridge_2gpu_2sizes.txt"
    assert_one_line_error(run("collectives", "--cluster", "aws-p5", "--compare", str(pcie)),
                          "busbw/algbw says 2 ranks of all_reduce", "--nodes or --gpus-per-node")
    d = json.loads(run("collectives", "--cluster", "aws-p5", "--compare", str(pcie), "--nodes", "1", "--json").stdout)
    assert {(r["ranks"], r["nodes"]) for r in d["rows"]} == {(2, 1)} and len(d["rows"]) == 2
    t4 = REPO / "tests" / "data" / "readers" / "nccl_tests_eks_t4_2nodes_nccl_info.txt"
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--compare", str(t4), "--collective", "all_reduce"),
                          "'Tesla T4' (not a catalog GPU)")


def test_a_node_without_an_nvswitch_says_its_all_reduce_is_a_ring():
    """The L40S node meets over PCIe: the profile's NVLS all-reduce cannot run there, and the table
    says how it prices it instead (and the NVSwitch node says nothing of the kind)."""
    out = run("collectives", "--cluster", "l40s-8x-pcie", "--collective", "all_reduce").stdout
    assert "NCCL runs a ring" in out and "pcie" in out
    assert "NCCL runs a ring" not in run("collectives", "--cluster", "dgx-h100", "--collective", "all_reduce").stdout
    js = json.loads(run("collectives", "--cluster", "l40s-8x-pcie", "--collective", "all_reduce", "--json").stdout)
    assert sum("NCCL runs a ring" in n for n in js["notes"]) == 1
    # the L40S profile copies the H100's NVSwitch fits: the table says whose measurement it is
    borrowed = [n for n in js["notes"] if "derived_from" in n]
    assert borrowed and all("h100-sxm-80gb" in n for n in borrowed) and "intra-node all_reduce" in borrowed[0]
    assert json.loads(run("collectives", "--cluster", "dgx-h100", "--collective", "all_reduce", "--json").stdout)["notes"] == []


def test_ranks_chooses_the_group_sizes_inside_a_node():
    """--ranks 4 prices a TP4 group's all-reduce (the profile fitted 2 and 8 apart); the busbw of 1 GiB
    at 4 ranks is the 8-rank fit's protocol at 4 ranks, not the 8-rank row; bad sizes are one line."""
    rows = json.loads(run("collectives", "--cluster", "dgx-h100", "--collective", "all_reduce", "--ranks", "4",
                          "--json").stdout)["rows"]
    assert {r["ranks"] for r in rows} == {4} and len(rows) == 31
    default = json.loads(run("collectives", "--cluster", "dgx-h100", "--collective", "all_reduce", "--json").stdout)["rows"]
    assert {r["ranks"] for r in default} == {2, 8}
    big4 = next(r for r in rows if r["size_bytes"] == 2 ** 30)
    big8 = next(r for r in default if r["size_bytes"] == 2 ** 30 and r["ranks"] == 8)
    # busbw = algbw x 2 (g - 1) / g: the same bus time moves less per rank in a smaller group
    assert big4["busbw_gb_s"] == pytest.approx(big4["algbw_gb_s"] * 2 * 3 / 4, rel=1e-6)
    assert big4["time_us"] != big8["time_us"]
    twice = json.loads(run("collectives", "--cluster", "dgx-h100", "--collective", "all_reduce,all_reduce", "--ranks",
                           "4", "--json").stdout)["rows"]
    assert len(twice) == len(rows)                     # a collective named twice is printed once
    for bad, needle in (("4,x", "comma-separated"), ("16", "2 .. 8"), ("1", "2 .. 8"), ("\uff12", "comma-separated")):
        assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--ranks", bad), "--ranks", needle)
    assert_one_line_error(run("collectives", "--cluster", "aws-p5", "--compare", str(P5), "--ranks", "4"),
                          "--ranks", "--compare")


def test_copied_fit_notes_follow_the_rows_and_the_chain():
    """A one-node table prices nothing across nodes: no inter-node note (the L40S node); JUPITER's 16
    GH200s leave the node, and its inter-node all-gather copies its own all-reduce, itself the H100's:
    the note follows the chain to the GPU measured."""
    l40s = json.loads(run("collectives", "--cluster", "l40s-8x-pcie", "--collective", "all_reduce", "--json").stdout)
    assert not any(n.startswith("inter-node") for n in l40s["notes"])
    gh = json.loads(run("collectives", "--cluster", "jupiter-gh200", "--collective", "all_gather", "--json").stdout)
    inter = [n for n in gh["notes"] if n.startswith("inter-node all_gather")]
    assert len(inter) == 1 and "copied from h100-sxm-80gb's" in inter[0]


def test_the_nic_what_if_and_the_source_of_the_inter_node_efficiency_are_printed():
    """dgx-h100's NDR NICs stream a large send at NCCL's stated 47 of 50 GB/s (nccl-tests#290); the same
    cluster with 50 Gb/s what-if NICs at the same 94% of 6.25 GB/s (InfiniBand's share of its line rate does
    not depend on the rate: no cliff below 100 Gb/s, where the p5 EFA capture's 63% had been taken), and the
    table says so."""
    rows = {}
    for extra in ((), ("--scale-out-gbps", "50")):
        p = run("collectives", "--cluster", "dgx-h100", "--nodes", "2", "--collective", "send_recv", "--json", *extra)
        assert p.returncode == 0, p.stderr
        d = json.loads(p.stdout)
        big = max((r for r in d["rows"] if r["scope"] == "cluster"), key=lambda r: r["size_bytes"])
        rows[extra] = (big["busbw_gb_s"], " ".join(d["notes"]))
    assert rows[()][0] == pytest.approx(47.0, rel=0.01) and "NCCL's stated 94% of line rate" in rows[()][1]
    slow = rows[("--scale-out-gbps", "50")]
    assert slow[0] == pytest.approx(0.94 * 6.25, rel=0.01) and "infiniband NICs of 50 Gb/s" in slow[1]
    assert "NCCL's stated 94% of line rate" in slow[1]


def test_compare_names_every_row_it_leaves_out(tmp_path):
    """A row whose busbw is negative (or NaN) is no measurement: refused by the reader and named by
    --compare, which compares the sizes left (31 of 32 out-of-place)."""
    lines = P5.read_text().splitlines()
    i = next(i for i, ln in enumerate(lines) if ln.split()[1:2] == ["16777216"])
    f = lines[i].split()
    f[8] = "-5.0"                                  # '0:' prefix, size count type redop root time algbw busbw
    lines[i] = "  ".join(f)
    bad = tmp_path / "neg.txt"
    bad.write_text("\n".join(lines) + "\n")
    p = run("collectives", "--cluster", "aws-p5", "--compare", str(bad), "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert any(f"{bad}:{i + 1}: out-of-place busbw -5.0 GB/s is not a number >= 0" in n for n in d["notes"])
    assert d["summary"]["all"]["n"] == 31 and 16777216 not in {r["size_bytes"] for r in d["rows"]}


def test_a_capture_is_what_its_perf_line_says_and_its_bad_rows_are_named(tmp_path):
    """The capture's own *_perf line says what ran (a file named scatter_test.log holding an all-reduce
    is an all-reduce); a collective no layout uses is refused in one line; a row whose size is not a
    whole number, or a size written twice, is left out by name, never dropped unseen."""
    text = P5.read_text()
    named = tmp_path / "scatter_test.log"
    named.write_text(text)
    assert run("collectives", "--cluster", "aws-p5", "--compare", str(named)).returncode == 0
    bcast = tmp_path / "x_bcast.log"
    bcast.write_text(text.replace("all_reduce_perf", "broadcast_perf"))
    assert_one_line_error(run("collectives", "--cluster", "aws-p5", "--compare", str(bcast)),
                          f"{bcast}: measures broadcast, which no layout's traffic uses")
    lines = text.split("\n")
    i = next(k for k, ln in enumerate(lines) if ln.startswith("0:") and " 67108864 " in ln and "float" in ln)
    bad, dup = tmp_path / "p5_allreduce_bad.log", tmp_path / "p5_allreduce_dup.log"
    bad.write_text("\n".join(lines[:i] + [lines[i].replace("67108864", "64M", 1)] + lines[i + 1:]))
    dup.write_text("\n".join(lines[:i + 1] + [lines[i]] + lines[i + 1:]))
    p = run("collectives", "--cluster", "aws-p5", "--compare", str(bad))
    assert p.returncode == 0 and f"{bad}:{i + 1}: size '64M'" in p.stderr and "over 31 sizes" in p.stdout
    p = run("collectives", "--cluster", "aws-p5", "--compare", str(dup))
    assert p.returncode == 0 and "size 67108864 B again (first at line" in p.stderr and "over 32 sizes" in p.stdout


def test_a_capture_with_more_ranks_per_node_than_the_cluster_has_gpus_is_refused(tmp_path):
    """Azure's capture puts 8 ranks on each of 2 nodes (its # Rank lines); a cluster file of 4 GPUs
    per node cannot have run it: compare and fit refuse it, where they used to normalise 8 ranks by
    the file's 4 NICs."""
    cl = tmp_path / "four.yaml"
    cl.write_text("""name: four\ngpu: h100-sxm-80gb\ngpus_per_node: 4\nnodes: 2
intra_node: {fabric: nvswitch, bandwidth_per_gpu: 450GB/s, latency: 0.6us}
inter_node: {fabric: infiniband, nics_per_node: 4, bandwidth_per_nic: 400Gbps, latency: 2.7us}
power: {node_power_budget: 6kW}
cooling: {type: air, airflow: front-to-back, inlet_temp: 25C}
sources: {gpus_per_node: ours, nodes: ours, intra_node.bandwidth_per_gpu: ours, intra_node.latency: ours,
  inter_node.nics_per_node: ours, inter_node.bandwidth_per_nic: ours, inter_node.latency: ours,
  power.node_power_budget: ours, cooling.inlet_temp: ours}
""")
    log = REPO / "tests" / "data" / "readers" / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt"
    assert_one_line_error(run("collectives", "--cluster", str(cl), "--compare", str(log)),
                          "8 ranks on each node", "4 GPUs per node")
    assert_one_line_error(run("calibrate", "fit", str(log), "--cluster", str(cl), "-o", str(tmp_path / "p.yaml")),
                          "8 ranks on each node", "4 GPUs per node")


def test_the_send_recv_row_is_what_sendrecv_perf_runs_on_a_node_of_one_nic(tmp_path):
    """nccl-tests' sendrecv_perf sends rank r to r + 1: across 2 nodes one GPU of each crosses the network,
    with the whole NIC (47 GB/s of a 400 Gb/s one), not the 1/8 share a pipeline's every GPU would get."""
    src = (REPO / "hardware" / "clusters" / "dgx-h100.yaml").read_text()
    assert "nics_per_node: 8" in src
    f = tmp_path / "one_nic.yaml"
    f.write_text(src.replace("nics_per_node: 8", "nics_per_node: 1"))
    p = run("collectives", "--cluster", str(f), "--nodes", "2", "--collective", "send_recv", "--json")
    assert p.returncode == 0, p.stderr
    big = max((r for r in json.loads(p.stdout)["rows"] if r["scope"] == "cluster"), key=lambda r: r["size_bytes"])
    assert big["busbw_gb_s"] == pytest.approx(47.0, rel=0.01)


def test_a_collective_priced_with_another_collective_s_fit_of_the_same_gpu_is_said():
    """The A100 profile prices its all-gather, reduce-scatter and all-to-all with its own all-reduce fit
    (no A100 capture of them): the table had printed identical rows without a word."""
    d = json.loads(run("collectives", "--cluster", "dgx-a100", "--json").stdout)
    intra = [n for n in d["notes"] if n.startswith("intra-node all_gather, reduce_scatter, all_to_all")]
    assert len(intra) == 1 and "all_reduce fit (derived_from: no measurement of their own" in intra[0], d["notes"]
    h = json.loads(run("collectives", "--cluster", "dgx-h100", "--json").stdout)
    assert not any("no measurement of their own" in n for n in h["notes"])
