"""Read a model from a Hugging Face ``config.json`` (or YAML with the same keys) into a ModelSpec.

Families and the keys read (each is the family's ``configuration_*.py`` in huggingface/transformers):

* Llama/Mistral/Qwen2/Qwen3/Gemma/GPT-2 (dense): num_hidden_layers, hidden_size,
  intermediate_size, num_attention_heads, num_key_value_heads, head_dim, vocab_size, hidden_act
  (Gemma: hidden_activation), tie_word_embeddings (absent: the family's HF default,
  :data:`_TIED_BY_DEFAULT`); Qwen2's Q/K/V biases (its architecture, no key); Qwen3's and Gemma 3's
  Q/K norms; Gemma 3's defaults for the keys its hub files leave out (:data:`_FAMILY_DEFAULTS`).
* GPT-NeoX (Pythia): biases on every linear and LayerNorm (modeling_gpt_neox.py), heads splitting the
  hidden size; its partial rotary (rotary_pct) and parallel residual change no count.
* OLMo 2 / OLMo 3 (dense) and OLMoE (num_experts, num_experts_per_tok; intermediate_size is the
  experts' width): their Q/K norms.
* Mixtral, Grok-1: num_local_experts, num_experts_per_tok.
* Qwen2-MoE / Qwen3-MoE: num_experts, moe_intermediate_size, shared_expert_intermediate_size,
  decoder_sparse_step, mlp_only_layers.
* DeepSeek-V2/V3 (and Kimi K2, a DeepseekV3ForCausalLM), GLM-4.5 (glm4_moe: no MLA, Q/K/V bias
  from attention_bias, use_qk_norm): n_routed_experts, n_shared_experts, moe_intermediate_size, first_k_dense_replace,
  moe_layer_freq, MLA (q_lora_rank, kv_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim),
  num_nextn_predict_layers (MTP, counted apart).
* Llama 4 (its ``text_config``): num_local_experts, interleave_moe_layer_step, intermediate_size
  (experts and the shared expert) and intermediate_size_mlp (dense layers).
* GPT-OSS: biases on attention and experts (its architecture), num_local_experts.
* DBRX: nested ``ffn_config`` (ffn_hidden_size, moe_num_experts, moe_top_k) and ``attn_config``
  (kv_n_heads).

Keys starting with ``_`` are the catalog's own (``_seq_len``, ``_gated``, ...).  A key that changes
the parameter count and is not modelled (a vision tower, linear-attention or Mamba layers, a sparse-
attention indexer) is an error naming it, never a silent default.
"""
from __future__ import annotations

import difflib

from ..config_keys import TrackedMapping, read_checked
from ..errors import InputError
from .hf_model_types import HF_MODEL_TYPES, NON_DECODER_KEYS, NON_DECODER_TYPES
from .router_config import router_spec
from .loading import _get_int
from .model import ModelSpec, checked_count, dense_layer_fields
from .attention_config import llama4_attention, score_twists, sliding_attention
from .dropout_config import dropout
from .mlp_config import glu_twists

_GATED_TYPES = ("llama", "llama4_text", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe",
                "gemma", "gemma2", "gemma3_text", "olmo", "olmo2", "olmo3", "olmoe", "deepseek", "deepseek_v2",
                "deepseek_v3", "glm4_moe", "grok", "grok-1", "gpt_oss", "dbrx")
#: the model types whose architecture the reader knows (their twists keyed by model_type below)
_KNOWN_TYPES = frozenset(_GATED_TYPES + ("gpt2", "gpt_neo", "gpt_neox", "opt", "bloom", "nemotron"))
#: model types read as a family they reuse the architecture of: Kimi K2's config.json names
#: ``"architectures": ["DeepseekV3ForCausalLM"]`` and loads DeepseekV3Config (moonshotai/Kimi-K2-Base)
_ALIASES = {"kimi_k2": "deepseek_v3",
            # the language model of Qwen2-VL and Qwen2.5-VL is Qwen2's (transformers Qwen2VLAttention /
            # Qwen2_5_VLAttention: biased q, k, v projections), its text keys at the file's top level
            "qwen2_vl": "qwen2", "qwen2_5_vl": "qwen2"}
#: the text config class a multimodal wrapper builds from its text_config (Llama4Config, Gemma3Config)
_TEXT_TYPES = {"llama4": "llama4_text", "gemma3": "gemma3_text"}
#: the language model's dimensions, which a wrapper's text_config holds
#: The keys costmodel itself reads from a model file, beside Hugging Face's (README, 'A catalog model');
#: other keys that start with '_' are Hugging Face's own bookkeeping (``_name_or_path``) and not read
OWN_KEYS = ("_name", "_display_name", "_source", "_seq_len", "_params_published", "_gated", "_position_embedding",
            "_dropout", "_bias", "_router_renormalised")
_TEXT_SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "intermediate_size", "intermediate_size_mlp",
                    "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size", "num_local_experts",
                    "num_experts_per_tok", "interleave_moe_layer_step")
#: Hugging Face model types whose architecture adds what this reader does not model, with why
_REFUSED_TYPES = {"deepseek_v32": "DeepSeek-V3.2's sparse attention (DSA) adds a lightning indexer to every layer "
                                  "(its index_n_heads / index_head_dim / index_topk keys): not modelled",
                  "mpt": "MPT's own keys (d_model, n_heads, n_layers, expansion_ratio) are not read: give hidden_size, "
                         "num_attention_heads, num_hidden_layers, intermediate_size (expansion_ratio x d_model), "
                         "hidden_act gelu and vocab_size under another model_type"}
