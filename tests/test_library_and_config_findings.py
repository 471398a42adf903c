"""The library as a notebook uses it, and Hugging Face configs of families the reader does not know (a
new user's findings, each with the input that showed it)."""
import json
import shutil
from pathlib import Path

import pytest

from costmodel.errors import InputError
from costmodel.predict import predict_run
from costmodel.specs import Recipe, cluster_profile, load_cluster, load_model
from costmodel.stacks import get_stack, stack_recipe

DATA = "tests/data/models/"
LAYOUT = dict(tp=4, pp=4, dp=4, cp=1, ep=1, vp=1, mbs=1, recompute="selective", zero=1, sp=True, overlap=True)


@pytest.fixture(scope="module")
def setup70b():
    m, c = load_model("llama3-70b"), load_cluster("dgx-h100", 8)
    return m, stack_recipe(get_stack("megatron"), 128, 8192, "bf16", gpu=c.gpu), c, cluster_profile(c, None)


@pytest.mark.parametrize("change, needle", [
    (dict(dp=8), "it needs 128 GPUs, the cluster has 64"),
    (dict(tp=16, dp=1), "TP must divide the GPUs of one NVLink domain"),
    (dict(zero=5), "ZeRO stage must be 0-3"),
    (dict(ep=2), "EP > 1 needs an MoE model"),
    (dict(mbs=0), "mbs: must be >= 1, got 0"),
    (dict(recompute="auto"), "recompute: 'auto' is not one of none, selective, full"),
    (dict(tp=4.0), "tp: must be a whole number, got 4.0"),
    (dict(sp="yes"), "sp: must be True or False, got 'yes'")])
def test_predict_run_refuses_a_layout_no_run_can_have(setup70b, change, needle):
    """predict_run had priced these (a 128-GPU layout on 64 GPUs, TP 16 across nodes, ZeRO 5) or failed
    with a bare ValueError / KeyError."""
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        predict_run(*setup70b, dict(LAYOUT, **change))


def test_a_layout_runs_on_its_own_gpus_and_sp_at_tp_1_is_off(setup70b):
    """A 32-GPU layout on a 64-GPU cluster is priced on its 32 GPUs (a job on part of the cluster), and
    SP at TP 1 is off, as Megatron-LM turns it off."""
    m, r, c, p = setup70b
    run = predict_run(m, r, c, p, dict(LAYOUT, dp=2))
    assert run.layout["dp"] == 2 and run.num_gpus == 32
    sp = predict_run(m, r, c, p, dict(LAYOUT, tp=1, pp=8, dp=8, sp=True, recompute="full"))
    assert sp.layout["sp"] is False or sp.layout["sp"] == 0


def test_predict_run_names_a_missing_field(setup70b):
    lay = dict(LAYOUT)
    del lay["dp"]
    with pytest.raises(InputError, match="dp: missing"):
        predict_run(*setup70b, lay)


def test_the_library_s_stack_recipe_is_the_cli_s(setup70b):
    """The README's library example: stack_recipe gives the stack's defaults (Megatron's DP overlap off,
    cuDNN attention on Hopper), and its step is predict's."""
    import subprocess
    import sys
    m, r, c, p = setup70b
    assert (r.dp_overlap, r.attention_kernel, r.moe_dispatcher) == (False, "cudnn", "allgather")
    cli = subprocess.run([sys.executable, "-m", "costmodel.cli", "predict", "--model", "llama3-70b", "--cluster",
                          "dgx-h100", "--nodes", "8", "--gbs", "128", "--seq-len", "8192", "--tp", "4", "--pp", "4",
                          "--mbs", "1", "--recompute", "selective", "--zero", "1", "--json"],
                         capture_output=True, text=True, timeout=300)
    rec, run = json.loads(cli.stdout), predict_run(m, r, c, p, LAYOUT)
    assert cli.returncode == (0 if rec["feasible"] else 3) and run.feasible == rec["feasible"]
    assert run.step_time_s == pytest.approx(rec["step_time_s"], rel=1e-9)
    assert run.peak_mem_bytes == pytest.approx(rec["peak_mem_bytes"], rel=1e-9)


