"""Catalog GPUs whose profile is built from another, fitted GPU: which one, and by which rule.

Two kinds (:data:`VARIANTS`, :data:`POWER_FROM`):

* **Same-die variants** (an A100 PCIe is the A100 SXM's GA100 with 300 W; an H100 NVL the H100's GH100
  with 94 GB and 400 W): GEMM, HBM efficiency, attention and collective efficiencies carry over from
  the sibling (each relative to the variant's own datasheet peak, bandwidth and links), and the power
  coefficients scale term by term with what sets them (:func:`same_die_factors`).  A variant with a
  lower power limit than its sibling then throttles where the sibling does not, through the
  model's own DVFS law: that is how a 300 W A100 PCIe comes out slower than a 400 W SXM on the
  same GEMM (MAMF: 252.9 vs 271.2 TFLOP/s), with no constant of its own.
* **Other dies without power data** (MI250, MI300X, V100, L40S; the B200's terms its own data does
  not fit): every power coefficient is
  the closest fitted architecture's scaled by the TDP ratio (the assumption: a datacenter GPU draws
  its TDP under a dense GEMM at its boost clock; the B200's sustained GEMMs show it can understate the
  dynamic power 1.7x, profiles/b200-sxm-180gb.yaml fit.b200), idle excepted where the GPU file gives
  an idle capture.

Idle (both kinds): where the GPU file and its source give ``idle_power`` (an idle GPU at its lowest
clock, nvidia-smi -q / rocm-smi), ``idle_w`` = the part's own idle capture + (source idle_w - source
idle capture) x TDP ratio: the capture is measured per part, the part of idle_w that a GPU with a
context and its clocks up adds on top of it scales with the board.  Otherwise ``idle_w`` scales
with TDP.
"""
from __future__ import annotations

from dataclasses import dataclass

from costmodel.power import dynamic_power_ratio
from costmodel.specs import GpuSpec

A100, H100 = "a100-sxm-80gb", "h100-sxm-80gb"


@dataclass(frozen=True)
class Variant:
    """A catalog GPU whose compute entries carry over from a fitted GPU.

    Attributes:
        source: the fitted GPU (file stem) whose gemm, hbm, attention and comm entries carry over.
        why: the reason the carry-over holds (each copied entry's ``note``).
        kernels: attention kernels the variant can run (None: all of the source's).
        power: how its power coefficients are made: 'same-die' (the source's die: scaled term by term,
            :func:`same_die_factors`), 'tdp' (another die: the source's scaled by TDP) or 'fitted' (its
            own fit, costmodel/fit/builtin/power.py).
    """

    source: str
    why: str
    kernels: tuple | None = None
    power: str = "same-die"


