"""A torch-warm template that puts a fresh zygote into each new sandbox by forking, not by importing.

Starting a zygote inside bubblewrap costs an ``import torch`` (~1.2 s of a core) per
submission. Instead the worker starts this template once: a trusted process outside any
sandbox, with the same clean environment, that imports torch and never sees a job or any
student code. For each submission the worker starts a fresh bubblewrap sandbox holding only
``sleep`` (milliseconds) and asks the template for a zygote in it:

1. the template forks; the child joins the sandbox's ipc, uts, network, cgroup, pid and mount
   namespaces (``setns``, as ``nsenter`` does), so it sees the sandbox's filesystem, loopback
   and /proc, and nothing of the host's;
2. it forks again (only children join a pid namespace) and exits; the grandchild, now inside
   the sandbox's pid namespace, starts a new session, closes every descriptor but the job's
   socket and the sandbox's log, drops the capability bounding set to CAP_SETUID/CAP_SETGID
   (what bwrap leaves a zygote), sets no-new-privs, and serves the one job as ``zygote.serve``.

The sandbox is as fresh as a cold one: new namespaces and a new /tmp per submission, and the
zygote's memory is the template's, which holds torch and the engine's code and nothing of any
job. Killing the sandbox (its bwrap) kills its pid namespace and so the zygote and its ranks.
Needs root (``setns`` into another process's namespaces); the worker falls back to cold starts
otherwise.

Once warm, the template gathers its anonymous memory (~200 MB: the heap and Python's arenas) into
2 MiB pages (``huge_pages``): a fork copies one entry per 2 MiB instead of one per 4 KiB page. Its
own forks take 2-3 ms instead of 10-15, and the zygote's (a store, a rank) 7-9 ms, since the zygote's
writes split part of them again. A child's first write to such a page splits it and copies 4 KiB, as
before, so what a rank's control group is charged is unchanged.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import threading
import traceback

from labs.host.sandbox import ENV, LABS_DIR, SandboxError

MADV_COLLAPSE = 25  # Linux 6.1+: make huge pages of a range now, whatever the THP settings
HUGE = 1 << 21
PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 24, 38, 47, 4
CAP_SETGID, CAP_SETUID = 6, 7
CAPABILITY_VERSION_3 = 0x20080522
# The order nsenter uses: the mount namespace last, since joining it changes what /proc shows.
NAMESPACES = [("ipc", 0x08000000), ("uts", 0x04000000), ("net", 0x40000000), ("cgroup", 0x02000000),
              ("pid", 0x20000000), ("mnt", 0x00020000)]  # fmt: skip

LAUNCH = "import sys; sys.path.insert(0, {path!r}); from labs.host.template import main; main()"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]


def private_ranges(maps: str) -> list[tuple[int, int]]:
    """The 2 MiB-aligned parts of the private, writable, anonymous mappings (the heap included) in ``maps``
    (the text of /proc/PID/maps)."""
    out = []
    for line in maps.splitlines():
        fields = line.split()
        name = fields[5] if len(fields) > 5 else ""
        if name not in ("", "[heap]") or not fields[1].startswith("rw") or fields[1][3] != "p":
            continue
        start, end = (int(x, 16) for x in fields[0].split("-"))
        start, end = -(-start // HUGE) * HUGE, end // HUGE * HUGE
        if end > start:
            out.append((start, end))
    return out


def huge_pages(maps: str = "/proc/self/maps") -> int:
    """Collapse this process's private anonymous memory into huge pages; the number of 2 MiB pages made.

    Best effort: an older kernel (no ``MADV_COLLAPSE``) or a range that cannot be collapsed is left as it is.
    """
    with open(maps, encoding="ascii") as f:
        ranges = private_ranges(f.read())
    return sum((end - start) // HUGE for start, end in ranges if _libc.madvise(start, end - start, MADV_COLLAPSE) == 0)


def available() -> bool:
    """Joining another process's namespaces needs root; without it sandboxes start cold."""
    return os.geteuid() == 0 and sys.platform == "linux"


