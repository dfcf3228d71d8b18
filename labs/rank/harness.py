"""One rank: runs inside the sandbox, in a process forked from the zygote.

The rank drops to its own uid, joins the process group, loads the student's
code, calls the student's functions on its own inputs and streams each output
back to the zygote over its private socket. It never sees expected outputs,
other ranks' inputs, or the checks.

Nothing reported from here is trusted as a verdict: outputs are compared by the
judge outside the sandbox, and wire bytes are measured by the zygote from the
kernel. The collective-call counts below are a courtesy for honest mistakes
(a student can undo any in-process wrapper) and only ever fail a check.
"""

from __future__ import annotations

import io
import linecache
import os
import resource
import sys
import tempfile
import traceback
import types
from datetime import timedelta
from typing import Any

from labs.rank import channel, confine, script, trees

SOURCE_NAME = "submission.py"
MAX_INPUT = 1 << 30
COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "all_gather_coalesced",
    "all_reduce_coalesced",
    "all_to_all",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
    "broadcast",
    "broadcast_object_list",
    "gather",
    "gather_object",
    "reduce",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "scatter",
    "scatter_object_list",
    "_all_gather_base",
    "_reduce_scatter_base",
    "all_gather_single",
    "reduce_scatter_single",
)
GROUP_COLLECTIVES = (
    "allreduce",
    "allreduce_coalesced",
    "allgather",
    "allgather_coalesced",
    "allgather_into_tensor_coalesced",
    "_allgather_base",
    "all_gather_single",
    "all_gather_single_coalesced",
    "reduce_scatter",
    "_reduce_scatter_base",
    "reduce_scatter_single",
    "reduce_scatter_single_coalesced",
    "reduce_scatter_tensor_coalesced",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "alltoall",
    "alltoall_base",
    "all_to_all_single",
    "barrier",
    "monitored_barrier",
)


def drop_privileges(uid: int, limits: dict[str, Any], sandboxed: bool) -> str:
    """Apply resource limits, become ``uid``, and make a private scratch dir."""
    nproc, nofile, cpu = int(limits["nproc"]), int(limits["nofile"]), int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))
    resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (int(limits["fsize"]), int(limits["fsize"])))
    confine.become(uid, sandboxed)
    if not sandboxed:  # development only: no uid switch, scratch in the host's temp dir
        scratch = tempfile.mkdtemp(prefix=f"ringlab-rank-{uid}-")
        os.chdir(scratch)
        return scratch
    scratch = f"/tmp/rank-{uid}"  # made by the zygote: the rank's group only (see ranks.private_dir)
    os.chdir(scratch)
    os.environ.update(HOME=scratch, TMPDIR=scratch)
    tempfile.tempdir = scratch  # the template looked up /tmp before the fork; ranks may not write there
    # Files a rank writes in the phases' shared directory stay writable by a later phase's ranks
    # (other uids); the private scratch is its own group's only, so nothing else of a rank opens up.
    os.umask(0)
    return scratch


def limit_memory(extra_mb: int) -> None:
    """Cap the rank's data segment at what it uses now plus ``extra_mb``.

    ``RLIMIT_DATA``, not ``RLIMIT_AS``: CUDA reserves far more virtual address space than any
    real limit, so an address-space cap fails the first GPU allocation, while a heap that grows
    past this cap still fails with a memory error.
    """
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) for line in f if line.startswith("VmData:")) * 1024
    cap = vm + extra_mb * (1 << 20)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, cap))


def limit_gpu_memory(megabytes: int | None) -> None:
    """Cap what this rank's caching allocator may take on its GPU (torch raises OutOfMemoryError past it)."""
    if not megabytes:
        return
    import torch

    device = torch.cuda.current_device()
    total = torch.cuda.get_device_properties(device).total_memory
    torch.cuda.set_per_process_memory_fraction(min(1.0, megabytes * (1 << 20) / total), device)


