"""Reading rendered HTML in tests: a chart's "The numbers" table, as text."""

from __future__ import annotations

from dataclasses import dataclass, field
from html.parser import HTMLParser


@dataclass
class NumbersTable:
    """The table inside ``<details data-numbers="…">``: its caption, column headers and rows of cell text.

    ``scopes`` holds each cell's tag and scope ("th col", "th row", "td"), row by row, header row first.
    """

    caption: str = ""
    columns: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    scopes: list[list[str]] = field(default_factory=list)


class _Reader(HTMLParser):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name, self.depth, self.table = name, 0, NumbersTable()
        self.found = False
        self.text: list[str] | None = None
        self.row: list[str] = []
        self.kinds: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "details" and dict(attrs).get("data-numbers") == self.name:
            self.found, self.depth = True, 1
        elif self.depth and tag == "details":
            self.depth += 1
        if not self.depth:
            return
        if tag in ("th", "td", "caption"):
            self.text = []
            if tag != "caption":
                self.kinds.append(tag + (f" {dict(attrs)['scope']}" if dict(attrs).get("scope") else ""))
        elif tag == "tr":
            self.row, self.kinds = [], []

    def handle_endtag(self, tag: str) -> None:
        if not self.depth:
            return
        if tag in ("th", "td", "caption") and self.text is not None:
            words = " ".join("".join(self.text).split())
            if tag == "caption":
                self.table.caption = words
            else:
                self.row.append(words)
            self.text = None
        elif tag == "tr":
            if self.kinds and all(k == "th col" for k in self.kinds):
                self.table.columns = self.row
            else:
                self.table.rows.append(self.row)
            self.table.scopes.append(self.kinds)
        elif tag == "details":
            self.depth -= 1

    def handle_data(self, data: str) -> None:
        if self.depth and self.text is not None:
            self.text.append(data)


def numbers_table(html: str, name: str) -> NumbersTable:
    """The "The numbers" table of the chart named ``name`` in ``html``; fails the test when there is none."""
    reader = _Reader(name)
    reader.feed(html)
    assert reader.found, f'no <details data-numbers="{name}"> in the page'
    return reader.table
