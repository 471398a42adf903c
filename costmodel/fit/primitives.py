"""Fitting primitives shared by :mod:`costmodel.fit.builtin` (the built-in profiles) and the section fits
of ``costmodel calibrate fit`` (a profile from a cluster's own measurements).

* GEMM: :func:`fit_gemm` (roofline with tile, wave and K-loop efficiency, costmodel/gemm.py).
* Collectives: :func:`fit_collective` / :func:`fit_hierarchical` (NCCL protocol lines LL, LL128,
  Simple; costmodel/collective.py) by ``scipy.optimize.least_squares`` with a robust loss.
* Fit-quality records (:func:`fit_stats`) and reporting (:func:`quality`, :func:`warn_outliers`,
  :func:`warn_at_bound`); the profile YAML is written by :func:`costmodel.specs.profile.dump_profile`.
"""
from __future__ import annotations

import itertools

import numpy as np
from scipy.optimize import least_squares

from costmodel.collective import (CollectiveParams, busbw_factor, collective_time_s, hierarchical_time_s)
from costmodel.errors import FitError
from costmodel.gemm import GemmParams, gemm_time_s
from costmodel.specs.profile import Flow

MiB = 2 ** 20

GEMM_BYTES = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "fp4": 0.5}
TILES = (64, 128, 256)


def round_sig(x, sig=4):
    """Round to ``sig`` significant digits as a plain float/int for YAML."""
    if isinstance(x, (int, np.integer)):
        return int(x)
    return float(f"{float(x):.{sig}g}")


def fit_stats(t_model, t_meas, inputs, sizes=None, **extra):
    """Fit-quality record: n_points, median/max relative error of time, R^2 of log time.

    With message ``sizes`` (bytes) also the median/max relative time error and the max relative busbw
    error at sizes >= 1 MiB (the bandwidth regime that dominates training).
    """
    t_model, t_meas = np.asarray(t_model, float), np.asarray(t_meas, float)
    rel = np.abs(t_model / t_meas - 1.0)
    lm, lt = np.log(t_model), np.log(t_meas)
    ss_tot = float(np.sum((lt - lt.mean()) ** 2))
    r2 = 1.0 - float(np.sum((lm - lt) ** 2)) / ss_tot if ss_tot > 0 else float("nan")
    out = dict(n_points=int(len(t_meas)), median_rel_err=round_sig(np.median(rel), 3), max_rel_err=round_sig(rel.max(), 3),
               r2=round_sig(r2, 4) if np.isfinite(r2) else None)
    big = np.asarray(sizes if sizes is not None else [], float) >= MiB
    if big.any():
        out.update(median_rel_err_ge_1MiB=round_sig(np.median(rel[big]), 3), max_rel_err_ge_1MiB=round_sig(rel[big].max(), 3),
                   max_busbw_rel_err_ge_1MiB=busbw_err(sizes, t_model, t_meas))
    out.update(extra)
    out["inputs"] = list(inputs)
    return out


