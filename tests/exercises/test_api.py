"""The exercises JSON API on both backends: parts without values, answers checked on the server."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from tests.factories import api_token, make_user

URL = "/api/v1/exercises/ex-26-1"


def test_exercise_lists_parts_without_values(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    body = client.get(URL, headers=auth).json()
    assert body["id"] == "ex-26-1" and body["number"] == "26.1"
    assert set(body) == {"id", "number", "parts"}
    assert [p["id"] for p in body["parts"]][:2] == ["a-global-batch", "a-sync-steps"]
    fields = {"id", "prompt", "unit", "status", "solved", "gave_up", "attempts", "hint", "value", "explanation"}
    assert all(set(p) == fields for p in body["parts"])
    assert body["parts"][3]["unit"] == "%" and not any(p["solved"] for p in body["parts"])
    # Before the part is solved or given up: no value, no explanation, no hint (none of their text either).
    assert all(p["value"] is p["explanation"] is p["hint"] is None for p in body["parts"])
    assert all(p["status"] == "not tried" for p in body["parts"])
    text = client.get(URL, headers=auth).text
    assert "2048" not in text and "Each of the" not in text and "local batch" not in text


def test_answering(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    answer = f"{URL}/parts/b-fraction/answer"
    wrong = client.post(answer, json={"value": "2%"}, headers=auth)
    assert wrong.status_code == 200
    assert {k: wrong.json()[k] for k in ("correct", "attempts", "explanation", "hint")} == {
        "correct": False, "attempts": 1, "explanation": None, "hint": None,
    }  # fmt: skip
    assert wrong.json()["part"]["value"] is None and wrong.json()["part"]["status"] == "tried"
    right = client.post(answer, json={"value": "0.0146"}, headers=auth)
    assert right.json()["correct"] and right.json()["attempts"] == 2
    assert "0.01456" in right.json()["explanation"]
    number = client.post(f"{URL}/parts/a-global-batch/answer", json={"value": 2048}, headers=auth)
    assert number.json()["correct"]
    parts = {p["id"]: p["solved"] for p in client.get(URL, headers=auth).json()["parts"]}
    assert parts["b-fraction"] and parts["a-global-batch"] and not parts["a-sync-steps"]


def test_errors(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    assert client.get("/api/v1/exercises/ex-nope", headers=auth).status_code == 404
    assert client.post("/api/v1/exercises/ex-nope/parts/a/answer", json={"value": "1"}, headers=auth).status_code == 404
    unknown = client.post(f"{URL}/parts/zz/answer", json={"value": "1"}, headers=auth)
    assert unknown.status_code == 404 and "no part 'zz'" in unknown.json()["detail"]
    bad = client.post(f"{URL}/parts/a-global-batch/answer", json={"value": "two thousand"}, headers=auth)
    assert bad.status_code == 422 and "is not a number" in bad.json()["detail"]
    assert client.post(f"{URL}/parts/a-global-batch/answer", json={}, headers=auth).status_code == 422
    assert client.post(f"{URL}/parts/a-global-batch/answer", json={"value": [1]}, headers=auth).status_code == 422
    # Nothing was recorded by the refused answers.
    solved = client.post(f"{URL}/parts/a-global-batch/answer", json={"value": "2048"}, headers=auth).json()
    assert solved["attempts"] == 1
    assert client.get(URL).status_code == 401


def test_hint_and_giving_up(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    answer = f"{URL}/parts/a-sync-steps/answer"
    once = client.post(answer, json={"value": "600"}, headers=auth).json()
    assert once["hint"] is None and once["part"]["hint"] is None
    twice = client.post(answer, json={"value": "650"}, headers=auth).json()
    assert "global batch" in twice["hint"] and twice["explanation"] is None and twice["part"]["value"] is None
    listed = {p["id"]: p for p in client.get(URL, headers=auth).json()["parts"]}
    assert listed["a-sync-steps"]["hint"] == twice["hint"] and listed["a-global-batch"]["hint"] is None
    assert listed["a-sync-steps"]["status"] == "tried" and listed["a-sync-steps"]["value"] is None
    gave_up = client.post(f"{URL}/parts/a-sync-steps/give-up", headers=auth)
    assert gave_up.status_code == 200
    body = gave_up.json()
    assert body["status"] == "gave up" and body["gave_up"] and not body["solved"] and body["value"] == 625
    assert "1{,}280{,}000 / 2048" in body["explanation"] and body["hint"] is None
    right = client.post(answer, json={"value": "625"}, headers=auth).json()
    assert right["correct"] and right["part"]["status"] == "gave up" and not right["part"]["solved"]
    assert client.post(f"{URL}/parts/zz/give-up", headers=auth).status_code == 404
    assert client.post(f"{URL}/parts/a-sync-steps/give-up").status_code == 401
    # Another student's view of the same part is untouched.
    make_user(session, "bob")
    bob = {p["id"]: p for p in client.get(URL, headers=api_token(client, "bob")).json()["parts"]}
    assert bob["a-sync-steps"]["status"] == "not tried" and bob["a-sync-steps"]["value"] is None
