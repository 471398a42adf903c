"""What the commands share: the model/cluster/recipe options, loading the specs, the context line, the
recipe-switch flags (generated from costmodel.recipe_switches.RECIPE_SWITCHES) and the layout flags of
``predict`` and ``compare`` (generated from costmodel.layout_fields.LAYOUT_FIELDS)."""
from __future__ import annotations

import contextlib
import dataclasses
import inspect
from typing import Optional

import typer

from ..errors import InputError
from .notes import note, note_plain_decoder
from ..layout_fields import FIELD_SPECS, LAYOUT_FIELDS
from ..specs import (ClusterSpec, Recipe, cluster_profile, has_builtin_profile, load_cluster, load_gpu, load_model, recompute_module_list,
                     recompute_modules_problem, with_fabric)
from ..moe import check_flex_fabric, check_moe_recipe
from ..recipe_switches import RECIPE_SWITCHES, SWITCHES_BY_NAME
from ..stacks import STACKS, get_stack, stack_recipe
from ..stack_rules import softcap_recipe
from ..torchtitan_split import stages_per_rank

MODEL = typer.Option(..., "--model", help="Catalog name (see `costmodel models`) or a HF config.json / YAML path.")
CLUSTER = typer.Option(..., "--cluster", help="Catalog name (see `costmodel hardware`) or a cluster YAML path.")
NODES = typer.Option(None, "--nodes", help="Override the cluster's node count.")
GBS = typer.Option(128, "--gbs", help="Global batch size, sequences.")
SEQ = typer.Option(None, "--seq-len", help="Sequence length, tokens (default: the model's training length).")
PREC = typer.Option(None, "--precision", help="bf16, fp16, fp8, mxfp8 or nvfp4 (the last two: Blackwell, Megatron/NeMo; "
                    "default: bf16, fp16 on GPUs without bf16).")
PROFILE = typer.Option(None, "--profile", help="Calibrated profile YAML (default: hardware/profiles/<gpu>.yaml).")
FORMAT = typer.Option(None, "--format", help="megatron, nemo, bridge, torchtitan, json or settings: how to print what to set "
                      "for the chosen layout (Megatron-LM arguments, NeMo 2 recipe overrides, Megatron-Bridge YAML "
                      "overrides, a torchtitan "
                      "configuration, JSON, or plain settings; default: the stack's own).")
STACK = typer.Option("megatron", "--stack", help=f"{', '.join(STACKS)}: the training stack whose defaults set "
                     + ", ".join(w.cli_flag for w in RECIPE_SWITCHES) + " and vocabulary padding (costmodel/stacks.py).")


CONFIG = typer.Option(None, "--config", help="The run's own configuration (NeMo YAML, Megatron-Bridge YAML, torchtitan "
                      "TOML): its layout, "
                      "batch, sequence, precision and world fill the flags not given; a flag that contradicts it is "
                      "refused (costmodel/run_config.py).")


def stack_defaults_note(path: str, recipe, recipe_flags: dict, is_moe: bool) -> str:
    """The note ``predict --config`` prints of the recipe switches neither the file nor a flag set
    (``recipe_flags``: switch name -> value or None): the values the stack's defaults gave ``recipe``
    (costmodel/stacks.py), MoE switches only for an MoE model, the fp8 recipe only in fp8, the fp8
    parameter gathers and the BF16 edge layers only in a low-precision format and the recompute modules only on a stack whose
    selective recomputation takes them (not torchtitan's per-op checkpointing).  Empty when every
    switch was set."""
    from ..formats import gemm_format
    low = gemm_format(recipe.precision).low
    applies = {"fp8_recipe": recipe.precision == "fp8", "fp8_param_gather": low, "bf16_edge_layers": low,
               "recompute_modules": get_stack(recipe.stack).selective_recompute != "op-sac"}
    left = [w for w in RECIPE_SWITCHES if (recipe_flags or {}).get(w.name) is None and (is_moe or not w.moe)
            and applies.get(w.name, True)]
    if not left:
        return ""
    vals = ", ".join(f"{w.name}={getattr(recipe, w.name)!r}" for w in left)
    return (f"--config {path}: not set in the file or by a flag, {recipe.stack}'s defaults: {vals} (pass the flags "
            "if the run differs)")


def _world_dp(path: str, cfg, cluster_arg: str, scalars: dict, layout_flags: dict):
    """(cluster, DP) of a run configuration whose DP is the world's ranks left over by TP x PP x CP.

    Raises:
        InputError: TP x PP x CP does not divide the cluster's GPUs (naming the file's keys that set them).
    """
    c = load_cluster(cluster_arg, scalars.get("nodes"))
    mp = (layout_flags.get("tp") or 1) * (layout_flags.get("pp") or 1) * (layout_flags.get("cp") or 1)
    if c.num_gpus % mp:
        keys = [cfg.where[d].split(": ", 1)[1] for d in ("tp", "pp", "cp") if d in cfg.where]
        raise InputError(path, keys[0] if keys else "parallelism", f"TP x PP x CP = {mp} does not divide the "
                         f"{c.num_gpus} GPUs of {c.key}" + (f"; {', '.join(keys[1:])} also set there"
                                                              if keys[1:] else ""))
    return c, c.num_gpus // mp


