"""Fit the ``power:`` and ``thermal:`` sections of the built-in profiles from public power traces.

Called by ``python -m costmodel.fit.builtin`` (:func:`build_power_thermal`); every input is a verbatim
copy under ``hardware/profiles/data/`` with its source header.  Model (``costmodel/power.py``):

    P = idle_w + flop_w u_flop + hbm_w u_hbm + link_w u_link

with u_flop = achieved FLOP/s / dense tensor peak of the dtype, u_hbm = achieved HBM B/s / datasheet
bandwidth, u_link = achieved busbw / link rate; under a cap the SM clock ratio s solves
static_w + (P - static_w) g(s) = cap, with g(s) = s^gamma above the voltage-floor clock ratio s_v and linear
below it (costmodel/power.py), and compute-bound time grows as 1/s.  Thermal (per slot): steady T = T_inlet + R_th P, first order with time constant tau.

What is fitted, from what (details in each function's docstring and in every profile's ``fit:``):

* **H100 idle_w**: median power of the samples at 0 % utilisation of the 8x H100 GPT-8B DDP
  nvidia-smi trace (the GPUs waiting with clocks up); the median at >= 90 % utilisation is the
  training-load cross-check for the TDP-scaled dynamic terms.
* **H100 spin_w**: the same trace while rank 0 writes a checkpoint: ranks 1-7 wait in NCCL (100 %
  utilisation, kernels spinning) at ~34 W above idle; spin_w of other GPUs scales by TDP.
* **A100 idle_w, hbm_w, flop_w, link_w**: one ``scipy.optimize.least_squares`` over FlagPerf A100-40GB
  rows: low-activity runs (host-to-device, inter-server P2P: SMs idle) for idle; memory-bound operator
  runs whose bytes per element follow from the op (unary 2, binary 3, comparison 2 + a 1-byte bool,
  reduction 1 access) and the random-data HBM copy benchmark for hbm_w; the 8-GPU NCCL all-reduce runs
  for link_w; the random-data 8192^3 GEMMs, which run pinned at the 400 W limit, for flop_w through the
  model's own DVFS law (their throughput under the cap vs the same GEMM's full-clock throughput
  measured by the zero-filled cuBLAS toolkit, which stays below the limit).
* **gamma, v_floor_clock_ratio**: Perseus (SOSP'24) locked-clock sweeps of a GPT-3 175B and a BLOOM
  pipeline stage on A100 SXM (forward and backward, 1410-855 MHz): P = E/t against the clock, fitted
  per sweep (costmodel/fit/builtin/dvfs.py); the medians go to every GPU (borrowed by the others as a
  fraction of their own maximum clock).
* **static_w** (costmodel/fit/builtin/static_power.py): the part of idle_w that does not fall with the
  clock, from each GPU file's idle capture (no process, lowest clock) under the DVFS law; GPUs without
  a capture borrow their source's share static_w / idle_w.  The A100's is checked against the Perseus
  sweeps' clock-independent intercept and a hung job's no-kernel GPU at 1155 MHz.
* **gamma check**: Zeus (NSDI'23) time and average power vs power limit for V100, A40, RTX6000, P100
  (whole training runs under power limits, kept out of the fit).  The compute-bound fraction c of
  each workload and gamma are degenerate (stretch ~ c/gamma); with c <= 1 each sweep bounds gamma
  from above, the bound of the most clock-bound sweep (c = 1), over limits >= 50 % of the largest;
  the median of the four GPUs (2.41) lies within 5 % of the locked-clock gamma.
* **R_th**: FlagPerf A100 single-GPU operator runs, average temperature vs average power,
  T = T0 + R_th P by least squares (R^2 reported).  tau = R_th x C with C the heatsink heat capacity
  (DERIVED, see :data:`HEATSINK`).
* **B200 idle_w, flop_w**: a public 8x B200 characterisation (serving power at < 10 % utilisation;
  sustained BF16 GEMMs pinned at 1000 W at their own clocks): costmodel/fit/builtin/b200.py.
* Other GPUs (costmodel/fit/builtin/variants.py): same-die variants (A100 PCIe, H100 PCIe/NVL,
  GH200, A800, H800) scale each coefficient by what sets it (SMs x g(clock ratio), bandwidths);
  other dies (B200's remaining terms, L40S, MI250, MI300X, V100) scale by TDP; idle from the parts'
  idle captures where both GPU files give one (``derived_from`` + ``note``).

The published training-throughput tables are never read here.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np
from scipy.optimize import least_squares

from costmodel.gemm import gemm_bytes
from costmodel.readers.flagperf import read_flagperf_base_md, read_flagperf_operator_csv
from costmodel.readers.nvidia_smi import read_nvidia_smi_csv
from costmodel.readers.nvidia_smi_q import column as q_column, read_nvidia_smi_q
from costmodel.power import ratio_under_cap
from costmodel.readers.perseus import read_perseus_stage_profile
from costmodel.readers.zeus import read_zeus_csv
from costmodel.specs import load_gpu

from .data import path as _p
from .dvfs import fit_dvfs
from .static_power import a100_cross_checks, static_from_capture, static_section
from .zeus_check import ZEUS_GPUS, fit_zeus_gamma, zeus_record as _zeus_record
from .data import rel as _rel
from .b200 import power_b200
from .msmf import flop_w_from_msmf, read_msmf_table
from .variants import VARIANTS, idle_w, power_source, same_die_factors

PERSEUS = {"gpt3": "gpt3-175b", "bloom": "bloom"}     # Perseus A100 SXM locked-clock stage sweeps

# FlagPerf's GPU: A100-SXM4-40GB (the A100 profile is the 80GB SXM4 part, same GA100 die and 400 W TDP).
A100_40 = dict(tensor_peak={"BF16": 312e12, "FP16": 312e12}, hbm_bps=1555e9, link_bps=300e9, tdp_w=400.0,
               source="NVIDIA A100 datasheet, A100 40GB SXM column: BF16/FP16 tensor 312 TFLOPS dense, GPU memory "
                      "bandwidth 1,555 GB/s, NVLink 600 GB/s bidirectional (300 GB/s per direction), max TDP 400 W")
BYTES = {"BF16": 2, "FP16": 2, "FP32": 4, "INT16": 2, "INT32": 4}
# bytes moved per element, as multiples of the element size, plus fixed bytes (1-byte bool outputs)
OP_TRAFFIC = {**{op: (2, 0) for op in ("abs", "neg", "exp", "cos", "sin", "reciprocal", "rsqrt", "pow", "mul",
                                       "div", "gelu", "bitwise_not")},
              **{op: (3, 0) for op in ("add", "sub", "rsub", "bitwise_and", "bitwise_or")},
              **{op: (2, 1) for op in ("eq", "ne", "lt", "le", "gt", "ge")},
              **{op: (1, 0) for op in ("sum", "mean", "max", "min", "prod", "all")}}
MIN_RUN_S = 60.0  # operator runs shorter than this have a single power sample and an unsettled temperature
LOW_ACTIVITY = ("interconnect-h2d", "interconnect-P2P_interserver")

# Heat capacity of an SXM air heatsink for tau = R_th C (no time series of temperature is public).
HEATSINK = dict(mass_kg=1.5, c_j_per_kg_k=900.0,
                note="ASSUMED: no public mass of an A100/H100 SXM air heatsink was found; 1.5 kg of "
                     "aluminium-equivalent fin stack with a copper/vapour-chamber base (order of magnitude of a "
                     "4U-class passive GPU heatsink), c = 900 J/(kg K) (aluminium); C = 1.5 x 900 = 1350 J/K")


def _r(x, sig=4):
    return float(f"{float(x):.{sig}g}")


def _r2(pred, meas):
    pred, meas = np.asarray(pred, float), np.asarray(meas, float)
    return 1.0 - float(np.sum((pred - meas) ** 2)) / float(np.sum((meas - meas.mean()) ** 2))


def load(data=None):
    """Read every power/thermal input (readers are strict: a bad line raises, naming file and line)."""
    return dict(h100=read_nvidia_smi_csv(_p("h100_trace", data), n_gpus=8),
                a100_wait=read_nvidia_smi_q(_p("a100_wait", data)),
                ops=read_flagperf_operator_csv(_p("flagperf_ops", data)),
                base=read_flagperf_base_md(_p("flagperf_base", data)),
                zeus={g: read_zeus_csv(_p(f"zeus_{g}", data)) for g in ZEUS_GPUS},
                perseus={m: read_perseus_stage_profile(_p(f"perseus_{k}", data)) for k, m in PERSEUS.items()})


# ----------------------------------------------------------------------------------------------- H100

def fit_h100_trace(trace):
    """Idle, waiting and loaded power of the 8x H100 GPT-8B DDP trace (nvidia-smi, 100 ms).

    Returns dict: idle_w (median power of samples at utilization.gpu == 0), loaded_w (median at
    >= 90 %), n_idle, n_loaded, idle_iqr_w, loaded_p95_w, n_samples, and the waiting power:
    wait_w (median power of GPUs 1-7 at 100 % utilisation in the samples where GPU 0 is at
    <= 10 %: rank 0 writes a checkpoint every 200 steps while the other ranks' NCCL kernels spin
    in the next collective, ``nvidia-smi`` counting a spinning kernel as 100 % busy; a sample
    counts only with its neighbours in the same state, so no transition is averaged in), n_wait,
    n_wait_windows, wait_iqr_w; spin_w = wait_w - idle_w.  The 0 % samples are bimodal: ~70 W
    before the job starts (clocks parked) and ~122 W once the job holds the GPUs; the median is
    the latter (the model's idle_w: context up, no kernel running).
    """
    p, u = trace.column("power.draw"), trace.column("utilization.gpu")
    ok = np.isfinite(p) & np.isfinite(u)
    idle, load_ = p[ok & (u == 0)], p[ok & (u >= 90)]
    n = len(p) // 8 * 8
    P, U = p[:n].reshape(-1, 8), u[:n].reshape(-1, 8)
    state = (U[:, 0] <= 10) & (U[:, 1:] >= 99).all(axis=1)       # rank 0 on the host, the rest in NCCL
    steady = state & np.roll(state, 1) & np.roll(state, -1)
    steady[[0, -1]] = False
    wait = P[steady, 1:].ravel()
    edges = np.flatnonzero(np.diff(steady.astype(int)) == 1)
    idle_w, wait_w = float(np.median(idle)), float(np.median(wait))
    return dict(idle_w=idle_w, loaded_w=float(np.median(load_)), n_idle=int(idle.size),
                n_loaded=int(load_.size), idle_iqr_w=[_r(np.percentile(idle, 25)), _r(np.percentile(idle, 75))],
                loaded_p95_w=_r(np.percentile(load_, 95)), n_samples=int(ok.sum()),
                wait_w=wait_w, n_wait=int(wait.size), n_wait_windows=int(len(edges)),
                wait_iqr_w=[_r(np.percentile(wait, 25)), _r(np.percentile(wait, 75))], spin_w=wait_w - idle_w)


def fit_a100_wait(q):
    """Waiting power of 8x A100-SXM4-80GB from one ``nvidia-smi -q`` snapshot of a hung job: GPUs at
    100 % utilisation wait in an NCCL barrier (kernels spinning at the maximum clock), the GPU at 0 %
    has a context and no kernel (its clock dropped to the default application clock).

    Returns dict: wait_w (median power of the spinning GPUs), held_idle_w (median of the 0 % ones),
    n_wait, n_idle, wait_clock_mhz, idle_clock_mhz, wait_voltage_mv, idle_voltage_mv.
    Raises:
        ValueError: no GPU in one of the two states.
    """
    p, u = q_column(q, "power_w"), q_column(q, "util_gpu_pct")
    f, v = q_column(q, "sm_clock_mhz"), q_column(q, "voltage_mv")
    w, i = u >= 99, u <= 1
    if not w.any() or not i.any():
        raise ValueError(f"{q.path}: needs GPUs at 100 % and at 0 % utilisation")
    return dict(wait_w=float(np.median(p[w])), held_idle_w=float(np.median(p[i])), n_wait=int(w.sum()),
                n_idle=int(i.sum()), wait_clock_mhz=float(np.median(f[w])), idle_clock_mhz=float(np.median(f[i])),
                wait_voltage_mv=float(np.median(v[w])), idle_voltage_mv=float(np.median(v[i])))


# ---------------------------------------------------------------------------------------------- gamma

# ----------------------------------------------------------------------------------------------- A100

def _loaded_level(avg, std, idle, mx):
    """Loaded power of a run that alternates between idle and one loaded level, from its mean and std.

    mean = idle + f d, std^2 = f (1 - f) d^2  =>  d = (mean - idle) + std^2 / (mean - idle); capped at the
    reported maximum sample.  FlagPerf's averages include set-up and teardown at idle (std 10-30 % of the
    mean, versus ~1-2 % for the steady operator runs).
    """
    d = max(avg - idle, 1e-6)
    return min(avg + std * std / d, mx)


def a100_rows(ops, base):
    """Select and annotate the FlagPerf rows used by :func:`fit_a100_power` (see its docstring)."""
    hbm = A100_40["hbm_bps"]
    mem = []
    for r in ops:
        if r.op not in OP_TRAFFIC or r.config.get("Melements") != 1024 or r.duration_s < MIN_RUN_S:
            continue
        mult, extra = OP_TRAFFIC[r.op]
        n = 1024 * 2 ** 20
        u = n * (mult * BYTES[r.dtype] + extra) / r.time_kernel_s / hbm
        mem.append(dict(name=f"{r.op}/{r.dtype}/{r.impl}", u_hbm=u, p=r.gpu_avg_power_w, line=r.line))
    by = {(b.suite, b.test): b for b in base}
    idle_rows = [dict(name=f"{s}/{t}", p=by[s, t].gpu_avg_power_w) for s in ("toolkits", "benchmarks") for t in LOW_ACTIVITY]
    copy = by["benchmarks", "main_memory-bandwidth"]
    copy_row = dict(name="benchmarks/main_memory-bandwidth", u_hbm=copy.results[0]["measured"] / hbm,
                    avg=copy.gpu_avg_power_w, std=copy.gpu_power_std_w, max=copy.gpu_max_power_w)
    ar = []
    for s in ("toolkits", "benchmarks"):
        b = by[s, "interconnect-MPI_intraserver"]
        res = next(x for x in b.results if x["ratio"] is not None)  # measured / 600 GB/s bidirectional NVLink3
        ar.append(dict(name=f"{s}/interconnect-MPI_intraserver", u_link=res["ratio"], avg=b.gpu_avg_power_w,
                       std=b.gpu_power_std_w, max=b.gpu_max_power_w))
    gemm = []
    for dt in ("BF16", "FP16"):
        r = next(x for x in ops if x.op == "mm" and x.dtype == dt and x.impl == "nativetorch")
        full = by["toolkits", f"computation-{dt}"].results[0]["ratio"]
        m, nn, k = r.config["M"], r.config["N"], r.config["K"]
        gemm.append(dict(name=f"mm/{dt}/nativetorch {m}x{nn}x{k}", u_meas=r.flops_kernel / A100_40["tensor_peak"][dt],
                         u_full=full, h_meas=gemm_bytes(m, nn, k, 1.0, BYTES[dt]) / r.time_kernel_s / hbm,
                         p=r.gpu_avg_power_w))
    return dict(mem=mem, idle=idle_rows, copy=copy_row, allreduce=ar, gemm=gemm)


def fit_a100_power(ops, base, gamma, v_floor=0.0, static_of=None):
    """Joint least-squares fit of idle_w, hbm_w, link_w, flop_w on FlagPerf A100-40GB-SXM data.

    Residual blocks (relative errors, soft_l1 loss):

    * idle: host-to-device and inter-server P2P runs (toolkit and PyTorch benchmark): the SMs idle,
      only DMA traffic; measured average = idle_w.
    * HBM: operator runs (>= 60 s, 2^30 elements) with u_hbm from the op's bytes per element and the
      kernel time, u_flop = 0 (elementwise work runs on CUDA cores, not tensor cores; the model puts
      memory-bound phases at idle + hbm_w u_hbm); plus the 8-GPU PyTorch HBM copy (torch.rand data) at
      its loaded level (:func:`_loaded_level`).  The toolkit copy (cudaMemcpy of never-written,
      zero-filled buffers by the copy engines) is a cross-check only.
    * link: the 8-GPU NCCL all-reduce runs (toolkit ncclAllReduce, benchmark torch.all_reduce), u_link =
      FlagPerf's measured / 600 GB/s bidirectional ratio (= busbw / 300 GB/s per direction), at their
      loaded level.
    * flop: torch.mm 8192^3 BF16 and FP16 with random operands run pinned at the 400 W limit; the
      toolkit's cuBLAS 8192^3 GEMM with zero-filled operands stays below it (280-315 W max) and gives
      the full-clock efficiency u_full.  Residual: model-predicted throughput under the cap, u_full x
      s(P_uncapped, 400 W, gamma), vs the measured one; P_uncapped = idle + flop_w u_full + hbm_w h_full;
      ``static_of(idle)`` gives the clock-independent power of the DVFS law (default: idle itself).
    Returns:
        (params dict, fit record dict)
    """
    R = a100_rows(ops, base)
    cap = A100_40["tdp_w"]
    mem_u = np.array([m["u_hbm"] for m in R["mem"]])
    mem_p = np.array([m["p"] for m in R["mem"]])
    idle_p = np.array([m["p"] for m in R["idle"]])
    g = R["gemm"]

    def parts(x):
        idle, hbm_w, link_w, flop_w = x
        c = R["copy"]
        pc = _loaded_level(c["avg"], c["std"], idle, c["max"])
        pa = np.array([_loaded_level(a["avg"], a["std"], idle, a["max"]) for a in R["allreduce"]])
        ua = np.array([a["u_link"] for a in R["allreduce"]])
        s_meas = np.array([q["u_meas"] / q["u_full"] for q in g])
        p_unc = idle + np.array([flop_w * q["u_full"] + hbm_w * q["h_meas"] / sm for q, sm in zip(g, s_meas)])
        s_mod = ratio_under_cap(p_unc, cap, static_of(idle) if static_of else idle, gamma, v_floor)
        u_mod = np.array([q["u_full"] for q in g]) * s_mod
        return dict(idle_pred=np.full_like(idle_p, idle), mem_pred=idle + hbm_w * mem_u,
                    copy_pred=idle + hbm_w * c["u_hbm"], copy_meas=pc, ar_pred=idle + link_w * ua, ar_meas=pa,
                    gemm_u_pred=u_mod, gemm_u_meas=np.array([q["u_meas"] for q in g]), p_unc=p_unc)

    def res(x):
        q = parts(x)
        return np.concatenate([q["idle_pred"] / idle_p - 1, q["mem_pred"] / mem_p - 1,
                               [q["copy_pred"] / q["copy_meas"] - 1], q["ar_pred"] / q["ar_meas"] - 1,
                               q["gemm_u_pred"] / q["gemm_u_meas"] - 1])

    sol = least_squares(res, [80.0, 200.0, 100.0, 400.0], bounds=([0, 0, 0, 0], [cap, 2 * cap, cap, 3 * cap]),
                        loss="soft_l1", f_scale=0.05)
    idle, hbm_w, link_w, flop_w = sol.x
    q = parts(sol.x)
    p_pred = np.concatenate([q["idle_pred"], q["mem_pred"], [q["copy_pred"]], q["ar_pred"]])
    p_meas = np.concatenate([idle_p, mem_p, [q["copy_meas"]], q["ar_meas"]])
    rel = np.abs(p_pred / p_meas - 1)
    mrel = np.abs(q["mem_pred"] / mem_p - 1)
    # cross-checks not fitted
    by = {(b.suite, b.test): b for b in base}
    tk = by["toolkits", "main_memory-bandwidth"]
    tk_u = tk.results[0]["measured"] / A100_40["hbm_bps"]
    p2p = {s: by[s, "interconnect-P2P_intraserver"] for s in ("toolkits", "benchmarks")}
    lb_flop = float(np.mean([(q_["p"] - idle - hbm_w * q_["h_meas"]) / q_["u_meas"] for q_ in g]))
    inputs = [_rel("flagperf_ops"), _rel("flagperf_base")]
    rec = dict(
        data="FlagPerf (BAAI) on 1 DGX A100 (A100-SXM4-40GB, 400 W): operator benchmarks and base "
             "toolkits/benchmarks with per-GPU power and temperature monitoring",
        method="scipy least_squares (soft_l1, relative residuals) of P = idle + flop_w u_flop + hbm_w u_hbm + "
               "link_w u_link jointly over idle, memory-bound, all-reduce and capped-GEMM rows; gamma fixed "
               f"({gamma:.3g}); markdown runs at their loaded level mean + std^2/(mean - idle) (two-level "
               "idle/loaded mixture), capped at the reported maximum",
        inputs=inputs, n_points=int(len(p_meas) + len(g)),
        r2_power=_r(_r2(p_pred, p_meas)), median_rel_err_power=_r(np.median(rel), 3), max_rel_err_power=_r(rel.max(), 3),
        idle_w=dict(n_points=len(idle_p), measured_w=[_r(x) for x in idle_p], max_rel_err=_r(np.max(np.abs(idle / idle_p - 1)), 3),
                    rows=[r["name"] for r in R["idle"]],
                    note="host-to-device / inter-server P2P runs: SMs idle, clocks up, DMA only (an upper bound of "
                         "idle; nvidia-smi on A100-SXM4-80GB shows 84-87 W for GPUs spinning in an NCCL barrier and "
                         "68 W fully idle, huggingface/m4-logs tr_141-hanging/tr_141_cm409xPMD01_scale_leap_of_faith_"
                         "v5_num_workers_0-try3/README.md)"),
        hbm_w=dict(n_points=len(mem_p) + 1, r2=_r(_r2(np.r_[q["mem_pred"], q["copy_pred"]], np.r_[mem_p, q["copy_meas"]])),
                   median_rel_err=_r(np.median(mrel), 3), max_rel_err=_r(np.max(np.r_[mrel, abs(q["copy_pred"] / q["copy_meas"] - 1)]), 3),
                   u_hbm_range=[_r(mem_u.min(), 3), _r(mem_u.max(), 3)], hbm_datasheet_bytes_per_s=A100_40["hbm_bps"],
                   copy_benchmark=dict(u_hbm=_r(R["copy"]["u_hbm"], 3), loaded_w=_r(q["copy_meas"]), pred_w=_r(q["copy_pred"])),
                   note="the per-op scatter (+-15 %: FlagGems Triton kernels draw 20-40 W more than PyTorch's at the "
                        "same bandwidth; transcendental ops more than copies) is what a bandwidth-only term cannot "
                        "explain; cross-check (not fitted): the zero-filled copy-engine toolkit copy at u_hbm "
                        f"{tk_u:.3f} draws {_loaded_level(tk.gpu_avg_power_w, tk.gpu_power_std_w, idle, tk.gpu_max_power_w):.0f} W "
                        f"vs {idle + hbm_w * tk_u:.0f} W predicted"),
        link_w=dict(n_points=len(q["ar_meas"]), u_link=[_r(a["u_link"], 3) for a in R["allreduce"]],
                    loaded_w=[_r(x) for x in q["ar_meas"]], pred_w=[_r(x) for x in q["ar_pred"]],
                    max_rel_err=_r(np.max(np.abs(q["ar_pred"] / q["ar_meas"] - 1)), 3),
                    note="an all-reduce phase's whole power above idle (NVLink, HBM and SM reduction traffic) is "
                         "charged to u_link, as the model's exposed-communication phase does; cross-check (not fitted): "
                         "2-GPU cudaMemcpy peer copies (copy engines) at u "
                         f"{p2p['toolkits'].results[0]['ratio']:.3f}/{p2p['benchmarks'].results[0]['ratio']:.3f} draw "
                         f"{_loaded_level(p2p['toolkits'].gpu_avg_power_w, p2p['toolkits'].gpu_power_std_w, idle, p2p['toolkits'].gpu_max_power_w):.0f}/"
                         f"{_loaded_level(p2p['benchmarks'].gpu_avg_power_w, p2p['benchmarks'].gpu_power_std_w, idle, p2p['benchmarks'].gpu_max_power_w):.0f} W"),
        flop_w=dict(n_points=len(g), rows=[x["name"] for x in g], u_capped=[_r(x["u_meas"], 3) for x in g],
                    u_full_clock=[_r(x["u_full"], 3) for x in g], u_capped_pred=[_r(x, 3) for x in q["gemm_u_pred"]],
                    max_rel_err_throughput=_r(np.max(np.abs(q["gemm_u_pred"] / q["gemm_u_meas"] - 1)), 3),
                    uncapped_power_pred_w=[_r(x) for x in q["p_unc"]], measured_capped_w=[_r(x["p"]) for x in g],
                    lower_bound_w=_r(lb_flop),
                    note="the random-operand GEMMs sit at the 400 W limit, so their power only bounds flop_w from below "
                         f"({lb_flop:.0f} W if they were just at the limit at full clock); the value is the one whose "
                         "DVFS slowdown reproduces their throughput below the toolkit's full-clock efficiency "
                         "(base/toolkits/computation-*/nvidia/A100/gemm.cu allocates its operands with "
                         "cudaMallocManaged and never writes them: zero operands, low toggle power, no throttling)"))
    return dict(idle_w=float(idle), hbm_w=float(hbm_w), link_w=float(link_w), flop_w=float(flop_w)), rec


def fit_a100_thermal(ops, base):
    """R_th and inlet intercept of the A100 from FlagPerf: T_avg = T0 + R_th P_avg by least squares.

    Fitted rows: single-GPU operator runs of >= 60 s in a DGX A100 (the other 7 GPUs idle, so no preheat
    from neighbours).  Time averages are consistent for a first-order system (mean T = T0 + R_th mean P
    over a run that starts and ends near the same temperature).  Cross-check: the same fit over the base
    toolkits/benchmarks (8- and 16-GPU runs included, neighbours loaded).
    """
    rows = [r for r in ops if r.duration_s >= MIN_RUN_S]
    P = np.array([r.gpu_avg_power_w for r in rows])
    T = np.array([r.gpu_avg_temp_c for r in rows])
    A = np.c_[np.ones_like(P), P]
    (t0, rth), *_ = np.linalg.lstsq(A, T, rcond=None)
    pred = A @ np.array([t0, rth])
    b = [x for x in base if x.gpu_avg_temp_c is not None and x.gpu_avg_power_w is not None]
    Pb = np.array([x.gpu_avg_power_w for x in b])
    Tb = np.array([x.gpu_avg_temp_c for x in b])
    Ab = np.c_[np.ones_like(Pb), Pb]
    (t0b, rthb), *_ = np.linalg.lstsq(Ab, Tb, rcond=None)
    return dict(r_th=float(rth), t0=float(t0), n=len(rows), r2=_r2(pred, T), rmse=float(np.sqrt(np.mean((pred - T) ** 2))),
                max_abs_err=float(np.max(np.abs(pred - T))), p_range=[float(P.min()), float(P.max())],
                base_r_th=float(rthb), base_t0=float(t0b), base_r2=_r2(Ab @ np.array([t0b, rthb]), Tb), base_n=len(b))


# ------------------------------------------------------------------------------------------- profiles
class _Fits(NamedTuple):
    """The power/thermal fits every GPU's sections are made from (see :func:`build_power_thermal`)."""

    h: dict          # fit_h100_trace
    aw: dict         # fit_a100_wait
    a: dict          # fit_a100_power parameters
    arec: dict       # fit_a100_power record
    th: dict         # fit_a100_thermal
    gamma: float     # median over the Perseus locked-clock sweeps
    v_floor: float   # voltage-floor clock ratio, median over the same sweeps
    dvfs_rec: dict   # the gamma / v_floor fit record
    zeus_rec: dict   # the Zeus power-limit check of gamma
    a100_in: list    # inputs of the A100 fits (FlagPerf, Zeus)
    tdp_a: float     # FlagPerf A100's TDP, W
    tdp_h: float     # H100's TDP (hardware/gpus/h100-sxm-80gb.yaml), W
    dvfs: dict       # fit_dvfs (per-sweep P_0: the A100 static power's cross-check)


