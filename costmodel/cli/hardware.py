"""``costmodel hardware``: the GPUs and clusters of the catalog, their profiles and sources."""
from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from .. import report
from ..errors import InputError
from ..specs import list_clusters, list_gpus, load_cluster, load_gpu, load_profile


def _tier_text(t: dict) -> str:
    """One switch tier as the cluster table shows it: nodes, downlink:uplink ratio, routing."""
    route = f" ECMP x{t['flows_per_nic']}" if t["routing"] == "ecmp" else ""
    return f", {t['name']} {t['nodes']} nodes {t['oversubscription']:g}:1{route}{' rails' if t['rails'] else ''}"


def _gpu_record(key: str) -> dict:
    """One GPU (a catalog name or a GPU file): datasheet values, the fitted profile's headline numbers,
    power/thermal provenance; ``gpu`` the key a cluster record's ``gpu`` names, ``path`` its file."""
    g = load_gpu(key, flag="--gpu")
    pk = g.peak_flops.get("bf16", g.peak_flops.get("fp16"))
    # ``gpu`` is the key a cluster record names it by (a GPU file's stem), ``path`` the file read
    rec = dict(gpu=g.key, path=g.path or None, name=g.name, vendor=g.vendor, peak_16bit_tflops=pk / 1e12,
               peak_16bit_dtype="bf16" if "bf16" in g.peak_flops else "fp16",
               peak_fp8_tflops=g.peak_flops["fp8"] / 1e12 if "fp8" in g.peak_flops else None,
               peak_fp4_tflops=g.peak_flops["fp4"] / 1e12 if "fp4" in g.peak_flops else None,
               hbm_gib=g.capacity_bytes / 2**30, hbm_tb_per_s=g.hbm_bytes_per_s / 1e12, tdp_w=g.tdp_w,
               power_limit_min_w=g.power_limit_min_w, slowdown_temp_c=g.slowdown_temp_c,
               shutdown_temp_c=g.shutdown_temp_c, num_sms=g.num_sms, sources=dict(g.sources))
    from ..specs.profile import has_builtin_profile
    if not has_builtin_profile(g.key):
        # a GPU of one's own has no built-in profile: a near catalog name would only mislead
        return dict(rec, profile=None, profile_error=f"no built-in profile for {g.key}: fit one (costmodel calibrate fit "
                    f"... --cluster CLUSTER --base A_CATALOG_GPU) and give it as --profile")
    try:
        p = load_profile(g.key)
    except InputError as e:
        return dict(rec, profile=None, profile_error=e.message)
    d = "bf16" if "bf16" in p.gemm else next(iter(p.gemm))
    raw = {sec: p.raw.get(sec) or {} for sec in ("power", "thermal")}
    rec.update(profile=p.key, gemm_eta_max=p.gemm[d].eta_max, hbm_efficiency=p.hbm_efficiency,
               # fused attention fwd + bwd at an 8k sequence, per fitted kernel (profile attention.kernels)
               attention_efficiency_8k={k: float(p.attention_efficiency(k, 8192))
                                        for k in sorted({"fa2", *p.attention_kernels})},
               idle_w=p.power.idle_w if p.power else None, flop_w=p.power.coeff_w["flop"] if p.power else None,
               gamma=p.power.gamma if p.power else None, r_th_c_per_w=p.thermal.r_th_c_per_w if p.thermal else None,
               power_basis=dict(p.power.basis) if p.power else None,
               provenance={sec: (f"derived: {d['derived_from']}" if d.get("derived_from")
                                 else "fitted (see the profile's fit: section)") for sec, d in raw.items() if d})
    return rec


def _cluster_record(key: str) -> dict:
    c = load_cluster(key)
    return dict(cluster=key, name=c.name, gpu=c.gpu.key, nodes=c.nodes, gpus_per_node=c.gpus_per_node,
                tdp_w=c.gpu.tdp_w,
                intra_fabric=c.intra_fabric, intra_gb_per_s_per_gpu=c.intra_bytes_per_s / 1e9,
                nvlink_domain_gpus=c.scale_up_gpus,
                fabric_tiers=[dict(name=t.name, nodes=t.nodes, oversubscription=t.oversubscription,
                                   latency_us=round(t.latency_s * 1e6, 6), routing=t.routing,
                                   flows_per_nic=t.ecmp_flows_per_nic, rails=t.rails) for t in c.tiers],
                intra_latency_us=round(c.intra_latency_s * 1e6, 6), nics_per_node=c.nics_per_node,
                nic_gbit_per_s=c.nic_bytes_per_s * 8 / 1e9, inter_fabric=c.inter_fabric,
                inter_latency_us=round(c.inter_latency_s * 1e6, 6), sharp=c.sharp,
                host_pcie_gb_per_s_per_gpu=None if c.host_pcie_bytes_per_s is None else c.host_pcie_bytes_per_s / 1e9,
                host_memory_gb_per_s=None if c.host_memory_bytes_per_s is None else c.host_memory_bytes_per_s / 1e9,
                node_power_kw=c.node_power_budget_w / 1e3,
                node_other_power_kw=c.node_other_power_w / 1e3, gpu_power_limit_w=c.power_limit_w,
                cooling=c.cooling.type,
                inlet_temp_c=c.cooling.inlet_temp_c, sources=dict(c.sources))


def _f(x, fmt: str) -> str:
    return "-" if x is None else format(x, fmt)