def _world_replicas(path: str, cfg, cluster_arg: str, scalars: dict, layout_flags: dict, given) -> None:
    """torchtitan's replicate degree beside a shard degree left to the world (-1), once the world's DP is
    known: HSDP where the ranks left to shard over, times the CP ranks FSDP2 also shards over, are two or
    more (the layout's dp_replicate), DDP where they are one (ZeRO 0), in place in ``layout_flags`` and ``cfg``.

    Raises:
        InputError: a degree that does not divide DP (names the key), or a --dp-replicate or --zero that
            contradicts the file.
    """
    c, dp = _world_dp(path, cfg, cluster_arg, scalars, layout_flags)
    if dp % cfg.dp_replicate:
        raise InputError(path, "parallelism.data_parallel_replicate_degree", f"{cfg.dp_replicate} does not divide "
                         f"the {dp} data-parallel ranks ({c.num_gpus} GPUs of {c.key} / TP x PP x CP)")
    # FSDP2 shards over the ranks left and the CP ranks (its dp_shard x cp mesh)
    if dp // cfg.dp_replicate * (layout_flags.get("cp") or 1) > 1:       # HSDP: replicas of shard groups
        if given("dp_replicate") and layout_flags.get("dp_replicate") != cfg.dp_replicate:
            raise InputError("--dp-replicate", "", f"{layout_flags.get('dp_replicate')} contradicts {path}'s "
                             f"data_parallel_replicate_degree {cfg.dp_replicate}")
        layout_flags["dp_replicate"] = cfg.layout["dp_replicate"] = cfg.dp_replicate
        cfg.where["dp_replicate"] = f"{path}: parallelism.data_parallel_replicate_degree"
    # the ranks left to shard over are one: DDP
    elif given("zero") and layout_flags.get("zero") != 0:
        raise InputError("--zero", "", f"{layout_flags.get('zero')} contradicts {path}, whose "
                         f"data_parallel_replicate_degree {cfg.dp_replicate} leaves one rank to shard over (DDP)")
    if dp // cfg.dp_replicate * (layout_flags.get("cp") or 1) == 1:
        layout_flags["zero"] = cfg.layout["zero"] = 0
        cfg.where["zero"] = f"{path}: parallelism.data_parallel_replicate_degree"
        cfg.notes.append(f"{path}: data_parallel_replicate_degree {cfg.dp_replicate} is all of DP: DDP (no sharding)")


