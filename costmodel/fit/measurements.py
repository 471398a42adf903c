"""The inputs of a fit (:class:`Measurements`), read through the format registry, and what a fit
reports (:class:`FitReport`)."""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from costmodel.collective import COLLECTIVES, busbw_factor
from costmodel.errors import FitError, ReaderParseError
from costmodel.readers.nccl_tests import collective_from_name
from costmodel.readers.registry import REGISTRY, read_measurement


@dataclass
class FitReport:
    """What :func:`fit_profile` did: warnings (coverage, outliers, unusable lines) and a summary table.

    Attributes:
        warnings: one sentence each, naming the file (and line) or the profile section.
        rows: ``(section, parameters text, fit quality text)`` for the printed table.
    """

    warnings: list = field(default_factory=list)
    rows: list = field(default_factory=list)


@dataclass
class Measurements:
    """Parsed inputs of a fit.

    Attributes:
        suites: list of :class:`costmodel.readers.suite_jsonl.SuiteRun`.
        nccl: list of ``(path, collective, n_nodes, ranks_per_node, rows)``; rows are out-of-place
            :class:`costmodel.readers.NcclRow` of one table.
        traces: list of :class:`costmodel.readers.power_trace.PowerTrace`.
        files: path -> sha256 of every input (provenance).
        device_names: the GPU names the nccl-tests captures (rank lines) and traces print.
        captures: the nccl-tests captures' own metadata for the provenance: ``hosts`` (rank lines),
            ``nccl_version``, ``cuda_version``, ``n_ranks``, one mapping per capture.
    """

    suites: list = field(default_factory=list)
    nccl: list = field(default_factory=list)
    traces: list = field(default_factory=list)
    files: dict = field(default_factory=dict)
    device_names: list = field(default_factory=list)
    captures: list = field(default_factory=list)


# ------------------------------------------------------------------------------------- loading
#: per-line reader warnings of one kind shown before the rest are counted
_SHOWN_PER_KIND = 3


def _grouped(warns: list) -> list:
    """A file's per-line warnings with more than :data:`_SHOWN_PER_KIND` of one kind (the text after
    ``FILE:LINE:``, numbers aside) cut to the first few and a count, so 199 blank power samples are
    four lines, not 199, in the report and the profile."""
    kinds: dict = {}
    for w in warns:
        mt = re.match(r"(.+?):(\d+): (.*)", w)
        key = re.sub(r"[-+]?\d[\d.eE+-]*", "#", mt.group(3)) if mt else None
        kinds.setdefault(key, []).append(w)
    out = []
    for key, ws in kinds.items():
        if key is None or len(ws) <= _SHOWN_PER_KIND + 1:
            out += ws
        else:
            path = re.match(r"(.+?):\d+: ", ws[0]).group(1)
            out += ws[:_SHOWN_PER_KIND] + [f"{path}: ... and {len(ws) - _SHOWN_PER_KIND} more line(s) like these"]
    return out


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_measurements(paths, collective=None, nodes=None, gpus_per_node=None, report=None,
                      cluster_gpus_per_node=None) -> Measurements:
    """Read every input file, keeping the good data of each and reporting the bad lines.

    Each file is read through the format registry (:func:`costmodel.readers.read_measurement`), which
    says what it gives a fit (``Format.to_fit_input``): a suite run, an nccl-tests table or a trace.

    Args:
        paths: files (suite JSONL, nccl-tests, nvidia-smi CSV / dmon, dcgmi dmon).
        collective: the collective of nccl-tests captures that do not name it (file name or command
            line); nodes, gpus_per_node: their topology when they print no ``# Rank`` lines.
            gpus_per_node (else cluster_gpus_per_node) also numbers the rows of an nvidia-smi CSV
            without an ``index`` column.
        report: :class:`FitReport` collecting warnings (a new one when None).
        cluster_gpus_per_node: the ``--cluster``'s GPUs per node: how a capture without rank lines
            splits the ranks busbw / algbw implies when neither nodes nor gpus_per_node is given.
    Returns:
        :class:`Measurements`.
    Raises:
        FitError: a file is unreadable or has no usable data in a known format, a suite run was
            made without a GPU (:func:`_check_on_gpu`), or an nccl-tests capture's collective or
            topology cannot be told.
    """
    report = report if report is not None else FitReport()
    out = Measurements()
    for p in map(Path, paths):
        try:
            # rows of a CSV without an index column are numbered by --gpus-per-node, else the cluster's
            # (as compare --power does)
            fmt, data, warns = read_measurement(p, gpus_per_node or cluster_gpus_per_node)
        except (ReaderParseError, ValueError, OSError) as e:
            first = getattr(e, "errors", None)
            msg = str(e).splitlines()[0] if str(e) else f"{p}: unreadable"
            raise FitError(msg + (f" (first: {first[0]})" if first else "")) from None
        report.warnings += _grouped(list(warns))
        out.files[str(p)] = _sha256(p)
        to_fit = REGISTRY[fmt].to_fit_input
        inputs, notes = to_fit(data, p) if to_fit else ([], [f"{p}: {fmt} is not an input of this fit"])
        report.warnings += notes
        for kind, item in inputs:
            if kind == "suite":
                lost = [k for k, bad in item.rejected.items() if not item.records[k]]
                if lost:
                    # a measured section whose every record is bad is no gap the base profile may fill
                    k = lost[0]
                    raise FitError(f"{p}: all {len(item.rejected[k])} {k} record(s) rejected, none usable "
                                   f"(first: {item.rejected[k][0]}): fix or drop them")
                _check_on_gpu(p, item)
                out.suites.append(item)
            elif kind == "nccl":
                meta = getattr(item, "meta", {}) or {}
                out.device_names += list(meta.get("gpu_names") or [])
                out.captures.append({k: meta.get(k) for k in ("hosts", "nccl_version", "cuda_version", "n_ranks")})
                # the README's "refuses without": no topology or collective guessed from the cluster
                out.nccl.extend(capture_inputs(p, item, collective, nodes, gpus_per_node, report,
                                             cluster_gpus_per_node, guess=False))
            else:
                out.device_names += list(getattr(item, "device_names", ()) or ())
                out.traces.append(item)
    if not (out.suites or out.nccl or out.traces):
        # the readers' own reasons (a format this fit does not use, skipped lines) say why
        # one file: its name leads the message once, not again before each of its reasons
        said = [w.removeprefix(f"{Path(paths[0])}: ") if len(paths) == 1 else w for w in report.warnings[:3]]
        why = f": {'; '.join(said)}" if said else ""
        raise FitError("no usable measurement in " + ", ".join(map(str, paths)) + why)
    return out