def _tdp_hbm(gpus):
    out = {}
    for g in gpus:
        s = load_gpu(g)
        out[g] = (s.tdp_w, s.hbm_bytes_per_s)
    return out


def _thermal_section(gname, tdp, fits: _Fits):
    """``thermal:`` of one GPU: the A100 fit, or R_th x TDP held at the A100's value; tau = R_th x C."""
    th, tdp_a = fits.th, fits.tdp_a
    rth = th["r_th"] * tdp_a / tdp
    tau = rth * HEATSINK["mass_kg"] * HEATSINK["c_j_per_kg_k"] * tdp / tdp_a
    base = dict(r_th_c_per_w=_r(rth, 3), tau_s=_r(tau, 3))
    tau_note = (f"tau_s DERIVED = R_th x C: C = {HEATSINK['mass_kg']} kg x {HEATSINK['c_j_per_kg_k']:.0f} J/(kg K) = "
                f"{HEATSINK['mass_kg'] * HEATSINK['c_j_per_kg_k']:.0f} J/K for the 400 W A100 heatsink "
                f"({HEATSINK['note'].split(' C = ')[0]}), scaled with TDP for larger heatsinks; no public time series "
                "of GPU temperature exists in the data set (a temperature step response from `costmodel calibrate` "
                "replaces it)")
    if gname == "a100-sxm-80gb":
        base["fit"] = dict(
            data="FlagPerf A100-SXM4-40GB single-GPU operator runs in a DGX A100 (other 7 GPUs idle)",
            method="least squares T_avg = T0 + R_th P_avg over runs >= 60 s (time averages of a first-order system)",
            n_points=th["n"], r2=_r(th["r2"], 3), rmse_c=_r(th["rmse"], 3), max_abs_err_c=_r(th["max_abs_err"], 3),
            t0_c=_r(th["t0"], 3), power_range_w=[_r(x) for x in th["p_range"]], inputs=[_rel("flagperf_ops")],
            cross_check=dict(data="FlagPerf base toolkits/benchmarks (1-16 GPUs, neighbours loaded in 8-GPU runs)",
                             n_points=th["base_n"], r_th_c_per_w=_r(th["base_r_th"], 3), t0_c=_r(th["base_t0"], 3),
                             r2=_r(th["base_r2"], 3), inputs=[_rel("flagperf_base")]))
        base["derived_from"] = "tau_s: R_th x heatsink heat capacity (DERIVED)"
        base["note"] = ("R_th is junction (nvidia-smi GPU temperature) rise per W over the intercept T0 (the DGX "
                        "A100's GPU inlet during the runs, not measured) at the DGX A100's own fan control; "
                        "measured on the 40GB SXM4 part (same GA100 die, 400 W, SXM4 heatsink). " + tau_note +
                        f". Cross-check: the base runs (1-16 GPUs) give a steeper slope ({th['base_r_th']:.3f}), "
                        "consistent with loaded neighbours preheating the rear row, but they ran on other dates at "
                        "unknown inlet temperatures, so they are not fitted.")
    else:
        base["derived_from"] = "a100-sxm-80gb:thermal"
        base["note"] = (f"DERIVED: no temperature data for this GPU; R_th = A100 fit {th['r_th']:.4f} C/W x 400 W / "
                        f"{tdp:.0f} W TDP (heatsink and airflow sized for the same junction rise at TDP), "
                        "i.e. R_th x TDP held at the A100's value. " + tau_note)
    return base


