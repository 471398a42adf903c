"""The one registry of measurement formats: how each is recognised, read and turned into what its users need.

Every format the project reads has one :class:`Format` entry in :data:`REGISTRY` (in the order of
:data:`FORMATS`, then the formats that are never detected).  Adding a format is one reader file (with
its ``detect`` function when it can be recognised by content) and one entry here.  Users dispatch
through the registry, never on format names of their own:

* :func:`detect_format` looks at the first lines of a file (never at its extension) and returns the
  name of the first entry, by ``rank``, whose ``detect`` says yes;
* :func:`read_measurement` reads a detected file in non-strict mode, so every good row is kept and every
  bad line comes back as a ``"FILE:LINE: reason"`` warning, and raises :class:`NoUsableDataError` (a
  :class:`costmodel.errors.ReaderParseError`) naming the file when nothing usable remains;
* :func:`read_power_trace` reads a file as one :class:`~costmodel.readers.power_trace.PowerTrace`
  (``costmodel compare --power``); ``to_fit_input`` tells ``costmodel calibrate fit``
  (:func:`costmodel.fit.measurements.load_measurements`) what a file contributes to a fit.

What identifies each detected format (the ``detect`` function of its reader; sources in the readers'
docstrings), in detection order:

* ``suite-jsonl``: the first non-blank line is a JSON object with ``"suite": "costmodel-calibration"``
  (:mod:`costmodel.readers.suite_jsonl`).
* ``dcgmi-dmon``: a ``#Entity`` header line (DCGM ``dcgmi dmon``).
* ``nvidia-smi-dmon``: a ``# gpu ...`` (or ``#Date Time gpu ...``) header line followed by a
  ``# Idx ...`` (``#YYYYMMDD HH:MM:SS Idx ...``) unit line (``nvidia-smi dmon``).
* ``nccl-tests``: a ``#  size  count  type`` table header, a ``# nThread`` parameter line, a
  ``# Collective test starting`` line or a ``#  Rank  0 ...`` device line (NVIDIA nccl-tests).
* ``zeus-csv``: the Zeus ``summary_power_<gpu>.csv`` header.
* ``nvidia-smi-q``: the ``==============NVSMI LOG==============`` banner of ``nvidia-smi -q``
  (:mod:`costmodel.readers.nvidia_smi_q`; both the ``Clocks Throttle Reasons`` and ``Clocks Event
  Reasons`` namings).
* ``nvidia-smi-csv``: a comma-separated header of ``nvidia-smi --query-gpu`` field names, optionally
  with ``[unit]``, at least one of them dotted (``power.draw [W]``) or ``timestamp``.

The published tables the built-in profiles are fitted from (``python -m costmodel.fit.builtin``) and
the training logs of ``costmodel compare --log`` are registered too, without ``detect``: their reader
is chosen by name.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from costmodel.errors import InputError, NoUsableDataError, ReaderParseError

from . import amd_smi, dcgm, flagperf, markdown, nccl_tests, nvidia_smi, nvidia_smi_q, rocm_smi, suite_jsonl, xla, zeus
from .power_trace import (PowerTrace, power_trace_from_dcgmi, power_trace_from_dmon, power_trace_from_nvidia_smi_csv,
                          power_trace_from_nvidia_smi_q, power_trace_from_suite)
from .training_logs import read_training_log
from ..files import open_text

_SCAN_LINES = 400
# launchers' rank prefixes, pdsh's host ("worker-0:", "node-a17:0:") and a collector's RFC 3339 time
# (costmodel.readers.training_logs.lines strips the same)
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:|[A-Za-z][\w.]*[-\d][\w.-]*:(?=[\s\d])(?:\d+:)?"
                     r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)(?=\s))\s?")


class Head(NamedTuple):
    """The start of a file as the ``detect`` functions see it.

    Attributes:
        lines: the first 400 non-blank lines, stripped.
        first: the first of them that does not start with ``#`` (``""`` when none).
        unprefixed: ``lines`` with a launcher rank prefix (``[1,0]<stdout>:``, ``0:``) removed.
    """

    lines: list
    first: str
    unprefixed: list


class FitInput(NamedTuple):
    """One thing a file gives a profile fit: ``kind`` ``"suite"`` (:class:`~costmodel.readers.suite_jsonl.SuiteRun`),
    ``"nccl"`` (:class:`~costmodel.readers.nccl_tests.NcclTable`) or ``"trace"``
    (:class:`~costmodel.readers.power_trace.PowerTrace`), and the ``data``."""

    kind: str
    data: Any


def _no_notes(path, data):
    return []


@dataclass(frozen=True)
class Format:
    """One measurement format.

    Attributes:
        name: the format's name (``Measurement.format``).
        read: ``read(path, **options) -> data``; for detected formats non-strict (every good row kept,
            the bad lines in ``data.errors``) and without options.
        detect: ``detect(head: Head) -> bool``, or None for a format chosen by name, never detected.
        rank: detection order among the detected formats (lower first).
        rows: number of usable rows in what ``read`` returned.
        notes: ``notes(path, data) -> [warning, ...]`` beyond the bad lines (read with rows only).
        to_power_trace: ``to_power_trace(data, gpus_per_node=None) -> (PowerTrace, notes)`` for the
            formats that hold power/temperature samples; ``gpus_per_node`` numbers the rows of a
            capture that does not name its GPUs.
        trace_is_data: :func:`read_measurement` returns the PowerTrace (monitor captures) rather than
            what ``read`` returned (whose table stays in ``PowerTrace.table``).
        to_fit_input: ``to_fit_input(data, path) -> ([FitInput, ...], notes)``: what ``costmodel
            calibrate fit`` takes from the file; None when it takes nothing.
        options: names of the options ``read`` needs (formats read by name).
        vendor: the GPU vendor a monitor format's tool reads (``nvidia``, ``amd``), checked against the
            cluster's GPU (costmodel.trace_window.capture_gpu_check); None for the others.
    """

    name: str
    read: Callable[..., Any]
    detect: Callable[[Head], bool] | None = None
    rank: int = 0
    rows: Callable[[Any], int] = len
    notes: Callable[[Path, Any], list] = _no_notes
    to_power_trace: Callable[..., tuple] | None = None
    trace_is_data: bool = False
    to_fit_input: Callable[[Any, Path], tuple] | None = None
    options: tuple = ()
    vendor: str | None = None


# ------------------------------------------------------------------------------- format adapters
def _suite_notes(path, run):
    return [] if run.complete else [f"{path}: no 'end' record: the suite run was cut short"]


def _suite_fit(run, path):
    out = [FitInput("suite", run)]
    if run["sample"]:
        out.append(FitInput("trace", power_trace_from_suite(run)))
    return out, []


def _nccl_notes(path, table):
    """Notes on rows left out for ``#wrong`` > 0, and on a capture whose sizes stop short of its maxBytes.

    Raises:
        InputError: a test nccl-tests declared FAILED (its out-of-bounds trailer) with no row showing
            which sizes failed: the rows cannot be told apart from the broken ones (an edited capture)."""
    m = table.meta
    if m.get("failed_lines") and not m["wrong_lines"]:
        raise InputError(str(path), f"line {m['failed_lines'][0]}", "nccl-tests declares the test FAILED (out-of-bounds "
                         "values) but no row's #wrong column says which sizes: the capture is edited or cut; rerun it")
    notes = [f"{path}:{ln}: #wrong > 0: nccl-tests found corrupted results at this size; left out (its time is suspect)"
             for ln in m["wrong_lines"]]
    top, largest = (m.get("params") or {}).get("maxBytes"), max((r.size_bytes for r in table.rows), default=0)
    if top and largest and largest < top / 1.5:
        # nccl-tests runs every size up to its maxBytes (one step short at most, from alignment)
        notes.append(f"{path}: the sizes stop at {largest:,} B of the {top:,} B its maxBytes asks for: a cut capture "
                     "(no closing '# Avg bus bandwidth' line?); the larger sizes are not measured")
    return notes


def _rows_per_sample(t) -> int | None:
    """Rows of one sampling instant of a capture that prints every GPU of a sample milliseconds apart
    and the samples a sampling interval apart (``nvidia-smi -lms``): the rows over the gaps longer than
    a quarter of the sampling interval (the 99th percentile of the spacings, at most 100 GPUs a
    sample), plus one; None when the times do not show such gaps."""
    import numpy as np
    t = np.asarray(t, dtype=float)
    if t.size < 4 or not np.isfinite(t).all():
        return None
    d = np.diff(t)
    interval = float(np.percentile(d, 99))
    gaps = int((d > 0.25 * interval).sum()) if interval > 0 else 0
    return round(t.size / (gaps + 1)) if gaps >= 2 else None


def _smi_csv_trace(table, gpus_per_node=None):
    """nvidia-smi CSV -> PowerTrace.  The one place where a capture without an ``index`` field gets its
    GPUs numbered: nvidia-smi prints the GPUs of a sample in index order, so with ``gpus_per_node`` the
    rows of each sample are GPUs 0..gpus_per_node-1; without it every row is GPU 0."""
    if "index" in table.fields or not len(table):
        return power_trace_from_nvidia_smi_csv(table), []
    if gpus_per_node:
        trace = power_trace_from_nvidia_smi_csv(table.path, n_gpus=gpus_per_node, strict=False)
        notes = [f"{table.path}: no 'index' field: the rows of each sample are taken as GPUs 0..{gpus_per_node - 1} in order"]
        seen = _rows_per_sample(trace.t_unix)
        if seen and seen != gpus_per_node:
            notes.append(f"{table.path}: its timestamps group the rows {seen} at a time, not {gpus_per_node}: if the "
                         f"capture holds {seen} GPUs, pass --gpus-per-node {seen}")
        return trace, notes
    return power_trace_from_nvidia_smi_csv(table), [
        f"{table.path}: no 'index' field: every row is given GPU 0 (give the GPUs per node, e.g. "
        "--gpus-per-node, to number the rows of each sample)"]


def _dmon_trace(table, gpus_per_node=None):
    return power_trace_from_dmon(table), []


def _dcgmi_trace(table, gpus_per_node=None):
    trace = power_trace_from_dcgmi(table)
    if len(table) and len(trace) == 0:
        return trace, [f"{table.path}: no 'GPU' entity rows ({', '.join(sorted(set(table.entity)))} only): the "
                       "power trace is empty (MIG instances report no power of their own: capture the GPU entities, dcgmi dmon -i 0,1,...)"]
    return trace, []


def _smi_q_trace(q, gpus_per_node=None):
    return power_trace_from_nvidia_smi_q(q), []


def _rocm_smi_trace(q, gpus_per_node=None):
    from .power_trace import power_trace_from_rocm_smi
    return power_trace_from_rocm_smi(q), []


def _amd_smi_trace(q, gpus_per_node=None):
    from .power_trace import power_trace_from_amd_smi
    return power_trace_from_amd_smi(q), []


def _suite_trace(run, gpus_per_node=None):
    return power_trace_from_suite(run), []


def _trace_fit(trace, path):
    return [FitInput("trace", trace)], []


def _nccl_fit(table, path):
    return [FitInput("nccl", table)], []


def _zeus_fit(table, path):
    return [], [f"{path}: Zeus power-limit summaries carry no per-sample trace: not used by this fit "
                "(python -m costmodel.fit.builtin fits gamma from them)"]


def _monitor(name, rank, detect, reader, to_trace, vendor):
    return Format(name, read=lambda p: reader(p, strict=False), detect=detect, rank=rank, to_power_trace=to_trace,
                  trace_is_data=True, to_fit_input=_trace_fit, vendor=vendor)


# ------------------------------------------------------------------------------------ the registry
REGISTRY = {f.name: f for f in (
    Format("suite-jsonl", read=lambda p: suite_jsonl.read_suite_jsonl(p, strict=False), detect=suite_jsonl.detect,
           rank=0, notes=_suite_notes, to_power_trace=_suite_trace, to_fit_input=_suite_fit),
    Format("nccl-tests", read=lambda p: nccl_tests.read_nccl_tests(p, strict=False), detect=nccl_tests.detect,
           rank=3, rows=lambda t: len(t.rows), notes=_nccl_notes, to_fit_input=_nccl_fit),
    _monitor("nvidia-smi-csv", 5, nvidia_smi.detect_csv, nvidia_smi.read_nvidia_smi_csv, _smi_csv_trace, "nvidia"),
    _monitor("nvidia-smi-dmon", 2, nvidia_smi.detect_dmon, nvidia_smi.read_nvidia_smi_dmon, _dmon_trace, "nvidia"),
    _monitor("dcgmi-dmon", 1, dcgm.detect, dcgm.read_dcgmi_dmon, _dcgmi_trace, "nvidia"),
    _monitor("nvidia-smi-q", 6, nvidia_smi_q.detect, nvidia_smi_q.read_nvidia_smi_q, _smi_q_trace, "nvidia"),
    _monitor("rocm-smi", 7, rocm_smi.detect, rocm_smi.read_rocm_smi, _rocm_smi_trace, "amd"),
    _monitor("amd-smi", 8, amd_smi.detect, amd_smi.read_amd_smi, _amd_smi_trace, "amd"),
    Format("zeus-csv", read=lambda p: zeus.read_zeus_csv(p, strict=False), detect=zeus.detect, rank=4,
           rows=lambda t: len(t.rows), to_fit_input=_zeus_fit),
    # chosen by name, never detected: training logs (costmodel compare --log) and the published tables of
    # the built-in profiles (costmodel.fit.builtin, which reads them strictly)
    Format("training-log", read=lambda p, **o: read_training_log(p, strict=False, **o),
           options=("warmup_steps", "framework", "rank")),
    Format("flagperf-operator-csv", read=lambda p: flagperf.read_flagperf_operator_csv(p, strict=False)),
    Format("flagperf-base-md", read=flagperf.read_flagperf_base_md),
    Format("nccl-tests-markdown", read=nccl_tests.read_massaged_nccl_table),
    Format("xla-matmul-csv", read=xla.read_xla_matmul_table, options=("gpu_arch", "column")),
    Format("xla-collective-csv", read=xla.read_xla_collective_table, options=("gpu_arch",)),
    Format("mamf-markdown", read=markdown.read_mamf),
    Format("azure-markdown", read=markdown.read_azure_results),
    Format("allreduce-bench-markdown", read=markdown.read_allreduce_bench),
    Format("mlengineering-nvls-markdown", read=markdown.read_mlengineering_nvls),
)}
#: the formats recognised by content, in the registry's order
FORMATS = tuple(name for name, f in REGISTRY.items() if f.detect is not None)


class Measurement(NamedTuple):
    """What :func:`read_measurement` returns (unpacks as ``fmt, data, warnings = ...``).

    Attributes:
        format: one of :data:`FORMATS`.
        data: ``suite-jsonl``: :class:`costmodel.readers.suite_jsonl.SuiteRun`; ``nccl-tests``:
            :class:`costmodel.readers.nccl_tests.NcclTable`; ``zeus-csv``:
            :class:`costmodel.readers.zeus.ZeusTable`; the monitor traces ``nvidia-smi-csv``,
            ``nvidia-smi-dmon`` and ``dcgmi-dmon``: a :class:`costmodel.readers.power_trace.PowerTrace`
            (no ``interval_s``; GPUs of an nvidia-smi CSV without ``index`` numbered by ``gpus_per_node``)
            whose ``.table`` is the reader's table (:class:`~costmodel.readers.nvidia_smi.SmiTrace`,
            :class:`~costmodel.readers.nvidia_smi.DmonTable`, :class:`~costmodel.readers.dcgm.DcgmTable`)
            with every column.
        warnings: ``"FILE:LINE: reason"`` for every skipped line, plus notes such as a run without its
            ``end`` record or nccl-tests rows whose ``#wrong`` is non-zero.
    """

    format: str
    data: Any
    warnings: list


def _head(path, limit=_SCAN_LINES) -> Head:
    lines = []
    with open_text(path, lenient=True) as fh:
        for raw in fh:
            s = raw.strip()
            if s:
                lines.append(s)
                if len(lines) >= limit:
                    break
    first = next((s for s in lines if not s.startswith("#")), "")
    return Head(lines, first, [_PREFIX.sub("", s, count=1).strip() for s in lines])


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
    head = _head(path)
    if not head.lines:
        raise _unknown(path, "the file is empty")
    for f in sorted((f for f in REGISTRY.values() if f.detect is not None), key=lambda f: f.rank):
        if f.detect(head):
            return f.name
    first = head.first or head.lines[0]
    with open(path, "rb") as fh:
        bom = fh.read(2)
    if bom in (b"\xff\xfe", b"\xfe\xff"):
        # PowerShell's '>' and some editors write UTF-16: every other byte NUL, read as binary otherwise
        raise _unknown(path, "UTF-16 text (PowerShell's '>' writes it): convert it to UTF-8 first "
                             "(iconv -f UTF-16 -t UTF-8, or Out-File -Encoding utf8)")
    if "\x00" in first or "\ufffd" in first or sum(not (c.isprintable() or c == "\t") for c in first) > len(first) // 10:
        raise _unknown(path, "a binary file, not a text capture")
    raise _unknown(path, f"unrecognised content (first line: {first[:80]!r}); power and temperature traces are "
                         "nvidia-smi, dcgmi, rocm-smi or amd-smi captures (or the suite's JSONL), GEMM, HBM and MoE "
                         "GEMM fits come from the calibration suite's JSONL only (costmodel calibrate run), "
                         "collectives from it or an nccl-tests log as the tool prints it")


def read_measurement(path, gpus_per_node=None) -> Measurement:
    """Detect the format of ``path`` and read it, keeping the good data (non-strict readers).

    Args:
        path: file (str or Path).
        gpus_per_node: GPUs of one sample of an nvidia-smi CSV without an ``index`` field (None: every
            row is GPU 0, and a warning says so).
    Returns:
        :class:`Measurement` ``(format, data, warnings)``; monitor traces come as a
        :class:`~costmodel.readers.power_trace.PowerTrace` (see :class:`Measurement`).
    Raises:
        NoUsableDataError: empty file, unknown format, a header without data rows, every data line
            bad, or a trace in a unit that cannot be converted; the message names the file and, for bad
            lines, lists them (``FILE:LINE: reason``).
        OSError: the file cannot be read.
    """
    path = Path(path)
    fmt = REGISTRY[detect_format(path)]
    try:
        data = fmt.read(path)
        n = fmt.rows(data)
        notes = fmt.notes(path, data) if n else []
        if n and fmt.trace_is_data:
            data, more = fmt.to_power_trace(data, gpus_per_node)
            notes += more
    except ReaderParseError:
        raise
    except ValueError as e:  # a reader's own header check, or a unit the converter cannot convert
        raise NoUsableDataError(path, f"read as {fmt.name}: {e}") from None
    errors = list(data.errors)
    if n == 0:
        why = f"read as {fmt.name}: " + (f"all {len(errors)} data lines are bad" if errors
                                          else "no data rows (header only?)")
        raise NoUsableDataError(path, why, errors, data)
    return Measurement(fmt.name, data, errors + notes)


def read_power_trace(path, gpus_per_node=None) -> Measurement:
    """Read a measurement file as one power/temperature trace.

    Returns:
        :class:`Measurement` whose ``data`` is a :class:`~costmodel.readers.power_trace.PowerTrace`, or
        None when the format holds no samples (e.g. nccl-tests output).
    Raises:
        as :func:`read_measurement`.
    """
    fmt, data, warnings = read_measurement(path, gpus_per_node)
    if not isinstance(data, PowerTrace):
        convert = REGISTRY[fmt].to_power_trace
        data, more = convert(data, gpus_per_node) if convert else (None, [])
        warnings = warnings + more
    return Measurement(fmt, data, warnings)
