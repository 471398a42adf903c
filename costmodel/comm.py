"""Communication time of each parallel dimension, per layer / micro-batch / step, for a layout table.

Groups follow Megatron-core's rank order tp-cp-dp-pp (TP fastest): a group of ``size`` ranks whose
members are ``stride`` ranks apart spans ceil(size*stride/D) NVLink domains of D GPUs, with
min(size, D/stride) members per domain (D = ``ClusterSpec.scale_up_gpus``: the node on an HGX
system, the whole rack on a GB200 NVL72, whose nodes are trays of 4).  A group inside a domain uses
NVLink/xGMI; a group across domains runs hierarchically
(:func:`costmodel.collective.hierarchical_time_s`) and each GPU gets its share of its node's NICs:
all GPUs of a node run the same collective at the same moment (SPMD), so a GPU's share is the
node's NIC bandwidth / the GPUs crossing the network together, shrunk where the group spans the
switch tiers of an oversubscribed fabric (:mod:`costmodel.fabric`).  An all-reduce across domains
is the faster of NCCL's ring (2(N-1) network hops) and its double binary tree (2 log2 N hops, 0.92
of the ring's bandwidth: :func:`costmodel.collective.tree_all_reduce_inter_s`), as NCCL's tuner picks.

Message sizes (bf16 activations, Korthikanti et al. 2022 section 4; Narayanan et al. SC21):

* TP with SP: per layer forward 2 all-gathers + 2 reduce-scatters of tokens x h; without SP 2
  all-reduces; the same again in backward (and in a full-recompute forward).
* CP (ring attention, Liu et al. 2023; Megatron-core CP): CP-1 exchanges of the local K and V
  chunk per layer forward, twice the bytes (K, V and their gradients) in backward.
* EP: per MoE layer, forward and backward, by the recipe's dispatcher (costmodel.moe): an
  all-to-all dispatch and combine of tokens x top-k x h (Lepikhin et al. 2021, GShard), then the
  gather / reduce-scatter of those over the experts' TP group; or the all-gather and
  reduce-scatter of the hidden states over the EP x ETP group (allgather); or DeepEP's dispatch
  and combine at its measured bandwidths (flex).  The busiest rank's load sets the pace.
* PP: one send of the stage-boundary activation (tokens x h, each TP rank its 1/TP slice, Megatron
  scatter-gather optimisation, SC21 section 4.1; the whole tensor from every TP rank on DeepSpeed's
  pipeline engine, costmodel.stacks) per micro-batch per virtual stage, and one of the gradient back.
* DP: gradients (fp32 main grads under bf16, Megatron ``accumulate_allreduce_grads_in_fp32``)
  all-reduced over DP x CP (ZeRO-0), or reduce-scattered + bf16 params all-gathered (ZeRO-1/2,
  Megatron distributed optimizer); ZeRO-3/FSDP all-gathers bf16 params in forward and backward and
  reduce-scatters gradients every micro-batch (Zhao et al. 2023, PyTorch FSDP).
"""
from __future__ import annotations

from .nic_efficiency import stated_nic_efficiency
from dataclasses import dataclass

import numpy as np

from .collective import CollectiveParams, busbw_factor, collective_time_s, hierarchical_time_s, pipelined, tree_hops
from .compute import ACT_BYTES
from .fabric import blocks_touched, sharp_all_reduce_s, tier_penalty
from .formats import gemm_format, sp_gather_quantized
from .layout_fields import uses_layout_fields
from .layouts import LayoutTable, expert_shard_dp, layers_per_stage, light_last_stage, shard_dp
from .moe import (DEEPEP_NVLINK_EFFICIENCY, DEEPEP_RDMA_EFFICIENCY, destinations_per_token, run_rank_load,
                  remote_nodes_per_token)
from .ring_attention import grad_comm_factor as ring_grad_comm_factor
from .specs import ClusterSpec, ModelSpec, Profile, Recipe
from .stacks import dp_overlap_on, get_stack
from .stage_params import grad_bytes, stage_params

_STEPS = {"all_reduce": 2.0, "all_gather": 1.0, "reduce_scatter": 1.0, "all_to_all": 1.0, "send_recv": 0.0}


def group_span(stride, size, domain_gpus: int, num_gpus: int | None = None):
    """(ranks per domain, domains) of the slowest of the groups of ``size`` ranks spaced ``stride``
    apart (arrays), for NVLink domains of ``domain_gpus`` GPUs (a node's GPUs on HGX systems) in a job
    of ``num_gpus`` GPUs.

    Ranks fill nodes and nodes fill domains in order (Megatron assigns ranks node by node), so the
    groups of one parallel dimension tile the ranks in blocks of stride x size; where a block does
    not line up with the domain the slowest group straddles a boundary (costmodel.fabric.blocks_touched)
    and its members split about evenly over the domains it touches.
    """
    stride, size = np.asarray(stride, dtype=np.float64), np.asarray(size, dtype=np.float64)
    per_node = np.clip(np.floor(domain_gpus / stride), 1.0, None)
    k = np.minimum(size, per_node)
    nn = np.ceil(size / k)
    worst = np.minimum(blocks_touched(stride * size, domain_gpus, num_gpus), size)
    straddle = worst > nn
    nn = np.where(straddle, worst, nn)
    return np.where(straddle, np.ceil(size / nn), k), nn


#: NCCL's base latency of a ring collective per protocol, s: src/graph/tuning.cc ``baseLat`` Ring row
#: {LL 6.6, LL128 14.0, Simple 8.4} us (NVIDIA/nccl, commit b6475625, the commit the cluster files'
#: per-hop latencies come from); NCCL adds nsteps x the per-hop ``hwLat`` on top
NCCL_RING_BASE_LAT_S = {"LL": 6.6e-6, "LL128": 14.0e-6, "Simple": 8.4e-6}

#: NCCL's network hop of a tree over a ring's, LL protocol (the one the cluster files' ``latency``
#: is): hwLat NET row, Tree 5.0 us / Ring 2.7 us (src/graph/tuning.cc, NVIDIA/nccl commit 5067397c)
NCCL_TREE_HOP_RATIO = 5.0 / 2.7


