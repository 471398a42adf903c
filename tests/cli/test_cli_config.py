"""predict --config: a run's own NeMo YAML, Megatron-Bridge YAML or torchtitan TOML as the layout source
(real configs)."""
import json

import pytest
from pathlib import Path

from test_cli import assert_one_line_error, override, run

REPO = Path(__file__).resolve().parents[2]
NEMO = REPO / "tests" / "data" / "configs" / "nemo_launcher_llama3_8b.yaml"
TITAN = REPO / "tests" / "data" / "configs" / "torchtitan_llama3_8b.toml"
BRIDGE_DSV3 = REPO / "tests" / "data" / "configs" / "megatron_bridge_deepseek_v3_pretrain_h100_fp8_sc_v1.yaml"
#: Megatron-Bridge's DeepSeek-V3 pipeline layout (the BRIDGE_DSV3 file's model.pipeline_model_parallel_layout)
DSV3_LAYOUT = "Et|(tt|)*30mL"
BRIDGE_L3 = REPO / "tests" / "data" / "configs" / "megatron_bridge_llama3_8b_sft_gb200_fp8_mx_v1.yaml"


def test_nemo_launcher_config_sets_layout_batch_and_world():
    """NeMo-Framework-Launcher's Llama 3 8B: 16 nodes x 8 GPUs, TP 1, PP 1, CP 2, mbs 1, gbs 2048, seq 8192,
    bf16, the distributed optimizer, no recomputation, flash attention."""
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    lay = r["layout"]
    assert (lay["tp"], lay["pp"], lay["cp"], lay["dp"], lay["mbs"], lay["zero"], lay["recompute"]) == \
        (1, 1, 2, 64, 1, 1, "none")
    assert r["num_gpus"] == 128 and r["recipe"]["gbs"] == 2048 and r["recipe"]["seq_len"] == 8192
    assert "--config" in p.stderr and "model.context_parallel_size" not in p.stderr   # a summary, not an error


def test_predict_config_names_the_stack_defaults_it_assumed():
    """The NeMo launcher's Llama 3 8B sets flash attention, the DP overlap, no TP-comm overlap and the fused
    cross-entropy; what it leaves (the optimizer, the attention kernel, ...) comes from NeMo's defaults,
    and predict says which, with their values; a flag given is not listed, nor the fp8 recipe, fp8
    parameter gathers or BF16 edge layers of a bf16 run, the MoE switches of a dense model or the recompute
    modules of torchtitan's per-op checkpointing."""
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO), "--optimizer", "lionw")
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stderr.splitlines() if "defaults:" in ln)
    assert "nemo's defaults:" in line and "attention_kernel='cudnn'" in line
    # the file's cross_entropy_loss_fusion: true is read, not defaulted
    # nor settings that do not apply to a bf16 run (the fp8 gathers, the BF16 edge layers)
    for absent in ("optimizer=", "flash_attention=", "tp_comm_overlap=", "fp8_recipe=", "moe_", "cross_entropy=",
                   "fp8_param_gather=", "bf16_edge_layers="):
        assert absent not in line, absent
    # torchtitan's per-op checkpointing takes no recompute modules: not listed as a default
    q = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "8", "--config", str(TITAN))
    tt = next(ln for ln in q.stderr.splitlines() if "defaults:" in ln)
    assert "torchtitan's defaults:" in tt and "recompute_modules=" not in tt and "attention_kernel='fa2'" in tt


def test_torchtitan_toml_takes_fsdp_and_local_batch_times_dp():
    """torchtitan's last TOML Llama 3 8B preset: FSDP over every rank (shard degree -1), local batch 1,
    selective recomputation: on 8 nodes x 8 GPUs the global batch is 1 x 64."""
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "8", "--config", str(TITAN), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["layout"]["zero"] == 3 and r["layout"]["recompute"] == "selective" and r["recipe"]["gbs"] == 64
    # the notes stderr prints are in the object too: what the file gave and the defaults assumed
    said = [ln.removeprefix("costmodel: note: ") for ln in p.stderr.splitlines() if ln.startswith("costmodel: note: ")]
    assert r["notes"] and all(n in said for n in r["notes"]) and any(n.startswith(f"--config {TITAN}") for n in r["notes"])


def test_flags_that_agree_pass_and_flags_that_contradict_are_refused(tmp_path):
    ok = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO), "--cp", "2")
    assert ok.returncode == 0, ok.stderr
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO),
                              "--cp", "4"), "--cp", "model.context_parallel_size")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "jupiter-gh200", "--config", str(NEMO)),
                          "trainer.devices", "jupiter-gh200")
    # a recipe switch the file sets is named as typed (the file's optim.overlap_grad_sync: true)
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO),
                              "--no-dp-overlap"), "--no-dp-overlap: contradicts", "model.optim.overlap_grad_sync")
    py = tmp_path / "cfg.py"
    py.write_text("def llama3_8b():\n    return None\n")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(py)), "code")
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {tensor_model_parallel_size: two}\n")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(bad)),
                          "model.tensor_model_parallel_size")
    toml = tmp_path / "x.toml"
    toml.write_text("[job]\nname = 'x'\n")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(toml)),
                          "torchtitan")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(tmp_path)),
                          "directory")


