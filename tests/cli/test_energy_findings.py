"""The energy and thermal answers as a user checks them: the cause a slow step is put down to, a
relative excess of a temperature, --top where one layout is answered, a plot path that cannot be
written."""
import json

import pytest

from costmodel.errors import InfeasibleError
from costmodel.report import power_limit_line

from cli_run import one_line, run


def test_a_step_held_by_heat_is_said_to_be_thermally_throttled():
    r = run("predict", "--model", "llama3-70b", "--cluster", "paper-h200", "--tp", "2", "--pp", "4", "--cp", "2",
            "--vp", "2", "--inlet-temp-c", "58")
    assert r.returncode == 0, r.stderr
    # the slowest throttled GPU, the last stage's (its logits draw the most), which the step's clock is
    assert "thermally throttled: GPU 3:4 at 89 C sets its stage's pace" in " ".join(r.stdout.split())
    # 58 C air is a scenario past ASHRAE's A4 class (45 C): said, not refused
    assert "a 58 C inlet is outside the 5-45 C air-cooled equipment is rated for" in " ".join(r.stderr.split())
    rec = dict(step_time_s=2.0, uncapped_step_time_s=1.5, caps_w=[700.0], sm_clock_mhz=1600.0, compute_power_w=690.0,
               per_gpu=[dict(node=0, slot=1, temp_c=70.0, throttled=False)])
    assert power_limit_line(rec, 1980.0).startswith("power-limited: under the 700 W limit")


def test_an_infeasible_temperature_is_exceeded_in_c_not_by_a_fraction():
    e = InfeasibleError("temperature+node_power", "m", {"temperature": 42.8, "node_power": 6000.0},
                        {"temperature": 11.8 / 31.0, "node_power": 0.2})
    rec = e.record()
    assert rec["excess"]["temperature"] == pytest.approx(11.8) and rec["excess"]["node_power"] == pytest.approx(1.0)
    assert rec["relative"] == {"node_power": 0.2} and rec["units"] == {"temperature": "C", "node_power": "kW"}
    # the float arithmetic's last bits are not printed (0.6000000000000001)
    assert InfeasibleError("node_power", "m", {"node_power": 4000.0}, {"node_power": 0.1 + 0.5}).record()[
        "relative"] == {"node_power": 0.6}


def test_top_is_refused_where_the_energy_ilp_answers_one_layout():
    one_line(run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--objective", "edp", "--top", "2"),
             "--top", "answers one layout")


def test_a_plot_into_a_folder_that_takes_no_file_is_refused_before_the_solve():
    one_line(run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--pareto", "--plot", "/proc/front.png"),
             "--plot", "cannot write /proc/front.png")
    # a trailing slash names a folder: the PNG had been written beside it as sub/x.png, said as 'wrote sub/x.png/'
    one_line(run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--pareto", "--plot", "sub/x.png/"),
             "--plot: 'sub/x.png/': name the PNG file to write")


def test_the_node_budgets_even_share_is_a_cap_level():
    """8 H100 under a 3.9 kW GPU budget: 487 W each, between the default grid's 450 and 512 W, is a
    level of its own (a budget a grid step above it would leave part of unused)."""
    import json
    r = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "32", "--seq-len",
            "4096", "--objective", "energy", "--node-power-kw", "3.9", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["cap_levels_w"] == [200.0, 262.0, 325.0, 388.0, 450.0, 487.0, 512.0, 575.0, 638.0, 700.0]


def test_a_node_budget_too_small_is_infeasible_and_one_in_watts_is_refused():
    """--node-power-kw 1.5 on 8 H200 (200 W each at their lowest limit: 1.6 kW) had exited 2 as bad input,
    with no JSON; a limit no layout meets is an answer (exit 3, the binding limit and by how much).  4000
    (watts meant) had been read as a 4 MW budget binding nothing, silently."""
    import json
    base = ("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--objective", "energy")
    r = run(*base, "--node-power-kw", "1.5", "--json")
    rec = json.loads(r.stdout)
    assert r.returncode == 3 and rec["binding"] == "node_power" and rec["required"]["node_power"] == pytest.approx(1.6)
    assert rec["excess"]["node_power"] == pytest.approx(0.1) and rec["units"] == {"node_power": "kW"}
    r = run(*base, "--node-power-kw", "4000")
    one_line(r, "--node-power-kw", "the flag takes kW (did you give watts?)")


