"""Blackwell Ultra in the catalog: B300 (HGX / dgx-b300) and GB300 (gb300-nvl72), their peaks, the
NVL72 domain with 800 Gb/s NICs, and their GEMM model against the B300's measured best GEMM."""
import dataclasses
import re
from pathlib import Path

import pytest

from costmodel.comm import group_time_s
from costmodel.gemm import gemm_time_s
from costmodel.specs import load_cluster, load_gpu, load_profile

MIB64 = 64 * 2**20
MAMF = Path(__file__).resolve().parent.parent / "hardware" / "profiles" / "data" / "mamf_max_achievable_matmul_tflops.md"


def _mamf_row(accelerator: str) -> tuple[float, tuple[int, int, int]]:
    """(MAMF TFLOP/s, best shape) of the BF16 table's row (ml-engineering, copied with its source)."""
    for line in MAMF.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == accelerator:
            m, n, k = (int(x) for x in re.fullmatch(r"(\d+)x(\d+)x(\d+)", cells[4]).groups())
            return float(cells[1]), (m, n, k)
    raise AssertionError(accelerator)


def test_blackwell_ultra_peaks_and_limits():
    """GB300: 2.5 / 5 / 15 PFLOP/s dense BF16 / FP8 / FP4 (1.08 EFLOPS FP4 per 72-GPU rack) at 1,400 W
    (nvidia-smi default and max limit, triton PR 2023); the HGX B300 keeps the B200's BF16/FP8 peaks."""
    gb, b = load_gpu("gb300-288gb"), load_gpu("b300-sxm-288gb")
    assert (gb.peak_flops["bf16"], gb.peak_flops["fp8"], gb.peak_flops["fp4"]) == (2.5e15, 5e15, 15e15)
    assert 72 * gb.peak_flops["fp4"] == pytest.approx(1.08e18)
    assert gb.tdp_w == 1400 and b.tdp_w == 1100
    assert b.peak_flops["bf16"] == load_gpu("b200-sxm-180gb").peak_flops["bf16"] == 2.25e15
    assert gb.hbm_bytes == b.hbm_bytes == 288e9


def test_gb300_rack_keeps_ep64_on_nvlink_and_its_nics_are_twice_the_gb200s():
    """An EP64 all-to-all inside one GB300 NVL72 rack does not move when the NICs are made useless;
    a tray owns 4 ConnectX-8 at 800 Gb/s, twice the GB200 rack's 400 Gb/s NICs."""
    c, p = load_cluster("gb300-nvl72"), load_profile("gb300-288gb")
    assert c.scale_up_gpus == 72 and c.gpus_per_node == 4 and c.nodes == 18
    t = float(group_time_s("all_to_all", MIB64, 1, 64, c, p))
    slow = dataclasses.replace(c, nic_bytes_per_s=1.0 / c.nics_per_node)
    assert float(group_time_s("all_to_all", MIB64, 1, 64, slow, p)) == t
    assert c.node_nic_bytes_per_s == 2 * load_cluster("gb200-nvl72").node_nic_bytes_per_s == 4 * 100e9
    assert load_cluster("dgx-b300").node_nic_bytes_per_s == 8 * 100e9


@pytest.mark.parametrize("gpu,accelerator", [("b300-sxm-288gb", "NVIDIA B300 SXM"),
                                             ("b200-sxm-180gb", "NVIDIA B200 SXM")])
def test_predicted_gemm_stays_below_the_measured_best_gemm(gpu, accelerator):
    """No GEMM beats the maximum achievable matmul: at each GPU's MAMF best shape the profile (the
    B300's carried over from the B200's fit) predicts less than the measured 1,769 (B300) and 1,745
    (B200) TFLOP/s, and within 30% of it (the carried-over fit reads K = 1024 as short)."""
    mamf, (m, n, k) = _mamf_row(accelerator)
    s, p = load_gpu(gpu), load_profile(gpu)
    t = float(gemm_time_s(m, n, k, 1, s.peak_flops["bf16"], s.hbm_bytes_per_s, p.hbm_efficiency, p.gemm["bf16"]))
    pred = 2.0 * m * n * k / t / 1e12
    assert 0.7 * mamf < pred < mamf, (pred, mamf)


def test_a_cap_below_what_the_lowest_clock_draws_is_reported_not_met():
    """A 200 W cap on a 1,400 W GB300 (derived idle above 200 W): the clock stops at the lowest SM clock
    (120 MHz, borrowed from the B200's idle capture), the cap is reported as not met, and the step
    is finite, where a clock floor of 0.1% of the peak clock used to run it at 2 MHz."""
    from costmodel.energy import layout_energy
    from costmodel.layouts import LayoutTable
    from costmodel.predict import predict_table
    from costmodel.specs import Recipe, load_model
    m, c = load_model("llama3-70b"), load_cluster("gb300-nvl72", nodes=16)
    p, r = load_profile("gb300-288gb"), Recipe(gbs=128, seq_len=8192)
    lay = LayoutTable.from_rows([dict(tp=8, pp=2, dp=4, cp=1, ep=1, vp=1, mbs=1, recompute="none", zero=1,
                                      sp=True, overlap=True)])
    pred = predict_table(m, r, c, p, lay)
    e = layout_energy(m, r, c, p, pred.terms, caps_w=[200.0, 200.0])      # one cap per pipeline stage
    assert e.cap_unmet and e.sm_clock_mhz == pytest.approx(120.0, rel=1e-6)
    assert e.step_time_s < 40 * float(pred.step_time_s[0])
