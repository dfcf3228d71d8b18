"""Public driver for async-checkpoint: the training loop and the storage your checkpointer writes through.

Not secret: read it to see exactly what runs in each rank. ``train`` builds the seeded float64 MLP
and its SGD (momentum), trains it on this rank's share of each step's batch (gradients averaged
over the ranks), and after every ``every``-th step calls your ``save(step, state)`` with the live
``model.state_dict()`` and ``optimizer.state_dict()``; after the last step it calls ``wait()``.

Your checkpointer puts bytes on disk only through ``Storage.write(state, path)``, a slow disk with
three rules of its own, all about the order of events, never about time:

- **A write does not finish while the training loop is running.** It is held until the loop is
  inside a later ``save`` or in ``wait`` and waiting there (blocked, e.g. in a ``join``), and only
  then serializes ``state`` and writes it. So a checkpoint holds whatever ``state`` holds at that
  moment: the state of its step only if ``save`` copied it before returning.
- **One write in flight.** When a ``save`` or ``wait`` returns while the write of an earlier
  ``save`` has not finished, the storage drops that write (a host keeps one staging copy of the
  state): its ``write`` raises ``CheckpointDropped`` and leaves no file. After ``wait`` has
  returned, the storage is closed.
- **Not atomic.** ``write`` creates ``path`` and fills it; a crash in the middle leaves half a file.

In the grader's run with a *held* storage (``mode="held"``) a write is never released while the
loop is inside the ``save`` that started it: a ``save`` that waits for its own write then waits
forever, and the grader sees the rank hang. In the run with a crash (``mode="crash"``) writes are
not held, and the write of the step ``crash_at`` writes half its bytes and ends the process, as a
machine that fails in the middle of a write; the ``save`` of that step begins only once the earlier
writes have ended (their threads finished or asleep), so the crash always comes in its write. What
is judged is read outside your processes, from the files left in each folder; what ``train`` returns
(what the storage saw) is only quoted.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist
from data_parallel import average_gradients, shard
from mlp import build_model, build_optimizer, loss_fn, make_batch

POLL_S = 0.001  # how often a held write looks at the training loop while the loop is inside save or wait
BLOCKED = 2  # the loop seen waiting this many times in a row releases the write
PATIENCE = 500  # polls before a held write is released anyway (a save that spins instead of blocking)
CRASH_STATUS = 86  # the exit status of the process the crash ends


class CheckpointDropped(RuntimeError):
    """Raised by ``Storage.write`` for a write the storage dropped (see the module's docstring)."""


@dataclass
class _Save:
    step: int
    call: int  # the number of the loop's call (save or wait) that made it
    begun: bool = False
    done: bool = False
    dropped: str = ""  # why the storage dropped its write


class Storage:
    """The disk of one training run: ``write(state, path)`` is the only way to put a checkpoint on it.

    ``mode``: ``"strict"`` holds and drops writes as the module's docstring says; ``"held"`` does the
    same and never releases a write while the loop is inside the save that started it; ``"crash"``
    neither holds nor drops, and the write of step ``crash_at`` crashes the process half-way.
    """

    def __init__(self, mode: str, crash_at: int | None = None, mark: torch.Tensor | None = None) -> None:
        self.mode, self.crash_at = mode, crash_at
        self.mark = torch.zeros(0, dtype=torch.float64) if mark is None else mark
        self._cond = threading.Condition()
        self._saves: list[_Save] = []
        self._writes = 0  # write() calls so far: the n-th belongs to the n-th save
        self._calls = 0
        self._inside: tuple[int, str, int | None] | None = None  # the loop's current call: (number, kind, step)
        self._closed = False
        self._loop = threading.current_thread()  # the thread of the training loop
        self._looks: dict[int, tuple[int, int] | None] = {}  # where the loop's thread was at the last look
        self._writers: dict[int, threading.Thread] = {}  # the threads that called write(), by ident
        self.extra = 0  # write() calls beyond one per save

    # ---- the training loop's side --------------------------------------------------------------------

    @contextlib.contextmanager
    def call(self, kind: str, step: int | None = None) -> Iterator[None]:
        """Around the loop's call of your ``save`` (``kind="save"``) or ``wait``."""
        with self._cond:
            if self.mode == "crash" and kind == "save" and step == self.crash_at:
                self._settle()
            elif self.mode == "crash" and kind == "save" and self._crash_pending():
                # A later save waits until the crash's own write has begun: its thread must not take that turn.
                self._cond.wait_for(lambda: not self._crash_pending(), timeout=PATIENCE * POLL_S)
            self._calls += 1
            number = self._calls
            if kind == "save" and step is not None:
                self._saves.append(_Save(step, number))
            self._inside = (number, kind, step)
            self._cond.notify_all()
        try:
            yield
        finally:
            with self._cond:
                self._inside = None
                if self.mode != "crash":
                    for save in self._saves:
                        if save.call < number and not save.done and not save.dropped:
                            returned = f"save(step={step})" if kind == "save" else "wait()"
                            save.dropped = f"{returned} returned while it was still in flight"
                if kind == "wait":
                    self._closed = True
                self._cond.notify_all()

    def report(self) -> dict[str, Any]:
        """What the storage saw (quoted by the grader's messages, never judged)."""
        with self._cond:
            return {
                "saved": [s.step for s in self._saves],
                "written": [s.step for s in self._saves if s.done],
                "dropped": {str(s.step): s.dropped for s in self._saves if s.dropped},
                "never_written": [s.step for s in self._saves if not s.begun],
                "extra_writes": self.extra,
            }

    # ---- your checkpointer's side --------------------------------------------------------------------

    def write(self, state: Any, path: str) -> None:
        """Serialize ``{"state": state, "storage": mark}`` with ``torch.save`` (the mark: a few numbers the grader
        drew for the run, which tell a file written here from one written otherwise) and write it to ``path``
        (created or replaced, then fsynced).

        Held until the training loop waits in a later ``save`` or in ``wait``; raises ``CheckpointDropped``
        (and writes nothing) when the storage dropped this write. Not atomic. Call it once per checkpoint.
        """
        with self._cond:
            n = self._writes
            self._writes += 1
            self._writers[threading.get_ident()] = threading.current_thread()
            job = self._saves[n] if n < len(self._saves) else None
            if job is None:
                self.extra += 1
            else:
                job.begun = True
                self._cond.notify_all()  # a later save waits for the crash's write to begin (call)
                if self.mode == "crash":
                    if job.step == self.crash_at:  # the checkpoints before it are complete first
                        self._cond.wait_for(lambda: all(s.done or not s.begun for s in self._saves[:n]))
                else:
                    self._hold(job)
            if self._closed:
                raise CheckpointDropped(f"write({path!r}): the storage is closed: wait() had returned")
            if job is not None and job.dropped:
                raise CheckpointDropped(f"the write of step {job.step} was dropped: {job.dropped}")
        buffer = io.BytesIO()
        torch.save({"state": state, "storage": self.mark}, buffer)  # the storage's mark: written by write()
        data = buffer.getvalue()
        if job is not None and self.mode == "crash" and job.step == self.crash_at:
            _write_file(path, data[: len(data) // 2])
            os._exit(CRASH_STATUS)  # the machine fails here: no finally, no flush, no atexit
        _write_file(path, data)
        with self._cond:
            if job is not None and job.dropped:
                with contextlib.suppress(OSError):
                    os.unlink(path)
                raise CheckpointDropped(f"the write of step {job.step} was dropped: {job.dropped}")
            if job is not None:
                job.done = True
            self._cond.notify_all()

    def _hold(self, job: _Save) -> None:
        """Wait (holding the condition) until the loop waits in a later call: the write may go ahead then."""
        polls = seen = 0
        watched: tuple[int, str, int | None] | None = None
        while not job.dropped and not self._closed:
            inside = self._inside
            later = inside is not None and inside[0] > job.call
            own = inside is not None and inside[0] == job.call and self.mode == "strict"
            if not (later or own):
                watched, polls, seen = None, 0, 0
                self._cond.wait()  # nothing to release it until the loop calls save or wait again
                continue
            if inside != watched:
                watched, polls, seen = inside, 0, 0
                self._looks.clear()
            self._cond.wait(POLL_S)
            if self._inside != watched:
                continue
            polls += 1
            seen = seen + 1 if self._loop_waits() else 0
            if seen >= BLOCKED or polls >= PATIENCE:
                return

    def _settle(self) -> None:
        """Crash mode, entering the save of ``crash_at``: first the earlier saves' writes end, and the threads that
        wrote them finish or sleep (so whatever your code does after ``write`` returns, a rename say, is done).
        The crash then comes in this save's write, whichever thread is scheduled first. Waits at most PATIENCE
        looks (a checkpointer that writes an earlier step later still crashes, in whichever write comes)."""
        seen: dict[int, tuple[int, int] | None] = {}
        quiet = 0
        for _ in range(PATIENCE):
            if all(s.done for s in self._saves):
                writers = [t for t in self._writers.values() if t is not self._loop and t.is_alive()]
                quiet = quiet + 1 if all(_waits(t, seen) for t in writers) else 0
                if quiet >= BLOCKED or not writers:
                    return
            self._cond.wait(POLL_S)

    def _crash_pending(self) -> bool:
        """The save of ``crash_at`` was called and its write has not begun."""
        return any(s.step == self.crash_at and not s.begun for s in self._saves)

    def _loop_waits(self) -> bool:
        """The loop's thread sleeps at the same instruction as at the last look (blocked, not running)."""
        return _waits(self._loop, self._looks)


def _waits(thread: threading.Thread, last: dict[int, tuple[int, int] | None]) -> bool:
    """``thread`` sleeps at the same instruction as at its last look, kept in ``last`` (blocked, not running)."""
    ident = thread.ident or -1
    frame = sys._current_frames().get(ident)
    if frame is None:
        return False
    f: Any = frame
    while f is not None:  # Thread.start waits for the new thread to run: starting one is not waiting
        if f.f_code.co_name == "start" and f.f_code.co_filename.endswith("threading.py"):
            last[ident] = None
            return False
        f = f.f_back
    where = (id(frame), frame.f_lasti)
    same, last[ident] = where == last.get(ident), where
    return same and _sleeping(thread.native_id)


def _sleeping(tid: int | None) -> bool:
    """The thread is not running or runnable, as the kernel says (True where /proc cannot be read)."""
    try:
        with open(f"/proc/self/task/{tid}/stat") as f:
            text = f.read()
    except OSError:
        return True
    return text[text.rindex(")") + 2 :][:1] in ("S", "D")


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


# ---- the training run ------------------------------------------------------------------------------------


def batch(inputs: dict[str, Any], step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Step ``step``'s global batch (steps count from 1)."""
    return make_batch(int(inputs["seed"]) * 1009 + step, list(inputs["dims"]), int(inputs["batch"]))


def folder(inputs: dict[str, Any], rank: int) -> str:
    """This rank's checkpoint folder for the run, in the phases' shared directory (made here)."""
    path = os.path.join(os.environ["RINGLAB_SHARED_DIR"], str(inputs["folder"]), f"rank-{rank}")
    os.makedirs(path, exist_ok=True)
    return path


def train(submission: Any, inputs: dict[str, Any]) -> dict[str, Any]:
    """Train ``inputs["steps"]`` steps, saving through your checkpointer every ``inputs["every"]``; then wait()."""
    rank, size = dist.get_rank(), dist.get_world_size()
    storage = Storage(str(inputs["mode"]), inputs.get("crash_at"), inputs.get("mark"))
    model = build_model(int(inputs["seed"]), list(inputs["dims"]))
    optimizer = build_optimizer(model, inputs)
    checkpointer = submission.AsyncCheckpointer(folder(inputs, rank), storage.write)
    for step in range(1, int(inputs["steps"]) + 1):
        x, y = batch(inputs, step)
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model, shard(x, rank, size), shard(y, rank, size)).backward()
        if size > 1:
            average_gradients(model)
        optimizer.step()
        if step % int(inputs["every"]) == 0:
            state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "step": step}
            with storage.call("save", step):
                checkpointer.save(step, state)
    with storage.call("wait"):
        checkpointer.wait()
    return storage.report()


def reference(inputs: dict[str, Any]) -> list[dict[str, torch.Tensor]]:
    """One process, the whole batch: the parameters and momentum buffers after each step (index 0: before
    any), by name (``model.<name>``, ``momentum.<name>``). Run by the grader, outside the sandbox."""
    model = build_model(int(inputs["seed"]), list(inputs["dims"]))
    optimizer = build_optimizer(model, inputs)
    states = [{f"model.{n}": p.detach().clone() for n, p in model.named_parameters()}]
    for step in range(1, int(inputs["steps"]) + 1):
        x, y = batch(inputs, step)
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model, x, y).backward()
        optimizer.step()
        state = {f"model.{n}": p.detach().clone() for n, p in model.named_parameters()}
        for n, p in model.named_parameters():
            state[f"momentum.{n}"] = optimizer.state[p]["momentum_buffer"].detach().clone()
        states.append(state)
    return states
