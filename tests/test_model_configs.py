"""MoE and MLA architectures read from their configs: published totals to 0.5%, active counts to 2%,
and one clear error for what the reader does not model."""
import json
from pathlib import Path

import pytest

from costmodel.compute import layer_matmul_flops_per_token
from costmodel.errors import InputError
from costmodel.specs import load_model

DATA = "tests/data/models/"


@pytest.mark.parametrize("name,total,active,drop_input_embedding", [
    # (model, published total, published active per token, whether the publisher's active count
    # leaves out the input embedding)
    ("deepseek-v3", 671e9, 37e9, False),          # arXiv:2412.19437: 671B total, 37B activated, MTP excluded
    ("qwen3-30b-a3b", 30.5e9, 3.3e9, False),      # model card: 30.5B total, 3.3B activated
    ("qwen3-235b-a22b", 235e9, 22e9, False),      # model card: 235B total, 22B activated
    ("gpt-oss-120b", 116.83e9, 5.13e9, True),     # OpenAI model card Table 1: 116.83B, 5.13B active
    ("mixtral-8x7b", 46.7e9, 12.9e9, False),      # Mistral AI: 46.7B total, 12.9B active
    ("mixtral-8x22b", 141e9, 39e9, False),        # Mistral AI: 141B total, 39B active
    (DATA + "qwen1.5-moe-a2.7b.json", 14.3e9, 2.7e9, False),   # Qwen blog: 14.3B, 2.7B activated
    (DATA + "dbrx.json", 132e9, 36e9, False),                  # Databricks: 132B total, 36B active
])
def test_moe_totals_and_active_counts_match_the_publications(name, total, active, drop_input_embedding):
    m = load_model(name)
    assert m.params() == pytest.approx(total, rel=0.005)
    act = m.params(active=True) - (m.vocab * m.hidden if drop_input_embedding else 0)
    assert act == pytest.approx(active, rel=0.02)


def test_deepseek_v3_reads_mla_dense_first_layers_shared_expert_and_mtp():
    """61 layers: 3 dense (FFN 18432), 58 MoE (256 routed of 2048 + 1 shared, top-8); MLA with a
    1536 Q latent and a 512 KV latent + 64 rotary key; one MTP module, not in the 671B."""
    m = load_model("deepseek-v3")
    assert (m.num_dense_layers, m.moe_layers, m.dense_mlp_width, m.shared_ffn_hidden) == (3, 58, 18432, 2048)
    assert m.is_mla and (m.q_dim, m.k_dim, m.v_dim, m.attn_out_dim) == (128 * 192, 128 * 192, 128 * 128, 128 * 128)
    # attention by hand: Q down 7168x1536, Q up 1536x24576, KV down 7168x576, KV up 512x32768,
    # output 16384x7168, plus the two latent norms (1536 + 512)
    attn = 7168 * 1536 + 1536 * 24576 + 7168 * 576 + 512 * 32768 + 16384 * 7168 + 1536 + 512
    assert m.attention_params() == attn
    assert m.mtp_layers == 1 and m.mtp_params() == 2 * 7168 + 2 * 7168 ** 2 + m.moe_layer_params() + 7168
    # the mean layer's GEMM FLOPs per token: 3 dense and 58 MoE layers weighted by their counts
    dense = 2 * 3 * 7168 * 18432
    moe = 2 * 3 * 7168 * (8 * 2048 + 2048) + 2 * 7168 * 256
    proj = 2 * (7168 * 1536 + 1536 * 24576 + 7168 * 576 + 512 * 32768 + 16384 * 7168)
    assert layer_matmul_flops_per_token(m) == pytest.approx(proj + (3 * dense + 58 * moe) / 61, rel=1e-12)


def test_llama4_scout_text_model_by_hand_and_its_chunked_attention():
    """Llama 4 Scout's text model: 48 MoE layers of 16 routed experts of 8192 (top-1) + a shared one,
    GQA 40/8 heads of 128, untied 202048-token embeddings: 107.77B by hand (Meta's 109B adds the vision
    encoder) and 17B active (model card).  36 of 48 layers attend within 8192-token chunks: at 32k
    tokens a query sees 16384 keys on a global layer and 8192^2 x 4 / (2 x 32768) = 4096 on a chunked
    one, 7168 on the mean layer; at 8k chunking changes nothing."""
    m = load_model("llama4-scout")
    h, f = 5120, 8192
    layer = 2 * h * h + 2 * h * 1024 + 2 * h + h * 16 + 17 * 3 * h * f
    assert m.params() == 48 * layer + 2 * 202048 * h + h
    assert m.params(active=True) == pytest.approx(17e9, rel=0.02)
    assert (m.chunked_layers, m.attention_chunk) == (36, 8192)
    assert m.causal_keys_per_query(32768) == 0.25 * 16384 + 0.75 * 4096
    assert m.causal_keys_per_query(8192) == 4096


def test_group_limited_routing_only_where_the_topk_method_uses_groups():
    """DeepSeek-V3 (noaux_tc): 256 experts in 8 groups, a token's 8 experts from at most 4 groups;
    DeepSeek-V2-Lite routes greedily over all 64 experts (its n_group 1)."""
    m = load_model("deepseek-v3")
    assert (m.routing_groups, m.routing_group_limit) == (8, 4)
    lite = load_model(DATA + "deepseek-v2-lite.json")
    assert (lite.routing_groups, lite.routing_group_limit) == (0, 0)


def test_mla_without_a_q_latent_and_two_shared_experts():
    """DeepSeek-V2-Lite: Q projected directly (q_lora_rank null), 1 dense first layer, 2 shared
    experts of 1408: 15.7B total (arXiv:2405.04434 appendix B)."""
    m = load_model(DATA + "deepseek-v2-lite.json")
    assert m.q_lora_rank == 0 and m.num_dense_layers == 1 and m.shared_ffn_hidden == 2 * 1408
    assert [s for _, _, s in m.attention_projections()] == ["col", "dup", "col", "row"]
    assert m.params() == pytest.approx(15.7e9, rel=0.005)


@pytest.mark.parametrize("key,value,needle", [
    ("vision_config", {"hidden_size": 1408}, "vision encoder"),
    ("layer_types", ["full_attention", "linear_attention"], "linear_attention"),
    ("index_n_heads", 64, "sparse-attention indexer"),
    ("index_topk", 2048, "sparse-attention indexer"),     # alone, it had been priced as V3
    ("index_head_dim", 128, "sparse-attention indexer"),
    ("mlp_only_layers", [99], "mlp_only_layers"),
    ("first_k_dense_replace", 80, "exceeds num_hidden_layers"),
    ("num_experts_per_tok", 300, "exceeds the 256 experts"),
    ("expert_group_size", 4, "MoE key this reader does not model"),
    ("moe_layer_start_index", 2, "MoE key this reader does not model"),
    ("num_experts", 16, "16 contradicts n_routed_experts = 256 (one count spelt two ways"),
    ("shared_expert_intermediate_size", 5632, "contradicts n_shared_experts"),
    ("kv_lora_rank", 0, "must be >= 1"),
    ("attention_bias", "false", "expected true or false"),
    ("vision_config", {}, "vision encoder"),
    ("n_routed_experts", 2**64, "must be <="),
    ("n_group", 7, "do not divide the 256 routed experts"),
    ("topk_group", 9, "exceeds the 8 expert groups"),
])
def test_unmodelled_or_bad_moe_keys_name_the_key(tmp_path, key, value, needle):
    d = json.loads(open("costmodel/catalog/deepseek-v3.json").read())
    d[key] = value
    f = tmp_path / "config.json"
    f.write_text(json.dumps(d))
    with pytest.raises(InputError) as e:
        load_model(str(f))
    assert key in str(e.value) and needle in str(e.value)


