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
    assert all(set(p) == {"id", "prompt", "unit", "solved"} for p in body["parts"])
    assert body["parts"][3]["unit"] == "%" and not any(p["solved"] for p in body["parts"])
    text = client.get(URL, headers=auth).text
    assert "2048" not in text and "explanation" not in text and "value" not in text


def test_answering(client: TestClient, session: Session) -> None:
    make_user(session, "ada")
    auth = api_token(client, "ada")
    answer = f"{URL}/parts/b-fraction/answer"
    wrong = client.post(answer, json={"value": "2%"}, headers=auth)
    assert wrong.status_code == 200 and wrong.json() == {"correct": False, "attempts": 1, "explanation": None}
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
