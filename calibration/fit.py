"""Fit a profile from a cluster's own measurements (``costmodel calibrate fit``).

Inputs (any mix, detected by content, :mod:`calibration.readers.sniff`): the suite's JSONL
(``python -m calibration.run``), nccl-tests stdout, ``nvidia-smi --query-gpu`` CSV, ``nvidia-smi
dmon``, ``dcgmi dmon``.  The output is a profile in the schema of ``hardware/README.md``: every
section the inputs cover is fitted and carries a ``fit:`` record (n_points, R^2 of log time,
median and max relative error, inputs); every section they do not cover is copied from the base
profile (the catalog profile of the GPU) with ``kept_from`` and a note, and :class:`FitReport` warns
about it.  What is fitted from what (formulas in the docstring of each ``fit_*`` function):

=====================  ====================================================  ==========================
section                model                                                 data
=====================  ====================================================  ==========================
gemm.<dtype>           roofline x tile/wave/K-loop efficiency (gemm.py)      suite ``gemm`` records
hbm.efficiency         achieved / datasheet bandwidth (median)               suite ``hbm`` records
comm.intra_node.<c>    NCCL protocol lines alpha_p + f n/(eff_p link)        suite ``collective`` (intra),
                       (collective.py), soft_l1 on log time                  single-node nccl-tests
comm.inter_node.<c>    hierarchical_time_s, intra scope fixed                suite (inter), multi-node
                                                                             nccl-tests (needs --cluster)
overlap                GEMM time while a collective runs / alone (median)    suite ``overlap`` records
power                  P = idle + c_flop u_flop + c_hbm u_hbm + c_link u_link suite phases x samples
                       (power.py), bounded least squares                     (unthrottled windows)
power.gamma            P - idle = k f^gamma under power limits               suite power-limit phases
power.idle_w           median power of idle samples                          suite idle phase or traces
thermal                T(t) = T0 + dT (1 - exp(-t/tau)), R_th = dT/dP        suite sustained-GEMM phase
                       per slot (first-order RC, thermal.py)                 per slot; traces: T vs P
=====================  ====================================================  ==========================
"""
from __future__ import annotations

import copy
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.optimize import curve_fit, least_squares

from costmodel.collective import COLLECTIVES, collective_time_s, hierarchical_time_s
from costmodel.errors import FitError, ReaderParseError
from costmodel.readers.nccl_tests import collective_from_name
from costmodel.readers.registry import REGISTRY, read_measurement
from costmodel.specs import ClusterSpec, GpuSpec, hardware_dir, list_gpus, load_gpu

from .fitting import (GEMM_BYTES, FIT_METHOD, NVLS_EFF_MAX, coll_entry, fit_collective, fit_gemm, fit_protocols,
                      fit_stats, gemm_entry, params_of, protocol_text, round_sig)

GENERATED_BY = "costmodel calibrate fit"
# NVML clock event reasons that mean the SM clock was held below what the load asked for (nvml.h:
# nvmlClocksEventReasonSwPowerCap 0x4, HwSlowdown 0x8, SwThermalSlowdown 0x20, HwThermalSlowdown 0x40,
# HwPowerBrakeSlowdown 0x80); samples with any of them are left out of the unthrottled power fit
THROTTLE_MASK = 0x4 | 0x8 | 0x20 | 0x40 | 0x80
EDGE_TRIM = 0.2        # fraction of a phase window dropped at each end (the monitor lags the kernels)
MIN_PHASE_SAMPLES = 3  # samples a phase needs to count in the power fit
OUTLIER_MAD = 5.0      # a point whose |log residual| exceeds this many MADs (and 10 %) is reported


@dataclass
class FitReport:
    """What :func:`fit_profile` did: warnings (coverage, outliers, unusable lines) and a summary table.

    Attributes:
        warnings: one sentence each, naming the file (and line) or the profile section.
        rows: ``(section, parameters text, fit quality text)`` for the printed table.
    """

    warnings: list = field(default_factory=list)
    rows: list = field(default_factory=list)


@dataclass
class Measurements:
    """Parsed inputs of a fit.

    Attributes:
        suites: list of :class:`calibration.records.SuiteRun`.
        nccl: list of ``(path, collective, n_nodes, ranks_per_node, rows)``; rows are out-of-place
            :class:`calibration.readers.NcclRow` of one table.
        traces: list of :class:`calibration.readers.power_trace.PowerTrace`.
        files: path -> sha256 of every input (provenance).
    """

    suites: list = field(default_factory=list)
    nccl: list = field(default_factory=list)
    traces: list = field(default_factory=list)
    files: dict = field(default_factory=dict)


