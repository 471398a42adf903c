"""The torchtitan TOML reader of ``predict --config`` (costmodel.run_config, its module docstring)."""
from __future__ import annotations

import re

from .config_keys import one_edit_apart
from .errors import InputError
from .run_config import TORCHTITAN_TRAINING_DEFAULTS, RunConfig, _bool, _count, _table, _take
from .torchtitan_split import checked_stages_per_rank


def _unpriced_training(tr: dict, path: str) -> None:
    """Refuse the ``[training]`` settings that change what a step holds and moves but are not priced
    (torchtitan/config/configs.py Training): ``dtype = "bfloat16"`` keeps parameters, gradients and
    optimizer states in bf16 with no fp32 copy, ``enable_cpu_offload`` moves all three to the host for
    FSDP, and ``mixed_precision_reduce`` is float32 only (its Literal type refuses anything else).

    Raises:
        InputError: naming the key."""
    dt = tr.get("dtype")
    if dt is not None and str(dt) != "float32":
        raise InputError(path, "training.dtype", f"{dt!r}: full-bf16 training (parameters, gradients and optimizer "
                         "states in bf16, no fp32 copy) is not priced: the model prices FSDP2's mixed precision "
                         "(float32 parameters sharded, bf16 compute; torchtitan's default dtype float32)")
    off = tr.get("enable_cpu_offload")
    if off not in (None, False):
        raise InputError(path, "training.enable_cpu_offload", f"{off!r}: FSDP's CPU offload of parameters, gradients "
                         "and optimizer states is not priced (drop it, or price the sharded optimizer's offload on "
                         "the megatron or nemo stack with --optimizer-offload)")
    red = tr.get("mixed_precision_reduce")
    if red is not None and str(red) != "float32":
        raise InputError(path, "training.mixed_precision_reduce", f"{red!r}: torchtitan reduces in float32 only (its "
                         "field's type allows nothing else)")


