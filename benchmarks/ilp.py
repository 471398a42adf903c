"""ILP benchmark: solve time and optimality gap vs brute force on random small instances, and solve
time on instances built from the cost model for the paper clusters and a 1,024-GPU cluster
(target <= 2 s per solve with CBC on one core).  Not a test: prints figures.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from costmodel import ilp  # noqa: E402
from costmodel.optimize import build_instance, cap_levels, candidates  # noqa: E402
from costmodel.search import search  # noqa: E402
from costmodel.specs import Recipe, load_cluster, load_model, load_profile  # noqa: E402


def random_instance(rng: np.random.Generator) -> ilp.Instance:
    """A one-node instance (G = 8, 1-2 layouts of 2 or 4 stages, 3 cap levels, <= 8 layers)."""
    G, caps = 8, (200.0, 300.0, 400.0)
    opts = []
    for k in range(rng.integers(1, 3)):
        pp = int(rng.choice([2, 4]))
        base, slow = rng.uniform(0.01, 0.1), rng.uniform(1.05, 1.6)
        shape = np.array([slow, 1 + (slow - 1) / 3, 1.0])
        opts.append(ilp.LayoutOption(
            name=f"opt{k}", pp=pp, stage_gpus=G // pp, num_layers=int(rng.integers(pp, 9)),
            microbatches=int(rng.integers(1, 9)), vp=1, const_time_s=rng.uniform(0, 0.2),
            t_layer_s=base * shape, t_first_s=np.zeros(3), t_last_s=rng.uniform(0, 2) * base * shape,
            p_busy_w=np.array([190.0, rng.uniform(200, 290), rng.uniform(295, 390)]), p_idle_w=80.0,
            mem_fixed_bytes=rng.uniform(0, 20e9, pp), mem_per_layer_bytes=rng.uniform(1e9, 12e9, pp)))
    pre = np.zeros((G, G))
    for j in range(4):
        pre[j, j + 4] = rng.uniform(0, 0.03)
    return ilp.Instance(options=tuple(opts), cap_levels_w=caps, gpus_per_node=G, num_nodes=1, hbm_bytes=80e9,
                        inlet_c=np.full(G, 25.0), r_th_c_per_w=np.r_[np.full(4, 0.08), np.full(4, 0.096)],
                        preheat_c_per_w=pre, max_temp_c=rng.uniform(45, 70),
                        node_power_budget_w=rng.uniform(1600, 3200), step_time_slack=None)


def small(n: int = 40) -> None:
    rng = np.random.default_rng(0)
    gaps, times, infeasible = [], [], 0
    for _ in range(n):
        inst = random_instance(rng)
        for obj in ("energy", "time", "edp"):
            try:
                t0 = time.perf_counter()
                a = ilp.solve(inst, obj)
                times.append(time.perf_counter() - t0)
                b = ilp.brute_force(inst, obj)
                gaps.append(abs(a.value(obj) / b.value(obj) - 1))
            except ilp.InfeasibleError:
                infeasible += 1
    print(f"random small instances: {len(gaps)} solves (+{infeasible} infeasible); max gap vs brute force "
          f"{max(gaps):.2e}; solve time median {np.median(times) * 1e3:.0f} ms, max {max(times) * 1e3:.0f} ms")


def real(model: str, cluster: str, nodes: int | None, k: int = 6) -> None:
    m = load_model(model)
    c = load_cluster(cluster, nodes=nodes)
    p = load_profile(c.gpu.key)
    r = Recipe(gbs=128 if nodes is None else 1024, seq_len=m.seq_len)
    res = search(m, r, c, p)
    caps = cap_levels(c, p, None)
    lays = candidates(m, r, c, p, res, "energy", k=k)
    inst = build_instance(m, r, c, p, lays, caps, max_temp_c=c.gpu.slowdown_temp_c,
                          node_power_w=c.node_power_budget_w, inlet_temp_c=None, step_time_slack=0.05)
    for obj in ("time", "energy", "edp"):
        t0 = time.perf_counter()
        sol = ilp.solve(inst, obj)
        dt = time.perf_counter() - t0
        print(f"{model} on {c.num_gpus} GPUs ({cluster}), {len(lays)} layouts x {len(caps)} caps, objective {obj}: "
              f"{dt:.2f} s ({sol.num_solves} MIP solves), {sol.layout_name}, PP={len(sol.layers)}")


def main() -> int:
    small()
    real("llama3-70b", "paper-h200", None)
    real("gpt3-175b", "paper-h100", None)
    real("llama3-70b", "dgx-h100", 128)
    return 0


if __name__ == "__main__":
    sys.exit(main())
