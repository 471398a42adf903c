"""The optimizer step: a memory-bound pass on the GPU, or ZeRO-Offload's round trip through the host.

On the GPU the step is one multi-tensor pass over the local parameters' master weights, states and
gradients (:func:`optimizer_step_bytes_per_param`) at the fitted HBM bandwidth.

Offloaded (DeepSpeed ``offload_optimizer: {device: cpu}``, Megatron-core ``--optimizer-cpu-offload``;
ZeRO-Offload, Ren et al., USENIX ATC 2021) the step runs after the backward, in sequence: each GPU's
16-bit gradient partition crosses its PCIe link, the host updates it, the 16-bit parameters come back.
The host part is not the DRAM-bandwidth pass it looks like: DeepSpeed's per-rank work (the gradient
copy into the pinned fp32 buffer, the gradient-norm clip, CPU-Adam over the partition, the fp32 to
16-bit parameter copy) runs at a per-rank rate far below the node's DRAM bandwidth.  That rate,
:data:`HOST_STEP_S_PER_PARAM`, is fitted on the one public A/B measurement with its host named
(:func:`fit_host_step_s_per_param`); the DRAM pass over all ranks' partitions at once stays a lower bound.
"""
from __future__ import annotations

import re

import numpy as np

from .compute import ACT_BYTES
from .errors import InputError
from .specs import ClusterSpec, Profile, Recipe, hardware_dir


#: The measurement :data:`HOST_STEP_S_PER_PARAM` is fitted on (hardware/profiles/data/): Qwen2.5-1.5B
#: (1,543,714,304 parameters), ZeRO-2 on 2 A100-SXM4-40GB of a DGX A100 (2x EPYC 7742), with and
#: without offload_optimizer.
OFFLOAD_FIT = dict(file="deepspeed_zero_offload_step_a100_epyc7742.md", params=1_543_714_304, dp=2,
                   cluster="dgx-a100-40gb", stack="deepspeed")

#: Host time of ZeRO-Offload's step per parameter of one rank's partition, s/param: fitted by
#: :func:`fit_host_step_s_per_param` on :data:`OFFLOAD_FIT` (``tests/test_optimizer_step.py`` refits it).
HOST_STEP_S_PER_PARAM = 1.359e-9


def optimizer_step_bytes_per_param(recipe: Recipe) -> float:
    """HBM bytes the optimizer step moves per local parameter (a memory-bound multi-tensor pass).

    It reads the fp32 master weight, each fp32 state and the fp32 grad, writes the master and the
    states back and the bf16 weight copy, and reads the grad once more for the global-norm clip:
    4 (2 + s) + 4 (1 + s) + 2 + 4 = 18 + 8 s bytes for s states (Adam: 34; LionW, SGD: 26;
    Adafactor: 18; costmodel.specs.recipe.OPTIMIZERS); each fp32 grad read is 2 bytes with bf16 main
    grads, and Megatron's precision-aware optimizer (bf16 states, the master's 16-bit remainder beside
    the bf16 weight it also reads) moves 2 bytes per state and per master.
    """
    s = recipe.optimizer_spec.fp32_states
    g = 2.0 if recipe.main_grads_dtype == "bf16" else 4.0     # fp16 grads are copied to fp32 mains first
    if recipe.optimizer_states_dtype == "bf16":     # bf16 states, the master as its 16-bit remainder
        return 2.0 * (2 + s) + g + 2.0 * (1 + s) + 2.0 + g
    return 4.0 * (1 + s) + g + 4.0 * (1 + s) + 2.0 + g


def gpu_step_time_s(recipe: Recipe, cluster: ClusterSpec, profile: Profile, local) -> np.ndarray:
    """The optimizer step on the GPU over ``local`` parameters (array), s: bytes per parameter over
    the fitted HBM bandwidth."""
    return optimizer_step_bytes_per_param(recipe) * local / (cluster.gpu.hbm_bytes_per_s * profile.hbm_efficiency)