def _params(profile: Profile, scope: str, coll: str, g, latency_s: float, fabric: str | None = None,
            nic_bytes_per_s: float | None = None) -> CollectiveParams:
    """Fitted parameters with alpha moved from the measured group size to g ranks.

    A ring collective over g ranks takes steps(coll) x (g - 1) latency-bound hops (Thakur et al.
    2005, "Optimization of collective communication operations in MPICH"); the hops beyond the
    measured group size each cost the cluster's link latency.  An inter-node entry measured on
    another scale-out fabric than ``fabric`` (the profile entry's ``fabric``: the built-in fits are
    AWS EFA captures, whose small-message latency is tens to hundreds of microseconds) keeps its
    bandwidth efficiencies but not its latency: NCCL's own ring model takes its place, the base
    latency of each protocol plus steps x (g - 1) hops at the cluster's link latency (one hop for a
    point-to-point send).  Where the large-message efficiency of ``fabric`` at ``nic_bytes_per_s`` (the
    cluster's line rate per NIC) is stated (:data:`STATED_NIC_EFFICIENCY`) the Simple protocol takes it;
    LL and LL128 keep the capture's.
    """
    fits = profile.comm_groups.get(scope, {}).get(coll)
    if fits:
        return _group_params(fits, profile.comm_group_size[scope][coll], coll, g, latency_s)
    p = profile.comm[scope][coll]
    measured_on = profile.comm_fabric.get(scope, {}).get(coll)
    if scope == "inter_node" and fabric is not None and measured_on is not None and measured_on != fabric:
        names = profile.comm_protocols[scope][coll]
        stated = stated_nic_efficiency(fabric, nic_bytes_per_s)
        q = CollectiveParams.from_protocols([(NCCL_RING_BASE_LAT_S[nm], stated if nm == "Simple" and stated else e)
                                             for nm, (_, e) in zip(names, p.protocols)])
        hops = 1.0 if coll == "send_recv" else _STEPS[coll] * np.maximum(np.asarray(g, dtype=np.float64) - 1.0, 0.0)
        return q.with_alpha(q.alpha_s + hops * latency_s)
    g0 = profile.comm_group_size[scope][coll]
    extra = _STEPS[coll] * (np.asarray(g, dtype=np.float64) - g0) * latency_s
    return p.with_alpha(np.maximum(p.alpha_s + extra, 0.0))


def _between(a, b, w):
    """(1 - w) a + w b where w > 0, else a; inf (a protocol a size lacks) wherever an end used is inf,
    never the NaN of 0 x inf."""
    fa, fb = np.where(np.isfinite(a), a, 0.0), np.where(np.isfinite(b), b, 0.0)
    return np.where(w > 0, np.where(np.isfinite(a) & np.isfinite(b), (1 - w) * fa + w * fb, np.inf), a)

def _group_params(fits: tuple, g0: int, coll: str, g, latency_s: float) -> CollectiveParams:
    """Lines of a collective measured at several group sizes (``Profile.comm_groups``), per layout.

    Among the fits of the entry's own algorithm (the fit at ``g0``): a measured size takes its fit;
    between two measured sizes each protocol's latency and time per byte (1 / efficiency) are
    interpolated in log2 of the group size (a ring's steps; XLA sm_90 all-gather busbw at 2 GiB over
    2 / 4 / 8 GPUs: 275 / 332 / 352 GB/s, 313 log-interpolated at 4); beyond the largest or below the
    smallest, the nearest fit with its latency moved by the ring hops in between, as :func:`_params`
    does.  A fit of another algorithm prices only groups of exactly its size (NCCL's ring all-reduce
    at 2 GPUs, where NVLS is off: NVIDIA/nccl src/transport/nvls.cc ``gpuCount <= 2``).  Smaller
    groups of one NVSwitch node reach less busbw than the node-wide group, which one group size's
    fit cannot say, except for NVLS, whose algbw does not depend on the group (:func:`_nvls_group_params`).
    """
    g = np.asarray(g, dtype=np.float64)
    gi = (g + 0.5).astype(np.intp)          # group sizes are whole ranks
    ks = np.arange(int(gi.max(initial=1)) + 1, dtype=np.float64)
    # each protocol's total latency and time per byte per group size 0..max(g), then one lookup per layout
    own = next(f.algorithm for f in fits if f.group_size == g0)
    same = [f for f in fits if f.algorithm == own]
    sizes = np.array([f.group_size for f in same], dtype=np.float64)
    lo = np.clip(np.searchsorted(sizes, ks, side="right") - 1, 0, len(same) - 1)
    hi = np.minimum(lo + 1, len(same) - 1)
    inside = (ks > sizes[0]) & (ks < sizes[-1]) & (ks != sizes[lo])
    lg, ls = np.log2(np.maximum(ks, 1.0)), np.log2(sizes)
    w = np.where(inside, (lg - ls[lo]) / np.where(hi > lo, ls[hi] - ls[lo], 1.0), 0.0)
    base = np.clip(ks, sizes[0], sizes[-1])
    names = _fit_names(fits)

    def lines(f, nm):
        i = f.names.index(nm) if nm in f.names else None
        return (np.inf, np.inf) if i is None else (lambda a, e: (a, 1.0 / e))(*f.params.absolute_protocols[i])
    cols = {}
    for nm in names:
        t = np.array([lines(f, nm) for f in same])          # (latency s, 1 / efficiency) per measured size
        cols[nm] = [_between(t[lo, j], t[hi, j], w) for j in (0, 1)]
    for f in fits:
        if f.algorithm != own and f.group_size < ks.size:       # exact-size override
            base[f.group_size] = f.group_size
            for nm in names:
                cols[nm][0][f.group_size], cols[nm][1][f.group_size] = lines(f, nm)
    extra = _STEPS[coll] * (ks - base) * latency_s
    return CollectiveParams.lines(0.0, tuple((np.take(np.maximum(a + extra, 0.0), gi), 1.0 / np.take(ie, gi))
                                             for a, ie in cols.values()))


