"""The path through the labs: an order that puts each lab after the labs it names in ``after``,
each lab's state for one student, and the one lab to do next.

Pure: labs (ids with their ``after`` lists, in the order the labs page has always used) and the
student's best scores in, a ``Path`` out. No lab is ever locked: "not yet" only says that some
lab it builds on is not done.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

State = Literal["done", "next", "not yet"]
Best = tuple[float, int]  # (best score, points to one decimal; max score)


@dataclass(frozen=True)
class Step:
    """One lab on the path."""

    lab_id: str
    state: State
    after: tuple[str, ...]  # the labs it builds on (those that exist), in its own order
    waiting_on: tuple[str, ...]  # of those, the ones not done yet: empty unless "not yet"


@dataclass(frozen=True)
class Path:
    steps: tuple[Step, ...]  # in path order
    suggested: str | None  # the first "next" lab on the path; None once every lab is done

    def step(self, lab_id: str) -> Step:
        return next(s for s in self.steps if s.lab_id == lab_id)

    @property
    def done(self) -> int:
        return sum(s.state == "done" for s in self.steps)


def is_done(best: Best | None) -> bool:
    """Full marks on the best graded submission."""
    return best is not None and best[1] > 0 and best[0] >= best[1]


def order(labs: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """A topological order of ``labs`` (id, after ids): each lab after the labs it names.

    Of the labs whose ``after`` labs are all placed, the one earliest in ``labs`` comes next. Ids
    that name no lab here are ignored; labs caught in a cycle (the content check refuses one) keep
    their order at the end rather than being dropped.
    """
    position = {lab_id: i for i, (lab_id, _) in enumerate(labs)}
    needs = {lab_id: {a for a in after if a in position and a != lab_id} for lab_id, after in labs}
    unlocks: dict[str, list[str]] = {lab_id: [] for lab_id in position}
    for lab_id, before in needs.items():
        for a in before:
            unlocks[a].append(lab_id)
    waiting = {lab_id: len(before) for lab_id, before in needs.items()}
    ready = [position[lab_id] for lab_id, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    ids = [lab_id for lab_id, _ in labs]
    placed: list[str] = []
    while ready:
        lab_id = ids[heapq.heappop(ready)]
        placed.append(lab_id)
        for other in unlocks[lab_id]:
            waiting[other] -= 1
            if waiting[other] == 0:
                heapq.heappush(ready, position[other])
    seen = set(placed)
    return placed + [lab_id for lab_id in ids if lab_id not in seen]


def plan(labs: Sequence[tuple[str, Sequence[str]]], best: Mapping[str, Best]) -> Path:
    """The path for a student whose best graded scores are ``best`` (lab id -> (score, max score))."""
    after = {lab_id: tuple(dict.fromkeys(a for a in ids if a != lab_id)) for lab_id, ids in labs}
    known = set(after)
    done = {lab_id for lab_id in known if is_done(best.get(lab_id))}
    steps = []
    for lab_id in order(labs):
        before = tuple(a for a in after[lab_id] if a in known)
        waiting_on = tuple(a for a in before if a not in done)
        state: State = "done" if lab_id in done else "not yet" if waiting_on else "next"
        steps.append(Step(lab_id, state, before, waiting_on))
    suggested = next((s.lab_id for s in steps if s.state == "next"), None)
    return Path(tuple(steps), suggested)