# ------------------------------------------------------------------------------------- loading
def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_measurements(paths, collective=None, nodes=None, gpus_per_node=None, report=None) -> Measurements:
    """Read every input file, keeping the good data of each and reporting the bad lines.

    Each file is read through the format registry (:func:`costmodel.readers.read_measurement`), which
    says what it gives a fit (``Format.to_fit_input``): a suite run, an nccl-tests table or a trace.

    Args:
        paths: files (suite JSONL, nccl-tests, nvidia-smi CSV / dmon, dcgmi dmon).
        collective: the collective of nccl-tests captures that do not name it (file name or command
            line); nodes, gpus_per_node: their topology when they print no ``# Rank`` lines.
            gpus_per_node also numbers the rows of an nvidia-smi CSV without an ``index`` column.
        report: :class:`FitReport` collecting warnings (a new one when None).
    Returns:
        :class:`Measurements`.
    Raises:
        FitError: a file is unreadable or has no usable data in a known format, or an nccl-tests
            capture's collective or topology cannot be told.
    """
    report = report if report is not None else FitReport()
    out = Measurements()
    for p in map(Path, paths):
        try:
            fmt, data, warns = read_measurement(p, gpus_per_node)
        except (ReaderParseError, ValueError, OSError) as e:
            first = getattr(e, "errors", None)
            msg = str(e).splitlines()[0] if str(e) else f"{p}: unreadable"
            raise FitError(msg + (f" (first: {first[0]})" if first else "")) from None
        report.warnings += list(warns)
        out.files[str(p)] = _sha256(p)
        to_fit = REGISTRY[fmt].to_fit_input
        inputs, notes = to_fit(data, p) if to_fit else ([], [f"{p}: {fmt} is not an input of this fit"])
        report.warnings += notes
        for kind, item in inputs:
            if kind == "suite":
                if not item.complete:
                    report.warnings.append(f"{p}: no 'end' record: the run was cut short; using the records it has")
                out.suites.append(item)
            elif kind == "nccl":
                out.nccl.append(_nccl_input(p, item, collective, nodes, gpus_per_node, report))
            else:
                out.traces.append(item)
    if not (out.suites or out.nccl or out.traces):
        raise FitError("no usable measurement in " + ", ".join(map(str, paths)))
    return out


def _nccl_input(p, table, collective, nodes, gpus_per_node, report):
    """``(path, collective, n_nodes, ranks_per_node, out-of-place rows of the first table)`` of a capture."""
    meta = getattr(table, "meta", {}) or {}
    coll = meta.get("collective") or collective_from_name(p.name) or collective
    if coll is None:
        raise FitError(f"{p}: nccl-tests capture does not say which collective it measured (no *_perf "
                       "command line and no collective in the file name): pass --collective")
    nn, k = meta.get("n_nodes"), meta.get("ranks_per_node")
    if nn is None or k is None:
        if nodes is None or gpus_per_node is None:
            raise FitError(f"{p}: nccl-tests capture has no '# Rank' lines to tell its topology: pass "
                           "--nodes and --gpus-per-node")
        nn, k = nodes, gpus_per_node
    tables = sorted({r.table for r in table.rows})
    if len(tables) > 1:
        report.warnings.append(f"{p}: {len(tables)} nccl-tests tables (separate runs): fitting the first "
                               "only; put each run in its own file to fit the others")
    return p, coll, int(nn), int(k), table.select("out-of-place", tables[0])


# ---------------------------------------------------------------------------------- GPU and base
def gpu_key_for(name: str | None) -> str | None:
    """Catalog GPU key whose datasheet name matches an NVML/ROCm device name, or None.

    Matching: the catalog's ``name`` tokens (e.g. "H200", "SXM") against the device name
    (e.g. "NVIDIA H200", "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB"); the key with the most
    matching tokens, ties refused.
    """
    if not name:
        return None
    dev = name.upper().replace("-", " ")
    best, score, tie = None, 0, False
    for key in list_gpus():
        g = load_gpu(key)
        model = key.split("-")[0].upper()          # "H200", "A100", "MI250"
        if model not in dev.split() and model not in dev:
            continue
        s = 1 + sum(tok in dev for tok in key.upper().split("-")[1:])
        if s > score:
            best, score, tie = g.key, s, False
        elif s == score:
            tie = True
    return None if tie else best


def resolve_gpu(meas: Measurements, gpu: str | None) -> tuple[GpuSpec, str]:
    """The GPU datasheet the measurements are normalised by, and why.

    Raises:
        FitError: ``gpu`` not given and the suite's provenance names no catalog GPU (or several).
    """
    if gpu:
        return load_gpu(gpu, "--gpu"), f"--gpu {gpu}"
    names = {r.get("gpu_name") for s in meas.suites for r in s["provenance"]} - {None}
    keys = {gpu_key_for(n) for n in names}
    if len(keys) == 1 and None not in keys:
        k = keys.pop()
        return load_gpu(k), f"provenance gpu_name {sorted(names)}"
    if not names:
        raise FitError("the inputs name no GPU model (no suite provenance, or the suite ran on CPU): pass --gpu "
                       f"(one of {', '.join(list_gpus())}) or --cluster (its GPU is used)")
    raise FitError(f"cannot match GPU names {sorted(names)} to one catalog GPU: pass --gpu with one of "
                   f"{', '.join(list_gpus())}")


def base_profile(gpu: GpuSpec, base: str | None = None) -> tuple[dict, str]:
    """The profile mapping that uncovered sections are kept from (``hardware/profiles/<gpu>.yaml``).

    Raises:
        FitError: the base profile file does not exist or is not a mapping.
    """
    import yaml
    path = Path(base) if base else hardware_dir() / "profiles" / f"{gpu.key}.yaml"
    try:
        d = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as e:
        raise FitError(f"{path}: cannot read the base profile ({str(e).splitlines()[0]})") from None
    if not isinstance(d, dict):
        raise FitError(f"{path}: the base profile is not a mapping")
    return d, str(path)