@pytest.mark.parametrize("base, drop, add, key, needle", [
    # Hugging Face's class defaults differ from intermediate_size and from 0: a file without them is refused
    ("costmodel/catalog/qwen3-30b-a3b.json", "moe_intermediate_size", {}, "moe_intermediate_size", "missing"),
    ("costmodel/catalog/deepseek-v3.json", "moe_intermediate_size", {}, "moe_intermediate_size", "missing"),
    ("costmodel/catalog/deepseek-v3.json", "first_k_dense_replace", {}, "first_k_dense_replace", "missing"),
    ("costmodel/catalog/deepseek-v3.json", "n_shared_experts", {}, "n_shared_experts", "missing"),
    (DATA + "deepseek-v2-lite.json", "n_shared_experts", {}, "n_shared_experts", "missing"),
    (DATA + "qwen1.5-moe-a2.7b.json", "shared_expert_intermediate_size", {}, "shared_expert_intermediate_size",
     "missing"),
    # one slip from a key the reader looked for: named, with the key it stands for
    ("costmodel/catalog/deepseek-v3.json", "first_k_dense_replace", {"first_k_dense_replce": 3},
     "first_k_dense_replce", "did you mean first_k_dense_replace"),
    ("costmodel/catalog/qwen3-30b-a3b.json", "mlp_only_layers", {"mlp_only_layer": [0, 1]}, "mlp_only_layer",
     "did you mean mlp_only_layers"),
    ("costmodel/catalog/mixtral-8x7b.json", None, {"capacity_factor": 1.25}, "capacity_factor",
     "--moe-capacity-factor"),
])
def test_moe_keys_a_config_must_give_or_misspells_are_named(tmp_path, base, drop, add, key, needle):
    d = json.loads(open(base).read())
    d.pop(drop, None)
    d.update(add)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(d))
    with pytest.raises(InputError) as e:
        load_model(str(f))
    assert e.value.field == key and needle in str(e.value)


@pytest.mark.parametrize("base, change, key, needle", [
    # every layer dense: an MoE config with no MoE layer is refused by the key that emptied it
    ("costmodel/catalog/qwen3-30b-a3b.json", {"mlp_only_layers": list(range(48))}, "mlp_only_layers",
     "leaves none of the 48 layers an MoE layer"),
    ("costmodel/catalog/qwen3-30b-a3b.json", {"decoder_sparse_step": 100}, "decoder_sparse_step", "the model is dense"),
    ("costmodel/catalog/deepseek-v3.json", {"first_k_dense_replace": 61}, "first_k_dense_replace", "is dense"),
    # top-k named by the key the file gives
    ("costmodel/catalog/gpt-oss-120b.json", {"experts_per_token": 129, "num_experts_per_tok": None},
     "experts_per_token", "129 exceeds the 128"),
    # an unknown MoE key: the reader's nearest keys, not a path inside the package
    ("costmodel/catalog/qwen3-30b-a3b.json", {"num_expert_groups": 4}, "num_expert_groups", "the nearest it reads: "),
])
def test_an_moe_config_is_refused_by_the_key_it_gives(tmp_path, base, change, key, needle):
    d = json.loads(open(base).read())
    d.update(change)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(d))
    with pytest.raises(InputError) as e:
        load_model(str(f))
    assert e.value.field == key and needle in str(e.value), str(e.value)
    assert "costmodel/specs" not in str(e.value)


def test_llama4_dense_layers_need_their_own_width(tmp_path):
    """Llama 4 interleaves dense layers (interleave_moe_layer_step 2, as Maverick) sized by
    intermediate_size_mlp, which Llama4TextConfig defaults to 16384, not the experts'
    intermediate_size: a file without it is refused by that key; with it, the dense layers take it."""
    d = json.loads(open("costmodel/catalog/llama4-scout.json").read())
    inner = d.get("text_config", d)
    inner["interleave_moe_layer_step"] = 2
    inner.pop("intermediate_size_mlp", None)
    f = tmp_path / "config.json"
    f.write_text(json.dumps(d))
    with pytest.raises(InputError) as e:
        load_model(str(f))
    assert e.value.field == "intermediate_size_mlp" and "16384" in str(e.value)
    inner["intermediate_size_mlp"] = 16384
    f.write_text(json.dumps(d))
    m = load_model(str(f))
    assert m.num_dense_layers == 24 and m.dense_mlp_width == 16384


def test_decoder_sparse_step_and_mlp_only_layers_make_dense_layers(tmp_path):
    """Qwen-MoE's rule: layer i is MoE when (i + 1) % decoder_sparse_step == 0 and i is not in
    mlp_only_layers; its dense layers take intermediate_size."""
    d = json.loads(open(DATA + "qwen1.5-moe-a2.7b.json").read())
    d.update(decoder_sparse_step=2, mlp_only_layers=[1])
    f = tmp_path / "config.json"
    f.write_text(json.dumps(d))
    m = load_model(str(f))
    # MoE at i = 1, 3, ..., 23 except 1: 11 MoE layers, 13 dense
    assert (m.moe_layers, m.num_dense_layers, m.dense_mlp_width) == (11, 13, 5632)
    base = load_model(DATA + "qwen1.5-moe-a2.7b.json")
    assert m.params() == base.params() - 13 * (base.moe_layer_params() - m.dense_layer_params())
    assert m.dense_layer_params() == m.attention_params() + 3 * 2048 * 5632 + 2 * 2048