def test_megatron_bridge_config_container_dense():
    """Megatron-Bridge's Llama 3 8B SFT recipe for GB200 (ConfigContainer YAML): TP 1, PP 1, mbs 1, gbs 8,
    dataset.seq_length 4096 (model.seq_length 16384, noted), mixed_precision.fp8 e4m3 with fp8_recipe
    mxfp8 (MXFP8), the distributed optimizer, no DP overlap; the world is not in the file, so --nodes sets it.  MXFP8 runs on Blackwell only: on
    an H100 cluster the refusal names the file's key."""
    from costmodel.run_config import read_run_config
    c = read_run_config(BRIDGE_L3)
    assert c.stack == "nemo" and c.nodes is None and c.custom_pipeline_split is None
    assert {k: c.layout[k] for k in ("tp", "pp", "cp", "vp", "mbs", "zero", "recompute", "sp")} == \
        dict(tp=1, pp=1, cp=1, vp=1, mbs=1, zero=1, recompute="none", sp=False)
    # a sample holds the dataset's 4096 tokens (model.seq_length 16384 is the model's maximum), packed
    assert (c.recipe["gbs"], c.recipe["seq_len"], c.recipe["precision"], c.recipe["dp_overlap"]) == (8, 4096, "mxfp8", False)
    # comm_overlap: null: Bridge's overlap setup never runs, and the model's own tp_comm_overlap false trains
    assert c.recipe["tp_comm_overlap"] is False and c.where["tp_comm_overlap"].endswith("model.tp_comm_overlap")
    assert any("model.seq_length 16384 (the model's maximum) is not used" in n for n in c.notes)
    assert any("packed sequences of 4096 tokens" in n for n in c.notes)
    h = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "1", "--config", str(BRIDGE_L3))
    assert h.returncode == 2 and "mixed_precision" in h.stderr and "blackwell" in h.stderr, h.stderr
    p = run("predict", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "2", "--config", str(BRIDGE_L3),
            "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["layout"]["dp"] == 8 and r["recipe"]["gbs"] == 8 and r["recipe"]["seq_len"] == 4096
    assert r["recipe"]["precision"] == "mxfp8"


def test_megatron_bridge_moe_keys_are_read_as_megatron_reads_them(tmp_path):
    """A capacity factor below 0 is dropless and alltoall_seq is the all-to-all dispatcher, as in an
    argument dump; a capacity factor that is not a number names its key (it was a Python traceback)."""
    from costmodel.run_config import read_run_config
    text = BRIDGE_DSV3.read_text()
    f = tmp_path / "moe.yaml"
    f.write_text(text.replace("moe_expert_capacity_factor: null", "moe_expert_capacity_factor: -1.0")
                 .replace("moe_token_dispatcher_type: flex", "moe_token_dispatcher_type: alltoall_seq"))
    c = read_run_config(f)
    assert (c.recipe["moe_capacity_factor"], c.recipe["moe_dispatcher"]) == (0.0, "alltoall")
    f.write_text(text.replace("moe_grouped_gemm: true", "moe_grouped_gemm: null"))
    c = read_run_config(f)          # a null switch is the stack's default, and says so
    assert "moe_grouped_gemm" not in c.recipe and any("model.moe_grouped_gemm: null" in n for n in c.notes)
    f.write_text(text.replace("num_moe_experts: 256", "num_moe_experts: null"))     # a dense config
    assert_one_line_error(run("predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128",
                              "--config", str(f)), "model.num_moe_experts", "is not deepseek-v3's 256")
    for bad in ("big", ".nan", "true"):
        f.write_text(text.replace("moe_expert_capacity_factor: null", f"moe_expert_capacity_factor: {bad}"))
        assert_one_line_error(run("predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128",
                                  "--config", str(f)), "model.moe_expert_capacity_factor", "is not a number")


def test_megatron_bridge_config_container_moe_with_its_own_pipeline_layout():
    """Megatron-Bridge's DeepSeek-V3 H100 fp8 recipe: TP 2, PP 8, VP 4, EP 64, ETP 1, SP, selective
    recompute, gbs 8192, seq 4096, fp8 (mixed_precision.fp8 hybrid), DeepEP (flex) dispatch with grouped
    GEMM, dropless; its pipeline_model_parallel_layout 'Et|(tt|)*30mL' splits 61 layers over 32 chunks
    unevenly, which predict accepts (the fullest stage: ceil(61/8) = 8 layers), parses and reports per
    pipeline rank."""
    from costmodel.run_config import read_run_config
    c = read_run_config(BRIDGE_DSV3)
    assert {k: c.layout[k] for k in ("tp", "pp", "vp", "ep", "etp", "sp", "recompute", "mbs", "zero")} == \
        dict(tp=2, pp=8, vp=4, ep=64, etp=1, sp=True, recompute="selective", mbs=1, zero=1)
    assert (c.recipe["gbs"], c.recipe["seq_len"], c.recipe["precision"]) == (8192, 4096, "fp8")
    assert (c.recipe["moe_dispatcher"], c.recipe["moe_grouped_gemm"], c.recipe["moe_capacity_factor"]) == ("flex", True, 0.0)
    assert c.custom_pipeline_split == "pipeline_model_parallel_layout 'Et|(tt|)*30mL'"
    p = run("predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128", "--config",
            str(BRIDGE_DSV3), "--json")
    # NVIDIA runs this recipe on 80 GB H100s: it fits once its MLA-up-projection and dense-MLP
    # recompute, TE's fp8 activation storage and the precision-aware optimizer (bf16 main grads and
    # moments, the master as its 16-bit remainder) are priced; without them it came out at 112 GiB
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert (r["layout"]["dp"], r["layout"]["vp"], r["num_gpus"]) == (64, 4, 1024)
    assert (r["recipe"]["recompute_modules"], r["recipe"]["main_grads_dtype"], r["recipe"]["optimizer_states_dtype"]) \
        == ("mla_up_proj,mlp", "bf16", "bf16")
    # bf16 main grads (2 bytes) beside bf16 weights (2) and, the file's fp8_param_gather being false, TE's
    # cached fp8 weight and its transpose (2 more) for every layer parameter: all but the embeddings
    assert r["recipe"]["fp8_param_gather"] is False
    assert 1.95 < r["memory"]["weights_bytes"] / r["memory"]["grads_bytes"] < 2.0
    assert r["peak_mem_bytes"] < r["hbm_capacity_bytes"]
    # the file's layout, parsed: rank s runs virtual stages s, s + 8, s + 16, s + 24
    assert (r["pp_layout"]["rank_layers"], r["pp_layout"]["rank_mtp"]) == ([7] + [8] * 6 + [6], [0] * 7 + [1])
    # without the file's layout Megatron-core spreads the 61 layers itself (8 a rank, the last three 7),
    # and the launch names that layout
    even = run("predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128", "--tp", "2", "--pp", "8",
               "--vp", "4", "--ep", "64", "--gbs", "8192", "--format", "megatron")
    assert even.returncode in (0, 3), even.stderr
    assert "pipeline split: 8|8|8|8|8|7|7|7 transformer layers per stage" in even.stdout
    assert '--pipeline-model-parallel-layout "Ett|' in even.stdout


def test_a_config_of_another_model_is_refused_naming_its_key(tmp_path):
    """The NeMo Llama 3 8B config with --model llama3-70b: its model.num_layers (32) is not the model's
    80, so its layout and batch would describe another run: one line naming the key; an MoE config is
    checked on its expert count, expert width and top-k too."""
    p = run("predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--config", str(NEMO))
    assert_one_line_error(p, "model.num_layers: 32 is not llama3-70b's 80")
    from costmodel.errors import InputError
    from costmodel.run_config import check_model_dims, read_run_config
    from costmodel.specs import load_model
    import pytest
    c = read_run_config(BRIDGE_DSV3)
    check_model_dims(c, load_model("deepseek-v3"))                      # the recipe's own model passes
    odd = tmp_path / "dsv3.yaml"
    odd.write_text(BRIDGE_DSV3.read_text().replace("  moe_router_topk: 8\n", "  moe_router_topk: 6\n"))
    with pytest.raises(InputError, match="model.moe_router_topk: 6 is not deepseek-v3's 8"):
        check_model_dims(read_run_config(odd), load_model("deepseek-v3"))


def test_megatron_core_switches_need_their_stack_layout_and_optimizer(tmp_path):
    """Recompute modules act under selective recompute on Megatron-core stacks only; the precision-aware
    optimizer runs with Adam and the distributed optimizer; a torchtitan flavor or a vocabulary of
    another model is refused; a Bridge file's bf16 dtypes need its use_precision_aware_optimizer."""
    base = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--tp", "2")
    for extra, needle in ((("--recompute-modules", "mlp"), "--recompute-modules: applies to --recompute selective"),
                          # the default module named on the command line is refused all the same
                          (("--recompute", "none", "--recompute-modules", "core_attn"),
                           "--recompute-modules: applies to --recompute selective, not none"),
                          (("--recompute", "selective", "--recompute-modules", "mlp", "--stack", "torchtitan"),
                           "--recompute-modules: is Megatron-core's"),
                          (("--zero", "0", "--optimizer-states-dtype", "bf16"), "distributed optimizer (--zero 1 or 2)"),
                          (("--optimizer", "sgd", "--optimizer-states-dtype", "bf16"), "with Adam only, not sgd"),
                          (("--precision", "fp16", "--main-grads-dtype", "bf16"), "bf16 with --precision fp16")):
        assert_one_line_error(run(*base, *extra), needle)
    assert_one_line_error(run("predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--config", str(TITAN)),
                          "model.flavor: '8B' is not llama3-70b")
    assert_one_line_error(run("predict", "--model", "mistral-7b", "--cluster", "dgx-h100", "--config", str(BRIDGE_L3)),
                          "model.vocab_size: 128256 is not mistral-7b's 32000")
    odd = tmp_path / "dsv3.yaml"
    odd.write_text(BRIDGE_DSV3.read_text().replace("  use_precision_aware_optimizer: true\n",
                                                   "  use_precision_aware_optimizer: false\n"))
    assert_one_line_error(run("predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128",
                              "--config", str(odd)), "needs optimizer.use_precision_aware_optimizer true")


def test_an_error_about_a_value_the_config_set_names_its_key(tmp_path):
    """The Bridge DeepSeek-V3 recipe edited to optimizer sgd: its bf16 moments (precision-aware, Adam only)
    are refused naming the file's key that set them, not a --optimizer-states-dtype the user never typed."""
    odd = tmp_path / "dsv3.yaml"
    odd.write_text(BRIDGE_DSV3.read_text().replace("  optimizer: adam\n", "  optimizer: sgd\n"))
    p = run("predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128", "--config", str(odd))
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("costmodel: error:")]   # the notes come first
    assert p.returncode == 2 and len(errors) == 1 and f"{odd}: optimizer.exp_avg" in errors[0]
    assert "Adam only, not sgd" in errors[0] and "Traceback" not in p.stderr


