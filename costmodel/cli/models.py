"""``costmodel models``: the built-in model catalog."""
from __future__ import annotations

from rich.table import Table

from .. import report
from ..specs import list_models, load_model


def models():
    """The built-in model catalog with parameter counts."""
    tb = Table(title="Model catalog", header_style="bold")
    for col in ("name", "model", "layers", "hidden", "heads/kv", "FFN", "experts", "params (B)",
                "active (B)", "seq_len"):
        tb.add_column(col, justify="left" if col in ("name", "model") else "right")
    for name in list_models():
        s = load_model(name)
        tb.add_row(name, s.display_name, str(s.num_layers), str(s.hidden), f"{s.num_heads}/{s.num_kv_heads}",
                   f"{s.ffn_hidden}{' gated' if s.gated else ''}",
                   f"{s.num_experts} top-{s.topk}" if s.is_moe else "-",
                   f"{s.params() / 1e9:.2f}", f"{s.params(active=True) / 1e9:.2f}", str(s.seq_len))
    report.console().print(tb)
