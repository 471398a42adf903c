"""Build every built-in profile: the ordered steps, the writer and the command line.

:func:`build_profiles` runs the steps of :mod:`.compute` (HBM, GEMM, attention), :mod:`.comm` (intra-
and inter-node collectives) and :mod:`.power` (power and thermal) on one :class:`Build`, in a fixed
order: later steps derive entries from earlier ones, and the order of insertion is the order of the
keys in the written YAML.
"""
from __future__ import annotations

import sys
from pathlib import Path

from costmodel.specs.profile import dump_profile

from ..primitives import round_sig
from . import comm, compute
from .data import DATA_REL, GENERATED_BY, GPUS, PROFILES, REPO, Datasheet, datasheet, load_public, path, rel
from .grouped_gemm import grouped_gemm_section
from .capped_gemm import capped_rate_check, flop_w_from_capped, read_fbgemm_bench, read_shape_times
from .msmf import read_msmf_table, sustained_tflops
from .power import build_power_thermal
from .variants import MAMF_PAIRS, VARIANTS, Variant, same_die_mamf


class Build:
    """The profiles being built and what the steps share.

    Attributes:
        D: the public data (:func:`.data.load_public`).
        sheet: gpu -> :class:`.data.Datasheet` (from ``hardware/gpus/<gpu>.yaml``).
        prof: gpu -> profile mapping in the ``hardware/README.md`` schema (provenance inputs as a set
            until :func:`build_profiles` finishes).
        summary: ``(kind, gpu, item, text)`` rows of the printed fit table.
        xs: ``(gpu, collective)`` -> parameter vector of an intra-node protocol fit (fixes later fits).
    """

    def __init__(self, D, gpus=GPUS):
        lost = [g for g in VARIANTS if g not in gpus]
        if lost:        # each step fills the profiles of the GPUs listed here, variants included
            raise ValueError(f"variant {lost[0]} (costmodel/fit/builtin/variants.py) is not among the GPUs built: "
                             "add it to GPUS in costmodel/fit/builtin/data.py")
        self.D = D
        self.sheet = {g: datasheet(g) for g in gpus}
        self.prof = {g: _skeleton(g, self.sheet[g]) for g in gpus}
        self.summary = []
        self.xs = {}

    def use(self, g, *keys):
        """Record inputs ``keys`` (of :data:`.data.F`) in ``g``'s provenance."""
        self.prof[g]["provenance"]["inputs"].update(rel(k) for k in keys)

    def note(self, g, text):
        """Append a provenance note (a cross-check, a caveat) to ``g``'s profile."""
        self.prof[g]["provenance"]["notes"].append(text)


def _skeleton(g: str, s: Datasheet) -> dict:
    """An empty profile of ``g`` with its provenance and the datasheet values its fits use."""
    sheet = dict(peak_flops_per_s={k: round_sig(v) for k, v in s.peak.items()}, hbm_bytes_per_s=round_sig(s.hbm),
                 num_sms=s.sms, intra_link_bytes_per_s=round_sig(s.link) if s.link else None, source=s.source)
    return dict(gpu=g, provenance=dict(generated_by=GENERATED_BY, inputs=set(), notes=[], datasheet=sheet),
                gemm={}, hbm={}, attention={}, comm=dict(intra_node={}, inter_node={}))


def build_profiles(D=None):
    """Fit everything and return ``(profiles, summary)``.

    Args:
        D: output of :func:`.data.load_public` (loaded when None).
    Returns:
        profiles: dict gpu stem -> profile dict in the ``hardware/README.md`` schema.
        summary: list of (kind, gpu, item, text) rows for the printed fit table.
    """
    b = Build(D or load_public())
    compute.fit_hbm(b)
    a100 = compute.fit_gemm_16bit(b)
    compute.fit_gemm_fp8(b)
    eta_mi = compute.derive_gemm(b, a100)
    compute.fit_attention(b, a100, eta_mi)
    comm.intra_h100(b)
    comm.intra_h200(b)
    comm.intra_a100(b)
    comm.intra_b200(b)
    comm.intra_derived(b)
    for g, v in VARIANTS.items():
        if g in b.prof:
            _derive_variant(b, g, v)
    comm.intra_gb200(b)
    comm.fit_inter(b)
    _grouped_gemm(b)
    _power_thermal(b)
    _capped_gemm_power(b)
    _mamf_power_check(b)
    _msmf_check(b)
    for g in b.prof:
        pv = b.prof[g]["provenance"]
        pv["inputs"] = sorted(pv["inputs"])
        pv["notes"] = ["Fitted to microbenchmarks only; published training-throughput tables are not used.",
                       "derived_from 'X:path' means the entry copies profile X's entry at that dotted path."
                       ] + pv["notes"]
    return b.prof, b.summary