# ------------------------------------------------------------------------------------------ GEMM
def fit_gemm_section(meas: Measurements, gpu: GpuSpec, hbm_eff: float, report: FitReport) -> dict:
    """``gemm:`` entries per dtype fitted to the suite's GEMM records (:func:`calibration.fitting.fit_gemm`).

    eta_max is bounded by 1 (the datasheet dense peak); every other factor comes from the tile/wave
    model.  Returns dtype -> entry (with ``fit``); dtypes with fewer than 4 shapes are skipped with a
    warning.
    """
    out = {}
    recs = [r for s in meas.suites for r in s["gemm"]]
    for dt in sorted({r["dtype"] for r in recs}):
        rows = [r for r in recs if r["dtype"] == dt]
        peak = gpu.peak_flops.get(dt)
        if peak is None:
            report.warnings.append(f"gemm.{dt}: {gpu.key} has no datasheet peak for {dt}: {len(rows)} records unused")
            continue
        if len(rows) < 4:
            report.warnings.append(f"gemm.{dt}: {len(rows)} shapes measured, the fit needs >= 4: kept from the base")
            continue
        pts = dict(b=[r["b"] for r in rows], m=[r["m"] for r in rows], n=[r["n"] for r in rows],
                   k=[r["k"] for r in rows], t=[r["time_s"] for r in rows])
        p, tm = fit_gemm(pts, peak, gpu.hbm_bytes_per_s, hbm_eff, gpu.num_sms, GEMM_BYTES.get(dt, 2.0), 1.0)
        fit = fit_stats(tm, pts["t"], sorted({str(s.path) for s in meas.suites}),
                        method="least_squares soft_l1 on log time; tile chosen among {64,128,256}^2; eta_max <= 1")
        _outliers(f"gemm.{dt}", tm, pts["t"], [f"{r['m']}x{r['n']}x{r['k']} (line {r['_line']})" for r in rows], report)
        out[dt] = gemm_entry(p, fit)
        report.rows.append((f"gemm.{dt}", f"eta_max {p.eta_max:.3f} k_half {p.k_half:.0f} tile {p.tile_m}x{p.tile_n}",
                            _quality(fit)))
    return out


def fit_hbm_section(meas: Measurements, gpu: GpuSpec, report: FitReport) -> dict | None:
    """``hbm:`` efficiency = median achieved / datasheet bandwidth over the copy and triad records."""
    recs = [r for s in meas.suites for r in s["hbm"]]
    if not recs:
        return None
    eff = np.array([r["bytes_per_s"] for r in recs]) / gpu.hbm_bytes_per_s
    e = float(np.median(eff))
    rel = np.abs(eff / e - 1.0)
    fit = dict(n_points=len(recs), median_rel_err=round_sig(np.median(rel), 3), max_rel_err=round_sig(rel.max(), 3),
               by_op={op: round_sig(np.median(eff[[r["op"] == op for r in recs]])) for op in sorted({r["op"] for r in recs})},
               method="median of achieved / datasheet HBM bandwidth over copy and triad",
               inputs=sorted({str(s.path) for s in meas.suites}))
    report.rows.append(("hbm", f"efficiency {e:.3f}", _quality(fit)))
    return dict(efficiency=round_sig(e), fit=fit)


# ----------------------------------------------------------------------------------- collectives
def _coll_points(meas: Measurements, scope: str):
    """(coll, group_size, n_nodes, ranks_per_node) -> (sizes, times, source label) from suite and nccl-tests."""
    pts = {}

    def add(key, n, t, src):
        a = pts.setdefault(key, ([], [], []))
        a[0].append(float(n)), a[1].append(float(t)), a[2].append(src)
    for s in meas.suites:
        for r in s["collective"]:
            if r["scope"] == scope and r["size_bytes"] > 0 and r["time_s"] > 0:
                add((r["collective"], r["group_size"], r["n_nodes"], r["ranks_per_node"]), r["size_bytes"], r["time_s"],
                    f"{s.path}:{r['_line']}")
    for path, coll, nn, k, rows in meas.nccl:
        if (nn > 1) == (scope == "inter_node"):
            for r in rows:
                if r.size_bytes > 0 and r.time_us > 0:
                    add((coll, nn * k, nn, k), r.size_bytes, r.time_us * 1e-6, f"{path}:{r.line}")
    return pts