def _a100_spin_w(fits: _Fits) -> float:
    """A100 spin_w: the hung job's waiting power over the fitted idle_w (the idle fit is the DMA-only
    baseline, so the difference is what waiting adds to it), never negative."""
    return max(fits.aw["wait_w"] - fits.a["idle_w"], 0.0)


def _spin_record(fits: _Fits) -> dict:
    """The ``fit.spin_w`` record: waiting power of the H100 trace (:func:`fit_h100_trace`)."""
    h = fits.h
    return dict(data="8x H100 80GB (Azure) GPT-8B PyTorch DDP training, nvidia-smi at 100 ms (grantwilkins/"
                     "training_profile): every 200 steps rank 0 writes a checkpoint while ranks 1-7 wait in NCCL",
                method="median power of GPUs 1-7 at 100 % utilisation (a spinning NCCL kernel) in the samples "
                       "where GPU 0 is at <= 10 % and both neighbouring samples are in the same state, minus idle_w",
                n_points=h["n_wait"], n_windows=h["n_wait_windows"], wait_w=_r(h["wait_w"]), wait_iqr_w=h["wait_iqr_w"],
                value_w=_r(h["spin_w"]), inputs=[_rel("h100_trace")])


def _with_static(power: dict, spec, fits: _Fits, source: tuple | None = None, checks: dict | None = None) -> dict:
    """``power`` with ``static_w`` (after idle_w), its basis and its ``fit.static_w`` record
    (costmodel/fit/builtin/static_power.py; ``spec`` the GPU whose idle capture it comes from)."""
    val, basis, rec = static_section(spec, power["idle_w"], fits.gamma, fits.v_floor, source)
    out = {}
    for k, v in power.items():
        if k == "static_w":
            continue
        out[k] = v
        if k == "idle_w":
            out["static_w"] = val
    out["basis"] = dict(power.get("basis") or {}, static_w=basis)
    out["fit"] = dict(power.get("fit") or {}, static_w=dict(rec, **({"cross_check": checks} if checks else {})))
    return out


