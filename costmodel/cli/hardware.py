"""``costmodel hardware``: the GPUs and clusters of the catalog, their profiles and sources."""
from __future__ import annotations

import typer
from rich.table import Table

from .. import report
from ..errors import InputError
from ..specs import list_clusters, list_gpus, load_cluster, load_gpu, load_profile


def hardware(show_sources: bool = typer.Option(True, "--sources/--no-sources", help="Print each number's source.")):
    """GPUs and clusters of the catalog, with the numbers the model uses and their sources."""
    out = report.console()
    tb = Table(title="GPUs (datasheet) and fitted profiles", header_style="bold")
    for col in ("gpu", "name", "bf16/fp16 TFLOP/s", "fp8 TFLOP/s", "HBM GiB (CUDA)", "HBM TB/s", "TDP W", "SMs",
                "GEMM eta_max", "HBM eff", "attention eff (8k)", "power model", "R_th C/W", "profile"):
        tb.add_column(col)
    sources, prov = [], []
    for key in list_gpus():
        g = load_gpu(key)
        try:
            p = load_profile(key)
            d = "bf16" if "bf16" in p.gemm else next(iter(p.gemm))
            eta, hbm_eff, pfile = f"{p.gemm[d].eta_max:.3f}", f"{p.hbm_efficiency:.3f}", p.path
            # fused attention fwd + bwd at an 8k sequence, per fitted kernel (profile attention.kernels)
            attn = ", ".join(f"{k} {float(p.attention_efficiency(k, 8192)):.2f}" for k in sorted({"fa2", *p.attention_kernels}))
            pfile = p.key
            pw, th = p.raw.get("power") or {}, p.raw.get("thermal") or {}
            power = (f"{p.power.idle_w:.0f} + {p.power.coeff_w['flop']:.0f} u W, gamma {p.power.gamma:.2f}"
                     if p.power else "none")
            rth = f"{p.thermal.r_th_c_per_w:.3f}" if p.thermal else "-"
            for sec, d in (("power", pw), ("thermal", th)):
                if d:
                    prov.append((key, sec, f"derived: {d['derived_from']}" if d.get("derived_from")
                                 else "fitted (see the profile's fit: section)"))
        except InputError as e:
            eta = hbm_eff = power = rth = attn = "-"
            pfile = f"none ({e.message})"
        pk = g.peak_flops.get("bf16", g.peak_flops.get("fp16"))
        tb.add_row(key, g.name, f"{pk / 1e12:.1f}",
                   f"{g.peak_flops['fp8'] / 1e12:.1f}" if "fp8" in g.peak_flops else "-",
                   f"{g.capacity_bytes / 2**30:.1f}", f"{g.hbm_bytes_per_s / 1e12:.2f}", f"{g.tdp_w:.0f}",
                   str(g.num_sms), eta, hbm_eff, attn, power, rth, pfile)
        sources += [(key, f, s) for f, s in g.sources.items()]
    out.print(tb)
    tv = Table(title="Power and thermal parameters: fitted or derived", header_style="bold")
    for col in ("gpu", "section", "provenance"):
        tv.add_column(col)
    for row in prov:
        tv.add_row(*row)
    out.print(tv)
    tc = Table(title="Clusters", header_style="bold")
    for col in ("cluster", "GPUs", "intra-node", "inter-node per node", "node power kW", "cooling"):
        tc.add_column(col)
    for key in list_clusters():
        c = load_cluster(key)
        tc.add_row(key, f"{c.nodes} x {c.gpus_per_node} {c.gpu.key}",
                   f"{c.intra_fabric} {c.intra_bytes_per_s / 1e9:.0f} GB/s/GPU, {c.intra_latency_s * 1e6:.1f} us",
                   f"{c.nics_per_node} x {c.nic_bytes_per_s * 8 / 1e9:.0f} Gb/s {c.inter_fabric}, "
                   f"{c.inter_latency_s * 1e6:.1f} us",
                   f"{c.node_power_budget_w / 1e3:.1f}", f"{c.cooling.type}, inlet {c.cooling.inlet_temp_c:.0f} C")
        sources += [(key, f, s) for f, s in c.sources.items()]
    out.print(tc)
    if show_sources:
        ts = Table(title="Sources", header_style="bold")
        for col in ("file", "field", "source"):
            ts.add_column(col)
        for row in sources:
            ts.add_row(*map(str, row))
        out.print(ts)
