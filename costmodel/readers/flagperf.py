"""Readers for FlagPerf (BAAI) A100 benchmark results with power and temperature monitoring.

Two formats, both from https://github.com/FlagOpen/FlagPerf (snapshot 1b5a0303...):

* :func:`read_flagperf_operator_csv` - the operator benchmarks ``operation/benchmarks/<op>/nvidia/
  A100_40_SXM/{BF16,FP16,FP32}_README.md`` tabulated one row per (op, dtype, implementation) in
  ``hardware/profiles/data/flagperf_a100_operator_bench_power_temp.csv``: achieved TFLOPS (CPU wall
  clock and kernel clock), FLOPS utilisation (relative to the dtype's peak), op latency, whole-node
  and per-GPU power (avg / max / std) and the GPU's average temperature during the run, plus the case
  configuration (shape, iterations; ``generic ; nvidia-override``).  Values keep their printed units
  (``0.34TFLOPS``, ``0.11%``, ``3201.08us``, ``291.21W``, ``51.03°C``) and are converted to SI here.
* :func:`read_flagperf_base_md` - the ``base/toolkits/*`` and ``base/benchmarks/*`` READMEs (GEMM
  TFLOPS per dtype, HBM copy bandwidth, host-to-device, NCCL all-reduce, P2P) concatenated in
  ``flagperf_a100_base_gemm_membw_nccl_with_power_temp.md``, each section opened by
  ``## FILE: base/<suite>/<test>/nvidia/A100/README.md``.  The READMEs are in Chinese; the glossary
  in the copy's header maps the headings: 测试值 measured, 标定值 spec, 测试标定比例 measured/spec,
  单卡平均功耗 / 单卡最大功耗 / 单卡功耗标准差 per-GPU avg / max / std power, 单卡平均温度 per-GPU avg
  temperature, 单卡TDP GPU TDP, 系统平均功耗 node avg power, 等效带宽 busbw-style bandwidth.

Errors name the file and line; unparsable operator rows are collected (good rows kept).
"""
from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path
from costmodel.errors import FlagPerfParseError
from ..files import read_text

_NUM = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*(.*?)\s*$")
_SCALE = {"TFLOPS": 1e12, "TOPS": 1e12, "%": 0.01, "us": 1e-6, "ms": 1e-3, "s": 1.0, "W": 1.0, "°C": 1.0,
          "C": 1.0, "GB/s": 1e9, "GiB/s": 2.0 ** 30, "": 1.0}


def flagperf_quantity(text, allowed=None):
    """Parse a FlagPerf value such as ``"259.2TFLOPS"``, ``"83.1%"``, ``"3201.08us"``, ``"61.99°C"``.

    Args:
        text: the printed cell.
        allowed: optional collection of accepted units (``""`` = bare number).
    Returns:
        float in SI (FLOP/s, fraction, s, W, °C, B/s); None for an empty cell or ``/`` (not reported).
    Raises:
        ValueError: not a number with a known unit, or a unit outside ``allowed``.
    """
    s = text.strip()
    if s in ("", "/", "-"):
        return None
    m = _NUM.match(s)
    if not m or m.group(2) not in _SCALE:
        raise ValueError(f"not a FlagPerf quantity: {text!r}")
    unit = m.group(2)
    if allowed is not None and unit not in allowed:
        raise ValueError(f"unit {unit!r} not one of {sorted(allowed)}: {text!r}")
    return float(m.group(1)) * _SCALE[unit]


def _config(text):
    """``"M: 4096 N: 4096 K: 4096 WARMUP: 100 ITERS: 20000 ... ; ITERS: 20000"`` -> (generic, override) dicts."""
    parts = text.split(";")
    out = []
    for p in (parts + [""])[:2]:
        out.append({k: (float(v) if "." in v else int(v)) for k, v in re.findall(r"([A-Za-z]+):\s*([0-9.]+)", p)})
    return out[0], out[1]


@dataclass(frozen=True)
class OperatorRow:
    """One FlagPerf operator benchmark (one op, dtype and implementation on 1x A100-40GB-SXM).

    Attributes (SI): op, dtype (``BF16``/``FP16``/``FP32``/``INT16``/``INT32``), impl
    (``flaggems``/``nativetorch``); flops_wall, flops_kernel (FLOP/s); fu_wall, fu_kernel (fraction of
    the dtype's peak, as printed - FlagPerf's own utilisation); time_wall_s, time_kernel_s (per op);
    sys_avg_power_w, sys_max_power_w (node); gpu_avg_power_w, gpu_max_power_w, gpu_power_std_w;
    gpu_avg_temp_c; config (generic case config), config_nvidia (nvidia override); iters (effective
    iteration count: override, else generic); source_path; line.
    """

    op: str
    dtype: str
    impl: str
    flops_wall: float
    flops_kernel: float
    fu_wall: float
    fu_kernel: float
    time_wall_s: float
    time_kernel_s: float
    sys_avg_power_w: float
    sys_max_power_w: float
    gpu_avg_power_w: float
    gpu_max_power_w: float
    gpu_power_std_w: float
    gpu_avg_temp_c: float
    config: dict
    config_nvidia: dict
    iters: int
    source_path: str
    line: int

    @property
    def duration_s(self):
        """Measured-loop length, s: effective iterations x wall-clock time per op (warm-up excluded)."""
        return self.iters * self.time_wall_s


