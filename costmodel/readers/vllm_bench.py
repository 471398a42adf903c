"""Reader of vLLM's GEMM kernel benchmark output (``benchmarks/kernels/bench_*_gemm.py``).

The scripts print, per weight shape, a line ``<model>, N=<n> K=<k>, ... TFLOP/s:``, a header row of
providers (``batch_size`` first) and one pandas row per batch size (the GEMM's M): an index, the
batch size and one TFLOP/s value per provider, TFLOP/s = 2 x M x N x K / time.
"""
from __future__ import annotations

import re
from pathlib import Path
from ..files import read_text

_SHAPE = re.compile(r"N=(\d+)\s+K=(\d+).*TFLOP/s")


def read_vllm_gemm_bench(path) -> dict:
    """Every provider column of every shape table in the file.

    Args:
        path: the copy (a source header, then the script's output verbatim).
    Returns:
        provider name -> list of ``{m, n, k, flops_per_s, time_s}`` (FLOP/s and seconds), over all
        shapes in file order.
    Raises:
        ValueError: a data row before any shape line or header, with the wrong number of values, or a
            non-positive value (naming the file and line).
    """
    out: dict[str, list] = {}
    shape = cols = None
    for i, line in enumerate(read_text(Path(path)).splitlines(), start=1):
        m = _SHAPE.search(line)
        if m:
            shape, cols = (int(m.group(1)), int(m.group(2))), None
            continue
        words = line.split()
        if shape is not None and words[:1] == ["batch_size"]:
            cols = words[1:]
            continue
        if not words or not re.fullmatch(r"\d+", words[0]) or len(words) < 2:
            continue
        if shape is None or cols is None:
            raise ValueError(f"{path}: line {i}: a data row before its shape line and header")
        if len(words) != 2 + len(cols):
            raise ValueError(f"{path}: line {i}: {len(words) - 2} values for {len(cols)} providers")
        try:
            vals = [float(w) for w in words[1:]]
        except ValueError:
            raise ValueError(f"{path}: line {i}: a value is not a number") from None
        if min(vals) <= 0:
            raise ValueError(f"{path}: line {i}: non-positive value")
        mm, (n, k) = int(vals[0]), shape
        for c, tf in zip(cols, vals[1:]):
            out.setdefault(c, []).append(dict(m=mm, n=n, k=k, flops_per_s=tf * 1e12,
                                              time_s=2.0 * mm * n * k / (tf * 1e12)))
    return out