def test_configs_without_experts_refuse_moe_keys_and_dbrx_nesting_is_checked(tmp_path):
    """A dense config carrying moe_intermediate_size (or top-k) is refused rather than read as a tiny
    MLP; DBRX's ffn_config must be a mapping whose MoE keys the reader knows; Llama 4's saved
    moe_layers list sets the MoE layers, and a Qwen-MoE config, whose model ignores it, is refused it."""
    def load(d):
        f = tmp_path / "config.json"
        f.write_text(json.dumps(d))
        return load_model(str(f))
    llama = json.loads(open("costmodel/catalog/llama3-8b.json").read())
    for key, value in (("moe_intermediate_size", 1024), ("num_experts_per_tok", 2)):
        with pytest.raises(InputError, match=f"{key}: set, but the model has no routed experts"):
            load(dict(llama, **{key: value}))
    dbrx = json.loads(open(DATA + "dbrx.json").read())
    with pytest.raises(InputError, match="ffn_config: expected a mapping"):
        load(dict(dbrx, ffn_config="bad"))
    with pytest.raises(InputError, match="moe_num_shared_experts: an MoE key"):
        load(dict(dbrx, ffn_config=dict(dbrx["ffn_config"], moe_num_shared_experts=2)))
    scout = json.loads(open("costmodel/catalog/llama4-scout.json").read())
    m = load(dict(scout, moe_layers=list(range(0, 48, 2))))   # 24 listed MoE layers, 24 dense
    assert (m.moe_layers, m.num_dense_layers) == (24, 24)
    q = json.loads(open(DATA + "qwen1.5-moe-a2.7b.json").read())
    with pytest.raises(InputError, match="moe_layers: model_type 'qwen2_moe' does not read it"):
        load(dict(q, moe_layers=list(range(0, 24, 2))))      # Qwen2MoeModel places them by decoder_sparse_step
    # MixtralSparseMoeBlock sizes its experts by intermediate_size: a moe_intermediate_size there would
    # have shrunk the 46.7B model to 8B unseen
    mixtral = json.loads(open("costmodel/catalog/mixtral-8x7b.json").read())
    with pytest.raises(InputError, match="moe_intermediate_size: model_type 'mixtral' does not read it"):
        load(dict(mixtral, moe_intermediate_size=2048))
    assert load(mixtral).params() == pytest.approx(46.7e9, rel=0.005)


def test_sliding_window_layers_attend_to_fewer_keys():
    """gpt-oss-120b: 18 of 36 layers see the last 128 tokens; at s = 4096 a sliding query sees
    128 - 128^2 / 8192 = 126 keys on average, a full causal one 2048: mean (2048 + 126) / 2 = 1087.
    Mistral 7B v0.1 windows every layer at 4096, which binds only above 4096 tokens."""
    g = load_model("gpt-oss-120b")
    assert (g.sliding_window, g.sliding_layers) == (128, 18)
    assert g.causal_keys_per_query(4096) == pytest.approx((2048 + 126) / 2)
    m = load_model("mistral-7b")
    assert m.causal_keys_per_query(4096) == 2048 and m.causal_keys_per_query(8192) == pytest.approx(4096 - 1024)


def test_family_rules_for_windows_shared_experts_and_nested_defaults(tmp_path):
    """Each family's Hugging Face semantics: Mixtral windows every layer; Qwen2 from max_window_layers
    with use_sliding_window; gpt-oss alternates when layer_types is absent; shared experts only where
    the family has them; DBRX's default kv_n_heads is 1; a Llama 4 text_config without its own
    model_type is still Llama4TextConfig; q_lora_rank 0 is refused (null means none)."""
    def load(d):
        f = tmp_path / "config.json"
        f.write_text(json.dumps(d))
        return load_model(str(f))
    mix = json.loads(open("costmodel/catalog/mixtral-8x7b.json").read())
    assert (load(dict(mix, sliding_window=4096)).sliding_layers, load(mix).sliding_layers) == (32, 0)
    with pytest.raises(InputError, match="n_shared_experts: model_type 'mixtral' has no shared experts"):
        load(dict(mix, n_shared_experts=1))
    # every Mixtral layer is MoE whatever another family's layer-placement key says (MixtralModel reads none)
    for key, v in (("first_k_dense_replace", 3), ("moe_layer_freq", 2), ("decoder_sparse_step", 2),
                   ("interleave_moe_layer_step", 2), ("mlp_only_layers", [0])):
        with pytest.raises(InputError, match=f"{key}: model_type 'mixtral' does not read it"):
            load(dict(mix, **{key: v}))
    q = json.loads(open(DATA + "qwen1.5-moe-a2.7b.json").read())
    assert load(dict(q, use_sliding_window=True, sliding_window=4096, max_window_layers=20)).sliding_layers == 4
    oss = {k: v for k, v in json.loads(open("costmodel/catalog/gpt-oss-120b.json").read()).items() if k != "layer_types"}
    assert load(oss).sliding_layers == 18
    with pytest.raises(InputError, match="sliding_window: missing or 0"):
        load(dict(oss, sliding_window=0))
    dbrx = json.loads(open(DATA + "dbrx.json").read())
    assert load(dict(dbrx, attn_config={"clip_qkv": 8})).num_kv_heads == 1
    ds = json.loads(open("costmodel/catalog/deepseek-v3.json").read())
    with pytest.raises(InputError, match="q_lora_rank: must be >= 1"):
        load(dict(ds, q_lora_rank=0))


def test_model_flops_count_the_window_a_sliding_layer_attends():
    """Mistral 7B at 32k tokens: every layer sees 4,096 keys, so model FLOPs count 4,096 per query
    (not 32,768) and MFU cannot exceed what the GEMMs deliver."""
    from costmodel.compute import attention_flops_per_token
    m = load_model("mistral-7b")
    assert attention_flops_per_token(m, 32768) == 2.0 * 4096 * (m.q_dim + m.attn_out_dim)
    assert attention_flops_per_token(m, 2048) == 2.0 * 2048 * (m.q_dim + m.attn_out_dim)


def test_a_gpt2_config_older_than_n_inner_takes_gpt2config_defaults(tmp_path):
    """The hub's original gpt2 config.json has no n_inner and no activation_function: transformers'
    GPT2Config defaults (4 x n_embd, gelu_new) apply, giving GPT-2 small's 124,439,808 parameters
    (tied embeddings, 1024 learned positions)."""
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024,
                             "n_ctx": 1024, "vocab_size": 50257}))
    m = load_model(str(f))
    assert (m.ffn_hidden, m.activation, m.params()) == (3072, "gelu_new", 124_439_808)
    f.write_text(json.dumps({"n_embd": 768, "n_head": 12, "n_layer": 12, "vocab_size": 50257}))   # no model_type
    with pytest.raises(InputError, match="intermediate_size: missing"):
        load_model(str(f))


def test_two_spellings_of_one_count_must_agree(tmp_path):
    """hidden_size and GPT-2's n_embd (or num_hidden_layers and n_layer) are one count: equal values
    load, different ones are refused naming both; a generation top_k that older dense configs
    serialise is not a router's top-k, and a padded vocabulary is the embedding's size."""
    def load(d):
        f = tmp_path / "config.json"
        f.write_text(json.dumps(d))
        return load_model(str(f))
    llama = json.loads(open("costmodel/catalog/llama3-8b.json").read())
    assert load(dict(llama, n_embd=4096, n_layer=32)).hidden == 4096
    with pytest.raises(InputError, match=r"hidden_size: 4096 disagrees with n_embd 2048"):
        load(dict(llama, n_embd=2048))
    with pytest.raises(InputError, match=r"num_hidden_layers: 32 disagrees with n_layers 40"):
        load(dict(llama, n_layers=40))
    base = load(llama)
    dense = load(dict(llama, top_k=50))
    assert dense.topk == 1 and dense.params() == base.params()
    padded = load(dict(llama, padded_vocab_size=128_512))
    assert padded.params() - base.params() == 2 * (128_512 - 128_256) * 4096   # untied input and output
    with pytest.raises(InputError, match=r"vocab_size: missing"):       # Hugging Face's own key is named
        load({k: v for k, v in llama.items() if k != "vocab_size"})


