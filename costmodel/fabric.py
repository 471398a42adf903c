"""The scale-out fabric's switch tiers: what a collective pays when its group spans tier groups.

A cluster file may describe the network above the NICs as tiers (``inter_node.tiers``, innermost
first; :class:`costmodel.specs.FabricTier`): tier t joins N_t nodes, and traffic between two of its
groups leaves through uplinks of 1/o_t of the bandwidth the nodes inject (o_t, the oversubscription).
Nodes fill tier groups in rank order (contiguous placement), so a group of ``size`` ranks ``stride``
apart spans w = ceil(size x stride / G) consecutive nodes (G GPUs per node) and n_t = ceil(w / N_t)
groups of tier t.

Bisection argument: every GPU of a job runs the same collective at once (SPMD), so the uplinks of a
tier-t group carry the fraction f_t of its nodes' NIC traffic that leaves the group, against a
capacity of 1/O_t of it, O_t = o_1 ... o_t (each tier's uplinks feed the next).  The NIC share of
every GPU then shrinks by max(1, f_t O_t), the worst tier setting the pace:

* all-to-all (uniform destinations, the MoE dispatch): f_t = (n_t - 1) / n_t;
* ring and tree collectives and point-to-point (all-reduce, all-gather, reduce-scatter, the
  pipeline's send/recv): a ring over m nodes leaves a tier group only at its n_t boundary hops
  (a tree's edges cross as rarely), f_t = n_t / m, so a rail-aligned DP ring over a few SUs of 32
  nodes pays no spine oversubscription below 32:1 (NCCL docs "Algorithms": rings and trees;
  rail-optimised fabrics keep each ring on one rail, NVIDIA DGX SuperPOD reference architecture).

A path that rises above tier t pays its ``latency`` (one way) on every step of the collective.
The groups of a parallel dimension tile the nodes in order; where a group's span does not line up
with a tier's groups, some group straddles a tier boundary and the collective waits for it
(:func:`blocks_touched`), as for NVLink domains (costmodel.comm.group_span).

In-network reduction (``inter_node.sharp``: InfiniBand SHARP on the scale-out switches, which NCCL
drives through its CollNet algorithm and the SHARP plugin; NVIDIA docs "NCCL: CollNet", Graham et al.,
"Scalable Hierarchical Aggregation and Reduction Protocol (SHARP)", COMHPC 2016): the switches sum
the nodes' streams on the way up an aggregation tree and multicast the result down, so across N
nodes each GPU's NIC share sends its n/k slice once and receives the sum once (full duplex), where a
ring moves 2(kN-1)/kN of it each way (its rings run through all kN GPUs: costmodel.collective
hierarchical_time_s): :func:`sharp_all_reduce_s`.  Each switch forwards one reduced
stream per tree, so an oversubscribed tier does not bind (below 1:nodes-per-group); the tree costs
one up and one down traversal of the tiers it spans instead of 2(N-1) ring steps.  Only the
all-reduce is priced this way (NCCL's CollNet all-reduce); the other collectives keep their rings.
Routing (``routing`` of a tier): with adaptive routing (InfiniBand AR, Spectrum-X) the uplinks share
the load evenly, as above.  With ECMP each flow is hashed to one uplink for its lifetime, so a few
large flows collide (Al-Fares et al., "Hedera: Dynamic Flow Scheduling for Data Center Networks",
NSDI 2010; Gangidi et al., "RDMA over Ethernet for Distributed AI Training at Meta Scale",
SIGCOMM 2024, who raise the entropy with more queue pairs per connection): a ring's NIC stream is
split over q flows (``flows_per_nic``: NCCL channels per NIC x QPs per connection), and the F = f_t
D_t q flows leaving a group of D_t NIC ports land on its D_t / O_t uplinks as balls in bins.  The
channel on the busiest uplink (L_max flows, each getting 1/L_max of it) finishes last, so the
tier's divisor is max(1, E[L_max] / q) (:func:`ecmp_max_load`), which tends to the balanced f_t O_t
as q grows.  An all-to-all sends to every remote rank at once, one connection per peer: its NIC
carries at least (GPUs behind the NIC) x (peers) flows of equal size, q in the same divisor.  Its
many flows hash nearly evenly, but not quite: the busiest of U uplinks holds about
lambda + sqrt(2 lambda ln U) of a mean lambda.  Counting one flow per peer (not per queue pair) is
the most uneven case, so an ECMP all-to-all is priced from above; more queue pairs per connection
(``flows_per_nic``) do not lower it.  On a rail-optimised tier (``rails``) NIC k's flows hash over
rail k's uplinks alone: the same mean load on fewer links, so a smaller maximum.
"""
from __future__ import annotations