def test_a_node_power_budget_is_kept_by_the_caps_set():
    """--node-power-kw is an electrical limit: the caps recommend prints keep every node's GPUs under it
    even while every one of them bursts to its cap (the ILP had checked the step-averaged busy power and
    printed 512 W caps on 8 GPUs of a 4 kW budget)."""
    import json
    r = run("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--node-power-kw", "4", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    per_node = {}
    for st in d["stages"]:
        for n in st["nodes"]:
            per_node[n] = per_node.get(n, 0.0) + st["cap_w"] * len(st["slots"])
    assert per_node and max(per_node.values()) <= 4000.0 * (1 + 1e-6)
    assert max(st["cap_w"] for st in d["stages"]) == 500.0


def test_the_pareto_plot_says_what_its_energy_counts(tmp_path, monkeypatch):
    """The table says whether the energy is the GPUs' only or the nodes' too; the plot's axis had said
    'energy per step (kJ)' either way."""
    pytest.importorskip("matplotlib")
    from types import SimpleNamespace
    from matplotlib.axes import Axes
    from costmodel.report import plot_pareto
    labels = []
    monkeypatch.setattr(Axes, "set_ylabel", lambda self, text, *a, **k: labels.append(text))
    front = [(1.0, 2000.0, SimpleNamespace()), (2.0, 1000.0, SimpleNamespace())]
    plot_pareto(front, str(tmp_path / "a.png"), "t", node_power=True)
    plot_pareto(front, str(tmp_path / "b.png"), "t")
    assert labels == ["energy per step (kJ, GPUs and nodes)", "energy per step (kJ, GPUs only)"]


def test_a_pareto_plot_failing_after_the_solve_loses_none_of_the_answer(tmp_path, monkeypatch):
    """The plot is written last: a write that fails after the checks (a full disk) leaves the launch
    arguments, caps and predict command printed (it had stopped before them)."""
    from typer.testing import CliRunner
    from costmodel import report
    from costmodel.cli import app
    from costmodel.errors import InputError

    def full(*a, **k):
        raise InputError("--plot", "", "cannot write it: No space left on device")
    monkeypatch.setattr(report, "plot_pareto", full)
    r = CliRunner().invoke(app, ["recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs",
                                 "16", "--pareto", "--plot", str(tmp_path / "front.png")])
    assert "No space left" in str(r.exception)
    assert "nvidia-smi -i 7 -pl 700" in r.stdout and "costmodel predict --model llama3-8b" in r.stdout
    r = CliRunner().invoke(app, ["recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs",
                                 "16", "--pareto", "--plot", str(tmp_path / "front.png"), "--json"])
    rec = json.loads(r.stdout)
    assert "No space left" in str(r.exception) and rec["feasible"] is True and len(rec["pareto"]) >= 2


def test_the_temperature_a_diagnosis_asks_for_is_one_that_answers():
    """At a 40 C limit the diagnosis had asked for 42.8 C while 41.5 C already had an answer: it saw only
    the layouts the widening reached (those some cap level could keep under the limit), not the coolest.
    The limit it names now answers, and one a tenth below it does not."""
    import re
    base = ("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--objective", "energy")
    r = run(*base, "--max-temp-c", "40")
    assert r.returncode == 3, r.stderr
    need = float(re.search(r"max temperature 40\.0 C must rise to ([\d.]+) C", r.stderr).group(1))
    assert 40.0 < need < 41.5
    assert run(*base, "--max-temp-c", f"{need:.1f}").returncode == 0
    assert run(*base, "--max-temp-c", f"{need - 0.1:.1f}").returncode == 3


def test_the_power_flags_a_profile_cannot_price_are_the_ones_given(tmp_path):
    """The refusal had named all five power flags whatever was given."""
    import yaml
    from cli_run import REPO
    d = yaml.safe_load((REPO / "hardware" / "profiles" / "h100-sxm-80gb.yaml").read_text())
    d.pop("power")
    prof = tmp_path / "nopower.yaml"
    prof.write_text(yaml.safe_dump(d))
    base = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "1", "--pp", "1", "--profile", prof)
    one_line(run(*base, "--power-cap-w", "500"), "--power-cap-w: needs a power and thermal model; missing:")
    one_line(run(*base, "--power-cap-w", "500", "--inlet-temp-c", "30"), "--power-cap-w/--inlet-temp-c: needs a power")


def test_a_derate_above_the_clock_the_power_limit_leaves_is_said_not_to_bind():
    """--derate 0:0=1980 on a GPU the 700 W limit holds at 1831 MHz had been reported as setting its stage's
    pace; the power limit does, and the line says the derate does not bind."""
    rec = dict(step_time_s=27.49, uncapped_step_time_s=25.93, caps_w=[700.0], sm_clock_mhz=1831.0,
               compute_power_w=700.0,
               per_gpu=[dict(node=0, slot=0, temp_c=62.0, throttled=False, sm_clock_mhz=1831.0, derated_mhz=1980.0)])
    line = power_limit_line(rec, 1980.0)
    assert line.startswith("power-limited: under the 700 W limit")
    assert line.endswith("; the derate of GPU 0:0 to 1980 MHz does not bind (it runs at 1831 MHz)")
    rec["per_gpu"][0].update(sm_clock_mhz=1500.0, derated_mhz=1500.0)
    assert power_limit_line(rec, 1980.0).startswith("derated: GPU 0:0 at 1500 MHz sets its stage's pace")


def test_the_inlet_rating_note_follows_the_cooling_type():
    """Air inlets are rated to ASHRAE A4's 45 C, water loops to 60 C; the cluster's own inlet is judged too."""
    from costmodel.cli.notes import inlet_rating_note
    from costmodel.specs import load_cluster
    air, water = load_cluster("dgx-h100"), load_cluster("gb200-nvl72")
    assert inlet_rating_note(air, None) is None and inlet_rating_note(air, 45.0) is None
    assert "outside the 5-45 C air-cooled" in inlet_rating_note(air, 50.0)
    assert "outside the 5-45 C air-cooled" in inlet_rating_note(air, 0.0)
    assert inlet_rating_note(water, 50.0) is None and inlet_rating_note(water, 2.0) is None
    assert "water classes W17-W+" in inlet_rating_note(water, -5.0)


def test_a_thermally_throttled_winner_points_to_the_ilp_that_caps_below_the_limit():
    """Llama 3 70B on paper-h200 at a 55 C inlet: the time ranking's winner throttles (29.68 s); the ILP under
    the slowdown temperature as its limit caps stages instead and is faster (29.17 s): the ranking says so."""
    base = ("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--inlet-temp-c", "55")
    r = run(*base)
    text = " ".join(r.stdout.split())
    assert r.returncode == 0 and "throttle the winner's clocks: 29.678 s per step" in text, r.stderr
    assert "--max-temp-c 89 has the ILP choose per-stage caps that keep every GPU under it" in text
    ilp = json.loads(run(*base, "--max-temp-c", "89", "--json").stdout)
    assert ilp["step_time_s"] < 29.678 * 0.99
