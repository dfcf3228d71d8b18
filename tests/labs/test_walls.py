"""The sandbox's walls: the seccomp filter, the inode cap on /tmp, no place every rank may write in.

Each hostile submission is graded by a real Grader in a real sandbox; its ranks print what they
managed to do, and the next correct submission must still pass.
"""

from __future__ import annotations

import ast
import ctypes
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from labs.host import sandbox, seccomp
from labs.host.feedback import SIGSYS, summarise
from labs.host.judge import GroupRun, RankRun
from labs.rank import confine

from .conftest import lifted, solution


@pytest.fixture(scope="session")
def grader(worker_grader: object) -> object:
    """The walls are the sandbox's: tested in the worker's own mode (tests/labs/conftest.py)."""
    return worker_grader


RING = "ring-allreduce"
ROOT = Path(__file__).resolve().parents[2]
QUICK = {"world_sizes": [2], "time_limit_s": 6}
CORRECT_TAIL = "\n\n" + solution(RING)


@pytest.fixture(scope="module")
def ring(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The ring lab with the static pre-check lifted: the walls must hold without that speed bump."""
    return lifted(RING, tmp_path_factory.mktemp("walls"))


def grade(grader, ring: Path, code: str, **kwargs):
    return grader.grade(RING, code, **{**QUICK, "lab_dir": ring, **kwargs})


def output(verdict) -> str:
    return "\n".join(verdict.output.values())


@pytest.fixture(autouse=True)
def then_a_correct_submission_passes(request):
    yield
    if "grader" in request.fixturenames:
        v = request.getfixturevalue("grader").grade(RING, solution(RING), **QUICK)
        assert v.status == "passed", v.message


def test_the_exported_filter_kills_keyctl_and_leaves_tcp_fork_and_threads_alone() -> None:
    code = textwrap.dedent(
        """
        import ctypes, errno, os, socket, sys, threading
        from labs.host import seccomp
        from labs.rank import confine
        libc = ctypes.CDLL(None, use_errno=True)
        assert libc.prctl(38, 1, 0, 0, 0) == 0  # no new privileges, as confine.become sets it
        confine.install(seccomp.program_b64(gpu=sys.argv[1] == "gpu"))
        socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()
        socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, 0).close()  # what getifaddrs needs
        for family, kind in ((socket.AF_UNIX, socket.SOCK_STREAM), (socket.AF_INET, socket.SOCK_DGRAM)):
            try:
                socket.socket(family, kind).close()
                print("socket", int(family), int(kind), "made")
            except PermissionError:
                print("socket", int(family), int(kind), "refused")
        print("clone3", libc.syscall(435, 0, 0), ctypes.get_errno() == errno.ENOSYS)
        thread = threading.Thread(target=print, args=("thread ran",))
        thread.start()
        thread.join()
        if os.fork() == 0:
            os._exit(0)
        os.wait()
        print("forked", flush=True)
        libc.syscall(250, 0, 0, 0, 0, 0)  # keyctl(KEYCTL_GET_KEYRING_ID, ...)
        print("keyctl returned")
        """
    )
    for flavour in ("cpu", "gpu"):
        run = subprocess.run(
            [sys.executable, "-c", code, flavour], capture_output=True, text=True, timeout=60, cwd=ROOT
        )
        assert run.returncode == -signal.SIGSYS, (flavour, run.returncode, run.stdout, run.stderr)
        assert "forked" in run.stdout and "thread ran" in run.stdout and "keyctl returned" not in run.stdout
        assert "clone3 -1 True" in run.stdout  # glibc falls back to clone, whose flags the filter reads
        assert ("socket 1 1 refused" in run.stdout) == (flavour == "cpu"), run.stdout  # NCCL's proxy needs unix
        assert "socket 2 2 refused" in run.stdout


def test_install_refuses_a_program_that_is_not_whole_instructions() -> None:
    with pytest.raises(ValueError):
        confine.install("AAAA")  # three bytes
    confine.install(None)  # a run without a sandbox loads nothing


def keys_per_uid(text: str) -> dict[int, int]:
    """/proc/key-users: ``uid: usage nkeys/nikeys qnkeys/maxkeys qnbytes/maxbytes`` (the whole host's)."""
    rows = (line.partition(":") for line in text.splitlines() if line.strip())
    return {int(uid): int(rest.split()[1].split("/")[0]) for uid, _, rest in rows}


def host_keys() -> dict[int, int]:
    with open("/proc/key-users") as f:
        return keys_per_uid(f.read())


def test_the_kernel_keyring_is_out_of_reach_and_keeps_nothing_for_the_next_submission(grader, ring) -> None:
    before = host_keys()
    code = (
        """
import ctypes, os
print("UID", os.getuid(), flush=True)
libc = ctypes.CDLL(None, use_errno=True)
# add_key("user", "ringlab-walls", "secret", 6, KEY_SPEC_USER_KEYRING): the keyring is shared host-wide
key = libc.syscall(248, b"user", b"ringlab-walls", b"secret", 6, ctypes.c_long(-4))
print("ADDED", key)
"""
        + CORRECT_TAIL
    )
    v = grade(grader, ring, code)
    assert v.status == "runtime_error", v.message
    assert f"signal {SIGSYS}, SIGSYS" in v.message and "the kernel keyring" in v.message, v.message
    assert v.score == 0 and "ADDED" not in output(v)
    uids = {int(line.split()[1]) for line in output(v).splitlines() if line.startswith("UID ")}
    assert uids
    # A key, or the user keyrings add_key would have made first, would show in the counts of the ranks' uids.
    later = grade(grader, ring, "print('KEYS', repr(open('/proc/key-users').read()))\n" + CORRECT_TAIL)
    assert later.status == "passed", later.message
    seen = keys_per_uid(ast.literal_eval(output(later).split("KEYS ", 1)[1].splitlines()[0]))
    for counts in (host_keys(), seen):
        assert all(counts.get(uid, 0) <= before.get(uid, 0) for uid in uids), (uids, before, counts)


FORBIDDEN = {
    "ptrace": "libc.ptrace(16, os.getppid(), 0, 0)",  # PTRACE_ATTACH to the zygote
    "unshare-user": "libc.unshare(0x10000000)",  # CLONE_NEWUSER: every capability inside it
    "clone-newns": "libc.syscall(56, 0x00020000 | 17, 0, 0, 0, 0)",  # clone(CLONE_NEWNS | SIGCHLD)
    "sysv-shm": "libc.shmget(0x5EED, 4096, 0o1666)",  # IPC_CREAT | 0666: shared by every rank of the sandbox
    "mount": "libc.mount(b'none', b'/tmp', b'tmpfs', 0, None)",
}


@pytest.mark.parametrize("call", FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_forbidden_system_calls_stop_the_rank_with_a_message_naming_them(grader, ring, call: str) -> None:
    code = f"import ctypes, os\nlibc = ctypes.CDLL(None, use_errno=True)\nprint('RESULT', {call})\n" + CORRECT_TAIL
    v = grade(grader, ring, code)
    assert v.status == "runtime_error", v.message
    assert "stopped by the sandbox (signal 31, SIGSYS)" in v.message, v.message
    assert "through torch.distributed" in v.message and v.score == 0
    assert "RESULT" not in output(v)


def test_ranks_cannot_reach_each_other_by_unix_or_udp_sockets(grader, ring) -> None:
    code = (
        """
import os, socket, time
def _try(family, kind, address):
    try:
        s = socket.socket(family, kind)
    except OSError as exc:
        print("REFUSED", family.name, kind.name, type(exc).__name__)
        return
    s.settimeout(1.0)
    try:
        s.bind(address)  # the first rank to bind listens; the other reaches it
        if kind == socket.SOCK_STREAM:
            s.listen()
            print("LISTENING", s.accept())
        else:
            print("RECEIVED", s.recvfrom(16))
    except OSError:
        for _ in range(50):
            try:
                s.connect(address) if kind == socket.SOCK_STREAM else s.sendto(b"hi", address)
                print("REACHED", family.name, kind.name)
                return
            except OSError:
                time.sleep(0.02)
_try(socket.AF_UNIX, socket.SOCK_STREAM, "\\0ringlab-walls")
_try(socket.AF_INET, socket.SOCK_DGRAM, ("127.0.0.1", 29999))
"""
        + CORRECT_TAIL
    )
    v = grade(grader, ring, code)
    text = output(v)
    assert "REACHED" not in text and "LISTENING" not in text and "RECEIVED" not in text, text
    assert text.count("REFUSED AF_UNIX SOCK_STREAM PermissionError") == 2, text
    assert text.count("REFUSED AF_INET SOCK_DGRAM PermissionError") == 2, text
    assert v.status == "passed", v.message  # trying is no crime; it just gets nowhere


def test_nothing_is_writable_outside_a_ranks_own_directory(grader, ring) -> None:
    code = (
        """
import os, tempfile
from multiprocessing import shared_memory
def _attempt(what, fn):
    try:
        fn()
        print("MADE", what)
    except OSError as exc:
        print("REFUSED", what, type(exc).__name__)
_attempt("tmp-file", lambda: open("/tmp/ringlab-walls", "w").close())
_attempt("tmp-dir", lambda: os.mkdir("/tmp/ringlab-walls-dir"))
_attempt("dev-shm-file", lambda: open("/dev/shm/ringlab-walls", "w").close())
_attempt("posix-shm", lambda: shared_memory.SharedMemory("ringlab-walls", create=True, size=4096))
_attempt("own-dir", lambda: open(os.path.join(os.getcwd(), "scratch"), "w").close())
_attempt("tempfile", lambda: tempfile.TemporaryFile().close())  # in $TMPDIR, the rank's own directory
"""
        + CORRECT_TAIL
    )
    v = grade(grader, ring, code)
    text = output(v)
    for what in ("tmp-file", "tmp-dir", "dev-shm-file", "posix-shm"):
        assert f"MADE {what}" not in text and text.count(f"REFUSED {what}") == 2, (what, text)
    assert text.count("MADE own-dir") == 2 and text.count("MADE tempfile") == 2, text
    assert v.status == "passed", v.message


FILL = """
import itertools, os
def _fill():
    for i in itertools.count():
        if i > 10_000_000:
            raise RuntimeError("no inode cap: ten million files made")
        open(f"empty-{i}", "w").close()
"""


def test_millions_of_empty_files_stop_at_the_inode_cap_as_the_students_error(grader, ring) -> None:
    v = grade(grader, ring, FILL + "_fill()\n" + CORRECT_TAIL, time_limit_s=20)
    assert v.status == "runtime_error", v.message
    assert "No space left on device" in v.message and "/tmp is full" in v.message, v.message
    assert v.elapsed_s < 15


def test_a_full_tmp_that_a_later_group_meets_is_the_students_error_not_ours(grader, ring) -> None:
    code = FILL + "try:\n    _fill()\nexcept OSError:\n    pass\n" + CORRECT_TAIL
    v = grader.grade(RING, code, world_sizes=[2, 4], time_limit_s=20, lab_dir=ring)
    assert v.status in ("passed", "runtime_error"), v.message
    assert "not your fault" not in v.message
    if v.status == "runtime_error":
        assert "your code filled it" in v.message, v.message


@pytest.mark.skipif(os.geteuid() != 0, reason="a tmpfs of its own for /tmp is mounted only as root")
def test_a_sandbox_unmounts_its_tmp_when_killed() -> None:
    box = sandbox.Sandbox()
    path = box.scratch
    try:
        assert path is not None and path.startswith(str(sandbox.BOXES))
        mounts = Path("/proc/mounts").read_text()
        assert f" {path} tmpfs " in mounts and f"nr_inodes={sandbox.TMP_INODES}," in mounts
    finally:
        box.kill()
    assert f" {path} " not in Path("/proc/mounts").read_text() and not os.path.exists(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="a tmpfs of its own for /tmp is mounted only as root")
def test_the_mounts_a_dead_worker_left_behind_are_swept_and_a_live_ones_kept() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has now
    sandbox.BOXES.mkdir(mode=0o700, parents=True, exist_ok=True)
    stale, live = sandbox.BOXES / f"{gone.pid}-walls", sandbox.BOXES / f"{os.getpid()}-walls"
    for path in (stale, live):
        path.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(path)], check=True)
    try:
        assert str(stale) in sandbox.sweep_boxes()
        mounts = Path("/proc/mounts").read_text()
        assert not stale.exists() and f" {stale} " not in mounts
        assert live.exists() and f" {live} tmpfs " in mounts
    finally:
        for path in (stale, live):
            if path.exists():
                sandbox.unmount_scratch(str(path))


def test_a_rank_killed_by_the_filter_is_named_even_in_a_phase_that_expects_a_crash() -> None:
    info = {"rank": 1, "state": "exited", "exit": None, "signal": SIGSYS, "output": "", "output_bytes": 0}
    group = GroupRun(2, [], [RankRun(info={"rank": 0, "state": "exited"}), RankRun(info=info)])
    group.status, group.expect_crash = "crashed", True
    status, message = summarise([group], {"kind": "end"}, [])
    assert status == "runtime_error"
    assert message.startswith("world size 2, rank 1 was stopped by the sandbox (signal 31, SIGSYS)"), message


def test_the_filter_is_a_whole_number_of_bpf_instructions_for_both_kinds_of_job() -> None:
    for gpu in (False, True):
        program = seccomp.program(gpu)
        assert len(program) % ctypes.sizeof(ctypes.c_uint64) == 0 and 0 < len(program) // 8 <= 4096
    assert seccomp.program(False) != seccomp.program(True)  # unix sockets: refused on CPU only
