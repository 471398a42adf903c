"""Readers of the measurement formats cluster operators already have, on real published captures.

Every file under tests/data/readers/ starts with a ``# SOURCE:`` line naming where it was copied from
(GitHub issues, documentation and test fixtures with real nvidia-smi / dcgmi / nccl-tests output);
the one ``# SYNTHETIC:`` file says why no public example was found.  The nccl-tests and nvidia-smi CSV
captures of hardware/profiles/data/ are used too.  Bad-input cases are made from the real files
(a cut row, a value with another unit) in a temporary directory.
"""
import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest

from costmodel.readers import (DCGM_FIELDS, FORMATS, DcgmParseError, NcclTestsParseError, NoUsableDataError,
                                 NvidiaSmiDmonParseError, NvidiaSmiParseError, PowerTrace, collective_from_name,
                                 detect_format, power_trace_from_dcgmi, power_trace_from_dmon,
                                 power_trace_from_nvidia_smi_csv, power_trace_from_suite, read_dcgmi_dmon,
                                 read_measurement, read_nccl_tests, read_nvidia_smi_csv, read_nvidia_smi_dmon)
from costmodel.errors import InputError, ReaderParseError
from costmodel.readers.suite_jsonl import make_record, read_suite_jsonl

REPO = Path(__file__).resolve().parents[2]
D = REPO / "tests" / "data" / "readers"
PUBLIC = REPO / "hardware" / "profiles" / "data"

DMON_H100 = D / "nvidia_smi_dmon_h100_idle_load.txt"
DMON_4GPU = D / "nvidia_smi_dmon_4gpu_pucvmet.txt"
DMON_DT = D / "nvidia_smi_dmon_date_time_mutc.txt"
DCGM_2080 = D / "dcgmi_dmon_rtx2080ti_power_temp.txt"
DCGM_8GPU = D / "dcgmi_dmon_8gpu_profiling_na.txt"
DCGM_MIG = D / "dcgmi_dmon_mig_gpu_instances.txt"
NCCL_OLIVIA = D / "nccl_tests_olivia_gh200_16ranks_4nodes.txt"
NCCL_OCI = D / "nccl_tests_oci_a100_16ranks_2nodes.txt"
NCCL_EKS = D / "nccl_tests_eks_t4_2nodes_nccl_info.txt"
CSV_H100 = D / "nvidia_smi_csv_h100_all_fields_na.csv"
Q_A10 = D / "nvidia_smi_q_a10_driver550_clocks_event_reasons.txt"
Q_A10_BRAKE = D / "nvidia_smi_q_a10_hw_power_brake_gpud_mock.txt"
Q_A100 = REPO / "hardware" / "profiles" / "data" / "m4logs_a100_80gb_8gpu_nccl_wait_nvidia_smi_q.txt"
CSV_PSTATE = D / "nvidia_smi_csv_pstate_power_clocks.csv"
CSV_NOTSUP = D / "nvidia_smi_csv_not_supported.csv"
H100_TRACE = PUBLIC / "h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv"


def _utc(*a):
    return datetime(*a, tzinfo=timezone.utc).timestamp()


def _line(path, n):
    return path.read_text().splitlines()[n - 1]


def test_every_data_file_names_its_source():
    files = sorted(D.iterdir())
    assert len(files) >= 12
    for f in files:
        first = f.read_text().splitlines()[0]
        assert first.startswith("# SOURCE: https://") or first.startswith("# SYNTHETIC: "), f


# ------------------------------------------------------------------------------------------ nvidia-smi dmon

def test_dmon_h100_idle_and_load_blocks():
    t = read_nvidia_smi_dmon(DMON_H100)
    assert len(t) == 10 and t.errors == [] and t.noise_lines == 0
    assert t.columns == ["pwr", "gtemp", "mtemp", "sm", "mem", "enc", "dec", "jpg", "ofa", "mclk", "pclk"]
    assert t.units["pwr"] == "W" and t.units["gtemp"] == "C" and t.units["pclk"] == "MHz" and t.units["sm"] == "%"
    assert list(t.lines) == [8, 9, 10, 11, 12, 21, 22, 23, 24, 25]  # the banner '#' lines are not headers
    assert _line(DMON_H100, 21).split()[1] == "631"
    pwr = t.column("pwr")
    assert pwr[5] == 631 and pwr[9] == 636 and list(pwr[:5]) == [69] * 5
    assert t.column("gtemp")[9] == 65 and t.column("mtemp")[3] == 48
    assert set(t.column("pclk")[:5]) == {345} and set(t.column("pclk")[5:]) == {1980}
    assert list(t.gpu) == [0] * 10 and list(t.sample) == list(range(10))
    assert np.isnan(t.t_unix).all()
    with pytest.raises(KeyError, match="columns"):
        t.column("fb")


def test_dmon_old_columns_dashes_and_four_gpus():
    t = read_nvidia_smi_dmon(DMON_4GPU)
    assert len(t) == 4 and list(t.gpu) == [0, 1, 2, 3] and list(t.sample) == [0, 0, 0, 0]
    assert "temp" in t.columns and "gtemp" not in t.columns
    assert t.column("pwr")[3] == 86 and t.column("gtemp", "temp")[1] == 84  # GPU 3: 86 W, GPU 1: 84 C
    assert np.isnan(t.column("sbecc")).all() and np.isnan(t.column("dbecc")).all()  # '-': not reported
    assert t.column("fb")[3] == 11660 and t.units["tviol"] == "bool" and t.units["rxpci"] == "MB/s"


def test_dmon_date_time_columns_prompt_and_blank_line():
    t = read_nvidia_smi_dmon(DMON_DT)
    assert len(t) == 6 and t.errors == [] and t.noise_lines == 1  # the "$nvidia-smi dmon ..." prompt
    assert list(t.lines) == [5, 7, 8, 9, 10, 11]
    assert t.t_unix[0] == _utc(2024, 1, 4, 13, 54, 35) and list(np.diff(t.t_unix)) == [1.0] * 5
    assert t.time_of_day_s[0] == 13 * 3600 + 54 * 60 + 35
    assert t.column("fb")[3] == 478 and t.column("rxpci")[1] == 217 and t.column("pclk")[0] == 1695
    assert "pwr" not in t.columns


def test_dmon_repeated_headers_with_other_columns_and_mixed_units(tmp_path):
    both = tmp_path / "two_captures.txt"
    both.write_text(DMON_4GPU.read_text() + DMON_H100.read_text())
    t = read_nvidia_smi_dmon(both)
    assert len(t) == 14 and t.errors == []
    assert "temp" in t.columns and "gtemp" in t.columns and "fb" in t.columns
    assert np.isnan(t.column("fb")[4:]).all() and np.isnan(t.column("gtemp")[:4]).all()
    pt = power_trace_from_dmon(t)
    assert list(pt.temp_c[:4]) == [83, 84, 80, 70] and pt.temp_c[-1] == 65  # temp / gtemp combined
    # a later header in another unit: the rows under it are errors, the rest is kept
    lines = DMON_H100.read_text().splitlines()
    k = max(i for i, ln in enumerate(lines) if ln.startswith("# Idx"))
    lines[k] = lines[k].replace("# Idx      W", "# Idx     mW")
    bad = tmp_path / "mixed_units.txt"
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(NvidiaSmiDmonParseError) as ei:
        read_nvidia_smi_dmon(bad)
    assert len(ei.value.errors) == 5 and all("mixed units" in e and "[mW]" in e for e in ei.value.errors)
    assert ei.value.errors[0].startswith(f"{bad}:21:") and len(ei.value.table) == 5
    lenient = read_nvidia_smi_dmon(bad, strict=False)
    assert list(lenient.column("pwr")) == [69] * 5


