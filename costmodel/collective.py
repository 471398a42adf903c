"""Time of one NCCL-style collective inside one link scope: NCCL's own tuner model, on numpy arrays.

nccl-tests conventions (NVIDIA nccl-tests, doc/PERFORMANCE.md): for a collective over ``g`` ranks and
a message of ``n`` bytes (the per-rank buffer size nccl-tests prints as "size"),

    algbw = n / t,   busbw = algbw * f(g)

with f = 2(g-1)/g for all-reduce, (g-1)/g for all-gather, reduce-scatter and all-to-all, and 1 for
send/recv; busbw is the figure that is comparable to a link's bandwidth.

NCCL picks, for every call, the protocol (LL, LL128, Simple) with the smallest predicted time
``latency_p + bytes / bandwidth_p`` (NVIDIA/nccl src/graph/tuning.cc, ``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime``: LL has the lowest latency and about 1/4..1/3 of the bandwidth, LL128 ~0.92
of it, Simple the full bandwidth and the largest latency).  This module uses that model with fitted
constants: each protocol p is one Hockney alpha-beta line (R. W. Hockney, "The communication
challenge for MPP", Parallel Computing 20(3), 1994), and

    t(n) = alpha_s + min_p [ alpha_p + f(g) * n / (eff_p * link) ]

``alpha_s`` is a latency shared by all protocols (what costmodel.comm shifts per extra ring hop),
``alpha_p`` a protocol's latency on top of it, ``eff_p`` its asymptotic busbw over the scope's
per-GPU link bandwidth (<= 1; only NVLS all-reduce inside a node exceeds 1, since the NVSwitch does
the reduction).  The min of lines gives the measured ramp of busbw with message size.  The constants
are fitted per (scope, collective) by ``costmodel/fit/`` from nccl-tests outputs.
"""
from __future__ import annotations


import numpy as np

from .specs.params import COLLECTIVES, CollectiveParams

def busbw_factor(collective: str, group_size):
    """nccl-tests bus-bandwidth factor f(g) (nccl-tests doc/PERFORMANCE.md).

    Args:
        collective: one of :data:`COLLECTIVES`.
        group_size: array-like of ranks g >= 1.
    Returns:
        numpy array: 2(g-1)/g, (g-1)/g or 1.
    Raises:
        ValueError: unknown collective name.
    """
    g = np.asarray(group_size, dtype=np.float64)
    if collective == "all_reduce":
        return 2.0 * (g - 1.0) / g
    if collective in ("all_gather", "reduce_scatter", "all_to_all"):
        return (g - 1.0) / g
    if collective == "send_recv":
        return np.ones_like(g)
    raise ValueError(f"unknown collective {collective!r}; expected one of {COLLECTIVES}")


def _bus_time_s(bus_bytes, link_bytes_per_s, p: CollectiveParams):
    """alpha_s + min over protocols of (alpha_p + bus_bytes / (eff_p link)), seconds (arrays)."""
    x = np.asarray(bus_bytes / np.asarray(link_bytes_per_s, dtype=np.float64), dtype=np.float64)
    if x.ndim == 0:
        return p.alpha_s + min((a + float(x) / e for a, e in p.protocols if e > 0), default=np.inf)
    t = None                    # one division above, then in place per protocol: a + x / e
    for a, e in p.protocols:
        # efficiency 0: a protocol a group size lacks, time inf (also where no byte moves: 0 x inf)
        e = np.asarray(e, dtype=np.float64)
        with np.errstate(divide="ignore", invalid="ignore"):
            tp = x * (1.0 / e)
        if not np.all(e > 0):
            tp = np.where(e > 0, tp, np.inf)
        tp += a
        t = tp if t is None else np.minimum(t, tp, out=t)
    return p.alpha_s + t


