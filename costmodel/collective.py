"""Alpha-beta time of one NCCL-style collective inside one link scope, on numpy arrays.

nccl-tests conventions (NVIDIA nccl-tests, doc/PERFORMANCE.md): for a collective over ``g`` ranks and
a message of ``n`` bytes (the per-rank buffer size nccl-tests prints as "size"),

    algbw = n / t,   busbw = algbw * f(g)

with f = 2(g-1)/g for all-reduce, (g-1)/g for all-gather, reduce-scatter and all-to-all, and 1 for
send/recv.  busbw is the figure that is comparable to a link's bandwidth.  The time is

    t(n) = alpha + f(g) * n / busbw_eff(n),   busbw_eff(n) = busbw_max / (1 + (n_half / n) ** gamma)

``alpha`` is the latency (Hockney's alpha-beta model, Parallel Computing 20(3), 1994); the
saturating busbw_eff is the measured ramp of effective bandwidth with message size (NCCL switches
protocol LL -> LL128 -> Simple and pipelines in chunks, so small messages never reach the link
rate).  With gamma = 1 it reduces to a plain alpha-beta line.  ``alpha``, ``n_half`` and ``gamma`` and
the ratio busbw_max / link bandwidth are fitted per (collective, scope) by
``calibration/fit_public.py`` from nccl-tests outputs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")


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


@dataclass(frozen=True)
class CollectiveParams:
    """Fitted parameters of one collective in one scope (see the module docstring).

    Attributes:
        alpha_s: latency, seconds.
        busbw_efficiency: busbw_max divided by the scope's link bandwidth per GPU, dimensionless
            (NVLS all-reduce exceeds 1 because the switch does the reduction).
        n_half_bytes: message size at which busbw_eff is half of busbw_max when gamma = 1, bytes.
        gamma: steepness of the bandwidth ramp, dimensionless (> 0).
    """

    alpha_s: float
    busbw_efficiency: float
    n_half_bytes: float
    gamma: float


def effective_busbw(n_bytes, link_bytes_per_s, p: CollectiveParams):
    """busbw reached at message size n, bytes/s: busbw_max / (1 + (n_half/n)^gamma).

    Args:
        n_bytes: array-like message sizes (> 0), bytes.
        link_bytes_per_s: per-GPU link bandwidth of the scope (datasheet), bytes/s; array-like.
        p: fitted :class:`CollectiveParams`.
    Returns:
        numpy array, bytes/s.
    """
    n = np.maximum(np.asarray(n_bytes, dtype=np.float64), 1.0)
    return p.busbw_efficiency * np.asarray(link_bytes_per_s, dtype=np.float64) / (
        1.0 + (p.n_half_bytes / n) ** p.gamma)


def collective_time_s(collective: str, n_bytes, group_size, link_bytes_per_s, p: CollectiveParams):
    """Time of one collective within one scope, seconds (0 where the group has one rank).

    Args:
        collective: one of :data:`COLLECTIVES`.
        n_bytes: array-like per-rank buffer size in nccl-tests convention, bytes.
        group_size: array-like ranks in the group.
        link_bytes_per_s: array-like per-GPU bandwidth of the scope, bytes/s.
        p: fitted :class:`CollectiveParams`.
    Returns:
        numpy array of seconds.
    Formula: t = alpha + f(g) n / busbw_eff(n) (Hockney 1994; nccl-tests PERFORMANCE.md).
    """
    g = np.asarray(group_size, dtype=np.float64)
    n = np.asarray(n_bytes, dtype=np.float64)
    t = p.alpha_s + busbw_factor(collective, g) * n / effective_busbw(n, link_bytes_per_s, p)
    active = (g > 1) & (n > 0) if collective != "send_recv" else (n > 0)
    return np.where(active, t, 0.0)


def hierarchical_time_s(collective: str, n_bytes, ranks_per_node, n_nodes, intra_bytes_per_s,
                        inter_bytes_per_s_per_gpu, p_intra: CollectiveParams,
                        p_inter: CollectiveParams):
    """Time of a collective over ``ranks_per_node * n_nodes`` ranks that may span nodes, seconds.

    The group has k = ``ranks_per_node`` ranks in each of N = ``n_nodes`` nodes.  NCCL runs a
    multi-node collective hierarchically (tree / NVLS-tree / PAT: the intra-node part on NVLink, the
    inter-node part on the NICs, pipelined in chunks, NCCL docs "Algorithms"), so the time is the
    slower of the two pipelined parts:

    * all_reduce: intra all-reduce of n over k; inter all-reduce of n/k over N ranks;
    * all_gather / reduce_scatter: intra over k of n; inter over N of n/k;
    * all_to_all: intra over k of n/N; inter over N of n (the fraction (N-1)/N leaves the node);
    * send_recv: one transfer of n over the inter-node link when N > 1, else over NVLink.

    Args:
        collective: one of :data:`COLLECTIVES`.
        n_bytes: array-like message size in nccl-tests convention, bytes.
        ranks_per_node, n_nodes: array-likes of positive integers.
        intra_bytes_per_s: per-GPU intra-node link bandwidth (datasheet), bytes/s.
        inter_bytes_per_s_per_gpu: a GPU's share of its node's NIC bandwidth, bytes/s: NIC line rate x
            NICs per node / GPUs of the node crossing the network at the same time.
        p_intra, p_inter: fitted :class:`CollectiveParams` for the two scopes.
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
        t_out = collective_time_s(collective, n / k, nn, inter_bytes_per_s_per_gpu, p_inter)
    return np.maximum(t_in, t_out)