_OP_COLUMNS = ("op", "dtype", "impl", "TFLOPS_cpu_wall", "TFLOPS_kernel", "FU_cputime", "FU_kerneltime", "cputime",
               "kerneltime", "sys_avg_power_W", "sys_max_power_W", "gpu_avg_power_W", "gpu_max_power_W",
               "gpu_power_std_W", "gpu_avg_temp_C")


def read_flagperf_operator_csv(path, strict=True):
    """Parse ``flagperf_a100_operator_bench_power_temp.csv``.

    Args:
        path: CSV file (``#`` source-header lines skipped).
        strict: raise :class:`FlagPerfParseError` after the whole file if any row was bad.
    Returns:
        list of :class:`OperatorRow` in file order.
    Raises:
        FlagPerfParseError: (strict) rows with a missing field or an unparsable value (file:line).
        ValueError: the header lacks one of the expected columns.
    """
    path = Path(path)
    numbered = [(i, ln) for i, ln in enumerate(read_text(path).splitlines(), start=1)
                if ln.strip() and not ln.lstrip().startswith("#")]
    recs = list(csv.reader(ln for _, ln in numbered))
    head = recs[0]
    missing = [c for c in _OP_COLUMNS if c not in head]
    if missing:
        raise ValueError(f"{path}:{numbered[0][0]}: FlagPerf operator header lacks {missing}")
    ix = {c: head.index(c) for c in head}
    cfg_col = next(c for c in head if c.startswith("case_config"))
    rows, errors = [], []
    units = dict(TFLOPS_cpu_wall={"TFLOPS"}, TFLOPS_kernel={"TFLOPS"}, FU_cputime={"%"}, FU_kerneltime={"%"},
                 cputime={"us"}, kerneltime={"us"}, sys_avg_power_W={"W", ""}, sys_max_power_W={"W", ""},
                 gpu_avg_power_W={"W", ""}, gpu_max_power_W={"W", ""}, gpu_power_std_W={"W", ""},
                 gpu_avg_temp_C={"°C", "C", ""})
    for (lineno, raw), rec in zip(numbered[1:], recs[1:]):
        where = f"{path}:{lineno}"
        if len(rec) != len(head):
            errors.append(f"{where}: {len(rec)} fields, expected {len(head)}")
            continue
        try:
            v = {c: flagperf_quantity(rec[ix[c]], units[c]) for c in units}
            if any(x is None for x in v.values()):
                raise ValueError(f"empty field(s) {[c for c, x in v.items() if x is None]}")
            gen, nv = _config(rec[ix[cfg_col]])
            iters = nv.get("ITERS", gen.get("ITERS"))
            if not iters:
                raise ValueError("no ITERS in the case config")
            rows.append(OperatorRow(rec[ix["op"]], rec[ix["dtype"]], rec[ix["impl"]], v["TFLOPS_cpu_wall"],
                                    v["TFLOPS_kernel"], v["FU_cputime"], v["FU_kerneltime"], v["cputime"],
                                    v["kerneltime"], v["sys_avg_power_W"], v["sys_max_power_W"],
                                    v["gpu_avg_power_W"], v["gpu_max_power_W"], v["gpu_power_std_W"],
                                    v["gpu_avg_temp_C"], gen, nv, int(iters),
                                    rec[ix["source_path"]] if "source_path" in ix else "", lineno))
        except ValueError as e:
            errors.append(f"{where}: {e}")
    if strict and errors:
        raise FlagPerfParseError(errors, rows)
    return rows