def test_dmon_bad_rows_name_file_and_line(tmp_path):
    lines = DMON_4GPU.read_text().splitlines()
    lines[4] = lines[4][:40]          # GPU 1 row cut
    lines[5] = lines[5].replace("112", "1l2")
    f = tmp_path / "cut.txt"
    f.write_text("\n".join(["    0   111    83"] + lines) + "\n")  # data before any header
    t = read_nvidia_smi_dmon(f, strict=False)
    assert [e.split(": ")[0] for e in t.errors] == [f"{f}:1", f"{f}:6", f"{f}:7"]
    assert "before any" in t.errors[0] and "fields, expected 18" in t.errors[1] and "not a number" in t.errors[2]
    assert list(t.gpu) == [0, 3] and list(t.column("pwr")) == [111, 86]


# ------------------------------------------------------------------------------------------ dcgmi dmon

def test_dcgmi_power_temperature_with_units_line():
    t = read_dcgmi_dmon(DCGM_2080)
    assert len(t) == 5 and t.errors == [] and t.command is None
    assert t.fields == ["GPUTL", "MCUTL", "POWER", "TMPTR", "ESVTL", "EDVTL", "FBUSD"]
    assert t.field_ids == {"GPUTL": 203, "MCUTL": 204, "POWER": 155, "TMPTR": 150, "ESVTL": 310, "EDVTL": 311,
                           "FBUSD": 252}
    assert t.units["POWER"] == "W" and t.units["TMPTR"] == "C"
    assert _line(DCGM_2080, 7).split()[4] == "20.986"
    assert list(t.column("POWER")) == [20.891, 20.891, 20.891, 20.986, 20.986]
    assert t.column(155) is t.column("POWER") and t.column("power_usage") is t.column("POWER")
    assert set(t.column(150)) == {22} and list(t.entity_id) == [0] * 5 and list(t.sample) == [0, 1, 2, 3, 4]
    with pytest.raises(KeyError, match="fields"):
        t.column(1002)


def test_dcgmi_profiling_fields_na_and_command_line():
    t = read_dcgmi_dmon(DCGM_8GPU)
    assert t.command.endswith("dcgmi dmon -e 1001,1002,1003,1004,1005,1006,1007,1008")
    assert [t.field_ids[s] for s in t.fields] == list(range(1001, 1009))
    assert all(t.units[s] == "ratio" for s in t.fields)
    assert len(t) == 10 and t.noise_lines == 2  # "dmon was stopped ..." and the prompt line
    assert list(t.entity_id) == [0, 1, 2, 3, 4, 5, 6, 7, 0, 1] and list(t.sample[-2:]) == [1, 1]
    assert all(np.isnan(t.values[s][:8]).all() for s in t.fields)  # first sample: N/A everywhere
    assert t.column("GRACT")[8] == 0.888 and t.column("TENSO")[8] == 0.178 and t.column("FP16A")[8] == 0.001
    assert t.column(1002)[9] == 0.777 and t.column("FP32A")[9] == 0.046 and np.isnan(t.column("GRACT")[9])
    assert DCGM_FIELDS[155].name == "DCGM_FI_DEV_POWER_USAGE" and DCGM_FIELDS[1004].short == "TENSO"


def test_dcgmi_mig_instances_and_power_trace_keeps_gpus_only():
    t = read_dcgmi_dmon(DCGM_MIG)
    assert set(t.entity) == {"GPU-I"} and list(t.entity_id) == [21, 22, 29, 30, 31, 28, 35]
    assert t.column("GRACT")[5] == 0.993 and t.column("TENSO")[5] == 0.940
    assert len(power_trace_from_dcgmi(t)) == 0


def test_dcgmi_repeated_header_and_bad_rows(tmp_path):
    two = tmp_path / "two.txt"
    two.write_text(DCGM_2080.read_text() * 2)
    t = read_dcgmi_dmon(two)
    assert len(t) == 10 and list(t.sample) == list(range(10)) and t.errors == []
    lines = DCGM_2080.read_text().splitlines()
    lines[4] = "GPU 0     0                 0"         # cut row
    lines[5] = lines[5].replace("20.891", "20,891")  # locale comma
    f = tmp_path / "bad.txt"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(DcgmParseError) as ei:
        read_dcgmi_dmon(f)
    assert [e.split(": ")[0] for e in ei.value.errors] == [f"{f}:5", f"{f}:6"]
    assert "2 values, expected 7" in ei.value.errors[0] and "POWER" in ei.value.errors[1]
    assert list(ei.value.table.column("POWER")) == [20.891, 20.986, 20.986]


# ------------------------------------------------------------------------------------------ nccl-tests metadata

def test_nccl_olivia_16_ranks_on_4_nodes_versions_and_wrong():
    t = read_nccl_tests(NCCL_OLIVIA)
    m = t.meta
    assert t.errors == [] and len(t.rows) == 2 * 28
    assert (m["collective"], m["binary"]) == ("all_reduce", "all_reduce_perf")
    assert (m["n_ranks"], m["n_nodes"], m["ranks_per_node"]) == (16, 4, 4)
    assert m["hosts"] == ["gpu-1-43", "gpu-1-47", "gpu-1-49", "gpu-1-51"]
    assert m["gpu_name"] == "NVIDIA GH200 120GB" and m["gpu_names"] == ["NVIDIA GH200 120GB"]
    assert m["ranks"][4] == dict(rank=4, group=0, pid=215832, host="gpu-1-47", device=0, bus_id="0009:01:00",
                                 gpu_name="NVIDIA GH200 120GB")
    assert m["nccl_tests_version"] == "2.17.9" and m["nccl_version"] == "2.29.2"  # nccl-library=22902
    assert m["params"]["minBytes"] == 1 and m["params"]["maxBytes"] == 134217728
    assert m["params"]["iters"] == 20 and m["params"]["warmup_iters"] == 1 and m["params"]["step"] == "2(factor)"
    by = {(r.size_bytes, r.placement): r for r in t.rows}
    assert by[(2097152, "out-of-place")].wrong == 18134 and by[(2097152, "in-place")].wrong == 9609
    assert by[(134217728, "out-of-place")].busbw == 89.85 and by[(134217728, "out-of-place")].wrong == 0
    assert len(m["wrong_lines"]) == 6 and "18134" in _line(NCCL_OLIVIA, m["wrong_lines"][0])


def test_nccl_oci_two_nodes_noise_lines_and_no_collective_name():
    t = read_nccl_tests(NCCL_OCI)
    m = t.meta
    assert t.errors == [] and len(t.select()) == 31 and m["noise_lines"] == 3
    assert (m["n_ranks"], m["n_nodes"], m["ranks_per_node"]) == (16, 2, 8)
    assert m["gpu_name"] == "NVIDIA A100-SXM4-40GB" and m["ranks"][8]["host"] == "nccl-allreduce-job0-mpiworker-1"
    assert m["collective"] is None and m["binary"] is None  # the log never names its binary
    assert m["params"]["maxBytes"] == 8589934592 and m["nccl_version"] is None
    assert t.select()[-1].busbw == 237.94 and t.select("in-place")[-1].time_us == 67811


def test_nccl_eks_debug_output_prefixes_and_nccl_version():
    t = read_nccl_tests(NCCL_EKS)
    m = t.meta
    assert t.errors == [] and len(t.rows) == 62 and m["noise_lines"] > 40  # NCCL INFO lines are not errors
    assert (m["nccl_version"], m["cuda_version"]) == ("2.12.7", "11.4")
    assert (m["n_ranks"], m["n_nodes"], m["ranks_per_node"], m["gpu_name"]) == (2, 2, 1, "Tesla T4")
    oop = t.select()
    assert oop[-1].size_bytes == 2 ** 30 and oop[-1].busbw == 3.11 and oop[0].size_bytes == 0
    assert m["params"]["iters"] == 100


