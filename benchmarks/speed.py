"""Speed benchmark: layouts evaluated per second, and wall time of a 16,384-GPU recommend.

1. Evaluates the full enumerated layout space (every ZeRO stage, overlap on/off, SP on/off, mbs up
   to 32) of Llama-3.1-405B on 2,048 DGX H100 nodes with gbs 2048, several times, on one core,
   and prints layouts/s (target >= 1,000,000/s).
2. Times ``costmodel recommend --model llama3.1-405b --cluster dgx-h100 --nodes 2048`` as a fresh
   process, interpreter start included (target <= 3 s).
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
from costmodel.predict import predict_table  # noqa: E402
from costmodel.specs import Recipe, load_cluster, load_model, load_profile  # noqa: E402


def evaluate(model_name: str, cluster_name: str, nodes: int, gbs: int, reps: int = 5) -> None:
    """Enumerate the full layout space of one case and print the best-of-``reps`` evaluation rate."""
    model = load_model(model_name)
    cluster = load_cluster(cluster_name, nodes=nodes)
    profile = load_profile(cluster.gpu.key)
    recipe = Recipe(gbs=gbs, seq_len=model.seq_len)
    t0 = time.perf_counter()
    table = enumerate_layouts(model, recipe, cluster.num_gpus, cluster.gpus_per_node, max_mbs=32,
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


def main() -> int:
    evaluate("llama3.1-405b", "dgx-h100", 2048, 2048)
    evaluate("llama3-70b", "dgx-h100", 1024, 4096)
    evaluate("mixtral-8x22b", "dgx-h100", 512, 2048)
    exe = shutil.which("costmodel")
    cmd = [exe] if exe else [sys.executable, "-m", "costmodel.cli"]
    cmd += ["recommend", "--model", "llama3.1-405b", "--cluster", "dgx-h100", "--nodes", "2048"]
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        walls.append(time.perf_counter() - t0)
        if p.returncode:
            print(p.stderr)
            return 1
    print(f"`{' '.join(['costmodel'] + cmd[-7:])}`: {min(walls):.2f} s wall (best of 3, "
          f"interpreter start included; target <= 3 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
