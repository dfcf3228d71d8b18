"""Two Python files side by side, line by line, for the reference comparison page. Pure."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from itertools import zip_longest
from typing import Literal

Change = Literal["same", "changed", "removed", "added"]
# Each change has a symbol and a word, so it is never told by colour alone.
MARKS: dict[Change, tuple[str, str]] = {
    "same": ("", "same"),
    "changed": ("~", "changed"),
    "removed": ("−", "only in yours"),
    "added": ("+", "only in the reference"),
}


@dataclass(frozen=True)
class Row:
    """One row of the side-by-side table: a line of each side (None where that side has none)."""

    change: Change
    left_no: int | None
    left: str | None
    right_no: int | None
    right: str | None

    @property
    def symbol(self) -> str:
        return MARKS[self.change][0]

    @property
    def words(self) -> str:
        return MARKS[self.change][1]


@dataclass(frozen=True)
class SideBySide:
    rows: list[Row]

    @property
    def counts(self) -> dict[Change, int]:
        found: dict[Change, int] = {"same": 0, "changed": 0, "removed": 0, "added": 0}
        for row in self.rows:
            found[row.change] += 1
        return found


def side_by_side(left: str, right: str) -> SideBySide:
    """``left`` and ``right`` aligned line by line: same lines share a row, replaced ones pair up."""
    a, b = left.splitlines(), right.splitlines()
    rows: list[Row] = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            rows += [Row("same", i + 1, a[i], j + 1, b[j]) for i, j in zip(range(i1, i2), range(j1, j2), strict=True)]
            continue
        for i, j in zip_longest(range(i1, i2), range(j1, j2)):
            if i is not None and j is not None:
                rows.append(Row("changed", i + 1, a[i], j + 1, b[j]))
            elif i is not None:
                rows.append(Row("removed", i + 1, a[i], None, None))
            elif j is not None:
                rows.append(Row("added", None, None, j + 1, b[j]))
    return SideBySide(rows)
