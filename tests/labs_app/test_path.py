"""The path through the labs: a topological order (ties by the labs' own order), states and the next lab."""

from __future__ import annotations

from app.labs.path import Path, Step, is_done, order, plan

# Listed in the labs page's order; p2p -> ring -> ddp -> {overlap, zero}; memory stands alone.
LABS = [
    ("memory", []),
    ("zero", ["ddp"]),
    ("overlap", ["ddp"]),
    ("ddp", ["ring"]),
    ("p2p", []),
    ("ring", ["p2p"]),
]


def test_each_lab_comes_after_its_labs_and_ties_keep_the_given_order() -> None:
    assert order(LABS) == ["memory", "p2p", "ring", "ddp", "zero", "overlap"]
    assert order(list(reversed(LABS))) == ["p2p", "ring", "ddp", "overlap", "zero", "memory"]
    # Two labs a third comes after: it waits for both, wherever they are.
    assert order([("c", ["b", "a"]), ("b", []), ("a", [])]) == ["b", "a", "c"]


def test_unknown_ids_are_ignored_and_a_cycle_keeps_its_labs_at_the_end() -> None:
    assert order([("a", ["retired-lab"]), ("b", ["a"])]) == ["a", "b"]
    assert order([("x", ["y"]), ("y", ["x"]), ("z", [])]) == ["z", "x", "y"]
    assert order([("self", ["self"])]) == ["self"]


def test_a_new_student_starts_at_the_first_lab_that_builds_on_nothing() -> None:
    assert plan(LABS, {}) == Path(
        steps=(
            Step("memory", "next", (), ()),
            Step("p2p", "next", (), ()),
            Step("ring", "not yet", ("p2p",), ("p2p",)),
            Step("ddp", "not yet", ("ring",), ("ring",)),
            Step("zero", "not yet", ("ddp",), ("ddp",)),
            Step("overlap", "not yet", ("ddp",), ("ddp",)),
        ),
        suggested="memory",
    )


def test_full_marks_make_a_lab_done_and_open_the_labs_after_it() -> None:
    best = {"memory": (8, 8), "p2p": (10, 10), "ring": (12, 12), "ddp": (3, 10), "zero": (10, 10)}
    path = plan(LABS, best)
    assert [(s.lab_id, s.state) for s in path.steps] == [
        ("memory", "done"),
        ("p2p", "done"),
        ("ring", "done"),
        ("ddp", "next"),  # tried, not full marks
        ("zero", "done"),  # done out of order: never locked
        ("overlap", "not yet"),
    ]
    assert path.step("overlap").waiting_on == ("ddp",) and path.suggested == "ddp" and path.done == 4


def test_the_suggestion_moves_on_and_ends_when_every_lab_is_done() -> None:
    assert plan(LABS, {"memory": (8, 8)}).suggested == "p2p"
    assert plan(LABS, {"memory": (8, 8), "p2p": (10, 10)}).suggested == "ring"
    everything = {lab_id: (1, 1) for lab_id, _ in LABS}
    assert plan(LABS, everything).suggested is None and plan(LABS, everything).done == 6


def test_only_full_marks_are_done() -> None:
    assert [is_done(b) for b in [(10, 10), (9, 10), (0, 0), None, (11, 10)]] == [True, False, False, False, True]
