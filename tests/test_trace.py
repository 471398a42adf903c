"""The predicted schedule as a Chrome/Perfetto trace: consistency with the time model, 1F1B and
interleaved order, dependencies, no overlaps, the fields Perfetto reads."""
import dataclasses
import json
from collections import Counter, defaultdict

import numpy as np
import pytest

from conftest import layout, predict_one
from costmodel.comm import comm_times
from costmodel.compute import compute_times
from costmodel.errors import InputError
from costmodel.layouts import layers_per_stage
from costmodel.schedule import step_times
from costmodel.specs import Recipe, load_model
from costmodel.trace import (THREADS, TID_COMPUTE, exposed_layer_comm, schedule_trace, simulate,
                             stage_ops, write_trace)


@pytest.fixture(scope="module")
def llama8b():
    return load_model("llama3-8b")


def _trace(model, cluster, profile, gbs=32, **kw):
    recipe = Recipe(gbs=gbs, seq_len=model.seq_len)
    pred = predict_one(model, cluster, profile, recipe, **kw)
    return schedule_trace(model, recipe, cluster, profile, pred), pred, recipe


def _x(trace):
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def _makespan_s(trace):
    return max(e["ts"] + e["dur"] for e in _x(trace)) / 1e6


# 32 GPUs of paper-h200: TP x PP x DP x CP = 32
ONE_F_ONE_B = [dict(pp=pp, dp=32 // pp, recompute=rc) for pp in (1, 2, 4) for rc in ("none", "full")]
VARIANTS = [dict(tp=2, sp=True, pp=2, dp=8, recompute="full"), dict(tp=2, pp=4, dp=4, sp=False),
            dict(cp=2, pp=2, dp=8), dict(pp=2, dp=16, zero=0, overlap=False),
            dict(pp=1, dp=32, zero=3), dict(tp=4, sp=True, pp=2, dp=4, recompute="selective")]
INTERLEAVED = [dict(pp=4, vp=2, dp=8), dict(pp=4, vp=4, dp=8, recompute="full"),
               dict(tp=2, sp=True, pp=2, vp=2, dp=8)]


@pytest.mark.parametrize("kw", ONE_F_ONE_B + VARIANTS + INTERLEAVED)
def test_makespan_equals_predicted_step_time(h200, llama8b, kw):
    """Required: within 1 % for 1F1B (a few % for VP > 1).  The construction (uniform blocking
    ops at the slowest stage's pace) makes it exact, so check to rounding (1e-6)."""
    c, p = h200
    tr, pred, _ = _trace(llama8b, c, p, **kw)
    step = float(pred.step_time_s[0])
    assert _makespan_s(tr) == pytest.approx(step, rel=1e-6)
    assert tr["metadata"]["step_time_s"] == pytest.approx(step, rel=1e-12)
    assert tr["metadata"]["makespan_s"] == pytest.approx(step, rel=1e-9)


@pytest.mark.parametrize("kw", ONE_F_ONE_B + INTERLEAVED + VARIANTS[:1])
def test_every_stage_has_m_forwards_and_backwards(h200, llama8b, kw):
    c, p = h200
    tr, pred, recipe = _trace(llama8b, c, p, **kw)
    lay = pred.layouts.row(0)
    m = recipe.gbs // (lay["dp"] * lay["mbs"])
    n_ops = m * lay["vp"]
    per = defaultdict(Counter)
    for e in _x(tr):
        per[e["pid"]][e["name"].split()[0] if e["name"][:2] in ("F ", "B ", "R ") else e["name"]] += 1
    assert sorted(per) == list(range(1, lay["pp"] + 1))
    for pid, cnt in per.items():
        assert cnt["F"] == n_ops and cnt["B"] == n_ops
        assert cnt["R"] == (n_ops if lay["recompute"] == "full" else 0)
        assert cnt["optimizer"] == 1
    # each (micro-batch, chunk) once per stage
    for pid in per:
        keys = [(e["name"], e["args"]["chunk"]) for e in _x(tr) if e["pid"] == pid and e["name"][:2] == "F "]
        assert len(set(keys)) == n_ops


@pytest.mark.parametrize("kw", ONE_F_ONE_B + INTERLEAVED)
def test_dependencies_between_stages(h200, llama8b, kw):
    """F of micro-batch i on virtual stage v starts after it ends on v-1 (stage k-1); B of i on v
    after it ends on v+1; the last virtual stage's B after its own F."""
    c, p = h200
    tr, pred, _ = _trace(llama8b, c, p, **kw)
    pp = pred.layouts.row(0)["pp"]
    V = pp * pred.layouts.row(0)["vp"]
    span = {}
    for e in _x(tr):
        if e["name"][:2] in ("F ", "B ", "R "):
            a = e["args"]
            span[(e["name"][0], a["mb"], a["virtual_stage"])] = (e["ts"], e["ts"] + e["dur"])
            assert a["virtual_stage"] % pp == e["pid"] - 1
    eps = 1e-3  # microseconds (rounding to the nanosecond)
    for (kind, mb, v), (ts, _) in span.items():
        if kind == "F" and v > 0:
            assert ts >= span[("F", mb, v - 1)][1] - eps
        if kind in "RB" and v < V - 1:
            assert ts >= span[("B", mb, v + 1)][1] - eps
        if kind == "B":
            assert ts >= span[("F", mb, v)][1] - eps


@pytest.mark.parametrize("kw", ONE_F_ONE_B + VARIANTS + INTERLEAVED)
def test_no_overlap_on_a_thread(h200, llama8b, kw):
    c, p = h200
    tr, _, _ = _trace(llama8b, c, p, **kw)
    _assert_no_overlap(tr)


def _assert_no_overlap(tr):
    by_thread = defaultdict(list)
    for e in _x(tr):
        by_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"], e["name"]))
    for key, spans in by_thread.items():
        spans.sort()
        for (a0, a1, na), (b0, b1, nb) in zip(spans, spans[1:]):
            assert b0 >= a1 - 1e-3, (key, na, nb, a1, b0)


@pytest.mark.parametrize("kw", ONE_F_ONE_B + INTERLEAVED)
def test_compute_stream_is_tiled_and_bubble_matches_model(h200, llama8b, kw):
    """Per stage, bubbles total the model's bubble_s on the last stage (it runs the logits and sets
    the pace) and bubble_s plus m times the logits on the others (they wait for it every
    micro-batch), and compute + bubble + blocking p2p + exposed DP add up to the step."""
    c, p = h200
    tr, pred, _ = _trace(llama8b, c, p, **kw)
    bub = defaultdict(float)
    for e in _x(tr):
        if e["name"] == "bubble":
            bub[e["pid"]] += e["dur"] / 1e6
            assert e["tid"] == TID_COMPUTE and e["args"]["phase"] in ("warm-up", "steady", "cool-down")
    want = float(pred.breakdown["bubble_s"][0])
    md = tr["metadata"]
    blocked = md["per_step"]["dp_param_exposed_s"] + md["per_step"]["dp_grad_exposed_s"]
    pp = pred.layouts.row(0)["pp"]
    ct = pred.terms.compute
    wait = md["microbatches"] * float(ct.logits_fwd_s[0] + ct.logits_bwd_s[0])
    for pid in range(1, pp + 1):
        assert bub[pid] == pytest.approx(want + (wait if pid < pp else 0.0), rel=1e-6, abs=1e-9)
        # compute-stream events + blocking p2p + exposed DP tile the step exactly once
        busy = sum(e["dur"] for e in _x(tr)
                   if e["pid"] == pid and (e["tid"] == TID_COMPUTE or e["cat"] == "p2p"))
        assert busy / 1e6 + blocked == pytest.approx(md["makespan_s"], rel=1e-6)


def test_1f1b_order():
    """PP-1-k warm-up forwards on stage k, then alternation, then the cool-down backwards."""
    pp, m = 4, 8
    for k in range(pp):
        ops = stage_ops(pp, 1, m, k)
        kinds = "".join(o[0] for o in ops)
        w = pp - 1 - k
        assert kinds == "F" * w + "FB" * (m - w) + "B" * w
        assert [o[1] for o in ops if o[0] == "F"] == list(range(m))
        assert [o[1] for o in ops if o[0] == "B"] == list(range(m))
    # fewer micro-batches than stages: warm-up capped at m
    assert "".join(o[0] for o in stage_ops(4, 1, 2, 0)) == "FFBB"


def test_interleaved_order():
    """Megatron's chunk order: groups of PP micro-batches per chunk; warm-up 2(PP-1-k)+(VP-1)PP."""
    pp, vp, m = 4, 2, 8
    ops = stage_ops(pp, vp, m, 0)
    fwd = [(mb, c) for kd, mb, c in ops if kd == "F"]
    assert fwd[:8] == [(0, 0), (1, 0), (2, 0), (3, 0), (0, 1), (1, 1), (2, 1), (3, 1)]
    bwd = [(mb, c) for kd, mb, c in ops if kd == "B"]
    assert bwd[:4] == [(0, 1), (1, 1), (2, 1), (3, 1)]
    for k in range(pp):
        kinds = "".join(o[0] for o in stage_ops(pp, vp, m, k))
        assert kinds.index("B") == min(2 * (pp - 1 - k) + (vp - 1) * pp, m * vp) + 1


@pytest.mark.parametrize("pp,vp,m", [(2, 1, 8), (4, 1, 3), (8, 1, 32), (4, 2, 8), (4, 4, 16), (8, 2, 8)])
def test_simulated_pipeline_is_the_schedule_formula(pp, vp, m):
    """Uniform blocking ops: pipeline time = (m + (PP-1)/VP) x (per-micro-batch time)."""
    f, b = 0.3, 0.7
    sched = simulate(pp, vp, m, f / vp, b / vp)
    end = max(s + (f if kd == "F" else b) / vp for st in sched for kd, _, _, s in st)
    assert end == pytest.approx((m + (pp - 1) / vp) * (f + b), rel=1e-12)


@pytest.mark.parametrize("kw", [dict(tp=2, sp=True, pp=2, dp=8, recompute="full"),
                                dict(tp=2, sp=False, pp=2, dp=8, overlap=False),
                                dict(cp=2, tp=2, sp=True, pp=2, dp=4), dict(tp=4, sp=True, pp=4, dp=2)])
@pytest.mark.parametrize("tp_comm_overlap", [True, False])
def test_exposed_comm_mirror_matches_schedule(h200, llama8b, kw, tp_comm_overlap):
    """trace.exposed_layer_comm mirrors schedule.step_times' overlap rules: it must reproduce
    StepTimes.fwd_s / bwd_s and the tp/cp/ep breakdown (fails if schedule.py changes them)."""
    c, p = h200
    if hasattr(p, "overlap_slowdown"):     # contention slows compute, not the comm terms checked here
        p = dataclasses.replace(p, overlap_slowdown=1.0)
    recipe = Recipe(gbs=32, seq_len=llama8b.seq_len, tp_comm_overlap=tp_comm_overlap)
    t = layout(**kw)
    ct = compute_times(llama8b, recipe, c, p, t)
    cm = comm_times(llama8b, recipe, c, p, t)
    st = step_times(llama8b, recipe, c, p, t, ct, cm)
    e = exposed_layer_comm(recipe, t, ct, cm)
    L = layers_per_stage(llama8b, t)
    m = recipe.gbs / (t.dp * t.mbs)
    fwd = L * ct.layer_fwd_s + ct.logits_fwd_s + L * (e["tp_f"] + e["cp_f"] + e["ep_f"])
    bwd = (L * (ct.layer_bwd_s + ct.layer_recompute_s) + ct.logits_bwd_s
           + L * (e["tp_b"] + e["cp_b"] + e["ep_b"]))
    np.testing.assert_allclose(fwd, st.fwd_s, rtol=1e-12)
    np.testing.assert_allclose(bwd, st.bwd_s, rtol=1e-12)
    for d in ("tp", "cp", "ep"):
        np.testing.assert_allclose(m * L * (e[d + "_f"] + e[d + "_b"]), st.breakdown[d + "_comm_s"],
                                   rtol=1e-12, atol=1e-15)


def test_exposed_collectives_and_p2p_are_drawn(h200, llama8b):
    c, p = h200
    tr, pred, _ = _trace(llama8b, c, p, tp=2, sp=False, pp=2, dp=8, overlap=False, zero=0)
    names = Counter(e["name"] for e in _x(tr))
    assert names["TP all-reduce"] > 0 and names["send act"] > 0 and names["send grad"] > 0
    assert names["DP all-reduce"] == 2 and names["optimizer"] == 2
    # exposed TP comm inside each F/B equals the model's tp term
    tp_total = sum(e["dur"] for e in _x(tr) if e["name"] == "TP all-reduce" and e["pid"] == 1) / 1e6
    assert tp_total == pytest.approx(float(pred.breakdown["tp_comm_s"][0]), rel=1e-6)
    # the p2p thread carries the model's pp_comm_s per stage
    p2p = sum(e["dur"] for e in _x(tr) if e["cat"] == "p2p" and e["pid"] == 2) / 1e6
    assert p2p == pytest.approx(float(pred.breakdown["pp_comm_s"][0]), rel=1e-6)
    # send act goes to the next stage, send grad to the previous one; ends get a 'p2p slot'
    for e in _x(tr):
        if e["name"] == "send act":
            assert e["args"]["to_stage"] == e["pid"]
        if e["name"] == "send grad":
            assert e["args"]["to_stage"] == e["pid"] - 2
        if e["name"] == "p2p slot":
            assert e["args"]["to_stage"] is None


@pytest.mark.parametrize("kw", [dict(pp=4, dp=8), dict(pp=2, vp=2, tp=2, sp=True, dp=8, recompute="full"),
                                dict(pp=1, dp=32, zero=3)])
def test_overlap_slowdown_keeps_makespan(h200, llama8b, kw):
    """A profile with compute/communication contention: the step time grows, the trace follows."""
    c, p = h200
    if not hasattr(p, "overlap_slowdown"):
        pytest.skip("this Profile has no overlap_slowdown")
    p = dataclasses.replace(p, overlap_slowdown=1.15)
    tr, pred, _ = _trace(llama8b, c, p, **kw)
    assert _makespan_s(tr) == pytest.approx(float(pred.step_time_s[0]), rel=1e-6)
    assert any(e["name"] == "overlap slowdown" for e in _x(tr))
    _assert_no_overlap(tr)


def test_moe_draws_ep_all_to_all(h200):
    c, p = h200
    mix = load_model("mixtral-8x7b")
    tr, pred, _ = _trace(mix, c, p, tp=2, sp=True, pp=2, dp=8, ep=8)
    assert any(e["name"] == "EP all-to-all" for e in _x(tr))
    assert _makespan_s(tr) == pytest.approx(float(pred.step_time_s[0]), rel=1e-6)


def test_json_round_trip_and_perfetto_fields(h200, llama8b):
    c, p = h200
    tr, pred, _ = _trace(llama8b, c, p, pp=4, dp=8, recompute="full")
    assert json.loads(json.dumps(tr)) == tr
    assert tr["displayTimeUnit"] == "ms"
    for e in tr["traceEvents"]:
        assert e["ph"] in ("X", "M")
        assert isinstance(e["name"], str) and isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert {"ph", "ts", "dur", "pid", "tid", "name"} <= e.keys()
            assert e["ts"] >= 0 and e["dur"] > 0
            assert all(k == "to_stage" or v is not None for k, v in e["args"].items())
    procs = {e["pid"]: e["args"]["name"] for e in tr["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {1: "stage 0 (GPUs 0-7, node 0)", 2: "stage 1 (GPUs 8-15, node 1)",
                     3: "stage 2 (GPUs 16-23, node 2)", 4: "stage 3 (GPUs 24-31, node 3)"}
    threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in tr["traceEvents"]
               if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(threads[(pid, tid)] == name for pid in procs for tid, name in THREADS.items())
    # args in seconds match ts/dur in microseconds; micro-batch and chunk carried
    f = next(e for e in _x(tr) if e["name"] == "F mb3" and e["pid"] == 2)
    assert f["args"]["mb"] == 3 and f["args"]["chunk"] == 0
    assert f["dur"] == pytest.approx(f["args"]["fwd_s"] * 1e6, abs=2e-3)
    md = tr["metadata"]
    assert md["layout"]["pp"] == 4 and md["microbatches"] == 4 and md["schedule"] == "1F1B"
    assert set(md["breakdown"]) >= {"bubble_s", "optimizer_s"} and md["approximations"]


def test_write_trace(tmp_path, h200, llama8b):
    c, p = h200
    recipe = Recipe(gbs=16, seq_len=llama8b.seq_len)
    pred = predict_one(llama8b, c, p, recipe, pp=2, dp=16)
    out = tmp_path / "schedule.json"
    tr = write_trace(out, llama8b, recipe, c, p, pred.layouts)
    assert json.loads(out.read_text()) == tr
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cannot write"):
        write_trace(blocker / "t.json", llama8b, recipe, c, p, pred)


def test_errors(h200, llama8b):
    c, p = h200
    recipe = Recipe(gbs=32, seq_len=llama8b.seq_len)
    pred = predict_one(llama8b, c, p, recipe, pp=2, dp=16)
    with pytest.raises(IndexError):
        schedule_trace(llama8b, recipe, c, p, pred, index=1)
    other = Recipe(gbs=64, seq_len=llama8b.seq_len)
    with pytest.raises(ValueError, match="other specs"):
        schedule_trace(llama8b, other, c, p, pred)
    with pytest.raises(InputError, match="divisible"):
        schedule_trace(llama8b, Recipe(gbs=24, seq_len=llama8b.seq_len), c, p, layout(pp=2, dp=16))
    with pytest.raises(InputError, match="multiple of PP"):
        schedule_trace(llama8b, Recipe(gbs=48, seq_len=llama8b.seq_len), c, p, layout(pp=4, vp=2, dp=8))


def test_overlapped_stage_sends_slow_the_chunks_they_run_under():
    """Llama 3 70B on 4 DGX H100, TP 4 PP 4 VP 5 (Megatron overlaps the interleaved sends): the compute
    those sends slow sits in each chunk's slot, so the trace spans the predicted step (it was 0.09 s
    short); the leftover block names the warm-up and flush's sends, not a DP slowdown (DP overlap off)."""
    from costmodel.specs import load_cluster, load_profile
    m, c = load_model("llama3-70b"), load_cluster("dgx-h100", nodes=4)
    p = load_profile(c.gpu.key)
    recipe = Recipe(gbs=128, seq_len=8192, pp_overlap=True, dp_overlap=False)      # Megatron-LM's defaults
    pred = predict_one(m, c, p, recipe, tp=4, sp=True, pp=4, vp=5, dp=2, recompute="selective")
    assert float(pred.terms.step.pp_contention_s[0]) > 0
    tr = schedule_trace(m, recipe, c, p, pred)
    assert _makespan_s(tr) == pytest.approx(float(pred.step_time_s[0]), rel=1e-6)
    slow = [e for e in _x(tr) if e["name"] == "overlap slowdown"]
    assert slow and all(e["args"]["dp_slowdown_s"] == 0.0 for e in slow)
