"""A site administrator deletes an account: the account, everything it made, and its name wherever it was kept.

What goes is read from the schema, as the export reads it (``app.accounts.export``), so a table added
later is covered without anyone listing it here:

- a row that refers to a row being deleted goes too: the account's attempts, submissions, reviews,
  answers, reports, enrollments and extensions, and the rows that hang off those (an attempt's answers
  and re-scores), children before parents;
- a reference declared ``ON DELETE SET NULL`` is cleared instead, and its row stays: the account named
  as staff on someone else's row (a report's ``answered_by``, an extension's ``granted_by_id``, a reset
  link's ``created_by_id``). The row then names nobody.

The work is removed, not hidden, so no page, export or statistic can show it. Two places keep names as
text rather than as references, and are cleaned by hand: the audit log (the account's username, full
name or e-mail as an actor or a value is replaced by ``account #<id> (deleted)``) and the rate-limit
events counted against the account. The deletion itself is logged by the account's id only.
Functions take a keyword ``session`` and never commit.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import Column, ColumnElement, Table, delete, func, or_, select, update
from sqlalchemy.orm import Session

from app.accounts.models import LimitHit, Role, User
from app.accounts.ratelimit import digest
from app.courses.models import AuditEntry
from app.db import Base
from app.errors import Conflict, InvalidInput, NotFound

ACTION = "account deleted"
# The rate-limit buckets whose events are keyed by the account rather than an address, and what names
# it there: failed sign-ins (app.accounts.flows) count its username, wrong join codes its id.
_ACCOUNT_BUCKETS = {"signin_account": "username", "join_code": "id"}


def placeholder(user_id: int) -> str:
    """What the audit log says where it named the account."""
    return f"account #{user_id} (deleted)"


@dataclass(frozen=True)
class Deleted:
    """What a deletion did: rows removed and references cleared, table by table (only tables it touched)."""

    user_id: int
    counts: dict[str, int] = field(default_factory=dict)  # table -> rows removed
    cleared: dict[str, int] = field(default_factory=dict)  # "table.column" -> rows that no longer name it

    @property
    def total(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class _Plan:
    """Which rows go (a condition per table, children after parents) and which references are cleared."""

    doomed: dict[str, ColumnElement[bool]]
    clears: list[tuple[Table, Column[Any], ColumnElement[bool]]]


def _plan(user_id: int) -> _Plan:
    users = Base.metadata.tables["users"]
    doomed: dict[str, ColumnElement[bool]] = {"users": users.c.id == user_id}
    clears: list[tuple[Table, Column[Any], ColumnElement[bool]]] = []
    for table in Base.metadata.sorted_tables:  # parents before children
        if table.name == "users":
            continue
        owned: list[ColumnElement[bool]] = []
        for fk in table.foreign_keys:
            parent = fk.column.table
            if parent.name not in doomed:
                continue
            if parent.name == "users":
                refers = fk.parent == user_id
            else:
                refers = fk.parent.in_(select(fk.column).where(doomed[parent.name]))
            if (fk.ondelete or "").upper() == "SET NULL":
                clears.append((table, fk.parent, refers))
            else:
                # CASCADE would delete it with its parent; no ON DELETE would refuse the parent's deletion.
                owned.append(refers)
        if owned:
            doomed[table.name] = or_(*owned)
    return _Plan(doomed, clears)


def _children_first(plan: _Plan) -> Iterator[Table]:
    """The tables a deletion touches (rows to remove or references to clear), children before parents."""
    touched = {t.name for t, _, _ in plan.clears} | set(plan.doomed)
    for table in reversed(Base.metadata.sorted_tables):
        if table.name in touched:
            yield table


def _account(user_id: int, session: Session) -> User:
    user = session.get(User, user_id)
    if user is None:
        raise NotFound(f"There is no account #{user_id}: it may have been deleted already.")
    return user


def preview(user_id: int, *, session: Session) -> dict[str, int]:
    """How many rows deleting the account would remove, table by table (tables with none left out)."""
    _account(user_id, session)
    plan = _plan(user_id)
    counts = {}
    for table in _children_first(plan):
        if table.name not in plan.doomed:
            continue
        found = session.scalar(select(func.count()).select_from(table).where(plan.doomed[table.name])) or 0
        if found:
            counts[table.name] = found
    return counts


def _refuse(user: User, by: int | None, confirm: str | None, session: Session) -> None:
    if by is not None and by == user.id:
        raise Conflict("You cannot delete your own account here: ask another site administrator to do it.")
    if user.role == Role.admin:
        admins = session.scalar(select(func.count()).select_from(User).where(User.role == Role.admin)) or 0
        if admins <= 1:
            raise Conflict(
                f"{user.username} is the only site administrator: make another account an administrator "
                "first, so that someone can still manage the courses."
            )
    if confirm is not None and confirm.strip().lower() != user.username_key:
        raise InvalidInput(
            f"To confirm, type the account's username, {user.username}: nothing was deleted.", field="confirm"
        )


def _scrub(value: Any, names: set[str], instead: str) -> tuple[Any, bool]:
    """``value`` (JSON) with every string that is one of ``names`` replaced; and whether any was."""
    if isinstance(value, str):
        return (instead, True) if value.strip().lower() in names else (value, False)
    if isinstance(value, list):
        pairs = [_scrub(v, names, instead) for v in value]
        return [v for v, _ in pairs], any(changed for _, changed in pairs)
    if isinstance(value, dict):
        items = {k: _scrub(v, names, instead) for k, v in value.items()}
        return {k: v for k, (v, _) in items.items()}, any(changed for _, changed in items.values())
    return value, False


def _scrub_audit_log(user: User, session: Session) -> int:
    """Replace the account's names in the audit log; the number of entries changed."""
    names = {n.strip().lower() for n in (user.username_key, user.full_name, user.email) if n and n.strip()}
    instead = placeholder(user.id)
    changed = 0
    for entry in session.scalars(select(AuditEntry)):
        actor, actor_changed = _scrub(entry.actor, names, instead)
        detail, detail_changed = _scrub(entry.detail, names, instead)
        if actor_changed or detail_changed:
            entry.actor, entry.detail = actor, detail  # a new dict: the JSON column sees a new value
            changed += 1
    session.flush()
    return changed


