"""The pure rules of problem reports, with exact values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from app.errors import InvalidInput, RateLimited
from app.reports import rules

NOW = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def test_text_is_trimmed_and_must_be_10_to_4000_characters() -> None:
    assert rules.clean_text("  The key is B, not C.\r\n") == "The key is B, not C."
    assert rules.clean_text("x" * 10) == "x" * 10
    assert rules.clean_text("x" * 4000) == "x" * 4000
    with pytest.raises(InvalidInput) as short:
        rules.clean_text("   too short  ")
    assert short.value.message == "Say a little more about the problem: at least 10 characters (you wrote 9)."
    assert short.value.field == "text"
    with pytest.raises(InvalidInput) as long:
        rules.clean_text("x" * 4001)
    assert long.value.message.startswith("A report can be at most 4000 characters; yours has 4001.")


def test_an_answer_is_needed_to_answer() -> None:
    assert rules.clean_answer(" Fixed in the next sync. ") == "Fixed in the next sync."
    with pytest.raises(InvalidInput, match="Write an answer"):
        rules.clean_answer("  ")
    with pytest.raises(InvalidInput, match="at most 4000"):
        rules.clean_answer("y" * 4001)


def test_five_open_reports_an_hour_then_wait_until_the_oldest_leaves_the_hour() -> None:
    four = [NOW - timedelta(minutes=m) for m in (50, 40, 30, 20)]
    rules.check_open_limit(four, NOW)  # a fifth fits
    with pytest.raises(RateLimited) as full:
        rules.check_open_limit([*four, NOW - timedelta(minutes=1)], NOW)
    # The oldest (50 minutes ago) leaves the hour in 10 minutes.
    assert full.value.retry_after == 600
    assert full.value.message == (
        "You have 5 reports from the last hour waiting for an answer. Staff read every one; "
        "you can send another in 10 minutes."
    )
    older = [NOW - timedelta(minutes=61)] * 5
    rules.check_open_limit(older, NOW)  # none of them in the last hour


def test_fingerprints_ignore_key_order_and_see_every_change() -> None:
    a = rules.fingerprint({"answer": "B", "prompt": "P"})
    assert a == rules.fingerprint({"prompt": "P", "answer": "B"})
    assert a != rules.fingerprint({"prompt": "P", "answer": "C"})
    # SHA-256 of the JSON text '{"answer": "B"}'.
    assert rules.fingerprint({"answer": "B"}) == "0dc4a54d26c60713393325f0707bc0137ebc618ee2a9bb5e37a6cfe34261eed7"


def test_a_question_snapshot_keys_on_the_answer_alone() -> None:
    source = {"id": "q1", "prompt": "Which?", "answer": "B"}
    snap = rules.question_snapshot(source, "B", "1.0")
    assert snap.version == "1.0"
    reworded = rules.question_snapshot({**source, "prompt": "Which one?"}, "B", "1.0")
    assert reworded.digest != snap.digest and reworded.key_digest == snap.key_digest
    rekeyed = rules.question_snapshot({**source, "answer": "C"}, "C", "1.0")
    assert rekeyed.key_digest != snap.key_digest


def test_a_part_snapshot_keys_on_value_tolerance_and_unit() -> None:
    part = {"id": "p", "prompt": "How many?", "value": 2.0, "tolerance": "2%", "unit": "s", "explanation": "E"}
    snap = rules.part_snapshot(part)
    assert snap.version is None
    assert rules.part_snapshot({**part, "explanation": "Better"}).key_digest == snap.key_digest
    for change in ({"value": 3.0}, {"tolerance": 0.0}, {"unit": "ms"}):
        assert rules.part_snapshot({**part, **change}).key_digest != snap.key_digest


def test_cards_and_labs_have_no_key() -> None:
    assert rules.card_snapshot({"front": "F"}).key_digest is None
    assert rules.lab_snapshot(3, "abc") == rules.Snapshot("version 3", "abc", None)


def test_part_references_and_kinds() -> None:
    assert rules.part_ref("ex-26-20/bert-break-even") == ("ex-26-20", "bert-break-even")
    for bad in ("ex-26-20", "/p", "ex/"):
        with pytest.raises(InvalidInput, match="<exercise id>/<part id>"):
            rules.part_ref(bad)
    assert rules.check_kind("lab") == "lab"
    with pytest.raises(InvalidInput) as wrong:
        rules.check_kind("quiz")
    assert wrong.value.message == "Reports are about a question, part, card or lab, not 'quiz'."
