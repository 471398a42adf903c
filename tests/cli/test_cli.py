"""The CLI end to end: JSON record names, the recommend table, and one clear line for bad input."""
import json
import subprocess
import sys

import pytest

import os
from pathlib import Path

CLI = [sys.executable, "-m", "costmodel.cli"]
# the checkout under test, also when a test runs from another folder
ENV = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parents[2]))


def run(*args, cwd=None):
    return subprocess.run(CLI + list(args), capture_output=True, text=True, cwd=cwd, env=ENV)


def override(base, *extra):
    """``base`` (command-line words) with the options of ``extra`` replacing its own, then ``extra``: the
    CLI refuses an option given twice.  An option's value is the next word unless that starts with '--'."""
    def options(words):
        out, i = {}, 0
        while i < len(words):
            w = str(words[i])
            if w.startswith("--"):
                has_value = i + 1 < len(words) and not str(words[i + 1]).startswith("--")
                out[w.split("=", 1)[0]] = (i, 2 if has_value and "=" not in w else 1)
                i += out[w.split("=", 1)[0]][1]
            else:
                i += 1
        return out
    drop = set()
    mine = options(base)
    for opt in options(extra):
        if opt in mine:
            i, n = mine[opt]
            drop.update(range(i, i + n))
    return [w for j, w in enumerate(base) if j not in drop] + list(extra)


def assert_one_line_error(p, *needles):
    assert p.returncode == 2, p.stderr + p.stdout
    lines = [ln for ln in p.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    assert "Traceback" not in p.stderr
    for n in needles:
        assert n in lines[0], lines[0]


def test_predict_json_has_the_stable_names():
    p = run("predict", "--model", "llama3-70b", "--cluster", "paper-h200", "--tp", "4", "--pp", "4", "--mbs", "1",
            "--gbs", "128", "--seq-len", "8192", "--recompute", "full", "--json")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    for k in ("feasible", "step_time_s", "tokens_per_s_per_gpu", "model_tflops_per_gpu", "mfu", "peak_mem_bytes",
              "layout", "breakdown"):
        assert k in rec
    assert rec["layout"]["dp"] == 2 and rec["layout"]["recompute"] == "full"
    assert rec["feasible"] is True
    # the breakdown is the time model's at full clocks; the step is the one under the 700 W limit,
    # which holds the H200's burst-measured BF16 GEMMs below their maximum clock
    assert sum(rec["breakdown"].values()) == pytest.approx(rec["uncapped_step_time_s"], rel=1e-9)
    assert rec["uncapped_step_time_s"] < rec["step_time_s"] < 1.1 * rec["uncapped_step_time_s"]
    # tokens/s/GPU and MFU follow from the step time: 128 x 8192 tokens over 32 GPUs
    assert rec["tokens_per_s_per_gpu"] == pytest.approx(128 * 8192 / rec["step_time_s"] / 32, rel=1e-9)
    assert 0.05 < rec["mfu"] < 0.8
    # the band's per-term sigmas are ratios: keyed by the breakdown term without its seconds unit
    sig = rec["step_time_band"]["sigma_rel"]
    assert "compute" in sig and all(not k.endswith("_s") and f"{k}_s" in rec["breakdown"] for k in sig)
    assert all(0 < v < 1 for v in sig.values()) and "sigma" not in rec["step_time_band"]


def test_predict_json_names_the_attention_kernel_it_ran_and_none_when_unfused():
    """On an H100 Megatron prices Transformer Engine's cuDNN attention; unfused attention runs no fused
    kernel, so the record says none rather than keeping the stack's default beside flash_attention false."""
    base = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--json")
    fused, unfused = (json.loads(run(*base, *extra).stdout)["recipe"] for extra in ((), ("--no-flash-attention",)))
    assert (fused["flash_attention"], fused["attention_kernel"]) == (True, "cudnn")
    assert (unfused["flash_attention"], unfused["attention_kernel"]) == (False, None)


def test_a_kernel_without_its_own_table_says_what_priced_it():
    """No GPU profile has a FlashAttention v1 table: its speed is FA2's over 2 (Dao 2023), and the answer's
    context line says so; FA2, which has one, gets no such remark."""
    base = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--stack", "llm-foundry")
    fa1, fa2 = (run(*base, "--attention-kernel", k) for k in ("fa1", "fa2"))
    assert fa1.returncode == 0 and fa2.returncode == 0, fa1.stderr + fa2.stderr
    said1, said2 = (" ".join(p.stdout.split()) for p in (fa1, fa2))      # the console wraps long lines
    assert "fa1 attention (no fa1 table for h100-sxm-80gb: fa2's speed / 2, Dao 2023)" in said1
    assert "fa2 attention" in said2 and "no fa2 table" not in said2


def test_predict_reports_infeasible_memory_with_the_overshoot():
    p = run("predict", "--model", "llama3-70b", "--cluster", "paper-h200", "--tp", "1", "--pp", "1", "--zero", "0",
            "--json")
    rec = json.loads(p.stdout)
    assert rec["feasible"] is False and "exceeds" in rec["reason"]
    # the full record still prints; the status says the layout cannot run, the reason on one line
    assert p.returncode == 3 and p.stderr.strip().splitlines()[-1].startswith("costmodel: infeasible: peak memory")


def test_recommend_prints_table_breakdown_and_megatron_args(tmp_path):
    p = run("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    out = p.stdout
    for needle in ("Fastest layouts", "pipeline bubble", "DP/FSDP comm exposed", "--tensor-model-parallel-size",
                   "--pipeline-model-parallel-size", "MFU"):
        assert needle in out


def test_models_and_hardware_list_the_catalog():
    p = run("models")
    assert p.returncode == 0 and "llama3.1-405b" in p.stdout and "70.55" in p.stdout
    p = run("hardware")
    assert p.returncode == 0 and "paper-h200" in p.stdout and "datasheet" in p.stdout.lower()


def test_unknown_model_lists_close_matches():
    assert_one_line_error(run("recommend", "--model", "llama3-7b", "--cluster", "paper-h200"), "llama3-70b")


def test_unknown_cluster():
    assert_one_line_error(run("recommend", "--model", "llama3-70b", "--cluster", "paper-h300"), "paper-h200")


def test_config_missing_a_key(tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps({"num_hidden_layers": 2, "hidden_size": 64, "num_attention_heads": 4,
                               "vocab_size": 100, "hidden_act": "silu"}))
    assert_one_line_error(run("predict", "--model", str(cfg), "--cluster", "paper-h200"), "config.json",
                          "intermediate_size")


def test_cluster_yaml_with_negative_bandwidth_and_wrong_type(tmp_path):
    import yaml
    from costmodel.specs import hardware_dir
    d = yaml.safe_load((hardware_dir() / "clusters" / "paper-h200.yaml").read_text())
    d["inter_node"]["bandwidth_per_nic"] = "-100Gbps"
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(d))
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", str(bad)), "bad.yaml",
                          "inter_node.bandwidth_per_nic")
    d["inter_node"]["bandwidth_per_nic"] = "100Gbps"
    d["gpus_per_node"] = "eight"
    bad.write_text(yaml.safe_dump(d))
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", str(bad)), "gpus_per_node")


