"""Inputs a fuzzing trial found passing the contract's gate: each is now one line naming the file or
flag and field, exit 2 (never a traceback, never a default taken silently, never nonsense with exit 0)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from costmodel.errors import InputError

REPO = Path(__file__).resolve().parents[2]
HW = REPO / "hardware"


def run(*args):
    return subprocess.run([sys.executable, "-m", "costmodel.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300, cwd=REPO)


def one_line(r, *needles):
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    for n in needles:
        assert n in r.stderr, r.stderr


def test_spec_files_with_unreadable_numbers_are_named(tmp_path):
    """A 5,000-digit YAML integer, a 400-digit JSON one, JSON nested 100,000 deep: one line each."""
    cl = tmp_path / "huge_int.yaml"
    cl.write_text((HW / "clusters" / "dgx-h100.yaml").read_text().replace("nodes: 1", "nodes: " + "9" * 5000, 1))
    one_line(run("predict", "--model", "llama3-8b", "--cluster", cl), "integer of over 4,300 digits")
    cfg = json.loads((REPO / "costmodel" / "catalog" / "llama3-8b.json").read_text())
    cfg["hidden_size"] = int("9" * 400)
    md = tmp_path / "big.json"
    md.write_text(json.dumps(cfg))
    one_line(run("predict", "--model", md, "--cluster", "dgx-h100"), "hidden_size", "400 digits")
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100000 + "]" * 100000)
    one_line(run("predict", "--model", deep, "--cluster", "dgx-h100"), "nested too deeply")


def test_a_null_in_a_hardware_file_is_not_a_missing_key_read_as_a_default(tmp_path):
    """``max_clock_mhz: null`` had run at another clock, ``preheat_c_per_w: null`` as no preheat; a fit's
    own null statistics (r2 of a one-point fit) stay allowed in a profile."""
    from costmodel.specs import load_cluster, load_gpu, load_profile
    gpu = tmp_path / "g.yaml"
    gpu.write_text((HW / "gpus" / "h100-sxm-80gb.yaml").read_text().replace("max_clock_mhz:", "max_clock_mhz: null #", 1))
    with pytest.raises(InputError, match="max_clock_mhz: has no value"):
        load_gpu(str(gpu))
    text = (HW / "clusters" / "dgx-h100.yaml").read_text()
    cl = tmp_path / "c.yaml"
    cl.write_text(text.replace("nodes:", "nodes: null #", 1))
    with pytest.raises(InputError, match="nodes: has no value"):
        load_cluster(str(cl))
    assert load_profile("b200-sxm-180gb").gpu        # its fa4 fit's r2 is null


@pytest.mark.parametrize("key, line", [("hbm.efficiency", ("hbm:", "efficiency:")),
                                       ("gemm.bf16.eta_max", ("bf16:", "eta_max:"))])
def test_a_vanishing_efficiency_is_refused_not_overflowed(tmp_path, key, line):
    from costmodel.specs import load_profile
    lines = (HW / "profiles" / "h100-sxm-80gb.yaml").read_text().splitlines()
    sec = next(i for i, ln in enumerate(lines) if ln.strip() == line[0])
    i = next(j for j in range(sec, len(lines)) if lines[j].strip().startswith(line[1]))
    lines[i] = lines[i].split(":")[0] + ": 1.0e-300"
    p = tmp_path / "p.yaml"
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=f"{key}: must be at least 1e-06"):
        load_profile(str(p))


def test_empty_values_and_arguments_are_refused():
    """``--profile ''`` had run on the built-in profile; ``validate ''`` read the working directory."""
    one_line(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--profile", ""), "--profile: is empty")
    one_line(run("predict", "--model=", "--cluster", "dgx-h100"), "--model: is empty")
    one_line(run("validate", " "), "argument 1: is empty")


def test_validate_skips_rows_whose_cells_contradict_or_are_not_numbers(tmp_path):
    from costmodel.validate import read_runs_csv, validate_rows
    path = REPO / "benchmarks" / "data" / "dev_set_hopper.csv"
    base = {r["row_id"]: r for r in read_runs_csv(path)}["flagperf-002"]
    got = validate_rows([dict(base, row_id="a", params_b="abc"),
                         dict(base, row_id="b", step_time_s="100", tokens_per_s_per_gpu="8103")], str(path))
    assert got[0].skipped == "params_b is not a number ('abc')"
    assert "step_time_s and tokens_per_s_per_gpu imply 100 s and 64.7 s a step" in got[1].skipped


def test_compare_refuses_a_step_no_run_could_take(tmp_path):
    log = REPO / "tests" / "data" / "logs" / "megatron_synthetic_gpt8b_ddp_for_h100_power_trace.log"
    import re
    bad = tmp_path / "huge.log"
    bad.write_text(re.sub(r"elapsed time per iteration \(ms\): [0-9.]+", "elapsed time per iteration (ms): 1e300",
                          log.read_text()))
    # (each record's 1e300 ms is beyond any training step: dropped and named, so none is left)
    one_line(run("compare", "--log", bad, "--cluster", "dgx-h100"), str(bad), "no usable step time or tokens/s",
             "step_time_s 1e+297 is beyond any training step's")


def test_a_fit_whose_predictions_vanish_beside_its_times_is_not_written(tmp_path):
    """The p5 all-reduce capture with every out-of-place time 1e30 us: |predicted / measured - 1| sits at 1 for
    every size (the error's ceiling when the prediction vanishes beside the time), a fit that misses
    its data, even where the base profile's own entry was already poor."""
    cap = REPO / "hardware" / "profiles" / "data" / "aws_p5_2node_16xH100_allreduce.txt"
    rows = []
    for line in cap.read_text().splitlines():
        c = line.split()
        if len(c) >= 13 and c[1].isdigit():
            c[6] = "1e30"                      # the out-of-place time; its algbw column kept
            line = " ".join(c)
        rows.append(line)
    bad = tmp_path / "huge.txt"
    bad.write_text("\n".join(rows) + "\n")
    out = tmp_path / "o.yaml"
    r = run("calibrate", "fit", bad, "--cluster", "aws-p5", "--nodes", "2", "--gpus-per-node", "8", "-o", out)
    one_line(r, "misses its own data", "nothing written")
    assert not out.exists()


def test_torchtitan_replicate_degree_is_checked_and_said(tmp_path):
    """HSDP with the shard degree left to the world: a replicate degree that does not divide the DP
    ranks is refused naming the key; one that leaves a shard group of 2 or more is HSDP (the layout's
    dp_replicate, a --dp-replicate that differs refused); one that is all of DP is DDP."""
    src = (REPO / "tests" / "data" / "configs" / "torchtitan_llama3_8b.toml").read_text()
    assert "data_parallel_replicate_degree = 1" in src
    cfg = tmp_path / "rep3.toml"
    cfg.write_text(src.replace("data_parallel_replicate_degree = 1", "data_parallel_replicate_degree = 3"))
    r = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", cfg, "--stack", "torchtitan")
    one_line(r, "parallelism.data_parallel_replicate_degree: 3 does not divide")
    cfg = tmp_path / "rep2.toml"
    cfg.write_text(src.replace("data_parallel_replicate_degree = 1", "data_parallel_replicate_degree = 2"))
    r = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", cfg, "--stack", "torchtitan", "--json")
    assert r.returncode in (0, 3), r.stderr
    assert (json.loads(r.stdout)["layout"]["dp_replicate"], json.loads(r.stdout)["layout"]["zero"]) == (2, 3)
    r = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", cfg, "--stack", "torchtitan",
            "--dp-replicate", "4")
    one_line(r, "--dp-replicate: 4 contradicts")
    cfg = tmp_path / "rep8.toml"
    cfg.write_text(src.replace("data_parallel_replicate_degree = 1", "data_parallel_replicate_degree = 8"))
    r = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", cfg, "--stack", "torchtitan", "--json")
    assert r.returncode in (0, 3) and json.loads(r.stdout)["layout"]["zero"] == 0, r.stderr
    assert "data_parallel_replicate_degree 8 is all of DP: DDP" in r.stderr