def test_a_backend_the_profile_has_no_kernel_for_names_the_config_key(tmp_path):
    """The Bridge Llama-3-8B recipe edited to attention_backend fused on GB200, with a GB200 profile that
    has no cuDNN attention fit (the built-in one's removed): the error names the file's
    model.attention_backend (the user typed no --attention-kernel; a flag contradicting the file would be
    refused) and the profile's missing entry."""
    import yaml
    odd = tmp_path / "l3.yaml"
    odd.write_text(BRIDGE_L3.read_text().replace("  attention_backend: null\n", "  attention_backend: fused\n"))
    prof = yaml.safe_load((REPO / "hardware" / "profiles" / "gb200-186gb.yaml").read_text())
    del prof["attention"]["kernels"]["cudnn"]
    bare = tmp_path / "gb200-no-cudnn.yaml"
    bare.write_text(yaml.safe_dump(prof))
    p = run("predict", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "2", "--config", str(odd),
            "--profile", str(bare))
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("costmodel: error:")]
    assert p.returncode == 2 and len(errors) == 1, p.stderr
    assert f"{odd}: model.attention_backend: asks for the cudnn attention kernel" in errors[0]
    assert "gb200-no-cudnn.yaml has no fit for (attention.kernels.cudnn)" in errors[0] and "Traceback" not in p.stderr


@pytest.mark.parametrize("old,new,key,msg", [
    ("  attention_backend: null\n", "  attention_backend: garbage\n", "model.attention_backend",
     "'garbage' is not a Megatron-core backend (flash, fused, unfused, local, auto)"),
    ("  tensor_model_parallel_size: 1\n", "  tensor_model_parallel_size: -2\n", "model.tensor_model_parallel_size",
     "must be between 1 and 2^24, got -2 (the value of --tp, which this key sets)"),
    ("  tensor_model_parallel_size: 1\n", "  tensor_model_parallel_size: 3\n",
     "model.tensor_model_parallel_size / model.pipeline_model_parallel_size / model.context_parallel_size",
     "TP x PP x CP = 3 does not divide the 8 GPUs of gb200-nvl72"),
    ("  context_parallel_size: 1\n", "  context_parallel_size: 3\n",
     "model.tensor_model_parallel_size / model.pipeline_model_parallel_size / model.context_parallel_size",
     "TP x PP x CP = 3 does not divide the 8 GPUs of gb200-nvl72"),
    ("  tensor_model_parallel_size: 1\n", "  tensor_model_parallel_size: [1\n", "",
     "not valid YAML: line 492, column 12: did not find expected ',' or ']'; while parsing a flow sequence"),
])
def test_a_bad_value_in_the_config_names_its_key_not_a_flag(tmp_path, old, new, key, msg):
    """Values the Bridge Llama-3-8B recipe sets, made bad: one line naming the file and its key (the user
    typed no --tp), exit 2; an unknown attention backend is refused, not left to the stack's default."""
    odd = tmp_path / "l3.yaml"
    text = BRIDGE_L3.read_text()
    assert text.count(old) == 1
    odd.write_text(text.replace(old, new))
    p = run("predict", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "2", "--config", str(odd))
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("costmodel: error:")]
    assert p.returncode == 2 and len(errors) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"{odd}: {key + ': ' if key else ''}{msg}" in errors[0]


