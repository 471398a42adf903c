"""compare on runs as users bring them: a power trace with temperatures plotted, a trace of idle GPUs
or of more GPUs than a node has, a log of warm-up steps only, a value the log gives that the GPU
cannot run, a stray byte in a power trace."""
from pathlib import Path

from cli_run import REPO, one_line, run

LOGS = REPO / "tests" / "data" / "logs"
GPT8B = LOGS / "megatron_synthetic_gpt8b_ddp_for_h100_power_trace.log"
H100_TRACE = REPO / "hardware" / "profiles" / "data" / "h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv"
MCORE_SYN = LOGS / "megatron_core_synthetic_full_args_rank_prefixes.log"


def _trace(tmp_path, edit, name="t.csv") -> Path:
    """The public 8 x H100 trace with ``edit`` applied to each data row's cells (header kept)."""
    lines = H100_TRACE.read_text().splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("timestamp"))
    out = lines[:head + 1] + [edit(i, ln) for i, ln in enumerate(lines[head + 1:])]
    p = tmp_path / name
    p.write_text("\n".join(out) + "\n")
    return p


def test_a_trace_with_temperatures_plots_every_figure(tmp_path):
    lines = H100_TRACE.read_text().splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("timestamp"))
    p = tmp_path / "t.csv"
    p.write_text("\n".join(lines[:head] + [lines[head] + ", temperature.gpu"]
                           + [ln + f", {40 + (i % 8)}" for i, ln in enumerate(lines[head + 1:])]) + "\n")
    r = run("compare", "--log", GPT8B, "--cluster", "dgx-h100", "--nodes", "1", "--power", p, "--plot", tmp_path / "fig")
    assert r.returncode == 0, r.stderr
    assert sorted(f.name for f in (tmp_path / "fig").iterdir()) == ["breakdown.png", "metrics.png", "power.png",
                                                                     "temperature.png"]


def test_a_trace_of_idle_gpus_or_of_more_gpus_than_a_node_is_refused(tmp_path):
    idle = _trace(tmp_path, lambda i, ln: ", ".join(ln.split(", ")[:1] + ["72.00 W", "0 %"] + ln.split(", ")[3:]))
    one_line(run("compare", "--log", GPT8B, "--cluster", "dgx-h100", "--nodes", "1", "--power", idle),
             "--power", "the captured GPUs sat idle", "median utilisation 0%",
             "or its utilisation column is not measured there (nvidia-smi reads 0 under MIG")
    lines = H100_TRACE.read_text().splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("timestamp"))
    wide = tmp_path / "w.csv"           # the same rows numbered as 16 GPUs: 0..15
    wide.write_text("\n".join(lines[:head] + ["timestamp, index, power.draw [W], utilization.gpu [%], memory.used [MiB]"]
                              + [(lambda c: ", ".join([c[0], str(i % 16)] + c[1:]))(ln.split(", "))
                                 for i, ln in enumerate(lines[head + 1:])]) + "\n")
    one_line(run("compare", "--log", GPT8B, "--cluster", "dgx-h100", "--nodes", "1", "--power", wide),
             "--power", "GPU indices up to 15", "has 8 GPUs")


def test_a_stray_byte_in_a_trace_costs_its_row_only(tmp_path):
    p = _trace(tmp_path, lambda i, ln: ln)
    raw = p.read_bytes().splitlines(keepends=True)
    raw[20] = raw[20].rstrip(b"\n") + b"\xff\n"
    p.write_bytes(b"".join(raw))
    r = run("compare", "--log", GPT8B, "--cluster", "dgx-h100", "--nodes", "1", "--power", p)
    assert r.returncode == 0 and f"{p.name}:21:" in r.stderr + r.stdout, r.stderr


def test_a_log_of_warm_up_steps_only_is_refused_unless_asked(tmp_path):
    lines = MCORE_SYN.read_text().splitlines()
    first = next(i for i, ln in enumerate(lines) if " iteration " in ln)
    p = tmp_path / "warm.log"
    p.write_text("\n".join(lines[:first + 1]) + "\n")           # the first record after the start marker only
    one_line(run("compare", "--log", p, "--cluster", "dgx-h100"), "warm.log", "every logged record is warm-up",
             "--warmup-steps 0")
    r = run("compare", "--log", p, "--cluster", "dgx-h100", "--warmup-steps", "0")
    assert r.returncode == 0 and "1 logged record used" in r.stdout, r.stderr