def apply_run_config(ctx, path: str | None, cluster_arg: str, layout_flags: dict, recipe_flags: dict,
                     scalars: dict, model_arg: str | None = None) -> list:
    """Fill from a run configuration (:func:`costmodel.run_config.read_run_config`) the flags the user did
    not give (``ctx``: the command's typer context, which knows which options came from the command
    line), in place: ``layout_flags``, ``recipe_flags`` and ``scalars`` (gbs, seq_len, precision,
    nodes, stack; ``uneven_pp``, "any" when the run splits its own pipeline layers).  Returns the notes
    to print.

    Raises:
        InputError: the file is bad; a flag given on the command line contradicts it (both named); its
            GPUs per node differ from the cluster's; its model dimensions are not ``model_arg``'s.
    """
    if not path:
        return []
    from ..run_config import check_model_dims, read_run_config
    cfg = read_run_config(path)
    if model_arg:
        check_model_dims(cfg, load_model(model_arg))

    def given(name):
        src = ctx.get_parameter_source(name)
        return src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP")

    def merge(target, name, value, flag):
        if given(name):
            if target.get(name) != value:
                mine = target.get(name)
                spec = FIELD_SPECS.get(name) or SWITCHES_BY_NAME.get(name)
                if spec is not None:                # the switch as typed: --sp or --no-sp
                    flag = spec.flag_for(mine)
                said = "" if isinstance(mine, bool) else f"{mine!r} "
                raise InputError(flag, "", f"{said}contradicts {cfg.where.get(name, path)}, which gives {name} "
                                 f"{value!r}: drop the flag or edit the file")
            return
        target[name] = value
        scalars.setdefault("config_where", {})[flag] = cfg.where.get(name, f"{path}: {name}")
    for name, v in cfg.layout.items():
        merge(layout_flags, name, v, "--" + name.replace("_", "-"))
    for name, v in cfg.recipe.items():
        if name in ("gbs", "seq_len", "precision"):
            merge(scalars, name, v, "--" + name.replace("_", "-"))
        elif name in recipe_flags:
            merge(recipe_flags, name, v, "--" + name.replace("_", "-"))
    for name, where in cfg.unset.items():
        # resolved when the run starts (an environment variable, another key, a command-line override):
        # the framework's or the stack's default would price another run than the one launched
        if name != "gpus_per_node" and not given(name):
            file_, key = where.split(": ", 1)
            raise InputError(file_, key, f"is left to the run's launch (an interpolation): pass "
                             f"--{'nodes' if name == 'nodes' else name.replace('_', '-')} to say its value")
    if cfg.dropout is not None:
        scalars["dropout"], scalars["dropout_where"] = cfg.dropout, cfg.where["dropout"]
    if not given("stack"):
        scalars["stack"] = cfg.stack
    elif scalars.get("stack") not in STACKS_OF_FILE[cfg.stack]:
        # the file is that framework's: another stack's defaults (recompute vocabulary, fusions,
        # overlaps) would price a run the file does not describe
        raise InputError("--stack", "", f"{scalars.get('stack')!r} contradicts {path} (a {cfg.kind}, run by "
                         f"{' or '.join(STACKS_OF_FILE[cfg.stack])}): drop the flag or pass that stack")
    scalars["config_kind"] = cfg.kind
    scalars["uneven_pp"] = "any" if cfg.custom_pipeline_split else True
    if cfg.split_without_embedding and not cfg.custom_pipeline_split:
        scalars["split_without_embedding"] = cfg.split_without_embedding
    if cfg.pipeline_layout is not None:
        scalars["pp_layout"] = (cfg.pipeline_layout, cfg.where["pipeline_layout"])
    scalars["stage_split"] = cfg.stage_split
    if cfg.stage_split and model_arg and (layout_flags.get("pp") or 1) > 1:     # its layers-per-stage count sets VP
        vp = stages_per_rank(cfg.stage_split, load_model(model_arg).num_layers, layout_flags["pp"])
        if vp is not None:
            cfg.where["vp"] = cfg.stage_split["where"]
            merge(layout_flags, "vp", vp, "--vp")
    if cfg.gpus_per_node is not None:
        c = load_cluster(cluster_arg)
        if c.gpus_per_node != cfg.gpus_per_node:
            raise InputError(path, "trainer.devices", f"{cfg.gpus_per_node} GPUs per node; the cluster {c.key} has "
                             f"{c.gpus_per_node}")
    if cfg.nodes is not None:
        merge(scalars, "nodes", cfg.nodes, "--nodes")
    scalars["nodes_unset"] = cfg.nodes is None and not given("nodes")
    framework = cfg.kind.split()[0]
    for key, v in cfg.defaults.items():        # the framework's own value where the file and the flags are silent
        flag = "gbs" if key == "local_batch_size" else key
        if given(flag):
            continue
        cfg.notes.append(f"{path}: training.{key} not set: {framework}'s default {v}")
        if key == "seq_len":
            scalars["seq_len"], cfg.where["seq_len"] = v, f"{path}: training.seq_len ({framework}'s default)"
        else:
            cfg.recipe["local_batch_size"] = v
            if (layout_flags.get("pp") or 1) == 1 and not given("mbs") and "mbs" not in cfg.layout:
                layout_flags["mbs"] = v
    if cfg.dp_replicate > 1:             # torchtitan HSDP with the shard degree left to the world (-1)
        _world_replicas(path, cfg, cluster_arg, scalars, layout_flags, given)
    if "local_batch_size" in cfg.recipe and not given("gbs"):       # torchtitan: local batch x DP
        _, dp = _world_dp(path, cfg, cluster_arg, scalars, layout_flags)
        scalars["gbs"], cfg.where["gbs"] = cfg.recipe["local_batch_size"] * dp, \
            f"{path}: training.local_batch_size x DP {dp}"
    no_gbs = ([f"{path}: gives no global batch size: the --gbs default {scalars.get('gbs')} is used (pass --gbs)"]
              if "gbs" not in cfg.recipe and "local_batch_size" not in cfg.recipe and not given("gbs") else [])
    no_gbs += _layout_defaults_note(path, cfg, cluster_arg, given)
    switches = {w.name for w in RECIPE_SWITCHES}
    got = ", ".join(f"{k}={v}" for k, v in {**cfg.layout, **{k: scalars.get(k) for k in ("gbs", "seq_len", "precision",
                                                                                         "nodes") if k in cfg.where},
                                           **{k: v for k, v in cfg.recipe.items() if k in switches}}.items())
    if not got and not cfg.model:
        # a file that sets nothing read (keys misspelt, or every value interpolated) would change nothing
        raise InputError(path, "", f"sets nothing {cfg.kind} is read for (parallel degrees, batch sizes, "
                         "sequence length, precision, recipe switches, model dimensions)"
                         + (f": {'; '.join(cfg.notes)}" if cfg.notes else ": check its key names (README, 'Use', predict --config; costmodel/run_config.py)"))
    return [f"--config {path}: {got} (a flag given must agree with the file)"] + cfg.notes + no_gbs


def _layout_defaults_note(path: str, cfg, cluster_arg: str, given) -> list:
    """The note of what neither the run configuration nor a flag set among the world size, the ZeRO stage
    and the precision, with the default taken (a torchtitan TOML or a Megatron-Bridge override file cannot
    say its world size: torchrun's launch does); empty when all are set."""
    said = []
    if cfg.nodes is None and not given("nodes"):
        n = load_cluster(cluster_arg).nodes
        said.append(f"the world size: {n} node{'s' if n > 1 else ''} of {cluster_arg}, as its file counts them "
                    f"(pass --nodes)")
    if "zero" not in cfg.layout and not given("zero"):
        said.append("the ZeRO stage: --zero's default 1 (the distributed optimizer) where the stack has it")
    if "precision" not in cfg.recipe and not given("precision"):
        said.append("the precision: --precision's default (bf16; fp16 on GPUs without bf16)")
    return [f"{path}: not set in the file or by a flag: {'; '.join(said)}"] if said else []


#: the stacks that run a configuration file's framework: NeMo and Megatron-Bridge files are Megatron-core
#: runs (``--stack megatron`` prices them at Megatron-LM's own defaults), a torchtitan TOML torchtitan's
STACKS_OF_FILE = {"nemo": ("nemo", "megatron"), "torchtitan": ("torchtitan",)}