def _torchtitan(d: dict, path: str) -> RunConfig:
    cfg = RunConfig(stack="torchtitan", kind="torchtitan TOML")
    L, R = cfg.layout, cfg.recipe
    par, tr = _table(d, path, "parallelism"), _table(d, path, "training")
    par, sec = _parallel_keys(d, path, par, tr, cfg)
    pre = lambda key: f"{sec.get(key, 'parallelism')}."      # noqa: E731 - the table a key was read from
    for name, key in (("tp", "tensor_parallel_degree"), ("pp", "pipeline_parallel_degree"),
                      ("cp", "context_parallel_degree"), ("ep", "expert_parallel_degree"),
                      ("etp", "expert_tensor_parallel_degree")):
        _take(cfg, path, L, name, par, key, _count, pre(key))
    _data_parallel(par, path, cfg, pre)
    _fsdp_resharding(par, path, cfg)
    if par.get("enable_async_tensor_parallel") is not None:
        # torch.compile's micro-pipelined all-gather/reduce-scatter matmuls: the TP-comm overlap switch
        # (torchtitan applies it with the TP plan only: at TP 1 it does nothing)
        if L.get("tp", 1) > 1:
            _take(cfg, path, R, "tp_comm_overlap", par, "enable_async_tensor_parallel", _bool,
                  pre("enable_async_tensor_parallel"))
        elif par["enable_async_tensor_parallel"] is True:
            cfg.notes.append(f"{path}: {pre('enable_async_tensor_parallel')}enable_async_tensor_parallel: no TP (degree "
                             "1): nothing to overlap")
    _batch(par, tr, path, cfg, pre)
    _take(cfg, path, R, "seq_len", tr, "seq_len", _count, "training.")
    mpp = tr.get("mixed_precision_param")
    if mpp is not None and str(mpp) not in ("bfloat16", "bf16"):
        raise InputError(path, "training.mixed_precision_param", f"{mpp!r}: only bfloat16 parameters (FSDP2's mixed "
                         "precision) are modelled; 32-bit training is not")
    _unpriced_training(tr, path)
    for key, v in TORCHTITAN_TRAINING_DEFAULTS.items():
        if key not in R and not (key == "local_batch_size" and "gbs" in R):
            cfg.defaults[key] = v
    opt = _table(d, path, "optimizer").get("name")
    if opt is not None:
        # torchtitan builds torch.optim's Adam or AdamW by this name (torchtitan/components/optimizer.py)
        if not isinstance(opt, str) or opt.strip().lower() not in ("adam", "adamw"):
            raise InputError(path, "optimizer.name", f"{opt!r}: torchtitan builds Adam or AdamW")
        R["optimizer"], cfg.where["optimizer"] = opt.strip().lower(), f"{path}: optimizer.name"
    _activation_checkpoint(_table(d, path, "activation_checkpoint"), path, cfg)
    comp = _table(d, path, "compile")
    for key, v in (("compile.enable", comp.get("enable")), ("training.compile", tr.get("compile"))):
        if v is not None and not isinstance(v, bool):       # torchtitan's fields are bools: true or false
            raise InputError(path, key, f"{v!r} is not true or false")
    if comp.get("enable") is not None:                                      # [compile] enable / components
        on = comp["enable"] and "model" in (comp.get("components") or ["model"])
        R["fused_elementwise"], cfg.where["fused_elementwise"] = on, f"{path}: compile.enable"
    elif tr.get("compile") is not None:                                    # older: training.compile
        R["fused_elementwise"], cfg.where["fused_elementwise"] = tr["compile"], f"{path}: training.compile"
    model = _table(d, path, "model")
    fl = model.get("flavor")
    if isinstance(fl, str) and fl.strip():
        cfg.model["flavor"] = (fl, f"{path}: model.flavor")
    if isinstance(model.get("name"), str) and model["name"].strip():
        cfg.model["family"] = (model["name"], f"{path}: model.name")
    conv = model.get("converters") or []
    if not isinstance(conv, list) or not all(isinstance(c, str) for c in conv):
        raise InputError(path, "model.converters", f"expected a list of converter names, got {conv!r}")
    mx = [c for c in conv if c in _TORCHTITAN_MX]
    if mx:
        raise InputError(path, "model.converters", f"{mx[0]!r} (torchao's MXFP8) is not priced on torchtitan: the "
                         "model's mxfp8 is Transformer Engine's (--stack megatron or nemo)")
    for c in conv:
        if c not in _TORCHTITAN_CONVERTERS:
            # torchtitan looks each name up in its converter registry and fails on another
            near = [k for k in _TORCHTITAN_CONVERTERS if one_edit_apart(c, k)]
            raise InputError(path, "model.converters", f"{c!r} is not a torchtitan converter ("
                             f"{', '.join(_TORCHTITAN_CONVERTERS)})" + (f": did you mean {near[0]!r}?" if near else ""))
        if c not in _TORCHTITAN_FLOAT8:
            cfg.notes.append(f"{path}: model.converters {c!r} is not a converter the model prices: not used")
    f8 = [c for c in conv if c in _TORCHTITAN_FLOAT8]
    old_f8 = _table(d, path, "float8").get("enable_float8_linear") is True
    if f8 or old_f8:
        R["precision"] = "fp8"
        cfg.where["precision"] = f"{path}: " + (f"model.converters ({f8[0]!r})" if f8 else "float8.enable_float8_linear")
        _torchtitan_float8_recipe(d, path, cfg)
    else:
        # without the float8 converter torchtitan's linears run in FSDP2's bfloat16 (mixed_precision_param,
        # checked above): the file fixes the precision as much as a converter would
        R["precision"], cfg.where["precision"] = "bf16", f"{path}: model.converters (no float8 converter)"
        if any(_table(d, path, *k).get("recipe_name") is not None for k in (("quantize", "linear", "float8"),
                                                                            ("float8",))):
            cfg.notes.append(f"{path}: a float8 recipe_name without the float8 converter in model.converters: the "
                             "linears stay 16-bit")
    # the experts' float8 grouped GEMM settings ([quantize.grouped_mm.float8], its fqns): read, so that
    # the table is known where it stands (the grouped GEMMs are priced in 16-bit)
    if _table(d, path, "quantize", "grouped_mm", "float8") and "quantize.grouped_mm.float8" not in conv:
        cfg.notes.append(f"{path}: quantize.grouped_mm.float8 without its converter in model.converters: not used")
    _pipeline_schedule(par, L, path, cfg, pre)
    _stage_split(par, L, path, cfg, pre, bool(sec))
    # last: a misspelt key is then one edit from a key the reader asked for (costmodel.config_keys)
    _check_sections(d, path)
    if not sec:
        _check_parallelism_keys(par, path, cfg)
    return cfg


