"""Clock-event (throttle) reasons of nvidia-smi --query-gpu captures, in both namings."""
from costmodel.compare import throttle_warnings
from costmodel.trace_window import trace_metrics
from costmodel.readers.clock_events import REASON_BITS, reasons_per_row, throttle_shares
from costmodel.readers.nvidia_smi import read_nvidia_smi_csv
from costmodel.readers.power_trace import power_trace_from_nvidia_smi_csv

# synthetic capture in the documented format (nvidia-smi --help-query-gpu): 2 GPUs x 4 samples; GPU 1
# is power-capped (0x4) in every sample and in HW thermal slowdown (0x40 | 0x8) in one
CSV = """timestamp, index, power.draw [W], clocks.sm [MHz], clocks_event_reasons.active, clocks_event_reasons.hw_slowdown
2026/01/01 00:00:00.000, 0, 650.00 W, 1980 MHz, 0x0000000000000000, Not Active
2026/01/01 00:00:00.000, 1, 700.00 W, 1700 MHz, 0x0000000000000004, Not Active
2026/01/01 00:00:01.000, 0, 640.00 W, 1980 MHz, 0x0000000000000000, Not Active
2026/01/01 00:00:01.000, 1, 700.00 W, 1650 MHz, 0x0000000000000004, Not Active
2026/01/01 00:00:02.000, 0, 10.00 W, 345 MHz, 0x0000000000000001, Not Active
2026/01/01 00:00:02.000, 1, 690.00 W, 990 MHz, 0x000000000000004C, Active
2026/01/01 00:00:03.000, 0, 655.00 W, 1980 MHz, 0x0000000000000000, Not Active
2026/01/01 00:00:03.000, 1, 700.00 W, 1700 MHz, 0x0000000000000004, Not Active
"""


def test_mask_and_fields_name_the_reasons_and_compare_names_the_throttled_gpu(tmp_path):
    f = tmp_path / "smi.csv"
    f.write_text(CSV)
    smi = read_nvidia_smi_csv(f)
    rows = reasons_per_row(smi)
    assert rows[5] == {"SW power cap", "HW slowdown", "HW thermal slowdown"}
    assert rows[4] == {"GPU idle"} and rows[0] == frozenset()
    trace = power_trace_from_nvidia_smi_csv(smi)
    agg, per_gpu = trace_metrics(trace, -1.0, 1e12)
    g1 = next(r for r in per_gpu if r["gpu"] == 1)
    g0 = next(r for r in per_gpu if r["gpu"] == 0)
    assert g1["throttle"] == {"SW power cap": 1.0, "HW slowdown": 0.25, "HW thermal slowdown": 0.25}
    assert g0["throttle"] == {}          # idle is not a throttle
    (w,) = throttle_warnings(per_gpu)
    assert w == ("GPU 1 throttled in the training window: SW power cap 100%, HW slowdown 25%, HW thermal "
                 "slowdown 25% of its samples")


def test_the_older_throttle_naming_and_captures_without_the_field(tmp_path):
    f = tmp_path / "old.csv"
    f.write_text("index, power.draw [W], clocks_throttle_reasons.sw_thermal_slowdown\n0, 300.00 W, Active\n"
                 "0, 310.00 W, Not Active\n")
    assert reasons_per_row(read_nvidia_smi_csv(f)) == [{"SW thermal slowdown"}, frozenset()]
    assert throttle_shares([{"SW thermal slowdown"}, frozenset()]) == {"SW thermal slowdown": 0.5}
    g = tmp_path / "plain.csv"
    g.write_text("index, power.draw [W]\n0, 300.00 W\n")
    assert reasons_per_row(read_nvidia_smi_csv(g)) is None
    assert REASON_BITS[0x40] == "HW thermal slowdown" and REASON_BITS[0x80] == "HW power brake slowdown"


def test_an_unreadable_mask_is_said_by_line_not_read_as_no_throttle(tmp_path):
    """A clocks_event_reasons.active cell that is no hex mask (a spreadsheet's 'garbage') had left every
    GPU 'never throttled'; the trace's errors now name its line and count its rows; [N/A] stays missing."""
    f = tmp_path / "bad.csv"
    lines = CSV.splitlines()
    lines[2] = lines[2].replace("0x0000000000000004", "garbage")
    lines[4] = lines[4].replace("0x0000000000000004", "garbage")
    lines[8] = lines[8].replace("0x0000000000000004", "[N/A]")
    f.write_text("\n".join(lines) + "\n")
    trace = power_trace_from_nvidia_smi_csv(read_nvidia_smi_csv(f))
    (err,) = [e for e in trace.errors if "clock-event" in e]
    assert err.startswith(f"{f}:3: clocks_event_reasons.active: 'garbage' is not a clock-event bit mask")
    assert "2 row(s) like it" in err
    assert trace.clock_events[5] == {"SW power cap", "HW slowdown", "HW thermal slowdown"}
