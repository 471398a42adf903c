"""The thermal fit of a monitor trace (nvidia-smi --query-gpu at 1 Hz) whose GPUs warm up under a
job and cool down after it: the first-order RC the model uses (costmodel/thermal.py), fitted to
the whole trace, gives back the R_th and tau the trace was drawn from."""
import subprocess
import sys

import numpy as np
import pytest
import yaml

from costmodel.fit.thermal import rc_response


def run(*args):
    return subprocess.run([sys.executable, "-m", "costmodel.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=300)

R_TH = {0: 0.055, 1: 0.075}      # C/W, the two GPUs' thermal resistances
TAU_S, INLET_C = 120.0, 30.0


def _trace(path, fahrenheit=False, idle_mhz=345):
    t = np.arange(900.0)
    P = np.where((t >= 100) & (t < 800), 590.0, 70.0)      # idle, a 700 s job, cool-down
    lines = ["timestamp, index, name, power.draw [W], temperature.gpu, clocks.sm [MHz], utilization.gpu [%]"]
    temps = {g: rc_response(t, P, INLET_C + r * 70.0, INLET_C, r, TAU_S) for g, r in R_TH.items()}
    if fahrenheit:
        temps = {g: 32.0 + 1.8 * T for g, T in temps.items()}
    for i, ti in enumerate(t):
        for g in R_TH:
            # nvidia-smi prints whole degrees
            lines.append(f"2026/11/03 12:{int(ti) // 60:02d}:{int(ti) % 60:02d}.000, {g}, NVIDIA H100 80GB HBM3, "
                         f"{P[i]:.2f} W, {round(temps[g][i])}, {1980 if P[i] > 100 else idle_mhz} MHz, "
                         f"{100 if P[i] > 100 else 0} %")
    path.write_text("\n".join(lines) + "\n")


def test_the_rc_fit_of_a_warm_up_and_cool_down_trace_gives_back_r_th_and_tau(tmp_path):
    _trace(tmp_path / "smi.csv")
    r = run("calibrate", "fit", tmp_path / "smi.csv", "-o", tmp_path / "p.yaml")
    assert r.returncode == 0, r.stderr
    th = yaml.safe_load((tmp_path / "p.yaml").read_text())["thermal"]
    per = {x["gpu"]: x for x in th["fit"]["per_gpu"]}
    for g, r_th in R_TH.items():
        assert per[g]["r_th_c_per_w"] == pytest.approx(r_th, rel=0.03)
        assert per[g]["tau_s"] == pytest.approx(TAU_S, rel=0.05) and per[g]["r2"] > 0.99
    assert th["r_th_c_per_w"] == pytest.approx(np.median(list(R_TH.values())), rel=0.03)
    assert th["tau_s"] == pytest.approx(TAU_S, rel=0.05)
    # what a slope of temperature on power over the same samples reads: well below R_th
    t = np.arange(900.0)
    P = np.where((t >= 100) & (t < 800), 590.0, 70.0)
    T = rc_response(t, P, INLET_C + 0.055 * 70.0, INLET_C, 0.055, TAU_S)
    assert np.polyfit(P, T, 1)[0] < 0.8 * 0.055


def test_a_temperature_column_in_fahrenheit_is_refused_whole(tmp_path):
    """The same trace in degrees F: the hotter GPU's loaded samples (up to 165 F) lie above 150, every
    other sample (93..145 F) below, where read as C it would have been fitted. The fit stops with one
    line naming the column, nothing written."""
    _trace(tmp_path / "smi.csv", fahrenheit=True)
    r = run("calibrate", "fit", tmp_path / "smi.csv", "-o", tmp_path / "p.yaml")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "temp_c readings lie outside -40..150 C: the column is not in degrees C" in r.stderr
    assert not (tmp_path / "p.yaml").exists()


def test_idle_samples_at_the_lowest_clock_are_not_the_models_idle_power(tmp_path):
    """The trace's 0 % samples at 345 MHz, the H100's lowest clock, are GPUs no process holds (70 W):
    idle_w (a GPU waiting inside a job, 121.8 W in the built-in fit) is kept from the base and the fit
    says why; the same samples with the clocks up (a GPU a job holds between kernels) are fitted."""
    from costmodel.specs import load_profile
    _trace(tmp_path / "smi.csv")
    r = run("calibrate", "fit", tmp_path / "smi.csv", "-o", tmp_path / "p.yaml")
    assert r.returncode == 0, r.stderr
    assert "idle sample(s) are at the lowest SM clock (345 MHz)" in " ".join((r.stdout + r.stderr).split())
    power = yaml.safe_load((tmp_path / "p.yaml").read_text())["power"]
    assert power["idle_w"] == pytest.approx(load_profile("h100-sxm-80gb").power.idle_w)
    _trace(tmp_path / "smi.csv", idle_mhz=1980)
    r = run("calibrate", "fit", tmp_path / "smi.csv", "-o", tmp_path / "q.yaml")
    assert r.returncode == 0, r.stderr
    assert yaml.safe_load((tmp_path / "q.yaml").read_text())["power"]["idle_w"] == pytest.approx(70.0)