def test_nccl_public_capture_keeps_api_and_gets_collective():
    t = read_nccl_tests(PUBLIC / "aws_p5_2node_16xH100_allreduce.txt")
    assert len(t.rows) == 2 * (32 + 7) and t.meta["collective"] == "all_reduce" and t.meta["n_ranks"] is None
    assert read_nccl_tests(PUBLIC / "liplus_a100_8gpu_sendrecv.txt").meta["collective"] == "send_recv"


def test_nccl_truncated_last_row(tmp_path):
    lines = NCCL_OLIVIA.read_text().splitlines()
    lines[-1] = lines[-1][:70]  # the log was cut while the last row was written
    f = tmp_path / "cut.txt"
    f.write_text("\n".join(lines))
    with pytest.raises(NcclTestsParseError) as ei:
        read_nccl_tests(f)
    assert len(ei.value.errors) == 1 and ei.value.errors[0].startswith(f"{f}:{len(lines)}: truncated")
    assert len(ei.value.rows) == 2 * 27
    assert read_nccl_tests(f, strict=False).meta["n_ranks"] == 16


def test_nccl_rows_whose_time_is_not_a_time_are_named_not_dropped(tmp_path):
    """nccl-tests prints algbw = size / time: the OCI capture's 1 MiB row (85.58 us, 12.25 GB/s) agrees
    to its rounding.  The same row with its times in ms (0.08558), a NaN or a negative time is a bad
    line named FILE:LINE; the rest of the capture is kept."""
    from costmodel.readers.nccl_tests import _row_problem
    assert _row_problem(1048576, "out-of-place", 85.58, 12.25) is None
    assert _row_problem(1024, "out-of-place", 5.12, 0.20) is None           # 0.2 GB/s within the 2-digit print
    lines = NCCL_OCI.read_text().splitlines()
    i = next(k for k, ln in enumerate(lines) if ln.split()[:1] == ["1048576"])
    for bad, needle in (("0.08558", "disagree: 1048576 B in 0.08558 us is 1.225e+04 GB/s"),
                        ("nan", "out-of-place time nan us is not a positive number"),
                        ("-85.58", "out-of-place time -85.58 us is not a positive number")):
        f = tmp_path / "bad.txt"
        f.write_text("\n".join(lines[:i] + [lines[i].replace("85.58", bad, 1)] + lines[i + 1:]))
        t = read_nccl_tests(f, strict=False)
        assert len(t.errors) == 1 and t.errors[0].startswith(f"{f}:{i + 1}: ") and needle in t.errors[0], t.errors
        assert len(t.select()) == 30 and len(t.select("in-place")) == 31


def test_nccl_old_rank_lines_without_group_and_na_wrong(tmp_path):
    # lines of https://github.com/NVIDIA/nccl-tests/issues/82 (broadcast_perf, nccl-tests before 2.10: no
    # "Group" in the rank lines, no redop column, "N/A" in the error column with -c 0), copied verbatim
    f = tmp_path / "bcast.txt"
    f.write_text("# nThread 1 nGpus 1 minBytes 8 maxBytes 2147483648 step: 2(factor) warmup iters: 10 iters: 100 "
                 "validation: 0 \n#\n# Using devices\n"
                 "#   Rank  0 Pid  14926 on v100-gpu-1 device  0 [0x00] Tesla V100-PCIE-16GB\n"
                 "#   Rank  1 Pid   9210 on v100-gpu-5 device  0 [0x00] Tesla V100-PCIE-16GB\n"
                 "NCCL version 2.9.6+cuda11.2\n"
                 "           8             2   float       0    45.82    0.00    0.00    N/A    38.17    0.00    0.00"
                 "    N/A\n")
    t = read_nccl_tests(f)
    m = t.meta
    assert (m["n_ranks"], m["n_nodes"], m["ranks_per_node"]) == (2, 2, 1) and m["ranks"][1]["group"] is None
    assert m["gpu_name"] == "Tesla V100-PCIE-16GB" and (m["nccl_version"], m["cuda_version"]) == ("2.9.6", "11.2")
    assert m["params"]["validation"] == 0 and len(t.rows) == 2 and t.rows[0].wrong is None
    assert t.rows[0].time_us == 45.82 and m["collective"] is None


@pytest.mark.parametrize("text,expected", [
    ("aws_p5_2node_16xH100_allreduce.txt", "all_reduce"), ("all_reduce_perf", "all_reduce"),
    ("ncclAllReduce", "all_reduce"), ("nccl-all-reduce-8gpu.log", "all_reduce"),
    ("all_gather_perf_mpi", "all_gather"), ("allgather.txt", "all_gather"),
    ("reduce_scatter_perf", "reduce_scatter"), ("ReduceScatter", "reduce_scatter"),
    ("alltoall_perf", "all_to_all"), ("all_to_all.csv", "all_to_all"), ("all-to-all", "all_to_all"),
    ("sendrecv_perf", "send_recv"), ("p2p_send_recv_h100.txt", "send_recv"),
    ("broadcast_perf", "broadcast"), ("reduce_perf", "reduce"), ("gpu_power.csv", None), ("", None)])
def test_collective_from_name(text, expected):
    assert collective_from_name(text) == expected


def test_collective_from_name_path():
    assert collective_from_name(PUBLIC / "aws_p4de_2node_16xA100_allreduce.txt") == "all_reduce"


# ------------------------------------------------------------------------------------------ nvidia-smi CSV

def test_csv_h100_every_field_with_na_and_deprecated_values():
    t = read_nvidia_smi_csv(CSV_H100)
    assert len(t) == 2 and t.errors == [] and len(t.fields) == 212
    assert list(t.column("power.draw")) == [69.85, 631.95] and t.units["power.draw"] == "W"
    assert list(t.column("temperature.gpu")) == [41, 59] and list(t.column("temperature.memory")) == [48, 54]
    assert list(t.column("clocks.current.sm")) == [345, 1980] and list(t.column("utilization.gpu")) == [0, 100]
    assert np.isnan(t.column("fan.speed")).all()                 # [N/A]
    assert np.isnan(t.column("display_mode")).all()              # [Requested functionality has been deprecated]
    assert np.isnan(t.column("platform.chassis_serial_number")).all()  # empty cell
    assert t.text["name"] == ["NVIDIA H100 80GB HBM3"] * 2 and t.text["pstate"] == ["P0", "P0"]
    assert "fan.speed" not in t.text and np.isnan(t.column("name")).all()
    assert t.t0_unix == pytest.approx(_utc(2026, 7, 14, 8, 12, 38, 696000))
    assert t.column("timestamp")[1] == pytest.approx(14.657)


def test_csv_not_supported_is_nan_and_kept():
    t = read_nvidia_smi_csv(CSV_NOTSUP)
    assert len(t) == 2 and t.errors == [] and list(t.gpu) == [0, 1]
    assert t.column("power.draw")[0] == 631.95 and np.isnan(t.column("power.draw")[1])
    assert np.isnan(t.column("utilization.gpu")[1]) and np.isnan(t.column("temperature.memory")[1])
    assert t.column("temperature.gpu")[1] == 60 and t.text["name"][1] == "NVIDIA GeForce RTX 2080 Ti"


def test_csv_word_in_numeric_field_is_an_error(tmp_path):
    f = tmp_path / "x.csv"
    f.write_text("index, temperature.gpu, pstate\n0, 41, P0\n1, hot, P0\n")
    with pytest.raises(NvidiaSmiParseError, match=r"x\.csv:3: not a number for temperature\.gpu"):
        read_nvidia_smi_csv(f)


