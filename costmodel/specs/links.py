"""The links of a cluster file: the intra-node fabric's and each NIC's bandwidth and hop latency, and the
NVLink domain, each read in a range a real link has and checked against the GPU's own links
(hardware/README.md)."""
from __future__ import annotations

from ..errors import InputError
from ..units import in_bits
from .loading import _check_sources, _get, _get_int


#: the most GPUs one node (or NVLink domain) joins: NVLink 5's largest domain (NVIDIA GB200 NVL72 page: 'up
#: to 576 GPUs')
MAX_DOMAIN_GPUS = 576
#: intra-node fabrics of NVLink (an NVSwitch, or direct links between GPU pairs)
NVLINK_FABRICS = ("nvswitch", "nvlink-mesh")
#: the fastest NIC announced, per direction: NVIDIA ConnectX-9 SuperNIC, 1.6 Tb/s (NVIDIA GTC 2025 keynote,
#: for Vera Rubin); a faster one in a file is a bytes-for-bits slip (400GB/s for a 400 Gb/s NIC)
MAX_NIC_BYTES_PER_S = 1.6e12 / 8
#: PCIe 6.0 x16, per direction (PCI-SIG: 64 GT/s x 16 lanes = 128 GB/s): no GPU's PCIe link is faster
MAX_PCIE_BYTES_PER_S = 128e9


def check_intra_link(intra: dict, bw: float, gpu, gpus_per_node: int, domain: int | None, w: str) -> None:
    """The intra-node fabric must be one the GPU has: NVLink fabrics an NVIDIA GPU with NVLink, at most its
    own NVLink bandwidth (the GPU file's ``nvlink_bandwidth_per_gpu``) and above an eighth of it when
    given in bits (NVIDIA quotes NVLink in bytes, AMD Infinity Fabric too: 450Gbps for an H100 is a slipped
    unit); xGMI an AMD GPU;
    PCIe at most PCIe 6.0 x16; an NVLink domain of several nodes an NVSwitch; a node at most :data:`MAX_DOMAIN_GPUS`.

    Raises:
        InputError: naming the cluster file's field and the GPU file's value it contradicts.
    """
    fabric, vendor = intra.get("fabric"), str(gpu.vendor).lower()
    if not 1 <= gpus_per_node <= MAX_DOMAIN_GPUS:
        raise InputError(w, "gpus_per_node", f"{gpus_per_node} is outside 1 .. {MAX_DOMAIN_GPUS} (NVLink's largest "
                         "domain); a node is the unit that owns NICs")
    if fabric in NVLINK_FABRICS:
        if vendor != "nvidia" or not gpu.nvlink_bytes_per_s:
            raise InputError(w, "intra_node.fabric", f"{fabric}, but {gpu.name} ({gpu.path or gpu.key}) has no NVLink "
                             "(its nvlink_bandwidth_per_gpu): give pcie or its own fabric")
    link = "NVLink" if fabric in NVLINK_FABRICS else "Infinity Fabric" if fabric in ("xgmi", "xgmi-mesh") else None
    if link and gpu.nvlink_bytes_per_s and in_bits(intra.get("bandwidth_per_gpu")) \
            and bw * 8 <= gpu.nvlink_bytes_per_s * 1.02:
        raise InputError(w, "intra_node.bandwidth_per_gpu", f"{intra['bandwidth_per_gpu']} is {bw / 1e9:g} GB/s, "
                         f"an eighth or less of {gpu.name}'s {link} ({gpu.nvlink_bytes_per_s / 1e9:g} GB/s per "
                         f"direction): {link} is quoted in bytes (e.g. {gpu.nvlink_bytes_per_s / 1e9:g}GB/s)")
    if link and gpu.nvlink_bytes_per_s and bw > gpu.nvlink_bytes_per_s * 1.01:
        raise InputError(w, "intra_node.bandwidth_per_gpu", f"{bw / 1e9:g} GB/s exceeds {gpu.name}'s own {link} "
                         f"bandwidth, {gpu.nvlink_bytes_per_s / 1e9:g} GB/s per direction ({gpu.path or gpu.key}; "
                         "a two-way total is twice the figure per direction)")
    if fabric in ("xgmi", "xgmi-mesh") and vendor != "amd":
        raise InputError(w, "intra_node.fabric", f"{fabric} is AMD's Infinity Fabric; {gpu.name} is {gpu.vendor}'s")
    if fabric == "pcie" and in_bits(intra.get("bandwidth_per_gpu")):
        # PCIe is quoted in bytes per direction (PCIe 5.0 x16: 64 GB/s), as the host link is (hardware.py)
        raise InputError(w, "intra_node.bandwidth_per_gpu", f"{intra['bandwidth_per_gpu']!r} is in bits: PCIe links "
                         "are quoted in bytes per second per direction (PCIe 5.0 x16: 64GB/s); a value in bits reads "
                         "8x lower, give it in B/s")
    if fabric == "pcie" and bw > MAX_PCIE_BYTES_PER_S:
        raise InputError(w, "intra_node.bandwidth_per_gpu", f"{bw / 1e9:g} GB/s is above PCIe 6.0 x16's "
                         f"{MAX_PCIE_BYTES_PER_S / 1e9:g} GB/s per direction")
    if domain is not None and domain > gpus_per_node and fabric != "nvswitch":
        raise InputError(w, "intra_node.domain_gpus", f"{domain} GPUs over several nodes need an NVSwitch fabric "
                         f"(NVLink domains such as GB200 NVL72); {fabric} joins the GPUs of one node only")


