"""Clock-event (throttle) reasons of an ``nvidia-smi --query-gpu`` capture.

NVML reports why the SM clock is below its target as a bit mask (nvml.h ``nvmlClocksEventReason*``,
formerly ``nvmlClocksThrottleReason*``); ``nvidia-smi --query-gpu`` prints it as
``clocks_event_reasons.active`` (driver 535 and later; before: ``clocks_throttle_reasons.active``),
a hex mask such as ``0x0000000000000004``, and each reason as its own field
(``clocks_event_reasons.sw_power_cap``, ``clocks_throttle_reasons.hw_slowdown``, ...) printed
``Active`` / ``Not Active``.  Both namings are read; the mask wins where both are present.
"""
from __future__ import annotations

from .nvidia_smi import _is_missing

#: NVML clock-event reason bits (nvml.h) and the names this project reports
REASON_BITS = {
    0x1: "GPU idle", 0x2: "applications clocks setting", 0x4: "SW power cap", 0x8: "HW slowdown",
    0x10: "sync boost", 0x20: "SW thermal slowdown", 0x40: "HW thermal slowdown",
    0x80: "HW power brake slowdown", 0x100: "display clock setting",
}
#: per-reason field suffixes of --query-gpu and their names
_FIELDS = {"gpu_idle": "GPU idle", "applications_clocks_setting": "applications clocks setting",
           "sw_power_cap": "SW power cap", "hw_slowdown": "HW slowdown", "sync_boost": "sync boost",
           "sw_thermal_slowdown": "SW thermal slowdown", "hw_thermal_slowdown": "HW thermal slowdown",
           "hw_power_brake_slowdown": "HW power brake slowdown"}
#: reasons that lower the clock of a GPU that has work (idle and clock settings do not throttle it)
THROTTLING = ("SW power cap", "HW slowdown", "SW thermal slowdown", "HW thermal slowdown", "HW power brake slowdown")
_PREFIXES = ("clocks_event_reasons.", "clocks_throttle_reasons.")


def reasons_of_mask(mask: int) -> frozenset:
    """The reason names of an NVML clock-event bit mask (:data:`REASON_BITS`)."""
    return frozenset(r for bit, r in REASON_BITS.items() if mask & bit)


def _mask(text) -> int | None:
    try:
        return int(str(text).strip(), 16) if text is not None else None
    except ValueError:
        return None


def reasons_per_row(smi) -> list | None:
    """Each row's set of active reason names from a :class:`costmodel.readers.nvidia_smi.SmiTrace`,
    or None when the capture has no clock-event field."""
    fields = [f for f in smi.text if f.startswith(_PREFIXES)]
    if not fields:
        return None
    n = len(smi)
    out = [set() for _ in range(n)]
    for f in fields:
        name = f.split(".", 1)[1]
        vals = smi.text[f]
        if name == "active":
            bad = []
            for i, v in enumerate(vals):
                m = _mask(v)
                if m is not None:
                    out[i] |= reasons_of_mask(m)
                elif v is not None and not _is_missing(str(v)):
                    bad.append(i)
            if bad:
                # said, never read as "no reason active": the trace's errors list carries it to the report
                lines = getattr(smi, "lines", None)
                at = f":{int(lines[bad[0]])}" if lines is not None and len(lines) > bad[0] else ""
                smi.errors.append(f"{getattr(smi, 'path', '')}{at}: {f}: {vals[bad[0]]!r} is not a clock-event bit "
                                  f"mask (hex, e.g. 0x0000000000000004); {len(bad)} row(s) like it, the first here: "
                                  "their reasons left out")
        elif name in _FIELDS:
            for i, v in enumerate(vals):
                if v is not None and str(v).strip().lower() == "active":
                    out[i].add(_FIELDS[name])
    return [frozenset(s) for s in out]


def throttle_shares(reasons) -> dict:
    """Share of samples (0-1) in which each throttling reason was active, for one GPU's rows."""
    n = len(reasons)
    if not n:
        return {}
    return {r: sum(r in s for s in reasons) / n for r in THROTTLING if any(r in s for s in reasons)}