def _derive_variant(b: Build, g: str, v: Variant) -> None:
    """``g``'s gemm, hbm, attention and intra-node comm entries copied from ``v.source`` (fitted
    earlier), each marked ``derived_from`` with the reason; attention kernels limited to
    ``v.kernels`` (inter-node: :func:`.comm.fit_inter`).  The GEMM entries keep the source's tile and
    wave model with the variant's own SM count."""
    src, why = v.source, v.why

    def copy(entry, path):
        e = {k: v for k, v in entry.items() if k not in ("fit", "note", "derived_from")}
        return dict(e, derived_from=f"{src}:{path}", note=why)
    p, q = b.prof[g], b.prof[src]
    p["gemm"] = {dt: dict(copy(e, f"gemm.{dt}"), num_sms=b.sheet[g].sms) for dt, e in q["gemm"].items()
                 if dt in b.sheet[g].peak}
    p["hbm"] = copy(q["hbm"], "hbm")
    p["attention"] = copy(q["attention"], "attention")
    if v.kernels is not None and "kernels" in p["attention"]:
        p["attention"]["kernels"] = {k: e for k, e in p["attention"]["kernels"].items() if k in v.kernels}
    p["comm"]["intra_node"] = {coll: copy(e, f"comm.intra_node.{coll}") for coll, e in q["comm"]["intra_node"].items()}
    b.summary.append(("derived", g, "gemm/hbm/attention/comm", f"from {src}"))


#: a part whose GEMMs were timed under its own power limit: gpu -> (input key of .data.F, benchmark
#: kinds of the fitted BF16 rows and of the FP8 cross-check) (costmodel/fit/builtin/capped_gemm.py)
CAPPED_GEMMS = {"h100-hbm2e-96gb": ("fbgemm_500w", "bf16", "fp8 row gemm only")}


def _capped_gemm_power(b: Build) -> None:
    """``power.flop_w`` of the parts in :data:`CAPPED_GEMMS` from their BF16 GEMMs timed at their own
    limit (:func:`.capped_gemm.flop_w_from_capped`), replacing the same-die value; the FP8 rows of the
    same benchmark are a cross-check of the result."""
    for g, (key, kind16, kind8) in CAPPED_GEMMS.items():
        if g not in b.prof:
            continue
        p, sheet = b.prof[g], b.sheet[g]
        pw, cap = p["power"], float(sheet.tdp)
        rows = read_fbgemm_bench(path(key))
        flop_w, rec = flop_w_from_capped([r for r in rows if r["kind"] == kind16], p["gemm"]["bf16"], pw,
                                         sheet.peak["bf16"], sheet.hbm, cap)
        old = pw["flop_w"]
        pw["flop_w"] = round_sig(flop_w, 4)
        check = capped_rate_check([r for r in rows if r["kind"] == kind8], p["gemm"]["fp8"], pw, sheet.peak["fp8"], cap)
        check16 = capped_rate_check(read_shape_times(path(key)), p["gemm"]["bf16"], pw, sheet.peak["bf16"], cap)
        rec = dict(rec, inputs=[rel(key)], replaced_w=old,
                   fp8_check=dict(note=f"not fitted: FBGEMM's '{kind8}' rows at the same limit against the profile's "
                                       "FP8 GEMM held under it", rows=check),
                   bf16_check=dict(note="not fitted: float8_experimental's Llama-70B shapes (the same file; GPU not "
                                        "named) against the profile's BF16 GEMM held under the limit", rows=check16))
        pw.setdefault("fit", {})["flop_w"] = rec
        pw["basis"] = dict(pw.get("basis", {}), flop_w="fitted")
        pw["note"] = (f"flop_w FITTED to this part's BF16 GEMMs timed at its {cap:.0f} W limit ({rel(key)}; "
                      f"{old:.1f} W by the same-die rule before); the other terms "
                      + pw.get("note", "").replace("DERIVED: no power data for this GPU in the public set; ", "DERIVED: ")
                      .replace("flop_w, spin_w x", "spin_w x"))
        pw["derived_from"] = pw.get("derived_from", "") + f"; flop_w fitted at the part's own {cap:.0f} W limit"
        b.use(g, key)
        worst = max(abs(c["rel_err"]) for c in check)
        worst16 = max(abs(c["rel_err"]) for c in check16)
        b.summary.append(("power", g, "flop_w (capped GEMMs)", f"{flop_w:.0f} W from {len(rec['per_shape'])} BF16 "
                                                               f"GEMMs at {cap:.0f} W (same-die {old:.0f}); checks: FP8 "
                                                               f"max |err| {worst:.1%}, BF16 Llama-70B shapes "
                                                               f"{worst16:.1%}"))


