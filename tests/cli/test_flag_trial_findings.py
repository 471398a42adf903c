"""Findings of a new user's trial of predict's and recommend's flags."""
import json

from test_cli import assert_one_line_error, run

ARGS = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--tp", "2", "--gbs", "64"]


def test_fp16_training_reports_the_fp16_gradients_it_prices_and_refuses_fp32_ones():
    """Under --precision fp16 the gradients are priced in fp16 (2 B each: Megatron-LM reduces them so
    unless --accumulate-allreduce-grads-in-fp32), which the JSON had reported as fp32; an explicit
    --main-grads-dtype fp32 had been dropped without a word."""
    p = run("predict", *ARGS, "--precision", "fp16", "--json")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["recipe"]["main_grads_dtype"] == "fp16"
    bf16 = json.loads(run("predict", *ARGS, "--json").stdout)
    assert bf16["recipe"]["main_grads_dtype"] == "fp32"
    assert rec["memory"]["grads_bytes"] * 2 == bf16["memory"]["grads_bytes"]
    assert_one_line_error(run("predict", *ARGS, "--precision", "fp16", "--main-grads-dtype", "fp32"),
                          "--main-grads-dtype", "fp16 gradients")


def test_zero3_overlap_note_names_the_flag_that_exposes_the_traffic():
    p = run("predict", *ARGS, "--stack", "megatron", "--zero", "3", "--no-dp-overlap")
    assert p.returncode == 0, p.stderr
    assert "--no-dp-overlap changes nothing at ZeRO-3 on the megatron stack" in p.stderr
    assert "--no-overlap prices that traffic exposed" in p.stderr


def test_recommend_s_runner_up_margins_say_they_keep_the_winner_s_switches():
    """Llama 3 70B on paper-h200: the best TP4 PP4 layout is 4.9% slower with the winner's switches (no
    TP-comm overlap), 1.5% with its own (a pinned search adopts the overlap): the line says which."""
    p = run("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--top", "5")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert ("the best layout with TP=4 PP=4 (DP=2 CP=1 mbs=1 recompute=none) is 4.9% slower with the winner's "
            "switches (--tp 4 --pp 4 searches its own)") in text
