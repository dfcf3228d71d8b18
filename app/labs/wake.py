"""Waking a grading worker on the same host as soon as a job is queued, instead of at its next poll.

A service that queues a job marks its session (``ask_to_wake``); once that transaction has
committed (never before, never on a rollback) a one-byte datagram goes to the worker's socket,
and a worker that is listening (``Listener``) claims the job at once. The address is a Linux
abstract UNIX socket named after the database: no file to clean up, no path-length limit,
reachable only from this host's network namespace (a sandbox has its own). Best effort: with no
worker listening, or on a backend with no address (PostgreSQL, whose workers run on other
hosts), nothing is sent and workers find the job at their next poll.
"""

from __future__ import annotations

import contextlib
import hashlib
import select
import socket

from sqlalchemy import event
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session

_WAKE = "ringlab_wake_workers"


def address(url: URL) -> str | None:
    """The abstract socket name workers of this database listen on (SQLite files only)."""
    if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
        return None
    return "\0ringlab-worker-" + hashlib.sha256(url.database.encode()).hexdigest()[:24]


def ask_to_wake(session: Session) -> None:
    """Wake the workers once this session's transaction has committed."""
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


class Listener:
    """The worker's end: ``wait`` returns early when a job was queued."""

    def __init__(self, name: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(name)  # OSError if another worker of this database listens already
        self.sock.setblocking(False)

    def wait(self, timeout: float) -> bool:
        """Sleep up to ``timeout`` seconds; True if woken (every pending wake-up is consumed)."""
        woken = bool(select.select([self.sock], [], [], timeout)[0])
        while True:
            try:
                self.sock.recv(16)
            except BlockingIOError:
                return woken

    def close(self) -> None:
        self.sock.close()
