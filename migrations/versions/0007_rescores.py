"""rescores: quiz attempts and exercise parts marked again after a corrected key

Revision ID: 0007_rescores
Revises: 0006_instructors, 0006_exercise_parts
Create Date: 2026-11-25 16:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0007_rescores"
down_revision: str | Sequence[str] | None = ("0006_instructors", "0006_exercise_parts")
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "quiz_rescores",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=False),
        sa.Column("question_id", sa.String(length=80), nullable=False),
        sa.Column("old_answer", sa.String(length=4), nullable=False),
        sa.Column("new_answer", sa.String(length=4), nullable=False),
        sa.Column("choice", sa.String(length=4), nullable=True),
        sa.Column("old_score", sa.Integer(), nullable=False),
        sa.Column("new_score", sa.Integer(), nullable=False),
        sa.Column("max_score", sa.Integer(), nullable=False),
        sa.Column("note_html", sa.Text(), nullable=False),
        sa.Column("rescored_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["quiz_attempts.id"], name=op.f("fk_quiz_rescores_attempt_id_quiz_attempts"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_quiz_rescores")),
    )  # fmt: skip
    op.create_index(op.f("ix_quiz_rescores_attempt_id"), "quiz_rescores", ["attempt_id"])
    op.create_table(
        "exercise_part_rescores",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("exercise_id", sa.String(length=80), nullable=False),
        sa.Column("part_id", sa.String(length=80), nullable=False),
        sa.Column("was_solved", sa.Boolean(), nullable=False),
        sa.Column("now_solved", sa.Boolean(), nullable=False),
        sa.Column("answers_changed", sa.Integer(), nullable=False),
        sa.Column("note_html", sa.Text(), nullable=False),
        sa.Column("rescored_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["exercise_id"], ["exercises.id"], name=op.f("fk_exercise_part_rescores_exercise_id_exercises")
        ),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_exercise_part_rescores_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_exercise_part_rescores")),
    )
    op.create_index(op.f("ix_exercise_part_rescores_user_id"), "exercise_part_rescores", ["user_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_exercise_part_rescores_user_id"), table_name="exercise_part_rescores")
    op.drop_table("exercise_part_rescores")
    op.drop_index(op.f("ix_quiz_rescores_attempt_id"), table_name="quiz_rescores")
    op.drop_table("quiz_rescores")