def _fit_names(fits: tuple) -> tuple:
    """The protocols any of a collective's group-size fits has, lowest latency first: the lines of
    :func:`_group_params`."""
    return tuple(nm for nm in ("LL", "LL128", "Simple") if any(nm in f.names for f in fits))


def _protocol_names(profile: Profile, scope: str, coll: str) -> tuple:
    """The protocol names of :func:`_params`' lines for ``coll``, in their order."""
    fits = profile.comm_groups.get(scope, {}).get(coll)
    return _fit_names(fits) if fits else tuple(profile.comm_protocols[scope][coll])


def needs_ring_all_reduce(cluster: ClusterSpec, profile: Profile) -> bool:
    """Whether the profile's intra-node all-reduce was measured as NVLS on NVSwitch nodes while the
    cluster's GPUs reach each other without an NVSwitch (PCIe, an NVLink bridge or mesh): NVLS
    reduces in the NVSwitch's multicast memory and NCCL runs it only there (NVIDIA/nccl
    src/transport/nvls.cc: NVLS needs the CU_DEVICE_ATTRIBUTE_MULTICAST_SUPPORTED NVSwitch fabric),
    so such a node runs a ring all-reduce."""
    return cluster.intra_fabric != "nvswitch" and _intra_all_reduce_algorithm(profile) == "nvls"


def _intra_all_reduce_algorithm(profile: Profile) -> str:
    """The algorithm of the profile's intra-node all-reduce fit at its own group size ("" unsaid)."""
    fits = profile.comm_groups.get("intra_node", {}).get("all_reduce")
    g0 = profile.comm_group_size["intra_node"]["all_reduce"]
    return next((f.algorithm for f in fits if f.group_size == g0), "") if fits else ""


def _nvls_group_params(profile: Profile, p: CollectiveParams, k) -> CollectiveParams:
    """``p`` (the intra-node all-reduce lines per layout) for groups of ``k`` GPUs priced off an NVLS
    fit measured over ``g0`` GPUs.

    NVLS reduces in the NVSwitch: each GPU's share of the result is read through the switch with
    multimem loads that reduce the g buffers, and written back to all with one multimem store
    (NVIDIA/nccl src/device/all_reduce.h, the NCCL_ALGO_NVLS work element), so every GPU's link
    carries its whole buffer out and the whole result in once: the time per byte (the algbw) does
    not depend on the group size, where a ring's traffic, 2 (k - 1) / k of the buffer, does.  A group of 3 .. g0 - 1 GPUs (NCCL runs NVLS above 2 GPUs,
    src/transport/nvls.cc) keeps the fit's algbw: its busbw efficiency scales by f(k) / f(g0).
    Groups of 2 (NCCL's ring) and of g0 keep their lines."""
    if _intra_all_reduce_algorithm(profile) != "nvls":
        return p
    g0 = profile.comm_group_size["intra_node"]["all_reduce"]
    k = np.asarray(k, dtype=np.float64)
    scale = np.where((k >= 3) & (k < g0), busbw_factor("all_reduce", k) / busbw_factor("all_reduce", g0), 1.0)
    # one multimem pass through the switch whatever the group: a larger NVLink domain (NVL72) adds no
    # ring hops to the fit's latency
    own = _params(profile, "intra_node", "all_reduce", g0, 0.0).absolute_protocols
    return CollectiveParams.lines(0.0, tuple((np.where(k > g0, a0, a), e * scale)
                                             for (a, e), (a0, _) in zip(p.absolute_protocols, own)))


def _ring_all_reduce_params(profile: Profile, g, latency_s: float) -> CollectiveParams:
    """A ring all-reduce over ``g`` ranks as the reduce-scatter and the all-gather it is made of
    (Patarasuk & Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations", JPDC
    2009; NCCL's ring all-reduce): per protocol the two latencies add and the busbw efficiency is the
    harmonic mean of the two (the all-reduce's busbw counts each phase's bytes once: 2 (g-1)/g).  A
    group size the profile measured as a ring all-reduce of its own (``by_group_size``, e.g. 2 GPUs)
    takes that measurement instead."""
    lines = {c: dict(zip(_protocol_names(profile, "intra_node", c),
                         _params(profile, "intra_node", c, g, latency_s).absolute_protocols))
             for c in ("reduce_scatter", "all_gather")}
    rs, ag = lines["reduce_scatter"], lines["all_gather"]
    out = {nm: (rs[nm][0] + ag[nm][0], 2.0 / (1.0 / rs[nm][1] + 1.0 / ag[nm][1])) for nm in rs if nm in ag}
    gi = np.asarray(g)
    for f in profile.comm_groups.get("intra_node", {}).get("all_reduce", ()):
        if f.algorithm == "ring" and np.any(gi == f.group_size):
            own = dict(zip(f.names, f.params.absolute_protocols))
            out = {nm: tuple(np.where(gi == f.group_size, own[nm][j], v[j]) for j in (0, 1))
                   if nm in own else (np.where(gi == f.group_size, np.inf, v[0]), v[1]) for nm, v in out.items()}
    return CollectiveParams.lines(0.0, tuple(out.values()))


#: intra-node fabrics of one direct link per GPU pair, no forwarding (:func:`group_link_bytes_per_s`)
MESH_FABRICS = ("nvlink-mesh", "xgmi-mesh")


def group_link_bytes_per_s(cluster: ClusterSpec, k):
    """The intra-node bandwidth per GPU (B/s, per direction) a group of ``k`` GPUs of one node can use.

    Through an NVSwitch every GPU reaches any peer at its full NVLink bandwidth.  In a mesh
    (``intra_node.fabric: nvlink-mesh``) each link joins one pair of GPUs and GPUs do not forward
    NVLink traffic, so a group reaches only the links to its own members: (k - 1) / (n - 1) of the
    GPU's bandwidth in an n-GPU full mesh (JUPITER's GH200 node: 450 GB/s over three peers, 150 GB/s
    per pair, the cluster file's source; an MI300X platform's Infinity Fabric, ``xgmi-mesh``: 7 links of
    64 GB/s, one to each other GPU, AMD's MI300 microarchitecture doc).  PCIe and ``xgmi`` (MI250's
    uneven links) files give the bandwidth a group gets.
    """
    bw = cluster.intra_bytes_per_s
    if cluster.intra_fabric not in MESH_FABRICS:
        return bw
    peers = max(cluster.scale_up_gpus - 1, 1)
    return bw * np.minimum(1.0, np.maximum(np.asarray(k, dtype=np.float64) - 1.0, 1.0) / peers)


