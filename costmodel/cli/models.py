"""``costmodel models``: the built-in model catalog, or the models a user names (catalog or config.json)."""
from __future__ import annotations

import json
from typing import List, Optional

import typer
from rich.table import Table

from .. import report
from ..specs import ModelSpec, list_models, load_model
from ..specs.model_config import known_family
from .notes import note_plain_decoder


def attention_kind(s: ModelSpec) -> str:
    """mla (DeepSeek's latent attention), mha (a key/value head per query head), mqa (one shared) or gqa."""
    if s.is_mla:
        return "mla"
    return "mha" if s.num_kv_heads == s.num_heads else "mqa" if s.num_kv_heads == 1 else "gqa"


def model_record(s: ModelSpec) -> dict:
    """JSON-ready facts of one model: its shape (head_dim, vocab, a gated MLP and its activation among
    them; ``ffn_hidden`` the experts' width of an MoE model, ``dense_ffn_hidden`` that of its
    ``dense_layers``, 0 without any), ``params`` and ``active_params`` (per token: top-k
    routed experts; MTP modules excluded, their count in ``mtp_params``), the published total and
    ``read_as_plain_decoder`` (a config of a family the reader does not know: generic keys only)."""
    return {"name": s.name, "display_name": s.display_name, "layers": s.num_layers, "hidden": s.hidden,
            "heads": s.num_heads, "kv_heads": s.num_kv_heads, "head_dim": s.head_dim, "attention": attention_kind(s),
            "vocab": s.vocab, "gated": s.gated, "activation": s.activation, "ffn_hidden": s.ffn_hidden, "experts": s.num_experts, "topk": s.topk, "moe_layers": s.moe_layers,
            "shared_ffn_hidden": s.shared_ffn_hidden, "dense_layers": s.num_dense_layers if s.is_moe else s.num_layers,
            "dense_ffn_hidden": s.dense_mlp_width if (s.num_dense_layers or not s.is_moe) else 0, "params": s.params(), "active_params": s.params(active=True),
            "mtp_params": s.mtp_params(), "params_published": s.params_published, "seq_len": s.seq_len,
            "read_as_plain_decoder": not known_family(s), "source": s.source}


def models(as_json: bool = typer.Option(False, "--json", help="Print the catalog as JSON."),
           model: Optional[List[str]] = typer.Option(
               None, "--model", help="Show these models instead of the catalog: catalog names or Hugging Face "
                                     "config.json files (repeat the flag for several); their counts as predict reads them.")):
    """The built-in model catalog with parameter counts (or the models given with --model)."""
    specs = [load_model(name) for name in (model or list_models())]
    for name, s in zip(model or (), specs):
        note_plain_decoder(name, s)
    if as_json:
        typer.echo(json.dumps([model_record(s) for s in specs], indent=1))
        return
    tb = Table(title="Models" if model else "Model catalog", header_style="bold")
    for col in ("name", "model", "layers", "hidden", "heads/kv", "FFN", "experts", "params (B)",
                "active (B)", "seq_len"):
        tb.add_column(col, justify="left" if col in ("name", "model") else "right")
    for s in specs:
        att = " MLA" if s.is_mla else ""
        experts = (f"{s.num_experts} top-{s.topk}" + (f" +shared {s.shared_ffn_hidden}" if s.shared_ffn_hidden else "")
                   + (f", {s.num_dense_layers} dense layers of FFN {s.dense_mlp_width}" if s.num_dense_layers else "")
                   ) if s.is_moe else "-"
        tb.add_row(s.name, s.display_name, str(s.num_layers), str(s.hidden), f"{s.num_heads}/{s.num_kv_heads}{att}",
                   f"{s.ffn_hidden}{' gated' if s.gated else ''}", experts,
                   f"{s.params() / 1e9:.2f}", f"{s.params(active=True) / 1e9:.2f}", str(s.seq_len))
    report.console().print(tb)