def _data_parallel(par: dict, path: str, cfg: RunConfig, pre) -> None:
    """The data-parallel degrees: the shard degree (-1: the ranks left) sets ZeRO-3 and, stated, the
    layout's DP with the replicate degree; both above 1 is HSDP (``dp_replicate``, costmodel.layouts.shard_dp);
    a replicate degree beside a shard degree left to the world is checked with the cluster.

    Raises:
        InputError: naming the key."""
    L = cfg.layout
    shard_key = "data_parallel_degree" if "data_parallel_degree" in par else "data_parallel_shard_degree"
    shard, rep = par.get(shard_key, -1), par.get("data_parallel_replicate_degree", 1)
    for key, v in ((shard_key, shard), ("data_parallel_replicate_degree", rep)):
        # torchtitan: "only one of the data parallel degrees can be -1", the shard degree (ParallelDims)
        left = v == -1 and key == shard_key
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or (v < 1 and not left)):
            raise InputError(path, f"{pre(key)}{key}", f"expected {'-1 (the ranks left) or ' if key == shard_key else ''}"
                             f"a degree >= 1, got {v!r}")
    # FSDP2 shards over the dp_shard x cp mesh (torchtitan's parallel_dims: dp_shard_cp): CP ranks shard too
    cp = L.get("cp", 1)
    L["zero"] = 3 if shard != 1 or cp > 1 else 0
    cfg.where["zero"] = f"{path}: {pre(shard_key)}{shard_key}"
    if shard != -1:                 # stated degrees: the layout's DP, checked against the world
        L["dp"], cfg.where["dp"] = shard * (rep or 1), f"{path}: {pre(shard_key)}{shard_key}"
    if shard != -1 and "data_parallel_replicate_degree" in par:
        # stated: HSDP where both are above 1 (the shard group CP x shard), else one shard group (FSDP) or
        # none (DDP, shard 1 without CP)
        L["dp_replicate"] = rep if (shard > 1 or cp > 1) and rep is not None else 1
        cfg.where["dp_replicate"] = f"{path}: {pre('data_parallel_replicate_degree')}data_parallel_replicate_degree"
    elif shard == -1 and rep not in (None, 1):
        cfg.dp_replicate = rep                  # checked against the world's DP with the cluster
    elif shard == -1 and "data_parallel_replicate_degree" in par:
        L["dp_replicate"] = 1                   # stated: one shard group over every DP rank
        cfg.where["dp_replicate"] = f"{path}: {pre('data_parallel_replicate_degree')}data_parallel_replicate_degree"


def _batch(par: dict, tr: dict, path: str, cfg: RunConfig, pre) -> None:
    """The micro-batch (the pipeline's micro-batch size, else the local batch) and the global batch
    (stated, or the local batch x DP once the world is known); ``training.batch_size`` is the local
    batch's name before pytorch/torchtitan#1238 (2025-06).

    Raises:
        InputError: naming the key."""
    L, R = cfg.layout, cfg.recipe
    local = "local_batch_size"
    if "batch_size" in tr:
        if "local_batch_size" in tr:
            raise InputError(path, "training.batch_size", "and training.local_batch_size both given: the first is "
                             "torchtitan's name of the second before 2025-06; keep one")
        local = "batch_size"
        cfg.notes.append(f"{path}: training.batch_size read as the local batch (torchtitan's local_batch_size)")
    if L.get("pp", 1) > 1:
        _take(cfg, path, L, "mbs", par, "pipeline_parallel_microbatch_size", _count,
              pre("pipeline_parallel_microbatch_size"))
    else:
        _take(cfg, path, L, "mbs", tr, local, _count, "training.")
    g = tr.get("global_batch_size")
    if g is not None and g != -1 and (isinstance(g, bool) or not isinstance(g, int) or g < 1):
        # torchtitan's -1 (the default) means local batch x DP; anything else must be a batch
        raise InputError(path, "training.global_batch_size", f"{g!r} is not a valid value: expected a whole number "
                         ">= 1, or -1 (local_batch_size x DP)")
    if isinstance(g, int) and g > 0:
        R["gbs"], cfg.where["gbs"] = g, f"{path}: training.global_batch_size"
    elif tr.get(local) is not None:                                         # x DP, once the world is known
        try:
            R["local_batch_size"] = _count(tr[local])
        except (TypeError, ValueError):
            raise InputError(path, f"training.{local}", f"{tr[local]!r} is not a valid value") from None


