"""``python -m costmodel.calibration.run``: the microbenchmark suite, run for real on CPU (gloo, no NVML).

Two processes under ``torch.distributed.run`` (the torchrun entry point), one process without a
launcher, the help text, and the pure parts (Slurm environment, group plan, GEMM shapes, NVML
readings and the power-limit sweep against a fake NVML).  No GPU needed.
"""
import json
import os
import shutil
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

pytest.importorskip("torch")

from costmodel.readers.suite_jsonl import KINDS, SUITE_VERSION, read_suite_jsonl  # noqa: E402
from costmodel.collective import COLLECTIVES, busbw_factor  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
LAUNCH_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT",
               "SLURM_PROCID", "SLURM_NTASKS", "SLURM_STEP_NUM_TASKS", "SLURM_LOCALID", "SLURM_JOB_NODELIST",
               "SLURM_STEP_NODELIST", "TORCHELASTIC_RUN_ID")


def _env():
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = "1"
    return env


def torchrun(out, *args, nproc=2, timeout=120):
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
           "-m", "costmodel.calibration.run", "--out", str(out), *args]
    t0 = time.time()
    p = subprocess.run(cmd, cwd=REPO, env=_env(), capture_output=True, text=True, timeout=timeout)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    return p, time.time() - t0


@pytest.fixture(scope="module")
def two_ranks(tmp_path_factory):
    out = tmp_path_factory.mktemp("suite") / "raw.jsonl"
    p, wall = torchrun(out, "--quick")
    return read_suite_jsonl(out, strict=True), out, p


# ------------------------------------------------------------------------------- 2 processes, CPU
def test_two_ranks_file_is_complete_and_valid(two_ranks):
    run, out, _ = two_ranks
    assert run.complete and not run.errors
    lines = out.read_text().splitlines()
    last = json.loads(lines[-1])
    assert last["kind"] == "end" and last["n_records"] == len(lines) - 1
    assert all(json.loads(ln)["version"] == SUITE_VERSION for ln in lines)
    assert set(KINDS) >= {json.loads(ln)["kind"] for ln in lines}


def test_two_ranks_provenance_per_rank(two_ranks):
    prov = two_ranks[0]["provenance"]
    assert sorted(p["rank"] for p in prov) == [0, 1]
    for p in prov:
        assert p["world_size"] == 2 and p["backend"] == "gloo" and p["device"] == "cpu"
        assert p["n_nodes"] == 1 and p["node_rank"] == 0 and p["local_rank"] == p["rank"]
        assert p["monitor"] is None and p["gpu_name"] is None and p["gpu_id"] is None
        assert p["torch_version"] and p["python_version"] and p["started_unix"] > 1.6e9
        assert p["args"]["quick"] is True and p["args"]["benchmarks"]


def test_two_ranks_collectives_follow_nccl_tests_conventions(two_ranks):
    recs = two_ranks[0]["collective"]
    assert {r["collective"] for r in recs if r["group_size"] == 2} == set(COLLECTIVES)
    for r in recs:
        assert r["scope"] == "intra_node" and r["group_size"] == 2 and r["n_nodes"] == 1
        assert r["rank"] == 0  # written by the group's first rank
        assert r["dtype"] == "fp32" and r["time_s"] > 0 and r["iters"] == 3
        assert r["algbw_bytes_per_s"] == r["size_bytes"] / r["time_s"]
        assert r["busbw_bytes_per_s"] == r["algbw_bytes_per_s"] * float(busbw_factor(r["collective"], r["group_size"]))
    sizes = sorted({r["size_bytes"] for r in recs if r["collective"] == "all_reduce"})
    assert sizes == [1024 * 2 ** i for i in range(7)]  # --quick on CPU: 1 KiB .. 64 KiB