def test_invalid_layout_names_the_rule():
    assert_one_line_error(run("predict", "--model", "llama3-70b", "--cluster", "paper-h200", "--tp", "3"),
                          "TP x PP x CP")
    assert_one_line_error(run("predict", "--model", "llama3-70b", "--cluster", "paper-h200", "--tp", "16",
                              "--pp", "2"), "TP must divide the GPUs of one NVLink domain")


def test_gbs_not_divisible():
    assert_one_line_error(run("predict", "--model", "llama3-70b", "--cluster", "paper-h200", "--tp", "8",
                              "--gbs", "98", "--mbs", "1"), "gbs (98) must be divisible by DP x mbs")


def test_zero_gpus():
    assert_one_line_error(run("recommend", "--model", "llama3-70b", "--cluster", "paper-h200", "--nodes", "0"),
                          "--nodes")


def test_predict_from_a_hf_config_with_cp_and_vp(tmp_path):
    # the example shape: 64 nodes, TP8 PP8 CP2 VP8 on a 128-layer HF config
    cfg = json.loads((Path(__file__).resolve().parents[2] / "costmodel" / "catalog" / "llama3-8b.json").read_text())
    cfg = {k: v for k, v in cfg.items() if not k.startswith("_")}
    cfg["num_hidden_layers"] = 128
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    p = run("predict", "--model", str(path), "--cluster", "dgx-h100", "--nodes", "64", "--tp", "8", "--pp", "8",
            "--cp", "2", "--vp", "8", "--mbs", "1", "--gbs", "256", "--seq-len", "8192", "--json")
    assert p.returncode == 0, p.stderr
    rec = json.loads(p.stdout)
    assert rec["layout"]["dp"] == 64 * 8 // (8 * 8 * 2)
    assert rec["breakdown"]["cp_comm_s"] >= 0 and rec["breakdown"]["bubble_s"] > 0
    # interleaving: bubble = (PP-1)/(VP m) of the busy pipeline time, m = 256 / (DP x mbs) = 64
    assert rec["breakdown"]["bubble_s"] < 0.05 * rec["step_time_s"]


def test_usage_errors_exit_2_without_traceback():
    """Bad flag values, unknown commands and flags: one line naming the flag and exit 2, like every
    other error (typer >= 0.29 vendors click, so the CLI must not need the click package)."""
    import subprocess
    import sys
    for args, needle in ((["predict", "--model", "llama3-8b", "--cluster", "dgx-a100", "--tp", "abc"], "--tp: 'abc' is not a whole number"),
                         (["predikt"], "No such command 'predikt'"), (["predict", "--bogus"], "--bogus"),
                         (["predict", "--cluster", "dgx-a100"], "Missing option '--model'")):
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", *args], capture_output=True, text=True, timeout=120)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and needle in lines[0], (args, r.stderr[-500:])
        assert lines[0].startswith("costmodel: error: ")


def test_a_profile_value_outside_its_physical_range_is_named(tmp_path):
    """eta_max above 1 (130% MFU) or an infinite K-loop overhead are refused, not predicted."""
    import yaml
    src = yaml.safe_load((Path(__file__).resolve().parents[2] / "hardware" / "profiles" / "h200-sxm-141gb.yaml").read_text())
    for path, value, msg in ((("gemm", "bf16", "eta_max"), 5.0, "must be at most 1"),
                             (("gemm", "bf16", "k_half"), float("inf"), "must be a finite number")):
        d = yaml.safe_load(yaml.safe_dump(src))
        d[path[0]][path[1]][path[2]] = value
        f = tmp_path / "p.yaml"
        f.write_text(yaml.safe_dump(d))
        r = subprocess.run(CLI + ["predict", "--model", "llama3-8b", "--cluster", "paper-h200", "--profile", str(f)],
                           capture_output=True, text=True, env=ENV, timeout=120)
        assert r.returncode == 2 and msg in r.stderr and ".".join(path) in r.stderr, r.stderr


def test_non_megatron_stacks_get_settings_not_megatron_arguments():
    """Megatron-LM arguments configure the Megatron family only; torchtitan gets the layout in plain terms."""
    args = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "4", "--tp", "1", "--pp", "1",
            "--mbs", "1", "--gbs", "32", "--seq-len", "8192", "--zero", "3")
    tt = run(*args, "--stack", "torchtitan")
    assert tt.returncode == 0, tt.stderr
    assert "torchtitan configuration" in tt.stdout and "--tensor-model-parallel-size" not in tt.stdout
    assert "config.parallelism.data_parallel_shard_degree = 32" in tt.stdout
    assert "config.activation_checkpoint = None" in tt.stdout
    ds = run(*args, "--stack", "deepspeed")
    assert "Settings for deepspeed" in ds.stdout
    assert "DP with FSDP / ZeRO-3 (parameters, gradients and optimizer states sharded) (zero_optimization.stage: 3): 32" \
        in ds.stdout
    mc = run(*args, "--stack", "megatron")
    assert mc.returncode == 0, mc.stderr
    assert "Megatron-LM arguments" in mc.stdout and "--use-torch-fsdp2 \\\n  --no-gradient-accumulation-fusion" in mc.stdout
    # FSDP2 refuses expert parallelism (validate_args): an EP layout shards with Megatron-FSDP
    moe = run("predict", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "4", "--tp", "1", "--ep", "8",
              "--zero", "3", "--mbs", "1", "--gbs", "64", "--seq-len", "4096", "--recompute", "full")
    assert moe.returncode == 0, moe.stderr
    assert "--use-torch-fsdp2" not in moe.stdout and "--use-megatron-fsdp" in moe.stdout
    assert "--data-parallel-sharding-strategy optim_grads_params" in moe.stdout and "--ckpt-format fsdp_dtensor" in moe.stdout
    # Transformer Engine runs cuDNN's fused attention on Hopper: Megatron-core's "fused" backend
    assert "--attention-backend fused" in mc.stdout and "--use-flash-attn" not in mc.stdout
    fa3 = run(*args, "--stack", "megatron", "--attention-kernel", "fa3")
    assert "--attention-backend flash" in fa3.stdout
    nemo = run(*args, "--stack", "nemo", "--format", "nemo")
    assert "recipe.model.config.attention_backend = AttnBackend.fused" in nemo.stdout
    assert "from megatron.core.transformer.enums import AttnBackend" in nemo.stdout


