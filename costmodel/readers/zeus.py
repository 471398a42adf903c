"""Reader for the Zeus (NSDI'23) power-limit trace summaries.

Format (ml-energy/zeus, ``examples/research_reproducibility/zeus_nsdi23/trace/summary_power_<gpu>.csv``;
You, Chung, Chowdhury, "Zeus: Understanding and Optimizing GPU Energy Consumption of DNN Training",
NSDI 2023): CSV with header ``dataset,network,batch_size,optimizer,power_limit,time_per_epoch,
average_power``; one row per (workload, batch size, optimizer, GPU power limit): the power limit in W
set with NVML, the measured time per epoch in s and the average GPU power over the epoch in W (NVML).
Lines starting with ``#`` (our copies' source header) are skipped.

Sources read with it: the V100, A40, RTX6000 and P100 summaries copied to
``hardware/profiles/data/zeus_nsdi23_power_vs_powerlimit_<gpu>.csv``.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from costmodel.errors import ZeusParseError
from ..files import read_text

_COLUMNS = ("dataset", "network", "batch_size", "optimizer", "power_limit", "time_per_epoch", "average_power")


@dataclass(frozen=True)
class ZeusRow:
    """One (workload, power limit) measurement.

    Attributes:
        dataset, network, optimizer: workload names as printed.
        batch_size: samples per batch.
        power_limit_w: NVML power limit, W.
        time_per_epoch_s: measured epoch time, s.
        average_power_w: average GPU power over the epoch, W.
        line: 1-based line number in the file.
    """

    dataset: str
    network: str
    batch_size: int
    optimizer: str
    power_limit_w: float
    time_per_epoch_s: float
    average_power_w: float
    line: int

    @property
    def workload(self):
        """``(dataset, network, batch_size, optimizer)``: the key of one power-limit sweep."""
        return (self.dataset, self.network, self.batch_size, self.optimizer)


@dataclass
class ZeusTable:
    """Result of :func:`read_zeus_csv`: good rows and ``"FILE:LINE: reason"`` errors."""

    rows: list = field(default_factory=list)
    errors: list = field(default_factory=list)

    def sweeps(self):
        """dict workload -> rows sorted by power limit (one power-limit sweep per workload)."""
        out = {}
        for r in self.rows:
            out.setdefault(r.workload, []).append(r)
        return {k: sorted(v, key=lambda r: r.power_limit_w) for k, v in out.items()}


def detect(head) -> bool:
    """True when the first non-``#`` line is the Zeus ``summary_power_<gpu>.csv`` header
    (``head``: :class:`costmodel.readers.registry.Head`)."""
    return head.first.replace(" ", "") == ",".join(_COLUMNS)


def read_zeus_csv(path, strict=True) -> ZeusTable:
    """Parse a Zeus ``summary_power_<gpu>.csv``.

    Args:
        path: CSV file.
        strict: raise :class:`ZeusParseError` after the whole file if any row was bad (good rows kept).
    Returns:
        :class:`ZeusTable` (W, s as printed).
    Raises:
        ZeusParseError: (strict) a row has a missing or non-numeric / non-positive field; names file and line.
        ValueError: the header is not the Zeus header.
    """
    path = Path(path)
    lines = [(i, ln) for i, ln in enumerate(read_text(path).splitlines(), start=1)
             if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise ValueError(f"{path}: empty Zeus CSV")
    head_no, head = lines[0]
    cols = [c.strip() for c in head.split(",")]
    if tuple(cols) != _COLUMNS:
        raise ValueError(f"{path}:{head_no}: expected Zeus header {','.join(_COLUMNS)}, got {head!r}")
    out = ZeusTable()
    for (lineno, raw), rec in zip(lines[1:], csv.reader(ln for _, ln in lines[1:])):
        where = f"{path}:{lineno}"
        if len(rec) != len(_COLUMNS):
            out.errors.append(f"{where}: {len(rec)} fields, expected {len(_COLUMNS)}: {raw!r}")
            continue
        try:
            pl, t, p = float(rec[4]), float(rec[5]), float(rec[6])
            if not (pl > 0 and t > 0 and p > 0):
                raise ValueError("power_limit, time_per_epoch and average_power must be positive")
            out.rows.append(ZeusRow(rec[0].strip(), rec[1].strip(), int(rec[2]), rec[3].strip(), pl, t, p, lineno))
        except ValueError as e:
            out.errors.append(f"{where}: {e}: {raw!r}")
    if strict and out.errors:
        raise ZeusParseError(out.errors, out.rows)
    return out
