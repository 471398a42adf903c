"""Fit the built-in hardware profiles from the public measurements in ``calibration/data/public/``.

Run from the repository root::

    python -m calibration.fit_public            # writes hardware/profiles/<gpu>.yaml, prints the fit table

Every input file is a verbatim copy of a published measurement and starts with its source header
(URL, commit, hardware, configuration).  What is fitted (formulas in ``costmodel/gemm.py`` and
``costmodel/collective.py``):

* GEMM (:class:`costmodel.gemm.GemmParams`): ``eta_max``, ``k_half``, ``launch_s`` by
  ``scipy.optimize.least_squares`` on log(time) with the ``soft_l1`` loss, for each of the 9 tile
  sizes in {64,128,256}^2 (the best-cost tile wins); peak FLOP/s, HBM bandwidth and SM count are
  datasheet values (:data:`GPUS`).
* HBM efficiency: mean of the Azure STREAM Copy and Triad bandwidths over the datasheet bandwidth.
* Attention: Azure FlashAttention-2 FLOP/s over the dense 16-bit peak.
* Collectives inside a node (:class:`costmodel.collective.CollectiveParams`, group of 8): NCCL's
  protocol lines (LL, LL128, Simple: latency alpha_p and busbw efficiency eff_p each, time = min over
  protocols) by least squares on log(time) with ``soft_l1`` (nccl-tests busbw is converted to time
  with the nccl-tests bus factor; XLA throughput is algbw, i.e. time = size / throughput).
* Inter-node all-reduce: the inter-scope protocol lines of ``hierarchical_time_s`` (intra scope = the
  fitted intra all-reduce) against 2-node (AWS p5, p4de) and 4-node (AWS p6-b200) sweeps, every
  efficiency at most 1 (the NICs' line rate); see :func:`fit_hierarchical`.

* Power and thermal (``power:``, ``thermal:``): :mod:`calibration.fit_power` (H100 nvidia-smi training
  trace, FlagPerf A100 power/temperature benchmarks, Zeus power-limit sweeps).

The published training-throughput tables (``shared/data/throughput``) are never read here: profiles
are fitted to microbenchmarks only.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np

from costmodel.collective import (COLLECTIVES, busbw_factor, collective_time_s,
                                  effective_busbw, hierarchical_time_s)
from costmodel.gemm import GemmParams, gemm_time_s

from .fit_power import build_power_thermal
from costmodel.specs.profile import dump_profile
from .fitting import (GEMM_BYTES, NVLS_EFF_MAX, FIT_METHOD, coll_entry, fit_collective, fit_gemm,
                      fit_hierarchical, fit_stats, fit_text, gemm_entry, params_of, round_sig)
from costmodel.readers import (read_allreduce_bench, read_azure_results, read_mamf, read_massaged_nccl_table,
                      read_mlengineering_nvls, read_nccl_tests, read_xla_collective_table,
                      read_xla_matmul_table)

REPO = Path(__file__).resolve().parents[1]
DATA = Path(__file__).resolve().parent / "data" / "public"
PROFILES = REPO / "hardware" / "profiles"
GENERATED_BY = "python -m calibration.fit_public"
F = dict(  # input files (copies under calibration/data/public/)
    xla_mm="xla_matmul_perf_table_sm90_sm100.csv", xla_coll="xla_collective_perf_table_sm90_sm100_8gpu.csv",
    mamf="mamf_max_achievable_matmul_tflops.md", azure="azure_nd_a100_h100_h200_gemm_hbm_nvbw_nccl.md",
    gb200="azure_nd_gb200_v6_gemm_nvbw_nccl.md", p5="aws_p5_2node_16xH100_allreduce.txt",
    p4de="aws_p4de_2node_16xA100_allreduce.txt", issues="github_issue_excerpts_partial_tables.txt",
    liplus="liplus_a100_8gpu_sendrecv.txt", mleng_a100="mlengineering_a100_8gpu_nvlink_allreduce.txt",
    mleng_bench="mlengineering_allreduce_bench_h200_b200_pytorch.md",
    mleng_nvls="mlengineering_h200_b200_nvls_and_collectives.md")

# Datasheet values (dense tensor-core peak FLOP/s per dtype, HBM B/s, SMs/CUs, intra-node link B/s per
# GPU per direction).  MI250 is described per GCD (the unit a framework sees as one device).
GPUS = {
    "a100-sxm-80gb": dict(peak={"bf16": 312e12, "fp16": 312e12}, hbm=2.039e12, sms=108, link=300e9,
                          source="NVIDIA A100 datasheet (SXM4 80GB): 312 TF dense BF16/FP16, 2,039 GB/s, "
                                 "108 SMs, NVLink3 600 GB/s bidirectional"),
    "h100-sxm-80gb": dict(peak={"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12}, hbm=3.35e12, sms=132,
                          link=450e9, source="NVIDIA H100 datasheet (SXM5): dense = sparse/2, 3.35 TB/s, "
                                             "132 SMs, NVLink4 900 GB/s bidirectional"),
    "h200-sxm-141gb": dict(peak={"bf16": 989.4e12, "fp16": 989.4e12, "fp8": 1978.9e12}, hbm=4.8e12, sms=132,
                           link=450e9, source="NVIDIA H200 datasheet (SXM): H100 compute, 4.8 TB/s HBM3e, "
                                              "NVLink4 900 GB/s bidirectional"),
    "b200-sxm-180gb": dict(peak={"bf16": 2250e12, "fp16": 2250e12, "fp8": 4500e12}, hbm=8e12, sms=148,
                           link=900e9, source="NVIDIA HGX B200 datasheet: 2.25 PF dense BF16, 4.5 PF dense FP8, "
                                              "8 TB/s, 148 SMs, NVLink5 1.8 TB/s bidirectional"),
    "mi250": dict(peak={"bf16": 181e12, "fp16": 181e12}, hbm=1.6e12, sms=104, link=None,
                  source="AMD Instinct MI250 datasheet: 362.1 TF BF16/FP16 per OAM = 181 per GCD, "
                         "3.2 TB/s per OAM = 1.6 per GCD, 104 CUs per GCD"),
    "v100-sxm2-32gb": dict(peak={"fp16": 125e12}, hbm=0.9e12, sms=80, link=150e9,
                           source="NVIDIA V100 SXM2 datasheet: 125 TF FP16 tensor, 900 GB/s, 80 SMs, "
                                  "NVLink2 300 GB/s bidirectional"),
}


def _p(key):
    """Absolute path of input ``key`` of :data:`F`."""
    return DATA / F[key]


def _rel(key):
    """Repo-relative path string of input ``key`` (what the profile's provenance lists)."""
    return f"calibration/data/public/{F[key]}"


def _pts(rows, src):
    """Rows with b (default 1), m, n, k, time_s -> arrays dict for :func:`fit_gemm`."""
    return dict(b=[r.get("b", 1) for r in rows], m=[r["m"] for r in rows], n=[r["n"] for r in rows],
                k=[r["k"] for r in rows], t=[r["time_s"] for r in rows], src=[src] * len(rows))


def _cat(*ds):
    return {c: sum((list(d[c]) for d in ds), []) for c in ("b", "m", "n", "k", "t", "src")}


def _mamf_point(mamf, accel, dtype):
    """One MAMF best-shape measurement as a GEMM point (time = 2mnk / MAMF)."""
    r = next(x for x in mamf if x["accelerator"] == accel and x["dtype"] == dtype)
    return [dict(m=r["m"], n=r["n"], k=r["k"], time_s=2.0 * r["m"] * r["n"] * r["k"] / r["mamf_flops"])]


# ------------------------------------------------------------------------------------- datasets
def load_public():
    """Read every public input once.

    Returns:
        dict of parsed tables (see the readers in :mod:`calibration.readers`).
    Raises:
        whatever the readers raise on a malformed file (file and line named).
    """
    return dict(mamf=read_mamf(_p("mamf")), azure=read_azure_results(_p("azure")),
                gb200=read_azure_results(_p("gb200"))["ND GB200 v6"],
                xla_mm={a: {c: read_xla_matmul_table(_p("xla_mm"), a, c)
                            for c in ("bf16xbf16->bf16", "f8e4m3fnxf8e4m3fn->bf16")} for a in ("sm_90", "sm_100")},
                xla_coll={a: read_xla_collective_table(_p("xla_coll"), a) for a in ("sm_90", "sm_100")},
                p5=read_nccl_tests(_p("p5")), p4de=read_nccl_tests(_p("p4de")),
                issues=read_nccl_tests(_p("issues")), liplus=read_nccl_tests(_p("liplus")),
                mleng_a100=read_massaged_nccl_table(_p("mleng_a100")),
                bench=read_allreduce_bench(_p("mleng_bench")), nvls=read_mlengineering_nvls(_p("mleng_nvls")))


def _xla_coll(D, arch, coll):
    """(n, t, src) of one collective from the XLA table: single group of 8 (all permute rows)."""
    rows = [r for r in D["xla_coll"][arch] if r["collective"] == coll
            and (coll == "send_recv" or (r["num_groups"] == 1 and r["group_size"] == 8))]
    return [r["size_bytes"] for r in rows], [r["time_s"] for r in rows], ["xla_coll"] * len(rows)


def _busbw_pts(coll, sizes, busbw, src, g=8):
    """nccl-tests busbw (B/s) -> time: t = f(g) * size / busbw."""
    f = float(busbw_factor(coll, g))
    return list(map(float, sizes)), [f * s / b for s, b in zip(sizes, busbw)], [src] * len(sizes)


def _join(*parts):
    n, t, s = [], [], []
    for a, b, c in parts:
        n, t, s = n + list(a), t + list(b), s + list(c)
    return n, t, s


# ------------------------------------------------------------------------------------- profiles
def build_profiles(D=None):
    """Fit everything and return ``(profiles, summary)``.

    Args:
        D: output of :func:`load_public` (loaded when None).
    Returns:
        profiles: dict gpu stem -> profile dict in the ``hardware/README.md`` schema.
        summary: list of (kind, gpu, item, text) rows for the printed fit table.
    """
    D = D or load_public()
    prof = {g: dict(gpu=g, provenance=dict(generated_by=GENERATED_BY, inputs=set(), notes=[],
                                           datasheet=dict(peak_flops_per_s={k: round_sig(v) for k, v in GPUS[g]["peak"].items()},
                                                          hbm_bytes_per_s=round_sig(GPUS[g]["hbm"]), num_sms=GPUS[g]["sms"],
                                                          intra_link_bytes_per_s=round_sig(GPUS[g]["link"]) if GPUS[g]["link"] else None,
                                                          source=GPUS[g]["source"])),
                    gemm={}, hbm={}, attention={}, comm=dict(intra_node={}, inter_node={})) for g in GPUS}
    summary = []

    def use(g, *keys):
        prof[g]["provenance"]["inputs"].update(_rel(k) for k in keys)

    def note(g, text):
        prof[g]["provenance"]["notes"].append(text)

    az = D["azure"]
    AZ = {"a100-sxm-80gb": "ND A100 v4", "h100-sxm-80gb": "ND H100 v5", "h200-sxm-141gb": "ND H200 v5"}

    # ---- HBM ----
    for g, sysname in AZ.items():
        h = az[sysname]["hbm"]
        copy, triad = h["Copy"] / GPUS[g]["hbm"], h["Triad"] / GPUS[g]["hbm"]
        prof[g]["hbm"] = dict(efficiency=round_sig((copy + triad) / 2), fit=dict(
            n_points=2, copy_efficiency=round_sig(copy, 3), triad_efficiency=round_sig(triad, 3),
            median_rel_err=round_sig(abs(copy - triad) / (copy + triad), 3),
            max_rel_err=round_sig(abs(copy - triad) / (copy + triad), 3),
            method="mean of STREAM Copy and Triad over the datasheet bandwidth", inputs=[_rel("azure")]))
        use(g, "azure")
        summary.append(("hbm", g, "efficiency", f"{(copy + triad) / 2:.3f} (copy {copy:.3f}, triad {triad:.3f})"))
    derived_hbm = {"b200-sxm-180gb": ("h200-sxm-141gb", "no HBM result in the Azure GB200 file; taken from "
                                      "H200 (HBM3e as well)"),
                   "mi250": ("a100-sxm-80gb", "no MI250 STREAM data in the public set; taken from A100 (HBM2e)"),
                   "v100-sxm2-32gb": ("a100-sxm-80gb", "no V100 STREAM data in the public set; taken from A100")}
    for g, (src, why) in derived_hbm.items():
        prof[g]["hbm"] = dict(efficiency=prof[src]["hbm"]["efficiency"], derived_from=f"{src}:hbm", note=why)
        summary.append(("hbm", g, "efficiency", f"{prof[g]['hbm']['efficiency']} derived from {src}"))

    # ---- GEMM ----
    mamf = D["mamf"]
    xla = D["xla_mm"]

    def gemm(g, dtype, pts, keys, notes=(), hbm_of=None):
        gg = GPUS[hbm_of or g]
        src = np.array(pts["src"])
        mm = src == "mamf"   # the brute-force maximum bounds eta_max (see fit_gemm)
        cap = float(np.max(2 * np.asarray(pts["b"])[mm] * np.asarray(pts["m"])[mm] * np.asarray(pts["n"])[mm]
                           * np.asarray(pts["k"])[mm] / np.asarray(pts["t"])[mm])) / GPUS[g]["peak"][dtype] \
            if mm.any() else 1.0
        p, tmod = fit_gemm(pts, GPUS[g]["peak"][dtype], gg["hbm"], prof[hbm_of or g]["hbm"]["efficiency"],
                           GPUS[g]["sms"], GEMM_BYTES[dtype], eta_cap=cap)
        per = {s: round_sig(np.median(np.abs(tmod[src == s] / np.asarray(pts["t"])[src == s] - 1)), 3) for s in dict.fromkeys(src)}
        fit = fit_stats(tmod, pts["t"], [_rel(k) for k in keys], median_rel_err_by_source=per,
                     method="least_squares soft_l1 on log time; tile chosen among {64,128,256}^2; "
                            f"eta_max bounded by the MAMF maximum {cap:.3f}")
        e = dict(note=" ".join(notes)) if notes else {}
        prof[g]["gemm"][dtype] = gemm_entry(p, fit, **e)
        use(g, *keys)
        summary.append(("gemm", g, dtype, f"n={fit['n_points']:4d} median {fit['median_rel_err']:.3f} max "
                        f"{fit['max_rel_err']:.3f} R2 {fit['r2']:.3f}  eta_max {p.eta_max:.3f} k_half {p.k_half:.0f} "
                        f"launch {p.launch_s * 1e6:.2f}us tile {p.tile_m}x{p.tile_n}"))
        return p

    sm90 = _cat(_pts(xla["sm_90"]["bf16xbf16->bf16"], "xla_mm"), _pts(_mamf_point(mamf, "NVIDIA H100 SXM", "bf16"), "mamf"))
    gemm("h100-sxm-80gb", "bf16", sm90, ("xla_mm", "mamf"),
         ["XLA sm_90 bf16 table (375 shapes, H100 80GB HBM3) + MAMF H100 SXM best shape (794.5 TFLOP/s)."])
    gemm("h200-sxm-141gb", "bf16", sm90, ("xla_mm", "mamf"),
         ["Same data and fit as h100-sxm-80gb: MAMF states 'H200 is the same' for BF16 and the compute die is",
          "identical; the XLA sm_90 table was measured on H100 HBM3, so the fit uses H100's HBM roofline.",
          "The Azure ND H200 cuBLASLt rows are FP8 and feed gemm.fp8."], hbm_of="h100-sxm-80gb")
    gemm("b200-sxm-180gb", "bf16", _cat(_pts(xla["sm_100"]["bf16xbf16->bf16"], "xla_mm"),
                                        _pts(_mamf_point(mamf, "NVIDIA B200 SXM", "bf16"), "mamf")),
         ("xla_mm", "mamf"), ["XLA sm_100 bf16 table (375 shapes, B200) + MAMF B200 SXM best shape (1745 TFLOP/s)."])
    a100 = gemm("a100-sxm-80gb", "bf16", _cat(_pts(az["ND A100 v4"]["gemm"], "azure"),
                                              _pts(_mamf_point(mamf, "NVIDIA A100 SXM", "bf16"), "mamf")),
                ("azure", "mamf"), ["Azure ND A100 v4 cuBLASLt FP16 rows + MAMF A100 SXM BF16 best shape; FP16 and",
                                    "BF16 share the 312 TFLOP/s tensor-core peak on A100, so one joint fit serves both."])
    prof["a100-sxm-80gb"]["gemm"]["fp16"] = dict(prof["a100-sxm-80gb"]["gemm"]["bf16"])
    for g, sysname, accel in (("h100-sxm-80gb", "ND H100 v5", "NVIDIA H100 SXM"),
                              ("h200-sxm-141gb", "ND H200 v5", "NVIDIA H200 SXM")):
        gemm(g, "fp8", _cat(_pts(az[sysname]["gemm"], "azure"), _pts(_mamf_point(mamf, accel, "fp8"), "mamf")),
             ("azure", "mamf"), [f"Azure {sysname} cuBLASLt FP8 rows + MAMF {accel} FP8 (e4m3) best shape.",
                                 "XLA sm_90 FP8 columns excluded: they reach 2.6 PFLOP/s, above the 1.979 PFLOP/s "
                                 "dense FP8 peak, so they are not single-GEMM times (file header caveat)."])
    b8 = gemm("b200-sxm-180gb", "fp8", _cat(_pts(xla["sm_100"]["f8e4m3fnxf8e4m3fn->bf16"], "xla_mm"),
                                            _pts(_mamf_point(mamf, "NVIDIA B200 SXM", "fp8"), "mamf")),
              ("xla_mm", "mamf"), ["XLA sm_100 e4m3 x e4m3 -> bf16 table + MAMF B200 SXM FP8. The sm_100 FP8 column",
                                   "peaks at 3.28 PFLOP/s = 73% of the 4.5 PFLOP/s dense peak, consistent with MAMF",
                                   "(76%), so unlike sm_90 FP8 it is used. Azure's FP8 rows are GB200 (5 PFLOP/s",
                                   "dense FP8, 1200 W), a different SKU: used as a cross-check only (see notes)."])
    gb = D["gb200"]["gemm"]
    tgb = gemm_time_s([r["m"] for r in gb], [r["n"] for r in gb], [r["k"] for r in gb], 1, 5000e12, 8e12,
                      prof["b200-sxm-180gb"]["hbm"]["efficiency"], b8, 1.0)
    egb = np.abs(tgb / np.array([r["time_s"] for r in gb]) - 1)
    note("b200-sxm-180gb", f"cross-check: gemm.fp8 with the GB200 dense FP8 peak (5 PFLOP/s) predicts the Azure ND GB200 "
                           f"v6 cuBLASLt FP8 rows with median {np.median(egb):.3f}, max {egb.max():.3f} relative time error.")
    use("b200-sxm-180gb", "gb200")
    for g in ("h100-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb"):
        prof[g]["gemm"]["fp16"] = dict({k: v for k, v in prof[g]["gemm"]["bf16"].items() if k not in ("fit", "note")},
                                       derived_from=f"{g}:gemm.bf16",
                                       note="FP16 and BF16 have the same dense tensor-core peak; no separate FP16 table.")
    prof["v100-sxm2-32gb"]["gemm"]["fp16"] = gemm_entry(
        GemmParams(a100.eta_max, a100.k_half, a100.launch_s, a100.tile_m, a100.tile_n, 80),
        derived_from="a100-sxm-80gb:gemm.bf16",
        note="No V100 GEMM table in the public data: A100 fitted eta_max/k_half/launch/tile with the V100's 80 SMs "
             "and 125 TFLOP/s FP16 tensor peak. V100 has no BF16 tensor cores, so there is no bf16 entry.")
    mi = next(r for r in mamf if r["accelerator"] == "AMD MI300X" and r["dtype"] == "bf16")
    eta_mi = mi["mamf_flops"] / mi["theory_flops"]
    for dt in ("bf16", "fp16"):
        prof["mi250"]["gemm"][dt] = gemm_entry(
            GemmParams(eta_mi, a100.k_half, a100.launch_s, a100.tile_m, a100.tile_n, 104),
            derived_from="a100-sxm-80gb:gemm.bf16 (shape) + MAMF AMD MI300X (eta_max)",
            note=f"No MI250 GEMM data: eta_max = MAMF MI300X BF16 efficiency {mi['mamf_flops'] / 1e12:.1f}/"
                 f"{mi['theory_flops'] / 1e12:.0f} = {eta_mi:.3f} (closest measured AMD CDNA part); k_half, launch, "
                 "tile from the A100 fit; 104 CUs and 181 TFLOP/s per GCD.")
    use("mi250", "mamf")
    use("v100-sxm2-32gb", "azure", "mamf")
    summary.append(("gemm", "v100-sxm2-32gb", "fp16", "derived from a100 bf16 (num_sms 80)"))
    summary.append(("gemm", "mi250", "bf16/fp16", f"derived: eta_max {eta_mi:.3f} (MAMF MI300X), A100 shape"))

    # ---- attention ----
    for g, sysname in AZ.items():
        a = az[sysname]["attention"]
        eff = a["flash_attention_2"] / GPUS[g]["peak"]["bf16"]
        prof[g]["attention"] = dict(flash_efficiency=round_sig(eff), fit=dict(
            n_points=1, measured_flops_per_s=round_sig(a["flash_attention_2"]), head_dim=a["head_dim"], batch=2, seq_len=8192,
            method="Azure FlashAttention-2 TFLOP/s over the dense 16-bit peak", inputs=[_rel("azure")]))
        summary.append(("attention", g, "flash_eff", f"{eff:.3f} (FA2 {a['flash_attention_2'] / 1e12:.1f} TF, hd {a['head_dim']})"))
    txt = _p("mamf").read_text()
    speed = float(re.search(r"fwd\+bwd (\d+\.\d+)x @ 8k", txt).group(1))
    h200a = prof["h200-sxm-141gb"]["attention"]["flash_efficiency"]
    b_eff = h200a * speed * GPUS["h200-sxm-141gb"]["peak"]["bf16"] / GPUS["b200-sxm-180gb"]["peak"]["bf16"]
    gb_fa = D["gb200"]["attention"]["flash_attention_2"]
    prof["b200-sxm-180gb"]["attention"] = dict(
        flash_efficiency=round_sig(b_eff), derived_from="h200-sxm-141gb:attention",
        note=f"H200 FA2 efficiency x ml-engineering B200/H200 isolated-attention speedup {speed}x at 8k (FA4 vs FA3) x "
             f"989.4/2250 peak ratio. Azure GB200 FlashAttention-2 measures {gb_fa / 1e12:.1f} TFLOP/s = "
             f"{gb_fa / 2500e12:.3f} of GB200's 2.5 PFLOP/s, but FA2 does not use Blackwell's tcgen05 tensor cores, "
             "so it is not representative of training kernels; it is a lower bound.")
    use("b200-sxm-180gb", "mamf", "gb200")
    a100a = az["ND A100 v4"]["attention"]
    prof["v100-sxm2-32gb"]["attention"] = dict(
        flash_efficiency=round_sig(a100a["standard"] / 312e12), derived_from="a100-sxm-80gb:attention (standard attention)",
        note="FlashAttention-2 does not support Volta (sm_70); V100 training runs unfused attention, so the A100 "
             f"PyTorch standard-attention efficiency ({a100a['standard'] / 1e12:.1f}/312 TFLOP/s) is used.")
    mi_eff = prof["a100-sxm-80gb"]["attention"]["flash_efficiency"] * eta_mi / a100.eta_max
    prof["mi250"]["attention"] = dict(
        flash_efficiency=round_sig(mi_eff), derived_from="a100-sxm-80gb:attention",
        note="No MI250 attention data: A100 FA2 efficiency scaled by the GEMM eta_max ratio (MI250/A100), since "
             "fused attention is matmul-bound.")
    for g in ("b200-sxm-180gb", "v100-sxm2-32gb", "mi250"):
        summary.append(("attention", g, "flash_eff", f"{prof[g]['attention']['flash_efficiency']} derived"))

    # ---- intra-node collectives ----
    xs = {}

    def intra(g, coll, parts, keys, algorithm, group_size=8, notes=(), fix=None, nproto=3):
        n, t, s = _join(*parts)
        link = GPUS[g]["link"]
        eff_max = NVLS_EFF_MAX if (algorithm == "nvls" and coll == "all_reduce") else 1.0
        p, tm, xs[g, coll] = fit_collective(coll, n, t, group_size, link, eff_max, fix, nproto)
        src = np.array(s)
        per = {k: round_sig(np.median(np.abs(tm[src == k] / np.asarray(t)[src == k] - 1)), 3) for k in dict.fromkeys(s)}
        fit = fit_stats(tm, t, [_rel(k) for k in keys], n, median_rel_err_by_source=per, link_bytes_per_s=round_sig(link),
                     busbw_efficiency_at_max_size=round_sig(effective_busbw(max(n), link, p, coll, group_size) / link, 3),
                     method=FIT_METHOD + (f"; parameters {sorted(fix)} fixed" if fix else ""))
        e = dict(group_size=group_size, algorithm=algorithm)
        if notes:
            e["note"] = " ".join(notes)
        prof[g]["comm"]["intra_node"][coll] = coll_entry(p, fit, **e)
        use(g, *keys)
        summary.append(("intra", g, coll, fit_text(p, fit)))
        return p

    def azure_ar(sysname):
        d = az[sysname]["nccl"]
        return _busbw_pts("all_reduce", d["sizes"], d["busbw"], "azure")

    bench = {t["heading"][:3]: t for t in D["bench"]}
    nv = D["nvls"]
    # H100
    ph = intra("h100-sxm-80gb", "all_reduce", [azure_ar("ND H100 v5")], ["azure"], "nvls",
               notes=["Azure ND H100 v5 all_reduce_perf sweep 1 KiB..8 GiB (NVLS, in-place busbw; Azure size labels",
                      "are rounded powers of two). NVLS is NCCL's default for one 8x H100 NVSwitch node."])
    for coll in ("all_gather", "reduce_scatter", "all_to_all", "send_recv"):
        intra("h100-sxm-80gb", coll, [_xla_coll(D, "sm_90", coll)], ["xla_coll"],
              "p2p" if coll == "send_recv" else "ring",
              group_size=2 if coll == "send_recv" else 8,
              notes=["XLA sm_90 8-GPU table (F32; throughput = size/time = algbw)."
                     + (" collective-permute rows (4 and 8 concurrent pairs) as send/recv; busbw = algbw."
                        if coll == "send_recv" else " Single replica group of 8.")])
    n, t, _ = _xla_coll(D, "sm_90", "all_reduce")
    ex = np.abs(collective_time_s("all_reduce", n, 8, 450e9, ph) / np.array(t) - 1)
    ext = np.abs(t[-1] / collective_time_s("all_reduce", n[-1], 8, 450e9, ph) - 1)
    note("h100-sxm-80gb", f"cross-check: XLA sm_90 8-GPU F32 all-reduce vs the NVLS fit: median {np.median(ex):.3f}, max "
                          f"{ex.max():.3f} time error; at 2 GiB XLA reaches {1.75 * n[-1] / t[-1] / 1e9:.0f} GB/s busbw "
                          f"({ext:.0%} below the NVLS fit), between ring (367 GB/s on H200) and NVLS; XLA's algorithm "
                          "is not recorded, so that table is not fitted.")
    iss = D["issues"].rows
    pb = float(collective_time_s("all_reduce", 16 * 2 ** 30, 8, 450e9, ph))
    note("h100-sxm-80gb", f"cross-check (github_issue_excerpts, nccl-tests#212, NVIDIA maintainer): 8x H100 NVLS peak "
                          f"busbw ~480 GB/s; this fit gives {1.75 * 16 * 2 ** 30 / pb / 1e9:.0f} GB/s at 16 GiB.")
    a2a = next(r for r in iss if r.placement == "out-of-place" and r.size_bytes == 524288000)
    p_a2a = params_of(prof["h100-sxm-80gb"]["comm"]["intra_node"]["all_to_all"])
    tm = float(collective_time_s("all_to_all", a2a.size_bytes, 4, 450e9, p_a2a))
    note("h100-sxm-80gb", f"cross-check (nccl#2169): 4x H100 all-to-all 500 MB Ring/Simple busbw {a2a.busbw:.1f} GB/s; "
                          f"intra all_to_all at group 4 predicts {0.75 * a2a.size_bytes / tm / 1e9:.1f} GB/s.")
    p_sr = params_of(prof["h100-sxm-80gb"]["comm"]["intra_node"]["send_recv"])
    tm = float(collective_time_s("send_recv", 2 ** 30, 2, 450e9, p_sr))
    note("h100-sxm-80gb", f"cross-check (nccl#1264): p2pBandwidthLatencyTest unidirectional H100 NVLink 371-377 GB/s; "
                          f"send_recv fit gives {2 ** 30 / tm / 1e9:.0f} GB/s at 1 GiB (NCCL p2p via XLA permute).")
    use("h100-sxm-80gb", "issues")
    # H200
    h200 = [azure_ar("ND H200 v5"),
            _busbw_pts("all_reduce", bench["(a)"]["size_bytes"], bench["(a)"]["columns"]["busbw"], "mleng_bench"),
            _busbw_pts("all_reduce", [r["size_bytes"] for r in nv["gpu_sweep"]["H200"] if r["gpus"] == 8],
                       [r["busbw"] for r in nv["gpu_sweep"]["H200"] if r["gpus"] == 8], "mleng_nvls"),
            _busbw_pts("all_reduce", [r["size_bytes"] for r in nv["collectives"]["H200"] if r["collective"] == "all_reduce" and r["algo"] == "nvls"],
                       [r["busbw"] for r in nv["collectives"]["H200"] if r["collective"] == "all_reduce" and r["algo"] == "nvls"], "mleng_nvls")]
    intra("h200-sxm-141gb", "all_reduce", h200, ["azure", "mleng_bench", "mleng_nvls"], "nvls",
          notes=["Azure ND H200 v5 sweep (NVLS) + ml-engineering all_reduce_bench.py 8x H200 (NVLS from 2 MiB) +",
                 "all_reduce_perf NVLS points at 8 and 16 GiB. Ring (NCCL_NVLS_ENABLE=0) reaches 367 GB/s (0.82)."])
    for coll in ("all_gather", "reduce_scatter"):
        r = [x for x in nv["collectives"]["H200"] if x["collective"] == coll]
        intra("h200-sxm-141gb", coll, [_xla_coll(D, "sm_90", coll),
                                       _busbw_pts(coll, [x["size_bytes"] for x in r], [x["busbw"] for x in r], "mleng_nvls")],
              ["xla_coll", "mleng_nvls"], "ring",
              notes=[f"XLA sm_90 8-GPU table (measured on H100: same NVLink4/NVSwitch fabric as H200) + the 8x H200 "
                     f"16 GiB all_{coll.split('_')[1]}_perf point ({r[0]['busbw'] / 1e9:.1f} GB/s, ring)."])
    for coll in ("all_to_all", "send_recv"):
        prof["h200-sxm-141gb"]["comm"]["intra_node"][coll] = dict(
            prof["h100-sxm-80gb"]["comm"]["intra_node"][coll], derived_from=f"h100-sxm-80gb:comm.intra_node.{coll}",
            note="No H200 data; H200 has the H100's NVLink4/NVSwitch fabric (450 GB/s per direction).")
        prof["h200-sxm-141gb"]["comm"]["intra_node"][coll].pop("fit")
    # A100
    m = D["mleng_a100"]
    intra("a100-sxm-80gb", "all_reduce", [azure_ar("ND A100 v4"),
                                          _busbw_pts("all_reduce", [r["size_bytes"] for r in m], [r["busbw"] * 1e9 for r in m], "mleng_a100")],
          ["azure", "mleng_a100"], "ring",
          notes=["Azure ND A100 v4 sweep + ml-engineering 8x A100 all_reduce_perf (out-of-place). Azure's text says",
                 "'NVLS' (template shared with H100/H200) but A100's NVSwitch has no NVLink SHARP: ring/tree."])
    ls = D["liplus"].select()
    xh = xs["h100-sxm-80gb", "send_recv"]
    kh = len(xh) // 2
    intra("a100-sxm-80gb", "send_recv", [([r.size_bytes for r in ls], [r.time_us * 1e-6 for r in ls], ["liplus"] * len(ls))],
          ["liplus"], "p2p", group_size=2, fix={i: float(xh[i]) for i in range(2 * kh) if i not in (kh - 1, kh)}, nproto=kh,
          notes=["li-plus sendrecv_perf -g 8 on 8x A100 NVLink, 128 MiB..1 GiB only (4 points, all Simple): the",
                 "latencies of the faster protocols and their efficiency ratios to Simple are fixed to the H100",
                 "send_recv fit (NCCL p2p); only Simple's latency and efficiency are fitted; below 128 MiB the",
                 "fit is extrapolated."])
    par = prof["a100-sxm-80gb"]["comm"]["intra_node"]["all_reduce"]
    for coll in ("all_gather", "reduce_scatter", "all_to_all"):
        prof["a100-sxm-80gb"]["comm"]["intra_node"][coll] = dict(
            {k: v for k, v in par.items() if k not in ("fit", "note")}, derived_from="a100-sxm-80gb:comm.intra_node.all_reduce",
            note="No A100 data: ring all-gather / reduce-scatter / all-to-all reach the same nccl-tests busbw as ring "
                 "all-reduce on NVSwitch (8x H200: ring AR 367.2, AG 361.4, RS 362.9 GB/s; XLA sm_90 2 GiB: AG "
                 "352, A2A 340 GB/s busbw), so the A100 ring all-reduce parameters are used.")
    # B200
    b = bench["(b)"]
    intra("b200-sxm-180gb", "all_reduce",
          [_xla_coll(D, "sm_100", "all_reduce"),
           _busbw_pts("all_reduce", b["size_bytes"], b["columns"]["1 node"], "mleng_bench"),
           _busbw_pts("all_reduce", [r["size_bytes"] for r in nv["gpu_sweep"]["B200"] if r["gpus"] == 8],
                      [r["busbw"] for r in nv["gpu_sweep"]["B200"] if r["gpus"] == 8], "mleng_nvls")],
          ["xla_coll", "mleng_bench", "mleng_nvls"], "nccl-default (ring below ~4 GiB, NVLS at >= 8 GiB)",
          notes=["XLA sm_100 8-GPU F32 all-reduce + ml-engineering all_reduce_bench.py on 1 p6-b200 node + the",
                 "8-GPU 8 GiB NVLS point (838 GB/s; ring with NVLS off: 682 GB/s). No clean single-algorithm sweep",
                 "exists for B200, so NCCL's default choice is fitted."])
    for coll in ("all_gather", "reduce_scatter", "all_to_all", "send_recv"):
        intra("b200-sxm-180gb", coll, [_xla_coll(D, "sm_100", coll)], ["xla_coll"],
              "p2p" if coll == "send_recv" else "ring", group_size=2 if coll == "send_recv" else 8,
              notes=["XLA sm_100 8-GPU table (F32; throughput = algbw)."])
    # MI250, V100: no data
    for g, why in (("mi250", "No MI250 collective data: A100 (ring, no NVLS) parameters; efficiency is relative to "
                              "the cluster's xGMI bandwidth per GCD (RCCL over Infinity Fabric)."),
                   ("v100-sxm2-32gb", "No V100 collective data: A100 (ring, no NVLS) parameters; efficiency is "
                                      "relative to NVLink2 (150 GB/s per direction on SXM2).")):
        for coll in COLLECTIVES:
            src = prof["a100-sxm-80gb"]["comm"]["intra_node"][coll]
            prof[g]["comm"]["intra_node"][coll] = dict({k: v for k, v in src.items() if k not in ("fit", "note", "derived_from")},
                                                       derived_from=f"a100-sxm-80gb:comm.intra_node.{coll}", note=why)
        summary.append(("intra", g, "all", "derived from a100-sxm-80gb"))
    summary.append(("intra", "h200-sxm-141gb", "all_to_all/send_recv", "derived from h100-sxm-80gb"))
    summary.append(("intra", "a100-sxm-80gb", "all_gather/reduce_scatter/all_to_all", "derived from a100 all_reduce"))

    # ---- inter-node all-reduce ----
    def inter(g, key_or_rows, keys, ranks_per_node, n_nodes, nic_text, inter_bps, notes=()):
        if isinstance(key_or_rows, str):
            rows = D[key_or_rows].select()
            n, t = [r.size_bytes for r in rows], [r.time_us * 1e-6 for r in rows]
        else:
            n, t = key_or_rows
        pin = params_of(prof[g]["comm"]["intra_node"]["all_reduce"])
        p, tm = fit_hierarchical(n, t, ranks_per_node, n_nodes, GPUS[g]["link"], inter_bps, pin)
        fit = fit_stats(tm, t, [_rel(k) for k in keys], n, ranks_per_node=ranks_per_node, n_nodes=n_nodes,
                     inter_bytes_per_s_per_gpu=round_sig(inter_bps), nics=nic_text, intra="comm.intra_node.all_reduce",
                     method=FIT_METHOD + " of hierarchical_time_s (intra scope fixed); every efficiency <= 1")
        e = dict(group_size=n_nodes, algorithm="nccl-default (hierarchical model)")
        if notes:
            e["note"] = " ".join(notes)
        prof[g]["comm"]["inter_node"]["all_reduce"] = coll_entry(p, fit, **e)
        use(g, *keys)
        summary.append(("inter", g, "all_reduce", fit_text(p, fit)))

    inter("h100-sxm-80gb", "p5", ["p5"], 8, 2, "32 x 100 Gb/s EFA per node", 32 * 100e9 / 8 / 8,
          ["AWS p5.48xlarge x2 all_reduce_perf 8 B..16 GiB (table 1, out-of-place). Table 2 of the file (EKS,",
           "NCCL 2.18.5, partial rows) is parsed but not fitted."])
    inter("a100-sxm-80gb", "p4de", ["p4de"], 8, 2, "4 x 100 Gb/s EFA per node", 4 * 100e9 / 8 / 8,
          ["AWS p4de.24xlarge x2 all_reduce_perf 8 B..2 GiB (out-of-place)."])
    inter("b200-sxm-180gb", (b["size_bytes"], [float(busbw_factor("all_reduce", 32)) * s / v
                                               for s, v in zip(b["size_bytes"], b["columns"]["4 nodes"])]),
          ["mleng_bench"], 8, 4, "8 x 400 Gb/s EFA v4 per node (p6-b200)", 8 * 400e9 / 8 / 8,
          ["ml-engineering all_reduce_bench.py on 4 p6-b200 nodes (32 GPUs; busbw -> time with 2(32-1)/32)."])
    for g in ("h200-sxm-141gb", "mi250", "v100-sxm2-32gb"):
        prof[g]["comm"]["inter_node"]["all_reduce"] = dict(
            {k: v for k, v in prof["h100-sxm-80gb"]["comm"]["inter_node"]["all_reduce"].items() if k not in ("fit", "note")},
            derived_from="h100-sxm-80gb:comm.inter_node.all_reduce",
            note="No multi-node sweep for this GPU: the AWS p5 (EFA) fit. Efficiency is relative to the GPU's share of "
                 "its node's NIC line rate; InfiniBand usually does better than EFA (nccl-tests#290: NDR 400 Gb/s "
                 "reaches 46-48 GB/s per NIC, 92-96 % of line rate).")
        summary.append(("inter", g, "all_reduce", "derived from h100-sxm-80gb (p5 EFA)"))
    r78 = [r for r in iss if r.placement == "out-of-place" and r.size_bytes == 268435456 and r.busbw > 1]
    if r78:
        pv = params_of(prof["v100-sxm2-32gb"]["comm"]["inter_node"]["all_reduce"])
        pvi = params_of(prof["v100-sxm2-32gb"]["comm"]["intra_node"]["all_reduce"])
        tv = float(hierarchical_time_s("all_reduce", 268435456, 8, 8, 150e9, 100e9 / 8 / 8, pvi, pv))
        note("v100-sxm2-32gb", f"cross-check (nccl-tests#78): 8 nodes x 8 V100, one 100 Gb/s IB NIC per node, 256 MiB "
                               f"all-reduce busbw {r78[0].busbw} GB/s measured; the derived profile predicts "
                               f"{2 * 63 / 64 * 268435456 / tv / 1e9:.2f} GB/s. The excerpt gives no NCCL version or transport "
                               "settings, so it is a cross-check only, not fitted.")
        use("v100-sxm2-32gb", "issues")
    for g in GPUS:
        ar = prof[g]["comm"]["inter_node"]["all_reduce"]
        for coll in COLLECTIVES[1:]:
            prof[g]["comm"]["inter_node"][coll] = dict(
                {k: v for k, v in ar.items() if k not in ("fit", "note", "derived_from", "group_size", "algorithm")},
                derived_from=f"{g}:comm.inter_node.all_reduce",
                note="No inter-node measurement of this collective: the inter-node all-reduce parameters (same NICs; "
                     "busbw normalisation makes ring collectives comparable).")
    # ---- power and thermal (calibration/fit_power.py) ----
    sections, psum, pin = build_power_thermal(list(GPUS))
    for g, sec in sections.items():
        prof[g]["power"] = sec["power"]
        prof[g]["thermal"] = sec["thermal"]
        prof[g]["provenance"]["inputs"].update(pin[g])
    summary += psum
    # ---- finish ----
    for g in GPUS:
        pv = prof[g]["provenance"]
        pv["inputs"] = sorted(pv["inputs"])
        pv["notes"] = ["Fitted to microbenchmarks only; published training-throughput tables are not used.",
                       "derived_from 'X:path' means the entry copies profile X's entry at that dotted path."] + pv["notes"]
    return prof, summary


def write_profiles(profiles, outdir=PROFILES):
    """Write each profile to ``outdir/<gpu>.yaml``.

    Args:
        profiles: from :func:`build_profiles`.  outdir: directory (created if missing).
    Returns:
        list of written paths.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for g, p in profiles.items():
        path = outdir / f"{g}.yaml"
        head = (f"# {g}: fitted cost-model parameters. GENERATED by `{GENERATED_BY}` from the public microbenchmarks\n"
                "# under calibration/data/public/ (each file starts with its source). Do not edit by hand.\n")
        path.write_text(dump_profile(p, head))
        paths.append(path)
    return paths


def main(argv=None):
    """Entry point: fit, write ``hardware/profiles/*.yaml``, print the fit table.  Returns 0."""
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else PROFILES
    profiles, summary = build_profiles()
    for path in write_profiles(profiles, out):
        print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    for kind, g, item, text in summary:
        print(f"{kind:9s} {g:15s} {item:15s} {text}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