@dataclass
class BaseBenchmark:
    """One FlagPerf base toolkit / benchmark README (one ``## FILE:`` section).

    Attributes:
        source: FlagPerf path (``base/toolkits/computation-BF16/nvidia/A100/README.md``).
        suite: ``"toolkits"`` (vendor CUDA/C++ tool) or ``"benchmarks"`` (PyTorch).
        test: e.g. ``"computation-BF16"``, ``"main_memory-bandwidth"``, ``"interconnect-MPI_intraserver"``.
        products: product models listed (``["A100-40GiB-SXM"]``; two for mixed 2-server runs).
        servers, gpus_per_server: counts as printed (None if absent).
        results: list of dicts ``{label, measured, spec, ratio}`` from the core-result tables
            (SI: FLOP/s, B/s; ratio a fraction; None where printed ``/``).
        gpu_avg_power_w, gpu_max_power_w, gpu_power_std_w, gpu_tdp_w, sys_avg_power_w, sys_max_power_w:
            power monitoring (None where the README has no power table).
        gpu_avg_temp_c: per-GPU average temperature (None if absent).
        line: 1-based line of the ``## FILE:`` marker.
    """

    source: str
    suite: str
    test: str
    products: list = field(default_factory=list)
    servers: int = None
    gpus_per_server: int = None
    results: list = field(default_factory=list)
    gpu_avg_power_w: float = None
    gpu_max_power_w: float = None
    gpu_power_std_w: float = None
    gpu_tdp_w: float = None
    sys_avg_power_w: float = None
    sys_max_power_w: float = None
    gpu_avg_temp_c: float = None
    line: int = 0

    @property
    def n_gpus(self):
        """GPUs in the run: servers x GPUs per server (1 if not stated)."""
        return (self.servers or 1) * (self.gpus_per_server or 1)


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _md_value(text):
    """FlagPerf markdown value: like :func:`flagperf_quantity` but tolerant of ``39.18GiB(42.07GB)``."""
    s = text.strip()
    if re.match(r"^[0-9.]+\s*GiB", s):
        return float(re.match(r"^([0-9.]+)", s).group(1)) * 2.0 ** 30
    return flagperf_quantity(s.replace("GB/s", "GB/s"))


def read_flagperf_base_md(path):
    """Parse the concatenated FlagPerf base READMEs.

    Args:
        path: ``flagperf_a100_base_gemm_membw_nccl_with_power_temp.md``.
    Returns:
        list of :class:`BaseBenchmark` in file order.
    Raises:
        ValueError: a table row in a result / power / temperature table has an unparsable value
            (message names the file and line).
    """
    path = Path(path)
    out, cur, header = [], None, None
    for lineno, raw in enumerate(read_text(path).splitlines(), start=1):
        s = raw.strip()
        m = re.match(r"^## FILE:\s*(base/(toolkits|benchmarks)/([^/]+)/\S+)", s)
        if m:
            cur = BaseBenchmark(source=m.group(1), suite=m.group(2), test=m.group(3), line=lineno)
            out.append(cur)
            header = None
            continue
        if cur is None:
            continue
        mm = re.match(r"^[*-]\s*产品型号[：:]\s*(\S+)", s)
        if mm:
            cur.products.append(mm.group(1))
        mm = re.match(r"^[*-]\s*服务器数量[：:]\s*(\d+)", s)
        if mm:
            cur.servers = int(mm.group(1))
        mm = re.match(r"^[*-]\s*单服务器内使用卡数[：:]\s*(\d+)", s)
        if mm and cur.gpus_per_server is None:
            cur.gpus_per_server = int(mm.group(1))
        if not s.startswith("|"):
            header = None
            continue
        cells = _cells(s)
        if header is None:
            header = cells
            continue
        if all(re.fullmatch(r"[-:\s]*", c) for c in cells):
            continue
        try:
            if cells[0] == "评测结果" and any("测试值" in h for h in header):
                im = next(i for i, h in enumerate(header) if "测试值" in h)
                isp = next((i for i, h in enumerate(header) if "标定值" in h), None)
                ir = next((i for i, h in enumerate(header) if "比例" in h), None)
                cur.results.append(dict(label=header[im], measured=_md_value(cells[im]),
                                        spec=_md_value(cells[isp]) if isp is not None else None,
                                        ratio=flagperf_quantity(cells[ir]) if ir is not None else None))
            elif cells[0] == "监控结果":
                for h, c in zip(header, cells):
                    key = {"单卡平均功耗": "gpu_avg_power_w", "单卡最大功耗": "gpu_max_power_w",
                           "单卡功耗标准差": "gpu_power_std_w", "单卡TDP": "gpu_tdp_w",
                           "系统平均功耗": "sys_avg_power_w", "系统最大功耗": "sys_max_power_w",
                           "单卡平均温度": "gpu_avg_temp_c"}
                    k = next((v for kk, v in key.items() if h.startswith(kk)), None)
                    if k:
                        setattr(cur, k, flagperf_quantity(c))
        except (ValueError, StopIteration) as e:
            raise ValueError(f"{path}:{lineno}: {e}: {raw!r}") from None
    return out
