"""A battery over file contents: real inputs of every kind (captures, traces, logs, model configs,
run configurations, profiles, cluster files, validate CSVs), truncated at any byte, with lines
dropped or duplicated, cells replaced by odd numbers or bytes flipped. Each is read through the
function the CLI reads it with; the only exception allowed out is the library's own (which the CLI
prints as one line with exit 2), never a Python error that would reach the user as a traceback
(hypothesis)."""
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from costmodel.errors import CostmodelError

REPO = Path(__file__).resolve().parents[2]
D = REPO / "tests" / "data"
ODD = ["nan", "NaN", "inf", "-inf", "-1", "0", "1e308", "99999999999999999999999", "abc", "", "N/A", "\x00", "é",
       "[Not Supported]", "1,5", "--"]
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                          HealthCheck.function_scoped_fixture])


def _read_measurement(p):
    from costmodel.readers.registry import read_measurement
    read_measurement(p)


def _read_log(p):
    from costmodel.readers.training_logs import read_training_log
    read_training_log(p, strict=False)


def _load_model(p):
    from costmodel.specs import load_model
    load_model(str(p))


def _run_config(p):
    from costmodel.run_config import read_run_config
    read_run_config(p)


def _profile(p):
    from costmodel.specs import load_profile
    load_profile(str(p))


def _cluster(p):
    from costmodel.specs import load_cluster
    load_cluster(str(p))


def _validate(p):
    from costmodel.validate import read_runs_csv, validate_rows
    validate_rows(read_runs_csv(p)[:3], str(p))


CASES = [
    (D / "readers" / "nccl_tests_olivia_gh200_16ranks_4nodes.txt", _read_measurement),
    (D / "readers" / "nccl_tests_azure_ndv5_h100_16ranks_2nodes_abbrev.txt", _read_measurement),
    (D / "readers" / "nvidia_smi_csv_pstate_power_clocks.csv", _read_measurement),
    (D / "readers" / "nvidia_smi_dmon_h100_idle_load.txt", _read_measurement),
    (D / "readers" / "nvidia_smi_q_a10_driver550_clocks_event_reasons.txt", _read_measurement),
    (D / "readers" / "dcgmi_dmon_8gpu_profiling_na.txt", _read_measurement),
    (D / "readers" / "rocm_smi_mi300x_x4_concise_and_all.txt", _read_measurement),
    (D / "readers" / "amd_smi_monitor_mi300x_8gpu_rocm_blog.txt", _read_measurement),
    (D / "logs" / "megatron_core_synthetic_full_args_rank_prefixes.log", _read_log),
    (D / "logs" / "torchtitan_awsome_p5_llama3_8b_interleaved_ranks.log", _read_log),
    (D / "logs" / "nemo1_synthetic_config_and_progress_bar.log", _read_log),
    (D / "configs" / "nemo_launcher_llama3_8b.yaml", _run_config),
    (D / "configs" / "torchtitan_llama3_8b.toml", _run_config),
    (D / "configs" / "megatron_bridge_llama3_8b_sft_gb200_fp8_mx_v1.yaml", _run_config),
    (REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml", _profile),
    (REPO / "hardware" / "clusters" / "dgx-h100.yaml", _cluster),
    (REPO / "benchmarks" / "data" / "dev_set.csv", _validate),
]
MODELS = sorted((D / "models").glob("*.json"))[:3]
CASES += [(m, _load_model) for m in MODELS]


def _mutate(text: str, data) -> str:
    lines = text.splitlines(keepends=True)
    kind = data.draw(st.sampled_from(["truncate", "drop", "duplicate", "cell", "flip"]))
    if kind == "truncate":
        return text[:data.draw(st.integers(0, len(text)))]
    i = data.draw(st.integers(0, max(len(lines) - 1, 0)))
    if kind == "drop":
        return "".join(lines[:i] + lines[i + 1:])
    if kind == "duplicate":
        return "".join(lines[:i + 1] + lines[i:])
    if kind == "cell":
        words = lines[i].split(" ") if lines else [""]
        j = data.draw(st.integers(0, len(words) - 1))
        words[j] = data.draw(st.sampled_from(ODD)) + ("\n" if words[j].endswith("\n") else "")
        return "".join(lines[:i] + [" ".join(words)] + lines[i + 1:])
    k = data.draw(st.integers(0, max(len(text) - 1, 0)))
    return text[:k] + data.draw(st.sampled_from(["\x00", "\ufffd", "#", ":", "|", "\t", "'", '"', "{", "]"])) + text[k + 1:]


@pytest.mark.parametrize("src, read", CASES, ids=[c[0].name for c in CASES])
@SETTINGS
@given(data=st.data())
def test_a_damaged_file_is_read_or_refused_by_the_library_never_a_python_error(tmp_path, src, read, data):
    text = _mutate(src.read_text(encoding="utf-8"), data)
    p = tmp_path / src.name
    p.write_text(text, encoding="utf-8", errors="surrogateescape")
    try:
        read(p)
    except CostmodelError as e:
        assert str(e).strip(), "an empty message"


def _edit(src: Path, tmp_path: Path, old: str, new: str, count: int = 1) -> Path:
    text = src.read_text(encoding="utf-8")
    assert old in text
    p = tmp_path / src.name
    p.write_text(text.replace(old, new, count), encoding="utf-8")
    return p


def test_what_the_battery_found_stays_fixed(tmp_path):
    """The four crashes larger runs of the battery found, as fixed cases."""
    from costmodel.errors import InputError
    from costmodel.readers.nvidia_smi import read_nvidia_smi_csv, read_nvidia_smi_dmon
    prof = REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml"
    text = prof.read_text()
    i = text.index("median_rel_err:")
    p = tmp_path / "bad.yaml"
    p.write_text(text[:i] + "median_rel_err: x" + text[text.index("\n", i):])
    with pytest.raises(InputError, match=r"fit\.median_rel_err: must be a number in 0 .. 10 \(a relative error\), got 'x'"):
        _profile(p)
    csv = _edit(D / "readers" / "nvidia_smi_csv_pstate_power_clocks.csv", tmp_path, "\n0, 56, 26 %", "\n[N/A], 56, 26 %")
    t = read_nvidia_smi_csv(csv, strict=False)
    assert len(t) == 12 and t.errors == [f"{csv}:3: index is not a GPU number"]
    dmon = _edit(D / "readers" / "nvidia_smi_dmon_h100_idle_load.txt", tmp_path, "\n    0     69     41     47",
                 "\n    99999999999999999999999     69     41     47")
    d = read_nvidia_smi_dmon(dmon, strict=False)
    assert any("is not a GPU index" in e for e in d.errors)
    runs = _edit(REPO / "benchmarks" / "data" / "dev_set.csv", tmp_path, ",model,", ",m\x00del,")
    with pytest.raises(InputError, match=r"header: unknown column\(s\) \['m\\x00del'\]"):     # not left to a default
        _validate(runs)
