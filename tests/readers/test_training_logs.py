"""Readers of real training logs (costmodel/readers/training_logs/) on the copies in tests/data/logs.

Real excerpts (each file's ``# SOURCE:`` header names the issue / repository it was copied from): BLOOM-176B
Megatron-DeepSpeed, a Megatron-core Mixtral run (Megatron-LM issue 756), NeMo 2 progress printer (bionemo-recipes
PR 740), NeMo Lightning bars (dgxc-benchmarking grok1, NeMo-Framework-Launcher issue 55), torchtitan
(torchtitan PR 1287 and 2389, awsome-distributed-training).  Files whose first line is ``# SYNTHETIC:`` exercise
formats with no public example (complete argument dumps, NeMo YAML config); tests on them check the mapping only.
"""
from pathlib import Path

import numpy as np
import pytest

from costmodel.errors import InputError, ReaderParseError
from costmodel.readers.training_logs import (Spread, TrainingLogParseError, read_megatron_log, read_nemo_log,
                                               read_torchtitan_log, read_training_log)

LOGS = Path(__file__).resolve().parents[1] / "data" / "logs"
BLOOM = LOGS / "bloom176b_tr11_megatron_deepspeed_excerpts.log"
BLOOM_BROKEN = LOGS / "bloom176b_tr11_readme_broken_record.log"
MIXTRAL = LOGS / "megatron_lm_issue756_mixtral8x7b_16xH100.log"
MIXTRAL_TRUNC = LOGS / "megatron_lm_issue756_mixtral8x7b_truncated_last_line.log"
MIXTRAL_RETEST = LOGS / "megatron_lm_issue756_turn1_mixtral8x7b_16xH100_tp2_ep8.log"
MCORE_SYN = LOGS / "megatron_core_synthetic_full_args_rank_prefixes.log"
MDS_SYN = LOGS / "megatron_deepspeed_synthetic_zero1_fp16_skipped.log"
NEMO2 = LOGS / "nemo2_bionemo_pr740_progress_printer.log"
NEMO_GROK = LOGS / "nemo_dgxc_grok1_314b_progress_bar.log"
NEMO_NO_TIMING = LOGS / "nemo_launcher_issue55_progress_bar_no_step_timing.log"
NEMO_SYN = LOGS / "nemo1_synthetic_config_and_progress_bar.log"
TT_1287 = LOGS / "torchtitan_pr1287_llama_rank0.log"
TT_2389 = LOGS / "torchtitan_pr2389_repeated_ranks_truncated.log"
TT_AWS = LOGS / "torchtitan_awsome_p5_llama3_8b_interleaved_ranks.log"


def test_every_copy_names_its_source_or_says_synthetic():
    for f in sorted(LOGS.glob("*.log")):
        first = f.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith(("# SOURCE: https://", "# SYNTHETIC: ")), f.name


# ------------------------------------------------------------------------------------------- Megatron-core
def test_megatron_layout_line_and_iteration_batch_size_without_a_dump():
    """The retest's start-up line gives TP 2 and DP 8 of 16 GPUs; its dump was not visible, so EP is
    unknown (a partial dump without the key says nothing), while every iteration line prints the
    global batch size 128."""
    log = read_training_log(MIXTRAL_RETEST)
    lay = log.layout()
    assert (lay["tp"], lay["dp"], lay["pp"], lay["world_size"]) == (2, 8, 1, 16)
    assert lay["ep"] is None and lay["gbs"] == 128 and lay["mbs"] is None
    assert log.iterations.iteration.tolist() == [2, 3, 43, 44, 45, 71, 72, 73]
    # the first run's dump names EP 8 and its global_batch_size: the dump wins
    assert read_training_log(MIXTRAL).layout()["ep"] == 8


def test_megatron_iteration_batch_size_is_not_read_when_it_ramps(tmp_path):
    """A batch-size ramp-up prints several global batch sizes: none of them is the run's."""
    lines = MIXTRAL_RETEST.read_text().splitlines()
    ramp = [ln.replace("global batch size:   128", "global batch size:    64") if "iteration        2/" in ln else ln
            for ln in lines]
    f = tmp_path / "ramp.log"
    f.write_text("\n".join(ramp) + "\n")
    assert read_training_log(f).layout()["gbs"] is None


def test_megatron_core_mixtral_iterations_and_units():
    log = read_training_log(MIXTRAL)
    assert log.framework == "megatron"
    it = log.iterations
    assert it.iteration.tolist() == [2, 3, 43, 44, 45, 71, 72, 73]
    i44 = it.iteration.tolist().index(44)
    assert it.step_time_s[i44] == pytest.approx(5.5338)           # "elapsed time per iteration (ms): 5533.8"
    assert it.tflops_per_gpu[i44] == pytest.approx(236.0)          # "throughput per GPU (TFLOP/s/GPU): 236.0"
    assert it.consumed_samples[i44] == 5632
    assert it.lr[i44] == pytest.approx(8.8e-6)
    assert it.loss[i44] == pytest.approx(1.875063)                 # lm loss, not load_balancing_loss
    assert it.global_batch_size[i44] == 128 and it.skipped_iterations[i44] == 0 and it.nan_iterations[i44] == 0
    assert it.line[i44] == 80 and it.rank[i44] is None
    assert np.isnan(it.samples_per_s).all()
    assert log.errors == []