#: the names a layout rule's message uses (costmodel.layouts.validity) -> the flag a run configuration fills
_RULE_NAMES = (("gbs", "--gbs"), ("mbs", "--mbs"), ("DP", "--dp"), ("TP", "--tp"), ("PP", "--pp"), ("CP", "--cp"),
               ("EP", "--ep"), ("VP", "--vp"), ("ETP", "--etp"), ("seq_len", "--seq-len"))


def _layout_error_from_config(e: InputError, cw: dict) -> None:
    """Re-raise a broken layout rule naming the configuration's keys that set the numbers the rule
    names (its text before ' (got'), the first as the field; nothing when the file set none of them.

    Raises:
        InputError: naming the file and its key.
    """
    import re
    rule = e.message.split(" (got", 1)[0]
    keys = [cw[flag] for name, flag in _RULE_NAMES if flag in cw and re.search(rf"\b{name}\b", rule)]
    keys = [k for k in dict.fromkeys(keys) if ": " in k]
    if keys:
        file, key = keys[0].split(": ", 1)
        also = [k.split(": ", 1)[1] for k in keys[1:]]
        raise InputError(file, key, e.message + (f"; {', '.join(also)} also set there" if also else "")) from None


def check_pipeline_accounting(where: str | None, model, lay: dict) -> None:
    """A layout whose PP x VP divides L + 2 but not L runs only with the embedding and the loss counted as
    pipeline layers (costmodel.layouts.accounts_embedding_loss); ``where`` (``"FILE: keys"``, None when
    the run counts them or its file does not say) leaves them out, and Megatron-core then asserts that
    each pipeline rank's layers divide by VP (megatron/core/transformer/transformer_block.py).

    Raises:
        InputError: naming the file's VP key and the keys that would make the split valid.
    """
    from ..layouts import LayoutTable, accounts_embedding_loss
    if not where or not bool(accounts_embedding_loss(model, LayoutTable.from_rows([lay]))[0]):
        return
    file_, keys = where.split(": ", 1)
    raise InputError(file_, "model.virtual_pipeline_model_parallel_size", f"PP {lay['pp']} x VP {lay['vp']} does not "
                     f"divide num_layers {model.num_layers}, and the embedding and the loss are not counted as pipeline "
                     f"layers ({keys}): Megatron-core asserts each rank's layers divide by VP. Set "
                     "model.account_for_embedding_in_pipeline_split and model.account_for_loss_in_pipeline_split true, "
                     "or a VP that divides the layers")


@contextlib.contextmanager
def config_origin(scalars: dict):
    """Inside it, an InputError about a flag whose value the run configuration filled (``scalars``'
    ``config_where``, :func:`apply_run_config`) names the file and key instead: the user never typed
    the flag.

    Raises:
        InputError: re-raised, naming the configuration's key where it set the value.
    """
    try:
        yield
    except InputError as e:
        cw = scalars.get("config_where") or {}
        # a file without its node count runs on the cluster's default: say so where the GPUs do not fit
        hint = ("; the file gives no node count and --nodes is not given: the cluster's default node count "
                "(pass --nodes)") if scalars.get("nodes_unset") and " GPUs of " in e.message else ""
        if e.where == "layout" and cw:
            e = InputError(e.where, e.field, e.message + hint)
            _layout_error_from_config(e, cw)
        # a flag the file set, or the keys of a combined '--tp/--pp/--cp' that it set, all of them (a CP of
        # 3 is as much the culprit as the TP beside it)
        set_ = [cw[f] for f in (e.where.split("/") if e.where.startswith("--") else [e.where]) if f in cw]
        files = {x.split(": ", 1)[0] for x in set_ if ": " in x}
        w = (f"{files.pop()}: " + " / ".join(x.split(": ", 1)[1] for x in set_)) if len(set_) > 1 and len(files) == 1 \
            else next(iter(set_), None)
        kernel_from = cw.get("--attention-kernel", "")
        if w is None and e.field.startswith("attention.kernels.") and ": " in kernel_from:
            # the profile has no fit for the kernel the file's attention backend picks
            file, key = kernel_from.split(": ", 1)
            raise InputError(file, key, f"asks for the {e.field.rsplit('.', 1)[1]} attention kernel, which "
                             f"{e.where} has no fit for ({e.field}): set another backend in the file") from None
        if w is None or ": " not in w:
            raise (InputError(e.where, e.field, e.message + hint) if hint else e) from None
        file, key = w.split(": ", 1)
        raise InputError(file, key, f"{e.message} (the value of {e.where}, which this key sets){hint}") from None


def check_format(fmt: str | None) -> None:
    """Refuse an unknown ``--format`` before any work (costmodel.launch.FORMATS)."""
    from ..launch import FORMATS
    if fmt is not None and fmt not in FORMATS:
        raise InputError("--format", "", f"{fmt!r} is not one of {', '.join(FORMATS)}")


