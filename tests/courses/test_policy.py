"""The terms of one assessment: the item's file, the course's assignment, a student's extension (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from app.courses import policy


def test_a_course_due_date_is_read_in_its_zone_and_given_in_utc() -> None:
    terms = policy.terms({"due": "2026-12-01T23:59:59+01:00"}, policy.Own())
    assert terms.course_due_at == datetime(2026, 12, 1, 22, 59, 59, tzinfo=UTC)
    assert terms.course_due_at.utcoffset() is not None and terms.course_due_at.utcoffset().total_seconds() == 0


def test_what_the_course_leaves_out_the_file_says_and_an_extension_goes_on_top() -> None:
    own = policy.Own(datetime(2026, 11, 1, tzinfo=UTC), 3, "after_due")
    assert policy.terms({}, own).due_at == own.due_at and policy.terms({}, own).max_attempts == 3
    assigned = {"due": "2026-12-01T00:00:00+00:00", "max_attempts": 2, "late": "refuse"}
    grant = policy.Grant(datetime(2026, 12, 8, tzinfo=UTC), 1)
    terms = policy.terms(assigned, own, grant)
    assert (terms.due_at, terms.course_due_at) == (grant.due_at, datetime(2026, 12, 1, tzinfo=UTC))
    assert terms.max_attempts == 3 and terms.show_answers == "after_due" and terms.extended
    assert not terms.closed(datetime(2026, 12, 5, tzinfo=UTC)) and terms.closed(datetime(2026, 12, 9, tzinfo=UTC))
    assert policy.terms(None, own).assigned is False  # a course that does not assign the item
