"""A rank starved of CPU by a loaded machine is not a deadlocked one.

The zygote calls a group deadlocked when no rank made progress for a while and none wanted the
CPU. "Wanted" counts the CPU a rank used *and* the time its threads spent runnable in the run
queue, so niced ranks on a busy machine are not taken for ranks asleep in a collective.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

from labs.rank.procs import run_queue_wait_s


def _spin() -> None:
    while True:
        pass


@contextmanager
def child(busy: bool, nice: int = 0, *, in_thread: bool = False) -> Iterator[int]:
    """A child pinned to CPU 0 that spins (busy) or sleeps, killed on exit. ``in_thread``: a second thread of
    it spins while its main thread sleeps (as a rank's main thread waits on gloo's)."""
    pid = os.fork()
    if pid == 0:
        os.sched_setaffinity(0, {0})
        os.nice(nice)
        if in_thread:
            import threading

            threading.Thread(target=_spin, daemon=True).start()
        while True:
            if not busy or in_thread:
                time.sleep(1)
    try:
        yield pid
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


def waited_over(pid: int, seconds: float) -> float:
    before = run_queue_wait_s(str(pid))
    time.sleep(seconds)
    return run_queue_wait_s(str(pid)) - before


def test_a_starved_process_shows_run_queue_wait_and_a_sleeping_one_does_not() -> None:
    with child(busy=True), child(busy=True, nice=10) as starved:
        waited = waited_over(starved, 1.0)
    # One CPU, a hog at nice 0 beside it: the niced spinner gets ~10% and waits most of the rest.
    assert waited > 0.3, f"a starved spinner waited only {waited:.3f} s of 1 s for a CPU"
    with child(busy=False) as sleeper:
        idle = waited_over(sleeper, 1.0)
    assert idle < 0.05, f"a sleeping process waited {idle:.3f} s in the run queue"


def test_a_process_whose_other_thread_is_starved_shows_run_queue_wait() -> None:
    """The main thread asleep, the thread doing the work starved: the wait is the process's all the same."""
    with child(busy=True), child(busy=True, nice=10, in_thread=True) as starved:
        waited = waited_over(starved, 1.0)
    assert waited > 0.3, f"a process whose spinning thread was starved waited only {waited:.3f} s of 1 s for a CPU"
