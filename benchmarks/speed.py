"""Speed benchmark: layouts evaluated per second, and wall time of a 16,384-GPU recommend.

1. Evaluates the full enumerated layout space (every ZeRO stage, overlap on/off, SP on/off, mbs up
   to 32) of Llama-3.1-405B on 2,048 DGX H100 nodes with gbs 2048, several times, on one core,
   and prints layouts/s (target >= 1,000,000/s); likewise Llama 3 70B on 8,192 GPUs, Mixtral 8x22B
   on 4,096 and DeepSeek-V3 on 2,048 (the MoE layouts stay vectorised), after the per-call times of
   predict_run and predict_table.
2. Times ``costmodel recommend --model llama3.1-405b --cluster dgx-h100 --nodes 2048`` and ``--model
   deepseek-v3 --nodes 256`` as fresh processes, interpreter start included (target <= 3 s), and
   ``costmodel validate benchmarks/data/dev_set.csv`` (target <= 5 s).
Not a test: it prints figures.  Set OMP/OPENBLAS threads to 1 for a one-core figure.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from costmodel.layouts import enumerate_layouts  # noqa: E402
from costmodel.layouts import LayoutTable  # noqa: E402
from costmodel.predict import predict_run, predict_table  # noqa: E402
from costmodel.specs import Recipe, load_cluster, load_model, load_profile  # noqa: E402


def evaluate(model_name: str, cluster_name: str, nodes: int, gbs: int, reps: int = 5) -> None:
    """Enumerate the full layout space of one case and print the best-of-``reps`` evaluation rate."""
    model = load_model(model_name)
    cluster = load_cluster(cluster_name, nodes=nodes)
    profile = load_profile(cluster.gpu.key)
    recipe = Recipe(gbs=gbs, seq_len=model.seq_len)
    t0 = time.perf_counter()
    table = enumerate_layouts(model, recipe, cluster.num_gpus, cluster.scale_up_gpus, max_mbs=32,
                              sp_choices=(True, False), zero_stages=(0, 1, 2, 3), overlaps=(True, False))
    t_enum = time.perf_counter() - t0
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        predict_table(model, recipe, cluster, profile, table)
        best = min(best, time.perf_counter() - t0)
    print(f"{model.display_name} on {cluster.num_gpus:,} GPUs, gbs {gbs}: {len(table):,} valid layouts "
          f"(enumerated in {t_enum:.3f} s); {len(table) / best:,.0f} layouts/s (best of {reps}, "
          f"{best * 1e3:.1f} ms per pass; target >= 1,000,000/s)")


def one_layout(reps: int = 300) -> None:
    """Latency of one layout after start-up: the full prediction (time, memory, band, power,
    temperature), the time model alone on a table of one, and the per-layout cost when many
    layouts of one model and cluster go through as one table (``validate``'s grouping)."""
    model, cluster = load_model("llama3-70b"), load_cluster("paper-h200")
    profile, recipe = load_profile(cluster.gpu.key), Recipe(gbs=128, seq_len=8192)
    lay = dict(tp=4, pp=4, dp=2, cp=1, ep=1, vp=1, mbs=1, recompute="full", zero=1, sp=True, overlap=True)
    one = LayoutTable.from_rows([lay])
    many = enumerate_layouts(model, recipe, cluster.num_gpus, cluster.scale_up_gpus)
    cases = (("predict_run, one layout (time, memory, band, power, temperature)",
              lambda: predict_run(model, recipe, cluster, profile, lay), 1),
             ("predict_table, one layout (time and memory)", lambda: predict_table(model, recipe, cluster, profile, one), 1),
             (f"predict_table, per layout of a {len(many)}-layout table (validate's groups)",
              lambda: predict_table(model, recipe, cluster, profile, many), len(many)))
    for name, fn, n in cases:
        fn()
        best = float("inf")
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(max(1, reps // n)):
                fn()
            best = min(best, (time.perf_counter() - t0) / max(1, reps // n) / n)
        print(f"{name}: {best * 1e6:,.1f} us")


def main() -> int:
    one_layout()
    evaluate("llama3.1-405b", "dgx-h100", 2048, 2048)
    evaluate("llama3-70b", "dgx-h100", 1024, 4096)
    evaluate("mixtral-8x22b", "dgx-h100", 512, 2048)
    evaluate("deepseek-v3", "dgx-h100", 256, 4096)
    exe = shutil.which("costmodel")
    cmd = [exe] if exe else [sys.executable, "-m", "costmodel.cli"]
    for model, nodes in (("llama3.1-405b", "2048"), ("deepseek-v3", "256")):
        rec = cmd + ["recommend", "--model", model, "--cluster", "dgx-h100", "--nodes", nodes]
        walls = []
        for _ in range(3):
            t0 = time.perf_counter()
            p = subprocess.run(rec, capture_output=True, text=True, cwd=ROOT)
            walls.append(time.perf_counter() - t0)
            if p.returncode:
                print(p.stderr)
                return 1
        print(f"`{' '.join(['costmodel'] + rec[-7:])}`: {min(walls):.2f} s wall (best of 3, "
              f"interpreter start included; target <= 3 s)")
    cmd = cmd + ["validate", "benchmarks/data/dev_set.csv"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode:
        print(p.stderr)
        return 1
    print(f"`costmodel validate benchmarks/data/dev_set.csv`: {time.perf_counter() - t0:.2f} s wall "
          "(interpreter start included; target <= 5 s)")
    return 0


if __name__ == "__main__":
    import argparse
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    sys.exit(main())
