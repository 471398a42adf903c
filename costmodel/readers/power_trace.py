"""One normalised power / temperature / clock trace from any monitor format.

:class:`PowerTrace` holds one entry per sample of one GPU (numpy arrays of equal length) in SI-style
units with the unit in the name (DESIGN.md "Conventions"): ``power_w`` (W), ``temp_c`` and
``mem_temp_c`` (degrees C), ``sm_clock_mhz`` (MHz), ``util_gpu_pct`` (%), NaN where the format has no
value.  Time is ``t_unix``: absolute Unix seconds when the format records wall-clock time
(``absolute_time=True``), else seconds from the first sample (or the sample number when the capture
has no time at all and no interval is given; ``absolute_time=False``).

Converters, one per format (each takes the parsed table or a path):

* :func:`power_trace_from_nvidia_smi_csv` -- ``nvidia-smi --query-gpu=... --format=csv`` (fields
  ``power.draw``, ``temperature.gpu``, ``temperature.memory``, ``clocks.sm`` / ``clocks.current.sm``,
  ``utilization.gpu``; ``nvidia-smi --help-query-gpu``).  The header's units are checked and
  converted (``[W]``/``[mW]``/``[kW]``, ``[MHz]``/``[GHz]``; a ``nounits`` header is taken in nvidia-smi's
  own units W, C, MHz, %); a value whose unit contradicts its header (``0.07 kW`` in a ``[W]`` column)
  is rejected line by line by the reader.
* :func:`power_trace_from_dmon` -- ``nvidia-smi dmon`` (``pwr`` W, ``gtemp``/``temp`` C, ``mtemp`` C,
  ``pclk`` MHz (the graphics/SM clock), ``sm`` %; nvidia-smi(1) "Device Monitoring").
* :func:`power_trace_from_dcgmi` -- ``dcgmi dmon`` (fields 155 POWER W, 150 TMPTR C, 140 MMTMP C,
  100 SMCLK MHz, 203 GPUTL %; dcgm_fields.h), GPU entities only.
* :func:`power_trace_from_nvidia_smi_q` -- ``nvidia-smi -q`` snapshots (one sample per GPU per
  snapshot: Power Draw W, GPU Current Temp C, SM clock MHz, Utilization Gpu %, the clock reasons).
* :func:`power_trace_from_suite` -- the calibration suite's ``sample`` records
  (:mod:`costmodel.readers.suite_jsonl`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .dcgm import DcgmTable, read_dcgmi_dmon
from .clock_events import reasons_of_mask, reasons_per_row
from .nvidia_smi_q import SmiQuery, column as q_column, read_nvidia_smi_q
from .nvidia_smi import DmonTable, SmiTrace, read_nvidia_smi_csv, read_nvidia_smi_dmon
from .suite_jsonl import SuiteRun, read_suite_jsonl

_ARRAYS = ("t_unix", "gpu", "power_w", "temp_c", "mem_temp_c", "sm_clock_mhz", "util_gpu_pct", "host", "lines")
# unit -> factor to the trace's unit
_POWER_UNITS = {"W": 1.0, "": 1.0, "mW": 1e-3, "kW": 1e3}
_CLOCK_UNITS = {"MHz": 1.0, "": 1.0, "GHz": 1e3, "kHz": 1e-3}
_TEMP_UNITS = {"C": 1.0, "": 1.0}
_PCT_UNITS = {"%": 1.0, "": 1.0}


#: readings no GPU gives: negative power, more than any package's limit (the largest catalog TDP is
#: 1,000 W, B200; 3,000 W leaves room for whole-board readings), temperatures a die cannot hold
_PHYSICAL = (("power_w", 0.0, 3000.0, "W"), ("temp_c", -40.0, 150.0, "C"), ("mem_temp_c", -40.0, 150.0, "C"),
             ("sm_clock_mhz", 0.0, 5000.0, "MHz"), ("util_gpu_pct", 0.0, 100.0, "%"))


@dataclass
class PowerTrace:
    """Samples of GPU power, temperature, SM clock and utilisation from one capture.

    Attributes (arrays have shape (n,), one entry per sample of one GPU, in file order):
        t_unix: float64 s; absolute Unix time when ``absolute_time`` else seconds from the start (or the
            sample number, see the converter).
        gpu: int64 GPU index (nvidia-smi index, dmon ``Idx``, DCGM GPU id, suite ``slot``).
        power_w: float64 board power, W.
        temp_c: float64 GPU (core) temperature, degrees C.
        mem_temp_c: float64 memory (HBM) temperature, degrees C.
        sm_clock_mhz: float64 SM clock, MHz.
        util_gpu_pct: float64 GPU utilisation (time a kernel ran), %.
        host: object array of host names (``""`` when the format does not name the host).
        lines: int64 1-based line of each sample in the source file (0 when not applicable).
        absolute_time: True when ``t_unix`` is wall-clock Unix time.
        source_format: ``"nvidia-smi-csv"``, ``"nvidia-smi-dmon"``, ``"dcgmi-dmon"``, ``"nvidia-smi-q"``,
            ``"rocm-smi"``, ``"amd-smi"`` or ``"suite-jsonl"``.
        path: the file read (None when built from an in-memory table without one).
        errors: ``"FILE:LINE: reason"`` of the lines the reader skipped.
        clock_events: per sample, the set of active clock-event (throttle) reason names
            (costmodel.readers.clock_events), or None when the capture has none.
        device_names: the distinct device names the capture prints (nvidia-smi -q 'Product Name', the
            query CSV's ``name`` column), in order of appearance; empty when it prints none.
        out_of_range: column -> (readings outside the physical range and set to NaN, readings given),
            the counts :func:`misread_units` judges a column's unit by.
        table: the parsed source (:class:`~costmodel.readers.nvidia_smi.SmiTrace`,
            :class:`~costmodel.readers.nvidia_smi.DmonTable`, :class:`~costmodel.readers.dcgm.DcgmTable`
            or :class:`~costmodel.readers.suite_jsonl.SuiteRun`) with every column of the capture, or None.
    NaN marks a value the format or the GPU did not report.
    """

    t_unix: np.ndarray
    gpu: np.ndarray
    power_w: np.ndarray
    temp_c: np.ndarray
    mem_temp_c: np.ndarray
    sm_clock_mhz: np.ndarray
    util_gpu_pct: np.ndarray
    source_format: str
    path: Path | None = None
    errors: list = field(default_factory=list)
    absolute_time: bool = False
    host: np.ndarray = None
    lines: np.ndarray = None
    table: Any = field(default=None, repr=False)
    clock_events: list | None = None
    device_names: tuple = ()
    out_of_range: dict = field(default_factory=dict)

    def __post_init__(self):
        n = len(self.t_unix)
        if self.host is None:
            self.host = np.array([""] * n, dtype=object)
        if self.lines is None:
            self.lines = np.zeros(n, dtype=np.int64)
        for a in _ARRAYS:
            if len(getattr(self, a)) != n:
                raise ValueError(f"PowerTrace.{a} has {len(getattr(self, a))} entries, t_unix has {n}")
        for a, lo, hi, unit in _PHYSICAL:
            v = np.asarray(getattr(self, a), dtype=np.float64)
            bad = np.isfinite(v) & ((v < lo) | (v > hi))
            if bad.any():
                self.out_of_range[a] = (int(bad.sum()), int(np.isfinite(v).sum()))
                setattr(self, a, np.where(bad, np.nan, v))
                where = ", ".join(f"{self.path}:{ln}" if ln else str(self.path) for ln in self.lines[bad][:3])
                self.errors.append(f"{where}: {int(bad.sum())} {a} reading(s) outside {lo:g}..{hi:g} {unit} "
                                   "(not a GPU reading; a wrong unit?): ignored")

    def __len__(self):
        return len(self.t_unix)

    def _take(self, idx):
        kw = {a: getattr(self, a)[idx] for a in _ARRAYS}
        return PowerTrace(source_format=self.source_format, path=self.path, errors=list(self.errors),
                          absolute_time=self.absolute_time, table=self.table, out_of_range=dict(self.out_of_range),
                          **kw)

    def per_gpu(self, by_host=False):
        """Split into one trace per GPU, each sorted by time.

        Args:
            by_host: key by ``(host, gpu)`` instead of ``gpu`` (needed when the trace spans hosts).
        Returns:
            dict ``gpu -> PowerTrace`` (or ``(host, gpu) -> PowerTrace``), keys sorted.
        Raises:
            ValueError: ``by_host`` is False but the trace has samples of more than one host (GPU indices
                would collide).
        """
        hosts = sorted({str(h) for h in self.host})
        if not by_host and len(hosts) > 1:
            raise ValueError(f"trace {self.path} spans hosts {hosts}: use per_gpu(by_host=True)")
        keys = [(str(h), int(g)) for h, g in zip(self.host, self.gpu)] if by_host else [int(g) for g in self.gpu]
        out = {}
        for k in sorted(set(keys)):
            idx = np.array([i for i, kk in enumerate(keys) if kk == k], dtype=np.int64)
            idx = idx[np.argsort(self.t_unix[idx], kind="stable")]
            out[k] = self._take(idx)
        return out

    def window(self, t0, t1):
        """Samples with ``t0 <= t_unix < t1`` (same time base as ``t_unix``), as a new trace."""
        return self._take(np.flatnonzero((self.t_unix >= t0) & (self.t_unix < t1)))


def _scaled(values, unit, table, what, path):
    if unit not in table:
        raise ValueError(f"{path}: {what} in unit [{unit}], expected one of "
                         f"{', '.join('[' + u + ']' for u in table if u)}")
    return np.asarray(values, dtype=np.float64) * table[unit]


def _nan(n):
    return np.full(n, np.nan)


def _coalesce(arrays, n):
    """First finite value across ``arrays`` (in priority order) per entry; NaN where none is finite."""
    out = _nan(n)
    for a in arrays:
        fill = np.isnan(out)
        out[fill] = a[fill]
    return out


def power_trace_from_nvidia_smi_csv(trace, n_gpus=None, strict=True) -> PowerTrace:
    """Power trace of an ``nvidia-smi --query-gpu=... --format=csv[,nounits]`` capture.

    Args:
        trace: :class:`costmodel.readers.nvidia_smi.SmiTrace` or a path (read with
            :func:`read_nvidia_smi_csv`).
        n_gpus: GPUs per sample when the capture has no ``index`` field (passed to the reader).
        strict: with a path, raise on bad lines (True) or keep the good ones and carry the errors (False).
    Returns:
        :class:`PowerTrace`; ``absolute_time`` when a ``timestamp`` field exists (``t_unix`` = the
        host's wall clock read as UTC), else ``t_unix`` = sample number (row // n_gpus).  Fields used:
        ``power.draw`` (else ``power.draw.average``, ``power.draw.instant``), ``temperature.gpu``,
        ``temperature.memory``, ``clocks.sm`` / ``clocks.current.sm``, ``utilization.gpu`` (when several
        fields of one quantity are present the first listed that has a value wins, entry by entry).
    Raises:
        NvidiaSmiParseError: (path, strict) bad lines, incl. a value with a unit other than its header's.
        ValueError: a header unit this converter cannot convert (e.g. power in ``[dBm]``), naming the file.
    Format source: ``nvidia-smi --help-query-gpu`` (https://docs.nvidia.com/deploy/nvidia-smi/index.html).
    """
    if not isinstance(trace, SmiTrace):
        trace = read_nvidia_smi_csv(trace, n_gpus=n_gpus, strict=strict)
    n = len(trace)
    path = trace.path

    def col(names, units, what):
        return _coalesce([_scaled(trace.columns[f], trace.units.get(f, ""), units, f"{what} ({f})", path)
                          for f in names if f in trace.columns], n)

    power = col(("power.draw", "power.draw.average", "power.draw.instant"), _POWER_UNITS, "power")
    trace.errors.extend(_missing_power(power, trace.lines, path))
    events = reasons_per_row(trace)          # before the errors are copied: an unreadable mask is one
    if "timestamp" in trace.columns and trace.t0_unix is not None:
        t, absolute = trace.columns["timestamp"] + trace.t0_unix, True
    else:
        per = int(n_gpus) if n_gpus else max(1, len(set(trace.gpu.tolist())) if n else 1)
        t, absolute = (np.arange(n) // per).astype(np.float64), False
    return PowerTrace(
        t_unix=np.asarray(t, dtype=np.float64), gpu=np.asarray(trace.gpu, dtype=np.int64),
        power_w=power,
        temp_c=col(("temperature.gpu",), _TEMP_UNITS, "temperature"),
        mem_temp_c=col(("temperature.memory",), _TEMP_UNITS, "memory temperature"),
        sm_clock_mhz=col(("clocks.sm", "clocks.current.sm"), _CLOCK_UNITS, "SM clock"),
        util_gpu_pct=col(("utilization.gpu",), _PCT_UNITS, "utilisation"),
        source_format="nvidia-smi-csv", path=path, errors=list(trace.errors), absolute_time=absolute,
        lines=np.asarray(trace.lines, dtype=np.int64), table=trace, clock_events=events,
        device_names=tuple(dict.fromkeys(v.strip() for v in (trace.text or {}).get("name") or [] if v and v.strip())))


def power_trace_from_dmon(table, interval_s=None, strict=True) -> PowerTrace:
    """Power trace of an ``nvidia-smi dmon`` capture.

    Args:
        table: :class:`costmodel.readers.nvidia_smi.DmonTable` or a path (read with
            :func:`read_nvidia_smi_dmon`).
        interval_s: sampling interval (``dmon -d``, seconds) for captures without a Date column.
        strict: with a path, raise on bad lines (True) or keep the good ones (False).
    Returns:
        :class:`PowerTrace`: ``absolute_time`` with ``-o DT`` (Date + Time, read as UTC); with ``-o T``
        only, seconds from the first sample (midnight wrap handled); otherwise ``sample *
        interval_s`` or, without ``interval_s``, the sample number.  Columns: ``pwr`` -> power_w,
        ``gtemp`` (``temp`` in older drivers; per row, so captures of both generations combine) -> temp_c,
        ``mtemp`` -> mem_temp_c, ``pclk`` -> sm_clock_mhz, ``sm`` -> util_gpu_pct; absent columns give NaN.
    Raises:
        NvidiaSmiDmonParseError: (path, strict) bad lines.
        ValueError: a column in a unit this converter cannot convert (e.g. ``pwr`` in ``[dBm]``).
    Format source: nvidia-smi(1) "Device Monitoring" (https://docs.nvidia.com/deploy/nvidia-smi/index.html).
    """
    if not isinstance(table, DmonTable):
        table = read_nvidia_smi_dmon(table, strict=strict)
    n = len(table)
    path = table.path

    def col(names, units, what):
        return _coalesce([_scaled(table.values[c], table.units.get(c, ""), units, f"{what} (dmon column {c})", path)
                          for c in names if c in table.values], n)

    if n and np.isfinite(table.t_unix).all():
        t, absolute = table.t_unix.copy(), True
    elif n and np.isfinite(table.time_of_day_s).all():
        tod = table.time_of_day_s
        days = np.concatenate([[0], np.cumsum(np.diff(tod) < 0)])  # a decrease = past midnight
        t, absolute = tod + 86400.0 * days - tod[0], False
    else:
        t, absolute = table.sample.astype(np.float64) * (float(interval_s) if interval_s else 1.0), False
    power = col(("pwr",), _POWER_UNITS, "power")
    return PowerTrace(
        t_unix=np.asarray(t, dtype=np.float64), gpu=table.gpu.copy(),
        power_w=power, temp_c=col(("gtemp", "temp"), _TEMP_UNITS, "temperature"),
        mem_temp_c=col(("mtemp",), _TEMP_UNITS, "memory temperature"),
        sm_clock_mhz=col(("pclk",), _CLOCK_UNITS, "SM clock"), util_gpu_pct=col(("sm",), _PCT_UNITS, "utilisation"),
        source_format="nvidia-smi-dmon", path=path,
        errors=list(table.errors) + _missing_power(power, table.lines, path), absolute_time=absolute,
        lines=table.lines.copy(), table=table)


def _missing_power(power, lines, path) -> list:
    """The note on rows without a power reading (nvidia-smi's [N/A], dmon's and dcgmi's N/A or '-'),
    counted with the first one's line, where some rows have one: they are left out of the power
    figures, never silently.  None where every row lacks it (the trace has no power at all, which
    its reader's caller reports)."""
    na = ~np.isfinite(power)
    if not na.any() or na.all():
        return []
    return [f"{path}:{int(np.asarray(lines)[na][0])}: {int(na.sum())} row(s) without a power reading (N/A), the "
            "first here: left out of the power figures"]


def power_trace_from_dcgmi(table, interval_s=None, strict=True) -> PowerTrace:
    """Power trace of a ``dcgmi dmon`` capture (rows of ``GPU`` entities; MIG and switch rows are left out).

    Args:
        table: :class:`costmodel.readers.dcgm.DcgmTable` or a path (read with :func:`read_dcgmi_dmon`).
        interval_s: sampling interval (``dcgmi dmon -d``, converted from ms to s by the caller); without
            it ``t_unix`` is the sample number (dcgmi prints no time).
        strict: with a path, raise on bad lines (True) or keep the good ones (False).
    Returns:
        :class:`PowerTrace` (``absolute_time`` False): POWER (155) W, TMPTR (150) C, MMTMP (140) C,
        SMCLK (100) MHz, GPUTL (203) %; absent fields give NaN.
    Raises:
        DcgmParseError: (path, strict) bad lines.
        ValueError: a field in a unit this converter cannot convert.
    Format source: https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-dmon.html
    """
    if not isinstance(table, DcgmTable):
        table = read_dcgmi_dmon(table, strict=strict)
    sel = np.flatnonzero(table.entity == "GPU") if len(table) else np.zeros(0, dtype=np.int64)
    n = len(sel)
    path = table.path

    def col(fid, units, what):
        try:
            v = table.column(fid)
        except KeyError:
            return _nan(n)
        short = next((s for s, i in table.field_ids.items() if i == fid), None)
        return _scaled(v[sel], table.units.get(short, ""), units, f"{what} (DCGM field {fid})", path)

    t = table.sample[sel].astype(np.float64) * (float(interval_s) if interval_s else 1.0)
    power = col(155, _POWER_UNITS, "power")
    return PowerTrace(
        t_unix=t, gpu=table.entity_id[sel].astype(np.int64),
        power_w=power, temp_c=col(150, _TEMP_UNITS, "temperature"),
        mem_temp_c=col(140, _TEMP_UNITS, "memory temperature"), sm_clock_mhz=col(100, _CLOCK_UNITS, "SM clock"),
        util_gpu_pct=col(203, _PCT_UNITS, "utilisation"), source_format="dcgmi-dmon", path=path,
        errors=list(table.errors) + _missing_power(power, table.lines[sel], path), absolute_time=False,
        lines=table.lines[sel].copy(), table=table,
        clock_events=_dcgm_reasons(table, sel))


def _dcgm_reasons(table, sel):
    """Per GPU row, the active reasons of DCGM field 112 (DCGM_FI_DEV_CLOCKS_EVENT_REASONS, formerly
    DCGM_FI_DEV_CLOCK_THROTTLE_REASONS: the NVML bit mask, dcgm_fields.h), or None without it."""
    try:
        v = table.column(112)
    except KeyError:
        return None
    out = []
    for x in v[sel]:
        m = int(x) if np.isfinite(x) else 0
        out.append(reasons_of_mask(m))
    return out


def power_trace_from_nvidia_smi_q(q, strict=True) -> PowerTrace:
    """Power trace of ``nvidia-smi -q`` snapshots (costmodel.readers.nvidia_smi_q).

    Args:
        q: :class:`~costmodel.readers.nvidia_smi_q.SmiQuery` or a path (read with
            :func:`~costmodel.readers.nvidia_smi_q.read_nvidia_smi_q`).
        strict: with a path, raise on bad lines (True) or keep the good ones (False).
    Returns:
        :class:`PowerTrace`, one sample per GPU per snapshot; ``absolute_time`` True when every
        snapshot has a Timestamp (read as UTC), else ``t_unix`` is the snapshot number.
    Raises:
        NvidiaSmiQParseError: (path, strict) bad lines.
    """
    if not isinstance(q, SmiQuery):
        q = read_nvidia_smi_q(q, strict=strict)
    stamps = [g["t_unix"] for g in q.gpus]
    absolute = bool(stamps) and all(t is not None for t in stamps)
    t = np.array([g["t_unix"] if absolute else g["snapshot"] for g in q.gpus], dtype=np.float64)
    reasons = [g["reasons"] for g in q.gpus]
    return PowerTrace(
        t_unix=t, gpu=np.array([g["index"] for g in q.gpus], dtype=np.int64),
        power_w=q_column(q, "power_w"), temp_c=q_column(q, "temp_c"), mem_temp_c=_nan(len(q)),
        sm_clock_mhz=q_column(q, "sm_clock_mhz"), util_gpu_pct=q_column(q, "util_gpu_pct"),
        source_format="nvidia-smi-q", path=q.path, errors=list(q.errors), absolute_time=absolute,
        lines=np.array([g["line"] for g in q.gpus], dtype=np.int64), table=q,
        clock_events=None if all(r is None for r in reasons) else [r or frozenset() for r in reasons],
        device_names=tuple(dict.fromkeys(g["name"] for g in q.gpus if g.get("name"))))


def power_trace_from_rocm_smi(q, strict=True) -> PowerTrace:
    """Power trace of ``rocm-smi`` snapshots (costmodel.readers.rocm_smi): one sample per GPU per
    snapshot, ``t_unix`` the snapshot number (rocm-smi prints no time); an MI250 package's power
    split evenly over its two GCDs (:func:`costmodel.readers.rocm_smi.per_gcd_power_w`); the
    temperature is the junction (hotspot) sensor.

    Args:
        q: :class:`~costmodel.readers.rocm_smi.RocmSmi` or a path.  strict: with a path, raise on bad lines.
    Raises:
        RocmSmiParseError: (path, strict) bad lines.
    """
    from .rocm_smi import RocmSmi, per_gcd_power_w, read_rocm_smi
    if not isinstance(q, RocmSmi):
        q = read_rocm_smi(q, strict=strict)
    col = lambda k: np.array([g[k] for g in q.gpus], dtype=np.float64)  # noqa: E731
    return PowerTrace(
        t_unix=col("snapshot"), gpu=np.array([g["index"] for g in q.gpus], dtype=np.int64), power_w=per_gcd_power_w(q),
        temp_c=col("temp_c"), mem_temp_c=_nan(len(q)), sm_clock_mhz=col("sclk_mhz"), util_gpu_pct=col("util_gpu_pct"),
        source_format="rocm-smi", path=q.path, errors=list(q.errors), absolute_time=False,
        lines=np.array([g["line"] for g in q.gpus], dtype=np.int64), table=q,
        device_names=tuple(dict.fromkeys(g["name"] for g in q.gpus if g["name"])))


def power_trace_from_amd_smi(q, strict=True) -> PowerTrace:
    """Power trace of ``amd-smi monitor`` / ``metric`` samples (costmodel.readers.amd_smi): one sample
    per GPU per sample, ``t_unix`` the sample number (amd-smi prints no time).

    Args:
        q: :class:`~costmodel.readers.amd_smi.AmdSmi` or a path.  strict: with a path, raise on bad lines.
    Raises:
        AmdSmiParseError: (path, strict) bad lines.
    """
    from .amd_smi import AmdSmi, AmdSmiParseError, read_amd_smi
    if not isinstance(q, AmdSmi):
        q = read_amd_smi(q, strict=strict)
    col = lambda k: np.array([g[k] for g in q.gpus], dtype=np.float64)  # noqa: E731
    bad = [f"{q.path}:{g['line']}: GPU index {g['index']} is not a device index" for g in q.gpus
           if not 0 <= g["index"] < 2 ** 31]
    if bad:                  # a damaged cell, not a GPU: numpy could not even hold it
        raise AmdSmiParseError(bad, q)
    return PowerTrace(
        t_unix=col("sample"), gpu=np.array([g["index"] for g in q.gpus], dtype=np.int64), power_w=col("power_w"),
        temp_c=col("temp_c"), mem_temp_c=_nan(len(q)), sm_clock_mhz=col("gfx_clock_mhz"), util_gpu_pct=col("util_gpu_pct"),
        source_format="amd-smi", path=q.path, errors=list(q.errors), absolute_time=False,
        lines=np.array([g["line"] for g in q.gpus], dtype=np.int64), table=q)


def power_trace_from_suite(run) -> PowerTrace:
    """Power trace of the calibration suite's ``sample`` records (one NVML/amdsmi sample of one GPU each).

    Args:
        run: :class:`costmodel.readers.suite_jsonl.SuiteRun` or a path (read with
            :func:`costmodel.readers.suite_jsonl.read_suite_jsonl`, non-strict: bad lines are carried in ``errors``).
    Returns:
        :class:`PowerTrace` (``absolute_time`` True: ``t_unix`` is the record's Unix time), sorted by
        time; ``gpu`` = the record's ``slot``, ``host`` = its host; null fields give NaN.
    Raises:
        ValueError: a sample record has a non-numeric value (the message names file and line).
    Format source: :mod:`costmodel.readers.suite_jsonl` (REQUIRED["sample"]).
    """
    if not isinstance(run, SuiteRun):
        run = read_suite_jsonl(run, strict=False)
    recs = sorted(run["sample"], key=lambda r: (r["t_unix"] if r["t_unix"] is not None else np.inf))

    def f(r, k):
        v = r.get(k)
        if v is None:
            return np.nan
        try:
            return float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{run.path}:{r.get('_line')}: sample field {k} is not a number: {v!r}") from None

    return PowerTrace(
        t_unix=np.array([f(r, "t_unix") for r in recs], dtype=np.float64),
        gpu=np.array([int(r["slot"]) for r in recs], dtype=np.int64),
        power_w=np.array([f(r, "power_w") for r in recs]), temp_c=np.array([f(r, "temp_c") for r in recs]),
        mem_temp_c=np.array([f(r, "mem_temp_c") for r in recs]),
        sm_clock_mhz=np.array([f(r, "sm_clock_mhz") for r in recs]),
        util_gpu_pct=np.array([f(r, "util_gpu_pct") for r in recs]),
        host=np.array([str(r.get("host", "")) for r in recs], dtype=object),
        lines=np.array([int(r.get("_line", 0)) for r in recs], dtype=np.int64),
        source_format="suite-jsonl", path=run.path, errors=list(run.errors), absolute_time=True, table=run)


#: share of a temperature column's readings outside -40..150 C above which the column is not in C:
#: a GPU's own sensor never reads there, so a few such readings are glitches and more are a unit
#: (degrees F: 34 C idle reads 93, 85 C under load 185)
MISREAD_TEMP_SHARE = 0.01


def misread_units(trace: PowerTrace, tdp_w: float, devices_per_package: int = 1) -> str | None:
    """Why the capture's power samples cannot be watts of a GPU of ``tdp_w`` (its package limit over
    ``devices_per_package`` devices), or its temperatures degrees C, or None when they can: more than
    :data:`MISREAD_TEMP_SHARE` of the temperature readings outside -40..150 C (the rest of such a
    column, read as C, would price the thermal model wrong), or that share of the power readings outside
    0..3000 W (set aside, they would leave the column empty or thinned); every power sample below 5 % of the TDP, which
    no GPU with a context open draws (an idle H100 draws 70 W of 700: kW written under a W header),
    or a 99th percentile above 1.25 x the TDP, which the power limiter does not let through (NVML's
    power.draw averages over its window, where the limiter holds the limit; the brief excursions it
    lets through stay off the 99th percentile): mW, or another GPU's capture (an H100's 590 W read as
    an A100's, whose limit is 400 W)."""
    for col in ("temp_c", "mem_temp_c"):
        bad, given = trace.out_of_range.get(col, (0, 0))
        if given and bad > MISREAD_TEMP_SHARE * given:
            return (f"{bad} of its {given} {col} readings lie outside -40..150 C: the column is not in degrees C "
                    "(degrees F?)")
    bad, given = trace.out_of_range.get("power_w", (0, 0))
    if given and bad > MISREAD_TEMP_SHARE * given:
        # set aside as no GPU's reading, they would leave the rest of the column (or none of it) to fit
        return (f"{bad} of its {given} power readings lie outside 0..3000 W, which no GPU draws: the column is not "
                "in watts (mW under a W header?)")
    p = trace.power_w[np.isfinite(trace.power_w)]
    if p.size == 0:
        return None
    limit = tdp_w / max(devices_per_package, 1)
    hi = float(np.percentile(p, 99))
    if float(p.max()) < 0.05 * limit:
        return (f"its power samples peak at {float(p.max()):.4g} W, below 5 % of the GPU's {limit:.0f} W limit: "
                "the column is not in watts (kW under a W header, or W under a mW one?)")
    if hi > 1.25 * limit:
        unit = " (mW under a W header?)" if hi > 100 * limit else ""
        return (f"its power samples reach {hi:.4g} W (99th percentile), above 1.25 x the GPU's {limit:.0f} W limit: "
                f"the column is not in watts{unit}, or the capture is of another GPU")
    return None

