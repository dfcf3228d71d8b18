"""The help page: reachable from every page, signed in or not, and explaining every status the code has."""

from __future__ import annotations

import re
import typing

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.labs.models import SubmissionStatus
from labs.verdict import Status
from tests.factories import make_user, sign_in


def test_help_explains_every_status_the_code_has(client: TestClient) -> None:
    page = client.get("/help")
    assert page.status_code == 200
    for status in SubmissionStatus:
        assert f'<dt id="status-{status.value}"><code>{status.value}</code></dt>' in page.text, status
    for verdict in typing.get_args(Status):
        assert f'<dt id="verdict-{verdict}"><code>{verdict}</code></dt>' in page.text, verdict
    assert page.text.count("<dd>") == len(SubmissionStatus) + len(typing.get_args(Status))
    assert 'href="/api/docs"' in page.text and "poll_after_s" in page.text
    # Every section of the contents is on the page.
    for anchor in re.findall(r'<a href="#([a-z-]+)">', page.text):
        assert f'id="{anchor}"' in page.text, anchor


@pytest.mark.parametrize("path", ["/", "/labs", "/quizzes", "/flashcards", "/exercises", "/signin", "/help"])
def test_every_page_links_to_help(client: TestClient, session: Session, path: str) -> None:
    signed_out = client.get(path, follow_redirects=False)
    if signed_out.status_code == 200:
        assert '<a href="/help"' in signed_out.text
    make_user(session, f"helpful{path.replace('/', '-')}")
    sign_in(client, f"helpful{path.replace('/', '-')}")
    page = client.get(path)
    assert page.status_code == 200 and '<a href="/help"' in page.text
    assert ('<a href="/help" aria-current="page">' in page.text) == (path == "/help")