def test_csv_value_in_another_unit_is_a_per_line_error(tmp_path):
    head = H100_TRACE.read_text().splitlines()[:10 + 16]  # 9 source lines + CSV header + 2 samples of 8 GPUs
    k = next(i for i, ln in enumerate(head) if ln.startswith("2025/07/26 23:32:09.710"))
    assert head[k].split(", ")[1] == "72.03 W"
    head[k] = head[k].replace("72.03 W", "0.07203 kW")
    f = tmp_path / "mixed.csv"
    f.write_text("\n".join(head) + "\n")
    with pytest.raises(NvidiaSmiParseError) as ei:
        power_trace_from_nvidia_smi_csv(f, n_gpus=8)
    assert len(ei.value.errors) == 1 and ei.value.errors[0].startswith(f"{f}:{k + 1}: unit 'kW' differs from")
    assert "mixed units" in ei.value.errors[0] and "power.draw" in ei.value.errors[0]
    pt = power_trace_from_nvidia_smi_csv(f, n_gpus=8, strict=False)
    assert len(pt) == 15 and pt.errors == ei.value.errors
    assert list(pt.lines[:4]) == [k - 2, k - 1, k, k + 2] and list(pt.gpu[:4]) == [0, 1, 2, 4]  # GPU 3's row dropped
    assert pt.power_w[0] == 69.32 and pt.power_w[3] == 72.22 and pt.power_w[10] == 72.03  # next sample's GPU 3
    assert pt.absolute_time and pt.t_unix[0] == pytest.approx(_utc(2025, 7, 26, 23, 32, 9, 703000))


# ------------------------------------------------------------------------------------------ PowerTrace

def test_power_trace_from_csv_without_timestamp():
    pt = power_trace_from_nvidia_smi_csv(CSV_PSTATE)
    assert len(pt) == 13 and not pt.absolute_time and list(pt.t_unix) == list(range(13))
    assert pt.source_format == "nvidia-smi-csv" and pt.path == CSV_PSTATE and list(pt.lines[:2]) == [3, 4]
    assert pt.power_w[0] == 83.92 and pt.power_w[-1] == 83.43 and pt.temp_c[0] == 56
    assert pt.sm_clock_mhz[1] == 1470 and pt.util_gpu_pct[9] == 32 and np.isnan(pt.mem_temp_c).all()


def test_power_trace_from_csv_h100_and_window():
    pt = power_trace_from_nvidia_smi_csv(CSV_H100)
    assert pt.absolute_time and list(pt.power_w) == [69.85, 631.95] and list(pt.mem_temp_c) == [48, 54]
    t_load = _utc(2026, 7, 14, 8, 12, 53, 353000)
    assert pt.t_unix[1] == pytest.approx(t_load)
    w = pt.window(t_load - 1, t_load + 1)
    assert len(w) == 1 and w.power_w[0] == 631.95 and w.sm_clock_mhz[0] == 1980


def test_power_trace_from_dmon_per_gpu_and_window():
    pt = power_trace_from_dmon(DMON_4GPU)
    g = pt.per_gpu()
    assert sorted(g) == [0, 1, 2, 3] and g[3].power_w[0] == 86 and g[2].sm_clock_mhz[0] == 1759
    assert g[0].util_gpu_pct[0] == 25 and np.isnan(g[0].mem_temp_c[0])
    h = power_trace_from_dmon(DMON_H100, interval_s=1.0)
    assert not h.absolute_time and list(h.t_unix) == [float(i) for i in range(10)]
    load = h.window(5, 10)
    assert list(load.power_w) == [631, 634, 633, 634, 636] and set(load.sm_clock_mhz) == {1980}
    assert list(load.mem_temp_c) == [57, 58, 58, 59, 59] and list(load.lines) == [21, 22, 23, 24, 25]
    dt = power_trace_from_dmon(DMON_DT)
    assert dt.absolute_time and dt.t_unix[0] == _utc(2024, 1, 4, 13, 54, 35)
    assert np.isnan(dt.power_w).all() and list(dt.util_gpu_pct) == [6, 0, 3, 13, 0, 3]
    assert len(dt.window(_utc(2024, 1, 4, 13, 54, 36), _utc(2024, 1, 4, 13, 54, 38))) == 2


def test_power_trace_from_dcgmi():
    pt = power_trace_from_dcgmi(DCGM_2080, interval_s=1.0)
    assert pt.source_format == "dcgmi-dmon" and not pt.absolute_time and len(pt) == 5
    assert list(pt.power_w) == [20.891, 20.891, 20.891, 20.986, 20.986] and set(pt.temp_c) == {22}
    assert set(pt.util_gpu_pct) == {0} and np.isnan(pt.sm_clock_mhz).all() and list(pt.t_unix) == [0, 1, 2, 3, 4]


def _suite_file(tmp_path):
    recs = []
    for i, (host, slot, p) in enumerate([("node-a", 0, 300.5), ("node-a", 1, 310.0), ("node-b", 0, 295.25)]):
        recs.append(make_record("sample", host, slot, slot=slot, t_unix=1.7e9 + 0.05 * (2 - i), power_w=p,
                                temp_c=61.0, mem_temp_c=None, sm_clock_mhz=1980, clock_event_reasons=0,
                                util_gpu_pct=99.0, util_mem_pct=40.0, power_limit_w=700.0))
    recs.append(make_record("end", "node-a", 0, finished_unix=1.7e9 + 1, n_records=3))
    f = tmp_path / "run.jsonl"
    f.write_text("\n".join(json.dumps(r) for r in recs[:2]) + "\n{\"suite\": \"costmodel-calibration\", \n"
                 + "\n".join(json.dumps(r) for r in recs[2:]) + "\n")
    return f


def test_power_trace_from_suite(tmp_path):
    f = _suite_file(tmp_path)
    pt = power_trace_from_suite(f)
    assert pt.source_format == "suite-jsonl" and pt.absolute_time and len(pt) == 3
    assert list(pt.power_w) == [295.25, 310.0, 300.5]  # sorted by time
    assert list(pt.host) == ["node-b", "node-a", "node-a"] and list(pt.gpu) == [0, 1, 0]
    assert np.isnan(pt.mem_temp_c).all() and set(pt.sm_clock_mhz) == {1980}
    assert len(pt.errors) == 1 and pt.errors[0].startswith(f"{f}:3: not JSON")
    assert pt.per_gpu(by_host=True)[("node-a", 0)].power_w[0] == 300.5
    with pytest.raises(ValueError, match="spans hosts"):
        pt.per_gpu()
    assert len(power_trace_from_suite(read_suite_jsonl(f))) == 3


def test_power_trace_rejects_unconvertible_header_unit(tmp_path):
    f = tmp_path / "dbm.csv"
    f.write_text("index, power.draw [dBm]\n0, 20\n")
    with pytest.raises(ValueError, match=r"dbm\.csv: power \(power\.draw\) in unit \[dBm\]"):
        power_trace_from_nvidia_smi_csv(f)
    g = tmp_path / "kw.csv"
    g.write_text("index, power.draw [kW]\n0, 0.5 kW\n")
    assert power_trace_from_nvidia_smi_csv(g).power_w[0] == 500.0
    with pytest.raises(ValueError, match="has 2 entries"):
        PowerTrace(t_unix=np.zeros(1), gpu=np.zeros(2, int), power_w=np.zeros(1), temp_c=np.zeros(1),
                   mem_temp_c=np.zeros(1), sm_clock_mhz=np.zeros(1), util_gpu_pct=np.zeros(1), source_format="x")


# ------------------------------------------------------------------------------------------ sniffing

