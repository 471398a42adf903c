"""A cluster operator's own hardware files, as a new user writes them (a new user's findings, each with
the file that showed it): what the model prices follows the hardware the files describe."""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from costmodel.errors import InputError
from costmodel.specs import hardware_dir, load_cluster, load_gpu
from test_cli import assert_one_line_error, run

GPUS, CLUSTERS = hardware_dir() / "gpus", hardware_dir() / "clusters"
H100, DGX = (GPUS / "h100-sxm-80gb.yaml").read_text(), (CLUSTERS / "dgx-h100.yaml").read_text()


def _write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def _without(text: str, *keys) -> str:
    return "".join(ln for ln in text.splitlines(keepends=True) if not any(ln.lstrip().startswith(f"{k}:") for k in keys))


def test_a_gpu_file_without_clocks_says_its_power_limit_without_mhz(tmp_path):
    """boost_clock_mhz and max_clock_mhz are optional: a power-limited step had crashed the report."""
    gpu = _write(tmp_path, "my-h100.yaml", _without(H100, "boost_clock_mhz", "max_clock_mhz", "min_clock_mhz"))
    cl = _write(tmp_path, "c.yaml", DGX.replace("gpu: h100-sxm-80gb", f"gpu: {gpu}"))
    r = run("predict", "--model", "llama3-8b", "--cluster", cl, "--profile", "h100-sxm-80gb", "--tp", "1",
            "--gbs", "128", "--seq-len", "4096")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-800:]
    assert "a lower SM clock (the GPU file gives no max_clock_mhz to say which)" in r.stdout


def _busbw(cluster: str, ranks: int) -> float:
    r = run("collectives", "--cluster", cluster, "--ranks", str(ranks), "--collective", "all_reduce", "--json")
    assert r.returncode == 0, r.stderr
    return next(x["busbw_gb_s"] for x in json.loads(r.stdout)["rows"] if x["ranks"] == ranks and x["size_bytes"] == 2**30)


def test_a_mesh_pair_gets_one_link_in_the_table_as_in_the_step_model():
    """JUPITER's GH200 mesh (150 GB/s a pair) and MI300X's Infinity Fabric (64 GB/s a pair): a 2-rank
    all-reduce had been priced over all of a GPU's links (243 and 322 GB/s busbw)."""
    from costmodel.collective import busbw_factor
    from costmodel.comm import group_time_s
    from costmodel.specs import cluster_profile
    gh = _busbw("jupiter-gh200", 2)
    c = load_cluster("jupiter-gh200", 1)
    t = float(group_time_s("all_reduce", np.array([2.0**30]), np.ones(1), np.full(1, 2), c, cluster_profile(c, None))[0])
    assert gh == pytest.approx(2**30 / t * float(busbw_factor("all_reduce", 2)) / 1e9, rel=1e-6) and gh < 150
    assert _busbw("azure-nd-mi300x", 2) < 64 < _busbw("azure-nd-mi300x", 8)


@pytest.mark.parametrize("edit, field, why", [
    (lambda t: t.replace("gpu: h100-sxm-80gb", "gpu: l40s"), "intra_node.fabric", "L40S"),
    (lambda t: t.replace("bandwidth_per_gpu: 450GB/s", "bandwidth_per_gpu: 1800GB/s"), "intra_node.bandwidth_per_gpu",
     "exceeds H100-SXM-80GB's own NVLink bandwidth"),
    (lambda t: t.replace("bandwidth_per_gpu: 450GB/s", "bandwidth_per_gpu: 450Gbps"), "intra_node.bandwidth_per_gpu",
     r"450Gbps is 56.25 GB/s, an eighth or less of H100-SXM-80GB's NVLink \(450 GB/s"),
    (lambda t: t.replace("bandwidth_per_nic: 400Gbps", "bandwidth_per_nic: 400GB/s"), "inter_node.bandwidth_per_nic",
     r"faster than any NIC \(ConnectX-9's 1.6 Tb/s\): NICs are quoted in bits"),
    (lambda t: t.replace("fabric: nvswitch", "fabric: xgmi"), "intra_node.fabric", "AMD's Infinity Fabric"),
    (lambda t: t.replace("fabric: nvswitch", "fabric: pcie").replace("bandwidth_per_gpu: 450GB/s",
                                                                      "bandwidth_per_gpu: 900GB/s"),
     "intra_node.bandwidth_per_gpu", "above PCIe 6.0 x16"),
    (lambda t: t.replace("gpus_per_node: 8", "gpus_per_node: 1000"), "gpus_per_node", "outside 1 .. 576")])
