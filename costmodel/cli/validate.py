"""``costmodel validate``: predict every published run of a CSV and report the error per source."""
from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from .. import report


def validate(runs: str = typer.Argument(..., help="CSV of published runs (schema: README, 'Validate')."),
             plot: Optional[str] = typer.Option(None, "--plot", help="Directory for predicted_vs_measured.png."),
             rows: bool = typer.Option(False, "--rows", help="Also print every row's error."),
             as_json: bool = typer.Option(False, "--json", help="Print the summary and rows as JSON."),
             strict: bool = typer.Option(False, "--strict", help="Exit 2 when any row is skipped (a check of your own "
                                         "CSV in CI), after the report."),
             cluster: Optional[str] = typer.Option(None, "--cluster", help="Catalog name or cluster YAML every row ran "
                                                   "on (default: each row's catalog cluster, from its gpu and "
                                                   "interconnect_note); rows of another GPU are skipped."),
             profile: Optional[str] = typer.Option(None, "--profile", help="Calibrated profile YAML to price the rows "
                                                   "with (default: the GPU's built-in one).")):
    """Predict every published run of a CSV and report the step-time error per source: rows used and
    skipped (with why), mean and max |error|, Spearman rank correlation of each source's rows and, listed
    below the table, within each sweep (one source, model and GPU count)."""
    from ..errors import InputError
    from ..validate import read_runs_csv, summarize, validate_rows
    if plot is not None:
        from ..files import output_dir
        from ..plots import require_matplotlib
        require_matplotlib()                # before any work and before the folder is made
        output_dir(plot, "--plot", "validate", files=["predicted_vs_measured.png"])
    if profile is not None:
        from ..specs import cluster_profile, load_cluster
        from .common import check_profile_gpu
        if cluster is None:
            raise InputError("--profile", "", "needs --cluster: a profile is fitted for one GPU, the cluster says "
                             "which the rows ran on")
        check_profile_gpu(cluster_profile(load_cluster(cluster), profile), load_cluster(cluster))
    results = validate_rows(read_runs_csv(runs), runs, cluster, profile)
    summary = summarize(results)
    if as_json:
        if plot is not None and any(not r.skipped for r in results):   # else the skip reasons, then the error
            from ..plots import validate_scatter
            summary["plot"] = validate_scatter(results, Path(plot) / "predicted_vs_measured.png")
            summary["files"] = [str(summary["plot"])]          # as compare's JSON lists what it wrote
        summary["rows"] = [dict(row_id=r.row_id, source=r.source, measured_s=r.measured_s, predicted_s=r.predicted_s,
                                error_pct=None if r.skipped else r.error_pct, metric=r.metric,
                                flop_convention=r.flop_convention, skipped=r.skipped,
                                predicted_oom=r.predicted_oom, assumed=list(r.assumed), cluster=r.cluster or None,
                                # the one-sigma band (relative to the prediction, and as step times) and whether
                                # the measurement lies in it
                                band_rel=None if r.skipped else r.band_rel,
                                band_low_s=None if r.skipped else r.predicted_s * (1 - r.band_rel),
                                band_high_s=None if r.skipped else r.predicted_s * (1 + r.band_rel),
                                in_band=None if r.skipped else r.covered, line=r.line, malformed=r.malformed)
                           for r in results]
        print(report.json_text(summary))
        _require_a_used_row(results, runs, strict)
        return
    out = report.console()
    for x in report.validate_tables(summary, results, rows):
        out.print(x, highlight=False) if isinstance(x, str) else out.print(x)
    if plot is not None and any(not r.skipped for r in results):    # after the report: a failed write loses none of it
        from ..plots import validate_scatter
        out.print(f"wrote {validate_scatter(results, Path(plot) / 'predicted_vs_measured.png')}", highlight=False)
    _require_a_used_row(results, runs, strict)


def _require_a_used_row(results, runs: str, strict: bool = False) -> None:
    """A file with a malformed row (a cell that cannot be read, a row short of cells, a repeated row_id) or
    none of whose rows could be predicted is bad input (the reasons are printed above); with ``strict``, so
    is one with any skipped row.

    Raises:
        InputError: a row is malformed, naming the first's line, row_id and cell; every row was skipped, or
            (strict) one was, naming the first and its reason.
    """
    from ..errors import InputError
    bad = [r for r in results if r.malformed]
    if bad:                              # a cell that cannot be read is the file's error, after the report
        raise InputError(runs, bad[0].place, f"{bad[0].skipped}" + (f" (and {len(bad) - 1} more malformed row(s): the report "
                                                         "lists them)" if len(bad) > 1 else ""))
    if results and all(r.skipped for r in results):
        raise InputError(runs, "", f"no usable row: all {len(results)} rows were skipped (the report gives each reason)")
    skipped = [r for r in results if r.skipped]
    if strict and skipped:
        raise InputError(runs, "", f"--strict: {len(skipped)} of {len(results)} rows skipped, the first "
                         f"{skipped[0].row_id!r}: {skipped[0].skipped}")