def test_megatron_core_mixtral_warmup_and_aggregate():
    log = read_training_log(MIXTRAL)
    # default rule: iterations 1-2 are warm-up; no start marker and no skipped iterations in this excerpt
    assert log.kept_iterations.iteration.tolist() == [3, 43, 44, 45, 71, 72, 73]
    agg = log.aggregate()
    assert agg["n"] == 7
    st = agg["step_time_s"]
    assert (st.median, st.min, st.max, st.n) == pytest.approx((5.4707, 5.3616, 5.8299, 7))
    assert st.iqr == pytest.approx(np.percentile([5.4106, 5.4449, 5.5338, 5.7186, 5.3616, 5.4707, 5.8299], 75)
                                   - np.percentile([5.4106, 5.4449, 5.5338, 5.7186, 5.3616, 5.4707, 5.8299], 25))
    assert agg["tflops_per_gpu"].median == pytest.approx(238.7)
    assert agg["tokens_per_s_per_gpu"].n == 0
    all_rows = read_training_log(MIXTRAL, warmup_steps=0).aggregate()
    assert all_rows["n"] == 8 and all_rows["step_time_s"].median == pytest.approx((5.4707 + 5.5338) / 2)


def test_megatron_core_mixtral_arguments_and_layout():
    log = read_megatron_log(MIXTRAL)
    a = log.args
    assert a["expert_model_parallel_size"] == 8 and a["ffn_hidden_size"] == 14336 and a["recompute_granularity"] is None
    assert a["accumulate_allreduce_grads_in_fp32"] is True and a["adam_eps"] == pytest.approx(1e-8)
    # from "using world size: 16, data-parallel size: 4, context-parallel size: 1 tensor-model-parallel size: 4, ..."
    assert (a["world_size"], a["data_parallel_size"], a["tensor_model_parallel_size"]) == (16, 4, 4)
    assert a["params_dtype"] == "torch.bfloat16"
    lay = log.layout()
    assert {k: lay[k] for k in ("tp", "pp", "dp", "cp", "ep", "vp", "gbs", "world_size", "hidden", "ffn_hidden")} == \
        dict(tp=4, pp=1, dp=4, cp=1, ep=8, vp=1, gbs=128, world_size=16, hidden=4096, ffn_hidden=14336)
    assert lay["precision"] == "bf16" and lay["recompute"] == "none"
    assert lay["mbs"] is None and lay["seq_len"] is None and lay["num_layers"] is None  # not visible in the issue
    assert not log.args_complete
    assert any("starts at line 14 ends without 'end of arguments'" in w for w in log.warnings)


def test_truncated_last_line_is_a_warning_and_keeps_the_rest():
    log = read_training_log(MIXTRAL_TRUNC)  # strict: a truncated last line does not raise
    assert log.iterations.iteration.tolist() == [43, 44, 45]
    assert log.iterations.step_time_s.tolist() == pytest.approx([5.4449, 5.5338, 5.7186])
    assert log.errors == []
    [w] = log.warnings
    assert w.startswith(f"{MIXTRAL_TRUNC}:7: last line is truncated") and "iteration 46" in w


def test_value_that_is_not_a_number_names_file_and_line(tmp_path):
    lines = MIXTRAL.read_text().splitlines()
    k = next(i for i, ln in enumerate(lines) if "iteration       44/" in ln)
    lines[k] = lines[k].replace("5533.8", "55x3.8")
    bad = tmp_path / "bad.log"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TrainingLogParseError) as ei:
        read_training_log(bad)
    assert isinstance(ei.value, ReaderParseError) and isinstance(ei.value, ValueError)
    assert f"{bad}:{k + 1}: iteration 44: not a number: elapsed time per iteration (ms): '55x3.8'" in str(ei.value)
    assert ei.value.log.iterations.iteration.tolist() == [2, 3, 43, 45, 71, 72, 73]  # the good rows are kept
    lenient = read_training_log(bad, strict=False)
    assert len(lenient.errors) == 1 and len(lenient) == 7


def test_record_without_elapsed_time_is_an_error(tmp_path):
    f = tmp_path / "x.log"
    f.write_text(" iteration        5/     100 | consumed samples:          640 | learning rate: 1.0E-06 |\n"
                 + MIXTRAL.read_text().splitlines()[-1] + "\n")
    log = read_training_log(f, strict=False)
    assert log.errors == [f"{f}:1: iteration 5 has no 'elapsed time per iteration'"]
    assert log.iterations.iteration.tolist() == [73]


# ------------------------------------------------------------------------------------------- Megatron-DeepSpeed
def test_bloom_megatron_deepspeed_values():
    log = read_training_log(BLOOM)
    assert log.framework == "megatron-deepspeed"
    it = log.iterations
    assert len(it) == 19 and it.iteration[0] == 3707 and it.iteration[-1] == 45000
    r = {int(n): i for i, n in enumerate(it.iteration)}
    i = r[12695]
    assert it.step_time_s[i] == pytest.approx(105.22)          # "elapsed time per iteration (s): 105.22"
    assert it.tflops_per_gpu[i] == pytest.approx(149.02)       # "TFLOPs: 149.02"
    assert it.samples_per_s[i] == pytest.approx(19.463)
    assert it.consumed_tokens[i] == 20155564032 and it.global_batch_size[i] == 2048
    assert it.rank[i] == "default7" and it.rank[r[3707]] is None
    assert it.step_time_s[r[3707]] == pytest.approx(15.23) and it.tflops_per_gpu[r[3707]] == pytest.approx(8.04)
    # a record wrapped over three terminal lines (chronicles 2022-04-28) is joined
    j = r[42783]
    assert (it.step_time_s[j], it.tflops_per_gpu[j], it.lr[j], it.loss[j], it.samples_per_s[j]) == \
        pytest.approx((110.17, 142.32, 4.475e-5, 2.124820, 18.589))
    assert it.line[j] == 30
    assert log.warnings == [f"{BLOOM}:21: 5 iteration record(s) wrapped over several lines were joined"]
    assert log.errors == [] and log.args == {}
    assert all(v is None for v in log.layout().values())


