"""recommend and predict as an engineer plans a run with them: the launch settings of each format
say what the prediction assumed, and refusals name what the user can change."""
import json
import re

import pytest
from cli_run import one_line, run


def test_nemo_settings_of_a_zero3_layout_overlap_the_fsdp_gathers_the_prediction_hides():
    r = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "1", "--pp", "1", "--zero", "3",
            "--format", "nemo")
    assert r.returncode == 0, r.stderr
    text = r.stdout
    assert "recipe.trainer.strategy.fsdp = 'megatron'" in text
    assert "ddp.overlap_grad_reduce = True" in text and "ddp.overlap_param_gather = True" in text


def test_generic_settings_state_a_partial_recompute():
    r = run("predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--tp", "8", "--pp", "4",
            "--recompute", "full", "--recompute-num-layers", "1", "--format", "settings")
    assert r.returncode == 0, r.stderr
    assert "activation checkpointing: full on 1 transformer block of each pipeline chunk" in r.stdout


def test_a_pinned_mbs_above_max_mbs_and_pins_that_cannot_fit_are_named():
    one_line(run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--mbs", "32", "--max-mbs", "8"),
             "--mbs", "above --max-mbs 8")
    r = run("recommend", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--tp", "8", "--pp", "8",
            "--recompute", "none", "--zero", "0", "--mbs", "16", "--vp", "10")
    assert r.returncode == 3 and "relax the pinned --tp, --pp, --vp, --mbs, --recompute, --zero" in r.stderr, r.stderr


