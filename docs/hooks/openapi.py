"""The HTTP API's operations, rendered into ``reference/api.md`` from the app's OpenAPI document at build time.

An MkDocs hook (``hooks:`` in ``mkdocs.yml``). The page's intro is written by hand; the line
``<!-- openapi: operations -->`` in it is replaced with every operation of the document the running app
serves at ``/openapi.json`` (``app.web.openapi.build``), grouped by tag, then every schema they name.
The app is created with a throw-away SQLite file in a temporary folder: making the document opens
no database, reads no content and imports no torch.
"""

from __future__ import annotations

import functools
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # `mkdocs` runs from .venv/bin: the project's packages from the checkout
    sys.path.insert(0, str(REPO))

PAGE = "reference/api.md"
MARKER = "<!-- openapi: operations -->"
METHODS = ("get", "post", "put", "patch", "delete")
REF = "#/components/schemas/"


@functools.cache
def document() -> dict[str, Any]:
    """The app's OpenAPI document, exactly as ``GET /openapi.json`` answers it."""
    from app.config import Settings
    from app.main import create_app

    with tempfile.TemporaryDirectory(prefix="ringlab-openapi-") as tmp:
        settings = Settings(
            data_dir=Path(tmp), database_url=f"sqlite:///{tmp}/openapi.sqlite3", sync_content_on_start=False
        )
        app = create_app(settings)
        try:
            return app.openapi()
        finally:
            app.state.engine.dispose()


def _anchor(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _schema_link(name: str) -> str:
    return f"[`{name}`](#schema-{_anchor(name)})"


def type_of(schema: dict[str, Any]) -> str:
    """A schema in a few words: ``string``, ``integer or null``, ``array of [`CheckOut`]``, ``"a" or "b"``."""
    if "$ref" in schema:
        return _schema_link(schema["$ref"].removeprefix(REF))
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(type_of(s) for s in schema[key])
    if "enum" in schema:
        return " or ".join(f"`{v!r}`" if not isinstance(v, str) else f'`"{v}"`' for v in schema["enum"])
    if "const" in schema:
        return f'`"{schema["const"]}"`' if isinstance(schema["const"], str) else f"`{schema['const']!r}`"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"array of {type_of(schema.get('items', {}))}"
    if kind == "object" and "additionalProperties" in schema and isinstance(schema["additionalProperties"], dict):
        return f"object of {type_of(schema['additionalProperties'])}"
    return f"{kind} ({schema['format']})" if "format" in schema else str(kind)


def _limits(schema: dict[str, Any]) -> str:
    words = {
        "minLength": "at least {} characters",
        "maxLength": "at most {} characters",
        "minimum": "≥ {}",
        "maximum": "≤ {}",
        "exclusiveMinimum": "> {}",
        "exclusiveMaximum": "< {}",
        "minItems": "at least {} items",
        "maxItems": "at most {} items",
        "pattern": "matches `{}`",
    }
    found = [text.format(schema[key]) for key, text in words.items() if key in schema]
    if "default" in schema:
        found.append(f"default `{schema['default']!r}`")
    return "; ".join(found)


def _operation(method: str, path: str, op: dict[str, Any]) -> list[str]:
    lines = [f"### `{method.upper()} {path}` {{#{_anchor(method + ' ' + path)}}}", ""]
    if op.get("summary"):
        lines += [f"**{op['summary']}.** " + " ".join(op.get("description", "").split()), ""]
    auth = "bearer token (`Authorization: Bearer <token>`)" if op.get("security") else "none"
    lines += [f"Authentication: {auth}.", ""]
    params = op.get("parameters", [])
    if params:
        lines += ["| Parameter | In | Type | Required | Notes |", "|---|---|---|---|---|"]
        for p in params:
            schema = p.get("schema", {})
            notes = "; ".join(filter(None, (_cell(p.get("description", "")), _limits(schema))))
            required = "yes" if p.get("required") else "no"
            lines.append(f"| `{p['name']}` | {p['in']} | {type_of(schema)} | {required} | {notes} |")
        lines.append("")
    body = op.get("requestBody")
    if body:
        kinds = ", ".join(f"{type_of(c.get('schema', {}))} (`{media}`)" for media, c in body["content"].items())
        lines += [f"Request body{'' if body.get('required') else ' (optional)'}: {kinds}.", ""]
    lines += ["| Status | Meaning | Body |", "|---|---|---|"]
    for status, response in sorted(op.get("responses", {}).items()):
        content = response.get("content", {})
        shown = ", ".join(type_of(c.get("schema", {})) for c in content.values()) or "none"
        headers = ", ".join(f"`{h}` header" for h in response.get("headers", {}))
        meaning = _cell(response.get("description", "")) + (f"; {headers}" if headers else "")
        lines.append(f"| {status} | {meaning} | {shown} |")
    return [*lines, ""]


def _schema(name: str, schema: dict[str, Any]) -> list[str]:
    lines = [f"### `{name}` {{#schema-{_anchor(name)}}}", ""]
    if schema.get("description"):
        lines += [" ".join(schema["description"].split()), ""]
    props = schema.get("properties", {})
    if not props:
        return [*lines, f"Type: {type_of(schema)}.", ""]
    required = set(schema.get("required", []))
    lines += ["| Field | Type | Required | Notes |", "|---|---|---|---|"]
    for field, prop in props.items():
        notes = "; ".join(filter(None, (_cell(prop.get("description", "")), _limits(prop))))
        lines.append(f"| `{field}` | {type_of(prop)} | {'yes' if field in required else 'no'} | {notes} |")
    return [*lines, ""]


def render(doc: dict[str, Any]) -> str:
    """The document's operations by tag (in the order the app lists them), then its schemas by name."""
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in doc.get("paths", {}).items():
        for method in METHODS:
            if method in operations:
                op = operations[method]
                by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    count = sum(map(len, by_tag.values()))
    lines = [
        "## Operations {#operations}",
        "",
        f"{count} operations, {doc['info']['title']} API version {doc['info']['version']} "
        f"(OpenAPI {doc.get('openapi', '?')}).",
        "",
    ]
    for tag, ops in by_tag.items():
        title = tag.removeprefix("api: ").capitalize()
        lines += [f"### {title} {{#tag-{_anchor(title)}}}", ""]
        lines += [f"- [`{m.upper()} {p}`](#{_anchor(m + ' ' + p)}): {op.get('summary', '')}" for m, p, op in ops]
        lines.append("")
        lines += [line.replace("### ", "#### ", 1) if line.startswith("### ") else line
                  for m, p, op in ops for line in _operation(m, p, op)]  # fmt: skip
    lines += ["## Schemas {#schemas}", ""]
    for name, schema in sorted(doc.get("components", {}).get("schemas", {}).items()):
        lines += _schema(name, schema)
    return "\n".join(lines)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri != PAGE:
        return markdown
    if MARKER not in markdown:
        from mkdocs.exceptions import PluginError

        raise PluginError(f"docs/{PAGE} must hold the line {MARKER}: the API's operations are written there")
    return markdown.replace(MARKER, render(document()))
