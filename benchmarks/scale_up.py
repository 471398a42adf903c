"""Scale-up vs scale-out for the seed characterization's three models (prints figures; not a test).

For GPT-3 175B, Llama-3 70B and Mixtral 8x7B (gbs 128 sequences at each model's training length,
bf16, Megatron-core) the fastest layout that fits (``recommend``'s search, then its power and
energy at full power limits) on:

1. 32 H200 on 100 Gb/s InfiniBand (paper-h200, 4 nodes) against 64 H100 on the same network
   (paper-h100, 8 nodes): fewer, bigger GPUs against more GPUs over the network;
2. one GB200 NVL72 rack (72 GPUs, one NVLink domain) against DGX H100 nodes at equal GPU count
   (9 nodes, 72 GPUs) and at equal GPU power (the rack's 72 x 1,200 W = 86.4 kW of TDP buys 123
   H100 at 700 W: 15 nodes, 120 GPUs);
3. one GB300 NVL72 rack against one GB200 NVL72 rack: the same dense BF16 peak with 288 GB, 800 Gb/s
   NICs and a 1,400 W limit instead of 1,200 W (its specs are third-party restatements, see its GPU file).

Columns: the layout, step time, tokens/s per GPU and in all, GPU energy per step and per token
(the power model at the TDP), and the share of the step the network takes.

Usage: python benchmarks/scale_up.py
"""
from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from costmodel.layouts import layout_name  # noqa: E402
from costmodel.predict import predict_run  # noqa: E402
from costmodel.search import search  # noqa: E402
from costmodel.specs import load_cluster, load_model, load_profile  # noqa: E402
from costmodel.stacks import get_stack, stack_recipe  # noqa: E402

MODELS = ("gpt3-175b", "llama3-70b", "mixtral-8x7b")
GBS = 128
COMPARISONS = (
    ("32 H200 vs 64 H100, 100 Gb/s IB", (("paper-h200", 4), ("paper-h100", 8))),
    ("NVL72 vs HGX H100, equal GPUs", (("gb200-nvl72", 18), ("dgx-h100", 9))),
    ("NVL72 vs HGX H100, equal GPU power", (("gb200-nvl72", 18), ("dgx-h100", 15))),
    ("GB300 vs GB200 NVL72, one rack", (("gb300-nvl72", 18), ("gb200-nvl72", 18))),
)
COMM = ("tp_comm_s", "cp_comm_s", "ep_comm_s", "pp_comm_s", "dp_comm_s")


def best(model_name: str, cluster_name: str, nodes: int):
    """(cluster, RunPrediction) of the fastest feasible layout, or (cluster, None)."""
    m = load_model(model_name)
    c = load_cluster(cluster_name, nodes=nodes)
    p = load_profile(c.gpu.key)
    r = stack_recipe(get_stack("megatron"), GBS, m.seq_len, "bf16", gpu=c.gpu)
    res = search(m, r, c, p, max_mbs=8, zero_stages=(0, 1))
    if res.n_feasible == 0:
        return c, None
    lay = res.ranked.layouts.row(0)
    return c, predict_run(m, r, c, p, lay)


def main() -> int:
    out = Console(width=200)
    for title, pair in COMPARISONS:
        tb = Table(title=f"{title}: the fastest layout of each, gbs {GBS}")
        for col in ("model", "cluster", "GPUs", "layout", "step s", "tok/s/GPU", "tok/s", "GPU kJ/step",
                    "J/token", "network share"):
            tb.add_column(col, justify="left" if col in ("model", "cluster", "layout") else "right")
        for name in MODELS:
            for cname, nodes in pair:
                c, run = best(name, cname, nodes)
                if run is None:
                    tb.add_row(name, cname, str(c.num_gpus), "nothing fits", *["-"] * 6)
                    continue
                tokens = GBS * run.recipe.seq_len
                e = run.energy.energy_j_per_step if run.energy is not None else float("nan")
                net = sum(run.breakdown[k] for k in COMM) / run.uncapped_step_time_s
                tb.add_row(name, cname, str(c.num_gpus), layout_name(run.layout), f"{run.step_time_s:.2f}",
                           f"{run.tokens_per_s_per_gpu:,.0f}", f"{tokens / run.step_time_s:,.0f}", f"{e / 1e3:.1f}",
                           f"{e / tokens:.2f}", f"{100 * net:.0f}%")
        out.print(tb)
    return 0


if __name__ == "__main__":
    import argparse
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    raise SystemExit(main())