def _power_a100(g, fits: _Fits):
    """``power:`` of the A100s: the FlagPerf fit (40GB part) used unchanged."""
    a = fits.a
    note = ("Fitted on this part, the A100-SXM4-40GB (FlagPerf)." if g == "a100-sxm-40gb" else
            "Fitted on the A100-SXM4-40GB (FlagPerf); the 80GB SXM4 part has the same GA100 die, SMs, "
            "clocks, NVLink and 400 W TDP, so the coefficients are used unchanged (TDP rule, ratio 1). hbm_w "
            "is per unit of each part's own datasheet bandwidth (1,555 GB/s in the fit, 2,039 GB/s "
            "here), i.e. HBM2e is taken to move its 31 % more bytes at the same power.")
    aw = fits.aw
    spin = _a100_spin_w(fits)
    spin_rec = dict(data="8x A100-SXM4-80GB (Jean Zay), nvidia-smi -q of a hung job: 7 GPUs wait in an NCCL "
                         "barrier (100 % utilisation), 1 GPU's process is stuck in a file-system call (huggingface/"
                         "m4-logs)", method="median power of the waiting GPUs minus the fitted idle_w",
                    n_points=aw["n_wait"], wait_w=_r(aw["wait_w"]), value_w=_r(spin), inputs=[_rel("a100_wait")],
                    held_idle_w=_r(aw["held_idle_w"]), clocks_mhz=dict(waiting=aw["wait_clock_mhz"],
                                                                        no_kernel=aw["idle_clock_mhz"]),
                    voltage_mv=dict(waiting=aw["wait_voltage_mv"], no_kernel=aw["idle_voltage_mv"]),
                    cross_check=f"the H100 trace's spin_w x 400/700 W TDP = {fits.h['spin_w'] * fits.tdp_a / fits.tdp_h:.1f} "
                                f"W vs this capture's waiting minus no-kernel power {aw['wait_w'] - aw['held_idle_w']:.1f} W",
                    note="the fitted idle_w (FlagPerf DMA-only runs, an upper bound of idle) is close to the waiting "
                         "level; a GPU with no kernel drops to its default application clock and draws "
                         f"{aw['held_idle_w']:.0f} W, one spinning in NCCL holds the maximum clock")
    power = dict(idle_w=_r(a["idle_w"]), flop_w=_r(a["flop_w"]), hbm_w=_r(a["hbm_w"]),
                 link_w=_r(a["link_w"]), spin_w=_r(spin), gamma=_r(fits.gamma, 3), v_floor_clock_ratio=_r(fits.v_floor, 3),
                 fit=dict(fits.arec, gamma=fits.dvfs_rec, gamma_check=fits.zeus_rec, spin_w=spin_rec),
                 basis=dict(idle_w="fitted", flop_w="fitted", hbm_w="fitted", link_w="fitted", spin_w="fitted",
                            gamma="fitted", v_floor_clock_ratio="fitted"),
                 note=note)
    # the 40GB part has no idle capture: it borrows the 80GB part's share (same GA100 die, clocks and idle_w)
    a80 = "a100-sxm-80gb"
    power = _with_static(power, load_gpu(g), fits,
                         source=(a80, static_from_capture(load_gpu(a80), a["idle_w"], fits.gamma, fits.v_floor), a["idle_w"]))
    power["fit"]["static_w"]["cross_check"] = a100_cross_checks(power["static_w"], power["idle_w"], fits.gamma,
                                                                fits.v_floor, fits.dvfs, aw)
    return power


