"""Draw the import contracts of pyproject.toml's ``[tool.importlinter]`` as ``docs/img/layers.svg``.

The picture is made from the configuration that ``lint-imports`` checks, so it says what CI enforces:

- packages are boxes, nested as the modules nest (``labs.rank`` inside ``labs``);
- a ``layers`` contract stacks its layers top to bottom inside the package it arranges, with an arrow
  for the one allowed direction (a layer may import the layers below it, never one above) and a red ✗
  between independent siblings (``a | b``: neither imports the other);
- each ``forbidden`` contract is drawn below as its source, a crossed-out arrow and the modules it must
  not import, with the imports it excepts (``ignore_imports``);
- every contract is numbered and named; a contract of any other type is named with its modules.

Neutral colours on a white background, so it reads on the docs' light and dark themes. Run it after
changing the contracts (``tests/test_layers_diagram.py`` fails while the file is out of date)::

    .venv/bin/python scripts/layers_diagram.py
"""

from __future__ import annotations

import sys
import textwrap
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

REPO = Path(__file__).resolve().parents[1]
PYPROJECT = REPO / "pyproject.toml"
OUTPUT = REPO / "docs" / "img" / "layers.svg"

MONO = "DejaVu Sans Mono, Menlo, Consolas, monospace"
SANS = "DejaVu Sans, Helvetica, Arial, sans-serif"
MONO_W = 7.9  # px per character of 13 px monospace
SANS_W = 7.0  # a generous average for 13 px sans-serif, so wrapped lines never overflow
INK, MUTED, LINE, RED, ALLOWED = "#111827", "#4b5563", "#374151", "#b42318", "#1d4ed8"
FILLS = ("#eef2f7", "#ffffff")  # nested packages alternate, leaves are white
MARGIN, PAD, TITLE_H, LEAF_H = 24, 12, 24, 30
HGAP, VGAP, LAYER_GAP = 28, 14, 34
MIN_WIDTH = 960


@dataclass
class Layers:
    number: int
    name: str
    containers: list[str]
    layers: list[str]  # as written: "a | b" (independent), "a : b" (may import each other), "(a)" optional
    exhaustive: bool

    def rows(self, container: str | None) -> list[tuple[list[str], bool]]:
        """Each layer's modules (full names under ``container``) and whether they are independent."""
        rows = []
        for layer in self.layers:
            independent = ":" not in layer
            parts = [p.strip().strip("()").strip() for p in layer.replace(":", "|").split("|")]
            rows.append(([f"{container}.{p}" if container else p for p in parts if p], independent))
        return rows


@dataclass
class Forbidden:
    number: int
    name: str
    sources: list[str]
    targets: list[str]
    ignore: list[str]
    direct_only: bool  # allow_indirect_imports: only a direct import breaks it


@dataclass
class Other:
    number: int
    name: str
    kind: str
    modules: list[str]


@dataclass
class Box:
    name: str
    label: str
    depth: int
    rows: list[tuple[list[str], bool]] = field(default_factory=list)
    layered: int = 0  # how many of the rows are a layers contract's layers (the rest are unarranged children)
    badges: list[tuple[str, str]] = field(default_factory=list)
    w: float = 0
    h: float = 0


def contracts(config: dict[str, Any]) -> list[Layers | Forbidden | Other]:
    """The contracts of a ``[tool.importlinter]`` table, numbered from 1 in the order written."""
    found: list[Layers | Forbidden | Other] = []
    for number, c in enumerate(config.get("contracts", []), start=1):
        name, kind = str(c.get("name", f"contract {number}")), str(c.get("type", ""))
        if kind == "layers":
            layers = [str(x) for x in c.get("layers", [])]
            found.append(Layers(number, name, list(c.get("containers", [])), layers, bool(c.get("exhaustive"))))
        elif kind == "forbidden":
            ignore = [str(x) for x in c.get("ignore_imports", [])]
            sources, targets = list(c["source_modules"]), list(c["forbidden_modules"])
            found.append(Forbidden(number, name, sources, targets, ignore, bool(c.get("allow_indirect_imports"))))
        else:
            keys = sorted(k for k, v in c.items() if k.endswith("modules") and isinstance(v, list))
            found.append(Other(number, name, kind, [str(m) for k in keys for m in c[k]]))
    return found


def _attrs(attrs: dict[str, str]) -> str:
    return "".join(f' {k.replace("_", "-")}="{v}"' for k, v in attrs.items())


