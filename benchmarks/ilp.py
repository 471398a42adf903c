"""ILP benchmark (costmodel.ilp): solve time and optimality gap against the brute-force oracle
(tests/ilp/ilp_oracle.py) on random small instances, and solve time on large synthetic instances.

1. Small: random instances (1-3 layouts, 2-4 stages, 3 cap levels, 1-2 nodes of 4-8 slots, <= 8
   layers, half with a step-time slack): ILP vs brute force for 'energy', 'time' and 'edp'; prints
   the ILP solve time (mean / max) and the largest relative gap (0 when the ILP is optimal).
2. Large: instances shaped like a 1,024-GPU cluster (G = 8, 128 nodes, K = 10 layouts with p up to
   16 stages, 5 cap levels, 126 layers); prints the solve time and MIP count per objective
   (target <= 2 s per solve, CBC on one core).
3. Placement: 8 nodes of 8, K = 10 layouts of 8-16 stages with 1-8 GPUs per stage (most stages
   share a node, so the slot placement is part of the decision).
4. With --costmodel: instances built by costmodel.optimize from the catalog (the seed study's
   models on both paper clusters, and Llama-3 70B on 128 DGX H100 nodes = 1,024 GPUs; 6 candidate
   layouts), as the CLI's energy recommend does.

Not a test: it prints figures.  Usage: python benchmarks/ilp.py [--seeds N] [--costmodel]
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "ilp"))   # the oracle

import numpy as np  # noqa: E402

from costmodel import ilp  # noqa: E402
from ilp_oracle import brute_force, random_instance  # noqa: E402


def timed(fn, *a, **kw):
    """(result or the InfeasibleError, seconds)."""
    t0 = time.perf_counter()
    try:
        out = fn(*a, **kw)
    except ilp.InfeasibleError as e:
        out = e
    return out, time.perf_counter() - t0


def small(n: int) -> None:
    """ILP vs brute force on ``n`` random small instances."""
    rng = np.random.default_rng(2024)
    stats = {o: dict(t=[], gap=0.0, infeasible=0, agree=0) for o in ilp.OBJECTIVES}
    for _ in range(n):
        inst = random_instance(rng, num_layouts=int(rng.integers(1, 4)), gpus_per_node=int(rng.choice([4, 6, 8])),
                                   num_nodes=int(rng.integers(1, 3)), num_caps=3, pp_range=(2, 4), max_layers=8,
                                   slack=None if rng.random() < 0.5 else float(rng.uniform(0, 0.2)))
        for o in ilp.OBJECTIVES:
            want, _ = timed(brute_force, inst, o)
            got, dt = timed(ilp.solve, inst, o)
            st = stats[o]
            st["t"].append(dt)
            if isinstance(want, Exception) or isinstance(got, Exception):
                st["infeasible"] += 1
                st["agree"] += isinstance(want, Exception) == isinstance(got, Exception)
                continue
            gap = (got.objective_value - want.objective_value) / want.objective_value
            st["gap"] = max(st["gap"], abs(gap))
            st["agree"] += abs(gap) <= 1e-6
    print(f"1. {n} random small instances, ILP (CBC, one core) vs brute force")
    print(f"   {'objective':<9} {'mean s':>8} {'max s':>8} {'max |gap|':>10} {'agree':>7} {'infeasible':>10}")
    for o, st in stats.items():
        print(f"   {o:<9} {np.mean(st['t']):8.3f} {np.max(st['t']):8.3f} {st['gap']:10.1e} "
              f"{st['agree']:>4}/{n:<3}{st['infeasible']:>9}")


def large(title: str, seeds: int, **kw) -> None:
    """Solve time per objective on ``seeds`` random instances of one shape."""
    print(title)
    print(f"   {'seed':>4} {'layouts (p x S)':<44} {'energy s':>9} {'time s':>8} {'edp s':>8} {'MIPs e/t/edp':>13}")
    allt = {o: [] for o in ilp.OBJECTIVES}
    for seed in range(seeds):
        inst = random_instance(np.random.default_rng(100 + seed), **kw)
        row, mips = [], []
        for o in ("energy", "time", "edp"):
            sol, dt = timed(ilp.solve, inst, o)
            allt[o].append(dt)
            row.append(f"{dt:{9 if o == 'energy' else 8}.2f}")
            mips.append("-" if isinstance(sol, Exception) else str(sol.num_solves))
        shapes = " ".join(sorted({f"{o.pp}x{o.stage_gpus}" for o in inst.options}))
        print(f"   {seed:>4} {shapes:<44} {' '.join(row)} {'/'.join(mips):>13}")
    print("   max s: " + ", ".join(f"{o} {max(t):.2f}" for o, t in allt.items())
          + "; mean s: " + ", ".join(f"{o} {np.mean(t):.2f}" for o, t in allt.items()))


def costmodel_cases() -> None:
    """Instances from the catalog through costmodel.optimize (as `costmodel recommend --objective`)."""
    from costmodel.optimize import build_instance, cap_levels, candidates
    from costmodel.search import search
    from costmodel.specs import Recipe, load_cluster, load_model, load_profile
    print("4. cost-model instances (6 candidate layouts, the default 9 cap levels, catalog thermal model)")
    print(f"   {'model':<13} {'cluster':<16} {'energy s':>9} {'time s':>8} {'edp s':>8} {'5%-slack energy s':>18}")
    cases = [(name, seq, cn, None, 128) for name, seq in (("gpt3-175b", 2048), ("llama3-70b", 8192),
                                                          ("mixtral-8x7b", 4096))
             for cn in ("paper-h200", "paper-h100")] + [("llama3-70b", 8192, "dgx-h100", 128, 1024)]
    for name, seq, cn, nodes, gbs in cases:
        m, c = load_model(name), load_cluster(cn, nodes=nodes)
        p, r = load_profile(c.gpu.key), Recipe(gbs=gbs, seq_len=seq)
        res = search(m, r, c, p)
        caps = cap_levels(c, p, None)
        lays = candidates(m, r, c, p, res, "energy", k=6)

        def mk(slack):
            return build_instance(lays, caps, max_temp_c=c.gpu.slowdown_temp_c,
                                  node_power_w=c.gpu_power_budget_w, inlet_temp_c=None, step_time_slack=slack)
        ts = [timed(ilp.solve, mk(None), o)[1] for o in ("energy", "time", "edp")]
        ts.append(timed(ilp.solve, mk(0.05), "energy")[1])
        where = cn if nodes is None else f"{cn} x{nodes}"
        print(f"   {name:<13} {where:<16} {ts[0]:9.2f} {ts[1]:8.2f} {ts[2]:8.2f} {ts[3]:18.2f}")


def main(argv: list[str]) -> int:
    seeds = int(argv[argv.index("--seeds") + 1]) if "--seeds" in argv else 6
    small(60)
    large("2. 1,024-GPU-shaped instances: G = 8, 128 nodes, 10 layouts, p <= 16, 5 caps, 126 layers", seeds,
          num_layouts=10, gpus_per_node=8, num_nodes=128, num_caps=5, pp_range=(1, 16), fill=True, num_layers=126)
    large("3. placement instances: G = 8, 8 nodes, 10 layouts of 8-16 stages x 1-8 GPUs, 5 caps, 126 layers",
          seeds, num_layouts=10, gpus_per_node=8, num_nodes=8, num_caps=5, pp_range=(8, 16), num_layers=126)
    if "--costmodel" in argv:
        costmodel_cases()
    return 0


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=6, help="random instances per large case (default 6)")
    ap.add_argument("--costmodel", action="store_true", help="also solve the cost model's own instances")
    ap.parse_args()
    sys.exit(main(sys.argv[1:]))
