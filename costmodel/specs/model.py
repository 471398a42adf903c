"""The model spec: a decoder-only transformer (dense or MoE) read from the catalog or a HF config."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import InputError
from .loading import _get_int, _read_mapping, _resolve, catalog_dir


_GATED_TYPES = ("llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "gemma", "gemma2", "olmo",
                "deepseek", "grok")
_ACTS = ("gelu", "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "silu", "swish", "swiglu", "relu",
         "relu2", "squared_relu", "geglu")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer (dense or MoE) as the cost model sees it.

    Attributes (all counts are integers):
        name, display_name: catalog name and human name.
        num_layers, hidden, ffn_hidden (per expert for MoE), num_heads, num_kv_heads, head_dim, vocab.
        gated: MLP has a third (gate) matrix, SwiGLU/GeGLU (Shazeer 2020, arXiv:2002.05202).
        activation: the MLP non-linearity name as in the config.
        tie_embeddings: the output layer shares the input embedding matrix.
        num_experts, topk: MoE experts per layer and experts per token (1, 1 for dense).
        learned_positions: GPT-style learned position table of ``max_positions`` rows.
        dropout, bias: trained with dropout masks stored for backward; linear layers have biases.
        seq_len: default training sequence length for this model (tokens).
        seq_len_assumed: True when the file gives no training length (``_seq_len``) and seq_len is
            min(max_position_embeddings, 4096): a context window is not a training length.
        params_published: the authors' parameter count, or None.
        source: where the config comes from (path or citation).
    """

    name: str
    display_name: str
    num_layers: int
    hidden: int
    ffn_hidden: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab: int
    gated: bool
    activation: str
    tie_embeddings: bool
    num_experts: int = 1
    topk: int = 1
    learned_positions: bool = False
    max_positions: int = 0
    dropout: bool = False
    bias: bool = False
    seq_len: int = 4096
    params_published: float | None = None
    source: str = ""
    seq_len_assumed: bool = False

    @property
    def is_moe(self) -> bool:
        """True when layers have more than one expert."""
        return self.num_experts > 1

    @property
    def kv_dim(self) -> int:
        """num_kv_heads * head_dim: width of K (and of V) after projection (GQA, Ainslie et al. 2023)."""
        return self.num_kv_heads * self.head_dim

    @property
    def q_dim(self) -> int:
        """num_heads * head_dim: width of Q and of the attention output."""
        return self.num_heads * self.head_dim

    def layer_params(self, *, active: bool = False) -> int:
        """Parameters of one transformer layer (all experts, or the top-k active ones).

        Attention: Q (h x q_dim), K and V (h x kv_dim each), output (q_dim x h); MLP: 2 or 3
        matrices h x ffn per expert; router h x E; two norms (weight, + bias for LayerNorm).
        """
        h = self.hidden
        attn = h * self.q_dim + 2 * h * self.kv_dim + self.q_dim * h
        mats = 3 if self.gated else 2
        experts = self.topk if active else self.num_experts
        mlp = experts * mats * h * self.ffn_hidden
        router = h * self.num_experts if self.is_moe else 0
        b = 0
        if self.bias:
            b = self.q_dim + 2 * self.kv_dim + h + experts * ((mats - 1) * self.ffn_hidden + h)
        norms = 4 * h if self.bias else 2 * h
        return attn + mlp + router + b + norms

    def embedding_params(self) -> int:
        """Input embedding (+ learned position table): vocab x h (+ max_positions x h)."""
        return self.vocab * self.hidden + (self.max_positions * self.hidden if self.learned_positions else 0)

    def params(self, *, active: bool = False) -> int:
        """Total parameters (or active per token): embeddings, layers, final norm, untied output layer."""
        out = 0 if self.tie_embeddings else self.vocab * self.hidden
        final_norm = 2 * self.hidden if self.bias else self.hidden
        return self.embedding_params() + self.num_layers * self.layer_params(active=active) + final_norm + out


def list_models() -> list[str]:
    """Names of the built-in catalog models (costmodel/catalog/*.json)."""
    return sorted(p.stem for p in catalog_dir().glob("*.json"))


def load_model(name_or_path: str, flag: str = "--model") -> ModelSpec:
    """Load a model from the catalog by name, or from a HF config.json / YAML file.

    Accepted keys (HF names first, common aliases after): num_hidden_layers|n_layer|num_layers,
    hidden_size|n_embd|d_model, intermediate_size|ffn_hidden_size|n_inner, num_attention_heads|n_head,
    num_key_value_heads|num_kv_heads (HF default: = heads), head_dim (default hidden/heads),
    vocab_size, hidden_act|activation_function, tie_word_embeddings (HF default True),
    num_local_experts|num_experts|n_routed_experts|moe_num_experts, num_experts_per_tok|moe_topk|top_k.
    Keys starting with ``_`` are the catalog's own (``_seq_len``, ``_gated``, ...).

    Raises:
        InputError: unknown name (with close matches), unreadable file, missing or bad key.
    """
    path = _resolve(name_or_path, catalog_dir(), (".json",), "model", flag)
    d = _read_mapping(path)
    w = str(path)
    layers = _get_int(d, ("num_hidden_layers", "n_layer", "num_layers"), w)
    hidden = _get_int(d, ("hidden_size", "n_embd", "d_model"), w)
    heads = _get_int(d, ("num_attention_heads", "n_head", "num_heads"), w)
    ffn = _get_int(d, ("intermediate_size", "ffn_hidden_size", "n_inner", "ffn_dim"), w, required=False)
    if ffn is None:
        if "n_inner" in d:  # GPT-2 configs: n_inner null means 4 * n_embd (HF GPT2Config docs)
            ffn = 4 * hidden
        else:
            raise InputError(w, "intermediate_size", "missing")
    moe_ffn = _get_int(d, ("moe_intermediate_size",), w, required=False)
    kv = _get_int(d, ("num_key_value_heads", "num_kv_heads", "multi_query_group_num"), w,
                  required=False, default=heads)
    head_dim = _get_int(d, ("head_dim", "kv_channels"), w, required=False, default=None)
    if head_dim is None:
        if hidden % heads:
            raise InputError(w, "hidden_size", f"{hidden} is not divisible by num_attention_heads {heads}")
        head_dim = hidden // heads
    if heads % kv:
        raise InputError(w, "num_key_value_heads", f"num_attention_heads {heads} is not divisible by {kv}")
    vocab = _get_int(d, ("vocab_size", "padded_vocab_size"), w)
    act = d.get("hidden_act", d.get("activation_function", d.get("activation")))
    if act is None:
        raise InputError(w, "hidden_act", "missing")
    if not isinstance(act, str) or act not in _ACTS:
        raise InputError(w, "hidden_act", f"{act!r} is not one of {', '.join(_ACTS)}")
    experts = _get_int(d, ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts"),
                       w, required=False, default=1)
    topk = _get_int(d, ("num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts"), w,
                    required=False, default=1 if experts == 1 else None)
    if topk is None:
        raise InputError(w, "num_experts_per_tok", f"missing for an MoE model with {experts} experts")
    if topk > experts:
        raise InputError(w, "num_experts_per_tok", f"{topk} exceeds the {experts} experts")
    model_type = str(d.get("model_type", ""))
    gated = d.get("_gated")
    if gated is None:
        gated = model_type in _GATED_TYPES or act in ("silu", "swish", "swiglu", "geglu")
    tie = d.get("tie_word_embeddings", True)
    for key, val in (("_gated", gated), ("tie_word_embeddings", tie)):
        if not isinstance(val, bool):
            raise InputError(w, key, f"expected true or false, got {val!r}")
    pos = d.get("_position_embedding", "learned" if model_type in ("gpt2", "gpt_neo", "opt") else "rope")
    if pos not in ("rope", "learned", "alibi"):
        raise InputError(w, "_position_embedding", f"{pos!r} is not one of rope, learned, alibi")
    max_pos = _get_int(d, ("max_position_embeddings", "n_positions"), w, required=pos == "learned",
                       default=0)
    seq_len = _get_int(d, ("_seq_len",), w, required=False, default=None)
    assumed = seq_len is None
    if assumed:
        seq_len = min(max_pos, 4096) if max_pos else 4096
    pp = d.get("_params_published")
    return ModelSpec(
        name=d.get("_name", path.stem), display_name=d.get("_display_name", path.stem),
        num_layers=layers, hidden=hidden, ffn_hidden=moe_ffn or ffn, num_heads=heads, num_kv_heads=kv,
        head_dim=head_dim, vocab=vocab, gated=bool(gated), activation=act, tie_embeddings=tie,
        num_experts=experts, topk=topk, learned_positions=pos == "learned", max_positions=max_pos,
        dropout=bool(d.get("_dropout", False)), bias=bool(d.get("_bias", False)), seq_len=seq_len,
        params_published=float(pp) if isinstance(pp, (int, float)) else None,
        source=str(d.get("_source", path)), seq_len_assumed=assumed)