def collective_time_s(collective: str, n_bytes, group_size, link_bytes_per_s, p: CollectiveParams):
    """Time of one collective within one scope, seconds (0 where the group has one rank).

    Args:
        collective: one of :data:`COLLECTIVES`.
        n_bytes: array-like per-rank buffer size in nccl-tests convention, bytes.
        group_size: array-like ranks in the group.
        link_bytes_per_s: array-like per-GPU bandwidth of the scope (datasheet), bytes/s.
        p: fitted :class:`CollectiveParams` (``alpha_s`` may be an array).
    Returns:
        numpy array of seconds, broadcast over all array arguments.
    Raises:
        ValueError: unknown collective.
    Formula: t = alpha_s + min_p(alpha_p + f(g) n / (eff_p link)) (NCCL tuning.cc; Hockney 1994;
    nccl-tests PERFORMANCE.md for f).
    """
    g = np.asarray(group_size, dtype=np.float64)
    n = np.asarray(n_bytes, dtype=np.float64)
    t = _bus_time_s(busbw_factor(collective, g) * n, link_bytes_per_s, p)
    active = (g > 1) & (n > 0) if collective != "send_recv" else (n > 0)
    return np.where(active, t, 0.0)


def effective_busbw(n_bytes, link_bytes_per_s, p: CollectiveParams, collective: str = "send_recv",
                    group_size=2):
    """busbw nccl-tests would report at message size n, bytes/s: f(g) n / t(n), latency included.

    Args:
        n_bytes: array-like message sizes (> 0), bytes.
        link_bytes_per_s: per-GPU link bandwidth of the scope (datasheet), bytes/s; array-like.
        p: fitted :class:`CollectiveParams`.
        collective, group_size: the collective and ranks (default send/recv, f = 1).
    Returns:
        numpy array, bytes/s; tends to max_p(eff_p) x link for large n.
    """
    n = np.maximum(np.asarray(n_bytes, dtype=np.float64), 1.0)
    return busbw_factor(collective, group_size) * n / collective_time_s(collective, n, group_size,
                                                                        link_bytes_per_s, p)