@pytest.mark.parametrize("path,fmt", [
    (DMON_H100, "nvidia-smi-dmon"), (DMON_4GPU, "nvidia-smi-dmon"), (DMON_DT, "nvidia-smi-dmon"),
    (DCGM_2080, "dcgmi-dmon"), (DCGM_8GPU, "dcgmi-dmon"), (DCGM_MIG, "dcgmi-dmon"),
    (NCCL_OLIVIA, "nccl-tests"), (NCCL_OCI, "nccl-tests"), (NCCL_EKS, "nccl-tests"),
    (PUBLIC / "aws_p5_2node_16xH100_allreduce.txt", "nccl-tests"),
    (PUBLIC / "liplus_a100_8gpu_sendrecv.txt", "nccl-tests"),
    (CSV_H100, "nvidia-smi-csv"), (CSV_PSTATE, "nvidia-smi-csv"), (CSV_NOTSUP, "nvidia-smi-csv"),
    (PUBLIC / "zeus_nsdi23_power_vs_powerlimit_v100.csv", "zeus-csv"),
    (Q_A10, "nvidia-smi-q"), (Q_A100, "nvidia-smi-q")])
def test_detect_format_on_real_files(path, fmt):
    assert detect_format(path) == fmt
    m = read_measurement(path)
    assert m.format == fmt and m.format in FORMATS
    if fmt in ("nvidia-smi-csv", "nvidia-smi-dmon", "dcgmi-dmon", "nvidia-smi-q"):
        assert isinstance(m.data, PowerTrace) and m.data.source_format == fmt and len(m.data.table) > 0


def test_read_measurement_traces_keep_their_table():
    fmt, pt, warnings = read_measurement(DCGM_MIG)
    assert fmt == "dcgmi-dmon" and len(pt) == 0 and pt.table.column("GRACT")[5] == 0.993
    assert len(warnings) == 1 and "GPU-I only" in warnings[0]
    fmt, pt, warnings = read_measurement(DMON_4GPU)
    assert list(pt.power_w) == [111, 111, 112, 86] and pt.table.column("fb")[0] == 11651 and warnings == []


def test_detect_by_content_not_extension(tmp_path):
    f = tmp_path / "looks_like.csv"
    f.write_text(DMON_H100.read_text())
    assert detect_format(f) == "nvidia-smi-dmon"
    head = tmp_path / "trace.txt"
    head.write_text("\n".join(H100_TRACE.read_text().splitlines()[:20]) + "\n")
    fmt, data, warnings = read_measurement(head)
    assert fmt == "nvidia-smi-csv" and isinstance(data, PowerTrace) and len(data) == 10
    assert data.power_w[0] == 69.32 and data.table.column("memory.used")[0] == 132 and data.absolute_time
    assert len(warnings) == 1 and warnings[0].startswith(f"{head}: no 'index' field")


def test_read_measurement_suite_and_warnings(tmp_path):
    f = _suite_file(tmp_path)
    assert detect_format(f) == "suite-jsonl"
    fmt, run, warnings = read_measurement(f)
    assert fmt == "suite-jsonl" and len(run["sample"]) == 3 and run.complete
    assert len(warnings) == 1 and warnings[0].startswith(f"{f}:3:")
    m = read_measurement(NCCL_OLIVIA)
    assert len(m.warnings) == 6 and all("#wrong" in w and str(NCCL_OLIVIA) in w for w in m.warnings)


def test_read_measurement_keeps_good_rows_of_a_cut_log(tmp_path):
    lines = NCCL_OLIVIA.read_text().splitlines()
    f = tmp_path / "cut.txt"
    f.write_text("\n".join(lines[:-1] + [lines[-1][:50]]))
    fmt, t, warnings = read_measurement(f)
    assert fmt == "nccl-tests" and len(t.rows) == 54
    assert any(w.startswith(f"{f}:{len(lines)}: truncated") for w in warnings)


def test_nothing_usable_is_a_clear_error(tmp_path):
    empty = tmp_path / "empty.csv"
    empty.write_text("\n  \n")
    with pytest.raises(NoUsableDataError, match=rf"{empty}: .*empty.*nccl-tests.*dcgmi-dmon"):
        read_measurement(empty)
    header_only = tmp_path / "header_only.csv"
    header_only.write_text("timestamp, power.draw [W]\n")
    with pytest.raises(NoUsableDataError, match=rf"{header_only}: .*nvidia-smi-csv: no data rows"):
        read_measurement(header_only)
    all_bad = tmp_path / "all_bad.txt"
    all_bad.write_text("\n".join(NCCL_OLIVIA.read_text().splitlines()[:22]) + "\n        1      1   int8  sum\n")
    with pytest.raises(NoUsableDataError) as ei:
        read_measurement(all_bad)
    assert isinstance(ei.value, ReaderParseError) and isinstance(ei.value, ValueError)
    assert "all 1 data lines are bad" in str(ei.value) and f"{all_bad}:23: truncated" in str(ei.value)
    assert ei.value.data.meta["n_ranks"] == 16
    unknown = PUBLIC / "README.md"
    with pytest.raises(NoUsableDataError, match="formats this reader knows: suite-jsonl, nccl-tests"):
        detect_format(unknown)


def test_nvidia_smi_q_both_namings_of_the_clock_reasons():
    """Driver 525 prints "Clocks Throttle Reasons" and "Power Readings" (8x A100 during an NCCL hang,
    huggingface/m4-logs); driver 550 "Clocks Event Reasons" and "GPU Power Readings" (A10, gpud)."""
    from costmodel.readers.nvidia_smi_q import read_nvidia_smi_q
    q = read_nvidia_smi_q(Q_A100)
    assert q.driver == "525.60.13" and len(q) == 8 and not q.errors
    g0, g1 = q.gpus[0], q.gpus[1]
    assert (g0["power_w"], g0["util_gpu_pct"], g0["sm_clock_mhz"], g0["voltage_mv"]) == (67.97, 0.0, 1155.0, 743.75)
    assert (g1["power_w"], g1["util_gpu_pct"], g1["sm_clock_mhz"], g1["voltage_mv"]) == (87.03, 100.0, 1410.0, 925.0)
    assert (g0["slowdown_temp_c"], g0["shutdown_temp_c"], g0["min_power_limit_w"]) == (89.0, 92.0, 100.0)
    assert g0["reasons"] == frozenset() and g0["name"] == "NVIDIA A100-SXM4-80GB" and g0["bus_id"] == "00000000:07:00.0"
    a10 = read_nvidia_smi_q(Q_A10).gpus[0]
    assert a10["reasons"] == {"GPU idle"} and (a10["power_w"], a10["power_limit_w"], a10["max_sm_clock_mhz"]) == \
        (21.3, 150.0, 1695.0)
    assert read_nvidia_smi_q(Q_A10_BRAKE).gpus[0]["reasons"] == {"GPU idle", "HW slowdown", "HW power brake slowdown"}


def test_nvidia_smi_q_names_the_throttled_gpu_in_compare():
    from costmodel.compare import throttle_warnings
    from costmodel.trace_window import trace_metrics
    fmt, trace, warnings = read_measurement(Q_A10_BRAKE)
    assert fmt == "nvidia-smi-q" and trace.absolute_time and warnings == []
    _, per_gpu = trace_metrics(trace, trace.t_unix[0] - 1, trace.t_unix[0] + 1)
    assert throttle_warnings(per_gpu) == ["GPU 0 throttled in the training window: HW slowdown 100%, HW power brake "
                                          "slowdown 100% of its samples"]


