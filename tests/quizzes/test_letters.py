"""Option letters: A, B, C, D in the order shown, whatever the shuffle; the authored key is stored and scored."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import Role
from app.content.records import Question, Quiz
from app.db import utcnow
from app.quizzes import attempts, scoring, service
from tests.factories import api_token, make_user, sign_in

QID = "m202-q01"  # the first question of module-202, so it opens first


def _seed_that_moves_the_key(question: Question) -> tuple[int, list[str]]:
    """A seed whose shuffle puts every option of ``question`` at another letter (the key at another one too)."""
    keys = [o["key"] for o in question.options]
    for seed in range(1000):
        order = scoring.option_order(keys, seed=seed, question_id=question.id, shuffle=True)
        if all(k != keys[n] for n, k in enumerate(order)):
            return seed, order
    raise AssertionError("no seed deranges the options")


Shuffled = tuple[int, int, list[str], Question]


@pytest.fixture
def shuffled(session: Session) -> Shuffled:
    """A student's open module-202 attempt with a known shuffle: (user id, attempt id, authored keys in shown order,
    the first question)."""
    question = session.get(Question, QID)
    assert question is not None
    user = make_user(session, "letters")
    attempt, _ = attempts.start_attempt("module-202", user.id, session=session, now=utcnow())
    attempt.seed, order = _seed_that_moves_the_key(question)
    session.commit()
    return user.id, attempt.id, order, question


def _shown(html: str) -> list[tuple[str, str]]:
    """(shown letter, radio value) of each option of the question on an attempt page, in page order."""
    return re.findall(r'value="([A-Z])"[^>]*>\s*<span class="option-key">([A-Z])</span>', html)


def _review_letters(html: str, number: int) -> list[str]:
    article = html[html.index(f'id="review-{number}"') :]
    article = article[: article.index("</article>")]
    return re.findall(r'<span class="option-key">([A-Z])</span>', article)


def test_an_attempt_shows_a_to_d_in_order_and_stores_the_authored_key(
    client: TestClient, session: Session, shuffled: Shuffled
) -> None:
    user_id, attempt_id, order, question = shuffled
    sign_in(client, "letters")
    page = client.get(f"/quizzes/attempts/{attempt_id}?q=1").text
    options = _shown(page)
    assert [label for _, label in options] == ["A", "B", "C", "D"]
    assert [value for value, _ in options] == order  # each radio still sends its option's authored key
    texts = {o["key"]: o["html"] for o in question.options}
    positions = [page.index(texts[k]) for k in order]
    assert positions == sorted(positions)  # the texts follow the shuffle

    # Choose the right option: it is shown under another letter than its authored one.
    shown_key = "ABCD"[order.index(question.answer)]
    assert shown_key != question.answer
    attempts.save_answer(attempt_id, user_id, QID, question.answer, session=session, now=utcnow())
    attempts.submit(attempt_id, user_id, session=session, now=utcnow())
    session.commit()
    attempt = attempts.get_attempt(attempt_id, user_id, session=session, now=utcnow())
    assert attempt.score == 1  # scored against the authored key, whatever letter it was shown under
    assert attempt.result is not None and attempt.result["marks"][0] | {} == {
        "id": QID, "choice": question.answer, "answer": question.answer, "correct": True,
    }  # fmt: skip

    result = client.get(f"/quizzes/attempts/{attempt_id}/result").text
    assert _review_letters(result, 1) == ["A", "B", "C", "D"]
    review = result[result.index('id="review-1"') :]
    review = review[: review.index("</article>")]
    chosen = re.search(r'<li class="is-answer is-choice">\s*<span class="option-key">([A-Z])</span>', review)
    assert chosen and chosen.group(1) == shown_key  # the same letter as on the attempt page
    assert "as authored" not in result  # only an instructor is shown the authored letters

    # The API keeps the stable ids and adds the letters shown.
    body = client.get(f"/api/v1/attempts/{attempt_id}", headers=api_token(client, "letters")).json()
    first = next(q for q in body["questions"] if q["id"] == QID)
    assert [(o["key"], o["label"]) for o in first["options"]] == list(zip(order, "ABCD", strict=True))
    mark = next(m for m in body["result"]["questions"] if m["id"] == QID)
    assert (mark["choice"], mark["answer"]) == (question.answer, question.answer)
    assert (mark["choice_label"], mark["answer_label"]) == (shown_key, shown_key)


def test_the_instructor_sees_the_students_letters_and_the_authored_ones(
    client: TestClient, session: Session, shuffled: Shuffled
) -> None:
    user_id, attempt_id, order, question = shuffled
    attempts.save_answer(attempt_id, user_id, QID, question.answer, session=session, now=utcnow())
    attempts.submit(attempt_id, user_id, session=session, now=utcnow())
    make_user(session, "letters-prof", role=Role.admin)
    session.commit()
    sign_in(client, "letters-prof")
    page = client.get(f"/instructor/attempts/{attempt_id}").text
    assert _review_letters(page, 1) == ["A", "B", "C", "D"]
    for label, key in zip("ABCD", order, strict=True):
        assert f'<span class="option-key">{label}</span>' in page
        assert f'<span class="meta as-authored">({key} as authored)</span>' in page

    stats = client.get("/quizzes/module-202/statistics").text
    assert 'data-testid="as-authored">Options are lettered as authored. Students saw them shuffled' in stats
    assert "Options chosen (as authored)" in stats
    row = stats[stats.index(question.prompt_html[:40]) :]
    row = row[: row.index("</tr>")]
    # The statistics keep the authored letters, so a count follows its option whatever letter was shown.
    assert re.findall(r'<span class="option-key">([A-Z])</span>', row) == ["A", "B", "C", "D"]
    assert f'<span class="is-answer">{question.answer}: 1</span>' in row


def test_an_unshuffled_quiz_keeps_the_authored_letters(session: Session, shuffled: Shuffled) -> None:
    user_id, attempt_id, order, _ = shuffled
    quiz = session.get(Quiz, "module-202")
    assert quiz is not None
    attempt = attempts.get_attempt(attempt_id, user_id, session=session, now=utcnow())
    view = service.attempt_page(attempt, session=session, now=utcnow()).questions[0]
    assert [o.key for o in view.options] == order and [o.label for o in view.options] == ["A", "B", "C", "D"]
    assert view.label_of(order[2]) == "C" and view.label_of(None) == "" and view.label_of("Z") == ""
    quiz.shuffle_options = False
    view = service.attempt_page(attempt, session=session, now=utcnow()).questions[0]
    assert [(o.key, o.label) for o in view.options] == [("A", "A"), ("B", "B"), ("C", "C"), ("D", "D")]


LETTER = re.compile(r"\b(?:option|options|answer|answers|keyed|choice|chose)\s+\(?[A-H]\b", re.IGNORECASE)


def test_no_explanation_or_erratum_of_a_shuffled_quiz_names_an_option_by_letter(session: Session) -> None:
    """Letters move with the shuffle: an explanation or a "Corrected:" note names the option's text instead."""
    shuffled = set(session.scalars(select(Quiz.id).where(Quiz.shuffle_options.is_(True))))
    assert {"module-202", "ch35-quiz"} <= shuffled
    found = []
    for q in session.scalars(select(Question).where(Question.quiz_id.in_(shuffled))):
        texts = [q.source.get("explanation", "")] + [e.get("note", "") for e in q.source.get("errata", [])]
        found += [(q.id, m.group(0)) for text in texts for m in LETTER.finditer(text)]
    assert found == []
