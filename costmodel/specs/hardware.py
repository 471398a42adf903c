"""GPU datasheets, cluster topology and cooling (hardware/gpus/*.yaml, hardware/clusters/*.yaml)."""
from __future__ import annotations

import difflib
import numbers
from dataclasses import dataclass, replace
from pathlib import Path

from ..errors import InputError
from ..units import in_bits, parse_quantity
from .loading import (_check_sources, check_source_keys, _get, _get_int, _get_str, _read_mapping, _resolve, _sub, hardware_dir,
                      refuse_nulls)
from .params import SCALE_OUT_FABRICS
from .cooling import CoolingSpec, _cooling
from .node_power import POWER_KEYS, node_power
from .links import MAX_NIC_BYTES_PER_S, check_intra_link, check_nic_share, domain_gpus, link_speeds



@dataclass(frozen=True)
class GpuSpec:
    """Datasheet values of one GPU model (hardware/gpus/*.yaml), SI units.

    Attributes: key (file stem), name, vendor, peak_flops (dtype -> dense FLOP/s), hbm_bytes,
    hbm_bytes_per_s, tdp_w, num_sms, nvlink_bytes_per_s (per direction, or 0), sources (field ->
    citation), slowdown_temp_c (thermal slowdown threshold), shutdown_temp_c (the GPU powers off above
    it: a layout that reaches it is infeasible), power_limit_min_w (lowest settable
    power limit), boost_clock_mhz (the SM clock the peaks are quoted at), max_clock_mhz (the highest
    SM clock, nvidia-smi -q 'Max Clocks: SM', where a kernel no limit holds runs: an H100 SXM quotes its
    peaks at 1830 MHz and boosts to 1980), min_clock_mhz (the lowest SM clock, an idle GPU's), idle_power_w (an idle GPU's power draw at its lowest clock,
    nvidia-smi -q 'Power Draw' / rocm-smi socket power: no process, no context), devices_per_package
    (devices that share one package power limit, set through the first of them: 2 for an MI250 OAM,
    whose two GCDs are two devices; 1 elsewhere) and
    fit_hbm_bytes_per_s (the HBM bandwidth the built-in profile was fitted with, where it differs
    from hbm_bytes_per_s), each None when the file does not give it; hbm_cuda_bytes, the
    CUDA-visible total (nvidia-smi -q 'FB Memory Usage' Total minus the driver's Reserved, i.e.
    cudaMemGetInfo's total), None when no capture is cited; architecture (one of :data:`ARCHITECTURES`:
    which kernels and number formats run on it) and path (the file it was read from); mem_headroom, the
    fraction of that total a run keeps free (``--mem-headroom``; 0 in a GPU file).
    """

    key: str
    name: str
    vendor: str
    peak_flops: dict
    hbm_bytes: float
    hbm_bytes_per_s: float
    tdp_w: float
    num_sms: int
    nvlink_bytes_per_s: float
    sources: dict
    slowdown_temp_c: float | None = None
    shutdown_temp_c: float | None = None
    power_limit_min_w: float | None = None
    boost_clock_mhz: float | None = None
    max_clock_mhz: float | None = None
    min_clock_mhz: float | None = None
    idle_power_w: float | None = None
    devices_per_package: int = 1
    fit_hbm_bytes_per_s: float | None = None
    hbm_cuda_bytes: float | None = None
    architecture: str = ""
    path: str = ""
    mem_headroom: float = 0.0

    @property
    def total_capacity_bytes(self) -> float:
        """Bytes a training process can hold in total: the CUDA-visible total where the GPU file
        cites one, else the datasheet capacity (vendor GB, which understates a real device: an
        'H100 80GB' exposes 81106 MiB = 85.0e9 bytes to CUDA)."""
        return self.hbm_cuda_bytes if self.hbm_cuda_bytes is not None else self.hbm_bytes

    @property
    def capacity_bytes(self) -> float:
        """Bytes a layout may use: :attr:`total_capacity_bytes` less the ``mem_headroom`` share kept
        free (room for what the model leaves out: the caching allocator's fragmentation, other
        processes on the GPU)."""
        return self.total_capacity_bytes * (1.0 - self.mem_headroom)

    @property
    def full_clock_mhz(self) -> float | None:
        """The SM clock of a GPU no limit holds, MHz: ``max_clock_mhz``, else ``boost_clock_mhz`` (the GPUs
        whose peak-quoting clock is their highest, A100).  The power model's clock ratio s is relative to
        it: the burst microbenchmarks that fit the kernel efficiencies ran there (costmodel/power.py)."""
        return self.max_clock_mhz if self.max_clock_mhz is not None else self.boost_clock_mhz


