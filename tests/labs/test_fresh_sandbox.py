"""Every submission gets a fresh sandbox; a zygote forked from the template is confined like a cold one."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from labs.host import template, uids
from labs.host.pool import WarmPool
from labs.host.sandbox import SandboxError

from .conftest import solution

RING = "ring-allreduce"
QUICK = {"world_sizes": [2], "time_limit_s": 6}

LEAVE_BEHIND = """
import os, socket
import torch.distributed
def _leave():
    if torch.distributed.get_rank() != 0:
        return
    # The file and the unix socket are refused now (/tmp is the zygote's, no unix sockets on CPU; System V
    # shared memory stops the rank: tests/labs/test_walls.py); were they made, the next job must not see them.
    try:
        open("/tmp/left-behind", "w").write("job A was here")
    except OSError:
        pass
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.bind("\\0left-behind")
        s.listen()
    except OSError:
        pass
    if os.fork() == 0:  # a lingering process, detached from the rank
        os.setsid()
        null = os.open("/dev/null", os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.closerange(3, 65536)
        os.execv("/bin/sleep", ["sleep", "600"])
_leave()
"""

LOOK_FOR_IT = """
import os, socket
import torch.distributed
def _look():
    if torch.distributed.get_rank() != 0:
        return
    print("FILE", os.path.exists("/tmp/left-behind"))
    try:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect("\\0left-behind")
        print("SOCKET reached")
    except OSError:
        print("SOCKET gone")
    print("SLEEPERS", sum(1 for p in os.listdir("/proc") if p.isdigit() and "600" in open(f"/proc/{p}/cmdline").read()))
_look()
"""

PROBE = """
import json, os, socket
import torch.distributed
def _probe():
    if torch.distributed.get_rank() != 0:
        return
    def status(pid):
        lines = open(f"/proc/{pid}/status").read().splitlines()
        fields = dict(line.split(":\\t", 1) for line in lines if ":\\t" in line)
        keys = ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp")
        return {k: fields[k].strip() for k in keys}
    mounts = sorted(line.split()[4] for line in open("/proc/self/mountinfo"))
    print("PROBE " + json.dumps({"zygote": status(os.getppid()), "rank": status("self"), "mounts": mounts,
          "hostname": socket.gethostname(), "env": sorted(os.environ), "cwd_listing": sorted(os.listdir("/")),
          "uid": os.getuid()}))
_probe()
"""


def output(verdict) -> str:
    return "\n".join(verdict.output.values())


def test_nothing_of_one_submission_is_visible_to_the_next(grader) -> None:
    first = grader.grade(RING, LEAVE_BEHIND + "\n" + solution(RING), **QUICK)
    assert first.status == "passed", first.message
    second = grader.grade(RING, LOOK_FOR_IT + "\n" + solution(RING), **QUICK)
    assert second.status == "passed", second.message
    text = output(second)
    assert "FILE False" in text and "SOCKET gone" in text and "SLEEPERS 0" in text, text


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[object, object]]:
    if not template.available():
        pytest.skip("forking zygotes from the template needs root: this run only has cold sandboxes")
    from labs.host.grader import Grader

    with Grader(pool_size=1, fork_from_template=True) as forked, Grader(pool_size=1, fork_from_template=False) as cold:
        yield forked, cold


def probe(grader) -> dict[str, object]:
    v = grader.grade(RING, PROBE + "\n" + solution(RING), **QUICK)
    assert v.status == "passed", v.message
    line = next(line for line in output(v).splitlines() if line.startswith("PROBE "))
    return json.loads(line.removeprefix("PROBE "))


def test_a_forked_zygote_is_confined_like_a_cold_one_and_holds_no_more_capabilities(both) -> None:
    forked, cold = (probe(g) for g in both)
    processes = ("zygote", "rank")
    # The uid is rank 0's of whichever block the job leased (labs.host.uids), free blocks being taken by the
    # jobs of other tests alike: the same place in a block either way, not the same block.
    apart = (*processes, "uid")
    assert {k: v for k, v in forked.items() if k not in apart} == {k: v for k, v in cold.items() if k not in apart}
    for uid in (forked["uid"], cold["uid"]):
        assert isinstance(uid, int) and uid >= uids.UID_BASE and (uid - uids.UID_BASE) % uids.BLOCK == 0, uid
    for who in processes:
        mine, theirs = forked[who], cold[who]
        seccomp = "2" if who == "rank" else "0"  # a rank runs under its seccomp filter (labs.host.seccomp)
        assert (mine["NoNewPrivs"], mine["Seccomp"]) == (theirs["NoNewPrivs"], theirs["Seccomp"]) == ("1", seccomp)
        for field in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
            assert int(mine[field], 16) & ~int(theirs[field], 16) == 0, (who, field, mine[field], theirs[field])
    setuid_setgid = (1 << 6) | (1 << 7)
    assert int(forked["zygote"]["CapEff"], 16) == int(cold["zygote"]["CapEff"], 16) == setuid_setgid
    assert int(forked["zygote"]["CapBnd"], 16) == setuid_setgid  # the bounding set too: tighter than bwrap's
    assert int(forked["rank"]["CapEff"], 16) == int(forked["rank"]["CapPrm"], 16) == 0
    assert forked["uid"] != 0 and forked["hostname"] == "sandbox"


class RefusingTemplate(template.Template):
    """A host that forbids joining namespaces: every spawn fails."""

    def spawn(self, pid: int, job_fd: int, log_fd: int) -> None:
        raise SandboxError("setns(mnt): Operation not permitted")


def test_a_pool_whose_template_cannot_fork_starts_sandboxes_cold() -> None:
    pool = WarmPool(1, template=RefusingTemplate())
    try:
        box = pool.acquire(timeout=60)
        assert not box.warm_start and pool.template is None
        box.kill()
    finally:
        pool.close()


def test_a_template_started_before_a_lab_was_published_restarts_with_its_preloads() -> None:
    """The embedded worker reads the published labs as the web process first syncs them: it may start its
    template with no preloads. The first lab that needs some restarts it with them (and every module the
    worker's source names then), so the zygotes after it never import them on a job."""
    if not template.available():
        pytest.skip("forking zygotes from the template needs root: this run only has cold sandboxes")
    from labs.host.grader import Grader

    published = ["torch.distributed.checkpoint"]
    with Grader(pool_size=1, fork_from_template=True, preload=[], preload_source=lambda: published) as grader:
        assert grader.template is not None and grader.pool is not None
        grader.pool.acquire(timeout=60).kill()  # a zygote forked from the template as it started: nothing preloaded
        assert preloaded(grader.template) == []
        lab = "bf16-vs-fp16"
        v = grader.grade(lab, solution(lab), world_sizes=[2])
        assert v.status == "passed", v.message
        grader.pool.acquire(timeout=60).kill()  # forked after the lab was loaded
        assert preloaded(grader.template) == sorted(["torch._dynamo", *published])


def preloaded(t: template.Template) -> list[str]:
    """The modules the running template process was started to import (its last argument)."""
    assert t.proc is not None and t.proc.poll() is None
    return json.loads(t.proc.args[-1])


def _collapse_supported() -> bool:
    """MADV_COLLAPSE came with Linux 6.1, and huge pages must not be turned off."""
    release = tuple(int(x) for x in os.uname().release.split("-")[0].split(".")[:2])
    try:
        setting = Path("/sys/kernel/mm/transparent_hugepage/enabled").read_text(encoding="ascii")
    except OSError:
        return False
    return release >= (6, 1) and "[never]" not in setting


def test_the_templates_memory_is_in_huge_pages_so_each_fork_copies_little() -> None:
    """A fork copies a page-table entry per page of private memory: ~50,000 for a torch-warm process in 4 KiB
    pages, ~100 in 2 MiB ones. The template gathers its memory into huge pages once warm."""
    if not template.available():
        pytest.skip("forking zygotes from the template needs root: this run only has cold sandboxes")
    if not _collapse_supported():
        pytest.skip(f"this kernel ({os.uname().release}) cannot collapse memory into huge pages on request")
    pool = WarmPool(1, template=template.Template())
    try:
        pool.acquire(timeout=60).kill()  # the template is started, warm, and has forked a zygote
        assert pool.template is not None and pool.template.proc is not None
        rollup = Path(f"/proc/{pool.template.proc.pid}/smaps_rollup").read_text(encoding="ascii")
        sizes = {line.split(":")[0]: int(line.split()[1]) for line in rollup.splitlines()[1:]}
        assert sizes["AnonHugePages"] >= sizes["Anonymous"] // 2, sizes
    finally:
        pool.close()


def test_making_huge_pages_is_best_effort(tmp_path: Path) -> None:
    """Only private, writable, anonymous memory is collapsed, in whole 2 MiB pages; a range the kernel refuses
    (here: not mapped at all) is left as it is."""
    text = (
        "100000100000-100000600000 rw-p 00000000 00:00 0 \n"
        "100000600000-100000a00000 rw-s 00000000 00:05 12 /dev/zero (deleted)\n"
        "100000a00000-100000e00000 r--p 00000000 00:00 0 \n"
        "100000e00000-100001200000 rw-p 00000000 08:01 99 /usr/lib/libfoo.so\n"
        "100001200000-100001400000 rw-p 00000000 00:00 0 [heap]\n"
        "100001400000-100001500000 rw-p 00000000 00:00 0 \n"
    )
    mib2 = 0x200000
    assert template.private_ranges(text) == [
        (0x100000200000, 0x100000200000 + mib2 * 2),
        (0x100001200000, 0x100001400000),
    ]
    maps = tmp_path / "maps"
    maps.write_text(text, encoding="ascii")
    assert template.huge_pages(str(maps)) == 0