#: torchtitan's activation-checkpointing defaults (torchtitan/config/job_config.py ActivationCheckpoint,
#: 2025-2026 TOML releases): selective, one block in every 2
_AC_DEFAULT_MODE, _AC_DEFAULT_OPTION = "selective", "2"


def _activation_checkpoint(act: dict, path: str, cfg: RunConfig) -> None:
    """Read ``[activation_checkpoint]``: mode none / full, or selective with ``selective_ac_option``
    'op' (op-level SAC) or '1' or '0' (every block, as full).  A number N >= 2 checkpoints one block in every
    N (torchtitan/distributed/activation_checkpoint.py ``_apply_layer_sac``: blocks N, 2N, ... of
    each process), which the torchtitan stack does not price; so is the default (mode and option
    left out: selective, '2').

    Raises:
        InputError: naming the key, for a mode or option the model does not price."""
    L = cfg.layout
    ac, opt = act.get("mode"), act.get("selective_ac_option")
    key = "activation_checkpoint.mode" if "mode" in act else "activation_checkpoint"
    if ac is None:
        ac = _AC_DEFAULT_MODE
    if ac not in ("none", "selective", "full"):
        # torchtitan's memory_budget mode (torch.compile's min-cut recomputation under a budget) is real
        raise InputError(path, "activation_checkpoint.mode", f"{ac!r}: " + ("torchtitan's memory-budget recomputation "
                         "is not priced" if ac == "memory_budget" else "not a torchtitan mode")
                         + " (priced: none, selective, full)")
    if ac == "selective" and str(opt if opt is not None else _AC_DEFAULT_OPTION) != "op":
        n = str(opt if opt is not None else _AC_DEFAULT_OPTION)
        if n in ("0", "1"):         # _apply_layer_sac: "if not ac_freq or count % ac_freq == 0": every block
            L["recompute"], cfg.where["recompute"] = "full", f"{path}: activation_checkpoint.selective_ac_option"
            return
        said = (f"selective_ac_option {opt!r}" if opt is not None else
                f"{'mode' if 'mode' in act else 'mode and selective_ac_option'} not set: torchtitan's default "
                f"(selective, every {_AC_DEFAULT_OPTION}nd block)")
        if not n.isdigit() or int(n) < 1:
            raise InputError(path, "activation_checkpoint.selective_ac_option", f"{opt!r} is not 'op' or a "
                             "whole number of blocks")
        raise InputError(path, key if opt is None else "activation_checkpoint.selective_ac_option",
                         f"{said}: checkpointing one block in every {n} is not priced on the torchtitan stack: set "
                         "mode to none or full, or selective_ac_option to 'op' (op-level) or '1' (every block)")
    L["recompute"], cfg.where["recompute"] = ac, f"{path}: {key}"


#: torchtitan's default virtual stages per rank of a multi-stage schedule without
#: pipeline_parallel_layers_per_stage (torchtitan/distributed/pipeline_parallel.py: "For multi-stage
#: schedules, default is 2 virtual stages per rank")
_DEFAULT_STAGES_PER_RANK = 2


def _pipeline_schedule(par: dict, L: dict, path: str, cfg: RunConfig, pre) -> None:
    """Read ``pipeline_parallel_schedule``: 1F1B; Interleaved1F1B, whose virtual stages per rank are
    torchtitan's default 2 without ``pipeline_parallel_layers_per_stage`` (with it, --vp gives them);
    the schedules whose bubble or memory the model does not have (GPipe: every micro-batch's
    activations held; the zero-bubble and looped breadth-first schedules) are refused.

    Raises:
        InputError: naming the key."""
    sched = par.get("pipeline_parallel_schedule")
    if sched is None or L.get("pp", 1) <= 1:
        return
    key = f"{pre('pipeline_parallel_schedule')}pipeline_parallel_schedule"
    name = str(sched).lower()
    if name == "1f1b":
        return
    if name != "interleaved1f1b":
        raise InputError(path, key, f"{sched!r} is not priced: the model has 1F1B and Interleaved1F1B ("
                         + ("GPipe holds every micro-batch's activations at once" if name == "gpipe" else
                            "its bubble and memory are those schedules' own") + ")")
    if par.get("pipeline_parallel_layers_per_stage") is None:
        L["vp"], cfg.where["vp"] = _DEFAULT_STAGES_PER_RANK, f"{path}: {key} (torchtitan's default 2 stages per rank)"


