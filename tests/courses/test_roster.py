"""The roster CSV parser: pure, every row or every problem by line."""

from __future__ import annotations

import pytest

from app.courses.roster import MAX_PROBLEMS, RosterError, RosterRow, parse


def problems(text: str) -> list[str]:
    with pytest.raises(RosterError) as caught:
        parse(text)
    return caught.value.problems


def test_reads_every_column_in_any_order_and_skips_blank_lines() -> None:
    text = "Email, USERNAME ,name\r\nada@example.edu,ada,Ada Lovelace\r\n\r\n,alan,\r\n  ,  ,  \r\n"
    assert parse(text) == [
        RosterRow(2, "ada", "Ada Lovelace", "ada@example.edu"),
        RosterRow(4, "alan", None, None),
    ]


def test_username_alone_is_enough_and_a_byte_order_mark_is_ignored() -> None:
    assert parse("\ufeffusername\nGrace.Hopper\n") == [RosterRow(2, "Grace.Hopper", None, None)]


def test_quoted_fields_may_hold_commas_and_line_breaks() -> None:
    rows = parse('username,name\nada,"Lovelace, Ada"\nbob,"Robert\nthe second"\n')
    assert [(r.line, r.name) for r in rows] == [(2, "Lovelace, Ada"), (4, "Robert\nthe second")]


def test_a_header_without_username_is_refused_naming_line_1() -> None:
    found = problems("name,email\nAda,ada@example.edu\n")
    assert found == [
        "Line 1: the header row has no 'username' column. The first line names the columns: username (required), "
        "name and email (optional), for example 'username,name,email'."
    ]


def test_unknown_and_repeated_columns_are_named() -> None:
    assert problems("username,emial,username\nada,x,ada\n") == [
        "Line 1: unknown column 'emial': use username, name and email (remove the others).",
        "Line 1: the column 'username' is there twice.",
    ]


def test_every_bad_line_is_named() -> None:
    text = (
        "username,name,email\nada,Ada,ada@example.edu\nno spaces,X,\n,Nobody,\nbob,Bob,not-an-address\n"
        "ADA,Ada again,\ncyd,Cyd\n"
    )
    assert problems(text) == [
        "Line 3: 'no spaces' is not a valid username: 3 to 40 letters, digits, '.', '_' or '-', "
        "starting with a letter or digit.",
        "Line 4: no username.",
        "Line 5: 'not-an-address' is not an e-mail address.",
        "Line 6: 'ADA' is already on line 2.",
        "Line 7: 2 fields, but the header has 3.",
    ]


def test_too_long_a_name_is_refused() -> None:
    assert problems("username,name\nada," + "x" * 121 + "\n") == ["Line 2: the name is longer than 120 characters."]


def test_empty_rosters_are_refused() -> None:
    assert problems("") == ["The roster is empty: give a header row (username,name,email), then one person a line."]
    assert problems("username,name\n\n") == [
        "The roster has a header row but no one in it: add one person a line under it."
    ]


def test_a_file_of_mistakes_lists_the_first_few_and_counts_the_rest() -> None:
    text = "username\n" + "".join(f"x{n}!\n" for n in range(MAX_PROBLEMS + 5))
    found = problems(text)
    assert len(found) == MAX_PROBLEMS + 1 and found[-1] == "… and 5 more problems."
    assert found[0].startswith("Line 2: 'x0!' is not a valid username")