def fit_comm_section(meas: Measurements, gpu: GpuSpec, base: dict, cluster: ClusterSpec | None,
                     report: FitReport) -> dict:
    """``comm:`` entries fitted per (scope, collective); uncovered entries are returned absent.

    Intra-node: :func:`calibration.fitting.fit_collective` at the largest measured group (the TP
    group the latencies are anchored to, ``group_size``); the other measured group sizes are
    reported as a cross-check of the model's group-size law (costmodel/comm.py ``_params``).
    Inter-node: :func:`hierarchical_time_s` with the intra scope fixed (fitted here or the base's),
    link = the node's NIC bandwidth (``--cluster``) over the ranks per node that cross it; every
    efficiency at most 1.
    Returns:
        {scope: {collective: entry}}.
    """
    out = {"intra_node": {}, "inter_node": {}}
    link = gpu.nvlink_bytes_per_s or (cluster.intra_bytes_per_s if cluster else 0.0)
    intra = _coll_points(meas, "intra_node")
    for coll in COLLECTIVES:
        keys = sorted(k for k in intra if k[0] == coll)
        if not keys:
            continue
        if not link:
            report.warnings.append(f"comm.intra_node.{coll}: {gpu.key} has no intra-node link bandwidth: pass --cluster")
            break
        g = max(k[1] for k in keys)
        n, t, src = intra[next(k for k in keys if k[1] == g)]
        if len(n) < 4:
            report.warnings.append(f"comm.intra_node.{coll}: {len(n)} sizes at group {g}, the fit needs >= 4: kept")
            continue
        gsz = 2 if coll == "send_recv" else g
        eff_max = NVLS_EFF_MAX if coll == "all_reduce" else 1.0
        p, tm, _ = fit_collective(coll, n, t, gsz, link, eff_max)
        cross = {}
        for k in keys:
            if k[1] != g:
                nk, tk, _ = intra[k]
                tmk = collective_time_s(coll, nk, 2 if coll == "send_recv" else k[1], link, p)
                cross[f"group_{k[1]}_median_rel_err"] = round_sig(np.median(np.abs(tmk / np.array(tk) - 1)), 3)
        fit = fit_stats(tm, t, sorted({s.rsplit(":", 1)[0] for s in src}), n, group_size=gsz,
                        link_bytes_per_s=round_sig(link), method=FIT_METHOD, **cross)
        _outliers(f"comm.intra_node.{coll}", tm, t, src, report)
        _at_bound(f"comm.intra_node.{coll}", p, eff_max, report)
        out["intra_node"][coll] = coll_entry(p, fit, group_size=gsz, algorithm="nccl-default (as measured)")
        report.rows.append((f"comm.intra_node.{coll}", protocol_text(p), _quality(fit)))
    inter = _coll_points(meas, "inter_node")
    if inter and cluster is None:
        report.warnings.append("comm.inter_node: inter-node measurements present but no --cluster to give the NIC "
                               "bandwidth they are normalised by: kept from the base profile")
        return out
    for coll in COLLECTIVES:
        keys = sorted(k for k in inter if k[0] == coll)
        if not keys:
            continue
        key = max(keys, key=lambda k: (len(inter[k][0]), k[1]))
        _, g, nn, k = key
        n, t, src = inter[key]
        if len(n) < 4:
            report.warnings.append(f"comm.inter_node.{coll}: {len(n)} sizes, the fit needs >= 4: kept")
            continue
        p_in = params_of(out["intra_node"].get(coll) or base["comm"]["intra_node"][coll])
        inter_bps = cluster.node_nic_bytes_per_s / k
        n, t = np.asarray(n), np.asarray(t)

        def time_of(q, n=n, k=k, nn=nn, p_in=p_in, inter_bps=inter_bps, coll=coll):
            return hierarchical_time_s(coll, n, k, nn, link, inter_bps, p_in, q)
        p, _ = fit_protocols(time_of, t, 3 if len(n) >= 8 else 2, 1.0)
        tm = time_of(p)
        fit = fit_stats(tm, t, sorted({s.rsplit(":", 1)[0] for s in src}), n, ranks_per_node=k, n_nodes=nn,
                        inter_bytes_per_s_per_gpu=round_sig(inter_bps), cluster=cluster.key,
                        method=FIT_METHOD + " of hierarchical_time_s (intra scope fixed); every efficiency <= 1")
        _outliers(f"comm.inter_node.{coll}", tm, t, src, report)
        _at_bound(f"comm.inter_node.{coll}", p, 1.0, report)
        out["inter_node"][coll] = coll_entry(p, fit, group_size=nn, algorithm="nccl-default (hierarchical model)")
        report.rows.append((f"comm.inter_node.{coll}", protocol_text(p), _quality(fit)))
    return out


# --------------------------------------------------------------------------------------- overlap
def fit_overlap_section(meas: Measurements, report: FitReport) -> dict | None:
    """``overlap.compute_slowdown``: median over the suite's overlap records of GEMM time while a
    collective runs on another stream over its time alone (>= 1: SMs and HBM shared with NCCL's
    kernels), with the communication slowdown beside it."""
    recs = [r for s in meas.suites for r in s["overlap"]]
    if not recs:
        return None
    g = np.array([r["gemm_overlapped_s"] / r["gemm_alone_s"] for r in recs])
    c = np.array([r["comm_overlapped_s"] / r["comm_alone_s"] for r in recs])
    fit = dict(n_points=len(recs), gemm_slowdown_range=[round_sig(g.min()), round_sig(g.max())],
               comm_slowdown=round_sig(np.median(c)), method="median of overlapped / alone time",
               inputs=sorted({str(s.path) for s in meas.suites}))
    report.rows.append(("overlap", f"compute_slowdown {np.median(g):.3f} comm_slowdown {np.median(c):.3f}",
                        f"n={len(recs)}"))
    return dict(compute_slowdown=round_sig(np.median(g)), fit=fit)