def _stage_split(par: dict, L: dict, path: str, cfg: RunConfig, pre, old_tables: bool) -> None:
    """The pipeline split a torchtitan file runs (``cfg.stage_split``, costmodel.torchtitan_split lays it out
    once the model's layers are known; the split is then the run's own): the stages it names
    (``module_fqns_per_model_part``: the ``layers.N`` of each part; ``pipeline_parallel_split_points``: the
    first layer of every stage after the first; VP = stages / PP, one stage per rank for 1F1B), else
    torchtitan's own split of ``pipeline_parallel_layers_per_stage``-sized stages (or its default count)
    with the embedding and the output weighed ``pipeline_parallel_first/last_stage_less_layers``.  A file
    in torchtitan's 2024 tables keeps the even split (that torchtitan split the layers alone).

    Raises:
        InputError: a stage list that does not hold each layer once in order, a stage count PP does not
            divide (or, under 1F1B, other than PP), a weight that is not a whole number, a layers-per-stage
            count below 1 (each naming its key)."""
    if L.get("pp", 1) <= 1 or old_tables:
        return
    pp, multi = L["pp"], str(par.get("pipeline_parallel_schedule", "1F1B")).lower() == "interleaved1f1b"
    key = lambda k: f"{pre(k)}{k}"      # noqa: E731
    fqns, points = par.get("module_fqns_per_model_part"), par.get("pipeline_parallel_split_points")
    if fqns not in (None, []):
        spec = dict(kind="counts", counts=_fqn_counts(fqns, path, key("module_fqns_per_model_part")),
                    where=f"{path}: {key('module_fqns_per_model_part')}")
    elif points not in (None, []):
        spec = dict(kind="points", points=_split_points(points, path, key("pipeline_parallel_split_points")),
                    where=f"{path}: {key('pipeline_parallel_split_points')}")
    else:
        w = []
        for k in ("pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers"):
            v = par.get(k, 1)
            if isinstance(v, bool) or not isinstance(v, int):
                raise InputError(path, key(k), f"expected a whole number, got {v!r}")
            w.append(v)
        lps = par.get("pipeline_parallel_layers_per_stage")
        if lps is not None and (isinstance(lps, bool) or not isinstance(lps, int) or lps < 1):
            raise InputError(path, key("pipeline_parallel_layers_per_stage"), f"expected a whole number >= 1, got {lps!r}")
        spec = dict(kind="weights", first=w[0], last=w[1], layers_per_stage=lps, multi=multi,
                    lps_key=key("pipeline_parallel_layers_per_stage"),
                    where=f"{path}: {key('pipeline_parallel_degree')} (torchtitan's own split"
                          + (f", {key('pipeline_parallel_layers_per_stage')} {lps})" if lps else ")"),
                    weight_keys=" / ".join(key(k) for k in ("pipeline_parallel_first_stage_less_layers",
                                                            "pipeline_parallel_last_stage_less_layers")))
        cfg.notes.append(f"{path}: no stage names its layers: priced at torchtitan's own split (the embedding and the "
                         f"output weighed {w[0]} and {w[1]} layers, the remainder on the first stages: its partitioner "
                         "since April 2025; an older torchtitan split the layers alone: give --pp-layout for that)")
    stages = len(spec["counts"]) if spec["kind"] == "counts" else len(spec["points"]) + 1 if spec["kind"] == "points" \
        else None
    if stages is not None:
        L["vp"] = checked_stages_per_rank(stages, pp, multi, *spec["where"].split(": ", 1))
        cfg.where["vp"] = spec["where"]
    cfg.stage_split = spec
    cfg.custom_pipeline_split = spec["where"]


