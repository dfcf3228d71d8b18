"""Waking grading workers as soon as a job is queued, instead of at their next poll.

A service that queues a job calls ``ask_to_wake(session)``. Workers hear of it only once that
transaction has committed, never on a rollback:

- **PostgreSQL**: ``NOTIFY ringlab_jobs`` in the same transaction; the server delivers it at
  commit to every worker that ran ``LISTEN`` (``PgListener``), on any host.
- **SQLite**: after the commit a one-byte datagram goes to a Linux abstract UNIX socket named
  after the database file (``SocketListener``): no file to clean up, reachable only from this
  host's network namespace (a sandbox has its own), one listener per database.

Best effort either way: a worker that misses a wake-up finds the job at its next poll.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import select
import socket
import time
from typing import Any, Protocol

from sqlalchemy import Engine, event, text
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

from app.db import reason

log = logging.getLogger("ringlab.worker")
_WAKE = "ringlab_wake_workers"
CHANNEL = "ringlab_jobs"
RECONNECT_S = 5.0  # a PostgreSQL listener that lost its connection tries again this often
LOST_POLL_S = 0.05  # ...and until then reports "woken" this often, so its worker polls


class Listener(Protocol):
    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True if woken (every pending wake-up is consumed)."""
        ...

    def close(self) -> None: ...


def address(url: URL) -> str | None:
    """The abstract socket name workers of this database listen on (SQLite files only)."""
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return "\0ringlab-worker-" + hashlib.sha256(url.database.encode()).hexdigest()[:24]


def ask_to_wake(session: Session) -> None:
    """Wake the workers once this session's transaction has committed."""
    if session.get_bind().dialect.name == "postgresql":
        session.execute(text(f"NOTIFY {CHANNEL}"))  # transactional: delivered at commit, dropped on rollback
    else:
        session.info[_WAKE] = True


def notify(name: str) -> None:
    # OSError: nobody is listening, or its queue is full (it is awake already).
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock, contextlib.suppress(OSError):
        sock.setblocking(False)
        sock.sendto(b"!", name)


@event.listens_for(Session, "after_commit")
def _after_commit(session: Session) -> None:
    if session.info.pop(_WAKE, False) and (name := address(session.get_bind().engine.url)):
        notify(name)


@event.listens_for(Session, "after_rollback")
def _after_rollback(session: Session) -> None:
    session.info.pop(_WAKE, None)


def listen(engine: Engine) -> Listener | None:
    """A listener for this database's wake-ups, or None if this worker must poll.

    None on SQLite when another worker of the same database on this host listens already (the
    socket is bound), or for a database with no wake-ups (SQLite in memory).
    """
    if engine.dialect.name == "postgresql":
        return PgListener(engine)
    if (name := address(engine.url)) is None:
        return None
    try:
        listener = SocketListener(name)
    except OSError:
        log.info("another worker on this host is woken for new jobs; this one polls")
        return None
    log.info("listening for new jobs on this host's wake-up socket")
    return listener


class SocketListener:
    """SQLite: the datagram socket of ``address(url)``."""

    def __init__(self, name: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(name)  # OSError if another worker of this database listens already
        self.sock.setblocking(False)

    def wait(self, timeout: float) -> bool:
        woken = bool(select.select([self.sock], [], [], timeout)[0])
        while True:
            try:
                self.sock.recv(16)
            except BlockingIOError:
                return woken

    def close(self) -> None:
        self.sock.close()


class PgListener:
    """PostgreSQL: a connection of its own, out of the engine's pool, in autocommit, that LISTENs.

    If the connection is lost (a server restart, a network cut), ``wait`` reports "woken" every
    ``LOST_POLL_S`` so the worker polls as it would without a listener, and reconnects: at its next
    ``wait`` (a restart is often over by then), then every ``RECONNECT_S`` until it is back. No
    wake-up is needed for correctness, only for speed.
    """

    def __init__(self, engine: Engine):
        self.engine = engine
        self.conn: Any = None  # psycopg.Connection, imported by the dialect, not here
        self.retry_at = 0.0
        self.failed = 0  # connection attempts that failed in a row
        self._connect()

    def _connect(self) -> None:
        self.retry_at = time.monotonic() + RECONNECT_S
        try:
            pooled = self.engine.raw_connection()
            conn: Any = pooled.driver_connection
            pooled.detach()  # never returned to the pool: it stays in LISTEN
            conn.rollback()
            conn.autocommit = True
            conn.execute(f"LISTEN {CHANNEL}")
        except Exception as exc:
            # Said once an outage, not every RECONNECT_S while the database is down.
            if not self.failed:
                every = f"polling, and trying again every {RECONNECT_S:.0f} s"
                log.warning("cannot LISTEN for new jobs (%s); %s", reason(exc), every)
            self.failed += 1
            return
        self.conn, self.failed = conn, 0
        log.info("listening for new jobs on PostgreSQL channel %s", CHANNEL)

    def wait(self, timeout: float) -> bool:
        if self.conn is None:
            if time.monotonic() >= self.retry_at:
                self._connect()
            if self.conn is None:
                time.sleep(min(timeout, LOST_POLL_S))
            return True  # lost, or back: either way, look at the queue (jobs queued in between)
        try:
            woken = any(True for _ in self.conn.notifies(timeout=timeout, stop_after=1))
            for _ in self.conn.notifies(timeout=0):  # several jobs queued at once: one wake-up is enough
                pass
        except Exception as exc:  # the connection is gone (a restart, a cut): poll, and reconnect
            log.warning("lost the LISTEN connection (%s); polling until it is back", reason(exc))
            self.close()
            self.retry_at = time.monotonic()  # at the next wait; then every RECONNECT_S
            return True
        return woken

    def close(self) -> None:
        if self.conn is not None:
            with contextlib.suppress(Exception):
                self.conn.close()
            self.conn = None