VARIANTS = {
    "a100-sxm-40gb": Variant(A100, "A100 40GB: the 80GB part's GA100 chip, SMs, clocks, NVLink 3 and NVSwitch; no "
                             "public 40GB microbenchmark is in the set. GEMM, attention and collectives carry over; the "
                             "HBM efficiency is applied to the 40GB part's own datasheet bandwidth (1,555 GB/s, HBM2)",
                             power="fitted"),
    "a800-sxm-80gb": Variant(A100, "A800: the A100 80GB with NVLink cut to 400 GB/s; GEMM, HBM and attention carry "
                             "over, and the collective efficiencies are applied to its own NVLink bandwidth (200 GB/s "
                             "per direction)"),
    "h800-sxm-80gb": Variant(H100, "H800: the H100 SXM5 with NVLink cut to 400 GB/s; GEMM, HBM and attention carry "
                             "over, and the collective efficiencies are applied to its own NVLink bandwidth (200 GB/s "
                             "per direction)"),
    "a100-pcie-80gb": Variant(A100, "A100 PCIe 80GB: the SXM part's GA100 (108 SMs, 1410 MHz) on a 300 W PCIe card "
                              "with HBM2e at 1,935 GB/s; GEMM, HBM and attention efficiencies carry over (the 300 W "
                              "limit is the power model's to apply), collectives are relative to the cluster's PCIe or "
                              "NVLink-bridge bandwidth"),
    "h100-pcie-80gb": Variant(H100, "H100 PCIe: GH100 with 114 of the SXM's 132 SMs, HBM2e at 2.0 TB/s and 350 W; "
                              "GEMM, HBM and attention efficiencies carry over relative to its own peaks (the power "
                              "model applies the 350 W limit), collectives are relative to the cluster's PCIe or "
                              "NVLink-bridge bandwidth"),
    "h100-nvl-94gb": Variant(H100, "H100 NVL: GH100 with the SXM's 132 SMs, 94 GB HBM3 at 3.9 TB/s and 400 W on a "
                             "PCIe card; GEMM, HBM and attention efficiencies carry over relative to its own peaks (the "
                             "power model applies the 400 W limit), collectives are relative to the cluster's PCIe or "
                             "NVLink-bridge bandwidth"),
    "h100-hbm2e-96gb": Variant(H100, "H100 HBM2e 96GB (Meta Grand Teton's first build): an SXM H100 (GH100, 132 SMs "
                               "borrowed) with 96 GB HBM2e at 2.4 TB/s run at a 500 W limit; GEMM, HBM and attention "
                               "efficiencies carry over relative to its own peaks and bandwidth (the power model applies "
                               "the 500 W limit), collectives relative to its own NVLink"),
    "gh200-96gb": Variant(H100, "GH200 (96 GB HBM3): the H100 SXM's GH100 (132 SMs, NVLink 4 at 450 GB/s per "
                          "direction) with 4 TB/s HBM3; GEMM, HBM and attention efficiencies carry over relative to its "
                          "own peaks, collectives relative to its own NVLink"),
    "gb200-186gb": Variant("b200-sxm-180gb", "GB200: the B200's Blackwell GPU (148 SMs, NVLink 5 at 900 GB/s per "
                           "direction) in a Grace superchip with 186 GB HBM3e at 8 TB/s and a 1,200 W limit; GEMM, HBM "
                           "and attention efficiencies carry over relative to its own peaks (2,500 TFLOP/s dense BF16), "
                           "collectives relative to its own NVLink"),
    "b300-sxm-288gb": Variant("b200-sxm-180gb", "B300 (Blackwell Ultra): a revision of the B200's dual-die Blackwell "
                              "(160 SMs, NVLink 5 at 900 GB/s per direction, 288 GB HBM3e at 8 TB/s, 1,100 W) with the "
                              "same dense BF16/FP8 peaks; GEMM, HBM and attention efficiencies carry over relative to its "
                              "own peaks (its doubled attention exponent rate is not credited), collectives relative to "
                              "its own NVLink; power by TDP from the B200's fit (another die revision)", power="tdp"),
    "gb300-288gb": Variant("b200-sxm-180gb", "GB300: the B300's Blackwell Ultra GPU in a Grace superchip (2,500 TFLOP/s "
                           "dense BF16, 288 GB HBM3e at 8 TB/s, 1,400 W); GEMM, HBM and attention efficiencies carry over "
                           "from the B200 relative to its own peaks (its doubled attention exponent rate is not "
                           "credited), collectives relative to its own NVLink; power by TDP from the B200's fit",
                           power="tdp"),
    "l40s": Variant(H100, "L40S: Ada AD102 (142 SMs, GDDR6 at 864 GB/s, PCIe only), no L40S microbenchmark in the "
                    "public set. GEMM shape and efficiency from the H100 fit (both TSMC 4N, 4th-gen tensor cores with "
                    "FP8), applied to the L40S's own dense peaks and bandwidth; FlashAttention-2 from the H100's "
                    "FA2 kernel times (FA3 needs Hopper's wgmma/TMA, so it is not offered); collectives are relative "
                    "to the cluster's PCIe bandwidth", kernels=("fa2",), power="tdp"),
}

#: GPUs with their own compute fit but no power data, and the fitted GPU their power scales from by
#: TDP (Hopper and Blackwell parts from the H100, whose idle is measured; Ampere, Volta and CDNA2 from
#: the A100; CDNA3 from the H100, the fitted part of its process generation)
POWER_FROM = {"b200-sxm-180gb": H100, "mi250": A100, "mi300x": H100, "v100-sxm2-32gb": A100}


def power_source(gpu: str) -> tuple[str, str] | None:
    """``(source GPU, rule)`` of a GPU whose power is derived: rule 'same-die' or 'tdp'; None for a
    fitted GPU (A100, H100, H200)."""
    v = VARIANTS.get(gpu)
    if v is not None and v.power != "fitted":
        return v.source, v.power
    if gpu in POWER_FROM:
        return POWER_FROM[gpu], "tdp"
    return None


def idle_w(g: GpuSpec, src: GpuSpec, src_idle_w: float) -> tuple[float, str]:
    """``idle_w`` of ``g`` from its source's (module docstring) and how it was obtained."""
    k = g.tdp_w / src.tdp_w
    if g.idle_power_w is not None and src.idle_power_w is not None:
        awake = max(src_idle_w - src.idle_power_w, 0.0)
        return (g.idle_power_w + awake * k,
                f"{g.key}'s idle capture {g.idle_power_w:.1f} W + ({src.key} idle_w {src_idle_w:.1f} - its idle capture "
                f"{src.idle_power_w:.1f} W) x {g.tdp_w:.0f}/{src.tdp_w:.0f} W TDP")
    return src_idle_w * k, f"{src.key} idle_w x {g.tdp_w:.0f}/{src.tdp_w:.0f} W TDP (no idle capture of both parts)"


