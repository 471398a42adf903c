"""HBM, GEMM and attention sections of the built-in profiles (steps of :func:`.build.build_profiles`).

* HBM efficiency: mean of the Azure STREAM Copy and Triad bandwidths over the datasheet bandwidth.
* GEMM (:class:`costmodel.gemm.GemmParams`): ``eta_max``, ``k_half``, ``launch_s`` by
  :func:`costmodel.fit.primitives.fit_gemm` (``least_squares`` on log time, ``soft_l1``, best of the 9
  tiles in {64,128,256}^2), eta_max bounded by the maximum achievable matmul FLOP/s (MAMF).
* Attention: Azure FlashAttention-2 FLOP/s over the dense 16-bit peak.

GPUs without data take another GPU's entry with ``derived_from`` and a ``note``.  Each step adds its
entries in a fixed order (the order of the keys in the written YAML).
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING

import numpy as np

from costmodel.gemm import GemmParams, gemm_time_s
from costmodel.specs.params import AttentionKernelParams

from ..primitives import GEMM_BYTES, fit_gemm, fit_stats, gemm_entry, round_sig
from .data import AMD, concat, gemm_points, mamf_point, path, rel

if TYPE_CHECKING:
    from .build import Build

AZURE = {"a100-sxm-80gb": "ND A100 v4", "h100-sxm-80gb": "ND H100 v5", "h200-sxm-141gb": "ND H200 v5"}
# GB200 is not in the catalog: its datasheet values serve one cross-check only
GB200_FP8_FLOPS, GB200_HBM_BYTES_PER_S, GB200_BF16_FLOPS = 5000e12, 8e12, 2500e12


def fit_hbm(b: Build) -> None:
    """``hbm:`` of A100, H100, H200 from Azure STREAM; B200, MI250, MI300X, V100 derived (same-die
    variants: :func:`.build._derive_variant`)."""
    az = b.D["azure"]
    for g, sysname in AZURE.items():
        h = az[sysname]["hbm"]
        copy, triad = h["Copy"] / b.sheet[g].hbm, h["Triad"] / b.sheet[g].hbm
        b.prof[g]["hbm"] = dict(efficiency=round_sig((copy + triad) / 2), fit=dict(
            n_points=2, copy_efficiency=round_sig(copy, 3), triad_efficiency=round_sig(triad, 3),
            median_rel_err=round_sig(abs(copy - triad) / (copy + triad), 3),
            max_rel_err=round_sig(abs(copy - triad) / (copy + triad), 3),
            method="mean of STREAM Copy and Triad over the datasheet bandwidth", inputs=[rel("azure")]))
        b.use(g, "azure")
        b.summary.append(("hbm", g, "efficiency", f"{(copy + triad) / 2:.3f} (copy {copy:.3f}, triad {triad:.3f})"))
    derived_hbm = {"b200-sxm-180gb": ("h200-sxm-141gb", "no HBM result in the Azure GB200 file; taken from "
                                      "H200 (HBM3e as well)"),
                   "mi250": ("a100-sxm-80gb", "no MI250 STREAM data in the public set; taken from A100 (HBM2e)"),
                   "mi300x": ("h100-sxm-80gb", "no MI300X STREAM data in the public set; taken from H100 (HBM3)"),
                   "v100-sxm2-32gb": ("a100-sxm-80gb", "no V100 STREAM data in the public set; taken from A100")}
    for g, (src, why) in derived_hbm.items():
        b.prof[g]["hbm"] = dict(efficiency=b.prof[src]["hbm"]["efficiency"], derived_from=f"{src}:hbm", note=why)
        b.summary.append(("hbm", g, "efficiency", f"{b.prof[g]['hbm']['efficiency']} derived from {src}"))


#: inputs whose GEMM times are bursts too short for the power limit to set the clock (they ran at the
#: maximum clock): XLA's table times 5 profiling runs of a small- and a large-range argument set per
#: shape, 10 kernels (xla/tools/matmul_perf_table_gen.cc, kNumProfilingRuns = 5); mamf-finder's best
#: shape is a ~0.1 ms GEMM timed 100 times after 50 warm-ups, ~15 ms (its B200 best, 1745 TFLOP/s, is
#: 1.2-1.5x the 1178-1331 TFLOP/s the same GPU holds at its 1000 W limit, b200_note).  Power-limited:
#: Azure's rows (10,000 warm-up iterations, file header) and vLLM's bench (its loop is not stated, but
#: its B200 BF16 column, 1,421 TFLOP/s at M = 16,384, sits at the B200's sustained MSMF, 1,429, msmf).
BURST_SOURCES = ("xla_mm", "mamf")


def _gemm(b: Build, g, dtype, pts, keys, notes=(), hbm_of=None, k_half=None):
    """Fit ``gemm.<dtype>`` of ``g`` to ``pts``; ``hbm_of``: the GPU whose HBM roofline the data ran on.
    The entry is ``power_limited: false`` when every input is a burst (:data:`BURST_SOURCES`)."""
    src = np.array(pts["src"])
    mm = src == "mamf"   # the brute-force maximum bounds eta_max (see fit_gemm)
    peak = b.sheet[g].peak[dtype]
    cap = float(np.max(2 * np.asarray(pts["b"])[mm] * np.asarray(pts["m"])[mm] * np.asarray(pts["n"])[mm]
                       * np.asarray(pts["k"])[mm] / np.asarray(pts["t"])[mm])) / peak if mm.any() else 1.0
    p, tmod = fit_gemm(pts, peak, b.sheet[hbm_of or g].hbm, b.prof[hbm_of or g]["hbm"]["efficiency"],
                       b.sheet[g].sms, GEMM_BYTES[dtype], eta_cap=cap, k_half=k_half)
    per = {s: round_sig(np.median(np.abs(tmod[src == s] / np.asarray(pts["t"])[src == s] - 1)), 3)
           for s in dict.fromkeys(src)}
    fit = fit_stats(tmod, pts["t"], [rel(k) for k in keys], median_rel_err_by_source=per,
                    method="least_squares soft_l1 on log time; tile chosen among {64,128,256}^2; "
                           f"eta_max bounded by the MAMF maximum {cap:.3f}")
    e = dict(note=" ".join(notes)) if notes else {}
    b.prof[g]["gemm"][dtype] = gemm_entry(p, fit, power_limited=not all(k in BURST_SOURCES for k in keys), **e)
    b.use(g, *keys)
    b.summary.append(("gemm", g, dtype, f"n={fit['n_points']:4d} median {fit['median_rel_err']:.3f} max "
                      f"{fit['max_rel_err']:.3f} R2 {fit['r2']:.3f}  eta_max {p.eta_max:.3f} k_half {p.k_half:.0f} "
                      f"launch {p.launch_s * 1e6:.2f}us tile {p.tile_m}x{p.tile_n}"))
    return p


def fit_gemm_16bit(b: Build) -> GemmParams:
    """``gemm.bf16`` of H100, H200, B200 (XLA tables + MAMF) and A100 (Azure + MAMF, also its fp16).

    Returns the A100 fit, the shape the GPUs without GEMM data borrow."""
    mamf, xla, az = b.D["mamf"], b.D["xla_mm"], b.D["azure"]
    sm90 = concat(gemm_points(xla["sm_90"]["bf16xbf16->bf16"], "xla_mm"),
                  gemm_points(mamf_point(mamf, "NVIDIA H100 SXM", "bf16"), "mamf"))
    _gemm(b, "h100-sxm-80gb", "bf16", sm90, ("xla_mm", "mamf"),
          ["XLA sm_90 bf16 table (375 shapes, H100 80GB HBM3) + MAMF H100 SXM best shape (794.5 TFLOP/s)."])
    _gemm(b, "h200-sxm-141gb", "bf16", sm90, ("xla_mm", "mamf"),
          ["Same data and fit as h100-sxm-80gb: MAMF states 'H200 is the same' for BF16 and the compute die is",
           "identical; the XLA sm_90 table was measured on H100 HBM3, so the fit uses H100's HBM roofline.",
           "The Azure ND H200 cuBLASLt rows are FP8 and feed gemm.fp8."], hbm_of="h100-sxm-80gb")
    _gemm(b, "b200-sxm-180gb", "bf16", concat(gemm_points(xla["sm_100"]["bf16xbf16->bf16"], "xla_mm"),
                                              gemm_points(mamf_point(mamf, "NVIDIA B200 SXM", "bf16"), "mamf")),
          ("xla_mm", "mamf"), ["XLA sm_100 bf16 table (375 shapes, B200) + MAMF B200 SXM best shape (1745 TFLOP/s)."])
    a100 = _gemm(b, "a100-sxm-80gb", "bf16", concat(gemm_points(az["ND A100 v4"]["gemm"], "azure"),
                                                    gemm_points(mamf_point(mamf, "NVIDIA A100 SXM", "bf16"), "mamf")),
                 ("azure", "mamf"), ["Azure ND A100 v4 cuBLASLt FP16 rows + MAMF A100 SXM BF16 best shape; FP16 and",
                                     "BF16 share the 312 TFLOP/s tensor-core peak on A100, so one joint fit serves "
                                     "both."])
    b.prof["a100-sxm-80gb"]["gemm"]["fp16"] = dict(b.prof["a100-sxm-80gb"]["gemm"]["bf16"])
    return a100


def fit_gemm_fp8(b: Build) -> None:
    """``gemm.fp8`` of H100, H200 (Azure + MAMF) and B200 (XLA sm_100 + MAMF; GB200 rows as a cross-check)."""
    mamf, xla, az = b.D["mamf"], b.D["xla_mm"], b.D["azure"]
    # H200 first: H100 takes its k_half.  Both tables sweep K only together with M and N (square shapes
    # and three others); on H100's the fit runs k_half to its bound 0, on H200's it resolves 317.  The
    # K-loop overhead is the SM's and the kernel library's, and the two GPUs share the compute die
    # (their bf16 fit is one), so H100 borrows it and fits eta_max and the launch on its own rows.
    k_half = None
    for g, sysname, accel in (("h200-sxm-141gb", "ND H200 v5", "NVIDIA H200 SXM"),
                              ("h100-sxm-80gb", "ND H100 v5", "NVIDIA H100 SXM")):
        borrowed = ["k_half is the H200 FP8 fit's (same compute die; this table's square sweep cannot tell it "
                    "from eta_max: left free, the fit runs it to 0)."] if k_half is not None else []
        p = _gemm(b, g, "fp8", concat(gemm_points(az[sysname]["gemm"], "azure"),
                                      gemm_points(mamf_point(mamf, accel, "fp8"), "mamf")),
                  ("azure", "mamf"), [f"Azure {sysname} cuBLASLt FP8 rows + MAMF {accel} FP8 (e4m3) best shape.",
                                      "XLA sm_90 FP8 columns excluded: they reach 2.6 PFLOP/s, above the 1.979 PFLOP/s "
                                      "dense FP8 peak, so they are not single-GEMM times (file header caveat).",
                                      *borrowed], k_half=k_half)
        k_half = p.k_half
    b8 = _gemm(b, "b200-sxm-180gb", "fp8", concat(gemm_points(xla["sm_100"]["f8e4m3fnxf8e4m3fn->bf16"], "xla_mm"),
                                                  gemm_points(mamf_point(mamf, "NVIDIA B200 SXM", "fp8"), "mamf")),
               ("xla_mm", "mamf"), ["XLA sm_100 e4m3 x e4m3 -> bf16 table + MAMF B200 SXM FP8. The sm_100 FP8 column",
                                    "peaks at 3.28 PFLOP/s = 73% of the 4.5 PFLOP/s dense peak, consistent with MAMF",
                                    "(76%), so unlike sm_90 FP8 it is used. Azure's FP8 rows are GB200 (5 PFLOP/s",
                                    "dense FP8, 1200 W), a different SKU: used as a cross-check only (see notes)."])
    gb = b.D["gb200"]["gemm"]
    tgb = gemm_time_s([r["m"] for r in gb], [r["n"] for r in gb], [r["k"] for r in gb], 1, GB200_FP8_FLOPS,
                      GB200_HBM_BYTES_PER_S, b.prof["b200-sxm-180gb"]["hbm"]["efficiency"], b8, 1.0)
    egb = np.abs(tgb / np.array([r["time_s"] for r in gb]) - 1)
    b.note("b200-sxm-180gb", f"cross-check: gemm.fp8 with the GB200 dense FP8 peak (5 PFLOP/s) predicts the Azure ND "
                             f"GB200 v6 cuBLASLt FP8 rows with median {np.median(egb):.3f}, max {egb.max():.3f} "
                             "relative time error.")
    b.use("b200-sxm-180gb", "gb200")


def fit_gemm_fp4(b: Build) -> None:
    """``gemm.fp4`` of B200 (NVFP4, costmodel.formats) from vLLM's CUTLASS NVFP4 GEMM on pre-quantized
    operands, Llama-3.1-8B's QKV shape over M = 1..16,384; the same table's BF16 column checks gemm.bf16."""
    g = "b200-sxm-180gb"
    D = b.D["vllm_fp4"]
    _gemm(b, g, "fp4", gemm_points(D["nvfp4-noquant"], "vllm_fp4"), ("vllm_fp4",),
          ["vLLM bench_nvfp4_gemm.py on B200: CUTLASS NVFP4 (E2M1, an E4M3 scale per 16 elements) on",
           "pre-quantized operands, N=6144 K=4096, M = 1..16,384; 3.9 PFLOP/s at the largest M, 43% of the",
           "9 PFLOP/s dense FP4 peak where FP8 reaches 76% of its own (block-scale handling). One shape: the",
           "tile fit sees no N or K sweep, so k_half is the B200 FP8 fit's (one K cannot tell it from eta_max).",
           "The activation quantization it times apart is costmodel.formats' cast."],
          k_half=b.prof[g]["gemm"]["fp8"]["k_half"])
    rows = D["torch-bf16"]
    t = gemm_time_s([r["m"] for r in rows], [r["n"] for r in rows], [r["k"] for r in rows], 1, b.sheet[g].peak["bf16"],
                    b.sheet[g].hbm, b.prof[g]["hbm"]["efficiency"], _params(b.prof[g]["gemm"]["bf16"]), 2.0)
    big = np.array([r["m"] for r in rows]) >= 2048
    err = t / np.array([r["time_s"] for r in rows]) - 1
    b.note(g, f"cross-check: gemm.bf16 against the same vLLM table's torch BF16 column (cuBLAS, N=6144 K=4096): "
              f"median time error {np.median(err[big]):+.3f} for M >= 2048 (the fit is faster there), "
              f"{np.median(err[~big]):+.3f} below (launch- and weight-read-bound, small M).")


def _params(e: dict) -> GemmParams:
    """GemmParams of a written ``gemm.<dtype>`` entry."""
    return GemmParams(e["eta_max"], e["k_half"], e["launch_s"], e["tile_m"], e["tile_n"], e["num_sms"])


def derive_gemm(b: Build, a100: GemmParams) -> float:
    """fp16 of H100/H200/B200 from their bf16; V100, MI250 and MI300X from the A100 shape.  Returns
    MI300X's MAMF efficiency (the AMD GPUs' eta_max)."""
    for g in ("h100-sxm-80gb", "h200-sxm-141gb", "b200-sxm-180gb"):
        bf16 = b.prof[g]["gemm"]["bf16"]
        b.prof[g]["gemm"]["fp16"] = dict({k: v for k, v in bf16.items() if k not in ("fit", "note")},
                                         derived_from=f"{g}:gemm.bf16",
                                         note="FP16 and BF16 have the same dense tensor-core peak; no separate FP16 "
                                              "table.")
    fit_gemm_fp4(b)
    b.prof["v100-sxm2-32gb"]["gemm"]["fp16"] = gemm_entry(
        GemmParams(a100.eta_max, a100.k_half, a100.launch_s, a100.tile_m, a100.tile_n, b.sheet["v100-sxm2-32gb"].sms),
        derived_from="a100-sxm-80gb:gemm.bf16",
        note="No V100 GEMM table in the public data: A100 fitted eta_max/k_half/launch/tile with the V100's 80 SMs "
             "and 125 TFLOP/s FP16 tensor peak. V100 has no BF16 tensor cores, so there is no bf16 entry.")
    mi = next(r for r in b.D["mamf"] if r["accelerator"] == "AMD MI300X" and r["dtype"] == "bf16")
    eta_mi = mi["mamf_flops"] / mi["theory_flops"]
    for g in AMD:
        sh = b.sheet[g]
        for dt in ("bf16", "fp16"):
            b.prof[g]["gemm"][dt] = gemm_entry(
                GemmParams(eta_mi, a100.k_half, a100.launch_s, a100.tile_m, a100.tile_n, sh.sms),
                derived_from="a100-sxm-80gb:gemm.bf16 (shape) + MAMF AMD MI300X (eta_max)",
                note=f"No {g} GEMM table: eta_max = MAMF MI300X BF16 efficiency {mi['mamf_flops'] / 1e12:.1f}/"
                     f"{mi['theory_flops'] / 1e12:.0f} = {eta_mi:.3f}" + (" (measured on this part)" if g == "mi300x"
                                                                         else " (closest measured AMD CDNA part)")
                     + f"; k_half, launch, tile from the A100 fit; {sh.sms} CUs and {sh.peak['bf16'] / 1e12:.0f} "
                       "TFLOP/s dense BF16.")
        b.use(g, "mamf")
        b.summary.append(("gemm", g, "bf16/fp16", f"derived: eta_max {eta_mi:.3f} (MAMF MI300X), A100 shape"))
    b.use("v100-sxm2-32gb", "azure", "mamf")
    b.summary.append(("gemm", "v100-sxm2-32gb", "fp16", "derived from a100 bf16 (num_sms 80)"))
    return eta_mi


def _fa_efficiency(k: dict, peak: float):
    """(sequence lengths, measured fwd + bwd efficiency, executed FLOPs) of one kernel table:
    causal forward 2 B H S^2 D, backward 2.5 x forward (Dao 2023)."""
    B, H, D = k["shape"]
    s = np.asarray(k["s"], float)
    B = k["tokens"] / s if "tokens" in k else B      # a fixed token count per batch: B = tokens / S
    flops = 3.5 * 2.0 * B * H * s ** 2 * D
    t = np.asarray(k["fwd_s"]) + np.asarray(k["bwd_s"])
    return s, flops / t / peak, flops, t


def _fit_fa_kernel(k: dict, peak: float, source: str) -> dict:
    """``attention.kernels.<name>`` of one measured kernel: eff(s) = eta_max s / (s + s_half) by least
    squares on log time (one sequence length: s_half = 0, eta_max = the measurement)."""
    from scipy.optimize import least_squares
    s, eff, flops, t = _fa_efficiency(k, peak)
    if len(s) == 1:
        eta, sh = float(eff[0]), 0.0
    else:
        res = lambda x: np.log(flops / (peak * x[0] * s / (s + x[1]))) - np.log(t)  # noqa: E731
        r = least_squares(res, [float(eff.max()), float(s.min())], bounds=([1e-3, 0.0], [1.0, 1e6]))
        eta, sh = float(r.x[0]), float(r.x[1])
    model_t = flops / (peak * eta * s / (s + sh))
    return dict(head_dim=int(k["shape"][2]), eta_max=round_sig(eta), s_half=round_sig(sh), s_max=int(s.max()),
                fit=fit_stats(model_t, t, [source], method="least_squares on log time of causal fwd + bwd, "
                              "eff(s) = eta_max s / (s + s_half)", seq_lens=[int(x) for x in s],
                              batch_heads_head_dim=list(k["shape"])))


def _hopper_fa_kernels(b: Build) -> tuple[dict, dict, dict]:
    """``attention.kernels.fa3``, ``.fa2`` and ``.cudnn`` of H100 from the FlashAttention-3 paper's bars,
    one source for the three kernels and both head dims (128 the main entry, 64 under ``by_head_dim``): 16k
    tokens a call, 512 to 16k long, the scale of a training micro-batch.  TritonBench's FA3 kernel
    times (4 x 48 heads of 128: a smaller call at short sequences) cross-check it (note)."""
    fa, peak, src = b.D["fa_kernels"], b.sheet["h100-sxm-80gb"].peak["bf16"], rel("fa_kernels")
    sub = lambda name: {k: v for k, v in _fit_fa_kernel(fa[name], peak, src).items() if k != "head_dim"}  # noqa: E731
    fa3 = _fit_fa_kernel(fa["fa3_paper_h100_d128"], peak, src)
    fa2 = _fit_fa_kernel(fa["fa2_h100"], peak, src)
    cudnn = _fit_fa_kernel(fa["cudnn_h100"], peak, src)
    fa2["by_head_dim"] = {64: sub("fa2_h100_d64")}
    cudnn["by_head_dim"] = {64: sub("cudnn_h100_d64")}
    s9, eff9, _, _ = _fa_efficiency(fa["cudnn_h200"], peak)
    fit = AttentionKernelParams(cudnn["eta_max"], cudnn["s_half"], cudnn["s_max"])
    later = ", ".join(f"{int(s)}: {e:.3f} vs {float(fit.efficiency(s)):.3f}" for s, e in zip(s9, eff9))
    fa3["by_head_dim"] = {64: sub("fa3_paper_h100_d64")}
    s_tb, eff_tb, _, _ = _fa_efficiency(fa["fa3_h100"], peak)
    fit = AttentionKernelParams(fa3["eta_max"], fa3["s_half"], fa3["s_max"])
    check = ", ".join(f"{int(s)}: {e:.3f} vs {float(fit.efficiency(s)):.3f}" for s, e in zip(s_tb, eff_tb))
    fa2["note"] = ("Causal FlashAttention-2 on Hopper by sequence length (FlashAttention-3 paper, Figures 5-6), "
                   "head dim 128; head dim 64 under by_head_dim (the paper's head-dim-64 panels); replaces the "
                   "single non-causal Azure point (attention.flash_efficiency) for fa2.")
    fa3["note"] = ("Causal FlashAttention-3 on Hopper (FlashAttention-3 paper, Figures 5-6), head dim 128; head dim "
                   "64 under by_head_dim. Cross-check, TritonBench's FA3 times (B=4, H=48, D=128), measured vs "
                   f"this fit by S: {check} (its calls hold 4k to 32k tokens).")
    cudnn["note"] = ("Causal cuDNN fused attention on an H100 SXM5 (FlashAttention-3 paper, Figures 5-6, its cuDNN "
                     "bars), head dim 128; head dim 64 under by_head_dim. The kernel of Transformer Engine's "
                     "FusedAttention, which TE selects over FlashAttention on Hopper. Cross-check, cuDNN 9.19.1 on an "
                     "H200 (cudnn-frontend's Llama 3.1 benchmark, 64 query / 8 KV heads, clocks not stated), measured "
                     f"vs this fit by S: {later}: a later release's microbenchmark runs 2-23% faster than the bars, more at longer sequences.")
    return fa3, fa2, cudnn


def fit_attention(b: Build, a100: GemmParams, eta_mi: float) -> None:
    """``attention:`` of A100, H100, H200 from Azure FlashAttention-2; FlashAttention-3 on H100 (and
    H200, the same GH100 compute) and FlashAttention-4 on B200 from published kernel times; B200's
    FA2 entry, V100, MI250 and MI300X derived."""
    az = b.D["azure"]
    for g, sysname in AZURE.items():
        a = az[sysname]["attention"]
        eff = a["flash_attention_2"] / b.sheet[g].peak["bf16"]
        b.prof[g]["attention"] = dict(flash_efficiency=round_sig(eff), fit=dict(
            n_points=1, measured_flops_per_s=round_sig(a["flash_attention_2"]), head_dim=a["head_dim"], batch=2,
            seq_len=8192, method="Azure FlashAttention-2 TFLOP/s over the dense 16-bit peak", inputs=[rel("azure")]))
        b.summary.append(("attention", g, "flash_eff", f"{eff:.3f} (FA2 {a['flash_attention_2'] / 1e12:.1f} TF, hd "
                                                       f"{a['head_dim']})"))
    speed = float(re.search(r"fwd\+bwd (\d+\.\d+)x @ 8k", path("mamf").read_text()).group(1))
    h200a = b.prof["h200-sxm-141gb"]["attention"]["flash_efficiency"]
    b_eff = h200a * speed * b.sheet["h200-sxm-141gb"].peak["bf16"] / b.sheet["b200-sxm-180gb"].peak["bf16"]
    gb_fa = b.D["gb200"]["attention"]["flash_attention_2"]
    b.prof["b200-sxm-180gb"]["attention"] = dict(
        flash_efficiency=round_sig(b_eff), derived_from="h200-sxm-141gb:attention",
        note=f"H200 FA2 efficiency x ml-engineering B200/H200 isolated-attention speedup {speed}x at 8k (FA4 vs FA3) x "
             f"989.4/2250 peak ratio. Azure GB200 FlashAttention-2 measures {gb_fa / 1e12:.1f} TFLOP/s = "
             f"{gb_fa / GB200_BF16_FLOPS:.3f} of GB200's 2.5 PFLOP/s, but FA2 does not use Blackwell's tcgen05 tensor "
             "cores, so it is not representative of training kernels; it is a lower bound.")
    b.use("b200-sxm-180gb", "mamf", "gb200")
    fa3, fa2, cudnn = _hopper_fa_kernels(b)
    for g in ("h100-sxm-80gb", "h200-sxm-141gb"):
        same = {} if g == "h100-sxm-80gb" else dict(
            note="H200 has H100's GH100 SMs and clocks; attention is matmul-bound, so H100's kernel times carry over")
        b.prof[g]["attention"]["kernels"] = {
            "fa2": dict(fa2, **same, **({} if not same else dict(derived_from="h100-sxm-80gb:attention.kernels.fa2"))),
            "fa3": dict(fa3, **same, **({} if not same else dict(derived_from="h100-sxm-80gb:attention.kernels.fa3"))),
            "cudnn": dict(cudnn, **same,
                          **({} if not same else dict(derived_from="h100-sxm-80gb:attention.kernels.cudnn")))}
        b.use(g, "fa_kernels")
    # cuDNN on a GB200 (its 2.5 PFLOP/s dense peak): the efficiency carries to the B200, the same die run at
    # its own peak, as the rest of the Blackwell profiles do
    cudnn_bw = _fit_fa_kernel(b.D["fa_kernels"]["cudnn_gb200"], GB200_BF16_FLOPS, rel("fa_kernels"))
    cudnn_bw["note"] = ("Causal cuDNN 9.19.1 fused attention on a GB200 (cudnn-frontend's Llama 3.1 benchmark, 64 query / 8 "
                        "KV heads of 128, clocks not stated), as a fraction of GB200's 2.5 PFLOP/s: the kernel of "
                        "Transformer Engine's FusedAttention, which TE selects over FlashAttention on Hopper and newer.")
    b.prof["b200-sxm-180gb"]["attention"]["kernels"] = {
        "fa4": _fit_fa_kernel(b.D["fa_kernels"]["fa4_b200"], b.sheet["b200-sxm-180gb"].peak["bf16"], rel("fa_kernels")),
        "cudnn": cudnn_bw}
    b.use("b200-sxm-180gb", "fa_kernels")
    b.summary.append(("attention", "h100-sxm-80gb", "fa3", f"eta_max {fa3['eta_max']}, s_half {fa3['s_half']}"))
    b.summary.append(("attention", "h100-sxm-80gb", "fa2", f"eta_max {fa2['eta_max']}, s_half {fa2['s_half']}"))
    b.summary.append(("attention", "h100-sxm-80gb", "cudnn", f"eta_max {cudnn['eta_max']}, s_half {cudnn['s_half']}"))
    a100a = az["ND A100 v4"]["attention"]
    b.prof["v100-sxm2-32gb"]["attention"] = dict(
        flash_efficiency=round_sig(a100a["standard"] / b.sheet["a100-sxm-80gb"].peak["bf16"]),
        derived_from="a100-sxm-80gb:attention (standard attention)",
        note="FlashAttention-2 does not support Volta (sm_70); V100 training runs unfused attention, so the A100 "
             f"PyTorch standard-attention efficiency ({a100a['standard'] / 1e12:.1f}/312 TFLOP/s) is used.")
    mi_eff = b.prof["a100-sxm-80gb"]["attention"]["flash_efficiency"] * eta_mi / a100.eta_max
    for g in AMD:
        b.prof[g]["attention"] = dict(
            flash_efficiency=round_sig(mi_eff), derived_from="a100-sxm-80gb:attention",
            note=f"No {g} attention data: A100 FA2 efficiency scaled by the GEMM eta_max ratio ({g}/A100), since "
                 "fused attention is matmul-bound.")
    for g in ("b200-sxm-180gb", "v100-sxm2-32gb") + AMD:
        b.summary.append(("attention", g, "flash_eff", f"{b.prof[g]['attention']['flash_efficiency']} derived"))
