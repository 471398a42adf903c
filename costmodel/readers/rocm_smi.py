"""``rocm-smi`` text (AMD GPUs): one record per GPU per snapshot (power, temperature, SCLK, utilisation).

Two layouts, both printed under the ``ROCm System Management Interface`` banner, one snapshot per banner:

* the concise table (``rocm-smi``): ROCm 6 prints ``Device [Model : Revision] Temp (Junction) Power
  (Socket) Partitions SCLK MCLK Fan Perf PwrCap VRAM% GPU%`` with each device's name on the next line;
  ROCm 5 prints ``GPU Temp AvgPwr SCLK MCLK Fan Perf PwrCap VRAM% GPU%``.  Per row: the temperature is
  the first ``NN.N°C``/``NN.Nc`` value, the power the first ``W`` value (``N/A`` is NaN), the cap the
  last ``W`` value, the SCLK the first ``Mhz`` value, the utilisation the last ``%`` value.
* the long listing (``rocm-smi -a`` or ``--showpower --showtemp --showuse --showclocks``), lines
  ``GPU[i] : Key: value``: ``Temperature (Sensor junction) (C)``, ``Current Socket Graphics Package
  Power (W)`` or ``Average Graphics Package Power (W)``, ``sclk clock level: L: (NNNMhz)``, ``GPU use
  (%)``, ``Max Graphics Package Power (W)``.

An MI250 OAM appears as two devices (GCDs); only its primary die reports the package's power and cap,
the secondary ``N/A`` and a cap of 0 W (rocm_smi_lib#160: "Primary die ... shows total (primary +
secondary) socket power"). The reader keeps what is printed (``power_w`` NaN on the secondary) and
``package_power_w`` on the primary; :func:`power_trace_from_rocm_smi` splits a package's power evenly
over its two GCDs, the per-GCD power the model predicts (costmodel/specs: devices_per_package).
The temperature is the sensor the header names: the junction (hotspot) on ROCm 6, the one AMD's
slowdown and shutdown limits refer to, or the die edge on older rocm-smi (``temp_sensor``).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from costmodel.errors import ReaderParseError
from ..files import open_text

BANNER = "ROCm System Management Interface"
_ROW = re.compile(r"^(\d+)\s+(?:\[|\d+(?:\.\d+)?\s*(?:°C|c)\b)")
_TEMP = re.compile(r"(\d+(?:\.\d+)?)\s*(?:°C|c)\b")
_WATT = re.compile(r"(\d+(?:\.\d+)?)W\b|N/A")
_MHZ = re.compile(r"(\d+(?:\.\d+)?)Mhz", re.IGNORECASE)
_PCT = re.compile(r"(\d+(?:\.\d+)?)%")
_LONG = re.compile(r"^GPU\[(\d+)\]\s*:\s*(.*?):\s*(.*)$")
_NAME = re.compile(r"^\s+(AMD\s.*?|Instinct.*?)\s*$")


class RocmSmiParseError(ReaderParseError):
    """``rocm-smi`` text (strict mode) with bad lines; ``rows`` are the good records."""

    what = "rocm-smi lines"


@dataclass
class RocmSmi:
    """Parsed ``rocm-smi`` text.

    Attributes:
        gpus: one dict per GPU per snapshot, in file order: ``snapshot``, ``index``, ``name`` (or None),
            ``power_w``, ``cap_w``, ``temp_c``, ``sclk_mhz``, ``util_gpu_pct`` (float, NaN when not
            printed), ``line``.
        temp_sensor: the sensor of the concise table's temperature column as its header names it
            (``junction`` on ROCm 6, ``edge`` where it says DieEdge), ``junction`` for the long listing.
        errors: ``"FILE:LINE: reason"`` of every bad line.  path: the file read.
    """

    gpus: list = field(default_factory=list)
    temp_sensor: str = "junction"
    errors: list = field(default_factory=list)
    path: Path | None = None

    def __len__(self):
        return len(self.gpus)


def detect(head) -> bool:
    """True when the file's first lines hold the ``ROCm System Management Interface`` banner."""
    return any(BANNER in s for s in head.lines[:50])


