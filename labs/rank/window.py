"""The bytes of one measured call, read from the kernel by the zygote: from before any rank held the call's
inputs to after the last rank answered (``Window``)."""

from __future__ import annotations

import time
from typing import Any

from labs.rank import netstat

WIRE_POLL_S = 0.02  # while a window is open: how often connections' counters are read (closed ones keep theirs)
FREED_WAIT_S = 0.05  # at a window's end: how long announcements of freed sockets may still be awaited


class Window:
    """One measured call: every connection's sent-byte counter from before any rank held the call's inputs
    to after the last rank answered, read from the kernel here. Counters are read every WIRE_POLL_S while
    it is open, and a socket freed in between (a group made and destroyed inside the call) is counted from
    the kernel's announcement of it, with its last counters; the loopback total, which the judge compares
    with the sum, is the backstop for bytes neither saw."""

    def __init__(self, call: int):
        self.call = call
        self.listener = netstat.freed_listener()  # before the snapshot: no socket is freed unseen in between
        self.before = netstat.snapshot()
        self.seen: dict[Any, tuple[int, int]] = dict(self.before)
        self.lo_before = netstat.loopback_tx_bytes()
        self.polled = time.monotonic()
        self.dropped = False
        self.port_owner: dict[int, int] = {}

    def poll(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.polled < WIRE_POLL_S:
            return
        self.polled = now
        live = netstat.tcp_sockets()
        self.port_owner.update(netstat.port_owners(live))
        self.keep(netstat.snapshot(live))
        if self.listener is not None:
            freed, dropped = netstat.freed(self.listener)
            self.dropped |= dropped
            self.keep(freed)

    def keep(self, counts: dict[Any, tuple[int, int]]) -> None:
        """Each socket's largest count so far, under its owner as a read saw it (a freed one's is unknown)."""
        for conn, (uid, sent) in counts.items():
            known, before = self.seen.get(conn, (uid, -1))
            if sent >= before:
                self.seen[conn] = (uid if uid != netstat.UNKNOWN else known, sent)

    def owned(self) -> dict[Any, tuple[int, int]]:
        """The counts, with a socket no read saw owned by whoever was seen on its local port (a listener's)."""
        return {
            conn: (self.port_owner.get(conn[0], uid) if uid == netstat.UNKNOWN else uid, sent)
            for conn, (uid, sent) in self.seen.items()
        }

    def close(self) -> tuple[dict[int, dict[int, int]], int]:
        """Bytes by uid and peer uid, and the loopback total. The kernel announces a freed socket from a work
        queue, a moment after freeing it: while the loopback shows more than the counts explain, wait for
        the announcements a little (FREED_WAIT_S at most)."""
        waited = time.monotonic() + FREED_WAIT_S
        while True:
            self.poll(force=True)
            by_uid = netstat.traffic(self.before, self.owned())
            lo = netstat.loopback_tx_bytes() - self.lo_before
            counted = sum(n for peers in by_uid.values() for n in peers.values())
            if self.listener is None or lo <= 1.25 * counted + 65536 or time.monotonic() >= waited:
                break
            time.sleep(0.002)
        if self.listener is not None:
            self.listener.close()
        return by_uid, lo

    def report(self, rank_of: dict[int, int]) -> dict[str, Any]:
        """Close the window; what it saw, for the worker: bytes sent by rank to rank (``rank_of``: a uid's rank,
        -1 for a uid that is no rank), bytes no socket owner was found for, and the loopback total."""
        by_uid, lo = self.close()
        unattributed = sum(by_uid.pop(netstat.UNKNOWN, {}).values())
        per_rank: dict[str, dict[str, int]] = {}
        for uid, peers in by_uid.items():
            mine = per_rank.setdefault(str(rank_of.get(uid, -1)), {})
            for peer, n in peers.items():
                mine[str(rank_of.get(peer, -1))] = mine.get(str(rank_of.get(peer, -1)), 0) + n
        return {"call": self.call, "sent": per_rank, "unattributed_bytes": unattributed, "loopback_bytes": lo}