def with_fabric_flags(memory: bool = False):
    """Give a command the scale-out what-if options (``--scale-out-gbps``, ``--oversubscription``, ``--sharp``),
    with ``memory`` also ``--mem-headroom``, and pass their values as ``fabric_flags``
    (costmodel.specs.with_fabric).

    Raises (at import): the command has no ``fabric_flags`` parameter.
    """
    options = [
        ("scale_out_gbps", Optional[float], typer.Option(
            None, "--scale-out-gbps", help="What-if: every NIC at this line rate, Gb/s (default: the cluster file's).")),
        ("oversubscription", Optional[float], typer.Option(
            None, "--oversubscription", help="What-if: every switch tier's downlink:uplink ratio, 1 = non-blocking "
                                             "(needs a cluster file with inter_node.tiers, e.g. dgx-h100-superpod).")),
        ("sharp", Optional[bool], typer.Option(
            None, "--sharp/--no-sharp", help="What-if: the scale-out switches reduce all-reduces in the network "
                                             "(InfiniBand SHARP through NCCL CollNet; default: the cluster file's "
                                             "inter_node.sharp).")),
        ("domain_gpus", Optional[int], typer.Option(
            None, "--domain-gpus", help="What-if: the job uses this many GPUs (whole nodes) of each multi-node "
                                        "NVLink domain, e.g. 64 of a GB200 NVL72 rack's 72 (default: all of it)."))]
    if memory:
        options.append(("mem_headroom", Optional[float], typer.Option(
            None, "--mem-headroom", help="Share of each GPU's memory to keep free, 0 .. 0.9 (0.1 = 10%): a layout "
                                         "must fit in the rest (room for the caching allocator's fragmentation, "
                                         "which the memory model leaves out; default 0).")))
    return lambda fn: _append_options(fn, "fabric_flags", options)


def setup(model_arg, cluster_arg, nodes, gbs, seq_len, precision, profile_arg, stack="megatron",
          recipe_flags: dict | None = None, fabric_flags: dict | None = None):
    """Load the model, cluster, recipe and profile the common options name (notes on stderr).

    ``recipe_flags``: switch -> value from :func:`with_recipe_flags` (None: the stack's default);
    ``fabric_flags``: the what-ifs of :func:`with_fabric_flags` applied to the cluster.

    Returns:
        (ModelSpec, ClusterSpec, Recipe, Profile).
    Raises:
        InputError: an unknown or malformed model, cluster or profile, or a bad recipe value.
    """
    model = load_model(model_arg)
    cluster = with_fabric(load_cluster(cluster_arg, nodes), **(fabric_flags or {}))
    if precision is None:
        precision = "bf16" if "bf16" in cluster.gpu.peak_flops else "fp16"
    if seq_len is not None and seq_len < 1:
        raise InputError("--seq-len", "", f"must be >= 1, got {seq_len}")
    if seq_len is None and model.seq_len_assumed:
        why = (f"min(max_position_embeddings {model.max_positions}, 4096)" if model.max_positions
               else "4096 (it gives no max_position_embeddings either)")
        note(f"{model_arg} gives no training length (a catalog file's _seq_len; a Hugging Face "
             f"config.json has none): seq_len {model.seq_len} = {why}; pass --seq-len")
    note_plain_decoder(model_arg, model)
    check_recipe_flags(recipe_flags or {})
    given = {k: v for k, v in (recipe_flags or {}).items() if v is not None}
    if not model.is_moe:        # a dense model's MoE flags first: before the recipe checks their values
        check_moe_recipe(model, None, cluster.gpu, given)
    recipe = stack_recipe(get_stack(stack), gbs, seq_len or model.seq_len, precision, gpu=cluster.gpu,
                          **(recipe_flags or {}))
    if given.get("main_grads_dtype") == "fp32" and recipe.precision == "fp16":
        raise InputError("--main-grads-dtype", "", "fp32 with --precision fp16: the model prices fp16 training's "
                         "fp16 gradients (Megatron-LM's default; its --accumulate-allreduce-grads-in-fp32 is not "
                         "modelled): drop the flag")
    check_moe_recipe(model, recipe, cluster.gpu, given)
    check_flex_fabric(model, recipe, cluster)
    recipe, capped = softcap_recipe(model, recipe, given)
    if capped:
        note(capped)
    why = recompute_modules_problem(model, recipe.recomputed) if "recompute_modules" in given else None
    if why:
        raise InputError("--recompute-modules", "", why)
    profile = cluster_profile(cluster, profile_arg)
    check_profile_gpu(profile, cluster)
    for n in profile_notes(profile, cluster):
        note(n)
    return model, cluster, recipe, profile


def unfitted_power_note(p, c) -> str | None:
    """The note that the power coefficients of profile ``p`` were not all fitted on cluster ``c``'s GPU: the
    energy and the step under the power limit (the clock a kernel may draw) rest on them; None when all were."""
    if p.power is None or not p.power.not_fitted():
        return None
    return (f"the energy answer and the step under the power limit rest on power coefficients of {p.path} that were "
            f"not fitted on {c.gpu.name}: {', '.join(p.power.not_fitted())} (calibrate this cluster to replace them)")


def refuse_dense_etp(model, etp: int | None, tp: int | None) -> None:
    """Refuse an --etp the user gave for a dense model, whose MLP runs at the layout's TP, unless it is
    that TP (``etp``: the typed or pinned value, None when not given; ``tp``: the layout's TP, None
    where the search chooses it): predict --json writes a dense layout's ``etp`` as its TP, and a
    record passed back as flags must run.

    Raises:
        InputError: naming --etp.
    """
    if etp is not None and not model.is_moe and etp != tp:
        raise InputError("--etp", "", f"applies to MoE models: {model.name} is dense (its MLP runs at the layout's "
                         "TP: set --tp; --etp equal to --tp is accepted, as predict --json writes it)")