# ----------------------------------------------------------------------------------------- power
def _phase_samples(meas: Measurements):
    """Per suite phase: (phase record, samples of its slot inside the trimmed window, host)."""
    out = []
    for s in meas.suites:
        samples = {}
        for r in s["sample"]:
            samples.setdefault((r["host"], r["slot"]), []).append(r)
        for ph in s["phase"]:
            rows = samples.get((ph["host"], ph["slot"]), [])
            t0, t1 = ph["t_start_unix"], ph["t_end_unix"]
            cut = EDGE_TRIM * (t1 - t0)
            inside = [r for r in rows if t0 + cut <= r["t_unix"] <= t1 - cut and r["power_w"] is not None]
            out.append((ph, inside))
    return out


def _median(rows, key):
    v = [r[key] for r in rows if r.get(key) is not None]
    return float(np.median(v)) if v else float("nan")


def fit_power_section(meas: Measurements, gpu: GpuSpec, base: dict, report: FitReport) -> dict | None:
    """``power:`` coefficients from suite phases (median power of each phase window, edges trimmed).

    Model (costmodel/power.py): P = idle_w + flop_w u_flop + hbm_w u_hbm + link_w u_link with
    u_flop = achieved FLOP/s / datasheet peak of the phase's dtype, u_hbm = achieved HBM B/s /
    datasheet bandwidth, u_link = achieved busbw / NVLink bandwidth.  Phases whose samples show a
    power-cap or thermal clock event (:data:`THROTTLE_MASK`) or a lowered power limit are left out:
    their power is the cap, not the demand.  Bounded linear least squares (all coefficients >= 0);
    a coefficient whose utilisation never varies in the data is held at the base profile's value.
    gamma: from the power-limit phases, least squares of log(P - idle) = log k + gamma log(f_sm).
    Without suite phases, idle_w comes from trace samples at 0 % utilisation.
    """
    bp = dict(base.get("power") or {})
    rows, X, y = [], [], []
    limit_pts = []
    for ph, smp in _phase_samples(meas):
        if len(smp) < MIN_PHASE_SAMPLES:
            continue
        p_w = _median(smp, "power_w")
        if ph["name"].startswith("power_limit"):
            limit_pts.append((ph["power_limit_w"], _median(smp, "sm_clock_mhz"), p_w))
            continue
        throttled = any((r.get("clock_event_reasons") or 0) & THROTTLE_MASK for r in smp)
        if throttled:
            continue
        peak = gpu.peak_flops.get(ph.get("dtype") or "bf16", max(gpu.peak_flops.values()))
        u = [(ph["flops_per_s"] or 0.0) / peak, (ph["hbm_bytes_per_s"] or 0.0) / gpu.hbm_bytes_per_s,
             (ph["link_bytes_per_s"] or 0.0) / (gpu.nvlink_bytes_per_s or 1.0)]
        X.append([1.0] + u)
        y.append(p_w)
        rows.append(ph["name"])
    sample_files = sorted({str(s.path) for s in meas.suites if s["sample"]})
    if len(y) >= 2:
        X, y = np.array(X), np.array(y)
        names = ["idle_w", "flop_w", "hbm_w", "link_w"]
        free = [0] + [j for j in (1, 2, 3) if np.ptp(X[:, j]) > 0.02]
        fixed = {j: float(bp.get(names[j], 0.0)) for j in (1, 2, 3) if j not in free}
        yy = y - sum(X[:, j] * v for j, v in fixed.items())
        r = least_squares(lambda c: X[:, free] @ c - yy, np.full(len(free), 100.0), bounds=(0.0, np.inf),
                          loss="soft_l1", f_scale=10.0)
        coef = dict(fixed)
        coef.update({j: float(c) for j, c in zip(free, r.x)})
        pred = X @ np.array([coef[j] for j in range(4)])
        rel = np.abs(pred / y - 1)
        ss = float(np.sum((y - y.mean()) ** 2))
        fit = dict(n_points=int(len(y)), r2=round_sig(1 - float(np.sum((pred - y) ** 2)) / ss, 4) if ss > 0 else None,
                   median_rel_err=round_sig(np.median(rel), 3), max_rel_err=round_sig(rel.max(), 3),
                   phases=sorted(set(rows)), held_at_base=[names[j] for j in fixed],
                   method="bounded soft_l1 least squares over unthrottled phase medians (edges trimmed "
                          f"{EDGE_TRIM:.0%}), P = idle + flop u_flop + hbm u_hbm + link u_link",
                   inputs=sample_files)
        out = {names[j]: round_sig(coef[j]) for j in range(4)}
        if fixed:
            report.warnings.append(f"power: {', '.join(names[j] for j in fixed)} not identifiable from the measured "
                                   "phases (utilisation never varied): kept from the base profile")
    else:
        idle = _trace_idle_w(meas)
        if idle is None:
            return None
        out = {k: bp[k] for k in ("flop_w", "hbm_w", "link_w") if k in bp}
        out = dict(idle_w=round_sig(idle[0]), **out)
        fit = dict(n_points=idle[1], method="median power of samples at utilization.gpu == 0",
                   held_at_base=["flop_w", "hbm_w", "link_w"], inputs=idle[2])
        report.warnings.append("power: only idle power is measurable from the traces (no benchmark phases): "
                               "flop_w, hbm_w, link_w kept from the base profile")
    gamma_fit = None
    pts = [(lim, f, p) for lim, f, p in limit_pts if np.isfinite(f) and p > out["idle_w"] + 5]
    if len(pts) >= 3:
        f = np.array([q[1] for q in pts])
        pw = np.array([q[2] for q in pts]) - out["idle_w"]
        A = np.c_[np.ones(len(f)), np.log(f)]
        (c0, gam), *_ = np.linalg.lstsq(A, np.log(pw), rcond=None)
        res = np.exp(A @ [c0, gam]) / pw - 1
        gamma_fit = dict(n_points=len(pts), max_rel_err=round_sig(np.abs(res).max(), 3),
                         limits_w=[round_sig(q[0]) for q in pts],
                         method="least squares of log(P - idle) on log(SM clock) over the power-limit phases")
        out["gamma"] = round_sig(gam)
    else:
        out["gamma"] = bp.get("gamma")
        report.warnings.append("power.gamma: no power-limit sweep in the inputs (needs the right to set limits): "
                               "kept from the base profile")
    fit["gamma"] = gamma_fit or dict(kept_from="base profile")
    out["fit"] = fit
    report.rows.append(("power", " ".join(f"{k} {out[k]}" for k in ("idle_w", "flop_w", "hbm_w", "link_w", "gamma")),
                        _quality(fit)))
    return out


