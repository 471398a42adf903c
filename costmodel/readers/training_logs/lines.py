"""Lexing of training logs: rank prefixes, ANSI codes, timestamps, one logical line per record
(see the package docstring)."""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from ...files import read_text

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ANSI_PASTED = re.compile(r"\[(?:\d{1,3}(?:;\d{1,3})*)?m")  # the same with the ESC byte lost in a copy-paste
# launchers' line prefixes: torchrun's "[rank0]:", Open MPI's "[1,0]<stdout>:", srun's "0:", pdsh's
# "worker-0:" / "node-a17:0:" (a host name with a digit or a hyphen, so "step:" stays a field), and a
# log collector's RFC 3339 time ("2025-06-01T10:00:00.123Z ", kubectl logs --timestamps)
_PREFIX = re.compile(r"^\s*(?:\[(?P<br>(?:rank|default)\d+)\]:|\[1,(?P<mpi>\d+)\]<std(?:out|err)>:"
                     r"|(?P<srun>\d+):(?=\s)|(?P<host>[A-Za-z][\w.]*[-\d][\w.-]*):(?=[\s\d])"
                     r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:?\d\d)(?=\s))"
                     r"[ \t]?")
_ELISION = re.compile(r"^\s*(?:\[\s*(?:\.\.\.|…)\s*\]|\.\.\.|…)\s*$")
_TIMESTAMP = re.compile(r"^\s*\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s*")

# wall-clock time a record was printed at: Megatron-LM's "[2024-04-06 02:59:36]" prefix, torchtitan's
# logging "2025-06-16 22:30:50,322"; naive times are read as UTC, as the nvidia-smi reader reads its
# timestamps, so a log and a trace written on one machine share a time base whatever the reader's zone
_WALL = re.compile(r"(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:[.,](\d+))?")


def _wall_time(text):
    """Unix seconds of the first date-time stamp in the first 80 characters of ``text``, or NaN."""
    from datetime import datetime, timezone
    m = _WALL.search(text[:80])
    if not m:
        return math.nan
    try:
        t = datetime.strptime(f"{m.group(1)} {m.group(2)}", "%Y-%m-%d %H:%M:%S").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return math.nan
    return t + (float("0." + m.group(3)) if m.group(3) else 0.0)


_GROUPED = re.compile(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d*)?")


def _num(s: str) -> float:
    """A printed number: ``1,234``, ``1.0E-05``, ``49.00``, ``nan``; ValueError otherwise (commas
    only as thousands separators: ``5,8,6,8`` is not a number)."""
    t = s.strip()
    if "," in t and not _GROUPED.fullmatch(t):
        raise ValueError(f"misplaced thousands separators: {s!r}")
    t = t.replace(",", "")
    if not t:
        raise ValueError("empty value")
    return float(t)


def _strip_prefixes(s: str):
    """Remove ANSI codes and launcher rank prefixes; returns ``(text, rank label or None)``."""
    if "\x1b" in s:
        s = _ANSI.sub("", s)
    if "m" in s and "[" in s:
        s = _ANSI_PASTED.sub(lambda m: m.group(0) if m.start() and (s[m.start() - 1].isalnum()
                                                                    or s[m.start() - 1] in "_]") else "", s)
    labels = []
    while True:
        m = _PREFIX.match(s)
        if not m:
            break
        label = m.group("br") or (m.group("mpi") and "1," + m.group("mpi")) or m.group("srun") or m.group("host")
        if label:
            labels.append(label)
        s = s[m.end():]
    return s, ("/".join(labels) if labels else None)


@dataclass
class _Seg:
    """One logical line: physical line number, text without prefixes, rank label, last content line of the file."""

    line: int
    text: str
    rank: str | None
    last: bool = False
    end_line: int = 0
    no_newline: bool = False


# where a record starts: Megatron's "[date time] iteration N/ M |", a NeMo progress bar's "Epoch N:",
# torchtitan's "step: N"; a line holding two of one kind holds two records (a progress bar whose
# refreshes lost their carriage returns, a record cut short and the next printed after it)
_RECORD_HEAD = re.compile(r"(?:\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?\]\s*)?\biteration\s+\d+\s*/\s*\d+\s*\|"
                          r"|\bEpoch \d+:|\bstep:\s*\d+\s+loss:")


def _records_of(text: str) -> list:
    """``text`` split before each record head after the first of its kind (:data:`_RECORD_HEAD`)."""
    heads = list(_RECORD_HEAD.finditer(text))
    if len(heads) < 2:
        return [text]
    kind = lambda m: next(k for k in ("iteration", "Epoch", "step:") if k in m.group(0))
    cuts = [m.start() for m in heads[1:] if kind(m) == kind(heads[0])]
    bounds = [0] + cuts + [len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:]) if text[a:b].strip()]


def _segments(path: Path):
    raw = read_text(path, lenient=True)
    no_newline = bool(raw) and not raw.endswith("\n")
    phys = raw.split("\n")
    if phys and phys[-1] == "":
        phys.pop()
    segs = []
    header = True
    for i, pl in enumerate(phys, start=1):
        if header and pl.lstrip().startswith("#"):
            continue
        header = False
        for part in pl.split("\r"):  # tqdm refreshes the progress bar with carriage returns
            if not part.strip():
                continue
            text, rank = _strip_prefixes(part)
            if not text.strip() or _ELISION.match(text):
                continue
            segs.extend(_Seg(i, piece, rank, end_line=i) for piece in _records_of(text))
    if segs:
        segs[-1].last = True
        segs[-1].no_newline = no_newline
    return segs


# ---------------------------------------------------------------------------------------------- parsers
def _where(path, seg):
    return f"{path}:{seg.line}" if seg.end_line == seg.line else f"{path}:{seg.line}-{seg.end_line}"


def _short(text, n=100):
    t = text.strip()
    return repr(t if len(t) <= n else t[:n] + "...")


def _untimestamp(text):
    return _TIMESTAMP.sub("", text) if text.lstrip().startswith("[") else text
