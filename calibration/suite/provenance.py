"""The ``provenance`` record of one rank: where, when and on what software it measured.

GPU identity comes from the monitor (NVML / amdsmi) where there is one, else from torch: name
(``torch.cuda.get_device_name``), UUID (``get_device_properties().uuid``, hashed: the record
carries no serial number or UUID, only :func:`.monitor.gpu_id`), PCI bus id, slot (NVML index,
i.e. the GPU's position in the node, else torch's local index).  Versions: driver (NVML
``nvmlSystemGetDriverVersion`` / amdsmi), CUDA and ROCm (``torch.version.cuda`` / ``.hip``),
NCCL / RCCL (``torch.cuda.nccl.version()``), torch, Python.
"""
from __future__ import annotations

import platform
import sys
import time

from .monitor import _torch_ids, gpu_id


def nccl_version() -> str | None:
    """``torch.cuda.nccl.version()`` as ``"2.21.5"`` (older torch returns an int such as 2708), or None."""
    try:
        import torch
        v = torch.cuda.nccl.version()
    except Exception:  # noqa: BLE001 - CPU builds have no NCCL
        return None
    if isinstance(v, tuple):
        return ".".join(str(x) for x in v[:3])
    if isinstance(v, int):
        major, rest = divmod(v, 10000) if v >= 10000 else divmod(v, 1000)
        minor, patch = divmod(rest, 100)
        return f"{major}.{minor}.{patch}"
    return str(v)


def slot_of(ctx, monitor):
    """GPU slot: the monitor's device index (position in the node), else torch's index; None on CPU."""
    if not ctx.is_cuda:
        return None
    return monitor.slot if monitor.slot is not None else ctx.device.index


def record_fields(ctx, monitor, args: dict, started_unix: float) -> dict:
    """Fields of the ``provenance`` record (``costmodel.readers.suite_jsonl.REQUIRED['provenance']``) + extras.

    Args:
        ctx: :class:`.dist.DistContext`; monitor: :class:`.monitor.Monitor`.
        args: the resolved command-line options (JSON-able dict).
        started_unix: when the run started (Unix s).
    """
    import torch
    name = uuid = pci = None
    if ctx.is_cuda:
        name = monitor.name or torch.cuda.get_device_name(ctx.device)
        t_uuid, t_pci = _torch_ids(ctx.device)
        uuid = monitor.uuid or t_uuid
        pci = monitor.pci_bus_id or t_pci
    return dict(
        world_size=ctx.world_size, local_rank=ctx.local_rank, node_rank=ctx.node_rank, n_nodes=ctx.n_nodes,
        backend=ctx.backend, device=str(ctx.device), gpu_name=name, gpu_id=gpu_id(uuid), pci_bus_id=pci,
        slot=slot_of(ctx, monitor), driver_version=monitor.driver_version,
        cuda_version=torch.version.cuda, rocm_version=getattr(torch.version, "hip", None),
        nccl_version=nccl_version() if ctx.is_cuda else None, torch_version=torch.__version__,
        python_version=platform.python_version(), monitor=monitor.kind,
        power_limit_w=monitor.power_limit_w(), power_limit_range_w=monitor.power_limit_range_w(),
        started_unix=started_unix, args=args,
        # extras
        ranks_per_node=ctx.ranks_per_node, launcher=ctx.launcher, default_power_limit_w=monitor.default_power_limit_w(),
        cpu=platform.processor() or platform.machine(), os=platform.platform(), time_utc=time.strftime(
            "%Y-%m-%dT%H:%M:%SZ", time.gmtime(started_unix)), argv=sys.argv[1:])