def test_format_prints_the_layout_for_each_stack():
    """--format: Megatron-LM arguments, NeMo 2 recipe overrides, a torchtitan configuration or JSON for
    the same layout; an unknown format is refused before any work; --json carries the launch text."""
    args = ("predict", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "2", "--tp", "2", "--pp", "2",
            "--ep", "4", "--recompute", "full", "--gbs", "64")
    nemo = run(*args, "--format", "nemo")
    assert nemo.returncode == 0, nemo.stderr
    for line in ("recipe.trainer.strategy.tensor_model_parallel_size = 2",
                 "recipe.trainer.strategy.expert_model_parallel_size = 4", "recipe.data.global_batch_size = 64",
                 "recipe.model.config.recompute_granularity = 'full'", "recipe.trainer.plugins = bf16_mixed()"):
        assert line in nemo.stdout, line
    tt = run(*args, "--format", "torchtitan")
    assert "config.parallelism.expert_parallel_degree = 4" in tt.stdout
    assert "config.parallelism.num_pp_microbatches = 16" in tt.stdout        # 64 / (DP 4 x mbs 1)
    # torchtitan's ParallelismConfig has no expert TP field: the ETP the prediction assumed is a comment
    assert "expert_tensor_parallel_degree" not in tt.stdout and "the prediction assumed ETP 2" in tt.stdout
    assert "pipeline_parallel_schedule = '1F1B'" in tt.stdout
    vp = run(*args[:-2], "--gbs", "64", "--vp", "4", "--etp", "1", "--recompute-num-layers", "2", "--format", "torchtitan")
    assert vp.returncode in (0, 3), vp.stderr                           # 3: it does not fit 80 GB
    # torchtitan makes ceil((L + 2) / layers_per_stage) stages: 34 / 4 would make 9, not PP 2 x VP 4 = 8; each
    # stage's modules are listed instead
    for line in ("pipeline_parallel_schedule = 'Interleaved1F1B'", "split = [4, 4, 4, 4, 4, 4, 4, 4]",
                 "config.parallelism.module_fqns_per_model_part = [", "cannot express"):
        assert line in vp.stdout, line
    assert "expert_tensor_parallel_degree" not in vp.stdout and "assumed ETP" not in vp.stdout     # ETP 1: nothing to say
    # Qwen3-235B's 94 layers + 2 on PP 4 x VP 24 = 96 stages: one per stage (94 // 96 = 0 had been printed)
    qw = run("predict", "--model", "qwen3-235b-a22b", "--cluster", "hgx-h200", "--nodes", "32", "--gbs", "512", "--stack",
             "torchtitan", "--tp", "1", "--pp", "4", "--ep", "8", "--vp", "24", "--mbs", "2", "--recompute", "selective",
             "--zero", "1")
    assert "config.parallelism.pipeline_parallel_layers_per_stage = 1" in qw.stdout, qw.stderr
    j = json.loads(run(*args, "--format", "json", "--json").stdout)
    assert j["launch"]["format"] == "json" and json.loads(j["launch"]["text"])["ep"] == 4
    assert_one_line_error(run(*args, "--format", "yaml"), "--format")
    legacy = run("predict", "--model", "llama3-8b", "--cluster", "dgx-a100", "--tp", "2", "--stack", "megatron-legacy",
                 "--flash-attention")
    assert "--use-flash-attn" in legacy.stdout and "--attention-backend" not in legacy.stdout


def test_older_megatron_stacks_get_their_own_arguments():
    """BigScience's Megatron-DeepSpeed: ZeRO from DeepSpeed, --checkpoint-activations, no SP (predict's
    default leaves it off; --sp is refused), no interleaving; 2021-22 Megatron-LM: no FSDP, even stages,
    PyTorch DDP (--DDP-impl torch) as its overlapped reduction."""
    ds = run("predict", "--model", "bloom-176b", "--cluster", "dgx-a100", "--nodes", "48", "--tp", "4", "--pp", "12",
             "--mbs", "1", "--gbs", "2048", "--seq-len", "2048", "--stack", "megatron-deepspeed", "--recompute", "full")
    assert ds.returncode == 0, ds.stderr
    assert "Megatron-DeepSpeed (BigScience) arguments" in ds.stdout and "sp=False" in ds.stdout
    assert "--checkpoint-activations" in ds.stdout and "--zero-stage 1" in ds.stdout
    for absent in ("--sequence-parallel", "--use-distributed-optimizer", "--pipeline-model-parallel-layout",
                   "--recompute-granularity", "--use-torch-fsdp2"):
        assert absent not in ds.stdout, absent
    base = ["predict", "--model", "llama3-8b", "--cluster", "dgx-a100", "--nodes", "2", "--tp", "2", "--pp", "2"]
    assert_one_line_error(run(*base, "--stack", "megatron-deepspeed", "--sp"), "no sequence parallelism")
    assert_one_line_error(run(*base, "--stack", "megatron-deepspeed", "--vp", "2"), "no interleaved schedule")
    assert_one_line_error(run(*override(base, "--stack", "megatron-legacy", "--pp", "3", "--nodes", "3")), "evenly")
    assert_one_line_error(run(*override(base, "--stack", "megatron-legacy", "--pp", "1", "--zero", "3")), "ZeRO")
    lg = run(*base, "--stack", "megatron-legacy", "--zero", "0", "--dp-overlap", "--recompute", "full", "--seq-len", "2048")
    assert lg.returncode == 0, lg.stderr
    assert "--DDP-impl torch" in lg.stdout and "--overlap-grad-reduce" not in lg.stdout


def test_models_counts_a_config_file_without_a_cluster_or_layout(tmp_path):
    """A config.json could be counted only through predict, which needs a cluster and a layout the model fits
    (Phi-4's 10 KV heads refuse TP 8 before any count): models --model takes files and catalog names."""
    cfg = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
           "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "hidden_act": "silu",
           "tie_word_embeddings": False}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    p = run("models", "--model", f, "--model", "llama3-8b", "--json")
    assert p.returncode == 0, p.stderr
    mine, cat = json.loads(p.stdout)
    assert mine["params"] == cat["params"] == 8_030_261_248 and mine["name"] == tmp_path.name
    bad = run("models", "--model", tmp_path / "none.json")
    assert bad.returncode == 2 and "--model" in bad.stderr and "does not exist" in bad.stderr, bad.stderr