def group_time_s(coll: str, n_bytes, stride, size, cluster: ClusterSpec, profile: Profile,
                 crossing=None):
    """Time of collective ``coll`` of ``n_bytes`` over groups of ``size`` ranks ``stride`` apart.

    Args:
        coll: collective name (costmodel.collective.COLLECTIVES).
        n_bytes, stride, size: arrays over layouts (bytes, ranks, ranks).
        cluster, profile: the hardware and its fitted parameters.
        crossing: GPUs per node that use the NICs at once (default: all GPUs of the node).
            For send_recv, ``size`` is the whole ring/pipeline: one hop is inter-node as soon as the
            group spans nodes, since the slowest hop sets the pace; a hop is one GPU's stream to one
            peer, which NCCL runs over the network devices nearest that GPU (its p2p channels,
            NCCL_NCHANNELS_PER_NET_PEER, pick the GPU's closest NICs: NVIDIA/nccl src/graph/search.cc
            ncclTopoGetNetDev), so however few GPUs of the node cross it gets at most the GPU's share
            of the node's NICs (one 400 Gb/s NIC on a DGX H100, four 100 Gb/s EFA NICs on AWS p5), or
            one NIC where the node has fewer NICs than GPUs.
    Returns:
        array of seconds (0 where size == 1 and coll is not send_recv).
    """
    G = cluster.gpus_per_node
    k, nn = group_span(stride, size, cluster.scale_up_gpus, cluster.num_gpus)
    crossing = G if crossing is None else crossing
    if coll == "send_recv":
        crossing = np.maximum(crossing, min(G, cluster.nics_per_node))     # the GPU's own NICs at most
    pen, tier_lat = tier_penalty(coll, stride, size, cluster)      # switch tiers above the NICs
    inter_bw = cluster.node_nic_bytes_per_s / np.maximum(crossing, 1) / pen
    if coll == "all_reduce" and needs_ring_all_reduce(cluster, profile):
        p_in = _ring_all_reduce_params(profile, k, cluster.intra_latency_s)
    else:
        p_in = _params(profile, "intra_node", coll, k if coll != "send_recv" else 2, cluster.intra_latency_s)
        if coll == "all_reduce":
            p_in = _nvls_group_params(profile, p_in, k)
    p_out = _params(profile, "inter_node", coll, nn if coll != "send_recv" else 2, cluster.inter_latency_s,
                    cluster.inter_fabric, cluster.nic_bytes_per_s)
    if cluster.tiers:
        steps = _STEPS[coll] * np.maximum(nn - 1, 1.0) if coll != "send_recv" else 1.0
        p_out = p_out.with_alpha(p_out.alpha_s + steps * tier_lat)
    if coll in ("all_gather", "reduce_scatter"):
        # the ring runs through all k N ranks: the other N - 1 nodes' k - 1 NVLink hops each are steps of
        # it too (NCCL's tuner: intra-node steps x intraLat + inter-node steps x interLat); an all-reduce
        # across nodes has NCCL's tree (or NVLS tree) for its latency-bound sizes instead
        p_out = p_out.with_alpha(p_out.alpha_s + np.maximum(nn - 1.0, 0.0) * (k - 1.0) * cluster.intra_latency_s)
    intra_bw = group_link_bytes_per_s(cluster, 2 if coll == "send_recv" else k)     # a send: one pair's link
    if cluster.sharp and coll == "all_reduce":     # the switches reduce: no ring, no uplink penalty
        g0 = profile.comm_group_size["inter_node"][coll]
        p_ar = _params(profile, "inter_node", coll, g0, cluster.inter_latency_s, cluster.inter_fabric,
                       cluster.nic_bytes_per_s)
        nic = cluster.node_nic_bytes_per_s / np.maximum(crossing, 1)
        t = pipelined(collective_time_s(coll, n_bytes, k, intra_bw, p_in),
                      sharp_all_reduce_s(n_bytes, k, nn, nic, p_ar, tier_lat),
                      collective_time_s(coll, 1.0, k, intra_bw, p_in),
                      sharp_all_reduce_s(1.0, k, nn, nic, p_ar, tier_lat))
    else:
        # over 2 nodes the tree takes the ring's 2 hops at less bandwidth: only more nodes can pick it
        tree = _tree_params(nn, tier_lat, cluster, profile) if coll == "all_reduce" and np.any(nn > 2) else None
        t = hierarchical_time_s(coll, n_bytes, k, nn, intra_bw, inter_bw, p_in, p_out, tree)
    if coll == "send_recv":
        return t
    return np.where(np.asarray(size) > 1, t, 0.0)


def _tree_params(nn, tier_lat, cluster: ClusterSpec, profile: Profile) -> tuple:
    """The inter-node all-reduce lines of NCCL's double binary tree over ``nn`` nodes and their
    protocol names (costmodel.collective.hierarchical_time_s ``tree``): 2 log2(N) network hops at
    NCCL's tree hop latency (:data:`NCCL_TREE_HOP_RATIO`) plus each switch tier's, where the ring
    has 2 (N - 1) (costmodel.collective.tree_all_reduce_inter_s)."""
    hops = tree_hops(nn)
    p_tree = _params(profile, "inter_node", "all_reduce", 1.0 + hops, cluster.inter_latency_s * NCCL_TREE_HOP_RATIO,
                     cluster.inter_fabric, cluster.nic_bytes_per_s)
    if cluster.tiers:
        p_tree = p_tree.with_alpha(p_tree.alpha_s + 2.0 * np.maximum(hops, 1.0) * tier_lat)
    return p_tree, profile.comm_protocols.get("inter_node", {}).get("all_reduce", ())


