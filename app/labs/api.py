"""JSON API for labs and submissions (bearer token), on the same services as the pages."""

from __future__ import annotations

import asyncio
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.security import HTTPAuthorizationCredentials
from sqlalchemy.orm import Session

from app.db import utcnow
from app.deps import Api, ApiUser, RowId, SessionDep, api_user, bearer
from app.errors import DomainError
from app.exercises.service import lab_best_scores
from app.labs import catalog, queue_view, service, watch
from app.labs.catalog import PublishedLab as Lab
from app.labs.models import Submission
from app.labs.schemas import LabDetailOut, LabListOut, LabOut, SubmissionCreated, SubmissionIn, SubmissionOut
from app.labs.views import limits
from app.web.auth import Principal
from labs.verdict import points_number

router = APIRouter(prefix="/api/v1", tags=["api: labs"])


def _lab(lab: Lab) -> LabOut:
    s = lab.spec
    return LabOut(id=s.id, title=s.title, exercise=s.exercise, world_sizes=s.world_sizes, needs_gpu=s.needs_gpu)


def submission_out(submission: Submission, lab: Lab, *, session: Session) -> SubmissionOut:
    verdict = submission.verdict
    queued = service.estimate(submission, session=session, now=utcnow())
    wait = queued.wait_s if queued else None
    return SubmissionOut.model_validate(
        {
            "id": submission.id,
            "lab_id": submission.lab_id,
            "status": submission.status.value,
            "result": submission.outcome.text,
            "result_kind": submission.outcome.kind,
            "position": queued.position if queued else None,
            "queue_position": queued.position if queued else None,
            "estimated_wait_s": round(wait, 1) if wait is not None else None,
            "poll_after_s": None if submission.done else queue_view.poll_after_s(queued),
            "long_poll_s": None if submission.done else queue_view.long_poll_s(queued),
            "score": points_number(submission.score),
            "max_score": submission.max_score,
            "verdict": None if verdict is None or not submission.done else verdict,
            "checks": service.checks(submission, lab) if submission.done else [],
            "queued_at": submission.queued_at,
            "started_at": submission.started_at,
            "finished_at": submission.finished_at,
        }
    )


def _optional_api_user(
    request: Request, session: SessionDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)]
) -> Principal | None:
    # No token: anyone may list the labs. A token that is wrong is still refused (401), not ignored.
    return api_user(request, session, credentials) if credentials is not None else None


@router.get("/labs")
def list_labs(session: SessionDep, user: Annotated[Principal | None, Depends(_optional_api_user)]) -> list[LabListOut]:
    labs = catalog.all_labs(session)
    best = lab_best_scores(user.id, labs, session=session) if user else {}
    return [
        LabListOut(**_lab(lab).model_dump(), max_score=lab.spec.max_score, best_score=_score(best.get(lab.id)))
        for lab in labs.values()
    ]


def _score(best: tuple[float, int] | None) -> int | float | None:
    return points_number(best[0]) if best else None


@router.get("/labs/{lab_id}")
def get_lab(lab_id: str, session: SessionDep) -> LabDetailOut:
    lab = catalog.get_lab(session, lab_id)
    s = lab.spec
    return LabDetailOut(
        **_lab(lab).model_dump(),
        backends=list(s.backends),
        functions=s.functions,
        time_limit_s=s.time_limit_s,
        max_score=s.max_score,
        checks=[{"id": c.id, "title": c.title, "points": c.points} for c in s.checks],  # type: ignore[misc]
        statement=lab.statement,
        starter_code=lab.starter,
        public_files=list(s.public_files),
    )


@router.post("/labs/{lab_id}/submissions", status_code=202)
def submit(lab_id: str, body: SubmissionIn, request: Request, session: SessionDep, user: ApiUser) -> SubmissionCreated:
    lab = catalog.get_lab(session, lab_id)
    submission = service.submit(lab, user, body.code, session=session, now=utcnow(), limits=limits(request))
    return SubmissionCreated(id=submission.id, status=submission.status.value)


@router.get("/submissions/{submission_id}")
async def get_submission(
    submission_id: RowId,
    request: Request,
    call: Api,
    wait: Annotated[
        float,
        Query(
            ge=0,
            le=watch.MAX_WAIT_S,
            description="hold the request up to this many seconds until the status changes (a long poll); "
            "the last answer's long_poll_s is the hold to ask for",
        ),
    ] = 0,
    seen: Annotated[
        watch.Seen | None,
        Query(
            description="with wait: the status the last answer gave, so the hold starts without a first look; "
            "an answer that is not yours (or a bad token) then comes only when the hold ends"
        ),
    ] = None,
) -> SubmissionOut:
    began = asyncio.get_running_loop().time()
    status: str | None = seen
    if wait and status is None:
        status = await call.read(_waiting_status, submission_id)
    if wait and status is not None:
        await request.app.state.watch.until_news(submission_id, status, wait)
    try:
        return await call.read(_submission, submission_id)
    except DomainError:
        if wait and seen:
            await watch.sit_out(began, wait)
        raise


def _waiting_status(user: Principal, session: Session, submission_id: int) -> str | None:
    return service.waiting_status(submission_id, user, session=session)


def _submission(user: Principal, session: Session, submission_id: int) -> SubmissionOut:
    submission = service.get_submission(submission_id, user, session=session)
    lab = catalog.submitted_lab(session, submission.lab_id, submission.lab_version)
    return submission_out(submission, lab, session=session)
