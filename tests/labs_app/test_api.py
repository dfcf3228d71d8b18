"""The labs JSON API: listing, submitting, reading a result; 404, 413, 409 and 429."""

from __future__ import annotations

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.labs.settings import LabSettings
from labs.spec import load_labs
from tests.conftest import CONTENT_DIR
from tests.factories import api_token, make_user
from tests.labs_app.conftest import unique


def student(client: TestClient, session: Session) -> dict[str, str]:
    name = unique("api")
    make_user(session, name)
    return api_token(client, name)


def test_lists_labs_with_the_issue_fields(client: TestClient) -> None:
    labs = client.get("/api/v1/labs").json()
    ring = next(lab for lab in labs if lab["id"] == "ring-allreduce")
    assert ring == {
        "id": "ring-allreduce",
        "title": "Ring all-reduce",
        "exercise": "ex-35-2",
        "world_sizes": [2, 3, 4],
        "needs_gpu": False,
        "max_score": 10,
        "best_score": None,
    }
    assert {lab["id"] for lab in labs} == set(load_labs(CONTENT_DIR / "labs"))


def test_the_list_has_your_best_score_with_a_token_and_refuses_a_wrong_one(
    client: TestClient, session: Session
) -> None:
    from app.labs.models import Submission, SubmissionStatus

    auth, other = student(client, session), student(client, session)
    for score in (4, 7, 3):
        sid = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "a=1"}, headers=auth).json()["id"]
        row = session.get(Submission, sid)
        assert row is not None
        row.status, row.score = SubmissionStatus.graded, score
        session.commit()

    def best(headers: dict[str, str]) -> dict[str, int | None]:
        return {lab["id"]: lab["best_score"] for lab in client.get("/api/v1/labs", headers=headers).json()}

    assert best(auth)["ring-allreduce"] == 7 and best(auth)["collectives-p2p"] is None
    assert best(other)["ring-allreduce"] is None  # someone else's scores are never in your list
    wrong = client.get("/api/v1/labs", headers={"Authorization": "Bearer not-a-token"})
    assert wrong.status_code == 401 and "token" in wrong.json()["detail"]


def test_lab_detail_has_statement_and_starter_code(client: TestClient) -> None:
    body = client.get("/api/v1/labs/collectives-p2p").json()
    assert "reduce_scatter" in body["starter_code"] and body["statement"].startswith("#")
    assert [c["id"] for c in body["checks"]][:1] and body["max_score"] == sum(c["points"] for c in body["checks"])
    assert client.get("/api/v1/labs/no-such-lab").status_code == 404


def test_lab_detail_names_its_public_files_and_each_one_is_served(client: TestClient) -> None:
    labs = load_labs(CONTENT_DIR / "labs")
    with_files = next(lab for lab in labs.values() if lab.spec.public_files)
    body = client.get(f"/api/v1/labs/{with_files.spec.id}").json()
    assert body["public_files"] == with_files.spec.public_files
    for name in body["public_files"]:
        served = client.get(f"/labs/{with_files.spec.id}/public/{name}")
        assert served.status_code == 200 and served.text == with_files.public_path(name).read_text()
    # Trusted files are never listed, so a client fetching "every public file" never asks for them.
    for lab in labs.values():
        listed = client.get(f"/api/v1/labs/{lab.spec.id}").json()["public_files"]
        assert "solution.py" not in listed and "checks.py" not in listed
    assert client.get("/api/v1/labs/ring-allreduce").json()["public_files"] == []


def test_submit_then_read_the_queued_submission(
    client: TestClient, session: Session, lab_settings: LabSettings
) -> None:
    auth = student(client, session)
    created = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "x = 1\n"}, headers=auth)
    assert created.status_code == 202
    assert created.json()["status"] == "queued"
    body = client.get(f"/api/v1/submissions/{created.json()['id']}", headers=auth).json()
    assert body["status"] == "queued" and body["lab_id"] == "ring-allreduce" and body["position"] >= 1
    assert body["verdict"] is None and body["checks"] == [] and body["max_score"] == 10
    assert {"queued_at", "started_at", "finished_at", "score"} <= body.keys()


def test_one_job_in_flight_per_student_per_lab(client: TestClient, session: Session, lab_settings: LabSettings) -> None:
    auth = student(client, session)
    assert client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "a=1"}, headers=auth).status_code == 202
    again = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "a=2"}, headers=auth)
    assert again.status_code == 409 and "still being graded" in again.json()["detail"]
    other_lab = client.post("/api/v1/labs/collectives-p2p/submissions", json={"code": "a=3"}, headers=auth)
    assert other_lab.status_code == 202


def test_rate_limit_per_lab_answers_429_with_retry_after(
    client: TestClient, session: Session, lab_settings: LabSettings
) -> None:
    from app.labs.models import Submission, SubmissionStatus

    auth = student(client, session)
    for i in range(lab_settings.lab_submit_limit):
        r = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": f"a={i}"}, headers=auth)
        assert r.status_code == 202
        row = session.get(Submission, r.json()["id"])
        assert row is not None
        row.status = SubmissionStatus.graded  # as if graded, so the one-in-flight rule is not what stops us
        session.commit()
    limited = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "a=9"}, headers=auth)
    assert limited.status_code == 429
    assert 0 < int(limited.headers["Retry-After"]) <= lab_settings.lab_submit_window_s


def test_oversized_code_is_413_and_unknown_lab_404(client: TestClient, session: Session) -> None:
    auth = student(client, session)
    big = "#" * (256 * 1024 + 1)
    assert client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": big}, headers=auth).status_code == 413
    just = "#" * (256 * 1024 - 1) + "\n"
    assert client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": just}, headers=auth).status_code == 202
    assert client.post("/api/v1/labs/nope/submissions", json={"code": "a=1"}, headers=auth).status_code == 404


def test_another_students_submission_is_404_and_no_token_is_401(client: TestClient, session: Session) -> None:
    alice, bob = student(client, session), student(client, session)
    sid = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "a=1"}, headers=alice).json()["id"]
    assert client.get(f"/api/v1/submissions/{sid}", headers=bob).status_code == 404
    assert client.get(f"/api/v1/submissions/{sid}", headers=alice).status_code == 200
    assert client.get(f"/api/v1/submissions/{sid}").status_code == 401
    assert client.get("/api/v1/submissions/999999", headers=alice).status_code == 404
    assert client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "a=1"}).status_code == 401


def test_code_with_a_nul_byte_is_refused_with_its_line(client: TestClient, session: Session) -> None:
    auth = student(client, session)
    refused = client.post("/api/v1/labs/ring-allreduce/submissions", json={"code": "x = 1\n\0y = 2\n"}, headers=auth)
    assert refused.status_code == 422
    assert "contains a NUL byte (line 2)" in refused.json()["detail"]
