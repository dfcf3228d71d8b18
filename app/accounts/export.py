"""Everything Ringlab holds about one account, as JSON its owner can download.

Read from the schema itself, so a table added later is in the export without anyone remembering
it: every row the account owns (its ``user_id``), and every row that refers to such a row (the
answers of the account's quiz attempts), table by table in dependency order. Rows that merely name
the account as staff (``answered_by``, ``granted_by``) are other students' data and stay out.
Left out, and named in the export: secrets (the password hash, the digests of session, token and
reset-link secrets) and staff's notes about the student.
"""

from __future__ import annotations

import base64
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from typing import Any

from sqlalchemy import ColumnElement, Table, or_, select
from sqlalchemy.orm import Session

from app.db import Base

# (table, column): never exported; each with the reason the export gives.
OMITTED = {
    ("users", "password_hash"): "a secret: the password's Argon2 hash",
    ("auth_sessions", "id"): "a secret: the digest of a browser session's token",
    ("api_tokens", "id"): "a secret: the digest of an API token",
    ("password_resets", "id"): "a secret: the digest of a reset link's token",
    ("quiz_accommodations", "note"): "staff's note on why extra time was granted",
}
# Rows that hold nothing about a person: counted events keyed by digests (rate limits).
SKIPPED_TABLES = {"auth_limit_hits"}


def _plain(value: Any) -> Any:
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    return value


def _row(table: Table, row: Any) -> dict[str, Any]:
    return {c.name: _plain(row._mapping[c]) for c in table.columns if (table.name, c.name) not in OMITTED}


def export_user(user_id: int, *, session: Session) -> dict[str, Any]:
    """``{"tables": {name: [row, ...]}, "omitted": [...]}`` for the account ``user_id``."""
    tables: dict[str, list[dict[str, Any]]] = {}
    keys: dict[str, set[Any]] = {"users": {user_id}}  # table -> primary keys of the rows exported
    for table in Base.metadata.sorted_tables:  # parents before children
        if table.name in SKIPPED_TABLES:
            continue
        conditions: list[ColumnElement[bool]] = []
        for fk in table.foreign_keys:
            parent = fk.column.table.name
            owner = parent != "users" or fk.parent.name == "user_id"  # ownership, not "answered by"
            if owner and parent in keys and fk.column.primary_key and keys[parent]:
                conditions.append(fk.parent.in_(sorted(keys[parent], key=str)))
        if table.name == "users":
            conditions.append(table.c.id == user_id)
        if not conditions:
            continue
        rows = session.execute(select(table).where(or_(*conditions))).all()
        if not rows:
            continue
        tables[table.name] = [_row(table, r) for r in rows]
        primary = list(table.primary_key.columns)
        if len(primary) == 1:
            keys[table.name] = {r._mapping[primary[0]] for r in rows}
    omitted = [f"{t}.{c}: {why}" for (t, c), why in OMITTED.items()]
    return {"format": "ringlab-account-export/1", "user_id": user_id, "tables": tables, "omitted": omitted}
