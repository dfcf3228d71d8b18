"""Checks and reference solutions never reach a student: no page or API response contains their code."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from labs.spec import load_labs
from tests.conftest import CONTENT_DIR
from tests.factories import api_token, make_user, sign_in
from tests.labs_app.conftest import secret_files, unique


def secret_lines() -> list[str]:
    """Distinctive lines of checks.py and solution.py: long enough to be telling, absent from public files."""
    public = "".join(
        p.read_text()
        for p in (CONTENT_DIR / "labs").glob("*/*")
        if p.name in ("starter.py", "statement.md", "lab.yaml")
    )
    lines = {line.strip() for path in secret_files() for line in path.read_text().splitlines()}
    return sorted(line for line in lines if len(line) >= 24 and line not in public and not line.startswith("#"))


def test_the_secret_line_list_is_not_empty() -> None:
    lines = secret_lines()
    assert len(lines) > 30
    assert any("def cases" in line for line in lines)
    # Trusted helpers beside checks.py count too.
    assert {"timing.py", "schedule.py"} <= {p.name for p in secret_files()}
    assert any("def replay(" in line for line in lines)


def test_no_response_contains_checks_or_solutions(client: TestClient, session: Session) -> None:
    name = unique("secret")
    make_user(session, name)
    sign_in(client, name)
    auth = api_token(client, name)
    sid = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "x = 1\n"}, headers=auth).json()["id"]
    responses = [
        client.get(path)
        for path in (
            "/labs",
            "/exercises",
            "/exercises/ch35-exercises",
            f"/labs/submissions/{sid}",
            "/openapi.json",
        )
    ]
    for lab in sorted(load_labs(CONTENT_DIR / "labs")):
        responses += [
            client.get(f"/labs/{lab}"),
            client.get(f"/labs/{lab}/starter.py"),
            client.get(f"/api/v1/labs/{lab}"),
        ]
        trusted = [p.name for p in secret_files() if p.parent.name == lab]
        assert {"checks.py", "solution.py"} <= set(trusted)
        responses += [client.get(f"/labs/{lab}/{name}") for name in trusted]
        # The public files are served, and only they: asking for a trusted file by that route is 404.
        asked = [client.get(f"/labs/{lab}/public/{name}") for name in (*trusted, "lab.yaml")]
        assert all(r.status_code == 404 for r in asked), [r.url for r in asked if r.status_code != 404]
        responses += asked
    responses += [client.get("/api/v1/labs"), client.get(f"/api/v1/submissions/{sid}", headers=auth)]
    text = "\n".join(r.text for r in responses)
    leaked = [line for line in secret_lines() if line in text]
    assert not leaked, leaked[:5]
    assert all(r.status_code in (200, 404) for r in responses)
