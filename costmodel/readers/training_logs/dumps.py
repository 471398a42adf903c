"""Argument dumps (Megatron), the experiment configuration (NeMo 1) and the layout they describe."""
from __future__ import annotations

import math
import re

from ...errors import InputError
from ...formats import FP8_FORMATS
from .lines import _short, _TIMESTAMP

#: Megatron-FSDP's data_parallel_sharding_strategy as the ZeRO stage it shards like (Megatron-core
#: DistributedDataParallelConfig: no_shard, optim, optim_grads, optim_grads_params)
MEGATRON_FSDP_SHARDING = {"no_shard": 0, "optim": 1, "optim_grads": 2, "optim_grads_params": 3}

_ARGS_BEGIN = re.compile(r"^\s*-{3,}\s*arguments\s*-{3,}\s*$")
_ARGS_END = re.compile(r"^\s*-{3,}\s*end of arguments\s*-{3,}\s*$")
_ARG_LINE = re.compile(r"^\s*([A-Za-z_]\w*)\s+\.{2,}\s?(.*?)\s*$")
_WORLD = re.compile(r"using world size:\s*\S")
_WORLD_ITEMS = re.compile(r"(?<![\w-])(world size|data-parallel[- ]size|context-parallel size|tensor-model-parallel size|"
                          r"pipeline-model-parallel size|expert-model-parallel size):\s*([^,\s]+)")
_STARTUP_NAMES = {"world size": "world_size", "data-parallel size": "data_parallel_size",
                  "data-parallel-size": "data_parallel_size", "context-parallel size": "context_parallel_size",
                  "tensor-model-parallel size": "tensor_model_parallel_size",
                  "pipeline-model-parallel size": "pipeline_model_parallel_size",
                  "expert-model-parallel size": "expert_model_parallel_size"}
_PARAMS_DTYPE = re.compile(r"using (torch\.\w+) for parameters")
_PADDED_VOCAB = re.compile(r"padded vocab \(size: \d+\) with \d+ dummy tokens \(new size: (\d+)\)")
_NEMO_CONFIG = re.compile(r"\*+\s*Experiment configuration\s*\*+")
_NEMO_HEADER = re.compile(r"^\s*\[NeMo [IWED] [^\]]*\]")


def _arg_value(s: str):
    s = s.strip()
    if s in ("None", "null", ""):
        return None
    if s in ("True", "true"):
        return True
    if s in ("False", "false"):
        return False
    try:
        return int(s)
    except ValueError:
        pass
    try:
        return float(s)
    except ValueError:
        return s


def _stray_in_dump(segs, begin: int, j: int) -> bool:
    """Whether segment ``j``, not an argument line, is a stray line inside the dump that starts at
    ``begin`` rather than its end: a line of another rank (their output interleaves), or one followed
    by an argument line or the dump's end."""
    if segs[j].rank is not None and segs[begin].rank is not None and segs[j].rank != segs[begin].rank:
        return True
    nxt = segs[j + 1].text if j + 1 < len(segs) else ""
    return bool(_ARG_LINE.match(nxt) or _ARGS_END.match(nxt))


