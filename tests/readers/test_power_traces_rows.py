"""nvidia-smi CSV captures without an index column: the rows of a sample are numbered by the GPUs per
node, and a capture whose timestamps group its rows otherwise says so."""
from pathlib import Path

import pytest

from costmodel.readers.registry import read_measurement

TRACE = Path(__file__).resolve().parents[2] / "hardware" / "profiles" / "data" / "h100_8gpu_gpt8B_ddp_training_power_trace_100ms.csv"


def test_a_four_gpu_capture_numbered_as_eight_is_flagged(tmp_path):
    """Keep the first 4 rows of each 8-GPU sample of the H100 trace: read with 8 GPUs per node, the
    note names the 4 the timestamps show; read with 4, no such note."""
    lines = TRACE.read_text().splitlines()
    head = [ln for ln in lines if not ln[:4].isdigit()]
    body = [ln for ln in lines if ln[:4].isdigit()]
    four = [ln for i, ln in enumerate(body[:8 * 400]) if i % 8 < 4]
    f = tmp_path / "four.csv"
    f.write_text("\n".join(head + four) + "\n")
    _, _, notes = read_measurement(f, 8)
    assert any("group the rows 4 at a time, not 8" in n for n in notes)
    _, _, notes = read_measurement(f, 4)
    assert not any("at a time" in n for n in notes)


@pytest.mark.parametrize("name, row, old, new, fmt", [
    ("dcgmi_dmon_rtx2080ti_power_temp.txt", 4, "20.891  ", "N/A     ", "dcgmi-dmon"),
    ("nvidia_smi_dmon_4gpu_pucvmet.txt", 3, "    0   111 ", "    0     - ", "nvidia-smi-dmon")])
def test_dmon_and_dcgmi_rows_without_power_are_counted_not_dropped_silently(tmp_path, name, row, old, new, fmt):
    """A dcgmi or dmon row whose power reads N/A (or '-') is left out of the power figures with a note
    naming its line and the count, as the nvidia-smi CSV reader does."""
    lines = (Path(__file__).resolve().parents[1] / "data" / "readers" / name).read_text().splitlines()
    lines[row] = lines[row].replace(old, new, 1)
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    got, trace, warns = read_measurement(p)
    assert got == fmt and any(f"{p}:{row + 1}: 1 row(s) without a power reading" in w for w in warns)
