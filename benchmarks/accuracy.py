"""Accuracy benchmark: `costmodel validate` on the shipped dev set (benchmarks/data/dev_set.csv).

Prints, per source, the rows used and skipped (with why), the mean and max absolute percentage
error of the step time, the metric each measurement came from, and Spearman's rank correlation
within each configuration sweep.  Targets: mean error <= 5% on Korthikanti et al. 2022,
<= 10% on the others, Spearman >= 0.8 on the BLOOM-176B configuration sweep.  Not a test.

Usage: python benchmarks/accuracy.py [CSV] [--rows] [--plot DIR] [--json]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from costmodel.cli import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if not any(not a.startswith("--") and not (i and args[i - 1] == "--plot") for i, a in enumerate(args)):
        args = [str(Path(__file__).parent / "data" / "dev_set.csv")] + args
    sys.argv = ["costmodel", "validate"] + args
    main()
