"""Energy benchmark: energy saved by the energy-optimal answer vs the time-optimal one, and the
step time it costs, for the seed characterization's models (GPT-3 175B, Llama-3 70B, Mixtral 8x7B,
gbs 128) on the paper clusters (32x H200, 64x H100 on 100 Gb/s InfiniBand, 32 MI250 GCDs), with the nodes'
non-GPU power counted (race-to-idle) and without it (GPU energy only).

For each case: the search, then the ILP over the whole layout space (costmodel.optimize.solve_space,
at recommend's default power-cap levels, costmodel.optimize.DEFAULT_CAP_LEVELS) with objective 'time', 'energy' unconstrained, and 'energy' within a 5% step-time slack of the
fastest under the same limits.  The seed study's target: >= 10% energy saved at <= 5% slowdown.
Not a test: prints a table.

Usage: python benchmarks/energy.py [--candidates K]
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from costmodel.errors import InputError  # noqa: E402
from costmodel.optimize import cap_levels, solve_space  # noqa: E402
from costmodel.search import search  # noqa: E402
from costmodel.specs import Recipe, load_cluster, load_model, load_profile  # noqa: E402

CASES = [("gpt3-175b", 2048), ("llama3-70b", 8192), ("mixtral-8x7b", 4096)]
CLUSTERS = ("paper-h200", "paper-h100", "mi250")


def perseus_check(console) -> None:
    """Power-limit reproduction on the Perseus locked-clock sweeps (GPT-3 175B and BLOOM stages on A100
    SXM, hardware/profiles/data/perseus_*): the DVFS power curve is the fitted one
    (costmodel/fit/builtin/dvfs.py); the time is the model's, t(f) = t_max (c f_max / f + 1 - c) with
    the compute-bound share c fitted per sweep.  For caps between the sweep's least and largest power,
    the model's clock under the cap (costmodel.power) gives a time and an energy per pass, compared
    with the measured pass at the clock where the measured power crosses the cap."""
    import numpy as np
    from scipy.optimize import least_squares
    from costmodel.fit.builtin.dvfs import fit_sweep
    from costmodel.fit.builtin.power import load
    from costmodel.power import clock_for_dynamic_ratio, dynamic_power_ratio
    tb = Table(title="Power caps on the Perseus A100 sweeps: model vs measured pass (time, energy)")
    for col in ("sweep", "compute-bound c", "caps", "max |time err|", "max |energy err|"):
        tb.add_column(col, justify="left" if col == "sweep" else "right")
    for name, rows in load()["perseus"].items():
        stage = min(r.stage for r in rows)
        for instr in ("forward", "backward"):
            rr = sorted((r for r in rows if r.stage == stage and r.instruction == instr), key=lambda r: r.sm_clock_mhz)
            f = np.array([r.sm_clock_mhz for r in rr])
            t = np.array([r.time_s for r in rr])
            pw = np.array([r.energy_j / r.time_s for r in rr])
            fit = fit_sweep(f, pw)
            fmax, tmax = f.max(), t[np.argmax(f)]
            c = least_squares(lambda x: (tmax * (x[0] * fmax / f + 1 - x[0]) - t) / t, [0.8], bounds=(0, 1)).x[0]
            caps = np.linspace(pw.min() * 1.01, pw.max() * 0.99, 8)
            te, ee = [], []
            for cap in caps:
                s = float(clock_for_dynamic_ratio((cap - fit["p0_w"]) / fit["dyn_w"], fit["gamma"], fit["v_floor"]))
                t_mod = tmax * (c / s + 1 - c)
                p_mod = fit["p0_w"] + fit["dyn_w"] * float(dynamic_power_ratio(s, fit["gamma"], fit["v_floor"]))
                # measured: the highest clock whose power is under the cap (the GPU's own governor)
                i = int(np.flatnonzero(pw <= cap).max())
                te.append(abs(t_mod / t[i] - 1))
                ee.append(abs(t_mod * p_mod / (t[i] * pw[i]) - 1))
            tb.add_row(f"{name}/{instr}", f"{c:.2f}", f"{caps[0]:.0f}-{caps[-1]:.0f} W",
                       f"{100 * max(te):.1f}%", f"{100 * max(ee):.1f}%")
    console.print(tb)


def main(argv: list[str]) -> int:
    k = int(argv[argv.index("--candidates") + 1]) if "--candidates" in argv else 6
    tb = Table(title="Energy-optimal vs time-optimal (ILP over the whole layout space), gbs 128")
    for c in ("model", "cluster", "nodes' power", "time-opt s", "kJ", "energy-opt s", "kJ", "saved", "time cost",
              "5%-slack s", "kJ", "saved", "layouts", "solve s"):
        tb.add_column(c, justify="left" if c in ("model", "cluster", "nodes' power") else "right")
    for name, seq in CASES:
        m = load_model(name)
        r = Recipe(gbs=128, seq_len=seq)
        for cn in CLUSTERS:
            c = load_cluster(cn)
            p = load_profile(c.gpu.key)
            res = search(m, r, c, p)
            for node_power in (True, False):
                t0 = time.perf_counter()
                caps = cap_levels(c, p, None)
                run = lambda obj, slack: solve_space(
                    m, r, c, p, res, obj, caps, max_temp_c=c.gpu.slowdown_temp_c, node_power_w=c.gpu_power_budget_w,
                    inlet_temp_c=None, step_time_slack=slack, node_power=node_power, k=k)
                try:
                    t_sp = run("time", None)
                except InputError as e:       # e.g. GPT-3 175B does not fit in 32 MI250 GCDs
                    tb.add_row(name, cn, "infeasible", *[""] * 10, e.message[:40])
                    break
                e_sp = run("energy", None)
                s_sp = run("energy", 0.05)
                t_opt, e_opt, s_opt = t_sp.solution, e_sp.solution, s_sp.solution
                dt = time.perf_counter() - t0
                pct = lambda a, b: f"{100 * (a / b - 1):+.1f}%"
                tb.add_row(name, cn, f"on ({c.node_other_power_w / 1e3:.2f} kW)" if node_power else "off",
                           f"{t_opt.step_time_s:.2f}", f"{t_opt.energy_j / 1e3:,.0f}",
                           f"{e_opt.step_time_s:.2f}", f"{e_opt.energy_j / 1e3:,.0f}",
                           pct(e_opt.energy_j, t_opt.energy_j), pct(e_opt.step_time_s, t_opt.step_time_s),
                           f"{s_opt.step_time_s:.2f}", f"{s_opt.energy_j / 1e3:,.0f}",
                           pct(s_opt.energy_j, t_opt.energy_j), f"{e_sp.n_solved}/{e_sp.n_space:,}", f"{dt:.1f}")
    Console(width=200).print(tb)
    perseus_check(Console(width=200))
    return 0


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--candidates", type=int, default=6, help="layouts per case handed to the ILP (default 6)")
    ap.parse_args()
    sys.exit(main(sys.argv[1:]))
