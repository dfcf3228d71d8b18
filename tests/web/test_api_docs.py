"""/api/docs serves Swagger UI from static/vendor (npm swagger-ui-dist), never from a CDN."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient

from tests.conftest import REPO


def test_api_docs_use_the_vendored_swagger_ui(client: TestClient) -> None:
    page = client.get("/api/docs")
    assert page.status_code == 200
    assert "content-security-policy" in page.headers and "script-src 'self'" in page.headers["content-security-policy"]
    assert 'src="/static/vendor/swagger-ui/swagger-ui-bundle.js"' in page.text
    assert 'href="/static/vendor/swagger-ui/swagger-ui.css"' in page.text
    assert "http" not in page.text.split("<body>")[0]  # nothing from elsewhere in the head
    for asset in ("/static/vendor/swagger-ui/swagger-ui-bundle.js", "/static/js/api-docs.js"):
        assert client.get(asset).status_code == 200, asset
    assert "/api/docs" not in client.get("/openapi.json").json()["paths"]


def test_swagger_ui_is_pinned_in_package_json() -> None:
    pinned = json.loads((REPO / "package.json").read_text())["dependencies"]["swagger-ui-dist"]
    assert pinned[0].isdigit(), f"pin an exact version, not {pinned!r}"
    lock = json.loads((REPO / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/swagger-ui-dist"]["version"] == pinned