def test_dropout_comes_from_the_attention_dropout_probability(tmp_path):
    """A Hugging Face config trains with dropout when its attention-dropout probability is above 0
    (attention_dropout, GPT-2's attn_pdrop, BERT's attention_probs_dropout_prob); GPT-2 configs without
    attn_pdrop take GPT2Config's 0.1; the catalog's _dropout wins; a probability outside [0, 1) or a
    _dropout that is not true/false is refused naming the key."""
    gpt2 = {"model_type": "gpt2", "n_embd": 768, "n_head": 12, "n_layer": 12, "n_positions": 1024, "vocab_size": 50257}
    llama = json.loads((Path(__file__).resolve().parents[1] / "costmodel" / "catalog" / "llama3-8b.json").read_text())
    llama.pop("_dropout")

    def load(d):
        f = tmp_path / "config.json"
        f.write_text(json.dumps(d))
        return load_model(str(f))
    assert load(gpt2).dropout is True
    assert load({**gpt2, "attn_pdrop": 0.0}).dropout is False
    assert load({**llama, "attention_dropout": 0.0}).dropout is False
    assert load({**llama, "attention_dropout": 0.1}).dropout is True
    assert load(llama).dropout is False
    assert load({**llama, "attention_dropout": 0.1, "_dropout": False}).dropout is False
    with pytest.raises(InputError, match="attention_dropout: expected a dropout probability in \\[0, 1\\), got 1.5"):
        load({**llama, "attention_dropout": 1.5})
    with pytest.raises(InputError, match="_dropout: expected true or false, got 'no'"):
        load({**llama, "_dropout": "no"})


def test_a_head_dim_no_model_has_is_refused_by_its_key(tmp_path):
    """A head_dim of 1e9 (a slip) is refused naming the file's key, before any kernel check blames the
    attention kernel for it; Gemma's 256 reads."""
    d = json.loads(open("costmodel/catalog/llama3-8b.json").read())
    f = tmp_path / "config.json"
    f.write_text(json.dumps(dict(d, head_dim=10**9)))
    with pytest.raises(InputError, match="must be <= 16384") as e:
        load_model(str(f))
    assert "head_dim" in str(e.value)
    d.pop("_params_published")          # Llama 3 8B's count is not this wider-headed model's
    f.write_text(json.dumps(dict(d, head_dim=256)))
    assert load_model(str(f)).head_dim == 256


def test_a_key_written_twice_in_a_config_json_is_refused(tmp_path):
    """Python's JSON reader (and Hugging Face's) keeps the last of two equal keys: vocab_size 100 after
    152064 would count 1.09B parameters fewer, silently."""
    f = tmp_path / "config.json"
    text = open("costmodel/catalog/llama3-8b.json").read().rstrip()
    f.write_text(text[:-1].rstrip() + ', "vocab_size": 100}')
    with pytest.raises(InputError) as e:
        load_model(str(f))
    assert e.value.field == "vocab_size" and "written twice" in str(e.value)


def test_an_unknown_model_type_is_read_as_a_plain_decoder_and_said(tmp_path):
    """Qwen2's Q/K/V biases come from its model_type: under an unknown one the reader takes the generic
    keys (no biases: 7,615,487,488 parameters instead of 7,615,616,512 for Qwen2.5-7B's dimensions) and
    known_family says so, for predict's note."""
    from costmodel.specs.model_config import known_family
    qwen = dict(model_type="qwen2", num_hidden_layers=28, hidden_size=3584, intermediate_size=18944,
                num_attention_heads=28, num_key_value_heads=4, vocab_size=152064, hidden_act="silu",
                tie_word_embeddings=False)
    counts = {}
    for mt in ("qwen2", "foo"):
        f = tmp_path / f"{mt}.json"
        f.write_text(json.dumps(dict(qwen, model_type=mt)))
        m = load_model(str(f))
        counts[mt] = (m.params(), known_family(m))
    assert counts == {"qwen2": (7_615_616_512, True), "foo": (7_615_487_488, False)}
    assert all(known_family(load_model(n)) for n in ("llama3-8b", "gpt3-175b", "grok1-314b", "deepseek-v3"))


def test_gemma2_alternates_sliding_and_full_layers_without_layer_types(tmp_path):
    """Gemma-2-9B's hub config.json (no layer_types): Hugging Face's Gemma 2 runs its even layers with
    the 4096-token window and its odd ones over the whole sequence (modeling_gemma2.py, is_sliding =
    not bool(layer_idx % 2)): 21 of 42 layers slide; 9.24 B parameters as published."""
    cfg = {"architectures": ["Gemma2ForCausalLM"], "model_type": "gemma2", "hidden_size": 3584,
           "intermediate_size": 14336, "num_hidden_layers": 42, "num_attention_heads": 16, "num_key_value_heads": 8,
           "head_dim": 256, "vocab_size": 256000, "max_position_embeddings": 8192, "sliding_window": 4096,
           "hidden_act": "gelu_pytorch_tanh", "hidden_activation": "gelu_pytorch_tanh", "tie_word_embeddings": True,
           "rms_norm_eps": 1e-06, "rope_theta": 10000.0, "attention_bias": False, "attention_dropout": 0.0,
           "query_pre_attn_scalar": 256, "final_logit_softcapping": 30.0, "attn_logit_softcapping": 50.0}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    m = load_model(str(f))
    assert (m.sliding_window, m.sliding_layers) == (4096, 21)
    assert m.params() / 1e9 == pytest.approx(9.24, rel=0.005)


def test_kimi_k2_is_read_as_the_deepseek_v3_it_is_built_on():
    """Kimi K2's config.json says model_type kimi_k2 over DeepseekV3ForCausalLM: read as DeepSeek-V3
    (MLA, 1 dense first layer, 384 routed experts of 2048 + 1 shared, top-8).  By hand: MLA attention
    per layer 7168x1536 + 1536x(64x192) + 7168x576 + 512x(64x256) + (64x128)x7168 + latent norms,
    60 MoE layers, 1 dense layer of 18432, untied 163840-token embeddings: 1,026.4B; Moonshot rounds
    it to 1T (its report's 1.04T is 1.3% above this arithmetic); 32.6B activated (report)."""
    m = load_model(DATA + "kimi-k2.json")
    h = 7168
    attn = h * 1536 + 1536 * 64 * 192 + h * 576 + 512 * 64 * 256 + 64 * 128 * h + 1536 + 512
    expert = 3 * h * 2048
    moe_layer = attn + 385 * expert + 384 * h + 2 * h
    dense_layer = attn + 3 * h * 18432 + 2 * h
    assert m.family == "deepseek_v3" and m.is_mla and (m.num_dense_layers, m.moe_layers) == (1, 60)
    assert m.params() == 60 * moe_layer + dense_layer + 2 * 163840 * h + h
    assert m.params() == pytest.approx(1.04e12, rel=0.015)
    assert m.params(active=True) == pytest.approx(32.6e9, rel=0.02)