def _fqn_counts(parts, path: str, key: str) -> list:
    """Transformer layers of each part of a ``module_fqns_per_model_part`` list, each ``layers.N`` once and in
    order.  Raises InputError (names ``key``) otherwise."""
    if not isinstance(parts, list) or not all(isinstance(p, list) and all(isinstance(x, str) for x in p) for p in parts):
        raise InputError(path, key, "expected a list of lists of module names")
    seen = [int(x.split(".", 1)[1]) for p in parts for x in p if re.fullmatch(r"layers\.\d+", x)]
    if seen != list(range(len(seen))):
        raise InputError(path, key, "its layers.N must name each layer once, in order across the parts")
    return [sum(1 for x in p if re.fullmatch(r"layers\.\d+", x)) for p in parts]


def _split_points(points, path: str, key: str) -> list:
    """The layer indices of ``pipeline_parallel_split_points`` (``layers.N``: stage k + 1 starts at layer N),
    increasing.  Raises InputError (names ``key``) otherwise."""
    if not isinstance(points, list) or not all(isinstance(x, str) and re.fullmatch(r"layers\.\d+", x) for x in points):
        raise InputError(path, key, "expected a list of 'layers.N' names")
    idx = [int(x.split(".", 1)[1]) for x in points]
    if idx != sorted(set(idx)) or idx[0] < 1:
        raise InputError(path, key, "its layers.N must increase from layers.1 on")
    return idx


#: where torchtitan's 2024 configurations put the parallel degrees: [training] and [experimental]
#: (torchtitan/config_manager.py of that year), before the [parallelism] table took them
_OLD_PARALLEL_TABLES = ("training", "experimental")


def _parallel_keys(d: dict, path: str, par: dict, tr: dict, cfg: RunConfig) -> tuple:
    """``(degrees, table of each)``: the ``[parallelism]`` table, or, in a file without one, the
    degrees a 2024 configuration gives under ``[training]`` and ``[experimental]`` (noted); the second
    maps each key read from an old table to that table's name."""
    if "parallelism" in d:
        return par, {}
    old, sec = {}, {}
    for name in _OLD_PARALLEL_TABLES:
        t = tr if name == "training" else _table(d, path, name)
        for key in _TORCHTITAN_PARALLELISM:
            if t.get(key) is not None:
                old[key], sec[key] = t[key], name
    if sec:
        cfg.notes.append(f"{path}: torchtitan's 2024 layout (no [parallelism] table): "
                         + ", ".join(f"{sec[k]}.{k}" for k in old) + " read as its parallel degrees")
    return old, sec


#: torchtitan's [parallelism] keys (torchtitan/config/job_config.py Parallelism, 2024-2025 releases;
#: data_parallel_degree is the 2024 name of data_parallel_shard_degree): a ``*_degree`` key beyond
#: them is refused (it would change the layout unread), the others not read are noted; the first
#: tuple holds the keys the model reads
_TORCHTITAN_READ = (
    "data_parallel_degree", "data_parallel_shard_degree", "data_parallel_replicate_degree", "tensor_parallel_degree",
    "pipeline_parallel_degree", "context_parallel_degree", "expert_parallel_degree", "expert_tensor_parallel_degree",
    "fsdp_reshard_after_forward", "enable_async_tensor_parallel", "pipeline_parallel_microbatch_size",
    "pipeline_parallel_schedule", "pipeline_parallel_split_points", "pipeline_parallel_layers_per_stage",
    "pipeline_parallel_first_stage_less_layers", "pipeline_parallel_last_stage_less_layers",
    "module_fqns_per_model_part")
_TORCHTITAN_PARALLELISM = _TORCHTITAN_READ + (
    "enable_compiled_autograd", "disable_loss_parallel", "pipeline_parallel_schedule_csv",
    "context_parallel_rotate_method", "context_parallel_load_balancer",
    "expert_parallel_comm_backend", "pipeline_parallel_expert_parallel_overlap", "pipeline_parallel_microbatches")
#: torchtitan's top-level tables, every release from 2024 (config_manager.py's argument prefixes) to the last
#: TOML one (torchtitan/config/job_config.py JobConfig at 4a950ea, 2026-02): torchtitan refuses another
_TORCHTITAN_SECTIONS = ("job", "profiling", "metrics", "model", "optimizer", "lr_scheduler", "training", "parallelism",
                        "checkpoint", "activation_checkpoint", "compile", "float8", "mx", "quantize", "comm",
                        "memory_estimation", "fault_tolerance", "experimental", "validation", "debug")


