"""Reader for NVIDIA nccl-tests stdout (all_reduce_perf, all_gather_perf, sendrecv_perf, ...).

Format (NVIDIA nccl-tests, https://github.com/NVIDIA/nccl-tests, doc/PERFORMANCE.md): one row per
message size, ``size count type [redop] [root] | time algbw busbw #wrong`` for the out-of-place and
then the in-place run; time in microseconds, algbw and busbw in GB/s (1e9 B/s).  Lines whose first
non-prefix character is ``#`` are comments (header, "Avg bus bandwidth", ...).  Launchers prefix every
line with the rank: ``0: `` (Slurm srun) or ``[1,0]<stdout>:`` (Open MPI ``--tag-output``); both are
stripped.  Older nccl-tests (< 2.10) omit the ``root`` column and all_to_all omits ``redop``; the
reader accepts 0-2 columns between ``type`` and the 8 timing columns.  A line that is only ``...`` is
an elision mark left by an author who cut rows; it is skipped.  A header line starts a new table
(``table`` index in each row), so a file with several captures keeps them apart.  Lines that are not
comments and do not start with two integers (``NCCL INFO`` debug lines, launcher and ssh messages,
shell prompts) are not data: they are counted in ``meta["noise_lines"]``, never reported as errors;
a line that starts like a data row (size and count) but does not complete one is an error; the same
rank printed by two processes before any table (a binary built without MPI under mpirun/srun: every
process prints its own ``Rank 0``) makes the whole file an error.  A
``# SOURCE:`` / ``# SYNTHETIC:`` line (the provenance line of our copies) is skipped entirely.

Metadata (``NcclTable.meta``), from the lines nccl-tests and NCCL print around the table
(nccl-tests ``src/common.cu``: ``# nThread .. nGpus .. minBytes ..``, ``#  Rank  0 Group  0 Pid
12345 on host device  0 [0x1b] NVIDIA H100 80GB HBM3``, since v2.17 ``# nccl-tests version 2.18.3
nccl-headers=23004 nccl-library=23004`` and ``# Collective test starting: all_reduce_perf``; NCCL
itself prints ``NCCL version 2.18.5+cuda12.2`` with ``NCCL_DEBUG=VERSION`` or ``INFO``).

Sources read with it: AWS awsome-distributed-training nccl-tests README (p5 / p4de, 2 nodes), li-plus
playground cuda/nccl.md (A100 sendrecv), NCCL GitHub issue excerpts; with rank lines and metadata, the
NRIS Olivia GH200 (16 ranks / 4 nodes), OCI A100 (16 / 2) and EKS T4 (NCCL_DEBUG=INFO) logs under
``tests/data/readers/``.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from costmodel.errors import NcclTestsParseError, NoUsableDataError
from ..files import read_text

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:)\s?")
_HEADER = re.compile(r"#\s+size\s+count\s+type")
_PROVENANCE = re.compile(r"#\s*(SOURCE|SYNTHETIC):")  # our copies' first line: about the copy, not the run
_RANK = re.compile(r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+(\d+)\s+)?Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)"
                   r"\s+\[([^\]]*)\]\s*(.*?)\s*$")
# an abbreviated block, one line per host ("#  Rank  0 .. Rank  7 on h100a-gpu-0001  NVIDIA H100 80GB HBM3"),
# as pasted in cluster documentation (edwardsp/azcluster walkthrough.md)
_RANK_RANGE = re.compile(r"^#?\s*Rank\s+(\d+)\s*\.\.\.?\s*Rank\s+(\d+)\s+on\s+(\S+)\s*(.*?)\s*$")
#: the most ranks an abbreviated "Rank a ... Rank b" line may span: 2^20, ten times the largest GPU jobs
#: reported (about 100,000 GPUs); a damaged bound beyond it would expand into millions of rank records
MAX_RANK_RANGE = 1 << 20
_NCCL_VERSION = re.compile(r"NCCL version\s+(\d+\.\d+\.\d+)(?:[-+]?cuda(\d+(?:\.\d+)*))?", re.IGNORECASE)
_TESTS_VERSION = re.compile(r"nccl-tests version\s+(\S+)(?:\s+\(\S+\))?(?:.*?nccl-library=(\d+))?")
_STARTING = re.compile(r"Collective test starting:\s*(\S+)")
_BINARY = re.compile(r"(?<![A-Za-z0-9])((?:all_reduce|all_gather|reduce_scatter|alltoall|sendrecv|broadcast|reduce|"
                     r"gather|scatter|hypercube)_perf(?:_mpi)?)\b")
_PARAMS_INT = re.compile(r"\b(nThread|nGpus|minBytes|maxBytes)\s+(\d+)")
_PARAMS_KV = re.compile(r"((?:warmup |agg )?[A-Za-z_]+):\s*(\S+)")

# (canonical name, pattern) in priority order; the names of the compound ones are costmodel.collective.COLLECTIVES
_COLLECTIVE_PATTERNS = (
    ("all_reduce", r"all_?reduce"),
    ("reduce_scatter", r"reduce_?scatter"),
    ("all_gather", r"all_?gather"),
    ("all_to_all", r"all_?to_?all"),
    ("send_recv", r"send_?recv"),
    ("broadcast", r"broadcast|bcast"),
    ("reduce", r"(?<![a-z])reduce"),
    ("gather", r"(?<![a-z])gather"),
    ("scatter", r"(?<![a-z])scatter"),
)


def collective_from_name(text):
    """The collective a file name, binary name or command line refers to, or None.

    Recognises ``all_reduce`` / ``allreduce`` / ``all-reduce`` / ``AllReduce``, ``all_gather``,
    ``reduce_scatter``, ``alltoall`` / ``all_to_all``, ``sendrecv`` / ``send_recv`` (and nccl-tests'
    ``broadcast``, ``reduce``, ``gather``, ``scatter``), case-insensitively with ``-``, ``_`` or nothing
    between the words.  When several occur the first in the text wins (``reduce`` inside
    ``all_reduce`` counts as ``all_reduce``).

    Args:
        text: a file name (``aws_p5_2node_16xH100_allreduce.txt``), a binary (``all_reduce_perf``) or any
            string; ``os.PathLike`` is accepted (its name is used).
    Returns:
        ``"all_reduce"``, ``"all_gather"``, ``"reduce_scatter"``, ``"all_to_all"`` or ``"send_recv"`` (the
        names of :data:`costmodel.collective.COLLECTIVES`), ``"broadcast"``, ``"reduce"``, ``"gather"``,
        ``"scatter"``, or None when no collective is named.
    Source: binary names of NVIDIA nccl-tests (https://github.com/NVIDIA/nccl-tests, README.md).
    """
    if text is None:
        return None
    if isinstance(text, Path):
        text = text.name
    raw = str(text).replace("-", "_")
    t = raw.lower()
    # a name starts a word: after a non-letter, or at a capital (ncclAllReduce), never inside one
    # (the "all_reduce" of small_reduce_scatter)
    starts = lambda m: m.start() == 0 or not t[m.start() - 1].isalpha() or raw[m.start()].isupper()
    best = None
    for name, pat in _COLLECTIVE_PATTERNS:
        m = next((x for x in re.finditer(pat, t) if starts(x)), None)
        if m and (best is None or m.start() < best[0] or (m.start() == best[0] and m.end() - m.start() > best[1])):
            best = (m.start(), m.end() - m.start(), name)
    return best[2] if best else None


def _nccl_code_version(code):
    """NCCL_VERSION_CODE -> "X.Y.Z" (X*10000+Y*100+Z since NCCL 2.9, X*1000+Y*100+Z before)."""
    c = int(code)
    if c >= 20900:
        return f"{c // 10000}.{(c // 100) % 100}.{c % 100}"
    return f"{c // 1000}.{(c // 100) % 10}.{c % 100}"


def _params(line):
    out = {k: int(v) for k, v in _PARAMS_INT.findall(line)}
    for k, v in _PARAMS_KV.findall(line):
        k = k.strip().replace(" ", "_")
        out[k] = int(v) if re.fullmatch(r"-?\d+", v) else v
    return out


@dataclass(frozen=True)
class NcclRow:
    """One measured size of one nccl-tests run (one placement).

    Attributes:
        size_bytes: nccl-tests "size" (per-rank buffer, bytes).
        count: elements.
        type: element type name as printed (``float``, ``half``, ...).
        placement: ``"out-of-place"`` or ``"in-place"``.
        time_us: time per operation, microseconds.
        algbw: size / time, GB/s (1e9 B/s).
        busbw: algbw x nccl-tests bus factor, GB/s.
        table: index of the table (header block) in the file, from 0.
        line: 1-based line number in the file.
        wrong: nccl-tests ``#wrong`` of this placement (elements that failed validation; > 0 means
            the data was corrupted and the time is suspect), None when printed ``N/A`` (``-c 0``).
        redop: the ``redop`` column (``sum``, ``none`` ...), None when the row has none; nccl-tests
            prints ``none`` for all_gather, alltoall, broadcast, gather and scatter (src/*.cu TimeTest).
    """

    size_bytes: int
    count: int
    type: str
    placement: str
    time_us: float
    algbw: float
    busbw: float
    table: int
    line: int
    wrong: int | None = 0
    redop: str | None = None


def _empty_meta():
    return dict(collective=None, binary=None, command=None, nccl_version=None, cuda_version=None,
                nccl_tests_version=None, params={}, ranks=[], n_ranks=None, hosts=[], n_nodes=None,
                ranks_per_node=None, gpu_name=None, gpu_names=[], wrong_lines=[], failed_lines=[], noise_lines=0,
                table_collectives=[], ranks_truncated=False, time_algbw_ratios=[])


@dataclass
class NcclTable:
    """Result of :func:`read_nccl_tests`: good rows, ``"FILE:LINE: reason"`` errors and metadata.

    Attributes:
        rows: :class:`NcclRow` list (file order; out-of-place then in-place of each size).
        errors: ``"FILE:LINE: reason"`` for every bad data line.
        meta: what the capture says about the run (None / empty where it does not say):

            * ``collective``: canonical name (:func:`collective_from_name`) of the nccl-tests binary
              named in the capture (``# Collective test starting:`` line, else a command line, else a
              comment); None if the capture names none (use ``collective_from_name(path.name)``).
            * ``binary``: that binary (``"all_reduce_perf"``, ``"all_reduce_perf_mpi"``);
              ``command``: the first non-comment line that runs it.
            * ``nccl_version`` (``"2.18.5"``) and ``cuda_version`` (``"12.2"``) from ``NCCL version``,
              else the version from ``nccl-library=CODE``; ``nccl_tests_version``.
            * ``params``: the ``# nThread`` line as a dict (``nThread``, ``nGpus``, ``minBytes``,
              ``maxBytes`` int; ``step`` str like ``"2(factor)"``; ``warmup_iters``, ``iters``,
              ``agg_iters``, ``validation``, ``graph`` ...).
            * ``ranks``: one dict per ``# Rank`` line (``rank, group, pid, host, device, bus_id,
              gpu_name``; group None in old nccl-tests), first occurrence of each rank;
              ``n_ranks``; ``hosts`` in order of first appearance; ``n_nodes``; ``ranks_per_node``
              (int when every host has the same count, else None); ``gpu_name`` (the one name, or
              None when they differ) and ``gpu_names`` (sorted distinct names). An abbreviated line
              ``Rank 0 .. Rank 7 on HOST NAME`` gives those ranks on HOST (pid, device, bus_id None).
            * ``ranks_truncated``: True when a rank block ends in ``...`` (nccl-tests cuts a process's
              device lines at 2,048 characters, src/util.cu ``MAX_LINE``): the ranks listed are a
              lower bound, so ``n_ranks``, ``n_nodes`` and ``ranks_per_node`` are None.
            * ``wrong_lines``: lines whose ``#wrong`` is > 0 (corrupted results); ``failed_lines``: the
              ``# Out of bounds values : N FAILED`` trailers (nccl-tests' verdict on a test whose
              validation failed, src/common.cu); ``noise_lines``:
              count of non-data, non-comment lines skipped (NCCL INFO, launcher messages).
            * ``table_collectives``: per table (by index), the collective of the test printing it
              (its ``# Collective test starting`` line or ``*_perf`` command line), None when unsaid.
            * ``time_algbw_ratios``: for each row left out because its time and algbw disagree, the
              bandwidth its time implies over the printed algbw (1000: a time in ms under the us header).
    """

    rows: list = field(default_factory=list)
    errors: list = field(default_factory=list)
    meta: dict = field(default_factory=_empty_meta)

    def select(self, placement="out-of-place", table=0, suspect=False):
        """Rows of one placement and table, sorted by size; without ``suspect``, not the rows whose
        ``#wrong`` is above 0 (nccl-tests found corrupted results: the time is of a broken run)."""
        return sorted((r for r in self.rows if r.placement == placement and r.table == table
                       and (suspect or not r.wrong)), key=lambda r: r.size_bytes)


#: nccl-tests' trailer of a test whose results failed validation (src/common.cu: "# Out of bounds values : %d %s",
#: OK or FAILED)
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*[1-9]\d*\s+FAILED\b")


def _num(tok):
    return float(tok)


def _wrong(tok):
    return int(tok) if re.fullmatch(r"\d+", tok) else None


def _is_int(tok):
    return re.fullmatch(r"\d+", tok) is not None


def _is_num(tok):
    """A number as nccl-tests prints its columns (N/A for a skipped in-place run counts)."""
    return tok == "N/A" or re.fullmatch(r"-?\d+(\.\d+)?(e[-+]?\d+)?", tok) is not None


def _row_problem(size: int, placement: str, t: float, algbw: float, busbw: float = 0.0):
    """Why a parsed row's time cannot be used, or None.  The time must be a positive number, and
    nccl-tests computes the algbw it prints from it (algBw = size / 1e9 / seconds, src/common.cu):
    printed to two decimals each, they agree within their rounding, so a row whose columns disagree
    was edited or mixes units (a time in ms under the us header)."""
    if not (math.isfinite(t) and t > 0):
        return f"{placement} time {t!r} us is not a positive number"
    for name, v in (("algbw", algbw), ("busbw", busbw)):
        if not (math.isfinite(v) and v >= 0):
            return f"{placement} {name} {v!r} GB/s is not a number >= 0"
    implied = size / (t * 1e3) if size > 0 else 0.0
    if algbw < 0.005 and size >= 2 ** 20 and implied >= 0.01:
        # printed 0.00 (under 0.005 GB/s) where the size and time give twice that or more; from 1 MiB up
        # (0.00 there would take 200 ms or more), where no unit slip of a tiny row explains it
        return (f"{placement} time {t:g} us and algbw {algbw:g} GB/s disagree: {size} B in {t:g} us is "
                f"{implied:.4g} GB/s (an edited column, or a failed measurement)")
    if algbw >= 0.05 and size > 0:
        tol = 0.02 + 0.006 / t + 0.006 / algbw
        if abs(implied / algbw - 1) > tol:
            return (f"{placement} time {t:g} us and algbw {algbw:g} GB/s disagree: {size} B in {t:g} us is "
                    f"{implied:.4g} GB/s (a time in other units, or an edited column)")
    return None


def _finish_meta(meta):
    ranks = meta["ranks"]
    if meta["ranks_truncated"]:
        ranks = []
    meta["n_ranks"] = len(ranks) or None
    hosts = []
    for r in ranks:
        if r["host"] not in hosts:
            hosts.append(r["host"])
    meta["hosts"] = hosts
    meta["n_nodes"] = len(hosts) or None
    counts = {h: sum(r["host"] == h for r in ranks) for h in hosts}
    meta["ranks_per_node"] = next(iter(counts.values())) if counts and len(set(counts.values())) == 1 else None
    names = sorted({r["gpu_name"] for r in meta["ranks"] if r["gpu_name"]})
    meta["gpu_names"] = names
    meta["gpu_name"] = names[0] if len(names) == 1 else None
    if meta["binary"] and not meta["collective"]:
        meta["collective"] = collective_from_name(meta["binary"])


_DETECT = re.compile(r"^#\s*(?:size\s+count\s+type|nThread\s+\d|Collective test starting|Rank\s+\d+\s+(?:Group|Pid|\.\.))")


def detect(head) -> bool:
    """True when a line (rank prefix removed) is a ``#  size  count  type`` table header, a ``# nThread``
    parameter line, a ``# Collective test starting`` line or a ``#  Rank  0 ...`` device line
    (``head``: :class:`costmodel.readers.registry.Head`)."""
    return any(_DETECT.match(s) for s in head.unprefixed)


def _add_rank(meta, seen_ranks, rank, **info):
    if rank not in seen_ranks:                  # first occurrence of each rank
        seen_ranks.add(rank)
        meta["ranks"].append(dict(rank=rank, **info))


def _rank_line(line, meta, seen_ranks, block_ranks):
    """``(is a rank line, (rank, first (host, pid, device), this one) when the rank was printed by
    another process in this block, else None)``; records the rank(s) in ``meta``."""
    m = _RANK_RANGE.match(line)
    if m:
        for rank in range(int(m.group(1)), int(m.group(2)) + 1):
            _add_rank(meta, seen_ranks, rank, group=None, pid=None, host=m.group(3), device=None, bus_id=None,
                      gpu_name=m.group(4) or None)
        return True, None
    if re.match(r"^#?\s*Rank\s+\d+\b", line) and line.endswith("...") or (line == "..." and block_ranks):
        meta["ranks_truncated"] = True
        return True, None
    m = _RANK.match(line)
    if not m:
        return False, None
    rank = int(m.group(1))
    who = (m.group(4), int(m.group(3)), int(m.group(5)))      # host, pid, device
    clash = (rank, block_ranks[rank], who) if block_ranks.get(rank, who) != who else None
    block_ranks.setdefault(rank, who)
    _add_rank(meta, seen_ranks, rank, group=None if m.group(2) is None else int(m.group(2)), pid=int(m.group(3)),
              host=m.group(4), device=int(m.group(5)), bus_id=m.group(6), gpu_name=m.group(7) or None)
    return True, clash


#: the time unit of a table's units line, and microseconds per unit
_UNITS = re.compile(r"\((us|ms|ns|s)\)")
_TIME_US = {"us": 1.0, "ms": 1e3, "ns": 1e-3, "s": 1e6}


def _data_row(tok: list, raw: str, where: str, lineno: int, table: int, head_fields: int, out: NcclTable,
              time_scale: float = 1.0) -> None:
    """One data line (its fields ``tok``) into ``out``: its two rows (out-of-place, in-place), or a named
    error for a row that is truncated, has more or fewer fields than its table's header names
    (``head_fields``, 0 when unknown), has a non-numeric field, or a value :func:`_row_problem` refuses.
    ``time_scale``: microseconds per unit of the table's time columns (its header's units line)."""
    if head_fields and len(tok) != head_fields and 11 <= len(tok) <= 13:
        out.errors.append(f"{where}: {len(tok)} fields, but the table's header names {head_fields} columns (a "
                          f"column missing or added: its values would be read as the next column's): {raw!r}")
        return
    if not (11 <= len(tok) <= 13):
        out.errors.append(f"{where}: truncated or malformed row ({len(tok)} fields, expected "
                          f"11-13: size count type [redop] [root] + 2 x (time algbw busbw #wrong)): {raw!r}")
        return
    try:
        size, count = int(tok[0]), int(tok[1])
        vals = [_num(t) for i, t in enumerate(tok[-8:]) if i % 4 != 3]
    except ValueError as e:
        out.errors.append(f"{where}: non-numeric field ({e}): {raw!r}")
        return
    wrong = (_wrong(tok[-5]), _wrong(tok[-1]))
    redop = tok[3] if len(tok) >= 12 and not re.fullmatch(r"-?\d+", tok[3]) else None
    if any(w for w in wrong):
        out.meta["wrong_lines"].append(lineno)
    # the same size, element count and type twice in one table: one measurement written twice (excerpts
    # that run two tests under one header differ in their element counts; nccl-tests itself may print
    # its 0-byte row twice, which no fit uses)
    first = None if size == 0 else next((r.line for r in out.rows if r.table == table and r.size_bytes == size
                                         and r.count == count and r.type == tok[2]), None)
    if first is not None:
        out.errors.append(f"{where}: size {size} B again (first at line {first}): a size is measured once per "
                          f"table, so this row is left out: {raw!r}")
        return
    for j, placement in enumerate(("out-of-place", "in-place")):
        t, a, b_ = vals[3 * j:3 * j + 3]
        t = t * time_scale
        problem = _row_problem(size, placement, t, a, b_)
        if problem:
            out.errors.append(f"{where}: {problem}: {raw!r}")
            if "disagree" in problem and a > 0:         # a unit's ratio; a printed 0.00 says none
                out.meta["time_algbw_ratios"].append(size / (t * 1e3) / a)
            continue
        out.rows.append(NcclRow(size, count, tok[2], placement, t, a, b_, table, lineno, wrong[j], redop))


def read_nccl_tests(path, strict=True) -> NcclTable:
    """Parse an nccl-tests stdout capture.

    Args:
        path: text file (str or Path).
        strict: if True (default), raise :class:`NcclTestsParseError` after reading the whole file
            when any line was bad; the exception carries the good rows in ``.rows``.
    Returns:
        :class:`NcclTable` with one :class:`NcclRow` per size and placement (out-of-place first) and
        the capture's metadata in ``meta`` (collective, ranks, hosts, versions, parameters).
    Raises:
        NcclTestsParseError: (strict) a data line is truncated or has a non-numeric field; the
            message names the file and line of every bad line.
        OSError: the file cannot be read.
    Units: size in bytes, time in us (a table whose units line says (ms), (ns) or (s) converted from
    it), algbw/busbw in GB/s, exactly as printed.
    Format source: NVIDIA nccl-tests doc/PERFORMANCE.md and src/common.cu (https://github.com/NVIDIA/nccl-tests).
    """
    path = Path(path)
    out = NcclTable()
    meta = out.meta
    table, head_fields, time_scale = -1, 0, 1.0
    seen_ranks, block_ranks, dup = set(), {}, None      # block: the rank lines since the last table header
    cur_coll = None                                      # collective of the test being printed
    binary_from = None  # "starting" > "command" > "comment"
    for lineno, raw in enumerate(read_text(path, lenient=True).splitlines(), start=1):
        line = _PREFIX.sub("", raw, count=1).strip()
        if not line or _PROVENANCE.match(line):
            continue
        r = _RANK_RANGE.match(line)
        if r and not 0 <= int(r.group(2)) - int(r.group(1)) < MAX_RANK_RANGE:
            out.errors.append(f"{path}:{lineno}: rank range {r.group(1)} ... {r.group(2)} is not a range of 1 to "
                              f"{MAX_RANK_RANGE:,} ranks: {raw!r}")
            continue
        kind, clash = _rank_line(line, meta, seen_ranks, block_ranks)
        if clash is not None and dup is None:
            dup = clash + (lineno,)
        if kind:
            continue
        v = _NCCL_VERSION.search(line)
        if v and not line.startswith("#"):
            meta["nccl_version"], meta["cuda_version"] = v.group(1), v.group(2)
        b = _STARTING.search(line)
        if b:
            cur_coll = collective_from_name(b.group(1))        # the test the next table belongs to
            if binary_from != "starting":
                meta["binary"], binary_from = b.group(1), "starting"
                meta["collective"] = collective_from_name(b.group(1))
        else:
            b = _BINARY.search(line)
            if b:
                kind = "comment" if line.startswith("#") else "command"
                if kind == "command":
                    cur_coll = collective_from_name(b.group(1)) or cur_coll
                if binary_from is None or (binary_from == "comment" and kind == "command"):
                    meta["binary"], binary_from = b.group(1), kind
                    meta["collective"] = collective_from_name(b.group(1))
                    if kind == "command":
                        meta["command"] = line
        if line.startswith("#"):
            unit = _UNITS.search(line) if "(B)" in line else None
            if not (_HEADER.match(line) or unit):
                head_fields = 0          # another comment: the rows below may be another table's
            if _HEADER.match(line):
                table += 1
                block_ranks = {}
                head_fields = len(line.lstrip("#").split())      # the columns this table's rows carry
                meta["table_collectives"].append(cur_coll)
            elif unit:                    # the header's units line: nccl-tests prints (us); an edited
                time_scale = _TIME_US[unit.group(1)]      # one that says another unit is read in it
            elif re.match(r"#\s*nThread\b", line):
                meta["params"] = _params(line)
            elif _OUT_OF_BOUNDS.match(line):
                meta["failed_lines"].append(lineno)
            else:
                t = _TESTS_VERSION.search(line)
                if t:
                    meta["nccl_tests_version"] = t.group(1)
                    if t.group(2) and not meta["nccl_version"]:
                        meta["nccl_version"] = _nccl_code_version(t.group(2))
                elif v and not meta["nccl_version"]:
                    meta["nccl_version"], meta["cuda_version"] = v.group(1), v.group(2)
            continue
        if line == "...":
            continue
        rv = re.match(r"rccl-tests:\s*Version\s+(\S+)", line)
        if rv:                                   # rccl-tests (ROCm) prints its version uncommented
            meta["nccl_tests_version"] = f"rccl-tests {rv.group(1)}"
            continue
        tok = line.split()
        if not _is_int(tok[0]) or (len(tok) > 1 and not _is_int(tok[1])):
            if table >= 0 and 11 <= len(tok) <= 13 and all(_is_num(t) for t in tok[-4:]):
                # a table's row whose size or count is not a whole number ("8M", "abc"): named, not noise
                out.errors.append(f"{path}:{lineno}: size {tok[0]!r} / count {tok[1]!r} is not a whole number of "
                                  f"bytes / elements: {raw!r}")
                continue
            meta["noise_lines"] += 1  # NCCL INFO / launcher / prompt lines: not data
            continue
        table = max(table, 0)
        _data_row(tok, raw, f"{path}:{lineno}", lineno, table, head_fields, out, time_scale)
    _finish_meta(meta)
    if dup is not None:
        # a binary built without MPI, launched by mpirun/srun: every process runs its own 1-rank test
        # and prints its own "Rank 0"; the tables are not a collective over the processes
        rank, a, b, ln = dup
        raise NoUsableDataError(path, f"line {ln}: rank {rank} is printed by two processes ({a[0]} pid {a[1]} device "
                                f"{a[2]} and {b[0]} pid {b[1]} device {b[2]}) before any table: each process ran its "
                                "own test (an nccl-tests binary built without MPI, make MPI=1, or processes that did "
                                "not join one job), so the tables are not one collective over all of them")
    if strict and out.errors:
        raise NcclTestsParseError(out.errors, out.rows)
    return out


def read_massaged_nccl_table(path):
    """Parse a reduced nccl-tests table with columns ``size time algbw busbw`` (sizes may use ``_``).

    Format: the ml-engineering book's "Real network throughput" A100 table (stas00/ml-engineering,
    network/README.md), where the author kept only the out-of-place size/time/algbw/busbw columns.
    Args:
        path: text file; ``#`` lines and the two header lines (``size``/``(B)``) are skipped.
    Returns:
        list of dicts ``{size_bytes, time_us, algbw, busbw}`` (bytes, us, GB/s, GB/s).
    Raises:
        ValueError: a data line does not have 4 numeric fields (message names file and line).
    """
    rows = []
    for lineno, raw in enumerate(read_text(Path(path)).splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#") or line.split()[0] in ("size", "(B)"):
            continue
        tok = line.split()
        try:
            if len(tok) != 4:
                raise ValueError(f"{len(tok)} fields, expected 4")
            rows.append(dict(size_bytes=int(tok[0].replace("_", "")), time_us=float(tok[1]),
                             algbw=float(tok[2]), busbw=float(tok[3])))
        except ValueError as e:
            raise ValueError(f"{path}:{lineno}: {e}: {raw!r}") from None
    return rows