def test_bloom_median_step_time_and_explicit_warmup():
    log = read_training_log(BLOOM)
    assert log.kept.all()  # excerpts of a long run: no iteration <= 2, no start marker, nothing skipped
    agg = log.aggregate()
    assert agg["step_time_s"].median == pytest.approx(106.30) and agg["tflops_per_gpu"].median == pytest.approx(147.46)
    log1 = read_training_log(BLOOM, warmup_steps=1)  # drop the GBS=16 ramp-up record
    assert log1.kept_iterations.iteration[0] == 12695
    assert log1.aggregate()["step_time_s"].median == pytest.approx((106.30 + 106.33) / 2)
    assert log1.aggregate()["n"] == 18
    with pytest.raises(ValueError):
        read_training_log(BLOOM, warmup_steps=-1)


def test_broken_record_only_means_no_iteration_lines():
    with pytest.raises(TrainingLogParseError) as ei:
        read_training_log(BLOOM_BROKEN)
    msg = str(ei.value)
    assert f"{BLOOM_BROKEN}: no iteration lines found" in msg
    assert f"{BLOOM_BROKEN}:4-5: last line is truncated" in msg and "iteration 85376" in msg
    assert len(ei.value.log) == 0


def test_garbage_record_in_the_middle_is_one_error_and_good_rows_kept(tmp_path):
    lines = BLOOM.read_text().splitlines()
    fragment = BLOOM_BROKEN.read_text().splitlines()[3:5]  # the real broken README record (2 lines)
    k = next(i for i, ln in enumerate(lines) if "iteration    31216/" in ln)
    lines[k + 1:k + 1] = fragment
    f = tmp_path / "garbage.log"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(TrainingLogParseError) as ei:
        read_training_log(f)
    assert ei.value.errors == [e for e in ei.value.errors if e.startswith(f"{f}:{k + 2}-{k + 3}: iteration 85376")]
    assert len(ei.value.errors) == 1 and "no closing '|'" in ei.value.errors[0]
    assert len(ei.value.log) == 19
    assert len(read_training_log(f, strict=False).iterations) == 19


def test_megatron_deepspeed_synthetic_dump_and_skipped_iterations():
    log = read_training_log(MDS_SYN)
    assert log.framework == "megatron-deepspeed" and log.args_complete
    lay = log.layout()
    assert {k: lay[k] for k in ("tp", "pp", "dp", "cp", "ep", "vp", "mbs", "gbs", "seq_len", "zero", "recompute",
                                "precision", "world_size")} == \
        dict(tp=2, pp=2, dp=4, cp=1, ep=1, vp=1, mbs=4, gbs=512, seq_len=2048, zero=1, recompute="full",
             precision="fp16", world_size=16)
    # iterations 1-3 skip the optimizer step (fp16 loss-scale search); 1 is also the first after the start marker
    assert log.kept_iterations.iteration.tolist() == [4, 5, 6, 7, 8]
    assert log.aggregate()["step_time_s"].median == pytest.approx(4.14)
    assert log.aggregate()["tflops_per_gpu"].median == pytest.approx(111.7)
    assert np.isnan(log.iterations.loss[0]) and log.iterations.loss[3] == pytest.approx(10.8123)
    # --warmup-steps 0 discards no warm-up, but the records of skipped optimizer steps still time another step
    assert read_training_log(MDS_SYN, warmup_steps=0).kept_iterations.iteration.tolist() == [4, 5, 6, 7, 8]
    assert read_training_log(MDS_SYN, warmup_steps=4).kept_iterations.iteration.tolist() == [5, 6, 7, 8]


def test_megatron_core_synthetic_full_dump_layout_and_rank_prefix():
    log = read_training_log(MCORE_SYN)
    assert log.framework == "megatron" and log.args_complete
    assert set(log.iterations.rank) == {"rank63"}
    assert log.layout() == dict(tp=4, pp=4, dp=2, cp=2, ep=1, etp=None, vp=4, mbs=1, gbs=128, seq_len=8192, recompute="selective", recompute_num_layers=0,
                                sp=True, zero=1, precision="bf16", world_size=64, num_layers=80, hidden=8192,
                                ffn_hidden=28672, num_heads=64, num_kv_heads=8, vocab=128256, num_experts=None,
                                moe_topk=2, moe_ffn_hidden=None, dp_replicate=1)
    log.args["virtual_pipeline_model_parallel_size"] = None   # older dumps: VP = layers / (PP * layers per stage)
    assert log.layout()["vp"] == 80 // (4 * 5)
    del log.args["data_parallel_size"]                        # DP = world / (TP * PP * CP)
    assert log.layout()["dp"] == 64 // (4 * 4 * 2)
    # the first record after "[before the start of training step]" averages over start-up
    assert log.kept_iterations.iteration.tolist() == [20, 30, 40, 50, 60]
    assert log.aggregate()["step_time_s"].median == pytest.approx(19.6308)


