"""lab hints: which hint of which lab check each student revealed, and when

Revision ID: 0010_lab_hints
Revises: 0009_worker_confinement
Create Date: 2026-12-08 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0010_lab_hints"
down_revision: str | Sequence[str] | None = "0009_worker_confinement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "lab_hint_views",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("lab_id", sa.String(length=80), nullable=False),
        sa.Column("check_id", sa.String(length=80), nullable=False),
        sa.Column("hint_index", sa.Integer(), nullable=False),
        sa.Column("shown_at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["user_id"], ["users.id"], name=op.f("fk_lab_hint_views_user_id_users"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_lab_hint_views")),
        sa.UniqueConstraint("user_id", "lab_id", "check_id", "hint_index", name=op.f("uq_lab_hint_views_user_id")),
    )


def downgrade() -> None:
    op.drop_table("lab_hint_views")
