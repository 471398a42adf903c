"""Readers for the markdown result tables used by the built-in profiles.

* :func:`markdown_tables` - generic GitHub-flavoured pipe tables, with the heading and the text
  paragraph above each table (the dtype / algorithm of a table is often only stated there).
* :func:`read_mamf` - ml-engineering "Maximum Achievable Matmul FLOPS comparison table"
  (stas00/ml-engineering, compute/accelerator/README.md; mamf-finder.py best shape per GPU).
* :func:`read_azure_results` - Azure AI-benchmarking-guide ``Azure_Results/ND_*_results.md`` (cuBLASLt
  GEMM, STREAM-like HBM bandwidth, FlashAttention-2, NCCL all-reduce busbw sweep).
* :func:`read_mlengineering_nvls` - ml-engineering network/README.md "SHARP" tables (8x H200 / B200
  all_reduce_perf NVLS on/off GPU-count sweeps, per-collective 16 GiB busbw).
* :func:`read_allreduce_bench` - ml-engineering all_reduce_bench.py payload sweeps (busbw/algbw).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from ..files import read_text

_UNITS = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12, "ki": 2.0**10, "mi": 2.0**20,
          "gi": 2.0**30, "ti": 2.0**40}


def parse_quantity(text):
    """Parse ``"32KiB"``, ``"1.44GBps"``, ``"8G"``, ``"473.1GBps"`` or ``"86.9%"`` into a float.

    Returns:
        float in base units (bytes, B/s; ``%`` -> fraction).  Decimal prefixes are powers of 1000,
        ``Ki/Mi/Gi/Ti`` powers of 1024.
    Raises:
        ValueError: not a number with an optional known prefix and unit.
    """
    s = text.strip().replace(",", "")
    m = re.fullmatch(r"([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(%|([kKmMgGtT]i?)?(B/s|GBps|Bps|B|x)?)", s)
    if not m:
        raise ValueError(f"not a quantity: {text!r}")
    v = float(m.group(1))
    if m.group(2) == "%":
        return v / 100.0
    unit = m.group(4) or ""
    prefix = (m.group(3) or "").lower()
    if unit == "GBps":  # "GBps" = GB/s, the prefix is part of the unit
        return v * 1e9
    return v * _UNITS[prefix]


@dataclass
class MdTable:
    """A pipe table: ``heading`` (last ``#`` heading above), ``context`` (text since that heading),
    ``above`` (the last text line before the table), ``header`` cells, ``rows`` (lists of cell
    strings, separator rows dropped), 1-based ``line``."""

    heading: str
    context: str
    above: str
    header: list
    rows: list
    line: int

    def column(self, name):
        """Index of the first header cell containing ``name`` (case-insensitive); KeyError if none."""
        for i, h in enumerate(self.header):
            if name.lower() in h.lower():
                return i
        raise KeyError(f"no column {name!r} in table at line {self.line} ({self.header})")


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def markdown_tables(path):
    """All pipe tables of a markdown file, in order.

    Args:
        path: markdown file.
    Returns:
        list of :class:`MdTable`.  Rows made only of dashes/colons (also escaped ``\\---``) and rows
        whose cells are all empty are dropped.
    """
    tables, heading, context, cur = [], "", [], None
    for lineno, raw in enumerate(read_text(Path(path)).splitlines(), start=1):
        s = raw.strip()
        if s.startswith("|"):
            cells = _cells(s)
            if cur is None:
                cur = MdTable(heading, " ".join(context), context[-1] if context else "", cells, [],
                              lineno)
                tables.append(cur)
            elif not all(re.fullmatch(r"\\?[-:\s]*", c) for c in cells):
                cur.rows.append(cells)
            continue
        cur = None
        if s.startswith("#"):
            heading, context = s.lstrip("#").strip(), []
        elif s:
            context.append(s)
    return tables


def read_mamf(path):
    """ml-engineering MAMF table rows.

    Args:
        path: ``mamf_max_achievable_matmul_tflops.md``.
    Returns:
        list of dicts ``{accelerator, dtype ("bf16"|"fp8"), mamf_flops, theory_flops, efficiency,
        m, n, k}`` (FLOP/s, best shape MxNxK with K the reduction); rows without a measurement are
        skipped.
    Raises:
        ValueError: a measured row has an unparsable number or shape (names file and line).
    """
    out = []
    for t in markdown_tables(path):
        if "MAMF" not in t.header[1]:
            continue
        dtype = "fp8" if "FP8" in t.above else "bf16"
        for r in t.rows:
            if not r[1]:
                continue
            try:
                m, n, k = (int(x) for x in r[t.column("Shape")].split("x"))
                out.append(dict(accelerator=r[0], dtype=dtype, mamf_flops=float(r[1]) * 1e12,
                                theory_flops=float(r[2]) * 1e12, efficiency=parse_quantity(r[3]),
                                m=m, n=n, k=k, notes=r[t.column("Notes")].strip() if "Notes" in t.header else ""))
            except ValueError as e:
                raise ValueError(f"{path}: table at line {t.line}, row {r}: {e}") from None
    return out


def _azure_size(label):
    """Azure NCCL size labels ('1K', '65K', '132K', '33M', '1G') are rounded powers of two."""
    return int(2 ** round(math.log2(parse_quantity(label))))


def read_azure_results(path):
    """Azure AI-benchmarking-guide result files (one or several ``# Azure ND ...`` systems per file).

    Args:
        path: markdown file.
    Returns:
        dict system name (e.g. ``"ND H100 v5"``) -> dict with keys
        ``gemm`` (list of ``{m, n, k, flops_per_s, time_s, dtype}``; dtype parsed from the text above),
        ``hbm`` (``{"Copy": B/s, "Triad": B/s, ...}``),
        ``attention`` (``{"flash_attention_2": FLOP/s, "standard": FLOP/s, "head_dim": int}``),
        ``nccl`` (``{"algorithm": "nvls"|"ring", "sizes": [bytes], "busbw": [B/s]}``).
        Sections absent from the file are absent from the dict.
    Raises:
        ValueError: a table cell is not numeric, or the NCCL sizes do not double row to row.
    """
    out = {}
    for t in markdown_tables(path):
        sysm = re.search(r"ND [A-Z0-9]+ [vV]\d", " ".join(t.header))
        if not sysm:
            continue
        name = sysm.group(0).replace("V", "v")
        d = out.setdefault(name, {})
        h = t.heading.lower()
        if h.startswith("gemm"):
            dm = re.search(r"\b(FP8|FP16|BF16)\b", t.context)
            dtype = dm.group(1).lower() if dm else "unknown"
            for r in t.rows:
                m, n, k, tf = int(r[0]), int(r[1]), int(r[2]), float(r[3]) * 1e12
                d.setdefault("gemm", []).append(dict(m=m, n=n, k=k, flops_per_s=tf, dtype=dtype,
                                                     time_s=2.0 * m * n * k / tf))
        elif h.startswith("hbm"):
            d["hbm"] = {r[0]: float(r[1]) * 1e12 for r in t.rows}
        elif h.startswith("flash attention"):
            hd = re.search(r"head dimension of (\d+)", t.context)
            vals = {r[0]: float(r[1]) * 1e12 for r in t.rows}
            d["attention"] = dict(flash_attention_2=vals["Flash Attention 2.0"],
                                  standard=vals["Standard Attention(PyTorch)"],
                                  head_dim=int(hd.group(1)) if hd else None)
        elif h.startswith("nccl"):
            sizes = [_azure_size(r[0]) for r in t.rows]
            if any(b != 2 * a for a, b in zip(sizes, sizes[1:])):
                raise ValueError(f"{path}: NCCL sizes at line {t.line} do not double: {sizes}")
            algo = "nvls" if "NVLS" in t.context else "ring" if "Ring" in t.context else "unknown"
            d["nccl"] = dict(algorithm=algo, sizes=sizes, busbw=[float(r[1]) * 1e9 for r in t.rows])
    return out


def read_mlengineering_nvls(path):
    """ml-engineering "SHARP" tables (NVLS on/off all_reduce sweeps and per-collective busbw).

    Args:
        path: ``mlengineering_h200_b200_nvls_and_collectives.md``.
    Returns:
        dict with ``gpu_sweep`` -> {"H200"|"B200": list of ``{gpus, algo, busbw, busbw_nvls_off,
        size_bytes}``} and ``collectives`` -> {"H200": list of ``{collective, algo, busbw,
        size_bytes, gpus}``} (B/s, bytes; size from the table heading).
    Raises:
        ValueError: unparsable cell.
    """
    out = {"gpu_sweep": {}, "collectives": {}}
    names = {"all-reduce": "all_reduce", "all-gather": "all_gather", "reduce-scatter": "reduce_scatter"}
    for t in markdown_tables(path):
        gpu = re.search(r"\b([HB]200)\b", t.heading).group(1)
        size = int(parse_quantity(re.search(r"(\d+GiB)", t.heading).group(1)))
        if t.header[0] == "GPUs":
            out["gpu_sweep"][gpu] = [dict(gpus=int(r[0]), algo=r[1].lower(), busbw=parse_quantity(r[2]),
                                          busbw_nvls_off=parse_quantity(r[3]), size_bytes=size)
                                     for r in t.rows]
        else:
            out["collectives"][gpu] = [dict(collective=names[r[0].split(",")[0].strip()], algo=r[1].lower(),
                                            busbw=parse_quantity(r[2]), size_bytes=size, gpus=8)
                                       for r in t.rows]
    return out


def read_allreduce_bench(path):
    """ml-engineering all_reduce_bench.py payload sweeps.

    Args:
        path: ``mlengineering_allreduce_bench_h200_b200_pytorch.md``.
    Returns:
        list of dicts ``{heading, columns: {column name: [values]}, size_bytes: [bytes]}`` per table;
        numeric columns parsed with :func:`parse_quantity` (B/s), text columns left as strings.
    """
    out = []
    for t in markdown_tables(path):
        cols = {}
        for j, h in enumerate(t.header[1:], start=1):
            vals = [r[j] for r in t.rows]
            try:
                cols[h] = [parse_quantity(v) for v in vals]
            except ValueError:
                cols[h] = vals
        out.append(dict(heading=t.heading, columns=cols,
                        size_bytes=[int(parse_quantity(r[0])) for r in t.rows]))
    return out
