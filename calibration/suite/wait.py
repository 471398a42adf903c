"""Power of a GPU waiting for a peer in NCCL, against one waiting for its host (``phase`` records).

In synchronous training a GPU that finishes first waits: in a pipeline bubble its P2P receive is
posted, under a slower TP/DP peer its collective is launched.  NCCL's kernels then spin on the GPU,
polling flags in memory until the peer arrives (NCCL's device code loops on volatile loads), and
the GPU holds its clocks; a GPU whose host has launched nothing draws only its idle power.
``nvidia-smi`` shows the difference as utilisation 100 % against 0 % (the public 8x H100 DDP trace
under hardware/profiles/data/ has both, while rank 0 writes a checkpoint: ~155 W against ~122 W).

The benchmark makes both at once for ``seconds``: rank 0 sleeps on the host (``host_wait``: its
GPU idles with the context held), every other rank has already launched an all-reduce of
``n_elem`` elements and spins in it (``nccl_wait``) until rank 0 joins; then the group
synchronises.  Both phases do no work (rates 0); ``nccl_wait`` carries ``spin`` = 1, the
utilisation of the spin power term (costmodel/fit/power.py fits ``power.spin_w`` from it).
A single process has no peer: the benchmark notes that and skips.
"""
from __future__ import annotations

import time


def run(rec, ctx, seconds: float, n_elem: int = 1024):
    """Measure both waiting phases for ``seconds`` (module docstring); needs >= 2 ranks.

    Raises:
        whatever torch.distributed raises (a broken group).
    """
    import torch
    import torch.distributed as dist
    if not ctx.distributed or ctx.world_size < 2:
        rec.note("wait skipped: one process (world size 1) has no peer to wait for; launch two or more "
                 "(costmodel calibrate run --nproc-per-node 2, torchrun or srun)")
        return
    if seconds <= 0:
        rec.note("wait skipped (--wait-s 0)")
        return
    buf = torch.ones(n_elem, dtype=torch.float32, device=ctx.device)
    dist.all_reduce(buf)                       # warm the communicator: the first call sets up channels
    if ctx.is_cuda:
        torch.cuda.synchronize(ctx.device)
    dist.barrier()
    t0 = time.time()
    if ctx.rank == 0:
        time.sleep(seconds)
        t1 = time.time()
        dist.all_reduce(buf)
    else:
        dist.all_reduce(buf)                   # launched now, completes when rank 0 joins
        if ctx.is_cuda:
            torch.cuda.synchronize(ctx.device)
        t1 = time.time()
    if ctx.is_cuda:
        torch.cuda.synchronize(ctx.device)
    name = "host_wait" if ctx.rank == 0 else "nccl_wait"
    rec.phase(name, t0, t1, flops_per_s=0.0, hbm_bytes_per_s=0.0, link_bytes_per_s=0.0,
              spin=0.0 if ctx.rank == 0 else 1.0)
    if not ctx.is_cuda:
        rec.note("wait ran on CPU (gloo): a code-path check; no GPU power is sampled")
