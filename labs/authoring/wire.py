"""Rules over the bytes the kernel counted on each rank's connections during a measured call (``GroupRun.wire``).

Those counts are a trusted fact (read outside the ranks); what a right rank sends follows from the
sizes in the case, computed in ``checks.py``. These functions judge the counts against it the same
way for every lab and leave the lab its own words:

- ``sent``: each rank's bytes in one call;
- ``total``: every byte the call sent, a socket's whose owner no read saw included;
- ``outside``: the first rank whose bytes no accepted count explains, within (high, low, framing) bounds;
- ``compared``: "rank 1 sent 1,234 bytes, 1.5 times what ..." (or "only ..., 0.5 of what ...");
- ``judge``: the rule itself, over every measured call, with partial credit; bytes count only for a
  call whose values are right (the right number of bytes carrying wrong values proves nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from labs.host.judge import Case, GroupRun, Outcome

# (high, low, framing): a rank's bytes are right when low x theory <= bytes <= high x theory + framing.
Bounds = tuple[float, float, int]
# What is wrong with one measured call's bytes (group, case index, case, each rank's bytes), or None.
Verdict = Callable[[GroupRun, int, Case, list[int]], str | None]


def sent(wire: dict[str, Any], world_size: int, *, peers_only: bool = False) -> list[int]:
    """The bytes each rank sent during the call, rank by rank: on all its connections, or with ``peers_only``
    only to the other ranks of its group (not to the group's store, say, whose traffic is no collective's)."""
    by = [wire["sent"].get(str(r), {}) for r in range(world_size)]
    if peers_only:
        return [sum(int(to.get(str(p), 0)) for p in range(world_size) if p != r) for r, to in enumerate(by)]
    return [sum(to.values()) for to in by]


def total(wire: dict[str, Any]) -> int:
    """Every byte sent during the call by the ranks, and by sockets whose owner is not known: a socket made and
    freed between two of the zygote's reads (a group made and destroyed inside the call) is counted from the
    kernel's announcement, which names no owner unless a read saw its port. An upper bound on what all the
    ranks sent together holds even then: judge ``total`` against it, and ``sent`` per rank."""
    ranks = sum(sum(int(n) for n in peers.values()) for src, peers in wire["sent"].items() if int(src) >= 0)
    return ranks + int(wire.get("unattributed_bytes", 0))


def outside(sent: Sequence[int], theory: float | Sequence[float], bounds: Bounds) -> tuple[int, int] | None:
    """The first (rank, bytes) outside the bounds of every accepted count in ``theory``, or None.

    ``theory`` is what a right rank sends, or several counts that are as right (a unit resharded
    after its forward or not, say).
    """
    high, low, framing = bounds
    accepted = [theory] if isinstance(theory, int | float) else list(theory)
    for rank, s in enumerate(sent):
        if not any(low * t <= s <= high * t + framing for t in accepted):
            return rank, s
    return None


def compared(rank: int, sent: int, theory: float, what: str, *, during: str = "") -> str:
    """What ``rank``'s bytes are against ``theory``: "rank 1 sent 3,000 bytes{during}, 1.5 times what {what}",
    or, for fewer, "rank 1 sent only 1,000 bytes{during}, 0.5 of what {what}"."""
    if sent > theory:
        return f"rank {rank} sent {sent:,} bytes{during}, {sent / theory:.3g} times what {what}"
    return f"rank {rank} sent only {sent:,} bytes{during}, {sent / theory:.3g} of what {what}"


def _world_size(g: GroupRun, case: Case) -> str:
    return f"world size {g.world_size}"


def judge(
    calls: Iterable[tuple[GroupRun, int, Case]],
    verdict: Verdict,
    *,
    success: str,
    call: str = "call",
    where: Callable[[GroupRun, Case], str] = _world_size,
    right: Callable[[GroupRun, int], bool] | None = None,
    wrong: str = "its results are wrong (see the other checks)",
    data: dict[str, Any] | None = None,
    shown: int = 1,
    after: str = "",
) -> Outcome:
    """Each measured call (group, case index, case) in ``calls`` sent the bytes ``verdict`` accepts.

    A call the kernel did not count (it did not finish) fails. When ``verdict`` accepts the bytes,
    the call counts only if ``right(group, i)`` (its values are right); else the message says
    "the bytes look right, but {wrong}". Each problem starts with ``where`` (default: the world size);
    ``call`` names the call in the lab's words ("step", "probe"). The message lists the first
    ``shown`` problems, how many more there are, then ``after``. Partial credit: the share of calls
    whose bytes and values are right.
    """
    data = {} if data is None else data
    problems: list[str] = []
    good = total = 0
    for g, i, case in calls:
        total += 1
        at = where(g, case)
        wire = g.wire.get(i)
        if wire is None:
            problems.append(f"{at}: the {call} did not finish, so its bytes were not counted")
        elif why := verdict(g, i, case, sent(wire, g.world_size)):
            problems.append(f"{at}: {why}")
        elif right is not None and not right(g, i):
            problems.append(
                f"{at}: the bytes look right, but {wrong}, and bytes count only for a {call} whose values are right"
            )
        else:
            good += 1
    if not total:
        return Outcome(False, f"no measured {call} was run", data, fraction=0.0)
    if problems:
        more = len(problems) - shown
        message = "; ".join(problems[:shown]) + (f" ({more} more like it)" if more > 0 else "") + "." + after
        return Outcome(False, message, data, fraction=good / total)
    return Outcome(True, success, data, fraction=1.0)