@dataclass(frozen=True)
class FabricTier:
    """One switch tier of the scale-out fabric above the NICs (``inter_node.tiers``, innermost first).

    Attributes:
        name: what the operator calls it (leaf, spine, core).
        nodes: the nodes one switch group of this tier joins (a scalable unit for the leaf tier;
            each tier a whole number of the tier below).
        oversubscription: downlink over uplink capacity of this tier's switches (>= 1; 1 = non-blocking):
            traffic between two of its groups leaves through uplinks with 1/oversubscription of
            the bandwidth its nodes' NICs inject.
        latency_s: extra one-way latency of a path that rises above this tier, s.
        routing: how flows leaving a group pick its uplinks: 'adaptive' (InfiniBand adaptive routing,
            Spectrum-X, packet spraying: the load spreads evenly) or 'ecmp' (a static hash per flow;
            costmodel.fabric.ecmp_max_load).
        ecmp_flows_per_nic: with 'ecmp', the flows one NIC's traffic out of the group spreads over
            (NCCL channels per NIC x NCCL_IB_QPS_PER_CONNECTION); 0 otherwise.
        rails: the tier is rail-optimised (NVIDIA DGX SuperPOD reference architecture): NIC k of every
            node meets only rail k's switches, so a flow hashes over its rail's uplinks alone; False:
            every NIC of a group reaches all of the group's uplinks.
    """

    name: str
    nodes: int
    oversubscription: float
    latency_s: float
    routing: str = "adaptive"
    ecmp_flows_per_nic: int = 0
    rails: bool = False


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster (hardware/clusters/*.yaml): GPUs, topology, power and cooling, SI units.

    Attributes: key, name, description, gpu (:class:`GpuSpec`), gpus_per_node, nodes,
    intra_fabric, intra_bytes_per_s (per GPU per direction), intra_latency_s, inter_fabric,
    nics_per_node, nic_bytes_per_s (per NIC per direction), inter_latency_s, node_power_budget_w,
    cooling (:class:`CoolingSpec`), sources, path; host_memory_bytes_per_s (a node's host DRAM
    bandwidth) and host_pcie_bytes_per_s (one GPU's PCIe link, per direction), B/s, from the file's
    optional ``host`` section (None without it: an optimizer offloaded to the host cannot be priced);
    scale_up_gpus: the GPUs of one NVLink (scale-up) domain, the file's ``intra_node.domain_gpus``:
    a node (tray) of ``gpus_per_node`` GPUs owns its NICs, while the NVLink fabric may join several
    nodes (GB200 NVL72: 18 trays of 4 GPUs, one 72-GPU domain); default gpus_per_node (an HGX node
    is its own domain).  tiers: the scale-out fabric's switch tiers (:class:`FabricTier`, innermost
    first; empty: one non-blocking switch layer joins every node); sharp: the scale-out switches
    reduce in the network (InfiniBand SHARP, the file's ``inter_node.sharp``; costmodel/fabric.py
    prices an all-reduce across nodes with it); what_if: the scale-out what-ifs
    applied by :func:`with_fabric` ("" when none).  node_other_power_w: a node's non-GPU power (CPUs,
    NICs, NVSwitches, memory, storage, fans) while a job runs, W: the file's ``power.node_other_power``
    (a measurement, e.g. BMC/IPMI minus nvidia-smi), else derived as node_power_budget_w minus
    gpus_per_node x the GPU's TDP (the rating's non-GPU share: an upper bound where the rating is a
    datasheet maximum); node_other_power_source says which.  gpu_power_limit_w: the per-GPU limit
    the site enforces below TDP (the file's ``power.gpu_power_limit``; None: the TDP), see
    :attr:`power_limit_w`.
    """

    key: str
    name: str
    description: str
    gpu: GpuSpec
    gpus_per_node: int
    nodes: int
    intra_fabric: str
    intra_bytes_per_s: float
    intra_latency_s: float
    inter_fabric: str
    nics_per_node: int
    nic_bytes_per_s: float
    inter_latency_s: float
    node_power_budget_w: float
    cooling: CoolingSpec
    sources: dict
    path: str
    node_other_power_w: float = 0.0
    node_other_power_source: str = ""
    gpu_power_limit_w: float | None = None
    host_memory_bytes_per_s: float | None = None
    host_pcie_bytes_per_s: float | None = None
    domain_gpus: int | None = None
    tiers: tuple = ()
    what_if: str = ""
    sharp: bool = False

    @property
    def scale_up_gpus(self) -> int:
        """GPUs of one NVLink domain (``intra_node.domain_gpus``, else ``gpus_per_node``)."""
        return self.domain_gpus or self.gpus_per_node

    @property
    def num_gpus(self) -> int:
        """gpus_per_node * nodes."""
        return self.gpus_per_node * self.nodes

    @property
    def power_limit_w(self) -> float:
        """The per-GPU power limit a job runs under unless it sets a cap, W: the file's
        ``power.gpu_power_limit`` where the site holds its GPUs below TDP, else the GPU's TDP."""
        return self.gpu.tdp_w if self.gpu_power_limit_w is None else self.gpu_power_limit_w

    @property
    def gpu_power_budget_w(self) -> float:
        """What a node's GPUs may draw together, W: the node rating less its non-GPU power (the
        default GPU budget of the energy ILP; never below 0)."""
        return max(self.node_power_budget_w - self.node_other_power_w, 0.0)

    @property
    def node_nic_bytes_per_s(self) -> float:
        """Total NIC bandwidth of a node per direction, bytes/s: the NICs' line rate, at most what the GPUs'
        PCIe links carry where the file gives them (GPUDirect RDMA streams each GPU's traffic through its
        own link: host.pcie_bandwidth_per_gpu x GPUs, :attr:`pcie_bound_nics`)."""
        line = self.nics_per_node * self.nic_bytes_per_s
        return min(line, self.gpus_per_node * self.host_pcie_bytes_per_s) if self.pcie_bound_nics else line

    @property
    def pcie_bound_nics(self) -> bool:
        """The node's NICs carry more than its GPUs' PCIe links (host.pcie_bandwidth_per_gpu) can feed."""
        return bool(self.host_pcie_bytes_per_s) and (self.nics_per_node * self.nic_bytes_per_s
                                                     > self.gpus_per_node * self.host_pcie_bytes_per_s * (1 + 1e-9))


#: optional numeric fields of a GPU file: each needs a source where present
OPTIONAL_GPU_NUMBERS = ("hbm_cuda_total", "nvlink_bandwidth_per_gpu", "shutdown_temp", "boost_clock_mhz",
                        "max_clock_mhz", "min_clock_mhz", "idle_power", "fit_hbm_bandwidth", "devices_per_package")


def list_gpus() -> list[str]:
    """File stems of hardware/gpus/*.yaml."""
    return sorted(p.stem for p in (hardware_dir() / "gpus").glob("*.yaml"))


def list_clusters() -> list[str]:
    """File stems of hardware/clusters/*.yaml."""
    return sorted(p.stem for p in (hardware_dir() / "clusters").glob("*.yaml"))


def _cuda_total(d: dict, w: str):
    """``hbm_cuda_total`` in bytes (None when absent): at most the datasheet capacity read as GiB, as
    vendors quote binary gigabytes in decimal units ('80GB' parts expose 81,106 MiB)."""
    v = _get(d, "hbm_cuda_total", w, "bytes", required=False)
    cap = _get(d, "hbm_capacity", w, "bytes")
    if not 1e9 <= cap <= 1e13:      # before comparing with it (a bare number reads as bytes)
        raise InputError(w, "hbm_capacity", f"{d['hbm_capacity']!r} is outside 1 GB .. 10 TB: give a unit (e.g. 80GB)")
    if v is not None and v > cap * 2 ** 30 / 1e9:
        raise InputError(w, "hbm_cuda_total", f"{v / 2**30:.1f} GiB exceeds the datasheet capacity "
                         f"({d.get('hbm_capacity')}) read as binary gigabytes ({cap / 1e9:.0f} GiB)")
    return v


#: the keys of a GPU file (hardware/README.md)
#: GPU architectures (the vendor's generation names): which attention kernels, number formats and
#: communication libraries run on a GPU follows from its architecture, not from its file's name
ARCHITECTURES = ("volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "cdna4")
#: the vendor of each architecture (a file naming another would take the other vendor's kernels and libraries)
ARCHITECTURE_VENDOR = {a: ("amd" if a.startswith("cdna") else "nvidia") for a in ARCHITECTURES}
#: the number formats a GPU file quotes dense peaks for (what the model's GEMMs and cast costs read)
PEAK_FORMATS = ("bf16", "fp16", "fp8", "fp4", "tf32", "fp32", "fp64", "int8")
GPU_KEYS = ("name", "vendor", "architecture", "peak_tflops", "hbm_capacity", "hbm_bandwidth", "tdp", "num_sms", "sources",
            "slowdown_temp", "power_limit_min", *OPTIONAL_GPU_NUMBERS)


#: a memory or PCIe bandwidth given in bits reads 8x too low yet in range, and no vendor quotes one in bits:
#: refused, not converted (a link's bits are checked against the GPU's own link, costmodel.specs.links)
_BITS_SLIP = ("{v!r} is in bits: {what} are quoted in bytes per second by their vendors (e.g. {eg}); a "
              "value in bits reads 8x lower, give it in B/s")


#: dense tensor FLOP per clock per SM (CU) at 16 bits across the catalog's GPUs: V100, L40S, MI250 about 1000, A100 and
#: MI300X 2048, H100 and MI355X 4096, B200 about 8000; a peak far outside (a PFLOP/s figure written as TFLOP/s
#: is 1000x low) is a unit slip.  Narrower operands pack 2x (fp8) and 4x (fp4), tf32 runs at half rate
_FLOP_PER_CLOCK_SPAN = (64.0, 65536.0)
_OPERAND_RATE = {"tf32": 0.5, "fp16": 1.0, "bf16": 1.0, "fp8": 2.0, "fp4": 4.0}


def _check_flops_per_clock(g: GpuSpec, w: str) -> None:
    """Refuse a peak whose FLOP per clock per SM (CU) at the quoted clock (``num_sms``, ``boost_clock_mhz``)
    no tensor core has: :data:`_FLOP_PER_CLOCK_SPAN` scaled by the operand's rate.

    Raises:
        InputError: naming peak_tflops.<dtype>, its rate per clock and what tensor cores do."""
    if not g.num_sms or not g.boost_clock_mhz:
        return
    for dt, v in g.peak_flops.items():
        per = v / (g.num_sms * g.boost_clock_mhz * 1e6)
        lo, hi = (x * _OPERAND_RATE.get(dt, 1.0) for x in _FLOP_PER_CLOCK_SPAN)
        if not lo <= per <= hi:
            raise InputError(w, f"peak_tflops.{dt}", f"{v / 1e12:g} TFLOP/s is {per:.3g} FLOP per clock per SM at "
                             f"{g.num_sms} SMs x {g.boost_clock_mhz:g} MHz; dense tensor cores do {lo:g} .. {hi:g} "
                             f"(16-bit: A100 2048, H100 4096): a unit slip (the unit is TFLOP/s, not PFLOP/s)?")


def _check_gpu(g: GpuSpec, d: dict, w: str) -> GpuSpec:
    """A GPU file's values in the ranges a GPU can have, the ones a bare number would miss by a unit
    (a bandwidth without one reads as bytes/s), and its clocks and powers in order.

    Raises:
        InputError: the first value out of range, naming the field.
    """
    # (hbm_capacity is checked where it is read, _cuda_total, before hbm_cuda_total is compared with it)
    for field_, v, lo, hi, span, eg in (("hbm_bandwidth", g.hbm_bytes_per_s, 1e10, 1e14, "10 GB/s .. 100 TB/s", "3.35TB/s"),
                                        ("tdp", g.tdp_w, 10.0, 1e4, "10 W .. 10 kW", "700W")):
        if not lo <= v <= hi:
            why = (f"a bare number reads in base units: give a unit (e.g. {eg})" if isinstance(d[field_], (int, float))
                   else f"check the number and its unit (e.g. {eg})")
            raise InputError(w, field_, f"{d[field_]!r} is outside {span}: {why}")
    for field_ in ("hbm_bandwidth", "fit_hbm_bandwidth"):
        if in_bits(d.get(field_)):
            raise InputError(w, field_, _BITS_SLIP.format(v=d[field_], what="memory bandwidths", eg="3.35TB/s"))
    if in_bits(d.get("nvlink_bandwidth_per_gpu")):
        raise InputError(w, "nvlink_bandwidth_per_gpu", _BITS_SLIP.format(
            v=d["nvlink_bandwidth_per_gpu"], what="NVLink and Infinity Fabric bandwidths", eg="450GB/s for an H100"))
    if g.nvlink_bytes_per_s and not 1e9 <= g.nvlink_bytes_per_s <= 1e13:     # 0: the GPU has no NVLink
        v = d["nvlink_bandwidth_per_gpu"]
        raise InputError(w, "nvlink_bandwidth_per_gpu", f"{v!r} is outside 1 GB/s .. 10 TB/s per direction (or 0: "
                         "no NVLink): " + ("a bare number reads as bytes/s: give a unit (e.g. 450GB/s)"
                                           if isinstance(v, (int, float)) else "check the number and its unit"))
    for dt, v in g.peak_flops.items():
        if not 1e12 <= v <= 1e17:
            raise InputError(w, f"peak_tflops.{dt}", f"{v / 1e12:g} TFLOP/s is outside 1 .. 100,000 (the unit is TFLOP/s)")
    _check_flops_per_clock(g, w)
    p16 = g.peak_flops.get("bf16", g.peak_flops.get("fp16"))
    for dt in ("fp8", "fp4"):
        # narrower operands pack more per tensor-core instruction: every datasheet doubles the rate
        if dt in g.peak_flops and g.peak_flops[dt] < p16:
            raise InputError(w, f"peak_tflops.{dt}", f"{g.peak_flops[dt] / 1e12:g} TFLOP/s is below the 16-bit peak "
                             f"({p16 / 1e12:g}): a {dt} tensor core runs at least as fast (a dense value for each, "
                             "none with 2:4 sparsity?)")
    if g.boost_clock_mhz is not None and g.min_clock_mhz is not None and g.min_clock_mhz >= g.boost_clock_mhz:
        raise InputError(w, "min_clock_mhz", f"{g.min_clock_mhz:g} MHz is not below boost_clock_mhz "
                         f"({g.boost_clock_mhz:g} MHz)")
    if g.max_clock_mhz is not None and g.boost_clock_mhz is not None and g.max_clock_mhz < g.boost_clock_mhz:
        raise InputError(w, "max_clock_mhz", f"{g.max_clock_mhz:g} MHz is below boost_clock_mhz "
                         f"({g.boost_clock_mhz:g} MHz): the highest clock is at least the one the peaks are quoted at")
    for field_, v in (("idle_power", g.idle_power_w), ("power_limit_min", g.power_limit_min_w)):
        if v is not None and v >= g.tdp_w:
            raise InputError(w, field_, f"{d[field_]!r} is not below the TDP ({d['tdp']!r})")
    # SM clocks of any GPU built stay in 100 MHz .. 5 GHz; temperatures a junction reports in 40 .. 150 C
    for field_, v in (("boost_clock_mhz", g.boost_clock_mhz), ("max_clock_mhz", g.max_clock_mhz),
                      ("min_clock_mhz", g.min_clock_mhz)):
        if v is not None and not (10.0 if field_ == "min_clock_mhz" else 100.0) <= v <= 5000.0:
            raise InputError(w, field_, f"{d[field_]!r} MHz is outside the SM clocks GPUs run ("
                             f"{'10' if field_ == 'min_clock_mhz' else '100'} .. 5000 MHz)")
    for field_, v in (("slowdown_temp", g.slowdown_temp_c), ("shutdown_temp", g.shutdown_temp_c)):
        if v is not None and not 40.0 <= v <= 150.0:
            raise InputError(w, field_, f"{d[field_]!r} is outside the junction temperatures GPUs act at (40 .. 150 C)")
    return g


def load_gpu(name_or_path: str, flag: str = "gpu") -> GpuSpec:
    """Load hardware/gpus/NAME.yaml (or a path).

    Raises:
        InputError: a bad, unsourced, out-of-range or unknown field (:func:`_check_gpu`).
    """
    path = _resolve(name_or_path, hardware_dir() / "gpus", (".yaml", ".yml"), "GPU", flag)
    d = _read_mapping(path)
    w = str(path)
    refuse_nulls(d, w)
    if "intra_node" in d and "gpus_per_node" in d:
        raise InputError(flag, "", f"{w} is a cluster file (it has intra_node and gpus_per_node): {flag} takes a GPU "
                         "file (hardware/gpus/*.yaml, with peak_tflops) or a catalog GPU name")
    for k in d:
        if k not in GPU_KEYS:
            raise InputError(w, str(k), f"unknown key ({_near(k, GPU_KEYS)}known: {', '.join(GPU_KEYS)})")
    peaks = _sub(d, "peak_tflops", w)
    peak_flops = {}
    for dt, v in peaks.items():
        if dt not in PEAK_FORMATS:
            raise InputError(w, f"peak_tflops.{dt}", f"not a number format the model reads (known: "
                             f"{', '.join(PEAK_FORMATS)})")
        peak_flops[dt] = parse_quantity(v, "number", w, f"peak_tflops.{dt}") * 1e12
        if not peak_flops[dt] > 0:
            raise InputError(w, f"peak_tflops.{dt}", f"must be positive, got {v!r}")
    if not any(k in peak_flops for k in ("bf16", "fp16")):
        raise InputError(w, "peak_tflops", "needs bf16 or fp16 (attention and the logits run 16-bit whatever the "
                         f"precision), got {', '.join(peak_flops) or 'none'}")
    num_sms = _get_int(d, ("num_sms",), w)
    if d.get("architecture") is None:
        raise InputError(w, "architecture", f"missing: one of {', '.join(ARCHITECTURES)} (it decides which attention "
                         "kernels, number formats and expert-parallel kernels the GPU runs)")
    arch, vendor = str(d.get("architecture")), d.get("vendor")
    if arch in ARCHITECTURE_VENDOR and vendor in ("nvidia", "amd") and ARCHITECTURE_VENDOR[arch] != vendor:
        raise InputError(w, "architecture", f"{arch} is an {ARCHITECTURE_VENDOR[arch]} architecture; vendor says {vendor}")
    check_source_keys(d, w, GPU_KEYS)
    _check_sources(d, w, ["peak_tflops", "hbm_capacity", "hbm_bandwidth", "tdp", "num_sms", "slowdown_temp",
                          "power_limit_min"] + [f for f in OPTIONAL_GPU_NUMBERS if f in d])
    return _check_gpu(GpuSpec(
        key=path.stem, name=_get_str(d, "name", w), vendor=_get_str(d, "vendor", w, ("nvidia", "amd")),
        architecture=_get_str(d, "architecture", w, ARCHITECTURES), path=w, peak_flops=peak_flops, hbm_bytes=_get(d, "hbm_capacity", w, "bytes"),
        hbm_bytes_per_s=_get(d, "hbm_bandwidth", w, "bytes_per_s"), tdp_w=_get(d, "tdp", w, "watts"),
        num_sms=num_sms,
        nvlink_bytes_per_s=_get(d, "nvlink_bandwidth_per_gpu", w, "bytes_per_s", required=False,
                                default=0.0),
        sources=dict(d["sources"]),
        # both price the step under the power limit (the thermal and power model), so neither defaults
        slowdown_temp_c=_get(d, "slowdown_temp", w, "celsius"),
        shutdown_temp_c=_shutdown(d, w),
        power_limit_min_w=_get(d, "power_limit_min", w, "watts"),
        boost_clock_mhz=_get(d, "boost_clock_mhz", w, "megahertz", required=False),
        max_clock_mhz=_get(d, "max_clock_mhz", w, "megahertz", required=False),
        min_clock_mhz=_get(d, "min_clock_mhz", w, "megahertz", required=False),
        idle_power_w=_get(d, "idle_power", w, "watts", required=False),
        devices_per_package=_get_int(d, ("devices_per_package",), w, required=False, default=1, maximum=8),
        fit_hbm_bytes_per_s=_get(d, "fit_hbm_bandwidth", w, "bytes_per_s", required=False),
        hbm_cuda_bytes=_cuda_total(d, w)), d, w)


def load_cluster(name_or_path: str, nodes: int | None = None, flag: str = "--cluster") -> ClusterSpec:
    """Load hardware/clusters/NAME.yaml (or a path); ``nodes`` overrides its node count.

    Raises:
        InputError: unknown name, missing/negative/unsourced field, bad GPU reference, nodes < 1.
    """
    path = _resolve(name_or_path, hardware_dir() / "clusters", (".yaml", ".yml"), "cluster", flag)
    d = _read_mapping(path)
    w = str(path)
    refuse_nulls(d, w)
    if "gpu" not in d and "peak_tflops" in d:
        raise InputError(flag, "", f"{w} is a GPU file (it has peak_tflops): {flag} takes a cluster file, whose gpu: "
                         "names the GPU (hardware/README.md)")
    gpu_name = _get_str(d, "gpu", w)
    ref = Path(gpu_name)
    if (ref.suffix in (".yaml", ".yml") or len(ref.parts) > 1) and not ref.is_absolute():
        gpu_name = str(path.parent / ref)        # a relative path in a file is relative to that file
    try:
        gpu = load_gpu(gpu_name, flag=f"{w}: gpu")
    except InputError as e:
        if e.where.endswith(": gpu"):
            raise InputError(w, "gpu", e.message) from None
        raise
    _check_keys(d, w)           # first: a misspelt section is named as such, not as the section it lacks
    intra, inter = _sub(d, "intra_node", w), _sub(d, "inter_node", w)
    power, cooling = _sub(d, "power", w), _sub(d, "cooling", w)
    check_source_keys(d, w, tuple(f"{sec}.{k}" if sec else k for sec, ks in CLUSTER_KEYS.items() for k in ks))
    n_nodes = _get_int(d, ("nodes",), w)
    if nodes is not None:
        if isinstance(nodes, bool) or not isinstance(nodes, numbers.Integral):      # numpy's ints included
            raise InputError("--nodes", "", f"must be a whole number, got {nodes!r}")
        if nodes < 1 or nodes > 2**24:
            raise InputError("--nodes", "", f"must be between 1 and 2^24, got {nodes}")
        n_nodes = nodes
    # the optional numbers too, so one message names every missing source
    _check_sources(d, w, ["gpus_per_node", "nodes", "intra_node.bandwidth_per_gpu", "intra_node.latency",
                          "intra_node.domain_gpus", "inter_node.bandwidth_per_nic", "inter_node.latency",
                          "inter_node.nics_per_node", "inter_node.tiers", "power.node_power_budget",
                          "cooling.inlet_temp"])
    ctype = _get_str(cooling, "type", w, ("air", "liquid"), prefix="cooling.")
    host = _sub(d, "host", w) if d.get("host") is not None else {}
    for k in ("memory_bandwidth", "pcie_bandwidth_per_gpu"):       # 1 GB/s .. 100 TB/s: a host, not a typo
        v = _get(host, k, w, "bytes_per_s", required=False, prefix="host.")
        if in_bits(host.get(k)):
            raise InputError(w, f"host.{k}", _BITS_SLIP.format(v=host[k], what="memory and PCIe bandwidths",
                                                               eg="64GB/s"))
        if v is not None and not 1e9 <= v <= 1e14:
            raise InputError(w, f"host.{k}", f"{host[k]!r} is outside 1 GB/s .. 100 TB/s")
    _check_sources(d, w, [f"host.{k}" for k in ("memory_bandwidth", "pcie_bandwidth_per_gpu") if k in host])
    # the per-slot resistances and the preheat move every temperature: numbers with a source, as the rest
    _check_sources(d, w, [f"cooling.{k}" for k in ("slots", "preheat_c_per_w", "upstream")
                          if isinstance(cooling, dict) and k in cooling])
    domain = domain_gpus(intra, _get_int(d, ("gpus_per_node",), w), d, w)
    tiers = _tiers(inter, d, w)
    if tiers and n_nodes > tiers[-1].nodes:
        raise InputError("--nodes" if nodes is not None else w, "" if nodes is not None else "nodes",
                         f"{n_nodes} nodes exceed the {tiers[-1].nodes} that {w}'s top switch tier "
                         f"({tiers[-1].name}) joins: add a tier above it to model a larger fabric")
    links = link_speeds(intra, inter, w)
    check_intra_link(intra, links["intra_bytes_per_s"], gpu, _get_int(d, ("gpus_per_node",), w), domain, w)
    nics = _get_int({"inter_node.nics_per_node": inter.get("nics_per_node")}, ("inter_node.nics_per_node",), w)
    check_nic_share(nics, links["nic_bytes_per_s"], _get_int(d, ("gpus_per_node",), w), host, w)
    return ClusterSpec(
        key=path.stem, name=_get_str(d, "name", w), description=str(d.get("description", "")), gpu=gpu,
        gpus_per_node=_get_int(d, ("gpus_per_node",), w), nodes=n_nodes,
        intra_fabric=_get_str(intra, "fabric", w, ("nvswitch", "nvlink-mesh", "xgmi-mesh", "xgmi", "pcie"),
                              prefix="intra_node."),
        inter_fabric=_get_str(inter, "fabric", w, SCALE_OUT_FABRICS, prefix="inter_node."),
        nics_per_node=nics,
        **links,
        cooling=_cooling(cooling, ctype, _get_int(d, ("gpus_per_node",), w), w),
        sources=dict(d["sources"]), path=w, **node_power(power, d, gpu, w),
        host_memory_bytes_per_s=_get(host, "memory_bandwidth", w, "bytes_per_s", required=False, prefix="host."),
        host_pcie_bytes_per_s=_get(host, "pcie_bandwidth_per_gpu", w, "bytes_per_s", required=False, prefix="host."),
        domain_gpus=domain, tiers=tiers, sharp=_sharp(inter, d, w))


def _sharp(inter: dict, d: dict, w: str) -> bool:
    """``inter_node.sharp``: true or false (absent: false), with its source when true.

    Raises:
        InputError: not a boolean, true without a ``sources`` line, or true on a fabric other than
            InfiniBand.
    """
    v = inter.get("sharp", False)
    if not isinstance(v, bool):
        raise InputError(w, "inter_node.sharp", f"expected true or false, got {v!r}")
    if v:
        _check_sources(d, w, ["inter_node.sharp"])
        why = sharp_fabric_problem(inter.get("fabric"))
        if why:
            raise InputError(w, "inter_node.sharp", why)
    return v


def sharp_fabric_problem(fabric) -> str:
    """Why a scale-out ``fabric`` cannot reduce in the network ('' for InfiniBand): SHARP runs on NVIDIA's
    InfiniBand (Quantum) switches, driven by NCCL's CollNet through the SHARP plugin (NVIDIA docs "NCCL:
    CollNet"); EFA, RoCE and Ethernet switches have no NCCL in-network reduction."""
    if fabric == "infiniband":
        return ""
    return (f"SHARP (in-network all-reduce) runs on InfiniBand switches through NCCL's CollNet; the scale-out "
            f"fabric is {fabric}")


#: how a tier's flows pick uplinks (FabricTier.routing)
FABRIC_ROUTINGS = ("adaptive", "ecmp")


def _tiers(inter: dict, d: dict, w: str) -> tuple:
    """``inter_node.tiers`` as :class:`FabricTier` (empty when absent), with its source.

    Raises:
        InputError: not a list of mappings, a tier's nodes not a whole multiple of the tier below's,
            an oversubscription below 1 or above 64, a negative latency, an unknown routing, an ECMP
            tier without flows_per_nic (1 .. 4096) or flows_per_nic without ECMP, ``rails`` not a
            boolean, or no sources line.
    """
    raw = inter.get("tiers")
    if raw is None:
        return ()
    if not isinstance(raw, list) or not raw:
        raise InputError(w, "inter_node.tiers", "expected a non-empty list of {name, nodes, oversubscription, latency}")
    out, below = [], 1
    for i, t in enumerate(raw):
        f = f"inter_node.tiers[{i}]"
        if not isinstance(t, dict):
            raise InputError(w, f, f"expected a mapping, got {t!r}")
        nodes = _get_int({f"{f}.nodes": t.get("nodes")}, (f"{f}.nodes",), w, minimum=2, maximum=2**24)
        if nodes % below or nodes <= below:
            raise InputError(w, f"{f}.nodes", f"{nodes} is not a larger whole multiple of the tier below ({below} nodes)")
        o = _get(t, "oversubscription", w, prefix=f"{f}.")
        if not 1.0 <= o <= 64.0:
            raise InputError(w, f"{f}.oversubscription", f"{t['oversubscription']!r} is outside 1 .. 64 (1 = non-blocking)")
        lat = _get(t, "latency", w, "seconds", positive=False, prefix=f"{f}.")
        if not 0.0 <= lat <= 1e-3:          # a switch hop, not a typo for microseconds
            raise InputError(w, f"{f}.latency", f"{t['latency']!r} is outside 0 .. 1 ms")
        name = _get_str(t, "name", w, prefix=f"{f}.").strip()
        if not name or name in [x.name for x in out]:
            raise InputError(w, f"{f}.name", f"{t['name']!r} is empty or names an earlier tier again")
        routing = t.get("routing", "adaptive")
        if routing not in FABRIC_ROUTINGS:
            raise InputError(w, f"{f}.routing", f"{routing!r} is not one of {', '.join(FABRIC_ROUTINGS)}")
        flows = 0
        if routing == "ecmp":
            flows = _get_int({f"{f}.flows_per_nic": t.get("flows_per_nic")}, (f"{f}.flows_per_nic",), w,
                             minimum=1, maximum=4096)
        elif "flows_per_nic" in t:
            raise InputError(w, f"{f}.flows_per_nic", "applies only with routing: ecmp")
        rails = t.get("rails", False)
        if not isinstance(rails, bool):
            raise InputError(w, f"{f}.rails", f"expected true or false, got {rails!r}")
        out.append(FabricTier(name, nodes, o, lat, routing, flows, rails))
        below = nodes
    _check_sources(d, w, ["inter_node.tiers"])
    return tuple(out)


#: the largest share of a GPU's memory ``--mem-headroom`` may keep free
MAX_MEM_HEADROOM = 0.9


def with_fabric(cluster: ClusterSpec, scale_out_gbps: float | None = None,
                oversubscription: float | None = None, sharp: bool | None = None,
                mem_headroom: float | None = None, domain_gpus: int | None = None) -> ClusterSpec:
    """The cluster with a what-if scale-out fabric: every NIC at ``scale_out_gbps`` Gb/s, every switch
    tier's uplinks at ``oversubscription``, in-network all-reduce on or off (``--scale-out-gbps``,
    ``--oversubscription``, ``--sharp/--no-sharp``; None keeps the file's); with ``mem_headroom``
    of each GPU's memory kept free (``--mem-headroom``, a fraction: layouts must fit in the rest); and
    with the job on ``domain_gpus`` GPUs of each multi-node NVLink domain (``--domain-gpus``: 64 of a
    GB200 NVL72 rack's 72, 16 of its 18 trays, so blocks of 16 ranks stay in one rack).

    Raises:
        InputError: a speed outside 1 .. 100,000 Gb/s, an oversubscription outside 1 .. 64, an
            oversubscription asked of a cluster file with no ``inter_node.tiers``, SHARP asked of a
            fabric other than InfiniBand, a headroom outside 0 .. :data:`MAX_MEM_HEADROOM`, or a
            ``domain_gpus`` that is not a whole number of nodes within the file's domain.
    """
    c = cluster
    if domain_gpus is not None:
        full = c.scale_up_gpus
        if full == c.gpus_per_node:
            raise InputError("--domain-gpus", "", f"{c.key}'s NVLink domain is one node of {full} GPUs: the option "
                             "picks the GPUs used of a domain that joins several nodes (GB200 NVL72)")
        if domain_gpus % c.gpus_per_node or not c.gpus_per_node <= domain_gpus <= full:
            raise InputError("--domain-gpus", "", f"{domain_gpus} is not a whole number of {c.gpus_per_node}-GPU nodes "
                             f"from {c.gpus_per_node} to the {full} GPUs of {c.key}'s NVLink domain")
        if domain_gpus != full:
            c = replace(c, domain_gpus=domain_gpus, what_if=", ".join(x for x in (
                c.what_if, f"{domain_gpus} of each NVLink domain's {full} GPUs used") if x))
    if mem_headroom is not None:
        if not 0.0 <= mem_headroom <= MAX_MEM_HEADROOM:
            raise InputError("--mem-headroom", "", f"{mem_headroom:g} is outside 0 .. {MAX_MEM_HEADROOM:g}: the "
                             "share of each GPU's memory to keep free (0.1 = 10%)")
        if mem_headroom > 0:
            g = replace(c.gpu, mem_headroom=mem_headroom)
            c = replace(c, gpu=g, what_if=", ".join(x for x in (c.what_if, (
                f"{100 * mem_headroom:g}% of the HBM kept free, {g.capacity_bytes / 2**30:.1f} of "
                f"{g.total_capacity_bytes / 2**30:.1f} GiB usable")) if x))
    if scale_out_gbps is not None:
        top = MAX_NIC_BYTES_PER_S * 8 / 1e9                 # the fastest NIC announced, as for a cluster file
        if not 1.0 <= scale_out_gbps <= top:
            raise InputError("--scale-out-gbps", "", f"{scale_out_gbps:g} is outside 1 .. {top:,.0f} Gb/s per NIC "
                             "(ConnectX-9's 1.6 Tb/s is the fastest announced)")
        c = replace(c, nic_bytes_per_s=scale_out_gbps * 1e9 / 8,
                    what_if=", ".join(x for x in (c.what_if, f"NICs at {scale_out_gbps:g} Gb/s") if x))
    if oversubscription is not None:
        if not 1.0 <= oversubscription <= 64.0:
            raise InputError("--oversubscription", "", f"{oversubscription:g} is outside 1 .. 64 (1 = non-blocking)")
        if not c.tiers:
            raise InputError("--oversubscription", "", f"{c.path} has no inter_node.tiers: say which switch tier "
                             "is oversubscribed in the cluster file (hardware/README.md), or use a cluster with "
                             "tiers such as dgx-h100-superpod")
        c = replace(c, tiers=tuple(replace(t, oversubscription=oversubscription) for t in c.tiers),
                    what_if=", ".join(x for x in (c.what_if, f"every switch tier {oversubscription:g}:1") if x))
    if sharp and sharp_fabric_problem(c.inter_fabric):
        raise InputError("--sharp", "", f"{sharp_fabric_problem(c.inter_fabric)} ({c.path} inter_node.fabric)")
    if sharp is not None and sharp != c.sharp:
        c = replace(c, sharp=sharp, what_if=", ".join(
            x for x in (c.what_if, "in-network all-reduce (SHARP)" if sharp else "no in-network all-reduce") if x))
    if c.what_if != cluster.what_if and c.num_gpus <= c.scale_up_gpus and (
            scale_out_gbps is not None or oversubscription is not None or sharp is not None):
        c = replace(c, what_if=c.what_if + f" (its {c.num_gpus} GPUs share one NVLink domain: no collective crosses "
                                           "the network, so the network what-ifs change nothing)")
    return c


#: the keys of a cluster file (hardware/README.md), per section; a misspelt key would otherwise be
#: ignored and its value silently replaced by a default
CLUSTER_KEYS = {"": ("name", "description", "gpu", "gpus_per_node", "nodes", "intra_node", "inter_node", "power",
                     "cooling", "host", "sources"),
                "host": ("memory_bandwidth", "pcie_bandwidth_per_gpu"),
                "intra_node": ("fabric", "bandwidth_per_gpu", "latency", "domain_gpus"),
                "inter_node": ("fabric", "nics_per_node", "bandwidth_per_nic", "latency", "tiers", "sharp"),
                "inter_node.tiers[]": ("name", "nodes", "oversubscription", "latency", "routing", "flows_per_nic",
                                       "rails"),
                "power": POWER_KEYS,
                "cooling": ("type", "airflow", "inlet_temp", "slots", "preheat_c_per_w", "upstream"),
                "cooling.slots[]": ("row", "r_th_scale")}


def _near(key, known) -> str:
    """'did you mean K? ' for the known key closest to a misspelt ``key``, '' when none is close."""
    close = difflib.get_close_matches(str(key), list(known), n=1, cutoff=0.75)
    return f"did you mean {close[0]}? " if close else ""


def _check_keys(d: dict, w: str) -> None:
    """Raise InputError naming the first key of a cluster mapping not in :data:`CLUSTER_KEYS`."""
    def check(m, where):
        known = CLUSTER_KEYS[where.split("[")[0] + ("[]" if "[" in where else "")]
        for k in m:
            if k not in known:
                raise InputError(w, f"{where}.{k}" if where else str(k),
                                 f"unknown key ({_near(k, known)}known: {', '.join(known)})")
    check(d, "")
    for sec in ("intra_node", "inter_node", "power", "cooling", "host"):
        if isinstance(d.get(sec), dict):
            check(d[sec], sec)
    slots = (d.get("cooling") or {}).get("slots") if isinstance(d.get("cooling"), dict) else None
    for i, sl in enumerate(slots if isinstance(slots, list) else []):
        if isinstance(sl, dict):
            check(sl, f"cooling.slots[{i}]")
    tiers = (d.get("inter_node") or {}).get("tiers") if isinstance(d.get("inter_node"), dict) else None
    for i, t in enumerate(tiers if isinstance(tiers, list) else []):
        if isinstance(t, dict):
            check(t, f"inter_node.tiers[{i}]")


def _shutdown(d: dict, w: str) -> float | None:
    """The GPU file's ``shutdown_temp`` (C), above its slowdown temperature and with its source; None
    when not given.

    Raises:
        InputError: not a temperature, at or below slowdown_temp, or without a sources line.
    """
    t = _get(d, "shutdown_temp", w, "celsius", required=False)
    if t is None:
        return None
    _check_sources(d, w, ["shutdown_temp"])
    slow = _get(d, "slowdown_temp", w, "celsius", required=False)
    if slow is not None and t <= slow:
        raise InputError(w, "shutdown_temp", f"{t:g} C must be above slowdown_temp {slow:g} C")
    return t