def test_models_json_and_predict_json_report_total_and_active_params():
    """DeepSeek-V3: 671B total and about 37B active (MTP excluded, its module reported apart)."""
    p = run("models", "--json")
    assert p.returncode == 0, p.stderr
    ds = next(r for r in json.loads(p.stdout) if r["name"] == "deepseek-v3")
    assert ds["params"] == pytest.approx(671e9, rel=0.005) and ds["active_params"] == pytest.approx(37e9, rel=0.02)
    assert ds["attention"] == "mla" and ds["moe_layers"] == 58 and ds["mtp_params"] > 10e9
    # the experts' width and the three dense layers' (config.json moe_intermediate_size, intermediate_size)
    assert (ds["ffn_hidden"], ds["dense_layers"], ds["dense_ffn_hidden"]) == (2048, 3, 18432)
    q = run("predict", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "4", "--tp", "1", "--pp", "1",
            "--ep", "8", "--mbs", "1", "--gbs", "64", "--seq-len", "4096", "--zero", "1", "--json")
    assert q.returncode == 0, q.stderr
    rec = json.loads(q.stdout)
    assert rec["params"] == pytest.approx(30.5e9, rel=0.005) and rec["active_params"] == pytest.approx(3.3e9, rel=0.02)


def test_hardware_lists_every_id_whole_and_as_json():
    """The ids users type (GPU and cluster file stems) are printed whole, however narrow the table;
    --json gives every GPU and cluster with the numbers the model uses."""
    from costmodel.specs import list_clusters, list_gpus
    p = run("hardware", "--no-sources")
    assert p.returncode == 0, p.stderr
    for key in list_gpus() + list_clusters():
        assert key in p.stdout, key
    j = run("hardware", "--json", "--no-sources")
    d = json.loads(j.stdout)
    assert [g["gpu"] for g in d["gpus"]] == list_gpus() and [c["cluster"] for c in d["clusters"]] == list_clusters()
    b200 = next(g for g in d["gpus"] if g["gpu"] == "b200-sxm-180gb")
    assert b200["slowdown_temp_c"] == 91 and b200["power_basis"]["flop_w"] == "fitted" and "sources" not in b200
    assert "sources" in json.loads(run("hardware", "--json").stdout)["clusters"][0]
    # the V100 has no bf16: its 16-bit peak is fp16's, said in the table and the JSON
    v100 = next(g for g in d["gpus"] if g["gpu"] == "v100-sxm2-32gb")
    assert (v100["peak_16bit_tflops"], v100["peak_16bit_dtype"], b200["peak_16bit_dtype"]) == (125.0, "fp16", "bf16")


def test_recommend_with_no_layout_in_memory_is_infeasible_exit_3():
    """GPT-3 175B at gbs 128 on the 32 MI250 GCDs: no valid layout fits in 64 GiB; the answer is the
    memory limit that binds (exit 3), with the smallest layout's need."""
    p = run("recommend", "--model", "gpt3-175b", "--cluster", "mi250")
    assert p.returncode == 3 and p.stdout == ""
    line = p.stderr.strip().splitlines()
    # 5,858 layouts of one shard group and 142 ZeRO-3 ones sharded within a node (HSDP, Megatron-FSDP's instances)
    assert len(line) == 1 and line[0].startswith("costmodel: infeasible: none of the 6,000 valid layouts fits")
    assert "93.7 GiB per GPU" in line[0]


def test_scale_out_what_ifs_on_the_command_line():
    """--oversubscription slows an EP all-to-all that crosses two scalable units of the SuperPOD and
    is refused, in one line, on a cluster file without switch tiers; --scale-out-gbps is range-checked."""
    args = ["predict", "--model", "qwen3-235b-a22b", "--cluster", "dgx-h100-superpod", "--nodes", "256", "--gbs", "2048",
            "--seq-len", "4096", "--tp", "4", "--pp", "4", "--ep", "128", "--mbs", "1", "--recompute", "full",
            "--moe-dispatcher", "alltoall", "--json"]
    base, over = run(*args), run(*args, "--oversubscription", "4")
    assert base.returncode == 0 and over.returncode == 0, base.stderr + over.stderr
    ep = [json.loads(p.stdout)["breakdown"]["ep_comm_s"] for p in (base, over)]
    assert ep[1] > 1.4 * ep[0]
    assert "cluster_what_if" not in json.loads(base.stdout)
    assert json.loads(over.stdout)["cluster_what_if"] == "every switch tier 4:1"
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--oversubscription", "2"),
                          "--oversubscription", "no inter_node.tiers")
    assert_one_line_error(run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--scale-out-gbps", "0"),
                          "--scale-out-gbps", "outside 1 .. 1,600")
    # the flag keeps to the fastest NIC a cluster file may give (ConnectX-9, 1.6 Tb/s)
    assert_one_line_error(run("collectives", "--cluster", "aws-p5", "--nodes", "2", "--scale-out-gbps", "100000"),
                          "--scale-out-gbps", "outside 1 .. 1,600 Gb/s per NIC")
    # a job inside one NVLink domain crosses no network: the what-if says it changes nothing
    one = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--scale-out-gbps", "100",
              "--recompute", "full", "--json")
    assert one.returncode == 0, one.stderr
    assert "no collective crosses the network" in json.loads(one.stdout)["cluster_what_if"]
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--recompute", "bogus"),
                          "--recompute", "'bogus' is not one of none, selective, full, auto")


def test_predict_says_when_the_power_limit_sets_the_step():
    """BF16 GEMM tables measured in bursts (H100): the 700 W limit holds them below the maximum clock
    and predict says so beside the breakdown; FP8 tables measured under the limit need no such line."""
    args = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--tp", "1", "--pp", "1",
            "--mbs", "1", "--gbs", "8", "--seq-len", "4096")
    p = run(*args)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("power-limited:"))
    assert "700 W limit" in line and "of 1980 MHz" in line
    rec = json.loads(run(*args, "--json").stdout)
    assert f"{rec['step_time_s']:.3f} s per step" in p.stdout.replace("\n", " ")
    assert rec["step_time_s"] > rec["uncapped_step_time_s"]
    # (fp8 parameters: the cached fp8 weights and their transposes beside bf16 ones would not fit at TP1)
    q = run(*args, "--precision", "fp8", "--fp8-param-gather", "--zero", "1")
    assert q.returncode == 0, q.stderr
    assert "power-limited:" not in q.stdout
    # caps per stage: the busiest stage's power and the slowest stage's clock are said apart
    m = run("predict", "--model", "llama3-70b", "--cluster", "paper-h200", "--tp", "2", "--pp", "4", "--cp", "2", "--vp",
            "2", "--mbs", "1", "--zero", "1", "--power-cap-w", "450,450,450,575")
    line = " ".join(ln for ln in m.stdout.splitlines() if ln.startswith("power-limited:"))
    assert "450/575 W limits" in line and "draw up to" in line and "the slowest stage's run at" in line