def _check_on_gpu(p, run) -> None:
    """Refuse a suite run whose provenance says it ran without a GPU (``device: cpu``): its GEMMs are the
    host's, its HBM copies host memory (0.7 % of an H100's) and its collectives go over gloo, so fitted
    against any GPU's datasheet they price every prediction tens of times too slow; and one on a GPU whose
    collectives ran over gloo (no NCCL), which time no NCCL collective.

    Raises:
        FitError: naming the file, the provenance record's line and its ``device`` / ``backend``.
    """
    for r in run["provenance"]:
        dev, backend = str(r.get("device") or ""), str(r.get("backend") or "")
        name = "null" if r.get("gpu_name") is None else repr(r.get("gpu_name"))
        head = f"{p}:{r.get('_line', '?')}: provenance device {dev!r}, backend {backend!r}, gpu_name {name}"
        if dev.split(":")[0] == "cpu":
            raise FitError(f"{head}: the suite ran without a GPU, a plumbing check; measurements not taken on a GPU "
                           "cannot calibrate one: run the suite on the cluster's GPUs")
        if backend == "gloo":
            raise FitError(f"{head}: its collectives ran over gloo, not NCCL, and time no collective a training run "
                           "makes: run the suite with the nccl backend (its GEMM and HBM records are not fitted "
                           "from a run whose collectives are refused)")


def _check_time_units(p, table) -> None:
    """Refuse a capture most of whose rows have a time that disagrees with its own algbw column (the
    reader leaves such rows out, naming each): its times are in another unit than the header's (us),
    and the rows left (the few too small to check) would be fitted as if the capture were whole.

    Raises:
        FitError: naming the file, the count and the factor between the columns (1000: ms).
    """
    ratios = (getattr(table, "meta", None) or {}).get("time_algbw_ratios") or []
    if not ratios or len(ratios) < len(table.rows):
        return
    f = float(np.median(ratios))
    unit = " (milliseconds under the us header?)" if 300 < f < 3000 else ""
    said = [e for e in table.errors if "disagree" in e]
    eg = re.search(r"(?:out-of-place|in-place) time .*? GB/s disagree: .*? GB/s", said[-1]) if said else None
    raise FitError(f"{p}: {len(ratios)} of {len(ratios) + len(table.rows)} rows have a time that disagrees with "
                   f"their own algbw column (the time implies {f:.3g}x the printed bandwidth{unit})"
                   + (f", e.g. {eg.group(0)}" if eg else "") + ": fix the capture's time unit")


