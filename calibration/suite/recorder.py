"""The records one rank measured, in the suite's JSONL format (:mod:`costmodel.readers.suite_jsonl`)."""
from __future__ import annotations

import json
import math
import sys
import time

from costmodel.readers.suite_jsonl import make_record


def _clean(v):
    """JSON-safe value: NaN/inf -> None, tuples -> lists, numpy/torch scalars -> Python numbers."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (list, tuple)):
        return [_clean(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if v is None or isinstance(v, (bool, int, str)):
        return v
    item = getattr(v, "item", None)
    if callable(item):
        return _clean(item())
    return str(v)


class Recorder:
    """Append-only list of this rank's records.

    Args:
        host, rank: the common fields of every record.
        slot: this rank's GPU slot (local GPU index; None on CPU), the ``slot`` of phase records.
        power_limit: callable returning the current power limit in W (or None) for phase records.
        verbose: print notes and progress to stderr (rank 0 only, usually).
    Raises (add):
        ValueError: unknown kind or a required field missing (from :func:`make_record`).
    """

    def __init__(self, host: str, rank: int, slot=None, power_limit=None, verbose: bool = False):
        self.host, self.rank, self.slot = host, int(rank), slot
        self.power_limit = power_limit or (lambda: None)
        self.verbose = verbose
        self.records: list[dict] = []

    def add(self, kind: str, **fields) -> dict:
        """Append a record of ``kind`` (fields per ``costmodel.readers.suite_jsonl.REQUIRED``) and return it."""
        rec = make_record(kind, self.host, self.rank, **{k: _clean(v) for k, v in fields.items()})
        self.records.append(rec)
        return rec

    def note(self, message: str, level: str = "info", **extra) -> dict:
        """A note record (level ``info`` or ``warning``); also printed when verbose."""
        self.log(f"{level}: {message}")
        return self.add("note", level=level, message=message, **extra)

    def phase(self, name: str, t_start_unix: float, t_end_unix: float, *, flops_per_s=None,
              hbm_bytes_per_s=None, link_bytes_per_s=None, dtype=None, **extra) -> dict:
        """A phase record: the window [t_start_unix, t_end_unix] (Unix s) of one benchmark on this
        GPU with the work rate achieved in it, averaged over the window (FLOP/s, HBM B/s, link busbw
        B/s = work done / window length, gaps such as barriers included; None = not applicable),
        for attributing monitor samples to work in the power fit."""
        return self.add("phase", name=name, slot=self.slot, t_start_unix=t_start_unix, t_end_unix=t_end_unix,
                        flops_per_s=flops_per_s, hbm_bytes_per_s=hbm_bytes_per_s,
                        link_bytes_per_s=link_bytes_per_s, power_limit_w=self.power_limit(), dtype=dtype,
                        **extra)

    def log(self, message: str):
        """Progress line on stderr when verbose."""
        if self.verbose:
            print(f"[calibration {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)

    def to_jsonl(self) -> str:
        """The records as JSON lines (no trailing newline when empty)."""
        return "\n".join(json.dumps(r, allow_nan=False, separators=(",", ":")) for r in self.records)