def test_glm45_air_reads_shared_experts_qkv_bias_dense_first_layer_and_mtp():
    """GLM-4.5-Air (glm4_moe): 46 layers, the first dense (10944), 45 MoE of 128 routed experts of
    1408 + 1 shared, top-8; GQA 96/8 heads of 128 with Q/K/V biases (attention_bias), no Q/K norm
    (use_qk_norm false); one MTP layer counted apart.  Published 106B total and 12B active (Z.ai
    counts neither embedding as active): 106.85B and 12.18B by this arithmetic."""
    m = load_model(DATA + "glm-4.5-air.json")
    h = 4096
    attn = h * 96 * 128 + 2 * h * 8 * 128 + 96 * 128 * h + (96 + 16) * 128     # + Q/K/V biases
    moe_layer = attn + 129 * 3 * h * 1408 + 128 * h + 2 * h
    assert (m.family, m.qkv_bias, m.qk_norm, m.mtp_layers) == ("glm4_moe", True, False, 1)
    assert (m.num_dense_layers, m.moe_layers, m.shared_ffn_hidden, m.dense_mlp_width) == (1, 45, 1408, 10944)
    assert m.params() == 45 * moe_layer + attn + 3 * h * 10944 + 2 * h + 2 * 151552 * h + h
    assert m.params() == pytest.approx(106e9, rel=0.01)
    assert m.params(active=True) - 2 * 151552 * h == pytest.approx(12e9, rel=0.02)
    with pytest.raises(InputError, match="use_qk_norm: expected true or false"):
        load_dict_model(dict(json.loads(open(DATA + "glm-4.5-air.json").read()), use_qk_norm="yes"))
    assert load_dict_model(dict(json.loads(open(DATA + "glm-4.5-air.json").read()), use_qk_norm=True)).qk_norm


def load_dict_model(d, name="config.json"):
    """A ModelSpec read from ``d`` written to a temporary ``name``."""
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / name
        f.write_text(json.dumps(d))
        return load_model(str(f))


#: google/gemma-3-1b-pt config.json (huggingface.co); Gemma 3 Technical Report (arXiv:2503.19786)
#: Table 1: 1B = 302M embedding + 698M non-embedding parameters; 27B = 1,416M + 25,600M
GEMMA3_1B = {"architectures": ["Gemma3ForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
             "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "hidden_size": 1152,
             "intermediate_size": 6912, "max_position_embeddings": 32768, "model_type": "gemma3_text",
             "num_attention_heads": 4, "num_hidden_layers": 26, "num_key_value_heads": 1, "query_pre_attn_scalar": 256,
             "rms_norm_eps": 1e-06, "rope_local_base_freq": 10000, "rope_theta": 1000000, "sliding_window": 512,
             "sliding_window_pattern": 6, "vocab_size": 262144}


def test_gemma3_reads_hidden_activation_its_defaults_and_five_local_layers_to_one_global():
    """Gemma 3 1B: GeGLU (hidden_activation), tied embeddings by Gemma's default, Q/K norms, and every
    6th layer global (4 of 26), the rest in a 512-token window; 302M + 698M as Table 1 gives.  Gemma 3
    27B's text_config leaves vocab_size and hidden_activation out: Gemma3TextConfig's 262208 and
    gelu_pytorch_tanh apply; 25,600M non-embedding parameters as Table 1; 10 of 62 layers global."""
    m = load_dict_model(GEMMA3_1B)
    assert (m.activation, m.gated, m.tie_embeddings, m.qk_norm) == ("gelu_pytorch_tanh", True, True, True)
    assert (m.sliding_window, m.sliding_layers) == (512, 22)
    assert m.embedding_params() == pytest.approx(302e6, rel=0.005)
    assert m.params() - m.embedding_params() == pytest.approx(698e6, rel=0.005)
    text_27b = {"head_dim": 128, "hidden_size": 5376, "intermediate_size": 21504, "model_type": "gemma3_text",
                "num_attention_heads": 32, "num_hidden_layers": 62, "num_key_value_heads": 16,
                "query_pre_attn_scalar": 168, "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
                "sliding_window": 1024}
    big = load_dict_model({"model_type": "gemma3", "text_config": text_27b})
    assert (big.vocab, big.activation, big.sliding_layers) == (262208, "gelu_pytorch_tanh", 52)
    assert big.params() - big.embedding_params() == pytest.approx(25_600e6, rel=0.005)
    assert big.embedding_params() == pytest.approx(1_416e6, rel=0.005)


def test_tie_word_embeddings_defaults_to_the_familys_own():
    """Left out, tie_word_embeddings is what the family's HF config class defaults it to: False for
    Llama (an untied 128256 x 4096 output layer more), True for Gemma; a family this reader does not
    know must give it.  A hub checkout's config.json is named after its folder."""
    llama = json.loads(open("costmodel/catalog/llama3-8b.json").read())
    tied = load_dict_model(dict(llama, tie_word_embeddings=True))
    absent = load_dict_model({k: v for k, v in llama.items() if k not in ("tie_word_embeddings", "_name",
                                                                        "_display_name")})
    assert absent.params() - tied.params() == 128256 * 4096
    unknown = {k: v for k, v in llama.items() if k != "tie_word_embeddings"}
    with pytest.raises(InputError, match="tie_word_embeddings: missing: model_type 'foo' is not a family"):
        load_dict_model(dict(unknown, model_type="foo"))
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "Gemma-3-1B").mkdir()
        f = Path(tmp) / "Gemma-3-1B" / "config.json"
        f.write_text(json.dumps(GEMMA3_1B))
        assert load_model(str(f)).name == "Gemma-3-1B"


def test_qwen3_next_linear_attention_and_unknown_families_shared_experts_are_refused_by_name():
    """Qwen3-Next's Gated DeltaNet layers are not modelled (its linear_num_value_heads is named); a
    shared-expert key under a model_type the reader does not know says so, not that the family has
    none."""
    q = json.loads(open("costmodel/catalog/qwen3-30b-a3b.json").read())
    with pytest.raises(InputError, match="linear_num_value_heads: not modelled: Gated DeltaNet"):
        load_dict_model(dict(q, model_type="qwen3_next", linear_num_value_heads=32, full_attention_interval=4))
    with pytest.raises(InputError, match="n_shared_experts: model_type 'bar_moe' is not a family this reader knows"):
        load_dict_model(dict(q, model_type="bar_moe", n_shared_experts=1))


def test_granite_shared_mlp_and_minimax_lightning_attention_are_named_not_dropped():
    """GraniteMoeShared's shared MLP (shared_intermediate_size 1024 on Granite-3.0-3B-A800M: 151M parameters)
    had been dropped, and MiniMax's lightning-attention layers (attn_type_list) priced as softmax attention;
    GraniteMoeSharedConfig's default 0 (no shared MLP) reads as the plain GraniteMoE."""
    q = json.loads(open("costmodel/catalog/qwen3-30b-a3b.json").read())
    with pytest.raises(InputError, match="shared_intermediate_size: not modelled: a shared MLP beside the experts"):
        load_dict_model(dict(q, shared_intermediate_size=1024))
    with pytest.raises(InputError, match="attn_type_list: not modelled: lightning"):
        load_dict_model(dict(q, attn_type_list=[0, 0, 0, 0, 0, 0, 0, 1] * 6))
    assert load_dict_model(dict(q, shared_intermediate_size=0)).params() == load_dict_model(q).params()