def _text(
    x: float,
    y: float,
    s: str,
    *,
    size: int = 13,
    font: str = SANS,
    anchor: str = "start",
    fill: str = INK,
    **attrs: str,
) -> str:
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" font-family="{font}" font-size="{size}" text-anchor="{anchor}"'
        f' fill="{fill}"{_attrs(attrs)}>{escape(s)}</text>'
    )


def _paragraph(
    x: float, y: float, s: str, width: float, *, size: int = 13, font: str = SANS, fill: str = INK
) -> tuple[list[str], float]:
    """``s`` wrapped to ``width`` px as one <text> of <tspan> lines; returns it and the height used."""
    per_char = (MONO_W if font == MONO else SANS_W) * size / 13
    lines = textwrap.wrap(s, max(20, int(width / per_char))) or [""]
    step = size * 1.4
    spans = "".join(
        f'<tspan x="{x:.1f}" dy="{0 if i == 0 else step:.1f}">{escape(t)}</tspan>' for i, t in enumerate(lines)
    )
    text = f'<text y="{y:.1f}" font-family="{font}" font-size="{size}" fill="{fill}">{spans}</text>'
    return [text], len(lines) * step


def _arrow(x1: float, y1: float, x2: float, y2: float, colour: str, marker: str) -> str:
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{colour}" stroke-width="2"'
        f' marker-end="url(#{marker})"/>'
    )


def _badge_width(text: str) -> float:
    return len(text) * 7.2 + 12


def _badge(x_right: float, y: float, text: str, colour: str) -> tuple[str, float]:
    w = _badge_width(text)
    return (
        f'<rect x="{x_right - w:.1f}" y="{y - 9:.1f}" width="{w:.1f}" height="18" rx="9" fill="{colour}"/>'
        + _text(x_right - w / 2, y + 4, text, size=11, anchor="middle", fill="#ffffff", font_weight="bold")
    ), w


class Diagram:
    """The nested package boxes of every module the contracts name, laid out and drawn."""

    def __init__(self, roots: list[str], found: list[Layers | Forbidden | Other]) -> None:
        names = set(roots)
        for c in found:
            if isinstance(c, Layers):
                for container in c.containers or [None]:
                    names.update(m for row, _ in c.rows(container) for m in row)
                names.update(c.containers)
            elif isinstance(c, Forbidden):
                names.update(c.sources + c.targets)
        self.parent = {n: max((p for p in names if n.startswith(p + ".")), key=len, default=None) for n in names}
        self.boxes: dict[str, Box] = {}
        for n in sorted(names):
            parent = self.parent[n]
            self.boxes[n] = Box(n, n[len(parent) + 1 :] if parent else n, self._depth(n))
        for box in self.boxes.values():
            self._arrange(box, [c for c in found if isinstance(c, Layers)])
        for c in found:
            if isinstance(c, Forbidden):
                for s in c.sources:
                    self.boxes[s].badges.append((f"#{c.number} ✗", RED))
        self.roots = sorted(n for n, p in self.parent.items() if p is None)
        for n in self.roots:
            self._measure(self.boxes[n])

    def _depth(self, n: str) -> int:
        p = self.parent[n]
        return 0 if p is None else 1 + self._depth(p)

    def _children(self, n: str) -> list[str]:
        return sorted(c for c, p in self.parent.items() if p == n)

    def _arrange(self, box: Box, layered: list[Layers]) -> None:
        children = self._children(box.name)
        for c in layered:
            if c.containers and box.name not in c.containers:
                continue
            rows = c.rows(box.name if c.containers else None)
            if not c.containers and any(self.parent.get(m) != box.name for row, _ in rows for m in row):
                continue
            placed = {m for row, _ in rows for m in row}
            rest = [m for m in children if m not in placed]
            box.rows, box.layered = rows + ([(rest, False)] if rest else []), len(rows)
            box.badges.append((f"#{c.number}", LINE))
            return
        box.rows = [(children[i : i + 3], False) for i in range(0, len(children), 3)]

    def _measure(self, box: Box) -> None:
        if not box.rows:
            badges = sum(_badge_width(t) + 4 for t, _ in box.badges)
            box.w, box.h = len(box.label) * MONO_W + 2 * PAD + 8 + badges, LEAF_H
            return
        width, height = 0.0, 0.0
        for i, (row, _) in enumerate(box.rows):
            for m in row:
                self._measure(self.boxes[m])
            width = max(width, sum(self.boxes[m].w for m in row) + HGAP * (len(row) - 1))
            height += max(self.boxes[m].h for m in row) + (self._gap(box, i) if i else 0)
        title = len(box.label) * MONO_W + 16 + sum(_badge_width(t) + 4 for t, _ in box.badges)
        box.w, box.h = max(width, title) + 2 * PAD, TITLE_H + height + 2 * PAD

    def _gap(self, box: Box, i: int) -> float:
        """The space above row ``i``: room for an arrow between two layers."""
        return LAYER_GAP if i < box.layered else VGAP

    def size(self) -> tuple[float, float]:
        boxes = [self.boxes[n] for n in self.roots]
        return sum(b.w for b in boxes) + HGAP * (len(boxes) - 1), max(b.h for b in boxes)

    def draw(self, x: float, y: float) -> list[str]:
        out: list[str] = []
        for n in self.roots:
            out += self._draw(self.boxes[n], x, y)
            x += self.boxes[n].w + HGAP
        return out

    def _draw(self, box: Box, x: float, y: float) -> list[str]:
        leaf = not box.rows
        fill = "#ffffff" if leaf else FILLS[box.depth % 2]
        out = [
            f'<g data-module="{escape(box.name)}"><title>{escape(box.name)}</title>',
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="6" fill="{fill}"'
            f' stroke="{LINE}" stroke-width="{1.2 if leaf else 1.5}"/>',
        ]
        if leaf and not box.badges:
            out.append(_text(x + box.w / 2, y + box.h / 2 + 4.5, box.label, font=MONO, anchor="middle"))
        elif leaf:
            out.append(_text(x + PAD + 4, y + box.h / 2 + 4.5, box.label, font=MONO))
        else:
            out.append(_text(x + PAD, y + PAD + 10, box.label, font=MONO, font_weight="bold"))
        right = x + box.w - (8 if leaf else PAD)
        for text, colour in reversed(box.badges):
            svg, w = _badge(right, y + box.h / 2 if leaf else y + PAD + 5, text, colour)
            out.append(svg)
            right -= w + 4
        out.append("</g>")
        if leaf:
            return out
        inner_w, cy = box.w - 2 * PAD, y + PAD + TITLE_H
        previous_bottom = None
        for i, (row, independent) in enumerate(box.rows):
            if i:
                gap = self._gap(box, i)
                if gap == LAYER_GAP and previous_bottom is not None:
                    mid = x + box.w / 2
                    out.append(_arrow(mid, previous_bottom + 2, mid, previous_bottom + gap - 3, ALLOWED, "allowed"))
                cy += gap
            row_w = sum(self.boxes[m].w for m in row) + HGAP * (len(row) - 1)
            cx = x + PAD + (inner_w - row_w) / 2
            row_h = max(self.boxes[m].h for m in row)
            for j, m in enumerate(row):
                child = self.boxes[m]
                out += self._draw(child, cx, cy)
                cx += child.w
                if independent and j < len(row) - 1 and i < box.layered:
                    out.append(_text(cx + HGAP / 2, cy + LEAF_H / 2 + 5, "✗", size=14, anchor="middle", fill=RED))
                cx += HGAP
            cy += row_h
            previous_bottom = cy
        return out


