"""Energy benchmark: energy saved by the energy-optimal answer vs the time-optimal one, and the
step time it costs, for the seed characterization's models (GPT-3 175B, Llama-3 70B, Mixtral 8x7B,
gbs 128) on both paper clusters (32x H200, 64x H100 on 100 Gb/s InfiniBand).

For each case: the search, the ILP candidates, then the ILP with objective 'time' and with
objective 'energy' (unconstrained, and with a 5% step-time slack).  Not a test: prints a table.

Usage: python benchmarks/energy.py [--candidates K]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from costmodel import ilp  # noqa: E402
from costmodel.optimize import build_instance, cap_levels, candidates  # noqa: E402
from costmodel.search import search  # noqa: E402
from costmodel.specs import Recipe, load_cluster, load_model, load_profile  # noqa: E402

CASES = [("gpt3-175b", 2048), ("llama3-70b", 8192), ("mixtral-8x7b", 4096)]
CLUSTERS = ("paper-h200", "paper-h100")


def main(argv: list[str]) -> int:
    k = int(argv[argv.index("--candidates") + 1]) if "--candidates" in argv else 4
    tb = Table(title="Energy-optimal vs time-optimal (ILP), gbs 128")
    for c in ("model", "cluster", "time-opt s", "kJ", "energy-opt s", "kJ", "saved", "time cost",
              "5%-slack s", "kJ", "saved", "solve s"):
        tb.add_column(c, justify="left" if c in ("model", "cluster") else "right")
    for name, seq in CASES:
        m = load_model(name)
        r = Recipe(gbs=128, seq_len=seq)
        for cn in CLUSTERS:
            c = load_cluster(cn)
            p = load_profile(c.gpu.key)
            t0 = time.perf_counter()
            res = search(m, r, c, p)
            caps = cap_levels(c, p, None)
            lays = candidates(m, r, c, p, res, "energy", k=k)
            mk = lambda slack: build_instance(lays, caps, max_temp_c=c.gpu.slowdown_temp_c,
                                              node_power_w=c.node_power_budget_w, inlet_temp_c=None,
                                              step_time_slack=slack)
            t_opt = ilp.solve(mk(None), "time")
            e_opt = ilp.solve(mk(None), "energy")
            s_opt = ilp.solve(mk(0.05), "energy")
            dt = time.perf_counter() - t0
            pct = lambda a, b: f"{100 * (a / b - 1):+.1f}%"
            tb.add_row(name, cn, f"{t_opt.step_time_s:.2f}", f"{t_opt.energy_j / 1e3:,.0f}",
                       f"{e_opt.step_time_s:.2f}", f"{e_opt.energy_j / 1e3:,.0f}",
                       pct(e_opt.energy_j, t_opt.energy_j), pct(e_opt.step_time_s, t_opt.step_time_s),
                       f"{s_opt.step_time_s:.2f}", f"{s_opt.energy_j / 1e3:,.0f}",
                       pct(s_opt.energy_j, t_opt.energy_j), f"{dt:.1f}")
    Console(width=180).print(tb)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
