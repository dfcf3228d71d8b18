"""Run a lab's public driver on N real gloo ranks, without the sandbox, counting each rank's wire bytes.

For authoring tests of labs whose ranks run a driver: forked ranks (from this
torch-warm process, as the engine's zygote does), one thread each, the student's
code loaded as module ``submission``. Around every call the parent reads the
kernel's per-socket counters (``sock_diag``) and attributes each socket to the
rank process that owns it, so the bytes per rank are the kernel's, as in a grade.
"""

from __future__ import annotations

import importlib.util
import io
import multiprocessing as mp
import os
import socket
import tempfile
import types
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from labs.rank import netstat

INODE = 14  # index of idiag_inode in netstat.MSG


@dataclass
class Call:
    driver: str
    inputs: list[Any]  # per rank


@dataclass
class Run:
    results: list[list[Any]] = field(default_factory=list)  # [call][rank]: result tree, or "error: ..." text
    sent: list[list[int]] = field(default_factory=list)  # [call][rank]: bytes the kernel saw the rank send


def load_module(path: Path, name: str) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sent_by_inode() -> dict[int, int]:
    out: dict[int, int] = {}
    for family in (socket.AF_INET, socket.AF_INET6):
        for body in _bodies(family):
            fields = netstat.MSG.unpack_from(body)
            out[fields[INODE]] = netstat._parse(body)["sent"]
    return out


def _bodies(family: int) -> list[bytes]:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, netstat.NETLINK_SOCK_DIAG)
    try:
        req = netstat.REQ.pack(
            family, socket.IPPROTO_TCP, 1 << (netstat.INET_DIAG_INFO - 1), 0xFFFFFFFF, 0, 0, b"", b"", 0, b""
        )
        flags = netstat.NLM_F_REQUEST | netstat.NLM_F_DUMP
        sock.send(netstat.NLMSG.pack(netstat.NLMSG.size + len(req), netstat.SOCK_DIAG_BY_FAMILY, flags, 1, 0) + req)
        out = []
        while True:
            data = sock.recv(1 << 16)
            offset = 0
            while offset + netstat.NLMSG.size <= len(data):
                length, kind, _, _, _ = netstat.NLMSG.unpack_from(data, offset)
                if kind == netstat.NLMSG_DONE:
                    return out
                out.append(data[offset + netstat.NLMSG.size : offset + length])
                offset += (length + 3) & ~3
    finally:
        sock.close()


def _socket_inodes(pid: int) -> set[int]:
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            found.add(int(target[8:-1]))
    return found


def _sent_per_rank(pids: list[int]) -> list[int]:
    counts = _sent_by_inode()
    return [sum(counts.get(i, 0) for i in _socket_inodes(pid)) for pid in pids]


def _plain(tree: Any) -> Any:
    import torch

    if isinstance(tree, dict):
        return {k: _plain(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_plain(v) for v in tree)
    if isinstance(tree, torch.Tensor):
        return tree.detach().as_subclass(torch.Tensor).clone()
    return tree


def _rank(rank: int, n: int, init: str, code: str, driver_path: str, calls: list[Call], conn: Any) -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=n, timeout=timedelta(seconds=20))
    submission = types.ModuleType("submission")
    driver = load_module(Path(driver_path), "lab_driver")
    try:
        exec(compile(code, "submission.py", "exec"), submission.__dict__)
        failed = None
    except Exception as exc:
        failed = f"error: {type(exc).__name__}: {exc}"
    dist.barrier()  # every connection is up before the first count
    for call in calls:
        conn.send("ready")
        conn.recv()
        try:
            if failed:
                raise RuntimeError(failed)
            buf = io.BytesIO()
            torch.save(_plain(getattr(driver, call.driver)(submission, call.inputs[rank])), buf)
            conn.send(("result", buf.getvalue()))
        except Exception as exc:
            conn.send(("error", f"error: {type(exc).__name__}: {exc}"))
        conn.recv()
    os._exit(0)  # a rank that failed mid-collective must not wait for its peers at shutdown


def run(code: str, driver_path: Path, world_size: int, calls: list[Call], timeout: float = 30) -> Run:
    """Run every call on ``world_size`` forked ranks; results and wire bytes per call and rank."""
    import torch

    ctx = mp.get_context("fork")
    out = Run()
    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{tmp}/store"
        pipes = [ctx.Pipe() for _ in range(world_size)]
        procs = [
            ctx.Process(target=_rank, args=(r, world_size, init, code, str(driver_path), calls, pipes[r][1]))
            for r in range(world_size)
        ]
        for p in procs:
            p.start()
        pids = [p.pid for p in procs if p.pid is not None]
        try:
            for _ in calls:
                for parent, _ in pipes:
                    if not parent.poll(timeout):
                        raise TimeoutError("a rank did not reach its next call")
                    parent.recv()
                before = _sent_per_rank(pids)
                for parent, _ in pipes:
                    parent.send("go")
                got = []
                for parent, _ in pipes:
                    if not parent.poll(timeout):
                        raise TimeoutError("a rank did not finish its call")
                    got.append(parent.recv())
                after = _sent_per_rank(pids)
                for parent, _ in pipes:
                    parent.send("go")
                out.sent.append([a - b for a, b in zip(after, before, strict=True)])
                out.results.append(
                    [torch.load(io.BytesIO(v), weights_only=True) if kind == "result" else v for kind, v in got]
                )
        finally:
            for p in procs:
                p.join(5)
                if p.is_alive():
                    p.kill()
    return out