def test_a_precision_from_the_log_the_gpu_cannot_run_names_the_log(tmp_path):
    p = tmp_path / "mx.log"
    p.write_text(MCORE_SYN.read_text().replace("fp8 ........................................... None",
                                               "fp8 ........................................... e4m3\n"
                                               "[rank0]:  fp8_recipe .................................... mxfp8"))
    one_line(run("compare", "--log", p, "--cluster", "dgx-h100"), "mx.log: precision: mxfp8", "not a flag")


def test_a_torchtitan_log_s_clock_is_checked_against_the_step_its_tokens_per_s_give(tmp_path):
    """torchtitan prints tokens/s, not a step time: its step (gbs x seq_len / (tps x GPUs): 8 x 8192 /
    (6,000 x 8) = 1.365 s) is what the timestamps are checked against.  Records 10 steps apart printed
    13.65 s apart agree; printed 1.365 s apart, the steps take longer than the clock allows."""
    from datetime import datetime, timedelta
    flags = ["--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--tp", "1", "--pp", "1", "--mbs", "1",
             "--gbs", "8", "--seq-len", "8192", "--recompute", "none"]
    t0 = datetime(2025, 5, 10, 8, 0, 0)

    def log(spacing_s, name):
        rows = [f"[rank0]:[titan] {(t0 + timedelta(seconds=k * spacing_s)).strftime('%Y-%m-%d %H:%M:%S')},000 - root "
                f"- INFO - step: {10 * k + 10}  loss:  9.0000  memory: 61.20GiB(64.42%)  tps: 6,000  tflops: 300.00  "
                f"mfu: 30.33%" for k in range(30)]
        p = tmp_path / name
        p.write_text("\n".join(rows) + "\n")
        return p
    ok, bad = run("compare", "--log", log(13.65, "ok.log"), *flags), run("compare", "--log", log(1.365, "fast.log"), *flags)
    assert ok.returncode == 0 and bad.returncode == 0, ok.stderr + bad.stderr
    assert "the steps take longer than the clock allows" not in " ".join((ok.stdout + ok.stderr).split())
    assert "the steps take longer than the clock allows" in " ".join((bad.stdout + bad.stderr).split())


def test_an_llm_foundry_log_is_compared_on_the_stack_s_fsdp_layout():
    r = run("compare", "--log", LOGS / "llm_foundry_synthetic_composer_console.log", "--model", "llama2-7b", "--cluster",
            "dgx-h100", "--json")
    assert r.returncode == 0, r.stderr
    import json
    out = json.loads(r.stdout)
    assert out["framework"] == "llm-foundry" and out["recipe"]["stack"] == "llm-foundry"
    assert {k: out["layout"][k] for k in ("tp", "pp", "dp", "mbs", "zero")} == dict(tp=1, pp=1, dp=8, mbs=8, zero=3)
    assert {m["name"] for m in out["metrics"]} >= {"step_time_s", "logged_mfu", "peak_memory_gib"}


def test_a_deepspeed_log_is_compared_with_its_zero_stage_and_batch():
    r = run("compare", "--log", LOGS / "deepspeed_synthetic_zero3_throughput_timer.log", "--model", "llama3-8b",
            "--cluster", "dgx-h100", "--seq-len", "2048", "--json")
    assert r.returncode == 0, r.stderr
    import json
    out = json.loads(r.stdout)
    assert out["framework"] == "deepspeed" and out["recipe"]["stack"] == "deepspeed"
    assert {k: out["layout"][k] for k in ("tp", "pp", "dp", "mbs", "zero")} == dict(tp=1, pp=1, dp=8, mbs=4, zero=3)
    assert out["recipe"]["gbs"] == 256 and out["origin"]["zero"] == "log"


