"""The interconnect your benchmark measures: real gloo collectives, timed on a virtual clock.

Every collective is carried out for real (gloo moves the bytes, and the grader counts them in the
kernel), but how long it takes comes from a model, so a grade never depends on how busy the grading
machine happens to be. The model has what a real network has, and nothing here is secret: every
parameter arrives in the case's inputs.

* **Latency and bandwidth.** Once the last rank has arrived, an all-reduce of ``s`` bytes on ``N``
  ranks takes ``alpha + 2(N-1)/N * s / bus_bandwidth`` seconds.
* **Warm-up.** The first ``warmup_calls`` all-reduces of each size are slower (connections, buffers,
  caches): the k-th of them (k = 0, 1, ...) pays ``warmup_penalty * (warmup_calls - k) / warmup_calls``
  more.
* **Skew.** After each all-reduce, rank r has ``lag[r]`` seconds of its own work to do before it can
  enter its next collective (the ranks start with that much too), and a collective starts only when
  the last rank has arrived. A barrier waits for every rank's work; a timer started without one times
  the slowest rank's work as well.
* **Hiccups.** A few calls take longer, as when the operating system preempts a rank for a moment:
  ``hiccups`` lists ``[size, k, extra seconds]`` for the k-th all-reduce of that size.

Every rank keeps the whole model, every rank's lag included, so each works out on its own when a
collective starts: the ranks' clocks agree after every collective, without sending them. Your code
takes no time on this clock between two calls; only the interconnect's work does.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist


class Link:
    """The model: every rank's state, advanced by each collective (pure: no communication)."""

    def __init__(
        self,
        world_size: int,
        alpha: float,
        bus_bandwidth: float,
        warmup_calls: int,
        warmup_penalty: float,
        lag: list[float],
        hiccups: list[list[Any]],
        barrier: float,
    ) -> None:
        self.world_size = int(world_size)
        self.alpha = float(alpha)
        self.bus_bandwidth = float(bus_bandwidth)
        self.warmup_calls = int(warmup_calls)
        self.warmup_penalty = float(warmup_penalty)
        self.lag = [float(x) for x in lag]
        self.hiccups = {(int(size), int(k)): float(extra) for size, k, extra in hiccups}
        self.barrier_time = float(barrier)
        self.time = 0.0  # the clock every rank reads: when its last collective ended
        self.pending = list(self.lag)  # each rank's own work before it can enter its next collective
        self.calls: dict[int, int] = {}  # all-reduces made so far, by size in bytes

    def duration(self, nbytes: int, k: int) -> float:
        """Seconds the k-th all-reduce of ``nbytes`` bytes takes, from the moment the last rank arrives."""
        n = self.world_size
        seconds = self.alpha + 2 * (n - 1) / n * nbytes / self.bus_bandwidth
        if k < self.warmup_calls:
            seconds += self.warmup_penalty * (self.warmup_calls - k) / self.warmup_calls
        return seconds + self.hiccups.get((nbytes, k), 0.0)

    def _start(self) -> float:
        """When a collective starts: every rank has done its own work and arrived."""
        start = max(self.time + p for p in self.pending)
        self.pending = [0.0] * self.world_size
        return start

    def barrier(self) -> None:
        self.time = self._start() + self.barrier_time

    def all_reduce(self, nbytes: int) -> None:
        k = self.calls.get(nbytes, 0)
        self.calls[nbytes] = k + 1
        self.time = self._start() + self.duration(nbytes, k)
        self.pending = list(self.lag)


class Interconnect:
    """What ``measure`` is given: three calls, as ``torch.distributed`` and ``time.perf_counter`` offer.

    ``all_reduce`` and ``barrier`` are collectives: every rank must call them, in the same order.
    """

    def __init__(self, link: Link, *, real: bool = True) -> None:
        self._link = link
        self._real = real  # False: the model alone, as the grader replays it outside your processes
        self.world_size = link.world_size

    def now(self) -> float:
        """The interconnect's clock, in seconds (like ``time.perf_counter()``: only differences mean anything)."""
        return self._link.time

    def barrier(self) -> None:
        """Wait until every rank has arrived (``dist.barrier()``, on the interconnect's clock)."""
        if self._real:
            dist.barrier()
        self._link.barrier()

    def all_reduce(self, tensor: torch.Tensor) -> None:
        """Sum ``tensor`` over the ranks, in place (``dist.all_reduce``); its size is ``numel * element_size`` bytes."""
        if self._real:
            dist.all_reduce(tensor)
        self._link.all_reduce(tensor.numel() * tensor.element_size())