def test_two_ranks_gemm_and_hbm(two_ranks):
    run = two_ranks[0]
    gemm = run["gemm"]
    assert {g["rank"] for g in gemm} == {0, 1}
    assert {g["source"] for g in gemm} == {"model", "grid"}
    for g in gemm:
        assert g["dtype"] == "fp32"  # bf16 asked for, fp32 used on CPU
        assert g["flops_per_s"] == 2 * g["b"] * g["m"] * g["n"] * g["k"] / g["time_s"]
        assert g["t_start_unix"] <= g["t_end_unix"]
    labels = {lab for g in gemm for lab in g["labels"]}
    assert "llama3-8b/tp8/tok16/qkv/fwd" in labels and "llama3-8b/tp8/tok16/fc2/wgrad" in labels
    # llama3-8b at TP 8: QKV is (16, (4096 + 2*1024)/8, 4096)
    assert any((g["m"], g["n"], g["k"]) == (16, 768, 4096) for g in gemm)
    hbm = run["hbm"]
    assert {(h["rank"], h["op"]) for h in hbm} == {(r, op) for r in (0, 1) for op in ("copy", "triad")}
    for h in hbm:
        assert h["bytes"] == {"copy": 2, "triad": 3}[h["op"]] * h["array_bytes"]
        assert h["bytes_per_s"] == h["bytes"] / h["time_s"]


def test_two_ranks_phases_and_notes(two_ranks):
    run = two_ranks[0]
    phases = run["phase"]
    assert {p["name"] for p in phases} >= {"gemm", "hbm_copy", "hbm_triad", "collective_all_reduce"}
    assert all(p["t_start_unix"] <= p["t_end_unix"] and p["slot"] is None for p in phases)
    assert len([p for p in phases if p["name"] == "gemm"]) == len(run["gemm"])
    notes = run["note"]
    for rank in (0, 1):
        msgs = [n["message"] for n in notes if n["rank"] == rank]
        assert any("not sampled" in m and "NVML" in m for m in msgs), msgs
        assert any(m.startswith("overlap skipped") for m in msgs)
        assert any("fp32" in m for m in msgs)
    assert not [n for n in notes if n["level"] == "warning"], notes
    assert run["sample"] == [] and run["overlap"] == []


def test_simulated_two_nodes_give_inter_node_groups(tmp_path):
    out = tmp_path / "raw.jsonl"
    torchrun(out, "--quick", "--only", "collectives", "--simulate-nodes", "2", "--max-bytes", "4K",
             "--collectives", "all_reduce,send_recv")
    run = read_suite_jsonl(out, strict=True)
    assert run.complete
    assert {(r["scope"], r["group_size"], r["ranks_per_node"], r["n_nodes"]) for r in run["collective"]} == \
        {("inter_node", 2, 1, 2)}
    assert {n["level"] for n in run["note"] if "simulate-nodes" in n["message"]} == {"warning"}
    assert {p["node_rank"] for p in run["provenance"]} == {0, 1}


def test_wait_benchmark_makes_one_host_wait_and_one_nccl_wait_phase(tmp_path):
    """Rank 0 sleeps 0.5 s on the host while rank 1 waits in its all-reduce: the two phases cover the
    same window, rank 1's carries spin = 1 (costmodel/fit/power.py fits spin_w from it)."""
    out = tmp_path / "raw.jsonl"
    torchrun(out, "--quick", "--only", "wait", "--wait-s", "0.5")
    run = read_suite_jsonl(out, strict=True)
    ph = {p["rank"]: p for p in run["phase"]}
    assert (ph[0]["name"], ph[0]["spin"], ph[1]["name"], ph[1]["spin"]) == ("host_wait", 0.0, "nccl_wait", 1.0)
    for r in (0, 1):
        assert 0.45 <= ph[r]["t_end_unix"] - ph[r]["t_start_unix"] < 5.0
        assert ph[r]["flops_per_s"] == ph[r]["link_bytes_per_s"] == 0.0
    assert abs(ph[0]["t_end_unix"] - ph[1]["t_end_unix"]) < 1.0