def check_profile_gpu_name(profile) -> None:
    """Refuse a profile whose ``gpu`` is no catalog GPU but one edit from one (``h100-sxm-80gbb``, a
    difflib ratio of 0.85 or more): a slip, which would price the cluster's GPU without the catalog
    GPU's checks.  A GPU outside the catalog whose name is further from every catalog GPU passes (a GPU
    file of one's own named one edit from a catalog GPU does not: ``calibrate show`` notes it instead).

    Raises:
        InputError: naming the profile file and its ``gpu`` field, with the catalog GPU meant."""
    import difflib
    from ..specs.hardware import list_gpus
    known = list_gpus()
    if profile.gpu in known:
        return
    near = difflib.get_close_matches(str(profile.gpu), known, n=1, cutoff=0.85)
    if near:
        raise InputError(profile.path, "gpu", f"{profile.gpu!r} is no GPU of the catalog; did you mean "
                         f"{near[0]}? (the GPU the profile was fitted for)")


def check_profile_gpu(profile, cluster: ClusterSpec) -> None:
    """Refuse a profile fitted for a catalog GPU of another class than the cluster's: a dense BF16 peak or
    a TDP more than 10 % apart.  Its efficiencies and powers describe other silicon (an A100 fit on an
    H100 predicts 74 % MFU at 373 W); a variant of the same die (H100 SXM vs its 96 GB HBM2e part at
    the same peak and TDP) only gets :func:`profile_notes`' note.

    A profile must count the SMs as the cluster's GPU file does: the GEMM model's waves run on the
    profile's ``num_sms`` (costmodel.gemm), so a GPU file that says otherwise would be ignored.

    Raises:
        InputError: naming ``--profile``, both GPUs and their peaks and TDPs; naming the profile's ``gpu``
            where it is a slip for a catalog GPU; or naming the GPU file's ``num_sms`` and the profile
            entry that contradicts it.
    """
    _check_own_gpu_file(profile, cluster)
    if profile.gpu != cluster.gpu.key:
        check_profile_gpu_name(profile)         # a slip for a catalog GPU would dodge the check below
        try:
            other = load_gpu(profile.gpu)
        except InputError:
            other = None                        # a GPU outside the catalog: only the note
        mine = cluster.gpu
        apart = lambda a, b: a is not None and b is not None and abs(a / b - 1) > 0.10   # noqa: E731
        pk = lambda g: g.peak_flops.get("bf16", g.peak_flops.get("fp16"))               # noqa: E731
        if other is not None and (apart(pk(other), pk(mine)) or apart(other.tdp_w, mine.tdp_w)):
            raise InputError("--profile", "", f"{profile.path} was fitted for {other.name} ({pk(other) / 1e12:.0f} "
                             f"TFLOP/s, {other.tdp_w:.0f} W), the cluster has {mine.name} ({pk(mine) / 1e12:.0f} "
                             f"TFLOP/s, {mine.tdp_w:.0f} W): its fits describe other silicon; fit one on this cluster "
                             "(costmodel calibrate fit ... --cluster"
                             + (f" --base {profile.gpu}: its kept sections are then scaled to this GPU's peaks, "
                                "bandwidths and TDP)" if not has_builtin_profile(mine.key) else ") or drop --profile"))
    for dt, g in profile.gemm.items():
        if g.num_sms != cluster.gpu.num_sms:
            _sm_count_error(profile, cluster, dt, g.num_sms)


def _check_own_gpu_file(profile, cluster: ClusterSpec) -> None:
    """Refuse a GPU file of the user's own that bears a catalog GPU's file name (its key) but describes
    another GPU (a dense peak or TDP more than 10 % from the catalog file's): the catalog GPU's built-in
    profile, fitted on that GPU, would price it silently.

    Raises:
        InputError: naming the GPU file, its values and the catalog GPU's."""
    from pathlib import Path
    from ..specs import hardware_dir
    mine = cluster.gpu
    own = (hardware_dir() / "gpus" / f"{mine.key}.yaml").resolve()
    builtin = bool(profile.path) and Path(profile.path).resolve().parent == (hardware_dir() / "profiles").resolve()
    if not builtin or profile.gpu != mine.key or not mine.path or Path(mine.path).resolve() == own or not own.exists():
        return
    cat = load_gpu(str(own))
    pk = lambda g: g.peak_flops.get("bf16", g.peak_flops.get("fp16"))               # noqa: E731
    if any(a and b and abs(a / b - 1) > 0.10 for a, b in ((pk(mine), pk(cat)), (mine.tdp_w, cat.tdp_w))):
        raise InputError(mine.path, "", f"named {mine.key} like the catalog's {cat.name} ({pk(cat) / 1e12:.0f} TFLOP/s, "
                         f"{cat.tdp_w:.0f} W), whose built-in profile {profile.path} was fitted on it, but it describes "
                         f"another GPU ({pk(mine) / 1e12:.0f} TFLOP/s, {mine.tdp_w:.0f} W): give the file a name of its "
                         f"own and fit its profile (costmodel calibrate fit ... --cluster --base {mine.key})")


