"""Collective bandwidth over message sizes and group scopes: ``collective`` records.

Collectives and their ``size_bytes`` (nccl-tests doc/PERFORMANCE.md; ``costmodel.readers.suite_jsonl``):

==============  ===========================================  ============================
collective      torch.distributed call                        size_bytes is
==============  ===========================================  ============================
all_reduce      ``all_reduce``                                the (in-place) buffer
all_gather      ``all_gather_single`` / ``_into_tensor``      the output buffer
reduce_scatter  ``reduce_scatter_single`` / ``_tensor``       the input buffer
all_to_all      ``all_to_all_single``                         the send buffer
send_recv       ``batch_isend_irecv``: send to the next       the message
                rank of the group, receive from the previous
                (nccl-tests sendrecv_perf's ring shift;
                a pair exchanges both ways when g = 2)
==============  ===========================================  ============================

algbw = size_bytes / time_s and busbw = algbw x f(g), f from
:func:`costmodel.collective.busbw_factor` (2(g-1)/g all-reduce; (g-1)/g all-gather,
reduce-scatter, all-to-all; 1 send/recv).  Sizes run from ``min_bytes`` to ``max_bytes`` by
powers of two, each rounded down to a multiple of the element size (x g where the buffer is
split over the group).  Every timed call has a group barrier before it; each rank times its call
(:class:`.timing.Timer`), the per-iteration times are reduced with MAX over the group, and
``time_s`` is the median over iterations of that max (the slowest rank ends the collective).

Group scopes (:func:`plan_groups`), each a step in which disjoint groups run concurrently, as
they do in training (every TP group of a node at once; every DP rail at once):

* ``intra_node``: blocks of g consecutive ranks of each node, g in ``intra_sizes`` (2, 4, 8)
  that fit the ranks per node; on a single node also the whole world if it is another size.
* ``inter_node`` (more than one node): one rank per node (the i-th rank of every node, all i at
  once), and the full world.

``torch.distributed.new_group`` is collective over the world: every rank creates every group, in
the same order, also the groups it is not in (PyTorch docs, ``new_group``).
"""
from __future__ import annotations

from dataclasses import dataclass

from .timing import median, timed_window

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv")
_SPLIT = ("all_gather", "reduce_scatter", "all_to_all")  # buffers divided over the group
_TORCH = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}


@dataclass
class GroupStep:
    """Groups measured together.

    Attributes:
        name: ``node<g>``, ``one_per_node`` or ``world``.
        scope: ``intra_node`` or ``inter_node``.
        group_size: ranks per group (g).
        ranks_per_node: ranks of one group on one node.
        n_nodes: nodes one group spans.
        groups: disjoint lists of global ranks, all measured at the same time.
    """

    name: str
    scope: str
    group_size: int
    ranks_per_node: int
    n_nodes: int
    groups: list