def test_recommend_gives_the_winners_power_limited_step_predict_prints():
    """On B200 the 1000 W limit holds the burst-measured BF16 GEMMs near 0.78 of their clock: the
    winner's step under it is the one predict prints for that layout, well above the table's."""
    p = run("recommend", "--model", "llama3-70b", "--cluster", "dgx-b200", "--nodes", "4", "--gbs", "128", "--top", "3")
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("under its 1000 W power limit"))
    capped = float(line.split("drop: ")[1].split(" s")[0])
    rec = json.loads(run("recommend", "--model", "llama3-70b", "--cluster", "dgx-b200", "--nodes", "4", "--gbs",
                         "128", "--top", "1", "--json").stdout)["ranked"][0]
    assert capped == pytest.approx(rec["step_time_s"], abs=1e-3) and capped > 1.1 * rec["uncapped_step_time_s"]
    lay = rec["layout"]
    pred = json.loads(run("predict", "--model", "llama3-70b", "--cluster", "dgx-b200", "--nodes", "4", "--gbs", "128",
                          *(f"--{k.replace('_', '-')}={v}" for k, v in lay.items()
                            if k in ("tp", "pp", "cp", "vp", "mbs", "recompute", "zero")),
                          *(("--tp-comm-overlap",) if rec["recipe"]["tp_comm_overlap"] else ()),
                          *(("--dp-overlap",) if rec["recipe"]["dp_overlap"] else ()), "--json").stdout)
    assert pred["step_time_s"] == pytest.approx(rec["step_time_s"], rel=1e-6)
    assert pred["uncapped_step_time_s"] == pytest.approx(rec["uncapped_step_time_s"], rel=1e-6)


def test_the_per_gpu_table_says_which_gpus_stand_for_the_rest():
    """TP 8 x PP 2 on 16 GB200 trays (64 GPUs): each stage fills whole trays, whose first tray stands
    for the others, so 8 GPUs are listed and the title says of how many."""
    p = run("predict", "--model", "llama3-70b", "--cluster", "gb200-nvl72", "--nodes", "16", "--tp", "8", "--pp", "2",
            "--mbs", "1", "--gbs", "64", "--seq-len", "4096")
    assert p.returncode == 0, p.stderr
    text = " ".join(p.stdout.split())
    assert "(hottest 8 of 8 listed of 64 GPUs, the other nodes of a stage alike)" in text


def test_selective_recompute_of_a_fused_attention_core_says_it_buys_no_memory():
    """Megatron's selective recompute re-runs the attention core; fused, the core keeps no s x s scores,
    so the note says it saves nothing and costs the core's forward; with MLP recomputed too, no note."""
    base = ["predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gbs", "64", "--tp", "2", "--json"]
    sel = run(*base, "--recompute", "selective")
    none = run(*base, "--recompute", "none")
    assert sel.returncode == 0 and none.returncode == 0, sel.stderr + none.stderr
    a, b = json.loads(sel.stdout), json.loads(none.stdout)
    note = [ln for ln in sel.stderr.splitlines() if "re-runs only the attention core" in ln]
    assert len(note) == 1, sel.stderr
    assert "saves 0.00 GiB" in note[0] and a["peak_mem_bytes"] == b["peak_mem_bytes"]
    assert f"costs {a['uncapped_step_time_s'] - b['uncapped_step_time_s']:.3f} s" in note[0]
    assert a["uncapped_step_time_s"] > b["uncapped_step_time_s"]
    assert "name other modules (--recompute-modules)" in note[0]
    # llm-foundry checkpoints whole blocks: its selective recompute is refused, as DeepSpeed's is
    lf = run(*[w for w in base if w not in ("--tp", "2")], "--recompute", "selective", "--stack", "llm-foundry")
    assert lf.returncode == 2 and "re-runs whole blocks" in lf.stderr, lf.stderr
    mlp = run(*base, "--recompute", "selective", "--recompute-modules", "core_attn,mlp")
    assert mlp.returncode == 0 and "re-runs only the attention core" not in mlp.stderr, mlp.stderr


def test_torchtitan_fsdp_with_a_pipeline_points_to_zero_1():
    """ZeRO-3 with PP is refused; on torchtitan the message says its FSDP2 with a pipeline is --zero 1."""
    tt = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--stack", "torchtitan", "--zero", "3",
             "--pp", "2", "--gbs", "16")
    assert_one_line_error(tt, "ZeRO-3/FSDP is modelled without pipeline parallelism", "--zero 1")
    mg = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--zero", "3", "--pp", "2", "--gbs", "16")
    assert_one_line_error(mg, "ZeRO-3/FSDP is modelled without pipeline parallelism")
    assert "--zero 1" not in mg.stderr


def test_a_profile_of_other_silicon_is_refused_a_same_die_variant_noted():
    """An A100 40GB fit (312 TFLOP/s, 400 W) on an H100 cluster (989 TFLOP/s, 700 W) would predict an
    MFU and a power no H100 reaches: refused naming both; the H200's fit (same peak and TDP as the
    H100 SXM) only gets the note."""
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--profile",
                              "hardware/profiles/a100-sxm-40gb.yaml"),
                          "--profile: hardware/profiles/a100-sxm-40gb.yaml was fitted for A100-SXM-40GB (312 TFLOP/s, "
                          "400 W), the cluster has H100-SXM-80GB (989 TFLOP/s, 700 W)")
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "2", "--profile",
            "hardware/profiles/h200-sxm-141gb.yaml")
    assert p.returncode == 0 and "was fitted for h200-sxm-141gb, the cluster has h100-sxm-80gb" in p.stderr
    # compare and collectives take --profile too, and refuse it the same way
    assert_one_line_error(run("compare", "--log", "tests/data/logs/megatron_synthetic_gpt8b_ddp_for_h100_power_trace.log",
                              "--cluster", "dgx-h100", "--profile", "hardware/profiles/mi300x.yaml",
                              "--attention-kernel", "fa2"), "--profile: hardware/profiles/mi300x.yaml was fitted for MI300X")
    assert_one_line_error(run("collectives", "--cluster", "dgx-h100", "--profile", "hardware/profiles/a100-sxm-80gb.yaml"),
                          "--profile: hardware/profiles/a100-sxm-80gb.yaml was fitted for A100-SXM-80GB")