@pytest.mark.parametrize("kw, needle", [(dict(gbs=128.5), "--gbs: must be a whole number"),
                                        (dict(gbs="128"), "--gbs: must be a whole number"),
                                        (dict(dp_overlap="no"), "--dp-overlap: must be True or False"),
                                        (dict(stack="foo"), "--stack: 'foo' is not one of megatron")])
def test_a_recipe_of_the_wrong_kind_is_refused(kw, needle):
    with pytest.raises(InputError, match=needle):
        Recipe(**dict(dict(gbs=128, seq_len=4096), **kw))


def test_a_hugging_face_model_type_of_its_own_is_no_slip(tmp_path):
    """gpt_neox is GPT-NeoX (Pythia), not a misspelt gpt_neo: a family the reader knows, its biases on every
    linear and LayerNorm counted (1,011,781,632 parameters, the safetensors' count; read as a plain decoder
    it had been 542,720 short); a name Hugging Face does not register, one edit from a known family, is
    still a slip."""
    from costmodel.specs.model_config import known_family
    m = load_model(DATA + "pythia-1b.json")
    assert m.params() == 1_011_781_632 and known_family(m) and (m.head_dim, m.gated) == (256, False)
    d = json.load(open(DATA + "pythia-1b.json"))
    f = tmp_path / "c.json"
    f.write_text(json.dumps(dict(d, model_type="gpt_neoo")))
    with pytest.raises(InputError, match="'gpt_neoo' is not a Hugging Face model_type .* did you mean 'gpt_neo'"):
        load_model(str(f))
    f.write_text(json.dumps(dict(d, model_type="gpt_neoo", auto_map={"AutoConfig": "x.Config"})))
    # remote code names its own type, read as a plain decoder: without GPT-NeoX's biases
    # (16 layers of Q/K/V, output, FC1 and FC2 biases and two LayerNorm biases, and the final norm's)
    assert load_model(str(f)).params() == m.params() - (16 * (3 * 2048 + 2048 + 8192 + 2048 + 2 * 2048) + 2048)


@pytest.mark.parametrize("key, value, needle", [("hybrid_override_pattern", "M-M*-", "Nemotron-H"),
                                                ("ssm_state_size", 128, "state-space"),
                                                ("altup_num_inputs", 4, "Gemma 3n")])
def test_state_space_and_gemma3n_layers_are_refused_by_key(tmp_path, key, value, needle):
    """Nemotron-H's Mamba-2 layers had been counted as 52 transformer layers (+55%)."""
    d = json.load(open(DATA + "pythia-1b.json"))
    f = tmp_path / "c.json"
    f.write_text(json.dumps(dict(d, model_type="nemotron_h", **{key: value})))
    with pytest.raises(InputError, match=f"{key}: not modelled: .*{needle}"):
        load_model(str(f))


def test_a_snapshot_folder_is_read_by_its_config_json(tmp_path):
    shutil.copy(DATA + "pythia-1b.json", tmp_path / "config.json")
    assert load_model(str(tmp_path)).params() == load_model(DATA + "pythia-1b.json").params()
    (tmp_path / "config.json").unlink()
    with pytest.raises(InputError, match="is a directory, not a file .nor a folder with a config.json."):
        load_model(str(tmp_path))


def test_predict_json_notes_are_every_note_stderr_printed():
    """--json's notes had left out the assumed training length, the plain-decoder reading and what
    --recompute auto chose, which stderr printed."""
    import subprocess
    import sys
    import tempfile
    # StableLM: a Hugging Face model_type the reader does not know, so read as a plain decoder
    d = dict(json.load(open(DATA + "pythia-1b.json")), model_type="stablelm")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = Path(tmp) / "config.json"
        cfg.write_text(json.dumps(d))
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", "predict", "--model", str(cfg),
                            "--cluster", "dgx-h100", "--recompute", "auto", "--json"], capture_output=True, text=True,
                           timeout=300)
    notes = json.loads(r.stdout)["notes"]
    said = [ln[len("costmodel: note: "):] for ln in r.stderr.splitlines() if ln.startswith("costmodel: note: ")]
    assert notes == said and len(notes) >= 3
    assert any("gives no training length" in n for n in notes) and any("plain decoder" in n for n in notes)
    assert any(n.startswith("--recompute auto chose") for n in notes)


