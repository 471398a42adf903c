"""Parse quantities with units (``80GiB``, ``3.35TB/s``, ``400Gbps``, ``700W``, ``2us``) into SI floats
(clocks into MHz, ``1.98GHz``: the unit their fields are named in).

Decimal prefixes are powers of 1000, binary prefixes (Ki, Mi, Gi, Ti) powers of 1024, ``b``/``bps``
are bits (IEC 80000-13).  Used once, at the edge where YAML is read (hardware/README.md).
"""
from __future__ import annotations

import re

from .errors import InputError

_PREFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}
_TIME = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_NUM = r"([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)"
_RX = re.compile(rf"^\s*{_NUM}\s*([A-Za-zµ/]*)\s*$")

#: the SI dimension each kind of field is converted into
KINDS = ("bytes", "bytes_per_s", "watts", "seconds", "celsius", "megahertz", "number")


def parse_quantity(value, kind: str, where: str, field: str) -> float:
    """Convert ``value`` (number or string with a unit) to an SI float of dimension ``kind``.

    Args:
        value: int/float (already SI) or a string such as ``"450GB/s"``.
        kind: one of :data:`KINDS`.
        where, field: file and field named in the error message.
    Returns:
        float in bytes, bytes/s, W, s, degrees C, MHz (the clock fields' unit) or a plain number.
    Raises:
        InputError: not a number, unknown unit, or a unit of the wrong dimension.
    """
    if isinstance(value, bool):
        raise InputError(where, field, f"expected a {kind} quantity, got a boolean {value!r}")
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        raise InputError(where, field, f"expected a {kind} quantity, got {type(value).__name__} {value!r}")
    m = _RX.match(value)
    if not m:
        raise InputError(where, field, f"cannot read {value!r} as a {kind} quantity")
    x, unit = float(m.group(1)), m.group(2)
    scale = _unit_scale(unit, kind)
    if scale is None:
        raise InputError(where, field,
                         f"unit {unit!r} in {value!r} is not one this field takes ({_EXAMPLES.get(kind, kind)})")
    return x * scale


#: the units each kind of field takes, as an error message lists them
_EXAMPLES = {"watts": "W, kW, MW", "seconds": "s, ms, us, ns", "celsius": "C", "bytes": "B, KB, MB, GB, KiB, ...",
             "bytes_per_s": "B/s, GB/s, Gbps, Gb/s, ...", "megahertz": "MHz, GHz"}
#: clock units in MHz
_CLOCK = {"Hz": 1e-6, "kHz": 1e-3, "MHz": 1.0, "GHz": 1e3}


def _unit_scale(unit: str, kind: str):
    if unit == "":
        return 1.0
    if kind == "seconds":
        return _TIME.get(unit)
    if kind == "watts":
        for p, s in _PREFIX.items():
            if unit == p + "W":
                return s
        return None
    if kind == "celsius":
        return 1.0 if unit in ("C", "degC") else None
    if kind == "megahertz":
        return _CLOCK.get(unit)
    if kind == "bytes":
        for p, s in _PREFIX.items():
            if unit == p + "B":
                return s
            if unit == p + "b" or unit == p + "bit":
                return s / 8
        return None
    if kind == "bytes_per_s":
        for p, s in _PREFIX.items():
            if unit in (p + "B/s", p + "Bps"):
                return s
            if unit in (p + "b/s", p + "bps", p + "bit/s"):
                return s / 8
        return None
    return None


def in_bits(value) -> bool:
    """Whether ``value`` is a string quantity whose unit counts bits (``400Gbps``, ``56Gb/s``, ``8kbit``):
    links quoted in bytes by their vendors (NVLink, xGMI) given in bits are a slip by a factor of 8."""
    m = _RX.match(value) if isinstance(value, str) else None
    return bool(m) and re.fullmatch(r"(?:[kKMGTP]i?)?(?:b|bit|bps|b/s|bit/s)", m.group(2)) is not None
