"""Reading and checking numeric answers: the pure core."""

from __future__ import annotations

import pytest

from app.exercises.answers import NotANumber, is_correct, read_number


@pytest.mark.parametrize(
    "text",
    ["2048", "2,048", "2 048", "2.048e3", "2.048E+3", "2048.0", " 2048 ", "2.048×10^3", "2.048 x 10^3", "4096/2"],
)
def test_equivalent_forms_of_one_number(text: str) -> None:
    assert read_number(text).number == pytest.approx(2048)
    assert is_correct(text, value=2048, tolerance=0, unit="samples")


def test_the_parts_unit_may_follow_the_number() -> None:
    assert is_correct("2048 samples", value=2048, tolerance=0, unit="samples")
    assert is_correct("3.64ms", value=3.64, tolerance="1%", unit="ms")
    with pytest.raises(NotANumber):
        read_number("2048 apples", "samples")


@pytest.mark.parametrize("text", ["1.46%", "1.46 %", "1.456", "0.0146", "0.01456", "1.45%"])
def test_percent_parts_take_a_percentage_or_a_fraction(text: str) -> None:
    assert is_correct(text, value=1.456, tolerance="1%", unit="%")


@pytest.mark.parametrize("text", ["1.5%", "0.015", "14.6", "0.146", "146%"])
def test_percent_parts_reject_other_numbers(text: str) -> None:
    assert not is_correct(text, value=1.456, tolerance="1%", unit="%")


def test_a_percent_sign_elsewhere_means_hundredths() -> None:
    assert is_correct("50%", value=0.5, tolerance=0, unit="")
    assert not is_correct("50", value=0.5, tolerance=0, unit="")


def test_absolute_and_relative_tolerance() -> None:
    assert is_correct("3.67", value=3.64, tolerance="1%", unit="ms")  # within 0.0364
    assert not is_correct("3.68", value=3.64, tolerance="1%", unit="ms")
    assert is_correct("467.5", value=468, tolerance=0.5, unit="")
    assert not is_correct("467", value=468, tolerance=0.5, unit="")
    assert is_correct("0.1", value=0.1, tolerance=0, unit="")  # exact answers survive float rounding
    assert is_correct("3.3895e38", value=3.3895e38, tolerance="0.1%", unit="")


def test_negative_numbers_and_unicode_minus() -> None:
    assert is_correct("\u22123", value=-3, tolerance=0, unit="")
    assert not is_correct("3", value=-3, tolerance=0, unit="")


@pytest.mark.parametrize("text", ["", "   ", "abc", "2048x", "1e", "--3", "1/0", "inf", "nan", "1e999", "12,34"])
def test_malformed_numbers_say_how_to_write_one(text: str) -> None:
    with pytest.raises(NotANumber) as info:
        is_correct(text, value=1, tolerance=0, unit="")
    message = str(info.value)
    assert message == "Enter a number." if not text.strip() else "is not a number" in message


def test_a_decimal_comma_gets_a_hint() -> None:
    with pytest.raises(NotANumber, match="Use a dot for decimals"):
        read_number("3,64")


def test_very_long_input_is_refused() -> None:
    with pytest.raises(NotANumber, match="too long"):
        read_number("1" * 61)


@pytest.mark.parametrize(
    ("text", "value", "tolerance", "unit"),
    [
        ("3.64 ms", 3.64, "1%", "ms"),
        ("3.64 MS", 3.64, "1%", "ms"),
        ("1.46 %", 1.456, "1%", "%"),
        ("1.5 × D", 1.5, 0, "× D"),
        ("1.5×D", 1.5, 0, "× D"),
        ("150 MB", 150, "0.5%", "MB"),
        ("2,048 samples", 2048, 0, "samples"),
        ("15.08 USD", 15.08, "1%", "USD"),
    ],
)
def test_answers_may_carry_the_parts_unit(text: str, value: float, tolerance: float | str, unit: str) -> None:
    assert is_correct(text, value=value, tolerance=tolerance, unit=unit)


def test_another_unit_is_not_taken_for_the_parts_own() -> None:
    with pytest.raises(NotANumber):
        is_correct("3.64 s", value=3.64, tolerance="1%", unit="ms")
