"""instructors: a quiz's attempt policy and due date

Revision ID: 0006_instructors
Revises: 0003
Create Date: 2026-11-23 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0006_instructors"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("quizzes") as batch:
        batch.add_column(sa.Column("max_attempts", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("show_answers", sa.String(length=16), nullable=False, server_default="at_once"))
        batch.add_column(sa.Column("due_at", app.db.UTCDateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("quizzes") as batch:
        batch.drop_column("due_at")
        batch.drop_column("show_answers")
        batch.drop_column("max_attempts")