class Guard:
    """Counts calls to built-in collectives and bytes handed to send/isend."""

    def __init__(self) -> None:
        self.collectives: dict[str, int] = {}
        self.sent: dict[str, int] = {}

    def report(self) -> dict[str, Any]:
        return {"collectives": dict(self.collectives), "sent": dict(self.sent)}

    def install(self) -> None:
        import torch.distributed as dist
        import torch.distributed.distributed_c10d as c10d

        # One wrapper per function, set on both modules: torch compares them by identity (P2POp's op check).
        for name in (*COLLECTIVES, "send", "isend"):
            original = getattr(c10d, name, None) or getattr(dist, name, None)
            if original is None:
                continue
            wrapper = self._sending(original) if name in ("send", "isend") else self._counting(name, original)
            for module in (dist, c10d):
                if getattr(module, name, None) is original:
                    setattr(module, name, wrapper)
        for cls in {dist.ProcessGroup, getattr(dist, "ProcessGroupGloo", dist.ProcessGroup)}:
            for name in GROUP_COLLECTIVES:
                if name in vars(cls):
                    setattr(cls, name, self._counting(f"ProcessGroup.{name}", vars(cls)[name]))

    def _counting(self, name: str, fn: Any) -> Any:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            self.collectives[name] = self.collectives.get(name, 0) + 1
            return fn(*args, **kwargs)

        wrapper.__name__ = getattr(fn, "__name__", name)
        wrapper.__doc__ = getattr(fn, "__doc__", None)
        return wrapper

    def _sending(self, fn: Any) -> Any:
        def wrapper(tensor: Any, dst: Any = None, *args: Any, **kwargs: Any) -> Any:
            peer = dst if dst is not None else kwargs.get("group_dst")
            key = str(peer)
            self.sent[key] = self.sent.get(key, 0) + tensor.numel() * tensor.element_size()
            return fn(tensor, dst, *args, **kwargs)

        wrapper.__name__ = fn.__name__
        wrapper.__doc__ = fn.__doc__
        return wrapper


def describe(exc: BaseException) -> dict[str, Any]:
    """An exception as the judge shows it: type, message, the student's frames."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames if f.filename == SOURCE_NAME]
    lines = traceback.format_list(own or frames[-3:])
    text = "Traceback (most recent call last):\n" + "".join(lines)
    text += "".join(traceback.format_exception_only(type(exc), exc))
    line = own[-1].lineno if own else getattr(exc, "lineno", None)
    return {"error": type(exc).__name__, "message": str(exc)[:2000], "traceback": text[-6000:], "line": line}


def load_submission(code: str) -> types.ModuleType:
    compiled = compile(code, SOURCE_NAME, "exec")
    linecache.cache[SOURCE_NAME] = (len(code), None, code.splitlines(True), SOURCE_NAME)
    module = types.ModuleType("submission")
    module.__file__ = SOURCE_NAME
    sys.modules["submission"] = module
    exec(compiled, module.__dict__)
    return module


class Rank:
    """A rank's end of its socket to the zygote.

    Nothing said here is trusted: the student's code can reach this socket and send anything on it.
    The zygote decides from the order of messages what it accepts (a claimed grader fault once the
    student's code has started is the student's error), opens and closes the measurement windows
    itself, and hands out each call's inputs only when that call's window is open.
    """

    def __init__(self, ctl: int, index: int):
        self.ctl = ctl
        self.index = index

    def send(self, meta: dict[str, Any], payload: bytes = b"") -> None:
        channel.send(self.ctl, meta, payload)

    def wait(self, kind: str) -> tuple[dict[str, Any], bytes]:
        """The zygote's next message, which must be ``kind``; anything else ends the rank."""
        got = channel.recv(self.ctl, MAX_INPUT)
        if got is None or got[0].get("kind") != kind:
            os._exit(3)
        return got


def run_rank(job: dict[str, Any], group: dict[str, Any], rank: int, uid: int, ctl: int) -> None:
    """Everything a rank does; the caller exits the process afterwards."""
    me = Rank(ctl, rank)
    try:
        guard = set_up(job, group, rank, uid, me)
    except BaseException:
        # No student code has run yet: whatever went wrong is the grader's fault.
        me.send({"kind": "fault", "traceback": traceback.format_exc()[-4000:]})
        raise
    me.send({"kind": "ready"})
    me.wait("go")  # every rank of the group is ready: the trusted side has its baseline
    try:
        # A script lab's driver runs the whole file as __main__ (script.Script), never imported as a module.
        module = (
            script.Script(job["code"], SOURCE_NAME) if job.get("entry") == "script" else load_submission(job["code"])
        )
    except BaseException as exc:  # the student's import failing is a result, not our crash
        me.send({"kind": "error", "phase": "import", **describe(exc), "guard": guard.report()})
        me.send({"kind": "done", "guard": guard.report()})
        me.wait("go")
        return
    import torch

    for i, call in enumerate(group["calls"]):
        if job.get("entry") == "script":  # each run of the script is a launch of its own, on a store of its own
            os.environ["MASTER_PORT"] = str(group["master_ports"][i])
        me.send({"kind": "want", "call": i})
        _, payload = me.wait("inputs")
        args = torch.load(io.BytesIO(payload), weights_only=True)
        if job.get("backend") == "nccl":
            args = to_device(args, torch.device("cuda", torch.cuda.current_device()))
        run_call(me, module, i, call, args, guard)
    me.send({"kind": "done", "guard": guard.report()})
    me.wait("go")  # every rank is done: none leaves while a peer may still need it