def capture_inputs(p, table, collective, nodes, gpus_per_node, report, cluster_gpus_per_node=None, guess=True):
    """``(path, collective, n_nodes, ranks_per_node, out-of-place rows)`` per table of a capture: each
    test of a multi-test file (its own ``# Collective test starting`` or ``*_perf`` line) is fitted;
    several tables of one collective are separate runs of it, and only the first is fitted.

    The collective comes from the capture (``*_perf`` line), else the file name, else ``collective``,
    else the content (busbw / algbw and the redop column); two of these that disagree are an error.
    The topology comes from the ``# Rank`` lines, else ``nodes`` and ``gpus_per_node``, else the ranks
    busbw / algbw implies with one of the two (or the cluster's GPUs per node).  With ``guess`` false
    (``calibrate fit``, whose README refuses without them) neither the collective nor the topology is
    read from busbw / algbw or the cluster: a capture that does not say them needs the flags.

    Raises:
        FitError: the sources of the collective disagree, the ``# Rank`` lines put more ranks on a node
            than ``cluster_gpus_per_node``, ``nodes`` or ``gpus_per_node`` contradict the
            rank lines, or the collective or topology cannot be told (or, without ``guess``, is not
            given by the capture or the flags: naming the missing flags).
    """
    _check_time_units(p, table)
    meta = getattr(table, "meta", {}) or {}
    per = meta.get("table_collectives") or []
    content = {c for c in [meta.get("collective")] + list(per) if c}
    # a file name counts where it names a collective the model prices (a "gather" or "scatter" in a
    # name is as often a word as nccl-tests' gather_perf); one that names another than the capture's
    # *_perf line is a mix-up, refused below
    from_name = collective_from_name(p.name)
    from_name = from_name if from_name in COLLECTIVES else None
    if len(content) <= 1:
        said = [(f"the capture ({meta.get('binary') or 'its test line'})", next(iter(content), None)),
                (f"the file name {p.name!r}", from_name), ("--collective", collective)]
        said = [(who, c) for who, c in said if c]
        if len({c for _, c in said}) > 1:
            raise FitError(f"{p}: the collective is named twice and differently: "
                           + ", ".join(f"{who} says {c}" for who, c in said) + ": rename the file or fix the flag")
    default = meta.get("collective") or from_name or collective
    for c in {default, *per} - {None}:
        if c not in COLLECTIVES:
            raise FitError(f"{p}: measures {c}, which no layout's traffic uses: the model prices "
                           f"{', '.join(COLLECTIVES)}")
    rows0 = table.select()
    nn, k = meta.get("n_nodes"), meta.get("ranks_per_node")
    for flag, given, seen in (("--nodes", nodes, nn), ("--gpus-per-node", gpus_per_node, k)):
        if given is not None and seen is not None and int(given) != int(seen):
            raise FitError(f"{p}: {flag} {given} contradicts the capture's # Rank lines ({int(nn)} node(s) x "
                           f"{int(k)} ranks each): drop the flag or fit the capture of that run")
    if k is not None and cluster_gpus_per_node and int(k) > int(cluster_gpus_per_node):
        raise FitError(f"{p}: the capture's # Rank lines put {int(k)} ranks on each node, more than the cluster's "
                       f"{int(cluster_gpus_per_node)} GPUs per node: it ran on other nodes; pass the cluster it ran on")
    if (nn is None or k is None) and nodes is not None and gpus_per_node is not None:
        nn, k = nodes, gpus_per_node
    if default is None and not any(per) and not guess:
        raise FitError(f"{p}: nccl-tests capture does not say which collective it measured (no *_perf command "
                       "line and no collective in the file name): pass --collective")
    if (nn is None or k is None) and not guess:
        what = "lists only some of its ranks (the '# Rank' block ends in '...')" if meta.get("ranks_truncated") \
            else "has no '# Rank' lines to tell its topology"
        missing = [f for f, v in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node)) if v is None]
        raise FitError(f"{p}: nccl-tests capture {what}: pass {' and '.join(missing)} (the run's nodes and GPUs per "
                       "node; neither is guessed from busbw/algbw or the cluster)")
    if default is None and not any(per):
        default, why = _collective_from_content(rows0, None if nn is None or k is None else int(nn) * int(k))
        if default is None:
            raise FitError(f"{p}: nccl-tests capture does not say which collective it measured (no *_perf "
                           f"command line and no collective in the file name{why}): pass --collective")
        report.warnings.append(f"{p}: no collective named; {why}: read as {default}")
    if nn is None or k is None:
        nn, k = _topology_from_ratio(p, rows0, default, nodes, gpus_per_node, meta, report, cluster_gpus_per_node)
    out, seen = [], set()
    for t in sorted({r.table for r in table.rows}):
        coll = (per[t] if t < len(per) else None) or default
        if coll is None:
            raise FitError(f"{p}: nccl-tests capture does not say which collective it measured (no *_perf "
                           "command line and no collective in the file name): pass --collective")
        if coll in seen:
            report.warnings.append(f"{p}: another {coll} table (a separate run): using the first only; put "
                                   "each run in its own file to use the others")
            continue
        seen.add(coll)
        rows = table.select("out-of-place", t)
        _check_ratio(p, rows, coll, int(nn) * int(k))
        out.append((p, coll, int(nn), int(k), rows))
    return out


