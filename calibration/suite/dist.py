"""Process group of the suite: torchrun (env://), srun (SLURM_* variables) or a single process.

Launchers (the suite has none of its own):

* torchrun / ``python -m torch.distributed.run`` sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR and
  MASTER_PORT; ``init_process_group(init_method="env://")`` reads them (PyTorch docs,
  "torchrun (Elastic Launch)" and "Environment variable initialization").
* ``srun`` sets, per task, SLURM_PROCID (global rank), SLURM_STEP_NUM_TASKS / SLURM_NTASKS (world
  size), SLURM_LOCALID (rank on the node), SLURM_STEP_NODELIST / SLURM_JOB_NODELIST (hostlist
  expression such as ``gpu[01-04]``) (Slurm srun(1) man page, "OUTPUT ENVIRONMENT VARIABLES").
  :func:`launcher_env` turns these into the env:// variables; MASTER_ADDR is the first host of the
  node list (``scontrol show hostnames`` when available, else :func:`parse_nodelist`).
* No launcher: world size 1, no process group.

Backend: ``nccl`` on CUDA (ROCm builds of torch also report ``cuda`` and run RCCL behind the nccl
backend), ``gloo`` on CPU.  Nodes are found from the ranks' machines (kernel boot id, else
hostname; not from rank arithmetic), so block and cyclic srun distributions both give the right
intra-node groups.
"""
from __future__ import annotations

import datetime
import os
import re
import shutil
import socket
import subprocess
from dataclasses import dataclass, field

DEFAULT_MASTER_PORT = 29500
LAUNCHERS = ("auto", "env", "slurm", "none")


def _split_top(s: str) -> list[str]:
    """Split ``s`` at commas outside square brackets."""
    out, depth, cur = [], 0, ""
    for ch in s:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
        else:
            cur += ch
    out.append(cur)
    return [x.strip() for x in out if x.strip()]


