"""``amd-smi`` text (AMD GPUs, the successor of rocm-smi): power, temperature, GFX clock and utilisation
per GPU per sample.

Two outputs of the ``amd-smi`` CLI (AMD, "Getting to Know Your GPU: A Deep Dive into AMD SMI", ROCm
blogs, 2024, and the amd-smi CLI documentation):

* ``amd-smi monitor`` (``-p -t -u``, repeated with ``-w SEC``): a header ``GPU POWER GPU_TEMP MEM_TEMP
  GFX_UTIL GFX_CLOCK ...`` and one row per GPU, each value with its unit (``182 W  42 °C  83 %  1613
  MHz``, ``N/A`` when not reported).  The columns are read by name: ``POWER``, ``GPU_TEMP`` (or
  ``HOTSPOT_TEMP``), ``GFX_UTIL``, ``GFX_CLOCK``; a GPU index seen again starts the next sample.
* ``amd-smi metric``: ``GPU: N`` blocks with indented sections, read for ``POWER / SOCKET_POWER``,
  ``USAGE / GFX_ACTIVITY``, ``CLOCK / GFX_0 / CLK`` and ``TEMPERATURE / HOTSPOT`` (else ``EDGE``).

No timestamps are printed: samples are numbered.  The temperature is the hotspot where amd-smi gives
it (MI300 has no edge sensor), the sensor AMD's slowdown and shutdown limits refer to.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from costmodel.errors import ReaderParseError
from ..files import read_text

_MONITOR_HEAD = re.compile(r"^GPU\s+(?:\S+\s+)*?(?:POWER|GPU_TEMP|HOTSPOT_TEMP|GFX_UTIL|GFX_CLOCK)\b")
_VALUE = re.compile(r"N/A|-?\d+(?:\.\d+)?(?:\s*(?:W|°C|C|%|MHz|GB|MB|mV|Mb/s))?")
_NUM = re.compile(r"-?\d+(?:\.\d+)?")
_COLUMNS = {"POWER": "power_w", "GPU_POWER": "power_w", "GPU_TEMP": "temp_c", "HOTSPOT_TEMP": "temp_c",
            "GFX_UTIL": "util_gpu_pct", "GFX_CLOCK": "gfx_clock_mhz"}


class AmdSmiParseError(ReaderParseError):
    """``amd-smi`` text (strict mode) with bad lines; ``rows`` are the good records."""

    what = "amd-smi lines"


@dataclass
class AmdSmi:
    """Parsed ``amd-smi monitor`` / ``metric`` text.

    Attributes:
        gpus: one dict per GPU per sample, in file order: ``sample``, ``index``, ``power_w``, ``temp_c``,
            ``gfx_clock_mhz``, ``util_gpu_pct`` (float, NaN when not printed), ``line``.
        layout: ``"monitor"`` or ``"metric"``.  errors: ``"FILE:LINE: reason"``.  path: the file.
    """

    gpus: list = field(default_factory=list)
    layout: str = "monitor"
    errors: list = field(default_factory=list)
    path: Path | None = None

    def __len__(self):
        return len(self.gpus)


def detect(head) -> bool:
    """True for an ``amd-smi monitor`` header or an ``amd-smi metric`` block (``GPU: N`` then an
    indented ``USAGE:``/``POWER:`` section) in the file's first lines."""
    lines = head.lines[:60]
    if any(_MONITOR_HEAD.match(s.strip()) for s in lines):
        return True
    return any(re.match(r"^GPU:\s*\d+\s*$", a.strip()) and b.strip() in ("USAGE:", "POWER:", "CLOCK:", "TEMPERATURE:")
               for a, b in zip(lines, lines[1:]))


def _record(sample, idx, ln):
    return dict(sample=sample, index=idx, power_w=np.nan, temp_c=np.nan, gfx_clock_mhz=np.nan, util_gpu_pct=np.nan,
                line=ln)


def _num(tok):
    m = _NUM.match(tok)
    return float(m.group(0)) if m and not tok.startswith("N/A") else np.nan


def _monitor(lines, path, out):
    cols, seen, sample = None, set(), 0
    for ln, raw in lines:
        s = raw.strip()
        if _MONITOR_HEAD.match(s):
            cols = s.split()[1:]
            continue
        if cols is None or not s or not s.split()[0].isdigit():
            continue
        vals = _VALUE.findall(s)
        idx = int(vals[0])
        if len(vals) - 1 != len(cols):
            out.errors.append(f"{path}:{ln}: {len(vals) - 1} values for {len(cols)} columns: {s!r}")
            continue
        if idx in seen:                        # the next sample of amd-smi monitor -w
            sample, seen = sample + 1, set()
        seen.add(idx)
        rec = _record(sample, idx, ln)
        for c, v in zip(cols, vals[1:]):
            if c in _COLUMNS:
                rec[_COLUMNS[c]] = _num(v)
        out.gpus.append(rec)


def _metric(lines, path, out):
    rec, stack, sample, seen = None, [], 0, set()
    for ln, raw in lines:
        if not raw.strip():
            continue
        m = re.match(r"^GPU:\s*(\d+)\s*$", raw.strip())
        if m and not raw.startswith(" "):
            idx = int(m.group(1))
            if idx in seen:
                sample, seen = sample + 1, set()
            seen.add(idx)
            rec = _record(sample, idx, ln)
            out.gpus.append(rec)
            stack = []
            continue
        if rec is None:
            continue
        depth = (len(raw) - len(raw.lstrip(" "))) // 4
        key, _, value = raw.strip().partition(":")
        stack = stack[:max(depth - 1, 0)] + [key.strip().upper()]
        value = value.strip()
        if not value:
            continue
        where = "/".join(stack)
        if where == "POWER/SOCKET_POWER":
            rec["power_w"] = _num(value)
        elif where == "USAGE/GFX_ACTIVITY":
            rec["util_gpu_pct"] = _num(value)
        elif where in ("CLOCK/GFX_0/CLK", "CLOCK/GFX/CLK") and np.isnan(rec["gfx_clock_mhz"]):
            rec["gfx_clock_mhz"] = _num(value)
        elif where == "TEMPERATURE/HOTSPOT" or (where == "TEMPERATURE/EDGE" and np.isnan(rec["temp_c"])):
            rec["temp_c"] = _num(value)


def read_amd_smi(path, strict=True) -> AmdSmi:
    """Read an ``amd-smi monitor`` or ``amd-smi metric`` capture (module docstring).

    Raises:
        AmdSmiParseError: strict and a bad line, or neither layout found.
        OSError: the file cannot be read.
    """
    path = Path(path)
    out = AmdSmi(path=path)
    lines = list(enumerate(read_text(path, lenient=True).splitlines(), start=1))
    if any(_MONITOR_HEAD.match(s.strip()) for _, s in lines):
        out.layout = "monitor"
        _monitor(lines, path, out)
    else:
        out.layout = "metric"
        _metric(lines, path, out)
    if not out.gpus and not out.errors:
        out.errors.append(f"{path}: no amd-smi monitor table or metric block")
    if strict and out.errors:
        raise AmdSmiParseError(out.errors, out.gpus)
    return out
