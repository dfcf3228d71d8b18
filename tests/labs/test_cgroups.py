"""Control groups per job and per rank, and rank uids unique on the host.

The pure parts (mounts, paths, the kernel's files, on cgroup v1 and v2) are tested on samples; the
rest on this host's real cgroups with real sandboxes: two workers side by side, shared memory past
the limit, the kernel's memory high-water, and nothing left behind.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from labs.host import cgroupfs, cgroups, pidns, uids
from labs.host.judge import GroupRun, RankRun, memory_peak

from .conftest import solution

RING = "ring-allreduce"  # memory_limit_mb: 512

# /proc/self/mountinfo of a hybrid host (v1 controllers, an empty cgroup2) and of a pure v2 host.
HYBRID = """\
25 30 0:23 / /sys rw,nosuid,nodev,noexec,relatime shared:7 - sysfs sysfs rw
31 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec shared:9 - tmpfs tmpfs ro,mode=755
32 31 0:27 / /sys/fs/cgroup/unified rw,nosuid,nodev,noexec,relatime shared:10 - cgroup2 cgroup2 rw,nsdelegate
35 31 0:30 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime shared:14 - cgroup cgroup rw,memory
36 31 0:31 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime shared:15 - cgroup cgroup rw,pids
37 31 0:32 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid,nodev,noexec,relatime shared:16 - cgroup cgroup rw,cpu,cpuacct
"""
UNIFIED = """\
22 27 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw
26 21 0:24 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 cgroup2 rw,nsdelegate
40 26 0:40 / /mnt/with\\040space rw,relatime - tmpfs tmpfs rw
"""


def have_cgroups() -> bool:
    return not isinstance(cgroupfs.detect(), str)


needs_cgroups = pytest.mark.skipif(not have_cgroups(), reason="needs root and the memory and pids cgroup controllers")


# --- pure parts ----------------------------------------------------------------------------------


def test_mountinfo_is_parsed_with_controllers_and_escaped_paths() -> None:
    mounts = cgroupfs.parse_mountinfo(HYBRID + UNIFIED)
    by_point = {str(m.point): m for m in mounts}
    assert by_point["/sys/fs/cgroup/memory"].fstype == "cgroup"
    assert "memory" in by_point["/sys/fs/cgroup/memory"].options
    assert {"cpu", "cpuacct"} <= by_point["/sys/fs/cgroup/cpu,cpuacct"].options
    assert by_point["/sys/fs/cgroup/unified"].fstype == "cgroup2"
    assert "/mnt/with space" in by_point


def test_a_hybrid_host_uses_its_v1_controllers() -> None:
    found = cgroupfs.choose_hierarchy(cgroupfs.parse_mountinfo(HYBRID), {Path("/sys/fs/cgroup/unified"): set()})
    assert found == cgroupfs.Hierarchy(1, Path("/sys/fs/cgroup/memory"), Path("/sys/fs/cgroup/pids"))
    assert isinstance(found, cgroupfs.Hierarchy) and found.mode == "cgroup v1"
    assert found.dirs("w", "job-1") == [
        Path("/sys/fs/cgroup/memory/ringlab/w/job-1"),
        Path("/sys/fs/cgroup/pids/ringlab/w/job-1"),
    ]


def test_a_v2_host_uses_the_unified_hierarchy_once() -> None:
    controllers = {Path("/sys/fs/cgroup"): {"cpuset", "cpu", "io", "memory", "hugetlb", "pids", "rdma", "misc"}}
    found = cgroupfs.choose_hierarchy(cgroupfs.parse_mountinfo(UNIFIED), controllers)
    assert found == cgroupfs.Hierarchy(2, Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup"))
    assert isinstance(found, cgroupfs.Hierarchy) and found.mode == "cgroup v2"
    assert found.dirs("w", "job-1", "g0-rank3") == [Path("/sys/fs/cgroup/ringlab/w/job-1/g0-rank3")]


def test_a_host_without_the_controllers_says_which_it_has() -> None:
    why = cgroupfs.choose_hierarchy(cgroupfs.parse_mountinfo(UNIFIED), {Path("/sys/fs/cgroup"): {"cpu", "io"}})
    assert isinstance(why, str)
    assert "memory and the pids controller" in why and "cpu, io" in why
    assert "no cgroup filesystem is mounted" in str(cgroupfs.choose_hierarchy([], {}))


def test_the_kernels_files_are_read_as_numbers() -> None:
    v2_events = "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\noom_group_kill 0\n"
    v1_oom = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n"
    assert cgroupfs.parse_keyed(v2_events)["oom_kill"] == 1
    assert cgroupfs.parse_keyed(v1_oom) == {"oom_kill_disable": 0, "under_oom": 0, "oom_kill": 3}
    assert cgroupfs.parse_keyed("max 7\n")["max"] == 7  # pids.events, both versions
    assert cgroupfs.parse_limit("max\n") is None  # v2 memory.max / pids.max
    assert cgroupfs.parse_limit("9223372036854771712\n") is None  # v1's "unlimited"
    assert cgroupfs.parse_limit("536870912\n") == 512 << 20
    status = "Name:\tpython3\nTgid:\t4242\nNSpid:\t4242\t7\nNSpgid:\t4242\t1\n"
    assert pidns.parse_nspid(status) == [4242, 7]
    assert pidns.parse_nspid("Name:\tx\n") == []


def test_worker_group_names_carry_their_owner() -> None:
    assert cgroups.owner_of(cgroups.worker_name(4026531836, 123, 456789, 2)) == (4026531836, 123, 456789)
    assert cgroups.owner_of("job-1") is None and cgroups.owner_of("1-2-3") is None


def test_a_jobs_limits_cover_every_rank_and_the_sandbox() -> None:
    memory, pids = cgroups.job_limits(4, 512, 64)
    assert memory == 4 * (cgroups.SETUP_BYTES + (512 << 20)) + cgroups.SANDBOX_BYTES
    assert pids == 4 * 64 + cgroups.SANDBOX_PIDS


def test_memory_peak_is_the_high_water_above_the_baseline() -> None:
    ranks = [RankRun(memory={"baseline_bytes": 10 << 20, "peak_bytes": 310 << 20}), RankRun()]
    g = GroupRun(2, [], ranks)
    assert memory_peak(g, 0) == 300 << 20
    assert memory_peak(g, 1) is None  # not measured
    assert memory_peak(g, 5) is None


def test_a_worker_without_cgroups_says_how_to_fix_it() -> None:
    from labs.host.grader import no_cgroups

    message = no_cgroups("only root may create groups")
    assert "only root may create groups" in message
    assert "RINGLAB_ALLOW_NO_CGROUPS=1" in message and "shared memory" in message


# --- uids ----------------------------------------------------------------------------------------

HOLD = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from labs.host import uids
lease = uids.lease(Path({folder!r}))
print(lease.block, flush=True)
sys.stdin.readline()
"""


