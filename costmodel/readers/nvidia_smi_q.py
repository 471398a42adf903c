"""``nvidia-smi -q`` text: one record per GPU per snapshot (power, limits, temperatures, clocks, why
the clock is held down).

``nvidia-smi -q`` (optionally ``-d POWER,TEMPERATURE,CLOCK,PERFORMANCE`` and ``-l SEC`` to repeat)
prints a ``==============NVSMI LOG==============`` banner, a ``Timestamp`` line, then one block per
GPU opened by ``GPU 00000000:07:00.0`` with indented ``Key : Value`` lines under section headers.
The names this reader uses (nvidia-smi(1); both namings of the clock reasons, which driver 535
renamed from ``Clocks Throttle Reasons`` to ``Clocks Event Reasons``):

======================================  ==============================================
field                                   key path (section / key)
======================================  ==============================================
power_w                                 ``Power Readings`` (driver >= 535: ``GPU Power
                                        Readings``) / ``Power Draw``
power_limit_w                           same section / ``Power Limit`` or ``Current
                                        Power Limit``; ``Min Power Limit``, ``Max ...``
temp_c, slowdown_temp_c,                ``Temperature`` / ``GPU Current Temp``, ``GPU
shutdown_temp_c, max_operating_temp_c   Slowdown Temp``, ``GPU Shutdown Temp``, ``GPU Max
                                        Operating Temp``
sm_clock_mhz, max_sm_clock_mhz          ``Clocks`` / ``SM``; ``Max Clocks`` / ``SM``
util_gpu_pct                            ``Utilization`` / ``Gpu``
voltage_mv                              ``Voltage`` / ``Graphics``
reasons                                 ``Clocks Throttle Reasons`` or ``Clocks Event
                                        Reasons`` / each reason ``Active``
======================================  ==============================================

``N/A`` and ``[Not Supported]`` values are NaN; a value whose unit is not the expected one is a bad
line (``FILE:LINE: reason``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

import numpy as np

from costmodel.errors import ReaderParseError
from ..files import open_text

BANNER = "==============NVSMI LOG=============="
_REASON_SECTIONS = ("Clocks Throttle Reasons", "Clocks Event Reasons")
#: reason labels of nvidia-smi -q -> the names of costmodel.readers.clock_events
REASONS = {"Idle": "GPU idle", "Applications Clocks Setting": "applications clocks setting",
           "SW Power Cap": "SW power cap", "HW Slowdown": "HW slowdown", "HW Thermal Slowdown": "HW thermal slowdown",
           "HW Power Brake Slowdown": "HW power brake slowdown", "Sync Boost": "sync boost",
           "SW Thermal Slowdown": "SW thermal slowdown", "Display Clock Setting": "display clock setting"}
# field -> (accepted key paths, unit)
_FIELDS = {
    "power_w": ((("Power Readings", "Power Draw"), ("GPU Power Readings", "Power Draw")), "W"),
    "power_limit_w": ((("Power Readings", "Power Limit"), ("GPU Power Readings", "Current Power Limit")), "W"),
    "min_power_limit_w": ((("Power Readings", "Min Power Limit"), ("GPU Power Readings", "Min Power Limit")), "W"),
    "max_power_limit_w": ((("Power Readings", "Max Power Limit"), ("GPU Power Readings", "Max Power Limit")), "W"),
    "temp_c": ((("Temperature", "GPU Current Temp"),), "C"),
    "slowdown_temp_c": ((("Temperature", "GPU Slowdown Temp"),), "C"),
    "shutdown_temp_c": ((("Temperature", "GPU Shutdown Temp"),), "C"),
    "max_operating_temp_c": ((("Temperature", "GPU Max Operating Temp"),), "C"),
    "sm_clock_mhz": ((("Clocks", "SM"),), "MHz"),
    "max_sm_clock_mhz": ((("Max Clocks", "SM"),), "MHz"),
    "util_gpu_pct": ((("Utilization", "Gpu"),), "%"),
    "voltage_mv": ((("Voltage", "Graphics"),), "mV"),
}
_PATH_TO_FIELD = {p: (f, unit) for f, (paths, unit) in _FIELDS.items() for p in paths}
_KV = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")
_NUM = re.compile(r"^([-+]?\d+(?:\.\d+)?)\s*(\S*)$")
_MISSING = ("n/a", "[n/a]", "[not supported]", "not supported", "unknown error", "[unknown error]")


class NvidiaSmiQParseError(ReaderParseError):
    """A strict read of an ``nvidia-smi -q`` capture found bad lines (each ``FILE:LINE: reason``)."""

    what = "nvidia-smi -q lines"


@dataclass
class SmiQuery:
    """Parsed ``nvidia-smi -q`` text.

    Attributes:
        gpus: one dict per GPU per snapshot, in file order: ``snapshot`` (0-based), ``t_unix`` (the
            snapshot's ``Timestamp`` read as UTC, None without one), ``index`` (position of the GPU
            in its snapshot: nvidia-smi lists GPUs in index order), ``bus_id``, ``name``, the numeric
            fields of the module table (float, NaN when not reported), ``pstate`` and ``reasons``
            (frozenset of active clock-reason names, None when the block has no reasons section),
            ``line`` (the GPU's header line).
        driver: the ``Driver Version`` of the first snapshot, or None.
        errors: ``"FILE:LINE: reason"`` of every bad line.
        path: the file read.
    """

    gpus: list = field(default_factory=list)
    driver: str | None = None
    errors: list = field(default_factory=list)
    path: Path | None = None

    def __len__(self):
        return len(self.gpus)


def detect(head) -> bool:
    """True when the file's first lines hold the ``NVSMI LOG`` banner (``head``:
    :class:`costmodel.readers.registry.Head`)."""
    return any(s.startswith(BANNER) for s in head.lines[:50])


def _timestamp(text):
    try:
        return datetime.strptime(" ".join(text.split()), "%a %b %d %H:%M:%S %Y").replace(tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def _number(value, unit):
    """(float, None) or (None, reason)."""
    if value.strip().lower() in _MISSING:
        return float("nan"), None
    m = _NUM.match(value.strip())
    if not m:
        return None, f"{value!r} is not a number in {unit}"
    got = m.group(2)
    if got != unit and not (unit == "%" and got == "%") and not (got == "" and unit in ("C",)):
        return None, f"{value!r}: expected {unit}"
    v = float(m.group(1))
    if unit != "C" and v < 0:                 # power, clock, utilisation, voltage are never negative
        return None, f"{value!r}: negative"
    return v, None


def read_nvidia_smi_q(path, strict=True) -> SmiQuery:
    """Read an ``nvidia-smi -q`` capture (module docstring), one or many snapshots.

    Args:
        path: the file.
        strict: raise :class:`NvidiaSmiQParseError` after reading the whole file if any line was bad;
            else keep every good value and list the bad lines in ``errors``.
    Returns:
        :class:`SmiQuery`.
    Raises:
        NvidiaSmiQParseError: strict and a bad line, or no ``NVSMI LOG`` banner at all.
        OSError: the file cannot be read.
    """
    path = Path(path)
    out = SmiQuery(path=path)
    snap, t_unix, gpu, stack, seen_banner = -1, None, None, [], False
    with open_text(path, lenient=True) as fh:
        for ln, raw in enumerate(fh, 1):
            line = raw.rstrip("\n")
            s = line.strip()
            if not s or s.startswith("#"):
                continue
            if s.startswith(BANNER):
                snap, t_unix, gpu, stack, seen_banner = snap + 1, None, None, [], True
                continue
            if not seen_banner:
                continue
            if re.match(r"^GPU [0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.\d$", s):
                idx = sum(1 for g in out.gpus if g["snapshot"] == snap)
                gpu = dict(snapshot=snap, t_unix=t_unix, index=idx, bus_id=s[4:], name=None, pstate=None,
                           reasons=None, line=ln, **{f: float("nan") for f in _FIELDS})
                out.gpus.append(gpu)
                stack = []
                continue
            indent = len(line) - len(line.lstrip(" "))
            m = _KV.match(line)
            if m is None or (m.group(3) == "" and ":" not in s):       # a section header
                while stack and stack[-1][0] >= indent:
                    stack.pop()
                stack.append((indent, s))
                continue
            key, value = m.group(2).strip(), m.group(3)
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if gpu is None:
                if key == "Timestamp":
                    t_unix = _timestamp(value)
                elif key == "Driver Version" and out.driver is None:
                    out.driver = value
                continue
            parents = [name for _, name in stack]
            if key == "Product Name" and not parents:
                gpu["name"] = value
            elif key == "Performance State" and not parents:
                gpu["pstate"] = value
            elif parents and parents[0] in _REASON_SECTIONS:
                if key in REASONS:
                    if gpu["reasons"] is None:
                        gpu["reasons"] = set()
                    if value.strip().lower() == "active":
                        gpu["reasons"].add(REASONS[key])
            elif len(parents) == 1 and (parents[0], key) in _PATH_TO_FIELD:
                name, unit = _PATH_TO_FIELD[(parents[0], key)]
                v, why = _number(value, unit)
                if why:
                    out.errors.append(f"{path}:{ln}: {parents[0]} / {key}: {why}")
                else:
                    gpu[name] = v
    for g in out.gpus:
        if g["reasons"] is not None:
            g["reasons"] = frozenset(g["reasons"])
    if not seen_banner:
        out.errors.append(f"{path}:1: no '{BANNER}' banner: not nvidia-smi -q output")
    if strict and out.errors:
        raise NvidiaSmiQParseError(out.errors, out)
    return out


def column(q: SmiQuery, name: str) -> np.ndarray:
    """One numeric field of every GPU record as a float array (NaN where not reported).

    Raises:
        KeyError: not a field of the module table.
    """
    if name not in _FIELDS:
        raise KeyError(f"no field {name!r} (fields: {', '.join(_FIELDS)})")
    return np.array([g[name] for g in q.gpus], dtype=np.float64)
