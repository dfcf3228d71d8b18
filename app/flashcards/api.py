"""JSON API for flashcards (bearer token), on the same services as the pages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field
from sqlalchemy.orm import Session

from app.content.records import Card
from app.db import utcnow
from app.deps import Api
from app.flashcards import service, study
from app.flashcards.models import STATE_NAMES, CardState
from app.flashcards.views import fuzzing
from app.web.auth import Principal

router = APIRouter(prefix="/api/v1", tags=["api: flashcards"])


class DeckOut(BaseModel):
    id: str
    title: str
    card_count: int


class ReviewIn(BaseModel):
    card_id: str = Field(max_length=80)
    rating: int = Field(ge=1, le=5, description="1-5: 1 and 2 are Again, 3 Hard, 4 Good, 5 Easy")
    version: int = Field(
        ge=0, le=2**31 - 1,
        description="the card's `version` as the client was shown it (queue or card); a stale one gets 409",
    )  # fmt: skip
    duration_ms: int | None = Field(default=None, ge=0, le=86_400_000)
    review_id: str | None = Field(
        default=None, max_length=100, description="idempotency key: sent twice, recorded once"
    )


class ReviewOut(BaseModel):
    card_id: str
    state: str
    due: datetime | None
    interval_days: int


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def card_out(card: Card, state: CardState | None, now: datetime) -> dict[str, Any]:
    snap = study.snapshot_of(state)
    return {
        "id": card.id, "topic": card.topic, "front": card.front_html, "back": card.back_html,
        "state": STATE_NAMES[snap.state], "due": _iso(snap.due), "stability": snap.stability,
        "difficulty": snap.difficulty, "suspended": bool(state and state.suspended),
        "buried": bool(state and state.buried_until and state.buried_until > now),
        "version": state.version if state else 0,
    }  # fmt: skip


# Each route binds HTTP to plain functions of (user, session, ...) that `Api` runs as units of
# work, each in one session with the token lookup and the commit (see app.deps.ApiCall).


def _decks(user: Principal, session: Session) -> list[DeckOut]:
    return [DeckOut(id=d.id, title=d.title, card_count=n) for d, n in service.list_decks(session=session)]


def _queue(user: Principal, session: Session, deck_id: str) -> dict[str, Any]:
    view = study.study_view(user.id, deck_id, session=session, now=utcnow(), with_intervals=False)
    card = view.card and {
        "id": view.card.id, "topic": view.card.topic, "front": view.card.front_html, "version": view.version,
    }  # fmt: skip
    return {"card": card, "counts": view.counts.as_dict()}


def _card(user: Principal, session: Session, card_id: str) -> dict[str, Any]:
    found, state = study.card_status(user.id, card_id, session=session)
    return card_out(found, state, utcnow())


def _plan(user: Principal, session: Session, body: ReviewIn, fuzz: bool) -> study.Rated | study.RatingPlan:
    return study.plan_rating(
        user.id, body.card_id, body.rating, session=session, now=utcnow(), duration_ms=body.duration_ms,
        review_key=body.review_id, expected_version=body.version, fuzz=fuzz, course_id=user.course_id,
    )  # fmt: skip


def _apply(user: Principal, session: Session, plan: study.RatingPlan) -> study.Rated:
    return study.apply_rating(plan, session=session)


def _undo(user: Principal, session: Session) -> dict[str, Any]:
    now = utcnow()
    card_id = study.undo(user.id, session=session, now=now)
    found, state = study.card_status(user.id, card_id, session=session)
    return card_out(found, state, now)


def _stats(user: Principal, session: Session, deck_id: str) -> dict[str, object]:
    _, figures = service.deck_stats(user.id, deck_id, session=session, now=utcnow())
    return figures.as_dict()


@router.get("/decks", response_model=list[DeckOut])
async def decks(api: Api) -> list[DeckOut]:
    return await api.run(_decks)


@router.get("/decks/{deck_id}/queue")
async def queue(deck_id: str, api: Api) -> dict[str, Any]:
    return await api.quick_read(_queue, deck_id)


@router.get("/cards/{card_id}")
async def card(card_id: str, api: Api) -> dict[str, Any]:
    return await api.run(_card, card_id)


@router.post("/reviews", response_model=ReviewOut)
async def rate(body: ReviewIn, request: Request, api: Api) -> ReviewOut:
    # Worked out on a reader, then written in a short write transaction (see ApiCall).
    planned = await api.quick_read(_plan, body, fuzzing(request))
    done = planned if isinstance(planned, study.Rated) else await api.write(_apply, planned)
    return ReviewOut(card_id=done.card_id, state=done.snap.state_name, due=done.snap.due,
                     interval_days=done.snap.interval_days)  # fmt: skip


@router.post("/reviews/undo")
async def undo(api: Api) -> dict[str, Any]:
    return await api.run(_undo)


@router.get("/decks/{deck_id}/stats")
async def stats(deck_id: str, api: Api) -> dict[str, object]:
    return await api.run(_stats, deck_id)