def test_uid_blocks_are_unique_across_graders_and_processes(tmp_path: Path) -> None:
    folder = tmp_path / "uids"
    root = str(Path(__file__).resolve().parents[2])
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD.format(root=root, folder=str(folder))],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdin is not None
        theirs = int(holder.stdout.readline())
        first, second = uids.lease(folder), uids.lease(folder)  # two Graders in this process
        taken = {theirs, first.block, second.block}
        assert len(taken) == 3
        assert len({uids.UID_BASE + uids.BLOCK * b for b in taken}) == 3
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=10)
        third = uids.lease(folder)  # the other process has gone: its block is free again
        assert third.block == theirs
        first.release()
        with uids.lease(folder, blocks=first.block + 1) as again:
            assert again.block == first.block
        with pytest.raises(uids.NoFreeUids):
            uids.lease(folder, blocks=theirs + 1)  # held by ``third``, and the blocks before it too
        second.release()
        third.release()
    finally:
        holder.kill()
        holder.wait()


# --- on this host's cgroups, with real sandboxes ---------------------------------------------------


@pytest.fixture(scope="module")
def two_graders():
    """Two workers on one host, as two Graders (each with its own pool, template and groups)."""
    from labs.host.grader import Grader

    first, second = Grader(pool_size=1), Grader(pool_size=1)
    yield first, second
    first.close()
    second.close()


