"""The ``comm:`` section of a profile: NCCL protocol lines per scope and collective."""
from __future__ import annotations

import copy
import dataclasses

import numpy as np

from costmodel.collective import COLLECTIVES, busbw_factor, collective_time_s
from costmodel.collectives_table import capture_cluster, capture_time_s
from costmodel.comm import group_link_bytes_per_s
from costmodel.errors import FitError
from costmodel.specs import ClusterSpec, GpuSpec
from costmodel.specs.params import CollectiveParams

from .measurements import FitReport, Measurements
from costmodel.specs.params import NVLS_EFF_MAX

from .primitives import (BANDWIDTH_BOUND_BYTES, FIT_METHOD, NAMES, coll_entry, fit_collective, fit_protocols, fit_stats,
                         params_of, protocol_text, quality, round_sig, short_sweep_fix, vector_of, warn_at_bound,
                         warn_outliers)

#: fewest sizes of a full protocol fit per scope (3 protocols x 2 intra; 2 x 2 inter, costmodel/fit/primitives.py)
FULL_FIT_POINTS = {"intra_node": 6, "inter_node": 4}


def _short(scope: str, coll: str, n, base: dict, report: FitReport, group=None, line_s=None):
    """``(fix, k, method note)`` when ``n`` sizes cannot identify the protocol lines (too few for a full
    fit, or all bandwidth-bound, >= 1 MiB, where only Simple runs), else ``(None, 3, "")``; warns that only
    one line (Simple) is fitted and the rest comes from the base profile (its fit of ``group`` ranks
    where it has one, for a ``by_group_size`` entry).  ``line_s``: the largest size's bus bytes over the
    link bandwidth, s (None: not known); a latency-bound sweep whose largest size the base's LL line
    prices :data:`LL_BANDWIDTH_SEEN` or more above its latency measures LL's efficiency, fitted too."""
    need = FULL_FIT_POINTS[scope]
    bandwidth_only = float(np.min(n)) >= LATENCY_BOUND_BYTES
    latency_only = float(np.max(n)) < LATENCY_BOUND_BYTES
    if len(n) >= need and not bandwidth_only and not latency_only:
        return None, 3, ""
    entry = base["comm"][scope][coll]
    if group:                       # YAML keys read back as strings
        entry = {int(k): e for k, e in (entry.get("by_group_size") or {}).items()}.get(group, entry)
    if latency_only:
        # no size reaches a bandwidth, and which protocols win below 1 MiB depends on where the sweep
        # stops: only LL's latency is fitted (one parameter, so two rows do not pin a line at a bound),
        # the faster protocols' efficiencies and latencies relative to LL's held at the base profile's
        # (a sweep of 8..128 B had fitted LL128 at 0.3% of the NIC), and Simple's line is the base's
        # (:func:`_with_base_simple`)
        x = vector_of(params_of(entry))
        k = len(x) // 2
        fix = {i: float(x[i]) for i in range(1, 2 * k)}
        a_ll, e_ll = sorted(params_of(entry).absolute_protocols)[0]
        if line_s is not None and line_s / e_ll >= LL_BANDWIDTH_SEEN * a_ll:
            # the base's LL line climbs over the sweep (an H100 NVLS fit's LL at 1.5 % of the link takes
            # 136 us at 512 KiB): the sizes measure LL's bandwidth, and held at the base's it misses a
            # flat capture by 30-50 % (R2 -105): LL's efficiency (its ratio to the next line's) is fitted
            del fix[k + 1]
            return fix, k, "; latency-bound sweep: LL's latency and efficiency fitted, the faster protocols' " \
                "efficiencies and latencies relative to LL's held at the base profile's, Simple's line the base " \
                "profile's"
        return fix, k, \
            "; latency-bound sweep: LL's latency fitted, the faster protocols' efficiencies and latencies relative " \
            "to LL's held at the base profile's, Simple's line the base profile's"
    fix, k = short_sweep_fix(params_of(entry), len(n))
    coll = f"{coll} (groups of {group})" if group else coll
    what = "Simple's latency and efficiency" if len(n) >= 2 else "Simple's efficiency"
    why = (f"{len(n)} size(s), fewer than the {need} a protocol fit needs" if len(n) < need else
           f"all {len(n)} sizes are >= 1 MiB (bandwidth-bound: the faster protocols never win there)")
    report.warnings.append(f"comm.{scope}.{coll}: {why}: fitted {what} only (one line); the faster protocols keep "
                           "the base profile's latencies and efficiency ratios to Simple (so their efficiencies move "
                           "with Simple's); rerun nccl-tests with -b 8 -e 8G -f 2 to fit them")
    return fix, k, (f"; short sweep: only {what} fitted, the other protocols' latencies and efficiency ratios to "
                    "Simple held at the base profile's")