# ----------------------------------------------------------------------------------------- GEMM
def fit_gemm(pts, peak, hbm_bps, hbm_eff, num_sms, bytes_per_element=2.0, eta_cap=1.0, k_half=None):
    """Fit :class:`GemmParams` to measured GEMM times.

    Args:
        pts: dict of equal-length arrays ``b, m, n, k`` (elements) and ``t`` (measured seconds).
        peak: datasheet dense peak of the dtype, FLOP/s.  hbm_bps: datasheet HBM bandwidth, B/s.
        hbm_eff: fitted achievable HBM fraction.  num_sms: datasheet SM/CU count.
        bytes_per_element: operand bytes (2 for bf16/fp16, 1 for fp8).
        eta_cap: upper bound of eta_max: the maximum achievable matmul FLOP/s over the peak found by
            a brute-force shape search (MAMF).  Every quantisation factor of the model is <= 1, so
            no shape may be predicted faster than that measured maximum; without the bound a fit to
            tables of small shapes (XLA's go to 4096) extrapolates above it for training-size GEMMs.
        k_half: a fixed K-loop overhead (elements) where the points hold one K only: there eta_max and
            k_half trade off exactly (eta k / (k + k_half) is all the data sees); None fits it.
    Returns:
        (GemmParams, model times at the points, seconds).
    Method: for each (tile_m, tile_n) in {64,128,256}^2, ``least_squares`` (soft_l1, f_scale 0.05)
    on log(model/measured) over eta_max in [0.05, eta_cap], k_half in [0, 1e4] elements, launch_s in
    [0, 100 us]; the tile with the lowest robust cost is kept (ties: the smaller tile).
    Raises:
        ValueError: fewer than 4 points.
    """
    b, m, n, k, t = (np.asarray(pts[c], float) for c in ("b", "m", "n", "k", "t"))
    if len(t) < 4:
        raise ValueError(f"GEMM fit needs >= 4 points, got {len(t)}")
    best = None
    for tm, tn in itertools.product(TILES, TILES):
        def res(x, tm=tm, tn=tn):
            p = GemmParams(x[0], x[1] if k_half is None else k_half, x[2] * 1e-6, tm, tn, num_sms)
            return np.log(gemm_time_s(m, n, k, b, peak, hbm_bps, hbm_eff, p, bytes_per_element) / t)
        fits = [least_squares(res, [min(x0[0], 0.99 * eta_cap)] + x0[1:],
                              bounds=([0.05, 0.0, 0.0], [eta_cap, 1e4, 100.0]), loss="soft_l1", f_scale=0.05)
                for x0 in ([0.8, 100.0, 5.0], [0.6, 500.0, 1.0])]
        r = min(fits, key=lambda f: f.cost)
        if best is None or r.cost < best[0].cost - 1e-12:
            best = (r, tm, tn)
    r, tm, tn = best
    p = GemmParams(float(r.x[0]), float(r.x[1] if k_half is None else k_half), float(r.x[2]) * 1e-6, tm, tn, num_sms)
    tmod = gemm_time_s(m, n, k, b, peak, hbm_bps, hbm_eff, p, bytes_per_element)
    return p, tmod


def gemm_entry(p, fit=None, **extra):
    """Profile entry of a GEMM fit: the GemmParams fields (4 significant digits), extras, fit record."""
    d = dict(eta_max=round_sig(p.eta_max), k_half=round_sig(p.k_half), launch_s=round_sig(p.launch_s), tile_m=p.tile_m,
             tile_n=p.tile_n, num_sms=p.num_sms)
    d.update(extra)
    if fit is not None:
        d["fit"] = fit
    return d


# ---------------------------------------------------------------------------------- collectives
NAMES = {2: ("LL", "Simple"), 3: ("LL", "LL128", "Simple")}  # NCCL protocols, lowest latency first
LOSS, F_SCALE = "soft_l1", 0.1  # robust loss on log time: residuals beyond ~10 % count linearly
FIT_METHOD = f"least_squares {LOSS} (f_scale {F_SCALE}) on log time, NCCL protocol lines (costmodel/collective.py)"


def _pairs(x, k):
    """Parameter vector -> ``[(alpha_s, busbw_efficiency), ...]``, lowest latency first.

    ``x = [log10 alpha_1, log10(alpha_2/alpha_1), ..., eff_k, eff_1/eff_2, ..., eff_(k-1)/eff_k]``:
    latencies and efficiencies both increase from LL to Simple, as in NCCL's tuner (tuning.cc), so
    the protocols cannot swap places and the fit is identifiable.
    """
    a = 10.0 ** np.cumsum(x[:k])
    e = x[k] * np.cumprod(np.r_[x[k + 1:], 1.0][::-1])[::-1]
    return [(float(ai), float(ei)) for ai, ei in zip(a, e)]