import numpy as np
from scipy.special import pdtr     # the Poisson CDF, P(X <= k) for X ~ Poisson(lam)

from .collective import collective_time_s
from .specs import ClusterSpec


def blocks_touched(block, unit: int, total: float | None = None):
    """Units of ``unit`` consecutive ranks (or nodes) touched by the worst of the aligned blocks of
    ``block`` (array; a block j starts at j x block): the blocks of one parallel dimension tile the
    job in order, and where a block does not line up with the unit some block straddles a unit
    boundary; the synchronous collective waits for that group.  The start residues j B mod U of the
    J = total / B blocks cycle with period m = U / gcd(B, U): with J >= m they reach U - gcd, so the
    worst block touches ceil((B + U - gcd)/U) units; with fewer blocks only the residues of those
    blocks count (the largest found by listing them).  A job of ``total`` <= U (or without ``total``)
    sits in one unit and never straddles, so ceil(B / U) there.  Raises nothing."""
    block = np.asarray(block, dtype=np.float64)
    aligned = np.ceil(block / unit)
    if total is None or total <= unit:
        return aligned
    b = np.maximum(np.round(block), 1.0).astype(np.int64)
    g = np.gcd(b, int(unit))
    worst = np.ceil((block + unit - g) / unit)
    few = np.floor(total / b) < unit // g                   # fewer blocks than the residue cycle
    if np.any(few):
        vals, inv = np.unique(b[few], return_inverse=True)
        touched = np.array([np.ceil(((np.arange(max(int(total // v), 1)) * v) % unit).max() / unit + v / unit)
                            for v in vals])
        worst = np.where(few, 0.0, worst)
        worst[few] = touched[inv]
    return np.maximum(aligned, worst)


def tier_penalty(coll: str, stride, size, cluster: ClusterSpec):
    """(bandwidth divisor >= 1, extra one-way latency in s) of groups of ``size`` ranks ``stride``
    apart (arrays broadcast) on ``cluster``'s tiers; (1, 0) on a cluster without tiers.

    Formula: the module docstring's max over crossed tiers of max(1, f_t O_t), and the sum of the
    latencies of the tiers the group rises above.
    """
    stride = np.asarray(stride, dtype=np.float64)
    size = np.asarray(size, dtype=np.float64)
    if not cluster.tiers:
        return np.ones(np.broadcast(stride, size).shape), np.zeros(np.broadcast(stride, size).shape)
    G = cluster.gpus_per_node
    width = np.maximum(np.ceil(size * stride / G), 1.0)          # consecutive nodes the group spans
    touched = np.minimum(size, width)                             # nodes holding a member
    pen = np.ones_like(width)
    lat = np.zeros_like(width)
    cum = 1.0
    for tier in cluster.tiers:
        cum *= tier.oversubscription
        # tier groups holding a member of the worst group (one that straddles a tier boundary where
        # its span does not line up with the tier), never more than the member nodes (a pipeline
        # whose stages sit in different leaf groups crosses on every hop)
        n_t = np.minimum(blocks_touched(width, tier.nodes, cluster.nodes), touched)
        crosses = n_t > 1
        f = (n_t - 1) / n_t if coll == "all_to_all" else n_t / np.maximum(touched, 1.0)
        tier_pen = f * cum
        if tier.routing == "ecmp":
            # flows per NIC: a ring's channels x QPs; an all-to-all's at least one per remote peer of
            # each GPU behind the NIC (module docstring)
            q = (float(tier.ecmp_flows_per_nic) if coll != "all_to_all"
                 else np.maximum(G / cluster.nics_per_node * (size - 1), 1.0))
            # a rail-optimised tier hashes each rail's flows over that rail's uplinks only
            uplinks = max(tier.nodes * (1 if tier.rails else cluster.nics_per_node) / cum, 1.0)
            tier_pen = np.maximum(tier_pen, ecmp_max_load(f * cum * q * uplinks, uplinks) / q)
        pen = np.where(crosses, np.maximum(pen, tier_pen), pen)
        lat = lat + np.where(crosses, tier.latency_s, 0.0)
    return pen, lat


#: mean flows per uplink above which E[max load] takes the normal extreme-value form (the exact Poisson
#: sum agrees within 0.4% there for 8 to 2,048 uplinks, and its cost grows with the load)
_ECMP_NORMAL_LOAD = 500.0


def ecmp_max_load(flows, uplinks: float):
    """Expected load of the busiest uplink, in flows, when ``flows`` (array) are hashed uniformly onto
    ``uplinks`` links: the Poisson approximation of balls into bins (Mitzenmacher and Upfal,
    "Probability and Computing", 2nd ed., sec. 5.4): each link's load is Poisson(lambda = flows /
    uplinks), independently, so P(max < k) = P(X <= k - 1)^U and E[max] = sum_k>=1 (1 - P(X <= k-1)^U).
    2 flows on 2 links: 1.52 (exactly 1.5).  Above :data:`_ECMP_NORMAL_LOAD` flows per link (an
    all-to-all's thousands of flows) the load is normal, N(lambda, lambda), and the expected maximum
    of U of them lambda + sqrt(lambda) (a - (ln ln U + ln 4 pi) / (2a) + gamma / a), a = sqrt(2 ln U)
    (H. A. David, H. N. Nagaraja, "Order Statistics", 3rd ed., sec. 10.5: the normal's extreme-value
    norming constants; gamma, Euler's constant, the mean of the Gumbel limit).  Raises nothing."""
    flows = np.asarray(flows, dtype=np.float64)
    lam_all = (flows / uplinks).reshape(-1)
    uniq, inv = np.unique(lam_all, return_inverse=True)
    out = np.empty_like(uniq)
    big = (uniq > _ECMP_NORMAL_LOAD) & (uplinks >= 2)        # one link: its load is the mean
    if np.any(big):
        a = np.sqrt(2.0 * np.log(uplinks))
        lb = uniq[big]
        out[big] = lb + np.sqrt(lb) * (a - (np.log(np.log(uplinks)) + np.log(4 * np.pi)) / (2 * a) + np.euler_gamma / a)
    small = ~big
    if np.any(small):
        lam = uniq[small]
        top = int(np.ceil(lam.max() + 12.0 * np.sqrt(lam.max()) + 25.0))
        k = np.arange(top)[:, None]
        out[small] = np.sum(1.0 - pdtr(k, lam[None, :]) ** uplinks, axis=0)
    return np.where(flows > 0, out[inv].reshape(flows.shape), 0.0)


def sharp_all_reduce_s(n_bytes, ranks_per_node, n_nodes, inter_bytes_per_s_per_gpu, p_inter, tier_latency_s):
    """Inter-node part of an all-reduce reduced in the network (module docstring), seconds (arrays).

    Args:
        n_bytes: the all-reduce buffer, bytes (nccl-tests convention); ranks_per_node (k) and
            n_nodes (N): the group's span; the intra-node part (k ranks) is priced apart.
        inter_bytes_per_s_per_gpu: a GPU's share of its node's NIC line rate, bytes/s.
        p_inter: the fitted inter-node all-reduce parameters (their protocols' efficiency of the
            line rate and their alpha at the measured group size; the NIC streams at that efficiency).
        tier_latency_s: one-way latency of the highest tier the group rises above (0 without tiers).
    Returns:
        t = alpha + 2 tier_latency + min_p(alpha_p + (n/k) / (eff_p bw)) where N > 1, else 0.
    """
    k = np.maximum(np.asarray(ranks_per_node, dtype=np.float64), 1.0)
    nn = np.asarray(n_nodes, dtype=np.float64)
    p = p_inter.with_alpha(p_inter.alpha_s + 2.0 * np.asarray(tier_latency_s, dtype=np.float64))
    t = collective_time_s("send_recv", np.asarray(n_bytes, dtype=np.float64) / k, 2.0, inter_bytes_per_s_per_gpu, p)
    return np.where(nn > 1, t, 0.0)
