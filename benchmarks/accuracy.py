"""Accuracy benchmark: predicted vs published step time on the dev set (benchmarks/data/dev_set.csv).

Prints, per source, the rows used and skipped (with why), the mean and max absolute percentage
error of the step time, and Spearman's rank correlation (over the whole source and within each
configuration sweep).  Targets (issue #2): mean error <= 5% on Korthikanti et al. 2022, <= 10% on
the others, Spearman >= 0.8 on the BLOOM-176B configuration sweep.  Not a test: it prints figures.

Usage: python benchmarks/accuracy.py [CSV] [--rows]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from costmodel.validate import read_runs_csv, summarize, validate_rows  # noqa: E402


def main(argv: list[str]) -> int:
    path = next((a for a in argv if not a.startswith("--")), str(Path(__file__).parent / "data" / "dev_set.csv"))
    results = validate_rows(read_runs_csv(path), path)
    summary = summarize(results)
    con = Console(width=160)
    tb = Table(title=f"Step-time error on {path}")
    for c in ("source", "used", "skipped", "mean |err| %", "max |err| %", "Spearman"):
        tb.add_column(c, justify="left" if c == "source" else "right")
    fmt = lambda v, f="{:.1f}": "-" if v is None else f.format(v)
    for src, s in summary["sources"].items():
        tb.add_row(src.split("/")[-1], str(s["used"]), str(s["skipped"]), fmt(s["mean_abs_err_pct"]),
                   fmt(s["max_abs_err_pct"]), fmt(s["spearman"], "{:.3f}"))
    o = summary["overall"]
    tb.add_row("[bold]all", str(o["used"]), str(o["skipped"]), fmt(o["mean_abs_err_pct"]), fmt(o["max_abs_err_pct"]), "")
    con.print(tb)
    for src, s in summary["sources"].items():
        for why, n in s["skip_reasons"].items():
            con.print(f"  skipped {n:3d} of {src.split('/')[-1]}: {why}")
    if summary["spearman"]:
        con.print("Spearman within configuration sweeps (>= 4 rows):")
        for k, v in summary["spearman"].items():
            con.print(f"  {v:+.3f}  {k}")
    if "--rows" in argv:
        for r in results:
            if not r.skipped:
                con.print(f"{r.row_id:22s} measured {r.measured_s:9.3f} s  predicted {r.predicted_s:9.3f} s  "
                          f"{r.error_pct:+6.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