def _trace_idle_w(meas: Measurements):
    """(median power at 0 % utilisation, n samples, files) over the traces, or None (< 20 samples)."""
    vals, files = [], set()
    for tr in meas.traces:
        m = (tr.util_gpu_pct == 0) & np.isfinite(tr.power_w)
        if m.any():
            vals.append(tr.power_w[m])
            files.add(str(tr.path))
    v = np.concatenate(vals) if vals else np.array([])
    return (float(np.median(v)), int(v.size), sorted(files)) if v.size >= 20 else None


# --------------------------------------------------------------------------------------- thermal
def _step(t, t0, dT, tau):
    return t0 + dT * (1.0 - np.exp(-t / tau))


def fit_thermal_section(meas: Measurements, base: dict, report: FitReport) -> dict | None:
    """``thermal:`` R_th and tau per slot from the suite's sustained-GEMM step response.

    Model (costmodel/thermal.py, first-order RC): after the load starts at t = 0,
    T(t) = T_0 + dT (1 - exp(-t / tau)) with dT = R_th (P_load - P_idle), fitted per slot by
    ``scipy.optimize.curve_fit``; P_idle is the median power of the slot's idle phase (or of the
    first second of the step), P_load the median over the step.  The profile keeps the median over
    slots and lists every slot (``per_slot``) so a cluster file can set ``cooling.slots[].r_th_scale``.
    Without a step response, traces with a power range of >= 50 W give R_th alone, as the slope of
    T on P over their samples (steady-state assumption), and tau is kept from the base.
    """
    per_slot = []
    for s in meas.suites:
        samples = {}
        for r in s["sample"]:
            if r["temp_c"] is not None and r["power_w"] is not None:
                samples.setdefault((r["host"], r["slot"]), []).append(r)
        idle = {(ph["host"], ph["slot"]): ph for ph in s["phase"] if ph["name"] == "idle"}
        for ph in s["phase"]:
            if ph["name"] != "sustained_gemm":
                continue
            key = (ph["host"], ph["slot"])
            rows = sorted((r for r in samples.get(key, []) if ph["t_start_unix"] <= r["t_unix"] <= ph["t_end_unix"]),
                          key=lambda r: r["t_unix"])
            if len(rows) < 20:
                report.warnings.append(f"thermal: slot {key[1]} on {key[0]}: {len(rows)} samples in the sustained "
                                       "GEMM, the step fit needs >= 20")
                continue
            t = np.array([r["t_unix"] for r in rows]) - ph["t_start_unix"]
            T = np.array([r["temp_c"] for r in rows], float)
            P = np.array([r["power_w"] for r in rows], float)
            ip = idle.get(key)
            idle_rows = [r for r in samples.get(key, []) if ip and ip["t_start_unix"] <= r["t_unix"] <= ip["t_end_unix"]]
            p_idle = _median(idle_rows, "power_w") if idle_rows else float(np.median(P[t < 1.0])) if (t < 1.0).any() else P[0]
            p_load = float(np.median(P[t > 0.2 * t[-1]]))
            try:
                (T0, dT, tau), _ = curve_fit(_step, t, T, p0=[T[0], max(T[-1] - T[0], 1.0), max(t[-1] / 3, 1.0)],
                                             bounds=([-50, 0, 0.5], [150, 150, 1e5]), maxfev=20000)
            except (RuntimeError, ValueError) as e:
                report.warnings.append(f"thermal: slot {key[1]} on {key[0]}: step fit failed ({e})")
                continue
            Tm = _step(t, T0, dT, tau)
            ss = float(np.sum((T - T.mean()) ** 2))
            per_slot.append(dict(host=key[0], slot=key[1], r_th_c_per_w=round_sig(dT / max(p_load - p_idle, 1.0)),
                                 tau_s=round_sig(tau), t0_c=round_sig(T0), delta_t_c=round_sig(dT),
                                 p_idle_w=round_sig(p_idle), p_load_w=round_sig(p_load), n_points=len(t),
                                 r2=round_sig(1 - float(np.sum((T - Tm) ** 2)) / ss, 4) if ss > 0 else None,
                                 max_abs_err_c=round_sig(np.abs(T - Tm).max(), 3),
                                 run_s=round_sig(t[-1]), extrapolated=bool(t[-1] < 3 * tau)))
    files = sorted({str(s.path) for s in meas.suites if s["sample"]})
    if per_slot:
        r = float(np.median([x["r_th_c_per_w"] for x in per_slot]))
        tau = float(np.median([x["tau_s"] for x in per_slot]))
        for x in per_slot:
            x["r_th_scale"] = round_sig(x["r_th_c_per_w"] / r, 3)
        if any(x["extrapolated"] for x in per_slot):
            report.warnings.append("thermal: the sustained GEMM ran shorter than 3 tau on some slots: their steady "
                                   "temperature is extrapolated by the fit (run longer with --sustain-s)")
        report.rows.append(("thermal", f"r_th_c_per_w {r:.4f} tau_s {tau:.0f} over {len(per_slot)} slots",
                            "R2 " + ", ".join(str(x["r2"]) for x in per_slot)))
        return dict(r_th_c_per_w=round_sig(r), tau_s=round_sig(tau),
                    fit=dict(method="curve_fit of T0 + dT (1 - exp(-t/tau)) per slot over the sustained GEMM; "
                                    "R_th = dT / (P_load - P_idle); profile value = median over slots",
                             per_slot=per_slot, inputs=files))
    slopes, files = [], set()
    for tr in meas.traces:
        for g in np.unique(tr.gpu):
            m = (tr.gpu == g) & np.isfinite(tr.power_w) & np.isfinite(tr.temp_c)
            if m.sum() >= 20 and np.ptp(tr.power_w[m]) >= 50:
                b, a = np.polyfit(tr.power_w[m], tr.temp_c[m], 1)
                slopes.append((int(g), float(b)))
                files.add(str(tr.path))
    if not slopes:
        return None
    r = float(np.median([b for _, b in slopes]))
    report.warnings.append("thermal.tau_s: no step response in the inputs (run the suite's sustained GEMM): kept "
                           "from the base; R_th is the slope of temperature on power (steady-state assumption)")
    report.rows.append(("thermal", f"r_th_c_per_w {r:.4f} (T-vs-P slope, {len(slopes)} GPUs)", "tau kept"))
    return dict(r_th_c_per_w=round_sig(r), tau_s=(base.get("thermal") or {}).get("tau_s"),
                fit=dict(method="least squares slope of temperature on power per GPU over the trace; median",
                         per_gpu=[dict(gpu=g, r_th_c_per_w=round_sig(b)) for g, b in slopes],
                         tau_s="kept from the base profile", inputs=sorted(files)))


