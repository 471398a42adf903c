"""Device-memory bandwidth: ``hbm`` records for a copy and a STREAM triad.

Operations and bytes moved (McCalpin, STREAM benchmark, "Counting bytes and FLOPs"; the
``costmodel.readers.suite_jsonl`` convention, no write-allocate traffic counted):

* ``copy``:  ``dst.copy_(src)`` over arrays of ``n`` bytes: reads n, writes n -> ``bytes = 2 n``.
* ``triad``: ``a = b + s * c`` (``torch.add(b, c, alpha=s, out=a)``, one kernel) over three arrays
  of n bytes: reads 2n, writes n -> ``bytes = 3 n``.

``bytes_per_s = bytes / time_s`` with time_s the median of ``iters`` timed calls after warm-up
(:class:`.timing.Timer`).  Arrays are float32; ``array_bytes`` (n) is written as an extra field.
On CPU this measures DRAM, which the records say through provenance ``device: cpu``.
"""
from __future__ import annotations


from .timing import median, timed_window

OPS = {"copy": 2, "triad": 3}  # bytes moved per array byte


def make_op(op: str, n_bytes: int, device):
    """Allocate the arrays of ``op`` over ``n_bytes`` per array (float32) and return the callable.

    Raises:
        ValueError: unknown op or n_bytes < 4.
        torch.cuda.OutOfMemoryError: arrays do not fit.
    """
    import torch
    if op not in OPS:
        raise ValueError(f"unknown HBM op {op!r} (known: {', '.join(OPS)})")
    n = n_bytes // 4
    if n < 1:
        raise ValueError(f"HBM array of {n_bytes} bytes is smaller than one float32")
    src = torch.ones(n, device=device, dtype=torch.float32)
    dst = torch.empty(n, device=device, dtype=torch.float32)
    if op == "copy":
        return lambda: dst.copy_(src)
    c = torch.full((n,), 2.0, device=device, dtype=torch.float32)
    return lambda: torch.add(src, c, alpha=3.0, out=dst)


def measure(op: str, n_bytes: int, device, iters: int, warmup: int) -> dict:
    """Time ``op`` over arrays of ``n_bytes``; the fields of an ``hbm`` record.

    Raises: as :func:`make_op`.
    """
    n_bytes = (n_bytes // 4) * 4
    times, t0, t1 = timed_window(make_op(op, n_bytes, device), device, iters, warmup)
    t = median(times)
    moved = OPS[op] * n_bytes
    return dict(op=op, bytes=moved, time_s=t, bytes_per_s=moved / t, iters=iters, t_start_unix=t0,
                t_end_unix=t1, array_bytes=n_bytes, time_min_s=min(times))


def run(rec, device, sizes, iters: int, warmup: int):
    """Measure copy and triad at every array size in ``sizes`` (bytes); ``hbm`` + ``phase`` records.

    A size that does not fit or fails gets a warning note and the run continues.
    """
    import torch
    for n in sizes:
        for op in OPS:
            if device.type == "cuda":
                free, _ = torch.cuda.mem_get_info(device)
                if OPS[op] * n > 0.8 * free:
                    rec.note(f"hbm {op} {n} B arrays skipped: {free / 2**30:.1f} GiB free", "warning")
                    continue
            try:
                f = measure(op, n, device, iters, warmup)
            except Exception as e:  # noqa: BLE001 - one size must not end the run
                rec.note(f"hbm {op} {n} B failed: {type(e).__name__}: {str(e)[:200]}", "warning")
                continue
            finally:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            rec.add("hbm", **f)
            window = max(f["t_end_unix"] - f["t_start_unix"], 1e-9)
            rec.phase(f"hbm_{op}", f["t_start_unix"], f["t_end_unix"], hbm_bytes_per_s=f["bytes"] * iters / window,
                      dtype="fp32", array_bytes=f["array_bytes"])
