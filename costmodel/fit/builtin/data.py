"""The inputs of the built-in profiles: the public copies in ``hardware/profiles/data/`` and the GPU
datasheets in ``hardware/gpus/`` (read with :func:`costmodel.specs.load_gpu`, never repeated here).

Every file under ``hardware/profiles/data/`` is a verbatim copy of a published measurement and starts
with its source header (URL, commit, hardware, configuration); ``hardware/profiles/data/README.md``
says which fit uses which file.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from costmodel.collective import busbw_factor
from costmodel.readers import (read_allreduce_bench, read_azure_results, read_mamf, read_massaged_nccl_table,
                               read_mlengineering_nvls, read_nccl_tests, read_vllm_gemm_bench,
                               read_xla_collective_table, read_xla_matmul_table)
from costmodel.specs import hardware_dir, load_gpu

from ..primitives import GEMM_BYTES

PROFILES = hardware_dir() / "profiles"
DATA = PROFILES / "data"
REPO = hardware_dir().parent
DATA_REL = "hardware/profiles/data"  # how the profiles' provenance names the copies (repository-relative)
GENERATED_BY = "python -m costmodel.fit.builtin"
# the GPUs with a built-in profile, in the order they are fitted and reported (hardware/gpus/<stem>.yaml)
GPUS = ("a100-sxm-80gb", "a100-sxm-40gb", "a800-sxm-80gb", "a100-pcie-80gb", "h100-sxm-80gb", "h200-sxm-141gb",
        "h800-sxm-80gb", "h100-pcie-80gb", "h100-nvl-94gb", "h100-hbm2e-96gb", "gh200-96gb", "l40s", "b200-sxm-180gb", "gb200-186gb", "b300-sxm-288gb", "gb300-288gb", "mi250", "mi300x",
        "v100-sxm2-32gb")
#: AMD GPUs: GEMM eta_max from MAMF's MI300X, the A100's GEMM shape, A100 ring collectives
AMD = ("mi250", "mi300x")
F = dict(  # input files (copies under hardware/profiles/data/)
    xla_mm="xla_matmul_perf_table_sm90_sm100.csv", xla_coll="xla_collective_perf_table_sm90_sm100_8gpu.csv",
    mamf="mamf_max_achievable_matmul_tflops.md", azure="azure_nd_a100_h100_h200_gemm_hbm_nvbw_nccl.md",
    gb200="azure_nd_gb200_v6_gemm_nvbw_nccl.md", p5="aws_p5_2node_16xH100_allreduce.txt",
    p4de="aws_p4de_2node_16xA100_allreduce.txt", issues="github_issue_excerpts_partial_tables.txt",
    liplus="liplus_a100_8gpu_sendrecv.txt", mleng_a100="mlengineering_a100_8gpu_nvlink_allreduce.txt",
    mleng_bench="mlengineering_allreduce_bench_h200_b200_pytorch.md",
    mleng_nvls="mlengineering_h200_b200_nvls_and_collectives.md",
    fa_kernels="flash_attention_kernel_times_h100_b200.md", vllm_fp4="vllm_b200_nvfp4_gemm_llama8b.md",
    te_grouped="te_grouped_gemm_h100_pr2045.md",
    # power and thermal (power.py)
    h100_trace="h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv",
    a100_wait="m4logs_a100_80gb_8gpu_nccl_wait_nvidia_smi_q.txt",
    b200_note="gpu_research_b200_8gpu_power_clocks_thermals.md", msmf="mlengineering_mamf_vs_msmf_h200_b200.md",
    fbgemm_500w="fbgemm_h100_500w_bf16_fp8_gemm.md",
    flagperf_ops="flagperf_a100_operator_bench_power_temp.csv",
    flagperf_base="flagperf_a100_base_gemm_membw_nccl_with_power_temp.md",
    zeus_v100="zeus_nsdi23_power_vs_powerlimit_v100.csv", zeus_a40="zeus_nsdi23_power_vs_powerlimit_a40.csv",
    zeus_rtx6000="zeus_nsdi23_power_vs_powerlimit_rtx6000.csv", zeus_p100="zeus_nsdi23_power_vs_powerlimit_p100.csv",
    perseus_gpt3="perseus_sosp24_gpt3-175b_a100_sxm_stage_clock_sweep.csv",
    perseus_bloom="perseus_sosp24_bloom_a100_sxm_stage_clock_sweep.csv")


def path(key, data=None) -> Path:
    """Absolute path of input ``key`` of :data:`F` (under ``data``, default :data:`DATA`)."""
    return Path(data or DATA) / F[key]


def rel(key) -> str:
    """Repository-relative path string of input ``key`` (what the profile's provenance lists)."""
    return f"{DATA_REL}/{F[key]}"


@dataclass(frozen=True)
class Datasheet:
    """The datasheet values a built-in profile is fitted with, from ``hardware/gpus/<gpu>.yaml``.

    Attributes:
        peak: dtype -> dense tensor-core FLOP/s, for the dtypes the GEMM fits cover (bf16, fp16, fp8).
        hbm: HBM bytes/s of the GEMM roofline: ``fit_hbm_bandwidth`` where the GPU file gives one (the
            figure the built-in fit was made with), else ``hbm_bandwidth``.
        sms: SMs (CUs per GCD on AMD).
        link: NVLink bytes/s per GPU per direction; None on AMD (xGMI links differ in width, see
            gpus/mi250.yaml, and no AMD collective is fitted here).
        tdp: W.
        source: the GPU file, for the provenance.
    """

    peak: dict
    hbm: float
    sms: int
    link: float | None
    tdp: float
    source: str


def datasheet(gpu: str) -> Datasheet:
    """:class:`Datasheet` of catalog GPU ``gpu`` (raises InputError on a bad GPU file)."""
    s = load_gpu(gpu)
    return Datasheet(peak={k: v for k, v in s.peak_flops.items() if k in GEMM_BYTES},
                     hbm=s.fit_hbm_bytes_per_s or s.hbm_bytes_per_s, sms=s.num_sms,
                     link=(s.nvlink_bytes_per_s or None) if s.vendor == "nvidia" else None, tdp=s.tdp_w,
                     source=f"hardware/gpus/{gpu}.yaml ({s.name}; every value with its source there)")


def load_public():
    """Read every public input of the GEMM, HBM, attention and collective fits once.

    Returns:
        dict of parsed tables (see the readers in :mod:`costmodel.readers`).
    Raises:
        whatever the readers raise on a malformed file (file and line named).
    """
    return dict(mamf=read_mamf(path("mamf")), azure=read_azure_results(path("azure")),
                vllm_fp4=read_vllm_gemm_bench(path("vllm_fp4")),
                gb200=read_azure_results(path("gb200"))["ND GB200 v6"],
                xla_mm={a: {c: read_xla_matmul_table(path("xla_mm"), a, c)
                            for c in ("bf16xbf16->bf16", "f8e4m3fnxf8e4m3fn->bf16")} for a in ("sm_90", "sm_100")},
                xla_coll={a: read_xla_collective_table(path("xla_coll"), a) for a in ("sm_90", "sm_100")},
                p5=read_nccl_tests(path("p5")), p4de=read_nccl_tests(path("p4de")),
                issues=read_nccl_tests(path("issues")), liplus=read_nccl_tests(path("liplus")),
                mleng_a100=read_massaged_nccl_table(path("mleng_a100")),
                bench=read_allreduce_bench(path("mleng_bench")), nvls=read_mlengineering_nvls(path("mleng_nvls")),
                fa_kernels=fa_kernel_times(path("fa_kernels").read_text(encoding="utf-8")))


def fa_kernel_times(text: str) -> dict:
    """The FlashAttention kernel times of ``flash_attention_kernel_times_h100_b200.md``.

    Returns {"fa3_h100": {"shape": (B, H, D), "s": [...], "fwd_s": [...], "bwd_s": [...]},
    "fa4_b200": {"shape": (B, H, D), "s": [8192], "fwd_s": [...], "bwd_s": [...]},
    "cudnn_h200", "cudnn_gb200": {...} (cuDNN 9.19.1's causal times on H200 and GB200), "fa2_h100", "fa2_h100_d64", "fa3_paper_h100_d64",
    "fa3_paper_h100_d128", "cudnn_h100", "cudnn_h100_d64": (see :func:`_fa_paper`)}
    (seconds).
    Raises:
        ValueError: a table or line the file should hold is missing.
    """
    def table(title):
        m = re.search(re.escape(title) + r"\s*\n\s*\n((?:\|.*\n?)+)", text)
        if not m:
            raise ValueError(f"no table {title!r}")
        rows = [ln.split("|")[1:-1] for ln in m.group(1).strip().splitlines()[2:]]
        return [int(r[0]) for r in rows], [float(r[2]) * 1e-6 for r in rows]
    s, fwd = table("## [fa3_h100] Causal Forward")
    s2, bwd = table("## [fa3_h100] Causal Backward")
    if s != s2:
        raise ValueError("FA3 forward and backward tables differ in S")
    s3, times = _ms_table(text, "## [cudnn_h200] cuDNN 9.19.1, causal, bf16, B=1, 64 query heads, 8 KV heads, head dim 128")
    s4, times4 = _ms_table(text, "## [cudnn_gb200] cuDNN 9.19.1, causal, bf16, B=1, 64 query heads, 8 KV heads, "
                                 "head dim 128")
    f4 = re.search(r"FA Python fwd: ([\d.]+)ms.*?\[2CTA\] FA Python bwd: ([\d.]+)ms", text, re.S)
    if not f4:
        raise ValueError("no FA4 fwd / [2CTA] bwd lines")
    return {"fa3_h100": dict(shape=(4, 48, 128), s=s, fwd_s=fwd, bwd_s=bwd), **_fa_papers(text),
            "fa4_b200": dict(shape=(4, 16, 128), s=[8192], fwd_s=[float(f4.group(1)) * 1e-3],
                             bwd_s=[float(f4.group(2)) * 1e-3]),
            "cudnn_h200": dict(shape=(1, 64, 128), s=s3, fwd_s=[f * 1e-3 for f, _ in times],
                               bwd_s=[b * 1e-3 for _, b in times]),
            "cudnn_gb200": dict(shape=(1, 64, 128), s=s4, fwd_s=[f * 1e-3 for f, _ in times4],
                                bwd_s=[b * 1e-3 for _, b in times4])}


def _numeric_table(text: str, title: str) -> list:
    """The rows (lists of floats) of the markdown table under heading ``title``, header and rule left out.

    Raises:
        ValueError: the table is missing.
    """
    m = re.search(re.escape(title) + r"\s*\n\s*\n((?:\|.*\n?)+)", text)
    if not m:
        raise ValueError(f"no table {title!r}")
    return [[float(c) for c in ln.split("|")[1:-1]] for ln in m.group(1).strip().splitlines()[2:]]


def _ms_table(text: str, title: str) -> tuple[list, list]:
    """(S, [(fwd ms, bwd ms)]) of a ``| S | fwd (ms) | bwd (ms) |`` table under heading ``title``.

    Raises:
        ValueError: the table is missing.
    """
    rows = _numeric_table(text, title)
    return [int(r[0]) for r in rows], [(r[1], r[2]) for r in rows]


def _fa_paper(text: str, title: str, head_dim: int) -> dict:
    """A TFLOP/s table of the FlashAttention-3 paper (``title``: its heading) as causal kernel times of
    one 16k-token batch (B = 16384 / S, hidden 2048: 2048 / ``head_dim`` heads).  The paper measures
    the backward without the causal mask; the causal backward is taken to lose what the causal
    forward loses at the same S (causal / non-causal forward TFLOP/s): both passes skip the same
    masked tiles and run the same partly masked diagonal tiles.

    Raises:
        ValueError: the table is missing.
    """
    rows = _numeric_table(text, title)
    heads = 2048 // head_dim
    s, fwd_s, bwd_s = [], [], []
    for S, fwd, fwd_c, bwd in rows:
        fl = 2.0 * (16384 / S) * heads * S ** 2 * head_dim        # causal forward: half of 4 B H S^2 D
        s.append(int(S))
        fwd_s.append(fl / (fwd_c * 1e12))
        bwd_s.append(2.5 * fl / (bwd * fwd_c / fwd * 1e12))
    return dict(shape=(1, heads, head_dim), s=s, fwd_s=fwd_s, bwd_s=bwd_s, tokens=16384)


def _fa_papers(text: str) -> dict:
    """The FlashAttention-3 paper's tables of the kernel file by name (see :func:`fa_kernel_times`)."""
    return {"fa2_h100": _fa_paper(text, "## [fa2_h100] FlashAttention-2, head dim 128, TFLOP/s", 128),
            "fa2_h100_d64": _fa_paper(text, "## [fa2_h100] FlashAttention-2, head dim 64, TFLOP/s", 64),
            "fa3_paper_h100_d64": _fa_paper(text, "## [fa3_paper_h100] FlashAttention-3, head dim 64, TFLOP/s", 64),
            "fa3_paper_h100_d128": _fa_paper(text, "## [fa3_paper_h100] FlashAttention-3, head dim 128, TFLOP/s", 128),
            "cudnn_h100": _fa_paper(text, "## [cudnn_h100] cuDNN, head dim 128, TFLOP/s", 128),
            "cudnn_h100_d64": _fa_paper(text, "## [cudnn_h100] cuDNN, head dim 64, TFLOP/s", 64)}


# ------------------------------------------------------------------------------ points of the fits
def gemm_points(rows, src):
    """Rows with b (default 1), m, n, k, time_s -> arrays dict for :func:`costmodel.fit.primitives.fit_gemm`."""
    return dict(b=[r.get("b", 1) for r in rows], m=[r["m"] for r in rows], n=[r["n"] for r in rows],
                k=[r["k"] for r in rows], t=[r["time_s"] for r in rows], src=[src] * len(rows))


def concat(*ds):
    """One points dict of several (:func:`gemm_points`)."""
    return {c: sum((list(d[c]) for d in ds), []) for c in ("b", "m", "n", "k", "t", "src")}


def mamf_point(mamf, accel, dtype):
    """One MAMF best-shape measurement as a GEMM point (time = 2mnk / MAMF)."""
    r = next(x for x in mamf if x["accelerator"] == accel and x["dtype"] == dtype)
    return [dict(m=r["m"], n=r["n"], k=r["k"], time_s=2.0 * r["m"] * r["n"] * r["k"] / r["mamf_flops"])]


def xla_coll(D, arch, coll, group_size=8):
    """(n, t, src) of one collective from the XLA table: the rows of ``group_size`` ranks (8 // group_size
    groups at once, the whole 8-GPU node busy; all permute rows for send_recv)."""
    rows = [r for r in D["xla_coll"][arch] if r["collective"] == coll
            and (coll == "send_recv" or (r["num_groups"] * group_size == 8 and r["group_size"] == group_size))]
    return [r["size_bytes"] for r in rows], [r["time_s"] for r in rows], ["xla_coll"] * len(rows)


def busbw_points(coll, sizes, busbw, src, g=8):
    """nccl-tests busbw (B/s) -> (n, t, src) with time t = f(g) * size / busbw."""
    f = float(busbw_factor(coll, g))
    return list(map(float, sizes)), [f * s / b for s, b in zip(sizes, busbw)], [src] * len(sizes)


def join(*parts):
    """Concatenate (n, t, src) triples."""
    n, t, s = [], [], []
    for a, b, c in parts:
        n, t, s = n + list(a), t + list(b), s + list(c)
    return n, t, s