def set_up(job: dict[str, Any], group: dict[str, Any], rank: int, uid: int, me: Rank) -> Guard:
    drop_privileges(uid, job["limits"], bool(job.get("sandboxed", True)))
    confine.install(job.get("seccomp"))
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    backend = str(job.get("backend", "gloo"))
    if backend == "nccl":  # one GPU per rank; CUDA is first touched here, after the fork
        torch.cuda.set_device(rank % torch.cuda.device_count())
        limit_gpu_memory(job["limits"].get("gpu_memory_mb"))
    public = job.get("public_dir")
    if public:
        sys.path.insert(0, str(public))
    os.environ["RINGLAB_SHARED_DIR"] = str(job.get("shared_dir") or "") if group.get("shares_dir") else ""
    if job.get("entry") == "script":  # the student's script joins the group itself, from torchrun's variables
        os.environ.update(script.torchrun_env(rank, int(group["world_size"]), int(group["master_ports"][0])))
    else:
        # The group's store is served by a process of the zygote's, listening before any rank started:
        # its traffic crosses the same counted loopback as the ranks' own.
        timeout = timedelta(seconds=float(job["limits"]["wall_s"]) + 5)
        store = dist.TCPStore("127.0.0.1", int(group["store_port"]), int(group["world_size"]), False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=group["world_size"], timeout=timeout)
    limit_memory(int(job["limits"]["memory_mb"]))
    guard = Guard()
    guard.install()
    return guard


def run_call(
    me: Rank, module: types.ModuleType | script.Script, i: int, call: dict[str, Any], args: list[Any], guard: Guard
) -> None:
    driver = call.get("driver")
    target = public_function(driver) if driver else getattr(module, call["fn"], None)
    if not callable(target):
        missing = f"the lab's driver has no function {driver}()" if driver else None
        me.send(call_error(i, "MissingFunction", missing or f"the submission defines no function {call['fn']}()"))
        return
    args = [clone(a) for a in args]
    try:
        returned = target(module, *args) if driver else target(*args)
    except BaseException as exc:  # SystemExit and KeyboardInterrupt included: all are the student's
        me.send({"kind": "error", "call": i, "phase": "call", **describe(exc), "guard": guard.report()})
        return
    out = args[0] if call.get("inplace") else returned
    try:
        if not driver:
            import torch

            if not isinstance(out, torch.Tensor):
                raise TypeError(f"{call['fn']}() returned {type(returned).__name__}, expected a torch.Tensor")
        payload = trees.plain(out)
    except TypeError as exc:
        me.send(call_error(i, "WrongReturnType", str(exc)))
        return
    buffer = io.BytesIO()
    import torch

    torch.save(payload, buffer)
    me.send({"kind": "result", "call": i, "guard": guard.report()}, buffer.getvalue())


NO_TRACE: dict[str, Any] = {"traceback": "", "line": None}


def call_error(i: int, error: str, message: str) -> dict[str, Any]:
    return {
        "kind": "error",
        "call": i,
        "phase": "call",
        "error": error,
        "message": message,
        "traceback": "",
        "line": None,
    }


def clone(tree: Any) -> Any:
    """A fresh copy of an input tree, so a call that changes its inputs changes no later call's."""
    if isinstance(tree, dict):
        return {k: clone(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        items = [clone(v) for v in tree]
        return items if isinstance(tree, list) else tuple(items)
    return tree.clone() if hasattr(tree, "clone") else tree


def to_device(tree: Any, device: Any) -> Any:
    if isinstance(tree, dict):
        return {k: to_device(v, device) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        items = [to_device(v, device) for v in tree]
        return items if isinstance(tree, list) else tuple(items)
    return tree.to(device) if hasattr(tree, "to") and hasattr(tree, "is_floating_point") else tree


def public_function(name: str) -> Any:
    """``driver.<name>`` from the lab's public files (imported by module name, after the student's)."""
    import importlib

    module_name, _, attr = name.rpartition(".")
    return getattr(importlib.import_module(module_name or "driver"), attr, None)