def worker_dirs(grader) -> list[Path]:
    assert grader.cgroups is not None
    return grader.cgroups.hierarchy.dirs(grader.cgroups.name)


def jobs_left(grader) -> list[Path]:
    grader.settle()
    return [job for top in worker_dirs(grader) for job in top.glob("job-*")]


@needs_cgroups
def test_a_fork_bomb_beside_an_honest_grade_does_not_touch_it(two_graders) -> None:
    bombing, honest = two_graders
    assert bombing.confinement == honest.confinement == cgroupfs.detect().mode  # type: ignore[union-attr]
    # Every process forks again and again; refused, it waits a moment (the CPU stays for the honest grade's
    # ranks and the zygotes: on a loaded 2-core host, 128 spinning processes starve them all).
    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        time.sleep(0.05)\n"
    verdicts = {}
    thread = threading.Thread(
        target=lambda: verdicts.update(bomb=bombing.grade(RING, bomb, world_sizes=[2], time_limit_s=10))
    )
    thread.start()
    time.sleep(1.0)  # the bomb is at its limit by now, and stays there
    fair = honest.grade(RING, solution(RING), world_sizes=[2, 3])
    thread.join()
    assert fair.status == "passed" and fair.score == fair.max_score, fair.message
    v = verdicts["bomb"]
    assert v.status == "time_limit" and v.score == 0, v.message
    assert "reached the limit of 64 processes" in v.message and "fork bomb" in v.message, v.message
    assert any(rank.get("pids_limited") for rank in v.data["ranks"]["ws2"])  # the kernel refused its forks


@needs_cgroups
def test_shared_memory_past_the_limit_is_a_memory_limit(two_graders) -> None:
    grader = two_graders[0]
    code = (
        "import mmap\n"
        "shared = mmap.mmap(-1, 768 << 20, mmap.MAP_SHARED | mmap.MAP_ANONYMOUS)  # RLIMIT_DATA does not count it\n"
        "for start in range(0, len(shared), 16 << 20):\n"
        "    shared[start : start + (16 << 20)] = bytes([1]) * (16 << 20)\n" + solution(RING)
    )
    v = grader.grade(RING, code, world_sizes=[2])
    assert v.status == "memory_limit", v.message
    assert "killed by the kernel" in v.message and "shared memory" in v.message, v.message
    assert "512 MB" in v.message, v.message
    assert any(rank.get("oom_killed") for rank in v.data["ranks"]["ws2"])
    assert v.score == 0


@needs_cgroups
def test_the_memory_peak_grows_with_what_the_code_holds(two_graders) -> None:
    grader = two_graders[1]
    lean = grader.grade(RING, solution(RING), world_sizes=[2])
    fat = grader.grade(RING, "_kept = bytes([1]) * (300 << 20)\n" + solution(RING), world_sizes=[2])
    assert lean.status == fat.status == "passed", (lean.message, fat.message)

    def peaks(v) -> list[int]:
        ranks = v.data["ranks"]["ws2"]
        return [r["memory"]["peak_bytes"] - r["memory"]["baseline_bytes"] for r in ranks]

    for small, big in zip(peaks(lean), peaks(fat), strict=True):
        assert small > 0
        assert big - small >= 250 << 20, (small, big)