def _power_hopper(g, tdp, fits: _Fits):
    """``power:`` of H100 / H200: idle from the H100 trace, flop_w from the H200's burst and sustained
    matmul rates (costmodel/fit/builtin/msmf.py), hbm_w and link_w the A100 fit scaled by TDP."""
    a, h = fits.a, fits.h
    k = tdp / fits.tdp_a
    hb_w, l_w = a["hbm_w"] * k, a["link_w"] * k
    # H200 has no idle capture: the H100's (same GH100 board, 700 W, and the same idle_w)
    static = static_from_capture(load_gpu("h100-sxm-80gb"), h["idle_w"], fits.gamma, fits.v_floor)
    f_w, frec = flop_w_from_msmf(read_msmf_table(_p("msmf"))["NVIDIA H200 SXM"], h["idle_w"], fits.gamma, fits.v_floor,
                                 static)
    frec["inputs"] = [_rel("msmf")]
    u_eff = (h["loaded_w"] - h["idle_w"]) / f_w
    idle = dict(data="8x H100 80GB (Azure) GPT-8B PyTorch DDP training, nvidia-smi power.draw at 100 ms "
                     "(grantwilkins/training_profile)",
                method="median power of samples at utilization.gpu == 0",
                n_points=h["n_idle"], value_w=_r(h["idle_w"]), iqr_w=h["idle_iqr_w"], inputs=[_rel("h100_trace")])
    loaded = dict(method="median power of samples at utilization.gpu >= 90 % (training)",
                  n_points=h["n_loaded"], median_w=_r(h["loaded_w"]), p95_w=h["loaded_p95_w"],
                  implied_u_flop=_r(u_eff, 3),
                  note="cross-check, not fitted: if all the loaded samples' dynamic "
                       f"power were GEMM power, (loaded - idle)/flop_w = {u_eff:.2f} of "
                       "the dense peak would be their tensor-core utilisation (an upper "
                       "bound, since memory-bound and communication phases also draw "
                       "power); the trace has no FLOP or byte counts, so the split across "
                       "terms cannot be fitted from it")
    own = "fitted" if g == "h100-sxm-80gb" else "borrowed"
    return _with_static(dict(idle_w=_r(h["idle_w"]), flop_w=_r(f_w), hbm_w=_r(hb_w), link_w=_r(l_w), spin_w=_r(h["spin_w"]),
                gamma=_r(fits.gamma, 3), v_floor_clock_ratio=_r(fits.v_floor, 3),
                fit=dict(idle_w=idle, spin_w=_spin_record(fits), flop_w=frec, loaded=loaded, gamma=fits.dvfs_rec,
                         gamma_check=fits.zeus_rec, inputs=[_rel("h100_trace"), _rel("msmf")] + fits.a100_in),
                basis=dict(idle_w=own, spin_w=own, flop_w="fitted" if g == "h200-sxm-141gb" else "borrowed",
                           hbm_w="derived", link_w="derived", gamma="borrowed", v_floor_clock_ratio="borrowed"),
                derived_from=("a100-sxm-80gb:power (hbm_w, link_w x 700/400 TDP); flop_w: the H200's MAMF/MSMF pair "
                              "(same GH100 die)" + "; gamma, v_floor_clock_ratio: borrowed from the A100 SXM locked-clock "
                              "sweeps" + ("; idle_w, spin_w: h100-sxm-80gb trace (same GH100 board and 700 W)"
                                          if g != "h100-sxm-80gb" else "")),
                note="idle_w is measured on H100 (trace); flop_w from the burst (MAMF) and sustained (MSMF) BF16 "
                     "matmul rates of one H200 at 700 W; hbm_w and link_w are the A100 fit scaled by TDP (700/400)"
                     + (". H200: same GH100 die, board and 700 W TDP as H100, so H100's values (hbm_w per unit "
                        "of its own 4.8 TB/s datasheet bandwidth)" if g == "h200-sxm-141gb" else "")),
                        load_gpu(g), fits, source=("h100-sxm-80gb", static, h["idle_w"]))


