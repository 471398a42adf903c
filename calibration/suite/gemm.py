"""Matmul throughput per shape and dtype: ``gemm`` records of achieved FLOP/s.

For each shape (:mod:`.shapes`) and dtype the suite allocates ``x[b, m, k]``, ``w[b, k, n]`` and the
output once, runs ``warmup`` untimed calls, then times ``iters`` calls (:class:`.timing.Timer`:
CUDA events on a GPU) and writes the median as ``time_s`` with ``flops_per_s = 2 b m n k / time_s``
(the FLOP count of nccl-tests' sibling, mamf-finder, and of :mod:`costmodel.gemm`).

Dtypes: ``bf16`` (``torch.mm`` / ``torch.bmm``), ``fp16``, ``fp32``, and ``fp8`` through
``torch._scaled_mm`` (e4m3 inputs, per-tensor scales, bf16 output; the row-major x column-major
layout cuBLASLt's FP8 kernels take), which needs FP8 tensor cores: NVIDIA sm_89 and later (Ada,
Hopper, Blackwell; CUDA Programming Guide, compute capabilities) or AMD CDNA3+ (gfx94x uses the
``e4m3fnuz`` variant, ROCm docs "Precision support").  On CPU the suite times ``fp32`` (bf16 CPU
matmuls are emulated and slow on most CPUs) and says so in a note; fp8 is GPU only.
"""
from __future__ import annotations


from .shapes import GemmShape
from .timing import median, timed_window

DTYPES = ("bf16", "fp16", "fp32", "fp8")
_TORCH = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32"}
_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1}


def fp8_dtype(device):
    """The torch fp8 (e4m3) dtype this GPU's tensor cores take, and why not when None.

    Returns:
        (dtype or None, reason str).  NVIDIA: ``float8_e4m3fn`` from sm_89 on; AMD: gfx94x
        ``float8_e4m3fnuz``, gfx95x ``float8_e4m3fn``; CPU and older GPUs: None.
    """
    import torch
    if device.type != "cuda":
        return None, "fp8 GEMMs need a GPU"
    if not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return None, f"torch {torch.__version__} has no torch._scaled_mm / float8 types"
    if torch.version.hip:
        arch = getattr(torch.cuda.get_device_properties(device), "gcnArchName", "")
        if arch.startswith("gfx94"):
            return torch.float8_e4m3fnuz, ""
        if arch.startswith("gfx95"):
            return torch.float8_e4m3fn, ""
        return None, f"AMD {arch or 'GPU'} has no fp8 matrix cores (needs gfx94x or later)"
    major, minor = torch.cuda.get_device_capability(device)
    if (major, minor) < (8, 9):
        return None, f"GPU sm_{major}{minor} has no fp8 tensor cores (needs sm_89 or later)"
    return torch.float8_e4m3fn, ""


def resolve_dtypes(requested, device) -> tuple[list[str], list[tuple[str, str]]]:
    """Dtypes to run on ``device`` from ``--gemm-dtypes``, and (level, message) notes for the rest.

    On CPU, bf16 and fp16 are replaced by fp32 (said in a note) and fp8 is dropped.  On a GPU
    without fp8 tensor cores fp8 is dropped with the reason (:func:`fp8_dtype`).

    Raises:
        ValueError: a dtype not in :data:`DTYPES`.
    """
    out, notes = [], []
    for d in requested:
        if d not in DTYPES:
            raise ValueError(f"--gemm-dtypes: unknown dtype {d!r} (known: {', '.join(DTYPES)})")
        if device.type != "cuda":
            if d == "fp8":
                notes.append(("info", "fp8 GEMMs skipped: CPU run (fp8 tensor cores are GPU only)"))
                continue
            if d in ("bf16", "fp16"):
                notes.append(("info", f"{d} GEMMs run as fp32 on CPU (16-bit CPU matmuls are emulated); "
                                      "records carry dtype fp32"))
                d = "fp32"
        elif d == "fp8":
            fp8, why = fp8_dtype(device)
            if fp8 is None:
                notes.append(("info", f"fp8 GEMMs skipped: {why}"))
                continue
        if d not in out:
            out.append(d)
    return out, notes


def gemm_bytes(shape: GemmShape, dtype: str) -> int:
    """Bytes of the three operands (x, w, y; fp8's output is bf16)."""
    e = _BYTES[dtype]
    out_e = 2 if dtype == "fp8" else e
    return shape.b * (shape.m * shape.k * e + shape.k * shape.n * e + shape.m * shape.n * out_e)