def test_an_explicit_pipeline_send_overlap_in_the_config_is_read_and_a_null_one_left_to_the_stack(tmp_path):
    """Megatron-Bridge's comm_overlap.overlap_p2p_comm: false turns the interleaved sends' overlap off
    (and a contradicting --pp-overlap is refused); null, as the shipped file has, leaves Megatron-core's
    default (on with VP)."""
    text = BRIDGE_DSV3.read_text()
    assert "\n  overlap_p2p_comm: null\n" in text
    off = tmp_path / "off.yaml"
    off.write_text(text.replace("\n  overlap_p2p_comm: null\n", "\n  overlap_p2p_comm: false\n", 1))
    args = ("predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128", "--json")
    shipped, no = (json.loads(run(*args, "--config", str(f)).stdout) for f in (BRIDGE_DSV3, off))
    assert shipped["recipe"]["pp_overlap"] is True and no["recipe"]["pp_overlap"] is False
    assert no["breakdown"]["pp_comm_s"] > shipped["breakdown"]["pp_comm_s"]
    assert_one_line_error(run(*args, "--config", str(off), "--pp-overlap"), "--pp-overlap",
                          "comm_overlap.overlap_p2p_comm")


def test_a_world_size_or_switch_of_the_wrong_type_names_its_key(tmp_path):
    """A NeMo file whose trainer.num_nodes is not a whole number, or whose model.overlap_p2p_comm is a
    string instead of true/false, is refused naming the key (never read as a default, never a traceback)."""
    text = NEMO.read_text()
    for old, new, key in (("num_nodes: 16", "num_nodes: '16 8'", "trainer.num_nodes"),
                          ("sequence_parallel: false", "sequence_parallel: 'no'", "model.sequence_parallel")):
        assert old in text, old
        bad = tmp_path / f"{key}.yaml"
        bad.write_text(text.replace(old, new, 1))
        assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(bad)),
                              key, "is not a valid value")


def test_a_torchtitan_toml_of_the_wrong_shape_names_its_key(tmp_path):
    """A section that is not a table, converters that are not a list of names, a degree or batch below 1
    and a shard degree torchtitan does not take are refused naming the file's key; the float8
    converter is read under both of torchtitan's names, its MX one refused, an unknown one noted."""
    from costmodel.errors import InputError
    from costmodel.run_config import read_run_config
    text = TITAN.read_text()
    conv = '# converters = ["float8"]'
    assert conv in text and "tensor_parallel_degree = 1" in text and "local_batch_size = 1" in text
    assert "data_parallel_shard_degree = -1" in text
    bad = ((conv, "converters = 5", "model.converters"), (conv, 'converters = "nofloat8"', "model.converters"),
           (conv, 'converters = ["quantize.linear.mx"]', "model.converters"),
           ("tensor_parallel_degree = 1", "tensor_parallel_degree = 0", "parallelism.tensor_parallel_degree"),
           ("local_batch_size = 1", "local_batch_size = 0", "training.local_batch_size"),
           ("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 0",
            "parallelism.data_parallel_shard_degree"))
    for i, (old, new, key) in enumerate(bad):
        f = tmp_path / f"bad{i}.toml"
        f.write_text(text.replace(old, new, 1))
        with pytest.raises(InputError) as e:
            read_run_config(f)
        assert e.value.field == key, new
    for i, head in enumerate(("parallelism = 5\n", "quantize = 5\n", "activation_checkpoint = 5\n")):
        key = head.split(" ")[0]
        f = tmp_path / f"tab{i}.toml"
        f.write_text(head + text.replace(f"[{key}]", "[unused_section]").replace(f"[{key}.", "[unused."))
        with pytest.raises(InputError) as e:
            read_run_config(f)
        assert e.value.field == key and "expected a table" in e.value.message
    for name in ("float8", "quantize.linear.float8"):
        f = tmp_path / "ok.toml"
        f.write_text(text.replace(conv, f'converters = ["{name}", "quantize.grouped_mm.float8"]', 1))
        cfg = read_run_config(f)
        assert cfg.recipe["precision"] == "fp8" and name in cfg.where["precision"]
        assert any("'quantize.grouped_mm.float8' is not a converter the model prices" in n for n in cfg.notes)
    # a name torchtitan's registry lacks fails there: refused here
    f.write_text(text.replace(conv, 'converters = ["quantize.linear.float9"]', 1))
    with pytest.raises(InputError, match="is not a torchtitan converter .*did you mean 'quantize.linear.float8'"):
        read_run_config(f)
    f = tmp_path / "tab0.toml"
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(f)),
                          "parallelism", "expected a table")
    # an upper-case suffix is still TOML; two recipe names that differ are noted, the first one read
    f = tmp_path / "two.TOML"
    f.write_text(text.replace(conv, 'converters = ["float8"]', 1).replace(
        "[quantize.linear.float8]\n", '[quantize.linear.float8]\nrecipe_name = "rowwise"\n', 1)
        + '\n[float8]\nrecipe_name = "tensorwise"\n')
    cfg = read_run_config(f)
    assert cfg.recipe["fp8_recipe"] == "rowwise" and any("differ: the first is read" in n for n in cfg.notes)


def test_torchtitan_data_parallelism_is_fsdp_or_ddp():
    """torchtitan has FSDP2 (ZeRO-3), with a pipeline FSDP2 keeping its parameters gathered (priced as
    ZeRO-1), or DDP: predict takes the stack's default where --zero is not given, refuses --zero 1
    without a pipeline and --zero 2, and its printed configuration shards over DP for ZeRO-1 and -3."""
    base = ("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--stack", "torchtitan", "--tp", "1",
            "--mbs", "1", "--gbs", "8", "--seq-len", "8192")
    r = json.loads(run(*base, "--pp", "1", "--json").stdout)
    assert r["layout"]["zero"] == 3
    for z in ("1", "2"):
        assert_one_line_error(run(*base, "--pp", "1", "--zero", z), "layout", "ZeRO")
    assert_one_line_error(run(*override(base, "--pp", "1", "--tp", "8", "--no-sp")), "layout",
                          "torchtitan runs sequence parallelism")
    p = run(*base[:-4], "--mbs", "1", "--gbs", "64", "--seq-len", "8192", "--pp", "4", "--format", "torchtitan")
    assert p.returncode == 0, p.stderr
    assert "zero=1" in p.stdout and "data_parallel_shard_degree = 2" in p.stdout