def memory_group(pid: int) -> str | None:
    """The path of ``pid``'s memory cgroup (v1's memory line, else v2's single one)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    paths = {parts[1]: parts[2] for parts in (line.split(":", 2) for line in lines)}
    return next((path for names, path in paths.items() if "memory" in names.split(",")), paths.get(""))


def parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[1])


@needs_cgroups
def test_the_zygote_and_the_stores_it_starts_are_in_the_jobs_group(two_graders) -> None:
    grader = two_graders[0]
    assert grader.cgroups is not None
    code = "import time\n_t = time.monotonic()\nwhile time.monotonic() < _t + 1.5:\n    pass\n" + solution(RING)
    verdicts = {}
    thread = threading.Thread(target=lambda: verdicts.update(v=grader.grade(RING, code, world_sizes=[2, 3])))
    thread.start()
    ranks: dict[int, str] = {}
    deadline = time.monotonic() + 20
    while not ranks and time.monotonic() < deadline:
        time.sleep(0.1)
        for name in os.listdir("/proc"):
            path = memory_group(int(name)) if name.isdigit() else None
            if path and grader.cgroups.name in path and "-rank" in path.rsplit("/", 1)[-1]:
                ranks[int(name)] = path
    assert ranks, "no rank was seen in a rank's group"
    zygotes = {parent(pid) for pid in ranks}
    assert len(zygotes) == 1
    zygote = zygotes.pop()
    job = next(iter(ranks.values())).rsplit("/", 1)[0]
    assert memory_group(zygote) == f"{job}/sandbox"
    # The zygote's other children are the stores: the first group's, and the next one's, started as this one joined.
    stores = [pid for pid in pidns.children(zygote) if pid not in ranks]
    assert stores and all(memory_group(pid) == f"{job}/sandbox" for pid in stores), stores
    thread.join()
    assert verdicts["v"].status == "passed", verdicts["v"].message


@needs_cgroups
def test_no_group_is_left_behind(two_graders) -> None:
    from labs.host.grader import Grader

    assert all(jobs_left(g) == [] for g in two_graders)
    grader = Grader(pool_size=0, preload=[])
    v = grader.grade(RING, solution(RING), world_sizes=[2, 4])
    assert v.status == "passed", v.message
    assert jobs_left(grader) == []
    tops = worker_dirs(grader)
    assert all(top.is_dir() for top in tops)
    grader.close()
    assert not any(top.exists() for top in tops)


@needs_cgroups
def test_groups_of_a_dead_worker_are_removed_at_start(tmp_path: Path) -> None:
    found = cgroupfs.detect()
    assert isinstance(found, cgroupfs.Hierarchy)
    pidns = os.stat("/proc/self/ns/pid").st_ino
    stale = found.dirs(cgroups.worker_name(pidns, os.getpid(), 1, 1), "job-7", "sandbox")  # not our start time
    elsewhere = found.dirs(cgroups.worker_name(pidns + 1, 1, 1, 1))  # a worker of another container: kept
    for d in elsewhere:
        d.mkdir(exist_ok=True)
    for d in stale:
        d.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(["sleep", "60"])
    try:
        (stale[0] / "cgroup.procs").write_text(str(holder.pid))
        fresh = cgroups.Cgroups(found)
        try:
            assert not any(d.parent.parent.exists() for d in stale)
            assert holder.wait(timeout=5) == -9  # what it left running is killed
            assert all(d.is_dir() for d in elsewhere)
        finally:
            fresh.close()
    finally:
        holder.kill()
        holder.wait()
        for d in elsewhere:
            d.rmdir()


def test_healthz_tells_what_confines_each_live_worker(client, session) -> None:
    from dataclasses import replace

    from app.db import utcnow
    from app.labs import queue
    from tests.labs_app.conftest import capacity

    for name, confinement in [("v1-a", "cgroup v1"), ("v1-b", "cgroup v1"), ("bare", "none")]:
        queue.register(replace(capacity(name), confinement=confinement), session=session, now=utcnow())
    session.commit()
    workers = client.get("/healthz").json()["workers"]
    assert workers["alive"] == 3
    assert workers["confinement"] == {"cgroup v1": 2, "none": 1}