def _expand(name: str) -> list[str]:
    m = re.search(r"\[([^\]]*)\]", name)
    if not m:
        return [name]
    head, tail = name[:m.start()], name[m.end():]
    out = []
    for part in m.group(1).split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-", 1)
            width = len(lo) if lo.startswith("0") else 0
            vals = [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
        else:
            vals = [part]
        for v in vals:
            out.extend(_expand(head + v + tail))
    return out


def parse_nodelist(nodelist: str) -> list[str]:
    """Expand a Slurm hostlist expression into host names, in order.

    Handles ``a1,b2``, ``gpu[01-04,07]`` (zero padding kept) and several bracket groups per name
    (``r[1-2]n[1-2]``: r1n1, r1n2, r2n1, r2n2), which is what ``scontrol show hostnames`` prints
    for them (Slurm scontrol(1)).

    Raises:
        ValueError: a malformed range such as ``gpu[a-b]``.
    """
    hosts = []
    for tok in _split_top(nodelist):
        try:
            hosts.extend(_expand(tok))
        except ValueError:
            raise ValueError(f"cannot read Slurm node list {nodelist!r} (at {tok!r})") from None
    return hosts


def first_host(nodelist: str) -> str:
    """The first host of a Slurm node list: ``scontrol show hostnames`` if it runs, else parsed here.

    Raises:
        ValueError: the list is empty or malformed.
    """
    if shutil.which("scontrol"):
        try:
            out = subprocess.run(["scontrol", "show", "hostnames", nodelist], capture_output=True,
                                 text=True, timeout=30, check=True).stdout.split()
            if out:
                return out[0]
        except (OSError, subprocess.SubprocessError):
            pass
    hosts = parse_nodelist(nodelist)
    if not hosts:
        raise ValueError(f"empty Slurm node list {nodelist!r}")
    return hosts[0]


def launcher_env(environ, launcher: str = "auto", master_port: int | None = None) -> dict:
    """The env:// rendezvous variables of this process, derived from its launcher.

    Args:
        environ: the process environment (a mapping; not modified).
        launcher: ``env`` (RANK/WORLD_SIZE set, e.g. by torchrun), ``slurm`` (srun's SLURM_* set),
            ``none`` (one process), or ``auto``: env if RANK and WORLD_SIZE are set, else slurm if
            SLURM_PROCID and a task count are set, else none.
        master_port: port for MASTER_PORT when the environment has none (default 29500); given
            explicitly, it overrides the environment's.
    Returns:
        dict with ``launcher`` (the one used), RANK, WORLD_SIZE, LOCAL_RANK (ints), MASTER_ADDR
        (str or None) and MASTER_PORT (int).
    Raises:
        ValueError: the launcher asked for is not detectable (its variables are missing) or a
            variable is not an integer.
    """
    if launcher not in LAUNCHERS:
        raise ValueError(f"--launcher {launcher!r}: expected one of {', '.join(LAUNCHERS)}")
    has_env = "RANK" in environ and "WORLD_SIZE" in environ
    ntasks = environ.get("SLURM_STEP_NUM_TASKS", environ.get("SLURM_NTASKS"))
    has_slurm = "SLURM_PROCID" in environ and ntasks is not None
    if launcher == "auto":
        launcher = "env" if has_env else "slurm" if has_slurm else "none"
    port = master_port if master_port is not None else int(environ.get("MASTER_PORT", DEFAULT_MASTER_PORT))

    def num(key, default=None):
        v = environ.get(key, default)
        if v is None:
            raise ValueError(f"--launcher {launcher}: environment variable {key} is not set")
        try:
            return int(str(v).split("(")[0])  # SLURM_NTASKS may read like "8(x4)" in odd set-ups
        except ValueError:
            raise ValueError(f"environment variable {key}={v!r} is not an integer") from None

    if launcher == "none":
        return dict(launcher="none", RANK=0, WORLD_SIZE=1, LOCAL_RANK=0, MASTER_ADDR=None, MASTER_PORT=port)
    if launcher == "env":
        return dict(launcher="env", RANK=num("RANK"), WORLD_SIZE=num("WORLD_SIZE"),
                    LOCAL_RANK=num("LOCAL_RANK", 0), MASTER_ADDR=environ.get("MASTER_ADDR", "127.0.0.1"),
                    MASTER_PORT=port)
    if not has_slurm:
        raise ValueError("--launcher slurm: SLURM_PROCID and SLURM_STEP_NUM_TASKS/SLURM_NTASKS are not set "
                         "(run under srun)")
    addr = environ.get("MASTER_ADDR")
    if not addr:
        nodelist = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST") \
            or environ.get("SLURM_NODELIST")
        addr = first_host(nodelist) if nodelist else "127.0.0.1"
    return dict(launcher="slurm", RANK=num("SLURM_PROCID"), WORLD_SIZE=int(str(ntasks).split("(")[0]),
                LOCAL_RANK=num("SLURM_LOCALID", 0), MASTER_ADDR=addr, MASTER_PORT=port)


def machine_key(host: str) -> str:
    """What identifies this rank's machine: the kernel boot id (``/proc/sys/kernel/random/boot_id``,
    shared by every container on one host and different on every host or VM), else the hostname."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            return f.read().strip() or host
    except OSError:
        return host


def node_layout(hosts: list[str], simulate_nodes: int = 0) -> list[list[int]]:
    """Global ranks of each node, nodes in order of their lowest rank.

    Args:
        hosts: machine key of every rank (index = global rank; :func:`machine_key`).
        simulate_nodes: 0 (default) groups by that key; N > 0 splits the ranks into N equal
            contiguous blocks instead (to exercise the inter-node code path on one machine).
    Returns:
        list over nodes of sorted rank lists.
    Raises:
        ValueError: ``simulate_nodes`` does not divide the number of ranks.
    """
    world = len(hosts)
    if simulate_nodes:
        if world % simulate_nodes:
            raise ValueError(f"--simulate-nodes {simulate_nodes} does not divide the {world} ranks")
        per = world // simulate_nodes
        return [list(range(i * per, (i + 1) * per)) for i in range(simulate_nodes)]
    order: dict[str, list[int]] = {}
    for r, h in enumerate(hosts):
        order.setdefault(h, []).append(r)
    return list(order.values())


@dataclass
class DistContext:
    """Where this process sits in the job.

    Attributes:
        rank, world_size, local_rank: global rank, number of ranks, rank on the node (launcher's).
        node_rank, n_nodes: this rank's node index and the number of nodes (from the machines).
        ranks_per_node: the smallest number of ranks on any node (nodes are expected to be equal).
        node_members: global ranks of every node (see :func:`node_layout`).
        host: this rank's hostname.
        device: ``torch.device`` the benchmarks run on (``cuda:i`` or ``cpu``).
        backend: ``"nccl"``, ``"gloo"`` or None (no process group: world size 1).
        launcher: ``"env"``, ``"slurm"`` or ``"none"``.
        notes: (level, message) pairs about the set-up, for note records.
    """

    rank: int
    world_size: int
    local_rank: int
    node_rank: int
    n_nodes: int
    ranks_per_node: int
    node_members: list
    host: str
    device: object
    backend: str | None
    launcher: str
    notes: list = field(default_factory=list)

    @property
    def is_cuda(self) -> bool:
        """True when the benchmarks run on a GPU (CUDA or ROCm)."""
        return self.device.type == "cuda"

    @property
    def distributed(self) -> bool:
        """True when a process group is initialised (world size > 1)."""
        return self.backend is not None


def choose_device(device: str, local_rank: int):
    """``torch.device`` for ``--device auto|cuda|cpu``; auto is cuda when torch sees a GPU.

    The GPU is ``local_rank`` modulo the visible GPU count (one rank per GPU, as torchrun and
    ``srun --ntasks-per-node=<gpus>`` place them).

    Raises:
        ValueError: ``cuda`` asked for but torch has no GPU, or an unknown choice.
    """
    import torch
    if device not in ("auto", "cuda", "cpu"):
        raise ValueError(f"--device {device!r}: expected auto, cuda or cpu")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        if not torch.cuda.is_available():
            raise ValueError("--device cuda: torch sees no GPU (torch.cuda.is_available() is False)")
        idx = local_rank % torch.cuda.device_count()
        torch.cuda.set_device(idx)
        return torch.device("cuda", idx)
    return torch.device("cpu")


def setup(device: str = "auto", launcher: str = "auto", master_port: int | None = None,
          timeout_s: float = 1800.0, simulate_nodes: int = 0, environ=None) -> DistContext:
    """Initialise the process group (when world size > 1) and find the node layout.

    Args:
        device: ``auto``, ``cuda`` or ``cpu``.
        launcher, master_port: see :func:`launcher_env`.
        timeout_s: process-group timeout for every collective (a hung rank fails the job after it).
        simulate_nodes: see :func:`node_layout`.
        environ: environment to read (default ``os.environ``; the env:// variables derived from
            Slurm are written into ``os.environ`` for torch).
    Returns:
        :class:`DistContext`.
    Raises:
        ValueError: bad launcher variables or device choice (see :func:`launcher_env`).
        RuntimeError: torch.distributed failed to rendezvous.
    """
    import torch.distributed as dist
    environ = os.environ if environ is None else environ
    env = launcher_env(environ, launcher, master_port)
    rank, world, local = env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"]
    dev = choose_device(device, local)
    host = socket.gethostname()
    backend = None
    notes = []
    if world > 1:
        backend = "nccl" if dev.type == "cuda" else "gloo"
        for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
            os.environ[k] = str(env[k])
        kw = dict(backend=backend, init_method="env://", rank=rank, world_size=world,
                  timeout=datetime.timedelta(seconds=timeout_s))
        if dev.type == "cuda":
            kw["device_id"] = dev
        try:
            dist.init_process_group(**kw)
        except TypeError:  # torch < 2.3 has no device_id
            kw.pop("device_id", None)
            dist.init_process_group(**kw)
        hosts = [None] * world
        dist.all_gather_object(hosts, machine_key(host))
    else:
        hosts = [machine_key(host)]
    members = node_layout(hosts, simulate_nodes)
    node_rank = next(i for i, m in enumerate(members) if rank in m)
    sizes = sorted({len(m) for m in members})
    if len(sizes) > 1:
        notes.append(("warning", f"nodes have unequal rank counts {sizes}; intra-node groups use "
                                 f"{sizes[0]} ranks per node"))
    if simulate_nodes:
        notes.append(("warning", f"--simulate-nodes {simulate_nodes}: 'inter_node' records were measured "
                                 "between ranks that may share a host; not for fitting"))
    return DistContext(rank=rank, world_size=world, local_rank=local, node_rank=node_rank,
                       n_nodes=len(members), ranks_per_node=sizes[0], node_members=members, host=host,
                       device=dev, backend=backend, launcher=env["launcher"], notes=notes)


def barrier(ctx: DistContext, group=None):
    """World (or ``group``) barrier, then wait for this GPU's queued work; no-op at world size 1."""
    import torch
    import torch.distributed as dist
    if ctx.distributed:
        if ctx.is_cuda and group is None:
            dist.barrier(device_ids=[ctx.device.index])
        else:
            dist.barrier(group=group)
    if ctx.is_cuda:
        torch.cuda.synchronize(ctx.device)


def gather_text(ctx: DistContext, text: str) -> list[str] | None:
    """Every rank's ``text`` on rank 0 (list indexed by rank), None on the other ranks.

    Uses ``torch.distributed.gather_object`` (pickled through the backend; with nccl through this
    rank's GPU, which :func:`choose_device` has made current).
    """
    import torch.distributed as dist
    if not ctx.distributed:
        return [text]
    out = [None] * ctx.world_size if ctx.rank == 0 else None
    dist.gather_object(text, out, dst=0)
    return out


def shutdown(ctx: DistContext):
    """Destroy the process group (if any); safe to call twice."""
    import torch.distributed as dist
    if ctx.distributed and dist.is_initialized():
        dist.destroy_process_group()
