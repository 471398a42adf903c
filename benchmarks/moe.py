"""MoE accuracy benchmark: NVIDIA's published Qwen3-235B-A22B runs on 256 H100, predicted (not a test).

benchmarks/data/moe_modelzoo_qwen3_235b_h100.csv holds the H100 table of the Megatron-core MoE
team's best-practice repository (source in its header): five layouts of one model, with the
dispatcher (DeepEP or all-to-all), EP, ETP, PP x VP, FSDP and recompute of each and the measured
step time.  Each row is predicted with the catalog's qwen3-235b-a22b on dgx-h100 (32 nodes), the
recipe the repository's Qwen3-235B-A22B benchmarking config states (model_configs/benchmarking/
Qwen3-235B-A22B.yaml: --use-distributed-optimizer, --overlap-grad-reduce, --overlap-param-gather,
grouped GEMM, --moe-permute-fusion; the row's dispatcher: DeepEP -> flex), the distributed optimizer (ZeRO-1) or, where FSDP is on, ZeRO-3
(the table does not say which Megatron-FSDP sharding strategy ran; ZeRO-3 regathers the weights every micro-batch; the
megatron stack's data parallelism has no ZeRO-2).  The error is validate's: (predicted - measured) / measured, the
predicted step under the 700 W power limit, as predict prints it.  Recompute 'norm, act' is
selective recompute of Megatron-core's ``layernorm`` and ``moe_act`` modules (``--recompute-modules layernorm
moe_act``); an empty recompute cell runs none.  '+1f1b overlap' is Megatron-core's batch-level EP overlap
(the repository's A2A_OVERLAP=1: --overlap-moe-expert-parallel-comm --delay-wgrad-compute).

Validation only: nothing in the model is fitted to these rows.

Usage: python benchmarks/moe.py
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from costmodel.layouts import LayoutTable, check_layout  # noqa: E402
from costmodel.predict import predict_run  # noqa: E402
from costmodel.specs import load_cluster, load_model, load_profile  # noqa: E402
from costmodel.stacks import get_stack, stack_recipe  # noqa: E402

DATA = REPO / "benchmarks" / "data" / "moe_modelzoo_qwen3_235b_h100.csv"
DISPATCHERS = {"DeepEP": "flex", "A2A": "alltoall"}


def rows() -> list[dict]:
    """The table's rows (comment lines skipped)."""
    with DATA.open(encoding="utf-8") as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def predict(r: dict):
    """(layout, prediction) of one row."""
    m = load_model("qwen3-235b-a22b")
    c = load_cluster("dgx-h100", nodes=int(r["num_gpus"]) // 8)
    p = load_profile(c.gpu.key)
    rec = {"full": "full", "": "none"}.get(r["recompute"].strip(), "selective")
    lay = dict(tp=int(r["tp"]), pp=int(r["pp"]), dp=int(r["dp"]), cp=int(r["cp"]), ep=int(r["ep"]), etp=int(r["etp"]),
               vp=int(r["vp"]), mbs=int(r["mbs"]), recompute=rec, recompute_num_layers=0,
               zero=3 if r["fsdp"].strip() == "On" else 1, sp=int(r["tp"]) > 1, overlap=True)
    recipe = stack_recipe(get_stack("megatron"), int(r["gbs"]), int(r["seq_len"]), "bf16",
                          moe_dispatcher=DISPATCHERS[r["dispatcher"]], moe_grouped_gemm=True, moe_permute_fusion=True, dp_overlap=True,
                          recompute_modules="layernorm moe_act" if rec == "selective" else None,
                          moe_ep_overlap="1f1b overlap" in r["notes"])
    check_layout(LayoutTable.from_rows([lay]), m, recipe, c.num_gpus, c.scale_up_gpus, uneven_pp=True)
    return lay, predict_run(m, recipe, c, p, lay)


def main() -> int:
    errs = []
    print("Qwen3-235B-A22B on 256 H100 (Megatron-MoE-ModelZoo), step time:")
    for r in rows():
        lay, pred = predict(r)
        meas, got = float(r["step_time_s"]), pred.step_time_s
        err = (got - meas) / meas
        modelled = "not modelled" not in r["notes"]
        if modelled:
            errs.append(abs(err))
        top = max(pred.breakdown.items(), key=lambda kv: kv[1] if kv[0] != "compute_s" else 0)
        print(f"  {r['row_id']}: {r['dispatcher']:6s} TP{lay['tp']} PP{lay['pp']} VP{lay['vp']} EP{lay['ep']} "
              f"DP{lay['dp']} mbs{lay['mbs']} ZeRO{lay['zero']} {lay['recompute']:9s} measured {meas:5.1f} s, "
              f"predicted {got:5.1f} s ({'fits' if pred.feasible else 'OOM predicted'}), "
              f"error {100 * err:+.1f}%; largest overhead {top[0]} {top[1]:.2f} s"
              + ("" if modelled else "  [left out: " + r["notes"].split("; ", 1)[-1] + "]"))
    print(f"  mean |error| over {len(errs)} rows: {100 * sum(errs) / len(errs):.1f}%")
    return 0


if __name__ == "__main__":
    import argparse
    argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter).parse_args()
    sys.exit(main())