# --------------------------------------------------------------------- one process, no launcher
def test_single_process_in_process(tmp_path, monkeypatch):
    from costmodel.calibration.run import main
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    out = tmp_path / "sub" / "raw.jsonl"
    assert main(["--quick", "--quiet", "--out", str(out), "--only", "gemm,hbm,collectives,overlap,sustain",
                 "--sustain-s", "0.2", "--gemm-grid", "off", "--tokens", "8"]) == 0
    run = read_suite_jsonl(out, strict=True)
    assert run.complete
    (prov,) = run["provenance"]
    assert prov["world_size"] == 1 and prov["backend"] is None and prov["args"]["launcher"] == "auto"
    msgs = [n["message"] for n in run["note"]]
    assert ("collectives skipped: one process (world size 1); launch two or more (costmodel calibrate run "
            "--nproc-per-node 2, torchrun or srun)") in msgs
    assert run["collective"] == [] and run["gemm"] and {g["source"] for g in run["gemm"]} == {"model"}
    (sus,) = [p for p in run["phase"] if p["name"] == "sustained_gemm"]
    assert sus["t_end_unix"] - sus["t_start_unix"] >= 0.2 and sus["flops_per_s"] > 0


def test_routed_expert_gemms_on_cpu(tmp_path, monkeypatch):
    """--only moe_gemm on CPU: fp32 sequential records of Qwen3-30B-A3B's 16 local experts at EP 8
    whose counts sum to about tokens x EP x top-8 x 16 / 128 (the first 16 of 128 experts), grouped mode
    skipped with its reason; a dense-only --models says there is nothing to time."""
    from costmodel.calibration.run import main
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    out = tmp_path / "moe.jsonl"
    assert main(["--quick", "--quiet", "--out", str(out), "--only", "moe_gemm", "--models", "qwen3-30b-a3b",
                 "--tokens", "64", "--moe-ep", "8,3"]) == 0
    run = read_suite_jsonl(out, strict=True)
    (r,) = run["moe_gemm"]
    assert (r["mode"], r["dtype"], r["ep"], len(r["counts"]), r["n"], r["k"]) == ("sequential", "fp32", 8, 16, 1536, 2048)
    # 64 x 8 tokens x 8 picks over 128 experts: 32 each, 512 to the first 16 on average
    assert 400 < sum(r["counts"]) < 620 and r["time_s"] > 0
    msgs = [n["message"] for n in run["note"]]
    assert "moe_gemm grouped mode skipped: grouped GEMM needs a GPU" in msgs
    assert "moe_gemm qwen3-30b-a3b EP 3 skipped: EP does not divide 128 experts" in msgs
    out2 = tmp_path / "dense.jsonl"
    assert main(["--quick", "--quiet", "--out", str(out2), "--only", "moe_gemm", "--models", "llama3-8b"]) == 0
    assert any("no MoE model in --models" in n["message"] for n in read_suite_jsonl(out2, strict=True)["note"])