def same_die_factors(g: GpuSpec, src: GpuSpec, gamma: float, v_floor: float) -> dict:
    """Multipliers of the source's coefficients for a same-die variant.

    * flop_w, spin_w: dynamic power ~ SMs x f x V(f)^2 (CMOS switching power); with the fitted DVFS law
      P_dyn(s) ~ g(s) (costmodel/power.py) a part with ``n`` SMs quoting its peak at clock ratio
      ``s = boost_g / boost_src`` draws (n / n_src) g(s) of the source's.
    * hbm_w: per byte moved (the source's energy per byte) x the bandwidth ratio.
    * link_w: per byte on the link x the NVLink bandwidth ratio (1 where either has no NVLink).

    Raises:
        ValueError: the two GPUs lack boost clocks (needed for the clock ratio).
    """
    if not (g.boost_clock_mhz and src.boost_clock_mhz):
        raise ValueError(f"{g.key} and {src.key} need boost_clock_mhz for a same-die power derivation")
    s = g.boost_clock_mhz / src.boost_clock_mhz
    dyn = (g.num_sms / src.num_sms) * float(dynamic_power_ratio(min(s, 1.0), gamma, v_floor)) * max(s, 1.0) ** gamma
    link = (g.nvlink_bytes_per_s / src.nvlink_bytes_per_s) if (g.nvlink_bytes_per_s and src.nvlink_bytes_per_s) else 1.0
    return dict(flop_w=dyn, spin_w=dyn, hbm_w=g.hbm_bytes_per_s / src.hbm_bytes_per_s, link_w=link, clock_ratio=s)


#: (variant, its source, MAMF accelerator row of each): same-die pairs with a measured best GEMM on
#: both, the check of the same-die power rule (:func:`mamf_under_cap`)
MAMF_PAIRS = (("a100-pcie-80gb", A100, "NVIDIA A100 PCIe", "NVIDIA A100 SXM"),
              ("gh200-96gb", H100, "NVIDIA GH200 SXM", "NVIDIA H100 SXM"))


def capped_clock(power: dict, u: float, cap_w: float) -> float:
    """Clock ratio of a GEMM at full-clock tensor utilisation ``u`` under ``cap_w`` (costmodel/power.py)."""
    from costmodel.power import ratio_under_cap
    full = power["idle_w"] + power["flop_w"] * u
    return float(ratio_under_cap(full, cap_w, power.get("static_w", power["idle_w"]), power["gamma"],
                                 power["v_floor_clock_ratio"]))


def mamf_under_cap(src_power: dict, src_tdp_w: float, src_peak: float, src_mamf: float,
                   power: dict, tdp_w: float, peak: float) -> float:
    """The variant's predicted best-GEMM FLOP/s from its source's measured one.

    The source's MAMF (maximum achievable matmul FLOP/s, ml-engineering mamf-finder) ran at its power
    limit: solve its full-clock tensor utilisation u from MAMF = u s(u) peak, where s(u) is the clock
    the power model gives a GEMM drawing idle + flop_w u under the TDP; then the variant, the same die,
    runs that GEMM at the same u under its own limit and coefficients: u s'(u) peak'.  Units: W, FLOP/s.

    Raises:
        ValueError: no utilisation in (0, 1] reproduces the source's MAMF.
    """
    from scipy.optimize import brentq
    target = src_mamf / src_peak
    f = lambda u: u * capped_clock(src_power, u, src_tdp_w) - target  # noqa: E731
    if f(1.0) < 0:
        raise ValueError(f"MAMF {src_mamf:.3g} FLOP/s is above what the power model allows at any utilisation")
    u = brentq(f, 1e-6, 1.0)
    return u * capped_clock(power, u, tdp_w) * peak


def same_die_mamf(src_gemm: dict, src_power: dict, src_tdp_w: float, src_peak: float, src_mamf: float,
                  power: dict, tdp_w: float, peak: float) -> float:
    """A same-die variant's best-GEMM FLOP/s (MAMF) from its source's: a burst (the source's GEMM fit
    says ``power_limited: false``, costmodel/fit/builtin/compute.py) runs at the maximum clock under
    any limit, so it scales with the peak alone; else :func:`mamf_under_cap`.  Units: W, FLOP/s."""
    if not src_gemm.get("power_limited", True):
        return src_mamf * peak / src_peak
    return mamf_under_cap(src_power, src_tdp_w, src_peak, src_mamf, power, tdp_w, peak)