@dataclass
class MicrobatchComm:
    """The per-micro-batch part of :class:`CommTimes` (TP, CP, EP per layer; the PP send), s."""

    tp_layer_fwd_s: np.ndarray
    tp_layer_bwd_s: np.ndarray
    cp_layer_fwd_s: np.ndarray
    cp_layer_bwd_s: np.ndarray
    ep_layer_fwd_s: np.ndarray
    ep_layer_bwd_s: np.ndarray
    pp_p2p_s: np.ndarray
    tp_regather_s: np.ndarray
    tp_ag_s: np.ndarray
    tp_rs_s: np.ndarray
    tp_mlp_share: np.ndarray


@dataclass
class DataParallelComm:
    """The data-parallel part of :class:`CommTimes` (gradient reduction, parameter gathers), s."""

    dp_grad_s: np.ndarray
    dp_param_s: np.ndarray
    fsdp_mb_s: np.ndarray
    dp_grad_tail_s: np.ndarray
    dp_param_head_s: np.ndarray
    fsdp_edge_s: np.ndarray
    dp_shares_pp_nic: np.ndarray
    dp_scale_out_share: np.ndarray


@dataclass
class CommTimes(DataParallelComm, MicrobatchComm):
    """Communication times in seconds (arrays over layouts), before overlap is applied.

    tp_layer_fwd_s / tp_layer_bwd_s: TP collectives of one layer per micro-batch.
    cp_layer_fwd_s / cp_layer_bwd_s: CP ring exchange of one layer per micro-batch.
    ep_layer_fwd_s / ep_layer_bwd_s: the MoE token dispatch and combine (all-to-alls, the experts'
        TP gather, or the allgather dispatcher's collectives) per micro-batch, weighted by the MoE
        layers' share of the layers.
    pp_p2p_s: one stage-boundary send/recv of one micro-batch.
    tp_regather_s: the all-gathers of the column-parallel layers' inputs (QKV, FC1) of one layer per
        micro-batch, which the backward repeats: for their weight gradients where the stack keeps only
        the sequence shard (costmodel.stacks ``sp_regather_backward``: part of tp_layer_bwd_s), or to
        recompute them under op-level selective checkpointing (costmodel.schedule); 0 without SP.
    tp_ag_s / tp_rs_s: one of a block's TP collectives: the SP all-gather of the hidden state ahead
        of its column-parallel GEMMs (0 without SP) and the SP reduce-scatter after its row-parallel
        ones (without SP the all-reduce); the attention block has one of each, and so has the MLP of
        each dense layer: ``tp_mlp_share`` of the mean layer (1 - the MoE layers' share).
    dp_grad_s: gradient reduction per step (all-reduce, or reduce-scatter for ZeRO >= 1).
    dp_param_s: parameter all-gather per step (ZeRO 1/2) - 0 otherwise.
    fsdp_mb_s: ZeRO-3 all-gathers (fwd + bwd) and reduce-scatter per micro-batch, whole stage.
    dp_grad_tail_s / dp_param_head_s: the one bucket that overlap cannot hide: the last gradient
        bucket, reduced after the backward ends, and the first parameter bucket, gathered before
        the forward starts (Megatron-core overlap_grad_reduce / overlap_param_gather).
    fsdp_edge_s: ZeRO-3's first layer gather and last layer reduce-scatter of a micro-batch, which
        no compute hides.
    dp_shares_pp_nic: 1 where the DP group and the pipeline's stage sends both leave the NVLink domain
        (ranks TP, CP, DP, PP from the innermost), so they share each GPU's NICs; else 0.
    dp_scale_out_share: the share of the DP collectives' time (dp_grad_s + dp_param_s + fsdp_mb_s) spent
        in groups that leave the NVLink domain, 0-1: the DP group's span, or under HSDP the shard
        group's and the replica all-reduce's each weighted by its time (costmodel.energy.dp_comm_util).
    """


def _ep_dispatch_s(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile, t: LayoutTable,
                  tok, load):
    """Token movement of one MoE layer per micro-batch (one pass), arrays, s (Megatron-core
    token_dispatcher.py).  The dispatcher runs on the default stream: Transformer Engine's TP-comm
    overlap (userbuffers, in its linear layers) does not hide it.

    allgather: all-gather of the hidden states over the EP x ETP group (stride 1) and the
    reduce-scatter of the expert output back.  alltoall: two all-to-alls over the EP group (stride
    ETP) of this rank's tokens x top-k x h (SP shards the tokens over TP), then the experts' TP
    group gathers those and reduce-scatters the output, all at the busiest rank's load.  flex
    (DeepEP): each token crosses the network once per remote node holding one of its experts, and
    NVLink once per GPU holding one of them, at DeepEP's measured bandwidths; the slower of the two
    sets the pace, plus one hop latency each (costmodel.moe); the ETP gather as for alltoall.
    """
    one, act = np.ones(len(t)), tok * model.hidden * ACT_BYTES
    if recipe.moe_dispatcher == "allgather":
        grp, gathered = t.etp * t.ep, act * t.etp * t.ep / t.tp
        return np.where(grp > 1, group_time_s("all_gather", gathered, one, grp, cluster, profile)
                        + group_time_s("reduce_scatter", gathered, one, grp, cluster, profile), 0.0)
    tok_sp = tok / np.where(t.sp, t.tp, 1)
    copies = tok_sp * model.topk * model.hidden * ACT_BYTES * load
    disp = act * model.topk * t.etp / t.tp * load
    etp_t = np.where(t.etp > 1, group_time_s("all_gather", disp, one, t.etp, cluster, profile)
                     + group_time_s("reduce_scatter", disp, one, t.etp, cluster, profile), 0.0)
    if recipe.moe_dispatcher == "alltoall":
        return 2 * group_time_s("all_to_all", copies, t.etp, t.ep, cluster, profile) + etp_t
    G = cluster.gpus_per_node
    k, nodes = group_span(t.etp, t.ep, cluster.scale_up_gpus, cluster.num_gpus)     # nodes: NVLink domains
    # group-limited routing: a group's experts sit on nodes / groups nodes (EP ranks hold contiguous
    # experts), so a token reaches at most limit x that many (DeepSeek-V3 sec. 3.2.2: 4 nodes), and
    # likewise at most limit x EP / groups ranks
    grouped = model.routing_groups > 0
    limit = model.routing_group_limit * np.maximum(1.0, nodes / model.routing_groups) if grouped else None
    rank_limit = model.routing_group_limit * np.maximum(1.0, t.ep / model.routing_groups) if grouped else None
    # NVLink: each GPU receives a token once however many of its experts it holds, and DeepEP's
    # measured bandwidth counts those received rows, its own included (costmodel.moe)
    nvl = tok_sp * model.hidden * ACT_BYTES * destinations_per_token(t.ep, model.topk, rank_limit) * load
    t_nvl = np.where(k > 1, nvl / (DEEPEP_NVLINK_EFFICIENCY * cluster.intra_bytes_per_s), 0.0) + cluster.intra_latency_s
    rdma = tok_sp * model.hidden * ACT_BYTES * remote_nodes_per_token(nodes, model.topk, limit) * load
    pen, tier_lat = tier_penalty("all_to_all", t.etp, t.ep, cluster)
    t_rdma = np.where(nodes > 1, rdma * pen / (_deepep_rdma_efficiency(cluster, profile) * cluster.node_nic_bytes_per_s / G)
                      + cluster.inter_latency_s + tier_lat, 0.0)
    return np.where(t.ep > 1, 2 * np.maximum(t_nvl, t_rdma), 0.0) + etp_t