def _module_box(x: float, y: float, name: str) -> tuple[str, float]:
    w = len(name) * MONO_W + 2 * PAD
    return (
        f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{LEAF_H}" rx="6" fill="#ffffff" stroke="{LINE}"'
        f' stroke-width="1.2"/>' + _text(x + w / 2, y + LEAF_H / 2 + 4.5, name, font=MONO, anchor="middle")
    ), w


def _forbidden(c: Forbidden, x: float, y: float, width: float) -> tuple[list[str], float]:
    """One forbidden contract: its name, then source ──✗──▶ targets, then its exceptions."""
    out = [f'<g data-contract="{c.number}"><title>{escape(c.name)}</title>']
    text, h = _paragraph(x, y + 13, f"#{c.number} {c.name}", width)
    out += text
    y += h + 6
    sy = y
    sources_w = 0.0
    for s in c.sources:
        svg, w = _module_box(x, sy, s)
        out.append(svg)
        sources_w = max(sources_w, w)
        sy += LEAF_H + 6
    ax = x + sources_w + 10
    mid = y + LEAF_H / 2
    out.append(_arrow(ax, mid, ax + 64, mid, RED, "forbidden"))
    out.append(_text(ax + 30, mid + 5, "✗", size=16, anchor="middle", fill=RED, font_weight="bold"))
    tx0 = ax + 80
    tx, ty = tx0, y
    for t in c.targets:
        svg, w = _module_box(tx, ty, t)
        if tx > tx0 and tx + w > x + width:
            tx, ty = tx0, ty + LEAF_H + 8
            svg, w = _module_box(tx, ty, t)
        out.append(svg)
        tx += w + 10
    y = max(sy - 6, ty + LEAF_H) + 8
    notes = ["Direct imports only (allow_indirect_imports)."] if c.direct_only else []
    if c.ignore:
        notes.append("Excepted (ignore_imports): " + "; ".join(c.ignore))
    if notes:
        text, h = _paragraph(x, y + 12, " ".join(notes), width, size=12, fill=MUTED)
        out += text
        y += h
    out.append("</g>")
    return out, y + 14