def test_nvidia_smi_q_bad_values_and_snapshots(tmp_path):
    """Two snapshots (nvidia-smi -q -l) give two samples per GPU; a value in the wrong unit is a bad line
    naming file and line, the rest is kept."""
    from costmodel.readers.nvidia_smi_q import NvidiaSmiQParseError, read_nvidia_smi_q
    text = Q_A10.read_text()
    f = tmp_path / "two.txt"
    f.write_text(text + text.replace("Power Draw                        : 21.30 W", "Power Draw                        : 2.1 kW", 1))
    with pytest.raises(NvidiaSmiQParseError, match=r"two.txt:\d+: GPU Power Readings / Power Draw: '2.1 kW': expected W"):
        read_nvidia_smi_q(f)
    q = read_nvidia_smi_q(f, strict=False)
    assert len(q) == 2 and [g["snapshot"] for g in q.gpus] == [0, 1] and q.gpus[0]["power_w"] == 21.3
    assert np.isnan(q.gpus[1]["power_w"]) and q.gpus[1]["temp_c"] == 33.0


def test_compare_takes_one_nvidia_smi_q_snapshot_and_names_bad_lines(tmp_path):
    """A single `nvidia-smi -q` taken during the run is a trace of one instant inside the log's window;
    a capture whose every power value is bad names its first bad line; a folder is not a trace."""
    from costmodel.cli.compare_inputs import _read_trace
    from costmodel.trace_window import training_window
    from costmodel.errors import InputError
    t0, t1, how = training_window([1000.0, 1010.0, 1020.0], 10.0, [1005.0], True)
    assert how == "log timestamps" and t0 == 1005.0 and 0 < t1 - t0 <= 1e-3
    bad = tmp_path / "bad.txt"
    bad.write_text(Q_A10.read_text().replace(": 21.30 W", ": 2.1 kW"))
    with pytest.raises(InputError, match=r"no power samples; 1 bad line\(s\), the first: .*bad.txt:\d+: GPU Power "
                                          r"Readings / Power Draw: '2.1 kW': expected W"):
        _read_trace(bad, 8)
    with pytest.raises(InputError, match="is a directory"):
        _read_trace(tmp_path, 8)


def test_rccl_tests_output_reads_as_nccl_tests():
    """rccl-tests (ROCm) prints the nccl-tests table with a 'Group' in each rank line, '#wrong' columns
    and an uncommented 'rccl-tests: Version' line: 8 MI300X ranks on one host, the 8 MiB all-reduce row."""
    from costmodel.readers.registry import detect_format
    f = D / "rccl_tests_mi300x_8gpu_allreduce_excerpt.txt"
    assert detect_format(f) == "nccl-tests"
    t = read_nccl_tests(f, strict=True)
    assert t.meta["n_ranks"] == 8 and t.meta["n_nodes"] == 1 and t.meta["gpu_name"] == "AMD Instinct MI300X"
    assert t.meta["nccl_tests_version"] == "rccl-tests develop:83d38d9" and t.meta["noise_lines"] == 0
    (out,) = t.select()
    assert out.size_bytes == 8388608 and out.busbw == 161.14 and out.time_us == 91.10


def _write(text: str):
    import tempfile
    f = Path(tempfile.mkdtemp()) / "capture.txt"
    f.write_text(text)
    return f


def test_the_same_rank_from_two_processes_is_refused():
    """nccl-tests#306: two processes on two nodes each print Rank 0..7 before any table (each ran its
    own 8-rank test, as a binary built without MPI does): not one 16-rank collective, refused in one
    message naming the file, the line and both processes."""
    f = D / "nccl_tests_issue306_h20_ranks_repeated_per_node.txt"
    with pytest.raises(NoUsableDataError, match=r"line 16: rank 0 is printed by two processes \(node3 pid 1530412 "
                                                 r"device 0 and node2 pid 2236260 device 0\)"):
        read_nccl_tests(f, strict=False)
    # a file of several tests, each with its own rank lines and table, is not that
    two = (D / "rccl_tests_mi300x_8gpu_allreduce_excerpt.txt").read_text()
    t = read_nccl_tests(_write(two + "\n" + "\n".join(two.splitlines()[3:])), strict=True)
    assert t.meta["n_ranks"] == 8 and len(t.select(table=1)) == 1


def test_rocm_smi_concise_and_long_listing_mi300x():
    """4 idle MI300X (thamada/nvidia-smi): the ROCm 6 concise table (junction temperature, socket power,
    names on the next line) and the rocm-smi -a listing, one snapshot each."""
    from costmodel.readers.power_trace import power_trace_from_rocm_smi
    f = D / "rocm_smi_mi300x_x4_concise_and_all.txt"
    assert detect_format(f) == "rocm-smi"
    t = power_trace_from_rocm_smi(f)
    assert list(t.power_w[:4]) == [133.0, 131.0, 131.0, 137.0] and list(t.temp_c[:4]) == [35.0, 37.0, 34.0, 38.0]
    assert list(t.power_w[4:]) == [133.0, 130.0, 131.0, 136.0] and list(t.sm_clock_mhz[4:]) == [137.0, 133.0, 141.0, 132.0]
    assert list(t.t_unix) == [0] * 4 + [1] * 4 and t.device_names[0] == "AMD Instinct MI300X"
    m = read_measurement(f)
    assert m.format == "rocm-smi" and len(m.data.power_w) == 8


def test_rocm_smi_mi250_package_power_is_split_over_its_two_gcds():
    """MI250 (Hugging Face Optimum docs): the primary GCD prints the OAM's power, the secondary N/A and
    a 0 W cap; each GCD gets half, the per-GCD power the model predicts. The older table's temperature
    is the die edge, and the reader says so."""
    from costmodel.readers.power_trace import power_trace_from_rocm_smi
    from costmodel.readers.rocm_smi import read_rocm_smi
    f = D / "rocm_smi_mi250_8gcd_concise_hf_optimum.txt"
    q = read_rocm_smi(f)
    assert q.temp_sensor == "edge" and [g["cap_w"] for g in q.gpus[:2]] == [560.0, 0.0]
    t = power_trace_from_rocm_smi(q)
    assert list(t.power_w) == [45.0, 45.0, 47.5, 47.5, 49.5, 49.5, 47.0, 47.0]


def test_each_test_of_a_multi_test_file_keeps_its_collective(tmp_path):
    """nccl-tests 2.18 prints '# Collective test starting: X' before each test of a multi-test run: the
    tables keep their collective, and calibrate's inputs fit each (here the real Olivia GH200 all-reduce
    capture, with its marker, followed by the same table relabelled as an all_gather test with
    all_gather's busbw factor, (g-1)/g, half of all_reduce's: a composition to check the bookkeeping,
    not a measurement)."""
    from costmodel.fit.measurements import FitReport, capture_inputs
    src = (D / "nccl_tests_olivia_gh200_16ranks_4nodes.txt").read_text()
    body = "\n".join(ln for ln in src.splitlines()[1:])
    f = tmp_path / "multi.txt"
    f.write_text(body + "\n# Collective test starting: all_gather_perf\n" + _halve_busbw(body.replace(
        "Collective test starting: all_reduce_perf", "Collective test starting: all_gather_perf"), "none") + "\n")
    t = read_nccl_tests(f, strict=False)
    assert t.meta["table_collectives"][:1] == ["all_reduce"] and t.meta["table_collectives"][-1] == "all_gather"
    rep = FitReport()
    got = capture_inputs(f, t, None, None, None, rep)
    assert [g[1] for g in got] == ["all_reduce", "all_gather"] and got[0][2:4] == (4, 4)
    # 28 sizes, of which 6 report #wrong > 0 (corrupted results): left out of each fit
    assert len(got[0][4]) == len(got[1][4]) == 22


