"""Checking a student's numeric answer against an answer part: pure functions, no database.

An answer is accepted in the forms people write numbers in: ``2048``, ``2,048``, ``2 048``,
``2.048e3``, ``2.048×10^3``, ``1/3``, with an optional trailing ``%`` or the part's own unit.
Where the part's unit is ``%`` a plain fraction is accepted as well (``0.0146`` for ``1.46%``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

PERCENT = "%"
_THOUSANDS = re.compile(r"^[+-]?\d{1,3}(,\d{3})+(\.\d*)?$")
_SPACED = re.compile(r"^[+-]?\d{1,3}( \d{3})+(\.\d*)?$")
_PLAIN = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")
_TIMES_TEN = re.compile(r"^(?P<m>[+-]?(\d+\.?\d*|\.\d+))\s*[x×*]\s*10\s*\^\s*(?P<e>[+-]?\d+)$")
_FRACTION = re.compile(r"^(?P<n>[+-]?\d+(\.\d+)?)\s*/\s*(?P<d>\d+(\.\d+)?)$")
MAX_LENGTH = 60


class NotANumber(ValueError):
    """The answer cannot be read as a number; the message says how to write one."""


@dataclass(frozen=True)
class Reading:
    """A number read from an answer; ``percent`` when it was written with a ``%`` sign."""

    number: float
    percent: bool


def _number(text: str) -> float | None:
    t = text.strip()
    if _THOUSANDS.match(t) or _SPACED.match(t):
        t = t.replace(",", "").replace(" ", "")
    if _PLAIN.match(t):
        return float(t)
    if m := _TIMES_TEN.match(t):
        return float(m["m"]) * 10.0 ** int(m["e"])
    if m := _FRACTION.match(t):
        denominator = float(m["d"])
        return float(m["n"]) / denominator if denominator else None
    return None


def read_number(answer: str, unit: str = "") -> Reading:
    """Read ``answer`` as a number, or raise NotANumber with a message for the student."""
    text = answer.strip().replace("\u2212", "-").replace("\u2009", " ").replace("\u00a0", " ")
    if not text:
        raise NotANumber("Enter a number.")
    if len(text) > MAX_LENGTH:
        raise NotANumber(f"That is too long for a number (at most {MAX_LENGTH} characters).")
    if unit and unit != PERCENT:
        # The unit as written, in any case and with or without its inner spaces ("1.5 × D", "1.5×D").
        pattern = r"\s*".join(re.escape(ch) for ch in unit if not ch.isspace())
        text = re.sub(rf"\s*{pattern}$", "", text, flags=re.IGNORECASE)
    percent = text.endswith(PERCENT)
    if percent:
        text = text[:-1].rstrip()
    value = _number(text)
    if value is None or not math.isfinite(value):
        hint = " Use a dot for decimals." if re.search(r"\d,\d{1,2}$|\d,\d{4,}", text) else ""
        raise NotANumber(
            f"'{answer.strip()[:MAX_LENGTH]}' is not a number.{hint} Write it like 1500, 1,500, 1.5e3 or 12.5%."
        )
    return Reading(value, percent)


def allowed_error(value: float, tolerance: float | str) -> float:
    """The absolute error accepted: ``tolerance`` as written, or a percentage of ``value``."""
    if isinstance(tolerance, str):
        return abs(value) * float(tolerance.rstrip("%")) / 100
    return float(tolerance)


def _close(candidate: float, value: float, error: float) -> bool:
    # A hair of slack, relative to the value, so that 0.1 + 0.2-style rounding never rejects an exact
    # answer; never an absolute one, which would accept anything near zero for a value like 1.18e-38.
    return abs(candidate - value) <= error + 1e-9 * abs(value)


def is_correct(answer: str, *, value: float, tolerance: float | str, unit: str) -> bool:
    """Whether ``answer`` matches ``value`` within ``tolerance``; raises NotANumber if unreadable.

    With a ``%`` unit, ``value`` is a percentage: ``1.46%`` and ``1.46`` are read as percent,
    and ``0.0146`` as a fraction of one. Elsewhere a ``%`` sign means hundredths (``50%`` = 0.5).
    """
    reading = read_number(answer, unit)
    error = allowed_error(value, tolerance)
    if unit == PERCENT:
        if reading.percent:
            return _close(reading.number, value, error)
        return _close(reading.number, value, error) or _close(reading.number * 100, value, error)
    number = reading.number / 100 if reading.percent else reading.number
    return _close(number, value, error)