# ------------------------------------------------------------------------------------------- NeMo
def test_nemo2_progress_printer_bionemo():
    log = read_training_log(NEMO2)
    assert log.framework == "nemo"
    it = log.iterations
    assert it.iteration.tolist() == [120, 121, 122, 123, 124, 125]
    assert it.step_time_s[3] == pytest.approx(0.03157)        # "train_step_timing in s: 0.03157"
    assert (it.consumed_samples[0], it.global_batch_size[0], it.lr[0], it.loss[0]) == \
        pytest.approx((121, 1, 3e-5, 1.233))
    assert log.aggregate()["step_time_s"].median == pytest.approx((0.03157 + 0.03163) / 2)
    [w] = log.warnings
    assert w.startswith(f"{NEMO2}:10: last line is truncated")


def test_nemo2_printer_without_final_newline_is_truncated(tmp_path):
    lines = NEMO2.read_text().splitlines()[:-1]
    lines[-1] = lines[-1].split(" | val_loss")[0][:-2]  # "... train_step_timing in s: 0.031" and no newline
    f = tmp_path / "cut.log"
    f.write_text("\n".join(lines))
    log = read_nemo_log(f)
    assert log.iterations.iteration.tolist() == [120, 121, 122, 123, 124]
    assert log.warnings[0].startswith(f"{f}:9: last line is truncated")


def test_nemo_lightning_bar_grok1():
    log = read_training_log(NEMO_GROK)
    assert log.framework == "nemo" and len(log) == 1
    it = log.iterations
    assert (it.iteration[0], it.step_time_s[0], it.consumed_samples[0], it.loss[0]) == \
        pytest.approx((49, 24.0, 51200, 0.186))
    assert log.aggregate()["step_time_s"].median == pytest.approx(24.0)
    assert log.warnings == [] and log.args == {}


def test_nemo_bar_without_step_timing_warns():
    log = read_training_log(NEMO_NO_TIMING)
    assert log.iterations.iteration.tolist() == [794]
    assert log.iterations.consumed_samples[0] == pytest.approx(1.63e6) and log.iterations.loss[0] == pytest.approx(3.09)
    assert np.isnan(log.iterations.step_time_s[0])
    assert log.aggregate()["step_time_s"].n == 0
    assert "no 'train_step_timing in s'" in log.warnings[0]


def test_nemo_synthetic_config_and_carriage_return_refreshes():
    log = read_nemo_log(NEMO_SYN)
    assert log.config["trainer"]["devices"] == 8 and log.config["model"]["optim"]["name"] == "distributed_fused_adam"
    assert log.layout() == dict(tp=4, pp=2, dp=4, cp=1, ep=1, etp=None, vp=5, mbs=1, gbs=256, seq_len=4096, recompute="selective", recompute_num_layers=0,
                                sp=True, zero=1, precision="bf16", world_size=32, num_layers=40, hidden=5120,
                                ffn_hidden=13824, num_heads=40, num_kv_heads=40, vocab=None, num_experts=None,
                                moe_topk=None, moe_ffn_hidden=None, dp_replicate=1)
    it = log.iterations
    assert it.iteration.tolist() == list(range(10))  # global_step 4 refreshed twice on one line: kept once, silently
    assert log.warnings == []
    assert it.tflops_per_gpu[5] == pytest.approx(92.10) and it.step_time_s[5] == pytest.approx(9.98)
    assert log.kept_iterations.iteration.tolist() == list(range(2, 10))  # NeMo counts from 0: steps 0-1 are warm-up
    agg = log.aggregate()
    assert agg["step_time_s"].median == pytest.approx(10.015) and agg["tflops_per_gpu"].median == pytest.approx(91.85)


# ------------------------------------------------------------------------------------------- torchtitan
def test_torchtitan_rank0_values():
    log = read_training_log(TT_1287)
    assert log.framework == "torchtitan"
    it = log.iterations
    assert it.iteration.tolist() == [200, 210, 220, 230, 240, 250]
    assert set(it.rank) == {"rank0"}
    assert (it.tflops_per_gpu[1], it.tokens_per_s_per_gpu[1], it.mfu[1], it.memory_gib[1], it.loss[1]) == \
        pytest.approx((323.92, 5593, 0.3275, 49.66, 6.0388))
    agg = log.aggregate()
    assert agg["tflops_per_gpu"].median == pytest.approx((339.48 + 339.59) / 2)
    assert agg["tokens_per_s_per_gpu"].median == pytest.approx(5863)
    assert agg["step_time_s"].n == 0  # torchtitan prints no step time here
    assert log.errors == [] and log.warnings == []


