"""Training logs as real runs print them, beyond the tidy copies: a stray line of another rank inside
the argument dump, records glued on one line, a restarted run, block recompute, a recompute-module
list and BF16 edge layers in the dump.  Each variant is the synthetic Megatron-core log of
tests/data/logs with the lines a test names changed."""
import re
from pathlib import Path

import pytest

from costmodel.errors import InputError
from costmodel.logged_recipe import logged_switches
from costmodel.readers.training_logs import read_training_log

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
MCORE_SYN = LOGS / "megatron_core_synthetic_full_args_rank_prefixes.log"


def _variant(tmp_path, args=None, after_dump=(), tail=None, name="run.log") -> Path:
    """The synthetic log with the argument lines ``args`` (key -> value, None to add a raw line of
    ``after_dump``) set, ``after_dump`` lines inserted after its first argument line, and the
    iteration lines replaced by ``tail`` (a function of them) where given."""
    lines = MCORE_SYN.read_text().splitlines()
    end = next(i for i, ln in enumerate(lines) if "end of arguments" in ln)
    dump = [f"[rank0]:  {k} {'.' * (40 - len(k))} {v}" for k, v in (args or {}).items()]
    lines = lines[:end] + dump + lines[end:]
    begin = next(i for i, ln in enumerate(lines) if "-- arguments --" in ln)
    lines = lines[:begin + 2] + list(after_dump) + lines[begin + 2:]
    if tail is not None:
        first = next(i for i, ln in enumerate(lines) if " iteration " in ln)
        lines = lines[:first] + tail(lines[first:])
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return p


def test_another_rank_s_line_inside_the_dump_is_skipped_and_the_dump_read_on(tmp_path):
    p = _variant(tmp_path, after_dump=["[rank5]:/usr/lib/python3/dist-packages/torch/distributed/c10d.py:123: "
                                       "UserWarning: barrier() using device under current context"])
    log = read_training_log(p)
    whole = read_training_log(MCORE_SYN)
    assert log.args_complete and log.layout() == whole.layout()
    assert any(":8: a line inside the argument dump" in w and "another rank" in w for w in log.warnings)


def test_records_glued_on_one_line_are_each_read(tmp_path):
    def glue(its):
        recs = [ln for ln in its if " iteration " in ln]
        # the 30 and 40 records on one physical line, the 50 record cut short before the 60 one
        return [recs[0], recs[1], recs[2] + recs[3].split("]:", 1)[1], recs[4].split("| learning")[0]
                + recs[5].split("]:", 1)[1]]
    log = read_training_log(_variant(tmp_path, tail=glue), strict=False)
    assert list(log.iterations.iteration) == [10, 20, 30, 40, 60]
    assert any("iteration 50 record is incomplete" in w for w in log.warnings + log.errors)


def test_a_restarted_run_in_one_log_is_refused_naming_the_restart(tmp_path):
    def restart(its):
        again = ["[rank0]:[before the start of training step] datetime: 2025-01-15 11:00:00 "]
        return its + again + [ln.replace("10:0", "11:0") for ln in its if " iteration " in ln][2:]
    p = _variant(tmp_path, tail=restart)
    with pytest.raises(InputError, match=r"run\.log:48.*iteration 30 \(line 49\) follows iteration 60"):
        read_training_log(p)


def test_block_recompute_depth_comes_from_the_dump(tmp_path):
    p = _variant(tmp_path, {"recompute_method": "block", "recompute_num_layers": 3})
    lay = read_training_log(p).layout()
    assert lay["recompute"] == "selective" and lay["recompute_num_layers"] == 0    # the dump's selective wins
    text = p.read_text().replace("recompute_granularity ......................... selective",
                                 "recompute_granularity ......................... full")
    p.write_text(text)
    assert read_training_log(p).layout()["recompute_num_layers"] == 3
    p.write_text(text.replace("block", "uniform"))          # uniform recomputes every layer, in groups of N
    assert read_training_log(p).layout()["recompute_num_layers"] == 0


