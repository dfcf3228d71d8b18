"""The pure rules of a part's standing: when the hint is offered, what counts as solved once given up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.exercises.standing import HINT_AFTER_WRONG, Standing, counts_as_solved, hint_offered, standing, wrong_answers

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
LATER = T0 + timedelta(minutes=5)


@pytest.mark.parametrize(
    ("has_hint", "wrong", "finished", "offered"),
    [
        (True, 0, False, False),
        (True, 1, False, False),
        (True, 2, False, True),
        (True, 5, False, True),
        (False, 5, False, False),  # nothing to offer
        (True, 5, True, False),  # solved or given up: the worked answer is shown instead
    ],
)
def test_the_hint_is_offered_after_two_wrong_answers(has_hint: bool, wrong: int, finished: bool, offered: bool) -> None:
    assert HINT_AFTER_WRONG == 2
    assert hint_offered(has_hint=has_hint, wrong=wrong, finished=finished) is offered


def test_wrong_answers_leave_out_the_right_one() -> None:
    assert wrong_answers(3, solved=False) == 3
    assert wrong_answers(3, solved=True) == 2
    assert wrong_answers(0, solved=False) == 0


def test_a_part_given_up_does_not_count_as_solved() -> None:
    assert standing(0, None, None) is Standing.untried
    assert standing(2, None, None) is Standing.tried
    assert standing(2, T0, None) is Standing.solved
    assert standing(2, None, T0) is Standing.gave_up
    # Right only after giving up: still given up.
    assert not counts_as_solved(LATER, T0) and standing(3, LATER, T0) is Standing.gave_up
    # An answer given before giving up, re-marked right after a corrected key, keeps the part solved.
    assert counts_as_solved(T0, LATER) and standing(1, T0, LATER) is Standing.solved


def test_standings_read_as_words() -> None:
    assert [s.value for s in Standing] == ["not tried", "tried", "solved", "gave up"]