# ------------------------------------------------------------------------------------- assembly
def _quality(fit: dict) -> str:
    parts = [f"n={fit.get('n_points')}"]
    if fit.get("r2") is not None:
        parts.append(f"R2 {fit['r2']}")
    if fit.get("median_rel_err") is not None:
        parts.append(f"median {fit['median_rel_err']:.1%}")
    if fit.get("max_rel_err") is not None:
        parts.append(f"max {fit['max_rel_err']:.1%}")
    if fit.get("max_busbw_rel_err_ge_1MiB") is not None:
        parts.append(f"busbw>=1MiB max {fit['max_busbw_rel_err_ge_1MiB']:.1%}")
    return " ".join(parts)


def _outliers(section, t_model, t_meas, labels, report):
    """Warn about points whose |log residual| is beyond OUTLIER_MAD MADs of the fit and above 10 %."""
    r = np.log(np.asarray(t_model, float) / np.asarray(t_meas, float))
    mad = float(np.median(np.abs(r - np.median(r)))) or 1e-12
    bad = [i for i in range(len(r)) if abs(r[i]) > max(OUTLIER_MAD * mad, np.log(1.1))]
    if bad:
        shown = ", ".join(f"{labels[i]} ({np.exp(-r[i]) - 1:+.0%})" for i in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        report.warnings.append(f"{section}: {len(bad)} outlier(s), measured vs fit: {shown}{more}")


def _at_bound(section, p, eff_max, report):
    """Warn when the best protocol's busbw efficiency sits at its upper bound: the data are faster than
    the link the fit normalises by, so the topology or the link bandwidth given is likely wrong."""
    best = max(e for _, e in p.absolute_protocols)
    if best >= 0.995 * eff_max:
        report.warnings.append(f"{section}: busbw efficiency {best:.3f} sits at its bound {eff_max}: the measurement "
                               "is faster than the link it is normalised by (check --nodes/--gpus-per-node, the "
                               "collective, or the cluster's link bandwidth)")


def _provenance(meas: Measurements, gpu: GpuSpec, gpu_why: str, base_path: str, cluster, argv):
    prov = [r for s in meas.suites for r in s["provenance"]]
    pick = lambda k: sorted({str(r.get(k)) for r in prov if r.get(k) is not None})
    t = [r.get("started_unix") for r in prov if r.get("started_unix")]
    d = dict(generated_by=GENERATED_BY, command=" ".join(argv) if argv else None,
             fitted_unix=round(time.time()), gpu=gpu.key, gpu_from=gpu_why, base_profile=base_path,
             cluster=cluster.key if cluster else None,
             inputs=[dict(path=p, sha256=h) for p, h in meas.files.items()])
    if prov:
        d["measured"] = dict(hosts=pick("host"), gpu_names=pick("gpu_name"), gpu_ids=pick("gpu_id"),
                             pci_bus_ids=pick("pci_bus_id"), devices=pick("device"), driver=pick("driver_version"),
                             cuda=pick("cuda_version"), rocm=pick("rocm_version"), nccl=pick("nccl_version"),
                             torch=pick("torch_version"), world_size=max(r["world_size"] for r in prov),
                             started_unix=min(t) if t else None)
    return d


def fit_profile(meas: Measurements, gpu: GpuSpec, gpu_why: str = "", base: dict | None = None, base_path: str = "",
                cluster: ClusterSpec | None = None, report: FitReport | None = None, argv=None) -> tuple[dict, FitReport]:
    """Fit every section the measurements cover; keep the rest from ``base``.

    Args:
        meas: :func:`load_measurements` output.  gpu: the datasheet the data are normalised by.
        base: base profile mapping (:func:`base_profile`).  cluster: for the NIC and NVLink bandwidth.
        argv: the command line, recorded in the provenance.
    Returns:
        (profile mapping in the hardware/README.md schema, :class:`FitReport`).
    Raises:
        FitError: nothing in ``meas`` produced a fitted section.
    """
    report = report if report is not None else FitReport()
    if base is None:
        base, base_path = base_profile(gpu)
    prof = copy.deepcopy(base)
    prof["gpu"] = gpu.key
    devices = {r.get("device") for s in meas.suites for r in s["provenance"]}
    if "cpu" in devices:
        report.warnings.append(f"the suite ran on CPU (plumbing check): its timings describe no GPU, yet they are "
                               f"fitted here against the {gpu.key} datasheet as asked")
    fitted = []

    def keep(section, why):
        report.warnings.append(f"{section}: {why}: kept from the base profile {base_path}")
        prof[section] = dict(prof.get(section) or {}, kept_from=base_path)

    hbm = fit_hbm_section(meas, gpu, report)
    if hbm:
        prof["hbm"] = hbm
        fitted.append("hbm")
    else:
        keep("hbm", "no HBM measurement")
    hbm_eff = float(prof["hbm"]["efficiency"])
    gemm = fit_gemm_section(meas, gpu, hbm_eff, report)
    for dt, e in gemm.items():
        prof["gemm"][dt] = e
        fitted.append(f"gemm.{dt}")
    for dt in prof["gemm"]:
        if dt not in gemm:
            prof["gemm"][dt] = dict(prof["gemm"][dt], kept_from=base_path)
            report.warnings.append(f"gemm.{dt}: not measured: kept from the base profile {base_path}")
    prof["attention"] = dict(prof.get("attention") or {}, kept_from=base_path)
    report.warnings.append(f"attention: the suite does not time fused attention: kept from the base profile {base_path}")
    comm = fit_comm_section(meas, gpu, base, cluster, report)
    for scope in ("intra_node", "inter_node"):
        for coll in COLLECTIVES:
            if coll in comm[scope]:
                prof["comm"][scope][coll] = comm[scope][coll]
                fitted.append(f"comm.{scope}.{coll}")
            else:
                prof["comm"][scope][coll] = dict(prof["comm"][scope][coll], kept_from=base_path)
        missing = [c for c in COLLECTIVES if c not in comm[scope]]
        if missing:
            report.warnings.append(f"comm.{scope}: no measurement of {', '.join(missing)}: kept from the base profile")
    ov = fit_overlap_section(meas, report)
    if ov:
        prof["overlap"] = ov
        fitted.append("overlap")
    pw = fit_power_section(meas, gpu, base, report)
    if pw:
        prof["power"] = pw
        fitted.append("power")
    elif base.get("power"):
        keep("power", "no power samples")
    th = fit_thermal_section(meas, base, report)
    if th:
        prof["thermal"] = th
        fitted.append("thermal")
    elif base.get("thermal"):
        keep("thermal", "no temperature step response or trace")
    if not fitted and any("no --cluster" in w for w in report.warnings):
        raise FitError("the inputs hold inter-node measurements only, and these need --cluster (the NIC bandwidth "
                       "they are normalised by)")
    if not fitted:
        raise FitError("the inputs cover no profile section (no GEMM, HBM, collective, power or temperature data "
                       "usable for " + gpu.key + ")")
    prof["provenance"] = _provenance(meas, gpu, gpu_why, base_path, cluster, argv)
    prof["provenance"]["fitted_sections"] = fitted
    prof["provenance"]["warnings"] = list(report.warnings)
    return prof, report
