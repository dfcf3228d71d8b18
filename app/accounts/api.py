"""JSON API for accounts: register, get a bearer token, who am I."""

from __future__ import annotations

from datetime import timedelta

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field

from app.accounts import flows, service
from app.courses import service as courses
from app.db import utcnow
from app.deps import ApiUser, ClientAddress, SessionDep, SettingsDep

router = APIRouter(prefix="/api/v1", tags=["api: accounts"])


class Credentials(BaseModel):
    username: str = Field(max_length=100)
    password: str = Field(max_length=1000)
    join_code: str | None = Field(default=None, max_length=200)


class CourseOut(BaseModel):
    id: str
    title: str
    term: str | None
    role: str = Field(description="student, ta or instructor")


class UserOut(BaseModel):
    username: str
    role: str = Field(description="student (an ordinary account) or admin (a site administrator)")
    course: str = Field(description="the course this request is in: ?course=<id>, or X-Ringlab-Course, or the usual")
    course_role: str | None = Field(description="the role in that course; null when not enrolled in it")
    courses: list[CourseOut] = Field(description="every course the account is in")


class TokenOut(BaseModel):
    access_token: str
    token_type: str = "bearer"
    expires_at: str


@router.post("/auth/register", status_code=201, response_model=UserOut)
def register(
    body: Credentials, request: Request, session: SessionDep, settings: SettingsDep, client: ClientAddress
) -> UserOut:
    limits = request.app.state.limits
    user = flows.sign_up(
        body.username, body.password, body.join_code, client, session=session, limits=limits, settings=settings,
        now=utcnow(),
    )  # fmt: skip
    return _user_out(user.id, user.username, user.role.value, None, session)


@router.post("/auth/token", response_model=TokenOut)
def token(
    body: Credentials, request: Request, session: SessionDep, settings: SettingsDep, client: ClientAddress
) -> TokenOut:
    now = utcnow()
    state = request.app.state
    user = flows.sign_in(
        body.username, body.password, client, session=session, limits=state.limits, now=now, counter=state.sessionmaker
    )
    issued = service.issue_api_token(user, session=session, now=now, ttl=timedelta(hours=settings.api_token_ttl_hours))
    return TokenOut(access_token=issued.token, expires_at=issued.expires_at.isoformat())


@router.get("/me", response_model=UserOut)
def me(user: ApiUser, session: SessionDep) -> UserOut:
    return _user_out(user.id, user.username, user.role.value, user.course_id, session)


def _user_out(user_id: int, username: str, role: str, course_id: str | None, session: SessionDep) -> UserOut:
    mine = [
        CourseOut(id=m.course.id, title=m.course.title, term=m.course.term, role=m.role.value)
        for m in courses.memberships(user_id, session=session)
    ]
    here = course_id or (mine[0].id if mine else "default")
    course_role = next((c.role for c in mine if c.id == here), None)
    return UserOut(username=username, role=role, course=here, course_role=course_role, courses=mine)