def test_a_torchtitan_pipeline_with_fsdp_its_resharding_and_its_unknown_degrees(tmp_path):
    """The Llama 3 8B preset with pipeline_parallel_degree 2: FSDP under a pipeline is priced as ZeRO-1
    (torchtitan keeps each stage's parameters gathered), said in a note, and --zero 1 agrees with it;
    fsdp_reshard_after_forward 'always' there is refused, 'never' without a pipeline noted; a degree
    torchtitan does not have is refused by name, the 2024 name data_parallel_degree read as the shard
    degree; a DP that does not fill the GPUs is named at the shard degree, the TP key listed after."""
    from costmodel.errors import InputError
    from costmodel.run_config import read_run_config
    text = TITAN.read_text()
    pp2 = text.replace("pipeline_parallel_degree = 1", "pipeline_parallel_degree = 2", 1)
    f = tmp_path / "pp2.toml"
    f.write_text(pp2)
    cfg = read_run_config(f)
    assert cfg.layout["zero"] == 1 and any("priced as ZeRO-1" in n for n in cfg.notes)
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-a100", "--nodes", "8", "--config", str(f), "--zero", "1",
            "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["layout"]["zero"] == 1, p.stderr
    f.write_text(pp2.replace("[parallelism]\n", '[parallelism]\nfsdp_reshard_after_forward = "always"\n', 1))
    with pytest.raises(InputError) as e:
        read_run_config(f)
    assert e.value.field == "parallelism.fsdp_reshard_after_forward" and "not modelled" in e.value.message
    f.write_text(text.replace("[parallelism]\n", '[parallelism]\nfsdp_reshard_after_forward = "never"\n'
                              'enable_compiled_autograd = true\n', 1))
    cfg = read_run_config(f)
    assert cfg.layout["zero"] == 3 and any("'never' keeps the parameters gathered" in n for n in cfg.notes)
    assert any("parallelism.enable_compiled_autograd not read" in n for n in cfg.notes)
    f.write_text(text.replace("[parallelism]\n", "[parallelism]\nfoo_degree = 4\n", 1))
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-a100", "--nodes", "8", "--config",
                              str(f)), "parallelism.foo_degree", "is not a torchtitan parallelism degree")
    f.write_text(text.replace("data_parallel_shard_degree = -1", "data_parallel_degree = 16", 1))
    cfg = read_run_config(f)
    assert cfg.layout["dp"] == 16 and cfg.where["dp"].endswith("parallelism.data_parallel_degree")
    f.write_text(text.replace("data_parallel_shard_degree = -1", "data_parallel_shard_degree = 7", 1))
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-a100", "--nodes", "8", "--config",
                              str(f)), "parallelism.data_parallel_shard_degree",
                          "TP x PP x DP x CP must equal the number of GPUs (64)")


def test_a_config_contradiction_names_the_file_s_key_not_a_flag(tmp_path):
    """TP 2 without sequence parallelism and ub_tp_comm_overlap true in a NeMo YAML: Megatron-LM refuses
    the pair; the error names the file and its key, the user having typed no --tp-comm-overlap."""
    src = (REPO / "tests" / "data" / "configs" / "nemo_launcher_llama3_8b.yaml").read_text()
    f = tmp_path / "tpco.yaml"
    f.write_text(src.replace("  tensor_model_parallel_size: 1", "  tensor_model_parallel_size: 2")
                 .replace("  ub_tp_comm_overlap: false", "  ub_tp_comm_overlap: true"))
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(f))
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("costmodel: error:")]
    assert p.returncode == 2 and "Traceback" not in p.stderr and len(err) == 1, p.stderr
    assert f"{f}: model.ub_tp_comm_overlap: needs sequence parallelism" in err[0]


def test_a_nemo_or_bridge_yaml_gets_settings_for_its_own_keys_not_nemo_2_overrides():
    """NeMo 2's recipe overrides (recipe.trainer.strategy...) address neither a NeMo launcher YAML nor a
    Megatron-Bridge ConfigContainer: predict --config prints the settings in the field's terms, to set
    in that file; --format still picks any format."""
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO))
    assert p.returncode == 0, p.stderr
    assert f"Settings to set in {NEMO} (in words: find each in its NeMo YAML keys" in " ".join(p.stdout.split())
    assert "recipe.trainer.strategy" not in p.stdout and "tensor parallel (TP): 1" in p.stdout
    f = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO), "--format", "nemo")
    assert f.returncode == 0 and "recipe.trainer.strategy.tensor_model_parallel_size = 1" in f.stdout


def test_a_config_that_sets_nothing_read_is_refused(tmp_path):
    """A YAML whose one key is not read, or whose values are all interpolations, would change nothing:
    refused in one line (naming the interpolated key where there is one), not taken as an empty config."""
    other, interp = tmp_path / "other.yaml", tmp_path / "interp.yaml"
    other.write_text("model:\n  tokenizer_library: megatron\n")
    interp.write_text("model:\n  tensor_model_parallel_size: ${oc.env:TP}\n")
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(other))
    assert_one_line_error(p, f"{other}: sets nothing NeMo YAML is read for", "check its key names")
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(interp))
    assert_one_line_error(p, f"{interp}: model.tensor_model_parallel_size ('${{oc.env:TP}}'): is left to the run's "
                          "launch (an interpolation): pass --tp")


