"""FLOP counts against the published formulas (Narayanan et al. SC21; Kaplan et al. 2020 6NT)."""
import pytest

from costmodel.compute import attention_flops_per_token, model_flops_per_step
from costmodel.specs import Recipe, load_model


def test_gpt3_175b_matches_megatron_formula():
    m = load_model("gpt3-175b")
    B, s = 1536, 2048
    l, h, V = m.num_layers, m.hidden, m.vocab
    megatron = 72 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    ours = model_flops_per_step(m, Recipe(gbs=B, seq_len=s))
    assert ours == pytest.approx(megatron, rel=0.005)
    # by hand: 72 * 1536 * 2048 * 96 * 12288^2 * (1 + 2048/73728 + 51200/18874368) = 3.386e18
    assert ours == pytest.approx(3.386e18, rel=0.001)


@pytest.mark.parametrize("name,params", [("llama3-70b", 70_553_706_496), ("llama3-8b", 8_030_261_248),
                                         ("llama2-7b", 6_738_415_616), ("llama2-70b", 68_976_648_192),
                                         ("mixtral-8x7b", 46_702_792_704)])
def test_param_counts_match_hugging_face(name, params):
    # exact parameter counts of the Hugging Face checkpoints (model cards / safetensors index)
    assert load_model(name).params() == params


def test_mixtral_active_params():
    # Mixtral of Experts (Jiang et al. 2024): 47B total, 13B active per token
    m = load_model("mixtral-8x7b")
    assert m.params(active=True) == pytest.approx(12.9e9, rel=0.01)


@pytest.mark.parametrize("name", ["llama3-70b", "llama3-8b", "llama3.1-405b", "llama2-13b", "mistral-7b"])
def test_llama_family_matches_6NT_plus_attention(name):
    m = load_model(name)
    r = Recipe(gbs=64, seq_len=8192)
    T = r.gbs * r.seq_len
    # 6 N T with N the parameters that take part in matmuls (no input embedding, no norms)
    norms = m.num_layers * 2 * m.hidden + m.hidden
    N = m.params() - m.embedding_params() - norms
    if m.tie_embeddings:
        N += m.vocab * m.hidden
    expected = 6 * N * T + 3 * attention_flops_per_token(m, r.seq_len) * m.num_layers * T
    assert model_flops_per_step(m, r) == pytest.approx(expected, rel=0.005)