def _sm_count_error(profile, cluster: ClusterSpec, dt: str, num_sms: int) -> None:
    """Refuse a profile whose GEMM waves were fitted on another SM count than the cluster's GPU file
    says: a catalog GPU file is the datasheet's, so the profile is of another GPU (named where it records
    one) and this GPU's profile is asked for; a file of the user's own may be the one that is wrong.

    Raises:
        InputError: naming the profile's ``gemm.<dt>.num_sms`` (a catalog GPU file) or the GPU file's
            ``num_sms`` (another GPU file)."""
    from pathlib import Path
    from ..specs import hardware_dir
    mine, gfile = cluster.gpu, cluster.gpu.path or cluster.gpu.key
    catalog = bool(mine.path) and Path(mine.path).resolve().parent == (hardware_dir() / "gpus").resolve()
    measured = (((profile.raw or {}).get("provenance") or {}).get("measured") or {}).get("gpu_names") or []
    records = f" ({profile.gpu}, its gpu field says)" if profile.gpu and profile.gpu != mine.key else \
        f" (its provenance names {', '.join(map(str, measured))})" if measured else ""
    own = ("drop --profile for the built-in one, or fit one on this cluster (costmodel calibrate fit ... --cluster)"
           if has_builtin_profile(mine.key) else "fit one on this cluster (costmodel calibrate fit ... --cluster)")
    if catalog:
        raise InputError(profile.path, f"gemm.{dt}.num_sms",
                         f"{num_sms} SMs, where {mine.name} has {mine.num_sms} ({gfile}): the profile was fitted for "
                         f"another GPU{records}; use a profile of {mine.key}: {own}")
    raise InputError(gfile, "num_sms",
                     f"{mine.num_sms} contradicts {profile.path}'s gemm.{dt}.num_sms {num_sms}, on which its GEMM "
                     f"waves were fitted: correct the GPU file, or, if the profile is of another GPU{records}, use a "
                     f"profile of this one: {own}")


def profile_notes(profile, cluster: ClusterSpec) -> list:
    """Warnings about a profile that may not speak for the cluster: fitted for another GPU, or from
    measurements the suite took on CPU (a plumbing check)."""
    out = []
    if profile.gpu != cluster.gpu.key:
        out.append(f"profile {profile.path} was fitted for {profile.gpu}, the cluster has {cluster.gpu.key}")
    devices = ((profile.raw.get("provenance") or {}).get("measured") or {}).get("devices") or []
    if "cpu" in devices:
        out.append(f"profile {profile.path} was fitted from a suite run on CPU: its numbers describe no GPU")
    g = cluster.gpu
    if g.hbm_cuda_bytes is None:
        # vendors quote binary gigabytes in decimal units: the datasheet figure read as decimal is a floor
        out.append(f"{g.path or g.key} gives no hbm_cuda_total: the memory limit is its datasheet capacity read as "
                   f"{g.hbm_bytes / 2**30:.1f} GiB, which may differ from what CUDA exposes (an 'H100 80GB' shows "
                   "81,106 MiB, 79.2 GiB): give nvidia-smi's FB memory Total less Reserved as hbm_cuda_total")
    return out


def fabric_notes(profile, cluster: ClusterSpec) -> list:
    """``costmodel: note:`` lines saying what priced the cluster's inter-node bandwidth where the profile's
    capture ran on another fabric (costmodel.nic_efficiency.inter_node_efficiency_note), and where the GPUs' PCIe
    links cap the NICs; printed with an answer, not before an error, which stays one line."""
    from ..nic_efficiency import inter_node_efficiency_note, pcie_bound_note
    across = cluster.num_gpus > cluster.scale_up_gpus
    lent = inter_node_efficiency_note(profile, cluster) if across else None
    out = [f"costmodel: note: {lent}"] if lent else []
    pcie = pcie_bound_note(cluster) if across else None
    return out + ([f"costmodel: note: {pcie}"] if pcie else [])


def context_line(model, cluster: ClusterSpec, recipe, profile=None) -> str:
    """One line naming the model, its size, the cluster and the recipe (its precision and the attention
    kernel it is priced with: a stack's default differs by GPU, costmodel.stacks); with ``profile``, a
    kernel it has no table for says what priced it (FlashAttention v1: FA2's speed over
    costmodel.specs.profile.FA2_OVER_FA1)."""
    attention = f"{recipe.attention_kernel} attention" if recipe.flash_attention else "unfused attention"
    if profile is not None and recipe.flash_attention and recipe.attention_kernel == "fa1" \
            and "fa1" not in profile.attention_kernels:
        from ..specs.profile import FA2_OVER_FA1
        attention += f" (no fa1 table for {profile.gpu}: fa2's speed / {FA2_OVER_FA1:g}, Dao 2023)"
    return (f"{model.display_name} ({model.params() / 1e9:.1f}B params) on {cluster.name}: "
            f"{cluster.nodes} x {cluster.gpus_per_node} {cluster.gpu.name}"
            + (f" (what-if: {cluster.what_if})" if cluster.what_if else "")
            + f"; gbs {recipe.gbs}, seq_len {recipe.seq_len}, {recipe.precision_label}, {attention}, "
            f"{recipe.optimizer} optimizer ({recipe.stack} stack)")