def _winners(p, line_s):
    """Indices of the protocols of ``p`` that are the fastest somewhere in the range of ``line_s``.

    ``line_s``: bus bytes / link bandwidth of the measured points (the transfer time at line rate), s.
    """
    grid = np.geomspace(min(line_s), max(line_s), 64 * max(1, int(np.log10(max(line_s) / min(line_s)))) + 2)
    return set(np.argmin([a + grid / e for a, e in p.protocols], axis=0).tolist())


#: the least busbw efficiency a protocol fit may reach (its lower bound): a fit there is pinned, not fitted
EFF_MIN = 0.05


def fit_protocols(time_of, t, k=3, eff_max=1.0, fix=None):
    """Fit NCCL protocol lines ``(alpha_p, eff_p)`` so that ``time_of(CollectiveParams)`` matches ``t``.

    Args:
        time_of: function CollectiveParams -> model times (s) at the measured points.
        t: measured times, s.
        k: number of protocols (3: LL, LL128, Simple; 2: LL, Simple).
        eff_max: upper bound of the Simple efficiency (1 = line rate; NVLS all-reduce may exceed it).
        fix: {index of the parameter vector (see :func:`_pairs`): value} held fixed.
    Returns:
        (CollectiveParams, parameter vector x).
    Method: ``least_squares`` on log(model/measured) with the ``soft_l1`` loss (f_scale 0.1: residuals
    beyond ~10 % count linearly, so timer noise and algorithm switches do not dominate; log time makes
    small messages count as much as large ones), 12 starts.  Bounds: alpha_1 in [0.1 us, 1 ms], each
    next alpha 1..1000 x the previous, eff_k in [0.05, eff_max], eff_(j)/eff_(j+1) in [0.005, 1].
    Raises:
        ValueError: fewer points than 2k.
    """
    t = np.asarray(t, float)
    if len(t) < 2 * k - len(fix or {}):
        raise ValueError(f"protocol fit needs >= {2 * k - len(fix or {})} points, got {len(t)}")
    fix = fix or {}
    lo = np.r_[-7.0, [0.0] * (k - 1), EFF_MIN, [0.005] * (k - 1)]
    hi = np.r_[-3.0, [3.0] * (k - 1), eff_max, [1.0] * (k - 1)]
    free = np.array([i for i in range(2 * k) if i not in fix], int)

    def full(z):
        x = np.array([fix.get(i, 0.0) for i in range(2 * k)])
        x[free] = z
        return x

    def res(z):
        return np.log(time_of(CollectiveParams.from_protocols(_pairs(full(z), k))) / t)
    # with lines held fixed, the other scope can hide Simple's efficiency above some value (flat residuals,
    # where a step from below lands and stops): start across the whole range
    effs = (0.8,) if not fix else tuple(np.linspace(0.1, 1.0, 10))
    starts = [np.r_[la, [d] * (k - 1), ef * eff_max, [q] * (k - 1)][free]
              for la, d, q, ef in itertools.product((-5.5, -4.8, -4.2), (0.15, 0.5), (0.25, 0.7), effs)]
    r = min((least_squares(res, np.clip(s, lo[free] + 1e-9, hi[free] - 1e-9), bounds=(lo[free], hi[free]),
                           loss=LOSS, f_scale=F_SCALE) for s in starts), key=lambda f: f.cost)
    x = full(r.x)
    return CollectiveParams.from_protocols(_pairs(x, k)), x


def vector_of(p) -> np.ndarray:
    """Inverse of :func:`_pairs`: the parameter vector of :class:`CollectiveParams` ``p`` (its
    protocols sorted by latency; steps and ratios clipped to the fit's bounds)."""
    pr = sorted(p.absolute_protocols)
    a = np.maximum([q[0] for q in pr], 1e-7)
    e = np.array([q[1] for q in pr])
    steps = np.clip(np.diff(np.log10(a)), 0.0, 3.0)
    ratios = np.clip(e[:-1] / e[1:], 0.005, 1.0)
    return np.r_[np.log10(a[0]), steps, e[-1], ratios]


