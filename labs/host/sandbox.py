"""A fresh bubblewrap sandbox holding one warm zygote.

Layout inside: the system (/usr and its /lib, /bin links) and the Python
install and virtualenv read-only at their own paths; the stdlib-only
files the zygote and ranks run (``labs/rank``) read-only under /sandbox/lib; a private tmpfs
on /tmp for scratch, capped in bytes and in files (inodes), whose root only the zygote may
write in; a minimal /dev (with a read-only, empty /dev/shm but on GPUs) and a /proc of the
sandbox's own pid namespace. Nothing else of the host exists: not the repository, not
content/labs (checks, solutions), not data/ or other submissions, not /etc.
New pid, ipc, uts and network namespaces (only a loopback, so gloo runs over
127.0.0.1 and the host's services are unreachable); an empty environment
apart from a few settings; the sandbox dies with the worker. The zygote keeps
only CAP_SETUID/CAP_SETGID, to hand each rank its own unprivileged uid.

The worker talks to the zygote over one end of a socketpair whose fd number
is the zygote's only argument.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Protocol

from labs.rank import channel


class Spawner(Protocol):
    """What puts a warm zygote into a started sandbox (``labs.host.template.Template``)."""

    def spawn(self, pid: int, job_fd: int, log_fd: int) -> None: ...


# The engine's code that runs inside the sandbox: the rank zone (``labs/rank``, stdlib apart from what
# it imports lazily), mounted whole and read-only under /sandbox/lib, with the package's empty __init__.
LABS_DIR = Path(__file__).resolve().parents[1]
RANK_DIR = LABS_DIR / "rank"
LAUNCH = "import sys; sys.path.insert(0, {path!r}); from labs.rank.zygote import main; main()"
ENV = {
    "PATH": "/usr/bin:/bin",
    "LANG": "C.UTF-8",
    "GLOO_SOCKET_IFNAME": "lo",
    "OMP_NUM_THREADS": "1",
    "MKL_NUM_THREADS": "1",
    "MALLOC_ARENA_MAX": "2",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONHASHSEED": "0",
    "HOME": "/tmp",
    "TORCH_CPP_LOG_LEVEL": "ERROR",
}
TMP_SIZE = 64 << 20
TMP_INODES = 4096  # files and directories in a sandbox's /tmp: enough for any lab, few enough to fill in a blink
BOXES = Path("/run/ringlab/boxes")  # as root: one tmpfs per sandbox, mounted here and bound at its /tmp
MS_NOSUID, MS_NODEV, MNT_DETACH = 2, 4, 2
_libc = ctypes.CDLL(None, use_errno=True)


class SandboxError(Exception):
    """The sandbox could not be set up or stopped answering."""


def bwrap_path() -> str | None:
    return shutil.which("bwrap")


def _system_mounts() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("lib", "lib32", "lib64", "bin", "sbin"):
        path = Path("/") / name
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), str(path)]
        elif path.is_dir():
            args += ["--ro-bind", str(path), str(path)]
    if Path("/etc/ld.so.cache").is_file():
        args += ["--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


def _parents(path: str) -> list[str]:
    # bwrap creates missing parents mode 0700, which the ranks' uids could not traverse.
    parents = [str(p) for p in reversed(Path(path).parents) if str(p) != "/"]
    return [arg for parent in parents for arg in ("--perms", "0755", "--dir", parent)]


def _python_mounts() -> list[str]:
    args: list[str] = []
    for prefix in sorted({sys.base_prefix, sys.prefix, os.path.dirname(os.path.dirname(sys.executable))}):
        if not prefix.startswith("/usr/") and prefix != "/usr":
            args += [*_parents(prefix), "--ro-bind", prefix, prefix]
    return args


def _scratch_mount(scratch: str | None) -> list[str]:
    # The root of /tmp is the zygote's, 0755: a rank writes only in the directories the zygote made for it.
    if scratch is not None:
        return ["--bind", scratch, "/tmp"]
    # No nr_inodes option in bwrap 0.8's --tmpfs: without a host mount, /tmp is capped in bytes only.
    return ["--perms", "0755", "--size", str(TMP_SIZE), "--tmpfs", "/tmp"]


def sweep_boxes() -> list[str]:
    """Unmount and remove what workers that died without cleaning up left under BOXES (each entry is
    named after its worker's pid); the entries of live workers stay. Returns the paths removed."""
    removed = []
    with contextlib.suppress(OSError):
        for entry in BOXES.iterdir():
            pid = entry.name.partition("-")[0]
            if pid.isdigit() and not _alive(int(pid)):
                unmount_scratch(str(entry))
                removed.append(str(entry))
    return removed


_sweep_once = functools.cache(sweep_boxes)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def mount_scratch() -> str | None:
    """As root: a new tmpfs for one sandbox's /tmp (TMP_SIZE bytes, TMP_INODES inodes, root's, 0755),
    mounted under BOXES; None where that cannot be done (not root, or the mount failed)."""
    if os.geteuid() != 0:
        return None
    _sweep_once()  # once per worker: a worker killed outright left its sandboxes' mounts behind
    try:
        BOXES.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=BOXES)
    except OSError:
        return None
    options = f"size={TMP_SIZE},nr_inodes={TMP_INODES},mode=0755,uid=0,gid=0".encode()
    if _libc.mount(b"tmpfs", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options) != 0:
        with contextlib.suppress(OSError):
            os.rmdir(path)
        return None
    return path


