"""A GEMM alone vs. the same GEMM while an all_reduce runs on another stream: ``overlap`` records.

NCCL (and RCCL) kernels run on the process group's own CUDA stream, which waits for the caller's
stream at launch (PyTorch ProcessGroupNCCL); a GEMM queued on the compute stream right after an
``async_op=True`` all_reduce therefore runs concurrently with it, sharing SMs, HBM and L2 — the
situation of Megatron's overlapped TP/DP communication.  Per iteration (after a group barrier):

* event e0 on the compute stream; ``all_reduce(async_op=True)``; r GEMMs; event e_gemm;
* on a side stream: ``work.wait()`` then event e_comm (fires when the all_reduce ends).

``gemm_overlapped_s = (e_gemm - e0) / r`` and ``comm_overlapped_s = e_comm - e0``; the alone times
are measured the same way without the other operation.  r is chosen so that the r GEMMs take about
as long as the all_reduce alone (extra field ``gemm_repeats``), so the whole GEMM chain overlaps.
Medians over ``iters``; each rank writes its own record (the slowdown is per GPU).
GPU only: on CPU the suite writes a note instead.
"""
from __future__ import annotations

import time

from .collectives import group_barrier, make_collective, plan_groups
from .gemm import make_gemm
from .shapes import GemmShape
from .timing import Timer, median


def measure(ctx, gemm_fn, comm_fn, group, iters: int, warmup: int, repeats: int) -> tuple[float, float]:
    """Median (gemm chain time, comm time) in s of ``repeats`` GEMMs overlapped with one all_reduce."""
    import torch
    side = torch.cuda.Stream(device=ctx.device)
    g_times, c_times = [], []
    for i in range(warmup + iters):
        group_barrier(ctx, group)
        torch.cuda.synchronize(ctx.device)
        e0, eg, ec = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        e0.record()
        work = comm_fn(async_op=True)
        for _ in range(repeats):
            gemm_fn()
        eg.record()
        with torch.cuda.stream(side):
            work.wait()
            ec.record(side)
        torch.cuda.synchronize(ctx.device)
        if i >= warmup:
            g_times.append(e0.elapsed_time(eg) * 1e-3)
            c_times.append(e0.elapsed_time(ec) * 1e-3)
    return median(g_times), median(c_times)


def run(rec, ctx, shape: tuple[int, int, int], dtype: str, n_bytes: int, comm_dtype: str, iters: int, warmup: int):
    """Overlap records for the largest intra-node group step and, across nodes, the world.

    Args:
        shape: GEMM (m, n, k); dtype: its dtype (``bf16``...).
        n_bytes: all_reduce size in bytes; comm_dtype: its dtype.
        iters, warmup: timed / untimed iterations of each measurement.
    Skipped with a note on CPU or at world size 1; a failure gets a warning note.
    """
    import torch
    import torch.distributed as dist
    from costmodel.collective import busbw_factor
    if not ctx.is_cuda or not ctx.distributed:
        why = "CPU run (needs CUDA streams)" if not ctx.is_cuda else "one process (world size 1)"
        rec.note(f"overlap skipped: {why}")
        return
    steps = [s for s in plan_groups(ctx.node_members) if s.scope == "intra_node"][-1:]
    steps += [s for s in plan_groups(ctx.node_members) if s.name == "world" and s.scope == "inter_node"]
    m, n, k = shape
    gshape = GemmShape(1, m, n, k, source="overlap", labels=["overlap"])
    elem = 2 if comm_dtype in ("bf16", "fp16") else 4
    size = (n_bytes // elem) * elem
    for step in steps:
        mine, handle = None, None
        for ranks in step.groups:
            pg = None if len(ranks) == ctx.world_size else dist.new_group(ranks)
            if ctx.rank in ranks:
                mine, handle = ranks, pg
        if mine is None:
            continue
        try:
            gemm_fn = make_gemm(gshape, dtype, ctx.device)
            comm_fn = make_collective("all_reduce", size, handle, mine, ctx.rank, ctx.device, comm_dtype)
            timer = Timer(ctx.device)
            group_barrier(ctx, handle)
            t_start = time.time()
            g_alone = median(timer.time_each(gemm_fn, iters, warmup))
            c_alone = median(timer.time_each(comm_fn, iters, warmup, before=lambda: group_barrier(ctx, handle)))
            # the same r on every rank of the group: take the group's max
            r = torch.tensor([min(10000, max(1, round(c_alone / g_alone)))], device=ctx.device, dtype=torch.float64)
            dist.all_reduce(r, op=dist.ReduceOp.MAX, group=handle)
            repeats = int(r.item())
            t_over = time.time()
            g_chain, c_over = measure(ctx, gemm_fn, comm_fn, handle, iters, warmup, repeats)
            t_end = time.time()
        except Exception as e:  # noqa: BLE001
            rec.note(f"overlap {step.name} failed: {type(e).__name__}: {str(e)[:200]}", "warning")
            continue
        finally:
            torch.cuda.empty_cache()
        g_over = g_chain / repeats
        rec.add("overlap", dtype=dtype, m=m, n=n, k=k, collective="all_reduce", size_bytes=size,
                group_size=step.group_size, gemm_alone_s=g_alone, gemm_overlapped_s=g_over,
                comm_alone_s=c_alone, comm_overlapped_s=c_over, gemm_repeats=repeats, scope=step.scope,
                ranks_per_node=step.ranks_per_node, n_nodes=step.n_nodes, comm_dtype=comm_dtype,
                iters=iters, t_start_unix=t_start, t_end_unix=t_end)
        # the overlapped window (its warm-up included): GEMM rate and the all_reduce's busbw under overlap
        rec.phase("overlap", t_over, t_end, flops_per_s=gshape.flops / g_over,
                  link_bytes_per_s=size / c_over * float(busbw_factor("all_reduce", step.group_size)),
                  dtype=dtype, group_size=step.group_size, scope=step.scope)
