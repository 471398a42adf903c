"""Specs: the model, the GPU, the cluster, the fitted profile and the training recipe.

Everything the cost model reads from disk passes through here once and comes out as frozen
dataclasses in SI units.  Bad input raises :class:`costmodel.errors.InputError` naming the file and
field.  Formats: Hugging Face ``config.json`` (or YAML with the same keys) for models;
hardware/README.md for GPU, cluster and profile YAML.
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from .collective import COLLECTIVES, PROTOCOLS, CollectiveParams
from .errors import InputError
from .gemm import GemmParams
from .units import parse_quantity

PRECISIONS = ("bf16", "fp16", "fp8")

# ----------------------------------------------------------------------------------------- files


def _package_dir(sub: str) -> Path:
    """Directory of built-in data: the source checkout's folder, else the installed package's."""
    here = Path(__file__).resolve().parent
    if sub == "catalog":
        return here / "catalog"
    checkout = here.parent / "hardware"
    if (checkout / "gpus").is_dir():
        return checkout
    return Path(str(resources.files("costmodel.hardware")))


def hardware_dir() -> Path:
    """The built-in hardware catalog (hardware/ in a checkout, costmodel/hardware when installed)."""
    return _package_dir("hardware")


def catalog_dir() -> Path:
    """The built-in model catalog folder (costmodel/catalog/*.json)."""
    return _package_dir("catalog")


def _read_mapping(path: Path) -> dict:
    try:
        text = path.read_text()
    except OSError as e:
        raise InputError(path, "", f"cannot read file ({e.strerror})") from None
    if not text.strip():
        raise InputError(path, "", "file is empty")
    try:
        data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as e:
        raise InputError(path, "", f"not valid {'JSON' if path.suffix == '.json' else 'YAML'}: "
                         f"{str(e).splitlines()[0]}") from None
    if not isinstance(data, dict):
        raise InputError(path, "", "expected a mapping of keys to values at the top level")
    return data


def _resolve(name_or_path: str, folder: Path, exts: tuple[str, ...], what: str, flag: str) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".json", ".yaml", ".yml") or p.exists():
        if not p.is_file():
            raise InputError(flag, "", f"{what} file {name_or_path!r} does not exist")
        return p
    names = sorted(f.stem for ext in exts for f in folder.glob(f"*{ext}"))
    if name_or_path in names:
        for ext in exts:
            if (folder / f"{name_or_path}{ext}").is_file():
                return folder / f"{name_or_path}{ext}"
    close = difflib.get_close_matches(name_or_path, names, n=4, cutoff=0.5)
    hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(names)}"
    raise InputError(flag, "", f"unknown {what} {name_or_path!r}{hint}")


def _get(d: dict, key: str, where, kind: str = "number", *, required=True, positive=True,
         default=None, prefix=""):
    name = prefix + key
    if key not in d or d[key] is None:
        if required:
            raise InputError(where, name, "missing")
        return default
    x = parse_quantity(d[key], kind, where, name)
    if positive and not x > 0:
        raise InputError(where, name, f"must be positive, got {d[key]!r}")
    return x


def _get_int(d: dict, keys: tuple[str, ...], where, *, required=True, default=None, minimum=1):
    for k in keys:
        if k in d and d[k] is not None:
            v = d[k]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or int(v) != v:
                raise InputError(where, k, f"expected an integer, got {v!r}")
            if v < minimum:
                raise InputError(where, k, f"must be >= {minimum}, got {v!r}")
            return int(v)
    if required:
        raise InputError(where, keys[0], "missing" + (f" (also looked for {', '.join(keys[1:])})"
                                                      if len(keys) > 1 else ""))
    return default


def _get_str(d: dict, key: str, where, choices=None, *, required=True, default=None, prefix=""):
    if key not in d or d[key] is None:
        if required:
            raise InputError(where, prefix + key, "missing")
        return default
    v = d[key]
    if not isinstance(v, str):
        raise InputError(where, prefix + key, f"expected a string, got {v!r}")
    if choices and v not in choices:
        raise InputError(where, prefix + key, f"{v!r} is not one of {', '.join(choices)}")
    return v


def _sub(d: dict, key: str, where) -> dict:
    v = d.get(key)
    if not isinstance(v, dict):
        raise InputError(where, key, "missing section" if v is None else "expected a mapping")
    return v


def _check_sources(d: dict, where, numeric_paths: list[str]):
    src = d.get("sources")
    if not isinstance(src, dict):
        raise InputError(where, "sources", "missing: every number needs its source")
    for p in numeric_paths:
        top = p.split(".")[0]
        if p not in src and top not in src:
            raise InputError(where, f"sources.{p}", "missing: every number needs its source")


# ----------------------------------------------------------------------------------------- model

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
    if seq_len is None:
        seq_len = min(max_pos, 4096) if max_pos else 4096
    pp = d.get("_params_published")
    return ModelSpec(
        name=d.get("_name", path.stem), display_name=d.get("_display_name", path.stem),
        num_layers=layers, hidden=hidden, ffn_hidden=moe_ffn or ffn, num_heads=heads, num_kv_heads=kv,
        head_dim=head_dim, vocab=vocab, gated=bool(gated), activation=act, tie_embeddings=tie,
        num_experts=experts, topk=topk, learned_positions=pos == "learned", max_positions=max_pos,
        dropout=bool(d.get("_dropout", False)), bias=bool(d.get("_bias", False)), seq_len=seq_len,
        params_published=float(pp) if isinstance(pp, (int, float)) else None,
        source=str(d.get("_source", path)))


# ------------------------------------------------------------------------------------ GPU/cluster


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet values of one GPU model (hardware/gpus/*.yaml), SI units.

    Attributes: key (file stem), name, vendor, peak_flops (dtype -> dense FLOP/s), hbm_bytes,
    hbm_bytes_per_s, tdp_w, num_sms, nvlink_bytes_per_s (per direction, or 0), sources (field ->
    citation), slowdown_temp_c (thermal slowdown threshold), power_limit_min_w (lowest settable
    power limit) and boost_clock_mhz (max SM clock, at which the peaks are quoted), each None when
    the file does not give it.
    """

    key: str
    name: str
    vendor: str
    peak_flops: dict
    hbm_bytes: float
    hbm_bytes_per_s: float
    tdp_w: float
    num_sms: int
    nvlink_bytes_per_s: float
    sources: dict
    slowdown_temp_c: float | None = None
    power_limit_min_w: float | None = None
    boost_clock_mhz: float | None = None


@dataclass(frozen=True)
class CoolingSpec:
    """How a node is cooled (cluster YAML ``cooling:``), per GPU slot in local-rank order.

    Attributes:
        type: 'air' or 'liquid'; airflow: e.g. 'front-to-back'.
        inlet_temp_c: coolant/air inlet temperature, C.
        r_th_scale: per slot, multiplier of the GPU's junction-to-inlet thermal resistance.
        rows: per slot, position name ('front', 'rear', ...).
        upstream: per slot, tuple of slots whose exhaust air reaches it first.
        preheat_c_per_w: inlet rise of a slot per W dissipated by each upstream slot, C/W
            (1 / (rho c_p V_dot) of the air stream; 0 for liquid cooling).
    """

    type: str
    airflow: str | None
    inlet_temp_c: float
    r_th_scale: tuple
    rows: tuple
    upstream: tuple
    preheat_c_per_w: float


@dataclass(frozen=True)
class ClusterSpec:
    """One cluster (hardware/clusters/*.yaml): GPUs, topology, power and cooling, SI units.

    Attributes: key, name, description, gpu (:class:`GpuSpec`), gpus_per_node, nodes,
    intra_fabric, intra_bytes_per_s (per GPU per direction), intra_latency_s, inter_fabric,
    nics_per_node, nic_bytes_per_s (per NIC per direction), inter_latency_s, node_power_budget_w,
    cooling (:class:`CoolingSpec`), sources, path.
    """

    key: str
    name: str
    description: str
    gpu: GpuSpec
    gpus_per_node: int
    nodes: int
    intra_fabric: str
    intra_bytes_per_s: float
    intra_latency_s: float
    inter_fabric: str
    nics_per_node: int
    nic_bytes_per_s: float
    inter_latency_s: float
    node_power_budget_w: float
    cooling: CoolingSpec
    sources: dict
    path: str

    @property
    def num_gpus(self) -> int:
        """gpus_per_node * nodes."""
        return self.gpus_per_node * self.nodes

    @property
    def node_nic_bytes_per_s(self) -> float:
        """Total NIC bandwidth of a node per direction, bytes/s."""
        return self.nics_per_node * self.nic_bytes_per_s


def list_gpus() -> list[str]:
    """File stems of hardware/gpus/*.yaml."""
    return sorted(p.stem for p in (hardware_dir() / "gpus").glob("*.yaml"))


def list_clusters() -> list[str]:
    """File stems of hardware/clusters/*.yaml."""
    return sorted(p.stem for p in (hardware_dir() / "clusters").glob("*.yaml"))


def load_gpu(name_or_path: str, flag: str = "gpu") -> GpuSpec:
    """Load hardware/gpus/NAME.yaml (or a path).  Raises InputError on a bad or unsourced field."""
    path = _resolve(name_or_path, hardware_dir() / "gpus", (".yaml", ".yml"), "GPU", flag)
    d = _read_mapping(path)
    w = str(path)
    peaks = _sub(d, "peak_tflops", w)
    peak_flops = {}
    for dt, v in peaks.items():
        peak_flops[dt] = parse_quantity(v, "number", w, f"peak_tflops.{dt}") * 1e12
        if not peak_flops[dt] > 0:
            raise InputError(w, f"peak_tflops.{dt}", f"must be positive, got {v!r}")
    if not any(k in peak_flops for k in PRECISIONS):
        raise InputError(w, "peak_tflops", f"needs at least one of {', '.join(PRECISIONS)}")
    num_sms = _get_int(d, ("num_sms",), w)
    _check_sources(d, w, ["peak_tflops", "hbm_capacity", "hbm_bandwidth", "tdp", "num_sms"])
    return GpuSpec(
        key=path.stem, name=_get_str(d, "name", w), vendor=_get_str(d, "vendor", w, ("nvidia", "amd")),
        peak_flops=peak_flops, hbm_bytes=_get(d, "hbm_capacity", w, "bytes"),
        hbm_bytes_per_s=_get(d, "hbm_bandwidth", w, "bytes_per_s"), tdp_w=_get(d, "tdp", w, "watts"),
        num_sms=num_sms,
        nvlink_bytes_per_s=_get(d, "nvlink_bandwidth_per_gpu", w, "bytes_per_s", required=False,
                                default=0.0),
        sources=dict(d["sources"]),
        slowdown_temp_c=_get(d, "slowdown_temp", w, "celsius", required=False),
        power_limit_min_w=_get(d, "power_limit_min", w, "watts", required=False),
        boost_clock_mhz=_get(d, "boost_clock_mhz", w, required=False))


def load_cluster(name_or_path: str, nodes: int | None = None, flag: str = "--cluster") -> ClusterSpec:
    """Load hardware/clusters/NAME.yaml (or a path); ``nodes`` overrides its node count.

    Raises:
        InputError: unknown name, missing/negative/unsourced field, bad GPU reference, nodes < 1.
    """
    path = _resolve(name_or_path, hardware_dir() / "clusters", (".yaml", ".yml"), "cluster", flag)
    d = _read_mapping(path)
    w = str(path)
    gpu_name = _get_str(d, "gpu", w)
    try:
        gpu = load_gpu(gpu_name, flag=f"{w}: gpu")
    except InputError as e:
        if e.where.endswith(": gpu"):
            raise InputError(w, "gpu", e.message) from None
        raise
    intra, inter = _sub(d, "intra_node", w), _sub(d, "inter_node", w)
    power, cooling = _sub(d, "power", w), _sub(d, "cooling", w)
    n_nodes = _get_int(d, ("nodes",), w)
    if nodes is not None:
        if nodes < 1:
            raise InputError("--nodes", "", f"must be >= 1, got {nodes}")
        n_nodes = nodes
    _check_sources(d, w, ["intra_node.bandwidth_per_gpu", "intra_node.latency",
                          "inter_node.bandwidth_per_nic", "inter_node.latency",
                          "inter_node.nics_per_node", "power.node_power_budget", "cooling.inlet_temp"])
    ctype = _get_str(cooling, "type", w, ("air", "liquid"), prefix="cooling.")
    return ClusterSpec(
        key=path.stem, name=_get_str(d, "name", w), description=str(d.get("description", "")), gpu=gpu,
        gpus_per_node=_get_int(d, ("gpus_per_node",), w), nodes=n_nodes,
        intra_fabric=_get_str(intra, "fabric", w, ("nvswitch", "nvlink-mesh", "xgmi", "pcie"),
                              prefix="intra_node."),
        intra_bytes_per_s=_get(intra, "bandwidth_per_gpu", w, "bytes_per_s", prefix="intra_node."),
        intra_latency_s=_get(intra, "latency", w, "seconds", prefix="intra_node."),
        inter_fabric=_get_str(inter, "fabric", w, ("infiniband", "roce", "efa", "omnipath", "ethernet"),
                              prefix="inter_node."),
        nics_per_node=_get_int(inter, ("nics_per_node",), w),
        nic_bytes_per_s=_get(inter, "bandwidth_per_nic", w, "bytes_per_s", prefix="inter_node."),
        inter_latency_s=_get(inter, "latency", w, "seconds", prefix="inter_node."),
        node_power_budget_w=_get(power, "node_power_budget", w, "watts", prefix="power."),
        cooling=_cooling(cooling, ctype, _get_int(d, ("gpus_per_node",), w), w),
        sources=dict(d["sources"]), path=w)


def _cooling(c: dict, ctype: str, gpus_per_node: int, w: str) -> CoolingSpec:
    """Parse a cluster's ``cooling:`` section (hardware/README.md); slots default to identical.

    Raises:
        InputError: a slot list whose length is not gpus_per_node, a bad upstream index, a negative
            preheat, or air cooling with upstream slots but no preheat coefficient.
    """
    inlet = _get(c, "inlet_temp", w, "celsius", prefix="cooling.", positive=False)
    slots = c.get("slots")
    if slots is None:
        scale, rows = (1.0,) * gpus_per_node, ("",) * gpus_per_node
    else:
        if not isinstance(slots, list) or len(slots) != gpus_per_node:
            raise InputError(w, "cooling.slots", f"expected a list of {gpus_per_node} slots (one per GPU), "
                             f"got {len(slots) if isinstance(slots, list) else type(slots).__name__}")
        scale, rows = [], []
        for i, s in enumerate(slots):
            if not isinstance(s, dict):
                raise InputError(w, f"cooling.slots[{i}]", "expected a mapping with row and r_th_scale")
            scale.append(_get(s, "r_th_scale", w, prefix=f"cooling.slots[{i}].", required=False, default=1.0))
            rows.append(str(s.get("row", "")))
        scale, rows = tuple(scale), tuple(rows)
    up = c.get("upstream", [[] for _ in range(gpus_per_node)])
    if not isinstance(up, list) or len(up) != gpus_per_node or not all(isinstance(u, list) for u in up):
        raise InputError(w, "cooling.upstream", f"expected {gpus_per_node} lists of upstream slot indices")
    for i, u in enumerate(up):
        for j in u:
            if not isinstance(j, int) or isinstance(j, bool) or not 0 <= j < gpus_per_node or j == i:
                raise InputError(w, f"cooling.upstream[{i}]", f"{j!r} is not another slot index 0..{gpus_per_node - 1}")
    pre = _get(c, "preheat_c_per_w", w, prefix="cooling.", positive=False, required=False, default=0.0)
    if pre < 0:
        raise InputError(w, "cooling.preheat_c_per_w", f"must be >= 0, got {pre}")
    if ctype == "air" and any(up) and pre == 0 and "preheat_c_per_w" not in c:
        raise InputError(w, "cooling.preheat_c_per_w", "missing: air cooling with upstream slots needs it")
    return CoolingSpec(type=ctype, airflow=c.get("airflow"), inlet_temp_c=inlet, r_th_scale=scale,
                       rows=rows, upstream=tuple(tuple(u) for u in up), preheat_c_per_w=pre)


# --------------------------------------------------------------------------------------- profile


@dataclass(frozen=True)
class Profile:
    """Fitted efficiencies of one GPU model (hardware/profiles/*.yaml, written by calibration/).

    Attributes:
        key: file stem; gpu: GPU file stem it was fitted for.
        gemm: dtype -> :class:`costmodel.gemm.GemmParams`.
        hbm_efficiency: achieved / datasheet HBM bandwidth.
        flash_efficiency: fused-attention FLOP/s / dense 16-bit peak.
        comm: scope ('intra_node' | 'inter_node') -> collective -> :class:`CollectiveParams`.
        comm_group_size: scope -> collective -> ranks of the measurement the latencies were fitted at.
        power: :class:`costmodel.power.PowerParams` or None when the profile has no ``power:``.
        thermal: dict with r_th_c_per_w and tau_s, or None when the profile has no ``thermal:``.
        overlap_slowdown: time of compute that runs while a collective is in flight over its time
            alone (``overlap.compute_slowdown``, measured by the calibration suite); 1.0 (no
            contention modelled) when the profile has no ``overlap:`` section.
        raw: the YAML mapping as read (for display: fit quality, provenance, notes).
        path: where it was read from.
    """

    key: str
    gpu: str
    gemm: dict
    hbm_efficiency: float
    flash_efficiency: float
    comm: dict
    comm_group_size: dict
    raw: dict = field(repr=False)
    path: str = ""
    power: object = None
    thermal: dict | None = None
    overlap_slowdown: float = 1.0


def _protocols(p: dict, w: str, pre: str) -> list:
    """``[(alpha_s, busbw_efficiency), ...]`` of one comm entry's ``protocols`` list (seconds, ratio).

    Raises:
        InputError: the list is missing or empty, an item is not a mapping, a name is not one of
            LL / LL128 / Simple or repeats, or a value is missing or not positive.
    """
    items = p.get("protocols")
    if not isinstance(items, list) or not items:
        old = " (this is the old single-ramp schema with n_half_bytes/gamma; regenerate the profile)" \
            if "n_half_bytes" in p else ""
        raise InputError(w, pre + "protocols", "missing: expected a list of {name, alpha_s, busbw_efficiency}, "
                         f"one per NCCL protocol{old}")
    out, seen = [], set()
    for i, q in enumerate(items):
        at = f"{pre}protocols[{i}]."
        if not isinstance(q, dict):
            raise InputError(w, at[:-1], f"expected a mapping with name, alpha_s, busbw_efficiency, got {q!r}")
        name = q.get("name")
        if name not in PROTOCOLS or name in seen:
            raise InputError(w, at + "name", f"expected one of {', '.join(PROTOCOLS)} (each once), got {name!r}")
        seen.add(name)
        out.append((_get(q, "alpha_s", w, "seconds", prefix=at), _get(q, "busbw_efficiency", w, prefix=at)))
    return out


def load_profile(path_or_gpu: str, flag: str = "--profile") -> Profile:
    """Load a profile by path or by GPU file stem (hardware/profiles/<stem>.yaml).

    Each ``comm.<scope>.<collective>`` entry holds ``protocols`` (NCCL's LL / LL128 / Simple, each with
    ``alpha_s`` in seconds and ``busbw_efficiency``; see costmodel/collective.py) and ``group_size``.
    Raises:
        InputError: missing file, missing section, or a missing or non-positive parameter.
    """
    path = _resolve(path_or_gpu, hardware_dir() / "profiles", (".yaml", ".yml"), "profile", flag)
    d = _read_mapping(path)
    w = str(path)
    gemm = {}
    for dt, g in _sub(d, "gemm", w).items():
        if not isinstance(g, dict):
            raise InputError(w, f"gemm.{dt}", "expected a mapping")
        pre = f"gemm.{dt}."
        gemm[dt] = GemmParams(
            eta_max=_get(g, "eta_max", w, prefix=pre), k_half=_get(g, "k_half", w, positive=False, prefix=pre),
            launch_s=_get(g, "launch_s", w, "seconds", positive=False, prefix=pre),
            tile_m=_get_int(g, ("tile_m",), w), tile_n=_get_int(g, ("tile_n",), w),
            num_sms=_get_int(g, ("num_sms",), w))
    comm, sizes = {}, {}
    c = _sub(d, "comm", w)
    for scope in ("intra_node", "inter_node"):
        s = c.get(scope)
        if not isinstance(s, dict):
            raise InputError(w, f"comm.{scope}", "missing section")
        comm[scope], sizes[scope] = {}, {}
        for coll in COLLECTIVES:
            p = s.get(coll)
            if not isinstance(p, dict):
                raise InputError(w, f"comm.{scope}.{coll}", "missing")
            pre = f"comm.{scope}.{coll}."
            comm[scope][coll] = CollectiveParams.from_protocols(_protocols(p, w, pre))
            g0 = p.get("group_size", 8)
            if isinstance(g0, bool) or not isinstance(g0, (int, float)) or not float(g0).is_integer() or g0 < 1:
                raise InputError(w, pre + "group_size", f"expected an integer >= 1, got {g0!r}")
            sizes[scope][coll] = int(g0)
    return Profile(
        key=path.stem, gpu=str(d.get("gpu", path.stem)), gemm=gemm,
        hbm_efficiency=_get(_sub(d, "hbm", w), "efficiency", w, prefix="hbm."),
        flash_efficiency=_get(_sub(d, "attention", w), "flash_efficiency", w, prefix="attention."),
        comm=comm, comm_group_size=sizes, raw=d, path=w, power=_power(d, w), thermal=_thermal(d, w),
        overlap_slowdown=_get(d["overlap"], "compute_slowdown", w, prefix="overlap.") if isinstance(d.get("overlap"), dict)
        else 1.0)


def _power(d: dict, w: str):
    """The profile's ``power:`` section as PowerParams (cap range filled in by the caller), or None."""
    from .power import PowerParams
    s = d.get("power")
    if s is None:
        return None
    if not isinstance(s, dict):
        raise InputError(w, "power", "expected a mapping")
    g = lambda k, kind="watts": _get(s, k, w, kind, prefix="power.", positive=k not in ("hbm_w", "link_w"))
    return PowerParams(idle_w=g("idle_w"), flop_w=g("flop_w"), hbm_w=g("hbm_w"), link_w=g("link_w"),
                       gamma=g("gamma", "number"), min_cap_w=0.0, max_cap_w=float("inf"))


def _thermal(d: dict, w: str):
    """The profile's ``thermal:`` section ({r_th_c_per_w, tau_s}), or None."""
    s = d.get("thermal")
    if s is None:
        return None
    if not isinstance(s, dict):
        raise InputError(w, "thermal", "expected a mapping")
    return {"r_th_c_per_w": _get(s, "r_th_c_per_w", w, prefix="thermal."),
            "tau_s": _get(s, "tau_s", w, "seconds", prefix="thermal.")}


# ---------------------------------------------------------------------------------------- recipe


@dataclass(frozen=True)
class Recipe:
    """The training recipe: global batch (sequences), sequence length (tokens), precision.

    Optimizer is Adam with fp32 master weights (Megatron-LM mixed precision); ``flash_attention``
    False models the unfused attention of pre-2022 Megatron (softmax materialised, s^2 memory);
    ``tp_comm_overlap`` False models Megatron before Transformer Engine's userbuffers (2023), where
    only the backward input-gradient TP collectives overlap (async all-reduce).
    """

    gbs: int
    seq_len: int
    precision: str = "bf16"
    flash_attention: bool = True
    tp_comm_overlap: bool = True

    def __post_init__(self):
        if self.gbs < 1:
            raise InputError("--gbs", "", f"must be >= 1, got {self.gbs}")
        if self.seq_len < 1:
            raise InputError("--seq-len", "", f"must be >= 1, got {self.seq_len}")
        if self.precision not in PRECISIONS:
            raise InputError("--precision", "", f"{self.precision!r} is not one of {', '.join(PRECISIONS)}")