#: families whose HF config class defaults tie_word_embeddings to True when the file leaves it out:
#: PretrainedConfig's default (GPT-2, GPT-Neo, OPT, BLOOM do not override it) and Gemma/Gemma 2/
#: Gemma 3 (configuration_gemma*.py); Grok-1's remote Grok1Config shares its in/out embedding.
#: Every other family read here defaults it to False (LlamaConfig, Llama4TextConfig, MistralConfig,
#: MixtralConfig, Qwen2/Qwen2Moe/Qwen3/Qwen3MoeConfig, DeepseekV2/V3Config, Glm4MoeConfig, GptOssConfig,
#: DbrxConfig, OlmoConfig, Olmo2Config, Olmo3Config, OlmoeConfig, NemotronConfig)
_TIED_BY_DEFAULT = ("gpt2", "gpt_neo", "opt", "bloom", "gemma", "gemma2", "gemma3_text", "grok", "grok-1")
#: HF defaults of keys a family's hub files routinely leave out (Gemma3TextConfig.__init__:
#: vocab_size 262208, head_dim 256, hidden_activation gelu_pytorch_tanh, sliding_window 4096,
#: sliding_window_pattern 6), applied where the file does not give them
_FAMILY_DEFAULTS = {"gemma3_text": {"vocab_size": 262_208, "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
                                    "sliding_window": 4096, "sliding_window_pattern": 6,
                                    "num_attention_heads": 8, "num_key_value_heads": 4},
                    "gemma": {"head_dim": 256},       # GemmaConfig
                    "gemma2": {"head_dim": 256, "sliding_window": 4096},       # Gemma2Config
                    # MistralConfig, MixtralConfig: num_key_value_heads 8 (not num_attention_heads); Qwen3Config:
                    # head_dim 128 (not hidden / heads); BloomConfig has no MLP keys (BloomMLP: 4h, BloomGelu);
                    # GPTNeoConfig: activation_function gelu_new
                    "mistral": {"num_key_value_heads": 8}, "mixtral": {"num_key_value_heads": 8},
                    "qwen3": {"head_dim": 128}, "bloom": {"hidden_act": "gelu"},
                    "gpt_neo": {"activation_function": "gelu_new"},
                    # GptOssConfig: head_dim 64 (not 2880 / 64 heads = 45)
                    "gpt_oss": {"head_dim": 64},
                    # Grok-1's remote-code configs name no activation: xai-org/grok-1 model.py's DenseBlock
                    # gates a GELU (jax.nn.gelu(h_w1) * h_v)
                    "grok-1": {"hidden_act": "gelu"}, "grok": {"hidden_act": "gelu"}}
#: families whose Hugging Face attention splits the hidden size over the heads whatever a head_dim key says
#: (GPT2Attention, GPTNeoSelfAttention, OPTAttention, BloomAttention: hidden_size // num_heads)
_HEADS_SPLIT_HIDDEN = ("gpt2", "gpt_neo", "gpt_neox", "opt", "bloom")
#: dense families whose Hugging Face model has no experts: an expert key there is ignored by HF
_DENSE_TYPES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "olmo", "olmo2", "olmo3",
                "nemotron", "gpt2", "gpt_neo", "gpt_neox", "opt", "bloom")
_ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "silu", "swish", "swiglu", "relu",
         "relu2", "squared_relu", "geglu")
#: keys that add parameters this reader does not model, with why
_UNMODELLED = {
    "vision_config": "a vision encoder",
    "audio_config": "an audio encoder",
    "linear_attn_config": "linear-attention layers",
    "index_n_heads": "a sparse-attention indexer (DeepSeek-V3.2)",
    "index_head_dim": "a sparse-attention indexer (DeepSeek-V3.2)",
    "index_topk": "a sparse-attention indexer (DeepSeek-V3.2)",
    "attn_layer_period": "Mamba layers between the attention layers (Jamba)",
    "mamba_d_state": "Mamba layers",
    # hybrids of state-space and attention layers (Nemotron-H, Falcon-H1, Zamba, Granite 4, Bamba), and
    # recurrent blocks (RecurrentGemma): their layers are not transformer layers
    "hybrid_override_pattern": "Mamba-2 and MLP-only layers among the attention layers (Nemotron-H)",
    "mamba_num_heads": "Mamba-2 layers",
    "mamba_n_heads": "Mamba-2 layers",
    "mamba_head_dim": "Mamba-2 layers",
    "mamba_d_ssm": "Mamba-2 layers",
    "mamba_expand": "Mamba layers",
    "ssm_state_size": "state-space (Mamba) layers",
    "layers_block_type": "Mamba layers between the attention layers",
    "block_types": "recurrent (RG-LRU) blocks (RecurrentGemma)",
    "altup_num_inputs": "AltUp's parallel streams and LAuReL (Gemma 3n)",
    "hidden_size_per_layer_input": "per-layer input embeddings (Gemma 3n)",
    "linear_num_value_heads": "Gated DeltaNet linear-attention layers (Qwen3-Next)",
    "linear_conv_kernel_dim": "Gated DeltaNet linear-attention layers (Qwen3-Next)",
    "attn_type_list": "lightning (linear) attention layers among the softmax ones (MiniMax-Text-01, MiniMax-M1)",
    "shared_intermediate_size": ("a shared MLP beside the experts (GraniteMoeShared's shared_mlp; MiniMax's shared "
                                 "MoE): its width is not one the reader places"),
}


#: MoE keys of the families read here (their HF configuration_*.py) that the reader either uses or
#: knows not to change the parameter count (routing hyper-parameters, loss weights)
_KNOWN_MOE_KEYS = frozenset((
    "num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts", "num_experts_per_tok", "moe_topk",
    "num_selected_experts", "experts_per_token", "moe_top_k", "moe_intermediate_size", "n_shared_experts",
    "num_shared_experts", "shared_expert_intermediate_size", "first_k_dense_replace", "moe_layer_freq",
    "decoder_sparse_step", "mlp_only_layers", "interleave_moe_layer_step", "router_aux_loss_coef",
    "router_z_loss_coef", "output_router_logits", "router_jitter_noise", "moe_router_dtype", "aux_loss_alpha",
    "moe_loss_weight", "moe_jitter_eps", "moe_normalize_expert_weights", "ep_size", "moe_ffn_act_fn",
    "moe_renormalize", "router_bias", "moe_z_loss_coeff", "moe_aux_loss_coeff", "moe_shared_expert_overlap",
    "moe_router_pre_softmax", "moe_router_load_balancing_type", "moe_layers", "uniform_expert_assignment",
))
#: families whose models have shared experts (DeepSeekMoE; Qwen2-MoE's shared_expert; Llama 4's)
_SHARED_EXPERT_TYPES = ("deepseek", "deepseek_v2", "deepseek_v3", "glm4_moe", "qwen2_moe", "llama4_text")
#: the keys that place the MoE layers, by the families whose Hugging Face modeling code reads them
#: (:func:`_moe_dense_layers`); a known family outside a key's list builds every layer without it
_LAYER_RULE_TYPES = {
    "first_k_dense_replace": ("deepseek", "deepseek_v2", "deepseek_v3", "glm4_moe"),
    "moe_layer_freq": ("deepseek", "deepseek_v2", "deepseek_v3"),
    "decoder_sparse_step": ("qwen2_moe", "qwen3_moe"),
    "mlp_only_layers": ("qwen2_moe", "qwen3_moe"),
    "interleave_moe_layer_step": ("llama4_text",),
    "moe_layers": ("llama4_text",),
}
#: families whose Hugging Face config class defaults hidden_act to "silu" (LlamaConfig, MistralConfig,
#: MixtralConfig, Qwen2/Qwen2Moe/Qwen3/Qwen3MoeConfig, DeepseekV2/V3Config, OlmoConfig, Olmo2Config,
#: OlmoeConfig): a config without it is hand-written, and the message names the default
_SILU_BY_DEFAULT = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "deepseek_v2",
                    "deepseek_v3", "olmo", "olmo2", "olmoe")
