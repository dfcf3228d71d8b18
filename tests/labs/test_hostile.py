"""Hostile submissions: each must fail (or be contained), and the next correct one must still pass.

Student output is captured into ``verdict.output``; the hostile code prints what it
managed to do, so these tests read the sandbox's view from there.
"""

from __future__ import annotations

import socket
import threading

import pytest

from labs.spec import DEFAULT_CONTENT

from .conftest import SECRET, solution


@pytest.fixture(scope="session")
def grader(worker_grader: object) -> object:
    """The walls are the sandbox's: tested in the worker's own mode (tests/labs/conftest.py)."""
    return worker_grader


RING = "ring-allreduce"
# Room for two cold-started ranks on a loaded 2-core machine; tests that must hit a limit set their own.
QUICK = {"world_sizes": [2], "time_limit_s": 8}
CORRECT_TAIL = "\n\n" + solution(RING)


def grade(grader, code: str, **kwargs):
    return grader.grade(RING, code, **{**QUICK, **kwargs})


def output(verdict) -> str:
    return "\n".join(verdict.output.values())


@pytest.fixture(autouse=True)
def then_a_correct_submission_passes(grader):
    yield
    v = grader.grade(RING, solution(RING), world_sizes=[2])
    assert v.status == "passed", v.message


def test_no_network_beyond_the_sandbox_and_no_host_loopback(grader) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    port = server.getsockname()[1]
    reached: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                reached.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    code = (
        f"""
import socket
for host, port in [("1.1.1.1", 80), ("127.0.0.1", {port}), ("10.0.0.1", 5432)]:
    try:
        socket.create_connection((host, port), timeout=1).close()
        print("CONNECTED", host, port)
    except OSError as exc:
        print("BLOCKED", host, port, type(exc).__name__)
"""
        + CORRECT_TAIL
    )
    try:
        v = grade(grader, code)
    finally:
        stop.set()
        thread.join()
        server.close()
    assert "CONNECTED" not in output(v)
    assert output(v).count("BLOCKED") == 6  # three targets, two ranks
    assert reached == []
    assert v.status == "passed"  # the attempt itself is not punished; it just gets nowhere


def test_cannot_read_solutions_checks_secrets_or_the_worker_environment(grader) -> None:
    targets = [
        DEFAULT_CONTENT / RING / "solution.py",
        DEFAULT_CONTENT / RING / "checks.py",
        "/etc/shadow",
        "/etc/passwd",
        "/proc/1/environ",
        "/proc/2/environ",
        "/work/main/data",
    ]
    code = (
        f"""
import os
print("ENV", sorted(os.environ.items()))
for path in {[str(t) for t in targets]!r}:
    try:
        with open(path, "rb") as f:
            print("LEAKED-CONTENT", path, f.read(200))
    except OSError as exc:
        print("DENIED", path, type(exc).__name__)
"""
        + CORRECT_TAIL
    )
    v = grade(grader, code)
    text = output(v)
    assert "LEAKED-CONTENT" not in text
    assert SECRET not in text and "DATABASE_URL" not in text
    assert text.count("DENIED") == 2 * len(targets)


def test_fork_bomb_is_contained(grader) -> None:
    code = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    v = grade(grader, code, time_limit_s=3)
    assert v.status == "time_limit", v.message
    assert "reached the limit of 64 processes" in v.message and "fork bomb" in v.message, v.message
    assert v.score == 0


def test_memory_bomb_hits_the_memory_limit(grader) -> None:
    code = "blocks = []\nwhile True:\n    blocks.append(bytearray(64 << 20))\n" + CORRECT_TAIL
    # The lab's own time limit: zeroing 512 MB on each of two cold-started ranks of a loaded
    # machine took longer than the quick limit the other hostile tests use.
    v = grade(grader, code, time_limit_s=None)
    assert v.status == "memory_limit", v.message
    assert v.score == 0


def test_infinite_loop_is_a_time_limit(grader) -> None:
    code = "def ring_all_reduce(tensor):\n    while True:\n        pass\n"
    v = grade(grader, code, time_limit_s=2)
    assert v.status == "time_limit", v.message
    assert "busy" in v.message


def test_output_flood_is_cut(grader) -> None:
    code = "import sys\nwhile True:\n    sys.stdout.write('x' * 65536)\n"
    v = grade(grader, code, time_limit_s=2)
    assert v.status == "time_limit"
    assert "output was cut" in v.message
    assert all(len(text) <= 16384 for text in v.output.values())


def test_killing_the_parent_is_not_allowed(grader) -> None:
    code = (
        """
import os, signal
for target in (os.getppid(), 1):
    try:
        os.kill(target, signal.SIGKILL)
        print("KILLED", target)
    except OSError as exc:
        print("REFUSED", target, type(exc).__name__)
"""
        + CORRECT_TAIL
    )
    v = grade(grader, code)
    assert "KILLED" not in output(v)
    assert output(v).count("REFUSED") == 4
    assert v.status == "passed", v.message


def test_hanging_in_a_collective_is_a_deadlock(grader) -> None:
    code = (
        "import torch, torch.distributed as dist\n\ndef ring_all_reduce(tensor):\n"
        "    dist.recv(torch.empty_like(tensor), src=(dist.get_rank() + 1) % dist.get_world_size())\n"
    )
    v = grade(grader, code, time_limit_s=8)
    assert v.status == "deadlock", v.message
    assert v.elapsed_s < 6  # noticed by idleness, well before the time limit
    assert "waiting" in v.message


@pytest.mark.parametrize(
    "cheat",
    [
        "import torch\ntorch.allclose = lambda *a, **k: True\ntorch.equal = lambda *a, **k: True\n"
        "def ring_all_reduce(tensor):\n    pass\n",
        "print('PASS')\nprint('all checks passed')\ndef ring_all_reduce(tensor):\n    print('PASS')\n",
        "open('results.json', 'w').write('{\"status\": \"passed\", \"score\": 10}')\n"
        "def ring_all_reduce(tensor):\n    pass\n",
        "import os\nos._exit(0)\n",
        "import sys\nsys.exit(0)\n",
    ],
    ids=["monkeypatch-allclose", "print-pass", "results-file", "os-exit-0", "sys-exit-0"],
)
def test_cheats_do_not_pass(grader, cheat: str) -> None:
    v = grade(grader, cheat)
    assert v.status != "passed"
    assert v.score == 0 or not v.check("ring-all-reduce").passed
    assert not v.check("ring-all-reduce").passed


def test_syntax_error_then_normal_grading(grader) -> None:
    v = grade(grader, "def ring_all_reduce(:\n")
    assert v.status == "compile_error"
    assert "line 1" in v.message