def test_moe_and_cap_values_out_of_reach_are_named():
    """A dense model's MoE flag says the model is dense before any value check; a router imbalance
    above sqrt(E/k - 1) (Mixtral: sqrt(3), every token on the same two experts) cannot happen; a NaN
    power cap is not a number, on predict as on recommend."""
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--moe-capacity-factor",
                              "1.5"), "--moe-capacity-factor: llama3-8b is dense (no experts)")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--no-moe-grouped-gemm"),
                          "--no-moe-grouped-gemm: llama3-8b is dense")            # named as typed
    assert_one_line_error(run("predict", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "2", "--tp", "2",
                              "--ep", "8", "--moe-expert-load-cv", "50"),
                          "--moe-expert-load-cv: 50 exceeds sqrt(E/k - 1) = 1.73")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "2",
                              "--power-cap-w", "nan"), "--power-cap-w: must be a finite number, got nan")


def test_an_option_given_twice_is_refused_naming_both_values():
    """click keeps the last of two values silently: --tp 8 ... --tp 4 would run at TP 4 and --sp --no-sp
    without SP. Both are refused in one line naming the two; a repeatable option (--derate) and the same
    value twice are not."""
    base = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--gbs", "64", "--seq-len", "4096",
            "--mbs", "1")
    assert_one_line_error(run(*base, "--tp", "8", "--pp", "1", "--tp=4"), "--tp: given twice (--tp 8, then --tp 4)")
    assert_one_line_error(run(*base, "--tp", "2", "--sp", "--no-sp"), "--no-sp: given twice (--sp, then --no-sp)")
    p = run(*base, "--tp", "1", "--pp", "1", "--tp", "1", "--derate", "0:1=1500", "--derate", "0:2=1500", "--json")
    assert p.returncode == 0, p.stderr


def test_models_json_names_each_attention_kind():
    """BLOOM and GPT-3 have a key/value head per query head (mha), Llama 3 8B 8 groups of 4 (gqa),
    DeepSeek-V3 latent attention (mla)."""
    got = {r["name"]: r["attention"] for r in json.loads(run("models", "--json").stdout)}
    assert (got["bloom-176b"], got["gpt3-175b"], got["llama3-8b"], got["deepseek-v3"]) == ("mha", "mha", "gqa", "mla")


def test_recommend_prints_the_winner_s_band_and_whether_the_list_lies_inside_it():
    """The one-sigma band predict prints is the winner's here too, with the spread of the listed steps
    against it: layouts inside one sigma of each other are ranked by the model alone."""
    p = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "64",
            "--seq-len", "4096", "--top", "3")
    assert p.returncode == 0, p.stderr
    import re
    line = p.stdout.replace("\n", " ")
    m = re.search(r"the winner's step ([\d.]+) ± ([\d.]+) s at one sigma .*?(all 3 listed lie within|the listed "
                  r"steps span)", line)
    assert m and 0 < float(m.group(2)) < float(m.group(1)), line


def test_recommend_holds_the_layout_options_it_is_given_fixed():
    """--tp 2 --recompute full pins the search: every ranked layout has them, and the best of them is
    no faster than the unpinned winner; a pin no valid layout has is one line naming it."""
    base = ("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "64",
            "--seq-len", "4096", "--top", "5", "--json")
    free = json.loads(run(*base).stdout)["ranked"]
    p = run(*base, "--tp", "2", "--recompute", "full")
    assert p.returncode == 0, p.stderr
    ranked = json.loads(p.stdout)["ranked"]
    assert ranked and all(r["layout"]["tp"] == 2 and r["layout"]["recompute"] == "full" for r in ranked)
    assert ranked[0]["step_time_s"] >= free[0]["step_time_s"]
    assert_one_line_error(run(*base[:-1], "--tp", "3"), "no valid layout of llama3-8b", "tp=3",
                          "TP 3 does not divide the 8 GPUs")
    # a pinned DP had been replaced by the rest of the GPUs before the rule was looked up
    assert_one_line_error(run(*base[:-1], "--dp", "3"), "has dp=3: DP 3 does not divide the 8 GPUs")
    assert_one_line_error(run(*base[:-1], "--recompute", "auto"), "--recompute", "'auto' is not one of")
    # the rule the pinned degree breaks, as predict names it
    assert_one_line_error(run("recommend", "--model", "mixtral-8x7b", "--cluster", "dgx-h100", "--nodes", "4",
                              "--ep", "3"), "has ep=3: EP must divide the number of experts (8)")



def test_recommend_searches_a_pinned_value_its_default_grid_leaves_out():
    """A pin outside the default grid is searched, not reported as invalid: selective recompute (dropped
    as dominated under flash attention), mbs 3 (not a power of two), and the DeepSpeed stack's ZeRO-2
    (the stack's own stages are searched); Megatron-core has no ZeRO-2 and says so through predict."""
    base = ("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "96",
            "--seq-len", "4096", "--top", "3", "--json")
    for pin, field, value in ((("--recompute", "selective"), "recompute", "selective"), (("--mbs", "3"), "mbs", 3),
                              (("--stack", "deepspeed", "--zero", "2"), "zero", 2)):
        p = run(*base, *pin)
        assert p.returncode == 0, p.stderr
        ranked = json.loads(p.stdout)["ranked"]
        assert ranked and all(r["layout"][field] == value for r in ranked)
    assert_one_line_error(run(*base[:-1], "--zero", "2"), "no valid layout of llama3-8b", "zero=2")


def test_recommend_at_an_inlet_temperature_ranks_as_predict_does_there():
    """--inlet-temp-c is a condition, not a limit: alone it keeps the time objective's ranking (no ILP,
    whose discrete caps under the slowdown temperature had answered 450 W and a slower step), each
    ranked layout predicted at that inlet: a 55 C inlet holds an 8-GPU H100 node at its 89 C slowdown
    temperature, throttled, where the cluster's 25 C inlet leaves it cooler and faster."""
    base = ("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "64",
            "--seq-len", "4096", "--top", "2", "--json")
    p = run(*base, "--inlet-temp-c", "55")
    assert p.returncode == 0, p.stderr
    hot, cool = json.loads(p.stdout)["ranked"][0], json.loads(run(*base).stdout)["ranked"][0]
    assert hot["max_temp_c"] == pytest.approx(89.0, abs=0.01) and hot["throttled"]
    assert cool["max_temp_c"] < 80 and hot["step_time_s"] > cool["step_time_s"] * 1.05


