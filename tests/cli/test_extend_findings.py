"""A developer extending costmodel with a GPU it has never measured, as the README's 'How to extend'
tells them: a datasheet GPU file, a cluster file, and a profile borrowed from the nearest catalog GPU
with no measurement at all."""
import pytest
import yaml

from costmodel.specs import load_profile

from cli_run import one_line, run

# NVIDIA H20 (Hopper, 78 SMs) as its datasheet publishes it: 148 dense BF16 TFLOP/s, 96 GB HBM3 at
# 4.0 TB/s, 400 W, NVLink 900 GB/s both directions
H20 = """name: H20-96GB
vendor: nvidia
architecture: hopper
peak_tflops: {bf16: 148, fp16: 148, fp8: 296}
hbm_capacity: 96GB
hbm_bandwidth: 4.0TB/s
tdp: 400W
num_sms: 78
nvlink_bandwidth_per_gpu: 450GB/s
slowdown_temp: 89C
power_limit_min: 200W
boost_clock_mhz: 1755
sources: {peak_tflops: datasheet, hbm_capacity: datasheet, hbm_bandwidth: datasheet, tdp: datasheet,
          num_sms: datasheet, nvlink_bandwidth_per_gpu: "datasheet, 900 GB/s both directions",
          slowdown_temp: as H100 SXM, power_limit_min: as H100 SXM, boost_clock_mhz: datasheet}
"""
CLUSTER = """name: hgx-h20
gpu: ./h20.yaml
gpus_per_node: 8
nodes: 2
intra_node: {fabric: nvswitch, bandwidth_per_gpu: 450GB/s, latency: 0.6us}
inter_node: {fabric: infiniband, nics_per_node: 4, bandwidth_per_nic: 400Gbps, latency: 2.7us}
power: {node_power_budget: 6.5kW}
cooling: {type: air, airflow: front-to-back, inlet_temp: 25C}
sources: {gpus_per_node: HGX H20, nodes: ours, intra_node.bandwidth_per_gpu: datasheet,
          intra_node.latency: NCCL tuning.cc, inter_node.nics_per_node: ours, inter_node.bandwidth_per_nic: ConnectX-7,
          inter_node.latency: NCCL tuning.cc, power.node_power_budget: our rack, cooling.inlet_temp: our hall}
"""


def test_a_datasheet_gpu_borrows_a_whole_profile_and_predicts(tmp_path):
    (tmp_path / "h20.yaml").write_text(H20)
    (tmp_path / "c.yaml").write_text(CLUSTER)
    out = tmp_path / "h20-profile.yaml"
    r = run("calibrate", "fit", "--cluster", tmp_path / "c.yaml", "--base", "h100-sxm-80gb", "-o", out)
    assert r.returncode == 0, r.stderr
    assert "no measurement file: every section is" in " ".join((r.stdout + r.stderr).split())
    prof = yaml.safe_load(out.read_text())
    assert prof["gpu"] == "h20" and prof["provenance"]["fitted_sections"] == []
    assert prof["gemm"]["bf16"]["kept_from"].endswith("h100-sxm-80gb.yaml")
    # the GEMM power borrowed at the TDP ratio 400 / 700 W, not at the H100's own watts
    h100_flop_w = load_profile("h100-sxm-80gb").power.coeff_w["flop"]
    assert prof["power"]["flop_w"] == pytest.approx(h100_flop_w * 400 / 700)
    p = run("predict", "--model", "llama3-8b", "--cluster", tmp_path / "c.yaml", "--nodes", "1", "--tp", "1", "--pp", "1",
            "--mbs", "1", "--gbs", "64", "--recompute", "full", "--profile", out, "--json")
    assert p.returncode == 0, p.stderr


def test_fit_without_files_needs_a_base_and_a_gpu(tmp_path):
    one_line(run("calibrate", "fit", "-o", tmp_path / "x.yaml"), "FILES", "--base PROFILE alone")
    one_line(run("calibrate", "fit", "--base", "h100-sxm-80gb", "-o", tmp_path / "x.yaml"), "--cluster or --gpu")


def test_a_usage_error_of_a_nested_command_points_to_its_own_help():
    one_line(run("calibrate", "fit"), "(costmodel calibrate fit --help)")
