"""Reader for NVIDIA nccl-tests stdout (all_reduce_perf, all_gather_perf, sendrecv_perf, ...).

Format (NVIDIA nccl-tests, https://github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md): one row per
message size, ``size count type [redop] [root] | time algbw busbw #wrong`` for the out-of-place and
then the in-place run; time in microseconds, algbw and busbw in GB/s (1e9 B/s).  Lines whose first
non-prefix character is ``#`` are comments (header, "Avg bus bandwidth", ...).  Launchers prefix every
line with the rank: ``0: `` (Slurm srun) or ``[1,0]<stdout>:`` (Open MPI ``--tag-output``); both are
stripped.  Older nccl-tests (< 2.10) omit the ``root`` column and all_to_all omits ``redop``; the
reader accepts 0-2 columns between ``type`` and the 8 timing columns.  A line that is only ``...`` is
an elision mark left by an author who cut rows; it is skipped.  A header line starts a new table
(``table`` index in each row), so a file with several captures keeps them apart.

Sources read with it: AWS awsome-distributed-training nccl-tests README (p5 / p4de, 2 nodes), li-plus
playground cuda/nccl.md (A100 sendrecv), NCCL GitHub issue excerpts.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from .errors import ReaderParseError

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:)\s?")


@dataclass(frozen=True)
class NcclRow:
    """One measured size of one nccl-tests run (one placement).

    Attributes:
        size_bytes: nccl-tests "size" (per-rank buffer, bytes).
        count: elements.
        type: element type name as printed (``float``, ``half``, ...).
        placement: ``"out-of-place"`` or ``"in-place"``.
        time_us: time per operation, microseconds.
        algbw: size / time, GB/s (1e9 B/s).
        busbw: algbw x nccl-tests bus factor, GB/s.
        table: index of the table (header block) in the file, from 0.
        line: 1-based line number in the file.
    """

    size_bytes: int
    count: int
    type: str
    placement: str
    time_us: float
    algbw: float
    busbw: float
    table: int
    line: int


class NcclTestsParseError(ReaderParseError):
    """Raised by :func:`read_nccl_tests` (strict mode) when some lines could not be parsed.

    Attributes:
        errors: list of ``"FILE:LINE: reason"`` strings, one per bad line.
        rows: the rows that did parse (the good rows are kept).
    """

    def __init__(self, errors, rows):
        super().__init__("nccl-tests lines", errors, rows)


@dataclass
class NcclTable:
    """Result of :func:`read_nccl_tests`: good rows plus ``"FILE:LINE: reason"`` errors."""

    rows: list = field(default_factory=list)
    errors: list = field(default_factory=list)

    def select(self, placement="out-of-place", table=0):
        """Rows of one placement and table, sorted by size."""
        return sorted((r for r in self.rows if r.placement == placement and r.table == table),
                      key=lambda r: r.size_bytes)


def _num(tok):
    return float(tok)


def read_nccl_tests(path, strict=True) -> NcclTable:
    """Parse an nccl-tests stdout capture.

    Args:
        path: text file (str or Path).
        strict: if True (default), raise :class:`NcclTestsParseError` after reading the whole file
            when any line was bad; the exception carries the good rows in ``.rows``.
    Returns:
        :class:`NcclTable` with one :class:`NcclRow` per size and placement (out-of-place first).
    Raises:
        NcclTestsParseError: (strict) a data line is truncated or has a non-numeric field; the
            message names the file and line of every bad line.
        OSError: the file cannot be read.
    Units: size in bytes, time in us, algbw/busbw in GB/s, exactly as printed.
    """
    path = Path(path)
    out = NcclTable()
    table = -1
    for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
        line = _PREFIX.sub("", raw, count=1).strip()
        if not line:
            continue
        if line.startswith("#"):
            if re.match(r"#\s+size\s+count\s+type", line):
                table += 1
            continue
        if line == "...":
            continue
        tok = line.split()
        where = f"{path}:{lineno}"
        if not (11 <= len(tok) <= 13):
            out.errors.append(f"{where}: truncated or malformed row ({len(tok)} fields, expected "
                              f"11-13: size count type [redop] [root] + 2 x (time algbw busbw #wrong)): {raw!r}")
            continue
        try:
            size, count = int(tok[0]), int(tok[1])
            vals = [_num(t) for i, t in enumerate(tok[-8:]) if i % 4 != 3]
        except ValueError as e:
            out.errors.append(f"{where}: non-numeric field ({e}): {raw!r}")
            continue
        table = max(table, 0)
        for j, placement in enumerate(("out-of-place", "in-place")):
            t, a, b = vals[3 * j:3 * j + 3]
            out.rows.append(NcclRow(size, count, tok[2], placement, t, a, b, table, lineno))
    if strict and out.errors:
        raise NcclTestsParseError(out.errors, out.rows)
    return out


def read_massaged_nccl_table(path):
    """Parse a reduced nccl-tests table with columns ``size time algbw busbw`` (sizes may use ``_``).

    Format: the ml-engineering book's "Real network throughput" A100 table (stas00/ml-engineering,
    network/README.md), where the author kept only the out-of-place size/time/algbw/busbw columns.
    Args:
        path: text file; ``#`` lines and the two header lines (``size``/``(B)``) are skipped.
    Returns:
        list of dicts ``{size_bytes, time_us, algbw, busbw}`` (bytes, us, GB/s, GB/s).
    Raises:
        ValueError: a data line does not have 4 numeric fields (message names file and line).
    """
    rows = []
    for lineno, raw in enumerate(Path(path).read_text().splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line.split()[0] in ("size", "(B)"):
            continue
        tok = line.split()
        try:
            if len(tok) != 4:
                raise ValueError(f"{len(tok)} fields, expected 4")
            rows.append(dict(size_bytes=int(tok[0].replace("_", "")), time_us=float(tok[1]),
                             algbw=float(tok[2]), busbw=float(tok[3])))
        except ValueError as e:
            raise ValueError(f"{path}:{lineno}: {e}: {raw!r}") from None
    return rows