def test_a_logged_count_past_2_53_names_the_log_not_a_flag(tmp_path):
    """A dump's global_batch_size of 1e30 had been refused as '--gbs', a flag the user never gave."""
    log = REPO / "tests" / "data" / "logs" / "megatron_synthetic_gpt8b_ddp_for_h100_power_trace.log"
    bad = tmp_path / "gbs.log"
    bad.write_text(log.read_text().replace("  global_batch_size ............................... 32",
                                           "  global_batch_size ............................... 1e30", 1))
    one_line(run("compare", "--log", bad, "--cluster", "dgx-h100"), f"{bad}: global_batch_size: 1e+30 is above 2^53")


def test_recommend_checks_the_inlet_before_searching():
    r = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--inlet-temp-c", "61")
    one_line(r, "--inlet-temp-c: 61 C is not a coolant temperature")


@pytest.mark.parametrize("where, old, new, field", [
    ("gpus/h100-sxm-80gb.yaml", "max_clock_mhz: 1980", "max_clock_mhz: 1e30", "max_clock_mhz"),
    ("profiles/h100-sxm-80gb.yaml", "launch_s: ", "launch_s: 1.0e+30 #", "launch_s"),
    ("profiles/h100-sxm-80gb.yaml", "r_th_c_per_w: ", "r_th_c_per_w: 1.0e+30 #", "thermal.r_th_c_per_w"),
    ("profiles/h100-sxm-80gb.yaml", "  flop_w: ", "  flop_w: 1.0e+30 #", "power.flop_w"),
])
def test_a_physical_value_no_gpu_has_is_refused(tmp_path, where, old, new, field):
    """Values that had given a 9e29 MHz clock, a 3e34 s step or a GPU at 1.7e31 C with exit 0 or 3."""
    from costmodel.specs import load_gpu, load_profile
    text = (HW / where).read_text()
    assert old in text
    p = tmp_path / Path(where).name
    p.write_text(text.replace(old, new, 1))
    with pytest.raises(InputError, match=field):
        (load_gpu if where.startswith("gpus") else load_profile)(str(p))


