"""Keeps the embedded grading worker of ``ringlab serve`` running.

The worker is a child process (it imports torch; the web process never does). When it
exits for any reason (``kill -9``, a crash, the kernel's OOM killer), the supervisor
knows at once: it hands the jobs that worker held back to the queue, keeping their
attempt count, marks it stopped, and starts a new one, at once the first time and with
a growing pause if it keeps dying. A worker that refuses to start (exit code 2: no
sandbox) is not restarted: that needs the operator.
"""

from __future__ import annotations

import logging
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable

from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope, utcnow
from app.labs import queue

log = logging.getLogger("ringlab.supervisor")
BACKOFF_S = (0.0, 1.0, 2.0, 5.0, 10.0, 30.0)  # pause before the n-th restart in a row
STABLE_S = 60.0  # a worker that ran this long resets the back-off
REFUSED = 2  # `ringlab worker`'s exit code when it will not grade (no sandbox)


def backoff(failures: int) -> float:
    return BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]


class Supervisor:
    """Start ``command(worker_id)`` as a child and restart it whenever it exits, until ``stop``."""

    def __init__(
        self, command: Callable[[str], list[str]], factory: sessionmaker[Session], *, max_attempts: int
    ) -> None:
        self.command = command
        self.factory = factory
        self.max_attempts = max_attempts
        self.proc: subprocess.Popen[bytes] | None = None
        self.worker_id: str | None = None
        self.restarts = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-supervisor", daemon=True)

    def start(self) -> None:
        self._spawn()
        self._thread.start()

    def _spawn(self) -> None:
        self.worker_id = f"{socket.gethostname()[:40]}-embedded-{uuid.uuid4().hex[:12]}"
        self.proc = subprocess.Popen(self.command(self.worker_id))

    def _run(self) -> None:
        failures = 0
        while not self._stop.is_set():
            proc, worker_id = self.proc, self.worker_id
            assert proc is not None and worker_id is not None
            started = time.monotonic()
            while proc.poll() is None:  # poll() also reaps it: no zombie
                if self._stop.wait(0.2):
                    return
            ran = time.monotonic() - started
            self._release(worker_id)
            if proc.returncode == REFUSED:
                log.error("the embedded grading worker refused to start (see above); not restarting it")
                return
            failures = 0 if ran >= STABLE_S else failures + 1
            pause = backoff(failures - 1) if failures else 0.0
            log.warning(
                "the embedded grading worker (pid %s) exited with %s after %.0f s; restarting it in %.0f s",
                proc.pid, proc.returncode, ran, pause,
            )  # fmt: skip
            if self._stop.wait(pause):
                return
            self._spawn()
            self.restarts += 1

    def _release(self, worker_id: str) -> None:
        """The jobs the dead worker held go back to the queue now, not when their leases expire."""
        for attempt in range(5):
            try:
                with session_scope(self.factory) as session:
                    n = queue.release(worker_id, session=session, now=utcnow(), max_attempts=self.max_attempts)
                if n:
                    log.warning("returned %s job(s) of the dead worker %s to the queue", n, worker_id)
                return
            except Exception:  # a busy database: try again; the leases expire anyway
                log.exception("could not return the dead worker's jobs (try %s)", attempt + 1)
                time.sleep(1.0)

    def stop(self, timeout: float = 15.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        proc = self.proc
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
