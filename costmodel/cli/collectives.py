"""``costmodel collectives``: the predicted nccl-tests table of a cluster, and its error against a
capture (costmodel/collectives_table.py)."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.table import Table

from .. import report
from ..collective import COLLECTIVES
from ..collectives_table import DEFAULT_SIZES, compare_capture, error_summary, predicted_table
from ..comm import needs_ring_all_reduce
from ..nic_efficiency import inter_node_efficiency_note, pcie_bound_note
from ..errors import InputError
from ..specs import cluster_profile, load_cluster, with_fabric
from .common import check_profile_gpu, with_fabric_flags
from ..files import not_a_file


def _group_sizes(ranks: str | None) -> list | None:
    """``--ranks 2,4`` -> [2, 4] (None when not given).

    Raises:
        InputError: an empty list or a value that is not a whole number (naming --ranks).
    """
    if ranks is None:
        return None
    vals = [v.strip() for v in ranks.split(",")]
    if not all(v.isascii() and v.isdigit() for v in vals):
        raise InputError("--ranks", "", f"expected comma-separated group sizes (e.g. 2,4), got {ranks!r}")
    return sorted({int(v) for v in vals})


def _borrowed_fits(p, colls: list, scopes=("intra_node", "inter_node")) -> list:
    """One note per scope of ``scopes`` (those the rows price with) whose fits of ``colls`` the profile
    copies from another GPU's (:meth:`costmodel.specs.Profile.derivation`): those rows are that GPU's
    measurement, not this one's; and one where it prices them with another collective's fit of its own
    (an all-gather with the all-reduce's)."""
    out = []
    for scope in scopes:
        by_src, own = {}, {}
        for coll in colls:
            hops = p.derivation(f"comm.{scope}.{coll}")
            if hops and hops[-1][0] != p.key:
                by_src.setdefault(hops[-1][0], []).append(coll)
            elif hops and hops[0][1].startswith(f"comm.{scope}.") and hops[0][1] != f"comm.{scope}.{coll}":
                own.setdefault(hops[0][1].rsplit(".", 1)[1], []).append(coll)
        out += [f"{scope.replace('_', '-')} {', '.join(cs)}: {p.path}'s fits are copied from {gpu}'s (derived_from), "
                f"not measured on {p.gpu}; calibrate this cluster to replace them" for gpu, cs in by_src.items()]
        out += [f"{scope.replace('_', '-')} {', '.join(cs)}: priced with {p.path}'s {base} fit (derived_from: no "
                f"measurement of their own on {p.gpu}); calibrate this cluster to replace them"
                for base, cs in own.items()]
    return out


def _fmt_size(n: int) -> str:
    for unit, k in (("GiB", 2 ** 30), ("MiB", 2 ** 20), ("KiB", 2 ** 10)):
        if n >= k:
            return f"{n / k:g} {unit}"
    return f"{n} B"


def _read_capture(path: str, collective: Optional[str], nodes: Optional[int], gpus_per_node: Optional[int], cluster,
                  notes: list):
    """The capture's table and (collective, ranks per node, nodes), told by
    costmodel.fit.measurements.capture_inputs: the collective from the capture, its file name or
    --collective (a contradiction is refused) or busbw/algbw; the topology from its rank lines, else
    the flags, else the ranks busbw/algbw implies split by the cluster's GPUs per node (guesses
    ``calibrate fit`` does not make: a comparison prints its error, a fit writes it).  A capture
    taken on another GPU than the cluster's, or on a GPU outside the catalog, is refused."""
    from ..errors import FitError
    from ..fit.measurements import FitReport, capture_inputs
    from ..readers import read_nccl_tests
    from ..readers.registry import detect_format
    p = Path(path)
    if p.is_dir():
        raise InputError(path, "", "is a directory, not an nccl-tests capture")
    if not p.is_file():
        raise InputError(path, "", not_a_file(p))
    if detect_format(p) != "nccl-tests":      # (an unrecognised file raises, naming it and the formats known)
        raise InputError(path, "", "is not nccl-tests / rccl-tests output (no size/time/algbw/busbw table)")
    t = read_nccl_tests(p, strict=False)
    m = t.meta
    # every row left out says why (as calibrate fit says it), and rows nccl-tests itself found wrong
    notes += [f"left out: {e}" for e in t.errors]
    if m.get("wrong_lines"):
        notes.append(f"{path}: lines {', '.join(map(str, m['wrong_lines']))} report #wrong > 0 (results that failed "
                     "nccl-tests' check): left out, their times are suspect")
    from ..fit.assembly import gpu_key_for
    for name in m.get("gpu_names") or []:
        key = gpu_key_for(name)
        if key != cluster.gpu.key:
            where = f"({key})" if key else "(not a catalog GPU)"
            raise InputError(path, "", f"was taken on {name!r} {where}; the cluster {cluster.key} has {cluster.gpu.key}: "
                             "pass the capture's cluster")
    for flag, given, seen in (("--gpus-per-node", gpus_per_node, m.get("ranks_per_node")),
                              ("--nodes", nodes, m.get("n_nodes"))):
        if given is not None and seen is not None and given != seen:
            raise InputError(flag, "", f"{given} contradicts the capture's rank lines ({seen})")
    rep = FitReport()
    try:
        got = capture_inputs(p, t, collective, nodes, gpus_per_node, rep, cluster.gpus_per_node)
    except FitError as e:
        raise InputError(path, "", str(e).split(": ", 1)[-1]) from None
    if not got:
        raise InputError(path, "", "no usable row" + (f": {len(t.errors)} bad line(s), the first: "
                                                      f"{t.errors[0].split(': ', 1)[-1]}" if t.errors else ""))
    first = got[0]
    notes += [w.split(": ", 1)[-1] for w in rep.warnings]
    _, coll, nn, rpn, _ = first
    return t, coll, int(rpn), int(nn)


@with_fabric_flags()
def collectives(cluster: str = typer.Option(..., "--cluster", help="Catalog name or cluster YAML."),
                nodes: Optional[int] = typer.Option(None, "--nodes", help="Override the cluster's node count (or "
                                                    "the nodes of a capture without # Rank lines)."),
                profile: Optional[str] = typer.Option(None, "--profile", help="Calibrated profile YAML (default: "
                                                      "the GPU's built-in one)."),
                compare: Optional[str] = typer.Option(None, "--compare", help="nccl-tests / rccl-tests output to "
                                                      "compare with, size by size."),
                collective: Optional[str] = typer.Option(None, "--collective", help=f"{', '.join(COLLECTIVES)}: "
                                                         "the collectives to print (comma-separated; default all), or "
                                                         "the capture's when it does not name it."),
                gpus_per_node: Optional[int] = typer.Option(None, "--gpus-per-node", help="Ranks per node of a "
                                                            "capture without # Rank lines."),
                ranks: Optional[str] = typer.Option(None, "--ranks", help="Group sizes inside a node for the "
                                                    "intra-node rows, comma-separated (default: the node's GPUs and the "
                                                    "smaller groups the profile measured)."),
                as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
                fabric_flags: dict = None):
    """The nccl-tests table the model predicts for a cluster (time, algbw, busbw per collective, inside a
    node, over one NVLink domain where it joins several nodes, and over the cluster), or, with --compare,
    the error per size against a capture."""
    for flag, v in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node)):
        if v is not None and not 1 <= v <= 2 ** 24:
            raise InputError(flag, "", f"must be between 1 and 2^24, got {v}")
    if ranks is not None and compare:
        raise InputError("--ranks", "", "applies to the predicted table; a --compare capture has its own ranks")
    if collective is not None and not collective.strip():
        raise InputError("--collective", "", f"is empty: name one or more of {', '.join(COLLECTIVES)}")
    if gpus_per_node is not None and not compare:
        raise InputError("--gpus-per-node", "", "applies to a --compare capture without # Rank lines; the cluster file "
                         "gives the GPUs per node of the predicted table")
    # each collective once, in the order given
    colls = list(dict.fromkeys(c.strip() for c in collective.split(","))) if collective else list(COLLECTIVES)
    for c in colls:
        if c not in COLLECTIVES:
            raise InputError("--collective", "", f"{c!r} is not one of {', '.join(COLLECTIVES)}")
    c = with_fabric(load_cluster(cluster, None if compare else nodes), **(fabric_flags or {}))
    if gpus_per_node is not None and gpus_per_node > c.gpus_per_node:
        # as the capture's own # Rank lines are refused there
        raise InputError("--gpus-per-node", "", f"{gpus_per_node} ranks on each node, more than the "
                         f"{c.gpus_per_node} GPUs of {c.key}'s nodes")
    p = cluster_profile(c, profile)
    check_profile_gpu(p, c)
    notes = []
    if compare:
        if len(colls) > 1 and collective:
            raise InputError("--collective", "", "name one collective with --compare")
        t, coll, rpn, nn = _read_capture(compare, collective, nodes, gpus_per_node, c, notes)
        rows = compare_capture(t, c, p, coll, rpn, nn, compare, notes)
        for n in notes:
            print(f"costmodel: note: {n}", file=sys.stderr)
        summ = error_summary(rows)
        head = f"{compare}: {coll}, {rpn * nn} ranks ({nn} node(s) x {rpn}) against {c.key} with {p.path}"
    else:
        rows, summ = predicted_table(c, p, colls, DEFAULT_SIZES, _group_sizes(ranks)), None
        head = f"{c.key}: {c.nodes} x {c.gpus_per_node} {c.gpu.key}, profile {p.path}" + (
            f" (what-if: {c.what_if})" if c.what_if else "")
    shown = [coll] if compare else colls
    ring = ([f"all_reduce: the profile's fit is NVLS, which reduces in an NVSwitch; {c.key}'s GPUs meet over "
             f"{c.intra_fabric}, so NCCL runs a ring: priced as its reduce-scatter plus its all-gather"]
            if needs_ring_all_reduce(c, p) and "all_reduce" in shown else [])
    # the inter-node fits price a row only where it leaves the NVLink domain
    crosses = (nn * rpn > c.scale_up_gpus) if compare else c.num_gpus > c.scale_up_gpus
    ring += _borrowed_fits(p, shown, ("intra_node", "inter_node") if crosses else ("intra_node",))
    lent, pcie = (inter_node_efficiency_note(p, c), pcie_bound_note(c)) if crosses else (None, None)
    ring += [n for n in (lent, pcie) if n]
    if as_json:
        print(report.json_text(dict(cluster=c.key, profile=p.path, capture=compare, summary=summ, notes=ring + notes,
                              rows=[dict(r.__dict__, time_rel_err=r.time_rel_err) for r in rows]), indent=2))
        return
    out = report.console()
    out.print(head, highlight=False)
    for n in ring:
        out.print(n, highlight=False)
    tb = Table(title="nccl-tests / rccl-tests table, " + ("measured vs predicted (out-of-place)" if compare else "predicted"),
               header_style="bold")
    cols = ["collective", "scope", "ranks", "size", "time us", "algbw GB/s", "busbw GB/s"]
    if compare:
        cols += ["measured us", "measured busbw", "time err"]
    for col in cols:
        tb.add_column(col, justify="left" if col in ("collective", "scope") else "right")
    for r in rows:
        cells = [r.collective, r.scope, str(r.ranks), _fmt_size(r.size_bytes), f"{r.time_us:,.1f}",
                 f"{r.algbw_gb_s:.2f}", f"{r.busbw_gb_s:.2f}"]
        if compare:
            cells += [f"{r.measured_time_us:,.1f}", f"{r.measured_busbw_gb_s:.2f}", f"{100 * r.time_rel_err:+.1f}%"]
        tb.add_row(*cells)
    out.print(tb)
    if summ:
        for k, what in (("all", "all sizes"), ("large", f">= {_fmt_size(summ['min_bytes'])}")):
            s = summ[k]
            if s["n"]:
                out.print(f"time error, {what}: median {100 * s['median_abs_rel_err']:.1f}%, max "
                          f"{100 * s['max_abs_rel_err']:.1f}% over {s['n']} sizes")