def hierarchical_time_s(collective: str, n_bytes, ranks_per_node, n_nodes, intra_bytes_per_s,
                        inter_bytes_per_s_per_gpu, p_intra: CollectiveParams,
                        p_inter: CollectiveParams, tree: tuple | None = None):
    """Time of a collective over ``ranks_per_node * n_nodes`` ranks that may span nodes, seconds.

    The group has k = ``ranks_per_node`` ranks in each of N = ``n_nodes`` nodes.  NCCL runs a
    multi-node collective hierarchically (tree / NVLS-tree / PAT: the intra-node part on NVLink, the
    inter-node part on the NICs, pipelined in chunks, NCCL docs "Algorithms"), so the time is the
    slower of the two pipelined parts:

    * all_reduce: intra all-reduce of n over k; inter all-reduce of n/k over N ranks;
    * all_gather / reduce_scatter: intra over k of n; inter over N of n/k;
      the ring's inter part at the bytes NCCL's ring puts on each NIC: its rings run through all kN
      ranks (one ring per channel, the channels spread over the node's NICs: NCCL docs "Algorithms",
      src/graph/rings.cc), so a NIC carries a ring's (kN - 1)/kN share of n/k per pass, not the
      (N - 1)/N a ring over the N nodes alone would (that minimum needs CollNet/SHARP); busbw tops out
      at k x the NIC share whatever N (NVIDIA/nccl#1649: ~370-380 GB/s on 8 x 400G H100 nodes; 381.8 GB/s
      on 4 p6-b200 nodes of 8 x 400G, which ran the ring: hardware/profiles/data/
      mlengineering_allreduce_bench_h200_b200_pytorch.md).  An all-reduce over 2 nodes runs NCCL's
      tree there, a root and one child per tree: n/k per NIC direction, the 2-rank ring's share (the
      2-node captures exceed a flat ring's k x NIC share: 78 GB/s busbw on p4de's 50, 487 on p5's 400);
    * all_to_all: intra over k of n/N; inter over N of n (the fraction (N-1)/N leaves the node);
    * send_recv: one transfer of n over the inter-node link when N > 1, else over NVLink.

    The two parts run as a pipeline of chunks, so the slower part sets the pace and the first chunk
    still crosses the other: the time is max(t_intra, t_inter) + min(l_intra, l_inter), l the
    latency of a part (its time at a 1-byte message).  Latency-bound messages pay both parts' hops,
    as NCCL's tuner adds them (src/graph/tuning.cc: intra-node steps x intraLat + inter-node steps x
    interLat); bandwidth-bound ones the slower part and a negligible fill.

    Args:
        collective: one of :data:`COLLECTIVES`.
        n_bytes: array-like message size in nccl-tests convention, bytes.
        ranks_per_node, n_nodes: array-likes of positive integers.
        intra_bytes_per_s: per-GPU intra-node link bandwidth (datasheet), bytes/s.
        inter_bytes_per_s_per_gpu: a GPU's share of its node's NIC bandwidth, bytes/s: NIC line rate x
            NICs per node / GPUs of the node crossing the network at the same time.
        p_intra, p_inter: fitted :class:`CollectiveParams` for the two scopes.
        tree: for an all-reduce, ``(p_tree, protocol_names)``: the inter-node lines with the alpha of
            NCCL's double binary tree (:func:`tree_all_reduce_inter_s`); the result is then the faster
            of ring and tree, as NCCL's tuner picks.  None: the ring alone.
    Returns:
        numpy array of seconds.
    """
    k = np.asarray(ranks_per_node, dtype=np.float64)
    nn = np.asarray(n_nodes, dtype=np.float64)
    n = np.asarray(n_bytes, dtype=np.float64)
    if collective == "send_recv":
        t_in = collective_time_s(collective, n, 2.0, intra_bytes_per_s, p_intra)
        t_out = collective_time_s(collective, n, 2.0, inter_bytes_per_s_per_gpu, p_inter)
        return np.where(nn > 1, t_out, t_in)
    if collective == "all_to_all":
        t_in = collective_time_s(collective, n / nn, k, intra_bytes_per_s, p_intra)
        t_out = collective_time_s(collective, n, nn, inter_bytes_per_s_per_gpu, p_inter)
    else:
        t_in = collective_time_s(collective, n, k, intra_bytes_per_s, p_intra)
        # the flat ring's share per NIC over the N-rank ring's: ((kN - 1)/kN) / ((N - 1)/N); a 2-node
        # all-reduce's tree moves the 2-rank ring's
        flat = np.where(nn > 1, (k * nn - 1.0) / (k * np.maximum(nn - 1.0, 1.0)), 1.0)
        if collective == "all_reduce":
            flat = np.where(nn == 2, 1.0, flat)
        t_out = collective_time_s(collective, n / k * flat, nn, inter_bytes_per_s_per_gpu, p_inter)
    lat_in = collective_time_s(collective, 1.0, k, intra_bytes_per_s, p_intra)
    t = pipelined(t_in, t_out, lat_in, collective_time_s(collective, 1.0, nn, inter_bytes_per_s_per_gpu, p_inter))
    if tree is None or collective != "all_reduce":
        return t
    p_tree, names = tree
    t_tree = pipelined(t_in, tree_all_reduce_inter_s(n, k, inter_bytes_per_s_per_gpu, p_tree, names), lat_in,
                       tree_all_reduce_inter_s(1.0, k, inter_bytes_per_s_per_gpu, p_tree, names))
    return np.where(nn > 1, np.minimum(t, t_tree), t)


def pipelined(t_in, t_out, lat_in, lat_out):
    """Two pipelined parts of a collective (seconds, arrays): the slower one's time plus the other's
    fill, max(t_in, t_out) + min(lat_in, lat_out) (:func:`hierarchical_time_s`); a part of one rank
    (time 0) adds nothing."""
    return np.maximum(t_in, t_out) + np.minimum(lat_in, lat_out)


