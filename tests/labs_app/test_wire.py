"""The communication picture's pure core: byte matrices to SVG heat maps and table rows."""

from __future__ import annotations

import re

from app.labs import wire


def test_heatmap_has_a_cell_per_rank_and_peer_with_exact_bytes() -> None:
    svg = str(wire.heatmap([[0, 10, 0], [0, 0, 10], [5, 0, 0]], "ring"))
    cells = re.findall(r'<rect class="wire-(\d)"[^>]*><title>([^<]*)</title>', svg)
    assert len(cells) == 9
    levels = {title: int(level) for level, title in cells}
    assert levels["rank 0 → rank 1: 10 bytes"] == 4  # the most-sent cell is darkest
    assert levels["rank 0 → rank 0: 0 bytes"] == 0
    assert 1 <= levels["rank 2 → rank 0: 5 bytes"] < 4
    assert 'aria-label="ring"' in svg


def test_comparison_pairs_each_group_with_the_reference_and_skips_malformed_data() -> None:
    verdict = {
        "data": {
            "wire": {"world size 2": [[0, 1], [1, 0]], "broken": [[1, 2]], "world size 3": "nope"},
            "reference_wire": {"world size 2": [[0, 2], [2, 0]]},
        }
    }
    pairs = wire.comparison(verdict)
    assert [p["group"] for p in pairs] == ["world size 2"]
    assert pairs[0]["reference"].matrix == [[0, 2], [2, 0]]
    assert pairs[0]["mine"].rows == [(0, [0, 1], 1), (1, [1, 0], 1)]
    assert wire.comparison({}) == []