def _with_base_simple(p, scope: str, coll: str, n, base: dict, group=None):
    """``p`` (CollectiveParams) with Simple's line (its absolute latency and efficiency) the base
    profile's entry's where no size of ``n`` reaches 1 MiB (Simple's range: the sweep never measured
    it); ``p`` as it is otherwise."""
    if float(np.max(n)) >= LATENCY_BOUND_BYTES:
        return p
    entry = base["comm"][scope][coll]
    if group:
        entry = {int(k): e for k, e in (entry.get("by_group_size") or {}).items()}.get(group, entry)
    simple = sorted(params_of(entry).absolute_protocols)[-1]
    return CollectiveParams.from_protocols(list(sorted(p.absolute_protocols)[:-1]) + [simple])


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


def nic_bytes_per_gpu(cluster, ranks_per_node: int) -> float:
    """NIC bandwidth each of ``ranks_per_node`` GPUs of a node drives in a capture, bytes/s per direction:
    NCCL gives each GPU the NICs nearest it (rail-optimised nodes: nics_per_node / gpus_per_node each),
    so a run with fewer GPUs per node than the node has uses only their NICs, not the node's total."""
    own = max(1, cluster.nics_per_node // max(cluster.gpus_per_node, 1))
    used = min(cluster.nics_per_node, ranks_per_node * own)
    return cluster.nic_bytes_per_s * used / max(ranks_per_node, 1)


#: a sweep whose smallest message is at least this large never sees the latency-bound regime
LATENCY_BOUND_BYTES = 2 ** 20

#: a latency-bound sweep measures LL's efficiency when the base's LL line at its largest size lies this
#: fraction of LL's latency above the latency: 10 %, several times the 1-3 % timer spread of nccl-tests rows
LL_BANDWIDTH_SEEN = 0.1


def warn_sweep_span(name: str, n, report) -> None:
    """Warn when a sweep cannot identify what the protocol fit returns: its smallest size is >= 1 MiB
    (bandwidth-bound throughout: the latencies and the LL/LL128 lines rest on the fit's starting
    values), its largest is under :data:`BANDWIDTH_BOUND_BYTES` (the bandwidth rests on rows where the
    latency still weighs), or it spans less than 3 decades of sizes: each that applies, so a short
    sweep of large sizes hears all three."""
    n = np.asarray(n, dtype=np.float64)
    lo, hi = float(n.min()), float(n.max())
    if lo >= LATENCY_BOUND_BYTES:
        report.warnings.append(f"{name}: the smallest of the {len(n)} sizes is {lo / 2**20:g} MiB: the sweep is "
                               "bandwidth-bound throughout, so the latencies and the LL/LL128 lines are not measured "
                               "(small messages will be off); rerun nccl-tests from -b 8")
    if hi < LATENCY_BOUND_BYTES:
        report.warnings.append(f"{name}: the largest of the {len(n)} sizes is {hi / 2**10:g} KiB: the sweep is "
                               "latency-bound throughout, so the bandwidth (Simple's line) is not measured: held at "
                               "the base profile's; rerun nccl-tests to -e 8G to fit it")
    elif hi < BANDWIDTH_BOUND_BYTES:
        report.warnings.append(f"{name}: the largest of the {len(n)} sizes is {hi / 2**20:g} MiB, under "
                               f"{BANDWIDTH_BOUND_BYTES // 2**20} MiB: Simple's bandwidth is fitted from rows its "
                               "latency still weighs on, so messages of hundreds of MB to GBs (gradient buckets, "
                               "FSDP gathers) may be far off; rerun nccl-tests to -e 8G")
    if hi / max(lo, 1.0) < 1e3:
        report.warnings.append(f"{name}: the {len(n)} sizes span {lo:g}..{hi:g} B, under 3 decades: the protocol "
                               "lines are poorly identified; rerun nccl-tests with -b 8 -e 8G -f 2")


#: the algorithm label of a calibrated intra-node entry: whatever NCCL picked on the measured machine
MEASURED_ALGORITHM = "nccl-default (as measured)"


def _algorithm(coll: str, g: int) -> str:
    """The label of a calibrated entry of ``g`` ranks: ring for a 2-GPU all-reduce (NCCL runs no NVLS at
    <= 2 GPUs: NVIDIA/nccl src/transport/nvls.cc), so that it prices only 2-GPU groups
    (costmodel.comm ``_group_params``); NCCL's own choice otherwise."""
    return "ring" if coll == "all_reduce" and g <= 2 else MEASURED_ALGORITHM


def _smaller_groups(coll: str, g0: int, sweeps: list, link_of, eff_max: float, base: dict, base_path: str,
                    report: FitReport) -> dict:
    """``by_group_size`` entries: one fit per smaller measured group size, with the entry's own checks
    (a short or bandwidth-only sweep holds the faster protocols at the base profile's; outliers; a
    busbw at its bound); the base profile's fits of sizes not measured (other than the entry's own
    ``g0``) are kept, marked ``kept_from``.  ``link_of(k)``: the link bandwidth a group of k uses, B/s."""
    by = {}
    for k, (nk, tk, srck) in sorted(sweeps, key=lambda x: x[0]):
        name = f"comm.intra_node.{coll} (groups of {k})"
        ek = eff_max if k > 2 else 1.0
        _check_time_scale(sorted({x.rsplit(":", 1)[0] for x in srck}), name, coll, nk, tk, k, link_of(k), ek)
        fix, nproto, how = _short("intra_node", coll, nk, base, report, group=k,
                                  line_s=float(busbw_factor(coll, k) * np.max(nk) / link_of(k)))
        pk, tmk, _ = fit_collective(coll, nk, tk, k, link_of(k), ek, fix=fix, k=nproto)
        pk = _with_base_simple(pk, "intra_node", coll, nk, base, k)
        tmk = collective_time_s(coll, np.asarray(nk, dtype=float), k, link_of(k), pk)
        fit = fit_stats(tmk, tk, sorted({x.rsplit(":", 1)[0] for x in srck}), nk, group_size=k,
                        link_bytes_per_s=round_sig(link_of(k)), method=FIT_METHOD + how)
        _check_fit(name, pk, ek, fit, tmk, tk, srck, nk, report)
        by[k] = coll_entry(pk, fit, algorithm=_algorithm(coll, k))
        report.rows.append((name, protocol_text(pk), quality(fit)))
    base_by = ((base.get("comm") or {}).get("intra_node") or {}).get(coll, {}).get("by_group_size") or {}
    kept = {int(k): dict(e, kept_from=base_path) for k, e in base_by.items() if int(k) not in by and int(k) != g0}
    if kept:
        report.warnings.append(f"comm.intra_node.{coll}: groups of {', '.join(map(str, sorted(kept)))} not measured: "
                               f"their fits are kept from the base profile {base_path} (the suite's --intra-sizes "
                               "measures them)")
    return dict(sorted({**by, **kept}.items()))


def _under_base(base_e: dict, coll: str, gsz: int, fitted: dict, intra: dict, keys: list, g: int, link_of,
                eff_max: float, base: dict, base_path: str, report: FitReport) -> dict:
    """The entry when the largest group measured (``gsz``) is smaller than the base profile's (its
    node-wide fit, NVLS on an H100 node): that fit stays, marked ``kept_from``, and this one goes under
    its ``by_group_size`` beside the smaller groups measured, as the base's own smaller groups do."""
    entry = copy.deepcopy(base_e)
    by = {int(k): v for k, v in (entry.get("by_group_size") or {}).items()}
    by[gsz] = {k: v for k, v in fitted.items() if k != "group_size"}
    by.update(_smaller_groups(coll, gsz, [(k[1], intra[k]) for k in keys if k[1] != g], link_of, eff_max, base,
                              base_path, report))
    entry.update(by_group_size=dict(sorted(by.items())), kept_from=base_path)
    report.warnings.append(f"comm.intra_node.{coll}: groups of at most {gsz} measured, the base profile's fit of "
                           f"{base_e['group_size']} is kept for larger groups; this fit prices groups of {gsz} "
                           "(by_group_size)")
    return entry


def _pricing_profile(base: dict, intra: dict, gpu_key: str):
    """The :class:`costmodel.specs.Profile` an inter-node fit prices its capture with: ``base`` with the
    intra-node entries fitted here (``intra``); its inter-node entry is the fit's own (:func:`_with_inter`).

    Raises:
        FitError: the base or a fitted intra-node entry does not load (naming the field)."""
    from costmodel.errors import InputError
    from costmodel.specs.profile import profile_from_mapping
    d = copy.deepcopy(base)
    d["comm"]["intra_node"].update(copy.deepcopy(intra))
    try:
        return profile_from_mapping(d, "the fitted profile", gpu_key)
    except InputError as e:
        raise FitError(str(e)) from None


def _with_inter(prof, coll: str, q, n_nodes: int, fabric: str):
    """``prof`` with the inter-node ``coll`` lines ``q`` (CollectiveParams) measured over ``n_nodes``
    nodes on ``fabric``, as the entry this fit writes (its protocols named :data:`NAMES`)."""
    def put(d, v):
        return {**d, "inter_node": {**d.get("inter_node", {}), coll: v}}
    return dataclasses.replace(prof, comm=put(prof.comm, q), comm_group_size=put(prof.comm_group_size, int(n_nodes)),
                               comm_protocols=put(prof.comm_protocols, NAMES[len(q.protocols)] if len(q.protocols) > 1
                                                  else ("Simple",)),
                               comm_fabric=put(prof.comm_fabric, fabric))


#: a capture whose rows run this many times faster than the model's least time (its link at the fit's
#: bound, or its in-node part alone) has times in another unit: a cluster file's link is off by at most
#: ~30x (PCIe's 32 GB/s given for a B200's 900 GB/s NVLink), while ms printed under nccl-tests' (us)
#: header is 1000x (the README's "times in ms under a (us) header")
UNIT_FACTOR = 100.0


def _unit_error(files, section: str, size: float, t_s: float, least_s: float, what: str) -> FitError:
    """The error of a capture whose ``size``-byte row took ``t_s`` against the least ``least_s`` the
    model may price (``what`` says by which link), naming the capture ``files``."""
    f = least_s / t_s
    return FitError(f"{', '.join(map(str, files))}: {section}: at {size / 2**20:g} MiB the capture took "
                    f"{t_s * 1e6:.4g} us, {f:.3g}x faster than {what} allows ({least_s * 1e6:.4g} us): its times are "
                    f"in another unit than the header's (us){' (milliseconds?)' if f < 3000 else ''}: "
                    "fix the capture's time column; nothing written")


def _check_time_scale(files, section: str, coll: str, n, t, g: int, link_bps: float, eff_max: float) -> None:
    """Refuse an in-node capture whose rows run :data:`UNIT_FACTOR` times or more faster than ``g``
    ranks on ``link_bps`` (B/s) at the fit's bound ``eff_max`` move their bus bytes (nccl-tests busbw
    conventions): its times are in another unit.

    Raises:
        FitError: naming the capture ``files`` and the fastest row (:func:`_unit_error`)."""
    n, t = np.asarray(n, dtype=float), np.asarray(t, dtype=float)
    least = busbw_factor(coll, g) * n / (eff_max * link_bps)
    i = int(np.argmax(least / t))
    if least[i] / t[i] >= UNIT_FACTOR:
        raise _unit_error(files, section, n[i], t[i], least[i], f"the {link_bps / 1e9:g} GB/s link at busbw "
                          f"efficiency {eff_max:g}")


def _check_in_node_floor(section: str, coll: str, n, t, time_of, cluster: ClusterSpec, files=()) -> None:
    """Refuse a multi-node capture that runs faster than its in-node part alone may: the time with the
    network taking none (an inter-node line of no latency and unbounded bandwidth) is the least the
    model can price, set by the cluster file's in-node link and the profile's intra-node lines.  At the
    sizes that reach the bandwidth (>= :data:`BANDWIDTH_BOUND_BYTES`) a capture below it is of faster
    in-node links than the file's, and a fit would write lines no prediction reproduces.

    Raises:
        FitError: naming the cluster file's ``intra_node.bandwidth_per_gpu`` and fabric, or, where the
            capture runs :data:`UNIT_FACTOR` times faster than that floor, naming the capture ``files``
            and its time unit (:func:`_unit_error`)."""
    from costmodel.specs.params import CollectiveParams
    big = np.asarray(n, dtype=float) >= BANDWIDTH_BOUND_BYTES
    if not big.any():
        return
    free = CollectiveParams.lines(0.0, ((0.0, np.inf),))
    floor = np.asarray(time_of(free), dtype=float)[big]
    ratio = np.asarray(t, dtype=float)[big] / floor
    if float(np.median(ratio)) >= 1.0:
        return
    i = int(np.argmin(ratio))
    size = np.asarray(n, dtype=float)[big][i]
    if 1.0 / ratio[i] >= UNIT_FACTOR:
        raise _unit_error(files, section, size, float(np.asarray(t, dtype=float)[big][i]), float(floor[i]),
                          f"its in-node part alone on {cluster.path}'s intra_node link")
    named = f"{', '.join(map(str, files))}: " if files else ""
    raise FitError(f"{named}{section}: the capture is faster than the link: at {size / 2**20:g} MiB it took "
                   f"{float(np.asarray(t)[big][i]) * 1e6:.1f} us, under the {floor[i] * 1e6:.1f} us its in-node part "
                   f"alone takes on {cluster.path}'s intra_node.bandwidth_per_gpu "
                   f"{cluster.intra_bytes_per_s / 1e9:g} GB/s ({cluster.intra_fabric}) with the profile's intra-node "
                   f"{coll} lines: correct the cluster file's intra_node (bandwidth_per_gpu, fabric) or fit the capture "
                   "against the cluster it ran on; nothing written")


#: a collective fit whose log-time R2 is below 0 and that misses a row by more than this explains none
#: of its capture: a flat latency-bound sweep may dip under R2 0 at the rows' 1-3 % timer spread, a
#: line that misses its own rows by 23-33 % may not
NO_FIT_MAX_ERR = 0.1


def _check_explains(section: str, fit: dict, sizes) -> None:
    """Refuse a collective fit over 3 or more message ``sizes`` (B) that explains its capture worse than
    the capture's mean time does (R2 of log time below 0) and misses a row by more than
    :data:`NO_FIT_MAX_ERR`, as the GEMM fit refuses one with R2 below 0 (costmodel/fit/gemm.py).  Over
    fewer sizes a line misses its rows only where held at a bound, which :func:`warn_at_bound` reports.

    Raises:
        FitError: naming the section, its R2 and errors, and the inputs."""
    r2 = fit.get("r2")
    if len(np.unique(np.asarray(sizes, dtype=float))) < 3:
        return
    if r2 is not None and r2 < 0 and fit["max_rel_err"] > NO_FIT_MAX_ERR:
        raise FitError(f"{', '.join(fit['inputs'])}: {section}: the fit explains none of its {fit['n_points']} "
                       f"measured times (R2 {r2}, median error {fit['median_rel_err']:.0%}, max "
                       f"{fit['max_rel_err']:.0%}): check that the capture is the collective, group size and time "
                       "unit it is read as; nothing written")


def _check_fit(section: str, p, eff_max: float, fit: dict, tm, t, src, n, report: FitReport) -> None:
    """The checks every collective fit takes, the most specific first: its efficiency at a bound
    (:func:`warn_at_bound`), then whether it explains its capture (:func:`_check_explains`), then its
    outliers (:func:`warn_outliers`).

    Raises:
        FitError: from :func:`warn_at_bound` or :func:`_check_explains`."""
    warn_at_bound(section, p, eff_max, report, n, fit["inputs"])
    _check_explains(section, fit, n)
    warn_outliers(section, tm, t, src, report)


def fit_comm_section(meas: Measurements, gpu: GpuSpec, base: dict, cluster: ClusterSpec | None,
                     report: FitReport, base_path: str = "the base profile") -> dict:
    """``comm:`` entries fitted per (scope, collective); uncovered entries are returned absent.

    Intra-node: :func:`costmodel.fit.primitives.fit_collective` at the largest measured group (the TP
    group the latencies are anchored to, ``group_size``); each smaller measured group size gets its
    own fit under ``by_group_size`` (:func:`_smaller_groups`), and its error under the entry's
    group-size law (costmodel/comm.py ``_params``) is reported in ``fit``.
    Inter-node: the capture priced as ``collectives --compare`` prices it
    (:func:`costmodel.collectives_table.capture_time_s`: costmodel.collective.hierarchical_time_s, the
    tree, the switch tiers) with the intra scope fixed (fitted here or the base's),
    link = the node's NIC bandwidth (``--cluster``) over the ranks per node that cross it; every
    efficiency at most 1.
    Returns:
        {scope: {collective: entry}}.
    """
    out = {"intra_node": {}, "inter_node": {}}
    # the link the prediction prices with: the cluster's intra-node bandwidth (a PCIe box's, not its
    # GPUs' NVLink bridges), the GPU's NVLink without a cluster
    link = (cluster.intra_bytes_per_s if cluster is not None and cluster.intra_bytes_per_s
            else gpu.nvlink_bytes_per_s or 0.0)
    intra = _coll_points(meas, "intra_node")
    nvls = cluster.intra_fabric == "nvswitch" if cluster is not None else gpu.vendor.lower() == "nvidia"

    def link_of(k):
        """The link a group of k GPUs uses: all of it through an NVSwitch, its members' links in a
        mesh (costmodel.comm.group_link_bytes_per_s), as the prediction prices it."""
        if cluster is None or not cluster.intra_bytes_per_s:
            return link
        return float(link * group_link_bytes_per_s(cluster, k) / cluster.intra_bytes_per_s)
    for coll in COLLECTIVES:
        keys = sorted(k for k in intra if k[0] == coll)
        if not keys:
            continue
        if not link:
            report.warnings.append(f"comm.intra_node.{coll}: {gpu.key} has no intra-node link bandwidth: pass --cluster")
            break
        g = max(k[1] for k in keys)
        n, t, src = intra[next(k for k in keys if k[1] == g)]
        gsz = 2 if coll == "send_recv" else g
        # only a reduction in an NVSwitch (NVLS) may beat the link; a 2-GPU all-reduce is a ring, and
        # NCCL runs NVLS only on an NVSwitch fabric (src/transport/nvls.cc: multicast support)
        eff_max = NVLS_EFF_MAX if coll == "all_reduce" and _algorithm(coll, gsz) != "ring" and nvls else 1.0
        warn_sweep_span(f"comm.intra_node.{coll}", n, report)
        _check_time_scale(sorted({s.rsplit(":", 1)[0] for s in src}), f"comm.intra_node.{coll}", coll, n, t, gsz,
                          link_of(gsz), eff_max)
        # a group of another size than the base's entry holds the base's fit of that size where it has one
        base_e = ((base.get("comm") or {}).get("intra_node") or {}).get(coll) or {}
        g_base = int(base_e.get("group_size") or 0)
        fix, nproto, how = _short("intra_node", coll, n, base, report, group=gsz if gsz != g_base else None,
                                  line_s=float(busbw_factor(coll, gsz) * np.max(n) / link_of(gsz)))
        p, tm, _ = fit_collective(coll, n, t, gsz, link_of(gsz), eff_max, fix=fix, k=nproto)
        p = _with_base_simple(p, "intra_node", coll, n, base, gsz if gsz != g_base else None)
        tm = collective_time_s(coll, np.asarray(n, dtype=float), gsz, link_of(gsz), p)
        cross = {}
        for k in keys:
            if k[1] != g:
                nk, tk, _ = intra[k]
                kk = 2 if coll == "send_recv" else k[1]
                tmk = collective_time_s(coll, nk, kk, link_of(kk), p)
                cross[f"group_{k[1]}_median_rel_err"] = round_sig(np.median(np.abs(tmk / np.array(tk) - 1)), 3)
        fit = fit_stats(tm, t, sorted({s.rsplit(":", 1)[0] for s in src}), n, group_size=gsz,
                        link_bytes_per_s=round_sig(link_of(gsz)), method=FIT_METHOD + how, **cross)
        _check_fit(f"comm.intra_node.{coll}", p, eff_max, fit, tm, t, src, n, report)
        out["intra_node"][coll] = coll_entry(p, fit, group_size=gsz, algorithm=_algorithm(coll, gsz))
        report.rows.append((f"comm.intra_node.{coll}", protocol_text(p), quality(fit)))
        if coll == "send_recv":
            continue
        # the base's larger group kept only where it is this GPU's own measurement (not another GPU's copy)
        if g_base > gsz and "fit" in base_e and "derived_from" not in base_e:
            out["intra_node"][coll] = _under_base(base_e, coll, gsz, out["intra_node"][coll], intra, keys, g,
                                                  link_of, eff_max, base, base_path, report)
            continue
        if cluster is not None and gsz < cluster.gpus_per_node:
            report.warnings.append(f"comm.intra_node.{coll}: groups of at most {gsz} measured: groups of up to "
                                   f"{cluster.gpus_per_node} are priced by the {gsz}-GPU fit plus ring hops")
        by = _smaller_groups(coll, gsz, [(k[1], intra[k]) for k in keys if k[1] != g], link_of, eff_max, base,
                             base_path, report)
        if by:
            out["intra_node"][coll]["by_group_size"] = by
    out["inter_node"] = _fit_inter_node(meas, gpu, base, cluster, report, out["intra_node"])
    _check_kept_inter_node(base, base_path, cluster, gpu.key, out)
    return out


def _check_kept_inter_node(base: dict, base_path, cluster: ClusterSpec | None, gpu_key: str, fitted: dict) -> None:
    """Apply :func:`_check_in_node_floor` to an inter-node entry kept from the base profile (a
    ``calibrate fit`` on ``cluster`` of a capture over ``fit.n_nodes`` x ``fit.ranks_per_node``) when this fit
    replaces the intra-node lines of its collective: the base's entry, priced with the base's intra
    lines, stands for its capture (to its fit error), and with this fit's intra lines its in-node part
    alone may not take longer, as a one-call fit of both captures refuses (a ``--base`` refit of a
    slower node had written a profile whose cross-node line its own node could not reach).

    Raises:
        FitError: naming the base profile, its capture and this fit's intra-node inputs."""
    if cluster is None:
        return
    sizes = 2.0 ** np.arange(26, 31)             # 64 MiB .. 1 GiB: the floor check's bandwidth-bound sizes
    for coll, intra in fitted["intra_node"].items():
        e = ((base.get("comm") or {}).get("inter_node") or {}).get(coll) or {}
        f = e.get("fit") if isinstance(e.get("fit"), dict) else {}
        # a capture fitted on this cluster only: priced on another (the built-in p5 fits), the base's line
        # does not stand for what its capture measured here
        if coll in fitted["inter_node"] or "derived_from" in e or f.get("cluster") != cluster.key \
                or not (f.get("n_nodes") and f.get("ranks_per_node")):
            continue
        nn, k = int(f["n_nodes"]), int(f["ranks_per_node"])
        measured = capture_time_s(coll, sizes, k, nn, cluster, _pricing_profile(base, {}, gpu_key))
        priced = _pricing_profile(base, fitted["intra_node"], gpu_key)
        try:
            _check_in_node_floor(f"comm.inter_node.{coll}", coll, sizes, measured,
                                 lambda q: capture_time_s(coll, sizes, k, nn, cluster,
                                                          _with_inter(priced, coll, q, nn, cluster.inter_fabric)),
                                 cluster)
        except FitError:
            raise FitError(f"{base_path}: comm.inter_node.{coll} (fitted on {', '.join(map(str, f.get('inputs') or []))}, "
                           f"{nn} nodes x {k} GPUs) ran faster than its in-node part alone takes with this fit's "
                           f"intra-node {coll} ({', '.join(map(str, (intra.get('fit') or {}).get('inputs') or []))}): "
                           "the two captures disagree on the node; fit them in one call (both files, no --base) "
                           "or refit the cross-node capture with them; nothing written") from None


def _warn_below_stated(name: str, p, cluster: ClusterSpec, per_gpu_bps: float, report: FitReport) -> None:
    """Warn where a capture's large-message efficiency is under 4/5 of NCCL's stated one for the cluster's
    fabric (costmodel.nic_efficiency): RoCE at 75% of line rate is what NCCL's maintainers call 'a bit
    low' (nccl#495), so a lower figure is likely another fabric, fewer NICs or a misconfigured run."""
    from ..nic_efficiency import stated_nic_efficiency
    stated = stated_nic_efficiency(cluster.inter_fabric, cluster.nic_bytes_per_s)
    best = max(e for _, e in p.absolute_protocols)
    if stated and best < 0.8 * stated:
        report.warnings.append(f"{name}: the capture streams {best:.0%} of the NICs' line rate ({best * per_gpu_bps / 1e9:.1f} "
                               f"GB/s a GPU), where NCCL states {stated:.0%} on {cluster.inter_fabric} "
                               f"(nccl-tests#290; 75% is 'a bit low' to its maintainers, nccl#495): check that the "
                               f"capture ran on {cluster.key}'s fabric with every NIC (NCCL_IB_HCA, GPUDirect RDMA)")


def _fit_inter_node(meas: Measurements, gpu: GpuSpec, base: dict, cluster: ClusterSpec | None, report: FitReport,
                    intra_fitted: dict) -> dict:
    """The ``comm.inter_node`` entries of :func:`fit_comm_section` (its docstring says how), the
    intra-node scope priced with ``intra_fitted`` (the entries fitted here) over the base's.

    Raises:
        FitError: from the checks of the fit (:func:`_check_in_node_floor`, :func:`_check_fit`)."""
    out = {}
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
        warn_sweep_span(f"comm.inter_node.{coll}", n, report)
        fix, nproto, how = _short("inter_node", coll, n, base, report)
        # what a GPU's NICs carry as the pricing path has it (its own NICs, at most its PCIe link's share)
        inter_bps = capture_cluster(cluster, k, nn).node_nic_bytes_per_s / k
        n, t = np.asarray(n), np.asarray(t)
        # the fit and its in-sample error price the capture as collectives --compare does: the intra-node
        # part as the predictions run it on this cluster (a ring where the cluster has no NVSwitch for
        # NVLS), the tree, the switch tiers
        priced = _pricing_profile(base, intra_fitted, gpu.key)

        def time_of(q, n=n, k=k, nn=nn, coll=coll):
            q = _with_base_simple(q, "inter_node", coll, n, base)
            return capture_time_s(coll, n, k, nn, cluster, _with_inter(priced, coll, q, nn, cluster.inter_fabric))
        _check_in_node_floor(f"comm.inter_node.{coll}", coll, n, t, time_of, cluster,
                             sorted({s.rsplit(":", 1)[0] for s in src}))
        p, _ = fit_protocols(time_of, t, nproto, 1.0, fix) if fix else fit_protocols(time_of, t, 3 if len(n) >= 8 else 2, 1.0)
        p = _with_base_simple(p, "inter_node", coll, n, base)
        tm = time_of(p)
        fit = fit_stats(tm, t, sorted({s.rsplit(":", 1)[0] for s in src}), n, ranks_per_node=k, n_nodes=nn,
                        inter_bytes_per_s_per_gpu=round_sig(inter_bps), cluster=cluster.key,
                        method=FIT_METHOD + " of capture_time_s, as collectives --compare prices it (intra scope fixed); every efficiency <= 1" + how)
        _check_fit(f"comm.inter_node.{coll}", p, 1.0, fit, tm, t, src, n, report)
        _warn_below_stated(f"comm.inter_node.{coll}", p, cluster, inter_bps, report)
        out[coll] = coll_entry(p, fit, group_size=nn, algorithm="nccl-default (hierarchical model)",
                               fabric=cluster.inter_fabric)
        report.rows.append((f"comm.inter_node.{coll}", protocol_text(p), quality(fit)))
    return out
