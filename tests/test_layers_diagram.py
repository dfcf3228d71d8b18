"""docs/img/layers.svg is drawn from pyproject.toml's import contracts and names every one of them."""

from __future__ import annotations

import copy
import tomllib
import xml.etree.ElementTree as ET
from typing import Any

import pytest

from scripts.layers_diagram import OUTPUT, PYPROJECT, render

SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture
def config() -> dict[str, Any]:
    return tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]


def texts(svg: str) -> list[str]:
    """Every <text> of the picture as one line (a wrapped paragraph's lines joined by spaces)."""
    root = ET.fromstring(svg)
    return [" ".join(part.strip() for part in t.itertext() if part.strip()) for t in root.iter(f"{SVG}text")]


def test_the_diagram_names_every_contract_and_every_layer(config: dict[str, Any]) -> None:
    shown = texts(render(config))
    words = "\n".join(shown)
    for number, contract in enumerate(config["contracts"], start=1):
        assert f"#{number} {contract['name']}" in shown
        for layer in contract.get("layers", []):
            assert layer in words, f"layer {layer!r} of contract {number} is not drawn"
        for module in contract.get("source_modules", []) + contract.get("forbidden_modules", []):
            assert module in shown, f"{module} of contract {number} has no box"
        for exception in contract.get("ignore_imports", []):
            assert exception in words


def test_a_contract_added_to_the_config_appears_in_the_diagram(config: dict[str, Any]) -> None:
    changed = copy.deepcopy(config)
    changed["contracts"] += [
        {"name": "Reports never import the quizzes' views", "type": "forbidden",
         "source_modules": ["app.reports"], "forbidden_modules": ["app.quizzes.views"], "allow_indirect_imports": True},
        {"name": "The worker's queue sits above its sandbox", "type": "layers",
         "containers": ["labs.host"], "layers": ["queue", "sandbox"]},
        {"name": "Quizzes and flashcards stay apart", "type": "independence",
         "modules": ["app.quizzes", "app.flashcards"]},
    ]  # fmt: skip
    shown = texts(render(changed))
    words = "\n".join(shown)
    assert "#7 Reports never import the quizzes' views" in shown
    assert "app.quizzes.views" in shown
    assert "Direct imports only (allow_indirect_imports)." in words
    assert "#8 The worker's queue sits above its sandbox" in shown
    assert {"queue", "sandbox"} <= set(shown)  # the new layers are boxes inside labs.host
    assert "#9 Quizzes and flashcards stay apart (independence): app.quizzes, app.flashcards" in shown
    assert "#7 Reports never import the quizzes' views" not in texts(render(config))


def test_the_committed_picture_is_the_one_pyproject_gives(config: dict[str, Any]) -> None:
    assert OUTPUT.read_text() == render(config), (
        "docs/img/layers.svg is out of date with [tool.importlinter]: run .venv/bin/python scripts/layers_diagram.py"
    )
