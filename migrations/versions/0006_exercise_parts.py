"""exercises: answer parts, per-student answers and progress, notes and done marks

Revision ID: 0006_exercise_parts
Revises: 0002
Create Date: 2026-11-23 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0006_exercise_parts"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("exercises") as batch:
        batch.add_column(sa.Column("parts", sa.JSON(), nullable=False, server_default="[]"))
    op.create_table(
        "exercise_part_answers",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.String(length=80), nullable=False),
        sa.Column("part_id", sa.String(length=80), nullable=False),
        sa.Column("answer", sa.String(length=80), nullable=False),
        sa.Column("correct", sa.Boolean(), nullable=False),
        sa.Column("answered_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["exercise_id"], ["exercises.id"], name=op.f("fk_exercise_part_answers_exercise_id_exercises")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_exercise_part_answers_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exercise_part_answers")),
    )
    op.create_index(op.f("ix_exercise_part_answers_user_id"), "exercise_part_answers", ["user_id"])
    op.create_table(
        "exercise_part_progress",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.String(length=80), nullable=False),
        sa.Column("part_id", sa.String(length=80), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_answer", sa.String(length=80), nullable=True),
        sa.Column("solved_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("revealed_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["exercise_id"], ["exercises.id"], name=op.f("fk_exercise_part_progress_exercise_id_exercises")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_exercise_part_progress_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exercise_part_progress")),
        sa.UniqueConstraint("user_id", "exercise_id", "part_id", name=op.f("uq_exercise_part_progress_user_id")),
    )
    op.create_index(op.f("ix_exercise_part_progress_user_id"), "exercise_part_progress", ["user_id"])
    op.create_index(op.f("ix_exercise_part_progress_solved_at"), "exercise_part_progress", ["solved_at"])
    op.create_table(
        "exercise_notes",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.String(length=80), nullable=False),
        sa.Column("notes", sa.Text(), nullable=False),
        sa.Column("done_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("updated_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["exercise_id"], ["exercises.id"], name=op.f("fk_exercise_notes_exercise_id_exercises")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_exercise_notes_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exercise_notes")),
        sa.UniqueConstraint("user_id", "exercise_id", name=op.f("uq_exercise_notes_user_id")),
    )
    op.create_index(op.f("ix_exercise_notes_user_id"), "exercise_notes", ["user_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_exercise_notes_user_id"), table_name="exercise_notes")
    op.drop_table("exercise_notes")
    op.drop_index(op.f("ix_exercise_part_progress_solved_at"), table_name="exercise_part_progress")
    op.drop_index(op.f("ix_exercise_part_progress_user_id"), table_name="exercise_part_progress")
    op.drop_table("exercise_part_progress")
    op.drop_index(op.f("ix_exercise_part_answers_user_id"), table_name="exercise_part_answers")
    op.drop_table("exercise_part_answers")
    with op.batch_alter_table("exercises") as batch:
        batch.drop_column("parts")