def test_an_intra_node_fabric_the_gpu_cannot_have_is_refused(tmp_path, edit, field, why):
    f = _write(tmp_path, "c.yaml", edit(DGX))
    with pytest.raises(InputError, match=why) as e:
        load_cluster(f)
    assert e.value.field == field


def test_nvlink_in_bits_at_its_full_rate_is_read(tmp_path):
    """3600Gbps is the H100's 450 GB/s per direction in bits: only the slipped unit is refused."""
    from costmodel.units import in_bits
    assert in_bits("3600Gbps") and in_bits("56 Gb/s") and not in_bits("450GB/s") and not in_bits(450e9)
    text = DGX.replace("bandwidth_per_gpu: 450GB/s", "bandwidth_per_gpu: 3600Gbps")
    assert load_cluster(_write(tmp_path, "c.yaml", text)).intra_bytes_per_s == pytest.approx(450e9)


def test_infinity_fabric_in_bits_is_refused_as_nvlink_is(tmp_path):
    """An MI300X node's 448Gb/s (56 GB/s) had priced TP 8 six times slower than its 448 GB/s links."""
    text = (CLUSTERS / "azure-nd-mi300x.yaml").read_text()
    old = next(ln for ln in text.splitlines() if ln.strip().startswith("bandwidth_per_gpu:"))
    with pytest.raises(InputError, match="Infinity Fabric is quoted in bytes") as e:
        load_cluster(_write(tmp_path, "c.yaml", text.replace(old, "  bandwidth_per_gpu: 448Gb/s", 1)))
    assert e.value.field == "intra_node.bandwidth_per_gpu"


def test_infinity_fabric_above_the_gpu_s_own_is_refused_and_mi250_groups_get_the_inter_oam_links(tmp_path):
    """896GB/s (MI300X's two-way total) had been accepted where NVLink's is refused; MI250's file had given
    a GCD's 350 GB/s aggregate (sibling and inter-OAM links together), so an 8-GCD ring beat its 50 GB/s
    inter-OAM links: the group figure is the three inter-OAM links', 150 GB/s."""
    text = (CLUSTERS / "azure-nd-mi300x.yaml").read_text()
    old = next(ln for ln in text.splitlines() if ln.strip().startswith("bandwidth_per_gpu:"))
    with pytest.raises(InputError, match="exceeds MI300X's own Infinity Fabric bandwidth") as e:
        load_cluster(_write(tmp_path, "c.yaml", text.replace(old, "  bandwidth_per_gpu: 896GB/s", 1)))
    assert e.value.field == "intra_node.bandwidth_per_gpu"
    assert _busbw("mi250", 8) < 150 and load_cluster("mi250").intra_bytes_per_s == 150e9


def test_a_multi_node_domain_needs_an_nvswitch(tmp_path):
    text = (CLUSTERS / "l40s-8x-pcie.yaml").read_text().replace("  latency:", "  domain_gpus: 16\n  latency:", 1)
    text = text.replace("sources:\n", "sources:\n  intra_node.domain_gpus: \"a user's claim\"\n", 1)
    with pytest.raises(InputError, match="need an NVSwitch fabric"):
        load_cluster(_write(tmp_path, "c.yaml", text))


@pytest.mark.parametrize("text_of, needle", [
    (lambda: _without(DGX, "gpus_per_node").replace("nodes: 1\n", "gpus_per_node: 8\nnodes: 1\n", 1),
     "sources.gpus_per_node: missing"),
    (lambda: DGX.replace("  latency: 0.6us\n", "", 1) if "  latency: 0.6us\n" in DGX else None,
     "intra_node.latency: missing (its source is given)"),
    (lambda: DGX.split("sources:")[0] + "sources:\n  - everything from the datasheet\n",
     "sources: expected a mapping of field -> its source")])
def test_cluster_file_slips_are_named_for_what_they_are(tmp_path, text_of, needle):
    text = text_of()
    if text is None:
        pytest.skip("the catalog file's intra-node latency line changed")
    with pytest.raises(InputError) as e:
        load_cluster(_write(tmp_path, "c.yaml", text))
    assert needle in str(e.value), str(e.value)