def render(config: dict[str, Any]) -> str:
    """The SVG of a ``[tool.importlinter]`` table (as ``tomllib`` reads it)."""
    found = contracts(config)
    diagram = Diagram([str(r) for r in config.get("root_packages", [])], found)
    dw, dh = diagram.size()
    width = max(MIN_WIDTH, dw + 2 * MARGIN)
    text_w = width - 2 * MARGIN
    body: list[str] = []
    y = MARGIN + 18
    body.append(_text(MARGIN, y, "Import layers and contracts", size=18, font_weight="bold"))
    y += 10
    roots = ", ".join(diagram.roots)
    sub, h = _paragraph(
        MARGIN, y + 14,
        f"Packages {roots}, as pyproject.toml's [tool.importlinter] declares them; lint-imports enforces every"
        " contract in the test command.", text_w, size=12, fill=MUTED,
    )  # fmt: skip
    body += sub
    y += h + 16
    body += diagram.draw(MARGIN + (text_w - dw) / 2, y)
    y += dh + 28

    layered = [c for c in found if isinstance(c, Layers)]
    if layered:
        body.append(_text(MARGIN, y, "Layers (top to bottom; a layer may import only the layers below it)", size=15,
                          font_weight="bold"))  # fmt: skip
        y += 12
        for c in layered:
            where = f" in {', '.join(c.containers)}" if c.containers else ""
            order = "  >  ".join(c.layers)
            exhaustive = " (exhaustive: every module there is in a layer)" if c.exhaustive else ""
            text, h = _paragraph(MARGIN, y + 14, f"#{c.number} {c.name}", text_w)
            body += [f'<g data-contract="{c.number}"><title>{escape(c.name)}</title>', *text]
            y += h
            text, h = _paragraph(MARGIN + 16, y + 13, f"layers{where}: {order}{exhaustive}", text_w - 16, size=12,
                                 font=MONO)  # fmt: skip
            body += [*text, "</g>"]
            y += h + 10
        y += 14

    forbidden = [c for c in found if isinstance(c, Forbidden)]
    if forbidden:
        body.append(_text(MARGIN, y, "Forbidden imports", size=15, font_weight="bold"))
        y += 14
        for c in forbidden:
            svg, y = _forbidden(c, MARGIN, y, text_w)
            body += svg
        y += 12

    others = [c for c in found if isinstance(c, Other)]
    if others:
        body.append(_text(MARGIN, y, "Other contracts", size=15, font_weight="bold"))
        y += 12
        for c in others:
            text, h = _paragraph(MARGIN, y + 14, f"#{c.number} {c.name} ({c.kind}): {', '.join(c.modules)}", text_w)
            body += [f'<g data-contract="{c.number}"><title>{escape(c.name)}</title>', *text, "</g>"]
            y += h + 10
        y += 14

    legend, h = _paragraph(
        MARGIN, y + 12,
        "Blue arrow: the allowed direction between layers. Red ✗ between boxes side by side: independent"
        " siblings, neither imports the other. Red crossed arrow: must not import, directly or indirectly."
        " #n: the contract that arranges a package; #n ✗: the source of a forbidden contract."
        " Drawn by scripts/layers_diagram.py from pyproject.toml.", text_w, size=12, fill=MUTED,
    )  # fmt: skip
    body += legend
    height = y + h + MARGIN
    defs = (
        "<defs>"
        f'<marker id="allowed" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{ALLOWED}"/></marker>'
        f'<marker id="forbidden" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto">'
        f'<path d="M0,0 L10,5 L0,10 z" fill="{RED}"/></marker>'
        "</defs>"
    )
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0f}" height="{height:.0f}"'
        f' viewBox="0 0 {width:.0f} {height:.0f}" role="img" aria-labelledby="layers-title">\n'
        f'<title id="layers-title">Import layers and contracts of {escape(roots)}</title>\n{defs}\n'
        f'<rect width="100%" height="100%" fill="#ffffff"/>\n' + "\n".join(body) + "\n</svg>\n"
    )


def main() -> int:
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    OUTPUT.parent.mkdir(parents=True, exist_ok=True)
    OUTPUT.write_text(render(config))
    print(f"wrote {OUTPUT.relative_to(REPO)} ({len(contracts(config))} contracts)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