def test_a_misspelt_key_among_read_ones_is_refused_by_name(tmp_path):
    """One slip in one key of a full NeMo launcher YAML (micro_batch_size -> micro_batch_sise) would price
    the run at the default micro-batch: refused in one line naming the key as written and the key it
    stands for.  The same in a torchtitan TOML and a Megatron-Bridge YAML."""
    text = NEMO.read_text()
    assert "  micro_batch_size: 1" in text
    nemo = tmp_path / "nemo.yaml"
    nemo.write_text(text.replace("  micro_batch_size: 1", "  micro_batch_sise: 1", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(nemo))
    assert_one_line_error(p, f"{nemo}: model.micro_batch_sise", "did you mean model.micro_batch_size?")
    titan = tmp_path / "titan.toml"
    text = TITAN.read_text()
    assert "data_parallel_shard_degree" in text
    titan.write_text(text.replace("data_parallel_shard_degree", "data_paralel_shard_degree", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(titan))
    assert_one_line_error(p, "parallelism.data_paralel_shard_degree", "parallelism.data_parallel_shard_degree")
    bridge = tmp_path / "bridge.yaml"
    text = BRIDGE_L3.read_text()
    assert "  micro_batch_size:" in text
    bridge.write_text(text.replace("  micro_batch_size:", "  mciro_batch_size:", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "2", "--config", str(bridge))
    assert_one_line_error(p, f"{bridge}: train.mciro_batch_size", "did you mean train.micro_batch_size?")


def test_config_refusals_are_one_line_naming_every_misspelling_and_the_file_key(tmp_path):
    """Every misspelt key of a file in one line; a short section name (Megatron-Bridge's train:) is
    checked too; a key written twice in one mapping is refused (YAML would keep the second silently);
    a layout rule the file's numbers break names the file's keys, and no note line comes before it."""
    text = NEMO.read_text()
    two = tmp_path / "two.yaml"
    two.write_text(text.replace("  micro_batch_size: 1", "  micro_batch_sise: 1", 1)
                   .replace("  global_batch_size: 2048", "  global_batch_sise: 2048", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(two))
    assert_one_line_error(p, "model.micro_batch_sise: not a key", "also model.global_batch_sise: did you mean "
                          "model.global_batch_size?")
    trian = tmp_path / "trian.yaml"
    trian.write_text(BRIDGE_L3.read_text().replace("\ntrain:\n", "\ntrian:\n", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "2", "--config", str(trian))
    assert_one_line_error(p, f"{trian}: trian: not a key the reader knows; did you mean train?")
    twice = tmp_path / "twice.yaml"
    twice.write_text(text + "model:\n  tensor_model_parallel_size: 2\n")
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(twice))
    assert_one_line_error(p, "key 'model' written twice in one mapping (first at line")
    gbs = tmp_path / "gbs.yaml"
    gbs.write_text(text.replace("  global_batch_size: 2048", "  global_batch_size: 2047", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(gbs))
    assert_one_line_error(p, f"{gbs}: model.global_batch_size: invalid: gbs (2047) must be divisible by DP x mbs",
                          "model.micro_batch_size also set there")


def test_a_bridge_fp4_recipe_beside_fp8_is_not_taken_for_a_misspelling(tmp_path):
    """Megatron-core's fp4_recipe is one edit from fp8_recipe; both are real keys and the reader looks
    both up, so an NVFP4 override without fp8_recipe is read, not refused."""
    f = tmp_path / "fp4.yaml"
    f.write_text("model:\n  tensor_model_parallel_size: 1\nmixed_precision:\n  fp4: nvfp4\n  fp4_recipe: nvfp4\n"
                 "train:\n  global_batch_size: 16\n  micro_batch_size: 1\n")
    from costmodel.run_config import read_run_config
    assert read_run_config(f).recipe["precision"] == "nvfp4"


def test_the_run_configurations_dropout_overrides_the_models(tmp_path):
    """Dropout is the run's choice: a NeMo YAML with attention_dropout 0.1 trains Llama 3 8B (no dropout
    in its catalog entry) with it, slower and noted; a probability outside [0, 1) is refused by key."""
    base = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO), "--json")
    drop = tmp_path / "drop.yaml"
    text = NEMO.read_text()
    assert "  attention_dropout: 0.0" in text
    drop.write_text(text.replace("  attention_dropout: 0.0", "  attention_dropout: 0.1", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(drop), "--json")
    assert p.returncode == 0 and base.returncode == 0, p.stderr
    assert json.loads(p.stdout)["step_time_s"] > 1.03 * json.loads(base.stdout)["step_time_s"]
    assert f"dropout on, as {drop}: model.attention_dropout says" in p.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(text.replace("  attention_dropout: 0.0", "  attention_dropout: 1.5", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(bad))
    assert_one_line_error(p, f"{bad}: model.attention_dropout: expected a dropout probability in [0, 1), got 1.5")


def test_a_misspelt_format_section_a_foreign_stack_and_torchtitans_own_defaults(tmp_path):
    """trian: (for Megatron-Bridge's train: or NeMo's trainer:) would make the reader guess the format: refused
    by name; a --stack outside the file's framework is refused naming the file; a torchtitan TOML without
    training.seq_len / local_batch_size trains at torchtitan's defaults (2048, 8: job_config.py Training)
    unless a flag gives them; its activation-checkpoint default (every 2nd block) is refused."""
    bridge = tmp_path / "mb.yaml"
    bridge.write_text("model:\n  tensor_model_parallel_size: 4\ntrian:\n  micro_batch_size: 1\n  global_batch_size: 128\n")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(bridge)),
                          "trian", "did you mean train: (Megatron-Bridge) or trainer: (NeMo)")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO),
                              "--stack", "torchtitan"), "--stack", "'torchtitan' contradicts", "NeMo YAML")
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(TITAN),
                              "--stack", "megatron"), "--stack", "torchtitan TOML")
    ok = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(NEMO), "--stack", "megatron")
    assert ok.returncode == 0, ok.stderr
    toml = tmp_path / "tt.toml"
    toml.write_text("[parallelism]\ntensor_parallel_degree = 2\ndata_parallel_shard_degree = -1\n")
    # torchtitan's activation-checkpoint default (every 2nd block) is not priced: refused by its key
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(toml)),
                          f"{toml}: activation_checkpoint: mode and selective_ac_option not set")
    toml.write_text("[parallelism]\ntensor_parallel_degree = 2\ndata_parallel_shard_degree = -1\n"
                    '[activation_checkpoint]\nmode = "selective"\nselective_ac_option = "op"\n')
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(toml), "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    # 8 GPUs at TP 2: DP 4, local batch 8 -> gbs 32 at mbs 8
    assert (r["recipe"]["seq_len"], r["recipe"]["gbs"], r["layout"]["mbs"]) == (2048, 32, 8)
    assert "training.seq_len not set: torchtitan's default 2048" in p.stderr
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(toml), "--seq-len", "4096",
            "--gbs", "64", "--mbs", "2", "--json")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert (r["recipe"]["seq_len"], r["recipe"]["gbs"], r["layout"]["mbs"]) == (4096, 64, 2)
    assert "not set: torchtitan's default" not in p.stderr


def test_a_file_without_its_node_count_says_so_when_the_gpus_do_not_fit(tmp_path):
    """NeMo's trainer.num_nodes left out (Lightning's default is 1): a layout that needs more GPUs than the
    cluster's default node count has is refused naming the file's key and saying the node count was not
    given, rather than only that TP x PP x CP does not divide the GPUs."""
    text = NEMO.read_text()
    f = tmp_path / "nonodes.yaml"
    f.write_text("\n".join(ln for ln in text.splitlines() if "num_nodes" not in ln) + "\n")
    yml = f.read_text().replace("context_parallel_size: 2", "context_parallel_size: 16")
    f.write_text(yml)
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(f))
    assert_one_line_error(p, "model.tensor_model_parallel_size", "TP x PP x CP = 16 does not divide the 8 GPUs",
                          "the file gives no node count and --nodes is not given")