def test_a_cluster_file_given_as_a_gpu_and_a_bare_nvlink_number(tmp_path):
    cl = _write(tmp_path, "other.yaml", DGX)
    with pytest.raises(InputError, match="is a cluster file .* takes a GPU file"):
        load_cluster(_write(tmp_path, "c.yaml", DGX.replace("gpu: h100-sxm-80gb", f"gpu: {cl}")))
    bare = H100.replace("nvlink_bandwidth_per_gpu: 450GB/s", "nvlink_bandwidth_per_gpu: 450")
    assert bare != H100
    with pytest.raises(InputError, match="nvlink_bandwidth_per_gpu: 450 is outside 1 GB/s .. 10 TB/s"):
        load_gpu(_write(tmp_path, "g.yaml", bare))


def test_a_huge_flat_file_is_refused_as_too_large_not_as_an_alias_bomb(tmp_path):
    f = _write(tmp_path, "big.yaml", "a: [" + ",".join(["1"] * 1_200_000) + "]\n")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", f), "too large for a hardware")


def test_a_borrowed_power_section_scales_with_the_gpu_s_tdp(tmp_path):
    """calibrate fit --base of another GPU: the base's watts had been kept as they are (an H100's 896 W of
    GEMM power on a 400 W part, which then ran at 63% of its clock)."""
    from costmodel.fit.assembly import base_profile
    from costmodel.specs import load_profile
    # without an idle capture of its own the part's idle scales with TDP too (variants.idle_w)
    gpu = load_gpu(_write(tmp_path, "h20-96gb.yaml", _without(H100, "idle_power").replace("tdp: 700W", "tdp: 400W")
                          .replace("name: H100-SXM-80GB", "name: H20-96GB")))
    raw, _ = base_profile(gpu, "h100-sxm-80gb")
    h100 = load_profile("h100-sxm-80gb").power
    assert raw["power"]["flop_w"] == pytest.approx(h100.coeff_w["flop"] * 400 / 700)
    assert raw["power"]["idle_w"] == pytest.approx(h100.idle_w * 400 / 700)
    assert set(raw["power"]["basis"].values()) == {"borrowed"}
    # the thermal resistance as the built-in profiles derive a die without temperature data: R_th x TDP
    # held (an MI355X at 1400 W on the MI300X's 750 W R_th had sat at its slowdown temperature)
    th = load_profile("h100-sxm-80gb").thermal
    assert raw["thermal"]["r_th_c_per_w"] == pytest.approx(th.r_th_c_per_w * 700 / 400)
    assert raw["thermal"]["tau_s"] == pytest.approx(th.tau_s)


def test_a_gpu_outside_the_catalog_is_named_by_its_model_token_in_rank_lines(tmp_path):
    from types import SimpleNamespace
    from costmodel.cli.calibrate import _check_named_gpus
    from costmodel.errors import FitError
    gpu = load_gpu(_write(tmp_path, "h20-96gb.yaml", H100.replace("name: H100-SXM-80GB", "name: H20-96GB")))
    _check_named_gpus(SimpleNamespace(suites=[], device_names=["NVIDIA H20"]), gpu, "--cluster c")
    with pytest.raises(FitError, match="'NVIDIA H100 80GB HBM3' .h100-sxm-80gb."):
        _check_named_gpus(SimpleNamespace(suites=[], device_names=["NVIDIA H100 80GB HBM3"]), gpu, "--cluster c")


def test_a_protocol_a_group_lacks_moving_no_bytes_warns_nothing():
    """A per-layout protocol efficiency of 0 (a protocol a group size lacks) met a 0-byte collective (a TP
    group of one): 0 x inf had printed numpy's RuntimeWarning on stderr."""
    from types import SimpleNamespace
    from costmodel.collective import _bus_time_s
    p = SimpleNamespace(alpha_s=1e-6, protocols=((2e-6, np.array([0.0, 0.9])), (5e-6, np.array([0.8, 0.8]))))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        t = _bus_time_s(np.array([0.0, 1e6]), np.array([1e9, 1e9]), p)
    assert t[0] == pytest.approx(1e-6 + 5e-6) and t[1] == pytest.approx(1e-6 + min(2e-6 + 1e-3 / 0.9, 5e-6 + 1e-3 / 0.8))