#: the families whose Hugging Face model sizes its routed experts by ``moe_intermediate_size``
#: (Qwen2MoeConfig, Qwen3MoeConfig, DeepseekV2/V3Config, Glm4MoeConfig, DeepSeekMoE's remote config);
#: the other known MoE families (Mixtral, Llama 4, OLMoE, GPT-OSS, DBRX, Grok) size them by
#: ``intermediate_size`` (or their own ffn key) and ignore it
_MOE_WIDTH_TYPES = ("deepseek", "deepseek_v2", "deepseek_v3", "glm4_moe", "qwen2_moe", "qwen3_moe")
#: keys of one count that several families spell differently: given twice, they must agree
#: the router's top-k, as the families spell it (a bare top_k last: older configs serialise a generation one)
#: the key each MoE family's config class names its routed-expert count by (configuration_*.py)
_EXPERT_COUNT_KEYS = {"deepseek_v2": "n_routed_experts", "deepseek_v3": "n_routed_experts", "kimi_k2": "n_routed_experts",
                      "glm4_moe": "n_routed_experts", "qwen2_moe": "num_experts", "qwen3_moe": "num_experts",
                      "olmoe": "num_experts", "mixtral": "num_local_experts", "gpt_oss": "num_local_experts",
                      "llama4_text": "num_local_experts"}
_TOPK_KEYS = ("num_experts_per_tok", "moe_topk", "num_selected_experts", "experts_per_token")
_SYNONYMS = (("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"), _TOPK_KEYS + ("top_k",))


def _check_moe_keys(d: dict, w: str, prefix: str = "") -> None:
    """Refuse a MoE-looking key (containing 'expert', 'moe' or 'router') the reader does not know: it
    may add or remove parameters, and a silent default would miscount them; and an expert capacity,
    which belongs to the run (``--moe-capacity-factor``), not to the model.  ``prefix`` names the
    section ``d`` is nested in (``ffn_config.``)."""
    for k in d:
        low = k.lower()
        if not k.startswith("_") and "capacity" in low and k not in _KNOWN_MOE_KEYS:
            raise InputError(w, prefix + k, "an expert capacity is the run's setting, not the model's (no Hugging Face "
                                   "config of the families read here has one): give --moe-capacity-factor")
    unread = [k for k in d if not k.startswith("_") and k not in _KNOWN_MOE_KEYS
              and ("expert" in k.lower() or "moe" in k.lower() or "router" in k.lower())]
    if unread:
        k = unread[0]
        near = difflib.get_close_matches(k, sorted(_KNOWN_MOE_KEYS), n=3)
        more = f" (so are {', '.join(unread[1:])})" if len(unread) > 1 else ""
        raise InputError(w, prefix + k, f"an MoE key this reader does not model (it may change the parameter count){more}; "
                               + (f"the nearest it reads: {', '.join(near)}" if near else
                                  "it reads the MoE keys of the families the README lists under --model"))


def _moe_dense_layers(d: dict, w: str, layers: int, experts: int) -> tuple:
    """Indices of the layers of an MoE model whose MLP is dense, by each family's layer rule (HF
    modeling code): a layer is MoE where DeepSeek ``i >= first_k_dense_replace and i % moe_layer_freq
    == 0``; Qwen-MoE ``i not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0``; Llama 4
    ``(i + 1) % interleave_moe_layer_step == 0`` (or its listed ``moe_layers``)."""
    if experts <= 1:
        return ()
    model_type = str(d.get("model_type", ""))
    for key, types in _LAYER_RULE_TYPES.items():
        if d.get(key) is not None and model_type in _KNOWN_TYPES and model_type not in types:
            raise InputError(w, key, f"model_type {model_type!r} does not read it (its Hugging Face model makes "
                                     f"every layer alike); it places the MoE layers of {', '.join(types)}")
    listed = d.get("moe_layers")
    if listed is not None:
        # Llama 4's saved configs list the MoE layers explicitly (Llama4TextConfig.moe_layers)
        if not isinstance(listed, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
                                                   for i in listed) or len(set(listed)) != len(listed):
            raise InputError(w, "moe_layers", f"expected distinct layer indices below {layers}, got {listed!r}")
        return tuple(i for i in range(layers) if i not in set(listed))
    k = _get_int(d, ("first_k_dense_replace",), w, required=False, default=0, minimum=0)
    freq = _get_int(d, ("moe_layer_freq",), w, required=False, default=1)
    step = _get_int(d, ("decoder_sparse_step", "interleave_moe_layer_step"), w, required=False, default=1)
    only = d.get("mlp_only_layers")
    only = [] if only is None else only
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < layers
                                             for i in only):
        raise InputError(w, "mlp_only_layers", f"expected a list of layer indices below {layers}, got {only!r}")
    if k > layers:
        raise InputError(w, "first_k_dense_replace", f"{k} exceeds num_hidden_layers {layers}")
    return tuple(i for i in range(layers) if not (i >= k and i % freq == 0 and (i + 1) % step == 0 and i not in only))