def unmount_scratch(path: str) -> None:
    """Detach a sandbox's /tmp from the host (freed once the sandbox's own view of it is gone too)."""
    _libc.umount2(path.encode(), MNT_DETACH)
    with contextlib.suppress(OSError):
        os.rmdir(path)


def _gpu_mounts() -> list[str]:
    """Device nodes and /sys for CUDA and NCCL; a shared /dev/shm for NCCL's intra-node transport."""
    args = [arg for dev in sorted(Path("/dev").glob("nvidia*")) for arg in ("--dev-bind", str(dev), str(dev))]
    return [*args, "--ro-bind", "/sys", "/sys", "--perms", "1777", "--tmpfs", "/dev/shm"]


def bwrap_args(*, gpu: bool = False, scratch: str | None = None) -> list[str]:
    """bwrap and its options: everything but the command to run in the new sandbox.

    ``scratch``: a host directory (``mount_scratch``) bound at /tmp; None: a tmpfs of bwrap's own."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxError("bubblewrap (bwrap) is not installed: install the 'bubblewrap' package")
    # The scratch tmpfs goes first: a Python install that lives under /tmp (a virtualenv in a
    # checkout there) is then bound over it instead of being hidden by it.
    args = [bwrap, "--proc", "/proc", "--dev", "/dev", *_scratch_mount(scratch)]
    args += [*_system_mounts(), *_python_mounts()]
    args += _parents("/sandbox/lib/labs/x")
    args += ["--ro-bind", str(LABS_DIR / "__init__.py"), "/sandbox/lib/labs/__init__.py"]
    args += ["--ro-bind", str(RANK_DIR), "/sandbox/lib/labs/rank"]
    args += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts", "--unshare-cgroup-try"]
    args += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--chdir", "/tmp", "--clearenv"]
    for key, value in ENV.items():
        args += ["--setenv", key, value]
    if gpu:
        args += _gpu_mounts()
        args += ["--setenv", "NCCL_SOCKET_IFNAME", "lo", "--setenv", "NCCL_IB_DISABLE", "1"]
    else:  # bwrap's /dev/shm is root's 0755 already; a read-only empty tmpfs holds nothing for anyone
        args += ["--perms", "0555", "--size", "4096", "--tmpfs", "/dev/shm", "--remount-ro", "/dev/shm"]
    if os.geteuid() == 0:
        args += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        args += ["--unshare-user", "--disable-userns"]
    return args


def bwrap_command(fd: int, *, gpu: bool = False, scratch: str | None = None) -> list[str]:
    """The full command line that starts a zygote, cold, in a new sandbox."""
    launch = LAUNCH.format(path="/sandbox/lib")
    return [*bwrap_args(gpu=gpu, scratch=scratch), sys.executable, "-I", "-c", launch, str(fd)]


def holder_command(info_fd: int, *, gpu: bool = False, scratch: str | None = None) -> list[str]:
    """A new sandbox holding only ``sleep``. bwrap writes ``{"child-pid": N}`` to ``info_fd`` at once
    (N: its process in the new namespaces); the holder prints ``ready`` once they are fully set up."""
    command = [*bwrap_args(gpu=gpu, scratch=scratch), "/bin/sh", "-c", "echo ready; exec sleep infinity"]
    return [command[0], "--info-fd", str(info_fd), *command[1:]]


def unsafe_command(fd: int) -> list[str]:
    """Development only: the same zygote with no isolation at all."""
    return [sys.executable, "-I", "-c", LAUNCH.format(path=str(LABS_DIR.parent)), str(fd)]


class Sandbox:
    """One started sandbox with its zygote; used for one job, then killed.

    Cold (the default): bwrap starts a zygote that imports torch, ~1.2 s of a core. With a
    ``template`` (``labs.host.template``): bwrap starts a holder in milliseconds and the template
    forks a torch-warm zygote into the holder's namespaces.
    """

    def __init__(self, *, unsafe: bool = False, gpu: bool = False, template: Spawner | None = None):
        self.unsafe = unsafe
        self.sandboxed = not unsafe
        self.gpu = gpu
        self.warm_start = template is not None and not unsafe
        self.niced = False  # a cold zygote warms up at nice 19 (root only); see ``promote``
        ours, theirs = socket.socketpair()
        self.sock = ours
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - lives as long as the sandbox
        self.reader = channel.Reader(1 << 30)
        self.pending: list[tuple[dict[str, Any], bytes]] = []
        self.info: dict[str, Any] = {}
        self.ready_s: float | None = None
        self.started = time.monotonic()
        self.scratch = None if unsafe else mount_scratch()
        try:
            if template is not None and not unsafe:
                self._start_in_holder(template, theirs.fileno())
            else:
                self._start_cold(theirs.fileno())
        except BaseException:
            self._unmount()
            raise
        finally:
            theirs.close()

    def _popen(self, command: list[str], pass_fds: tuple[int, ...], env: dict[str, str], stdout: Any = None) -> None:
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=stdout or self.stderr,
            stderr=self.stderr,
            pass_fds=pass_fds,
            start_new_session=True,
            env=env,
        )

    def _start_cold(self, fd: int) -> None:
        command = unsafe_command(fd) if self.unsafe else bwrap_command(fd, gpu=self.gpu, scratch=self.scratch)
        # Warming up (importing torch) runs at the lowest priority so that it never slows down a
        # submission being graded on the same cores; ``promote`` lifts it once a job arrives.
        nice = shutil.which("nice")
        if nice and os.geteuid() == 0:
            command = [nice, "-n", "19", *command]
            self.niced = True
        self._popen(command, (fd,), {**ENV, "PATH": os.environ.get("PATH", ENV["PATH"])} if self.unsafe else {})

    def _start_in_holder(self, template: Spawner, fd: int, timeout: float = 20.0) -> None:
        # One pipe for both: bwrap's info (written right after its clone), then the holder's "ready".
        ready_r, ready_w = os.pipe()
        said = b""
        try:
            self._popen(holder_command(ready_w, gpu=self.gpu, scratch=self.scratch), (ready_w,), {}, stdout=ready_w)
            os.close(ready_w)
            ready_w = -1
            deadline = time.monotonic() + timeout
            while not said.endswith(b"ready\n"):
                left = deadline - time.monotonic()
                chunk = os.read(ready_r, 4096) if left > 0 and select.select([ready_r], [], [], left)[0] else b""
                if not chunk:
                    output = self.error_output()
                    self.kill()
                    raise SandboxError(f"the sandbox did not start\n{output}".strip())
                said += chunk
        finally:
            os.close(ready_r)
            if ready_w >= 0:
                os.close(ready_w)
        inside = json.loads(said.removesuffix(b"ready\n"))["child-pid"]
        try:
            template.spawn(inside, fd, self.stderr.fileno())
        except SandboxError:
            self.kill()
            raise

    def receive(self, deadline: float) -> tuple[dict[str, Any], bytes] | None:
        """The zygote's next message; None at end of stream; TimeoutError past ``deadline`` (monotonic)."""
        while not self.pending:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                raise TimeoutError("the sandbox did not answer in time")
            data = self.sock.recv(1 << 20)
            if not data:
                return None
            self.pending.extend(self.reader.feed(data))
        return self.pending.pop(0)

    def send(self, meta: dict[str, Any], payload: bytes = b"") -> None:
        self.sock.sendall(channel.encode(meta, payload))

    def wait_ready(self, timeout: float = 60.0) -> dict[str, Any]:
        """Block until the zygote has imported torch; SandboxError if it died instead."""
        try:
            got = self.receive(time.monotonic() + timeout)
            reason = "it exited"
        except (TimeoutError, OSError, channel.ProtocolError) as exc:
            got = None
            reason = f"no answer in {timeout:.0f} s ({exc})"
        if got is None or got[0].get("kind") != "ready":
            output = self.error_output()
            self.kill()
            raise SandboxError(f"the sandbox did not start: {reason}\n{output}".strip())
        self.info = got[0]
        self.ready_s = time.monotonic() - self.started
        return self.info

    def error_output(self) -> str:
        if self.stderr.closed:
            return ""
        self.stderr.seek(0)
        return self.stderr.read(8000).decode("utf-8", "replace")

    def promote(self) -> None:
        """Back to the worker's priority for the job, if it warmed up niced (a forked zygote never was)."""
        if not self.niced:
            return
        worker = os.getpriority(os.PRIO_PROCESS, 0)  # the worker's own (RINGLAB_WORKER_NICE), not 0
        for pid in _descendants(self.proc.pid):
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, pid, worker)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """Kill the sandbox and every process in it."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)
        self.sock.close()
        self.stderr.close()
        self._unmount()

    def _unmount(self) -> None:
        if self.scratch is not None:
            unmount_scratch(self.scratch)
            self.scratch = None


def _descendants(root: int) -> list[int]:
    parent: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as f:
                    parent[int(name)] = int(f.read().rpartition(")")[2].split()[1])
            except (OSError, ValueError, IndexError):
                continue
    found, frontier = [root], [root]
    while frontier:
        frontier = [pid for pid, ppid in parent.items() if ppid in frontier]
        found += frontier
    return found


def probe() -> str | None:
    """None if sandboxes can be started here, else why not (for a clear refusal)."""
    if bwrap_path() is None:
        return "bubblewrap (bwrap) is not installed: install the 'bubblewrap' package"
    from labs.host import seccomp

    problem = seccomp.problem()
    if problem is not None:
        return problem
    args = bwrap_args()
    try:
        result = subprocess.run([*args, "/usr/bin/true"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap could not run: {exc}"
    if result.returncode != 0:
        return f"bwrap failed (exit {result.returncode}): {result.stderr.decode(errors='replace').strip()}"
    return None
