"""Exercise pages in-process on both backends: contents, filters, badges, answer boxes (htmx), notes."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.records import Exercise
from app.db import utcnow
from app.labs.models import Submission, SubmissionStatus
from tests.factories import csrf_token, make_user, sign_in

HX = {"HX-Request": "true"}
SET = "/exercises/ch26-exercises"
EX = f"{SET}/ex-26-1"


def post(client: TestClient, url: str, data: dict[str, str], *, htmx: bool = True):  # type: ignore[no-untyped-def]
    headers = {**HX, "X-CSRF-Token": csrf_token(client)} if htmx else {}
    body = data if htmx else {**data, "csrf_token": csrf_token(client)}
    return client.post(url, data=body, headers=headers, follow_redirects=False)


def test_set_page_has_contents_filters_and_links(client: TestClient) -> None:
    page = client.get(SET)
    assert page.status_code == 200
    assert '<nav class="contents" aria-label="Contents">' in page.text
    assert '<a href="#ex-26-1">26.1</a>' in page.text
    assert 'name="section"' in page.text and 'name="difficulty"' in page.text
    assert "27 of 27 exercises" in page.text
    assert f'href="{EX}"' in page.text and "6 parts to answer" in page.text


def test_filters_by_section_and_difficulty_as_a_partial(client: TestClient) -> None:
    page = client.get(SET, params={"section": "cost-estimation"}, headers=HX)
    assert page.text.lstrip().startswith('<div id="listing">')
    assert "<html" not in page.text
    assert re.findall(r'<a href="#(ex-[\d-]+)">', page.text) == ["ex-26-20", "ex-26-21", "ex-26-22"]
    hard = client.get(SET, params={"difficulty": "4"})
    assert re.findall(r'<a href="#(ex-[\d-]+)">', hard.text) == ["ex-26-26", "ex-26-27"]
    assert "2 of 27 exercises" in hard.text and "clear filters" in hard.text
    none = client.get(SET, params={"section": "cost-estimation", "difficulty": "4"})
    assert "No exercise matches these filters." in none.text
    assert client.get(SET, params={"difficulty": "hard"}).status_code == 422


def test_anonymous_reader_sees_parts_but_no_box(client: TestClient) -> None:
    page = client.get(EX)
    assert page.status_code == 200
    assert "Global batch size" in page.text and "Sign in</a> to answer" in page.text
    assert 'name="value"' not in page.text


def test_values_and_explanations_stay_secret_until_solved_or_shown(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    sign_in(client, "ada")
    exercises = session.scalars(select(Exercise).where(Exercise.retired_at.is_(None))).all()
    with_parts = [e for e in exercises if e.parts]
    assert len(with_parts) >= 15
    for ex in with_parts:
        page = client.get(f"/exercises/{ex.set_id}/{ex.id}").text
        listing = client.get(f"/exercises/{ex.set_id}").text
        for part in ex.parts:
            assert part["explanation_html"] not in page and part["explanation_html"] not in listing, (ex.id, part["id"])
            assert f'id="part-{part["id"]}"' in page
    # The numbers of 26.1 in particular, as they would be shown once solved.
    parts = client.get(EX).text.split('<section class="parts"', 1)[1]
    for secret in ("2,048", "625", "3.64", "1.456", "17.01", "6.804", "Each of the", "You gave up", "Solved"):
        assert secret not in parts, secret


def test_answering_swaps_the_part_box(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    sign_in(client, "ada")
    url = f"{EX}/parts/a-global-batch/answer"
    wrong = post(client, url, {"value": "2000"})
    assert wrong.status_code == 200
    assert wrong.text.lstrip().startswith('<div class="part" id="part-a-global-batch">')
    assert "Not quite: 2000 is not right" in wrong.text and "(1 attempt)" in wrong.text
    assert "Each of the" not in wrong.text
    bad = post(client, url, {"value": "lots"})
    assert bad.status_code == 422 and "&#39;lots&#39; is not a number" in bad.text and 'aria-invalid="true"' in bad.text
    right = post(client, url, {"value": "2.048e3"})
    assert right.status_code == 200 and "is-solved" in right.text and "✓ Correct" in right.text
    # The exercise's badges come along, out of band.
    assert '<p class="badges" id="exercise-badges" hx-swap-oob="true">' in right.text
    assert "1/6 parts solved" in right.text
    assert "2,048" in right.text and "Each of the" in right.text and "2 attempts" in right.text
    # The page and the set's badges follow.
    assert "1/6 parts solved" in client.get(EX).text
    assert "1/6 parts solved" in client.get(SET).text


def test_answering_without_htmx_redirects_or_shows_the_error(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    sign_in(client, "ada")
    url = f"{EX}/parts/a-sync-steps/answer"
    ok = post(client, url, {"value": "625"}, htmx=False)
    assert ok.status_code == 303 and ok.headers["location"] == f"{EX}#part-a-sync-steps"
    bad = post(client, f"{EX}/parts/b-fraction/answer", {"value": "1,5"}, htmx=False)
    assert bad.status_code == 422 and "<html" in bad.text and "Use a dot for decimals" in bad.text


def test_show_the_answer(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    sign_in(client, "ada")
    shown = post(client, f"{EX}/parts/c-fraction/give-up", {})
    assert shown.status_code == 200 and "You gave up" in shown.text and "6.804" in shown.text
    assert "is-given-up" in shown.text and 'name="value"' not in shown.text


def test_answering_needs_sign_in_and_a_real_part(client: TestClient, session: Session) -> None:
    anonymous = post(client, f"{EX}/parts/a-global-batch/answer", {"value": "1"}, htmx=False)
    assert anonymous.status_code == 303 and anonymous.headers["location"].startswith("/signin")
    make_user(session, "ada")
    sign_in(client, "ada")
    assert post(client, f"{EX}/parts/nope/answer", {"value": "1"}).status_code == 404
    assert post(client, f"{SET}/ex-nope/parts/a/answer", {"value": "1"}).status_code == 404
    assert client.get(f"{SET}/ex-35-9").status_code == 404  # not in this set
    assert post(client, f"{SET}/ex-35-9/parts/m1/answer", {"value": "50"}).status_code == 404
    assert post(client, f"{SET}/ex-35-9/notes", {"notes": "x"}).status_code == 404
    assert client.post(f"{EX}/parts/a-global-batch/answer", data={"value": "2048"}).status_code == 403  # no CSRF


def test_notes_and_done_are_private(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    make_user(session, "bob")
    sign_in(client, "ada")
    url = f"{SET}/ex-26-5"
    saved = post(client, url + "/notes", {"notes": "13B: 3D parallelism <b>bold</b>"})
    assert saved.status_code == 200 and saved.text.lstrip().startswith('<section class="notes"')
    assert "Notes saved." in saved.text and "&lt;b&gt;bold&lt;/b&gt;" in saved.text
    done = post(client, url + "/done", {"done": "true"})
    assert "Marked as done." in done.text and "Mark as not done" in done.text
    assert '<span class="badge badge-done">done</span>' in client.get(SET).text
    client.post("/signout", data={"csrf_token": csrf_token(client)})
    sign_in(client, "bob")
    page = client.get(url).text
    assert "3D parallelism" not in page and "Mark as done" in page


def test_lab_badge_shows_the_best_score(client: TestClient, session: Session) -> None:
    ada = make_user(session, "ada")
    now = utcnow()
    for score in (4, 9, 6):
        session.add(
            Submission(
                user_id=ada.id, lab_id="ring-allreduce", code="x", status=SubmissionStatus.graded, score=score,
                max_score=10, submitted_at=now, queued_at=now,
            )
        )  # fmt: skip
    session.commit()
    sign_in(client, "ada")
    page = client.get("/exercises/ch35-exercises")
    assert "lab best 9/10" in page.text
    assert "lab not tried" in page.text  # collectives-p2p, for 35.1
    assert "lab best 9/10" in client.get("/exercises/ch35-exercises/ex-35-2").text


def test_after_checking_focus_goes_to_the_field_or_the_verdict(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    sign_in(client, "ada")
    url = f"{EX}/parts/a-global-batch/answer"
    wrong = post(client, url, {"value": "2000"}).text
    # Wrong: the field takes focus again, described by the verdict the page's announcer says.
    assert 'aria-describedby="wrong-a-global-batch" data-autofocus required>' in wrong
    assert '<p class="wrong" id="wrong-a-global-batch" data-announce>Not quite: 2000 is not right.' in wrong
    bad = post(client, url, {"value": "lots"}).text
    assert 'aria-invalid="true" aria-describedby="error-a-global-batch" data-autofocus required>' in bad
    right = post(client, url, {"value": "2048"}).text
    assert (
        '<p class="verdict" tabindex="-1" data-autofocus data-announce>' in right
        and "data-autofocus required" not in right
    )


HINT_TEXT = "one pass over all 1.28M images"  # from the hint of 26.1 a-sync-steps


def test_the_answer_box_keeps_what_was_typed(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    sign_in(client, "ada")
    url = f"{EX}/parts/a-global-batch/answer"
    wrong = post(client, url, {"value": "2000"}).text
    assert 'value="2000" aria-describedby="wrong-a-global-batch" data-autofocus' in wrong
    bad = post(client, url, {"value": "lots of samples"}).text
    assert 'value="lots of samples" aria-invalid="true"' in bad  # not the earlier 2000
    page = post(client, url, {"value": "2,0,48"}, htmx=False)
    assert page.status_code == 422 and 'value="2,0,48"' in page.text
    right = post(client, url, {"value": "2,048"}).text
    assert '<input type="text" id="answer-a-global-batch-kept" value="2,048" readonly>' in right
    assert '<label for="answer-a-global-batch-kept">Your answer in samples</label>' in right
    assert 'name="value"' not in right  # nothing left to send


def test_a_hint_is_offered_after_two_wrong_answers(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    sign_in(client, "ada")
    url = f"{EX}/parts/a-sync-steps"
    assert HINT_TEXT not in client.get(EX).text
    assert client.get(f"{url}/hint", headers=HX).status_code == 409
    first = post(client, f"{url}/answer", {"value": "600"}).text
    assert "Show a hint" not in first and HINT_TEXT not in first
    second = post(client, f"{url}/answer", {"value": "650"}).text
    assert "A hint is offered below." in second and "Show a hint" in second and HINT_TEXT not in second
    assert f'hx-get="{url}/hint"' in second
    hint = client.get(f"{url}/hint", headers=HX)
    assert hint.status_code == 200 and hint.text.startswith('<div class="hint" id="hint-a-sync-steps"')
    assert 'tabindex="-1" data-autofocus data-announce' in hint.text and HINT_TEXT in hint.text
    assert 'name="hint" value="shown" form="answer-a-sync-steps"' in hint.text
    # Without JavaScript the button's form leads to the page with the hint open.
    plain = client.get(f"{url}/hint", follow_redirects=False)
    assert plain.status_code == 303 and plain.headers["location"] == f"{EX}?hint=a-sync-steps#hint-a-sync-steps"
    assert HINT_TEXT in client.get(EX, params={"hint": "a-sync-steps"}).text
    assert HINT_TEXT not in client.get(EX, params={"hint": "a-global-batch"}).text
    # An opened hint stays open after the next wrong answer; the value and explanation stay hidden.
    third = post(client, f"{url}/answer", {"value": "640", "hint": "shown"}).text
    assert HINT_TEXT in third and "Show a hint" not in third
    assert "625" not in third and "each ending with one gradient all-reduce" not in third
    # Another student has not earned it.
    client.post("/signout", data={"csrf_token": csrf_token(client)})
    make_user(session, "bob")
    sign_in(client, "bob")
    refused = client.get(f"{url}/hint", headers=HX)
    assert refused.status_code == 409 and "after 2 wrong answers" in refused.text


def test_show_the_answer_marks_the_part_as_given_up(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    sign_in(client, "ada")
    url = f"{EX}/parts/a-global-batch"
    before = client.get(EX).text
    assert "Show the answer" in before and "processes its own local batch" not in before
    assert 'hx-confirm="Show the answer? This part will be marked as given up' in before
    gave_up = post(client, f"{url}/give-up", {})
    assert gave_up.status_code == 200 and "You gave up</strong>: the answer is" in gave_up.text
    assert "2,048" in gave_up.text and "processes its own local batch" in gave_up.text
    assert "this part does not count as solved" in gave_up.text
    assert '<span class="badge badge-gave-up">gave up on 1</span>' in gave_up.text  # the badges, out of band
    # Answered right afterwards: still given up, not solved.
    after = post(client, f"{url}/answer", {"value": "2048"})
    assert "You gave up" in after.text and "✓" not in after.text
    assert "0/6 parts solved" in client.get(SET).text and "gave up on 1" in client.get(SET).text
    plain = post(client, f"{EX}/parts/a-sync-steps/give-up", {}, htmx=False)
    assert plain.status_code == 303 and plain.headers["location"] == f"{EX}#part-a-sync-steps"
    assert client.post(f"{url}/give-up", headers=HX).status_code == 403  # no CSRF token