def short_sweep_fix(base, n_points: int) -> tuple:
    """``(fix, k)`` for :func:`fit_protocols` on a sweep too short for a protocol fit: one line.

    The faster protocols' latencies and their efficiency ratios to Simple are held at the base
    profile's ``base`` (:class:`CollectiveParams`); Simple's latency and efficiency are fitted (2+
    points), or its efficiency alone (1 point). The same rule the built-in A100 send/recv uses for
    li-plus's 4-point 128 MiB..1 GiB sweep (costmodel/fit/builtin/comm.py).
    """
    x = vector_of(base)
    k = len(x) // 2
    free = {k - 1, k} if n_points >= 2 else {k}
    return {i: float(x[i]) for i in range(2 * k) if i not in free}, k


def fit_pruned(time_of, t, line_s, eff_max):
    """:func:`fit_protocols` with 3 protocols; 2 (LL, Simple) if one of the 3 never wins on the data."""
    p, x = fit_protocols(time_of, t, 3, eff_max)
    if len(_winners(p, line_s)) < 3:
        p, x = fit_protocols(time_of, t, 2, eff_max)
    return p, x


def fit_collective(coll, n, t, group_size, link_bps, eff_max=1.0, fix=None, k=3):
    """Fit :class:`CollectiveParams` (NCCL protocol lines) of one collective in one scope.

    Args:
        coll: collective name (:data:`costmodel.collective.COLLECTIVES`).
        n: message sizes, bytes (nccl-tests "size").  t: measured times, seconds.
        group_size: ranks (scalar or per point).  link_bps: datasheet per-GPU link bandwidth, B/s.
        eff_max: bound of the best protocol's busbw / link (1.0; NVLS all-reduce: above 1).
        fix, k: parameters held fixed and the number of protocols (see :func:`fit_protocols`), for
            sweeps without small messages; with ``fix`` the number of protocols is not pruned.
    Returns:
        (CollectiveParams, model times at ``n``, parameter vector).
    Method: :func:`fit_protocols` with LL, LL128, Simple; LL and Simple only when one of the three is
    never the fastest at a measured size (the data cannot tell it apart).
    Raises:
        ValueError: too few points.
    """
    n, t = np.asarray(n, float), np.asarray(t, float)

    def time_of(q):
        return collective_time_s(coll, n, group_size, link_bps, q)
    if fix:
        p, x = fit_protocols(time_of, t, k, eff_max, fix)
    else:
        p, x = fit_pruned(time_of, t, busbw_factor(coll, group_size) * n / link_bps, eff_max)
    return p, collective_time_s(coll, n, group_size, link_bps, p), x


def fit_hierarchical(n, t, ranks_per_node, n_nodes, intra_bps, inter_bps, p_intra):
    """Fit the inter-node all-reduce protocol lines of ``hierarchical_time_s`` (intra scope fixed).

    Args:
        n, t: message sizes (bytes) and measured times (s) of a multi-node all-reduce sweep.
        ranks_per_node, n_nodes: topology of the measurement.
        intra_bps: datasheet NVLink bandwidth per GPU per direction, B/s.
        inter_bps: a GPU's share of the node's NICs, B/s (line rate x NICs / GPUs per node).
        p_intra: the fitted intra-node all-reduce :class:`CollectiveParams`.
    Returns:
        (CollectiveParams, model times at ``n``).
    Method: :func:`fit_protocols` (soft_l1 on log time, all sizes) with every efficiency at most 1:
    no protocol beats the NICs' line rate.
    """
    n, t = np.asarray(n, float), np.asarray(t, float)

    def time_of(q):
        return hierarchical_time_s("all_reduce", n, ranks_per_node, n_nodes, intra_bps, inter_bps, p_intra, q)
    p, _ = fit_pruned(time_of, t, busbw_factor("all_reduce", n_nodes) * n / ranks_per_node / inter_bps, 1.0)
    return p, time_of(p)