def test_torchtitan_ansi_colour_codes_are_stripped(tmp_path):
    # torchtitan colours each field (torchtitan/components/metrics.py:
    # f"{color.red}step: {step:2}  {color.green}loss: ..."):
    # the real lines of TT_1287 re-coloured with those codes, and once more with the ESC byte lost as in a paste
    codes = {"step:": "\x1b[31m", "loss:": "\x1b[32m", "memory:": "\x1b[38;2;54;234;195m", "tps:": "\x1b[34m",
             "tflops:": "\x1b[36m", "mfu:": "\x1b[35m"}
    out = []
    for ln in TT_1287.read_text().splitlines():
        if "step:" in ln and "loss:" in ln:
            for key, c in codes.items():
                ln = ln.replace(key, c + key)
            ln += "\x1b[39m"
        out.append(ln)
    for name, text in (("ansi.log", "\n".join(out)), ("pasted.log", "\n".join(out).replace("\x1b", ""))):
        f = tmp_path / name
        f.write_text(text + "\n")
        log = read_torchtitan_log(f)
        assert log.iterations.tflops_per_gpu.tolist() == [339.16, 323.92, 339.82, 339.88, 339.59, 339.48]
        assert log.iterations.mfu[0] == pytest.approx(0.3429) and log.errors == []


def test_torchtitan_activation_checkpointing_line_gives_the_recompute(tmp_path):
    """torchtitan logs 'Applied {mode} activation checkpointing to the model' (activation_checkpoint.py: full,
    selective or memory_budget; FullAC, SelectiveAC, MemoryBudgetAC since its policy classes): read as the
    recompute granularity (it had been 'none assumed'); the older 'selective', which hides a layer option,
    and a memory budget, which is not priced, are said."""
    lines = TT_1287.read_text().splitlines()
    for mode, want, said in (("full", "full", None), ("FullAC", "full", None), ("SelectiveAC", "selective", None),
                             ("selective", "selective", "read as per-op"), ("memory_budget", None, "does not price"),
                             ("MemoryBudgetAC", None, "does not price")):
        f = tmp_path / f"{mode}.log"
        f.write_text("\n".join([lines[0], f"[rank0]: INFO - Applied {mode} activation checkpointing to the model",
                                *lines[1:]]) + "\n")
        log = read_torchtitan_log(f)
        assert log.args.get("recompute_granularity") == want, mode
        assert any(said in w for w in log.warnings) if said else not any("activation checkpointing" in w
                                                                         for w in log.warnings), mode


def test_pdsh_hosts_and_collector_timestamps_are_stripped_like_rank_prefixes(tmp_path):
    """pdsh ('worker-0: ', 'node-a17:0: ') and kubectl logs --timestamps ('2025-06-01T10:00:00.123456789Z ')
    prefix every line; the log reads as without them (it had been refused: 'iteration fields without an
    iteration N/ M start'), and a torchtitan 'step:' field is no host."""
    import re
    src = MCORE_SYN.read_text().splitlines()
    bare = [re.sub(r"^\s*(\[rank\d+\]:|\d+:)\s?", "", ln) for ln in src]
    (tmp_path / "bare.log").write_text("\n".join(bare) + "\n")
    want = read_training_log(tmp_path / "bare.log").iterations.step_time_s.tolist()
    assert want
    for name, pre in (("pdsh", "worker-0: "), ("host", "node-a17:0: "), ("kube", "2025-06-01T10:00:00.123456789Z ")):
        f = tmp_path / f"{name}.log"
        f.write_text("\n".join(pre + ln for ln in bare) + "\n")
        assert read_training_log(f).iterations.step_time_s.tolist() == want, name
    assert read_torchtitan_log(TT_1287).iterations.tflops_per_gpu.tolist()[0] == 339.16


def test_torchtitan_device_mesh_line_gives_the_world_and_degrees(tmp_path):
    """torchtitan's device-mesh line gives the world size and the TP / PP / CP degrees (compare had asked
    for --nodes of a log that prints them): 'Building device mesh with parallelism: pp=2, dp_replicate=1,
    dp_shard=4, cp=1, tp=2, ...' (parallel_dims.py since 183a0d2e7) and the older 'Building 2-D device mesh
    with ['dp_shard', 'tp'], [4, 2]', which lists only the dims above 1 (a 1-D FSDP mesh: TP, PP, CP 1)."""
    lines = TT_1287.read_text().splitlines()
    for mesh, want in (("Building device mesh with parallelism: pp=2, dp_replicate=1, dp_shard=4, cp=1, tp=2, ep=1, "
                        "etp=1", dict(world_size=16, tensor_model_parallel_size=2, pipeline_model_parallel_size=2,
                                      context_parallel_size=1)),
                       ("Building 2-D device mesh with ['dp_shard', 'tp'], [4, 2]",
                        dict(world_size=8, tensor_model_parallel_size=2, pipeline_model_parallel_size=1)),
                       # the older line names only the dims above 1: no 'pp' is PP 1, and the local batch the micro-batch
                       ("Building 1-D device mesh with ['dp_shard'], [8]\n[rank0]: INFO - Training starts at step 1, "
                        "with local batch size 1, global batch size 8, sequence length 8192",
                        dict(world_size=8, tensor_model_parallel_size=1, pipeline_model_parallel_size=1,
                             context_parallel_size=1, micro_batch_size=1))):
        f = tmp_path / "mesh.log"
        f.write_text("\n".join([lines[0], f"[rank0]: INFO - {mesh}", *lines[1:]]) + "\n")
        args = read_torchtitan_log(f).args
        assert {k: args.get(k) for k in want} == want