@pytest.mark.parametrize("base,change,drop,needle", [
    # DeepseekV3Config's q_lora_rank default is 1536, not none: an absent key is refused (null means none)
    ("costmodel/catalog/deepseek-v3.json", {}, "q_lora_rank", "q_lora_rank: missing"),
    ("costmodel/catalog/llama3-8b.json", {"mlp_bias": True}, None, "mlp_bias: True: MLP biases are not modelled"),
    # LlamaForCausalLM ignores expert keys: counting 8 experts would read 47B for an 8B model
    ("costmodel/catalog/llama3-8b.json", {"num_local_experts": 8, "num_experts_per_tok": 2}, None,
     "num_local_experts: model_type 'llama' has no experts"),
    ("costmodel/catalog/qwen3-30b-a3b.json", {"model_type": "Qwen3_moe"}, None, "did you mean 'qwen3_moe'?"),
    ("costmodel/catalog/llama3-8b.json", {"model_type": 5}, None, "model_type: expected a name, got 5"),
])
def test_what_would_change_the_count_silently_is_refused_by_name(base, change, drop, needle):
    d = json.loads(open(base).read())
    d.pop(drop, None)
    d.update(change)
    with pytest.raises(InputError) as e:
        load_dict_model(d)
    assert needle in str(e.value)


def test_family_defaults_falcon_multi_query_and_a_public_key_never_taken_for_a_private_one():
    """Gemma 2 without head_dim takes Gemma2Config's 256 (9.24B, not 9.01B); Falcon-7B's multi_query is
    one K/V head (6.92B published; 8.2B had been read with 71 K/V heads); an unknown family's own
    'bias' key is not a slip for the reader's '_bias'."""
    gemma2 = {"model_type": "gemma2", "hidden_size": 3584, "intermediate_size": 14336, "num_hidden_layers": 42,
              "num_attention_heads": 16, "num_key_value_heads": 8, "vocab_size": 256000, "hidden_activation":
              "gelu_pytorch_tanh", "tie_word_embeddings": True, "sliding_window": 4096}
    assert load_dict_model(gemma2).params() / 1e9 == pytest.approx(9.24, rel=0.005)
    falcon = {"model_type": "falcon", "hidden_size": 4544, "num_hidden_layers": 32, "num_attention_heads": 71,
              "multi_query": True, "vocab_size": 65024, "intermediate_size": 18176, "hidden_act": "gelu",
              "tie_word_embeddings": True, "bias": False}
    m = load_dict_model(falcon)
    assert m.num_kv_heads == 1 and m.params() / 1e9 == pytest.approx(6.92, rel=0.01)


@pytest.mark.parametrize("cfg,total,active", [
    # allenai/OLMo-2-1124-7B config.json: 7.30B (the model card's count)
    (dict(model_type="olmo2", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=32,
          intermediate_size=11008, vocab_size=100352, hidden_act="silu", tie_word_embeddings=False,
          max_position_embeddings=4096), 7.30e9, None),
    # allenai/OLMoE-1B-7B-0924 config.json: 6.9B total, 1.3B active (Muennighoff et al., OLMoE, arXiv:2409.02060)
    (dict(model_type="olmoe", hidden_size=2048, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=16,
          intermediate_size=1024, num_experts=64, num_experts_per_tok=8, vocab_size=50304, hidden_act="silu",
          tie_word_embeddings=False, max_position_embeddings=4096), 6.9e9, 1.3e9)])
def test_olmo2_and_olmoe_are_read_with_their_qk_norms(tmp_path, cfg, total, active):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    m = load_model(str(f))
    assert m.qk_norm and m.params() == pytest.approx(total, rel=0.005)
    if active:
        assert (m.num_experts, m.topk, m.ffn_hidden) == (64, 8, 1024)
        assert m.params(active=True) == pytest.approx(active, rel=0.02)


def test_deepseek_v32_is_refused_for_its_sparse_attention_indexer_not_as_a_typo(tmp_path):
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model_type": "deepseek_v32", "hidden_size": 7168}))
    with pytest.raises(InputError, match="model_type: 'deepseek_v32': DeepSeek-V3.2's sparse attention"):
        load_model(str(f))


def test_a_wrapper_s_dimensions_are_its_text_config_s(tmp_path):
    """Gemma3Config and Llama4Config build the language model from text_config alone: a dimension
    beside it that says otherwise (or says what text_config leaves to its default) is refused by name;
    the same value twice is read; a text_config without its own model_type is the wrapper's text class
    (Gemma 3 27B: 27.0B with the language model's defaults, vocabulary 262,208)."""
    tc = {"model_type": "gemma3_text", "hidden_size": 5376, "num_hidden_layers": 62, "intermediate_size": 21504,
          "num_attention_heads": 32, "num_key_value_heads": 16, "head_dim": 128, "sliding_window": 1024}
    f = tmp_path / "config.json"
    for top, inner, want in (({}, tc, None), ({"hidden_size": 5376}, tc, None),
                             ({}, {k: v for k, v in tc.items() if k != "model_type"}, None),
                             ({"hidden_size": 1000}, tc, "hidden_size: 1000 beside text_config, whose hidden_size is 5376"),
                             ({"vocab_size": 1000}, tc, "vocab_size: 1000 beside text_config: the language model's")):
        f.write_text(json.dumps({"model_type": "gemma3", **top, "text_config": inner}))
        if want is None:
            assert load_model(str(f)).params() == pytest.approx(27.0e9, rel=0.005)
        else:
            with pytest.raises(InputError, match=want):
                load_model(str(f))


def test_a_config_without_hidden_act_names_its_family_default(tmp_path):
    """A hand-written Llama config without hidden_act is refused (never a silent default), naming the
    silu Hugging Face's LlamaConfig would take; a family without such a default gets no hint."""
    llama = json.loads(open("costmodel/catalog/llama3-8b.json").read())
    llama.pop("hidden_act")
    f = tmp_path / "config.json"
    f.write_text(json.dumps(llama))
    with pytest.raises(InputError, match="hidden_act: missing \\(Hugging Face's llama config class would default it "
                                         "to silu"):
        load_model(str(f))
    f.write_text(json.dumps(dict(llama, model_type="opt")))
    with pytest.raises(InputError, match="hidden_act: missing$"):
        load_model(str(f))


def _cfg(tmp_path, d: dict):
    f = tmp_path / "config.json"
    f.write_text(json.dumps(d))
    return load_model(str(f))


