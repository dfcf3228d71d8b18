"""worker confinement: each grading worker says what limits its ranks (cgroup v1, cgroup v2 or none)

Revision ID: 0009_worker_confinement
Revises: 0006_auth_limits, 0006_lab_versions, 0008_accommodations, 0008_shortcuts (merges the heads)
Create Date: 2026-12-01 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_worker_confinement"
down_revision: str | Sequence[str] | None = (
    "0006_auth_limits",
    "0006_lab_versions",
    "0008_accommodations",
    "0008_shortcuts",
)
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Workers registered before this say nothing of their confinement until they register again.
    with op.batch_alter_table("lab_workers", schema=None) as batch_op:
        batch_op.add_column(sa.Column("confinement", sa.String(length=16), server_default="none", nullable=False))


def downgrade() -> None:
    with op.batch_alter_table("lab_workers", schema=None) as batch_op:
        batch_op.drop_column("confinement")
