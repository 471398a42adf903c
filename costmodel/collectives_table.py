"""The predicted nccl-tests table of a cluster, and its error against a capture.

What ``costmodel collectives`` prints: for each collective, the time, algbw and busbw nccl-tests would
report (nccl-tests doc/PERFORMANCE.md conventions, costmodel/collective.py) inside one node and over
the whole cluster, from the same alpha-beta model and fitted profile the step-time model uses
(:func:`costmodel.comm.group_time_s`); and, given a capture, per size the measured and predicted
time and busbw with the relative error.  Cluster operators check their fabric this way: a large
error at the large sizes says the fabric does not deliver what the cluster file and profile claim.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from .collective import COLLECTIVES, busbw_factor
from .comm import group_time_s
from .errors import InputError
from .specs import ClusterSpec, Profile

#: nccl-tests' usual sweep: -b 8 -e 8G -f 2
DEFAULT_SIZES = tuple(2 ** k for k in range(3, 34))


@dataclass
class CollectiveRow:
    """One row of a predicted (or compared) table: sizes in bytes, times in us, bandwidths in GB/s
    (1e9 bytes/s, as nccl-tests prints them); measured fields None when there is no capture."""

    collective: str
    scope: str
    ranks: int
    nodes: int
    size_bytes: int
    time_us: float
    algbw_gb_s: float
    busbw_gb_s: float
    measured_time_us: float | None = None
    measured_busbw_gb_s: float | None = None

    @property
    def time_rel_err(self) -> float | None:
        """(predicted - measured) / measured time, None without a measurement."""
        if self.measured_time_us is None or not self.measured_time_us > 0:
            return None
        return self.time_us / self.measured_time_us - 1.0


def capture_cluster(cluster: ClusterSpec, ranks_per_node: int, nodes: int) -> ClusterSpec:
    """The cluster a capture of ``ranks_per_node`` GPUs on each of ``nodes`` nodes ran on, as
    :func:`capture_time_s` prices it.

    A group of fewer ranks than a node's GPUs stays in one node of the cluster as it is (a mesh node's
    pair of GPUs gets one pair's link, as in the step-time model), not a node of that many GPUs.  Across
    nodes, nodes of ``ranks_per_node`` GPUs that drive only their own NICs: NCCL gives each GPU the NICs
    nearest it (costmodel.fit.comm.nic_bytes_per_gpu), so 4 GPUs of an 8-GPU node use half its NICs.
    """
    if nodes == 1:
        return dataclasses.replace(cluster, nodes=nodes)
    own = max(1, cluster.nics_per_node // max(cluster.gpus_per_node, 1))
    nics = cluster.nics_per_node if ranks_per_node >= cluster.gpus_per_node else \
        min(cluster.nics_per_node, ranks_per_node * own)
    return dataclasses.replace(cluster, gpus_per_node=ranks_per_node, nodes=nodes, nics_per_node=nics)


def capture_time_s(coll: str, sizes, ranks_per_node: int, nodes: int, cluster: ClusterSpec,
                   profile: Profile) -> np.ndarray:
    """The time nccl-tests would print for ``coll`` over ``ranks_per_node`` GPUs on each of ``nodes``
    nodes of ``cluster`` (:func:`capture_cluster`), seconds per size (bytes): the path
    ``collectives --compare`` prices a capture by, and ``calibrate fit`` fits and reports its in-sample
    error by (costmodel.comm.group_time_s)."""
    c = capture_cluster(cluster, ranks_per_node, nodes)
    g = ranks_per_node * nodes
    n = np.asarray(sizes, dtype=np.float64)
    # nccl-tests' sendrecv_perf sends rank r to r + 1 (src/sendrecv.cu): one GPU of a node crosses the network
    crossing = np.ones_like(n) if coll == "send_recv" else None
    return np.asarray(group_time_s(coll, n, np.ones_like(n), np.full_like(n, g), c, profile, crossing),
                      dtype=np.float64)


def _rows(coll: str, scope: str, sizes, ranks_per_node: int, nodes: int, cluster: ClusterSpec,
          profile: Profile) -> list:
    g = ranks_per_node * nodes
    n = np.asarray(sizes, dtype=np.float64)
    t = capture_time_s(coll, n, ranks_per_node, nodes, cluster, profile)
    f = float(busbw_factor(coll, g))
    return [CollectiveRow(coll, scope, g, nodes, int(s), float(ti * 1e6), float(s / ti / 1e9), float(s / ti * f / 1e9))
            for s, ti in zip(n, t)]


def predicted_table(cluster: ClusterSpec, profile: Profile, collectives=COLLECTIVES, sizes=DEFAULT_SIZES,
                    ranks=None) -> list:
    """Predicted nccl-tests rows of every collective, inside one node (its GPUs, and first each smaller
    group size the profile has its own fit of, or the group sizes ``ranks`` names), over one NVLink
    domain where it joins several nodes (``ClusterSpec.scale_up_gpus``, e.g. a GB200 NVL72 rack of 18
    trays) and over the cluster.

    Args:
        cluster: the cluster (its node count sets the cluster-wide scope; one node gives one scope).
        profile: fitted parameters.  collectives: names of :data:`COLLECTIVES`.  sizes: bytes.
        ranks: group sizes inside one node (2 .. GPUs per node) for the intra-node rows, or None.
    Returns:
        list of :class:`CollectiveRow`.
    Raises:
        InputError: an unknown collective name, or a group size outside 2 .. GPUs per node (--ranks).
    """
    for k in ranks or ():
        if not 2 <= k <= cluster.gpus_per_node:
            raise InputError("--ranks", "", f"{k} is not a group size inside a node of {cluster.key} "
                             f"(2 .. {cluster.gpus_per_node})")
    out = []
    for coll in collectives:
        if coll not in COLLECTIVES:
            raise InputError("--collective", "", f"{coll!r} is not one of {', '.join(COLLECTIVES)}")
        # smaller groups of one node the profile measured apart (its by_group_size fits)
        fitted = {f.group_size for f in profile.comm_groups.get("intra_node", {}).get(coll, ())}
        for k in sorted(ranks or {k for k in fitted if 2 <= k < cluster.gpus_per_node} | {cluster.gpus_per_node}):
            out += _rows(coll, "intra-node", sizes, k, 1, cluster, profile)
        dom = cluster.scale_up_gpus // cluster.gpus_per_node
        if 1 < dom < cluster.nodes:
            out += _rows(coll, "nvlink-domain", sizes, cluster.gpus_per_node, dom, cluster, profile)
        if cluster.nodes > 1:
            out += _rows(coll, "cluster", sizes, cluster.gpus_per_node, cluster.nodes, cluster, profile)
    return out


def compare_capture(table, cluster: ClusterSpec, profile: Profile, collective: str, ranks_per_node: int,
                    nodes: int, path: str = "capture", notes: list | None = None) -> list:
    """The capture's out-of-place rows against the prediction for the same collective, ranks and nodes.

    Args:
        table: :class:`costmodel.readers.nccl_tests.NcclTable`.  collective: its collective.
        ranks_per_node, nodes: the capture's layout (its rank lines, or the flags).
        notes: a list to append what was left out to: 0-byte rows (nothing moves: the model has no
            time for them) and rows without a positive time, each named by its line.
    Returns:
        list of :class:`CollectiveRow` with the measured fields set.
    Raises:
        InputError: the capture has no usable row (names the file).
    """
    allrows = table.select()
    rows = [r for r in allrows if r.size_bytes > 0 and r.time_us > 0]
    zero = [r.line for r in allrows if r.size_bytes == 0]
    bad = [r.line for r in allrows if r.size_bytes > 0 and not r.time_us > 0]
    if notes is not None and zero:
        notes.append(f"{path}: {len(zero)} 0-byte row(s) (line {', '.join(map(str, zero[:5]))}) left out: nothing "
                     "moves, so the model predicts no time for them")
    if notes is not None and bad:
        notes.append(f"{path}: {len(bad)} row(s) without a positive time (line {', '.join(map(str, bad[:5]))}) left out")
    if not rows:
        raise InputError(path, "", "no out-of-place row with a positive time to compare")
    scope = "intra-node" if nodes == 1 else "cluster"
    pred = _rows(collective, scope, [r.size_bytes for r in rows], ranks_per_node, nodes, cluster, profile)
    for p, r in zip(pred, rows):
        p.measured_time_us, p.measured_busbw_gb_s = float(r.time_us), float(r.busbw)
    return pred


def error_summary(rows: list, min_bytes: int = 2 ** 20) -> dict:
    """Median and max |time error| over all compared sizes and over sizes >= ``min_bytes`` (1 MiB:
    where bandwidth, not latency, sets the time)."""
    def stats(rs):
        e = np.abs([r.time_rel_err for r in rs if r.time_rel_err is not None])
        return dict(n=int(e.size), median_abs_rel_err=float(np.median(e)) if e.size else None,
                    max_abs_rel_err=float(e.max()) if e.size else None)
    return dict(all=stats(rows), large=stats([r for r in rows if r.size_bytes >= min_bytes]), min_bytes=min_bytes)
