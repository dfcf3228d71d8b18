"""Flashcard pages."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from app.deps import SessionDep
from app.flashcards import service
from app.web.templating import render

router = APIRouter(prefix="/flashcards", tags=["flashcards"])


@router.get("", response_class=HTMLResponse)
def deck_list(request: Request, session: SessionDep) -> HTMLResponse:
    return render(request, "flashcards/list.html", {"decks": service.list_decks(session=session)})


@router.get("/{deck_id}", response_class=HTMLResponse)
def deck_page(deck_id: str, request: Request, session: SessionDep) -> HTMLResponse:
    deck, cards = service.get_deck(deck_id, session=session)
    return render(request, "flashcards/deck.html", {"deck": deck, "cards": cards})