def test_hardware_shows_one_s_own_cluster_file_as_the_model_reads_it(tmp_path):
    gpu = _write(tmp_path, "my-h100.yaml", H100.replace("name: H100-SXM-80GB", "name: MY-H100"))
    cl = _write(tmp_path, "mine.yaml", DGX.replace("gpu: h100-sxm-80gb", f"gpu: {gpu}").replace("nodes: 1", "nodes: 4"))
    r = run("hardware", "--cluster", cl, "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert [c["cluster"] for c in d["clusters"]] == [cl] and d["clusters"][0]["nodes"] == 4
    # the GPU by the key its cluster names it with (the file's stem), its file beside it: a script joins them
    assert [g["gpu"] for g in d["gpus"]] == ["my-h100"] == [d["clusters"][0]["gpu"]] and d["gpus"][0]["path"] == gpu
    assert d["gpus"][0]["name"] == "MY-H100"
    assert d["gpus"][0]["profile"] is None            # no built-in profile for a GPU of one's own
    assert [g["gpu"] for g in json.loads(run("hardware", "--gpu", "h100-sxm-80gb", "--json").stdout)["gpus"]] == [
        "h100-sxm-80gb"]


def test_every_missing_source_of_a_cluster_file_is_named_at_once(tmp_path):
    """Two unsourced numbers had taken two runs to learn of: one message names both."""
    text = "".join(ln for ln in DGX.splitlines(keepends=True)
                   if not ln.startswith(("  intra_node.bandwidth_per_gpu:", "  inter_node.latency:")))
    with pytest.raises(InputError, match="also sources.inter_node.latency") as e:
        load_cluster(_write(tmp_path, "c.yaml", text))
    assert e.value.field == "sources.intra_node.bandwidth_per_gpu"


def test_a_job_that_does_not_tile_its_nvlink_domains_and_a_zero3_overlap_flag_are_said():
    """DeepSeek-V3 on 32 GB200 trays: rack 0 holds 18 trays, rack 1 14, so the EP 16 group of ranks 64-79
    straddles the racks and paces the step over the NICs (37% slower than 64 GPUs a rack), which nothing
    said; --no-dp-overlap at ZeRO-3 on Megatron-core changes nothing (its FSDP overlaps anyway), silently."""
    r = run("predict", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--nodes", "32", "--tp", "2", "--pp", "8",
            "--ep", "16", "--etp", "1", "--mbs", "1", "--gbs", "1024", "--seq-len", "4096")
    err = " ".join(r.stderr.split())
    assert r.returncode in (0, 3), r.stderr
    assert "fill 1 NVLink domain(s) of 72 and 56 GPUs of another" in err
    assert "the EP groups' blocks of 16 ranks do not tile the 72-GPU domain" in err and "--domain-gpus 64" in err
    # the job on 16 of each rack's 18 trays: every EP group inside one rack, its all-to-all on NVLink
    import json
    args = ("predict", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--nodes", "32", "--tp", "2", "--pp", "8",
            "--ep", "16", "--etp", "1", "--mbs", "1", "--gbs", "1024", "--seq-len", "4096", "--moe-grouped-gemm",
            "--moe-dispatcher", "alltoall", "--json")
    racks = [json.loads(run(*args, *extra).stdout)["breakdown"]["ep_comm_s"] for extra in ((), ("--domain-gpus", "64"))]
    assert racks[1] < 0.3 * racks[0]
    assert "not a whole number of 4-GPU nodes" in run(*args, "--domain-gpus", "66").stderr
    r = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--tp", "1", "--zero", "3",
            "--gbs", "64", "--seq-len", "4096", "--no-dp-overlap")
    assert "--no-dp-overlap changes nothing at ZeRO-3 on the megatron stack" in " ".join(r.stderr.split())


def test_domain_gpus_on_a_one_node_domain_says_what_it_is_for():
    from costmodel.specs import with_fabric
    with pytest.raises(InputError, match="NVLink domain is one node of 8 GPUs"):
        with_fabric(load_cluster("dgx-h100"), domain_gpus=4)


@pytest.mark.parametrize("field,value,text", [
    ("hbm_bandwidth", "3.35Tbps", H100.replace("hbm_bandwidth: 3.35TB/s", "hbm_bandwidth: 3.35Tbps")),
    ("host.pcie_bandwidth_per_gpu", "512Gb/s", None)])