def test_the_dump_s_recompute_module_list_and_bf16_edge_layers_are_read(tmp_path):
    p = _variant(tmp_path, {"recompute_modules": "['core_attn', 'mlp']", "first_last_layers_bf16": True,
                            "num_layers_at_start_in_bf16": 2, "num_layers_at_end_in_bf16": 2})
    out, where, notes = logged_switches(read_training_log(p), moe=False)
    assert out["recompute_modules"] == "core_attn,mlp"
    assert "bf16_edge_layers" not in out            # a bf16 run has no low-precision layers to keep
    p.write_text(p.read_text().replace("fp8 ........................................... None",
                                       "fp8 ........................................... hybrid"))
    out, where, notes = logged_switches(read_training_log(p), moe=False)
    assert out["bf16_edge_layers"] == 2 and where["bf16_edge_layers"].startswith("first_last_layers_bf16")


def test_a_record_of_nan_iterations_is_left_out_and_a_nan_loss_is_said(tmp_path):
    def nan(its):
        recs = [ln for ln in its if " iteration " in ln]
        return [recs[0], recs[1], recs[2].replace("number of nan iterations:   0", "number of nan iterations:   2"),
                recs[3].replace("lm loss: 8.311000E+00", "lm loss: nan"),
                re.sub(r"lm loss: [-+.\dE]+", "lm loss: inf", recs[4]), recs[5]]
    log = read_training_log(_variant(tmp_path, tail=nan))
    kept = list(log.iterations.iteration[log.kept])
    assert 30 not in kept and 40 in kept and "skipped or NaN iterations > 0" in log.warmup
    # an infinite loss is a diverged step too (it had gone unsaid)
    assert any("2 kept record(s) print a NaN or infinite loss" in w for w in log.warnings)


def test_an_explicit_unfused_cross_entropy_is_read_from_the_dump(tmp_path):
    out, where, _ = logged_switches(read_training_log(_variant(tmp_path, {"cross_entropy_loss_fusion": False})),
                                    moe=False)
    assert out["cross_entropy"] == "megatron" and where["cross_entropy"] == "cross_entropy_loss_fusion = False"


def test_nemo_s_tp_comm_overlap_key_is_named_where_it_was_read():
    from types import SimpleNamespace
    out, where, _ = logged_switches(SimpleNamespace(args={"ub_tp_comm_overlap": False}, framework="nemo"), moe=False)
    assert out["tp_comm_overlap"] is False and where["tp_comm_overlap"] == "ub_tp_comm_overlap = False"


def test_megatron_s_memory_report_gives_the_peak_memory_compared():
    # the synthetic log's report_memory lines: max reserved 66080.0 MiB on its fullest printed rank
    log = read_training_log(MCORE_SYN)
    assert log.aggregate()["memory_gib"].median == pytest.approx(66080.0 / 1024)


FOUNDRY = LOGS / "llm_foundry_synthetic_composer_console.log"


def test_an_llm_foundry_composer_log_gives_its_steps_batch_and_world():
    log = read_training_log(FOUNDRY)
    assert log.framework == "llm-foundry"
    lay = log.layout()
    assert (lay["mbs"], lay["gbs"], lay["seq_len"], lay["world_size"]) == (8, 256, 2048, 8)
    agg = log.aggregate()
    # 1 / throughput/batches_per_sec over the 10 records whose window is full (batches 11-20)
    assert agg["step_time_s"].n == 10 and agg["step_time_s"].median == pytest.approx(1 / 0.2110, rel=1e-3)
    assert agg["memory_gib"].median == pytest.approx(71.2310e9 / 2 ** 30)       # GB as Composer prints it


def test_composer_rates_rounded_to_4_decimals_give_the_whole_batch_and_its_optimizer_is_read(tmp_path):
    """Composer prints both rates to 4 decimals: 54.0160 / 0.2110 = 256.0 but 54.0200 / 0.2110 = 256.019, which
    compare had taken for another batch size than 256 on every record (a real log refused); its LRMonitor's
    key names the optimizer class (lr-DecoupledAdamW/group0: AdamW, 12 bytes of state, not LionW's 8)."""
    p = tmp_path / "f.log"
    p.write_text(FOUNDRY.read_text().replace("Train throughput/samples_per_sec: 54.1440",
                                             "Train throughput/samples_per_sec: 54.1490")
                 .replace("lr-DecoupledLionW", "lr-DecoupledAdamW"))
    log = read_training_log(p)
    gb = log.iterations.global_batch_size
    assert set(gb[gb == gb].tolist()) == {256.0}
    assert log.layout()["gbs"] == 256 and log.args["optimizer"] == "adamw"
    assert read_training_log(FOUNDRY).args["optimizer"] == "lionw"