def _megatron_args(segs, path, warnings):
    """``(args, complete, startup)`` from the argument dump and the start-up summary lines; ``startup``:
    the names only the start-up lines gave.

    Raises:
        InputError: the log contradicts itself (a start-up line against the dump or an earlier
            start-up line, a world size other than the product of its degrees, bf16 and fp16 both on,
            which Megatron's arguments.py refuses): two runs in one file, or an edited log, never
            one configuration; the first contradiction, naming both lines.
    """
    errors = []
    args, summary, arg_line, summary_line = {}, {}, {}, {}
    complete = False
    i = 0
    while i < len(segs):
        t = _TIMESTAMP.sub("", segs[i].text)
        if _ARGS_BEGIN.match(t):
            j = i + 1
            closed = False
            while j < len(segs):
                u = segs[j].text
                if _ARGS_END.match(u):
                    closed = True
                    break
                a = _ARG_LINE.match(u)
                if not a and _stray_in_dump(segs, i, j):
                    warnings.append(f"{path}:{segs[j].line}: a line inside the argument dump that starts at line "
                                    f"{segs[i].line} is not an argument ({'another rank' if segs[j].rank != segs[i].rank else 'a stray line'}"
                                    f": {_short(u, 60)}): skipped, the dump read on")
                    j += 1
                    continue
                if not a:
                    break
                key, v = a.group(1), _arg_value(a.group(2))
                if key in args and args[key] != v:
                    errors.append((segs[j].line, f"{key} {v!r} contradicts {args[key]!r} at line {arg_line[key]}: "
                                   "two runs in one log (split the file)"))
                args.setdefault(key, v)
                arg_line.setdefault(key, segs[j].line)
                j += 1
            complete = complete or closed
            if not closed:
                at = f"{path}:{segs[j].line}" if j < len(segs) else f"{path}: end of file"
                warnings.append(f"{at}: the argument dump that starts at line {segs[i].line} ends without "
                                f"'end of arguments' (excerpt or truncated log); read {j - i - 1} argument lines")
            i = j + 1
            continue
        if _WORLD.search(t):
            found = _WORLD_ITEMS.findall(t)
            bad = [(k, v) for k, v in found if not v.isdigit()]
            if bad:
                errors.append((segs[i].line, f"the start-up line's {bad[0][0]} {bad[0][1]!r} is not a whole number"))
            items = {_STARTUP_NAMES[k]: int(v) for k, v in found if v.isdigit()}
            deg = [items.get(k) for k in ("data_parallel_size", "context_parallel_size", "tensor_model_parallel_size",
                                          "pipeline_model_parallel_size")]
            world = items.get("world_size")
            if world is not None and None not in deg and deg[0] * deg[1] * deg[2] * deg[3] != world:
                errors.append((segs[i].line, f"world size {world} is not data x context x tensor x pipeline "
                              f"parallel size {' x '.join(map(str, deg))}"))
            for name, v in items.items():
                if name in summary and summary[name] != v:
                    errors.append((segs[i].line, f"{name} {v} contradicts {summary[name]} at line "
                                   f"{summary_line[name]}: two runs in one log (split the file)"))
                summary.setdefault(name, v)
                summary_line.setdefault(name, segs[i].line)
        p = _PARAMS_DTYPE.search(t)
        if p:
            summary.setdefault("params_dtype", p.group(1))
        p = _PADDED_VOCAB.search(t)
        if p:
            summary.setdefault("padded_vocab_size", int(p.group(1)))
        i += 1
    startup = frozenset(k for k in summary if k not in args)
    for k, v in summary.items():
        if k in args and k in arg_line and args[k] != v and isinstance(args[k], int):
            # one run prints both from the same arguments: two runs in one file, or a log edited by hand
            errors.append((summary_line[k], f"the start-up line's {k} {v} contradicts the argument dump's "
                           f"{args[k]} (line {arg_line[k]}): Megatron prints both from one set of arguments, so this "
                           "is two runs in one log (split the file) or an edited log"))
        args.setdefault(k, v)
    if args.get("bf16") is True and args.get("fp16") is True:
        errors.append((arg_line.get("fp16", arg_line.get("bf16", "?")), "the argument dump has both bf16 and fp16 "
                       "True, which Megatron refuses (megatron/training/arguments.py: fp16 asserts not bf16)"))
    if errors:
        raise InputError(f"{path}:{errors[0][0]}", "", errors[0][1])
    return args, complete, startup


def _nemo_config(segs, path, warnings):
    """YAML config printed by NeMo 1 after 'Experiment configuration' (4-space indented under a [NeMo I] header)."""
    import yaml

    for i, s in enumerate(segs):
        if not _NEMO_CONFIG.search(s.text):
            continue
        j = i + 1
        while j < len(segs) and not _NEMO_HEADER.match(segs[j].text):
            j += 1
        block, k = [], j + 1
        while k < len(segs) and not _NEMO_HEADER.match(segs[k].text) and \
                (segs[k].text.startswith("    ") or segs[k].text.startswith("\t")):
            block.append(segs[k].text[4:] if segs[k].text.startswith("    ") else segs[k].text[1:])
            k += 1
        if not block:
            continue
        try:
            cfg = yaml.safe_load("\n".join(block))
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            line = segs[j + 1 + mark.line].line if mark is not None and j + 1 + mark.line < len(segs) else segs[j].line
            warnings.append(f"{path}:{line}: NeMo experiment configuration is not valid YAML ({e.__class__.__name__});"
                            f" config not read")
            return {}
        return cfg if isinstance(cfg, dict) else {}
    return {}


def _nemo_args(cfg):
    args = {}
    model = cfg.get("model") or {}
    if isinstance(model, dict):
        for k, v in model.items():
            if not isinstance(v, (dict, list)):
                args[k] = v
        optim = model.get("optim")
        if isinstance(optim, dict) and optim.get("name"):
            args["optim.name"] = optim["name"]
    trainer = cfg.get("trainer") or {}
    if isinstance(trainer, dict):
        for k in ("devices", "num_nodes", "precision"):
            if k in trainer:
                args[f"trainer.{k}"] = trainer[k]
    return args


