"""`costmodel calibrate fit|show|run`, the fits of costmodel/fit and the +/- band of predictions.

Targets on real public files: the all-reduce fit reproduces the AWS p5 2-node H100
nccl-tests busbw within 10 % at every size >= 1 MiB, and the GEMM fit reproduces the measured XLA
sm_90 matmul table within 10 % median error, both through the same `calibrate fit` path a user takes.
"""
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from costmodel.fit import FitReport, Measurements, fit_power_section, fit_thermal_section, gpu_key_for
from costmodel.readers import read_xla_matmul_table
from costmodel.readers.suite_jsonl import SUITE_VERSION, SuiteRun, make_record
from costmodel.collective import busbw_factor, hierarchical_time_s
from costmodel.specs import load_cluster, load_gpu, load_model, load_profile
from costmodel.specs.profile import MAD_TO_SIGMA
from costmodel.uncertainty import step_time_band
from conftest import predict_one

REPO = Path(__file__).resolve().parents[2]
PUBLIC = REPO / "hardware" / "profiles" / "data"
P5 = PUBLIC / "aws_p5_2node_16xH100_allreduce.txt"
MiB = 2 ** 20


def cli(*args, cwd=None):
    """Run the installed CLI in a subprocess: (exit code, stdout, stderr)."""
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", *args], capture_output=True, text=True,
                       cwd=cwd or REPO, timeout=300)
    return r.returncode, r.stdout, r.stderr


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def provenance(gpu_name="NVIDIA H100 80GB HBM3", device="cuda", host="node0", rank=0, slot=0):
    return make_record("provenance", host, rank, world_size=1, local_rank=slot, node_rank=0, n_nodes=1,
                       backend="nccl", device=device, gpu_name=gpu_name, gpu_id="abc123", pci_bus_id="00000000:1B:00.0",
                       slot=slot, driver_version="550.54.15", cuda_version="12.4", rocm_version=None,
                       nccl_version="2.21.5", torch_version="2.4.0", python_version="3.11", monitor="nvml",
                       power_limit_w=700.0, power_limit_range_w=[200.0, 700.0], started_unix=1.7e9, args={})


# ------------------------------------------------------------------------------------ targets
def test_allreduce_fit_reproduces_p5_busbw_within_10pct(tmp_path):
    out = tmp_path / "p5.yaml"
    rc, so, se = cli("calibrate", "fit", str(P5), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(out))
    assert rc == 0, se
    prof = yaml.safe_load(out.read_text())
    e = prof["comm"]["inter_node"]["all_reduce"]
    assert e["fit"]["n_nodes"] == 2 and e["fit"]["ranks_per_node"] == 8
    # recompute busbw from the written parameters against the measured table 1 (out-of-place)
    from costmodel.readers import read_nccl_tests
    rows = [r for r in read_nccl_tests(P5, strict=False).select() if r.size_bytes >= MiB]
    p = load_profile(str(out))
    c = load_cluster("aws-p5")
    n = np.array([r.size_bytes for r in rows], float)
    t = hierarchical_time_s("all_reduce", n, 8, 2, c.intra_bytes_per_s, c.node_nic_bytes_per_s / 8,
                            p.comm["intra_node"]["all_reduce"], p.comm["inter_node"]["all_reduce"])
    busbw_model = busbw_factor("all_reduce", 16) * n / t / 1e9
    busbw_meas = np.array([r.busbw for r in rows])
    assert np.all(np.abs(busbw_model / busbw_meas - 1) <= 0.10), np.abs(busbw_model / busbw_meas - 1).max()
    assert e["fit"]["max_busbw_rel_err_ge_1MiB"] <= 0.10
    # the intra-node scope was not measured: kept from the H100 profile, and the report says so
    assert prof["comm"]["intra_node"]["all_reduce"]["kept_from"].endswith("h100-sxm-80gb.yaml")
    assert "no measurement of" in se + so
    # and calibrate show says so of its smaller groups too (their fits are the base's, not this capture's)
    rc, so, se = cli("calibrate", "show", str(out))
    rows = [" ".join(ln.split()) for ln in so.splitlines() if "groups of" in ln]
    assert rc == 0 and rows and all("fitted" not in r for r in rows), rows