def test_hugging_face_family_defaults_of_keys_a_file_leaves_out(tmp_path):
    """Keys Hugging Face's config classes default to a value of their own, not to what a plain reading would
    assume: MistralConfig's and MixtralConfig's num_key_value_heads 8 (Mistral-7B 7,241,732,096 parameters;
    read as MHA it was 8.05B), Qwen3Config's head_dim 128 (Qwen3-0.6B 596,049,920; hidden / heads gave
    508M), Gemma3TextConfig's 8 heads and 4 KV heads (Gemma 3 4B's text model), BLOOM's 4h GELU MLP
    with biases (BloomConfig has no MLP keys; bloom-560m 559.21M, HF 559.21M less its embedding norm)."""
    mistral = dict(model_type="mistral", hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                   intermediate_size=14336, vocab_size=32000, hidden_act="silu", tie_word_embeddings=False)
    assert _cfg(tmp_path, mistral).params() == 7_241_732_096
    assert _cfg(tmp_path, dict(mistral, num_key_value_heads=None)).num_kv_heads == 32     # HF: None is MHA
    qwen3 = dict(model_type="qwen3", hidden_size=1024, num_hidden_layers=28, num_attention_heads=16,
                 num_key_value_heads=8, intermediate_size=3072, vocab_size=151936, hidden_act="silu",
                 tie_word_embeddings=True)
    assert _cfg(tmp_path, qwen3).params() == 596_049_920
    g3 = _cfg(tmp_path, dict(model_type="gemma3", text_config=dict(
        model_type="gemma3_text", hidden_size=2560, intermediate_size=10240, num_hidden_layers=34, sliding_window=1024)))
    assert (g3.num_heads, g3.num_kv_heads, g3.head_dim) == (8, 4, 256)
    bloom = _cfg(tmp_path, dict(model_type="bloom", hidden_size=1024, n_layer=24, n_head=16, vocab_size=250880))
    assert (bloom.ffn_hidden, bloom.activation, bloom.bias) == (4096, "gelu", True)
    assert bloom.params() == pytest.approx(559_214_592, abs=2 * 1024)


def test_wrappers_without_their_text_model_and_unmodelled_projections_are_named(tmp_path):
    """A llama4 or gemma3 file without text_config names text_config (it had suggested reading it as
    'llama'); OPT-350m's 512-wide embedding projected to 1024 is refused by its key (it was counted as a
    1024-wide embedding, +7.4%)."""
    for mt in ("llama4", "gemma3"):
        with pytest.raises(InputError, match=f"text_config: missing: a {mt} file"):
            _cfg(tmp_path, {"model_type": mt})
    opt = dict(model_type="opt", hidden_size=1024, ffn_dim=4096, num_hidden_layers=24, num_attention_heads=16,
               vocab_size=50272, max_position_embeddings=2048, activation_function="relu", word_embed_proj_dim=512)
    with pytest.raises(InputError, match="word_embed_proj_dim: 512 is not hidden_size 1024"):
        _cfg(tmp_path, opt)
    assert _cfg(tmp_path, dict(opt, word_embed_proj_dim=1024)).bias


@pytest.mark.parametrize("key,value,on", [("dropout", 0.1, True), ("resid_pdrop", 0.1, True),
                                          ("hidden_dropout", 0.1, True), ("attention_dropout", 0.0, False),
                                          ("hidden_dropout", 0.0, False)])
def test_residual_dropout_turns_dropout_on_as_attention_dropout_does(tmp_path, key, value, on):
    """OPT's dropout 0.1 beside attention_dropout 0.0 trains with residual dropout masks: dropout is one
    switch, on when either probability is above 0 (as a run's own configuration sets it)."""
    base = dict(model_type="llama", hidden_size=1024, num_hidden_layers=4, num_attention_heads=16,
                intermediate_size=4096, vocab_size=32000, hidden_act="silu", tie_word_embeddings=False,
                attention_dropout=0.0)
    assert _cfg(tmp_path, dict(base, **{key: value})).dropout is on


def test_json_outputs_say_what_the_text_says_of_a_model(tmp_path):
    """models --json carries head_dim, vocab, the gated MLP and its activation (the text's FFN column says
    'gated'); predict --json says when a config was read as a plain decoder (a family the reader does not
    know: Falcon), which only stderr had said."""
    import subprocess
    import sys
    repo = Path(__file__).resolve().parents[1]
    r = subprocess.run([sys.executable, "-m", "costmodel.cli", "models", "--json"], capture_output=True, text=True,
                       cwd=repo, timeout=120)
    rec = {x["name"]: x for x in json.loads(r.stdout)}["llama3-8b"]
    assert (rec["head_dim"], rec["vocab"], rec["gated"], rec["activation"]) == (128, 128256, True, "silu")
    f = tmp_path / "falcon.json"
    f.write_text(json.dumps(dict(model_type="falcon", hidden_size=1024, num_hidden_layers=4, num_attention_heads=16,
                                 intermediate_size=4096, vocab_size=32000, hidden_act="gelu", tie_word_embeddings=True)))
    out = {}
    for m in (str(f), "llama3-8b"):
        r = subprocess.run([sys.executable, "-m", "costmodel.cli", "predict", "--model", m, "--cluster", "dgx-h100",
                            "--nodes", "1", "--seq-len", "2048", "--gbs", "8", "--json"], capture_output=True, text=True,
                           cwd=repo, timeout=120)
        out[m] = json.loads(r.stdout)["model_read_as_plain_decoder"]
    assert out == {str(f): True, "llama3-8b": False}


