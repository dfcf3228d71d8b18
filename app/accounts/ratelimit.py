"""Sliding-window rate limits, kept in the web process's memory.

Each web process counts on its own; behind N processes a client gets at most N
times the limit, which still stops password guessing. The clock is injected so
tests can move time.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from threading import Lock


@dataclass
class Limit:
    events: int
    window_s: float


@dataclass
class SlidingWindow:
    limit: Limit
    clock: Callable[[], float] = time.monotonic
    _hits: dict[str, deque[float]] = field(default_factory=dict)
    _lock: Lock = field(default_factory=Lock)

    def retry_after(self, key: str) -> int | None:
        """Seconds until ``key`` may act again, or None if it may act now."""
        with self._lock:
            hits = self._prune(key)
            if len(hits) < self.limit.events:
                return None
            return max(1, int(hits[0] + self.limit.window_s - self.clock() + 0.999))

    def hit(self, key: str) -> None:
        with self._lock:
            self._prune(key).append(self.clock())

    def reset(self, key: str) -> None:
        with self._lock:
            self._hits.pop(key, None)

    def _prune(self, key: str) -> deque[float]:
        hits = self._hits.setdefault(key, deque())
        cutoff = self.clock() - self.limit.window_s
        while hits and hits[0] <= cutoff:
            hits.popleft()
        if len(self._hits) > 100_000:  # bound memory under a flood of distinct keys
            for stale in [k for k, v in self._hits.items() if not v][:50_000]:
                del self._hits[stale]
        return hits
