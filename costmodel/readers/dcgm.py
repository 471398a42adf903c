"""Reader for NVIDIA DCGM ``dcgmi dmon`` output (per-entity field values streamed as text).

Format (NVIDIA Data Center GPU Manager, ``dcgmi dmon``,
https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-dmon.html):
``dcgmi dmon -e 155,150,203 [-d MS] [-c N] [-i 0,1 | -g GROUP]`` prints a header line with the short
name of each field (``#Entity   POWER   TMPTR   GPUTL``), a second line starting with ``ID`` that
carries the units of the fields that have one, placed under their column (``ID   W   C``; older DCGM
prints ``ID`` alone), then one line per entity per sample: the entity type (``GPU``, ``GPU-I`` for a
MIG GPU instance, ``GPU-CI``, ``Switch``, ``Link``, ``CPU``, ``Core``), its id, and one value per field,
whitespace-aligned.  A value the entity cannot report prints ``N/A``; the two header lines repeat
every screenful (about 25 samples) and whenever a new capture starts.  Profiling fields (1001-1012) are
ratios in [0, 1] (``0.888`` = 88.8 %); PCIe/NVLink byte fields (1009-1012) are bytes per second.
DCGM's "blank" sentinels (``DCGM_FP64_BLANK`` = 140737488355328.0 and the three values after it,
``DCGM_INT32_BLANK`` = 0x7ffffff0 .. +3, ``DCGM_INT64_BLANK`` = 0x7ffffffffffffff0 .. +3, dcgm_structs.h)
are read as NaN, never as numbers.

Field ids, names and units (:data:`DCGM_FIELDS`) are the ``DCGM_FI_*`` constants of ``dcgm_fields.h``
(https://github.com/NVIDIA/DCGM/blob/master/dcgmlib/dcgm_fields.h; documented at
https://docs.nvidia.com/datacenter/dcgm/latest/dcgm-api/dcgm-api-field-ids.html); the short column names
are the ones ``dcgmi dmon -l`` lists (set in ``dcgmlib/src/dcgm_fields.cpp``,
``DcgmFieldsPopulateOneFieldWithFormatting``), checked against the real captures under
``tests/data/readers/`` (``POWER``, ``TMPTR``, ``GPUTL``, ``MCUTL``, ``FBUSD``, ``ESVTL``, ``EDVTL``,
``GRACT`` .. ``FP16A``) and public ``dcgmi dmon -l`` listings (``MMTMP``, ``SMCLK``, ``TOTEC``).

Sources read with it: RTX 2080 Ti power/temperature capture (ahb-sjsu/agi-hpc test fixture), NVIDIA/DCGM
issues #244 (8 GPUs, profiling fields, ``N/A``) and #151 (MIG ``GPU-I`` entities), copied under
``tests/data/readers/``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from costmodel.errors import DcgmParseError
from ..files import read_text


@dataclass(frozen=True)
class DcgmField:
    """One DCGM field.

    Attributes:
        field_id: numeric id (``dcgmi dmon -e``).
        name: ``DCGM_FI_*`` constant of dcgm_fields.h.
        tag: long name (``dcgmi dmon -l`` "Long Name").
        short: column header ``dcgmi dmon`` prints (``dcgmi dmon -l`` "Short Name").
        unit: unit of the printed value (``"W"``, ``"C"``, ``"MHz"``, ``"%"``, ``"MiB"``, ``"mJ"``,
            ``"ratio"`` for the 0-1 profiling activities, ``"B/s"``, ``""`` for counts/states).
    """

    field_id: int
    name: str
    tag: str
    short: str
    unit: str


#: DCGM fields this reader knows by id (dcgm_fields.h); other ids are read with their printed header.
DCGM_FIELDS = {f.field_id: f for f in (
    DcgmField(100, "DCGM_FI_DEV_SM_CLOCK", "sm_clock", "SMCLK", "MHz"),
    DcgmField(101, "DCGM_FI_DEV_MEM_CLOCK", "memory_clock", "MMCLK", "MHz"),
    DcgmField(110, "DCGM_FI_DEV_APP_SM_CLOCK", "sm_app_clock", "SACLK", "MHz"),
    DcgmField(111, "DCGM_FI_DEV_APP_MEM_CLOCK", "mem_app_clock", "MACLK", "MHz"),
    DcgmField(140, "DCGM_FI_DEV_MEMORY_TEMP", "memory_temp", "MMTMP", "C"),
    DcgmField(150, "DCGM_FI_DEV_GPU_TEMP", "gpu_temp", "TMPTR", "C"),
    DcgmField(155, "DCGM_FI_DEV_POWER_USAGE", "power_usage", "POWER", "W"),
    DcgmField(156, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "total_energy_consumption", "TOTEC", "mJ"),
    DcgmField(160, "DCGM_FI_DEV_POWER_MGMT_LIMIT", "power_management_limit", "PMLMT", "W"),
    DcgmField(190, "DCGM_FI_DEV_PSTATE", "pstate", "PSTAT", ""),
    DcgmField(203, "DCGM_FI_DEV_GPU_UTIL", "gpu_utilization", "GPUTL", "%"),
    DcgmField(204, "DCGM_FI_DEV_MEM_COPY_UTIL", "mem_copy_utilization", "MCUTL", "%"),
    DcgmField(250, "DCGM_FI_DEV_FB_TOTAL", "fb_total", "FBTTL", "MiB"),
    DcgmField(251, "DCGM_FI_DEV_FB_FREE", "fb_free", "FBFRE", "MiB"),
    DcgmField(252, "DCGM_FI_DEV_FB_USED", "fb_used", "FBUSD", "MiB"),
    DcgmField(310, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "ecc_sbe_volatile_total", "ESVTL", ""),
    DcgmField(311, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "ecc_dbe_volatile_total", "EDVTL", ""),
    DcgmField(1001, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr_engine_active", "GRACT", "ratio"),
    DcgmField(1002, "DCGM_FI_PROF_SM_ACTIVE", "sm_active", "SMACT", "ratio"),
    DcgmField(1003, "DCGM_FI_PROF_SM_OCCUPANCY", "sm_occupancy", "SMOCC", "ratio"),
    DcgmField(1004, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active", "TENSO", "ratio"),
    DcgmField(1005, "DCGM_FI_PROF_DRAM_ACTIVE", "dram_active", "DRAMA", "ratio"),
    DcgmField(1006, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", "fp64_active", "FP64A", "ratio"),
    DcgmField(1007, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", "fp32_active", "FP32A", "ratio"),
    DcgmField(1008, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", "fp16_active", "FP16A", "ratio"),
    DcgmField(1009, "DCGM_FI_PROF_PCIE_TX_BYTES", "pcie_tx_bytes", "PCITX", "B/s"),
    DcgmField(1010, "DCGM_FI_PROF_PCIE_RX_BYTES", "pcie_rx_bytes", "PCIRX", "B/s"),
    DcgmField(1011, "DCGM_FI_PROF_NVLINK_TX_BYTES", "nvlink_tx_bytes", "NVLTX", "B/s"),
    DcgmField(1012, "DCGM_FI_PROF_NVLINK_RX_BYTES", "nvlink_rx_bytes", "NVLRX", "B/s"),
)}
_BY_SHORT = {f.short: f for f in DCGM_FIELDS.values()}

_ENTITY = re.compile(r"^(GPU-CI|GPU-I|GPU|Switch|NvSwitch|Link|CPU|Core|CX)\s+(\d+)(?:\s+|$)")
_COMMAND = re.compile(r"\bdcgmi\s+dmon\b.*?(?:-e|--field-id)\s+(\d+(?:,\d+)*)")
_SOURCE_LINE = re.compile(r"#\s*(SOURCE|SYNTHETIC):")
_BLANKS = ({140737488355328.0 + k for k in range(4)} | {float(0x7ffffff0 + k) for k in range(4)}
           | {float(0x7ffffffffffffff0 + k) for k in range(4)})


@dataclass
class DcgmTable:
    """Parsed ``dcgmi dmon`` output: one entry per data line (one entity at one sample).

    Attributes:
        fields: column short names in order of first appearance (``"POWER"``, ``"TMPTR"``, ...).
        field_ids: short name -> DCGM field id (from the ``-e`` list of a ``dcgmi dmon`` command line in
            the capture, else :data:`DCGM_FIELDS`), None when unknown.
        units: short name -> unit (the ``ID`` line's, else :data:`DCGM_FIELDS`'s, else ``""``).
        values: short name -> float array (n,), as printed; NaN for ``N/A``, DCGM blank sentinels and
            rows of a header block that lacked the field.
        entity: str array (n,): ``"GPU"``, ``"GPU-I"``, ``"GPU-CI"``, ``"Switch"``, ...
        entity_id: int array (n,): the entity's id (GPU index for ``"GPU"``).
        sample: int array (n,): 0-based sample number of the row for its entity.
        lines: int array (n,): 1-based line numbers.
        errors: ``"FILE:LINE: reason"`` for every skipped line.
        command: the ``dcgmi dmon`` command line found in the capture, or None.
        noise_lines: count of lines that are neither headers nor data (prompts, ``^C``, messages).
        path: the file read.
    """

    fields: list = field(default_factory=list)
    field_ids: dict = field(default_factory=dict)
    units: dict = field(default_factory=dict)
    values: dict = field(default_factory=dict)
    entity: np.ndarray = None
    entity_id: np.ndarray = None
    sample: np.ndarray = None
    lines: np.ndarray = None
    errors: list = field(default_factory=list)
    command: str | None = None
    noise_lines: int = 0
    path: Path | None = None

    def __len__(self):
        return 0 if self.lines is None else len(self.lines)

    def column(self, key):
        """Float array of a field given by short name (``"POWER"``), field id (155) or tag (``"power_usage"``).

        Raises:
            KeyError: the field is not in the capture; the message lists the fields that are.
        """
        if isinstance(key, (int, np.integer)):
            for s, fid in self.field_ids.items():
                if fid == int(key):
                    return self.values[s]
            key = DCGM_FIELDS[int(key)].short if int(key) in DCGM_FIELDS else str(key)
        elif key not in self.values:
            for f in DCGM_FIELDS.values():
                if key in (f.tag, f.name):
                    key = f.short
        if key not in self.values:
            raise KeyError(f"no field {key!r} in dcgmi dmon capture {self.path} (fields: {self.fields})")
        return self.values[key]


def _units_from_id_line(header_line, id_line, names):
    """Assign the unit tokens of the ``ID`` line to the columns whose header text starts at or before them."""
    starts = []
    pos = 0
    for n in ["#Entity"] + names:
        i = header_line.index(n, pos)
        starts.append(i)
        pos = i + len(n)
    units = {}
    for m in re.finditer(r"\S+", id_line):
        if m.start() == 0:  # "ID"
            continue
        col = max((k for k, s in enumerate(starts) if s <= m.start()), default=0)
        if col >= 1:
            units[names[col - 1]] = m.group(0)
    return units


_DETECT = re.compile(r"#\s*Entity\b")


def detect(head) -> bool:
    """True when a line (rank prefix removed) is the ``#Entity`` header of ``dcgmi dmon``
    (``head``: :class:`costmodel.readers.registry.Head`)."""
    return any(_DETECT.match(s) for s in head.unprefixed)


def read_dcgmi_dmon(path, strict=True) -> DcgmTable:
    """Parse a ``dcgmi dmon`` capture (any ``-e`` field list, any entities, repeated headers).

    Args:
        path: text file (str or Path).  Our copies' ``# SOURCE:`` line, shell prompts and messages
            (``dmon was stopped due to receiving a signal``) are skipped; a ``dcgmi dmon ... -e a,b,c``
            command line in the capture gives the field ids of the columns.
        strict: if True (default), raise :class:`DcgmParseError` after the whole file when any line was
            bad (it carries the good rows in ``.table``); False returns them with ``errors`` filled.
    Returns:
        :class:`DcgmTable` (values as printed: W, C, MHz, %, MiB, ratios 0-1, B/s).
    Raises:
        DcgmParseError: (strict) an entity line before any ``#Entity`` header, with a value count that
            differs from its header, or with a non-numeric value; the message names file and line.
        OSError: the file cannot be read.
    Format source: https://docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-dmon.html
    """
    path = Path(path)
    out = DcgmTable(path=path)
    names = None
    header_raw = None
    cmd_ids = None
    rows = []  # (lineno, entity, id, {short: value})
    for lineno, raw in enumerate(read_text(path, lenient=True).splitlines(), start=1):
        s = raw.strip()
        if not s or _SOURCE_LINE.match(s):
            continue
        where = f"{path}:{lineno}"
        c = _COMMAND.search(s)
        if c:
            out.command = out.command or s
            cmd_ids = [int(x) for x in c.group(1).split(",")]
            out.noise_lines += 1
            continue
        if re.match(r"#\s*Entity\b", s):
            header_raw = raw.rstrip()
            names = re.sub(r"^#\s*Entity", "", s).split()
            ids = cmd_ids if cmd_ids and len(cmd_ids) == len(names) else None
            for k, n in enumerate(names):
                if n not in out.field_ids or out.field_ids[n] is None:
                    out.field_ids[n] = ids[k] if ids else (_BY_SHORT[n].field_id if n in _BY_SHORT else None)
                if n not in out.units:
                    fid = out.field_ids[n]
                    out.units[n] = DCGM_FIELDS[fid].unit if fid in DCGM_FIELDS else ""
            continue
        if re.match(r"ID\b", s) and names is not None:
            for n, u in _units_from_id_line(header_raw, raw.rstrip(), names).items():
                out.units[n] = u
            continue
        m = _ENTITY.match(s)
        if not m:
            out.noise_lines += 1
            continue
        if names is None:
            out.errors.append(f"{where}: entity line before any '#Entity' header: {raw!r}")
            continue
        vals = s[m.end():].split()
        if len(vals) != len(names):
            out.errors.append(f"{where}: {len(vals)} values, expected {len(names)} ({' '.join(names)}): {raw!r}")
            continue
        try:
            rec = {}
            for n, v in zip(names, vals):
                if v.upper() == "N/A":
                    rec[n] = float("nan")
                    continue
                try:
                    x = float(v)
                except ValueError:
                    raise ValueError(f"field {n}: not a number: {v!r}") from None
                rec[n] = float("nan") if x in _BLANKS else x
        except ValueError as e:
            out.errors.append(f"{where}: {e}: {raw!r}")
            continue
        for n in names:
            if n not in out.fields:
                out.fields.append(n)
        rows.append((lineno, m.group(1), int(m.group(2)), rec))
    n = len(rows)
    out.lines = np.array([r[0] for r in rows], dtype=np.int64)
    out.entity = np.array([r[1] for r in rows], dtype=object)
    out.entity_id = np.array([r[2] for r in rows], dtype=np.int64)
    out.values = {f: np.array([r[3].get(f, np.nan) for r in rows], dtype=np.float64) for f in out.fields}
    seen = {}
    out.sample = np.zeros(n, dtype=np.int64)
    for i, r in enumerate(rows):
        k = (r[1], r[2])
        out.sample[i] = seen.get(k, 0)
        seen[k] = out.sample[i] + 1
    if strict and out.errors:
        raise DcgmParseError(out.errors, out)
    return out
