"""Sweeps too short for a protocol fit (fewer than 6 sizes in a node, 4 across nodes): `calibrate
fit` fits one line, Simple's latency and efficiency, holds the faster protocols at the base profile's,
and says so. Real captures: the 2-row H100 PCIe NVLink-bridge all-reduce of NVIDIA/nccl#1161 and the
Azure NDv5 2-node all-reduce cut to its 3 largest sizes."""
from pathlib import Path

import pytest
import yaml

from costmodel.collective import collective_time_s
from costmodel.fit.primitives import _pairs, params_of, short_sweep_fix, vector_of
from costmodel.readers.nccl_tests import read_nccl_tests
from costmodel.specs import load_profile
from test_calibrate import cli

REPO = Path(__file__).resolve().parents[2]
D = REPO / "tests" / "data" / "readers"


def test_vector_of_inverts_pairs():
    """The parameter vector of a built-in entry gives back its protocol lines."""
    prof = load_profile(str(REPO / "hardware/profiles/h100-sxm-80gb.yaml"))
    p = prof.comm["intra_node"]["all_reduce"]
    x = vector_of(p)
    got = _pairs(x, len(x) // 2)
    for (a, e), (a2, e2) in zip(sorted(p.absolute_protocols), got):
        assert a2 == pytest.approx(a, rel=1e-9) and e2 == pytest.approx(e, rel=1e-9)
    fix, k = short_sweep_fix(p, 2)
    assert k == len(x) // 2 and set(range(2 * k)) - set(fix) == {k - 1, k}
    assert set(range(2 * k)) - set(short_sweep_fix(p, 1)[0]) == {k}


def test_two_size_sweep_fits_simple_line_and_keeps_faster_protocols(tmp_path):
    """2x H100 PCIe over an NVLink bridge, 1 and 2 GiB (busbw 115.37 and 115.86 GB/s): Simple's
    efficiency is the measured busbw over the 300 GB/s bridge (0.386) and its line passes through
    both points; LL and LL128 latencies are the base profile's (its fit of 2-GPU groups); the warning and the
    fit method say so."""
    f = D / "nccl_tests_h100_pcie_nvlink_bridge_2gpu_2sizes.txt"
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(f), "--gpu", "h100-pcie-80gb", "--nodes", "1", "--gpus-per-node", "2",
                     "-o", str(out))
    assert rc == 0, se
    assert "2 size(s), fewer than the 6 a protocol fit needs: fitted Simple's latency and efficiency only" in " ".join((so + se).split())
    assert "n=2" in so and "(exact by" in so          # the table wraps the rest of the phrase
    d = yaml.safe_load(out.read_text())["comm"]["intra_node"]["all_reduce"]
    base = yaml.safe_load((REPO / "hardware/profiles/h100-pcie-80gb.yaml").read_text())["comm"]["intra_node"]["all_reduce"]
    base = base["by_group_size"]["2"]          # the base's fit of 2-GPU groups, the size measured here
    simple = d["protocols"][-1]
    assert simple["busbw_efficiency"] == pytest.approx(115.9e9 / 300e9, rel=0.01)
    assert [q["alpha_s"] for q in d["protocols"][:-1]] == pytest.approx([q["alpha_s"] for q in base["protocols"][:-1]],
                                                                          rel=1e-3)
    assert "short sweep" in d["fit"]["method"]
    rows = read_nccl_tests(f).select()
    t = collective_time_s("all_reduce", [r.size_bytes for r in rows], 2, 300e9, params_of(d))
    assert t == pytest.approx([r.time_us * 1e-6 for r in rows], rel=0.01)


