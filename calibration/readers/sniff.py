"""Recognise a measurement file by its content and read it with the right reader.

:func:`detect_format` looks at the first lines of a file (never at its extension) and returns one of
:data:`FORMATS`; :func:`read_measurement` reads it in non-strict mode, so every good row is kept and
every bad line comes back as a ``"FILE:LINE: reason"`` warning, and raises
:class:`NoUsableDataError` (a :class:`costmodel.errors.ReaderParseError`) naming the file
when nothing usable remains.

What identifies each format (sources in the readers' docstrings):

* ``suite-jsonl``: the first non-blank line is a JSON object with ``"suite": "costmodel-calibration"``
  (:mod:`calibration.records`).
* ``dcgmi-dmon``: a ``#Entity`` header line (DCGM ``dcgmi dmon``).
* ``nvidia-smi-dmon``: a ``# gpu ...`` (or ``#Date Time gpu ...``) header line followed by a
  ``# Idx ...`` (``#YYYYMMDD HH:MM:SS Idx ...``) unit line (``nvidia-smi dmon``).
* ``nccl-tests``: a ``#  size  count  type`` table header, a ``# nThread`` parameter line, a
  ``# Collective test starting`` line or a ``#  Rank  0 ...`` device line (NVIDIA nccl-tests).
* ``zeus-csv``: the Zeus ``summary_power_<gpu>.csv`` header.
* ``nvidia-smi-csv``: a comma-separated header of ``nvidia-smi --query-gpu`` field names, optionally
  with ``[unit]``, at least one of them dotted (``power.draw [W]``) or ``timestamp``.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, NamedTuple

from costmodel.errors import NoUsableDataError, ReaderParseError

FORMATS = ("suite-jsonl", "nccl-tests", "nvidia-smi-csv", "nvidia-smi-dmon", "dcgmi-dmon", "zeus-csv")
_SCAN_LINES = 400
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:)\s?")
_DMON_HEAD = re.compile(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu\s+(?!pid\b)\S")
_DMON_UNITS = re.compile(r"^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx\b")
_NCCL = re.compile(r"^#\s*(?:size\s+count\s+type|nThread\s+\d|Collective test starting|Rank\s+\d+\s+(?:Group|Pid))")
_ZEUS = "dataset,network,batch_size,optimizer,power_limit,time_per_epoch,average_power"
_SMI_CELL = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*(?:\s*\[[^\]]*\])?$")


class Measurement(NamedTuple):
    """What :func:`read_measurement` returns (unpacks as ``fmt, data, warnings = ...``).

    Attributes:
        format: one of :data:`FORMATS`.
        data: ``suite-jsonl``: :class:`calibration.records.SuiteRun`; ``nccl-tests``:
            :class:`calibration.readers.nccl_tests.NcclTable`; ``zeus-csv``:
            :class:`calibration.readers.zeus.ZeusTable`; the monitor traces ``nvidia-smi-csv``,
            ``nvidia-smi-dmon`` and ``dcgmi-dmon``: a :class:`calibration.readers.power_trace.PowerTrace`
            (default conversion: no ``n_gpus``, no ``interval_s``) whose ``.table`` is the reader's table
            (:class:`~calibration.readers.nvidia_smi.SmiTrace`, :class:`~calibration.readers.nvidia_smi.DmonTable`,
            :class:`~calibration.readers.dcgm.DcgmTable`) with every column.
        warnings: ``"FILE:LINE: reason"`` for every skipped line, plus notes such as a run without its
            ``end`` record or nccl-tests rows whose ``#wrong`` is non-zero.
    """

    format: str
    data: Any
    warnings: list


def _lines(path, limit=_SCAN_LINES):
    out = []
    with open(path, errors="replace") as fh:
        for raw in fh:
            s = raw.strip()
            if s:
                out.append(s)
                if len(out) >= limit:
                    break
    return out


def _unknown(path, why):
    return NoUsableDataError(path, f"{why}; formats this reader knows: {', '.join(FORMATS)}")


def detect_format(path) -> str:
    """The format of a measurement file, from its content.

    Args:
        path: file (str or Path).
    Returns:
        one of :data:`FORMATS`.
    Raises:
        NoUsableDataError: the file is empty (or blank) or matches no known format; the message names
            the file and lists the known formats.
        OSError: the file cannot be read.
    """
    path = Path(path)
    lines = _lines(path)
    if not lines:
        raise _unknown(path, "the file is empty")
    first = next((s for s in lines if not s.startswith("#")), "")
    if first.startswith("{"):
        try:
            rec = json.loads(first)
        except json.JSONDecodeError:
            rec = None
        if isinstance(rec, dict) and rec.get("suite") == "costmodel-calibration":
            return "suite-jsonl"
    stripped = [_PREFIX.sub("", s, count=1).strip() for s in lines]
    if any(re.match(r"#\s*Entity\b", s) for s in stripped):
        return "dcgmi-dmon"
    for a, b in zip(stripped, stripped[1:]):
        if _DMON_HEAD.match(a) and _DMON_UNITS.match(b):
            return "nvidia-smi-dmon"
    if any(_NCCL.match(s) for s in stripped):
        return "nccl-tests"
    if first.replace(" ", "") == _ZEUS:
        return "zeus-csv"
    cells = [c.strip() for c in first.split(",")]
    if len(cells) >= 2 and all(_SMI_CELL.match(c) for c in cells) and \
            any("." in c.split()[0] or c.split()[0] == "timestamp" for c in cells):
        return "nvidia-smi-csv"
    raise _unknown(path, f"unrecognised content (first line: {(first or lines[0])[:80]!r})")


def read_measurement(path) -> Measurement:
    """Detect the format of ``path`` and read it, keeping the good data (non-strict readers).

    Args:
        path: file (str or Path).
    Returns:
        :class:`Measurement` ``(format, data, warnings)``; monitor traces come as a
        :class:`~calibration.readers.power_trace.PowerTrace` (see :class:`Measurement`).
    Raises:
        NoUsableDataError: empty file, unknown format, a header without data rows, every data line
            bad, or a trace in a unit that cannot be converted; the message names the file and, for bad
            lines, lists them (``FILE:LINE: reason``).
        OSError: the file cannot be read.
    """
    from ..records import read_suite_jsonl
    from .dcgm import read_dcgmi_dmon
    from .nccl_tests import read_nccl_tests
    from .nvidia_smi import read_nvidia_smi_csv, read_nvidia_smi_dmon
    from .power_trace import power_trace_from_dcgmi, power_trace_from_dmon, power_trace_from_nvidia_smi_csv
    from .zeus import read_zeus_csv

    path = Path(path)
    fmt = detect_format(path)
    warnings = []
    try:
        if fmt == "suite-jsonl":
            data = read_suite_jsonl(path, strict=False)
            n = len(data)
            if n and not data.complete:
                warnings.append(f"{path}: no 'end' record: the suite run was cut short")
        elif fmt == "nccl-tests":
            data = read_nccl_tests(path, strict=False)
            n = len(data.rows)
            warnings += [f"{path}:{ln}: #wrong > 0: nccl-tests found corrupted results at this size; its time is "
                         f"suspect" for ln in data.meta["wrong_lines"]]
        elif fmt == "zeus-csv":
            data = read_zeus_csv(path, strict=False)
            n = len(data.rows)
        else:
            reader, convert = {"nvidia-smi-csv": (read_nvidia_smi_csv, power_trace_from_nvidia_smi_csv),
                               "nvidia-smi-dmon": (read_nvidia_smi_dmon, power_trace_from_dmon),
                               "dcgmi-dmon": (read_dcgmi_dmon, power_trace_from_dcgmi)}[fmt]
            table = reader(path, strict=False)
            n = len(table)
            data = convert(table) if n else table
            if n and fmt == "nvidia-smi-csv" and "index" not in table.columns:
                warnings.append(f"{path}: no 'index' field: every row is given GPU 0 (convert with "
                                f"power_trace_from_nvidia_smi_csv(path, n_gpus=...) to number the GPUs of a sample)")
            if n and fmt == "dcgmi-dmon" and len(data) == 0:
                warnings.append(f"{path}: no 'GPU' entity rows ({', '.join(sorted(set(table.entity)))} only): "
                                f"the power trace is empty; the field values are in .table")
    except ReaderParseError:
        raise
    except ValueError as e:  # a reader's own header check, or a unit the converter cannot convert
        raise NoUsableDataError(path, f"read as {fmt}: {e}") from None
    errors = list(data.errors)
    if n == 0:
        why = f"read as {fmt}: " + (f"all {len(errors)} data lines are bad" if errors
                                     else "no data rows (header only?)")
        raise NoUsableDataError(path, why, errors, data)
    return Measurement(fmt, data, errors + warnings)
