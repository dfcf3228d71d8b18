"""auth limits: sign-in and sign-up rate-limit events, shared by every web process

Revision ID: 0006_auth_limits
Revises: 0002
Create Date: 2026-11-23 05:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

import app.db

revision: str = "0006_auth_limits"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "auth_limit_hits",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("bucket", sa.String(length=20), nullable=False),
        sa.Column("key", sa.String(length=32), nullable=False),
        sa.Column("at", app.db.UTCDateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_auth_limit_hits")),
    )
    with op.batch_alter_table("auth_limit_hits", schema=None) as batch_op:
        batch_op.create_index("ix_auth_limit_hits_bucket_key_at", ["bucket", "key", "at"], unique=False)
        batch_op.create_index(batch_op.f("ix_auth_limit_hits_at"), ["at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("auth_limit_hits", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_auth_limit_hits_at"))
        batch_op.drop_index("ix_auth_limit_hits_bucket_key_at")
    op.drop_table("auth_limit_hits")