# ---------------------------------------------------------------------------------------------- layout
#: the arguments :func:`_layout` reads as counts (Megatron's names; NeMo 1's model keys are the same,
#: its trainer's prefixed): a value that is not a whole number >= 1 describes no run
COUNT_ARGS = ("tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size",
              "expert_model_parallel_size", "expert_tensor_parallel_size", "data_parallel_size", "world_size",
              "trainer.devices", "trainer.num_nodes", "virtual_pipeline_model_parallel_size",
              "num_layers_per_virtual_pipeline_stage", "micro_batch_size", "global_batch_size", "seq_length",
              "encoder_seq_length", "num_layers", "hidden_size", "ffn_hidden_size", "num_attention_heads",
              "num_query_groups", "padded_vocab_size", "vocab_size", "num_experts", "num_moe_experts",
              "moe_router_topk", "moe_ffn_hidden_size", "moe_shared_expert_intermediate_size", "kv_lora_rank",
              "num_distributed_optimizer_instances",
              "q_lora_rank", "qk_head_dim", "qk_pos_emb_head_dim", "v_head_dim", "kv_channels",
              "max_position_embeddings")
#: the largest logged count taken: 2^53, past which float64 arithmetic loses units
MAX_LOGGED_COUNT = 2 ** 53
#: counts that may be 0 (Megatron's multi-token-prediction depth: none)
COUNT_ARGS_FROM_0 = ("mtp_num_layers",)
#: probabilities the model reads (dropout on: either above 0)
PROBABILITY_ARGS = ("hidden_dropout", "attention_dropout")


def check_logged_counts(args: dict, path) -> None:
    """Refuse a logged layout or model count that describes no run, naming the log and the key: not a
    whole number >= 1, or a virtual pipeline size that contradicts the layers per virtual stage
    (num_layers, plus the embedding and the loss where accounted, = PP x VP x
    num_layers_per_virtual_pipeline_stage, Megatron's arguments.py).

    Raises:
        InputError: naming the file and the argument.
    """
    for k in COUNT_ARGS:
        v = args.get(k)
        if v is not None and (isinstance(v, bool) or _int_or_none(v) is None or _int_or_none(v) < 1):
            raise InputError(path, k, f"{v!r} is not a whole number >= 1 (no run has it)")
        if v is not None and _int_or_none(v) > MAX_LOGGED_COUNT:
            raise InputError(path, k, f"{v!r} is above 2^53, a count the model cannot compute with (no run has it)")
    for k in COUNT_ARGS_FROM_0:
        v = args.get(k)
        if v is not None and (isinstance(v, bool) or _int_or_none(v) is None or _int_or_none(v) < 0):
            raise InputError(path, k, f"{v!r} is not a whole number >= 0 (no run has it)")
    for k in PROBABILITY_ARGS:
        v = args.get(k)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1):
            raise InputError(path, k, f"{v!r} is not a dropout probability in [0, 1)")
    gran = args.get("recompute_granularity")
    if gran is not None and str(gran).lower() not in ("full", "selective"):
        raise InputError(path, "recompute_granularity", f"{gran!r} is not one of full, selective (Megatron-LM's "
                         "choices)")
    deg = [_int_or_none(args.get(k)) for k in ("tensor_model_parallel_size", "pipeline_model_parallel_size",
                                                "context_parallel_size", "data_parallel_size")]
    world = _int_or_none(args.get("world_size"))
    if world and None not in deg and deg[0] * deg[1] * deg[2] * deg[3] != world:
        raise InputError(path, "data_parallel_size", f"{deg[3]}: TP {deg[0]} x PP {deg[1]} x CP {deg[2]} x DP "
                         f"{deg[3]} is not the world_size {world} the dump prints (Megatron-LM derives DP from it)")
    heads, groups = (_int_or_none(args.get(k)) for k in ("num_attention_heads", "num_query_groups"))
    if heads and groups and args.get("group_query_attention") is not False and heads % groups:
        raise InputError(path, "num_query_groups", f"{groups} does not divide num_attention_heads {heads} (Megatron "
                         "asserts it)")
    if args.get("tp_comm_overlap") is True and args.get("sequence_parallel") is False \
            and (_int_or_none(args.get("tensor_model_parallel_size")) or 1) > 1:
        raise InputError(path, "tp_comm_overlap", "True without sequence_parallel, which Megatron-LM refuses "
                         "(validate_args: TP-comm overlap needs sequence parallelism)")
    experts, topk = (_int_or_none(args.get(k)) for k in ("num_experts", "moe_router_topk"))
    experts = experts or _int_or_none(args.get("num_moe_experts"))
    if experts and experts > 1 and topk and topk > experts:
        raise InputError(path, "moe_router_topk", f"{topk} exceeds the {experts} experts (num_experts): a token "
                         "cannot pick more experts than there are")
    vp, per, pp = (_int_or_none(args.get(k)) for k in ("virtual_pipeline_model_parallel_size",
                                                       "num_layers_per_virtual_pipeline_stage",
                                                       "pipeline_model_parallel_size"))
    L, extra = _pipeline_layers(args)
    if vp and per and L and pp and args.get("num_virtual_stages_per_pipeline_rank") is None and vp * per * pp != L:
        raise InputError(path, "virtual_pipeline_model_parallel_size", f"{vp} contradicts num_layers_per_virtual_"
                         f"pipeline_stage {per}: {_int_or_none(args.get('num_layers'))} layers{extra} over PP {pp} make VP "
                         f"{L / (pp * per):g}")