#: parts whose MoE grouped GEMM runs as Transformer Engine's multi-stream cuBLAS GEMMs on the GH100 die
#: measured by TE (costmodel/fit/builtin/grouped_gemm.py): the H100 fit, the others derived from it
GROUPED_GEMM_SOURCE = "h100-sxm-80gb"
GROUPED_GEMM_DERIVED = ("h200-sxm-141gb", "h800-sxm-80gb", "h100-pcie-80gb", "h100-nvl-94gb", "h100-hbm2e-96gb",
                        "gh200-96gb")


def _grouped_gemm(b: Build) -> None:
    """``moe.grouped_gemm_group_s`` of the Hopper parts: fitted on the H100 against its own BF16 GEMM
    fit (:func:`.grouped_gemm.grouped_gemm_section`), copied to the parts of the same die and software
    path (a launch and schedule cost per group, not a rate of the die's clocks or memory)."""
    g = GROUPED_GEMM_SOURCE
    if g not in b.prof:
        return
    p, sheet = b.prof[g], b.sheet[g]
    sec = grouped_gemm_section(path("te_grouped"), p["gemm"]["bf16"], sheet.peak["bf16"], sheet.hbm,
                               float(p["hbm"]["efficiency"]), rel("te_grouped"))
    p["moe"] = sec
    b.use(g, "te_grouped")
    b.summary.append(("moe", g, "grouped_gemm_group_s", f"{sec['grouped_gemm_group_s'] * 1e6:.2f} us per group "
                                                         f"(TE multi-stream grouped GEMM, {len(sec['fit']['per_shape'])} "
                                                         "shapes)"))
    for v in GROUPED_GEMM_DERIVED:
        if v in b.prof:
            b.prof[v]["moe"] = dict(grouped_gemm_group_s=sec["grouped_gemm_group_s"], derived_from=f"{g}:moe",
                                    note="same GH100 die and Transformer Engine multi-stream grouped GEMM: a per-group "
                                         "launch and schedule cost, carried over unscaled")


def _power_thermal(b: Build) -> None:
    """``power:`` and ``thermal:`` of every GPU (:func:`.power.build_power_thermal`)."""
    sections, psum, pin = build_power_thermal(list(b.prof))
    for g, sec in sections.items():
        b.prof[g]["power"] = sec["power"]
        b.prof[g]["thermal"] = sec["thermal"]
        b.prof[g]["provenance"]["inputs"].update(pin[g])
    b.summary += psum


