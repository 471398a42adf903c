"""A file saved with a UTF-8 byte-order mark (Windows editors, spreadsheets' "CSV UTF-8") reads as the
same file without it: measurements, training logs and model configs alike."""
import json
from pathlib import Path

import pytest

from costmodel.readers.registry import read_measurement
from costmodel.readers.training_logs import read_training_log
from costmodel.specs import load_model

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"
BOM = b"\xef\xbb\xbf"


def _with_bom(src: Path, tmp_path) -> Path:
    f = tmp_path / src.name
    f.write_bytes(BOM + src.read_bytes())
    return f


@pytest.mark.parametrize("name", ["nvidia_smi_csv_pstate_power_clocks.csv", "dcgmi_dmon_rtx2080ti_power_temp.txt",
                                  "nccl_tests_oci_a100_16ranks_2nodes.txt", "nvidia_smi_dmon_4gpu_pucvmet.txt"])
def test_measurements_read_the_same_with_a_byte_order_mark(tmp_path, name):
    src = DATA / "readers" / name
    plain, marked = read_measurement(src), read_measurement(_with_bom(src, tmp_path))
    assert marked.format == plain.format
    assert repr(marked.data).replace(str(tmp_path), "") == repr(plain.data).replace(str(src.parent), "")


def test_a_log_and_a_config_read_the_same_with_a_byte_order_mark(tmp_path):
    src = DATA / "logs" / "megatron_lm_issue756_turn1_mixtral8x7b_16xH100_tp2_ep8.log"
    a, b = read_training_log(src), read_training_log(_with_bom(src, tmp_path))
    assert a.layout() == b.layout() and list(a.iterations.step_time_s) == list(b.iterations.step_time_s)
    cfg = REPO / "costmodel" / "catalog" / "mixtral-8x7b.json"
    m = load_model(str(_with_bom(cfg, tmp_path)))
    assert m.params() == load_model("mixtral-8x7b").params() and json.loads(cfg.read_text())["_name"] == "mixtral-8x7b"