def hardware(show_sources: bool = typer.Option(True, "--sources/--no-sources", help="Print each number's source."),
             as_json: bool = typer.Option(False, "--json", help="Print one JSON object: gpus and clusters."),
             cluster: Optional[str] = typer.Option(None, "--cluster", help="Show this cluster (a catalog name or "
                                                   "your cluster YAML) and its GPU only, as the model reads them."),
             gpu: Optional[str] = typer.Option(None, "--gpu", help="Show this GPU (a catalog name or your GPU "
                                               "YAML) only, as the model reads it.")):
    """GPUs and clusters of the catalog, with the numbers the model uses and their sources (--cluster or
    --gpu: one file of your own, as the model reads it)."""
    if cluster is not None or gpu is not None:
        mine = load_cluster(cluster) if cluster is not None else None
        clusters = [_cluster_record(cluster)] if cluster is not None else []
        gpus = [_gpu_record(gpu if gpu is not None else (mine.gpu.path or mine.gpu.key))]
    else:
        gpus = [_gpu_record(k) for k in list_gpus()]
        clusters = [_cluster_record(k) for k in list_clusters()]
    if as_json:
        strip = (lambda r: r) if show_sources else (lambda r: {k: v for k, v in r.items() if k != "sources"})
        print(report.json_text(dict(gpus=[strip(r) for r in gpus], clusters=[strip(r) for r in clusters])))
        return
    out = report.console(min_width=120)      # narrower terminals wrap the lines rather than cut every cell
    tb = Table(title="GPUs (datasheet) and fitted profiles", header_style="bold")
    for col in ("gpu", "bf16/fp16 TFLOP/s", "fp8 TFLOP/s", "fp4 TFLOP/s", "HBM GiB (CUDA)", "HBM TB/s", "TDP W", "SMs",
                "GEMM eta_max", "HBM eff", "attention eff (8k)", "power W (idle + flop u)", "R_th C/W"):
        tb.add_column(col, no_wrap=col == "gpu", overflow="fold")    # the id users type is never cut
    prov = []
    for r in gpus:
        attn = ", ".join(f"{k} {v:.2f}" for k, v in (r.get("attention_efficiency_8k") or {}).items()) or "-"
        power = f"{r['idle_w']:.0f} + {r['flop_w']:.0f} u" if r.get("idle_w") is not None else "none"
        # a GPU without bf16 (V100) says its 16-bit peak is fp16's
        p16 = f"{r['peak_16bit_tflops']:.1f}" + (" (fp16 only)" if r["peak_16bit_dtype"] == "fp16" else "")
        tb.add_row(r["gpu"], p16, _f(r["peak_fp8_tflops"], ".1f"),
                   _f(r["peak_fp4_tflops"], ".1f"), f"{r['hbm_gib']:.1f}",
                   f"{r['hbm_tb_per_s']:.2f}", f"{r['tdp_w']:.0f}", str(r["num_sms"]), _f(r.get("gemm_eta_max"), ".3f"),
                   _f(r.get("hbm_efficiency"), ".3f"), attn, power, _f(r.get("r_th_c_per_w"), ".3f"))
        prov += [(r["gpu"], sec, text) for sec, text in (r.get("provenance") or {}).items()]
        if r.get("profile") is None:
            prov.append((r["gpu"], "profile", f"none ({r['profile_error']})"))
    out.print(tb)
    tv = Table(title="Power and thermal parameters: fitted or derived", header_style="bold")
    for col in ("gpu", "section", "provenance"):
        tv.add_column(col, no_wrap=col == "gpu", overflow="fold")
    for row in prov:
        tv.add_row(*row)
    out.print(tv)
    tc = Table(title="Clusters", header_style="bold")
    for col in ("cluster", "GPUs", "intra-node", "inter-node per node", "node power kW", "cooling"):
        tc.add_column(col, no_wrap=col == "cluster", overflow="fold")
    for r in clusters:
        tc.add_row(r["cluster"], f"{r['nodes']} x {r['gpus_per_node']} {r['gpu']}",
                   f"{r['intra_fabric']} {r['intra_gb_per_s_per_gpu']:.0f} GB/s/GPU, {r['intra_latency_us']:.1f} us"
                   + (f", {r['nvlink_domain_gpus']}-GPU domain" if r['nvlink_domain_gpus'] != r['gpus_per_node'] else ""),
                   f"{r['nics_per_node']} x {r['nic_gbit_per_s']:.0f} Gb/s {r['inter_fabric']}, "
                   f"{r['inter_latency_us']:.1f} us" + "".join(_tier_text(t) for t in r['fabric_tiers'])
                   + (", SHARP" if r["sharp"] else "")
                   + (f"; PCIe {r['host_pcie_gb_per_s_per_gpu']:.0f} GB/s/GPU" if r["host_pcie_gb_per_s_per_gpu"] else ""),
                   f"{r['node_power_kw']:.1f}" + (f"; GPUs held to {r['gpu_power_limit_w']:.0f} W"
                                                   if r["gpu_power_limit_w"] < r["tdp_w"] else ""),
                   f"{r['cooling']}, inlet {r['inlet_temp_c']:.0f} C")
    out.print(tc)
    if show_sources:
        ts = Table(title="Sources", header_style="bold")
        for col in ("file", "field", "source"):
            ts.add_column(col, no_wrap=col == "file", overflow="fold")
        for r in gpus + clusters:
            for f, s in r["sources"].items():
                ts.add_row(r.get("gpu") if "cluster" not in r else r["cluster"], f, str(s))
        out.print(ts)
