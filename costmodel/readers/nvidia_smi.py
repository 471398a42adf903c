"""Reader for ``nvidia-smi --query-gpu=... --format=csv`` captures (power / utilisation traces).

Format (NVIDIA System Management Interface, ``nvidia-smi --help-query-gpu``; the sampling loop is
``-l SEC`` or ``-lms MS``): a header line naming each queried field with its unit in brackets,
``timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB]``, then one line per GPU per
sample, the GPUs of one sample in index order.  With ``--format=csv`` every value carries its unit
(``69.32 W``, ``0 %``, ``132 MiB``); with ``--format=csv,nounits`` it does not.  A field the GPU
does not report prints ``[N/A]``, ``N/A`` or ``[Not Supported]``, and newer drivers print any
other reason in brackets too (``[Requested functionality has been deprecated]``, ``[Unknown
Error]``): every bracketed value and an empty cell are read as NaN.  The timestamp is
``YYYY/MM/DD HH:MM:SS.mmm`` in the capture host's local time (no zone is printed).  Fields whose
values are words (``name``, ``pstate``, ``driver_version``, ``uuid``, ``pci.bus_id``, hex masks)
have no unit in the header; their values are kept as text (``SmiTrace.text``) and are NaN in
``columns``.  Lines starting with ``#`` (our copies' source header) are skipped, and so is a
repeated header line (captures concatenated by ``>>``).

``nvidia-smi dmon`` (:func:`read_nvidia_smi_dmon`) is the scrolling device monitor (nvidia-smi(1),
section "Device Monitoring"; ``nvidia-smi dmon -h``): two ``#`` header lines, the column names
(``# gpu   pwr  gtemp  mtemp    sm   mem   enc   dec  mclk  pclk``) and their units (``# Idx     W
C      C     %     %     %     %   MHz   MHz``), then one line per GPU per sample.  ``-s pucvmet``
selects the metric groups (p: power/temperature, u: utilisation, c: clocks, v: violations, m:
frame-buffer memory, e: ECC, t: PCIe throughput), so the columns vary; ``-o DT`` prepends
``#Date Time`` columns (``YYYYMMDD HH:MM:SS``, ``-o T`` only the time); ``-`` marks a value the GPU
does not report; the header repeats every screenful and whenever a new capture is appended.

Sources read with them: grantwilkins/training_profile power-trace_2025-07-26-23-32-09.csv (8x H100,
GPT-8B DDP training, 100 ms sampling), copied to
``hardware/profiles/data/h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv``; the nvidia-smi CSV
and dmon captures under ``tests/data/readers/`` (H100, A10, 4-GPU dmon; each names its source).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from costmodel.errors import InputError, NvidiaSmiDmonParseError, NvidiaSmiParseError
from ..files import read_text

_MISSING = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[gpu is lost]", ""}
# unit-less fields that are numbers: a word there is an error, not text (nvidia-smi --help-query-gpu)
_NUMERIC_NO_UNIT = {"index", "count", "temperature.gpu", "temperature.memory", "temperature.gpu.tlimit",
                    "pcie.link.gen.current", "pcie.link.gen.gpucurrent", "pcie.link.gen.max", "pcie.link.gen.gpumax",
                    "pcie.link.gen.hostmax", "pcie.link.width.current", "pcie.link.width.max"}
_HEAD = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_.]*)\s*(?:\[([^\]]*)\])?\s*$")
_VAL = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*([A-Za-z%/]*)\s*$")


@dataclass
class SmiTrace:
    """Parsed ``nvidia-smi --query-gpu`` CSV.

    Attributes:
        fields: query field names in file order (``"power.draw"``, ``"utilization.gpu"``, ...).
        units: field -> unit from the header bracket (``"W"``, ``"%"``, ``"MiB"``) or ``""``.
        columns: field -> float array (NaN where the GPU printed ``[N/A]`` / ``[Not Supported]``);
            the ``timestamp`` field is seconds since the first good row (float).
        gpu: GPU index of each row: the ``index`` column if queried, else the position of the row
            within its sample (``n_gpus`` rows per sample), else all zeros.
        lines: 1-based line number of each row in the file.
        errors: ``"FILE:LINE: reason"`` for every skipped line.
        text: field -> list of the raw strings of each row (None where missing), for the fields with
            word values (``name``, ``pstate``, ``uuid``, ...; their ``columns`` entry is NaN).
        t0_unix: Unix seconds of the first good row's timestamp (the capture host's wall clock read
            as UTC, since nvidia-smi prints no zone), None without a ``timestamp`` field.
        path: the file read.
    """

    fields: list = field(default_factory=list)
    units: dict = field(default_factory=dict)
    columns: dict = field(default_factory=dict)
    gpu: np.ndarray = None
    lines: np.ndarray = None
    errors: list = field(default_factory=list)
    text: dict = field(default_factory=dict)
    t0_unix: float | None = None
    path: Path | None = None

    def __len__(self):
        return 0 if self.lines is None else len(self.lines)

    def column(self, name):
        """Float array of field ``name`` (KeyError naming the available fields if absent)."""
        if name not in self.columns:
            raise KeyError(f"no field {name!r} in nvidia-smi CSV (fields: {self.fields})")
        return self.columns[name]


def _timestamp(s):
    """Unix seconds of an nvidia-smi timestamp, its wall clock read as UTC (no zone is printed)."""
    s = s.strip()
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(s, fmt).replace(tzinfo=timezone.utc).timestamp()
        except ValueError:
            continue
    raise ValueError(f"timestamp {s!r} is not YYYY/MM/DD HH:MM:SS[.fff]")


def _is_missing(t):
    t = t.strip()
    return t.lower() in _MISSING or (t.startswith("[") and t.endswith("]"))


def _value(s, unit, field_name=None):
    t = s.strip()
    if _is_missing(t):
        return float("nan")
    m = _VAL.match(t)
    if not m:
        raise ValueError(f"not a number{' in [' + unit + ']' if unit else ''}"
                         f"{' for ' + field_name if field_name else ''}: {s.strip()!r}")
    if m.group(2) and unit and m.group(2) != unit:
        raise ValueError(f"unit {m.group(2)!r} differs from the header's [{unit}]"
                         f"{' of ' + field_name if field_name else ''} (mixed units in one column; "
                         f"convert the capture to one unit): {s.strip()!r}")
    return float(m.group(1))


def _is_text_field(name, unit):
    return not unit and name not in _NUMERIC_NO_UNIT and name != "timestamp"


_SMI_CELL = re.compile(r"^[A-Za-z][A-Za-z0-9_.]*(?:\s*\[[^\]]*\])?$")


def detect_csv(head) -> bool:
    """True when the first non-``#`` line is a comma-separated header of ``--query-gpu`` field names,
    optionally with ``[unit]``, at least one of them dotted (``power.draw [W]``) or ``timestamp``
    (``head``: :class:`costmodel.readers.registry.Head`)."""
    cells = [c.strip() for c in head.first.split(",")]
    return len(cells) >= 2 and all(_SMI_CELL.match(c) for c in cells) and \
        any("." in c.split()[0] or c.split()[0] == "timestamp" for c in cells)


#: the query fields the traces read (costmodel.readers.power_trace.power_trace_from_smi): a header field
#: one typo away from one of them is a misspelling that would lose its column, not another field
READ_FIELDS = ("timestamp", "index", "name", "power.draw", "power.draw.average", "power.draw.instant",
               "temperature.gpu", "temperature.memory", "clocks.sm", "clocks.current.sm", "utilization.gpu",
               "clocks_event_reasons.active", "clocks_throttle_reasons.active")


def _check_field_names(fields, path, lineno) -> None:
    """Refuse a header field that is not one :data:`READ_FIELDS` names but is one edit from one
    (``power.drw``; costmodel.config_keys.one_edit_apart, the rule run configurations' keys follow),
    naming it and the field it misspells; other fields pass (nvidia-smi has many this model does not read).

    Raises:
        ValueError: naming the file, line and field.
    """
    from ..config_keys import one_edit_apart
    for f in fields:
        if f in READ_FIELDS or f.startswith(("clocks_event_reasons.", "clocks_throttle_reasons.")):
            continue
        near = [k for k in READ_FIELDS if one_edit_apart(f, k)]
        if near:
            raise ValueError(f"{path}:{lineno}: header field {f!r} is not an nvidia-smi query field; did you mean "
                             f"{near[0]!r}? (its column would be lost)")


def read_nvidia_smi_csv(path, n_gpus=None, strict=True) -> SmiTrace:
    """Parse an ``nvidia-smi --query-gpu=... --format=csv[,nounits]`` capture.

    Args:
        path: CSV file (str or Path).
        n_gpus: GPUs per sample when the capture has no ``index`` column (rows of one sample are
            consecutive, GPU 0 first); None leaves ``gpu`` at 0 unless an ``index`` column exists.
        strict: raise :class:`NvidiaSmiParseError` after reading the whole file if any line was bad
            (the exception carries the good rows); False returns them with ``errors`` filled.
    Returns:
        :class:`SmiTrace` (values in the header's units; timestamps in seconds from the first row,
        ``t0_unix`` the first row's absolute time; word-valued fields in ``text``).
    Raises:
        NvidiaSmiParseError: (strict) a line has the wrong number of fields, a non-numeric value in a
            numeric field, a unit that contradicts the header (``0.07 kW`` under ``power.draw [W]``) or a
            bad timestamp; the message names file and line of each.
        ValueError: no header line.
        OSError: the file cannot be read.
    Format source: ``nvidia-smi --help-query-gpu`` and nvidia-smi(1)
    (https://docs.nvidia.com/deploy/nvidia-smi/index.html).
    """
    path = Path(path)
    out = SmiTrace(path=path)
    rows, lines, pos, texts = [], [], [], []
    header_line = None
    n_data = 0  # data lines seen (good or bad): a bad line still occupies its GPU's place in a sample
    for lineno, raw in enumerate(read_text(path, lenient=True).splitlines(), start=1):
        s = raw.strip()
        if not s or s.startswith("#"):
            continue
        cells = [c.strip() for c in s.split(",")]
        if header_line is None:
            heads = [_HEAD.match(c) for c in cells]
            if not all(heads):
                raise ValueError(f"{path}:{lineno}: expected an nvidia-smi CSV header "
                                 f"('timestamp, power.draw [W], ...'), got {raw!r}")
            out.fields = [h.group(1) for h in heads]
            _check_field_names(out.fields, path, lineno)
            out.units = {h.group(1): (h.group(2) or "") for h in heads}
            header_line = s
            continue
        if s == header_line:
            continue
        where = f"{path}:{lineno}"
        n_data += 1
        if len(cells) != len(out.fields):
            out.errors.append(f"{where}: {len(cells)} fields, expected {len(out.fields)} "
                              f"({', '.join(out.fields)}): {raw!r}")
            continue
        try:
            vals, txt = [], {}
            for f, c in zip(out.fields, cells):
                if f == "timestamp":
                    vals.append(_timestamp(c))
                    continue
                try:
                    vals.append(_value(c, out.units[f], f))
                except ValueError:
                    if not _is_text_field(f, out.units[f]):
                        raise
                    vals.append(float("nan"))
                    txt[f] = c
        except ValueError as e:
            out.errors.append(f"{where}: {e}")
            continue
        rows.append(vals)
        texts.append(txt)
        lines.append(lineno)
        pos.append(n_data - 1)
    if header_line is None:
        raise ValueError(f"{path}: no nvidia-smi CSV header line")
    arr = np.array(rows, dtype=np.float64).reshape(len(rows), len(out.fields))
    for j, f in enumerate(out.fields):
        col = arr[:, j]
        if f == "timestamp" and len(col):
            out.t0_unix = float(col[0])
            col = col - col[0]
        out.columns[f] = col
    for f in out.fields:
        if any(f in t for t in texts):
            out.text[f] = [t.get(f) for t in texts]
    out.lines = np.array(lines, dtype=np.int64)
    if "index" in out.columns:
        idx = out.columns["index"]
        bad = ~(np.isfinite(idx) & (idx >= 0) & (idx == np.round(idx)))
        if bad.any():                      # a row without a GPU index cannot be attributed to a GPU
            out.errors += [f"{path}:{ln}: index is not a GPU number" for ln in out.lines[bad]]
            keep = ~bad
            out.columns = {f: c[keep] for f, c in out.columns.items()}
            out.text = {f: [v for v, k in zip(t, keep) if k] for f, t in out.text.items()}
            out.lines = out.lines[keep]
            pos = [q for q, k in zip(pos, keep) if k]
            rows = [q for q, k in zip(rows, keep) if k]
        out.gpu = out.columns["index"].astype(np.int64)
    elif n_gpus:
        out.gpu = np.array(pos, dtype=np.int64) % int(n_gpus)
    else:
        out.gpu = np.zeros(len(rows), dtype=np.int64)
    _check_time_order(out, path)
    if strict and out.errors:
        raise NvidiaSmiParseError(out.errors, out)
    return out


#: a GPU's timestamp may step back this far (an NTP slew) before its trace is taken for two traces
TIME_BACKSTEP_S = 1.0


def _check_time_order(out: SmiTrace, path) -> None:
    """Refuse a trace in which one GPU's timestamps go back by more than :data:`TIME_BACKSTEP_S`: two
    captures concatenated or a clock reset, whose samples no step time can be matched against.

    Raises:
        InputError: naming the file, the first line where time goes back, and how far.
    """
    ts = out.columns.get("timestamp")
    if ts is None or len(ts) < 2:
        return
    for g in np.unique(out.gpu):
        sel = np.flatnonzero(out.gpu == g)
        d = np.diff(ts[sel])
        back = np.flatnonzero(d < -TIME_BACKSTEP_S)
        if back.size:
            line = int(out.lines[sel[back[0] + 1]])
            raise InputError(path, "timestamp", f"GPU {g}'s time goes back {-d[back[0]]:.1f} s at line {line} "
                             f"({back.size} time(s) in all): two captures in one file, or a clock reset? give "
                             "each capture its own file")


# ------------------------------------------------------------------------------------------ nvidia-smi dmon

_DMON_MISSING = {"-", "\u2013", "n/a", "[n/a]"}
_DMON_TIME_COLS = ("Date", "Time")
_SOURCE_LINE = re.compile(r"#\s*(SOURCE|SYNTHETIC):")


@dataclass
class DmonTable:
    """Parsed ``nvidia-smi dmon`` output: one entry per data line (one GPU at one sample).

    Attributes:
        columns: metric column names in order of first appearance (``"pwr"``, ``"gtemp"``, ``"mtemp"``,
            ``"sm"``, ``"mem"``, ``"mclk"``, ``"pclk"``, ...; older drivers print ``"temp"``), without
            ``gpu`` / ``Date`` / ``Time``.
        units: column -> unit from the ``# Idx`` line (``"W"``, ``"C"``, ``"%"``, ``"MHz"``, ``"MB"``,
            ``"MB/s"``, ``"errs"``, ``"bool"``).
        values: column -> float array, shape (n,), as printed; NaN where dmon printed ``-`` and for
            rows of a header block that lacked the column.
        gpu: int array (n,), the ``gpu`` (``Idx``) column.
        sample: int array (n,), 0-based sample number of each row (how many rows of the same GPU came
            before it).
        t_unix: float array (n,), Unix seconds from ``Date`` + ``Time`` (``-o DT``; wall clock read as
            UTC since dmon prints no zone), NaN when the capture has no date.
        time_of_day_s: float array (n,), seconds since midnight from ``Time`` (``-o T`` or ``-o DT``),
            NaN without it.
        lines: int array (n,), 1-based line numbers.
        errors: ``"FILE:LINE: reason"`` for every skipped line.
        noise_lines: count of lines that are neither headers nor data (shell prompts, banners).
        path: the file read.
    Units as printed by nvidia-smi: power W, temperatures C, utilisation %, clocks MHz, memory MB.
    """

    columns: list = field(default_factory=list)
    units: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    gpu: np.ndarray = None
    sample: np.ndarray = None
    t_unix: np.ndarray = None
    time_of_day_s: np.ndarray = None
    lines: np.ndarray = None
    errors: list = field(default_factory=list)
    noise_lines: int = 0
    path: Path | None = None

    def __len__(self):
        return 0 if self.lines is None else len(self.lines)

    def column(self, name, *aliases):
        """Float array of column ``name`` (or the first of ``aliases`` present, e.g. ``"gtemp", "temp"``).

        Raises:
            KeyError: none of the names is a column; the message lists the columns.
        """
        for n in (name,) + aliases:
            if n in self.values:
                return self.values[n]
        raise KeyError(f"no column {' / '.join((name,) + aliases)!r} in nvidia-smi dmon capture "
                       f"{self.path} (columns: {self.columns})")


def _dmon_header(line):
    """Column names of a ``# gpu ...`` / ``#Date Time gpu ...`` header line, else None."""
    if _SOURCE_LINE.match(line):
        return None
    tok = line.lstrip("#").split()
    if not tok or "gpu" not in tok:
        return None
    lead = tok[:tok.index("gpu")]
    if any(t not in _DMON_TIME_COLS for t in lead) or (len(tok) > 1 and tok[tok.index("gpu") + 1:][:1] == ["pid"]):
        return None  # not dmon (pmon has "gpu pid")
    return tok


_DMON_HEAD = re.compile(r"^#\s*(?:Date\s+)?(?:Time\s+)?gpu\s+(?!pid\b)\S")
_DMON_UNITS = re.compile(r"^#\s*(?:YYYYMMDD\s+)?(?:HH:MM:SS\s+)?Idx\b")


def detect_dmon(head) -> bool:
    """True when a ``# gpu ...`` (or ``#Date Time gpu ...``) header line is followed by a ``# Idx ...``
    (``#YYYYMMDD HH:MM:SS Idx ...``) unit line (``head``: :class:`costmodel.readers.registry.Head`)."""
    lines = head.unprefixed
    return any(_DMON_HEAD.match(a) and _DMON_UNITS.match(b) for a, b in zip(lines, lines[1:]))


def read_nvidia_smi_dmon(path, strict=True) -> DmonTable:
    """Parse an ``nvidia-smi dmon`` capture (any ``-s`` selection, optional ``-o DT``, repeated headers).

    Args:
        path: text file (str or Path).  ``#`` lines that are not dmon headers (our copies' ``# SOURCE:``
            line, banners) are skipped; so are blank lines and lines before the first header that do
            not start with a number (shell prompts).
        strict: if True (default), raise :class:`NvidiaSmiDmonParseError` after reading the whole file
            when any line was bad (it carries the good rows in ``.table``); False returns them with
            ``errors`` filled.
    Returns:
        :class:`DmonTable`: per-column float arrays, GPU index, sample number, times, line numbers.
    Raises:
        NvidiaSmiDmonParseError: (strict) a data line before any header, with a field count that differs
            from its header, a non-numeric value, a bad date/time, or under a header whose unit of a
            column differs from an earlier header's (mixed units); the message names file and line.
        OSError: the file cannot be read.
    Format source: nvidia-smi(1) "Device Monitoring" and ``nvidia-smi dmon -h``
    (https://docs.nvidia.com/deploy/nvidia-smi/index.html).
    """
    path = Path(path)
    out = DmonTable(path=path)
    header = units = None
    header_line = 0
    block_error = None
    rows = []  # (lineno, gpu, t_unix, tod, {col: value})
    for lineno, raw in enumerate(read_text(path, lenient=True).splitlines(), start=1):
        s = raw.strip()
        if not s:
            continue
        where = f"{path}:{lineno}"
        if s.startswith("#"):
            cols = _dmon_header(s)
            if cols is not None:
                header, units, header_line, block_error = cols, None, lineno, None
                continue
            tok = s.lstrip("#").split()
            if header is not None and units is None and lineno > header_line and tok and \
                    tok[0] in ("Idx", "YYYYMMDD", "HH:MM:SS") and len(tok) == len(header):
                units = dict(zip(header, tok))
                for c, u in units.items():
                    if c in _DMON_TIME_COLS or c == "gpu":
                        continue
                    if c in out.units and out.units[c] != u:
                        block_error = (f"column {c!r} in [{u}] under the header of line {header_line}, "
                                       f"[{out.units[c]}] earlier in the file (mixed units)")
                for c, u in units.items():
                    if c not in _DMON_TIME_COLS and c != "gpu" and c not in out.units:
                        out.units[c] = u
            continue
        tok = s.split()
        if header is None:
            if re.fullmatch(r"\d+", tok[0]):
                out.errors.append(f"{where}: data line before any '# gpu ...' header: {raw!r}")
            else:
                out.noise_lines += 1
            continue
        if not re.fullmatch(r"\d+", tok[0]):
            out.noise_lines += 1
            continue
        if block_error:
            out.errors.append(f"{where}: {block_error}: {raw!r}")
            continue
        if len(tok) != len(header):
            out.errors.append(f"{where}: {len(tok)} fields, expected {len(header)} ({' '.join(header)}): {raw!r}")
            continue
        try:
            rec = dict(zip(header, tok))
            gpu = int(rec["gpu"])
            if gpu > 2 ** 20:
                raise ValueError(f"gpu {gpu} is not a GPU index")
            t_unix = tod = float("nan")
            if "Time" in rec:
                hh, mm, ss = (int(x) for x in rec["Time"].split(":"))
                tod = hh * 3600.0 + mm * 60.0 + ss
            if "Date" in rec:
                d = datetime.strptime(rec["Date"] + " " + rec.get("Time", "00:00:00"), "%Y%m%d %H:%M:%S")
                t_unix = d.replace(tzinfo=timezone.utc).timestamp()
            vals = {}
            for c in header:
                if c in _DMON_TIME_COLS or c == "gpu":
                    continue
                v = rec[c]
                if v.lower() in _DMON_MISSING:
                    vals[c] = float("nan")
                    continue
                try:
                    vals[c] = float(v)
                except ValueError:
                    raise ValueError(f"column {c!r}: not a number: {v!r}") from None
        except ValueError as e:
            out.errors.append(f"{where}: {e}: {raw!r}")
            continue
        for c in vals:
            if c not in out.columns:
                out.columns.append(c)
        rows.append((lineno, gpu, t_unix, tod, vals))
    n = len(rows)
    out.lines = np.array([r[0] for r in rows], dtype=np.int64)
    out.gpu = np.array([r[1] for r in rows], dtype=np.int64)
    out.t_unix = np.array([r[2] for r in rows], dtype=np.float64)
    out.time_of_day_s = np.array([r[3] for r in rows], dtype=np.float64)
    out.values = {c: np.array([r[4].get(c, np.nan) for r in rows], dtype=np.float64) for c in out.columns}
    seen = {}
    sample = np.zeros(n, dtype=np.int64)
    for i, g in enumerate(out.gpu):
        sample[i] = seen.get(int(g), 0)
        seen[int(g)] = sample[i] + 1
    out.sample = sample
    if strict and out.errors:
        raise NvidiaSmiDmonParseError(out.errors, out)
    return out
