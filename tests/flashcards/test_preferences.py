"""Per-student study settings: the one-key shortcuts switch."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.flashcards import preferences
from app.flashcards.scheduling import Prefs
from tests.factories import make_user


def test_shortcuts_are_on_until_turned_off_and_keep_the_other_settings(session: Session) -> None:
    fresh, tuned = make_user(session, "fresh"), make_user(session, "tuned")
    assert preferences.shortcuts_on(fresh.id, session=session)
    preferences.set_shortcuts(fresh.id, False, session=session)  # no settings row yet: one with the defaults
    assert not preferences.shortcuts_on(fresh.id, session=session)
    assert preferences.get_prefs(fresh.id, session=session) == Prefs()

    preferences.save(tuned.id, Prefs(new_per_day=3, time_zone="Asia/Tokyo"), session=session)
    preferences.set_shortcuts(tuned.id, False, session=session)
    preferences.set_shortcuts(tuned.id, True, session=session)
    assert preferences.shortcuts_on(tuned.id, session=session)
    assert preferences.get_prefs(tuned.id, session=session) == Prefs(new_per_day=3, time_zone="Asia/Tokyo")
