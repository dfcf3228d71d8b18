"""Long polls: a request about a waiting submission is held until its status changes.

In a rush the waiting students' polls are the web's load: a student far back in the queue asked
"is it done yet?" every few seconds, and each answer cost a token lookup, the submission and the
queue's statements. With ``?wait=S`` the request is held instead, and answered the moment the
submission's status changes (queued to running, running to its verdict; a job seen to start
running is given a second more, within which most verdicts come) or after ``S`` seconds with the
queue's news. One ``Watch`` per web process reads the status of every submission it holds
requests for in one query a tick, whatever the number of waiters, and only while there are any.

A tick that fails (the database restarting) answers every held request at once: each then reads
the submission as a plain poll would, and gets the database's 503 like any other request. A
process that is told to stop answers them too, so that it does not wait out their holds.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from types import FrameType
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker
from starlette.concurrency import run_in_threadpool

from app.db import reason, session_scope
from app.labs.models import Submission

log = logging.getLogger("ringlab.web")
TICK_S = 0.25  # how often the statuses are read while requests are held: at most this late with a verdict
RUNNING_GRACE_S = 1.0  # a held request that saw its job start running waits this much more for the verdict
MAX_WAIT_S = 30.0  # the longest hold a client may ask for (proxies commonly cut idle requests at 60 s)


Seen = Literal["queued", "running"]  # the statuses a client may say it saw (?seen=): a hold without a first look


async def sit_out(began: float, wait: float) -> None:
    """Answer a request held on the client's word (``?seen=``) that turned out not to be theirs (or a bad
    token) only when its hold would have ended: the time of the answer must not tell when someone
    else's submission changed."""
    await asyncio.sleep(max(0.0, began + wait - asyncio.get_running_loop().time()))


def changed(held: Mapping[int, Iterable[str]], now: Mapping[int, str]) -> set[int]:
    """The ids whose status differs from one a request is held on (a row gone counts as a change)."""
    return {key for key, seen in held.items() if any(now.get(key) != status for status in seen)}


class Watch:
    """Holds requests until a submission's status changes: one query a tick for all of them."""

    def __init__(self, readers: Callable[[], sessionmaker[Session]]):
        self.readers = readers  # read at each tick: the application's reader sessions as they are then
        self._held: dict[int, list[tuple[str, asyncio.Future[str]]]] = {}
        self._task: asyncio.Task[None] | None = None
        self._idle = asyncio.Event()  # set when the last hold ends: the reads stop at once
        self._reading: asyncio.Future[dict[int, str]] | None = None  # the read under way
        self._closed = False
        self._failing = False

    @property
    def ticking(self) -> bool:
        """Its reads still run (they stop a tick after the last hold ends)."""
        return self._task is not None and not self._task.done()

    async def until_news(self, submission_id: int, status: str, timeout: float) -> None:
        """Hold up to ``timeout`` seconds until the submission leaves ``status``. A job that starts running
        is held up to RUNNING_GRACE_S more for its verdict: most follow within a second, and one answer
        then does the work of two."""
        end = asyncio.get_running_loop().time() + timeout
        if await self.until_changed(submission_id, status, timeout) == "running":
            left = end - asyncio.get_running_loop().time()
            await self.until_changed(submission_id, "running", min(RUNNING_GRACE_S, left))

    async def until_changed(self, submission_id: int, status: str, timeout: float) -> str | None:
        """Wait up to ``timeout`` seconds for the submission to leave ``status``: the status it has now,
        "" when it may have changed (a failed read, or the process stopping, answers at once), None if
        the time ran out."""
        if self._closed:
            return ""
        if timeout <= 0:
            return None
        done: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        entry = (status, done)
        self._held.setdefault(submission_id, []).append(entry)
        self._idle.clear()
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._run())
        try:
            return await asyncio.wait_for(done, timeout)
        except TimeoutError:
            return None
        finally:
            waiters = self._held.get(submission_id, [])
            with suppress(ValueError):
                waiters.remove(entry)
            if not waiters:
                self._held.pop(submission_id, None)
            if not self._held:
                await self._stopped()

    async def _stopped(self) -> None:
        """The last hold ended: stop reading now, and answer only once a read under way has ended, so that
        no read runs with nothing held (nor beside the next request of a client asking one at a time)."""
        self._idle.set()
        reading = self._reading
        if reading is not None and not reading.done():
            with suppress(Exception, asyncio.CancelledError):
                await asyncio.shield(reading)

    def close(self) -> None:
        """Answer every held request now, and hold no more (the process is stopping)."""
        self._closed = True
        self._wake({key: "" for key in self._held})

    def _wake(self, now: Mapping[int, str]) -> None:
        for key, status in now.items():
            for _, done in self._held.get(key, []):
                if not done.done():
                    done.set_result(status)

    async def _run(self) -> None:
        self._idle.clear()
        while self._held and not self._closed:
            with suppress(TimeoutError):
                await asyncio.wait_for(self._idle.wait(), TICK_S)  # a tick, or the last hold ending
            if not (ids := list(self._held)):
                break
            try:
                self._reading = asyncio.ensure_future(run_in_threadpool(self._statuses, ids))
                now = await self._reading
            except Exception as exc:  # the database is down: let each request find out for itself
                if not self._failing:
                    log.warning("cannot read the held submissions' statuses (%s); answering them now", reason(exc))
                self._failing = True
                self._wake(dict.fromkeys(ids, ""))
                continue
            self._failing = False
            held = {key: [status for status, _ in self._held.get(key, [])] for key in ids}
            self._wake({key: now.get(key, "") for key in changed(held, now)})

    def _statuses(self, ids: list[int]) -> dict[int, str]:
        with session_scope(self.readers()) as session:
            rows = session.execute(select(Submission.id, Submission.status).where(Submission.id.in_(ids)))
            return {key: status.value for key, status in rows}


def close_on_exit(watch: Watch) -> None:
    """Answer the held requests as soon as the server is told to stop (SIGTERM, SIGINT).

    The server waits for requests in flight before it shuts the application down: without this a
    held request would keep it up for the rest of its hold. Chained before the server's own handler,
    which runs as before."""
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        before = signal.getsignal(sig)
        if not callable(before):
            continue  # default or ignored: the server is not graceful here anyway

        def handler(signum: int, frame: FrameType | None, before: Any = before) -> None:
            loop.call_soon_threadsafe(watch.close)
            before(signum, frame)

        with suppress(ValueError):  # not the main thread (a test's server in a thread): nothing to chain
            signal.signal(sig, handler)