def test_a_switch_that_did_not_help_one_winner_is_tried_again_on_the_next():
    """Llama 3 70B on 16 DGX H100: DP overlap does not help the first winner (TP1 DP64 CP2) and had been
    dropped; once TP-comm overlap makes TP4 PP4 VP10 the winner it does (13.30 s against 13.47 s without
    it), so the recommended recipe has both, and predict of that layout agrees."""
    import json
    r = run("recommend", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "16", "--gbs", "256", "--json")
    assert r.returncode == 0, r.stderr
    best = json.loads(r.stdout)["ranked"][0]
    assert best["recipe"]["tp_comm_overlap"] and best["recipe"]["dp_overlap"], best["recipe"]
    lay = best["layout"]
    p = run("predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "16", "--gbs", "256",
            "--tp", str(lay["tp"]), "--pp", str(lay["pp"]), "--vp", str(lay["vp"]), "--mbs", str(lay["mbs"]),
            "--recompute", lay["recompute"], "--zero", str(lay["zero"]), "--tp-comm-overlap", "--no-dp-overlap",
            "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["step_time_s"] > best["step_time_s"] * 1.005


def test_recommend_searches_the_flex_dispatcher_where_deepep_runs():
    """Qwen3-30B-A3B on two DGX H100: the all-to-all winner (TP2 EP8, 4.40 s) had been printed while the
    flex dispatcher, which predict prices, runs TP1 EP16 in 4.04 s (with the DP overlap, the fused router and
    the EP overlap: switches that help together, where each alone did not beat an all-gather winner); over
    AWS EFA, where upstream DeepEP's internode kernels do not run, the search keeps its EP groups inside a
    node."""
    import json
    got = {}
    for c in ("dgx-h100", "aws-p5"):
        r = run("recommend", "--model", "qwen3-30b-a3b", "--cluster", c, "--nodes", "2", "--gbs", "256", "--json")
        assert r.returncode == 0, r.stderr
        got[c] = json.loads(r.stdout)["ranked"][0]
    assert got["dgx-h100"]["recipe"]["moe_dispatcher"] == "flex" and got["dgx-h100"]["layout"]["ep"] == 16
    assert abs(got["dgx-h100"]["step_time_s"] - 4.04) < 0.05
    p5 = got["aws-p5"]
    assert p5["recipe"]["moe_dispatcher"] != "flex" or p5["layout"]["ep"] * p5["layout"]["etp"] <= 8


def test_the_printed_predict_command_reproduces_recommend_s_answer():
    """recommend's arguments had not sufficed to price its winner again: an uneven split printed as
    Megatron's --decoder-first/last-pipeline-num-layers (12.709 s in predict for 11.387 s), switches named
    only by their Megatron flags.  Its last lines now give the predict command: the same step (time
    objective, Qwen3-30B-A3B with the flex dispatcher), and with caps and device order the same step and
    hottest GPU (energy objective, Llama 3 8B under a 62 C limit)."""
    import json
    import shlex
    cases = (("--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "2", "--gbs", "256"),
             ("--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--pp", "4", "--tp", "2",
              "--objective", "energy", "--max-temp-c", "62"))
    for args in cases:
        text = run("recommend", *args)
        assert text.returncode == 0, text.stderr
        cmd = text.stdout.strip().splitlines()[-1]
        assert cmd.startswith("costmodel predict "), cmd
        rec = json.loads(run("recommend", *args, "--json").stdout)
        assert rec["predict_command"] == cmd
        want = rec["step_time_s"] if "step_time_s" in rec else rec["ranked"][0]["step_time_s"]
        got = run(*shlex.split(cmd)[1:], "--json")
        assert got.returncode == 0, got.stderr
        rec = json.loads(got.stdout)
        assert abs(rec["step_time_s"] - want) < 0.005 * want, (cmd, rec["step_time_s"], want)
        if "--power-cap-w" in cmd:
            assert re.search(r"--device-order 0:(\d,){7}\d", cmd) and rec["max_temp_c"] < 62


def test_the_context_line_names_the_optimizer_the_stack_defaults_to():
    """The stack's default optimizer is named on the context line (predict had priced llm-foundry's without
    saying so): AdamW, its pretraining yamls' and benchmark table's decoupled_adamw; LionW where asked."""
    base = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gbs", "128", "--stack", "llm-foundry",
            "--zero", "3")
    r = run(*base)
    assert r.returncode in (0, 3), r.stderr
    assert "adamw optimizer (llm-foundry stack)" in r.stdout
    r = run(*base, "--optimizer", "lionw")
    assert r.returncode in (0, 3), r.stderr
    assert "lionw optimizer" in r.stdout


def test_recommend_prices_past_its_first_ten_a_layout_a_balanced_split_makes_the_winner():
    """recommend re-ranked only the time model's first ten layouts: DeepSeek-V3 on 36 GB200 NVL72 trays answered
    TP 2 PP 9 at 10.626 s, while TP 2 PP 18 EP 8, 35th in the time model's ranking at its default split (its
    last stage holds four layers, the logits and the MTP module), runs 10.68 s (10.97 s since the MTP module's
    layer pays its collectives) at the split that balances its stages; --top 40 had found it.  Layouts whose step times costmodel.pipeline_balance.balanced_pace_ratio
    could still beat the best are now priced too."""
    r = run("recommend", "--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--nodes", "36", "--gbs", "1024",
            "--top", "1", "--json")
    assert r.returncode == 0, r.stderr
    best = json.loads(r.stdout)["ranked"][0]
    assert (best["layout"]["tp"], best["layout"]["pp"], best["layout"]["ep"]) == (2, 18, 8)
    assert best["step_time_s"] == pytest.approx(10.965, rel=0.005)     # 10.676 before the MTP layer's collectives


def test_the_re_ranked_table_pairs_each_row_with_its_own_prediction(monkeypatch):
    """A layout priced from past the first ten that did not win had left the ranking unchanged: its prediction
    sat beside the eleventh layout of the time model's order (the reasons and the memory margin read them
    together).  The rows and the runs now name the same layouts."""
    import dataclasses
    import importlib
    from types import SimpleNamespace as NS
    import numpy as np
    R = importlib.import_module("costmodel.cli.recommend")

    class Lay:
        def __init__(self, idx):
            self.idx = np.asarray(idx)

        def __len__(self):
            return len(self.idx)

        def take(self, i):
            return Lay(self.idx[np.asarray(i)])

    class Ranked:
        def __init__(self, idx, st):
            self.layouts, self.step_time_s = Lay(idx), st

        def take(self, i):
            i = np.asarray(i)
            return Ranked(self.layouts.idx[i], self.step_time_s[i])

    @dataclasses.dataclass
    class Res:
        ranked: object

    steps = np.concatenate([np.linspace(1.0, 1.09, 10), np.linspace(2.2, 2.49, 30)])
    limited = {i: 2.0 + 0.01 * i for i in range(10)} | {25: 2.5}      # layout 25 is priced and loses
    monkeypatch.setattr(R, "_best_split_runs", lambda m, r, c, p, L, t=None: [
        NS(feasible=True, step_time_s=limited.get(int(i), 9.0), lay=int(i)) for i in L.idx])
    monkeypatch.setattr(R, "_balanced_ratio", lambda m, r, c, p, L, k: np.where(np.arange(len(L)) == 25, 0.6, 1.0))
    res, runs = R._rank_shortlist_at_the_limit(None, None, None, None, Res(Ranked(np.arange(40), steps)), 10)
    assert [run.lay for run in runs] == list(range(10)) + [25]
    assert res.ranked.layouts.idx[:11].tolist() == [run.lay for run in runs]
    assert sorted(res.ranked.layouts.idx.tolist()) == list(range(40))


def test_recommend_turns_off_a_tp_comm_overlap_that_costs_more_than_it_hides():
    """NeMo's performance recipes run TE TP-comm overlap; at TP 2 on 8 x 8 A100 (Llama 2 13B, PP 16) its
    chunked GEMMs and the SMs its kernels hold cost more than the 0.4 s of TP communication it hides.
    The search only ever turned switches on, so it kept a slower winner; it now turns this one off,
    says so with both steps, and prints settings without it (NeMo: no overlap callback)."""
    base = ("--model", "llama2-13b", "--cluster", "jean-zay-a100", "--nodes", "8", "--stack", "nemo", "--gbs", "256")
    rec = run("recommend", *base, "--tp", "2", "--pp", "16", "--vp", "1", "--top", "3")
    assert rec.returncode == 0, rec.stderr
    note = next(ln for ln in rec.stderr.splitlines() if "--no-tp-comm-overlap" in ln)
    without, with_ = (float(x) for x in re.findall(r"takes ([\d.]+) s per step .* without it, ([\d.]+) s with it", note)[0])
    assert without < with_ and "turns it off" in note
    assert "MegatronCommOverlapCallback, tp_comm_overlap=True" not in rec.stdout
    assert "if cb.__fn_or_cls__ is not MegatronCommOverlapCallback]" in rec.stdout   # the recipe's own goes
    cmd = next(ln for ln in rec.stdout.splitlines() if ln.startswith("costmodel predict"))
    assert "--no-tp-comm-overlap" in cmd
    lay = ("--tp", "2", "--pp", "16", "--dp", "2", "--mbs", "1", "--recompute", "none", "--zero", "1", "--json")
    on = json.loads(run("predict", *base, *lay).stdout)
    off = json.loads(run("predict", *base, *lay, "--no-tp-comm-overlap").stdout)
    assert off["uncapped_step_time_s"] == pytest.approx(without, abs=5e-4)
    assert on["uncapped_step_time_s"] > off["uncapped_step_time_s"]
    # the nothing-hides what-if prints no TP-comm overlap either: it is priced without one
    txt = run("predict", *base, *lay[:-1], "--no-overlap", "--format", "megatron")
    assert txt.returncode == 0, txt.stderr
    assert "--tp-comm-overlap" not in txt.stdout and "--sequence-parallel" in txt.stdout
    tt = ("--model", "llama3-8b", "--cluster", "dgx-h100", "--stack", "torchtitan", "--gbs", "64", "--tp", "2",
          "--pp", "1", "--dp", "4", "--mbs", "1", "--recompute", "none", "--zero", "3", "--tp-comm-overlap",
          "--format", "torchtitan")
    assert "enable_async_tensor_parallel = True" in run("predict", *tt).stdout
    assert "enable_async_tensor_parallel = False" in run("predict", *tt, "--no-overlap").stdout


def test_recommend_says_how_it_prices_moe_routing_and_its_json_carries_every_note():
    """recommend ranks MoE layouts on random top-k routing, as predict does, and says so (on stderr and in
    --json's notes, which hold every note stderr printed, in order); with a measured load CV, or for a
    dense model, it says nothing of routing."""
    r = run("recommend", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "2", "--json")
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["notes"]
    assert notes and notes[0].startswith("MoE routing is priced as random top-k")
    printed = [x[len("costmodel: note: "):] for x in r.stderr.splitlines() if x.startswith("costmodel: note: ")]
    assert printed == notes
    r = run("recommend", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "2", "--json",
            "--moe-expert-load-cv", "0.3")
    assert r.returncode == 0 and not any("random top-k" in n for n in json.loads(r.stdout)["notes"]), r.stderr
    r = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--objective", "energy", "--json")
    assert r.returncode == 0, r.stderr
    notes = json.loads(r.stdout)["notes"]
    assert notes and not any("routing" in n for n in notes)
    assert [x[len("costmodel: note: "):] for x in r.stderr.splitlines() if x.startswith("costmodel: note: ")] == notes


def test_a_winner_run_at_its_own_pipeline_split_is_compared_on_one_footing():
    """DeepSeek-V3 on 256 DGX H100, TP1 PP16 EP64 VP1 held: the winner runs a pipeline split of its own (4 layers
    first, 1 last), faster than the stack's. The table's memory is that run's (the memory table's peak), the
    layout that needs more memory is compared with the winner at the stack's own split, as the search priced
    both (it had read "-13.7% faster" against the tuned winner), and the switch notes say which split they time."""
    r = run("recommend", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "256", "--gbs", "8192",
            "--pp", "16", "--ep", "64", "--tp", "1", "--vp", "1")
    assert r.returncode == 0, r.stderr
    assert "--decoder-first-pipeline-num-layers" in r.stdout
    row = next(x for x in r.stdout.splitlines() if x.startswith("│  1 │"))
    peak = re.search(r"│ peak\s*│\s*([\d.]+)", r.stdout).group(1)
    assert row.split("│")[-2].strip() == f"{float(peak):.1f}", (row, peak)
    gain = re.search(r"would be (-?[\d.]+)% faster \(both at the stack's own pipeline split\) but needs", r.stdout)
    assert gain and float(gain.group(1)) > 0, r.stdout
    assert "the time model's fastest layout (at its stack's own pipeline split) takes" in r.stderr


def test_the_band_line_names_the_terms_no_fit_measured():
    """MI300X's profile is derived, not fitted: recommend had printed 'fit residuals 0.0%', which reads as a
    perfect fit; predict already named the unfitted terms."""
    r = run("recommend", "--model", "llama3-8b", "--cluster", "azure-nd-mi300x", "--nodes", "1")
    assert r.returncode == 0, r.stderr
    assert "(fit residuals 0.0% over the fitted terms, none for compute_s," in " ".join(r.stdout.split())


def test_recommend_says_when_the_job_fills_part_of_an_nvlink_domain():
    """predict said that 80 GB200 GPUs fill one NVL72 domain and 8 GPUs of another; recommend had not."""
    r = run("recommend", "--model", "llama3-70b", "--cluster", "gb200-nvl72", "--nodes", "20", "--gbs", "160")
    assert r.returncode == 0, r.stderr
    assert "the job's 80 GPUs fill 1 NVLink domain(s) of 72 and 8 GPUs of another" in r.stderr


def test_a_sequence_tp_does_not_divide_is_searched_without_sp_and_said():
    """recommend at seq_len 8191 had kept only TP 1 (SP forced on, and Megatron-core splits the sequence
    evenly over TP under it): the TP > 1 layouts stay, without SP, and the note says why."""
    p = run("recommend", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "4", "--gbs", "128",
            "--seq-len", "8191", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert any("seq_len 8191 / CP is not divisible by TP 2, 4, 8" in n for n in d["notes"])
    tps = {x["layout"]["tp"] for x in d["ranked"]}
    assert tps - {1} and not any(x["layout"]["sp"] for x in d["ranked"])


def test_a_pinned_vp_the_search_does_not_try_is_refused_saying_which_it_tries():
    """predict prices VP 3 over Llama 3 70B's 80 layers at PP 4 (unequal chunks); recommend had refused the
    pin with 'num_layers must be divisible by PP x VP', as if no tool could: it names the VP sizes it tries."""
    p = run("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--tp", "8", "--pp", "4", "--vp", "3")
    one_line(p, "VP 3 splits the 80 layers into unequal virtual chunks at PP 4; the search tries the VP sizes that "
             "split them evenly (1, 2, 4, 5, 10, 20 at PP 4): predict prices VP 3 (--pp-layout names its chunks)")


def test_recompute_modules_leave_the_layouts_without_selective_recompute_to_the_search():
    """recommend --recompute-modules mlp had stopped at its first layout without selective recomputation
    ('applies to --recompute selective, not none'): Megatron-core ignores the modules there
    (TransformerConfig reads them under selective granularity only), so those layouts are searched too."""
    p = run("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--recompute-modules", "mlp", "--json")
    assert p.returncode == 0, p.stderr
    kinds = {x["layout"]["recompute"] for x in json.loads(p.stdout)["ranked"]}
    assert "none" in kinds, kinds


def test_a_gbs_sharing_no_factor_with_the_gpus_is_said_to_leave_dp_1():
    """--gbs 127 on 32 GPUs: every DP x mbs must divide gbs, so only DP 1 is searched (78 layouts where
    gbs 128 has thousands); the answer had not said why."""
    p = run("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--gbs", "127", "--json")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert any(n.startswith("gbs 127 shares no factor with the 32 GPUs") for n in d["notes"])
    assert {x["layout"]["dp"] for x in d["ranked"]} == {1}
    q = json.loads(run("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--gbs", "96", "--json").stdout)
    assert not any("shares no factor" in n for n in q["notes"])


def test_nothing_fits_says_what_would_shrink_it():
    """Llama 3 8B at 1M tokens on one H100 node: the logits hold 94 of the smallest layout's 159 GiB, so the
    chunked cross-entropy is named; a stack without CP is told that more nodes shard the states, not the
    sequence's activations (a shorter sequence does); a DP-only stack whose GPUs outnumber the batch says so."""
    r = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--seq-len", "1048576",
            "--gbs", "8")
    assert r.returncode == 3 and "--cross-entropy chunked (the logits hold 93.9 GiB of it)" in r.stderr, r.stderr
    assert "add nodes (more GPUs shard the model's states and, by context parallelism, the sequence)" in r.stderr
    legacy = run("recommend", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "16", "--seq-len", "131072",
                 "--gbs", "64", "--stack", "megatron-legacy")
    text = " ".join(legacy.stderr.split())
    assert legacy.returncode == 3 and "not a sequence's activations: the megatron-legacy stack has no context" in text
    assert "or a shorter --seq-len" in text
    ds = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "16", "--seq-len", "8192",
             "--gbs", "64", "--stack", "deepspeed")
    assert ds.returncode == 2 and "the deepspeed stack runs data parallelism only (DP = the 128 GPUs)" in ds.stderr
