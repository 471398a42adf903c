"""The optimizer step (costmodel/optimizer_step.py): the offloaded host rate is the fit of its data."""
import numpy as np
import pytest

from costmodel.optimizer_step import (HOST_STEP_S_PER_PARAM, fit_host_step_s_per_param, offloaded_step_time_s,
                                      optimizer_step_bytes_per_param)
from costmodel.specs import Recipe, load_cluster


def test_the_host_rate_is_the_fit_of_the_zero_offload_measurement():
    """Qwen2.5-1.5B, ZeRO-2 on 2 A100 40GB (2x EPYC 7742): 240 ms without offload, 1365 ms with it
    (DeepSpeed blogs/zenflow-corebinding): 1.125 s added over 771.9 M parameters per rank, plus the
    GPU's own 21 ms step it no longer runs, minus 96 ms of PCIe (2 x 2 bytes per parameter at 32 GB/s)."""
    fit = fit_host_step_s_per_param()
    assert fit["t_offload_s"] - fit["t_zero2_s"] == pytest.approx(1.125)
    assert fit["pcie_s"] == pytest.approx(2 * 771_857_152 * 2 / 32e9)
    assert fit["host_s_per_param"] == pytest.approx(HOST_STEP_S_PER_PARAM, rel=1e-3)


def test_the_fit_predicts_the_same_blogs_larger_model():
    """The same host and config with Qwen2.5-3B (3.09 B parameters, 2 ranks): the whole offloaded step
    measured 2,497 ms (mean of three runs); the predicted offload part alone must fit inside it and
    leave the GPU a plausible 0.2-0.9 s for 8 sequences of a 3B model."""
    c = load_cluster("dgx-a100-40gb", 1)
    r = Recipe(gbs=8, seq_len=1024, stack="deepspeed", optimizer="adamw", optimizer_offload=True)
    off = float(offloaded_step_time_s(r, c, np.array(3.09e9 / 2)))
    assert 2.497 - 0.9 < off < 2.497 - 0.2


def test_the_host_dram_pass_bounds_a_crowded_node():
    """With a per-rank rate of zero the host part is the node's DRAM pass: every rank's partition at
    the step's bytes per parameter over host.memory_bandwidth."""
    c = load_cluster("hgx-h200", 1)
    r = Recipe(gbs=8, seq_len=1024, stack="deepspeed", optimizer="adamw", optimizer_offload=True)
    local = 1e9
    got = float(offloaded_step_time_s(r, c, np.array(local), host_s_per_param=0.0))
    assert got == pytest.approx(2 * local * 2 / 64e9 + optimizer_step_bytes_per_param(r) * local * 8 / 614.4e9)