def _append_options(fn, param: str, options: list):
    """A command like ``fn`` with ``options`` ((name, annotation, typer.Option), ...) appended to its
    signature; their values reach ``fn`` as the dict ``param`` (name -> value).

    Raises (at import): ``fn`` has no ``param`` parameter.
    """
    sig = inspect.signature(fn, eval_str=True)
    if param not in sig.parameters:
        raise TypeError(f"{fn.__name__} needs a {param} parameter")
    own = [p for name, p in sig.parameters.items() if name != param]
    extra = [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=ann)
             for n, ann, opt in options]
    names = [n for n, _, _ in options]

    def command(**kwargs):
        return fn(**{param: {k: kwargs.pop(k) for k in names}}, **kwargs)
    params = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + extra
    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__name__, command.__doc__, command.__module__ = fn.__name__, fn.__doc__, fn.__module__
    return command


#: Recipe field -> its annotated type, for the flags the switches generate
_RECIPE_TYPES = {f.name: f.type for f in dataclasses.fields(Recipe)}


def with_recipe_flags(default_note: str = "the stack's"):
    """Give a command one option per recipe switch (costmodel.recipe_switches.RECIPE_SWITCHES), each
    defaulting to None (= ``default_note``), and pass their values as ``recipe_flags``.

    Raises (at import): the command has no ``recipe_flags`` parameter.
    """
    def option(w):
        if w.kind == "bool":
            return Optional[bool], typer.Option(None, f"{w.cli_flag}/--no-{w.cli_flag[2:]}",
                                                help=f"{w.help} (default: {default_note}.)")
        if w.kind == "float":
            # a Recipe field of whole numbers (doc_tokens) says so in the help; its check names the flag
            whole = _RECIPE_TYPES.get(w.name) in (int, "int")
            return Optional[float], typer.Option(None, w.cli_flag, help=f"{w.help} (default: {default_note}.)",
                                                 **({"metavar": "<int>"} if whole else {}))
        if w.kind == "modules":
            return Optional[str], typer.Option(None, w.cli_flag, help=f"Any of {', '.join(w.choices)}. {w.help} "
                                               f"(default: {default_note}.)")
        return Optional[str], typer.Option(None, w.cli_flag, help=f"{', '.join(w.choices)}. {w.help} "
                                           f"(default: {default_note}.)")
    return lambda fn: _append_options(fn, "recipe_flags", [(w.name, *option(w)) for w in RECIPE_SWITCHES])


def check_recipe_flags(flags: dict) -> None:
    """Check the given recipe switches' values against their choices.

    Raises:
        InputError: naming the flag and the accepted values.
    """
    for w in RECIPE_SWITCHES:
        v = flags.get(w.name)
        if v is not None and w.kind == "choice" and v not in w.choices:
            raise InputError(w.cli_flag, "", f"{v!r} is not one of {', '.join(w.choices)}")
        if v is not None and w.kind == "modules":
            recompute_module_list(v, w.cli_flag)


def _layout_option(f, from_log: bool, pin: bool = False) -> tuple:
    """(annotation, typer.Option) of one layout field: ``predict`` defaults, ``compare``'s None (the
    value then comes from the log), or ``recommend``'s None (``pin``: the search tries every value)."""
    unset = from_log or pin
    if f.kind == "bool":
        return Optional[bool], typer.Option(None if unset else f.default, f"--{f.name}/--no-{f.name}",
                                            help=f"{f.help}" + (" (default: from the log)." if from_log else "."))
    helptext = f"{f.help} Given, the search keeps it fixed (default: searched)." if pin else f.help
    if f.kind == "choice":
        return Optional[str], typer.Option(None if unset else f.default, f.cli_flag, help=helptext)
    return Optional[int], typer.Option(None if unset else f.default, f.cli_flag, help=helptext)


#: the layout fields recommend can pin: its own --no-sp / --no-overlap set the other two, and the
#: search does not vary the recomputed layer count
PIN_FIELDS = ("tp", "pp", "dp", "cp", "ep", "etp", "vp", "mbs", "recompute", "recompute_num_layers", "zero", "dp_replicate")


def with_layout_flags(from_log: bool = False, pin: bool = False):
    """Give a command one option per layout field (costmodel.layout_fields.LAYOUT_FIELDS; with ``pin``, the
    :data:`PIN_FIELDS`) and pass their values to it as ``layout_flags`` (field -> value; None where not
    given and ``from_log`` or ``pin``).

    The command's own parameters stay as they are; the layout options are appended to its signature.
    Raises (at import): the command has no ``layout_flags`` parameter.
    """
    fields_ = [f for f in LAYOUT_FIELDS if not pin or f.name in PIN_FIELDS]
    return lambda fn: _append_options(fn, "layout_flags", [(f.name, *_layout_option(f, from_log, pin)) for f in fields_])


def check_layout_flags(flags: dict) -> None:
    """Range-check the given layout flags (degrees >= 1, choices by name, integer ranges).

    Raises:
        InputError: naming the flag and the accepted values.
    """
    for f in LAYOUT_FIELDS:
        v = flags.get(f.name)
        if v is None:
            continue
        if f.kind == "degree" and not 1 <= v <= 2**24:
            raise InputError(f.cli_flag, "", f"must be between 1 and 2^24, got {v}")
        if f.kind == "choice" and v not in f.choices:
            raise InputError(f.cli_flag, "", f"{v!r} is not one of {', '.join(f.choices)}")
        if f.kind == "int" and not f.minimum <= v <= f.maximum:
            raise InputError(f.cli_flag, "", f"must be {f.minimum}-{f.maximum}, got {v}")
