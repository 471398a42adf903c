"""Reader for ``nvidia-smi --query-gpu=... --format=csv`` captures (power / utilisation traces).

Format (NVIDIA System Management Interface, ``nvidia-smi --help-query-gpu``; the sampling loop is
``-l SEC`` or ``-lms MS``): a header line naming each queried field with its unit in brackets,
``timestamp, power.draw [W], utilization.gpu [%], memory.used [MiB]``, then one line per GPU per
sample, the GPUs of one sample in index order.  With ``--format=csv`` every value carries its unit
(``69.32 W``, ``0 %``, ``132 MiB``); with ``--format=csv,nounits`` it does not.  A field the GPU
does not report prints ``[N/A]``, ``N/A`` or ``[Not Supported]`` (read as NaN).  The timestamp is
``YYYY/MM/DD HH:MM:SS.mmm``.  Lines starting with ``#`` (our copies' source header) are skipped, and
so is a repeated header line (captures concatenated by ``>>``).

Source read with it: grantwilkins/training_profile power-trace_2025-07-26-23-32-09.csv (8x H100,
GPT-8B DDP training, 100 ms sampling), copied to
``calibration/data/public/h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from .errors import ReaderParseError

_MISSING = {"[n/a]", "n/a", "[not supported]", "not supported", "[unknown error]", "[gpu is lost]", ""}
_HEAD = re.compile(r"^\s*([A-Za-z][A-Za-z0-9_.]*)\s*(?:\[([^\]]*)\])?\s*$")
_VAL = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?\d+)?)\s*([A-Za-z%/]*)\s*$")


class NvidiaSmiParseError(ReaderParseError):
    """Raised by :func:`read_nvidia_smi_csv` (strict mode) when some lines could not be parsed.

    Attributes:
        errors: ``"FILE:LINE: reason"`` strings, one per bad line.
        trace: the :class:`SmiTrace` of the lines that did parse (good rows are kept).
    """

    def __init__(self, errors, trace):
        super().__init__("nvidia-smi CSV lines", errors, trace)
        self.trace = trace


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
    """

    fields: list = field(default_factory=list)
    units: dict = field(default_factory=dict)
    columns: dict = field(default_factory=dict)
    gpu: np.ndarray = None
    lines: np.ndarray = None
    errors: list = field(default_factory=list)

    def __len__(self):
        return 0 if self.lines is None else len(self.lines)

    def column(self, name):
        """Float array of field ``name`` (KeyError naming the available fields if absent)."""
        if name not in self.columns:
            raise KeyError(f"no field {name!r} in nvidia-smi CSV (fields: {self.fields})")
        return self.columns[name]


def _timestamp(s):
    s = s.strip()
    for fmt in ("%Y/%m/%d %H:%M:%S.%f", "%Y/%m/%d %H:%M:%S", "%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S"):
        try:
            return datetime.strptime(s, fmt).timestamp()
        except ValueError:
            continue
    raise ValueError(f"timestamp {s!r} is not YYYY/MM/DD HH:MM:SS[.fff]")


def _value(s, unit):
    t = s.strip()
    if t.lower() in _MISSING:
        return float("nan")
    m = _VAL.match(t)
    if not m:
        raise ValueError(f"not a number{' in ' + unit if unit else ''}: {s.strip()!r}")
    if m.group(2) and unit and m.group(2) != unit:
        raise ValueError(f"unit {m.group(2)!r} differs from the header's [{unit}]: {s.strip()!r}")
    return float(m.group(1))


def read_nvidia_smi_csv(path, n_gpus=None, strict=True) -> SmiTrace:
    """Parse an ``nvidia-smi --query-gpu=... --format=csv[,nounits]`` capture.

    Args:
        path: CSV file (str or Path).
        n_gpus: GPUs per sample when the capture has no ``index`` column (rows of one sample are
            consecutive, GPU 0 first); None leaves ``gpu`` at 0 unless an ``index`` column exists.
        strict: raise :class:`NvidiaSmiParseError` after reading the whole file if any line was bad
            (the exception carries the good rows); False returns them with ``errors`` filled.
    Returns:
        :class:`SmiTrace` (values in the header's units; timestamps in seconds from the first row).
    Raises:
        NvidiaSmiParseError: (strict) a line has the wrong number of fields, a non-numeric value, a
            unit that contradicts the header or a bad timestamp; the message names file and line.
        ValueError: no header line.
        OSError: the file cannot be read.
    """
    path = Path(path)
    out = SmiTrace()
    rows, lines, pos = [], [], []
    header_line = None
    n_data = 0  # data lines seen (good or bad): a bad line still occupies its GPU's place in a sample
    for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
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
            vals = [(_timestamp(c) if f == "timestamp" else _value(c, out.units[f]))
                    for f, c in zip(out.fields, cells)]
        except ValueError as e:
            out.errors.append(f"{where}: {e}")
            continue
        rows.append(vals)
        lines.append(lineno)
        pos.append(n_data - 1)
    if header_line is None:
        raise ValueError(f"{path}: no nvidia-smi CSV header line")
    arr = np.array(rows, dtype=np.float64).reshape(len(rows), len(out.fields))
    for j, f in enumerate(out.fields):
        col = arr[:, j]
        out.columns[f] = col - col[0] if (f == "timestamp" and len(col)) else col
    out.lines = np.array(lines, dtype=np.int64)
    if "index" in out.columns:
        out.gpu = out.columns["index"].astype(np.int64)
    elif n_gpus:
        out.gpu = np.array(pos, dtype=np.int64) % int(n_gpus)
    else:
        out.gpu = np.zeros(len(rows), dtype=np.int64)
    if strict and out.errors:
        raise NvidiaSmiParseError(out.errors, out)
    return out