def test_a_composer_record_with_a_bad_number_is_named(tmp_path):
    p = tmp_path / "f.log"
    p.write_text(FOUNDRY.read_text().replace("Train throughput/batches_per_sec: 0.2115",
                                             "Train throughput/batches_per_sec: 0,2115", 1))
    log = read_training_log(p, strict=False)
    assert any("Composer record: not a number: throughput/batches_per_sec: '0,2115'" in e for e in log.errors)


DEEPSPEED = LOGS / "deepspeed_synthetic_zero3_throughput_timer.log"


def test_a_deepspeed_log_gives_its_steps_from_the_global_batch_over_samples_per_s():
    log = read_training_log(DEEPSPEED)
    assert log.framework == "deepspeed"
    lay = log.layout()
    assert (lay["mbs"], lay["gbs"], lay["zero"], lay["world_size"], lay["precision"]) == (4, 256, 3, 8, "bf16")
    # iterations 10 .. 60, every one past the timer's two warm-up steps
    assert list(log.iterations.iteration) == [10, 20, 30, 40, 50, 60] and log.kept.all()
    assert log.aggregate()["step_time_s"].median == pytest.approx(256 / 41.5 / 2 + 256 / 41.2 / 2, rel=1e-6)


def test_a_deepspeed_batch_its_own_engine_would_refuse_is_refused(tmp_path):
    """A configuration print of train_batch_size 256 with micro-batch 4, 8 accumulation steps and 16 ranks
    (512: DeepSpeed asserts they agree) had been read as it came."""
    from costmodel.errors import InputError
    bad = tmp_path / "ds.log"
    bad.write_text(DEEPSPEED.read_text().replace("world_size ................... 8", "world_size ................... 16"))
    with pytest.raises(InputError, match=r"train_batch_size: 256 is not train_micro_batch_size_per_gpu 4 x "
                                         r"gradient_accumulation_steps 8 x world_size 16 = 512") as e:
        read_training_log(bad)
    assert e.value.where == str(bad)


def test_a_deepspeed_zero_config_print_gives_its_offload_and_overlap(tmp_path):
    """DeepSpeedConfig.print's zero_config line: offload_optimizer to the CPU and overlap_comm had been
    labelled the stack's defaults (off) beside a log that said otherwise; they are read as the switches."""
    from costmodel.logged_recipe import logged_switches
    line = ("[2024-08-01 12:00:00,001] [INFO] [config.py:1013:print]   zero_config .................. stage=2 "
            "contiguous_gradients=True overlap_comm=True load_from_fp32_weights=True offload_param=None "
            "offload_optimizer=DeepSpeedZeroOffloadOptimizerConfig(device='cpu', nvme_path=None, buffer_count=4, "
            "pin_memory=True, ratio=1.0) sub_group_size=1,000,000,000\n")
    text = DEEPSPEED.read_text()
    i = text.index("[2024-08-01 12:00:00,001] [INFO] [config.py:1013:print]   fp16_enabled")
    p = tmp_path / "ds.log"
    p.write_text(text[:i] + line + text[i:])
    out, where, _ = logged_switches(read_training_log(p), moe=False)
    assert out["optimizer_offload"] is True and out["dp_overlap"] is True
    assert where["optimizer_offload"].startswith("optimizer_cpu_offload")
    p.write_text(text[:i] + line.replace("DeepSpeedZeroOffloadOptimizerConfig(device='cpu'",
                                         "DeepSpeedZeroOffloadOptimizerConfig(device='none'")
                 .replace("overlap_comm=True", "overlap_comm=False") + text[i:])
    out, _, _ = logged_switches(read_training_log(p), moe=False)
    assert out["optimizer_offload"] is False and out["dp_overlap"] is False