def _deepep_rdma_efficiency(cluster: ClusterSpec, profile: Profile) -> float:
    """DeepEP's RDMA share of the NIC line rate: its 43 of 50 GB/s on InfiniBand (costmodel.moe), at most
    what the fabric gives NCCL's all-to-all (the profile's, its best protocol): DeepEP V2 runs on AWS EFA
    through NCCL's GIN plugin (deepseek-ai/DeepEP PR 612), with no bandwidth of its own published."""
    inter = profile.comm.get("inter_node", {})
    p = inter.get("all_to_all") and _params(profile, "inter_node", "all_to_all", 2, cluster.inter_latency_s,
                                            cluster.inter_fabric, cluster.nic_bytes_per_s)
    return min(DEEPEP_RDMA_EFFICIENCY, max(float(np.max(e)) for _, e in p.protocols)) if p else DEEPEP_RDMA_EFFICIENCY


@uses_layout_fields("tp", "pp", "dp", "cp", "ep", "etp", "vp", "mbs", "sp", "zero", "overlap", "dp_replicate")
def comm_times(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
               t: LayoutTable) -> CommTimes:
    """Raw (not yet overlapped) communication times of every parallel dimension; see module doc.

    The union of :func:`microbatch_comm_times` and :func:`data_parallel_comm_times` (two terms, so
    that the search evaluates each on the distinct rows of its own, fewer, layout fields).
    """
    return merge_comm(microbatch_comm_times(model, recipe, cluster, profile, t),
                      data_parallel_comm_times(model, recipe, cluster, profile, t))


def blend_edge_comm(mb: MicrobatchComm, mb16: MicrobatchComm, share) -> MicrobatchComm:
    """The per-layer collectives of ``mb`` (the recipe's low-precision format) with ``share`` of the
    layers at ``mb16``'s (BF16: Megatron's --first-last-layers-bf16 layers gather 16-bit operands); the
    stage-boundary send and the MLP share are the same in both."""
    keep = ("pp_p2p_s", "tp_mlp_share")
    mix = lambda a, b: (1.0 - share) * a + share * b  # noqa: E731
    return MicrobatchComm(**{k: (v if k in keep else mix(v, getattr(mb16, k))) for k, v in vars(mb).items()})


def merge_comm(mb: MicrobatchComm, dp: DataParallelComm) -> CommTimes:
    """The :class:`CommTimes` of its two parts."""
    return CommTimes(**vars(mb), **vars(dp))


