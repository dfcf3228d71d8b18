"""The labs' ``after:`` lists, checked across labs: every id names a lab, none is its own, no cycles.

Pure over the validated labs and their ``lab.yaml`` text; each problem names the file and the line of
the ``after`` entry to fix.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from app.content.models import LabContent
from app.content.source import ContentError, Problem, Source, parse_yaml


def after_of(lab: LabContent) -> list[str]:
    """The labs to do before ``lab``, as its stored spec lists them."""
    return list(lab.spec.get("after", []))


def check_after(labs: Sequence[LabContent], known: set[str], where: Callable[[str], str]) -> list[Problem]:
    """Problems with the ``after`` lists of ``labs``.

    ``known`` holds the ids of every lab folder, those that failed their own checks too (a reference
    to a broken lab is that lab's problem, reported already); ``where`` gives a lab's ``lab.yaml`` path.
    """
    by_id = {lab.id: lab for lab in labs}
    sources: dict[str, Source] = {}

    def source(lab_id: str) -> Source:  # parsed again for its line numbers only when there is a problem to place
        if lab_id not in sources:
            sources[lab_id] = _source(by_id[lab_id], where(lab_id))
        return sources[lab_id]

    problems = []
    for lab in labs:
        for i, other in enumerate(after_of(lab)):
            if other == lab.id:
                message = f"after: lab '{lab.id}' cannot come after itself; list the labs to do before it"
                problems.append(source(lab.id).problem(("after", i), message))
            elif other not in known:
                message = f"after: there is no lab '{other}'; after names the ids of folders in content/labs"
                problems.append(source(lab.id).problem(("after", i), message))
    graph = {lab.id: [o for o in after_of(lab) if o != lab.id and o in known] for lab in labs}
    for cycle in _cycles(graph):
        first, second = cycle[0], cycle[1]
        chain = " → ".join([*cycle, first])
        loc = ("after", graph[first].index(second))
        message = f"after: a cycle ({chain}, each lab after the next), so none could be done first; remove a link"
        problems.append(source(first).problem(loc, message))
    return problems


def _source(lab: LabContent, path: str) -> Source:
    try:
        return parse_yaml(lab.files.get("lab.yaml", ""), path)
    except ContentError:  # it validated, so it parses; a line 1 is still better than nothing
        return Source(path, {})


def _cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """One cycle per strongly connected group of labs that holds one: the shortest through its smallest id."""
    found = []
    for group in _groups(graph):
        if len(group) < 2:
            continue
        start = min(group)
        parent: dict[str, str] = {}
        queue: list[str] = [start]
        last: str | None = None
        while last is None:  # breadth first, inside the group: every lab in it leads back to the start
            here = queue.pop(0)
            for other in graph[here]:
                if other == start:
                    last = here
                    break
                if other in group and other not in parent:
                    parent[other] = here
                    queue.append(other)
        path: list[str] = [last]
        while path[-1] != start:
            path.append(parent[path[-1]])
        found.append(path[::-1])
    return sorted(found)


def _groups(graph: dict[str, list[str]]) -> list[set[str]]:
    """Strongly connected groups (Tarjan's algorithm, iterative), over the labs in ``graph``."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(o for o in graph[root] if o in graph)))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    groups.append(group)
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(o for o in graph[child] if o in graph))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups
