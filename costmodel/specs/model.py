"""The model spec: a decoder-only transformer (dense or MoE) as the cost model sees it.

One attention type for every layer (MHA/GQA, or DeepSeek's multi-head latent attention) and two MLP
kinds: dense layers and MoE layers (routed experts, optional shared experts, a router).  MoE models
may keep some layers dense (DeepSeek's ``first_k_dense_replace``, Qwen-MoE's ``mlp_only_layers``,
Llama 4's interleaving); the cost terms see the per-layer mean of the two kinds
(:meth:`ModelSpec.moe_layer_fraction`).  Reading a config is :mod:`.model_config`.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .router_config import RouterSpec

#: GEMM roles of a projection under Megatron-style tensor parallelism: column-parallel splits the
#: output width over TP, row-parallel the input width, duplicated runs whole on every TP rank
#: (Megatron-core MLA's down-projections, ``parallel_mode="duplicated"``)
SPLITS = ("col", "row", "dup")


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer (dense or MoE) as the cost model sees it.

    Attributes (all counts are integers):
        name, display_name: catalog name and human name.
        num_layers, hidden, ffn_hidden (per routed expert for MoE), num_heads, num_kv_heads, vocab.
        head_dim: width of one attention head (MLA: the non-rotary Q/K part, ``qk_nope_head_dim``).
        gated: MLP has a third (gate) matrix, SwiGLU/GeGLU (Shazeer 2020, arXiv:2002.05202).
        activation: the MLP non-linearity name as in the config.
        tie_embeddings: the output layer shares the input embedding matrix.
        num_experts, topk: MoE routed experts per layer and experts per token (1, 1 for dense).
        num_dense_layers: layers of an MoE model whose MLP is dense, of width ``dense_ffn_hidden``
            (0 = ``ffn_hidden``).
        dense_layer_indices: which layers those are where they are not the first ones (MoE every
            second layer: Llama 4 Maverick's ``interleave_moe_layer_step``, Qwen-MoE's
            ``decoder_sparse_step``, ``mlp_only_layers``); () = the first ``num_dense_layers``
            (DeepSeek's ``first_k_dense_replace``).  Decides how many MoE layers a pipeline stage holds.
        shared_ffn_hidden: summed width of the shared experts every token of an MoE layer passes
            (DeepSeekMoE, Dai et al. 2024, arXiv:2401.06066; Qwen-MoE's shared expert).
        q_lora_rank, kv_lora_rank, qk_rope_head_dim, v_head_dim: multi-head latent attention
            (DeepSeek-V2, arXiv:2405.04434 sec. 2.1) when ``kv_lora_rank`` > 0: Q through a rank-
            ``q_lora_rank`` bottleneck (0 = directly), K and V from a ``kv_lora_rank`` latent plus a
            shared ``qk_rope_head_dim`` rotary key; V heads of ``v_head_dim``.
        mtp_layers: multi-token-prediction modules (DeepSeek-V3, arXiv:2412.19437 sec. 2.2); not
            counted in :meth:`params` (published totals exclude them), see :meth:`mtp_params`.
        attention_chunk, chunked_layers: ``chunked_layers`` layers attend only within their
            ``attention_chunk``-token block (Llama 4's chunked local attention on its RoPE layers,
            ``attention_chunk_size``); 0 = none.
        routing_groups, routing_group_limit: group-limited routing (DeepSeek-V2/V3 ``n_group`` /
            ``topk_group``, arXiv:2412.19437 sec. 2.1.2 and 3.2.2): the routed experts form
            ``routing_groups`` groups and a token's experts come from at most
            ``routing_group_limit`` of them; 0 = unrestricted.
        qkv_bias: the Q, K, V projections have biases (Qwen2); ``bias`` implies it.
        o_bias: the attention's output projection has a bias too (``attention_bias`` of the Llama, Gemma,
            Qwen3 and OLMo families: modeling_llama.py LlamaAttention builds o_proj with
            bias=config.attention_bias; Qwen2's and GLM-4-MoE's o_proj have none).
        qk_norm: per-head RMSNorm on Q and K (Qwen3).
        layer_norms: hidden-wide norms a layer holds: 2 (before attention and before the MLP), 4 in Gemma 2
            and 3 (their post-attention and post-feedforward norms too: modeling_gemma2.py, modeling_gemma3.py).
        sliding_window, sliding_layers: ``sliding_layers`` layers attend to the last
            ``sliding_window`` tokens only (Mistral 7B's every layer; gpt-oss's and Gemma 2's
            alternate layers, from ``layer_types``); 0 = full causal attention everywhere.
        sliding_layer_indices: which layers slide (0-indexed), () where every layer does or the
            placement is not known (a hand-built spec).
        attn_softcap: tanh soft-capping of the attention scores at this value (Gemma 2's
            ``attn_logit_softcapping``), 0 for none: the softmax input is cap x tanh(scores / cap).
        attention_sinks: one learnable logit per head joins each softmax row (gpt-oss; Megatron-core
            ``softmax_type`` 'learnable'); its 64 parameters a layer are not counted.
        glu_alpha, glu_clamp, glu_linear_offset: the gated MLP computes (up + offset) x gate x
            sigmoid(alpha x gate) on inputs clamped to +-clamp (gate: above only; 0: no clamp): gpt-oss
            1.702, 7.0, 1.0 (costmodel.specs.mlp_config); SwiGLU 1, 0, 0.
        learned_positions: GPT-style learned position table of ``max_positions`` rows.
        embedding_norm: a LayerNorm (weight and bias) right after the input embedding (BLOOM's
            ``word_embeddings_layernorm``, modeling_bloom.py; arXiv:2211.05100 sec. 3.2.3).
        dropout, bias: trained with dropout masks stored for backward; linear layers have biases.
        seq_len: default training sequence length for this model (tokens).
        seq_len_assumed: True when the file gives no training length (``_seq_len``) and seq_len is
            min(max_position_embeddings, 4096): a context window is not a training length.
        params_published: the authors' parameter count, or None.
        source: where the config comes from (path or citation).
        family: the file's Hugging Face ``model_type`` ('' for a catalog file that states its
            architecture itself with ``_gated``); :func:`costmodel.specs.model_config.known_family`
            says whether the reader knows its twists (Qwen's Q/K/V biases, Qwen3's Q/K norms...).
        nope_layer_indices: the layers (0-indexed) whose attention applies no rotary embedding (Llama 4's
            every fourth, HF ``no_rope_layers`` 0); () where every layer rotates.
        qk_l2_norm: a weightless L2 norm of Q and K on the rotary layers (Llama 4's ``use_qk_norm``).
        router: how the MoE router weights a token's experts (costmodel.specs.router_config): softmax or
            sigmoid, renormalised or not, scaled, with an expert bias; priced alike, set at launch.
        pipeline_rank_layers: transformer layers on each pipeline rank where a run places them itself
            (Megatron-core --pipeline-model-parallel-layout, costmodel.pipeline_layout); () for the
            split costmodel.layouts derives.  Layouts of another PP are split as derived.
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
    family: str = ""
    num_dense_layers: int = 0
    dense_layer_indices: tuple = ()
    dense_ffn_hidden: int = 0
    shared_ffn_hidden: int = 0
    q_lora_rank: int = 0
    kv_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    mtp_layers: int = 0
    qkv_bias: bool = False
    o_bias: bool = False
    qk_norm: bool = False
    layer_norms: int = 2
    embedding_norm: bool = False
    sliding_window: int = 0
    sliding_layers: int = 0
    sliding_layer_indices: tuple = ()
    routing_groups: int = 0
    routing_group_limit: int = 0
    attention_chunk: int = 0
    chunked_layers: int = 0
    pipeline_rank_layers: tuple = ()
    attn_softcap: float = 0.0
    attention_sinks: bool = False
    glu_alpha: float = 1.0
    glu_clamp: float = 0.0
    glu_linear_offset: float = 0.0
    router: RouterSpec = RouterSpec()
    nope_layer_indices: tuple = ()
    qk_l2_norm: bool = False

    # ------------------------------------------------------------------ shape
    @property
    def is_moe(self) -> bool:
        """True when layers have more than one expert."""
        return self.num_experts > 1

    @property
    def is_mla(self) -> bool:
        """True for multi-head latent attention (``kv_lora_rank`` > 0)."""
        return self.kv_lora_rank > 0

    @property
    def moe_layers(self) -> int:
        """Layers with routed experts (0 for a dense model)."""
        return self.num_layers - self.num_dense_layers if self.is_moe else 0

    @property
    def moe_layer_fraction(self) -> float:
        """Share of the layers that are MoE layers; the cost terms weight the two MLP kinds by it."""
        return self.moe_layers / self.num_layers

    @property
    def dense_mlp_width(self) -> int:
        """FFN width of the dense layers: ``dense_ffn_hidden``, else ``ffn_hidden``."""
        return self.dense_ffn_hidden or self.ffn_hidden

    @property
    def mlp_mats(self) -> int:
        """Matrices per MLP: 3 gated (gate, up, down), else 2."""
        return 3 if self.gated else 2

    @property
    def qk_head_dim(self) -> int:
        """Width of one Q (and K) head: head_dim, plus the rotary part under MLA."""
        return self.head_dim + self.qk_rope_head_dim

    @property
    def q_dim(self) -> int:
        """num_heads x qk_head_dim: width of Q."""
        return self.num_heads * self.qk_head_dim

    @property
    def k_dim(self) -> int:
        """Width of K: num_kv_heads x head_dim (GQA, Ainslie et al. 2023); MLA: num_heads x qk_head_dim."""
        return self.q_dim if self.is_mla else self.num_kv_heads * self.head_dim

    @property
    def v_dim(self) -> int:
        """Width of V: num_kv_heads x head_dim; MLA: num_heads x v_head_dim."""
        return self.num_heads * self.v_head_dim if self.is_mla else self.num_kv_heads * self.head_dim

    @property
    def kv_repeat_factor(self) -> float:
        """Query heads per K/V head: what repeating GQA's K and V to the query heads multiplies their
        width by (1 for MHA and for MLA, whose K and V are per head already)."""
        return 1.0 if self.is_mla else self.num_heads / self.num_kv_heads

    def attention_kv_width(self, kv_repeat: bool = False) -> float:
        """Width of K and V together as the attention kernel reads them, elements per token:
        ``k_dim + v_dim``, times :attr:`kv_repeat_factor` where the stack repeats the K/V heads before
        the kernel (``Recipe.kv_repeat``: torchtitan's ``repeat_kv`` before pytorch/torchtitan#2259)."""
        return (self.k_dim + self.v_dim) * (self.kv_repeat_factor if kv_repeat else 1.0)

    @property
    def kv_dim(self) -> int:
        """Width of K (GQA: also of V): see :attr:`k_dim`."""
        return self.k_dim

    @property
    def attn_out_dim(self) -> int:
        """Width of the attention output (the output projection's input): num_heads x V head width."""
        return self.num_heads * (self.v_head_dim if self.is_mla else self.head_dim)

    def attention_projections(self, fused_qkv: bool = True) -> tuple[tuple[int, int, str], ...]:
        """The attention layer's weight GEMMs as (n out, k in, split), ``split`` one of
        :data:`SPLITS`: per token y[n] = x[k] W.

        MHA/GQA: fused QKV (column-parallel), or Q, K and V as three GEMMs where the framework keeps
        them apart (``fused_qkv`` False: costmodel.stacks.Stack.fused_qkv), and the output
        projection (row-parallel).  The FLOPs are the same either way.  MLA, as
        Megatron-core builds it (megatron/core/transformer/multi_latent_attention.py): Q down
        (duplicated) and up (column), KV down with the rotary key (duplicated) and up (column), output
        (row); without ``q_lora_rank`` Q is one column-parallel projection.
        """
        h = self.hidden
        if not self.is_mla:
            qkv = (((self.q_dim + self.k_dim + self.v_dim, h, "col"),) if fused_qkv
                   else tuple((n, h, "col") for n in (self.q_dim, self.k_dim, self.v_dim)))
            return qkv + ((h, self.attn_out_dim, "row"),)
        q = (((self.q_lora_rank, h, "dup"), (self.q_dim, self.q_lora_rank, "col")) if self.q_lora_rank
             else ((self.q_dim, h, "col"),))
        kv_up = self.num_heads * (self.head_dim + self.v_head_dim)
        return q + ((self.kv_lora_rank + self.qk_rope_head_dim, h, "dup"), (kv_up, self.kv_lora_rank, "col"),
                    (h, self.attn_out_dim, "row"))

    def attended_keys(self, seq_len, causal: bool = False, doc_tokens=0) -> float:
        """Keys per query the model-FLOPs conventions count, over the mean layer: the full s
        (Megatron's s x s convention) or :meth:`causal_keys_per_query`; a sliding-window or chunked
        layer counts at most its window or chunk; packed documents of ``doc_tokens`` D < s count
        their own D x D block each, (q D a(D) + r a(r)) / s for s = qD + r."""
        if causal:
            return self.causal_keys_per_query(seq_len, doc_tokens)
        if doc_tokens and doc_tokens < seq_len:
            return _blockwise_mean(seq_len, doc_tokens, self.attended_keys)
        f_s, f_c = self._local_fractions()
        return ((1 - f_s - f_c) * seq_len + f_s * min(self.sliding_window or seq_len, seq_len)
                + f_c * min(self.attention_chunk or seq_len, seq_len))

    def causal_keys_per_query(self, seq_len, doc_tokens=0) -> float:
        """Mean keys a query attends to under the causal mask, over the mean layer: s/2 for full
        attention; w - w^2/(2s) for a sliding window w < s (query i sees min(i, w) keys); for
        chunks of C (s = qC + r) (q C^2 + r^2) / (2s), each chunk a causal block of its own.
        ``doc_tokens`` D > 0: the sequence packs documents of D tokens (s = qD + r), each attending
        to itself only, (q D k(D) + r k(r)) / s with k the mean above for one document."""
        if doc_tokens and doc_tokens < seq_len:
            return _blockwise_mean(seq_len, doc_tokens, self.causal_keys_per_query)
        full = seq_len / 2.0
        f_s, f_c = self._local_fractions()
        w, c = self.sliding_window, self.attention_chunk
        slide = w - w * w / (2.0 * seq_len) if w and w < seq_len else full
        if c and c < seq_len:
            chunk = _blockwise_mean(seq_len, c, lambda n: n / 2.0)
        else:
            chunk = full
        return (1 - f_s - f_c) * full + f_s * slide + f_c * chunk

    def _local_fractions(self) -> tuple:
        """(sliding-window layers, chunked layers) over all layers."""
        f_s = self.sliding_layers / self.num_layers if self.sliding_layers and self.sliding_window else 0.0
        f_c = self.chunked_layers / self.num_layers if self.chunked_layers and self.attention_chunk else 0.0
        return f_s, f_c

    # ------------------------------------------------------------------ parameters
    def attention_params(self) -> int:
        """Parameters of one attention block: its projections, their biases (``bias``: all,
        ``qkv_bias``: Q, K, V, with ``o_bias`` the output's too), MLA's latent norms, Qwen3's Q/K norms."""
        w = sum(n * k for n, k, _ in self.attention_projections())
        b = 0
        if self.bias:
            b = sum(n for n, _, _ in self.attention_projections())
        elif self.qkv_bias:
            b = self.q_dim + self.k_dim + self.v_dim + (self.hidden if self.o_bias else 0)
        norms = (self.q_lora_rank + self.kv_lora_rank) if self.is_mla else 0
        return w + b + norms + (2 * self.head_dim if self.qk_norm else 0)

    def mlp_params(self, width: int) -> int:
        """Parameters of one MLP of FFN width ``width`` (2 or 3 matrices, biases with ``bias``)."""
        b = ((self.mlp_mats - 1) * width + self.hidden) if self.bias else 0
        return self.mlp_mats * self.hidden * width + b

    def expert_params(self) -> int:
        """Routed-expert parameters of one MoE layer (0 for a dense model)."""
        return self.num_experts * self.mlp_params(self.ffn_hidden) if self.is_moe else 0

    def _norm_params(self) -> int:
        return self.layer_norms * (2 * self.hidden if self.bias else self.hidden)

    def moe_layer_params(self, *, active: bool = False) -> int:
        """Parameters of one MoE layer (all experts, or the top-k a token uses): attention, routed
        and shared experts, router, norms."""
        experts = self.topk if active else self.num_experts
        shared = self.mlp_params(self.shared_ffn_hidden) if self.shared_ffn_hidden else 0
        return (self.attention_params() + experts * self.mlp_params(self.ffn_hidden) + shared
                + self.hidden * self.num_experts + self._norm_params())

    def dense_layer_params(self) -> int:
        """Parameters of one dense layer: attention, MLP of :attr:`dense_mlp_width`, norms."""
        return self.attention_params() + self.mlp_params(self.dense_mlp_width) + self._norm_params()

    def layer_params(self, *, active: bool = False) -> float:
        """Parameters of the mean transformer layer (all experts, or the top-k active ones): the
        MoE and dense layers weighted by their counts (an integer for a uniform model)."""
        if not self.is_moe:
            return self.dense_layer_params()
        return (self.moe_layers * self.moe_layer_params(active=active)
                + self.num_dense_layers * self.dense_layer_params()) / self.num_layers

    def mean_expert_params(self) -> float:
        """Routed-expert parameters of the mean layer (sharded over EP): expert_params x MoE share."""
        return self.expert_params() * self.moe_layer_fraction

    def embedding_params(self) -> int:
        """Input embedding (+ learned position table, + its LayerNorm): vocab x h (+ max_positions x h)
        (+ 2h)."""
        return (self.vocab * self.hidden + (self.max_positions * self.hidden if self.learned_positions else 0)
                + (2 * self.hidden if self.embedding_norm else 0))

    def params(self, *, active: bool = False) -> int:
        """Total parameters (or active per token: top-k routed experts) of the main model:
        embeddings, layers, final norm, untied output layer; MTP modules excluded."""
        out = 0 if self.tie_embeddings else self.vocab * self.hidden
        final_norm = 2 * self.hidden if self.bias else self.hidden
        layers = self.num_dense_layers * self.dense_layer_params() + (
            self.moe_layers * self.moe_layer_params(active=active) if self.is_moe
            else (self.num_layers - self.num_dense_layers) * self.dense_layer_params())
        return self.embedding_params() + layers + final_norm + out

    def mtp_params(self) -> int:
        """Parameters of the multi-token-prediction modules (DeepSeek-V3 sec. 2.2): per module two
        RMSNorms of h, the 2h x h projection, one transformer layer (an MoE layer when the model is
        MoE) and the shared head's norm; the embedding and output head are shared with the model."""
        layer = self.moe_layer_params() if self.is_moe else self.dense_layer_params()
        return self.mtp_layers * (2 * self.hidden + 2 * self.hidden * self.hidden + layer + self.hidden)


def dense_layer_fields(dense_at) -> dict:
    """The ModelSpec fields of an MoE model whose MLP is dense in layers ``dense_at`` (indices):
    ``num_dense_layers`` and ``dense_layer_indices``, () where they are the first ones (the placement
    the count alone implies)."""
    dense_at = tuple(dense_at)
    return dict(num_dense_layers=len(dense_at),
                dense_layer_indices=() if dense_at == tuple(range(len(dense_at))) else dense_at)


#: Largest gap between the parameter count a config's architecture gives and its ``_params_published``
#: that is still a rounding of the same count (two significant digits are within 5 %, the catalog's
#: models within 1 %): a wider gap means the architecture was read wrong or the count is another model's
PUBLISHED_PARAMS_TOLERANCE = 0.10


def checked_count(spec: ModelSpec, pp, w: str) -> ModelSpec:
    """``spec`` once ``pp``, the ``_params_published`` of its file ``w`` (a positive number, or None),
    agrees with the count its architecture gives (:meth:`ModelSpec.params`) within
    :data:`PUBLISHED_PARAMS_TOLERANCE`.

    Raises:
        InputError: naming ``_params_published``: not a positive number, or both counts when they disagree.
    """
    if pp is None:
        return spec
    if isinstance(pp, bool) or not isinstance(pp, (int, float)) or not pp > 0 or pp == float("inf"):
        raise InputError(w, "_params_published", f"expected a positive number of parameters (e.g. 14.7e9), got {pp!r}")
    got = spec.params()
    if abs(got / pp - 1) > PUBLISHED_PARAMS_TOLERANCE:
        raise InputError(w, "_params_published", f"{pp:.4g} disagrees with the {got:.4g} parameters this architecture "
                         f"has ({100 * (got / pp - 1):+.0f}%; more than {PUBLISHED_PARAMS_TOLERANCE:.0%} apart): "
                         "check the dimensions, or the count (the total, MTP modules apart)")
    return spec


def list_models() -> list[str]:
    """Names of the built-in catalog models (costmodel/catalog/*.json)."""
    from .loading import catalog_dir
    return sorted(p.stem for p in catalog_dir().glob("*.json"))


def load_model(name_or_path: str, flag: str = "--model") -> ModelSpec:
    """Load a model from the catalog by name, or from a HF config.json / YAML file
    (:func:`costmodel.specs.model_config.read_model_config` for the keys).

    Raises:
        InputError: unknown name (with close matches), unreadable file, missing, bad or unmodelled key,
            a catalog file whose ``_name`` is not its file name.
    """
    from .loading import _read_mapping, _resolve, catalog_dir
    from .model_config import read_model_config
    path = _resolve(name_or_path, catalog_dir(), (".json",), "model", flag)
    spec = read_model_config(_read_mapping(path), path)
    # the catalog is looked up by file name: a model listed under another name could not be asked for
    if Path(path).parent.resolve() == catalog_dir().resolve() and spec.name != Path(path).stem:
        raise InputError(str(path), "_name", f"{spec.name!r} differs from the file's name {Path(path).stem!r} "
                         "(catalog models are asked for by file name): make them the same")
    return spec


def _blockwise_mean(seq_len, block, keys) -> float:
    """Mean keys per query over a sequence of ``seq_len`` tokens cut into blocks of ``block`` (s = qB + r),
    each query attending within its own block: (q B keys(B) + r keys(r)) / s."""
    q, r = divmod(seq_len, block)
    return (q * block * keys(block) + (r * keys(r) if r else 0.0)) / seq_len
