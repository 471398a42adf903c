"""The calibration suite's raw-measurement format: one JSON object per line (JSONL), schema version 1.

Written by ``python -m costmodel.calibration.run`` (one file per job: every rank's records gathered to rank 0)
and read by :func:`read_suite_jsonl`, the input of ``costmodel calibrate fit``.  Units are SI and sit
in the field names (``time_s``, ``bytes_per_s``, ``power_w``, ``temp_c``); times of day are Unix
seconds (``*_unix``).  Every record carries the common fields::

    suite    "costmodel-calibration"
    version  SUITE_VERSION (a reader refuses other versions line by line, naming file and line)
    kind     one of KINDS below
    host     hostname of the rank that measured it
    rank     global rank (torch.distributed), 0 when run without a process group

and the fields of its kind (``REQUIRED[kind]``; values may be null where the platform has no reading,
e.g. ``temp_c`` of a GPU without a temperature sensor, or ``gpu_name`` on CPU).  Collective records
follow the nccl-tests conventions (NVIDIA nccl-tests doc/PERFORMANCE.md): ``size_bytes`` is the
nccl-tests "size" (all_reduce / reduce_scatter: the input buffer; all_gather: the output buffer;
all_to_all: the send buffer; send_recv: the message), algbw = size / time and busbw = algbw x bus
factor (:func:`costmodel.collective.busbw_factor`).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from costmodel.errors import ReaderParseError
from ..files import read_text

SUITE = "costmodel-calibration"
SUITE_VERSION = 1
COMMON = ("suite", "version", "kind", "host", "rank")

REQUIRED = {
    # one per rank: where and on what the measurements were taken (serial-free GPU id: a hash of the UUID)
    "provenance": ("world_size", "local_rank", "node_rank", "n_nodes", "backend", "device", "gpu_name", "gpu_id",
                   "pci_bus_id", "slot", "driver_version", "cuda_version", "rocm_version", "nccl_version",
                   "torch_version", "python_version", "monitor", "power_limit_w", "power_limit_range_w",
                   "started_unix", "args"),
    # one per (dtype, shape): median of `iters` CUDA-event-timed runs after warm-up
    "gemm": ("dtype", "b", "m", "n", "k", "time_s", "flops_per_s", "iters", "source", "t_start_unix", "t_end_unix"),
    # one per (MoE model, EP, tokens, mode): a rank's routed expert FC1 GEMMs, ``counts`` rows per local expert
    # (calibration/suite/moe_gemm.py); mode "sequential" (one GEMM per expert) or "grouped" (one grouped GEMM)
    "moe_gemm": ("model", "ep", "tokens", "topk", "mode", "dtype", "counts", "n", "k", "time_s", "flops_per_s", "iters",
                 "t_start_unix", "t_end_unix"),
    # HBM bandwidth: op "copy" (read + write n bytes each) or "triad" (a = b + s*c: 3 arrays); bytes = bytes moved
    "hbm": ("op", "bytes", "time_s", "bytes_per_s", "iters", "t_start_unix", "t_end_unix"),
    # one per (collective, scope, group size, size), written by the group's first rank; time = max over ranks
    "collective": ("collective", "scope", "group_size", "ranks_per_node", "n_nodes", "size_bytes", "dtype", "time_s",
                   "algbw_bytes_per_s", "busbw_bytes_per_s", "iters", "t_start_unix", "t_end_unix"),
    # a GEMM alone and while a collective runs on another stream: overlap slowdown = overlapped / alone
    "overlap": ("dtype", "m", "n", "k", "collective", "size_bytes", "group_size", "gemm_alone_s", "gemm_overlapped_s",
                "comm_alone_s", "comm_overlapped_s"),
    # a time window of one benchmark on one GPU with the work rate achieved in it (for the power fit)
    "phase": ("name", "slot", "t_start_unix", "t_end_unix", "flops_per_s", "hbm_bytes_per_s", "link_bytes_per_s",
              "power_limit_w", "dtype"),
    # one monitor sample of one GPU (NVML / amdsmi), about 20 Hz
    "sample": ("slot", "t_unix", "power_w", "temp_c", "mem_temp_c", "sm_clock_mhz", "clock_event_reasons",
               "util_gpu_pct", "util_mem_pct", "power_limit_w"),
    # something the suite skipped or could not do, in words (level "info" or "warning")
    "note": ("level", "message"),
    # the last line of a complete run
    "end": ("finished_unix", "n_records"),
}
KINDS = tuple(REQUIRED)
# the fields of a kind that are counts (shapes, group sizes) and names, checked before any arithmetic
_WHOLE = {"gemm": ("b", "m", "n", "k"), "moe_gemm": ("ep", "tokens", "topk", "n", "k"),
          "collective": ("group_size", "ranks_per_node", "n_nodes")}
_NAMES = {"gemm": ("dtype",), "moe_gemm": ("model", "mode", "dtype"), "hbm": ("op",),
          "collective": ("collective", "scope", "dtype")}
SCOPES = ("intra_node", "inter_node")


def make_record(kind: str, host: str, rank: int, **fields) -> dict:
    """A record of ``kind`` with the common fields first.

    Raises:
        ValueError: unknown kind, or a field of ``REQUIRED[kind]`` missing from ``fields``.
    """
    if kind not in REQUIRED:
        raise ValueError(f"unknown record kind {kind!r} (known: {', '.join(KINDS)})")
    missing = [f for f in REQUIRED[kind] if f not in fields]
    if missing:
        raise ValueError(f"{kind} record lacks {', '.join(missing)}")
    return dict(suite=SUITE, version=SUITE_VERSION, kind=kind, host=host, rank=int(rank), **fields)


def check_record(rec) -> str | None:
    """Why ``rec`` (a parsed JSON value) is not a valid version-``SUITE_VERSION`` record, or None."""
    if not isinstance(rec, dict):
        return f"expected a JSON object, got {type(rec).__name__}"
    if rec.get("suite") != SUITE:
        return f"not a {SUITE} record (suite={rec.get('suite')!r})"
    if rec.get("version") != SUITE_VERSION:
        return (f"suite version {rec.get('version')!r}, this costmodel reads version {SUITE_VERSION} "
                "(re-run the suite of this costmodel version)")
    kind = rec.get("kind")
    if kind not in REQUIRED:
        return f"unknown kind {kind!r} (known: {', '.join(KINDS)})"
    missing = [f for f in COMMON + REQUIRED[kind] if f not in rec]
    if missing:
        return f"{kind} record lacks {', '.join(missing)}"
    for f in _WHOLE.get(kind, ()):
        v = rec.get(f)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            return f"{kind} record: {f} {v!r} is not a whole number >= 1"
    for f in _NAMES.get(kind, ()):
        if not isinstance(rec.get(f), str):
            return f"{kind} record: {f} {rec.get(f)!r} is not a name (a JSON string)"
    for f in {"collective": ("size_bytes",), "hbm": ("bytes",)}.get(kind, ()):
        v = rec.get(f)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            return f"{kind} record: {f} {v!r} is not a positive finite number"
    for f in ("time_s", "flops_per_s", "bytes_per_s") if kind in ("gemm", "moe_gemm", "hbm", "collective") else ():
        v = rec.get(f)
        if f in REQUIRED[kind] and (isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v)
                                    or v <= 0):
            return f"{kind} record: {f} {v!r} is not a positive finite number"
    # a rate that is not work / time: the time is in another unit than seconds (the suite writes both)
    work = (2.0 * rec["b"] * rec["m"] * rec["n"] * rec["k"], rec["flops_per_s"]) if kind == "gemm" else \
        (rec["bytes"], rec["bytes_per_s"]) if kind == "hbm" else None
    if work is not None and all(isinstance(x, (int, float)) for x in work):
        implied = work[0] / rec["time_s"]
        if not math.isclose(implied, work[1], rel_tol=0.02):
            return (f"{kind} record: time_s {rec['time_s']!r} gives {implied:.4g} per s, but its rate says "
                    f"{work[1]:.4g} (a time not in seconds?)")
    return None


@dataclass
class SuiteRun:
    """Parsed suite JSONL.

    Attributes:
        records: kind -> list of record dicts (each with ``_line``, its 1-based line in the file).
        errors: ``"FILE:LINE: reason"`` for every skipped line.
        path: the file read.
        complete: True when the file ends with an ``end`` record (False: the run was cut short).
        rejected: kind -> the ``"FILE:LINE: reason"`` of each skipped record of that kind.
    """

    records: dict = field(default_factory=lambda: {k: [] for k in KINDS})
    errors: list = field(default_factory=list)
    rejected: dict = field(default_factory=dict)
    path: Path | None = None
    complete: bool = False

    def __getitem__(self, kind):
        return self.records[kind]

    def __len__(self):
        return sum(len(v) for v in self.records.values())


def _measurement_key(rec: dict):
    """What one gemm, hbm or collective record measures (kind, then (field, value) pairs), which one
    rank (host, rank; a collective's group too: concurrent groups each write theirs) measures once in
    a run; None for the other kinds."""
    fields = {"gemm": ("dtype", "b", "m", "n", "k"), "hbm": ("op", "bytes"),
              "collective": ("collective", "scope", "group_size", "ranks_per_node", "n_nodes", "size_bytes", "dtype")}
    f = fields.get(rec["kind"])
    if f is None:
        return None
    group = rec.get("group_ranks")
    group = tuple(group) if isinstance(group, list) else group
    return (rec["kind"], *((k, rec[k]) for k in f), ("host", rec["host"]), ("rank", rec["rank"]), ("group", group))


def detect(head) -> bool:
    """True when the first non-``#`` line is a JSON object with ``"suite": "costmodel-calibration"``
    (``head``: :class:`costmodel.readers.registry.Head`)."""
    if not head.first.startswith("{"):
        return False
    try:
        rec = json.loads(head.first)
    except json.JSONDecodeError:
        return False
    return isinstance(rec, dict) and rec.get("suite") == SUITE


def read_suite_jsonl(path, strict=False) -> SuiteRun:
    """Read the suite's JSONL, keeping every valid line and naming each bad one.

    Args:
        path: JSONL file written by ``python -m costmodel.calibration.run``.
        strict: raise :class:`costmodel.errors.ReaderParseError` if any line was bad (it
            carries the good data); False (default) returns the good records with ``errors`` filled.
    Returns:
        :class:`SuiteRun`.
    Raises:
        ReaderParseError: (strict) bad lines: not JSON, another suite or version, unknown kind,
            missing fields, a measurement made twice; the message names file and line.
        ValueError: a record after the ``end`` record (two runs in one file), naming the line.
        OSError: the file cannot be read.
    """
    path = Path(path)
    out = SuiteRun(path=path)
    end_line, shapes = None, {}
    for lineno, raw in enumerate(read_text(path).splitlines(), start=1):
        s = raw.strip()
        if not s:
            continue
        where = f"{path}:{lineno}"
        if end_line is not None:
            raise ValueError(f"{where}: a record after the run's 'end' record (line {end_line}): two runs in one "
                             "file (concatenated?); give each run its own file")
        try:
            rec = json.loads(s)
        except json.JSONDecodeError as e:
            out.errors.append(f"{where}: not JSON ({e.msg}; a truncated last line?): {s[:80]!r}")
            continue
        why = check_record(rec)
        if why:
            out.errors.append(f"{where}: {why}")
            if isinstance(rec, dict) and rec.get("kind") in REQUIRED:
                out.rejected.setdefault(rec["kind"], []).append(f"{where}: {why}")
            continue
        key = _measurement_key(rec)
        if key is not None and key in shapes:
            said = ", ".join(f"{k} {v}" for k, v in key[1:] if k not in ("host", "rank", "group"))
            out.errors.append(f"{where}: {rec['kind']} {said} of rank {rec['rank']} again (first at "
                              f"line {shapes[key]}): the suite measures each once, so this record is left out")
            continue
        if key is not None:
            shapes[key] = lineno
        rec["_line"] = lineno
        out.records[rec["kind"]].append(rec)
        if rec["kind"] == "end":
            out.complete, end_line = True, lineno
    if strict and out.errors:
        raise ReaderParseError(out.errors, out, "suite JSONL lines")
    return out
