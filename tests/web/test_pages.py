"""Public content pages, rendered in-process against both database backends."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

from app.content.models import ContentTree


def test_home_shows_live_counts(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert "<strong>89</strong> cards" in page.text
    assert "<strong>51</strong> exercises" in page.text


def test_quiz_list_and_intro(client: TestClient) -> None:
    listing = client.get("/quizzes")
    assert listing.status_code == 200
    assert "Module 202 Quiz: Distributed Training at Scale" in listing.text
    assert "25 questions · 5 sections · pass at 80% · 60 minutes" in listing.text
    intro = client.get("/quizzes/module-202")
    assert intro.status_code == 200
    assert "80% (20/25)" in intro.text
    assert "Fundamentals (7 questions)" in intro.text
    assert "Ready for production distributed training" in intro.text


def test_quiz_intro_never_shows_questions_answers_or_explanations(
    client: TestClient, content_tree: ContentTree
) -> None:
    quiz = next(q for q in content_tree.quizzes if q.id == "module-202")
    page = client.get("/quizzes/module-202").text
    for question in quiz.questions:
        assert question.explanation.strip()[:60] not in page
        assert question.prompt.strip()[:60] not in page


def test_exercise_set_page_renders_math_and_stars(client: TestClient) -> None:
    page = client.get("/exercises/ch26-exercises")
    assert page.status_code == 200
    assert "<math" in page.text
    # The only dollar signs left are the five prices the authors escaped (\$50,000 ...).
    assert re.sub(r"<math.*?</math>", "", page.text, flags=re.S).count("$") == 5
    assert page.text.count('class="exercise"') == 27
    assert "★★★★" in page.text


def test_deck_page_lists_every_card(client: TestClient) -> None:
    page = client.get("/flashcards/mire-dis-train")
    assert page.status_code == 200
    assert page.text.count('class="card"') == 89


def test_unknown_items_are_friendly_404s(client: TestClient) -> None:
    for path in ("/quizzes/nope", "/exercises/nope", "/flashcards/nope", "/no-such-page"):
        response = client.get(path)
        assert response.status_code == 404, path
        assert "Not found" in response.text
        assert "Traceback" not in response.text


def test_security_headers(client: TestClient) -> None:
    headers = client.get("/").headers
    assert "script-src 'self'" in headers["content-security-policy"]
    assert "frame-ancestors 'none'" in headers["content-security-policy"]
    assert headers["referrer-policy"] == "same-origin"


def test_healthz_ok_with_content(client: TestClient) -> None:
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["status"] == "ok"
    assert body["database"] == {"ok": True, "reachable": True, "writable": True}
    assert body["content"]["ok"] is True and len(body["content"]["digest"]) == 64
    assert body["workers"]["ok"] is True


def test_server_error_is_a_friendly_page_without_a_traceback(app) -> None:  # type: ignore[no-untyped-def]
    def boom() -> None:
        raise RuntimeError("secret internals: DATABASE_URL=postgresql://user:pw@db/x")

    app.add_api_route("/boom", boom)
    with TestClient(app, raise_server_exceptions=False) as client:
        response = client.get("/boom")
    assert response.status_code == 500
    assert "Something went wrong on our side" in response.text
    assert "Traceback" not in response.text and "secret internals" not in response.text
    assert "content-security-policy" in response.headers
