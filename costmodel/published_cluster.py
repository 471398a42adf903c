"""Which cluster a published run's CSV row ran on (README 'Validate'): the cluster ``validate --cluster``
names, else the catalog system its interconnect note names, else the catalog's reference cluster of its
GPU, an assumption the row's report lists."""
from __future__ import annotations

import functools
import re

from .specs import list_clusters, load_cluster

# catalog systems the dev sets' interconnect notes name in words
_NOTE_SYSTEMS = (("Selene", "dgx-a100"), ("Jean Zay A100", "jean-zay-a100"), ("V100", "v100-4x"),
                 ("DGX H100", "dgx-h100"))
#: the reference cluster of each dev-set GPU name (8-GPU NVSwitch nodes, 8 NICs per node; GB200: the NVL72
#: rack, trays of 4 GPUs in one 72-GPU NVLink domain); any other catalog GPU's is the first catalog cluster
#: (by name) built of it
GPU_CLUSTERS = {"A100-SXM-80GB": "dgx-a100", "A100-SXM-40GB": "dgx-a100-40gb", "A800": "hgx-a800",
                "H100-SXM-80GB": "dgx-h100", "H100-HBM2e-96GB": "grand-teton-h100", "H800": "hgx-h800",
                "H200-SXM-141GB": "hgx-h200", "B200": "dgx-b200", "GB200": "gb200-nvl72",
                "MI300X": "azure-nd-mi300x", "V100-32GB": "v100-4x"}


def _words(name: str) -> str:
    """``name`` as a pattern whose hyphens match a hyphen, an underscore or a space (``DGX H100``)."""
    return r"[-_ ]".join(map(re.escape, re.split(r"[-_ ]", name)))


@functools.lru_cache(maxsize=None)
def _catalog_cluster_names() -> re.Pattern:
    """The catalog's cluster file stems as whole words in any case, their hyphens also written as spaces or
    underscores (``DGX-A100``, ``AWS P5``; read once: validate asks for every row)."""
    names = sorted(list_clusters(), key=len, reverse=True)     # the longest first: dgx-a100-40gb before dgx-a100
    return re.compile(r"(?<![\w-])(" + "|".join(map(_words, names)) + r")(?![\w-])", re.IGNORECASE)


@functools.lru_cache(maxsize=None)
def _cluster_stems() -> dict:
    """The catalog's cluster file stems by their lower-case, hyphenated spelling (read once)."""
    return {re.sub(r"[-_ ]", "-", c.lower()): c for c in list_clusters()}


def _note_clusters(note: str) -> list:
    """(what the note says, catalog cluster) of each catalog cluster or dev-set system the note names."""
    stem = _cluster_stems()
    named = [(m, stem[re.sub(r"[-_ ]", "-", m.lower())]) for m in _catalog_cluster_names().findall(note)]
    return named + [(key, name) for key, name in _NOTE_SYSTEMS
                    if re.search(rf"(?<![\w-]){_words(key)}(?![\w-])", note, re.IGNORECASE)]


@functools.lru_cache(maxsize=None)
def gpu_of(cluster: str) -> str:
    """The GPU file stem of a catalog cluster (or cluster file), read once."""
    return load_cluster(cluster).gpu.key


@functools.lru_cache(maxsize=None)
def reference_cluster(gpu: str) -> str | None:
    """The reference cluster of a gpu cell: a dev-set name of :data:`GPU_CLUSTERS` (any case) or a catalog
    GPU file stem (``a100-sxm-80gb``, ``b300-sxm-288gb``), whose reference is the first catalog cluster of
    that GPU; None when neither."""
    g = gpu.strip().lower()
    for name, ref in GPU_CLUSTERS.items():
        if g in (name.lower(), gpu_of(ref)):
            return ref
    return next((c for c in sorted(list_clusters()) if gpu_of(c) == g), None)


def _unknown_gpu(gpu: str) -> str:
    return (f"no catalog GPU {gpu!r} with a catalog cluster (known: {', '.join(GPU_CLUSTERS)}, or a GPU file stem "
            "of `costmodel hardware`; a GPU of your own: validate --cluster YOUR_CLUSTER.yaml)")


def row_cluster(r: dict, cluster_arg: str | None = None) -> tuple:
    """``(cluster, None, assumed)`` of the cluster a row ran on: ``cluster_arg`` (``validate --cluster``, a
    catalog name or a cluster file) when given, else a catalog system the interconnect note names, else
    the reference cluster of its GPU (``assumed`` then says so; () otherwise); ``(None, why, ())`` when
    the gpu cell is empty, names no GPU of a catalog cluster, or names another GPU than the cluster's or
    the note's system (the row is skipped, never predicted on another GPU).

    Raises:
        InputError: ``cluster_arg`` is not a catalog cluster or a readable cluster file.
    """
    gpu = (r.get("gpu") or "").strip()
    if not gpu:
        return None, "gpu is empty", ()
    if cluster_arg:
        mine = load_cluster(cluster_arg).gpu
        ref = reference_cluster(gpu)
        if gpu.lower() in (mine.key, mine.name.lower()) or (ref is not None and gpu_of(ref) == mine.key):
            return cluster_arg, None, ()
        return None, f"gpu {gpu!r} is not --cluster {cluster_arg}'s GPU ({mine.name})", ()
    ref = reference_cluster(gpu)
    if ref is None:
        return None, _unknown_gpu(gpu), ()
    note = r.get("interconnect_note", "")
    # a catalog cluster the note names (its file stem as a word), else the systems it names; a system
    # of the row's GPU wins over another the note mentions in passing ("vs V100 in prior work")
    named = _note_clusters(note)
    for key, name in named:
        if gpu_of(name) == gpu_of(ref):
            return name, None, ()
    # a note that also names the row's own GPU ("H100 nodes that replaced our V100 cluster") mentions the
    # other system in passing; one that names only another GPU's system contradicts the gpu cell
    own = re.split(r"[-_ ]", gpu)[0]
    if named and not re.search(rf"(?<![\w-]){re.escape(own)}(?![\w])", note, re.IGNORECASE):
        key, name = named[0]
        return None, f"gpu {gpu!r} contradicts the interconnect note's system {key!r} ({gpu_of(name)})", ()
    why = (f"the interconnect note's {named[0][0]!r} is another GPU's system, named beside {own}" if named
           else "the interconnect note names no catalog cluster")
    return ref, None, (f"cluster={ref}(the reference cluster of {gpu}: {why}; validate --cluster names yours)",)