@uses_layout_fields("tp", "pp", "dp", "cp", "ep", "etp", "mbs", "sp")
def microbatch_comm_times(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                          t: LayoutTable) -> MicrobatchComm:
    """TP, CP and EP collectives of one layer and the stage-boundary send, per micro-batch (raw), s."""
    G = cluster.gpus_per_node
    s = recipe.seq_len
    tok = t.mbs * s / t.cp
    h = model.hidden
    act = tok * h * ACT_BYTES                        # one full hidden-state tensor of the micro-batch
    one = np.ones(len(t))

    # TP: stride 1
    if_sp = lambda a, b: np.where(t.sp, a, b)
    stack = get_stack(recipe.stack)
    fmt = gemm_format(recipe.precision)
    # the all-gathers carry the fp8 operand where the stack casts before gathering (costmodel.formats)
    gathered = act / ACT_BYTES * fmt.operand_bytes if sp_gather_quantized(fmt, recipe.fp8_recipe, stack) else act
    ag = group_time_s("all_gather", gathered, one, t.tp, cluster, profile)
    rs = group_time_s("reduce_scatter", act, one, t.tp, cluster, profile)
    ar = group_time_s("all_reduce", act, one, t.tp, cluster, profile)
    if stack.sp_gather_copies and not recipe.tp_comm_overlap:
        # a read and a write of the full tensor around each (costmodel.stacks); the gather's is a view
        # for one sequence a micro-batch
        hbm = cluster.gpu.hbm_bytes_per_s * profile.hbm_efficiency
        tp_on = t.tp > 1
        ag = ag + np.where(tp_on & (t.mbs > 1), 2 * gathered / hbm, 0.0)
        rs = rs + np.where(tp_on, 2 * act / hbm, 0.0)
    tp_f = if_sp(2 * (ag + rs), 2 * ar)
    load, f = 1.0, 0.0
    if model.is_moe:
        # an MoE layer's MLP has no SP all-gather / reduce-scatter: its dispatcher moves the tokens
        # (the EP term below); the attention's stay
        load = run_rank_load(model, recipe, tok, t.tp, t.etp, t.ep)
        f = model.moe_layer_fraction
        tp_f = if_sp(ag + rs, ar) + (1 - f) * if_sp(ag + rs, ar)
    # the backward gathers QKV's and FC1's inputs again for their weight gradients where the stack
    # keeps only the sequence shard (costmodel.stacks sp_regather_backward)
    regather = np.where(t.sp & (t.tp > 1), (2 - f) * ag, 0.0)
    tp_b = tp_f + (regather if stack.sp_regather_backward else 0.0)

    # CP: stride TP, ring send/recv of the local K,V chunk (cp - 1 steps), repeated heads where the
    # stack repeats them before attention (the ring rotates the kernel's inputs)
    kv_chunk = tok * model.attention_kv_width(recipe.kv_repeat) / t.tp * ACT_BYTES
    k_cp, nn_cp = group_span(t.tp, t.cp, cluster.scale_up_gpus, cluster.num_gpus)
    cp_cross = np.where(nn_cp > 1, G / np.maximum(k_cp, 1), 1)   # one boundary GPU per group per node
    p2p_cp = group_time_s("send_recv", kv_chunk, t.tp, t.cp, cluster, profile, cp_cross)
    cp_f = np.where(t.cp > 1, (t.cp - 1) * p2p_cp, 0.0)
    # backward: the K,V chunks again and their gradients; PyTorch's ring sends those in fp32, every step
    cp_b = (ring_grad_comm_factor(t.cp) if stack.cp_ring_merge else 2.0) * cp_f

    # EP (stride ETP): dispatch and combine in the MoE layers only (the mean layer carries their share)
    ep_f = (model.moe_layer_fraction * _ep_dispatch_s(model, recipe, cluster, profile, t, tok, load)
            if model.is_moe else np.zeros(len(t)))
    ep_b = ep_f.copy()

    # PP: stride TP*CP*DP; each TP rank sends its 1/TP slice; every GPU of a boundary stage crosses
    pp_stride = t.tp * t.cp * t.dp
    pp_cross = np.minimum(G, pp_stride)
    scatter = stack.pp_scatter_gather
    pp_n = act / t.tp if scatter else act        # DeepSpeed's pipeline engine sends it whole
    # the slowest boundary sets the pace: inter-node as soon as the pipeline spans nodes
    pp_time = group_time_s("send_recv", pp_n, pp_stride, t.pp, cluster, profile, pp_cross)
    pp_p2p = np.where(t.pp > 1, pp_time, 0.0)
    return MicrobatchComm(tp_f, tp_b, cp_f, cp_b, ep_f, ep_b, pp_p2p, regather, if_sp(ag, 0.0 * ag), if_sp(rs, ar),
                          (1.0 - f) * one)


def fp8_params_on(recipe: Recipe, zero, dp_cp) -> np.ndarray:
    """Whether a layout keeps its parameters in fp8 (bool array over ``zero`` / ``dp_cp`` = DP x CP):
    ``fp8_param_gather`` under per-tensor fp8 on the Megatron family with the distributed optimizer,
    which Megatron asserts (ZeRO 1 or 2; at DP x CP 1, where it shards nothing, ZeRO 0 reads as it)."""
    z, n = np.asarray(zero), np.asarray(dp_cp)
    on = recipe.fp8_param_gather and recipe.precision == "fp8" and get_stack(recipe.stack).megatron_family
    return np.logical_and(on, (z == 1) | (z == 2) | ((z == 0) & (n == 1)))


def fp8_layer_share(model: ModelSpec, recipe: Recipe) -> float:
    """Share of the model's transformer layers that run the low-precision format: all but the BF16 first
    and last ``recipe.bf16_edge_layers`` (Megatron's --first-last-layers-bf16)."""
    return 1.0 - min(2 * recipe.bf16_edge_layers, model.num_layers) / model.num_layers


def param_gather_bytes(model: ModelSpec, recipe: Recipe, t: LayoutTable, dense) -> tuple:
    """(dense, expert) bytes per element of the distributed optimizer's parameter all-gather: 16-bit,
    or with fp8 parameters (:func:`fp8_params_on`, where the caller gathers: ZeRO 1/2; Megatron
    ``--fp8-param-gather`` gathers the Float8Tensors' one-byte data and transposes locally) one byte
    for the fp8 layers' share of the stage's ``dense`` parameters per GPU (array; the embedding,
    output layer and BF16 edge layers stay 16-bit) and of its experts."""
    if not np.any(fp8_params_on(recipe, t.zero, t.dp * t.cp)):
        return ACT_BYTES, ACT_BYTES
    share = fp8_layer_share(model, recipe)
    dense_layers = layers_per_stage(model, t) * (model.layer_params() - model.mean_expert_params()) / t.tp
    f = np.minimum(dense_layers / np.maximum(dense, 1.0), 1.0) * share
    return ACT_BYTES - (ACT_BYTES - 1.0) * f, ACT_BYTES - (ACT_BYTES - 1.0) * share