def coll_entry(p, fit=None, **extra):
    """Profile entry: ``protocols`` list (name, absolute alpha_s, busbw_efficiency), extras, fit."""
    pr = p.absolute_protocols
    d = dict(protocols=[Flow(name=nm, alpha_s=round_sig(a), busbw_efficiency=round_sig(e)) for nm, (a, e) in zip(NAMES[len(pr)], pr)])
    d.update(extra)
    if fit is not None:
        d["fit"] = fit
    return d


def params_of(entry):
    """Profile entry -> :class:`CollectiveParams`."""
    return CollectiveParams.from_protocols([(q["alpha_s"], q["busbw_efficiency"]) for q in entry["protocols"]])


def protocol_text(p):
    """'LL 25.4us/0.016 LL128 ...' for the printed table."""
    pr = p.absolute_protocols
    return " ".join(f"{nm} {a * 1e6:.1f}us/{e:.3f}" for nm, (a, e) in zip(NAMES[len(pr)], pr))


def fit_text(p, fit):
    """One row of the printed fit table."""
    return (f"{protocol_text(p)} | n={fit['n_points']} median {fit['median_rel_err']:.3f} max {fit['max_rel_err']:.3f} | "
            f">=1MiB median {fit.get('median_rel_err_ge_1MiB')} max {fit.get('max_rel_err_ge_1MiB')} busbw max "
            f"{fit.get('max_busbw_rel_err_ge_1MiB')}")


def busbw_err(n, t_model, t_meas):
    """Max relative busbw error at sizes >= 1 MiB (busbw ~ 1/time)."""
    n = np.asarray(n, float)
    e = np.abs(np.asarray(t_meas) / np.asarray(t_model) - 1.0)[n >= MiB]
    return round_sig(e.max(), 3) if e.size else None


# ---------------------------------------------------------------------------- fit-quality reporting
OUTLIER_MAD = 5.0      # a point whose |log residual| exceeds this many MADs (and 10 %) is reported


def median_of(rows, key):
    """Median of ``row[key]`` over the rows that have it (NaN when none)."""
    v = [r[key] for r in rows if r.get(key) is not None]
    return float(np.median(v)) if v else float("nan")


def quality(fit: dict) -> str:
    """One-line fit quality for the printed table: n, R^2, median and max relative error."""
    parts = [f"n={fit.get('n_points')}"]
    if fit.get("r2") is not None:
        parts.append(f"R2 {fit['r2']}")
    if fit.get("median_rel_err") is not None:
        parts.append(f"median {fit['median_rel_err']:.1%}")
    if fit.get("max_rel_err") is not None:
        parts.append(f"max {fit['max_rel_err']:.1%}")
    if fit.get("max_busbw_rel_err_ge_1MiB") is not None:
        parts.append(f"busbw>=1MiB max {fit['max_busbw_rel_err_ge_1MiB']:.1%}")
    if isinstance(fit.get("n_points"), int) and fit["n_points"] <= 2 and not (fit.get("median_rel_err") or 0) > 0.005:
        # a line (latency, efficiency) through two points: an exact fit says nothing of its error; one that
        # misses them (a parameter held or bounded) has just been shown to
        parts.append("(exact by construction: no error measured)")
    return " ".join(parts)


def warn_outliers(section, t_model, t_meas, labels, report):
    """Warn about points whose |log residual| is beyond OUTLIER_MAD MADs of the fit and above 10 %."""
    r = np.log(np.asarray(t_model, float) / np.asarray(t_meas, float))
    mad = float(np.median(np.abs(r - np.median(r)))) or 1e-12
    bad = [i for i in range(len(r)) if abs(r[i]) > max(OUTLIER_MAD * mad, np.log(1.1))]
    if bad:
        # the fit's error over the measurement, as the fit's median and max errors are stated
        shown = ", ".join(f"{labels[i]} ({np.exp(r[i]) - 1:+.0%})" for i in bad[:5])
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        report.warnings.append(f"{section}: {len(bad)} outlier(s), fit vs measured: {shown}{more}")


