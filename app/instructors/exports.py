"""The gradebook and a lab's submissions as flat records: CSV files and the JSON API share them.

Field names are stable and documented (docs/instructors/class.md): a script that reads an export
keeps working when content is added, as long as it reads fields by name.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from fastapi.responses import Response

from app.instructors.gradebook import Column, Gradebook
from app.labs.models import Submission
from app.quizzes.policy import is_late

Record = dict[str, Any]


def column_fields(column: Column) -> list[str]:
    """The fields a gradebook column contributes, in order."""
    if column.count_label is None:
        return [column.key]
    fields = [f"{column.key}:best", f"{column.key}:max", f"{column.key}:{column.count_label}", f"{column.key}:late"]
    if column.gave_up:
        return [*fields, f"{column.key}:gave_up"]
    # Quizzes and labs: the student's own due date (an extension's, else the course's) and extra attempts.
    return [*fields, f"{column.key}:due", f"{column.key}:extra_attempts"]


def gradebook_fields(columns: Sequence[Column]) -> list[str]:
    return ["student", "user_id", *(f for c in columns for f in column_fields(c))]


def _number(value: float | None) -> float | int | None:
    if value is None:
        return None
    return int(value) if float(value).is_integer() else round(float(value), 4)


def gradebook_records(book: Gradebook) -> list[Record]:
    """One record per student: best score, maximum, count and late count per quiz and lab (and parts given up
    per exercise set); the flashcard figures."""
    records = []
    for row in book.rows:
        record: Record = {"student": row.student.username, "user_id": row.student.id}
        for column in book.columns:
            cell = row.cell(column.key)
            if column.count_label is None:
                record[column.key] = _number(cell.value)
            else:
                record[f"{column.key}:best"] = _number(cell.value)
                record[f"{column.key}:max"] = column.max_score
                record[f"{column.key}:{column.count_label}"] = cell.count
                record[f"{column.key}:late"] = cell.late
                if column.gave_up:
                    record[f"{column.key}:gave_up"] = cell.gave_up
                else:
                    due = cell.due_at if cell.extended and cell.due_at else column.due_at
                    record[f"{column.key}:due"] = _time(due)
                    record[f"{column.key}:extra_attempts"] = cell.extra_attempts
        records.append(record)
    return records


SUBMISSION_FIELDS = [
    "submission_id", "student", "user_id", "lab_id", "submitted_at", "status", "verdict", "score", "max_score",
    "late", "regrades", "finished_at",
]  # fmt: skip


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def submission_records(rows: Iterable[tuple[Submission, str]], due_at: datetime | None) -> list[Record]:
    """A lab's submissions, oldest first; ``late`` is true when submitted after the lab's due date."""
    return [
        {
            "submission_id": s.id,
            "student": name,
            "user_id": s.user_id,
            "lab_id": s.lab_id,
            "submitted_at": _time(s.submitted_at),
            "status": s.status.value,
            "verdict": (s.verdict or {}).get("status"),
            "score": _number(s.score),  # points to one decimal: 7.5, or 10 at full marks
            "max_score": s.max_score,
            "late": is_late(s.submitted_at, due_at),
            "regrades": s.regrades,
            "finished_at": _time(s.finished_at),
        }
        for s, name in rows
    ]


def to_csv(fields: Sequence[str], records: Iterable[Record]) -> str:
    """UTF-8 CSV text: one header row, then one row per record; None is an empty cell, booleans are true/false."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(fields)
    for record in records:
        row = []
        for name in fields:
            value = record.get(name)
            row.append("" if value is None else ("true" if value is True else "false" if value is False else value))
        writer.writerow(row)
    return out.getvalue()


def csv_response(text: str, filename: str) -> Response:
    """A CSV download: UTF-8, never cached (it holds grades)."""
    headers = {"Content-Disposition": f'attachment; filename="{filename}"', "Cache-Control": "no-store"}
    return Response(text.encode("utf-8"), media_type="text/csv; charset=utf-8", headers=headers)