_TERMS = ("idle_w", "flop_w", "hbm_w", "link_w", "spin_w")


def _power_from(g, src: str, base: dict, fits: _Fits, rule: str):
    """``power:`` of a GPU without power data from its source's section ``base``
    (costmodel/fit/builtin/variants.py: rule 'same-die' scales each term by what sets it, 'tdp' every
    term by the TDP ratio; idle from the parts' idle captures where both GPU files give one)."""
    gs, ss = load_gpu(g), load_gpu(src)
    k = gs.tdp_w / ss.tdp_w
    idle, idle_how = idle_w(gs, ss, base["idle_w"])
    if rule == "same-die":
        f = same_die_factors(gs, ss, fits.gamma, fits.v_floor)
        coeff = {t: base[t] * f[t] for t in _TERMS[1:]}
        how = (f"same die as {src}: flop_w, spin_w x {f['flop_w']:.3f} (SMs {gs.num_sms}/{ss.num_sms} x g(s) at the "
               f"peak-quoting clock ratio s = {gs.boost_clock_mhz:.0f}/{ss.boost_clock_mhz:.0f} MHz), hbm_w x "
               f"{f['hbm_w']:.3f} (bandwidth, the source's energy per byte), link_w x {f['link_w']:.3f} (NVLink "
               f"bandwidth); idle_w = {idle_how}")
    else:
        coeff = {t: base[t] * k for t in _TERMS[1:]}
        how = f"every dynamic coefficient is {src}'s x the TDP ratio {gs.tdp_w:.0f}/{ss.tdp_w:.0f}; idle_w = {idle_how}"
    own_idle = gs.idle_power_w is not None and ss.idle_power_w is not None
    power = dict(idle_w=_r(idle), **{t: _r(v) for t, v in coeff.items()}, gamma=_r(fits.gamma, 3),
                 v_floor_clock_ratio=_r(fits.v_floor, 3),
                 basis=dict(idle_w="derived", flop_w="derived", hbm_w="derived", link_w="derived", spin_w="derived",
                            gamma="borrowed", v_floor_clock_ratio="borrowed"),
                 derived_from=f"{src}:power ({rule}); gamma, v_floor_clock_ratio: borrowed from the A100 SXM "
                              "locked-clock sweeps",
                 note=f"DERIVED: no power data for this GPU in the public set; {how}"
                      + ("; per GCD (the 560 W OAM cap split over its two GCDs, gpus/mi250.yaml)" if g == "mi250" else "")
                      + (f"; idle capture: {gs.sources.get('idle_power', '')}" if own_idle else ""))
    power = _with_static(power, gs, fits, source=(src, base["static_w"], base["idle_w"]))
    return power, ([_rel("h100_trace")] if src == "h100-sxm-80gb" else [_rel("a100_wait")]) + fits.a100_in