def test_predict_takes_a_pp_layout_where_pp_x_vp_leaves_the_layers_uneven():
    """DeepSeek-V3's 61 layers on PP 16 x VP 2 (61 + 2 = 63 is not a multiple of 32 either): without a layout,
    Megatron-core's stack spreads them itself (4 a rank, the last three ranks 3) and launches that layout,
    a stack without one refuses it; with Megatron-Bridge's layout, predict prints its split and puts it
    in --json and in the Megatron arguments; a layout of the wrong stage count is one line naming --pp-layout."""
    args = ["predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "256", "--tp", "1", "--pp", "16",
            "--vp", "2", "--ep", "64", "--mbs", "1", "--gbs", "16384", "--seq-len", "4096"]
    p = run(*args, "--format", "megatron")
    assert p.returncode in (0, 3), p.stderr
    assert "pipeline split: " + "4|" * 13 + "3|3|3 transformer layers per stage" in p.stdout
    assert '--pipeline-model-parallel-layout "Ett|' + "tt|" * 28 + 't|t|tmL"' in p.stdout
    assert_one_line_error(run(*args, "--stack", "torchtitan"), "layout", "must be divisible by PP x VP")
    p = run(*args, "--pp-layout", DSV3_LAYOUT, "--format", "megatron")
    assert p.returncode in (0, 3), p.stderr
    assert "pipeline split: 3|4|4|4|4|4|4|4|4|4|4|4|4|4|4|2+1m transformer layers per pipeline rank" in p.stdout
    assert f'--pipeline-model-parallel-layout "{DSV3_LAYOUT}"' in p.stdout
    p = run(*args, "--pp-layout", DSV3_LAYOUT, "--json")
    assert json.loads(p.stdout)["pp_layout"]["rank_layers"] == [3] + [4] * 14 + [2]
    assert_one_line_error(run(*args, "--pp-layout", "Et|(tt|)*29mL"), "--pp-layout", "has 31 stages")


def test_a_pp_layout_is_priced_by_its_fullest_rank():
    """Llama 3 70B's 80 layers on PP 4: the layout that spreads them 20 a rank prices as the even split
    does; one that puts 50 on the first rank paces the pipeline at 50 layers (slower, more memory: the
    first rank holds 50 layers' activations); the split per rank is in --json."""
    args = ["predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--tp", "4", "--pp", "4",
            "--recompute", "full", "--json"]
    base = json.loads(run(*args).stdout)
    even = json.loads(run(*args, "--pp-layout", "Et*20|t*20|t*20|t*20L").stdout)
    heavy = run(*args, "--pp-layout", "Et*50|t*10|t*10|t*10L")
    assert heavy.returncode in (0, 3), heavy.stderr
    heavy = json.loads(heavy.stdout)
    assert even["step_time_s"] == pytest.approx(base["step_time_s"], rel=1e-9)
    assert heavy["step_time_s"] > 2 * even["step_time_s"] and heavy["peak_mem_bytes"] > 2 * even["peak_mem_bytes"]
    assert heavy["pp_layout"]["rank_layers"] == [50, 10, 10, 10]


def test_a_pp_layout_prices_each_rank_where_it_differs():
    """A lighter first rank (14 of 80 layers on PP 4) holds fewer activations at its 4 micro-batches in flight
    than the even split's first rank: the peak is the fuller ranks' 22 layers at 3 and fewer in flight
    (~17 GiB, not the even 21); DeepSeek-V3's layout gives its last rank 2 layers, the MTP module and the
    logits, and the step under the power limit is never below the time model's (it had been 18% below)."""
    args = ["predict", "--model", "llama3-70b", "--cluster", "dgx-h100", "--nodes", "8", "--tp", "8", "--pp", "4",
            "--gbs", "128", "--seq-len", "8192", "--json"]
    even = json.loads(run(*args).stdout)
    light = json.loads(run(*args, "--pp-layout", "E(t)*14|(t)*22|(t)*22|(t)*22L").stdout)
    assert light["memory"]["activations_bytes"] < 0.9 * even["memory"]["activations_bytes"]
    ds = run("predict", "--model", "deepseek-v3", "--cluster", "dgx-h100", "--nodes", "128", "--tp", "1", "--pp", "16",
             "--vp", "2", "--ep", "64", "--gbs", "1024", "--pp-layout", DSV3_LAYOUT, "--json")
    r = json.loads(ds.stdout)
    assert r["step_time_s"] >= r["uncapped_step_time_s"]


def test_a_bridge_sharding_switch_that_is_not_a_boolean_is_refused(tmp_path):
    """ddp.use_distributed_optimizer "yes" had been read as off (ZeRO 0, MFU 45% -> 35%) while a string
    elsewhere is refused: it names the key and wants true or false."""
    text = BRIDGE_L3.read_text()
    old = "  use_distributed_optimizer: true\n"
    assert text.count(old) == 2
    i = text.index(old)                      # the ddp section's (the optimizer's comes later)
    f = tmp_path / "b.yaml"
    f.write_text(text[:i] + '  use_distributed_optimizer: "yes"\n' + text[i + len(old):])
    from costmodel.errors import InputError
    from costmodel.run_config import read_run_config
    with pytest.raises(InputError, match="ddp.use_distributed_optimizer: 'yes' is not a valid value: expected true"):
        read_run_config(f)


def test_a_real_key_in_the_wrong_section_is_refused_naming_where_it_belongs(tmp_path):
    """torchtitan's tensor_parallel_degree moved under [training], NeMo's tensor_model_parallel_size under
    trainer: each had run as TP 1 (the framework itself would refuse the key there).  The one-line error
    names the key as written and where the reader looks for it."""
    from costmodel.errors import InputError
    from costmodel.run_config import read_run_config
    t = TITAN.read_text().replace("tensor_parallel_degree = 1\n", "", 1)
    t = t.replace("[training]\n", "[training]\ntensor_parallel_degree = 4\n", 1)
    f = tmp_path / "t.toml"
    f.write_text(t)
    with pytest.raises(InputError, match="training.tensor_parallel_degree: in the wrong section: the reader "
                                         r"\(and the framework\) reads it as parallelism.tensor_parallel_degree"):
        read_run_config(f)
    n = NEMO.read_text().replace("  tensor_model_parallel_size: 1\n", "", 1)
    n = n.replace("trainer:\n  num_nodes: 16\n", "trainer:\n  tensor_model_parallel_size: 4\n  num_nodes: 16\n", 1)
    g = tmp_path / "n.yaml"
    g.write_text(n)
    with pytest.raises(InputError, match="trainer.tensor_model_parallel_size: in the wrong section"):
        read_run_config(g)