def _head_dim(d: dict, w: str, hidden: int, heads: int) -> int:
    """The heads' width: ``head_dim`` (or ``kv_channels``) where the family's attention reads it, else
    hidden_size / num_attention_heads.

    Raises:
        InputError: a width a GPT-2-style family's attention ignores (:data:`_HEADS_SPLIT_HIDDEN`: it splits
            hidden_size over the heads), or no width where the heads do not divide hidden_size.
    """
    # heads are at most 256 wide in today's models (Gemma): 16,384 refuses a slip before a kernel check blames it
    key = next((k for k in ("head_dim", "kv_channels") if d.get(k) is not None), "head_dim")
    head_dim = _get_int(d, ("head_dim", "kv_channels"), w, required=False, default=None, maximum=16384)
    mt = str(d.get("model_type", ""))
    if head_dim is not None and mt in _HEADS_SPLIT_HIDDEN and head_dim * heads != hidden:
        raise InputError(w, key, f"{head_dim}, but {mt}'s attention splits hidden_size {hidden} over "
                         f"num_attention_heads {heads} ({hidden // heads} wide; Hugging Face ignores the key): remove it")
    if head_dim is None:
        if hidden % heads:
            raise InputError(w, "hidden_size", f"{hidden} is not divisible by num_attention_heads {heads}, and no "
                             "head_dim says the heads' width: give head_dim")
        head_dim = hidden // heads
    return head_dim


def _all_softmax(v) -> bool:
    """Whether a MiniMax ``attn_type_list`` marks every layer softmax attention: 1 each (its remote
    modeling code builds a lightning-attention layer for 0, a softmax one otherwise; MiniMax-M2's
    config.json lists 1 for all 62 layers)."""
    return isinstance(v, list) and len(v) > 0 and all(x == 1 and not isinstance(x, bool) for x in v)


def _nested(d: dict, w: str) -> tuple[dict, str]:
    """The language model's keys and where they are (for messages): Llama 4's ``text_config``;
    DBRX's ``ffn_config`` / ``attn_config`` checked under their own names, then flattened to their
    HF equivalents."""
    for key, why in {**_UNMODELLED, **NON_DECODER_KEYS}.items():
        if key == "attn_type_list" and _all_softmax(d.get(key)):
            continue        # MiniMax-M2's: every layer softmax attention (1; 0 is a lightning layer)
        if d.get(key) not in (None, False):      # 0 too: GraniteMoeSharedConfig's default, no shared MLP
            if key == "vision_config":
                # the reader prices the language model alone: a text_config of its own, or (Qwen2-VL, LLaVA-
                # style files with the text keys at the top) the file without the vision encoder
                why += ("; the reader prices the language model alone: pass its text_config as a file of its own "
                        "(jq .text_config config.json > text_config.json)" if isinstance(d.get("text_config"), dict)
                        else "; the reader prices the language model alone: pass the file without vision_config "
                        "(jq 'del(.vision_config)' config.json > text.json), its text keys being at the top")
            raise InputError(w, key, f"not modelled: {why}")
    lt = d.get("layer_types")
    if lt is not None and not isinstance(lt, list):
        raise InputError(w, "layer_types", f"expected a list of layer types, got {lt!r}")
    if isinstance(lt, list) and any(x not in ("full_attention", "sliding_attention") for x in lt):
        bad = sorted({str(x) for x in lt} - {"full_attention", "sliding_attention"})
        raise InputError(w, "layer_types", f"not modelled: layer types {', '.join(bad)}")
    for name in ("ffn_config", "attn_config", "text_config"):
        if d.get(name) is not None and not isinstance(d[name], dict):
            raise InputError(w, name, f"expected a mapping, got {d[name]!r}")
    if d.get("model_type") in _TEXT_TYPES and not isinstance(d.get("text_config"), dict):
        raise InputError(w, "text_config", f"missing: a {d['model_type']} file (a multimodal wrapper, "
                                           f"{_TEXT_TYPES[d['model_type']]} inside) holds its language model there")
    for group in _SYNONYMS:
        given = {k: d[k] for k in group if d.get(k) is not None}
        if len(set(map(str, given.values()))) > 1:
            (k0, v0), *rest = given.items()
            raise InputError(w, k0, f"{v0!r} contradicts " + ", ".join(f"{k} = {v!r}" for k, v in rest)
                             + " (one count spelt two ways: give one)")
    if isinstance(d.get("text_config"), dict):
        inner = dict(d["text_config"])
        # HF builds the text model's config from text_config alone (Llama4Config, Gemma3Config): a
        # model dimension beside it is not read, so one that is given there must not say otherwise
        for k in _TEXT_SHAPE_KEYS:
            if d.get(k) is not None and (k not in inner or inner[k] != d[k]):
                raise InputError(w, k, f"{d[k]!r} beside text_config" + (f", whose {k} is {inner[k]!r}" if k in inner
                                 else "") + ": the language model's dimensions are text_config's (Hugging Face "
                                 "reads them there only): give it there")
        if d.get("model_type") in _TEXT_TYPES:          # HF builds its text config class from it either way
            inner.setdefault("model_type", _TEXT_TYPES[d["model_type"]])
        for k in OWN_KEYS + ("tie_word_embeddings",):
            if k in d and k not in inner:
                inner[k] = d[k]
        return _nested(inner, w + " text_config")
    if isinstance(d.get("ffn_config"), dict) or isinstance(d.get("attn_config"), dict):
        f, a = d.get("ffn_config") or {}, d.get("attn_config") or {}
        # their keys named as the file nests them (ffn_config.ffn_hidden_size)
        fq, aq = ({f"{sec}.{k}": v for k, v in m.items()} for sec, m in (("ffn_config", f), ("attn_config", a)))
        _check_moe_keys(f, w, "ffn_config.")
        out = dict(d)
        # DbrxAttentionConfig's default kv_n_heads is 1 (huggingface/transformers configuration_dbrx.py)
        out.update({"intermediate_size": _get_int(fq, ("ffn_config.ffn_hidden_size",), w),
                    "num_local_experts": _get_int(fq, ("ffn_config.moe_num_experts",), w, required=False),
                    "num_experts_per_tok": _get_int(fq, ("ffn_config.moe_top_k",), w, required=False),
                    "num_key_value_heads": _get_int(aq, ("attn_config.kv_n_heads",), w, required=False, default=1),
                    "hidden_act": d.get("hidden_act", "silu")})
        return {**{k: v for k, v in out.items() if v is not None},
                "moe_normalize_expert_weights": f.get("moe_normalize_expert_weights", 1.0)}, w
    return d, w


