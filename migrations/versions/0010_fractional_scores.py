"""fractional scores: a lab submission's score is its checks' points to one decimal (7.5 of 10)

Revision ID: 0010_fractional_scores
Revises: 0009_worker_confinement
Create Date: 2026-12-09 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_fractional_scores"
down_revision: str | Sequence[str] | None = "0009_worker_confinement"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Partial credit is the share of a check's points, to one decimal. Whole scores stored before
    # convert exactly; batch mode rebuilds the table on SQLite, ALTER ... TYPE on PostgreSQL.
    with op.batch_alter_table("lab_submissions", schema=None) as batch_op:
        batch_op.alter_column(
            "score",
            existing_type=sa.Integer(),
            type_=sa.Float(),
            existing_nullable=True,
            postgresql_using="score::float",
        )


def downgrade() -> None:
    # Rounds a fractional score down to the whole points the old engine would have given at most.
    with op.batch_alter_table("lab_submissions", schema=None) as batch_op:
        batch_op.alter_column(
            "score",
            existing_type=sa.Float(),
            type_=sa.Integer(),
            existing_nullable=True,
            postgresql_using="floor(score)::integer",
        )