def test_memory_and_pcie_bandwidths_in_bits_are_refused(tmp_path, field, value, text):
    """An H100's 3.35 TB/s written 3.35Tbps had read as 419 GB/s (in range, 8x slow memory-bound kernels);
    no vendor quotes HBM or PCIe in bits."""
    if text is not None:
        with pytest.raises(InputError, match="is in bits: memory bandwidths are quoted in bytes") as e:
            load_gpu(_write(tmp_path, "g.yaml", text))
    else:
        body = DGX.replace("pcie_bandwidth_per_gpu: 64GB/s", f"pcie_bandwidth_per_gpu: {value}")
        with pytest.raises(InputError, match="is in bits: memory and PCIe bandwidths") as e:
            load_cluster(_write(tmp_path, "c.yaml", body))
    assert e.value.field == field


def test_an_own_gpu_file_with_a_catalog_name_does_not_borrow_that_gpu_s_profile(tmp_path):
    """A GPU file of 800 TFLOP/s and 500 W saved as h100-sxm-80gb.yaml had been priced with the H100 SXM's
    fitted profile (eta, powers) without a word; the same file unchanged still runs."""
    d = tmp_path / "mine"
    d.mkdir()
    gpu = d / "h100-sxm-80gb.yaml"
    gpu.write_text(H100.replace("  bf16: 989.4", "  bf16: 800").replace("tdp: 700W", "tdp: 500W"))
    assert "bf16: 800" in gpu.read_text() and "tdp: 500W" in gpu.read_text()
    cluster = _write(tmp_path, "c.yaml", DGX.replace("gpu: h100-sxm-80gb", f"gpu: {gpu}", 1))
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", cluster, "--gbs", "128"), str(gpu),
                          "named h100-sxm-80gb like the catalog's H100-SXM-80GB", "(800 TFLOP/s, 500 W)")
    gpu.write_text(H100)
    same = run("predict", "--model", "llama3-8b", "--cluster", cluster, "--gbs", "128", "--tp", "2")
    assert same.returncode == 0 and "step time" in same.stdout, same.stderr


def test_an_fp8_peak_below_the_16_bit_one_is_refused(tmp_path):
    """fp8 100 TFLOP/s beside bf16 148 had been accepted (an fp8 run priced slower than bf16)."""
    with pytest.raises(InputError, match="is below the 16-bit peak") as e:
        load_gpu(_write(tmp_path, "g.yaml", H100.replace("  fp8: 1978.9", "  fp8: 100")))
    assert e.value.field == "peak_tflops.fp8"


def test_a_gpu_file_without_its_cuda_total_says_the_capacity_is_a_floor(tmp_path):
    """'96GB' without hbm_cuda_total reads 96e9 bytes (89.4 GiB), about 6 GiB below what such a part
    exposes to CUDA: said, so a near-full layout is not taken as out of memory in silence."""
    gpu = _write(tmp_path, "g.yaml", _without(H100, "hbm_cuda_total"))
    cluster = _write(tmp_path, "c.yaml", DGX.replace("gpu: h100-sxm-80gb", f"gpu: {gpu}", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", cluster, "--gbs", "128", "--tp", "2", "--profile",
            "h100-sxm-80gb")
    assert p.returncode == 0 and "gives no hbm_cuda_total: the memory limit is its datasheet capacity read as 74.5 GiB" \
        in p.stderr, p.stderr
    assert "hbm_cuda_total" not in run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gbs", "128",
                                       "--tp", "2").stderr


def test_collectives_compare_refuses_more_ranks_per_node_than_the_nodes_have():
    """--gpus-per-node 64 on 8-GPU nodes had been accepted and the rows labelled '64 ranks, 1 node', where
    the same count read from a capture's # Rank lines is refused."""
    cap = str(hardware_dir() / "profiles" / "data" / "mlengineering_a100_8gpu_nvlink_allreduce.txt")
    assert_one_line_error(run("collectives", "--cluster", "dgx-a100", "--compare", cap, "--nodes", "1",
                              "--gpus-per-node", "64"), "--gpus-per-node", "more than the 8 GPUs")


def test_a_peak_no_tensor_core_can_reach_per_clock_is_a_unit_slip(tmp_path):
    """An MI355X's 2.5 PFLOP/s written as 2.5 under peak_tflops had been read as 2.5 TFLOP/s: 4 FLOP per
    clock per compute unit, a step priced 1000x long in silence.  The catalog's GPUs do about 1000 (V100, L40S)
    to about 8000 (B200) at 16 bits, all accepted."""
    with pytest.raises(InputError, match=r"2.5 TFLOP/s is 10.3 FLOP per clock per SM at 132 SMs x 1830 MHz") as e:
        load_gpu(_write(tmp_path, "g.yaml", H100.replace("  bf16: 989.4", "  bf16: 2.5")))
    assert e.value.field == "peak_tflops.bf16"
    for f in GPUS.glob("*.yaml"):
        load_gpu(str(f))