def test_compare_refuses_nodes_that_contradict_the_run_configuration(tmp_path):
    cfg = REPO / "tests" / "data" / "configs" / "nemo_launcher_llama3_8b.yaml"
    log = tmp_path / "nemo.log"         # Lightning's progress bar, as NeMo prints it (no configuration dump)
    log.write_text("".join(f"Epoch 0: : {k}%|#| {k}/100 [01:00<01:00, reduced_train_loss=2.100, global_step={k}.00, "
                           f"consumed_samples={2048 * (k + 1)}.0, train_step_timing in s=3.00]\n" for k in range(1, 12)))
    one_line(run("compare", "--log", log, "--config", cfg, "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "32"),
             "--nodes", "32 contradicts", "16 nodes: trainer.num_nodes")


def test_the_records_summary_spans_the_records_the_figures_come_from():
    """A Composer block printed before its first throughput window (batch 10 of a log at interval 10)
    has no step time: the summary's range starts at the record used, not at it."""
    from types import SimpleNamespace
    import numpy as np
    from costmodel.cli.compare import _records_text
    its = SimpleNamespace(iteration=np.array([10, 20]), step_time_s=np.array([np.nan, 1.2]),
                          tokens_per_s_per_gpu=np.array([np.nan, np.nan]))
    text = _records_text(SimpleNamespace(iterations=its, kept=np.array([True, True])),
                         dict(iterations_used=1, warmup_steps_discarded=0))
    assert text == "1 logged record used (iteration 20), 0 discarded"


def _megatron_lines(steps_ms, start_hour=2, nan=0) -> list:
    """Megatron-LM iteration lines 1..len(steps_ms), timestamped from ``start_hour``, 20 s apart."""
    return [f" [2024-04-06 {start_hour:02d}:{i // 3:02d}:{(i % 3) * 20:02d}] iteration {i:8d}/     100 | consumed samples: "
            f"{128 * i:12d} | elapsed time per iteration (ms): {ms:.1f} | global batch size:   128 | lm loss: "
            f"{'nan' if nan else '2.0E+00'} | number of skipped iterations:   0 | number of nan iterations: {nan:3d} |"
            for i, ms in enumerate(steps_ms, start=1)]


def test_a_second_run_appended_without_a_start_line_is_refused_not_deduplicated(tmp_path):
    """A log holding two runs with no start-up line between them (iterations 1-5 at 20 s, then 1-5 at
    25 s an hour later) had its repeats dropped as several ranks' copies, the second run lost; a repeat
    printed after the run went past it is a second run.  All-NaN iterations are named as such, not as
    warm-up (whose --warmup-steps 0 advice could not help)."""
    f = tmp_path / "two_runs.log"
    f.write_text("\n".join(_megatron_lines([20000.0] * 5) + _megatron_lines([25000.0] * 5, start_hour=3)) + "\n")
    flags = ("--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--tp", "8", "--pp", "4", "--mbs", "1",
             "--seq-len", "4096")
    one_line(run("compare", "--log", f, *flags), f"{f}:6", "iteration 1 is printed again here, after iteration 5",
             "a second run appended")
    nan = tmp_path / "nan.log"
    nan.write_text("\n".join(_megatron_lines([20000.0] * 5, nan=1)) + "\n")
    one_line(run("compare", "--log", nan, *flags), "every logged record (5) counts NaN iterations")
    one_line(run("compare", "--log", nan, "--warmup-steps", "0", *flags), "counts NaN iterations")


def test_the_trace_path_is_neither_the_plot_folder_nor_an_image(tmp_path):
    """--trace given --plot's folder had been refused as 'is a directory' (it did not exist yet), and
    --trace t.png had written JSON into a .png."""
    base = ("compare", "--log", GPT8B, "--cluster", "dgx-h100", "--nodes", "1")
    one_line(run(*base, "--plot", tmp_path / "out", "--trace", tmp_path / "out"), "--trace",
             "is the --plot folder: name the trace file in it", str(tmp_path / "out" / "trace.json"))
    one_line(run(*base, "--trace", tmp_path / "t.png"), "--trace", "not an image: name it .json")
    assert not (tmp_path / "t.png").exists()
    # any file that is not .json (it had written JSON into s.txt)
    one_line(run(*base, "--trace", tmp_path / "s.txt"), "--trace", "not '.txt': name it .json")
    assert not (tmp_path / "s.txt").exists()


def test_a_capture_under_another_power_limit_is_said_to_be(tmp_path):
    """A trace with nvidia-smi's power.limit column at 450 W had been compared, silently, against a
    prediction at the cluster's 700 W."""
    p = _trace(tmp_path, lambda i, ln: ln + ", 450.00 W")
    lines = p.read_text().splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.startswith("timestamp"))
    lines[head] += ", power.limit [W]"
    p.write_text("\n".join(lines) + "\n")
    r = run("compare", "--log", GPT8B, "--cluster", "dgx-h100", "--nodes", "1", "--power", p)
    assert r.returncode == 0, r.stderr
    said = " ".join((r.stdout + r.stderr).split())
    assert "the capture's power.limit reads 450 W, the prediction runs at dgx-h100's 700 W limit" in said
    assert "power.gpu_power_limit: 450 W" in said
