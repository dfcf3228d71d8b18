"""A course roster as staff upload it: CSV text with a header row, one person a line.

Pure: ``parse`` reads the whole text and either returns every row or raises ``RosterError`` naming
each bad line, so an import with one mistake changes nothing. Columns: ``username`` (required),
``name`` and ``email`` (optional), in any order; header names are matched without regard to case.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass

from app.accounts.service import USERNAME
from app.errors import InvalidInput

COLUMNS = ("username", "name", "email")
MAX_ROWS = 5000
MAX_NAME = 120  # User.full_name
MAX_EMAIL = 254  # User.email
MAX_PROBLEMS = 20  # listed; a file with more has a wrong format, not a few typos
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")


@dataclass(frozen=True)
class RosterRow:
    line: int  # in the file, the header being line 1
    username: str
    name: str | None
    email: str | None


class RosterError(InvalidInput):
    """The roster cannot be imported: ``problems`` says what is wrong, line by line."""

    def __init__(self, problems: list[str]):
        shown = problems[:MAX_PROBLEMS]
        more = len(problems) - len(shown)
        tail = [f"… and {more} more problems."] if more else []
        super().__init__(" ".join(shown + tail), field="roster")
        self.problems = shown + tail


def parse(text: str) -> list[RosterRow]:
    """Every person of the roster ``text``, in file order. RosterError names each bad line."""
    text = text.removeprefix("\ufeff")  # spreadsheets save UTF-8 CSV with a byte-order mark
    if not text.strip():
        raise RosterError(["The roster is empty: give a header row (username,name,email), then one person a line."])
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [cell.strip().lower() for cell in next(reader)]
    except csv.Error as exc:
        raise RosterError([f"Line 1: cannot read the header row as CSV ({exc})."]) from None
    problems = _header_problems(header)
    if problems:
        raise RosterError(problems)
    where = {column: header.index(column) for column in COLUMNS if column in header}
    rows: list[RosterRow] = []
    first_line: dict[str, int] = {}
    try:
        for cells in reader:
            line = reader.line_num
            if not any(cell.strip() for cell in cells):
                continue  # blank lines (a spreadsheet's trailing ones) are no one
            if len(cells) != len(header):
                problems.append(f"Line {line}: {len(cells)} fields, but the header has {len(header)}.")
                continue
            row = _row(line, cells, where, problems)
            if row is None:
                continue
            key = row.username.lower()
            if key in first_line:
                problems.append(f"Line {line}: '{row.username}' is already on line {first_line[key]}.")
                continue
            first_line[key] = line
            rows.append(row)
            if len(rows) > MAX_ROWS:
                raise RosterError([f"More than {MAX_ROWS} people: split the roster into several files."])
    except csv.Error as exc:
        problems.append(f"Line {reader.line_num}: not valid CSV ({exc}).")
    if problems:
        raise RosterError(problems)
    if not rows:
        raise RosterError(["The roster has a header row but no one in it: add one person a line under it."])
    return rows


def _header_problems(header: list[str]) -> list[str]:
    problems = []
    if "username" not in header:
        problems.append(
            "Line 1: the header row has no 'username' column. The first line names the columns: "
            "username (required), name and email (optional), for example 'username,name,email'."
        )
    for column in header:
        if column not in COLUMNS:
            shown = column or "(an empty name)"
            problems.append(f"Line 1: unknown column '{shown}': use username, name and email (remove the others).")
    repeated = sorted({c for c in header if c and header.count(c) > 1})
    problems += [f"Line 1: the column '{c}' is there twice." for c in repeated]
    return problems


def _row(line: int, cells: list[str], where: dict[str, int], problems: list[str]) -> RosterRow | None:
    def cell(column: str) -> str:
        return cells[where[column]].strip() if column in where else ""

    username, name, email = cell("username"), cell("name"), cell("email")
    found = len(problems)
    if not username:
        problems.append(f"Line {line}: no username.")
    elif not USERNAME.match(username):
        problems.append(
            f"Line {line}: '{username}' is not a valid username: 3 to 40 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit."
        )
    if len(name) > MAX_NAME:
        problems.append(f"Line {line}: the name is longer than {MAX_NAME} characters.")
    if email and (len(email) > MAX_EMAIL or not EMAIL.match(email)):
        problems.append(f"Line {line}: '{email[:60]}' is not an e-mail address.")
    if len(problems) > found:
        return None
    return RosterRow(line, username, name or None, email or None)