def _pipeline_layers(args) -> tuple:
    """(layers, text) the pipeline split counts, as Megatron-LM's validate_args derives VP from
    ``num_layers_per_virtual_pipeline_stage``: the transformer layers plus one for the embedding and one
    for the loss where ``account_for_*_in_pipeline_split`` is on (megatron/training/arguments.py); the
    text says what was added (empty when nothing)."""
    L = _int_or_none(args.get("num_layers"))
    acc = [k for k in ("embedding", "loss") if args.get(f"account_for_{k}_in_pipeline_split") is True]
    if L is None:
        return None, ""
    return L + len(acc), (f" and the {' and the '.join(acc)} ({L + len(acc)} pipeline layers)" if acc else "")


def _int_or_none(v):
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    return int(f) if math.isfinite(f) and f == int(f) else None


def _layout(args, complete=False):
    def get(*names):
        for n in names:
            if n in args and args[n] is not None:
                return args[n]
        return None

    tp = _int_or_none(get("tensor_model_parallel_size"))
    pp = _int_or_none(get("pipeline_model_parallel_size"))
    cp = _int_or_none(get("context_parallel_size"))
    ep = _int_or_none(get("expert_model_parallel_size"))
    etp = _int_or_none(get("expert_tensor_parallel_size"))
    world = _int_or_none(get("world_size"))
    if world is None and get("trainer.devices") is not None and get("trainer.num_nodes") is not None:
        d, n = _int_or_none(get("trainer.devices")), _int_or_none(get("trainer.num_nodes"))
        world = d * n if d and n else None
    has_cp_key = "context_parallel_size" in args
    if cp is None and tp is not None and not has_cp_key:
        cp = 1  # Megatron before context parallelism, or NeMo without the key
    if ep is None and tp is not None and complete and "expert_model_parallel_size" not in args:
        ep = 1  # a whole dump without the key: a version before expert parallelism
    dp = _int_or_none(get("data_parallel_size"))
    if dp is None and world and tp and pp and cp and world % (tp * pp * cp) == 0:
        dp = world // (tp * pp * cp)
    vp = _int_or_none(get("virtual_pipeline_model_parallel_size"))
    per_stage = _int_or_none(get("num_layers_per_virtual_pipeline_stage"))
    # Megatron-LM's validate_args: VP given per rank (uneven splits), else the accounted layers over PP x per
    vp = vp if vp is not None else _int_or_none(get("num_virtual_stages_per_pipeline_rank"))
    num_layers, split_layers = _int_or_none(get("num_layers")), _pipeline_layers(args)[0]
    if vp is None and per_stage and split_layers and pp and split_layers % (pp * per_stage) == 0:
        vp = split_layers // (pp * per_stage)
    if vp is None and pp == 1:
        vp = 1
    if vp is None and pp is not None and (complete or any(k in args for k in (
            "virtual_pipeline_model_parallel_size", "num_layers_per_virtual_pipeline_stage"))):
        vp = 1  # the dump shows no interleaving (a complete dump without the keys: a version without it)

    gran = get("recompute_granularity", "activations_checkpoint_granularity")
    if isinstance(gran, str) and gran.lower() in ("full", "selective"):
        recompute = gran.lower()
    elif get("recompute_activations") is True:
        recompute = "selective"
    elif get("checkpoint_activations") is True or get("activations_checkpoint_method") is not None:
        recompute = "full"
    elif any(k in args for k in ("recompute_granularity", "recompute_activations", "checkpoint_activations",
                                 "activations_checkpoint_granularity")):
        recompute = "none"
    else:
        recompute = None

    # Megatron's block method recomputes N layers of each chunk; the uniform one (its default) recomputes
    # every layer, checkpointing groups of N (NeMo: activations_checkpoint_method / _num_layers)
    method = get("recompute_method", "activations_checkpoint_method")
    n_block = _int_or_none(get("recompute_num_layers", "activations_checkpoint_num_layers"))
    if recompute != "full":
        recompute_num_layers = 0 if recompute is not None else None
    elif str(method).lower() == "block" and n_block is not None and n_block > 0:
        recompute_num_layers = n_block
    else:
        recompute_num_layers = 0

    sp = get("sequence_parallel")
    sp = bool(sp) if isinstance(sp, bool) else None

    zero = None
    if get("deepspeed") is True or "zero_stage" in args:
        zero = _int_or_none(get("zero_stage"))
    if zero is None:
        # Megatron-LM's ZeRO-3: PyTorch FSDP2 (--use-torch-fsdp2, which replaces the distributed optimizer:
        # arguments.py) or Megatron-FSDP (--use-megatron-fsdp) sharding parameters too (optim_grads_params)
        if get("use_torch_fsdp2") is True:
            zero = 3
        elif get("use_megatron_fsdp") is True:      # its --data-parallel-sharding-strategy default: optim_grads_params
            zero = MEGATRON_FSDP_SHARDING.get(str(get("data_parallel_sharding_strategy")), 3)
        elif get("use_distributed_optimizer") is True:
            zero = 1
        elif isinstance(get("optim.name"), str):
            zero = 1 if "distributed" in get("optim.name") else 0
        elif "use_distributed_optimizer" in args:
            zero = 0

    precision = None
    fp8 = get("fp8")
    tprec = str(get("trainer.precision") or "").lower()
    pdt = str(get("params_dtype") or "")
    if get("fp4") not in (None, False) or get("fp4_format") not in (None, False):
        precision = "nvfp4"                 # --fp4-format e2m1: Transformer Engine's NVFP4 recipe
    elif fp8 is True or str(fp8).lower() in FP8_FORMATS:     # NeMo configs write fp8: True
        precision = "mxfp8" if str(get("fp8_recipe") or "").lower() == "mxfp8" else "fp8"
    elif fp8 not in (None, False, "None"):
        precision = None                    # a value Megatron does not write: not read as any precision
    elif get("bf16") is True or "bf16" in tprec or "bfloat16" in pdt:
        precision = "bf16"
    elif get("fp16") is True or tprec in ("16", "16-mixed", "fp16") or "float16" in pdt:
        precision = "fp16"
    elif get("bf16") is False and get("fp16") is False:
        precision = "fp32"

    heads = _int_or_none(get("num_attention_heads"))
    groups = _int_or_none(get("num_query_groups"))
    gqa = get("group_query_attention")
    kv = groups if (groups and gqa is not False) else (heads if heads and (gqa is False or groups is None) else None)
    return {
        "tp": tp, "pp": pp, "dp": dp, "cp": cp, "ep": ep, "etp": etp, "vp": vp,
        "mbs": _int_or_none(get("micro_batch_size")), "gbs": _int_or_none(get("global_batch_size")),
        "seq_len": _int_or_none(get("seq_length", "encoder_seq_length")),
        "recompute": recompute, "recompute_num_layers": recompute_num_layers, "sp": sp, "zero": zero, "precision": precision, "world_size": world,
        # HSDP: Megatron-core's distributed-optimizer instances (a torchtitan mesh's replicate degree); a whole
        # dump without the key is a version before them
        "dp_replicate": _int_or_none(get("num_distributed_optimizer_instances"))
        or (1 if complete and tp is not None and "num_distributed_optimizer_instances" not in args else None),
        "num_layers": num_layers, "hidden": _int_or_none(get("hidden_size")),
        "ffn_hidden": _int_or_none(get("ffn_hidden_size")), "num_heads": heads, "num_kv_heads": kv,
        "vocab": _int_or_none(get("padded_vocab_size", "vocab_size")),
        "num_experts": _int_or_none(get("num_experts", "num_moe_experts")),
        "moe_topk": _int_or_none(get("moe_router_topk")),
        # Megatron's expert width (moe_ffn_hidden_size; ffn_hidden_size then is the dense layers')
        "moe_ffn_hidden": _int_or_none(get("moe_ffn_hidden_size")),
    }
