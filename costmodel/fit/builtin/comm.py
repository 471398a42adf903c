"""Collective sections of the built-in profiles (steps of :func:`.build.build_profiles`).

* Inside a node (:class:`costmodel.collective.CollectiveParams`, group of 8): NCCL's protocol lines
  (LL, LL128, Simple: latency alpha_p and busbw efficiency eff_p each, time = min over protocols) by
  least squares on log(time) with ``soft_l1`` (nccl-tests busbw is converted to time with the
  nccl-tests bus factor; XLA throughput is algbw, i.e. time = size / throughput).
* Across nodes, all-reduce: the inter-scope protocol lines of ``hierarchical_time_s`` (intra scope =
  the fitted intra all-reduce) against 2-node (AWS p5, p4de) and 4-node (AWS p6-b200) sweeps, every
  efficiency at most 1 (the NICs' line rate); see :func:`costmodel.fit.primitives.fit_hierarchical`.

GPUs or collectives without data take another entry with ``derived_from`` and a ``note``; the
cross-checks against data that is not fitted go to the profile's provenance notes.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from costmodel.collective import COLLECTIVES, busbw_factor, collective_time_s, effective_busbw, hierarchical_time_s

from ...specs.params import NVLS_EFF_MAX
from ..primitives import (FIT_METHOD, coll_entry, fit_collective, fit_hierarchical, fit_stats, fit_text,
                          params_of, round_sig)
from .variants import VARIANTS
from .data import busbw_points, join, rel, xla_coll

if TYPE_CHECKING:
    from .build import Build

H100 = "h100-sxm-80gb"
#: NCCL's algorithm per collective inside a node (all-to-all is grouped point-to-point sends)
_ALGORITHM = {"all_gather": "ring", "reduce_scatter": "ring", "all_to_all": "p2p", "send_recv": "p2p"}
#: why the 2-GPU all-reduce is its own algorithm: NCCL turns NVLS off for communicators of <= 2 GPUs
_RING_AT_2 = ("; NCCL runs no NVLS at <= 2 GPUs (NVIDIA/nccl src/transport/nvls.cc ncclNvlsInit: gpuCount <= 2), "
              "so 2-GPU groups take this ring fit and larger ones the node-wide fit")


# ------------------------------------------------------------------------------------------- intra-node
def _intra(b: Build, g, coll, parts, keys, algorithm, group_size=8, notes=(), fix=None, nproto=3):
    """Fit ``comm.intra_node.<coll>`` of ``g`` to the (n, t, src) ``parts``; returns the parameters."""
    n, t, s = join(*parts)
    link = b.sheet[g].link
    eff_max = NVLS_EFF_MAX if (algorithm == "nvls" and coll == "all_reduce") else 1.0
    p, tm, b.xs[g, coll] = fit_collective(coll, n, t, group_size, link, eff_max, fix, nproto)
    src = np.array(s)
    per = {k: round_sig(np.median(np.abs(tm[src == k] / np.asarray(t)[src == k] - 1)), 3) for k in dict.fromkeys(s)}
    at_max = effective_busbw(max(n), link, p, coll, group_size) / link
    fit = fit_stats(tm, t, [rel(k) for k in keys], n, median_rel_err_by_source=per, link_bytes_per_s=round_sig(link),
                    busbw_efficiency_at_max_size=round_sig(at_max, 3),
                    method=FIT_METHOD + (f"; parameters {sorted(fix)} fixed" if fix else ""))
    e = dict(group_size=group_size, algorithm=algorithm)
    if notes:
        e["note"] = " ".join(notes)
    b.prof[g]["comm"]["intra_node"][coll] = coll_entry(p, fit, **e)
    b.use(g, *keys)
    b.summary.append(("intra", g, coll, fit_text(p, fit)))
    return p


def _by_group(b: Build, g, coll, arch, sizes, algorithm="ring", why="") -> None:
    """``by_group_size`` fits of ``g``'s intra-node ``coll`` from XLA's rows of smaller groups
    (``8 // k`` groups of ``k`` at once on one 8-GPU NVSwitch node), each with its fit statistics."""
    link = b.sheet[g].link
    by = {}
    for k in sizes:
        n, t, _ = xla_coll(b.D, arch, coll, k)
        p, tm, _ = fit_collective(coll, n, t, k, link)
        fit = fit_stats(tm, t, [rel("xla_coll")], n, link_bytes_per_s=round_sig(link),
                        busbw_efficiency_at_max_size=round_sig(effective_busbw(max(n), link, p, coll, k) / link, 3),
                        method=FIT_METHOD)
        by[k] = coll_entry(p, fit, algorithm=algorithm)
        b.summary.append(("intra", g, f"{coll} (groups of {k})", fit_text(p, fit)))
    entry = b.prof[g]["comm"]["intra_node"][coll]
    entry["by_group_size"] = by
    entry["note"] = (entry.get("note", "") + f" by_group_size: XLA {arch} rows of {'/'.join(map(str, sizes))}-GPU "
                     f"groups ({8 // min(sizes)} groups at once), which reach less busbw than one 8-GPU group{why}.").strip()
    b.use(g, "xla_coll")


def _azure_allreduce(b: Build, sysname):
    d = b.D["azure"][sysname]["nccl"]
    return busbw_points("all_reduce", d["sizes"], d["busbw"], "azure")


def _bench(b: Build):
    """The ml-engineering all_reduce_bench tables by heading: ``"(a)"`` 8x H200, ``"(b)"`` B200 nodes."""
    return {t["heading"][:3]: t for t in b.D["bench"]}


def intra_h100(b: Build) -> None:
    """H100: Azure NVLS all-reduce, XLA sm_90 for the other collectives; cross-checks in the notes."""
    ph = _intra(b, H100, "all_reduce", [_azure_allreduce(b, "ND H100 v5")], ["azure"], "nvls",
                notes=["Azure ND H100 v5 all_reduce_perf sweep 1 KiB..8 GiB (NVLS, in-place busbw; Azure size labels",
                       "are rounded powers of two). NVLS is NCCL's default for one 8x H100 NVSwitch node."])
    for coll in ("all_gather", "reduce_scatter", "all_to_all", "send_recv"):
        _intra(b, H100, coll, [xla_coll(b.D, "sm_90", coll)], ["xla_coll"],
               _ALGORITHM[coll],
               group_size=2 if coll == "send_recv" else 8,
               notes=["XLA sm_90 8-GPU table (F32; throughput = size/time = algbw)."
                      + (" collective-permute rows (4 and 8 concurrent pairs) as send/recv; busbw = algbw."
                         if coll == "send_recv" else " Single replica group of 8.")])
    for coll in ("all_gather", "reduce_scatter", "all_to_all"):
        _by_group(b, H100, coll, "sm_90", (2, 4), algorithm=_ALGORITHM[coll])
    _by_group(b, H100, "all_reduce", "sm_90", (2,), why=_RING_AT_2)
    link = b.sheet[H100].link
    n, t, _ = xla_coll(b.D, "sm_90", "all_reduce")
    ex = np.abs(collective_time_s("all_reduce", n, 8, link, ph) / np.array(t) - 1)
    ext = np.abs(t[-1] / collective_time_s("all_reduce", n[-1], 8, link, ph) - 1)
    b.note(H100, f"cross-check: XLA sm_90 8-GPU F32 all-reduce vs the NVLS fit: median {np.median(ex):.3f}, max "
                 f"{ex.max():.3f} time error; at 2 GiB XLA reaches {1.75 * n[-1] / t[-1] / 1e9:.0f} GB/s busbw "
                 f"({ext:.0%} below the NVLS fit), between ring (367 GB/s on H200) and NVLS; XLA's algorithm "
                 "is not recorded, so that table is not fitted.")
    iss = b.D["issues"].rows
    pb = float(collective_time_s("all_reduce", 16 * 2 ** 30, 8, link, ph))
    b.note(H100, f"cross-check (github_issue_excerpts, nccl-tests#212, NVIDIA maintainer): 8x H100 NVLS peak "
                 f"busbw ~480 GB/s; this fit gives {1.75 * 16 * 2 ** 30 / pb / 1e9:.0f} GB/s at 16 GiB.")
    a2a = next(r for r in iss if r.placement == "out-of-place" and r.size_bytes == 524288000)
    p_a2a = params_of(b.prof[H100]["comm"]["intra_node"]["all_to_all"]["by_group_size"][4])
    tm = float(collective_time_s("all_to_all", a2a.size_bytes, 4, link, p_a2a))
    b.note(H100, f"cross-check (nccl#2169): 4x H100 all-to-all 500 MB Ring/Simple busbw {a2a.busbw:.1f} GB/s; "
                 f"the intra all_to_all fit of 4-GPU groups predicts {0.75 * a2a.size_bytes / tm / 1e9:.1f} GB/s.")
    p_sr = params_of(b.prof[H100]["comm"]["intra_node"]["send_recv"])
    tm = float(collective_time_s("send_recv", 2 ** 30, 2, link, p_sr))
    b.note(H100, f"cross-check (nccl#1264): p2pBandwidthLatencyTest unidirectional H100 NVLink 371-377 GB/s; "
                 f"send_recv fit gives {2 ** 30 / tm / 1e9:.0f} GB/s at 1 GiB (NCCL p2p via XLA permute).")
    b.use(H100, "issues")


def intra_h200(b: Build) -> None:
    """H200: NVLS all-reduce (Azure + ml-engineering), XLA sm_90 + 16 GiB points for all-gather and
    reduce-scatter; all-to-all and send/recv from H100 (same fabric)."""
    bench, nv = _bench(b), b.D["nvls"]
    h200 = [_azure_allreduce(b, "ND H200 v5"),
            busbw_points("all_reduce", bench["(a)"]["size_bytes"], bench["(a)"]["columns"]["busbw"], "mleng_bench"),
            busbw_points("all_reduce", [r["size_bytes"] for r in nv["gpu_sweep"]["H200"] if r["gpus"] == 8],
                         [r["busbw"] for r in nv["gpu_sweep"]["H200"] if r["gpus"] == 8], "mleng_nvls"),
            busbw_points("all_reduce", [r["size_bytes"] for r in nv["collectives"]["H200"]
                                        if r["collective"] == "all_reduce" and r["algo"] == "nvls"],
                         [r["busbw"] for r in nv["collectives"]["H200"]
                          if r["collective"] == "all_reduce" and r["algo"] == "nvls"], "mleng_nvls")]
    _intra(b, "h200-sxm-141gb", "all_reduce", h200, ["azure", "mleng_bench", "mleng_nvls"], "nvls",
           notes=["Azure ND H200 v5 sweep (NVLS) + ml-engineering all_reduce_bench.py 8x H200 (NVLS from 2 MiB) +",
                  "all_reduce_perf NVLS points at 8 and 16 GiB. Ring (NCCL_NVLS_ENABLE=0) reaches 367 GB/s (0.82)."])
    for coll in ("all_gather", "reduce_scatter"):
        r = [x for x in nv["collectives"]["H200"] if x["collective"] == coll]
        _intra(b, "h200-sxm-141gb", coll, [xla_coll(b.D, "sm_90", coll),
                                           busbw_points(coll, [x["size_bytes"] for x in r], [x["busbw"] for x in r],
                                                        "mleng_nvls")],
               ["xla_coll", "mleng_nvls"], "ring",
               notes=[f"XLA sm_90 8-GPU table (measured on H100: same NVLink4/NVSwitch fabric as H200) + the 8x H200 "
                      f"16 GiB all_{coll.split('_')[1]}_perf point ({r[0]['busbw'] / 1e9:.1f} GB/s, ring)."])
    for coll in ("all_gather", "reduce_scatter"):
        _by_group(b, "h200-sxm-141gb", coll, "sm_90", (2, 4), why=" (measured on H100: the same NVLink4/NVSwitch fabric)")
    _by_group(b, "h200-sxm-141gb", "all_reduce", "sm_90", (2,), why=_RING_AT_2)
    for coll in ("all_to_all", "send_recv"):
        b.prof["h200-sxm-141gb"]["comm"]["intra_node"][coll] = dict(
            b.prof[H100]["comm"]["intra_node"][coll], derived_from=f"{H100}:comm.intra_node.{coll}",
            note="No H200 data; H200 has the H100's NVLink4/NVSwitch fabric (450 GB/s per direction).")
        b.prof["h200-sxm-141gb"]["comm"]["intra_node"][coll].pop("fit")


def intra_a100(b: Build) -> None:
    """A100: ring all-reduce (Azure + ml-engineering), send/recv (li-plus, faster protocols fixed to the
    H100 fit); all-gather, reduce-scatter, all-to-all from its all-reduce."""
    m = b.D["mleng_a100"]
    _intra(b, "a100-sxm-80gb", "all_reduce",
           [_azure_allreduce(b, "ND A100 v4"),
            busbw_points("all_reduce", [r["size_bytes"] for r in m], [r["busbw"] * 1e9 for r in m], "mleng_a100")],
           ["azure", "mleng_a100"], "ring",
           notes=["Azure ND A100 v4 sweep + ml-engineering 8x A100 all_reduce_perf (out-of-place). Azure's text says",
                  "'NVLS' (template shared with H100/H200) but A100's NVSwitch has no NVLink SHARP: ring/tree."])
    ls = b.D["liplus"].select()
    xh = b.xs[H100, "send_recv"]
    kh = len(xh) // 2
    _intra(b, "a100-sxm-80gb", "send_recv",
           [([r.size_bytes for r in ls], [r.time_us * 1e-6 for r in ls], ["liplus"] * len(ls))],
           ["liplus"], "p2p", group_size=2, fix={i: float(xh[i]) for i in range(2 * kh) if i not in (kh - 1, kh)},
           nproto=kh,
           notes=["li-plus sendrecv_perf -g 8 on 8x A100 NVLink, 128 MiB..1 GiB only (4 points, all Simple): the",
                  "latencies of the faster protocols and their efficiency ratios to Simple are fixed to the H100",
                  "send_recv fit (NCCL p2p); only Simple's latency and efficiency are fitted; below 128 MiB the",
                  "fit is extrapolated."])
    par = b.prof["a100-sxm-80gb"]["comm"]["intra_node"]["all_reduce"]
    for coll in ("all_gather", "reduce_scatter", "all_to_all"):
        b.prof["a100-sxm-80gb"]["comm"]["intra_node"][coll] = dict(
            {k: v for k, v in par.items() if k not in ("fit", "note")},
            derived_from="a100-sxm-80gb:comm.intra_node.all_reduce",
            note="No A100 data: ring all-gather / reduce-scatter / all-to-all reach the same nccl-tests busbw as ring "
                 "all-reduce on NVSwitch (8x H200: ring AR 367.2, AG 361.4, RS 362.9 GB/s; XLA sm_90 2 GiB: AG "
                 "352, A2A 340 GB/s busbw), so the A100 ring all-reduce parameters are used.")


def intra_b200(b: Build) -> None:
    """B200: all-reduce from XLA sm_100 + ml-engineering (NCCL's default algorithm), XLA for the rest."""
    bench, nv = _bench(b), b.D["nvls"]
    bb = bench["(b)"]
    _intra(b, "b200-sxm-180gb", "all_reduce",
           [xla_coll(b.D, "sm_100", "all_reduce"),
            busbw_points("all_reduce", bb["size_bytes"], bb["columns"]["1 node"], "mleng_bench"),
            busbw_points("all_reduce", [r["size_bytes"] for r in nv["gpu_sweep"]["B200"] if r["gpus"] == 8],
                         [r["busbw"] for r in nv["gpu_sweep"]["B200"] if r["gpus"] == 8], "mleng_nvls")],
           ["xla_coll", "mleng_bench", "mleng_nvls"], "nccl-default (ring below ~4 GiB, NVLS at >= 8 GiB)",
           notes=["XLA sm_100 8-GPU F32 all-reduce + ml-engineering all_reduce_bench.py on 1 p6-b200 node + the",
                  "8-GPU 8 GiB NVLS point (838 GB/s; ring with NVLS off: 682 GB/s). No clean single-algorithm sweep",
                  "exists for B200, so NCCL's default choice is fitted."])
    for coll in ("all_gather", "reduce_scatter", "all_to_all", "send_recv"):
        _intra(b, "b200-sxm-180gb", coll, [xla_coll(b.D, "sm_100", coll)], ["xla_coll"],
               _ALGORITHM[coll], group_size=2 if coll == "send_recv" else 8,
               notes=["XLA sm_100 8-GPU table (F32; throughput = algbw)."])
    for coll in ("all_gather", "reduce_scatter", "all_to_all"):
        _by_group(b, "b200-sxm-180gb", coll, "sm_100", (2, 4), algorithm=_ALGORITHM[coll])
    _by_group(b, "b200-sxm-180gb", "all_reduce", "sm_100", (2,), why=_RING_AT_2)


def intra_gb200(b: Build) -> None:
    """GB200: all-reduce refitted on the Azure ND GB200 v6 ring sweep (the variant's other collectives
    stay the B200's, relative to the same NVLink 5).  The file does not state the GPU count of its
    run; an ND GB200 v6 VM holds 4 GB200 GPUs, so 4 ranks are ASSUMED."""
    d = b.D["gb200"]["nccl"]
    _intra(b, "gb200-186gb", "all_reduce", [busbw_points("all_reduce", d["sizes"], d["busbw"], "gb200", g=4)], ["gb200"],
           "ring", group_size=4,
           notes=["Azure ND GB200 v6 nccl-tests all_reduce (Ring, in-place busbw, 1 KiB..8 GiB); 4 ranks ASSUMED (the",
                  "VM's GPUs: the file does not state the count)."])


def intra_derived(b: Build) -> None:
    """MI250, MI300X and V100 take the A100 (ring, no NVLS) parameters."""
    amd = ("No {g} collective data: A100 (ring, no NVLS) parameters; efficiency is relative to the cluster's "
           "Infinity Fabric (xGMI) bandwidth per GPU (RCCL over xGMI).")
    for g, why in (("mi250", amd.format(g="MI250")), ("mi300x", amd.format(g="MI300X")),
                   ("v100-sxm2-32gb", "No V100 collective data: A100 (ring, no NVLS) parameters; efficiency is "
                                      "relative to NVLink2 (150 GB/s per direction on SXM2).")):
        for coll in COLLECTIVES:
            src = b.prof["a100-sxm-80gb"]["comm"]["intra_node"][coll]
            b.prof[g]["comm"]["intra_node"][coll] = dict(
                {k: v for k, v in src.items() if k not in ("fit", "note", "derived_from")},
                derived_from=f"a100-sxm-80gb:comm.intra_node.{coll}", note=why)
        b.summary.append(("intra", g, "all", "derived from a100-sxm-80gb"))
    b.summary.append(("intra", "h200-sxm-141gb", "all_to_all/send_recv", "derived from h100-sxm-80gb"))
    b.summary.append(("intra", "a100-sxm-80gb", "all_gather/reduce_scatter/all_to_all", "derived from a100 all_reduce"))


# ------------------------------------------------------------------------------------------- inter-node
def _inter(b: Build, g, key_or_rows, keys, ranks_per_node, n_nodes, nic_text, inter_bps, notes=()):
    """Fit ``comm.inter_node.all_reduce`` of ``g`` to an nccl-tests capture (its key) or ``(n, t)``."""
    if isinstance(key_or_rows, str):
        rows = b.D[key_or_rows].select()
        n, t = [r.size_bytes for r in rows], [r.time_us * 1e-6 for r in rows]
    else:
        n, t = key_or_rows
    pin = params_of(b.prof[g]["comm"]["intra_node"]["all_reduce"])
    p, tm = fit_hierarchical(n, t, ranks_per_node, n_nodes, b.sheet[g].link, inter_bps, pin)
    fit = fit_stats(tm, t, [rel(k) for k in keys], n, ranks_per_node=ranks_per_node, n_nodes=n_nodes,
                    inter_bytes_per_s_per_gpu=round_sig(inter_bps), nics=nic_text, intra="comm.intra_node.all_reduce",
                    method=FIT_METHOD + " of hierarchical_time_s (intra scope fixed); every efficiency <= 1")
    e = dict(group_size=n_nodes, algorithm="nccl-default (hierarchical model)")
    if notes:
        e["note"] = " ".join(notes)
    b.prof[g]["comm"]["inter_node"]["all_reduce"] = coll_entry(p, fit, **e)
    b.use(g, *keys)
    b.summary.append(("inter", g, "all_reduce", fit_text(p, fit)))


def fit_inter(b: Build) -> None:
    """Inter-node all-reduce of H100 (p5), A100 (p4de), B200 (p6-b200); same-die variants from their
    source (costmodel/fit/builtin/variants.py), H200, MI250, MI300X and V100 from H100; the other
    collectives from each GPU's inter-node all-reduce.

    Raises:
        ValueError: a same-die variant (costmodel/fit/builtin/variants.py) whose source is not H100, A100
            or B200, the only GPUs with an inter-node capture to derive it from.
    """
    _inter(b, H100, "p5", ["p5"], 8, 2, "32 x 100 Gb/s EFA per node", 32 * 100e9 / 8 / 8,
           ["AWS p5.48xlarge x2 all_reduce_perf 8 B..16 GiB (table 1, out-of-place). Table 2 of the file (EKS,",
            "NCCL 2.18.5, partial rows) is parsed but not fitted."])
    _inter(b, "a100-sxm-80gb", "p4de", ["p4de"], 8, 2, "4 x 100 Gb/s EFA per node", 4 * 100e9 / 8 / 8,
           ["AWS p4de.24xlarge x2 all_reduce_perf 8 B..2 GiB (out-of-place)."])
    for g, v in VARIANTS.items():
        if v.source not in ("a100-sxm-80gb", H100, "b200-sxm-180gb"):
            raise ValueError(f"variant {g}: its source {v.source} has no inter-node fit")
    bb = _bench(b)["(b)"]
    _inter(b, "b200-sxm-180gb", (bb["size_bytes"], [float(busbw_factor("all_reduce", 32)) * s / v
                                                    for s, v in zip(bb["size_bytes"], bb["columns"]["4 nodes"])]),
           ["mleng_bench"], 8, 4, "8 x 400 Gb/s EFA v4 per node (p6-b200)", 8 * 400e9 / 8 / 8,
           ["ml-engineering all_reduce_bench.py on 4 p6-b200 nodes (32 GPUs; busbw -> time with 2(32-1)/32)."])
    for g, v in VARIANTS.items():
        b.prof[g]["comm"]["inter_node"]["all_reduce"] = dict(
            {k: x for k, x in b.prof[v.source]["comm"]["inter_node"]["all_reduce"].items() if k not in ("fit", "note")},
            derived_from=f"{v.source}:comm.inter_node.all_reduce",
            note=f"A {v.source} variant: its NIC path (efficiency relative to the cluster's NIC line rate per GPU); "
                 "no multi-node sweep of this part is in the set." + (
                     " On InfiniBand and RoCE the Simple protocol takes NCCL's stated 47/50 of line rate per "
                     "NIC instead (nccl-tests#290, #119; costmodel.nic_efficiency.STATED_NIC_EFFICIENCY)." if v.source == H100 else ""))
        b.summary.append(("inter", g, "all_reduce", f"derived from {v.source}"))
    for g in ("h200-sxm-141gb", "mi250", "mi300x", "v100-sxm2-32gb"):
        b.prof[g]["comm"]["inter_node"]["all_reduce"] = dict(
            {k: v for k, v in b.prof[H100]["comm"]["inter_node"]["all_reduce"].items() if k not in ("fit", "note")},
            derived_from=f"{H100}:comm.inter_node.all_reduce",
            note="No multi-node sweep for this GPU: the AWS p5 (EFA) fit. Efficiency is relative to the GPU's share of "
                 "its node's NIC line rate; on InfiniBand and RoCE the Simple protocol takes NCCL's stated 47/50 "
                 "of line rate per NIC instead (nccl-tests#290, #119; costmodel.nic_efficiency.STATED_NIC_EFFICIENCY).")
        b.summary.append(("inter", g, "all_reduce", f"derived from {H100} (p5 EFA)"))
    _v100_cross_check(b)
    for g in b.prof:
        ar = b.prof[g]["comm"]["inter_node"]["all_reduce"]
        # every built-in inter-node capture ran on AWS EFA (p4de, p5, p6-b200): a cluster on another
        # fabric keeps these efficiencies but takes NCCL's latency model (costmodel.comm._params)
        ar["fabric"] = "efa"
        for coll in COLLECTIVES[1:]:
            b.prof[g]["comm"]["inter_node"][coll] = dict(
                {k: v for k, v in ar.items() if k not in ("fit", "note", "derived_from", "group_size", "algorithm")},
                derived_from=f"{g}:comm.inter_node.all_reduce",
                note="No inter-node measurement of this collective: the inter-node all-reduce parameters (same NICs; "
                     "busbw normalisation makes ring collectives comparable).")


def _v100_cross_check(b: Build) -> None:
    """nccl-tests#78 (8 nodes x 8 V100, one 100 Gb/s NIC each) against the derived V100 profile, as a note."""
    iss = b.D["issues"].rows
    r78 = [r for r in iss if r.placement == "out-of-place" and r.size_bytes == 268435456 and r.busbw > 1]
    if not r78:
        return
    g = "v100-sxm2-32gb"
    pv = params_of(b.prof[g]["comm"]["inter_node"]["all_reduce"])
    pvi = params_of(b.prof[g]["comm"]["intra_node"]["all_reduce"])
    tv = float(hierarchical_time_s("all_reduce", 268435456, 8, 8, b.sheet[g].link, 100e9 / 8 / 8, pvi, pv))
    b.note(g, f"cross-check (nccl-tests#78): 8 nodes x 8 V100, one 100 Gb/s IB NIC per node, 256 MiB "
              f"all-reduce busbw {r78[0].busbw} GB/s measured; the derived profile predicts "
              f"{2 * 63 / 64 * 268435456 / tv / 1e9:.2f} GB/s. The excerpt gives no NCCL version or transport "
              "settings, so it is a cross-check only, not fitted.")
    b.use(g, "issues")