def test_link_bandwidths_in_bits_the_check_against_the_gpu_could_not_catch(tmp_path):
    """A PCIe node's 64Gbps (its Gen5 x16 link in bits, 8 GB/s) had priced TP 8 at 195 s of communication,
    while the same slip under host.pcie_bandwidth_per_gpu was refused; a GPU file's NVLink or Infinity
    Fabric in bits had been blamed on the cluster file's correct figure."""
    pcie = (CLUSTERS / "l40s-8x-pcie.yaml").read_text().replace("bandwidth_per_gpu: 32GB/s", "bandwidth_per_gpu: 256Gbps")
    with pytest.raises(InputError, match="'256Gbps' is in bits: PCIe links are quoted in bytes") as e:
        load_cluster(_write(tmp_path, "c.yaml", pcie))
    assert e.value.field == "intra_node.bandwidth_per_gpu"
    with pytest.raises(InputError, match="is in bits: NVLink and Infinity Fabric bandwidths are quoted in bytes") as e:
        load_gpu(_write(tmp_path, "g.yaml", H100.replace("nvlink_bandwidth_per_gpu: 450GB/s",
                                                         "nvlink_bandwidth_per_gpu: 3600Gbps")))
    assert e.value.field == "nvlink_bandwidth_per_gpu"


def test_more_nic_bandwidth_per_gpu_than_pcie_carries_needs_the_host_link(tmp_path):
    """64 NICs on a node had priced a cross-node all-to-all above the GPU's own NVLink (745 GB/s per GPU on
    4 GPUs): a GPU reaches its NICs over PCIe (at most 128 GB/s per direction, PCIe 6.0 x16); with the host
    section's link the share is capped, as DGX H100's file does.  A count that is no number is named."""
    many = DGX.replace("  nics_per_node: 8\n", "  nics_per_node: 64\n")
    assert many != DGX
    no_host = "".join(ln for ln in many.splitlines(keepends=True) if "pcie_bandwidth_per_gpu" not in ln)
    with pytest.raises(InputError, match="64 NICs of 400 Gb/s give each of the 8 GPUs 400 GB/s") as e:
        load_cluster(_write(tmp_path, "c.yaml", no_host))
    assert e.value.field == "inter_node.nics_per_node"
    capped = load_cluster(_write(tmp_path, "d.yaml", many))
    assert capped.node_nic_bytes_per_s == pytest.approx(8 * 64e9)
    with pytest.raises(InputError) as e:            # a quoted count: named, before any arithmetic on it
        load_cluster(_write(tmp_path, "e.yaml", DGX.replace("  nics_per_node: 8\n", '  nics_per_node: "8"\n')))
    assert e.value.field == "inter_node.nics_per_node"


def test_a_borrowed_base_says_what_it_cannot_price_on_the_new_gpu():
    """calibrate fit --base without measurements: an MI355X on the H100's profile had been priced with
    cuBLAS's efficiencies (MFU 58% against 45% on the MI300X's) in silence; a Blackwell part on the L40S's
    profile was refused at predict time for the cuDNN attention its Transformer Engine stacks run by
    default; an fp8 peak without a GEMM fit left --precision fp8 refused without a word at fit time."""
    from costmodel.fit.assembly import borrowed_gaps
    from costmodel.specs import load_profile
    h100, l40s = load_profile("h100-sxm-80gb").raw, load_profile("l40s").raw
    amd = borrowed_gaps(h100, h100, load_gpu("mi300x"), "h100.yaml")
    assert any("fitted on NVIDIA's H100-SXM-80GB" in w and "another vendor's kernel libraries" in w for w in amd), amd
    assert borrowed_gaps(h100, h100, load_gpu("h100-sxm-80gb"), "h100.yaml") == []
    b200 = borrowed_gaps(l40s, l40s, load_gpu("b200-sxm-180gb"), "l40s.yaml")
    assert any(w.startswith("attention.kernels.cudnn: the megatron and nemo stacks run") for w in b200), b200
    assert any(w.startswith("gemm.fp4: B200") for w in b200), b200