def _check_sections(d: dict, path: str) -> None:
    """Refuse a top-level table torchtitan's JobConfig never had (:data:`_TORCHTITAN_SECTIONS`): torchtitan
    refuses it too, and a misspelt one (``[experimentl]``) would leave its keys unread.

    Raises:
        InputError: naming the table, with the section one edit away if there is one."""
    for key in d:
        if key not in _TORCHTITAN_SECTIONS:
            near = [k for k in _TORCHTITAN_SECTIONS if one_edit_apart(key, k)]
            raise InputError(path, str(key), "is not a torchtitan section (its JobConfig refuses it)"
                             + (f": did you mean [{near[0]}]?" if near else ""))


def _check_parallelism_keys(par: dict, path: str, cfg: RunConfig) -> None:
    """Refuse a ``[parallelism]`` degree torchtitan does not have (a misspelt one would leave the layout
    unread) or the 2024 and 2025 names of the shard degree together; note the known keys the model
    does not read.

    Raises:
        InputError: naming the key."""
    if "data_parallel_degree" in par and "data_parallel_shard_degree" in par:
        raise InputError(path, "parallelism.data_parallel_degree", "and data_parallel_shard_degree both given: the "
                         "first is the 2024 name of the second; keep one")
    for key in par:
        if key not in _TORCHTITAN_PARALLELISM and key.endswith("_degree"):
            raise InputError(path, f"parallelism.{key}", "is not a torchtitan parallelism degree (tensor, pipeline, "
                             "context, expert, expert_tensor, data_parallel_shard, data_parallel_replicate)")
        if key not in _TORCHTITAN_PARALLELISM:
            # torchtitan refuses a field its Parallelism lacks (ConfigManager: "Invalid field names")
            near = [k for k in _TORCHTITAN_PARALLELISM if one_edit_apart(key, k)]
            raise InputError(path, f"parallelism.{key}", "is not a torchtitan parallelism key (torchtitan refuses it)"
                             + (f": did you mean {near[0]}?" if near else ""))
    if "pipeline_parallel_microbatches" in par:
        raise InputError(path, "parallelism.pipeline_parallel_microbatches", "(torchtitan's micro-batch count before "
                         "pipeline_parallel_microbatch_size) is not read: give --mbs, the local batch over it")
    rotate = par.get("context_parallel_rotate_method")
    if rotate is not None:
        # PyTorch's context_parallel: 'allgather' gathers every K/V shard after the first sub-attention,
        # 'alltoall' passes them round the ring; both move CP - 1 shards, priced as the ring's exchange
        cfg.notes.append(f"{path}: parallelism.context_parallel_rotate_method {rotate!r} is priced as the ring "
                         "exchange the model has (the same CP - 1 K/V shards; allgather gathers them at once, "
                         "hidden under the first sub-attention only)")
    skipped = [k for k in par if k not in _TORCHTITAN_READ + ("context_parallel_rotate_method",)]
    if skipped:
        cfg.notes.append(f"{path}: parallelism." + ", parallelism.".join(skipped) + " not read (no term of the model "
                         f"depends on {'it' if len(skipped) == 1 else 'them'})")