def test_a_fitted_all_reduce_reaches_the_collectives_derived_from_it(tmp_path):
    """The H100 profile's inter-node reduce-scatter and all-gather copy its inter-node all-reduce
    (derived_from): a capture twice as slow must slow them too, so a ZeRO-1 step's DP traffic (reduce-scatter
    and all-gather) follows the fitted fabric, not the base profile's copy."""
    slow = tmp_path / "p5_slow.txt"
    lines = []
    for ln in P5.read_text().splitlines():
        f = ln.split()
        off = 1 if f and f[0].endswith(":") else 0           # mpirun's rank prefix '0:'
        if len(f) >= 12 + off and f[off].isdigit():
            # out-of-place and in-place: time x 2, algbw and busbw / 2
            for i in (5 + off, 9 + off):
                f[i], f[i + 1], f[i + 2] = f"{2 * float(f[i]):.2f}", f"{float(f[i + 1]) / 2:.2f}", f"{float(f[i + 2]) / 2:.2f}"
            ln = "  ".join(f)
        lines.append(ln)
    slow.write_text("\n".join(lines) + "\n")
    out = tmp_path / "slow.yaml"
    rc, so, se = cli("calibrate", "fit", str(slow), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(out))
    assert rc == 0, se
    prof = yaml.safe_load(out.read_text())["comm"]["inter_node"]
    simple = {p["name"]: p for p in prof["all_reduce"]["protocols"]}["Simple"]
    for coll in ("all_gather", "reduce_scatter"):
        assert prof[coll]["protocols"] == prof["all_reduce"]["protocols"] and "kept_from" not in prof[coll]
        assert prof[coll]["derived_from"] == "h100-sxm-80gb:comm.inter_node.all_reduce"
    base = yaml.safe_load((REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml").read_text())
    base = {p["name"]: p for p in base["comm"]["inter_node"]["all_reduce"]["protocols"]}["Simple"]
    assert simple["busbw_efficiency"] == pytest.approx(base["busbw_efficiency"] / 2, rel=0.05)
    c, m = load_cluster("aws-p5"), load_model("llama3-8b")
    kw = dict(tp=1, pp=1, dp=16, mbs=1, zero=1)
    fast = predict_one(m, c, load_profile("h100-sxm-80gb"), **kw).breakdown["dp_comm_s"][0]
    assert predict_one(m, c, load_profile(str(out)), **kw).breakdown["dp_comm_s"][0] > 1.3 * fast


def test_copies_of_a_fitted_collective_take_its_fabric(tmp_path):
    """The H100 profile's inter-node copies say ``fabric: efa`` (from the p5 capture); fitted on Azure's
    InfiniBand capture for a dgx-h100 cluster, the copies take the fitted all-reduce's fabric, or
    predictions on InfiniBand would skip them and keep the datasheet pricing; the provenance records
    the capture's hosts, GPU and NCCL version."""
    ib = REPO / "tests" / "data" / "readers" / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt"
    out = tmp_path / "ib.yaml"
    rc, so, se = cli("calibrate", "fit", str(ib), "--cluster", "dgx-h100", "-o", str(out))
    assert rc == 0, se
    prof = yaml.safe_load(out.read_text())["comm"]["inter_node"]
    assert prof["all_reduce"]["fabric"] == "infiniband"
    for coll in ("all_gather", "reduce_scatter", "all_to_all", "send_recv"):
        assert prof[coll]["fabric"] == "infiniband" and prof[coll]["protocols"] == prof["all_reduce"]["protocols"]
    # the provenance says where it was measured, from the capture's rank lines and NCCL banner
    measured = yaml.safe_load(out.read_text())["provenance"]["measured"]
    assert measured["hosts"] == ["h100a-gpu-0001", "h100a-gpu-0002"] and measured["world_size"] == 16
    assert measured["gpu_names"] == ["NVIDIA H100 80GB HBM3"] and measured["nccl"] == ["2.29.7"]


GPU_OUTSIDE_CATALOG = """name: RTX6000-Ada
vendor: nvidia
architecture: ada
peak_tflops: {bf16: 364.2, fp16: 364.2, fp8: 728.5}
hbm_capacity: 48GB
hbm_bandwidth: 960GB/s
tdp: 300W
num_sms: 142
slowdown_temp: 90C
power_limit_min: 100W
boost_clock_mhz: 2505
sources:
  peak_tflops: "NVIDIA RTX 6000 Ada datasheet (sparsity halved)"
  hbm_capacity: "NVIDIA RTX 6000 Ada datasheet"
  hbm_bandwidth: "NVIDIA RTX 6000 Ada datasheet"
  tdp: "NVIDIA RTX 6000 Ada datasheet"
  num_sms: "Ada whitepaper"
  slowdown_temp: "nvidia-smi -q"
  power_limit_min: "nvidia-smi -q"
  boost_clock_mhz: "NVIDIA RTX 6000 Ada datasheet"
"""


def test_a_gpu_outside_the_catalog_calibrates_on_a_borrowed_base(tmp_path):
    """A cluster of a GPU the catalog lacks (its own GPU file): the fit normalises by that file, asks for a
    base to keep the unmeasured sections from (it has no profile of its own), takes the nearest catalog
    GPU's with a warning that those sections are borrowed, drops the limit that GPU's kernels ran under,
    and the profile it writes prices the cluster."""
    (tmp_path / "rtx6000ada.yaml").write_text(GPU_OUTSIDE_CATALOG)
    cl = tmp_path / "ws.yaml"
    cl.write_text("""name: ws\ngpu: rtx6000ada.yaml\ngpus_per_node: 8\nnodes: 1
intra_node: {fabric: pcie, bandwidth_per_gpu: 32GB/s, latency: 1us}
inter_node: {fabric: roce, nics_per_node: 1, bandwidth_per_nic: 100Gbps, latency: 2.7us}
power: {node_power_budget: 4kW}
cooling: {type: air, airflow: front-to-back, inlet_temp: 25C}
sources: {gpus_per_node: ours, nodes: ours, intra_node.bandwidth_per_gpu: PCIe Gen4 x16, intra_node.latency: ours,
  inter_node.nics_per_node: ours, inter_node.bandwidth_per_nic: ConnectX-6, inter_node.latency: ours,
  power.node_power_budget: PSU rating, cooling.inlet_temp: setpoint}
""")
    trace = tmp_path / "ws_power.csv"
    rows = (PUBLIC / "h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv").read_text().splitlines()
    keep = [r for r in rows if r.startswith("#") or not r[:1].isdigit()][:40]
    data = [r for r in rows if r[:1].isdigit()][:4000]
    scaled = [",".join(f"{float(v.split()[0]) * 300 / 700:.2f} W" if i == 1 else v for i, v in enumerate(r.split(",")))
              for r in data]
    trace.write_text("\n".join([k for k in keep if not k.startswith("#")] + scaled) + "\n")
    out = tmp_path / "ws.yaml.fit"
    rc, so, se = cli("calibrate", "fit", str(trace), "--cluster", str(cl), "-o", str(out))
    assert rc == 2 and "rtx6000ada has no built-in profile" in se and "--base" in se, se
    rc, so, se = cli("calibrate", "fit", str(trace), "--cluster", str(cl), "--base", "l40s", "-o", str(out))
    assert rc == 0, se
    assert "fitted for l40s" in so and "borrowed" in so
    prof = yaml.safe_load(out.read_text())
    assert prof["gpu"] == "rtx6000ada" and "kernel_limit_w" not in prof["power"]
    rc, so, se = cli("predict", "--model", "llama3-8b", "--cluster", str(cl), "--profile", str(out), "--tp", "1",
                     "--pp", "1", "--mbs", "1", "--gbs", "64", "--seq-len", "4096", "--zero", "3", "--recompute", "full")
    assert rc == 0 and "step time" in so, se


def _xla_h100_gemm_records():
    """XLA's sm_90 BF16 matmul table as suite GEMM records (one per shape), after a provenance record."""
    rows = read_xla_matmul_table(PUBLIC / "xla_matmul_perf_table_sm90_sm100.csv", "sm_90", "bf16xbf16->bf16")
    recs = [provenance()]
    for r in rows:
        flops = 2.0 * r.get("b", 1) * r["m"] * r["n"] * r["k"]
        recs.append(make_record("gemm", "node0", 0, dtype="bf16", b=r.get("b", 1), m=r["m"], n=r["n"], k=r["k"],
                                time_s=r["time_s"], flops_per_s=flops / r["time_s"], iters=1, source="xla sm_90 table",
                                t_start_unix=0.0, t_end_unix=0.0))
    return rows, recs


def test_bad_suite_gemm_times_are_named_and_times_in_another_unit_write_nothing(tmp_path):
    """A GEMM record whose time is 0 or NaN, or disagrees with its own rate (a time in ms), is named and left
    out; a whole table in ms (times and rates consistent, 1000x slow) fits nothing: refused, nothing written."""
    rows, recs = _xla_h100_gemm_records()
    bad = [dict(r) for r in recs]
    bad[1]["time_s"], bad[2]["time_s"], bad[3]["time_s"] = 0.0, float("nan"), bad[3]["time_s"] * 1e3
    raw = write_jsonl(tmp_path / "bad.jsonl", bad)
    rc, so, se = cli("calibrate", "fit", str(raw), "-o", str(tmp_path / "bad.yaml"))
    assert rc == 0, se
    said = " ".join((so + se).split())
    assert f"{raw}:2: gemm record: time_s 0.0 is not a positive finite number" in said
    assert f"{raw}:3: gemm record: time_s nan is not a positive finite number" in said
    assert f"{raw}:4: gemm record: time_s" in said and "a time not in seconds?" in said
    assert yaml.safe_load((tmp_path / "bad.yaml").read_text())["gemm"]["bf16"]["fit"]["n_points"] == len(rows) - 3
    ms = [dict(r, time_s=r["time_s"] * 1e3, flops_per_s=r["flops_per_s"] / 1e3) if r["kind"] == "gemm" else r
          for r in recs]
    out = tmp_path / "ms.yaml"
    rc, so, se = cli("calibrate", "fit", str(write_jsonl(tmp_path / "ms.jsonl", ms)), "-o", str(out))
    assert rc == 2 and "gemm.bf16: the fit explains none of" in se and "times not in seconds" in se, se
    assert not out.exists()


def test_gemm_fit_from_suite_records_reproduces_xla_table(tmp_path):
    rows, recs = _xla_h100_gemm_records()
    raw = write_jsonl(tmp_path / "raw.jsonl", recs)
    out = tmp_path / "h100.yaml"
    rc, so, se = cli("calibrate", "fit", str(raw), "-o", str(out))
    assert rc == 0, se
    prof = yaml.safe_load(out.read_text())
    fit = prof["gemm"]["bf16"]["fit"]
    assert fit["n_points"] == len(rows) > 300
    assert fit["median_rel_err"] <= 0.10
    assert prof["provenance"]["gpu"] == "h100-sxm-80gb"                 # matched from the NVML name
    assert "no 'end' record" in se + so                                 # a hand-made file has no end line
    rc, so, se = cli("calibrate", "show", str(out))
    assert rc == 0 and "gemm.bf16" in so and "fitted" in so and "kept from" in so


def test_a_base_profile_written_with_units_is_fitted_from(tmp_path):
    """A base profile whose power values carry units (idle_w: 121.8W, static_w: "80W") loads as it does
    in predict; the fit computes with the parsed numbers (it had multiplied strings)."""
    text = (REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml").read_text()
    assert "  idle_w: 121.8\n" in text and "  static_w: 80.5\n" in text
    base = tmp_path / "base.yaml"
    base.write_text(text.replace("  idle_w: 121.8\n", "  idle_w: 121.8W\n").replace("  static_w: 80.5\n",
                                                                                       '  static_w: "80W"\n'))
    out = tmp_path / "h100.yaml"
    trace = PUBLIC / "h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv"
    rc, so, se = cli("calibrate", "fit", str(trace), "--gpu", "h100-sxm-80gb", "--base", str(base), "-o", str(out))
    assert rc == 0, se
    pw = yaml.safe_load(out.read_text())["power"]
    assert pw["idle_w"] == pytest.approx(121.8, abs=0.05) and pw["static_w"] == pytest.approx(80.0, rel=1e-3)


def test_idle_power_from_a_real_nvidia_smi_trace(tmp_path):
    out = tmp_path / "h100.yaml"
    trace = PUBLIC / "h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv"
    rc, so, se = cli("calibrate", "fit", str(trace), "--gpu", "h100-sxm-80gb", "-o", str(out))
    assert rc == 0, se
    prof = yaml.safe_load(out.read_text())
    assert prof["power"]["idle_w"] == pytest.approx(121.8, abs=0.05)    # as python -m costmodel.fit.builtin
    assert prof["power"]["fit"]["n_points"] == 10100
    assert "flop_w, hbm_w, link_w, spin_w kept" in so + se
    # the fit's own table marks what it did not measure (its cells wrap: read as one text)
    text = " ".join((so + se).replace("│", " ").split())
    assert ("idle_w 121.8 static_w 80.5 (derived) flop_w 895.9 (kept) hbm_w 378.2 (kept) link_w 184.4 (kept) "
            "spin_w 33.91 (kept) gamma 2.53") in text and text.count("(kept)") == 5, text
    assert prof["power"]["basis"]["idle_w"] == "fitted" and prof["power"]["basis"]["flop_w"] == "borrowed"
    assert prof["power"]["v_floor_clock_ratio"] == 0.777       # kept from the built-in profile, not dropped
    # the static share of the idle power (80.5 of 121.8 W in the built-in profile) carries to the new idle
    assert prof["power"]["static_w"] == pytest.approx(prof["power"]["idle_w"] * 80.5 / 121.8, rel=1e-3)
    assert prof["power"]["basis"]["static_w"] == "derived"
    # show says which coefficients the trace fitted, not the whole section (the cell wraps: its words
    # are read off the power row's lines, last column)
    rc, so, se = cli("calibrate", "show", str(out))
    lines = so.splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.startswith("│ power "))
    cell = " ".join(ln.rstrip(" │").split("│")[-1].strip() for ln in lines[i:i + 3])
    assert rc == 0 and "fitted, except flop_w, hbm_w, link_w, spin_w kept from the base profile" in cell, cell


# ----------------------------------------------------------------------------- fits by recovery
def _suite(records):
    s = SuiteRun(path=Path("mem.jsonl"), complete=True)
    for i, r in enumerate(records):
        r["_line"] = i + 1
        s.records[r["kind"]].append(r)
    return s


def test_thermal_step_response_recovers_r_th_and_tau():
    """A first-order RC response sampled at 20 Hz with 0.25 C noise: R_th and tau within 5 %."""
    rng = np.random.default_rng(0)
    recs, r_th, tau, p_idle, p_load = [], 0.06, 90.0, 90.0, 650.0
    for slot, scale in ((0, 1.0), (1, 1.3)):
        recs.append(make_record("phase", "n0", slot, name="idle", slot=slot, t_start_unix=0.0, t_end_unix=30.0,
                                flops_per_s=0.0, hbm_bytes_per_s=0.0, link_bytes_per_s=0.0, power_limit_w=700.0,
                                dtype=None))
        recs.append(make_record("phase", "n0", slot, name="sustained_gemm", slot=slot, t_start_unix=30.0,
                                t_end_unix=330.0, flops_per_s=6e14, hbm_bytes_per_s=0.0, link_bytes_per_s=0.0,
                                power_limit_w=700.0, dtype="bf16"))
        for t in np.arange(0.0, 330.0, 0.05):
            load = t >= 30.0
            p = p_load if load else p_idle
            temp = 30 + scale * r_th * p_idle + (scale * r_th * (p_load - p_idle) * (1 - np.exp(-(t - 30) / tau)) if load else 0)
            recs.append(make_record("sample", "n0", slot, slot=slot, t_unix=t, power_w=p + rng.normal(0, 3),
                                    temp_c=temp + rng.normal(0, 0.25), mem_temp_c=None, sm_clock_mhz=1980,
                                    clock_event_reasons=0, util_gpu_pct=100 if load else 0, util_mem_pct=0,
                                    power_limit_w=700.0))
    rep = FitReport()
    th = fit_thermal_section(Measurements(suites=[_suite(recs)]), {}, rep)
    slots = {x["slot"]: x for x in th["fit"]["per_slot"]}
    assert slots[0]["r_th_c_per_w"] == pytest.approx(r_th, rel=0.05)
    assert slots[1]["r_th_c_per_w"] == pytest.approx(1.3 * r_th, rel=0.05)
    assert slots[0]["tau_s"] == pytest.approx(tau, rel=0.05)
    assert slots[1]["r_th_scale"] / slots[0]["r_th_scale"] == pytest.approx(1.3, rel=0.05)
    assert th["r_th_c_per_w"] == pytest.approx(np.median([r_th, 1.3 * r_th]), rel=0.05)


def test_power_fit_recovers_coefficients_and_skips_throttled_phases():
    """Phases built from known coefficients; a power-capped phase must not bias the fit."""
    gpu = load_gpu("h100-sxm-80gb")
    idle, cf, ch, cl = 110.0, 600.0, 250.0, 120.0
    recs, t = [], 0.0
    phases = [("gemm", 0.7, 0.05, 0.0), ("gemm", 0.4, 0.1, 0.0), ("hbm", 0.0, 0.9, 0.0), ("hbm", 0.0, 0.5, 0.0),
              ("collective", 0.0, 0.1, 0.8), ("collective", 0.0, 0.05, 0.4), ("idle", 0.0, 0.0, 0.0)]
    for name, uf, uh, ul in phases + [("gemm", 0.95, 0.05, 0.0)]:
        capped = uf > 0.9
        p = 700.0 if capped else idle + cf * uf + ch * uh + cl * ul
        recs.append(make_record("phase", "n0", 0, name=name, slot=0, t_start_unix=t, t_end_unix=t + 2.0,
                                flops_per_s=uf * gpu.peak_flops["bf16"], hbm_bytes_per_s=uh * gpu.hbm_bytes_per_s,
                                link_bytes_per_s=ul * gpu.nvlink_bytes_per_s, power_limit_w=700.0, dtype="bf16"))
        for k in range(40):
            recs.append(make_record("sample", "n0", 0, slot=0, t_unix=t + 0.05 * k, power_w=p, temp_c=50.0,
                                    mem_temp_c=None, sm_clock_mhz=1700 if capped else 1980,
                                    clock_event_reasons=0x4 if capped else 0, util_gpu_pct=0 if name == "idle" else 100,
                                    util_mem_pct=0, power_limit_w=700.0))
        t += 2.0
    rep = FitReport()
    pw = fit_power_section(Measurements(suites=[_suite(recs)]), gpu, {"power": {"gamma": 2.4}}, rep)
    assert pw["idle_w"] == pytest.approx(idle, rel=0.01)
    assert pw["flop_w"] == pytest.approx(cf, rel=0.01)
    assert pw["hbm_w"] == pytest.approx(ch, rel=0.01)
    assert pw["link_w"] == pytest.approx(cl, rel=0.01)
    assert pw["fit"]["n_points"] == len(phases)          # the capped phase is left out
    assert pw["gamma"] == 2.4 and any("gamma" in w for w in rep.warnings)


def test_gpu_names_match_the_catalog():
    assert gpu_key_for("NVIDIA H100 80GB HBM3") == "h100-sxm-80gb"
    assert gpu_key_for("NVIDIA H200") == "h200-sxm-141gb"
    assert gpu_key_for("NVIDIA A100-SXM4-80GB") == "a100-sxm-80gb"
    assert gpu_key_for("Intel Xeon") is None and gpu_key_for(None) is None


# ------------------------------------------------------------------------------------ bad input
def test_bad_inputs_exit_2_with_one_line(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    rc, so, se = cli("calibrate", "fit", str(empty), "-o", str(tmp_path / "x.yaml"))
    assert rc == 2 and str(empty) in se and "Traceback" not in se
    old = write_jsonl(tmp_path / "old.jsonl", [dict(provenance(), version=SUITE_VERSION + 1)])
    rc, so, se = cli("calibrate", "fit", str(old), "-o", str(tmp_path / "x.yaml"))
    assert rc == 2 and "Traceback" not in se and "version" in se
    anon = tmp_path / "bus.log"          # an nccl-tests table with no collective named and no rank lines:
    anon.write_text("\n".join(P5.read_text().splitlines()[4:34]) + "\n")  # busbw/algbw says 16 all_reduce ranks
    rc, so, se = cli("calibrate", "fit", str(anon), "--gpu", "h100-sxm-80gb", "-o", str(tmp_path / "x.yaml"))
    assert rc == 2 and "does not say which collective it measured" in se and "pass --collective" in se, se
    rc, so, se = cli("calibrate", "fit", str(anon), "--collective", "all_reduce", "--gpu", "h100-sxm-80gb", "-o",
                     str(tmp_path / "x.yaml"))
    assert rc == 2 and "no '# Rank' lines to tell its topology: pass --nodes and --gpus-per-node" in se, se
    assert "Traceback" not in se
    assert not (tmp_path / "x.yaml").exists()
    rc, so, se = cli("calibrate", "fit", str(tmp_path / "missing.jsonl"), "-o", str(tmp_path / "x.yaml"))
    assert rc == 2 and "no such file" in se


def test_run_prints_the_torchrun_line():
    """The suite runs under torchrun's module of this interpreter (a torchrun on PATH may be another
    Python's), and the line printed is the line run."""
    rc, so, se = cli("calibrate", "run", "--nproc-per-node", "8", "--dry-run", "--out", "raw.jsonl", "--quick")
    assert rc == 0
    assert (f"{sys.executable} -m torch.distributed.run --nproc-per-node=8 -m costmodel.calibration.run --out raw.jsonl "
            "--quick") in se
    rc, so, se = cli("calibrate", "run", "--nnodes", "2", "--dry-run")
    assert rc == 2 and "--rdzv-endpoint" in se


def test_a_machine_without_gpus_runs_two_cpu_processes(monkeypatch):
    """Without a visible GPU (no CUDA torch, no nvidia-smi) calibrate run starts two processes, so the
    suite's gloo collectives and wait have a peer (one process skips them)."""
    import subprocess
    from costmodel.cli import calibrate
    monkeypatch.setitem(sys.modules, "torch", None)            # import torch fails
    def no_smi(*a, **k):
        raise OSError("nvidia-smi: not found")
    monkeypatch.setattr(subprocess, "run", no_smi)
    n = calibrate._visible_gpus() or calibrate.CPU_PROCESSES      # run()'s count without --nproc-per-node
    assert n == calibrate.CPU_PROCESSES == 2
    assert "--nproc-per-node=2" in calibrate.launch_command("raw.jsonl", n)


def test_a_run_without_gpus_says_it_checks_the_plumbing(monkeypatch, tmp_path, capsys):
    """calibrate run on a GPU-less machine runs on CPU processes (exit 0): it says so before it starts,
    and that calibrate fit refuses such records (it had said nothing)."""
    from costmodel.cli import calibrate
    monkeypatch.setattr(calibrate, "_visible_gpus", lambda: 0)
    calibrate.run(type("Ctx", (), {"args": []})(), out=str(tmp_path / "raw.jsonl"), nproc_per_node=None, nnodes=1,
                  rdzv_endpoint=None, dry_run=True, force=False)
    err = capsys.readouterr().err
    assert "no GPU visible: the suite runs on 2 CPU processes (gloo), a check of its plumbing" in err
    assert "--nproc-per-node=2" in err


# ---------------------------------------------------------------------- band and overlap factor
def test_band_is_the_root_sum_square_of_fitted_terms(h200):
    c, p = h200
    m = load_model("llama3-8b")
    pred = predict_one(m, c, p, tp=2, pp=1, dp=16)
    bd = {k: float(v[0]) for k, v in pred.breakdown.items()}
    lay = dict(tp=2, pp=1, dp=16, cp=1, ep=1, sp=True, zero=1)
    b = step_time_band(bd, lay, c.gpus_per_node, p, "bf16")
    s_gemm = MAD_TO_SIGMA * p.raw["gemm"]["bf16"]["fit"]["median_rel_err"]
    assert b.sigma["compute_s"] == pytest.approx(s_gemm)
    expect = sum((bd[k] * s) ** 2 for k, s in b.sigma.items()) ** 0.5
    assert b.band_s == pytest.approx(expect) and 0 < b.rel < 0.2
    assert "optimizer_s" in b.sigma                  # HBM fit carries its copy/triad spread
    # H200's inter-node entries are derived from the H100 (AWS p5) fit: they borrow its sigma
    h100 = load_profile("h100-sxm-80gb").raw["comm"]["inter_node"]["reduce_scatter"]
    p5 = load_profile("h100-sxm-80gb").raw["comm"]["inter_node"]["all_reduce"]["fit"]
    assert "fit" not in h100 and b.sigma["dp_comm_s"] == pytest.approx(MAD_TO_SIGMA * p5["median_rel_err_ge_1MiB"])


def test_overlap_slowdown_adds_the_hidden_communication_times_the_factor(h200):
    c, p = h200
    # a profile without a measured factor takes the published mean (arXiv:2507.03114: 18.9%)
    assert p.overlap_slowdown == 1.189
    p = dataclasses.replace(p, overlap_slowdown=1.0)
    m = load_model("llama3-8b")
    base = predict_one(m, c, p, tp=8, pp=1, dp=1, sp=True)
    slow = predict_one(m, c, dataclasses.replace(p, overlap_slowdown=1.10), tp=8, pp=1, dp=1, sp=True)
    d = float(slow.step_time_s[0] - base.step_time_s[0])
    assert d > 0
    assert float(slow.breakdown["compute_s"][0] - base.breakdown["compute_s"][0]) == pytest.approx(d)
    # exactly 10 % of the communication that overlap hides: exposed comm without overlap minus with it
    none = predict_one(m, c, p, tp=8, pp=1, dp=1, sp=True, overlap=False)
    comm = ("tp_comm_s", "cp_comm_s", "dp_comm_s")
    hidden = sum(float(none.breakdown[k][0]) - float(base.breakdown[k][0]) for k in comm)
    assert hidden > 0 and d == pytest.approx(0.10 * hidden, rel=1e-6)


def test_cpu_suite_runs_and_its_output_is_refused_as_a_gpu_calibration(tmp_path):
    """The suite on CPU in two gloo processes writes its JSONL (a plumbing check); fitting it as any GPU's
    is refused, naming the file and the provenance's device and backend: host timings would price an
    H100 20x slow."""
    raw = tmp_path / "raw.jsonl"
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "costmodel.calibration.run",
                        "--quick", "--out", str(raw)], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = tmp_path / "cpu.yaml"
    for extra in ([], ["--gpu", "h200-sxm-141gb"]):
        rc, so, se = cli("calibrate", "fit", str(raw), *extra, "-o", str(out))
        assert rc == 2 and not out.exists() and len(se.strip().splitlines()) == 1, se
        assert f"{raw}:1: provenance device 'cpu', backend 'gloo', gpu_name null: the suite ran without a GPU" in se


def test_gamma_from_a_power_limit_sweep_and_overlap_factor():
    """Power-limit phases built from P - idle = k f^2.6; overlap records with a 12 % GEMM slowdown."""
    from costmodel.fit import fit_overlap_section
    gpu = load_gpu("h100-sxm-80gb")
    recs, t = [], 0.0
    idle, k, gamma = 100.0, 560.0, 2.6
    # unthrottled phases: idle_w, flop_w, and the wait benchmark's two phases: spin_w
    for name, uf, spin in (("idle", 0.0, 0.0), ("gemm", 0.5, 0.0), ("gemm", 0.8, 0.0), ("host_wait", 0.0, 0.0),
                           ("nccl_wait", 0.0, 1.0)):
        p = idle + 700.0 * uf + 30.0 * spin
        recs.append(make_record("phase", "n0", 0, name=name, slot=0, t_start_unix=t, t_end_unix=t + 2, dtype="bf16",
                                flops_per_s=uf * gpu.peak_flops["bf16"], hbm_bytes_per_s=0.0, link_bytes_per_s=0.0,
                                power_limit_w=700.0, spin=spin))
        recs += [make_record("sample", "n0", 0, slot=0, t_unix=t + 0.05 * i, power_w=p, temp_c=50.0, mem_temp_c=None,
                             sm_clock_mhz=1980, clock_event_reasons=0, util_gpu_pct=100, util_mem_pct=0,
                             power_limit_w=700.0) for i in range(40)]
        t += 2
    for f in (0.6, 0.7, 0.8, 0.9):                                       # capped: clock f x 1980 MHz
        p = idle + k * f ** gamma
        recs.append(make_record("phase", "n0", 0, name="power_limit", slot=0, t_start_unix=t, t_end_unix=t + 2,
                                dtype="bf16", flops_per_s=0.9 * f * gpu.peak_flops["bf16"], hbm_bytes_per_s=0.0,
                                link_bytes_per_s=0.0, power_limit_w=p))
        recs += [make_record("sample", "n0", 0, slot=0, t_unix=t + 0.05 * i, power_w=p, temp_c=60.0, mem_temp_c=None,
                             sm_clock_mhz=1980 * f, clock_event_reasons=0x4, util_gpu_pct=100, util_mem_pct=0,
                             power_limit_w=p) for i in range(40)]
        t += 2
    for g, c in ((1.10, 1.02), (1.12, 1.03), (1.15, 1.05)):
        recs.append(make_record("overlap", "n0", 0, dtype="bf16", m=8192, n=8192, k=8192, collective="all_reduce",
                                size_bytes=2 ** 28, group_size=8, gemm_alone_s=1e-3, gemm_overlapped_s=g * 1e-3,
                                comm_alone_s=1e-3, comm_overlapped_s=c * 1e-3))
    meas = Measurements(suites=[_suite(recs)])
    rep = FitReport()
    pw = fit_power_section(meas, gpu, {"power": {"gamma": 2.4, "hbm_w": 200.0, "link_w": 100.0}}, rep)
    assert pw["idle_w"] == pytest.approx(idle, rel=1e-3) and pw["flop_w"] == pytest.approx(700.0, rel=1e-3)
    assert pw["gamma"] == pytest.approx(gamma, rel=1e-3) and pw["fit"]["gamma"]["n_points"] == 4
    assert set(pw["fit"]["held_at_base"]) == {"hbm_w", "link_w"} and pw["hbm_w"] == 200.0
    assert pw["spin_w"] == pytest.approx(30.0, rel=1e-3) and pw["basis"]["spin_w"] == "fitted"
    assert pw["basis"]["hbm_w"] == "borrowed"                # held at a base that does not say
    ov = fit_overlap_section(meas, rep)
    assert ov["compute_slowdown"] == pytest.approx(1.12) and ov["fit"]["comm_slowdown"] == pytest.approx(1.03)
    # a median below 1 is timing noise (overlap cannot speed compute up): 1 is written, the median kept
    noisy = [make_record("overlap", "n0", 0, dtype="bf16", m=8192, n=8192, k=8192, collective="all_reduce",
                         size_bytes=2 ** 28, group_size=8, gemm_alone_s=1e-3, gemm_overlapped_s=g * 1e-3,
                         comm_alone_s=1e-3, comm_overlapped_s=1e-3) for g in (0.97, 0.98, 1.01)]
    ov = fit_overlap_section(Measurements(suites=[_suite(noisy)]), FitReport())
    assert ov["compute_slowdown"] == 1.0 and ov["fit"]["measured_median"] == pytest.approx(0.98)


def test_efficiency_at_its_bound_is_reported():
    from costmodel.fit.primitives import warn_at_bound as _at_bound
    from costmodel.collective import CollectiveParams
    rep = FitReport()
    _at_bound("comm.inter_node.all_gather", CollectiveParams.from_protocols([(2e-5, 0.1), (8e-5, 1.0)]), 1.0, rep)
    _at_bound("comm.inter_node.all_reduce", CollectiveParams.from_protocols([(2e-5, 0.1), (8e-5, 0.62)]), 1.0, rep)
    assert len(rep.warnings) == 1 and "all_gather" in rep.warnings[0] and "sits at its bound" in rep.warnings[0]


def test_fit_never_overwrites_an_input_or_writes_into_a_directory(tmp_path):
    """The lost-file case: -o naming an input capture is refused and the capture stays intact; a
    directory or an unwritable path as -o, or --nodes 0, is one line and exit 2."""
    src = REPO / "tests" / "data" / "readers" / "nccl_tests_oci_a100_16ranks_2nodes.txt"
    cap = tmp_path / "cap.txt"
    cap.write_bytes(src.read_bytes())
    args = ["calibrate", "fit", str(cap), "--collective", "all_reduce", "--cluster", "dgx-a100-40gb"]
    rc, so, se = cli(*args, "-o", str(cap))
    assert rc == 2 and "is also an input" in se and cap.read_bytes() == src.read_bytes()
    (tmp_path / "d").mkdir()
    rc, so, se = cli(*args, "-o", str(tmp_path / "d"))
    assert rc == 2 and "is a directory" in se and len(se.strip().splitlines()) == 1
    rc, so, se = cli(*args, "--nodes", "0", "-o", str(tmp_path / "p.yaml"))
    assert rc == 2 and "--nodes: must be >= 1" in se
    rc, so, se = cli(*args, "-o", str(tmp_path / "p.yaml"))
    assert rc == 0 and (tmp_path / "p.yaml").is_file()
    assert not list(tmp_path.glob(".p.yaml.*.tmp"))          # the temporary file was renamed away


def test_a_sweep_of_large_messages_only_is_fitted_with_a_warning(tmp_path):
    """The p5 capture cut to its 4 sizes from 1 GiB (a user who ran nccl-tests -b 1G): fitted, and the
    report says the latencies and the LL/LL128 lines were not measured."""
    lines = P5.read_text().splitlines()
    keep = [ln for ln in lines if ln.lstrip("0: ").startswith("#")][:6] + [
        ln for ln in lines if ln.startswith("0:") and ln.split()[1:2]
        and ln.split()[1] in ("1073741824", "2147483648", "4294967296", "8589934592")]
    f = tmp_path / "large_only.txt"
    f.write_text("\n".join(keep) + "\n")
    rc, so, se = cli("calibrate", "fit", str(f), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(tmp_path / "p.yaml"))
    assert rc == 0, se
    assert "comm.inter_node.all_reduce: the smallest of the 4 sizes is 1024 MiB" in " ".join((so + se).split())


def test_a_capture_with_fewer_gpus_per_node_uses_only_their_nics():
    """Rail-optimised nodes give each GPU its nearest NICs: 1 GPU per DGX H100 drives 1 of the 8 NICs
    (50 GB/s), not the node's 400 GB/s; on the paper cluster's single 100 Gb/s NIC, 8 GPUs share it."""
    from costmodel.fit.comm import nic_bytes_per_gpu
    h = load_cluster("dgx-h100")
    assert nic_bytes_per_gpu(h, 1) == nic_bytes_per_gpu(h, 8) == 50e9
    p = load_cluster("paper-h200")
    assert nic_bytes_per_gpu(p, 1) == 12.5e9 and nic_bytes_per_gpu(p, 8) == 12.5e9 / 8


def test_implausible_protocol_fits_are_flagged():
    """A latency under 0.5 us (below any NCCL hop) is reported, and a busbw efficiency under 5 % of the
    link given refused: the capture's topology or the cluster named is likely wrong."""
    from costmodel.fit.measurements import FitReport
    from costmodel.fit.primitives import warn_at_bound
    from costmodel.specs.params import CollectiveParams
    from costmodel.errors import FitError
    rep = FitReport()
    warn_at_bound("comm.inter_node.all_reduce", CollectiveParams(2e-7, ((0.0, 0.2), (1e-5, 0.8))), 1.0, rep)
    assert len(rep.warnings) == 1 and "0.20 us" in rep.warnings[0]
    # under 5 % of the link (or at the fit's least efficiency): the capture is not of these links, no profile
    with pytest.raises(FitError, match="busbw efficiency 0.0200 is under 5 % of the link"):
        warn_at_bound("comm.inter_node.all_reduce", CollectiveParams(5e-6, ((0.0, 0.004), (1e-5, 0.02))), 1.0,
                      FitReport())
    ok = FitReport()
    warn_at_bound("comm.inter_node.all_reduce", CollectiveParams(5e-6, ((0.0, 0.3), (2e-5, 0.8))), 1.0, ok)
    assert ok.warnings == []
    # every protocol's latency is checked: an OCI A100 capture's Simple line at 2011 us had passed, its LL
    # line being in range
    slow = FitReport()
    warn_at_bound("comm.inter_node.all_reduce", CollectiveParams(5e-6, ((0.0, 0.3), (2.006e-3, 0.8))), 1.0, slow)
    assert len(slow.warnings) == 1 and "Simple 2011.00 us outside 0.5-500 us" in slow.warnings[0]
    # at its bound with one message size: too few points to tell latency from bandwidth, not a fast link
    one = FitReport()
    warn_at_bound("comm.intra_node.all_reduce", CollectiveParams(5e-6, ((0.0, 0.3), (2e-5, 1.0))), 1.0, one,
                  sizes=[2 ** 30, 2 ** 30])
    assert "1 message size(s) cannot tell the latency from the bandwidth" in one.warnings[0]
    assert "faster than the link" not in one.warnings[0]


@pytest.mark.parametrize("sustained_tflops,power_limited", [(600.0, False), (1000.0, True)])
def test_a_sustained_gemm_below_the_table_marks_the_table_a_burst(tmp_path, sustained_tflops, power_limited):
    """XLA's H100 table (10-kernel bursts) as suite GEMM records, plus the suite's sustained 8192^3 GEMM:
    at 600 TFLOP/s, under the ~780 the fitted table gives that shape, the table ran above the
    sustained clock (power_limited: false); at a rate the table does not exceed, it is power-limited."""
    _, recs = _xla_h100_gemm_records()
    recs.append(make_record("phase", "node0", 0, name="sustained_gemm", slot=0, t_start_unix=10.0, t_end_unix=70.0,
                            flops_per_s=sustained_tflops * 1e12, hbm_bytes_per_s=None, link_bytes_per_s=None,
                            power_limit_w=700.0, dtype="bf16", m=8192, n=8192, k=8192, calls=50000))
    raw = write_jsonl(tmp_path / "raw.jsonl", recs)
    out = tmp_path / "h100.yaml"
    rc, so, se = cli("calibrate", "fit", str(raw), "-o", str(out))
    assert rc == 0, se
    g = yaml.safe_load(out.read_text())["gemm"]["bf16"]
    assert g["power_limited"] is power_limited
    r = g["power_check"]["sustained_over_table"]
    assert (r < 0.97) is not power_limited and 0.7 < r < 1.35


def test_the_base_profile_must_be_of_the_measured_gpu_and_may_be_named(tmp_path):
    """--base with another GPU's profile would keep that GPU's GEMM, power and thermal sections for this
    one: refused naming the base file; a built-in profile may be named instead of given by path."""
    out = tmp_path / "p5.yaml"
    args = ["calibrate", "fit", str(P5), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8", "-o", str(out)]
    rc, so, se = cli(*args, "--base", "a100-sxm-80gb")
    assert rc == 2 and "a100-sxm-80gb.yaml: gpu: the base profile was fitted for a100-sxm-80gb" in se
    assert not out.exists()
    rc, so, se = cli(*args[:3], str(P5), *args[3:])          # the same capture twice would count twice
    assert rc == 2 and "given twice" in se and not out.exists()
    copy = tmp_path / "copy_of_p5.txt"                       # and so would a copy under another name
    copy.write_bytes(P5.read_bytes())
    rc, so, se = cli(*args[:3], str(copy), *args[3:])
    assert rc == 2 and "given twice" in se and "the same bytes" in se and not out.exists()
    bad = tmp_path / "neg.yaml"           # a bad value in the base is named there, not blamed on the fit
    bad.write_text((REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml").read_text().replace(
        "eta_max: 0.803", "eta_max: -0.803", 1))
    rc, so, se = cli(*args, "--base", str(bad))
    assert rc == 2 and "the base profile is not usable" in se and "neg.yaml: gemm.bf16.eta_max" in se
    rc, so, se = cli(*args, "--base", "h100-sxm-80gb")
    assert rc == 0, se
    assert yaml.safe_load(out.read_text())["provenance"]["base_profile"].endswith("profiles/h100-sxm-80gb.yaml")


def test_a_fit_that_misses_its_own_data_is_not_written(tmp_path):
    """The p5 capture with its times divided by 1000 and its bandwidths multiplied by 1000, each row
    consistent with itself: 1000x faster than even its in-node part may run; the fit names the capture
    and its time unit, and writes nothing.  With the times alone divided (ms under the us header) the
    rows disagree with their own algbw, and that is named first."""
    import re

    def scaled(bw: float):
        rows = []
        for line in P5.read_text().splitlines():
            c = line.split()
            if len(c) >= 13 and re.fullmatch(r"\d+", c[1]):                 # '0:' rank prefix, then the size
                for i in (6, 10):
                    c[i] = f"{float(c[i]) / 1e3:.5f}"
                for i in (7, 8, 11, 12):
                    c[i] = f"{float(c[i]) * bw:.2f}"
                line = " ".join(c)
            rows.append(line)
        return "\n".join(rows) + "\n"
    out = tmp_path / "ms.yaml"
    # faster than the in-node part alone may run (refused before the NIC-bound fit is tried)
    for bw, why in ((1e3, "its times are in another unit than the header's (us) (milliseconds?)"),
                    (1.0, "have a time that disagrees with their own algbw column")):
        ms = tmp_path / "ms.txt"
        ms.write_text(scaled(bw))
        rc, so, se = cli("calibrate", "fit", str(ms), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                         "-o", str(out))
        assert rc == 2 and why in se and se.startswith(f"costmodel: error: {ms}: "), se
        assert not out.exists()


def test_an_input_the_fit_cannot_use_says_why():
    """A Zeus power-limit summary has no per-sample trace: the error carries the reader's reason."""
    zeus = PUBLIC / "zeus_nsdi23_power_vs_powerlimit_v100.csv"
    rc, so, se = cli("calibrate", "fit", str(zeus), "--gpu", "v100-sxm2-32gb", "-o", "/tmp/never_written.yaml")
    assert rc == 2 and "no usable measurement" in se and "no per-sample trace" in se


def test_a_sweep_of_small_messages_only_says_its_bandwidth_is_not_measured(tmp_path):
    """The p5 capture cut after 8 KiB: latency-bound throughout, the fit warns that the bandwidth the
    gradient and activation messages move at was not measured."""
    import re
    keep = []
    for line in P5.read_text().splitlines():
        c = line.split()
        if len(c) >= 13 and re.fullmatch(r"\d+", c[1]) and int(c[1]) > 8192:
            continue
        keep.append(line)
    small = tmp_path / "small.txt"
    small.write_text("\n".join(keep) + "\n")
    rc, so, se = cli("calibrate", "fit", str(small), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(tmp_path / "s.yaml"))
    assert "latency-bound throughout" in so + se and "8 KiB" in so + se
    # cut after 1 MiB instead: the latencies are measured, but the bandwidth rests on rows the latency
    # still weighs on
    keep = [ln for ln in P5.read_text().splitlines()
            if not (len(ln.split()) >= 13 and re.fullmatch(r"\d+", ln.split()[1]) and int(ln.split()[1]) > 2 ** 20)]
    small.write_text("\n".join(keep) + "\n")
    rc, so, se = cli("calibrate", "fit", str(small), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(tmp_path / "s.yaml"), "--force")
    assert "the largest of the" in so + se and "is 1 MiB, under 64 MiB" in so + se and "rerun nccl-tests to -e 8G" in so + se


def test_a_capture_shorter_than_three_time_constants_gives_no_thermal_resistance(tmp_path):
    """One minute of an H100 going from idle to a 650 W load, its temperature still rising (tau 127 s in
    the base profile): the temperature-on-power slope is not a thermal resistance; the fit says so and
    keeps the base profile's."""
    import datetime as _dt
    rows = ["timestamp, index, power.draw [W], temperature.gpu, utilization.gpu [%]"]
    t0 = _dt.datetime(2026, 1, 1, 12, 0, 0)
    for i in range(600):                                   # 60 s at 100 ms
        t = i / 10
        busy = t >= 10
        p = 650.0 if busy else 120.0
        temp = 35.0 + (25.0 * (1 - np.exp(-(t - 10) / 127.0)) if busy else 0.0)
        stamp = (t0 + _dt.timedelta(seconds=t)).strftime("%Y/%m/%d %H:%M:%S.%f")[:-3]
        rows.append(f"{stamp}, 0, {p:.2f} W, {temp:.0f}, {100 if busy else 0} %")
    short = tmp_path / "minute.csv"
    short.write_text("\n".join(rows) + "\n")
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(short), "--gpu", "h100-sxm-80gb", "-o", str(out))
    assert rc == 0, se
    assert "not at steady temperature" in so + se
    assert yaml.safe_load(out.read_text())["thermal"]["r_th_c_per_w"] == load_profile("h100-sxm-80gb").raw["thermal"]["r_th_c_per_w"]


def test_each_measured_group_size_gets_its_own_fit():
    """The suite times 2-, 4- and 8-GPU groups on one node; XLA's sm_90 all-gather rows of 4 concurrent
    2-GPU groups and one 8-GPU group stand in for them: the 2-GPU rows get their own ``by_group_size``
    fit, which prices a 2-GPU 64 MiB all-gather within 5 % of the measured 161 us, where the 8-GPU fit
    moved by its hop law alone misses the 2-GPU rows by more than 5 % (median)."""
    from costmodel.collective import collective_time_s
    from costmodel.fit.comm import fit_comm_section
    from costmodel.readers import read_xla_collective_table
    from costmodel.specs.params import CollectiveParams
    rows = [r for r in read_xla_collective_table(PUBLIC / "xla_collective_perf_table_sm90_sm100_8gpu.csv", "sm_90")
            if r["collective"] == "all_gather" and r["group_size"] * r["num_groups"] == 8]
    recs = [dict(kind="collective", collective="all_gather", scope="intra_node", group_size=r["group_size"],
                 ranks_per_node=8, n_nodes=1, size_bytes=r["size_bytes"], time_s=r["time_s"])
            for r in rows if r["group_size"] in (2, 8)]
    gpu = load_gpu("h100-sxm-80gb")
    report = FitReport()
    out = fit_comm_section(Measurements(suites=[_suite(recs)], nccl=[]), gpu, {}, None, report)
    e = out["intra_node"]["all_gather"]
    assert e["group_size"] == 8 and list(e["by_group_size"]) == [2]

    def t(entry, g):
        p = CollectiveParams.from_protocols([(q["alpha_s"], q["busbw_efficiency"]) for q in entry["protocols"]])
        return float(collective_time_s("all_gather", 2 ** 26, g, gpu.nvlink_bytes_per_s, p))
    assert t(e["by_group_size"][2], 2) == pytest.approx(161.056e-6, rel=0.05)
    assert e["fit"]["group_2_median_rel_err"] > 0.05
    assert any("groups of 2" in r[0] for r in report.rows)


def _xla_allgather_suite(groups, min_bytes=0):
    from costmodel.readers import read_xla_collective_table
    rows = [r for r in read_xla_collective_table(PUBLIC / "xla_collective_perf_table_sm90_sm100_8gpu.csv", "sm_90")
            if r["collective"] == "all_gather" and r["group_size"] * r["num_groups"] == 8]
    return Measurements(suites=[_suite([dict(kind="collective", collective="all_gather", scope="intra_node",
                                             group_size=r["group_size"], ranks_per_node=8, n_nodes=1,
                                             size_bytes=r["size_bytes"], time_s=r["time_s"])
                                        for r in rows if r["group_size"] in groups and r["size_bytes"] >= min_bytes])],
                        nccl=[])


def test_a_smaller_group_swept_at_large_sizes_only_keeps_the_base_latencies_and_says_so():
    """4-GPU all-gathers from 64 MiB up only: one line fitted, the faster protocols held at the base
    profile's 4-GPU fit (its 17 us LL latency, not a free fit's near-zero one), with the same warning
    the node-wide entry gets."""
    from costmodel.fit.comm import fit_comm_section
    base = yaml.safe_load((REPO / "hardware/profiles/h100-sxm-80gb.yaml").read_text())
    meas = _xla_allgather_suite((8,))
    meas.suites[0].records["collective"] += [r for r in _xla_allgather_suite((4,), 2 ** 26).suites[0]["collective"]]
    report = FitReport()
    out = fit_comm_section(meas, load_gpu("h100-sxm-80gb"), base, None, report, "BASE")
    e4 = out["intra_node"]["all_gather"]["by_group_size"][4]
    ll = next(q for q in e4["protocols"] if q["name"] == "LL")
    base_ll = next(q for q in base["comm"]["intra_node"]["all_gather"]["by_group_size"]["4"]["protocols"]
                   if q["name"] == "LL")
    assert ll["alpha_s"] == pytest.approx(base_ll["alpha_s"], rel=1e-3)
    assert any("all_gather (groups of 4): all" in w and ">= 1 MiB" in w for w in report.warnings)
    assert out["intra_node"]["all_gather"]["by_group_size"][2]["kept_from"] == "BASE"


def test_a_node_wide_sweep_alone_keeps_the_base_fits_of_smaller_groups():
    from costmodel.fit.comm import fit_comm_section
    base = yaml.safe_load((REPO / "hardware/profiles/h100-sxm-80gb.yaml").read_text())
    report = FitReport()
    out = fit_comm_section(_xla_allgather_suite((8,)), load_gpu("h100-sxm-80gb"), base, None, report, "BASE")
    by = out["intra_node"]["all_gather"]["by_group_size"]
    assert sorted(by) == [2, 4] and all(e["kept_from"] == "BASE" for e in by.values())
    assert any("groups of 2, 4 not measured" in w for w in report.warnings)


def test_fit_never_writes_over_its_base_or_a_built_in_profile(tmp_path):
    """-o may not be the base profile the fit keeps sections from (the default base is the catalog's),
    nor any built-in profile; --gpu may not contradict the --cluster's GPUs.  Nothing is written."""
    cap = str(REPO / "hardware" / "profiles" / "data" / "aws_p5_2node_16xH100_allreduce.txt")
    builtin = REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml"
    before = builtin.read_bytes()
    rc, so, se = cli("calibrate", "fit", cap, "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(builtin))
    assert rc == 2 and "-o:" in se and "is the base profile this fit keeps sections from" in se, se
    other = REPO / "hardware" / "profiles" / "a100-sxm-80gb.yaml"
    rc, so, se = cli("calibrate", "fit", cap, "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(other))
    assert rc == 2 and "is a built-in profile of the catalog" in se, se
    # a checkout's copy of the catalog, when the costmodel that runs is an installed one
    clone = tmp_path / "clone" / "hardware" / "profiles"
    clone.mkdir(parents=True)
    (clone / "a100-sxm-80gb.yaml").write_bytes(other.read_bytes())
    rc, so, se = cli("calibrate", "fit", cap, "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(clone / "a100-sxm-80gb.yaml"))
    assert rc == 2 and "is a built-in profile of the catalog" in se, se
    assert (clone / "a100-sxm-80gb.yaml").read_bytes() == other.read_bytes()
    base = tmp_path / "mine.yaml"
    base.write_bytes(before)
    rc, so, se = cli("calibrate", "fit", cap, "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8", "--base", str(base), "-o", str(base))
    assert rc == 2 and "-o:" in se and "mine.yaml" in se, se
    rc, so, se = cli("calibrate", "fit", cap, "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8", "--gpu", "a100-sxm-80gb", "-o",
                     str(tmp_path / "x.yaml"))
    assert rc == 2 and "--gpu: a100-sxm-80gb contradicts --cluster aws-p5" in se, se
    # a fit of the user's own beside the catalog's (the README's hardware/profiles/mycluster.yaml) is
    # theirs to refit
    mine = clone / "mycluster.yaml"
    for again in ([], ["--force"]):      # a refit replaces it when told to (costmodel.files.check_no_clobber)
        rc, so, se = cli("calibrate", "fit", cap, "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                         "-o", str(mine), *again)
        assert rc == 0 and mine.exists(), se
    assert builtin.read_bytes() == before and base.read_bytes() == before and not (tmp_path / "x.yaml").exists()


def test_a_smaller_group_than_the_base_fit_goes_under_its_group_size(tmp_path):
    """A 2-GPU all-reduce capture on an H100 does not replace the profile's 8-GPU NVLS fit (NCCL runs no
    NVLS at 2 GPUs): the node-wide fit stays, kept from the base, and the capture prices 2-GPU groups."""
    cap = PUBLIC / "github_issue_excerpts_partial_tables.txt"
    out = tmp_path / "two.yaml"
    rc, so, se = cli("calibrate", "fit", str(cap), "--gpu", "h100-sxm-80gb", "--nodes", "1", "--gpus-per-node", "2",
                     "-o", str(out))
    assert rc == 0, se
    e = yaml.safe_load(out.read_text())["comm"]["intra_node"]["all_reduce"]
    base = yaml.safe_load((REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml").read_text())
    base = base["comm"]["intra_node"]["all_reduce"]
    assert (e["group_size"], e["algorithm"], e["protocols"]) == (base["group_size"], base["algorithm"], base["protocols"])
    assert e["kept_from"].endswith("h100-sxm-80gb.yaml")
    two = e["by_group_size"]["2"]
    assert two["algorithm"] == "ring" and two["fit"]["inputs"] == [str(cap)] and two["protocols"] != \
        base["by_group_size"]["2"]["protocols"]
    assert "groups of at most 2 measured, the base profile's fit of 8 is kept" in " ".join((so + se).split())


def test_a_fit_normalises_by_the_link_the_prediction_prices_and_nvls_only_on_an_nvswitch(tmp_path):
    """Two H100 NVL cards on an NVLink bridge, calibrated as the h100-nvl-8x cluster (whose file gives
    PCIe Gen5, 64 GB/s, between its GPUs): the fit is normalised by that 64 GB/s, as the prediction
    is, so the 115 GB/s measured shows as the fit's error and a warning instead of a 0 % fit that
    predicts 4.7x slower; an 8-GPU MI300X all-reduce (xGMI, no NVSwitch: NCCL/RCCL run no NVLS) may
    not fit a busbw efficiency above 1 (it had reached NVLS's 1.2: 532 GB/s on a 448 GB/s link)."""
    out = tmp_path / "pcie.yaml"
    rc, so, se = cli("calibrate", "fit", str(REPO / "tests/data/readers/nccl_tests_h100_pcie_nvlink_bridge_2gpu_2sizes.txt"),
                     "--nodes", "1", "--gpus-per-node", "2", "--cluster", "h100-nvl-8x", "-o", str(out))
    assert rc == 0, se
    fit = yaml.safe_load(out.read_text())["comm"]["intra_node"]["all_reduce"]["fit"]
    assert fit["link_bytes_per_s"] == 64e9 and fit["median_rel_err"] > 0.5
    assert "comm.intra_node.all_reduce: busbw efficiency 1.000 sits at its bound 1.0" in so + se
    mi = tmp_path / "mi.yaml"
    rc, so, se = cli("calibrate", "fit", str(REPO / "tests/data/readers/rccl_tests_mi300x_8gpu_allreduce_excerpt.txt"),
                     "-o", str(mi))
    assert rc == 0, se
    protos = yaml.safe_load(mi.read_text())["comm"]["intra_node"]["all_reduce"]["protocols"]
    assert max(p["busbw_efficiency"] for p in protos) <= 1.0


def test_a_power_fit_without_gemms_keeps_the_limit_the_base_kernels_were_measured_under(tmp_path):
    """Fitting power from a training trace refits power, not the GEMM tables: those stay the base's,
    measured under the base's kernel_limit_w (700 W for the H100 SXM), which the written profile keeps
    (it had dropped it, and the Grand Teton 500 W H100 then lost its power-limited clock)."""
    out = tmp_path / "p5pow.yaml"
    rc, so, se = cli("calibrate", "fit", str(REPO / "hardware/profiles/data/aws_p5_2node_16xH100_allreduce.txt"),
                     str(REPO / "hardware/profiles/data/h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv"),
                     "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8", "-o", str(out))
    assert rc == 0, se
    base = yaml.safe_load((REPO / "hardware/profiles/h100-sxm-80gb.yaml").read_text())["power"]["kernel_limit_w"]
    assert yaml.safe_load(out.read_text())["power"]["kernel_limit_w"] == base == 700.0


def test_many_bad_rows_of_one_kind_are_three_warnings_and_a_count(tmp_path):
    """A trace with 'nan W' in every tenth row: three of its lines are shown and the rest counted, in the
    report and in the written profile (199 lines had been copied one by one)."""
    src = (REPO / "hardware/profiles/data/h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv").read_text().splitlines()
    head = [ln for ln in src if ln.startswith("#")]
    body = [ln for ln in src if not ln.startswith("#")][:2000]
    body = [body[0]] + [ln.replace(ln.split(", ")[1], "nan W") if i % 10 == 9 else ln for i, ln in enumerate(body[1:])]
    trace = tmp_path / "trace.csv"
    trace.write_text("\n".join(head + body) + "\n")
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(REPO / "hardware/profiles/data/aws_p5_2node_16xH100_allreduce.txt"),
                     str(trace), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8", "-o", str(out))
    assert rc == 0, se
    text = so + se
    assert text.count("not a number in [W] for power.draw: 'nan W'") == 3
    assert f"{trace}: ... and 196 more line(s) like these" in text


def test_a_single_unusable_file_is_named_once(tmp_path):
    """A Zeus power-limit summary alone: the refusal names the file once, then the reader's reason."""
    import shutil
    f = tmp_path / "zeus.csv"
    shutil.copy(REPO / "hardware" / "profiles" / "data" / "zeus_nsdi23_power_vs_powerlimit_a40.csv", f)
    rc, so, se = cli("calibrate", "fit", f, "--gpu", "a100-sxm-80gb", "-o", tmp_path / "p.yaml")
    assert rc == 2 and se.count(str(f)) == 1 and "Zeus power-limit summaries carry no per-sample trace" in se, se


MS_CAPTURE = """# nThread 1 nGpus 8 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20
#
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1   0.0201    0.00    0.00      0   0.0201    0.00    0.00      0
     1048576        262144     float     sum      -1   0.0400   26.21   45.88      0   0.0400   26.21   45.88      0
    16777216       4194304     float     sum      -1   0.1200  139.81  244.67      0   0.1200  139.81  244.67      0
   134217728      33554432     float     sum      -1   0.7000  191.74  335.54      0   0.7000  191.74  335.54      0
  1073741824     268435456     float     sum      -1   5.0000  214.75  375.81      0   5.0000  214.75  375.81      0
"""


def test_a_capture_timed_in_ms_under_the_us_header_is_named_first(tmp_path):
    """An 8-GPU all-reduce whose times were written in ms under nccl-tests' (us) header: every row but the
    tiny one disagrees with its own algbw by 1000x.  The first message names that (not a missing
    collective or topology), for calibrate fit and collectives --compare alike; nothing is written."""
    f = tmp_path / "ar_ms.log"
    f.write_text(MS_CAPTURE)
    out = tmp_path / "p.yaml"
    rc, so, se = cli("calibrate", "fit", str(f), "--gpu", "h100-sxm-80gb", "-o", str(out))
    assert rc == 2 and "8 of 10 rows have a time that disagrees with their own algbw column" in se, se
    assert "1e+03x the printed bandwidth (milliseconds under the us header?)" in se and not out.exists()
    rc, so, se = cli("collectives", "--cluster", "dgx-h100", "--compare", str(f))
    assert rc == 2 and "milliseconds under the us header" in se, se


def test_a_short_sweep_of_large_sizes_hears_every_warning_that_applies():
    """8-32 MiB in three rows: bandwidth-bound throughout (no latency), under 64 MiB (Simple's line
    rests on rows its latency weighs on) and under three decades: three warnings, not the first alone;
    a full 8 B - 8 GiB sweep hears none."""
    from costmodel.fit.comm import warn_sweep_span
    rep = FitReport()
    warn_sweep_span("comm.inter_node.all_reduce", [8 * MiB, 16 * MiB, 32 * MiB], rep)
    assert len(rep.warnings) == 3
    assert "smallest" in rep.warnings[0] and "under 64 MiB" in rep.warnings[1] and "under 3 decades" in rep.warnings[2]
    full = FitReport()
    warn_sweep_span("comm.inter_node.all_reduce", [8 * 2.0 ** i for i in range(31)], full)
    assert full.warnings == []


def test_show_given_a_measurement_and_fit_given_a_table_say_what_goes_where(tmp_path):
    """An nccl-tests log given to calibrate show had been refused as 'expected a mapping of keys'; a GEMM
    table of one's own given to calibrate fit as 'unrecognised content' without saying where GEMM fits
    come from."""
    log = PUBLIC / "aws_p5_2node_16xH100_allreduce.txt"
    rc, so, se = cli("calibrate", "show", str(log))
    assert rc == 2 and f"{log}: is a measurement file (nccl-tests), not a profile: fit one from it" in se, se
    # and where --profile takes a profile (it had said 'expected a mapping of keys to values')
    rc, so, se = cli("predict", "--model", "llama3-8b", "--cluster", "aws-p5", "--tp", "1", "--pp", "1",
                     "--profile", str(log))
    assert rc == 2 and f"{log}: is a measurement file (nccl-tests), not a profile" in se, se
    table = tmp_path / "gemm.md"
    table.write_text("| m | n | k | TFLOP/s |\n|---|---|---|---|\n| 8192 | 8192 | 8192 | 750 |\n")
    rc, so, se = cli("calibrate", "fit", str(table), "--gpu", "h100-sxm-80gb", "-o", str(tmp_path / "p.yaml"))
    assert rc == 2 and "GEMM, HBM and MoE GEMM fits come from the calibration suite's JSONL only" in se, se


def test_a_capture_far_below_nccl_s_stated_infiniband_rate_is_questioned(tmp_path):
    """AWS p5's EFA capture (63% of its 400 Gb/s NICs) fitted for a DGX H100 on NDR InfiniBand, where NCCL
    states 94% (nccl-tests#290): the fit is written, and a warning says the capture may be of another fabric;
    on its own cluster (EFA, no stated figure) it is not questioned."""
    rc, so, se = cli("calibrate", "fit", str(P5), "--cluster", "dgx-h100", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(tmp_path / "ib.yaml"))
    text = " ".join((so + se).split())
    assert rc == 0 and "comm.inter_node.all_reduce: the capture streams 63% of the NICs' line rate" in text, text
    assert "where NCCL states 94% on infiniband" in text
    rc, so, se = cli("calibrate", "fit", str(P5), "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8",
                     "-o", str(tmp_path / "efa.yaml"))
    assert rc == 0 and "of the NICs' line rate" not in so + se


def test_a_fit_into_its_own_redirected_stdout_is_not_refused_as_an_existing_file(tmp_path):
    """`-o /dev/stdout > p.yaml`: the shell made p.yaml for this command, so --force is not asked for (the
    check had followed /dev/stdout to the file and refused it, leaving it empty)."""
    out = tmp_path / "p.yaml"
    with open(out, "w") as f:
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", "calibrate", "fit", str(P5), "--cluster", "aws-p5",
                            "--nodes", "2", "--gpus-per-node", "8", "-o", "/dev/stdout"], stdout=f,
                           stderr=subprocess.PIPE, text=True, cwd=REPO, timeout=300)
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load(out.read_text())["gpu"] == "h100-sxm-80gb"


def test_an_outlier_is_stated_as_the_fit_s_errors_are():
    """The outlier warning had shown measured over fit (+15%) beside a max error of fit over measured
    (12.8%): an outlier larger than the stated maximum.  Both are now the fit's error over the measurement."""
    from costmodel.fit.primitives import warn_outliers
    rep = FitReport()
    t_meas = [1.0] * 9 + [1.0]
    t_model = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.01, 0.99, 0.87]      # the last 13% under its measurement
    warn_outliers("comm.x", t_model, t_meas, [f"l{i}" for i in range(10)], rep)
    assert rep.warnings == ["comm.x: 1 outlier(s), fit vs measured: l9 (-13%)"]