def plan_groups(node_members, intra_sizes=(2, 4, 8)) -> list[GroupStep]:
    """The group steps of a job (module docstring), in the order every rank runs them.

    Args:
        node_members: global ranks of each node (``dist.node_layout``).
        intra_sizes: intra-node group sizes to try; those above the ranks per node are dropped.
    Returns:
        list of :class:`GroupStep`; empty for a single rank.
    """
    rpn = min(len(m) for m in node_members)
    n_nodes = len(node_members)
    world = sum(len(m) for m in node_members)
    steps = []
    sizes = sorted({g for g in intra_sizes if 2 <= g <= rpn})
    for g in sizes:
        groups = [m[i * g:(i + 1) * g] for m in node_members for i in range(len(m) // g)]
        steps.append(GroupStep(f"node{g}", "intra_node", g, g, 1, groups))
    if n_nodes == 1:
        if world >= 2 and world not in sizes:
            steps.append(GroupStep("world", "intra_node", world, world, 1, [list(range(world))]))
        return steps
    if rpn > 1:
        groups = [[m[i] for m in node_members] for i in range(rpn)]
        steps.append(GroupStep("one_per_node", "inter_node", n_nodes, 1, n_nodes, groups))
    steps.append(GroupStep("world", "inter_node", world, rpn, n_nodes, [sorted(r for m in node_members for r in m)]))
    return steps


def message_sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """min_bytes, 2 min_bytes, 4 min_bytes, ... up to max_bytes (inclusive).

    Raises:
        ValueError: min_bytes < 1 or max_bytes < min_bytes.
    """
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValueError(f"message sizes: need 1 <= --min-bytes ({min_bytes}) <= --max-bytes ({max_bytes})")
    out, n = [], int(min_bytes)
    while n <= max_bytes:
        out.append(n)
        n *= 2
    return out


def buffer_bytes(collective: str, n_bytes: int, group_size: int, elem_bytes: int) -> int:
    """``n_bytes`` rounded down to what ``collective`` can move (0: too small for the group)."""
    unit = elem_bytes * (group_size if collective in _SPLIT else 1)
    return (n_bytes // unit) * unit


def _op(name: str):
    import torch.distributed as dist
    if name == "all_gather":
        return getattr(dist, "all_gather_single", None) or getattr(dist, "all_gather_into_tensor", None) \
            or dist._all_gather_base
    if name == "reduce_scatter":
        return getattr(dist, "reduce_scatter_single", None) or getattr(dist, "reduce_scatter_tensor", None) \
            or dist._reduce_scatter_base
    raise KeyError(name)


def make_collective(name: str, n_bytes: int, group, ranks: list, rank: int, device, dtype: str):
    """Allocate the buffers of one collective call and return ``fn(async_op=False)`` running it.

    Args:
        name: one of :data:`COLLECTIVES`.
        n_bytes: size_bytes (already rounded with :func:`buffer_bytes`).
        group: process group (None: the world); ranks: its global ranks; rank: this rank.
        device: torch device of the buffers; dtype: ``bf16``, ``fp16`` or ``fp32``.
    Returns:
        callable; with ``async_op=True`` it returns a list of work handles.
    Raises:
        ValueError: unknown collective.
    """
    import torch
    import torch.distributed as dist
    dt = getattr(torch, _TORCH[dtype])
    count = n_bytes // torch.empty((), dtype=dt).element_size()
    g = len(ranks)
    z = lambda c: torch.zeros(c, device=device, dtype=dt)  # zeros: sums stay finite
    if name == "all_reduce":
        buf = z(count)
        return lambda async_op=False: dist.all_reduce(buf, group=group, async_op=async_op)
    if name == "all_gather":
        out, inp, op = z(count), z(count // g), _op("all_gather")
        return lambda async_op=False: op(out, inp, group=group, async_op=async_op)
    if name == "reduce_scatter":
        out, inp, op = z(count // g), z(count), _op("reduce_scatter")
        return lambda async_op=False: op(out, inp, group=group, async_op=async_op)
    if name == "all_to_all":
        out, inp = z(count), z(count)
        return lambda async_op=False: dist.all_to_all_single(out, inp, group=group, async_op=async_op)
    if name == "send_recv":
        send, recv = z(count), z(count)
        me = ranks.index(rank)
        nxt, prv = ranks[(me + 1) % g], ranks[(me - 1) % g]

        def run(async_op=False):
            works = dist.batch_isend_irecv([dist.P2POp(dist.isend, send, nxt, group),
                                            dist.P2POp(dist.irecv, recv, prv, group)])
            if async_op:
                return works
            for w in works:
                w.wait()
        return run
    raise ValueError(f"unknown collective {name!r} (known: {', '.join(COLLECTIVES)})")


def group_barrier(ctx, group):
    """Barrier over ``group`` (nccl: on this rank's GPU)."""
    import torch.distributed as dist
    if ctx.is_cuda:
        dist.barrier(group=group, device_ids=[ctx.device.index])
    else:
        dist.barrier(group=group)


def max_over_group(ctx, group, times: list[float]) -> list[float]:
    """Element-wise max of every group rank's ``times`` (all_reduce MAX)."""
    import torch
    import torch.distributed as dist
    t = torch.tensor(times, dtype=torch.float64, device=ctx.device if ctx.is_cuda else "cpu")
    dist.all_reduce(t, op=dist.ReduceOp.MAX, group=group)
    return t.cpu().tolist()


def measure(ctx, name: str, n_bytes: int, group, ranks: list, dtype: str, iters: int, warmup: int) -> dict:
    """Time one collective on this rank's group; the common timing fields of a ``collective`` record.

    Every rank of the group must call this with the same arguments.  Returns time_s (median of the
    per-iteration max over ranks), t_start_unix, t_end_unix, time_min_s.
    """
    fn = make_collective(name, n_bytes, group, ranks, ctx.rank, ctx.device, dtype)
    times, t0, t1 = timed_window(fn, ctx.device, iters, warmup, before=lambda: group_barrier(ctx, group))
    worst = max_over_group(ctx, group, times)
    return dict(time_s=median(worst), t_start_unix=t0, t_end_unix=t1, time_min_s=min(worst))


def run(rec, ctx, collectives, sizes, dtype: str, iters: int, warmup: int, intra_sizes=(2, 4, 8)):
    """Every collective x size x group step (module docstring); ``collective`` and ``phase`` records.

    Args:
        rec: :class:`.recorder.Recorder`; ctx: :class:`.dist.DistContext`.
        collectives: names from :data:`COLLECTIVES`.
        sizes: message sizes in bytes (:func:`message_sizes`).
        dtype: buffer dtype (``bf16``, ``fp16``, ``fp32``).
        iters, warmup: timed / untimed calls per size.
        intra_sizes: intra-node group sizes.
    At world size 1 a note says the collectives were skipped.  A failing size gets a warning note.
    """
    import torch
    import torch.distributed as dist
    from costmodel.collective import busbw_factor
    if not ctx.distributed:
        rec.note("collectives skipped: one process (world size 1); launch two or more (costmodel calibrate run "
                 "--nproc-per-node 2, torchrun or srun)")
        return
    elem = torch.empty((), dtype=getattr(torch, _TORCH[dtype])).element_size()
    for step in plan_groups(ctx.node_members, intra_sizes):
        mine, handle = None, None
        for ranks in step.groups:
            pg = None if len(ranks) == ctx.world_size else dist.new_group(ranks)
            if ctx.rank in ranks:
                mine, handle = ranks, pg
        rec.log(f"collectives: {step.name} ({step.scope}, g={step.group_size}, {len(step.groups)} groups)")
        if mine is not None:
            group_barrier(ctx, handle)  # creates the communicator outside the timed loops
            for name in collectives:
                factor = float(busbw_factor(name, step.group_size))
                for size in sizes:
                    n = buffer_bytes(name, size, step.group_size, elem)
                    if n == 0:
                        continue
                    try:
                        f = measure(ctx, name, n, handle, mine, dtype, iters, warmup)
                    except Exception as e:  # noqa: BLE001 - one size must not end the run
                        rec.note(f"{name} {step.name} {n} B failed: {type(e).__name__}: {str(e)[:200]}", "warning")
                        continue
                    finally:
                        if ctx.is_cuda:
                            torch.cuda.empty_cache()
                    algbw = n / f["time_s"]
                    busbw = algbw * factor
                    if ctx.rank == mine[0]:
                        rec.add("collective", collective=name, scope=step.scope, group_size=step.group_size,
                                ranks_per_node=step.ranks_per_node, n_nodes=step.n_nodes, size_bytes=n,
                                dtype=dtype, time_s=f["time_s"], algbw_bytes_per_s=algbw,
                                busbw_bytes_per_s=busbw, iters=iters, t_start_unix=f["t_start_unix"],
                                t_end_unix=f["t_end_unix"], time_min_s=f["time_min_s"], group=step.name,
                                group_ranks=mine, concurrent_groups=len(step.groups))
                    window = max(f["t_end_unix"] - f["t_start_unix"], 1e-9)  # barriers included
                    rec.phase(f"collective_{name}", f["t_start_unix"], f["t_end_unix"],
                              link_bytes_per_s=factor * n * iters / window, dtype=dtype, collective=name,
                              scope=step.scope, group_size=step.group_size, size_bytes=n,
                              busbw_bytes_per_s=busbw)
        barrier_world(ctx)


def barrier_world(ctx):
    """World barrier between group steps (ranks outside a step's groups wait here)."""
    from .dist import barrier
    barrier(ctx)