def test_recommend_refuses_an_ilp_solver_without_the_ilp():
    """--solver chooses the ILP's solver: without the ILP (the time objective, no limit) it would do
    nothing, and is refused as --cap-levels is; with one it runs."""
    base = ("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "64",
            "--seq-len", "4096")
    assert_one_line_error(run(*base, "--solver", "highs"), "--solver", "applies to the energy ILP")
    assert_one_line_error(run(*base, "--solver", "glpk"), "--solver", "'glpk' is not one of cbc, highs")
    p = run(*base, "--objective", "energy", "--solver", "cbc", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["objective"] == "energy"


def test_recommend_balances_the_pipeline_stages_the_mtp_module_weighs_on():
    """DeepSeek-V3 on two GB200 NVL72 racks: the last stage also runs the logits, the loss and the MTP
    module.  recommend ranks each shortlisted 1F1B layout at the split that balances its stages (at PP 18
    here the last stages hold one layer each, where the default split gives the last seven four), prints the
    flags that set it (Megatron's first/last-stage counts, or its layout string where those cannot say
    it), and predict with that split (--pp-layout) gives the same step, faster than the default split's."""
    base = ("--model", "deepseek-v3", "--cluster", "gb200-nvl72", "--nodes", "36", "--gbs", "1024")
    p = run("recommend", *base, "--top", "3", "--json", "--format", "megatron")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    won = out["ranked"][0]
    split = won["pipeline_rank_layers"]
    assert len(split) == won["layout"]["pp"] and sum(split) == 61 and split[-1] < max(split)
    segs = ["t" * n for n in split]
    segs[0], segs[-1] = "E" + segs[0], segs[-1] + "mL"
    text = out["launch"]["text"]
    assert (f"--decoder-last-pipeline-num-layers {split[-1]}" in text
            or f'--pipeline-model-parallel-layout "{"|".join(segs)}"' in text), text
    lay = won["layout"]
    flags = [f"--{k}={lay[k]}" for k in ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "mbs", "recompute", "zero")]
    flags += [f"--recompute-num-layers={lay['recompute_num_layers']}"] if lay.get("recompute_num_layers") else []
    # the switches the search turned on (its notes name them; the record's recipe holds them)
    rec = won["recipe"]
    flags += [f for k, f in (("dp_overlap", "--dp-overlap"), ("moe_grouped_gemm", "--moe-grouped-gemm"),
                             ("moe_permute_fusion", "--moe-permute-fusion"),
                             ("moe_router_fusion", "--moe-router-fusion")) if rec[k]]
    flags.append(f"--moe-dispatcher={rec['moe_dispatcher']}")
    same = json.loads(run("predict", *base, *flags, "--pp-layout", "|".join(segs), "--json").stdout)
    even = json.loads(run("predict", *base, *flags, "--json").stdout)
    assert same["step_time_s"] == pytest.approx(won["step_time_s"], rel=1e-6)
    assert won["step_time_s"] < even["step_time_s"] * 0.97


def test_predict_refuses_what_megatron_lm_refuses_at_start_up():
    """Combinations Megatron-LM's validate_args or TransformerConfig refuse are refused before a launch
    is printed: offload with ZeRO-3 (FSDP2 has no distributed optimizer), delayed FP8 with BF16 edge
    layers or moe_act/layernorm recomputation, moe_act without grouped GEMM, VP > 1 without P2P overlap
    at PP 2; the tensorwise FP8 recipe and grouped GEMM run."""
    base = ["predict", "--cluster", "dgx-h100", "--mbs", "1", "--gbs", "128"]
    cases = [
        (["--model", "llama3-70b", "--nodes", "8", "--tp", "8", "--recompute", "full", "--zero", "3", "--optimizer-offload"],
         "--optimizer-offload", "excludes the distributed optimizer"),
        (["--model", "llama3-70b", "--nodes", "8", "--tp", "4", "--pp", "4", "--precision", "fp8", "--bf16-edge-layers",
          "1"],
         "--bf16-edge-layers", "delayed FP8 scaling does not support BF16 first/last"),
        (["--model", "mixtral-8x7b", "--nodes", "4", "--tp", "2", "--ep", "8", "--seq-len", "4096", "--recompute",
          "selective", "--recompute-modules", "moe_act,layernorm", "--no-moe-grouped-gemm"],
         "--recompute-modules", "grouped GEMM experts only"),
        (["--model", "mixtral-8x7b", "--nodes", "4", "--tp", "2", "--ep", "8", "--seq-len", "4096", "--recompute",
          "selective", "--recompute-modules", "moe_act,layernorm", "--moe-grouped-gemm", "--precision", "fp8"],
         "--recompute-modules", "does not support moe_act or layernorm"),
        (["--model", "llama3-8b", "--nodes", "1", "--tp", "2", "--pp", "2", "--vp", "4", "--no-pp-overlap"],
         "--no-pp-overlap", "only at PP > 2"),
    ]
    for extra, flag, why in cases:
        r = run(*base, *extra)
        assert r.returncode == 2 and r.stderr.count("\n") == 1 and flag in r.stderr and why in r.stderr, (extra, r.stderr)
    # (with fp8 parameters: the cached fp8 weights and transposes beside bf16 ones pass the HBM here)
    ok = run(*base, "--model", "llama3-70b", "--nodes", "8", "--tp", "4", "--pp", "4", "--precision", "fp8", "--bf16-edge-layers", "1",
             "--fp8-recipe", "tensorwise", "--fp8-param-gather")
    assert ok.returncode == 0, ok.stderr


def test_nemo_zero3_shards_and_splits_pipelines_on_the_strategy():
    """NeMo 2: Megatron-FSDP shards only with data_parallel_sharding_strategy optim_grads_params (its
    default is no_shard) and runs the distributed optimizer; the pipeline split is the strategy's
    ParallelismConfig (copied over model.config at setup), not model.config's."""
    z3 = run("predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--tp", "8", "--mbs", "1",
             "--gbs", "128", "--recompute", "full", "--zero", "3", "--stack", "nemo")
    assert z3.returncode == 0, z3.stderr
    assert "recipe.trainer.strategy.ddp.data_parallel_sharding_strategy = 'optim_grads_params'" in z3.stdout
    assert "recipe.optim.config.use_distributed_optimizer = True" in z3.stdout
    pp = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "3", "--pp", "3", "--mbs", "1",
             "--gbs", "96", "--stack", "nemo")
    assert pp.returncode == 0, pp.stderr
    assert "recipe.trainer.strategy.num_layers_in_first_pipeline_stage" in pp.stdout or \
        "recipe.trainer.strategy.account_for_embedding_in_pipeline_split" in pp.stdout, pp.stdout
    assert "recipe.model.config.num_layers_in" not in pp.stdout and "recipe.model.config.account_for" not in pp.stdout