_T5_BASE = {"model_type": "t5", "architectures": ["T5ForConditionalGeneration"], "d_model": 768, "d_ff": 2048,
            "num_layers": 12, "num_decoder_layers": 12, "num_heads": 12, "vocab_size": 32128,
            "is_encoder_decoder": True, "feed_forward_proj": "gated-gelu", "hidden_size": 768,
            "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 2048, "hidden_act": "gelu"}


@pytest.mark.parametrize("config, key, needle", [
    (_T5_BASE, "model_type", "encoder-decoder model"),
    # a type of one's own (remote code) carrying a key only such models have
    (dict(_T5_BASE, model_type="my_seq2seq"), "is_encoder_decoder", "encoder-decoder model"),
    (dict(_T5_BASE, model_type="my_seq2seq", is_encoder_decoder=False), "num_decoder_layers", "encoder-decoder model"),
    ({"model_type": "my_ssm", "hidden_size": 4096, "num_hidden_layers": 64, "num_heads": 128, "vocab_size": 32768,
      "state_size": 128, "n_groups": 8, "expand": 2, "intermediate_size": 8192, "num_attention_heads": 32,
      "hidden_act": "silu"}, "state_size", "state-space or recurrent model"),
    ({"model_type": "my_vision", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
      "intermediate_size": 3072, "hidden_act": "gelu", "image_size": 224, "patch_size": 16, "vocab_size": 1000},
     "image_size", "vision or audio model"),
    ({"model_type": "bert", "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
      "intermediate_size": 3072, "hidden_act": "gelu", "vocab_size": 30522}, "model_type", "encoder-only model")])
def test_a_model_that_is_no_decoder_is_refused_by_its_type_or_key(tmp_path, config, key, needle):
    """flan-t5-base with the decoder keys filled in had been read as a 115M-parameter decoder (248M real),
    Mamba-Codestral as a 15.3B attention transformer (7.3B real), a ViT as an 86M causal LM: their
    model_type or a key only such models carry refuses them by name."""
    f = tmp_path / "config.json"
    f.write_text(json.dumps(config))
    with pytest.raises(InputError, match=needle) as e:
        load_model(str(f))
    assert e.value.field == key


def test_attention_bias_is_every_projection_s_and_an_unknown_family_s_bias_keys_are_refused(tmp_path):
    """HF's LlamaAttention and Gemma2Attention build o_proj with bias=config.attention_bias: Llama 3 8B with
    attention_bias true has 32 x (4096 + 1024 + 1024 + 4096) bias parameters (the output projection's had
    been left out); Qwen2's and GLM-4-MoE's o_proj have none.  A bias key of an unknown family (qkv_bias,
    bias, use_bias) had been ignored: which projections carry it is that family's code's, so it is refused."""
    base = load_model("llama3-8b").params()
    d = json.loads(open("costmodel/catalog/llama3-8b.json").read())
    f = tmp_path / "config.json"
    f.write_text(json.dumps(dict(d, attention_bias=True)))
    assert load_model(str(f)).params() - base == 32 * (4096 + 1024 + 1024 + 4096)
    for key in ("qkv_bias", "bias", "use_bias"):
        f.write_text(json.dumps(dict(d, model_type="mystery", **{key: True})))
        with pytest.raises(InputError, match="biases of a family the reader does not know") as e:
            load_model(str(f))
        assert e.value.field == key


def test_an_mpt_config_is_refused_by_its_type_not_by_a_key_it_lacks(tmp_path):
    """MPT-30B's hub config (d_model, n_heads, expansion_ratio, attn_config) had failed on 'ffn_config:
    ffn_hidden_size: missing', DBRX's key, which the file never has."""
    f = tmp_path / "config.json"
    f.write_text(json.dumps({"model_type": "mpt", "d_model": 7168, "n_heads": 64, "n_layers": 48, "expansion_ratio": 4,
                             "vocab_size": 50432, "attn_config": {"alibi": True}, "ffn_config": {"ffn_type": "mptmlp"}}))
    with pytest.raises(InputError, match="MPT's own keys") as e:
        load_model(str(f))
    assert e.value.field == "model_type"


def test_gemma_layers_hold_four_norms_and_gpt2_refuses_a_head_width_its_attention_ignores():
    """Gemma 2 and 3 layers hold input, post-attention, pre- and post-feedforward RMSNorms (modeling_gemma3.py):
    Gemma 3 1B's count had two of them (26 x 2 x 1152 weights short).  GPT-2's attention splits n_embd over
    n_head whatever a head_dim key says: a head_dim of 128 on GPT-2 XL (64 wide) had grown it 32 % silently."""
    m = load_dict_model(GEMMA3_1B)
    assert m.layer_norms == 4
    base = dict(GEMMA3_1B, model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="gelu_pytorch_tanh",
                tie_word_embeddings=True)
    for k in ("hidden_activation", "query_pre_attn_scalar", "rope_local_base_freq", "sliding_window",
              "sliding_window_pattern"):
        base.pop(k)
    llama_like = load_dict_model(base)
    # the same shapes as a two-norm family: 2 more hidden-wide norms a layer, and Gemma 3's Q/K norms
    assert m.params() - llama_like.params() == 26 * 2 * 1152 + 26 * 2 * 256
    gpt2 = {"model_type": "gpt2", "n_embd": 1600, "n_head": 25, "n_layer": 48, "vocab_size": 50257, "n_positions": 1024}
    assert load_dict_model(gpt2).params() == 1_557_611_200
    with pytest.raises(InputError, match=r"head_dim: 128, but gpt2's attention splits hidden_size 1600 over "
                                         r"num_attention_heads 25 \(64 wide"):
        load_dict_model(dict(gpt2, head_dim=128))
    assert load_dict_model(dict(gpt2, head_dim=64)).params() == 1_557_611_200


def test_minimax_m2_s_all_softmax_attention_list_is_read_and_a_missing_expert_count_named():
    """MiniMax-M2 lists attn_type_list 1 for every layer (softmax attention, none lightning): it had been
    refused as lightning layers.  A DeepSeek-family file without n_routed_experts had been told of
    num_experts_per_tok; it names the family's missing key."""
    m2 = {"model_type": "minimax_m2", "hidden_size": 3072, "num_hidden_layers": 62, "num_attention_heads": 48,
          "num_key_value_heads": 8, "head_dim": 128, "intermediate_size": 1536, "num_local_experts": 256,
          "num_experts_per_tok": 8, "vocab_size": 200064, "hidden_act": "silu", "attn_type_list": [1] * 62,
          "tie_word_embeddings": False}
    assert load_dict_model(m2).num_experts == 256
    with pytest.raises(InputError, match="attn_type_list: not modelled: lightning"):
        load_dict_model(dict(m2, attn_type_list=[0] * 7 + [1] + [0] * 54))
    ds = {"model_type": "deepseek_v3", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
          "num_key_value_heads": 8, "intermediate_size": 2048, "moe_intermediate_size": 256, "num_experts_per_tok": 2,
          "vocab_size": 1000, "kv_lora_rank": 64, "q_lora_rank": 128, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16,
          "v_head_dim": 32, "hidden_act": "silu"}
    with pytest.raises(InputError, match=r"n_routed_experts: missing, while num_experts_per_tok is set"):
        load_dict_model(ds)


def test_an_unknown_family_s_mtp_qk_norm_and_sharing_keys_are_refused_by_name():
    """Read as a plain decoder, an unknown family (MiniMax-M2's minimax_m2) had dropped its num_mtp_modules and
    use_qk_norm without a word, and invented keys (kv_share_every) went by: each is refused by name; a false
    or zero one says nothing and reads."""
    base = {"model_type": "foo", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
            "num_key_value_heads": 8, "intermediate_size": 4096, "vocab_size": 1000, "hidden_act": "silu",
            "tie_word_embeddings": False}
    assert load_dict_model(dict(base, use_qk_norm=False, num_mtp_modules=0)).num_layers == 4
    for key, v, what in (("num_mtp_modules", 3, "multi-token-prediction modules"), ("use_qk_norm", True, "Q/K norms"),
                         ("kv_share_every", 2, "shared K/V"), ("num_nextn_predict_layers", 1, "next-token prediction")):
        with pytest.raises(InputError, match=rf"{key}: {v!r}: {what}.*\(model_type 'foo'\)"):
            load_dict_model(dict(base, **{key: v}))


def test_every_unread_moe_key_is_named_at_once():
    """ERNIE-4.5's MoE keys were refused one a run (moe_num_shared_experts, then moe_layer_start_index, then
    moe_k): the refusal names the first and lists the others."""
    cfg = {"model_type": "mixtral", "hidden_size": 1024, "num_hidden_layers": 4, "num_attention_heads": 8,
           "num_key_value_heads": 8, "intermediate_size": 2048, "num_local_experts": 8, "num_experts_per_tok": 2,
           "vocab_size": 1000, "moe_num_shared_experts": 2, "moe_layer_start_index": 1, "moe_k": 6}
    with pytest.raises(InputError, match=r"moe_num_shared_experts: an MoE key this reader does not model .*\(so are "
                                         r"moe_layer_start_index, moe_k\)") as e:
        load_dict_model(cfg)
    assert e.value.field == "moe_num_shared_experts"
