"""accommodations: a student's extra time on timed quizzes

Revision ID: 0008_accommodations
Revises: 0007_rescores
Create Date: 2026-11-27 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0008_accommodations"
down_revision: str | Sequence[str] | None = "0007_rescores"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "quiz_accommodations",
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("time_multiplier", sa.Float(), nullable=False),
        sa.Column("extra_minutes", sa.Integer(), nullable=False),
        sa.Column("note", sa.String(length=200), nullable=False),
        sa.Column("granted_by", sa.Integer(), nullable=True),
        sa.Column("granted_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.CheckConstraint("time_multiplier >= 1", name=op.f("ck_quiz_accommodations_time_multiplier")),
        sa.CheckConstraint("extra_minutes >= 0", name=op.f("ck_quiz_accommodations_extra_minutes")),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_quiz_accommodations_user_id_users"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["granted_by"], ["users.id"], name=op.f("fk_quiz_accommodations_granted_by_users"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_quiz_accommodations")),
    )


def downgrade() -> None:
    op.drop_table("quiz_accommodations")