def make_gemm(shape: GemmShape, dtype: str, device, generator=None):
    """Allocate the operands of ``shape`` and return a no-argument callable running the GEMM.

    Raises:
        ValueError: fp8 with b > 1 (``torch._scaled_mm`` is 2-D) or a dimension not a multiple of
            16 (cuBLASLt fp8 requirement), or fp8 unsupported here.
        torch.cuda.OutOfMemoryError / RuntimeError: allocation or kernel failure.
    """
    import torch
    b, m, n, k = shape.key
    if dtype == "fp8":
        fp8, why = fp8_dtype(device)
        if fp8 is None:
            raise ValueError(why)
        if b != 1:
            raise ValueError("fp8 batched GEMM not measured (torch._scaled_mm is 2-D)")
        if m % 16 or n % 16 or k % 16:
            raise ValueError("fp8 GEMM needs m, n, k multiples of 16")
        x = torch.randn(m, k, device=device, dtype=torch.bfloat16).to(fp8)
        w = torch.randn(n, k, device=device, dtype=torch.bfloat16).to(fp8)  # w.t() is column-major
        one = torch.ones((), device=device, dtype=torch.float32)
        wt = w.t()

        def run():
            return torch._scaled_mm(x, wt, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
        return run
    dt = getattr(torch, _TORCH[dtype])
    if b == 1:
        x = torch.randn(m, k, device=device, dtype=dt, generator=generator)
        w = torch.randn(k, n, device=device, dtype=dt, generator=generator)
        y = torch.empty(m, n, device=device, dtype=dt)
        return lambda: torch.mm(x, w, out=y)
    x = torch.randn(b, m, k, device=device, dtype=dt, generator=generator)
    w = torch.randn(b, k, n, device=device, dtype=dt, generator=generator)
    y = torch.empty(b, m, n, device=device, dtype=dt)
    return lambda: torch.bmm(x, w, out=y)


def measure(shape: GemmShape, dtype: str, device, iters: int, warmup: int) -> dict:
    """Time one GEMM; returns the fields of a ``gemm`` record (module docstring).

    Raises: as :func:`make_gemm`.
    """
    times, t0, t1 = timed_window(make_gemm(shape, dtype, device), device, iters, warmup)
    t = median(times)
    return dict(dtype=dtype, b=shape.b, m=shape.m, n=shape.n, k=shape.k, time_s=t,
                flops_per_s=shape.flops / t, iters=iters, source=shape.source, t_start_unix=t0,
                t_end_unix=t1, time_min_s=min(times), labels=shape.labels)


def run(rec, device, shapes, dtypes, iters: int, warmup: int, max_flops: float = 0.0):
    """Measure every shape x dtype; write ``gemm`` + ``phase`` records, notes for skips/failures.

    Args:
        rec: :class:`.recorder.Recorder`.
        device: torch device.
        shapes: :class:`.shapes.GemmShape` list.
        dtypes: dtypes from :func:`resolve_dtypes`.
        iters, warmup: timed and untimed calls per shape.
        max_flops: skip shapes above this many FLOPs (0: no limit), one note with the count.
    A shape that fails (out of memory, unsupported) gets a warning note and the run continues.
    """
    import torch
    skipped = 0
    for dtype in dtypes:
        for shape in shapes:
            if max_flops and shape.flops > max_flops:
                skipped += 1
                continue
            if device.type == "cuda":
                free, _ = torch.cuda.mem_get_info(device)
                if gemm_bytes(shape, dtype) > 0.8 * free:
                    rec.note(f"gemm {dtype} {shape.key} skipped: needs {gemm_bytes(shape, dtype) / 2**30:.1f} GiB, "
                             f"{free / 2**30:.1f} GiB free", "warning")
                    continue
            try:
                fields = measure(shape, dtype, device, iters, warmup)
            except ValueError as e:
                rec.note(f"gemm {dtype} b,m,n,k={shape.key} skipped: {e}", "info")
                continue
            except Exception as e:  # noqa: BLE001 - one shape must not end the run
                rec.note(f"gemm {dtype} b,m,n,k={shape.key} failed: {type(e).__name__}: {str(e)[:200]}",
                         "warning")
                continue
            finally:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
            rec.add("gemm", **fields)
            window = max(fields["t_end_unix"] - fields["t_start_unix"], 1e-9)
            rec.phase("gemm", fields["t_start_unix"], fields["t_end_unix"], flops_per_s=shape.flops * iters / window,
                      dtype=dtype, b=shape.b, m=shape.m, n=shape.n, k=shape.k)
    if skipped:
        rec.note(f"{skipped} GEMM shape/dtype pairs above --max-gemm-flops {max_flops:.3g} skipped", "info")