def _halve_busbw(text: str, redop: str | None = None) -> str:
    """Rows of an nccl-tests table with both busbw columns (8th and 12th fields) halved, and the redop
    column set to ``redop`` where given ('none' for an all-reduce table relabelled as all_gather)."""
    out = []
    for ln in text.splitlines():
        f = ln.split()
        if len(f) == 13 and f[0].isdigit():
            f[3], f[7], f[11] = redop or f[3], f"{float(f[7]) / 2:.2f}", f"{float(f[11]) / 2:.2f}"
            ln = "  ".join(f)
        out.append(ln)
    return "\n".join(out)


def test_collective_read_from_busbw_algbw_ratio_and_contradiction_refused(tmp_path):
    """nccl-tests prints busbw = algbw x f(g): 2(g-1)/g for all_reduce, (g-1)/g for all_gather and
    reduce_scatter. The OCI A100 capture (16 ranks, no *_perf line, no collective in its name) has
    ratio 1.875 = 2 x 15/16: read as all_reduce with a warning; told it is all_gather (0.938), refused."""
    import shutil
    from costmodel.errors import FitError
    from costmodel.fit.measurements import FitReport, capture_inputs
    f = tmp_path / "capture.txt"
    shutil.copy(D / "nccl_tests_oci_a100_16ranks_2nodes.txt", f)
    t = read_nccl_tests(f, strict=False)
    assert not t.meta.get("collective")
    rep = FitReport()
    got = capture_inputs(f, t, None, None, None, rep)
    assert [g[1] for g in got] == ["all_reduce"] and any("read as all_reduce" in w for w in rep.warnings)
    with pytest.raises(FitError, match=r"1\.875.*all_gather over 16 ranks prints 0\.938 \(all_reduce would\)"):
        capture_inputs(f, t, "all_gather", None, None, FitReport())


def test_amd_smi_monitor_and_metric_mi300x():
    """amd-smi (ROCm blog on an 8x MI300X node): the monitor table read by column name, a metric block
    by section; both detected by content and turned into power traces."""
    from costmodel.readers.power_trace import power_trace_from_amd_smi
    mon = D / "amd_smi_monitor_mi300x_8gpu_rocm_blog.txt"
    met = D / "amd_smi_metric_mi300x_rocm_blog.txt"
    assert detect_format(mon) == "amd-smi" and detect_format(met) == "amd-smi"
    t = power_trace_from_amd_smi(mon)
    assert list(t.power_w) == [182.0, 143.0, 117.0, 116.0, 118.0, 118.0, 116.0, 118.0]
    assert list(t.temp_c[:2]) == [42.0, 40.0] and list(t.sm_clock_mhz[:2]) == [1613.0, 358.0]
    assert list(t.util_gpu_pct[:2]) == [83.0, 13.0] and set(t.t_unix) == {0.0}
    m = power_trace_from_amd_smi(met)
    assert (m.power_w[0], m.sm_clock_mhz[0], m.util_gpu_pct[0]) == (234.0, 2102.0, 100.0) and np.isnan(m.temp_c[0])
    assert read_measurement(mon).format == "amd-smi"