def test_the_readme_library_example_runs_as_written(capsys):
    """README 'As a library': its code block, run as a user pastes it, predicts a layout that fits."""
    from pathlib import Path
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = text.split("## As a library", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(block, "README.md", "exec"), scope)
    assert scope["run"].feasible and scope["run"].step_time_s > 0 and 0 < scope["found"].n_feasible <= len(scope["found"].ranked.step_time_s)
    assert capsys.readouterr().out.startswith("True ")


def test_stack_recipe_takes_names_and_refuses_other_types():
    """A stack's name and a catalog GPU's name stand for the objects; anything else is a TypeError
    that names both types, not an AttributeError deep inside."""
    from costmodel.specs import load_gpu
    by_name = stack_recipe("megatron", 8, 2048, "bf16", gpu="h100-sxm-80gb")
    assert by_name == stack_recipe(get_stack("megatron"), 8, 2048, "bf16", gpu=load_gpu("h100-sxm-80gb"))
    assert by_name.attention_kernel == "cudnn"          # TE's Hopper preference came through the name
    with pytest.raises(InputError, match="unknown GPU 'h100'"):
        stack_recipe("megatron", 8, 2048, "bf16", gpu="h100")
    with pytest.raises(InputError, match="stack: 'megatorn' is not one of"):
        stack_recipe("megatorn", 8, 2048, "bf16")
    with pytest.raises(TypeError, match="got Stack and int"):
        stack_recipe("megatron", 8, 2048, "bf16", gpu=5)


def test_qwen2_vl_is_read_as_its_qwen2_language_model(tmp_path):
    """Qwen2-VL-7B's config.json keeps its text keys at the top beside vision_config: the refusal says to
    drop vision_config (it had said to pass a text_config the file does not have), and the file without it
    is Qwen2 with its Q/K/V biases: 7,615,616,512 parameters, as Qwen2 of the same shape (the biases,
    129,024, had been dropped)."""
    cfg = {"architectures": ["Qwen2VLForConditionalGeneration"], "model_type": "qwen2_vl", "hidden_size": 3584,
           "intermediate_size": 18944, "num_hidden_layers": 28, "num_attention_heads": 28, "num_key_value_heads": 4,
           "vocab_size": 152064, "max_position_embeddings": 32768, "rope_theta": 1000000.0,
           "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}, "tie_word_embeddings": False,
           "hidden_act": "silu", "rms_norm_eps": 1e-06}
    f = tmp_path / "vl.json"
    f.write_text(json.dumps(dict(cfg, vision_config={"depth": 32, "embed_dim": 1280})))
    with pytest.raises(InputError, match=r"vision_config: not modelled: a vision encoder; .*pass the file without "
                                         r"vision_config \(jq 'del\(.vision_config\)'"):
        load_model(str(f))
    f.write_text(json.dumps(cfg))
    assert load_model(str(f)).params() == 7_615_616_512
    f.write_text(json.dumps(dict(cfg, model_type="qwen2", architectures=["Qwen2ForCausalLM"])))
    assert load_model(str(f)).params() == 7_615_616_512


@pytest.mark.parametrize("key,what", [("use_qk_norm", "Q/K norms"), ("qk_layernorm", "Q/K norms"),
                                      ("lm_head_bias", "output bias")])
def test_a_dense_family_refuses_the_norms_and_bias_its_code_does_not_build(tmp_path, key, what):
    """A Llama config with Q/K-norm or output-bias keys had been priced without them, silently, while an
    expert key was refused: both are keys its Hugging Face model ignores, so both are refused; Qwen3, which
    builds Q/K norms, keeps them."""
    d = json.loads(Path("costmodel/catalog/llama3-8b.json").read_text())
    f = tmp_path / "c.json"
    f.write_text(json.dumps(dict(d, **{key: True})))
    with pytest.raises(InputError, match=f"{key}: True: model_type 'llama' builds no {what}"):
        load_model(str(f))
    if what == "Q/K norms":
        f.write_text(json.dumps(dict(d, model_type="qwen3", architectures=["Qwen3ForCausalLM"], head_dim=128,
                                     **{key: True})))
        assert load_model(str(f)).qk_norm