@uses_layout_fields("tp", "pp", "dp", "cp", "ep", "etp", "vp", "zero", "overlap", "dp_replicate")
def data_parallel_comm_times(model: ModelSpec, recipe: Recipe, cluster: ClusterSpec, profile: Profile,
                             t: LayoutTable) -> DataParallelComm:
    """Gradient reduction and parameter gathers over DP x CP (ZeRO 0-3, bucketed when overlapped), s.

    Under HSDP (``dp_replicate`` R > 1) ZeRO's reduce-scatters and gathers run in the shard group
    (DP x CP / R consecutive ranks of stride TP, costmodel.layouts.shard_dp) and each reduced shard is
    then all-reduced across the R replicas (stride TP x shard), bucket by bucket (Megatron-core
    param_and_grad_buffer.py with --num-distributed-optimizer-instances; FSDP2's HSDP, per layer and
    micro-batch); costmodel.stacks.Stack.hsdp_zero_stages has the sources."""
    # DP (x CP): stride TP; gradients in buckets of max(40M, 1M x DP) params when overlapped, one
    # bucket otherwise or when the stack reduces after the backward (Megatron-core
    # DistributedDataParallelConfig.bucket_size)
    dense, exp = stage_params(model, t, light_last_stage(recipe))
    gb = grad_bytes(recipe)
    dpcp, rep = shard_dp(t), t.dp_replicate
    edp = expert_shard_dp(t)
    dp_ov = dp_overlap_on(recipe, t.zero, t.overlap)
    bucket = np.where(dp_ov, np.maximum(40e6, 1e6 * t.dp * t.cp), np.inf)

    def buckets(coll, params, bytes_per, stride, size, shard=1):
        """(all buckets, one bucket) of a bucketed collective, seconds; ``shard``: each bucket's
        collective moves its 1/shard (the replica all-reduce of a reduce-scattered bucket)."""
        nb = np.maximum(np.ceil(params / bucket), 1.0)
        one_ = group_time_s(coll, params / nb / shard * bytes_per, stride, size, cluster, profile)
        return nb * one_, one_

    none = np.zeros(len(t))
    moe = bool(np.any(exp > 0))
    z12 = (t.zero == 1) | (t.zero == 2)
    hsdp = rep > 1

    def both(coll, bytes_per, used, exp_bytes=None, across=False):
        """(dense + expert buckets, one dense bucket); zeros where no layout ``used`` it; ``across``:
        the all-reduce of each bucket's shard over the HSDP replicas."""
        if not np.any(used):
            return none, none
        d_all, d_one = (buckets(coll, dense, bytes_per, t.tp * dpcp, rep, dpcp) if across
                        else buckets(coll, dense, bytes_per, t.tp, dpcp))
        if not moe:
            return d_all, d_one
        e_b = bytes_per if exp_bytes is None else exp_bytes
        e_all = (buckets(coll, exp, e_b, t.etp * t.ep * edp, rep, edp) if across
                 else buckets(coll, exp, e_b, t.etp * t.ep, edp))[0]
        return d_all + e_all, d_one

    (ar, ar_one), (rs, rs_one) = both("all_reduce", gb, t.zero == 0), both("reduce_scatter", gb, z12)
    rep_ar, rep_ar_one = both("all_reduce", gb, z12 & hsdp, across=True)
    rep_ar = np.where(hsdp, rep_ar, 0.0)
    in_shard = np.where(t.zero == 0, ar, rs)            # before the replica all-reduce joins the reduction
    rs, rs_one = rs + rep_ar, rs_one + np.where(hsdp, rep_ar_one, 0.0)
    ag, ag_one = both("all_gather", *param_gather_bytes(model, recipe, t, dense), z12)
    dp_grad = np.where(t.zero == 3, 0.0, np.where(t.zero == 0, ar, rs))
    dp_param = np.where(z12, ag, 0.0)
    # the bucket overlap cannot hide: the last gradient bucket, the first parameter bucket
    grad_tail = np.where(t.zero == 3, 0.0, np.where(t.zero == 0, ar_one, rs_one))
    param_head = np.where(z12, ag_one, 0.0)
    span = lambda stride, size: group_span(stride, size, cluster.scale_up_gpus, cluster.num_gpus)[1] > 1  # noqa: E731
    shared = (span(t.tp * t.cp * t.dp, t.pp) & span(t.tp, t.dp * t.cp)).astype(np.float64)
    # which parts leave the NVLink domain: the shard group (the whole DP group without HSDP) and the
    # replica all-reduce (stride TP x shard)
    out_shard, out_rep = span(t.tp, dpcp).astype(np.float64), (hsdp & span(t.tp * dpcp, rep)).astype(np.float64)

    def scale_out_share(shard_s, rep_s):
        total = shard_s + rep_s
        return np.where(total > 0, (out_shard * shard_s + out_rep * rep_s) / np.maximum(total, 1e-300), out_shard)
    # ZeRO-3/FSDP: per layer, all-gather bf16 params in forward and again in backward, reduce-scatter
    # gradients, every micro-batch (PyTorch FSDP, reshard_after_forward=True)
    z012_share = scale_out_share(np.where(t.zero == 3, 0.0, in_shard + dp_param), np.where(z12, rep_ar, 0.0))
    if not np.any(t.zero == 3):
        return DataParallelComm(dp_grad, dp_param, none, grad_tail, param_head, none, shared, z012_share)
    L = layers_per_stage(model, t)
    lay_d = (dense / L)
    lay_e = exp / L
    # HSDP: each layer's reduce-scattered shard is all-reduced over the replicas
    across = lambda params, stride, shard: np.where(  # noqa: E731
        hsdp, group_time_s("all_reduce", params / shard * gb, stride * shard, rep, cluster, profile), 0.0)
    rep_d = across(lay_d, t.tp, dpcp)
    gather_d = group_time_s("all_gather", lay_d * ACT_BYTES, t.tp, dpcp, cluster, profile)
    edge = gather_d + group_time_s("reduce_scatter", lay_d * gb, t.tp, dpcp, cluster, profile) + rep_d
    per_layer, rep_layer = edge + gather_d, rep_d
    if moe:
        rep_e = across(lay_e, t.etp * t.ep, edp)
        rep_layer = rep_layer + rep_e
        per_layer = (per_layer + 2 * group_time_s("all_gather", lay_e * ACT_BYTES, t.etp * t.ep, edp, cluster, profile)
                     + group_time_s("reduce_scatter", lay_e * gb, t.etp * t.ep, edp, cluster, profile) + rep_e)
    fsdp = np.where(t.zero == 3, L * per_layer, 0.0)
    fsdp_edge = np.where(t.zero == 3, edge, 0.0)
    share = np.where(t.zero == 3, scale_out_share(per_layer - rep_layer, rep_layer), z012_share)
    return DataParallelComm(dp_grad, dp_param, fsdp, grad_tail, param_head, fsdp_edge, shared, share)
