"""The communication picture: who sent how many bytes to whom, per world size, as SVG heat maps.

Pure: a verdict's kernel-counted byte matrices (``verdict.data["wire"]``, rank × peer)
in, server-rendered SVG and table rows out. Classes only: the CSP allows no inline styles.
"""

from __future__ import annotations

from dataclasses import dataclass
from html import escape
from typing import Any

from markupsafe import Markup

CELL, LEFT, TOP = 34, 46, 40
LEVELS = 5


@dataclass(frozen=True)
class Picture:
    group: str
    matrix: list[list[int]]
    svg: Markup

    @property
    def rows(self) -> list[tuple[int, list[int], int]]:
        """(rank, bytes to each peer, total) for the table that screen readers use."""
        return [(r, row, sum(row)) for r, row in enumerate(self.matrix)]


def heatmap(matrix: list[list[int]], label: str) -> Markup:
    """A rank × peer grid: darker cells sent more; each cell's title gives the exact bytes."""
    n = len(matrix)
    top = max((v for row in matrix for v in row), default=0)
    body = [
        f'<text class="axis" x="{LEFT + n * CELL / 2}" y="12" text-anchor="middle">to rank</text>',
        f'<text class="axis" x="2" y="{TOP + n * CELL / 2}" transform="rotate(-90 8 {TOP + n * CELL / 2})">from</text>',
    ]
    for peer in range(n):
        body.append(
            f'<text class="axis" x="{LEFT + peer * CELL + CELL / 2}" y="{TOP - 6}" text-anchor="middle">{peer}</text>'
        )
    for rank, row in enumerate(matrix):
        y = TOP + rank * CELL
        body.append(f'<text class="axis" x="{LEFT - 8}" y="{y + CELL / 2 + 4}" text-anchor="end">{rank}</text>')
        for peer, sent in enumerate(row):
            level = 0 if sent <= 0 or top <= 0 else 1 + min(LEVELS - 2, int((LEVELS - 1) * sent / top - 1e-9))
            tip = f"rank {rank} → rank {peer}: {sent:,} bytes"
            body.append(
                f'<rect class="wire-{level}" x="{LEFT + peer * CELL}" y="{y}" width="{CELL - 2}" height="{CELL - 2}" '
                f'rx="3"><title>{escape(tip)}</title></rect>'
            )
    width, height = LEFT + n * CELL + 4, TOP + n * CELL + 4
    return Markup(
        f'<svg class="chart wire-map" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)}" xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>'
    )


def pictures(wire: Any, who: str) -> list[Picture]:
    """Every well-formed square matrix in ``wire`` (group name -> rank × peer bytes), in order."""
    out = []
    for group, matrix in (wire or {}).items() if isinstance(wire, dict) else []:
        ok = isinstance(matrix, list) and all(
            isinstance(row, list) and len(row) == len(matrix) and all(isinstance(v, int) for v in row) for row in matrix
        )
        if ok and matrix:
            out.append(Picture(str(group), matrix, heatmap(matrix, f"Bytes sent between ranks by {who}, {group}")))
    return out


def comparison(verdict: dict[str, Any]) -> list[dict[str, Any]]:
    """Per group: the student's picture beside the reference solution's, where the lab recorded one."""
    data = verdict.get("data") or {}
    mine = pictures(data.get("wire"), "the submitted code")
    reference = {p.group: p for p in pictures(data.get("reference_wire"), "the reference solution")}
    return [{"group": p.group, "mine": p, "reference": reference.get(p.group)} for p in mine]