def test_a_megatron_deepspeed_log_with_deepspeed_s_timer_lines_stays_megatron_deepspeed(tmp_path):
    src = LOGS / "megatron_deepspeed_synthetic_zero1_fp16_skipped.log"
    p = tmp_path / "mds.log"
    p.write_text(src.read_text() + "[2024-08-01 12:01:00,001] [INFO] [timer.py:264:stop] epoch=0/micro_step=80/"
                 "global_step=10, RunningAvgSamplesPerSec=41.2, CurrSamplesPerSec=41.5, MemAllocated=30.1GB, "
                 "MaxMemAllocated=61.8GB\n")
    assert read_training_log(p, strict=False).framework == "megatron-deepspeed"


def test_ranks_printing_their_start_markers_between_records_are_no_restart(tmp_path):
    """torchtitan prints 'Training starts at step' on every rank: a second rank's marker after the first
    rank's first records (interleaved output) is no restart of that rank's run."""
    rows = ["[rank0]:[titan] 2025-05-10 08:00:00,000 - root - INFO - Training starts at step 1."]
    rows += [f"[rank0]:[titan] 2025-05-10 08:0{k}:00,000 - root - INFO - step: {10 * k}  loss:  9.0000  "
             f"memory: 61.20GiB(64.42%)  tps: 6,000  tflops: 300.00  mfu: 30.33%" for k in (1, 2)]
    rows.insert(2, "[rank1]:[titan] 2025-05-10 08:01:00,500 - root - INFO - Training starts at step 1.")
    rows.append("[rank1]:[titan] 2025-05-10 08:02:00,500 - root - INFO - step: 10  loss:  9.0000  "
                "memory: 61.20GiB(64.42%)  tps: 6,000  tflops: 300.00  mfu: 30.33%")
    p = tmp_path / "tt.log"
    p.write_text("\n".join(rows) + "\n")
    log = read_training_log(p, strict=False)
    assert log.framework == "torchtitan" and sorted(set(log.iterations.iteration)) == [10, 20]


def test_a_deepspeed_timer_line_cut_by_the_end_of_the_file_is_said(tmp_path):
    """A log whose last timer line ends before CurrSamplesPerSec had lost that step silently."""
    text = DEEPSPEED.read_text().rstrip("\n")
    last = text.rsplit("\n", 1)[1]
    assert "global_step=" in last
    p = tmp_path / "ds.log"
    p.write_text(text[: len(text) - len(last)] + last[: last.index("CurrSamplesPerSec") + 6])
    log = read_training_log(p)
    assert any("last line is truncated, record dropped (DeepSpeed timer line cut" in w for w in log.warnings)
    assert list(log.iterations.iteration) == [10, 20, 30, 40, 50]


def test_a_memory_report_cut_by_the_end_of_the_log_is_said(tmp_path):
    """A last report_memory line cut before 'max reserved' had been dropped with no word."""
    src = LOGS / "megatron_core_synthetic_full_args_rank_prefixes.log"
    p = tmp_path / "cut.log"
    p.write_text(src.read_text().rstrip("\n") + "\n[rank63]: [Rank 63] (after 70 iterations) memory (MB) | "
                 "allocated: 41234.5 | max allocated: 61022.7 | max res")
    log = read_training_log(p)
    assert any("last line is truncated, memory report dropped" in w for w in log.warnings)
    assert len(log.memory_reports_gib) == len(read_training_log(src).memory_reports_gib)


def test_a_repeated_iteration_is_a_second_run_only_well_after_the_run_went_past_it():
    """Several ranks without a rank prefix repeat each iteration at about its first print's time (a
    node's clock a few seconds apart included); a second run appended repeats it minutes later."""
    from costmodel.readers.training_logs.read import _refuse_unmarked_restart
    first = [dict(iteration=i, line=i, t_unix=100.0 + 2 * i) for i in range(1, 6)]
    skewed = [dict(iteration=i, line=10 + i, t_unix=130.0 + 2 * i) for i in range(1, 6)]     # 30 s skew
    _refuse_unmarked_restart(first + skewed, "log")
    later = [dict(iteration=i, line=10 + i, t_unix=3700.0 + 2 * i) for i in range(1, 6)]
    with pytest.raises(InputError, match="log:11: iteration 1 is printed again here, after iteration 5"):
        _refuse_unmarked_restart(first + later, "log")