def test_a_config_without_a_global_batch_says_the_default_it_takes(tmp_path):
    """The Bridge recipe without train.global_batch_size: predict runs on the --gbs default and says so
    (torchtitan's files, whose local batch sets it, get their own note)."""
    text = BRIDGE_L3.read_text()
    assert text.count("  global_batch_size: 8\n") == 1
    f = tmp_path / "b.yaml"
    f.write_text(text.replace("  global_batch_size: 8\n", "", 1))
    p = run("predict", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "2", "--config", str(f), "--json")
    assert p.returncode == 0, p.stderr
    assert "gives no global batch size: the --gbs default 128 is used (pass --gbs)" in p.stderr
    assert json.loads(p.stdout)["recipe"]["gbs"] == 128
    q = run("predict", "--model", "llama3-8b", "--cluster", "gb200-nvl72", "--nodes", "2", "--config", str(BRIDGE_L3))
    assert q.returncode == 0 and "gives no global batch size" not in q.stderr, q.stderr


def test_a_negative_block_recompute_count_in_the_config_is_refused(tmp_path):
    """recompute_num_layers -1 under block recompute had been taken (the flag refuses it)."""
    from costmodel.errors import InputError
    from costmodel.run_config import read_run_config
    text = BRIDGE_L3.read_text()
    for old, new in (("  recompute_granularity: null\n", "  recompute_granularity: full\n"),
                     ("  recompute_method: null\n", "  recompute_method: block\n"),
                     ("  recompute_num_layers: null\n", "  recompute_num_layers: -1\n")):
        assert text.count(old) == 1
        text = text.replace(old, new)
    f = tmp_path / "b.yaml"
    f.write_text(text)
    with pytest.raises(InputError, match="model.recompute_num_layers: -1 is below 0"):
        read_run_config(f)
    f.write_text(text.replace("  recompute_num_layers: -1\n", "  recompute_num_layers: 2\n"))
    assert read_run_config(f).layout["recompute_num_layers"] == 2


def test_a_toml_key_written_twice_is_named(tmp_path):
    """tomllib says 'Cannot overwrite a value (at line N, column C)': the message names the key on that
    line, as a YAML key written twice is named."""
    from costmodel.errors import InputError
    from costmodel.run_config import read_run_config
    f = tmp_path / "t.toml"
    f.write_text(TITAN.read_text().replace("tensor_parallel_degree = 1\n",
                                           "tensor_parallel_degree = 1\ntensor_parallel_degree = 4\n", 1))
    with pytest.raises(InputError, match="tensor_parallel_degree: not valid TOML .*a key written twice in one table"):
        read_run_config(f)


def test_a_split_megatron_core_refuses_is_refused_naming_the_vp_key(tmp_path):
    """PP 2 x VP 5 on Qwen3-30B-A3B's 48 layers divides 48 + 2 only: Megatron-core asserts it unless both
    account_for_*_in_pipeline_split are true (their default False, which Bridge keeps); the file that
    leaves them out had been priced as if they were set."""
    from costmodel.errors import InputError
    from costmodel.run_config import read_run_config
    text = ("model:\n  tensor_model_parallel_size: 1\n  pipeline_model_parallel_size: 2\n"
            "  virtual_pipeline_model_parallel_size: 5\n  expert_model_parallel_size: 8\n{acc}"
            "train:\n  micro_batch_size: 1\n  global_batch_size: 128\n")
    f = tmp_path / "b.yaml"
    f.write_text(text.format(acc=""))
    args = ("predict", "--model", "qwen3-30b-a3b", "--cluster", "dgx-h100", "--nodes", "2", "--config", str(f))
    r = run(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "model.virtual_pipeline_model_parallel_size: PP 2 x VP 5 does not divide num_layers 48" in r.stderr
    f.write_text(text.format(acc="  account_for_embedding_in_pipeline_split: true\n"
                                 "  account_for_loss_in_pipeline_split: true\n"))
    assert run(*args).returncode == 0
    f.write_text(text.format(acc="  account_for_loss_in_pipeline_split: true\n"))
    with pytest.raises(InputError, match="priced only together with account_for_embedding_in_pipeline_split"):
        read_run_config(f)


def test_async_tp_without_compile_in_a_torchtitan_file_names_the_files_keys(tmp_path):
    """torchtitan runs async TP only under torch.compile: a file with async TP and compile off is refused
    naming its two keys, not the --no-fused-elementwise its user never typed."""
    text = TITAN.read_text().replace("tensor_parallel_degree = 1", "tensor_parallel_degree = 2\n"
                                     "enable_async_tensor_parallel = true", 1)
    assert "[compile]\nenable=false" in text
    f = tmp_path / "atp.toml"
    f.write_text(text)
    assert_one_line_error(run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(f)),
                          f"{f}: compile.enable / parallelism.enable_async_tensor_parallel",
                          "runs only under torch.compile")


def test_a_config_says_the_world_size_zero_stage_and_precision_it_left_to_the_defaults():
    """A torchtitan TOML cannot give its world size (torchrun's launch does): without --nodes the run had
    been priced on the cluster file's one node in silence; the Bridge override file leaves the ZeRO stage
    and precision to the recipe it edits, which predict had filled without a word."""
    p = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--config", str(TITAN))
    assert p.returncode == 0, p.stderr
    assert (f"{TITAN}: not set in the file or by a flag: the world size: 1 node of dgx-h100, as its file counts "
            "them (pass --nodes)") in p.stderr
    q = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "8", "--precision", "bf16",
            "--config", str(TITAN))
    assert q.returncode == 0 and "not set in the file or by a flag: the" not in q.stderr, q.stderr

def test_a_bridge_override_file_says_the_zero_stage_and_precision_it_left_to_the_defaults(tmp_path):
    f = tmp_path / "over.yaml"
    f.write_text("model:\n  tensor_model_parallel_size: 2\n  seq_length: 4096\n"
                 "train:\n  global_batch_size: 64\n  micro_batch_size: 1\n")
    r = run("predict", "--model", "llama3-8b", "--cluster", "dgx-h100", "--nodes", "2", "--config", str(f))
    assert r.returncode == 0, r.stderr
    assert ("not set in the file or by a flag: the ZeRO stage: --zero's default 1 (the distributed optimizer) where "
            "the stack has it; the precision: --precision's default (bf16; fp16 on GPUs without bf16)") in r.stderr
