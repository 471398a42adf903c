"""calibrate fit and collectives --compare on what a user's trial gave them: sendrecv_perf's redop
column, a capture faster than the cluster file's in-node link, a sweep of latency rows only, and a
profile of another GPU."""
from test_calibrate import PUBLIC, cli

SENDRECV = PUBLIC / "liplus_a100_8gpu_sendrecv.txt"


def test_sendrecv_perf_s_redop_sum_is_read_as_send_recv(tmp_path):
    """sendrecv_perf prints the -o op it was handed (sum) though it reduces nothing: the shipped
    capture fits and compares."""
    assert "float     sum" in SENDRECV.read_text()
    out = tmp_path / "p.yaml"
    args = ("--cluster", "dgx-a100", "--nodes", "1", "--gpus-per-node", "8")
    rc, so, se = cli("calibrate", "fit", str(SENDRECV), *args, "-o", str(out))
    assert rc == 0 and out.exists() and "comm.intra_node.send_recv" in so, se
    rc, so, se = cli("collectives", *args, "--profile", str(out), "--compare", str(SENDRECV))
    assert rc == 0 and "send_recv" in so and "time error, all sizes" in so, se


def _slow_in_node_cluster(tmp_path, fabric: str, bandwidth: str):
    """The aws-p5 cluster file with its in-node link replaced (a PCIe box, a slower NVSwitch)."""
    from test_calibrate import REPO
    text = (REPO / "hardware" / "clusters" / "aws-p5.yaml").read_text()
    text = text.replace("fabric: nvswitch", f"fabric: {fabric}").replace("bandwidth_per_gpu: 450GB/s",
                                                                         f"bandwidth_per_gpu: {bandwidth}")
    c = tmp_path / f"p5-{fabric}.yaml"
    c.write_text(text)
    return c


def test_a_capture_faster_than_the_in_node_link_writes_no_profile(tmp_path):
    """The p5 2-node all-reduce (487 GB/s busbw) against a cluster file whose in-node link is PCIe at
    32 GB/s, or NVSwitch at 300 GB/s: no inter-node line can reproduce it (the in-node part alone takes
    longer), so the fit refuses naming the file's field instead of writing a profile 1000 % off."""
    from test_calibrate import P5
    for fabric, bw in (("pcie", "32GB/s"), ("nvswitch", "300GB/s")):
        c = _slow_in_node_cluster(tmp_path, fabric, bw)
        out = tmp_path / "p.yaml"
        rc, so, se = cli("calibrate", "fit", str(P5), "--cluster", str(c), "--nodes", "2", "--gpus-per-node", "8",
                         "-o", str(out))
        assert rc == 2 and "faster than the link" in se and "intra_node.bandwidth_per_gpu" in se, se
        assert se.startswith(f"costmodel: error: {P5}: comm.inter_node.all_reduce: "), se
        assert "Traceback" not in se and not out.exists()


def test_the_fit_s_in_sample_error_is_the_compare_s(tmp_path):
    """The figures the fit prints are what collectives --compare then shows for the same capture."""
    import re
    from test_calibrate import P5
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(P5), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(out))
    assert rc == 0, se
    row = next(ln for ln in so.splitlines() if "comm.inter_node.all_reduce" in ln)
    med, mx = re.search(r"median ([\d.]+)% max ([\d.]+)%", row).groups()
    rc, so, se = cli("collectives", "--cluster", "aws-p5", "--profile", str(out), "--compare", str(P5))
    assert rc == 0, se
    assert f"time error, all sizes: median {med}%, max {mx}%" in so, (row, so[-300:])


def test_the_fit_s_in_sample_error_is_the_compare_s_on_pcie_bound_nics(tmp_path):
    """aws-p5 with a 32 GB/s host PCIe link per GPU, which caps what its NICs carry: the fit had priced
    the NICs' line rate, printing 12.8 % max error for a profile --compare then showed 61.6 % off."""
    import re
    from test_calibrate import P5, REPO
    text = (REPO / "hardware" / "clusters" / "aws-p5.yaml").read_text().replace(
        "sources:\n", "host:\n  pcie_bandwidth_per_gpu: 32GB/s\nsources:\n  host.pcie_bandwidth_per_gpu: \"a test's\"\n", 1)
    c = tmp_path / "p5-host.yaml"
    c.write_text(text)
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(P5), "--cluster", str(c), "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(out))
    assert rc == 0, se
    row = next(ln for ln in so.splitlines() if "comm.inter_node.all_reduce" in ln)
    med, mx = re.search(r"median ([\d.]+)% max ([\d.]+)%", row).groups()
    rc, so, se = cli("collectives", "--cluster", str(c), "--profile", str(out), "--compare", str(P5))
    assert rc == 0 and f"time error, all sizes: median {med}%, max {mx}%" in so, (row, so[-300:])


