"""A small pool of warm sandboxes: each used for one submission, then discarded.

Starting a sandbox costs about a second and a half of CPU when its zygote imports
torch (cold), ~40 ms when it is forked from a template (``labs.host.template``); either
way background threads keep ``size`` of them started and ready, and replace each
one as soon as it is taken. A submission never shares a
sandbox, a scratch dir or a process with another one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque

from labs.host.sandbox import Sandbox, SandboxError
from labs.host.template import Template

log = logging.getLogger("ringlab.worker")


class WarmPool:
    def __init__(
        self,
        size: int = 1,
        *,
        unsafe: bool = False,
        gpu: bool = False,
        template: Template | None = None,
        start_timeout: float = 60.0,
    ):
        self.size = max(1, size)
        self.unsafe = unsafe
        self.gpu = gpu
        self.template = template
        self.start_timeout = start_timeout
        self.ready: deque[Sandbox] = deque()
        self.error: str | None = None
        self.closed = False
        self.starting = 0
        self.warming: set[Sandbox] = set()
        self.cond = threading.Condition()
        # One starter per slot: replacements start side by side, so a burst does not queue behind
        # one sandbox's start-up at a time.
        self.threads = [
            threading.Thread(target=self._refill, name=f"labs-warm-pool-{i}", daemon=True) for i in range(self.size)
        ]
        for thread in self.threads:
            thread.start()

    def _refill(self) -> None:
        failures = 0
        while True:
            with self.cond:
                while not self.closed and len(self.ready) + self.starting >= self.size:
                    self.cond.wait()
                if self.closed:
                    return
                self.starting += 1
            try:
                box = Sandbox(unsafe=self.unsafe, gpu=self.gpu, template=self.template)
                with self.cond:
                    self.warming.add(box)
                try:
                    box.wait_ready(self.start_timeout)
                finally:
                    with self.cond:
                        self.warming.discard(box)
            except (SandboxError, OSError) as exc:
                failures += 1
                if self.template is not None and failures >= 2:
                    # A host where joining namespaces is not allowed: cold starts still work there.
                    log.warning("cannot fork zygotes from the template (%s); starting sandboxes cold", exc)
                    self.template = None
                with self.cond:
                    self.starting -= 1
                    self.error = str(exc)
                    self.cond.notify_all()
                time.sleep(min(5.0, 0.2 * 2**failures))
                continue
            failures = 0
            with self.cond:
                self.starting -= 1
                if self.closed:
                    box.kill()
                    return
                self.error = None
                self.ready.append(box)
                self.cond.notify_all()

    def acquire(self, timeout: float = 60.0) -> Sandbox:
        """A warm, never-used sandbox; the caller kills it after one job."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                while self.ready:
                    box = self.ready.popleft()
                    self.cond.notify_all()
                    if box.alive():
                        return box
                    box.kill()
                if self.closed:
                    raise SandboxError("the pool is closed")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise SandboxError(f"no warm sandbox within {timeout:.0f} s: {self.error or 'still starting'}")
                self.cond.wait(left)

    def close(self) -> None:
        with self.cond:
            self.closed = True
            boxes = [*self.ready, *self.warming]
            self.ready.clear()
            self.cond.notify_all()
        for box in boxes:
            box.kill()
        for thread in self.threads:
            thread.join(timeout=self.start_timeout)