def _fsdp_resharding(par: dict, path: str, cfg: RunConfig) -> None:
    """FSDP2's parameter resharding as torchtitan applies it (parallelize.py apply_fsdp): under a
    pipeline ("default") each stage keeps its parameters gathered across its micro-batches and
    reduce-scatters once, ZeRO-1's traffic and memory; "always" reshards there too (ZeRO-3 under a
    pipeline: refused, not modelled); "never" without a pipeline keeps them gathered from the forward
    to the backward, priced as ZeRO-3 (one all-gather more a micro-batch, noted).

    Raises:
        InputError: a value other than default, always or never, or "always" with a pipeline."""
    L = cfg.layout
    mode = par.get("fsdp_reshard_after_forward", "default")
    key = f"{path}: parallelism.fsdp_reshard_after_forward"
    if mode not in ("default", "always", "never"):
        raise InputError(path, "parallelism.fsdp_reshard_after_forward", f"{mode!r} is not default, always or never")
    if L.get("zero") != 3:
        return
    if L.get("pp", 1) > 1:
        if mode == "always":
            raise InputError(path, "parallelism.fsdp_reshard_after_forward", "'always' under a pipeline re-gathers "
                             "every stage's parameters each micro-batch: ZeRO-3 with pipeline parallelism is not "
                             "modelled (the default keeps them gathered, ZeRO-1)")
        L["zero"], cfg.where["zero"] = 1, key + " (default: kept gathered under the pipeline)"
        cfg.notes.append(f"{path}: FSDP under a pipeline keeps each stage's parameters gathered across its "
                         "micro-batches and reduce-scatters once (torchtitan apply_fsdp: reshard_after_forward = "
                         "not pp_enabled): priced as ZeRO-1")
    elif mode == "never":
        cfg.notes.append(f"{key}: 'never' keeps the parameters gathered from the forward to the backward; priced as "
                         "resharding after the forward (one all-gather a micro-batch more, the gathered parameters "
                         "not held)")


#: torchtitan's float8 converter names: "float8" (2024-25), "quantize.linear.float8" (the
#: [quantize.linear.float8] configs of 2025); and its MX ones, which the model does not price there
_TORCHTITAN_FLOAT8 = ("float8", "quantize.linear.float8")
_TORCHTITAN_MX = ("mx", "quantize.linear.mx", "quantize.grouped_mm.mx")
#: the names torchtitan's model-converter registry holds (register_model_converter in torchtitan/components/
#: quantization, 2024-10 to 2026-02); the MoE experts' float8 grouped GEMM is not priced (noted)
_TORCHTITAN_CONVERTERS = _TORCHTITAN_FLOAT8 + _TORCHTITAN_MX + ("quantize.grouped_mm.float8",)


def _torchtitan_float8_recipe(d: dict, path: str, cfg: RunConfig) -> None:
    """torchao's float8 recipe name (``[quantize.linear.float8]`` or the older ``[float8]``
    ``recipe_name``): tensorwise and rowwise are the model's recipes of those names;
    rowwise_with_gw_hp (row-wise, the weight-gradient GEMM in bf16) is noted and priced as rowwise.

    Raises:
        InputError: a recipe name that is not a string, or not one of torchao's (naming the key)."""
    names = {k: sec.get("recipe_name") for k, sec in (("quantize.linear.float8", _table(d, path, "quantize", "linear",
                                                                                         "float8")),
                                                      ("float8", _table(d, path, "float8")))}
    if len({str(v).lower() for v in names.values() if v is not None}) > 1:
        cfg.notes.append(f"{path}: quantize.linear.float8.recipe_name {names['quantize.linear.float8']!r} and "
                         f"float8.recipe_name {names['float8']!r} differ: the first is read")
    for key, sec in (("quantize.linear.float8", _table(d, path, "quantize", "linear", "float8")),
                     ("float8", _table(d, path, "float8"))):
        if sec.get("enable_fsdp_float8_all_gather") is True:
            cfg.notes.append(f"{path}: {key}.enable_fsdp_float8_all_gather: FSDP's float8 weight all-gather is "
                             "priced as a bf16 one")
    for key, sec in (("quantize.linear.float8", _table(d, path, "quantize", "linear", "float8")),
                     ("float8", _table(d, path, "float8"))):
        if sec.get("recipe_name") is not None:
            name = sec["recipe_name"]
            if not isinstance(name, str):
                raise InputError(path, f"{key}.recipe_name", f"expected a recipe name, got {name!r}")
            low = name.lower()
            if low not in ("tensorwise", "rowwise", "rowwise_with_gw_hp"):
                raise InputError(path, f"{key}.recipe_name", f"expected one of tensorwise, rowwise, "
                                 f"rowwise_with_gw_hp (torchao's float8 recipes), got {name!r}")
            rec = "tensorwise" if low == "tensorwise" else "rowwise"
            cfg.recipe["fp8_recipe"], cfg.where["fp8_recipe"] = rec, f"{path}: {key}.recipe_name"
            if low == "rowwise_with_gw_hp":
                cfg.notes.append(f"{path}: {key}.recipe_name 'rowwise_with_gw_hp' is priced as rowwise: its "
                                 "weight-gradient GEMM in bf16 is not modelled")
            return
