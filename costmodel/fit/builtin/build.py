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
from .data import DATA_REL, GENERATED_BY, GPUS, PROFILES, REPO, Datasheet, datasheet, load_public, rel
from .power import build_power_thermal


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
    _derive_variant(b, "a100-sxm-40gb", "a100-sxm-80gb",
                    "A100 40GB: the 80GB part's GA100 chip, SMs, clocks, NVLink 3 and NVSwitch; no public 40GB "
                    "microbenchmark is in the set. GEMM, attention and collectives carry over; the HBM efficiency "
                    "is applied to the 40GB part's own datasheet bandwidth (1,555 GB/s, HBM2)")
    _derive_variant(b, "a800-sxm-80gb", "a100-sxm-80gb",
                    "A800: the A100 80GB with NVLink cut to 400 GB/s; GEMM, HBM and attention carry over, and the "
                    "collective efficiencies are applied to its own NVLink bandwidth (200 GB/s per direction)")
    _derive_variant(b, "h800-sxm-80gb", "h100-sxm-80gb",
                    "H800: the H100 SXM5 with NVLink cut to 400 GB/s; GEMM, HBM and attention carry over, and the "
                    "collective efficiencies are applied to its own NVLink bandwidth (200 GB/s per direction)")
    comm.fit_inter(b)
    _power_thermal(b)
    for g in b.prof:
        pv = b.prof[g]["provenance"]
        pv["inputs"] = sorted(pv["inputs"])
        pv["notes"] = ["Fitted to microbenchmarks only; published training-throughput tables are not used.",
                       "derived_from 'X:path' means the entry copies profile X's entry at that dotted path."
                       ] + pv["notes"]
    return b.prof, b.summary


def _derive_variant(b: Build, g: str, src: str, why: str) -> None:
    """``g``'s gemm, hbm, attention and intra-node comm entries copied from ``src`` (fitted earlier),
    each marked ``derived_from`` with the reason (inter-node: :func:`.comm.fit_inter`)."""
    def copy(entry, path):
        e = {k: v for k, v in entry.items() if k not in ("fit", "note", "derived_from")}
        return dict(e, derived_from=f"{src}:{path}", note=why)
    p, q = b.prof[g], b.prof[src]
    p["gemm"] = {dt: copy(e, f"gemm.{dt}") for dt, e in q["gemm"].items()}
    p["hbm"] = copy(q["hbm"], "hbm")
    p["attention"] = copy(q["attention"], "attention")
    p["comm"]["intra_node"] = {coll: copy(e, f"comm.intra_node.{coll}") for coll, e in q["comm"]["intra_node"].items()}
    b.summary.append(("derived", g, "gemm/hbm/attention/comm", f"from {src}"))


def _power_thermal(b: Build) -> None:
    """``power:`` and ``thermal:`` of every GPU (:func:`.power.build_power_thermal`)."""
    sections, psum, pin = build_power_thermal(list(b.prof))
    for g, sec in sections.items():
        b.prof[g]["power"] = sec["power"]
        b.prof[g]["thermal"] = sec["thermal"]
        b.prof[g]["provenance"]["inputs"].update(pin[g])
    b.summary += psum


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
    for path in write_profiles(profiles, out):
        print(f"wrote {path.relative_to(REPO) if path.is_relative_to(REPO) else path}")
    for kind, g, item, text in summary:
        print(f"{kind:9s} {g:15s} {item:15s} {text}")
    return 0