class Template:
    """The worker's handle on the template process: started lazily, restarted if it dies."""

    def __init__(self, start_timeout: float = 60.0, preload: list[str] | None = None):
        self.start_timeout = start_timeout
        self.preload = sorted(set(preload or []))  # modules imported once, before any zygote
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.sock: socket.socket | None = None
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the template

    def _start(self) -> None:
        ours, theirs = socket.socketpair()
        launch = LAUNCH.format(path=str(LABS_DIR.parent))
        command = [sys.executable, "-I", "-c", launch, str(theirs.fileno()), json.dumps(self.preload)]
        try:
            self.proc = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=self.log,
                pass_fds=(theirs.fileno(),),
                start_new_session=True,
                env=dict(ENV),
                cwd="/",
            )
        finally:
            theirs.close()
        self.sock = ours
        if not select.select([ours], [], [], self.start_timeout)[0] or ours.recv(16) != b"ready\n":
            self.log.seek(0)
            output = self.log.read(4000).decode(errors="replace")
            self.close()
            raise SandboxError(f"the sandbox template did not start\n{output}".strip())

    def covers(self, modules: list[str]) -> bool:
        return set(modules) <= set(self.preload)

    def cover(self, modules: list[str]) -> None:
        """Import ``modules`` too from now on: the template restarts with them at its next spawn.

        A worker may start before the labs it grades are published (the embedded worker starts beside the
        web process's first content sync): without this, every zygote would import them on each job."""
        with self.lock:
            if self.covers(modules):
                return
            self.preload = sorted(set(self.preload) | set(modules))
            self.close()

    def spawn(self, pid: int, job_fd: int, log_fd: int) -> None:
        """Ask for a zygote in the namespaces of ``pid``, serving ``job_fd``, logging to ``log_fd``."""
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.close()
                self._start()
            assert self.sock is not None
            try:
                socket.send_fds(self.sock, [json.dumps({"pid": pid}).encode()], [job_fd, log_fd])
            except OSError as exc:
                self.close()
                raise SandboxError(f"the sandbox template has gone: {exc}") from exc

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def join_namespaces(pid: int) -> None:
    """Join every namespace of ``pid`` that differs from ours (this process must be single-threaded)."""
    fds = []
    try:
        for name, flag in NAMESPACES:
            theirs, ours = f"/proc/{pid}/ns/{name}", f"/proc/self/ns/{name}"
            if os.path.exists(theirs) and os.stat(theirs).st_ino != os.stat(ours).st_ino:
                fds.append((os.open(theirs, os.O_RDONLY | os.O_CLOEXEC), flag, name))
        for fd, flag, name in fds:
            _check(_libc.setns(fd, flag), f"setns({name})")
    finally:
        for fd, _, _ in fds:
            os.close(fd)


def keep_only_setuid_setgid() -> None:
    """The capabilities bwrap leaves a zygote: CAP_SETUID and CAP_SETGID, nothing else, ever."""
    keep = {CAP_SETGID, CAP_SETUID}
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last = int(f.read())
    for cap in range(last + 1):
        if cap not in keep:
            _check(_libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0), f"drop capability {cap} from the bounding set")
    _check(_libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0), "clear ambient capabilities")
    mask = (1 << CAP_SETGID) | (1 << CAP_SETUID)
    header = (ctypes.c_uint32 * 2)(CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)(mask, mask, 0, 0, 0, 0)  # effective, permitted, inheritable (low, high words)
    _check(_libc.capset(header, data), "capset")
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(PR_SET_NO_NEW_PRIVS)")


def _enter_and_serve(pid: int, job_fd: int, log_fd: int) -> None:
    """In the forked child: join the sandbox, fork into its pid namespace, serve one job there."""
    join_namespaces(pid)
    if os.fork():
        os._exit(0)  # the grandchild is the zygote; it is reparented inside the sandbox
    os.setsid()
    os.chdir("/tmp")
    os.environ["PWD"] = "/tmp"  # as bwrap --chdir sets it for a cold zygote
    devnull = os.open("/dev/null", os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(log_fd, 1)
    os.dup2(log_fd, 2)
    os.closerange(3, job_fd)
    os.closerange(job_fd + 1, 1 << 16)
    keep_only_setuid_setgid()
    # The engine's files again, from where the sandbox mounts them (as a cold zygote loads them):
    # torch stays imported, the few stdlib-only engine modules are read afresh.
    sys.path[:] = ["/sandbox/lib", *[p for p in sys.path if p != str(LABS_DIR.parent)]]
    for name in [m for m in sys.modules if m == "labs" or m.startswith("labs.")]:
        del sys.modules[name]
    from labs.rank import zygote

    zygote.serve(job_fd)


def main() -> None:
    """``python -I -c <launch> CONTROL_FD``: warm up, then make zygotes on request until EOF."""
    control = socket.socket(fileno=int(sys.argv[1]))
    from labs.rank import warmup

    environment = dict(os.environ)
    warmup.warm(json.loads(sys.argv[2]) if len(sys.argv) > 2 else [])
    huge_pages()
    # Some imports set variables (torch._inductor its cache dir): a zygote starts with the
    # sandbox's environment and nothing else, as a cold one does.
    os.environ.clear()
    os.environ.update(environment)
    control.sendall(b"ready\n")
    while True:
        message, fds, _, _ = socket.recv_fds(control, 4096, 2)
        if not message:
            return
        job_fd, log_fd = fds
        child = os.fork()
        if child == 0:
            try:
                _enter_and_serve(int(json.loads(message)["pid"]), job_fd, log_fd)
            except BaseException:
                with contextlib.suppress(BaseException):
                    os.write(log_fd, f"template: could not enter the sandbox\n{traceback.format_exc()}".encode())
            os._exit(1)
        os.close(job_fd)
        os.close(log_fd)
        os.waitpid(child, 0)  # it exits once its own child, the zygote, is in the sandbox
