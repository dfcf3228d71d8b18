"""problem reports: a student reports a problem with a question, part, card or lab; staff answer it

Revision ID: 0010_problem_reports
Revises: 0009_worker_confinement
Create Date: 2026-12-03 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0010_problem_reports"
down_revision: str | Sequence[str] | None = "0009_worker_confinement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "problem_reports",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("item_kind", sa.String(length=16), nullable=False),
        sa.Column("item_id", sa.String(length=170), nullable=False),
        sa.Column("attempt_id", sa.Integer(), nullable=True),
        sa.Column("content_version", sa.String(length=40), nullable=True),
        sa.Column("content_digest", sa.String(length=64), nullable=False),
        sa.Column("key_digest", sa.String(length=64), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("created_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.Column("answer", sa.Text(), nullable=True),
        sa.Column("answered_by", sa.Integer(), nullable=True),
        sa.Column("answered_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("rescored_by", sa.Integer(), nullable=True),
        sa.Column("rescored_at", app.db.UTCDateTime(timezone=True), nullable=True),
        sa.Column("rescored_count", sa.Integer(), nullable=True),
        sa.CheckConstraint("state IN ('open', 'answered', 'closed')", name=op.f("ck_problem_reports_state")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_problem_reports_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["attempt_id"], ["quiz_attempts.id"], name=op.f("fk_problem_reports_attempt_id_quiz_attempts"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["answered_by"], ["users.id"], name=op.f("fk_problem_reports_answered_by_users"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["rescored_by"], ["users.id"], name=op.f("fk_problem_reports_rescored_by_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_problem_reports")),
    )  # fmt: skip
    op.create_index(op.f("ix_problem_reports_state"), "problem_reports", ["state"])
    op.create_index("ix_problem_reports_user_id_created_at", "problem_reports", ["user_id", "created_at"])


def downgrade() -> None:
    op.drop_index("ix_problem_reports_user_id_created_at", table_name="problem_reports")
    op.drop_index(op.f("ix_problem_reports_state"), table_name="problem_reports")
    op.drop_table("problem_reports")