#: a sweep must reach this size for Simple's bandwidth to dominate its fitted latency: a NIC's 25-50 GB/s
#: times the 0.1-2 ms inter-node Simple latencies of the built-in fits is 2.5-100 MB
BANDWIDTH_BOUND_BYTES = 2 ** 26


def warn_at_bound(section, p, eff_max, report, sizes=None, files=()):
    """Warn when the fit is implausible: the best protocol's busbw efficiency at its upper bound (the data
    are faster than the link the fit normalises by: the topology or the link bandwidth given is likely
    wrong; or, with fewer than 3 message sizes (``sizes``, B), too few points to tell the latency from the
    bandwidth) or under 5 % of it (the link given is far faster than the one measured), or a protocol's
    latency outside 0.5-500 us (each protocol: a large one prices every small message of the layout).

    Raises:
        FitError: the best efficiency under 5 % of the link's, or at the fit's lower bound
            (:data:`EFF_MIN`), or at its upper bound over 3 or more sizes reaching
            :data:`BANDWIDTH_BOUND_BYTES`: the capture is not of this cluster's links.  Its message
            starts with the capture ``files`` where given."""
    best = max(e for _, e in p.absolute_protocols)
    named = f"{', '.join(map(str, files))}: " if files else ""
    n_sizes = len(np.unique(np.asarray(sizes, dtype=float))) if sizes is not None else None
    measured = n_sizes is not None and n_sizes >= 3 and float(np.max(sizes)) >= BANDWIDTH_BOUND_BYTES
    if best >= 0.995 * eff_max and measured:
        # a sweep that reaches the bandwidth ran faster than the link allows: the capture is of other
        # links (or ranks), and a line pinned at the bound would price them
        raise FitError(f"{named}{section}: busbw efficiency {best:.3f} sits at its bound {eff_max}: the measurement over "
                       f"{n_sizes} sizes is faster than the link it is normalised by (check --nodes/--gpus-per-node, "
                       "the collective, or the cluster's link bandwidth); nothing written")
    if best >= 0.995 * eff_max:
        report.warnings.append(
            f"{section}: busbw efficiency {best:.3f} sits at its bound {eff_max}: " + (
                f"the capture's {n_sizes} message size(s) cannot tell the latency from the bandwidth (measure a "
                "sweep: nccl-tests -b 8 -e 8G -f 2)" if n_sizes is not None and n_sizes < 3 else
                "the measurement is faster than the link it is normalised by (check --nodes/--gpus-per-node, the "
                "collective, or the cluster's link bandwidth)"))
    pr = p.absolute_protocols
    odd = [(nm, a) for nm, (a, _) in zip(NAMES[len(pr)], pr) if a < 0.5e-6 or a > 500e-6]
    if odd:
        report.warnings.append(f"{section}: protocol latency {', '.join(f'{nm} {a * 1e6:.2f} us' for nm, a in odd)} "
                               "outside 0.5-500 us (NCCL's own tuner assumes 0.6-14 us per hop: src/graph/tuning.cc): "
                               "check the capture's small sizes and its topology")
    if best < 0.05 * eff_max or best <= EFF_MIN * (1 + 1e-3):
        # no fabric a catalog cluster names runs its collectives at a twentieth of its links: a fit pinned
        # there prices every layout with the capture's fault (a time unit, another cluster), so none is written
        raise FitError(f"{named}{section}: busbw efficiency {best:.4f} is under 5 % of the link: the capture ran far slower "
                       "than this cluster's links allow (times in another unit, or another cluster: check --cluster, "
                       "the GPUs per node and the capture's time column)")