def test_a_step_time_beyond_any_training_step_is_dropped_and_named(tmp_path):
    """A record of 10^32 ms (a corrupted field) had been kept, moving the median; over 10^6 s it is dropped
    and named like a negative one, and the median is the other records'."""
    import re
    text = MCORE_SYN.read_text()
    base = read_training_log(MCORE_SYN)
    f = tmp_path / "huge.log"
    f.write_text(re.sub(r"(iteration\s+20/.*?elapsed time per iteration \(ms\): )[0-9.]+", r"\g<1>1e32", text, count=1))
    with pytest.raises(TrainingLogParseError, match="step_time_s 1e\\+29 is beyond any training step's"):
        read_training_log(f)                                  # strict: named, as a negative time is
    log = read_training_log(f, strict=False)
    steps = log.iterations.step_time_s
    assert np.isnan(steps).sum() == 1 + np.isnan(base.iterations.step_time_s).sum()


def test_torchtitan_interleaved_srun_ranks():
    log = read_training_log(TT_AWS)
    assert log.iterations.iteration.tolist() == [1990]
    assert (log.iterations.rank[0], log.iterations.line[0]) == ("1", 4)
    assert log.iterations.tokens_per_s_per_gpu[0] == 6785 and log.iterations.mfu[0] == pytest.approx(0.3973)
    assert np.isnan(log.iterations.tflops_per_gpu[0])
    [w] = log.warnings
    assert w.startswith(f"{TT_AWS}:4: iterations are printed more than once") and "dropped 8 line(s)" in w
    chosen = read_training_log(TT_AWS, rank=3)
    assert (chosen.iterations.rank[0], chosen.iterations.line[0]) == ("3", 7)
    with pytest.raises(TrainingLogParseError, match=r"no iteration line from rank '7'"):
        read_training_log(TT_AWS, rank=7)


def test_torchtitan_repeated_lines_without_prefix_and_truncated_tail():
    log = read_training_log(TT_2389)
    it = log.iterations
    assert it.iteration.tolist() == [4, 5]
    assert it.tflops_per_gpu.tolist() == [314.71, 313.36]  # the first of the seven step-4 lines
    assert it.grad_norm.tolist() == [26.625, 46.5] and it.tokens_per_s_per_gpu.tolist() == [10050, 10007]
    assert len(log.warnings) == 2
    assert log.warnings[0].startswith(f"{TT_2389}:12: last line is truncated")
    assert "dropped 6 line(s)" in log.warnings[1]


# ------------------------------------------------------------------------------------------- detection, header
def test_forced_framework_and_detection():
    forced, auto = read_megatron_log(MIXTRAL), read_training_log(MIXTRAL)
    assert forced.iterations.iteration.tolist() == auto.iterations.iteration.tolist()
    assert read_training_log(BLOOM, framework="megatron-deepspeed").framework == "megatron-deepspeed"
    with pytest.raises(TrainingLogParseError, match="no iteration lines found.*torchtitan 'step: N"):
        read_torchtitan_log(MIXTRAL)
    with pytest.raises(ValueError, match="unknown framework"):
        read_training_log(MIXTRAL, framework="jax")
    with pytest.raises(TrainingLogParseError, match="no iteration lines found.*DeepSpeed 'epoch=E/micro_step"):
        read_training_log(MIXTRAL, framework="deepspeed")
    with pytest.raises(OSError):
        read_training_log(LOGS / "missing.log")


def test_hash_lines_are_skipped_only_at_the_top(tmp_path):
    rec = MIXTRAL.read_text().splitlines()[-1]
    f = tmp_path / "h.log"
    f.write_text("# " + rec + "\n" + rec + "\n# " + rec.replace("73/", "74/") + "\n" + rec.replace("73/", "75/") + "\n")
    log = read_training_log(f, strict=False)
    assert log.iterations.iteration.tolist() == [73, 75]   # the '#' line at the top is a header
    assert len(log.errors) == 1 and log.errors[0].startswith(f"{f}:3: ")  # a '#' line further down is not skipped


def test_spread():
    s = Spread.of([4.0, 1.0, float("nan"), 3.0, 2.0])
    assert (s.median, s.q1, s.q3, s.iqr, s.min, s.max, s.n) == (2.5, 1.75, 3.25, 1.5, 1.0, 4.0, 4)
    e = Spread.of([])
    assert e.n == 0 and np.isnan(e.median) and set(e.as_dict()) == {"median", "q1", "q3", "iqr", "min", "max", "n"}