def link_speeds(intra: dict, inter: dict, w: str) -> dict:
    """The NVLink and NIC bandwidths (bytes/s, per direction) and hop latencies (s) of a cluster file
    as ClusterSpec fields, each in a range a link can have.

    Raises:
        InputError: a bandwidth outside its range (a bare number reads as bytes/s: '800' meant as Gb/s
            would price a NIC at 800 B/s; a NIC above :data:`MAX_NIC_BYTES_PER_S` is given in bytes) or a
            latency above 1 ms, naming the field.
    """
    out = {}
    for sec, v, k, field_, lo, hi, span in (
            ("intra_node", intra, "bandwidth_per_gpu", "intra_bytes_per_s", 1e9, 1e13, "1 GB/s .. 10 TB/s"),
            ("inter_node", inter, "bandwidth_per_nic", "nic_bytes_per_s", 1e8, MAX_NIC_BYTES_PER_S, "0.8 Gb/s .. 1.6 Tb/s")):
        out[field_] = _get(v, k, w, "bytes_per_s", prefix=f"{sec}.")
        if not lo <= out[field_] <= hi:
            fix = ("faster than any NIC (ConnectX-9's 1.6 Tb/s): NICs are quoted in bits (400Gbps, not 400GB/s)"
                   if out[field_] > hi and sec == "inter_node" else "give a unit (e.g. 400Gbps, 450GB/s)")
            raise InputError(w, f"{sec}.{k}", f"{v[k]!r} is outside {span} per direction: {fix}")
    for sec, v, field_ in (("intra_node", intra, "intra_latency_s"), ("inter_node", inter, "inter_latency_s")):
        out[field_] = _get(v, "latency", w, "seconds", prefix=f"{sec}.")
        if out[field_] > 1e-3:
            raise InputError(w, f"{sec}.latency", f"{v['latency']!r} is above 1 ms: a link hop, not a typo?")
    return out


def domain_gpus(intra: dict, gpus_per_node: int, d: dict, w: str) -> int | None:
    """``intra_node.domain_gpus`` (None when absent): a whole number of nodes, at most 576 GPUs (NVLink
    5's largest domain, NVIDIA GB200 NVL72 page: 'up to 576 GPUs'), with its source.

    Raises:
        InputError: not an integer, not a multiple of gpus_per_node, above 576, or unsourced.
    """
    if intra.get("domain_gpus") is None:
        return None
    v = _get_int({"intra_node.domain_gpus": intra["domain_gpus"]}, ("intra_node.domain_gpus",), w, maximum=576)
    if v % gpus_per_node:
        raise InputError(w, "intra_node.domain_gpus", f"{v} is not a whole number of nodes of {gpus_per_node} GPUs")
    _check_sources(d, w, ["intra_node.domain_gpus"])
    return v


def check_nic_share(nics_per_node: int, nic_bytes_per_s: float, gpus_per_node: int, host: dict, w: str) -> None:
    """A GPU reaches the NICs through its PCIe link: a node whose NICs give each GPU more than PCIe 6.0 x16
    carries (:data:`MAX_PCIE_BYTES_PER_S` per direction) needs ``host.pcie_bandwidth_per_gpu``, which caps
    the share (ClusterSpec.node_nic_bytes_per_s); without it the NICs' full rate would be priced.

    Raises:
        InputError: naming inter_node.nics_per_node."""
    share = nics_per_node * nic_bytes_per_s / max(gpus_per_node, 1)
    if share > MAX_PCIE_BYTES_PER_S * (1 + 1e-9) and not (isinstance(host, dict) and host.get("pcie_bandwidth_per_gpu")):
        raise InputError(w, "inter_node.nics_per_node", f"{nics_per_node} NICs of {nic_bytes_per_s * 8 / 1e9:g} Gb/s give "
                         f"each of the {gpus_per_node} GPUs {share / 1e9:g} GB/s, more than PCIe 6.0 x16 carries "
                         f"({MAX_PCIE_BYTES_PER_S / 1e9:g} GB/s per direction), the link a GPU reaches them through: "
                         "check the count, or give host.pcie_bandwidth_per_gpu (which caps the share)")
