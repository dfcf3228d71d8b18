"""``hints``, ``hint_after`` and ``reference`` in lab.yaml: validated with file:line errors, left out when unset."""

from __future__ import annotations

import pytest

from labs.spec import LabError, load_labs, parse_spec

from .conftest import labs_dir

BASE = """\
id: demo
title: "Demo"
exercise: ex-35-2
world_sizes: [2]
backends: [gloo]
time_limit_s: 10
memory_limit_mb: 512
functions: [f]
checks:
  - id: sums
    title: "Sums"
    points: 4
"""


def problems(text: str) -> list[str]:
    with pytest.raises(LabError) as caught:
        parse_spec(text, "labs/demo/lab.yaml")
    return [str(p) for p in caught.value.problems]


def test_hints_that_are_not_a_list_are_reported_at_their_line() -> None:
    assert problems(BASE + "    hints: just look harder\n") == [
        "labs/demo/lab.yaml:13: checks.0.hints: Input should be a valid list"
    ]
    assert problems(BASE + '    hints: [""]\n') == [
        "labs/demo/lab.yaml:13: checks.0.hints.0: String should have at least 1 character"
    ]
    assert problems(BASE + "    hints: [a, b, c, d, e, f]\n")[0].startswith(
        "labs/demo/lab.yaml:13: checks.0.hints: List should have at most 5 items"
    )


def test_a_bad_reference_or_hint_after_is_reported_at_its_line() -> None:
    assert problems(BASE + "reference: sometimes\n") == [
        "labs/demo/lab.yaml:13: reference: Input should be 'after_full_marks', 'after_due' or 'never'"
    ]
    assert problems(BASE + "hint_after: 0\n") == [
        "labs/demo/lab.yaml:13: hint_after: Input should be greater than or equal to 1"
    ]
    assert problems(BASE + "reference: after_due\n") == [
        "labs/demo/lab.yaml:1: Value error, reference: after_due needs a due date (due:), "
        "or choose after_full_marks or never"
    ]


def test_hints_and_reference_load_and_are_left_out_of_the_stored_spec_when_unset() -> None:
    spec = parse_spec(
        BASE + '    hints: ["Think of the ring.", "Count the chunks."]\nhint_after: 3\nreference: after_due\n'
        "due: 2026-12-01\n",
        "lab.yaml",
    )
    assert spec.checks[0].hints == ["Think of the ring.", "Count the chunks."]
    assert (spec.hint_after, spec.reference) == (3, "after_due")
    dumped = spec.model_dump(mode="json")
    assert dumped["hint_after"] == 3 and dumped["reference"] == "after_due" and dumped["checks"][0]["hints"]
    # Unset, nothing is added to the stored spec, so labs without them keep their stored version.
    plain = parse_spec(BASE, "lab.yaml")
    assert (plain.hint_after, plain.reference, plain.checks[0].hints) == (2, "after_full_marks", [])
    dumped = plain.model_dump(mode="json")
    assert "hint_after" not in dumped and "reference" not in dumped and "hints" not in dumped["checks"][0]


@pytest.mark.parametrize("lab_id", ["ring-allreduce", "collectives-p2p", "ddp-from-scratch", "zero-1"])
def test_every_check_worth_points_has_hints_that_never_quote_the_solution(lab_id: str) -> None:
    lab = load_labs(labs_dir())[lab_id]
    solution = [line.strip() for line in lab.solution_path.read_text().splitlines() if len(line.strip()) >= 16]
    for check in lab.spec.checks:
        if check.points:
            assert 1 <= len(check.hints) <= 3, check.id
        for hint in check.hints:
            assert not [line for line in solution if line in hint], (check.id, hint)