def _ratio(rows):
    """Median busbw / algbw of rows with algbw >= 1 GB/s (nccl-tests prints busbw = algbw x f(g))."""
    r = [x.busbw / x.algbw for x in rows if x.algbw >= 1.0 and x.busbw > 0]
    return float(np.median(r)) if r else None


_REDUCING = ("sum", "prod", "max", "min", "avg", "premulsum", "mulsum")


def _collective_from_content(rows, g):
    """``(collective or None, reason)`` from busbw / algbw and the redop column of nccl-tests rows.

    nccl-tests prints busbw = algbw x f(g) (doc/PERFORMANCE.md): 2(g-1)/g > 1 only for all_reduce;
    (g-1)/g < 1 for all_gather, alltoall (redop ``none``) and reduce_scatter (a reduction op).
    ``g`` (ranks, when known) must then match the ratio.
    """
    r = _ratio(rows)
    if r is None:
        return None, ""
    redops = {x.redop for x in rows if x.redop}
    if r > 1.03 and (g is None or abs(r / float(busbw_factor("all_reduce", g)) - 1) < 0.03):
        return "all_reduce", f"busbw/algbw = {r:.3f} > 1, which only all_reduce prints (2(g-1)/g)"
    if r < 0.97 and redops and redops <= set(_REDUCING) and (
            g is None or abs(r / float(busbw_factor("reduce_scatter", g)) - 1) < 0.03):
        return "reduce_scatter", (f"busbw/algbw = {r:.3f} < 1 with redop {'/'.join(sorted(redops))}, which only "
                                  "reduce_scatter prints")
    if r < 0.97 and redops == {"none"}:
        return None, f"; busbw/algbw = {r:.3f} with redop none fits all_gather and all_to_all alike"
    return None, f"; busbw/algbw = {r:.3f} names no collective"


def _ranks_from_ratio(rows, coll):
    """Ranks g that busbw / algbw implies for ``coll`` (2(g-1)/g or (g-1)/g), or None when the
    ratio is uninformative (factor 1) or not within 0.2 of an integer >= 2."""
    r = _ratio([x for x in rows if x.algbw >= 10.0]) or _ratio(rows)
    if r is None:
        return None
    if coll == "all_reduce" and r < 2.0:
        g = 2.0 / (2.0 - r)
    elif coll in ("all_gather", "reduce_scatter", "all_to_all") and r < 1.0:
        g = 1.0 / (1.0 - r)
    else:
        return None
    return int(round(g)) if round(g) >= 2 and abs(g - round(g)) < 0.2 else None


def _topology_from_ratio(p, rows, coll, nodes, gpus_per_node, meta, report, cluster_gpus_per_node=None):
    """``(n_nodes, ranks_per_node)`` of a capture without (complete) ``# Rank`` lines: the ranks
    busbw / algbw implies, split by whichever of ``nodes`` / ``gpus_per_node`` is given, or on one
    node when the ``# nThread T nGpus G`` line says one process drove them all (T x G = ranks), else
    by the cluster's GPUs per node when it divides them.

    Raises:
        FitError: neither given, the ratio is uninformative, or the given one does not divide the ranks.
    """
    what = "lists only some of its ranks (the '# Rank' block ends in '...')" if meta.get("ranks_truncated") else \
        "has no '# Rank' lines to tell its topology"
    g = _ranks_from_ratio(rows, coll)
    if g is None:
        raise FitError(f"{p}: nccl-tests capture {what}: pass --nodes and --gpus-per-node")
    prm = meta.get("params") or {}
    one_process = int(prm.get("nThread", 0) or 0) * int(prm.get("nGpus", 0) or 0) == g
    given = (nodes, "nodes") if nodes is not None else (gpus_per_node, "gpus-per-node") if gpus_per_node else \
        (1, "nodes") if one_process else None
    from_cluster = given is None and bool(cluster_gpus_per_node) and g % int(cluster_gpus_per_node) == 0
    if from_cluster:
        given = (int(cluster_gpus_per_node), "gpus-per-node")
    if given is None:
        raise FitError(f"{p}: nccl-tests capture {what}; busbw/algbw says {g} ranks of {coll}: pass --nodes or "
                       "--gpus-per-node to split them")
    n, flag = int(given[0]), given[1]
    if n < 1 or g % n:
        raise FitError(f"{p}: busbw/algbw says {g} ranks of {coll}, which --{flag} {n} does not divide: pass "
                       "--nodes and --gpus-per-node")
    nn, k = (n, g // n) if flag == "nodes" else (g // n, n)
    report.warnings.append(f"{p}: {g} ranks read from busbw/algbw ({coll}): {nn} node(s) x {k}"
                           + (" (one process drove them all: nThread x nGpus)" if one_process and given[0] == 1 else "")
                           + (" (the --cluster's GPUs per node; pass --gpus-per-node if the run used fewer)"
                              if from_cluster else ""))
    return nn, k


def _check_ratio(p, rows, coll: str, g: int) -> None:
    """Refuse a capture whose redop column is not the named collective's (a reduction op for
    all_reduce and reduce_scatter, ``none`` for all_gather and all_to_all; send_recv prints either),
    whose busbw / algbw is not its factor
    over ``g`` ranks, or pins another whole rank count than ``g`` (:func:`_ranks_from_ratio`).

    Raises:
        FitError: naming the ratio, the collectives it fits, and what to check.
    """
    r = _ratio(rows)
    if r is not None and g >= 2:
        _check_factor(p, rows, coll, g, r)
    redops = {x.redop for x in rows if x.redop}
    reduces = coll in ("all_reduce", "reduce_scatter")
    # sendrecv_perf loops over the -o ops like the reducing tests and prints the op it was handed
    # (liplus_a100_8gpu_sendrecv.txt prints sum) though it reduces nothing: its column tells nothing
    if redops and coll != "send_recv" and (redops == {"none"} if reduces else redops <= set(_REDUCING)):
        # nccl-tests prints the reduction op of all_reduce and reduce_scatter, 'none' for all_gather and
        # alltoall (alltoall_perf captures print none)
        raise FitError(f"{p}: its rows print redop {'/'.join(sorted(redops))}, which {coll} "
                       f"{'never prints (it reduces)' if reduces else 'does not (it reduces nothing)'}: the "
                       "collective (file name, --collective) is wrong")


def _check_factor(p, rows, coll: str, g: int, r: float) -> None:
    """:func:`_check_ratio`'s busbw / algbw part: ``r`` against ``coll``'s factor over ``g`` ranks.

    Raises:
        FitError: naming the ratio and the collectives it fits.
    """
    # where the large messages' ratio pins a whole rank count (within 0.2 of one), it must be g: 16 and
    # 24 ranks of all_reduce print 1.875 and 1.917, within the 3% the ratio is allowed otherwise
    implied = _ranks_from_ratio(rows, coll)
    if implied is not None and implied != g:
        raise FitError(f"{p}: busbw / algbw = {r:.3f} says {implied} ranks of {coll}, not the {g} given: the ranks "
                       "(--nodes, --gpus-per-node) or the collective (file name, --collective) are wrong")
    want = float(busbw_factor(coll, g))
    if abs(r / want - 1) <= 0.03:
        return
    fits = [c for c in COLLECTIVES if abs(r / float(busbw_factor(c, g)) - 1) <= 0.03]
    raise FitError(f"{p}: busbw / algbw = {r:.3f}, but {coll} over {g} ranks prints {want:.3f}"
                   + (f" ({', '.join(fits)} would)" if fits else "")
                   + ": the collective (file name, --collective) or the ranks (--nodes, --gpus-per-node) are wrong")
