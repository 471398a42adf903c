"""Config readings a new user's trial of families and slips found wrong (costmodel/specs/model_config.py)."""
import json
from pathlib import Path

import pytest

from costmodel.errors import InputError
from costmodel.specs import load_model
from test_cli import assert_one_line_error, run

GEMMA2_9B = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 3584,
             "intermediate_size": 14336, "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
             "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192, "sliding_window": 4096,
             "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
             "query_pre_attn_scalar": 256, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0}


def _write(tmp_path, d, name="config.json"):
    f = tmp_path / name
    f.write_text(json.dumps(d))
    return f


@pytest.mark.parametrize("slip, family", [("Gemma-2", "gemma2"), ("qwen2.5", "qwen2"), ("Qwen3_MoE", "qwen3_moe")])
def test_a_model_type_spelt_apart_by_case_or_punctuation_is_refused_naming_the_family(tmp_path, slip, family):
    """'Gemma-2' had been read as a plain decoder: Gemma-2-9B's GELU-tanh MLP counted ungated, 7.08 B of 9.24 B,
    with no word from `models` (transformers registers no such model_type and refuses the file)."""
    f = _write(tmp_path, dict(GEMMA2_9B, model_type=slip))
    with pytest.raises(InputError, match=f"did you mean '{family}'") as e:
        load_model(str(f))
    assert e.value.field == "model_type"


def test_models_says_when_it_reads_a_config_as_a_plain_decoder(tmp_path):
    """A Hugging Face type the reader does not know (stablelm) is counted from its generic keys: `models`
    says so on stderr and in its JSON, as predict does; a known family gets no such note."""
    neox = {"model_type": "stablelm", "hidden_size": 2048, "num_hidden_layers": 24, "num_attention_heads": 16,
            "intermediate_size": 8192, "hidden_act": "gelu", "vocab_size": 50304, "tie_word_embeddings": False}
    p = run("models", "--model", str(_write(tmp_path, neox)), "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)[0]["read_as_plain_decoder"] is True
    assert "model_type 'stablelm', not a family this reader knows" in p.stderr
    q = run("models", "--model", str(_write(tmp_path, GEMMA2_9B, "gemma.json")), "--json")
    assert json.loads(q.stdout)[0]["read_as_plain_decoder"] is False and "plain decoder" not in q.stderr
    assert json.loads(q.stdout)[0]["params"] / 1e9 == pytest.approx(9.24, rel=0.005)


def test_gemma2_without_sliding_window_takes_its_config_class_default(tmp_path):
    """Gemma2Config's sliding_window defaults to 4096: a file without it had been refused ('missing or
    0, but layer_types marks 21 sliding layers', of a layer_types the file does not have)."""
    m = load_model(str(_write(tmp_path, {k: v for k, v in GEMMA2_9B.items() if k != "sliding_window"})))
    assert (m.sliding_window, m.sliding_layers) == (4096, 21)


def test_gpt_oss_without_head_dim_takes_64(tmp_path):
    """GptOssConfig's head_dim defaults to 64, not hidden / heads = 2880 / 64 = 45: gpt-oss-20b without
    the key had been counted 20.73 B (20.91 B published)."""
    cat = json.loads(open(Path(__file__).parents[2] / "costmodel/catalog/gpt-oss-120b.json").read())
    base = load_model("gpt-oss-120b")
    m = load_model(str(_write(tmp_path, {k: v for k, v in cat.items() if k != "head_dim"})))
    assert base.head_dim == m.head_dim == 64 and m.params() == base.params()


def test_chatglm_s_qkv_bias_key_is_refused_not_ignored(tmp_path):
    """add_qkv_bias (ChatGLM's) had been ignored, the count unchanged, as the other bias keys of an unknown
    family are not."""
    d = {"model_type": "chatglm", "hidden_size": 4096, "num_hidden_layers": 28, "num_attention_heads": 32,
         "intermediate_size": 13696, "hidden_act": "silu", "vocab_size": 65024, "tie_word_embeddings": False,
         "add_qkv_bias": True, "auto_map": {"AutoConfig": "configuration_chatglm.ChatGLMConfig"}}
    with pytest.raises(InputError, match="biases of a family the reader does not know") as e:
        load_model(str(_write(tmp_path, d)))
    assert e.value.field == "add_qkv_bias"


def test_dbrx_s_nested_keys_are_named_as_the_file_nests_them(tmp_path):
    d = json.loads(open(Path(__file__).parents[1] / "data/models/dbrx.json").read())
    f = _write(tmp_path, dict(d, ffn_config={k: v for k, v in d["ffn_config"].items() if k != "ffn_hidden_size"}))
    assert_one_line_error(run("models", "--model", str(f)), f"{f}: ffn_config.ffn_hidden_size: missing")
    g = _write(tmp_path, dict(d, ffn_config=dict(d["ffn_config"], moe_shared_experts=1)), "jitter.json")
    with pytest.raises(InputError) as e:
        load_model(str(g))
    assert e.value.field == "ffn_config.moe_shared_experts"


def test_bloom_counts_its_embedding_layernorm():
    """BLOOM normalises the embedding (word_embeddings_layernorm, weight and bias of 14336): 176,247,271,424
    parameters as published (arXiv:2211.05100), 28,672 more than without it."""
    m = load_model("bloom-176b")
    assert m.params() == 176_247_271_424 == m.params_published


def test_a_grok_1_remote_config_without_an_activation_takes_its_gated_gelu(tmp_path):
    """Grok-1's remote-code config.json names no activation ('hidden_act: missing' had refused it): its
    DenseBlock gates a GELU, as the catalog file states; the counts agree."""
    d = {"model_type": "grok-1", "auto_map": {"AutoConfig": "configuration_grok1.Grok1Config"}, "hidden_size": 6144,
         "intermediate_size": 32768, "num_hidden_layers": 64, "num_attention_heads": 48, "num_key_value_heads": 8,
         "num_local_experts": 8, "num_experts_per_tok": 2, "vocab_size": 131072, "max_position_embeddings": 8192}
    m, cat = load_model(str(_write(tmp_path, d))), load_model("grok1-314b")
    assert (m.gated, m.activation) == (True, "gelu")
    assert (m.params(), m.params(active=True)) == (cat.params(), cat.params(active=True))