def offloaded_step_time_s(recipe: Recipe, cluster: ClusterSpec, local, host_s_per_param=None) -> np.ndarray:
    """ZeRO-Offload's step over ``local`` parameters per GPU (array), s.

    PCIe down (16-bit gradients) + host + PCIe up (16-bit parameters), one GPU's link each way; the
    host part is the larger of the per-rank rate (``local`` x ``host_s_per_param``, default
    :data:`HOST_STEP_S_PER_PARAM`) and the node's DRAM pass (every rank's partition at
    :func:`optimizer_step_bytes_per_param` over ``host.memory_bandwidth``, a datasheet peak).

    Raises:
        InputError: a cluster whose file has no ``host`` bandwidths.
    """
    if cluster.host_memory_bytes_per_s is None or cluster.host_pcie_bytes_per_s is None:
        raise InputError(cluster.path, "host", "missing: --optimizer-offload needs the node's host.memory_bandwidth "
                         "and host.pcie_bandwidth_per_gpu (hardware/README.md)")
    rate = HOST_STEP_S_PER_PARAM if host_s_per_param is None else host_s_per_param
    pcie = 2.0 * local * ACT_BYTES / cluster.host_pcie_bytes_per_s
    dram = optimizer_step_bytes_per_param(recipe) * local * cluster.gpus_per_node / cluster.host_memory_bytes_per_s
    return pcie + np.maximum(local * rate, dram)


def optimizer_step_time_s(recipe: Recipe, cluster: ClusterSpec, profile: Profile, local) -> np.ndarray:
    """Time of the optimizer step over ``local`` parameters per GPU (array), s: on the GPU
    (:func:`gpu_step_time_s`) or offloaded (:func:`offloaded_step_time_s`).

    Raises:
        InputError: offloaded on a cluster whose file has no ``host`` bandwidths.
    """
    if recipe.optimizer_offload:
        return offloaded_step_time_s(recipe, cluster, local)
    return gpu_step_time_s(recipe, cluster, profile, local)


def _read_ms(text: str, row: str, where: str) -> float:
    m = re.search(r"^\|\s*" + re.escape(row) + r"\s*\|\s*([0-9.]+)\s*ms\s*\|", text, re.M)
    if m is None:
        raise InputError(where, row, "row not found (expected '| <name> | <N>ms |')")
    return float(m.group(1)) * 1e-3


def fit_host_step_s_per_param(data_dir=None) -> dict:
    """Fit :data:`HOST_STEP_S_PER_PARAM` on :data:`OFFLOAD_FIT`.

    The offloaded step minus the GPU one is what offload adds: the host part plus the PCIe round
    trip minus the GPU's own optimizer pass; per rank, host = (t_offload - t_zero2) + t_gpu_step -
    t_pcie over the rank's ``params / dp`` parameters (the GPU step and PCIe terms as this module
    prices them on the DGX A100 40GB with its built-in profile).

    Returns:
        dict: host_s_per_param, local_params, t_zero2_s, t_offload_s, gpu_step_s, pcie_s, source.
    Raises:
        InputError: the data file or one of its rows is missing.
    """
    from .specs import load_cluster, load_profile
    from .stacks import get_stack, stack_recipe
    f = OFFLOAD_FIT
    path = (hardware_dir() / "profiles" / "data" if data_dir is None else data_dir) / f["file"]
    if not path.is_file():
        raise InputError(str(path), "", "missing: the ZeRO-Offload measurement the host rate is fitted on")
    text = path.read_text()
    t_zero2 = _read_ms(text, "ZeRO2", str(path))
    t_off = _read_ms(text, "ZeRO Offload with DeepSpeed core binding", str(path))
    cluster = load_cluster(f["cluster"])
    recipe = stack_recipe(get_stack(f["stack"]), gbs=8, seq_len=1024, precision="bf16")
    local = f["params"] / f["dp"]
    gpu = float(gpu_step_time_s(recipe, cluster, load_profile(cluster.gpu.key), local))
    pcie = 2.0 * local * ACT_BYTES / cluster.host_pcie_bytes_per_s
    host = (t_off - t_zero2) + gpu - pcie
    return dict(host_s_per_param=host / local, local_params=local, t_zero2_s=t_zero2, t_offload_s=t_off,
                gpu_step_s=gpu, pcie_s=pcie, source=f"hardware/profiles/data/{f['file']}")