def test_printed_settings_say_what_their_format_cannot_set():
    """What a prediction priced and a printed format cannot set is a comment, never dropped: packed
    documents and repeated K/V heads in every format, the optimizer offload in torchtitan's; DeepSpeed's overlap switch is
    named (overlap_comm is off below ZeRO-3 by default); BigScience's Megatron-DeepSpeed has no MoE
    flags (microsoft's fork does), so none are printed."""
    base = ["predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--mbs", "1", "--gbs", "64"]
    for fmt in ("megatron", "nemo", "torchtitan"):
        r = run(*base, "--doc-tokens", "1024", "--recompute", "full", "--format", fmt)
        assert r.returncode == 0 and "packed sequences: documents of 1024 tokens" in r.stdout, (fmt, r.stderr)
        # repeated K/V heads are a code version, not a flag: every format says it was priced
        kv = run(*base, "--kv-repeat", "--recompute", "full", "--format", fmt)
        assert kv.returncode == 0 and "K and V repeated 4x to the query heads" in kv.stdout, (fmt, kv.stderr)
    tt = run(*base, "--stack", "deepspeed", "--format", "torchtitan", "--zero", "3", "--optimizer-offload")
    assert tt.returncode == 0 and "assumed the optimizer offloaded to the host CPU" in tt.stdout, tt.stderr
    ds = run("predict", "--model", "llama3-8b", "--cluster", "hgx-h200", "--nodes", "2", "--stack", "deepspeed", "--mbs",
             "1", "--gbs", "64", "--zero", "1", "--dp-overlap")
    assert ds.returncode == 0 and "(zero_optimization.overlap_comm: true)" in ds.stdout, ds.stderr
    md = run("predict", "--model", "mixtral-8x7b", "--cluster", "dgx-a100", "--nodes", "4", "--stack", "megatron-deepspeed",
             "--ep", "8", "--mbs", "1", "--gbs", "128", "--seq-len", "4096")
    assert md.returncode in (0, 3), md.stderr
    assert "--num-experts 8 --ep-world-size 8" not in md.stdout.replace("microsoft/Megatron-DeepSpeed's --num-experts 8 "
                                                                        "--ep-world-size 8", "")
    assert "this fork has no MoE layers" in md.stdout


def test_megatron_2022_overlaps_only_ddp():
    """Megatron-LM 2021-22 overlapped the DP reduction only through PyTorch DDP (ZeRO 0); its
    distributed optimizer reduced after the backward, so a ZeRO-1/2 layout is priced with the
    reduction exposed and recommend cannot rank on an overlap the stack lacks."""
    import numpy as np
    from costmodel.specs import Recipe
    from costmodel.stacks import dp_overlap_on, get_stack, stack_recipe
    r = stack_recipe(get_stack("megatron-legacy"), 1536, 2048, "bf16", dp_overlap=True)
    assert list(dp_overlap_on(r, np.array([0, 1, 2]), True)) == [True, False, False]
    r = stack_recipe(get_stack("megatron"), 1536, 2048, "bf16", dp_overlap=True)
    assert list(dp_overlap_on(r, np.array([0, 1, 3]), True)) == [True, True, True]
    assert isinstance(r, Recipe)


def test_recommend_keeps_to_what_megatron_lm_starts():
    """recommend checks the recipe's Megatron-LM start-up rules before its search (delayed FP8 with BF16
    edge layers), and an offloaded optimizer on Megatron searches ZeRO-1 only: its offload is the
    distributed optimizer's, which FSDP2 (ZeRO-3) excludes."""
    r = run("recommend", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--precision", "fp8",
            "--bf16-edge-layers", "1")
    assert r.returncode == 2 and "--bf16-edge-layers: Megatron-LM's delayed FP8 scaling" in r.stderr, r.stderr
    off = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--optimizer-offload",
              "--top", "3", "--json")
    assert off.returncode == 0, off.stderr
    assert {x["layout"]["zero"] for x in json.loads(off.stdout)["ranked"]} == {1}


@pytest.mark.parametrize("value,needle", [
    ("4,5,6,7,0,1,2", "is not each of the 8 slots 0-7 once"),
    ("0-x:1,2", "is not [NODES:]SLOTS"),
    ("3-1:0,1,2,3,4,5,6,7", "is not [NODES:]SLOTS"),
    ("5:0,1,2,3,4,5,6,7", "node 5 is not in the layout")])
def test_a_bad_device_order_is_one_line(value, needle):
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--tp", "2",
                              "--pp", "4", "--gbs", "128", "--device-order", value), "--device-order", needle)
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--tp", "2",
                              "--pp", "4", "--gbs", "128", "--device-order", "0:" + ",".join(map(str, range(8))),
                              "--device-order", "0-0:" + ",".join(map(str, range(8)))), "node 0 is ordered twice")


def test_predict_prices_recommend_s_placement_with_its_device_order():
    """Llama 3 8B at TP2 PP4 on one DGX H100 under a 61 C limit: the ILP moves a hotter stage (512 W cap)
    off the slots the front slots' exhaust preheats (hardware/clusters/dgx-h100.yaml cooling.upstream) and
    exports that CUDA_VISIBLE_DEVICES order.  In Megatron's rank order the stages sit where the ILP did
    not put them, above 61 C; with --device-order predict finds each slot within the ILP's bound."""
    p = run("recommend", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--pp", "4", "--tp", "2",
            "--objective", "energy", "--max-temp-c", "61", "--json")
    rec = json.loads(p.stdout)
    order = rec["device_order_by_node"]["0"]
    assert p.returncode == 0 and sorted(order) == list(range(8)) and order != list(range(8))
    ilp = {g["slot"]: (g["stage"], g["temp_bound_c"]) for g in rec["per_gpu"]}
    caps = ",".join(f"{s['cap_w']:.0f}" for s in rec["stages"])
    layers = "|".join("t" * s["layers"] for s in rec["stages"])
    args = ["predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--gbs", "128", "--tp", "2",
            "--pp", "4", "--mbs", "1", "--recompute", "none", "--zero", "0", "--tp-comm-overlap", "--pp-layout",
            "E" + layers + "L", "--power-cap-w", caps, "--json"]
    placed = json.loads(run(*args, "--device-order", ",".join(map(str, order))).stdout)["per_gpu"]
    ranked = json.loads(run(*args).stdout)["per_gpu"]
    for g in placed:        # the ILP bounds each slot's temperature from above (its caps' power upstream)
        assert ilp[g["slot"]][0] == g["stage"] and ilp[g["slot"]][1] - 1.5 < g["temp_c"] <= ilp[g["slot"]][1] + 0.5, g
    assert max(g["temp_c"] for g in placed) < 61 < max(g["temp_c"] for g in ranked)