def test_a_log_that_contradicts_itself_names_both_places(tmp_path):
    """Two runs in one file, or an edited log: a start-up line against the argument dump, a second
    start-up line against the first, a world size other than the product of its degrees, and bf16
    with fp16 (Megatron's arguments.py refuses both) each refuse the log, naming the lines."""
    lines = MCORE_SYN.read_text().splitlines()
    start = next(i for i, ln in enumerate(lines) if "using world size" in ln)
    tp_arg = next(i for i, ln in enumerate(lines) if " tensor_model_parallel_size " in ln)

    def read(edit):
        f = tmp_path / "x.log"
        f.write_text("\n".join(edit(list(lines))) + "\n")
        with pytest.raises(InputError) as ei:
            read_training_log(f, strict=False)      # what compare reads with: refused all the same
        return f, str(ei.value)

    def dump_tp(ls):
        ls[tp_arg] = ls[tp_arg].replace(" 4", " 8")
        return ls
    f, msg = read(dump_tp)
    assert (f"{f}:{start + 1}: the start-up line's tensor_model_parallel_size 4 contradicts the argument dump's 8 "
            f"(line {tp_arg + 1}): Megatron prints both from one set of arguments, so this is two runs in one log "
            "(split the file) or an edited log") in msg

    def second_run(ls):
        return ls[:start + 1] + [ls[start].replace("tensor-model-parallel size: 4", "tensor-model-parallel size: 2")
                                 .replace("data-parallel size: 2", "data-parallel size: 4")] + ls[start + 1:]
    f, msg = read(second_run)
    assert f"{f}:{start + 2}: data_parallel_size 4 contradicts 2 at line {start + 1}: two runs in one log" in msg

    f, msg = read(lambda ls: ls[:start] + [ls[start].replace("world size: 64", "world size: 32")] + ls[start + 1:])
    assert f"{f}:{start + 1}: world size 32 is not data x context x tensor x pipeline parallel size 2 x 2 x 4 x 4" in msg

    def both(ls):
        i = next(i for i, ln in enumerate(ls) if " fp16 " in ln and "...." in ln)
        ls[i] = ls[i].replace("False", "True")
        return ls
    f, msg = read(both)
    assert "has both bf16 and fp16 True, which Megatron refuses" in msg
    assert read_training_log(MCORE_SYN).args["tensor_model_parallel_size"] == 4      # the file itself is consistent


def _refused_edit(tmp_path, src, old, new):
    """(file, message) of ``src`` with ``old`` replaced by ``new``, which the lenient reader must refuse."""
    text = src.read_text()
    assert old in text
    f = tmp_path / "edited.log"
    f.write_text(text.replace(old, new))
    with pytest.raises(InputError) as ei:
        read_training_log(f, strict=False)
    return f, str(ei.value)


@pytest.mark.parametrize("old,new,msg", [
    ("seq_length .................................... 8192", "seq_length .................................... -8192",
     ": seq_length: -8192 is not a whole number >= 1"),
    ("tensor_model_parallel_size .................... 4", "tensor_model_parallel_size .................... four",
     ": tensor_model_parallel_size: 'four' is not a whole number >= 1"),
    ("virtual_pipeline_model_parallel_size .......... 4", "virtual_pipeline_model_parallel_size .......... 2",
     ": virtual_pipeline_model_parallel_size: 2 contradicts num_layers_per_virtual_pipeline_stage 5: 80 layers over PP 4 "
     "make VP 4"),
    ("using world size: 64,", "using world size: -64,", ":4: the start-up line's world size '-64' is not a whole number"),
])
def test_a_logged_count_no_run_has_is_refused_naming_its_key(tmp_path, old, new, msg):
    """A logged degree, batch or model size that is not a whole number >= 1, a garbled start-up line, or
    a VP that contradicts the layers per virtual stage refuses the log by name, lenient or not."""
    f, err = _refused_edit(tmp_path, MCORE_SYN, old, new)
    assert err.startswith(str(f)) and msg in err, err


def test_torchtitan_rates_with_a_sign_or_misplaced_separators_are_errors(tmp_path):
    """torchtitan prints tps with thousands separators: a negative rate is named and dropped, and
    '5,8,6,8' is no number (was read as 5868)."""
    text = TT_1287.read_text()
    assert "tps: 5,868" in text
    for bad, want in (("-5,868", "tokens_per_s_per_gpu -5868 is not a positive finite value"),
                      ("5,8,6,8", "not a number: tps: '5,8,6,8'"),
                      # a step timed at zero prints tps: inf: named, where it had passed as no tps at all
                      ("inf", "tokens_per_s_per_gpu inf is not a positive finite value")):
        f = tmp_path / "t.log"
        f.write_text(text.replace("tps: 5,868", f"tps: {bad}"))
        log = read_training_log(f, strict=False)
        assert any(want in e for e in log.errors), log.errors


@pytest.mark.parametrize("old,new,key", [("tensor_model_parallel_size: 4", "tensor_model_parallel_size: .inf",
                                          "tensor_model_parallel_size"),
                                         ("tensor_model_parallel_size: 4", "tensor_model_parallel_size: nan",
                                          "tensor_model_parallel_size"),
                                         ("num_nodes: 4", "num_nodes: -4", "trainer.num_nodes")])
def test_a_nemo_config_count_no_run_has_is_refused_naming_its_key(tmp_path, old, new, key):
    """NeMo's YAML reads .inf and nan as floats and a node count may be negative: each refuses the log
    naming the key (an infinite degree was an OverflowError)."""
    f, err = _refused_edit(tmp_path, NEMO_SYN, old, new)
    assert f"{f}: {key}: " in err and "is not a whole number >= 1" in err, err


def test_a_nemo_progress_bar_gives_the_global_batch_by_its_consumed_samples(tmp_path):
    """NeMo's progress bar alone (no config dump): consumed_samples grows by 256 a global step, the
    global batch; a bar whose steps add different counts (a ramp-up) gives none."""
    bars = (LOGS / "nemo1_synthetic_config_and_progress_bar.log").read_text().splitlines()[46:49]
    f = tmp_path / "bar.log"
    f.write_text("\n".join(bars) + "\n")
    assert read_training_log(f).layout()["gbs"] == 256
    f.write_text("\n".join(bars).replace("consumed_samples=768.0", "consumed_samples=640.0") + "\n")
    assert read_training_log(f).layout()["gbs"] is None