def _fit_all(data=None):
    """Every power/thermal fit (:class:`_Fits`) and the per-GPU Zeus fits."""
    D = load(data)
    zfit = {g: fit_zeus_gamma(D["zeus"][g]) for g in ZEUS_GPUS}
    dv = fit_dvfs(D["perseus"])
    gamma, v_floor = dv["gamma"], dv["v_floor"]
    a100 = load_gpu("a100-sxm-80gb")      # FlagPerf's 40GB part has no idle capture; the same GA100 die
    a, arec = fit_a100_power(D["ops"], D["base"], gamma, v_floor,
                             static_of=lambda idle: static_from_capture(a100, idle, gamma, v_floor))
    pin = [_rel(f"perseus_{k}") for k in PERSEUS]
    return _Fits(h=fit_h100_trace(D["h100"]), aw=fit_a100_wait(D["a100_wait"]), a=a, arec=arec, th=fit_a100_thermal(D["ops"], D["base"]), gamma=gamma,
                 v_floor=v_floor, dvfs_rec=_dvfs_record(dv), zeus_rec=_zeus_record(zfit),
                 a100_in=[_rel("flagperf_ops"), _rel("flagperf_base")] + pin,
                 tdp_a=A100_40["tdp_w"], tdp_h=load_gpu("h100-sxm-80gb").tdp_w, dvfs=dv), zfit


