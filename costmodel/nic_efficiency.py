"""What a node's NICs stream: NCCL's stated large-message efficiency per fabric and line rate, where the
built-in captures did not run, and the notes that say which figure priced a cluster's inter-node
collectives (and where the GPUs' PCIe links, not the NICs, bound them: ClusterSpec.node_nic_bytes_per_s)."""
from __future__ import annotations

import math

from .specs import ClusterSpec, Profile

#: NCCL's large-message (Simple protocol) bus bandwidth as a fraction of the NIC line rate, where it is stated
#: for a fabric the built-in captures did not run on: fabric -> (lowest line rate it holds from, bytes/s per
#: NIC; the fraction).  NCCL's maintainers: "For NDR @ 400Gbps you should see 46-48GB/s per NIC"
#: (nccl-tests#290), 47 of 50; "24GB/s is the peak performance per 200G NIC (12 GB/s for 100G NICs)"
#: (nccl-tests#119, nccl#412), 24 of 25 (hardware/profiles/data/github_issue_excerpts_partial_tables.txt,
#: items 5 and 8).  The lower, 47/50, holds at every rate: a NIC's share of its line rate is set by its per-packet
#: headers and its encoding, neither of which depends on the rate (64b/66b from InfiniBand FDR and 10 GbE on: a
#: cluster file gives a NIC's data rate, QDR's 32 Gb/s, not its 40 Gb/s signalling), so no line rate is a
#: cliff.  The per-NIC figures are the NIC's, not InfiniBand's: RoCE on the same
#: ConnectX NICs is held to them (nccl#495: 8 x 100 Gb/s RoCE at 75% of line rate, "a bit low" to the
#: maintainers; item 9).  Omni-Path, plain Ethernet and EFA have no stated figure and keep a capture's (the
#: built-in AWS EFA captures reach 0.63 (p5), 0.77 (p6-b200), 0.84 (p4de) of theirs).
STATED_NIC_EFFICIENCY = {"infiniband": (0.0, 47.0 / 50.0), "roce": (0.0, 47.0 / 50.0)}


def stated_nic_efficiency(fabric: str | None, nic_bytes_per_s: float | None) -> float | None:
    """NCCL's stated large-message efficiency of ``fabric`` at ``nic_bytes_per_s`` per NIC
    (:data:`STATED_NIC_EFFICIENCY`), or None where none is stated."""
    lowest, frac = STATED_NIC_EFFICIENCY.get(fabric, (math.inf, None))
    return frac if nic_bytes_per_s is not None and nic_bytes_per_s >= lowest * (1 - 1e-9) else None


def inter_node_efficiency_note(profile: Profile, cluster: ClusterSpec) -> str | None:
    """Where the bandwidth of ``cluster``'s inter-node collectives comes from, when ``profile``'s inter-node
    capture ran on another scale-out fabric (None when on the cluster's own): NCCL's stated large-message
    efficiency (:data:`STATED_NIC_EFFICIENCY`), or the capture's, lent; the latency is NCCL's ring model
    either way (costmodel.comm._params).  Whether any collective leaves the NVLink domain is the caller's to say."""
    measured = profile.comm_fabric.get("inter_node", {}).get("all_reduce")
    if measured is None or measured == cluster.inter_fabric:
        return None
    rate = f"{cluster.nic_bytes_per_s * 8e-9:g} Gb/s"
    stated = stated_nic_efficiency(cluster.inter_fabric, cluster.nic_bytes_per_s)
    if stated is not None:
        return (f"inter-node: {cluster.inter_fabric} NICs of {rate} stream large messages at NCCL's stated "
                f"{stated:.0%} of line rate (nccl-tests#290, #119); small messages at {profile.path}'s {measured} capture's "
                "efficiencies, latency from NCCL's ring model")
    names = profile.comm_protocols["inter_node"]["all_reduce"]
    simple = dict(zip(names, profile.comm["inter_node"]["all_reduce"].protocols)).get("Simple", (0.0, 0.0))[1]
    return (f"inter-node: no {cluster.inter_fabric} measurement at {rate}: {profile.path}'s {measured} capture lends "
            f"its efficiency ({simple:.0%} of line rate at large messages), latency from NCCL's ring model; "
            "calibrate this cluster to replace it")


def pcie_bound_note(cluster: ClusterSpec) -> str | None:
    """Where ``cluster``'s NICs carry more than its GPUs' PCIe links (host.pcie_bandwidth_per_gpu), through
    which GPUDirect RDMA streams each GPU's traffic: what bounds the node's sends (None otherwise)."""
    if not cluster.pcie_bound_nics:
        return None
    return (f"{cluster.path}: {cluster.nics_per_node} NICs x {cluster.nic_bytes_per_s * 8e-9:g} Gb/s exceed the "
            f"{cluster.gpus_per_node} GPUs' PCIe links (host.pcie_bandwidth_per_gpu {cluster.host_pcie_bytes_per_s / 1e9:g} "
            "GB/s each), through which GPUDirect RDMA streams: the node sends at the links' total")