def test_bad_options_exit_2(tmp_path, monkeypatch, capsys):
    from costmodel.calibration.run import main
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    assert main(["--quick", "--out", str(tmp_path / "x.jsonl"), "--only", "gemm,bogus"]) == 2
    assert "--only: unknown bogus" in capsys.readouterr().err
    assert main(["--quick", "--out", str(tmp_path / "x.jsonl"), "--models", "no-such-model"]) == 2
    assert "--models" in capsys.readouterr().err
    assert main(["--quick", "--out", str(tmp_path / "x.jsonl"), "--min-bytes", "1M", "--max-bytes", "1K"]) == 2
    assert "--min-bytes" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_help_lists_every_option():
    p = subprocess.run([sys.executable, "-m", "costmodel.calibration.run", "--help"], cwd=REPO, env=_env(),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    for opt in ("--out", "--device", "--quick", "--only", "--skip", "--launcher", "--master-port", "--models",
                "--tp", "--tokens", "--gemm-grid", "--gemm-dtypes", "--iters", "--warmup", "--hbm-bytes",
                "--collectives", "--min-bytes", "--max-bytes", "--coll-iters", "--intra-sizes", "--overlap-gemm",
                "--sample-hz", "--idle-s", "--wait-s", "--sustain-s", "--cooldown-s", "--power-limits", "--limit-s"):
        assert opt in p.stdout, opt


# ----------------------------------------------------------------------------------- pure parts
def test_slurm_environment():
    from costmodel.calibration.suite.dist import launcher_env, parse_nodelist
    assert parse_nodelist("gpu[01-03,07],login1") == ["gpu01", "gpu02", "gpu03", "gpu07", "login1"]
    assert parse_nodelist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    env = dict(SLURM_PROCID="9", SLURM_NTASKS="32", SLURM_LOCALID="1", SLURM_JOB_NODELIST="node[04-07]")
    e = launcher_env(env)
    assert (e["launcher"], e["RANK"], e["WORLD_SIZE"], e["LOCAL_RANK"], e["MASTER_PORT"]) == ("slurm", 9, 32, 1, 29500)
    if not shutil.which("scontrol"):  # else scontrol's answer for this cluster
        assert e["MASTER_ADDR"] == "node04"
    assert launcher_env(dict(env, SLURM_STEP_NUM_TASKS="16"), master_port=1234)["WORLD_SIZE"] == 16
    assert launcher_env(dict(env, SLURM_STEP_NUM_TASKS="16"), master_port=1234)["MASTER_PORT"] == 1234
    tr = dict(env, RANK="3", WORLD_SIZE="8", LOCAL_RANK="3", MASTER_ADDR="h", MASTER_PORT="29400")
    assert launcher_env(tr)["launcher"] == "env" and launcher_env(tr)["RANK"] == 3  # torchrun wins
    assert launcher_env(tr, "slurm")["RANK"] == 9
    assert launcher_env({})["WORLD_SIZE"] == 1 and launcher_env(env, "none")["WORLD_SIZE"] == 1
    with pytest.raises(ValueError, match="SLURM_PROCID"):
        launcher_env({}, "slurm")


def test_group_plan():
    from costmodel.calibration.suite.collectives import buffer_bytes, message_sizes, plan_groups
    one = plan_groups([list(range(8))])
    assert [(s.name, s.scope, s.group_size, len(s.groups)) for s in one] == \
        [("node2", "intra_node", 2, 4), ("node4", "intra_node", 4, 2), ("node8", "intra_node", 8, 1)]
    two = plan_groups([list(range(8)), list(range(8, 16))])
    names = [(s.name, s.scope, s.group_size, s.ranks_per_node, s.n_nodes, len(s.groups)) for s in two]
    assert names[-2:] == [("one_per_node", "inter_node", 2, 1, 2, 8), ("world", "inter_node", 16, 8, 2, 1)]
    assert two[-2].groups[3] == [3, 11]
    cyclic = plan_groups([[0, 2, 4, 6], [1, 3, 5, 7]], intra_sizes=(2,))  # srun --distribution=cyclic
    assert cyclic[0].groups == [[0, 2], [4, 6], [1, 3], [5, 7]]
    assert plan_groups([[0, 1, 2]])[-1].group_size == 3  # the whole odd-sized node
    assert plan_groups([[0]]) == []
    assert message_sizes(1024, 2 ** 30)[-1] == 2 ** 30 and len(message_sizes(1024, 2 ** 30)) == 21
    assert buffer_bytes("all_gather", 1024, 3, 2) == 1020 and buffer_bytes("all_reduce", 1023, 3, 2) == 1022


def test_model_gemm_shapes_match_compute_flops():
    from costmodel.calibration.suite.shapes import layer_gemms, model_shapes
    from costmodel.compute import layer_matmul_flops_per_token
    from costmodel.specs import load_model
    for name in ("llama3-8b", "llama3-70b", "mixtral-8x7b", "gpt3-175b"):
        m = load_model(name)
        for tp in (1, 2, 4, 8):
            fl = sum(2 * b * mm * n * k for g, b, mm, n, k in layer_gemms(m, 4096, tp) if g != "logits")
            assert fl * tp == pytest.approx(4096 * layer_matmul_flops_per_token(m), rel=1e-3), (name, tp)
    shapes = model_shapes([load_model("llama3-8b")], [8192], [1, 2])
    assert len({s.key for s in shapes}) == len(shapes)
    by = {lab: s.key for s in shapes for lab in s.labels}
    assert by["llama3-8b/tp1/tok8192/fc1/fwd"] == (1, 8192, 2 * 14336, 4096)  # SwiGLU: fused up + gate
    assert by["llama3-8b/tp2/tok8192/qkv/fwd"] == (1, 8192, (4096 + 2 * 1024) // 2, 4096)  # GQA
    assert by["llama3-8b/tp2/tok8192/qkv/dgrad"] == (1, 8192, 4096, 3072)
    assert by["llama3-8b/tp2/tok8192/qkv/wgrad"] == (1, 4096, 3072, 8192)
    assert by["llama3-8b/tp2/tok8192/logits/fwd"] == (1, 8192, 128256 // 2, 4096)
    moe = {lab: s.key for s in model_shapes([load_model("mixtral-8x7b")], [4096], [1], ("fwd",)) for lab in s.labels}
    assert moe["mixtral-8x7b/tp1/tok4096/fc2/fwd"] == (8, 4096 * 2 // 8, 4096, 14336)  # 8 experts, top-2


def test_parse_size_and_resolve():
    from costmodel.calibration.run import build_parser, parse_size, resolve
    assert parse_size("1K") == 1024 and parse_size("64KiB") == 65536 and parse_size("1G") == 2 ** 30
    assert parse_size("4096") == 4096
    with pytest.raises(ValueError):
        parse_size("lots")
    o = resolve(build_parser().parse_args(["--quick"]), on_gpu=True)
    assert o["max_bytes"] == 16 * 2 ** 20 and o["idle_s"] == 0 and o["power_limits"] == []
    o = resolve(build_parser().parse_args([]), on_gpu=True)
    assert o["max_bytes"] == 2 ** 30 and o["power_limits"] == [50, 60, 70, 80, 90, 100] and o["sustain_s"] == 120
    assert o["models"] == ["llama3-8b", "llama3-70b", "mixtral-8x7b"] and o["tp"] == [1, 2, 4, 8]
    o = resolve(build_parser().parse_args(["--skip", "overlap", "--power-limits", "off"]), on_gpu=True)
    assert "overlap" not in o["benchmarks"] and o["power_limits"] == []


# ---------------------------------------------------------------------------- fake NVML and sweep
class _Err(Exception):
    pass


def fake_nvml(limit_mw=700_000, allowed=True):
    """A pynvml stand-in with the calls the monitor makes (values of an H100 SXM)."""
    nv = types.SimpleNamespace()
    nv.NVMLError = _Err
    nv.NVMLError_NotSupported = type("NS", (_Err,), {})
    nv.NVMLError_NoPermission = type("NP", (_Err,), {})
    nv.NVML_TEMPERATURE_GPU, nv.NVML_CLOCK_SM = 0, 1
    nv.NVML_FI_DEV_MEMORY_TEMP, nv.NVML_FI_DEV_POWER_INSTANT = 82, 186
    state = dict(limit=limit_mw, sets=[])
    nv.state = state
    nv.nvmlDeviceGetIndex = lambda h: 3
    nv.nvmlDeviceGetName = lambda h: "NVIDIA H100 80GB HBM3"
    nv.nvmlDeviceGetUUID = lambda h: "GPU-12345678-aaaa-bbbb-cccc-1234567890ab"
    nv.nvmlDeviceGetPciInfo = lambda h: types.SimpleNamespace(busId=b"00000000:1B:00.0")
    nv.nvmlSystemGetDriverVersion = lambda: "550.54.15"
    nv.nvmlDeviceGetPowerUsage = lambda h: 312_345
    nv.nvmlDeviceGetTemperature = lambda h, s: 54
    nv.nvmlDeviceGetClockInfo = lambda h, c: 1980
    nv.nvmlDeviceGetCurrentClocksEventReasons = lambda h: 0x4
    nv.nvmlDeviceGetUtilizationRates = lambda h: types.SimpleNamespace(gpu=97, memory=41)
    nv.nvmlDeviceGetEnforcedPowerLimit = lambda h: state["limit"]
    nv.nvmlDeviceGetPowerManagementLimitConstraints = lambda h: (200_000, 700_000)
    nv.nvmlDeviceGetPowerManagementDefaultLimit = lambda h: 700_000

    def fields(h, ids):
        mem = types.SimpleNamespace(fieldId=82, valueType=1, nvmlReturn=0, value=types.SimpleNamespace(uiVal=61))
        inst = types.SimpleNamespace(fieldId=186, valueType=1, nvmlReturn=3, value=types.SimpleNamespace(uiVal=0))
        return [mem, inst]
    nv.nvmlDeviceGetFieldValues = fields

    def set_limit(h, mw):
        if not allowed:
            raise nv.NVMLError_NoPermission("Insufficient Permissions")
        state["sets"].append(mw)
        state["limit"] = mw
    nv.nvmlDeviceSetPowerManagementLimit = set_limit
    nv.nvmlShutdown = lambda: None
    return nv


def test_nvml_monitor_readings_and_sampler():
    from costmodel.calibration.suite.monitor import SAMPLE_FIELDS, NvmlMonitor, Sampler, gpu_id
    from costmodel.calibration.suite.recorder import Recorder
    m = NvmlMonitor(fake_nvml(), handle=object())
    assert (m.slot, m.pci_bus_id, m.driver_version) == (3, "00000000:1B:00.0", "550.54.15")
    s = m.read()
    assert set(SAMPLE_FIELDS) <= set(s)
    assert s["power_w"] == pytest.approx(312.345) and s["temp_c"] == 54 and s["mem_temp_c"] == 61
    assert s["sm_clock_mhz"] == 1980 and s["clock_event_reasons"] == 4 and s["util_gpu_pct"] == 97
    assert s["util_mem_pct"] == 41 and s["power_limit_w"] == 700 and s["power_instant_w"] is None
    assert m.power_limit_range_w() == [200, 700]
    assert len(gpu_id(m.uuid)) == 16 and "12345678" not in gpu_id(m.uuid)
    sampler = Sampler(m, hz=200).start()
    time.sleep(0.1)
    samples = sampler.stop()
    assert len(samples) >= 5 and all(a["t_unix"] < b["t_unix"] for a, b in zip(samples, samples[1:]))
    rec = Recorder("h", 0)
    sampler.write(rec, 3)
    assert rec.records[0]["kind"] == "sample" and rec.records[0]["slot"] == 3


def test_power_limit_sweep_restores_the_limit(monkeypatch):
    import torch
    from costmodel.calibration.suite import thermal
    from costmodel.calibration.suite.monitor import NvmlMonitor
    from costmodel.calibration.suite.recorder import Recorder
    monkeypatch.setattr(thermal.time, "sleep", lambda s: None)
    nv = fake_nvml()
    mon = NvmlMonitor(nv, handle=object())
    rec = Recorder("h", 0, slot=3, power_limit=mon.power_limit_w)
    thermal.power_limit_sweep(rec, mon, torch.device("cpu"), [10, 50, 100], (32, 32, 32), "fp32", 0.01)
    # probe (700 W), 10 % clamped to the 200 W minimum, 350 W, 700 W, then the original 700 W again
    assert nv.state["sets"] == [700_000, 200_000, 350_000, 700_000, 700_000]
    ph = [r for r in rec.records if r["kind"] == "phase"]
    assert [p["power_limit_w"] for p in ph] == [200, 350, 700] and all(p["name"] == "power_limit" for p in ph)
    assert any("clamped" in r["message"] for r in rec.records if r["kind"] == "note")

    # a failure during the sweep still restores the original limit
    nv = fake_nvml(limit_mw=650_000)
    mon = NvmlMonitor(nv, handle=object())
    rec = Recorder("h", 0, slot=3, power_limit=mon.power_limit_w)
    monkeypatch.setattr(thermal, "sustained_gemm", lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom")))
    thermal.power_limit_sweep(rec, mon, torch.device("cpu"), [50, 100], (32, 32, 32), "fp32", 0.01)
    assert nv.state["sets"][-1] == 650_000 and nv.state["limit"] == 650_000
    assert any("stopped" in r["message"] and r["level"] == "warning" for r in rec.records if r["kind"] == "note")

    # no permission: a note, nothing set
    nv = fake_nvml(allowed=False)
    mon = NvmlMonitor(nv, handle=object())
    rec = Recorder("h", 0, slot=3)
    thermal.power_limit_sweep(rec, mon, torch.device("cpu"), [50], (32, 32, 32), "fp32", 0.01)
    assert nv.state["sets"] == [] and "no permission" in rec.records[-1]["message"]


def test_an_unwritable_output_is_refused_before_any_benchmark(tmp_path):
    """A directory or an unwritable folder as --out stops the suite at once (exit 2, one line), not
    after the whole run."""
    from costmodel.calibration.run import main
    (tmp_path / "adir").mkdir()
    assert main(["--quick", "--out", str(tmp_path / "adir")]) == 2
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["--quick", "--out", str(blocker / "raw.jsonl")]) == 2


@pytest.mark.parametrize("flag,value", [("--wait-s", "nan"), ("--idle-s", "inf"), ("--sample-hz", "0"),
                                        ("--timeout-s", "nan"), ("--wait-s", "abc")])
def test_non_finite_durations_and_rates_exit_2(tmp_path, capsys, flag, value):
    """argparse refuses them (exit 2, the flag named) before any benchmark runs: a NaN wait would
    hang the other ranks in their all-reduce."""
    from costmodel.calibration.run import main
    with pytest.raises(SystemExit) as e:
        main(["--quick", "--out", str(tmp_path / "x.jsonl"), flag, value])
    assert e.value.code == 2 and f"argument {flag}" in capsys.readouterr().err
    assert not (tmp_path / "x.jsonl").exists()


def test_an_existing_output_is_kept_unless_forced(tmp_path, monkeypatch, capsys):
    """A second run into the first one's JSONL would replace measurements taken on GPUs: refused before
    any benchmark runs, unless --force (the calibrate run wrapper refuses it too, and passes --force on)."""
    from costmodel.calibration.run import main
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    out = tmp_path / "raw.jsonl"
    out.write_text('{"kind": "end"}\n')
    assert main(["--quick", "--out", str(out), "--only", "gemm"]) == 2
    assert "exists: its records would be replaced; give --force" in capsys.readouterr().err
    assert out.read_text() == '{"kind": "end"}\n'
    # forced, the run goes on to its next check (an unknown benchmark here), the file still untouched
    assert main(["--quick", "--force", "--out", str(out), "--only", "gemm,bogus"]) == 2
    assert "--only: unknown bogus" in capsys.readouterr().err
    import subprocess
    import sys
    cmd = [sys.executable, "-m", "costmodel.cli", "calibrate", "run", "--dry-run", "--out", str(out)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "give --force" in r.stderr, r.stderr
    r = subprocess.run(cmd + ["--force"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and f"--out {out} --force" in r.stderr, r.stderr
