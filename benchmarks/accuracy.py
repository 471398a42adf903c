"""Accuracy benchmark: the figures of the accuracy targets, printed (not a test).

Without arguments:
* `costmodel validate` on the shipped dev sets (benchmarks/data/dev_set.csv: A100/V100 Megatron;
  dev_set_hopper.csv: Hopper/Blackwell stacks; dev_set_megatron_bridge.csv: 2026 NeMo dense runs on H100;
  dev_set_moe.csv: NVIDIA's Qwen3-235B MoE layouts): per source the rows used and skipped (with why), the
  rows predicted out of memory, the mean and max absolute step-time error, the one-sigma band
  coverage and Spearman's rank correlation within each configuration sweep;
* `costmodel compare` on the three training logs in tests/data/logs (BLOOM-176B on 384 A100,
  Mixtral 8x7B on 16 H100, torchtitan Llama-3-8B on 32 H100): measured vs predicted step time.

Targets (issue tracker): mean error <= 10% for every source with >= 5 rows, <= 3% on Korthikanti et
al. 2022, <= 5% on SC21; no published run predicted out of memory; band coverage 55-80%; compare
within 15% on each log.

Usage: python benchmarks/accuracy.py [CSV] [--rows] [--plot DIR] [--json]   (a CSV: validate it only)
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from costmodel.cli import main  # noqa: E402

LOGS = REPO / "tests" / "data" / "logs"
# each log with the flags its argument dump lacks (tests/test_compare.py documents each choice)
COMPARES = (
    ("BLOOM-176B, 384 A100 (Megatron-DeepSpeed)", LOGS / "bloom176b_tr11_megatron_deepspeed_excerpts.log",
     ["--model", "bloom-176b", "--cluster", "jean-zay-a100", "--nodes", "48", "--tp", "4", "--pp", "12", "--mbs", "2", "--gbs", "2048",
      "--seq-len", "2048", "--zero", "1", "--recompute", "full"]),
    # the retest's own start-up lines (TP 2, DP 8); EP 8, the dispatcher and grouped GEMM as its author
    # states them, the experts split over TP as Megatron-core did then
    ("Mixtral 8x7B, 16 H100 (Megatron-core, 2024-04)", LOGS / "megatron_lm_issue756_turn1_mixtral8x7b_16xH100_tp2_ep8.log",
     ["--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--mbs", "1", "--seq-len", "2048", "--ep", "8", "--etp", "2",
      "--moe-dispatcher", "alltoall", "--moe-grouped-gemm"]),
    ("Llama-3-8B, 32 H100 (torchtitan defaults)", LOGS / "torchtitan_awsome_p5_llama3_8b_interleaved_ranks.log",
     ["--model", "llama3-8b", "--cluster", "aws-p5", "--nodes", "4", "--tp", "1", "--pp", "1", "--mbs", "1",
      "--gbs", "32", "--seq-len", "8192", "--recompute", "selective"]),
)


def _cli(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "costmodel.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=600)


def _compares() -> None:
    print("\ncompare on the training logs in tests/data/logs (step time):")
    for name, log, flags in COMPARES:
        r = _cli("compare", "--log", log, *flags, "--json")
        if r.returncode:
            print(f"  {name}: failed: {r.stderr.strip()}")
            continue
        m = {x["name"]: x for x in json.loads(r.stdout)["metrics"]}["step_time_s"]
        print(f"  {name}: measured {m['measured']:.3f} s, predicted {m['predicted']:.3f} s, "
              f"error {m['error_pct']:+.1f}%")


if __name__ == "__main__":
    args = sys.argv[1:]
    if "-h" in args or "--help" in args:
        print(__doc__.strip())
        sys.exit(0)
    has_csv = any(not a.startswith("--") and not (i and args[i - 1] == "--plot") for i, a in enumerate(args))
    if has_csv:
        sys.argv = ["costmodel", "validate"] + args
        main()
    else:
        for csv in ("dev_set.csv", "dev_set_hopper.csv", "dev_set_megatron_bridge.csv", "dev_set_moe.csv"):
            print(f"\n== costmodel validate benchmarks/data/{csv}")
            r = _cli("validate", REPO / "benchmarks" / "data" / csv, *args)
            print(r.stdout.rstrip() if not r.returncode else r.stderr.strip())
        _compares()