def test_the_readme_states_the_power_unit_check_s_threshold():
    """The README names the factor over the limit at which power samples stop the fit; the check uses it."""
    import re
    from types import SimpleNamespace
    import numpy as np
    from test_calibrate import REPO
    from costmodel.readers.power_trace import misread_units
    text = " ".join((REPO / "README.md").read_text().split())
    said = re.search(r"power samples that cannot be watts of the GPU \(.*?above ([\d.]+) x", text)
    f = float(said.group(1))
    trace = lambda w: SimpleNamespace(out_of_range={}, power_w=np.full(100, w))      # noqa: E731
    assert misread_units(trace(700.0 * f * 1.02), 700.0) is not None
    assert misread_units(trace(700.0 * f * 0.98), 700.0) is None


def test_a_profile_of_another_gpu_is_blamed_not_the_catalog_gpu_file(tmp_path):
    """An H100 profile (132 SMs) whose gpu field was set to the A100's, with the catalog's A100 file:
    the catalog file is the datasheet's, so the message names the profile's num_sms, says it was
    fitted for another GPU and asks for this GPU's profile, never 'correct the GPU file'."""
    from test_calibrate import REPO
    prof = tmp_path / "h100p.yaml"
    prof.write_text((REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml").read_text().replace(
        "gpu: h100-sxm-80gb", "gpu: a100-sxm-40gb", 1))
    cl = tmp_path / "mya100.yaml"
    cl.write_text((REPO / "hardware" / "clusters" / "dgx-a100.yaml").read_text().replace(
        "gpu: a100-sxm-80gb", "gpu: a100-sxm-40gb", 1))
    rc, so, se = cli("predict", "--model", "llama3-8b", "--cluster", str(cl), "--profile", str(prof))
    assert rc == 2 and len(se.strip().splitlines()) == 1, se
    assert f"{prof}: gemm.bf16.num_sms: 132 SMs" in se and "fitted for another GPU" in se, se
    assert "use a profile of a100-sxm-40gb" in se and "correct the GPU file" not in se, se


def test_a_latency_only_capture_holds_simple_at_the_base_profile_s_line(tmp_path):
    """Only the 8 B and 16 B rows of the p5 all-reduce: no size reaches Simple's range, so Simple's line
    stays the base profile's (as the README says), LL's latency alone is fitted (two rows cannot fit a
    protocol's two parameters without pinning one at a bound), and the fabric stays the cluster's."""
    import yaml
    from test_calibrate import P5, REPO
    head = [ln for ln in P5.read_text().splitlines() if ln.lstrip("0: ").startswith("#")][:6]
    rows = [ln for ln in P5.read_text().splitlines() if ln.startswith("0:") and ln.split()[1:2] in (["8"], ["16"])][:2]
    f = tmp_path / "tiny.txt"
    f.write_text("\n".join(head + rows) + "\n")
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(f), "--collective", "all_reduce", "--cluster", "aws-p5", "--nodes", "2",
                     "--gpus-per-node", "8", "-o", str(out))
    assert rc == 0, se
    got = yaml.safe_load(out.read_text())["comm"]["inter_node"]["all_reduce"]
    base = yaml.safe_load((REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml").read_text())
    want = base["comm"]["inter_node"]["all_reduce"]["protocols"][-1]
    simple = got["protocols"][-1]
    assert simple["name"] == "Simple" and simple["alpha_s"] == want["alpha_s"], simple
    assert simple["busbw_efficiency"] == want["busbw_efficiency"] and got["fabric"] == "efa"
    assert [q["busbw_efficiency"] for q in got["protocols"]] == \
        [q["busbw_efficiency"] for q in base["comm"]["inter_node"]["all_reduce"]["protocols"]]
