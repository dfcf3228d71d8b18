"""A student's whole training script, run in a rank the way ``torchrun`` runs one.

For labs whose ``lab.yaml`` says ``entry: script``: the rank joins no process group itself.
Its environment holds the variables torchrun gives a worker (``torchrun_env``), and the lab's
public driver runs the student's file as ``__main__`` with ``Script.run()``, which returns the
exit status a launcher would see and keeps the tail of what the script wrote to stderr.
Stdlib only: mounted in the sandbox beside the harness.
"""

from __future__ import annotations

import linecache
import os
import sys
import tempfile
import time
import traceback
import types
from typing import Any

STDERR_TAIL = 8192  # characters of the script's stderr a driver can read back


def torchrun_env(rank: int, world_size: int, master_port: int) -> dict[str, str]:
    """What torchrun sets for worker ``rank`` of ``world_size`` on one node; its agent's store is at 127.0.0.1."""
    return {
        "RANK": str(rank),
        "WORLD_SIZE": str(world_size),
        "LOCAL_RANK": str(rank),
        "LOCAL_WORLD_SIZE": str(world_size),
        "GROUP_RANK": "0",
        "GROUP_WORLD_SIZE": "1",
        "ROLE_NAME": "default",
        "ROLE_RANK": str(rank),
        "ROLE_WORLD_SIZE": str(world_size),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(master_port),
        "TORCHELASTIC_RESTART_COUNT": "0",
        "TORCHELASTIC_MAX_RESTARTS": "0",
        "TORCHELASTIC_RUN_ID": "ringlab",
        "TORCHELASTIC_USE_AGENT_STORE": "True",  # the store at MASTER_PORT is the launcher's: every rank a client
    }


def start_agent_store(
    world_size: int, launches: int, uid: int, sandboxed: bool, close_fd: int
) -> tuple[int, list[int]]:
    """torchrun's agent store for one group of ranks: TCPStore servers, listening before any rank starts.

    The ranks get ``TORCHELASTIC_USE_AGENT_STORE=True``, so every rank's ``init_process_group``
    connects to the store at ``MASTER_PORT`` as a client, as under torchrun. With rank 0 hosting the
    store instead, a rank that connects before rank 0 listens backs off for 0.4-0.8 s. Each of the
    group's ``launches`` (its calls: the script run once per call) gets a store of its own, as each
    torchrun attempt does: a second run on the first run's store reads the first run's keys (rank
    addresses, barrier counts) and hangs or fails now and then. Forked from the zygote, it runs as
    ``uid``, dies with the zygote, and closes ``close_fd`` (the zygote's job channel). Returns (pid, ports).
    """
    from labs.rank import confine

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(close_fd)
            os.close(r)
            confine.become(uid, sandboxed)
            from torch.distributed import TCPStore

            stores = [TCPStore("127.0.0.1", 0, world_size, True, wait_for_workers=False) for _ in range(launches)]
            os.write(w, " ".join(str(s.port) for s in stores).encode())
            os.close(w)
            while True:  # the stores serve from their own threads until the zygote ends the group
                time.sleep(3600)
        finally:
            os._exit(1)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        ports = f.read().split()
    if len(ports) != launches:
        os.waitpid(pid, 0)
        raise RuntimeError("the agent store did not start")
    return pid, [int(p) for p in ports]


class _Exit(BaseException):
    """``os._exit(n)`` inside a script run: unwinds to ``Script.run`` so the driver still reports."""

    def __init__(self, status: int):
        super().__init__(status)
        self.status = status


def exit_status(exc: SystemExit) -> int:
    """The process exit status Python gives ``raise SystemExit(code)`` (printing a non-integer code)."""
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


class Script:
    """The submission as a script: ``run()`` executes it as ``__main__``, as often as a driver asks."""

    def __init__(self, code: str, filename: str = "submission.py"):
        self.filename = filename
        self.compiled = compile(code, filename, "exec")
        linecache.cache[filename] = (len(code), None, code.splitlines(True), filename)
        self.stderr = ""  # the tail of the last run's stderr

    def run(self, argv: list[str] | None = None) -> int:
        """Run the script once, as ``python submission.py ARGV...`` would; return its exit status.

        0 when it ends normally, the code of ``sys.exit``/``os._exit`` (a non-integer code is printed
        and gives 1), 1 after an uncaught exception (its traceback printed, as Python does). What
        it writes to stderr still reaches the rank's output; its tail is kept in ``self.stderr``.
        The script's call to ``destroy_process_group()`` (the default group's) is carried out after its
        objects are gone: destroying the group while a ``DistributedDataParallel`` built on it is still
        alive hangs the rank now and then (torch 2.13, gloo: 3 runs in 12 when ``main()`` returns after
        destroying the group). A default process group the script left behind is destroyed too, as its
        process's exit would.
        """
        module = types.ModuleType("__main__")
        module.__file__ = self.filename
        saved = sys.argv, sys.modules.get("__main__"), os._exit
        sys.argv = [self.filename, *(argv or [])]
        sys.modules["__main__"] = module

        def _exit(status: int) -> None:
            raise _Exit(int(status))

        os._exit = _exit  # type: ignore[assignment]
        restore = _defer_destroy()
        sys.stderr.flush()
        real_stderr = os.dup(2)
        with tempfile.TemporaryFile() as capture:
            os.dup2(capture.fileno(), 2)
            try:
                status = self._execute(module)
            finally:
                sys.stderr.flush()
                os.dup2(real_stderr, 2)
                os.close(real_stderr)
                sys.argv, main, os._exit = saved  # type: ignore[assignment]
                if main is not None:
                    sys.modules["__main__"] = main
                restore()
                # No gc.collect(): in a forked rank it would finalise the parent's garbage, such as sockets
                # whose descriptor numbers the rank has reused. Reference counting frees the script's objects.
                module.__dict__.clear()
                _destroy_default_group()
                capture.seek(0)
                written = capture.read()
        view = memoryview(written)
        while view:
            view = view[os.write(2, view) :]
        self.stderr = written.decode("utf-8", "replace")[-STDERR_TAIL:]
        return status

    def _execute(self, module: types.ModuleType) -> int:
        try:
            exec(self.compiled, module.__dict__)
        except SystemExit as exc:
            return exit_status(exc)
        except _Exit as exc:
            return exc.status & 0xFF
        except BaseException as exc:
            traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next if exc.__traceback__ else None)
            return 1
        return 0


def _defer_destroy() -> Any:
    """Make ``destroy_process_group()`` of the default group a no-op until the returned undo is called."""
    dist = sys.modules.get("torch.distributed")
    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    if dist is None or c10d is None or not hasattr(dist, "destroy_process_group"):
        return lambda: None
    original = c10d.destroy_process_group

    def destroy_process_group(group: Any = None) -> None:
        if group is not None and group is not c10d.GroupMember.WORLD:
            original(group)

    for module in (dist, c10d):
        setattr(module, "destroy_process_group", destroy_process_group)  # noqa: B010 (mypy: a module)

    def restore() -> None:
        for module in (dist, c10d):
            setattr(module, "destroy_process_group", original)  # noqa: B010

    return restore


def _destroy_default_group() -> None:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            dist.destroy_process_group()
    except Exception:  # a broken group is as good as gone: the next run starts its own
        pass
