"""The pure rules of problem reports: what a report's text may be, how many a student may have open,
and how an item is fingerprinted so staff can tell whether it changed since it was reported."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.accounts.ratelimit import Limit, retry_after
from app.errors import InvalidInput, RateLimited

KINDS = ("question", "part", "card", "lab")
MIN_TEXT = 10
MAX_TEXT = 4000
MAX_ANSWER = 4000
# Reports not yet answered or closed that a student may have sent within one hour.
OPEN_PER_HOUR = 5
OPEN_LIMIT = Limit("problem_reports", OPEN_PER_HOUR, 3600)
PART_MARKING = ("value", "tolerance", "unit")


@dataclass(frozen=True)
class Snapshot:
    """An item as it is now: its version label (if it has one) and fingerprints of its content and marking."""

    version: str | None
    digest: str
    key_digest: str | None = None


def clean_text(text: str) -> str:
    """The report's text, trimmed, or InvalidInput saying what to change."""
    text = text.replace("\r\n", "\n").strip()
    if len(text) < MIN_TEXT:
        raise InvalidInput(
            f"Say a little more about the problem: at least {MIN_TEXT} characters (you wrote {len(text)}).",
            field="text",
        )
    if len(text) > MAX_TEXT:
        raise InvalidInput(
            f"A report can be at most {MAX_TEXT} characters; yours has {len(text)}. Shorten it, or send the rest "
            "in a second report.",
            field="text",
        )
    return text


def clean_answer(text: str) -> str:
    text = text.replace("\r\n", "\n").strip()
    if not text:
        raise InvalidInput("Write an answer for the student, or close the report without one.", field="answer")
    if len(text) > MAX_ANSWER:
        raise InvalidInput(f"An answer can be at most {MAX_ANSWER} characters; this one has {len(text)}.")
    return text


def check_open_limit(open_since: Sequence[datetime], now: datetime, limit: Limit = OPEN_LIMIT) -> None:
    """RateLimited if the student's open reports sent in the last hour (``open_since``) already fill the limit."""
    wait = retry_after(open_since, limit, now)
    if wait is None:
        return
    minutes = max(1, math.ceil(wait / 60))
    raise RateLimited(
        f"You have {limit.events} reports from the last hour waiting for an answer. Staff read every one; "
        f"you can send another in {minutes} minute{'s' if minutes != 1 else ''}.",
        retry_after=wait,
    )


def fingerprint(data: Any) -> str:
    """A stable SHA-256 of JSON-like data (key order does not matter)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def question_snapshot(source: Mapping[str, Any], answer: str, quiz_version: str | None) -> Snapshot:
    return Snapshot(quiz_version, fingerprint(source), fingerprint({"answer": answer}))


def part_snapshot(part: Mapping[str, Any]) -> Snapshot:
    """A part as stored (``app.content.sync``); its marking is its value, tolerance and unit."""
    return Snapshot(None, fingerprint(dict(part)), fingerprint({k: part.get(k) for k in PART_MARKING}))


def card_snapshot(source: Mapping[str, Any]) -> Snapshot:
    return Snapshot(None, fingerprint(source))


def lab_snapshot(version: int, digest: str) -> Snapshot:
    return Snapshot(f"version {version}", digest)


def part_ref(item_id: str) -> tuple[str, str]:
    """``<exercise id>/<part id>`` as its two ids, or InvalidInput."""
    exercise_id, sep, part_id = item_id.partition("/")
    if not sep or not exercise_id or not part_id:
        raise InvalidInput(f"A part is named '<exercise id>/<part id>', not '{item_id}'.", field="item")
    return exercise_id, part_id


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise InvalidInput(f"Reports are about a {', '.join(KINDS[:-1])} or {KINDS[-1]}, not '{kind}'.", field="kind")
    return kind