#: NCCL's tree all-reduce bandwidth model over the ring's (src/graph/tuning.cc, ``ncclTopoTuneModel``:
#: ``busBw = min(busBw * .92, ...)`` for Tree/AllReduce; NVIDIA/nccl commit 5067397c)
TREE_ALL_REDUCE_BW_RATIO = 0.92

#: NCCL's ``treeCorrectionFactor``: the tree all-reduce bandwidth it measured over its model, per
#: protocol, for buffers of 64 B x 2^i (i = 0..23; 1 outside); src/graph/tuning.cc, commit 5067397c
TREE_CORRECTION = {
    "LL": (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    "LL128": (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    "Simple": (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
}


def tree_hops(n_nodes):
    """Network hops of one direction of NCCL's double binary tree over ``n_nodes`` nodes:
    floor(log2 N) (``log2i(nNodes)`` in src/graph/tuning.cc); arrays, N >= 1."""
    return np.floor(np.log2(np.maximum(np.asarray(n_nodes, dtype=np.float64), 1.0)))


def tree_all_reduce_inter_s(n_bytes, ranks_per_node, link_bytes_per_s, p: CollectiveParams, protocol_names=()):
    """Inter-node part of NCCL's tree all-reduce (double binary tree across nodes), seconds.

    Each of the node's ``k`` GPUs carries 1/k of the buffer over its NIC share, up the tree
    (reduce) and down again (broadcast): 2 n/k bytes, NCCL's tuner model of the tree (a node interior
    in one tree and a leaf in the other sends and receives that much per direction), against the flat
    ring's 2 (kN-1)/kN n/k, at NCCL's tree bandwidth (0.92 of the ring's, times its measured correction for
    the buffer size and protocol: :data:`TREE_CORRECTION`): across 3 or more nodes the tree wins on
    latency only (measured multi-node busbw stays at the ring's: :func:`hierarchical_time_s`; over 2
    nodes the caller prices the tree's n/k as the 2-rank ring).  The latency is the caller's: ``p``'s
    alpha holds the 2 floor(log2 N) network hops of the two trees (:func:`tree_hops`) where the
    ring has 2 (N - 1) (``ncclTopoTuneModel``: ``2 * ((nRanks/nNodes-1) * intraLat + log2i(nNodes)
    * interLat)``; the intra-node chain is the caller's intra scope).

    Args:
        n_bytes: array-like per-rank buffer (nccl-tests size), bytes.
        ranks_per_node: array-like GPUs of the group in each node.
        link_bytes_per_s: a GPU's share of its node's NIC bandwidth, bytes/s.
        p: the inter-node all-reduce protocol lines (efficiencies fitted on rings), alpha set for
            the tree's hops.
        protocol_names: the NCCL names of ``p.protocols`` in order; a name outside
            :data:`TREE_CORRECTION` takes no correction.
    Returns:
        numpy array of seconds.
    """
    n = np.asarray(n_bytes, dtype=np.float64)
    x = 2.0 * n / np.asarray(ranks_per_node, dtype=np.float64) / (
        np.asarray(link_bytes_per_s, dtype=np.float64) * TREE_ALL_REDUCE_BW_RATIO)
    # NCCL indexes the correction by log2i(nBytes >> 6), corrected only for 0 <= index < 23
    idx = np.floor(np.log2(np.maximum(n, 1.0) / 64.0))
    use = (idx >= 0) & (idx < 23)
    idx = np.clip(idx, 0, 23).astype(int)
    t = None
    for (a, e), name in zip(p.protocols, tuple(protocol_names) + (None,) * len(p.protocols)):
        corr = np.where(use, np.asarray(TREE_CORRECTION[name])[idx], 1.0) if name in TREE_CORRECTION else 1.0
        tp = a + x / (e * corr)
        t = tp if t is None else np.minimum(t, tp)
    return p.alpha_s + t