def test_three_size_inter_node_sweep_fits_one_line(tmp_path):
    """The Azure NDv5 2x8 H100 all-reduce cut to 4, 8 and 16 GiB (a cut of the real capture): the
    inter-node entry is fitted (one line) instead of kept, reproduces the three times within 3 %, and
    its Simple efficiency is within 5 % of the fit of all 12 sizes (8 MiB..16 GiB: bandwidth-bound, so
    also one line, said so)."""
    src = (D / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt").read_text().splitlines()
    keep = [ln for ln in src if not ln.strip()[:1].isdigit() or int(ln.split()[0]) >= 2 ** 32]
    f = tmp_path / "ndv5.txt"
    f.write_text("\n".join(keep) + "\n")
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(f), "--gpu", "h100-sxm-80gb", "--cluster", "dgx-h100", "-o", str(out))
    assert rc == 0, se
    assert "comm.inter_node.all_reduce: 3 size(s), fewer than the 4 a protocol fit needs" in " ".join((so + se).split())
    d = yaml.safe_load(out.read_text())["comm"]["inter_node"]["all_reduce"]
    assert d["fit"]["n_points"] == 3 and d["fit"]["max_rel_err"] < 0.03 and "short sweep" in d["fit"]["method"]
    rc, so, se = cli("calibrate", "fit", str(D / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt"), "--gpu",
                     "h100-sxm-80gb", "--cluster", "dgx-h100", "-o", str(tmp_path / "full.yaml"))
    full = yaml.safe_load((tmp_path / "full.yaml").read_text())["comm"]["inter_node"]["all_reduce"]
    assert full["fit"]["n_points"] == 12 and "short sweep" in full["fit"]["method"]
    assert "all 12 sizes are >= 1 MiB" in " ".join((so + se).split())
    assert d["protocols"][-1]["busbw_efficiency"] == pytest.approx(full["protocols"][-1]["busbw_efficiency"], rel=0.05)


def test_the_gpu_comes_from_the_capture_s_rank_lines_and_an_unusable_trace_says_why(tmp_path):
    """The Olivia capture's rank lines name 'NVIDIA GH200 120GB': calibrate fit needs no --gpu (it said
    the inputs named no GPU). An nvidia-smi CSV with no idle sample names the reason nothing was fitted."""
    rc, so, se = cli("calibrate", "fit", str(D / "nccl_tests_olivia_gh200_16ranks_4nodes.txt"), "--cluster",
                     "jupiter-gh200", "-o", str(tmp_path / "p.yaml"))
    assert rc == 0, se
    assert yaml.safe_load((tmp_path / "p.yaml").read_text())["provenance"]["gpu"] == "gh200-96gb"
    rc, so, se = cli("calibrate", "fit", str(D / "nvidia_smi_csv_pstate_power_clocks.csv"), "--gpu", "h100-sxm-80gb",
                     "-o", str(tmp_path / "q.yaml"))
    assert rc == 2 and "idle power needs >= 20" in se


def test_a_fit_from_another_gpu_s_capture_or_giving_a_value_the_model_refuses_writes_nothing(tmp_path):
    """The OCI capture names 'NVIDIA A100-SXM4-40GB': fitted for dgx-h100's H100 it is refused (it used to
    write an H100 profile from A100 data). A trace of negative power readings leaves no idle power and
    the old profile untouched."""
    cap = D / "nccl_tests_oci_a100_16ranks_2nodes.txt"
    out = tmp_path / "p.yaml"
    out.write_text("old")
    rc, so, se = cli("calibrate", "fit", str(cap), "--collective", "all_reduce", "--cluster", "dgx-h100", "-o", str(out))
    assert rc == 2 and ("measured on 'NVIDIA A100-SXM4-40GB' (a100-sxm-40gb), but the profile is for h100-sxm-80gb "
                        "(--cluster dgx-h100)") in se          # the flag the user gave, not one they did not
    assert out.read_text() == "old"
    src = (D / "nvidia_smi_csv_pstate_power_clocks.csv").read_text()
    neg = tmp_path / "neg.csv"
    neg.write_text(src.replace("83.92 W", "-83.92 W"))
    from costmodel.readers.nvidia_smi import read_nvidia_smi_csv
    from costmodel.readers.power_trace import power_trace_from_nvidia_smi_csv
    t = power_trace_from_nvidia_smi_csv(read_nvidia_smi_csv(neg, strict=False), strict=False)
    assert any("power_w reading(s) outside 0..3000 W" in e for e in t.errors)


def test_nodes_that_contradict_the_rank_lines_are_refused(tmp_path):
    """The Azure NDv5 capture's rank lines say 2 hosts x 8 ranks: --nodes 4 (or --gpus-per-node 4)
    contradicts them and is refused in one line naming the flag; the agreeing value is accepted."""
    f = D / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt"
    base = ("calibrate", "fit", str(f), "--gpu", "h100-sxm-80gb", "--cluster", "dgx-h100")
    for flag, value in (("--nodes", "4"), ("--gpus-per-node", "4")):
        out = tmp_path / f"p{flag}.yaml"
        rc, so, se = cli(*base, flag, value, "-o", str(out))
        assert rc == 2 and f"{flag} {value} contradicts the capture's # Rank lines (2 node(s) x 8 ranks each)" in se
        assert len(se.strip().splitlines()) == 1 and not out.exists()
    rc, so, se = cli(*base, "--nodes", "2", "-o", str(tmp_path / "ok.yaml"))
    assert rc == 0, se


def _fit_p5_cut(tmp_path, max_bytes: int):
    """(the AWS p5 capture, the profile written, (rc, stdout, stderr)) of calibrate fit on that capture's
    rows up to ``max_bytes``."""
    src = REPO / "hardware" / "profiles" / "data" / "aws_p5_2node_16xH100_allreduce.txt"
    keep = [ln for ln in src.read_text().splitlines()
            if not (ln.split()[1:2] and ln.split()[0] == "0:" and ln.split()[1].isdigit() and int(ln.split()[1]) > max_bytes)]
    cut = tmp_path / f"p5_{max_bytes}.txt"
    cut.write_text("\n".join(keep) + "\n")
    out = tmp_path / "p.yaml"
    return src, out, cli("calibrate", "fit", str(cut), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                         "-o", str(out))


def test_a_latency_bound_sweep_holds_simple_s_line_at_the_base(tmp_path):
    """The AWS p5 capture cut at 64 KiB never reaches Simple's bandwidth (nor Simple at all): its line is
    held at the base profile's and the faster lines fitted, so the full capture's large messages come back
    within 10 % (a free fit put Simple's efficiency at 0.08: 1 GiB 7.6 x too slow)."""
    src, out, (rc, so, se) = _fit_p5_cut(tmp_path, 65536)
    assert rc == 0, se
    assert "latency-bound throughout, so the bandwidth (Simple's line) is not measured: held at" in " ".join((so + se).split())
    fit = yaml.safe_load(out.read_text())["comm"]["inter_node"]["all_reduce"]
    base = yaml.safe_load((REPO / "hardware/profiles/h100-sxm-80gb.yaml").read_text())["comm"]["inter_node"]["all_reduce"]
    assert fit["protocols"][-1]["busbw_efficiency"] == pytest.approx(base["protocols"][-1]["busbw_efficiency"], rel=1e-3)
    assert "latency-bound sweep" in fit["fit"]["method"]
    rc, so, se = cli("collectives", "--cluster", "aws-p5", "--profile", str(out), "--compare", str(src), "--json")
    import json
    big = [r for r in json.loads(so)["rows"] if r["size_bytes"] >= 2 ** 26]
    assert big and max(abs(r["time_rel_err"]) for r in big) < 0.10


def test_a_sweep_cut_at_128_bytes_fits_the_latency_only(tmp_path):
    """The p5 capture cut mid-run after 128 B (8..128 B, where LL alone wins): only the latency is
    fitted, every protocol's efficiency and latency relative to LL's held at the base profile's, so
    the full capture comes back as the base profile gives it (a fit of each line had put LL128 at 0.3%
    of the NIC: +41..61% from 128 KiB to 1 MiB)."""
    import json
    src, out, (rc, so, se) = _fit_p5_cut(tmp_path, 128)
    assert rc == 0, se
    fit = yaml.safe_load(out.read_text())["comm"]["inter_node"]["all_reduce"]
    base = yaml.safe_load((REPO / "hardware/profiles/h100-sxm-80gb.yaml").read_text())["comm"]["inter_node"]["all_reduce"]
    for f, b in zip(fit["protocols"], base["protocols"]):
        assert f["busbw_efficiency"] == pytest.approx(b["busbw_efficiency"], rel=1e-3)
    worst = {}
    for prof in (str(out), "h100-sxm-80gb"):
        rc, so, se = cli("collectives", "--cluster", "aws-p5", "--profile", prof, "--compare", str(src), "--json")
        worst[prof] = max(abs(r["time_rel_err"]) for r in json.loads(so)["rows"] if r["size_bytes"] >= 2 ** 17)
    # from 128 KiB up, within 3 points of the base profile's own error on the capture it was fitted to
    assert worst[str(out)] < worst["h100-sxm-80gb"] + 0.03


def test_a_sweep_faster_than_the_clusters_links_writes_nothing(tmp_path):
    """The AWS p5 capture (32 x 100 Gb/s EFA a node) fitted as the MICRO'25 H100 cluster's (one
    100 Gb/s NIC a node): its 32 sizes ran 8x faster than that NIC allows, a busbw efficiency pinned
    at the bound 1.0, so the fit stops with one line and writes nothing (a warning had let the
    pinned line price every layout)."""
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(REPO / "hardware/profiles/data/aws_p5_2node_16xH100_allreduce.txt"),
                     "--cluster", "paper-h100", "--nodes", "2", "--gpus-per-node", "8", "-o", str(out))
    assert rc == 2 and len(se.strip().splitlines()) == 1 and not out.exists()
    assert "comm.inter_node.all_reduce: busbw efficiency 1.000 sits at its bound 1.0" in se and "nothing written" in se
