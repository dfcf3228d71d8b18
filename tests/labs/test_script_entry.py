"""Script labs (``entry: script``): the student's file run as __main__ with torchrun's variables."""

from __future__ import annotations

import sys

import pytest

from labs.host.feedback import summarise
from labs.host.judge import Case, GroupRun, RankRun
from labs.rank.script import Script, torchrun_env
from labs.spec import LabError, parse_spec

SPEC = """
id: s
title: S
exercise: ex-1
entry: script
world_sizes: [2]
backends: [gloo]
time_limit_s: 5
memory_limit_mb: 256
public_files: [driver.py]
checks: [{id: a, title: A, points: 1}]
"""


@pytest.mark.parametrize(
    ("code", "status", "stderr"),
    [
        ("x = 1", 0, ""),
        ("import sys\nsys.exit(3)", 3, ""),
        ("raise SystemExit(None)", 0, ""),
        ("import sys\nsys.exit('bad config')", 1, "bad config"),
        ("import os, sys\nsys.stderr.write('missing RANK\\n')\nos._exit(2)", 2, "missing RANK"),
        ("import os\nos.environ['RANK']", 1, "KeyError: 'RANK'"),
    ],
)
def test_a_script_ends_with_the_status_a_launcher_sees(
    code: str, status: int, stderr: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # In a rank sys.stderr writes to descriptor 2, which the run captures (pytest replaces it).
    monkeypatch.setattr(sys, "stderr", open(2, "w", closefd=False))  # noqa: SIM115
    script = Script("import os\nos.environ.pop('RANK', None)\n" + code)
    assert script.run() == status
    assert stderr in script.stderr
    if status == 1 and "KeyError" in stderr:  # an uncaught exception prints its traceback, as Python does
        assert 'File "submission.py", line 4' in script.stderr


def test_a_script_runs_as_main_each_time_afresh() -> None:
    script = Script(
        "import sys\ncount = globals().get('count', 0) + 1\nif __name__ == '__main__':\n    sys.exit(count)"
    )
    assert script.run() == 1 and script.run() == 1


def test_torchrun_variables() -> None:
    env = torchrun_env(2, 4, 29512)
    assert env["RANK"] == env["LOCAL_RANK"] == "2" and env["WORLD_SIZE"] == env["LOCAL_WORLD_SIZE"] == "4"
    assert env["MASTER_ADDR"] == "127.0.0.1" and env["MASTER_PORT"] == "29512"
    assert env["TORCHELASTIC_USE_AGENT_STORE"] == "True"


def test_a_script_lab_needs_no_functions_but_a_driver() -> None:
    assert parse_spec(SPEC, "lab.yaml").entry == "script"
    with pytest.raises(LabError, match="public driver"):
        parse_spec(SPEC.replace("public_files: [driver.py]\n", ""), "lab.yaml")
    with pytest.raises(LabError, match="at least one function"):
        parse_spec(SPEC.replace("entry: script\n", ""), "lab.yaml")


def test_a_crash_the_phase_expects_is_no_verdict() -> None:
    case = Case("a", "main", "run", [{}, {}], [{}, {}], driver="run")
    killed = {"rank": 1, "state": "exited", "signal": 9, "exit": None}
    group = GroupRun(2, [case], [RankRun(info={"rank": 0, "state": "running"}), RankRun(info=killed)], status="crashed")
    assert summarise([group], {"kind": "end"}, [])[0] == "crashed"
    group.expect_crash = True
    assert summarise([group], {"kind": "end"}, []) == ("passed", "all checks passed")


def test_each_launch_of_a_script_gets_a_store_of_its_own() -> None:
    # torchrun starts a fresh store for every attempt; a second run on the first one's store reads
    # its stale keys (rank addresses, barrier counts) and now and then hangs.
    import os
    import signal
    from datetime import timedelta

    from torch.distributed import TCPStore

    from labs.rank.script import start_agent_store

    r, w = os.pipe()
    pid, ports = start_agent_store(2, 3, os.getuid(), False, w)
    try:
        assert len(set(ports)) == 3
        clients = [TCPStore("127.0.0.1", p, 2, False, timeout=timedelta(seconds=5)) for p in ports]
        clients[0].set("rank_0", b"first launch")
        assert [c.check(["rank_0"]) for c in clients] == [True, False, False]
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(r)
        os.close(w)