def test_abbreviated_rank_block_gives_hosts_and_ranks():
    """A rank block pasted one line per host ('#  Rank  0 .. Rank  7 on HOST  NAME', Azure NDv5
    walkthrough, nccl-tests 2.18.3): 16 ranks on 2 hosts of 8, the GPU name, the collective, and NCCL
    2.29.7 from nccl-library=22907."""
    t = read_nccl_tests(D / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt")
    m = t.meta
    assert (m["n_ranks"], m["n_nodes"], m["ranks_per_node"]) == (16, 2, 8)
    assert m["hosts"] == ["h100a-gpu-0001", "h100a-gpu-0002"] and m["gpu_name"] == "NVIDIA H100 80GB HBM3"
    assert (m["collective"], m["nccl_version"], m["nccl_tests_version"]) == ("all_reduce", "2.29.7", "2.18.3")
    big = t.select()[-1]
    assert (big.size_bytes, big.busbw, big.redop) == (17179869184, 466.33, "sum")


def test_truncated_rank_block_is_not_taken_as_the_topology(tmp_path):
    """nccl-tests cuts a process's device lines at 2,048 characters and ends them with '...'
    (src/util.cu MAX_LINE): the ranks listed are a lower bound. The Olivia GH200 capture (16 ranks)
    with its rank block cut after rank 5 (a composition of that real capture): no topology is read
    from the 6 ranks left, and the fit takes the 16 ranks from busbw/algbw with --gpus-per-node 4."""
    from costmodel.errors import FitError
    from costmodel.fit.measurements import FitReport, capture_inputs
    lines = (D / "nccl_tests_olivia_gh200_16ranks_4nodes.txt").read_text().splitlines()
    ranks = [i for i, ln in enumerate(lines) if ln.lstrip("# ").startswith("Rank")]
    cut = lines[:ranks[5]] + [lines[ranks[5]][:40] + "..."] + lines[ranks[-1] + 1:]
    f = tmp_path / "cut.txt"
    f.write_text("\n".join(cut) + "\n")
    t = read_nccl_tests(f, strict=False)
    assert t.meta["ranks_truncated"] and t.meta["n_ranks"] is None and len(t.meta["ranks"]) == 5
    with pytest.raises(FitError, match="lists only some of its ranks.*16 ranks of all_reduce"):
        capture_inputs(f, t, None, None, None, FitReport())
    rep = FitReport()
    got = capture_inputs(f, t, None, None, 4, rep)
    assert got[0][1:4] == ("all_reduce", 4, 4) and any("16 ranks read from busbw/algbw" in w for w in rep.warnings)


def test_ranks_from_busbw_algbw_when_no_rank_lines():
    """The AWS p4de capture prints no '# Rank' lines; busbw/algbw = 1.875 = 2(g-1)/g gives g = 16:
    --gpus-per-node 8 makes it 2 nodes, --nodes 2 makes it 8 per node, --nodes 3 does not divide."""
    from costmodel.errors import FitError
    from costmodel.fit.measurements import FitReport, capture_inputs
    f = Path(__file__).resolve().parents[2] / "hardware/profiles/data/aws_p4de_2node_16xA100_allreduce.txt"
    t = read_nccl_tests(f, strict=False)
    assert capture_inputs(f, t, None, None, 8, FitReport())[0][2:4] == (2, 8)
    assert capture_inputs(f, t, None, 2, None, FitReport())[0][2:4] == (2, 8)
    with pytest.raises(FitError, match="16 ranks of all_reduce, which --nodes 3 does not divide"):
        capture_inputs(f, t, None, 3, None, FitReport())
    with pytest.raises(FitError, match="says 16 ranks of all_reduce: pass --nodes or --gpus-per-node"):
        capture_inputs(f, t, None, None, None, FitReport())


def test_collective_named_differently_by_capture_and_flag_or_file_name_is_refused(tmp_path):
    """The Olivia capture says all_reduce_perf: --collective all_gather, or a file named
    all_gather_*.txt, contradicts it and is refused naming both; the agreeing flag is accepted."""
    import shutil
    from costmodel.errors import FitError
    from costmodel.fit.measurements import FitReport, capture_inputs
    src = D / "nccl_tests_olivia_gh200_16ranks_4nodes.txt"
    t = read_nccl_tests(src, strict=False)
    with pytest.raises(FitError, match="all_reduce_perf.*says all_reduce.*--collective says all_gather"):
        capture_inputs(src, t, "all_gather", None, None, FitReport())
    assert capture_inputs(src, t, "all_reduce", None, None, FitReport())[0][1] == "all_reduce"
    f = tmp_path / "all_gather_olivia.txt"
    shutil.copy(src, f)
    with pytest.raises(FitError, match="file name 'all_gather_olivia.txt' says all_gather"):
        capture_inputs(f, read_nccl_tests(f, strict=False), None, None, None, FitReport())


def test_reduce_scatter_read_from_ratio_below_one_and_a_reduction_op(tmp_path):
    """busbw/algbw < 1 with redop sum is reduce_scatter's alone ((g-1)/g; all_gather and alltoall
    print redop none). The Olivia all_reduce table with its busbw halved and its test line removed
    (a composition): read as reduce_scatter over 16 ranks; with redop none it is refused as ambiguous."""
    from costmodel.errors import FitError
    from costmodel.fit.measurements import FitReport, capture_inputs
    body = "\n".join(ln for ln in (D / "nccl_tests_olivia_gh200_16ranks_4nodes.txt").read_text().splitlines()[1:]
                     if "all_reduce_perf" not in ln)
    f = tmp_path / "capture.txt"
    f.write_text(_halve_busbw(body) + "\n")
    rep = FitReport()
    got = capture_inputs(f, read_nccl_tests(f, strict=False), None, None, None, rep)
    assert got[0][1:4] == ("reduce_scatter", 4, 4) and any("read as reduce_scatter" in w for w in rep.warnings)
    g = tmp_path / "capture2.txt"
    g.write_text(_halve_busbw(body).replace("  sum  ", "  none  ") + "\n")
    with pytest.raises(FitError, match="redop none fits all_gather and all_to_all alike"):
        capture_inputs(g, read_nccl_tests(g, strict=False), None, None, None, FitReport())


def test_a_power_trace_whose_time_goes_back_is_refused(tmp_path):
    """Two captures in one file (or a clock reset): a GPU's timestamps going back by more than a second
    cannot be matched to step times; the reader names the first line where it happens."""
    from costmodel.readers.nvidia_smi import read_nvidia_smi_csv
    src = REPO / "hardware" / "profiles" / "data" / "h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv"
    lines = src.read_text().splitlines()
    data = [i for i, ln in enumerate(lines) if ln[:1].isdigit()]
    a, b = data[800], data[1600]            # swap two blocks of 800 rows (100 samples of 8 GPUs)
    swapped = lines[:a] + lines[b:b + 800] + lines[a + 800:b] + lines[a:a + 800] + lines[b + 800:]
    f = tmp_path / "swapped.csv"
    f.write_text("\n".join(swapped) + "\n")
    with pytest.raises(InputError) as e:
        read_nvidia_smi_csv(f, strict=False)
    assert e.value.field == "timestamp" and "time goes back" in e.value.message
    assert f"at line {a + 800 + 1}" in e.value.message
    assert len(read_nvidia_smi_csv(src, strict=False).lines) > 40000        # the real trace reads


def test_a_row_with_a_column_fewer_than_its_header_is_named(tmp_path):
    """A capture whose rows lost a column (the out-of-place algbw) still has 12 fields, a count nccl-tests
    prints without a root column: the table's header names 13, so each row is refused by name instead of
    its busbw being read as the algbw and its #wrong as the busbw."""
    lines = (REPO / "hardware" / "profiles" / "data" / "aws_p5_2node_16xH100_allreduce.txt").read_text().splitlines()
    out = []
    for ln in lines:
        f = ln.split()
        if len(f) == 14 and f[0] == "0:" and f[1].isdigit():
            del f[7]                                         # '0:' size count type redop root time [algbw] ...
            ln = " ".join(f)
        out.append(ln)
    p = tmp_path / "cut.txt"
    p.write_text("\n".join(out) + "\n")
    t = read_nccl_tests(p, strict=False)
    assert not t.select() and t.errors
    assert all("12 fields, but the table's header names 13 columns" in e for e in t.errors[:32])


def test_rows_without_a_power_reading_are_counted(tmp_path):
    """nvidia-smi prints [N/A] where it has no reading: such rows leave the power figures, counted in one
    line naming the first, not silently."""
    from costmodel.readers.power_trace import power_trace_from_nvidia_smi_csv
    src = REPO / "hardware" / "profiles" / "data" / "h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv"
    lines = src.read_text().splitlines()
    data = [i for i, ln in enumerate(lines) if ln[:1].isdigit()]
    for i in data[100:103]:
        cells = lines[i].split(",")
        cells[1] = " [N/A]"                               # timestamp, power.draw [W], ...
        lines[i] = ",".join(cells)
    f = tmp_path / "na.csv"
    f.write_text("\n".join(lines) + "\n")
    t = power_trace_from_nvidia_smi_csv(f, strict=False)
    said = [e for e in t.errors if "without a power reading" in e]
    assert said == [f"{f}:{data[100] + 1}: 3 row(s) without a power reading (N/A), the first here: left out of "
                    "the power figures"]
    assert int((~np.isfinite(t.power_w)).sum()) == 3


def test_every_monitor_format_names_the_vendor_its_tool_reads():
    """A GPU monitor capture is checked against the cluster's GPU vendor by its Format's vendor: a new
    monitor format without one would skip that check silently."""
    from costmodel.readers.registry import REGISTRY
    monitors = {n: f.vendor for n, f in REGISTRY.items() if f.trace_is_data}
    assert monitors == {"nvidia-smi-csv": "nvidia", "nvidia-smi-dmon": "nvidia", "dcgmi-dmon": "nvidia",
                        "nvidia-smi-q": "nvidia", "rocm-smi": "amd", "amd-smi": "amd"}


def test_an_nccl_tests_table_whose_units_line_says_ms_is_read_in_ms(tmp_path):
    """The AWS p5 capture with its time columns rewritten in milliseconds and its units line saying
    (ms): read in the unit its header gives, the same times as the original in us (a header saying
    (us) over such times stays refused: the times disagree with their algbw)."""
    import re
    from costmodel.readers.nccl_tests import read_nccl_tests
    from costmodel.specs import hardware_dir
    src = hardware_dir() / "profiles" / "data" / "aws_p5_2node_16xH100_allreduce.txt"
    lines = []
    for line in src.read_text().splitlines():
        c = line.split()
        if len(c) >= 13 and re.fullmatch(r"\d+", c[1]) and c[0] == "0:":
            for i in (6, 10):
                c[i] = f"{float(c[i]) / 1e3:.6f}"
            line = " ".join(c)
        elif line.lstrip("0: ").startswith("#") and "(us)" in line:
            line = line.replace("(us)", "(ms)")
        lines.append(line)
    ms = tmp_path / "ms.txt"
    ms.write_text("\n".join(lines) + "\n")
    a, b = read_nccl_tests(src, strict=False), read_nccl_tests(ms, strict=False)
    assert len(b.rows) == len(a.rows) > 0
    assert [r.time_us for r in b.rows] == pytest.approx([r.time_us for r in a.rows], rel=1e-4)


def test_an_nccl_capture_cut_before_its_max_bytes_is_noted(tmp_path):
    """A capture cut at a line break (no trailer, no broken row) had been fitted without a word; its
    sizes stopping far below the maxBytes its parameter line asks for say it was cut.  The whole
    capture draws no such note."""
    from costmodel.readers.registry import _nccl_notes
    full = D / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt"
    assert _nccl_notes(full, read_nccl_tests(full)) == []
    src = full.read_text().splitlines()
    rows = [k for k, ln in enumerate(src) if ln.split() and ln.split()[0].isdigit() and len(ln.split()) > 8]
    cut = tmp_path / "cut.txt"
    cut.write_text("\n".join(src[:rows[len(rows) // 2]]) + "\n")
    assert _nccl_notes(cut, read_nccl_tests(cut, strict=False)) == [
        f"{cut}: the sizes stop at 268,435,456 B of the 17,179,869,184 B its maxBytes asks for: a cut capture (no "
        "closing '# Avg bus bandwidth' line?); the larger sizes are not measured"]