@pytest.mark.parametrize("value, why", [("0.5", "must be at least 1"), ("1.0e+9", "must be at most 3")])
def test_an_overlap_slowdown_below_one_or_far_above_any_measured_is_refused(tmp_path, value, why):
    """Overlapped compute never runs faster than alone (0.5 had given 77% MFU) nor a billion times slower
    (a 6.8e8 s step); the published mean is 1.19, the worst kernel 1.4."""
    from costmodel.specs import load_profile
    p = tmp_path / "h100-sxm-80gb.yaml"
    p.write_text((HW / "profiles/h100-sxm-80gb.yaml").read_text() + f"\noverlap:\n  compute_slowdown: {value}\n")
    with pytest.raises(InputError, match="overlap.compute_slowdown") as e:
        load_profile(str(p))
    assert why in str(e.value)
    p.write_text((HW / "profiles/h100-sxm-80gb.yaml").read_text() + "\noverlap:\n  compute_slowdown: 1.25\n")
    assert load_profile(str(p)).overlap_slowdown == 1.25


def test_a_rank_count_the_capture_contradicts_is_refused(tmp_path):
    """The p5 capture's busbw/algbw of 1.875 is 16 ranks of all_reduce; --nodes 3 x 8 (24 ranks, 1.917,
    within the ratio's 3% tolerance) had been fitted as 24 ranks; --nodes 2 fits."""
    cap = HW / "profiles" / "data" / "aws_p5_2node_16xH100_allreduce.txt"
    args = ("calibrate", "fit", cap, "--cluster", "aws-p5", "--gpus-per-node", "8")
    one_line(run(*args, "--nodes", "3", "-o", tmp_path / "n3.yaml"), "says 16 ranks of all_reduce, not the 24 given")
    ok = run(*args, "--nodes", "2", "-o", tmp_path / "n2.yaml")
    assert ok.returncode == 0 and (tmp_path / "n2.yaml").exists(), ok.stderr