def _dvfs_record(dv):
    """The ``fit.gamma`` / ``fit.v_floor_clock_ratio`` record of every profile (costmodel/fit/builtin/dvfs.py)."""
    return dict(
        data="Perseus (SOSP'24) locked-clock sweeps of one GPT-3 175B and one BLOOM pipeline stage on A100 SXM, "
             "forward and backward, SM clock 1410 to 855 MHz in 15 MHz steps: time and GPU energy per pass",
        method="per sweep: least squares (relative residuals) of P = E/t = P0 + D g(f/1410), g(s) = s^gamma above "
               "the floor s_v and s_v^gamma s/s_v below (P0, D, s_v, gamma free); the median over the four sweeps",
        per_sweep={k: dict(gamma=_r(r["gamma"], 3), v_floor_clock_ratio=_r(r["v_floor"], 3),
                           knee_mhz=_r(r["knee_mhz"]), max_rel_err=_r(r["max_rel_err"], 3), n_points=r["n_points"],
                           least_energy_clock_mhz=r["min_energy_clock_mhz"]) for k, r in dv["per_sweep"].items()},
        inputs=[_rel(f"perseus_{k}") for k in PERSEUS],
        note="the clock of least energy per pass sits at the floor in every sweep (1065-1080 MHz): below it the "
             "voltage no longer falls and energy rises again; other GPUs take the A100's s_v as a fraction of "
             "their own maximum clock (borrowed)")


def build_power_thermal(gpus, data=None):
    """Fit everything and return ``(sections, summary, inputs)``.

    Args:
        gpus: GPU file stems to write sections for (hardware/gpus/<stem>.yaml gives TDP and HBM bandwidth).
        data: directory of the public copies (default hardware/profiles/data).
    Returns:
        sections: gpu -> {"power": {...}, "thermal": {...}} in the hardware/README.md profile schema.
        summary: rows (kind, gpu, item, text) for the printed fit table of ``python -m costmodel.fit.builtin``.
        inputs: gpu -> list of repo-relative input files.
    Raises:
        ValueError: a GPU of ``gpus`` other than A100 (40/80 GB), H100 and H200 (fitted here) whose
            power has no source in costmodel/fit/builtin/variants.py (VARIANTS or POWER_FROM).
    """
    fits, zfit = _fit_all(data)
    spec = _tdp_hbm(gpus)
    summary, sections, inputs = [], {}, {}
    summary.append(("gamma", "a100 sxm", "perseus", f"{fits.gamma:.2f}, voltage floor at {fits.v_floor:.3f} of the "
                                                    "maximum clock (median of 4 locked-clock sweeps)"))
    for g, z in zfit.items():
        summary.append(("gamma", g, "zeus (check)", f"{z['gamma']:.2f} (bound of {z['bound_workload']}, {z['n_used']} "
                                                    f"sweeps; per-sweep q25/median {z['q25']:.2f}/{z['median']:.2f})"))
    th, arec = fits.th, fits.arec
    base = {"a100-sxm-80gb": _power_a100("a100-sxm-80gb", fits),
            "h100-sxm-80gb": _power_hopper("h100-sxm-80gb", fits.tdp_h, fits)}
    for g in gpus:
        tdp, _ = spec[g]
        derived = power_source(g)
        if g in ("a100-sxm-80gb", "a100-sxm-40gb"):     # the fit's own part and its 80GB sibling
            power, inputs[g] = _power_a100(g, fits), fits.a100_in + [_rel("a100_wait"), _rel("h100_trace")]
        elif g in ("h100-sxm-80gb", "h200-sxm-141gb"):
            power, inputs[g] = _power_hopper(g, tdp, fits), [_rel("h100_trace")] + fits.a100_in
        elif derived is not None:
            power, inputs[g] = _power_from(g, derived[0], base[derived[0]], fits, derived[1])
            if g == "b200-sxm-180gb":
                power = _with_static(power_b200(power, fits.gamma, fits.v_floor, fits.th["r_th"] * fits.tdp_a / tdp,
                                                data), load_gpu(g), fits)
                inputs[g] = inputs[g] + [_rel("b200_note")]
        else:
            raise ValueError(f"{g}: no power fit and no source in costmodel/fit/builtin/variants.py")
        inputs[g] = inputs[g] + ([_rel("flagperf_ops")] if _rel("flagperf_ops") not in inputs[g] else [])
        # the GEMM and attention efficiencies were measured on the GPU they carry over from, under
        # its default limit (MAMF and the GEMM tables run at stock settings)
        power = dict(power, kernel_limit_w=float(load_gpu(VARIANTS[g].source if g in VARIANTS else g).tdp_w))
        base.setdefault(g, power)       # a later same-die variant (GB200 of the B200) derives from it
        sections[g] = dict(power=power, thermal=_thermal_section(g, tdp, fits))
        p = sections[g]["power"]
        summary.append(("power", g, "P coefficients", f"idle {p['idle_w']:.1f} static {p['static_w']:.1f} flop {p['flop_w']:.0f} hbm {p['hbm_w']:.0f} "
                                                      f"link {p['link_w']:.0f} spin {p['spin_w']:.0f} W gamma {p['gamma']:.2f} "
                                                      f"v_floor {p['v_floor_clock_ratio']:.3f}"
                                                      + ("" if g in ("a100-sxm-80gb", "a100-sxm-40gb") else "  (derived)"
                                                         if g != "h100-sxm-80gb" else "  (idle fitted)")))
        t = sections[g]["thermal"]
        summary.append(("thermal", g, "R_th/tau", f"{t['r_th_c_per_w']:.4f} C/W tau {t['tau_s']:.0f} s"
                                                  + (f"  R2 {th['r2']:.3f} n={th['n']}" if g == "a100-sxm-80gb"
                                                     else "  (derived)")))
    summary.append(("power", "a100 fit", "quality", f"R2 {arec['r2_power']:.3f} median {arec['median_rel_err_power']:.3f} max "
                                                    f"{arec['max_rel_err_power']:.3f} over {arec['n_points']} rows; flop_w GEMM "
                                                    f"throughput err {arec['flop_w']['max_rel_err_throughput']:.3f}"))
    return sections, summary, inputs