def test_a_torchtitan_log_states_its_batch_sequence_and_parameter_count(tmp_path):
    """torchtitan of 2025-02..03 prints 'Training starts at step 1, with local batch size 1, global batch
    size 8, sequence length 8192' and every version 'Model llama3 8B size: 8,030,261,248 total
    parameters' (train.py): the global batch and sequence come from the log, and a --model of another
    size is refused naming the count."""
    from costmodel.compare import check_model
    from costmodel.specs import load_model
    steps = [ln for ln in TT_1287.read_text().splitlines() if "step:" in ln][:6]
    head = ["[rank0]:[titan] 2025-03-01 09:59:50,001 - root - INFO - Model llama3 8B size: 8,030,261,248 total parameters",
            "[rank0]:[titan] 2025-03-01 09:59:59,001 - root - INFO - Training starts at step 1, with local batch size 1, "
            "global batch size 8, sequence length 8192, total steps 100 (warmup 200)"]
    f = tmp_path / "tt.log"
    f.write_text("\n".join(head + steps) + "\n")
    log = read_training_log(f)
    assert log.framework == "torchtitan" and (log.layout()["gbs"], log.layout()["seq_len"]) == (8, 8192)
    check_model(load_model("llama3-8b"), log.layout(), "llama3-8b", str(f), log.args)
    with pytest.raises(InputError, match="llama3-70b has 70,553,706,496 parameters, the log .* prints 8,030,261,248"):
        check_model(load_model("llama3-70b"), log.layout(), "llama3-70b", str(f), log.args)


@pytest.mark.parametrize("line, want", [
    ("Trainer is initialized with local batch size 2, global batch size 128, sequence length 8192, total steps 100 "
     "(warmup 200).", (128, 8192)),                                                       # 2025-03..06
    ("Trainer is initialized with local batch size 2, global batch size 128, gradient accumulation steps 1, "
     "sequence length 8192, total steps 100 (warmup 200)", (128, 8192)),                  # 2025-06..2026-08
    ("Trainer is initialized with 16384 tokens per DP rank, 1048576 tokens per train step, gradient accumulation "
     "steps 1, maximum context length 8192, total steps 100 (warmup 200)", (128, 8192)),  # since 2026-08, in tokens
    ("Trainer is initialized with 16000 tokens per DP rank, 1048576 tokens per train step, gradient accumulation "
     "steps 1, maximum context length 8192, total steps 100 (warmup 200)", (None, None)),  # no whole sequences
])
def test_every_torchtitan_start_up_line_gives_its_batch_and_sequence(tmp_path, line, want):
    """torchtitan has printed its batch four ways (train.py / trainer.py, 2025-02 to today): compare read only
    the first, so a run launched with --training.global_batch_size on the command line was priced with the
    TOML's batch without a word.  The token form counts sequences of the maximum context length."""
    steps = [ln for ln in TT_1287.read_text().splitlines() if "step:" in ln][:6]
    f = tmp_path / "tt.log"
    f.write_text("\n".join([f"[rank0]:[titan] 2025-03-01 09:59:59,001 - root - INFO - {line}"] + steps) + "\n")
    lay = read_training_log(f).layout()
    assert (lay["gbs"], lay["seq_len"]) == want


def test_deepspeed_s_timer_line_gives_its_peak_allocated_memory():
    """DeepSpeed's ThroughputTimer prints MaxMemAllocated (max_memory_allocated() / 1024**3, 'GB'):
    read as the records' peak memory in GiB, 61.84 on every line of the synthetic ZeRO-3 log."""
    log = read_training_log(LOGS / "deepspeed_synthetic_zero3_throughput_timer.log")
    assert log.framework == "deepspeed" and log.aggregate()["memory_gib"].median == pytest.approx(61.84)


def test_a_dump_s_virtual_stages_count_the_accounted_embedding_and_loss():
    """Megatron-LM derives VP from num_layers_per_virtual_pipeline_stage over the layers plus one each for the
    embedding and the loss where --account-for-*-in-pipeline-split is on (validate_args): Llama 3.1 405B's 126
    layers + 2 over PP 16 at one layer a virtual stage is VP 8, as recommend prints it.  The dump of that run
    had been refused ('126 layers over PP 16 make VP 7.875'), and without its VP key read as VP 1."""
    from costmodel.readers.training_logs.dumps import _layout, check_logged_counts
    args = dict(num_layers=126, pipeline_model_parallel_size=16, num_layers_per_virtual_pipeline_stage=1,
                virtual_pipeline_model_parallel_size=8, account_for_embedding_in_pipeline_split=True,
                account_for_loss_in_pipeline_split=True, tensor_model_parallel_size=8)
    check_logged_counts(args, "run.log")
    without = {k: v for k, v in args.items() if k != "virtual_pipeline_model_parallel_size"}
    assert _layout(without)["vp"] == 8 and _layout(without)["num_layers"] == 126
    with pytest.raises(InputError, match=r"126 layers and the embedding and the loss \(128 pipeline layers\) over PP "
                                         r"16 make VP 8"):
        check_logged_counts(dict(args, virtual_pipeline_model_parallel_size=7), "run.log")
    # uneven splits give VP per rank directly (--num-virtual-stages-per-pipeline-rank)
    assert _layout(dict(tensor_model_parallel_size=8, pipeline_model_parallel_size=16, num_layers=126,
                        num_virtual_stages_per_pipeline_rank=4))["vp"] == 4