def read_model_config(d: dict, path) -> ModelSpec:
    """A ModelSpec from a config mapping read from ``path`` (module docstring for the keys).

    A key the reader never looked at that is one edit from a key it looked for and missed
    (``first_k_dense_replce``, ``mlp_only_layer``) is refused, naming the key it stands for
    (costmodel.config_keys), before any refusal the slip caused.

    Raises:
        InputError: missing or bad key, a misspelt key, or a key that changes the count and is not
            modelled.
    """
    w = str(path)
    top = d.get("model_type")
    if isinstance(top, str) and (top in _REFUSED_TYPES or top in NON_DECODER_TYPES):     # before nested sections
        _check_model_type(top, w)
    d, w = _nested(d, w)
    mt = d.get("model_type")
    _check_model_type(mt, w, remote="auto_map" in d)
    if isinstance(mt, str) and mt in _ALIASES:
        d = dict(d, model_type=_ALIASES[mt])
    if isinstance(mt, str) and mt in _FAMILY_DEFAULTS:
        d = {**_FAMILY_DEFAULTS[mt], **d}
    doc = TrackedMapping(d, "")
    return read_checked(lambda: _read(doc, w, path), doc, w)


def _check_model_type(mt, w: str, remote: bool = False) -> None:
    """Refuse a model_type that is not text, or one a slip away from a family the reader knows ('Qwen3',
    'mixtrl'): Hugging Face refuses both, and read as a plain decoder it would lose the family's twists.
    A Hugging Face model_type of its own (:data:`HF_MODEL_TYPES`: ``gpt_neox`` beside ``gpt_neo``) or a
    remote-code one (``remote``: the file has an ``auto_map``) is no slip.

    Raises:
        InputError: naming model_type and the family it stands for.
    """
    if mt is None:
        return
    if not isinstance(mt, str):
        raise InputError(w, "model_type", f"expected a name, got {mt!r}")
    if mt in _REFUSED_TYPES or mt in NON_DECODER_TYPES:
        raise InputError(w, "model_type", f"{mt!r}: {_REFUSED_TYPES.get(mt) or NON_DECODER_TYPES[mt]}")
    if mt in _KNOWN_TYPES or mt in _ALIASES or mt in HF_MODEL_TYPES or remote:
        return
    # spelt apart only by case, dashes, dots or underscores ('Gemma-2', 'qwen2.5') or a letter's slip
    norm = {k.replace("_", "").replace("-", ""): k for k in sorted(_KNOWN_TYPES)}
    bare = mt.lower().replace("_", "").replace("-", "").replace(".", "")
    near = ([norm[bare]] if bare in norm else
            [norm[k] for k in difflib.get_close_matches(bare, list(norm), 1, 0.85)]
            or difflib.get_close_matches(mt, sorted(_KNOWN_TYPES), 1, 0.85))
    if near:
        raise InputError(w, "model_type", f"{mt!r} is not a Hugging Face model_type (transformers registers no "
                         f"such name, and the file has no auto_map of remote code); did you mean {near[0]!r}?")


def known_family(model: ModelSpec) -> bool:
    """Whether ``model`` came from a family whose architecture this reader knows (:data:`_KNOWN_TYPES`),
    or from a catalog file that states it (``family`` '')."""
    return model.family == "" or model.family in _KNOWN_TYPES


def _required_moe_keys(d: dict, w: str, model_type: str) -> None:
    """Refuse an MoE config of a family whose Hugging Face class defaults a count-changing key to a
    value of its own when the file leaves it out: the experts' width (Qwen2MoeConfig 1408,
    Qwen3MoeConfig 768, DeepseekV2Config 1407, DeepseekV3Config 2048), DeepSeek's dense-first layers
    and shared experts (DeepseekV3Config 3 and 1, DeepseekV2Config 0 and None), Qwen2-MoE's shared
    expert (5632).  Every released config of these families sets them (huggingface/transformers
    configuration_qwen2_moe.py, configuration_qwen3_moe.py, configuration_deepseek_v2.py,
    configuration_deepseek_v3.py, configuration_glm4_moe.py); a file without one is not the model it
    names."""
    need = {"qwen2_moe": ("moe_intermediate_size", "shared_expert_intermediate_size"),
            "qwen3_moe": ("moe_intermediate_size",),
            "deepseek_v2": ("moe_intermediate_size", "first_k_dense_replace", "n_shared_experts"),
            "deepseek_v3": ("moe_intermediate_size", "first_k_dense_replace", "n_shared_experts"),
            "glm4_moe": ("moe_intermediate_size", "first_k_dense_replace", "n_shared_experts")}
    for key in need.get(model_type, ()):
        if d.get(key) is None:
            raise InputError(w, key, f"missing: a {model_type} model's count depends on it and Hugging Face's "
                                     "default for it is not this reader's (give the model's own value)")


def _check_dense_layers(d: dict, w: str, layers: int, experts: int, dense_at: tuple, model_type: str) -> None:
    """Refuse an MoE config whose keys leave no MoE layer (named by the key that emptied it), and a
    Llama 4 config with dense layers that does not give their width."""
    if experts > 1 and len(dense_at) == layers:
        # the key that made the layers dense: a non-empty list, or a count other than its default
        key = next((k for k, default in (("mlp_only_layers", []), ("moe_layers", None), ("first_k_dense_replace", 0),
                                         ("decoder_sparse_step", 1), ("interleave_moe_layer_step", 1),
                                         ("moe_layer_freq", 1)) if d.get(k) not in (None, default)), "num_experts")
        raise InputError(w, key, f"leaves none of the {layers} layers an MoE layer: the model is dense (give its "
                                 "dense config, without experts)")
    if model_type == "llama4_text" and dense_at and d.get("intermediate_size_mlp") is None:
        # Llama4TextConfig sizes the dense layers by intermediate_size_mlp (default 16384), not by the
        # experts' intermediate_size (huggingface/transformers configuration_llama4.py)
        raise InputError(w, "intermediate_size_mlp", f"missing: the {len(dense_at)} dense layers' width; Hugging "
                                                     "Face's default (16384) is not the experts' intermediate_size "
                                                     "(give the model's own value)")