def _msmf_check(b: Build) -> None:
    """Cross-check of the burst premise (costmodel/fit/builtin/msmf.py): the B200's MAMF burst held at its
    1000 W limit by its fitted power coefficients, against its measured MSMF, as a provenance note."""
    g = "b200-sxm-180gb"
    if g not in b.prof:
        return
    mamf = next(r["mamf_flops"] for r in b.D["mamf"] if r["dtype"] == "bf16" and r["accelerator"] == "NVIDIA B200 SXM")
    msmf = read_msmf_table(path("msmf"))["NVIDIA B200 SXM"]["msmf"]
    pred = sustained_tflops(b.prof[g]["power"], mamf / 1e12, b.sheet[g].peak["bf16"] / 1e12, b.sheet[g].tdp)
    b.note(g, f"cross-check of the burst premise: MAMF's B200 BF16 burst ({mamf / 1e12:.0f} TFLOP/s) held at the "
              f"{b.sheet[g].tdp:.0f} W limit by this profile's power coefficients runs at {pred:.0f} TFLOP/s; "
              f"mamf-finder's sustained MSMF is {msmf:.0f} ({pred / msmf - 1:+.1%}) and the B200 note's sustained "
              "8192^3 GEMMs 1178-1331 (hardware/profiles/data/mlengineering_mamf_vs_msmf_h200_b200.md, b200_note)")
    b.use(g, "msmf")
    b.summary.append(("power", g, "MSMF check", f"predicted {pred:.0f} vs measured {msmf:.0f} TFLOP/s "
                                                f"({pred / msmf - 1:+.1%})"))


def _mamf_power_check(b: Build) -> None:
    """Cross-check of the same-die power rule: each variant's measured best GEMM (MAMF) against the
    one its power limit and coefficients predict from its source's (:func:`.variants.mamf_under_cap`),
    as a provenance note."""
    for g, src, acc_g, acc_src in MAMF_PAIRS:
        if g not in b.prof or src not in b.prof:
            continue
        rows = {r["accelerator"]: r for r in b.D["mamf"] if r["dtype"] == "bf16"}
        rg, rs = rows[acc_g], rows[acc_src]
        burst = not b.prof[src]["gemm"]["bf16"].get("power_limited", True)
        pred = same_die_mamf(b.prof[src]["gemm"]["bf16"], b.prof[src]["power"], b.sheet[src].tdp,
                             b.sheet[src].peak["bf16"], rs["mamf_flops"], b.prof[g]["power"], b.sheet[g].tdp,
                             b.sheet[g].peak["bf16"])
        err = pred / rg["mamf_flops"] - 1
        how = ("as a burst at the maximum clock, which no limit throttles (this die's GEMM fit is power_limited: "
               "false)" if burst else f"at {b.sheet[src].tdp:.0f} W) and this profile's power coefficients under its "
               f"{b.sheet[g].tdp:.0f} W limit")
        b.note(g, f"cross-check of the same-die power rule: {acc_src}'s measured best BF16 GEMM ({rs['mamf_flops'] / 1e12:.1f} "
                  f"TFLOP/s{')' if burst else ''} {how} predicts {pred / 1e12:.1f} TFLOP/s on {acc_g}; MAMF measures "
                  f"{rg['mamf_flops'] / 1e12:.1f} ({err:+.1%}) (ml-engineering MAMF table; "
                  f"{rg.get('notes') or 'no power setting recorded'})")
        b.use(g, "mamf")
        b.summary.append(("power", g, "MAMF check", f"predicted {pred / 1e12:.1f} vs measured {rg['mamf_flops'] / 1e12:.1f} "
                                                    f"TFLOP/s ({err:+.1%}) from {src}"))


def write_profiles(profiles, outdir=PROFILES):
    """Write each profile to ``outdir/<gpu>.yaml``.

    Args:
        profiles: from :func:`build_profiles`.  outdir: directory (created if missing).
    Returns:
        list of written paths.
    """
    outdir = Path(outdir)
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for g, p in profiles.items():
        path = outdir / f"{g}.yaml"
        head = (f"# {g}: fitted cost-model parameters. GENERATED by `{GENERATED_BY}` from the public microbenchmarks\n"
                f"# under {DATA_REL}/ (each file starts with its source). Do not edit by hand.\n")
        path.write_text(dump_profile(p, head))
        paths.append(path)
    return paths


def main(argv=None):
    """``python -m costmodel.fit.builtin [OUTDIR]``: fit, write ``hardware/profiles/*.yaml`` (or
    ``OUTDIR/*.yaml``), print the fit table.  Returns 0."""
    argv = sys.argv[1:] if argv is None else argv
    out = Path(argv[0]) if argv else PROFILES
    profiles, summary = build_profiles()
    for written in write_profiles(profiles, out):
        print(f"wrote {written.relative_to(REPO) if written.is_relative_to(REPO) else written}")
    for kind, g, item, text in summary:
        print(f"{kind:9s} {g:15s} {item:15s} {text}")
    return 0