def _record(snap, idx, ln):
    return dict(snapshot=snap, index=idx, name=None, power_w=np.nan, cap_w=np.nan, temp_c=np.nan, sclk_mhz=np.nan,
                util_gpu_pct=np.nan, line=ln)


def _concise(rec, s, where, errors):
    t, w, c, u = _TEMP.search(s), _WATT.findall(s), _MHZ.search(s), _PCT.findall(s)
    if t is None or not w or c is None or not u:
        errors.append(f"{where}: a device row without temperature, power, SCLK and utilisation: {s!r}")
        return False
    rec.update(temp_c=float(t.group(1)), power_w=float(w[0]) if w[0] else np.nan,
               cap_w=float(w[-1]) if len(w) > 1 and w[-1] else np.nan, sclk_mhz=float(c.group(1)),
               util_gpu_pct=float(u[-1]))
    return True


_LONG_KEYS = {"temperature (sensor junction) (c)": "temp_c", "current socket graphics package power (w)": "power_w",
              "average graphics package power (w)": "power_w", "gpu use (%)": "util_gpu_pct",
              "max graphics package power (w)": "cap_w"}


def _long(recs, snap, m, ln, where, errors):
    idx, key, value = int(m.group(1)), m.group(2).strip().lower(), m.group(3).strip()
    rec = recs.setdefault(idx, _record(snap, idx, ln))
    if key == "sclk clock level":
        c = _MHZ.search(value)
        if c:
            rec["sclk_mhz"] = float(c.group(1))
        return
    if key in ("card series", "card model"):
        rec["name"] = rec["name"] or value
        return
    name = _LONG_KEYS.get(key)
    if name is None:
        return
    if value.upper().startswith("N/A"):
        return
    try:
        rec[name] = float(value.split()[0])
    except (ValueError, IndexError):            # not a number, or nothing after the colon
        errors.append(f"{where}: {m.group(2).strip()}: {value!r} is not a number")


def read_rocm_smi(path, strict=True) -> RocmSmi:
    """Read a ``rocm-smi`` capture (module docstring): one or many snapshots.

    Raises:
        RocmSmiParseError: strict and a bad line, or no banner at all.
        OSError: the file cannot be read.
    """
    path = Path(path)
    out = RocmSmi(path=path)
    snap, last, long_recs = -1, None, {}

    def flush():
        out.gpus.extend(long_recs[i] for i in sorted(long_recs))
        long_recs.clear()
    with open_text(path, lenient=True) as fh:
        for ln, raw in enumerate(fh, 1):
            line = raw.rstrip("\n")
            s = line.strip()
            if BANNER in s:
                flush()
                snap, last = snap + 1, None
                continue
            if snap < 0 or not s or s.startswith("=") or s.startswith("#"):
                continue
            if "SCLK" in s and ("GPU%" in s or "PwrCap" in s):       # the concise table's header
                out.temp_sensor = "edge" if "edge" in s.lower() else "junction"
                continue
            where = f"{path}:{ln}"
            m = _LONG.match(s)
            if m:
                _long(long_recs, snap, m, ln, where, out.errors)
                continue
            if _ROW.match(s):
                rec = _record(snap, int(s.split()[0]), ln)
                if _concise(rec, s, where, out.errors):
                    out.gpus.append(rec)
                    last = rec
                continue
            n = _NAME.match(line)
            if n and last is not None and last["name"] is None:
                last["name"] = n.group(1)
    flush()
    if snap < 0:
        out.errors.append(f"{path}: no '{BANNER}' banner: not rocm-smi output")
    if strict and out.errors:
        raise RocmSmiParseError(out.errors, out.gpus)
    return out


def per_gcd_power_w(q: RocmSmi) -> np.ndarray:
    """Each record's power, a package's split evenly over a primary die and the secondary that
    follows it with no power and a 0 W cap (MI250: module docstring); others as printed."""
    p = np.array([g["power_w"] for g in q.gpus], dtype=np.float64)
    for i in range(len(q.gpus) - 1):
        a, b = q.gpus[i], q.gpus[i + 1]
        if (a["snapshot"] == b["snapshot"] and np.isfinite(a["power_w"]) and not np.isfinite(b["power_w"])
                and b["cap_w"] == 0.0):
            p[i] = p[i + 1] = a["power_w"] / 2.0
    return p