def _read(d: dict, w: str, path) -> ModelSpec:
    """:func:`read_model_config` on the flattened mapping ``d`` (``w``: where, for messages)."""
    _check_moe_keys(d, w)
    layers = _get_int(d, ("num_hidden_layers", "n_layer", "num_layers", "n_layers"), w)
    hidden = _get_int(d, ("hidden_size", "n_embd", "d_model"), w)
    heads = _get_int(d, ("num_attention_heads", "n_head", "num_heads", "n_heads"), w)
    ffn = _get_int(d, ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"), w, required=False)
    if ffn is None:
        # GPT-2 configs: n_inner null or absent (the hub's original files predate it) is 4 * n_embd
        # (transformers GPT2Config: n_inner=None, "the inner feed-forward layers: None sets it to 4 times n_embd")
        if "n_inner" in d or d.get("model_type") in ("gpt2", "bloom", "gpt_neo"):
            # BloomMLP's dense_h_to_4h; GPTNeoConfig's intermediate_size None is 4 x hidden_size too
            ffn = 4 * hidden
        else:
            raise InputError(w, "intermediate_size", "missing")
    moe_ffn = _get_int(d, ("moe_intermediate_size",), w, required=False)
    # Falcon's multi_query (one K/V head) where no K/V head count is given (FalconConfig)
    mq = d.get("multi_query")
    kv = _get_int(d, ("num_key_value_heads", "num_kv_heads", "multi_query_group_num"), w,
                  required=False, default=1 if mq is True else heads)
    _unmodelled_twists(d, w, str(d.get("model_type", "")))
    mla = _mla(d, w, heads)
    head_dim = mla.pop("head_dim", None) or _head_dim(d, w, hidden, heads)
    if heads % kv:
        raise InputError(w, "num_key_value_heads", f"num_attention_heads {heads} is not divisible by {kv}")
    # the embedding holds the padded vocabulary (ChatGLM), not the tokenizer's
    # (a config with neither is told of Hugging Face's key, vocab_size)
    vocab = (_get_int(d, ("padded_vocab_size", "vocab_size"), w, agree=False)
             if d.get("padded_vocab_size") is not None else _get_int(d, ("vocab_size",), w))
    # Gemma's MLP applies hidden_activation where given (GemmaConfig, Gemma2Config, Gemma3TextConfig)
    act = d.get("hidden_activation") or d.get("hidden_act", d.get("activation_function", d.get("activation")))
    if act is None and d.get("model_type") == "gpt2":
        act = "gelu_new"                   # transformers GPT2Config's activation_function default
    if act is None:
        mt = d.get("model_type")
        hint = (f" (Hugging Face's {mt} config class would default it to silu, as every {mt} release sets it: "
                "give \"hidden_act\": \"silu\" if that is the model)" if mt in _SILU_BY_DEFAULT else "")
        raise InputError(w, "hidden_act", "missing" + hint)
    if not isinstance(act, str) or act not in _ACTS:
        raise InputError(w, "hidden_act", f"{act!r} is not one of {', '.join(_ACTS)}")
    experts = _get_int(d, ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
                       w, required=False, default=1)
    topk = _get_int(d, _TOPK_KEYS, w, required=False, default=None)
    if topk is None:
        # a bare top_k is the router's only in an MoE config; older configs serialise a generation top_k
        topk = _get_int(d, ("top_k",), w, required=False, default=None) if experts > 1 else 1
    if topk is None:
        raise InputError(w, "num_experts_per_tok", f"missing for an MoE model with {experts} experts")
    if experts == 1:
        for key in ("num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size",
                    "n_shared_experts", "first_k_dense_replace"):
            if d.get(key) not in (None, 0, 1) or (key == "moe_intermediate_size" and d.get(key) is not None):
                own = _EXPERT_COUNT_KEYS.get(str(d.get("model_type", "")))
                if own and d.get(own) is None:
                    # the family's config class would default it: not the model's count
                    raise InputError(w, own, f"missing, while {key} is set: {d.get('model_type')} names its routed "
                                             "experts there (Hugging Face would fill in its config class's default, "
                                             "which need not be this model's count)")
                raise InputError(w, key, "set, but the model has no routed experts (num_local_experts / "
                                         "num_experts / n_routed_experts missing or 1)")
    if topk > experts:
        given = next((k for k in _TOPK_KEYS + ("top_k",) if d.get(k) is not None), "num_experts_per_tok")
        raise InputError(w, given, f"{topk} exceeds the {experts} experts")
    model_type = str(d.get("model_type", ""))
    if experts > 1:
        _required_moe_keys(d, w, model_type)
        if moe_ffn is not None and model_type in _KNOWN_TYPES and model_type not in _MOE_WIDTH_TYPES:
            raise InputError(w, "moe_intermediate_size", f"model_type {model_type!r} does not read it (its Hugging "
                             "Face model sizes the experts by intermediate_size); it sizes the experts of "
                             f"{', '.join(_MOE_WIDTH_TYPES)}")
    dense_at = _moe_dense_layers(d, w, layers, experts)
    _check_dense_layers(d, w, layers, experts, dense_at, model_type)
    expert_ffn = moe_ffn or ffn
    shared = _shared_width(d, w, model_type, expert_ffn) if experts > 1 else 0
    # Llama 4: intermediate_size is the experts' (and shared expert's) width, intermediate_size_mlp
    # the dense layers'; DeepSeek/Qwen-MoE: intermediate_size is the dense layers' width
    dense_w = _get_int(d, ("intermediate_size_mlp",), w, required=False, default=None) or (ffn if moe_ffn else 0)
    gated = d.get("_gated")
    if gated is None:
        gated = model_type in _GATED_TYPES or act in ("silu", "swish", "swiglu", "geglu")
    tie = _tied(d, w, model_type)
    for key, val in (("_gated", gated), ("tie_word_embeddings", tie), ("use_qk_norm", d.get("use_qk_norm", False))):
        if not isinstance(val, bool):
            raise InputError(w, key, f"expected true or false, got {val!r}")
    pos = d.get("_position_embedding", "learned" if model_type in ("gpt2", "gpt_neo", "opt") else "rope")
    if pos not in ("rope", "learned", "alibi"):
        raise InputError(w, "_position_embedding", f"{pos!r} is not one of rope, learned, alibi")
    max_pos = _get_int(d, ("max_position_embeddings", "n_positions", "max_seq_len"), w, required=pos == "learned",
                       default=0, agree=False)
    seq_len = _get_int(d, ("_seq_len",), w, required=False, default=None)
    assumed = seq_len is None
    if assumed:
        seq_len = min(max_pos, 4096) if max_pos else 4096
    pp = d.get("_params_published")
    pp = float(pp) if isinstance(pp, (int, float)) and not isinstance(pp, bool) else None
    # GPT-2's Conv1D projections and LayerNorms carry biases (transformers modeling_gpt2.py), as BLOOM's,
    # OPT's and GPT-NeoX's linear layers do (modeling_bloom.py, modeling_opt.py: bias=True, enable_bias default
    # True; modeling_gpt_neox.py: nn.Linear with its default bias, LayerNorms with theirs)
    bias = d.get("_bias", model_type in ("gpt_oss", "gpt2", "bloom", "opt", "gpt_neox"))
    for key, val in (("_bias", bias), ("attention_bias", d.get("attention_bias", False))):
        if not isinstance(val, bool):
            raise InputError(w, key, f"expected true or false, got {val!r}")
    return checked_count(ModelSpec(
        name=d.get("_name", _file_name(path)), display_name=d.get("_display_name", _file_name(path)),
        num_layers=layers, hidden=hidden, ffn_hidden=expert_ffn, num_heads=heads, num_kv_heads=kv,
        head_dim=head_dim, vocab=vocab, gated=bool(gated), activation=act, tie_embeddings=tie,
        num_experts=experts, topk=topk, learned_positions=pos == "learned", max_positions=max_pos,
        dropout=dropout(d, w, model_type), bias=bias, seq_len=seq_len,
        params_published=pp,
        source=str(d.get("_source", path)), seq_len_assumed=assumed,
        family=model_type if model_type or "_gated" in d else "?",
        dense_ffn_hidden=dense_w if dense_at else 0, shared_ffn_hidden=shared, **dense_layer_fields(dense_at),
        mtp_layers=_get_int(d, ("num_nextn_predict_layers",), w, required=False, default=0, minimum=0),
        qkv_bias=model_type in ("qwen2", "qwen2_moe") or bool(d.get("attention_bias", False)),
        o_bias=model_type not in ("qwen2", "qwen2_moe", "glm4_moe") and bool(d.get("attention_bias", False)),
        qk_norm=_qk_norm(d, model_type), layer_norms=4 if model_type in ("gemma2", "gemma3_text") else 2,
        embedding_norm=model_type == "bloom",
        **sliding_attention(d, w, model_type, layers), **mla,
        **_routing_groups(d, w, experts, topk), **llama4_attention(d, w, model_type, layers),
        **score_twists(d, w, model_type), **glu_twists(d, w, model_type), router=router_spec(d, w, model_type, experts)), d.get("_params_published"), w)


def _qk_norm(d: dict, model_type: str) -> bool:
    """Whether Q and K pass a weighted RMSNorm: Qwen3 and Gemma 3 always, per head (modeling_qwen3.py,
    modeling_gemma3.py), OLMo 2 / OLMo 3 / OLMoE always, over the whole projection (modeling_olmo2.py
    ``q_norm = Olmo2RMSNorm(num_attention_heads * head_dim)``: priced as the per-head norm, the
    difference (h + kv_dim - 2 head_dim weights a layer) below 0.01 % of a 1B model), GLM-4.5 with
    ``use_qk_norm`` (modeling_glm4_moe.py).  Llama 4's ``use_qk_norm`` is a weightless L2 norm
    (Llama4TextL2Norm): no parameters."""
    return (model_type in ("qwen3", "qwen3_moe", "gemma3_text", "olmo2", "olmo3", "olmoe")
            or (model_type == "glm4_moe" and bool(d.get("use_qk_norm"))))


#: key fragments that name a twist of an unknown family's own code (what they add is that code's): the
#: plain-decoder reading refuses them rather than leave them out silently
_UNKNOWN_FAMILY_TWISTS = (("mtp", "multi-token-prediction modules"), ("nextn", "next-token prediction modules"),
                          ("qk_norm", "Q/K norms"), ("qk_layernorm", "Q/K norms"), ("layer_share", "shared layers"),
                          ("kv_share", "shared K/V"), ("cross_layer", "cross-layer sharing"),
                          ("shared_layers", "shared layers"))


def _unmodelled_twists(d: dict, w: str, model_type: str) -> None:
    """Refuse what would change the count silently: DeepSeek's MLA without ``q_lora_rank`` (HF's default
    is 1536, not none: give null for none), MLP biases (``mlp_bias``), an unknown family's own twists
    (:data:`_UNKNOWN_FAMILY_TWISTS`: MTP modules, Q/K norms, shared layers) and biases, and expert keys
    on a dense family whose HF model ignores them (:data:`_DENSE_TYPES`).

    Raises:
        InputError: naming the key.
    """
    if model_type in ("deepseek_v2", "deepseek_v3") and d.get("kv_lora_rank") is not None and "q_lora_rank" not in d:
        raise InputError(w, "q_lora_rank", f"missing: {model_type}'s Hugging Face default is 1536, not none (give the "
                                           "model's value, null for no Q compression)")
    if d.get("mlp_bias") not in (None, False):
        raise InputError(w, "mlp_bias", f"{d['mlp_bias']!r}: MLP biases are not modelled (only attention_bias)")
    if model_type not in _KNOWN_TYPES:
        twists = [(key, v, why) for key, v in d.items() if not key.startswith("_") and v not in (None, False, 0, [], {})
                  for why in [next((y for part, y in _UNKNOWN_FAMILY_TWISTS if part in key.lower()), None)] if why]
        if twists:
            key, v, what = twists[0]
            more = f" (so are {', '.join(k for k, _, _ in twists[1:])})" if len(twists) > 1 else ""
            raise InputError(w, key, f"{v!r}: {what} of a family the reader does not know (model_type "
                                     f"{model_type!r}), which a plain decoder does not price{more}: drop the keys "
                                     "to price the model without them")
    for key in () if model_type in _KNOWN_TYPES else ("qkv_bias", "add_qkv_bias", "bias", "use_bias",
                                                                   "add_bias_linear"):
        if d.get(key) not in (None, False):     # which projections carry them is the unknown family's code's
            raise InputError(w, key, f"{d[key]!r}: biases of a family the reader does not know (model_type "
                                     f"{model_type!r}) are not modelled (which layers carry them is that "
                                     "family's code's): drop the key to price the model without them")
    wp, hs = d.get("word_embed_proj_dim"), d.get("hidden_size")
    if model_type == "opt" and wp is not None and wp != hs:
        raise InputError(w, "word_embed_proj_dim", f"{wp!r} is not hidden_size {hs!r}: OPT's project_in / project_out "
                                                   "between the embedding and the layers are not modelled")
    if model_type in _DENSE_TYPES:
        for key in ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"):
            if d.get(key) not in (None, 0, 1):
                raise InputError(w, key, f"model_type {model_type!r} has no experts (its Hugging Face model ignores "
                                         "the key): drop it, or give the MoE family's model_type")
        # Q/K norms and an output bias the family's code does not build: a file meant for another family
        for key, what in (("use_qk_norm", "Q/K norms"), ("qk_layernorm", "Q/K norms"), ("lm_head_bias", "output bias")):
            if d.get(key) and not (what == "Q/K norms" and _qk_norm(d, model_type)):
                raise InputError(w, key, f"{d[key]!r}: model_type {model_type!r} builds no {what} (its Hugging Face "
                                         "model ignores the key): drop it, or give the family's model_type that builds them")


def _file_name(path) -> str:
    """A model's name from its file: the stem, or the folder of a hub checkout's ``config.json``
    (``Qwen3-8B/config.json`` is Qwen3-8B)."""
    return path.parent.name if path.stem == "config" and path.parent.name else path.stem


def _tied(d: dict, w: str, model_type: str):
    """``tie_word_embeddings`` as the family's HF config class reads it: the file's value, else the
    class default (:data:`_TIED_BY_DEFAULT`); a catalog file (no model_type, ``_gated`` set) must give it.

    Raises:
        InputError: missing for a family this reader does not know (its default is its own, and the
            output layer is vocab x hidden parameters).
    """
    tie = d.get("tie_word_embeddings")
    if tie is not None:
        return tie
    if model_type in _KNOWN_TYPES:
        return model_type in _TIED_BY_DEFAULT
    what = f"model_type {model_type!r} is not a family this reader knows" if model_type else "the file has no model_type"
    raise InputError(w, "tie_word_embeddings", f"missing: {what}, so its default is unknown, and an untied output "
                                               "layer is vocab x hidden parameters more (give true or false)")


def _routing_groups(d: dict, w: str, experts: int, topk: int) -> dict:
    """DeepSeek's group-limited routing: ``topk_method`` group_limited_greedy (V2) or noaux_tc (V3)
    picks a token's experts from ``topk_group`` of ``n_group`` expert groups (HF
    configuration_deepseek_v2/v3.py); other methods (V2-Lite's greedy) route over all experts.

    Raises:
        InputError: groups that do not divide the experts, or a limit outside 1..n_group.
    """
    if str(d.get("topk_method", "")) not in ("group_limited_greedy", "noaux_tc") or experts <= 1:
        return {}
    groups = _get_int(d, ("n_group",), w, required=False, default=1, minimum=1)
    limit = _get_int(d, ("topk_group",), w, required=False, default=groups, minimum=1)
    if groups <= 1:
        return {}
    if experts % groups:
        raise InputError(w, "n_group", f"{groups} groups do not divide the {experts} routed experts")
    if limit > groups:
        raise InputError(w, "topk_group", f"{limit} exceeds the {groups} expert groups (n_group)")
    if limit * (experts // groups) < topk:
        raise InputError(w, "topk_group", f"{limit} groups of {experts // groups} experts hold fewer than "
                         f"the {topk} experts per token")
    return dict(routing_groups=groups, routing_group_limit=limit)


def _mla(d: dict, w: str, heads: int) -> dict:
    """Multi-head latent attention fields (DeepSeek-V2/V3) when ``kv_lora_rank`` is set, else {}."""
    if d.get("kv_lora_rank") is None:
        for key in ("q_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"):
            if d.get(key):
                raise InputError(w, key, "a multi-head latent attention key without kv_lora_rank")
        return {}
    kv_lora = _get_int(d, ("kv_lora_rank",), w)
    nope = _get_int(d, ("qk_nope_head_dim",), w)
    rope = _get_int(d, ("qk_rope_head_dim",), w)
    v = _get_int(d, ("v_head_dim",), w)
    # null means no Q bottleneck (DeepSeek-V2-Lite); 0 would be a rank-0 one
    q_lora = _get_int(d, ("q_lora_rank",), w, required=False, default=0)
    return dict(head_dim=nope, kv_lora_rank=kv_lora, qk_rope_head_dim=rope, v_head_dim=v, q_lora_rank=q_lora)


def _shared_width(d: dict, w: str, model_type: str, expert_ffn: int) -> int:
    """Summed FFN width of the shared experts of an MoE layer: DeepSeek ``n_shared_experts`` x
    ``moe_intermediate_size``; Qwen-MoE ``shared_expert_intermediate_size``; Llama 4 one shared
    expert of the experts' width (Llama4TextMoe.shared_expert)."""
    for key in ("n_shared_experts", "num_shared_experts", "shared_expert_intermediate_size"):
        if d.get(key) and model_type not in _KNOWN_TYPES:
            raise InputError(w, key, f"model_type {model_type!r} is not a family this reader knows, so how its "
                                     f"shared experts are built is unknown; shared experts are read for "
                                     f"{', '.join(_SHARED_EXPERT_TYPES)}")
        if d.get(key) and model_type not in _SHARED_EXPERT_TYPES:
            raise InputError(w, key, f"model_type {model_type!r} has no shared experts (its Hugging Face model "
                                     f"ignores the key); shared experts are read for {', '.join(_SHARED_EXPERT_TYPES)}")
    n = _get_int(d, ("n_shared_experts", "num_shared_experts"), w, required=False, default=0, minimum=0)
    if n and d.get("shared_expert_intermediate_size"):
        raise InputError(w, "shared_expert_intermediate_size", "contradicts n_shared_experts: give one of them")
    if n:
        return n * expert_ffn
    q = _get_int(d, ("shared_expert_intermediate_size",), w, required=False, default=0, minimum=0)
    if q:
        return q
    return expert_ffn if model_type == "llama4_text" else 0