def _limit_hits(user: User, session: Session) -> int:
    keys = {"username": user.username_key, "id": str(user.id)}
    conditions = [
        (LimitHit.bucket == bucket) & (LimitHit.key == digest(keys[what])) for bucket, what in _ACCOUNT_BUCKETS.items()
    ]
    done = session.execute(delete(LimitHit).where(or_(*conditions)))
    return int(getattr(done, "rowcount", 0) or 0)


def delete_account(
    user_id: int, *, actor: str, session: Session, now: datetime, by: int | None = None, confirm: str | None = None
) -> Deleted:
    """Delete the account ``user_id`` and everything it made, and log it (by id, never by name) as ``actor``.

    ``by`` is the administrator's own account (a page; None from the terminal): nobody deletes their own.
    ``confirm``, when given, must be the account's username (the page's safeguard against a slip).
    Raises NotFound, Conflict (oneself, or the only site administrator) or InvalidInput, changing nothing.
    """
    user = _account(user_id, session)
    _refuse(user, by, confirm, session)
    session.flush()
    plan = _plan(user_id)
    counts: dict[str, int] = {}
    cleared: dict[str, int] = {}
    audit_changed = _scrub_audit_log(user, session)
    if audit_changed:
        cleared["audit_log"] = audit_changed
    # Children first: a table's rows go, then its references to what goes next are cleared on the rows
    # that stay, and only then its parents, so every condition is read while the rows it names are there.
    for table in _children_first(plan):
        if table.name in plan.doomed:
            removed = session.execute(delete(table).where(plan.doomed[table.name]))
            if n := int(getattr(removed, "rowcount", 0) or 0):
                counts[table.name] = n
        for child, column, refers in plan.clears:
            if child is table:
                gone = session.execute(update(table).where(refers).values({column.name: None}))
                if n := int(getattr(gone, "rowcount", 0) or 0):
                    cleared[f"{table.name}.{column.name}"] = n
    if hits := _limit_hits(user, session):
        counts[LimitHit.__tablename__] = hits
    session.expunge(user)
    session.add(
        AuditEntry(
            at=now, actor=actor[:80], action=ACTION, detail={"user_id": user_id, "counts": counts, "cleared": cleared}
        )
    )
    session.flush()
    return Deleted(user_id, counts, cleared)
